"""The package's shape: no import cycle, data flowing one way between the stages, and nothing
after training importing torch or onnx."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mc2fmu"

#: the stages in pipeline order; a module may import only from its own stage or earlier ones
#: (top-level helpers: errors and files come first, pipeline and cli last)
ORDER = ["errors", "files", "capabilities", "mechanics", "data", "models", "reducers", "fmu", "modelica", "validation", "control",
         "parallel", "pipeline", "cli", "__main__"]


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """mc2fmu modules ``path`` imports, anywhere in the file (lazy imports count too)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        found.update(t for t in targets if t.startswith("mc2fmu"))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for t in _imports(path):
            while t and t not in modules:  # "from .x import name": the module is x
                t = t.rpartition(".")[0]
            if t and t != name:
                deps.add(t)
        graph[name] = deps
    return graph


def _stage(module: str) -> int:
    parts = module.split(".")
    return ORDER.index(parts[1]) if len(parts) > 1 else -1


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if d == "mc2fmu" or d.startswith(m + "."):  # a package's own submodules, the version
                continue
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(d):] + [d]))
            if d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert len(graph) > 30  # the walk really saw the package


def test_data_flows_one_way_between_stages():
    bad = []
    for m, deps in _graph().items():
        for d in deps:
            if d != "mc2fmu" and _stage(d) > _stage(m) >= 0:
                bad.append(f"{m} imports {d}")
    assert not bad, bad


TORCH_FREE = ["mc2fmu.fmu.export", "mc2fmu.fmu.backends.native", "mc2fmu.fmu.backends.python",
              "mc2fmu.validation.validate", "mc2fmu.validation.simulate", "mc2fmu.validation.report",
              "mc2fmu.models.artifact", "mc2fmu.models.simulate", "mc2fmu.modelica.export", "mc2fmu.cli",
              "mc2fmu.capabilities", "mc2fmu.control.linearize"]


