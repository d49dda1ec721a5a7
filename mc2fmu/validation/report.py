"""The validation report: a PNG per run (reference vs FMU positions, error over time,
envelope), ``index.html`` showing them with the results table, and ``results.json``.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot, no global backend change).
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path

import numpy as np

from ..files import json_safe
from ..models.envelope import LEAVE_THRESHOLD
from .metrics import BIG_ERROR


def write_report(report_dir: str | os.PathLike, fmu: Path, art, result: dict, runs: list[dict]) -> Path:
    """PNG plots per run (positions reference vs FMU, error over time, envelope), index.html
    showing them with the results table, and results.json (what ``--json`` prints)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, figures = [], []
    for r in runs:
        s, d = r["summary"], r["series"]
        name = s["run"]
        fig = Figure(figsize=(9, 9), constrained_layout=True)
        FigureCanvasAgg(fig)
        axes = fig.subplots(3, 1, sharex=True)
        t = d["t"]
        for b, body in enumerate(art.mechanism.body_names):
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
<html><head><meta charset="utf-8"><title>mc2fmu validation: {esc(fmu.name)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:auto}} td,th{{padding:2px 10px;text-align:right}}
table{{border-collapse:collapse}} tr:nth-child(even){{background:#f2f2f2}} img{{max-width:100%}}</style></head>
<body><h1>Validation of {esc(fmu.name)}</h1>
<p>Model of <b>{esc(art.mechanism.name)}</b>, {art.dof} minimal coordinate(s), internal step {art.dt:g} s.
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
