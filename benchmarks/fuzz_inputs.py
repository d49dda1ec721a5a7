"""A generated set of hostile inputs to the command line, each run and classified.

    python benchmarks/fuzz_inputs.py [--out DIR] [--seed N]

Trains one tiny model (the four-bar, Exudyn reference run; robustness does not depend on
accuracy), then runs every generated case in process (``mc2fmu.cli.main``; cases that could
block, such as named pipes, in a child process with a time limit) and sorts its outcome:

* **clean refusal**: exit 2, every line of stderr an ``error:`` line or its continuation, no
  output left behind;
* **accepted**: exit 0, for an input that is legal;
* **wrong acceptance**: exit 0 (or a job list) for an input that must be refused;
* **wrong refusal**: exit 2 for a legal input;
* **traceback**: an exception left the command; **hang**: the time limit passed;
* **partial output**: the command failed and left its output (or a temporary sibling) behind.

The families (each case's expectation in brackets): `train` options (illegal values:
non-finite, negative, beyond 64 bits, wrong types; [refused]), jobs-file options (every train
and export option with nasty values, legal and illegal; [by the CLI's rule]), jobs-file paths
and structure (NUL, long names, nesting, huge integers; [refused]), batch options (`--cpus`,
output folders; [refused]), input files that are not regular files (FIFO, directory, device,
missing; [refused]) for simulate, linearize, export and validate, output names (too long, NUL;
[refused]; 240 characters; [accepted]), Modelica names (keywords, predefined types, names the
model uses; [refused]), export options of another format ([refused]) and compiler flags that
assume finite maths ([refused]).  Prints one table of counts per family and outcome; exits 1
if any outcome other than clean refusal and accepted occurs.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUTCOMES = ("clean refusal", "accepted", "wrong acceptance", "wrong refusal", "traceback", "hang", "partial output")
NASTY = ["nan", "inf", "-inf", "-1", "-5", "0", "1e400", "99999999999999999999999", str(2**63), "-0", "1.5",
         "abc", "", " ", "\x1b[31m", "1e-320"]
#: train options and whether a value is legal for them (the CLI's rule)
TRAIN_OPTIONS = {
    "--lr": lambda v: _num(v) is not None and _finite(v) and float(v) > 0,
    "--adam-epochs": lambda v: _int(v) is not None and _int(v) >= 0,
    "--lbfgs-iters": lambda v: _int(v) is not None and _int(v) >= 0,
    "--identify-iters": lambda v: _int(v) is not None and _int(v) >= 0,
    "--seed": lambda v: _int(v) is not None and 0 <= _int(v) <= 2**63 - 1,
    "--seeds": lambda v: _int(v) is not None and _int(v) >= 1,
    "--samples": lambda v: _int(v) is not None and _int(v) >= 0,
    "--rollout": lambda v: _int(v) is not None and _int(v) >= 0,
    "--kappa": lambda v: _num(v) is not None and _finite(v) and 0 <= float(v) < 1,
    "--lbfgs-tol": lambda v: _num(v) is not None and _finite(v) and 0 <= float(v) < 1,
    "--lbfgs-floor": lambda v: _num(v) is not None and _finite(v) and float(v) >= 0,
    "--lbfgs-subset": lambda v: _int(v) is not None and _int(v) >= 1,
    "--curvature-weight": lambda v: _num(v) is not None and _finite(v) and float(v) >= 0,
    "--rigidity-weight": lambda v: _num(v) is not None and _finite(v) and float(v) >= 0,
    "--dyn-weight": lambda v: _num(v) is not None and _finite(v) and float(v) >= 0,
}
JOB_VALUES = ["nan", "inf", "-1", "-5", "0", "1", "2.0", "3", str(2**64), "'x'", "[0]", "[-5, 32]", "[64, 64]",
              "true", "0.5", "2.0e0"]
#: jobs-file keys and whether a TOML value (as Python) is legal for them
JOB_OPTIONS = {
    "adam_lr": lambda v: _real(v) and v == v and abs(v) != float("inf") and v > 0,
    "adam_epochs": lambda v: _whole(v) and v >= 0,
    "lbfgs_iters": lambda v: _whole(v) and v >= 0,
    "seed": lambda v: _whole(v) and 0 <= v <= 2**63 - 1,
    "seeds": lambda v: _whole(v) and 1 <= v <= 2**63,  # the seeds are seed (0) .. seed + seeds - 1
    "hidden": lambda v: isinstance(v, list) and all(_whole(w) and w >= 1 for w in v),
    "encoder_hidden": lambda v: isinstance(v, list) and all(_whole(w) and w >= 1 for w in v),
    "rigidity_points": lambda v: _whole(v) and v >= 1,
    "validation_fraction": lambda v: _real(v) and 0 < v < 1,
    "fmi": lambda v: _whole(v) and v in (2, 3),
    "curvature_weight": lambda v: _real(v) and v == v and abs(v) != float("inf") and v >= 0,
}


def _num(v: str):
    try:
        return float(v)
    except ValueError:
        return None


def _int(v: str):
    try:
        return int(v)
    except ValueError:
        return None


def _finite(v: str) -> bool:
    x = _num(v)
    return x is not None and x == x and abs(x) != float("inf")


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Case:
    def __init__(self, family: str, argv: list, legal: bool, output: Path | None = None, child: bool = False,
                 env: dict | None = None, jobs: Path | None = None):
        self.family, self.argv, self.legal, self.output, self.child = family, [str(a) for a in argv], legal, output, child
        self.env, self.jobs = env or {}, jobs


def classify(case: Case, timeout: float) -> str:
    from mc2fmu.cli import main

    if case.jobs is not None:  # the jobs file's check alone (a legal file is not run)
        from mc2fmu.errors import Mc2fmuError
        from mc2fmu.parallel.batch import read_jobs

        try:
            read_jobs(case.jobs)
            return "accepted" if case.legal else "wrong acceptance"
        except Mc2fmuError:
            return "clean refusal" if not case.legal else "wrong refusal"
        except Exception:  # noqa: BLE001 - what the benchmark counts
            return "traceback"
    saved = {k: os.environ.get(k) for k in case.env}
    os.environ.update(case.env)
    try:
        if case.child:
            try:
                proc = subprocess.run([sys.executable, "-c", "import sys; from mc2fmu.cli import main; sys.exit(main())",
                                       *case.argv], capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return "hang"
            code, err = proc.returncode, proc.stderr
            if "Traceback" in err:
                return "traceback"
        else:
            buf_out, buf_err = io.StringIO(), io.StringIO()
            t0 = time.perf_counter()
            try:
                with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
                    code = main(case.argv)
            except SystemExit as exc:  # argparse's own refusal of a malformed option
                code = exc.code if isinstance(exc.code, int) else 2
            except Exception:  # noqa: BLE001 - what the benchmark counts
                return "traceback"
            if time.perf_counter() - t0 > timeout:
                return "hang"
            err = buf_err.getvalue()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = case.output
    leftover = out is not None and (out.exists() or any(out.parent.glob(f".{out.name[:40]}.*")))
    if code == 0:
        return "accepted" if case.legal else "wrong acceptance"
    if leftover and not case.legal:
        return "partial output"
    if code == 2 and (err.startswith("error: ") or "usage:" in err):
        return "clean refusal" if not case.legal else "wrong refusal"
    return "traceback"


def cases(model: Path, mech: Path, run: Path, work: Path) -> list[Case]:
    out: list[Case] = []
    # train options
    for option, legal in TRAIN_OPTIONS.items():
        for v in NASTY:
            if legal(v):
                continue  # a legal value would train: the suite covers those
            target = work / f"t{len(out)}"
            out.append(Case("train options", ["train", mech, run, "--dof", "1", f"{option}={v}", "-o", target], False,
                            target))
    # jobs-file options
    for key, legal in JOB_OPTIONS.items():
        for text in JOB_VALUES:
            import tomllib

            value = tomllib.loads(f"v = {text}")["v"]
            path = work / f"jobs{len(out)}.toml"
            path.write_text(f'[[jobs]]\nname = "a"\nmechanism = "{mech}"\ntrain = ["{run}"]\ndof = 1\n{key} = {text}\n')
            out.append(Case("jobs-file options", [], bool(legal(value)), jobs=path))
    # jobs-file paths and structure
    for label, body in (("nul", 'train = ["a\\u0000b.csv"]'), ("long", 'train = ["' + "r" * 300 + '.csv"]'),
                        ("dir", f'train = ["{work}"]'), ("missing", 'train = ["nope.csv"]'),
                        ("nested", "hidden = " + "[" * 3000 + "]" * 3000), ("digits", "seed = " + "9" * 5000),
                        ("not a list", 'train = "x.csv"'), ("number name", "train = [1]")):
        path = work / f"jobs-{label.replace(' ', '-')}.toml"
        text = f'[[jobs]]\nname = "a"\nmechanism = "{mech}"\n'
        text += body + "\n" if body.startswith("train") else f'train = ["{run}"]\n{body}\n'
        path.write_text(text)
        out.append(Case("jobs-file paths and structure", [], False, jobs=path))
    # batch options
    good_jobs = work / "good-jobs.toml"
    good_jobs.write_text(f'[[jobs]]\nname = "a"\nmechanism = "{mech}"\ntrain = ["{run}"]\ndof = 1\nlbfgs_iters = 1\n')
    blocker = work / "a-file"
    blocker.write_text("x")
    for args in (["--cpus", "0"], ["--cpus", "-1"], ["--ray", "127.0.0.1:1"]):
        out.append(Case("batch options", ["batch", good_jobs, "-o", work / f"b{len(out)}", *args], False,
                        work / f"b{len(out)}" / "a.fmu"))
    for target in (blocker / "sub", Path("/proc/mc2fmu-x"), Path("/sys/mc2fmu-x")):
        out.append(Case("batch options", ["batch", good_jobs, "-o", target], False))
    # files that are not regular files
    fifo = work / "pipe.toml"
    os.mkfifo(fifo)
    folder = work / "a-folder.toml"
    folder.mkdir()
    for label, path in (("fifo", fifo), ("directory", folder), ("device", Path("/dev/null")),
                        ("missing", work / "missing.toml")):
        for argv in (["simulate", model, path, run, "-o", work / f"s{len(out)}.csv"],
                     ["linearize", model, "--mechanism", path, "-o", work / f"l{len(out)}.json"],
                     ["export", model, "--mechanism", path, "-o", work / f"e{len(out)}.fmu"],
                     ["simulate", model, mech, path, "-o", work / f"r{len(out)}.csv"]):
            out.append(Case("input files", argv, False, Path(argv[-1]), child=label == "fifo"))
    # output names
    for name, legal in (("s" * 300 + ".csv", False), ("a\x00b.csv", False)):
        target = work / name
        out.append(Case("output names", ["simulate", model, mech, run, "-o", target], legal))
    long_mo = work / ("M" + "o" * 236 + ".mo")
    out.append(Case("output names", ["export", model, "--format", "modelica", "-o", long_mo], True, long_mo))
    # Modelica names
    for name in ("Real", "Integer", "Boolean", "String", "StateSelect", "ExternalObject", "AssertionLevel", "der",
                 "model", "sin", "time", "1abc", "a-b"):
        target = work / f"{name}.mo"
        out.append(Case("Modelica names", ["export", model, "--format", "modelica", "-o", target], False, target))
    # export options of another format
    for fmt, ext in (("modelica", "M.mo"), ("casadi", "m.casadi")):
        for option in (["--platforms", "garbage"], ["--backend", "python"], ["--fmi", "3"], ["--interface", "me"]):
            target = work / f"o{len(out)}{ext}"
            out.append(Case("export options", ["export", model, "--format", fmt, *option, "-o", target], False, target))
    # compiler flags
    for flags in ("-ffinite-math-only", "-ffast-math", "-Ofast", "-ffast-math -fno-tree-vectorize", "-O2 -Ofast"):
        target = work / f"f{len(out)}.fmu"
        out.append(Case("compiler flags", ["export", model, "-o", target], False, target,
                        env={"MC2FMU_CFLAGS": flags}))
    return out


def tiny_model(work: Path) -> tuple[Path, Path, Path]:
    from examples.reference import write_run_file
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    ref = write_run_file("four_bar", "train", work / "reference")
    run = Path(ref["path"])
    mech = run.parent.parent / "mechanism.toml"
    short = work / "short.csv"
    short.write_text("\n".join(gzip.open(run, "rt").read().splitlines()[:301]) + "\n")
    model = work / "model"
    train(mech, [run], TrainConfig(dof=1, samples=64, adam_epochs=2, lbfgs_iters=2), model)
    return model, mech, short


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a case counts as a hang")
    args = ap.parse_args(argv)
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="mc2fmu-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        model, mech, run = tiny_model(work)
        counts: dict[str, Counter] = {}
        bad = []
        (work / "cases").mkdir()
        all_cases = cases(model, mech, run, work / "cases")
        for case in all_cases:
            outcome = classify(case, args.timeout)
            counts.setdefault(case.family, Counter())[outcome] += 1
            if outcome not in ("clean refusal", "accepted"):
                bad.append((case.family, outcome, case.argv or str(case.jobs)))
        print(f"{len(all_cases)} cases", file=sys.stderr)
        for family, outcome, what in bad:
            print(f"  {family}: {outcome}: {str(what)[:300]}", file=sys.stderr)
        print("| inputs | cases | " + " | ".join(OUTCOMES) + " |")
        print("|---|---|" + "---|" * len(OUTCOMES))
        total = Counter()
        for family, c in counts.items():
            total.update(c)
            print(f"| {family} | {sum(c.values())} | " + " | ".join(str(c[o]) for o in OUTCOMES) + " |")
        print(f"| all | {sum(total.values())} | " + " | ".join(str(total[o]) for o in OUTCOMES) + " |")
        return 1 if bad else 0
    finally:
        if not args.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
