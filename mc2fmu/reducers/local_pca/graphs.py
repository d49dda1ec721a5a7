"""ONNX graphs of a local-PCA model's chart, for the python FMU backend, checked against torch
at training.

The slave script runs the piecewise-linear ROM itself (the source of
:mod:`mc2fmu.models.local_linear`, inserted at export); what it needs of the chart are the
two maps between natural and minimal coordinates:

* ``decoder``: ``q`` (1, m) -> ``x`` (1, n), ``J`` (1, n, m), ``H`` (1, n, m, m): the start
  ``x = decode(q0)``, ``xd = J(q0) qd0`` and the Jacobian of the velocity output;
* ``encoder``: ``x`` (1, n) -> ``q`` (1, m): the ``q`` output of the active cluster's
  ``x = V q_r + mu``.

Both are the autoencoder's graphs of those names (:mod:`mc2fmu.reducers.autoencoder.graphs`),
exported from the chart's torch form and compared with it over the training envelope.
"""

from __future__ import annotations

import os

from ...models.envelope import sample_points
from ..autoencoder.graphs import DecoderGraph, EncoderGraph, export_checked, graph_specs
from ..autoencoder.torch_model import from_runtime


def local_pca_graphs(model, envelope, work: str | os.PathLike, check_points: int = 16
                     ) -> tuple[dict[str, bytes], dict[str, float]]:
    """``{"onnx/decoder.onnx": bytes, "onnx/encoder.onnx": bytes}`` of a
    :class:`~mc2fmu.models.charted.LocalPcaModel`'s chart and the measured max relative
    difference to torch per graph (an :class:`~mc2fmu.errors.ExportError` above tolerance)."""
    chart = from_runtime(model.chart)
    specs = {k: v for k, v in graph_specs(model.n_u).items() if k in ("decoder", "encoder")}
    modules = {"decoder": DecoderGraph(chart), "encoder": EncoderGraph(chart)}
    return export_checked(specs, modules, sample_points(envelope, model.chart, check_points), work)
