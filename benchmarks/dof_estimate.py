"""`mc2fmu estimate-dof` on every bundled mechanism and excitation.

    python benchmarks/dof_estimate.py [NAMES...]

Prints, per run: the engine's degrees of freedom (Exudyn's count), the estimate, the
evidence (the median relative residual of local quadratic fits in k = 1..4 coordinates), the
anchors used and the time taken.  Reference runs are generated with Exudyn if missing (examples/<name>/runs).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import ensure_runs  # noqa: E402
from examples.reference import EXCITATIONS, MECHANISMS, degrees_of_freedom  # noqa: E402
from mc2fmu.data.dataset import ingest  # noqa: E402
from mc2fmu.data.dof import estimate_dataset_dof  # noqa: E402


def main(argv=None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(MECHANISMS)
    print("| mechanism | run | DOF (engine) | estimate | e1 | e2 | e3 | e4 | anchors | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        folder = ensure_runs(name)
        truth = degrees_of_freedom(name)["dof"]
        for exc in EXCITATIONS:
            ds = ingest(folder / "mechanism.toml", [folder / "runs" / f"{exc}.csv.gz"])
            t0 = time.perf_counter()
            est = estimate_dataset_dof(ds)
            sec = time.perf_counter() - t0
            ev = " | ".join(f"{v:.1e}" for v in est.residuals[:4])
            verdict = est.dof if est.dof else f"undecided ({est.reason})"
            print(f"| {name} | {exc} | {truth} | {verdict} | {ev} | {est.anchors}/{est.anchors_tried} | {sec:.1f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
