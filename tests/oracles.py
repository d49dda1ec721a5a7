"""Independent references (plain rigid-body mechanics, no natural coordinates) for the checks."""

from __future__ import annotations

import numpy as np

from mc2fmu.natural import NCLayout, force_model, mass_matrix, nc_from_poses, nc_velocity


def power_errors(mech, layout: NCLayout, rotation, origin, v_com, omega, u) -> dict[str, float]:
    """For gravity and each input alone: max |f . xdot - physical power| / max |physical power|.

    The physical power is m g . v_com for gravity, (u d) . v_point for a force at a body
    point and (u d) . omega for a torque, from the motion's own velocities.
    """
    fm = force_model(mech, layout, mass_matrix(mech, layout))
    x = nc_from_poses(layout, origin, rotation)
    xd = nc_velocity(layout, rotation, v_com, omega)
    n, n_u = len(x), len(mech.inputs)
    errors = {}
    p = np.einsum("ni,ni->n", fm(x, np.zeros((n, n_u))), xd)
    ref = sum(b.mass * v_com[:, k] @ mech.gravity for k, b in enumerate(mech.bodies))
    errors["gravity"] = _relative(p, ref)
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


def _relative(p: np.ndarray, ref: np.ndarray) -> float:
    scale = float(np.max(np.abs(ref)))
    assert scale > 0, "a load with no power: the check would be empty"
    return float(np.max(np.abs(p - ref)) / scale)
