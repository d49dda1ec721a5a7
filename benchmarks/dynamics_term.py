"""The paper's Fig. 14 effect: the same network trained on L_rec alone reconstructs well but
simulates badly; with the dynamics term it simulates well.

    python benchmarks/dynamics_term.py [NAMES...]     (default: two_bar four_bar)

For each mechanism (known-coordinate mode, as in the paper's two-bar example) trains twice
with identical settings and seed, --dyn-weight 0 and 1, and prints the kinematic
reconstruction error of the training run (NRMSE of h_d(h_e(x)) against x, "KC" in the
paper) and the simulation NRMSE of each run ("AC").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from train_accuracy import DOF, KNOWN, ensure_runs, evaluate  # noqa: E402

from mc2fmu.models.artifact import load_artifact  # noqa: E402
from mc2fmu.mechanics.mechanism import load_mechanism  # noqa: E402
from mc2fmu.validation.metrics import position_nrmse  # noqa: E402
from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc  # noqa: E402
from mc2fmu.data.poses import read_run  # noqa: E402
from mc2fmu.pipeline import train as fit  # noqa: E402
from mc2fmu.reducers.autoencoder.config import TrainConfig  # noqa: E402


def reconstruction_nrmse(model_dir: Path, folder: Path) -> float:
    art = load_artifact(model_dir)
    run = read_run(folder / "runs" / "train.csv.gz", load_mechanism(folder / "mechanism.toml"))
    x = nc_from_poses(art.layout, run.origin, run.rotation)
    origin, _ = poses_from_nc(art.layout, art.decode(art.model.encode(x)))
    return position_nrmse(origin, run.origin)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=["two_bar", "four_bar"])
    ap.add_argument("--out", default=str(ROOT / "out" / "bench"))
    args = ap.parse_args(argv)
    print("| mechanism | loss | train s | KC reconstruction NRMSE % | AC train % | AC low % | AC shape % |")
    print("|---|---|---|---|---|---|---|")
    for name in args.names:
        folder = ensure_runs(name)
        for w, label in ((0.0, "L_rec only"), (1.0, "L_rec + L_dyn")):
            cfg = TrainConfig(dof=DOF[name], coords=KNOWN[name], dyn_weight=w)
            md = Path(args.out) / f"{name}-fig14-w{w:g}"
            t0 = time.perf_counter()
            fit(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], cfg, md)
            ts = time.perf_counter() - t0
            kc = reconstruction_nrmse(md, folder)
            res = evaluate(md, folder)
            fmt = lambda v: f"{100 * v:.3f}" if np.isfinite(v) else "diverged"  # noqa: E731
            print(f"| {name} | {label} | {ts:.0f} | {fmt(kc)} | {fmt(res['train']['nrmse'])} | "
                  f"{fmt(res['low']['nrmse'])} | {fmt(res['shape']['nrmse'])} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
