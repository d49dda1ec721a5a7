"""Twice-differentiable MLPs whose value, Jacobian and Hessian are propagated explicitly.

For the decoder ``h_d: q -> x`` the reduced dynamics need ``x``, ``J = dx/dq`` and
``H = d2x/dq2``.  They are carried forward through the layers in plain tensor ops:

* affine layer  ``a = W z + b``:  ``Ja = W Jz``, ``Ha = W Hz``;
* activation    ``z = s(a)``:     ``Jz = s'(a) Ja``, ``Hz = s''(a) Ja Ja^T + s'(a) Ha``.

This is exact, 2-15x faster than ``torch.func`` for training on this CPU, and exports to
ONNX as ordinary ops.  ``torch.func`` and finite differences are the test oracles.

Angle-type minimal coordinates enter through ``(cos q, sin q)`` so a full revolution is a
closed loop of the decoder's input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .errors import TrainingError

Tensor = torch.Tensor


@dataclass(frozen=True)
class Activation:
    """An activation, and its value with first and second derivative (of the pre-activation)
    from one transcendental evaluation."""

    name: str
    f: Callable[[Tensor], Tensor]
    all: Callable[[Tensor], tuple[Tensor, Tensor, Tensor]]


def _tanh_all(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    t = torch.tanh(a)
    d1 = 1.0 - t * t
    return t, d1, -2.0 * t * d1


def _sig_all(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    s = torch.sigmoid(a)
    d1 = s * (1.0 - s)
    return s, d1, d1 * (1.0 - 2.0 * s)


def _softplus(a: Tensor) -> Tensor:
    return torch.nn.functional.softplus(a)


def _softplus_all(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    s = torch.sigmoid(a)
    return _softplus(a), s, s * (1.0 - s)


#: string registry of activations; ReLU is absent on purpose (H would vanish almost everywhere)
ACTIVATIONS: dict[str, Activation] = {
    "tanh": Activation("tanh", torch.tanh, _tanh_all),
    "sigmoid": Activation("sigmoid", torch.sigmoid, _sig_all),
    "softplus": Activation("softplus", _softplus, _softplus_all),
}


def get_activation(name: str) -> Activation:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise TrainingError(
            f"activation '{name}' is not available; choose one of {', '.join(ACTIVATIONS)} "
            "(twice differentiable: the reduced dynamics use the decoder's Hessian)"
        ) from None


def _linear_dim1(W: Tensor, T: Tensor) -> Tensor:
    """``W`` applied along dim 1 of ``T`` (B, i, ...), as one (B ..., i) x (i, o) product:
    einsum lowers ``"oi,bim->bom"`` with few columns to a broadcast multiply, ~5x slower."""
    return (torch.movedim(T, 1, -1) @ W.T).movedim(-1, 1)


class MLP(nn.Module):
    """A plain MLP: hidden layers with a smooth activation, a linear output layer."""

    def __init__(self, sizes: Sequence[int], activation: str = "tanh"):
        super().__init__()
        if len(sizes) < 2:
            raise ValueError("an MLP needs at least input and output sizes")
        self.sizes = list(sizes)
        self.act = get_activation(activation)
        self.layers = nn.ModuleList(nn.Linear(a, b, dtype=torch.float64) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, z: Tensor) -> Tensor:
        for k, layer in enumerate(self.layers):
            z = layer(z)
            if k < len(self.layers) - 1:
                z = self.act.f(z)
        return z

    def forward_jh(self, z: Tensor, Jz: Tensor, Hz: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Propagate value (B, n), Jacobian (B, n, m) and Hessian (B, n, m, m) (or None)."""
        for k, layer in enumerate(self.layers):
            W = layer.weight
            z = layer(z)
            Jz = _linear_dim1(W, Jz)
            if Hz is not None:
                Hz = _linear_dim1(W, Hz)
            if k < len(self.layers) - 1:
                z, d1, d2 = self.act.all(z)
                if Hz is not None:
                    Hz = d2[..., None, None] * Jz[..., :, None] * Jz[..., None, :] + d1[..., None, None] * Hz
                Jz = d1[..., None] * Jz
        return z, Jz, Hz
