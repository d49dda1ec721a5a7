"""The motion outputs (mc2fmu/models/motion.py) against Exudyn, and their printed C.

The description is evaluated on the natural coordinates of Exudyn's own poses and velocities
(exact, no model in between) and compared with the engine's sensors: the body origin's
velocity (its COM velocity and angular velocity carried to the origin), the angular velocity,
the kinetic energy, and gravity's plus the springs' potential computed from the engine's poses
and the mechanism's masses.  The native FMU's copy of it (printed C, its complex-step
derivatives) is compared in tests/test_native.py (every output, every directional derivative).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mc2fmu.mechanics.mechanism import load_mechanism
from mc2fmu.mechanics.natural import build_layout, nc_from_poses, nc_velocity, spring_model
from mc2fmu.mechanics.variants import parameter_vector
from mc2fmu.models import expr, motion


@pytest.mark.parametrize("name", ["four_bar", "spatial_four_bar", "macpherson"])
def test_motion_outputs_equal_exudyn(reference_run, name):
    """Planar, spatial, and with springs and an off-centre body frame: velocities and angular
    velocities to 1e-12 of their largest magnitude, energies to 1e-10 of the largest kinetic
    energy (the engine's kinetic energy sensor; the potential from its poses)."""
    from examples import reference

    run = reference_run(name, "train")
    mech = load_mechanism(Path(run["path"]).parent.parent / "mechanism.toml")
    layout = build_layout(mech)
    sl = slice(0, 2001)
    rotation, omega, v_com = run["rotation"][sl], run["omega"][sl], run["velocity_com"][sl]
    x = nc_from_poses(layout, run["origin"][sl], rotation)
    xd = nc_velocity(layout, rotation, v_com, omega)
    springs = spring_model(mech, layout)
    out = motion.evaluate(motion.MotionGeometry.of(layout, springs.D, springs.e), x, xd, parameter_vector(mech))
    nb = len(layout.bodies)
    assert out.shape == (len(x), 6 * nb + 2)
    per_body = out[:, :6 * nb].reshape(-1, nb, 6)
    com = np.array([b.com for b in mech.bodies])
    com_global = np.einsum("tbij,bj->tbi", rotation, com)
    v_origin = v_com - np.cross(omega, com_global)
    assert np.abs(per_body[..., :3] - v_origin).max() <= 1e-12 * np.abs(v_origin).max()
    assert np.abs(per_body[..., 3:] - omega).max() <= 1e-12 * np.abs(omega).max()
    model = reference.model(name)
    ke = run["kinetic_energy"][sl]
    gravity = np.asarray(model.gravity, dtype=float)
    pe = -np.einsum("b,tbi,i->t", [b.mass for b in model.bodies], run["origin"][sl] + com_global, gravity)
    if model.springs:
        lengths, _ = reference.spring_states(model, {k: (v[sl] if isinstance(v, np.ndarray) and len(v) == len(run["t"])
                                                          else v) for k, v in run.items()})
        for i, s in enumerate(model.springs):
            pe = pe + 0.5 * s.stiffness * (lengths[:, i] - s.length) ** 2
    assert np.abs(out[:, -2] - ke).max() <= 1e-10 * ke.max()
    assert np.abs(out[:, -1] - pe).max() <= 1e-10 * ke.max()
    assert np.ptp(pe) > 1e-3 * ke.max()  # the potential moves: the comparison means something


def test_motion_outputs_follow_the_physical_parameters():
    """The energies read theta, not the exported mechanism: doubling every mass and inertia
    doubles both energies (gravity's potential is linear in the masses; no springs here)."""
    mech = load_mechanism("examples/four_bar/mechanism.toml")
    layout = build_layout(mech)
    springs = spring_model(mech, layout)
    geometry = motion.MotionGeometry.of(layout, springs.D, springs.e)
    rng = np.random.default_rng(3)
    x, xd = rng.normal(size=(5, layout.size)), rng.normal(size=(5, layout.size))
    theta = parameter_vector(mech)
    heavy = theta.copy()
    for b in range(len(mech.bodies)):
        heavy[10 * b] *= 2.0
        heavy[10 * b + 4: 10 * b + 10] *= 2.0
    base, doubled = motion.evaluate(geometry, x, xd, theta), motion.evaluate(geometry, x, xd, heavy)
    assert np.allclose(doubled[:, -2:], 2.0 * base[:, -2:], rtol=1e-13, atol=0)
    assert np.array_equal(doubled[:, :-2], base[:, :-2])  # velocities do not depend on the masses


def test_traced_graph_computes_what_numpy_computes():
    """The graph the C is printed from (hash-consed, constants folded) evaluates to numpy's
    numbers at random states, with springs (their square roots) included."""
    mech = load_mechanism("examples/macpherson/mechanism.toml")
    layout = build_layout(mech)
    springs = spring_model(mech, layout)
    assert len(springs) > 0
    geometry = motion.MotionGeometry.of(layout, springs.D, springs.e)
    theta = parameter_vector(mech)
    graph = motion.traced(geometry, layout.size, len(theta))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, layout.size)) + 1.0
    xd = rng.normal(size=(7, layout.size))
    got = np.stack(expr.evaluate(graph, {"x": list(x.T), "xd": list(xd.T), "theta": list(theta)}), axis=1)
    assert np.allclose(got, motion.evaluate(geometry, x, xd, theta), rtol=1e-14, atol=1e-14)
    code = expr.emit_c(graph)
    assert code.count("out[") == geometry.n_outputs and "MC2FMU_SQRT" in code


