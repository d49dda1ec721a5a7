"""Reference data for mc2fmu: four mechanisms simulated with Exudyn (exact index-3 constraints).

Public API
----------
``MECHANISMS``, ``MACHINES``, ``ALL``, ``EXCITATIONS``
    the linkages' names (1-3 DOF, what every benchmark and test runs by default), the
    machines' (4-10 DOF: the hexapod; named explicitly where they are used, their runs cost a
    minute or more each), both, and the four excitation cases (train, low, shape, high).
``mechanism_dict(name)``, ``mechanism_toml(name)``
    the mechanism description (bodies: mass, COM and inertia about the COM in the body
    frame; inputs; springs) as a dict and as the text of ``mechanism.toml``.
``simulate(name, excitation, ...)``
    one run, 10 s at 1 ms output by default, with the engine's own poses, velocities,
    angular velocities, input values and kinetic energy, plus checks.
``write_example(name, out_dir)``
    ``out_dir/<name>/mechanism.toml`` and ``out_dir/<name>/runs/<excitation>.csv.gz``.

What the run arrays are
-----------------------
* ``t``: the output grid ``k * output_step``.  The engine accumulates its time step by step,
  so its own output times differ from the grid by round-off (``info['time_offset']``,
  ~1e-13 s); the states are the engine's at those times.
* ``origin``, ``rotation``: body-frame origin (global) and body -> global rotation matrix,
  from Exudyn's ``Position`` and ``RotationMatrix`` body sensors.
* ``velocity_com``: the engine's ``Velocity`` sensor at the COM's body-frame position;
  ``omega``: the engine's ``AngularVelocity`` (global frame).
* ``u``: the input values the engine applied, read back from its load sensors
  (``SensorLoad``, projected on the input direction); identical to the input signal
  evaluated at the engine's times (checked).
* ``kinetic_energy``: the engine's own, the sum of its ``KineticEnergy`` body sensors.
  ``info['kinetic_energy_check']`` compares it with ``0.5 m |v_com|^2 + 0.5 w_b^T J_com w_b``
  computed from the exported arrays and the mechanism's inertial data (``w_b = R^T omega``).
* ``joint_error``: the largest constraint violation over the run, recomputed from the
  exported poses and the joint definitions (m for positions, rad for directions).
* ``energy_balance``: kinetic + potential energy (gravity and springs) minus the work of the
  inputs plus the energy the dampers dissipated (powers integrated over the output grid with
  the cumulative Simpson rule), and its drift.

Every run starts at rest in static equilibrium: the hanging pendulums (four-bar, slider-
crank) at zero input, the weight-carrying mechanisms (two-bar, MacPherson) with constant
support inputs that the engine solves for (their springs are at rest length there).  Runs
are deterministic (identical bits).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.integrate import cumulative_simpson

from . import _exudyn
from ._model import EXCITATIONS, JOINT_AXES, Model, input_signal
from .mechanisms import BUILDERS

log = logging.getLogger(__name__)

MACHINES = ["hexapod", "half_car"]
MECHANISMS = [name for name in BUILDERS if name not in MACHINES]
ALL = MECHANISMS + MACHINES
EXCITATIONS = list(EXCITATIONS)


# ---------------------------------------------------------------------------- models


def _builder(name: str):
    if name not in BUILDERS:
        raise ValueError(f"unknown mechanism '{name}'; use one of {', '.join(ALL)}")
    return BUILDERS[name]


@lru_cache(maxsize=None)
def model(name: str) -> Model:
    """The mechanism's model; for weight-carrying mechanisms the support inputs are solved."""
    m = _builder(name)()
    if m.static_inputs is None:
        u, _ = _exudyn.support_inputs(m)
        m = replace(m, static_inputs=tuple(float(v) for v in u))
    return m


