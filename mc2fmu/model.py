"""The reduced model: decoder ``q -> x``, encoder ``x -> q`` and the NC physics they project.

* :class:`Decoder` -- z-scored inputs (or ``cos q, sin q`` for angle-type coordinates), an
  MLP, de-normalised outputs; value, ``J`` and ``H`` by explicit propagation.
* :class:`NeuralEncoder` -- the autoencoder's encoder (unknown minimal coordinates);
  angle-type coordinates leave it as ``atan2(s, c)``.
* :class:`LinearEncoder` -- known minimal coordinates: a fixed linear selection of ``x``
  (pose positions and rotation-matrix entries are exactly linear in the natural coordinates).
* :class:`ReducedModel` -- both plus ``M`` and the force model; ``step`` is the one-step map
  used by training and simulation alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .dynamics import ManifoldTerms, Springs, StepMap, acceleration, get_step_map, manifold_terms
from .natural import ForceModel, SpringModel
from .network import MLP

Tensor = torch.Tensor
F64 = torch.float64


def _t(a) -> Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=F64)


class Decoder(nn.Module):
    """``h_d: q -> x`` with exact ``J`` and ``H``."""

    def __init__(
        self,
        n_q: int,
        n_x: int,
        hidden: Sequence[int],
        activation: str,
        angles: Sequence[bool],
        q_mean: np.ndarray,
        q_scale: np.ndarray,
        x_mean: np.ndarray,
        x_scale: np.ndarray,
    ):
        super().__init__()
        self.n_q, self.n_x = n_q, n_x
        self.angles = [bool(a) for a in angles]
        n_feat = sum(2 if a else 1 for a in self.angles)
        self.net = MLP([n_feat, *hidden, n_x], activation)
        self.register_buffer("q_mean", _t(q_mean))
        self.register_buffer("q_scale", _t(q_scale))
        self.register_buffer("x_mean", _t(x_mean))
        self.register_buffer("x_scale", _t(x_scale))

    def features(self, q: Tensor, second: bool = True) -> tuple[Tensor, Tensor, Tensor | None]:
        """Network input ``phi(q)`` with its Jacobian (B, n_f, m) and Hessian (B, n_f, m, m)."""
        B, m = q.shape
        phi, J, H = [], [], []
        for i, is_angle in enumerate(self.angles):
            qi = q[:, i]
            e = torch.zeros(B, m, dtype=q.dtype)
            e[:, i] = 1.0
            if is_angle:
                c, s = torch.cos(qi), torch.sin(qi)
                phi += [c, s]
                J += [-s[:, None] * e, c[:, None] * e]
                if second:
                    E = torch.zeros(B, m, m, dtype=q.dtype)
                    E[:, i, i] = 1.0
                    H += [-c[:, None, None] * E, -s[:, None, None] * E]
            else:
                phi.append((qi - self.q_mean[i]) / self.q_scale[i])
                J.append(e / self.q_scale[i])
                if second:
                    H.append(torch.zeros(B, m, m, dtype=q.dtype))
        return torch.stack(phi, 1), torch.stack(J, 1), (torch.stack(H, 1) if second else None)

    def forward(self, q: Tensor) -> Tensor:
        phi, _, _ = self.features(q, second=False)
        return self.x_mean + self.x_scale * self.net(phi)

    def value_jh(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        phi, Jphi, Hphi = self.features(q)
        y, Jy, Hy = self.net.forward_jh(phi, Jphi, Hphi)
        s = self.x_scale
        return self.x_mean + s * y, s[:, None] * Jy, s[:, None, None] * Hy


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
    """``h_e: x -> q`` for unknown minimal coordinates."""

    def __init__(self, n_x: int, n_q: int, hidden: Sequence[int], activation: str, angles: Sequence[bool],
                 x_mean: np.ndarray, x_scale: np.ndarray):
        super().__init__()
        self.angles = [bool(a) for a in angles]
        self.net = MLP([n_x, *hidden, sum(2 if a else 1 for a in self.angles)], activation)
        self.register_buffer("x_mean", _t(x_mean))
        self.register_buffer("x_scale", _t(x_scale))

    def forward(self, x: Tensor) -> Tensor:
        out = self.net((x - self.x_mean) / self.x_scale)
        q, k = [], 0
        for is_angle in self.angles:
            if is_angle:
                q.append(atan2(out[:, k + 1], out[:, k]))
                k += 2
            else:
                q.append(out[:, k])
                k += 1
        return torch.stack(q, 1)


class LinearEncoder(nn.Module):
    """Known minimal coordinates: ``q = E x + e0`` (fixed, not trained)."""

    def __init__(self, E: np.ndarray, e0: np.ndarray):
        super().__init__()
        self.register_buffer("E", _t(E))
        self.register_buffer("e0", _t(e0))

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.E.T + self.e0


class ReducedModel(nn.Module):
    """Decoder + encoder + the NC physics (``M`` and the force model, springs included)."""

    SPRING_BUFFERS = ("spring_D", "spring_e", "spring_k", "spring_c", "spring_L0")

    def __init__(self, decoder: Decoder, encoder: nn.Module, M: np.ndarray, forces: ForceModel, step_map: str):
        super().__init__()
        self.decoder = decoder
        self.encoder = encoder
        self.register_buffer("M", _t(M))
        self.register_buffer("f_g", _t(forces.f_g))
        self.register_buffer("f_B", _t(forces.f_B))
        self.register_buffer("f_C", _t(forces.f_C))
        springs = forces.springs if forces.springs is not None else SpringModel.empty(len(forces.f_g))
        for name, value in zip(self.SPRING_BUFFERS, (springs.D, springs.e, springs.k, springs.c, springs.L0)):
            self.register_buffer(name, _t(value))
        self.step_map: StepMap = get_step_map(step_map)

    @property
    def springs(self) -> Springs | None:
        if self.spring_k.shape[0] == 0:
            return None
        return Springs(self.spring_D, self.spring_e, self.spring_k, self.spring_c, self.spring_L0)

    def force(self, x: Tensor, u: Tensor) -> Tensor:
        """The force without the springs (they need the velocity; see :func:`acceleration`)."""
        f = self.f_g + u @ self.f_B.T
        n_u, n = self.f_C.shape[0], self.f_C.shape[1]
        if n_u:
            # sum_i u_i f_C[i] x as one (B, n) x (n, n_u n) product: einsum lowers it to a
            # broadcast multiply of a (B, n, 1, n) temporary, 20x slower at n = 72
            Cx = (x @ self.f_C.reshape(n_u * n, n).T).reshape(-1, n_u, n)
            f = f + (u.unsqueeze(-1) * Cx).sum(1)
        return f

    def terms(self, q: Tensor, u: Tensor) -> ManifoldTerms:
        x, J, H = self.decoder.value_jh(q)
        return manifold_terms(x, J, H, self.M, self.force(x, u), self.springs)

    def acceleration(self, q: Tensor, v: Tensor, u: Tensor) -> Tensor:
        return acceleration(self.terms(q, u), v)

    def step(self, q_prev: Tensor, q: Tensor, u: Tensor, dt: float) -> Tensor:
        return self.step_map.step(self.terms(q, u), q_prev, q, dt)


def unwrap_angles(q: np.ndarray, angles: Sequence[bool]) -> np.ndarray:
    """Unwrap angle-type columns of a time series ``q`` (n_t, m) so they are continuous."""
    q = np.array(q, dtype=np.float64)
    for i, a in enumerate(angles):
        if a:
            q[:, i] = np.unwrap(q[:, i])
    return q


def wrap_to_pi(a: Tensor) -> Tensor:
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi
