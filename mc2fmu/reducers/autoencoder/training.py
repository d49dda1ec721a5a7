"""Training the physics-informed autoencoder (seed 000, Algorithms 1-2, appendix; docs/method.md).

Loss, each term divided per coordinate by its data spread so that every term counts:

* ``L_rec``: ``|h_d(h_e(x)) - x|^2`` over the window's first three samples, scaled by the
  spread of ``x``;
* ``--loss sim`` (default) adds ``L_dyn``: the dynamics residual taken entirely in decoded
  space, ``(h_d(q_hat_{i+1}) - h_d(q_{i+1})) / dt^2``, a pure acceleration error scaled by
  the spread of the data's accelerations.  ``q_hat_{i+1}`` is one step of the model's step
  map from the encoded triplet (velocity from the data);
* ``--loss appendix`` instead adds the paper appendix's kinematic terms (eqs. A.1-A.7):
  ``l_v L_vel + l_a L_acc``, the decoded velocity ``J qdot`` and acceleration
  ``J qddot + H : qdot qdot`` against the data's ``xd`` and finite-difference accelerations,
  with ``qdot = (dh_e/dx) xd`` and ``qddot = (dh_e/dx) xdd + d2h_e/dx2 : xd xd`` (A.5, A.6);
* ``L_rig`` (``--rigidity-weight``, default 1): each decoded body's six point distances against
  the rigid ones, at 1000 fixed latent points spread uniformly over the box of the encoded
  data (angle-type coordinates over a whole turn), scaled by the spread of the body's
  coordinates.  The other terms hold the decoder only on the training path; this holds it to
  rigid bodies everywhere the model may go, so that ``J^T M J`` and ``J^T f`` are a rigid
  mechanism's.  Measured (benchmarks/train_accuracy.py, ``L_curv`` off): the four-bar's
  training-run NRMSE 0.33 -> 0.13 %, the five-bar's 1.53 -> 0.75 %;
* ``L_curv`` (``--curvature-weight``, default 1; either loss): the second difference of
  the decoded triplet against the data's, over ``dt^2``, scaled as ``L_dyn``: the
  reconstruction error's acceleration along the path, which holds the chart's tangent and
  curvature to the data's in every natural coordinate, not only as the trained forces weigh
  them (what a model run with other physical parameters needs; docs/method.md);
* ``--rollout K`` adds ``L_roll`` (either loss): ``K`` steps of the model's own step map (the
  one simulation runs) from the encoded ``q_{i-1}, q_i`` with the data's inputs; the decoded
  error at rollout step ``k``, ``h_d(q_hat_{i+k}) - h_d(h_e(x_{i+k}))``, is divided by
  ``k (k + 1) / 2 dt^2`` (the displacement a constant acceleration error makes in ``k`` steps
  of the map) and by the acceleration spread, so each step weighs like ``L_dyn``.

The decoder's outputs span the training data's affine hull (:func:`hull_maps`; ``hull_tol``,
default 1e-5 of the largest singular value): the exact linear relations of the natural
coordinates (planarity, joint points, a planar body's axes) hold wherever the model goes, the
encoder reads the hull's whitened components, and ``L_rec``, ``L_dyn`` and the dynamics are
computed in the ``r`` hull coordinates (:class:`~.torch_model.TorchManifoldModel`), at a cost
that grows with ``r`` rather than with the number of bodies.

``--identify`` (seed 004), for forces the mechanism file does not describe: every term of the
library (:mod:`mc2fmu.models.terms`) joins the dynamics at the start of L-BFGS with a zero
coefficient and is trained with the model (the smoothed signs' velocity scales too), so the
decoder never has to bend to absorb the missing force.  Then seed 004's sequentially
thresholded least squares on the trained model's residual ``M_m qddot - (f_m - G_m + J^T
f_spring)`` keeps the terms that matter, and ``identify_iters`` further L-BFGS iterations train
the model with those (the dropped ones stay zero).  Measured (benchmarks/unknown_forces.py,
four-bar with friction, known coordinate, every term group): starting the terms from least
squares after the warm-up, or identifying only after a training without them, both left the
model in a worse minimum (held-out NRMSE 1.5 % and 24 %, against 0.5 % from zero).

Optimisation: Adam with a decaying rate, then L-BFGS (:mod:`.lbfgs`: torch's, its two-loop
recursion in closed form, restarted after a stall), full batch on a subsample of the data
windows; 95/5 random split, the weights with the best validation loss are kept.  L-BFGS fits
a growing share of the training windows (:func:`lbfgs_schedule`): every ``lbfgs_subset``-th
first, twice as many each time the fit stalls there or overfits it (:func:`share_too_small`),
keeping its memory; convergence is decided on all of them.  Seeded and
deterministic on CPU; with a :class:`Checkpointer` the complete state is written at iteration
boundaries, and a resumed run ends with exactly the weights of an uninterrupted one.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import jvp

from ...data.dataset import Dataset
from ...errors import TrainingError
from ...mechanics.natural import ForceModel, poses_from_nc
from ...models.spring_laws import fit_laws
from ...models.manifold import acceleration, known_rhs, mass_times, wrap_to_pi
from ...models.terms import TermLibrary, build_library, evaluate, parse_groups, stlsq
from ..base import Checkpointer, TrainingInterrupted, config_to_dict
from .config import TrainConfig
from .lbfgs import LBFGS
from .torch_model import Decoder, LinearEncoder, NeuralEncoder, TorchManifoldModel

F64 = torch.float64
log = logging.getLogger(__name__)

def _scales(a: np.ndarray, floor: float) -> np.ndarray:
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


def build_model(ds: Dataset, cfg: TrainConfig, angles: list[bool]) -> TorchManifoldModel:
    x_all = ds.x
    x_mean = x_all.mean(axis=0)
    x_scale = _scales(x_all, cfg.scale_floor)
    out_map = in_map = None
    if cfg.hull_tol > 0:
        out_map, in_map = hull_maps(x_all, x_scale, cfg.hull_tol)
        if out_map.shape[1] < cfg.dof:
            raise TrainingError(
                f"--dof {cfg.dof}: the training data move in only {out_map.shape[1]} independent direction(s) of the "
                f"natural coordinates, fewer than the {cfg.dof} minimal coordinate(s) asked for: the runs do not "
                "excite every DOF (give runs that move each one), or the mechanism has fewer DOF (see "
                "`mc2fmu estimate-dof`)")
    if cfg.coords:
        E, e0 = known_coordinate_map(ds, cfg.coords)
        encoder = LinearEncoder(E, e0)
        q = x_all @ E.T + e0
        q_mean, q_scale = q.mean(axis=0), _scales(q, cfg.scale_floor)
    else:
        encoder = NeuralEncoder(ds.layout.size, cfg.dof, cfg.encoder_hidden, cfg.activation, angles, x_mean, x_scale,
                                in_map)
        q_mean, q_scale = np.zeros(cfg.dof), np.ones(cfg.dof)
    decoder = Decoder(cfg.dof, ds.layout.size, cfg.decoder_hidden(ds.layout.size), cfg.activation, angles, q_mean, q_scale,
                      x_mean, x_scale, out_map)
    forces, residual = with_spring_laws(ds, cfg)
    model = TorchManifoldModel(decoder, encoder, ds.M, forces, cfg.step_map)
    model.spring_law_residuals = residual  # the learned laws' fit, for the training record
    model.hull_dim = ds.layout.size if out_map is None else out_map.shape[1]
    return model


def with_spring_laws(ds: Dataset, cfg: TrainConfig) -> tuple[ForceModel, dict[str, float]]:
    """The dataset's force model, with the learned laws of its recorded springs (fitted here on
    the data's lengths, rates and recorded tensions; see :mod:`mc2fmu.models.spring_laws`), and
    each law's rms tension residual relative to the recorded tension's rms."""
    springs = ds.forces.springs
    if springs is None or not any(sp.recorded for sp in ds.mechanism.springs):
        return ds.forces, {}
    laws, residual = fit_laws(springs, ds.mechanism.springs, ds.x, ds.xd, ds.tensions, seed=cfg.seed)
    for name, r in residual.items():
        log.info("spring '%s': learned law, rms tension residual %.2e of the recorded tension's rms", name, r)
    forces = dataclasses.replace(ds.forces, springs=dataclasses.replace(springs, laws=laws))
    return forces, residual


@dataclass
class TrainResult:
    model: TorchManifoldModel
    angles: list[bool]
    history: list[dict]
    metrics: dict
    seconds: float


def loss_scales(cfg: TrainConfig, model: TorchManifoldModel, ds: Dataset, W: Windows) -> dict[str, np.ndarray]:
    """Per-term data scales: positions ``x``, velocities ``v``, accelerations ``a``."""
    acc = (W.x[:, 2] - 2 * W.x[:, 1] + W.x[:, 0]).numpy() / W.dt**2
    vel = W.xd[:, 1].numpy()
    if cfg.loss_scale == "channel":
        # the decoder's output scales are exactly the per-channel spreads of x
        return {"x": model.decoder.x_scale.numpy(), "v": _scales(vel, cfg.scale_floor), "a": _scales(acc, cfg.scale_floor)}
    # one scale per term: errors weigh as metres (m/s, m/s^2) whatever the channel
    rms = lambda a: np.full(ds.layout.size, np.sqrt(np.mean(a.var(axis=0))))  # noqa: E731
    return {"x": rms(ds.x), "v": rms(vel), "a": rms(acc)}


class LossFunction:
    """The training loss on a batch of :class:`Windows`; returns the total and its parts."""

    def __init__(self, model: TorchManifoldModel, cfg: TrainConfig, angles: list[bool], scales: dict[str, np.ndarray],
                 layout=None):
        self.model, self.cfg = model, cfg
        self.x_scale, self.v_scale, self.a_scale = (torch.as_tensor(scales[k], dtype=F64) for k in "xva")
        self.angle_mask = torch.tensor(angles, dtype=torch.bool)
        self.weights = {"rec": cfg.rec_weight, "dyn": cfg.dyn_weight, "vel": cfg.vel_weight,
                        "acc": cfg.acc_weight, "roll": cfg.rollout_weight, "rig": cfg.rigidity_weight,
                        "curv": cfg.curvature_weight, "gauge": cfg.gauge}
        if cfg.rigidity_weight:
            if layout is None:
                raise ValueError("the rigidity term needs the NC layout (the bodies' point distances)")
            self._rigidity_setup(layout)
        self.reduced = model.reduced
        self._cache: dict[int, tuple[Windows, dict]] = {}  # see _data
        if self.reduced:
            # with a hull decoder (x = x_mean + P y) the one-step terms are taken in hull
            # coordinates: for x in the hull, |(P y - (x - x_mean)) / x_scale|^2 = |y - y(x)|^2 with
            # y(x) = P^T diag(x_scale^-2) (x - x_mean) (P is orthonormal in z-scored coordinates),
            # and |P e / a_scale|^2 = |e L|^2 with L L^T = P^T diag(a_scale^-2) P
            P = model.decoder.out_map
            self.n_x = P.shape[0]
            self.to_hull = P / self.x_scale[:, None] ** 2
            self.acc_factor = torch.linalg.cholesky(P.T @ (P / self.a_scale[:, None] ** 2))

    def _rigidity_setup(self, layout) -> None:
        """Latent sample points (fixed, in the unit cube) and each body's six rigid point distances."""
        gen = torch.Generator().manual_seed(self.cfg.seed + 1)
        self.unit = torch.rand(self.cfg.rigidity_points, len(self.angle_mask), generator=gen, dtype=F64)
        self.n_b = len(layout.bodies)
        pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
        self.pair_i, self.pair_j = torch.tensor([p[0] for p in pairs]), torch.tensor([p[1] for p in pairs])
        self.rigid = torch.tensor([[bl.length * (1.0 if i == 0 else math.sqrt(2.0)) for i, _ in pairs]
                                   for bl in layout.bodies], dtype=F64)
        # a distance error weighs like a reconstruction error of the body's points
        self.rig_scale = torch.stack([self.x_scale[bl.slice].mean() for bl in layout.bodies])[:, None]
        dec = self.model.decoder
        if getattr(dec, "out_map", None) is not None:
            # x = x_mean + P y is affine in y, so is each pair's difference: d = c + D y with
            # D (n_b 6 3, r), c (n_b 6 3,), no decoding to all natural coordinates (measured on
            # A02, 81 bodies, r = 2: the gathers of the decoded points were most of the closure)
            diff = lambda a: (a[:, self.pair_i] - a[:, self.pair_j]).reshape(self.n_b * len(pairs) * 3, -1)  # noqa: E731
            self.rig_D = diff(dec.out_map.reshape(self.n_b, 4, 3, -1))
            self.rig_c = diff(dec.x_mean.reshape(self.n_b, 4, 3, 1))[:, 0]

    def rigidity(self, q: torch.Tensor) -> torch.Tensor:
        """L_rig: the decoded bodies' point distances against the rigid ones, at latent points
        spread uniformly over the box of the encoded data (angles over a whole turn): the
        decoder is held to rigid bodies off the training trajectory too."""
        lo, hi = q.detach().min(0).values, q.detach().max(0).values
        lo = torch.where(self.angle_mask, -math.pi, lo)
        hi = torch.where(self.angle_mask, math.pi, hi)
        points = lo + (hi - lo) * self.unit
        if hasattr(self, "rig_D"):
            d = torch.addmm(self.rig_c, self.model.decoder.hull(points), self.rig_D.T).reshape(len(points), self.n_b, -1, 3)
        else:
            x = self.model.decoder(points).reshape(len(points), self.n_b, 4, 3)
            d = x[:, :, self.pair_i] - x[:, :, self.pair_j]
        dist = torch.sqrt((d * d).sum(-1))
        return ((dist - self.rigid) / self.rig_scale).pow(2).mean()

    def _continuous(self, q_ref: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Shift angle-type entries of ``q`` by 2 pi k to be nearest ``q_ref`` (unwrapping a triplet)."""
        if not self.angle_mask.any():
            return q
        return torch.where(self.angle_mask, q_ref + wrap_to_pi(q - q_ref), q)

    def _data(self, W: Windows) -> dict[str, torch.Tensor]:
        """What the loss reads of the windows' triplets through fixed maps, computed once per
        :class:`Windows`: the encoder's inputs (B, 3, .) and, with a hull decoder, the
        reconstruction targets in hull coordinates (3 B, r).  Per evaluation these products
        with every natural coordinate were most of an A02 closure (972 coordinates, r = 2)."""
        cached = self._cache.get(id(W))
        if cached is not None and cached[0] is W:
            return cached[1]
        with torch.no_grad():
            x = W.x[:, :3]
            data = {"enc": self.model.encoder.inputs(x.reshape(-1, x.shape[-1])).reshape(len(W), 3, -1)}
            if self.reduced:
                data["target"] = (x.transpose(0, 1).reshape(-1, x.shape[-1]) - self.model.decoder.x_mean) @ self.to_hull
        if len(self._cache) >= 8:  # the training, validation and whole sets; a few others at most
            self._cache.pop(next(iter(self._cache)))
        self._cache[id(W)] = (W, data)
        return data

    def encode_triplets(self, W: Windows) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z = self._data(W)["enc"]
        q_prev, q, q_next = (self.model.encoder.from_inputs(z[:, k]) for k in range(3))
        return self._continuous(q, q_prev), q, self._continuous(q, q_next)

    def _hull_rec(self, target: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """L_rec in hull coordinates against the data's hull coordinates ``target`` (the data's
        distance from the hull, ~1e-13 of its spread, left out) and the decoded ``y``."""
        y = self.model.decoder.hull(q)
        return (y - target).pow(2).sum(-1).mean() / self.n_x, y

    def _rec(self, W: Windows, q_prev: torch.Tensor, q: torch.Tensor, q_next: torch.Tensor,
             y_mid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """L_rec, and ``h_d(q_next)`` when it was decoded on the way (autoencoder: the triplet;
        in hull coordinates with a hull decoder).  ``y_mid``: the hull decoder's ``y`` at ``q``
        when the caller has it (the dynamics term's), not decoded again."""
        dec = self.model.decoder
        if self.reduced:
            target = self._data(W)["target"]  # the three samples' targets, one after the other
            B = len(q)
            if isinstance(self.model.encoder, LinearEncoder):
                mid = target[B:2 * B]
                if y_mid is None:
                    return self._hull_rec(mid, q)[0], None
                return (y_mid - mid).pow(2).sum(-1).mean() / self.n_x, None
            if y_mid is None:
                rec, y = self._hull_rec(target, torch.cat([q_prev, q, q_next]))
                return rec, y[2 * B:]
            ends = dec.hull(torch.cat([q_prev, q_next]))
            y = torch.cat([ends[:B], y_mid, ends[B:]])
            return (y - target).pow(2).sum(-1).mean() / self.n_x, ends[B:]
        if isinstance(self.model.encoder, LinearEncoder):
            return ((dec(q) - W.x[:, 1]) / self.x_scale).pow(2).mean(), None
        xs = torch.cat([W.x[:, 0], W.x[:, 1], W.x[:, 2]])
        decoded = dec(torch.cat([q_prev, q, q_next]))
        return ((decoded - xs) / self.x_scale).pow(2).mean(), decoded[2 * len(q):]

    def rec(self, W: Windows) -> torch.Tensor:
        """L_rec alone."""
        return self._rec(W, *self.encode_triplets(W))[0]

    def terms(self, W: Windows) -> dict[str, torch.Tensor]:
        m, dt = self.model, W.dt
        x_prev, x, x_next = W.x[:, 0], W.x[:, 1], W.x[:, 2]
        q_prev, q, q_next = self.encode_triplets(W)
        dec = m.decoder
        Mm = None  # M_m at the training states, when the dynamics term formed it
        if self.cfg.loss == "sim":
            v = m.step_map.training_velocity(q_prev, q, q_next, dt)
            dyn_terms, Hvv = m.terms_and_curvature(q, W.u[:, 1], v)
            Mm = dyn_terms.Mm
        # with a hull decoder the dynamics' y(q) is the reconstruction's middle sample: decoded
        # once (measured, benchmarks/loss_cost.py: the 3-RRR's closure 21.8 -> 18.7 ms)
        y_mid = dyn_terms.x if self.cfg.loss == "sim" and self.reduced else None
        rec, decoded_next = self._rec(W, q_prev, q, q_next, y_mid)  # h_d(q_next) (hull coordinates), or None
        parts = {"rec": rec}
        if self.cfg.loss == "sim":
            q_hat = 2.0 * q - q_prev + dt * dt * acceleration(dyn_terms, v, Hvv)
            if self.reduced:
                y_next = dec.hull(q_next) if decoded_next is None else decoded_next
                err = (dec.hull(q_hat) - y_next) / (dt * dt)
                parts["dyn"] = (err @ self.acc_factor).pow(2).sum(-1).mean() / self.n_x
            else:
                decoded_next = dec(q_next) if decoded_next is None else decoded_next
                parts["dyn"] = ((dec(q_hat) - decoded_next) / (dt * dt) / self.a_scale).pow(2).mean()
        else:
            parts["vel"], parts["acc"] = self.kinematic(x, W.xd[:, 1], (x_next - 2.0 * x + x_prev) / (dt * dt))
        if self.cfg.curvature_weight:
            parts["curv"] = self.curvature(W, q_prev, q, q_next)
        if self.cfg.rollout_steps:
            parts["roll"] = self.rollout(W, q_prev, q)
        if self.cfg.rigidity_weight:
            parts["rig"] = self.rigidity(q)
        if self.weights["gauge"]:
            parts["gauge"] = self.gauge(q, Mm)
        return parts

    def curvature(self, W: Windows, q_prev: torch.Tensor, q: torch.Tensor, q_next: torch.Tensor) -> torch.Tensor:
        """L_curv: the second difference of the decoded triplet against the data's, divided by
        dt^2 (an acceleration, scaled as the dynamics term's): the reconstruction's error made
        smooth along the training path, so the chart's curvature (and tangent) match the data's
        in every natural coordinate, including those the trained forces do not weigh."""
        dt = W.dt
        dec = self.model.decoder
        if self.reduced:
            B = len(q)
            y = dec.hull(torch.cat([q_prev, q, q_next]))
            t = self._data(W)["target"]
            d2 = (y[:B] - 2.0 * y[B:2 * B] + y[2 * B:]) - (t[:B] - 2.0 * t[B:2 * B] + t[2 * B:])
            return ((d2 / (dt * dt)) @ self.acc_factor).pow(2).sum(-1).mean() / self.n_x
        x = dec(torch.cat([q_prev, q, q_next])).reshape(3, len(q), -1)
        d2 = (x[0] - 2.0 * x[1] + x[2]) - (W.x[:, 0] - 2.0 * W.x[:, 1] + W.x[:, 2])
        return (d2 / (dt * dt) / self.a_scale).pow(2).mean()

    def gauge(self, q: torch.Tensor, Mm: torch.Tensor | None = None) -> torch.Tensor:
        """L_gauge: the variance of ``log det M_m`` over the training states ``q``; ``Mm``:
        ``M_m`` at ``q`` if the caller has it (the dynamics term's), else it is formed here."""
        dec, m = self.model.decoder, self.model
        if Mm is None and self.reduced:  # in hull coordinates, the Jacobian alone
            phi, Jphi, _ = dec.features(q, second=False)
            J = dec.net.forward_jh(phi, Jphi, None)[1]
            Mm = J.transpose(1, 2) @ (m.r_mass @ J)
        elif Mm is None:
            J = dec.value_jh(q)[1]
            Mm = J.transpose(1, 2) @ mass_times(m.mass, J)
        # a state where the chart has no inertia (J = 0) adds a finite penalty and no NaN
        ld = torch.log(torch.linalg.det(Mm).clamp_min(1e-300))
        return (ld - ld.mean()).pow(2).mean()

    def kinematic(self, x: torch.Tensor, xd: torch.Tensor, xdd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Appendix eqs. A.1-A.6: decoded velocity and acceleration against the data's."""
        enc = self.model.encoder
        tangent = lambda y: jvp(enc, (y,), (xd,))[1]  # noqa: E731  (dh_e/dx) xd at y
        qd, curvature = jvp(tangent, (x,), (xd,))  # A.5, and d2h_e/dx2 : xd xd
        q, qdd_lin = jvp(enc, (x,), (xdd,))
        qdd = qdd_lin + curvature  # A.6
        _, J, H = self.model.decoder.value_jh(q)
        v_hat = torch.einsum("bnm,bm->bn", J, qd)  # A.3
        a_hat = torch.einsum("bnm,bm->bn", J, qdd) + torch.einsum("bnij,bi,bj->bn", H, qd, qd)  # A.4
        return ((v_hat - xd) / self.v_scale).pow(2).mean(), ((a_hat - xdd) / self.a_scale).pow(2).mean()

    def rollout(self, W: Windows, q_prev: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """``K`` steps of the model's step map; step ``k``'s decoded error as an acceleration.

        Run from every ``K``-th window (they are in time order), so the ``K`` sequential steps
        cost about what the one-step terms on all windows cost.
        """
        m, dt, K = self.model, W.dt, self.cfg.rollout_steps
        W, q_prev, q = W.subset(np.arange(0, len(W), K)), q_prev[::K], q[::K]
        predicted = []
        for k in range(K):
            q_prev, q = q, m.step(q_prev, q, W.u[:, k + 1], dt)
            predicted.append(q)
        B, n = W.x.shape[0], W.x.shape[2]
        q_hat = torch.stack(predicted, 1).reshape(B * K, -1)
        q_data = m.encoder(W.x[:, 2:K + 2].reshape(B * K, n))  # the decoder is 2 pi periodic in angles
        err = (m.decoder(q_hat) - m.decoder(q_data)).reshape(B, K, n)
        k = torch.arange(1, K + 1, dtype=F64)
        return (err / (0.5 * k * (k + 1) * dt * dt)[None, :, None] / self.a_scale).pow(2).mean()

    def __call__(self, W: Windows, kinematic_only: bool = False) -> tuple[torch.Tensor, dict]:
        """``kinematic_only``: L_rec alone (the warm-up phase; the other terms are not computed)."""
        if kinematic_only:
            rec = self.rec(W)
            return self.weights["rec"] * rec, {"rec": rec.item()}
        parts = self.terms(W)
        loss = sum(self.weights[k] * v for k, v in parts.items())
        return loss, {k: v.item() for k, v in parts.items()}

    def fit(self, parts: dict) -> float:
        """The weighted loss of the fit from the parts a call returned (other entries of the
        dict ignored), ``L_gauge`` left out: it chooses the chart (see :func:`lbfgs_converged`)."""
        return sum(self.weights[k] * parts[k] for k in parts if k in self.weights and k != "gauge")


def train(ds: Dataset, cfg: TrainConfig, progress: Callable[[dict], None] | None = None,
          checkpoint: "Checkpointer | None" = None) -> TrainResult:
    """Train a reduced model on a dataset; deterministic for a given seed on one machine (the
    float reductions of torch's CPU kernels may differ between CPUs).

    With ``checkpoint`` the training state is written to its file every ``checkpoint.every``
    seconds and on KeyboardInterrupt (then :class:`TrainingInterrupted` is raised), and with
    ``checkpoint.resume`` training continues from that file.  The caller's torch random state
    is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        return Training(ds, cfg, progress, checkpoint).run()


#: 4: the L-BFGS of :mod:`.lbfgs` (its memory in ring buffers) with 200 pairs (3: torch's with 100,
#: 2: with 50); an optimiser state of an earlier version would not resume this optimiser
CHECKPOINT_VERSION = 4
LBFGS_CHUNK = 20  # L-BFGS iterations per optimiser step (and per progress entry)
#: the window of the L-BFGS convergence test (:func:`lbfgs_converged`).  Measured (validation
#: loss per 20 iterations, defaults): the four-bar's fell by 0.4 % between iterations 620 and
#: 1020 and by 1 % more up to 2000 (its L-BFGS time: 26 s of 59 s spent on that 1 %); the
#: five-bar's was still falling by 10-30 % per 400 iterations at 2000-4400 and flattened at
#: about 4800 (0.4 % between 4620 and 5020)
LBFGS_WINDOW = 400
#: L-BFGS's memory (pairs of steps and gradient changes it keeps).  Measured with the defaults
#: (benchmarks/train_accuracy.py, benchmarks/a02.py, docs/benchmarks.md "Reduced models"), learnt
#: coordinates: 50 -> 100 pairs took the five-bar from 3760 to 2800 iterations (NRMSE train /
#: low / shape 0.090 / 0.272 / 0.551 -> 0.068 / 0.195 / 0.374 %) and the 3-RRR from the 6000 cap
#: to 3980 (0.090 / 0.375 / 0.530 -> 0.103 / 0.404 / 0.587 %); 100 -> 200 pairs (torch's
#: optimiser still) the 3-RRR to 0.070 / 0.260 / 0.390 % (its loss at equal iterations about
#: half: 3.9e-6 after 2800 instead of 6.5e-6), the five-bar to 0.168 / 0.101 / 0.200 %.  With
#: :mod:`.lbfgs` the memory's cost per iteration no longer grows with a Python loop per pair
LBFGS_HISTORY = 200


def lbfgs_converged(history: list[dict], tol: float, floor: float = 0.0, window: int = LBFGS_WINDOW) -> bool:
    """Whether the L-BFGS phase has converged: the best validation loss of the fit fell by less
    than the fraction ``tol`` over the last ``window`` iterations, or it is at most ``floor``
    (``history``: the training's records, L-BFGS ones with ``iter`` and ``val_fit``, the
    validation loss without L_gauge, or ``val``; ``tol`` 0 and ``floor`` 0: never; see
    :data:`~.config.AUTO_LBFGS_FLOOR`).  L_gauge is left out because it is a choice of the
    chart, not of the fit: on the spatial four-bar it was 80 % of the validation loss at the end
    and still falling.  Measured (defaults, learnt coordinates): the spatial four-bar stopped at 3220
    L-BFGS iterations instead of 3440 with the same errors, the four-bar at 1240 instead of
    1720 (training run 0.051 -> 0.034 %)."""
    bests = _window_bests(history, window)
    if bests is None:
        return False
    best_now, best_then = bests
    if floor > 0 and best_now <= floor:
        return True
    if tol <= 0 or best_then is None:
        return False
    return best_now > (1.0 - tol) * best_then


def _window_bests(history: list[dict], window: int) -> tuple[float, float | None] | None:
    """The best validation loss of the fit over all L-BFGS records and over those at least
    ``window`` iterations before the last (None: no such records)."""
    runs = [(e["iter"], e.get("val_fit", e["val"])) for e in history if e["stage"] == "lbfgs"]
    if not runs:
        return None
    best_now = min(v for _, v in runs)
    last = runs[-1][0]
    before = [v for it, v in runs if it <= last - window]
    return best_now, (min(before) if last >= window and before else None)


def lbfgs_fall(history: list[dict], window: int = LBFGS_WINDOW) -> float | None:
    """How far the best validation loss of the fit fell over the last ``window`` iterations, as
    a fraction, on the L-BFGS records of the last record's share: what :func:`lbfgs_converged`
    compares with ``--lbfgs-tol`` (None before a whole window)."""
    lb = [e for e in history if e["stage"] == "lbfgs"]
    if not lb:
        return None
    every = lb[-1].get("every", 1)
    bests = _window_bests([e for e in lb if e.get("every", 1) == every], window)
    if bests is None or bests[1] is None or not math.isfinite(bests[1]) or bests[1] <= 0:
        return None
    return 1.0 - bests[0] / bests[1]


def lbfgs_schedule(history: list[dict], tol: float, floor: float, first: int) -> tuple[int, bool]:
    """Where the L-BFGS phase stands, from the training's records: the share of the training
    triplets to fit (every Nth; ``first`` before any L-BFGS record) and whether it has
    converged.  The share halves, down to every triplet, when :func:`lbfgs_converged`'s rule
    holds on the records of the current share or :func:`share_too_small` says it overfits, and
    becomes every triplet at once when the validation loss was not finite (the training then
    goes on from the best weights); the phase has converged when the rule holds on
    every triplet or the fit is at most ``floor`` (the validation triplets are the same at
    every share, so their loss is comparable across shares).  Records without ``every`` (the
    fit of every triplet) are the full share."""
    lb = [e for e in history if e["stage"] == "lbfgs"]
    every = lb[-1].get("every", 1) if lb else first
    if lbfgs_converged(lb, 0.0, floor):
        return every, True
    here = [e for e in lb if e.get("every", 1) == every]
    if every > 1 and here and not math.isfinite(here[-1]["val"]):  # a share that broke the model
        return 1, False
    if lbfgs_converged(here, tol):
        return (1, True) if every == 1 else (max(1, every // 2), False)
    if every > 1 and share_too_small(here):
        return max(1, every // 2), False
    return every, False


#: the fewest triplets a share starts with (fewer training triplets: a larger first share, or all).
#: A tiny model on 24 of a toy run's 95 triplets fitted them and diverged between them (validation
#: loss NaN after 760 iterations); a closure on so few costs little less than on all of them
MIN_SHARE_TRIPLETS = 200

#: a share of the training triplets is too small when the rest of the training triplets fit
#: more than :data:`OVERFIT_RATIO` times worse
#: than the share over the last :data:`OVERFIT_RECORDS` records (their median ratio: one record's
#: line search may overshoot).  Measured (defaults, learnt coordinates): on a quarter of its
#: triplets the five-bar's validation loss was 8x its training loss after 400 iterations and rose
#: to 3e-4 by 1200, where the growth by the rule alone came (1380); the 3-RRR's ratio stayed near
#: 1 on a quarter.  The 50 validation triplets alone missed the MacPherson whose mechanism file
#: has the wrong strut law: on half its triplets the fit was 0.094, the validation 0.156, the
#: other half 3.2, and on all of them the model diverged (benchmarks/unknown_forces.py)
OVERFIT_RATIO = 2.0
OVERFIT_RECORDS = 5


def share_too_small(records: list[dict]) -> bool:
    """Whether the L-BFGS records of one share (with ``fit`` and ``rest_fit``, the fit of the
    training triplets outside the share) say the share overfits: the median of the last
    :data:`OVERFIT_RECORDS` ratios of the rest's fit to the share's exceeds :data:`OVERFIT_RATIO`."""
    last = [e for e in records if "rest_fit" in e][-OVERFIT_RECORDS:]
    if len(last) < OVERFIT_RECORDS:
        return False
    ratios = sorted(e["rest_fit"] / max(e["fit"], 1e-300) for e in last)
    return ratios[len(ratios) // 2] > OVERFIT_RATIO


def write_checkpoint(checkpoint: Checkpointer, state: dict) -> None:
    checkpoint.save(lambda tmp: torch.save(state, tmp))


def read_checkpoint(checkpoint: Checkpointer, config: dict, data_hash: str) -> dict:
    p = checkpoint.path
    if not p.exists():
        raise TrainingError(f"{p}: no checkpoint to resume from; run without --resume to start training")
    try:
        state = torch.load(p, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user error
        raise TrainingError(f"{p}: not a readable training checkpoint ({type(exc).__name__}); "
                            "delete it and run without --resume to start over") from None
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise TrainingError(f"{p}: not a training checkpoint of this mc2fmu version; "
                            "delete it and run without --resume to start over")
    fix = f"resume with the same data and options, or delete {p} (and drop --resume) to start over"
    try:
        saved = json.loads(state["config"])
        saved_hash = str(state["data_hash"])
        if not isinstance(saved, dict):
            raise TypeError("its options are not a table")
    except (KeyError, TypeError, ValueError) as exc:
        raise TrainingError(f"{p}: a damaged training checkpoint ({type(exc).__name__}); delete it and run without "
                            "--resume to start over") from None
    # an option a checkpoint predates counts as what training did before it existed: its default, or
    # for a term that came in off and became the default later, off
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig) if f.default is not dataclasses.MISSING}
    defaults.update(BEFORE_OPTION)
    changed = [f"{k} {saved.get(k, defaults.get(k))!r} -> {v!r}" for k, v in config.items()
               if saved.get(k, defaults.get(k)) != v]
    if changed:
        raise TrainingError(f"{p}: the checkpoint was made with other training options "
                            f"({'; '.join(changed)}): {fix}")
    if saved_hash != data_hash:
        raise TrainingError(f"{p}: the checkpoint was made from other training data "
                            f"(hash {saved_hash[:12]}, this data {data_hash[:12]}): {fix}")
    return state


#: options whose default is not what training did before they existed: that value, for a
#: checkpoint saved without them
BEFORE_OPTION = {"curvature_weight": 0.0}


def _data_hash(W: Windows, model: TorchManifoldModel) -> str:
    h = hashlib.sha256()
    physics = [model.M, model.f_g, model.f_B, model.f_C] + [getattr(model, b) for b in model.SPRING_BUFFERS]
    for a in W.arrays() + [t.numpy() for t in physics]:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def check_resumed_state(state: dict, n_steps: int, source) -> int:
    """The step a checkpoint resumes at, after the checks that need no model: a whole number
    in ``0..n_steps`` and a best validation loss that is a number (``inf`` included: after a
    warm-up, or when the first L-BFGS share broke the model, no finite one exists yet)."""
    first, best = state["step"], state["best_val"]
    if not isinstance(first, int) or isinstance(first, bool) or not 0 <= first <= n_steps \
            or not isinstance(best, float) or math.isnan(best):
        raise TrainingError(f"{source}: the checkpoint's step {first!r} (of {n_steps}) or its best validation loss "
                            f"{best!r} is not one a training leaves; delete it and run without --resume")
    return first


class Training:
    """One training run, as a list of optimiser steps (``steps``: Adam epochs, then chunks of
    :data:`LBFGS_CHUNK` L-BFGS iterations, then the identification's) taken in order.

    Each rule has its own place: the L-BFGS share and convergence are decided from the records
    alone (:func:`lbfgs_schedule`), so a resumed run takes the same decisions; :meth:`record`
    keeps the best weights by validation loss; :meth:`snapshot` / :meth:`restore` are the
    checkpoint's content; :meth:`start_lbfgs` and :meth:`start_identification` are the two
    changes of the model during training (``--identify``: the dense term library joins at
    L-BFGS, the thresholded one after it).
    """

    def __init__(self, ds: Dataset, cfg: TrainConfig, progress: Callable[[dict], None] | None = None,
                 checkpoint: Checkpointer | None = None):
        cfg.validate()
        if not isinstance(cfg.dof, int):
            raise TrainingError(f"--dof {cfg.dof!r}: the training needs the number of minimal coordinates "
                                "(mc2fmu.pipeline.train resolves auto from the data)")
        if cfg.dof >= ds.layout.size:
            raise TrainingError(f"--dof {cfg.dof}: must be smaller than the {ds.layout.size} natural coordinates")
        self.cfg, self.progress, self.checkpoint = cfg, progress, checkpoint
        torch.manual_seed(cfg.seed)
        self.t0 = time.perf_counter()
        self.angles = [False] * cfg.dof if cfg.coords else parse_angles(cfg.angles, ds, cfg.dof)
        self.windows = make_windows(ds, cfg.triplets, cfg.window)
        self.model = build_model(ds, cfg, self.angles)
        self.loss_fn = LossFunction(self.model, cfg, self.angles, loss_scales(cfg, self.model, ds, self.windows),
                                    ds.layout)
        # 95/5 split of the triplets (seeded)
        n = len(self.windows)
        perm = np.random.default_rng(cfg.seed).permutation(n)
        n_val = max(2, int(round(cfg.validation_fraction * n)))
        self.train_set = self.windows.subset(np.sort(perm[n_val:]))
        self.val_set = self.windows.subset(np.sort(perm[:n_val]))

        self.best = {"val": math.inf, "state": copy.deepcopy(self.model.state_dict())}
        self.history: list[dict] = []
        self.total = cfg.adam_epochs + cfg.lbfgs_iters + (cfg.identify_iters if cfg.identify else 0)
        # where each stage's iterations start in the whole run's count (the progress's ``done``)
        self.offset = {"adam": 0, "lbfgs": cfg.adam_epochs, "identify": cfg.adam_epochs + cfg.lbfgs_iters}
        self.steps = [("adam", ep) for ep in range(cfg.adam_epochs)] + \
            [("lbfgs", it) for it in range(0, cfg.lbfgs_iters, LBFGS_CHUNK)]
        if cfg.identify:
            self.steps += [("identify", it) for it in range(0, cfg.identify_iters, LBFGS_CHUNK)]
        self.pruned = False  # --identify: the thresholded library replaced the dense one
        # The Adam phase fits the kinematics alone (warm-up "rec"): with the dynamics term from
        # the start, a stiff force (e.g. a spring on a decoded length) can pull an unformed
        # decoder into a basin where L-BFGS no longer recovers the reconstruction.
        self.warm = cfg.warmup == "rec"
        self.opt = torch.optim.Adam(self.params(), lr=cfg.adam_lr)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=max(cfg.adam_epochs, 1),
                                                                eta_min=cfg.adam_lr * 0.03)
        self.lbfgs: LBFGS | None = None
        self.lbfgs_parts: dict = {}
        self.announced = False  # the progress said L-BFGS converged (not part of the training state)
        # the L-BFGS phase's first share of the training triplets (every Nth); tol 0 never grows it
        first_share = cfg.lbfgs_subset if cfg.lbfgs_tol > 0 else 1
        while first_share > 1 and len(range(0, len(self.train_set), first_share)) < MIN_SHARE_TRIPLETS:
            first_share //= 2
        self.first_share = first_share
        self.config_key = json.loads(json.dumps(config_to_dict(cfg)))  # as a checkpoint holds it
        self.data_hash = _data_hash(self.windows, self.model) if checkpoint else ""

    # ------------------------------------------------------------------ parts

    def params(self) -> list[torch.Tensor]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def new_lbfgs(self) -> LBFGS:
        return LBFGS(self.params(), lr=1.0, max_iter=LBFGS_CHUNK, history_size=LBFGS_HISTORY, tolerance_grad=1e-12,
                     tolerance_change=1e-15)

    def schedule(self) -> tuple[int, bool]:
        return lbfgs_schedule(self.history, self.cfg.lbfgs_tol, self.cfg.lbfgs_floor, self.first_share)

    def use_share(self, every: int) -> None:
        """Fit every ``every``-th training triplet (``share_set``); the others are ``share_rest``."""
        self.every = every
        inside = np.arange(len(self.train_set)) % every == 0
        self.share_set = self.train_set if every == 1 else self.train_set.subset(np.flatnonzero(inside))
        self.share_rest = None if every == 1 else self.train_set.subset(np.flatnonzero(~inside))

    def closure(self) -> torch.Tensor:
        self.lbfgs.zero_grad()
        loss, parts = self.loss_fn(self.share_set)
        loss.backward()
        self.lbfgs_parts.update(parts)
        return loss

    def record(self, stage: str, it: int, loss: float, parts: dict) -> None:
        """Evaluate the validation triplets, keep the best weights, append the record."""
        loss_fn = self.loss_fn
        with torch.no_grad():
            vloss, vparts = loss_fn(self.val_set, kinematic_only=self.warm and stage == "adam")
        v = float(vloss)
        # the fit alone, what the convergence rule watches: L_gauge chooses the chart and may go
        # on falling after the fit has stopped improving (see lbfgs_converged)
        v_fit = v - loss_fn.weights["gauge"] * vparts.get("gauge", 0.0)
        extra = {}
        partial = stage == "lbfgs" and self.every > 1
        if partial:
            # the training triplets outside the share, held out from it: the share is too small
            # when they fit much worse (share_too_small)
            with torch.no_grad():
                rest = loss_fn.fit(loss_fn(self.share_rest)[1])
            extra["rest_fit"] = rest if math.isfinite(rest) else math.inf
        # a share's fit that broke the model between its triplets (the validation states or the
        # rest of the training ones): the schedule moves to every triplet from the best weights
        # (see lbfgs_schedule)
        if partial and math.isfinite(loss) and (not math.isfinite(v) or extra["rest_fit"] == math.inf):
            v = v_fit = math.inf
        elif not math.isfinite(loss) or not math.isfinite(v):
            raise TrainingError(
                f"training diverged at {stage} iteration {it}: the loss became {loss} (validation {v}); "
                "try a smaller --lr, another --seed, or check the dataset (dt, forces)"
            )
        if v < self.best["val"]:
            self.best = {"val": v, "state": copy.deepcopy(self.model.state_dict())}
        # the training triplets' fit at the last evaluation (L-BFGS: its last loss), beside the
        # validation one: a share of the triplets the validation ones disagree with is too small
        entry = {"stage": stage, "iter": it, "loss": loss, "val": v, "val_fit": v_fit, "fit": loss_fn.fit(parts),
                 **extra, **parts, "elapsed": time.perf_counter() - self.t0,
                 "done": (it + self.offset[stage]) / self.total}
        if stage == "lbfgs":  # what the stopping rule watches (the progress display shows it)
            so_far = self.history + [entry]
            entry.update(best_fit=_window_bests(so_far, LBFGS_WINDOW)[0], fall=lbfgs_fall(so_far),
                         tol=self.cfg.lbfgs_tol, floor=self.cfg.lbfgs_floor, window=LBFGS_WINDOW)
        self.history.append(entry)
        if self.progress:
            self.progress(entry)

    # ------------------------------------------------------------------ checkpoints

    def snapshot(self, step: int) -> dict:
        """Everything needed to take ``steps[step]`` and the rest exactly as this run would."""
        steps = self.steps
        return copy.deepcopy({
            "version": CHECKPOINT_VERSION, "step": step, "phase": steps[step][0] if step < len(steps) else "done",
            "iteration": steps[step][1] if step < len(steps) else self.total,
            "model": self.model.state_dict(), "adam": self.opt.state_dict(), "sched": self.sched.state_dict(),
            "lbfgs": None if self.lbfgs is None else self.lbfgs.state_dict(),
            "library": _library_state(self.model.library), "pruned": self.pruned,
            "best_val": float(self.best["val"]), "best_state": self.best["state"], "history": self.history,
            "elapsed": time.perf_counter() - self.t0, "rng": torch.get_rng_state(),
            "config": json.dumps(self.config_key, sort_keys=True), "data_hash": self.data_hash,
        })

    def restore(self) -> int:
        """Continue from the checkpoint's state; returns the step to take next."""
        ckpt = self.checkpoint
        s = read_checkpoint(ckpt, self.config_key, self.data_hash)
        try:
            first = check_resumed_state(s, len(self.steps), ckpt.path)
            self.pruned = bool(s.get("pruned", False))
            if s.get("library") is not None:  # before the thresholding every term is in, zeros included
                self.model.set_library(_library_from_state(s["library"]), trainable=True, dense=not self.pruned)
            self.model.load_state_dict(s["model"])
            self.opt.load_state_dict(s["adam"])
            self.sched.load_state_dict(s["sched"])
            if s["lbfgs"] is not None:
                self.lbfgs = self.new_lbfgs()
                self.lbfgs.load_state_dict(s["lbfgs"])
            self.best = {"val": s["best_val"], "state": s["best_state"]}
            self.history[:] = s["history"]
            self.t0 -= s["elapsed"]
            torch.set_rng_state(s["rng"])
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
            # a checkpoint that passed the version, options and data checks but holds the wrong things
            raise TrainingError(f"{ckpt.path}: a damaged training checkpoint ({type(exc).__name__}: "
                                f"{str(exc)[:200]}); delete it and run without --resume to start over") from None
        return first

    # ------------------------------------------------------------------ the stages

    def adam_step(self, it: int) -> None:
        self.opt.zero_grad()
        loss, parts = self.loss_fn(self.train_set, kinematic_only=self.warm)
        loss.backward()
        self.opt.step()
        self.sched.step()
        if it % 25 == 0 or it == self.cfg.adam_epochs - 1:
            self.record("adam", it + 1, loss.item(), parts)

    def start_lbfgs(self) -> None:
        """From Adam's best weights; with ``--identify`` every term of the library joins, from zero."""
        cfg, model = self.cfg, self.model
        model.load_state_dict(self.best["state"])
        if cfg.identify:
            q, v, u, _, _ = residual_data(model, self.loss_fn, self.train_set)
            library = build_library(parse_groups(cfg.identify), len(self.angles), self.angles, u.shape[1],
                                    np.sqrt(np.mean(v**2, axis=0)))
            model.set_library(library, trainable=True, dense=True)
            self.best["state"] = copy.deepcopy(model.state_dict())
        self.lbfgs = self.new_lbfgs()
        if self.warm:  # the full loss from here on: the warm-up's best is not comparable
            self.best["val"] = math.inf

    def change_share(self, every: int) -> None:
        """The fit stalled or overfits on this share: more triplets.  A share that broke the
        model gives way from the best weights with a new memory; otherwise the memory is kept."""
        broken = not math.isfinite(self.history[-1]["val"])
        self.use_share(every)
        if self.lbfgs is not None and broken:
            self.model.load_state_dict(self.best["state"])
            self.lbfgs = self.new_lbfgs()
        elif self.lbfgs is not None:
            self.lbfgs.objective_changed()

    def lbfgs_step(self, it: int) -> None:
        if self.lbfgs is None:
            self.start_lbfgs()
        loss = self.lbfgs.step(self.closure)
        self.record("lbfgs", min(it + LBFGS_CHUNK, self.cfg.lbfgs_iters), loss.item(),
                    {**self.lbfgs_parts, "every": self.every, "triplets": len(self.share_set)})

    def start_identification(self) -> None:
        """Seed 004's thresholding from the best weights: the sparse terms, another model from here."""
        self.model.load_state_dict(self.best["state"])
        self.model.set_library(sparse_terms(self.model, self.loss_fn, self.train_set, self.cfg, self.angles),
                               trainable=True)
        self.best = {"val": math.inf, "state": copy.deepcopy(self.model.state_dict())}
        self.lbfgs = self.new_lbfgs()
        self.pruned = True

    def identify_step(self, it: int) -> None:
        if not self.pruned:
            self.start_identification()
        loss = self.lbfgs.step(self.closure)
        self.record("identify", min(it + LBFGS_CHUNK, self.cfg.identify_iters), loss.item(), dict(self.lbfgs_parts))

    def announce_convergence(self) -> None:
        if self.progress and not self.announced:
            self.announced = True
            done_its = [e["iter"] for e in self.history if e["stage"] == "lbfgs"][-1]
            self.progress({"stage": "lbfgs converged at", "iter": done_its, "loss": None, "val": None,
                           "done": self.offset["identify"] / self.total, "elapsed": time.perf_counter() - self.t0})

    # ------------------------------------------------------------------ the run

    def run(self) -> TrainResult:
        checkpoint = self.checkpoint
        first = self.restore() if checkpoint and checkpoint.resume else 0
        if checkpoint:
            checkpoint.start()
        last = self.snapshot(first) if checkpoint else None
        self.use_share(self.schedule()[0])
        try:
            for step in range(first, len(self.steps)):
                stage, it = self.steps[step]
                every, converged = self.schedule() if stage == "lbfgs" else (1, False)
                if stage == "lbfgs" and every != self.every:
                    self.change_share(every)
                if stage == "identify" and self.every != 1:
                    self.use_share(1)
                if converged:
                    # the rest of the L-BFGS budget is skipped (decided from the records alone,
                    # so a resumed run skips the same steps; no snapshot for a skipped step)
                    self.announce_convergence()
                    continue
                if checkpoint:
                    last = self.snapshot(step)
                    if checkpoint.due():
                        write_checkpoint(checkpoint, last)
                getattr(self, f"{stage}_step")(it)
        except KeyboardInterrupt:
            if checkpoint and last is not None:
                write_checkpoint(checkpoint, last)
            raise TrainingInterrupted(checkpoint.path if checkpoint else None) from None
        return self.result()

    def result(self) -> TrainResult:
        """The best weights (thresholded terms with ``--identify``) and the training record."""
        cfg, model = self.cfg, self.model
        model.load_state_dict(self.best["state"])
        if not all(torch.isfinite(v).all() for v in model.state_dict().values()):
            raise TrainingError("training ended with non-finite weights (a corrupt checkpoint, or a diverged run); "
                                "nothing was written: delete the checkpoint and train again, or try another --seed")
        extra = {}
        if cfg.identify:
            if not self.pruned:  # no fine-tuning iterations: threshold the trained library as it is
                model.set_library(sparse_terms(model, self.loss_fn, self.train_set, cfg, self.angles))
            extra["identified_terms"] = 0 if model.library is None else int(len(model.library))
        with torch.no_grad():
            _, parts = self.loss_fn(self.windows)
        seconds = time.perf_counter() - self.t0
        if model.spring_law_residuals:
            extra["spring_law_residual"] = model.spring_law_residuals
        lbfgs_done = [e["iter"] for e in self.history if e["stage"] == "lbfgs"]
        metrics = {"val_loss": self.best["val"], **parts, **extra, "triplets": len(self.windows),
                   "hull_dim": model.hull_dim, "train_seconds": seconds,
                   "lbfgs_iterations": lbfgs_done[-1] if lbfgs_done else 0}
        return TrainResult(model, self.angles, self.history, metrics, seconds)


def _library_state(library: TermLibrary | None) -> dict | None:
    if library is None:
        return None
    return {"kinds": torch.as_tensor(library.kinds), "index": torch.as_tensor(library.index),
            "param": torch.as_tensor(library.param), "Xi": torch.as_tensor(library.Xi),
            "groups": ",".join(library.groups), "kappa": library.kappa}


def _library_from_state(state: dict) -> TermLibrary:
    return TermLibrary(state["kinds"].numpy(), state["index"].numpy(), state["param"].numpy(), state["Xi"].numpy(),
                       tuple(g for g in state["groups"].split(",") if g), float(state["kappa"]))


def residual_data(model: TorchManifoldModel, loss_fn: "LossFunction", W: Windows):
    """``q, v, u`` at the windows' middle samples, the residual ``F = M_m qddot - rhs`` the
    mechanism file's forces leave (the model's identified terms left out) and the inertial
    force's rms per coordinate (numpy).  ``qdot`` is the step map's training velocity and
    ``qddot`` the centred second difference of the encoded triplets."""
    with torch.no_grad():
        q_prev, q, q_next = loss_fn.encode_triplets(W)
        v = model.step_map.training_velocity(q_prev, q, q_next, W.dt)
        qdd = (q_next - 2.0 * q + q_prev) / (W.dt * W.dt)
        u = W.u[:, 1]
        saved, model.library = model.library, None
        try:
            terms = model.terms(q, u)
        finally:
            model.library = saved
        inertial = torch.einsum("bmk,bk->bm", terms.Mm, qdd)
        F = (inertial - known_rhs(terms, v)).numpy()
    return q.numpy(), v.numpy(), u.numpy(), F, np.sqrt(np.mean(inertial.numpy() ** 2, axis=0))


def sparse_terms(model: TorchManifoldModel, loss_fn: "LossFunction", W: Windows, cfg: TrainConfig,
                 angles: list[bool]) -> TermLibrary:
    """Seed 004's thresholding on the model's library (its trained smoothed-sign scales, near
    duplicates merged; a new library of ``cfg.identify``'s groups if it has none): the
    coefficients of the kept terms by sequentially thresholded least squares on the model's
    residual (:func:`residual_data`).  The threshold's floor is 1e-3 of the inertial force's
    rms, so a model whose residual is only its own approximation error gets (almost) no terms."""
    q, v, u, F, inertial = residual_data(model, loss_fn, W)
    library = model.runtime_library()
    if library is None:
        library = build_library(parse_groups(cfg.identify), len(angles), angles, u.shape[1],
                                np.sqrt(np.mean(v**2, axis=0)))
    library = library.deduplicated()
    Theta = evaluate(library.kinds, library.index, library.param, q, v, u)
    Xi = stlsq(Theta, F, cfg.kappa, floor=1e-3 * inertial)
    return TermLibrary(library.kinds, library.index, library.param, Xi, library.groups, cfg.kappa)
