"""Learned laws of recorded force elements (``law = "recorded"`` springs, after seed 001).

A tool that exports an element's *force* but not its *law* (a progressive spring, a bump stop,
a digressive damper) gives, per sample, the element's tension ``T`` with its length ``l`` and
rate ``ldot`` (both exact from the exported poses).  mc2fmu learns the element's law in the
element's own coordinates,

    T(l, ldot) = k (l - L0) + c ldot  +  g(l)  +  ldot (h(l, ldot) - c),   h = softplus(...) >= 0,

(the linear part is the mechanism file's, zero when it gives none), two small MLPs ``g`` and
``h`` on normalised ``l`` and ``ldot``: ``h`` is the element's whole damping coefficient, so
the learned remainder may soften the given damper (a digressive one) but never make it active.
Then:

* the elastic part depends on ``l`` alone and is learnt as a potential: the network ``V(z)``
  plus ``quad z^2 / 2``, ``g`` its derivative, the network's propagated beside its value
  (:func:`~mc2fmu.models.mlp.mlp_slope`), so the element is conservative by construction and
  the motion outputs' potential energy adds the potential itself, one network evaluation
  (:meth:`SpringLaw.potential`); the quadratic part keeps ``g`` growing beyond the recorded
  lengths, where the network's slope fades.  Models saved before (``form = "tension"``) hold
  ``g`` as the network; their potential is a quadrature of it;
* the damper's power ``-ldot^2 h <= 0``: it never generates energy, by construction;
* the reduced dynamics project it like any spring, ``J^T f_spring(x, J qdot)``: the law holds in
  every configuration, not only along the training path.

This is seed 001's NN potential and NN damper taken one step closer to the element: the seed
fits ``U(q)`` and ``d(q, qdot)`` in the minimal coordinates, which ties the learned force to the
chart and to the states the training visited; the element-space law is the same force wherever
the mechanism goes, and its C form needs no network gradient.

Evaluation is written once for numpy and torch (the same arithmetic in training, ``simulate``,
the ONNX graphs), runs on CasADi's symbols (the CasADi export) and on object arrays of
expressions (the Modelica export's reduced dynamics), and is traced into expressions
(:func:`traced`) that the native FMU's C prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .array_ops import ops
from .mlp import MLPWeights, get_activation, mlp, mlp_slope

#: hidden widths of g and h as training makes them (every target takes laws of any widths: they
#: are printed from :func:`traced`)
HIDDEN = (16, 16)

#: the forms of a law's elastic network: ``"potential"`` (what training makes): the network is
#: the potential ``V`` on ``z`` (plus ``quad z^2 / 2``) in units of ``norm[3] norm[1]``, ``g`` its
#: derivative in ``l``; ``"tension"`` (models saved before): the network is ``g`` in units of ``norm[3]``
FORMS = ("potential", "tension")


def checked_form(spring: int, form: str) -> str:
    """``form`` if it is one of :data:`FORMS`, else a ValueError naming the spring's law."""
    if form not in FORMS:
        raise ValueError(f"spring law {spring}: form '{form}' is not one of {', '.join(FORMS)}")
    return form


def _saved_form(entry: dict) -> str:
    # a file before learnt potentials has no form: its network is g
    return checked_form(int(entry["spring"]), str(entry.get("form", "tension")))

#: Gauss-Legendre nodes of the potential of a ``"tension"`` law (:meth:`SpringLaw.potential`).  Measured on the
#: MacPherson strut's law against adaptive quadrature: 4e-9 J inside +-3 standard deviations of
#: the recorded lengths (1e-9 of the potential there), 7e-6 J at +-8; 24 nodes: 4e-13 and 4e-8 J,
#: 12 nodes: 5e-7 and 2e-4 J
POTENTIAL_NODES = 16
_GL_NODES, _GL_WEIGHTS = (tuple(float(v) for v in a) for a in np.polynomial.legendre.leggauss(POTENTIAL_NODES))


def _softplus(a):
    return ops(a).softplus(a)


