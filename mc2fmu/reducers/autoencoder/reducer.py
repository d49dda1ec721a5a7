"""The ``autoencoder`` reducer (seed 000): a physics-informed autoencoder learns the minimal
coordinates (or takes known ones, ``coords``) and the decoder manifold the NC physics is
projected on.  It trains torch modules (:mod:`.training`) and hands over the numpy run-time
:class:`~mc2fmu.reduced.manifold.ManifoldModel`, with its ONNX graphs (checked against torch)
as resources for the python FMU backend."""

from __future__ import annotations

import tempfile
from collections.abc import Callable

import torch

from ...reduced.artifact import ModelArtifact, build_artifact
from ..base import Checkpointer, config_to_dict
from .config import TrainConfig
from .graphs import onnx_graphs
from .torch_model import to_runtime
from .training import train


class AutoencoderReducer:
    name = "autoencoder"
    description = "physics-informed autoencoder on natural coordinates (seed 000)"
    Config = TrainConfig

    def fit(self, dataset, config: TrainConfig, *, progress: Callable[[dict], None] | None = None,
            checkpoint: Checkpointer | None = None) -> ModelArtifact:
        config.validate()
        result = train(dataset, config, progress, checkpoint)
        dt = float(dataset.dt[0])
        runtime = to_runtime(result.model, dt)
        art = build_artifact(self.name, runtime, dataset, coordinates=config.coords,
                             training={"metrics": result.metrics, "config": config_to_dict(config),
                                       "seed": config.seed},
                             versions={"torch": torch.__version__})
        with tempfile.TemporaryDirectory(prefix="mc2fmu-onnx-") as tmp:
            graphs, errors = onnx_graphs(result.model, runtime, art.envelope, tmp)
        runtime.resources.update(graphs)
        art.training["onnx_max_difference"] = errors
        return art


AUTOENCODER = AutoencoderReducer()
