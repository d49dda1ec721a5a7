"""The mechanism description: bodies (mass, COM, inertia), gravity, input channels, springs.

A public contract, read from TOML (or JSON with the same keys)::

    name = "four_bar"
    gravity = [0.0, -9.81, 0.0]          # m/s^2, global frame (default [0, 0, 0])

    [[bodies]]                           # every moving rigid body; the ground is implicit
    name = "crank"                       # identifier: [A-Za-z_][A-Za-z0-9_]*
    mass = 2.35                          # kg, 1e-9 to 1e9
    com = [0.1, 0.0, 0.0]                # centre of mass in the body frame, m (default: origin)
    inertia = [0.01, 0.02, 0.02]         # about the COM in body axes, kg m^2: 3 principal
                                         # values or a full symmetric 3x3

    [[inputs]]                           # excitation channels; they become the FMU's inputs
    name = "tau"
    kind = "torque"                      # "force" or "torque"
    body = "crank"
    direction = [0, 0, 1]                # global frame; the channel value is the magnitude
    # kind = "force" also needs: point = [x, y, z]  (application point in the body frame, m)

    [[springs]]                          # linear spring-dampers between two points (optional)
    name = "strut"
    body_a = "upper_damper"              # a body, or "ground"
    point_a = [0.0, 0.0, 0.0]            # in body_a's frame (global frame for "ground"), m
    body_b = "lower_damper"              # a body, or "ground" (not the same as body_a)
    point_b = [0.0, 0.0, 0.0]
    stiffness = 2000.0                   # N/m, >= 0
    damping = 50.0                       # N s/m, >= 0 (default 0)
    length = 0.40                        # rest length, m, > 0
    # law = "recorded": the tension is a column "<name>.tension" (N) of every run file and
    # mc2fmu learns the element's law from it; stiffness/length (and damping) are then
    # optional: given, they are the known linear part and only the remainder is learned

    With ``d = p_a - p_b``, ``l = |d|``, ``n = d / l`` and ``ldot = n . (v_a - v_b)``, the
    tension ``T = stiffness (l - length) + damping ldot`` pulls point a by ``-T n`` and point
    b by ``+T n``.  Springs are part of the model (the FMU evaluates them), not inputs.

:func:`load_mechanism` validates everything and raises one :class:`MechanismError`
listing every problem, each naming the file, the item and the rule.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MechanismError
from ..files import file_problem

log = logging.getLogger(__name__)

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # whole names only: fullmatch
INPUT_KINDS = ("force", "torque")
GROUND = "ground"
#: relative slack on the inertia triangle inequality (J1 <= J2 + J3) and symmetry checks
INERTIA_RTOL = 1e-9
#: a direction whose length differs from 1 by more than this is normalised with a warning
DIRECTION_TOL = 1e-9
#: sane magnitudes (SI units); beyond them the natural coordinates or their forces overflow,
#: or the file's units are wrong
MAX_LENGTH = 1e6  # m: com, points
MAX_GRAVITY = 1e4  # m/s^2
MIN_MASS, MAX_MASS = 1e-9, 1e9  # kg
MAX_INERTIA = 1e12  # kg m^2
MAX_SPRING = {"stiffness": 1e12, "damping": 1e12, "length": MAX_LENGTH}  # N/m, N s/m, m
MAX_BODIES = 500  # the dense (12 n)^2 mass matrix of the natural coordinates: 290 MB at 500

_TOP_KEYS = {"name", "gravity", "bodies", "inputs", "springs"}
_BODY_KEYS = {"name", "mass", "com", "inertia"}
_INPUT_KEYS = {"name", "kind", "body", "direction", "point"}
_SPRING_KEYS = {"name", "body_a", "point_a", "body_b", "point_b", "stiffness", "damping", "length", "law"}
SPRING_LAWS = ("linear", "recorded")


@dataclass(frozen=True)
class Body:
    name: str
    mass: float
    com: np.ndarray = field(repr=False)  # (3,) body frame
    inertia: np.ndarray = field(repr=False)  # (3, 3) about the COM, body axes

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "mass": self.mass, "com": self.com.tolist(), "inertia": self.inertia.tolist()}


@dataclass(frozen=True)
class Input:
    name: str
    kind: str  # "force" | "torque"
    body: str
    direction: np.ndarray = field(repr=False)  # (3,) unit, global frame
    point: np.ndarray | None = field(default=None, repr=False)  # (3,) body frame, forces only

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "kind": self.kind, "body": self.body, "direction": self.direction.tolist()}
        if self.point is not None:
            d["point"] = self.point.tolist()
        return d


@dataclass(frozen=True)
class Spring:
    name: str
    body_a: str  # a body name or "ground"
    point_a: np.ndarray = field(repr=False)  # (3,) body_a frame (global for the ground)
    body_b: str
    point_b: np.ndarray = field(repr=False)
    stiffness: float = 0.0  # N/m
    damping: float = 0.0  # N s/m
    length: float = 1.0  # rest length, m
    law: str = "linear"  # or "recorded": the tension is a column of the run files, its law is learned

    @property
    def recorded(self) -> bool:
        return self.law == "recorded"

    @property
    def tension_column(self) -> str:
        return f"{self.name}.tension"

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, "body_a": self.body_a, "point_a": self.point_a.tolist(), "body_b": self.body_b,
             "point_b": self.point_b.tolist(), "stiffness": self.stiffness, "damping": self.damping,
             "length": self.length}
        if self.recorded:
            d["law"] = self.law
        return d


@dataclass(frozen=True)
class Mechanism:
    name: str
    gravity: np.ndarray = field(repr=False)  # (3,)
    bodies: tuple[Body, ...]
    inputs: tuple[Input, ...]
    source: str = ""
    springs: tuple[Spring, ...] = ()

    @property
    def body_names(self) -> list[str]:
        return [b.name for b in self.bodies]

    @property
    def input_names(self) -> list[str]:
        return [u.name for u in self.inputs]

    def body_index(self, name: str) -> int:
        return self.body_names.index(name)

    def to_dict(self) -> dict[str, Any]:
        """The description as plain JSON-able data; ``mechanism_from_dict`` reads it back."""
        d = {
            "name": self.name,
            "gravity": self.gravity.tolist(),
            "bodies": [b.to_dict() for b in self.bodies],
            "inputs": [u.to_dict() for u in self.inputs],
        }
        if self.springs:
            d["springs"] = [s.to_dict() for s in self.springs]
        return d


def mechanism_toml(data: dict[str, Any], header: Sequence[str] = ()) -> str:
    """A mechanism description (the dict form) as TOML in the documented layout.

    The standard library reads TOML but does not write it; floats are written with ``repr``,
    the shortest text that reads back to the same value.  ``header`` lines become comments.
    """
    lines = [f"# {h}".rstrip() for h in header]
    if lines:
        lines.append("")
    lines += [f"name = {_toml_value(data['name'])}", f"gravity = {_toml_value(data.get('gravity', [0.0, 0.0, 0.0]))}"]
    for table in ("bodies", "inputs", "springs"):
        for row in data.get(table, []):
            lines += ["", f"[[{table}]]"] + [f"{key} = {_toml_value(value)}" for key, value in row.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value} to TOML")
        return repr(float(value))
    return str(int(value)) if isinstance(value, np.integer) else str(value)


def load_mechanism(path: str | os.PathLike) -> Mechanism:
    """Read and validate a mechanism file (``.toml`` or ``.json``)."""
    path = Path(path)
    problem = file_problem(path)
    if problem:
        raise MechanismError(f"{path}: {problem}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MechanismError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MechanismError(f"{path}: cannot read ({exc})") from None
    if path.suffix.lower() not in _READERS:
        raise MechanismError(f"{path}: unknown mechanism file type '{path.suffix}'; use .toml or .json")
    loads, syntax_error, describe = _READERS[path.suffix.lower()]
    try:
        data = loads(text)
    except syntax_error as exc:
        raise MechanismError(f"{path}: {describe(exc)}") from None
    except (RecursionError, ValueError) as exc:  # nesting, or an integer of thousands of digits
        raise MechanismError(f"{path}: not a mechanism file ({type(exc).__name__}: nested or sized beyond reason)") from None
    return mechanism_from_dict(data, source=str(path))


def _toml_message(exc: tomllib.TOMLDecodeError) -> str:
    # tomllib says "... (at line 7, column 12)"; lead with the line so it reads like the JSON case.
    msg = str(exc)
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        return f"line {m[1]}, column {m[2]}: {msg[: m.start()].strip()}"
    return msg


#: per file type: the parser, its syntax error and that error's message
_READERS = {
    ".json": (json.loads, json.JSONDecodeError,
              lambda exc: f"line {exc.lineno}, column {exc.colno}: malformed JSON: {exc.msg}"),
    ".toml": (tomllib.loads, tomllib.TOMLDecodeError, lambda exc: f"malformed TOML: {_toml_message(exc)}"),
}


def mechanism_from_dict(data: Any, source: str = "<mechanism>") -> Mechanism:
    """Validate a parsed mechanism description; every problem is collected before raising."""
    problems: list[str] = []

    def bad(item: str, rule: str) -> None:
        problems.append(f"{source}: {item}: {rule}")

    if not isinstance(data, dict):
        raise MechanismError(f"{source}: the top level must be a table/object with keys {sorted(_TOP_KEYS)}")
    _unknown_keys(data, _TOP_KEYS, "top level", bad)

    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        bad("name", f"{_short(name)} must be an identifier [A-Za-z_][A-Za-z0-9_]*")
    gravity = _vector(data.get("gravity", [0.0, 0.0, 0.0]), "gravity", bad, MAX_GRAVITY, "m/s^2")

    bodies: list[Body] = []
    raw_bodies = data.get("bodies")
    if not isinstance(raw_bodies, list) or not raw_bodies:
        bad("bodies", "at least one [[bodies]] entry is needed (the ground is implicit)")
        raw_bodies = []
    elif len(raw_bodies) > MAX_BODIES:
        raise MechanismError(f"{source}: bodies: {len(raw_bodies)} bodies; mc2fmu takes at most {MAX_BODIES} "
                             "(12 natural coordinates each)")
    for rb, item, bname, misspelt in _entries(raw_bodies, "bodies", "body", _BODY_KEYS,
                                              "name, mass, com, inertia", bad):
        mass = rb.get("mass")
        if not _is_number(mass):
            bad(item, f"mass {_short(mass)} must be a finite number in kg")
            mass = None
        elif not MIN_MASS <= mass <= MAX_MASS:
            bad(item, f"mass {_short(mass)} must be between {MIN_MASS:g} and {MAX_MASS:g} kg")
            mass = None
        com = _vector(rb.get("com", [0.0, 0.0, 0.0]), f"{item} com", bad)
        if "inertia" not in rb:
            if "inertia" not in misspelt:
                bad(item, "inertia is missing; give 3 principal values [Jxx, Jyy, Jzz] about the COM or a symmetric 3x3")
            inertia = None
        else:
            inertia = _inertia(rb["inertia"], item, bad)
        if mass is not None and com is not None and inertia is not None and isinstance(bname, str):
            bodies.append(Body(bname, float(mass), com, inertia))

    inputs: list[Input] = []
    raw_inputs = data.get("inputs", [])
    if not isinstance(raw_inputs, list):
        bad("inputs", "must be a list of [[inputs]] tables")
        raw_inputs = []
    body_names = {b.get("name") for b in raw_bodies if isinstance(b, dict) and isinstance(b.get("name"), str)}
    for ri, item, iname, _ in _entries(raw_inputs, "inputs", "input", _INPUT_KEYS,
                                       "name, kind, body, direction (and point for a force)", bad,
                                       reserved={"time": "the time column of a run",
                                                 "kinetic_energy": "an output of the model's FMU",
                                                 "potential_energy": "an output of the model's FMU"}):
        kind = ri.get("kind")
        if kind not in INPUT_KINDS:
            bad(item, f"kind {_short(kind)} must be one of {', '.join(INPUT_KINDS)}")
        body = ri.get("body")
        if not isinstance(body, str) or body not in body_names:
            bad(item, f"body {_short(body)} is not a body of this mechanism ({_cut(', '.join(sorted(str(b) for b in body_names)), 200)})")
        direction = _vector(ri.get("direction"), f"{item} direction", bad, 1e6, "")
        if direction is not None:
            norm = float(np.linalg.norm(direction))
            if norm < 1e-9:
                bad(item, f"direction {_short(ri.get('direction'))} must be a non-zero vector (length >= 1e-9; global frame)")
                direction = None
            else:
                if abs(norm - 1.0) > DIRECTION_TOL:
                    log.warning("%s: %s: direction has length %.6g; normalised to a unit vector "
                                "(the channel value is the load's magnitude)", source, item, norm)
                direction = direction / norm
        point = None
        if kind == "force":
            if "point" not in ri:
                bad(item, "a force needs point = [x, y, z], its application point in the body frame (m)")
            else:
                point = _vector(ri["point"], f"{item} point", bad)
        elif kind == "torque" and "point" in ri:
            bad(item, "a torque has no application point; remove 'point' (or use kind = \"force\")")
        if isinstance(iname, str) and kind in INPUT_KINDS and isinstance(body, str) and body in body_names \
                and direction is not None \
                and (kind == "torque" or point is not None):
            inputs.append(Input(iname, kind, body, direction, point))

    springs = _springs(data.get("springs", []), body_names, bad)
    if problems:
        raise MechanismError(problems)
    return Mechanism(str(name), gravity, tuple(bodies), tuple(inputs), source=source, springs=tuple(springs))


def _springs(raw: Any, body_names: set, bad) -> list[Spring]:
    springs: list[Spring] = []
    if not isinstance(raw, list):
        bad("springs", "must be a list of [[springs]] tables")
        return springs
    ends = sorted(str(b) for b in body_names) + [GROUND]
    for rs, item, sname, _ in _entries(raw, "springs", "spring", _SPRING_KEYS, ", ".join(sorted(_SPRING_KEYS)), bad):
        ok = isinstance(sname, str)
        points = {}
        for end in ("a", "b"):
            body = rs.get(f"body_{end}")
            if body != GROUND and (not isinstance(body, str) or body not in body_names):
                bad(item, f"body_{end} {_short(body)} is not a body of this mechanism nor \"{GROUND}\" ({_cut(', '.join(ends), 200)})")
                ok = False
            if f"point_{end}" not in rs:
                frame = "global frame" if body == GROUND else f"frame of body_{end}"
                bad(item, f"point_{end} = [x, y, z] is missing: the attachment point in the {frame}, m")
                ok = False
            else:
                points[end] = _vector(rs[f"point_{end}"], f"{item} point_{end}", bad)
                ok = ok and points[end] is not None
        if rs.get("body_a") == rs.get("body_b") and rs.get("body_a") is not None:
            bad(item, f"body_a and body_b are both {rs.get('body_a')!r}; a spring connects two different bodies "
                      f"(or a body and the ground)")
            ok = False
        law = rs.get("law", "linear")
        if law not in SPRING_LAWS:
            bad(item, f"law {_short(law)} must be one of {', '.join(SPRING_LAWS)} (recorded: the tension is a column "
                      f"'<name>.tension' of every run file and its law is learned)")
            ok, law = False, "linear"
        recorded = law == "recorded"
        if recorded and ("stiffness" in rs) != ("length" in rs):
            bad(item, "a recorded spring's known linear part needs both stiffness and length (or neither: "
                      "then the whole law is learned)")
            ok = False
        values = {"law": law}
        for key, unit, positive in (("stiffness", "N/m", False), ("damping", "N s/m", False), ("length", "m", True)):
            default = {"stiffness": 0.0, "damping": 0.0, "length": 1.0}[key] if recorded else (
                0.0 if key == "damping" else None)
            v = rs.get(key, default)
            if v is None:
                bad(item, f"{key} is missing ({unit})")
                ok = False
            elif not _is_number(v) or v < 0 or (positive and v == 0) or v > MAX_SPRING[key]:
                bad(item, f"{key} {_short(v)} must be a finite number {'> 0' if positive else '>= 0'} {unit}, "
                          f"at most {MAX_SPRING[key]:g}")
                ok = False
            else:
                values[key] = float(v)
        if ok:
            springs.append(Spring(sname, rs["body_a"], points["a"], rs["body_b"], points["b"], **values))
    return springs


def _entries(raw: list, section: str, what: str, valid: set[str], keys: str, bad,
             reserved: dict[str, str] | None = None) -> Iterator[tuple[dict, str, Any, set[str]]]:
    """The tables of a ``[[section]]`` list, each as ``(table, item, name, misspelt)``, its keys
    and name checked: ``item`` names it in messages (``what 'name'``, else ``section[i]``),
    ``misspelt`` the valid keys its unknown ones probably meant.  An entry that is no table is
    reported (a table with ``keys``) and passed over."""
    seen: set[str] = set()
    for i, table in enumerate(raw):
        item = f"{section}[{i}]"
        if not isinstance(table, dict):
            bad(item, f"must be a table with keys {keys}")
            continue
        name = table.get("name")
        if isinstance(name, str):
            item = f"{what} {_short(name)}"
        misspelt = _unknown_keys(table, valid, item, bad)
        _check_name(name, seen, what, item, bad, reserved)
        yield table, item, name, misspelt


def _check_name(name: Any, seen: set[str], what: str, item: str, bad, reserved: dict[str, str] | None = None) -> None:
    """An identifier, unique among its kind and not reserved; records it in ``seen``."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        bad(item, f"name {_short(name)} must be an identifier [A-Za-z_][A-Za-z0-9_]*")
    elif name in seen:
        bad(item, f"the name is used by another {what}; {what} names must be unique")
    elif reserved and name in reserved:
        bad(item, f"'{name}' is {reserved[name]}; choose another {what} name")
    else:
        seen.add(name)


