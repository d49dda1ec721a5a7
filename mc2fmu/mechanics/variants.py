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
from .mechanism import Mechanism


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