@lru_cache(maxsize=None)
def degrees_of_freedom(name: str) -> dict:
    """``{'dof': ..., 'redundant': ...}`` from Exudyn's ``ComputeSystemDegreeOfFreedom``."""
    return _exudyn.degrees_of_freedom(model(name))


def mechanism_dict(name: str | Model) -> dict:
    """The mechanism description in the mc2fmu mechanism-file schema (of a bundled name or a Model)."""
    m = _builder(name)() if isinstance(name, str) else name
    bodies = [
        {
            "name": b.name,
            "mass": float(b.mass),
            "com": [float(c) for c in b.com],
            "inertia": np.asarray(b.inertia, dtype=float).tolist(),
        }
        for b in m.bodies
    ]
    inputs = []
    for inp in m.inputs:
        entry = {"name": inp.name, "kind": inp.kind, "body": inp.body, "direction": [float(c) for c in inp.direction]}
        if inp.kind == "force":
            entry["point"] = [float(c) for c in inp.point]
        inputs.append(entry)
    data = {"name": m.name, "gravity": [float(g) for g in m.gravity], "bodies": bodies, "inputs": inputs}
    if m.springs:
        data["springs"] = [
            {
                "name": s.name,
                "body_a": s.body_a,
                "point_a": [float(c) for c in s.point_a],
                "body_b": s.body_b,
                "point_b": [float(c) for c in s.point_b],
                "stiffness": float(s.stiffness),
                "damping": float(s.damping),
                "length": float(s.length),
                **({"law": "recorded"} if s.recorded else {}),
            }
            for s in m.springs
        ]
    return data


def mechanism_toml(name: str) -> str:
    """The text of ``mechanism.toml`` (hand-formatted: the standard library has no TOML writer)."""
    from mc2fmu.mechanics.mechanism import mechanism_toml as to_toml

    m = _builder(name)()
    return to_toml(mechanism_dict(name), header=[
        f"{m.name}: {m.summary}.",
        "Generated by `python -m examples.generate` from examples/mechanisms.py; do not edit by hand.",
    ])


# ---------------------------------------------------------------------------- simulation


def simulate(name: str | Model, excitation: str, t_end: float = 10.0, output_step: float = 1e-3, step: float = 1e-4) -> dict:
    """Simulate one mechanism under one excitation with Exudyn (see the module docstring).

    Returns a dict: ``t`` (n,), ``body_names``, ``origin`` (n, n_b, 3), ``rotation``
    (n, n_b, 3, 3), ``velocity_com`` (n, n_b, 3), ``omega`` (n, n_b, 3), ``input_names``,
    ``u`` (n, n_u), ``kinetic_energy`` (n,), ``joint_error`` (float) and ``joint_errors`` (per
    joint), ``energy_balance`` (dict), ``coordinates`` (main coordinates, for range checks)
    and ``info`` (wall time, DOF count, static inputs and the consistency checks).
    """
    m = model(name) if isinstance(name, str) else name  # a Model: variants in tests (static inputs given)
    name = m.name
    if excitation not in EXCITATIONS:
        raise ValueError(f"unknown excitation '{excitation}'; use one of {', '.join(EXCITATIONS)}")
    ratio = output_step / step
    if abs(ratio - round(ratio)) > 1e-9:
        raise ValueError(f"output_step {output_step} must be a whole number of solver steps {step}")
    signals = [input_signal(s, w) for s, w in zip(m.static_inputs, m.waveforms(excitation), strict=True)]
    built = _exudyn.build(m, signals, sensors=("poses",))
    wall = _exudyn.solve(built, t_end, step, output_step)

    t_engine, origin = _exudyn.stored(built, "origin")
    n = int(round(t_end / output_step)) + 1
    if len(t_engine) != n:
        raise RuntimeError(f"{name}/{excitation}: the engine wrote {len(t_engine)} samples, expected {n}")
    t = np.arange(n) * output_step
    rotation = _exudyn.stored(built, "rotation")[1].reshape(n, -1, 3, 3)
    velocity_com = _exudyn.stored(built, "velocity_com")[1]
    omega = _exudyn.stored(built, "omega")[1]
    kinetic_energy = _exudyn.stored(built, "kinetic_energy")[1][:, :, 0].sum(axis=1)
    directions = np.array([inp.direction for inp in m.inputs], dtype=float)
    u = np.einsum("tij,ij->ti", _exudyn.stored(built, "load")[1], directions)

    u_signal = np.array([[s(tk) for s in signals] for tk in t_engine])
    run = {
        "name": name,
        "excitation": excitation,
        "t": t,
        "body_names": [b.name for b in m.bodies],
        "origin": origin,
        "rotation": rotation,
        "velocity_com": velocity_com,
        "omega": omega,
        "input_names": [inp.name for inp in m.inputs],
        "u": u,
        "kinetic_energy": kinetic_energy,
    }
    run["joint_errors"] = joint_errors(m, origin, rotation)
    run["joint_error"] = max(run["joint_errors"].values())
    run["energy_balance"] = energy_balance(m, run)
    run["coordinates"] = dict(m.coordinates(origin, rotation))
    run["info"] = {
        "wall_time": wall,
        "time_offset": float(np.max(np.abs(t_engine - t))),
        "input_check": float(np.max(np.abs(u - u_signal))),
        "kinetic_energy_check": kinetic_energy_check(m, run),
        "orthogonality": float(np.max(np.abs(np.einsum("tbji,tbjk->tbik", rotation, rotation) - np.eye(3)))),
        "static_inputs": list(m.static_inputs),
        "dof": degrees_of_freedom(name) if name in BUILDERS and m is model(name) else _exudyn.degrees_of_freedom(m),
    }
    return run