def _unknown_keys(table: dict, valid: set[str], item: str, bad) -> set[str]:
    """Report unknown keys (with a did-you-mean); return the valid keys they probably meant."""
    meant = set()
    for key in sorted(set(table) - valid):
        close = difflib.get_close_matches(key, sorted(valid), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        bad(item, f"unknown key '{key}'; {hint}valid keys are {', '.join(sorted(valid))}")
        meant.update(c for c in close if c not in table)
    return meant


def _vector(value: Any, item: str, bad, limit: float = MAX_LENGTH, unit: str = "m") -> np.ndarray | None:
    """3 finite numbers, each at most ``limit`` in magnitude (a sane magnitude: beyond it the
    natural coordinates overflow or the file's units are wrong)."""
    if not isinstance(value, (list, tuple)) or len(value) != 3 or not all(_is_number(v) for v in value):
        bad(item, f"{_short(value)} must be a list of 3 finite numbers")
        return None
    v = np.array(value, dtype=np.float64)
    if np.abs(v).max() > limit:
        bad(item, f"{_short(value)}: components must be at most {limit:g}{' ' + unit if unit else ''} in magnitude "
                  "(check the units)")
        return None
    return v


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error line names the value, it does
    not echo a megabyte of it."""
    return _cut(repr(value), limit)


def _is_number(v: Any) -> bool:
    """A finite number a float can hold (an int of 400 digits is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _inertia(value: Any, item: str, bad) -> np.ndarray | None:
    """A 3x3 inertia tensor from 3 principal values or a symmetric matrix, checked physically."""
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(_is_number(v) for v in value):
        J = np.diag(np.array(value, dtype=np.float64))
    elif (
        isinstance(value, (list, tuple))
        and len(value) == 3
        and all(isinstance(r, (list, tuple)) and len(r) == 3 and all(_is_number(v) for v in r) for r in value)
    ):
        J = np.array(value, dtype=np.float64)
        asym = np.abs(J - J.T).max()
        if asym > INERTIA_RTOL * max(np.abs(J).max(), 1e-300):
            bad(item, f"inertia matrix is not symmetric (max |J - J^T| = {asym:.3g}); give a symmetric 3x3")
            return None
        J = 0.5 * (J + J.T)
    else:
        bad(item, f"inertia {_short(value)} must be 3 principal values [Jxx, Jyy, Jzz] or a symmetric 3x3 [[..],[..],[..]]")
        return None
    if np.abs(J).max() > MAX_INERTIA:
        bad(item, f"inertia {_short(value)}: values must be at most {MAX_INERTIA:g} kg m^2 (check the units)")
        return None
    eig = np.linalg.eigvalsh(J)
    scale = max(float(eig.max()), 1e-300)
    if eig[0] < -INERTIA_RTOL * scale:
        bad(item, f"inertia has a negative principal value {eig[0]:.6g} kg m^2; principal moments must be >= 0")
        return None
    # Principal moments of a real body satisfy J1 <= J2 + J3 (equality: a flat plate or a rod).
    e = np.sort(np.clip(eig, 0.0, None))
    if e[2] > e[0] + e[1] + INERTIA_RTOL * scale:
        bad(
            item,
            f"inertia principal values {e[0]:.6g}, {e[1]:.6g}, {e[2]:.6g} violate the triangle inequality "
            f"({e[2]:.6g} > {e[0]:.6g} + {e[1]:.6g}); no rigid body has them: check units and axes",
        )
        return None
    return J
