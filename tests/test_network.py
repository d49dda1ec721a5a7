"""Explicit value/J/H propagation against torch.func and finite differences (float64), in
torch (training) and in numpy (the run-time model: simulate, FMU export checks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mc2fmu.models.manifold import ACTIVATIONS, cholesky_solve, get_activation, mlp, mlp_jh
from mc2fmu.reducers.autoencoder.network import MLP


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


@pytest.mark.parametrize("m", [1, 2, 3])
def test_second_directional_derivative_matches_torch_func(m):
    """``forward_jv``: the value, J and ``H : v v`` at one velocity per sample (what the training
    loss uses instead of the whole Hessian), from a non-trivial input map (J, H : v v given)."""
    torch.manual_seed(3)
    net = MLP([m + 1, 16, 16, 6], "tanh")
    A = torch.randn(m + 1, m, dtype=torch.float64)
    inner = lambda q: torch.sin(q @ A.T)  # noqa: E731  the input's own curvature enters too
    f = lambda q: net(inner(q))  # noqa: E731
    q, v = torch.randn(5, m, dtype=torch.float64), torch.randn(5, m, dtype=torch.float64)
    Jz = torch.func.vmap(torch.func.jacrev(inner))(q)
    Sz = torch.einsum("bfij,bi,bj->bf", torch.func.vmap(torch.func.hessian(inner))(q), v, v)
    x, J, S = net.forward_jv(inner(q), Jz, Sz, v)
    J_ref = torch.func.vmap(torch.func.jacrev(f))(q)
    S_ref = torch.einsum("bnij,bi,bj->bn", torch.func.vmap(torch.func.hessian(f))(q), v, v)
    assert torch.max(torch.abs(x - f(q))) < 1e-14
    assert torch.max(torch.abs(J - J_ref)) < 1e-12
    assert torch.max(torch.abs(S - S_ref)) < 1e-12


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


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_numpy_propagation_matches_torch_func(activation):
    """The run-time model's numpy MLP (value, J, H) against torch.func on the same weights."""
    torch.manual_seed(2)
    net = MLP([2, 16, 16, 5], activation)
    q = torch.randn(7, 2, dtype=torch.float64) * 3
    layers = [(W.detach().numpy(), b.detach().numpy()) for W, b in net.weights()]
    qn = q.numpy()
    x, J, H = mlp_jh(layers, get_activation(activation), qn, np.broadcast_to(np.eye(2), (7, 2, 2)).copy(),
                     np.zeros((7, 2, 2, 2)))
    J_ref = torch.func.vmap(torch.func.jacrev(net))(q).detach().numpy()
    H_ref = torch.func.vmap(torch.func.hessian(net))(q).detach().numpy()
    assert np.max(np.abs(x - net(q).detach().numpy())) < 1e-12
    assert np.max(np.abs(mlp(layers, get_activation(activation), qn) - x)) == 0.0
    assert np.max(np.abs(J - J_ref)) < 1e-10 * max(1.0, np.abs(J_ref).max())
    assert np.max(np.abs(H - H_ref)) < 1e-10 * max(1.0, np.abs(H_ref).max())


def test_numpy_cholesky_matches_linalg_and_flags_indefinite_matrices():
    rng = np.random.default_rng(0)
    A0 = rng.normal(size=(5, 3, 3))
    A = A0 @ A0.transpose(0, 2, 1) + 0.1 * np.eye(3)
    b = rng.normal(size=(5, 3))
    assert np.max(np.abs(cholesky_solve(A, b) - np.linalg.solve(A, b[..., None])[..., 0])) < 1e-10
    with np.errstate(invalid="ignore"):
        assert np.isnan(cholesky_solve(-A, b)).all()  # not positive definite: NaN, not an answer


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_numpy_activations_equal_torch_over_a_wide_range(activation):
    """Including softplus beyond torch's threshold (20), where torch returns the identity."""
    a = np.linspace(-60.0, 60.0, 1201)
    ref = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "softplus": torch.nn.functional.softplus}[activation]
    got = get_activation(activation).value(a)
    assert np.max(np.abs(got - ref(torch.as_tensor(a)).numpy()) / np.maximum(1.0, np.abs(got))) < 1e-15
