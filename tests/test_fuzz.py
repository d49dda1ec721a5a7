"""Property-based fuzzing (hypothesis) of everything a user hands mc2fmu: mechanism files,
pose exports and model directories, each mutated at random and run through the CLI in
process.

The property, whatever the input: the command returns 0 or 2 (never raises: a traceback is a
defect), prints only bounded, printable lines, leaves no output file behind when it fails,
and when it succeeds its output holds only finite numbers.  Examples are derandomized (the
same cases in every run) and the mutations target the values that broke mc2fmu before
(non-finite, huge, denormal, wrong types, control characters, deep nesting, truncation).
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
import string
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mc2fmu.cli import main
from mc2fmu.errors import MAX_LINE_CHARS, MAX_LINES_PER_PROBLEM, MAX_PROBLEMS_SHOWN

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

#: values that broke readers before: non-finite, huge, denormal, wrong types, text with control characters
NASTY_NUMBERS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 5e-324, 0.0, -1.0,
                                 10**400, -(10**30), 2e8, 1e-300])
NASTY_TEXT = st.text(alphabet=string.printable + "\x00\x1b\x07\u202e", max_size=40)
LEAF = st.one_of(NASTY_NUMBERS, st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6),
                 NASTY_TEXT, st.booleans(), st.none(), st.lists(NASTY_NUMBERS, max_size=4),
                 st.builds(lambda: [[[[[]]]]]), st.builds(lambda: {"a": {"b": {}}}))  # fresh objects: mutated later


def _paths(obj, prefix=()):
    """Every path to a value inside nested dicts/lists."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw, base):
    """``base`` (JSON-like) with 1 to 3 values replaced by nasty ones or deleted."""
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()) and len(path) > 1:
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(LEAF)
    return obj


def _check_streams(capsys) -> str:
    out, err = capsys.readouterr()
    for line in (out + err).splitlines():
        assert all(c.isprintable() for c in line), repr(line[:200])
        assert len(line) <= MAX_LINE_CHARS + 200, len(line)
    assert err.count("\n") <= MAX_PROBLEMS_SHOWN * (MAX_LINES_PER_PROBLEM + 1) + 5
    return err


def _run_cli(argv: list[str], out: Path, capsys) -> int:
    code = main(argv)  # any exception fails the test: a traceback is a defect
    err = _check_streams(capsys)
    assert code in (0, 2), (code, err[-2000:])
    if code == 2:
        assert err.startswith("error: ") or "\nerror: " in err, err[-2000:]
        assert not out.exists(), "a failed command left its output behind"
    return code


# ---------------------------------------------------------------------------- inputs


@pytest.fixture(scope="module")
def four_bar(reference_run):
    """The four_bar mechanism as a dict and the first 200 rows of its train run."""
    import tomllib

    run = reference_run("four_bar", "train")
    mech_path = Path(run["path"]).parent.parent / "mechanism.toml"
    mech = tomllib.loads(mech_path.read_text())
    lines = gzip.open(run["path"], "rt").read().splitlines()[:201]
    return mech, lines


@FUZZ
@given(data=st.data())
def test_fuzzed_mechanism_files(four_bar, tmp_path_factory, capsys, data):
    mech, lines = four_bar
    work = tmp_path_factory.mktemp("fuzz-mech")
    text = json.dumps(data.draw(mutated(mech)), allow_nan=True)
    if data.draw(st.booleans()):  # deep nesting somewhere
        text = text[:-1] + ', "deep": ' + "[" * 3000 + "]" * 3000 + "}"
    (work / "m.json").write_text(text)
    (work / "r.csv").write_text("\n".join(lines) + "\n")
    out = work / "d.npz"
    if _run_cli(["ingest", str(work / "m.json"), str(work / "r.csv"), "-o", str(out)], out, capsys) == 0:
        with np.load(out) as z:
            assert all(np.isfinite(z[k]).all() for k in z.files if z[k].dtype.kind == "f")


