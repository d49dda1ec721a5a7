"""The IFToMM A02 N four-bar (N = 40, 81 bodies) reduced to one coordinate, against ADAMS.

    python benchmarks/a02.py [--out DIR] [--output-step 1e-3] [--lbfgs-floor LOSS] [--rigidity-points N]

Simulates A02 with Exudyn (examples/a02.py, h = 1e-4 s, 1 ms output, 20 s; written to
examples/a02 if missing or on another grid), trains a reduced model with `mc2fmu train --dof 1` defaults on that
run, rolls it out from the run's initial state over the 20 s and prints a table: point B0's
largest distance from the benchmark's published ADAMS solution, for Exudyn and for the
reduced model, the model's position NRMSE against Exudyn over all 81 bodies, the training
seconds, and issue 42's targets.  Exits 1 when B0 is more than 5e-4 m from ADAMS or, with the
defaults (no option), the whole `mc2fmu train` command, run in a process of its own, took more
than 60 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples import a02  # noqa: E402
from benchmarks.train_accuracy import train_command  # noqa: E402
from mc2fmu.models.artifact import load_artifact  # noqa: E402
from mc2fmu.pipeline import train as fit  # noqa: E402
from mc2fmu.reducers.autoencoder.config import TrainConfig  # noqa: E402


#: issue 42's targets with the defaults, both asserted: B0 within 5e-4 m of ADAMS, the whole train
#: command within 60 s
B0_TARGET = 5e-4
FIT_TARGET_S = 60.0


def ensure_data(folder: Path, output_step: float) -> Path:
    run_file = folder / "a02" / "runs" / "train.csv.gz"
    if run_file.exists():
        from mc2fmu.data.poses import read_run
        from mc2fmu.mechanics.mechanism import load_mechanism

        run = read_run(run_file, load_mechanism(folder / "a02" / "mechanism.toml"))
        if abs(run.t[1] - run.t[0] - output_step) < 1e-12:
            return folder / "a02"
    a02.write(a02.simulate(output_step=output_step), folder)
    return folder / "a02"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "out" / "bench"))
    ap.add_argument("--output-step", type=float, default=1e-3,
                    help="the run's sample step, the model's step (default 1e-3 s; at 5e-3 the model's second-order "
                         "step map drifts through the collinear passages)")
    ap.add_argument("--lbfgs-floor", type=float, default=None,
                    help="mc2fmu train --lbfgs-floor (default: train's); the stopping floor sets how far A02 is fitted")
    ap.add_argument("--rigidity-points", type=int, default=None,
                    help="latent points of L_rig (default: train's 1000; on A02's 81 bodies the term is half a closure)")
    args = ap.parse_args(argv)
    options = {k: v for k, v in (("lbfgs_floor", args.lbfgs_floor), ("rigidity_points", args.rigidity_points))
               if v is not None}
    folder = ensure_data(ROOT / "examples", args.output_step)
    adams = a02.read_adams()
    model_dir = Path(args.out) / ("a02-autoencoder-w1" + "".join(f"-{k}{v:g}" for k, v in options.items()))
    defaults = not options and args.output_step == 1e-3  # issue 42's time target holds for these
    if defaults:  # the command as a user runs it, timed whole (the interpreter's start and imports included)
        fit_s = train_command(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], 1, (), model_dir)
        art = load_artifact(model_dir)
    else:
        def progress(entry):
            if entry["stage"] == "lbfgs" and entry["iter"] % 500 == 0:
                print(f"  L-BFGS {entry['iter']}: loss {entry['loss']:.2e}, {entry['elapsed']:.0f} s", file=sys.stderr)

        t0 = time.perf_counter()
        art = fit(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], TrainConfig(dof=1, **options),
                  model_dir, progress=progress)
        fit_s = time.perf_counter() - t0
    r = a02.model_b0(model_dir, folder)
    b0 = a02.b0_error(r["t"], r["B0"], adams)
    print("| bodies | coordinates | DOF | Exudyn B0 vs ADAMS m | model B0 vs ADAMS m | model NRMSE % (all bodies) "
          "| train s | fit s | L-BFGS iterations | B0 <= 5e-4 m | fit <= 60 s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {len(art.layout.bodies)} | {art.layout.size} | 1 | {a02.b0_error(r['t'], r['exudyn_B0'], adams):.1e} | "
          f"{b0:.1e} | {100 * r['nrmse']:.3f} | {art.training['metrics']['train_seconds']:.0f} | {fit_s:.0f} "
          f"| {art.training['metrics']['lbfgs_iterations']} | {'yes' if b0 <= B0_TARGET else 'NO'} "
          f"| {('yes' if fit_s <= FIT_TARGET_S else 'NO') if defaults else '-'} |")
    problems = []
    if b0 > B0_TARGET:
        problems.append(f"the model's B0 is {b0:.1e} m from ADAMS, above the {B0_TARGET:g} m target")
    if fit_s > FIT_TARGET_S and defaults:
        problems.append(f"the whole train command took {fit_s:.0f} s, above the {FIT_TARGET_S:g} s target")
    for problem in problems:
        print(f"a02: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
