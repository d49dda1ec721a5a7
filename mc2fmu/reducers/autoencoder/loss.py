"""The training loss (seed 000, Algorithms 1-2, appendix; docs/method.md): one object per term.

A term (:class:`LossTerm`) carries everything about it: its short ``name`` (the key of the
training record and checkpoints), the config field of its weight (``option``; the field's
metadata is its command-line option where it has one: ``rec_weight`` has none, and L_gauge's
``auto`` resolves through :attr:`TrainConfig.gauge`), its progress ``label`` and its ``title``
in the training summary, the weight a checkpoint saved before the term existed counts as (``before``), whether it belongs to the fit the stopping
rule watches (``in_fit``), when it is on (:meth:`LossTerm.active`) and its two forms: in the
decoder's hull coordinates (:meth:`LossTerm.hull`, the training default) and in natural
coordinates (:meth:`LossTerm.natural`, a decoder without a hull).  :data:`TERMS` lists them;
the trainer, the progress line, the training summary and checkpoint compatibility read that
list.  A new term is one class here, added to :data:`TERMS`, plus its test.

Every term is divided per coordinate by its data spread, so that every term counts.  What
several terms read (the encoded triplet, L_rec's decoded triplet, whose middle sample and
last one L_dyn reads, the dynamics at the middle sample) is computed once per evaluation, on
first use (:class:`Evaluation`).

With a hull decoder (``x = x_mean + P y``) the one-step terms are taken in hull coordinates:
for ``x`` in the hull, ``|(P y - (x - x_mean)) / x_scale|^2 = |y - y(x)|^2`` with ``y(x) = P^T
diag(x_scale^-2) (x - x_mean)`` (``P`` is orthonormal in z-scored coordinates), and ``|P e /
a_scale|^2 = |e L|^2`` with ``L L^T = P^T diag(a_scale^-2) P``: the same numbers at a cost that
grows with the hull's dimension ``r``, not with the number of bodies.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np
import torch
from torch.func import jvp

from ...data.dataset import Dataset
from ...models.manifold import acceleration, mass_times, wrap_to_pi
from .config import TrainConfig
from .samples import Windows, spreads
from .torch_model import LinearEncoder, TorchManifoldModel

F64 = torch.float64
Tensor = torch.Tensor


class Evaluation:
    """One evaluation of the loss on a batch of :class:`~.samples.Windows`: what several terms
    read, each computed on first use and then shared.

    * :attr:`triplet`: the encoded ``q_{i-1}, q_i, q_{i+1}`` (angle-type entries unwrapped);
    * :attr:`dynamics`: the reduced terms at ``q_i`` with ``H : v v`` at the step map's
      training velocity (``--loss sim``);
    * :attr:`decoded`: the decoded triplet (hull coordinates ``y`` with a hull decoder, else
      ``x``); with a hull decoder its middle is the dynamics' when they are computed.
    """

    def __init__(self, loss: "LossFunction", W: Windows, kinematic_only: bool = False):
        self.loss, self.W = loss, W
        self.model = loss.model
        self.reduced = loss.reduced
        self.linear = isinstance(self.model.encoder, LinearEncoder)
        self.kinematic_only = kinematic_only
        self.uses_dynamics = not kinematic_only and loss.cfg.loss == "sim"

    def decode(self, q: Tensor) -> Tensor:
        """``y`` (hull decoder) or ``x``."""
        dec = self.model.decoder
        return dec.hull(q) if self.reduced else dec(q)

    @cached_property
    def triplet(self) -> tuple[Tensor, Tensor, Tensor]:
        return self.loss.encode_triplets(self.W)

    @cached_property
    def dynamics(self):
        """``(terms, H : v v, v)`` at the middle samples, ``v`` the step map's training velocity."""
        q_prev, q, q_next = self.triplet
        v = self.model.step_map.training_velocity(q_prev, q, q_next, self.W.dt)
        terms, Hvv = self.model.terms_and_curvature(q, self.W.u[:, 1], v)
        return terms, Hvv, v

    @cached_property
    def decoded(self) -> tuple[Tensor, Tensor, Tensor]:
        """The decoded triplet (each (B, r) or (B, n))."""
        q_prev, q, q_next = self.triplet
        B = len(q)
        mid = self._dynamics_middle()
        if mid is not None:
            ends = self.decode(torch.cat([q_prev, q_next]))
            return ends[:B], mid, ends[B:]
        y = self.decode(torch.cat([q_prev, q, q_next]))
        return y[:B], y[B:2 * B], y[2 * B:]

    @cached_property
    def needs_triplet(self) -> bool:
        """Whether the terms read all three decoded samples: L_rec with learnt coordinates, and
        L_curv (with known coordinates and no L_curv the middle and the next sample are
        decoded alone)."""
        return not self.linear or (not self.kinematic_only and any(t.name == "curv" for t in self.loss.active_terms))

    def _dynamics_middle(self) -> Tensor | None:
        """With the dynamics: they are computed first (the gradient sums in the order of
        creation), and with a hull decoder their ``y`` is the decoded middle sample (in natural
        coordinates it is decoded again); None without them."""
        if not self.uses_dynamics:
            return None
        mid = self.dynamics[0].x
        return mid if self.reduced else None

    @cached_property
    def middle(self) -> Tensor:
        if self.needs_triplet:
            return self.decoded[1]
        mid = self._dynamics_middle()
        return mid if mid is not None else self.decode(self.triplet[1])

    @cached_property
    def next(self) -> Tensor:
        return self.decoded[2] if self.needs_triplet else self.decode(self.triplet[2])

    @cached_property
    def target(self) -> Tensor:
        """The data's triplet in hull coordinates (3 B, r): previous, middle, next samples."""
        return self.loss.data(self.W)["target"]

    @cached_property
    def kinematic(self) -> tuple[Tensor, Tensor]:
        W = self.W
        x_prev, x, x_next = W.x[:, 0], W.x[:, 1], W.x[:, 2]
        return self.loss.kinematic(x, W.xd[:, 1], (x_next - 2.0 * x + x_prev) / (W.dt * W.dt))


