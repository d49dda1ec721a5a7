"""``mc2fmu simulate``: roll a model out on a run and compare it with the run."""

from __future__ import annotations

import numpy as np

from ..data.poses import read_run, write_run
from ..mechanics.mechanism import load_mechanism
from ..mechanics.natural import nc_from_poses, poses_from_nc
from ..models.artifact import load_artifact
from ..models.simulate import motion_series, simulate_run
from .metrics import position_nrmse, rotation_error


def simulate_file(model_dir, mechanism_path, run_path, out) -> dict:
    """Roll out on a run and write poses + q, qd, envelope and, for the model kinds that have
    them, an FMU's motion outputs (pose-export layout); return the
    accuracy and ``changed``: the physical parameters the mechanism file changes from the
    trained ones (:meth:`~mc2fmu.models.artifact.ModelArtifact.for_mechanism`), whose values
    the rollout uses."""
    art = load_artifact(model_dir)
    mech = load_mechanism(mechanism_path)
    art, changed = art.for_mechanism(mech, mechanism_path)
    run = read_run(run_path, mech)
    art.check_step(run.dt, run_path)
    x = nc_from_poses(art.layout, run.origin, run.rotation)
    res = simulate_run(art, x, run.u)
    ok = np.isfinite(res["x"]).all(axis=1)
    origin = np.full_like(run.origin, np.nan)
    rot = np.tile(np.eye(3), (*run.origin.shape[:2], 1, 1))
    if ok.any():
        origin[ok], rot[ok] = poses_from_nc(art.layout, res["x"][ok])
    extra = {"q": res["q"], "qd": res["qd"], "envelope": res["envelope"]}
    write_run(out, run.t, mech.body_names, origin, rot, mech.input_names, run.u,
              extra={**extra, **(motion_series(art, res["q"], res["qd"]) or {})})
    exit_index = art.envelope.first_exit(res["envelope"])
    return {
        "changed": changed,
        "samples": len(run.t),
        "nrmse": position_nrmse(origin, run.origin),
        "max_position_error": float(np.nanmax(np.linalg.norm(origin - run.origin, axis=-1))) if ok.all() else float("inf"),
        "max_rotation_error": float(rotation_error(rot[ok], run.rotation[ok]).max()) if ok.all() else float("inf"),
        "envelope_first_exit": None if exit_index is None else float(run.t[exit_index]),
        "reached_end": bool(ok.all()),
        "diverged_at": None if ok.all() else float(run.t[int(np.flatnonzero(~ok)[0])]),
    }
