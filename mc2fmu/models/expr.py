"""A small scalar expression graph: maths written once in Python, evaluated on numbers or
traced into a graph that is printed as C or Modelica.

A description written with Python's arithmetic operators, :func:`sqrt`, :func:`maximum` and
:func:`select_greater` (or numpy's ``sqrt``, ``sin``, ``cos``, ``tanh`` on arrays of
expressions, which call the nodes' methods of those names) runs unchanged on

* floats or numpy arrays (one value per sample: the run-time model, ``simulate``);
* CasADi symbols (``SX``), whose own graph CasADi differentiates;
* :class:`Expr` leaves (:func:`inputs`), alone or in numpy object arrays (so numpy code such
  as :func:`mc2fmu.models.terms.evaluate` traces through): the operations are recorded, and
  :func:`emit_c`, :func:`emit_modelica` and :func:`emit_python` print them as straight-line
  code.

Equal subexpressions are one node (hash-consing), constants fold, and ``0 * a``, ``1 * a``,
``0 + a`` simplify, so a description may loop over sparse constant matrices without care.
The C is written for the scalar type ``mc2fmu_real`` and the functions ``MC2FMU_SQRT``,
``MC2FMU_SIN``, ``MC2FMU_COS``, ``MC2FMU_TANH``, ``MC2FMU_EXP``, ``MC2FMU_ABS``,
``MC2FMU_(softplus)`` and ``MC2FMU_(max)`` of the native FMU's dynamics header, which includes
it once for ``double`` and once for ``double _Complex`` (the directional derivatives by the
complex step).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from .array_ops import ops

_TABLE: dict[tuple, "Expr"] = {}


class Expr:
    """One node: ``op`` is ``const`` (``value`` a float), ``in`` (``value`` = (array name,
    index)), ``+``, ``-``, ``*``, ``/``, ``max`` (:func:`maximum`), ``gt`` (:func:`select_greater`),
    ``neg`` or one of :data:`FUNCTIONS`."""

    __slots__ = ("op", "args", "value")

    def __new__(cls, op: str, args: tuple = (), value=None):
        key = (op, tuple(id(a) for a in args), value)
        node = _TABLE.get(key)
        if node is None:
            node = super().__new__(cls)
            node.op, node.args, node.value = op, args, value
            _TABLE[key] = node
        return node

    # ---------------------------------------------------------------- arithmetic

    @staticmethod
    def wrap(a) -> "Expr":
        if isinstance(a, Expr):
            return a
        if isinstance(a, (int, float, np.floating, np.integer)) and not isinstance(a, bool):
            v = float(a)
            if not math.isfinite(v):
                raise ValueError(f"an expression constant must be finite, not {v!r}")
            return Expr("const", (), v + 0.0)  # -0.0 and 0.0 are one node
        raise TypeError(f"cannot combine an expression with {type(a).__name__}")

    def is_const(self, v: float | None = None) -> bool:
        return self.op == "const" and (v is None or self.value == v)

    def __add__(self, other):
        if isinstance(other, np.ndarray):  # element-wise: numpy's reflected operation
            return NotImplemented
        a, b = self, Expr.wrap(other)
        if a.is_const() and b.is_const():
            return Expr.wrap(a.value + b.value)
        if a.is_const(0.0):
            return b
        if b.is_const(0.0):
            return a
        return Expr("+", (a, b))

    def __radd__(self, other):
        return Expr.wrap(other) + self

    def __sub__(self, other):
        if isinstance(other, np.ndarray):  # element-wise: numpy's reflected operation
            return NotImplemented
        a, b = self, Expr.wrap(other)
        if a.is_const() and b.is_const():
            return Expr.wrap(a.value - b.value)
        if b.is_const(0.0):
            return a
        if a.is_const(0.0):
            return -b
        return Expr("-", (a, b))

    def __rsub__(self, other):
        return Expr.wrap(other) - self

    def __mul__(self, other):
        if isinstance(other, np.ndarray):  # element-wise: numpy's reflected operation
            return NotImplemented
        a, b = self, Expr.wrap(other)
        if a.is_const() and b.is_const():
            return Expr.wrap(a.value * b.value)
        if a.is_const(0.0) or b.is_const(0.0):
            return Expr.wrap(0.0)
        if a.is_const(1.0):
            return b
        if b.is_const(1.0):
            return a
        if a.is_const(-1.0):
            return -b
        if b.is_const(-1.0):
            return -a
        return Expr("*", (a, b))

    def __rmul__(self, other):
        return Expr.wrap(other) * self

    def __truediv__(self, other):
        if isinstance(other, np.ndarray):  # element-wise: numpy's reflected operation
            return NotImplemented
        a, b = self, Expr.wrap(other)
        if b.is_const(0.0):
            raise ZeroDivisionError("an expression divided by the constant 0")
        if a.is_const() and b.is_const():
            return Expr.wrap(a.value / b.value)
        if b.is_const(1.0):
            return a
        if a.is_const(0.0):
            return a
        return Expr("/", (a, b))

    def __rtruediv__(self, other):
        return Expr.wrap(other) / self

    def __neg__(self):
        if self.is_const():
            return Expr.wrap(-self.value)
        if self.op == "neg":
            return self.args[0]
        return Expr("neg", (self,))

    def __repr__(self) -> str:
        return f"Expr({self.op!r}, value={self.value!r}, {len(self.args)} args)"

    # ---------------------------------------------------------------- functions (numpy's ufuncs
    # on object arrays call these methods)

    def _function(self, name: str) -> "Expr":
        if self.is_const():
            return Expr.wrap(FUNCTIONS[name][0](self.value))
        return Expr(name, (self,))

    def sqrt(self):
        return self._function("sqrt")

    def sin(self):
        return self._function("sin")

    def cos(self):
        return self._function("cos")

    def tanh(self):
        return self._function("tanh")

    def exp(self):
        return self._function("exp")

    def __abs__(self):
        return self._function("abs")

    def softplus(self):
        return self._function("softplus")

    @staticmethod
    def max_of(a, b) -> "Expr":
        """:func:`maximum` of two operands, at least one a node (numpy's object arrays call it)."""
        return maximum(a, b)

    @staticmethod
    def select_of(a, b, x, y) -> "Expr":
        """:func:`select_greater` of four operands, at least one a node (numpy's object arrays call it)."""
        return select_greater(a, b, x, y)


def _softplus(a: float) -> float:
    """torch's softplus (beta 1, threshold 20): the identity above 20."""
    return a if a > 20.0 else math.log1p(math.exp(a))


#: the functions a node may apply: name -> (its float form, then its C, Modelica and Python: a
#: function name, or a function of the argument's text that writes the call)
FUNCTIONS = {
    "sqrt": (math.sqrt, "MC2FMU_SQRT", "sqrt", "math.sqrt"),
    "sin": (math.sin, "MC2FMU_SIN", "sin", "math.sin"),
    "cos": (math.cos, "MC2FMU_COS", "cos", "math.cos"),
    "tanh": (math.tanh, "MC2FMU_TANH", "tanh", "math.tanh"),
    "exp": (math.exp, "MC2FMU_EXP", "exp", "math.exp"),
    # |a|; the C's complex-step twin takes sign(Re a) a
    "abs": (abs, "MC2FMU_ABS", "abs", "abs"),
    # torch's softplus; the C's MC2FMU_(softplus) decides its branch on the real part
    "softplus": (_softplus, "MC2FMU_(softplus)", lambda t: f"(if noEvent({t} > 20.0) then {t} else log(1.0 + exp({t})))",
                 lambda t: f"({t} if {t} > 20.0 else math.log1p(math.exp({t})))"),
}
_C, _MODELICA, _PYTHON = 1, 2, 3


def apply(name: str, a):
    """The function ``name`` of :data:`FUNCTIONS` of an expression (a node, folded if constant),
    a number (numpy's), or an array, a CasADi symbol or a tensor (its library's, :func:`ops`)."""
    if isinstance(a, Expr):
        return a._function(name)
    if isinstance(a, (int, float)):
        a = np.float64(a)
    return getattr(ops(a), name)(a)


def sqrt(a):
    """The square root of a number, an array, a CasADi symbol, a tensor or an expression."""
    return apply("sqrt", a)


def maximum(a, b):
    """The larger of ``a`` and ``b``, ``a`` at a tie, elementwise: numbers, arrays, CasADi
    symbols, tensors or expressions (a ``max`` node; folded when both are constants).  Written
    ``MC2FMU_(max)`` in C, whose complex-step twin picks by the real parts (so the derivative is
    the chosen side's), ``max`` in Modelica and Python.  A NaN is not ordered, and the forms
    differ on one (numpy: NaN; CasADi's ``fmax``: the other operand; C: ``b``; Python: ``a``
    unless ``b > a``): callers decide finiteness first."""
    if isinstance(a, Expr) or isinstance(b, Expr):
        a, b = Expr.wrap(a), Expr.wrap(b)
        if a.is_const() and b.is_const():
            return Expr.wrap(a.value if a.value >= b.value else b.value)
        if a is b:
            return a
        return Expr("max", (a, b))
    like = b if isinstance(a, (int, float, complex)) else a
    if isinstance(like, (int, float, complex)):
        like = np.asarray(like)
    return ops(like).maximum(a, b)


def select_greater(a, b, x, y):
    """``x`` where ``a > b``, else ``y`` (elementwise): numbers, arrays, CasADi symbols, tensors
    or expressions (a ``gt`` node; folded when ``a`` and ``b`` are constants).  Written ``(a > b ?
    x : y)`` in C, whose complex-step twin compares the real parts (so the derivative is the
    chosen side's), ``if noEvent(a > b) then x else y`` in Modelica.  A NaN in ``a`` or ``b`` selects
    ``y`` in every form."""
    if any(isinstance(v, Expr) for v in (a, b, x, y)):
        a, b, x, y = (Expr.wrap(v) for v in (a, b, x, y))
        if a.is_const() and b.is_const():
            return x if a.value > b.value else y
        if x is y:
            return x
        return Expr("gt", (a, b, x, y))
    vals = [v for v in (a, b, x, y) if not isinstance(v, (int, float, complex))]
    if not vals:  # numbers (complex ones, numpy's included, by their real parts)
        return x if np.real(a) > np.real(b) else y
    return ops(vals[0]).select_greater(a, b, x, y)


def clear() -> None:
    """Forget the table of nodes (memory; nodes made before and after are then never shared,
    which costs only sharing).  The table holds every node it returned, so a key's argument
    identities stay valid while it is in it."""
    _TABLE.clear()


def inputs(name: str, n: int) -> list[Expr]:
    """``n`` leaves ``name[0]``, ..., ``name[n-1]``."""
    return [Expr("in", (), (name, i)) for i in range(n)]


# ------------------------------------------------------------------ printing


def _order(outputs: Sequence[Expr]) -> list[Expr]:
    """The nodes the outputs read, each after its arguments (iterative depth-first)."""
    seen: set[int] = set()
    order: list[Expr] = []
    for root in outputs:
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if id(node) in seen:
                continue
            if done or not node.args:
                seen.add(id(node))
                order.append(node)
                continue
            stack.append((node, True))
            for a in reversed(node.args):
                if id(a) not in seen:
                    stack.append((a, False))
    return order


def _const(v: float) -> str:
    text = repr(float(v))
    return text if ("." in text or "e" in text or "n" in text) else text + ".0"


_C_BINARY = {"+": "+", "-": "-", "*": "*", "/": "/"}
_PYTHON_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "max": maximum}
#: the ``max`` node's call in C, Modelica and Python (indexed as FUNCTIONS' forms)
_MAX = (None, "MC2FMU_(max)", "max", "max")
#: the ``gt`` node (:func:`select_greater`) in C, Modelica and Python, of the operands' texts;
#: always a temporary of its own (in Modelica an if-expression as an equation's whole
#: right-hand side, the form the export's own equations use, its relation in ``noEvent``: the
#: descriptions select among formulas that agree at the switch, or guard a singular value, so
#: a tool has no event to place there)
_SELECT = (None, lambda a, b, x, y: f"(MC2FMU_RE({a}) > MC2FMU_RE({b}) ? {x} : {y})",
           lambda a, b, x, y: f"if noEvent({a} > {b}) then {x} else {y}",
           lambda a, b, x, y: f"({x} if {a} > {b} else {y})")
