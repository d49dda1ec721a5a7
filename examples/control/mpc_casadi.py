"""Model-predictive tracking with a reduced model exported for CasADi.

    mc2fmu export MODEL_DIR --format casadi -o model.casadi
    python examples/control/mpc_casadi.py model.casadi [--coordinate 1] [--step 0.2] [--seconds 2]

The reduced ODE ``qdd = model(q, qd, u)`` is the prediction model of a receding-horizon
controller (CasADi Opti, IPOPT, RK4 multiple shooting over ``--horizon`` steps of ``--dt``):
it drives coordinate ``--coordinate`` from the model's static equilibrium (input 0) to a step
of ``--step`` and holds it, with the inputs bounded by ``--u-max``.  The plant is the same
reduced model integrated at a 10x finer step (a closed loop against the full engine model is
``examples/control/closed_loop.py``).  Prints the tracking error and the cost per solve.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def rk4(f, q, qd, u, dt):
    """One RK4 step of (q, qd) with qdd = f(q, qd, u) (CasADi or numpy values alike)."""
    k1q, k1v = qd, f(q, qd, u)
    k2q, k2v = qd + dt / 2 * k1v, f(q + dt / 2 * k1q, qd + dt / 2 * k1v, u)
    k3q, k3v = qd + dt / 2 * k2v, f(q + dt / 2 * k2q, qd + dt / 2 * k2v, u)
    k4q, k4v = qd + dt * k3v, f(q + dt * k3q, qd + dt * k3v, u)
    return q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q), qd + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)


def main(argv=None) -> dict:
    import casadi as ca

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a .casadi file written by `mc2fmu export --format casadi`")
    ap.add_argument("--coordinate", type=int, default=1, help="the tracked coordinate q[i] (default 1)")
    ap.add_argument("--step", type=float, default=0.2, help="reference step of that coordinate (default 0.2)")
    ap.add_argument("--seconds", type=float, default=2.0, help="closed-loop duration in s (default 2)")
    ap.add_argument("--dt", type=float, default=0.02, help="controller step in s (default 0.02)")
    ap.add_argument("--horizon", type=int, default=15, help="prediction steps (default 15)")
    ap.add_argument("--u-max", type=float, default=20.0, help="input bound (default 20)")
    args = ap.parse_args(argv)

    model = ca.Function.load(args.model)
    m, n_u = model.size1_in(0), model.size1_in(2)
    f = lambda q, qd, u: model(q, qd, u)[0]  # noqa: E731
    i = args.coordinate - 1

    # the static equilibrium under zero input (Newton on qdd(q, 0, 0) = 0 from q = 0)
    qs = ca.SX.sym("q", m)
    eq = ca.rootfinder("eq", "newton", ca.Function("g", [qs], [f(qs, ca.DM.zeros(m), ca.DM.zeros(n_u))]))
    q0 = np.array(eq(ca.DM.zeros(m))).ravel()
    target = q0[i] + args.step

    opti = ca.Opti()
    N = args.horizon
    Q, V, U = opti.variable(m, N + 1), opti.variable(m, N + 1), opti.variable(n_u, N)
    p_q, p_v = opti.parameter(m), opti.parameter(m)
    opti.subject_to([Q[:, 0] == p_q, V[:, 0] == p_v])
    for k in range(N):
        qn, vn = rk4(f, Q[:, k], V[:, k], U[:, k], args.dt)
        opti.subject_to([Q[:, k + 1] == qn, V[:, k + 1] == vn])
    opti.subject_to(opti.bounded(-args.u_max, ca.vec(U), args.u_max))
    opti.minimize(ca.sumsqr(Q[i, 1:] - target) + 1e-2 * ca.sumsqr(V[:, 1:]) + 1e-6 * ca.sumsqr(U))
    opti.solver("ipopt", {"print_time": False}, {"print_level": 0, "sb": "yes", "max_iter": 200})

    q, qd = q0.copy(), np.zeros(m)
    errors, solve_s = [], []
    guess = None
    for _ in range(int(round(args.seconds / args.dt))):
        opti.set_value(p_q, q)
        opti.set_value(p_v, qd)
        if guess is not None:
            opti.set_initial(Q, guess[0])
            opti.set_initial(V, guess[1])
            opti.set_initial(U, guess[2])
        start = time.perf_counter()
        sol = opti.solve()
        solve_s.append(time.perf_counter() - start)
        u = np.atleast_1d(sol.value(U[:, 0]))
        guess = (sol.value(Q), sol.value(V), sol.value(U))
        for _ in range(10):  # the plant: the same model at a finer step, input held
            qn, vn = rk4(lambda a, b, c: np.array(f(a, b, c)).ravel(), q, qd, u, args.dt / 10)
            q, qd = np.asarray(qn, dtype=float).ravel(), np.asarray(vn, dtype=float).ravel()
        errors.append(abs(q[i] - target))
    settled = errors[len(errors) // 2:]
    result = {"equilibrium": q0.tolist(), "target": target, "final_error": errors[-1],
              "max_error_second_half": max(settled), "solve_ms": 1e3 * float(np.mean(solve_s))}
    print(f"q[{args.coordinate}]: {q0[i]:.4f} -> {target:.4f}; error at the end {errors[-1]:.2e}, largest over "
          f"the second half {max(settled):.2e}; {result['solve_ms']:.1f} ms per MPC solve")
    return result


if __name__ == "__main__":
    main()
