"""The curvature term ``L_curv`` (``train --curvature-weight``, default 1) against its absence.

    python benchmarks/curvature.py [NAMES...] [--weight 0] [--models DIR] [--out out/bench-variants-curvature]

For each suite mechanism: the default-setting model (learnt coordinates, seed 0:
``DIR/<name>-autoencoder-w1`` as benchmarks/train_accuracy.py leaves it, default out/bench,
else trained there) and the same with ``L_curv`` at ``--weight`` (default 0: off; trained here,
``OUT/<name>-curvature-W``).  First the variants benchmark on the latter
(benchmarks/variants.py ``--curvature-weight W --no-cost``: the same Exudyn variants as the
"Tunable physics" tables, which are the default models'; its targets are reported, not
asserted: this is the comparison), then per mechanism both models' position NRMSE on the
held-out ``low`` and ``shape`` runs, their L-BFGS iterations (the training's length, which
the machine's load does not change; an iteration with ``L_curv`` decodes the triplet once
more) and training seconds (the optimisation, as recorded in model.json: run it on an
otherwise idle machine, after benchmarks/train_accuracy.py as ``python -m benchmarks`` does).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import variants  # noqa: E402
from benchmarks.train_accuracy import DOF, UNKNOWN_FORCES, ensure_runs, evaluate  # noqa: E402
from examples.reference import MECHANISMS  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--weight", type=float, default=0.0, help="the L_curv weight to compare with (default 0: off)")
    ap.add_argument("--models", type=Path, default=ROOT / "out" / "bench",
                    help="where benchmarks/train_accuracy.py left the default models (<name>-autoencoder-w1); "
                         "missing ones are trained there")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-variants-curvature")
    args = ap.parse_args(argv)

    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    for name in args.names:  # a default model left by an older version is not the default's
        default = args.models / f"{name}-autoencoder-w1" / "model.json"
        if default.exists():
            trained_with = json.loads(default.read_text())["training"]["config"].get("curvature_weight", 0.0)
            if trained_with != TrainConfig().curvature_weight:
                raise SystemExit(f"{default.parent}: trained with --curvature-weight {trained_with:g}, not the "
                                 f"default {TrainConfig().curvature_weight:g}; delete it to have it trained again")
    variants.main([*args.names, "--curvature-weight", f"{args.weight:g}", "--models", str(args.models), "--out",
                   str(args.out), "--no-cost"])
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        default = args.models / f"{name}-autoencoder-w1"
        if not (default / "model.json").exists():
            train(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], TrainConfig(dof=DOF[name]), default)
        compared = args.out / f"{name}-curvature-{args.weight:g}"
        row = [name]
        for model_dir in (compared, default):
            res = evaluate(model_dir, folder)
            metrics = json.loads((model_dir / "model.json").read_text())["training"]["metrics"]
            row += [res["low"]["nrmse"], res["shape"]["nrmse"], metrics["lbfgs_iterations"], metrics["train_seconds"]]
        rows.append(row)
    print()
    other = "L_curv off" if args.weight == 0 else f"L_curv x{args.weight:g}"
    print(f"| mechanism | {other}: low | shape | L-BFGS iterations | train s "
          f"| default (L_curv x{TrainConfig().curvature_weight:g}): low | shape | L-BFGS iterations | train s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, l0, s0, t0, w0, l1, s1, t1, w1 in rows:
        print(f"| {name} | {100 * l0:.3f} % | {100 * s0:.3f} % | {t0} | {w0:.0f} | {100 * l1:.3f} % | {100 * s1:.3f} % "
              f"| {t1} | {w1:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
