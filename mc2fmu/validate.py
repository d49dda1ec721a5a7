"""``mc2fmu validate``: run an FMU with fmpy against reference runs and report its accuracy.

For every run the FMU is simulated in a fresh Python process (:mod:`mc2fmu.fmu_runner`) on
the run's inputs, from the run's initial state (``q_start``/``qd_start`` from the FMU's own
encoder graph applied to the run's first samples, exactly as ``mc2fmu simulate`` does), at
the run's sample step.  Reported per run: position NRMSE, maximum position and rotation
errors, whether the FMU reached the stop time, when the envelope flag rose, when the error
first exceeded 10 % (:data:`BIG_ERROR`, of the position spread, as in the NRMSE), the wall time.
``fmpy validate``'s problems with the model description are reported too.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .envelope import LEAVE_THRESHOLD
from .errors import ValidationError

log = logging.getLogger(__name__)

BIG_ERROR = 0.10  # "error above 10 %": the largest body's position error / the run's position spread


def json_safe(obj):
    """``obj`` with non-finite floats as None (strict JSON has no Infinity or NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


class FmuInfo:
    """What validation needs from an mc2fmu FMU, read from its resources (no model directory)."""

    def __init__(self, path: Path):
        self.path = path
        if not path.exists():
            raise ValidationError(f"{path}: no such FMU; create one with `mc2fmu export MODEL_DIR -o {path}`")
        try:
            with zipfile.ZipFile(path) as z:
                self.config = json.loads(z.read("resources/fmu.json"))
                self.model = json.loads(z.read("resources/model.json"))
                self.encoder = z.read("resources/encoder.onnx")
        except (zipfile.BadZipFile, KeyError) as exc:
            raise ValidationError(f"{path}: not an mc2fmu FMU ({exc}); `mc2fmu validate` checks FMUs written by "
                                  "`mc2fmu export`") from None
        self.dt = float(self.config["dt"])
        self.dof = int(self.config["dof"])
        self.angles = [bool(a) for a in self.model["angles"]]
        self.bodies = [b["name"] for b in self.config["bodies"]]
        self.inputs = [v["name"] for v in self.config["variables"] if v["role"] == "input"]

    def initial_state(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(q0, qd0)`` of a run from its first three NC samples, as ``mc2fmu simulate`` does."""
        from .natural import finite_difference_velocity
        from .onnx_export import session

        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "encoder.onnx"
            p.write_bytes(self.encoder)
            sess = session(p)
            q = np.concatenate([sess.run(["q"], {"x": x[i : i + 1]})[0] for i in range(3)])
        for i, a in enumerate(self.angles):
            if a:
                q[:, i] = np.unwrap(q[:, i])
        return q[0], finite_difference_velocity(q, self.dt)[0]


def quaternion_outputs(body_names: list[str]) -> list[str]:
    return [f"{b}.{c}" for b in body_names for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]


def validate_run(info: FmuInfo, mechanism, run_path: str | os.PathLike, timeout: float | None = None) -> dict[str, Any]:
    """Simulate the FMU on one reference run; return the comparison (and the series for plots)."""
    from .fmu_runner import run_in_subprocess
    from .metrics import error_over_time, position_nrmse, rotation_error
    from .natural import NCLayout, nc_from_poses
    from .poses import quaternion_to_matrix, read_run, run_name

    run = read_run(run_path, mechanism)
    if abs(run.dt - info.dt) > 1e-9 * info.dt:
        raise ValidationError(f"{run_path}: sample step {run.dt:g} s differs from the FMU's step {info.dt:g} s; "
                              "resample the run")
    x = nc_from_poses(NCLayout.from_dict(info.model["layout"]), run.origin, run.rotation)
    q0, qd0 = info.initial_state(x)
    start = {f"q_start[{i + 1}]": float(q0[i]) for i in range(info.dof)}
    start |= {f"qd_start[{i + 1}]": float(qd0[i]) for i in range(info.dof)}
    outputs = quaternion_outputs(info.bodies) + [f"q[{i + 1}]" for i in range(info.dof)] + ["envelope"]
    res = run_in_subprocess(info.path, run.t, run.u, info.inputs, start, outputs, info.dt, timeout)
    n_b, n = len(info.bodies), len(res["time"])
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
                 report_dir: str | os.PathLike | None = None, progress=None) -> dict[str, Any]:
    """``mc2fmu validate``: fmpy's model-description check plus a simulation per run."""
    from fmpy.validation import validate_fmu as fmpy_validate

    from .mechanism import load_mechanism, mechanism_from_dict

    path = Path(fmu)
    info = FmuInfo(path)
    mech = load_mechanism(mechanism_path)
    trained = mechanism_from_dict(info.model["mechanism"], source=f"{path}:resources/model.json")
    if json.dumps(mech.to_dict(), sort_keys=True) != json.dumps(trained.to_dict(), sort_keys=True):
        raise ValidationError(f"{mechanism_path}: differs from the mechanism the FMU's model was trained on "
                              f"(bodies {trained.body_names}, inputs {trained.input_names}, same masses, inertias "
                              "and loads); validate with that mechanism file")
    problems = [str(p) for p in fmpy_validate(str(path))]
    runs = []
    for k, rp in enumerate(run_paths):
        runs.append(validate_run(info, mech, rp))
        if progress:
            progress(k + 1, len(run_paths), runs[-1]["summary"])
    result = {"fmu": str(path), "model_description_problems": problems, "runs": [r["summary"] for r in runs]}
    if report_dir is not None:
        result["report"] = str(write_report(report_dir, info, result, runs))
    return result


def write_report(report_dir: str | os.PathLike, info: FmuInfo, result: dict, runs: list[dict]) -> Path:
    """PNG plots per run (positions reference vs FMU, error over time, envelope), index.html
    showing them with the results table, and results.json (what ``--json`` prints)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, figures = [], []
    for r in runs:
        s, d = r["summary"], r["series"]
        name = s["run"]
        fig, axes = plt.subplots(3, 1, figsize=(9, 9), sharex=True, constrained_layout=True)
        t = d["t"]
        for b, body in enumerate(info.bodies):
            for c, axis in enumerate("xyz"):
                ref = d["ref_origin_full"][:, b, c]
                if np.ptp(ref) < 1e-9 * max(1.0, float(np.abs(ref).max(initial=0))):
                    continue  # a coordinate that does not move adds nothing but clutter
                line, = axes[0].plot(d["ref_t"], ref, lw=1.0, label=f"{body}.{axis}")
                axes[0].plot(t, d["origin"][:, b, c], lw=1.0, ls="--", color=line.get_color())
        axes[0].set_ylabel("position, m")
        axes[0].set_title(f"{name}: reference (solid) vs FMU (dashed)")
        axes[0].legend(fontsize=7, ncol=4, loc="upper right")
        axes[1].semilogy(t, np.maximum(d["error"], 1e-16), lw=1.0)
        axes[1].axhline(BIG_ERROR, color="r", lw=0.8, ls=":", label="10 %")
        axes[1].set_ylabel("max position error /\nposition spread")
        axes[1].legend(fontsize=7)
        axes[2].plot(t, d["envelope"], lw=1.0)
        axes[2].set_yscale("symlog", linthresh=LEAVE_THRESHOLD)
        axes[2].axhline(LEAVE_THRESHOLD, color="r", lw=0.8, ls=":", label="leave threshold")
        axes[2].set_ylabel("envelope distance\n(training spans)")
        axes[2].set_xlabel("time, s")
        for when, label, color in ((s["envelope_flag_time"], "envelope left", "tab:orange"),
                                   (None if s["reached_stop_time"] else s["stopped_at"], "FMU stopped", "k")):
            if when is not None:
                for ax in axes:
                    ax.axvline(when, color=color, lw=0.8, ls="--")
                axes[2].plot([], [], color=color, lw=0.8, ls="--", label=label)
        axes[2].legend(fontsize=7)
        png = out / f"{name}.png"
        fig.savefig(png, dpi=90)
        plt.close(fig)
        figures.append(png.name)
        rows.append(s)
    esc = html.escape
    fmt = lambda v, f: "–" if v is None else (f.format(v) if isinstance(v, float) and math.isfinite(v) else str(v))  # noqa: E731
    table = "".join(
        f"<tr><td>{esc(s['run'])}</td><td>{fmt(100 * s['position_nrmse'] if math.isfinite(s['position_nrmse']) else s['position_nrmse'], '{:.3f} %')}</td>"
        f"<td>{fmt(s['max_position_error'], '{:.2e} m')}</td><td>{fmt(s['max_rotation_error'], '{:.2e} rad')}</td>"
        f"<td>{'yes' if s['reached_stop_time'] else 'no, stopped at ' + fmt(s['stopped_at'], '{:.3f} s')}</td>"
        f"<td>{fmt(s['envelope_flag_time'], '{:.3f} s')}</td><td>{fmt(s['wall_time'], '{:.2f} s')}</td></tr>"
        for s in rows)
    problems = "".join(f"<li>{esc(p)}</li>" for p in result["model_description_problems"]) or "<li>none</li>"
    imgs = "".join(f'<h3>{esc(Path(f).stem)}</h3><img src="{esc(f)}" alt="{esc(f)}">' for f in figures)
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>mc2fmu validation: {esc(info.path.name)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:auto}} td,th{{padding:2px 10px;text-align:right}}
table{{border-collapse:collapse}} tr:nth-child(even){{background:#f2f2f2}} img{{max-width:100%}}</style></head>
<body><h1>Validation of {esc(info.path.name)}</h1>
<p>Model of <b>{esc(info.config['mechanism'])}</b>, {info.dof} minimal coordinate(s), internal step {info.dt:g} s.
Each run simulated by fmpy in a fresh process from the run's initial state with the run's inputs.</p>
<h2>Model description (fmpy validate)</h2><ul>{problems}</ul>
<h2>Runs</h2><table><tr><th>run</th><th>position NRMSE</th><th>max position error</th><th>max rotation error</th>
<th>reached stop time</th><th>envelope flag</th><th>wall time</th></tr>{table}</table>
<h2>Plots</h2>{imgs}</body></html>
"""
    index = out / "index.html"
    index.write_text(page)
    (out / "results.json").write_text(json.dumps(json_safe({k: v for k, v in result.items() if k != "report"}), indent=2))
    return index
