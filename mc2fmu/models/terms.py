"""Identified force terms in minimal coordinates: ``f_id = Xi^T lambda(q, qdot, u)`` (seed 004).

A :class:`TermLibrary` is a list of candidate functions ``lambda_t``, each a product of at most
three *factors* from a fixed set that C, ONNX, numpy and torch evaluate alike::

    1, q_i, sin q_i, cos q_i, qdot_i, tanh(qdot_i / v0_i), u_j

(``v0_i``, the velocity scale of the smoothed sign, is a factor parameter), and the
coefficients ``Xi`` (n_terms, m).  The reduced dynamics add ``f_id`` to the right-hand side
of ``M_m qddot = ...`` (:func:`mc2fmu.models.manifold.acceleration`), so training, ``simulate``
and both FMU backends run the same terms.

:func:`build_library` makes the library from named groups (``mc2fmu train --identify GROUPS``),
:func:`stlsq` is the seed's sequentially thresholded least squares, :func:`equation` prints the
identified model.  Which factors a library uses is data (integer codes), not code: a model
with no identified terms carries an empty library and costs nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .array_ops import ops

Array = Any

ONE, Q, SIN, COS, V, TANH, U = range(7)
FACTOR_KINDS = {ONE: "1", Q: "q", SIN: "sin", COS: "cos", V: "qd", TANH: "tanh", U: "u"}
MAX_FACTORS = 3

#: the groups of ``--identify``; the default is all of them
GROUPS = {
    "const": "a constant",
    "poly": "monomials of the non-angle coordinates up to degree 3 (q, q^2, q^3 and cross terms)",
    "trig": "sin q, cos q of the angle-type coordinates (full revolutions)",
    "velocity": "qdot (viscous terms)",
    "friction": "tanh(qdot / v0), smoothed signs of qdot (Coulomb friction), v0 = 2 % and 20 % of qdot's rms "
                "to start with (training adjusts them)",
    "mixed": "q * qdot and q * tanh(qdot / v0) (sin q, cos q for angle coordinates): "
             "position-dependent damping and friction",
    "inputs": "u and u * q (sin q, cos q for angle coordinates): input gains",
}
#: the default: velocity-dependent terms (friction, damping), what a mechanism file misses most.
#: Measured (benchmarks/unknown_forces.py): with every group the position-only and input terms
#: trade off with gravity and the inputs' forces, and the learnt-coordinate four-bar with
#: friction stalled at 7-11 % NRMSE; with these three groups it reached 0.1-0.2 %.
DEFAULT_GROUPS = ("velocity", "friction", "mixed")
#: the smoothed signs' starting velocity scales relative to the coordinate velocity's rms
SIGN_SCALES = (0.02, 0.2)
#: ... of the position-dependent friction terms (group "mixed")
MIXED_SIGN_SCALE = 0.05


@dataclass(frozen=True)
class TermLibrary:
    """Candidate terms (``kinds``/``index``/``param`` (n_terms, 3): factor codes, coordinate or
    input index, parameter; unused slots are ``ONE``) and their coefficients ``Xi`` (n_terms, m)."""

    kinds: np.ndarray
    index: np.ndarray
    param: np.ndarray
    Xi: np.ndarray
    groups: tuple[str, ...] = ()
    kappa: float = 0.0

    @classmethod
    def empty(cls, dof: int) -> "TermLibrary":
        z = np.zeros((0, MAX_FACTORS))
        return cls(z.astype(np.int64), z.astype(np.int64), z, np.zeros((0, dof)))

    def __len__(self) -> int:
        return self.kinds.shape[0]

    @property
    def active(self) -> np.ndarray:
        """Indices of the terms with a nonzero coefficient in some equation."""
        return np.flatnonzero(np.any(self.Xi != 0.0, axis=1))

    def with_coefficients(self, Xi: np.ndarray, param: np.ndarray | None = None) -> "TermLibrary":
        """The same terms with coefficients ``Xi`` (and factor parameters ``param``); a smoothed
        sign trained to a negative scale is flipped (``tanh(v/-p) = -tanh(v/p)``)."""
        Xi = np.array(Xi, dtype=np.float64)
        param = np.array(self.param if param is None else param, dtype=np.float64)
        for t in range(len(self)):
            for s in range(MAX_FACTORS):
                if self.kinds[t, s] == TANH and param[t, s] < 0:
                    param[t, s], Xi[t] = -param[t, s], -Xi[t]
        return TermLibrary(self.kinds, self.index, param, Xi, self.groups, self.kappa)

    def pruned(self) -> "TermLibrary":
        """Only the terms with a nonzero coefficient (what the run-time model evaluates)."""
        k = self.active
        return TermLibrary(self.kinds[k], self.index[k], self.param[k], self.Xi[k], self.groups, self.kappa)

    def deduplicated(self, rtol: float = 0.05) -> "TermLibrary":
        """One of each group of terms with the same factors whose parameters agree to ``rtol``
        (training can move two smoothed signs' scales together: they are then one term),
        their coefficients summed."""
        keep, Xi = [], self.Xi.copy()
        for t in range(len(self)):
            for k in keep:
                if np.array_equal(self.kinds[t], self.kinds[k]) and np.array_equal(self.index[t], self.index[k]) \
                        and np.allclose(self.param[t], self.param[k], rtol=rtol, atol=0.0):
                    Xi[k] += Xi[t]
                    break
            else:
                keep.append(t)
        k = np.array(keep, dtype=np.int64)
        return TermLibrary(self.kinds[k], self.index[k], self.param[k], Xi[k], self.groups, self.kappa)

    def names(self, coords=None, inputs=None) -> list[str]:
        return [term_name(self.kinds[t], self.index[t], self.param[t], coords, inputs) for t in range(len(self))]


def term_name(kinds, index, param, coords=None, inputs=None) -> str:
    def factor(k, i, p):
        qn = coords[i] if coords else f"q{i + 1}"
        if k == Q:
            return qn
        if k == SIN:
            return f"sin({qn})"
        if k == COS:
            return f"cos({qn})"
        if k == V:
            return f"{qn}'"
        if k == TANH:
            return f"tanh({qn}'/{p:.3g})"
        if k == U:
            return inputs[i] if inputs else f"u{i + 1}"
        return ""

    parts = [factor(int(k), int(i), float(p)) for k, i, p in zip(kinds, index, param) if k != ONE]
    # q*q*q as q^3
    out = []
    for name, group in itertools.groupby(parts):
        n = len(list(group))
        out.append(name if n == 1 else f"{name}^{n}")
    return "*".join(out) or "1"


def _factor(o, kind: int, i: int, p, q, v, u):
    if kind == Q:
        return q[:, i]
    if kind == SIN:
        return o.sin(q[:, i])
    if kind == COS:
        return o.cos(q[:, i])
    if kind == V:
        return v[:, i]
    if kind == TANH:
        return o.tanh(v[:, i] / p)
    if kind == U:
        return u[:, i]
    raise ValueError(f"unknown factor kind {kind}")


def evaluate(kinds, index, param, q, v, u):
    """``Theta`` (B, n_terms): every term at the rows of ``q``, ``v`` (B, m) and ``u`` (B, n_u).

    ``param`` is a float64 array or tensor (n_terms, 3) (a tensor, not Python floats: torch's
    dynamo ONNX exporter, the graphs' fallback exporter, stores those through float32)."""
    o = ops(q)
    cols = []
    for t in range(kinds.shape[0]):
        col = None
        for s in range(kinds.shape[1]):
            k = int(kinds[t, s])
            if k == ONE:
                continue
            f = _factor(o, k, int(index[t, s]), param[t, s], q, v, u)
            col = f if col is None else col * f
        cols.append(q[:, 0] * 0.0 + 1.0 if col is None else col)
    return o.stack(cols, 1)


def identified_force(library, Xi, q, v, u, param=None):
    """``Xi^T lambda(q, v, u)`` (B, m); ``Xi`` (and ``param``, default the library's) numpy arrays
    or tensors."""
    param = library.param if param is None else param
    return evaluate(library.kinds, library.index, param, q, v, u) @ Xi


def active_terms(library) -> "TermLibrary | None":
    """The terms of ``library`` (None: a model without) with a nonzero coefficient, what the
    printed targets carry; None when there are none."""
    lib = library.pruned() if library is not None else None
    return lib if lib is not None and len(lib) else None


def traced(library, dof: int, n_u: int, names: tuple[str, str, str] = ("q", "qd", "u")) -> list:
    """``Xi^T lambda(q, qd, u)`` as expressions (:mod:`mc2fmu.models.expr`) of the leaves
    ``q[i]``, ``qd[i]``, ``u[j]`` (named ``names``), one per coordinate: :func:`identified_force`
    itself traced through numpy object arrays, which the native FMU's C prints (the Modelica
    export traces it inside :func:`mc2fmu.models.manifold.reduced_force`)."""
    from . import expr

    def row(name: str, n: int) -> np.ndarray:
        out = np.empty((1, n), dtype=object)
        out[0, :] = expr.inputs(name, n)
        return out

    q, qd, u = names
    return list(identified_force(library, np.asarray(library.Xi, dtype=np.float64), row(q, dof), row(qd, dof),
                                 row(u, n_u))[0])


# ------------------------------------------------------------------ building a library


def parse_groups(spec: str) -> tuple[str, ...]:
    """``--identify`` groups: ``default`` (:data:`DEFAULT_GROUPS`), ``all`` or a comma list of :data:`GROUPS`."""
    spec = (spec or "").strip()
    if spec in ("", "default"):
        return DEFAULT_GROUPS
    if spec == "all":
        return tuple(GROUPS)
    names = tuple(s.strip() for s in spec.split(",") if s.strip())
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        raise ValueError(f"{','.join(unknown)}: unknown term group(s); choose from {', '.join(GROUPS)} "
                         "(comma separated), or all")
    return names


def build_library(groups, dof: int, angles, n_u: int, v_rms: np.ndarray) -> TermLibrary:
    """The candidate terms of ``groups`` for ``dof`` coordinates (``angles``: angle-type flags)
    and ``n_u`` inputs; ``v_rms`` (dof,) sets the smoothed signs' velocity scales."""
    terms: list[list[tuple[int, int, float]]] = []
    plain = [i for i in range(dof) if not angles[i]]
    position1 = [[(Q, i, 0.0)] for i in plain] + [[(k, i, 0.0)] for i in range(dof) if angles[i] for k in (SIN, COS)]
    rms = [max(float(r), 1e-12) for r in v_rms]
    if "const" in groups:
        terms.append([])
    if "poly" in groups:
        for degree in (1, 2, 3):
            for combo in itertools.combinations_with_replacement(plain, degree):
                terms.append([(Q, i, 0.0) for i in combo])
    if "trig" in groups:
        for i in range(dof):
            if angles[i]:
                terms += [[(SIN, i, 0.0)], [(COS, i, 0.0)]]
    if "velocity" in groups:
        terms += [[(V, i, 0.0)] for i in range(dof)]
    if "friction" in groups:
        terms += [[(TANH, i, c * rms[i])] for i in range(dof) for c in SIGN_SCALES]
    if "mixed" in groups:
        for pos in position1:
            terms += [pos + [(V, j, 0.0)] for j in range(dof)]
            terms += [pos + [(TANH, j, MIXED_SIGN_SCALE * rms[j])] for j in range(dof)]
    if "inputs" in groups:
        for j in range(n_u):
            terms.append([(U, j, 0.0)])
            terms += [pos + [(U, j, 0.0)] for pos in position1]
    seen, unique = set(), []
    for t in terms:  # trig and mixed can repeat a term of another group
        key = tuple(sorted(t))
        if key not in seen:
            seen.add(key)
            unique.append(t)
    n = len(unique)
    kinds = np.full((n, MAX_FACTORS), ONE, dtype=np.int64)
    index = np.zeros((n, MAX_FACTORS), dtype=np.int64)
    param = np.zeros((n, MAX_FACTORS))
    for r, t in enumerate(unique):
        for s, (k, i, p) in enumerate(t):
            kinds[r, s], index[r, s], param[r, s] = k, i, p
    return TermLibrary(kinds, index, param, np.zeros((n, dof)), tuple(groups))


# ------------------------------------------------------------------ regression


def stlsq(Theta: np.ndarray, F: np.ndarray, kappa: float, floor: np.ndarray | None = None,
          iterations: int = 10) -> np.ndarray:
    """Sequentially thresholded least squares (seed 004, Algorithm 1): ``F ~ Theta Xi``.

    ``Theta`` (N, T), ``F`` (N, m).  The threshold is on each term's contribution, not its raw
    coefficient (units differ from term to term): term ``t`` of equation ``i`` is dropped when
    ``|Xi_ti| rms(Theta_t) < kappa max(rms(F_i), floor_i)``.  ``floor`` (m,) keeps a residual that
    is only round-off from being fitted term by term.  Columns are scaled to unit rms for the
    least-squares solves, so the result does not depend on the units of the terms.
    """
    Theta, F = np.asarray(Theta, dtype=np.float64), np.asarray(F, dtype=np.float64)
    if F.ndim == 1:
        F = F[:, None]
    col = np.sqrt(np.mean(Theta**2, axis=0))
    usable = col > 0
    col = np.where(usable, col, 1.0)
    A = Theta / col
    scale = np.sqrt(np.mean(F**2, axis=0))
    if floor is not None:
        scale = np.maximum(scale, floor)
    threshold = kappa * scale
    m = F.shape[1]
    C = np.zeros((Theta.shape[1], m))  # coefficients of the scaled columns: contributions
    for i in range(m):
        keep = usable.copy()
        for _ in range(iterations):
            c = np.zeros(Theta.shape[1])
            if keep.any():
                c[keep] = np.linalg.lstsq(A[:, keep], F[:, i], rcond=None)[0]
            small = np.abs(c) < threshold[i]
            if not (keep & small).any():
                break
            keep &= ~small
        C[:, i] = c if keep.any() else 0.0
    return C / col[:, None]


def equation(library: TermLibrary, coords=None, inputs=None, digits: int = 4) -> list[str]:
    """The identified terms as one readable line per coordinate: ``f_id[q] = 0.12 q' - 0.3 tanh(q'/0.01)``."""
    names = library.names(coords, inputs)
    lines = []
    for i in range(library.Xi.shape[1]):
        qn = coords[i] if coords else f"q{i + 1}"
        parts = [(library.Xi[t, i], names[t]) for t in range(len(library)) if library.Xi[t, i] != 0.0]
        if not parts:
            lines.append(f"f_id[{qn}] = 0")
            continue
        text = ""
        for k, (c, name) in enumerate(parts):
            sign = "-" if c < 0 else ("+" if k else "")
            mag = f"{abs(c):.{digits}g}"
            body = mag if name == "1" else f"{mag} {name}"
            text += (f" {sign} " if k else sign) + body
        lines.append(f"f_id[{qn}] = {text.strip()}")
    return lines
