"""Training the physics-informed autoencoder (seed 000, Algorithms 1-2; METHOD.md section 3).

Loss, each term divided by its data scale so that both count:

* ``L_rec``: ``|h_d(h_e(x)) - x|^2`` over the triplet samples, per coordinate scaled by the
  spread of ``x``;
* ``L_dyn``: the dynamics residual taken entirely in decoded space,
  ``(h_d(q_hat_{i+1}) - h_d(q_{i+1})) / dt^2``, a pure acceleration error, per coordinate
  scaled by the spread of the data's accelerations.  ``q_hat_{i+1}`` is one step of the
  model's step map from the encoded triplet.

Optimisation: Adam with a decaying rate, then L-BFGS, full batch on a subsample of the
triplets; 95/5 random split, the weights with the best validation loss are kept.
Seeded and deterministic on CPU.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .dataset import Dataset
from .dynamics import acceleration
from .errors import TrainingError
from .model import Decoder, LinearEncoder, NeuralEncoder, ReducedModel, wrap_to_pi
from .natural import poses_from_nc

F64 = torch.float64


@dataclass(frozen=True)
class TrainConfig:
    dof: int
    coords: tuple[str, ...] = ()  # known minimal coordinates (pose columns); empty: autoencoder
    angles: str = "auto"  # "auto", "none", or comma list of 1-based indices that are angles
    hidden: tuple[int, ...] = ()  # decoder widths; empty: (32, 32) for 1 DOF, (64, 64) for more
    encoder_hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    step_map: str = "centred"
    samples: int = 2000  # triplets used (subsampled evenly from all runs)
    adam_epochs: int = 300  # a short Adam phase finds the basin ...
    adam_lr: float = 3e-3
    lbfgs_iters: int = 2000  # ... L-BFGS does most of the accuracy work (METHOD.md section 3)
    dyn_weight: float = 1.0
    rec_weight: float = 1.0
    validation_fraction: float = 0.05
    scale_floor: float = 1e-3  # relative floor on per-coordinate scales (channels that barely move)
    loss_scale: str = "channel"  # "channel": per coordinate (default; measured better); "global": one scale per term
    seed: int = 0

    def validate(self) -> None:
        """Checks that need no data, done before any data is read."""
        if self.dof < 1:
            raise TrainingError(f"--dof {self.dof}: the number of minimal coordinates must be >= 1")
        if self.coords and len(self.coords) != self.dof:
            raise TrainingError(f"--coords names {len(self.coords)} column(s) but --dof is {self.dof}; give one column per DOF")

    @property
    def decoder_hidden(self) -> tuple[int, ...]:
        return self.hidden or ((32, 32) if self.dof == 1 else (64, 64))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["coords"] = list(self.coords)
        d["hidden"] = list(self.decoder_hidden)
        d["encoder_hidden"] = list(self.encoder_hidden)
        return d


def _scales(a: np.ndarray, floor: float) -> np.ndarray:
    s = a.std(axis=0)
    return np.maximum(s, floor * max(float(s.max()), 1e-300))


@dataclass
class Triplets:
    x_prev: torch.Tensor
    x: torch.Tensor
    x_next: torch.Tensor
    u: torch.Tensor
    dt: float

    def subset(self, idx: np.ndarray) -> "Triplets":
        i = torch.as_tensor(idx)
        return Triplets(self.x_prev[i], self.x[i], self.x_next[i], self.u[i], self.dt)


def make_triplets(ds: Dataset, samples: int) -> Triplets:
    dts = np.asarray(ds.dt)
    if np.ptp(dts) > 1e-9 * dts.max():
        raise TrainingError(f"runs have different sample steps ({', '.join(f'{d:g}' for d in dts)} s); "
                            "a model has one time step: resample the runs to one step")
    xp, xc, xn, uu = [], [], [], []
    for run in ds.runs():
        if len(run.t) < 3:
            continue
        xp.append(run.x[:-2]); xc.append(run.x[1:-1]); xn.append(run.x[2:]); uu.append(run.u[1:-1])
    n = sum(len(a) for a in xc)
    if n < 40:
        raise TrainingError(f"the dataset has {n} usable time triplets; training needs at least 40 "
                            "(2 for validation at a 95/5 split): give longer runs")
    cat = lambda parts: torch.as_tensor(np.concatenate(parts), dtype=F64)  # noqa: E731
    T = Triplets(cat(xp), cat(xc), cat(xn), cat(uu), float(dts[0]))
    if samples and n > samples:
        idx = np.unique(np.linspace(0, n - 1, samples).round().astype(int))
        T = T.subset(idx)
    return T


def detect_angles(ds: Dataset, dof: int) -> list[bool]:
    """Angle-type latents for a 1-DOF mechanism one of whose bodies turns a full revolution."""
    if dof != 1:
        return [False] * dof
    for run in ds.runs():
        _, R = poses_from_nc(ds.layout, run.x[:: max(1, len(run.x) // 2000)])
        for k in range(R.shape[1]):
            # planar angle of each body axis (a column of R, global frame) about each global
            # axis it stays well away from; a full revolution shows as an unwrapped range of 2 pi
            for ax in range(3):
                i, j = [a for a in range(3) if a != ax]
                for col in range(3):
                    v = R[:, k, :, col]
                    if np.min(np.hypot(v[:, i], v[:, j])) < 0.5:
                        continue
                    ang = np.unwrap(np.arctan2(v[:, j], v[:, i]))
                    if np.ptp(ang) > 1.9 * math.pi:
                        return [True]
    return [False]


def parse_angles(spec: str, ds: Dataset, dof: int) -> list[bool]:
    if spec == "auto":
        return detect_angles(ds, dof)
    if spec == "none":
        return [False] * dof
    try:
        idx = {int(s) for s in spec.split(",") if s.strip()}
    except ValueError:
        raise TrainingError(f"--angles {spec!r}: use auto, none or a comma list of 1-based coordinate indices") from None
    bad = sorted(i for i in idx if not 1 <= i <= dof)
    if bad:
        raise TrainingError(f"--angles {spec!r}: index {bad[0]} is outside 1..{dof}")
    return [i + 1 in idx for i in range(dof)]


def known_coordinate_map(ds: Dataset, coords: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``q = E x + e0`` for pose columns (positions ``<body>.x|y|z``, matrix entries ``<body>.Rij``).

    Both are exactly linear in the natural coordinates: ``R e_k = (r_k - r0) / L`` and the
    body origin is ``r0 - R com``.
    """
    n = ds.layout.size
    E = np.zeros((len(coords), n))
    problems = []
    names = {b.name for b in ds.layout.bodies}
    for row, col in enumerate(coords):
        body, _, fld = col.partition(".")
        if body not in names:
            problems.append(f"--coords: column '{col}': no body '{body}' (bodies: {', '.join(sorted(names))})")
            continue
        bl = ds.layout.body(body)
        o, L = bl.offset, bl.length
        if fld in ("x", "y", "z"):
            a = "xyz".index(fld)
            # origin_a = r0_a - sum_k com_k (r_k - r0)_a / L
            E[row, o + a] = 1.0 + sum(bl.com) / L
            for k in range(3):
                E[row, o + 3 * (k + 1) + a] -= bl.com[k] / L
        elif len(fld) == 3 and fld[0] == "R" and fld[1] in "123" and fld[2] in "123":
            a, k = int(fld[1]) - 1, int(fld[2]) - 1
            E[row, o + 3 * (k + 1) + a] = 1.0 / L
            E[row, o + a] = -1.0 / L
        else:
            problems.append(f"--coords: column '{col}': '{fld}' is not usable as a minimal coordinate; "
                            "use a position (x, y, z) or a rotation-matrix entry (R11..R33) of a body")
    if problems:
        raise TrainingError(problems)
    if np.linalg.matrix_rank(E) < len(coords):
        raise TrainingError(f"--coords {','.join(coords)}: the columns are linearly dependent; choose independent ones")
    return E, np.zeros(len(coords))


