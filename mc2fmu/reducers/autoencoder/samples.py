"""The training samples: windows of consecutive data samples, the angle-type coordinates, the
data's affine hull and the known-coordinate map (what training reads of a dataset before any
network exists).

This is the autoencoder's own sampling of a :class:`~mc2fmu.data.dataset.Dataset`, not the
``mc2fmu.data`` stage that builds the dataset from run files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...data.dataset import Dataset
from ...errors import TrainingError
from ...mechanics.natural import poses_from_nc

F64 = torch.float64


def spreads(a: np.ndarray, floor: float) -> np.ndarray:
    """Per-column standard deviations, floored at ``floor`` times the largest (columns that barely move)."""
    s = a.std(axis=0)
    return np.maximum(s, floor * max(float(s.max()), 1e-300))


@dataclass
class Windows:
    """``L`` consecutive samples per row: ``x``, ``xd`` (B, L, n), ``u`` (B, L, n_u).

    Columns 0, 1, 2 are the triplet ``x_{i-1}, x_i, x_{i+1}`` of the one-step terms; a rollout
    of ``K`` steps uses columns up to ``K + 1``.
    """

    x: torch.Tensor
    xd: torch.Tensor
    u: torch.Tensor
    dt: float

    def subset(self, idx: np.ndarray) -> "Windows":
        i = torch.as_tensor(idx)
        return Windows(self.x[i], self.xd[i], self.u[i], self.dt)

    def __len__(self) -> int:
        return len(self.x)

    def arrays(self) -> list[np.ndarray]:
        return [self.x.numpy(), self.xd.numpy(), self.u.numpy(), np.array([self.dt])]


def make_windows(ds: Dataset, samples: int, length: int = 3) -> Windows:
    """Every window of ``length`` consecutive samples inside one run, ``samples`` of them kept
    evenly spaced (``length`` 3: the time triplets)."""
    dts = np.asarray(ds.dt)
    if np.ptp(dts) > 1e-9 * dts.max():
        raise TrainingError(f"runs have different sample steps ({', '.join(f'{d:g}' for d in dts)} s); "
                            "a model has one time step: resample the runs to one step")
    offsets = np.asarray(ds.run_offsets, dtype=int)
    starts = np.concatenate([np.arange(a, max(a, b - length + 1)) for a, b in zip(offsets[:-1], offsets[1:])])
    n = len(starts)
    if n < 40:
        what = "time triplets" if length == 3 else f"windows of {length} samples (--rollout {length - 2})"
        fix = "give longer runs" if length == 3 else "give longer runs or a smaller --rollout"
        raise TrainingError(f"the dataset has {n} usable {what}; training needs at least 40 "
                            f"(2 for validation at a 95/5 split): {fix}")
    if samples and n > samples:
        starts = starts[np.unique(np.linspace(0, n - 1, samples).round().astype(int))]
    rows = starts[:, None] + np.arange(length)
    t = lambda a: torch.as_tensor(a[rows], dtype=F64)  # noqa: E731
    return Windows(t(ds.x), t(ds.xd), t(ds.u), float(dts[0]))


def detect_angles(ds: Dataset, dof: int) -> list[bool]:
    """Angle-type latents for a 1-DOF mechanism one of whose bodies turns a full revolution."""
    if dof != 1:
        return [False] * dof
    for run in ds.runs():
        _, R = poses_from_nc(ds.layout, run.x[:: max(1, len(run.x) // 2000)])
        for k in range(R.shape[1]):
            # planar angle of each body axis (a column of R, global frame) about each global
            # axis it stays well away from; a full revolution shows as an unwrapped range of 2 pi
            for ax in range(3):
                i, j = [a for a in range(3) if a != ax]
                for col in range(3):
                    v = R[:, k, :, col]
                    if np.min(np.hypot(v[:, i], v[:, j])) < 0.5:
                        continue
                    ang = np.unwrap(np.arctan2(v[:, j], v[:, i]))
                    if np.ptp(ang) > 1.9 * math.pi:
                        return [True]
    return [False]


def parse_angles(spec: str, ds: Dataset, dof: int) -> list[bool]:
    if spec == "auto":
        return detect_angles(ds, dof)
    if spec == "none":
        return [False] * dof
    try:
        idx = {int(s) for s in spec.split(",") if s.strip()}
    except ValueError:
        raise TrainingError(f"--angles {spec!r}: use auto, none or a comma list of 1-based coordinate indices") from None
    bad = sorted(i for i in idx if not 1 <= i <= dof)
    if bad:
        raise TrainingError(f"--angles {spec!r}: index {bad[0]} is outside 1..{dof}")
    return [i + 1 in idx for i in range(dof)]


def known_coordinate_map(ds: Dataset, coords: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``q = E x + e0`` for pose columns (positions ``<body>.x|y|z``, matrix entries ``<body>.Rij``).

    Both are exactly linear in the natural coordinates: ``R e_k = (r_k - r0) / L`` and the
    body origin is ``r0 - R com``.
    """
    n = ds.layout.size
    E = np.zeros((len(coords), n))
    problems = []
    names = {b.name for b in ds.layout.bodies}
    for row, col in enumerate(coords):
        body, _, fld = col.partition(".")
        if body not in names:
            problems.append(f"--coords: column '{col}': no body '{body}' (bodies: {', '.join(sorted(names))})")
            continue
        bl = ds.layout.body(body)
        o, L = bl.offset, bl.length
        if fld in ("x", "y", "z"):
            a = "xyz".index(fld)
            # origin_a = r0_a - sum_k com_k (r_k - r0)_a / L
            E[row, o + a] = 1.0 + sum(bl.com) / L
            for k in range(3):
                E[row, o + 3 * (k + 1) + a] -= bl.com[k] / L
        elif len(fld) == 3 and fld[0] == "R" and fld[1] in "123" and fld[2] in "123":
            a, k = int(fld[1]) - 1, int(fld[2]) - 1
            E[row, o + 3 * (k + 1) + a] = 1.0 / L
            E[row, o + a] = -1.0 / L
        else:
            problems.append(f"--coords: column '{col}': '{fld}' is not usable as a minimal coordinate; "
                            "use a position (x, y, z) or a rotation-matrix entry (R11..R33) of a body")
    if problems:
        raise TrainingError(problems)
    if np.linalg.matrix_rank(E) < len(coords):
        raise TrainingError(f"--coords {','.join(coords)}: the columns are linearly dependent; choose independent ones")
    return E, np.zeros(len(coords))


