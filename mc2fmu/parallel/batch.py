"""``mc2fmu batch JOBS.toml -o OUT``: many conversions (train -> export -> validate) as Ray tasks.

The jobs file (TOML; paths relative to it)::

    [defaults]                      # any train or export option, for every job
    lbfgs_iters = 3000
    fmi = 2

    [[jobs]]
    name = "four_bar"               # OUT/four_bar.fmu, OUT/four_bar.model/, OUT/four_bar.report/
    mechanism = "four_bar/mechanism.toml"
    train = ["four_bar/train.csv.gz"]
    validate = ["four_bar/low.csv.gz"]   # optional
    dof = 1                         # per-job options override the defaults

Options are the train options' names with underscores (``dof``, ``coords``, ``lbfgs_iters``,
``seed``, ``seeds``, ...; ``mc2fmu train --help``), plus ``reducer`` and the export options
``backend``, ``fmi`` and ``interface``.  A bad file is refused before anything runs, naming
the entry and the key.

A job runs in a Ray task, writes into a hidden staging folder of OUT and moves its three
outputs into place only when it succeeds; then a content hash of its inputs and options
(``OUT/<name>.hash``) marks it done, and a later run with the same hash skips it.  A failed
job is reported and the others go on; ``OUT/summary.json`` and ``OUT/index.html`` list every
job.  Ctrl-C stops the running jobs: the finished ones stay, nothing half-written is left.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, Callable

from ..errors import Mc2fmuError
from ..files import atomic_output, digest, file_problem, json_safe
from ..reducers.base import shown, whole_number_problem

SUMMARY = "summary.json"
INDEX = "index.html"
EXPORT_OPTIONS = {"backend": ("native", "python"), "fmi": (2, 3), "interface": ("cs", "me", "both")}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # fullmatch


class BatchError(Mc2fmuError):
    """The jobs file is wrong, or a batch cannot run."""


@dataclasses.dataclass(frozen=True)
class Job:
    name: str
    mechanism: str
    train: tuple[str, ...]
    validate: tuple[str, ...]
    reducer: str
    train_options: dict
    export_options: dict

    def content_hash(self) -> str:
        """The job's inputs and options: the files' bytes, the options and mc2fmu's version."""
        from .. import __version__

        files = [self.mechanism, *self.train, *self.validate]
        opts = json.dumps({"reducer": self.reducer, "train": self.train_options, "export": self.export_options,
                           "train_runs": [Path(f).name for f in self.train],
                           "validate_runs": [Path(f).name for f in self.validate]}, sort_keys=True)
        return digest(__version__, opts, *(Path(f).read_bytes() for f in files))


def _train_fields(reducer: str) -> dict[str, dataclasses.Field]:
    from ..reducers.base import reducer_entry

    return {f.name: f for f in dataclasses.fields(reducer_entry(reducer).config_class())}


def _type_problem(field: dataclasses.Field, value: Any) -> str | None:
    """``value`` against the type of the field's default (``auto`` fields take numbers too)."""
    default = field.default if field.default is not dataclasses.MISSING else None
    if default is None:
        return None
    if default == "auto":
        return None if isinstance(value, (int, float, str)) and not isinstance(value, bool) else "a number or 'auto'"
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "a whole number"
    if isinstance(default, float):
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "a number"
    if isinstance(default, str):
        return None if isinstance(value, str) else "a string"
    if isinstance(default, tuple):
        kinds = {type(v) for v in default} or ({str} if field.name == "coords" else {int})
        if not isinstance(value, list) or not all(type(v) in kinds for v in value):
            return "a list of " + ("strings" if str in kinds else "whole numbers")
    return None


def _with_key(line: str, fields: dict[str, dataclasses.Field]) -> str:
    """A config check's message, which names the command-line option (``--lr: ...``), with the
    jobs file's key in front (``adam_lr (--lr): ...``)."""
    m = re.match(r"--[A-Za-z0-9-]+", line)
    if not m:
        return line
    key = next((name for name, f in fields.items() if f.metadata.get("flag") == m.group(0)), None)
    return f"{key} ({m.group(0)}){line[m.end():]}" if key else line


