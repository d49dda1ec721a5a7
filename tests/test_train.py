"""`mc2fmu train` / `mc2fmu simulate`: argument errors, artifact contents, the loss terms,
checkpoints and the L-BFGS schedule, on small models.  The accuracy of default trainings on
the bundled mechanisms is benchmarks/targets.py's."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mc2fmu.cli import main
from mc2fmu.mechanics.natural import ForceModel
from mc2fmu.data.poses import write_run

from .conftest import analytic_motion

FAST = ["--adam-epochs", "20", "--lbfgs-iters", "20", "--samples", "200"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own errors (e.g. a choice not in a registry)
        code = exc.code
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
        (["--dof", "1", "--activation", "relu"], ["--activation", "invalid choice: 'relu'", "tanh"]),
        (["--dof", "1", "--step-map", "rk9"], ["--step-map", "invalid choice: 'rk9'", "centred"]),
        (["--dof", "1", "--loss", "energy"], ["--loss", "invalid choice: 'energy'", "'sim', 'appendix'"]),
        (["--dof", "1", "--warmup", "kin"], ["--warmup", "invalid choice: 'kin'", "'rec', 'none'"]),
        (["--dof", "1", "--reducer", "pca"], ["--reducer", "invalid choice: 'pca'", "autoencoder"]),
        (["--dof", "1", "--rollout", "-2"], ["--rollout: -2", ">= 0"]),
        (["--dof", "1", "--rollout-weight", "-1"], ["--rollout-weight -1", ">= 0"]),
        (["--dof", "1", "--rollout", "300"], ["windows of 302 samples", "smaller --rollout"]),
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


@pytest.mark.parametrize("field, value, fragments", [
    ("activation", "relu", ["--activation 'relu'", "tanh, sigmoid, softplus"]),
    ("step_map", "rk9", ["--step-map 'rk9'", "centred, paper"]),
    ("loss", "energy", ["--loss 'energy'", "sim, appendix"]),
    ("warmup", "kin", ["--warmup 'kin'", "rec, none"]),
])
def test_library_config_is_checked_against_the_registries(field, value, fragments):
    """Library callers (no argparse) get the same rules, from the same registries."""
    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    with pytest.raises(TrainingError) as exc:
        TrainConfig(dof=1, **{field: value}).validate()
    assert all(f in str(exc.value) for f in fragments), str(exc.value)


def test_cli_options_are_the_config_fields():
    """Every option of the reducer's config reaches the config, under its field's name."""
    import argparse

    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.base import add_config_arguments, config_from_args

    p = argparse.ArgumentParser()
    add_config_arguments(p, TrainConfig)
    cfg = config_from_args(TrainConfig, p.parse_args(
        ["--dof", "2", "--coords", "a.x, b.y", "--hidden", "16,8", "--lr", "0.01", "--rollout", "3",
         "--activation", "sigmoid", "--seed", "7"]))
    assert cfg == TrainConfig(dof=2, coords=("a.x", "b.y"), hidden=(16, 8), adam_lr=0.01, rollout_steps=3,
                              activation="sigmoid", seed=7)
    assert config_from_args(TrainConfig, p.parse_args(["--dof", "1"])) == TrainConfig(dof=1)


def test_nan_during_training_is_reported(capsys, tmp_path, toy_mechanism, toy_run, monkeypatch):
    import torch

    from mc2fmu.reducers.autoencoder import trainer as train_mod

    original = train_mod.LossFunction.__call__
    calls = {"n": 0}

    def poisoned(self, T, **kw):
        loss, parts = original(self, T, **kw)
        calls["n"] += 1
        if calls["n"] > 5:
            loss = loss * torch.tensor(float("nan"), dtype=loss.dtype)
        return loss, parts

    monkeypatch.setattr(train_mod.LossFunction, "__call__", poisoned)
    code, _, err = run_cli(capsys, "train", toy_mechanism, toy_run, "--dof", "1", *FAST, "-o", tmp_path / "model")
    assert code == 2
    assert "diverged" in err and "nan" in err.lower()
    assert not (tmp_path / "model").exists()


def test_a_training_that_did_not_fit_says_so(capsys, tmp_path, toy_mechanism, toy_run):
    """A model whose decoded motion misses the data by more than a tenth of its spread (here:
    no optimisation at all, the initial weights) is written with a warning that names the seed
    and what to do, and its record says it is unfitted (a fitted one: test_floor_check)."""
    out = tmp_path / "model"
    code, _, err = run_cli(capsys, "train", toy_mechanism, toy_run, "--dof", "1", "--samples", "100",
                           "--adam-epochs", "0", "--lbfgs-iters", "0", "--seed", "5", "-o", out)
    assert code == 0, err
    text = " ".join(err.split())
    assert "did not fit the data" in text and "Seed 5" in text and "--seeds 4" in text
    assert json.loads((out / "model.json").read_text())["training"]["metrics"]["unfitted"] is True


def test_every_commands_help_prints(capsys):
    """``--help`` of every command exits 0 (argparse %-formats help texts: a literal % in one
    broke ``train --help``), and ``train --help`` lists every reducer's options."""
    import argparse

    from mc2fmu.cli import build_parser
    from mc2fmu.reducers.base import REDUCERS, option_fields

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in sub.choices:
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0, command
        text = capsys.readouterr().out
        assert text.startswith("usage:"), command
        if command == "train":
            for entry in REDUCERS.values():
                for f in option_fields(entry.config_class()):
                    assert f.metadata["flag"] in text, f.metadata["flag"]


def test_artifact_holds_what_later_stages_need(capsys, tmp_path, toy_mechanism, toy_run):
    out = tmp_path / "model"
    code, stdout, err = run_cli(capsys, "train", toy_mechanism, toy_run, "--dof", "1", *FAST, "-o", out, "--seed", "3")
    assert code == 0, err
    meta = json.loads((out / "model.json").read_text())
    for key in ("format", "version", "reducer", "kind", "mechanism", "layout", "dof", "dt", "envelope",
                "initial_state", "training", "versions", "model", "arrays", "resources", "angles", "coordinates"):
        assert key in meta, key
    assert meta["version"] == 2 and meta["reducer"] == "autoencoder" and meta["kind"] == "manifold"
    assert meta["training"]["seed"] == 3 and meta["dt"] == pytest.approx(0.01)
    assert meta["model"]["decoder"]["activation"] == "tanh" and meta["model"]["step_map"] == "centred"
    assert set(meta["versions"]) >= {"mc2fmu", "torch", "numpy"}
    env = meta["envelope"]
    assert env["q_min"][0] <= meta["initial_state"]["q"][0] <= env["q_max"][0]
    with np.load(out / "arrays.npz") as w:
        assert {"M", "decoder.W0", "encoder.W0"} <= set(w.files)
        assert {k: list(w[k].shape) for k in w.files} == meta["arrays"]
    assert sorted(meta["resources"]) == sorted(f"onnx/{g}.onnx" for g in ("decoder", "encoder", "positions", "rhs", "step"))


def test_training_is_deterministic(tmp_path, toy_mechanism, toy_run):
    for name in ("a", "b"):
        assert main(["train", str(toy_mechanism), str(toy_run), "--dof", "1", *FAST, "-q", "-o", str(tmp_path / name)]) == 0
    with np.load(tmp_path / "a" / "arrays.npz") as a, np.load(tmp_path / "b" / "arrays.npz") as b:
        for k in a.files:
            assert np.array_equal(a[k], b[k]), k


