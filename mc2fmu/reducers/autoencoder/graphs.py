"""ONNX graphs of a trained model, in float64, checked against torch at export time.

Five graphs, all for one state at a time (batch 1), all built from the very functions
training and the run-time model use (:mod:`.torch_model`, :mod:`mc2fmu.models.manifold`):

* ``decoder``: ``q`` (1, m) -> ``x`` (1, n), ``J`` (1, n, m), ``H`` (1, n, m, m);
* ``positions``: ``q`` -> ``x`` only (what the FMU's outputs need);
* ``encoder``: ``x`` (1, n) -> ``q`` (1, m), angle coordinates in (-pi, pi];
* ``rhs``: ``q``, ``qd`` (1, m), ``u``, physics -> ``qdd`` (1, m), the reduced right-hand side;
* ``step``: ``q_prev``, ``q`` (1, m), ``u``, physics -> ``q_next`` (1, m), the model's one-step map.

``u`` is (1, n_u); a mechanism without inputs has no ``u`` input.  The physics are inputs
(:data:`PHYSICS_INPUTS`, :data:`LOAD_INPUTS` with inputs, :data:`SPRING_GEOMETRY` and
:data:`SPRING_INPUTS` with springs): the point mass blocks, gravity's force and the spring
constants, which a python FMU forms from its physical parameters
(:mod:`mc2fmu.mechanics.parameters`), and the input loads' maps and the springs' attachment
maps, which it reads from the mechanism file it was exported for (so a physical variant needs
no new graphs, and exporting one needs no torch).  Learned spring laws and identified terms are
constants.  ``M_m`` is solved
by the unrolled Cholesky factorisation of :func:`mc2fmu.models.manifold.cholesky_solve`
(``torch.linalg.solve`` does not export).  ``dt`` is a constant inside ``step``.

:func:`onnx_graphs` evaluates every graph with onnxruntime at points spread over the
training envelope (the dynamics graphs with the model's physics and with others:
:func:`physics_feeds`) and compares with torch; a difference above :data:`TOLERANCE` is an
:class:`~mc2fmu.errors.ExportError`.  The autoencoder reducer stores the graphs in the model
artifact (``resources/onnx/<graph>.onnx``), where the python FMU backend takes them (it reads
the graphs' input names to tell whether they take the physics).
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
from ...mechanics.parameters import gravity_force
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


class _DynamicsGraph(nn.Module):
    """A graph of the dynamics: its inputs, by name (:func:`graph_specs`), are the state, the
    inputs ``u`` (absent without inputs) and the physics (:data:`PHYSICS_INPUTS`)."""

    def __init__(self, model, spec: "GraphSpec", n_u: int):
        super().__init__()
        self.model, self.inputs, self.n_u = model, spec.inputs, n_u

    def _args(self, args) -> tuple[dict, torch.Tensor, dict | None]:
        a = dict(zip(self.inputs, args))
        u = a["u"] if "u" in a else torch.zeros(1, self.n_u, dtype=F64)
        if "mass" not in a:  # a graph with the model's own physics as constants
            return a, u, None
        return a, u, {k: a[k] for k in ALL_PHYSICS if k in a}


class _RhsGraph(_DynamicsGraph):
    def forward(self, *args):
        a, u, physics = self._args(args)
        return self.model.acceleration(a["q"], a["qd"], u, physics)


class _StepGraph(_DynamicsGraph):
    def __init__(self, model, spec: "GraphSpec", n_u: int, dt: float):
        super().__init__(model, spec, n_u)
        # a one-element tensor, neither a Python float nor a 0-d tensor: the exporters treat
        # those as scalars and store them, or cast them, through float32 (dt^2 = 1e-6 became
        # 9.99999997e-7, a 3e-8 relative error in every step)
        self.register_buffer("dt", torch.tensor([float(dt)], dtype=F64))

    def forward(self, *args):
        a, u, physics = self._args(args)
        return self.model.step(a["q_prev"], a["q"], u, self.dt, physics)


@dataclass(frozen=True)
class GraphSpec:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


#: the physics the dynamics graphs take as inputs, from the model's physical parameters: the
#: 4x4 point mass blocks (n_b, 4, 4), gravity's force f_g (n,) and, with springs, their
#: stiffness, damping and rest length (n_s,) (:func:`mc2fmu.mechanics.parameters.physics_arrays`)
PHYSICS_INPUTS = ("mass", "f_g")
SPRING_INPUTS = ("spring_k", "spring_c", "spring_L0")
#: and from the mechanism file's geometry, which no parameter changes but a physical variant
#: (``export --mechanism``) may: with inputs, their load maps f_B (n, n_u) and f_C (n_u, n, n);
#: with springs, their attachment maps D (n_s, 3, n) and e (n_s, 3)
LOAD_INPUTS = ("f_B", "f_C")
SPRING_GEOMETRY = ("spring_D", "spring_e")
ALL_PHYSICS = PHYSICS_INPUTS + LOAD_INPUTS + SPRING_GEOMETRY + SPRING_INPUTS


def graph_specs(n_u: int, n_springs: int = 0, physics_inputs: bool = True) -> dict[str, GraphSpec]:
    """The graphs' inputs and outputs; ``physics_inputs=False``: the dynamics graphs hold the
    model's own physics as constants (what models were exported with before; the variants
    benchmark measures what the inputs cost)."""
    u = ("u",) if n_u else ()
    physics = ()
    if physics_inputs:
        physics = PHYSICS_INPUTS + (LOAD_INPUTS if n_u else ()) + (SPRING_GEOMETRY + SPRING_INPUTS if n_springs else ())
    return {
        "decoder": GraphSpec("decoder", ("q",), ("x", "J", "H")),
        "positions": GraphSpec("positions", ("q",), ("x",)),
        "encoder": GraphSpec("encoder", ("x",), ("q",)),
        "rhs": GraphSpec("rhs", ("q", "qd", *u, *physics), ("qdd",)),
        "step": GraphSpec("step", ("q_prev", "q", *u, *physics), ("q_next",)),
    }


def graph_modules(model, specs: dict[str, GraphSpec], n_u: int, dt: float) -> dict[str, nn.Module]:
    return {
        "decoder": DecoderGraph(model),
        "positions": PositionsGraph(model),
        "encoder": EncoderGraph(model),
        "rhs": _RhsGraph(model, specs["rhs"], n_u),
        "step": _StepGraph(model, specs["step"], n_u, dt),
    }


def physics_feeds(runtime, count: int, seed: int = 11) -> list[dict[str, np.ndarray]]:
    """The dynamics graphs' physics inputs: the model's own, then ``count - 1`` other physically
    valid ones (each body's block scaled by its own factor in [0.5, 2], gravity turned and
    scaled, the input loads' maps scaled, the spring constants scaled and their attachment
    points moved), so that the check sees the inputs used."""
    rng = np.random.default_rng(seed)
    springs = runtime.springs
    own = {"mass": runtime.mass, "f_g": runtime.f_g}
    if runtime.n_u:
        own.update(f_B=runtime.f_B, f_C=runtime.f_C)
    if len(springs):
        own.update(spring_D=springs.D, spring_e=springs.e, spring_k=springs.k, spring_c=springs.c,
                   spring_L0=springs.L0)
    feeds = [own]
    blocks = runtime.mass
    for _ in range(count - 1):
        if blocks.ndim != 3:  # a dense M (not natural coordinates' blocks): scaled as a whole
            scale = rng.uniform(0.5, 2.0)
            mass, f_g = scale * blocks, scale * runtime.f_g
        else:
            scale = rng.uniform(0.5, 2.0, len(blocks))
            mass = scale[:, None, None] * blocks
            g = rng.normal(size=3)
            g *= rng.uniform(2.0, 20.0) / np.linalg.norm(g)
            f_g = gravity_force(mass, g)
        feed = {"mass": mass, "f_g": f_g}
        if runtime.n_u:
            feed.update(f_B=runtime.f_B * rng.uniform(0.5, 2.0, runtime.n_u),
                        f_C=runtime.f_C * rng.uniform(0.5, 2.0, runtime.n_u)[:, None, None])
        if len(springs):
            # an attachment point moved by up to 1 % of the spring's length: e shifts
            length = np.linalg.norm(springs.e + np.einsum("sin,n->si", springs.D, runtime.x_mean), axis=1)
            # and its weights on the body's points changed by up to 2 % (an attachment point moved
            # in the body frame changes D as well)
            feed.update(spring_D=springs.D * (1.0 + 0.02 * rng.uniform(-1, 1, springs.D.shape)),
                        spring_e=springs.e + 0.01 * length[:, None] * rng.uniform(-1, 1, (len(springs), 3)),
                        spring_k=springs.k * rng.uniform(0.5, 2.0, len(springs)),
                        spring_c=springs.c * rng.uniform(0.5, 2.0, len(springs)),
                        spring_L0=springs.L0 * rng.uniform(0.9, 1.1, len(springs)))
        feeds.append(feed)
    return feeds


@contextlib.contextmanager
def _eval_mode(module: nn.Module):
    """``module`` in eval mode (what an FMU runs), every submodule's own mode given back after."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield module
    finally:
        for m, training in modes:
            m.training = training


