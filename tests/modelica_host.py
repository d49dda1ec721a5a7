"""A Modelica file exported by mc2fmu, compiled by pymoca to CasADi and evaluated: the tests'
and the benchmark's independent reading of the equations (pymoca parses and flattens the
file itself; nothing of mc2fmu's code is involved).

pymoca 0.12 implements no ``assert`` ("Unknown function assert"): :func:`compile_modelica`
removes the exported file's one ``assert(...)`` statement (the envelope warning, standard
Modelica, which rumoca reads) and nothing else.

pymoca leaves the model as residual equations.  The dynamics (``der(q)``, ``der(qd)`` and
every algebraic variable but the pose outputs and the envelope) are solved from them with
CasADi's Newton iteration at given states, inputs and parameters; the equations are explicit
assignments plus the linear ``Mm * der(qd) = rhs``, so full Newton steps from any finite guess
resolve them level by level.  The pose outputs are then solved the same way from their own
equations (their guess: identity rotations)."""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

import numpy as np

OUTPUTS = re.compile(r"^(envelope|.*_(pol|pdet|qraw|qsign|x|y|z|qw|qx|qy|qz))$")
ASSERT = re.compile(r"^\s*assert\(.*\);\s*\n", re.M)


def compile_modelica(path: Path) -> tuple[object, float]:
    """pymoca's CasADi model of ``path`` (``NAME.mo``, ``model NAME``), parameters kept as
    symbols, and the compile time (s)."""
    import pymoca.backends.casadi.api as api

    path = Path(path)
    text = path.read_text()
    assert len(ASSERT.findall(text)) == 1, "the export has one assert, the envelope warning"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / path.name).write_text(ASSERT.sub("", text))
        t0 = time.perf_counter()
        model = api.transfer_model(tmp, path.stem, {"replace_constants": True, "replace_parameter_values": False,
                                                    "replace_parameter_expressions": True})
        return model, time.perf_counter() - t0


