"""Training time and accuracy of the reduced models on every bundled mechanism, both modes.

    python benchmarks/train_accuracy.py [NAMES...] [--modes autoencoder,known] [--dyn-weight W]
                                        [--loss sim|appendix] [--rollout K] [--rollout-weight W]
                                        [--warmup rec|none] [--hidden W,W] [--adam-epochs N] [--lbfgs-iters N]
                                        [--lbfgs-tol TOL] [--lbfgs-floor LOSS] [--lbfgs-subset N] [--gauge-weight W] [--samples N]
                                        [--no-cost] [--plots DIR] [--out DIR]

For each mechanism: train on the `train` run (`mc2fmu train` defaults), roll the model out
on all four runs from their initial states, and print position NRMSE (%), max rotation
error (rad), when the envelope flag first rose and when the error first exceeded 10 %, and the
native FMU's cost per 1 ms step in the plain-C host (tests/c_host: FMI 2 co-simulation, set
the inputs, doStep, get q; thread CPU time, best of 5 runs of the `low` run; --no-cost skips
it).  --plots DIR writes one plot per mechanism: the largest body-origin error over time
relative to the run's rms variation, every run, both modes (default out/bench/plots).
Reference runs are generated with Exudyn if missing (examples/<name>/runs).

With the defaults it exits 1 when a model misses a target: position NRMSE at most 0.3 % on the
training run and 0.5 % on `low` and `shape`, the envelope flag ahead of a 10 % error on `high`,
and issue 42's: held-out at most 0.1 %, the whole `train` command at most 30 s (1 DOF, up to 6
bodies) or 60 s (2-3 DOF).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.reference import EXCITATIONS, MECHANISMS, write_example  # noqa: E402
from mc2fmu.models.artifact import load_artifact  # noqa: E402
from mc2fmu.mechanics.mechanism import load_mechanism  # noqa: E402
from mc2fmu.validation.metrics import error_over_time, position_nrmse, rotation_error  # noqa: E402
from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc  # noqa: E402
from mc2fmu.data.poses import read_run  # noqa: E402
from mc2fmu.models.simulate import simulate_run  # noqa: E402
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
    # a free-floating body's pose: its origin and the rotation's small-angle entries
    "hexapod": ("platform.x", "platform.y", "platform.z", "platform.R32", "platform.R13", "platform.R21"),
    # the body's height and roll (a small-angle entry), each wheel's height
    "half_car": ("chassis.z", "chassis.R32", "upright_left.z", "upright_right.z"),
}
#: mechanisms with forces their file does not describe by a law: benchmarks/unknown_forces.py
UNKNOWN_FORCES = ("four_bar_friction", "macpherson_nl")
DOF = {"four_bar": 1, "four_bar_friction": 1, "macpherson_nl": 1, "slider_crank": 1, "two_bar": 2, "macpherson": 1, "five_bar": 2, "spatial_four_bar": 1,
       "three_rrr": 3, "hexapod": 6, "half_car": 4}


def ensure_runs(name: str) -> Path:
    folder = ROOT / "examples" / name
    if not all((folder / "runs" / f"{e}.csv.gz").exists() for e in EXCITATIONS):
        write_example(name, ROOT / "examples")
    return folder


def native_cost(model_dir: Path, folder: Path, work: Path) -> float:
    """us per 1 ms step of the native FMI 2 co-simulation FMU in the plain-C host (q only)."""
    import json

    from mc2fmu.fmu.export import export_fmu
    from tests.c_host.run import build_host, extract, run_host

    work.mkdir(parents=True, exist_ok=True)
    mech = load_mechanism(folder / "mechanism.toml")
    run = read_run(folder / "runs" / "low.csv.gz", mech)
    fmu = work / "native.fmu"
    export_fmu(model_dir, fmu, "native")
    lib, guid, md = extract(fmu, work / "fmu")
    init = json.loads((model_dir / "model.json").read_text())["initial_state"]
    start = ({f"q_start[{i + 1}]": v for i, v in enumerate(init["q"])}
             | {f"qd_start[{i + 1}]": v for i, v in enumerate(init["qd"])})
    n = len(run.t) - 1
    text = run_host(build_host(work), lib, guid, md, mode="bench", repeats=5, start=start, inputs=list(mech.input_names),
                    rows=run.u[:n], n_steps=n, work=work, outputs=["q[1]"])[1]
    return float(text.split("us_per_step")[1].split()[0])


def plot_errors(name: str, results: dict[str, dict], path: Path) -> None:
    """The largest body-origin error over time / the run's rms variation, per run and mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(EXCITATIONS), figsize=(4 * len(EXCITATIONS), 3.2), sharey=True)
    for ax, exc in zip(axes, EXCITATIONS):
        for mode, res in results.items():
            r = res[exc]
            ax.semilogy(r["t"], np.maximum(r["err"], 1e-7), label=mode, lw=0.8)
            if r["flag"] is not None:
                ax.axvline(r["flag"], color="0.5", ls=":", lw=0.8)
        ax.axhline(0.10, color="r", ls="--", lw=0.8)
        ax.set_title(f"{name}: {exc}")
        ax.set_xlabel("t s")
        ax.set_ylim(1e-6, 10)
    axes[0].set_ylabel("max body-origin error / rms variation")
    axes[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def train_command(mechanism: Path, runs: list[Path], dof: int, coords: tuple[str, ...], out: Path) -> float:
    """``mc2fmu train`` with the defaults as a user runs it, in a process of its own (the
    interpreter's start and the imports included); returns its wall seconds."""
    cmd = [sys.executable, "-m", "mc2fmu", "train", str(mechanism), *map(str, runs), "--dof", str(dof),
           *(["--coords", ",".join(coords)] if coords else []), "-o", str(out), "-q"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds


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
            "t": run.t,
            "err": np.where(np.isfinite(err), err, 10.0),
        }
    return out


#: the options handed to TrainConfig as they are, when given (in this order: the model directory's name)
PASSED_ON = ("adam_epochs", "lbfgs_iters", "lbfgs_tol", "lbfgs_floor", "lbfgs_subset", "gauge_weight", "curvature_weight", "samples")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--modes", default="known,autoencoder")
    ap.add_argument("--dyn-weight", type=float, default=1.0)
    ap.add_argument("--loss", default="sim", help="sim (default) or appendix (mc2fmu train --loss)")
    ap.add_argument("--rollout", type=int, default=0, metavar="K", help="rollout steps in the loss (mc2fmu train --rollout)")
    ap.add_argument("--rollout-weight", type=float, default=1.0)
    ap.add_argument("--warmup", default="rec", help="rec (default) or none (mc2fmu train --warmup)")
    ap.add_argument("--hidden", default="", metavar="W,W", help="decoder hidden widths (mc2fmu train --hidden)")
    ap.add_argument("--adam-epochs", type=int, default=None, metavar="N", help="mc2fmu train --adam-epochs")
    ap.add_argument("--lbfgs-iters", type=int, default=None, metavar="N", help="mc2fmu train --lbfgs-iters")
    ap.add_argument("--lbfgs-tol", type=float, default=None, metavar="TOL",
                    help="mc2fmu train --lbfgs-tol (0, with --lbfgs-floor 0: all --lbfgs-iters, no early stop)")
    ap.add_argument("--lbfgs-floor", type=float, default=None, metavar="LOSS",
                    help="mc2fmu train --lbfgs-floor (0: off)")
    ap.add_argument("--lbfgs-subset", type=int, default=None, metavar="N",
                    help="mc2fmu train --lbfgs-subset (1: every triplet from the start)")
    ap.add_argument("--gauge-weight", type=float, default=None, metavar="W", help="mc2fmu train --gauge-weight")
    ap.add_argument("--curvature-weight", type=float, default=None, metavar="W", help="mc2fmu train --curvature-weight")
    ap.add_argument("--samples", type=int, default=None, metavar="N", help="mc2fmu train --samples")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench"))
    ap.add_argument("--no-cost", action="store_true", help="skip the native FMU's cost per step")
    ap.add_argument("--plots", default=None, metavar="DIR", help="error-over-time plots (default OUT/plots)")
    args = ap.parse_args(argv)
    plots = Path(args.plots or Path(args.out) / "plots")
    defaults = (args.loss, args.rollout, args.rollout_weight, args.warmup, args.dyn_weight, args.hidden) == \
        ("sim", 0, 1.0, "rec", 1.0, "") and all(getattr(args, k) is None for k in PASSED_ON)
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        per_mode = {}
        for mode in args.modes.split(","):
            coords = KNOWN[name] if mode == "known" else ()
            extra = {}
            if args.hidden:
                extra["hidden"] = tuple(int(w) for w in args.hidden.split(","))
            extra.update((k, getattr(args, k)) for k in PASSED_ON if getattr(args, k) is not None)
            cfg = TrainConfig(dof=DOF[name], coords=coords, dyn_weight=args.dyn_weight, loss=args.loss,
                              rollout_steps=args.rollout, rollout_weight=args.rollout_weight, warmup=args.warmup, **extra)
            # the defaults' models are <name>-<mode>-w1, which the later benchmarks read
            variant = "" if (args.loss, args.rollout, args.rollout_weight, args.warmup) == ("sim", 0, 1.0, "rec") else \
                f"-{args.loss}-k{args.rollout}-rw{args.rollout_weight:g}-{args.warmup}"
            variant += "".join(f"-{k}{'x'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in extra.items())
            model_dir = Path(args.out) / f"{name}-{mode}-w{args.dyn_weight:g}{variant}"
            runs = [folder / "runs" / "train.csv.gz"]
            if not defaults:  # other options than the defaults: pipeline.train in this process
                t0 = time.perf_counter()
                art = fit(folder / "mechanism.toml", runs, cfg, model_dir)
                train_s = time.perf_counter() - t0
            else:  # the defaults: the command itself, timed whole (issue 42's training times)
                train_s = train_command(folder / "mechanism.toml", runs, DOF[name], coords, model_dir)
                art = load_artifact(model_dir)
            res = evaluate(model_dir, folder)
            cost = float("nan") if args.no_cost else native_cost(model_dir, folder, model_dir.parent / "cost" / model_dir.name)
            per_mode[mode] = res
            rows.append((name, mode, train_s, art, res, cost))
            print(f"{name} {mode}: trained in {train_s:.1f} s; " + ", ".join(
                f"{e} {100 * r['nrmse']:.3f} %" for e, r in res.items()) + f"; native {cost:.2f} us/step", flush=True)
        plot_errors(name, per_mode, plots / f"{name}.png")
    print()
    print("train s: the optimisation alone; fit s: `mc2fmu train` as a whole (with the defaults the command in a "
          "process of its own: start, imports, data, training, ONNX graphs, writing; else mc2fmu.pipeline.train)")
    print("native us/step: the native FMU in the plain-C host, 1 ms steps of the low run, q only")
    print("| mechanism | mode | loss | rollout K | decoder | train s | fit s | epochs (Adam+L-BFGS) | native us/step | run "
          "| NRMSE % | max rot err rad | envelope flag s | error > 10 % at s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, mode, train_s, art, res, cost in rows:
        c = art.training["config"]
        opt_s = art.training["metrics"]["train_seconds"]
        for exc, r in res.items():
            flag = "-" if r["flag"] is None else f"{r['flag']:.3f}"
            err10 = "-" if r["err10"] is None else f"{r['err10']:.3f}"
            hidden = "x".join(map(str, art.training["config"].get("hidden") or ())) or "default"
            print(f"| {name} | {mode} | {c['loss']} | {c['rollout_steps']} | {hidden} | {opt_s:.0f} | {train_s:.0f} | "
                  f"{c['adam_epochs']}+{art.training['metrics'].get('lbfgs_iterations', c['lbfgs_iters'])} | {cost:.2f} | {exc} | {100 * r['nrmse']:.3f} | {r['rot']:.2e} | {flag} | {err10} |")
    problems = [f"{name} {mode}: {p}" for name, mode, fit_s, art, res, _ in rows
                for p in missed_targets(res) + missed_issue42(res, fit_s, art.dof, len(art.layout.bodies))]
    for problem in problems:
        print(f"train_accuracy: target missed: {problem}", file=sys.stderr)
    return 1 if problems and defaults else 0


#: the accuracy targets asserted with the defaults (docs/benchmarks.md "Targets"): position NRMSE on
#: the training run and on the held-out in-range runs, and the envelope flag ahead of a 10 % error
TRAIN_TARGET, HELD_OUT_TARGET = 0.003, 0.005


#: issue 42's targets with the defaults, on every bundled mechanism: held-out in-range position
#: NRMSE at most 0.1 %, and the whole `train` command at most 30 s for 1 DOF with up to 6 bodies,
#: 60 s for 2-3 DOF (one run here; the issue counts the slowest of three)
ISSUE42_HELD_OUT = 0.001
ISSUE42_SECONDS = {1: 30.0, 2: 60.0, 3: 60.0}
ISSUE42_MAX_BODIES_1DOF = 6


def missed_issue42(res: dict, fit_s: float, dof: int, bodies: int) -> list[str]:
    """What one model misses of issue 42's targets (``fit_s``: the whole command's seconds)."""
    out = [f"{exc} {100 * res[exc]['nrmse']:.3f} % > {100 * ISSUE42_HELD_OUT:g} % (issue 42)"
           for exc in ("low", "shape") if not res[exc]["nrmse"] <= ISSUE42_HELD_OUT]
    limit = ISSUE42_SECONDS.get(dof) if dof > 1 or bodies <= ISSUE42_MAX_BODIES_1DOF else None
    if limit is not None and fit_s > limit:
        out.append(f"the train command took {fit_s:.0f} s > {limit:g} s for {dof} DOF (issue 42)")
    return out


def missed_targets(res: dict) -> list[str]:
    """What one model misses of the accuracy targets (``res``: :func:`evaluate`'s result)."""
    out = []
    if not res["train"]["nrmse"] <= TRAIN_TARGET:
        out.append(f"train {100 * res['train']['nrmse']:.3f} % > {100 * TRAIN_TARGET:g} %")
    for exc in ("low", "shape"):
        if not res[exc]["nrmse"] <= HELD_OUT_TARGET:
            out.append(f"{exc} {100 * res[exc]['nrmse']:.3f} % > {100 * HELD_OUT_TARGET:g} %")
    high = res.get("high")
    if high is not None and high["err10"] is not None and (high["flag"] is None or high["flag"] > high["err10"]):
        rose = "never rose" if high["flag"] is None else f"rose at {high['flag']:.3f} s"
        out.append(f"high: the error passed 10 % at {high['err10']:.3f} s, the envelope flag {rose}")
    return out


if __name__ == "__main__":
    sys.exit(main())
