"""The reference-data generator's spring-dampers: Exudyn's force law and the energy bookkeeping.

A free body on a spring-damper is compared with closed-form and scipy solutions of the
mechanism file's force law; the spring mechanisms' runs must close their energy balance
(kinetic + gravity and spring potential - input work + damper dissipation).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace

import numpy as np
import pytest
from scipy.integrate import solve_ivp

pytest.importorskip("exudyn")

from examples import _exudyn  # noqa: E402
from examples._model import Body, Model, Spring, rot_z  # noqa: E402
from examples.reference import energy_balance, mechanism_toml, model, simulate, spring_states  # noqa: E402

STEP, OUTPUT = 1e-4, 1e-3


def _free_body_run(body: Body, spring: Spring, gravity, t_end: float) -> tuple[Model, dict]:
    """One unjointed body on one spring, from rest in its given pose; the run arrays of ``simulate``."""
    m = Model(name="spring_test", summary="", gravity=tuple(gravity), bodies=(body,), joints=(), inputs=(),
              train=(), shape=(), coordinates=lambda origin, rotation: {}, static_inputs=(), springs=(spring,))
    built = _exudyn.build(m, [], sensors=("poses",))
    _exudyn.solve(built, t_end, STEP, OUTPUT)
    t, origin = _exudyn.stored(built, "origin")
    run = {
        "t": t,
        "origin": origin,
        "rotation": _exudyn.stored(built, "rotation")[1].reshape(len(t), -1, 3, 3),
        "velocity_com": _exudyn.stored(built, "velocity_com")[1],
        "omega": _exudyn.stored(built, "omega")[1],
        "u": np.zeros((len(t), 0)),
        "kinetic_energy": _exudyn.stored(built, "kinetic_energy")[1][:, :, 0].sum(axis=1),
    }
    return m, run


def test_spring_damper_matches_closed_form():
    """A mass hanging on an oblique spring-damper released at rest length: the damped step response.

    Gravity along the spring line; the mass settles at ``m g / k`` beyond the rest length with
    the analytic frequency and decay (checks sign, stiffness, rest length and damping).
    """
    mass, k, c, rest = 2.0, 800.0, 6.0, 0.5
    e = np.array([0.6, -0.8, 0.0])  # spring line, anchor -> mass
    g = 9.81
    body = Body("mass", mass, (0.0, 0.0, 0.0), (0.01, 0.01, 0.01), rest * e, np.eye(3))
    spring = Spring("s", "ground", (0.0, 0.0, 0.0), "mass", (0.0, 0.0, 0.0), k, c, rest)
    m, run = _free_body_run(body, spring, g * e, 1.5)
    w0, zeta = math.sqrt(k / mass), c / (2.0 * math.sqrt(k * mass))
    wd = w0 * math.sqrt(1.0 - zeta**2)
    t = run["t"]
    x = rest + mass * g / k * (1.0 - np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta * w0 / wd * np.sin(wd * t)))
    position = run["origin"][:, 0]
    assert np.max(np.abs(position @ e - x)) < 1e-4 * mass * g / k
    assert np.max(np.abs(position - np.outer(position @ e, e))) < 1e-12  # stays on the line
    length, rate = spring_states(m, run)
    assert np.allclose(length[:, 0], position @ e, atol=1e-14)
    assert np.allclose(rate[:, 0], run["velocity_com"][:, 0] @ e, atol=1e-14)


def test_spring_damper_law_off_axis():
    """A rigid body on a spring attached off its COM, swinging and spinning under gravity.

    Exudyn's trajectory equals a scipy integration of the file's force law (tension
    ``k (l - length) + c ldot`` along the line, damping on ``ldot`` only), whichever end is the
    ground; the energy balance with spring potential and damper dissipation closes.
    """
    mass, J, k, c, rest = 1.5, 0.02, 300.0, 4.0, 0.4
    r = np.array([0.1, 0.05, 0.0])  # attachment point, body frame (COM at the origin)
    p0, th0 = np.array([0.35, -0.25, 0.0]), 0.3
    gravity = np.array([0.0, -9.81, 0.0])
    body = Body("link", mass, (0.0, 0.0, 0.0), (J, J, J), p0, rot_z(th0))

    def rhs(_, y):
        x, th, v, w = y[:2], y[2], y[3:5], y[5]
        arm = rot_z(th)[:2, :2] @ r[:2]
        d = -(x + arm)  # p_a - p_b, a = the ground anchor at the origin, b = the body point
        l = np.linalg.norm(d)
        n = d / l
        ldot = n @ -(v + w * np.array([-arm[1], arm[0]]))  # n . (v_a - v_b)
        force = (k * (l - rest) + c * ldot) * n  # +T n on point b
        return [*v, w, *(force / mass + gravity[:2]), (arm[0] * force[1] - arm[1] * force[0]) / J]

    t_end = 2.0
    t = np.arange(int(round(t_end / OUTPUT)) + 1) * OUTPUT
    ref = solve_ivp(rhs, (0.0, t_end), [*p0[:2], th0, 0.0, 0.0, 0.0], t_eval=t, method="DOP853", rtol=1e-11, atol=1e-12)
    for order in ("ground_first", "body_first"):
        ends = [("ground", (0.0, 0.0, 0.0)), ("link", tuple(r))]
        if order == "body_first":
            ends.reverse()
        spring = Spring("s", ends[0][0], ends[0][1], ends[1][0], ends[1][1], k, c, rest)
        m, run = _free_body_run(body, spring, gravity, t_end)
        angle = np.unwrap(np.arctan2(run["rotation"][:, 0, 1, 0], run["rotation"][:, 0, 0, 0]))
        assert np.max(np.abs(run["origin"][:, 0, :2] - ref.y[:2].T)) < 1e-5, order
        assert np.max(np.abs(angle - ref.y[2])) < 1e-4, order
        eb = energy_balance(m, run)
        assert eb["dissipated"][-1] > 0.1 * np.max(eb["kinetic"]), order  # the damper matters here
        assert eb["drift"] < 1e-5 * eb["dissipated"][-1], order


@pytest.mark.parametrize("name", ["two_bar", "macpherson"])
def test_spring_mechanisms_energy_balance(name):
    """2 s of the training run: the balance closes to 1e-5 of the energy the dampers took out."""
    run = simulate(name, "train", t_end=2.0)
    eb = run["energy_balance"]
    assert eb["dissipated"][-1] > 0.1 * np.max(eb["kinetic"])
    assert eb["drift"] < 1e-5 * eb["dissipated"][-1], eb["drift"]
    assert run["joint_error"] < 1e-10
    m = model(name)
    length, rate = spring_states(m, run)
    rate_fd = np.gradient(length, run["t"], axis=0, edge_order=2)
    assert np.max(np.abs(rate - rate_fd)) < 1e-3 * np.max(np.abs(rate))


@pytest.mark.parametrize("name", ["two_bar", "macpherson"])
def test_springs_in_mechanism_file_and_unloaded_at_reference(name):
    """The ``[[springs]]`` tables, read by mc2fmu (its mechanism reader and its NC spring model,
    not the generator's code), put every spring at its rest length in the reference pose."""
    from mc2fmu.mechanics.mechanism import mechanism_from_dict
    from mc2fmu.mechanics.natural import build_layout, nc_from_poses, spring_model

    m = model(name)
    mech = mechanism_from_dict(tomllib.loads(mechanism_toml(name)), source=name)
    assert [s.name for s in mech.springs] == [s.name for s in m.springs]
    layout = build_layout(mech)
    origin = np.array([[m.body(b).position for b in mech.body_names]])
    rotation = np.array([[m.body(b).rotation for b in mech.body_names]])
    lengths = spring_model(mech, layout).lengths(nc_from_poses(layout, origin, rotation))[0]
    rest = np.array([s.length for s in mech.springs])
    assert np.max(np.abs(lengths - rest)) < 1e-12, lengths - rest
    assert all(s.stiffness > 0 for s in mech.springs)
    # so they carry nothing at rest: the support inputs are those of the mechanism without them
    u, residual = _exudyn.support_inputs(replace(m, springs=(), static_inputs=None))
    assert residual < 1e-10
    assert np.allclose(m.static_inputs, u, rtol=1e-9)


def test_mechanisms_without_springs_write_no_springs_table():
    assert not model("four_bar").springs
    assert "springs" not in tomllib.loads(mechanism_toml("four_bar"))
