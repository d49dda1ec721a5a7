"""Best of K seeds: held-out accuracy and wall time, ``python benchmarks/seeds.py [NAMES...] [--k K]``.

For each mechanism and mode (known / learnt coordinates), with every other option at its
default and base seed 0:

* K = 1: one training (``mc2fmu train --seeds 1``), its wall time;
* K: ``--seeds K`` (a process pool sized to the cores, one torch thread per seed), its wall
  time, with every seed's model kept to evaluate it too.

Each model is rolled out on the held-out runs (low, shape).  Prints, per mechanism and mode,
the NRMSE of K = 1, of the seed the validation loss keeps among the first 2 seeds (what K = 2
keeps: the seeds are the same trainings) and among all K, the best and worst seed, whether the
validation loss picked the seed with the lowest held-out error, and the wall times; then the
median and worst over the mechanisms.  ``--reuse`` evaluates the models of an earlier run
(their wall times are kept in ``<model>-walls.json``) instead of training again.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, KNOWN, UNKNOWN_FORCES, ensure_runs, evaluate  # noqa: E402
from examples.reference import MECHANISMS  # noqa: E402

HELD_OUT = ("low", "shape")


def held_out(model: Path, folder: Path) -> float:
    """The worse of the held-out runs' position NRMSE."""
    res = evaluate(model, folder)
    return max(res[e]["nrmse"] for e in HELD_OUT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--k", type=int, default=4, help="the ensemble size compared with K = 1 (default 4)")
    ap.add_argument("--modes", default="known,learnt")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-seeds")
    ap.add_argument("--reuse", action="store_true", help="evaluate the models an earlier run left in --out")
    args = ap.parse_args(argv)

    from mc2fmu.parallel.seeds import train_seeds
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        mech, run = folder / "mechanism.toml", str(folder / "runs" / "train.csv.gz")
        for mode in args.modes.split(","):
            cfg = TrainConfig(dof=DOF[name], coords=KNOWN[name] if mode == "known" else (), seeds=1)
            tag = args.out / f"{name}-{mode}"
            one, ens_dir = tag.with_name(tag.name + "-k1"), tag.with_name(f"{tag.name}-k{args.k}")
            walls_file = tag.with_name(tag.name + "-walls.json")
            if not (args.reuse and walls_file.exists()):
                for p in (one, ens_dir):
                    shutil.rmtree(p, ignore_errors=True)
                    shutil.rmtree(p.with_name(p.name + ".seeds"), ignore_errors=True)
                t0 = time.perf_counter()
                train(mech, [run], cfg, one)
                wall1 = time.perf_counter() - t0
                t0 = time.perf_counter()
                train_seeds(train, mech, [run], dataclasses.replace(cfg, seeds=args.k), ens_dir, seeds=args.k,
                            keep_members=True)
                walls_file.write_text(json.dumps({"k1": wall1, f"k{args.k}": time.perf_counter() - t0}))
            walls = json.loads(walls_file.read_text())
            wall1, wallk = walls["k1"], walls[f"k{args.k}"]
            ens = json.loads((ens_dir / "model.json").read_text())["training"]["ensemble"]
            val = {m["seed"]: m["val_loss"] for m in ens["members"] if "error" not in m}
            failed = sum("error" in m for m in ens["members"])  # e.g. a training that did not fit (refused)
            members = {s: held_out(ens_dir.with_name(ens_dir.name + ".seeds") / f"seed-{s}", folder) for s in val}
            single = held_out(one, folder)
            kept = members[ens["kept"]]
            kept2 = members[min(sorted(val)[:2], key=lambda s: val[s])]
            rows.append((name, mode, single, kept2, kept, min(members.values()), max(members.values()),
                         kept == min(members.values()), wall1, wallk, failed))
            print(f"{name} {mode}: K=1 {100 * single:.3f} %, kept seed {ens['kept']} {100 * kept:.3f} %, seeds "
                  + ", ".join(f"{s}: {100 * v:.3f} % (val {val[s]:.2e})" for s, v in members.items())
                  + f"; {failed} failed; wall {wall1:.0f} s / {wallk:.0f} s", file=sys.stderr, flush=True)
    k = args.k
    pct = lambda v: f"{100 * v:.3f} %" if np.isfinite(v) else "diverged"  # noqa: E731
    print(f"| mechanism | mode | held-out NRMSE, K = 1 | K = 2: kept | K = {k}: kept | best / worst of the {k} "
          f"seeds that fitted | seeds refused (no fit) | validation loss picked the best of {k} | wall K = 1 | "
          f"wall K = {k} | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, mode, single, kept2, kept, best, worst, right, w1, wk, failed in rows:
        print(f"| {name} | {mode} | {pct(single)} | {pct(kept2)} | {pct(kept)} | {pct(best)} / {pct(worst)} "
              f"| {failed} | {'yes' if right else 'no'} | {w1:.0f} s | {wk:.0f} s | {wk / w1:.2f} |")
    print()
    print(f"| mode | held-out NRMSE, median / worst: K = 1 | K = 2 | K = {k} | wall ratio K = {k} / K = 1: "
          "median / worst |")
    print("|---|---|---|---|---|")
    for mode in args.modes.split(","):
        sel = [r for r in rows if r[1] == mode]
        if not sel:
            continue
        cols = [np.array([r[i] for r in sel]) for i in (2, 3, 4)]
        ratio = np.array([r[9] / r[8] for r in sel])
        print(f"| {mode} | " + " | ".join(f"{pct(np.median(c))} / {pct(c.max())}" for c in cols)
              + f" | {np.median(ratio):.2f} / {ratio.max():.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
