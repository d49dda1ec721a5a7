"""Forces the mechanism file does not describe: accuracy with and without ``--identify``.

For each mechanism and mode (known coordinates, autoencoder) a model is trained on the
``train`` run without and with ``mc2fmu train --identify`` (the default library, kappa and iterations),
and every run is simulated with ``mc2fmu simulate``'s code; prints the position NRMSE table
and the identified equations.  ``four_bar_friction`` is the four-bar with crank-pivot friction
its mechanism file does not list; ``four_bar`` (no unknown force) shows what ``--identify``
costs when there is nothing to find.

    python benchmarks/unknown_forces.py [NAME ...] [--modes known,autoencoder]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, KNOWN, ensure_runs, evaluate  # noqa: E402
from mc2fmu.pipeline import train as fit  # noqa: E402
from mc2fmu.reducers.autoencoder.config import TrainConfig  # noqa: E402

DEFAULT = ("four_bar_friction", "four_bar")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--modes", default="known,autoencoder")
    ap.add_argument("--variants", default="off,on", help="off (no --identify), on (--identify)")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench-unknown"))
    args = ap.parse_args(argv)
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        for mode in args.modes.split(","):
            for variant in args.variants.split(","):
                cfg = TrainConfig(dof=DOF[name], coords=KNOWN[name] if mode == "known" else (),
                                  identify="default" if variant == "on" else "")
                model_dir = Path(args.out) / f"{name}-{mode}-{variant}"
                t0 = time.perf_counter()
                art = fit(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], cfg, model_dir)
                seconds = time.perf_counter() - t0
                res = evaluate(model_dir, folder)
                eq = art.training["metrics"].get("identified", [])
                rows.append((name, mode, variant, seconds, res, eq))
                print(f"{name} {mode} identify {variant}: {seconds:.0f} s; "
                      + ", ".join(f"{e} {100 * r['nrmse']:.3f} %" for e, r in res.items()), flush=True)
                for line in eq:
                    print(f"    {line}", flush=True)
    print()
    print("| mechanism | mode | --identify | fit s | train % | low % | shape % | high % |")
    print("|---|---|---|---|---|---|---|---|")
    for name, mode, variant, seconds, res, _ in rows:
        print(f"| {name} | {mode} | {variant} | {seconds:.0f} | "
              + " | ".join(f"{100 * res[e]['nrmse']:.3f}" for e in ("train", "low", "shape", "high")) + " |")
    print()
    for name, mode, variant, _, _, eq in rows:
        if eq:
            print(f"{name} {mode}:")
            for line in eq:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
