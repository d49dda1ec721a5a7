"""``mc2fmu export MODEL --format modelica -o DIR/NAME.mo``: the reduced model as Modelica source.

One self-contained file, ``model NAME``, in the Modelica language only (no Modelica Standard
Library, no external code): the decoder-manifold model's reduced dynamics as equations the
importing tool differentiates, sorts and solves itself.

* the decoder by explicit forward propagation over arrays, training's own
  :func:`mc2fmu.models.mlp.mlp_jv` traced as array equations (:mod:`mc2fmu.models.array_trace`):
  per hidden layer the value, the Jacobian's rows and the second derivative along the
  velocity; the output layer gives ``x``, ``Jr`` and ``s`` (the NC points, the rows of
  ``dx/dq`` and ``H : (qd, qd)``);
* the NC mass matrix's 4x4 point mass blocks as parameters of the physical parameters (printed
  from :func:`mc2fmu.mechanics.parameters.body_mass_entries`, with the centre-of-mass offset
  from the trained points);
* ``der(q) = qd`` and ``Mm * der(qd) = rhs``, ``Mm = J^T M J`` and ``rhs = J^T (f - M s) +
  J^T f_spring + Xi^T lambda`` (gravity, the input loads, the springs with a recorded spring's
  learned law, the identified terms) printed from the run-time model's own
  :mod:`mc2fmu.models.manifold` traced on ``x``, ``J`` and ``s``: the FMUs' reduced dynamics;
* each body's origin and quaternion from the decoded points (printed from
  :mod:`mc2fmu.models.poses`, as the native FMU's C), ``q``, ``qd``, ``envelope`` and a warning-level
  ``assert`` when it rises above the leave threshold.

The subset of Modelica it keeps to (docs/modelica.md): literal array constructors in
parameter bindings only (an array constructor of variables or of parameter expressions is
not used), scalar parameter expressions, matrix products, ``transpose``, ``for`` loops in the
equation section, if-expressions, ``sqrt``/``tanh``/``exp``/``log``/``abs``/``max``, and no
division operator (``a * b^(-1)``; pymoca 0.12 cannot compile ``/`` with CasADi 3.8).  Which
models it takes is :mod:`mc2fmu.capabilities`' table (decoder-manifold models).
"""

from __future__ import annotations

import math
import os
import re
import string
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import __version__
from ..capabilities import require
from ..errors import ExportError
from ..files import atomic_output
from ..mechanics.parameters import BODY_SLOTS, MASS_ENTRIES, body_mass_entries
from ..mechanics.variants import INERTIA_ENTRIES, principal_inertia
from ..mechanics.variants import parameter_names, parameter_vector
from ..models.envelope import LEAVE_THRESHOLD, traced as envelope_traced
from ..models.expr import Expr, clear as expr_clear, emit_modelica, inputs as expr_inputs
from ..models.array_trace import Program
from ..models.manifold import applied_force, manifold_terms, reduced_force
from ..models.mlp import get_activation, mlp_jv
from ..models.motion import MotionGeometry, output_names, traced as motion_traced
from ..models.poses import body_pose
from ..models.terms import active_terms

TEMPLATE = Path(__file__).with_name("templates") / "model.mo.in"
#: Modelica 3.6 keywords (section 2.3.3), which no generated name may be
KEYWORDS = set("""algorithm and annotation block break class connect connector constant constrainedby der
discrete each else elseif elsewhen encapsulated end enumeration equation expandable extends external false final
flow for function if import impure in initial inner input loop model not operator or outer output package
parameter partial protected public pure record redeclare replaceable return stream then true type when while
within""".split())
#: built-in functions and operators of Modelica 3.6 (chapter 3.7) a name must not shadow
BUILTINS = set("""abs sign sqrt div mod rem ceil floor integer sin cos tan asin acos atan atan2 sinh cosh tanh exp log
log10 max min sum product transpose outerProduct identity diagonal zeros ones fill linspace cat ndims size scalar
vector matrix cross skew symmetric smooth noEvent homotopy semiLinear inStream actualStream spatialDistribution
getInstanceName initial terminal pre edge change reinit sample delay cardinality assert terminate String time
Integer Real Boolean""".split())
#: the predefined types (section 4.8) and the names the exported model itself refers to: a class or
#: a component of one of these names would hide them ("Cannot redeclare predefined type")
RESERVED = {"Real", "Integer", "Boolean", "String", "StateSelect", "ExternalObject", "AssertionLevel", "Clock",
            "Modelica"}


