"""Rotations: unit quaternions (scalar first) and rotation matrices, the one implementation.

Used by the pose reader/writer, the natural coordinates, validation and the python FMU
backend, whose slave script gets these functions inserted at export (it imports nothing but
numpy; keep them free of other imports).  The native backend has its own C version
(``mc2fmu_native.h``), checked against this one.
"""

from __future__ import annotations

import numpy as np


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) from unit quaternions (..., 4), scalar first."""
    w, x, y, z = np.moveaxis(np.asarray(q, dtype=np.float64), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4), scalar first and w >= 0, from rotation matrices (..., 3, 3)
    (Shepperd's method: the largest of the four squared components picks the formula)."""
    R = np.asarray(R, dtype=np.float64)
    shape = R.shape[:-2]
    R = R.reshape(-1, 3, 3)
    tr = np.trace(R, axis1=1, axis2=2)
    k = np.argmax(np.stack([tr, R[:, 0, 0], R[:, 1, 1], R[:, 2, 2]], axis=1), axis=1)
    q = np.empty((R.shape[0], 4))
    d = [R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]]  # 4 w (x, y, z)
    s_ = [R[:, 1, 2] + R[:, 2, 1], R[:, 0, 2] + R[:, 2, 0], R[:, 0, 1] + R[:, 1, 0]]  # 4 (yz, xz, xy)
    for case in range(4):
        m = k == case
        if not m.any():
            continue
        if case == 0:
            s = 2.0 * np.sqrt(1.0 + tr[m])
            q[m] = np.stack([0.25 * s, d[0][m] / s, d[1][m] / s, d[2][m] / s], 1)
            continue
        i = case - 1  # the largest diagonal entry
        j, l = (i + 1) % 3, (i + 2) % 3
        a, b = sorted((j, l))
        s = 2.0 * np.sqrt(1.0 + R[m, i, i] - R[m, a, a] - R[m, b, b])
        comp = np.empty((int(m.sum()), 4))
        comp[:, 0] = d[i][m] / s
        comp[:, 1 + i] = 0.25 * s
        comp[:, 1 + j] = s_[l][m] / s
        comp[:, 1 + l] = s_[j][m] / s
        q[m] = comp
    q *= np.where(q[:, :1] < 0, -1.0, 1.0)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(*shape, 4)


def nearest_rotation(R: np.ndarray) -> np.ndarray:
    """The nearest rotation matrices (polar factor, det +1) of (..., 3, 3) matrices."""
    U, _, Vt = np.linalg.svd(R)
    d = np.sign(np.linalg.det(U @ Vt))
    U[..., :, -1] *= d[..., None]
    return U @ Vt