@st.composite
def mutated_csv(draw, lines: list[str]) -> bytes:
    rows = [line.split(",") for line in lines]
    kind = draw(st.sampled_from(["cell", "header", "truncate", "bytes", "gzip"]))
    if kind == "cell":
        for _ in range(draw(st.integers(1, 4))):
            r, c = draw(st.integers(0, len(rows) - 1)), draw(st.integers(0, len(rows[0]) - 1))
            rows[r][c] = draw(st.one_of(NASTY_NUMBERS.map(repr), NASTY_TEXT.filter(lambda s: "," not in s and "\n" not in s),
                                        st.just("1e308"), st.just("x" * 300)))
    elif kind == "header":
        c = draw(st.integers(0, len(rows[0]) - 1))
        rows[0][c] = draw(st.one_of(NASTY_TEXT.filter(lambda s: "," not in s and "\n" not in s and "\r" not in s),
                                    st.sampled_from(rows[0])))
    text = ("\n".join(",".join(r) for r in rows) + "\n").encode()
    if kind == "truncate":
        text = text[: draw(st.integers(0, len(text) - 1))]
    elif kind == "bytes":
        pos = draw(st.integers(0, len(text) - 1))
        text = text[:pos] + draw(st.binary(min_size=1, max_size=8)) + text[pos + 1:]
    elif kind == "gzip":
        packed = gzip.compress(text)
        pos = draw(st.integers(10, len(packed) - 1))
        text = packed[:pos] + bytes([packed[pos] ^ draw(st.integers(1, 255))]) + packed[pos + 1:]
    return text


@FUZZ
@given(data=st.data())
def test_fuzzed_pose_exports(four_bar, reference_run, tmp_path_factory, capsys, data):
    mech, lines = four_bar
    work = tmp_path_factory.mktemp("fuzz-run")
    blob = data.draw(mutated_csv(lines))
    run = work / ("r.csv.gz" if blob[:2] == b"\x1f\x8b" else "r.csv")
    run.write_bytes(blob)
    mech_path = Path(reference_run("four_bar", "train")["path"]).parent.parent / "mechanism.toml"
    out = work / "d.npz"
    if _run_cli(["ingest", str(mech_path), str(run), "-o", str(out)], out, capsys) == 0:
        with np.load(out) as z:
            assert all(np.isfinite(z[k]).all() for k in z.files if z[k].dtype.kind == "f")


# ---------------------------------------------------------------------------- model directories


