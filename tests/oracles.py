"""Independent references (plain rigid-body mechanics, no natural coordinates) for the checks."""

from __future__ import annotations

import numpy as np

from mc2fmu.mechanics.mechanism import GROUND
from mc2fmu.mechanics.natural import ForceModel, NCLayout, SpringModel, force_model, mass_matrix, nc_from_poses, nc_velocity


def point_motion(mech, body: str, point, rotation, origin, v_com, omega) -> tuple[np.ndarray, np.ndarray]:
    """Global position and velocity of a body point (or a ground point) from the rigid-body motion."""
    point = np.asarray(point, dtype=float)
    if body == GROUND:
        return np.broadcast_to(point, origin[:, 0].shape), np.zeros_like(origin[:, 0])
    k = mech.body_index(body)
    R = rotation[:, k]
    return origin[:, k] + R @ point, v_com[:, k] + np.cross(omega[:, k], R @ (point - mech.bodies[k].com))


def spring_states(mech, rotation, origin, v_com, omega) -> tuple[np.ndarray, np.ndarray]:
    """Length and its rate (n, n_springs) of every spring, from point kinematics."""
    cols = []
    for sp in mech.springs:
        pa, va = point_motion(mech, sp.body_a, sp.point_a, rotation, origin, v_com, omega)
        pb, vb = point_motion(mech, sp.body_b, sp.point_b, rotation, origin, v_com, omega)
        length = np.linalg.norm(pa - pb, axis=1)
        cols.append((length, np.einsum("ni,ni->n", pa - pb, va - vb) / length))
    n = len(origin)
    return (np.stack([c[0] for c in cols], 1), np.stack([c[1] for c in cols], 1)) if cols else (np.zeros((n, 0)),) * 2


def power_errors(mech, layout: NCLayout, rotation, origin, v_com, omega, u) -> dict[str, float]:
    """For gravity, each input and each spring alone: max |f . xdot - physical power| / max |physical power|.

    The physical power is m g . v_com for gravity, (u d) . v_point for a force at a body
    point, (u d) . omega for a torque and -(k (l - L0) + c ldot) ldot for a spring-damper,
    from the motion's own velocities.
    """
    full = force_model(mech, layout, mass_matrix(mech, layout))
    fm = ForceModel(full.f_g, full.f_B, full.f_C)  # the loads without the springs
    x = nc_from_poses(layout, origin, rotation)
    xd = nc_velocity(layout, rotation, v_com, omega)
    n, n_u = len(x), len(mech.inputs)
    errors = {}
    length, rate = spring_states(mech, rotation, origin, v_com, omega)
    for s, sp in enumerate(mech.springs):
        one = SpringModel(*(a[s : s + 1] for a in (full.springs.D, full.springs.e, full.springs.k, full.springs.c,
                                                    full.springs.L0)))
        p = np.einsum("ni,ni->n", one(x, xd), xd)
        ref = -(sp.stiffness * (length[:, s] - sp.length) + sp.damping * rate[:, s]) * rate[:, s]
        errors[sp.name] = _relative(p, ref)
    p = np.einsum("ni,ni->n", fm(x, np.zeros((n, n_u))), xd)
    ref = sum(b.mass * v_com[:, k] @ mech.gravity for k, b in enumerate(mech.bodies))
    # gravity normal to a plane mechanism's plane (the 3-RRR) does no work: then the NC power
    # must vanish against the power the weights would have along the bodies' velocities
    aligned = sum(b.mass * np.linalg.norm(mech.gravity) * np.linalg.norm(v_com[:, k], axis=1)
                  for k, b in enumerate(mech.bodies))
    errors["gravity"] = _relative(p, ref, None if np.any(ref) else float(np.max(aligned)))
    for i, inp in enumerate(mech.inputs):
        ui = np.zeros((n, n_u))
        ui[:, i] = u[:, i]
        p = np.einsum("ni,ni->n", fm(x, ui) - fm.f_g, xd)
        k = mech.body_index(inp.body)
        load = ui[:, i : i + 1] * inp.direction
        if inp.kind == "torque":
            ref = np.einsum("ni,ni->n", load, omega[:, k])
        else:
            arm = rotation[:, k] @ (inp.point - mech.bodies[k].com)
            ref = np.einsum("ni,ni->n", load, v_com[:, k] + np.cross(omega[:, k], arm))
        errors[inp.name] = _relative(p, ref)
    return errors


def reduced_acceleration(M, forces, x, J, H, u, v) -> np.ndarray:
    """The minimal-coordinate acceleration of a decoded configuration, assembled in numpy:
    ``M_m = J^T M J``, ``G_m = J^T M (H:vv)``, ``qdd = M_m^-1 (J^T f(x, J v, u) - G_m)``
    (``forces`` a natural-coordinate force model, ``f(x, u, xd)``)."""
    f = forces(x, u, J @ v)
    return np.linalg.solve(J.T @ M @ J, J.T @ f - J.T @ M @ np.einsum("nij,i,j->n", H, v, v))


def _relative(p: np.ndarray, ref: np.ndarray, scale: float | None = None) -> float:
    scale = float(np.max(np.abs(ref))) if scale is None else scale
    assert scale > 0, "a load with no power: the check would be empty"
    return float(np.max(np.abs(p - ref)) / scale)


def acceleration_error(art, mechanism_path, run_path, every: int) -> float:
    """A model's accelerations against a recorded run's: the run encoded by the model, its
    second differences every ``every`` samples (0.2 s in from either end) as the reference;
    rms error over rms acceleration."""
    from mc2fmu.data.poses import read_run
    from mc2fmu.mechanics.mechanism import load_mechanism

    r = read_run(run_path, load_mechanism(mechanism_path))
    q = art.encode_series(nc_from_poses(art.layout, r.origin, r.rotation))
    dt = float(r.t[1] - r.t[0])
    k = np.arange(200, len(q) - 200, every)
    qd = (q[k + 1] - q[k - 1]) / (2 * dt)
    qdd = (q[k + 1] - 2 * q[k] + q[k - 1]) / dt**2
    err = art.model.acceleration(q[k], qd, r.u[k]) - qdd
    return float(np.sqrt(np.mean(err**2) / np.mean(qdd**2)))
