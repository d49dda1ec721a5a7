"""`mc2fmu ingest`: the dataset it writes, the formats it reads and every bad input it rejects."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main
from mc2fmu.data.dataset import load_dataset
from mc2fmu.mechanics.natural import kinetic_energy, nc_velocity
from mc2fmu.data.poses import write_run
from mc2fmu.mechanics.rotations import matrix_to_quaternion, quaternion_to_matrix

from .conftest import MECHANISM_TOML, analytic_motion


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("out") or p.name.endswith(".part"))


# ---------------------------------------------------------------------------- good input


def test_ingest_writes_documented_keys(capsys, tmp_path, toy_mechanism, toy_run):
    out = tmp_path / "ds.npz"
    code, stdout, err = run_cli(capsys, "ingest", toy_mechanism, toy_run, toy_run, "-o", out)
    assert code == 0, err
    assert "24 natural coordinates" in stdout
    with np.load(out) as d:
        for key in ("t", "x", "M", "f", "u", "meta"):
            assert key in d.files
        n_t = 2 * 201
        assert d["x"].shape == (n_t, 24) and d["f"].shape == (n_t, 24) and d["u"].shape == (n_t, 2)
        assert d["M"].shape == (24, 24) and d["t"].shape == (n_t,)
        assert list(d["run_offsets"]) == [0, 201, 402]
        meta = json.loads(str(d["meta"]))
    assert meta["coordinates"][:4] == ["arm.r0.x", "arm.r0.y", "arm.r0.z", "arm.r1.x"]
    assert [b["name"] for b in meta["layout"]["bodies"]] == ["arm", "rod"]
    assert meta["mechanism"]["inputs"][1]["point"] == [0.0, 0.0, 0.5]
    assert [r["name"] for r in meta["runs"]] == ["run_0", "run_1"]


def test_dataset_energy_and_forces_match_analytic_motion(tmp_path, toy_mechanism, toy_run):
    """The written f, x, M and FD velocities agree with the closed-form motion."""
    out = tmp_path / "ds.npz"
    assert main([str(toy_mechanism), str(toy_run)][:0] + ["ingest", str(toy_mechanism), str(toy_run), "-o", str(out)]) == 0
    ds = load_dataset(out)
    m = analytic_motion()
    xd_exact = nc_velocity(ds.layout, m["rotation"], m["v_com"], m["omega"])
    # stored f equals the force model evaluated at the stored state
    assert np.max(np.abs(ds.f - ds.forces(ds.x, ds.u))) < 1e-12
    assert np.max(np.abs(ds.u - m["u"])) < 1e-15
    ke_fd, ke = kinetic_energy(ds.M, ds.xd), kinetic_energy(ds.M, xd_exact)
    # dt = 10 ms here, so second-order differences are only good to ~1e-3
    assert np.max(np.abs(ke_fd - ke)) / ke.max() < 2e-3
    assert ds.rigidity.max() < 1e-12


def test_matrix_and_quaternion_exports_give_the_same_dataset(tmp_path, toy_mechanism):
    m = analytic_motion(n=50)
    q = matrix_to_quaternion(m["rotation"])
    assert np.max(np.abs(quaternion_to_matrix(q) - m["rotation"])) < 1e-14
    a = tmp_path / "a.csv.gz"
    write_run(a, m["t"], ["arm", "rod"], m["origin"], m["rotation"], ["tau", "F"], m["u"])
    # hand-written matrix form, as npz, with an extra column that must be ignored
    cols = {"time": m["t"], "tau": m["u"][:, 0], "F": m["u"][:, 1], "energy": m["t"] * 0}
    for k, b in enumerate(["arm", "rod"]):
        for i, ax in enumerate("xyz"):
            cols[f"{b}.{ax}"] = m["origin"][:, k, i]
        for i in range(3):
            for j in range(3):
                cols[f"{b}.R{i + 1}{j + 1}"] = m["rotation"][:, k, i, j]
    b = tmp_path / "b.npz"
    np.savez(b, **cols)
    assert main(["ingest", str(toy_mechanism), str(a), str(b), "-o", str(tmp_path / "ab.npz")]) == 0
    ds = load_dataset(tmp_path / "ab.npz")
    ra, rb = ds.runs()
    assert np.max(np.abs(ra.x - rb.x)) < 1e-14
    assert ds.rigidity.max() < 1e-12


def test_json_mechanism_is_accepted(capsys, tmp_path, toy_mechanism, toy_run):
    import tomllib

    j = tmp_path / "toy.json"
    j.write_text(json.dumps(tomllib.loads(MECHANISM_TOML), indent=2))
    code, _, err = run_cli(capsys, "ingest", j, toy_run, "-o", tmp_path / "j.npz")
    assert code == 0, err


def test_extra_columns_are_ignored_with_a_warning(capsys, tmp_path, toy_mechanism, toy_run):
    text = toy_run.read_text().splitlines()
    text = [text[0] + ",note"] + [line + ",1" for line in text[1:]]
    toy_run.write_text("\n".join(text) + "\n")
    code, _, err = run_cli(capsys, "ingest", toy_mechanism, toy_run, "-o", tmp_path / "x.npz")
    assert code == 0
    assert "warning" in err and "note" in err


def test_help_explains_formats():
    out = subprocess.run([sys.executable, "-m", "mc2fmu.cli", "ingest", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for word in ("inertia", "<body>.qw", "R11", "time", "direction", "point", "rigidity"):
        assert word in out.stdout
    top = subprocess.run([sys.executable, "-m", "mc2fmu.cli", "--help"], capture_output=True, text=True)
    assert "ingest" in top.stdout and "MECHANISM" in top.stdout


# ---------------------------------------------------------------------------- bad input


def _edit_csv(path: Path, fn) -> None:
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:]]
    header, rows = fn(header, rows)
    path.write_text("\n".join([",".join(header)] + [",".join(r) for r in rows]) + "\n")


def _set(col: str, row: int, value: str):
    def fn(header, rows):
        rows[row][header.index(col)] = value
        return header, rows
    return fn


def _drop(col: str):
    def fn(header, rows):
        i = header.index(col)
        return header[:i] + header[i + 1:], [r[:i] + r[i + 1:] for r in rows]
    return fn


def _rename(old: str, new: str):
    def fn(header, rows):
        header[header.index(old)] = new
        return header, rows
    return fn


def _add(col: str, value: str):
    def fn(header, rows):
        return header + [col], [r + [value] for r in rows]
    return fn


def _scale_quaternion(body: str, row: int, factor: float):
    def fn(header, rows):
        for f in ("qw", "qx", "qy", "qz"):
            i = header.index(f"{body}.{f}")
            rows[row][i] = repr(float(rows[row][i]) * factor)
        return header, rows
    return fn


RUN_CASES = {
    # case: (edit, fragments the one-line message must contain)
    "missing body column": (_drop("rod.y"), ["missing column 'rod.y'", "position of body 'rod'"]),
    "missing input column": (_drop("tau"), ["missing column 'tau'", "input 'tau'"]),
    "unknown body column": (_add("wheel.z", "0.5"), ["'wheel.z'", "unknown body 'wheel'", "bodies are arm, rod"]),
    "NaN value": (_set("arm.y", 7, "nan"), ["line 9", "column 'arm.y'", "not finite"]),
    "infinite value": (_set("F", 3, "inf"), ["line 5", "column 'F'", "not finite"]),
    "non-numeric value": (_set("F", 3, "abc"), ["line 5", "column 'F'", "not a number"]),
    "non-increasing time": (_set("time", 10, "0.05"), ["line 12", "column 'time'", "strictly increasing"]),
    "non-uniform time": (_set("time", 10, "0.1005"), ["line 12", "column 'time'", "uniformly sampled"]),
    "non-unit quaternion": (_scale_quaternion("arm", 20, 1.001), ["line 22", "body 'arm'", "quaternion norm", "not 1"]),
}


@pytest.mark.parametrize("case", list(RUN_CASES))
def test_bad_run_is_rejected_without_output(capsys, tmp_path, toy_mechanism, toy_run, case):
    edit, fragments = RUN_CASES[case]
    _edit_csv(toy_run, edit)
    out = tmp_path / "out.npz"
    code, stdout, err = run_cli(capsys, "ingest", toy_mechanism, toy_run, "-o", out)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert str(toy_run) in lines[0]
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    assert leftovers(tmp_path) == []


def test_non_orthogonal_matrix_is_rejected(capsys, tmp_path, toy_mechanism):
    m = analytic_motion(n=20)
    cols = {"time": m["t"], "tau": m["u"][:, 0], "F": m["u"][:, 1]}
    for k, b in enumerate(["arm", "rod"]):
        for i, ax in enumerate("xyz"):
            cols[f"{b}.{ax}"] = m["origin"][:, k, i]
        R = m["rotation"][:, k].copy()
        if b == "rod":
            R[4] *= 1.01  # sample 4 of the rod is scaled by 1 %
        for i in range(3):
            for j in range(3):
                cols[f"{b}.R{i + 1}{j + 1}"] = R[:, i, j]
    path = tmp_path / "mat.npz"
    np.savez(path, **cols)
    code, _, err = run_cli(capsys, "ingest", toy_mechanism, path, "-o", tmp_path / "out.npz")
    assert code == 2
    assert "mat.npz" in err and "sample 4" in err and "body 'rod'" in err and "orthogonal" in err
    assert leftovers(tmp_path) == []


SPRING = """
[[springs]]
name = "s"
body_a = "ground"
point_a = [0.0, 1.0, 0.0]
body_b = "rod"
point_b = [0.0, 0.0, 0.0]
stiffness = 100.0
length = 0.4
"""

MECHANISM_CASES = {
    "zero mass": (("mass = 2.0", "mass = 0.0"), ["body 'arm'", "mass 0.0 must be between 1e-09 and 1e+09 kg"]),
    "negative mass": (("mass = 1.3", "mass = -1.3"), ["body 'rod'", "mass -1.3 must be between 1e-09 and 1e+09 kg"]),
    "triangle inequality": (("inertia = [0.01, 0.03, 0.035]", "inertia = [0.01, 0.03, 0.05]"),
                            ["body 'arm'", "triangle inequality"]),
    "negative inertia": (("inertia = [0.01, 0.03, 0.035]", "inertia = [-0.01, 0.03, 0.035]"),
                         ["body 'arm'", "negative principal value"]),
    "unknown input body": (('body = "rod"', 'body = "rood"'), ["input 'F'", "'rood' is not a body"]),
    "force without point": (("point = [0.0, 0.0, 0.5]", ""), ["input 'F'", "needs point"]),
    "misspelt key": (("inertia = [0.01", "intertia = [0.01"), ["body 'arm'", "unknown key 'intertia'", "did you mean 'inertia'"]),
    "malformed TOML": (('name = "toy"', 'name = "toy'), ["malformed TOML", "line 1"]),
    "spring to unknown body": (("point = [0.0, 0.0, 0.5]\n", "point = [0.0, 0.0, 0.5]\n" + SPRING.replace('"rod"', '"rood"')),
                               ["spring 's'", "body_b 'rood' is not a body", '"ground"']),
    "spring without length": (("point = [0.0, 0.0, 0.5]\n", "point = [0.0, 0.0, 0.5]\n" + SPRING.replace("length = 0.4\n", "")),
                              ["spring 's'", "length is missing"]),
    "negative stiffness": (("point = [0.0, 0.0, 0.5]\n", "point = [0.0, 0.0, 0.5]\n" + SPRING.replace("= 100.0", "= -100.0")),
                           ["spring 's'", "stiffness -100.0 must be a finite number >= 0 N/m"]),
    "spring on one body": (("point = [0.0, 0.0, 0.5]\n", "point = [0.0, 0.0, 0.5]\n" + SPRING.replace('"ground"', '"rod"')),
                           ["spring 's'", "both 'rod'"]),
}


@pytest.mark.parametrize("case", list(MECHANISM_CASES))
def test_bad_mechanism_is_rejected_without_output(capsys, tmp_path, toy_mechanism, toy_run, case):
    (old, new), fragments = MECHANISM_CASES[case]
    text = toy_mechanism.read_text()
    assert old in text
    toy_mechanism.write_text(text.replace(old, new, 1))
    code, _, err = run_cli(capsys, "ingest", toy_mechanism, toy_run, "-o", tmp_path / "out.npz")
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert str(toy_mechanism) in lines[0]
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    assert leftovers(tmp_path) == []


def test_malformed_json_names_its_line(capsys, tmp_path, toy_run):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "name": "toy",\n  "bodies": [\n    {"name": "arm", "mass": 2.0,}\n  ]\n}\n')
    code, _, err = run_cli(capsys, "ingest", path, toy_run, "-o", tmp_path / "out.npz")
    assert code == 2
    assert "bad.json" in err and "line 4" in err and "malformed JSON" in err
    assert leftovers(tmp_path) == []


def test_every_problem_is_reported(capsys, tmp_path, toy_mechanism, toy_run):
    """A validator collects all problems, not only the first."""
    text = toy_mechanism.read_text().replace("mass = 2.0", "mass = -2.0").replace("mass = 1.3", "mass = 0")
    toy_mechanism.write_text(text)
    code, _, err = run_cli(capsys, "ingest", toy_mechanism, toy_run, "-o", tmp_path / "out.npz")
    assert code == 2
    assert "body 'arm'" in err and "body 'rod'" in err


def test_bad_input_via_the_installed_command(tmp_path, toy_mechanism, toy_run):
    """As a user runs it: a subprocess, exit code 2, a message and no traceback."""
    _edit_csv(toy_run, _set("arm.y", 7, "nan"))
    out = tmp_path / "out.npz"
    proc = subprocess.run(
        [sys.executable, "-m", "mc2fmu.cli", "ingest", str(toy_mechanism), str(toy_run), "-o", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "not finite" in proc.stderr
    assert not out.exists()


def test_existing_output_is_kept_when_input_is_bad(capsys, tmp_path, toy_mechanism, toy_run):
    out = tmp_path / "keep.npz"
    out.write_bytes(b"previous result")
    _edit_csv(toy_run, _drop("rod.qz"))
    code, _, _ = run_cli(capsys, "ingest", toy_mechanism, toy_run, "-o", out)
    assert code == 2 and out.read_bytes() == b"previous result"


def test_gzip_csv_is_read(tmp_path, toy_mechanism, toy_run):
    gz = tmp_path / "run.csv.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(toy_run.read_text())
    assert main(["ingest", str(toy_mechanism), str(gz), "-o", str(tmp_path / "g.npz")]) == 0


def test_hostile_mechanism_files_are_errors_not_tracebacks(capsys, tmp_path, toy_mechanism, toy_run):
    """A 400-digit mass, nesting 5000 deep, and a 5000-character name: one short error line each."""
    text = Path(toy_mechanism).read_text()
    cases = {
        "big.toml": (text.replace("mass = 2.0", "mass = 1" + "0" * 400, 1), "(401 characters) must be a finite number"),
        "deep.toml": ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested or sized beyond reason"),
        "long.toml": (text.replace('name = "arm"', 'name = "' + "x" * 5000 + ' y"', 1), "characters)"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_text(content)
        code, _, err = run_cli(capsys, "ingest", tmp_path / name, toy_run, "-o", tmp_path / "out.npz")
        assert code == 2 and message in err and "Traceback" not in err, (name, err[-300:])
        assert max(len(line) for line in err.splitlines()) < 400, name
    assert not (tmp_path / "out.npz").exists()


def test_output_paths_that_cannot_be_written(capsys, tmp_path, toy_mechanism, toy_run):
    for out, message in ((tmp_path, "the dataset is written as .npz"),
                         (Path(toy_mechanism) / "x.npz", "cannot be written"),
                         (tmp_path / "dir.npz", "is a directory")):
        if out.name == "dir.npz":
            out.mkdir()
        code, _, err = run_cli(capsys, "ingest", toy_mechanism, toy_run, "-o", out)
        assert code == 2 and message in err and "Traceback" not in err, err


def test_the_fast_csv_reader_gives_the_csv_modules_numbers(tmp_path, monkeypatch):
    """Runs are parsed by numpy's C reader where it can: the same float64 table, bit for bit, as
    the csv module's rows through float() (17 significant digits, exponents, quoted cells, blank
    lines, spaces); text it refuses goes to the csv module, which names the bad cell."""
    import mc2fmu.data.poses as poses
    from mc2fmu.errors import PoseDataError

    rng = np.random.default_rng(3)
    values = rng.normal(size=(50, 4)) * 10.0 ** rng.integers(-12, 12, size=(50, 4))
    lines = ["time,a.x,a.y,a.z"] + [",".join(repr(float(v)) for v in row) for row in values]
    lines[5] = lines[5].replace(",", ", ", 1)
    lines[7] = ",".join(f'"{c}"' for c in lines[7].split(","))
    lines.insert(9, "")
    path = tmp_path / "r.csv"
    path.write_text("\n".join(lines) + "\n")
    with open(path, newline="") as fh:
        fh.readline()
        assert poses._fast_table(fh, 4) is not None, "numpy's reader takes this text"
    fast = poses._read_table(path)
    monkeypatch.setattr(poses, "_fast_table", lambda fh, n: None)
    slow = poses._read_table(path)
    assert fast[0] == slow[0] and fast[1].dtype == np.float64 and np.array_equal(fast[1], slow[1])
    assert np.array_equal(fast[1], values)
    monkeypatch.undo()
    lines[12] = lines[12].replace(lines[12].split(",")[2], "1.0x")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PoseDataError, match=r"line 13, column 'a.y': '1.0x' is not a number"):
        poses._read_table(path)
