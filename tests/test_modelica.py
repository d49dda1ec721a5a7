"""``mc2fmu export --format modelica``: the reduced model as Modelica source.

The references are independent readings of the file: pymoca compiles it to CasADi
(tests/modelica_host.py evaluates what pymoca made of the equations), rumoca parses and
flattens it; both are compared with the native model-exchange FMU (generated C, run by fmpy)
and with the model's own numpy dynamics."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.errors import ExportError

pytest.importorskip("pymoca")
pytest.importorskip("casadi")

HERE = Path(__file__).parent
FMPY_SIM = HERE / "fmpy_sim.py"
EXAMPLE = HERE.parent / "examples" / "modelica"

#: decoder-manifold models of every feature the export writes: 1 and 2 DOF, springs, identified
#: terms, a learned law (benchmarks/modelica.py checks the seven suite mechanisms' default models)
CASES = ["four_bar", "two_bar", "macpherson", "four_bar_friction", "macpherson_nl"]


def _states(art, count: int, seed: int):
    from mc2fmu.models.envelope import sample_points

    pts = sample_points(art.envelope, art.model, count, seed=seed)
    return (np.concatenate([p["q"] for p in pts]), np.concatenate([p["qd"] for p in pts]),
            np.concatenate([p["u"] for p in pts]))


def _modelica_parameters(fmu_values: dict[str, float], cm) -> dict[str, list | float]:
    """FMU parameter values by FMU name (``rocker.com[2]``) as the Modelica file's parameters
    (``rocker_com``, an array)."""
    out: dict[str, list | float] = {}
    for name, v in fmu_values.items():
        base, idx = re.fullmatch(r"(.+?)(?:\[(\d+)\])?", name).groups()
        key = base.replace(".", "_")
        if idx is None:
            out[key] = v
        else:
            arr = out.get(key, list(np.ravel(cm.params[key].value)))
            arr[int(idx) - 1] = v
            out[key] = arr
    return out


@pytest.mark.parametrize("name", CASES)
def test_pymoca_compiles_the_export_and_its_dynamics_equal_the_me_fmus(trained, tmp_path, name):
    """A model of each feature exports; pymoca compiles the file, and its der(qd) equals the native
    model-exchange FMU's (fmpy) to 1e-10 of the largest |qdd| at 8 states over the envelope,
    with the exported parameters and with masses, a centre of mass, gravity and spring
    constants changed in both (FMI parameters / Modelica parameters); its poses equal the FMU's
    outputs; rumoca reads the file with no diagnostic and finds 2 states and the inputs."""
    import rumoca
    from fmpy import read_model_description

    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.mechanism import load_mechanism, mechanism_from_dict
    from mc2fmu.mechanics.variants import parameter_settings
    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.models.artifact import load_artifact
    from tests.fmu_helpers import run_json, start_values
    from tests.modelica_host import CompiledModel

    model, mech, _ = trained(name)
    art = load_artifact(model)
    if name == "four_bar_friction":
        assert art.model.library is not None and len(art.model.library.pruned())
    if name == "macpherson_nl":
        assert art.model.springs.laws is not None and len(art.model.springs.laws.laws)
    mo = tmp_path / "ReducedModel.mo"
    summary = export_modelica(model, mo)
    assert summary["model"] == "ReducedModel" and mo.read_text().count("model ReducedModel ") == 1
    fmu = tmp_path / "me.fmu"
    export_fmu(model, fmu, "native", 3, "me")
    cm = CompiledModel(mo)

    # a variant of every physical parameter the FMU has
    d = load_mechanism(mech).to_dict()
    for k, b in enumerate(d["bodies"]):
        b["mass"] *= 1.0 + 0.25 * (k + 1)
        b["inertia"] = (np.asarray(b["inertia"], dtype=float) * (1.3 + 0.1 * k)).tolist()
    d["bodies"][0]["com"] = (np.asarray(d["bodies"][0]["com"], dtype=float) + [0.01, -0.006, 0.003]).tolist()
    d["gravity"] = (np.asarray(d["gravity"], dtype=float) * 0.9 + [0.8, 0.4, 0.2]).tolist()
    for s in d.get("springs", []):
        s["stiffness"] *= 1.2
        if s.get("law", "linear") != "recorded":
            s["damping"] = s.get("damping", 0.0) * 1.5 + 3.0
        s["length"] *= 1.01
    exposed = {v.name for v in read_model_description(str(fmu)).modelVariables if v.causality == "parameter"}
    settings, _ = parameter_settings(art.mechanism, mechanism_from_dict(d, source="v"), exposed, "v", fmu.name)
    assert settings

    q, qd, u = _states(art, 8, seed=7)
    outputs = [f"der(qd[{i + 1}])" for i in range(art.dof)]
    for fmu_values in ({}, settings):
        res = run_json(FMPY_SIM, {"kind": "jacobian", "fmu": str(fmu), "start": {**start_values(model), **fmu_values},
                                  "states": np.hstack([q, qd]).tolist(), "u": u.tolist()}, tmp_path)
        idx = [res["unknowns"].index(o) for o in outputs]
        want = np.array(res["values"])[:, idx]
        p = cm.parameter_vector(_modelica_parameters(fmu_values, cm))
        got = np.array([cm.qdd(q[k], qd[k], u[k], p) for k in range(len(q))])
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= 1e-10 * scale, (name, bool(fmu_values))
    # the poses: the FMU's outputs at the last state (the variant's parameters do not reach them)
    poses = [f"{b.name}.{c}" for b in art.mechanism.bodies for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
    pidx = [res["unknowns"].index(o) for o in poses]
    out = cm.outputs(q[-1], qd[-1], u[-1], p)
    got = np.array([out[o.replace(".", "_")][0] for o in poses])
    assert np.abs(got - np.array(res["values"])[-1, pidx]).max() <= 1e-10

    src = mo.read_text()
    assert rumoca.validate_source(src) == []
    info = rumoca.Session().loads(src, model="ReducedModel").summary()
    assert " 2 states" in info and f"{art.n_u} inputs" in info, info


def test_a_10_s_simulation_equals_the_me_fmu_under_cvode(trained, tmp_path):
    """CasADi's IDAS on pymoca's model and fmpy's CVode on the model-exchange FMU, both with the
    same analytic torque (set at every right-hand-side evaluation), agree on every body origin
    to 1e-7 m over 10 s."""
    import casadi as ca

    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.models.artifact import load_artifact
    from tests.fmu_helpers import run_json, start_values
    from tests.modelica_host import CompiledModel

    from mc2fmu.data.poses import read_run
    from mc2fmu.mechanics.mechanism import load_mechanism

    model, mech, run = trained("four_bar")
    art = load_artifact(model)
    export_modelica(model, tmp_path / "FourBar.mo")
    export_fmu(model, tmp_path / "me.fmu", "native", 2, "me")
    cm = CompiledModel(tmp_path / "FourBar.mo")
    env = art.envelope
    # the training run's first input (its start state is the FMU's default one) plus a sine of
    # an eighth of the training input range
    static = [float(v) for v in read_run(run, load_mechanism(mech)).u[0]]
    amp = [0.12 * (float(env.u_max[k]) - float(env.u_min[k])) for k in range(art.n_u)]
    freq = [0.7 + 0.2 * k for k in range(art.n_u)]
    times = np.linspace(0.0, 10.0, 101)
    start = start_values(model)
    origins = [f"{b.name}.{c}" for b in art.mechanism.bodies for c in "xyz"]
    fm = run_json(FMPY_SIM, {"kind": "me_analytic", "fmu": str(tmp_path / "me.fmu"),
                             "inputs": art.mechanism.input_names, "static": static, "amp": amp, "freq": freq,
                             "times": times.tolist(), "output": origins, "start": start, "rtol": 1e-10}, tmp_path)
    p = cm.parameter_vector()
    x0 = [start[f"q_start[{i + 1}]"] for i in range(art.dof)] + [start[f"qd_start[{i + 1}]"] for i in range(art.dof)]
    sol = cm.simulate(times, x0, lambda t: ca.vertcat(*[s + a * ca.sin(2 * np.pi * f * t)
                                                        for s, a, f in zip(static, amp, freq)]), p)
    y = np.array(fm["y"])
    moved = np.ptp(y, axis=0).max()
    assert moved > 1e-3  # the torque moved the mechanism
    worst = 0.0
    for k in range(0, len(times), 10):
        uk = [s + a * np.sin(2 * np.pi * f * times[k]) for s, a, f in zip(static, amp, freq)]
        out = cm.outputs(sol[k, :art.dof], sol[k, art.dof:], uk, p)
        got = np.array([out[o.replace(".", "_")][0] for o in origins])
        worst = max(worst, float(np.abs(got - y[k]).max()))
    assert worst <= 1e-7, worst


def test_the_example_system_compiles_and_its_pi_loop_holds_the_setpoint(trained, tmp_path):
    """examples/modelica/ReducedPI.mo (a PI position loop with velocity damping around the
    exported model, which it instantiates as ReducedModel) compiles with pymoca, and under IDAS
    the loop takes q[1] to a step of its setpoint: zero steady-state error is what the
    integral action guarantees, whatever the plant."""
    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.models.artifact import load_artifact
    from tests.fmu_helpers import start_values
    from tests.modelica_host import CompiledModel

    model, _, _ = trained("four_bar")
    art = load_artifact(model)
    export_modelica(model, tmp_path / "ReducedModel.mo")
    system = tmp_path / "ReducedPI.mo"
    shutil.copyfile(EXAMPLE / "ReducedPI.mo", system)
    cm = CompiledModel(system, tmp_path / "ReducedModel.mo")
    start = start_values(model)
    q0 = start["q_start[1]"]
    env = art.envelope
    step = 0.15 * (float(env.q_max[0]) - float(env.q_min[0]))
    # the input's effect on der(qd[1]) at the start (the model's own B: the loop's sign and scale)
    a = [art.model.acceleration(np.array([[q0]]), np.zeros((1, 1)), np.array([[v]]))[0, 0] for v in (0.0, 1.0)]
    p = cm.parameter_vector({"q_ref": q0 + step, "input_per_acceleration": 1.0 / (a[1] - a[0])})
    names = cm.state_names
    x0 = np.zeros(cm.nx)
    x0[names.index("plant.q")] = q0
    times = np.linspace(0.0, 12.0, 121)
    sol = cm.simulate(times, x0, None, p, rtol=1e-8)
    q = sol[:, names.index("plant.q")]
    assert abs(q[0] - q0) < 1e-12
    assert abs(q[-1] - (q0 + step)) <= 0.02 * step, (q[-1], q0 + step)
    assert np.abs(sol[-10:, names.index("plant.q")] - (q0 + step)).max() <= 0.02 * step


def test_models_without_continuous_equations_and_bad_names_are_refused(trained, tmp_path):
    """A node model is refused with the capability table's reason; an output file that cannot name a
    Modelica class or is not .mo is refused before anything is written."""
    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.node.config import NodeReducerConfig

    chart, mech, run = trained("four_bar")
    node = tmp_path / "node"
    train(mech, [run], NodeReducerConfig(dof=1, from_model=str(chart), node_hidden=(8,), node_epochs=2), node,
          reducer="node")
    from mc2fmu.capabilities import KINDS

    with pytest.raises(ExportError) as err:
        export_modelica(node, tmp_path / "Node.mo")
    assert KINDS["node"].refused["modelica"] in str(err.value)
    for bad in ("four-bar.mo", "model.mo", "1st.mo"):
        with pytest.raises(ExportError, match="cannot name a Modelica model"):
            export_modelica(chart, tmp_path / bad)
    with pytest.raises(ExportError, match="a .mo file"):
        export_modelica(chart, tmp_path / "FourBar.txt")
    assert not list(tmp_path.glob("*.mo")) and not list(tmp_path.glob("*.part"))


def _edited_copy(model: Path, folder: Path, edit) -> Path:
    """A copy of a model directory with its model.json edited."""
    import json

    out = folder / model.name
    shutil.copytree(model, out)
    data = json.loads((out / "model.json").read_text())
    edit(data)
    (out / "model.json").write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("activation", ["sigmoid", "softplus"])
def test_other_activations_are_written_as_the_model_computes_them(trained, tmp_path, activation):
    """The decoder's activation and its two derivatives as written for pymoca equal the numpy
    model's accelerations (the suite's models are tanh: the same weights are read with another
    activation, which is a valid, if untrained, model)."""
    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.models.artifact import load_artifact
    from tests.modelica_host import CompiledModel

    model = _edited_copy(trained("two_bar")[0], tmp_path,
                         lambda d: d["model"]["decoder"].update(activation=activation))
    art = load_artifact(model)
    assert art.model.decoder.activation == activation
    export_modelica(model, tmp_path / "Act.mo")
    cm = CompiledModel(tmp_path / "Act.mo")
    q, qd, u = _states(art, 6, seed=3)
    want = art.model.acceleration(q, qd, u)
    p = cm.parameter_vector()
    got = np.array([cm.qdd(q[k], qd[k], u[k], p) for k in range(len(q))])
    assert np.abs(got - want).max() <= 1e-10 * np.abs(want).max()


@pytest.mark.parametrize("name", ["sin", "x"])
def test_a_mechanism_name_modelica_cannot_declare_is_refused_naming_it(trained, tmp_path, name):
    """An input named like a built-in function, or like a variable the model declares for
    itself, is refused with the name and the fix, and nothing is written."""
    from mc2fmu.modelica.export import export_modelica

    model = _edited_copy(trained("four_bar")[0], tmp_path, lambda d: d["mechanism"]["inputs"][0].update(name=name))
    with pytest.raises(ExportError, match=rf"'{name}' (is a Modelica keyword or built-in|would be declared twice)"):
        export_modelica(model, tmp_path / "Bad.mo")
    assert not (tmp_path / "Bad.mo").exists()


def test_the_harness_unwraps_no_event_calls_only():
    """tests/modelica_host.py's ``noEvent`` unwrapping (pymoca 0.12 knows no ``noEvent``): calls,
    nested ones and a space before the parenthesis are unwrapped; a string literal, a name that
    ends in ``noEvent`` and text around them are left alone; an unbalanced call is an error."""
    from tests.modelica_host import without_no_event

    text = 'y = if noEvent(a[1] > (b * c)) then 1 else noEvent (noEvent(k) > 2); "noEvent(x) \\" z" xnoEvent(q);'
    assert without_no_event(text) == 'y = if (a[1] > (b * c)) then 1 else ((k) > 2); "noEvent(x) \\" z" xnoEvent(q);'
    with pytest.raises(AssertionError, match="unbalanced"):
        without_no_event("y = noEvent(a > (b);")
