"""ONNX graphs of a node model, for the python FMU backend, checked against torch at training.

* ``node_step``: ``q``, ``qd`` (1, m), ``u`` (1, n_u) -> ``q_next``, ``qd_next`` (1, m): one
  classical RK4 step of the neural ODE (:func:`mc2fmu.models.node.rk4_step` on
  :func:`~mc2fmu.models.node.node_acceleration`, the functions training and the run-time
  model use), ``dt`` and the normalisations float64 constants;
* ``positions``: ``q`` -> ``x``, the chart's decoder (as the autoencoder's graph of that name);
* ``decoder``: ``q`` -> ``x``, ``J``, ``H``, the chart's decoder with its derivatives (the
  autoencoder's graph of that name): the motion outputs' ``xd = J qd``.

Compared with torch at points spread over the training envelope by the autoencoder's
:func:`~mc2fmu.reducers.autoencoder.graphs.check_graph`; a difference above its tolerance is
an :class:`~mc2fmu.errors.ExportError`.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn

from ...models.envelope import sample_points
from ...models.mlp import get_activation
from ...models.node import NodeScales, node_acceleration, rk4_step
from ..autoencoder.graphs import F64, DecoderGraph, GraphSpec, PositionsGraph, export_checked, graph_specs
from ..autoencoder.torch_model import from_runtime

_SCALES = ("q_mean", "q_scale", "qd_mean", "qd_scale", "u_mean", "u_scale", "a_mean", "a_scale")


class _NodeStepGraph(nn.Module):
    def __init__(self, model):
        super().__init__()
        dyn = model.dynamics
        self.n_w = len(dyn.net.weights)
        for i, (W, b) in enumerate(dyn.net.layers):
            self.register_buffer(f"W{i}", torch.as_tensor(np.asarray(W), dtype=F64))
            self.register_buffer(f"b{i}", torch.as_tensor(np.asarray(b), dtype=F64))
        for name in _SCALES:
            self.register_buffer(name, torch.as_tensor(np.asarray(getattr(dyn.scales, name)), dtype=F64))
        # a one-element tensor, neither a Python float nor a 0-d tensor (the exporters pass
        # those through float32: see the autoencoder's step graph)
        self.register_buffer("dt", torch.tensor([float(dyn.dt)], dtype=F64))
        self.activation = get_activation(dyn.net.activation)
        self.angles, self.n_u = dyn.angles, model.n_u

    def forward(self, q, qd, u=None):
        if u is None:
            u = torch.zeros(1, self.n_u, dtype=F64)
        layers = [(getattr(self, f"W{i}"), getattr(self, f"b{i}")) for i in range(self.n_w)]
        scales = NodeScales(*(getattr(self, name) for name in _SCALES))

        def f(a, b, c):
            return node_acceleration(layers, self.activation, a, b, c, self.angles, scales)

        return rk4_step(f, q, qd, u, self.dt)


def node_graphs(model, envelope, work: str | os.PathLike, check_points: int = 16
                ) -> tuple[dict[str, bytes], dict[str, float]]:
    """``{"onnx/node_step.onnx": bytes, "onnx/positions.onnx": bytes, "onnx/decoder.onnx": bytes}``
    of a :class:`~mc2fmu.models.charted.NodeModel` (the chart's decoder with its Jacobian gives
    the motion outputs' ``xd = J qd``) and the measured max relative difference to torch per
    graph; raises :class:`ExportError` above the autoencoder's tolerance."""
    u = ("u",) if model.n_u else ()
    chart = from_runtime(model.chart)
    specs = {"node_step": GraphSpec("node_step", ("q", "qd", *u), ("q_next", "qd_next")),
             "positions": GraphSpec("positions", ("q",), ("x",)), "decoder": graph_specs(model.n_u)["decoder"]}
    modules = {"node_step": _NodeStepGraph(model), "positions": PositionsGraph(chart), "decoder": DecoderGraph(chart)}
    return export_checked(specs, modules, sample_points(envelope, model.chart, check_points), work)
