"""What every reduced model offers at run time: the :class:`ReducedModel` protocol.

``simulate``, the FMU backends and validation use a reduced model only through this
protocol, in numpy (no torch): the reducers (:mod:`mc2fmu.reducers`) train with whatever
they like and hand over a run-time model of a registered kind (:data:`MODEL_KINDS`), which
the artifact (:mod:`mc2fmu.models.artifact`) saves and loads.

A model is a discrete-time state-space system on the sample grid: ``start`` makes its state
(a flat float64 vector of ``state_size``) from the minimal coordinates and their velocities,
``advance`` takes one sample step with the input held, ``observe`` gives the outputs.  What
the state holds is the kind's business (a decoder-manifold model keeps ``q_{k-1}, q_k, qd_k``;
the local-PCA ROM its active cluster and that cluster's coordinates; the neural ODE
``q, qd``), so every kind is simulated, validated and exported through the same four calls.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .charted import LocalPcaModel, NodeModel
from .manifold import ManifoldModel


@runtime_checkable
class ReducedModel(Protocol):
    """A reduced model on ``dof`` minimal coordinates with ``n_u`` inputs, stepped at ``dt``."""

    kind: str  # the key of MODEL_KINDS
    dt: float  # the fixed sample step, s
    angles: tuple[bool, ...]  # angle-type coordinates (2 pi periodic)
    resources: dict[str, bytes]  # extra files saved with the model (e.g. ONNX graphs)

    @property
    def dof(self) -> int: ...

    @property
    def n_u(self) -> int: ...

    @property
    def state_size(self) -> int: ...

    def encode(self, x: np.ndarray) -> np.ndarray:
        """``q`` (B, m) of NC states ``x`` (B, n); angle coordinates in (-pi, pi]."""

    def decode(self, q: np.ndarray) -> np.ndarray:
        """NC states ``x`` (B, n) of ``q`` (B, m)."""

    def start(self, q0: np.ndarray, qd0: np.ndarray, u0: np.ndarray) -> np.ndarray:
        """The state (state_size,) at ``q0``, ``qd0`` (m,) under the input ``u0`` (n_u,)."""

    def advance(self, s: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The state one sample step after ``s`` with ``u`` held over the step."""

    def observe(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q (B, m), qd (B, m), x (B, n))`` of a batch of states (B, state_size)."""

    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(params, arrays)`` to store: JSON-able parameters and named float64 arrays."""

    def saved_features(self) -> frozenset[str]:
        """What :meth:`to_saved` holds that not every model-format version can hold (names of
        :data:`mc2fmu.models.artifact.FEATURE_VERSIONS`): the artifact writes the oldest
        version that holds them all."""


#: run-time model kinds, by the name the artifact records
MODEL_KINDS: dict[str, type] = {k.kind: k for k in (ManifoldModel, NodeModel, LocalPcaModel)}