@pytest.fixture(scope="module")
def tiny_model(reference_run, tmp_path_factory):
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("four_bar", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    model = tmp_path_factory.mktemp("fuzz-model") / "m"
    fit(mech, [run["path"]], TrainConfig(dof=1, samples=64, adam_epochs=2, lbfgs_iters=2), model)
    # a short held-out run to simulate
    low = reference_run("four_bar", "low")["path"]
    short = model.parent / "low.csv"
    short.write_text("\n".join(gzip.open(low, "rt").read().splitlines()[:301]) + "\n")
    return model, mech, short


@st.composite
def mutated_arrays(draw, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    arrays = dict(arrays)
    name = draw(st.sampled_from(sorted(arrays)))
    kind = draw(st.sampled_from(["nan", "zero", "huge", "shape", "dtype", "drop", "negate"]))
    a = arrays[name]
    if kind == "nan" and a.size:
        a = a.copy()
        a.flat[draw(st.integers(0, a.size - 1))] = np.nan
    elif kind == "zero":
        a = np.zeros_like(a)
    elif kind == "huge":
        a = a * 1e300
    elif kind == "shape":
        a = np.zeros((a.shape[0] + 1,) if a.ndim else (2,))
    elif kind == "dtype":
        a = a.astype(np.float32) if draw(st.booleans()) else np.array(["x"] * max(a.size, 1))
    elif kind == "drop":
        del arrays[name]
        return arrays
    elif kind == "negate":
        a = -a
    arrays[name] = a
    return arrays


@FUZZ
@given(data=st.data())
def test_fuzzed_model_directories(tiny_model, tmp_path_factory, capsys, data):
    model, mech, run = tiny_model
    work = tmp_path_factory.mktemp("fuzz-dir")
    target = work / "m"
    shutil.copytree(model, target)
    meta = json.loads((model / "model.json").read_text())
    part = data.draw(st.sampled_from(["json", "arrays", "truncate"]))
    if part == "json":
        (target / "model.json").write_text(json.dumps(data.draw(mutated(meta)), allow_nan=True))
    elif part == "arrays":
        with np.load(model / "arrays.npz") as z:
            arrays = {k: z[k] for k in z.files}
        np.savez(target / "arrays.npz", **data.draw(mutated_arrays(arrays)))
    else:
        blob = (model / "arrays.npz").read_bytes()
        (target / "arrays.npz").write_bytes(blob[: data.draw(st.integers(0, len(blob) - 1))])
    out = work / "sim.csv"
    code = main(["simulate", str(target), str(mech), str(run), "-o", str(out)])
    err = _check_streams(capsys)
    assert code in (0, 2), (code, err[-2000:])
    if code == 2:
        assert not out.exists()
    else:  # a model that loads may still diverge: then it says so, and from when
        values = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2)
        assert np.isfinite(values).all() or "is not finite from t = " in err, err


# ---------------------------------------------------------------------------- the cases found before


def _mech_variant(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


MECHANISM_CASES = [  # (what, old text, new text, the rule the error states)
    ("mass 1e400", "mass = 1.2", "mass = 1" + "0" * 400, "must be a finite number in kg"),
    ("a denormal mass", "mass = 1.2", "mass = 5e-324", "must be between 1e-09 and 1e+09 kg"),
    ("gravity -1e308", "gravity = [0.0, -9.81, 0.0]", "gravity = [0.0, -1e308, 0.0]", "at most 10000 m/s^2"),
    ("a direction of 1e308", "direction = [0.0, 0.0, 1.0]", "direction = [1e308, 1e308, 0.0]", "at most 1e+06"),
    ("a name with a newline", 'name = "crank"', 'name = "crank\\n"', "must be an identifier"),
    ("5000 bodies", "[[inputs]]", "".join(f'[[bodies]]\nname = "b{i}"\nmass = 1.0\ninertia = [1.0, 1.0, 1.0]\n\n'
                                        for i in range(5000)) + "[[inputs]]", "at most 500"),
]


@pytest.mark.parametrize("what, old, new, rule", MECHANISM_CASES, ids=[c[0] for c in MECHANISM_CASES])
def test_mechanism_values_beyond_reason_are_refused(four_bar, reference_run, tmp_path, capsys, what, old, new, rule):
    run = reference_run("four_bar", "train")["path"]
    text = (Path(run).parent.parent / "mechanism.toml").read_text()
    (tmp_path / "m.toml").write_text(_mech_variant(text, old, new))
    out = tmp_path / "d.npz"
    assert main(["ingest", str(tmp_path / "m.toml"), run, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert rule in err and not out.exists(), err


RUN_CASES = [  # (what, column, value, the rule the error states)
    ("a position of 1e308", "crank.x", "1e308", "positions must lie within 1e6 m"),
    ("an input of 1e308", "tau", "1e308", "inputs must be below 1e12"),
    ("a denormal time step", "time", None, "is the time column in seconds?"),
    ("a NaN position", "crank.y", "nan", "every value must be a finite number"),
]


@pytest.mark.parametrize("what, column, value, rule", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_pose_values_beyond_reason_are_refused(four_bar, reference_run, tmp_path, capsys, what, column, value, rule):
    _, lines = four_bar
    header = lines[0].split(",")
    c = header.index(column)
    rows = [line.split(",") for line in lines[1:]]
    for k, row in enumerate(rows):
        if value is None:
            row[c] = repr(k * 5e-324)
        elif k == 5:
            row[c] = value
    (tmp_path / "r.csv").write_text("\n".join([lines[0]] + [",".join(r) for r in rows]) + "\n")
    mech = Path(reference_run("four_bar", "train")["path"]).parent.parent / "mechanism.toml"
    out = tmp_path / "d.npz"
    assert main(["ingest", str(mech), str(tmp_path / "r.csv"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert rule in err and not out.exists(), err


def test_control_characters_from_a_file_never_reach_the_terminal(four_bar, reference_run, tmp_path, capsys):
    """A CSV header with an ANSI escape, a NUL and a forged 'error:' line: the warning shows
    them escaped, on the warning's own line."""
    _, lines = four_bar
    forged = "\x1b[31m\nerror: forged\x00"
    text = "\n".join([lines[0] + ',"' + forged + '"'] + [line + ",0" for line in lines[1:]]) + "\n"
    (tmp_path / "r.csv").write_text(text)
    mech = Path(reference_run("four_bar", "train")["path"]).parent.parent / "mechanism.toml"
    assert main(["ingest", str(mech), str(tmp_path / "r.csv"), "-o", str(tmp_path / "d.npz")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x00" not in err and "\\x1b[31m" in err
    assert not any(line.startswith("error: forged") for line in err.splitlines()), err


def test_coincident_spring_points_are_refused(four_bar, reference_run, tmp_path, capsys):
    """A spring whose two points coincide has no direction: refused with the spring and the
    sample named (it used to write a dataset with NaN forces)."""
    run = reference_run("four_bar", "train")["path"]
    text = (Path(run).parent.parent / "mechanism.toml").read_text()
    text += ('\n[[springs]]\nname = "s"\nbody_a = "ground"\npoint_a = [0.0, 0.0, 0.0]\nbody_b = "crank"\n'
             'point_b = [0.0, 0.0, 0.0]\nstiffness = 10.0\nlength = 0.1\n')
    (tmp_path / "m.toml").write_text(text)
    assert main(["ingest", str(tmp_path / "m.toml"), run, "-o", str(tmp_path / "d.npz")]) == 2
    err = capsys.readouterr().err
    assert "spring 's' has length" in err and "coincide" in err and not (tmp_path / "d.npz").exists()


def test_error_output_is_bounded(tmp_path, capsys):
    """400 problems in one error: 20 shown and a count of the rest."""
    bodies = "".join(f'[[bodies]]\nname = "b{i}"\nmass = -1\ninertia = [1.0, 1.0, 1.0]\n\n' for i in range(400))
    (tmp_path / "m.toml").write_text('name = "many"\n' + bodies)
    (tmp_path / "r.csv").write_text("time\n0\n")
    assert main(["ingest", str(tmp_path / "m.toml"), str(tmp_path / "r.csv"), "-o", str(tmp_path / "d.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == MAX_PROBLEMS_SHOWN + 1 and "and 380 more problems" in err, err[-500:]


# ---------------------------------------------------------------------------- part 3: the newer inputs
# (batch jobs files, train options, odd files and names, Modelica names, compiler flags)


def _refused(argv: list[str], capsys, *fragments: str, out: Path | None = None) -> str:
    """The command ends with exit 2, one ``error:`` line naming each fragment, no output."""
    code = main([str(a) for a in argv])
    err = _check_streams(capsys)
    assert code == 2, err[-2000:]
    assert err.startswith("error: "), err[-2000:]
    for fragment in fragments:
        assert fragment in err, (fragment, err[-2000:])
    if out is not None:
        assert not out.exists() and not any(out.parent.glob(f".{out.name[:40]}.*")), "output left behind"
    return err


@pytest.mark.parametrize("option, value, fragment", [
    ("--lr", "nan", "--lr: nan is not a learning rate: give a finite number > 0"),
    ("--lr", "-1", "--lr: -1.0 is not a learning rate"),
    ("--seed", "99999999999999999999999", "--seed: 99999999999999999999999 is not a seed: give a whole number in "
                                          "0 .. 9223372036854775807"),
    ("--seed", "9" * 40, "--seed: a 133-bit number is not a seed"),
    ("--seed", "-1", "--seed: -1 is not a seed"),
    ("--adam-epochs", "-5", "--adam-epochs: -5 is not a number of Adam epochs: give a whole number >= 0"),
    ("--lbfgs-iters", "-5", "--lbfgs-iters: -5"),
    ("--identify-iters", "-1", "--identify-iters: -1"),
])
def test_train_options_out_of_range_are_refused(four_bar, reference_run, tmp_path, capsys, option, value, fragment):
    run = reference_run("four_bar", "train")["path"]
    mech = Path(run).parent.parent / "mechanism.toml"
    out = tmp_path / "model"
    _refused(["train", mech, run, "--dof", "1", f"{option}={value}", "-o", out], capsys, fragment, out=out)


def _jobs_file(tmp_path: Path, reference_run, extra: str = "", name: str = "a", train: str | None = None) -> Path:
    run = reference_run("four_bar", "train")["path"]
    mech = Path(run).parent.parent / "mechanism.toml"
    train = train if train is not None else f'["{run}"]'
    path = tmp_path / "jobs.toml"
    path.write_text(f'[[jobs]]\nname = "{name}"\nmechanism = "{mech}"\ntrain = {train}\ndof = 1\n{extra}\n')
    return path


@pytest.mark.parametrize("line, fragment", [
    ("adam_lr = nan", "adam_lr (--lr): nan is not a learning rate"),
    ("adam_lr = -1", "adam_lr (--lr): -1 is not a learning rate"),
    ("adam_lr = 1" + "0" * 400, "adam_lr (--lr): a 1329-bit number is not a learning rate"),
    ("kappa = 1" + "0" * 400, "kappa (--kappa) 1000"),
    ("curvature_weight = 1" + "0" * 400, "a loss weight must be a finite number >= 0"),
    ("adam_epochs = -5", "adam_epochs (--adam-epochs): -5"),
    ("lbfgs_iters = -5", "lbfgs_iters (--lbfgs-iters): -5"),
    ("hidden = [0]", "hidden (--hidden): (0,) are not layer widths"),
    ("hidden = [-5, 32]", "hidden (--hidden): (-5, 32) are not layer widths"),
    ("hidden = [64, 1000000000]", "hidden (--hidden): (64, 1000000000) are not layer widths: give whole numbers "
                                  "from 1 to 16384"),
    ("seed = -1", "seed (--seed): -1 is not a seed"),
    (f"seed = {2**64}", "seed (--seed): 18446744073709551616 is not a seed"),
    (f"seed = {2**63 - 1}\nseeds = 2", "seeds (--seeds) 2: with --seed 9223372036854775807 the last seed passes"),
    ("rigidity_points = 0", "rigidity_points: 0 is not a number of latent points"),
    ("validation_fraction = 2.0", "validation_fraction: 2.0 is not a share of the triplets"),
    ("fmi = 2.0", "fmi = 2.0: choose one of 2, 3"),
    ("seed = " + "9" * 5000, "a value cannot be read"),
    ("hidden = " + "[" * 3000 + "]" * 3000, "nested too deeply"),
], ids=lambda v: v[:30] if isinstance(v, str) else v)
def test_jobs_file_options_are_checked_as_the_command_line_checks_them(reference_run, tmp_path, line, fragment):
    from mc2fmu.parallel.batch import BatchError, read_jobs

    with pytest.raises(BatchError) as info:
        read_jobs(_jobs_file(tmp_path, reference_run, line))
    assert any(fragment in p for p in info.value.problems), info.value.problems


@pytest.mark.parametrize("train, fragment", [
    ('["a\\u0000b.csv"]', "a path cannot hold a NUL character"),
    ('["' + "r" * 300 + '.csv"]', "not a usable path (File name too long)"),
], ids=["nul", "long-name"])
def test_jobs_file_paths_that_cannot_exist_are_refused(reference_run, tmp_path, train, fragment):
    from mc2fmu.parallel.batch import BatchError, read_jobs

    with pytest.raises(BatchError) as info:
        read_jobs(_jobs_file(tmp_path, reference_run, train=train))
    assert any(fragment in p for p in info.value.problems), info.value.problems


@pytest.mark.parametrize("args, fragment", [
    (["--cpus", "0"], "--cpus: 0 is not a number of CPUs: give a whole number >= 1"),
    (["--cpus", "-1"], "--cpus: -1"),
    (["--ray", "127.0.0.1:1"], "--ray 127.0.0.1:1: nothing answers at 127.0.0.1:1"),
])
def test_batch_options_are_refused_before_anything_runs(reference_run, tmp_path, capsys, args, fragment):
    jobs = _jobs_file(tmp_path, reference_run, "lbfgs_iters = 1")
    out = tmp_path / "out"
    _refused(["batch", jobs, "-o", out, *args], capsys, fragment)
    assert not (out / "a.fmu").exists()


def test_a_batch_output_folder_that_cannot_be_made_is_refused(reference_run, tmp_path, capsys):
    jobs = _jobs_file(tmp_path, reference_run, "lbfgs_iters = 1")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _refused(["batch", jobs, "-o", blocker / "sub"], capsys, "cannot hold the outputs", "give a folder you can write")


def test_a_fifo_is_refused_before_it_is_opened(tiny_model, tmp_path):
    """A mechanism file that is a named pipe used to block simulate, validate, linearize and
    export forever (opened before any check); each command now refuses it at once."""
    import os
    import subprocess
    import sys

    model, mech, short = tiny_model
    fifo = tmp_path / "v.toml"
    os.mkfifo(fifo)
    for argv in (["simulate", model, fifo, short, "-o", tmp_path / "s.csv"],
                 ["linearize", model, "--mechanism", fifo, "-o", tmp_path / "l.json"],
                 ["export", model, "--mechanism", fifo, "-o", tmp_path / "e.fmu"]):
        proc = subprocess.run([sys.executable, "-c", "import sys; from mc2fmu.cli import main; sys.exit(main())",
                               *map(str, argv)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "is a FIFO (named pipe), not a regular file" in proc.stderr, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr


def test_output_names_too_long_are_refused_up_front_and_legal_long_ones_work(tiny_model, tmp_path, capsys):
    model, mech, short = tiny_model
    long_name = tmp_path / ("s" * 300 + ".csv")
    _refused(["simulate", model, mech, short, "-o", long_name], capsys,
             "has 304 bytes; this file system allows 255: choose a shorter name")
    # a legal name whose checkpoint (train) or model directory's checkpoint (convert) would not be
    _refused(["train", mech, short, "--dof", "1", "-o", tmp_path / ("m" * 245)], capsys,
             "has 259 bytes; this file system allows 255", "(in the training checkpoint's name")
    _refused(["convert", mech, short, "--dof", "1", "-o", tmp_path / ("c" * 240 + ".fmu")], capsys,
             "(in the training checkpoint's name")
    # a legal 240-character Modelica file name: the temporary sibling's name must not make it fail
    name = "M" + "o" * 236
    out = tmp_path / f"{name}.mo"
    assert main(["export", str(model), "--format", "modelica", "-o", str(out)]) == 0, _check_streams(capsys)
    assert f"model {name}" in out.read_text()


@pytest.mark.parametrize("name", ["Real", "Integer", "AssertionLevel", "StateSelect", "der"])
def test_modelica_names_that_clash_with_the_language_are_refused(tiny_model, tmp_path, capsys, name):
    model, _, _ = tiny_model
    out = tmp_path / f"{name}.mo"
    _refused(["export", model, "--format", "modelica", "-o", out], capsys, f"'{name}' cannot name a Modelica model",
             out=out)


def test_a_mechanism_name_that_clashes_with_the_modelica_model_is_refused(tiny_model, tmp_path):
    from mc2fmu.errors import ExportError
    from mc2fmu.modelica.export import RESERVED, _check_names

    assert {"Real", "Integer", "Boolean", "String", "StateSelect", "ExternalObject", "AssertionLevel"} <= RESERVED
    art = type("A", (), {"path": tmp_path})()
    src = type("S", (), {"names": []})()
    with pytest.raises(ExportError, match="'AssertionLevel' is a Modelica keyword or built-in function, a predefined type"):
        _check_names(art, src, ["AssertionLevel"])


@pytest.mark.parametrize("fmt, option", [("modelica", ["--platforms", "garbage"]), ("casadi", ["--platforms", "garbage"]),
                                         ("modelica", ["--backend", "native"]), ("casadi", ["--fmi", "3"]),
                                         ("modelica", ["--interface", "me"])])
def test_export_options_of_another_format_are_refused(tiny_model, tmp_path, capsys, fmt, option):
    model, _, _ = tiny_model
    out = tmp_path / ("M.mo" if fmt == "modelica" else "m.casadi")
    _refused(["export", model, "--format", fmt, *option, "-o", out], capsys,
             f"{option[0]}: applies to FMUs only, not to --format {fmt}", out=out)


@pytest.mark.parametrize("flags", ["-ffinite-math-only", "-ffast-math -fno-tree-vectorize", "-Ofast"])
def test_compiler_flags_that_assume_finite_maths_are_refused(tiny_model, tmp_path, capsys, monkeypatch, flags):
    model, _, _ = tiny_model
    monkeypatch.setenv("MC2FMU_CFLAGS", flags)
    out = tmp_path / "m.fmu"
    _refused(["export", model, "-o", out], capsys, "assume finite maths (__FINITE_MATH_ONLY__ is 1",
             "remove those flags", out=out)


@pytest.mark.parametrize("platform", ["x86_64-linux", "aarch64-linux"])
def test_a_build_that_slipped_past_the_flag_check_is_caught_by_the_self_check(tiny_model, tmp_path, capsys,
                                                                             monkeypatch, platform):
    """Item 2b: with the __FINITE_MATH_ONLY__ check bypassed (a compiler that hides it), the
    binary built with -ffinite-math-only accepts NaN; the self-check feeds it a NaN input and a
    NaN start value, sees them accepted, and the export fails, leaving nothing behind.  aarch64:
    the same probe in the self-check program under qemu."""
    import mc2fmu.fmu.backends.native as native

    model, _, _ = tiny_model
    seen, check = {}, native._check_refusals

    def recorded(records, outputs, p):  # what each platform's binary refused (the build is always joined)
        seen[p.name] = [list(out["refused"]) for rec, out in zip(records, outputs) if rec["kind"] == 3]
        check(records, outputs, p)

    monkeypatch.setattr(native, "_check_refusals", recorded)
    monkeypatch.setattr(native, "finite_math_problem", lambda platform=None: None)
    monkeypatch.setenv("MC2FMU_CFLAGS", "-ffinite-math-only")
    out = tmp_path / "m.fmu"
    _refused(["export", model, "-o", out, "--platforms", platform], capsys,
             "accepts a NaN input and a NaN start value q_start[1] with OK", "build without them", out=out)
    assert seen[platform] == [[0.0, 0.0]]
    # and without the flag the same probe passes (the refusal is the flag's doing)
    monkeypatch.delenv("MC2FMU_CFLAGS")
    assert main(["export", str(model), "-o", str(out), "--platforms", platform]) == 0
    assert seen[platform] == [[1.0, 1.0]]
    capsys.readouterr()


def test_linearize_writes_strict_json_for_a_mode_without_frequency(tiny_model, tmp_path, capsys):
    """Zero gravity: the pendulum-like mode has no stiffness, its damping ratio no value: null."""
    import tomllib

    model, mech, _ = tiny_model
    data = tomllib.loads(Path(mech).read_text())
    text = Path(mech).read_text()
    g = data["gravity"]
    variant = tmp_path / "zero_g.toml"
    variant.write_text(text.replace(f"gravity = [{', '.join(repr(float(v)) for v in g)}]", "gravity = [0.0, 0.0, 0.0]")
                       if "gravity = [" in text else text)
    assert tomllib.loads(variant.read_text())["gravity"] == [0.0, 0.0, 0.0], "the variant must have no gravity"
    out = tmp_path / "lin.json"
    code = main(["linearize", str(model), "--mechanism", str(variant), "--at", "q=0.5", "-o", str(out)])
    _check_streams(capsys)
    assert code == 0
    lin = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in strict JSON"))
    assert any(mode["damping_ratio"] is None for mode in lin["modes"]), lin["modes"]
