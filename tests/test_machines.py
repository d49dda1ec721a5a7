"""Machines of 4-10 DOF: a brief training of the 6-DOF hexapod on one second of its ``train``
run (the default trainings and their accuracy are benchmarks/scaling.py's).

What a brief training must already give at 6 DOF: a decoder whose bodies stay rigid along the
model's own motion (each body's four points keep their unit frame, |r_k - r_0| = L_b and
orthogonal axes), a motion near the engine's, and a native FMU that reproduces `mc2fmu
simulate` to 1e-9 m."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

#: one second of the train run: 1000 steps, every mode of the platform (1.2-4.4 Hz) swinging
SECONDS = 1.0


@pytest.fixture(scope="module")
def hexapod(tmp_path_factory):
    pytest.importorskip("exudyn")
    from examples.reference import write_run_file
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    folder = tmp_path_factory.mktemp("hexapod")
    run = write_run_file("hexapod", "train", folder, t_end=SECONDS)
    mech = folder / "hexapod" / "mechanism.toml"
    model = folder / "model"
    train(mech, [run["path"]], TrainConfig(dof=6, samples=200, adam_epochs=50, lbfgs_iters=400), model)
    return mech, Path(run["path"]), model, run


@pytest.mark.slow
def test_a_briefly_trained_6_dof_model_keeps_its_bodies_rigid_and_follows_the_engine(hexapod):
    from mc2fmu.data.poses import read_run
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.simulate import simulate_run
    from mc2fmu.validation.metrics import position_nrmse

    mech, run_path, model, engine = hexapod
    art = load_artifact(model)
    assert art.dof == 6 and len(art.layout.bodies) == 13
    run = read_run(run_path, load_mechanism(mech))
    res = simulate_run(art, nc_from_poses(art.layout, run.origin, run.rotation), run.u)
    x = res["x"]
    assert np.isfinite(x).all()
    points = x.reshape(len(x), len(art.layout.bodies), 4, 3)
    axes = points[:, :, 1:] - points[:, :, :1]  # L_b R e_k for a rigid body
    gram = np.einsum("tbki,tbli->tbkl", axes, axes)
    lengths = np.array([b.length for b in art.layout.bodies])
    rigidity = np.abs(gram / lengths[None, :, None, None] ** 2 - np.eye(3)).max()
    assert rigidity < 2e-3, rigidity
    origin, _ = poses_from_nc(art.layout, x)
    assert position_nrmse(origin, run.origin) < 0.01
    # the engine's own record of the platform (body 0) against the model's: within 0.5 mm
    assert np.abs(origin[:, 0] - engine["origin"][:, 0]).max() < 5e-4


@pytest.mark.slow
def test_the_6_dof_native_fmu_equals_simulate(hexapod, tmp_path):
    from mc2fmu.fmu.export import export_fmu
    from tests.test_export import _assert_parity

    mech, run_path, model, _ = hexapod
    fmu = tmp_path / "hexapod.fmu"
    summary = export_fmu(model, fmu, "native")
    assert max(summary["native_max_difference"].values()) <= 1e-10
    _assert_parity(model, fmu, mech, run_path)
