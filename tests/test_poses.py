"""A body's pose from its decoded points (mc2fmu/models/poses.py), the one text every target
prints, against an independent reference: the SVD's polar factor and scipy's quaternion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mc2fmu.models import expr
from mc2fmu.models.poses import body_pose, traced

LENGTH, COM = 0.7, np.array([0.12, -0.2, 0.05])


def bodies(rotations: np.ndarray, noise: float, seed: int = 0) -> np.ndarray:
    """(B, 12) natural coordinates of bodies with these rotations, each coordinate perturbed
    by ``noise`` of the length (a decoded body is rigid only to the decoder's accuracy)."""
    rng = np.random.default_rng(seed)
    r0 = rng.standard_normal((len(rotations), 3))
    pts = [r0] + [r0 + LENGTH * rotations[:, :, k] for k in range(3)]
    x = np.stack(pts, 1).reshape(len(rotations), 12)
    return x + noise * LENGTH * rng.standard_normal(x.shape)


def reference(x: np.ndarray) -> np.ndarray:
    """Origin and quaternion (w >= 0) by the SVD's polar factor (the nearest rotation)."""
    D = np.stack([x[:, 3 * (k + 1):3 * (k + 2)] - x[:, :3] for k in range(3)], 2) / LENGTH
    U, _, Vt = np.linalg.svd(D)
    U[:, :, -1] *= np.sign(np.linalg.det(U @ Vt))[:, None]
    R = U @ Vt
    quat = Rotation.from_matrix(R).as_quat(scalar_first=True)
    quat *= np.where(quat[:, :1] < 0, -1.0, 1.0)
    return np.concatenate([x[:, :3] - R @ COM, quat], 1)


def rotations() -> np.ndarray:
    """Random rotations and, for each of Shepperd's four cases, rotations that take it: the
    identity (trace largest) and half turns about x, y and z (one diagonal entry largest)."""
    special = [np.eye(3)] + [Rotation.from_rotvec(math.pi * 0.97 * np.eye(3)[k]).as_matrix() for k in range(3)]
    return np.concatenate([np.array(special), Rotation.random(400, random_state=3).as_matrix()])


def numpy_pose(x: np.ndarray) -> np.ndarray:
    return np.array(body_pose([x[:, i] for i in range(12)], LENGTH, COM)).T


@pytest.mark.parametrize("noise", [0.0, 1e-3, 0.1])
def test_the_pose_is_the_svds_nearest_rotation(noise):
    R = rotations()
    x = bodies(R, noise)
    cases = np.argmax(np.stack([np.trace(R, axis1=1, axis2=2), R[:, 0, 0], R[:, 1, 1], R[:, 2, 2]], 1), 1)
    assert set(cases) == {0, 1, 2, 3}  # every formula of Shepperd's method is taken
    with np.errstate(all="raise"):  # no branch, chosen or not, divides by zero or takes sqrt(< 0)
        pose = numpy_pose(x)
    assert np.abs(pose - reference(x)).max() <= 1e-12


@pytest.mark.parametrize("sigma", [(1.0, 1.0, 1e-6), (1.0, 1.0, 1e-3), (0.1, 0.1, 0.1), (1.0, 1.0, 10.0),
                                   (3.0, 0.2, 1.0)])
def test_a_far_from_rigid_body_still_gets_the_nearest_rotation(sigma):
    """Frames stretched, squashed or nearly flat (a body decoded far outside the envelope): the
    scaled iteration reaches the nearest rotation in its fixed number of steps."""
    U = Rotation.random(50, random_state=5).as_matrix()
    V = Rotation.random(50, random_state=6).as_matrix()
    D = U @ np.diag(sigma) @ V.transpose(0, 2, 1)
    r0 = np.random.default_rng(7).standard_normal((50, 3))
    x = np.concatenate([r0] + [r0 + LENGTH * D[:, :, k] for k in range(3)], 1)
    assert np.abs(numpy_pose(x) - reference(x)).max() <= 1e-12


def test_the_printed_python_and_the_traced_graph_compute_numpys_pose():
    x = bodies(rotations()[:60], 1e-3, seed=1)
    graph = traced()
    namespace = {"math": math}
    exec(expr.emit_python(graph, "pose", ("p", "g")), namespace)
    g = [LENGTH, *COM]
    printed = np.array([namespace["pose"](row.tolist(), g) for row in x])
    evaluated = np.array([[float(v) for v in expr.evaluate(graph, {"p": row, "g": g})] for row in x])
    assert np.abs(printed - numpy_pose(x)).max() <= 1e-14
    assert np.abs(evaluated - numpy_pose(x)).max() <= 1e-14


def test_the_complex_step_gives_the_poses_derivative():
    x = bodies(rotations()[:40], 1e-3, seed=2)
    s = np.random.default_rng(4).standard_normal(x.shape)
    h, e = 1e-30, 1e-6
    slope = numpy_pose(x + 1j * h * s).imag / h
    central = (numpy_pose(x + e * s) - numpy_pose(x - e * s)) / (2 * e)
    assert np.abs(slope - central).max() <= 1e-7 * max(1.0, np.abs(central).max())


def test_a_singular_body_gives_a_finite_pose():
    x = np.zeros((1, 12))  # four coincident points: D = 0, no rotation near it
    with np.errstate(all="raise"):
        pose = numpy_pose(x)
    assert np.isfinite(pose).all() and np.allclose(pose[0, 3:], [1.0, 0.0, 0.0, 0.0])


def test_select_greater_on_every_type():
    import casadi as ca
    import torch

    a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 1.0])
    assert expr.select_greater(1.0, 0.5, 3.0, 4.0) == 3.0 and expr.select_greater(0.5, 0.5, 3.0, 4.0) == 4.0
    assert expr.select_greater(np.complex128(1 + 1e-20j), np.complex128(1 - 1e-20j), 1.0, 0.0) == 0.0  # real parts
    assert list(expr.select_greater(a, b, a, -a)) == [-1.0, -2.0, 3.0]
    z = a + 1j * np.array([0.0, 9.0, -9.0])  # complex: decided by the real parts
    assert list(expr.select_greater(z, b, 1.0, 0.0)) == [0.0, 0.0, 1.0]
    t = expr.select_greater(torch.tensor(a), torch.tensor(b), torch.tensor(a), torch.tensor(-a))
    assert t.tolist() == [-1.0, -2.0, 3.0]
    s = ca.SX.sym("s")
    f = ca.Function("f", [s], [expr.select_greater(s, 2.0, s * s, -s)])
    assert float(f(3.0)) == 9.0 and float(f(1.0)) == -1.0
    p = expr.inputs("p", 2)
    node = expr.select_greater(p[0], p[1], p[0], 2.0)
    assert "= (MC2FMU_RE(p[0]) > MC2FMU_RE(p[1]) ? p[0] : 2.0);" in expr.emit_c([node])
    assert "= if noEvent(p0 > p1) then p0 else 2.0;" in " ".join(expr.emit_modelica([node], lambda n, i: f"{n}{i}", "t")[1])
    assert expr.evaluate([node], {"p": [3.0, 1.0]}) == [3.0] and expr.evaluate([node], {"p": [1.0, 3.0]}) == [2.0]
    assert expr.select_greater(expr.Expr.wrap(2.0), 1.0, p[0], p[1]) is p[0]  # constants fold
    # every printed Modelica relation is in noEvent (the softplus threshold too: a law's damping)
    soft = " ".join(expr.emit_modelica([expr.apply("softplus", p[0])], lambda n, i: f"{n}{i}", "t")[1])
    assert "if noEvent(p0 > 20.0) then p0" in soft