def read_jobs(path: str | os.PathLike) -> list[Job]:
    """Parse and check the jobs file; every problem at once, each naming the entry and the key."""
    from ..fmu.export import export_problems
    from ..reducers.base import DEFAULT_REDUCER, REDUCERS

    path = Path(path)
    problem = file_problem(path)
    if problem:
        raise BatchError(f"{path}: {problem}" + ("; write a jobs file (docs/batch.md)" if problem == "no such file" else ""))
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BatchError(f"{path}: no such file; write a jobs file (docs/batch.md)") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BatchError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise BatchError(f"{path}: arrays or tables nested too deeply to read; a jobs file needs two levels") from None
    except ValueError as exc:  # e.g. an integer beyond Python's 4300-digit limit
        raise BatchError(f"{path}: a value cannot be read ({str(exc)[:120]}); give ordinary numbers") from None
    except OSError as exc:
        raise BatchError(f"{path}: cannot be read ({exc.strerror or exc}); give the jobs file") from None
    problems: list[str] = []
    unknown = sorted(set(doc) - {"defaults", "jobs"})
    if unknown:
        problems.append(f"{path}: unknown table(s) {', '.join(unknown)}; a jobs file has [defaults] and [[jobs]]")
    defaults = doc.get("defaults", {})
    jobs = doc.get("jobs", [])
    if not isinstance(defaults, dict):
        problems.append(f"{path}: defaults must be a table ([defaults])")
        defaults = {}
    if not isinstance(jobs, list) or not jobs or not all(isinstance(j, dict) for j in jobs):
        problems.append(f"{path}: no jobs; add [[jobs]] entries with name, mechanism and train")
        jobs = []
    base = path.parent
    out, seen = [], set()
    for k, entry in enumerate([{}] + jobs):  # entry 0: the defaults' options alone
        where = f"{path}: [defaults]" if k == 0 else f"{path}: jobs[{k}] ({entry.get('name', 'unnamed')!s:.40})"
        merged = dict(defaults)
        if k:
            merged.update({key: v for key, v in entry.items() if key not in ("name", "mechanism", "train", "validate")})
        reducer = merged.pop("reducer", DEFAULT_REDUCER)
        if not isinstance(reducer, str) or reducer not in REDUCERS:
            problems.append(f"{where}: reducer {reducer!r}: choose one of {', '.join(REDUCERS)}")
            continue
        fields = _train_fields(reducer)
        train_opts, export_opts = {}, {}
        own = set(entry) if k else set(merged)  # a default's problem is reported once, under [defaults]
        for key, value in merged.items():
            if key in EXPORT_OPTIONS:
                # the type too: 2.0 == 2, but an FMI version is a whole number
                if not any(type(value) is type(c) and value == c for c in EXPORT_OPTIONS[key]) and key in own:
                    problems.append(f"{where}: {key} = {shown(value, 80)}: choose one of "
                                    f"{', '.join(map(str, EXPORT_OPTIONS[key]))}")
                export_opts[key] = value
            elif key in fields:
                bad = _type_problem(fields[key], value)
                if bad and key in own:
                    problems.append(f"{where}: {key} = {shown(value, 80)}: must be {bad}")
                train_opts[key] = tuple(value) if isinstance(value, list) else value
            elif key in own:
                known = sorted([*fields, *EXPORT_OPTIONS, "reducer"])
                problems.append(f"{where}: unknown key {key!r}; the options are the train options with underscores "
                                f"and reducer, backend, fmi, interface ({', '.join(known)})")
        if k == 0:
            continue
        name = entry.get("name")
        if name is None:
            problems.append(f"{where}: name is missing; give each job a name (it names the outputs)")
        elif not isinstance(name, str) or not NAME.fullmatch(name):
            problems.append(f"{where}: name {name!r}: give a name of letters, digits, '_', '.' or '-' (it names "
                            "the outputs)")
        elif name in seen:
            problems.append(f"{where}: name {name!r} is used by another job; names must be unique")
        else:
            seen.add(name)
        files = {}
        for key, many in (("mechanism", False), ("train", True), ("validate", True)):
            value = entry.get(key, [] if key == "validate" else None)
            values = value if many else [value]
            if value is None or (many and (not isinstance(value, list) or (key == "train" and not value))):
                problems.append(f"{where}: {key}: " + ("give the mechanism file" if not many else
                                                        "give a list of run files" + (" (at least one)" if key == "train" else "")))
                files[key] = []
                continue
            paths = []
            for v in values:
                if not isinstance(v, str):
                    problems.append(f"{where}: {key}: {shown(v, 80)} is not a path")
                    continue
                if "\0" in v:
                    problems.append(f"{where}: {key}: {shown(v, 80)}: a path cannot hold a NUL character")
                    continue
                try:
                    p = (base / v).resolve()
                    is_file, exists = p.is_file(), p.exists()
                except (OSError, ValueError) as exc:  # a name too long for the file system, ...
                    problems.append(f"{where}: {key}: {shown(v, 80)}: not a usable path "
                                    f"({getattr(exc, 'strerror', None) or exc}); give an existing file")
                    continue
                if not is_file:
                    problems.append(f"{where}: {key}: {p}: " + ("not a file" if exists else "no such file"))
                paths.append(str(p))
            files[key] = paths
        if any(p.startswith(where) for p in problems):
            continue
        try:
            config = _make_config(reducer, train_opts)
            config.validate()
        except Mc2fmuError as exc:
            problems += [f"{where}: {_with_key(line, fields)}" for line in exc.problems]
            continue
        problems += [f"{where}: {line}" for line in export_problems(
            Path(f"{name}.fmu"), export_opts.get("backend", "native"), export_opts.get("fmi", 2),
            export_opts.get("interface", "cs"), reducer)]
        if any(p.startswith(where) for p in problems):
            continue
        out.append(Job(name, files["mechanism"][0], tuple(files["train"]), tuple(files["validate"]), reducer,
                       train_opts, export_opts))
    if problems:
        raise BatchError(problems)
    return out


