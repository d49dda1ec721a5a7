"""The array-level tracer (mc2fmu/models/array_trace.py): a description run on traced arrays
prints Modelica that pymoca (an independent reader of the language) compiles to the same
numbers as the description on numpy, and those numbers are the network's derivatives (the
full-Hessian propagation ``mlp_jh`` and finite differences as the references)."""

from __future__ import annotations

import numpy as np
import pytest

from mc2fmu.models.array_trace import Arr, Program
from mc2fmu.models.mlp import get_activation, mlp, mlp_jh, mlp_jv
from tests.modelica_host import without_no_event

pytest.importorskip("pymoca")


def _layers(rng, sizes):
    return [(rng.normal(size=(o, i)) / np.sqrt(i), rng.normal(size=o) * 0.3) for i, o in zip(sizes[:-1], sizes[1:])]


@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "softplus"])
def test_mlp_jv_is_the_networks_derivatives(activation):
    """On numpy: the value, Jacobian rows and ``H : v v`` against the full-Hessian propagation
    and against central differences of the value."""
    rng = np.random.default_rng(1)
    act = get_activation(activation)
    layers = _layers(rng, [3, 7, 5, 4])
    q, v = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    y, Jr, S = mlp_jv(layers, act, q, np.broadcast_to(np.eye(3), (2, 3, 3)).copy(), np.zeros((2, 3)), v)
    y2, J2, H2 = mlp_jh(layers, act, q, np.broadcast_to(np.eye(3), (2, 3, 3)).copy(), np.zeros((2, 3, 3, 3)))
    np.testing.assert_allclose(y, y2, rtol=0, atol=1e-14)
    np.testing.assert_allclose(Jr, J2.transpose(0, 2, 1), rtol=0, atol=1e-13)
    np.testing.assert_allclose(S, np.einsum("boij,bi,bj->bo", H2, v, v), rtol=0, atol=1e-12)
    h = 1e-4  # central differences along v: (f(q + h v) - 2 f(q) + f(q - h v)) / h^2 = H : v v + O(h^2)
    f = lambda x: mlp(layers, act, x)  # noqa: E731
    np.testing.assert_allclose(S, (f(q + h * v) - 2 * f(q) + f(q - h * v)) / h**2, atol=1e-6)
    np.testing.assert_allclose(np.einsum("bm,bmo->bo", v, Jr), (f(q + h * v) - f(q - h * v)) / (2 * h), atol=1e-7)


def _modelica(prog: Program, inputs: dict[str, np.ndarray], outputs: dict[str, Arr]) -> str:
    lines = ["model T"]
    for name, value in inputs.items():
        dims = "[" + ", ".join(map(str, value.shape)) + "]"
        flat = ", ".join(repr(float(x)) for x in value.ravel())
        text = "{" + flat + "}" if value.ndim == 1 else \
            "{" + ", ".join("{" + ", ".join(repr(float(x)) for x in row) + "}" for row in value) + "}"
        lines.append(f"  parameter Real {name}{dims} = {text if value.size else flat};")
    for name, a in outputs.items():
        prog.named(a, name)
    for name, dims, value, _ in prog.parameters:
        lines.append(f"  parameter Real {name}{dims} = {value};")
    for name, dims, _ in prog.variables:
        lines.append(f"  Real {name}{dims};")
    lines.append("equation")
    lines += ["  " + e for e in prog.equations]
    lines.append("end T;")
    return "\n".join(lines) + "\n"


def _solve(text: str, tmp_path, names: list[str]) -> dict[str, np.ndarray]:
    """pymoca's model of ``text``, its algebraic variables solved by Newton's method (explicit
    equations: full steps resolve them level by level); the values of ``names``."""
    import casadi as ca
    import pymoca.backends.casadi.api as api

    (tmp_path / "T.mo").write_text(without_no_event(text))  # pymoca 0.12 knows no noEvent (tests/modelica_host.py)
    model = api.transfer_model(str(tmp_path), "T", {"replace_constants": True, "replace_parameter_values": True,
                                                     "replace_parameter_expressions": True})
    algs = [v.symbol for v in model.alg_states]
    Z = ca.vertcat(*[ca.vec(s) for s in algs])
    g = ca.Function("g", [Z], [ca.vertcat(*[ca.vec(e) for e in model.equations])])
    z = np.asarray(ca.rootfinder("r", "newton", g, {"abstol": 1e-14, "max_iter": 100})(np.zeros(Z.shape[0]))).ravel()
    out, k = {}, 0
    for s in algs:
        n = s.numel()
        out[s.name()] = z[k:k + n]
        k += n
    return {name: out[name] for name in names}


@pytest.mark.parametrize("activation", ["tanh", "softplus"])
def test_the_traced_network_compiles_to_the_descriptions_numbers(activation, tmp_path):
    """mlp_jv traced on arrays and printed as Modelica, compiled by pymoca: the value, the
    Jacobian's rows and ``H : v v`` equal mlp_jv on numpy (the same description) to 1e-12."""
    rng = np.random.default_rng(2)
    act = get_activation(activation)
    layers = _layers(rng, [2, 6, 5, 3])
    z0, v = rng.normal(size=2), rng.normal(size=2)
    Jr0 = np.array([[1.0, 0.3], [-0.2, 0.8]])
    s0 = np.array([0.1, -0.4])
    prog = Program("t")
    x, Jr, s = mlp_jv(layers, act, prog.input("z0", 2), prog.input("Jr0", 2, 2), prog.input("s0", 2),
                      prog.input("v", 2))
    text = _modelica(prog, {"z0": z0, "Jr0": Jr0, "s0": s0, "v": v}, {"x": x, "Jr": Jr, "s": s})
    got = _solve(text, tmp_path, ["x", "Jr", "s"])
    y, Jy, Sy = mlp_jv(layers, act, z0[None], Jr0[None], s0[None], v[None])
    np.testing.assert_allclose(got["x"], y[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["Jr"], Jy[0].ravel(order="F"), rtol=0, atol=1e-12)  # casadi's vec: by column
    np.testing.assert_allclose(got["s"], Sy[0], rtol=0, atol=1e-12)


def test_the_tracer_refuses_what_it_cannot_print():
    prog = Program("t")
    a = prog.input("a", 3)
    with pytest.raises(NotImplementedError, match=r"\[:, None\]"):
        a[0]
    with pytest.raises(NotImplementedError, match="bm,bmn->bn"):
        Arr.array_ops.einsum("bi,bi->b", a, a)
    with pytest.raises(ValueError, match="finite"):
        a * float("nan")
    with pytest.raises(ValueError, match="batch of one"):
        Arr(prog, (2, 3), name="b")
    with pytest.raises(ValueError, match="mismatched shapes"):
        Arr.array_ops.affine(a, np.ones((2, 4)), np.zeros(2))
    with pytest.raises(ValueError, match="mismatched shapes"):
        Arr.array_ops.einsum("bm,bmn->bn", prog.input("v", 2), prog.input("J", 3, 4))
    with pytest.raises(ValueError, match="number 0"):
        a / 0
    with pytest.raises(TypeError):  # numpy's arrays do not take traced operands (an object array of them)
        a * np.ones((1, 3))