class CompiledModel:
    """Evaluate a pymoca model of an mc2fmu export: ``qdd(q, qd, u, parameters)``,
    ``outputs(q, qd, u, parameters)`` and :meth:`simulate`."""

    def __init__(self, path: Path):
        import casadi as ca

        self.ca = ca
        self.model, self.compile_seconds = compile_modelica(path)
        m = self.model
        vec = ca.vec
        self.states = {v.symbol.name(): v.symbol for v in m.states}
        self.q, self.qd = self.states["q"], self.states["qd"]
        self.dof = self.q.numel()
        ders = {v.symbol.name(): v.symbol for v in m.der_states}
        algs = [v.symbol for v in m.alg_states]
        self.inputs = [v.symbol for v in m.inputs]
        self.params = {v.symbol.name(): v for v in m.parameters}
        outs = [s for s in algs if OUTPUTS.match(s.name())]
        dyn = [ders["der(q)"], ders["der(qd)"]] + [s for s in algs if not OUTPUTS.match(s.name())]
        O = ca.vertcat(*[vec(s) for s in outs])
        dyn_eq = [vec(e) for e in m.equations if not ca.depends_on(e, O)]
        out_eq = [vec(e) for e in m.equations if ca.depends_on(e, O)]
        self.Z = ca.vertcat(*[vec(s) for s in dyn])
        self.X = ca.vertcat(self.q, self.qd)
        self.U = ca.vertcat(*[vec(s) for s in self.inputs]) if self.inputs else ca.MX.sym("nou", 0)
        self.P = ca.vertcat(*[vec(v.symbol) for v in m.parameters])
        known = ca.vertcat(self.X, self.U, self.P)
        g = ca.Function("dyn", [self.Z, known], [ca.vertcat(*dyn_eq)])
        self.solve_dyn = ca.rootfinder("solve_dyn", "fast_newton", g, {"abstol": 1e-14, "max_iter": 200})
        self.n_qdd = (self.dof, 2 * self.dof)  # der(qd)'s rows in Z (after der(q))
        # the outputs: their equations, given the dynamics' values
        self.out_syms = outs
        self.O = O
        h = ca.Function("out", [O, ca.vertcat(known, self.Z)], [ca.vertcat(*out_eq)])
        self.solve_out = ca.rootfinder("solve_out", "fast_newton", h, {"abstol": 1e-14, "max_iter": 200})
        guess = []
        for s in outs:
            n = s.numel()
            if s.name().endswith("_pol"):
                rows = s.size1()
                guess.append(np.tile(np.eye(3).ravel(), (rows, 1)).ravel(order="F"))
            elif s.name().endswith(("_pdet", "_qsign")):
                guess.append(np.ones(n))
            elif s.name().endswith("_qraw"):
                guess.append(np.array([1.0, 0.0, 0.0, 0.0]))
            else:
                guess.append(np.zeros(n))
        self.out_guess = np.concatenate(guess) if guess else np.zeros(0)

    def parameter_vector(self, values: dict[str, float | list] | None = None) -> np.ndarray:
        """The parameters' values (the file's, with ``values`` by name replacing them)."""
        values = values or {}
        unknown = set(values) - set(self.params)
        assert not unknown, f"no such parameters: {unknown}"
        out = []
        for name, v in self.params.items():
            val = np.asarray(values.get(name, v.value), dtype=float)
            out.append(val.ravel(order="F") if val.ndim == 2 else val.ravel())
        return np.concatenate(out)

    def _known(self, q, qd, u, p) -> np.ndarray:
        return np.concatenate([np.ravel(q), np.ravel(qd), np.ravel(u), p])

    def dynamics(self, q, qd, u, p: np.ndarray) -> np.ndarray:
        """Every dynamics unknown at one state (der(q) first, der(qd) next)."""
        guess = np.random.default_rng(0).uniform(0.5, 1.5, self.Z.shape[0])
        return np.asarray(self.solve_dyn(guess, self._known(q, qd, u, p))).ravel()

    def qdd(self, q, qd, u, p: np.ndarray) -> np.ndarray:
        a, b = self.n_qdd
        return self.dynamics(q, qd, u, p)[a:b]

    def outputs(self, q, qd, u, p: np.ndarray) -> dict[str, np.ndarray]:
        z = self.dynamics(q, qd, u, p)
        o = np.asarray(self.solve_out(self.out_guess, np.concatenate([self._known(q, qd, u, p), z]))).ravel()
        out, k = {}, 0
        for s in self.out_syms:
            n = s.numel()
            out[s.name()] = o[k:k + n]
            k += n
        return out

    def simulate(self, t: np.ndarray, q0, qd0, u_of_t, p: np.ndarray, rtol: float = 1e-11) -> np.ndarray:
        """``[q, qd]`` at the times ``t`` by CasADi's CVODES (the dynamics solved inside the
        right-hand side), the inputs ``u_of_t(t_sym)`` a CasADi expression of time."""
        ca = self.ca
        a, b = self.n_qdd
        x = ca.MX.sym("x", 2 * self.dof)
        ts = ca.MX.sym("t")
        guess = ca.DM(np.random.default_rng(0).uniform(0.5, 1.5, self.Z.shape[0]))
        u = u_of_t(ts) if self.inputs else ca.MX(0, 1)
        z = self.solve_dyn(guess, ca.vertcat(x, u, ca.DM(p)))
        dae = {"x": x, "t": ts, "ode": ca.vertcat(x[self.dof:], z[a:b])}
        F = ca.integrator("F", "cvodes", dae, float(t[0]), list(map(float, t[1:])),
                          {"abstol": 1e-12, "reltol": rtol, "max_num_steps": 200000})
        sol = np.asarray(F(x0=np.concatenate([np.ravel(q0), np.ravel(qd0)]))["xf"])
        return np.vstack([np.concatenate([np.ravel(q0), np.ravel(qd0)]), sol.T])
