"""Reduced models whose dynamics are not the decoder manifold's physics, but whose minimal
coordinates are a decoder-manifold model's (its *chart*): the MBD-NODE neural ODE (seed 003)
and the local-PCA piecewise-linear ROM (seed 002).

The chart (a :class:`~mc2fmu.models.manifold.ManifoldModel`, learnt or known coordinates)
gives ``encode``/``decode``, so every model kind has the same inputs and outputs: an FMU is
started with ``q_start``/``qd_start`` and reports poses, ``q`` and ``qd`` whichever model runs
inside, and a comparison between them isolates the dynamics model.

* :class:`NodeModel`: ``qdd = f_theta(q, qd, u)`` (:mod:`mc2fmu.models.node`), one classical
  RK4 step per sample; state ``(q, qd)``; poses decoded from ``q``.
* :class:`LocalPcaModel`: Algorithm 1 of seed 002 (:mod:`mc2fmu.models.local_linear`) on
  natural coordinates; state ``(cluster, q_r, qd_r, qdd_r)`` of the active cluster; poses from
  the cluster's ``x = V q_r + mu``, ``q`` and ``qd`` from the chart (``q = encode(x)``, ``qd``
  the least-squares solution of ``J(q) qd = V qd_r``).  Started in the cluster nearest
  ``decode(q0)``, in the state the chart reads back as ``(q0, qd0)``
  (:meth:`~mc2fmu.models.local_linear.LocalLinearModel.chart_state`).

Both save the chart's arrays under ``chart.`` and their own under ``node.`` / ``lpca.``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..mechanics.natural import ForceModel
from .local_linear import LocalLinearModel, LocalState
from .manifold import ManifoldModel
from .mlp import MLPWeights, get_activation
from .node import NodeDynamics, NodeScales, rk4_step

_SCALES = ("q_mean", "q_scale", "qd_mean", "qd_scale", "u_mean", "u_scale", "a_mean", "a_scale")


def chart_velocity(chart: ManifoldModel, q: np.ndarray, xd: np.ndarray) -> np.ndarray:
    """``qd`` (B, m): the least-squares solution of ``J(q) qd = xd`` (B, n), the velocity in the
    chart's coordinates of a natural-coordinate velocity (smooth where ``xd`` is, unlike a
    difference of encoded ``q``, which carries the encoder's error divided by the step)."""
    _, J, _ = chart.decode_jh(q)
    JT = np.swapaxes(J, 1, 2)
    return np.linalg.solve(JT @ J, np.einsum("bmn,bn->bm", JT, xd)[..., None])[..., 0]


