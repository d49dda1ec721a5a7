"""The FMU's public contract: one variable list, and the model description built from it.

Every backend (the pythonfmu one now, the native C one later) takes its variables, value
references, units, descriptions and start values from :func:`fmu_variables`; nothing is
numbered by hand.  Value references are the positions in that list.

Names (a public contract, kept stable):

* inputs: one per mechanism input, named as in the mechanism file (N or N.m);
* outputs: ``<body>.x|y|z`` (body-frame origin, m) and ``<body>.qw|qx|qy|qz`` (unit
  quaternion, scalar first, ``qw >= 0``) as in the pose export; ``q[i]``, ``qd[i]``
  (i = 1..dof); ``envelope`` (0 inside the training envelope, otherwise the largest
  excursion outside it in units of that channel's training span);
* parameters: ``q_start[i]``, ``qd_start[i]``, defaulting to the first training run's
  initial state.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from xml.etree.ElementTree import Element, SubElement, tostring
from xml.dom.minidom import parseString

#: unit name -> SI base-unit exponents (FMI 2 ``BaseUnit`` attributes)
UNITS: dict[str, dict[str, int]] = {
    "m": {"m": 1},
    "m/s": {"m": 1, "s": -1},
    "rad": {"rad": 1},
    "rad/s": {"rad": 1, "s": -1},
    "1/s": {"s": -1},
    "N": {"kg": 1, "m": 1, "s": -2},
    "N.m": {"kg": 1, "m": 2, "s": -2},
    "1": {},
}


@dataclass(frozen=True)
class Variable:
    name: str
    causality: str  # input | output | parameter
    variability: str  # continuous | fixed
    initial: str | None  # exact | calculated | None (inputs)
    unit: str
    description: str
    start: float | None  # None for calculated outputs
    role: str  # input | pose | q | qd | envelope | q_start | qd_start
    index: int  # position within its role (input channel, body*7+component, coordinate)

    def to_dict(self) -> dict:
        return asdict(self)


def _coordinate_units(artifact) -> tuple[list[str], list[str]]:
    """Units of ``q[i]`` and ``qd[i]``: an angle latent is in rad; a known coordinate that is a
    pose position is in m; anything else (a rotation-matrix entry, an autoencoder latent) is
    dimensionless."""
    q_units = []
    for i in range(artifact.dof):
        if artifact.angles[i]:
            q_units.append("rad")
        elif artifact.meta["coords"] and re.search(r"\.[xyz]$", artifact.meta["coords"][i]):
            q_units.append("m")
        else:
            q_units.append("1")
    qd_units = {"rad": "rad/s", "m": "m/s", "1": "1/s"}
    return q_units, [qd_units[u] for u in q_units]


def _coordinate_label(artifact, i: int) -> str:
    if artifact.meta["coords"]:
        return f"known minimal coordinate {artifact.meta['coords'][i]}"
    return f"learnt minimal coordinate {i + 1}" + (" (an angle)" if artifact.angles[i] else "")


def fmu_variables(artifact) -> list[Variable]:
    """The FMU's variables in value-reference order."""
    mech = artifact.mechanism
    init = artifact.meta["initial_state"]
    out: list[Variable] = []
    for k, inp in enumerate(mech.inputs):
        unit = "N" if inp.kind == "force" else "N.m"
        out.append(Variable(inp.name, "input", "continuous", None, unit,
                            f"{inp.kind} on {inp.body} along {list(inp.direction)} (global frame)", 0.0, "input", k))
    comps = [("x", "m", "origin x"), ("y", "m", "origin y"), ("z", "m", "origin z"), ("qw", "1", "quaternion w"),
             ("qx", "1", "quaternion x"), ("qy", "1", "quaternion y"), ("qz", "1", "quaternion z")]
    for b, body in enumerate(mech.bodies):
        for c, (suffix, unit, label) in enumerate(comps):
            out.append(Variable(f"{body.name}.{suffix}", "output", "continuous", "calculated", unit,
                                f"{body.name} body frame {label} (global frame)", None, "pose", 7 * b + c))
    q_units, qd_units = _coordinate_units(artifact)
    for i in range(artifact.dof):
        out.append(Variable(f"q[{i + 1}]", "output", "continuous", "calculated", q_units[i],
                            _coordinate_label(artifact, i), None, "q", i))
    for i in range(artifact.dof):
        out.append(Variable(f"qd[{i + 1}]", "output", "continuous", "calculated", qd_units[i],
                            f"time derivative of q[{i + 1}]", None, "qd", i))
    out.append(Variable("envelope", "output", "continuous", "calculated", "1",
                        "0 inside the training envelope of q, qd and the inputs; otherwise the largest "
                        "excursion outside it, in units of that channel's training span", None, "envelope", 0))
    for i in range(artifact.dof):
        out.append(Variable(f"q_start[{i + 1}]", "parameter", "fixed", "exact", q_units[i],
                            f"initial value of q[{i + 1}]", float(init["q"][i]), "q_start", i))
    for i in range(artifact.dof):
        out.append(Variable(f"qd_start[{i + 1}]", "parameter", "fixed", "exact", qd_units[i],
                            f"initial value of qd[{i + 1}]", float(init["qd"][i]), "qd_start", i))
    return out


