"""The L-BFGS optimiser's own cost per iteration, beside the loss it evaluates.

    python benchmarks/lbfgs_cost.py [NAMES...] [--history M,...] [--iterations N]

For each mechanism: the autoencoder of `mc2fmu train --dof N` defaults on its `train` run (as
`benchmarks/loss_cost.py` builds it), optimised from the same start by torch.optim.LBFGS and by
mc2fmu's (`mc2fmu/reducers/autoencoder/lbfgs.py`), strong Wolfe line search, chunks of 20
iterations, each memory size of `--history`.  The first `--iterations` iterations fill the
memory (not timed); the next `--iterations` are timed: the wall time per iteration, the loss
evaluations' share of it (the closure, loss and gradient) and the rest, the optimiser's own
work (the two-loop recursion, the line search's bookkeeping).  One job on the machine: the
figures are wall-clock times.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loss_cost import default_loss  # noqa: E402
from benchmarks.train_accuracy import DOF, ensure_runs  # noqa: E402
from mc2fmu.reducers.autoencoder.lbfgs import LBFGS  # noqa: E402


def optimiser_cost(folder: Path, dof: int, history: int, iterations: int, ours: bool) -> dict:
    _, _, loss_fn, W, params = default_loss(folder, dof)
    kw = dict(lr=1.0, max_iter=20, history_size=history, tolerance_grad=1e-12, tolerance_change=1e-15)
    opt = LBFGS(params, **kw) if ours else torch.optim.LBFGS(params, line_search_fn="strong_wolfe", **kw)
    spent = {"closure": 0.0, "evals": 0}

    def closure():
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(W)[0]
        loss.backward()
        spent["closure"] += time.perf_counter() - t0
        spent["evals"] += 1
        return loss

    state = opt.state.setdefault(params[0], {})
    while state.get("n_iter", 0) < iterations:
        opt.step(closure)
    start, spent["closure"], spent["evals"] = state["n_iter"], 0.0, 0
    t0 = time.perf_counter()
    while state["n_iter"] < start + iterations:
        opt.step(closure)
    total = time.perf_counter() - t0
    n = state["n_iter"] - start
    return {"params": sum(p.numel() for p in params), "ms": 1e3 * total / n, "closure": 1e3 * spent["closure"] / n,
            "evals": spent["evals"] / n}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=["four_bar", "five_bar", "three_rrr"])
    ap.add_argument("--history", default="100,200", metavar="M,...", help="memory sizes (default 100,200)")
    ap.add_argument("--iterations", type=int, default=200, metavar="N",
                    help="iterations to fill the memory, then iterations timed (default 200)")
    args = ap.parse_args()
    print("| mechanism | parameters | memory | optimiser | ms per iteration | loss evaluations per iteration "
          "| closure ms per iteration | optimiser ms per iteration |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.names:
        folder = ensure_runs(name)
        for history in (int(h) for h in args.history.split(",")):
            for ours in (False, True):
                r = optimiser_cost(folder, DOF[name], history, args.iterations, ours)
                print(f"| {name} | {r['params']} | {history} | {'mc2fmu' if ours else 'torch'} | {r['ms']:.1f} | "
                      f"{r['evals']:.2f} | {r['closure']:.1f} | {r['ms'] - r['closure']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
