"""The L-BFGS phase's schedule, decided from the training's records alone (so a resumed run
takes the same decisions): the share of the training triplets it fits, when the share grows,
and when the phase has converged."""

from __future__ import annotations

import math

LBFGS_CHUNK = 20  # L-BFGS iterations per optimiser step (and per progress entry)
#: the window of the L-BFGS convergence test (:func:`lbfgs_converged`).  Measured (validation
#: loss per 20 iterations, defaults): the four-bar's fell by 0.4 % between iterations 620 and
#: 1020 and by 1 % more up to 2000 (its L-BFGS time: 26 s of 59 s spent on that 1 %); the
#: five-bar's was still falling by 10-30 % per 400 iterations at 2000-4400 and flattened at
#: about 4800 (0.4 % between 4620 and 5020)
LBFGS_WINDOW = 400
#: L-BFGS's memory (pairs of steps and gradient changes it keeps).  Measured with the defaults
#: (benchmarks/train_accuracy.py, benchmarks/a02.py, docs/benchmarks.md "Reduced models"), learnt
#: coordinates: 50 -> 100 pairs took the five-bar from 3760 to 2800 iterations (NRMSE train /
#: low / shape 0.090 / 0.272 / 0.551 -> 0.068 / 0.195 / 0.374 %) and the 3-RRR from the 6000 cap
#: to 3980 (0.090 / 0.375 / 0.530 -> 0.103 / 0.404 / 0.587 %); 100 -> 200 pairs (torch's
#: optimiser still) the 3-RRR to 0.070 / 0.260 / 0.390 % (its loss at equal iterations about
#: half: 3.9e-6 after 2800 instead of 6.5e-6), the five-bar to 0.168 / 0.101 / 0.200 %.  With
#: :mod:`.lbfgs` the memory's cost per iteration no longer grows with a Python loop per pair
LBFGS_HISTORY = 200


def lbfgs_converged(history: list[dict], tol: float, floor: float = 0.0, window: int = LBFGS_WINDOW) -> bool:
    """Whether the L-BFGS phase has converged: the best validation loss of the fit fell by less
    than the fraction ``tol`` over the last ``window`` iterations, or it is at most ``floor``
    (``history``: the training's records, L-BFGS ones with ``iter`` and ``val_fit``, the
    validation loss without L_gauge, or ``val``; ``tol`` 0 and ``floor`` 0: never; see
    :data:`~.config.AUTO_LBFGS_FLOOR`).  L_gauge is left out because it is a choice of the
    chart, not of the fit: on the spatial four-bar it was 80 % of the validation loss at the end
    and still falling.  Measured (defaults, learnt coordinates): the spatial four-bar stopped at 3220
    L-BFGS iterations instead of 3440 with the same errors, the four-bar at 1240 instead of
    1720 (training run 0.051 -> 0.034 %)."""
    bests = window_bests(history, window)
    if bests is None:
        return False
    best_now, best_then = bests
    if floor > 0 and best_now <= floor:
        return True
    if tol <= 0 or best_then is None:
        return False
    return best_now > (1.0 - tol) * best_then


def window_bests(history: list[dict], window: int) -> tuple[float, float | None] | None:
    """The best validation loss of the fit over all L-BFGS records and over those at least
    ``window`` iterations before the last (None: no such records)."""
    runs = [(e["iter"], e.get("val_fit", e["val"])) for e in history if e["stage"] == "lbfgs"]
    if not runs:
        return None
    best_now = min(v for _, v in runs)
    last = runs[-1][0]
    before = [v for it, v in runs if it <= last - window]
    return best_now, (min(before) if last >= window and before else None)


def lbfgs_fall(history: list[dict], window: int = LBFGS_WINDOW) -> float | None:
    """How far the best validation loss of the fit fell over the last ``window`` iterations, as
    a fraction, on the L-BFGS records of the last record's share: what :func:`lbfgs_converged`
    compares with ``--lbfgs-tol`` (None before a whole window)."""
    lb = [e for e in history if e["stage"] == "lbfgs"]
    if not lb:
        return None
    every = lb[-1].get("every", 1)
    bests = window_bests([e for e in lb if e.get("every", 1) == every], window)
    if bests is None or bests[1] is None or not math.isfinite(bests[1]) or bests[1] <= 0:
        return None
    return 1.0 - bests[0] / bests[1]


