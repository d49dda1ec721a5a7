"""Rolling a reduced model out in time with the same one-step map it was trained with."""

from __future__ import annotations

import numpy as np
import torch

from .dynamics import acceleration

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


def velocity(q: np.ndarray, dt: float) -> np.ndarray:
    """Centred (second-order, one-sided at the ends) velocity of a rolled-out ``q``."""
    from .natural import finite_difference_velocity

    return finite_difference_velocity(q, dt)


__all__ = ["initial_history", "rollout", "velocity", "acceleration"]
