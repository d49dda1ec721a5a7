"""``mc2fmu linearize``: the reduced model's linear state-space form at an operating point.

The reduced ODE ``qdd = f(q, qd, u)`` (:func:`mc2fmu.models.manifold.acceleration`, the same
arithmetic as ``simulate`` and the FMUs) is evaluated by the run-time model's numpy functions
on complex arrays, so its derivatives are exact to rounding (the complex step: no
subtraction, no step-size trade-off), not finite differences; no torch.  With the state
``s = (q, qd)``::

    d s/dt = A ds + B du,     y = C ds + D du,
    A = [[0, I], [df/dq, df/dqd]],   B = [[0], [df/du]],

and outputs ``y``: every body's origin (x, y, z, global frame, m), then ``q`` and ``qd``.
(The orientation outputs of the FMU are not linearised: their quaternion is a nonlinear
function of a rotation matrix; the origins carry the same motion.)

The default operating point is a static equilibrium under the given input (default zero):
``f(q, 0, u) = 0`` solved by Newton's method from the model's initial state, with a
backtracking line search.  The eigenvalues of ``A`` give the small-oscillation frequencies and
damping ratios.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..capabilities import require
from ..errors import LinearizeError, ModelError
from ..files import atomic_output, json_safe


# ------------------------------------------------------------------ the model, differentiated by the complex step

#: the complex step's size, relative to each variable's scale (the derivative has no
#: subtraction: any h far below the rounding of the values gives it to rounding)
STEP = 1e-20


class Dynamics:
    """``qdd = f(q, qd, u)`` and the body origins of a :class:`~mc2fmu.models.manifold.ManifoldModel`,
    evaluated by the run-time model's own functions on complex arrays (numpy only): at
    ``z + i h e_j`` their imaginary parts over ``h`` are the exact derivatives along ``e_j``
    (:mod:`mc2fmu.models.array_ops`)."""

    def __init__(self, model, layout):
        self.model = model
        # the body origins: r0 = the first point of each body (the layout's centre of mass) minus R com
        self.origin_rows = [(bl.offset, np.asarray(bl.com, dtype=np.float64), bl.length) for bl in layout.bodies]

    def _decode(self, q, second: bool = True):
        from ..models.manifold import decoder_features
        from ..models.mlp import mlp, mlp_jh

        m = self.model
        phi, Jphi, Hphi = decoder_features(q, m.angles, m.q_mean, m.q_scale, second=second)
        s = m.x_scale
        if not second:
            return m.x_mean + s * mlp(m.decoder.layers, m.activation, phi)
        y, Jy, Hy = mlp_jh(m.decoder.layers, m.activation, phi, Jphi, Hphi)
        return m.x_mean + s * y, s[:, None] * Jy, s[:, None, None] * Hy

    def acceleration(self, q, qd, u):
        """(B, m) from (B, m), (B, m), (B, n_u) arrays, real or complex."""
        from ..models.manifold import acceleration, applied_force, manifold_terms

        m = self.model
        x, J, H = self._decode(q)
        lib = m.library
        ident = None if lib is None or not len(lib) else (lib, lib.Xi, lib.param, q, u)
        springs = m.springs if len(m.springs.k) else None
        terms = manifold_terms(x, J, H, m.mass, applied_force(m.f_g, m.f_B, m.f_C, x, u), springs, ident)
        with np.errstate(invalid="ignore", divide="ignore"):
            return acceleration(terms, qd)

    def origins(self, q):
        """Body origins (B, 3 n_b): ``r0 - R com`` with ``R``'s columns ``(r_k - r0) / L`` (linear
        in the decoded points; at a rigid decoded body this is the pose export's origin)."""
        x = self._decode(q, second=False)
        out = []
        for offset, com, length in self.origin_rows:
            p = x[:, offset: offset + 12].reshape(-1, 4, 3)
            R = (p[:, 1:] - p[:, :1]).swapaxes(1, 2) / length  # columns e_k
            out.append(p[:, 0] - R @ com)
        return np.concatenate(out, 1)


