"""The physical parameter vector and the natural-coordinate physics it gives, with its checks.

A decoder-manifold model's physical parameters are one vector ``theta`` (the FMU's parameter
slots): per body, in file order, mass, centre of mass x y z (body frame) and the inertia
tensor's xx yy zz xy xz yz (:data:`BODY_SLOTS`); then gravity x y z; then per spring
stiffness, damping and rest length.  From ``theta`` and the trained layout (each body's point
length ``L`` and the centre of mass its points were placed at) come each body's 4x4 point mass
block (:func:`body_mass_entries`, written once for every target; the body's 12x12 block of
``M`` is ``A (x) I_3``), gravity's force ``f_g = M g`` and the spring constants
(:func:`physics_arrays`).

numpy only, and nothing else imported: the python FMU backend inserts this module's source
into its slave (one implementation of the physics a parameter set gives and of its checks, as
:mod:`mc2fmu.mechanics.natural` and ``mc2fmu validate`` use them).  The native backend's C
runtime prints :func:`body_mass_entries` and implements the rest in ``mc2fmu_native.h``; the
tests compare the two.
"""

from __future__ import annotations

import numpy as np

#: slots per body in the parameter vector: mass, com (3), inertia xx, yy, zz, xy, xz, yz
BODY_SLOTS = 10
#: the inertia tensor's entries in slot order (after mass and com)
INERTIA_ENTRIES = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
#: a reduced mass matrix ``J^T M J`` is regular where its smallest eigenvalue exceeds this
#: fraction of its largest
REDUCED_MASS_RTOL = 1e-10


def second_moment(inertia: np.ndarray) -> np.ndarray:
    """``S = integral(rho xi xi^T) = tr(J)/2 I - J`` from the inertia tensor about the COM."""
    return 0.5 * np.trace(inertia) * np.eye(3) - inertia


#: a body's 4x4 point mass block ``A`` as :func:`body_mass_entries` gives it: its distinct
#: entries (upper triangle, row by row), then its four row sums (gravity's weights on the points)
MASS_ENTRIES = ((0, 0), (0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 3))
MASS_VALUES = len(MASS_ENTRIES) + 4


def body_mass_entries(th, L, com) -> list:
    """One body's point mass block, written once for every target: the entries of
    :data:`MASS_ENTRIES` and the row sums, from its parameter slots ``th`` (mass, centre of mass
    x y z in the body frame, inertia xx yy zz xy xz yz: :data:`BODY_SLOTS`), its point length
    ``L`` and the centre of mass ``com`` its points were placed about.  Plain arithmetic, so it
    runs on numbers, CasADi symbols and :mod:`mc2fmu.models.expr` leaves: the native FMU's C and
    the Modelica parameters are printed from it, and :func:`body_mass_block` evaluates it.

    The points are ``r_0`` at ``com`` and ``r_k = r_0 + L e_k``.  ``A`` holds the mass
    distribution's moments in the points' affine weights ``w = (1 - sum a, a)``, ``a = (s -
    com) / L``: ``sum A = m``, ``int a dm = m d`` and ``int a a^T dm = S / L^2 + m d d^T`` with
    ``d`` the centre of mass's offset from ``com`` in point lengths and ``S = tr(J)/2 I - J`` the
    second moment about the centre of mass, so ``A`` is linear in the mass, the mass times the
    offset, and the inertia (a physical variant keeps the trained layout)."""
    mass = th[0]
    J = [[None] * 3 for _ in range(3)]
    for value, (i, j) in zip(th[4:10], INERTIA_ENTRIES):
        J[i][j] = J[j][i] = value
    tr = J[0][0] + J[1][1] + J[2][2]
    inv_L = 1.0 / L
    inv_L2 = inv_L * inv_L
    d = [(th[1 + i] - com[i]) * inv_L for i in range(3)]
    Sig = [[None] * 3 for _ in range(3)]
    for i in range(3):  # symmetric to the last bit: each entry once, mirrored
        for j in range(i, 3):
            Sig[i][j] = Sig[j][i] = ((0.5 * tr if i == j else 0.0) - J[i][j]) * inv_L2 + mass * d[i] * d[j]
    s1 = [Sig[i][0] + Sig[i][1] + Sig[i][2] for i in range(3)]
    A = [[None] * 4 for _ in range(4)]
    A[0][0] = mass - 2.0 * (mass * d[0] + mass * d[1] + mass * d[2]) + (s1[0] + s1[1] + s1[2])
    for i in range(3):
        A[0][1 + i] = A[1 + i][0] = mass * d[i] - s1[i]
        for j in range(3):
            A[1 + i][1 + j] = Sig[i][j]
    return [A[i][j] for i, j in MASS_ENTRIES] + [A[j][0] + A[j][1] + A[j][2] + A[j][3] for j in range(4)]


