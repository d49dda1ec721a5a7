"""``mc2fmu estimate-dof`` and ``--dof auto``: the number of minimal coordinates, from the data.

A mechanism with ``m`` degrees of freedom moves on an ``m``-dimensional configuration manifold
in natural coordinates, and every velocity ``xd`` lies in its tangent space there.  So at a
configuration the trajectory passes several times, the velocity *directions* of the separate
passes span ``m`` dimensions, whatever the excitation did (a 1-DOF mechanism passes a
configuration forwards or backwards, nothing else).

For anchors spread over the moving samples of all runs: collect the *visits* of the anchor's
neighbourhood (separate stretches of time within a radius of it; the radius grows until
:data:`MIN_VISITS` visits are found, at most :data:`MAX_RADIUS` of the data's spread), take one
unit velocity per visit (the sample nearest the anchor), and the singular values of those
directions, scaled by the largest.  Directions measured a radius ``r`` apart tilt out of the
tangent space by about ``r`` over the curvature radius (measured on the bundled mechanisms:
2e-5 to 1.4e-3 of the largest value, then 1e-6 to 1e-10 for the second-order tilt, then
rounding), while a direction the mechanism can move in shows with 0.1 to 1 (the two-bar's
second DOF: 0.48).  The median spectrum over the anchors is the evidence; the estimate counts
its values above :data:`TANGENT` and is accepted only when the next value is at least
:data:`MIN_GAP` times smaller, no value falls between :data:`CURVATURE` and :data:`TANGENT`
(a direction moved so little that it cannot be told from curvature: a barely excited degree
of freedom) and enough anchors had enough visits.  Undecided is the safe answer: the user
then gives ``--dof N``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DatasetError

ANCHORS = 240
MIN_VISITS = 5
MAX_RADIUS = 0.3  # of the data's RMS spread
TANGENT = 1e-2  # a tangent direction's scaled singular value is above this
CURVATURE = 3e-3  # ... and curvature's below this (measured up to 1.4e-3)
MIN_GAP = 30.0
MIN_ANCHORS = 20
MAX_DOF = 8
MOVING = 0.02  # a sample moves when its speed is above this fraction of the 90th percentile speed


@dataclass(frozen=True)
class DofEstimate:
    dof: int | None  # None: the data does not decide
    spectrum: np.ndarray  # median of the per-anchor normalised singular values, largest first
    gaps: np.ndarray  # spectrum[k] / spectrum[k + 1]
    anchors: int  # anchors with enough visits
    anchors_tried: int
    reason: str = ""  # why the data does not decide

    def report(self) -> str:
        lines = [f"velocity directions at {self.anchors} of {self.anchors_tried} anchor configurations "
                 f"(each passed at least {MIN_VISITS} times):"]
        lines.append("  k   singular value (median, scaled)   drop to next")
        for k, s in enumerate(self.spectrum):
            gap = f"{self.gaps[k]:10.1f}x" if k < len(self.gaps) else ""
            mark = "  <- the last tangent direction" if self.dof is not None and k + 1 == self.dof else ""
            lines.append(f"  {k + 1:<3} {s:12.3e}                      {gap}{mark}")
        if self.dof is None:
            lines.append(f"undecided: {self.reason}")
        else:
            lines.append(f"estimated degrees of freedom: {self.dof}")
        return "\n".join(lines)


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


def estimate_dof(x: np.ndarray, xd: np.ndarray, run_offsets, seed: int = 0) -> DofEstimate:
    """The tangent-space dimension of NC samples ``x``, ``xd`` (n_t, n) of runs starting at
    ``run_offsets`` (the last entry: n_t)."""
    x, xd = np.asarray(x, dtype=np.float64), np.asarray(xd, dtype=np.float64)
    offsets = np.asarray(run_offsets, dtype=np.int64)
    speed = np.linalg.norm(xd, axis=1)
    if not np.isfinite(x).all() or not np.isfinite(xd).all():
        raise DatasetError("the dataset holds non-finite values; the degrees of freedom cannot be estimated")
    ref = np.percentile(speed, 90) if len(speed) else 0.0
    moving = np.flatnonzero(speed > MOVING * ref) if ref > 0 else np.zeros(0, dtype=int)
    spread = float(np.sqrt(np.mean(np.var(x, axis=0)) * x.shape[1])) if len(x) else 0.0
    empty = DofEstimate(None, np.zeros(0), np.zeros(0), 0, 0)
    if len(moving) < 10 * MIN_VISITS or spread <= 0:
        return _undecided(empty, "the runs hardly move; excite the mechanism, or give --dof N")
    rng = np.random.default_rng(seed)
    anchors = moving[np.unique(np.linspace(0, len(moving) - 1, min(ANCHORS, len(moving))).round().astype(int))]
    k_max = min(MIN_VISITS, x.shape[1])  # estimates up to k_max - 1 degrees of freedom
    spectra = []
    for a in anchors:
        d = np.linalg.norm(x - x[a], axis=1)
        r = np.quantile(d, 0.002)
        found = None
        while r <= MAX_RADIUS * spread:
            visits = _visits(d < r, offsets)
            if len(visits) >= MIN_VISITS:
                found = visits
                break
            r *= 1.5
        if found is None:
            continue
        reps = [s + int(np.argmin(d[s:e])) for s, e in found]
        reps = [i for i in reps if speed[i] > MOVING * ref]
        if len(reps) < MIN_VISITS:
            continue
        reps = sorted(reps, key=lambda i: d[i])[: 2 * MIN_VISITS]  # the nearest: the least tilted
        U = xd[reps] / speed[reps, None]
        s = np.linalg.svd(U, compute_uv=False)
        spectra.append(s[:k_max] / s[0])
    del rng
    if len(spectra) < MIN_ANCHORS:
        return _undecided(DofEstimate(None, np.zeros(0), np.zeros(0), len(spectra), len(anchors)),
                          f"only {len(spectra)} of {len(anchors)} configurations were passed {MIN_VISITS} times or "
                          "more; give longer or more varied runs, or --dof N")
    spectrum = np.median(np.array(spectra), axis=0)
    floor = 1e-12
    gaps = np.maximum(spectrum[:-1], floor) / np.maximum(spectrum[1:], floor)
    dof = int(np.sum(spectrum >= TANGENT))
    est = DofEstimate(dof, spectrum, gaps, len(spectra), len(anchors))
    if dof >= len(spectrum):
        return _undecided(est, f"{dof} or more directions are excited; this estimate tells up to {len(spectrum) - 1} "
                               "degrees of freedom: give --dof N")
    unclear = spectrum[(spectrum >= CURVATURE) & (spectrum < TANGENT)]
    if unclear.size:
        return _undecided(est, f"a direction moves {unclear[0]:.1e} as much as the main motion: too little to tell a "
                               "barely excited degree of freedom from curvature; excite it more, or give --dof N")
    if gaps[dof - 1] < MIN_GAP:
        return _undecided(est, f"the spectrum drops only {gaps[dof - 1]:.1f}x after value {dof} (at least {MIN_GAP:g}x "
                               "needed to tell a direction of motion from curvature); give longer or more varied "
                               "runs, or --dof N")
    return est


def _undecided(est: DofEstimate, reason: str) -> DofEstimate:
    return DofEstimate(None, est.spectrum, est.gaps, est.anchors, est.anchors_tried, reason)


def estimate_dataset_dof(dataset) -> DofEstimate:
    return estimate_dof(dataset.x, dataset.xd, dataset.run_offsets)
