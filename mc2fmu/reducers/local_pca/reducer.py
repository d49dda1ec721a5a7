"""The registered ``local-pca`` reducer: the piecewise-linear ROM fitted to the natural
coordinates (:mod:`.fit`), its coordinates read through a chart, handed over as a
:class:`~mc2fmu.models.charted.LocalPcaModel` with its chart's ONNX graphs (:mod:`.graphs`)
for the python FMU backend."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from ...models.artifact import ModelArtifact
from ...models.charted import LocalPcaModel
from ..base import Checkpointer, trained_artifact
from ..chart import chart_for
from .config import LocalPcaConfig
from .fit import fit_local_linear
from .graphs import local_pca_graphs


class LocalPcaReducer:
    name = "local-pca"
    description = "local-PCA piecewise-linear ROM (Angeli et al., real-time MOR), coordinates of an autoencoder"
    Config = LocalPcaConfig

    def fit(self, dataset, config: LocalPcaConfig, *, progress: Callable[[dict], None] | None = None,
            checkpoint: Checkpointer | None = None) -> ModelArtifact:
        config.validate()
        t0 = time.perf_counter()
        chart, coords, chart_record = chart_for(dataset, config, progress, share=0.0 if config.from_model else 0.95)
        t1 = time.perf_counter()
        clusters = config.cluster_count(len(dataset.x))
        modes = config.modes or chart.dof
        rom = fit_local_linear(dataset.x, dataset.xd, dataset.M, dataset.forces, float(dataset.dt[0]),
                               clusters=clusters, modes=modes, eps=config.eps, seed=config.seed)
        now = time.perf_counter()
        if progress is not None:
            progress({"done": 1.0, "stage": f"local-pca: {clusters} clusters fitted", "iter": "", "loss": None,
                      "val": None})
        record = {"train_seconds": now - t0, "fit_seconds": now - t1, "clusters": clusters, "modes": modes}
        model = LocalPcaModel(chart, rom)
        return trained_artifact(self.name, model, dataset, config, record, partial(local_pca_graphs, model),
                                coordinates=coords, extra={"coordinates": chart_record})


LOCAL_PCA = LocalPcaReducer()