def test_expression_simplification_and_sharing():
    """0 a = 0, 1 a = a, 0 + a = a, constants fold, equal subexpressions are one node; a
    non-finite constant and a division by the constant 0 are refused."""
    a, b = expr.inputs("v", 2)
    assert (0.0 * a).is_const(0.0) and (1.0 * a) is a and (a + 0.0) is a and (a - 0.0) is a
    assert (expr.Expr.wrap(2.0) * 3.0).value == 6.0
    assert (a * b + 1.0) is (a * b + 1.0)
    assert -(-a) is a
    assert expr.emit_c([a * b + a * b]).count("v[0] * v[1]") == 1
    with pytest.raises(ValueError):
        a * float("nan")
    with pytest.raises(ZeroDivisionError):
        a / 0.0


def _scaled_difference(got: np.ndarray, want: np.ndarray, names: list[str]) -> float:
    """The largest difference, per kind of output (velocities, angular velocities, each energy),
    relative to that kind's largest magnitude (a pivoted body's origin velocity is zero to
    rounding: a per-output scale would divide rounding by rounding)."""
    kinds = [n.rsplit(".", 1)[-1][0] if "." in n else n for n in names]
    worst = 0.0
    for k in set(kinds):
        cols = [i for i, kk in enumerate(kinds) if kk == k]
        scale = np.abs(want[:, cols]).max()
        assert scale > 0, k
        worst = max(worst, float(np.abs(got[:, cols] - want[:, cols]).max() / scale))
    return worst


