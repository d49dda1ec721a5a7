"""A mechanism file that differs from the trained one in its physical parameters only.

A decoder-manifold model learns the mechanism's kinematics (the chart of its configurations);
its mass matrix, gravity, springs and input loads are computed from the mechanism file.  So a
file that changes only these may replace the trained one:

* a body's ``mass``, ``com`` and ``inertia``;
* ``gravity``;
* a spring's ``stiffness``, ``damping``, ``length`` and attachment points;
* an input's ``direction`` and ``point``.

Anything else (the bodies' names, order and count; the inputs' names, kinds and bodies; the
springs' names, bodies and law kind) describes another mechanism, and is refused by
:func:`physical_differences` with the item named.  The mechanism's ``name`` is not compared.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from . import mechanism as limits
from .mechanism import Mechanism
from .parameters import BODY_SLOTS, INERTIA_ENTRIES


@dataclass(frozen=True)
class Difference:
    """One physical parameter the variant file changes: ``item`` (e.g. ``rocker.mass``) and
    its trained and new values as text."""

    item: str
    trained: str
    variant: str


def _text(v) -> str:
    a = np.asarray(v, dtype=float)
    return f"{float(a):.6g}" if a.ndim == 0 else "[" + ", ".join(f"{x:.6g}" for x in a.ravel()) + "]"


def kinematic_problems(trained: Mechanism, variant: Mechanism, source: str | os.PathLike) -> list[str]:
    """What makes ``variant`` another mechanism rather than a physical variant of ``trained``
    (empty: nothing)."""
    problems = []
    tb, vb = [b.name for b in trained.bodies], [b.name for b in variant.bodies]
    if tb != vb:
        first = next((k for k, (a, b) in enumerate(zip(tb, vb)) if a != b), min(len(tb), len(vb)))
        what = (f"body {first + 1} is '{vb[first]}' where the model's is '{tb[first]}'" if first < min(len(tb), len(vb))
                else f"{len(vb)} bodies where the model has {len(tb)}")
        problems.append(f"{source}: {what}: bodies {vb} differ from the trained {tb}; a model takes other masses, "
                        "inertias and centres of mass, not other bodies (names, order and count must stay)")
    ti = [(i.name, i.kind, i.body) for i in trained.inputs]
    vi = [(i.name, i.kind, i.body) for i in variant.inputs]
    if [n for n, _, _ in ti] != [n for n, _, _ in vi]:
        problems.append(f"{source}: inputs {[n for n, _, _ in vi]} differ from the trained {[n for n, _, _ in ti]} "
                        "(names, order and count must stay)")
    else:
        for (name, kind, body), (_, vkind, vbody) in zip(ti, vi, strict=True):
            if vkind != kind:
                problems.append(f"{source}: input '{name}' is a {vkind}, the model's is a {kind}")
            if vbody != body:
                problems.append(f"{source}: input '{name}' acts on body '{vbody}', the model's on '{body}'")
    ts, vs = [s.name for s in trained.springs], [s.name for s in variant.springs]
    if ts != vs:
        problems.append(f"{source}: springs {vs} differ from the trained {ts} (names, order and count must stay)")
    else:
        for s, v in zip(trained.springs, variant.springs, strict=True):
            if (v.body_a, v.body_b) != (s.body_a, s.body_b):
                problems.append(f"{source}: spring '{s.name}' connects '{v.body_a}' and '{v.body_b}', the model's "
                                f"'{s.body_a}' and '{s.body_b}'")
            if v.law != s.law:
                problems.append(f"{source}: spring '{s.name}' has law '{v.law}', the model's '{s.law}' (a law "
                                "kind is part of what was trained)")
    return problems


def physical_differences(trained: Mechanism, variant: Mechanism, source: str | os.PathLike) -> list[Difference]:
    """The physical parameters ``variant`` changes (empty: the same mechanism); a
    :class:`~mc2fmu.errors.ModelError` naming every item when it changes anything else."""
    problems = kinematic_problems(trained, variant, source)
    if problems:
        raise ModelError(problems + ["use the mechanism file the model was trained with, or one that changes only "
                                     "masses, centres of mass, inertias, gravity, spring constants and attachment "
                                     "points, and input directions and points"])
    diffs: list[Difference] = []

    def compare(item: str, a, b) -> None:
        # to 1e-12 relative: a unit direction normalised again on reading may move in its last bit
        if a is None and b is None:
            return
        if a is None or b is None or np.shape(a) != np.shape(b) or \
                not np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-12, atol=0.0):
            diffs.append(Difference(item, "-" if a is None else _text(a), "-" if b is None else _text(b)))

    for t, v in zip(trained.bodies, variant.bodies, strict=True):
        compare(f"{t.name}.mass", t.mass, v.mass)
        compare(f"{t.name}.com", t.com, v.com)
        compare(f"{t.name}.inertia", t.inertia, v.inertia)
    compare("gravity", trained.gravity, variant.gravity)
    for t, v in zip(trained.springs, variant.springs, strict=True):
        for key in ("stiffness", "damping", "length", "point_a", "point_b"):
            compare(f"{t.name}.{key}", getattr(t, key), getattr(v, key))
    for t, v in zip(trained.inputs, variant.inputs, strict=True):
        compare(f"{t.name}.direction", t.direction, v.direction)
        compare(f"{t.name}.point", t.point, v.point)
    return diffs


def differences_table(diffs: list[Difference]) -> list[str]:
    """The lines of a short table of what differs from the trained values."""
    if not diffs:
        return []
    width = max(len(d.item) for d in diffs)
    col = max(len("trained"), *(len(d.trained) for d in diffs))
    return [f"  {'parameter':<{width}}  {'trained':<{col}}  variant"] + [
        f"  {d.item:<{width}}  {d.trained:<{col}}  {d.variant}" for d in diffs]


# ------------------------------------------------------------------ the FMU's physical parameters


def parameter_limits() -> dict[str, float]:
    """The mechanism file's limits on the physical parameters, as
    :func:`mc2fmu.mechanics.parameters.slot_problem` takes them (an FMU checks the values it is
    given against them)."""
    return {"min_mass": limits.MIN_MASS, "max_mass": limits.MAX_MASS, "max_length": limits.MAX_LENGTH,
            "max_inertia": limits.MAX_INERTIA, "max_gravity": limits.MAX_GRAVITY,
            "max_stiffness": limits.MAX_SPRING["stiffness"], "max_damping": limits.MAX_SPRING["damping"],
            "inertia_rtol": limits.INERTIA_RTOL}


@dataclass(frozen=True)
class PhysicalParameter:
    """One physical parameter of an exported model: its FMI name, unit, description, value
    and its slot in :func:`parameter_vector` (what the generated C reads)."""

    name: str
    unit: str
    description: str
    value: float
    slot: int


def parameter_vector(mechanism: Mechanism) -> np.ndarray:
    """Every physical parameter of ``mechanism`` in the C code's slot order: per body (in file
    order) mass, com x/y/z, inertia xx, yy, zz, xy, xz, yz (:data:`BODY_SLOTS`), then gravity
    x/y/z, then per spring stiffness, damping, length."""
    out: list[float] = []
    for b in mechanism.bodies:
        out += [b.mass, *np.asarray(b.com, dtype=float)] + [float(b.inertia[i, j]) for i, j in INERTIA_ENTRIES]
    out += [float(g) for g in mechanism.gravity]
    for s in mechanism.springs:
        out += [s.stiffness, s.damping, s.length]
    return np.asarray(out, dtype=np.float64)


def parameter_names(mechanism: Mechanism) -> list[str]:
    """The name of each slot of :func:`parameter_vector`, as :func:`physical_parameters` names
    the ones it exposes (``<body>.inertia[4..6]`` are xy, xz, yz)."""
    out: list[str] = []
    for b in mechanism.bodies:
        out += [f"{b.name}.mass"] + [f"{b.name}.com[{k + 1}]" for k in range(3)] + \
            [f"{b.name}.inertia[{k + 1}]" for k in range(len(INERTIA_ENTRIES))]
    out += [f"gravity[{k + 1}]" for k in range(3)]
    for s in mechanism.springs:
        out += [f"{s.name}.stiffness", f"{s.name}.damping", f"{s.name}.length"]
    return out


def principal_inertia(body) -> bool:
    """Whether ``body``'s inertia is diagonal in its body axes (then 3 parameters, else 6)."""
    J = np.asarray(body.inertia, dtype=float)
    return not np.any(J - np.diag(np.diag(J)))


