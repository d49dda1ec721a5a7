"""`mc2fmu estimate-dof` on every bundled mechanism and excitation, linkages and machines.

    python benchmarks/dof_estimate.py [NAMES...]

Prints one row per mechanism: the engine's degrees of freedom (Exudyn's count), the estimate
on each run (``train / low / shape / high``) and which fits decided it (``L``: the local
quadratic fits about anchors; ``G``: the one fit over the whole motion), the residual of the
deciding fit at one coordinate too few and at the estimate (ranges over the decided runs),
and the seconds per run.  Reference runs are generated with Exudyn if missing
(examples/<name>/runs).

Exits 1 when an estimate is a wrong number (undecided is allowed: the user then gives
``--dof N``), when a machine's ``train`` run is not decided (issue 43: the hexapod's single
10 s run must give 6), or when one run takes more than 60 s.
"""

from __future__ import annotations

import sys
import time

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import ensure_runs  # noqa: E402
from examples.reference import EXCITATIONS, MACHINES, MECHANISMS, degrees_of_freedom  # noqa: E402
from mc2fmu.data.dataset import ingest  # noqa: E402
from mc2fmu.data.dof import estimate_dataset_dof  # noqa: E402

MAX_SECONDS = 60.0


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.1e}" if hi <= 1.5 * lo else f"{lo:.1e} - {hi:.1e}"


def main(argv=None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or [*MECHANISMS, *MACHINES]
    print("| mechanism | DOF (engine) | estimate on train / low / shape / high | residual at DOF - 1 | "
          "at DOF | s per run |")
    print("|---|---|---|---|---|---|")
    problems = []
    for name in names:
        folder = ensure_runs(name)
        truth = degrees_of_freedom(name)["dof"]
        verdicts, before, at, seconds = [], [], [], []
        for exc in EXCITATIONS:
            ds = ingest(folder / "mechanism.toml", [folder / "runs" / f"{exc}.csv.gz"])
            t0 = time.perf_counter()
            est = estimate_dataset_dof(ds)
            seconds.append(time.perf_counter() - t0)
            print(f"{name}/{exc}: {est.dof} ({est.method}) in {seconds[-1]:.1f} s {est.reason}", file=sys.stderr,
                  flush=True)
            if est.dof is None:
                verdicts.append("-")
                if name in MACHINES and exc == "train":
                    problems.append(f"{name}/train undecided: {est.reason}")
                continue
            verdicts.append(f"{est.dof} {'G' if est.method == 'global' else 'L'}")
            if est.dof != truth:
                problems.append(f"{name}/{exc}: {est.dof}, the engine says {truth}")
            if est.dof > 1:
                before.append(float(est.residuals[est.dof - 2]))
            at.append(float(est.residuals[est.dof - 1]))
        if max(seconds) > MAX_SECONDS:
            problems.append(f"{name}: {max(seconds):.0f} s for one run (at most {MAX_SECONDS:g})")
        print(f"| {name} | {truth} | {' / '.join(verdicts)} | {_span(before)} | {_span(at)} | "
              f"{min(seconds):.1f} - {max(seconds):.1f} |", flush=True)
    print("\n(L: decided by the local fits; G: by the one fit over the whole motion; -: undecided, the user gives "
          "--dof N)")
    for p in problems:
        print(f"MISSED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
