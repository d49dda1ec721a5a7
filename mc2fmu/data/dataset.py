"""The natural-coordinate dataset: ``mc2fmu ingest`` writes it, every later stage reads it.

One ``.npz`` holds all runs, concatenated along time; run ``k`` spans rows
``run_offsets[k]:run_offsets[k+1]``.  Keys:

======================  =====================  ================================================
key                     shape                  meaning
======================  =====================  ================================================
``t``                   (n_t,)                 time of each sample, s (restarts for every run)
``x``                   (n_t, n_n)             natural coordinates, m (layout in ``meta``)
``xd``                  (n_t, n_n)             velocity, second-order finite differences, m/s
``M``                   (n_n, n_n)             constant NC mass matrix, kg
``f``                   (n_t, n_n)             generalized force incl. gravity and springs, N
``u``                   (n_t, n_u)             input values (mechanism order)
``f_g``                 (n_n,)                 gravity part of ``f``
``f_B``                 (n_n, n_u)             ``f = f_g + f_B u + sum_i u_i f_C[i] x``
``f_C``                 (n_u, n_n, n_n)        state-linear part (torques); springs (rebuilt
                                               from the mechanism) add ``f_spring(x, xd)``
``run_offsets``         (n_runs + 1,)          first row of each run, then n_t
``dt``                  (n_runs,)              sample step of each run, s
``rigidity``            (n_runs,)              max rigidity residual of each run, m
``tension``             (n_t, n_recorded)      recorded springs' tensions, N (optional)
``meta``                scalar str (JSON)      mechanism, coordinate names, layout, runs
======================  =====================  ================================================
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..errors import DatasetError, PoseDataError
from ..files import atomic_output, file_problem
from ..mechanics.mechanism import Mechanism, load_mechanism, mechanism_from_dict
from ..mechanics.natural import (
    ForceModel,
    NCLayout,
    build_layout,
    finite_difference_velocity,
    force_model,
    mass_matrix,
    spring_model,
    nc_from_poses,
    rigidity_residual,
)
from .poses import PoseRun, read_run

log = logging.getLogger(__name__)

FORMAT = "mc2fmu-nc-dataset"
FORMAT_VERSION = 1
REQUIRED_KEYS = ("t", "x", "xd", "M", "f", "u", "f_g", "f_B", "f_C", "run_offsets", "dt", "rigidity", "meta")


@dataclass(frozen=True)
class RunData:
    """One run's slice of a dataset."""

    name: str
    t: np.ndarray
    x: np.ndarray
    xd: np.ndarray
    f: np.ndarray
    u: np.ndarray
    dt: float


