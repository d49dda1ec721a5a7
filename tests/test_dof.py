"""``estimate-dof`` / ``--dof auto``: the number of minimal coordinates from the data, checked
against the bundled mechanisms' known degrees of freedom (Exudyn's own count,
``examples.reference.degrees_of_freedom``), on every excitation, and refused when the data
cannot decide."""

from __future__ import annotations

import re
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
    """The 3-RRR's 10 s runs pass few configurations five times (a 3-DOF path seldom returns),
    and its slow motion crosses its middle only 4-7 times, too few for the fit over the whole
    motion: the estimate is refused with the reason and the fix, never a wrong number."""
    run = reference_run("three_rrr", excitation)
    est = estimate_dataset_dof(ingest(Path(run["path"]).parent.parent / "mechanism.toml", [run["path"]]))
    assert est.dof in (None, 3), est.report()
    if est.dof is None:  # neither fit decides: the local ones for too few passes, the global one says why
        assert "--dof N" in est.reason and "the local fits do not decide: only" in est.report()


def test_a_single_pass_does_not_decide():
    """A 2-DOF motion that never returns to a configuration (one sweep): no revisits, no verdict."""
    t = np.linspace(0.0, 1.0, 4001)
    a, b = 0.8 * t, 0.5 * np.sin(2.0 * t)
    x = np.stack([np.cos(a), np.sin(a), np.cos(b), np.sin(b), a * b], axis=1)
    est = estimate_dof(x, np.gradient(x, t, axis=0), [0, len(t)])
    assert est.dof is None and "does not return" in est.reason and "--dof N" in est.reason
    assert "the local fits do not decide: only 0 of" in est.report()


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


