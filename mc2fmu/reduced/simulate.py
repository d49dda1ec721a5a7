"""Rolling a reduced model out in time with the one-step map it was trained with (numpy).

The same start, stepping and velocity rule as the FMUs, so ``mc2fmu simulate`` and an FMU
agree on every output.
"""

from __future__ import annotations

import numpy as np


def initial_history(model, q0: np.ndarray, qd0: np.ndarray, u0: np.ndarray) -> np.ndarray:
    """``q_{-1}`` from a state ``(q0, qd0)``: second-order Taylor step backwards,
    ``q_{-1} = q0 - dt qd0 + dt^2/2 a(q0, qd0, u0)``."""
    dt = model.dt
    q, v = np.atleast_2d(q0), np.atleast_2d(qd0)
    a = model.acceleration(q, v, np.atleast_2d(u0))
    return (q - dt * v + 0.5 * dt * dt * a)[0]


def rollout(model, q_prev: np.ndarray, q0: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``q`` (n_t, m) from ``q_{-1}``, ``q_0`` and the inputs ``u`` (n_t, n_u) at every step.

    Step ``i -> i+1`` uses ``u[i]``.  Non-finite states end the rollout (the rest is NaN).
    """
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


def grid_velocity(q: np.ndarray, q_prev: np.ndarray, qd0: np.ndarray, dt: float) -> np.ndarray:
    """``qd`` on the time grid, causal and second order, as the FMU computes it:
    ``qd_0 = qd0``, ``qd_k = (3 q_k - 4 q_{k-1} + q_{k-2}) / (2 dt)`` with ``q_{-1} = q_prev``.

    Causal because an FMU cannot look ahead: the state after ``q_k`` needs the next input.
    """
    hist = np.concatenate([np.atleast_2d(q_prev), q])
    qd = np.empty_like(q)
    qd[0] = qd0
    qd[1:] = (3.0 * hist[2:] - 4.0 * hist[1:-1] + hist[:-2]) / (2.0 * dt)
    return qd


def simulate_run(artifact, x: np.ndarray, u: np.ndarray) -> dict[str, np.ndarray]:
    """Roll the model out on a run's inputs from the run's initial state.

    The initial state ``(q0, qd0)`` is :meth:`ModelArtifact.initial_state_of` the run, exactly
    as an FMU started with ``q_start``/``qd_start``; ``qd`` is :func:`grid_velocity`, as in the
    FMU.  Returns ``q``, ``qd``, ``x`` (decoded) and ``envelope`` (distance outside the
    training range).
    """
    model = artifact.model
    u = np.asarray(u, dtype=np.float64).reshape(len(x), -1)
    q0, qd0 = artifact.initial_state_of(x)
    q_prev = initial_history(model, q0, qd0, u[0])
    q = rollout(model, q_prev, q0, u)
    qd = grid_velocity(q, q_prev, qd0, model.dt)
    xs = model.decode(np.nan_to_num(q))
    xs[~np.isfinite(q).all(axis=1)] = np.nan
    # the input that drove the step into sample k (an FMU's outputs at t_k are computed before
    # the importer sets the next input): u_0 at the start, u_{k-1} after
    u_applied = np.concatenate([u[:1], u[:-1]]) if len(u) else u
    env = artifact.envelope.distance(q, qd, u_applied)
    return {"q": q, "qd": qd, "x": xs, "envelope": env}
