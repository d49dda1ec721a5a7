"""ONNX graphs of a trained model, in float64, checked against torch at export time.

Five graphs, all for one state at a time (batch 1), all built from the very functions
training and the run-time model use (:mod:`.torch_model`, :mod:`mc2fmu.models.manifold`):

* ``decoder``: ``q`` (1, m) -> ``x`` (1, n), ``J`` (1, n, m), ``H`` (1, n, m, m);
* ``positions``: ``q`` -> ``x`` only (what the FMU's outputs need);
* ``encoder``: ``x`` (1, n) -> ``q`` (1, m), angle coordinates in (-pi, pi];
* ``rhs``: ``q``, ``qd`` (1, m), ``u`` -> ``qdd`` (1, m), the reduced right-hand side;
* ``step``: ``q_prev``, ``q`` (1, m), ``u`` -> ``q_next`` (1, m), the model's one-step map.

``u`` is (1, n_u); a mechanism without inputs has no ``u`` input.  ``M_m`` is solved by the
unrolled Cholesky factorisation of :func:`mc2fmu.models.manifold.cholesky_solve`
(``torch.linalg.solve`` does not export).  ``dt`` is a constant inside ``step``.

:func:`onnx_graphs` evaluates every graph with onnxruntime at points spread over the
training envelope and compares with torch; a difference above :data:`TOLERANCE` is an
:class:`~mc2fmu.errors.ExportError`.  The autoencoder reducer stores the graphs in the model
artifact (``resources/onnx/<graph>.onnx``), where the python FMU backend takes them.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ...errors import ExportError
from ...models.envelope import sample_points

log = logging.getLogger(__name__)

F64 = torch.float64
TOLERANCE = 1e-12  # max |onnxruntime - torch| of an output, float64, relative to max(1, max |output| over the points)
OPSET = 18


class DecoderGraph(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.decoder = model.decoder

    def forward(self, q):
        return self.decoder.value_jh(q)


class PositionsGraph(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.decoder = model.decoder

    def forward(self, q):
        return self.decoder(q)


class EncoderGraph(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.encoder = model.encoder

    def forward(self, x):
        return self.encoder(x)


class _RhsGraph(nn.Module):
    def __init__(self, model, n_u: int):
        super().__init__()
        self.model, self.n_u = model, n_u

    def forward(self, q, qd, u=None):
        if u is None:
            u = torch.zeros(1, self.n_u, dtype=F64)
        return self.model.acceleration(q, qd, u)


class _StepGraph(nn.Module):
    def __init__(self, model, n_u: int, dt: float):
        super().__init__()
        self.model, self.n_u = model, n_u
        # a tensor, not a Python float: the exporter stores Python scalars through float32
        # (dt^2 = 1e-6 became 9.99999997e-7, a 3e-8 relative error in every step)
        self.register_buffer("dt", torch.tensor(float(dt), dtype=F64))

    def forward(self, q_prev, q, u=None):
        if u is None:
            u = torch.zeros(1, self.n_u, dtype=F64)
        return self.model.step(q_prev, q, u, self.dt)


@dataclass(frozen=True)
class GraphSpec:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def graph_specs(n_u: int) -> dict[str, GraphSpec]:
    u = ("u",) if n_u else ()
    return {
        "decoder": GraphSpec("decoder", ("q",), ("x", "J", "H")),
        "positions": GraphSpec("positions", ("q",), ("x",)),
        "encoder": GraphSpec("encoder", ("x",), ("q",)),
        "rhs": GraphSpec("rhs", ("q", "qd", *u), ("qdd",)),
        "step": GraphSpec("step", ("q_prev", "q", *u), ("q_next",)),
    }


def _modules(model, n_u: int, dt: float) -> dict[str, nn.Module]:
    return {
        "decoder": DecoderGraph(model),
        "positions": PositionsGraph(model),
        "encoder": EncoderGraph(model),
        "rhs": _RhsGraph(model, n_u),
        "step": _StepGraph(model, n_u, dt),
    }


def _torch_outputs(module: nn.Module, spec: GraphSpec, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*(torch.as_tensor(feed[k], dtype=F64) for k in spec.inputs))
    out = out if isinstance(out, tuple) else (out,)
    return [o.numpy() for o in out]


def session(path: str | os.PathLike):
    """An onnxruntime session tuned for tiny graphs (one thread: faster than the default pool)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def check_graph(path, module: nn.Module, spec: GraphSpec, points) -> float:
    """Largest ``max |ort - torch| / max(1, max |torch|)`` of an output, the max of ``|torch|``
    taken over all ``points``: norm-wise, as floating-point results are accurate.  The
    components of a solved ``qdd`` share its scale (a small component next to a large one
    carries the large one's rounding), and so do the points: where the forces nearly cancel,
    ``qdd`` is small but carries the rounding of forces of the envelope's size (measured on a
    MacPherson with a learned spring law: 1.6e-12 of ``|qdd| = 0.17`` at one point, 1.6e-15 of
    the envelope's ``max |qdd| = 960``; numpy and torch differ by as much)."""
    sess = session(path)
    diffs, scales = [], []
    for p in points:
        ref = _torch_outputs(module, spec, p)
        got = sess.run(list(spec.outputs), {k: p[k] for k in spec.inputs})
        for r, g in zip(ref, got):
            if r.shape != g.shape:
                raise ExportError(f"{path}: output shape {g.shape} differs from torch's {r.shape}")
        diffs.append([float(np.max(np.abs(g - r))) if r.size else 0.0 for r, g in zip(ref, got)])
        scales.append([float(np.max(np.abs(r))) if r.size else 0.0 for r in ref])
    if not diffs:
        return 0.0
    diffs, scales = np.asarray(diffs), np.asarray(scales)
    if not np.all(np.isfinite(diffs)):
        return math.inf
    return float(np.max(diffs.max(axis=0) / np.maximum(1.0, scales.max(axis=0))))