def build_model(ds: Dataset, cfg: TrainConfig, angles: list[bool]) -> ReducedModel:
    x_all = ds.x
    x_mean = x_all.mean(axis=0)
    x_scale = _scales(x_all, cfg.scale_floor)
    if cfg.coords:
        E, e0 = known_coordinate_map(ds, cfg.coords)
        encoder = LinearEncoder(E, e0)
        q = x_all @ E.T + e0
        q_mean, q_scale = q.mean(axis=0), _scales(q, cfg.scale_floor)
    else:
        encoder = NeuralEncoder(ds.layout.size, cfg.dof, cfg.encoder_hidden, cfg.activation, angles, x_mean, x_scale)
        q_mean, q_scale = np.zeros(cfg.dof), np.ones(cfg.dof)
    decoder = Decoder(cfg.dof, ds.layout.size, cfg.decoder_hidden, cfg.activation, angles, q_mean, q_scale, x_mean, x_scale)
    return ReducedModel(decoder, encoder, ds.M, ds.forces.f_g, ds.forces.f_B, ds.forces.f_C, cfg.step_map)


@dataclass
class TrainResult:
    model: ReducedModel
    angles: list[bool]
    history: list[dict]
    metrics: dict
    seconds: float


class LossFunction:
    def __init__(self, model: ReducedModel, cfg: TrainConfig, angles: list[bool], x_scale: np.ndarray,
                 a_scale: np.ndarray):
        self.model, self.cfg = model, cfg
        self.x_scale = torch.as_tensor(x_scale, dtype=F64)
        self.a_scale = torch.as_tensor(a_scale, dtype=F64)
        self.angle_mask = torch.tensor(angles, dtype=torch.bool)

    def _continuous(self, q_ref: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Shift angle-type entries of ``q`` by 2 pi k to be nearest ``q_ref`` (unwrapping a triplet)."""
        if not self.angle_mask.any():
            return q
        return torch.where(self.angle_mask, q_ref + wrap_to_pi(q - q_ref), q)

    def __call__(self, T: Triplets) -> tuple[torch.Tensor, dict]:
        m, dt = self.model, T.dt
        q_prev, q, q_next = (m.encoder(T.x_prev), m.encoder(T.x), m.encoder(T.x_next))
        q_prev, q_next = self._continuous(q, q_prev), self._continuous(q, q_next)
        dec = m.decoder
        if isinstance(m.encoder, LinearEncoder):
            rec = ((dec(q) - T.x) / self.x_scale).pow(2).mean()
        else:
            xs = torch.cat([T.x_prev, T.x, T.x_next])
            rec = ((dec(torch.cat([q_prev, q, q_next])) - xs) / self.x_scale).pow(2).mean()
        terms = m.terms(q, T.u)
        v = m.step_map.training_velocity(q_prev, q, q_next, dt)
        q_hat = 2.0 * q - q_prev + dt * dt * acceleration(terms, v)
        dyn = ((dec(q_hat) - dec(q_next)) / (dt * dt) / self.a_scale).pow(2).mean()
        loss = self.cfg.rec_weight * rec + self.cfg.dyn_weight * dyn
        return loss, {"rec": rec.item(), "dyn": dyn.item()}


def train(ds: Dataset, cfg: TrainConfig, progress: Callable[[dict], None] | None = None) -> TrainResult:
    """Train a reduced model on a dataset; deterministic for a given seed."""
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        return _train(ds, cfg, progress)
    finally:
        torch.use_deterministic_algorithms(previous)


def _train(ds: Dataset, cfg: TrainConfig, progress: Callable[[dict], None] | None) -> TrainResult:
    cfg.validate()
    if cfg.dof >= ds.layout.size:
        raise TrainingError(f"--dof {cfg.dof}: must be smaller than the {ds.layout.size} natural coordinates")
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    t0 = time.perf_counter()
    angles = [False] * cfg.dof if cfg.coords else parse_angles(cfg.angles, ds, cfg.dof)
    T = make_triplets(ds, cfg.samples)
    model = build_model(ds, cfg, angles)
    acc = (T.x_next - 2 * T.x + T.x_prev).numpy() / T.dt**2
    if cfg.loss_scale == "channel":
        # the decoder's output scales are exactly these per-channel spreads
        x_scale, a_scale = model.decoder.x_scale.numpy(), _scales(acc, cfg.scale_floor)
    else:
        # one scale per term: errors weigh as metres (and m/s^2) whatever the channel
        x_scale = np.full(ds.layout.size, np.sqrt(np.mean(ds.x.var(axis=0))))
        a_scale = np.full(ds.layout.size, np.sqrt(np.mean(acc.var(axis=0))))
    loss_fn = LossFunction(model, cfg, angles, x_scale, a_scale)

    rng = np.random.default_rng(cfg.seed)
    n = len(T.x)
    perm = rng.permutation(n)
    n_val = max(2, int(round(cfg.validation_fraction * n)))
    train_set, val_set = T.subset(np.sort(perm[n_val:])), T.subset(np.sort(perm[:n_val]))

    params = [p for p in model.parameters() if p.requires_grad]
    best = {"val": math.inf, "state": copy.deepcopy(model.state_dict())}
    history: list[dict] = []
    total = cfg.adam_epochs + cfg.lbfgs_iters

    def record(stage: str, it: int, loss: float, parts: dict) -> None:
        with torch.no_grad():
            vloss, _ = loss_fn(val_set)
        v = float(vloss)
        if not math.isfinite(loss) or not math.isfinite(v):
            raise TrainingError(
                f"training diverged at {stage} iteration {it}: the loss became {loss} (validation {v}); "
                "try a smaller --lr, another --seed, or check the dataset (dt, forces)"
            )
        if v < best["val"]:
            best["val"] = v
            best["state"] = copy.deepcopy(model.state_dict())
        entry = {"stage": stage, "iter": it, "loss": loss, "val": v, **parts,
                 "elapsed": time.perf_counter() - t0, "done": (it + (cfg.adam_epochs if stage == "lbfgs" else 0)) / total}
        history.append(entry)
        if progress:
            progress(entry)

    opt = torch.optim.Adam(params, lr=cfg.adam_lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(cfg.adam_epochs, 1), eta_min=cfg.adam_lr * 0.03)
    for ep in range(cfg.adam_epochs):
        opt.zero_grad()
        loss, parts = loss_fn(train_set)
        loss.backward()
        opt.step()
        sched.step()
        if ep % 25 == 0 or ep == cfg.adam_epochs - 1:
            record("adam", ep + 1, loss.item(), parts)

    if cfg.lbfgs_iters:
        model.load_state_dict(best["state"])
        lbfgs = torch.optim.LBFGS(params, lr=1.0, max_iter=20, history_size=50, line_search_fn="strong_wolfe",
                                  tolerance_grad=1e-12, tolerance_change=1e-15)
        state = {"parts": {}}

        def closure():
            lbfgs.zero_grad()
            loss, parts = loss_fn(train_set)
            loss.backward()
            state["parts"] = parts
            return loss

        for it in range(0, cfg.lbfgs_iters, 20):
            loss = lbfgs.step(closure)
            record("lbfgs", min(it + 20, cfg.lbfgs_iters), loss.item(), state["parts"])

    model.load_state_dict(best["state"])
    with torch.no_grad():
        _, parts = loss_fn(T)
    seconds = time.perf_counter() - t0
    metrics = {"val_loss": best["val"], "rec": parts["rec"], "dyn": parts["dyn"], "triplets": n,
               "train_seconds": seconds}
    return TrainResult(model, angles, history, metrics, seconds)


def load_training_data(mechanism_path, run_paths) -> Dataset:
    """Runs are pose exports (ingested here) or one dataset written by `mc2fmu ingest`."""
    from pathlib import Path

    from .dataset import ingest, load_dataset

    paths = [Path(p) for p in run_paths]
    if len(paths) == 1 and paths[0].suffix == ".npz" and paths[0].exists():
        with np.load(paths[0], allow_pickle=False) as d:
            is_dataset = "meta" in d.files and "x" in d.files
        if is_dataset:
            return load_dataset(paths[0])
    return ingest(mechanism_path, paths)


def fit(mechanism_path, run_paths, cfg: TrainConfig, out_dir, progress: Callable[[dict], None] | None = None) -> dict:
    """``mc2fmu train``: data -> trained model artifact directory.  Returns model.json's content."""
    from .artifact import describe_training_data, save_model

    cfg.validate()
    ds = load_training_data(mechanism_path, run_paths)
    result = train(ds, cfg, progress)
    model = result.model
    envelope, initial = describe_training_data(model, result.angles, ds.runs(), float(ds.dt[0]))
    dec = model.decoder
    meta = {
        "mechanism": ds.mechanism.to_dict(),
        "layout": ds.layout.to_dict(),
        "coordinates": ds.coordinate_names,
        "inputs": ds.mechanism.input_names,
        "dof": cfg.dof,
        "coords": list(cfg.coords),
        "mode": "known" if cfg.coords else "autoencoder",
        "angles": result.angles,
        "dt": float(ds.dt[0]),
        "architecture": {"hidden": list(cfg.decoder_hidden), "encoder_hidden": list(cfg.encoder_hidden),
                         "activation": cfg.activation, "step_map": cfg.step_map},
        "normalisation": {"q_mean": dec.q_mean.tolist(), "q_scale": dec.q_scale.tolist(),
                          "x_mean": dec.x_mean.tolist(), "x_scale": dec.x_scale.tolist()},
        "envelope": envelope.to_dict(),
        "initial_state": initial,
        "training": {"runs": list(ds.run_names), "samples": int(len(ds.t)),
                     "duration": float(ds.run(0).t[-1] - ds.run(0).t[0]), "metrics": result.metrics,
                     "config": cfg.to_dict()},
        "seed": cfg.seed,
    }
    save_model(out_dir, model, meta)
    return meta
