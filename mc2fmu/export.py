"""FMU export: a trained model directory -> an FMI 2.0 co-simulation FMU.

Backends live in the string registry :data:`BACKENDS`.  ``python`` (pythonfmu): the slave
script is rendered from ``templates/pythonfmu_slave.py.in`` and runs the model's ONNX graphs
with onnxruntime; the importing process must provide Python with numpy and onnxruntime.

The model description is written by :mod:`mc2fmu.fmu_description` from the one variable
list (units, descriptions, no external tool, state handling) and replaces the one
pythonfmu generates.  The FMU file is written atomically: a complete FMU or nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import string
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from . import __version__
from .envelope import LEAVE_THRESHOLD
from .errors import ExportError
from .fmu_description import fmu_variables, model_description_fmi2
from .poses import atomic_output

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
LOG_CATEGORIES = {
    "logStatusWarning": "Warnings, e.g. the model leaving its training envelope.",
    "logStatusDiscard": "Steps the FMU could not take.",
    "logStatusError": "Errors: non-finite inputs, a failed step.",
    "logStatusFatal": "Fatal errors.",
    "logAll": "All messages.",
}


def _template(name: str) -> string.Template:
    path = TEMPLATES / name
    if not path.exists():
        raise ExportError(f"{path}: template missing; the mc2fmu installation is incomplete (reinstall it)")
    return string.Template(path.read_text())


def model_identifier(name: str) -> str:
    """A C identifier for the FMU (``modelIdentifier``, binary and class name)."""
    ident = re.sub(r"\W", "_", name)
    return f"mc2fmu_{ident}"


def model_digest(model_dir: Path) -> str:
    """A short hash of the model's files: the generated module's name is unique per model, so
    two mc2fmu FMUs never share a Python module in one process."""
    h = hashlib.sha256(__version__.encode())
    for name in ("model.json", "weights.npz"):
        h.update((model_dir / name).read_bytes())
    return h.hexdigest()[:12]


def runtime_config(artifact) -> dict[str, Any]:
    """``fmu.json``: everything model-specific the FMU's runtime reads."""
    env = artifact.envelope
    as_json = lambda a: [None if not (abs(v) < float("inf")) else float(v) for v in a]  # noqa: E731
    return {
        "model_identifier": model_identifier(artifact.mechanism.name),
        "mechanism": artifact.mechanism.name,
        "dt": artifact.dt,
        "stop_time": float(artifact.meta["training"]["duration"]),
        "dof": artifact.dof,
        "n_inputs": len(artifact.mechanism.inputs),
        "bodies": [{"name": b.name, "offset": b.offset, "length": b.length, "com": list(b.com)}
                   for b in artifact.layout.bodies],
        "envelope": {"lower": as_json(env.lower), "upper": as_json(env.upper), "leave_threshold": LEAVE_THRESHOLD},
        "variables": [v.to_dict() for v in fmu_variables(artifact)],
        "mc2fmu_version": __version__,
    }