def mass_block_of(entries) -> np.ndarray:
    """The 4x4 block ``A`` of :func:`body_mass_entries`' values."""
    A = np.empty((4, 4))
    for v, (i, j) in zip(entries, MASS_ENTRIES):
        A[i, j] = A[j, i] = v
    return A


def body_mass_block(mass: float, inertia: np.ndarray, length: float, offset: np.ndarray | None = None) -> np.ndarray:
    """The 4x4 point mass matrix ``A`` of one body (the 12x12 block is ``A (x) I_3``):
    :func:`body_mass_entries` with the centre of mass ``offset`` from the points' centre, in the
    body frame (None: at it, the layout of the body's own mechanism file)."""
    inertia = np.asarray(inertia, dtype=np.float64)
    off = [0.0, 0.0, 0.0] if offset is None else [float(v) for v in offset]
    th = [float(mass)] + off + [float(inertia[i, j]) for i, j in INERTIA_ENTRIES]
    return mass_block_of(body_mass_entries(th, float(length), (0.0, 0.0, 0.0)))


def inertia_tensor(entries) -> np.ndarray:
    """The symmetric 3x3 tensor of the six slots xx, yy, zz, xy, xz, yz."""
    J = np.zeros((3, 3))
    for value, (i, j) in zip(entries, INERTIA_ENTRIES):
        J[i, j] = J[j, i] = value
    return J


