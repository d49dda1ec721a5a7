"""A neural ODE on minimal coordinates (the MBD-NODE baseline, seed 003), for numpy and torch.

``qdd = f_theta(q, qd, u)``: an MLP of the normalised state and input (an angle-type
coordinate enters as its cosine and sine, so a full revolution is a closed loop of the
input), its output de-normalised to an acceleration.  One step is the classical fourth-order
Runge-Kutta scheme on ``(q, qd)`` with the input held over the step (:func:`rk4_step`), the
integrator the paper trains and runs with.  Both are written with arithmetic only, so the
training (torch) and the run-time model (numpy) run the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .array_ops import ops
from .mlp import MLPWeights, get_activation, mlp

Array = Any  # numpy.ndarray or torch.Tensor


@dataclass(frozen=True)
class NodeScales:
    """Affine normalisations: features ``(v - mean) / scale`` of ``q`` (non-angle columns),
    ``qd`` and ``u``; the network's output times ``a_scale`` plus ``a_mean`` is ``qdd``.
    float64 numpy arrays, or float64 tensors in an exported graph (an element of either is a
    float64 constant; a Python float would be stored through float32 by torch's dynamo ONNX exporter,
    the fallback of :func:`mc2fmu.reducers.autoencoder.graphs._quiet_export`)."""

    q_mean: np.ndarray
    q_scale: np.ndarray
    qd_mean: np.ndarray
    qd_scale: np.ndarray
    u_mean: np.ndarray
    u_scale: np.ndarray
    a_mean: np.ndarray
    a_scale: np.ndarray

    @classmethod
    def from_data(cls, q: np.ndarray, qd: np.ndarray, u: np.ndarray, qdd: np.ndarray) -> "NodeScales":
        def ms(a):
            a = np.asarray(a, dtype=np.float64).reshape(len(a), -1)
            s = a.std(axis=0)
            return a.mean(axis=0), np.where(s > 1e-12 * max(1.0, float(np.abs(a).max(initial=0.0))), s, 1.0)
        return cls(*ms(q), *ms(qd), *ms(u), *ms(qdd))


def node_features(q: Array, qd: Array, u: Array, angles, s: NodeScales) -> Array:
    """The network's input (B, n_in): per coordinate ``cos q, sin q`` (angles) or the
    normalised ``q``, then the normalised ``qd`` and ``u``."""
    o = ops(q)
    cols = []
    for i, is_angle in enumerate(angles):
        if is_angle:
            cols += [o.cos(q[:, i]), o.sin(q[:, i])]
        else:
            cols.append((q[:, i] - s.q_mean[i]) / s.q_scale[i])
    for i in range(qd.shape[1]):
        cols.append((qd[:, i] - s.qd_mean[i]) / s.qd_scale[i])
    for i in range(u.shape[1]):
        cols.append((u[:, i] - s.u_mean[i]) / s.u_scale[i])
    return o.stack(cols, 1)


def node_acceleration(layers, activation, q: Array, qd: Array, u: Array, angles, s: NodeScales) -> Array:
    """``qdd = f_theta(q, qd, u)`` (B, m)."""
    out = mlp(layers, activation, node_features(q, qd, u, angles, s))
    return ops(q).stack([out[:, i] * s.a_scale[i] + s.a_mean[i] for i in range(out.shape[1])], 1)


def rk4_step(f, q: Array, qd: Array, u: Array, dt: float) -> tuple[Array, Array]:
    """One classical Runge-Kutta step of ``(q, qd)' = (qd, f(q, qd, u))``, ``u`` held."""
    h = 0.5 * dt
    a1 = f(q, qd, u)
    v2 = qd + h * a1
    a2 = f(q + h * qd, v2, u)
    v3 = qd + h * a2
    a3 = f(q + h * v2, v3, u)
    v4 = qd + dt * a3
    a4 = f(q + dt * v3, v4, u)
    q_next = q + (dt / 6.0) * (qd + 2.0 * v2 + 2.0 * v3 + v4)
    qd_next = qd + (dt / 6.0) * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
    return q_next, qd_next


@dataclass(frozen=True)
class NodeDynamics:
    """The run-time neural ODE (numpy): weights, angle flags, normalisations and the step."""

    net: MLPWeights
    angles: tuple[bool, ...]
    scales: NodeScales
    dt: float

    def acceleration(self, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> np.ndarray:
        q, qd = np.atleast_2d(q), np.atleast_2d(qd)
        u = np.asarray(u, dtype=np.float64).reshape(len(q), -1)
        return node_acceleration(self.net.layers, get_activation(self.net.activation), q, qd, u, self.angles,
                                 self.scales)

    def step(self, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return rk4_step(self.acceleration, np.atleast_2d(q), np.atleast_2d(qd),
                        np.asarray(u, dtype=np.float64).reshape(np.atleast_2d(q).shape[0], -1), self.dt)

    def rollout(self, q0: np.ndarray, qd0: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(q, qd)`` (n_t, m) from ``(q0, qd0)``; step ``k -> k+1`` holds ``u[k]``.
        Non-finite states end the rollout (the rest is NaN)."""
        u = np.asarray(u, dtype=np.float64).reshape(len(u), -1)
        m = len(q0)
        Q, QD = np.full((len(u), m), np.nan), np.full((len(u), m), np.nan)
        q, qd = np.atleast_2d(np.asarray(q0, dtype=np.float64)), np.atleast_2d(np.asarray(qd0, dtype=np.float64))
        Q[0], QD[0] = q[0], qd[0]
        for k in range(len(u) - 1):
            q, qd = self.step(q, qd, u[k : k + 1])
            if not (np.isfinite(q).all() and np.isfinite(qd).all()):
                break
            Q[k + 1], QD[k + 1] = q[0], qd[0]
        return Q, QD
