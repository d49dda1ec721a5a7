"""The stages chained: ``mc2fmu train``, ``mc2fmu convert`` (ingest, train, export, validate)
and ``mc2fmu demo``.

Each step is the library function of its own stage; this module only reads the inputs once,
passes the data on and names the files:

* ``OUT.fmu``            the FMU
* ``OUT.model/``         the trained model directory (``mc2fmu simulate``/``export`` read it)
* ``OUT.report/``        the validation report (``index.html`` + PNG plots)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from . import capabilities
from .errors import ExportError, Mc2fmuError, TrainingError

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
#: the bundled mechanisms `mc2fmu demo` can run, and their degrees of freedom
DEMO_MECHANISMS = {"four_bar": 1, "slider_crank": 1, "two_bar": 2, "macpherson": 1, "five_bar": 2}
EXCITATIONS = ("train", "low", "shape", "high")


def train(mechanism: str | os.PathLike, runs: list, config, out_dir: str | os.PathLike, *,
          reducer: str | None = None, progress: Callable[[dict], None] | None = None, resume: bool = False,
          checkpoint_every: float = 30.0, notify: Callable[[str], None] | None = None,
          ray_address: str | None = None, threads: int | None = None):
    """``mc2fmu train``: read the data once, fit the reducer, write the model directory.

    ``config.dof == "auto"``: the number of minimal coordinates is estimated from the data
    (:mod:`mc2fmu.data.dof`; the evidence goes to ``notify``), or taken from ``coords``.
    The training state is kept in ``MODEL_DIR.checkpoint.pt`` while training runs (every
    ``checkpoint_every`` seconds and on Ctrl-C) and removed after the model is written;
    ``resume`` continues from it.  ``config.seeds`` > 1: that many seeds in parallel, the best
    kept (:mod:`mc2fmu.parallel.seeds`; on the Ray cluster at ``ray_address`` if given).  Torch
    runs a fixed number of threads, so the model does not depend on the machine's cores:
    ``threads``, default :data:`~mc2fmu.parallel.executors.TRAIN_THREADS` (2) for a training
    alone and one per seed or batch job (the tasks fill the cores as processes).
    Returns the :class:`~mc2fmu.models.artifact.ModelArtifact`.
    """
    from .data.dataset import load_training_data
    from .models.artifact import save_artifact
    from .reducers.base import DEFAULT_REDUCER, Checkpointer, checkpoint_path, reducer_entry

    entry = reducer_entry(reducer or DEFAULT_REDUCER)
    Config = entry.config_class()
    if not isinstance(config, Config):
        raise TrainingError(f"the '{entry.name}' reducer takes a {Config.__name__}, not a {type(config).__name__}")
    config.validate()
    ckpt = Checkpointer(checkpoint_path(out_dir), checkpoint_every, resume)
    if not resume and ckpt.path.exists():
        raise TrainingError(f"{ckpt.path}: an interrupted training of {out_dir} left this checkpoint; "
                            f"add --resume to continue it, or delete it to start over")
    dataset = load_training_data(mechanism, runs)
    kind = capabilities.kind(entry.name)  # every reducer's config has dof and coords; the table says what else
    if config.dof == "auto" and not (kind.chart and config.from_model):  # --from: the model's
        config = dataclasses.replace(config, dof=resolve_dof(dataset, config.coords, notify))
        config.validate()
    seeds = int(config.seeds) if kind.seeds else 1
    if seeds > 1:
        from .parallel.seeds import train_seeds

        return train_seeds(train, mechanism, runs, config, out_dir, seeds=seeds, reducer=reducer, progress=progress,
                           resume=resume, checkpoint_every=checkpoint_every, ray_address=ray_address)
    import torch

    from .parallel.executors import training_threads

    before = torch.get_num_threads()
    torch.set_num_threads(training_threads(threads))
    try:
        art = entry.load().fit(dataset, config, progress=progress, checkpoint=ckpt)
    finally:
        torch.set_num_threads(before)
    save_artifact(out_dir, art)
    ckpt.path.unlink(missing_ok=True)
    return art


def resolve_dof(dataset, coords=(), notify: Callable[[str], None] | None = None) -> int:
    """``--dof auto``: one per known coordinate, else the estimate from the data (or an error
    with the evidence when the data does not decide)."""
    from .data.dof import estimate_dataset_dof

    if coords:
        return len(coords)
    est = estimate_dataset_dof(dataset)
    if est.dof is None:
        raise TrainingError([f"--dof auto: {est.reason}", *est.report().splitlines()])
    (notify or log.info)(f"--dof auto: {est.dof} (the evidence follows)\n{est.report()}")
    return est.dof


def side_paths(out_fmu: Path) -> tuple[Path, Path]:
    """The model directory and report directory that belong to ``out_fmu``."""
    stem = out_fmu.with_suffix("")
    return Path(f"{stem}.model"), Path(f"{stem}.report")


def convert(mechanism: str | os.PathLike, runs: list[str], cfg, out_fmu: str | os.PathLike,
            validate_runs: list[str] | None = None, backend: str | None = None, *, fmi_version: int = 2,
            interface: str = "cs", reducer: str | None = None, platforms: str | None = None,
            train_progress: Callable[[dict], None] | None = None,
            stage: Callable[[str], None] | None = None,
            validate_progress=None, notify: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train on ``runs``, export ``out_fmu``, validate it on ``runs`` + ``validate_runs`` (with
    fmpy's co-simulation: an FMU exported for model exchange alone is exported, not validated)."""
    from .data.dataset import is_dataset
    from .fmu.export import DEFAULT_BACKEND, export_fmu, export_problems
    from .reducers.base import DEFAULT_REDUCER
    from .validation.validate import validate_fmu

    backend = backend or DEFAULT_BACKEND

    out_fmu = Path(out_fmu)
    # before anything is trained
    problems = export_problems(out_fmu, backend, fmi_version, interface, reducer or DEFAULT_REDUCER, platforms)
    if problems:
        raise ExportError(problems)
    if backend == "native":  # a missing cross-compiler is found now, not after the training
        from .fmu.platforms import resolve

        resolve(platforms)
    cfg.validate()
    model_dir, report_dir = side_paths(out_fmu)
    stage = stage or (lambda s: log.info("%s", s))
    stage(f"training on {len(runs)} run(s) -> {model_dir}")
    art = train(mechanism, runs, cfg, model_dir, reducer=reducer, progress=train_progress, notify=notify)
    stage(f"exporting -> {out_fmu}")
    export = export_fmu(model_dir, out_fmu, backend, fmi_version, interface, platforms)
    all_runs = list(dict.fromkeys([*runs, *(validate_runs or [])]))
    pose_runs = [r for r in all_runs if not is_dataset(r)]
    if interface == "me":
        stage("model exchange only: not validated (validation runs co-simulation); export with --interface both "
              "to validate")
        return {"fmu": str(out_fmu), "model_dir": str(model_dir), "report": None, "training": art.training,
                "export": export, "validation": None}
    stage(f"validating on {len(pose_runs)} run(s) with fmpy -> {report_dir}")
    validation = validate_fmu(out_fmu, mechanism, pose_runs, report_dir, validate_progress)
    return {"fmu": str(out_fmu), "model_dir": str(model_dir), "report": validation.get("report"),
            "training": art.training, "export": export, "validation": validation}