# ---------------------------------------------------------------------------- checks


def _com_global(m: Model, origin: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    com = np.array([b.com for b in m.bodies], dtype=float)
    return origin + np.einsum("tbij,bj->tbi", rotation, com)


def kinetic_energy_from_arrays(m: Model, run: dict) -> np.ndarray:
    """``sum_b 0.5 m |v_com|^2 + 0.5 w_b^T J_com w_b`` from a run's arrays and the mechanism data."""
    mass = np.array([b.mass for b in m.bodies])
    J = np.array([b.inertia_matrix for b in m.bodies])
    w_body = np.einsum("tbji,tbj->tbi", run["rotation"], run["omega"])
    translational = 0.5 * np.einsum("b,tbi,tbi->t", mass, run["velocity_com"], run["velocity_com"])
    rotational = 0.5 * np.einsum("tbi,bij,tbj->t", w_body, J, w_body)
    return translational + rotational


def kinetic_energy_check(m: Model, run: dict) -> float:
    """Largest difference between the engine's kinetic energy and the one from the arrays, relative to its peak."""
    ke = run["kinetic_energy"]
    return float(np.max(np.abs(kinetic_energy_from_arrays(m, run) - ke)) / max(np.max(np.abs(ke)), 1e-300))


def joint_errors(m: Model, origin: np.ndarray, rotation: np.ndarray) -> dict[str, float]:
    """Largest violation of each joint over a run, from poses (n, n_b, 3) and (n, n_b, 3, 3).

    Each joint's point and frame are attached to both bodies in the reference configuration;
    the error is the distance between the two copies of the point along the constrained
    translation axes (m), or the misalignment of the two copies of the frame about the
    constrained rotation axes (rad).
    """
    index = {b.name: k for k, b in enumerate(m.bodies)}
    n = origin.shape[0]

    def attached(body_name, point, axes):
        """Global point (n, 3) and frame (n, 3, 3) of a joint on one side."""
        if body_name == "ground":
            return np.broadcast_to(point, (n, 3)), np.broadcast_to(axes, (n, 3, 3))
        b = m.body(body_name)
        k = index[body_name]
        local_point, local_axes = b.local(point), b.rotation.T @ axes
        return origin[:, k] + rotation[:, k] @ local_point, rotation[:, k] @ local_axes

    errors = {}
    for j in m.joints:
        (p0, T0), (p1, T1) = (attached(b, j.position, j.axes) for b in j.bodies)
        trans, rot = JOINT_AXES[j.kind]
        d = np.einsum("tji,tj->ti", T0, p1 - p0)  # separation in joint axes of side 0
        err = np.linalg.norm(d[:, np.array(trans, dtype=bool)], axis=1)
        if sum(rot) == 3:  # relative rotation angle, |axial vector of the skew part| = sin(angle)
            R = np.einsum("tji,tjk->tik", T0, T1)
            axial = 0.5 * np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], axis=1)
            ang = np.linalg.norm(axial, axis=1)
        elif sum(rot) == 2:  # the free axis must stay common
            k = rot.index(0)
            ang = np.linalg.norm(np.cross(T0[:, :, k], T1[:, :, k]), axis=1)
        elif rot == (1, 0, 0):  # universal: pin y of side 0 stays normal to pin z of side 1
            ang = np.abs(np.einsum("ti,ti->t", T0[:, :, 1], T1[:, :, 2]))
        elif sum(rot) == 0:
            ang = np.zeros(n)
        else:
            raise ValueError(f"joint '{j.name}': no error measure for rotation axes {rot}")
        errors[j.name] = float(max(err.max(), ang.max()))
    return errors


