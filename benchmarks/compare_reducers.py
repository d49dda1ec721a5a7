"""Every reducer on the same data and the same coordinates: accuracy, training cost, behaviour
beyond the range, step cost and energy drift.

    python benchmarks/compare_reducers.py [NAMES...] [--reducers autoencoder,node,local-pca]
                                          [--mode autoencoder|known] [--reuse PATTERN] [--out DIR]

Per mechanism: the autoencoder is trained on the `train` run with `mc2fmu train` defaults (or
taken from `--reuse`, e.g. 'out/bench/{name}-known-w1', when that directory exists: its
training time is the one it recorded); `node` and `local-pca` are trained on the same run
with `--from` that model, so all three run on the same minimal coordinates and decoder and
only their dynamics differ (their "train s" is their own fit, the coordinates' training
excluded).  Each model is rolled out on all four runs (`mc2fmu simulate`'s rollout) and the
table gives position NRMSE (%) on train / low / shape, the `high` run's envelope flag and its
first 10 % error time, the native FMU's cost per step in the plain-C host (every reducer's
models export natively; a reducer without a native FMU would get its numpy step cost) and the energy
drift of a free run: zero input from the `train` run's initial state for the run's length,
the natural-coordinate energy ``xd^T M xd / 2 - f_g^T x + springs`` (``xd`` by centred
differences of the rolled-out ``x``), its largest change over the largest kinetic energy of
the run (only where the mechanism has no damper; "damped" otherwise).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, KNOWN, UNKNOWN_FORCES, ensure_runs, evaluate, native_cost  # noqa: E402
from examples.reference import MECHANISMS  # noqa: E402
from mc2fmu.data.dataset import load_training_data  # noqa: E402
from mc2fmu.mechanics.natural import finite_difference_velocity  # noqa: E402
from mc2fmu.capabilities import KINDS  # noqa: E402
from mc2fmu.pipeline import train as fit  # noqa: E402
from mc2fmu.models.artifact import load_artifact  # noqa: E402
from mc2fmu.models.simulate import trajectory  # noqa: E402
from mc2fmu.reducers.autoencoder.config import TrainConfig  # noqa: E402
from mc2fmu.reducers.local_pca.config import LocalPcaConfig  # noqa: E402
from mc2fmu.reducers.node.config import NodeReducerConfig  # noqa: E402

REDUCERS = ("autoencoder", "node", "local-pca")


#: a free run whose largest kinetic energy is below this fraction of the data's has not moved
AT_REST = 1e-6


def energy_drift(art, ds) -> float | None:
    """Largest change of the NC energy over the largest kinetic energy in a free run (None:
    the mechanism has dampers; NaN: nothing moves, its largest kinetic energy below
    :data:`AT_REST` of the data's: a start at an equilibrium, where the ratio would be rounding
    over rounding, e.g. the four-bar's 4e-15 J against the data's 0.09 J)."""
    springs = ds.forces.springs
    if springs is not None and len(springs) and np.any(springs.c != 0.0):
        return None
    q0, qd0 = art.initial_state_of(ds.x)
    n_t = len(ds.run(0).t)
    out = trajectory(art.model, q0, qd0, np.zeros((n_t, art.n_u)))
    x = out["x"]
    if not np.isfinite(x).all():
        return float("inf")
    xd = finite_difference_velocity(x, art.dt)
    kin = 0.5 * np.einsum("ti,ij,tj->t", xd, ds.M, xd)
    pot = -x @ ds.forces.f_g + (springs.energy(x) if springs is not None and len(springs) else 0.0)
    e = (kin + pot)[2:-2]
    scale = kin.max()
    data_kin = 0.5 * np.einsum("ti,ij,tj->t", ds.xd, ds.M, ds.xd).max()
    return float("nan") if scale <= AT_REST * data_kin else float(np.abs(e - e[0]).max() / scale)


def step_cost_numpy(art, ds, steps: int = 2000) -> float:
    """us per step of the numpy state-space model (advance alone)."""
    s = art.model.start(*art.initial_state_of(ds.x), ds.u[0])
    t0 = time.perf_counter()
    for k in range(steps):
        s = art.model.advance(s, ds.u[k])
    return 1e6 * (time.perf_counter() - t0) / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--reducers", default=",".join(REDUCERS))
    ap.add_argument("--mode", default="autoencoder", choices=("autoencoder", "known"),
                    help="learnt (default) or the suite's known coordinates")
    ap.add_argument("--reuse", default="", metavar="PATTERN",
                    help="an existing autoencoder model directory per mechanism, '{name}' replaced, e.g. "
                         "'out/bench/{name}-known-w1'; trained when it does not exist")
    ap.add_argument("--out", default=str(ROOT / "out" / "compare"))
    ap.add_argument("--no-cost", action="store_true", help="skip the native FMU's cost per step")
    args = ap.parse_args(argv)
    reducers = [r for r in args.reducers.split(",") if r]
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        mech, train_run = folder / "mechanism.toml", folder / "runs" / "train.csv.gz"
        ds = load_training_data(mech, [train_run])
        coords = KNOWN[name] if args.mode == "known" else ()
        chart = Path(args.reuse.format(name=name)) if args.reuse else None
        if chart is None or not (chart / "model.json").exists():
            chart = Path(args.out) / f"{name}-{args.mode}"
            fit(mech, [train_run], TrainConfig(dof=DOF[name], coords=coords), chart)
        for reducer in reducers:
            if reducer == "autoencoder":
                model_dir = chart
                art = load_artifact(chart)
                train_s = art.training["metrics"]["train_seconds"]
            else:
                model_dir = Path(args.out) / f"{name}-{args.mode}-{reducer}"
                cfg = (NodeReducerConfig if reducer == "node" else LocalPcaConfig)(dof=DOF[name], from_model=str(chart))
                t0 = time.perf_counter()
                art = fit(mech, [train_run], cfg, model_dir, reducer=reducer)
                train_s = time.perf_counter() - t0
            res = evaluate(model_dir, folder)
            if KINDS[reducer].pairs("native") and not args.no_cost:
                cost = f"{native_cost(model_dir, folder, Path(args.out) / 'cost' / model_dir.name):.2f} (C)"
            else:
                cost = f"{step_cost_numpy(art, ds):.0f} (numpy)"
            drift = energy_drift(art, ds)
            rows.append((name, reducer, train_s, res, cost, drift))
            print(f"{name} {reducer}: {train_s:.0f} s; " + ", ".join(f"{e} {100 * r['nrmse']:.3f} %"
                                                                    for e, r in res.items()), flush=True)
    print()
    print(f"coordinates: {args.mode}; train s: the reducer's own fit (node, local-pca: on the autoencoder's "
          "coordinates, whose training is not counted); step cost: us per 1 ms step")
    print("| mechanism | reducer | train s | train % | low % | shape % | high: flag s | high: error > 10 % at s "
          "| step cost us | free-run energy drift |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, reducer, train_s, res, cost, drift in rows:
        def pct(e):
            v = res[e]["nrmse"]
            return "diverges" if not np.isfinite(v) else f"{100 * v:.3f}"
        hi = res["high"]
        flag = "-" if hi["flag"] is None else f"{hi['flag']:.3f}"
        err10 = "-" if hi["err10"] is None else f"{hi['err10']:.3f}"
        d = ("damped" if drift is None else "at rest" if np.isnan(drift) else "diverges" if not np.isfinite(drift)
             else f"{drift:.1e}")
        print(f"| {name} | {reducer} | {train_s:.0f} | {pct('train')} | {pct('low')} | {pct('shape')} | {flag} | "
              f"{err10} | {cost} | {d} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
