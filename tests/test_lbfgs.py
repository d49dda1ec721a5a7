"""The training's L-BFGS (mc2fmu/reducers/autoencoder/lbfgs.py): its closed-form two-loop
recursion against the dense BFGS inverse-Hessian update, and its iterates against
torch.optim.LBFGS on a smooth problem."""

from __future__ import annotations

import pytest
import torch

from mc2fmu.reducers.autoencoder.lbfgs import LBFGS, compact_direction

F64 = torch.float64


def dense_bfgs_direction(g, pairs, gamma):
    """``-H g`` with ``H`` built by the BFGS update from ``gamma I``, one pair after another
    (oldest first): ``H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T``."""
    n = len(g)
    H = gamma * torch.eye(n, dtype=F64)
    eye = torch.eye(n, dtype=F64)
    for s, y in pairs:
        rho = 1.0 / y.dot(s)
        H = (eye - rho * torch.outer(s, y)) @ H @ (eye - rho * torch.outer(y, s)) + rho * torch.outer(s, s)
    return -H @ g


def curvature_pairs(n, count, seed):
    gen = torch.Generator().manual_seed(seed)
    B = torch.randn(n, n, generator=gen, dtype=F64)
    B = B @ B.T + n * torch.eye(n, dtype=F64)  # SPD: every pair has s . y > 0
    pairs = []
    for _ in range(count):
        s = torch.randn(n, generator=gen, dtype=F64)
        pairs.append((s, B @ s + 0.01 * torch.randn(n, generator=gen, dtype=F64)))
    return pairs, torch.randn(n, generator=gen, dtype=F64)


@pytest.mark.parametrize("count", [1, 3, 5, 9], ids=lambda c: f"{c}pairs")
def test_compact_direction_is_the_bfgs_update_of_the_last_m_pairs(count):
    """A memory of m = 5 pairs: with fewer pairs every one counts, with more the oldest have
    left the ring buffer; the direction is the dense BFGS update's over the pairs kept."""
    n, m = 12, 5
    pairs, g = curvature_pairs(n, count, seed=count)
    opt = LBFGS([torch.zeros(n, dtype=F64, requires_grad=True)], history_size=m)
    state: dict = {}
    for s, y in pairs:
        opt._remember(state, s, y, y.dot(s))
    gamma = float(pairs[-1][0].dot(pairs[-1][1]) / pairs[-1][1].dot(pairs[-1][1]))
    d = compact_direction(g, state["S"], state["Y"], state["A"], state["rho"], state["order"], gamma)
    expected = dense_bfgs_direction(g, pairs[-m:], gamma)
    assert torch.allclose(d, expected, rtol=1e-10, atol=1e-12 * expected.abs().max())
    assert len(state["order"]) == min(count, m)
    assert d.dot(g) < 0  # a descent direction


