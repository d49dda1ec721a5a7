"""FMU export: ONNX graphs, the pythonfmu FMU under fmpy (always in a fresh process), the
export/validate/convert CLI.

Models for the machinery tests are small and quickly trained on two mechanisms (their
accuracy does not matter here: parity, stepping and state are properties of the export);
the accuracy of a fully trained FMU is benchmarks/targets.py's (convert-four_bar).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main
from tests.fmu_helpers import run_json, run_misuse, start_values
from tests.oracles import reduced_acceleration

HOST = Path(__file__).with_name("fmu_host.py")
FMPY_SIM = Path(__file__).with_name("fmpy_sim.py")
MECHANISMS = ["four_bar", "slider_crank"]


@pytest.fixture(scope="module")
def exported(reference_run, tmp_path_factory):
    """``exported(name)`` -> (model_dir, fmu_path, mechanism_path, train_run): trained briefly, exported once."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    cache: dict[str, tuple] = {}
    root = tmp_path_factory.mktemp("export")

    def get(name: str):
        if name not in cache:
            run = reference_run(name, "train")
            mech = Path(run["path"]).parent.parent / "mechanism.toml"
            model = root / f"{name}.model"
            fit(mech, [run["path"]], TrainConfig(dof=1, samples=300, adam_epochs=40, lbfgs_iters=40), model)
            fmu = root / f"{name}.fmu"
            export_fmu(model, fmu, "python")
            cache[name] = (model, fmu, mech, run["path"])
        return cache[name]

    return get


# ---------------------------------------------------------------------------- ONNX