def generate_examples(mechanism: str, out_dir: Path) -> Path:
    """Simulate a bundled mechanism with Exudyn (``python -m examples.generate`` in a child
    process of the source checkout: nothing is imported into this one); returns its folder."""
    if not (REPO / "examples" / "generate.py").exists():
        raise Mc2fmuError(f"{REPO / 'examples'}: the bundled examples are not available; `mc2fmu demo` needs a "
                          "source checkout installed with `pip install -c constraints.txt -e \".[examples]\"`")
    import importlib.util

    if importlib.util.find_spec("exudyn") is None:
        raise Mc2fmuError("`mc2fmu demo` simulates the bundled mechanism with Exudyn, which is not installed; "
                          "install it with `pip install -c constraints.txt -e \".[examples]\"`")
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "examples.generate", mechanism, "--out", str(out_dir.resolve())],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise Mc2fmuError(f"simulating '{mechanism}' with Exudyn failed (exit {proc.returncode}):\n{tail}")
    return out_dir / mechanism


def demo(mechanism: str = "four_bar", out_dir: str | os.PathLike = "out/demo", **kw) -> dict[str, Any]:
    """The whole pipeline on a bundled mechanism: Exudyn reference runs, then :func:`convert`
    trained on ``train`` and validated on ``train``, ``low``, ``shape`` and ``high``."""
    from .reducers.autoencoder.config import TrainConfig

    if mechanism not in DEMO_MECHANISMS:
        raise Mc2fmuError(f"demo mechanism '{mechanism}' is not bundled; choose one of {', '.join(DEMO_MECHANISMS)}")
    out_dir = Path(out_dir)
    stage = kw.get("stage") or (lambda s: log.info("%s", s))
    stage(f"simulating '{mechanism}' with Exudyn ({len(EXCITATIONS)} runs of 10 s) -> {out_dir / mechanism}")
    folder = generate_examples(mechanism, out_dir)
    paths = {exc: str(folder / "runs" / f"{exc}.csv.gz") for exc in EXCITATIONS}
    cfg = TrainConfig(dof=DEMO_MECHANISMS[mechanism])
    held_out = [paths[e] for e in EXCITATIONS if e != "train"]
    return convert(folder / "mechanism.toml", [paths["train"]], cfg, out_dir / f"{mechanism}.fmu", held_out, **kw)
