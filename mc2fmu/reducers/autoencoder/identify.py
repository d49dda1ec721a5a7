"""Seed 004's sparse identification of forces the mechanism file does not describe
(``--identify``): the model's residual and the sequentially thresholded least squares on it."""

from __future__ import annotations

import numpy as np
import torch

from ...models.manifold import known_rhs
from ...models.terms import TermLibrary, build_library, evaluate, parse_groups, stlsq
from .config import TrainConfig
from .loss import LossFunction
from .samples import Windows
from .torch_model import TorchManifoldModel


def residual_data(model: TorchManifoldModel, loss_fn: LossFunction, W: Windows):
    """``q, v, u`` at the windows' middle samples, the residual ``F = M_m qddot - rhs`` the
    mechanism file's forces leave (the model's identified terms left out) and the inertial
    force's rms per coordinate (numpy).  ``qdot`` is the step map's training velocity and
    ``qddot`` the centred second difference of the encoded triplets."""
    with torch.no_grad():
        q_prev, q, q_next = loss_fn.encode_triplets(W)
        v = model.step_map.training_velocity(q_prev, q, q_next, W.dt)
        qdd = (q_next - 2.0 * q + q_prev) / (W.dt * W.dt)
        u = W.u[:, 1]
        saved, model.library = model.library, None
        try:
            terms = model.terms(q, u)
        finally:
            model.library = saved
        inertial = torch.einsum("bmk,bk->bm", terms.Mm, qdd)
        F = (inertial - known_rhs(terms, v)).numpy()
    return q.numpy(), v.numpy(), u.numpy(), F, np.sqrt(np.mean(inertial.numpy() ** 2, axis=0))


def sparse_terms(model: TorchManifoldModel, loss_fn: LossFunction, W: Windows, cfg: TrainConfig,
                 angles: list[bool]) -> TermLibrary:
    """Seed 004's thresholding on the model's library (its trained smoothed-sign scales, near
    duplicates merged; a new library of ``cfg.identify``'s groups if it has none): the
    coefficients of the kept terms by sequentially thresholded least squares on the model's
    residual (:func:`residual_data`).  The threshold's floor is 1e-3 of the inertial force's
    rms, so a model whose residual is only its own approximation error gets (almost) no terms."""
    q, v, u, F, inertial = residual_data(model, loss_fn, W)
    library = model.runtime_library()
    if library is None:
        library = build_library(parse_groups(cfg.identify), len(angles), angles, u.shape[1],
                                np.sqrt(np.mean(v**2, axis=0)))
    library = library.deduplicated()
    Theta = evaluate(library.kinds, library.index, library.param, q, v, u)
    Xi = stlsq(Theta, F, cfg.kappa, floor=1e-3 * inertial)
    return TermLibrary(library.kinds, library.index, library.param, Xi, library.groups, cfg.kappa)
