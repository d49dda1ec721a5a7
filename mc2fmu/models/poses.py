"""A body's pose from its four decoded points, written once for every target.

The pose outputs of an FMU (each body's origin ``x, y, z`` and unit quaternion ``qw ... qz``)
are :func:`body_pose` of the body's 12 natural coordinates, its length ``L`` and its
centre-of-mass offset ``com`` (the body frame's, so the origin is ``r0 - R com``):

* ``R`` is the orthogonal polar factor of ``D = [r1 - r0, r2 - r0, r3 - r0] / L`` (the nearest
  rotation to a decoded body, which is rigid only to the decoder's accuracy) by Newton's
  iteration with Higham's Frobenius-norm scaling, ``X <- (g X + X^-T / g) / 2``, ``g =
  sqrt(|X^-1|_F / |X|_F)`` (the first :data:`SCALED_ITERATIONS`; ``g = 1`` after them),
  :data:`POLAR_ITERATIONS` times (a frame with ``det D < 0``, a
  mirrored body that a decoder gives only far outside its training envelope, has an
  orthogonal factor that is a reflection: its quaternion has no meaning there);
* the quaternion by Shepperd's method (the largest of ``tr R``, ``R11``, ``R22``, ``R33``, the
  first of equals, picks the formula), then normalised with ``w >= 0``.

It is plain arithmetic with :func:`~.expr.sqrt`, :func:`~.expr.maximum` and
:func:`~.expr.select_greater`, so the same code runs on floats, numpy arrays (one value per
sample), complex arrays (the complex step), CasADi symbols, and :mod:`.expr` leaves, which
:func:`traced` records to be printed: the native FMU's C (``mc2fmu_poses.h``), the python
backend's slave and the Modelica export's equations (there per body, with its length and
centre of mass folded in as numbers).  :func:`mc2fmu.mechanics.natural.poses_from_nc`
(an SVD) is the independent reference the tests hold them to.
"""

from __future__ import annotations

from collections.abc import Sequence

from .expr import inputs, maximum, select_greater, sqrt

#: Newton iterations of the polar factor.  The iteration converges quadratically: a decoded
#: body's rigidity error ``e`` (1e-5 to 1e-3 of its length inside the training envelope) is
#: ``e^(2^k)`` after ``k``, at rounding after 3 from ``e = 1e-3``.  Unscaled, a singular value
#: of ``D`` far from 1 only halves its distance per iteration (6 left 3.5e-7 at a singular
#: value of 0.1 and 0.4 at 1e-3, a nearly flat body); scaled, they reach rounding from singular
#: values of 1e-6 to 10 (tests/test_poses.py: 2 scaled and 4 plain iterations suffice there)
POLAR_ITERATIONS = 6
#: the first iterations are scaled; the rest, near convergence where the scale is 1, are not
#: (a scaled iteration's two square roots and two divisions are a chain of latencies: with all
#: six scaled the C host's step reading every output took 10-17 % longer than the unscaled
#: loop it replaced, at 1-5 % more instructions; docs/benchmarks.md "FMU cost per step")
SCALED_ITERATIONS = 3
#: below this ``|det X|``, ``|X|_F`` or scaling an iteration takes 1 instead (``X`` is then
#: singular: no rotation is near it, and the pose stays finite rather than dividing by zero)
SINGULAR = 1e-300


def _cofactors(X: Sequence) -> list:
    """The cofactor matrix of a row-major 3 x 3 ``X`` (``X^-T = C / det X``)."""
    return [X[4] * X[8] - X[5] * X[7], X[5] * X[6] - X[3] * X[8], X[3] * X[7] - X[4] * X[6],
            X[2] * X[7] - X[1] * X[8], X[0] * X[8] - X[2] * X[6], X[1] * X[6] - X[0] * X[7],
            X[1] * X[5] - X[2] * X[4], X[2] * X[3] - X[0] * X[5], X[0] * X[4] - X[1] * X[3]]


def polar(D: Sequence, iterations: int = POLAR_ITERATIONS) -> list:
    """The orthogonal polar factor of the row-major 3 x 3 ``D`` (``det D > 0``: a rotation)."""
    X = list(D)
    for k in range(iterations):
        C = _cofactors(X)
        det = X[0] * C[0] + X[1] * C[1] + X[2] * C[2]
        det = select_greater(abs(det), SINGULAR, det, 1.0)
        if k >= SCALED_ITERATIONS:
            inv = 1.0 / det
            X = [0.5 * (x + c * inv) for x, c in zip(X, C)]
            continue
        xx = sum(x * x for x in X)
        xx = select_greater(xx, SINGULAR, xx, 1.0)
        g = sqrt(sqrt(sum(c * c for c in C) / (det * det * xx)))  # |X^-1|_F = |C|_F / |det X|
        g = select_greater(g, SINGULAR, g, 1.0)
        inv = 1.0 / (g * det)  # one division, not nine
        X = [0.5 * (g * x + c * inv) for x, c in zip(X, C)]
    return X


def quaternion(R: Sequence) -> list:
    """The unit quaternion ``(w, x, y, z)``, ``w >= 0``, of the row-major rotation ``R``
    (Shepperd's method).  Each candidate's square root is floored at 1/4 (the chosen one's
    argument is ``4 max(w, x, y, z)^2 >= 1``), so the others stay finite on every target."""
    tr = R[0] + R[4] + R[8]
    cases = [  # (4 q_k^2 of the case's component k, the components' numerators; None: that k)
        (1.0 + tr, [None, R[7] - R[5], R[2] - R[6], R[3] - R[1]]),
        (1.0 + R[0] - R[4] - R[8], [R[7] - R[5], None, R[1] + R[3], R[2] + R[6]]),
        (1.0 + R[4] - R[0] - R[8], [R[2] - R[6], R[1] + R[3], None, R[5] + R[7]]),
        (1.0 + R[8] - R[0] - R[4], [R[3] - R[1], R[2] + R[6], R[5] + R[7], None]),
    ]
    quats = []
    for arg, nums in cases:
        s = 2.0 * sqrt(maximum(arg, 0.25))
        inv = 1.0 / s
        quats.append([0.25 * s if num is None else num * inv for num in nums])
    keys = [tr, R[0], R[4], R[8]]
    q, best = quats[0], keys[0]
    for key, cand in zip(keys[1:], quats[1:]):
        q = [select_greater(key, best, c, v) for c, v in zip(cand, q)]
        best = select_greater(key, best, key, best)
    inv = 1.0 / sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    q = [v * inv for v in q]
    return [select_greater(0.0, q[0], -v, v) for v in q]


def body_pose(p: Sequence, length, com: Sequence, iterations: int = POLAR_ITERATIONS) -> list:
    """``[x, y, z, qw, qx, qy, qz]`` of a body from its 12 natural coordinates ``p`` (points
    ``r0 .. r3``, each ``x, y, z``), its length and its centre-of-mass offset ``com``."""
    D = [(p[3 * (k + 1) + i] - p[i]) / length for i in range(3) for k in range(3)]  # row i, column k
    R = polar(D, iterations)
    origin = [p[i] - (R[3 * i] * com[0] + R[3 * i + 1] * com[1] + R[3 * i + 2] * com[2]) for i in range(3)]
    return origin + quaternion(R)


def traced() -> list:
    """:func:`body_pose` as expressions of the leaves ``p[0..11]`` (the body's coordinates) and
    ``g[0..3]`` (its length, then ``com``): one body, printed once and run per body."""
    p, g = inputs("p", 12), inputs("g", 4)
    return body_pose(p, g[0], g[1:])