def test_the_pose_traces_through_numpy_object_arrays():
    """numpy code on arrays of expression nodes (as terms.evaluate is traced) reaches the
    nodes' own select: the same graph as the scalar trace."""
    p, g = expr.inputs("p", 12), expr.inputs("g", 4)
    arr = np.array(p, dtype=object)[:, None]
    out = body_pose(list(arr), g[0], g[1:])
    assert [o[0] for o in out] == traced()


def test_calls_are_printed_between_what_they_read_and_what_reads_them():
    """:func:`expr.emit_c_calls`: a description that calls an opaque function twice, the second
    call reading the first's results and the outputs reading both, printed as C; the C run as
    Python statement by statement (the calls by the function itself) gives what the description
    gives on numbers."""
    def described(x, call):
        b = call([x[0] * x[1], x[0] + x[1] / 3.0])
        c = call([b[0] * x[0], b[1] - x[1]])
        return [c[0] + b[1], c[1] * 2.0 + x[0], (c[0] - b[0]) * c[1]]

    def fn(v):
        return [v[0] * v[1] + 1.0, math.sin(v[0]) - v[1]]

    trace = expr.CallTrace("a")
    code = expr.emit_c_calls(described(expr.inputs("x", 2), trace), trace, lambda k: f"CALL({k});", arg="v")
    assert len(trace.calls) == 2
    lines = [ln.strip() for ln in code.splitlines()]
    assert lines[0] == "mc2fmu_real v0[2], a0[2], v1[2], a1[2];"
    env = {"x": [0.7, -1.3], "out": [None] * 3, "v0": [0.0] * 2, "a0": [0.0] * 2, "v1": [0.0] * 2, "a1": [0.0] * 2}

    def CALL(k):
        env[f"a{k}"][:] = fn(env[f"v{k}"])

    env["CALL"] = CALL
    for line in lines[1:]:
        exec(line.removeprefix("const mc2fmu_real ").rstrip(";"), {}, env)
    assert env["out"] == pytest.approx(described([0.7, -1.3], fn), rel=1e-15)