@pytest.mark.parametrize("name,states", [("four_bar", 20), ("macpherson_nl", 4)])
def test_every_target_computes_the_same_motion_outputs(trained, native, tmp_path, name, states):
    """The native FMU (fmpy, model exchange: set the states, read the outputs), the CasADi
    function and the Modelica model (pymoca) give numpy's motion outputs at 20 states of the
    training run's rollout (macpherson_nl, with a spring-damper whose learned law's potential
    is in the energy: 4; pymoca's model takes seconds a state there), the FMU and CasADi to
    1e-12, Modelica to 1e-9 of each kind's largest magnitude (issue 45's acceptance: 1e-9)."""
    pytest.importorskip("casadi")
    pytest.importorskip("pymoca")
    from mc2fmu.control.casadi_export import casadi_model
    from mc2fmu.data.poses import read_run
    from mc2fmu.mechanics.natural import nc_from_poses
    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.simulate import simulate_run
    from tests.fmu_helpers import run_json, start_values
    from tests.modelica_host import CompiledModel

    model_dir, _, run_path = trained(name)
    art = load_artifact(model_dir)
    run = read_run(run_path, art.mechanism)
    res = simulate_run(art, nc_from_poses(art.layout, run.origin, run.rotation), run.u)
    ok = np.flatnonzero(np.isfinite(res["q"]).all(axis=1) & (res["envelope"] <= 1.0))
    pick = ok[np.linspace(0, len(ok) - 1, states).astype(int)]
    q, qd, u = res["q"][pick], res["qd"][pick], run.u[pick]
    names = [n for n, _, _ in motion.output_names(art.mechanism.body_names)]
    x, J, _ = art.model.decode_jh(q)
    springs = art.model.springs
    want = motion.evaluate(motion.MotionGeometry.of(art.layout, springs.D, springs.e, springs.laws), x,
                           np.einsum("bnm,bm->bn", J, qd), parameter_vector(art.mechanism))

    fmu = native(name, 2, "me")[0]
    got = run_json(Path(__file__).with_name("fmpy_sim.py"), {"kind": "jacobian", "fmu": str(fmu),
                                                            "start": start_values(model_dir),
                                                            "states": np.hstack([q, qd]).tolist(), "u": u.tolist()},
                   tmp_path)
    idx = [got["unknowns"].index(n) for n in names]
    assert _scaled_difference(np.array(got["values"])[:, idx], want, names) <= 1e-12
    # physical parameters set in the FMU reach the energies (the first body heavier, gravity tilted)
    from mc2fmu.mechanics.variants import parameter_names

    theta = parameter_vector(art.mechanism).copy()
    slots = parameter_names(art.mechanism)
    g_y = slots.index("gravity[2]")
    theta[0] *= 1.5
    theta[g_y] += 0.7
    changed = {slots[0]: float(theta[0]), slots[g_y]: float(theta[g_y])}
    got = run_json(Path(__file__).with_name("fmpy_sim.py"), {"kind": "jacobian", "fmu": str(fmu),
                                                            "start": {**start_values(model_dir), **changed},
                                                            "states": np.hstack([q, qd]).tolist(), "u": u.tolist()},
                   tmp_path)
    moved = motion.evaluate(motion.MotionGeometry.of(art.layout, springs.D, springs.e, springs.laws), x,
                            np.einsum("bnm,bm->bn", J, qd), theta)
    assert not np.allclose(moved[:, -2:], want[:, -2:], rtol=1e-3)
    assert _scaled_difference(np.array(got["values"])[:, idx], moved, names) <= 1e-12

    fn = casadi_model(art)
    cas = np.array([np.asarray(fn(q[k], qd[k], u[k])[2]).ravel() for k in range(len(q))])
    assert _scaled_difference(cas, want, names) <= 1e-12

    mo = tmp_path / "ReducedModel.mo"
    export_modelica(model_dir, mo)
    cm = CompiledModel(mo)
    p = cm.parameter_vector()
    outs = [cm.outputs(q[k], qd[k], u[k], p) for k in range(len(q))]
    mod = np.array([[o[n.replace(".", "_")][0] for n in names] for o in outs])
    assert _scaled_difference(mod, want, names) <= 1e-9


def test_the_native_velocities_without_the_low_rank_factor_are_numpys(trained, tmp_path, monkeypatch):
    """The native C's ``xd`` has two paths: through the output layer's low-rank factor
    (``MC2FMU_NXD`` > 0, every bundled model) and, where that is not cheaper, the full output
    layer (``MC2FMU_NXD`` 0).  The second, forced, gives numpy's motion outputs to 1e-12 too."""
    import zipfile

    from mc2fmu.data.poses import read_run
    from mc2fmu.fmu.backends import native as native_backend
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.natural import nc_from_poses
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.simulate import simulate_run
    from tests.fmu_helpers import run_json, start_values

    monkeypatch.setattr(native_backend, "velocity_factor", lambda SW: None)
    model_dir, _, run_path = trained("four_bar")
    fmu = tmp_path / "full.fmu"
    summary = export_fmu(model_dir, fmu, "native", 2, "me")
    assert summary["compiler_warnings"] == []
    with zipfile.ZipFile(fmu) as z:
        sources = "".join(z.read(n).decode() for n in z.namelist() if n.startswith("sources/") and n.endswith((".c", ".h")))
    assert "#define MC2FMU_NXD 0 " in sources and "mc2fmu_xd_U[" not in sources  # the full layer's path
    art = load_artifact(model_dir)
    run = read_run(run_path, art.mechanism)
    res = simulate_run(art, nc_from_poses(art.layout, run.origin, run.rotation), run.u)
    ok = np.flatnonzero(np.isfinite(res["q"]).all(axis=1))
    pick = ok[np.linspace(0, len(ok) - 1, 12).astype(int)]
    q, qd, u = res["q"][pick], res["qd"][pick], run.u[pick]
    names = [n for n, _, _ in motion.output_names(art.mechanism.body_names)]
    x, J, _ = art.model.decode_jh(q)
    springs = art.model.springs
    want = motion.evaluate(motion.MotionGeometry.of(art.layout, springs.D, springs.e, springs.laws), x,
                           np.einsum("bnm,bm->bn", J, qd), parameter_vector(art.mechanism))
    got = run_json(Path(__file__).with_name("fmpy_sim.py"), {"kind": "jacobian", "fmu": str(fmu),
                                                            "start": start_values(model_dir),
                                                            "states": np.hstack([q, qd]).tolist(), "u": u.tolist()},
                   tmp_path)
    idx = [got["unknowns"].index(n) for n in names]
    assert _scaled_difference(np.array(got["values"])[:, idx], want, names) <= 1e-12


