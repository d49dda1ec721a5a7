"""``mc2fmu estimate-dof`` and ``--dof auto``: the number of minimal coordinates, from the data.

A mechanism with ``m`` degrees of freedom moves on an ``m``-dimensional configuration
manifold in natural coordinates.  Near a configuration, that manifold is the graph of a
smooth function over ``m`` tangent coordinates: a quadratic in them fits the nearby samples
to third order, while a quadratic in fewer coordinates misses a whole direction of motion.

For anchors spread over the moving samples of all runs: the samples within a radius of the
anchor (the radius grows until they belong to at least :data:`MIN_VISITS` separate passes, so
that the neighbourhood is covered in several directions, and number three per coefficient of
the largest quadratic; at most :data:`MAX_RADIUS` of the data's spread), their principal
directions, and for ``k = 1, 2, ...`` the residual of a least-squares fit of the samples by
a quadratic in their first ``k`` principal coordinates, relative to their spread.  Measured
on the bundled mechanisms at the true ``m``: 1e-10 to 2e-8 (1 DOF; 8e-7 on the 81-body A02 at
a 5 ms output), 2e-6 to 7e-3 (2 DOF, larger on the five-bar, whose passes lie further apart);
at ``m - 1``: about 0.6.  The median residual over the anchors is the evidence; the estimate
is the smallest ``k`` whose residual is below :data:`FITS`.  It is refused when that residual
is between :data:`CLEAR` and :data:`FITS` (a direction that moves 1-3 % as much as the main
motion: a barely excited degree of freedom, or strong curvature), when the previous residual
is not :data:`MIN_DROP` times larger, when fewer than :data:`MIN_ANCHORS` anchors were passed
often enough, or when the runs hardly move.  Undecided is the safe answer: the user then
gives ``--dof N``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import DatasetError

ANCHORS = 240
MIN_VISITS = 5
MAX_RADIUS = 0.3  # of the data's RMS spread
FITS = 3e-2  # a quadratic in k coordinates fits the neighbourhood: relative residual below this
CLEAR = 1e-2  # ... and clearly so below this
MIN_DROP = 10.0
MIN_ANCHORS = 20
MAX_DOF = 4
MOVING = 0.02  # a sample moves when its speed is above this fraction of the 90th percentile speed


@dataclass(frozen=True)
class DofEstimate:
    dof: int | None  # None: the data does not decide
    residuals: np.ndarray  # median relative residual of the quadratic fit in k = 1, 2, ... coordinates
    anchors: int  # anchors with enough visits
    anchors_tried: int
    reason: str = ""  # why the data does not decide

    def report(self) -> str:
        lines = [f"local fits at {self.anchors} of {self.anchors_tried} anchor configurations "
                 f"(each passed at least {MIN_VISITS} times):"]
        lines.append("  k   residual of a quadratic in k coordinates (median, relative)")
        for k, e in enumerate(self.residuals):
            mark = "  <- the first that fits" if self.dof is not None and k + 1 == self.dof else ""
            lines.append(f"  {k + 1:<3} {e:12.3e}{mark}")
        if self.dof is None:
            lines.append(f"undecided: {self.reason}")
        else:
            lines.append(f"estimated degrees of freedom: {self.dof}")
        return "\n".join(lines)


def quadratic_residuals(delta: np.ndarray, k_max: int) -> list[float]:
    """Relative residuals of least-squares fits of the centred samples ``delta`` (N, n) by a
    quadratic in their first ``k`` principal coordinates, ``k = 1 .. k_max`` (NaN where there
    are fewer than three samples per coefficient)."""
    delta = delta - delta.mean(axis=0)
    total = np.linalg.norm(delta)
    _, _, Vt = np.linalg.svd(delta, full_matrices=False)
    out = []
    for k in range(1, k_max + 1):
        if len(delta) < 3 * (k + 1) * (k + 2) // 2:  # too few samples for this quadratic: unknown
            out.append(float("nan"))
            continue
        S = delta @ Vt[:k].T
        Phi = np.hstack([np.ones((len(S), 1)), S] + [S[:, i:i + 1] * S[:, j:j + 1] for i in range(k)
                                                     for j in range(i, k)])
        C, *_ = np.linalg.lstsq(Phi, delta, rcond=None)
        out.append(float(np.linalg.norm(delta - Phi @ C) / total) if total > 0 else 0.0)
    return out


def _visits(mask: np.ndarray, offsets: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous runs of True in ``mask`` that do not cross a run boundary: [start, stop)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    starts, stops = edges[::2], edges[1::2]
    out = []
    for a, b in zip(starts, stops):
        cuts = offsets[(offsets > a) & (offsets < b)]
        bounds = [a, *cuts.tolist(), b]
        out += [(int(s), int(e)) for s, e in zip(bounds[:-1], bounds[1:])]
    return out


def estimate_dof(x: np.ndarray, xd: np.ndarray, run_offsets) -> DofEstimate:
    """The manifold dimension of NC samples ``x`` (n_t, n) of runs starting at ``run_offsets``
    (the last entry: n_t); ``xd`` tells which samples move."""
    x, xd = np.asarray(x, dtype=np.float64), np.asarray(xd, dtype=np.float64)
    offsets = np.asarray(run_offsets, dtype=np.int64)
    if not np.isfinite(x).all() or not np.isfinite(xd).all():
        raise DatasetError("the dataset holds non-finite values; the degrees of freedom cannot be estimated")
    speed = np.linalg.norm(xd, axis=1)
    ref = np.percentile(speed, 90) if len(speed) else 0.0
    moving = np.flatnonzero(speed > MOVING * ref) if ref > 0 else np.zeros(0, dtype=int)
    spread = float(np.sqrt(np.mean(np.var(x, axis=0)) * x.shape[1])) if len(x) else 0.0
    if len(moving) < 10 * MIN_VISITS or spread <= 0:
        return DofEstimate(None, np.zeros(0), 0, 0, "the runs hardly move; excite the mechanism, or give --dof N")
    anchors = moving[np.unique(np.linspace(0, len(moving) - 1, min(ANCHORS, len(moving))).round().astype(int))]
    k_max = min(MAX_DOF, x.shape[1] - 1)
    min_samples = 3 * (k_max + 1) * (k_max + 2) // 2  # three per coefficient of the largest quadratic
    fits = []
    for a in anchors:
        d = np.linalg.norm(x - x[a], axis=1)
        r = np.quantile(d, 0.002)
        # coarsely sampled fast passes (5 ms over a 1 m/s swing) leave few samples per pass
        while r <= MAX_RADIUS * spread:
            inside = d < r
            if len(_visits(inside, offsets)) >= MIN_VISITS and np.count_nonzero(inside) >= min_samples:
                break
            r *= 1.5
        if r > MAX_RADIUS * spread:
            continue
        near = np.flatnonzero(d < r)
        fits.append(quadratic_residuals(x[near] - x[a], k_max))
    if len(fits) < MIN_ANCHORS:
        return DofEstimate(None, np.zeros(0), len(fits), len(anchors),
                           f"only {len(fits)} of {len(anchors)} configurations were passed {MIN_VISITS} times or "
                           "more; give longer or more varied runs, or --dof N")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: no anchor had samples for that fit
        residuals = np.nanmedian(np.array(fits), axis=0)
    fitting = np.flatnonzero(residuals < FITS)  # NaN compares False
    if not fitting.size:
        return DofEstimate(None, residuals, len(fits), len(anchors),
                           f"no quadratic in up to {k_max} coordinates fits the data; more than {k_max} degrees of "
                           "freedom, or data that is not a smooth mechanism motion: give --dof N")
    dof = int(fitting[0]) + 1
    previous = 1.0 if dof == 1 else residuals[dof - 2]
    est = DofEstimate(dof, residuals, len(fits), len(anchors))
    if residuals[dof - 1] >= CLEAR:
        return _undecided(est, f"{dof} coordinate(s) fit only to {residuals[dof - 1]:.1e}: a direction moves a few "
                               "percent as much as the main motion (a barely excited degree of freedom, or strong "
                               "curvature); excite it more, or give --dof N")
    if previous < MIN_DROP * residuals[dof - 1]:
        return _undecided(est, f"the residual drops only {previous / residuals[dof - 1]:.1f}x at {dof} coordinate(s) "
                               f"(at least {MIN_DROP:g}x needed); give longer or more varied runs, or --dof N")
    return est


def _undecided(est: DofEstimate, reason: str) -> DofEstimate:
    return DofEstimate(None, est.residuals, est.anchors, est.anchors_tried, reason)


def estimate_dataset_dof(dataset) -> DofEstimate:
    return estimate_dof(dataset.x, dataset.xd, dataset.run_offsets)