def rosenbrock(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def run(optimizer_class, steps, **kw):
    x = torch.tensor([-1.2, 1.0] * 5, dtype=F64, requires_grad=True)
    opt = optimizer_class([x], lr=1.0, max_iter=20, history_size=7, tolerance_grad=1e-14, tolerance_change=1e-16, **kw)

    def closure():
        opt.zero_grad()
        loss = rosenbrock(x)
        loss.backward()
        return loss

    for _ in range(steps):
        opt.step(closure)
    return x.detach(), opt


def test_iterates_are_torch_lbfgs_ones():
    """Same algorithm, same line search: on the 10-D Rosenbrock function the iterates agree with
    torch.optim.LBFGS's to rounding, through a memory that has wrapped many times."""
    for steps in (1, 2):
        ours, _ = run(LBFGS, steps)
        theirs, _ = run(torch.optim.LBFGS, steps, line_search_fn="strong_wolfe")
        assert torch.allclose(ours, theirs, rtol=0, atol=1e-9), (steps, (ours - theirs).abs().max())
    ours, opt = run(LBFGS, 6)
    assert torch.allclose(ours, torch.ones(10, dtype=F64), atol=1e-8)  # the minimum
    assert opt.state[opt._params[0]]["n_iter"] > 20


def test_state_dict_resumes_to_the_same_iterates():
    """The memory (buffers, slot order, scaling) is the optimiser's state: a run saved after
    one step and resumed in a new optimiser ends where an uninterrupted one does."""
    whole, _ = run(LBFGS, 2)
    x = torch.tensor([-1.2, 1.0] * 5, dtype=F64, requires_grad=True)
    first = LBFGS([x], max_iter=20, history_size=7, tolerance_grad=1e-14, tolerance_change=1e-16)

    def closure_for(opt):
        def closure():
            opt.zero_grad()
            loss = rosenbrock(x)
            loss.backward()
            return loss
        return closure

    first.step(closure_for(first))
    saved = first.state_dict()
    second = LBFGS([x], max_iter=20, history_size=7, tolerance_grad=1e-14, tolerance_change=1e-16)
    second.load_state_dict(saved)
    second.step(closure_for(second))
    assert torch.equal(x.detach(), whole)


def test_a_stall_forgets_the_memory_and_goes_on(monkeypatch):
    """Where torch's L-BFGS stops for good (its memory gives no descent direction: here a
    corrupted one, uphill), this one forgets the memory, takes a steepest-descent step and goes
    on: the loss keeps falling within the same step, and the next direction is built again
    from the pairs gathered after the restart."""
    import mc2fmu.reducers.autoencoder.lbfgs as module

    ours, opt = run(LBFGS, 1)
    state = opt.state[opt._params[0]]
    assert len(state["order"]) == 7 and state.get("restarts", 0) == 0
    honest = module.compact_direction
    calls = {"n": 0}

    def uphill_once(g, *args):
        calls["n"] += 1
        return g.clone() if calls["n"] == 1 else honest(g, *args)

    monkeypatch.setattr(module, "compact_direction", uphill_once)
    x = opt._params[0]

    def closure():
        opt.zero_grad()
        loss = rosenbrock(x)
        loss.backward()
        return loss

    before = float(rosenbrock(x.detach()))
    opt.step(closure)
    after = float(rosenbrock(x.detach()))
    assert state["restarts"] == 1
    assert after < 0.5 * before  # progress after the restart, in the same step
    assert calls["n"] > 2  # the memory was rebuilt and used again


def test_the_memory_fills_whatever_the_scale_of_the_loss():
    """A pair joins the memory on positive curvature relative to its own size: on a quadratic
    whose values are ~1e-12 (a late training loss is ~1e-6, its steps ~1e-5) the memory fills
    and the iterates converge as on the unscaled one, where torch's absolute test (s . y > 1e-10)
    rejects every pair and leaves plain steepest descent."""
    gen = torch.Generator().manual_seed(3)
    Q, _ = torch.linalg.qr(torch.randn(10, 10, generator=gen, dtype=F64))
    B = Q @ torch.diag(torch.logspace(0, 3, 10, dtype=F64)) @ Q.T  # condition number 1000
    x0 = torch.randn(10, generator=gen, dtype=F64)
    f0 = float(0.5 * x0 @ B @ x0)

    def solve(optimizer_class, scale, **kw):
        x = x0.clone().requires_grad_(True)
        opt = optimizer_class([x], max_iter=20, history_size=10, tolerance_grad=1e-30, tolerance_change=1e-30, **kw)

        def closure():
            opt.zero_grad()
            loss = scale * 0.5 * x @ B @ x
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        return float(0.5 * x.detach() @ B @ x.detach()) / f0, opt.state[opt._params[0]]

    unscaled, _ = solve(LBFGS, 1.0)
    ours, state = solve(LBFGS, 1e-12)
    assert len(state["order"]) == 10
    assert ours < 1e-8 and ours < 10 * unscaled  # 60 iterations: 3e-10 of the start either way
    theirs, theirs_state = solve(torch.optim.LBFGS, 1e-12, line_search_fn="strong_wolfe")
    assert theirs_state["old_dirs"] == []
    assert theirs > 0.1  # steepest descent on a condition number of 1000


def test_a_changed_objective_keeps_the_memory_and_makes_no_mixed_pair():
    """Training moves to more of its data: after ``objective_changed`` the gradient change
    across the switch (one objective's gradient minus another's) makes no pair, the memory is
    kept, and the pairs after it are the new objective's: ``y = A2 s`` for the quadratic
    ``0.5 x^T A2 x``.  Without the call the mixed pair joins the memory."""
    n = 8
    gen = torch.Generator().manual_seed(3)
    A1 = torch.diag(torch.linspace(1.0, 10.0, n, dtype=F64))
    Q = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=F64))[0]
    A2 = Q @ torch.diag(torch.linspace(2.0, 30.0, n, dtype=F64)) @ Q.T
    b = torch.randn(n, generator=gen, dtype=F64)

    def trained(changed: bool):
        x = torch.zeros(n, dtype=F64, requires_grad=True)
        opt = LBFGS([x], max_iter=4, max_eval=100, history_size=20, tolerance_grad=1e-14, tolerance_change=1e-16)
        A = {"now": A1}

        def closure():
            opt.zero_grad()
            loss = 0.5 * x @ (A["now"] @ x) - b @ x
            loss.backward()
            return loss

        opt.step(closure)
        state = opt.state[x]
        before = [(state["S"][k].clone(), state["Y"][k].clone()) for k in state["order"]]
        A["now"] = A2
        if changed:
            opt.objective_changed()
        opt.step(closure)
        pairs = [(state["S"][k], state["Y"][k]) for k in state["order"]]
        return before, pairs, state.get("restarts", 0)

    before, pairs, restarts = trained(changed=True)
    assert restarts == 0
    assert len(before) == 3  # the first of four iterations is steepest descent
    for (s0, y0), (s, y) in zip(before, pairs):  # the memory is kept
        assert torch.equal(s0, s) and torch.equal(y0, y)
    assert len(pairs) == len(before) + 3  # the switch's iteration added none, the next three did
    for s, y in pairs[len(before):]:
        assert torch.allclose(y, A2 @ s, rtol=1e-9, atol=1e-12)
    # without it the mixed pair joins: kept in the memory, or it gave an uphill direction and
    # the memory was forgotten
    _, mixed, restarts = trained(changed=False)
    assert restarts > 0 or any(not torch.allclose(y, A2 @ s, rtol=1e-3) and not torch.allclose(y, A1 @ s, rtol=1e-3)
                               for s, y in mixed)


