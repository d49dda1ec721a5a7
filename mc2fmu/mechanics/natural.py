"""Natural coordinates (NC): four points per rigid body and a constant, exact mass matrix.

Body ``b`` gets the points ``r0`` = its centre of mass and ``rk = r0 + L_b R e_k``
(k = 1..3, ``R`` body->global rotation); a physical variant of a trained mechanism keeps the
trained points, and :func:`body_mass_block` takes its centre of mass's offset from them.  A material point at body-frame offset ``xi``
from the COM is the affine combination ``p = sum_j c_j r_j`` with ``c_0 = 1 - sum_k w_k``,
``c_k = w_k``, ``w = xi / L_b``.  With the second-moment tensor ``S = tr(J)/2 I - J``
(``J`` the inertia about the COM in body axes), the body's mass block is
``A (x) I_3`` with::

    A_00 = m + 1^T S~ 1,   A_0k = -(S~ 1)_k,   A_kl = S~_kl,   S~ = S / L_b^2

so that ``0.5 xdot^T M xdot = 0.5 m |v_com|^2 + 0.5 w^T J w`` exactly.

Choice of ``L_b``: the body's RMS mass radius ``sqrt(tr(S)/m) = sqrt(tr(J)/(2m))``, which
puts rotations and translations on one scale.  A point mass (``J = 0``) has none; it gets
the median length of the other bodies (0.1 m if all are points).

Singular second moments (a slender rod has ``rank S = 1``, a flat plate ``rank S = 2``,
a point mass ``rank S = 0``) are kept exact, on purpose: the points along the
inertia-free directions then carry no mass and ``M`` is positive *semi*-definite.  This is
the true kinetic energy: the spin of a rod about its own axis stores none.  Nothing in
mc2fmu inverts the full ``M``; the reduced mass ``M_m = J^T M J`` stays positive definite as
long as no minimal coordinate moves only inertia-free directions: the autoencoder reducer
measures it on the training states (``reduced_mass_min_eig_ratio`` in the training record)
and warns when it is singular.  The layout records each body's inertia rank and its inertia-free axes.

Generalized forces, all exact and written as ``f(x, u) = f_g + f_B u + sum_i u_i f_C[i] x``:

* gravity ``f_g = M g_hat`` (``g`` repeated on every point);
* force ``u d`` (global direction ``d``) at body point ``xi``: ``f_j = c_j(xi) u d``;
* torque ``u d``: ``f_k = (u d) x (rk - r0) / (2 L_b^2)``, ``f_0 = -sum_k f_k``.

Springs (:class:`SpringModel`) are the one state- and velocity-dependent, nonlinear force:
spring ``s`` spans ``d_s = D_s x + e_s`` (``D_s`` (3, n_n) the difference of its end points'
affine weights, ``e_s`` the ground points), so with ``l = |d_s|``, ``n = d_s / l``,
``ldot = n . D_s xdot`` and ``T = k (l - L0) + c ldot``: ``f_spring = -D_s^T n T``, exact.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from .mechanism import GROUND, Mechanism
from .parameters import body_mass_block, second_moment  # noqa: F401 (part of this module's interface)
from .rotations import nearest_rotation

log = logging.getLogger(__name__)

POINTS_PER_BODY = 4
COORDS_PER_BODY = 3 * POINTS_PER_BODY
#: second-moment eigenvalues below this fraction of the largest count as zero (rod / plate)
SINGULAR_RTOL = 1e-9
#: below this RMS mass radius (m) a body is treated as a point mass when choosing L_b
POINT_MASS_RADIUS = 1e-9


@dataclass(frozen=True)
class BodyLayout:
    """Where one body's four points sit in ``x`` and how they relate to its pose."""

    name: str
    offset: int  # index of r0.x in x; the body owns x[offset : offset + 12]
    length: float  # L_b, m
    com: tuple[float, float, float]  # COM in the body frame, m
    inertia_rank: int  # rank of the second-moment tensor: 3 solid, 2 plate, 1 rod, 0 point
    inertia_free_axes: tuple[tuple[float, float, float], ...]  # body-frame directions with no second moment

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + COORDS_PER_BODY)


