"""The L-BFGS floor's check (``--lbfgs-check``): when the fit reaches ``--lbfgs-floor``, the model
is rolled out over the training runs as ``mc2fmu simulate`` would (from each run's initial
state, on its inputs) and the training stops only when the rollout's error is at most the
check's tolerance; otherwise the floor is lowered and training goes on.

Why: the floor is a one-step measure (relative squared errors of the reconstruction and the
accelerations), and how far a one-step error carries over a run depends on the mechanism and
the run: a long chain through repeated collinear passages (IFToMM A02, 81 bodies, 20 s) stops
at the default floor with a 0.24 % rollout error where the linkages stop at 0.002-0.03 %.  The
check turns the floor into what the user sees.  It costs one rollout per check, about the
length of a ``simulate`` of the training runs (1.5 s for a 10 s run of a linkage, 4.3 s for
A02's 20 s), and only trainings that reach the floor take it.

The rollout's error is the NRMSE of the natural coordinates' points (every body's centre of
mass and its three unit points) over their spread: what the bodies' position NRMSE of
``mc2fmu validate`` measures, without its rotations' polar decompositions (on A02's 81 bodies
those were most of a check).

The new floor takes the rollout error as proportional to the fit, and aims at half the
tolerance: ``fit * 0.5 tol / nrmse`` (``fit`` the best fit reached), at most :data:`MAX_FACTOR` of it and at least
:data:`MIN_FACTOR`, never under :data:`MIN_FLOOR`.  Measured on A02 (benchmarks/a02.py): 0.24 %
at a fit of 9.2e-8, 0.040 % at 3.6e-9, 0.0043 % at 9.8e-10: no one power of the fit, so a
second lowering is common.
"""

from __future__ import annotations

import math

import numpy as np

from ...data.dataset import Dataset
from ...models.simulate import initial_state, trajectory
from .torch_model import TorchManifoldModel, to_runtime

#: the lowest floor the check lowers to (below it, the relative rule and the iteration cap stop L-BFGS)
MIN_FLOOR = 1e-12
#: a run whose points' spread is at most this fraction of their size does not move (the spread of
#: a constant run is its mean's round-off, not zero)
STILL = 1e-12
#: a failed check lowers the floor by at least this factor (a rollout just above the tolerance) ...
MAX_FACTOR = 0.3
#: ... and by at most this one (a rollout that diverged)
MIN_FACTOR = 1e-3


def training_rollout_nrmse(model: TorchManifoldModel, ds: Dataset) -> float | None:
    """The largest NRMSE of the natural coordinates' points over the training runs of ``ds``
    (rms error over the rms deviation from the run's mean), the model rolled out from each
    run's initial state on the run's inputs (inf: a rollout that diverged; None: no run to roll
    out, every one shorter than 3 samples or not moving)."""
    worst, rt = None, None
    for run in ds.runs():
        spread = np.sqrt(np.mean((run.x - run.x.mean(axis=0)) ** 2)) if len(run.x) >= 3 else 0.0
        if not spread > STILL * (1.0 + np.sqrt(np.mean(run.x ** 2))):  # a run at rest: its mean's round-off
            continue
        if rt is None:
            rt = to_runtime(model, float(ds.dt[0]))  # the model's step, as the artifact has it
        q0, qd0 = initial_state(rt, run.x)
        x = trajectory(rt, q0, qd0, run.u)["x"]
        if not np.isfinite(x).all():
            return math.inf
        worst = max(worst or 0.0, float(np.sqrt(np.mean((x - run.x) ** 2)) / spread))
    return worst


def lowered_floor(fit: float, nrmse: float, tol: float) -> float:
    """The next floor after a check whose rollout gave ``nrmse`` above ``tol``, ``fit`` the best
    fit reached (at most the floor: records come every 20 iterations, so the fit may be under it)."""
    factor = 0.5 * tol / nrmse if math.isfinite(nrmse) and nrmse > 0 else MIN_FACTOR
    return max(MIN_FLOOR, fit * min(MAX_FACTOR, max(MIN_FACTOR, factor)))