def test_printed_expressions_nest_at_most_max_depth():
    """A sum of 500 terms prints as temporaries, none nested deeper than MAX_DEPTH parentheses
    (pymoca's parser gave up between 160 and 163; the a02 chain's energies are such sums)."""
    xs = expr.inputs("x", 500)
    total = 0.0
    for k, a in enumerate(xs):
        total = total + (k + 1.5) * a * a
    for code in (expr.emit_c([total]), expr.emit_python([total], "f", ("x",)),
                 "\n".join(expr.emit_modelica([total], lambda n, i: f"x[{i + 1}]", "t")[1])):
        for line in code.splitlines():
            level = deepest = 0
            for ch in line:
                level += (ch == "(") - (ch == ")")
                deepest = max(deepest, level)
            assert deepest <= expr.MAX_DEPTH + 2, line[:80]
    rng = np.random.default_rng(1)
    values = rng.normal(size=500)
    namespace: dict = {}
    exec("import math\n" + expr.emit_python([total], "f", ("x",)), namespace)
    assert namespace["f"](list(values))[0] == pytest.approx(sum((k + 1.5) * v * v for k, v in enumerate(values)),
                                                            rel=1e-14)


def test_energies_equal_the_mass_matrix_and_gravity_of_other_parameters():
    """At parameters with every centre of mass moved off the layout's, other inertias, gravity
    and spring constants: kinetic energy = 1/2 xd^T (A (x) I3) xd and potential = -f_g . x +
    sum k (l - L0)^2 / 2, with A and f_g from mc2fmu.mechanics.parameters.physics_arrays (the
    mass matrix the dynamics use), at random states."""
    from mc2fmu.mechanics.parameters import physics_arrays

    mech = load_mechanism("examples/macpherson/mechanism.toml")
    layout = build_layout(mech)
    springs = spring_model(mech, layout)
    geometry = motion.MotionGeometry.of(layout, springs.D, springs.e)
    rng = np.random.default_rng(5)
    theta = parameter_vector(mech).copy()
    nb = len(mech.bodies)
    for b in range(nb):
        theta[10 * b] *= 1.0 + rng.uniform(0.1, 0.5)
        theta[10 * b + 1: 10 * b + 4] += rng.uniform(-0.02, 0.02, 3)
        theta[10 * b + 4: 10 * b + 7] *= 1.2
    theta[10 * nb: 10 * nb + 3] = [0.5, -1.0, -9.0]
    theta[10 * nb + 3:] *= 1.1
    blocks, f_g, k, _, L0 = physics_arrays(theta, [b.length for b in layout.bodies], [b.com for b in layout.bodies])
    M = np.zeros((layout.size, layout.size))
    for b, bl in enumerate(layout.bodies):
        M[bl.slice, bl.slice] = np.kron(blocks[b], np.eye(3))
    x = rng.normal(size=(6, layout.size))  # the energies are defined for any x, rigid or not
    xd = rng.normal(size=x.shape)
    out = motion.evaluate(geometry, x, xd, theta)
    ke = 0.5 * np.einsum("ti,ij,tj->t", xd, M, xd)
    lengths = np.linalg.norm(np.einsum("sij,tj->tsi", springs.D, x) + springs.e, axis=-1)
    pe = -x @ f_g + (0.5 * k * (lengths - L0) ** 2).sum(axis=1)
    assert np.allclose(out[:, -2], ke, rtol=1e-12, atol=0)
    assert np.allclose(out[:, -1], pe, rtol=1e-12, atol=1e-12 * np.abs(pe).max())


