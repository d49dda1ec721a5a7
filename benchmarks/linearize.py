"""Small-oscillation frequencies: the reduced model's linearization against the engine.

    python benchmarks/linearize.py [--mechanisms four_bar five_bar ...] [--out out/bench-lin]

For each mechanism: train with the defaults (``--dof`` its DOF, learnt coordinates, or with
``--known`` the suite's known coordinates) on its ``train`` run (kept in ``OUT/<name>`` or
``OUT/<name>-known``; an existing model is reused), linearise it at the static
equilibrium under the mechanism's static inputs (``mc2fmu linearize``), and compare every
oscillatory mode's damped frequency (|Im lambda| / 2 pi) with the full Exudyn model's (free
oscillations after a small pulse about the same equilibrium, 20 s, decaying sinusoids fitted to
all body origins).  Reduced modes closer than the 20 s record resolves (1/20 Hz) are one
oscillation to the engine: one frequency is fitted for them and compared with each.  Prints a
markdown table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DOF = {"four_bar": 1, "slider_crank": 1, "two_bar": 2, "five_bar": 2, "spatial_four_bar": 1, "three_rrr": 3,
       "macpherson": 1}


def resolvable_groups(freqs: np.ndarray, duration: float) -> list[list[int]]:
    """Indices of the ascending ``freqs`` grouped where neighbours are closer than a record of
    ``duration`` s resolves (the Rayleigh limit ``1 / duration``): two modes 0.001 Hz apart beat
    over 1000 s, and 20 s of free oscillation show them as one."""
    groups: list[list[int]] = []
    for i, f in enumerate(freqs):
        if groups and f - freqs[groups[-1][-1]] < 1.0 / duration:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mechanisms", nargs="+", default=list(DOF), choices=list(DOF))
    ap.add_argument("--out", default="out/bench-lin")
    ap.add_argument("--known", action="store_true",
                    help="known-coordinate models (the suite's coordinates, benchmarks/train_accuracy.py KNOWN), "
                         "kept in OUT/<name>-known")
    args = ap.parse_args()

    from benchmarks.train_accuracy import DOF as SUITE_DOF, KNOWN, ensure_runs
    from examples.reference import model, oscillation_frequencies, small_oscillations
    from mc2fmu.control.linearize import linearize
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    rows = []
    for name in args.mechanisms:
        assert SUITE_DOF[name] == DOF[name]
        folder = ensure_runs(name)
        model_dir = Path(args.out) / (f"{name}-known" if args.known else name)
        train_s = float("nan")
        if not (model_dir / "model.json").exists():
            start = time.perf_counter()
            cfg = TrainConfig(dof=DOF[name], coords=KNOWN[name] if args.known else ())
            train(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], cfg, model_dir)
            train_s = time.perf_counter() - start
        lin = linearize(model_dir, u=list(model(name).static_inputs))
        modes = [m for m in lin.modes() if m["oscillatory"]]
        # damped frequencies on both sides: |Im lambda| / 2 pi, and the engine's decaying
        # oscillations fitted as such (two_bar and macpherson have dampers)
        reduced = np.sort([abs(m["imag"]) / (2 * np.pi) for m in modes])
        ref = small_oscillations(name)
        groups = resolvable_groups(reduced, float(ref["t"][-1] - ref["t"][0]))
        engine = oscillation_frequencies(ref["t"], ref["origin"].reshape(len(ref["t"]), -1), len(groups), damped=True)
        # each engine frequency against every reduced one of its group (a group: modes closer
        # than the record's resolution, which the engine's record shows as one oscillation)
        err = np.array([abs(reduced[i] / engine[g] - 1) for g, members in enumerate(groups) for i in members]) \
            if len(engine) == len(groups) and len(groups) else np.array([np.nan])
        rows.append((name, DOF[name], engine, reduced, err, train_s, lin.residual))
        print(f"{name}: engine {engine} Hz, reduced {reduced} Hz", flush=True)

    print("\n| mechanism | DOF | engine (Hz) | reduced model (Hz) | largest error | train s |")
    print("|---|---|---|---|---|---|")
    for name, dof, engine, reduced, err, train_s, _ in rows:
        fmt = ", ".join
        print(f"| {name} | {dof} | {fmt(f'{f:.5g}' for f in engine)} | {fmt(f'{f:.5g}' for f in reduced)} | "
              f"{100 * err.max():.3f} % | {'reused' if np.isnan(train_s) else f'{train_s:.0f}'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
