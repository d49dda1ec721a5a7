"""The FMU's public contract: one variable list, and the model description built from it.

Both backends (python: pythonfmu, FMI 2 co-simulation; native: generated C, FMI 2 and 3,
co-simulation and model exchange) take their variables, value references, units,
descriptions and start values from :func:`fmu_variables`; nothing is numbered by hand.  A
variable's value reference is its position in that list counted from 1
(:func:`value_reference`), in every FMI version and backend.

Names (a public contract, kept stable):

* inputs: one per mechanism input, named as in the mechanism file (N or N.m);
* outputs: ``<body>.x|y|z`` (body-frame origin, m) and ``<body>.qw|qx|qy|qz`` (unit
  quaternion, scalar first, ``qw >= 0``) as in the pose export; ``q[i]``, ``qd[i]``
  (i = 1..dof); ``envelope`` (0 inside the training envelope, otherwise the largest
  excursion outside it in units of that channel's training span);
* parameters: ``q_start[i]``, ``qd_start[i]``, defaulting to the first training run's
  initial state.

Backend- and interface-specific extras come *after* these, so the contract's value
references never move: model exchange adds the state derivatives ``der(q[i])`` and
``der(qd[i])`` (locals; ``q[i]``, ``qd[i]`` are then the continuous states), FMI 3 adds the
independent variable ``time``.  The python backend (FMI 2 co-simulation) has neither.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from xml.etree.ElementTree import Element, SubElement, tostring
from xml.dom.minidom import parseString

from ..mechanics.variants import physical_parameters
from ..models.motion import output_names

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
    "s": {"s": 1},
    "m/s2": {"m": 1, "s": -2},
    "rad/s2": {"rad": 1, "s": -2},
    "1/s2": {"s": -2},
    "kg": {"kg": 1},
    "kg.m2": {"kg": 1, "m": 2},
    "N/m": {"kg": 1, "s": -2},
    "N.s/m": {"kg": 1, "s": -1},
    "J": {"kg": 1, "m": 2, "s": -2},
}


@dataclass(frozen=True)
class Variable:
    name: str
    causality: str  # input | output | parameter | local (ME derivatives) | independent (FMI 3 time)
    variability: str  # continuous | fixed
    initial: str | None  # exact | calculated | None (inputs, time)
    unit: str
    description: str
    start: float | None  # None for calculated outputs
    role: str  # input | pose | q | qd | envelope | q_start | qd_start | der_q | der_qd | time | physics | motion
    index: int  # position within its role (input channel, body*7+component, coordinate, physics slot)
    derivative: int | None = None  # a state derivative: the position of its state in the list

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["derivative"] is None:  # the contract's variables serialise exactly as before
            del d["derivative"]
        return d


def _coordinate_units(artifact) -> tuple[list[str], list[str]]:
    """Units of ``q[i]`` and ``qd[i]``: an angle latent is in rad; a known coordinate that is a
    pose position is in m; anything else (a rotation-matrix entry, an autoencoder latent) is
    dimensionless."""
    q_units = []
    for i in range(artifact.dof):
        if artifact.angles[i]:
            q_units.append("rad")
        elif artifact.coordinates and re.search(r"\.[xyz]$", artifact.coordinates[i]):
            q_units.append("m")
        else:
            q_units.append("1")
    qd_units = {"rad": "rad/s", "m": "m/s", "1": "1/s"}
    return q_units, [qd_units[u] for u in q_units]


def _coordinate_label(artifact, i: int) -> str:
    if artifact.coordinates:
        return f"known minimal coordinate {artifact.coordinates[i]}"
    return f"learnt minimal coordinate {i + 1}" + (" (an angle)" if artifact.angles[i] else "")


def fmu_variables(artifact, *, model_exchange: bool = False, independent_time: bool = False,
                  physics: bool = False, motion: bool = False) -> list[Variable]:
    """The FMU's variables in value-reference order.

    Without options: the contract (every backend, FMI 2 co-simulation).  ``model_exchange``
    appends ``der(q[i])`` then ``der(qd[i])``; ``independent_time`` (FMI 3) appends ``time``;
    ``physics`` (decoder-manifold models; the python backend when the model's graphs take the
    physics as inputs) then appends the physical
    parameters of :func:`mc2fmu.mechanics.variants.physical_parameters`, started at the
    artifact's mechanism's values; ``motion`` last appends the motion outputs of
    :mod:`mc2fmu.models.motion` (each body's velocity and angular velocity, the kinetic and the
    potential energy).
    """
    mech = artifact.mechanism
    init = artifact.initial_state
    out: list[Variable] = []
    for k, inp in enumerate(mech.inputs):
        unit = "N" if inp.kind == "force" else "N.m"
        out.append(Variable(inp.name, "input", "continuous", None, unit,
                            f"{inp.kind} on {inp.body} along {[float(c) for c in inp.direction]} (global frame)", 0.0, "input", k))
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
                            f"initial value of q[{i + 1}]", float(init.q[i]), "q_start", i))
    for i in range(artifact.dof):
        out.append(Variable(f"qd_start[{i + 1}]", "parameter", "fixed", "exact", qd_units[i],
                            f"initial value of qd[{i + 1}]", float(init.qd[i]), "qd_start", i))
    if model_exchange:
        acc_units = {"rad/s": "rad/s2", "m/s": "m/s2", "1/s": "1/s2"}
        pos = {v.name: k for k, v in enumerate(out)}
        for i in range(artifact.dof):
            out.append(Variable(f"der(q[{i + 1}])", "local", "continuous", "calculated", qd_units[i],
                                f"time derivative of the state q[{i + 1}] (= qd[{i + 1}])", None, "der_q", i,
                                derivative=pos[f"q[{i + 1}]"]))
        for i in range(artifact.dof):
            out.append(Variable(f"der(qd[{i + 1}])", "local", "continuous", "calculated", acc_units[qd_units[i]],
                                f"time derivative of the state qd[{i + 1}] (the reduced acceleration)", None,
                                "der_qd", i, derivative=pos[f"qd[{i + 1}]"]))
    if independent_time:
        out.append(Variable("time", "independent", "continuous", None, "s", "simulation time", None, "time", 0))
    if physics:
        for p in physical_parameters(mech, learned_damping(artifact)):
            out.append(Variable(p.name, "parameter", "fixed", "exact", p.unit, p.description, float(p.value),
                                "physics", p.slot))
    if motion:
        for k, (name, unit, desc) in enumerate(output_names([b.name for b in mech.bodies])):
            out.append(Variable(name, "output", "continuous", "calculated", unit, desc, None, "motion", k))
    return out


def learned_damping(artifact) -> tuple[str, ...]:
    """The recorded springs whose damping a learned law was fitted beside (not parameters)."""
    laws = getattr(artifact.model, "springs", None)
    if laws is None or laws.laws is None:
        return ()
    return tuple(s.name for s in artifact.mechanism.springs if s.recorded)


def me_dependencies(variables: list[Variable]) -> dict[int, tuple[list[int], str]]:
    """Model exchange: what each output and state derivative depends on (positions in
    ``variables``) and how (an FMI ``dependenciesKind``): ``q[i]``, ``qd[i]`` are the states
    themselves and ``der(q[i]) = qd[i]`` (``constant``); poses depend on every ``q``; the
    accelerations and the envelope on every state and input (``dependent``)."""
    pos = {v.name: k for k, v in enumerate(variables)}
    qs = [k for k, v in enumerate(variables) if v.role == "q"]
    qds = [k for k, v in enumerate(variables) if v.role == "qd"]
    inputs = [k for k, v in enumerate(variables) if v.causality == "input"]
    deps: dict[int, tuple[list[int], str]] = {}
    for k, v in enumerate(variables):
        if v.role in ("q", "qd"):
            deps[k] = ([k], "constant")
        elif v.role == "der_q":
            deps[k] = ([pos[f"qd[{v.index + 1}]"]], "constant")
        elif v.role == "pose":
            deps[k] = (qs, "dependent")
        elif v.role == "motion":
            deps[k] = (qs + qds, "dependent")
        elif v.role in ("der_qd", "envelope"):
            deps[k] = (qs + qds + inputs, "dependent")
    return deps


def _fmt(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else "0.0"


def _source_files(parent: Element, files: list[str] | None) -> None:
    if files:
        sf = SubElement(parent, "SourceFiles")
        for f in files:
            SubElement(sf, "File", {"name": f})


def _units_categories_experiment(root: Element, variables: list[Variable], log_categories: dict[str, str] | None,
                                 stop_time: float, step_size: float) -> None:
    """The parts FMI 2 and FMI 3 share: unit definitions (of ``variables``' units), log
    categories and the default experiment."""
    units = SubElement(root, "UnitDefinitions")
    for u in sorted({v.unit for v in variables}, key=list(UNITS).index):
        unit = SubElement(units, "Unit", {"name": u})
        SubElement(unit, "BaseUnit", {k: str(e) for k, e in UNITS[u].items()})
    if log_categories:
        cats = SubElement(root, "LogCategories")
        for name, desc in log_categories.items():
            SubElement(cats, "Category", {"name": name, "description": desc})
    SubElement(root, "DefaultExperiment", {"startTime": "0.0", "stopTime": _fmt(stop_time), "stepSize": _fmt(step_size)})


def value_reference(position: int) -> int:
    """The value reference of the variable at ``position`` (from 0) in :func:`fmu_variables`:
    its position counted from 1, in every FMI version and backend.  So no FMI 3
    ``dependencies`` list names value reference 0 (which OMSimulator cannot load), and FMI 2's
    value references equal its 1-based variable indices."""
    return position + 1


def _variable_attrs(position: int, v: Variable) -> dict[str, str]:
    """The attributes FMI 2's ScalarVariable and FMI 3's Float64 share, of the variable at
    ``position`` (from 0)."""
    attrs = {"name": v.name, "valueReference": str(value_reference(position)), "description": v.description,
             "causality": v.causality,
             "variability": v.variability}
    if v.initial is not None:
        attrs["initial"] = v.initial
    return attrs


def model_description_fmi2(variables: list[Variable], *, model_name: str, model_identifier: str, guid: str,
                           description: str, generation_tool: str, stop_time: float, step_size: float,
                           can_get_set_state: bool = True, can_serialize_state: bool = True,
                           log_categories: dict[str, str] | None = None, co_simulation: bool = True,
                           model_exchange: bool = False, source_files: list[str] | None = None) -> bytes:
    """An FMI 2.0 ``modelDescription.xml`` for ``variables`` (``value_reference``):
    co-simulation (default), model exchange or both.  For model exchange ``variables`` must
    hold the state derivatives (``fmu_variables(..., model_exchange=True)``)."""
    root = Element("fmiModelDescription", {
        "fmiVersion": "2.0", "modelName": model_name, "guid": guid, "description": description,
        "generationTool": generation_tool, "variableNamingConvention": "structured", "numberOfEventIndicators": "0"})
    caps = {"canBeInstantiatedOnlyOncePerProcess": "false", "canNotUseMemoryManagementFunctions": "true",
            "canGetAndSetFMUstate": str(can_get_set_state).lower(),
            "canSerializeFMUstate": str(can_serialize_state).lower()}
    if model_exchange:
        me = SubElement(root, "ModelExchange", {"modelIdentifier": model_identifier, "needsExecutionTool": "false",
                                                "completedIntegratorStepNotNeeded": "false", **caps,
                                                "providesDirectionalDerivative": "true"})
        _source_files(me, source_files)
    if co_simulation:
        cs = SubElement(root, "CoSimulation", {
            "modelIdentifier": model_identifier, "needsExecutionTool": "false",
            "canHandleVariableCommunicationStepSize": "true", "canInterpolateInputs": "false", **caps})
        _source_files(cs, source_files)
    _units_categories_experiment(root, [v for v in variables if v.causality != "independent"], log_categories,
                                 stop_time, step_size)
    mv = SubElement(root, "ModelVariables")
    for k, v in enumerate(variables):
        attrs = _variable_attrs(k, v)
        sv = SubElement(mv, "ScalarVariable", attrs)
        real = {"unit": v.unit}
        if v.start is not None:
            real["start"] = _fmt(v.start)
        if v.derivative is not None:
            real["derivative"] = str(v.derivative + 1)
        SubElement(sv, "Real", real)
    ms = SubElement(root, "ModelStructure")
    outputs = [i for i, v in enumerate(variables) if v.causality == "output"]
    params = [i for i, v in enumerate(variables) if v.causality == "parameter"]
    inputs = [i for i, v in enumerate(variables) if v.causality == "input"]
    derivatives = [i for i, v in enumerate(variables) if v.derivative is not None]
    if not model_exchange:
        if outputs:
            o = SubElement(ms, "Outputs")
            for i in outputs:
                # co-simulation: outputs follow the internal state, no direct feed-through
                SubElement(o, "Unknown", {"index": str(i + 1), "dependencies": ""})
            iu = SubElement(ms, "InitialUnknowns")
            deps = " ".join(str(i + 1) for i in sorted(params + inputs))
            for i in outputs:
                SubElement(iu, "Unknown", {"index": str(i + 1), "dependencies": deps})
    else:
        # model exchange (and both): outputs and derivatives with their dependencies on the
        # states and inputs; initial unknowns on every known (dependencies left out)
        deps = me_dependencies(variables)

        def unknown(parent, i):
            on, kind = deps[i]
            SubElement(parent, "Unknown", {"index": str(i + 1), "dependencies": " ".join(str(j + 1) for j in on),
                                           "dependenciesKind": " ".join([kind] * len(on))})
        if outputs:
            o = SubElement(ms, "Outputs")
            for i in outputs:
                unknown(o, i)
        d = SubElement(ms, "Derivatives")
        for i in derivatives:
            unknown(d, i)
        iu = SubElement(ms, "InitialUnknowns")
        for i in sorted(set(outputs) | set(derivatives)):
            SubElement(iu, "Unknown", {"index": str(i + 1)})
    return parseString(tostring(root, "UTF-8")).toprettyxml(indent="  ", encoding="UTF-8")


def model_description_fmi3(variables: list[Variable], *, model_name: str, model_identifier: str,
                           instantiation_token: str, description: str, generation_tool: str, stop_time: float,
                           step_size: float, log_categories: dict[str, str] | None = None,
                           co_simulation: bool = True, model_exchange: bool = False) -> bytes:
    """An FMI 3.0 ``modelDescription.xml`` (Float64 variables, ``value_reference``) for
    ``fmu_variables(..., independent_time=True[, model_exchange=...])``."""
    root = Element("fmiModelDescription", {
        "fmiVersion": "3.0", "modelName": model_name, "instantiationToken": instantiation_token,
        "description": description, "generationTool": generation_tool, "variableNamingConvention": "structured"})
    caps = {"modelIdentifier": model_identifier, "needsExecutionTool": "false",
            "canBeInstantiatedOnlyOncePerProcess": "false", "canGetAndSetFMUState": "true",
            "canSerializeFMUState": "true"}
    if model_exchange:
        SubElement(root, "ModelExchange", {**caps, "needsCompletedIntegratorStep": "true",
                                           "providesDirectionalDerivatives": "true"})
    if co_simulation:
        SubElement(root, "CoSimulation", {**caps, "canHandleVariableCommunicationStepSize": "true",
                                          "providesIntermediateUpdate": "false", "hasEventMode": "false"})
    _units_categories_experiment(root, variables, log_categories, stop_time, step_size)
    mv = SubElement(root, "ModelVariables")
    for k, v in enumerate(variables):
        attrs = _variable_attrs(k, v)
        attrs["unit"] = v.unit
        if v.start is not None:
            attrs["start"] = _fmt(v.start)
        if v.derivative is not None:
            attrs["derivative"] = str(value_reference(v.derivative))  # FMI 3: the state's value reference
        SubElement(mv, "Float64", attrs)
    ms = SubElement(root, "ModelStructure")
    outputs = [i for i, v in enumerate(variables) if v.causality == "output"]
    derivatives = [i for i, v in enumerate(variables) if v.derivative is not None]
    deps = me_dependencies(variables) if model_exchange else {}

    def unknown(tag, i):
        if not model_exchange:  # co-simulation: outputs follow the internal state, no direct feed-through
            SubElement(ms, tag, {"valueReference": str(value_reference(i)), "dependencies": ""})
            return
        on, kind = deps[i]
        SubElement(ms, tag, {"valueReference": str(value_reference(i)),
                             "dependencies": " ".join(str(value_reference(j)) for j in on),
                             "dependenciesKind": " ".join([kind] * len(on))})
    for i in outputs:
        unknown("Output", i)
    for i in derivatives:
        unknown("ContinuousStateDerivative", i)
    for i in sorted(set(outputs) | set(derivatives)):
        SubElement(ms, "InitialUnknown", {"valueReference": str(value_reference(i))})
    return parseString(tostring(root, "UTF-8")).toprettyxml(indent="  ", encoding="UTF-8")