class LossTerm:
    """One term of the training loss (see the module's docstring for the attributes)."""

    name: str = ""
    option: str = ""
    label: str = ""
    title: str = ""
    before: float | None = None  # None: a checkpoint without the option counts as its default
    in_fit: bool = True

    def weight(self, cfg: TrainConfig) -> float:
        return float(getattr(cfg, self.option))

    def active(self, cfg: TrainConfig) -> bool:
        return self.weight(cfg) > 0

    def value(self, ev: Evaluation) -> Tensor:
        return self.hull(ev) if ev.reduced else self.natural(ev)

    def hull(self, ev: Evaluation) -> Tensor:
        """The term with a hull decoder (the same number as :meth:`natural`, to round-off)."""
        return self.natural(ev)

    def natural(self, ev: Evaluation) -> Tensor:
        raise NotImplementedError


class Reconstruction(LossTerm):
    """``L_rec``: ``|h_d(h_e(x)) - x|^2`` over the window's first three samples (known
    coordinates: the middle one; the others are other windows' middles), scaled by the spread
    of ``x``."""

    name, option, label, title = "rec", "rec_weight", "rec", "reconstruction"

    def active(self, cfg: TrainConfig) -> bool:
        return True

    def hull(self, ev: Evaluation) -> Tensor:
        loss, t = ev.loss, ev.target
        if ev.linear:
            B = len(ev.triplet[1])
            return (ev.middle - t[B:2 * B]).pow(2).sum(-1).mean() / loss.n_x
        return (torch.cat(ev.decoded) - t).pow(2).sum(-1).mean() / loss.n_x

    def natural(self, ev: Evaluation) -> Tensor:
        W, scale = ev.W, ev.loss.x_scale
        if ev.linear:
            return ((ev.middle - W.x[:, 1]) / scale).pow(2).mean()
        xs = torch.cat([W.x[:, 0], W.x[:, 1], W.x[:, 2]])
        return ((torch.cat(ev.decoded) - xs) / scale).pow(2).mean()