def _point_motion(m: Model, run: dict, body: str, point) -> tuple[np.ndarray, np.ndarray]:
    """Global position and velocity (n, 3) of a body-frame point (a global point on the ground)."""
    point = np.asarray(point, dtype=float)
    n = len(run["t"])
    if body == "ground":
        return np.broadcast_to(point, (n, 3)), np.zeros((n, 3))
    k = [b.name for b in m.bodies].index(body)
    rotation = run["rotation"][:, k]
    arm = np.einsum("tij,j->ti", rotation, point - np.asarray(m.bodies[k].com))
    return run["origin"][:, k] + rotation @ point, run["velocity_com"][:, k] + np.cross(run["omega"][:, k], arm)


def spring_states(m: Model, run: dict) -> tuple[np.ndarray, np.ndarray]:
    """Length ``l`` and its rate ``ldot`` (n, n_springs) of every spring, from a run's poses and velocities."""
    n = len(run["t"])
    length, rate = np.empty((n, len(m.springs))), np.empty((n, len(m.springs)))
    for i, s in enumerate(m.springs):
        (pa, va), (pb, vb) = _point_motion(m, run, s.body_a, s.point_a), _point_motion(m, run, s.body_b, s.point_b)
        d = pa - pb
        length[:, i] = np.linalg.norm(d, axis=1)
        rate[:, i] = np.einsum("ti,ti->t", d, va - vb) / length[:, i]
    return length, rate


