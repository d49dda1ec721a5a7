"""Rolling a reduced model out in time through its state-space interface (numpy).

Every model kind (:data:`mc2fmu.models.model.MODEL_KINDS`) is run the same way: ``start``
from ``(q0, qd0, u0)``, ``advance`` one sample step with the input held, ``observe`` the
outputs; the FMUs run the same start, step and outputs, so ``mc2fmu simulate`` and an FMU
agree on every output.
"""

from __future__ import annotations

import numpy as np


def trajectory(model, q0: np.ndarray, qd0: np.ndarray, u: np.ndarray) -> dict[str, np.ndarray]:
    """``q``, ``qd`` (n_t, m) and ``x`` (n_t, n) from the state ``(q0, qd0)`` on the inputs
    ``u`` (n_t, n_u); step ``k -> k+1`` holds ``u[k]``, and the model's ``states`` (n_t,
    state_size).  A non-finite state ends the run (the rest is NaN).  Angle-type coordinates
    are continuous in time and start at ``q0``'s turn."""
    u = np.asarray(u, dtype=np.float64).reshape(len(u), -1)
    n_t = len(u)
    states = np.full((n_t, model.state_size), np.nan)
    s = model.start(q0, qd0, u[0])
    for k in range(n_t):
        if not np.isfinite(s).all():
            break
        states[k] = s
        if k + 1 < n_t:
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                s = model.advance(s, u[k])
    ok = np.isfinite(states).all(axis=1)
    q, qd, x = (np.array(a, dtype=np.float64) for a in model.observe(np.where(ok[:, None], states, states[0])))
    for a in (q, qd, x):
        a[~ok] = np.nan
    angles = np.asarray(model.angles, dtype=bool)
    if angles.any() and ok.any():
        q[ok] = unwrap_from(q[ok], angles, np.asarray(q0, dtype=np.float64).reshape(-1))
    return {"q": q, "qd": qd, "x": x, "states": states}


def unwrap_angles(q: np.ndarray, angles) -> np.ndarray:
    """Unwrap angle-type columns of a time series ``q`` (n_t, m) so they are continuous."""
    q = np.array(q, dtype=np.float64)
    for i, a in enumerate(angles):
        if a:
            q[:, i] = np.unwrap(q[:, i])
    return q


def unwrap_from(q: np.ndarray, angles: np.ndarray, q0: np.ndarray) -> np.ndarray:
    """Angle columns of ``q`` (n_t, m) made continuous in time and shifted by whole turns so
    the first sample is nearest ``q0`` (a no-op on a series that already is)."""
    q = q.copy()
    q[:, angles] = np.unwrap(q[:, angles], axis=0)
    turns = np.round((q0[angles] - q[0, angles]) / (2.0 * np.pi))
    q[:, angles] += 2.0 * np.pi * turns
    return q


def initial_history(model, q0: np.ndarray, qd0: np.ndarray, u0: np.ndarray) -> np.ndarray:
    """``q_{-1}`` of a two-step map started at ``(q0, qd0)`` (any ``model`` with ``dt`` and
    ``acceleration``): the second-order Taylor step backwards,
    ``q_{-1} = q0 - dt qd0 + dt^2/2 a(q0, qd0, u0)``."""
    dt = model.dt
    q, v = np.atleast_2d(q0), np.atleast_2d(qd0)
    a = model.acceleration(q, v, np.atleast_2d(u0))
    return (q - dt * v + 0.5 * dt * dt * a)[0]


