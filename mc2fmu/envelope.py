"""The training envelope: the range of q, qdot and the inputs a model has learnt.

Outside the trained range every learned decoder extrapolates and soon diverges (METHOD.md
section 3), so the model must know its range.  :func:`distance` is 0 inside and grows with
the largest normalised excursion outside: ``max_c max(0, lo_c - v_c, v_c - hi_c) / span_c``
over every channel ``c`` of q, qdot and u, ``span_c = hi_c - lo_c``.  A value of 0.1 means
10 % of a channel's training span beyond its edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
    def from_data(cls, q: np.ndarray, qd: np.ndarray, u: np.ndarray, roundtrip_max: float) -> "Envelope":
        u = np.atleast_2d(u) if u.size else np.zeros((len(q), 0))
        return cls(q.min(0), q.max(0), qd.min(0), qd.max(0), u.min(0) if u.shape[1] else np.zeros(0),
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
        lo, hi = self.lower, self.upper
        span = np.maximum(hi - lo, 1e-12 * np.maximum(np.abs(hi), 1.0))
        excess = np.maximum(np.maximum(lo - v, v - hi), 0.0) / span
        out = excess.max(axis=1)
        return np.where(np.isfinite(v).all(axis=1), out, np.inf)

    def to_dict(self) -> dict:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "Envelope":
        return cls(**{k: (np.asarray(v, dtype=np.float64) if isinstance(v, list) else v) for k, v in d.items()})
