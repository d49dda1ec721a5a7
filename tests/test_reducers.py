"""The ``node`` and ``local-pca`` reducers through the pipeline: trained on the coordinates of
a (briefly trained) autoencoder, saved, loaded and simulated like any model, against the
analytic spinning pendulum (``conftest.spinning_pendulum``: scipy, full revolutions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main
from mc2fmu.data.dataset import load_training_data
from mc2fmu.errors import ExportError, ModelError, TrainingError
from mc2fmu.mechanics.natural import finite_difference_velocity
from mc2fmu.models.artifact import load_artifact
from mc2fmu.models.charted import LocalPcaModel, NodeModel
from mc2fmu.models.simulate import simulate_run, trajectory


@pytest.fixture(scope="module")
def chart(spinning_pendulum, tmp_path_factory):
    """A briefly trained autoencoder (learnt full-turn angle) whose coordinates both reducers use."""
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    mech, run, theta = spinning_pendulum
    out = tmp_path_factory.mktemp("reducers") / "chart"
    train(mech, [run], TrainConfig(dof=1, samples=300, adam_epochs=40, lbfgs_iters=60), out)
    return out


@pytest.fixture(scope="module")
def fitted(chart, spinning_pendulum):
    """``fitted(reducer)`` -> (model_dir, artifact as trained), once per reducer."""
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.local_pca.config import LocalPcaConfig
    from mc2fmu.reducers.node.config import NodeReducerConfig

    mech, run, _ = spinning_pendulum
    cache = {}
    configs = {"node": NodeReducerConfig(dof=1, from_model=str(chart), node_hidden=(64, 64), node_epochs=80),
               "local-pca": LocalPcaConfig(dof=1, from_model=str(chart))}

    def get(name: str):
        if name not in cache:
            out = chart.parent / name
            cache[name] = (out, train(mech, [run], configs[name], out, reducer=name))
        return cache[name]

    return get


def _pendulum_error(art, spinning_pendulum) -> tuple[float, dict]:
    """The rollout's rms error in natural coordinates (the body's points; its origin is the
    fixed pivot) relative to their range, against the analytic run; and the rollout."""
    mech, run, _ = spinning_pendulum
    ds = load_training_data(mech, [run])
    res = simulate_run(art, ds.x, ds.u)
    return float(np.sqrt(np.mean((res["x"] - ds.x) ** 2)) / np.ptp(ds.x)), res


@pytest.mark.parametrize("name", ["node", "local-pca"])
def test_a_saved_model_loads_and_simulates_as_trained(name, fitted, spinning_pendulum):
    out, art = fitted(name)
    loaded = load_artifact(out)
    assert loaded.reducer == name and type(loaded.model) is type(art.model)
    mech, run, _ = spinning_pendulum
    ds = load_training_data(mech, [run])
    a, b = simulate_run(art, ds.x, ds.u), simulate_run(loaded, ds.x, ds.u)
    for key in ("q", "qd", "x"):
        assert np.isfinite(a[key]).all()
        np.testing.assert_array_equal(a[key], b[key])


def test_node_learns_the_pendulums_one_step_map(fitted, spinning_pendulum):
    """The trained ODE predicts the run's next velocity better than the same RK4 step without
    acceleration (a broken wiring of coordinates, velocities or inputs does not), and its
    rollout turns with the pendulum.  (Its accuracy on the suite: benchmarks/node.py.)"""
    from mc2fmu.models.simulate import unwrap_angles
    from mc2fmu.models.node import rk4_step

    _, art = fitted("node")
    assert isinstance(art.model, NodeModel)
    mech, run, theta = spinning_pendulum
    ds = load_training_data(mech, [run])
    q = unwrap_angles(art.model.encode(ds.x), art.angles)
    qd = finite_difference_velocity(q, art.dt)
    residual = []
    for f in (art.model.acceleration, lambda a, b, c: 0.0 * a):
        _, qd1 = rk4_step(f, q[:-1], qd[:-1], ds.u[:-1], art.dt)
        residual.append(np.sqrt(np.mean((qd1 - qd[1:]) ** 2)))
    assert residual[0] < 0.7 * residual[1], residual
    _, res = _pendulum_error(art, spinning_pendulum)
    turns = np.ptp(np.unwrap(res["q"][:, 0])) / (2 * np.pi)
    assert abs(turns - np.ptp(theta) / (2 * np.pi)) < 0.5


def test_local_pca_runs_algorithm_1_of_the_library_and_reports_consistent_velocities(fitted, spinning_pendulum):
    _, art = fitted("local-pca")
    model = art.model
    assert isinstance(model, LocalPcaModel)
    mech, run, _ = spinning_pendulum
    ds = load_training_data(mech, [run])
    _, res = _pendulum_error(art, spinning_pendulum)
    # the state-space run is the library's Algorithm 1 from the chart's start
    q0, qd0 = art.initial_state_of(ds.x)
    start = model.start_state(q0, qd0, ds.u[0])
    lib = model.rom.rollout_from(start, ds.u)
    np.testing.assert_allclose(res["x"], lib["x"], rtol=0, atol=1e-12)
    # q through the chart, qd its least-squares velocity: against finite differences of q
    qd_fd = finite_difference_velocity(res["q"], art.dt)
    inner = slice(5, -5)
    scale = np.abs(qd_fd).max()
    # a cluster switch moves the state (energy-preserving projection): compare away from switches
    cl = lib["cluster"]
    steady = np.ones(len(cl), bool)
    for k in np.flatnonzero(np.diff(cl)) + 1:
        steady[max(0, k - 1) : k + 1] = False  # the centred differences that span the switch
    keep = steady[inner]
    assert keep.sum() > 200  # enough samples between switches to compare on
    assert np.abs(res["qd"][inner][keep] - qd_fd[inner][keep]).max() < 1e-2 * scale


def test_trajectory_keeps_angle_turns_from_the_start(fitted):
    _, art = fitted("local-pca")
    q0 = np.array([art.initial_state.q[0] + 4 * np.pi])
    out = trajectory(art.model, q0, np.array(art.initial_state.qd), np.zeros((20, 1)))
    assert abs(out["q"][0, 0] - q0[0]) < 1e-3


def test_a_tampered_model_file_fails_cleanly(fitted, tmp_path):
    import shutil

    out, _ = fitted("node")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    with np.load(bad / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["node.q_scale"] = -arrays["node.q_scale"]
    np.savez(bad / "arrays.npz", **arrays)
    with pytest.raises(ModelError, match="q_scale must be positive"):
        load_artifact(bad)
    out, _ = fitted("local-pca")
    shutil.rmtree(bad)
    shutil.copytree(out, bad)
    meta = json.loads((bad / "model.json").read_text())
    meta["model"]["local_pca"]["clusters"] += 1
    (bad / "model.json").write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="lpca.centroids"):
        load_artifact(bad)


def test_the_charts_model_must_match_the_data(chart, reference_run, tmp_path):
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.node.config import NodeReducerConfig

    run = reference_run("four_bar", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    with pytest.raises(TrainingError, match="differ from the trained"):
        train(mech, [run["path"]], NodeReducerConfig(dof=1, from_model=str(chart)), tmp_path / "m", reducer="node")
    assert not (tmp_path / "m").exists()
    with pytest.raises(TrainingError, match="not a usable model directory"):
        train(mech, [run["path"]], NodeReducerConfig(dof=1, from_model=str(tmp_path)), tmp_path / "m", reducer="node")


def test_options_of_another_reducer_are_refused(spinning_pendulum, tmp_path, capsys):
    mech, run, _ = spinning_pendulum
    code = main(["train", str(mech), str(run), "--reducer", "node", "--dof", "1", "--hidden", "8", "-o",
                 str(tmp_path / "m")])
    assert code != 0
    err = capsys.readouterr().err
    assert "--hidden is an option of the autoencoder reducer, not of node" in err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("interface", ["me", "both"])
def test_local_pca_models_are_exported_for_co_simulation_only(fitted, tmp_path, interface):
    """(a discrete-time model: no continuous right-hand side for model exchange): the message
    says so and names the way out, before anything is written."""
    from mc2fmu.fmu.export import export_fmu

    out, _ = fitted("local-pca")
    with pytest.raises(ExportError, match=r"discrete-time .*\(--interface cs\)"):
        export_fmu(out, tmp_path / "l.fmu", "native", 3, interface)
    assert not (tmp_path / "l.fmu").exists()


@pytest.mark.parametrize("name", ["node", "local-pca"])
def test_a_model_without_graphs_is_refused_by_the_python_backend(fitted, tmp_path, name):
    """(e.g. one trained before its reducer made them): the message names the way out."""
    import shutil

    from mc2fmu.fmu.export import export_fmu

    out, _ = fitted(name)
    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    shutil.rmtree(bare / "resources")
    meta = json.loads((bare / "model.json").read_text())
    meta["resources"] = []
    (bare / "model.json").write_text(json.dumps(meta))
    with pytest.raises(ExportError, match="no ONNX graphs .* use --backend native"):
        export_fmu(bare, tmp_path / "n.fmu", "python")
    assert not (tmp_path / "n.fmu").exists()


def test_convert_refuses_an_interface_the_reducer_has_not_before_training(spinning_pendulum, tmp_path, capsys):
    mech, run, _ = spinning_pendulum
    code = main(["convert", str(mech), str(run), "--reducer", "local-pca", "--dof", "1", "--interface", "me",
                 "--fmi", "3", "-o", str(tmp_path / "p.fmu")])
    assert code != 0
    assert "'local-pca' model is discrete-time" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------------------- the node and local-pca FMUs

#: (reducer, backend) pairs that export co-simulation FMUs
COSIM = [("node", "native"), ("node", "python"), ("local-pca", "native"), ("local-pca", "python")]


@pytest.fixture(scope="module")
def reducer_fmu(fitted, tmp_path_factory):
    """``reducer_fmu(fmi, interface, backend, reducer)`` -> the fitted model's FMU, exported once."""
    from mc2fmu.fmu.export import export_fmu

    root = tmp_path_factory.mktemp("reducer-fmus")
    cache = {}

    def get(fmi: int, interface: str, backend: str = "native", reducer: str = "node") -> Path:
        key = (fmi, interface, backend, reducer)
        if key not in cache:
            out, art = fitted(reducer)
            # the python backend's graphs against torch, checked when the model was trained
            assert max(art.training["onnx_max_difference"].values()) <= 1e-12
            fmu = root / f"{reducer}-{fmi}-{interface}-{backend}.fmu"
            summary = export_fmu(out, fmu, backend, fmi, interface)
            if backend == "native":
                assert summary["compiler_warnings"] == []
                # the C dynamics against numpy, checked at export over the envelope (node: the
                # network and RK4 step; local-pca: the start, a step with a switch, the outputs)
                checked = {"node": ["node rhs", "node step"],
                           "local-pca": ["local-pca start", "local-pca step", "local-pca outputs"]}[reducer]
                assert max(summary["native_max_difference"][k] for k in checked) <= 1e-12
            cache[key] = fmu
        return cache[key]

    return get