def _complex_step(fn, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fn(z)`` and its Jacobian (n_out, len(z)) by the complex step, one batch of len(z) rows."""
    z = np.asarray(z, dtype=np.float64)
    h = STEP * np.maximum(np.abs(z), 1.0)
    Z = np.tile(z.astype(np.complex128), (len(z), 1))
    Z[np.arange(len(z)), np.arange(len(z))] += 1j * h
    out = fn(Z)
    value = fn(z[None].astype(np.complex128))[0].real
    return value, (out.imag / h[:, None]).T


def jacobians(dyn: Dynamics, q: np.ndarray, qd: np.ndarray, u: np.ndarray):
    """``f``, ``df/dq``, ``df/dqd``, ``df/du`` and the outputs' ``dy/dq`` at one point (exact, by
    the complex step)."""
    m, n_u = len(q), len(u)
    z = np.concatenate([q, qd, u]).astype(np.float64)
    value, F = _complex_step(lambda Z: dyn.acceleration(Z[:, :m], Z[:, m:2 * m], Z[:, 2 * m:]), z)
    _, Yq = _complex_step(dyn.origins, np.asarray(q, dtype=np.float64))
    return value, F[:, :m], F[:, m:2 * m], F[:, 2 * m:2 * m + n_u], Yq


# ------------------------------------------------------------------ linearization


@dataclass
class Linearization:
    q: np.ndarray
    qd: np.ndarray
    u: np.ndarray
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    states: list[str]
    inputs: list[str]
    outputs: list[str]
    residual: float  # |f(q, qd, u)| at the operating point
    equilibrium: bool
    #: the physical parameters a variant mechanism file changed (mc2fmu.mechanics.variants)
    changed: tuple = ()

    def modes(self) -> list[dict[str, float]]:
        """Oscillatory modes (one per conjugate pair, by frequency) and real modes: eigenvalue,
        undamped natural frequency (Hz) and damping ratio."""
        ev = np.linalg.eigvals(self.A)
        out = []
        for lam in sorted(ev, key=lambda z: (abs(z), z.imag)):
            if lam.imag < -1e-12 * max(abs(lam), 1.0):
                continue
            wn = abs(lam)
            out.append({"real": float(lam.real), "imag": float(lam.imag), "frequency_hz": wn / (2 * math.pi),
                        "damping_ratio": float(-lam.real / wn) if wn > 0 else float("nan"),
                        "oscillatory": bool(abs(lam.imag) > 1e-12 * max(wn, 1.0))})
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": "mc2fmu-linearization", "version": 1,
                "operating_point": {"q": self.q.tolist(), "qd": self.qd.tolist(), "u": self.u.tolist(),
                                    "equilibrium": self.equilibrium, "residual": self.residual},
                "states": self.states, "inputs": self.inputs, "outputs": self.outputs,
                "A": self.A.tolist(), "B": self.B.tolist(), "C": self.C.tolist(), "D": self.D.tolist(),
                "modes": self.modes(),
                "mechanism_changes": [{"item": d.item, "trained": d.trained, "used": d.variant} for d in self.changed]}


def find_equilibrium(dyn: Dynamics, q0: np.ndarray, u: np.ndarray, tol: float = 1e-10,
                     max_iter: int = 100) -> tuple[np.ndarray, float]:
    """``q`` with ``f(q, 0, u) = 0`` by Newton's method from ``q0`` (backtracking on ``|f|``)."""
    m = len(q0)
    qd = np.zeros(m)
    q = np.asarray(q0, dtype=np.float64).copy()
    f, Fq, _, _, _ = jacobians(dyn, q, qd, u)
    norm = float(np.linalg.norm(f))
    for _ in range(max_iter):
        if norm <= tol:
            break
        try:
            dq = np.linalg.solve(Fq, -f)
        except np.linalg.LinAlgError:
            dq = np.linalg.lstsq(Fq, -f, rcond=None)[0]
        step = 1.0
        while step > 1e-6:
            trial = q + step * dq
            ft = dyn.acceleration(trial[None], qd[None], np.asarray(u, dtype=np.float64)[None])[0]
            if np.isfinite(ft).all() and np.linalg.norm(ft) < norm:
                break
            step *= 0.5
        else:
            break
        q = trial
        f, Fq, _, _, _ = jacobians(dyn, q, qd, u)
        norm = float(np.linalg.norm(f))
    return q, norm


