"""L-BFGS whose two-loop recursion is two triangular solves and four matrix-vector products.

``torch.optim.LBFGS`` walks its memory of ``m`` pairs ``(s_i, y_i)`` one pair at a time: four
small vector operations per pair and iteration, each a Python-level torch call.  The recursion
is linear, so it can be written in closed form (the arithmetic of Nocedal & Wright's
Algorithm 7.4, the products in another order).  With the pairs oldest first,
``A[i, j] = s_i . y_j`` and ``rho_i = 1 / (s_i . y_i)``, the search direction ``d = -H g`` is:

* first loop, ``alpha_i = rho_i s_i . (q0 - sum_{j > i} alpha_j y_j)`` with ``q0 = -g``: the
  upper-triangular system ``(I + diag(rho) triu(A, 1)) alpha = rho * (S q0)``;
* ``r0 = gamma (q0 - Y^T alpha)`` (``gamma = s.y / y.y`` of the newest pair);
* second loop, ``c_i = alpha_i - beta_i`` with
  ``beta_i = rho_i y_i . (r0 + sum_{j < i} c_j s_j)``: the lower-triangular system
  ``(I + diag(rho) tril(A^T, -1)) c = alpha - rho * (Y r0)``;
* ``d = r0 + S^T c``.

The pairs live in fixed ``(m, n)`` buffers used as a ring (the oldest slot is overwritten) and
``A`` is updated by one row and one column per new pair.  Those need no product with the
buffers either: ``S . y_new = S g_new - S g_old`` and ``Y . s_new = t Y d``, where ``S g`` is
the first product of each direction and ``Y d = Y r0 + A^T c`` (:meth:`LBFGS._remember`).  An
iteration costs four ``m x n`` products and two ``m x m`` triangular solves, whatever ``m``.
Measured (``benchmarks/lbfgs_cost.py``, the optimiser's own work per iteration beside the
loss's, torch -> this one, 200 pairs): the 3-RRR's 8.2 -> 3.7 ms, the five-bar's 8.0 -> 3.6
ms (4.5 ms each with the new pair's products taken from the buffers, six products); the
products are bound by memory traffic (two 200 x 10k buffers), so most of the cost remains.

Everything else (the strong Wolfe line search, the tolerances, a step of ``max_iter``
iterations, the state a checkpoint saves) is ``torch.optim.LBFGS``'s, but for four things: a
step starts from the loss and gradient where the one before ended (torch evaluates them again), a
stall forgets the memory and goes on (:meth:`LBFGS.step`), the test a new pair passes is
relative (:data:`CURVATURE_EPS`), and a change of the objective (training's growing subset of
its data, :meth:`LBFGS.objective_changed`) keeps the memory but makes no pair of the gradients
on either side of it.  ``tests/test_lbfgs.py`` checks the direction against the
dense BFGS inverse-Hessian update and the iterates against torch's.
"""

from __future__ import annotations

import torch
from torch.optim.lbfgs import _strong_wolfe

Tensor = torch.Tensor


def compact_direction(g: Tensor, S: Tensor, Y: Tensor, A: Tensor, rho: Tensor, order: list[int],
                      gamma: float, Sg: Tensor | None = None, out: dict | None = None) -> Tensor:
    """``-H g`` of the L-BFGS memory: the pairs in the rows ``order`` (oldest first) of the
    buffers ``S``, ``Y`` (m, n), ``A[i, j] = S[i] . Y[j]`` over slots, ``rho`` per slot and the
    initial scaling ``gamma``.  ``Sg``: ``S @ g`` when the caller has it (:meth:`LBFGS._remember`
    computed it); ``out`` receives ``S @ g`` and ``Y @ d`` over every slot (rows outside
    ``order`` meaningless), from which the next pair's row and column of ``A`` follow without
    a product with the buffers (it is emptied when there is no memory)."""
    if out is not None:
        out.clear()
    q0 = -g
    if not order:
        return gamma * q0
    idx = torch.tensor(order)
    k = len(order)
    Ac = A[idx][:, idx]
    rc = rho[idx]
    eye = torch.eye(k, dtype=g.dtype)
    upper = eye + rc[:, None] * torch.triu(Ac, 1)
    Sq0 = -(S @ g) if Sg is None else -Sg
    alpha = torch.linalg.solve_triangular(upper, (rc * Sq0[idx])[:, None], upper=True)[:, 0]
    full = torch.zeros(len(S), dtype=g.dtype)
    full[idx] = alpha
    r0 = gamma * (q0 - full @ Y)
    Yr0 = Y @ r0
    lower = eye + rc[:, None] * torch.tril(Ac.T, -1)
    c = torch.linalg.solve_triangular(lower, (alpha - rc * Yr0[idx])[:, None], upper=False)[:, 0]
    full.zero_()
    full[idx] = c
    d = r0 + full @ S
    if out is not None:  # Y d = Y r0 + (Y S^T) c, and Y S^T = A^T
        out["Sg"] = -Sq0
        out["Yd"] = Yr0 + full @ A
    return d