def _split(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


class _Charted:
    """What both kinds share: the chart's coordinates and its saving."""

    chart: ManifoldModel

    @property
    def dt(self) -> float:
        return self.chart.dt

    @property
    def angles(self) -> tuple[bool, ...]:
        return self.chart.angles

    @property
    def dof(self) -> int:
        return self.chart.dof

    @property
    def n_u(self) -> int:
        return self.chart.n_u

    def encode(self, x: np.ndarray) -> np.ndarray:
        return self.chart.encode(x)

    def decode(self, q: np.ndarray) -> np.ndarray:
        return self.chart.decode(q)

    def saved_features(self) -> frozenset[str]:
        return frozenset()

    def _chart_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        params, arrays = self.chart.to_saved()
        return params, {f"chart.{k}": v for k, v in arrays.items()}

    @staticmethod
    def _chart_shapes(params: dict, dof: int, n_x: int, n_u: int, n_s: int, angles) -> dict[str, tuple[int, ...]]:
        shapes = ManifoldModel.array_shapes(params["chart"], dof, n_x, n_u, n_s, angles)
        return {f"chart.{k}": v for k, v in shapes.items()}

    @staticmethod
    def _chart_from(params: dict, arrays: dict[str, np.ndarray], dt: float, angles) -> ManifoldModel:
        return ManifoldModel.from_saved(params["chart"], _split(arrays, "chart."), dt=dt, angles=angles)


# ------------------------------------------------------------------ MBD-NODE


@dataclass
class NodeModel(_Charted):
    """The neural ODE on the chart's coordinates (state ``(q, qd)``, RK4 per sample)."""

    chart: ManifoldModel
    dynamics: NodeDynamics
    resources: dict[str, bytes] = field(default_factory=dict, compare=False)

    kind = "node"

    @property
    def state_size(self) -> int:
        return 2 * self.dof

    def acceleration(self, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> np.ndarray:
        return self.dynamics.acceleration(q, qd, u)

    def start(self, q0, qd0, u0) -> np.ndarray:
        m = self.dof
        return np.concatenate([np.asarray(q0, dtype=np.float64).reshape(m), np.asarray(qd0, dtype=np.float64).reshape(m)])

    def advance(self, s: np.ndarray, u: np.ndarray) -> np.ndarray:
        m = self.dof
        q, qd = rk4_step(self.dynamics.acceleration, s[None, :m], s[None, m:],
                         np.asarray(u, dtype=np.float64).reshape(1, self.n_u), self.dt)
        return np.concatenate([q[0], qd[0]])

    def observe(self, states: np.ndarray):
        m = self.dof
        return states[:, :m], states[:, m:], self.chart.decode(states[:, :m])

    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        chart_params, arrays = self._chart_saved()
        net = self.dynamics.net
        for i, (W, b) in enumerate(net.layers):
            arrays[f"node.W{i}"], arrays[f"node.b{i}"] = W, b
        for name in _SCALES:
            arrays[f"node.{name}"] = getattr(self.dynamics.scales, name)
        return {"chart": chart_params, "node": {"widths": net.widths, "activation": net.activation}}, arrays

    @staticmethod
    def array_shapes(params: dict, dof: int, n_x: int, n_u: int, n_s: int, angles) -> dict[str, tuple[int, ...]]:
        shapes = _Charted._chart_shapes(params, dof, n_x, n_u, n_s, angles)
        widths = [int(w) for w in params["node"]["widths"]]
        n_in = sum(2 if a else 1 for a in angles) + dof + n_u
        if len(widths) < 2 or widths[0] != n_in or widths[-1] != dof:
            raise ValueError(f"node widths {widths} must start with {n_in} (features of q, qd, u) and end with {dof}")
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            shapes[f"node.W{i}"], shapes[f"node.b{i}"] = (b, a), (b,)
        for name in _SCALES:
            shapes[f"node.{name}"] = (n_u,) if name.startswith("u_") else (dof,)
        return shapes

    @classmethod
    def from_saved(cls, params: dict, arrays: dict[str, np.ndarray], *, dt: float, angles,
                   resources: dict[str, bytes] | None = None) -> "NodeModel":
        chart = cls._chart_from(params, arrays, dt, angles)
        info = params["node"]
        get_activation(info["activation"])
        n = len(info["widths"]) - 1
        net = MLPWeights(tuple(arrays[f"node.W{i}"] for i in range(n)), tuple(arrays[f"node.b{i}"] for i in range(n)),
                         info["activation"])
        scales = NodeScales(*(arrays[f"node.{name}"] for name in _SCALES))
        bad = [name for name in _SCALES if name.endswith("_scale") and not np.all(getattr(scales, name) > 0)]
        if bad:
            raise ValueError(f"node normalisation {', '.join(bad)} must be positive")
        return cls(chart, NodeDynamics(net, tuple(bool(a) for a in angles), scales, float(dt)), dict(resources or {}))


# ------------------------------------------------------------------ local PCA


@dataclass
class LocalPcaModel(_Charted):
    """The piecewise-linear ROM, its coordinates read through the chart."""

    chart: ManifoldModel
    rom: LocalLinearModel
    resources: dict[str, bytes] = field(default_factory=dict, compare=False)

    kind = "local-pca"

    @property
    def state_size(self) -> int:
        return 1 + 3 * self.rom.r

    def _pack(self, st: LocalState) -> np.ndarray:
        return np.concatenate([[float(st.cluster)], st.q, st.qd, st.qdd])

    def _unpack(self, s: np.ndarray) -> LocalState:
        r, k = self.rom.r, self.rom.clusters
        i = int(s[0]) if np.isfinite(s[0]) else -1
        if not (0 <= i < k and s[0] == i):
            raise ValueError(f"state's cluster {s[0]!r} is not one of 0..{k - 1}")
        return LocalState(i, s[1 : 1 + r], s[1 + r : 1 + 2 * r], s[1 + 2 * r :])

    def start_state(self, q0, qd0, u0) -> LocalState:
        """The ROM state the chart reads as ``(q0, qd0)``, in the cluster nearest ``decode(q0)``
        (:meth:`LocalLinearModel.chart_state`): :meth:`observe` of it gives ``(q0, qd0)`` back,
        so the first ``q``, ``qd`` of a run start the same run again."""
        q0 = np.asarray(q0, dtype=np.float64).reshape(self.dof)
        x, J, _ = self.chart.decode_jh(q0[None])
        return self.rom.chart_state(x[0], J[0], q0, np.asarray(qd0, dtype=np.float64).reshape(self.dof),
                                    np.asarray(u0, dtype=np.float64).reshape(self.n_u),
                                    lambda x: self.chart.encode(x[None])[0], self.angles)

    def start(self, q0, qd0, u0) -> np.ndarray:
        return self._pack(self.start_state(q0, qd0, u0))

    def advance(self, s: np.ndarray, u: np.ndarray) -> np.ndarray:
        return self._pack(self.rom.step(self._unpack(s), np.asarray(u, dtype=np.float64).reshape(self.n_u)))

    def positions(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(x, xd)`` (B, n) of a batch of states: the active cluster's ``V q_r + mu``, ``V qd_r``."""
        r = self.rom.r
        idx = np.clip(states[:, 0].astype(int), 0, self.rom.clusters - 1)
        V = self.rom.bases[idx]
        x = np.einsum("bnr,br->bn", V, states[:, 1 : 1 + r]) + self.rom.centroids[idx]
        return x, np.einsum("bnr,br->bn", V, states[:, 1 + r : 1 + 2 * r])

    def observe(self, states: np.ndarray):
        x, xd = self.positions(states)
        q = self.chart.encode(x)
        return q, chart_velocity(self.chart, q, xd), x

    def extent(self, states: np.ndarray) -> np.ndarray:
        """(B,) how far each state's ``x`` lies beyond its cluster's extent, in cluster radii
        (:meth:`LocalLinearModel.extent`): part of the envelope distance of this kind."""
        x, _ = self.positions(states)
        idx = np.clip(states[:, 0].astype(int), 0, self.rom.clusters - 1)
        return np.array([self.rom.extent(int(i), xi) for i, xi in zip(idx, x)])

    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        chart_params, arrays = self._chart_saved()
        rom = self.rom
        arrays.update({"lpca.centroids": rom.centroids, "lpca.bases": rom.bases, "lpca.M": rom.M, "lpca.K": rom.K,
                       "lpca.c": rom.c, "lpca.D": rom.D, "lpca.P": rom.P, "lpca.radius": rom.radius})
        return {"chart": chart_params, "local_pca": {"clusters": rom.clusters, "modes": rom.r, "eps": rom.eps}}, arrays

    @staticmethod
    def array_shapes(params: dict, dof: int, n_x: int, n_u: int, n_s: int, angles) -> dict[str, tuple[int, ...]]:
        shapes = _Charted._chart_shapes(params, dof, n_x, n_u, n_s, angles)
        info = params["local_pca"]
        k, r = int(info["clusters"]), int(info["modes"])
        if k < 1 or not 1 <= r <= n_x:
            raise ValueError(f"local_pca clusters {k} must be >= 1 and modes {r} in 1..{n_x}")
        shapes.update({"lpca.centroids": (k, n_x), "lpca.bases": (k, n_x, r), "lpca.M": (k, r, r),
                       "lpca.K": (k, r, r), "lpca.c": (k, r), "lpca.D": (k, r, r), "lpca.P": (k,), "lpca.radius": (k,)})
        return shapes

    @classmethod
    def from_saved(cls, params: dict, arrays: dict[str, np.ndarray], *, dt: float, angles,
                   resources: dict[str, bytes] | None = None) -> "LocalPcaModel":
        chart = cls._chart_from(params, arrays, dt, angles)
        info = params["local_pca"]
        eps = float(info["eps"])
        if not 0.0 < eps < 1.0:
            raise ValueError(f"local_pca eps {eps} must be in (0, 1)")
        a = _split(arrays, "lpca.")
        if np.any(np.linalg.eigvalsh(a["M"])[:, 0] <= 0.0):
            raise ValueError("a cluster's reduced mass V^T M V is not positive definite")
        if not np.all(a["radius"] > 0.0):
            raise ValueError("a cluster's radius is not positive")
        forces = ForceModel(chart.f_g, chart.f_B, chart.f_C, None)
        rom = LocalLinearModel(a["centroids"], a["bases"], a["M"], a["K"], a["c"], a["D"], a["P"], forces, float(dt), eps,
                               a["radius"])
        return cls(chart, rom, dict(resources or {}))
