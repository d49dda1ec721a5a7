"""The FMU's motion outputs, written once: each body's velocity and angular velocity, the
kinetic and the potential energy, from natural coordinates ``x``, their rates ``xd`` and the
physical parameter vector ``theta`` (:func:`mc2fmu.mechanics.variants.parameter_vector`).

:func:`motion_outputs` (per body :func:`body_outputs`, per spring :func:`spring_energy`) is plain
arithmetic (:mod:`.expr`), so every target computes it from this one text: numpy evaluates it
(:func:`evaluate`, ``simulate``'s run-time model), CasADi on its symbols (the ``--format casadi``
function), and its traced graph is printed as the native FMU's C (``body_outputs`` and
``spring_energy`` once each, run per body and spring), the python FMU's slave code and the
Modelica model's equations (:data:`mc2fmu.capabilities.KINDS`, ``motion``: every kind; a node or
local-PCA model's of its decoded motion).

* ``<body>.vx|vy|vz`` (m/s): the velocity of the body-frame origin, global frame.  The origin
  is the affine combination ``r0 - sum_k (com_k / L) (r_k - r0)`` of the body's points (``com``
  the trained layout's centre of mass in the body frame), so its velocity is the same
  combination of the points' rates: exact for rigid points.
* ``<body>.wx|wy|wz`` (rad/s): the angular velocity, global frame, ``w = 1/2 sum_k a_k x
  a_k'`` with ``a_k = (r_k - r0) / L`` (for orthonormal ``a_k`` and ``a_k' = w x a_k``:
  ``sum_k a_k x (w x a_k) = 3 w - w``).
* ``kinetic_energy`` (J): ``1/2 xd^T M xd``, ``M`` from ``theta`` (each body's point mass
  block, :func:`mc2fmu.mechanics.parameters.body_mass_entries`).
* ``potential_energy`` (J): gravity's ``-sum_b m_b g . r_com,b`` (``= -f_g . x``, relative to
  the global origin) plus each spring's ``k (l - L0)^2 / 2``, plus for a recorded spring its
  learned law's elastic potential ``int g dl`` from the recorded lengths' mean
  (:func:`law_energy`, the law's learnt potential; its damping has none).
  Identified terms (``--identify``) add none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..mechanics.natural import POINTS_PER_BODY, NCLayout
from ..mechanics.parameters import BODY_SLOTS, MASS_ENTRIES, MASS_VALUES, body_mass_entries
from . import expr
from .expr import sqrt

#: per body, the output suffixes, units and descriptions (after the energies' two)
BODY_OUTPUTS = (("vx", "m/s", "origin velocity x, global frame"), ("vy", "m/s", "origin velocity y, global frame"),
                ("vz", "m/s", "origin velocity z, global frame"), ("wx", "rad/s", "angular velocity x, global frame"),
                ("wy", "rad/s", "angular velocity y, global frame"), ("wz", "rad/s", "angular velocity z, global frame"))
ENERGY_OUTPUTS = (("kinetic_energy", "J", "kinetic energy"),
                  ("potential_energy", "J", "potential energy: gravity relative to the global origin, plus the "
                                             "springs' k (l - L0)^2 / 2 and their learned laws' elastic potential"))


@dataclass(frozen=True)
class MotionGeometry:
    """What the outputs need of a model besides its state: the layout's bodies (offset into
    ``x``, point length ``L``, centre of mass in the body frame), the springs' maps ``d = D
    x + e`` (``D`` (n_s, 3, n_x), ``e`` (n_s, 3)) and the recorded springs' learned laws
    (``laws[s]`` spring ``s``'s :class:`~mc2fmu.models.spring_laws.SpringLaw` or None)."""

    offsets: tuple[int, ...]
    lengths: tuple[float, ...]
    coms: tuple[tuple[float, float, float], ...]
    spring_D: np.ndarray
    spring_e: np.ndarray
    laws: tuple = ()

    @classmethod
    def of(cls, layout: NCLayout, spring_D: np.ndarray, spring_e: np.ndarray, laws=None) -> "MotionGeometry":
        """``laws``: a model's :class:`~mc2fmu.models.spring_laws.SpringLaws` (``springs.laws``), or None."""
        per_spring: list = [None] * len(spring_D)
        for law in (laws.laws if laws is not None else ()):
            per_spring[law.spring] = law
        return cls(tuple(int(b.offset) for b in layout.bodies), tuple(float(b.length) for b in layout.bodies),
                   tuple(tuple(float(c) for c in b.com) for b in layout.bodies), np.asarray(spring_D, dtype=np.float64),
                   np.asarray(spring_e, dtype=np.float64), tuple(per_spring) if any(per_spring) else ())

    def law(self, s: int):
        """Spring ``s``'s learned law, or None."""
        return self.laws[s] if self.laws else None

    @property
    def n_bodies(self) -> int:
        return len(self.offsets)

    @property
    def n_outputs(self) -> int:
        return 6 * self.n_bodies + 2


def output_names(body_names) -> list[tuple[str, str, str]]:
    """``(name, unit, description)`` of every motion output, in :func:`motion_outputs`' order:
    per body its six, then the two energies."""
    out = [(f"{b}.{s}", unit, f"{desc} of {b}") for b in body_names for s, unit, desc in BODY_OUTPUTS]
    return out + list(ENERGY_OUTPUTS)


#: what :func:`body_outputs` returns per body: its six outputs, its kinetic energy and gravity's
#: potential of it
BODY_VALUES = 8


def body_outputs(x, xd, mass, g, geo) -> list:
    """One body's values (:data:`BODY_VALUES`): its origin velocity and angular velocity, then its
    kinetic energy and gravity's potential of it, from its 12 natural coordinates ``x`` and rates
    ``xd`` (point-major: ``r0``, ``r1``, ``r2``, ``r3``), its point mass block ``mass``
    (:func:`~mc2fmu.mechanics.parameters.body_mass_entries`' values, of its parameter slots),
    gravity ``g`` and ``geo`` = (point length ``L``, the layout's centre of mass in the body
    frame)."""
    L, com = geo[0], geo[1:4]
    inv_L = 1.0 / L
    r = [[x[3 * j + a] for a in range(3)] for j in range(POINTS_PER_BODY)]
    v = [[xd[3 * j + a] for a in range(3)] for j in range(POINTS_PER_BODY)]
    # the origin's velocity: the points' affine combination for the body-frame origin
    w = [-c * inv_L for c in com]
    c0 = 1.0 - (w[0] + w[1] + w[2])
    out = [c0 * v[0][a] + w[0] * v[1][a] + w[1] * v[2][a] + w[2] * v[3][a] for a in range(3)]
    # w = 1/2 sum_k a_k x a_k' with a_k = (r_k - r0) / L: the cross products of the differences, scaled once
    ak = [[r[k][a] - r[0][a] for a in range(3)] for k in range(1, 4)]
    dk = [[v[k][a] - v[0][a] for a in range(3)] for k in range(1, 4)]
    half = 0.5 * inv_L * inv_L
    for a in range(3):
        i, j = (a + 1) % 3, (a + 2) % 3
        out.append(half * ((ak[0][i] * dk[0][j] - ak[0][j] * dk[0][i]) + (ak[1][i] * dk[1][j] - ak[1][j] * dk[1][i])
                           + (ak[2][i] * dk[2][j] - ak[2][j] * dk[2][i])))
    kinetic, potential = 0.0, 0.0
    for (j, m), a in zip(MASS_ENTRIES, mass):
        dot = v[j][0] * v[m][0] + v[j][1] * v[m][1] + v[j][2] * v[m][2]
        kinetic = kinetic + (0.5 if j == m else 1.0) * a * dot
    for j in range(4):  # f_g . x = sum_j (A 1)_j g . r_j
        row = mass[len(MASS_ENTRIES) + j]
        potential = potential - row * (g[0] * r[j][0] + g[1] * r[j][1] + g[2] * r[j][2])
    return out + [kinetic, potential]


def spring_length(d):
    """A spring's length ``|d|`` of its vector ``d`` (3)."""
    return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])


