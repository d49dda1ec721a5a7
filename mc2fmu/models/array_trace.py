"""Array-level tracing: a description written on batched arrays runs on :class:`Arr` symbols
(a batch of one) and is recorded as Modelica array equations.

:mod:`mc2fmu.models.expr` traces scalars: right for the poses, the envelope or the reduced
dynamics' assembly, wrong for a network, whose 64 x 64 layer with its Jacobian rows would be
tens of thousands of scalar nodes.  Here an array is one symbol: a matrix product with a
constant (a layer's weights) prints as one Modelica matrix product, an element-wise formula
as one ``for`` loop.  What it records is what the description does through :func:`ops` (the
namespace :data:`ARRAY_OPS`) and Python's operators:

* ``affine(z, W, b)`` (``z W^T + b``), ``linear(T, W)`` (``T W^T`` over the last axis), the
  einsum ``"bm,bmn->bn"`` and ``swap`` (the last two axes transposed): each a named variable
  and one equation (``W`` and ``b`` become protected parameter arrays);
* element-wise arithmetic (``+ - * /``, numbers, numpy's broadcasting, ``a[:, None]``) and
  ``tanh``, ``exp``, ``log``, ``sigmoid``, ``softplus``: kept as a formula per entry until an
  array operation or the caller needs the array, then one ``for`` loop (over the last axis,
  one statement per leading index: pymoca 0.12 compiles no nested loops).  The functions'
  results are named at once (a ``tanh`` is evaluated once however often its value is read);
  arithmetic formulas are inlined where they are read, not shared (right for a network's
  few element-wise steps, not for a long chain of them).

The Modelica written keeps to the export's subset (docs/modelica.md): a quotient is ``a *
b^(-1)``, the softplus threshold an if-expression in ``noEvent``.  Arrays carry their leading
batch axis of one in their shape; the printed variables do not.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Callable

import numpy as np


def _literal(v: float) -> str:
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"a traced constant must be finite, not {v!r}")
    text = repr(v)
    text = text if any(c in text for c in ".e") else text + ".0"
    return f"({text})" if text.startswith("-") else text


def _array_literal(values: np.ndarray, indent: str = "      ") -> str:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        items = [_literal(v).strip("()") for v in values]
        return "{" + (",\n" + indent).join(", ".join(items[i:i + 6]) for i in range(0, len(items), 6)) + "}"
    return "{" + (",\n" + indent).join(_array_literal(row, indent + " ") for row in values) + "}"


class Program:
    """The record of one trace: declarations (``Real NAME[dims]``, each with its description),
    parameter arrays (constants) and equations, in order; fresh names ``{prefix}{k}``."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.variables: list[tuple[str, str, str]] = []  # (name, dims, description)
        self.parameters: list[tuple[str, str, str, str]] = []  # (name, dims, value, description)
        self.equations: list[str] = []
        self._count = 0
        self._constants: dict[int, tuple[np.ndarray, str]] = {}

    def fresh(self) -> str:
        name = f"{self.prefix}{self._count}"
        self._count += 1
        return name

    def input(self, name: str, *shape: int) -> "Arr":
        """An array the caller declares and sets (e.g. the states ``q``), of shape ``(1, *shape)``."""
        return Arr(self, (1, *shape), name=name)

    def constant(self, value: np.ndarray, description: str, name: str | None = None) -> str:
        """The name of a parameter array holding ``value`` (one per array object)."""
        key, original = id(value), value
        if key in self._constants and self._constants[key][0] is original:
            return self._constants[key][1]
        value = np.asarray(value, dtype=np.float64)
        name = name or self.fresh()
        self.parameters.append((name, "[" + ", ".join(map(str, value.shape)) + "]", _array_literal(value), description))
        self._constants[key] = (original, name)  # held, so its id is not reused during the trace
        return name

    def named(self, a: "Arr", name: str | None = None, description: str = "a traced array") -> "Arr":
        """``a`` as a declared variable (``name``, or a fresh one), its loop written if it was a formula."""
        if a.name is not None and name is None:
            return a
        dims = a.shape[1:]
        if not dims:
            raise ValueError("a traced array needs an axis after the batch axis (a value per sample is shape (1, 1))")
        name = name or self.fresh()
        self.variables.append((name, "[" + ", ".join(map(str, dims)) + "]", description))
        if a.name is not None:  # a declared array under a new name
            self.equations.append(f"{name} = {a.name};")
            return Arr(self, a.shape, name=name)
        n = dims[-1]
        lead = list(np.ndindex(*dims[:-1]))
        lines = [f"for i in 1:{n} loop"]
        for idx in lead:
            ix = tuple(k + 1 for k in idx) + ("i",)
            lines.append(f"  {name}[{', '.join(map(str, ix))}] = {a.elem(ix)};")
        lines.append("end for;")
        self.equations += lines
        return Arr(self, a.shape, name=name)