class Dynamics(LossTerm):
    """``L_dyn`` (``--loss sim``, the default): the dynamics residual taken entirely in decoded
    space, ``(h_d(q_hat_{i+1}) - h_d(q_{i+1})) / dt^2``, a pure acceleration error scaled by
    the spread of the data's accelerations.  ``q_hat_{i+1}`` is one step of the model's step
    map from the encoded triplet (velocity from the data)."""

    name, option, label, title = "dyn", "dyn_weight", "dyn", "dynamics"

    def active(self, cfg: TrainConfig) -> bool:
        return cfg.loss == "sim"

    def _error(self, ev: Evaluation) -> Tensor:
        q_prev, q, _ = ev.triplet
        terms, Hvv, v = ev.dynamics
        dt = ev.W.dt
        q_hat = 2.0 * q - q_prev + dt * dt * acceleration(terms, v, Hvv)
        target = ev.next
        return (ev.decode(q_hat) - target) / (dt * dt)

    def hull(self, ev: Evaluation) -> Tensor:
        return (self._error(ev) @ ev.loss.acc_factor).pow(2).sum(-1).mean() / ev.loss.n_x

    def natural(self, ev: Evaluation) -> Tensor:
        return (self._error(ev) / ev.loss.a_scale).pow(2).mean()


class Velocity(LossTerm):
    """``L_vel`` (``--loss appendix``, eqs. A.1-A.5): the decoded velocity ``J qdot`` against
    the data's ``xd``, ``qdot = (dh_e/dx) xd``; in natural coordinates in either form."""

    name, option, label, title = "vel", "vel_weight", "vel", "velocity"

    def active(self, cfg: TrainConfig) -> bool:
        return cfg.loss == "appendix"

    def natural(self, ev: Evaluation) -> Tensor:
        return ev.kinematic[0]


class Acceleration(Velocity):
    """``L_acc`` (``--loss appendix``, eqs. A.4, A.6): ``J qddot + H : qdot qdot`` against the
    data's finite-difference accelerations, ``qddot = (dh_e/dx) xdd + d2h_e/dx2 : xd xd``."""

    name, option, label, title = "acc", "acc_weight", "acc", "acceleration"

    def natural(self, ev: Evaluation) -> Tensor:
        return ev.kinematic[1]


class Rollout(LossTerm):
    """``L_roll`` (``--rollout K``, either loss): ``K`` steps of the model's own step map from
    the encoded ``q_{i-1}, q_i`` with the data's inputs; the decoded error at step ``k`` is
    divided by ``k (k + 1) / 2 dt^2`` (the displacement a constant acceleration error makes in
    ``k`` steps) and by the acceleration spread, so each step weighs like ``L_dyn``.  In
    natural coordinates in either form."""

    name, option, label, title = "roll", "rollout_weight", "roll", "rollout"

    def active(self, cfg: TrainConfig) -> bool:
        return cfg.rollout_steps > 0

    def natural(self, ev: Evaluation) -> Tensor:
        q_prev, q, _ = ev.triplet
        return ev.loss.rollout(ev.W, q_prev, q)


class Rigidity(LossTerm):
    """``L_rig`` (``--rigidity-weight``, default 1): each decoded body's six point distances
    against the rigid ones, at fixed latent points spread uniformly over the box of the encoded
    data (angle-type coordinates over a whole turn), scaled by the spread of the body's
    coordinates.  The other terms hold the decoder only on the training path; this holds it to
    rigid bodies everywhere the model may go, so that ``J^T M J`` and ``J^T f`` are a rigid
    mechanism's.  Its hull form takes each point difference as an affine map of ``y``."""

    name, option, label, title = "rig", "rigidity_weight", "rig", "rigidity"

    def natural(self, ev: Evaluation) -> Tensor:
        return ev.loss.rigidity(ev.triplet[1])


