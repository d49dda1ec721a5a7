"""The training loss's terms (mc2fmu/reducers/autoencoder/loss.py) against independent
references (closed forms of an exact autoencoder), and what the term objects drive: the
progress line, the training summary and checkpoint compatibility.

Further term checks live in tests/test_train.py: L_curv against the analytic second
derivative, L_gauge against torch.func and a closed form, the appendix terms on an exact
autoencoder, L_roll by hand, and each term's hull form against its natural-coordinate form."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from .test_train import _interrupted_checkpoint, ellipse_autoencoder, run_cli

F64 = torch.float64


def _path_windows(A, c, dt=2e-3, T=1.0):
    """Windows along ``q(t) = 0.3 + 2 t + 1.5 t^2`` (through +-pi: the atan2 branch cut), and
    ``q``, ``qdot`` at every sample (a window's middle is sample ``i + 1`` for window ``i``)."""
    from mc2fmu.reducers.autoencoder.samples import Windows

    t = torch.arange(0, T + dt / 2, dt, dtype=F64)
    q = 0.3 + 2 * t + 1.5 * t**2
    x = c + torch.stack([torch.cos(q), torch.sin(q)], 1) @ A.T
    rows = torch.arange(1, len(t) - 1)[:, None] + torch.arange(-1, 2)
    W = Windows(x[rows], torch.zeros_like(x[rows]), torch.zeros(len(rows), 3, 0, dtype=F64), dt)
    return W, q, 2 + 3 * t


def _loss(model, a_scale=(1.0, 1.0), x_scale=(1.0, 1.0), **cfg):
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import LossFunction

    config = TrainConfig(dof=1, **{"rigidity_weight": 0.0, **cfg})
    return LossFunction(model, config, [True], {"x": np.asarray(x_scale), "v": np.ones(2), "a": np.asarray(a_scale)})


def test_reconstruction_term_is_the_scaled_decoding_error():
    """An exact autoencoder reconstructs to rounding; a decoder shifted by a constant ``delta``
    gives ``mean((delta / x_scale)^2)`` over the triplets' samples and the coordinates."""
    model, A, c = ellipse_autoencoder()
    W, _, _ = _path_windows(A, c)
    x_scale = np.array([0.5, 2.0])
    loss = _loss(model, x_scale=x_scale)
    with torch.no_grad():
        assert float(loss.terms(W)["rec"]) < 1e-28
        delta = np.array([1e-3, -4e-3])
        model.decoder.net.layers[0].bias += torch.as_tensor(delta)
        got = float(loss.terms(W)["rec"])
    assert got == pytest.approx(float(np.mean((delta / x_scale) ** 2)), rel=1e-9)


def test_dynamics_term_is_the_decoded_acceleration_error():
    """``L_dyn`` of an exact chart of a point mass on an ellipse under a constant force ``f``,
    along a path that is not the motion the force makes: the decoded acceleration error
    ``J (qddot_model - qddot_path) / a_scale``, squared and averaged, with the closed form of
    the reduced dynamics ``qddot = (J^T f - m J^T H qdot^2) / (m J^T J)`` (to the step's
    O(dt^2)).  Zero force and the path's own acceleration: a second check of the sign."""
    mass, f = 2.0, np.array([0.3, -1.1])
    model, A, c = ellipse_autoencoder(mass, f)
    W, q_all, qd_all = _path_windows(A, c, dt=1e-3)
    a_scale = np.array([2.0, 0.5])
    with torch.no_grad():
        got = float(_loss(model, a_scale=a_scale, curvature_weight=0.0).terms(W)["dyn"])
    jacobian = lambda q: torch.stack([-torch.sin(q), torch.cos(q)], 1) @ A.T  # noqa: E731  (B, 2)
    q, qd = q_all[1:-1], qd_all[1:-1]
    J, H = jacobian(q), -torch.stack([torch.cos(q), torch.sin(q)], 1) @ A.T
    qdd = ((J @ torch.as_tensor(f)) - mass * (J * H).sum(1) * qd**2) / (mass * (J * J).sum(1))
    # h(q_hat) - h(q_next) = J(q_next) (q_hat - q_next) + O(dt^4), q_hat - q_next = dt^2 (qdd - 3)
    err = jacobian(q_all[2:]) * (qdd - 3.0)[:, None] / torch.as_tensor(a_scale)
    want = float((err**2).mean())
    assert want > 1.0 and got == pytest.approx(want, rel=1e-4)


def test_every_term_is_on_exactly_when_its_options_say():
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import TERMS

    def active(**kw):
        cfg = TrainConfig(**{"dof": 1, **kw})
        return {t.name for t in TERMS if t.active(cfg)}

    assert active() == {"rec", "dyn", "curv", "rig", "gauge"}  # one learnt coordinate: L_gauge on
    assert active(coords=("a.x",)) == {"rec", "dyn", "curv", "rig"}
    assert active(loss="appendix", curvature_weight=0.0, rigidity_weight=0.0, rollout_steps=2) == \
        {"rec", "vel", "acc", "roll", "gauge"}
    names = [t.name for t in TERMS]
    assert len(set(names)) == len(names) == 8
    for t in TERMS:  # every weight option is a config field, every term has its label and title
        assert t.option in {f.name for f in dataclasses.fields(TrainConfig)} and t.label and t.title


@pytest.mark.parametrize("extra, want", [
    ([], {"rec", "dyn", "curv", "rig", "gauge"}),
    (["--loss", "appendix", "--rollout", "2"], {"rec", "vel", "acc", "curv", "roll", "rig", "gauge"}),
], ids=["sim", "appendix-rollout"])
def test_the_progress_line_and_the_summary_name_every_active_term(capsys, tmp_path, toy_mechanism, toy_run,
                                                                  monkeypatch, extra, want):
    """Every active term (one learnt coordinate: L_gauge too) reaches the progress line of each
    L-BFGS entry with its label, and the training summary with its title."""
    from mc2fmu import cli
    from mc2fmu.reducers.autoencoder.loss import TERMS

    lines = []
    real = cli.progress_line
    monkeypatch.setattr(cli, "progress_line", lambda e: lines.append((e, real(e))) or lines[-1][1])
    code, out, err = run_cli(capsys, "train", toy_mechanism, toy_run, "--dof", "1", "--adam-epochs", "20",
                             "--lbfgs-iters", "40", "--samples", "200", *extra, "-o", tmp_path / "m")
    assert code == 0, err
    lbfgs = [(e, line) for e, line in lines if e.get("stage") == "lbfgs"]
    assert lbfgs
    labels = {t.name: t.label for t in TERMS}
    for e, line in lbfgs:
        assert set(e["labels"]) == want
        for name in want:
            assert f" {labels[name]} {e[name]:.1e}" in line or f"({labels[name]} {e[name]:.1e}" in line, (name, line)
    summary = next(s for s in out.splitlines() if "loss:" in s)
    for t in TERMS:
        assert (f"{t.title} " in summary) == (t.name in want), (t.name, summary)


def test_a_term_that_came_in_later_resumes_an_older_checkpoint_as_it_was(toy_mechanism, toy_run, tmp_path,
                                                                          monkeypatch):
    """Checkpoint compatibility is the terms' own: a term whose ``before`` says it came in off
    (here the rigidity term, made so for the test) counts as off in a checkpoint whose options
    lack its weight; without ``before`` the option's default counts."""
    from mc2fmu.errors import TrainingError
    from mc2fmu.reducers.autoencoder import loss
    from mc2fmu.reducers.autoencoder.trainer import train
    from mc2fmu.reducers.base import Checkpointer

    ds, cfg, path, state = _interrupted_checkpoint(toy_mechanism, toy_run, tmp_path)
    options = json.loads(state["config"])
    del options["rigidity_weight"]
    torch.save({**state, "config": json.dumps(options)}, path)
    # no `before`: the missing option is its default, as this run has it
    assert math.isfinite(train(ds, cfg, None, Checkpointer(path, resume=True)).metrics["val_loss"])

    torch.save({**state, "config": json.dumps(options)}, path)
    later = type("LaterRigidity", (type(loss.TERMS[6]),), {"before": 0.0})()
    assert later.name == "rig"
    monkeypatch.setattr(loss, "TERMS", tuple(later if t.name == "rig" else t for t in loss.TERMS))
    with pytest.raises(TrainingError, match=r"rigidity_weight 0\.0 -> 1\.0"):
        train(ds, cfg, None, Checkpointer(path, resume=True))
    result = train(ds, dataclasses.replace(cfg, rigidity_weight=0.0), None, Checkpointer(path, resume=True))
    assert math.isfinite(result.metrics["val_loss"]) and "rig" not in result.metrics