def _synthetic_manifold(dof: int, weak: float = 1.0, seconds: float = 10.0, seed: int = 0):
    """A smooth ``dof``-dimensional manifold in R^(3 dof + 6), the graph of a quadratic-plus-
    cubic map of its coordinates (curved about as much as a platform's poses: 2-4 % of the
    motion outside its first ``dof`` principal directions),
    swept by a multi-tone motion of 10 s at 1 ms (each coordinate 0.3-3 Hz, up to about 0.1,
    like a platform's 6 deg); the last coordinate's amplitude is scaled by ``weak``.  Returns x, xd, offsets and
    the body each coordinate belongs to (three per 'body'), and the map's linear part A (n, dof)."""
    rng = np.random.default_rng(seed)
    n = 3 * dof + 6
    t = np.arange(0.0, seconds, 1e-3)
    q = np.zeros((len(t), dof))
    for j in range(dof):
        for a, f in zip(rng.uniform(0.3, 1.0, 3), rng.uniform(0.3, 3.0, 3)):
            q[:, j] += a * np.sin(2.0 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
    q *= 0.04 * np.sqrt(6.0 / dof)  # the same overall reach at every dimension
    q[:, -1] *= weak
    A = np.linalg.qr(rng.standard_normal((n, n)))[0][:, :dof]
    B = rng.standard_normal((n, dof, dof)) / 4.0 / np.sqrt(dof)
    C = rng.standard_normal((n, dof)) / 6.0

    def embed(q):
        return q @ A.T + np.einsum("nij,ti,tj->tn", B, q, q) + (q**3) @ C.T

    x = embed(q)
    xd = np.gradient(x, t, axis=0)
    names = [f"body_{i // 3 + 1}" for i in range(n)]
    return x, xd, [0, len(t)], names, A


@pytest.mark.parametrize("dof, seconds", [(4, 10.0), (5, 10.0), (6, 10.0), (8, 30.0), (10, 30.0)])
def test_synthetic_manifolds_of_4_to_10_dimensions_are_counted(dof, seconds):
    """One run, every direction excited (10 s up to 6 dimensions, 30 s for 8 and 10): the
    local fits cannot decide in these dimensions (a path seldom returns), the fit over the
    whole motion counts them."""
    x, xd, offsets, names, _ = _synthetic_manifold(dof, seconds=seconds)
    est = estimate_dof(x, xd, offsets, names)
    assert est.dof == dof, est.report()
    assert est.method == "global" and est.residuals[dof - 1] < 1e-2 and est.residuals[dof - 2] > 0.05, est.report()
    assert "one fit over the whole motion" in est.report()


def test_a_direction_the_runs_barely_excite_is_named_not_miscounted():
    """The sixth coordinate moved at 2 % of the others: a residual between clear and fitting
    at five (1.5e-2); refused, naming the direction the fit misses (about 3 % of the first
    principal direction's reach), led by the body its linear part moves most, and what to do."""
    x, xd, offsets, names, A = _synthetic_manifold(6, weak=0.02)
    est = estimate_dof(x, xd, offsets, names)
    assert est.dof is None and 1.2e-2 < est.residuals[4] < 2e-2, est.report()
    share = re.search(r"principal direction 6 moves ([0-9.]+)% as much as the first, mostly (body_\d+)", est.reason)
    assert share, est.reason
    top = f"body_{int(np.argmax((A[:, -1] ** 2).reshape(-1, 3).sum(axis=1))) + 1}"
    assert 1.0 < float(share.group(1)) < 5.0 and share.group(2) == top, (est.reason, top)
    assert "excite it more" in est.reason and "--dof N" in est.reason


def _two_link_arm(reach: float) -> np.ndarray:
    """A planar two-link arm (2 DOF) swinging its joints by about +-reach rad, 10 s at 1 ms:
    its joints' and midpoints' coordinates, which span four linear directions (the cosines and
    sines of its two link angles)."""
    rng = np.random.default_rng(2)
    t = np.arange(0.0, 10.0, 1e-3)

    def swing():
        return sum(a * np.sin(2 * np.pi * f * t + p) for a, f, p in
                   zip(reach * rng.uniform(0.5, 1.0, 3) / 2, rng.uniform(0.3, 2.5, 3), rng.uniform(0, 6.3, 3)))

    a1, a2 = -np.pi / 2 + swing(), swing()
    p1 = 0.4 * np.stack([np.cos(a1), np.sin(a1)], axis=1)
    p2 = p1 + 0.3 * np.stack([np.cos(a1 + a2), np.sin(a1 + a2)], axis=1)
    return np.hstack([p1, p2, 0.5 * p1, 0.5 * (p1 + p2)])


@pytest.mark.parametrize("reach, guard, fragment", [(1.0, "GLOBAL_FLAT", "too large and curved"),
                                                    (2.0, "GLOBAL_EXPLAINED", "shows nothing about their number")])
def test_a_large_curved_motion_is_refused_by_the_fit_over_the_whole_motion(monkeypatch, reach, guard, fragment):
    """A 2-DOF arm's large swings fit with 3 (reach 1 rad: 8 % of the motion outside three
    principal directions) or 4 coordinates (reach 2 rad: the four directions it spans, fitted
    exactly): the global fit refuses, and without the guard it would answer that wrong number."""
    from mc2fmu.data import dof

    x = _two_link_arm(reach)
    est = dof.global_estimate(x)
    assert est.dof is None and fragment in est.reason, est.report()
    monkeypatch.setattr(dof, guard, 1e9 if guard == "GLOBAL_FLAT" else 0.0)
    assert dof.global_estimate(x).dof in (3, 4)


def test_a_platform_motion_that_never_returns_is_refused():
    """The 6-dimensional manifold swept for 2 s only: its slowest tones (0.3 Hz) do not return,
    so the motion does not show every direction it could take."""
    x, xd, offsets, names, _ = _synthetic_manifold(6, seconds=2.0)
    est = estimate_dof(x, xd, offsets, names)
    assert est.dof is None and "does not return" in est.reason and "record longer" in est.reason, est.report()