def test_later_stages_import_neither_torch_nor_onnx():
    """`python -c "import mc2fmu.fmu.export"` and the other stages after training."""
    code = ("import sys, importlib\n"
            f"for m in {TORCH_FREE!r}: importlib.import_module(m)\n"
            "import mc2fmu.cli; mc2fmu.cli.build_parser()\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'onnx', 'onnxruntime', 'onnxscript'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_simulate_validate_and_native_export_run_without_torch(tmp_path, reference_run):
    """A model directory is all they read: with torch made unimportable, simulate, the native
    export and validate still work."""
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("four_bar", "low")["path"]
    mech = Path(run).parent.parent / "mechanism.toml"
    train(mech, [run], TrainConfig(dof=1, samples=64, adam_epochs=2, lbfgs_iters=2), tmp_path / "m")
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('torch', 'onnx', 'onnxscript'): raise ImportError('blocked: ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from mc2fmu.cli import main\n"
            f"m, mech, run, out = {str(tmp_path / 'm')!r}, {str(mech)!r}, {run!r}, {str(tmp_path)!r}\n"
            "assert main(['simulate', m, mech, run, '-q', '-o', out + '/sim.csv']) == 0\n"
            "assert main(['export', m, '-q', '--backend', 'native', '-o', out + '/n.fmu']) == 0\n"
            "assert main(['validate', out + '/n.fmu', mech, run, '-q']) == 0\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "sim.csv").exists() and (tmp_path / "n.fmu").exists()
    # the simulate output: the pose-export columns, then q, qd, the envelope flag and the motion outputs
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.models.motion import output_names

    header = (tmp_path / "sim.csv").read_text().splitlines()[0].split(",")
    motion = [n for n, _, _ in output_names(load_mechanism(mech).body_names)]
    assert header[0] == "time" and "crank.x" in header
    assert header[-3 - len(motion):] == ["q", "qd", "envelope", *motion]


# ---------------------------------------------------------------------------- the artifact's reader


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, reference_run):
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("four_bar", "train")["path"]
    out = tmp_path_factory.mktemp("artifact") / "m"
    train(Path(run).parent.parent / "mechanism.toml", [run], TrainConfig(dof=1, samples=64, adam_epochs=2,
                                                                          lbfgs_iters=2), out)
    return out


def _copy(model_dir: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / "copy"
    shutil.copytree(model_dir, dst)
    return dst


def _edit_json(d: Path, change) -> None:
    meta = json.loads((d / "model.json").read_text())
    change(meta)
    (d / "model.json").write_text(json.dumps(meta))


def _error(d: Path) -> str:
    from mc2fmu.errors import ModelError
    from mc2fmu.models.artifact import load_artifact

    with pytest.raises(ModelError) as exc:
        load_artifact(d)
    return str(exc.value)


def test_artifact_round_trip_is_exact(model_dir, tmp_path):
    """Save what was loaded: the same arrays bit for bit and the same JSON."""
    import numpy as np

    from mc2fmu.models.artifact import load_artifact, save_artifact, to_json

    art = load_artifact(model_dir)
    save_artifact(tmp_path / "again", art)
    again = load_artifact(tmp_path / "again")
    assert to_json(again) == to_json(art)
    with np.load(model_dir / "arrays.npz") as a, np.load(tmp_path / "again" / "arrays.npz") as b:
        assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    assert again.model.resources == art.model.resources


@pytest.mark.parametrize("version, fragment", [(1, "earlier mc2fmu"), (4, "newer mc2fmu; upgrade"),
                                               (3, "holds nothing that needs a version after 2 (version 2)")])
def test_artifact_reader_refuses_other_versions(model_dir, tmp_path, version, fragment):
    d = _copy(model_dir, tmp_path)
    _edit_json(d, lambda m: m.update(version=version))
    msg = _error(d)
    assert str(d / "model.json") in msg and f"version {version}" in msg and fragment in msg


@pytest.mark.parametrize("version, kind", [(True, "bool"), ("3", "str"), (3.5, "float"), (None, "NoneType")])
def test_artifact_reader_refuses_a_version_that_is_no_integer(model_dir, tmp_path, version, kind):
    d = _copy(model_dir, tmp_path)
    _edit_json(d, lambda m: m.update(version=version))
    msg = _error(d)
    assert f"key 'version' must be an integer, not {kind}" in msg and "upgrade" not in msg and "mc2fmu train" in msg


def test_artifact_reader_names_a_missing_key_and_the_fix(model_dir, tmp_path):
    d = _copy(model_dir, tmp_path)
    _edit_json(d, lambda m: (m.pop("envelope"), m.update(dof="one")))
    msg = _error(d)
    assert "key 'envelope' is missing" in msg and "key 'dof' must be an integer, not str" in msg
    assert "mc2fmu train" in msg


def test_artifact_reader_names_a_wrong_shape(model_dir, tmp_path):
    import numpy as np

    d = _copy(model_dir, tmp_path)
    with np.load(d / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["decoder.W1"] = arrays["decoder.W1"][:, :-1]
    del arrays["M"]
    np.savez(d / "arrays.npz", **arrays)
    msg = _error(d)
    assert "arrays.npz: array 'decoder.W1' has shape" in msg and "array 'M' is missing" in msg


def test_artifact_reader_refuses_bad_json_and_missing_files(model_dir, tmp_path):
    d = _copy(model_dir, tmp_path)
    (d / "resources" / "onnx" / "step.onnx").unlink()
    assert "step.onnx: missing" in _error(d)
    (d / "model.json").write_text("{not json")
    assert "line 1: malformed JSON" in _error(d)
    (d / "model.json").unlink()
    assert "missing model.json" in _error(d)
    assert "not a model directory" in _error(tmp_path / "nowhere")


@pytest.mark.parametrize("dt", [0.0, -1e-3])
def test_artifact_reader_refuses_a_non_positive_step(model_dir, tmp_path, dt):
    d = _copy(model_dir, tmp_path)
    _edit_json(d, lambda m: m.update(dt=dt))
    assert "time step must be a finite number > 0" in _error(d)


def test_artifact_reader_refuses_non_finite_weights(model_dir, tmp_path):
    import numpy as np

    d = _copy(model_dir, tmp_path)
    with np.load(d / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["decoder.W0"][0, 0] = np.nan
    np.savez(d / "arrays.npz", **arrays)
    assert "array 'decoder.W0' holds non-finite values" in _error(d)