def energy_balance(m: Model, run: dict) -> dict:
    """Kinetic + potential energy minus the inputs' work plus the dampers' dissipation, over the run.

    The potential energy is gravity's plus the springs' ``0.5 k (l - length)^2``.  The inputs'
    power is ``u d . v_point`` for a force (``v_point`` from the COM velocity and the angular
    velocity) and ``u d . omega`` for a torque; the dampers dissipate ``c ldot^2``; both are
    integrated over the output grid (cumulative Simpson).  Spring lengths and rates come from
    the exported poses and velocities (:func:`spring_states`).  ``drift`` is the largest
    deviation of the balance from its start; it is given relative to the peak kinetic energy
    and to the largest energy exchanged (peak of |kinetic|, |potential - start|, |work|,
    dissipated).
    """
    origin, rotation, t = run["origin"], run["rotation"], run["t"]
    com = _com_global(m, origin, rotation)
    mass = np.array([b.mass for b in m.bodies])
    potential = -np.einsum("b,tbi,i->t", mass, com, np.asarray(m.gravity, dtype=float))
    power = np.zeros_like(t)
    for i, inp in enumerate(m.inputs):
        d = np.asarray(inp.direction, dtype=float)
        if inp.kind == "torque":
            v = run["omega"][:, [b.name for b in m.bodies].index(inp.body)]
        else:
            v = _point_motion(m, run, inp.body, inp.point)[1]
        power += run["u"][:, i] * (v @ d)
    work = cumulative_simpson(power, x=t, initial=0.0)
    dissipated = np.zeros_like(t)
    if m.springs:
        length, rate = spring_states(m, run)
        for i, s in enumerate(m.springs):
            potential = potential + s.potential(length[:, i] - s.length)
            dissipated = dissipated + cumulative_simpson(s.damper(rate[:, i]) * rate[:, i], x=t, initial=0.0)
    for fr in m.frictions:  # friction's dissipation, from the recorded angular velocity
        w = run["omega"][:, [b.name for b in m.bodies].index(fr.body)] @ np.asarray(fr.axis, dtype=float)
        dissipated = dissipated + cumulative_simpson(-fr.torque(w) * w, x=t, initial=0.0)
    kinetic = run["kinetic_energy"]
    balance = kinetic + potential - work + dissipated
    drift = float(np.max(np.abs(balance - balance[0])))
    exchanged = max(
        np.max(np.abs(kinetic)), np.max(np.abs(potential - potential[0])), np.max(np.abs(work)), np.max(dissipated)
    )
    return {
        "kinetic": kinetic,
        "potential": potential,
        "work": work,
        "dissipated": dissipated,
        "balance": balance,
        "drift": drift,
        "drift_relative_to_kinetic": drift / max(np.max(np.abs(kinetic)), 1e-300),
        "drift_relative_to_exchanged": drift / max(exchanged, 1e-300),
    }


# ---------------------------------------------------------------------------- files


def write_mechanism(name: str, out_dir) -> Path:
    """Write ``out_dir/<name>/mechanism.toml``; returns its path."""
    path = Path(out_dir) / name / "mechanism.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(mechanism_toml(name))
    return path


def write_run_file(name: str, excitation: str, out_dir, t_end: float = 10.0) -> dict:
    """Simulate one run (``t_end`` s) and write ``out_dir/<name>/runs/<excitation>.csv.gz``;
    returns the run.

    The written file is read back with mc2fmu's own readers (against ``mechanism.toml``,
    written first if missing) and the joint errors are recomputed from it:
    ``info['file_joint_error']``.
    """
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.data.poses import read_run, write_run

    toml_path = Path(out_dir) / name / "mechanism.toml"
    if not toml_path.exists():
        write_mechanism(name, out_dir)
    run = simulate(name, excitation, t_end=t_end)
    path = Path(out_dir) / name / "runs" / f"{excitation}.csv.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    m = model(name)
    extra = {}
    if any(s.recorded for s in m.springs):  # what a tool exporting element forces writes
        length, rate = spring_states(m, run)
        extra = {f"{s.name}.tension": s.tension(length[:, i] - s.length, rate[:, i])
                 for i, s in enumerate(m.springs) if s.recorded}
    write_run(path, run["t"], run["body_names"], run["origin"], run["rotation"], run["input_names"], run["u"],
              extra=extra)
    back = read_run(path, load_mechanism(toml_path))
    run["path"] = str(path)
    run["info"]["file_joint_error"] = max(joint_errors(model(name), back.origin, back.rotation).values())
    run["info"]["file_input_error"] = float(np.max(np.abs(back.u - run["u"])))
    return run


def write_example(name: str, out_dir) -> dict[str, dict]:
    """Write ``out_dir/<name>/mechanism.toml`` and ``out_dir/<name>/runs/<excitation>.csv.gz``
    for the four excitations; returns the runs by excitation."""
    write_mechanism(name, out_dir)
    return {excitation: write_run_file(name, excitation, out_dir) for excitation in EXCITATIONS}


