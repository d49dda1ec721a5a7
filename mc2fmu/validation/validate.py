"""``mc2fmu validate``: run an FMU with fmpy against reference runs and report its accuracy.

For every run the FMU is simulated in a fresh Python process (:mod:`mc2fmu.fmu.runner`) on
the run's inputs, from the run's initial state (``q_start``/``qd_start``: the model's encoder
applied to the run's first samples, exactly as ``mc2fmu simulate`` does; the model is the
artifact the FMU carries under ``resources/model/``), at the run's sample step.  Reported per
run: position NRMSE, maximum position and rotation errors, whether the FMU reached the stop
time, when the envelope flag rose, when the error first exceeded 10 % (:data:`BIG_ERROR`, of
the position spread, as in the NRMSE), the wall time.  ``fmpy validate``'s problems with the
model description are reported too.  A run whose simulation has not ended within its time
limit (:func:`run_timeout`; ``--timeout``) is an error: the FMU's process is killed.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import Mc2fmuError, ValidationError
from ..fmu.common import MODEL_PREFIX
from ..models.artifact import ModelArtifact, artifact_from_zip
from ..models.envelope import LEAVE_THRESHOLD
from .metrics import BIG_ERROR

log = logging.getLogger(__name__)

#: the default time limit of one run's simulation (wall time, s): this plus this many times the
#: run's simulated length; generous, it is there to stop an FMU that hangs, not a slow one
TIMEOUT_BASE, TIMEOUT_PER_SIMULATED_SECOND = 60.0, 100.0
TIMEOUT_HELP = f"the default is {TIMEOUT_BASE:g} s + {TIMEOUT_PER_SIMULATED_SECOND:g} x the run's simulated length"


def run_timeout(duration: float, timeout: float | None = None) -> float:
    """The time limit of simulating a run ``duration`` s long: ``timeout``, or the default."""
    return float(timeout) if timeout is not None else TIMEOUT_BASE + TIMEOUT_PER_SIMULATED_SECOND * max(duration, 0.0)


def fmu_artifact(path: Path) -> ModelArtifact:
    """The model artifact an mc2fmu FMU carries (read with the artifact's checks)."""
    if not path.exists():
        raise ValidationError(f"{path}: no such FMU; create one with `mc2fmu export MODEL_DIR -o {path}`")
    with tempfile.TemporaryDirectory(prefix="mc2fmu-validate-") as tmp:
        try:
            art = artifact_from_zip(path, MODEL_PREFIX, tmp)
        except Mc2fmuError as exc:
            raise ValidationError([*exc.problems, f"{path}: `mc2fmu validate` checks FMUs written by `mc2fmu export`"]) from None
    return art


def _exported_physics(path: Path, art: ModelArtifact) -> ModelArtifact:
    """The model with the physical parameters the FMU runs: those of the mechanism it records
    (``resources/mechanism.json``: a variant given to `export --mechanism`), else the trained."""
    import json
    import zipfile

    from ..fmu.common import MECHANISM_MEMBER
    from ..mechanics.mechanism import mechanism_from_dict

    with zipfile.ZipFile(path) as z:
        if MECHANISM_MEMBER not in z.namelist():
            return art
        try:
            data = json.loads(z.read(MECHANISM_MEMBER))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError(f"{path}: {MECHANISM_MEMBER} is not JSON ({exc}); export the FMU again") from None
    source = f"{path}:{MECHANISM_MEMBER}"
    return art.for_mechanism(mechanism_from_dict(data, source=source), source)[0]


def fmu_parameter_settings(path: Path, art: ModelArtifact, mech, source) -> tuple[dict[str, float], list]:
    """The FMU's physical parameters to set so that it runs ``mech`` (a physical variant of the
    mechanism it was exported with; ``art`` has that one's physics) and what differs; an FMU
    without such parameters (python backend, a model that learnt its dynamics) takes none."""
    from fmpy import read_model_description

    from ..mechanics.variants import parameter_settings

    exposed = {v.name for v in read_model_description(str(path)).modelVariables
               if v.causality == "parameter" and not v.name.startswith(("q_start[", "qd_start["))}
    if not exposed:
        art.check_mechanism(mech, source, why=f"{path.name} has no physical parameters (FMUs of decoder-manifold "
                            "models have, except python-backend FMUs of models trained before their graphs took the "
                            "physics as inputs)", mine=f"the mechanism {path.name} was exported with")
        return {}, []
    return parameter_settings(art.mechanism, mech, exposed, source, path.name)


def quaternion_outputs(body_names: list[str]) -> list[str]:
    return [f"{b}.{c}" for b in body_names for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]


def validate_run(fmu: str | os.PathLike, art: ModelArtifact, mechanism, run_path: str | os.PathLike,
                 timeout: float | None = None, parameters: dict[str, float] | None = None) -> dict[str, Any]:
    """Simulate the FMU on one reference run (``parameters``: FMU parameter values to set
    besides the start state); return the comparison (and the series for plots)."""
    from ..data.poses import read_run, run_name
    from ..fmu.runner import run_in_subprocess
    from ..mechanics.natural import nc_from_poses
    from ..mechanics.rotations import quaternion_to_matrix
    from .metrics import error_over_time, position_nrmse, rotation_error

    run = read_run(run_path, mechanism)
    art.check_step(run.dt, run_path)
    x = nc_from_poses(art.layout, run.origin, run.rotation)
    q0, qd0 = art.initial_state_of(x)
    start = {f"q_start[{i + 1}]": float(q0[i]) for i in range(art.dof)}
    start |= {f"qd_start[{i + 1}]": float(qd0[i]) for i in range(art.dof)}
    start |= parameters or {}
    bodies = art.mechanism.body_names
    outputs = quaternion_outputs(bodies) + [f"q[{i + 1}]" for i in range(art.dof)] + ["envelope"]
    duration = float(run.t[-1] - run.t[0])
    limit = run_timeout(duration, timeout)
    try:
        res = run_in_subprocess(fmu, run.t, run.u, art.mechanism.input_names, start, outputs, art.dt, limit)
    except subprocess.TimeoutExpired:
        raise ValidationError(f"{fmu}: run {run_path}: the FMU's simulation ({duration:g} s simulated) had not ended "
                              f"after {limit:g} s and was stopped; if it is only slow, allow it more with "
                              f"--timeout SECONDS ({TIMEOUT_HELP})") from None
    n_b, n = len(bodies), len(res["time"])
    out = res["outputs"]
    poses = out[:, : 7 * n_b].reshape(n, n_b, 7) if n else np.zeros((0, n_b, 7))
    origin, quat = poses[..., :3], poses[..., 3:]
    reached = bool(n == len(run.t) and math.isclose(res["time"][-1], run.t[-1], abs_tol=1e-9 * max(1.0, run.t[-1])))
    ref_origin = run.origin[:n]
    finite = n > 0 and bool(np.isfinite(origin).all())
    if finite:
        rot = quaternion_to_matrix(quat / np.linalg.norm(quat, axis=-1, keepdims=True))
        err_pos = np.linalg.norm(origin - ref_origin, axis=-1)
        err_rot = rotation_error(rot, run.rotation[:n])
    env = out[:, -1] if n else np.zeros(0)
    flag = np.flatnonzero(~(env <= LEAVE_THRESHOLD))
    err_t = error_over_time(origin, ref_origin) if n else np.zeros(0)
    big = np.flatnonzero((err_t > BIG_ERROR) | ~np.isfinite(origin).all(axis=(1, 2)))
    # a run that stopped early counts as failed from the time it stopped
    big_time = float(res["time"][big[0]]) if big.size else (None if reached else (float(res["time"][-1]) if n else 0.0))
    summary = {
        "run": run_name(Path(run_path)),
        "path": str(run_path),
        "samples": len(run.t),
        "position_nrmse": position_nrmse(origin, ref_origin) if finite and reached else float("inf"),
        "max_position_error": float(err_pos.max()) if finite else float("inf"),
        "max_rotation_error": float(err_rot.max()) if finite else float("inf"),
        "reached_stop_time": reached,
        "stopped_at": float(res["time"][-1]) if n else None,
        "envelope_flag_time": float(res["time"][flag[0]]) if flag.size else None,
        "error_above_10pct_time": big_time,
        "wall_time": float(res["wall_time"]),
        "error": res["error"],
        "messages": [m["message"] for m in res["messages"] if m["status"] > 0],
    }
    series = {"t": res["time"], "origin": origin, "ref_origin": ref_origin, "envelope": env, "error": err_t,
              "ref_t": run.t, "ref_origin_full": run.origin}
    return {"summary": summary, "series": series}


def validate_fmu(fmu: str | os.PathLike, mechanism_path: str | os.PathLike, run_paths: list[str],
                 report_dir: str | os.PathLike | None = None, progress=None,
                 timeout: float | None = None) -> dict[str, Any]:
    """``mc2fmu validate``: fmpy's model-description check plus a simulation per run, each
    stopped with a :class:`ValidationError` after ``timeout`` s (None: :func:`run_timeout`)."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ValidationError(f"--timeout {timeout!r}: the time limit must be a number of seconds > 0")
    from fmpy.validation import validate_fmu as fmpy_validate

    from ..fmu.platforms import fmu_binaries
    from ..mechanics.mechanism import load_mechanism

    path = Path(fmu)
    art = fmu_artifact(path)
    art = _exported_physics(path, art)
    mech = load_mechanism(mechanism_path)
    settings, changed = fmu_parameter_settings(path, art, mech, mechanism_path)
    if changed:
        art = art.for_mechanism(mech, mechanism_path)[0]
    problems = [str(p) for p in fmpy_validate(str(path))]
    binaries = fmu_binaries(path)
    problems += [b["problem"] for b in binaries if b["problem"]]
    runs = []
    for k, rp in enumerate(run_paths):
        runs.append(validate_run(path, art, mech, rp, timeout, parameters=settings))
        if progress:
            progress(k + 1, len(run_paths), runs[-1]["summary"])
    result = {"fmu": str(path), "model_description_problems": problems, "binaries": binaries,
              "parameters": settings, "changed": [vars(d) for d in changed], "runs": [r["summary"] for r in runs]}
    if report_dir is not None:
        from .report import write_report

        result["report"] = str(write_report(report_dir, path, art, result, runs))
    return result