@pytest.mark.parametrize("warmup", ["rec", "none"])
def test_warmup_fits_the_kinematics_before_the_full_loss(toy_mechanism, toy_run, warmup):
    """--warmup rec: Adam minimises L_rec alone (its gradient is L_rec's), L-BFGS the full loss,
    and the kept weights are the full loss's best, not the warm-up's (smaller, incomparable) one."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train

    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(dof=1, adam_epochs=30, lbfgs_iters=40, samples=200, warmup=warmup)
    res = train(ds, cfg)
    adam = [e for e in res.history if e["stage"] == "adam"]
    lbfgs = [e for e in res.history if e["stage"] == "lbfgs"]
    assert adam and lbfgs and all("dyn" in e for e in lbfgs)
    if warmup == "rec":
        assert all(set(e) & {"dyn", "vel", "acc", "roll"} == set() for e in adam)
        assert all(e["loss"] == e["rec"] for e in adam)
    else:
        assert all("dyn" in e for e in adam)
    assert res.metrics["val_loss"] == min(e["val"] for e in lbfgs)


# ---------------------------------------------------------------------------- loss terms


def _toy_loss(toy_mechanism, toy_run, **kw):
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import LossFunction, loss_scales
    from mc2fmu.reducers.autoencoder.trainer import build_model
    from mc2fmu.reducers.autoencoder.samples import make_windows

    torch.manual_seed(0)
    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(dof=1, angles="none", encoder_hidden=(8,), hidden=(8,), **kw)
    model = build_model(ds, cfg, [False])
    W = make_windows(ds, 60, cfg.window)
    return ds, model, W, LossFunction(model, cfg, [False], loss_scales(cfg, model, ds, W), ds.layout)


def test_windows_are_consecutive_samples(toy_mechanism, toy_run):
    ds, _, W, _ = _toy_loss(toy_mechanism, toy_run, rollout_steps=4)
    assert W.x.shape[1] == 6 and len(W) == 60
    x = torch.as_tensor(ds.x)
    start = int(np.flatnonzero((ds.x == W.x[7, 0].numpy()).all(axis=1))[0])
    assert torch.equal(W.x[7], x[start:start + 6]) and torch.equal(W.u[7], torch.as_tensor(ds.u)[start:start + 6])


@pytest.mark.parametrize("step_map", ["centred", "paper"])
def test_rollout_term_is_the_k_step_rollout_residual(toy_mechanism, toy_run, step_map):
    K = 3
    _, model, W, loss = _toy_loss(toy_mechanism, toy_run, rollout_steps=K, step_map=step_map)
    with torch.no_grad():
        got = loss.terms(W)["roll"]
        # by hand, one window at a time, every K-th window, with the simulation's ReducedModel.step
        total, count = 0.0, 0
        for j in range(0, len(W), K):
            x, u = W.x[j], W.u[j]
            q = [model.encoder(x[0:1]), model.encoder(x[1:2])]
            for k in range(1, K + 1):
                q.append(model.step(q[-2], q[-1], u[k:k + 1], W.dt))
                err = model.decoder(q[-1]) - model.decoder(model.encoder(x[k + 1:k + 2]))
                drift = k * (k + 1) / 2 * W.dt**2  # displacement of a unit acceleration error after k steps
                total += float(((err / drift / loss.a_scale) ** 2).sum())
                count += err.numel()
    assert float(got) == pytest.approx(total / count, rel=1e-12)
    assert float(got) > 0


def test_one_step_rollout_of_the_paper_map_is_the_dynamics_term(toy_mechanism, toy_run):
    _, _, W, loss = _toy_loss(toy_mechanism, toy_run, rollout_steps=1, step_map="paper")
    with torch.no_grad():
        parts = loss.terms(W)
    assert float(parts["roll"]) == pytest.approx(float(parts["dyn"]), rel=1e-12)


def ellipse_autoencoder(mass: float = 1.0, force=(0.0, 0.0)):
    """An exact autoencoder for a point on the ellipse ``x = c + A (cos q, sin q)`` (a bar
    spinning in a plane), ``q = atan2(A^-1 (x - c))`` (linear layers, an angle-type coordinate),
    of mass ``mass`` under a constant ``force``: the model, ``A`` and ``c`` (tensors)."""
    from mc2fmu.reducers.autoencoder.torch_model import Decoder, NeuralEncoder, TorchManifoldModel

    A = np.array([[0.7, -0.2], [0.3, 0.5]])
    c = np.array([0.1, -0.4])
    dec = Decoder(1, 2, (), "tanh", [True], np.zeros(1), np.ones(1), np.zeros(2), np.ones(2))
    enc = NeuralEncoder(2, 1, (), "tanh", [True], np.zeros(2), np.ones(2))
    Ai = np.linalg.inv(A)
    with torch.no_grad():
        dec.net.layers[0].weight.copy_(torch.as_tensor(A))
        dec.net.layers[0].bias.copy_(torch.as_tensor(c))
        enc.net.layers[0].weight.copy_(torch.as_tensor(Ai))
        enc.net.layers[0].bias.copy_(torch.as_tensor(-Ai @ c))
    forces = ForceModel(np.asarray(force, dtype=float), np.zeros((2, 0)), np.zeros((0, 2, 2)))
    return TorchManifoldModel(dec, enc, mass * np.eye(2), forces, "centred"), torch.as_tensor(A), torch.as_tensor(c)


def _spinning_bar_autoencoder():
    """:func:`ellipse_autoencoder` (unit mass, no force) and samples of a path through +-pi."""
    model, At, c = ellipse_autoencoder()
    t = torch.linspace(0, 2, 41, dtype=torch.float64)
    q, qd, qdd = 0.3 + 2 * t + 1.5 * t**2, 2 + 3 * t, 3 + 0 * t  # through +-pi: the atan2 branch cut
    cs, sc = torch.stack([torch.cos(q), torch.sin(q)], 1), torch.stack([-torch.sin(q), torch.cos(q)], 1)
    x = torch.as_tensor(c) + cs @ At.T
    xd = qd[:, None] * (sc @ At.T)
    xdd = qdd[:, None] * (sc @ At.T) - (qd**2)[:, None] * (cs @ At.T)
    return model, x, xd, xdd


def test_appendix_loss_is_zero_for_an_exact_autoencoder():
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import LossFunction

    model, x, xd, xdd = _spinning_bar_autoencoder()
    loss = LossFunction(model, TrainConfig(dof=1, loss="appendix", rigidity_weight=0.0), [True],
                        {k: np.ones(2) for k in "xva"})
    with torch.no_grad():
        vel, acc = loss.kinematic(x, xd, xdd)
        assert float(vel) < 1e-26 and float(acc) < 1e-24
        # not vacuous: a slightly wrong decoder (curvature) shows in both terms
        model.decoder.net.layers[0].weight[0, 0] += 1e-3
        vel, acc = loss.kinematic(x, xd, xdd)
    assert float(vel) > 1e-9 and float(acc) > 1e-8


def test_curvature_term_is_the_reconstruction_errors_acceleration():
    """L_curv is zero for an exact autoencoder; for a decoder off by a smooth error e(q) it is
    the mean square of d2 e(q(t)) / dt2 along the path, the analytic second derivative (to the
    finite difference's O(dt^2))."""
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import LossFunction
    from mc2fmu.reducers.autoencoder.samples import Windows

    model, _, _, _ = _spinning_bar_autoencoder()
    layer = model.decoder.net.layers[0]
    A, c = layer.weight.detach().clone(), layer.bias.detach().clone()
    dt = 5e-4
    t = torch.arange(0, 1.0 + dt / 2, dt, dtype=torch.float64)
    q = 0.3 + 2 * t + 1.5 * t**2  # through +-pi
    x = c + torch.stack([torch.cos(q), torch.sin(q)], 1) @ A.T
    rows = torch.arange(1, len(t) - 1)[:, None] + torch.arange(-1, 2)
    W = Windows(x[rows], torch.zeros_like(x[rows]), torch.zeros(len(rows), 3, 0, dtype=torch.float64), dt)
    a_scale = np.array([2.0, 0.5])  # the accelerations' spread scales the term, not x's or v's
    loss = LossFunction(model, TrainConfig(dof=1, curvature_weight=1.0, rigidity_weight=0.0), [True],
                        {"x": np.ones(2), "v": np.full(2, 3.0), "a": a_scale})
    with torch.no_grad():
        assert float(loss.terms(W)["curv"]) < 1e-16  # rounding: 1e-16 / dt^2 = 4e-10, squared
        layer.weight[0, 0] += 1e-3  # e(q) = (1e-3 cos q, 0)
        got = float(loss.terms(W)["curv"])
    qm, qd, qdd = q[1:-1], 2 + 3 * t[1:-1], 3.0
    e2 = 1e-3 * (-torch.sin(qm) * qdd - torch.cos(qm) * qd**2)
    assert got == pytest.approx(float(((e2 / a_scale[0]) ** 2).mean() / 2), rel=1e-4)


def test_curvature_term_in_hull_coordinates_is_the_natural_coordinates_one(toy_mechanism, toy_run):
    """With a hull decoder L_curv is taken in hull coordinates; it equals the natural-coordinate
    second difference of the decoded triplet against the data's, scaled as an acceleration."""
    _, model, W, loss = _toy_loss(toy_mechanism, toy_run, curvature_weight=1.0)
    assert loss.reduced
    with torch.no_grad():
        got = float(loss.terms(W)["curv"])
        q_prev, q, q_next = loss.encode_triplets(W)
        x = [model.decoder(a) for a in (q_prev, q, q_next)]
        d2 = (x[0] - 2 * x[1] + x[2]) - (W.x[:, 0] - 2 * W.x[:, 1] + W.x[:, 2])
        want = float((d2 / W.dt**2 / loss.a_scale).pow(2).mean())
    assert got > 0 and got == pytest.approx(want, rel=1e-6)


def test_appendix_loss_trains_and_is_reported(capsys, tmp_path, toy_mechanism, toy_run):
    out = tmp_path / "model"
    code, stdout, err = run_cli(capsys, "train", toy_mechanism, toy_run, "--dof", "1", *FAST, "--loss", "appendix",
                                "--rollout", "2", "-o", out)
    assert code == 0, err
    metrics = json.loads((out / "model.json").read_text())["training"]["metrics"]
    assert {"rec", "vel", "acc", "roll"} <= set(metrics) and "dyn" not in metrics
    assert "velocity" in stdout and "rollout" in stdout


# ---------------------------------------------------------------------------- checkpoints


TINY = dict(dof=1, samples=100, adam_epochs=30, lbfgs_iters=40, encoder_hidden=(8,), hidden=(8,))
_REFERENCE: dict = {}


def _weights(model) -> dict:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _uninterrupted(ds, cfg) -> dict:
    """Weights of an uninterrupted run (the toy data is the same in every test)."""
    from mc2fmu.reducers.autoencoder.trainer import train

    if cfg not in _REFERENCE:
        _REFERENCE[cfg] = _weights(train(ds, cfg).model)
    return _REFERENCE[cfg]


def _interrupt_at(n_calls: int, exc=KeyboardInterrupt):
    calls = {"n": 0}

    def progress(entry):
        calls["n"] += 1
        if calls["n"] == n_calls:
            raise exc("stop")

    return progress


@pytest.mark.parametrize("stop_after, every", [(1, 0.0), (5, 0.0), (5, 1e-9)],
                         ids=["adam", "lbfgs", "lbfgs-periodic"])
def test_resume_gives_the_uninterrupted_weights_bit_for_bit(toy_mechanism, toy_run, tmp_path, stop_after, every):
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer, TrainingInterrupted

    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(**TINY, rollout_steps=2)
    reference = _uninterrupted(ds, cfg)
    path = tmp_path / "m.checkpoint.pt"
    # progress entries: adam 1, 26, 30, then one per 20 L-BFGS iterations
    with pytest.raises(TrainingInterrupted) as info:
        train(ds, cfg, _interrupt_at(stop_after), Checkpointer(path, every))
    assert info.value.checkpoint == path and path.exists()
    saved = torch.load(path, weights_only=True)
    assert saved["phase"] == ("adam" if stop_after == 1 else "lbfgs")
    result = train(ds, cfg, None, Checkpointer(path, every, resume=True))
    got = _weights(result.model)
    assert got.keys() == reference.keys()
    for k in reference:
        assert torch.equal(got[k], reference[k]), k


@pytest.mark.parametrize("stop_after", [5, 7], ids=["dense-library", "sparse-library"])
def test_resume_with_identify_gives_the_uninterrupted_weights(toy_mechanism, toy_run, tmp_path, stop_after):
    """--identify: interrupted while every library term trains (L-BFGS) or after the
    thresholding (the identify phase), the resumed run ends with the same weights and terms."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer, TrainingInterrupted

    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(**TINY, identify="default", identify_iters=40)
    reference = _uninterrupted(ds, cfg)
    path = tmp_path / "m.checkpoint.pt"
    # progress entries: adam 1, 26, 30, L-BFGS 20, 40, identify 20, 40; the checkpoint holds the
    # state before the step that was interrupted
    with pytest.raises(TrainingInterrupted):
        train(ds, cfg, _interrupt_at(stop_after), Checkpointer(path, 0.0))
    saved = torch.load(path, weights_only=True)
    assert saved["phase"] == ("lbfgs" if stop_after == 5 else "identify")
    if stop_after == 5:  # the dense library, every coefficient still in training
        assert saved["library"] is not None and not saved["pruned"]
    else:
        assert saved["pruned"]
    got = _weights(train(ds, cfg, None, Checkpointer(path, 0.0, resume=True)).model)
    assert got.keys() == reference.keys()
    for k in reference:
        assert torch.equal(got[k], reference[k]), k


def test_periodic_checkpoint_survives_a_crash(toy_mechanism, toy_run, tmp_path):
    """A process killed between writes (here: any exception but Ctrl-C) resumes from the last one."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(**TINY)
    reference = _uninterrupted(ds, cfg)
    path = tmp_path / "m.checkpoint.pt"
    with pytest.raises(RuntimeError):
        train(ds, cfg, _interrupt_at(5, RuntimeError), Checkpointer(path, 1e-9))
    assert path.exists()
    got = _weights(train(ds, cfg, None, Checkpointer(path, resume=True)).model)
    assert all(torch.equal(got[k], reference[k]) for k in reference)


def test_cli_ctrl_c_saves_and_resume_finishes(capsys, tmp_path, toy_mechanism, toy_run, monkeypatch):
    from mc2fmu.reducers.autoencoder import trainer as train_mod

    args = ["train", toy_mechanism, toy_run, "--dof", "1", *FAST, "-q"]
    assert run_cli(capsys, *args, "-o", tmp_path / "reference")[0] == 0

    out = tmp_path / "model"
    ckpt = tmp_path / "model.checkpoint.pt"
    original = train_mod.LossFunction.__call__
    calls = {"n": 0}

    def ctrl_c(self, W, **kw):
        calls["n"] += 1
        if calls["n"] == 40:
            raise KeyboardInterrupt
        return original(self, W, **kw)

    monkeypatch.setattr(train_mod.LossFunction, "__call__", ctrl_c)
    code, _, err = run_cli(capsys, *args, "-o", out)
    assert code == 130 and str(ckpt) in err and "--resume" in err
    assert ckpt.exists() and not out.exists()
    monkeypatch.setattr(train_mod.LossFunction, "__call__", original)

    # a second run without --resume does not silently throw the saved state away
    code, _, err = run_cli(capsys, *args, "-o", out)
    assert code == 2 and str(ckpt) in err and "--resume" in err and "delete it" in err
    # other options: a clear error naming the file, the option and the fix
    code, _, err = run_cli(capsys, *args, "--seed", "5", "--resume", "-o", out)
    assert code == 2 and str(ckpt) in err and "seed 0 -> 5" in err and "delete" in err

    code, _, err = run_cli(capsys, *args, "--resume", "-o", out)
    assert code == 0, err
    assert not ckpt.exists()
    with np.load(tmp_path / "reference" / "arrays.npz") as a, np.load(out / "arrays.npz") as b:
        for k in a.files:
            assert np.array_equal(a[k], b[k]), k


def test_resume_checks_the_data_and_the_file(capsys, tmp_path, toy_mechanism, toy_run):
    out = tmp_path / "model"

    def resume(run):
        return run_cli(capsys, "train", toy_mechanism, run, "--dof", "1", *FAST, "-q", "--resume", "-o", out)

    code, _, err = resume(toy_run)
    assert code == 2 and "model.checkpoint.pt: no checkpoint to resume from" in err

    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds = load_training_data(toy_mechanism, [toy_run])
    with pytest.raises(KeyboardInterrupt):
        train(ds, TrainConfig(dof=1, adam_epochs=20, lbfgs_iters=20, samples=200), _interrupt_at(1),
              Checkpointer(tmp_path / "model.checkpoint.pt", 0.0))
    m = analytic_motion(n=150)
    other = tmp_path / "other.csv"
    write_run(other, m["t"], ["arm", "rod"], m["origin"], m["rotation"], ["tau", "F"], m["u"])
    code, _, err = resume(other)
    assert code == 2 and "other training data" in err and "model.checkpoint.pt" in err

    (tmp_path / "model.checkpoint.pt").write_bytes(b"not a checkpoint")
    code, _, err = resume(toy_run)
    assert code == 2 and "not a readable training checkpoint" in err and "Traceback" not in err


def test_reduced_mass_conditioning_flags_a_coordinate_without_inertia():
    """M_m = J^T M J on a linear decoder x = q: the ratio of its extreme eigenvalues is that of
    M itself, 0 when a coordinate moves a massless direction (a rod's spin)."""
    from types import SimpleNamespace

    from mc2fmu.mechanics.natural import SpringModel
    from mc2fmu.models.manifold import ManifoldModel, MLPWeights
    from mc2fmu.reducers.autoencoder.reducer import reduced_mass_conditioning

    def model(M):
        z = np.zeros
        return ManifoldModel(dt=0.01, angles=(False, False), step_map_name="centred",
                             decoder=MLPWeights((np.eye(2),), (z(2),), "tanh"), q_mean=z(2), q_scale=np.ones(2),
                             x_mean=z(2), x_scale=np.ones(2), encoder=None, enc_x_mean=None, enc_x_scale=None,
                             E=np.eye(2), e0=z(2), M=M, f_g=z(2), f_B=z((2, 0)), f_C=z((0, 2, 2)),
                             springs=SpringModel.empty(2))

    data = SimpleNamespace(x=np.random.default_rng(0).normal(size=(50, 2)))
    assert reduced_mass_conditioning(model(np.diag([2.0, 0.5])), data) == pytest.approx(0.25, rel=1e-12)
    assert reduced_mass_conditioning(model(np.diag([2.0, 0.0])), data) == 0.0


def _interrupted_checkpoint(toy_mechanism, toy_run, tmp_path):
    """A TINY training interrupted at its 5th step: (dataset, config, checkpoint path, its state)."""
    import torch

    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(**TINY)
    path = tmp_path / "m.checkpoint.pt"
    with pytest.raises(RuntimeError):
        train(ds, cfg, _interrupt_at(5, RuntimeError), Checkpointer(path, 1e-9))
    state = torch.load(path, weights_only=True)
    return ds, cfg, path, state


def test_forged_checkpoints_are_refused(toy_mechanism, toy_run, tmp_path):
    """A checkpoint whose step is beyond the run (it used to skip training silently) or whose
    best weights are NaN at the end (it used to write a NaN model with exit 0) is an error."""
    import torch

    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds, cfg, path, state = _interrupted_checkpoint(toy_mechanism, toy_run, tmp_path)
    n_steps = cfg.adam_epochs + len(range(0, cfg.lbfgs_iters, 20))

    torch.save({**state, "step": 10**12}, path)
    with pytest.raises(TrainingError, match="step 1000000000000"):
        train(ds, cfg, None, Checkpointer(path, resume=True))
    nan_best = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in state["best_state"].items()}
    torch.save({**state, "step": n_steps, "best_state": nan_best}, path)
    with pytest.raises(TrainingError, match="non-finite weights"):
        train(ds, cfg, None, Checkpointer(path, resume=True))