def physics_arrays(theta, lengths, coms) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(blocks, f_g, k, c, L0)`` of the parameter vector ``theta`` on a layout whose bodies have
    point lengths ``lengths`` and their points about the centres of mass ``coms``: the mass
    blocks (n_b, 4, 4), gravity's force ``f_g = M g`` (12 n_b,) and the springs' stiffness,
    damping and rest length (n_s,)."""
    theta = np.asarray(theta, dtype=np.float64)
    nb = len(lengths)
    blocks = np.empty((nb, 4, 4))
    for b in range(nb):
        p = theta[BODY_SLOTS * b: BODY_SLOTS * (b + 1)]
        offset = p[1:4] - np.asarray(coms[b], dtype=np.float64)
        blocks[b] = body_mass_block(p[0], inertia_tensor(p[4:10]), float(lengths[b]), offset)
    f_g = gravity_force(blocks, theta[BODY_SLOTS * nb: BODY_SLOTS * nb + 3])
    springs = theta[BODY_SLOTS * nb + 3:].reshape(-1, 3)
    return blocks, f_g, springs[:, 0].copy(), springs[:, 1].copy(), springs[:, 2].copy()


def gravity_force(blocks: np.ndarray, g) -> np.ndarray:
    """Gravity's force ``f_g = M g`` (12 n_b,) of the mass blocks (n_b, 4, 4) and gravity ``g``
    on every point: ``(A (x) I_3) (1 (x) g) = (A 1) (x) g``."""
    return (blocks.sum(axis=2)[:, :, None] * np.asarray(g, dtype=np.float64)).reshape(-1)


def slot_problem(slot: int, value: float, n_bodies: int, limits: dict) -> str | None:
    """Why ``value`` cannot be the parameter in ``slot`` (None: it can), by the mechanism file's
    limits (``limits``: :func:`mc2fmu.mechanics.variants.parameter_limits`)."""
    if not np.isfinite(value):
        return "it must be finite"
    if slot < BODY_SLOTS * n_bodies:
        k = slot % BODY_SLOTS
        if k == 0:
            if limits["min_mass"] <= value <= limits["max_mass"]:
                return None
            return f"a mass must lie in [{limits['min_mass']:g}, {limits['max_mass']:g}] kg"
        if k < 4:
            if abs(value) <= limits["max_length"]:
                return None
            return f"a centre of mass must lie within {limits['max_length']:g} m of the body origin"
        if k < 7 and value < 0.0:
            return "a principal moment of inertia must be >= 0"
        if abs(value) <= limits["max_inertia"]:
            return None
        return f"an inertia entry must be at most {limits['max_inertia']:g} kg m^2 in magnitude"
    if slot < BODY_SLOTS * n_bodies + 3:
        if abs(value) <= limits["max_gravity"]:
            return None
        return f"gravity must be at most {limits['max_gravity']:g} m/s^2 in magnitude"
    kind = (slot - BODY_SLOTS * n_bodies - 3) % 3
    if kind == 0:
        if 0.0 <= value <= limits["max_stiffness"]:
            return None
        return f"a stiffness must lie in [0, {limits['max_stiffness']:g}] N/m"
    if kind == 1:
        if 0.0 <= value <= limits["max_damping"]:
            return None
        return f"a damping must lie in [0, {limits['max_damping']:g}] N s/m"
    if 0.0 < value <= limits["max_length"]:
        return None
    return f"a rest length must lie in (0, {limits['max_length']:g}] m"


def values_problem(theta, names, n_bodies: int, limits: dict) -> str | None:
    """The first value of ``theta`` (slots named ``names``) that no parameter can take
    (:func:`slot_problem`), with the reason, or None."""
    for slot, value in enumerate(np.asarray(theta, dtype=np.float64)):
        why = slot_problem(slot, float(value), n_bodies, limits)
        if why is not None:
            return f"{names[slot]} = {float(value)!r}: {why}"
    return None


def parameters_problem(theta, names, body_names, limits: dict) -> str | None:
    """Why the parameter vector ``theta`` (slots named ``names``) is no mechanism's, or None:
    each value (:func:`values_problem`), then each body's inertia, a rigid body's (the second
    moment ``S = tr(J)/2 I - J`` positive semi-definite: ``J >= 0`` with the triangle
    inequalities ``J1 <= J2 + J3``), to the relative slack ``limits["inertia_rtol"]``."""
    theta = np.asarray(theta, dtype=np.float64)
    problem = values_problem(theta, names, len(body_names), limits)
    if problem is not None:
        return problem
    for b, body in enumerate(body_names):
        entries = theta[BODY_SLOTS * b + 4: BODY_SLOTS * (b + 1)]
        S = second_moment(inertia_tensor(entries))
        scale = float(np.abs(entries).max())
        tol = limits["inertia_rtol"] * scale
        minors = (S[0, 0], S[1, 1], S[2, 2], S[0, 0] * S[1, 1] - S[0, 1] ** 2, S[0, 0] * S[2, 2] - S[0, 2] ** 2,
                  S[1, 1] * S[2, 2] - S[1, 2] ** 2, np.linalg.det(S))
        bounds = (tol, tol, tol, tol * scale, tol * scale, tol * scale, tol * scale * scale)
        if any(m < -t for m, t in zip(minors, bounds)):
            shown = " ".join(f"{v:.6g}" for v in entries)
            return (f"{body}.inertia [xx yy zz xy xz yz] = [{shown}] kg m^2 is no rigid body's: its principal moments "
                    "must be >= 0 and satisfy the triangle inequality J1 <= J2 + J3 (check the values and the axes)")
    return None


def reduced_mass_regular(Mm: np.ndarray) -> bool:
    """Whether every reduced mass matrix of the stack ``Mm`` (B, m, m) is regular: symmetric
    part positive definite, its smallest eigenvalue above :data:`REDUCED_MASS_RTOL` of its
    largest."""
    Mm = np.asarray(Mm, dtype=np.float64)
    if not np.all(np.isfinite(Mm)):
        return False
    ev = np.linalg.eigvalsh(0.5 * (Mm + np.swapaxes(Mm, -1, -2)))
    return bool((ev.min(axis=-1) > REDUCED_MASS_RTOL * np.abs(ev).max(axis=-1)).all())
