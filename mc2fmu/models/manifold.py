"""Reduced dynamics on a decoder manifold, written once for numpy and torch.

A *manifold model* has a decoder ``h_d: q -> x`` into natural coordinates (an MLP with
explicit value / Jacobian / Hessian propagation) and the NC physics it projects
(``x = h_d(q)``, ``J = dh_d/dq``, ``H = d2h_d/dq2``)::

    M_m = J^T M J,   G_m[v, v] = J^T M (H : v v),   f_m = J^T f(h_d(q), u)
    M_m qddot = f_m - G_m[qdot, qdot] + J^T f_spring(x, J qdot) + Xi^T lambda(q, qdot, u)

Spring-dampers (``d = D x + e`` per spring, see :class:`mc2fmu.mechanics.natural.SpringModel`)
are evaluated exactly on the decoded ``x`` and ``xdot = J qdot``: the stiffness part depends
on ``q`` only, the damper on the velocity the step map uses (the same ``v`` as in ``G_m``).
The identified terms ``Xi^T lambda`` (:mod:`mc2fmu.models.terms`, ``train --identify``) are
forces in minimal coordinates the mechanism file does not describe (e.g. joint friction).

Every function here takes numpy arrays or torch tensors alike (:func:`ops` picks the few
library functions that differ), so training (torch), the run-time model and ``simulate``
(numpy) and the exported ONNX graphs run the same arithmetic: what is trained is what runs.
The dynamics from the decoded ``x``, ``J`` and ``H : v v`` on (:func:`manifold_terms`,
:func:`reduced_force`) also run on numpy object arrays: of expression leaves
(:mod:`mc2fmu.models.expr`), which the Modelica export prints, and of CasADi's scalar symbols,
which the CasADi export wraps as a function; the physical parameters may be leaves too.
The small ``M_m`` solve is an unrolled Cholesky factorisation in plain ops (it exports to
ONNX, and a reduced mass that is not positive definite gives NaN instead of a silent answer).

:class:`ManifoldModel` is the numpy run-time model (no torch): the autoencoder reducer's
product, in both its modes (learnt or known coordinates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ..mechanics.natural import SpringModel
from .array_ops import ops
from .mlp import ACTIVATIONS, Activation, MLPWeights, get_activation, mlp, mlp_jh  # noqa: F401 (re-exported)
from .spring_laws import SpringLaws
from .step_maps import StepMap, get_step_map
from .terms import TermLibrary, identified_force

Array = Any  # numpy.ndarray or torch.Tensor


def decoder_features(q, angles, q_mean, q_scale, second: bool = True):
    """Decoder input ``phi(q)`` with its Jacobian (B, n_f, m) and Hessian (B, n_f, m, m):
    ``(q_i - mean_i) / scale_i``, or ``cos q_i, sin q_i`` for an angle-type coordinate (a full
    revolution is a closed loop of the decoder's input)."""
    o = ops(q)
    B, m = q.shape
    phi, J, H = [], [], []
    for i, is_angle in enumerate(angles):
        qi = q[:, i]
        e = o.zeros((B, m), q)
        e[:, i] = 1.0
        if is_angle:
            c, s = o.cos(qi), o.sin(qi)
            phi += [c, s]
            J += [-s[:, None] * e, c[:, None] * e]
            if second:
                E = o.zeros((B, m, m), q)
                E[:, i, i] = 1.0
                H += [-c[:, None, None] * E, -s[:, None, None] * E]
        else:
            phi.append((qi - q_mean[i]) / q_scale[i])
            J.append(e / q_scale[i])
            if second:
                H.append(o.zeros((B, m, m), q))
    return o.stack(phi, 1), o.stack(J, 1), (o.stack(H, 1) if second else None)


# ------------------------------------------------------------------ dynamics


def cholesky_steps(a, b, m: int, sqrt) -> list:
    """The solution of ``A y = b`` (m x m SPD) by an unrolled Cholesky factorisation, as a list of
    m entries, from element accessors ``a(i, j)``, ``b(i)`` and ``sqrt``: one sequence of
    operations for numpy, torch and object arrays (:func:`cholesky_solve`; the CasADi export)
    and the native C (printed)."""
    L = [[None] * m for _ in range(m)]
    for j in range(m):
        s = a(j, j)
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        L[j][j] = sqrt(s)
        for i in range(j + 1, m):
            s = a(i, j)
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s / L[j][j]
    z = [None] * m
    for i in range(m):
        s = b(i)
        for k in range(i):
            s = s - L[i][k] * z[k]
        z[i] = s / L[i][i]
    y = [None] * m
    for i in reversed(range(m)):
        s = z[i]
        for k in range(i + 1, m):
            s = s - L[k][i] * y[k]
        y[i] = s / L[i][i]
    return y


def cholesky_solve(A, b):
    """Solve ``A y = b`` for small SPD ``A`` (..., m, m) by an unrolled Cholesky factorisation."""
    o = ops(A)
    y = cholesky_steps(lambda i, j: A[..., i, j], lambda i: b[..., i], A.shape[-1], o.sqrt)
    return o.stack(y, -1)


def applied_force(f_g, f_B, f_C, x, u):
    """``f_g + f_B u + sum_i u_i f_C[i] x`` (B, n): the NC force without the springs."""
    f = f_g + u @ f_B.T
    n_u, n = f_C.shape[0], f_C.shape[1]
    if n_u and getattr(x, "dtype", None) == object:
        # traced (printed code, CasADi's scalars): f_C[i] x over its nonzero entries only, a
        # torque's few per row instead of n per row (n^2 per input: 1e6 nodes for 81 bodies)
        f = np.array(f, dtype=object)  # a copy its entries are written into
        for i in range(n_u):
            for r, k in zip(*np.nonzero(f_C[i])):
                f[:, r] = f[:, r] + u[:, i] * (f_C[i, r, k] * x[:, k])
        return f
    if n_u:
        # sum_i u_i f_C[i] x as one (B, n) x (n, n_u n) product: einsum lowers it to a
        # broadcast multiply of a (B, n, 1, n) temporary, 20x slower at n = 72
        Cx = (x @ f_C.reshape(n_u * n, n).T).reshape(-1, n_u, n)
        f = f + (u[..., None] * Cx).sum(1)
    return f


@dataclass
class ManifoldTerms:
    """Everything at one ``q`` that does not depend on the velocity."""

    x: Array  # (B, n)
    J: Array  # (B, n, m)
    H: Array | None  # (B, n, m, m); None when the caller gives H : v v (known_rhs)
    MJ: Array  # (B, n, m) = M J
    Mm: Array  # (B, m, m)
    fm: Array  # (B, m), without the springs
    springs: Any = None  # D, e, k, c, L0, laws (a SpringModel, tensors or object arrays alike); None: no springs
    sd: Array | None = None  # (B, n_s, 3) spring vectors d = D x + e
    sDJ: Array | None = None  # (B, n_s, 3, m) = D J, so ddot = D J v
    ident: Any = None  # (library, Xi, param, q, u) of identified terms; None: none


def mass_blocks(M: np.ndarray) -> np.ndarray | None:
    """The 4x4 point-mass blocks ``A_b`` (n_b, 4, 4) of an NC mass matrix of the form
    ``M = blockdiag(A_b (x) I_3)`` (4 points of 3 coordinates per body, the layout
    :func:`mc2fmu.mechanics.natural.mass_matrix` builds), or None when ``M`` is not exactly that."""
    M = np.asarray(M, dtype=np.float64)
    n = M.shape[0]
    if M.ndim != 2 or M.shape != (n, n) or n % 12:
        return None
    A = np.stack([M[o:o + 12:3, o:o + 12:3] for o in range(0, n, 12)])
    rebuilt = np.zeros_like(M)
    for b, block in enumerate(A):
        rebuilt[12 * b:12 * b + 12, 12 * b:12 * b + 12] = np.kron(block, np.eye(3))
    return A if np.array_equal(rebuilt, M) else None


def mass_times(M, J):
    """``M J`` (B, n, m) for a dense ``M`` (n, n) or its blocks (n_b, 4, 4) (:func:`mass_blocks`).

    The block form costs ``O(n)`` per column instead of ``O(n^2)``: an 81-body model's product
    is 80x cheaper.  The dense form is one (B m, n) x (n, n) product (``M`` is symmetric):
    einsum lowers ``"nk,bkm->bnm"`` with m = 1 to a broadcast multiply of a (B, n, 1, n)
    temporary, and matmul to a batched product with ``M`` copied B times, both 20-100x slower
    at n = 72."""
    B, n, m = J.shape
    if M.ndim == 3:
        return ops(J).einsum("pkl,bplam->bpkam", M, J.reshape(B, M.shape[0], 4, 3, m)).reshape(B, n, m)
    return (J.swapaxes(1, 2).reshape(-1, n) @ M).reshape(-1, m, n).swapaxes(1, 2)


def manifold_terms(x, J, H, M, f, springs=None, ident=None) -> ManifoldTerms:
    """The velocity-free terms at ``x = h_d(q)``; ``M`` dense (n, n) or as blocks (n_b, 4, 4);
    ``ident``: ``(library, Xi, param, q, u)`` of identified terms (None or an empty library: none)."""
    es = ops(x).einsum
    MJ = mass_times(M, J)
    Mm = es("bnm,bnk->bmk", J, MJ)
    fm = es("bnm,bn->bm", J, f)
    if ident is not None and len(ident[0]) == 0:
        ident = None
    if springs is None or springs.k.shape[0] == 0:
        return ManifoldTerms(x, J, H, MJ, Mm, fm, ident=ident)
    sd = es("sin,bn->bsi", springs.D, x) + springs.e
    sDJ = es("sin,bnm->bsim", springs.D, J)
    return ManifoldTerms(x, J, H, MJ, Mm, fm, springs, sd, sDJ, ident)


def spring_force(terms: ManifoldTerms, v):
    """``J^T f_spring(x, J v)`` (B, m): each spring's tension along its line, projected."""
    o = ops(v)
    s = terms.springs
    length = o.sqrt((terms.sd * terms.sd).sum(-1))  # (B, n_s); plain ops export to ONNX
    n = terms.sd / length[..., None]
    ldot = o.einsum("bsi,bsim,bm->bs", n, terms.sDJ, v)
    tension = s.k * (length - s.L0) + s.c * ldot
    laws = getattr(s, "laws", None)
    if laws is not None and len(laws):  # recorded springs' learned laws
        tension = tension + laws.tension(length, ldot)
    return -o.einsum("bsim,bsi->bm", terms.sDJ, n * tension[..., None])


def known_rhs(terms: ManifoldTerms, v, Hvv=None):
    """``f_m - J^T M (H : v v) + J^T f_spring(x, J v)`` (B, m): the right-hand side of what the
    mechanism file describes; ``Hvv``: ``H : v v`` when the caller has it (then ``terms.H`` may
    be None)."""
    es = ops(v).einsum
    if Hvv is None:
        Hvv = es("bnij,bi,bj->bn", terms.H, v, v)
    G = es("bnm,bn->bm", terms.MJ, Hvv)
    rhs = terms.fm - G
    if terms.springs is not None:
        rhs = rhs + spring_force(terms, v)
    return rhs


def reduced_force(terms: ManifoldTerms, v, Hvv=None):
    """``f_m - J^T M (H : v v) + J^T f_spring(x, J v) + Xi^T lambda(q, v, u)`` (B, m): the
    right-hand side of ``M_m qddot = ...`` (``Hvv``: see :func:`known_rhs`).  With
    ``terms.Mm`` the reduced dynamics as a target that solves ``M_m qddot`` itself takes them
    (the Modelica export prints both)."""
    rhs = known_rhs(terms, v, Hvv)
    if terms.ident is not None:
        library, Xi, param, q, u = terms.ident
        rhs = rhs + identified_force(library, Xi, q, v, u, param)
    return rhs


def acceleration(terms: ManifoldTerms, v, Hvv=None):
    """``qddot = M_m^{-1} (f_m - J^T M (H : v v) + J^T f_spring(x, J v) + Xi^T lambda(q, v, u))``
    (``Hvv``: see :func:`known_rhs`)."""
    return cholesky_solve(terms.Mm, reduced_force(terms, v, Hvv))


# ------------------------------------------------------------------ the numpy run-time model


@dataclass(frozen=True, kw_only=True)
class ManifoldModel:
    """The numpy run-time form of a decoder-manifold reduced model (no torch).

    Decoder: ``x = x_mean + x_scale * MLP(phi(q))``.  Encoder: ``q = E x + e0`` (known
    coordinates) or an MLP on ``(x - enc_x_mean) / enc_x_scale`` whose angle-type outputs
    are ``atan2(s, c)`` of an output pair.  Physics: ``M``, the force model and the springs.
    """

    dt: float
    angles: tuple[bool, ...]
    step_map_name: str
    decoder: MLPWeights
    q_mean: np.ndarray
    q_scale: np.ndarray
    x_mean: np.ndarray
    x_scale: np.ndarray
    encoder: MLPWeights | None  # None: the linear encoder E, e0 of known coordinates
    enc_x_mean: np.ndarray | None
    enc_x_scale: np.ndarray | None
    E: np.ndarray | None
    e0: np.ndarray | None
    M: np.ndarray
    f_g: np.ndarray
    f_B: np.ndarray
    f_C: np.ndarray
    springs: SpringModel
    resources: dict[str, bytes] = field(default_factory=dict, compare=False)  # e.g. ONNX graphs
    library: TermLibrary | None = None  # identified terms (train --identify); None: none

    kind = "manifold"

    @property
    def dof(self) -> int:
        return len(self.angles)

    @property
    def n_x(self) -> int:
        return len(self.x_mean)

    @property
    def n_u(self) -> int:
        return self.f_B.shape[1]

    @property
    def step_map(self) -> StepMap:
        return get_step_map(self.step_map_name)

    @property
    def activation(self) -> Activation:
        return get_activation(self.decoder.activation)

    # -------------------------------------------------------------- kinematics

    def decode(self, q: np.ndarray) -> np.ndarray:
        q = np.atleast_2d(np.asarray(q, dtype=np.float64))
        phi, _, _ = decoder_features(q, self.angles, self.q_mean, self.q_scale, second=False)
        return self.x_mean + self.x_scale * mlp(self.decoder.layers, self.activation, phi)

    def decode_jh(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``x`` (B, n), ``J`` (B, n, m), ``H`` (B, n, m, m)."""
        q = np.atleast_2d(np.asarray(q, dtype=np.float64))
        phi, Jphi, Hphi = decoder_features(q, self.angles, self.q_mean, self.q_scale)
        y, Jy, Hy = mlp_jh(self.decoder.layers, self.activation, phi, Jphi, Hphi)
        s = self.x_scale
        return self.x_mean + s * y, s[:, None] * Jy, s[:, None, None] * Hy

    def encode(self, x: np.ndarray) -> np.ndarray:
        """``q`` (B, m) of NC states ``x`` (B, n); angle-type coordinates in (-pi, pi]."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if self.encoder is None:
            return x @ self.E.T + self.e0
        out = mlp(self.encoder.layers, get_activation(self.encoder.activation),
                  (x - self.enc_x_mean) / self.enc_x_scale)
        q, k = [], 0
        for is_angle in self.angles:
            if is_angle:
                q.append(np.arctan2(out[:, k + 1], out[:, k]))
                k += 2
            else:
                q.append(out[:, k])
                k += 1
        return np.stack(q, 1)

    # -------------------------------------------------------------- dynamics

    def with_physics(self, M: np.ndarray, forces) -> "ManifoldModel":
        """This model with other physics on the same chart (a physical variant of the
        mechanism, :mod:`mc2fmu.mechanics.variants`): the mass matrix ``M``, gravity, the input
        loads and the springs' known parts of ``forces`` (a
        :class:`~mc2fmu.mechanics.natural.ForceModel` in this model's NC layout).  Learned spring
        laws and identified terms keep their trained coefficients."""
        springs = replace(forces.springs, laws=self.springs.laws)
        return replace(self, M=np.asarray(M, dtype=np.float64), f_g=forces.f_g, f_B=forces.f_B, f_C=forces.f_C,
                       springs=springs)

    @cached_property
    def mass(self) -> np.ndarray:
        """``M`` as the dynamics use it: its 4x4 blocks when block diagonal (:func:`mass_blocks`), else dense."""
        blocks = mass_blocks(self.M)
        return self.M if blocks is None else blocks

    def terms(self, q: np.ndarray, u: np.ndarray) -> ManifoldTerms:
        q = np.atleast_2d(np.asarray(q, dtype=np.float64))
        x, J, H = self.decode_jh(q)
        u = np.atleast_2d(np.asarray(u, dtype=np.float64)).reshape(len(x), self.n_u)
        lib = self.library
        ident = None if lib is None else (lib, lib.Xi, lib.param, q, u)
        return manifold_terms(x, J, H, self.mass, applied_force(self.f_g, self.f_B, self.f_C, x, u), self.springs,
                              ident)

    def acceleration(self, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The reduced ODE's right-hand side ``qdd = f(q, qd, u)`` (B, m)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return acceleration(self.terms(q, u), np.atleast_2d(np.asarray(qd, dtype=np.float64)))

    def step(self, q_prev: np.ndarray, q: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``q_{i+1}`` of the model's one-step map (B, m)."""
        q_prev = np.atleast_2d(np.asarray(q_prev, dtype=np.float64))
        q = np.atleast_2d(np.asarray(q, dtype=np.float64))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            terms = self.terms(q, u)
            return self.step_map.step(lambda v: acceleration(terms, v), q_prev, q, self.dt)

    # -------------------------------------------------------------- state space (ReducedModel)

    @property
    def state_size(self) -> int:
        return 3 * self.dof

    def start(self, q0: np.ndarray, qd0: np.ndarray, u0: np.ndarray) -> np.ndarray:
        """The state ``(q_{-1}, q_0, qd_0)``, ``q_{-1}`` by the Taylor step backwards
        (:func:`mc2fmu.models.simulate.initial_history`)."""
        from .simulate import initial_history

        q = np.asarray(q0, dtype=np.float64).reshape(self.dof)
        v = np.asarray(qd0, dtype=np.float64).reshape(self.dof)
        return np.concatenate([initial_history(self, q, v, np.asarray(u0, dtype=np.float64).reshape(1, self.n_u)), q, v])

    def advance(self, s: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``(q_k, q_{k+1}, qd_{k+1})`` from ``(q_{k-1}, q_k, qd_k)`` with ``u_k`` held: the one-step
        map, and the causal second-order velocity ``(3 q_{k+1} - 4 q_k + q_{k-1}) / (2 dt)`` an
        FMU can give (it cannot look ahead to the next input)."""
        m = self.dof
        qp, q = s[:m], s[m : 2 * m]
        qn = self.step(qp[None], q[None], np.asarray(u, dtype=np.float64).reshape(1, self.n_u))[0]
        return np.concatenate([q, qn, (3.0 * qn - 4.0 * q + qp) / (2.0 * self.dt)])

    def observe(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q, qd, x)`` of a batch of states (B, 3 m)."""
        m = self.dof
        q, qd = states[:, m : 2 * m], states[:, 2 * m :]
        return q, qd, self.decode(q)

    # -------------------------------------------------------------- saving

    def saved_features(self) -> frozenset[str]:
        laws = self.springs.laws
        return frozenset() if laws is None else laws.saved_features()

    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(params, arrays)``: what the artifact stores (JSON, and arrays by name)."""
        arrays = {"decoder.q_mean": self.q_mean, "decoder.q_scale": self.q_scale,
                  "decoder.x_mean": self.x_mean, "decoder.x_scale": self.x_scale,
                  "M": self.M, "f_g": self.f_g, "f_B": self.f_B, "f_C": self.f_C,
                  "spring_D": self.springs.D, "spring_e": self.springs.e, "spring_k": self.springs.k,
                  "spring_c": self.springs.c, "spring_L0": self.springs.L0}
        for i, (W, b) in enumerate(self.decoder.layers):
            arrays[f"decoder.W{i}"], arrays[f"decoder.b{i}"] = W, b
        params = {"step_map": self.step_map_name,
                  "decoder": {"widths": self.decoder.widths, "activation": self.decoder.activation}}
        if self.springs.laws is not None and len(self.springs.laws):
            params["spring_laws"], law_arrays = self.springs.laws.to_saved()
            arrays.update(law_arrays)
        if self.library is not None and len(self.library):
            lib = self.library
            params["identify"] = {"terms": len(lib), "groups": list(lib.groups), "kappa": lib.kappa}
            arrays.update({"identify.kinds": lib.kinds, "identify.index": lib.index, "identify.param": lib.param,
                           "identify.Xi": lib.Xi})
        if self.encoder is None:
            params["encoder"] = {"kind": "linear"}
            arrays["encoder.E"], arrays["encoder.e0"] = self.E, self.e0
        else:
            params["encoder"] = {"kind": "mlp", "widths": self.encoder.widths, "activation": self.encoder.activation}
            arrays["encoder.x_mean"], arrays["encoder.x_scale"] = self.enc_x_mean, self.enc_x_scale
            for i, (W, b) in enumerate(self.encoder.layers):
                arrays[f"encoder.W{i}"], arrays[f"encoder.b{i}"] = W, b
        return params, arrays

    @staticmethod
    def array_shapes(params: dict, dof: int, n_x: int, n_u: int, n_s: int, angles) -> dict[str, tuple[int, ...]]:
        """The arrays :meth:`from_saved` needs and their shapes (the artifact reader checks them)."""
        n_feat = sum(2 if a else 1 for a in angles)
        shapes = {"decoder.q_mean": (dof,), "decoder.q_scale": (dof,), "decoder.x_mean": (n_x,),
                  "decoder.x_scale": (n_x,), "M": (n_x, n_x), "f_g": (n_x,), "f_B": (n_x, n_u),
                  "f_C": (n_u, n_x, n_x), "spring_D": (n_s, 3, n_x), "spring_e": (n_s, 3), "spring_k": (n_s,),
                  "spring_c": (n_s,), "spring_L0": (n_s,)}
        widths = [int(w) for w in params["decoder"]["widths"]]
        if widths[0] != n_feat or widths[-1] != n_x:
            raise ValueError(f"decoder widths {widths} must start with {n_feat} (the coordinates' features) "
                             f"and end with {n_x} (the natural coordinates)")
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            shapes[f"decoder.W{i}"], shapes[f"decoder.b{i}"] = (b, a), (b,)
        if "spring_laws" in params:
            shapes.update(SpringLaws.array_shapes(params["spring_laws"], n_s))
        if "identify" in params:
            n_t = int(params["identify"]["terms"])
            shapes.update({"identify.kinds": (n_t, 3), "identify.index": (n_t, 3), "identify.param": (n_t, 3),
                           "identify.Xi": (n_t, dof)})
        enc = params["encoder"]
        if enc["kind"] == "linear":
            shapes["encoder.E"], shapes["encoder.e0"] = (dof, n_x), (dof,)
        elif enc["kind"] == "mlp":
            widths = [int(w) for w in enc["widths"]]
            if widths[0] != n_x or widths[-1] != n_feat:
                raise ValueError(f"encoder widths {widths} must start with {n_x} and end with {n_feat}")
            shapes["encoder.x_mean"], shapes["encoder.x_scale"] = (n_x,), (n_x,)
            for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
                shapes[f"encoder.W{i}"], shapes[f"encoder.b{i}"] = (b, a), (b,)
        else:
            raise ValueError(f"encoder kind {enc['kind']!r} is not one of linear, mlp")
        return shapes

    @classmethod
    def from_saved(cls, params: dict, arrays: dict[str, np.ndarray], *, dt: float, angles,
                   resources: dict[str, bytes] | None = None) -> "ManifoldModel":
        def layers(prefix: str, n: int) -> tuple[tuple, tuple]:
            return (tuple(arrays[f"{prefix}.W{i}"] for i in range(n)), tuple(arrays[f"{prefix}.b{i}"] for i in range(n)))

        dec = params["decoder"]
        decoder = MLPWeights(*layers("decoder", len(dec["widths"]) - 1), dec["activation"])
        enc = params["encoder"]
        encoder = None if enc["kind"] == "linear" else MLPWeights(*layers("encoder", len(enc["widths"]) - 1),
                                                                  enc["activation"])
        get = arrays.get
        laws = None
        if "spring_laws" in params:
            laws = SpringLaws.from_saved(params["spring_laws"], arrays, len(arrays["spring_k"]))
        springs = SpringModel(arrays["spring_D"], arrays["spring_e"], arrays["spring_k"], arrays["spring_c"],
                              arrays["spring_L0"], laws)
        get_step_map(params["step_map"])  # an unknown map is refused here, not at the first step
        get_activation(dec["activation"])
        library = None
        if "identify" in params:
            library = _saved_library(params["identify"], arrays, len(angles), arrays["f_B"].shape[1])
        return cls(dt=float(dt), angles=tuple(bool(a) for a in angles), step_map_name=params["step_map"],
                   decoder=decoder, q_mean=arrays["decoder.q_mean"], q_scale=arrays["decoder.q_scale"],
                   x_mean=arrays["decoder.x_mean"], x_scale=arrays["decoder.x_scale"], encoder=encoder,
                   enc_x_mean=get("encoder.x_mean"), enc_x_scale=get("encoder.x_scale"), E=get("encoder.E"),
                   e0=get("encoder.e0"), M=arrays["M"], f_g=arrays["f_g"], f_B=arrays["f_B"], f_C=arrays["f_C"],
                   springs=springs, resources=dict(resources or {}), library=library)


def _saved_library(info: dict, arrays: dict[str, np.ndarray], dof: int, n_u: int) -> TermLibrary:
    """The identified terms of an artifact, checked so that no code path indexes out of range."""
    from .terms import FACTOR_KINDS, ONE, TANH, U

    kinds, index, param = arrays["identify.kinds"], arrays["identify.index"], arrays["identify.param"]
    Xi = arrays["identify.Xi"]
    if not (np.array_equal(kinds, np.round(kinds)) and np.array_equal(index, np.round(index))):
        raise ValueError("identify.kinds and identify.index must hold integers")
    kinds, index = kinds.astype(np.int64), index.astype(np.int64)
    bad = ~np.isin(kinds, list(FACTOR_KINDS))
    if bad.any():
        raise ValueError(f"identify.kinds holds unknown factor codes {sorted(set(kinds[bad].tolist()))}")
    limit = np.where(kinds == U, n_u, np.where(kinds == ONE, 1, dof))
    if np.any((index < 0) | (index >= limit)):
        raise ValueError("identify.index names a coordinate or input the model does not have")
    if not (np.all(np.isfinite(param)) and np.all(np.isfinite(Xi))):
        raise ValueError("identify.param and identify.Xi must be finite")
    if np.any(param[kinds == TANH] <= 0):
        raise ValueError("identify.param: a smoothed sign's velocity scale must be > 0")
    return TermLibrary(kinds, index, param.astype(np.float64), Xi.astype(np.float64),
                       tuple(str(g) for g in info.get("groups", ())), float(info.get("kappa", 0.0)))


def wrap_to_pi(a):
    """``a`` shifted by multiples of 2 pi into [-pi, pi)."""
    return (a + math.pi) % (2 * math.pi) - math.pi
