"""``mc2fmu linearize``: the reduced model's linear state-space form at an operating point.

The reduced ODE ``qdd = f(q, qd, u)`` (:func:`mc2fmu.models.manifold.acceleration`, the same
arithmetic as ``simulate`` and the FMUs) is evaluated in torch float64 from the run-time
model's arrays, so its derivatives are exact (reverse-mode AD through the decoder's explicit
``x``, ``J``, ``H``: one order more than the dynamics use), not finite differences.  With the
state ``s = (q, qd)``::

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

from ..errors import LinearizeError, ModelError
from ..files import atomic_output, json_safe


# ------------------------------------------------------------------ the model in torch


class TorchDynamics:
    """``qdd = f(q, qd, u)`` and the body origins of a :class:`~mc2fmu.models.manifold.ManifoldModel`
    in torch float64 (differentiable), from the run-time model's arrays."""

    def __init__(self, model, layout):
        import torch

        from ..models.terms import TermLibrary

        self.torch = torch
        self.model = model

        def t(a):
            return torch.as_tensor(np.asarray(a, dtype=np.float64))

        self._t = t
        self.layers = [(t(W), t(b)) for W, b in model.decoder.layers]
        self.q_mean, self.q_scale = t(model.q_mean), t(model.q_scale)
        self.x_mean, self.x_scale = t(model.x_mean), t(model.x_scale)
        self.mass = t(model.mass)
        self.f_g, self.f_B, self.f_C = t(model.f_g), t(model.f_B), t(model.f_C)
        s = model.springs
        laws = s.laws.converted(t) if getattr(s, "laws", None) is not None and len(s.laws) else None
        self.springs = dataclasses.replace(s, D=t(s.D), e=t(s.e), k=t(s.k), c=t(s.c), L0=t(s.L0), laws=laws)
        lib = model.library
        self.library = None
        if lib is not None and len(lib):
            self.library = TermLibrary(lib.kinds, lib.index, lib.param, lib.Xi)
            self.Xi, self.param = t(lib.Xi), t(lib.param)
        # the body origins: r0 = the first point of each body (the layout's centre of mass) minus R com
        self.origin_rows = [(bl.offset, np.asarray(bl.com, dtype=np.float64), bl.length) for bl in layout.bodies]

    def decode_jh(self, q):
        from ..models.manifold import decoder_features
        from ..models.mlp import mlp_jh

        phi, Jphi, Hphi = decoder_features(q, self.model.angles, self.q_mean, self.q_scale)
        y, Jy, Hy = mlp_jh(self.layers, self.model.activation, phi, Jphi, Hphi)
        s = self.x_scale
        return self.x_mean + s * y, s[:, None] * Jy, s[:, None, None] * Hy

    def acceleration(self, q, qd, u):
        """(B, m) from (B, m), (B, m), (B, n_u) tensors."""
        from ..models.manifold import acceleration, applied_force, manifold_terms

        x, J, H = self.decode_jh(q)
        ident = None if self.library is None else (self.library, self.Xi, self.param, q, u)
        springs = self.springs if len(self.model.springs) else None
        terms = manifold_terms(x, J, H, self.mass, applied_force(self.f_g, self.f_B, self.f_C, x, u), springs, ident)
        return acceleration(terms, qd)

    def origins(self, q):
        """Body origins (B, 3 n_b): ``r0 - R com`` with ``R``'s columns ``(r_k - r0) / L`` (linear
        in the decoded points; at a rigid decoded body this is the pose export's origin)."""
        from ..models.manifold import decoder_features
        from ..models.mlp import mlp

        phi, _, _ = decoder_features(q, self.model.angles, self.q_mean, self.q_scale, second=False)
        x = self.x_mean + self.x_scale * mlp(self.layers, self.model.activation, phi)
        out = []
        for offset, com, length in self.origin_rows:
            p = x[:, offset: offset + 12].reshape(-1, 4, 3)
            R = (p[:, 1:] - p[:, :1]).transpose(1, 2) / length  # columns e_k
            out.append(p[:, 0] - R @ self._t(com))
        return self.torch.cat(out, 1)


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


def _vectors(dyn: TorchDynamics, q, qd, u):
    torch = dyn.torch
    return (torch.as_tensor(q, dtype=torch.float64)[None], torch.as_tensor(qd, dtype=torch.float64)[None],
            torch.as_tensor(u, dtype=torch.float64).reshape(1, -1))


def jacobians(dyn: TorchDynamics, q: np.ndarray, qd: np.ndarray, u: np.ndarray):
    """``f``, ``df/dq``, ``df/dqd``, ``df/du`` and the outputs' ``dy/dq`` at one point (exact AD)."""
    torch = dyn.torch
    m, n_u = len(q), len(u)
    tq, tqd, tu = _vectors(dyn, q, qd, u)

    def f(z):
        return dyn.acceleration(z[None, :m], z[None, m:2 * m], z[None, 2 * m:])[0]

    z = torch.cat([tq[0], tqd[0], tu[0]])
    F = torch.autograd.functional.jacobian(f, z).numpy()
    value = f(z).detach().numpy()
    Yq = torch.autograd.functional.jacobian(lambda qq: dyn.origins(qq[None])[0], tq[0]).numpy()
    return value, F[:, :m], F[:, m:2 * m], F[:, 2 * m:2 * m + n_u], Yq


def find_equilibrium(dyn: TorchDynamics, q0: np.ndarray, u: np.ndarray, tol: float = 1e-10,
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
            ft = jacobians(dyn, trial, qd, u)[0]
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
    changed = []
    if mechanism is not None:
        art, changed = art.for_mechanism(load_mechanism(mechanism), mechanism)
    model = art.model
    if not isinstance(model, ManifoldModel):
        raise ModelError(f"{model_dir}: linearize needs a manifold model (the autoencoder reducer's)")
    m, n_u = model.dof, model.n_u
    u = np.zeros(n_u) if u is None else np.asarray(u, dtype=np.float64)
    for name, v, n in (("u", u, n_u), ("q", q, m), ("qd", qd, m)):
        if v is not None and (len(v) != n or not np.isfinite(np.asarray(v, dtype=np.float64)).all()):
            raise LinearizeError(f"--at {name}: {n} finite value(s) expected (the model has {m} coordinate(s) and "
                                 f"{n_u} input(s)), got {list(v)[:8]}")
    dyn = TorchDynamics(model, art.layout)
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
