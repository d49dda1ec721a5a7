"""The trainer: one training run of the physics-informed autoencoder (seed 000, Algorithms 1-2,
appendix; docs/method.md, docs/training.md), as a list of optimiser steps.

The pieces it puts together: the training samples (:mod:`.samples`), the model built from
them (:func:`build_model`), the loss and its terms (:mod:`.loss`), the L-BFGS optimiser
(:mod:`.lbfgs`) and its schedule (:mod:`.schedule`), checkpoints (:mod:`.checkpoints`) and
the sparse identification of unknown forces (:mod:`.identify`); at the L-BFGS floor, the
rollout over the training runs that decides whether the floor suffices (:mod:`.floor_check`).

``--identify`` (seed 004), for forces the mechanism file does not describe: every term of the
library (:mod:`mc2fmu.models.terms`) joins the dynamics at the start of L-BFGS with a zero
coefficient and is trained with the model (the smoothed signs' velocity scales too), so the
decoder never has to bend to absorb the missing force.  Then seed 004's sequentially
thresholded least squares on the trained model's residual ``M_m qddot - (f_m - G_m + J^T
f_spring)`` keeps the terms that matter, and ``identify_iters`` further L-BFGS iterations train
the model with those (the dropped ones stay zero).  Measured (benchmarks/unknown_forces.py,
four-bar with friction, known coordinate, every term group): starting the terms from least
squares after the warm-up, or identifying only after a training without them, both left the
model in a worse minimum (held-out NRMSE 1.5 % and 24 %, against 0.5 % from zero).

Optimisation: Adam with a decaying rate, then L-BFGS (:mod:`.lbfgs`: torch's, its two-loop
recursion in closed form, restarted after a stall), full batch on a subsample of the data
windows; 95/5 random split, the weights with the best validation loss are kept.  L-BFGS fits
a growing share of the training windows (:func:`lbfgs_schedule`): every ``lbfgs_subset``-th
first, twice as many each time the fit stalls there or overfits it (:func:`share_too_small`),
keeping its memory; convergence is decided on all of them.  Seeded and
deterministic on CPU; with a :class:`Checkpointer` the complete state is written at iteration
boundaries, and a resumed run ends with exactly the weights of an uninterrupted one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ...data.dataset import Dataset
from ...errors import TrainingError
from ...mechanics.natural import ForceModel
from ...models.spring_laws import fit_laws
from ...models.terms import build_library, parse_groups
from ..base import Checkpointer, TrainingInterrupted, config_to_dict
from .checkpoints import (
    CHECKPOINT_VERSION,
    check_resumed_state,
    data_hash,
    library_from_state,
    library_state,
    read_checkpoint,
    write_checkpoint,
)
from .config import TrainConfig
from .identify import residual_data, sparse_terms
from .lbfgs import LBFGS
from .loss import LossFunction, loss_scales
from .samples import hull_maps, known_coordinate_map, make_windows, parse_angles, spreads
from .schedule import (
    LBFGS_CHUNK,
    LBFGS_HISTORY,
    LBFGS_WINDOW,
    MIN_SHARE_TRIPLETS,
    current_floor,
    floor_to_check,
    window_bests,
    lbfgs_fall,
    lbfgs_schedule,
)
from .floor_check import lowered_floor, training_rollout_nrmse
from .torch_model import Decoder, LinearEncoder, NeuralEncoder, TorchManifoldModel

log = logging.getLogger(__name__)


def build_model(ds: Dataset, cfg: TrainConfig, angles: list[bool]) -> TorchManifoldModel:
    x_all = ds.x
    x_mean = x_all.mean(axis=0)
    x_scale = spreads(x_all, cfg.scale_floor)
    out_map = in_map = None
    if cfg.hull_tol > 0:
        out_map, in_map = hull_maps(x_all, x_scale, cfg.hull_tol)
        if out_map.shape[1] < cfg.dof:
            raise TrainingError(
                f"--dof {cfg.dof}: the training data move in only {out_map.shape[1]} independent direction(s) of the "
                f"natural coordinates, fewer than the {cfg.dof} minimal coordinate(s) asked for: the runs do not "
                "excite every DOF (give runs that move each one), or the mechanism has fewer DOF (see "
                "`mc2fmu estimate-dof`)")
    if cfg.coords:
        E, e0 = known_coordinate_map(ds, cfg.coords)
        encoder = LinearEncoder(E, e0)
        q = x_all @ E.T + e0
        q_mean, q_scale = q.mean(axis=0), spreads(q, cfg.scale_floor)
    else:
        encoder = NeuralEncoder(ds.layout.size, cfg.dof, cfg.encoder_hidden, cfg.activation, angles, x_mean, x_scale,
                                in_map)
        q_mean, q_scale = np.zeros(cfg.dof), np.ones(cfg.dof)
    decoder = Decoder(cfg.dof, ds.layout.size, cfg.decoder_hidden(ds.layout.size), cfg.activation, angles, q_mean, q_scale,
                      x_mean, x_scale, out_map)
    forces, residual = with_spring_laws(ds, cfg)
    model = TorchManifoldModel(decoder, encoder, ds.M, forces, cfg.step_map)
    model.spring_law_residuals = residual  # the learned laws' fit, for the training record
    model.hull_dim = ds.layout.size if out_map is None else out_map.shape[1]
    return model


def with_spring_laws(ds: Dataset, cfg: TrainConfig) -> tuple[ForceModel, dict[str, float]]:
    """The dataset's force model, with the learned laws of its recorded springs (fitted here on
    the data's lengths, rates and recorded tensions; see :mod:`mc2fmu.models.spring_laws`), and
    each law's rms tension residual relative to the recorded tension's rms."""
    springs = ds.forces.springs
    if springs is None or not any(sp.recorded for sp in ds.mechanism.springs):
        return ds.forces, {}
    laws, residual = fit_laws(springs, ds.mechanism.springs, ds.x, ds.xd, ds.tensions, seed=cfg.seed)
    for name, r in residual.items():
        log.info("spring '%s': learned law, rms tension residual %.2e of the recorded tension's rms", name, r)
    forces = dataclasses.replace(ds.forces, springs=dataclasses.replace(springs, laws=laws))
    return forces, residual


@dataclass
class TrainResult:
    model: TorchManifoldModel
    angles: list[bool]
    history: list[dict]
    metrics: dict
    seconds: float


def train(ds: Dataset, cfg: TrainConfig, progress: Callable[[dict], None] | None = None,
          checkpoint: "Checkpointer | None" = None) -> TrainResult:
    """Train a reduced model on a dataset; deterministic for a given seed on one machine (the
    float reductions of torch's CPU kernels may differ between CPUs).

    With ``checkpoint`` the training state is written to its file every ``checkpoint.every``
    seconds and on KeyboardInterrupt (then :class:`TrainingInterrupted` is raised), and with
    ``checkpoint.resume`` training continues from that file.  The caller's torch random state
    is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        return Training(ds, cfg, progress, checkpoint).run()


#: a training whose reconstruction error, relative to the data's spread squared, is above this
#: did not fit the data (its rms error is above a tenth of the motion): the model is written with
#: a warning that says so and what to do.
#: Fitted models end at 1e-10 to 1e-5 (the 6-DOF platforms' largest); a four-bar's learnt chart
#: from a basin training does not leave ends at 0.67
UNFITTED_REC = 1e-2


class Training:
    """One training run, as a list of optimiser steps (``steps``: Adam epochs, then chunks of
    :data:`LBFGS_CHUNK` L-BFGS iterations, then the identification's) taken in order.

    Each rule has its own place: the L-BFGS share and convergence are decided from the records
    alone (:func:`lbfgs_schedule`), so a resumed run takes the same decisions; :meth:`record`
    keeps the best weights by validation loss; :meth:`snapshot` / :meth:`restore` are the
    checkpoint's content; :meth:`start_lbfgs` and :meth:`start_identification` are the two
    changes of the model during training (``--identify``: the dense term library joins at
    L-BFGS, the thresholded one after it).
    """

    def __init__(self, ds: Dataset, cfg: TrainConfig, progress: Callable[[dict], None] | None = None,
                 checkpoint: Checkpointer | None = None):
        cfg.validate()
        if not isinstance(cfg.dof, int):
            raise TrainingError(f"--dof {cfg.dof!r}: the training needs the number of minimal coordinates "
                                "(mc2fmu.pipeline.train resolves auto from the data)")
        if cfg.dof >= ds.layout.size:
            raise TrainingError(f"--dof {cfg.dof}: must be smaller than the {ds.layout.size} natural coordinates")
        self.cfg, self.progress, self.checkpoint, self.ds = cfg, progress, checkpoint, ds
        torch.manual_seed(cfg.seed)
        self.t0 = time.perf_counter()
        self.angles = [False] * cfg.dof if cfg.coords else parse_angles(cfg.angles, ds, cfg.dof)
        self.windows = make_windows(ds, cfg.triplets, cfg.window)
        self.model = build_model(ds, cfg, self.angles)
        self.loss_fn = LossFunction(self.model, cfg, self.angles, loss_scales(cfg, self.model, ds, self.windows),
                                    ds.layout)
        # 95/5 split of the triplets (seeded)
        n = len(self.windows)
        perm = np.random.default_rng(cfg.seed).permutation(n)
        n_val = max(2, int(round(cfg.validation_fraction * n)))
        self.train_set = self.windows.subset(np.sort(perm[n_val:]))
        self.val_set = self.windows.subset(np.sort(perm[:n_val]))

        self.best = {"val": math.inf, "state": copy.deepcopy(self.model.state_dict())}
        self.history: list[dict] = []
        self.total = cfg.adam_epochs + cfg.lbfgs_iters + (cfg.identify_iters if cfg.identify else 0)
        # where each stage's iterations start in the whole run's count (the progress's ``done``)
        self.offset = {"adam": 0, "lbfgs": cfg.adam_epochs, "identify": cfg.adam_epochs + cfg.lbfgs_iters}
        self.steps = [("adam", ep) for ep in range(cfg.adam_epochs)] + \
            [("lbfgs", it) for it in range(0, cfg.lbfgs_iters, LBFGS_CHUNK)]
        if cfg.identify:
            self.steps += [("identify", it) for it in range(0, cfg.identify_iters, LBFGS_CHUNK)]
        self.pruned = False  # --identify: the thresholded library replaced the dense one
        # The Adam phase fits the kinematics alone (warm-up "rec"): with the dynamics term from
        # the start, a stiff force (e.g. a spring on a decoded length) can pull an unformed
        # decoder into a basin where L-BFGS no longer recovers the reconstruction.
        self.warm = cfg.warmup == "rec"
        self.opt = torch.optim.Adam(self.params(), lr=cfg.adam_lr)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=max(cfg.adam_epochs, 1),
                                                                eta_min=cfg.adam_lr * 0.03)
        self.lbfgs: LBFGS | None = None
        self.lbfgs_parts: dict = {}
        self.announced = False  # the progress said L-BFGS converged (not part of the training state)
        # the L-BFGS phase's first share of the training triplets (every Nth); tol 0 never grows it
        first_share = cfg.lbfgs_subset if cfg.lbfgs_tol > 0 else 1
        while first_share > 1 and len(range(0, len(self.train_set), first_share)) < MIN_SHARE_TRIPLETS:
            first_share //= 2
        self.first_share = first_share
        self.config_key = json.loads(json.dumps(config_to_dict(cfg)))  # as a checkpoint holds it
        self.data_hash = data_hash(self.windows, self.model) if checkpoint else ""

    # ------------------------------------------------------------------ parts

    def params(self) -> list[torch.Tensor]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def new_lbfgs(self) -> LBFGS:
        return LBFGS(self.params(), lr=1.0, max_iter=LBFGS_CHUNK, history_size=LBFGS_HISTORY, tolerance_grad=1e-12,
                     tolerance_change=1e-15)

    def schedule(self) -> tuple[int, bool]:
        return lbfgs_schedule(self.history, self.cfg.lbfgs_tol, self.cfg.lbfgs_floor, self.first_share)

    def use_share(self, every: int) -> None:
        """Fit every ``every``-th training triplet (``share_set``); the others are ``share_rest``."""
        self.every = every
        inside = np.arange(len(self.train_set)) % every == 0
        self.share_set = self.train_set if every == 1 else self.train_set.subset(np.flatnonzero(inside))
        self.share_rest = None if every == 1 else self.train_set.subset(np.flatnonzero(~inside))

    def closure(self) -> torch.Tensor:
        self.lbfgs.zero_grad()
        loss, parts = self.loss_fn(self.share_set)
        loss.backward()
        self.lbfgs_parts.update(parts)
        return loss

    def record(self, stage: str, it: int, loss: float, parts: dict) -> None:
        """Evaluate the validation triplets, keep the best weights, append the record."""
        loss_fn = self.loss_fn
        with torch.no_grad():
            vloss, vparts = loss_fn(self.val_set, kinematic_only=self.warm and stage == "adam")
        v = float(vloss)
        # the fit alone, what the convergence rule watches: L_gauge chooses the chart and may go
        # on falling after the fit has stopped improving (see lbfgs_converged)
        v_fit = v - sum(loss_fn.weights[k] * vparts[k] for k in loss_fn.outside_fit if k in vparts)
        extra = {}
        partial = stage == "lbfgs" and self.every > 1
        if partial:
            # the training triplets outside the share, held out from it: the share is too small
            # when they fit much worse (share_too_small)
            with torch.no_grad():
                rest = loss_fn.fit(loss_fn(self.share_rest)[1])
            extra["rest_fit"] = rest if math.isfinite(rest) else math.inf
        # a share's fit that broke the model between its triplets (the validation states or the
        # rest of the training ones): the schedule moves to every triplet from the best weights
        # (see lbfgs_schedule)
        if partial and math.isfinite(loss) and (not math.isfinite(v) or extra["rest_fit"] == math.inf):
            v = v_fit = math.inf
        elif not math.isfinite(loss) or not math.isfinite(v):
            raise TrainingError(
                f"training diverged at {stage} iteration {it}: the loss became {loss} (validation {v}); "
                "try a smaller --lr, another --seed, or check the dataset (dt, forces)"
            )
        if v < self.best["val"]:
            self.best = {"val": v, "state": copy.deepcopy(self.model.state_dict())}
        # the training triplets' fit at the last evaluation (L-BFGS: its last loss), beside the
        # validation one: a share of the triplets the validation ones disagree with is too small
        entry = {"stage": stage, "iter": it, "loss": loss, "val": v, "val_fit": v_fit, "fit": loss_fn.fit(parts),
                 **extra, **parts, "labels": loss_fn.labels, "elapsed": time.perf_counter() - self.t0,
                 "done": (it + self.offset[stage]) / self.total}
        if stage == "lbfgs":  # what the stopping rule watches (the progress display shows it)
            so_far = self.history + [entry]
            entry.update(best_fit=window_bests(so_far, LBFGS_WINDOW)[0], fall=lbfgs_fall(so_far),
                         tol=self.cfg.lbfgs_tol, floor=current_floor(self.history, self.cfg.lbfgs_floor),
                         window=LBFGS_WINDOW)
        self.history.append(entry)
        if self.progress:
            self.progress(dict(entry))

    # ------------------------------------------------------------------ checkpoints

    def snapshot(self, step: int) -> dict:
        """Everything needed to take ``steps[step]`` and the rest exactly as this run would."""
        steps = self.steps
        return copy.deepcopy({
            "version": CHECKPOINT_VERSION, "step": step, "phase": steps[step][0] if step < len(steps) else "done",
            "iteration": steps[step][1] if step < len(steps) else self.total,
            "model": self.model.state_dict(), "adam": self.opt.state_dict(), "sched": self.sched.state_dict(),
            "lbfgs": None if self.lbfgs is None else self.lbfgs.state_dict(),
            "library": library_state(self.model.library), "pruned": self.pruned,
            "best_val": float(self.best["val"]), "best_state": self.best["state"], "history": self.history,
            "elapsed": time.perf_counter() - self.t0, "rng": torch.get_rng_state(),
            "config": json.dumps(self.config_key, sort_keys=True), "data_hash": self.data_hash,
        })

    def restore(self) -> int:
        """Continue from the checkpoint's state; returns the step to take next."""
        ckpt = self.checkpoint
        s = read_checkpoint(ckpt, self.config_key, self.data_hash)
        try:
            first = check_resumed_state(s, len(self.steps), ckpt.path)
            self.pruned = bool(s.get("pruned", False))
            if s.get("library") is not None:  # before the thresholding every term is in, zeros included
                self.model.set_library(library_from_state(s["library"]), trainable=True, dense=not self.pruned)
            self.model.load_state_dict(s["model"])
            self.opt.load_state_dict(s["adam"])
            self.sched.load_state_dict(s["sched"])
            if s["lbfgs"] is not None:
                self.lbfgs = self.new_lbfgs()
                self.lbfgs.load_state_dict(s["lbfgs"])
            self.best = {"val": s["best_val"], "state": s["best_state"]}
            self.history[:] = s["history"]
            self.t0 -= s["elapsed"]
            torch.set_rng_state(s["rng"])
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
            # a checkpoint that passed the version, options and data checks but holds the wrong things
            raise TrainingError(f"{ckpt.path}: a damaged training checkpoint ({type(exc).__name__}: "
                                f"{str(exc)[:200]}); delete it and run without --resume to start over") from None
        return first

    # ------------------------------------------------------------------ the stages

    def adam_step(self, it: int) -> None:
        self.opt.zero_grad()
        loss, parts = self.loss_fn(self.train_set, kinematic_only=self.warm)
        loss.backward()
        self.opt.step()
        self.sched.step()
        if it % 25 == 0 or it == self.cfg.adam_epochs - 1:
            self.record("adam", it + 1, loss.item(), parts)

    def start_lbfgs(self) -> None:
        """From Adam's best weights; with ``--identify`` every term of the library joins, from zero."""
        cfg, model = self.cfg, self.model
        model.load_state_dict(self.best["state"])
        if cfg.identify:
            q, v, u, _, _ = residual_data(model, self.loss_fn, self.train_set)
            library = build_library(parse_groups(cfg.identify), len(self.angles), self.angles, u.shape[1],
                                    np.sqrt(np.mean(v**2, axis=0)))
            model.set_library(library, trainable=True, dense=True)
            self.best["state"] = copy.deepcopy(model.state_dict())
        self.lbfgs = self.new_lbfgs()
        if self.warm:  # the full loss from here on: the warm-up's best is not comparable
            self.best["val"] = math.inf

    def change_share(self, every: int) -> None:
        """The fit stalled or overfits on this share: more triplets.  A share that broke the
        model gives way from the best weights with a new memory; otherwise the memory is kept."""
        broken = not math.isfinite(self.history[-1]["val"])
        self.use_share(every)
        if self.lbfgs is not None and broken:
            self.model.load_state_dict(self.best["state"])
            self.lbfgs = self.new_lbfgs()
        elif self.lbfgs is not None:
            self.lbfgs.objective_changed()

    def lbfgs_step(self, it: int) -> None:
        if self.lbfgs is None:
            self.start_lbfgs()
        loss = self.lbfgs.step(self.closure)
        self.record("lbfgs", min(it + LBFGS_CHUNK, self.cfg.lbfgs_iters), loss.item(),
                    {**self.lbfgs_parts, "every": self.every, "triplets": len(self.share_set)})

    def start_identification(self) -> None:
        """Seed 004's thresholding from the best weights: the sparse terms, another model from here."""
        self.model.load_state_dict(self.best["state"])
        self.model.set_library(sparse_terms(self.model, self.loss_fn, self.train_set, self.cfg, self.angles),
                               trainable=True)
        self.best = {"val": math.inf, "state": copy.deepcopy(self.model.state_dict())}
        self.lbfgs = self.new_lbfgs()
        self.pruned = True

    def identify_step(self, it: int) -> None:
        if not self.pruned:
            self.start_identification()
        loss = self.lbfgs.step(self.closure)
        self.record("identify", min(it + LBFGS_CHUNK, self.cfg.identify_iters), loss.item(), dict(self.lbfgs_parts))

    def check_floor(self) -> None:
        """The floor's check (:mod:`.floor_check`): when the last L-BFGS record reached the floor,
        roll the best weights out over the training runs; an error (the points' NRMSE) above
        ``--lbfgs-check`` lowers the floor.  Both go into that record (``check``, ``floor``), so
        the schedule reads them and a resumed run takes the same decision."""
        cfg = self.cfg
        floor = floor_to_check(self.history, cfg.lbfgs_floor)
        if floor is None or cfg.lbfgs_check <= 0:
            return
        current = copy.deepcopy(self.model.state_dict())
        self.model.load_state_dict(self.best["state"])
        try:
            with torch.no_grad():
                nrmse = training_rollout_nrmse(self.model, self.ds)
        finally:
            self.model.load_state_dict(current)
        entry = [e for e in self.history if e["stage"] == "lbfgs"][-1]
        entry["check"], entry["checked_floor"] = nrmse, floor
        if nrmse is None:  # nothing to roll out: the floor stands, unchecked (the record says so: check None)
            log.warning("L-BFGS reached its floor %.1e, but no training run can be rolled out to check it (every "
                        "one is shorter than 3 samples or does not move): training stops at the floor unchecked "
                        "(--lbfgs-check)", floor)
        elif nrmse > cfg.lbfgs_check:
            entry["floor"] = lowered_floor(entry["best_fit"], nrmse, cfg.lbfgs_check)  # best_fit <= floor here
            if not entry["floor"] < entry["best_fit"]:  # at the lowest floor: training stops here, unchecked
                log.warning("L-BFGS stops at its lowest floor (%.0e) with a rollout error of %.3g %% over the "
                            "training runs (--lbfgs-check %.3g %%)", entry["floor"], 100 * nrmse, 100 * cfg.lbfgs_check)
            log.info("L-BFGS reached its floor %.1e at iteration %d, but the training runs' rollout error is %.3g %% "
                     "(--lbfgs-check %.3g %%): the floor is now %.1e", floor, entry["iter"], 100 * nrmse,
                     100 * cfg.lbfgs_check, entry["floor"])
        if self.progress:
            self.progress(dict(entry))

    def announce_convergence(self) -> None:
        if self.progress and not self.announced:
            self.announced = True
            done_its = [e["iter"] for e in self.history if e["stage"] == "lbfgs"][-1]
            self.progress({"stage": "lbfgs converged at", "iter": done_its, "loss": None, "val": None,
                           "done": self.offset["identify"] / self.total, "elapsed": time.perf_counter() - self.t0})

    # ------------------------------------------------------------------ the run

    def run(self) -> TrainResult:
        checkpoint = self.checkpoint
        first = self.restore() if checkpoint and checkpoint.resume else 0
        if checkpoint:
            checkpoint.start()
        last = self.snapshot(first) if checkpoint else None
        self.use_share(self.schedule()[0])
        try:
            for step in range(first, len(self.steps)):
                stage, it = self.steps[step]
                if stage == "lbfgs":
                    self.check_floor()
                every, converged = self.schedule() if stage == "lbfgs" else (1, False)
                if stage == "lbfgs" and every != self.every:
                    self.change_share(every)
                if stage == "identify" and self.every != 1:
                    self.use_share(1)
                if converged:
                    # the rest of the L-BFGS budget is skipped (decided from the records alone,
                    # so a resumed run skips the same steps; no snapshot for a skipped step)
                    self.announce_convergence()
                    continue
                if checkpoint:
                    last = self.snapshot(step)
                    if checkpoint.due():
                        write_checkpoint(checkpoint, last)
                getattr(self, f"{stage}_step")(it)
        except KeyboardInterrupt:
            if checkpoint and last is not None:
                write_checkpoint(checkpoint, last)
            raise TrainingInterrupted(checkpoint.path if checkpoint else None) from None
        return self.result()

    def result(self) -> TrainResult:
        """The best weights (thresholded terms with ``--identify``) and the training record."""
        cfg, model = self.cfg, self.model
        model.load_state_dict(self.best["state"])
        if not all(torch.isfinite(v).all() for v in model.state_dict().values()):
            raise TrainingError("training ended with non-finite weights (a corrupt checkpoint, or a diverged run); "
                                "nothing was written: delete the checkpoint and train again, or try another --seed")
        extra = {}
        if cfg.identify:
            if not self.pruned:  # no fine-tuning iterations: threshold the trained library as it is
                model.set_library(sparse_terms(model, self.loss_fn, self.train_set, cfg, self.angles))
            extra["identified_terms"] = 0 if model.library is None else int(len(model.library))
        with torch.no_grad():
            _, parts = self.loss_fn(self.windows)
        if not parts["rec"] <= UNFITTED_REC:
            log.warning(
                "training did not fit the data: the reconstruction error is %.2g of the data's spread squared (a fitted "
                "model: below 1e-5; the validation loss %.2g), so the %s not chart the motion and the model's results "
                "are not the mechanism's. Seed %d started it in a basin it did not leave: train again with --seeds 4 "
                "(the best of four seeds is kept) or another --seed%s", parts["rec"], self.best["val"],
                "known coordinates do" if cfg.coords else "coordinates it learnt do", cfg.seed,
                "; check that the --coords columns determine the mechanism's pose" if cfg.coords else "")
            extra["unfitted"] = True
        seconds = time.perf_counter() - self.t0
        if model.spring_law_residuals:
            extra["spring_law_residual"] = model.spring_law_residuals
        lbfgs_done = [e["iter"] for e in self.history if e["stage"] == "lbfgs"]
        metrics = {"val_loss": self.best["val"], **parts, "term_titles": self.loss_fn.titles, **extra,
                   "triplets": len(self.windows),
                   "hull_dim": model.hull_dim, "train_seconds": seconds,
                   "lbfgs_iterations": lbfgs_done[-1] if lbfgs_done else 0}
        return TrainResult(model, self.angles, self.history, metrics, seconds)
