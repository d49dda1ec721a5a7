"""Rolling a reduced model out in time with the same one-step map it was trained with."""

from __future__ import annotations

import numpy as np
import torch

from .errors import ModelError
from .natural import finite_difference_velocity

F64 = torch.float64


def initial_history(model, q0: np.ndarray, qd0: np.ndarray, u0: np.ndarray, dt: float) -> np.ndarray:
    """``q_{-1}`` from a state ``(q0, qd0)``: second-order Taylor step backwards,
    ``q_{-1} = q0 - dt qd0 + dt^2/2 a(q0, qd0, u0)``."""
    with torch.no_grad():
        q = torch.as_tensor(np.atleast_2d(q0), dtype=F64)
        v = torch.as_tensor(np.atleast_2d(qd0), dtype=F64)
        u = torch.as_tensor(np.atleast_2d(u0), dtype=F64)
        a = model.acceleration(q, v, u)
        return (q - dt * v + 0.5 * dt * dt * a).numpy()[0]


def rollout(model, q_prev: np.ndarray, q0: np.ndarray, u: np.ndarray, dt: float) -> np.ndarray:
    """``q`` (n_t, m) from ``q_{-1}``, ``q_0`` and the inputs ``u`` (n_t, n_u) at every step.

    Step ``i -> i+1`` uses ``u[i]``.  Non-finite states end the rollout (the rest is NaN).
    """
    u = np.atleast_2d(np.asarray(u, dtype=np.float64))
    n_t = len(u)
    out = np.full((n_t, len(q0)), np.nan)
    out[0] = q0
    with torch.no_grad():
        qp = torch.as_tensor(np.atleast_2d(q_prev), dtype=F64)
        q = torch.as_tensor(np.atleast_2d(q0), dtype=F64)
        ut = torch.as_tensor(u, dtype=F64)
        for i in range(n_t - 1):
            qn = model.step(qp, q, ut[i : i + 1], dt)
            if not torch.isfinite(qn).all():
                break
            out[i + 1] = qn[0].numpy()
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

    The initial state ``(q0, qd0)`` is encoded from the run's first samples (``qd0`` by a
    second-order one-sided difference), exactly as an FMU started with ``q_start``/``qd_start``;
    ``qd`` is :func:`grid_velocity`, as in the FMU.
    Returns ``q``, ``qd``, ``x`` (decoded) and ``envelope`` (distance outside the training range).
    """
    dt = artifact.dt
    q_data = artifact.encode(x[:3])
    q0, qd0 = q_data[0], finite_difference_velocity(q_data, dt)[0]
    q_prev = initial_history(artifact.model, q0, qd0, u[0], dt)
    q = rollout(artifact.model, q_prev, q0, u, dt)
    qd = grid_velocity(q, q_prev, qd0, dt)
    xs = artifact.decode(np.nan_to_num(q))
    xs[~np.isfinite(q).all(axis=1)] = np.nan
    # the input that drove the step into sample k (an FMU's outputs at t_k are computed before
    # the importer sets the next input): u_0 at the start, u_{k-1} after
    u_applied = np.concatenate([u[:1], u[:-1]]) if len(u) else u
    env = artifact.envelope.distance(q, qd, u_applied)
    return {"q": q, "qd": qd, "x": xs, "envelope": env}


def simulate_file(model_dir, mechanism_path, run_path, out) -> dict:
    """``mc2fmu simulate``: roll out on a run and write poses + q, qd, envelope; return the accuracy."""
    from .artifact import load_model
    from .mechanism import load_mechanism
    from .metrics import position_nrmse, rotation_error
    from .natural import nc_from_poses, poses_from_nc
    from .poses import read_run, write_run

    art = load_model(model_dir)
    mech = load_mechanism(mechanism_path)
    if mech.body_names != art.mechanism.body_names or mech.input_names != art.mechanism.input_names:
        raise ModelError(f"{mechanism_path}: bodies {mech.body_names} / inputs {mech.input_names} differ from the "
                         f"model's ({art.mechanism.body_names} / {art.mechanism.input_names}); use the mechanism the model was trained on")
    run = read_run(run_path, mech)
    if abs(run.dt - art.dt) > 1e-9 * art.dt:
        raise ModelError(f"{run_path}: sample step {run.dt:g} s differs from the model's step {art.dt:g} s; resample the run")
    x = nc_from_poses(art.layout, run.origin, run.rotation)
    res = simulate_run(art, x, run.u)
    ok = np.isfinite(res["x"]).all(axis=1)
    origin = np.full_like(run.origin, np.nan)
    rot = np.tile(np.eye(3), (*run.origin.shape[:2], 1, 1))
    if ok.any():
        origin[ok], rot[ok] = poses_from_nc(art.layout, res["x"][ok])
    write_run(out, run.t, mech.body_names, origin, rot, mech.input_names, run.u,
              extra={"q": res["q"], "qd": res["qd"], "envelope": res["envelope"]})
    exit_index = art.envelope.first_exit(res["envelope"])
    return {
        "samples": len(run.t),
        "nrmse": position_nrmse(origin, run.origin),
        "max_position_error": float(np.nanmax(np.linalg.norm(origin - run.origin, axis=-1))) if ok.all() else float("inf"),
        "max_rotation_error": float(rotation_error(rot[ok], run.rotation[ok]).max()) if ok.all() else float("inf"),
        "envelope_first_exit": None if exit_index is None else float(run.t[exit_index]),
        "reached_end": bool(ok.all()),
    }