def test_a_checkpoint_saved_before_the_curvature_option_resumes_with_the_term_off(toy_mechanism, toy_run,
                                                                                   tmp_path):
    """``--curvature-weight`` came in off and became the default (1) later: a checkpoint whose
    options predate it was trained without the term, so it resumes with the term off and is
    refused, naming the option, with the new default."""
    import dataclasses
    import json

    import torch

    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds, cfg, path, state = _interrupted_checkpoint(toy_mechanism, toy_run, tmp_path)
    assert cfg.curvature_weight == 1.0
    options = json.loads(state["config"])
    del options["curvature_weight"]
    torch.save({**state, "config": json.dumps(options)}, path)
    with pytest.raises(TrainingError, match=r"curvature_weight 0\.0 -> 1\.0"):
        train(ds, cfg, None, Checkpointer(path, resume=True))
    result = train(ds, dataclasses.replace(cfg, curvature_weight=0.0), None, Checkpointer(path, resume=True))
    assert math.isfinite(result.metrics["val_loss"])


def test_a_checkpoint_whose_best_validation_loss_is_still_infinite_resumes(toy_mechanism, toy_run, tmp_path):
    """After the warm-up the best validation loss starts again from infinity, and stays there
    when the first L-BFGS share breaks the model (the schedule then moves to every triplet): a
    checkpoint written then has ``best_val`` inf at a step > 0, and it resumes (it used to be
    refused as "not one a training leaves").  A NaN is still refused."""
    import torch

    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds, cfg, path, state = _interrupted_checkpoint(toy_mechanism, toy_run, tmp_path)
    assert state["step"] > 0 and state["phase"] == "lbfgs"
    torch.save({**state, "best_val": float("inf")}, path)
    result = train(ds, cfg, None, Checkpointer(path, resume=True))
    assert math.isfinite(result.metrics["val_loss"])
    assert all(torch.isfinite(v).all() for v in result.model.state_dict().values())
    torch.save({**state, "best_val": float("nan")}, path)
    with pytest.raises(TrainingError, match="best validation loss"):
        train(ds, cfg, None, Checkpointer(path, resume=True))