def rollout(model, q_prev: np.ndarray, q0: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``q`` (n_t, m) of a decoder-manifold model's one-step map from ``q_{-1}``, ``q_0`` and the
    inputs ``u`` (n_t, n_u) at every step (step ``i -> i+1`` uses ``u[i]``).  Non-finite
    states end the rollout (the rest is NaN)."""
    u = np.asarray(u, dtype=np.float64).reshape(len(u), -1)
    n_t = len(u)
    out = np.full((n_t, len(q0)), np.nan)
    out[0] = q0
    qp, q = np.atleast_2d(q_prev).astype(np.float64), np.atleast_2d(q0).astype(np.float64)
    for i in range(n_t - 1):
        qn = model.step(qp, q, u[i : i + 1])
        if not np.isfinite(qn).all():
            break
        out[i + 1] = qn[0]
        qp, q = q, qn
    return out


def motion_series(artifact, q: np.ndarray, qd: np.ndarray) -> dict[str, np.ndarray] | None:
    """The motion outputs (:mod:`mc2fmu.models.motion`: per body the origin's velocity and the
    angular velocity, then ``kinetic_energy``, ``potential_energy``) at the states ``q``, ``qd``
    (n_t, m), by name, as an FMU of ``artifact`` outputs them at the model's physical
    parameters; None for a model kind without them (the capability table's ``motion``).  A
    model on a chart (node, local-PCA) gives those of its decoded motion (``x = decode(q)``,
    ``xd = J(q) qd`` through the chart).  Non-finite states give NaN rows."""
    from ..capabilities import kind
    from ..mechanics.variants import parameter_vector
    from . import motion

    if not kind(artifact.reducer).motion:
        return None
    model = artifact.decoder_model
    q, qd = np.atleast_2d(np.asarray(q, dtype=np.float64)), np.atleast_2d(np.asarray(qd, dtype=np.float64))
    ok = np.isfinite(q).all(axis=1) & np.isfinite(qd).all(axis=1)
    geometry = motion.MotionGeometry.of(artifact.layout, model.springs.D, model.springs.e, model.springs.laws)
    values = np.full((len(q), geometry.n_outputs), np.nan)
    if ok.any():
        x, J, _ = model.decode_jh(q[ok])
        values[ok] = motion.evaluate(geometry, x, np.einsum("bnm,bm->bn", J, qd[ok]),
                                     parameter_vector(artifact.mechanism))
    names = [n for n, _, _ in motion.output_names(artifact.mechanism.body_names)]
    return {n: values[:, i] for i, n in enumerate(names)}


def initial_state(model, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(q0, qd0)`` of a run of a decoder-manifold ``model`` from its first three NC samples
    ``x`` (``qd0`` by a second-order one-sided difference of the encoded ``q``, angle-type
    columns unwrapped): how an FMU is started with ``q_start``/``qd_start``."""
    from ..mechanics.natural import finite_difference_velocity

    q = unwrap_angles(model.encode(np.asarray(x[:3], dtype=np.float64)), model.angles)
    return q[0], finite_difference_velocity(q, model.dt)[0]


def simulate_run(artifact, x: np.ndarray, u: np.ndarray) -> dict[str, np.ndarray]:
    """Roll the model out on a run's inputs from the run's initial state.

    The initial state ``(q0, qd0)`` is :meth:`ModelArtifact.initial_state_of` the run, exactly
    as an FMU started with ``q_start``/``qd_start``.  Returns ``q``, ``qd``, ``x`` and
    ``envelope`` (distance outside the training range).
    """
    model = artifact.model
    u = np.asarray(u, dtype=np.float64).reshape(len(x), -1)
    q0, qd0 = artifact.initial_state_of(x)
    res = trajectory(model, q0, qd0, u)
    # the input that drove the step into sample k (an FMU's outputs at t_k are computed before
    # the importer sets the next input): u_0 at the start, u_{k-1} after
    u_applied = np.concatenate([u[:1], u[:-1]]) if len(u) else u
    res["envelope"] = artifact.envelope.distance(res["q"], res["qd"], u_applied)
    extent = getattr(model, "extent", None)  # a kind's own validity range (local-PCA: its clusters' extent)
    if extent is not None:
        ok = np.isfinite(res["states"]).all(axis=1)
        res["envelope"][ok] = np.maximum(res["envelope"][ok], extent(res["states"][ok]))
    return res