def affine_hull(x: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """An orthonormal basis ``V`` (n, r) of the affine hull of the samples ``x`` (T, n) about
    their mean, and the spread of the data along each basis vector (r,).

    The directions kept are the principal directions whose singular value exceeds ``tol`` times
    the largest: the ones the data move in.  The rest are the data's exact linear relations,
    which in natural coordinates are many: every coordinate of a planar mechanism normal to its
    plane, a joint's point coinciding in both bodies (or with a ground point), a planar body's
    in-plane axes (one the other turned by 90 degrees), parallel joint axes.  A five-bar's 48
    coordinates have a 6-dimensional hull (singular values fall from 7e-3 to 1e-13 of the
    largest); an RSUR spatial four-bar's fall gradually (1, 8e-2, 4e-3, 1e-4, 1e-5, 9e-7, ...),
    and what lies below ``tol`` is dropped.
    """
    c = x - x.mean(axis=0)
    _, S, Vt = np.linalg.svd(c, full_matrices=False)
    r = int(np.sum(S > tol * S[0])) if S.size and S[0] > 0 else 0
    return Vt[:r].T.copy(), S[:r] / math.sqrt(max(len(x), 1))


#: the encoder's hull inputs are whitened up to this ratio of the largest spread: a direction the
#: data barely move in (the four-bar's 4th, 4e-6 of the first: a curvature effect of the motion)
#: stays small instead of becoming an input as large as the motion itself (which kept the
#: four-bar's autoencoder from fitting at all: reconstruction loss 0.23 against 5e-4)
WHITEN_FLOOR = 1e-2


def hull_maps(x: np.ndarray, x_scale: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """The decoder's output map and the encoder's input map for the data's affine hull
    (:func:`affine_hull`, whose tolerance is taken in metres): ``x - x_mean = out_map y`` and
    ``z = in_map^T (x - x_mean)``.  ``P``, the data's principal directions inside the hull in
    z-scored coordinates (orthonormal there), gives ``out_map = diag(x_scale) P``: a unit of
    ``y`` weighs in the reconstruction loss as a unit of an unconstrained decoder's z-scored
    output did.  The encoder reads the whitened components, ``in_map = diag(1 / x_scale) P /
    spread`` (each spread floored at :data:`WHITEN_FLOOR` of the largest).  Measured on the five-bar (loss after 300 Adam epochs and 400 L-BFGS iterations):
    no hull 5.4e-4; hull 2.5e-4 with the encoder on all coordinates, 2.2e-4 on the hull's
    z-scored components, 1.2e-4 whitened (the default); known coordinates 2.3e-4 without the
    hull, 3.4e-5 with it, and 4.5e-4 with an output map scaled by the spreads instead."""
    V, _ = affine_hull(x, tol)
    Q, _ = np.linalg.qr(V / x_scale[:, None])
    z = ((x - x.mean(axis=0)) / x_scale) @ Q
    _, S, Wt = np.linalg.svd(z, full_matrices=False)
    P = Q @ Wt.T
    spread = S / math.sqrt(len(x))
    spread = np.maximum(spread, WHITEN_FLOOR * spread[0] if spread.size else 0.0) if spread.size else spread
    return x_scale[:, None] * P, P / np.maximum(spread, 1e-300) / x_scale[:, None]
