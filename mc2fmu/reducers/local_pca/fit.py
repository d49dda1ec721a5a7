"""Fitting the local-PCA piecewise-linear ROM (seed 002, section 2.1) in numpy.

1. k-means (Lloyd) with k-means++ seeding on the natural coordinates of the training
   samples (eqs. 3-5; the Euclidean distance is meaningful because NC are positions);
2. per cluster, the first ``r`` left singular vectors of the centred cluster data (eqs. 6-8);
3. per cluster, ``M_r = V^T M V`` (eq. 11) and the symmetric positive semi-definite ``K_r``
   and ``D_r`` that fit the projected elastic and velocity-dependent spring forces in least
   squares (eqs. 13-19), with ``c = V^T f_int(mu)`` the internal force at the centroid.

:func:`fit_local_linear` works on arrays (positions, velocities, the NC mass matrix and
force model), so a test can hand it an analytic motion.
"""

from __future__ import annotations

import numpy as np

from ...errors import TrainingError
from ...mechanics.natural import ForceModel, SpringModel
from ...models.local_linear import DEFAULT_EPS, LocalLinearModel


def kmeans(x: np.ndarray, k: int, seed: int = 0, max_iter: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """``(centroids (k, n), labels (N,))``: Lloyd's iterations from k-means++ seeds (Arthur and
    Vassilvitskii 2007), deterministic for a seed.  An emptied cluster is re-seeded at the
    sample farthest from its centroid."""
    N = len(x)
    if k > N:
        raise TrainingError(f"{k} clusters need at least {k} samples; the data has {N}")
    rng = np.random.default_rng(seed)
    centres = [x[rng.integers(N)]]
    d2 = np.sum((x - centres[0]) ** 2, axis=1)
    for _ in range(1, k):
        total = d2.sum()
        idx = int(rng.choice(N, p=d2 / total)) if total > 0 else int(rng.integers(N))
        centres.append(x[idx])
        d2 = np.minimum(d2, np.sum((x - x[idx]) ** 2, axis=1))
    C = np.array(centres)
    labels = np.full(N, -1)
    for _ in range(max_iter):
        dist = ((x**2).sum(1)[:, None] - 2.0 * x @ C.T + (C**2).sum(1)[None, :])
        new = np.argmin(dist, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for i in range(k):
            members = labels == i
            if members.any():
                C[i] = x[members].mean(axis=0)
            else:
                far = int(np.argmax(np.min(dist, axis=1)))
                C[i], labels[far] = x[far], i
    return C, labels


def symmetric_psd_lstsq(Q: np.ndarray, G: np.ndarray, iters: int = 5000, tol: float = 1e-13) -> np.ndarray:
    """The symmetric positive semi-definite ``A`` (r, r) minimising ``||Q A - G||_F``
    (``Q``, ``G``: (N, r); row ``j`` asks ``A q_j = g_j``; seed 002 eqs. 16 and 19).

    A convex problem: accelerated projected gradient (FISTA) from the projection of the
    unconstrained symmetric solution, the projection onto the PSD cone by clipping
    eigenvalues.  When the unconstrained solution is PSD it is returned as is.
    """
    r = Q.shape[1]
    # unconstrained symmetric least squares over the r (r + 1) / 2 free entries
    pairs = [(a, b) for a in range(r) for b in range(a, r)]
    rows = []
    for a, b in pairs:
        E = np.zeros((r, r))
        E[a, b] = E[b, a] = 1.0
        rows.append((Q @ E).reshape(-1))
    B = np.stack(rows, axis=1)
    coef = np.linalg.lstsq(B, G.reshape(-1), rcond=None)[0]
    A = np.zeros((r, r))
    for w, (a, b) in zip(coef, pairs):
        A[a, b] = A[b, a] = w

    def psd(S: np.ndarray) -> np.ndarray:
        w, U = np.linalg.eigh(0.5 * (S + S.T))
        return (U * np.maximum(w, 0.0)) @ U.T

    if np.linalg.eigvalsh(A).min() >= 0.0:
        return A
    QtQ, QtG = Q.T @ Q, Q.T @ G
    L = 2.0 * np.linalg.eigvalsh(QtQ).max()
    if L <= 0.0:
        return np.zeros((r, r))

    def grad(S: np.ndarray) -> np.ndarray:
        Gr = QtQ @ S - QtG
        return Gr + Gr.T  # the gradient of ||Q S - G||^2 restricted to symmetric S

    A = Y = psd(A)
    t = 1.0
    for _ in range(iters):
        A_next = psd(Y - grad(Y) / L)
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        Y = A_next + ((t - 1.0) / t_next) * (A_next - A)
        done = np.linalg.norm(A_next - A) <= tol * max(1.0, np.linalg.norm(A_next))
        A, t = A_next, t_next
        if done:
            break
    return A


def _internal_spring_forces(springs: SpringModel | None, x: np.ndarray, xd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The springs' internal forces (the negative of the applied ones): elastic ``f_el(x)``
    and velocity-dependent ``f_vel(x, xd) = f(x, xd) - f(x, 0)``."""
    if springs is None or not len(springs):
        z = np.zeros_like(x)
        return z, z
    el = -springs(x, np.zeros_like(xd))
    return el, -springs(x, xd) - el


def fit_local_linear(x: np.ndarray, xd: np.ndarray, M: np.ndarray, forces: ForceModel, dt: float, *,
                     clusters: int, modes: int, eps: float = DEFAULT_EPS, seed: int = 0) -> LocalLinearModel:
    """The local-PCA ROM of the samples ``x``, ``xd`` (N, n) (seed 002, section 2.1)."""
    if modes < 1 or clusters < 1:
        raise TrainingError(f"local-pca: clusters ({clusters}) and modes ({modes}) must be at least 1")
    centroids, labels = kmeans(x, clusters, seed)
    springs = forces.springs
    no_springs = ForceModel(forces.f_g, forces.f_B, forces.f_C, None)
    n = x.shape[1]
    k = clusters
    V = np.zeros((k, n, modes))
    Mr, Kr, Dr = (np.zeros((k, modes, modes)) for _ in range(3))
    cr, P, radius = np.zeros((k, modes)), np.zeros(k), np.zeros(k)
    small = []
    for i in range(k):
        members = labels == i
        Xi = x[members]
        if len(Xi) <= modes:
            small.append(f"cluster {i + 1} has {len(Xi)} samples, fewer than modes + 1 = {modes + 1}")
            continue
        mu = Xi.mean(axis=0)
        centroids[i] = mu
        radius[i] = float(np.sqrt(np.sum((Xi - mu) ** 2, axis=1)).max())
        U = np.linalg.svd((Xi - mu).T, full_matrices=False)[0]
        V[i] = U[:, :modes]
        Mr[i] = V[i].T @ M @ V[i]
        el, vel = _internal_spring_forces(springs, Xi, xd[members])
        el_mu = _internal_spring_forces(springs, mu[None], np.zeros((1, n)))[0][0]
        qr = (Xi - mu) @ V[i]
        cr[i] = V[i].T @ el_mu
        Kr[i] = symmetric_psd_lstsq(qr, (el - el_mu) @ V[i])
        Dr[i] = symmetric_psd_lstsq(xd[members] @ V[i], vel @ V[i])
        P[i] = float(springs.energy(mu)) if springs is not None and len(springs) else 0.0
    if small:
        raise TrainingError([f"local-pca: {s}" for s in small] + ["use fewer --clusters or more training data"])
    return LocalLinearModel(centroids, V, Mr, Kr, cr, Dr, P, no_springs, float(dt), eps, radius)