@dataclass(frozen=True)
class SpringLaw:
    """One recorded spring's learned remainder: the elastic network ``g`` (1 -> 1) on ``z = (l -
    norm[0]) / norm[1]`` and ``h`` (3 -> 1) on ``z``, ``w = ldot / norm[2]`` and ``|w|`` (dampers
    are often functions of the speed, with a kink at rest), tensions in units of ``norm[3]``;
    ``norm[4]`` is the mechanism file's damping ``c`` (the learned damping is ``h - c``).

    ``form = "potential"``: the elastic part's potential is ``(V(z) + quad z^2 / 2) norm[3]
    norm[1]``, ``V`` the network ``g``, so the tension is ``(V'(z) + quad z) norm[3]``: the
    quadratic part (``quad``, (1,)) keeps the force growing beyond the recorded lengths, where
    the ``tanh`` network's slope fades to zero.  ``form = "tension"`` (models saved before):
    the network is the tension itself, in units of ``norm[3]``, and ``quad`` is unused."""

    spring: int  # index into the mechanism's springs
    g: MLPWeights  # the elastic network: V or g, by ``form``
    h: MLPWeights
    norm: Any  # (5,): l_mean, l_scale, ldot_scale, T_scale, c (an array or a tensor)
    form: str = "potential"  # one of FORMS
    quad: Any = None  # (1,): the potential's quadratic coefficient (form "potential"; None: 0)

    def __post_init__(self):
        checked_form(self.spring, self.form)

    def _z(self, length):
        z = (length - self.norm[0]) / self.norm[1]
        return ops(z).stack([z], 1)

    def elastic(self, length):
        """The elastic tension ``g(l)`` (N): the derivative of the learnt potential in ``l`` (or
        the network itself, ``form = "tension"``)."""
        act = get_activation(self.g.activation)
        z = self._z(length)
        if self.form == "tension":
            return mlp(self.g.layers, act, z)[:, 0] * self.norm[3]
        slope = mlp_slope(self.g.layers, act, z)[1][:, 0]
        if self.quad is not None:
            slope = slope + self.quad[0] * z[:, 0]
        return slope * self.norm[3]

    def total_damping(self, length, ldot):
        """The element's damping coefficient ``h(l, ldot) >= 0`` (N s/m), the given ``c`` included."""
        o = ops(length)
        w = ldot / self.norm[2]
        z = o.stack([(length - self.norm[0]) / self.norm[1], w, o.abs(w)], 1)
        return _softplus(mlp(self.h.layers, get_activation(self.h.activation), z)[:, 0]) * (self.norm[3] / self.norm[2])

    def damping(self, length, ldot):
        """The learned part of the damping coefficient, ``h - c`` (N s/m)."""
        return self.total_damping(length, ldot) - self.norm[4]

    def tension(self, length, ldot):
        return self.elastic(length) + ldot * self.damping(length, ldot)

    def potential(self, length):
        """The elastic part's potential ``U_g(l) = int g dl`` (J; the linear part's ``k (l -
        L0)^2 / 2`` is the spring's own), zero at the recorded lengths' mean ``norm[0]``: the
        learnt ``V + quad z^2 / 2`` itself (fitting sets ``V(0) = 0``); for a ``"tension"`` law a
        :data:`POTENTIAL_NODES`-point Gauss-Legendre quadrature of ``g`` on ``[norm[0], l]``
        (the native C evaluates ``g`` at :meth:`potential_nodes` through the law's own function
        and sums by :meth:`potential_sum`).  The same arithmetic on every array type, so every
        target's motion outputs add it alike (:func:`mc2fmu.models.motion.law_energy`)."""
        if self.form == "tension":
            return self.potential_sum(length, [self.elastic(node) for node in self.potential_nodes(length)])
        z = self._z(length)
        V = mlp(self.g.layers, get_activation(self.g.activation), z)[:, 0]
        if self.quad is not None:
            V = V + (0.5 * self.quad[0]) * (z[:, 0] * z[:, 0])
        return V * (self.norm[3] * self.norm[1])

    def potential_nodes(self, length) -> list:
        """The quadrature's nodes ``norm[0] + (l - norm[0]) (1 + xi) / 2``."""
        half = (length - self.norm[0]) * 0.5
        return [self.norm[0] + half * (1.0 + xi) for xi in _GL_NODES]

    def potential_sum(self, length, g_values):
        """``(l - norm[0]) / 2 sum w g(node)`` of ``g`` at :meth:`potential_nodes`."""
        total = 0.0
        for wi, g in zip(_GL_WEIGHTS, g_values):
            total = total + wi * g
        return (length - self.norm[0]) * 0.5 * total