def test_training_leaves_torchs_process_wide_settings_alone(toy_mechanism, toy_run):
    """torch's deterministic-algorithms flag is process-wide: a training must not switch it,
    not even while it runs (another thread of the host would see it)."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train

    seen = set()
    before = torch.are_deterministic_algorithms_enabled()
    train(load_training_data(toy_mechanism, [toy_run]), TrainConfig(**{**TINY, "lbfgs_iters": 20}),
          lambda e: seen.add(torch.are_deterministic_algorithms_enabled()))
    assert seen == {before} and torch.are_deterministic_algorithms_enabled() == before


def test_the_progress_line_shows_what_the_stopping_rule_watches(toy_mechanism, toy_run):
    """During L-BFGS the line shows the best validation loss of the fit (L_gauge left out, as
    the floor rule has it) and its fall over the rule's window, the figure lbfgs_converged
    compares with the tolerance; no time left."""
    from mc2fmu.cli import progress_line
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.schedule import LBFGS_WINDOW, lbfgs_converged, lbfgs_fall
    from mc2fmu.reducers.autoencoder.trainer import train

    # a real training with the gauge term on (one learnt coordinate): val and val_fit differ
    entries = []
    train(load_training_data(toy_mechanism, [toy_run]), TrainConfig(**{**TINY, "lbfgs_iters": 60}), entries.append)
    lb = [e for e in entries if e["stage"] == "lbfgs"]
    assert len(lb) == 3 and all(e["val"] != e["val_fit"] for e in lb)
    for k, e in enumerate(lb):
        assert e["best_fit"] == min(x["val_fit"] for x in lb[:k + 1]) and e["fall"] is None  # under one window
        line = progress_line(e)
        assert f"best val fit {e['best_fit']:.2e} (stops at 1e-07)" in line and "left" not in line
        assert f"on {e['triplets']} triplets" in line

    # the fall over a whole window, on a made-up history
    history, loss = [], 1.0
    for it in range(20, 1001, 20):
        loss *= 0.995 if it < 600 else 0.9999
        history.append({"stage": "lbfgs", "iter": it, "val": loss, "val_fit": loss, "every": 1})
    best_then = min(e["val_fit"] for e in history if e["iter"] <= 1000 - LBFGS_WINDOW)
    fall = lbfgs_fall(history)
    assert fall == pytest.approx(1 - history[-1]["val_fit"] / best_then, rel=1e-12)
    for tol in (0.5 * fall, 2 * fall):  # converged exactly when the fall is under the tolerance
        assert lbfgs_converged(history, tol) == (fall < tol)
    assert lbfgs_fall(history[:LBFGS_WINDOW // 20 - 1]) is None  # not a whole window yet
    line = progress_line({**history[-1], "loss": 1e-6, "best_fit": loss, "fall": fall, "tol": 0.005,
                          "floor": 1e-7, "window": LBFGS_WINDOW})
    assert f"fell {100 * fall:.1f} % over the last 400 it (stops under 0.5 %)" in line


def test_damaged_checkpoints_are_refused_with_a_message(toy_mechanism, toy_run, tmp_path):
    """A checkpoint of the right version whose fields are missing, of the wrong type or shape
    (each used to end in a traceback) is a TrainingError that says to delete it."""
    import torch

    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds, cfg, path, state = _interrupted_checkpoint(toy_mechanism, toy_run, tmp_path)
    first_weight = next(iter(state["model"]))
    damaged = {
        "config missing": {k: v for k, v in state.items() if k != "config"},
        "config not JSON": {**state, "config": "{not json"},
        "config a number": {**state, "config": "3"},
        "data hash missing": {k: v for k, v in state.items() if k != "data_hash"},
        "model missing": {k: v for k, v in state.items() if k != "model"},
        "weights of the wrong shape": {**state, "model": {**state["model"], first_weight: torch.zeros(7, 3)}},
        "best loss a string": {**state, "best_val": "low"},
        "optimiser state garbage": {**state, "adam": {"state": 3}},
        "rng state garbage": {**state, "rng": torch.zeros(3)},
        "history a number": {**state, "history": 5},
    }
    for what, bad in damaged.items():
        torch.save(bad, path)
        with pytest.raises(TrainingError, match="delete it and run without --resume") as info:
            train(ds, cfg, None, Checkpointer(path, resume=True))
        assert str(path) in str(info.value), what


# ---------------------------------------------------------------------------- the data's affine hull


def test_affine_hull_of_a_body_turning_about_a_fixed_axis_is_two_dimensional():
    """Every point of a body turning about a fixed axis is affine in (cos, sin) of its angle: the
    hull of a 12-coordinate body's samples is 2-dimensional and holds angles never sampled."""
    from mc2fmu.reducers.autoencoder.samples import affine_hull

    from .conftest import rotation_about

    axis, pivot = np.array([0.3, -0.5, 0.8]), np.array([0.2, 0.1, -0.4])
    points = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.5]]) + [0.1, 0.2, 0.05]

    def nc(angle):
        R = rotation_about(axis, np.atleast_1d(angle))
        return (pivot + np.einsum("tij,kj->tki", R, points)).reshape(len(R), 12)

    x = nc(np.linspace(-0.4, 0.7, 300))
    V, spread = affine_hull(x, 1e-9)
    assert V.shape == (12, 2) and np.allclose(V.T @ V, np.eye(2), atol=1e-12) and spread.min() > 1e-3
    other = nc(np.array([2.0, -3.0])) - x.mean(axis=0)  # far outside the sampled range
    assert np.abs(other - other @ V @ V.T).max() < 1e-12
    # not vacuous: a second axis of rotation leaves the hull
    tilted = (pivot + np.einsum("ij,kj->ki", rotation_about([1.0, 0, 0], np.array([0.3]))[0],
                                points)).reshape(1, 12) - x.mean(axis=0)
    assert np.abs(tilted - tilted @ V @ V.T).max() > 1e-2


