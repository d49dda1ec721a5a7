"""The cost of one evaluation of the training loss with its gradient (an L-BFGS closure), per mechanism.

    python benchmarks/loss_cost.py [NAMES...] [--repeats N] [--a02 DIR] [--compile]

For each mechanism: the autoencoder of `mc2fmu train --dof N` defaults, built on the `train`
run as training builds it (the default number of triplets, the hull decoder, untrained
weights: the cost does not depend on their values), then the loss and its backward pass timed: the median of
`--repeats` evaluations after three warm-up ones, in ms, and the forward pass alone without
gradients.  `--a02 DIR` adds the IFToMM A02 chain from a folder written by `python -m
examples.a02` (mechanism.toml, runs/train.csv.gz).  Reference runs of the suite are generated
with Exudyn if missing.  `--compile` also times the closure compiled by ``torch.compile``
(inductor): its first call, the compilation, in seconds, then its median like the others.  One
job on the machine: the figures are wall-clock times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, ensure_runs  # noqa: E402
from mc2fmu.data.dataset import load_training_data  # noqa: E402
from mc2fmu.reducers.autoencoder import loss as loss_mod, samples, trainer  # noqa: E402
from mc2fmu.reducers.autoencoder.config import TrainConfig  # noqa: E402


def default_loss(folder: Path, dof: int):
    """The autoencoder of `mc2fmu train --dof N` defaults on the folder's `train` run, built as
    training builds it (untrained weights): its dataset, model, loss function, training
    windows and trainable parameters."""
    ds = load_training_data(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"])
    cfg = TrainConfig(dof=dof)
    torch.manual_seed(cfg.seed)
    angles = samples.parse_angles(cfg.angles, ds, dof)
    W = samples.make_windows(ds, cfg.triplets, cfg.window)
    model = trainer.build_model(ds, cfg, angles)
    loss_fn = loss_mod.LossFunction(model, cfg, angles, loss_mod.loss_scales(cfg, model, ds, W), ds.layout)
    return ds, model, loss_fn, W, [p for p in model.parameters() if p.requires_grad]


def closure_cost(folder: Path, dof: int, repeats: int, compiled: bool = False) -> dict:
    ds, model, loss_fn, W, params = default_loss(folder, dof)

    def closure():
        for p in params:
            p.grad = None
        loss_fn(W)[0].backward()

    def compiled_closure(terms):
        for p in params:
            p.grad = None
        sum(loss_fn.weights[k] * v for k, v in terms().items()).backward()

    def forward():
        with torch.no_grad():
            loss_fn(W)

    out = {"bodies": len(ds.layout.bodies), "n_x": ds.layout.size, "hull": model.hull_dim, "params": sum(p.numel() for p in params)}
    for name, fn in (("closure", closure), ("forward", forward)):
        out[name] = median_ms(fn, repeats)
    if compiled:  # torch.compile (inductor) of the loss's terms, its backward through AOTAutograd
        terms = torch.compile(lambda: loss_fn.terms(W), dynamic=False)
        t0 = time.perf_counter()
        compiled_closure(terms)
        out["compile"] = time.perf_counter() - t0
        out["compiled"] = median_ms(lambda: compiled_closure(terms), repeats)
    return out


def median_ms(fn, repeats: int) -> float:
    """The median wall-clock milliseconds of ``repeats`` calls of ``fn`` after three warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=["four_bar", "slider_crank", "two_bar", "macpherson", "five_bar",
                                                   "spatial_four_bar", "three_rrr"])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--a02", default=None, metavar="DIR", help="a folder written by python -m examples.a02")
    ap.add_argument("--compile", action="store_true",
                    help="also time the closure compiled by torch.compile (its first call's seconds, then ms)")
    args = ap.parse_args()
    cases = [(n, ensure_runs(n), DOF[n]) for n in args.names]
    if args.a02:
        cases.append(("a02", Path(args.a02), 1))
    extra = " compile s | compiled closure ms |" if args.compile else ""
    print("| mechanism | bodies | NC coordinates | hull r | DOF | parameters | closure ms (loss + gradient) | forward ms |"
          + extra)
    print("|---|---|---|---|---|---|---|---|" + "---|---|" * bool(args.compile))
    for name, folder, dof in cases:
        r = closure_cost(folder, dof, args.repeats, args.compile)
        more = f" {r['compile']:.0f} | {r['compiled']:.1f} |" if args.compile else ""
        print(f"| {name} | {r['bodies']} | {r['n_x']} | {r['hull']} | {dof} | {r['params']} | {r['closure']:.1f} | "
              f"{r['forward']:.1f} |" + more, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
