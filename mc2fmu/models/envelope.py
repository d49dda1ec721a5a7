"""The training envelope: the range of q, qdot and the inputs a model has learnt.

Outside the trained range every learned decoder extrapolates and soon diverges (docs/method.md,
the envelope), so the model must know its range.  :func:`distance` is 0 inside and grows with
the largest normalised excursion outside: ``max_c max(0, lo_c - v_c, v_c - hi_c) / span_c``
over every channel ``c`` of q, qdot and u, ``span_c = hi_c - lo_c``.  A value of 0.1 means
10 % of a channel's training span beyond its edge.  An angle-type coordinate whose training
data covered a full revolution has no bounds (every angle has been seen).

A model counts as having *left* the envelope when the distance exceeds
:data:`LEAVE_THRESHOLD` (1 % of a span): the edges of the training data are reached by
in-range runs too, and a sample-exact edge would flag them for nothing.

The distance is written once, :func:`excursions` and :func:`distance_of`, for numbers, numpy
arrays and :mod:`.expr` nodes: :meth:`Envelope.distance` evaluates it on samples, and
:func:`traced` gives the graph the native FMU's C (with its complex-step twin, the directional
derivative), the python FMU and the Modelica export print.  Finiteness is each caller's: a
non-finite channel makes the distance infinite.
"""

from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np

from ..files import json_safe
from . import expr
from .expr import maximum

LEAVE_THRESHOLD = 0.01


def excursions(v, lower, upper) -> list:
    """Each channel's excursion beyond the envelope, ``max(0, lo - v, v - hi) / span``, in
    units of its training span (``span = max(hi - lo, 1e-12 max(|hi|, 1))``); 0 for a channel
    without bounds.  ``v``: one entry per channel (numbers, arrays of samples or expression
    nodes); ``lower``, ``upper``: the bounds (floats, infinite where unbounded)."""
    out = []
    for c, (lo, hi) in enumerate(zip(lower, upper)):
        lo, hi = float(lo), float(hi)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            out.append(0.0)
            continue
        span = max(hi - lo, 1e-12 * max(abs(hi), 1.0))
        out.append(maximum(0.0, maximum(lo - v[c], v[c] - hi)) / span)
    return out


def distance_of(v, lower, upper):
    """The normalised distance outside the envelope: the largest of :func:`excursions`, the
    first at a tie (0 inside)."""
    out = None
    for e in excursions(v, lower, upper):
        if isinstance(e, float) and e == 0.0:  # a channel without bounds
            continue
        out = e if out is None else maximum(out, e)
    return 0.0 if out is None else out


def traced(envelope: "Envelope") -> tuple[list, "expr.Expr"]:
    """``(channel excursions, distance)`` as expression nodes of the inputs ``v[0..n)``, the
    channels ``q``, ``qd``, ``u`` in that order."""
    lo, hi = envelope.lower, envelope.upper
    v = expr.inputs("v", len(lo))
    return excursions(v, lo, hi), distance_of(v, lo, hi)