class Curvature(LossTerm):
    """``L_curv`` (``--curvature-weight``, default 1; either loss): the second difference of
    the decoded triplet against the data's, over ``dt^2``, scaled as ``L_dyn``: the
    reconstruction error's acceleration along the path, which holds the chart's tangent and
    curvature to the data's in every natural coordinate, not only as the trained forces weigh
    them (what a model run with other physical parameters needs).  Off before it existed (a
    checkpoint without the option resumes with it off).

    It reads the decoded triplet L_rec and L_dyn read (:attr:`Evaluation.decoded`): one
    decoding less per evaluation."""

    name, option, label, title = "curv", "curvature_weight", "curv", "curvature"
    before = 0.0

    def _decoded(self, ev: Evaluation) -> Tensor:
        return torch.stack(ev.decoded)

    def hull(self, ev: Evaluation) -> Tensor:
        y, t, dt = self._decoded(ev), ev.target, ev.W.dt
        B = y.shape[1]
        d2 = (y[0] - 2.0 * y[1] + y[2]) - (t[:B] - 2.0 * t[B:2 * B] + t[2 * B:])
        return ((d2 / (dt * dt)) @ ev.loss.acc_factor).pow(2).sum(-1).mean() / ev.loss.n_x

    def natural(self, ev: Evaluation) -> Tensor:
        x, W = self._decoded(ev), ev.W
        d2 = (x[0] - 2.0 * x[1] + x[2]) - (W.x[:, 0] - 2.0 * W.x[:, 1] + W.x[:, 2])
        return (d2 / (W.dt * W.dt) / ev.loss.a_scale).pow(2).mean()


class Gauge(LossTerm):
    """``L_gauge`` (``--gauge-weight``; auto: on for one learnt coordinate): the variance of
    ``log det M_m`` over the training states, a choice of the chart, not of the fit (left out
    of what the stopping rule watches).  It reads the dynamics' ``M_m`` when they are
    computed; its hull form forms ``J`` of the network's own outputs."""

    name, option, label, title = "gauge", "gauge_weight", "gauge", "gauge"
    in_fit = False

    def weight(self, cfg: TrainConfig) -> float:
        return cfg.gauge

    def natural(self, ev: Evaluation) -> Tensor:
        return ev.loss.gauge(ev.triplet[1], ev.dynamics[0].Mm if ev.uses_dynamics else None)


#: every loss term, in the order the progress line and the training record show them
TERMS: tuple[LossTerm, ...] = (Reconstruction(), Dynamics(), Velocity(), Acceleration(), Curvature(), Rollout(),
                               Rigidity(), Gauge())
RECONSTRUCTION = TERMS[0]


def before_options() -> dict[str, float]:
    """The options whose default is not what training did before they existed: that value,
    for a checkpoint saved without them."""
    return {t.option: t.before for t in TERMS if t.before is not None}


def loss_scales(cfg: TrainConfig, model: TorchManifoldModel, ds: Dataset, W: Windows) -> dict[str, np.ndarray]:
    """Per-term data scales: positions ``x``, velocities ``v``, accelerations ``a``."""
    acc = (W.x[:, 2] - 2 * W.x[:, 1] + W.x[:, 0]).numpy() / W.dt**2
    vel = W.xd[:, 1].numpy()
    if cfg.loss_scale == "channel":
        # the decoder's output scales are exactly the per-channel spreads of x
        return {"x": model.decoder.x_scale.numpy(), "v": spreads(vel, cfg.scale_floor), "a": spreads(acc, cfg.scale_floor)}
    # one scale per term: errors weigh as metres (m/s, m/s^2) whatever the channel
    rms = lambda a: np.full(ds.layout.size, np.sqrt(np.mean(a.var(axis=0))))  # noqa: E731
    return {"x": rms(ds.x), "v": rms(vel), "a": rms(acc)}