@dataclass(frozen=True)
class Dataset:
    mechanism: Mechanism
    layout: NCLayout
    M: np.ndarray
    forces: ForceModel
    t: np.ndarray
    x: np.ndarray
    xd: np.ndarray
    f: np.ndarray
    u: np.ndarray
    run_offsets: np.ndarray
    dt: np.ndarray
    rigidity: np.ndarray
    run_names: tuple[str, ...]
    run_sources: tuple[str, ...]
    tension: np.ndarray | None = None  # (n_t, n_recorded): the recorded springs' tensions, N

    @property
    def tensions(self) -> np.ndarray:
        """The recorded springs' tensions (n_t, n_recorded), (n_t, 0) without any."""
        return self.tension if self.tension is not None else np.zeros((len(self.t), 0))

    @property
    def coordinate_names(self) -> list[str]:
        return self.layout.coordinate_names

    def run(self, k: int) -> RunData:
        s = slice(int(self.run_offsets[k]), int(self.run_offsets[k + 1]))
        return RunData(self.run_names[k], self.t[s], self.x[s], self.xd[s], self.f[s], self.u[s], float(self.dt[k]))

    def runs(self) -> list[RunData]:
        return [self.run(k) for k in range(len(self.run_names))]

    def meta(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "mc2fmu_version": __version__,
            "mechanism": self.mechanism.to_dict(),
            "mechanism_source": self.mechanism.source,
            "coordinates": self.coordinate_names,
            "inputs": self.mechanism.input_names,
            "layout": self.layout.to_dict(),
            "force_model": "f(x, xd, u) = f_g + f_B @ u + sum_i u[i] * (f_C[i] @ x) + f_spring(x, xd)",
            "runs": [
                {
                    "name": name,
                    "source": src,
                    "offset": int(self.run_offsets[k]),
                    "samples": int(self.run_offsets[k + 1] - self.run_offsets[k]),
                    "dt": float(self.dt[k]),
                    "t0": float(self.t[self.run_offsets[k]]),
                    "rigidity_residual": float(self.rigidity[k]),
                }
                for k, (name, src) in enumerate(zip(self.run_names, self.run_sources))
            ],
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the dataset atomically (nothing is left at ``path`` if writing fails)."""
        with atomic_output(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(
                    fh,
                    t=self.t, x=self.x, xd=self.xd, M=self.M, f=self.f, u=self.u,
                    f_g=self.forces.f_g, f_B=self.forces.f_B, f_C=self.forces.f_C,
                    run_offsets=self.run_offsets, dt=self.dt, rigidity=self.rigidity, tension=self.tensions,
                    meta=np.array(json.dumps(self.meta())),
                )


#: a spring shorter than this has no direction (its force would be 0/0)
MIN_SPRING_LENGTH = 1e-9  # m


def _sample(run: PoseRun, k: int) -> str:
    return f"sample {k} (t = {run.t[k]:.6g} s)"


def build_dataset(mechanism: Mechanism, runs: Sequence[PoseRun]) -> Dataset:
    """Turn validated pose runs into the NC dataset (exact M, f, rigidity checks)."""
    if not runs:
        raise DatasetError("no runs given; pass at least one pose export")
    names = [r.name for r in runs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        # Names identify runs in reports and training; keep them unique by suffixing the index.
        names = [f"{n}_{k}" if n in dup else n for k, n in enumerate(names)]
    layout = build_layout(mechanism)
    M = mass_matrix(mechanism, layout)
    forces = force_model(mechanism, layout, M)
    springs = spring_model(mechanism, layout)
    xs, xds, fs, rig = [], [], [], []
    problems = []
    for r in runs:
        x = nc_from_poses(layout, r.origin, r.rotation)
        lengths = springs.lengths(x)  # (n_t, n_s)
        short = np.argwhere(lengths < MIN_SPRING_LENGTH)
        if short.size:
            k, s = short[0]
            problems.append(f"{r.path}: {_sample(r, k)}: spring '{mechanism.springs[s].name}' has length "
                            f"{lengths[k, s]:.3g} m: its two points coincide and its force has no direction (check "
                            "its points and bodies)")
            continue
        xd = finite_difference_velocity(x, r.dt)
        with np.errstate(over="ignore", invalid="ignore"):
            f = forces(x, r.u, xd)
        bad = ~(np.isfinite(x).all(1) & np.isfinite(xd).all(1) & np.isfinite(f).all(1))
        if bad.any():
            problems.append(f"{r.path}: {_sample(r, int(np.flatnonzero(bad)[0]))}: the natural coordinates, their "
                            "velocities or the forces overflow (not finite); check the units of the run and the "
                            "mechanism file")
            continue
        xs.append(x)
        xds.append(xd)
        fs.append(f)
        rig.append(float(rigidity_residual(layout, x).max()))
    if problems:
        raise DatasetError(problems)
    dts = np.array([r.dt for r in runs])
    if np.ptp(dts) > 1e-9 * dts.max():
        log.warning("runs have different sample steps (%s s); a model trains on one step",
                    ", ".join(f"{d:.6g}" for d in dts))
    offsets = np.concatenate([[0], np.cumsum([len(r.t) for r in runs])]).astype(np.int64)
    return Dataset(
        mechanism=mechanism, layout=layout, M=M, forces=forces,
        t=np.concatenate([r.t for r in runs]), x=np.concatenate(xs), xd=np.concatenate(xds),
        f=np.concatenate(fs), u=np.concatenate([r.u for r in runs]),
        run_offsets=offsets, dt=dts, rigidity=np.array(rig),
        run_names=tuple(names), run_sources=tuple(r.path for r in runs),
        tension=np.concatenate([r.tension if r.tension is not None else np.zeros((len(r.t), 0)) for r in runs]),
    )


def ingest(
    mechanism_path: str | os.PathLike, run_paths: Sequence[str | os.PathLike], out: str | os.PathLike | None = None
) -> Dataset:
    """Read a mechanism file and pose exports, build the NC dataset and optionally write it.

    Every run is validated before anything is written; on any error no file is left at ``out``.
    """
    if out is not None and Path(out).suffix != ".npz":
        raise DatasetError(f"{out}: the dataset is written as .npz; name the output file '<name>.npz'")
    mechanism = load_mechanism(mechanism_path)
    problems: list[str] = []
    runs = []
    for p in run_paths:
        try:
            runs.append(read_run(p, mechanism))
        except PoseDataError as exc:
            problems += exc.problems
    if problems:
        raise PoseDataError(problems)
    dataset = build_dataset(mechanism, runs)
    if out is not None:
        dataset.save(out)
    return dataset


def load_dataset(path: str | os.PathLike) -> Dataset:
    """Read a dataset written by :func:`ingest` (or by any tool following the same format)."""
    path = Path(path)
    problem = file_problem(path)
    if problem:
        raise DatasetError(f"{path}: {problem}")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in REQUIRED_KEYS if k not in data.files]
            if missing:
                raise DatasetError(f"{path}: not an mc2fmu dataset: missing key(s) {', '.join(missing)}; create it with `mc2fmu ingest`")
            arrays = {k: np.asarray(data[k]) for k in REQUIRED_KEYS}
            tension = np.asarray(data["tension"]) if "tension" in data.files else None
    except DatasetError:
        raise
    except Exception as exc:
        raise DatasetError(f"{path}: cannot read as .npz ({exc})") from None
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: key 'meta' is not valid JSON ({exc.msg})") from None
    if meta.get("format") != FORMAT:
        raise DatasetError(f"{path}: meta.format is {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("version", 0) > FORMAT_VERSION:
        raise DatasetError(f"{path}: dataset format version {meta['version']} is newer than this mc2fmu reads ({FORMAT_VERSION}); upgrade mc2fmu")
    mechanism = mechanism_from_dict(meta["mechanism"], source=f"{path}:meta.mechanism")
    layout = NCLayout.from_dict(meta["layout"])
    n = layout.size
    x = arrays["x"]
    if x.ndim != 2 or x.shape[1] != n or arrays["M"].shape != (n, n):
        raise DatasetError(f"{path}: x has shape {x.shape} and M {arrays['M'].shape}; the layout needs {n} coordinates")
    runs = meta["runs"]
    n_rec = sum(1 for sp in mechanism.springs if sp.recorded)
    if tension is None:
        tension = np.zeros((len(x), 0))
    if tension.shape != (len(x), n_rec) or not np.isfinite(tension).all():
        raise DatasetError(f"{path}: key 'tension' has shape {tension.shape} (or non-finite values); the mechanism "
                           f"records {n_rec} spring tension(s) over {len(x)} samples; ingest the runs again")
    return Dataset(
        mechanism=replace(mechanism, source=meta.get("mechanism_source", "")),
        layout=layout, M=arrays["M"],
        forces=ForceModel(arrays["f_g"], arrays["f_B"], arrays["f_C"], spring_model(mechanism, layout)),
        t=arrays["t"], x=x, xd=arrays["xd"], f=arrays["f"], u=arrays["u"],
        run_offsets=arrays["run_offsets"].astype(np.int64), dt=arrays["dt"], rigidity=arrays["rigidity"],
        run_names=tuple(r["name"] for r in runs), run_sources=tuple(r.get("source", "") for r in runs),
        tension=tension,
    )


def is_dataset(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a dataset ``.npz`` written by :func:`ingest` (not a pose export)."""
    path = Path(path)
    if path.suffix != ".npz" or not path.exists():
        return False
    try:
        with np.load(path, allow_pickle=False) as d:
            return "meta" in d.files and "x" in d.files
    except (OSError, ValueError):
        return False


def load_training_data(mechanism_path: str | os.PathLike, run_paths: Sequence[str | os.PathLike]) -> Dataset:
    """What ``train`` and ``convert`` read: pose exports (ingested here, against the mechanism
    file) or a single dataset written by ``mc2fmu ingest``."""
    paths = [Path(p) for p in run_paths]
    if len(paths) == 1 and is_dataset(paths[0]):
        return load_dataset(paths[0])
    return ingest(mechanism_path, paths)