def _literal(v: float) -> str:
    """A real literal, sign included (where an expression may start: an array element)."""
    v = float(v)
    if not math.isfinite(v):
        raise ExportError(f"a model value {v} is not finite; the model cannot be written as Modelica")
    text = repr(v)
    return text if any(c in text for c in ".e") else text + ".0"


def _num(v: float) -> str:
    """A real literal inside an expression: a negative one in parentheses (Modelica's grammar
    has no unary minus after a binary operator: ``a - -1`` and ``a * -1`` are not Modelica)."""
    text = _literal(v)
    return f"({text})" if text.startswith("-") else text


def _vector(values, per_line: int = 6, indent: str = "      ") -> str:
    vals = [_literal(v) for v in np.ravel(values)]
    lines = [", ".join(vals[i:i + per_line]) for i in range(0, len(vals), per_line)]
    return "{" + (",\n" + indent).join(lines) + "}"


def _string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Source:
    """Declarations (public and protected) and equations, in order; ``names`` the declared
    names (a name declared twice is an error at the end)."""

    def __init__(self) -> None:
        self.public: list[str] = []
        self.protected: list[str] = []
        self.equations: list[str] = []
        self.names: list[str] = []

    def par(self, name: str, value: str, desc: str, unit: str | None = None, dims: str = "",
            protected: bool = False) -> None:
        mod = ""
        if unit:
            mod = f'({"each " if dims else ""}unit="{unit}")'
        line = f"  parameter Real {name}{dims}{mod} = {value} {_string(desc)};"
        (self.protected if protected else self.public).append(line)
        self.names.append(name)

    def var(self, decl: str, desc: str, protected: bool = True) -> None:
        (self.protected if protected else self.public).append(f"  {decl} {_string(desc)};")
        self.names.append(re.match(r"(?:(?:input|output)\s+)?Real\s+([A-Za-z_][A-Za-z0-9_]*)", decl).group(1))

    def eq(self, *lines: str) -> None:
        self.equations += ["  " + ln for ln in lines]