def test_the_native_local_pca_rom_equals_numpy_with_more_modes_than_dof(chart, spinning_pendulum, tmp_path):
    """Four modes on a 1-DOF chart: most cluster pairs share a 2-D subspace, so a switch solves
    the level-set problem on a 2-D null space (the C Jacobi eigensolver on 2 x 2, Brent on the
    secular equation); the export's self-check holds the C start, step (from random clusters:
    switches) and outputs to the numpy ROM (tests/test_local_pca.py checks that against
    analytic solutions and SLSQP) within 1e-12."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.local_pca.config import LocalPcaConfig

    mech, run, _ = spinning_pendulum
    art = train(mech, [run], LocalPcaConfig(dof=1, from_model=str(chart), modes=4), tmp_path / "m4", reducer="local-pca")
    rom = art.model.rom
    shared = [rom.common_subspace(i, j).shape[1] for i in range(rom.clusters) for j in range(rom.clusters) if i != j]
    assert min(shared) <= rom.r - 2
    summary = export_fmu(tmp_path / "m4", tmp_path / "m4.fmu", "native", 2, "cs")
    assert summary["compiler_warnings"] == []
    checks = summary["native_max_difference"]
    assert max(checks[k] for k in ("local-pca start", "local-pca step", "local-pca outputs")) <= 1e-12


@pytest.mark.parametrize("fmi,interface,backend,reducer", [
    (2, "cs", "native", "node"), (3, "cs", "native", "node"), (2, "me", "native", "node"), (3, "me", "native", "node"),
    (2, "both", "native", "node"), (3, "both", "native", "node"), (2, "cs", "python", "node"),
    (2, "cs", "native", "local-pca"), (3, "cs", "native", "local-pca"), (2, "cs", "python", "local-pca")])
def test_the_reducers_fmus_validate_in_fmpy(reducer_fmu, fmi, interface, backend, reducer):
    from fmpy.validation import validate_fmu

    assert validate_fmu(str(reducer_fmu(fmi, interface, backend, reducer))) == []


@pytest.mark.parametrize("fmi,backend,reducer", [(2, "native", "node"), (3, "native", "node"), (2, "python", "node"),
                                                 (2, "native", "local-pca"), (3, "native", "local-pca"),
                                                 (2, "python", "local-pca")])
def test_the_reducers_fmus_equal_simulate(fitted, reducer_fmu, spinning_pendulum, fmi, backend, reducer):
    """fmpy co-simulation of the FMU against `mc2fmu simulate` on the analytic run (full
    revolutions): positions to 1e-9 m, the same envelope distance and flag."""
    from tests.test_export import _assert_parity

    out, _ = fitted(reducer)
    mech, run, _ = spinning_pendulum
    _assert_parity(out, reducer_fmu(fmi, "cs", backend, reducer), mech, run)


def _local_pca_switches(art, start: dict, blocks: list, t_end: float) -> np.ndarray:
    """The grid indices k at which the local-PCA model's step k-1 -> k switched cluster, run in
    numpy from the FMU's start values on the inputs held per 10 ms block."""
    model = art.model
    q0 = np.array([v for k, v in sorted(start.items()) if k.startswith("q_start")])
    qd0 = np.array([v for k, v in sorted(start.items()) if k.startswith("qd_start")])
    n = int(round(t_end / art.dt))
    u = np.array([blocks[min(int(k * art.dt / 0.01 + 1e-9), len(blocks) - 1)] for k in range(n + 1)])
    clusters = trajectory(model, q0, qd0, u)["states"][:, 0]  # the state's first entry: the active cluster
    assert np.isfinite(clusters).all()
    return np.flatnonzero(np.diff(clusters)) + 1


