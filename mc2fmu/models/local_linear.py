"""Piecewise-linear reduced dynamics on local PCA bases (seed 002, the run-time part).

A *local-linear model* covers the training configurations with ``k`` clusters; cluster ``i``
has a centroid ``mu_i`` and an orthonormal basis ``V_i`` (n x r) of natural coordinates,
``x ~ V_i q + mu_i``, and a linear ODE in its ``r`` reduced coordinates::

    M_i qdd + K_i q + c_i + D_i qd = V_i^T f_ext(V_i q + mu_i, u)

``M_i = V_i^T M V_i``; ``K_i`` (symmetric positive semi-definite), ``c_i`` and ``D_i`` are the
local fits of the elastic and velocity-dependent internal forces (seed 002 eqs. 13-19; the
paper's ``K (q + q_0)`` written as ``K q + c``, which also holds when ``K`` is singular, as it is
for a mechanism without springs); ``f_ext`` (gravity and the inputs, :class:`ForceModel`
without its springs) is projected exactly at every step (eq. 20).

The potential energy of cluster ``i`` is the local quadratic of the springs (eq. 12, ``P_i`` the
springs' energy at the centroid) plus gravity's, which is exactly linear in ``x``::

    e_pot,i(q) = P_i + c_i^T q + q^T K_i q / 2 - f_g^T (V_i q + mu_i)

(the paper keeps gravity with the external forces; a switch that preserved the springs'
energy alone would let a pendulum gain or lose its height at every switch).

The state is ``(cluster, q, qd, qdd)``; a model read through a chart starts in the state the
chart reads as its start values (:meth:`LocalLinearModel.chart_state`).  A step (Algorithm
1) picks the cluster whose centroid is nearest the current position (eq. 22); on a change it
projects the state into the new basis (:func:`switch`: positions keeping the potential
energy, velocities keeping the kinetic energy, both keeping their part in the subspace
common to the two bases, eqs. 23-31), then advances with the explicit second-order scheme of
eqs. 35-38.

The module needs numpy only (its root finder is :func:`brent`, not scipy's): the python FMU
backend inserts its source into the FMU's slave script, so the FMU runs this very code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # only a type: the slave script has no mc2fmu to import
    from ..mechanics.natural import ForceModel

#: singular values of ``V_prev^T V`` above ``1 - eps`` span the common subspace (eq. 26)
DEFAULT_EPS = 1e-3

#: the start's secant (Broyden) iterations at most, and the residual of the chart's reading it
#: must reach (relative to ``max(1, |q0|)``) to be used instead of the projection
START_ITERATIONS, START_TOLERANCE = 50, 1e-10


def brent(f, a: float, b: float, *, xtol: float = 1e-300, rtol: float = 4 * 2.220446049250313e-16,
          maxiter: int = 500) -> float:
    """A root of ``f`` in ``[a, b]`` (``f(a)``, ``f(b)`` of opposite signs or zero) by Brent's
    method (inverse quadratic interpolation, secant and bisection; R. P. Brent, Algorithms for
    Minimization without Derivatives, 1973, ch. 4), to ``xtol + rtol |x|``."""
    fa, fb = f(a), f(b)
    if fa == 0.0:
        return a
    if fb == 0.0:
        return b
    if (fa > 0.0) == (fb > 0.0):
        raise ValueError(f"brent: f({a!r}) = {fa!r} and f({b!r}) = {fb!r} do not bracket a root")
    c, fc = a, fa
    d = e = b - a
    for _ in range(maxiter):
        if (fb > 0.0) == (fc > 0.0):  # keep the root between b and c
            c, fc = a, fa
            d = e = b - a
        if abs(fc) < abs(fb):  # b is the best estimate so far
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol = 2.0 * rtol * abs(b) + 0.5 * xtol
        half = 0.5 * (c - b)
        if abs(half) <= tol or fb == 0.0:
            return b
        if abs(e) >= tol and abs(fa) > abs(fb):
            s = fb / fa
            if a == c:  # secant
                p, q = 2.0 * half * s, 1.0 - s
            else:  # inverse quadratic interpolation
                qa, r = fa / fc, fb / fc
                p = s * (2.0 * half * qa * (qa - r) - (b - a) * (r - 1.0))
                q = (qa - 1.0) * (r - 1.0) * (s - 1.0)
            if p > 0.0:
                q = -q
            p = abs(p)
            if 2.0 * p < min(3.0 * half * q - abs(tol * q), abs(e * q)):
                e, d = d, p / q
            else:  # interpolation would not shrink the bracket enough: bisect
                d = e = half
        else:
            d = e = half
        a, fa = b, fb
        b += d if abs(d) > tol else math.copysign(tol, half)
        fb = f(b)
    return b


@dataclass(frozen=True)
class Quadratic:
    """``e(q) = p + b^T q + q^T A q / 2`` (A symmetric positive semi-definite)."""

    A: np.ndarray
    b: np.ndarray
    p: float

    def __call__(self, q: np.ndarray) -> float:
        return float(self.p + self.b @ q + 0.5 * q @ self.A @ q)


def nearest_on_level_set(e: Quadratic, level: float, target: np.ndarray, C: np.ndarray, d: np.ndarray
                         ) -> tuple[np.ndarray, bool]:
    """The ``q`` nearest ``target`` with ``e(q) = level`` and ``C q = d`` (eqs. 29, 30).

    With ``q = q_c + N z`` (``q_c`` the point of ``C q = d`` nearest ``target``, ``N`` an
    orthonormal basis of the null space of ``C``) the problem is: the shortest ``z`` with
    ``phi(z) = phi_0 + g^T z + z^T H z / 2 = level``.  Its Lagrange condition gives
    ``z(lam) = -lam (I + lam H)^-1 g``, and on the branch through ``lam = 0`` (where
    ``I + lam H`` stays positive definite) ``phi(z(lam))`` falls strictly from ``+inf`` to the
    minimum of ``phi``: one root, found by Brent's method on that branch.

    Returns ``(q, exact)``; ``exact`` is False when ``level`` is out of reach (below the
    minimum of ``e`` on the constraint, or no free direction changes ``e``): ``q`` is then the
    closest reachable energy's point (the minimiser, or ``q_c``).
    """
    r = len(target)
    if C.size:
        Cp = np.linalg.pinv(C)
        q_c = target + Cp @ (d - C @ target)
        _, s, Wt = np.linalg.svd(C)
        rank = int(np.sum(s > 1e-12 * max(1.0, s.max(initial=0.0))))
        N = Wt[rank:].T
    else:
        q_c, N = target.copy(), np.eye(r)
    phi0 = e(q_c) - level
    if N.shape[1] == 0:
        return q_c, abs(phi0) <= 1e-12 * max(1.0, abs(level))
    H = N.T @ e.A @ N
    g = N.T @ (e.b + e.A @ q_c)
    h, Q = np.linalg.eigh(0.5 * (H + H.T))
    gt = Q.T @ g
    if not np.any(gt != 0.0):
        return q_c, abs(phi0) <= 1e-12 * max(1.0, abs(level))

    def z_of(lam: float) -> np.ndarray:
        return Q @ (-lam * gt / (1.0 + lam * h))

    def phi(lam: float) -> float:
        return phi0 - float(np.sum(gt**2 * lam * (1.0 + 0.5 * h * lam) / (1.0 + lam * h) ** 2))

    if phi0 == 0.0:
        return q_c, True
    # the branch through 0: 1 + lam h > 0 for every eigenvalue with a non-zero g component
    active = gt != 0.0
    pos, neg = h[active & (h > 0)], h[active & (h < 0)]
    lo = -1.0 / pos.max() if pos.size else -np.inf
    hi = -1.0 / neg.min() if neg.size else np.inf
    if phi0 > 0.0:  # phi falls with lam: the root is at lam > 0
        if not np.isfinite(hi) and np.all(h[active] > 0.0):
            # phi falls to its minimum as lam -> inf: a level below it is out of reach
            if phi0 - float(np.sum(gt[active] ** 2 / (2.0 * h[active]))) >= 0.0:
                zt = np.where(active, -gt / np.where(active, h, 1.0), 0.0)
                return q_c + N @ (Q @ zt), False
        a, b_ = 0.0, 1.0 if not np.isfinite(hi) else 0.5 * hi
        for _ in range(2100):
            if phi(b_) <= 0.0:
                break
            b_ = 0.5 * (b_ + hi) if np.isfinite(hi) else 4.0 * b_
        else:
            return q_c + N @ z_of(b_), False
    else:  # the root is at lam < 0, where phi rises to +inf
        a, b_ = (-1.0 if not np.isfinite(lo) else 0.5 * lo), 0.0
        for _ in range(2100):
            if phi(a) >= 0.0:
                break
            a = 0.5 * (a + lo) if np.isfinite(lo) else 4.0 * a
        else:
            return q_c + N @ z_of(a), False
    lam = brent(phi, a, b_)
    q = q_c + N @ z_of(lam)
    # one Newton step along the gradient polishes the level to rounding
    grad = e.b + e.A @ q
    gn = float(grad @ grad)
    if gn > 0.0:
        free = N @ (N.T @ grad)
        fn = float(grad @ free)
        if fn > 0.0:
            q = q - (e(q) - level) / fn * free
    return q, True


@dataclass
class LocalState:
    """The state of a local-linear model: the active cluster and its coordinates."""

    cluster: int
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray


@dataclass
class LocalLinearModel:
    """The piecewise-linear ROM: ``k`` clusters of ``r`` coordinates over ``n`` NC coordinates.

    Arrays: ``centroids`` (k, n), ``bases`` (k, n, r), ``M`` (k, r, r), ``K`` (k, r, r), ``c``
    (k, r), ``D`` (k, r, r), ``P`` (k,); ``forces``: gravity and the inputs in NC (its springs are
    not used: they are in ``K``, ``c``, ``D``); ``eps`` the common-subspace tolerance;
    ``radius`` (k,): each cluster's extent, the largest distance of its training samples from
    its centroid (None: unknown, :meth:`extent` is 0).
    """

    centroids: np.ndarray
    bases: np.ndarray
    M: np.ndarray
    K: np.ndarray
    c: np.ndarray
    D: np.ndarray
    P: np.ndarray
    forces: ForceModel
    dt: float
    eps: float = DEFAULT_EPS
    radius: np.ndarray | None = None
    switches: int = field(default=0, compare=False)
    inexact_switches: int = field(default=0, compare=False)

    @property
    def clusters(self) -> int:
        return len(self.centroids)

    @property
    def r(self) -> int:
        return self.bases.shape[2]

    # ------------------------------------------------------------------ maps and energies
    def nearest(self, x: np.ndarray) -> int:
        """The cluster whose centroid is nearest ``x`` (eq. 22)."""
        return int(np.argmin(np.sum((self.centroids - x) ** 2, axis=1)))

    def extent(self, i: int, x: np.ndarray) -> float:
        """How far ``x`` lies beyond cluster ``i``'s extent, in units of its radius (0 within):
        ``max(0, |x - mu_i| - R_i) / R_i``; a local linear model is a chord of the motion, valid
        only where the training samples were."""
        if self.radius is None:
            return 0.0
        R = max(float(self.radius[i]), 1e-12)
        d = float(np.sqrt(np.sum((x - self.centroids[i]) ** 2)))
        return max(0.0, d - R) / R if math.isfinite(d) else math.inf

    def decode(self, i: int, q: np.ndarray) -> np.ndarray:
        return self.bases[i] @ q + self.centroids[i]

    def project(self, i: int, x: np.ndarray) -> np.ndarray:
        return self.bases[i].T @ (x - self.centroids[i])

    def potential(self, i: int) -> Quadratic:
        """``e_pot,i`` as a quadratic in ``q`` (springs' local fit plus exact gravity)."""
        V, mu, f_g = self.bases[i], self.centroids[i], self.forces.f_g
        return Quadratic(self.K[i], self.c[i] - V.T @ f_g, float(self.P[i] - f_g @ mu))

    def kinetic(self, i: int) -> Quadratic:
        r = self.r
        return Quadratic(self.M[i], np.zeros(r), 0.0)

    def energy(self, s: LocalState) -> tuple[float, float]:
        """``(kinetic, potential)`` of a state in its cluster's model."""
        return self.kinetic(s.cluster)(s.qd), self.potential(s.cluster)(s.q)

    def acceleration(self, i: int, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``qdd`` of eq. 37 in cluster ``i``."""
        V = self.bases[i]
        x = V @ q + self.centroids[i]
        f = self.forces.f_g + self.forces.f_B @ u + np.einsum("i,ijk,k->j", u, self.forces.f_C, x)
        rhs = V.T @ f - self.K[i] @ q - self.c[i] - self.D[i] @ qd
        return np.linalg.solve(self.M[i], rhs)

    # ------------------------------------------------------------------ switching
    def common_subspace(self, i: int, j: int) -> np.ndarray:
        """``V_c`` (n, n_d): the directions shared by the bases of ``i`` and ``j`` (eqs. 25-28)."""
        Y, lam, _ = np.linalg.svd(self.bases[i].T @ self.bases[j])
        n_d = int(np.sum(lam > 1.0 - self.eps))
        return (self.bases[i] @ Y)[:, :n_d]

    def switch(self, s: LocalState, j: int) -> LocalState:
        """The state ``s`` projected into cluster ``j`` (eqs. 29-31)."""
        i = s.cluster
        if i == j:
            return s
        Vi, Vj = self.bases[i], self.bases[j]
        Vc = self.common_subspace(i, j)
        C = Vc.T @ Vj
        x_prev = self.decode(i, s.q)
        q, ok_q = nearest_on_level_set(self.potential(j), self.potential(i)(s.q), self.project(j, x_prev),
                                       C, Vc.T @ (x_prev - self.centroids[j]))
        v_prev = Vi @ s.qd
        qd, ok_v = nearest_on_level_set(self.kinetic(j), self.kinetic(i)(s.qd), Vj.T @ v_prev, C, Vc.T @ v_prev)
        qdd = Vj.T @ (Vi @ s.qdd)
        self.switches += 1
        self.inexact_switches += int(not (ok_q and ok_v))
        return LocalState(j, q, qd, qdd)

    # ------------------------------------------------------------------ time stepping
    def initial_state(self, x0: np.ndarray, xd0: np.ndarray, u0: np.ndarray) -> LocalState:
        """The nearest cluster, ``x0`` and ``xd0`` projected into it, the acceleration of eq. 37."""
        i = self.nearest(x0)
        q, qd = self.project(i, x0), self.bases[i].T @ xd0
        return LocalState(i, q, qd, self.acceleration(i, q, qd, np.asarray(u0, dtype=np.float64)))

    def chart_state(self, x0: np.ndarray, J0: np.ndarray, q0: np.ndarray, qd0: np.ndarray, u0: np.ndarray,
                    encode, angles) -> LocalState:
        """The start of a model whose coordinates a chart reads (``q = encode(x)``, ``qd`` the
        least-squares solution of ``J(q) qd = xd``; :class:`~mc2fmu.models.charted.LocalPcaModel`):
        in the cluster ``i`` nearest ``x0 = decode(q0)``, the state the chart reads as ``(q0, qd0)``.

        ``J0`` (n, m) is the decoder's Jacobian at ``q0``, ``encode`` maps ``x`` (n,) to ``q``
        (m,), ``angles`` (m,) marks angle coordinates (read modulo a turn).  Cluster ``i``'s
        directions read as ``A = (J0^T J0)^-1 J0^T V_i`` (m, r).  The velocity solves
        ``A qd = qd0`` (the least change of the projection ``V_i^T J0 qd0``: the same when
        ``r = m``); the position solves ``encode(V_i q + mu_i) = q0`` from the projection
        ``V_i^T (x0 - mu_i)`` by Broyden's secant method (least-change steps, ``A`` the first
        Jacobian; it needs no derivative of the encoder), while the residual falls.

        The projection of ``(x0, J0 qd0)`` (:meth:`initial_state`) reads as another ``(q, qd)``:
        ``x0`` lies off the cluster's plane (the chord's sagitta, the decoder's own error) and
        the encoder reads the projected point elsewhere, so a run's first ``(q, qd)`` would not
        start the same run again.  When the reading is out of reach (fewer modes than
        coordinates, or no residual within ``START_TOLERANCE``) the position is the projection.
        """
        i = self.nearest(x0)
        V, mu = self.bases[i], self.centroids[i]
        q0, qd0 = np.asarray(q0, dtype=np.float64), np.asarray(qd0, dtype=np.float64)
        q_p, qd_p = self.project(i, x0), V.T @ (J0 @ qd0)
        q, qd, m = q_p, qd_p, len(q0)
        if self.r >= m:
            A = np.linalg.solve(J0.T @ J0, J0.T @ V)
            qd = qd_p + A.T @ np.linalg.solve(A @ A.T, qd0 - A @ qd_p)
            turn = np.asarray(angles, dtype=bool)

            def residual(z: np.ndarray) -> np.ndarray:
                e = encode(V @ z + mu) - q0
                return np.where(turn, e - 2.0 * np.pi * np.round(e / (2.0 * np.pi)), e)

            z, e = q_p, residual(q_p)
            f = float(e @ e)
            for _ in range(START_ITERATIONS):
                if not f > 0.0:
                    break
                try:
                    dz = -(A.T @ np.linalg.solve(A @ A.T, e))
                except np.linalg.LinAlgError:  # (C: a non-finite step, refused below)
                    break
                z_new = z + dz
                e_new = residual(z_new)
                f_new = float(e_new @ e_new)
                dd = float(dz @ dz)
                if not (f_new < f and dd > 0.0):
                    break
                A = A + np.outer(e_new - e - A @ dz, dz) / dd
                z, e, f = z_new, e_new, f_new
            if np.sqrt(f) <= START_TOLERANCE * max(1.0, float(np.abs(q0).max(initial=0.0))):
                q = z
        return LocalState(i, q, qd, self.acceleration(i, q, qd, np.asarray(u0, dtype=np.float64)))

    def step(self, s: LocalState, u: np.ndarray) -> LocalState:
        """One step of Algorithm 1 with the input ``u`` held over it."""
        j = self.nearest(self.decode(s.cluster, s.q))
        s = self.switch(s, j)
        dt = self.dt
        q = s.q + dt * s.qd + 0.5 * dt * dt * s.qdd  # eq. 35
        qdd = self.acceleration(j, q, s.qd, u)  # eqs. 36-37 (damping at the previous velocity)
        qd = s.qd + 0.5 * dt * (s.qdd + qdd)  # eq. 38
        return LocalState(j, q, qd, qdd)

    def rollout(self, x0: np.ndarray, xd0: np.ndarray, u: np.ndarray) -> dict[str, np.ndarray]:
        """Simulate from ``(x0, xd0)`` (:meth:`initial_state`) on the inputs ``u`` (n_t, n_u):
        :meth:`rollout_from` that state."""
        u = np.asarray(u, dtype=np.float64).reshape(len(u), -1)
        return self.rollout_from(self.initial_state(x0, xd0, u[0]), u)

    def rollout_from(self, s: LocalState, u: np.ndarray) -> dict[str, np.ndarray]:
        """Simulate from the state ``s`` on the inputs ``u`` (n_t, n_u); step ``k -> k+1`` holds
        ``u[k]``.  Returns ``x``, ``xd`` (n_t, n) and ``cluster`` (n_t,)."""
        u = np.asarray(u, dtype=np.float64).reshape(len(u), -1)
        n_t, n = len(u), self.centroids.shape[1]
        x, xd = np.full((n_t, n), np.nan), np.full((n_t, n), np.nan)
        cluster = np.full(n_t, -1)
        for k in range(n_t):
            if k:
                s = self.step(s, u[k - 1])
                if not (np.isfinite(s.q).all() and np.isfinite(s.qd).all()):
                    break
            x[k], xd[k], cluster[k] = self.decode(s.cluster, s.q), self.bases[s.cluster] @ s.qd, s.cluster
        return {"x": x, "xd": xd, "cluster": cluster}
