"""Run the benchmarks and rewrite their tables in docs/benchmarks.md.

    python -m benchmarks [NAME...] [--no-write] [--list]

Runs each named benchmark (all by default, in the order below: the later ones reuse the models
``train_accuracy`` writes to out/bench) as ``python benchmarks/NAME.py ARGS`` in its own
process, shows its output as it comes, and replaces the block of docs/benchmarks.md between
``<!-- benchmark: NAME -->`` and ``<!-- /benchmark: NAME -->`` with the markdown tables it
printed (its lines that start with ``|``).  A benchmark that misses an asserted target (it exits
1 after printing its tables) has its block rewritten with what it measured and makes this
command exit 1; one that crashes (an uncaught exception, told apart by ``benchmarks/_run.py``,
which runs each script; a signal; bad arguments) or prints no table keeps its old block and
makes this command exit 1.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
BENCH = "out/bench"

#: name -> the arguments it runs with (in this order)
BENCHMARKS: dict[str, list[str]] = {
    "ingest_accuracy": [],
    "dof_estimate": [],
    "train_accuracy": ["--out", BENCH],
    "targets": [],
    "a02": [],
    "dynamics_term": [],
    "unknown_forces": [],
    "loss_cost": [],
    "lbfgs_cost": [],
    "train_profile": ["four_bar", "five_bar", "three_rrr", "--a02"],
    "fmu_accuracy": ["--models", BENCH],
    "fmu_cost": ["--models", BENCH],
    "fmu_comm_steps": ["four_bar", "slider_crank", "--models", BENCH],
    "fmu_host_safety": [f"{BENCH}/four_bar-autoencoder-w1"],
    "fmu_misuse": [],
    "fuzz_inputs": [],
    "seeds": ["four_bar", "slider_crank", "macpherson", "two_bar", "spatial_four_bar", "five_bar", "three_rrr",
              "--k", "4"],
    "compare_reducers": ["--reuse", BENCH + "/{name}-autoencoder-w1"],
    "local_pca": [],
    "node": [f"{BENCH}/four_bar-known-w1", f"{BENCH}/slider_crank-known-w1", f"{BENCH}/two_bar-known-w1"],
    "linearize": [],
    "closed_loop": ["--models", BENCH],
    "variants": [],
    "curvature": [],
    "modelica": [],
    "scaling": [],
    "unseen_platform": [],
    "motion_outputs": [],
}


def tables(output: str) -> str:
    """The markdown tables of a benchmark's output (its lines starting with ``|``), a blank
    line between two tables."""
    blocks, current = [], []
    for line in output.splitlines():
        if line.startswith("|"):
            current.append(line.rstrip())
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return "\n\n".join("\n".join(b) for b in blocks)


def replace_block(page: str, name: str, body: str) -> str:
    """``page`` with the block of ``name`` replaced by ``body`` (an error if it has none)."""
    pattern = re.compile(rf"(<!-- benchmark: {re.escape(name)} -->\n)(?:.*?\n)?(<!-- /benchmark: {re.escape(name)} -->)",
                         re.S)
    if not pattern.search(page):
        raise SystemExit(f"{PAGE}: no block '<!-- benchmark: {name} -->' ... '<!-- /benchmark: {name} -->'; add one")
    return pattern.sub(lambda m: m.group(1) + body.rstrip("\n") + "\n" + m.group(2), page, count=1)


def run(name: str) -> tuple[int, str]:
    """Run one benchmark through ``benchmarks/_run.py``, echoing its output (its standard error
    goes straight to ours); returns its exit code and standard output."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "_run.py"), str(ROOT / "benchmarks" / f"{name}.py"),
           *BENCHMARKS[name]]
    print(f"== {name}: {' '.join(cmd[2:])}", flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, encoding="utf-8", errors="replace")
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    return proc.wait(), "".join(lines)


def measured(code: int, body: str) -> bool:
    """Whether a benchmark's tables are its measurement: it printed some, and it passed (0) or
    missed a target (1); not after a crash (``_run.CRASHED``), bad arguments (2) or a signal."""
    return bool(body) and code in (0, 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    ap.add_argument("--no-write", action="store_true", help="run only; leave docs/benchmarks.md as it is")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and their arguments")
    args = ap.parse_args(argv)
    if args.list:
        for name, extra in BENCHMARKS.items():
            print(f"{name} {' '.join(extra)}".strip())
        return 0
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown benchmark(s) {', '.join(unknown)}; use {', '.join(BENCHMARKS)}")
    missed, failed = [], []
    for name in args.names or list(BENCHMARKS):
        t0 = time.perf_counter()
        code, output = run(name)
        print(f"== {name}: exit {code} after {time.perf_counter() - t0:.0f} s", flush=True)
        body = tables(output)
        if not measured(code, body):
            failed.append(name)
            continue
        if code != 0:
            missed.append(name)
        if not args.no_write:
            PAGE.write_text(replace_block(PAGE.read_text(), name, body))
    if missed:
        print(f"missed a target (their blocks show what they measured): {', '.join(missed)}", file=sys.stderr)
    if failed:
        print(f"crashed or printed no table (their blocks are unchanged): {', '.join(failed)}", file=sys.stderr)
    return 1 if missed or failed else 0


if __name__ == "__main__":
    sys.exit(main())