@pytest.mark.parametrize("reducer,backend", COSIM)
def test_the_reducers_fmus_off_grid_outputs_and_saved_states(fitted, reducer_fmu, tmp_path, backend, reducer):
    """2.5 ms communication steps on the 1 ms grid: the grid points bit for bit the 1 ms run's,
    the points between them (cubic Hermite of the one-step states) within 1e-9 m of a cubic
    spline through the 1 ms run (local-PCA: away from cluster switches, where the
    energy-preserving projection moves the state); get/set and serialized states reproduce
    the run."""
    from scipy.interpolate import CubicSpline

    from tests.fmu_helpers import run_json, start_values

    out, art = fitted(reducer)
    host = Path(__file__).with_name("fmu_host.py")
    blocks = [[float(np.sin(0.5 * k))] for k in range(101)]
    fmu = reducer_fmu(2, "cs", backend, reducer)
    req = {"kind": "steps", "fmu": str(fmu), "start": start_values(out), "steps": [0.001, 0.0025],
           "t_end": 1.0, "block": 0.01, "inputs": ["tau"], "u_blocks": blocks}
    res = run_json(host, req, tmp_path)
    runs = {float(k): (np.array(v["t"]), np.array(v["y"])) for k, v in res["runs"].items()}
    t1, y1 = runs[0.001]
    th, yh = runs[0.0025]
    assert len(t1) == 1000 and np.isfinite(y1).all()
    on_grid = np.abs(th / 0.001 - np.round(th / 0.001)) < 1e-6
    np.testing.assert_array_equal(yh[on_grid], y1[np.round(th[on_grid] / 0.001).astype(int) - 1])
    # the reference between grid points: the cubic through the four grid points around each
    # cell (t_{k-2} .. t_{k+1}; O(dt^4) for positions, O(dt^3) for their slope), local so that a
    # local-PCA cluster switch (where the energy-preserving projection moves the state) spoils
    # only the cells whose four points span it
    cell = np.ceil(th / 0.001 - 1e-6).astype(int)  # th in (t_{cell-1}, t_cell]; y1[i] is t_{i+1}
    use = ~on_grid & (cell >= 3) & (cell <= len(t1) - 1)
    if reducer == "local-pca":
        switches = _local_pca_switches(art, start_values(out), blocks, 1.0)
        assert len(switches) >= 3  # the comparison skips them: there must be some to skip
        for k in switches:
            use &= ~((cell - 2 < k) & (k <= cell + 1))
    assert use.sum() > 100
    nodes = np.stack([cell[use] + d for d in (-2, -1, 0, 1)], 1)  # grid indices k of t_k
    tau = th[use] / 0.001
    basis = np.ones((len(tau), 4))
    for a in range(4):  # the Lagrange basis on the four nodes
        for b in range(4):
            if b != a:
                basis[:, a] *= (tau - nodes[:, b]) / (nodes[:, a] - nodes[:, b])
    for names, tol in ((("q[1]", "arm.x", "arm.y", "arm.z"), 1e-9), (("qd[1]",), 1e-5)):
        cols = [res["outputs"].index(o) for o in names]
        ys = y1[nodes - 1][:, :, cols]  # (points, 4, outputs)
        ref = np.einsum("pa,pao->po", basis, ys)
        scale = np.maximum(1.0, np.abs(y1[:, cols]).max(axis=0))
        assert (np.abs(yh[use][:, cols] - ref) / scale).max() <= tol, names
    req = {"kind": "state", "fmu": str(fmu), "start": start_values(out), "steps": [0.0025],
           "t_split": 0.3, "t_end": 0.6, "block": 0.01, "inputs": ["tau"], "u_blocks": blocks[:61]}
    res = run_json(host, req, tmp_path)
    first = np.array(res["first"])
    assert first.shape[0] == 120 and np.isfinite(first).all()
    assert np.array_equal(first, np.array(res["second"]))
    assert np.array_equal(first, np.array(res["deserialized"]))