#: a pair joins the memory when ``s . y > CURVATURE_EPS y . y``: its curvature is positive beyond
#: rounding, whatever the scale of the loss (torch's test, ``s . y > 1e-10``, is absolute: late in a
#: training whose loss was 2e-6, after a restart with the short steepest-descent step, no pair
#: passed it and every later iteration was steepest descent; the five-bar, docs/benchmarks.md "Reduced models")
CURVATURE_EPS = float(torch.finfo(torch.float64).eps)


class LBFGS(torch.optim.LBFGS):
    """``torch.optim.LBFGS`` (strong Wolfe line search only) with :func:`compact_direction`."""

    def __init__(self, params, lr: float = 1.0, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100):
        super().__init__(params, lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                         tolerance_change=tolerance_change, history_size=history_size, line_search_fn="strong_wolfe")

    def _remember(self, state: dict, s: Tensor, y: Tensor, ys: Tensor, g: Tensor | None = None,
                  t: float = 1.0) -> Tensor | None:
        """Add the pair ``(s, y)`` to the memory (the oldest one leaves a full memory).

        With the gradient ``g`` (``y = g - g_before``, ``s = t d``) and the products that
        :func:`compact_direction` left for ``g_before`` and ``d`` in ``state["products"]``, the
        new row and column of ``A`` cost no product with the buffers but ``S @ g``, which the
        next direction needs anyway: ``S[j] . y = (S g)[j] - (S g_before)[j]`` and ``Y[j] . s =
        t (Y d)[j]`` for the rows kept.  Returns ``S @ g`` with the new row then, else None."""
        m = self.param_groups[0]["history_size"]
        if "S" not in state:
            n = len(s)
            state["S"] = torch.zeros(m, n, dtype=s.dtype)
            state["Y"] = torch.zeros(m, n, dtype=s.dtype)
            state["A"] = torch.zeros(m, m, dtype=s.dtype)
            state["rho"] = torch.zeros(m, dtype=s.dtype)
            state["order"] = []
        order = state["order"]
        slot = order.pop(0) if len(order) == m else len(order)
        S, Y, A = state["S"], state["Y"], state["A"]
        products = state.get("products") or {}
        Sg = None
        if g is not None and "Sg" in products:
            Sg = S @ g  # the rows as they were when the products were taken (slot still the oldest)
            Sy, Ys = Sg - products["Sg"], t * products["Yd"]
        S[slot] = s
        Y[slot] = y
        if Sg is None:
            A[slot, :] = Y @ s
            A[:, slot] = S @ y
        else:
            A[slot, :] = Ys
            A[:, slot] = Sy
            A[slot, slot] = ys
            Sg[slot] = s.dot(g)
        state["rho"][slot] = 1.0 / ys
        order.append(slot)
        return Sg

    def objective_changed(self) -> None:
        """The loss changed (training moved to more of its data): the next gradient change
        mixes two objectives and makes no pair; the memory, whose pairs are the curvature of a
        close objective, is kept."""
        state = self.state[self._params[0]]
        state["new_objective"] = True
        state.pop("last_eval", None)  # the previous objective's loss and gradient

    @staticmethod
    def _restart(state: dict) -> bool:
        """Forget the memory after a stall (see :meth:`step`); False if there was none to forget."""
        if not state.get("order"):
            return False
        state["order"] = []
        state["restart"] = True
        state["restarts"] = state.get("restarts", 0) + 1
        return True

    @torch.no_grad()
    def step(self, closure):  # type: ignore[override]
        """Up to ``max_iter`` L-BFGS iterations; returns the loss at the start (as torch's).

        Where torch stops for good (the direction is no descent direction, or the line search
        made no progress: the loss unchanged to ``tolerance_change``), the memory is forgotten
        and the iterations go on from a steepest-descent step (torch's first iteration), up to
        ``max_iter``; only a stall without memory ends the step.  torch's state stalls again at
        every later step: the five-bar's training made no progress after 919 iterations and
        stopped at 1300 with 0.57 % on its training run, against 0.05 % after 4300 iterations
        with the restart (docs/benchmarks.md "Reduced models")."""
        closure = torch.enable_grad()(closure)
        group = self.param_groups[0]
        lr, max_iter = float(group["lr"]), group["max_iter"]
        max_eval, tol_grad, tol_change = group["max_eval"], group["tolerance_grad"], group["tolerance_change"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        last = state.pop("last_eval", None)  # the loss and gradient where the previous step ended
        if last is not None:
            orig_loss, g = last
        else:
            orig_loss = closure()
            state["func_evals"] += 1
            g = self._gather_flat_grad()
        loss = float(orig_loss)
        evals = 1
        if g.abs().max() <= tol_grad:
            state["last_eval"] = (torch.as_tensor(float(orig_loss), dtype=g.dtype), g)
            return orig_loss

        d, t = state.get("d"), state.get("t")
        gamma = state.get("H_diag", 1.0)
        prev_g, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        new_objective = state.pop("new_objective", False)
        for _ in range(max_iter):
            state["n_iter"] += 1
            fresh = state["n_iter"] == 1 or state.get("restart", False)
            products = state.setdefault("products", {})  # S g and Y d of the last direction
            if fresh:  # steepest descent, no memory
                state["restart"] = False
                new_objective = False
                products.clear()
                d = g.neg()
                gamma = 1.0
            else:
                y = g - prev_g
                s = d * t
                ys, yy = y.dot(s), y.dot(y)
                Sg = None
                if new_objective:  # g and prev_g are gradients of two objectives
                    new_objective = False
                elif ys > CURVATURE_EPS * yy:  # a pair with positive curvature joins the memory
                    Sg = self._remember(state, s, y, ys, g, t)
                    gamma = float(ys / yy)
                if "S" in state:
                    d = compact_direction(g, state["S"], state["Y"], state["A"], state["rho"], state["order"], gamma,
                                          Sg, products)
                else:
                    products.clear()
                    d = g.neg() * gamma
            prev_g = g.clone(memory_format=torch.contiguous_format)
            prev_loss = loss
            t = min(1.0, 1.0 / max(float(g.abs().sum()), 1e-300)) * lr if fresh else lr
            gtd = g.dot(d)
            if gtd > -tol_change:  # not a descent direction
                if self._restart(state):
                    continue
                break
            x0 = self._clone_param()
            loss, g, t, ls_evals = _strong_wolfe(lambda x, step, direction: self._directional_evaluate(
                closure, x, step, direction), x0, t, d, loss, g, gtd, max_ls=max_eval - evals)
            self._add_grad(t, d)
            evals += ls_evals
            state["func_evals"] += ls_evals
            if evals >= max_eval or g.abs().max() <= tol_grad:
                break
            if (d * t).abs().max() <= tol_change or abs(loss - prev_loss) < tol_change:  # no progress
                if self._restart(state):
                    continue
                break
        state.update(d=d, t=t, H_diag=gamma, prev_flat_grad=prev_g, prev_loss=prev_loss)
        # the next step starts where this one ended: its first evaluation would repeat the line
        # search's (the same numbers; one closure in 21 of a 20-iteration step saved)
        state["last_eval"] = (torch.as_tensor(loss, dtype=g.dtype), g)
        return orig_loss