@dataclass(frozen=True)
class SpringLaws:
    """The learned laws of a model's recorded springs (``n_springs`` springs in all)."""

    laws: tuple[SpringLaw, ...]
    n_springs: int

    def __len__(self) -> int:
        return len(self.laws)

    def tension(self, length, ldot):
        """The learned tensions (B, n_springs), zero for the springs without a law."""
        o = ops(length)
        cols = [length[:, s] * 0.0 for s in range(self.n_springs)]
        for law in self.laws:
            cols[law.spring] = law.tension(length[:, law.spring], ldot[:, law.spring])
        return o.stack(cols, 1)

    def converted(self, convert) -> "SpringLaws":
        """The same laws with every array passed through ``convert`` (e.g. to torch tensors)."""
        def weights(w: MLPWeights) -> MLPWeights:
            return MLPWeights(tuple(convert(a) for a in w.weights), tuple(convert(a) for a in w.biases), w.activation)

        return SpringLaws(tuple(SpringLaw(law.spring, weights(law.g), weights(law.h), convert(law.norm), law.form,
                                          None if law.quad is None else convert(law.quad))
                                for law in self.laws), self.n_springs)

    # -------------------------------------------------------------- saving

    def saved_features(self) -> frozenset[str]:
        """``"potential spring laws"`` when a law is of that form (see :data:`FORMS`)."""
        return frozenset({"potential spring laws"} if any(law.form == "potential" for law in self.laws) else ())

    def to_saved(self) -> tuple[dict, dict[str, np.ndarray]]:
        params, arrays = {"springs": [], "activation": "tanh"}, {}
        for law in self.laws:
            s = law.spring
            params["springs"].append({"spring": s, "g": law.g.widths, "h": law.h.widths, "form": law.form,
                                      "g_activation": law.g.activation, "h_activation": law.h.activation})
            arrays[f"law{s}.norm"] = np.asarray(law.norm, dtype=np.float64)
            if law.form == "potential":
                arrays[f"law{s}.quad"] = np.zeros(1) if law.quad is None else np.asarray(law.quad, dtype=np.float64)
            for name, w in (("g", law.g), ("h", law.h)):
                for i, (W, b) in enumerate(w.layers):
                    arrays[f"law{s}.{name}.W{i}"], arrays[f"law{s}.{name}.b{i}"] = W, b
        return params, arrays

    @staticmethod
    def array_shapes(params: dict, n_springs: int) -> dict[str, tuple[int, ...]]:
        shapes: dict[str, tuple[int, ...]] = {}
        seen = set()
        for entry in params["springs"]:
            s = int(entry["spring"])
            if not 0 <= s < n_springs or s in seen:
                raise ValueError(f"spring law for spring {s}: the mechanism has springs 0..{n_springs - 1}, one law each")
            seen.add(s)
            shapes[f"law{s}.norm"] = (5,)
            if _saved_form(entry) == "potential":
                shapes[f"law{s}.quad"] = (1,)
            for name, first in (("g", 1), ("h", 3)):
                widths = [int(w) for w in entry[name]]
                if widths[0] != first or widths[-1] != 1 or min(widths) < 1:
                    raise ValueError(f"spring law {s}: {name} widths {widths} must go from {first} to 1")
                for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
                    shapes[f"law{s}.{name}.W{i}"], shapes[f"law{s}.{name}.b{i}"] = (b, a), (b,)
        return shapes

    @classmethod
    def from_saved(cls, params: dict, arrays: dict[str, np.ndarray], n_springs: int) -> "SpringLaws":
        act = str(params.get("activation", "tanh"))
        get_activation(act)
        laws = []
        for entry in params["springs"]:
            s = int(entry["spring"])
            norm = arrays[f"law{s}.norm"]
            if not (norm[1] > 0 and norm[2] > 0 and norm[3] > 0 and norm[4] >= 0):
                raise ValueError(f"law{s}.norm: the scales (entries 2-4) must be > 0 and the damping (5) >= 0")

            def weights(name: str) -> MLPWeights:
                n = len(entry[name]) - 1
                own = str(entry.get(f"{name}_activation", act))  # a file before per-network activations: the shared one
                get_activation(own)
                return MLPWeights(tuple(arrays[f"law{s}.{name}.W{i}"] for i in range(n)),
                                  tuple(arrays[f"law{s}.{name}.b{i}"] for i in range(n)), own)

            form = _saved_form(entry)
            laws.append(SpringLaw(s, weights("g"), weights("h"), norm, form,
                                  arrays[f"law{s}.quad"] if form == "potential" else None))
        return cls(tuple(laws), n_springs)


# ------------------------------------------------------------------ fitting