@dataclass(frozen=True)
class NCLayout:
    bodies: tuple[BodyLayout, ...]

    @property
    def size(self) -> int:
        return COORDS_PER_BODY * len(self.bodies)

    @property
    def coordinate_names(self) -> list[str]:
        return [f"{b.name}.r{j}.{a}" for b in self.bodies for j in range(POINTS_PER_BODY) for a in "xyz"]

    def body(self, name: str) -> BodyLayout:
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "points_per_body": POINTS_PER_BODY,
            "point_definition": "r0 = centre of mass; rk = r0 + length * R e_k (k = 1..3), R body->global",
            "ordering": "body-major, then point r0..r3, then axis x, y, z",
            "bodies": [
                {
                    "name": b.name,
                    "offset": b.offset,
                    "length": b.length,
                    "com": list(b.com),
                    "inertia_rank": b.inertia_rank,
                    "inertia_free_axes": [list(a) for a in b.inertia_free_axes],
                }
                for b in self.bodies
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NCLayout":
        return cls(
            tuple(
                BodyLayout(
                    b["name"], int(b["offset"]), float(b["length"]), tuple(b["com"]), int(b["inertia_rank"]),
                    tuple(tuple(a) for a in b["inertia_free_axes"]),
                )
                for b in d["bodies"]
            )
        )


def build_layout(mechanism: Mechanism) -> NCLayout:
    """The NC layout of a mechanism: point lengths and singular-inertia bookkeeping per body."""
    radii = [float(np.sqrt(max(np.trace(second_moment(b.inertia)), 0.0) / b.mass)) for b in mechanism.bodies]
    solid = [r for r in radii if r > POINT_MASS_RADIUS]
    fallback = float(np.median(solid)) if solid else 0.1
    layouts = []
    for i, (body, radius) in enumerate(zip(mechanism.bodies, radii)):
        S = second_moment(body.inertia)
        eig, vec = np.linalg.eigh(S)
        zero = eig <= SINGULAR_RTOL * max(float(eig.max()), 0.0) if eig.max() > 0 else np.ones(3, bool)
        free_axes = tuple(tuple(float(v) for v in vec[:, k]) for k in np.flatnonzero(zero))
        length = radius if radius > POINT_MASS_RADIUS else fallback
        if radius <= POINT_MASS_RADIUS:
            log.info("body '%s' has no rotational inertia (point mass): its points use L = %.4g m", body.name, length)
        elif free_axes:
            shape = {1: "flat (a plate)", 2: "slender (a rod)"}.get(len(free_axes), "a point mass")
            log.info(
                "body '%s' is %s: its rotation about %d body axis/axes has no inertia; its NC mass block is kept exact "
                "(positive semi-definite)", body.name, shape, len(free_axes),
            )
        layouts.append(
            BodyLayout(body.name, COORDS_PER_BODY * i, length, tuple(float(c) for c in body.com), 3 - len(free_axes), free_axes)
        )
    return NCLayout(tuple(layouts))


def mass_matrix(mechanism: Mechanism, layout: NCLayout) -> np.ndarray:
    """The constant NC mass matrix ``M`` (n_n x n_n), block diagonal, symmetric PSD, of
    ``mechanism``'s masses, centres of mass and inertias in ``layout`` (its own, or a trained
    model's for a physical variant: :func:`body_mass_block`'s offset)."""
    M = np.zeros((layout.size, layout.size))
    for body, bl in zip(mechanism.bodies, layout.bodies):
        offset = np.asarray(body.com, dtype=np.float64) - np.asarray(bl.com, dtype=np.float64)
        M[bl.slice, bl.slice] = np.kron(body_mass_block(body.mass, body.inertia, bl.length, offset), np.eye(3))
    return M


def affine_weights(bl: BodyLayout, point: np.ndarray) -> np.ndarray:
    """Weights ``c_0..c_3`` that give a body-frame point as ``p = sum_j c_j r_j``."""
    w = (np.asarray(point, dtype=np.float64) - np.asarray(bl.com)) / bl.length
    return np.concatenate([[1.0 - w.sum()], w])


@dataclass(frozen=True)
class SpringModel:
    """Spring-dampers in NC: ``d = D x + e``, ``T = k (|d| - L0) + c ldot`` (+ a recorded
    spring's learned law), ``f = -D^T n T``.

    ``D`` (n_s, 3, n_n), ``e`` (n_s, 3), ``k``, ``c``, ``L0`` (n_s,); ``laws``: the learned laws of
    recorded springs (a :class:`mc2fmu.models.spring_laws.SpringLaws`), None without any.
    """

    D: np.ndarray
    e: np.ndarray
    k: np.ndarray
    c: np.ndarray
    L0: np.ndarray
    laws: Any = None

    @classmethod
    def empty(cls, n: int) -> "SpringModel":
        return cls(np.zeros((0, 3, n)), np.zeros((0, 3)), np.zeros(0), np.zeros(0), np.zeros(0))

    def __len__(self) -> int:
        return len(self.k)

    def vectors(self, x: np.ndarray) -> np.ndarray:
        """Spring vectors ``d = D x + e`` (..., n_s, 3)."""
        return np.einsum("sij,...j->...si", self.D, x) + self.e

    def lengths(self, x: np.ndarray) -> np.ndarray:
        """Spring lengths (..., n_s)."""
        return np.linalg.norm(self.vectors(x), axis=-1)

    def energy(self, x: np.ndarray) -> np.ndarray:
        """Potential energy stored in the springs (...)."""
        return (0.5 * self.k * (self.lengths(x) - self.L0) ** 2).sum(-1)

    def __call__(self, x: np.ndarray, xd: np.ndarray) -> np.ndarray:
        d = self.vectors(x)
        l = np.linalg.norm(d, axis=-1)
        n = d / l[..., None]
        ldot = np.einsum("...si,sij,...j->...s", n, self.D, xd)
        T = self.k * (l - self.L0) + self.c * ldot
        if self.laws is not None and len(self.laws):
            shape = l.shape
            T = T + self.laws.tension(l.reshape(-1, shape[-1]), ldot.reshape(-1, shape[-1])).reshape(shape)
        return -np.einsum("sij,...si->...j", self.D, n * T[..., None])


@dataclass(frozen=True)
class ForceModel:
    """Exact NC generalized force ``f(x, xd, u) = f_g + f_B u + sum_i u_i f_C[i] x + f_spring(x, xd)``.

    ``f_g`` (n_n,) gravity, ``f_B`` (n_n, n_u) constant load maps (forces at body points),
    ``f_C`` (n_u, n_n, n_n) state-linear maps (torques), ``springs`` the spring-dampers.
    This form is what every later stage (training, ONNX, generated C) evaluates.
    """

    f_g: np.ndarray
    f_B: np.ndarray
    f_C: np.ndarray
    springs: SpringModel | None = None

    def __call__(self, x: np.ndarray, u: np.ndarray, xd: np.ndarray | None = None) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        u = np.asarray(u, dtype=np.float64)
        f = self.f_g + u @ self.f_B.T + np.einsum("...i,ijk,...k->...j", u, self.f_C, x)
        if self.springs is not None and len(self.springs):
            if xd is None:
                raise ValueError("this mechanism has springs: the force needs the velocity xd")
            f = f + self.springs(x, np.asarray(xd, dtype=np.float64))
        return f


def spring_model(mechanism: Mechanism, layout: NCLayout) -> SpringModel:
    n = layout.size
    ns = len(mechanism.springs)
    D, e = np.zeros((ns, 3, n)), np.zeros((ns, 3))
    for s, spring in enumerate(mechanism.springs):
        for sign, body, point in ((1.0, spring.body_a, spring.point_a), (-1.0, spring.body_b, spring.point_b)):
            if body == GROUND:
                e[s] += sign * point
                continue
            bl = layout.body(body)
            for j, c in enumerate(affine_weights(bl, point)):
                D[s, :, bl.offset + 3 * j : bl.offset + 3 * j + 3] += sign * c * np.eye(3)
    k, c, L0 = (np.array([getattr(sp, a) for sp in mechanism.springs], dtype=np.float64)
                for a in ("stiffness", "damping", "length"))
    return SpringModel(D, e, k, c, L0)


def force_model(mechanism: Mechanism, layout: NCLayout, M: np.ndarray | None = None) -> ForceModel:
    n = layout.size
    M = mass_matrix(mechanism, layout) if M is None else M
    f_g = M @ np.tile(mechanism.gravity, POINTS_PER_BODY * len(layout.bodies))
    n_u = len(mechanism.inputs)
    f_B = np.zeros((n, n_u))
    f_C = np.zeros((n_u, n, n))
    for i, inp in enumerate(mechanism.inputs):
        bl = layout.body(inp.body)
        o = bl.offset
        if inp.kind == "force":
            c = affine_weights(bl, inp.point)
            for j in range(POINTS_PER_BODY):
                f_B[o + 3 * j : o + 3 * j + 3, i] = c[j] * inp.direction
        else:
            # f_k = T x (rk - r0) / (2 L^2) = [d]x (rk - r0) u / (2 L^2);  f_0 = -sum_k f_k
            K = _skew(inp.direction) / (2.0 * bl.length**2)
            r0 = slice(o, o + 3)
            for k in range(1, POINTS_PER_BODY):
                rk = slice(o + 3 * k, o + 3 * k + 3)
                f_C[i, rk, rk] += K
                f_C[i, rk, r0] -= K
                f_C[i, r0, rk] -= K
                f_C[i, r0, r0] += K
    return ForceModel(f_g, f_B, f_C, spring_model(mechanism, layout))


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


# ---------------------------------------------------------------------------- poses <-> NC


def nc_from_poses(layout: NCLayout, origin: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """NC ``x`` (n_t, n_n) from body-frame origins (n_t, n_b, 3) and rotations (n_t, n_b, 3, 3)."""
    origin = np.asarray(origin, dtype=np.float64)
    rotation = np.asarray(rotation, dtype=np.float64)
    n_t = origin.shape[0]
    x = np.empty((n_t, layout.size))
    for k, bl in enumerate(layout.bodies):
        R = rotation[:, k]
        r0 = origin[:, k] + R @ np.asarray(bl.com)
        x[:, bl.offset : bl.offset + 3] = r0
        for j in range(1, POINTS_PER_BODY):
            x[:, bl.offset + 3 * j : bl.offset + 3 * j + 3] = r0 + bl.length * R[:, :, j - 1]
    return x


def poses_from_nc(layout: NCLayout, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Body-frame origins (n_t, n_b, 3) and rotations (n_t, n_b, 3, 3) from NC ``x``.

    A decoded ``x`` is not exactly rigid; its rotation is the nearest proper rotation
    (polar factor) of ``[r1 - r0, r2 - r0, r3 - r0] / L``.
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n_t = x.shape[0]
    origin = np.empty((n_t, len(layout.bodies), 3))
    rotation = np.empty((n_t, len(layout.bodies), 3, 3))
    for k, bl in enumerate(layout.bodies):
        pts = x[:, bl.slice].reshape(n_t, POINTS_PER_BODY, 3)
        D = (pts[:, 1:] - pts[:, :1]).transpose(0, 2, 1) / bl.length  # columns are R e_k
        R = nearest_rotation(D)
        rotation[:, k] = R
        origin[:, k] = pts[:, 0] - R @ np.asarray(bl.com)
    return origin, rotation


def nc_velocity(layout: NCLayout, rotation: np.ndarray, v_com: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Exact NC velocity from rotations, COM velocities and global angular velocities.

    ``r0dot = v_com``, ``rkdot = v_com + omega x (L R e_k)``.
    """
    rotation = np.asarray(rotation, dtype=np.float64)
    n_t = rotation.shape[0]
    xd = np.empty((n_t, layout.size))
    for k, bl in enumerate(layout.bodies):
        xd[:, bl.offset : bl.offset + 3] = v_com[:, k]
        for j in range(1, POINTS_PER_BODY):
            arm = bl.length * rotation[:, k, :, j - 1]
            xd[:, bl.offset + 3 * j : bl.offset + 3 * j + 3] = v_com[:, k] + np.cross(omega[:, k], arm)
    return xd


def rigidity_residual(layout: NCLayout, x: np.ndarray) -> np.ndarray:
    """Per sample and body (n_t, n_b): max |distance - rigid distance| over the 6 point pairs, m."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n_t = x.shape[0]
    out = np.empty((n_t, len(layout.bodies)))
    pairs = [(i, j) for i in range(POINTS_PER_BODY) for j in range(i + 1, POINTS_PER_BODY)]
    for k, bl in enumerate(layout.bodies):
        pts = x[:, bl.slice].reshape(n_t, POINTS_PER_BODY, 3)
        dev = []
        for i, j in pairs:
            rigid = bl.length if i == 0 else bl.length * np.sqrt(2.0)
            dev.append(np.abs(np.linalg.norm(pts[:, i] - pts[:, j], axis=1) - rigid))
        out[:, k] = np.max(dev, axis=0)
    return out


def finite_difference_velocity(x: np.ndarray, dt: float) -> np.ndarray:
    """Second-order velocity of uniformly sampled ``x`` (n_t, ...): centred inside, one-sided ends."""
    x = np.asarray(x, dtype=np.float64)
    xd = np.empty_like(x)
    xd[1:-1] = (x[2:] - x[:-2]) / (2.0 * dt)
    xd[0] = (-3.0 * x[0] + 4.0 * x[1] - x[2]) / (2.0 * dt)
    xd[-1] = (3.0 * x[-1] - 4.0 * x[-2] + x[-3]) / (2.0 * dt)
    return xd


def kinetic_energy(M: np.ndarray, xd: np.ndarray) -> np.ndarray:
    """``0.5 xdot^T M xdot`` per sample."""
    return 0.5 * np.einsum("...i,ij,...j->...", xd, M, xd)
