"""The registered ``node`` reducer: the chart's coordinates of every training run, the neural
ODE fitted to their one-step RK4 map, handed over as a :class:`~mc2fmu.models.charted.NodeModel`
with its ONNX graphs (:mod:`.graphs`) for the python FMU backend."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import torch

from ...mechanics.natural import finite_difference_velocity
from ...models.artifact import ModelArtifact
from ...models.charted import NodeModel
from ...models.simulate import unwrap_angles
from ..base import Checkpointer, trained_artifact
from ..chart import chart_for
from .config import NodeReducerConfig
from .graphs import node_graphs
from .training import NodeConfig, train_node


class NodeReducer:
    name = "node"
    description = "MBD-NODE neural ODE baseline (Wang et al. 2024) on an autoencoder's coordinates"
    Config = NodeReducerConfig

    def fit(self, dataset, config: NodeReducerConfig, *, progress: Callable[[dict], None] | None = None,
            checkpoint: Checkpointer | None = None) -> ModelArtifact:
        config.validate()
        t0 = time.perf_counter()
        share = 0.0 if config.from_model else 0.7
        chart, coords, chart_record = chart_for(dataset, config, progress, share)
        dt = float(dataset.dt[0])
        runs = dataset.runs()
        q_runs = [unwrap_angles(chart.encode(r.x), chart.angles) for r in runs]
        qd_runs = [finite_difference_velocity(q, dt) for q in q_runs]

        def scaled(entry: dict) -> None:
            if progress is not None:
                progress({**entry, "done": share + (1.0 - share) * entry["done"]})

        t1 = time.perf_counter()
        dyn, record = train_node(q_runs, qd_runs, [r.u for r in runs], dt, chart.angles,
                                 NodeConfig(hidden=tuple(config.node_hidden), epochs=config.node_epochs, seed=config.seed), scaled)
        now = time.perf_counter()
        record.update({"train_seconds": now - t0, "node_seconds": now - t1, "val_loss": record["best_val"]})
        model = NodeModel(chart, dyn)
        return trained_artifact(self.name, model, dataset, config, record, partial(node_graphs, model),
                                coordinates=coords, versions={"torch": torch.__version__},
                                extra={"coordinates": chart_record})


NODE = NodeReducer()