class Arr:
    """A traced array of ``shape`` (a leading batch axis of one): a declared variable ``name``, or
    a formula ``elem(index)`` per entry (the index without the batch axis, 1-based numbers or
    the loop variable's name)."""

    __array_ufunc__ = None  # numpy's operators and functions defer to this class's (or refuse)

    def __init__(self, prog: Program, shape: tuple[int, ...], name: str | None = None,
                 elem: Callable[[tuple], str] | None = None):
        if shape[0] != 1:
            raise ValueError(f"a traced array has a batch of one, not shape {shape}")
        self.prog, self.shape, self.name = prog, tuple(shape), name
        self.elem = elem if elem is not None else (lambda ix: f"{name}[{', '.join(map(str, ix))}]")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    array_ops: SimpleNamespace  # set below: ops() returns it for this class

    # -------------------------------------------------------------- element-wise

    def _entry(self, shape: tuple[int, ...]) -> Callable[[tuple], str]:
        """This array's entry at an index of the broadcast ``shape`` (without the batch axis;
        numpy's rules: the shapes aligned at their ends, an axis of one repeated)."""
        own = self.shape[1:]
        skip = len(shape) - len(own)
        return lambda ix: self.elem(tuple(1 if d == 1 else i for d, i in zip(own, ix[skip:])))

    def _binary(self, other, fmt: str, swap: bool = False) -> "Arr":
        if isinstance(other, Arr):
            shape = (1, *np.broadcast_shapes(self.shape[1:], other.shape[1:]))
            a, b = self._entry(shape[1:]), other._entry(shape[1:])
        elif isinstance(other, (int, float, np.floating, np.integer)) and not isinstance(other, bool):
            if other == 0 and fmt.endswith("^(-1))") and not swap:
                raise ValueError("a traced array divided by the number 0")
            shape, a, lit = self.shape, self._entry(self.shape[1:]), _literal(other)
            b = lambda ix: lit  # noqa: E731
        else:
            return NotImplemented
        if swap:
            a, b = b, a
        return Arr(self.prog, shape, elem=lambda ix: fmt.format(a(ix), b(ix)))

    def __add__(self, o):
        return self._binary(o, "({} + {})")

    def __radd__(self, o):
        return self._binary(o, "({} + {})", swap=True)

    def __sub__(self, o):
        return self._binary(o, "({} - {})")

    def __rsub__(self, o):
        return self._binary(o, "({} - {})", swap=True)

    def __mul__(self, o):
        return self._binary(o, "({} * {})")

    def __rmul__(self, o):
        return self._binary(o, "({} * {})", swap=True)

    def __truediv__(self, o):
        return self._binary(o, "({} * {}^(-1))")

    def __rtruediv__(self, o):
        return self._binary(o, "({} * {}^(-1))", swap=True)

    def __neg__(self):
        return Arr(self.prog, self.shape, elem=lambda ix: f"(-{self.elem(ix)})")

    def __getitem__(self, key) -> "Arr":
        """``a[:, None]``: a new axis after the batch axis (what a description broadcasts with)."""
        if key != (slice(None), None):
            raise NotImplementedError(f"a traced array takes the index [:, None] only, not {key!r}")
        return Arr(self.prog, (1, 1, *self.shape[1:]), elem=lambda ix: self.elem(ix[1:]))

    def apply(self, form: Callable[[str], str]) -> "Arr":
        """``form`` of each entry, named at once (evaluated once however often it is read)."""
        entry = Arr(self.prog, self.shape, elem=lambda ix: form(self.elem(ix)))
        return self.prog.named(entry, description="a traced function's values")


