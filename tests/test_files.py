"""What mc2fmu reads and writes on disk: the model directory's resource files stay inside it,
atomic directories never lose the old content, output modes are those of a plain ``open``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MECHANISM_TOML, analytic_motion

# ---------------------------------------------------------------------------- a tiny model, built by hand


def _tiny_model(folder: Path) -> Path:
    """A valid model directory in well under a second, without training: the toy mechanism of
    conftest, a one-coordinate linear decoder/encoder through the data's mean along its first
    principal direction, the mechanism's exact mass matrix and loads, and one resource file."""
    from mc2fmu.data.dataset import load_training_data
    from mc2fmu.data.poses import write_run
    from mc2fmu.mechanics.natural import force_model, mass_matrix
    from mc2fmu.models.artifact import build_artifact, save_artifact
    from mc2fmu.models.manifold import ManifoldModel, MLPWeights

    folder.mkdir(parents=True, exist_ok=True)
    mech, run = folder / "toy.toml", folder / "run.csv"
    mech.write_text(MECHANISM_TOML)
    m = analytic_motion()
    write_run(run, m["t"], ["arm", "rod"], m["origin"], m["rotation"], ["tau", "F"], m["u"])
    data = load_training_data(mech, [run])
    x = data.x
    mean = x.mean(axis=0)
    w = np.linalg.svd(x - mean, full_matrices=False)[2][0]  # unit first principal direction
    M = mass_matrix(data.mechanism, data.layout)
    forces = force_model(data.mechanism, data.layout, M)
    model = ManifoldModel(dt=float(data.dt[0]), angles=(False,), step_map_name="centred",
                          decoder=MLPWeights((w[:, None],), (np.zeros(len(w)),), "tanh"), q_mean=np.zeros(1),
                          q_scale=np.ones(1), x_mean=mean, x_scale=np.ones(len(w)), encoder=None, enc_x_mean=None,
                          enc_x_scale=None, E=w[None, :], e0=-w[None, :] @ mean, M=M, f_g=forces.f_g, f_B=forces.f_B,
                          f_C=forces.f_C, springs=forces.springs, resources={"onnx/notes.txt": b"legitimate"})
    out = folder / "model"
    save_artifact(out, build_artifact("autoencoder", model, data))
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return _tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture()
def model_copy(tiny_model, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(tiny_model, tmp_path / "model"))


def _list_resource(model_dir: Path, name: str) -> None:
    meta = json.loads((model_dir / "model.json").read_text())
    meta["resources"].append(name)
    (model_dir / "model.json").write_text(json.dumps(meta))


def _refusal(model_dir: Path) -> str:
    from mc2fmu.errors import ModelError
    from mc2fmu.models.artifact import load_artifact

    with pytest.raises(ModelError) as exc:
        load_artifact(model_dir)
    return str(exc.value)


