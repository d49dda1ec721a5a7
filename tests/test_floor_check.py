"""The L-BFGS floor's check (``--lbfgs-check``, mc2fmu/reducers/autoencoder/floor_check.py):
at the floor the model is rolled out over the training runs, and an error above the check's
tolerance lowers the floor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

#: a four-bar with its crank angle's cosine as the coordinate, fitted briefly; a floor it reaches
#: within the budget (its fit falls through 1e-4 after about 100 L-BFGS iterations)
BRIEF = dict(dof=1, coords=("crank.R11",), samples=300, adam_epochs=40, lbfgs_iters=300, lbfgs_floor=1e-4)


def _checks(history) -> list[dict]:
    """The checked L-BFGS records (a progress callback gets a checked record twice: as it is made,
    without the check, and again with it)."""
    return list({e["iter"]: e for e in history if e["stage"] == "lbfgs" and "check" in e}.values())


def test_a_passing_check_is_the_simulated_training_runs_error_and_ends_training(reference_run, tmp_path):
    """The check's error is the one `mc2fmu simulate` gives on the training run (the written
    model, loaded and rolled out from the run's initial state: NRMSE of the natural coordinates'
    points over their spread), and a check that passes ends L-BFGS there."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.simulate import simulate_run
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("four_bar", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    entries = []
    art = fit(mech, [run["path"]], TrainConfig(**BRIEF, lbfgs_check=0.5), tmp_path / "m", progress=entries.append)
    checks = _checks(entries)
    assert len(checks) == 1, "one check, at the floor"
    check = checks[0]
    assert check["best_fit"] <= BRIEF["lbfgs_floor"] and check["check"] <= 0.5
    assert art.training["metrics"]["lbfgs_iterations"] == check["iter"] < BRIEF["lbfgs_iters"]
    assert "unfitted" not in art.training["metrics"]  # a fitted model is not flagged as one that did not fit

    ds = load_training_data(mech, [run["path"]])
    x = simulate_run(load_artifact(tmp_path / "m"), ds.x, ds.u)["x"]
    nrmse = np.sqrt(np.mean((x - ds.x) ** 2)) / np.sqrt(np.mean((ds.x - ds.x.mean(axis=0)) ** 2))
    assert 0 < check["check"] == pytest.approx(nrmse, rel=1e-9)


def test_a_failing_check_lowers_the_floor_and_training_goes_on(reference_run):
    """A check above the tolerance lowers the floor (by the rule of floor_check.lowered_floor:
    the fit reached times 0.5 tol / error, at least 3x lower), the records after it carry it, and training goes
    on past the iteration where the floor was first reached; with no check (0) it stops there."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train

    run = reference_run("four_bar", "train")
    ds = load_training_data(Path(run["path"]).parent.parent / "mechanism.toml", [run["path"]])
    unchecked = train(ds, TrainConfig(**BRIEF, lbfgs_check=0.0))
    assert not _checks(unchecked.history)
    first = unchecked.metrics["lbfgs_iterations"]
    assert first < BRIEF["lbfgs_iters"]

    tol = 1e-7  # no brief fit rolls out this well
    checked = train(ds, TrainConfig(**BRIEF, lbfgs_check=tol))
    check = _checks(checked.history)[0]
    assert check["iter"] == first and check["check"] > tol
    lowered = check["floor"]
    assert lowered <= 0.3 * BRIEF["lbfgs_floor"]
    reached = min(BRIEF["lbfgs_floor"], check["best_fit"])
    assert check["checked_floor"] == BRIEF["lbfgs_floor"] and lowered < check["best_fit"]
    assert lowered == pytest.approx(reached * max(1e-3, min(0.3, 0.5 * tol / check["check"])))
    after = [e for e in checked.history if e["stage"] == "lbfgs" and e["iter"] > first]
    assert after and after[0]["floor"] == lowered and all(e["floor"] <= lowered for e in after)
    assert checked.metrics["lbfgs_iterations"] > first


def test_a_run_interrupted_at_a_failed_check_resumes_to_the_uninterrupted_result(reference_run, tmp_path):
    """Interrupted (Ctrl-C) in the progress call that reports a failed check, the checkpoint
    holds the check and the lowered floor: the resumed run checks nothing twice and ends with
    the uninterrupted run's weights, iterations and floors."""
    import torch

    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer, TrainingInterrupted

    run = reference_run("four_bar", "train")
    ds = load_training_data(Path(run["path"]).parent.parent / "mechanism.toml", [run["path"]])
    cfg = TrainConfig(**{**BRIEF, "lbfgs_iters": 200}, lbfgs_check=1e-7)
    whole = train(ds, cfg)
    assert _checks(whole.history), "the brief fit reaches its floor and fails the check"

    def stop_at_the_check(entry):
        if "check" in entry:
            raise KeyboardInterrupt

    path = tmp_path / "m.checkpoint.pt"
    with pytest.raises(TrainingInterrupted):
        train(ds, cfg, stop_at_the_check, Checkpointer(path, 0.0))
    resumed = train(ds, cfg, None, Checkpointer(path, 0.0, resume=True))
    decided = lambda h: [(e["iter"], e["check"], e["checked_floor"], e["floor"]) for e in _checks(h)]  # noqa: E731
    assert decided(resumed.history) == decided(whole.history)
    assert resumed.metrics["lbfgs_iterations"] == whole.metrics["lbfgs_iterations"]
    floors = lambda h: [(e["iter"], e.get("floor")) for e in h if e["stage"] == "lbfgs"]  # noqa: E731
    assert floors(resumed.history) == floors(whole.history)
    reference = whole.model.state_dict()
    for k, v in resumed.model.state_dict().items():
        assert torch.equal(v, reference[k]), k


def test_a_check_with_no_run_to_roll_out_is_reported_as_unchecked(reference_run):
    """Runs the rollout cannot measure (shorter than 3 samples, or not moving) give no error,
    not a pass: None, which the trainer records and warns about."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.floor_check import training_rollout_nrmse

    run = reference_run("four_bar", "train")
    ds = load_training_data(Path(run["path"]).parent.parent / "mechanism.toml", [run["path"]])

    class Still:  # the run held at its first sample: nothing moves
        def runs(self):
            for r in ds.runs():
                r.x[:] = r.x[0]
                yield r

        def __getattr__(self, name):
            return getattr(ds, name)

    assert training_rollout_nrmse(None, Still()) is None  # no model is needed: no run is rolled out


def test_training_whose_check_has_nothing_to_roll_out_stops_at_the_floor_with_a_warning(reference_run, monkeypatch,
                                                                                         caplog):
    """No run to measure: the record's check is None (not an error that passed), the floor
    stands and training stops there, with a warning that says it is unchecked."""
    import logging

    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder import trainer
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("four_bar", "train")
    ds = load_training_data(Path(run["path"]).parent.parent / "mechanism.toml", [run["path"]])
    monkeypatch.setattr(trainer, "training_rollout_nrmse", lambda model, ds: None)
    with caplog.at_level(logging.WARNING):
        result = trainer.train(ds, TrainConfig(**BRIEF, lbfgs_check=1e-7))
    (check,) = _checks(result.history)
    assert check["check"] is None and check["floor"] == BRIEF["lbfgs_floor"]
    assert result.metrics["lbfgs_iterations"] == check["iter"] < BRIEF["lbfgs_iters"]
    assert any("unchecked" in r.getMessage() for r in caplog.records)


def test_a_run_at_rest_beside_a_moving_one_is_left_out_of_the_check(trained, tmp_path, monkeypatch):
    """Training runs of which one is at rest (every sample its first) and one moves: the check's
    error is the moving run's alone, as `mc2fmu simulate` gives it (the still run neither
    counts as a perfect rollout nor makes the check unchecked)."""
    import csv
    import gzip

    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.simulate import simulate_run
    from mc2fmu.reducers.autoencoder import floor_check

    model_dir, mech, run_path = trained("four_bar")
    art = load_artifact(model_dir)
    with gzip.open(run_path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header, first = rows[0], rows[1]
    t = header.index("time")
    still = tmp_path / "still.csv"
    with open(still, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows[1:2001]:
            w.writerow([row[i] if i == t else first[i] for i in range(len(header))])
    monkeypatch.setattr(floor_check, "to_runtime", lambda model, dt: art.model)  # the trained model's own step
    mixed = load_training_data(mech, [str(still), run_path])
    assert len(list(mixed.runs())) == 2
    got = floor_check.training_rollout_nrmse(None, mixed)

    ds = load_training_data(mech, [run_path])
    x = simulate_run(art, ds.x, ds.u)["x"]
    want = np.sqrt(np.mean((x - ds.x) ** 2)) / np.sqrt(np.mean((ds.x - ds.x.mean(axis=0)) ** 2))
    assert np.isfinite(want) and want > 0
    assert got == pytest.approx(want, rel=1e-9)
