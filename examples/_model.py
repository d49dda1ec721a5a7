"""Engine-neutral description of a reference mechanism.

A :class:`Model` holds everything needed to build the mechanism in an engine and to check
its output: the bodies (inertial data and their pose in the reference configuration, which
is the static equilibrium the runs start from), the joints (used by the engine and by the
joint-error check), the spring-dampers (force elements), the inputs and their excitation
signals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

#: The excitation cases every mechanism is run with.
EXCITATIONS = ("train", "low", "shape", "high")

#: Constrained (translation, rotation) axes of the joint frame, per joint kind.  The joint
#: frame is given at the reference configuration; its columns are the joint axes.
JOINT_AXES = {
    "revolute": ((1, 1, 1), (1, 1, 0)),  # rotation about frame z free
    "prismatic": ((0, 1, 1), (1, 1, 1)),  # translation along frame x free
    "spherical": ((1, 1, 1), (0, 0, 0)),
    "universal": ((1, 1, 1), (1, 0, 0)),  # body 0 pin = frame y, body 1 pin = frame z, twist x locked
    "rigid": ((1, 1, 1), (1, 1, 1)),
    "planar_pin": ((1, 1, 0), (0, 0, 0)),  # closes a planar loop: only the in-plane position
    "vertical_slider_pin": ((1, 0, 1), (1, 1, 0)),  # slides along frame y, turns about frame z
}


# ---------------------------------------------------------------------------- geometry


def frame(x=None, y=None, z=None) -> np.ndarray:
    """A right-handed rotation matrix whose columns are the body axes.

    Give one or two axes (global vectors); the first given one is kept exactly, the second is
    orthogonalised against it, the rest completes the frame.
    """
    given = {k: np.asarray(v, dtype=float) for k, v in (("x", x), ("y", y), ("z", z)) if v is not None}
    if not given or len(given) > 2:
        raise ValueError("frame() needs one or two axes")
    names = list(given)
    a = given[names[0]] / np.linalg.norm(given[names[0]])
    if len(names) == 2:
        b = given[names[1]] - a * (a @ given[names[1]])
    else:  # any vector not parallel to a
        helper = np.eye(3)[int(np.argmin(np.abs(a)))]
        b = helper - a * (a @ helper)
        names.append(next(k for k in "xyz" if k not in names))
    b /= np.linalg.norm(b)
    cols = {names[0]: a, names[1]: b}
    order = "xyz"
    missing = next(k for k in order if k not in cols)
    i = order.index(missing)
    cols[missing] = np.cross(cols[order[(i + 1) % 3]], cols[order[(i + 2) % 3]])
    return np.column_stack([cols[k] for k in order])


def rot_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def box_inertia(mass: float, sides) -> tuple[float, float, float]:
    """Principal inertia about the COM of a homogeneous box with the given side lengths."""
    a, b, c = sides
    return (mass * (b * b + c * c) / 12.0, mass * (a * a + c * c) / 12.0, mass * (a * a + b * b) / 12.0)


# ---------------------------------------------------------------------------- mechanism items


@dataclass(frozen=True)
class Body:
    """A rigid body: inertial data in its body frame and its reference pose.

    ``inertia`` is about the COM in body axes: three principal values or a symmetric 3x3.
    ``position`` / ``rotation`` place the body frame in the reference configuration
    (origin in global coordinates, body -> global rotation).
    """

    name: str
    mass: float
    com: tuple[float, float, float]
    inertia: tuple
    position: np.ndarray = field(repr=False)
    rotation: np.ndarray = field(repr=False)

    @property
    def inertia_matrix(self) -> np.ndarray:
        J = np.asarray(self.inertia, dtype=float)
        return np.diag(J) if J.shape == (3,) else J

    def local(self, point) -> np.ndarray:
        """Body-frame coordinates of a global point given in the reference configuration."""
        return self.rotation.T @ (np.asarray(point, dtype=float) - self.position)

    def com_global(self) -> np.ndarray:
        return self.position + self.rotation @ np.asarray(self.com)


@dataclass(frozen=True)
class Joint:
    """A joint between two bodies (``"ground"`` allowed as the first one).

    ``position`` is the joint point and ``axes`` the joint frame (columns), both global, in
    the reference configuration; :data:`JOINT_AXES` gives what each kind constrains.
    """

    name: str
    kind: str
    bodies: tuple[str, str]
    position: np.ndarray = field(repr=False)
    axes: np.ndarray = field(default_factory=lambda: np.eye(3), repr=False)

    def __post_init__(self):
        if self.kind not in JOINT_AXES:
            raise ValueError(f"joint '{self.name}': unknown kind '{self.kind}'; use one of {', '.join(JOINT_AXES)}")


@dataclass(frozen=True)
class Input:
    """A load driven by one input channel: ``u * direction`` (global, fixed direction).

    A torque acts on the body; a force acts at ``point`` (body frame).
    """

    name: str
    kind: str  # "force" or "torque"
    body: str
    direction: tuple[float, float, float]
    point: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class Spring:
    """A linear spring-damper between two points; a force element, not an input.

    ``point_a`` / ``point_b`` are in the body frames (global for ``"ground"``).  With
    ``d = p_a - p_b``, ``l = |d|``, ``n = d / l`` and ``ldot = n . (v_a - v_b)`` the tension is
    ``T = stiffness (l - length) + damping ldot``; the force on point a is ``-T n``, on b ``+T n``.
    """

    name: str
    body_a: str
    point_a: tuple[float, float, float]
    body_b: str
    point_b: tuple[float, float, float]
    stiffness: float  # N/m
    damping: float  # N s/m
    length: float  # rest length, m
    cubic: float = 0.0  # N/m^3: a progressive spring, + cubic (l - length)^3
    digressive: float = math.inf  # m/s: a digressive damper's knee (slope damping below, high_speed x above)
    high_speed: float = 1.0  # a digressive damper's slope above its knee, relative to damping
    recorded: bool = False  # the mechanism file says law = "recorded" and the runs carry the tension

    def __post_init__(self):
        if self.body_a == self.body_b:
            raise ValueError(f"spring '{self.name}': body_a and body_b must differ")
        if self.stiffness < 0 or self.damping < 0 or self.length <= 0:
            raise ValueError(f"spring '{self.name}': needs stiffness >= 0, damping >= 0, length > 0")

    @property
    def linear(self) -> bool:
        return self.cubic == 0.0 and math.isinf(self.digressive)

    def tension(self, stretch, ldot):
        """``T`` at ``stretch = l - length`` and ``ldot`` (numbers or arrays)."""
        return self.elastic(stretch) + self.damper(ldot)

    def elastic(self, stretch):
        return self.stiffness * stretch + self.cubic * stretch**3

    def damper(self, ldot):
        """``c (r ldot + (1 - r) v_k tanh(ldot / v_k))``: slope ``c`` at rest, ``r c`` beyond the knee ``v_k``."""
        if math.isinf(self.digressive):
            return self.damping * ldot
        r, vk = self.high_speed, self.digressive
        return self.damping * (r * ldot + (1.0 - r) * vk * np.tanh(ldot / vk))

    def potential(self, stretch):
        return 0.5 * self.stiffness * stretch**2 + 0.25 * self.cubic * stretch**4


@dataclass(frozen=True)
class JointFriction:
    """Friction in a revolute joint to ground, *not* written to the mechanism file: the forces
    a real linkage has and its model does not list (what ``mc2fmu train --identify`` finds).

    The torque on ``body`` about the global ``axis`` (through ``position``) is
    ``-(coulomb tanh(w / v0) + viscous w)``, ``w`` the body's angular velocity about ``axis``:
    smoothed Coulomb friction plus viscous damping.
    """

    name: str
    body: str
    position: tuple[float, float, float]
    axis: tuple[float, float, float]
    coulomb: float  # N m
    viscous: float  # N m s / rad
    v0: float  # rad/s, the smoothed sign's velocity scale

    def torque(self, w):
        """The friction torque about the axis at angular velocity ``w`` (numbers or arrays)."""
        return -(self.coulomb * np.tanh(w / self.v0) + self.viscous * w)


# ---------------------------------------------------------------------------- excitations


@dataclass(frozen=True)
class Waveform:
    """``sum_k a_k cos(2 pi f_k t)`` with ``sum_k a_k = 0``.

    The zero sum makes the signal start at 0 with zero slope, so a run starting at rest in
    static equilibrium starts smoothly.  Cosines also keep the signal's first integral free
    of a mean, so a nearly force-free mode (a compensated weight) oscillates without drifting.
    """

    terms: tuple[tuple[float, float], ...]  # (amplitude, frequency in Hz)

    def __post_init__(self):
        if abs(sum(a for a, _ in self.terms)) > 1e-12 * max(abs(a) for a, _ in self.terms):
            raise ValueError(f"waveform amplitudes must sum to zero: {self.terms}")

    def scaled(self, factor: float) -> Waveform:
        return Waveform(tuple((factor * a, f) for a, f in self.terms))


def input_signal(static: float, waveform: Waveform) -> Callable[[float], float]:
    """The scalar input ``u(t) = static + waveform(t)`` (plain floats: it runs in the solver loop)."""
    terms = tuple((float(a), 2.0 * math.pi * float(f)) for a, f in waveform.terms)
    static = float(static)

    def u(t: float) -> float:
        value = static
        for a, w in terms:
            value += a * math.cos(w * t)
        return value

    return u


@dataclass(frozen=True)
class Model:
    """A reference mechanism.

    ``static_inputs``: the constant input part.  ``None`` means "support": the engine solves
    for the constant inputs that hold the reference configuration in static equilibrium.
    ``train`` / ``shape``: one waveform per input; ``low`` and ``high`` scale ``train``.
    ``coordinates``: the mechanism's main coordinates from exported poses, for range checks.
    ``springs``: the spring-dampers acting besides gravity and the inputs.
    """

    name: str
    summary: str
    gravity: tuple[float, float, float]
    bodies: tuple[Body, ...]
    joints: tuple[Joint, ...]
    inputs: tuple[Input, ...]
    train: tuple[Waveform, ...]
    shape: tuple[Waveform, ...]
    coordinates: Callable[[np.ndarray, np.ndarray], Mapping[str, np.ndarray]] = field(repr=False)
    static_inputs: tuple[float, ...] | None = None
    low_scale: float = 0.5
    high_scale: float = 1.7
    springs: tuple[Spring, ...] = ()
    frictions: tuple[JointFriction, ...] = ()  # not in the mechanism file: unknown to mc2fmu

    def body(self, name: str) -> Body:
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(f"mechanism '{self.name}' has no body '{name}'")

    def waveforms(self, excitation: str) -> tuple[Waveform, ...]:
        if excitation == "train":
            return self.train
        if excitation == "low":
            return tuple(w.scaled(self.low_scale) for w in self.train)
        if excitation == "high":
            return tuple(w.scaled(self.high_scale) for w in self.train)
        if excitation == "shape":
            return self.shape
        raise ValueError(f"unknown excitation '{excitation}'; use one of {', '.join(EXCITATIONS)}")
