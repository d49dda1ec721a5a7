"""The IFToMM A02 N four-bar (81 bodies) against the benchmark's published ADAMS solution: the
Exudyn reference mc2fmu's A02 data comes from, and the degrees of freedom estimated from that
data and a reduced model trained on it with the defaults (``examples/a02.py``; the 20 s run is
generated once per session on a 1 ms grid, about 2 minutes)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("exudyn")


@pytest.fixture(scope="module")
def a02_data(tmp_path_factory):
    from examples import a02

    run = a02.simulate(output_step=1e-3)
    return run, a02.write(run, tmp_path_factory.mktemp("a02"))


def every_fifth(run: dict) -> dict:
    """The run on a 5 ms grid (every fifth sample of the 1 ms one)."""
    return {k: v[::5] if isinstance(v, np.ndarray) else v for k, v in run.items()}


def test_the_adams_file_is_read_whole():
    from examples import a02

    adams = a02.read_adams()
    assert adams.shape == (401, 3)
    assert np.allclose(adams[:, 0], np.arange(401) * 0.05)
    assert np.allclose(adams[0, 1:], [0.0, 1.0], atol=1e-9)  # B0 starts straight above the first pivot


def test_exudyn_reproduces_the_adams_solution(a02_data):
    """B0 within the benchmark's high-precision tolerance (1e-3 m) over the 20 s."""
    from examples import a02

    run, _ = a02_data
    assert a02.b0_error(run["t"], run["B0"], a02.read_adams()) < 1e-3


def test_degrees_of_freedom_estimated_from_the_chain(a02_data, tmp_path):
    """81 bodies (972 natural coordinates) on a 5 ms grid, full turns through the collinear
    configuration: one degree of freedom, as the benchmark has."""
    from mc2fmu.data.dataset import ingest
    from mc2fmu.data.dof import estimate_dataset_dof

    from examples import a02

    run, _ = a02_data
    folder = a02.write(every_fifth(run), tmp_path)
    est = estimate_dataset_dof(ingest(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"]))
    assert est.dof == 1, est.report()
    assert est.residuals[0] < 1e-4 and est.anchors >= 100, est.report()


@pytest.mark.slow
def test_reduced_model_stays_on_the_adams_solution(a02_data, tmp_path):
    """Issue 11's A02 figure: ``mc2fmu train --dof 1`` with every default on the 20 s run (81
    bodies, 972 natural coordinates, full turns through the collinear configurations), rolled
    out from the run's initial state: B0 within 1e-2 m of the published ADAMS solution."""
    from examples import a02
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    _, folder = a02_data
    model_dir = tmp_path / "model"
    train(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], TrainConfig(dof=1), model_dir)
    r = a02.model_b0(model_dir, folder)
    assert a02.b0_error(r["t"], r["B0"], a02.read_adams()) < 1e-2
    assert r["nrmse"] < 5e-3