def spring_energy(d, ks):
    """A spring's elastic energy ``k (l - L0)^2 / 2`` of its vector ``d`` (3) and ``ks`` = (k, L0)."""
    length = spring_length(d)
    return 0.5 * ks[0] * (length - ks[1]) * (length - ks[1])


def law_energy(law, d):
    """A recorded spring's learned elastic potential at its vector ``d`` (3):
    :meth:`~mc2fmu.models.spring_laws.SpringLaw.potential` of ``l = |d|`` (an expression node
    or a number is taken through a one-element array, the laws' array convention)."""
    length = spring_length(d)
    if isinstance(length, expr.Expr):
        return law.potential(np.array([length], dtype=object))[0]
    if np.ndim(length) == 0 and not type(length).__module__.startswith("casadi"):  # a number
        return law.potential(np.array([length], dtype=np.result_type(length, np.float64)))[0]
    return law.potential(length)


def spring_vector(geometry: "MotionGeometry", s: int, x) -> list:
    """Spring ``s``'s vector ``d = D x + e`` (its maps are data: the end points' affine weights)."""
    D, e = geometry.spring_D, geometry.spring_e
    d = []
    for a in range(3):
        acc = float(e[s, a])
        for n in np.flatnonzero(D[s, a]):
            acc = acc + float(D[s, a, n]) * x[n]
        d.append(acc)
    return d


