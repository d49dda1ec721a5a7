"""``estimate-dof`` / ``--dof auto``: the number of minimal coordinates from the data, checked
against the bundled mechanisms' known degrees of freedom (Exudyn's own count,
``examples.reference.degrees_of_freedom``), on every excitation, and refused when the data
cannot decide."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main
from mc2fmu.data.dataset import ingest
from mc2fmu.data.dof import estimate_dataset_dof, estimate_dof

pytest.importorskip("exudyn")

NAMES = ["four_bar", "slider_crank", "two_bar", "macpherson", "five_bar", "spatial_four_bar"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("excitation", ["train", "low", "shape", "high"])
def test_estimate_matches_the_engines_degrees_of_freedom(reference_run, name, excitation):
    from examples.reference import degrees_of_freedom

    run = reference_run(name, excitation)
    ds = ingest(Path(run["path"]).parent.parent / "mechanism.toml", [run["path"]])
    est = estimate_dataset_dof(ds)
    assert est.dof == degrees_of_freedom(name)["dof"], est.report()
    # the evidence is clear, not a coin toss: the fit at the estimate, and the drop to it
    previous = 1.0 if est.dof == 1 else est.residuals[est.dof - 2]
    assert est.residuals[est.dof - 1] < 1e-2 and previous > 50 * est.residuals[est.dof - 1], est.report()
    assert est.anchors >= 20


@pytest.mark.parametrize("excitation", ["train", "high"])
def test_three_dof_runs_that_seldom_return_are_refused_never_misjudged(reference_run, excitation):
    """The 3-RRR's 10 s runs pass few configurations five times (a 3-DOF path seldom returns):
    the estimate is refused with the reason and the fix, never a wrong number."""
    run = reference_run("three_rrr", excitation)
    est = estimate_dataset_dof(ingest(Path(run["path"]).parent.parent / "mechanism.toml", [run["path"]]))
    assert est.dof in (None, 3), est.report()
    if est.dof is None:
        assert "passed" in est.reason and "--dof N" in est.reason


def test_a_single_pass_does_not_decide():
    """A 2-DOF motion that never returns to a configuration (one sweep): no revisits, no verdict."""
    t = np.linspace(0.0, 1.0, 4001)
    a, b = 0.8 * t, 0.5 * np.sin(2.0 * t)
    x = np.stack([np.cos(a), np.sin(a), np.cos(b), np.sin(b), a * b], axis=1)
    est = estimate_dof(x, np.gradient(x, t, axis=0), [0, len(t)])
    assert est.dof is None and "passed" in est.reason and "--dof N" in est.reason


def test_no_motion_does_not_decide():
    x = np.ones((3000, 6)) + 1e-12 * np.random.default_rng(0).standard_normal((3000, 6))
    est = estimate_dof(x, np.zeros_like(x), [0, 3000])
    assert est.dof is None and "hardly move" in est.reason


def test_a_barely_excited_direction_still_counts():
    """A second direction moved at 0.4 % or 1 % of the first is a direction of motion at the
    scale of the neighbourhoods: no quadratic in one coordinate fits them."""
    rng = np.random.default_rng(1)
    t = np.linspace(0.0, 20.0, 20001)
    q1 = np.sin(2.0 * t) + 0.5 * np.sin(3.1 * t)

    def estimate(amplitude):
        q2 = amplitude * np.sin(1.3 * t + 1.0)
        x = np.stack([q1, q1**2 * 0.1, q2, 0.0 * t + 1.0], axis=1) + 1e-9 * rng.standard_normal((len(t), 4))
        return estimate_dof(x, np.gradient(x, t, axis=0), [0, len(t)])

    for amplitude in (0.004, 0.01):
        est = estimate(amplitude)
        assert est.dof == 2 and est.residuals[0] > 0.1 and est.residuals[1] < 1e-5, est.report()


def test_cli_estimate_dof_prints_the_evidence(reference_run, capsys):
    run = reference_run("two_bar", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    assert main(["estimate-dof", str(mech), run["path"]]) == 0
    out = capsys.readouterr().out
    assert "estimated degrees of freedom: 2" in out and "quadratic in k coordinates" in out


def test_cli_estimate_dof_undecided_is_an_error(tmp_path, toy_mechanism, toy_run, capsys):
    """The toy run (two free bodies, 2 s of one smooth motion) revisits nothing."""
    assert main(["estimate-dof", str(toy_mechanism), str(toy_run)]) == 2
    captured = capsys.readouterr()
    assert "undecided" in captured.out and "error: the runs do not decide" in captured.err


@pytest.mark.slow
def test_train_without_dof_uses_the_estimate(reference_run, tmp_path, capsys):
    """--dof auto is the default: no --dof, and the estimate (with its evidence) decides."""
    run = reference_run("two_bar", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    assert main(["train", str(mech), run["path"], "--samples", "64", "--adam-epochs", "2",
                 "--lbfgs-iters", "2", "-o", str(tmp_path / "m")]) == 0
    captured = capsys.readouterr()
    assert "--dof auto: 2" in captured.err and "2 minimal coordinate(s)" in captured.out