class LossFunction:
    """The training loss on a batch of :class:`~.samples.Windows`: the weighted sum of the
    active :data:`TERMS`; returns the total and its parts."""

    def __init__(self, model: TorchManifoldModel, cfg: TrainConfig, angles: list[bool], scales: dict[str, np.ndarray],
                 layout=None):
        self.model, self.cfg = model, cfg
        self.x_scale, self.v_scale, self.a_scale = (torch.as_tensor(scales[k], dtype=F64) for k in "xva")
        self.angle_mask = torch.tensor(angles, dtype=torch.bool)
        self.active_terms = [t for t in TERMS if t.active(cfg)]
        self.weights = {t.name: t.weight(cfg) for t in TERMS}
        if cfg.rigidity_weight:
            if layout is None:
                raise ValueError("the rigidity term needs the NC layout (the bodies' point distances)")
            self._rigidity_setup(layout)
        self.reduced = model.reduced
        self._cache: dict[int, tuple[Windows, dict]] = {}  # see data
        if self.reduced:
            P = model.decoder.out_map
            self.n_x = P.shape[0]
            self.to_hull = P / self.x_scale[:, None] ** 2
            self.acc_factor = torch.linalg.cholesky(P.T @ (P / self.a_scale[:, None] ** 2))

    @property
    def outside_fit(self) -> list[str]:
        """The active terms the fit leaves out (see :meth:`fit`)."""
        return [t.name for t in self.active_terms if not t.in_fit]

    @property
    def labels(self) -> dict[str, str]:
        """The active terms' progress labels."""
        return {t.name: t.label for t in self.active_terms}

    @property
    def titles(self) -> dict[str, str]:
        """The active terms' titles (the training summary's)."""
        return {t.name: t.title for t in self.active_terms}

    # ------------------------------------------------------------------ what the terms share

    def data(self, W: Windows) -> dict[str, Tensor]:
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

    def _continuous(self, q_ref: Tensor, q: Tensor) -> Tensor:
        """Shift angle-type entries of ``q`` by 2 pi k to be nearest ``q_ref`` (unwrapping a triplet)."""
        if not self.angle_mask.any():
            return q
        return torch.where(self.angle_mask, q_ref + wrap_to_pi(q - q_ref), q)

    def encode_triplets(self, W: Windows) -> tuple[Tensor, Tensor, Tensor]:
        z = self.data(W)["enc"]
        q_prev, q, q_next = (self.model.encoder.from_inputs(z[:, k]) for k in range(3))
        return self._continuous(q, q_prev), q, self._continuous(q, q_next)

    # ------------------------------------------------------------------ the terms' own computations

    def _rigidity_setup(self, layout) -> None:
        """Latent sample points (fixed, in the unit cube) and each body's six rigid point distances."""
        gen = torch.Generator().manual_seed(self.cfg.seed + 1)
        self.unit = torch.rand(self.cfg.rigidity_samples(len(layout.bodies)), len(self.angle_mask), generator=gen,
                               dtype=F64)
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

    def rigidity(self, q: Tensor) -> Tensor:
        """L_rig at latent points spread uniformly over the box of ``q`` (angles over a whole turn)."""
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

    def gauge(self, q: Tensor, Mm: Tensor | None = None) -> Tensor:
        """L_gauge: the variance of ``log det M_m`` over the states ``q``; ``Mm``: ``M_m`` at
        ``q`` if the caller has it (the dynamics'), else it is formed here."""
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

    def kinematic(self, x: Tensor, xd: Tensor, xdd: Tensor) -> tuple[Tensor, Tensor]:
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

    def rollout(self, W: Windows, q_prev: Tensor, q: Tensor) -> Tensor:
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

    # ------------------------------------------------------------------ the loss

    def terms(self, W: Windows, kinematic_only: bool = False) -> dict[str, Tensor]:
        """The active terms' values (tensors); ``kinematic_only``: L_rec alone."""
        ev = Evaluation(self, W, kinematic_only)
        return {t.name: t.value(ev) for t in ([RECONSTRUCTION] if kinematic_only else self.active_terms)}

    def rec(self, W: Windows) -> Tensor:
        """L_rec alone."""
        return self.terms(W, kinematic_only=True)["rec"]

    def __call__(self, W: Windows, kinematic_only: bool = False) -> tuple[Tensor, dict]:
        """``kinematic_only``: L_rec alone (the warm-up phase; the other terms are not computed)."""
        parts = self.terms(W, kinematic_only)
        loss = sum(self.weights[k] * v for k, v in parts.items())
        return loss, {k: v.item() for k, v in parts.items()}

    def fit(self, parts: dict) -> float:
        """The weighted loss of the fit from the parts a call returned (other entries of the
        dict ignored), the terms outside the fit (``L_gauge``: it chooses the chart) left out."""
        fit = {t.name for t in TERMS if t.in_fit}
        return sum(self.weights[k] * parts[k] for k in parts if k in fit)
