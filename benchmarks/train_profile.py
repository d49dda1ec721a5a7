"""Where a training's time goes: iterations to the stopping rule, milliseconds per L-BFGS
iteration and the cost of one loss evaluation by piece, per mechanism, both modes.

    python benchmarks/train_profile.py [NAMES...] [--modes autoencoder,known] [--a02]
                                       [--lbfgs-iters N] [--repeats N]

For each mechanism and mode, a training with the defaults of `mc2fmu train --dof N` on the
`train` run (known coordinates as benchmarks/train_accuracy.py has them), timed from the inside:

* **run**: the training's seconds (the trainer alone: no ingest, no ONNX export), Adam's and
  L-BFGS's share, L-BFGS iterations to the stopping rule, ms per L-BFGS iteration and loss
  evaluations (closures) per iteration; an L-BFGS iteration's time split into its loss
  evaluations, the validation records (every 20 iterations: validation triplets, and the rest of
  the training triplets while L-BFGS fits a share) and the optimiser's own work (the rest: the
  two-loop recursion, the line search's bookkeeping);
* **one evaluation**: at the trained weights, on every training triplet, the median time of a
  loss evaluation with its gradient (forward and backward), and the pieces it is made of, each
  with its own backward pass: the encoder on the triplets, the decoder's values at the three
  samples, its Jacobian and second derivative along the velocity (the dynamics' terms at the
  middle sample), and each active loss term's marginal cost (the evaluation without it,
  subtracted).  The pieces overlap the terms (a term's marginal cost excludes what other terms
  share with it).

`--a02` adds the IFToMM A02 chain (examples/a02, simulated with Exudyn if missing; learnt
coordinates).  One job on the machine: the figures are wall-clock times.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loss_cost import median_ms  # noqa: E402
from benchmarks.train_accuracy import DOF, KNOWN, ensure_runs  # noqa: E402
from mc2fmu.data.dataset import load_training_data  # noqa: E402
from mc2fmu.parallel.executors import TRAIN_THREADS  # noqa: E402
from mc2fmu.reducers.autoencoder.config import TrainConfig  # noqa: E402
from mc2fmu.reducers.autoencoder.loss import Evaluation  # noqa: E402
from mc2fmu.reducers.autoencoder.trainer import Training  # noqa: E402

SUITE = ["four_bar", "slider_crank", "macpherson", "spatial_four_bar", "two_bar", "five_bar", "three_rrr"]


class Clock:
    """Seconds and calls per name."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
                self.calls[name] = self.calls.get(name, 0) + 1
        return timed


def profile_run(ds, cfg: TrainConfig) -> tuple[dict, Training]:
    """A training with its phases timed (see the module's docstring)."""
    clock = Clock()
    with torch.random.fork_rng(devices=[]):
        tr = Training(ds, cfg)
        # the L-BFGS phase's pieces: closures and records inside its steps
        tr.closure = clock.wrap("closure", tr.closure)
        record = tr.record
        tr.record = lambda stage, *a: clock.wrap(f"record_{stage}", record)(stage, *a)
        tr.adam_step = clock.wrap("adam", tr.adam_step)
        tr.lbfgs_step = clock.wrap("lbfgs", tr.lbfgs_step)
        t0 = time.perf_counter()
        result = tr.run()
        seconds = time.perf_counter() - t0
    iters = result.metrics["lbfgs_iterations"]
    lb = clock.seconds.get("lbfgs", 0.0)
    closure, rec = clock.seconds.get("closure", 0.0), clock.seconds.get("record_lbfgs", 0.0)
    per = lambda s: 1e3 * s / max(iters, 1)  # noqa: E731
    return {"seconds": seconds, "adam_s": clock.seconds.get("adam", 0.0), "lbfgs_s": lb, "iters": iters,
            "ms_iter": per(lb), "closures_iter": clock.calls.get("closure", 0) / max(iters, 1),
            "closure_ms_iter": per(closure), "record_ms_iter": per(rec), "optimiser_ms_iter": per(lb - closure - rec),
            "val": result.metrics["val_loss"]}, tr