def run_summary(run: dict) -> dict:
    """The scalar checks of a run and the range of each main coordinate (small, picklable)."""
    info = run["info"]
    return {
        "name": run["name"],
        "excitation": run["excitation"],
        "samples": len(run["t"]),
        "wall_time": info["wall_time"],
        "dof": info["dof"]["dof"],
        "redundant": info["dof"]["redundant"],
        "joint_error": run["joint_error"],
        "file_joint_error": info.get("file_joint_error"),
        "kinetic_energy_check": info["kinetic_energy_check"],
        "energy_drift": run["energy_balance"]["drift"],
        "energy_drift_relative_to_kinetic": run["energy_balance"]["drift_relative_to_kinetic"],
        "energy_drift_relative_to_exchanged": run["energy_balance"]["drift_relative_to_exchanged"],
        "kinetic_energy_max": float(run["kinetic_energy"].max()),
        "input_range": [(float(lo), float(hi)) for lo, hi in zip(run["u"].min(axis=0), run["u"].max(axis=0))],
        "ranges": {k: (float(v.min()), float(v.max())) for k, v in run["coordinates"].items()},
    }


# ---------------------------------------------------------------------------- small oscillations


def small_oscillations(name: str | Model, amplitude: float = 0.02, t_end: float = 20.0, step: float = 1e-4,
                       output_step: float = 1e-3) -> dict:
    """Free small oscillations about the reference pose (the static equilibrium under the
    static inputs): each input gets the static value plus a short pulse (a half sine over its
    first 0.1 s, of ``amplitude`` times the static weight scale, a different sign pattern per
    input so that every mode is excited), then stays at the static value.  Returns ``t`` and
    ``origin`` (n, n_b, 3) of the free part (after 0.2 s).  ``name`` may be a :class:`Model` (a
    physical variant with its own static inputs)."""
    m = model(name) if isinstance(name, str) else name
    weight = sum(b.mass for b in m.bodies) * float(np.linalg.norm(m.gravity)) or 1.0
    scale = amplitude * weight * 0.1

    def pulse(k: int):
        static = float(m.static_inputs[k])
        sign = (-1.0) ** k * (1.0 + 0.5 * k)
        return lambda t: static + (sign * scale * np.sin(np.pi * t / 0.1) if t < 0.1 else 0.0)

    built = _exudyn.build(m, [pulse(k) for k in range(len(m.inputs))], sensors=("poses",))
    _exudyn.solve(built, t_end, step, output_step)
    t, origin = _exudyn.stored(built, "origin")
    keep = t >= 0.2
    return {"t": t[keep], "origin": origin[keep]}


def undamped(name: str | Model) -> Model:
    """The mechanism with every damper removed (springs kept): a physical variant of it."""
    m = model(name) if isinstance(name, str) else name
    return replace(m, springs=tuple(replace(s, damping=0.0) for s in m.springs))


