"""A Modelica file exported by mc2fmu, compiled by pymoca to CasADi and evaluated: the tests'
and the benchmark's independent reading of the equations (pymoca parses and flattens the
file itself; nothing of mc2fmu's code is involved).

pymoca 0.12 implements neither ``assert`` ("Unknown function assert") nor ``noEvent``:
:func:`compile_modelica` removes the exported file's one ``assert(...)`` statement (the
envelope warning) and unwraps every ``noEvent(e)`` to ``e`` (an if-expression's relation: the
value is the same, only a tool's event handling differs), both standard Modelica, which
rumoca reads, and nothing else.

pymoca leaves the model as residual equations.  The dynamics (``der(q)``, ``der(qd)`` and
every algebraic variable but the pose outputs and the envelope) are solved from them with
CasADi's Newton iteration at given states, inputs and parameters; the equations are explicit
assignments plus the linear ``Mm * der(qd) = rhs``, so full Newton steps from any finite guess
resolve them level by level.  The pose outputs are then solved from their own equations in
block lower-triangular order (the unrolled polar iterations would take a whole-system Newton
far off before it converged)."""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

import numpy as np

#: the outputs' variables (of an export, or of one inside a system model: ``plant.crank_x``)
OUTPUTS = re.compile(r"^(.*\.)?(envelope|kinetic_energy|potential_energy|mc2fmu_m[0-9]+|mc2fmu_env[0-9]+|mc2fmu_p[0-9]+|"
                     r"[A-Za-z0-9_]*_(x|y|z|qw|qx|qy|qz|vx|vy|vz|wx|wy|wz))$")
ASSERT = re.compile(r"^\s*assert\(.*\);\s*\n", re.M)


NO_EVENT = re.compile(r'"|(?<![A-Za-z0-9_])noEvent\s*\(')  # a string literal's start, or a call


def without_no_event(text: str) -> str:
    """``text`` with each call ``noEvent(e)`` written ``(e)``: outside string literals (a
    description may name it), parentheses matched; an unbalanced call is an error."""
    out, i, n = [], 0, len(text)
    while (m := NO_EVENT.search(text, i)) is not None:
        out.append(text[i:m.start()])
        if m.group() == '"':  # a string literal, its escapes included: copied as it is
            j = m.end()
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[m.start():j + 1])
            i = j + 1
            continue
        depth, j = 1, m.end()
        while depth:
            assert j < n, f"unbalanced noEvent( at character {m.start()}"
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        out.append("(" + without_no_event(text[m.end():j - 1]) + ")")
        i = j
    return "".join(out) + text[i:]


def compile_modelica(path: Path, *others: Path) -> tuple[object, float]:
    """pymoca's CasADi model of ``path`` (``NAME.mo``, ``model NAME``; ``others``: files of the
    classes it uses), parameters kept as symbols, and the compile time (s)."""
    import pymoca.backends.casadi.api as api

    with tempfile.TemporaryDirectory() as tmp:
        for f in (Path(path), *map(Path, others)):
            text = f.read_text()
            assert len(ASSERT.findall(text)) <= 1, "an export has one assert, the envelope warning"
            (Path(tmp) / f.name).write_text(without_no_event(ASSERT.sub("", text)))
        t0 = time.perf_counter()
        model = api.transfer_model(tmp, Path(path).stem, {"replace_constants": True, "replace_parameter_values": False,
                                                          "replace_parameter_expressions": True})
        return model, time.perf_counter() - t0


