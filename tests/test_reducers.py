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
from mc2fmu.reduced.artifact import load_artifact
from mc2fmu.reduced.charted import LocalPcaModel, NodeModel
from mc2fmu.reduced.simulate import simulate_run, trajectory


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
    from mc2fmu.reduced.manifold import unwrap_angles
    from mc2fmu.reduced.node import rk4_step

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
    x0, J, _ = model.chart.decode_jh(q0[None])
    lib = model.rom.rollout(x0[0], J[0] @ qd0, ds.u)
    np.testing.assert_allclose(res["x"], lib["x"], rtol=0, atol=1e-12)
    # q through the chart, qd its least-squares velocity: against finite differences of q
    qd_fd = finite_difference_velocity(res["q"], art.dt)
    inner = slice(5, -5)
    scale = np.abs(qd_fd).max()
    # a cluster switch moves the state (energy-preserving projection): compare away from switches
    cl = model.rom.rollout(x0[0], J[0] @ qd0, ds.u)["cluster"]
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
    with pytest.raises(TrainingError, match="differs from the mechanism"):
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


@pytest.mark.parametrize("backend", ["native", "python"])
def test_export_says_which_reducers_it_takes(fitted, tmp_path, backend):
    from mc2fmu.fmu.export import export_fmu

    out, _ = fitted("node")
    with pytest.raises(ExportError, match="node"):
        export_fmu(out, tmp_path / "n.fmu", backend)
    assert not (tmp_path / "n.fmu").exists()
