"""What every reduced model offers at run time: the :class:`ReducedModel` protocol.

``simulate``, the FMU backends and validation use a reduced model only through this
protocol, in numpy (no torch): the reducers (:mod:`mc2fmu.reducers`) train with whatever
they like and hand over a run-time model of a registered kind (:data:`MODEL_KINDS`), which
the artifact (:mod:`mc2fmu.reduced.artifact`) saves and loads.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .manifold import ManifoldModel
from .step_maps import StepMap


@runtime_checkable
class ReducedModel(Protocol):
    """A second-order reduced ODE ``qdd = f(q, qd, u)`` on ``dof`` minimal coordinates, with
    its map to and from natural coordinates and the one-step map it was trained with."""

    kind: str  # the key of MODEL_KINDS
    dt: float  # the fixed step of the one-step map, s
    angles: tuple[bool, ...]  # angle-type coordinates (2 pi periodic)
    resources: dict[str, bytes]  # extra files saved with the model (e.g. ONNX graphs)

    @property
    def dof(self) -> int: ...

    @property
    def n_u(self) -> int: ...

    @property
    def step_map(self) -> StepMap: ...

    def encode(self, x: np.ndarray) -> np.ndarray:
        """``q`` (B, m) of NC states ``x`` (B, n); angle coordinates in (-pi, pi]."""

    def decode(self, q: np.ndarray) -> np.ndarray:
        """NC states ``x`` (B, n) of ``q`` (B, m)."""

    def acceleration(self, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The right-hand side ``qdd`` (B, m)."""

    def step(self, q_prev: np.ndarray, q: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``q_{i+1}`` (B, m) from ``q_{i-1}``, ``q_i`` and ``u_i``."""

    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(params, arrays)`` to store: JSON-able parameters and named float64 arrays."""


#: run-time model kinds, by the name the artifact records
MODEL_KINDS: dict[str, type] = {ManifoldModel.kind: ManifoldModel}
