"""The autoencoder's trainable form (torch modules) and its conversion to and from the
run-time :class:`~mc2fmu.models.manifold.ManifoldModel`.

* :class:`Decoder` -- z-scored inputs (or ``cos q, sin q`` for angle-type coordinates), an
  MLP, de-normalised outputs; value, ``J`` and ``H`` by explicit propagation.
* :class:`NeuralEncoder` -- the autoencoder's encoder (unknown minimal coordinates);
  angle-type coordinates leave it as ``atan2(s, c)``.
* :class:`LinearEncoder` -- known minimal coordinates: a fixed linear selection of ``x``
  (pose positions and rotation-matrix entries are exactly linear in the natural coordinates).
* :class:`TorchManifoldModel` -- both plus ``M`` and the force model (and identified terms,
  :meth:`TorchManifoldModel.set_library`); ``step`` is the one-step map used by training, and
  the arithmetic is that of :mod:`mc2fmu.models.manifold`.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from ...mechanics.natural import ForceModel, SpringModel
from ...models.manifold import (
    ManifoldModel,
    ManifoldTerms,
    MLPWeights,
    acceleration,
    applied_force,
    decoder_features,
    manifold_terms,
    mass_blocks,
)
from ...models.step_maps import StepMap, get_step_map
from ...models.terms import TermLibrary
from .network import MLP

Tensor = torch.Tensor
F64 = torch.float64


def _t(a) -> Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=F64)


class Decoder(nn.Module):
    """``h_d: q -> x`` with exact ``J`` and ``H``.

    With an ``out_map`` (``n x r``, spanning the training data's affine hull, see
    :func:`mc2fmu.reducers.autoencoder.samples.hull_maps`) the network has ``r`` outputs and
    ``x = x_mean + out_map y``: the decoder cannot leave the hull, so every linear relation the
    data satisfy (planarity, joint points, the in-plane axes of a planar body) holds exactly
    wherever the model goes.  The run-time model gets the same map as an ordinary MLP
    (:meth:`runtime_weights` folds it into the output layer).
    """

    def __init__(self, n_q: int, n_x: int, hidden: Sequence[int], activation: str, angles: Sequence[bool],
                 q_mean: np.ndarray, q_scale: np.ndarray, x_mean: np.ndarray, x_scale: np.ndarray,
                 out_map: np.ndarray | None = None):
        super().__init__()
        self.n_q, self.n_x = n_q, n_x
        self.angles = [bool(a) for a in angles]
        n_feat = sum(2 if a else 1 for a in self.angles)
        self.net = MLP([n_feat, *hidden, n_x if out_map is None else out_map.shape[1]], activation)
        self.register_buffer("q_mean", _t(q_mean))
        self.register_buffer("q_scale", _t(q_scale))
        self.register_buffer("x_mean", _t(x_mean))
        self.register_buffer("x_scale", _t(x_scale))
        # the output map y -> x - x_mean: x_scale * y, or out_map y
        self.register_buffer("out_map", None if out_map is None else _t(out_map))

    def features(self, q: Tensor, second: bool = True) -> tuple[Tensor, Tensor, Tensor | None]:
        return decoder_features(q, self.angles, self.q_mean, self.q_scale, second)

    def forward(self, q: Tensor) -> Tensor:
        phi, _, _ = self.features(q, second=False)
        y = self.net(phi)
        return self.x_mean + (self.x_scale * y if self.out_map is None else y @ self.out_map.T)

    def value_jh(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        phi, Jphi, Hphi = self.features(q)
        y, Jy, Hy = self.net.forward_jh(phi, Jphi, Hphi)
        if self.out_map is None:
            s = self.x_scale
            return self.x_mean + s * y, s[:, None] * Jy, s[:, None, None] * Hy
        P = self.out_map
        B, r, m = Jy.shape
        return (self.x_mean + y @ P.T, P @ Jy,
                (P @ Hy.reshape(B, r, m * m)).reshape(B, self.n_x, m, m))

    def hull_jh(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """With an ``out_map``: the hull coordinates ``y`` of ``x = x_mean + out_map y`` and their
        ``J``, ``H`` (the network's own outputs, before the map)."""
        phi, Jphi, Hphi = self.features(q)
        return self.net.forward_jh(phi, Jphi, Hphi)

    def hull_jv(self, q: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """With an ``out_map``: ``y``, ``J = dy/dq`` and ``H : v v`` at one velocity ``v`` per
        sample (:meth:`MLP.forward_jv`)."""
        phi, Jphi, Hphi = self.features(q)
        return self.net.forward_jv(phi, Jphi, torch.einsum("bfij,bi,bj->bf", Hphi, v, v), v)

    def value_jv(self, q: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``x``, ``J`` and ``H : v v`` (see :meth:`hull_jv`)."""
        y, Jy, Sy = self.hull_jv(q, v)
        if self.out_map is None:
            s = self.x_scale
            return self.x_mean + s * y, s[:, None] * Jy, s * Sy
        P = self.out_map
        return self.x_mean + y @ P.T, P @ Jy, Sy @ P.T

    def hull(self, q: Tensor) -> Tensor:
        """``y`` alone (see :meth:`hull_jh`)."""
        return self.net(self.features(q, second=False)[0])

    def runtime_weights(self) -> MLPWeights:
        """The network as the run-time model runs it, ``x = x_mean + x_scale * net(phi)``: the
        output map folded into the last layer."""
        w = _weights(self.net)
        if self.out_map is None:
            return w
        F = self.out_map.detach().numpy() / self.x_scale.detach().numpy()[:, None]
        return MLPWeights(w.weights[:-1] + (F @ w.weights[-1],), w.biases[:-1] + (F @ w.biases[-1],), w.activation)


def atan2(y: Tensor, x: Tensor) -> Tensor:
    """``atan2(y, x)`` in float64 from ops ONNX Runtime has in float64 (it has ``Atan`` in
    float32 only): a float32 estimate ``t0`` plus one correction, the angle between ``(x, y)``
    and ``(cos t0, sin t0)`` to first order, ``(y cos t0 - x sin t0) / (x cos t0 + y sin t0)``.
    The estimate is off by ~1e-7 rad, the correction's own error is ~1e-21 rad."""
    t0 = torch.atan2(y.float(), x.float()).to(y.dtype)
    c, s = torch.cos(t0), torch.sin(t0)
    den = x * c + y * s
    return torch.where(den > 0, t0 + (y * c - x * s) / torch.where(den > 0, den, 1.0), t0)


class NeuralEncoder(nn.Module):
    """``h_e: x -> q`` for unknown minimal coordinates.

    With an ``in_map`` (``n x r``, see :class:`Decoder`) the network reads the ``r`` hull
    coordinates ``in_map^T (x - x_mean)`` instead of all ``n`` z-scored coordinates: directions
    the data never move in (where a z-score would only amplify round-off) do not reach it.
    """

    def __init__(self, n_x: int, n_q: int, hidden: Sequence[int], activation: str, angles: Sequence[bool],
                 x_mean: np.ndarray, x_scale: np.ndarray, in_map: np.ndarray | None = None):
        super().__init__()
        self.angles = [bool(a) for a in angles]
        n_in = n_x if in_map is None else in_map.shape[1]
        self.net = MLP([n_in, *hidden, sum(2 if a else 1 for a in self.angles)], activation)
        self.register_buffer("x_mean", _t(x_mean))
        self.register_buffer("x_scale", _t(x_scale))
        self.register_buffer("in_map", None if in_map is None else _t(in_map))

    def forward(self, x: Tensor) -> Tensor:
        return self.from_inputs(self.inputs(x))

    def inputs(self, x: Tensor) -> Tensor:
        """The network's inputs: fixed maps of ``x`` (training computes them once per dataset,
        not per loss evaluation: ``x`` has a column per natural coordinate, 972 for A02)."""
        d = x - self.x_mean
        return d / self.x_scale if self.in_map is None else d @ self.in_map

    def from_inputs(self, z: Tensor) -> Tensor:
        """``q`` from :meth:`inputs`."""
        out = self.net(z)
        q, k = [], 0
        for is_angle in self.angles:
            if is_angle:
                q.append(atan2(out[:, k + 1], out[:, k]))
                k += 2
            else:
                q.append(out[:, k])
                k += 1
        return torch.stack(q, 1)

    def runtime_weights(self) -> MLPWeights:
        """The network as the run-time model runs it, on ``(x - x_mean) / x_scale``: the input
        map folded into the first layer."""
        w = _weights(self.net)
        if self.in_map is None:
            return w
        F = self.in_map.detach().numpy() * self.x_scale.detach().numpy()[:, None]  # (n, r)
        return MLPWeights((w.weights[0] @ F.T,) + w.weights[1:], w.biases, w.activation)


class LinearEncoder(nn.Module):
    """Known minimal coordinates: ``q = E x + e0`` (fixed, not trained)."""

    def __init__(self, E: np.ndarray, e0: np.ndarray):
        super().__init__()
        self.register_buffer("E", _t(E))
        self.register_buffer("e0", _t(e0))

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.E.T + self.e0

    def inputs(self, x: Tensor) -> Tensor:
        """``q`` itself (see :meth:`NeuralEncoder.inputs`)."""
        return self(x)

    def from_inputs(self, z: Tensor) -> Tensor:
        return z


class TorchManifoldModel(nn.Module):
    """Decoder + encoder + the NC physics (``M`` and the force model, springs included).

    With a decoder on the data's affine hull (``out_map = P``, ``x = x_mean + P y``) the
    dynamics are computed in the ``r`` hull coordinates: every force of the model is affine in
    ``x`` (gravity, the inputs' ``f_B u + sum_i u_i f_C[i] x``, the springs' point differences
    ``D x + e``), so ``J^T M J = J_y^T (P^T M P) J_y``, ``J^T f = J_y^T P^T f`` and so on with the
    projected ``P^T M P`` (r x r), ``P^T f_g``, ``P^T f_B + P^T f_C x_mean``, ``P^T f_C P``,
    ``D P`` and ``D x_mean + e``: the same numbers as in natural coordinates (to round-off), at a
    cost that grows with ``r``, not with the number of bodies (A02's 972 coordinates have
    ``r = 2``).  The run-time model, with the map folded into the decoder, computes them in
    natural coordinates.
    """

    SPRING_BUFFERS = ("spring_D", "spring_e", "spring_k", "spring_c", "spring_L0")

    def __init__(self, decoder: Decoder, encoder: nn.Module, M: np.ndarray, forces: ForceModel, step_map: str):
        super().__init__()
        self.decoder = decoder
        self.encoder = encoder
        self.register_buffer("M", _t(M))
        blocks = mass_blocks(M)  # the dynamics use M's 4x4 blocks: linear in the number of bodies
        self.register_buffer("mass", self.M if blocks is None else _t(blocks), persistent=False)
        self.register_buffer("f_g", _t(forces.f_g))
        self.register_buffer("f_B", _t(forces.f_B))
        self.register_buffer("f_C", _t(forces.f_C))
        springs = forces.springs if forces.springs is not None else SpringModel.empty(len(forces.f_g))
        for name, value in zip(self.SPRING_BUFFERS, (springs.D, springs.e, springs.k, springs.c, springs.L0)):
            self.register_buffer(name, _t(value))
        # recorded springs' learned laws (fitted before training, fixed): numpy for the run-time
        # model, float64 tensors for the dynamics here (and the ONNX graphs)
        self.spring_laws = springs.laws if springs.laws is not None and len(springs.laws) else None
        self._spring_laws_t = None if self.spring_laws is None else self.spring_laws.converted(_t)
        self.step_map_name = step_map
        self.step_map: StepMap = get_step_map(step_map)
        self.library: TermLibrary | None = None
        # a decoder without a hull map (an exact kinematic map in the tests) works in x
        self.reduced = getattr(decoder, "out_map", None) is not None
        if self.reduced:  # the physics projected on the hull (derived: not saved)
            P, mean = decoder.out_map, decoder.x_mean
            for name, value in (("r_mass", P.T @ self.M @ P), ("r_f_g", self.f_g @ P),
                                ("r_f_B", P.T @ self.f_B + ((self.f_C @ mean) @ P).T), ("r_f_C", P.T @ self.f_C @ P),
                                ("r_spring_D", self.spring_D @ P), ("r_spring_e", self.spring_e + self.spring_D @ mean)):
                self.register_buffer(name, value.contiguous(), persistent=False)

    def set_library(self, library: TermLibrary | None, trainable: bool = False, dense: bool = False) -> None:
        """Identified terms (those with a nonzero coefficient); ``trainable``: the nonzero
        coefficients and the smoothed signs' scales become parameters (zeros stay zero);
        ``dense``: every term of the library is kept and trainable, zeros included."""
        if library is None or not len(library) or not (dense or len(library.active)):
            self.library = None
            for name in ("ident_Xi", "ident_param", "ident_mask"):
                if hasattr(self, name):
                    delattr(self, name)
            return
        library = library if dense else library.pruned()
        self.library = library
        Xi = _t(library.Xi).clone()  # a copy: training must not write into the library's arrays
        self.ident_Xi = nn.Parameter(Xi, requires_grad=trainable)
        self.ident_param = nn.Parameter(_t(library.param).clone(), requires_grad=trainable)
        self.register_buffer("ident_mask", torch.ones_like(Xi) if dense else (Xi != 0.0).to(F64))

    def identified_coefficients(self) -> Tensor:
        return self.ident_Xi * self.ident_mask

    def runtime_library(self) -> TermLibrary | None:
        """The identified terms with their trained coefficients and scales (numpy)."""
        if self.library is None:
            return None
        return self.library.with_coefficients(self.identified_coefficients().detach().numpy(),
                                              self.ident_param.detach().numpy())

    @property
    def springs(self) -> SimpleNamespace | None:
        if self.spring_k.shape[0] == 0:
            return None
        return SimpleNamespace(D=self.spring_D, e=self.spring_e, k=self.spring_k, c=self.spring_c, L0=self.spring_L0,
                               laws=self._spring_laws_t)

    def force(self, x: Tensor, u: Tensor) -> Tensor:
        """The force without the springs (they need the velocity; see :func:`acceleration`)."""
        return applied_force(self.f_g, self.f_B, self.f_C, x, u)

    def terms(self, q: Tensor, u: Tensor) -> ManifoldTerms:
        """The velocity-free terms at ``q``; with a hull decoder in hull coordinates (``terms.x``
        is then ``y``, ``terms.J`` is ``dy/dq``)."""
        return self.terms_and_curvature(q, u)[0]

    def terms_and_curvature(self, q: Tensor, u: Tensor, v: Tensor | None = None,
                            physics: dict[str, Tensor] | None = None) -> tuple[ManifoldTerms, Tensor | None]:
        """:meth:`terms`; with a velocity ``v``, without the Hessian and with ``H : v v`` instead;
        ``physics``: arrays in place of the model's own, by name: ``mass`` (as :attr:`mass`
        holds it), ``f_g``, ``f_B``, ``f_C`` and ``spring_D``, ``spring_e``, ``spring_k``,
        ``spring_c``, ``spring_L0`` (any of them; a decoder in natural coordinates only: the ONNX
        graphs' physics inputs, which a python FMU forms from its physical parameters and the
        mechanism file's input loads and spring attachment points)."""
        ident = None if self.library is None else (self.library, self.identified_coefficients(), self.ident_param, q, u)
        Hvv = None
        if not hasattr(self.decoder, "value_jv"):  # a decoder with J and H only (an exact map in the tests)
            v = None
        if self.reduced:
            if physics is not None:
                raise ValueError("physics inputs need the decoder in natural coordinates (the run-time model's form)")
            if v is None:
                y, J, H = self.decoder.hull_jh(q)
            else:
                (y, J, Hvv), H = self.decoder.hull_jv(q, v), None
            springs = self.springs
            if springs is not None:
                springs = SimpleNamespace(**{**vars(springs), "D": self.r_spring_D, "e": self.r_spring_e})
            return manifold_terms(y, J, H, self.r_mass, applied_force(self.r_f_g, self.r_f_B, self.r_f_C, y, u),
                                  springs, ident), Hvv
        if v is None:
            x, J, H = self.decoder.value_jh(q)
        else:
            (x, J, Hvv), H = self.decoder.value_jv(q, v), None
        ph = physics or {}
        springs = self.springs
        if springs is not None and physics:
            springs = SimpleNamespace(**{**vars(springs), **{k.removeprefix("spring_"): t for k, t in ph.items()
                                                             if k.startswith("spring_")}})
        force = applied_force(ph.get("f_g", self.f_g), ph.get("f_B", self.f_B), ph.get("f_C", self.f_C), x, u)
        return manifold_terms(x, J, H, ph.get("mass", self.mass), force, springs, ident), Hvv

    def acceleration(self, q: Tensor, v: Tensor, u: Tensor, physics: dict[str, Tensor] | None = None) -> Tensor:
        """``qddot`` at one velocity per sample (the decoder's Hessian enters as ``H : v v``
        only: cheaper than :meth:`terms`, which serves any velocity); ``physics``: see
        :meth:`terms_and_curvature`."""
        terms, Hvv = self.terms_and_curvature(q, u, v, physics)
        return acceleration(terms, v, Hvv)

    def step(self, q_prev: Tensor, q: Tensor, u: Tensor, dt, physics: dict[str, Tensor] | None = None) -> Tensor:
        terms = self.terms_and_curvature(q, u, None, physics)[0]
        return self.step_map.step(lambda v: acceleration(terms, v), q_prev, q, dt)


def _weights(net: MLP) -> MLPWeights:
    ws = [(W.detach().numpy().copy(), b.detach().numpy().copy()) for W, b in net.weights()]
    return MLPWeights(tuple(w for w, _ in ws), tuple(b for _, b in ws), net.activation)


def to_runtime(model: TorchManifoldModel, dt: float, resources: dict[str, bytes] | None = None) -> ManifoldModel:
    """The numpy run-time model of a trained torch model (the same numbers, no torch)."""
    a = lambda t: t.detach().numpy().copy()  # noqa: E731
    dec, enc = model.decoder, model.encoder
    springs = SpringModel(*(a(getattr(model, b)) for b in model.SPRING_BUFFERS), model.spring_laws)
    if isinstance(enc, LinearEncoder):
        encoder = {"encoder": None, "enc_x_mean": None, "enc_x_scale": None, "E": a(enc.E), "e0": a(enc.e0)}
    else:
        encoder = {"encoder": enc.runtime_weights(), "enc_x_mean": a(enc.x_mean), "enc_x_scale": a(enc.x_scale),
                   "E": None, "e0": None}
    return ManifoldModel(dt=float(dt), angles=tuple(dec.angles), step_map_name=model.step_map_name,
                         decoder=dec.runtime_weights(), q_mean=a(dec.q_mean), q_scale=a(dec.q_scale),
                         x_mean=a(dec.x_mean), x_scale=a(dec.x_scale), **encoder, M=a(model.M), f_g=a(model.f_g),
                         f_B=a(model.f_B), f_C=a(model.f_C), springs=springs, resources=dict(resources or {}),
                         library=model.runtime_library())


def from_runtime(rt: ManifoldModel) -> TorchManifoldModel:
    """The torch form of a run-time model (for its ONNX graphs and for tests)."""
    widths = rt.decoder.widths
    decoder = Decoder(rt.dof, rt.n_x, widths[1:-1], rt.decoder.activation, rt.angles, rt.q_mean, rt.q_scale,
                      rt.x_mean, rt.x_scale)
    _load(decoder.net, rt.decoder)
    if rt.encoder is None:
        encoder = LinearEncoder(rt.E, rt.e0)
    else:
        encoder = NeuralEncoder(rt.n_x, rt.dof, rt.encoder.widths[1:-1], rt.encoder.activation, rt.angles,
                                rt.enc_x_mean, rt.enc_x_scale)
        _load(encoder.net, rt.encoder)
    model = TorchManifoldModel(decoder, encoder, rt.M, ForceModel(rt.f_g, rt.f_B, rt.f_C, rt.springs), rt.step_map_name)
    model.set_library(rt.library)
    return model.eval()


def _load(net: MLP, w: MLPWeights) -> None:
    with torch.no_grad():
        for layer, W, b in zip(net.layers, w.weights, w.biases):
            layer.weight.copy_(_t(W))
            layer.bias.copy_(_t(b))