def _fmt(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else "0.0"


def model_description_fmi2(variables: list[Variable], *, model_name: str, model_identifier: str, guid: str,
                           description: str, generation_tool: str, stop_time: float, step_size: float,
                           can_get_set_state: bool = True, can_serialize_state: bool = True,
                           log_categories: dict[str, str] | None = None) -> bytes:
    """An FMI 2.0 co-simulation ``modelDescription.xml`` for ``variables`` (value reference = index)."""
    root = Element("fmiModelDescription", {
        "fmiVersion": "2.0", "modelName": model_name, "guid": guid, "description": description,
        "generationTool": generation_tool, "variableNamingConvention": "structured", "numberOfEventIndicators": "0"})
    SubElement(root, "CoSimulation", {
        "modelIdentifier": model_identifier, "needsExecutionTool": "false",
        "canHandleVariableCommunicationStepSize": "true", "canInterpolateInputs": "false",
        "canBeInstantiatedOnlyOncePerProcess": "false", "canNotUseMemoryManagementFunctions": "true",
        "canGetAndSetFMUstate": str(can_get_set_state).lower(),
        "canSerializeFMUstate": str(can_serialize_state).lower()})
    used = sorted({v.unit for v in variables}, key=list(UNITS).index)
    units = SubElement(root, "UnitDefinitions")
    for u in used:
        unit = SubElement(units, "Unit", {"name": u})
        SubElement(unit, "BaseUnit", {k: str(e) for k, e in UNITS[u].items()})
    if log_categories:
        cats = SubElement(root, "LogCategories")
        for name, desc in log_categories.items():
            SubElement(cats, "Category", {"name": name, "description": desc})
    SubElement(root, "DefaultExperiment", {"startTime": "0.0", "stopTime": _fmt(stop_time), "stepSize": _fmt(step_size)})
    mv = SubElement(root, "ModelVariables")
    for vr, v in enumerate(variables):
        attrs = {"name": v.name, "valueReference": str(vr), "description": v.description, "causality": v.causality,
                 "variability": v.variability}
        if v.initial is not None:
            attrs["initial"] = v.initial
        sv = SubElement(mv, "ScalarVariable", attrs)
        real = {"unit": v.unit}
        if v.start is not None:
            real["start"] = _fmt(v.start)
        SubElement(sv, "Real", real)
    ms = SubElement(root, "ModelStructure")
    outputs = [i for i, v in enumerate(variables) if v.causality == "output"]
    params = [i for i, v in enumerate(variables) if v.causality == "parameter"]
    inputs = [i for i, v in enumerate(variables) if v.causality == "input"]
    if outputs:
        o = SubElement(ms, "Outputs")
        for i in outputs:
            # co-simulation: outputs follow the internal state, no direct feed-through
            SubElement(o, "Unknown", {"index": str(i + 1), "dependencies": ""})
        iu = SubElement(ms, "InitialUnknowns")
        deps = " ".join(str(i + 1) for i in sorted(params + inputs))
        for i in outputs:
            SubElement(iu, "Unknown", {"index": str(i + 1), "dependencies": deps})
    return parseString(tostring(root, "UTF-8")).toprettyxml(indent="  ", encoding="UTF-8")