#: the deepest nesting of parentheses an inlined expression gets before it becomes a
#: temporary: a long sum (an energy over 81 bodies) printed as one expression nested 800 deep,
#: past pymoca's parser (it failed between 160 and 163) and slow for C compilers
MAX_DEPTH = 16


def _print(outputs: Sequence[Expr], leaf, temp, language: int,
           divide=lambda a, b: f"({a} / {b})", made: list[int] | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """``(assignments, results)``: each interior node read more than once or by an output as
    a temporary ``(name, expression)``, in order, and each output's expression; ``made``, if
    given, receives per output the number of assignments made when its expression was complete
    (the outputs are visited in order: every assignment it reads is among them, and none that
    only later outputs read)."""
    order = _order(outputs)
    uses: dict[int, int] = {}
    for node in order:
        for a in node.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
    for node in outputs:
        uses[id(node)] = uses.get(id(node), 0) + 2
    text: dict[int, str] = {}
    depth: dict[int, int] = {}  # the parentheses an inlined expression nests
    count: dict[int, int] = {}  # the assignments made when a node's expression is complete
    assignments: list[tuple[str, str]] = []
    for node in order:
        d = 1 + max((depth[id(a)] for a in node.args), default=-1)
        if node.op == "const":
            s = _const(node.value)
            s = f"({s})" if node.value < 0 else s
        elif node.op == "in":
            s = leaf(*node.value)
        elif node.op == "neg":
            s = f"(-{text[id(node.args[0])]})"
        elif node.op in FUNCTIONS:
            form, arg = FUNCTIONS[node.op][language], text[id(node.args[0])]
            s = form(arg) if callable(form) else f"{form}({arg})"
        elif node.op == "/":
            s = divide(*(text[id(x)] for x in node.args))
        elif node.op == "max":
            s = f"{_MAX[language]}({text[id(node.args[0])]}, {text[id(node.args[1])]})"
        elif node.op == "gt":
            s = _SELECT[language](*(text[id(x)] for x in node.args))
        else:
            a, b = (text[id(x)] for x in node.args)
            s = f"({a} {_C_BINARY[node.op]} {b})"
        if node.args and (uses.get(id(node), 0) > 1 or d > MAX_DEPTH or node.op == "gt"):
            name = temp(len(assignments))
            assignments.append((name, s))
            s, d = name, 0
        text[id(node)] = s
        depth[id(node)] = d
        count[id(node)] = len(assignments)
    if made is not None:
        made[:] = [count[id(o)] for o in outputs]
    return assignments, [text[id(o)] for o in outputs]


def emit_c(outputs: Sequence, out: str = "out", indent: str = "    ", ctype: str = "mc2fmu_real") -> str:
    """C statements that set ``out[k]`` to output ``k`` (inputs as ``name[i]``), in the scalar
    type ``ctype`` (default ``mc2fmu_real``)."""
    return emit_c_calls(outputs, CallTrace("call"), None, out=out, indent=indent, ctype=ctype)  # no calls


class CallTrace:
    """The calls of an opaque function inside a traced description (a step map's calls of the
    acceleration, which the target computes its own way): called with the arguments
    (expressions), it records them and returns the results, new leaves ``{result}{k}[i]`` of
    call ``k``.  :func:`emit_c_calls` prints the description with each call a statement
    between what its arguments read and what reads its results."""

    def __init__(self, result: str, n_out: int | None = None):
        self.result, self.n_out = result, n_out
        self.calls: list[list[Expr]] = []

    def __call__(self, args: Sequence) -> list[Expr]:
        if not len(args):
            raise ValueError("a traced call needs at least one argument (its arguments are a C array)")
        k = len(self.calls)
        self.calls.append([Expr.wrap(a) for a in args])
        return inputs(self.name(k), self.size(k))

    def name(self, k: int) -> str:
        """The C array of call ``k``'s results."""
        return f"{self.result}{k}"

    def size(self, k: int) -> int:
        """How many results call ``k`` has."""
        return len(self.calls[k]) if self.n_out is None else self.n_out


def emit_c_calls(outputs: Sequence, trace: CallTrace, call, arg: str = "arg", out="out",
                 leaf=lambda name, i: f"{name}[{i}]", indent: str = "    ", ctype: str = "mc2fmu_real") -> str:
    """C statements that set ``out[k]`` to output ``k`` of a description that made the calls
    ``trace`` holds: call ``k``'s arguments are written to an array ``{arg}{k}``, then
    ``call(k)`` (the C statement that fills ``{trace.result}{k}``) runs, each after the
    temporaries it reads and before those that read its results.  ``leaf(name, i)`` gives an
    input's C expression (not the call results': those are ``{result}{k}[i]``); ``out``: the
    output array's name, or ``out(k)`` the C lvalue of output ``k``."""
    outs = [Expr.wrap(o) for o in outputs]
    roots = [a for args in trace.calls for a in args]
    results = {trace.name(k) for k in range(len(trace.calls))}
    leaves = lambda name, i: f"{name}[{i}]" if name in results else leaf(name, i)  # noqa: E731
    made: list[int] = []
    assignments, texts = _print(roots + outs, leaves, lambda k: f"t{k}", _C, made=made)
    lines = [f"{indent}{ctype} " + ", ".join(
        f"{arg}{k}[{len(args)}], {trace.name(k)}[{trace.size(k)}]" for k, args in enumerate(trace.calls)) + ";"] \
        if trace.calls else []
    done, r = 0, 0
    for k, args in enumerate(trace.calls):
        ready = max([done] + [made[r + i] for i in range(len(args))])
        lines += [f"{indent}const {ctype} {n} = {s};" for n, s in assignments[done:ready]]
        lines += [f"{indent}{arg}{k}[{i}] = {texts[r + i]};" for i in range(len(args))]
        lines.append(f"{indent}{call(k)}")
        done, r = ready, r + len(args)
    lines += [f"{indent}const {ctype} {n} = {s};" for n, s in assignments[done:]]
    target = out if callable(out) else (lambda k: f"{out}[{k}]")
    lines += [f"{indent}{target(k)} = {s};" for k, s in enumerate(texts[r:])]
    return "\n".join(lines)


def emit_modelica(outputs: Sequence, leaf, prefix: str) -> tuple[list[str], list[str]]:
    """``(temporaries, expressions)``: the names of the temporaries (``prefix0``, ...) and, in
    order, the equations that set them, then each output's expression; ``leaf(name, i)`` gives
    an input's Modelica expression.  A quotient is written ``a * b^(-1)`` (pymoca 0.12 cannot
    compile ``/`` with CasADi 3.8; docs/modelica.md)."""
    outs = [Expr.wrap(o) for o in outputs]
    assignments, results = _print(outs, leaf, lambda k: f"{prefix}{k}", _MODELICA, lambda a, b: f"({a} * {b}^(-1))")
    return [n for n, _ in assignments], [f"{n} = {s};" for n, s in assignments] + results


def emit_python(outputs: Sequence, name: str, args: Sequence[str]) -> str:
    """A Python function ``name(*args)`` returning the outputs' list, as straight-line scalar
    code (inputs as ``arg[i]``, functions from ``math``): for floats, fast at a few
    hundred operations."""
    outs = [Expr.wrap(o) for o in outputs]
    assignments, results = _print(outs, lambda arg, i: f"{arg}[{i}]", lambda k: f"t{k}", _PYTHON)
    lines = [f"def {name}({', '.join(args)}):"]
    lines += [f"    {n} = {s}" for n, s in assignments]
    lines.append("    return [" + ", ".join(results) + "]")
    return "\n".join(lines)


def evaluate(outputs: Sequence, values: dict[str, Sequence]) -> list:
    """The outputs' values with each input ``name[i]`` taken from ``values[name][i]`` (floats,
    arrays or symbols): what a printed form computes, for tests of the printers."""
    cache: dict[int, object] = {}
    outs = [Expr.wrap(o) for o in outputs]
    for node in _order(outs):
        if node.op == "const":
            v = node.value
        elif node.op == "in":
            name, i = node.value
            v = values[name][i]
        elif node.op == "neg":
            v = -cache[id(node.args[0])]
        elif node.op in FUNCTIONS:
            v = apply(node.op, cache[id(node.args[0])])
        elif node.op == "gt":
            v = select_greater(*(cache[id(x)] for x in node.args))
        else:
            a, b = (cache[id(x)] for x in node.args)
            v = _PYTHON_BINARY[node.op](a, b)
        cache[id(node)] = v
    return [cache[id(o)] for o in outs]
