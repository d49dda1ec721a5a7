"""Regenerate the reference examples.

    python -m examples.generate [NAMES...] [--out DIR] [--jobs N]

writes ``DIR/<name>/mechanism.toml`` and ``DIR/<name>/runs/{train,low,shape,high}.csv.gz``
for each mechanism (default: all, into this package's folder), prints a progress line per
run and a table of the checks.  The output is deterministic: identical bytes on every run.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .reference import ALL, EXCITATIONS, run_summary, write_mechanism, write_run_file

DEFAULT_OUT = Path(__file__).resolve().parent


def _run(name: str, excitation: str, out: str) -> dict:
    return run_summary(write_run_file(name, excitation, out))


def _progress(i: int, n: int, s: dict) -> str:
    ranges = ", ".join(f"{k} [{lo:.4g}, {hi:.4g}]" for k, (lo, hi) in s["ranges"].items())
    return (
        f"[{i:2d}/{n}] {s['name']}/{s['excitation']}: {s['wall_time']:.1f} s, "
        f"joint error {s['file_joint_error']:.1e}, energy drift {s['energy_drift_relative_to_kinetic']:.1e} "
        f"(of peak kinetic), {ranges}"
    )


def _range_flag(excitation: str, rng, train) -> str:
    lo, hi = rng
    t_lo, t_hi = train
    if excitation == "train":
        return ""
    inside = lo >= t_lo and hi <= t_hi
    if excitation == "high":
        return "beyond" if not inside else "INSIDE (expected beyond)"
    return "inside" if inside else "OUTSIDE (expected inside)"


def report(summaries: list[dict]) -> str:
    """A table of the checks, one block per mechanism."""
    lines = []
    order = {e: i for i, e in enumerate(EXCITATIONS)}
    for name in [n for n in ALL if any(s["name"] == n for s in summaries)]:
        rows = sorted((s for s in summaries if s["name"] == name), key=lambda s: order[s["excitation"]])
        first = rows[0]
        lines.append(f"\n{name}: {first['dof']} DOF, {first['redundant']} redundant constraints")
        lines.append(
            f"  {'run':6s} {'wall s':>6s} {'joint err':>9s} {'file err':>9s} {'KE check':>9s} "
            f"{'drift/KE':>9s} {'drift/exch':>10s}  ranges (vs train)"
        )
        train = next((s for s in rows if s["excitation"] == "train"), None)
        for s in rows:
            ranges = "; ".join(
                f"{k} [{lo:.4g}, {hi:.4g}]"
                + (f" {_range_flag(s['excitation'], (lo, hi), train['ranges'][k])}" if train else "").rstrip()
                for k, (lo, hi) in s["ranges"].items()
            )
            lines.append(
                f"  {s['excitation']:6s} {s['wall_time']:6.1f} {s['joint_error']:9.1e} {s['file_joint_error']:9.1e} "
                f"{s['kinetic_energy_check']:9.1e} {s['energy_drift_relative_to_kinetic']:9.1e} "
                f"{s['energy_drift_relative_to_exchanged']:10.1e}  {ranges}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"mechanisms to generate (default: {' '.join(ALL)})")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default: the examples package folder)")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel processes (default: 1)")
    args = parser.parse_args(argv)
    names = args.names or ALL
    unknown = [n for n in names if n not in ALL]
    if unknown:
        parser.error(f"unknown mechanism(s) {', '.join(unknown)}; choose from {', '.join(ALL)}")

    start = time.perf_counter()
    try:
        for name in names:
            print(f"wrote {write_mechanism(name, args.out)}")
        tasks = [(name, excitation) for name in names for excitation in EXCITATIONS]
        summaries = []
        if args.jobs > 1:
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                futures = [pool.submit(_run, name, excitation, args.out) for name, excitation in tasks]
                for i, future in enumerate(as_completed(futures), start=1):
                    summaries.append(future.result())
                    print(_progress(i, len(tasks), summaries[-1]), flush=True)
        else:
            for i, (name, excitation) in enumerate(tasks, start=1):
                summaries.append(_run(name, excitation, args.out))
                print(_progress(i, len(tasks), summaries[-1]), flush=True)
    except Exception as exc:  # one line for the user, not a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(report(summaries))
    print(f"\n{len(summaries)} runs in {time.perf_counter() - start:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
