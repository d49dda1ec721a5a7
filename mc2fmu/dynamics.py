"""The reduced dynamics on the decoder manifold and the one-step maps, in one place.

``x = h_d(q)``, ``J = dh_d/dq``, ``H = d2h_d/dq2``::

    M_m = J^T M J,   G_m[v, v] = J^T M (H : v v),   f_m = J^T f(h_d(q), u)
    M_m qddot = f_m - G_m[qdot, qdot] + J^T f_spring(x, J qdot)

Spring-dampers (``d = D x + e`` per spring, see :class:`mc2fmu.natural.SpringModel`) are
evaluated exactly on the decoded ``x`` and ``xdot = J qdot``: the stiffness part depends on
``q`` only, the damper on the velocity the step map uses (the same ``v`` as in ``G_m``).

Training, simulation and the exported graphs all call these functions, so what is trained
is what runs.  The small ``M_m`` solve is an unrolled Cholesky factorisation in plain ops
(``torch.linalg.solve`` does not export to ONNX).

One-step maps (string registry :data:`STEP_MAPS`), from ``q_{i-1}, q_i`` and ``u_i``:

* ``paper``  (seed 000, Algorithm 1): ``v = (q_i - q_{i-1})/dt``,
  ``q_{i+1} = 2 q_i - q_{i-1} + dt^2 a(q_i, v)``.  Its velocity lags half a step, an error
  floor of its own (METHOD.md section 3).
* ``centred`` (default): the same update with the centred velocity
  ``v = (q_{i+1} - q_{i-1}) / (2 dt)``, ``q_{i+1}`` predicted by one ``paper`` pass.
  Time-symmetric, second order in the velocity, one decoder evaluation per step (only
  ``G_m`` is re-evaluated).  In training, ``v`` comes from the data triplet itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import TrainingError

Tensor = torch.Tensor


def cholesky_solve(A: Tensor, b: Tensor) -> Tensor:
    """Solve ``A y = b`` for small SPD ``A`` (..., m, m) by an unrolled Cholesky factorisation."""
    m = A.shape[-1]
    L = [[None] * m for _ in range(m)]
    for j in range(m):
        s = A[..., j, j]
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        L[j][j] = torch.sqrt(s)
        for i in range(j + 1, m):
            s = A[..., i, j]
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s / L[j][j]
    z = [None] * m
    for i in range(m):
        s = b[..., i]
        for k in range(i):
            s = s - L[i][k] * z[k]
        z[i] = s / L[i][i]
    y = [None] * m
    for i in reversed(range(m)):
        s = z[i]
        for k in range(i + 1, m):
            s = s - L[k][i] * y[k]
        y[i] = s / L[i][i]
    return torch.stack(y, dim=-1)


@dataclass
class Springs:
    """Spring-damper tensors (see :class:`mc2fmu.natural.SpringModel`); ``n_s`` may be 0."""

    D: Tensor  # (n_s, 3, n)
    e: Tensor  # (n_s, 3)
    k: Tensor  # (n_s,)
    c: Tensor  # (n_s,)
    L0: Tensor  # (n_s,)


@dataclass
class ManifoldTerms:
    """Everything at one ``q`` that does not depend on the velocity."""

    x: Tensor  # (B, n)
    J: Tensor  # (B, n, m)
    H: Tensor  # (B, n, m, m)
    MJ: Tensor  # (B, n, m) = M J
    Mm: Tensor  # (B, m, m)
    fm: Tensor  # (B, m), without the springs
    springs: Springs | None = None
    sd: Tensor | None = None  # (B, n_s, 3) spring vectors d = D x + e
    sDJ: Tensor | None = None  # (B, n_s, 3, m) = D J, so ddot = D J v


def manifold_terms(x: Tensor, J: Tensor, H: Tensor, M: Tensor, f: Tensor, springs: Springs | None = None) -> ManifoldTerms:
    # M J as one (B m, n) x (n, n) product (M is symmetric): einsum lowers "nk,bkm->bnm" with
    # m = 1 to a broadcast multiply of a (B, n, 1, n) temporary, and matmul to a batched product
    # with M copied B times: both 20-100x slower at n = 72
    n, m = J.shape[1], J.shape[2]
    MJ = (J.transpose(1, 2).reshape(-1, n) @ M).reshape(-1, m, n).transpose(1, 2)
    Mm = torch.einsum("bnm,bnk->bmk", J, MJ)
    fm = torch.einsum("bnm,bn->bm", J, f)
    if springs is None or springs.k.shape[0] == 0:
        return ManifoldTerms(x, J, H, MJ, Mm, fm)
    sd = torch.einsum("sin,bn->bsi", springs.D, x) + springs.e
    sDJ = torch.einsum("sin,bnm->bsim", springs.D, J)
    return ManifoldTerms(x, J, H, MJ, Mm, fm, springs, sd, sDJ)


def spring_force(terms: ManifoldTerms, v: Tensor) -> Tensor:
    """``J^T f_spring(x, J v)`` (B, m): each spring's tension along its line, projected."""
    s = terms.springs
    length = torch.sqrt((terms.sd * terms.sd).sum(-1))  # (B, n_s); plain ops export to ONNX
    n = terms.sd / length.unsqueeze(-1)
    ldot = torch.einsum("bsi,bsim,bm->bs", n, terms.sDJ, v)
    tension = s.k * (length - s.L0) + s.c * ldot
    return -torch.einsum("bsim,bsi->bm", terms.sDJ, n * tension.unsqueeze(-1))


def acceleration(terms: ManifoldTerms, v: Tensor) -> Tensor:
    """``qddot = M_m^{-1} (f_m - J^T M (H : v v) + J^T f_spring(x, J v))``."""
    Hvv = torch.einsum("bnij,bi,bj->bn", terms.H, v, v)
    G = torch.einsum("bnm,bn->bm", terms.MJ, Hvv)
    rhs = terms.fm - G
    if terms.springs is not None:
        rhs = rhs + spring_force(terms, v)
    return cholesky_solve(terms.Mm, rhs)


@dataclass(frozen=True)
class StepMap:
    name: str
    description: str

    def step(self, terms: ManifoldTerms, q_prev: Tensor, q: Tensor, dt: float) -> Tensor:
        """``q_{i+1}`` from ``q_{i-1}``, ``q_i`` (the terms are evaluated at ``q_i``, ``u_i``)."""
        base = 2.0 * q - q_prev
        a = acceleration(terms, (q - q_prev) / dt)
        if self.name == "centred":
            q_pred = base + dt * dt * a
            a = acceleration(terms, (q_pred - q_prev) / (2.0 * dt))
        return base + dt * dt * a

    def training_velocity(self, q_prev: Tensor, q: Tensor, q_next: Tensor, dt: float) -> Tensor:
        """The velocity this map uses at ``q_i``, taken from a data triplet."""
        if self.name == "centred":
            return (q_next - q_prev) / (2.0 * dt)
        return (q - q_prev) / dt


STEP_MAPS: dict[str, StepMap] = {
    "centred": StepMap("centred", "Stormer-Verlet with a centred velocity in G_m (one fixed-point pass)"),
    "paper": StepMap("paper", "seed 000 Algorithm 1: velocity (q_i - q_{i-1})/dt in G_m"),
}


def get_step_map(name: str) -> StepMap:
    try:
        return STEP_MAPS[name]
    except KeyError:
        raise TrainingError(f"step map '{name}' is not available; choose one of {', '.join(STEP_MAPS)}") from None