def test_the_node_fmus_directional_derivatives_equal_finite_differences(fitted, reducer_fmu, tmp_path):
    """Model exchange: der(qd) is the numpy network's acceleration, and the complex-step
    directional derivatives of every state derivative and output (the motion outputs of the
    decoded q, qd included) along q, qd and u equal five-point differences of the numpy model
    (its network, decoder and rotations) to 1e-8."""
    from mc2fmu.mechanics.natural import poses_from_nc
    from mc2fmu.mechanics.rotations import matrix_to_quaternion
    from mc2fmu.models.envelope import sample_points
    from tests.fmu_helpers import run_json, start_values
    from tests.test_native import FMPY_SIM, _finite_difference_jacobian

    out, art = fitted("node")
    pts = sample_points(art.envelope, art.model.chart, 4, seed=11)
    q, qd, u = (np.concatenate([p[k] for p in pts]) for k in ("q", "qd", "u"))
    res = run_json(FMPY_SIM, {"kind": "jacobian", "fmu": str(reducer_fmu(3, "me")), "start": start_values(out),
                              "states": np.hstack([q, qd]).tolist(), "u": u.tolist()}, tmp_path)
    assert res["knowns"] == ["q[1]", "qd[1]", "tau"]

    from mc2fmu.models.simulate import motion_series

    def f(z):
        qq, vv, uu = z[None, :1], z[None, 1:2], z[None, 2:]
        origin, rotation = poses_from_nc(art.layout, art.model.decode(qq))
        pose = np.concatenate([origin[0], matrix_to_quaternion(rotation[0])], axis=1).ravel()
        env = art.envelope.distance(qq, vv, uu)[0]
        motion = [v[0] for v in motion_series(art, qq, vv).values()]  # the motion of the decoded q, qd
        return np.concatenate([pose, qq[0], vv[0], [env], vv[0], art.model.acceleration(qq, vv, uu)[0], motion])

    for k in range(len(q)):
        z = np.concatenate([q[k], qd[k], u[k]])
        np.testing.assert_allclose(res["values"][k], f(z), rtol=1e-10, atol=1e-10)
        J, J_fd = np.array(res["J"][k]), _finite_difference_jacobian(f, z)
        scale = np.maximum(1.0, np.abs(J_fd).max(axis=1, keepdims=True))
        assert (np.abs(J - J_fd) / scale).max() <= 1e-8
        n_motion = len(motion_series(art, q[:1], qd[:1]))
        assert np.abs(J[-1 - n_motion]).max() > 1e-3  # d qdd / d(q, qd, u) is not trivially zero