@dataclass(frozen=True)
class Envelope:
    q_min: np.ndarray
    q_max: np.ndarray
    qd_min: np.ndarray
    qd_max: np.ndarray
    u_min: np.ndarray
    u_max: np.ndarray
    roundtrip_max: float  # max |h_d(h_e(x)) - x| over the training data, m

    @classmethod
    def from_data(cls, q: np.ndarray, qd: np.ndarray, u: np.ndarray, roundtrip_max: float,
                  angles=None) -> "Envelope":
        u = np.atleast_2d(u) if u.size else np.zeros((len(q), 0))
        q_min, q_max = q.min(0), q.max(0)
        for i, a in enumerate(angles or []):
            if a and q_max[i] - q_min[i] >= 2 * math.pi:  # a full revolution: any angle is known
                q_min[i], q_max[i] = -math.inf, math.inf
        return cls(q_min, q_max, qd.min(0), qd.max(0), u.min(0) if u.shape[1] else np.zeros(0),
                   u.max(0) if u.shape[1] else np.zeros(0), float(roundtrip_max))

    @property
    def lower(self) -> np.ndarray:
        return np.concatenate([self.q_min, self.qd_min, self.u_min])

    @property
    def upper(self) -> np.ndarray:
        return np.concatenate([self.q_max, self.qd_max, self.u_max])

    def distance(self, q: np.ndarray, qd: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Normalised distance outside the envelope for each sample (0 inside)."""
        q, qd, u = np.atleast_2d(q), np.atleast_2d(qd), np.atleast_2d(u)
        if u.shape[1] == 0:
            u = np.zeros((len(q), 0))
        v = np.concatenate([q, qd, u], axis=1)
        out = distance_of(list(v.T), self.lower, self.upper) + np.zeros(len(v))
        return np.where(np.isfinite(v).all(axis=1), out, np.inf)

    def first_exit(self, distance: np.ndarray) -> int | None:
        """Index of the first sample that left the envelope (distance > LEAVE_THRESHOLD)."""
        out = np.flatnonzero(~(distance <= LEAVE_THRESHOLD))
        return int(out[0]) if out.size else None

    def to_dict(self) -> dict:
        # JSON has no infinity: unbounded (periodic) channels are written as null
        return json_safe({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()})

    @classmethod
    def from_dict(cls, d: dict) -> "Envelope":
        """The envelope as :meth:`to_dict` wrote it; anything else is a ValueError."""
        keys = ("q_min", "q_max", "qd_min", "qd_max", "u_min", "u_max")
        if not isinstance(d, dict) or set(d) != {*keys, "roundtrip_max"}:
            raise ValueError(f"an envelope has exactly the keys {', '.join(keys)}, roundtrip_max")

        def arr(key: str):
            v = d[key]
            fill = -math.inf if key.endswith("_min") else math.inf
            if not isinstance(v, list) or not all(e is None or (isinstance(e, (int, float)) and not isinstance(e, bool)
                                                                and math.isfinite(e)) for e in v):
                raise ValueError(f"envelope '{key}' must be a list of finite numbers (null: unbounded)")
            return np.array([fill if e is None else e for e in v], dtype=np.float64)

        a = {k: arr(k) for k in keys}
        for lo, hi in (("q_min", "q_max"), ("qd_min", "qd_max"), ("u_min", "u_max")):
            if a[lo].shape != a[hi].shape or not (a[lo] <= a[hi]).all():
                raise ValueError(f"envelope '{lo}' and '{hi}' must have one value per channel with min <= max")
        if a["q_min"].shape != a["qd_min"].shape:
            raise ValueError("envelope 'q_min' and 'qd_min' must have one value per coordinate")
        r = d["roundtrip_max"]
        if not isinstance(r, (int, float)) or isinstance(r, bool) or not math.isfinite(r) or r < 0:
            raise ValueError("envelope 'roundtrip_max' must be a finite number >= 0")
        return cls(**a, roundtrip_max=float(r))


def sample_points(envelope: Envelope, model, count: int = 16, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """States spread uniformly over the training envelope (``q``, ``qd``, ``u``; an unbounded
    angle over one revolution), with ``x = decode(q)`` and ``q_prev = q - dt qd``: the points
    exported code is checked at."""
    rng = np.random.default_rng(seed)

    def box(lo, hi, size):
        lo = np.where(np.isfinite(lo), lo, -math.pi)
        hi = np.where(np.isfinite(hi), hi, math.pi)
        return lo + (hi - lo) * rng.random(size)

    m, n_u, dt = len(envelope.q_min), len(envelope.u_min), model.dt
    pts = []
    for _ in range(count):
        q = box(envelope.q_min, envelope.q_max, m)[None]
        qd = box(envelope.qd_min, envelope.qd_max, m)[None]
        u = box(envelope.u_min, envelope.u_max, n_u)[None] if n_u else np.zeros((1, 0))
        pts.append({"q": q, "qd": qd, "u": u, "x": model.decode(q), "q_prev": q - dt * qd})
    return pts
