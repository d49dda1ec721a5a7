"""One-shot pipelines: ``mc2fmu convert`` (ingest, train, export, validate) and ``mc2fmu demo``.

Each step is the library function its own subcommand calls; this module only chains them
and names the intermediate files:

* ``OUT.fmu``            the FMU
* ``OUT.model/``         the trained model directory (``mc2fmu simulate``/``export`` read it)
* ``OUT.report/``        the validation report (``index.html`` + PNG plots)
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

from .errors import ExportError, Mc2fmuError

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
DEMO_MECHANISMS = ("four_bar", "slider_crank", "two_bar", "macpherson")


def side_paths(out_fmu: Path) -> tuple[Path, Path]:
    """The model directory and report directory that belong to ``out_fmu``."""
    stem = out_fmu.with_suffix("")
    return Path(f"{stem}.model"), Path(f"{stem}.report")


def convert(mechanism: str | os.PathLike, runs: list[str], cfg, out_fmu: str | os.PathLike,
            validate_runs: list[str] | None = None, backend: str = "python",
            train_progress: Callable[[dict], None] | None = None,
            stage: Callable[[str], None] | None = None,
            validate_progress=None) -> dict[str, Any]:
    """Train on ``runs``, export ``out_fmu``, validate it on ``runs`` + ``validate_runs``."""
    from .export import export_fmu
    from .train import fit
    from .validate import validate_fmu

    out_fmu = Path(out_fmu)
    if out_fmu.suffix != ".fmu":
        raise ExportError(f"{out_fmu}: an FMU file name must end in .fmu")
    cfg.validate()
    model_dir, report_dir = side_paths(out_fmu)
    stage = stage or (lambda s: log.info("%s", s))
    stage(f"training on {len(runs)} run(s) -> {model_dir}")
    meta = fit(mechanism, runs, cfg, model_dir, train_progress)
    stage(f"exporting -> {out_fmu}")
    export = export_fmu(model_dir, out_fmu, backend)
    all_runs = list(dict.fromkeys([*runs, *(validate_runs or [])]))
    pose_runs = [r for r in all_runs if not str(r).endswith(".npz") or not _is_dataset(r)]
    stage(f"validating on {len(pose_runs)} run(s) with fmpy -> {report_dir}")
    validation = validate_fmu(out_fmu, mechanism, pose_runs, report_dir, validate_progress)
    return {"fmu": str(out_fmu), "model_dir": str(model_dir), "report": validation.get("report"),
            "training": meta["training"], "export": export, "validation": validation}


def _is_dataset(path: str) -> bool:
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as d:
            return "meta" in d.files and "x" in d.files
    except (OSError, ValueError):
        return False


def _examples_module():
    """The bundled examples (``examples/`` beside the package; Exudyn makes their runs)."""
    if not (REPO / "examples" / "reference.py").exists():
        raise Mc2fmuError(f"{REPO / 'examples'}: the bundled examples are not available; `mc2fmu demo` needs a "
                          "source checkout installed with `pip install -c constraints.txt -e \".[examples]\"`")
    import importlib.util

    if importlib.util.find_spec("exudyn") is None:
        raise Mc2fmuError("`mc2fmu demo` simulates the bundled mechanism with Exudyn, which is not installed; "
                          "install it with `pip install -c constraints.txt -e \".[examples]\"`")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import examples.reference as reference

    return reference


def demo(mechanism: str = "four_bar", out_dir: str | os.PathLike = "out/demo", **kw) -> dict[str, Any]:
    """The whole pipeline on a bundled mechanism: Exudyn reference runs, then :func:`convert`
    trained on ``train`` and validated on ``train``, ``low``, ``shape`` and ``high``."""
    from .train import TrainConfig

    if mechanism not in DEMO_MECHANISMS:
        raise Mc2fmuError(f"demo mechanism '{mechanism}' is not bundled; choose one of {', '.join(DEMO_MECHANISMS)}")
    reference = _examples_module()
    out_dir = Path(out_dir)
    stage = kw.get("stage") or (lambda s: log.info("%s", s))
    stage(f"simulating '{mechanism}' with Exudyn ({len(reference.EXCITATIONS)} runs of 10 s) -> {out_dir / mechanism}")
    mech_path = reference.write_mechanism(mechanism, out_dir)
    paths = {exc: str(reference.write_run_file(mechanism, exc, out_dir)["path"]) for exc in reference.EXCITATIONS}
    cfg = TrainConfig(dof=int(reference.degrees_of_freedom(mechanism)["dof"]))
    held_out = [paths[e] for e in reference.EXCITATIONS if e != "train"]
    return convert(mech_path, [paths["train"]], cfg, out_dir / f"{mechanism}.fmu", held_out, **kw)
