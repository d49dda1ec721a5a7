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

The local fits look at :data:`LOCAL_MAX_DOF` coordinates at most: in more dimensions a run
seldom passes a configuration often enough (a 10 s run of the 6-DOF hexapod passes none of
240 anchors five times), and a neighbourhood passed by a few runs does not span every
direction of a higher-dimensional manifold.  When they do not decide, the estimate turns to
one fit over the whole motion (:func:`global_estimate`): a cubic in the first ``k``
principal coordinates of up to :data:`GLOBAL_SAMPLES` moving samples of all runs, ``k = 1 ..``
:data:`MAX_DOF`, each tenth of the motion predicted by the fit to the other nine.  Judged
on the samples it was fitted to, a cubic in ``k`` coordinates explains a missing direction:
a 10 s run holds few independent values of its smooth coordinates, and 84 terms (``k = 6``)
can follow them; judged on another stretch of the motion it cannot.  This is the regime of
machines that move a few cm and degrees about a pose (platforms, vehicle suspensions),
where the configuration manifold is a graph over its tangent space.  On a large, curved
motion a polynomial in too many coordinates fits where the right number does not (the
five-bar's ``high`` run: 0.30 at 2 coordinates, 1.1e-3 at 4), so the global fit answers only
when the motion is nearly flat (its first ``k`` principal directions hold all but
:data:`GLOBAL_FLAT` of it: 2.3 % on the hexapod, 8 % on the five-bar's ``high`` run) but not
flat in ``k`` directions (a two-link arm's large swings span exactly four, which any map of
four coordinates fits: the part outside them must be :data:`GLOBAL_EXPLAINED` times the
residual), crosses the middle of each direction at least :data:`GLOBAL_CROSSINGS` times, and
the fit is clear after a drop of at least :data:`GLOBAL_DROP` (the hexapod's ``train`` run:
0.31 at 5, 1.6e-4 at 6).  When the motion barely moves in a direction, the message names
that direction's bodies, so the user knows what to excite.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from itertools import combinations_with_replacement

import numpy as np

from ..errors import DatasetError

ANCHORS = 240
MIN_VISITS = 5
MAX_RADIUS = 0.3  # of the data's RMS spread
FITS = 3e-2  # a quadratic in k coordinates fits the neighbourhood: relative residual below this
CLEAR = 1e-2  # ... and clearly so below this
MIN_DROP = 10.0
MIN_ANCHORS = 20
LOCAL_MAX_DOF = 4  # the local fits' largest k
MAX_DOF = 10  # the global fit's largest k
GLOBAL_SAMPLES = 5000  # moving samples in the global fit (evenly spread over the runs)
GLOBAL_DEGREE = 3  # the global fit's polynomial: cubic (what a rotation's series needs beyond the quadratic)
GLOBAL_FOLDS = 10  # ... judged on each tenth of the motion, fitted to the other nine
GLOBAL_DROP = 50.0  # the global fit's residual must drop at least this much at the estimate
GLOBAL_CROSSINGS = 10  # ... and the motion cross the middle of each of its directions this often
GLOBAL_FLAT = 0.05  # ... and k principal directions hold all but this much of the motion (nearly flat)
GLOBAL_EXPLAINED = 10.0  # ... and the fit explain what lies outside them (that part this many times its residual)
MOVING = 0.02  # a sample moves when its speed is above this fraction of the 90th percentile speed


@dataclass(frozen=True)
class DofEstimate:
    dof: int | None  # None: the data does not decide
    residuals: np.ndarray  # relative residual of the quadratic fit in k = 1, 2, ... coordinates (local: median)
    anchors: int  # anchors with enough visits
    anchors_tried: int
    reason: str = ""  # why the data does not decide
    method: str = "local"  # "local": fits about anchors; "global": one fit over the whole motion
    samples: int = 0  # the global fit's samples
    local: "DofEstimate | None" = None  # the global estimate: the local fits that did not decide

    def report(self) -> str:
        lines = []
        if self.method == "global":
            if self.local is not None:
                local = self.local.report().splitlines()
                lines += [*local[:-1], f"the local fits do not decide: {self.local.reason}", ""]
            lines.append(f"one fit over the whole motion ({self.samples} moving samples of all runs):")
            lines.append(f"  k   residual of a cubic in k coordinates (relative, each tenth of the motion predicted "
                         "from the rest)")
        else:
            lines.append(f"local fits at {self.anchors} of {self.anchors_tried} anchor configurations "
                         f"(each passed at least {MIN_VISITS} times):")
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
        Phi = _features(delta @ Vt[:k].T, 2, 1.0)
        C, *_ = np.linalg.lstsq(Phi, delta, rcond=None)
        out.append(float(np.linalg.norm(delta - Phi @ C) / total) if total > 0 else 0.0)
    return out


def _features(S: np.ndarray, degree: int, scale: float) -> np.ndarray:
    """1 and the monomials of the columns of ``S / scale`` up to ``degree``."""
    S = S / scale
    terms = [c for d in range(1, degree + 1) for c in combinations_with_replacement(range(S.shape[1]), d)]
    return np.hstack([np.ones((len(S), 1))] + [np.prod(S[:, list(c)], axis=1, keepdims=True) for c in terms])


def held_out_residuals(x: np.ndarray, k_max: int, degree: int, folds: int, stop: float = 0.0) -> list[float]:
    """Relative residuals of a polynomial of ``degree`` in the first ``k`` principal
    coordinates, ``k = 1 ..``, each fold of consecutive samples of ``x`` (N, n) predicted by
    the fit to the others (principal directions included).  A run's coordinates are smooth in
    time, so over 10 s they hold few independent values; a fit judged on the samples it was
    made from can then explain a missing direction with enough terms, a fit judged on another
    stretch of the motion cannot.  Stops after the first ``k`` whose residual is below
    ``stop`` or ``k_max``, and where the samples are fewer than three per coefficient."""
    edges = np.linspace(0, len(x), folds + 1).round().astype(int)
    parts = []
    total = 0.0
    for f in range(folds):
        test = np.zeros(len(x), dtype=bool)
        test[edges[f]:edges[f + 1]] = True
        mean = x[~test].mean(axis=0)
        train, held = x[~test] - mean, x[test] - mean
        total += float(np.sum(held**2))
        parts.append((train, held, np.linalg.svd(train, full_matrices=False)[2]))
    out: list[float] = []
    for k in range(1, k_max + 1):
        n_terms = len(list(combinations_with_replacement(range(k + 1), degree)))
        if min(len(train) for train, _, _ in parts) < 3 * n_terms:
            break
        sq = 0.0
        for train, held, Vt in parts:
            S = train @ Vt[:k].T
            scale = max(float(np.max(np.abs(S))), 1e-300)  # conditioning of the higher powers
            C, *_ = np.linalg.lstsq(_features(S, degree, scale), train, rcond=None)
            sq += float(np.sum((held - _features(held @ Vt[:k].T, degree, scale) @ C) ** 2))
        out.append(float(np.sqrt(sq / total)) if total > 0 else 0.0)
        if out[-1] < stop:
            break
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


def estimate_dof(x: np.ndarray, xd: np.ndarray, run_offsets, names: list[str] | None = None) -> DofEstimate:
    """The manifold dimension of NC samples ``x`` (n_t, n) of runs starting at ``run_offsets``
    (the last entry: n_t); ``xd`` tells which samples move.  The local fits first; when they do
    not decide, the global fit (see the module docstring).  ``names``: the body each coordinate
    belongs to, for the message when a direction is missing."""
    local, moving = _local_estimate(x, xd, run_offsets)
    if local.dof is not None or moving is None:
        return local
    # the stretches of consecutive moving samples within one run
    run = np.searchsorted(np.asarray(run_offsets)[1:], moving, side="right")
    stretch = np.cumsum(np.concatenate([[0], (np.diff(moving) > 1) | (np.diff(run) > 0)]))
    return replace(global_estimate(np.asarray(x, dtype=np.float64)[moving], names, stretch), local=local)


def global_estimate(x: np.ndarray, names: list[str] | None = None, stretch: np.ndarray | None = None) -> DofEstimate:
    """The dimension from one fit over all samples ``x`` (n_t, n) (moving samples of every
    run, in time order; ``stretch`` labels the samples of each continuous stretch): the
    smallest ``k`` whose cubic fit, judged on held-out stretches of the motion
    (:func:`held_out_residuals`), is clear (below :data:`CLEAR`) after a drop of at least
    :data:`GLOBAL_DROP`, along a motion that crosses the middle of each of its ``k`` directions
    at least :data:`GLOBAL_CROSSINGS` times within continuous stretches and is nearly flat (its
    first ``k`` principal directions hold all but :data:`GLOBAL_FLAT` of it), but not flat in
    ``k`` directions: the part outside them, which the fit predicts, must be
    :data:`GLOBAL_EXPLAINED` times its residual (a torus in four linear dimensions, a two-link
    arm's large swings, is fitted exactly by any map of four coordinates)."""
    keep = np.unique(np.linspace(0, len(x) - 1, min(GLOBAL_SAMPLES, len(x))).round().astype(int))
    x = x[keep]
    stretch = np.zeros(len(x), dtype=int) if stretch is None else np.asarray(stretch)[keep]
    k_max = min(MAX_DOF, x.shape[1] - 1)
    # the decision needs the residuals up to the first that fits: stop there
    residuals = np.array(held_out_residuals(x, k_max, GLOBAL_DEGREE, GLOBAL_FOLDS, stop=FITS))
    est = DofEstimate(None, residuals, 0, 0, method="global", samples=len(x))
    fitting = np.flatnonzero(residuals < FITS)
    if not fitting.size:
        if len(residuals) < k_max:
            return replace(est, reason=f"{len(x)} moving samples allow a cubic in at most {len(residuals)} "
                                       f"coordinate(s), and none fits; record longer runs, or give --dof N")
        return replace(est, reason=f"no cubic in up to {k_max} coordinates fits the whole motion either; "
                                   f"more than {k_max} degrees of freedom, a motion too large and curved for one fit, "
                                   "or data that is not a smooth mechanism motion: give --dof N")
    dof = int(fitting[0]) + 1
    previous = 1.0 if dof == 1 else residuals[dof - 2]
    delta = x - x.mean(axis=0)
    _, sv, Vt = np.linalg.svd(delta, full_matrices=False)
    coords = delta @ Vt[:dof].T
    flips = np.diff(np.signbit(coords - np.median(coords, axis=0)), axis=0) & (np.diff(stretch) == 0)[:, None]
    crossings = np.count_nonzero(flips, axis=0)
    if crossings.min() < GLOBAL_CROSSINGS:
        j = int(np.argmin(crossings))
        return replace(est, reason=f"the motion crosses the middle of its direction {j + 1} only {crossings[j]} times "
                                   f"(at least {GLOBAL_CROSSINGS} needed): a motion that does not return does not "
                                   "show how many directions it could take; record longer or oscillating runs, or "
                                   "give --dof N")
    if residuals[dof - 1] >= CLEAR:  # the direction the fit misses: the next one
        return replace(est, reason=f"{dof} coordinate(s) fit the whole motion only to {residuals[dof - 1]:.1e}: "
                                   f"another direction moves a few percent as much as the main motion"
                                   f"{_direction(sv, Vt, dof + 1, names)}; excite it more (a larger or another "
                                   "input), record longer, or give --dof N")
    if previous < GLOBAL_DROP * residuals[dof - 1]:
        return replace(est, reason=f"over the whole motion the residual drops only {previous / residuals[dof - 1]:.0f}x "
                                   f"at {dof} coordinate(s) (at least {GLOBAL_DROP:g}x needed: a large, curved motion "
                                   f"can fit with too many coordinates){_direction(sv, Vt, dof, names)}; record runs "
                                   "that return to the same configurations from several directions (longer, or "
                                   "several smaller runs), or give --dof N")
    flat = float(np.sqrt(max(0.0, 1.0 - np.sum(sv[:dof] ** 2) / np.sum(sv**2))))
    if flat > GLOBAL_FLAT:
        return replace(est, reason=f"{dof} coordinate(s) fit the whole motion, but it is too large and curved for that "
                                   f"to count them ({flat:.1%} of it lies outside its first {dof} principal "
                                   f"directions, at most {GLOBAL_FLAT:.0%} for one fit to be trusted: a curved motion "
                                   "of fewer degrees of freedom fits with more coordinates); record runs that return "
                                   "to the same configurations from several directions (the local fits), or give "
                                   "--dof N")
    if flat < GLOBAL_EXPLAINED * residuals[dof - 1]:
        return replace(est, reason=f"the motion lies (nearly) within its first {dof} principal directions ({flat:.1e} "
                                   "outside them), so a fit in that many coordinates shows nothing about their number "
                                   f"(a motion linear in {dof} coordinates, or a large curved one spanning {dof} "
                                   "directions); record runs that return to the same configurations from several "
                                   "directions (the local fits), or give --dof N")
    return replace(est, dof=dof)


def _direction(sv: np.ndarray, Vt: np.ndarray, j: int, names: list[str] | None) -> str:
    """'' or ' (...)' saying how much the ``j``-th principal direction (from 1) moves relative
    to the first and which bodies move most in it."""
    if j > len(sv) or sv[0] <= 0:
        return ""
    text = f" (principal direction {j} moves {sv[j - 1] / sv[0]:.1%} as much as the first"
    if names is None or len(names) != Vt.shape[1]:
        return text + ")"
    weight: dict[str, float] = {}
    for name, w in zip(names, Vt[j - 1] ** 2):
        weight[name] = weight.get(name, 0.0) + float(w)
    top = sorted(weight, key=weight.get, reverse=True)[:3]
    return text + f", mostly {', '.join(top)})"


def _local_estimate(x: np.ndarray, xd: np.ndarray, run_offsets) -> tuple[DofEstimate, np.ndarray | None]:
    """The local fits' estimate and the moving samples' indices (None: the runs hardly move,
    nothing else to try)."""
    x, xd = np.asarray(x, dtype=np.float64), np.asarray(xd, dtype=np.float64)
    offsets = np.asarray(run_offsets, dtype=np.int64)
    if not np.isfinite(x).all() or not np.isfinite(xd).all():
        raise DatasetError("the dataset holds non-finite values; the degrees of freedom cannot be estimated")
    speed = np.linalg.norm(xd, axis=1)
    ref = np.percentile(speed, 90) if len(speed) else 0.0
    moving = np.flatnonzero(speed > MOVING * ref) if ref > 0 else np.zeros(0, dtype=int)
    spread = float(np.sqrt(np.mean(np.var(x, axis=0)) * x.shape[1])) if len(x) else 0.0
    if len(moving) < 10 * MIN_VISITS or spread <= 0:
        return DofEstimate(None, np.zeros(0), 0, 0, "the runs hardly move; excite the mechanism, or give --dof N"), None
    anchors = moving[np.unique(np.linspace(0, len(moving) - 1, min(ANCHORS, len(moving))).round().astype(int))]
    k_max = min(LOCAL_MAX_DOF, x.shape[1] - 1)
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
                           "more; give longer or more varied runs, or --dof N"), moving
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: no anchor had samples for that fit
        residuals = np.nanmedian(np.array(fits), axis=0)
    fitting = np.flatnonzero(residuals < FITS)  # NaN compares False
    if not fitting.size:
        return DofEstimate(None, residuals, len(fits), len(anchors),
                           f"no quadratic in up to {k_max} coordinates fits the neighbourhoods; more than {k_max} "
                           "degrees of freedom, or data that is not a smooth mechanism motion: give --dof N"), moving
    dof = int(fitting[0]) + 1
    previous = 1.0 if dof == 1 else residuals[dof - 2]
    est = DofEstimate(dof, residuals, len(fits), len(anchors))
    if residuals[dof - 1] >= CLEAR:
        return _undecided(est, f"{dof} coordinate(s) fit only to {residuals[dof - 1]:.1e}: a direction moves a few "
                               "percent as much as the main motion (a barely excited degree of freedom, or strong "
                               "curvature); excite it more, or give --dof N"), moving
    if previous < MIN_DROP * residuals[dof - 1]:
        return _undecided(est, f"the residual drops only {previous / residuals[dof - 1]:.1f}x at {dof} coordinate(s) "
                               f"(at least {MIN_DROP:g}x needed); give longer or more varied runs, or --dof N"), moving
    return est, moving


def _undecided(est: DofEstimate, reason: str) -> DofEstimate:
    return replace(est, dof=None, reason=reason)


def estimate_dataset_dof(dataset) -> DofEstimate:
    names = [b.name for b in dataset.layout.bodies for _ in range(b.slice.stop - b.slice.start)]
    return estimate_dof(dataset.x, dataset.xd, dataset.run_offsets, names)