def evaluation_pieces(tr: Training, repeats: int) -> dict:
    """One loss evaluation with its gradient on every training triplet, and its pieces."""
    loss_fn, W, model = tr.loss_fn, tr.train_set, tr.model
    params = [p for p in model.parameters() if p.requires_grad]

    def backward(value):
        for p in params:
            p.grad = None
        value.backward()

    out = {"evaluation": median_ms(lambda: backward(loss_fn(W)[0]), repeats)}
    with torch.no_grad():
        ev = Evaluation(loss_fn, W)
        q_prev, q, q_next = (t.detach() for t in ev.triplet)
    if q.requires_grad or any(t.requires_grad for t in Evaluation(loss_fn, W).triplet):  # learnt: a trained encoder
        out["encoder"] = median_ms(lambda: backward(sum(t.sum() for t in Evaluation(loss_fn, W).triplet)), repeats)
    triple = torch.cat([q_prev, q, q_next])
    out["decoder values"] = median_ms(lambda: backward(ev.decode(triple).sum()), repeats)
    if loss_fn.cfg.loss == "sim":
        v = model.step_map.training_velocity(q_prev, q, q_next, W.dt)

        def dynamics():
            terms, Hvv = model.terms_and_curvature(q, W.u[:, 1], v)
            backward(terms.J.sum() + Hvv.sum() + terms.Mm.sum())

        out["decoder J, H:vv (dynamics)"] = median_ms(dynamics, repeats)
    active = list(loss_fn.active_terms)
    try:
        for term in active:
            loss_fn.active_terms = [t for t in active if t is not term]
            without = median_ms(lambda: backward(loss_fn(W)[0]), repeats) if loss_fn.active_terms else 0.0
            out[f"term {term.label}"] = out["evaluation"] - without
    finally:
        loss_fn.active_terms = active
    return out


def cases(args) -> list[tuple[str, Path, int, tuple[str, ...]]]:
    out = []
    for name in args.names:
        folder = ensure_runs(name)
        for mode in args.modes.split(","):
            out.append((f"{name}", folder, DOF[name], KNOWN[name] if mode == "known" else ()))
    if args.a02:
        from benchmarks.a02 import ensure_data

        out.append(("a02", ensure_data(ROOT / "examples", 1e-3), 1, ()))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=SUITE)
    ap.add_argument("--modes", default="autoencoder,known")
    ap.add_argument("--a02", action="store_true", help="add the IFToMM A02 chain (learnt coordinate)")
    ap.add_argument("--lbfgs-iters", type=int, default=None, help="cap the L-BFGS iterations (default: the default)")
    ap.add_argument("--repeats", type=int, default=10, help="timed evaluations per piece (median; default 10)")
    args = ap.parse_args(argv)
    torch.set_num_threads(TRAIN_THREADS)  # as mc2fmu.pipeline.train runs torch
    rows, pieces = [], []
    for name, folder, dof, coords in cases(args):
        ds = load_training_data(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"])
        kw = {} if args.lbfgs_iters is None else {"lbfgs_iters": args.lbfgs_iters}
        cfg = TrainConfig(dof=dof, coords=coords, **kw)
        mode = "known" if coords else "learnt"
        print(f"{name} ({mode}): training", file=sys.stderr)
        run, tr = profile_run(ds, cfg)
        rows.append((name, mode, len(ds.layout.bodies), dof, tr.model.hull_dim, run))
        pieces.append((name, mode, evaluation_pieces(tr, args.repeats)))
    print("| mechanism | coordinates | bodies | DOF | hull r | train s | Adam s | L-BFGS s | L-BFGS iterations "
          "| ms / iteration | evaluations / iteration | evaluations ms | records ms | optimiser ms | validation loss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, mode, bodies, dof, r, s in rows:
        print(f"| {name} | {mode} | {bodies} | {dof} | {r} | {s['seconds']:.1f} | {s['adam_s']:.1f} | {s['lbfgs_s']:.1f} "
              f"| {s['iters']} | {s['ms_iter']:.1f} | {s['closures_iter']:.2f} | {s['closure_ms_iter']:.1f} "
              f"| {s['record_ms_iter']:.1f} | {s['optimiser_ms_iter']:.1f} | {s['val']:.2e} |")
    print()
    names = []
    for _, _, p in pieces:
        names += [k for k in p if k not in names]
    print("| mechanism | coordinates | " + " | ".join(f"{k} ms" for k in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for name, mode, p in pieces:
        print(f"| {name} | {mode} | " + " | ".join(f"{p[k]:.1f}" if k in p else "-" for k in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