def undamped_modes(name: str | Model, t_end: float = 20.0) -> tuple[np.ndarray, list[list[int]]]:
    """The small-oscillation frequencies (Hz, ascending) of the mechanism without its dampers
    (:func:`undamped`), from the engine's free oscillation after a pulse
    (:func:`small_oscillations`, ``t_end`` s, all body origins), fitted by sinusoids started from
    Exudyn's own linearisation (``ComputeODE2Eigenvalues`` on the constraints' null space; a
    start, not the reference: on the hexapod its two highest frequencies are 0.8 % above the
    free oscillation's, and peak picking alone takes the twice-frequency response of the
    strongest mode for a weakly excited one).  The record is exact (no noise), so the fit
    separates modes well inside the spectral resolution ``1 / t_end``; modes closer than a
    tenth of it (the hexapod's two sway modes, 0.003 Hz apart) are one oscillation with one
    fitted frequency.  Returns the frequencies of the groups and the groups (indices into the
    ascending modes)."""
    from scipy.optimize import least_squares

    m = undamped(name)
    built = _exudyn.build(m, [(lambda t, c=float(c): c) for c in m.static_inputs])
    values, _ = built.mbs.ComputeODE2Eigenvalues(convert2Frequencies=True)
    f0 = np.sort(np.asarray(values, dtype=float))
    f0 = f0[f0 > 1e-6 * max(1.0, float(f0.max()))]
    groups: list[list[int]] = []
    for i, f in enumerate(f0):
        if groups and f - f0[groups[-1][-1]] < 0.1 / t_end:
            groups[-1].append(i)
        else:
            groups.append([i])
    free = small_oscillations(m, t_end=t_end)
    y = free["origin"].reshape(len(free["t"]), -1)
    y = y - y.mean(0)
    tt = free["t"] - free["t"][0]

    def residual(f):
        arg = 2 * np.pi * f[None] * tt[:, None]
        basis = np.concatenate([np.cos(arg), np.sin(arg), np.ones((len(tt), 1))], 1)
        coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
        return (basis @ coef - y).ravel()

    start = np.array([f0[g].mean() for g in groups])
    fit = least_squares(residual, start, x_scale=start, xtol=1e-15, ftol=1e-15,
                        bounds=(0.9 * start, 1.1 * start))
    return fit.x, groups


def oscillation_frequencies(t: np.ndarray, signals: np.ndarray, count: int, damped: bool = False) -> np.ndarray:
    """The ``count`` frequencies (Hz, ascending) of a sum of undamped sinusoids shared by the
    channels ``signals`` (n_t, n_ch, all in one unit): the strongest peaks of the summed power spectrum, refined
    by a least-squares fit of all channels (amplitudes linear, frequencies nonlinear).  With
    ``damped`` the sinusoids decay (``exp(-s_k t)``, ``s_k >= 0`` fitted too) and the result is
    their damped frequencies ``|Im lambda| / 2 pi``, what a linear model with dampers oscillates at."""
    from scipy.optimize import least_squares
    from scipy.signal import find_peaks

    y = signals - signals.mean(0)  # one unit (m) for all channels: no per-channel scaling, which would
    # lift channels quadratic in the amplitude (twice the frequency) and round-off to the level of the rest
    dt = float(t[1] - t[0])
    n_fft = 16 * len(t)
    power = (np.abs(np.fft.rfft(y * np.hanning(len(t))[:, None], n=n_fft, axis=0)) ** 2).sum(1)
    freqs = np.fft.rfftfreq(n_fft, dt)
    peaks, _ = find_peaks(power)
    peaks = peaks[freqs[peaks] > 2.0 / (t[-1] - t[0])]
    guess = np.sort(freqs[peaks[np.argsort(power[peaks])[::-1][:count]]])
    tt = t - t[0]

    k = len(guess)

    def residual(p):
        f, decay = p[:k], (p[k:] if damped else np.zeros(k))
        env = np.exp(-decay[None] * tt[:, None])
        basis = np.concatenate([env * np.cos(2 * np.pi * f[None] * tt[:, None]),
                                env * np.sin(2 * np.pi * f[None] * tt[:, None]), np.ones((len(tt), 1))], 1)
        coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
        return (basis @ coef - y).ravel()

    if not damped:
        return np.sort(least_squares(residual, guess, x_scale=guess, xtol=1e-14, ftol=1e-14).x)
    p0 = np.concatenate([guess, np.zeros(k)])
    fit = least_squares(residual, p0, x_scale=np.concatenate([guess, np.ones(k)]), xtol=1e-14, ftol=1e-14,
                        bounds=(np.concatenate([0.5 * guess, np.zeros(k)]), np.concatenate([2.0 * guess, np.full(k, np.inf)])))
    return np.sort(fit.x[:k])
