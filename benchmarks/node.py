"""The MBD-NODE baseline (seed 003) against the autoencoder, on the autoencoder's own coordinates.

    python benchmarks/node.py MODEL_DIR... [--epochs 400] [--hidden 256,256]

For each autoencoder model directory (e.g. ``out/bench/four_bar-known-w1`` written by
``benchmarks/train_accuracy.py``): take its minimal coordinates of the mechanism's `train`
run (its encoder, or the known coordinates), fit the neural ODE ``qdd = f(q, qd, u)`` through
one RK4 step (the paper's settings, mini-batched; :mod:`mc2fmu.reducers.node.training`), roll
it out from each run's initial state and decode with the autoencoder's decoder, so both
models have the same outputs and only the dynamics differ.  Prints position NRMSE (%) of
both over the full runs, the NODE's fit time and its numpy cost per step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.reference import EXCITATIONS  # noqa: E402
from mc2fmu.data.poses import read_run  # noqa: E402
from mc2fmu.mechanics.mechanism import load_mechanism  # noqa: E402
from mc2fmu.mechanics.natural import finite_difference_velocity, nc_from_poses, poses_from_nc  # noqa: E402
from mc2fmu.models.artifact import load_artifact  # noqa: E402
from mc2fmu.models.simulate import simulate_run  # noqa: E402
from mc2fmu.reducers.base import int_list  # noqa: E402
from mc2fmu.reducers.node.training import NodeConfig, train_node  # noqa: E402
from mc2fmu.validation.metrics import position_nrmse  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--epochs", type=int, default=NodeConfig.epochs)
    ap.add_argument("--hidden", type=int_list, default=NodeConfig.hidden)
    ap.add_argument("--batch", type=int, default=NodeConfig.batch)
    args = ap.parse_args(argv)
    rows = []
    for model_dir in args.models:
        art = load_artifact(model_dir)
        folder = ROOT / "examples" / art.mechanism.name
        mech = load_mechanism(folder / "mechanism.toml")
        runs = {}
        for exc in EXCITATIONS:
            run = read_run(folder / "runs" / f"{exc}.csv.gz", mech)
            x = nc_from_poses(art.layout, run.origin, run.rotation)
            q = art.encode_series(x)
            runs[exc] = (run, x, q, finite_difference_velocity(q, art.dt))
        _, _, q, qd = runs["train"]
        t0 = time.perf_counter()
        cfg = NodeConfig(hidden=tuple(args.hidden), epochs=args.epochs, batch=args.batch)
        dyn, info = train_node([q], [qd], [runs["train"][0].u], art.dt, art.angles, cfg)
        fit_s = time.perf_counter() - t0
        res = {}
        for exc, (run, x, q, qd) in runs.items():
            q0, qd0 = art.initial_state_of(x)
            t1 = time.perf_counter()
            qn, _ = dyn.rollout(q0, qd0, run.u)
            step_us = 1e6 * (time.perf_counter() - t1) / (len(qn) - 1)
            ok = np.isfinite(qn).all(axis=1)
            node = position_nrmse(poses_from_nc(art.layout, art.decode(qn))[0], run.origin) if ok.all() else float("inf")
            ae = simulate_run(art, x, run.u)
            ae_err = position_nrmse(poses_from_nc(art.layout, ae["x"])[0], run.origin) \
                if np.isfinite(ae["x"]).all() else float("inf")
            res[exc] = (node, ae_err, step_us)
        rows.append((model_dir.name, fit_s, res))
        print(f"{model_dir.name}: NODE fit {fit_s:.0f} s; " + ", ".join(
            f"{e} NODE {100 * r[0]:.3f} % / autoencoder {100 * r[1]:.3f} %" for e, r in res.items()), flush=True)
    print()
    print("| model | NODE fit s | NODE numpy us/step | " + " | ".join(f"{e} % NODE / AE" for e in EXCITATIONS) + " |")
    print("|---|---|---|" + "---|" * len(EXCITATIONS))

    def pct(v):
        return "diverged" if not np.isfinite(v) else f"{100 * v:.3f}"

    for name, fit_s, res in rows:
        cells = " | ".join(f"{pct(r[0])} / {pct(r[1])}" for r in res.values())
        print(f"| {name} | {fit_s:.0f} | {res['train'][2]:.0f} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