SPRING = """
[[springs]]
name = "s"
body_a = "arm"
point_a = [0.3, 0.1, 0.0]
body_b = "rod"
point_b = [0.0, 0.1, 0.4]
stiffness = 300.0
damping = 7.0
length = 0.9
"""


def _toy_model(toy_mechanism, toy_run, coords=(), spring=False):
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import build_model

    torch.manual_seed(3)
    if spring:
        toy_mechanism.write_text(toy_mechanism.read_text() + SPRING)
    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(dof=len(coords) or 2, coords=coords, encoder_hidden=(8,), hidden=(8, 8))
    model = build_model(ds, cfg, [False] * cfg.dof)
    with torch.no_grad():  # weights far from their initialisation: nothing below holds by accident
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    return ds, model


def test_decoder_keeps_the_linear_relations_of_the_data_anywhere(toy_mechanism, toy_run):
    """The toy's arm turns about the global z axis at z = 0: its points' z coordinates never
    change in the data, so the decoder (random weights, latent points far outside the data)
    must keep them exactly; the rod's move and stay free."""
    ds, model = _toy_model(toy_mechanism, toy_run)
    arm, rod = ds.layout.body("arm").slice, ds.layout.body("rod").slice
    z_of = lambda x, s: x[:, s][:, 2::3]  # noqa: E731
    assert np.ptp(z_of(ds.x, arm), axis=0).max() < 1e-12 < np.ptp(z_of(ds.x, rod), axis=0).min()
    q = torch.as_tensor(np.random.default_rng(0).normal(0.0, 20.0, (50, 2)))
    with torch.no_grad():
        x, J, H = (a.numpy() for a in model.decoder.value_jh(q))
    assert np.abs(z_of(x, arm) - z_of(ds.x, arm)[0]).max() < 1e-12
    assert np.abs(J[:, arm][:, 2::3]).max() < 1e-12 and np.abs(H[:, arm][:, 2::3]).max() < 1e-12
    assert np.ptp(z_of(x, rod), axis=0).min() > 1e-3