def _export(model_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mc2fmu.cli", "export", str(model_dir), "-o", str(out), "-q", *extra],
                          capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------------------- resource names


def test_the_tiny_model_loads_with_its_resource(tiny_model):
    from mc2fmu.models.artifact import load_artifact

    art = load_artifact(tiny_model)
    assert art.model.resources == {"onnx/notes.txt": b"legitimate"}


@pytest.mark.parametrize("name", ["../../../etc/hostname", "/etc/hostname", "onnx/../../model.json", "../arrays.npz"])
def test_a_resource_name_outside_resources_is_refused_on_read(model_copy, name):
    """Absolute names and names with '..' are refused, whether or not the file they reach exists."""
    _list_resource(model_copy, name)
    msg = _refusal(model_copy)
    assert str(model_copy / "model.json") in msg and "'resources'" in msg and repr(name) in msg
    assert "mc2fmu train" in msg


def test_export_refuses_a_model_whose_resource_name_leaves_the_directory(model_copy, tmp_path):
    """`mc2fmu export` used to read /etc/hostname and put it into the FMU."""
    _list_resource(model_copy, "../../../../../../../../etc/hostname")
    out = tmp_path / "leak.fmu"
    proc = _export(model_copy, out)
    assert proc.returncode == 2, proc.stderr
    assert any(line.startswith("error:") and "'resources'" in line for line in proc.stderr.splitlines()), proc.stderr
    assert not out.exists() and not list(tmp_path.glob("*.fmu*"))


@pytest.mark.parametrize("listed", [True, False])
def test_a_symlink_in_resources_that_leads_outside_is_refused(model_copy, tmp_path, listed):
    """A link inside resources/ to a file outside it is refused, listed or not; a link to a
    file inside resources/ is fine."""
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any model")
    (model_copy / "resources" / "onnx" / "inside.txt").symlink_to(model_copy / "resources" / "onnx" / "notes.txt")
    (model_copy / "resources" / "onnx" / "leak.txt").symlink_to(secret)
    if listed:
        _list_resource(model_copy, "onnx/leak.txt")
    msg = _refusal(model_copy)
    assert "'resources'" in msg and "onnx/leak.txt" in msg and "mc2fmu train" in msg
    assert "inside.txt" not in msg


def test_a_symlinked_resources_folder_outside_the_model_is_refused(model_copy, tmp_path):
    import shutil

    elsewhere = tmp_path / "elsewhere"
    shutil.move(model_copy / "resources", elsewhere)
    (model_copy / "resources").symlink_to(elsewhere, target_is_directory=True)
    msg = _refusal(model_copy)
    assert "'resources'" in msg and "mc2fmu train" in msg


@pytest.mark.parametrize("name", ["../escape.txt", "ABSOLUTE", "onnx/../../escape.txt"])
def test_save_artifact_refuses_a_resource_name_outside_resources(tiny_model, tmp_path, name):
    from mc2fmu.errors import ModelError
    from mc2fmu.models.artifact import load_artifact, save_artifact

    name = str(tmp_path / "escape.txt") if name == "ABSOLUTE" else name
    art = load_artifact(tiny_model)
    art.model.resources[name] = b"x"
    (tmp_path / "deep").mkdir()
    out = tmp_path / "deep" / "m"
    with pytest.raises(ModelError) as exc:
        save_artifact(out, art)
    msg = str(exc.value)
    assert "'resources'" in msg and repr(name) in msg and "mc2fmu train" in msg
    assert not out.exists() and not (tmp_path / "escape.txt").exists()
    assert not list((tmp_path / "deep").iterdir())  # no temporary directory left behind


# ---------------------------------------------------------------------------- atomic directories


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_atomic_directory_replaces_the_old_content_and_leaves_nothing_beside(tmp_path):
    from mc2fmu.files import atomic_directory

    path = tmp_path / "out"
    (path / "sub").mkdir(parents=True)
    (path / "old.txt").write_text("old")
    (path / "sub" / "old.txt").write_text("old too")
    with atomic_directory(path) as tmp:
        (tmp / "new.txt").write_text("new")
    assert _tree(path) == {"new.txt": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with atomic_directory(tmp_path / "fresh") as tmp:  # and where there was nothing
        (tmp / "a.txt").write_text("a")
    assert _tree(tmp_path / "fresh") == {"a.txt": "a"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "out"]


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_atomic_directory_keeps_the_old_content_when_the_new_cannot_be_moved_in(tmp_path, monkeypatch, failure):
    """Moving the new directory into place fails (a full disk, an interrupt): the old content
    is still at the path, complete, and no temporary directory is left beside it.  (It used to
    be removed before the move, so both were lost.)"""
    import mc2fmu.files as files
    from mc2fmu.errors import OutputError

    path = tmp_path / "out"
    (path / "sub").mkdir(parents=True)
    (path / "old.txt").write_text("old")
    (path / "sub" / "old.txt").write_text("old too")
    real_replace, made = os.replace, []

    def replace(src, dst, **kw):
        if made and Path(src) == made[0]:
            raise failure
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(OutputError if isinstance(failure, OSError) else KeyboardInterrupt) as exc:
        with files.atomic_directory(path) as tmp:
            made.append(tmp)
            (tmp / "new.txt").write_text("new")
    if isinstance(failure, OSError):
        assert str(path) in str(exc.value) and "No space left" in str(exc.value)
    assert _tree(path) == {"old.txt": "old", "sub/old.txt": "old too"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# ---------------------------------------------------------------------------- output modes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the umask from /proc on Linux")
def test_default_modes_come_from_the_umask_without_changing_it(tmp_path, monkeypatch):
    """Outputs get the mode a plain open/mkdir gives (umask 027: 640 and 750), and the
    process's umask is never changed to learn it (for a moment it used to be 0, so a file
    another thread created then was world-writable)."""
    import stat
    import tempfile

    from mc2fmu.files import atomic_directory, atomic_output, give_default_mode

    before = os.umask(0o027)
    try:
        real_umask, calls = os.umask, []

        def umask(mask):
            calls.append(mask)
            return real_umask(mask)

        monkeypatch.setattr(os, "umask", umask)
        fd, f = tempfile.mkstemp(dir=tmp_path)
        os.close(fd)
        d = Path(tempfile.mkdtemp(dir=tmp_path))
        give_default_mode(Path(f))
        give_default_mode(d)
        with atomic_output(tmp_path / "out.txt") as tmp:
            tmp.write_text("x")
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "a").write_text("a")
        monkeypatch.undo()
        assert calls == []
        assert os.umask(0o027) == 0o027  # unchanged
    finally:
        os.umask(before)
    for path, mode in ((f, 0o640), (d, 0o750), (tmp_path / "out.txt", 0o640), (tmp_path / "out", 0o750)):
        assert stat.S_IMODE(os.stat(path).st_mode) == mode, path


def test_default_modes_without_proc(tmp_path, monkeypatch):
    """Where /proc cannot be read the umask is still found (and left as it was)."""
    import stat

    import mc2fmu.files as files

    def no_proc(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", args[0] if args else "")

    monkeypatch.setattr(files, "open", no_proc, raising=False)
    before = os.umask(0o027)
    try:
        with files.atomic_output(tmp_path / "out.txt") as tmp:
            tmp.write_text("x")
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(before)
    assert stat.S_IMODE(os.stat(tmp_path / "out.txt").st_mode) == 0o640


def test_an_fmu_holds_only_the_models_own_files(model_copy, tmp_path):
    """A stray file or link beside the model's files (here a link to a file outside the model)
    does not go into the FMU: only model.json, arrays.npz and the listed resources do (both
    backends take them from ``artifact_files``; the python backend needs a trained model's
    ONNX graphs, which this model has not)."""
    import zipfile

    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any model")
    (model_copy / "evil.txt").symlink_to(secret)
    (model_copy / "resources" / "unlisted.txt").write_text("not listed either")
    out = tmp_path / "model.fmu"
    proc = _export(model_copy, out, "--backend", "native")
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(out) as z:
        names = [n for n in z.namelist() if "/model/" in n and not n.endswith("/")]
        assert sorted(n.split("/model/", 1)[1] for n in names) == ["arrays.npz", "model.json", "resources/onnx/notes.txt"]
        assert all(b"not part of any model" not in z.read(n) for n in z.namelist())
