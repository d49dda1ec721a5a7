"""Helpers shared by the FMU tests: running a JSON-speaking script in a fresh process, and
an FMU's start values from a model directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_json(script: Path, request: dict, tmp_path: Path, timeout: float = 900) -> dict:
    """Run ``python script REQUEST.json`` in a fresh process; return the JSON it prints on its
    last line (an FMU may log to the same stdout before it)."""
    req = tmp_path / f"request-{request['kind']}-{abs(hash(json.dumps(request, sort_keys=True)[:2000]))}.json"
    req.write_text(json.dumps(request))
    proc = subprocess.run([sys.executable, str(script), str(req)], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_misuse(script: Path, fmu, model_dir, case: str, tmp_path: Path, **extra) -> tuple[dict, str]:
    """One misuse ``case`` of ``fmpy_sim.py`` (``script``) on ``fmu``, from the model's start values:
    (each call -> "ok" or the error fmpy raised, the FMU's logged messages joined by " | ")."""
    res = run_json(script, {"kind": "misuse", "case": case, "fmu": str(fmu), "start": start_values(model_dir),
                            **extra}, tmp_path)
    return dict(res["calls"]), " | ".join(m["message"] for m in res["messages"])


def start_values(model_dir) -> dict[str, float]:
    """``q_start[i]``/``qd_start[i]`` = the model's default initial state (the first training run's)."""
    init = json.loads((Path(model_dir) / "model.json").read_text())["initial_state"]
    return ({f"q_start[{i + 1}]": v for i, v in enumerate(init["q"])}
            | {f"qd_start[{i + 1}]": v for i, v in enumerate(init["qd"])})
