"""The minimal coordinates the ``node`` and ``local-pca`` reducers run on: a decoder-manifold
model's (its *chart*, :mod:`mc2fmu.models.charted`), taken from a trained model directory
(``--from MODEL_DIR``) or trained here with the autoencoder reducer's defaults (``--dof``,
``--coords``, ``--seed``).  Options both reducers share are defined once here."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import field

from ..errors import ModelError, TrainingError
from .base import name_list, seed_problem

log = logging.getLogger(__name__)


def _opt(flag: str, help: str, **kw) -> dict:
    return {"flag": flag, "help": help, **kw}


def dof_field():
    from .autoencoder.config import dof_value

    return field(default="auto", metadata=_opt(
        "--dof", "number of minimal coordinates, or auto (default: estimated from the data; with --from, the "
        "model's)", metavar="N|auto", parse=dof_value))


def coords_field():
    return field(default=(), metadata=_opt("--coords", "known minimal coordinates (pose columns)", metavar="COL,...",
                                           parse=name_list))


def from_field():
    return field(default="", metadata=_opt(
        "--from", "node and local-pca: take the minimal coordinates (encoder and decoder) of this trained autoencoder "
        "model directory instead of training one with the defaults", metavar="MODEL_DIR"))


def seed_field():
    return field(default=0, metadata=_opt("--seed", "random seed (default 0)"))


def chart_problems(config) -> list[str]:
    """The checks of ``dof`` / ``coords`` the chart-based configs share."""
    problems = []
    dof = config.dof
    if dof != "auto" and (not isinstance(dof, int) or isinstance(dof, bool) or dof < 1):
        problems.append(f"--dof {dof}: the number of minimal coordinates must be >= 1 (or auto)")
    elif isinstance(dof, int) and config.coords and len(config.coords) != dof:
        problems.append(f"--coords names {len(config.coords)} column(s) but --dof is {dof}; give one column per DOF")
    seed = seed_problem("--seed", config.seed)
    if seed:
        problems.append(seed)
    return problems


def chart_for(dataset, config, progress: Callable[[dict], None] | None = None, share: float = 0.8):
    """``(chart, coordinates, record)``: the decoder-manifold model whose coordinates the
    reducer runs on, their names (known coordinates; empty: learnt) and what to record.  Training reports ``done`` scaled into ``[0, share]``."""
    from ..models.artifact import load_artifact
    from ..models.manifold import ManifoldModel

    if config.from_model:
        src = config.from_model
        try:
            art = load_artifact(src)
        except ModelError as exc:
            raise TrainingError([f"--from {src}: not a usable model directory", *exc.problems]) from None
        if not isinstance(art.model, ManifoldModel):
            raise TrainingError(f"--from {src}: a '{art.reducer}' model; the coordinates come from an autoencoder "
                                "model (train one with `mc2fmu train --reducer autoencoder`)")
        try:
            art.check_mechanism(dataset.mechanism, src, why="the natural coordinates of the model's chart are placed "
                                "by the trained masses, centres of mass and inertias")
            art.check_step(float(dataset.dt[0]), src)
        except ModelError as exc:
            raise TrainingError(exc.problems) from None
        if isinstance(config.dof, int) and config.dof != art.dof:
            raise TrainingError(f"--dof {config.dof} but the model in --from {src} has {art.dof} minimal coordinate(s)")
        if config.coords and tuple(config.coords) != art.coordinates:
            raise TrainingError(f"--coords {','.join(config.coords)} but the model in --from {src} has "
                                f"{','.join(art.coordinates) or 'learnt coordinates'}")
        return art.model, art.coordinates, {"from": str(src), "reducer": art.reducer}
    from .autoencoder.config import TrainConfig
    from .autoencoder.reducer import AUTOENCODER

    cfg = TrainConfig(dof=config.dof, coords=tuple(config.coords), seed=config.seed)

    def scaled(entry: dict) -> None:
        if progress is not None:
            progress({**entry, "done": share * float(entry.get("done", 0.0)),
                      "stage": f"coordinates: {entry.get('stage', '')}"})

    log.info("training the minimal coordinates (the autoencoder reducer's defaults, --dof %s)", config.dof)
    art = AUTOENCODER.fit(dataset, cfg, progress=scaled)
    art.model.resources.clear()  # its ONNX graphs run the autoencoder's dynamics, not this reducer's
    return art.model, tuple(config.coords), {"autoencoder": art.training}