def motion_outputs(geometry: MotionGeometry, x, xd, theta) -> list:
    """Every motion output (:func:`output_names`' order) of ``x``, ``xd`` (n_x scalars each) and
    the physical parameters ``theta``: numbers, arrays (one value per sample), CasADi symbols or
    :class:`~.expr.Expr` leaves.  Per body :func:`body_outputs`; the energies are the bodies'
    sums, in body order, then the springs' in spring order (:func:`spring_energy`, then a learned
    law's :func:`law_energy`)."""
    out: list = []
    kinetic, potential = 0.0, 0.0
    nb = geometry.n_bodies
    g = [theta[BODY_SLOTS * nb + a] for a in range(3)]
    for b, (o, L, com) in enumerate(zip(geometry.offsets, geometry.lengths, geometry.coms)):
        mass = body_mass_entries(theta[BODY_SLOTS * b: BODY_SLOTS * (b + 1)], L, com)
        vals = body_outputs(x[o:o + 12], xd[o:o + 12], mass, g, (L, *com))
        out += vals[:6]
        kinetic = kinetic + vals[6]
        potential = potential + vals[7]
    slot = BODY_SLOTS * nb + 3
    for s in range(len(geometry.spring_D)):
        d = spring_vector(geometry, s, x)
        potential = potential + spring_energy(d, (theta[slot + 3 * s], theta[slot + 3 * s + 2]))
        law = geometry.law(s)
        if law is not None:
            potential = potential + law_energy(law, d)
    return out + [kinetic, potential]


def traced(geometry: MotionGeometry, n_x: int, n_theta: int) -> list:
    """The outputs as :class:`~.expr.Expr` graphs of the leaves ``x``, ``xd`` and ``theta``."""
    expr.clear()
    return [expr.Expr.wrap(o) for o in motion_outputs(geometry, expr.inputs("x", n_x), expr.inputs("xd", n_x),
                                                      expr.inputs("theta", n_theta))]


def traced_parts() -> tuple[list, "expr.Expr"]:
    """:func:`body_outputs` and :func:`spring_energy` as graphs of generic leaves (``x``,
    ``xd`` 12, ``mass`` :data:`~mc2fmu.mechanics.parameters.MASS_VALUES`, ``g`` 3, ``geo`` 4;
    ``d`` 3, ``ks`` 2): what the native FMU's C prints once and runs per body and per spring
    (each body's mass block is the physics' own, formed when the parameters are set:
    :func:`traced_mass`)."""
    expr.clear()
    body = [expr.Expr.wrap(o) for o in body_outputs(expr.inputs("x", 12), expr.inputs("xd", 12),
                                                     expr.inputs("mass", MASS_VALUES), expr.inputs("g", 3),
                                                     expr.inputs("geo", 4))]
    return body, expr.Expr.wrap(spring_energy(expr.inputs("d", 3), expr.inputs("ks", 2)))


def traced_law_energy(law) -> tuple[list, "expr.Expr"]:
    """:func:`law_energy` of ``law`` as the native FMU's C prints it per law
    (``MC2FMU_(law_potential)``): a learnt potential (``form = "potential"``) is one graph of the
    leaves ``d`` (3), returned with no nodes; a ``"tension"`` law's quadrature is two graphs, so
    that the C evaluates ``g`` between them through the law's own function (its network printed
    once): the quadrature's node lengths of the leaves ``d``, and the potential of the leaves
    ``d`` and ``g`` (``g`` at those nodes)."""
    from .spring_laws import POTENTIAL_NODES

    expr.clear()
    d = expr.inputs("d", 3)
    if law.form != "tension":
        return [], expr.Expr.wrap(law_energy(law, d))
    length = spring_length(d)
    nodes = [expr.Expr.wrap(v) for v in law.potential_nodes(length)]
    total = expr.Expr.wrap(law.potential_sum(length, expr.inputs("g", POTENTIAL_NODES)))
    return nodes, total


def traced_mass() -> list:
    """:func:`~mc2fmu.mechanics.parameters.body_mass_entries` as a graph of the leaves ``th``
    (:data:`~mc2fmu.mechanics.parameters.BODY_SLOTS`) and ``geo`` (the point length, the layout's
    centre of mass): the native FMU's C of a body's mass block."""
    expr.clear()
    geo = expr.inputs("geo", 4)
    return [expr.Expr.wrap(o) for o in body_mass_entries(expr.inputs("th", BODY_SLOTS), geo[0], geo[1:4])]


def evaluate(geometry: MotionGeometry, x: np.ndarray, xd: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The outputs (B, 6 n_b + 2) of states ``x``, ``xd`` (B, n_x) and parameters ``theta``."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    xd = np.atleast_2d(np.asarray(xd, dtype=np.float64))
    theta = np.asarray(theta, dtype=np.float64)
    vals = motion_outputs(geometry, list(x.T), list(xd.T), [float(t) for t in theta])
    return np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), (len(x),)) for v in vals], axis=1)