def test_a_step_starts_from_where_the_one_before_ended():
    """The loss and gradient at the end of a step are the next one's start: three steps make two
    closure calls fewer than torch's, for the same iterates (test above), and a state that has
    them resumes without evaluating them again."""
    counts = {}
    for cls, kw in ((LBFGS, {}), (torch.optim.LBFGS, {"line_search_fn": "strong_wolfe"})):
        x = torch.tensor([-1.2, 1.0] * 5, dtype=F64, requires_grad=True)
        opt = cls([x], lr=1.0, max_iter=5, history_size=7, tolerance_grad=1e-14, tolerance_change=1e-16, **kw)
        calls = {"n": 0}

        def closure():
            calls["n"] += 1
            opt.zero_grad()
            loss = rosenbrock(x)
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        counts[cls] = (calls["n"], x.detach().clone())
    assert counts[LBFGS][0] == counts[torch.optim.LBFGS][0] - 2
    assert torch.allclose(counts[LBFGS][1], counts[torch.optim.LBFGS][1], rtol=0, atol=1e-12)


def test_the_products_of_the_memory_are_kept_without_recomputing_them():
    """The new pair's row and column of ``A = S Y^T`` come from the products of the direction
    before (S g and Y d, no product with the buffers): after a memory that wrapped many times,
    ``A`` over the pairs kept is still ``S Y^T`` recomputed, and ``S g`` the
    one a direction would compute."""
    _, opt = run(LBFGS, 3)
    state = opt.state[opt._params[0]]
    assert state["n_iter"] > 3 * 7 and len(state["order"]) == 7
    idx = torch.tensor(state["order"])
    S, Y = state["S"][idx], state["Y"][idx]
    recomputed = S @ Y.T
    assert torch.allclose(state["A"][idx][:, idx], recomputed, rtol=1e-9, atol=1e-12 * recomputed.abs().max())
    assert "Sg" in state["products"]
    assert torch.allclose(state["products"]["Sg"][idx], S @ state["prev_flat_grad"], rtol=1e-12, atol=1e-300)