def _export_one(module: nn.Module, spec: GraphSpec, feed: dict[str, np.ndarray], path: Path) -> None:
    args = tuple(torch.as_tensor(feed[k], dtype=F64) for k in spec.inputs)
    sink = io.StringIO()
    quiet = [logging.getLogger(n) for n in ("onnxscript", "onnx_ir", "torch.onnx")]
    levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.ERROR)
    # the dynamo exporter prints progress lines and warnings of its own: keep them out of the CLI
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        try:
            prog = torch.onnx.export(module, args, input_names=list(spec.inputs), output_names=list(spec.outputs),
                                     dynamo=True, opset_version=OPSET, external_data=False, verbose=False)
            prog.save(str(path))
        except Exception as exc:  # the exporter raises many types; report them as one
            raise ExportError(f"ONNX export of the {spec.name} graph failed: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
        finally:
            for lg, level in zip(quiet, levels):
                lg.setLevel(level)
    log.debug("exporter output for %s:\n%s", spec.name, sink.getvalue())


def export_checked(specs: dict[str, GraphSpec], modules: dict[str, nn.Module], points, work: str | os.PathLike
                   ) -> tuple[dict[str, bytes], dict[str, float]]:
    """Each module of ``modules`` exported as its graph of ``specs`` and checked against torch
    at ``points`` (:func:`check_graph`): ``({"onnx/<name>.onnx": bytes}, {name: max relative
    difference})``; raises :class:`ExportError` if a difference exceeds :data:`TOLERANCE`."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    errors, graphs = {}, {}
    for name, spec in specs.items():
        path = work / f"{name}.onnx"
        _export_one(modules[name], spec, points[0], path)
        errors[name] = check_graph(path, modules[name], spec, points)
        log.info("ONNX %s graph: max |onnxruntime - torch| = %.1e (relative)", name, errors[name])
        if not errors[name] <= TOLERANCE:
            raise ExportError(f"{path}: onnxruntime differs from torch by {errors[name]:.2e} (tolerance {TOLERANCE:g}); "
                              "this is a bug in the exporter, please report it with the model directory")
        graphs[f"onnx/{name}.onnx"] = path.read_bytes()
    return graphs, errors


def onnx_graphs(model, runtime, envelope, work: str | os.PathLike,
                check_points: int = 16) -> tuple[dict[str, bytes], dict[str, float]]:
    """Every graph of :func:`graph_specs` of the torch ``model``, as ``{"onnx/<name>.onnx": bytes}``,
    and the measured max relative difference to torch per graph (:func:`export_checked`).
    ``runtime`` (the numpy model) and ``envelope`` give the check points."""
    specs, modules = graph_specs(runtime.n_u), _modules(model, runtime.n_u, runtime.dt)
    return export_checked(specs, modules, sample_points(envelope, runtime, check_points), work)
