"""The local-PCA piecewise-linear ROM (seed 002) on the bundled suite.

    python benchmarks/local_pca.py [NAMES...] [--clusters 10,20,40] [--modes-extra 0]

For each mechanism and cluster count: fit on the `train` run (k-means++ clusters of the
natural coordinates, a PCA basis of DOF (+ --modes-extra) modes per cluster, local mass,
stiffness and damping), roll out every run from its first sample's state with Algorithm 1
(numpy), and print position NRMSE (%) over the full 10 s as `benchmarks/train_accuracy.py`
computes it, the fit time, the rollout's cost per step (numpy, not an FMU) and the number of
cluster switches on the `train` run.  Reference runs are generated with Exudyn if missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, UNKNOWN_FORCES, ensure_runs  # noqa: E402
from examples.reference import EXCITATIONS, MECHANISMS  # noqa: E402
from mc2fmu.data.dataset import load_training_data  # noqa: E402
from mc2fmu.mechanics.natural import poses_from_nc  # noqa: E402
from mc2fmu.reducers.local_pca.fit import fit_local_linear  # noqa: E402
from mc2fmu.validation.metrics import position_nrmse  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--clusters", default="10,20,40", help="cluster counts to compare (comma list)")
    ap.add_argument("--modes-extra", type=int, default=0, help="modes per cluster beyond the DOF")
    args = ap.parse_args(argv)
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        mech = folder / "mechanism.toml"
        data = {e: load_training_data(mech, [folder / "runs" / f"{e}.csv.gz"]) for e in EXCITATIONS}
        train = data["train"]
        for k in (int(c) for c in args.clusters.split(",")):
            t0 = time.perf_counter()
            rom = fit_local_linear(train.x, train.xd, train.M, train.forces, float(train.dt[0]), clusters=k,
                                   modes=DOF[name] + args.modes_extra)
            fit_s = time.perf_counter() - t0
            res, switches, step_us = {}, 0, float("nan")
            for exc, ds in data.items():
                rom.switches = 0
                t1 = time.perf_counter()
                out = rom.rollout(ds.x[0], ds.xd[0], ds.u)
                if exc == "train":
                    step_us = 1e6 * (time.perf_counter() - t1) / (len(ds.x) - 1)
                    switches = rom.switches
                ok = np.isfinite(out["x"]).all(axis=1)
                if not ok.all():
                    res[exc] = float("inf")
                    continue
                origin = poses_from_nc(ds.layout, out["x"])[0]
                res[exc] = position_nrmse(origin, poses_from_nc(ds.layout, ds.x)[0])
            rows.append((name, k, DOF[name] + args.modes_extra, fit_s, step_us, switches, res))
            print(f"{name} k={k}: fit {fit_s:.1f} s; " + ", ".join(f"{e} {100 * v:.3f} %" for e, v in res.items()),
                  flush=True)
    print()
    print("| mechanism | clusters | modes | fit s | numpy us/step | switches (train) | "
          + " | ".join(f"{e} %" for e in EXCITATIONS) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(EXCITATIONS))
    for name, k, r, fit_s, step_us, switches, res in rows:
        cells = " | ".join("diverged" if not np.isfinite(v) else f"{100 * v:.3f}" for v in res.values())
        print(f"| {name} | {k} | {r} | {fit_s:.1f} | {step_us:.0f} | {switches} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