def test_a_learned_laws_potential_is_the_engines_spring_energy(trained, reference_run):
    """macpherson_nl's strut is progressive (1400 s + 6e5 s^3 N, Exudyn's own spring); the model
    knows only its exported tension, from which it learned the law.  On the engine's poses of
    the training run, the potential energy output (gravity, the file's linear part and the
    learned law's potential) equals the engine's gravity plus the true spring's 1/2 k s^2 +
    1/4 c3 s^4 up to a constant, within 1 % of the largest kinetic energy; without the law's
    term it is 10x further off (the comparison means something); and the law's potential (the
    learnt one, and a law saved before as g with its quadrature) equals adaptive quadrature of
    its g (scipy) to 1e-9 J over the recorded lengths (1.7 J at most)."""
    from dataclasses import replace

    from scipy.integrate import quad

    from examples import reference
    from mc2fmu.models.artifact import load_artifact

    art = load_artifact(trained("macpherson_nl")[0])
    springs = art.model.springs
    assert springs.laws is not None and len(springs.laws) == 1
    run = reference_run("macpherson_nl", "train")
    layout = art.layout
    x = nc_from_poses(layout, run["origin"], run["rotation"])
    xd = nc_velocity(layout, run["rotation"], run["velocity_com"], run["omega"])
    theta = parameter_vector(art.mechanism)
    out = motion.evaluate(motion.MotionGeometry.of(layout, springs.D, springs.e, springs.laws), x, xd, theta)
    linear_only = motion.evaluate(motion.MotionGeometry.of(layout, springs.D, springs.e), x, xd, theta)
    engine = reference.energy_balance(reference.model("macpherson_nl"), run)
    ke = engine["kinetic"].max()

    def off(pe):
        d = pe - engine["potential"]
        return float(np.abs(d - d.mean()).max())

    print(f"potential off the engine by {off(out[:, -1]) / ke:.2e} of the largest kinetic energy, without the law "
          f"{off(linear_only[:, -1]) / ke:.2e}")
    assert off(out[:, -1]) <= 1e-2 * ke
    assert off(linear_only[:, -1]) >= 10 * off(out[:, -1])
    law = springs.laws.laws[0]
    assert law.form == "potential"
    lengths = np.linalg.norm(np.einsum("ij,tj->ti", springs.D[0], x) + springs.e[0], axis=1)
    # the learnt potential, and the quadrature of a law saved before (its network read as g)
    for each in (law, replace(law, form="tension")):
        for length in np.linspace(lengths.min(), lengths.max(), 9):
            g = lambda v: float(each.elastic(np.array([v]))[0])  # noqa: E731
            exact = quad(g, float(each.norm[0]), length, epsabs=1e-13, epsrel=1e-13)[0]
            assert abs(float(each.potential(np.array([length]))[0]) - exact) <= 1e-9


def test_two_learned_laws_on_two_springs_in_the_native_fmu(trained, tmp_path):
    """The native C picks each spring's law (mc2fmu_law_of_spring) and prints one potential
    per law: macpherson_nl with its strut doubled (a second spring, its law on spring 1: the
    first law with its tensions scaled by 1.5, saved in the form of models before learnt
    potentials, its network read as g and its potential a quadrature) gives numpy's motion
    outputs to 1e-12, compiles without a warning, and each law's potential is in the energy
    (against the model with none), in simulate's outputs too."""
    from dataclasses import replace

    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.models.artifact import load_artifact, save_artifact
    from mc2fmu.models.envelope import sample_points
    from tests.fmu_helpers import run_json, start_values

    art = load_artifact(trained("macpherson_nl")[0])
    sp, law = art.model.springs, art.model.springs.laws.laws[0]
    second = replace(law, spring=1, norm=np.asarray(law.norm, dtype=float) * np.array([1.0, 1.0, 1.0, 1.5, 1.0]),
                     form="tension")
    two = lambda a: np.concatenate([a, a])  # noqa: E731
    springs = replace(sp, D=two(sp.D), e=two(sp.e), k=two(sp.k), c=two(sp.c), L0=two(sp.L0),
                      laws=replace(sp.laws, laws=(law, second), n_springs=2))
    mech = replace(art.mechanism, springs=(art.mechanism.springs[0], replace(art.mechanism.springs[0], name="strut_b")))
    model_dir = save_artifact(tmp_path / "two-laws", replace(art, mechanism=mech, model=replace(art.model, springs=springs)))
    two_art = load_artifact(model_dir)
    assert [each.form for each in two_art.model.springs.laws.laws] == ["potential", "tension"]
    summary = export_fmu(model_dir, tmp_path / "two.fmu", "native", 2, "me")
    assert summary["compiler_warnings"] == []
    points = sample_points(two_art.envelope, two_art.model, 4, seed=3)
    q = np.concatenate([pt["q"] for pt in points])
    qd = np.concatenate([pt["qd"] for pt in points])
    u = np.concatenate([pt["u"] for pt in points])
    x, J, _ = two_art.model.decode_jh(q)
    xd = np.einsum("bnm,bm->bn", J, qd)
    theta = parameter_vector(two_art.mechanism)
    want = motion.evaluate(motion.MotionGeometry.of(two_art.layout, springs.D, springs.e, springs.laws), x, xd, theta)
    none = motion.evaluate(motion.MotionGeometry.of(two_art.layout, springs.D, springs.e), x, xd, theta)
    lengths = np.linalg.norm(np.einsum("ij,tj->ti", springs.D[0], x) + springs.e[0], axis=1)
    laws_part = law.potential(lengths) + second.potential(lengths)
    assert np.allclose(want[:, -1] - none[:, -1], laws_part, rtol=1e-12, atol=1e-12)
    assert np.abs(laws_part).max() > 1e-6
    from mc2fmu.models.simulate import motion_series  # simulate's outputs: the same energy

    assert np.array_equal(motion_series(two_art, q, qd)["potential_energy"], want[:, -1])
    got = run_json(Path(__file__).with_name("fmpy_sim.py"), {"kind": "jacobian", "fmu": str(tmp_path / "two.fmu"),
                                                            "start": start_values(model_dir),
                                                            "states": np.hstack([q, qd]).tolist(), "u": u.tolist()},
                   tmp_path)
    names = [n for n, _, _ in motion.output_names(two_art.mechanism.body_names)]
    idx = [got["unknowns"].index(n) for n in names]
    assert _scaled_difference(np.array(got["values"])[:, idx], want, names) <= 1e-12


