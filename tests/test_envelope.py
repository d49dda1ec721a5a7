"""The training envelope and angle-type (full revolution) minimal coordinates."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mc2fmu.models.envelope import Envelope


def test_distance_is_zero_inside_and_grows_outside():
    q = np.linspace(-1, 1, 11)[:, None]
    qd = np.linspace(-2, 2, 11)[:, None]
    u = np.linspace(0, 10, 11)[:, None]
    env = Envelope.from_data(q, qd, u, 1e-6)
    assert np.all(env.distance(q, qd, u) == 0)
    # 10 % of the q span (2) beyond the upper edge
    assert env.distance([[1.2]], [[0.0]], [[5.0]])[0] == pytest.approx(0.1)
    # the largest normalised excursion wins: u at -5 is 50 % of its span (10) below
    assert env.distance([[1.2]], [[0.0]], [[-5.0]])[0] == pytest.approx(0.5)
    assert env.distance([[np.nan]], [[0.0]], [[5.0]])[0] == np.inf
    assert env.first_exit(np.array([0.0, 0.005, 0.02, 0.0])) == 2


def test_full_revolution_angle_is_unbounded_and_survives_json():
    q = np.linspace(0, 3 * math.pi, 50)[:, None]
    env = Envelope.from_data(q, np.ones_like(q), np.zeros((50, 0)), 0.0, angles=[True])
    assert env.distance([[100.0]], [[1.0]], np.zeros((1, 0)))[0] == 0
    back = Envelope.from_dict(json.loads(json.dumps(env.to_dict())))
    assert back.q_min[0] == -math.inf and back.q_max[0] == math.inf
    assert back.distance([[100.0]], [[1.0]], np.zeros((1, 0)))[0] == 0


@pytest.mark.slow
def test_angle_latent_follows_full_revolutions(spinning_pendulum, tmp_path):
    """A scalar latent cannot cover a circle; the automatic angle latent (cos/sin) can."""
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.cli import main
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.validation.metrics import rotation_error
    from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc
    from mc2fmu.data.poses import read_run
    from mc2fmu.models.simulate import simulate_run

    mech, run, theta = spinning_pendulum
    assert np.ptp(theta) > 8 * math.pi
    model = tmp_path / "model"
    assert main(["train", str(mech), str(run), "--dof", "1", "--samples", "1000", "--lbfgs-iters", "300",
                 "-q", "-o", str(model)]) == 0
    art = load_artifact(model)
    assert art.angles == (True,)
    r = read_run(run, load_mechanism(mech))
    res = simulate_run(art, nc_from_poses(art.layout, r.origin, r.rotation), r.u)
    _, R = poses_from_nc(art.layout, res["x"])
    err = rotation_error(R, r.rotation)
    assert err.max() < 0.02, err.max()
    assert art.envelope.first_exit(res["envelope"]) is None


def test_the_printed_distance_and_its_complex_step_slope_are_the_envelopes():
    """The one description (mc2fmu.models.envelope) printed as Python equals Envelope.distance
    bit for bit inside and outside, an unbounded angle included, and evaluated at v + i h dv
    (what the native FMU's complex-step twin computes) gives the active channel's slope, +-dv_c
    / span_c, and 0 inside."""
    from mc2fmu.models import expr
    from mc2fmu.models.envelope import traced

    rng = np.random.default_rng(4)
    q = np.column_stack([np.linspace(-1, 1, 30), np.linspace(0, 7, 30)])
    env = Envelope.from_data(q, rng.normal(size=(30, 2)), rng.uniform(2, 3, size=(30, 1)), 1e-6, angles=[False, True])
    channels, distance = traced(env)
    namespace = {"math": math}
    exec(expr.emit_python([distance], "f", ("v",)), namespace)
    lo, hi = env.lower, env.upper
    span = hi - lo
    for _ in range(200):
        v = rng.uniform(np.where(np.isfinite(lo), lo, -50) - 0.3 * np.nan_to_num(span, posinf=1),
                        np.where(np.isfinite(hi), hi, 50) + 0.3 * np.nan_to_num(span, posinf=1))
        d = env.distance(v[None, :2], v[None, 2:4], v[None, 4:])[0]
        assert namespace["f"](list(v))[0] == d
        ex = np.array([0.0 if e == 0.0 else expr.evaluate([e], {"v": v})[0] for e in channels])
        assert ex.max() == d and ex[1] == 0.0  # the full-turn angle has no bounds
        dv = rng.normal(size=v.size)
        slope = expr.evaluate([distance], {"v": v + 1e-20j * dv})[0].imag / 1e-20
        if d == 0.0:
            assert slope == 0.0
        else:
            c = int(np.argmax(ex))
            assert slope == pytest.approx((dv[c] if v[c] > hi[c] else -dv[c]) / span[c], rel=1e-14)
