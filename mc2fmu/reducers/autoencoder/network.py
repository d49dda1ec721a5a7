"""Twice-differentiable MLPs (torch modules) whose value, Jacobian and Hessian are propagated
explicitly by :func:`mc2fmu.reduced.manifold.mlp_jh`, the code the run-time model uses too.

This is exact, 2-15x faster than ``torch.func`` for training on this CPU, and exports to
ONNX as ordinary ops.  ``torch.func`` and finite differences are the test oracles.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ...reduced.manifold import get_activation, mlp, mlp_jh

Tensor = torch.Tensor


class MLP(nn.Module):
    """A plain MLP: hidden layers with a smooth activation, a linear output layer."""

    def __init__(self, sizes: Sequence[int], activation: str = "tanh"):
        super().__init__()
        if len(sizes) < 2:
            raise ValueError("an MLP needs at least input and output sizes")
        self.sizes = list(sizes)
        self.activation = activation
        self.act = get_activation(activation)
        self.layers = nn.ModuleList(nn.Linear(a, b, dtype=torch.float64) for a, b in zip(sizes[:-1], sizes[1:]))

    def weights(self) -> list[tuple[Tensor, Tensor]]:
        return [(layer.weight, layer.bias) for layer in self.layers]

    def forward(self, z: Tensor) -> Tensor:
        return mlp(self.weights(), self.act, z)

    def forward_jh(self, z: Tensor, Jz: Tensor, Hz: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Propagate value (B, n), Jacobian (B, n, m) and Hessian (B, n, m, m) (or None)."""
        return mlp_jh(self.weights(), self.act, z, Jz, Hz)