@pytest.mark.parametrize("coords", [(), ("arm.R11",)], ids=["autoencoder", "known"])
def test_runtime_model_is_the_trained_model_with_the_hull_folded_in(toy_mechanism, toy_run, coords):
    """The run-time (numpy) model carries the hull basis inside its first/last layers and
    computes the dynamics in natural coordinates; the torch model computes them in hull
    coordinates (projected mass, inputs, spring): decoder, encoder and right-hand side agree."""
    from mc2fmu.reducers.autoencoder.torch_model import to_runtime

    ds, model = _toy_model(toy_mechanism, toy_run, coords, spring=True)
    assert model.reduced and model.springs is not None and model.f_C.abs().max() > 0
    rt = to_runtime(model, float(ds.dt[0]))
    assert rt.decoder.widths[-1] == ds.layout.size and model.decoder.net.sizes[-1] < ds.layout.size
    rng = np.random.default_rng(1)
    q, qd, u = rng.normal(size=(20, rt.dof)), rng.normal(size=(20, rt.dof)), rng.normal(size=(20, rt.n_u))
    x = ds.x[::10] + 1e-3 * rng.normal(size=ds.x[::10].shape)  # off the hull too: the encoder projects
    with torch.no_grad():
        t = lambda a: torch.as_tensor(a)  # noqa: E731
        ref_x, ref_J, ref_H = (a.numpy() for a in model.decoder.value_jh(t(q)))
        ref_q = model.encoder(t(x)).numpy()
        ref_a = model.acceleration(t(q), t(qd), t(u)).numpy()
    x_rt, J_rt, H_rt = rt.decode_jh(q)
    for got, ref in ((x_rt, ref_x), (J_rt, ref_J), (H_rt, ref_H), (rt.encode(x), ref_q),
                     (rt.acceleration(q, qd, u), ref_a)):
        assert np.abs(got - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max())


def test_data_that_move_in_fewer_directions_than_the_dof_are_refused(capsys, tmp_path):
    """A body turning about a fixed axis spans a 2-dimensional hull: --dof 3 cannot be learnt."""
    from .conftest import rotation_about

    (tmp_path / "m.toml").write_text('name = "p"\n[[bodies]]\nname = "bar"\nmass = 1.0\ninertia = [0.01, 0.02, 0.02]\n')
    t = np.arange(400) * 1e-2
    R = rotation_about([0.0, 0.0, 1.0], 0.5 * np.sin(t))[:, None]
    write_run(tmp_path / "r.csv", t, ["bar"], np.zeros((len(t), 1, 3)), R, [], np.zeros((len(t), 0)))
    code, _, err = run_cli(capsys, "train", str(tmp_path / "m.toml"), str(tmp_path / "r.csv"), "--dof", "3", *FAST,
                           "-o", str(tmp_path / "model"))
    assert code != 0 and "move in only 2 independent direction" in err and "--dof 3" in err
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("coords", [(), ("arm.R11",)], ids=["autoencoder", "known"])
def test_hull_coordinates_give_the_natural_coordinate_loss(toy_mechanism, toy_run, coords):
    """L_rec and L_dyn taken in hull coordinates (the training default) are the natural-coordinate
    ones: the same model, evaluated both ways."""
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import LossFunction, loss_scales
    from mc2fmu.reducers.autoencoder.samples import make_windows

    ds, model = _toy_model(toy_mechanism, toy_run, coords, spring=True)
    cfg = TrainConfig(dof=model.decoder.n_q, coords=coords, rigidity_weight=0.0)
    W = make_windows(ds, 80)
    angles = [False] * cfg.dof
    with torch.no_grad():
        hull = LossFunction(model, cfg, angles, loss_scales(cfg, model, ds, W)).terms(W)
        model.reduced = False  # natural coordinates: x = h_d(q), M, f, springs as they are
        natural = LossFunction(model, cfg, angles, loss_scales(cfg, model, ds, W)).terms(W)
    for key in ("rec", "dyn"):
        assert float(natural[key]) > 1e-6 and abs(float(hull[key]) / float(natural[key]) - 1) < 1e-9, key


def test_the_lbfgs_convergence_rule():
    """Converged once the best validation loss fell by less than tol over the last window of
    iterations: a plateau stops, steady progress or a late improvement does not, tol 0 never."""
    from mc2fmu.reducers.autoencoder.schedule import lbfgs_converged

    def hist(vals):
        return [{"stage": "adam", "iter": 1, "val": 1.0}] + [
            {"stage": "lbfgs", "iter": 20 * (i + 1), "val": v} for i, v in enumerate(vals)]

    falling = [0.9 ** i for i in range(40)]  # 10 % per 20 iterations
    assert not lbfgs_converged(hist(falling), 0.05)
    plateau = falling[:20] + [falling[19] * (1 - 1e-4 * i) for i in range(1, 21)]  # 0.2 % over the last 400
    assert lbfgs_converged(hist(plateau), 0.05)
    assert not lbfgs_converged(hist(plateau), 0.0)
    assert not lbfgs_converged(hist(plateau[:19]), 0.05)  # fewer iterations than the window
    late = plateau[:-1] + [0.5 * plateau[-2]]  # a late improvement counts
    assert not lbfgs_converged(hist(late), 0.05)
    noisy = plateau[:30] + [2.0] * 10  # the best value so far counts, not the last one
    assert lbfgs_converged(hist(noisy), 0.05)
    # the fit's plateau counts, whatever L_gauge (in val, not in val_fit) still does
    gauged = [{**e, "val_fit": e["val"], "val": e["val"] + 10.0 * 0.9 ** k} for k, e in enumerate(hist(plateau))]
    assert lbfgs_converged(gauged, 0.05)
    assert not lbfgs_converged([{**e, "val_fit": e["val"]} for e in gauged], 0.05)
    # a fit at or below the floor is good enough, however fast it is still falling (0: off)
    assert not lbfgs_converged(hist(falling), 0.05, floor=0.9 ** 39 / 2)
    assert lbfgs_converged(hist(falling), 0.05, floor=0.9 ** 39)
    assert lbfgs_converged(hist(falling[:3]), 0.0, floor=0.9)  # before the window, with tol 0 too
    assert not lbfgs_converged(hist(falling), 0.0, floor=0.0)


