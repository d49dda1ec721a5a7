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

from ..capabilities import BACKENDS, DEFAULT_BACKEND, FMI_VERSIONS, INTERFACES, exported_by, option_problems, require
from ..errors import ExportError
from ..files import atomic_output
from ..models.artifact import load_artifact
from .description import fmu_variables

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "FMI_VERSIONS", "INTERFACES", "export_fmu", "export_problems",
           "exported_by"]

log = logging.getLogger(__name__)


def export_problems(out: str | os.PathLike, backend: str, fmi_version: int, interface: str,
                    reducer: str | None = None, platforms: str | None = None, pairs: bool = True) -> list[str]:
    """What is wrong with these export options (empty: nothing), checked before any work;
    ``reducer``: the reducer whose model is exported, when known (what its models support is
    :mod:`mc2fmu.capabilities`' table); ``platforms``: the native backend's ``--platforms``
    (None: the default); ``pairs=False``: the (FMI version, interface) pair is left to the call
    that knows the reducer."""
    problems = []
    if platforms is not None and backend != "native":
        problems.append(f"--platforms {platforms}: only the native backend builds binaries for other platforms "
                        f"(the {backend} backend's FMU runs wherever its Python packages do)")
    elif platforms is not None:
        from .platforms import platform_problems

        problems += platform_problems(platforms)
    if Path(out).suffix != ".fmu":
        problems.append(f"{out}: an FMU file name must end in .fmu")
    return problems + option_problems("fmu", backend, fmi_version, interface, reducer, pairs)


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
    problems = export_problems(out, backend, fmi_version, interface, platforms=platforms, pairs=False)
    if problems:
        raise ExportError(problems)
    out = Path(out)
    model_dir = Path(model_dir)
    artifact = load_artifact(model_dir)
    problems = export_problems(out, backend, fmi_version, interface, artifact.reducer, platforms)
    if problems:
        raise ExportError([f"{model_dir}: {p}" for p in problems])
    require(artifact, "fmu", ExportError, backend=backend, fmi_version=fmi_version, interface=interface)
    changed, rebuild = [], False
    if mechanism is not None:
        from ..mechanics.mechanism import load_mechanism

        artifact, changed = artifact.for_mechanism(load_mechanism(mechanism), mechanism)
        if changed and backend == "python":
            from .backends.python import GRAPH_CONSTANTS, takes_geometry, takes_physics

            if not takes_physics(artifact):
                raise ExportError(f"--mechanism {mechanism}: this model's ONNX graphs hold the trained physical "
                                  "parameters (it was trained before they took them as inputs); export the variant "
                                  "with --backend native, or train the model again")
            # input directions and points, spring attachment points: inputs of the dynamics graphs
            # of models trained since they are (an off-diagonal inertia entry without a parameter
            # is in the mass blocks they take)
            # (a model trained before they were holds them as constants: its two graphs are exported
            # again from the variant, which needs torch)
            rebuild = any(c.item.endswith(GRAPH_CONSTANTS) for c in changed) and not takes_geometry(artifact)
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