def test_the_python_fmus_printed_motion_outputs_carry_the_law(trained):
    """The python FMU's slave computes the motion outputs with a function printed from the same
    description (fmu/backends/python.py: _motion_source); for macpherson_nl its potential
    energy carries the learned law's part: numpy's outputs to 1e-12 at random states near the
    training data, and not the outputs without the law."""
    import math
    import textwrap

    from mc2fmu.fmu.backends.python import _motion_source
    from mc2fmu.models.artifact import load_artifact

    art = load_artifact(trained("macpherson_nl")[0])
    namespace: dict = {"math": math}
    exec(textwrap.dedent(_motion_source(art, True)), namespace)
    springs = art.model.springs
    rng = np.random.default_rng(4)
    q = art.model.encode(art.model.decode(np.zeros((1, art.dof)))) + rng.normal(scale=0.01, size=(5, art.dof))
    x, J, _ = art.model.decode_jh(q)
    xd = np.einsum("bnm,bm->bn", J, rng.normal(size=q.shape))
    theta = parameter_vector(art.mechanism)
    want = motion.evaluate(motion.MotionGeometry.of(art.layout, springs.D, springs.e, springs.laws), x, xd, theta)
    none = motion.evaluate(motion.MotionGeometry.of(art.layout, springs.D, springs.e), x, xd, theta)
    got = np.array([namespace["_motion_outputs"](list(x[k]), list(xd[k]), list(theta)) for k in range(len(x))])
    assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()
    assert np.abs(want[:, -1] - none[:, -1]).min() > 1e-9


