"""Explicit value/J/H propagation against torch.func and finite differences (float64)."""

from __future__ import annotations

import pytest
import torch

from mc2fmu.dynamics import cholesky_solve
from mc2fmu.network import ACTIVATIONS, MLP


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("m", [1, 2, 3])
def test_jacobian_and_hessian_match_torch_func(activation, m):
    torch.manual_seed(0)
    net = MLP([m, 16, 16, 7], activation)
    q = torch.randn(5, m, dtype=torch.float64)
    eye = torch.eye(m, dtype=torch.float64).expand(5, m, m)
    x, J, H = net.forward_jh(q, eye, torch.zeros(5, m, m, m, dtype=torch.float64))
    J_ref = torch.func.vmap(torch.func.jacrev(net))(q)
    H_ref = torch.func.vmap(torch.func.hessian(net))(q)
    assert torch.allclose(x, net(q), rtol=0, atol=1e-14)
    assert torch.max(torch.abs(J - J_ref)) < 1e-12
    assert torch.max(torch.abs(H - H_ref)) < 1e-12


def test_jacobian_and_hessian_match_finite_differences():
    torch.manual_seed(1)
    net = MLP([2, 24, 24, 5], "tanh")
    q = torch.randn(3, 2, dtype=torch.float64)
    eye = torch.eye(2, dtype=torch.float64).expand(3, 2, 2)
    _, J, H = net.forward_jh(q, eye, torch.zeros(3, 2, 2, 2, dtype=torch.float64))
    h = 1e-5
    for i in range(2):
        e = torch.zeros(2, dtype=torch.float64)
        e[i] = h
        J_fd = (net(q + e) - net(q - e)) / (2 * h)
        assert torch.max(torch.abs(J[..., i] - J_fd)) < 1e-8
        for j in range(2):
            f = torch.zeros(2, dtype=torch.float64)
            f[j] = h
            H_fd = (net(q + e + f) - net(q + e - f) - net(q - e + f) + net(q - e - f)) / (4 * h * h)
            assert torch.max(torch.abs(H[..., i, j] - H_fd)) < 1e-5


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_unrolled_cholesky_solves_spd_systems(m):
    torch.manual_seed(m)
    A0 = torch.randn(6, m, m, dtype=torch.float64)
    A = A0 @ A0.transpose(1, 2) + 0.1 * torch.eye(m, dtype=torch.float64)
    b = torch.randn(6, m, dtype=torch.float64)
    y = cholesky_solve(A, b)
    assert torch.max(torch.abs(torch.linalg.solve(A, b) - y)) < 1e-10