def test_the_lbfgs_schedule_grows_the_share_of_triplets_when_the_fit_stalls():
    """The share halves when the rule holds on the records of the current share only, the
    phase converges when it holds on every triplet, and the floor ends it at any share."""
    from mc2fmu.reducers.autoencoder.schedule import lbfgs_schedule

    def records(vals, every, start=0):
        return [{"stage": "lbfgs", "iter": start + 20 * (i + 1), "val": v, "every": every} for i, v in enumerate(vals)]

    adam = [{"stage": "adam", "iter": 1, "val": 1.0}]
    falling = [0.9 ** i for i in range(40)]
    plateau = [1e-3 * (1 - 1e-4 * i) for i in range(40)]
    assert lbfgs_schedule(adam, 0.05, 0.0, 4) == (4, False)  # before L-BFGS: the first share
    assert lbfgs_schedule(adam + records(falling, 4), 0.05, 0.0, 4) == (4, False)
    stalled4 = adam + records(plateau, 4)
    assert lbfgs_schedule(stalled4, 0.05, 0.0, 4) == (2, False)
    # the new share's rule needs its own window: the plateau before it does not count
    after = stalled4 + records(plateau[:10], 2, 800)
    assert lbfgs_schedule(after, 0.05, 0.0, 4) == (2, False)
    assert lbfgs_schedule(stalled4 + records(plateau, 2, 800), 0.05, 0.0, 4) == (1, False)
    assert lbfgs_schedule(stalled4 + records(plateau, 1, 800), 0.05, 0.0, 4) == (1, True)
    assert lbfgs_schedule(adam + records(plateau, 3), 0.05, 0.0, 3) == (1, False)
    # records without a share are every triplet's (a history of a training before shares)
    assert lbfgs_schedule(adam + [{k: v for k, v in e.items() if k != "every"} for e in records(plateau, 1)],
                          0.05, 0.0, 4) == (1, True)
    assert lbfgs_schedule(adam + records(falling, 4), 0.05, 0.9 ** 39, 4) == (4, True)  # the floor, at any share
    assert lbfgs_schedule(stalled4, 0.0, 0.0, 4) == (4, False)  # tol 0: the rule never holds
    # the triplets outside the share fit more than twice as badly: the share overfits (the median
    # of the last five records decides, one outlier does not)
    def fitted(ratios):
        return adam + [{**e, "fit": 1e-3, "rest_fit": r * 1e-3} for e, r in zip(records(falling[:len(ratios)], 4), ratios)]

    assert lbfgs_schedule(fitted([1.0] * 4 + [3.0] * 5), 0.05, 0.0, 4) == (2, False)
    assert lbfgs_schedule(fitted([1.0] * 4 + [3.0] * 3), 0.05, 0.0, 4) == (2, False)  # 3 of the last 5
    assert lbfgs_schedule(fitted([1.0] * 6 + [3.0] * 2), 0.05, 0.0, 4) == (4, False)  # 2 of the last 5
    assert lbfgs_schedule(fitted([1.0] * 8 + [100.0]), 0.05, 0.0, 4) == (4, False)
    assert lbfgs_schedule(fitted([3.0] * 4), 0.05, 0.0, 4) == (4, False)  # fewer than five records


