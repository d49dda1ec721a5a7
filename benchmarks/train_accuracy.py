"""Training time and accuracy of the reduced models on every bundled mechanism, both modes.

    python benchmarks/train_accuracy.py [NAMES...] [--modes autoencoder,known] [--dyn-weight W]
                                        [--loss sim|appendix] [--rollout K] [--rollout-weight W]
                                        [--warmup rec|none]

For each mechanism: train on the `train` run (`mc2fmu train` defaults), roll the model out
on all four runs from their initial states, and print position NRMSE (%), max rotation
error (rad), when the envelope flag first rose and when the error first exceeded 10 %.
Reference runs are generated with Exudyn if missing (examples/<name>/runs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.reference import EXCITATIONS, MECHANISMS, write_example  # noqa: E402
from mc2fmu.reduced.artifact import load_artifact  # noqa: E402
from mc2fmu.mechanics.mechanism import load_mechanism  # noqa: E402
from mc2fmu.validation.metrics import error_over_time, position_nrmse, rotation_error  # noqa: E402
from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc  # noqa: E402
from mc2fmu.data.poses import read_run  # noqa: E402
from mc2fmu.reduced.simulate import simulate_run  # noqa: E402
from mc2fmu.pipeline import train as fit  # noqa: E402
from mc2fmu.reducers.autoencoder.config import TrainConfig  # noqa: E402

#: known minimal coordinates per mechanism (pose columns), the paper's section 4.2.2 mode
KNOWN = {
    "four_bar": ("crank.R11",),
    "four_bar_friction": ("crank.R11",),
    "slider_crank": ("slider.x",),
    "two_bar": ("short_bar.y", "long_bar.y"),
    "macpherson": ("spindle.z",),
    "macpherson_nl": ("spindle.z",),
    "five_bar": ("left_arm.R11", "right_arm.R11"),  # cos of the proximal angles: monotonic on (-pi, 0)
    "spatial_four_bar": ("crank.R11",),  # monotonic in the crank angle over train and high
    "three_rrr": ("platform.x", "platform.y", "platform.R21"),  # R21 = sin of the platform angle
}
#: mechanisms with forces their file does not describe by a law: benchmarks/unknown_forces.py
UNKNOWN_FORCES = ("four_bar_friction", "macpherson_nl")
DOF = {"four_bar": 1, "four_bar_friction": 1, "macpherson_nl": 1, "slider_crank": 1, "two_bar": 2, "macpherson": 1, "five_bar": 2, "spatial_four_bar": 1,
       "three_rrr": 3}


def ensure_runs(name: str) -> Path:
    folder = ROOT / "examples" / name
    if not all((folder / "runs" / f"{e}.csv.gz").exists() for e in EXCITATIONS):
        write_example(name, ROOT / "examples")
    return folder


def evaluate(model_dir: Path, folder: Path) -> dict[str, dict]:
    art = load_artifact(model_dir)
    mech = load_mechanism(folder / "mechanism.toml")
    out = {}
    for exc in EXCITATIONS:
        run = read_run(folder / "runs" / f"{exc}.csv.gz", mech)
        x = nc_from_poses(art.layout, run.origin, run.rotation)
        t0 = time.perf_counter()
        res = simulate_run(art, x, run.u)
        sim_s = time.perf_counter() - t0
        ok = np.isfinite(res["x"]).all(axis=1)
        origin = np.full_like(run.origin, np.nan)
        rot = np.tile(np.eye(3), (*run.origin.shape[:2], 1, 1))
        origin[ok], rot[ok] = poses_from_nc(art.layout, res["x"][ok])
        err = error_over_time(np.where(ok[:, None, None], origin, np.inf), run.origin)
        over = np.flatnonzero(~(err <= 0.10))
        flag = art.envelope.first_exit(res["envelope"])
        out[exc] = {
            "nrmse": position_nrmse(origin, run.origin),
            "rot": float(rotation_error(rot[ok], run.rotation[ok]).max()) if ok.all() else float("inf"),
            "err10": float(run.t[over[0]]) if over.size else None,
            "flag": None if flag is None else float(run.t[flag]),
            "sim_s": sim_s,
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--modes", default="known,autoencoder")
    ap.add_argument("--dyn-weight", type=float, default=1.0)
    ap.add_argument("--loss", default="sim", help="sim (default) or appendix (mc2fmu train --loss)")
    ap.add_argument("--rollout", type=int, default=0, metavar="K", help="rollout steps in the loss (mc2fmu train --rollout)")
    ap.add_argument("--rollout-weight", type=float, default=1.0)
    ap.add_argument("--warmup", default="rec", help="rec (default) or none (mc2fmu train --warmup)")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench"))
    args = ap.parse_args(argv)
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        for mode in args.modes.split(","):
            coords = KNOWN[name] if mode == "known" else ()
            cfg = TrainConfig(dof=DOF[name], coords=coords, dyn_weight=args.dyn_weight, loss=args.loss,
                              rollout_steps=args.rollout, rollout_weight=args.rollout_weight, warmup=args.warmup)
            # the defaults' models are <name>-<mode>-w1, which fmu_accuracy.py and the tests read
            variant = "" if (args.loss, args.rollout, args.rollout_weight, args.warmup) == ("sim", 0, 1.0, "rec") else \
                f"-{args.loss}-k{args.rollout}-rw{args.rollout_weight:g}-{args.warmup}"
            model_dir = Path(args.out) / f"{name}-{mode}-w{args.dyn_weight:g}{variant}"
            t0 = time.perf_counter()
            art = fit(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], cfg, model_dir)
            train_s = time.perf_counter() - t0
            res = evaluate(model_dir, folder)
            rows.append((name, mode, train_s, art, res))
            print(f"{name} {mode}: trained in {train_s:.1f} s; " + ", ".join(
                f"{e} {100 * r['nrmse']:.3f} %" for e, r in res.items()), flush=True)
    print()
    print("train s: the optimisation alone; fit s: `mc2fmu train` as a whole (data, training, ONNX graphs, writing)")
    print("| mechanism | mode | loss | rollout K | train s | fit s | epochs (Adam+L-BFGS) | run | NRMSE % | max rot err rad | envelope flag s | error > 10 % at s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, mode, train_s, art, res in rows:
        c = art.training["config"]
        opt_s = art.training["metrics"]["train_seconds"]
        for exc, r in res.items():
            flag = "-" if r["flag"] is None else f"{r['flag']:.3f}"
            err10 = "-" if r["err10"] is None else f"{r['err10']:.3f}"
            print(f"| {name} | {mode} | {c['loss']} | {c['rollout_steps']} | {opt_s:.0f} | {train_s:.0f} | "
                  f"{c['adam_epochs']}+{c['lbfgs_iters']} | {exc} | {100 * r['nrmse']:.3f} | {r['rot']:.2e} | {flag} | {err10} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
