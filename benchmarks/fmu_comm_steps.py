"""How the FMU's results depend on the communication step (python backend, fmpy, fresh process).

    python benchmarks/fmu_comm_steps.py [NAMES...] [--models DIR] [--t-end 10]

For each mechanism: export the trained autoencoder model (`DIR/<name>-autoencoder-w1`, from
benchmarks/train_accuracy.py), drive it with the `low` run's input held constant over blocks of 70 ms (a multiple of every
communication step, so every run sees the same input sequence) and of 10 ms (0.7 ms steps then
see an input change up to 0.6 ms late), with communication steps of 1, 2.5, 10 and 0.7 ms on
its 1 ms internal grid, using the minimal master of
tests/fmu_host.py.  Prints the largest position difference to the 1 ms run at the common
times that are grid points, and at the off-grid communication points the difference to a
cubic spline through the 1 ms results (the outputs there are the quadratic through the last
three grid states).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.interpolate import CubicSpline

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import ensure_runs  # noqa: E402
from examples.reference import MECHANISMS  # noqa: E402
from mc2fmu.fmu.export import export_fmu  # noqa: E402
from mc2fmu.mechanics.mechanism import load_mechanism  # noqa: E402
from mc2fmu.data.poses import read_run  # noqa: E402

HOST = ROOT / "tests" / "fmu_host.py"
STEPS = (0.001, 0.0025, 0.01, 0.0007)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=MECHANISMS)
    ap.add_argument("--models", default=str(ROOT / "out" / "bench"))
    ap.add_argument("--t-end", type=float, default=10.0)
    args = ap.parse_args(argv)
    rows = []
    for name in args.names:
        folder = ensure_runs(name)
        model = Path(args.models) / f"{name}-autoencoder-w1"
        meta = json.loads((model / "model.json").read_text())
        mech = load_mechanism(folder / "mechanism.toml")
        run = read_run(folder / "runs" / "low.csv.gz", mech)
        start = {f"q_start[{i + 1}]": v for i, v in enumerate(meta["initial_state"]["q"])}
        start |= {f"qd_start[{i + 1}]": v for i, v in enumerate(meta["initial_state"]["qd"])}
        with tempfile.TemporaryDirectory() as tmp:
            fmu = Path(tmp) / "m.fmu"
            export_fmu(model, fmu)
            for block in (0.07, 0.01):
                every = int(round(block / run.dt))
                blocks = [list(run.u[min(every * k, len(run.u) - 1)]) for k in range(int(args.t_end / block) + 2)]
                req = Path(tmp) / "req.json"
                req.write_text(json.dumps({"kind": "steps", "fmu": str(fmu), "start": start, "steps": list(STEPS),
                                           "t_end": args.t_end, "block": block, "inputs": mech.input_names,
                                           "u_blocks": blocks}))
                proc = subprocess.run([sys.executable, str(HOST), str(req)], capture_output=True, text=True,
                                      check=True)
                res = json.loads(proc.stdout)
                cols = [i for i, o in enumerate(res["outputs"]) if o.rsplit(".", 1)[-1] in ("x", "y", "z")]
                runs = {float(k): (np.array(v["t"]), np.array(v["y"])[:, cols]) for k, v in res["runs"].items()}
                t1, y1 = runs[0.001]
                spline = CubicSpline(t1, y1)
                for h in STEPS[1:]:
                    th, yh = runs[h]
                    on = np.abs(th / 0.001 - np.round(th / 0.001)) < 1e-6
                    idx = np.round(th[on] / 0.001).astype(int) - 1
                    grid = float(np.abs(yh[on] - y1[idx]).max()) if on.any() else float("nan")
                    off = float(np.abs(yh[~on] - spline(th[~on])).max()) if (~on).any() else float("nan")
                    rows.append((name, 1000 * block, h, int(on.sum()), grid, int((~on).sum()), off))
    print("\n| mechanism | input block, ms | step, ms | grid points | max diff, m | off-grid points | "
          "max diff to spline, m |")
    print("|---|---|---|---|---|---|---|")
    for name, block, h, n_on, grid, n_off, off in rows:
        print(f"| {name} | {block:g} | {1000 * h:g} | {n_on} | {grid:.1e} | {n_off} | {off:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
