"""Accuracy metrics shared by `simulate`, `validate` and the benchmarks.

Position NRMSE = rms(p_model - p_ref) / rms(p_ref - time mean of p_ref), over all bodies,
axes and samples of a run (p = body-frame origins, as in the pose export); rotation error =
the angle of ``R_model R_ref^T`` (rad).
"""

from __future__ import annotations

import numpy as np

BIG_ERROR = 0.10  # "error above 10 %": the largest body's position error / the run's position spread


def position_nrmse(p_model: np.ndarray, p_ref: np.ndarray) -> float:
    """NRMSE of positions (n_t, n_b, 3); NaN samples of the model count as failures (inf)."""
    if not np.isfinite(p_model).all():
        return float("inf")
    num = np.sqrt(np.mean((p_model - p_ref) ** 2))
    den = np.sqrt(np.mean((p_ref - p_ref.mean(axis=0)) ** 2))
    return float(num / den) if den > 0 else float("nan")  # no body origin moves: undefined


def rotation_error(R_model: np.ndarray, R_ref: np.ndarray) -> np.ndarray:
    """Angle (rad) of ``R_model R_ref^T`` per sample and body, (n_t, n_b)."""
    rel = np.einsum("...ij,...kj->...ik", R_model, R_ref)
    c = (np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.arccos(np.clip(c, -1.0, 1.0))


def error_over_time(p_model: np.ndarray, p_ref: np.ndarray) -> np.ndarray:
    """Largest position error over bodies at each sample, normalised like the NRMSE (NaN when
    no body origin moves: the normalisation is undefined)."""
    den = np.sqrt(np.mean((p_ref - p_ref.mean(axis=0)) ** 2))
    err = np.linalg.norm(p_model - p_ref, axis=-1).max(axis=-1)
    return err / den if den > 0 else np.full(len(err), np.nan)