@pytest.mark.parametrize("name", MECHANISMS)
def test_onnx_rhs_matches_an_independent_numpy_assembly(exported, tmp_path, name):
    """rhs.onnx against M_m = J^T M J, G_m = J^T M (H:vv), f_m = J^T f(x, J qd, u) assembled here
    in numpy from decoder.onnx's x, J, H, the stored M and the mechanism's force model (springs
    included), and with a physical variant's physics as its inputs against the variant file's
    M and forces; decoder.onnx's J and H against central differences of positions.onnx.  The
    run-time model (numpy, what `simulate` and the native self-check use) against the same
    assembly."""
    from mc2fmu.mechanics.mechanism import mechanism_from_dict
    from mc2fmu.mechanics.natural import force_model, mass_matrix
    from mc2fmu.mechanics.parameters import physics_arrays
    from mc2fmu.mechanics.variants import parameter_vector
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points
    from mc2fmu.reducers.autoencoder.graphs import TOLERANCE, session

    model_dir = exported(name)[0]
    art = load_artifact(model_dir)
    assert max(art.training["onnx_max_difference"].values()) <= TOLERANCE
    for g in ("decoder", "positions", "rhs"):
        (tmp_path / f"{g}.onnx").write_bytes(art.model.resources[f"onnx/{g}.onnx"])
    dec, pos, rhs = (session(tmp_path / f"{g}.onnx") for g in ("decoder", "positions", "rhs"))
    with np.load(Path(model_dir) / "arrays.npz") as w:
        M = w["M"]
    forces = force_model(art.mechanism, art.layout, M)
    # a physical variant: the rhs graph takes its physics as inputs, formed from the parameter
    # vector as a python FMU forms them (physics_arrays); the reference assembles M and the
    # forces from the variant's file (mass_matrix, force_model)
    d = art.mechanism.to_dict()
    for k, b in enumerate(d["bodies"]):
        b["mass"] *= 1.0 + 0.4 * k
        b["inertia"] = (np.asarray(b["inertia"], dtype=float) * (1.3 - 0.1 * k)).tolist()
        b["com"] = (np.asarray(b["com"], dtype=float) + 0.01 * np.array([1.0, -0.5, 0.3]) * (k % 2)).tolist()
    d["gravity"] = (np.asarray(d["gravity"], dtype=float) @ np.array([[0.8, 0.6, 0], [-0.6, 0.8, 0], [0, 0, 1]])
                    ).tolist()
    for sp in d.get("springs", []):
        sp.update(stiffness=1.5 * sp["stiffness"], damping=0.5 * sp.get("damping", 0.0) + 3.0, length=0.97 * sp["length"])
    variant = mechanism_from_dict(d, source="variant")
    M_v = mass_matrix(variant, art.layout)
    forces_v = force_model(variant, art.layout, M_v)
    blocks, f_g, k, c, L0 = physics_arrays(parameter_vector(variant), [b.length for b in art.layout.bodies],
                                           [b.com for b in art.layout.bodies])
    # the load and spring maps, graph inputs too: the variant's from its force model
    taken = {i.name for i in rhs.get_inputs()}
    maps = lambda f: {n: a for n, a in (("f_B", f.f_B), ("f_C", f.f_C), ("spring_D", f.springs.D),  # noqa: E731
                                        ("spring_e", f.springs.e)) if n in taken}
    feed_v = {"mass": blocks, "f_g": f_g, **({"spring_k": k, "spring_c": c, "spring_L0": L0} if len(k) else {}),
              **maps(forces_v)}
    own = {"mass": art.model.mass, "f_g": art.model.f_g,
           **({"spring_k": art.model.springs.k, "spring_c": art.model.springs.c, "spring_L0": art.model.springs.L0}
              if len(k) else {}), **maps(art.model)}
    for p in sample_points(art.envelope, art.model, 8, seed=3):
        x, J, H = (a[0] for a in dec.run(["x", "J", "H"], {"q": p["q"]}))
        u, v = p["u"][0], p["qd"][0]
        for mass, fm, physics in ((M, forces, own), (M_v, forces_v, feed_v)):
            expected = reduced_acceleration(mass, fm, x, J, H, u, v)
            got = rhs.run(["qdd"], {"q": p["q"], "qd": p["qd"], "u": p["u"], **physics})[0][0]
            assert np.allclose(got, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
        numpy_rt = art.model.acceleration(p["q"], p["qd"], p["u"])[0]
        got = rhs.run(["qdd"], {"q": p["q"], "qd": p["qd"], "u": p["u"], **own})[0][0]
        expected = reduced_acceleration(M, forces, x, J, H, u, v)
        assert np.allclose(numpy_rt, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
        assert np.abs(numpy_rt - got).max() <= 1e-12 * max(1.0, np.abs(got).max())
        h = 1e-5
        xp = pos.run(["x"], {"q": p["q"] + h})[0][0]
        xm = pos.run(["x"], {"q": p["q"] - h})[0][0]
        assert np.allclose(x, pos.run(["x"], {"q": p["q"]})[0][0], rtol=0, atol=1e-14)
        assert np.abs((xp - xm) / (2 * h) - J[:, 0]).max() < 1e-7 * max(1.0, np.abs(J).max())
        assert np.abs((xp - 2 * x + xm) / h**2 - H[:, 0, 0]).max() < 1e-3 * max(1.0, np.abs(H).max())


def test_the_export_check_catches_a_graph_that_drifts_from_torch(tmp_path):
    """The exporter's self-check (graphs.check_graph) passes an exact export and flags one whose
    weights differ from torch's by 1e-9 relative (less than float32 rounding, 6e-8)."""
    import torch

    from mc2fmu.reducers.autoencoder.graphs import TOLERANCE, GraphSpec, export_one, check_graph

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    spec = GraphSpec("net", ("q",), ("y",))
    rng = np.random.default_rng(0)
    points = [{"q": rng.normal(size=(1, 3))} for _ in range(8)]
    export_one(net, spec, points[0], tmp_path / "net.onnx")
    assert check_graph(tmp_path / "net.onnx", net, spec, points) <= TOLERANCE
    with torch.no_grad():
        net[2].weight.mul_(1 + 1e-9)
    assert check_graph(tmp_path / "net.onnx", net, spec, points) > 100 * TOLERANCE


def test_a_graph_the_torchscript_exporter_refuses_goes_through_the_dynamo_exporter(tmp_path, monkeypatch):
    """graphs._quiet_export takes the TorchScript exporter first and the dynamo exporter when it
    fails: made to fail, the graph still exports, and equals torch to the check's tolerance."""
    import torch

    from mc2fmu.reducers.autoencoder import graphs

    calls = []
    export = torch.onnx.export

    def failing_torchscript(*args, dynamo=True, **kwargs):
        calls.append(dynamo)
        if not dynamo:
            raise RuntimeError("tracer refused")
        return export(*args, dynamo=dynamo, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", failing_torchscript)
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).double()
    spec = graphs.GraphSpec("net", ("q",), ("y",))
    points = [{"q": np.random.default_rng(k).normal(size=(1, 2))} for k in range(4)]
    graphs.export_one(net, spec, points[0], tmp_path / "net.onnx")
    assert calls == [False, True]
    assert graphs.check_graph(tmp_path / "net.onnx", net, spec, points) <= graphs.TOLERANCE


def _export_spy(monkeypatch, torchscript=None):
    """Record the ``dynamo`` flag of every torch.onnx.export call; ``torchscript(module)``, if
    given, replaces the module the TorchScript exporter sees."""
    import torch

    calls = []
    export = torch.onnx.export

    def spy(module, *args, dynamo=True, **kwargs):
        calls.append(dynamo)
        if not dynamo and torchscript is not None:
            module = torchscript(module)
        return export(module, *args, dynamo=dynamo, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", spy)
    return calls


def test_the_graphs_go_through_the_torchscript_exporter_in_eval_mode(tmp_path, monkeypatch):
    """The normal path: one TorchScript export (dynamo=False), of the module in eval mode, and
    the module's own mode is given back (a module that doubles its output while training
    exports the eval behaviour and stays in training mode)."""
    import onnxruntime as ort
    import torch

    from mc2fmu.reducers.autoencoder import graphs

    class Doubling(torch.nn.Module):
        def forward(self, q):
            return q * (2.0 if self.training else 1.0)

    calls = _export_spy(monkeypatch)
    module = torch.nn.Sequential(Doubling(), Doubling().eval()).train()
    module[1].eval()
    spec = graphs.GraphSpec("net", ("q",), ("y",))
    feed = {"q": np.array([[0.25, -1.5]])}
    graphs.export_one(module, spec, feed, tmp_path / "net.onnx")
    assert calls == [False]
    assert [m.training for m in module.modules()] == [True, True, False]  # every submodule's own mode back
    assert np.array_equal(ort.InferenceSession(str(tmp_path / "net.onnx")).run(None, feed)[0], feed["q"])
    assert graphs.check_graph(tmp_path / "net.onnx", module, spec, [feed]) == 0.0  # checked in eval mode too
    assert [m.training for m in module.modules()] == [True, True, False]


def test_a_graph_that_drops_an_unused_input_goes_through_the_dynamo_exporter(tmp_path, monkeypatch):
    """The TorchScript exporter leaves out an input the module does not read; a graph whose
    inputs are not the spec's (a python FMU feeds them all by name) is taken from the dynamo
    exporter, which keeps it."""
    import onnxruntime as ort
    import torch

    from mc2fmu.reducers.autoencoder import graphs

    class IgnoresU(torch.nn.Module):
        def forward(self, q, u):
            return 3.0 * q

    calls = _export_spy(monkeypatch)
    spec = graphs.GraphSpec("rhs", ("q", "u"), ("qdd",))
    feed = {"q": np.array([[0.5, 2.0]]), "u": np.array([[1.0]])}
    graphs.export_one(IgnoresU(), spec, feed, tmp_path / "rhs.onnx")
    assert calls == [False, True]
    sess = ort.InferenceSession(str(tmp_path / "rhs.onnx"))
    assert [i.name for i in sess.get_inputs()] == ["q", "u"]
    assert np.array_equal(sess.run(None, feed)[0], 3.0 * feed["q"])


def test_a_graph_in_float32_outside_atan2_is_refused_by_the_guard(tmp_path):
    """graphs.graph_problem: a float32 computation with no Atan in it is named; the encoder's
    atan2 (a float32 estimate on purpose) passes; and when every exporter's graph is refused
    the error names each one's reason."""
    import io

    import onnx
    import torch

    from mc2fmu.errors import ExportError
    from mc2fmu.reducers.autoencoder import graphs
    from mc2fmu.reducers.autoencoder.torch_model import atan2

    def traced(module, *args):
        buffer = io.BytesIO()
        names = [f"a{k}" for k in range(len(args))]
        torch.onnx.export(module, args, buffer, input_names=names, output_names=["o"], dynamo=False,
                          opset_version=graphs.OPSET)
        return onnx.load_from_string(buffer.getvalue()), names

    class Float32(torch.nn.Module):
        def forward(self, q):
            return (q.float() * 3.0).double()

    class Atan2(torch.nn.Module):
        def forward(self, y, x):
            return atan2(y, x)

    x = torch.tensor([[0.3, -0.7]], dtype=torch.float64)
    proto, names = traced(Float32(), x)
    problem = graphs.graph_problem(proto, names, ["o"])
    assert problem is not None and "float32 outside atan2" in problem
    proto, names = traced(Atan2(), x, x.flip(1))
    assert graphs.graph_problem(proto, names, ["o"]) is None
    assert "has the inputs" in graphs.graph_problem(proto, ["y", "x"], ["o"])
    with pytest.raises(ExportError) as err:
        graphs.export_one(Float32(), graphs.GraphSpec("f", ("q",), ("o",)), {"q": x.numpy()}, tmp_path / "f.onnx")
    assert "the torchscript exporter's graph computes in float32" in str(err.value)
    assert "the dynamo exporter" in str(err.value)
    assert not (tmp_path / "f.onnx").exists()


def test_a_graph_that_differs_from_torch_is_exported_again_by_the_dynamo_exporter(tmp_path, monkeypatch):
    """graphs.export_checked: a graph whose check fails (here the TorchScript exporter is handed
    weights 1e-9 off, as a float32 constant fold would be) is exported again by the dynamo
    exporter alone, checked again and kept; the recorded difference is the new graph's."""
    import copy

    import torch

    from mc2fmu.reducers.autoencoder import graphs

    def perturbed(module):
        module = copy.deepcopy(module)
        with torch.no_grad():
            for p in module.parameters():
                p.mul_(1 + 1e-9)
        return module

    calls = _export_spy(monkeypatch, torchscript=perturbed)
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Linear(2, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2)).double()
    spec = graphs.GraphSpec("decoder", ("q",), ("x",))
    points = [{"q": np.random.default_rng(k).normal(size=(1, 2))} for k in range(6)]
    out, errors = graphs.export_checked({"decoder": spec}, {"decoder": net}, points, tmp_path)
    assert calls == [False, True]
    assert errors["decoder"] <= graphs.TOLERANCE
    assert graphs.check_graph(tmp_path / "decoder.onnx", net, spec, points) <= graphs.TOLERANCE
    assert set(out) == {"onnx/decoder.onnx"}


def test_a_graph_onnxruntime_cannot_run_is_exported_again_and_a_second_failure_names_both(tmp_path, monkeypatch):
    """graphs.export_checked: a check that raises (onnxruntime refusing the graph) is a reason
    to export again with the dynamo exporter, not an escaping exception; when the dynamo
    graph fails too, the ExportError gives both reasons."""
    import torch

    from mc2fmu.errors import ExportError
    from mc2fmu.reducers.autoencoder import graphs

    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    spec = graphs.GraphSpec("decoder", ("q",), ("x",))
    points = [{"q": np.random.default_rng(k).normal(size=(1, 2))} for k in range(4)]
    check = graphs.check_graph
    seen = []

    def refusing_once(*args):
        seen.append(1)
        if len(seen) == 1:
            raise RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH")
        return check(*args)

    calls = _export_spy(monkeypatch)
    monkeypatch.setattr(graphs, "check_graph", refusing_once)
    _, errors = graphs.export_checked({"decoder": spec}, {"decoder": net}, points, tmp_path / "a")
    assert calls == [False, True] and len(seen) == 2 and errors["decoder"] <= graphs.TOLERANCE

    monkeypatch.setattr(graphs, "check_graph", lambda *args: 1e-6)
    with pytest.raises(ExportError) as err:
        graphs.export_checked({"decoder": spec}, {"decoder": net}, points, tmp_path / "b")
    text = str(err.value)
    assert "differs from torch by 1.00e-06" in text and "exported again by the dynamo exporter" in text


def test_a_trained_models_graphs_need_only_the_torchscript_exporter(trained, tmp_path, monkeypatch):
    """Every graph of a trained model (a learned spring law and, put in here, identified terms; an
    angle-type encoder's atan2: the next test) passes graphs.graph_problem and the check against torch from the
    TorchScript exporter alone: one export call, never the dynamo fallback (4-8 s a train)."""
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.reducers.autoencoder.graphs import onnx_graphs
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    from dataclasses import replace

    artifact = load_artifact(trained("macpherson_nl")[0])
    library = load_artifact(trained("four_bar_friction")[0]).model.library
    assert library is not None and artifact.dof == 1  # the friction four-bar's terms on a 1-DOF law model
    model = replace(artifact.model, library=library)
    calls = _export_spy(monkeypatch)
    graphs, errors = onnx_graphs(from_runtime(model), model, artifact.envelope, tmp_path, check_points=4)
    assert calls == [False]
    assert set(graphs) == {f"onnx/{g}.onnx" for g in ("decoder", "positions", "encoder", "rhs", "step")}
    assert max(errors.values()) <= 1e-12


def test_an_angle_type_models_graphs_need_only_the_torchscript_exporter(spinning_pendulum, tmp_path, monkeypatch):
    """The encoder of an angle-type coordinate ends in atan2, a float32 estimate on purpose:
    a whole training's export of it is one TorchScript export call, and the record says how
    long the graphs' export and check took."""
    import json

    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    mech, run, _ = spinning_pendulum
    calls = _export_spy(monkeypatch)
    train(mech, [run], TrainConfig(dof=1, samples=64, adam_epochs=2, lbfgs_iters=2), tmp_path / "spin")
    record = json.loads((tmp_path / "spin" / "model.json").read_text())
    assert record["angles"] == [True]
    assert calls == [False]
    assert record["training"]["onnx_seconds"] > 0
    assert max(record["training"]["onnx_max_difference"].values()) <= 1e-12


def test_the_step_graph_keeps_dt_in_float64(tmp_path):
    """The exporters pass Python floats and 0-d tensors through float32 (dt = 1e-3 becomes
    1.0000000475e-3, dt^2 a 1e-7 relative error).  The step graph of a model whose dynamics are
    a free particle (q_next = 2 q - q_prev) plus dt^2 times a constant acceleration must
    equal 2 q - q_prev + dt^2 a to rounding, dt kept exactly."""
    import onnxruntime as ort
    import torch

    from mc2fmu.reducers.autoencoder import graphs

    class Constant:
        step_map = None

        def step(self, q_prev, q, u, dt, physics):
            return 2.0 * q - q_prev + dt * dt * torch.full_like(q, 7.0)

    spec = graphs.GraphSpec("step", ("q_prev", "q"), ("q_next",))
    step = graphs._StepGraph(Constant(), spec, n_u=0, dt=1e-3)
    feed = {"q_prev": np.array([[0.3, -0.2]]), "q": np.array([[0.31, -0.21]])}
    graphs.export_one(step, spec, feed, tmp_path / "step.onnx")
    got = ort.InferenceSession(str(tmp_path / "step.onnx")).run(None, feed)[0]
    want = 2.0 * feed["q"] - feed["q_prev"] + 1e-6 * 7.0
    assert np.abs(got - want).max() <= 4e-17


def test_exportable_atan2_equals_torch_atan2():
    """ONNX Runtime has no float64 Atan: the encoder's atan2 is a float32 estimate plus a
    float64 correction, equal to torch.atan2 to rounding, across all quadrants and at +-pi."""
    import torch

    from mc2fmu.reducers.autoencoder.torch_model import atan2

    rng = np.random.default_rng(1)
    y, x = (torch.as_tensor(rng.normal(size=20000) * 10.0 ** rng.integers(-6, 6, 20000)) for _ in range(2))
    y = torch.cat([y, torch.tensor([0.0, 1e-300, -1e-300, 1.0, -1.0, 0.0])])
    x = torch.cat([x, torch.tensor([-1.0, -1.0, -1.0, 0.0, 0.0, 1.0])])
    assert (atan2(y, x) - torch.atan2(y, x)).abs().max() <= 1e-15


# ---------------------------------------------------------------------------- the FMU


@pytest.mark.parametrize("name", MECHANISMS)
def test_fmpy_validate_finds_no_problems(exported, name):
    from fmpy import read_model_description
    from fmpy.validation import validate_fmu

    fmu = exported(name)[1]
    assert validate_fmu(str(fmu)) == []
    md = read_model_description(str(fmu))
    assert md.coSimulation.needsExecutionTool is False
    names = {v.name: v for v in md.modelVariables}
    assert names["tau"].causality == "input" and names["tau"].unit == "N.m"
    assert names["crank.x"].unit == "m" and names["crank.qw"].causality == "output"
    assert names["q_start[1]"].causality == "parameter" and names["envelope"].causality == "output"
    assert all(v.description for v in md.modelVariables)
    assert float(md.defaultExperiment.stopTime) == pytest.approx(10.0)
    assert float(md.defaultExperiment.stepSize) == pytest.approx(1e-3)


def _assert_parity(model_dir, fmu, mech_path, run_path) -> dict:
    """The FMU under fmpy (fresh process) against `mc2fmu simulate`'s rollout of the same
    model on ``run_path``: positions to 1e-9 m, the same stop and the same envelope flag."""
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc
    from mc2fmu.data.poses import read_run
    from mc2fmu.models.simulate import simulate_run
    from mc2fmu.validation.validate import fmu_artifact, validate_run

    art, mech = load_artifact(model_dir), load_mechanism(mech_path)
    run = read_run(run_path, mech)
    ref = simulate_run(art, nc_from_poses(art.layout, run.origin, run.rotation), run.u)
    ok = np.isfinite(ref["x"]).all(axis=1)
    origin = np.full_like(run.origin, np.nan)
    origin[ok] = poses_from_nc(art.layout, ref["x"][ok])[0]

    res = validate_run(fmu, fmu_artifact(Path(fmu)), mech, run_path)
    series, summary = res["series"], res["summary"]
    n = len(series["t"])
    assert n > 1000  # at least a second of simulated time to compare
    assert summary["reached_stop_time"] == bool(ok.all())
    diff = np.abs(series["origin"] - origin[:n])
    assert np.nanmax(diff) <= 1e-9, np.nanmax(diff)
    assert np.array_equal(np.isfinite(series["origin"]), np.isfinite(origin[:n]))
    both = np.isfinite(series["envelope"]) & np.isfinite(ref["envelope"][:n])
    env_ref = ref["envelope"][:n][both]
    assert (np.abs(series["envelope"][both] - env_ref) <= 1e-6 * np.maximum(1.0, env_ref)).all()
    ref_flag = art.envelope.first_exit(ref["envelope"])
    assert summary["envelope_flag_time"] == (None if ref_flag is None else pytest.approx(run.t[ref_flag]))
    return summary


def assert_exports_equal_simulate(model_dir, mech_path, run_path, tmp_path, backend: str, fmi: int,
                                  interface: str) -> None:
    """Export ``model_dir`` with ``backend``/``fmi``/``interface`` (a native export's self-check
    within 1e-12) and check the FMU against `mc2fmu simulate` (:func:`_assert_parity`)."""
    from mc2fmu.fmu.export import export_fmu

    fmu = tmp_path / f"{backend}{fmi}.fmu"
    summary = export_fmu(model_dir, fmu, backend, fmi, interface)
    if backend == "native":
        assert max(summary["native_max_difference"].values()) <= 1e-12
    _assert_parity(model_dir, fmu, mech_path, run_path)


@pytest.mark.parametrize("name", MECHANISMS)
def test_fmu_matches_mc2fmu_simulate(exported, reference_run, name):
    model_dir, fmu, mech_path, _ = exported(name)
    _assert_parity(model_dir, fmu, mech_path, reference_run(name, "low")["path"])


def test_angle_latent_fmu_matches_simulate_through_full_revolutions(spinning_pendulum, tmp_path):
    """An angle-type coordinate (cos/sin in, atan2 out, unbounded envelope) through the FMU."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    mech, run, theta = spinning_pendulum
    art = fit(mech, [run], TrainConfig(dof=1, samples=300, adam_epochs=40, lbfgs_iters=60), tmp_path / "model")
    assert art.angles == (True,) and art.envelope.q_min[0] == -np.inf
    export_fmu(tmp_path / "model", tmp_path / "spin.fmu", "python")
    summary = _assert_parity(tmp_path / "model", tmp_path / "spin.fmu", mech, run)
    assert summary["reached_stop_time"]


@pytest.mark.parametrize("name, dof", [("two_bar", 2), ("macpherson", 1)])
def test_every_bundled_mechanism_exports_a_valid_fmu(reference_run, tmp_path, name, dof):
    """The variable contract (then the physical parameters and the motion outputs) and fmpy's validation on the other
    bundled mechanisms (2 DOF and two force inputs, springs; six spatial bodies).  Barely trained: only the export is checked."""
    from fmpy import read_model_description
    from fmpy.validation import validate_fmu

    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.mechanics.variants import physical_parameters
    from mc2fmu.reducers.autoencoder.graphs import TOLERANCE
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run(name, "train")
    mech_path = Path(run["path"]).parent.parent / "mechanism.toml"
    fit(mech_path, [run["path"]], TrainConfig(dof=dof, samples=64, adam_epochs=2, lbfgs_iters=2), tmp_path / "m")
    summary = export_fmu(tmp_path / "m", tmp_path / "m.fmu", "python")
    assert max(summary["onnx_max_difference"].values()) <= TOLERANCE
    assert validate_fmu(str(tmp_path / "m.fmu")) == []
    mech = load_mechanism(mech_path)
    md = read_model_description(str(tmp_path / "m.fmu"))
    names = [v.name for v in md.modelVariables]
    expected = [*mech.input_names, *(f"{b}.{c}" for b in mech.body_names for c in ("x", "y", "z", "qw", "qx", "qy", "qz")),
                *(f"q[{i}]" for i in range(1, dof + 1)), *(f"qd[{i}]" for i in range(1, dof + 1)), "envelope",
                *(f"q_start[{i}]" for i in range(1, dof + 1)), *(f"qd_start[{i}]" for i in range(1, dof + 1)),
                *(p.name for p in physical_parameters(mech)),  # the physical parameters, then the motion outputs
                *(f"{b}.{c}" for b in mech.body_names for c in ("vx", "vy", "vz", "wx", "wy", "wz")),
                "kinetic_energy", "potential_energy"]
    assert names == expected
    assert [v.valueReference for v in md.modelVariables] == list(range(1, len(expected) + 1))


def _block_inputs(name: str, reference_run, block: float, t_end: float) -> list[list[float]]:
    """The run's input, held constant over blocks of ``block`` seconds (so every communication
    step in the test sees the same input sequence)."""
    run = reference_run(name, "low")
    t, u = run["t"], run["u"]
    return [list(u[int(np.searchsorted(t, k * block - 1e-12))]) for k in range(int(round(t_end / block)) + 1)]


@pytest.mark.parametrize("name", MECHANISMS)
def test_communication_steps_give_the_same_trajectory(exported, reference_run, tmp_path, name):
    """1, 2.5 and 10 ms communication steps on a 1 ms internal grid: identical at common
    times that are grid points (to 1e-9 m, in fact to the last bit); off-grid points (2.5 ms
    steps) are the quadratic through the last three grid states: within 1e-6 m of a cubic
    spline through the 1 ms results."""
    from scipy.interpolate import CubicSpline

    model_dir, fmu = exported(name)[:2]
    t_end = 1.0
    req = {"kind": "steps", "fmu": str(fmu), "start": start_values(model_dir), "steps": [0.001, 0.0025, 0.01],
           "t_end": t_end, "block": 0.01, "inputs": ["tau"], "u_blocks": _block_inputs(name, reference_run, 0.01, t_end)}
    res = run_json(HOST, req, tmp_path)
    outs = res["outputs"]
    cols = [i for i, o in enumerate(outs) if o.rsplit(".", 1)[-1] in ("x", "y", "z")]
    runs = {float(k): (np.array(v["t"]), np.array(v["y"])[:, cols]) for k, v in res["runs"].items()}
    t1, y1 = runs[0.001]
    assert len(t1) == 1000 and np.isfinite(y1).all()
    for h in (0.0025, 0.01):
        th, yh = runs[h]
        on_grid = np.abs(th / 0.001 - np.round(th / 0.001)) < 1e-6
        idx = np.round(th[on_grid] / 0.001).astype(int) - 1
        assert np.abs(yh[on_grid] - y1[idx]).max() <= 1e-9
        if (~on_grid).any():
            spline = CubicSpline(t1, y1)
            assert np.abs(yh[~on_grid] - spline(th[~on_grid])).max() <= 1e-6


@pytest.mark.parametrize("name", MECHANISMS)
def test_get_set_and_serialized_state_reproduce_the_run(exported, reference_run, tmp_path, name):
    """A state restored, and one deserialized into another instance whose physical parameters
    are the exported ones, continue the run exactly: the state carries the heavier last body
    its instance was given."""
    from mc2fmu.mechanics.mechanism import load_mechanism

    model_dir, fmu, mech = exported(name)[:3]
    last = load_mechanism(mech).bodies[-1]
    start = {**start_values(model_dir), f"{last.name}.mass": 1.5 * last.mass}
    req = {"kind": "state", "fmu": str(fmu), "start": start, "other_start": start_values(model_dir), "steps": [0.0025],
           "t_split": 0.3, "t_end": 0.6, "block": 0.01, "inputs": ["tau"],
           "u_blocks": _block_inputs(name, reference_run, 0.01, 0.6)}
    res = run_json(HOST, req, tmp_path)
    first = np.array(res["first"])
    assert first.shape[0] == 120 and np.isfinite(first).all()
    assert np.array_equal(first, np.array(res["second"]))
    assert np.array_equal(first, np.array(res["deserialized"]))


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_input_is_an_error_status_with_a_message(exported, tmp_path, value):
    model_dir, fmu = exported("four_bar")[:2]
    res = run_json(HOST, {"kind": "nan", "fmu": str(fmu), "start": start_values(model_dir), "steps": [0.001],
                          "inputs": ["tau"], "value": value}, tmp_path)
    assert "fatal" in res["status"]["set"]  # pythonfmu 0.7 maps a raising setter to fmi2Fatal
    assert "fatal" in res["status"]["step"]  # and refuses to go on
    text = " ".join(m["message"] for m in res["messages"])
    assert "tau" in text and "must be finite" in text


# ---------------------------------------------------------------------------- an adversarial host


def _misuse(exported, tmp_path, case: str) -> tuple[dict, str]:
    """One misuse case of ``fmpy_sim.py`` on the python FMU.  The host leaves without the
    interpreter's finalisation: after an error status, pythonfmu 0.7 still corrupts the host's
    heap there (docs/fmus.md, "The python backend"; the native backend is the default for that)."""
    model_dir, fmu = exported("four_bar")[:2]
    return run_misuse(FMPY_SIM, fmu, model_dir, case, tmp_path, inputs=["tau"])


@pytest.mark.parametrize("case, call, message", [
    ("huge_step", "doStep h=1e20", "use smaller communication steps"),
    ("wrong_time", "doStep from -5", "a communication step starts where the previous one ended"),
    ("wrong_time", "doStep from 10", "the FMU is at t = 0"),
    ("nan_start", "setupExperiment NaN", "start time nan refused"),
    ("fixed_after_init", "set q_start after init", "q_start[1] cannot be changed after initialisation"),
    ("after_terminate", "doStep after terminate", "doStep refused: the FMU is in its terminated phase"),
    ("phases", "exitInitializationMode first", "exitInitializationMode refused: the FMU is in its instantiated"),
    ("phases", "enterInitializationMode twice", "enterInitializationMode refused: the FMU is in its step phase"),
    ("references", "getReal vr 4294967295", "value reference 4294967295 refused"),
    ("references", "setReal on an output", "setReal of q[1] refused: it is an output"),
])
def test_python_fmu_refuses_misuse_with_a_message(exported, tmp_path, case, call, message):
    """The python backend checks the FMI 2 state machine as the native one does: an error
    status (pythonfmu 0.7 can only give fmi2Fatal) and a message that says why; the host
    survives the call and the calls after it (run_json checks the exit code)."""
    calls, text = _misuse(exported, tmp_path, case)
    assert calls[call] != "ok" and "fatal" in calls[call].lower(), calls
    assert message in text, text


def test_python_fmu_survives_calls_after_a_failure(exported, tmp_path):
    """After a refused input (pythonfmu 0.7's error path used to free the slave: the second or
    third call after it segfaulted the host), every later call answers: getReal gives the
    last outputs, doStep is refused with a message, terminate and free work, and a fresh
    instance in the same process steps."""
    calls, text = _misuse(exported, tmp_path, "after_failure")
    assert calls["setReal NaN"] != "ok"
    assert all(calls[f"getReal {i}"] == "ok" for i in range(3)), calls
    assert all(calls[f"doStep {i}"] != "ok" for i in range(3)), calls
    assert calls["terminate"] == "ok" and calls["a fresh instance steps"] == "ok", calls
    assert "tau = nan refused" in text and "the FMU failed earlier" in text
    calls, _ = _misuse(exported, tmp_path, "references")
    assert calls["getReal after them"] == "ok" and calls["terminate"] == "ok", calls


def test_python_fmu_serialized_state_cannot_be_forged(exported, tmp_path):
    """The python backend's serialized state: a SHA-256 over its content; bit flips, a
    truncated or empty blob fail it; forged content with a valid digest (grid index INT64_MIN
    or far from its time, t0 = NaN, a NaN history, a string for the input) fails the field checks.  Each refusal
    is an error with a message, the instance answers getReal afterwards, and the intact state
    loads and steps."""
    calls, text = _misuse(exported, tmp_path, "python_state")
    assert calls["intact"] == "ok" and calls["intact: set"] == "ok" and calls["intact: step"] == "ok", calls
    bad = [k for k in calls if ":" not in k and k != "intact"]
    assert len(bad) == 10, calls
    for k in bad:  # refused at deserialisation or at set, never stepped
        assert calls[k] != "ok" or (calls[k + ": set"] != "ok" and calls[k + ": step"] != "ok"), (k, calls)
        assert calls[k + ": getReal"] == "ok", (k, calls)
    refusals = [m for m in text.split(" | ") if m.startswith("mc2fmu: FMU state refused")]
    assert sum("the checksum does not match" in m for m in refusals) == 5  # 3 bit flips, truncated, empty
    for reason in ("the grid index is not a non-negative integer", "a grid index that does not match its time",
                   "a non-finite time", "a non-finite grid history",
                   "'u' is not 1 finite numbers"):
        assert reason in text, reason


def test_python_fmu_input_set_after_initialisation_drives_the_first_step(exported, tmp_path):
    """As in the native backend: the first grid step uses the input set before it, whether the
    host set it before or after exitInitializationMode (the python FMU used to take the one
    present at initialisation), and the run differs from one without that input."""
    model_dir, fmu = exported("four_bar")[:2]
    req = {"kind": "misuse", "case": "input_after_init", "fmu": str(fmu), "start": start_values(model_dir),
           "inputs": ["tau"]}
    with_u = run_json(FMPY_SIM, {**req, "u": [0.8]}, tmp_path)["runs"]
    without = run_json(FMPY_SIM, {**req, "u": [0.0]}, tmp_path)["runs"]
    assert np.array_equal(np.array(with_u[0]), np.array(with_u[1]))
    assert np.abs(np.array(with_u[0]) - np.array(without[0])).max() > 1e-6


def test_two_fmus_in_one_process(exported, reference_run, tmp_path):
    """Two different mc2fmu FMUs stepped alternately in one process: each gives exactly what
    it gives alone."""
    requests, alone = [], []
    for name in MECHANISMS:
        model_dir, fmu = exported(name)[:2]
        sub = {"kind": "steps", "fmu": str(fmu), "start": start_values(model_dir), "steps": [0.002], "t_end": 0.4,
               "block": 0.01, "inputs": ["tau"], "u_blocks": _block_inputs(name, reference_run, 0.01, 0.4)}
        requests.append(sub)
        alone.append(np.array(run_json(HOST, sub, tmp_path)["runs"]["0.002"]["y"]))
    both = run_json(HOST, {"kind": "two", "fmus": [r["fmu"] for r in requests], "requests": requests, "step": 0.002,
                           "t_end": 0.4}, tmp_path)
    assert both["outputs"][0] != both["outputs"][1]  # really two different models
    for k in range(2):
        assert np.array_equal(np.array(both["y"][k]), alone[k])


# ---------------------------------------------------------------------------- CLI


def test_validate_cli_json_and_report(exported, reference_run, tmp_path, capsys):
    from mc2fmu.validation.simulate import simulate_file

    model_dir, fmu, mech, train = exported("four_bar")
    low = reference_run("four_bar", "low")["path"]
    assert main(["validate", str(fmu), str(mech), train, low, "--json", "--report", str(tmp_path / "rep")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model_description_problems"] == []
    assert [r["run"] for r in result["runs"]] == ["train", "low"]
    for r, path in zip(result["runs"], (train, low)):
        assert r["wall_time"] > 0 and r["samples"] == 10001
        # strict JSON: a run that stopped early has no NRMSE (null), one that ran has a number,
        # and it is the NRMSE `mc2fmu simulate` computes for the same model on the same run
        assert (r["position_nrmse"] is None) == (not r["reached_stop_time"])
        simulated = simulate_file(model_dir, mech, path, tmp_path / f"{r['run']}.csv")
        if r["reached_stop_time"]:
            assert r["position_nrmse"] == pytest.approx(simulated["nrmse"], rel=1e-6)
        else:
            assert not simulated["reached_end"]
    page = (tmp_path / "rep" / "index.html").read_text()
    for r in ("train", "low"):
        assert (tmp_path / "rep" / f"{r}.png").stat().st_size > 10_000
        assert f'src="{r}.png"' in page
    assert json.loads((tmp_path / "rep" / "results.json").read_text())["runs"][0]["run"] == "train"


def test_export_and_validate_errors(exported, tmp_path, capsys):
    model_dir, fmu, mech, train = exported("four_bar")
    cases = [
        (["export", str(model_dir), "-o", str(tmp_path / "a.zip")], "must end in .fmu", tmp_path / "a.zip"),
        (["export", str(tmp_path / "nomodel"), "-o", str(tmp_path / "b.fmu")], "not a model directory", tmp_path / "b.fmu"),
        (["export", str(model_dir), "-o", str(tmp_path / "c.fmu"), "--backend", "julia"],
         "invalid choice: 'julia' (choose from 'python', 'native')", tmp_path / "c.fmu"),
        (["validate", str(tmp_path / "none.fmu"), str(mech), train], "no such FMU", None),
        (["validate", str(train), str(mech), train], "not a zip file", None),
    ]
    for argv, message, not_written in cases:
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: a choice not in the backend registry
            code = exc.code
        assert code == 2
        assert message in capsys.readouterr().err
        assert not_written is None or not not_written.exists()
    other = exported("slider_crank")[2]
    assert main(["validate", str(fmu), str(other), train]) == 2
    assert "differ from the trained" in capsys.readouterr().err  # other bodies: another mechanism
    assert not list(tmp_path.glob(".*.part"))


def test_convert_with_the_default_backend_fmi3_both(reference_run, tmp_path, capsys):
    """`convert --fmi 3 --interface both` (the default backend is native): trains, exports,
    validates (fmpy's co-simulation) and prints the C check; the python backend refuses FMI 3
    up front."""
    run = reference_run("four_bar", "train")["path"]
    mech = Path(run).parent.parent / "mechanism.toml"
    brief = ["--dof", "1", "--samples", "64", "--adam-epochs", "2", "--lbfgs-iters", "2", "-q"]
    out = tmp_path / "fb.fmu"
    assert main(["convert", str(mech), run, *brief, "--fmi", "3", "--interface", "both", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "C code matches the model" in printed and "model description: no problems" in printed
    result = json.loads((tmp_path / "fb.report" / "results.json").read_text())
    assert result["runs"][0]["run"] == "train" and result["model_description_problems"] == []
    assert main(["convert", str(mech), run, *brief, "--backend", "python", "--fmi", "3",
                 "-o", str(tmp_path / "py.fmu")]) == 2
    assert "the python backend writes FMI 2.0 co-simulation only" in capsys.readouterr().err
    assert not (tmp_path / "py.fmu").exists() and not (tmp_path / "py.model").exists()