# ------------------------------------------------------------------ array operations


def _matrix(prog: Program, shape: tuple[int, ...], rhs: str, description: str) -> Arr:
    name = prog.fresh()
    prog.variables.append((name, "[" + ", ".join(map(str, shape[1:])) + "]", description))
    prog.equations.append(f"{name} = {rhs};")
    return Arr(prog, shape, name=name)


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"a traced array operation got mismatched shapes: {what}")


def _affine(z: Arr, W, b) -> Arr:
    W = np.asarray(W)
    _check(z.ndim == 2 and W.ndim == 2 and W.shape[1] == z.shape[1] and np.shape(b) == (W.shape[0],),
           f"affine of {z.shape} with W {W.shape}, b {np.shape(b)}")
    z = z.prog.named(z)
    Wn = z.prog.constant(W, f"weights ({W.shape[0]} x {W.shape[1]})")
    bn = z.prog.constant(b, "biases")
    return _matrix(z.prog, (1, W.shape[0]), f"{Wn} * {z.name} + {bn}", "an affine layer's values")


def _linear(T: Arr, W) -> Arr:
    """``T W^T`` over ``T``'s last axis: a row (1, k) or rows (1, m, k)."""
    W = np.asarray(W)
    _check(W.ndim == 2 and W.shape[1] == T.shape[-1], f"linear map of {T.shape} with W {W.shape}")
    T = T.prog.named(T)
    Wn = T.prog.constant(W, f"weights ({W.shape[0]} x {W.shape[1]})")
    if T.ndim == 2:
        return _matrix(T.prog, (1, W.shape[0]), f"{Wn} * {T.name}", "a linear map's values")
    if T.ndim == 3:
        return _matrix(T.prog, (1, T.shape[1], W.shape[0]), f"{T.name} * transpose({Wn})", "a linear map's rows")
    raise NotImplementedError(f"a traced linear map takes rows of 1 or 2 axes after the batch, not {T.shape}")


def _einsum(spec: str, *args: Arr) -> Arr:
    if spec.replace(" ", "") != "bm,bmn->bn":
        raise NotImplementedError(f"a traced einsum is 'bm,bmn->bn' only, not {spec!r}")
    _check(len(args) == 2 and args[0].ndim == 2 and args[1].ndim == 3 and args[0].shape[1] == args[1].shape[1],
           f"'bm,bmn->bn' of {[a.shape for a in args]}")
    v, J = (a.prog.named(a) for a in args)
    return _matrix(J.prog, (1, J.shape[2]), f"transpose({J.name}) * {v.name}", "rows times a vector")


def _swap(T: Arr) -> Arr:
    """The last two axes transposed (1, a, b) -> (1, b, a), as a formula."""
    _check(T.ndim == 3, f"swap of {T.shape} (rows of two axes after the batch)")
    return Arr(T.prog, (1, T.shape[2], T.shape[1]), elem=lambda ix: T.elem((ix[1], ix[0])))


def _softplus(a: Arr) -> Arr:
    # torch's softplus (beta 1, threshold 20), as numpy's run-time model
    return a.apply(lambda e: f"(if noEvent({e} > 20.0) then {e} else log(1.0 + exp({e})))")


#: the namespace :func:`mc2fmu.models.array_ops.ops` returns for :class:`Arr`
ARRAY_OPS = SimpleNamespace(
    affine=_affine, linear=_linear, einsum=_einsum, swap=_swap,
    tanh=lambda a: a.apply(lambda e: f"tanh({e})"), exp=lambda a: a.apply(lambda e: f"exp({e})"),
    log=lambda a: a.apply(lambda e: f"log({e})"),
    sigmoid=lambda a: a.apply(lambda e: f"(1.0 + exp(-{e}))^(-1)"), softplus=_softplus,
)
Arr.array_ops = ARRAY_OPS
