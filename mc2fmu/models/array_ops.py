"""The few library functions that differ between numpy and torch, picked by array type.

The reduced dynamics (:mod:`mc2fmu.models.manifold`) and the identified terms
(:mod:`mc2fmu.models.terms`) are written once for both: :func:`ops` returns the namespace for
an array (numpy, or torch imported only when a tensor is given).

CasADi's symbols (``SX``, ``MX``, ``DM``) get CasADi's functions: the CasADi export
(:mod:`mc2fmu.control.casadi_export`) evaluates the decoder's MLP on them, a batch of one as a
row ``(1, n)`` (so ``a[:, i]`` is a ``(1, 1)`` entry; ``einsum`` and ``movedim`` have no CasADi
form).  numpy object arrays get numpy's functions entry by entry, with softplus, sigmoid,
``abs``, ``maximum`` and ``select_greater`` decided per entry: an expression node of
:mod:`mc2fmu.models.expr` (code traced to be printed), a CasADi scalar (the CasADi export runs
the reduced dynamics, the learned spring laws and the identified terms on object arrays of
them, einsum included) or a number.  A traced array of :mod:`mc2fmu.models.array_trace` brings
its own namespace.

A complex numpy array gets numpy's functions with ``|a|`` and softplus's threshold continued
from the real axis (their branch picked by the real part), so that the same arithmetic
evaluated at ``x + i h s`` gives the directional derivative ``Im f / h = f'(x) s`` exactly, to
rounding (the complex step, Squire & Trapp 1998; ``mc2fmu linearize`` uses it, the native FMU's
C does the same with ``double _Complex``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

Array = Any  # numpy.ndarray or torch.Tensor


def _np_softplus(a):
    # torch's softplus (beta 1, threshold 20): the identity above 20
    return np.where(a > 20.0, a, np.log1p(np.exp(np.minimum(a, 20.0))))


_NUMPY = SimpleNamespace(
    einsum=np.einsum, sqrt=np.sqrt, cos=np.cos, sin=np.sin, tanh=np.tanh, abs=np.abs, exp=np.exp,
    sigmoid=lambda a: 1.0 / (1.0 + np.exp(-a)), softplus=_np_softplus,
    stack=lambda xs, axis: np.stack(xs, axis=axis), movedim=np.moveaxis,
    zeros=lambda shape, like: np.zeros(shape, dtype=like.dtype),
    affine=lambda z, W, b: z @ W.T + b, linear=lambda z, W: z @ W.T, maximum=np.maximum,
    select_greater=lambda a, b, x, y: np.where(np.asarray(a) > np.asarray(b), x, y),
)


def _cs_abs(a):
    # sign(Re a) a: |a| on the real axis, analytic off it (np.abs of a complex is its modulus)
    return a * np.sign(a.real)


def _cs_softplus(a):
    big = a.real > 20.0
    return np.where(big, a, np.log1p(np.exp(np.where(big, 20.0, a))))


def _cs_maximum(a, b):
    # the larger by the real parts (a at a tie): the chosen side's value and derivative
    return np.where(np.real(a) >= np.real(b), a, b)


def _cs_sigmoid(a):
    # 1 / (1 + exp(-a)) is nan + nan j far below zero (exp overflows to a complex infinity)
    return 0.5 * (1.0 + np.tanh(0.5 * a))


def _cs_select_greater(a, b, x, y):
    # decided by the real parts: the chosen side's value and derivative
    return np.where(np.real(a) > np.real(b), x, y)


_COMPLEX = SimpleNamespace(**{**vars(_NUMPY), "abs": _cs_abs, "softplus": _cs_softplus, "sigmoid": _cs_sigmoid,
                              "maximum": _cs_maximum, "select_greater": _cs_select_greater})


def _is_casadi(v) -> bool:
    return type(v).__module__.startswith("casadi")


def _is_node(v) -> bool:
    # an expression node of mc2fmu.models.expr (which imports this module: known by its methods)
    return hasattr(v, "select_of")


def _number(v) -> float:
    if isinstance(v, (int, float, np.integer, np.floating, np.bool_)):
        return float(v)
    raise TypeError(f"an object array holds {type(v).__name__}: expression nodes, CasADi's scalars or numbers only")


def _object_softplus(a):
    # per entry: an expression node's own softplus (a node of that function), CasADi's, a number's as numpy's
    def one(v):
        if hasattr(v, "softplus"):
            return v.softplus()
        return _casadi().softplus(v) if _is_casadi(v) else float(_np_softplus(np.float64(_number(v))))

    return np.frompyfunc(one, 1, 1)(a)


def _object_sigmoid(a):
    # per entry: an expression node's as numpy's formula (a node of each operation), CasADi's (no exp
    # overflow far below 0), a number's by tanh (no overflow either)
    def one(v):
        if _is_node(v):
            return 1.0 / (1.0 + np.exp(-v))
        return _casadi().sigmoid(v) if _is_casadi(v) else float(0.5 * (1.0 + np.tanh(0.5 * _number(v))))

    return np.frompyfunc(one, 1, 1)(a)


def _object_abs(a):
    # per entry: an expression node's own |a|, CasADi's, a number's
    def one(v):
        if _is_node(v):
            return abs(v)
        return _casadi().abs(v) if _is_casadi(v) else abs(_number(v))

    return np.frompyfunc(one, 1, 1)(a)


def _object_maximum(a, b):
    # per entry: an expression node's max (a node of expr.maximum, by the node's own max_of), CasADi's,
    # numbers' as numpy's
    def one(x, y):
        node = x if hasattr(x, "max_of") else y if hasattr(y, "max_of") else None
        if node is not None:
            return node.max_of(x, y)
        if _is_casadi(x) or _is_casadi(y):
            return _casadi().maximum(x, y)
        return float(np.maximum(_number(x), _number(y)))

    return np.frompyfunc(one, 2, 1)(a, b)


def _object_select_greater(a, b, x, y):
    # per entry: an expression node's select (a node of expr.select_greater, by the node's own
    # select_of), CasADi's if_else, numbers' as Python's
    def one(a, b, x, y):
        node = next((v for v in (a, b, x, y) if hasattr(v, "select_of")), None)
        if node is not None:
            return node.select_of(a, b, x, y)
        if any(_is_casadi(v) for v in (a, b, x, y)):
            return _casadi().select_greater(a, b, x, y)
        return x if _number(a) > _number(b) else y

    return np.frompyfunc(one, 4, 1)(a, b, x, y)


#: numpy object arrays, entry by entry: :mod:`.expr` nodes (code traced to be printed), CasADi's
#: scalar symbols (the CasADi export's dynamics) or numbers.  numpy's functions call the entries'
#: methods of their names; softplus, sigmoid, abs, maximum and select_greater decide per entry
#: (a node of their own, CasADi's function, or numpy's on a number)
_OBJECT = SimpleNamespace(**{**vars(_NUMPY), "softplus": _object_softplus, "sigmoid": _object_sigmoid,
                             "abs": _object_abs, "maximum": _object_maximum,
                             "select_greater": _object_select_greater})
_TORCH: SimpleNamespace | None = None


def _casadi_ops() -> SimpleNamespace:
    import casadi as ca

    def stack(xs, axis):
        # the row convention: a batch of one, so every item is one (1, 1) entry
        if any(x.shape != (1, 1) for x in xs):
            raise ValueError("stack on CasADi symbols takes (1, 1) entries (a batch of one as a row), not "
                             f"{[x.shape for x in xs]}")
        return ca.horzcat(*xs) if axis in (1, -1) else ca.vertcat(*xs)

    return SimpleNamespace(
        sqrt=ca.sqrt, cos=ca.cos, sin=ca.sin, tanh=ca.tanh, abs=ca.fabs, exp=ca.exp,
        sigmoid=lambda a: 0.5 * (1.0 + ca.tanh(0.5 * a)),  # no exp overflow (a NaN derivative) far below 0
        # torch's softplus (beta 1, threshold 20), as _np_softplus
        softplus=lambda a: ca.if_else(a > 20.0, a, ca.log1p(ca.exp(ca.fmin(a, 20.0)))),
        stack=stack, affine=lambda z, W, b: ca.mtimes(z, ca.DM(np.asarray(W).T)) + ca.DM(np.asarray(b)).T,
        linear=lambda z, W: ca.mtimes(z, ca.DM(np.asarray(W).T)),
        maximum=ca.fmax, select_greater=lambda a, b, x, y: ca.if_else(a > b, x, y),
    )


_CASADI: SimpleNamespace | None = None


def _casadi() -> SimpleNamespace:
    global _CASADI
    if _CASADI is None:
        _CASADI = _casadi_ops()
    return _CASADI


def _torch_maximum(a, b):
    # a number on one side takes the tensor's dtype and device
    import torch

    like = a if isinstance(a, torch.Tensor) else b
    return torch.maximum(torch.as_tensor(a, dtype=like.dtype, device=like.device),
                         torch.as_tensor(b, dtype=like.dtype, device=like.device))


def ops(a: Array) -> SimpleNamespace:
    """The library functions for ``a``'s array type (numpy, CasADi's symbols, or torch imported
    only for tensors)."""
    global _TORCH
    own = getattr(type(a), "array_ops", None)  # a traced array's own (mc2fmu.models.array_trace)
    if own is not None:
        return own
    if isinstance(a, (np.ndarray, np.generic)):
        if a.dtype == object:
            return _OBJECT
        return _COMPLEX if np.iscomplexobj(a) else _NUMPY
    if _is_casadi(a):
        return _casadi()
    if _TORCH is None:
        import torch

        _TORCH = SimpleNamespace(
            einsum=torch.einsum, sqrt=torch.sqrt, cos=torch.cos, sin=torch.sin, tanh=torch.tanh, abs=torch.abs,
            exp=torch.exp,
            sigmoid=torch.sigmoid, softplus=torch.nn.functional.softplus,
            stack=lambda xs, axis: torch.stack(xs, dim=axis), movedim=torch.movedim,
            zeros=lambda shape, like: torch.zeros(shape, dtype=like.dtype),
            affine=torch.nn.functional.linear, linear=torch.nn.functional.linear,
            maximum=_torch_maximum, select_greater=lambda a, b, x, y: torch.where(torch.as_tensor(a > b), x, y),
        )
    return _TORCH