def fit_laws(springs, mechanism_springs, x: np.ndarray, xd: np.ndarray, tension: np.ndarray,
             samples: int = 4000, iterations: int = 1500, seed: int = 0) -> tuple[SpringLaws, dict]:
    """Fit every recorded spring's remainder ``T - (k (l - L0) + c ldot)`` (its elastic part as
    the slope of a potential, ``form = "potential"``) on (``l``, ``ldot``)
    of the data (``x``, ``xd`` (n_t, n), the recorded ``tension`` (n_t, n_recorded) in mechanism
    order) by L-BFGS on the mean squared tension error; returns the laws and each one's rms
    residual relative to the recorded tension's rms."""
    import torch

    recorded = [i for i, sp in enumerate(mechanism_springs) if sp.recorded]
    d = springs.vectors(x)
    length = np.linalg.norm(d, axis=-1)
    n = d / length[..., None]
    ldot = np.einsum("tsi,sij,tj->ts", n, springs.D, xd)
    idx = np.linspace(0, len(x) - 1, min(samples, len(x))).round().astype(int)
    laws, report = [], {}
    gen = torch.Generator().manual_seed(seed)
    for r, s in enumerate(recorded):
        sp = mechanism_springs[s]
        l_s, v_s = length[idx, s], ldot[idx, s]
        target = tension[idx, r] - (springs.k[s] * (l_s - springs.L0[s]) + springs.c[s] * v_s)
        norm = np.array([l_s.mean(), max(l_s.std(), 1e-9), max(np.sqrt(np.mean(v_s**2)), 1e-12),
                         max(np.sqrt(np.mean(tension[idx, r] ** 2)), 1e-12), springs.c[s]])
        nets = [_net((1,) + HIDDEN + (1,), gen), _net((3,) + HIDDEN + (1,), gen)]
        L, V, Tt = (torch.as_tensor(a, dtype=torch.float64) for a in (l_s, v_s, target))
        quad = torch.zeros(1, dtype=torch.float64, requires_grad=True)
        params = [p for net in nets for p in net.parameters()] + [quad]
        opt = torch.optim.LBFGS(params, lr=1.0, max_iter=iterations, history_size=50, line_search_fn="strong_wolfe",
                                tolerance_grad=1e-12, tolerance_change=1e-15)
        norm_t = torch.as_tensor(norm)

        def law_of(nets) -> SpringLaw:
            return SpringLaw(s, _torch_weights(nets[0]), _torch_weights(nets[1]), norm_t, quad=quad)

        def closure():
            opt.zero_grad()
            pred = law_of(nets).tension(L, V)
            loss = ((pred - Tt) / norm_t[3]).pow(2).mean()
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            resid = (law_of(nets).tension(L, V) - Tt).numpy()
        law = SpringLaw(s, _zero_at_mean(_numpy_weights(nets[0])), _numpy_weights(nets[1]), norm,
                        quad=quad.detach().numpy().copy())
        laws.append(law)
        report[sp.name] = float(np.sqrt(np.mean(resid**2)) / norm[3])
    return SpringLaws(tuple(laws), len(mechanism_springs)), report


def _net(widths, gen):
    import torch

    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        lin = torch.nn.Linear(a, b, dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(b, a, generator=gen, dtype=torch.float64) * (1.0 / a) ** 0.5)
            lin.bias.zero_()
        layers.append(lin)
    return torch.nn.ModuleList(layers)


def _torch_weights(net) -> MLPWeights:
    return MLPWeights(tuple(layer.weight for layer in net), tuple(layer.bias for layer in net), "tanh")


def _zero_at_mean(V: MLPWeights) -> MLPWeights:
    """The potential network ``V`` shifted to ``V(0) = 0`` (its output bias): the potential is
    zero at the recorded lengths' mean, as a quadrature from there gives."""
    v0 = mlp(V.layers, get_activation(V.activation), np.zeros((1, 1)))[0, 0]
    return MLPWeights(V.weights, V.biases[:-1] + (V.biases[-1] - v0,), V.activation)


def _numpy_weights(net) -> MLPWeights:
    return MLPWeights(tuple(layer.weight.detach().numpy().copy() for layer in net),
                      tuple(layer.bias.detach().numpy().copy() for layer in net), "tanh")


def traced(law: SpringLaw) -> tuple:
    """The law's elastic tension ``g(l)`` and its learned damping ``h(l, ldot) - c`` as
    :mod:`~mc2fmu.models.expr` graphs of the leaves ``l[0]`` and ``ldot[0]``, its weights
    constants: :meth:`SpringLaw.elastic` and :meth:`SpringLaw.damping` themselves, run on numpy
    object arrays of the leaves."""
    from . import expr

    length = np.array(expr.inputs("l", 1), dtype=object)
    ldot = np.array(expr.inputs("ldot", 1), dtype=object)
    return expr.Expr.wrap(law.elastic(length)[0]), expr.Expr.wrap(law.damping(length, ldot)[0])