def _make_config(reducer: str, options: dict):
    from ..reducers.base import reducer_entry

    return reducer_entry(reducer).config_class()(**options)


def run_job(convert: Callable, job: Job, out: str, job_hash: str) -> dict:
    """One job (a task; ``convert`` is mc2fmu.pipeline.convert, passed by reference): convert
    into a staging folder, then move the outputs into place."""
    out_dir = Path(out)
    stage = out_dir / f".{job.name}.partial-{os.getpid()}"
    t0 = time.perf_counter()
    result = {"name": job.name, "status": "failed", "error": None, "fmu": None, "nrmse": {}, "seconds": 0.0}
    try:
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir(parents=True)
        fmu = stage / f"{job.name}.fmu"
        summary = convert(job.mechanism, list(job.train), _make_config(job.reducer, job.train_options), fmu,
                          list(job.validate), job.export_options.get("backend"),
                          fmi_version=job.export_options.get("fmi", 2),
                          interface=job.export_options.get("interface", "cs"), reducer=job.reducer)
        for r in (summary.get("validation") or {}).get("runs", []):
            result["nrmse"][r["run"]] = r["position_nrmse"]
        (out_dir / f"{job.name}.hash").unlink(missing_ok=True)  # incomplete until every output is in place
        for suffix in (".model", ".report"):
            src, dst = stage / f"{job.name}{suffix}", out_dir / f"{job.name}{suffix}"
            if src.exists():
                shutil.rmtree(dst, ignore_errors=True)
                os.replace(src, dst)
        os.replace(fmu, out_dir / f"{job.name}.fmu")
        (out_dir / f"{job.name}.hash").write_text(job_hash + "\n")  # last: the job is complete
        result.update(status="ok", fmu=str(out_dir / f"{job.name}.fmu"))
    except Mc2fmuError as exc:
        result["error"] = "; ".join(exc.problems)
    except Exception as exc:  # a job's bug must not stop the others: reported with its type
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        result["seconds"] = time.perf_counter() - t0
    return result


def _done(job: Job, out: Path, job_hash: str) -> bool:
    marker = out / f"{job.name}.hash"
    return (marker.is_file() and marker.read_text().strip() == job_hash and (out / f"{job.name}.fmu").is_file()
            and (out / f"{job.name}.model" / "model.json").is_file())


def _write_summary(out: Path, results: dict[str, dict]) -> None:
    with atomic_output(out / SUMMARY) as tmp:
        tmp.write_text(json.dumps({"jobs": json_safe(list(results.values()))}, indent=1) + "\n")
    rows = []
    for r in results.values():
        nrmse = ", ".join(f"{html.escape(k)} {100 * v:.3f} %" for k, v in r["nrmse"].items() if v is not None)
        report = out / f"{r['name']}.report" / "index.html"
        link = (f'<a href="{html.escape(r["name"])}.report/index.html">report</a>'
                if report.exists() and r["status"] == "ok" else "")
        status = r["status"] + (" (skipped: up to date)" if r.get("skipped") else "")
        rows.append(f"<tr><td>{html.escape(r['name'])}</td><td>{html.escape(status)}</td><td>{nrmse}</td>"
                    f"<td>{r['seconds']:.1f} s</td><td>{link}</td><td>{html.escape(r['error'] or '')}</td></tr>")
    page = ("<!doctype html><meta charset='utf-8'><title>mc2fmu batch</title>"
            "<style>body{font-family:sans-serif}td,th{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
            f"<h1>mc2fmu batch: {len(results)} job(s)</h1><table><tr><th>job</th><th>status</th>"
            "<th>held-out position NRMSE</th><th>time</th><th>validation</th><th>error</th></tr>"
            + "".join(rows) + "</table>\n")
    with atomic_output(out / INDEX) as tmp:
        tmp.write_text(page)


