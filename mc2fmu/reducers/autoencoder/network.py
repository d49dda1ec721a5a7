"""Twice-differentiable MLPs (torch modules) whose value, Jacobian and Hessian are propagated
explicitly, as :func:`mc2fmu.models.manifold.mlp_jh` (the run-time model's code) does, in a
layout made for training (:func:`packed_jh`).

This is exact, 2-15x faster than ``torch.func`` for training on this CPU, and exports to
ONNX as ordinary ops.  ``torch.func``, finite differences and ``mlp_jh`` are the test oracles.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ...models.mlp import get_activation, mlp, mlp_jv

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
        return packed_jh(self.weights(), self.act, z, Jz, Hz)

    def forward_jv(self, z: Tensor, Jz: Tensor, Sz: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Propagate value (B, n), Jacobian (B, n, m) and the second derivative along ``v``
        (B, m), ``S = H : v v`` (B, n), given the input's ``Jz`` and ``Sz``.  What the dynamics
        need at one known velocity (the training loss) without the whole Hessian: one row per
        sample instead of ``m (m + 1) / 2``.  The run-time model's :func:`mlp_jv` (the Modelica
        export traces it), on the Jacobian's rows."""
        z, Jr, Sz = mlp_jv(self.weights(), self.act, z, Jz.transpose(1, 2), Sz, v)
        return z, Jr.transpose(1, 2), Sz


def packed_jh(layers, activation, z: Tensor, Jz: Tensor, Hz: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
    """:func:`~mc2fmu.models.mlp.mlp_jh`'s arithmetic with the units on the last axis: ``J``
    as (B, m, n) and the Hessian's ``m (m + 1) / 2`` distinct entries as (B, p, n), so every
    layer is a plain product on contiguous rows and every activation term an elementwise one
    (the (B, n, m, m) layout made strided broadcasts and transposed copies of them: measured on
    the five-bar's training loss, 75 ms per closure with forward and backward, of which the
    Hessian's propagation took two thirds).  In and out the layout of ``mlp_jh``."""
    m = Jz.shape[-1]
    J = Jz.transpose(1, 2)
    if Hz is not None:  # the distinct entries (i[p], j[p]), i <= j, and each entry's p (plain ints: traceable)
        pairs = [(a, b) for a in range(m) for b in range(a, m)]
        i, j = torch.tensor([a for a, _ in pairs]), torch.tensor([b for _, b in pairs])
        pair = torch.tensor([pairs.index((min(a, b), max(a, b))) for a in range(m) for b in range(m)])
        H = Hz[:, :, i, j].transpose(1, 2)
    for k, (W, b) in enumerate(layers):
        z = torch.addmm(b, z, W.T)
        J = J @ W.T
        if Hz is not None:
            H = H @ W.T
        if k < len(layers) - 1:
            z, d1, d2 = activation.all(z)
            if Hz is not None:
                H = d2[:, None] * J[:, i] * J[:, j] + d1[:, None] * H
            J = d1[:, None] * J
    J_out = J.transpose(1, 2)
    if Hz is None:
        return z, J_out, None
    return z, J_out, H[:, pair].reshape(len(z), m, m, -1).permute(0, 3, 1, 2)
