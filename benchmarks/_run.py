"""Run one benchmark script as ``python benchmarks/_run.py SCRIPT ARGS...`` and tell a missed
target from a crash by the exit code (``python -m benchmarks`` runs every benchmark so):

* the script's own exit: 0 (every target met), 1 (a target missed: its tables are what it
  measured), 2 (argparse: bad arguments);
* :data:`CRASHED` (70) when it raised an uncaught exception (the traceback goes to standard
  error) or exited with a message instead of a number (``sys.exit("...")``).
"""

from __future__ import annotations

import runpy
import sys
import traceback

#: the exit code of a benchmark that crashed (EX_SOFTWARE)
CRASHED = 70


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python benchmarks/_run.py SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(f"{argv[0]}: {exc.code}", file=sys.stderr)
        return CRASHED
    except BaseException:  # noqa: BLE001 (a crash of any kind, KeyboardInterrupt included)
        traceback.print_exc()
        return CRASHED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