def physical_parameters(mechanism: Mechanism, learned_damping: tuple[str, ...] = ()) -> list[PhysicalParameter]:
    """The parameters a decoder-manifold model's FMU exposes, named as the FMI variables:
    ``<body>.mass``, ``<body>.com[1..3]``, ``<body>.inertia[1..3]`` (principal values, where the
    tensor is diagonal) or ``[1..6]`` (xx, yy, zz, xy, xz, yz), ``gravity[1..3]``,
    ``<spring>.stiffness``, ``<spring>.damping`` (not for the springs in ``learned_damping``,
    whose learned law was fitted beside their damping) and ``<spring>.length``."""
    theta = parameter_vector(mechanism)
    out: list[PhysicalParameter] = []
    for b, body in enumerate(mechanism.bodies):
        o = BODY_SLOTS * b
        out.append(PhysicalParameter(f"{body.name}.mass", "kg", f"mass of {body.name}", theta[o], o))
        for k in range(3):
            out.append(PhysicalParameter(f"{body.name}.com[{k + 1}]", "m", f"centre of mass of {body.name}, body "
                                         f"frame {'xyz'[k]}", theta[o + 1 + k], o + 1 + k))
        n = 3 if principal_inertia(body) else 6
        for k in range(n):
            i, j = INERTIA_ENTRIES[k]
            what = f"principal moment of inertia about the body {'xyz'[i]} axis" if n == 3 else \
                f"inertia tensor entry {'xyz'[i]}{'xyz'[j]}"
            out.append(PhysicalParameter(f"{body.name}.inertia[{k + 1}]", "kg.m2", f"{body.name}: {what}, about "
                                         "the centre of mass", theta[o + 4 + k], o + 4 + k))
    g = BODY_SLOTS * len(mechanism.bodies)
    for k in range(3):
        out.append(PhysicalParameter(f"gravity[{k + 1}]", "m/s2", f"gravity, global {'xyz'[k]}", theta[g + k], g + k))
    for s, spring in enumerate(mechanism.springs):
        o = g + 3 + 3 * s
        out.append(PhysicalParameter(f"{spring.name}.stiffness", "N/m", f"stiffness of spring {spring.name}"
                                     + (" (its known linear part; the learned law keeps its coefficients)"
                                        if spring.recorded else ""), theta[o], o))
        if spring.name not in learned_damping:
            out.append(PhysicalParameter(f"{spring.name}.damping", "N.s/m", f"damping of spring {spring.name}",
                                         theta[o + 1], o + 1))
        out.append(PhysicalParameter(f"{spring.name}.length", "m", f"rest length of spring {spring.name}",
                                     theta[o + 2], o + 2))
    return out