def linearize(model_dir: str | os.PathLike, q: list[float] | None = None, qd: list[float] | None = None,
              u: list[float] | None = None, mechanism: str | os.PathLike | None = None) -> Linearization:
    """Linearise the model of ``model_dir``: at ``(q, qd, u)`` when ``q`` is given, else at the
    static equilibrium under ``u`` (default zero) nearest the model's initial state; with the
    physical parameters of ``mechanism`` when given (a variant of the trained mechanism file,
    :meth:`~mc2fmu.models.artifact.ModelArtifact.for_mechanism`)."""
    from ..mechanics.mechanism import load_mechanism
    from ..models.artifact import load_artifact
    from ..models.manifold import ManifoldModel

    art = load_artifact(model_dir)
    require(art, "linearize", ModelError)  # before a variant: the model kind's reason first
    changed = []
    if mechanism is not None:
        art, changed = art.for_mechanism(load_mechanism(mechanism), mechanism)
    model = art.model
    assert isinstance(model, ManifoldModel)  # the table gives linearize to decoder-manifold models only
    m, n_u = model.dof, model.n_u
    u = np.zeros(n_u) if u is None else np.asarray(u, dtype=np.float64)
    for name, v, n in (("u", u, n_u), ("q", q, m), ("qd", qd, m)):
        if v is not None and (len(v) != n or not np.isfinite(np.asarray(v, dtype=np.float64)).all()):
            raise LinearizeError(f"--at {name}: {n} finite value(s) expected (the model has {m} coordinate(s) and "
                                 f"{n_u} input(s)), got {list(v)[:8]}")
    dyn = Dynamics(model, art.layout)
    if q is None:
        if qd is not None and np.any(np.asarray(qd) != 0):
            raise LinearizeError("--at qd=...: an equilibrium is at rest; give q as well to linearise at a moving state")
        q_op, residual = find_equilibrium(dyn, np.asarray(art.initial_state.q, dtype=np.float64), u)
        scale = float(np.linalg.norm(jacobians(dyn, q_op, np.zeros(m), u)[1])) or 1.0
        if not residual <= 1e-8 * max(scale, 1.0):
            raise LinearizeError(f"{model_dir}: no static equilibrium found under u = {u.tolist()} from the model's "
                                 f"initial state (|qdd| = {residual:.3g} after Newton's method); give the operating "
                                 "point with --at q=...")
        qd_op, equilibrium = np.zeros(m), True
    else:
        q_op = np.asarray(q, dtype=np.float64)
        qd_op = np.zeros(m) if qd is None else np.asarray(qd, dtype=np.float64)
        equilibrium = False
    f, Fq, Fqd, Fu, Yq = jacobians(dyn, q_op, qd_op, u)
    residual = float(np.linalg.norm(f))
    equilibrium = equilibrium or (residual <= 1e-8 and not np.any(qd_op))
    A = np.block([[np.zeros((m, m)), np.eye(m)], [Fq, Fqd]])
    B = np.vstack([np.zeros((m, n_u)), Fu])
    n_y = Yq.shape[0]
    C = np.block([[Yq, np.zeros((n_y, m))], [np.eye(2 * m)]])
    D = np.zeros((n_y + 2 * m, n_u))
    coords = [f"q[{i + 1}]" for i in range(m)]
    states = coords + [f"qd[{i + 1}]" for i in range(m)]
    outputs = [f"{b}.{c}" for b in art.mechanism.body_names for c in "xyz"] + states
    return Linearization(q_op, qd_op, u, A, B, C, D, states, list(art.mechanism.input_names), outputs, residual,
                         bool(equilibrium), tuple(changed))


def write_linearization(lin: Linearization, out: str | os.PathLike) -> Path:
    out = Path(out)
    with atomic_output(out) as tmp:
        # strict JSON: a value that is not finite (an undamped mode's damping ratio) is null
        Path(tmp).write_text(json.dumps(json_safe(lin.to_json()), indent=1, allow_nan=False))
    return out
