"""Run an FMU with fmpy in a fresh Python process (no torch, no mc2fmu model code).

FMUs are always tested in a process of their own: simulating in the process that built them
can run the source tree instead of the files inside the FMU (FMI-NOTES.md), and a Python
FMU's module must not meet one already loaded.  :func:`run_in_subprocess` writes a request
(``.npz``), runs ``python -m mc2fmu.fmu.runner REQUEST RESULT`` and reads the result back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def simulate(fmu: str, t: np.ndarray, u: np.ndarray, input_names: list[str], start_values: dict[str, float],
             output_names: list[str], output_interval: float | None = None) -> dict[str, Any]:
    """Simulate ``fmu`` from ``t[0]`` to ``t[-1]`` with the inputs ``u`` (n_t, n_u) sampled at ``t``.

    Returns ``time``, ``outputs`` (n, n_out), the FMU's log ``messages``, ``wall_time`` (s,
    the simulation only) and ``error`` (an exception message or None).
    """
    import fmpy

    messages: list[dict[str, Any]] = []

    def logger(env, instance, status, category, message):
        messages.append({"status": int(status), "category": category.decode(errors="replace") if isinstance(category, bytes) else str(category),
                         "message": message.decode(errors="replace") if isinstance(message, bytes) else str(message)})

    signals = None
    if input_names:
        signals = np.zeros(len(t), dtype=[("time", np.float64)] + [(n, np.float64) for n in input_names])
        signals["time"] = t
        for k, n in enumerate(input_names):
            signals[n] = u[:, k]
    interval = float(output_interval if output_interval is not None else t[1] - t[0])
    error, res, recorders = None, None, []

    def step_finished(_time, recorder):  # keeps the recorder: on an error fmpy returns nothing
        if not recorders:
            recorders.append(recorder)
        return True

    start = time.perf_counter()
    try:
        res = fmpy.simulate_fmu(fmu, start_time=float(t[0]), stop_time=float(t[-1]), output_interval=interval,
                                input=signals, start_values=start_values, output=output_names,
                                fmi_type="CoSimulation", logger=logger, debug_logging=True,
                                step_finished=step_finished)
    except Exception as exc:  # fmpy raises plain Exceptions for FMI error statuses
        error = f"{type(exc).__name__}: {exc}"
        if recorders:
            res = recorders[0].result()
    wall = time.perf_counter() - start
    if res is None:
        times, outputs = np.zeros(0), np.zeros((0, len(output_names)))
    else:
        times = np.asarray(res["time"], dtype=np.float64)
        outputs = np.stack([np.asarray(res[n], dtype=np.float64) for n in output_names], axis=1)
    return {"time": times, "outputs": outputs, "messages": messages, "wall_time": wall, "error": error}


def child_command(request: Path, result: Path) -> list[str]:
    """The FMU's process: this module run as a script on a request, writing a result."""
    return [sys.executable, "-m", "mc2fmu.fmu.runner", str(request), str(result)]


def run_child(cmd: list[str], timeout: float | None) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``cmd``, run in a process group (session) of its own.
    If it has not ended after ``timeout`` seconds (or this process is interrupted), the whole
    group is killed, the child is reaped, and :class:`subprocess.TimeoutExpired` (or the
    interrupt) is raised: neither it nor a process it started is left behind."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the session's leader and every process it started
        except (AttributeError, OSError):  # no process groups (Windows), or the group has ended
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        raise
    return proc.returncode, out, err


def run_in_subprocess(fmu: str | os.PathLike, t: np.ndarray, u: np.ndarray, input_names: list[str],
                      start_values: dict[str, float], output_names: list[str],
                      output_interval: float | None = None, timeout: float | None = None) -> dict[str, Any]:
    """:func:`simulate` in a fresh ``python`` process; :class:`subprocess.TimeoutExpired` if it
    takes longer than ``timeout`` seconds (the process is killed: :func:`run_child`)."""
    with tempfile.TemporaryDirectory(prefix="mc2fmu-run-") as tmp:
        req, out = Path(tmp) / "request.npz", Path(tmp) / "result.npz"
        spec = {"fmu": str(Path(fmu).resolve()), "input_names": list(input_names), "start_values": start_values,
                "output_names": list(output_names), "output_interval": output_interval}
        np.savez(req, t=np.asarray(t, dtype=np.float64), u=np.asarray(u, dtype=np.float64).reshape(len(t), -1),
                 spec=np.array(json.dumps(spec)))
        code, stdout, stderr = run_child(child_command(req, out), timeout)
        if code != 0 or not out.exists():
            tail = "\n".join((stderr or stdout).strip().splitlines()[-5:])
            return {"time": np.zeros(0), "outputs": np.zeros((0, len(output_names))), "messages": [], "wall_time": 0.0,
                    "error": f"the FMU's process ended with exit code {code}: {tail}"}
        with np.load(out) as r:
            info = json.loads(str(r["info"]))
            return {"time": r["time"], "outputs": r["outputs"], **info}


def main(argv: list[str] | None = None) -> int:
    req, out = (argv if argv is not None else sys.argv[1:])[:2]
    with np.load(req) as r:
        t, u, spec = r["t"], r["u"], json.loads(str(r["spec"]))
    res = simulate(spec["fmu"], t, u, spec["input_names"], spec["start_values"], spec["output_names"],
                   spec["output_interval"])
    info = {"messages": res["messages"], "wall_time": res["wall_time"], "error": res["error"]}
    np.savez(out, time=res["time"], outputs=res["outputs"], info=np.array(json.dumps(info)))
    return 0


def leave(code: int = 0) -> None:
    """End this host process without the interpreter's finalisation: pythonfmu 0.7 (the python
    backend's FMI wrapper) can corrupt the heap there after its FMU has run, and the process
    then aborts at exit ("corrupted double-linked list").  The results are written and flushed
    before; the crash itself is pythonfmu's, and hosts other than mc2fmu's meet it unless they
    use the native backend."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
