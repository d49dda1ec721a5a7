"""Multilayer perceptrons written once for numpy and torch: activations with their first and
second derivatives, the value and the explicit Jacobian / Hessian propagation, and the
weights' container.  Used by the decoder manifold (:mod:`mc2fmu.models.manifold`) and the
learned spring laws (:mod:`mc2fmu.models.spring_laws`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError
from .array_ops import ops


# ------------------------------------------------------------------ activations


def _tanh_all(a):
    t = ops(a).tanh(a)
    d1 = 1.0 - t * t
    return t, d1, -2.0 * t * d1


def _sigmoid_all(a):
    s = ops(a).sigmoid(a)
    d1 = s * (1.0 - s)
    return s, d1, d1 * (1.0 - 2.0 * s)


def _softplus_all(a):
    s = ops(a).sigmoid(a)
    return ops(a).softplus(a), s, s * (1.0 - s)


@dataclass(frozen=True)
class Activation:
    """An activation: its value, and value with first and second derivative from one
    transcendental evaluation."""

    name: str
    value: Any
    all: Any


#: string registry of activations; ReLU is absent on purpose (H would vanish almost everywhere)
ACTIVATIONS: dict[str, Activation] = {
    "tanh": Activation("tanh", lambda a: ops(a).tanh(a), _tanh_all),
    "sigmoid": Activation("sigmoid", lambda a: ops(a).sigmoid(a), _sigmoid_all),
    "softplus": Activation("softplus", lambda a: ops(a).softplus(a), _softplus_all),
}


def get_activation(name: str) -> Activation:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ModelError(
            f"activation '{name}' is not available; choose one of {', '.join(ACTIVATIONS)} "
            "(twice differentiable: the reduced dynamics use the decoder's Hessian)"
        ) from None


# ------------------------------------------------------------------ MLP propagation


def _linear_dim1(W, T):
    """``W`` applied along dim 1 of ``T`` (B, i, ...), as one (B ..., i) x (i, o) product:
    einsum lowers ``"oi,bim->bom"`` with few columns to a broadcast multiply, ~5x slower."""
    mv = ops(T).movedim
    return mv(mv(T, 1, -1) @ W.T, -1, 1)


def mlp(layers, activation: Activation, z):
    """An MLP's value: hidden layers with ``activation``, a linear output layer."""
    affine = ops(z).affine
    for k, (W, b) in enumerate(layers):
        z = affine(z, W, b)
        if k < len(layers) - 1:
            z = activation.value(z)
    return z


def mlp_jh(layers, activation: Activation, z, Jz, Hz):
    """Propagate value (B, n), Jacobian (B, n, m) and Hessian (B, n, m, m) (or None):

    * affine layer  ``a = W z + b``:  ``Ja = W Jz``, ``Ha = W Hz``;
    * activation    ``z = s(a)``:     ``Jz = s'(a) Ja``, ``Hz = s''(a) Ja Ja^T + s'(a) Ha``.
    """
    affine = ops(z).affine
    for k, (W, b) in enumerate(layers):
        z = affine(z, W, b)
        Jz = _linear_dim1(W, Jz)
        if Hz is not None:
            Hz = _linear_dim1(W, Hz)
        if k < len(layers) - 1:
            z, d1, d2 = activation.all(z)
            if Hz is not None:
                Hz = d2[..., None, None] * Jz[..., :, None] * Jz[..., None, :] + d1[..., None, None] * Hz
            Jz = d1[..., None] * Jz
    return z, Jz, Hz


def mlp_jv(layers, activation: Activation, z, Jr, S, v):
    """An MLP's value (B, o), Jacobian rows (B, m, o) and second derivative along ``v`` (B, o)
    from its input's value ``z`` (B, n), Jacobian rows ``Jr`` (B, m, n: ``dz/dq_j`` in row j) and
    second derivative ``S = (d2z/dq2) : v v`` (B, n), ``v`` (B, m): what the dynamics need at
    one velocity without the whole Hessian (one row per sample instead of ``m (m + 1) / 2``):

    * affine layer  ``a = W z + b``:  ``Ja = J W^T`` (rows), ``Sa = W S``;
    * activation    ``z = s(a)``:     ``J = s'(a) Ja`` (per column), ``S = s''(a) (v^T Ja)^2 + s'(a) Sa``.

    Training's loss runs it on torch tensors (``network.MLP.forward_jv``), the Modelica export
    on traced arrays (:mod:`mc2fmu.models.array_trace`), numpy on arrays."""
    o = ops(z)
    for k, (W, b) in enumerate(layers):
        z = o.affine(z, W, b)
        Jr = o.linear(Jr, W)
        S = o.linear(S, W)
        if k < len(layers) - 1:
            z, d1, d2 = activation.all(z)
            Jv = o.einsum("bm,bmn->bn", v, Jr)
            S = d2 * Jv * Jv + d1 * S
            Jr = d1[:, None] * Jr
    return z, Jr, S


def mlp_slope(layers, activation: Activation, z):
    """An MLP of one input: its value (B, o) and derivative along the input (B, o) at ``z``
    (B, 1), the derivative propagated forward beside the value (``da = W dz``, ``dz = s'(a)
    da``).  Plain products and sums, so it runs on every array type (CasADi's rows and traced
    expressions included) and torch differentiates it for training."""
    o = ops(z)
    dz = np.ones(z.shape) if isinstance(z, np.ndarray) else z * 0.0 + 1.0  # numbers, not nodes, in a trace
    for k, (W, b) in enumerate(layers):
        z, dz = o.affine(z, W, b), o.linear(dz, W)
        if k < len(layers) - 1:
            z, d1, _ = activation.all(z)
            dz = d1 * dz
    return z, dz


@dataclass(frozen=True)
class MLPWeights:
    """An MLP's weights, ``W`` (out, in) and ``b`` (out,) per layer, and its activation."""

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    activation: str

    @property
    def layers(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return list(zip(self.weights, self.biases))

    @property
    def widths(self) -> list[int]:
        return [self.weights[0].shape[1]] + [W.shape[0] for W in self.weights]