def run_batch(convert: Callable, jobs_file, out, *, ray_address: str | None = None, num_cpus: int | None = None,
              line: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> dict[str, dict]:
    """Run every job not already done with ``convert`` (mc2fmu.pipeline.convert); returns
    name -> result.  Raises KeyboardInterrupt after a clean stop on Ctrl-C (the summary then
    lists the finished jobs)."""
    from .executors import RayPool

    cpus_problem = None if num_cpus is None else whole_number_problem("--cpus", num_cpus, 1, what="a number of CPUs")
    if cpus_problem:
        raise BatchError(cpus_problem)
    jobs = read_jobs(jobs_file)
    out = Path(out).resolve()  # the tasks may run in other working directories (Ray)
    if out.exists() and not out.is_dir():
        raise BatchError(f"{out}: is a file; give a directory for the outputs")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".mc2fmu-write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise BatchError(f"{out}: cannot hold the outputs ({exc.strerror or exc}); give a folder you can write") from None
    for stale in out.glob(".*.partial-*"):  # a task that died without cleaning up
        shutil.rmtree(stale, ignore_errors=True)
    hashes = {j.name: j.content_hash() for j in jobs}
    results: dict[str, dict] = {}
    todo = []
    for j in jobs:
        if _done(j, out, hashes[j.name]):
            old = _previous(out, j.name)
            results[j.name] = {**old, "name": j.name, "status": "ok", "skipped": True,
                               "fmu": str(out / f"{j.name}.fmu")}
            line(f"[{len(results)}/{len(jobs)}] {j.name}: up to date, skipped")
        else:
            todo.append(j)
    if todo:
        pool = RayPool(ray_address, num_cpus=num_cpus)
        tasks = {j.name: (convert, j, str(out), hashes[j.name]) for j in todo}
        # a job that trains K seeds runs them in a pool of its own: it reserves that many CPUs
        cpus = {j.name: max(1, min(int(j.train_options.get("seeds", 1)), pool.slots)) for j in todo}
        try:
            for name, value in pool.run(run_job, tasks, cpus):
                if isinstance(value, BaseException):
                    value = {"name": name, "status": "failed", "error": f"{type(value).__name__}: {value}",
                             "fmu": None, "nrmse": {}, "seconds": 0.0}
                results[name] = value
                nrmse = ", ".join(f"{k} {100 * v:.3f} %" for k, v in value["nrmse"].items() if v is not None)
                tail = f"{value['seconds']:.0f} s" + (f", NRMSE {nrmse}" if nrmse else "")
                line(f"[{len(results)}/{len(jobs)}] {name}: {value['status']}, {tail}"
                     + (f": {value['error']}" if value["error"] else ""))
                _write_summary(out, _ordered(jobs, results))
        except KeyboardInterrupt:
            pool.close(wait_for_tasks=False)
            for j in todo:  # what the stopped tasks were writing
                for stale in out.glob(f".{j.name}.partial-*"):
                    shutil.rmtree(stale, ignore_errors=True)
            _write_summary(out, _ordered(jobs, results))
            raise
        pool.close()
    _write_summary(out, _ordered(jobs, results))
    return _ordered(jobs, results)


def _ordered(jobs: list[Job], results: dict[str, dict]) -> dict[str, dict]:
    return {j.name: results[j.name] for j in jobs if j.name in results}


def _previous(out: Path, name: str) -> dict:
    """A skipped job's figures from the last summary (none if it is unreadable)."""
    try:
        for r in json.loads((out / SUMMARY).read_text())["jobs"]:
            if r.get("name") == name:
                return {k: r.get(k) for k in ("error", "nrmse", "seconds")} | {"nrmse": r.get("nrmse") or {},
                                                                            "seconds": r.get("seconds") or 0.0}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {"error": None, "nrmse": {}, "seconds": 0.0}
