"""Cost of the exported FMU per step under fmpy, against the full Exudyn model.

    python benchmarks/fmu_cost.py [NAMES...] [--models DIR] [--run low]

For each mechanism: export the trained autoencoder model (`DIR/<name>-autoencoder-w1`, as
written by benchmarks/train_accuracy.py; trained here with the defaults if missing) with the
python backend, simulate the held-out run with fmpy in a fresh process at the run's 1 ms
output step (`mc2fmu validate`'s path: fmpy's input interpolation, recording), and time
it.  The full model is the Exudyn reference simulation of the same run at the same 1 ms
output step, timed inside Exudyn's solver (the setup is not counted), with the solver step
the reference data uses (0.1 ms) and with a 1 ms solver step.  Prints a table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, ensure_runs  # noqa: E402
from examples.reference import MECHANISMS, simulate  # noqa: E402
from mc2fmu.export import export_fmu  # noqa: E402
from mc2fmu.mechanism import load_mechanism  # noqa: E402
from mc2fmu.train import TrainConfig, fit  # noqa: E402
from mc2fmu.validate import FmuInfo, validate_run  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=MECHANISMS)
    ap.add_argument("--models", default=str(ROOT / "out" / "bench"), help="folder of trained models")
    ap.add_argument("--run", default="low", help="excitation to simulate (default low)")
    args = ap.parse_args(argv)
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        model = Path(args.models) / f"{name}-autoencoder-w1"
        if not (model / "model.json").exists():
            print(f"training {name} (autoencoder, defaults) -> {model}", file=sys.stderr)
            fit(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], TrainConfig(dof=DOF[name]), model)
        with tempfile.TemporaryDirectory() as tmp:
            fmu = Path(tmp) / f"{name}.fmu"
            export_fmu(model, fmu)
            res = validate_run(FmuInfo(fmu), load_mechanism(folder / "mechanism.toml"),
                               folder / "runs" / f"{args.run}.csv.gz")["summary"]
        steps = res["samples"] - 1
        fine = simulate(name, args.run, step=1e-4)["info"]["wall_time"]
        coarse = simulate(name, args.run, step=1e-3)["info"]["wall_time"]
        fmu_us = 1e6 * res["wall_time"] / steps
        rows.append((name, steps, fmu_us, res["wall_time"], fine, coarse, res["position_nrmse"]))
    print(f"\n{'mechanism':<14}{'steps':>7}{'FMU us/step':>13}{'FMU s':>8}{'Exudyn s (0.1 ms)':>19}"
          f"{'ratio':>7}{'Exudyn s (1 ms)':>17}{'ratio':>7}{'NRMSE':>9}")
    for name, steps, us, wall, fine, coarse, nrmse in rows:
        print(f"{name:<14}{steps:>7}{us:>13.0f}{wall:>8.2f}{fine:>19.2f}{fine / wall:>7.2f}{coarse:>17.2f}"
              f"{coarse / wall:>7.2f}{100 * nrmse:>8.3f}%")
    print("\nratio = Exudyn wall time / FMU wall time (> 1: the FMU is faster); FMU under fmpy, 1 ms "
          "communication step, fresh process, python backend (pythonfmu + onnxruntime).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
