"""The ``python`` FMU backend: FMI 2.0 co-simulation with pythonfmu and onnxruntime.

The slave script is rendered from ``templates/pythonfmu_slave.py.in`` and runs the model's
ONNX graphs (every reducer stores them in the artifact, checked against torch) with
onnxruntime: the decoder-manifold map ``step(q_prev, q)`` or the node model's
``node_step(q, qd)``, and the decoder's ``positions``; a local-PCA model runs its
piecewise-linear ROM in numpy (the source of :mod:`mc2fmu.models.local_linear`, inserted)
with the chart's ``decoder`` and ``encoder`` graphs.  The importing process must provide
Python with numpy and onnxruntime.
pythonfmu's builder imports the script to read it, so it runs in a child process: nothing
of it stays in the exporting process.  Its modelDescription.xml is replaced by ours
(:mod:`mc2fmu.fmu.description`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import numpy as np

from ... import __version__
from ...errors import ExportError
from ...files import write_zip
from ...mechanics import parameters
from ...models import local_linear
from ...models.artifact import artifact_files
from ..common import (LOG_CATEGORIES, MECHANISM_MEMBER, MODEL_PREFIX, artifact_members, model_digest, render,
                      require_manifold, runtime_config)
from ..description import fmu_variables, model_description_fmi2
from ...capabilities import kind as capability
from ...mechanics.variants import parameter_vector
from ...models.expr import emit_python
from ...models.envelope import traced as envelope_traced
from ...models.motion import MotionGeometry, traced as motion_traced
from ...models.poses import traced as poses_traced

#: what a physical variant changes that is no physical parameter (the items of
#: :func:`~mc2fmu.mechanics.variants.physical_differences` ending so): input directions and
#: points, spring attachment points.  The dynamics graphs take them as inputs (the loads' and
#: springs' maps, :data:`LOADS`), which the FMU reads from ``loads.npz``; graphs of models
#: trained before hold them as constants, and such a variant is refused for them
GRAPH_CONSTANTS = (".direction", ".point", ".point_a", ".point_b")
#: the dynamics graphs' inputs the exporter writes to ``loads.npz`` (those the graphs take)
LOADS = ("f_B", "f_C", "spring_D", "spring_e")

#: the graphs the slave runs per model kind, as the artifact's resources name them
GRAPHS = {"manifold": ("onnx/step.onnx", "onnx/rhs.onnx", "onnx/positions.onnx"),
          "node": ("onnx/node_step.onnx", "onnx/positions.onnx"),
          "local-pca": ("onnx/decoder.onnx", "onnx/encoder.onnx")}


def _module_source(module) -> str:
    """An mc2fmu module (numpy only) as code for the slave script: everything from its first
    top-level definition or constant on (its docstring, imports and ``TYPE_CHECKING`` block dropped; the
    slave imports numpy, math and dataclasses itself), indented for the block it goes in."""
    lines = Path(module.__file__).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("def ", "class ", "@")) or
                 re.match(r"[A-Z_][A-Z0-9_]* = ", line) or line.startswith("#: "))
    return textwrap.indent("\n".join(lines[start:]), "    ")


def export_python(artifact, model_dir: Path, work: Path, out: Path, fmi_version: int = 2,
                  interface: str = "cs", rebuild_dynamics: bool = False) -> dict[str, Any]:
    """The ``python`` entry of :data:`mc2fmu.capabilities.BACKENDS` (FMI 2 co-simulation only:
    the capability table says so, and :func:`~mc2fmu.fmu.export.export_fmu` checks it).
    ``artifact`` may be a physical variant (:meth:`~mc2fmu.models.artifact.ModelArtifact.for_mechanism`):
    its physical parameters are the FMU's start values, its input loads' and springs' maps go
    to ``loads.npz`` for the graphs that take them.  ``rebuild_dynamics``: the variant moves an
    input or a spring's points and the model's graphs hold those maps as constants (trained
    before they were inputs): the rhs and step graphs are exported again from it
    (:func:`dynamics_graphs`, with the training extras' torch; without it, an error)."""
    kind = artifact.model.kind
    if kind not in GRAPHS:
        require_manifold(artifact)  # the message for a kind without graphs
    missing = [g for g in GRAPHS[kind] if g not in artifact.model.resources]
    if missing:
        raise ExportError(f"{model_dir}: the model has no ONNX graphs ({', '.join(missing)} missing; the "
                          f"'{artifact.reducer}' reducer does not make them); use --backend native")
    physics = takes_physics(artifact)
    if physics and "onnx/decoder.onnx" not in artifact.model.resources:  # for the reduced mass check
        raise ExportError(f"{model_dir}: the model has no ONNX graph onnx/decoder.onnx; train it again, or use "
                          "--backend native")
    # the motion outputs (models with the decoder's graph: x and J give xd = J qd; node models trained
    # before their graphs had it have none)
    motion = "python" in capability(artifact.reducer).motion and "onnx/decoder.onnx" in artifact.model.resources
    cfg = runtime_config(artifact, physics=physics, motion=motion)
    ident = cfg["model_identifier"]
    # a variant's FMU is another module than the trained model's (its physics and graphs differ)
    module = f"{ident}_{model_digest(model_dir, json.dumps(artifact.mechanism.to_dict(), sort_keys=True))[:12]}"
    project = work / "project"
    project.mkdir()
    (project / "fmu.json").write_text(json.dumps(cfg, indent=1))
    # the model artifact, as resources/model/ (pythonfmu copies a folder under its name)
    files = artifact_files(model_dir)
    onnx_errors = dict(artifact.training.get("onnx_max_difference", {}))
    taken = graph_inputs(artifact) if physics else set()
    if rebuild_dynamics:
        graphs, errors = dynamics_graphs(artifact, work / "graphs")
        files.update(graphs)
        onnx_errors.update(errors)
        taken = _session_inputs(graphs["resources/onnx/rhs.onnx"])
    if taken & set(LOADS):
        model = artifact.model
        arrays = {"f_B": model.f_B, "f_C": model.f_C, "spring_D": model.springs.D, "spring_e": model.springs.e}
        with open(project / "loads.npz", "wb") as fh:
            np.savez(fh, **{k: np.asarray(v, dtype=np.float64) for k, v in arrays.items() if k in taken})
    for name, data in files.items():
        target = project / MODEL_PREFIX.removeprefix("resources/") / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    script = work / f"{module}.py"
    script.write_text(render("pythonfmu_slave.py.in", class_name=ident, model_name=artifact.mechanism.name,
                             mc2fmu_version=__version__, model_prefix=MODEL_PREFIX.removeprefix("resources/"),
                             parameters=_module_source(parameters),
                             local_linear=_module_source(local_linear), motion=_motion_source(artifact, motion),
                             envelope=_envelope_source(artifact), poses=_poses_source()))
    built = work / "pythonfmu.fmu"
    cmd = [sys.executable, "-m", "pythonfmu", "build", "-f", str(script), "-d", str(built), "--no-external-tool",
           "--handle-state", "--serialize-state", *map(str, sorted(project.iterdir()))]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    if proc.returncode != 0 or not built.exists():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise ExportError(f"pythonfmu could not build the FMU (exit {proc.returncode}):\n{tail}")
    with zipfile.ZipFile(built) as z:
        members = {n: z.read(n) for n in z.namelist() if not n.endswith("/")}
    guid = ElementTree.fromstring(members["modelDescription.xml"]).get("guid")
    members["modelDescription.xml"] = model_description_fmi2(
        fmu_variables(artifact, physics=physics, motion=motion), model_name=artifact.mechanism.name,
        model_identifier=ident, guid=guid,
        description=artifact.description, generation_tool=f"mc2fmu {__version__} (pythonfmu backend)",
        stop_time=cfg["stop_time"], step_size=cfg["dt"], log_categories=LOG_CATEGORIES)
    if physics:  # the mechanism whose parameters it starts with (what `validate` compares a file with)
        members[MECHANISM_MEMBER] = artifact_members(model_dir, artifact)[MECHANISM_MEMBER]
    write_zip(out, members)
    return {"onnx_max_difference": onnx_errors, "module": module,
            "model_identifier": ident, "physical_parameters": physics,
            "variables": len(fmu_variables(artifact, physics=physics, motion=motion))}


def _motion_source(artifact, motion: bool) -> str:
    """The slave's ``_motion_outputs(x, xd, theta)``: the motion outputs printed from
    :func:`mc2fmu.models.motion.motion_outputs` (an empty list without them)."""
    if not motion:
        return textwrap.indent("def _motion_outputs(x, xd, theta):\n    return []", "    ")
    model = artifact.decoder_model
    geometry = MotionGeometry.of(artifact.layout, model.springs.D, model.springs.e, model.springs.laws)
    graph = motion_traced(geometry, artifact.layout.size, len(parameter_vector(artifact.mechanism)))
    return textwrap.indent(emit_python(graph, "_motion_outputs", ("x", "xd", "theta")), "    ")


def _poses_source() -> str:
    """The slave's ``_pose_body(p, g)``: one body's origin and quaternion printed from
    :func:`mc2fmu.models.poses.traced` (the native FMU's text)."""
    return textwrap.indent(emit_python(poses_traced(), "_pose_body", ("p", "g")), "    ")


def _envelope_source(artifact) -> str:
    """The slave's ``_envelope_distance(v)``: the training envelope's distance printed from
    :func:`mc2fmu.models.envelope.traced` (a one-item list)."""
    return textwrap.indent(emit_python([envelope_traced(artifact.envelope)[1]], "_envelope_distance", ("v",)), "    ")


def dynamics_graphs(artifact, work: Path) -> tuple[dict[str, bytes], dict[str, float]]:
    """The rhs and step graphs of ``artifact``'s run-time model (a physical variant's), with
    today's inputs, by their artifact file names, checked against torch as training checks
    them, and their max relative difference to torch by graph name.  For models whose graphs
    hold the input loads' and springs' maps as constants; needs torch."""
    try:
        from ...reducers.autoencoder.graphs import DYNAMICS_GRAPHS, onnx_graphs
        from ...reducers.autoencoder.torch_model import from_runtime
    except ImportError as exc:
        raise ExportError(f"{artifact.path}: this model's ONNX graphs hold the input loads and spring attachment points "
                          "as constants (it was trained before they were inputs), so a variant that moves them needs "
                          f"its graphs exported again, which needs torch ({exc}); export the variant with --backend "
                          "native, or train the model again") from None
    runtime = artifact.model
    graphs, errors = onnx_graphs(from_runtime(runtime), runtime, artifact.envelope, work, only=DYNAMICS_GRAPHS)
    return {f"resources/{name}": data for name, data in graphs.items()}, errors


def _session_inputs(data: bytes) -> set[str]:
    import onnxruntime as ort

    return {i.name for i in ort.InferenceSession(data, providers=["CPUExecutionProvider"]).get_inputs()}


def graph_inputs(artifact) -> set[str]:
    """The inputs the model's rhs and step graphs take (read from the graphs themselves; the
    empty set for a model without them).  Graphs that disagree are an :class:`ExportError`."""
    import onnxruntime as ort

    model = artifact.model
    if model.kind != "manifold":
        return set()
    taken = {}
    for graph in ("rhs", "step"):
        data = model.resources.get(f"onnx/{graph}.onnx")
        if data is None:
            return set()
        try:
            sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for a damaged graph
            raise ExportError(f"{artifact.path}: resources/onnx/{graph}.onnx cannot be read ({type(exc).__name__}); "
                              "train the model again") from None
        taken[graph] = {i.name for i in sess.get_inputs()} - {"q", "qd", "q_prev", "u"}
    if taken["rhs"] != taken["step"]:
        raise ExportError(f"{artifact.path}: the model's rhs and step graphs do not take the same physics inputs; "
                          "train the model again")
    return taken["rhs"]


def takes_physics(artifact) -> bool:
    """Whether the model's step and rhs graphs take the physics as inputs (models trained before
    they did hold it as constants): then its python FMU has the physical parameters.  Physics
    inputs on a mass matrix that is not natural coordinates' blocks are an :class:`ExportError`."""
    takes = "mass" in graph_inputs(artifact)
    if takes and getattr(artifact.model, "mass", np.zeros(0)).ndim != 3:
        raise ExportError(f"{artifact.path}: the model's dynamics graphs take physics inputs on a mass matrix that is "
                          "not natural coordinates' blocks; train the model again")
    return takes


def takes_geometry(artifact) -> bool:
    """Whether the dynamics graphs take every load and spring map the model has as inputs
    (:data:`LOADS`; a model without inputs and springs has none to take)."""
    model = artifact.model
    needed = ({"f_B", "f_C"} if model.n_u else set()) | ({"spring_D", "spring_e"} if len(model.springs) else set())
    return needed <= graph_inputs(artifact)
