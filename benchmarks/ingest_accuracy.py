"""Natural coordinates against Exudyn on every bundled mechanism (the ingest acceptance figures).

    python benchmarks/ingest_accuracy.py [NAMES...] [--excitation train]

Per mechanism: kinetic energy of the dataset with the engine's exact velocities and with the
finite-difference velocities of the ingested 10 s export (max error / max engine KE), the
virtual-power error of gravity and of every input load (max error / max physical power), the
rigidity residual of the ingested coordinates, and the ingest wall time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.reference import MECHANISMS, write_run_file  # noqa: E402
from mc2fmu.data.dataset import ingest  # noqa: E402
from mc2fmu.mechanics.natural import kinetic_energy, nc_velocity  # noqa: E402
from tests.oracles import power_errors  # noqa: E402


def virtual_power_error(ds, run) -> float:
    errors = power_errors(ds.mechanism, ds.layout, run["rotation"], run["origin"], run["velocity_com"],
                          run["omega"], run["u"])
    return max(errors.values())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=MECHANISMS)
    ap.add_argument("--excitation", default="train")
    args = ap.parse_args(argv)
    print("| mechanism | bodies | n_n | KE err, exact velocities | KE err, FD velocities | virtual power err | rigidity m | ingest s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            run = write_run_file(name, args.excitation, tmp)
            path = Path(run["path"])
            t0 = time.perf_counter()
            ds = ingest(path.parent.parent / "mechanism.toml", [path])
            secs = time.perf_counter() - t0
            ke = run["kinetic_energy"]
            xd = nc_velocity(ds.layout, run["rotation"], run["velocity_com"], run["omega"])
            e_exact = np.max(np.abs(kinetic_energy(ds.M, xd) - ke)) / ke.max()
            e_fd = np.max(np.abs(kinetic_energy(ds.M, ds.xd) - ke)) / ke.max()
            print(f"| {name} | {len(ds.mechanism.bodies)} | {ds.layout.size} | {e_exact:.1e} | {e_fd:.1e} | "
                  f"{virtual_power_error(ds, run):.1e} | {ds.rigidity.max():.1e} | {secs:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