@pytest.mark.parametrize("reducer,backend", COSIM)
def test_the_reducers_fmus_report_the_motion_of_their_decoded_coordinates(fitted, reducer_fmu, spinning_pendulum,
                                                                          tmp_path, backend, reducer):
    """Node and local-PCA FMUs output the motion of their decoded coordinates (the capability
    table's ``motion``): every motion output under fmpy equals `mc2fmu simulate`'s
    (:func:`~mc2fmu.models.simulate.motion_series` of its q, qd) to 1e-9 of its kind's largest
    magnitude (velocities, angular velocities, energies), and the pendulum's formulas on the
    model's own decoded motion (pivot at the body's origin): the origin at rest, the angular
    velocity the rate of its rotation angle, the kinetic energy 1/2 J_p theta'^2 and the
    potential m g l sin(theta), to 1e-3 of their range (the central difference's error)."""
    from mc2fmu.capabilities import kind
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.data.poses import read_run
    from mc2fmu.mechanics.natural import nc_from_poses
    from mc2fmu.models.simulate import motion_series
    from tests.fmu_helpers import run_json, start_values

    assert backend in kind(reducer).motion
    out, _ = fitted(reducer)
    art = load_artifact(out)
    mech_path, run_path, _ = spinning_pendulum
    run = read_run(run_path, load_mechanism(mech_path))
    n = 1500
    res = simulate_run(art, nc_from_poses(art.layout, run.origin, run.rotation), run.u)
    want = motion_series(art, res["q"][:n], res["qd"][:n])
    req = {"kind": "steps", "fmu": str(reducer_fmu(2, "cs", backend, reducer)), "start": start_values(out),
           "inputs": ["tau"], "u": run.u[: n - 1].tolist(), "h": 1e-3, "n_steps": n - 1}
    got = run_json(Path(__file__).with_name("fmpy_sim.py"), req, tmp_path)
    assert got["failure"] is None
    y = np.array(got["y"])
    assert len(y) >= n - 1
    def kind_of(name: str) -> str:  # velocities, angular velocities, energies: one scale each
        return name.rsplit(".", 1)[-1][0] if "." in name else "energy"

    scale = {}
    for name, values in want.items():
        scale[kind_of(name)] = max(scale.get(kind_of(name), 0.0), np.abs(values).max())
    # the origin is the fixed pivot: its velocity's scale is that of the body's points
    scale["v"] = max(scale["v"], scale["w"] * max(b.length for b in art.layout.bodies))
    for name, values in want.items():
        col = y[: n - 1, got["outputs"].index(name)]
        # the FMU's row k is the state after step k: simulate's sample k + 1
        assert np.abs(col - values[1:n]).max() <= 1e-9 * scale[kind_of(name)], name
    # the pendulum's formulas on the model's own decoded motion (its rotation's angle; the
    # pivot is the body's origin): m 1.5 kg, centre of mass 0.4 m from the pivot, J_c 0.02
    # kg m^2, gravity 9.81 m/s^2 along -y (tests/conftest.py)
    from mc2fmu.mechanics.natural import poses_from_nc

    m, l, g = 1.5, 0.4, 9.81
    jp = 0.02 + m * l * l
    R = poses_from_nc(art.layout, art.model.chart.decode(res["q"][:n]))[1][:, 0]
    angle = np.unwrap(np.arctan2(R[:, 1, 0], R[:, 0, 0]))
    rate = np.gradient(angle, 1e-3)
    keep = np.ones(n, bool)
    keep[:5] = keep[-5:] = False
    if reducer == "local-pca":  # a cluster switch projects the state: q jumps, no rate there
        for k in np.flatnonzero(np.diff(res["states"][:n, 0])) + 1:
            keep[k - 1:k + 1] = False  # the central differences that span the jump
    assert keep.mean() > 0.5
    for name, ref in (("arm.wz", rate), ("kinetic_energy", 0.5 * jp * rate ** 2),
                      ("potential_energy", m * g * l * np.sin(angle))):
        assert np.abs(want[name][keep] - ref[keep]).max() <= 1e-3 * np.ptp(ref), name
    for name in ("arm.vx", "arm.vy", "arm.vz"):  # the pivot (m/s)
        assert np.abs(want[name]).max() <= 1e-3 * np.abs(rate).max() * l, name
    for name in ("arm.wx", "arm.wy"):  # planar (rad/s)
        assert np.abs(want[name]).max() <= 1e-3 * np.abs(rate).max(), name
