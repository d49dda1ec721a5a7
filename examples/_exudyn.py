"""Building and solving a :class:`~examples._model.Model` in Exudyn.

Every body is an ``ObjectRigidBody`` on an Euler-parameter node, created in its reference
pose (the static equilibrium) at rest; joints are exact index-3 constraints; each spring is an
``ObjectConnectorSpringDamper`` between two ``MarkerBodyPosition`` markers (its force law is the
mechanism file's, tension ``k (l - length) + c ldot`` along the line: checked against closed-
form and scipy solutions in tests/test_reference.py); each input is a ``LoadForceVector`` /
``LoadTorqueVector`` with a global direction (``bodyFixed=False``) whose value comes from a
Python user function; a joint friction (not in the mechanism file) is a
``TorsionalSpringDamper`` whose user function is the friction law.  The solver is generalized-alpha (spectral radius 0.95) at a fixed step;
sensors store the output every ``output_step``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ._model import JOINT_AXES, Model

log = logging.getLogger(__name__)

SPECTRAL_RADIUS = 0.95


def _exudyn():
    try:
        import exudyn
    except ImportError as exc:  # the engine is an optional dependency (extra "examples")
        raise ImportError("the reference examples need Exudyn: pip install 'exudyn>=1.13'") from exc
    return exudyn


@dataclass
class Built:
    """An assembled Exudyn system and the handles needed to read it."""

    mbs: object
    container: object  # keeps the SystemContainer (owner of mbs) alive
    body_objects: list
    loads: list
    sensors: dict  # name -> list of sensor indices (one per body or per input)


def build(model: Model, signals: Sequence[Callable[[float], float]], sensors: Sequence[str] = ()) -> Built:
    """Create the mechanism in a new Exudyn system, driven by one scalar signal per input.

    ``sensors`` names what to record: ``"poses"`` (origin, rotation, COM velocity, angular
    velocity, kinetic energy per body, and every load), ``"input_acceleration"`` (the
    acceleration of each input's application point along its direction).
    """
    exu = _exudyn()
    import exudyn.itemInterface as eii
    from exudyn.utilities import RigidBodyInertia

    container = exu.SystemContainer()
    mbs = container.AddSystem()
    ground = mbs.CreateGround()
    objects = {"ground": ground}
    for b in model.bodies:
        inertia = RigidBodyInertia(b.mass, b.inertia_matrix, np.asarray(b.com, dtype=float), inertiaTensorAtCOM=True)
        objects[b.name] = mbs.CreateRigidBody(
            name=b.name,
            referencePosition=list(b.position),
            referenceRotationMatrix=b.rotation,
            inertia=inertia,
            gravity=list(model.gravity),
            nodeType=exu.NodeType.RotationEulerParameters,
            graphicsDataList=[],
        )

    for j in model.joints:
        items = [objects[j.bodies[0]], objects[j.bodies[1]]]
        p = list(j.position)
        if j.kind == "revolute":
            mbs.CreateRevoluteJoint(name=j.name, itemNumbers=items, position=p, axis=list(j.axes[:, 2]))
        elif j.kind == "prismatic":
            mbs.CreatePrismaticJoint(name=j.name, itemNumbers=items, position=p, axis=list(j.axes[:, 0]))
        elif j.kind == "spherical":
            mbs.CreateSphericalJoint(name=j.name, itemNumbers=items, position=p)
        else:
            trans, rot = JOINT_AXES[j.kind]
            mbs.CreateGenericJoint(
                name=j.name, itemNumbers=items, position=p, rotationMatrixAxes=j.axes, constrainedAxes=list(trans + rot)
            )

    for s in model.springs:  # ground markers sit on the ground object, whose frame is the global one
        extra = {}
        if not s.linear:  # its law as the connector's user function (deltaL = l - reference length)
            extra["springForceUserFunction"] = (
                lambda mbs, t, item, stretch, ldot, stiffness, damping, force, s=s: float(s.tension(stretch, ldot)))
        mbs.CreateSpringDamper(
            name=s.name,
            itemNumbers=[objects[s.body_a], objects[s.body_b]],
            localPosition0=[float(c) for c in s.point_a],
            localPosition1=[float(c) for c in s.point_b],
            referenceLength=float(s.length),
            stiffness=float(s.stiffness),
            damping=float(s.damping),
            show=False,
            **extra,
        )

    for fr in model.frictions:  # a torsional connector whose user function is the friction law
        coulomb, viscous, v0 = float(fr.coulomb), float(fr.viscous), float(fr.v0)

        def friction(mbs, t, item, rotation, omega, stiffness, damping, offset, c=coulomb, d=viscous, v=v0):
            return c * math.tanh(omega / v) + d * omega  # the connector's torque resists omega

        mbs.CreateTorsionalSpringDamper(
            name=fr.name, itemNumbers=[ground, objects[fr.body]], position=[float(c) for c in fr.position],
            axis=[float(c) for c in fr.axis], springTorqueUserFunction=friction, show=False,
        )

    loads = []
    for inp, signal in zip(model.inputs, signals, strict=True):
        loads.append(_create_load(mbs, objects[inp.body], inp, signal))

    body_objects = [objects[b.name] for b in model.bodies]
    rec: dict[str, list] = {}

    def body_sensor(obj, kind, local=(0.0, 0.0, 0.0)):
        return mbs.AddSensor(
            eii.SensorBody(
                bodyNumber=obj,
                localPosition=list(local),
                outputVariableType=getattr(exu.OutputVariableType, kind),
                storeInternal=True,
                writeToFile=False,
            )
        )

    if "poses" in sensors:
        rec["origin"] = [body_sensor(o, "Position") for o in body_objects]
        rec["rotation"] = [body_sensor(o, "RotationMatrix") for o in body_objects]
        rec["velocity_com"] = [body_sensor(o, "Velocity", b.com) for o, b in zip(body_objects, model.bodies)]
        rec["omega"] = [body_sensor(o, "AngularVelocity") for o in body_objects]
        rec["kinetic_energy"] = [body_sensor(o, "KineticEnergy") for o in body_objects]
        rec["load"] = [mbs.AddSensor(eii.SensorLoad(loadNumber=ld, storeInternal=True, writeToFile=False)) for ld in loads]
    if "input_acceleration" in sensors:
        rec["input_acceleration"] = [
            body_sensor(objects[inp.body], "Acceleration", inp.point)
            if inp.kind == "force"
            else body_sensor(objects[inp.body], "AngularAcceleration")
            for inp in model.inputs
        ]
    mbs.Assemble()
    return Built(mbs=mbs, container=container, body_objects=body_objects, loads=loads, sensors=rec)


def _create_load(mbs, body, inp, signal):
    direction = [float(c) for c in inp.direction]

    def load_vector(mbs, t, load):
        u = signal(t)
        return [u * direction[0], u * direction[1], u * direction[2]]

    if inp.kind == "torque":
        return mbs.CreateTorque(name=inp.name, itemNumber=body, bodyFixed=False, loadVectorUserFunction=load_vector)
    return mbs.CreateForce(
        name=inp.name,
        itemNumber=body,
        localPosition=[float(c) for c in inp.point],
        bodyFixed=False,
        loadVectorUserFunction=load_vector,
    )


def settings(t_end: float, step: float, output_step: float):
    """Generalized-alpha at a fixed step, sensors every ``output_step``, no files written."""
    exu = _exudyn()
    n_steps = int(round(t_end / step))
    if abs(n_steps * step - t_end) > 1e-9 * t_end:
        raise ValueError(f"t_end = {t_end} is not a whole number of steps of {step}")
    s = exu.SimulationSettings()
    s.timeIntegration.endTime = t_end
    s.timeIntegration.numberOfSteps = n_steps
    s.timeIntegration.generalizedAlpha.spectralRadius = SPECTRAL_RADIUS
    s.timeIntegration.adaptiveStep = False  # a reference run keeps its step or fails loudly
    s.timeIntegration.verboseMode = 0
    s.solution.file.write = False
    s.solution.sensors.writePeriod = output_step
    s.show.computationTime = False
    s.show.statistics = False
    return s


def solve(built: Built, t_end: float, step: float, output_step: float) -> float:
    """Run the dynamic solver; returns the wall time in seconds."""
    start = time.perf_counter()
    ok = built.mbs.SolveDynamic(settings(t_end, step, output_step))
    wall = time.perf_counter() - start
    if not ok:
        raise RuntimeError("Exudyn's dynamic solver did not converge")
    return wall


def stored(built: Built, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(time, data) of a recorded quantity; data is (n_t, n_items, n_components)."""
    blocks = [built.mbs.GetSensorStoredData(s) for s in built.sensors[key]]
    t = blocks[0][:, 0]
    for b in blocks[1:]:
        if not np.array_equal(b[:, 0], t):
            raise RuntimeError(f"sensors of '{key}' were written at different times")
    return t, np.stack([b[:, 1:] for b in blocks], axis=1)


def degrees_of_freedom(model: Model) -> dict:
    """Exudyn's numerical DOF count and redundant constraints of the mechanism."""
    built = build(model, [lambda t: 0.0] * len(model.inputs))
    info = built.mbs.ComputeSystemDegreeOfFreedom()
    return {"dof": int(info["degreeOfFreedom"]), "redundant": int(info["redundantConstraints"])}


def initial_input_accelerations(model: Model, u: Sequence[float], step: float = 1e-4) -> np.ndarray:
    """The engine's initial accelerations (at rest, reference pose) along each input, for constant inputs ``u``."""
    built = build(model, [(lambda t, c=float(c): c) for c in u], sensors=("input_acceleration",))
    solve(built, step, step, step)
    _, acc = stored(built, "input_acceleration")
    directions = np.array([inp.direction for inp in model.inputs], dtype=float)
    return np.einsum("ij,ij->i", acc[0], directions)


def support_inputs(model: Model) -> tuple[np.ndarray, float]:
    """Constant inputs that hold the reference configuration in static equilibrium.

    At rest the accelerations are affine in the inputs, ``a(u) = a0 + S u`` (``a0`` from every
    other force, springs included): one engine evaluation per input gives ``S``, and
    ``u = -S^-1 a0``.  Returns ``u`` and the remaining acceleration ``max |a(u)|`` (should be
    round-off).
    """
    n = len(model.inputs)
    a0 = initial_input_accelerations(model, np.zeros(n))
    weight = sum(b.mass for b in model.bodies) * float(np.linalg.norm(model.gravity))
    S = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = weight
        S[:, i] = (initial_input_accelerations(model, e) - a0) / weight
    u = np.linalg.solve(S, -a0)
    residual = float(np.max(np.abs(initial_input_accelerations(model, u))))
    log.info("%s: support inputs %s, residual acceleration %.2e", model.name, u, residual)
    return u, residual