def modelica_name(name: str) -> str:
    """The Modelica class name a file ``NAME.mo`` gets, checked."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in KEYWORDS | BUILTINS | RESERVED:
        raise ExportError(f"'{name}' cannot name a Modelica model (letters, digits and _, not starting with a digit, "
                          "not a keyword, a predefined type or a name the model uses such as AssertionLevel); "
                          "choose another output file name, e.g. -o FourBarROM.mo")
    return name


def _check_names(art, src: _Source, mechanism_names: list[str]) -> None:
    """Every declared name once, none a keyword or a built-in, and the mechanism's names (bodies,
    inputs, springs) not taken by what the model declares for itself."""
    seen: set[str] = set()
    problems = []
    for n in src.names:
        if n in seen:
            problems.append(f"'{n}' would be declared twice")
        seen.add(n)
    for n in mechanism_names:
        if n in KEYWORDS or n in BUILTINS or n in RESERVED:
            problems.append(f"'{n}' is a Modelica keyword or built-in function, a predefined type or a name the "
                            "model uses")
    if problems:
        raise ExportError([f"{art.path}: the mechanism's names do not make a valid Modelica model: {p}; rename the "
                           "body, input or spring in the mechanism file (and train again), or export an FMU"
                           for p in dict.fromkeys(problems)])


def modelica_source(art, name: str) -> str:
    """The Modelica source of a decoder-manifold model artifact, ``model name``."""
    from ..models.manifold import ManifoldModel

    require(art, "modelica", ExportError)
    model = art.model
    assert isinstance(model, ManifoldModel)  # the table gives modelica to decoder-manifold models only
    mech, layout = art.mechanism, art.layout
    m, n_x, n_u = art.dof, layout.size, art.n_u
    bodies = mech.bodies
    src = _Source()
    inputs = [i.name for i in mech.inputs]

    # ---------------------------------------------------------------- parameters
    init = art.initial_state
    src.par("q_start", _vector(init.q), "initial value of q (the first training run's)", dims=f"[{m}]")
    src.par("qd_start", _vector(init.qd), "initial value of qd", dims=f"[{m}]")
    src.par("gravity", _vector(mech.gravity), "gravity, global frame", "m/s2", dims="[3]")
    for b, bl in zip(bodies, layout.bodies):
        src.par(f"{b.name}_mass", _num(b.mass), f"mass of {b.name}", "kg")
        src.par(f"{b.name}_com", _vector(b.com), f"centre of mass of {b.name}, body frame", "m", dims="[3]")
        principal = principal_inertia(b)
        J = [float(b.inertia[i, j]) for i, j in INERTIA_ENTRIES[:3 if principal else 6]]
        src.par(f"{b.name}_inertia", _vector(J), f"inertia of {b.name} about its centre of mass, body axes: "
                + ("principal moments xx, yy, zz" if principal else "xx, yy, zz, xy, xz, yz"), "kg.m2",
                dims=f"[{len(J)}]")
        _mass_block(src, b.name, principal, bl.length, bl.com)
    laws = {law.spring: law for law in (model.springs.laws.laws if model.springs.laws is not None else [])}
    for k, s in enumerate(mech.springs):
        src.par(f"{s.name}_stiffness", _num(s.stiffness), f"stiffness of spring {s.name}", "N/m")
        if k not in laws:
            src.par(f"{s.name}_damping", _num(s.damping), f"damping of spring {s.name}", "N.s/m")
        src.par(f"{s.name}_length", _num(s.length), f"rest length of spring {s.name}", "m")

    # ---------------------------------------------------------------- inputs, states, outputs
    for inp in mech.inputs:
        unit = "N" if inp.kind == "force" else "N.m"
        src.var(f'input Real {inp.name}(unit="{unit}")',
                f"{inp.kind} on {inp.body} along {[float(c) for c in inp.direction]} (global frame)", protected=False)
    src.var(f"output Real q[{m}](start = q_start, each fixed = true)", "minimal coordinates (states)", protected=False)
    src.var(f"output Real qd[{m}](start = qd_start, each fixed = true)", "their rates (states)", protected=False)
    labels = {"x": "origin x", "y": "origin y", "z": "origin z", "qw": "quaternion w", "qx": "quaternion x",
              "qy": "quaternion y", "qz": "quaternion z"}
    for b in bodies:
        for c, label in labels.items():
            unit = "m" if c in "xyz" else "1"
            src.var(f'output Real {b.name}_{c}(unit="{unit}")', f"{b.name} body frame {label} (global frame)",
                    protected=False)
    src.var("output Real envelope", "0 inside the training envelope of q, qd and the inputs; otherwise the largest "
            "excursion outside it, in units of that channel's training span", protected=False)

    # ---------------------------------------------------------------- the decoder
    if n_u:
        src.var(f"Real u[{n_u}]", "the inputs as one array")
        src.eq(*[f"u[{i + 1}] = {n};" for i, n in enumerate(inputs)])
    _decoder(src, art, model)

    # ---------------------------------------------------------------- the reduced dynamics
    _dynamics(src, art, model, laws)
    src.eq("der(q) = qd;", "Mm * der(qd) = rhs;")

    # ---------------------------------------------------------------- outputs
    _poses(src, bodies, layout)
    _motion(src, art, model)
    _envelope(src, art, inputs)
    src.eq(f"assert(envelope <= {_num(LEAVE_THRESHOLD)}, \"{name}: the reduced model has left the envelope it was "
           "trained in (q, qd or an input outside the training range); its results are extrapolation\", "
           "AssertionLevel.warning);")

    _check_names(art, src, [b.name for b in bodies] + inputs + [s.name for s in mech.springs])
    coords = ", ".join(art.coordinates) if art.coordinates else f"{m} learnt coordinate(s)"
    return string.Template(TEMPLATE.read_text()).substitute(
        name=name, mechanism=mech.name, version=__version__, coordinates=coords,
        description=_string(f"mc2fmu reduced model of {mech.name}: {m} minimal coordinate(s), decoder-manifold "
                            "dynamics"),
        public="\n".join(src.public), protected="\n".join(src.protected), equations="\n".join(src.equations))


def _mass_block(src: _Source, b: str, principal: bool, L: float, c0) -> None:
    """The body's 4x4 point mass block and its row sums (gravity's weights), ``{b}_Aij`` (``i <=
    j``) and ``{b}_Rj``, as parameter expressions of its mass, centre of mass and inertia,
    printed from :func:`mc2fmu.mechanics.parameters.body_mass_entries` (the point length and the
    trained centre of mass are numbers)."""
    names = [f"{b}_mass"] + [f"{b}_com[{k + 1}]" for k in range(3)] + [f"{b}_inertia[{k + 1}]" for k in range(6)]
    expr_clear()
    th = expr_inputs("th", BODY_SLOTS)
    if principal:  # no products-of-inertia parameters: those slots are zero, and fold away
        th[7:10] = [0.0, 0.0, 0.0]
    entries = body_mass_entries(th, float(L), [float(c) for c in c0])
    temps, lines = emit_modelica(entries, lambda name, i: names[i], f"{b}_mt")
    for t, line in zip(temps, lines):
        src.par(t, line.split(" = ", 1)[1].rstrip(";"), f"{b}: a shared term of its point mass block", protected=True)
    results = lines[len(temps):]
    for (i, j), e in zip(MASS_ENTRIES, results):
        src.par(f"{b}_A{i}{j}", e, f"{b}: point mass block entry {i}, {j}", protected=True)
    for j, e in enumerate(results[len(MASS_ENTRIES):]):
        src.par(f"{b}_R{j}", e, f"{b}: gravity's weight on point {j}", protected=True)


def _decoder(src: _Source, art, model) -> None:
    """``x``, the Jacobian's rows ``Jr`` (``Jr[j, i] = dx_i/dq_j``), ``s = H : (qd, qd)`` and ``xd``:
    the features by hand, the network by :func:`mc2fmu.models.mlp.mlp_jv` (training's own
    propagation) traced as array equations (:mod:`mc2fmu.models.array_trace`), the output
    scaling folded into the last layer."""
    m = art.dof
    Ws, bs = list(model.decoder.weights), list(model.decoder.biases)
    nf = Ws[0].shape[1]
    src.var(f"Real z0[{nf}]", "the decoder's features (cos, sin of angle coordinates; z-scored others)")
    src.var(f"Real Jr0[{m}, {nf}]", "their Jacobian's rows, Jr0[j, f] = d z0[f] / dq[j]")
    src.var(f"Real sz0[{nf}]", "(d2 z0 / dq2) : (qd, qd)")
    f = 0
    for i in range(m):
        qi, vi = f"q[{i + 1}]", f"qd[{i + 1}]"
        if art.angles[i]:
            src.eq(f"z0[{f + 1}] = cos({qi});", f"z0[{f + 2}] = sin({qi});",
                   f"sz0[{f + 1}] = -cos({qi}) * {vi}^2;", f"sz0[{f + 2}] = -sin({qi}) * {vi}^2;")
            for j in range(m):
                src.eq(f"Jr0[{j + 1}, {f + 1}] = {'-sin(' + qi + ')' if j == i else '0.0'};",
                       f"Jr0[{j + 1}, {f + 2}] = {'cos(' + qi + ')' if j == i else '0.0'};")
            f += 2
        else:
            inv = 1.0 / float(model.q_scale[i])
            src.eq(f"z0[{f + 1}] = ({qi} - {_num(model.q_mean[i])}) * {_num(inv)};", f"sz0[{f + 1}] = 0.0;")
            for j in range(m):
                src.eq(f"Jr0[{j + 1}, {f + 1}] = {_num(inv) if j == i else '0.0'};")
            f += 1
    # the output layer with the de-normalisation folded in: x = x_mean + S (W_L z + b_L)
    layers = list(zip(Ws[:-1], bs[:-1])) + [(model.x_scale[:, None] * Ws[-1], model.x_mean + model.x_scale * bs[-1])]
    if not all(np.isfinite(W).all() and np.isfinite(b).all() for W, b in layers):
        raise ExportError(f"{art.path}: the decoder's weights with the output scaling folded in are not finite; "
                          "the model cannot be written as Modelica")
    prog = Program("mc2fmu_n")
    for k, (W, b) in enumerate(layers):
        last = k == len(layers) - 1
        what = "output layer with the output scaling" if last else f"layer {k + 1}"
        prog.constant(W, f"decoder {what}: weights ({W.shape[0]} x {W.shape[1]})", "Wo" if last else f"W{k + 1}")
        prog.constant(b, f"decoder {what}: biases", "bo" if last else f"b{k + 1}")
    x, Jr, s = mlp_jv(layers, get_activation(model.decoder.activation), prog.input("z0", nf), prog.input("Jr0", m, nf),
                      prog.input("sz0", nf), prog.input("qd", m))
    n_x = layers[-1][0].shape[0]
    for a, name, desc in ((x, "x", "the decoded natural coordinates (4 points per body)"),
                          (Jr, "Jr", "the rows of J = dx / dq: Jr[j, i] = dx[i] / dq[j]"),
                          (s, "s", "(d2x / dq2) : (qd, qd)")):
        prog.named(a, name, desc)
    for name, dims, value, desc in prog.parameters:
        src.par(name, value, desc, dims=dims, protected=True)
    for name, dims, desc in prog.variables:
        src.var(f"Real {name}{dims}", desc)
    src.eq(*prog.equations)
    src.var(f"Real xd[{n_x}]", "dx / dt = J qd")
    src.eq("xd = transpose(Jr) * qd;")


def _dynamics(src: _Source, art, model, laws: dict) -> None:
    """``Mm = J^T M J`` and ``rhs`` (``Mm * der(qd) = rhs``), printed from the run-time model's
    own :func:`mc2fmu.models.manifold.manifold_terms` and :func:`~mc2fmu.models.manifold.reduced_force`
    traced on the decoder's ``x``, ``J`` and ``s = H : (qd, qd)``: the mass matrix's blocks,
    gravity and the springs' constants as the Modelica parameters (a recorded spring's learned
    law and damping as trained), the input loads and the identified terms as numbers."""
    mech, layout = art.mechanism, art.layout
    m, n_x, n_u = art.dof, layout.size, art.n_u
    expr_clear()
    names: dict[str, Expr] = {}

    def par(name: str) -> Expr:  # a leaf that is the Modelica parameter (or parameter entry) ``name``
        if name not in names:
            names[name] = Expr("in", (), ("par", len(names)))
        return names[name]

    def row(name: str, *shape: int) -> np.ndarray:  # leaves name[i] as an object array, a batch of one
        return np.array(expr_inputs(name, int(np.prod(shape))), dtype=object).reshape(1, *shape)

    x, J, s, q, qd, u = row("x", n_x), row("J", n_x, m), row("s", n_x), row("q", m), row("qd", m), row("u", n_u)
    blocks = np.empty((len(layout.bodies), 4, 4), dtype=object)
    f_g = np.empty(n_x, dtype=object)
    for i, (b, bl) in enumerate(zip(mech.bodies, layout.bodies)):
        # the dynamics take M by blocks in the layout's order (manifold.mass_times)
        assert bl.offset == 12 * i, "a body's natural coordinates are the 12 after the previous body's"
        for j in range(4):
            for k in range(4):
                blocks[i, j, k] = par(f"{b.name}_A{min(j, k)}{max(j, k)}")
            for a in range(3):
                f_g[bl.offset + 3 * j + a] = par(f"{b.name}_R{j}") * par(f"gravity[{a + 1}]")
    sp = model.springs
    leaves = lambda fmt: np.array([par(fmt.format(c.name)) for c in mech.springs], dtype=object)  # noqa: E731
    damping = np.array([float(sp.c[k]) if k in laws else par(f"{c.name}_damping") for k, c in enumerate(mech.springs)],
                       dtype=object)
    springs = SimpleNamespace(D=sp.D, e=sp.e, k=leaves("{}_stiffness"), c=damping, L0=leaves("{}_length"),
                              laws=sp.laws)
    lib = active_terms(model.library)
    ident = None if lib is None else (lib, np.asarray(lib.Xi, dtype=np.float64), lib.param, q, u)
    terms = manifold_terms(x, J, None, blocks, applied_force(f_g, model.f_B, model.f_C, x, u), springs, ident)
    rhs = reduced_force(terms, qd, s)
    par_names = list(names)
    leaf = lambda name, i: par_names[i] if name == "par" else f"Jr[{i % m + 1}, {i // m + 1}]" if name == "J" \
        else f"{name}[{i + 1}]"  # noqa: E731
    temps, lines = emit_modelica([*terms.Mm[0].ravel(), *rhs[0]], leaf, "mc2fmu_d")
    for t in temps:
        src.var(f"Real {t}", "a shared term of the reduced dynamics")
    src.var(f"Real Mm[{m}, {m}]", "the reduced mass matrix J^T M J")
    src.var(f"Real rhs[{m}]", "the reduced force J^T (f - M s) + J^T f_spring (+ the identified terms)")
    results = lines[len(temps):]
    src.eq(*lines[:len(temps)])
    src.eq(*[f"Mm[{i + 1}, {j + 1}] = {results[i * m + j]};" for i in range(m) for j in range(m)])
    src.eq(*[f"rhs[{i + 1}] = {e};" for i, e in enumerate(results[m * m:])])


def _poses(src: _Source, bodies, layout) -> None:
    """Each body's origin and quaternion (``<body>_x`` ... ``<body>_qz``), printed from
    :func:`mc2fmu.models.poses.body_pose` of the decoded ``x`` (the body's length and
    centre-of-mass offset folded in as numbers): the text the native FMU and the python
    backend print, as equations."""
    x = expr_inputs("x", layout.size)
    outputs = []
    for bl in layout.bodies:
        p = x[bl.offset:bl.offset + 12]
        outputs += body_pose(p, float(bl.length), [float(c) for c in bl.com])
    temps, lines = emit_modelica(outputs, lambda name, i: f"x[{i + 1}]", "mc2fmu_p")
    for t in temps:
        src.var(f"Real {t}", "a shared term of the poses")
    src.eq(*lines[:len(temps)])
    names = [f"{b.name}_{c}" for b in bodies for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
    src.eq(*[f"{n} = {e};" for n, e in zip(names, lines[len(temps):])])


def _theta_leaf(mech):
    """``leaf("theta", k)``: the Modelica parameter of the physical parameter vector's slot
    ``k`` (:func:`mc2fmu.mechanics.variants.parameter_vector`'s order; the off-diagonal inertia
    of a body given principal moments is 0)."""
    principal = {b.name for b in mech.bodies if principal_inertia(b)}
    # parameter_names' slots, as the Modelica parameters (`body.com[1]` -> `body_com[1]`); a recorded
    # spring's damping is no parameter, but the motion outputs do not read it
    names = ["0.0" if n.split(".")[0] in principal and re.search(r"\.inertia\[[456]\]$", n) else n.replace(".", "_", 1)
             for n in parameter_names(mech)]

    def leaf(name: str, i: int) -> str:
        return {"x": lambda: f"x[{i + 1}]", "xd": lambda: f"xd[{i + 1}]", "theta": lambda: names[i]}[name]()

    return leaf


def _motion(src: _Source, art, model) -> None:
    """The motion outputs (``<body>_vx`` ... ``_wz``, ``kinetic_energy``, ``potential_energy``),
    printed from :func:`mc2fmu.models.motion.motion_outputs` with the decoder's ``xd = J qd``."""
    mech, layout = art.mechanism, art.layout
    n_x = layout.size
    geometry = MotionGeometry.of(layout, model.springs.D, model.springs.e, model.springs.laws)
    graph = motion_traced(geometry, n_x, len(parameter_vector(mech)))
    temps, lines = emit_modelica(graph, _theta_leaf(mech), "mc2fmu_m")
    for t in temps:
        src.var(f"Real {t}", "a shared term of the motion outputs")
    names = output_names([b.name for b in mech.bodies])
    for name, unit, desc in names:
        src.var(f'output Real {name.replace(".", "_")}(unit="{unit}")', desc, protected=False)
    src.eq(*lines[:len(temps)])
    src.eq(*[f"{name.replace('.', '_')} = {e};" for (name, _, _), e in zip(names, lines[len(temps):])])