def _torch_outputs(module: nn.Module, spec: GraphSpec, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad(), _eval_mode(module):
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


#: the exporters tried in order: torch's TorchScript exporter, then its dynamo exporter
EXPORTERS = ("torchscript", "dynamo")


def _quiet_export(module: nn.Module, args: tuple, input_names: list[str], output_names: list[str], what: str,
                  exporters: tuple[str, ...] = EXPORTERS):
    """``module`` as an ONNX ``ModelProto`` (float64 kept), in eval mode, the exporters' progress
    lines and warnings kept out of the CLI.

    The exporters of ``exporters`` are tried in order until one gives a graph without a
    :func:`graph_problem`.  The TorchScript exporter (``dynamo=False``) comes first: measured on
    the MacPherson's five graphs (``benchmarks/train_profile.py``'s ``export s``), 0.4 s against
    the dynamo exporter's 7.5 s in a fresh process (4.2 s warm), most of that its operator
    registry and decompositions, a fixed cost of every ``train``.  The dynamo exporter follows
    for a module the TorchScript one cannot trace (it is deprecated and may leave a later
    torch), or whose graph drops an unused input or computes in float32 outside ``atan2``.
    Which exporter gave way, and why, is logged at INFO; when none gives a graph, the
    :class:`ExportError` names ``what`` and every exporter's reason.  :func:`export_checked`
    then holds the graph to torch (and retries a graph that differs with the dynamo exporter
    alone)."""
    import onnx

    sink = io.StringIO()
    quiet = [logging.getLogger(n) for n in ("onnxscript", "onnx_ir", "torch.onnx")]
    levels = [lg.level for lg in quiet]
    problems: list[str] = []
    for lg in quiet:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                _eval_mode(module):
            warnings.simplefilter("ignore")
            for exporter in exporters:
                try:
                    if exporter == "torchscript":
                        buffer = io.BytesIO()
                        torch.onnx.export(module, args, buffer, input_names=input_names, output_names=output_names,
                                          dynamo=False, opset_version=OPSET, verbose=False)
                        proto = onnx.load_from_string(buffer.getvalue())
                    else:
                        proto = torch.onnx.export(module, args, input_names=input_names, output_names=output_names,
                                                  dynamo=True, opset_version=OPSET, external_data=False,
                                                  verbose=False).model_proto
                except Exception as exc:  # noqa: BLE001 - the exporters raise many types; each is a reason
                    problems.append(f"the {exporter} exporter failed: {_summary(exc)}")
                    continue
                problem = graph_problem(proto, input_names, output_names)
                if problem is None:
                    if problems:
                        log.info("ONNX export of %s: %s; the %s exporter's graph is used", what, "; ".join(problems),
                                 exporter)
                    return proto
                problems.append(f"the {exporter} exporter's graph {problem}")
    finally:
        for lg, level in zip(quiet, levels):
            lg.setLevel(level)
        log.debug("exporter output for %s:\n%s", what, sink.getvalue())
    raise ExportError(f"ONNX export of {what} failed: " + "; ".join(problems))


def graph_problem(proto, input_names: list[str], output_names: list[str]) -> str | None:
    """What is wrong with an exported graph, or None: its inputs or outputs are not the names
    asked for, in order (the TorchScript exporter drops an input the module does not read), or
    it computes in float32 outside ``atan2`` (:func:`.torch_model.atan2` takes a float32
    estimate on purpose; anywhere else float32 would cost nine digits)."""
    import onnx

    got_in = [v.name for v in proto.graph.input if v.name not in {t.name for t in proto.graph.initializer}]
    if got_in != list(input_names):
        return f"has the inputs {got_in}, not {list(input_names)}"
    got_out = [v.name for v in proto.graph.output]
    if got_out != list(output_names):
        return f"has the outputs {got_out}, not {list(output_names)}"
    try:
        typed = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - no types to judge by: the check against torch still follows
        return None
    g = typed.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    types.update({t.name: t.data_type for t in g.initializer})
    f32 = onnx.TensorProto.FLOAT
    nodes = [n for n in g.node if any(types.get(v) == f32 for v in [*n.input, *n.output])]
    # the float32 regions: the nodes that read or make float32 values, joined by those values;
    # each region must hold an Atan
    parent = list(range(len(nodes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    for k, n in enumerate(nodes):
        for v in n.input:
            if v in producer and types.get(v) == f32:
                parent[root(k)] = root(producer[v])
    with_atan = {root(k) for k, n in enumerate(nodes) if n.op_type == "Atan"}
    stray = [n for k, n in enumerate(nodes) if root(k) not in with_atan]
    if stray:
        return (f"computes in float32 outside atan2 ({len(stray)} nodes, the first {stray[0].op_type} "
                f"{stray[0].name or stray[0].output[0]})")
    return None


def export_one(module: nn.Module, spec: GraphSpec, feed: dict[str, np.ndarray], path: Path,
               exporters: tuple[str, ...] = EXPORTERS) -> None:
    """One graph exported alone (what :func:`export_graphs` does for several at once)."""
    args = tuple(torch.as_tensor(feed[k], dtype=F64) for k in spec.inputs)
    import onnx

    onnx.save(_quiet_export(module, args, list(spec.inputs), list(spec.outputs), f"the {spec.name} graph",
                            exporters), str(path))


class _AllGraphs(nn.Module):
    """Every graph of ``specs`` as one module: the union of their inputs (a name is one input,
    the same array in every graph that takes it), all their outputs as ``<graph>__<output>``."""

    def __init__(self, specs: dict[str, GraphSpec], modules: dict[str, nn.Module]):
        super().__init__()
        self.specs = specs
        self.graphs = nn.ModuleDict({name: modules[name] for name in specs})
        self.inputs = list(dict.fromkeys(k for spec in specs.values() for k in spec.inputs))
        self.outputs = [f"{name}__{o}" for name, spec in specs.items() for o in spec.outputs]

    def forward(self, *args):
        a = dict(zip(self.inputs, args))
        out = []
        for name, spec in self.specs.items():
            o = self.graphs[name](*(a[k] for k in spec.inputs))
            out += list(o) if isinstance(o, tuple) else [o]
        return tuple(out)


def export_graphs(specs: dict[str, GraphSpec], modules: dict[str, nn.Module], feed: dict[str, np.ndarray],
                  work: Path) -> dict[str, Path]:
    """Every graph of ``specs`` written to ``work/<name>.onnx``: the modules are exported together,
    once (an exporter's fixed cost is paid once: with the dynamo exporter, whose operator
    registry and decompositions are most of an export's time, the autoencoder's five graphs
    took 6.3 s one by one and 4.8 s together on the four-bar, 13.8 s and 5.0 s on A02's 81
    bodies), and each graph is the part of
    that model between its own inputs and outputs (``onnx.utils.Extractor``), its outputs renamed
    to the spec's names.  A part the Extractor cannot cut out, that ``onnx.checker`` refuses or whose
    renaming would clash is exported alone; :func:`export_checked` compares every graph with torch."""
    import onnx
    from onnx.utils import Extractor

    together = _AllGraphs(specs, modules)
    args = tuple(torch.as_tensor(feed[k], dtype=F64) for k in together.inputs)
    whole = _quiet_export(together, args, together.inputs, together.outputs, "the graphs")
    extractor = Extractor(whole)
    paths = {}
    for name, spec in specs.items():
        path = work / f"{name}.onnx"
        renamed = {f"{name}__{o}": o for o in spec.outputs}
        try:
            part = extractor.extract_model(list(spec.inputs), list(renamed))
            onnx.checker.check_model(part, full_check=True)  # a part that reads outside its inputs fails here
            # the part's inputs are the names given, in order (the Extractor builds them so); what
            # can go wrong is an inner value already named as one of the spec's outputs, which the
            # renaming below would make two values of one name
            inner = {v for node in part.graph.node for v in node.output} | {i.name for i in part.graph.input}
            ok = not (inner & set(spec.outputs))
        except Exception:  # noqa: BLE001 - any failure to cut the part out: export the graph alone
            ok = False
        if not ok:
            export_one(modules[name], spec, feed, path)
        else:
            for node in part.graph.node:
                node.input[:] = [renamed.get(v, v) for v in node.input]
                node.output[:] = [renamed.get(v, v) for v in node.output]
            for value in part.graph.output:
                value.name = renamed.get(value.name, value.name)
            onnx.save(part, str(path))
        paths[name] = path
    return paths


def export_checked(specs: dict[str, GraphSpec], modules: dict[str, nn.Module], points, work: str | os.PathLike
                   ) -> tuple[dict[str, bytes], dict[str, float]]:
    """Each module of ``modules`` exported as its graph of ``specs`` (:func:`export_graphs`) and
    checked against torch at ``points`` (:func:`check_graph`): ``({"onnx/<name>.onnx": bytes},
    {name: max relative difference})``.  A graph that differs from torch by more than
    :data:`TOLERANCE` is exported again, alone, by the dynamo exporter (the TorchScript one folds
    a float64 buffer's product with a scalar in float32) and checked again; raises
    :class:`ExportError` if it still differs."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    errors, graphs = {}, {}
    for name, path in export_graphs(specs, modules, points[0], work).items():
        first = _checked(path, modules[name], specs[name], points)
        if isinstance(first, float) and first <= TOLERANCE:
            errors[name] = first
        else:
            # the TorchScript exporter folds constants in float32 (dt * dt of a float64 buffer
            # came out 8e-8 off): the dynamo exporter keeps them, so the graph is made again by it
            try:
                export_one(modules[name], specs[name], points[0], path, exporters=("dynamo",))
                again = _checked(path, modules[name], specs[name], points)
            except ExportError as exc:
                again = str(exc)
            log.info("ONNX %s graph: %s; exported again by the dynamo exporter: %s", name, _reason(first), _reason(again))
            if not (isinstance(again, float) and again <= TOLERANCE):
                raise ExportError(f"{path}: the ONNX graph does not compute what torch does: {_reason(first)}; "
                                  f"exported again by the dynamo exporter: {_reason(again)}; this is a bug in the "
                                  "exporter, please report it with the model directory")
            errors[name] = again
        log.info("ONNX %s graph: max |onnxruntime - torch| = %.1e (relative)", name, errors[name])
        graphs[f"onnx/{name}.onnx"] = path.read_bytes()
    return graphs, errors


def _checked(path, module: nn.Module, spec: GraphSpec, points) -> float | str:
    """:func:`check_graph`'s difference, or why the graph could not be checked (onnxruntime
    refused to load or run it, an output's shape differs)."""
    try:
        return check_graph(path, module, spec, points)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types; each is a reason to export again
        return _summary(exc)


def _summary(exc: BaseException) -> str:
    """An exception's type and the first line of its message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _reason(result: float | str) -> str:
    return f"differs from torch by {result:.2e} (tolerance {TOLERANCE:g})" if isinstance(result, float) else result


#: the graphs of the dynamics (the ones with physics inputs)
DYNAMICS_GRAPHS = ("rhs", "step")


def onnx_graphs(model, runtime, envelope, work: str | os.PathLike, check_points: int = 16,
                physics_inputs: bool = True, only: tuple[str, ...] | None = None
                ) -> tuple[dict[str, bytes], dict[str, float]]:
    """Every graph of :func:`graph_specs` of the torch ``model`` (or those named in ``only``),
    as ``{"onnx/<name>.onnx": bytes}``, and the measured max relative difference to torch per
    graph (:func:`export_checked`).  ``runtime`` (the numpy model) and ``envelope`` give the
    check points; ``physics_inputs``: see :func:`graph_specs`."""
    specs = graph_specs(runtime.n_u, len(runtime.springs), physics_inputs)
    if only is not None:
        specs = {name: specs[name] for name in only}
    modules = graph_modules(model, specs, runtime.n_u, runtime.dt)
    points = sample_points(envelope, runtime, check_points)
    if physics_inputs:
        for point, physics in zip(points, physics_feeds(runtime, len(points))):
            point.update(physics)
    return export_checked(specs, modules, points, work)