def parameter_settings(exported: Mechanism, variant: Mechanism, exposed: set[str] | list[str],
                       source: str | os.PathLike, fmu: str) -> tuple[dict[str, float], list[Difference]]:
    """The FMU parameter values that turn the mechanism an FMU was exported with into
    ``variant`` (``{name: value}`` for the slots that differ) and the differences, or a
    :class:`ModelError` naming what no parameter of the FMU (``exposed``) reaches: attachment
    points, input directions and points, an off-diagonal inertia where the FMU takes principal
    values, a learned law's damping (what an FMU's constants hold)."""
    values, diffs, beyond = _settings(exported, variant, exposed, source)
    if beyond:
        raise ModelError(f"{source}: changes {', '.join(beyond)}, which {fmu} has no parameter for "
                         "(its parameters are masses, centres of mass, inertias, gravity and spring constants); "
                         "export an FMU for this file with `mc2fmu export MODEL --mechanism "
                         f"{source}`")
    return values, diffs


def _settings(exported, variant, exposed, source) -> tuple[dict[str, float], list[Difference], list[str]]:
    diffs = physical_differences(exported, variant, source)
    names = parameter_names(exported)
    old, new = parameter_vector(exported), parameter_vector(variant)
    values = {names[k]: float(new[k]) for k in np.flatnonzero(~np.isclose(old, new, rtol=1e-12, atol=0.0))}
    covered = {n.split("[")[0] for n in values}
    beyond = [d.item for d in diffs if d.item not in covered]
    beyond += [n for n in values if n not in set(exposed)]
    return values, diffs, list(dict.fromkeys(beyond))
