"""`mc2fmu train` / `mc2fmu simulate`: argument errors, artifact contents, and accuracy on
bundled mechanisms measured against the engine's runs (not against the model's own output)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main
from mc2fmu.mechanism import load_mechanism
from mc2fmu.metrics import position_nrmse
from mc2fmu.poses import write_run

from .conftest import analytic_motion

FAST = ["--adam-epochs", "20", "--lbfgs-iters", "20", "--samples", "200"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--dof", "0"], ["--dof 0", ">= 1"]),
        (["--dof", "1", "--coords", "arm.vx"], ["--coords", "arm.vx", "not usable"]),
        (["--dof", "1", "--coords", "wheel.y"], ["--coords", "wheel.y", "no body 'wheel'"]),
        (["--dof", "2", "--coords", "arm.x"], ["--coords", "1 column", "--dof is 2"]),
        (["--dof", "1", "--hidden", "32,x"], ["--hidden", "positive integers"]),
        (["--dof", "1", "--activation", "relu"], ["activation 'relu'", "tanh"]),
        (["--dof", "1", "--step-map", "rk9"], ["step map 'rk9'", "centred"]),
    ],
)
def test_bad_arguments_give_a_message(capsys, tmp_path, toy_mechanism, toy_run, args, fragments):
    out = tmp_path / "model"
    code, _, err = run_cli(capsys, "train", toy_mechanism, toy_run, *args, *FAST, "-o", out)
    assert code == 2, err
    assert "Traceback" not in err
    for frag in fragments:
        assert frag in err, (frag, err)
    assert not out.exists()


def test_too_short_dataset(capsys, tmp_path, toy_mechanism):
    m = analytic_motion(n=30)
    run = tmp_path / "short.csv"
    write_run(run, m["t"], ["arm", "rod"], m["origin"], m["rotation"], ["tau", "F"], m["u"])
    code, _, err = run_cli(capsys, "train", toy_mechanism, run, "--dof", "1", *FAST, "-o", tmp_path / "model")
    assert code == 2
    assert "28 usable time triplets" in err and "at least 40" in err
    assert not (tmp_path / "model").exists()


def test_nan_during_training_is_reported(capsys, tmp_path, toy_mechanism, toy_run, monkeypatch):
    import torch

    from mc2fmu import train as train_mod

    original = train_mod.LossFunction.__call__
    calls = {"n": 0}

    def poisoned(self, T):
        loss, parts = original(self, T)
        calls["n"] += 1
        if calls["n"] > 5:
            loss = loss * torch.tensor(float("nan"), dtype=loss.dtype)
        return loss, parts

    monkeypatch.setattr(train_mod.LossFunction, "__call__", poisoned)
    code, _, err = run_cli(capsys, "train", toy_mechanism, toy_run, "--dof", "1", *FAST, "-o", tmp_path / "model")
    assert code == 2
    assert "diverged" in err and "nan" in err.lower()
    assert not (tmp_path / "model").exists()


def test_artifact_holds_what_later_stages_need(capsys, tmp_path, toy_mechanism, toy_run):
    out = tmp_path / "model"
    code, stdout, err = run_cli(capsys, "train", toy_mechanism, toy_run, "--dof", "1", *FAST, "-o", out, "--seed", "3")
    assert code == 0, err
    meta = json.loads((out / "model.json").read_text())
    for key in ("mechanism", "layout", "dof", "dt", "architecture", "normalisation", "envelope",
                "initial_state", "training", "versions", "seed", "angles", "coords"):
        assert key in meta, key
    assert meta["seed"] == 3 and meta["dt"] == pytest.approx(0.01)
    assert meta["architecture"]["activation"] == "tanh"
    assert set(meta["versions"]) >= {"mc2fmu", "torch", "numpy"}
    env = meta["envelope"]
    assert env["q_min"][0] <= meta["initial_state"]["q"][0] <= env["q_max"][0]
    with np.load(out / "weights.npz") as w:
        assert "M" in w.files and "decoder.net.layers.0.weight" in w.files


def test_training_is_deterministic(tmp_path, toy_mechanism, toy_run):
    for name in ("a", "b"):
        assert main(["train", str(toy_mechanism), str(toy_run), "--dof", "1", *FAST, "-q", "-o", str(tmp_path / name)]) == 0
    with np.load(tmp_path / "a" / "weights.npz") as a, np.load(tmp_path / "b" / "weights.npz") as b:
        for k in a.files:
            assert np.array_equal(a[k], b[k]), k


# ---------------------------------------------------------------------------- accuracy (slow)


def _accuracy(reference_run, tmp_path, name, extra):
    train = reference_run(name, "train")
    folder = Path(train["path"]).parent.parent
    mech = folder / "mechanism.toml"
    model = tmp_path / "model"
    assert main(["train", str(mech), train["path"], *extra, "-q", "-o", str(model)]) == 0
    result = {}
    for exc in ("train", "low", "shape", "high"):
        ref = reference_run(name, exc)
        out = tmp_path / f"{exc}.csv"
        assert main(["simulate", str(model), str(mech), ref["path"], "-q", "-o", str(out)]) == 0
        # read the written poses back and compare with the ENGINE's arrays
        mechanism = load_mechanism(mech)
        sim = read_run_lenient(out, mechanism)
        result[exc] = (position_nrmse(sim["origin"], ref["origin"]), sim)
    return result


def read_run_lenient(path, mechanism):
    """The simulate output: poses (NaN after a blow-up) plus q, qd and envelope columns."""
    import csv

    with open(path) as fh:
        header = next(csv.reader(fh))
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    col = {c: i for i, c in enumerate(header)}
    n = len(table)
    origin = np.stack([np.stack([table[:, col[f"{b}.{a}"]] for a in "xyz"], -1) for b in mechanism.body_names], 1)
    return {"t": table[:, col["time"]], "origin": origin, "envelope": table[:, col["envelope"]],
            "header": header, "n": n}


@pytest.mark.slow
def test_known_coordinates_accuracy_four_bar(reference_run, tmp_path):
    res = _accuracy(reference_run, tmp_path, "four_bar", ["--dof", "1", "--coords", "crank.R11"])
    assert res["train"][0] <= 0.005
    assert res["low"][0] <= 0.02 and res["shape"][0] <= 0.02
    # the high run leaves the trained range: the envelope flag rises before the error passes 10 %
    ref = reference_run("four_bar", "high")
    sim = res["high"][1]
    err = np.linalg.norm(np.nan_to_num(sim["origin"], nan=1e9) - ref["origin"], axis=-1).max(-1)
    err /= np.sqrt(np.mean((ref["origin"] - ref["origin"].mean(0)) ** 2))
    from mc2fmu.envelope import LEAVE_THRESHOLD

    flagged = np.flatnonzero(sim["envelope"] > LEAVE_THRESHOLD)
    assert flagged.size
    over = np.flatnonzero(err > 0.10)
    assert over.size == 0 or flagged[0] < over[0]
    assert sim["header"][-3:] == ["q", "qd", "envelope"]


@pytest.mark.slow
def test_autoencoder_accuracy_slider_crank(reference_run, tmp_path):
    res = _accuracy(reference_run, tmp_path, "slider_crank", ["--dof", "1"])
    assert res["train"][0] <= 0.005
    assert res["low"][0] <= 0.02 and res["shape"][0] <= 0.02
