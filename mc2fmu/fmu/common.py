"""What both FMU backends share: the templates (package data), identifiers, the runtime
configuration, the embedded model artifact and the log categories."""

from __future__ import annotations

import re
import string
from importlib import resources
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ExportError
from ..files import digest, json_safe
from ..models.artifact import FILES as ARTIFACT_FILES
from ..models.envelope import LEAVE_THRESHOLD
from .description import fmu_variables

#: where an mc2fmu FMU carries its model artifact (what `mc2fmu validate` and `simulate` read)
MODEL_PREFIX = "resources/model/"
#: the mechanism whose physical parameters an FMU starts with (the trained one, or the variant
#: `export --mechanism` gave); `validate` compares a mechanism file with it
MECHANISM_MEMBER = "resources/mechanism.json"
LOG_CATEGORIES = {
    "logStatusWarning": "Warnings, e.g. the model leaving its training envelope.",
    "logStatusDiscard": "Steps the FMU could not take.",
    "logStatusError": "Errors: non-finite inputs, a failed step.",
    "logStatusFatal": "Fatal errors.",
    "logAll": "All messages.",
}


def require_manifold(artifact):
    """The artifact's decoder-manifold model (node and local-PCA models are taken by each
    backend itself; any other kind is refused here with a message)."""
    from ..models.manifold import ManifoldModel

    model = artifact.model
    if not isinstance(model, ManifoldModel):
        from ..capabilities import KINDS

        raise ExportError(f"{artifact.path}: a '{artifact.reducer}' model (kind '{model.kind}'); FMUs are exported "
                          f"for the {', '.join(KINDS)} reducers' models; run this one with `mc2fmu simulate`")
    return model


def template_path(name: str) -> Path:
    """A template shipped inside the package (``mc2fmu/fmu/templates/``)."""
    path = Path(str(resources.files("mc2fmu.fmu") / "templates" / name))
    if not path.exists():
        raise ExportError(f"{path}: template missing; the mc2fmu installation is incomplete (reinstall it)")
    return path


def render(name: str, **values: Any) -> str:
    return string.Template(template_path(name).read_text()).substitute(**values)


def model_identifier(name: str) -> str:
    """A C identifier for the FMU (``modelIdentifier``, binary and class name)."""
    return "mc2fmu_" + re.sub(r"\W", "_", name)


def model_digest(model_dir: Path, *extra: str) -> str:
    """A hash of the model's files (and ``extra``): names that must differ between models."""
    return digest(__version__, *extra, *((Path(model_dir) / n).read_bytes() for n in ARTIFACT_FILES))


def artifact_members(model_dir: Path, artifact=None) -> dict[str, bytes]:
    """The model directory's own files (:func:`~mc2fmu.models.artifact.artifact_files`) as FMU
    members under :data:`MODEL_PREFIX`; with ``artifact``, also its mechanism (the physics the
    FMU runs) as :data:`MECHANISM_MEMBER`."""
    import json

    from ..models.artifact import artifact_files

    members = {MODEL_PREFIX + name: data for name, data in artifact_files(model_dir).items()}
    if artifact is not None:
        members[MECHANISM_MEMBER] = json.dumps(json_safe(artifact.mechanism.to_dict()), indent=1).encode()
    return members


def runtime_config(artifact, physics: bool = False, motion: bool = False) -> dict[str, Any]:
    """``fmu.json``: everything model-specific the python backend's runtime reads; ``physics``:
    with the physical parameters (:func:`physics_config`); ``motion``: with the motion outputs
    (the parameter vector they read where the FMU has no physical parameters)."""
    env = artifact.envelope
    cfg = {
        "model_identifier": model_identifier(artifact.mechanism.name),
        "kind": artifact.model.kind,
        "mechanism": artifact.mechanism.name,
        "dt": artifact.dt,
        "stop_time": artifact.stop_time,
        "dof": artifact.dof,
        "angles": [bool(a) for a in artifact.angles],
        "n_inputs": artifact.n_u,
        "bodies": [{"name": b.name, "offset": b.offset, "length": b.length, "com": list(b.com)}
                   for b in artifact.layout.bodies],
        "envelope": json_safe({"lower": env.lower.tolist(), "upper": env.upper.tolist(), "leave_threshold": LEAVE_THRESHOLD}),
        "variables": [v.to_dict() for v in fmu_variables(artifact, physics=physics, motion=motion)],
        "mc2fmu_version": __version__,
    }
    if physics:
        cfg["physics"] = physics_config(artifact)
    if motion:
        from ..mechanics.variants import parameter_vector

        cfg["motion"] = {"theta": parameter_vector(artifact.mechanism).tolist()}
    return cfg


def physics_config(artifact) -> dict[str, Any]:
    """What a runtime needs to form the physics of a parameter set and check it
    (:mod:`mc2fmu.mechanics.parameters`): every slot's name and start value, the bodies' names
    and the trained layout (point lengths and centres), the mechanism file's limits and the
    configurations where the reduced mass must stay regular."""
    from ..mechanics.variants import parameter_limits, parameter_names, parameter_vector
    from ..models.artifact import mass_check_configurations

    return json_safe({
        "names": parameter_names(artifact.mechanism),
        "start": parameter_vector(artifact.mechanism).tolist(),
        "bodies": [b.name for b in artifact.mechanism.bodies],
        "lengths": [b.length for b in artifact.layout.bodies],
        "coms": [list(b.com) for b in artifact.layout.bodies],
        "limits": parameter_limits(),
        "mass_check_q": mass_check_configurations(artifact.envelope, artifact.model).tolist(),
    })