def test_training_stops_once_converged_and_resumes_to_the_same_weights(toy_mechanism, toy_run, tmp_path,
                                                                        monkeypatch):
    """A tiny model on the toy data converges long before a 3000-iteration budget: the share of
    triplets L-BFGS fits grows a quarter, a half, all of them, each after a stall on the one
    before; training stops at the first chunk where the rule holds on all of them (not before),
    records how far it went, and a run interrupted in L-BFGS after the first growth and resumed
    ends with the same weights and iteration count."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder import trainer as training
    from mc2fmu.reducers.autoencoder.schedule import lbfgs_schedule
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer, TrainingInterrupted

    monkeypatch.setattr(training, "MIN_SHARE_TRIPLETS", 40)  # the toy run has 199 triplets
    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(**{**TINY, "samples": 0, "lbfgs_iters": 3000, "lbfgs_floor": 0.0})
    result = train(ds, cfg)
    done = result.metrics["lbfgs_iterations"]
    assert 1200 <= done < 3000
    lb = [e for e in result.history if e["stage"] == "lbfgs"]
    assert lb[-1]["iter"] == done
    shares = [e["every"] for e in lb]
    assert shares == sorted(shares, reverse=True) and shares[0] == 4 and shares[-1] == 1 and 2 in shares
    n_train = lb[-1]["triplets"]
    assert {e["every"]: e["triplets"] for e in lb} == {4: len(range(0, n_train, 4)), 2: len(range(0, n_train, 2)),
                                                         1: n_train}
    assert lbfgs_schedule(result.history, cfg.lbfgs_tol, cfg.lbfgs_floor, 4) == (1, True)
    assert lbfgs_schedule(result.history[:-1], cfg.lbfgs_tol, cfg.lbfgs_floor, 4) == (1, False)
    path = tmp_path / "m.checkpoint.pt"
    # the progress entries: three of Adam, then one per 20 L-BFGS iterations; stop two after the growth
    grown = next(k for k, e in enumerate(lb) if e["every"] == 2)
    with pytest.raises(TrainingInterrupted):
        train(ds, cfg, _interrupt_at(3 + grown + 2), Checkpointer(path, 0.0))
    resumed = train(ds, cfg, None, Checkpointer(path, 0.0, resume=True))
    assert resumed.metrics["lbfgs_iterations"] == done
    reference = _weights(result.model)
    for k, v in _weights(resumed.model).items():
        assert torch.equal(v, reference[k]), k


def test_gauge_term_is_the_spread_of_log_det_of_the_reduced_mass(toy_mechanism, toy_run):
    """L_gauge in hull coordinates (the training path: the network's Jacobian and the projected
    mass) against ``log det (J^T M J)`` with ``J`` of the whole decoder by ``torch.func`` and the
    dense NC mass matrix; and zero for a linear reparametrisation of a constant-mass chart."""
    from torch.func import jacrev, vmap

    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import LossFunction, loss_scales
    from mc2fmu.reducers.autoencoder.samples import make_windows

    ds, model = _toy_model(toy_mechanism, toy_run)
    cfg = TrainConfig(dof=2, rigidity_weight=0.0, gauge_weight=1.0)
    W = make_windows(ds, 80)
    loss = LossFunction(model, cfg, [False, False], loss_scales(cfg, model, ds, W))
    q = torch.as_tensor(np.random.default_rng(2).normal(0.0, 1.0, (40, 2)))
    with torch.no_grad():
        got = float(loss.gauge(q))
        J = vmap(jacrev(lambda p: model.decoder(p[None])[0]))(q)
        ld = torch.logdet(J.transpose(1, 2) @ model.M @ J)
    ref = float(((ld - ld.mean()) ** 2).mean())
    assert ref > 1e-2 and abs(got / ref - 1.0) < 1e-10
    # the term enters the total with its weight
    with torch.no_grad():
        total, parts = loss(W)
        no_gauge = LossFunction(model, TrainConfig(dof=2, rigidity_weight=0.0), [False, False],
                                loss_scales(cfg, model, ds, W))(W)[0]
    assert "gauge" in parts and abs(float(total - no_gauge) - parts["gauge"]) < 1e-12 * max(1.0, float(total))
    # in the loss the term reads the dynamics term's M_m: the same value as the one formed alone
    with torch.no_grad():
        alone = float(loss.gauge(loss.encode_triplets(W)[1]))
    assert alone > 1e-6 and abs(parts["gauge"] / alone - 1.0) < 1e-10


def test_gauge_term_vanishes_where_the_reduced_mass_is_constant():
    """A point mass on a circle charted by its angle (``M_m = m r^2`` everywhere): L_gauge = 0;
    charted by ``theta = q^3`` instead, ``M_m = m r^2 (3 q^2)^2``: the spread of its log."""
    from mc2fmu.reducers.autoencoder.loss import LossFunction

    r, mass = 0.7, 2.0

    class Circle(torch.nn.Module):
        def __init__(self, power):
            super().__init__()
            self.power = power

        def value_jh(self, q):
            p = self.power
            t = q[:, 0] ** p
            dt, d2t = p * q[:, 0] ** (p - 1), p * (p - 1) * q[:, 0] ** max(p - 2, 0)
            c, s = torch.cos(t), torch.sin(t)
            z = torch.zeros_like(t)
            x = torch.stack([r * c, r * s, z], -1)
            J = torch.stack([-r * s * dt, r * c * dt, z], -1)[..., None]
            H = torch.stack([-r * c * dt**2 - r * s * d2t, -r * s * dt**2 + r * c * d2t, z], -1)[..., None, None]
            return x, J, H

    model = SimpleNamespace(decoder=None, reduced=False, mass=mass * torch.eye(3, dtype=torch.float64))
    q = torch.linspace(0.3, 1.4, 30, dtype=torch.float64)[:, None]
    fn = LossFunction.__new__(LossFunction)
    fn.model, fn.reduced = model, False
    model.decoder = Circle(1)
    assert float(fn.gauge(q)) < 1e-28
    model.decoder = Circle(3)
    ld = torch.log(mass * r * r * (3 * q[:, 0] ** 2) ** 2)
    assert abs(float(fn.gauge(q)) / float(((ld - ld.mean()) ** 2).mean()) - 1.0) < 1e-12


def test_auto_defaults_resolve_from_the_other_options():
    """``samples = auto``: 1000 triplets, 2000 with --identify; ``gauge_weight = auto``: on for
    one learnt coordinate only; both parse from the command line as numbers or ``auto``, and a
    negative count is refused with the option's name."""
    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder.config import (
        AUTO_GAUGE_WEIGHT, AUTO_SAMPLES, AUTO_SAMPLES_IDENTIFY, TrainConfig, count_or_auto)

    assert (AUTO_SAMPLES, AUTO_SAMPLES_IDENTIFY) == (1000, 2000)
    assert TrainConfig(dof=1).triplets == 1000 and TrainConfig(dof=1, identify="default").triplets == 2000
    assert TrainConfig(dof=1, samples=300, identify="default").triplets == 300
    assert count_or_auto("auto") == "auto" and count_or_auto("64") == 64
    with pytest.raises(ValueError, match="whole number"):
        count_or_auto("1e3")
    with pytest.raises(TrainingError, match="--samples -1"):
        TrainConfig(dof=1, samples=-1).validate()
    assert TrainConfig(dof=1).gauge == AUTO_GAUGE_WEIGHT
    assert TrainConfig(dof=2).gauge == 0.0 and TrainConfig(dof=1, coords=("crank.R11",)).gauge == 0.0


def test_few_triplets_are_fitted_all_at_once(toy_mechanism, toy_run):
    """Shares start at MIN_SHARE_TRIPLETS triplets: 95 training triplets are all fitted from the
    first L-BFGS iteration, whatever --lbfgs-subset says."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.trainer import train

    result = train(load_training_data(toy_mechanism, [toy_run]), TrainConfig(**TINY, lbfgs_subset=4))
    lb = [e for e in result.history if e["stage"] == "lbfgs"]
    assert lb and all(e["every"] == 1 and e["triplets"] == 95 for e in lb)


@pytest.mark.parametrize("subset", [4, 1], ids=["on-a-share", "on-every-triplet"])
def test_a_share_that_breaks_the_model_gives_way_to_every_triplet(toy_mechanism, toy_run, monkeypatch, subset):
    """A validation loss that is not finite while a share's training loss is (the share's fit
    broke the model between its triplets) moves the training to every triplet, from the best
    weights; on every triplet it is a divergence, reported as before."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder import trainer as training
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    monkeypatch.setattr(training, "MIN_SHARE_TRIPLETS", 40)
    honest = training.LossFunction.__call__
    calls = {"validation": 0}

    def broken_third_lbfgs_validation(self, W, kinematic_only=False):
        loss, parts = honest(self, W, kinematic_only)
        if not torch.is_grad_enabled() and len(W) == 10:  # the records' validation loss (5 % of 199 triplets)
            calls["validation"] += 1
            if calls["validation"] == 3 + 3:  # three Adam records, then the third L-BFGS one
                return loss * float("nan"), parts
        return loss, parts

    monkeypatch.setattr(training.LossFunction, "__call__", broken_third_lbfgs_validation)
    ds = load_training_data(toy_mechanism, [toy_run])
    cfg = TrainConfig(**{**TINY, "samples": 0, "lbfgs_iters": 200, "lbfgs_subset": subset})
    if subset == 1:
        with pytest.raises(TrainingError, match="diverged at lbfgs iteration 60"):
            training.train(ds, cfg)
        return
    result = training.train(ds, cfg)
    lb = [e for e in result.history if e["stage"] == "lbfgs"]
    assert [e["every"] for e in lb[:3]] == [4, 4, 4] and all(e["every"] == 1 for e in lb[3:])
    assert math.isinf(lb[2]["val"]) and all(math.isfinite(e["val"]) for e in lb[:2] + lb[3:])
    assert math.isfinite(result.metrics["val_loss"]) and result.metrics["lbfgs_iterations"] == 200


def test_the_status_line_reads_stage_after_the_clock(capsys):
    """The terminal's status line is ``training MM:SS, <stage> <iteration> | loss ...``
    (tqdm writes its postfix after a comma: the line had a stray ``| ,`` before the stage)."""
    from mc2fmu.cli import _progress_bar

    bar = _progress_bar(quiet=False)
    bar.update({"stage": "adam", "iter": 1, "loss": 0.5, "val": 0.4, "labels": {"rec": "rec"}, "rec": 0.5})
    bar.close()
    err = capsys.readouterr().err
    assert "training 00:00, adam 1 | loss 5.00e-01 (rec 5.0e-01) | val 4.00e-01" in err and "| ," not in err
