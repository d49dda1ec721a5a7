"""What an FMU does to the process that loads it, per backend: ``python benchmarks/fmu_host_safety.py MODEL_DIR``.

Exports MODEL_DIR (a trained model, e.g. ``out/demo/four_bar.model``) with each backend and,
in fresh fmpy processes that exit normally (interpreter finalisation included):

* ``calls after an error``: a refused input (NaN), then getReal / doStep three times,
  terminate, free: how many processes die during those calls;
* ``exit after an error``: the same processes: how many abort at exit (after the JSON line);
* ``exit, no error``: a clean run of 50 steps, terminate, free: how many abort at exit;
* ``RSS per cycle``: the host's resident memory growth per instantiate / initialise / step /
  get-set state / terminate / free cycle, over ``--cycles`` cycles after 50 warm-up cycles.

Prints one table (markdown).  ``--runs`` processes per count (default 10).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r'''
import json, sys
from fmpy import extract, read_model_description
from fmpy.simulation import instantiate_fmu

path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
md = read_model_description(path)
vr = {v.name: v.valueReference for v in md.modelVariables}
inputs = [v.valueReference for v in md.modelVariables if v.causality == "input"]
unzipped = extract(path)


def started():
    fmu = instantiate_fmu(unzipped, md, "CoSimulation")
    fmu.setupExperiment(startTime=0.0)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    return fmu


def rss_kb():
    return int(open("/proc/self/statm").read().split()[1]) * 4


def cycle():
    fmu = started()
    fmu.doStep(0.0, 1e-3)
    state = fmu.getFMUstate()
    fmu.setFMUstate(state)
    fmu.freeFMUstate(state)
    fmu.terminate()
    fmu.freeInstance()


out = {}
if mode == "error":
    fmu = started()
    fmu.doStep(0.0, 1e-3)
    refused = 0
    for call in [lambda: fmu.setReal(inputs[:1], [float("nan")])] + [lambda: fmu.getReal([vr["q[1]"]]),
                                                                     lambda: fmu.doStep(1e-3, 1e-3)] * 3:
        try:
            call()
        except Exception:
            refused += 1
    fmu.terminate()
    fmu.freeInstance()
    out["refused"] = refused
elif mode == "clean":
    fmu = started()
    for k in range(50):
        fmu.doStep(k * 1e-3, 1e-3)
    fmu.terminate()
    fmu.freeInstance()
elif mode == "cycles":
    for _ in range(50):
        cycle()
    r0 = rss_kb()
    for _ in range(n):
        cycle()
    out["bytes_per_cycle"] = (rss_kb() - r0) * 1024 / n
print(json.dumps(out), flush=True)
'''


def _count(script: Path, fmu: Path, mode: str, runs: int) -> tuple[int, int]:
    """(processes that died before printing their result, processes that died after it)."""
    during = at_exit = 0
    for _ in range(runs):
        proc = subprocess.run([sys.executable, str(script), str(fmu), mode, "0"], capture_output=True, text=True)
        printed = proc.stdout.strip().startswith("{")
        if proc.returncode != 0:
            at_exit += printed
            during += not printed
    return during, at_exit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="MODEL_DIR")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cycles", type=int, default=10000)
    args = ap.parse_args()

    from mc2fmu.fmu.export import export_fmu

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD)
        for backend in ("native", "python"):
            fmu = Path(tmp) / f"{backend}.fmu"
            export_fmu(args.model, fmu, backend)
            died, aborted = _count(script, fmu, "error", args.runs)
            _, clean_aborted = _count(script, fmu, "clean", args.runs)
            proc = subprocess.run([sys.executable, str(script), str(fmu), "cycles", str(args.cycles)],
                                  capture_output=True, text=True)
            per_cycle = json.loads(proc.stdout.strip().splitlines()[0])["bytes_per_cycle"] if proc.stdout else None
            rows.append((backend, died, aborted, clean_aborted, per_cycle))
    print(f"| backend | calls after an error: died | exit after an error: aborted | exit, no error: aborted "
          f"| RSS per cycle ({args.cycles} cycles) |")
    print("|---|---|---|---|---|")
    for backend, died, aborted, clean, per_cycle in rows:
        rss = "n/a" if per_cycle is None else f"{per_cycle:.0f} B"
        print(f"| {backend} | {died}/{args.runs} | {aborted}/{args.runs} | {clean}/{args.runs} | {rss} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
