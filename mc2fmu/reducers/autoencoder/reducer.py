"""The ``autoencoder`` reducer (seed 000): a physics-informed autoencoder learns the minimal
coordinates (or takes known ones, ``coords``) and the decoder manifold the NC physics is
projected on.  It trains torch modules (:mod:`.trainer`) and hands over the numpy run-time
:class:`~mc2fmu.models.manifold.ManifoldModel`, with its ONNX graphs (checked against torch)
as resources for the python FMU backend."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch

from ...models.artifact import ModelArtifact
from ...models.terms import equation
from ..base import Checkpointer, trained_artifact
from .config import TrainConfig
from .graphs import onnx_graphs
from .torch_model import from_runtime, to_runtime
from .trainer import train

log = logging.getLogger(__name__)
#: the reduced mass counts as singular below this ratio of its smallest to largest eigenvalue
SINGULAR_MASS = 1e-10


def reduced_mass_conditioning(runtime, dataset, samples: int = 500) -> float:
    """The smallest ratio of the reduced mass ``M_m = J^T M J``'s extreme eigenvalues over the
    training states.  ``M`` is only positive semi-definite for rods, plates and point masses;
    ``M_m`` stays definite unless a minimal coordinate moves only inertia-free directions."""
    x = dataset.x[:: max(1, len(dataset.x) // samples)]
    Mm = runtime.terms(runtime.encode(x), np.zeros((len(x), runtime.n_u))).Mm
    eig = np.linalg.eigvalsh(Mm)
    return float(np.min(eig[:, 0] / eig[:, -1]))


class AutoencoderReducer:
    name = "autoencoder"
    description = "physics-informed autoencoder on natural coordinates (Angeli et al. 2020)"
    Config = TrainConfig

    def fit(self, dataset, config: TrainConfig, *, progress: Callable[[dict], None] | None = None,
            checkpoint: Checkpointer | None = None) -> ModelArtifact:
        config.validate()
        result = train(dataset, config, progress, checkpoint)
        dt = float(dataset.dt[0])
        runtime = to_runtime(result.model, dt)
        result.metrics["reduced_mass_min_eig_ratio"] = ratio = reduced_mass_conditioning(runtime, dataset)
        if not ratio > SINGULAR_MASS:
            log.warning("the reduced mass J^T M J is (nearly) singular on the training data (smallest/largest "
                        "eigenvalue %.1e): a minimal coordinate moves only directions that carry no inertia "
                        "(a rod's spin, a point mass's rotation); choose other --coords or check the inertias", ratio)
        if runtime.library is not None:
            names = list(config.coords) or [f"q{i + 1}" for i in range(runtime.dof)]
            result.metrics["identified"] = equation(runtime.library, names, list(dataset.mechanism.input_names))
        # the graphs from the run-time model's own weights (the hull basis folded in), checked against torch
        return trained_artifact(self.name, runtime, dataset, config, result.metrics,
                                lambda envelope, tmp: onnx_graphs(from_runtime(runtime), runtime, envelope, tmp),
                                coordinates=config.coords, versions={"torch": torch.__version__})


AUTOENCODER = AutoencoderReducer()