def _free_run_energy(art, x0: np.ndarray, u0: np.ndarray, seconds: float, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Total energy (kinetic + potential, motion outputs) and kinetic energy of ``art``'s model
    stepped at ``dt`` from the state of the NC samples ``x0`` (3, n), the input held at
    ``u0`` (global forces only: their potential ``-(f_B u0) . x`` is added)."""
    from dataclasses import replace

    from mc2fmu.models.simulate import motion_series, trajectory

    model = replace(art.model, dt=dt)
    q0, qd0 = art.initial_state_of(x0)
    n = int(round(seconds / dt)) + 1
    res = trajectory(model, q0, qd0, np.tile(u0, (n, 1)))
    assert np.isfinite(res["q"]).all()
    out = motion_series(replace(art, model=model), res["q"], res["qd"])
    load = res["x"] @ (model.f_B @ u0)
    return out["kinetic_energy"] + out["potential_energy"] - load, out["kinetic_energy"]


@pytest.mark.parametrize("name", ["four_bar", "macpherson"])
def test_an_undamped_free_run_conserves_the_output_energy_at_the_step_maps_order(trained, reference_run, name):
    """The reduced ODE of any decoder is Lagrangian (``M_q = J^T M J``, gravity and springs
    conservative), so without damping the energy the motion outputs report is conserved up to
    the step map's error: halving the step divides the largest drift by 2^order (the centred
    map: 4).  A wrong kinetic energy (e.g. without the centre-of-mass offset), a wrong sign of
    gravity's potential or a spring's energy that is not its force's potential would not
    converge.  Four-bar (gravity; its input a torque, held at zero) and the MacPherson strut
    with its damping set to zero (spring and gravity; its vertical load held at the run's
    mean, whose potential is added)."""
    from dataclasses import replace

    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.step_maps import get_step_map

    model_dir, _, run_path = trained(name)
    art = load_artifact(model_dir)
    mech = art.mechanism
    if mech.springs:
        art, diffs = art.for_mechanism(replace(mech, springs=tuple(replace(s, damping=0.0) for s in mech.springs)),
                                       "undamped")
        assert diffs
    assert not np.any(art.model.springs.c) if art.model.springs is not None else True
    run = reference_run(name, "train")
    x = nc_from_poses(art.layout, run["origin"], run["rotation"])
    global_force = ~np.any(art.model.f_C.reshape(art.n_u, -1), axis=1) if art.n_u else np.zeros(0, bool)
    u0 = np.where(global_force, run["u"].mean(axis=0), 0.0)
    drifts = []
    for f in (1, 2, 4):
        e, kin = _free_run_energy(art, x[200:203], u0, 0.25, art.dt / f)
        assert kin.max() > 1e-3 * run["kinetic_energy"].max()  # it moves
        drifts.append(np.abs(e - e[0]).max() / kin.max())
    order = get_step_map(art.model.step_map_name).order
    observed = np.log2(np.array(drifts[:-1]) / np.array(drifts[1:]))
    assert np.all(np.abs(observed - order) < 0.2), (drifts, observed)
    assert drifts[0] < 1e-2


def test_simulate_writes_velocities_that_differentiate_its_positions(trained, tmp_path):
    """`mc2fmu simulate`'s motion columns: the origin velocities equal the central difference
    of the written origins, the angular velocities that of the written rotations
    (``[w]x = R' R^T``), to 1e-3 of their rms (the difference's own error is O(dt^2))."""
    from mc2fmu.cli import main
    from mc2fmu.data.poses import _read_table
    from mc2fmu.mechanics.rotations import quaternion_to_matrix

    model_dir, mech_path, run_path = trained("four_bar")
    out = tmp_path / "sim.csv"
    assert main(["simulate", str(model_dir), str(mech_path), str(run_path), "-o", str(out)]) == 0
    columns, values = _read_table(out)
    table = dict(zip(columns, values.T))
    mech = load_mechanism(mech_path)
    t = table["time"]
    dt = t[1] - t[0]
    n = min(len(t), 3000)
    v, fd, w, w_fd = [], [], [], []
    for b in mech.body_names:
        p = np.stack([table[f"{b}.{c}"][:n] for c in "xyz"], axis=1)
        v.append(np.stack([table[f"{b}.v{c}"][1:n - 1] for c in "xyz"], axis=1))
        fd.append((p[2:] - p[:-2]) / (2 * dt))
        R = quaternion_to_matrix(np.stack([table[f"{b}.q{c}"][:n] for c in "wxyz"], axis=1))
        W = np.einsum("tij,tkj->tik", (R[2:] - R[:-2]) / (2 * dt), R[1:-1])
        w_fd.append(np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=1))
        w.append(np.stack([table[f"{b}.w{c}"][1:n - 1] for c in "xyz"], axis=1))
    # one scale for all bodies: the written origin is the polar factor's (poses_from_nc), the
    # velocity the rate of the points' affine combination; for a decoded x that is not exactly
    # rigid (this briefly trained model: ~1e-4 of the motion) they differ by that much
    for got, want in ((np.array(v), np.array(fd)), (np.array(w), np.array(w_fd))):
        rms = np.sqrt(np.mean(want ** 2))
        assert rms > 0
        assert np.sqrt(np.mean((got - want) ** 2)) <= 1e-3 * rms
    assert np.isfinite(table["kinetic_energy"][:n]).all() and np.isfinite(table["potential_energy"][:n]).all()