def _envelope(src: _Source, art, inputs: list[str]) -> None:
    """``envelope``, printed from :func:`mc2fmu.models.envelope.traced` (the channels ``q``,
    ``qd``, then the inputs)."""
    m = art.dof
    names = [f"q[{i + 1}]" for i in range(m)] + [f"qd[{i + 1}]" for i in range(m)] + list(inputs)
    temps, lines = emit_modelica([envelope_traced(art.envelope)[1]], lambda name, i: names[i], "mc2fmu_env")
    for t in temps:
        src.var(f"Real {t}", "a shared term of the envelope's distance")
    src.eq(*lines[:len(temps)], f"envelope = {lines[len(temps)]};")


def export_modelica(model_dir: str | os.PathLike, out: str | os.PathLike,
                    mechanism: str | os.PathLike | None = None) -> dict[str, Any]:
    """Write ``out`` (``NAME.mo``, ``model NAME``) from a model directory (with the physical
    parameters of ``mechanism`` as the parameters' defaults when given); returns a summary."""
    from ..mechanics.mechanism import load_mechanism
    from ..models.artifact import load_artifact

    out = Path(out)
    if out.suffix != ".mo":
        raise ExportError(f"{out}: a Modelica export is a .mo file named after its model, e.g. -o {out.stem}.mo")
    name = modelica_name(out.stem)
    art = load_artifact(model_dir)
    require(art, "modelica", ExportError)  # before a variant: the model kind's reason first
    changed: list = []
    if mechanism is not None:
        art, changed = art.for_mechanism(load_mechanism(mechanism), mechanism)
    text = modelica_source(art, name)
    with atomic_output(out) as tmp:
        Path(tmp).write_text(text)
    return {"format": "modelica", "model": name, "path": str(out), "bytes": len(text.encode()), "changed": changed,
            "dof": art.dof, "inputs": [i.name for i in art.mechanism.inputs]}