def _rewrite_zip(src: Path, dst: Path, replace: dict[str, bytes]) -> None:
    """Copy ``src`` to ``dst`` with some members replaced (deterministic order and timestamps)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for name in sorted(zin.namelist()):
            data = replace.get(name, zin.read(name))
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)


def _export_python(artifact, model_dir: Path, work: Path, out: Path, fmi_version: int = 2,
                   interface: str = "cs") -> dict[str, Any]:
    from pythonfmu import FmuBuilder

    if fmi_version != 2 or interface != "cs":
        raise ExportError(f"--fmi {fmi_version} --interface {interface}: the python backend (pythonfmu) writes FMI 2.0 "
                          "co-simulation only; use --backend native for FMI 3.0 or model exchange")

    from .onnx_export import export_onnx

    graphs = work / "resources"
    errors = export_onnx(artifact, graphs)
    cfg = runtime_config(artifact)
    (graphs / "fmu.json").write_text(json.dumps(cfg, indent=1))
    shutil.copy(model_dir / "model.json", graphs / "model.json")
    ident = cfg["model_identifier"]
    module = f"{ident}_{model_digest(model_dir)}"
    script = work / "script" / f"{module}.py"
    script.parent.mkdir()
    script.write_text(_template("pythonfmu_slave.py.in").substitute(
        class_name=ident, model_name=artifact.mechanism.name, mc2fmu_version=__version__))
    built = work / "pythonfmu.fmu"
    try:
        FmuBuilder.build_FMU(script, dest=built, project_files=sorted(graphs.iterdir()),
                             needsExecutionTool=False, canGetAndSetFMUstate=True, canSerializeFMUstate=True)
    except Exception as exc:
        raise ExportError(f"pythonfmu could not build the FMU: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(module, None)
        if str(script.parent) in sys.path:
            sys.path.remove(str(script.parent))
    with zipfile.ZipFile(built) as z:
        guid = ElementTree.fromstring(z.read("modelDescription.xml")).get("guid")
    xml = model_description_fmi2(
        fmu_variables(artifact), model_name=artifact.mechanism.name, model_identifier=ident, guid=guid,
        description=f"mc2fmu reduced model of '{artifact.mechanism.name}': {artifact.dof} minimal coordinate(s), "
                    f"{artifact.meta['mode']}, step map {artifact.meta['architecture']['step_map']}",
        generation_tool=f"mc2fmu {__version__} (pythonfmu backend)", stop_time=cfg["stop_time"], step_size=cfg["dt"],
        log_categories=LOG_CATEGORIES)
    _rewrite_zip(built, out, {"modelDescription.xml": xml})
    return {"onnx_max_difference": errors, "module": module, "model_identifier": ident}


def _export_native(artifact, model_dir: Path, work: Path, out: Path, fmi_version: int = 2,
                   interface: str = "cs") -> dict[str, Any]:
    from .native import export_native  # lazily: the torch-free paths stay fast

    return export_native(artifact, model_dir, work, out, fmi_version=fmi_version, interface=interface)


#: backend name -> exporter(artifact, model_dir, work_dir, out_path, fmi_version=, interface=) -> summary
BACKENDS = {"python": _export_python, "native": _export_native}
FMI_VERSIONS = (2, 3)
INTERFACES = ("cs", "me", "both")


def export_fmu(model_dir: str | os.PathLike, out: str | os.PathLike, backend: str = "python", fmi_version: int = 2,
               interface: str = "cs") -> dict[str, Any]:
    """``mc2fmu export``: write ``out`` (.fmu) from a model directory; returns a summary.

    ``interface``: ``cs`` (co-simulation), ``me`` (model exchange) or ``both``.
    """
    from .artifact import load_model

    if fmi_version not in FMI_VERSIONS:
        raise ExportError(f"--fmi {fmi_version}: choose one of {', '.join(map(str, FMI_VERSIONS))}")
    if interface not in INTERFACES:
        raise ExportError(f"--interface {interface}: choose one of {', '.join(INTERFACES)}")
    out = Path(out)
    if out.suffix != ".fmu":
        raise ExportError(f"{out}: an FMU file name must end in .fmu")
    if backend not in BACKENDS:
        raise ExportError(f"backend '{backend}' is not available; choose one of {', '.join(BACKENDS)}")
    model_dir = Path(model_dir)
    artifact = load_model(model_dir)
    with tempfile.TemporaryDirectory(prefix="mc2fmu-export-") as tmp, atomic_output(out) as tmp_out:
        summary = BACKENDS[backend](artifact, model_dir, Path(tmp), Path(tmp_out), fmi_version=fmi_version,
                                    interface=interface)
    summary.setdefault("variables", len(fmu_variables(artifact)))
    summary.update({"fmu": str(out), "backend": backend, "fmi_version": fmi_version, "interface": interface})
    log.info("wrote %s (%s backend)", out, backend)
    return summary
