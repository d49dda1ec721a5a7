"""Forces the mechanism file does not describe: accuracy with and without what mc2fmu adds.

1. ``--identify`` (sparse terms, seed 004): for each mechanism and mode (known coordinates,
   autoencoder) a model is trained on the ``train`` run without and with ``--identify`` (the
   default library, kappa and iterations).  ``four_bar_friction`` is the four-bar with
   crank-pivot friction its mechanism file does not list; ``four_bar`` (no unknown force) shows
   what ``--identify`` costs when there is nothing to find.
2. ``law = "recorded"`` (learned element law, seed 001): ``macpherson_nl``'s strut is progressive
   and digressive and its tension is exported; the model with the learned law against the
   model whose mechanism file has the strut's linear part only (the linear approximation).

Every run is simulated with ``mc2fmu simulate``'s code; prints the position NRMSE tables (%)
and the identified equations.

    python benchmarks/unknown_forces.py [--only identify|recorded] [--modes known,autoencoder]
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

IDENTIFY = ("four_bar_friction", "four_bar")
RECORDED = ("macpherson_nl",)
RUNS = ("train", "low", "shape", "high")


def _row(label: str, seconds: float, res: dict) -> str:
    flag = res["high"]["flag"]
    return (f"| {label} | {seconds:.0f} | " + " | ".join(f"{100 * res[e]['nrmse']:.3f}" for e in RUNS)
            + f" | {'-' if flag is None else f'{flag:.3f}'} |")


def _fresh(model_dir: Path) -> Path:
    """``model_dir``, with the checkpoint an interrupted benchmark may have left removed."""
    model_dir.with_name(model_dir.name + ".checkpoint.pt").unlink(missing_ok=True)
    return model_dir


def _linear_mechanism(folder: Path, out: Path) -> Path:
    """The mechanism file with every recorded spring's law line removed: its linear part only."""
    text = (folder / "mechanism.toml").read_text()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "mechanism-linear.toml"
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("law = ")) + "\n")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("identify", "recorded"))
    ap.add_argument("--modes", default="known,autoencoder")
    ap.add_argument("--out", default=str(ROOT / "out" / "bench-unknown"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    head = "| model | fit s | train % | low % | shape % | high % | high flagged at s |\n|---|---|---|---|---|---|---|"
    rows, equations = [], []
    if args.only != "recorded":
        for name in IDENTIFY:
            folder = ensure_runs(name)
            for mode in args.modes.split(","):
                for variant in ("off", "on"):
                    cfg = TrainConfig(dof=DOF[name], coords=KNOWN[name] if mode == "known" else (),
                                      identify="default" if variant == "on" else "")
                    model_dir = _fresh(out / f"{name}-{mode}-{variant}")
                    t0 = time.perf_counter()
                    art = fit(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], cfg, model_dir)
                    seconds = time.perf_counter() - t0
                    res = evaluate(model_dir, folder)
                    label = f"{name}, {mode}, --identify {variant}"
                    rows.append(_row(label, seconds, res))
                    print(rows[-1], file=sys.stderr, flush=True)
                    for line in art.training["metrics"].get("identified", []):
                        equations.append(f"{name} ({mode}): {line}")
    if args.only != "identify":
        for name in RECORDED:
            folder = ensure_runs(name)
            for mode in args.modes.split(","):
                for variant, mech in (("learned law (law = recorded)", folder / "mechanism.toml"),
                                      ("linear approximation", _linear_mechanism(folder, out / name))):
                    cfg = TrainConfig(dof=DOF[name], coords=KNOWN[name] if mode == "known" else ())
                    model_dir = _fresh(out / f"{name}-{mode}-{'linear' if 'linear' in variant else 'law'}")
                    t0 = time.perf_counter()
                    fit(mech, [folder / "runs" / "train.csv.gz"], cfg, model_dir)
                    seconds = time.perf_counter() - t0
                    res = evaluate(model_dir, folder)
                    rows.append(_row(f"{name}, {mode}, {variant}", seconds, res))
                    print(rows[-1], file=sys.stderr, flush=True)
    print()
    print(head)
    print("\n".join(rows))
    if equations:
        print()
        print("| identified terms |\n|---|")
        print("\n".join(f"| {e} |" for e in equations))
    return 0


if __name__ == "__main__":
    sys.exit(main())