class CompiledModel:
    """Evaluate a pymoca model of an mc2fmu export: ``qdd(q, qd, u, parameters)``,
    ``outputs(q, qd, u, parameters)`` and :meth:`simulate`."""

    def __init__(self, path: Path, *others: Path):
        import casadi as ca

        self.ca = ca
        self.model, self.compile_seconds = compile_modelica(path, *others)
        m = self.model
        vec = ca.vec
        self.state_names = [v.symbol.name() for v in m.states]
        ders = [v.symbol for v in m.der_states]
        algs = [v.symbol for v in m.alg_states]
        self.inputs = [v.symbol for v in m.inputs]
        self.params = {v.symbol.name(): v for v in m.parameters}
        outs = [s for s in algs if OUTPUTS.match(s.name())]
        dyn = ders + [s for s in algs if not OUTPUTS.match(s.name())]
        O = ca.vertcat(*[vec(s) for s in outs])
        dyn_eq = [vec(e) for e in m.equations if not ca.depends_on(e, O)]
        out_eq = [vec(e) for e in m.equations if ca.depends_on(e, O)]
        self.Z = ca.vertcat(*[vec(s) for s in dyn])
        self.X = ca.vertcat(*[vec(v.symbol) for v in m.states])
        self.nx = self.X.shape[0]
        self.U = ca.vertcat(*[vec(s) for s in self.inputs]) if self.inputs else ca.MX.sym("nou", 0)
        self.P = ca.vertcat(*[vec(v.symbol) for v in m.parameters])
        known = ca.vertcat(self.X, self.U, self.P)
        self.residual = ca.vertcat(*dyn_eq)
        g = ca.Function("dyn", [self.Z, known], [self.residual])
        self.solve_dyn = ca.rootfinder("solve_dyn", "fast_newton", g, {"abstol": 1e-14, "max_iter": 200})
        if self.state_names[:2] == ["q", "qd"]:  # an export: der(qd)'s rows in Z (after der(q))
            self.dof = m.states[0].symbol.numel()
            self.n_qdd = (self.dof, 2 * self.dof)
        # the outputs: their equations, given the dynamics' values
        self.out_syms = outs
        self.O = O
        res = ca.vertcat(*out_eq)
        self.out_r = ca.Function("out_r", [O, ca.vertcat(known, self.Z)], [res])
        self.out_J = ca.Function("out_J", [O, ca.vertcat(known, self.Z)], [ca.jacobian(res, O)])
        # block lower-triangular order of the output equations (CasADi's btf): each block
        # (one equation and its variable, nearly always) is solved by Newton's method in
        # turn, with every earlier block's values final
        _, rowperm, colperm, rowblock, colblock, _, _ = ca.jacobian_sparsity(res, O).btf()
        self.out_blocks = [(np.array(rowperm[rowblock[k]:rowblock[k + 1]]), np.array(colperm[colblock[k]:colblock[k + 1]]))
                           for k in range(len(rowblock) - 1)]
        self.out_n = O.shape[0]

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
        """Every dynamics unknown at one state (the states' derivatives first; ``q``, ``qd``: an
        export's states, or the whole state vector and an empty ``qd``)."""
        guess = np.random.default_rng(0).uniform(0.5, 1.5, self.Z.shape[0])
        return np.asarray(self.solve_dyn(guess, self._known(q, qd, u, p))).ravel()

    def qdd(self, q, qd, u, p: np.ndarray) -> np.ndarray:
        a, b = self.n_qdd
        return self.dynamics(q, qd, u, p)[a:b]

    def outputs(self, q, qd, u, p: np.ndarray) -> dict[str, np.ndarray]:
        """The outputs (and their internal variables) at one state, block by block."""
        z = self.dynamics(q, qd, u, p)
        known = np.concatenate([self._known(q, qd, u, p), z])
        o = np.zeros(self.out_n)
        for _ in range(5):  # forward-substitution sweeps: one is exact when each block is explicit in its variable
            J = np.array(self.out_J(o, known))
            for rows, cols in self.out_blocks:
                r = np.asarray(self.out_r(o, known)).ravel()[rows]
                o[cols] -= np.linalg.solve(J[np.ix_(rows, cols)], r)
            r = np.asarray(self.out_r(o, known)).ravel()
            if np.abs(r).max() <= 1e-13 * max(1.0, np.abs(o).max()):
                break
        out, k = {}, 0
        for s in self.out_syms:
            n = s.numel()
            out[s.name()] = o[k:k + n]
            k += n
        return out

    def simulate(self, t: np.ndarray, x0, u_of_t, p: np.ndarray, rtol: float = 1e-11) -> np.ndarray:
        """The states (an export's ``[q, qd]``) at the times ``t`` by CasADi's IDAS on pymoca's
        DAE: every dynamics unknown algebraic (their residual equations), the first ``nx`` of them
        (the derivatives) the states' rates; the inputs ``u_of_t(t_sym)`` a CasADi expression of
        time."""
        ca = self.ca
        ts = ca.MX.sym("t")
        z = ca.MX.sym("z", self.Z.shape[0])
        x = ca.MX.sym("x", self.nx)
        u = u_of_t(ts) if self.inputs else ca.MX(0, 1)
        g = ca.Function("g", [self.Z, ca.vertcat(self.X, self.U, self.P)], [self.residual])
        dae = {"x": x, "z": z, "t": ts, "ode": z[: self.nx], "alg": g(z, ca.vertcat(x, u, ca.DM(p)))}
        F = ca.integrator("F", "idas", dae, float(t[0]), list(map(float, t[1:])),
                          {"abstol": 1e-12, "reltol": rtol, "max_num_steps": 200000, "calc_ic": True,
                           "suppress_algebraic": True})
        x0 = np.ravel(x0).astype(float)
        u0 = np.asarray(ca.Function("u0", [ts], [u])(float(t[0]))).ravel()
        z0 = self.dynamics(x0, [], u0, p)
        sol = np.asarray(F(x0=x0, z0=z0)["xf"])
        return np.vstack([x0, sol.T])
