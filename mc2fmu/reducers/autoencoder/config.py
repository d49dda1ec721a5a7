"""The autoencoder reducer's options: one frozen dataclass, whose field metadata are also its
command-line options (:func:`mc2fmu.reducers.base.add_config_arguments`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import TrainingError
from ...models.mlp import ACTIVATIONS
from ...models.step_maps import STEP_MAPS
from ...models.terms import DEFAULT_GROUPS, GROUPS, parse_groups
from ..base import (
    SEED_MAX,
    finite_number,
    int_list,
    name_list,
    positive_number_problem,
    seed_problem,
    whole_number_problem,
    widths_problem,
)

#: the two losses; "sim" is the default
LOSSES = {
    "sim": "L_rec + dyn_weight L_dyn (one-step acceleration residual of the step map)",
    "appendix": "L_rec + vel_weight L_vel + acc_weight L_acc (paper appendix, eq. A.7)",
}
#: what the Adam phase fits before L-BFGS fits the full loss
WARMUPS = {
    "rec": "L_rec alone: a kinematic start (default)",
    "none": "the full loss from the start",
}


def _opt(flag: str, help: str, **kw) -> dict:
    return {"flag": flag, "help": help, **kw}


def _or_auto(convert: Callable[[str], int | float], what: str) -> Callable[[str], int | float | str]:
    """The parser of an option's text: ``auto``, or ``convert(text)`` (``what`` it must be
    otherwise, for the error)."""

    def parse(text: str) -> int | float | str:
        if str(text).strip() == "auto":
            return "auto"
        try:
            return convert(text)
        except ValueError:
            raise ValueError(f"{text!r}: give {what} or auto") from None

    return parse


#: ``--dof``: a positive integer, or ``auto`` (estimated from the data)
dof_value = _or_auto(int, "the number of minimal coordinates")
#: a count, or ``auto`` (the default the config derives)
count_or_auto = _or_auto(int, "a whole number")
#: a loss weight, or ``auto`` (the default the config derives)
weight_or_auto = _or_auto(float, "a weight >= 0")


#: L_gauge's weight for one learnt coordinate (``gauge_weight = "auto"``).  Measured with the
#: defaults (benchmarks/train_accuracy.py --gauge-weight, docs/benchmarks.md "Reduced models"): it took the
#: A02 chain from 5.5e-2 m to 3.4e-3 m of ADAMS and kept the other 1-DOF suite mechanisms
#: within their targets (each run within 4x of its error without it, either way); on the 2-DOF
#: five-bar it cost 5-10x the error
AUTO_GAUGE_WEIGHT = 1e-4

#: training triplets (``samples = "auto"``), evenly spaced over the runs.  Measured with the
#: defaults (benchmarks/train_accuracy.py --samples, benchmarks/a02.py, docs/benchmarks.md "Reduced models"):
#: 1000 instead of 2000 halved the cost per L-BFGS iteration and kept every suite mechanism within
#: its targets (A02's B0 3.4e-3 -> 1.8e-3 m of ADAMS).  With --identify the smoothed signs of
#: friction are fitted where the velocity changes sign, a few ms of a run: there 1000 triplets
#: (one per 10 ms) left the friction four-bar's autoencoder at 0.30 / 0.69 / 0.56 %, 2000 at
#: 0.03 / 0.09 / 0.09 % (benchmarks/unknown_forces.py --only identify)
AUTO_SAMPLES = 1000
AUTO_SAMPLES_IDENTIFY = 2000

#: seeds trained and the best kept (``--seeds``; mc2fmu/parallel/seeds.py)
DEFAULT_SEEDS = 1


#: the fit that is good enough (``lbfgs_floor``): a validation loss of the fit (L_gauge left out)
#: of 1e-7.  Measured (benchmarks/train_accuracy.py, docs/benchmarks.md "Reduced models"): with an L-BFGS
#: that no longer stalls (:mod:`.lbfgs`) the 1-DOF linkages went on falling by more than 20 %
#: per 400 iterations far below what their accuracy needs (the four-bar 60 s of training for
#: 0.003 / 0.009 / 0.004 %).  With the floor the four-bar, slider-crank, MacPherson and two-bar
#: end after 180-1100 iterations at 0.004-0.08 % (both modes); the five-bar and the 3-RRR stay
#: above it (4e-7 to 2e-6) and stop by the relative rule or the iteration cap.  It cost A02's B0
#: 3.7e-3 -> 5.4e-3 m of ADAMS (its target 1e-2 m)
AUTO_LBFGS_FLOOR = 1e-7

#: the floor's check (``lbfgs_check``, :mod:`.floor_check`): at the floor, the training runs'
#: rollout error must be at most 0.02 %, or the floor is lowered.  The linkages that reach the
#: floor are at 0.002-0.03 % there (docs/benchmarks.md "Reduced models"); IFToMM A02 was at
#: 0.24 % (B0 4.4e-3 m of ADAMS); its B0 target of 5e-4 m needs an error of about 0.02 %
#: (benchmarks/a02.py: B0 1.1e-4 m at 0.004 %)
AUTO_LBFGS_CHECK = 2e-4

#: the rigidity term's latent points (``rigidity_points`` is their most): fewer on a mechanism
#: of many bodies, whose every point holds each body (its cost grows with points x bodies), down
#: to :data:`RIGIDITY_POINTS_PER_DOF` per minimal coordinate.  Measured on A02 (81 bodies, 1 DOF,
#: benchmarks/a02.py): 250 points instead of 1000 took an L-BFGS iteration from 48 to 23 ms;
#: every bundled mechanism of at most 20 bodies keeps 1000
RIGIDITY_BODY_POINTS = 20000
RIGIDITY_POINTS_PER_DOF = 250


#: L-BFGS starts on every 4th training triplet (``lbfgs_subset``).  A closure on a quarter of the
#: triplets costs about half (benchmarks/loss_cost.py: the 3-RRR's 17.7 -> 8.5 ms, a fixed part
#: stays), and the validation loss per iteration, on triplets no subset holds, was the same as
#: with all of them (the 3-RRR: 2.5e-4, 1.0e-5, 1.7e-6 after 400, 1600 and 4000 iterations
#: either way).  Where a share no longer suffices the fit stalls or the rest of the triplets fit
#: worse than the share, and the share doubles (the five-bar's after 100 iterations; docs/benchmarks.md "Reduced
#: models" has the suite's figures)
AUTO_LBFGS_SUBSET = 4


@dataclass(frozen=True)
class TrainConfig:
    dof: int | str = field(default="auto", metadata=_opt(
        "--dof", "number of minimal coordinates (the mechanism's DOF), or auto (default): estimated from the data, "
        "with the evidence printed, one per --coords column when those are given; a run the data cannot decide is "
        "refused with the reason (see `mc2fmu estimate-dof`)", metavar="N|auto", parse=dof_value))
    coords: tuple[str, ...] = field(default=(), metadata=_opt(
        "--coords", "known minimal coordinates: pose columns such as base1.y or crank.R11 (only the decoder is "
        "trained)", metavar="COL,...", parse=name_list))
    angles: str = field(default="auto", metadata=_opt(
        "--angles", "angle-type coordinates (cos/sin decoder input) for full revolutions; auto detects them (default)",
        metavar="auto|none|I,..."))
    hidden: tuple[int, ...] = field(default=(), metadata=_opt(
        "--hidden", "decoder hidden widths (default 32,32 for 1 DOF and at most 3 bodies, else 64,64)",
        metavar="W,...", parse=int_list))
    encoder_hidden: tuple[int, ...] = field(default=(64, 64), metadata=_opt(
        "--encoder-hidden", "encoder hidden widths (default 64,64)", metavar="W,...", parse=int_list))
    activation: str = field(default="tanh", metadata=_opt(
        "--activation", "decoder and encoder activation (default tanh)", choices=lambda: ACTIVATIONS))
    step_map: str = field(default="centred", metadata=_opt(
        "--step-map", "one-step map: centred (default, second order) or paper (Algorithm 1)",
        choices=lambda: STEP_MAPS))
    samples: int | str = field(default="auto", metadata=_opt(
        "--samples", "time triplets (windows of K+2 samples with --rollout K) used for training, evenly spaced over "
        f"the runs; auto (default): {AUTO_SAMPLES}, {AUTO_SAMPLES_IDENTIFY} with --identify (friction's sign changes "
        "need the denser sampling); 0: every window of the runs", metavar="N|auto", parse=count_or_auto))
    adam_epochs: int = field(default=300, metadata=_opt("--adam-epochs", "Adam epochs before L-BFGS (default 300)"))
    warmup: str = field(default="rec", metadata=_opt(
        "--warmup", "rec (default): the Adam epochs fit the reconstruction alone, a kinematic start for the "
        "L-BFGS phase on the full loss; none: the full loss from the start", choices=lambda: WARMUPS))
    adam_lr: float = field(default=3e-3, metadata=_opt("--lr", "Adam learning rate (default 3e-3)"))
    lbfgs_iters: int = field(default=6000, metadata=_opt(
        "--lbfgs-iters", "L-BFGS iterations at most (default 6000; training stops earlier once converged, see "
        "--lbfgs-tol)"))
    lbfgs_tol: float = field(default=0.05, metadata=_opt(
        "--lbfgs-tol", "stop L-BFGS once the best validation loss fell by less than this fraction over the last 400 "
        "iterations (default 0.05; 0, with --lbfgs-floor 0: run all --lbfgs-iters)"))
    lbfgs_floor: float = field(default=AUTO_LBFGS_FLOOR, metadata=_opt(
        "--lbfgs-floor", "stop L-BFGS once the best validation loss of the fit is at most this (and --lbfgs-check "
        "passes; default 1e-7: its "
        "terms are relative squared errors, so the reconstruction and the one-step accelerations are then within "
        "about 3e-4 of the data's spread; 0: off)"))
    lbfgs_check: float = field(default=AUTO_LBFGS_CHECK, metadata=_opt(
        "--lbfgs-check", "when the fit reaches --lbfgs-floor, roll the model out over the training runs (as "
        "`mc2fmu simulate`) and stop only if the error (the points' NRMSE) is at most this fraction; otherwise lower the floor "
        f"and go on (default {AUTO_LBFGS_CHECK:g}, i.e. 0.02 %; 0: no check)"))
    lbfgs_subset: int = field(default=AUTO_LBFGS_SUBSET, metadata=_opt(
        "--lbfgs-subset", "L-BFGS starts on every Nth training triplet (at least 200 of them) and doubles its share, "
        "up to all of them, each time the fit stalls there (the --lbfgs-tol rule) or the rest of the training triplets "
        "fit more than twice as badly as the share; convergence by the rule is decided on all of them (default "
        f"{AUTO_LBFGS_SUBSET}; 1: all from the start)", metavar="N"))
    loss: str = field(default="sim", metadata=_opt(
        "--loss", "sim (default): L_rec + L_dyn, the step map's one-step residual; appendix: the paper appendix's "
        "L_rec + L_vel + L_acc (decoded velocities/accelerations against the data)", choices=lambda: LOSSES))
    dyn_weight: float = field(default=1.0, metadata=_opt(
        "--dyn-weight", "weight of the dynamics term (0: the paper's L_rec alone)"))
    rec_weight: float = 1.0
    vel_weight: float = field(default=1.0, metadata=_opt("--vel-weight", "--loss appendix: weight of L_vel (default 1)"))
    acc_weight: float = field(default=1.0, metadata=_opt("--acc-weight", "--loss appendix: weight of L_acc (default 1)"))
    rollout_steps: int = field(default=0, metadata=_opt(
        "--rollout", "add K steps of the model's own step map to the loss (default 0: off)", metavar="K"))
    rollout_weight: float = field(default=1.0, metadata=_opt("--rollout-weight", "weight of the rollout term (default 1)"))
    rigidity_weight: float = field(default=1.0, metadata=_opt(
        "--rigidity-weight", "weight of L_rig, the decoded bodies' point distances against the rigid ones at latent "
        "points spread over the whole range of the coordinates, off the training path too (default 1; 0: off)"))
    rigidity_points: int = 1000
    curvature_weight: float = field(default=1.0, metadata=_opt(
        "--curvature-weight", "weight of L_curv, the second difference of the reconstructed triplet against the "
        "data's, as an acceleration: the chart's curvature along the path in every direction, not only where the "
        "trained forces weigh it, which a model run with other masses, gravity or springs needs (default 1; 0: off)"))
    gauge_weight: float | str = field(default="auto", metadata=_opt(
        "--gauge-weight", "weight of L_gauge, the spread of log det M_m (the reduced mass matrix) over the training "
        "states: a choice of the learnt coordinates, not of the physics (a 1-DOF mechanism's coordinate with a "
        "constant M_m is its arc length in the mass metric). auto (default): 1e-4 for one learnt coordinate, "
        "else 0 (off; with known coordinates M_m is the physics')", metavar="W|auto", parse=weight_or_auto))
    identify: str = field(default="", metadata=_opt(
        "--identify", "identify forces the mechanism file does not describe (joint friction, unknown dampers) as "
        "sparse terms in the minimal coordinates, after seed 004: every candidate term of a library joins the "
        "reduced dynamics with a zero coefficient and trains with the model, sequentially thresholded least "
        "squares on the trained model's residual keeps the terms that matter, the model trains on with those, "
        "and the equation is printed. GROUPS: a comma list of "
        + ", ".join(GROUPS) + ", or all (default: " + ",".join(DEFAULT_GROUPS) + ": friction and damping)",
        metavar="GROUPS", const="default"))
    kappa: float = field(default=0.05, metadata=_opt(
        "--kappa", "--identify: the sparsity threshold, relative: a term is dropped when its contribution's rms is "
        "below kappa times the unknown force's rms (default 0.05)"))
    identify_iters: int = field(default=500, metadata=_opt(
        "--identify-iters", "--identify: L-BFGS iterations that train the model with the identified terms "
        "(default 500)"))
    validation_fraction: float = 0.05
    # the decoder's outputs span the data's affine hull: the principal directions whose singular
    # value exceeds hull_tol of the largest (0: no hull).  Measured on the four-bar autoencoder
    # (300 Adam epochs + 400 L-BFGS iterations): 1e-9 kept a direction at 4e-6 and training
    # diverged (validation loss 7); 1e-5 gave 4.7e-7, 1e-3 1.2e-6
    hull_tol: float = 1e-5
    scale_floor: float = 1e-3  # relative floor on per-coordinate scales (channels that barely move)
    loss_scale: str = "channel"  # "channel": per coordinate (default; measured better); "global": one scale per term
    seed: int = field(default=0, metadata=_opt("--seed", "random seed (default 0)"))
    seeds: int = field(default=DEFAULT_SEEDS, metadata=_opt(
        "--seeds", f"train K seeds (--seed, --seed + 1, ...) in parallel and keep the one with the lowest validation "
        f"loss (default {DEFAULT_SEEDS}; docs/training.md)"))

    def validate(self) -> None:
        """Checks that need no data, done before any data is read."""
        problems = []
        if self.dof == "auto":
            pass
        elif not isinstance(self.dof, int) or isinstance(self.dof, bool) or self.dof < 1:
            problems.append(f"--dof {self.dof}: the number of minimal coordinates must be >= 1 (or auto)")
        elif self.coords and len(self.coords) != self.dof:
            problems.append(f"--coords names {len(self.coords)} column(s) but --dof is {self.dof}; give one column per DOF")
        for flag, value, valid in (("--warmup", self.warmup, WARMUPS), ("--loss", self.loss, LOSSES),
                                   ("--activation", self.activation, ACTIVATIONS),
                                   ("--step-map", self.step_map, STEP_MAPS)):
            if value not in valid:
                problems.append(f"{flag} {value!r}: choose one of {', '.join(valid)}")
        if self.identify:
            try:
                parse_groups(self.identify)
            except ValueError as exc:
                problems.append(f"--identify {exc}")
        if not ((k := finite_number(self.kappa)) is not None and 0 <= k < 1):
            problems.append(f"--kappa {self.kappa}: the relative threshold must be in [0, 1)")
        if self.samples != "auto" and (not isinstance(self.samples, int) or isinstance(self.samples, bool)
                                       or self.samples < 0):
            problems.append(f"--samples {self.samples}: the number of training triplets must be >= 0 (0: every "
                            "window of the runs) or auto")
        if not isinstance(self.seeds, int) or isinstance(self.seeds, bool) or self.seeds < 1:
            problems.append(f"--seeds {self.seeds}: the number of seeds must be a whole number >= 1")
        for problem in (
                positive_number_problem("--lr", self.adam_lr, "a learning rate"),
                whole_number_problem("--adam-epochs", self.adam_epochs, 0, what="a number of Adam epochs"),
                whole_number_problem("--lbfgs-iters", self.lbfgs_iters, 0, what="a number of L-BFGS iterations"),
                whole_number_problem("--identify-iters", self.identify_iters, 0, what="a number of iterations"),
                whole_number_problem("--rollout", self.rollout_steps, 0, what="a number of rollout steps (0: off)"),
                whole_number_problem("rigidity_points", self.rigidity_points, 1, what="a number of latent points"),
                seed_problem("--seed", self.seed),
                widths_problem("--hidden", self.hidden),
                widths_problem("--encoder-hidden", self.encoder_hidden)):
            if problem:
                problems.append(problem)
        # the seeds trained are --seed .. --seed + --seeds - 1 (each checked above)
        if seed_problem("--seed", self.seed) is None and isinstance(self.seeds, int) and self.seeds >= 1 \
                and self.seed + self.seeds - 1 > SEED_MAX:
            problems.append(f"--seeds {self.seeds}: with --seed {self.seed} the last seed passes {SEED_MAX}: give a "
                            "smaller --seed")
        if not ((vf := finite_number(self.validation_fraction)) is not None and 0 < vf < 1):
            problems.append(f"validation_fraction: {self.validation_fraction!r} is not a share of the triplets: give a "
                            "number between 0 and 1 (default 0.05)")
        if not ((sf := finite_number(self.scale_floor)) is not None and 0 <= sf < 1):
            problems.append(f"scale_floor: {self.scale_floor!r}: give a number in [0, 1) (default 1e-3)")
        if not ((f := finite_number(self.lbfgs_floor)) is not None and f >= 0):
            problems.append(f"--lbfgs-floor {self.lbfgs_floor}: the loss floor must be a finite number >= 0 (0: off)")
        if not ((c := finite_number(self.lbfgs_check)) is not None and 0 <= c < 1):
            problems.append(f"--lbfgs-check {self.lbfgs_check}: the rollout's NRMSE must be a fraction in [0, 1), e.g. "
                            "2e-4 for 0.02 % (0: no check)")
        if not isinstance(self.lbfgs_subset, int) or isinstance(self.lbfgs_subset, bool) or self.lbfgs_subset < 1:
            problems.append(f"--lbfgs-subset {self.lbfgs_subset}: give a whole number >= 1 (1: every training "
                            "triplet from the start)")
        if not ((t := finite_number(self.lbfgs_tol)) is not None and 0 <= t < 1):
            problems.append(f"--lbfgs-tol {self.lbfgs_tol}: the relative improvement must be in [0, 1) (0: no early stop)")
        if not ((h := finite_number(self.hull_tol)) is not None and 0 <= h < 1):
            problems.append(f"hull_tol {self.hull_tol}: must be in [0, 1) (0: no hull)")
        for name in ("rec_weight", "dyn_weight", "vel_weight", "acc_weight", "rollout_weight", "rigidity_weight",
                     "curvature_weight", "gauge_weight"):
            w = getattr(self, name)
            if name == "gauge_weight" and w == "auto":
                continue
            if isinstance(w, str):
                problems.append(f"--{name.replace('_', '-')} {w!r}: a loss weight must be a number >= 0 or auto")
                continue
            if not ((fw := finite_number(w)) is not None and fw >= 0):
                problems.append(f"--{name.replace('_', '-')} {w}: a loss weight must be a finite number >= 0")
        if problems:
            raise TrainingError(problems)

    def decoder_hidden(self, n_x: int) -> tuple[int, ...]:
        """The decoder's hidden widths: ``hidden``, or by default 32, 32 for one DOF and at most
        36 natural coordinates (3 bodies), 64, 64 otherwise.  Measured: 64 for the 2-DOF two_bar;
        on the 6-body MacPherson (72 coordinates) a 32-wide decoder's reconstruction limited the
        autoencoder to 0.64 % on its training run, 64 gave 0.28 %."""
        return self.hidden or ((32, 32) if self.dof == 1 and n_x <= 36 else (64, 64))

    def rigidity_samples(self, n_bodies: int) -> int:
        """L_rig's latent points: ``rigidity_points`` at most, :data:`RIGIDITY_BODY_POINTS` /
        ``n_bodies`` on many bodies, but not under :data:`RIGIDITY_POINTS_PER_DOF` per minimal
        coordinate (``dof`` resolved)."""
        budget = max(RIGIDITY_BODY_POINTS // max(n_bodies, 1), RIGIDITY_POINTS_PER_DOF * int(self.dof))
        return max(1, min(int(self.rigidity_points), budget))

    @property
    def gauge(self) -> float:
        """L_gauge's weight: ``gauge_weight``, or for ``auto`` :data:`AUTO_GAUGE_WEIGHT` with one
        learnt coordinate and 0 otherwise (``dof`` resolved)."""
        if self.gauge_weight != "auto":
            return float(self.gauge_weight)
        return AUTO_GAUGE_WEIGHT if self.dof == 1 and not self.coords else 0.0

    @property
    def triplets(self) -> int:
        """The training triplets (windows): ``samples``, or for ``auto`` :data:`AUTO_SAMPLES`
        (:data:`AUTO_SAMPLES_IDENTIFY` with ``identify``)."""
        if self.samples != "auto":
            return int(self.samples)
        return AUTO_SAMPLES_IDENTIFY if self.identify else AUTO_SAMPLES

    @property
    def window(self) -> int:
        """Consecutive samples per training item: ``K + 2`` for a rollout of ``K`` steps, at least a triplet."""
        return max(3, self.rollout_steps + 2)