def lbfgs_schedule(history: list[dict], tol: float, floor: float, first: int) -> tuple[int, bool]:
    """Where the L-BFGS phase stands, from the training's records: the share of the training
    triplets to fit (every Nth; ``first`` before any L-BFGS record) and whether it has
    converged.  The share halves, down to every triplet, when :func:`lbfgs_converged`'s rule
    holds on the records of the current share or :func:`share_too_small` says it overfits, and
    becomes every triplet at once when the validation loss was not finite (the training then
    goes on from the best weights); the phase has converged when the rule holds on
    every triplet or the fit is at most ``floor`` (the validation triplets are the same at
    every share, so their loss is comparable across shares).  Records without ``every`` (the
    fit of every triplet) are the full share.  The floor is the last L-BFGS record's ``floor``
    where it has one (the floor's check lowers it: :func:`current_floor`)."""
    lb = [e for e in history if e["stage"] == "lbfgs"]
    every = lb[-1].get("every", 1) if lb else first
    if lbfgs_converged(lb, 0.0, current_floor(lb, floor)):
        return every, True
    here = [e for e in lb if e.get("every", 1) == every]
    if every > 1 and here and not math.isfinite(here[-1]["val"]):  # a share that broke the model
        return 1, False
    if lbfgs_converged(here, tol):
        return (1, True) if every == 1 else (max(1, every // 2), False)
    if every > 1 and share_too_small(here):
        return max(1, every // 2), False
    return every, False


def current_floor(history: list[dict], floor: float) -> float:
    """The floor in force: the last L-BFGS record's ``floor`` (lowered by a failed check of
    :mod:`.floor_check`), or ``floor`` (``--lbfgs-floor``) before any."""
    lb = [e for e in history if e["stage"] == "lbfgs"]
    return float(lb[-1].get("floor", floor)) if lb else floor


def floor_to_check(history: list[dict], floor: float) -> float | None:
    """The floor the last L-BFGS record reached and no check has looked at yet (None: not
    reached, or checked; a record carries ``check`` once its rollout was checked)."""
    lb = [e for e in history if e["stage"] == "lbfgs"]
    if not lb or "check" in lb[-1]:
        return None
    now = current_floor(lb, floor)
    return now if lbfgs_converged(lb, 0.0, now) else None


#: the fewest triplets a share starts with (fewer training triplets: a larger first share, or all).
#: A tiny model on 24 of a toy run's 95 triplets fitted them and diverged between them (validation
#: loss NaN after 760 iterations); a closure on so few costs little less than on all of them
MIN_SHARE_TRIPLETS = 200

#: a share of the training triplets is too small when the rest of the training triplets fit
#: more than :data:`OVERFIT_RATIO` times worse
#: than the share over the last :data:`OVERFIT_RECORDS` records (their median ratio: one record's
#: line search may overshoot).  Measured (defaults, learnt coordinates): on a quarter of its
#: triplets the five-bar's validation loss was 8x its training loss after 400 iterations and rose
#: to 3e-4 by 1200, where the growth by the rule alone came (1380); the 3-RRR's ratio stayed near
#: 1 on a quarter.  The 50 validation triplets alone missed the MacPherson whose mechanism file
#: has the wrong strut law: on half its triplets the fit was 0.094, the validation 0.156, the
#: other half 3.2, and on all of them the model diverged (benchmarks/unknown_forces.py)
OVERFIT_RATIO = 2.0
OVERFIT_RECORDS = 5


def share_too_small(records: list[dict]) -> bool:
    """Whether the L-BFGS records of one share (with ``fit`` and ``rest_fit``, the fit of the
    training triplets outside the share) say the share overfits: the median of the last
    :data:`OVERFIT_RECORDS` ratios of the rest's fit to the share's exceeds :data:`OVERFIT_RATIO`."""
    last = [e for e in records if "rest_fit" in e][-OVERFIT_RECORDS:]
    if len(last) < OVERFIT_RECORDS:
        return False
    ratios = sorted(e["rest_fit"] / max(e["fit"], 1e-300) for e in last)
    return ratios[len(ratios) // 2] > OVERFIT_RATIO
