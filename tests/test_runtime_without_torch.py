"""The run-time side needs neither torch nor onnx: ``simulate``, ``validate``, ``linearize`` and
``export`` (every format and backend, FMI 2 and 3, co-simulation and model exchange, a physical
variant that moves an input) run as commands in processes where importing torch, onnx or
onnxscript fails (a ``sitecustomize`` on ``PYTHONPATH`` installs the block in every Python
process they start: pythonfmu's builder, the FMUs' own imports).  The model is trained first,
in this process, where torch is at hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

BLOCKED = ("torch", "onnx", "onnxscript")
SITECUSTOMIZE = textwrap.dedent(f"""
    import importlib.abc
    import sys

    class _Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BLOCKED!r}:
                raise ImportError(f"{{name}} is not importable here (the run-time side must not need it)")
            return None

    sys.meta_path.insert(0, _Blocked())
""")


@pytest.fixture(scope="module")
def setup(reference_run, tmp_path_factory):
    """A brief model of the MacPherson strut (an input and a spring), a variant that tilts the
    input's direction (no FMU parameter reaches it), and the folder with the import block."""
    from mc2fmu.mechanics.mechanism import load_mechanism, mechanism_toml
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    root = tmp_path_factory.mktemp("no-torch")
    run = reference_run("macpherson", "low")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    model = root / "model"
    fit(mech, [reference_run("macpherson", "train")["path"]],
        TrainConfig(dof=1, samples=200, adam_epochs=20, lbfgs_iters=20), model)
    d = load_mechanism(mech).to_dict()
    axis = np.asarray(d["inputs"][0]["direction"], dtype=float)
    d["inputs"][0]["direction"] = (np.cos(0.3) * axis + np.sin(0.3) * np.cross(axis, [0.0, 0.0, 1.0] if abs(axis[2]) < 0.9
                                                                             else [1.0, 0.0, 0.0])).tolist()
    variant = root / "variant.toml"
    variant.write_text(mechanism_toml(d))
    block = root / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(SITECUSTOMIZE)
    q0 = ",".join(repr(float(v)) for v in json.loads((model / "model.json").read_text())["initial_state"]["q"])
    return {"q0": q0, "model": model, "mech": mech, "run": run["path"], "variant": variant, "block": block, "root": root}


def _blocked(setup, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(setup["block"]), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "mc2fmu", *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=setup["root"], timeout=600)


def test_the_block_itself_works(setup):
    """The check would notice: in a blocked process importing torch or onnx fails."""
    env = {**os.environ, "PYTHONPATH": str(setup["block"])}
    for name in BLOCKED:
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, env=env)
        assert proc.returncode != 0 and "not importable here" in proc.stderr, name


def test_every_runtime_command_runs_without_torch_and_onnx(setup):
    s, out = setup, setup["root"] / "out"
    out.mkdir(exist_ok=True)
    commands = [
        ("simulate", s["model"], s["mech"], s["run"], "-o", out / "sim.csv"),
        # at the model's initial state: a brief model need not have a static equilibrium
        ("linearize", s["model"], "--at", f"q={s['q0']}", "-o", out / "lin.json"),
        ("export", s["model"], "-o", out / "cs2.fmu", "--platforms", "x86_64-linux"),
        ("export", s["model"], "-o", out / "me3.fmu", "--fmi", "3", "--interface", "both", "--platforms",
         "x86_64-linux"),
        ("export", s["model"], "-o", out / "variant.fmu", "--mechanism", s["variant"], "--platforms", "x86_64-linux"),
        ("export", s["model"], "-o", out / "python.fmu", "--backend", "python"),
        ("export", s["model"], "-o", out / "python-variant.fmu", "--backend", "python", "--mechanism", s["variant"]),
        ("export", s["model"], "--format", "casadi", "-o", out / "model.casadi"),
        ("export", s["model"], "--format", "modelica", "-o", out / "mo" / "Strut.mo"),
        ("validate", out / "cs2.fmu", s["mech"], s["run"]),
        ("validate", out / "me3.fmu", s["mech"], s["run"]),
        ("validate", out / "python-variant.fmu", s["variant"], s["run"]),
    ]
    for cmd in commands:
        proc = _blocked(s, *cmd)
        assert proc.returncode == 0, (cmd[:2], proc.stderr[-2000:])
        assert "not importable here" not in proc.stderr + proc.stdout, cmd[:2]
    for f in ("sim.csv", "lin.json", "cs2.fmu", "me3.fmu", "variant.fmu", "python.fmu", "python-variant.fmu",
              "model.casadi", "mo/Strut.mo"):
        assert (out / f).stat().st_size > 0, f
    assert json.loads((out / "lin.json").read_text())["format"] == "mc2fmu-linearization"


def test_the_python_variant_fmu_runs_the_tilted_input(setup):
    """The python FMU of the variant, exported without torch, gives ``simulate``'s motion of the
    variant (its graphs fed the variant's load map), not the trained file's."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.validation.simulate import simulate_file
    from mc2fmu.validation.validate import validate_fmu

    s = setup
    fmu = s["root"] / "out" / "python-variant.fmu"
    if not fmu.exists():
        export_fmu(s["model"], fmu, "python", mechanism=s["variant"])
    sim_v = simulate_file(s["model"], s["variant"], s["run"], s["root"] / "v.csv")
    sim = simulate_file(s["model"], s["mech"], s["run"], s["root"] / "t.csv")
    assert abs(sim_v["max_position_error"] - sim["max_position_error"]) > 1e-5  # the tilt shows
    res = validate_fmu(fmu, s["variant"], [str(s["run"])])["runs"][0]
    assert res["reached_stop_time"]
    assert abs(res["max_position_error"] - sim_v["max_position_error"]) <= 1e-9


def test_a_variant_of_an_older_model_that_needs_new_graphs_names_torch(setup, tmp_path):
    """A model whose python graphs hold the input loads' maps as constants (trained before they
    were inputs): a variant tilting an input needs its graphs exported again, which needs torch;
    without it the export says so and writes nothing."""
    from tests.test_variants import _constant_physics_graphs

    older = _constant_physics_graphs(setup["model"], tmp_path / "older", loads=False)
    out = tmp_path / "p.fmu"
    proc = _blocked(setup, "export", older, "-o", out, "--backend", "python", "--mechanism", setup["variant"])
    assert proc.returncode != 0 and "needs torch" in proc.stderr, proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr and not out.exists()
