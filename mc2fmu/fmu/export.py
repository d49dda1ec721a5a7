"""``mc2fmu export``: a model directory -> an FMU, by one of the backends of :data:`BACKENDS`.

* ``python``: FMI 2.0 co-simulation with pythonfmu; runs the model's ONNX graphs with
  onnxruntime in the importing Python (:mod:`.backends.python`);
* ``native``: generated C99, compiled here; FMI 2.0 and 3.0, co-simulation, model exchange or
  both; the importer needs no Python (:mod:`.backends.native`).

Both write the model description from the one variable list (:mod:`.description`) and embed
the model artifact (``resources/model/``).  The FMU file is written atomically: a complete
FMU or nothing.  Importing this module imports neither torch nor onnx; a backend is imported
when it is used.
"""

from __future__ import annotations

import importlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ExportError
from ..files import atomic_output
from ..models.artifact import load_artifact
from .description import fmu_variables

log = logging.getLogger(__name__)

#: backend name -> (description, "module:function", the (FMI version, interface) pairs it writes,
#: None: all; the reducers whose models it exports); the function takes (artifact, model_dir,
#: work_dir, out_path, fmi_version=, interface=) and returns a summary
BACKENDS = {
    "python": ("pythonfmu + onnxruntime, FMI 2 co-simulation", "mc2fmu.fmu.backends.python:export_python",
               {(2, "cs")}, ("autoencoder", "node", "local-pca")),
    "native": ("generated C compiled with $CC, FMI 2/3, co-simulation and/or model exchange",
               "mc2fmu.fmu.backends.native:export_native", None, ("autoencoder", "node", "local-pca")),
}
#: reducers whose models are discrete-time (no continuous right-hand side): co-simulation only
COSIMULATION_ONLY = {"local-pca": "its Algorithm 1 switches clusters between steps"}
#: the default of export, convert and demo: the native FMU is the one no host can be crashed by.
#: The python backend runs in the host's interpreter through pythonfmu 0.7, whose wrapper leaks
#: about 1.2 kB of the host's memory per instantiation (its findClass lists and reprs the slave
#: class's MRO every time and frees none of it; docs/fmus.md, "The python backend").
DEFAULT_BACKEND = "native"
FMI_VERSIONS = (2, 3)
INTERFACES = {"cs": "co-simulation", "me": "model exchange", "both": "co-simulation and model exchange"}


def exported_by(reducer: str) -> list[str]:
    """The backends that export the models of ``reducer``."""
    return [name for name, entry in BACKENDS.items() if reducer in entry[3]]


def export_problems(out: str | os.PathLike, backend: str, fmi_version: int, interface: str,
                    reducer: str | None = None, platforms: str | None = None) -> list[str]:
    """What is wrong with these export options (empty: nothing), checked before any work;
    ``reducer``: the reducer whose model is exported, when known; ``platforms``: the native
    backend's ``--platforms`` (None: the default)."""
    problems = []
    if platforms is not None and backend != "native":
        problems.append(f"--platforms {platforms}: only the native backend builds binaries for other platforms "
                        f"(the {backend} backend's FMU runs wherever its Python packages do)")
    elif platforms is not None:
        from .platforms import platform_problems

        problems += platform_problems(platforms)
    if fmi_version not in FMI_VERSIONS:
        problems.append(f"--fmi {fmi_version}: choose one of {', '.join(map(str, FMI_VERSIONS))}")
    if interface not in INTERFACES:
        problems.append(f"--interface {interface}: choose one of {', '.join(INTERFACES)}")
    if Path(out).suffix != ".fmu":
        problems.append(f"{out}: an FMU file name must end in .fmu")
    if backend not in BACKENDS:
        problems.append(f"backend '{backend}' is not available; choose one of {', '.join(BACKENDS)}")
    elif not problems and BACKENDS[backend][2] is not None and (fmi_version, interface) not in BACKENDS[backend][2]:
        problems.append(f"--fmi {fmi_version} --interface {interface}: the {backend} backend writes FMI 2.0 "
                        "co-simulation only; use --backend native for FMI 3.0 or model exchange")
    if reducer in COSIMULATION_ONLY and interface != "cs":
        problems.append(f"--interface {interface}: a '{reducer}' model is discrete-time ({COSIMULATION_ONLY[reducer]}); "
                        "export it for co-simulation (--interface cs)")
    if backend in BACKENDS and reducer is not None and reducer not in BACKENDS[backend][3]:
        others = exported_by(reducer)
        problems.append(f"the {backend} backend does not export models of the '{reducer}' reducer; "
                        + (f"use --backend {' or '.join(others)}" if others else
                           "no backend does so far: run it with `mc2fmu simulate`"))
    return problems


def export_fmu(model_dir: str | os.PathLike, out: str | os.PathLike, backend: str = DEFAULT_BACKEND, fmi_version: int = 2,
               interface: str = "cs", platforms: str | None = None,
               mechanism: str | os.PathLike | None = None) -> dict[str, Any]:
    """Write ``out`` (.fmu) from a model directory; returns a summary.

    ``interface``: ``cs`` (co-simulation), ``me`` (model exchange) or ``both``; ``platforms``
    (native backend): a comma-separated list of platform tuples, ``auto`` or ``all``
    (:func:`mc2fmu.fmu.platforms.resolve`; None: ``$MC2FMU_PLATFORMS``, else ``auto``);
    ``mechanism``: a physical variant of the trained mechanism file whose parameters the FMU
    starts with (:meth:`~mc2fmu.models.artifact.ModelArtifact.for_mechanism`).
    """
    problems = export_problems(out, backend, fmi_version, interface, platforms=platforms)
    if problems:
        raise ExportError(problems)
    out = Path(out)
    model_dir = Path(model_dir)
    artifact = load_artifact(model_dir)
    problems = export_problems(out, backend, fmi_version, interface, artifact.reducer, platforms)
    if problems:
        raise ExportError([f"{model_dir}: {p}" for p in problems])
    changed, rebuild = [], False
    if mechanism is not None:
        from ..mechanics.mechanism import load_mechanism

        artifact, changed = artifact.for_mechanism(load_mechanism(mechanism), mechanism)
        if changed and backend == "python":
            from .backends.python import GRAPH_CONSTANTS, takes_physics

            if not takes_physics(artifact):
                raise ExportError(f"--mechanism {mechanism}: this model's ONNX graphs hold the trained physical "
                                  "parameters (it was trained before they took them as inputs); export the variant "
                                  "with --backend native, or train the model again")
            # input directions and points, spring attachment points: constants of the dynamics graphs
            # (an off-diagonal inertia entry without a parameter is in the mass blocks they take)
            rebuild = any(c.item.endswith(GRAPH_CONSTANTS) for c in changed)
    module, _, func = BACKENDS[backend][1].partition(":")
    exporter = getattr(importlib.import_module(module), func)
    with tempfile.TemporaryDirectory(prefix="mc2fmu-export-") as tmp, atomic_output(out) as tmp_out:
        extra = {"platforms": platforms} if backend == "native" else {"rebuild_dynamics": rebuild}
        summary = exporter(artifact, model_dir, Path(tmp), Path(tmp_out), fmi_version=fmi_version, interface=interface,
                           **extra)
    summary.setdefault("variables", len(fmu_variables(artifact)))
    summary.update({"fmu": str(out), "backend": backend, "fmi_version": fmi_version, "interface": interface,
                    "changed": changed})
    log.info("wrote %s (%s backend)", out, backend)
    return summary
