"""The native FMU backend (generated C): FMI 2/3, co-simulation and model exchange.

Models are trained briefly (their accuracy does not matter: parity, stepping, state and
errors are properties of the export).  Every FMU runs in a fresh process: fmpy through
``fmu_host.py`` / ``fmpy_sim.py``, or the plain-C host ``c_host/host.c`` with an empty
environment (no Python in the process at all).
"""

from __future__ import annotations

import ctypes
import subprocess
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from tests.c_host.run import build_host, extract, have_valgrind, run_host
from tests.conftest import TRAINED
from tests.fmu_checks import assert_python_parity, me_vs_cs, run_inputs, valgrind_cycles, valgrind_states
from tests.fmu_helpers import run_json, run_misuse, start_values

HERE = Path(__file__).parent
FMU_HOST = HERE / "fmu_host.py"
FMPY_SIM = HERE / "fmpy_sim.py"
ALL = ["four_bar", "slider_crank", "two_bar", "macpherson"]
VARIANTS = [(2, "cs"), (2, "me"), (3, "cs"), (3, "me"), (2, "both"), (3, "both")]

pytestmark = pytest.mark.skipif(__import__("shutil").which("gcc") is None, reason="the native backend needs gcc")


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def c_host(tmp_path_factory) -> Path:
    return build_host(tmp_path_factory.mktemp("c-host"))


def _fmu_host_steps(fmu: Path, start, inputs, u, t_end: float, tmp_path: Path, h: float = 1e-3) -> tuple[list, np.ndarray]:
    """fmpy (fmu_host.py, FMI 2 co-simulation): input row k before step k, outputs after it."""
    req = {"kind": "steps", "fmu": str(fmu), "start": start, "steps": [h], "t_end": t_end, "block": h,
           "inputs": inputs, "u_blocks": np.asarray(u).tolist()}
    res = run_json(FMU_HOST, req, tmp_path)
    return res["outputs"], np.array(res["runs"][repr(h)]["y"])


# ---------------------------------------------------------------------------- the FMUs


@pytest.mark.parametrize("name", ALL)
def test_every_variant_of_every_mechanism_validates(native, trained, name):
    """fmpy validate finds no problem in FMI 2/3 CS/ME/both FMUs; gcc warns about nothing;
    the contract's variables come first with the python backend's value references."""
    from fmpy import read_model_description
    from fmpy.validation import validate_fmu

    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.fmu.description import fmu_variables

    contract = [v.name for v in fmu_variables(load_artifact(trained(name)[0]))]
    dof = load_artifact(trained(name)[0]).dof
    for fmi, interface in VARIANTS:
        fmu, summary = native(name, fmi, interface)
        assert validate_fmu(str(fmu)) == [], (fmi, interface)
        assert summary["compiler_warnings"] == []
        assert max(summary["native_max_difference"].values()) <= 1e-12
        md = read_model_description(str(fmu))
        names = [v.name for v in md.modelVariables]
        assert names[:len(contract)] == contract
        assert [v.valueReference for v in md.modelVariables] == list(range(1, len(names) + 1))
        extras = names[len(contract):]
        me = [f"der(q[{i}])" for i in range(1, dof + 1)] + [f"der(qd[{i}])" for i in range(1, dof + 1)]
        physics = [v.name for v in fmu_variables(load_artifact(trained(name)[0]), physics=True)][len(contract):]
        # the motion outputs last: per body (file order) its velocity and angular velocity, then the energies
        bodies = [b.name for b in load_artifact(trained(name)[0]).mechanism.bodies]
        motion = [f"{b}.{c}" for b in bodies for c in ("vx", "vy", "vz", "wx", "wy", "wz")] + \
            ["kinetic_energy", "potential_energy"]
        assert extras == (me if interface != "cs" else []) + (["time"] if fmi == 3 else []) + physics + motion
        if interface != "cs":
            states = sorted(d.variable.derivative.name for d in md.derivatives)
            assert states == sorted([f"q[{i}]" for i in range(1, dof + 1)] + [f"qd[{i}]" for i in range(1, dof + 1)])
        with zipfile.ZipFile(fmu) as z:
            files = set(z.namelist())
        platform = "linux64" if fmi == 2 else "x86_64-linux"
        assert f"binaries/{platform}/{summary['model_identifier']}.so" in files
        assert {"sources/mc2fmu_model.h", "sources/mc2fmu_native.h", f"sources/mc2fmu_fmi{fmi}.c"} <= files
        assert ("sources/buildDescription.xml" in files) == (fmi == 3)


@pytest.mark.parametrize("jv", ["", "-DMC2FMU_JV=0"])
def test_two_coordinates_one_an_angle_pass_the_self_check(reference_run, tmp_path, monkeypatch, jv):
    """The step's ``H : v v`` by one propagated row per velocity (the default from two
    coordinates on, with an angle coordinate's cos/sin features) and by the Hessian's rows
    (MC2FMU_JV=0): both agree with the run-time model to 1e-12 at the self-check's points
    (nonzero velocities and inputs)."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("two_bar", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    art = fit(mech, [run["path"]], TrainConfig(dof=2, angles="1", samples=64, adam_epochs=2, lbfgs_iters=2),
              tmp_path / "model")
    assert art.angles == (True, False)
    monkeypatch.setenv("MC2FMU_CFLAGS", jv)
    summary = export_fmu(tmp_path / "model", tmp_path / "m.fmu", "native")
    assert summary["cflags"][-1:] == ([jv] if jv else ["-Wextra"])
    assert summary["native_max_difference"]["rhs"] <= 1e-12 and summary["native_max_difference"]["step"] <= 1e-12


@pytest.mark.parametrize("step_map", ["paper", "centred"])
def test_the_printed_step_map_is_the_models(reference_run, tmp_path, step_map):
    """``mc2fmu_step.h`` is printed from the model's own step map: the export's self-check
    finds the C step equal to the run-time model's (numpy, its calls of the acceleration its
    own) to 1e-12 for either map, and the two maps' C differ (the centred map calls the
    acceleration twice)."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("four_bar", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    fit(mech, [run["path"]], TrainConfig(dof=1, step_map=step_map, samples=64, adam_epochs=2, lbfgs_iters=2),
        tmp_path / "model")
    summary = export_fmu(tmp_path / "model", tmp_path / "m.fmu", "native")
    assert summary["native_max_difference"]["step"] <= 1e-12
    with zipfile.ZipFile(tmp_path / "m.fmu") as z:
        text = z.read("sources/mc2fmu_step.h").decode()
    assert f"step map '{step_map}'" in text
    assert text.count("MC2FMU_(acceleration)(T, ") == (2 if step_map == "centred" else 1)


def test_folded_input_force_factors_are_exact_and_of_the_matrix_rank():
    """``C = L R`` with ``k`` the rank: a rank-3 matrix gives 3 factors that rebuild it to
    rounding, a zero matrix none."""
    from mc2fmu.fmu.backends.native import low_rank

    rng = np.random.default_rng(0)
    C = rng.normal(size=(64, 3)) @ rng.normal(size=(3, 64))
    L, R = low_rank(C)
    assert L.shape == (64, 3) and R.shape == (3, 64)
    assert np.abs(L @ R - C).max() <= 1e-13 * np.abs(C).max()
    L, R = low_rank(np.zeros((64, 64)))
    assert L.shape == (64, 0) and R.shape == (0, 64)


def test_python_backend_description_is_unchanged(trained):
    """ME/FMI 3 extras are opt-in: the contract's variable dicts have exactly the old keys."""
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.fmu.description import fmu_variables

    for v in fmu_variables(load_artifact(trained("four_bar")[0])):
        assert set(v.to_dict()) == {"name", "causality", "variability", "initial", "unit", "description", "start",
                                    "role", "index"}


@pytest.mark.parametrize("name", TRAINED)
def test_co_simulation_equals_the_python_backend(native, trained, reference_run, tmp_path, name):
    """The training run's inputs (10 s) on the briefly trained models: the same outputs as
    the pythonfmu FMU while the model stays near its envelope (at least 1 s of it), and the same
    failure step if it diverges."""
    inputs, t, u = run_inputs(name, reference_run)
    assert_python_parity(trained(name)[0], native(name)[0], inputs, u[:10000], tmp_path, min_steps=1000)


@pytest.mark.parametrize("name", TRAINED)
def test_fmi3_co_simulation_equals_fmi2(native, trained, reference_run, tmp_path, name):
    model_dir = trained(name)[0]
    inputs, t, u = run_inputs(name, reference_run)
    req = {"kind": "simulate", "fmi_type": "CoSimulation", "start": start_values(model_dir), "stop_time": 2.0,
           "inputs": {"time": t[:2001].tolist(), **{k: u[:2001, i].tolist() for i, k in enumerate(inputs)}}}
    from fmpy import read_model_description

    outs = [v.name for v in read_model_description(str(native(name)[0])).modelVariables if v.causality == "output"]
    r2 = run_json(FMPY_SIM, {**req, "fmu": str(native(name, 2, "cs")[0]), "output": outs}, tmp_path)
    r3 = run_json(FMPY_SIM, {**req, "fmu": str(native(name, 3, "cs")[0]), "output": outs}, tmp_path)
    rb = run_json(FMPY_SIM, {**req, "fmu": str(native(name, 3, "both")[0]), "output": outs}, tmp_path)
    assert len(r2["time"]) == 2001
    for o in outs:
        assert r3[o] == r2[o] and rb[o] == r2[o], o


@pytest.mark.parametrize("fmi", [2, 3])
def test_model_exchange_matches_an_independent_integration(native, trained, reference_run, tmp_path, fmi):
    """A constant input, fmpy's CVode (rtol 1e-10) on the ME FMU against scipy's DOP853 on
    torch's right-hand side: q to 1e-7 over 1 s."""
    import torch
    from scipy.integrate import solve_ivp

    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    name = "four_bar"
    model_dir = trained(name)[0]
    art = load_artifact(model_dir)
    inputs, t, u = run_inputs(name, reference_run)
    u_const = 0.2 * np.abs(u).max(axis=0)
    start = start_values(model_dir)
    fmu = native(name, fmi, "me")[0]
    res = run_json(FMPY_SIM, {
        "kind": "simulate", "fmu": str(fmu), "fmi_type": "ModelExchange", "start": start | dict(zip(inputs, u_const)),
        "stop_time": 1.0, "output": ["q[1]", "qd[1]"], "rtol": 1e-10}, tmp_path)
    m = art.dof
    y0 = np.array([start["q_start[1]"], start["qd_start[1]"]])
    tu = torch.as_tensor(u_const[None])
    torch_model = from_runtime(art.model)  # torch: the independent oracle of the C right-hand side

    def rhs(_, y):
        with torch.no_grad():
            a = torch_model.acceleration(torch.as_tensor(y[None, :m]), torch.as_tensor(y[None, m:]), tu)[0].numpy()
        return np.concatenate([y[m:], a])

    ts = np.array(res["time"])
    sol = solve_ivp(rhs, (0.0, 1.0), y0, method="DOP853", t_eval=ts, rtol=1e-12, atol=1e-13)
    assert len(ts) == 1001 and np.ptp(sol.y[0]) > 1e-3  # the model really moves
    assert np.abs(np.array(res["q[1]"]) - sol.y[0]).max() <= 1e-7
    assert np.abs(np.array(res["qd[1]"]) - sol.y[1]).max() <= 1e-6 * max(1.0, np.abs(sol.y[1]).max())


@pytest.mark.parametrize("name", TRAINED)
def test_model_exchange_agrees_with_co_simulation(native, trained, reference_run, tmp_path, name):
    """The run's inputs: fmpy's CVode on the ME FMU against the CS FMU's fixed-step map.  They
    differ by the step map's O(dt^2) error and by fmpy feeding inputs to CVode only at output
    points (CVode's internal steps span several of them): positions agree to 1e-3 m.  The
    briefly trained models stay finite for about 2 s of this run."""
    inputs, t, u = run_inputs(name, reference_run)
    diff = me_vs_cs(trained(name)[0], native(name, 2, "cs")[0], native(name, 3, "me")[0], inputs, t, u, 1.5, tmp_path)
    assert diff <= 1e-3, diff


# ---------------------------------------------------------------------------- springs

SPRINGS = """
[[springs]]
name = "anchor"
body_a = "ground"
point_a = [0.25, 0.2, 0.0]
body_b = "crank"
point_b = [0.3, 0.0, 0.0]
stiffness = 200.0
damping = 8.0
length = 0.45

[[springs]]
name = "strut"
body_a = "crank"
point_a = [0.15, 0.0, 0.0]
body_b = "rocker"
point_b = [0.1, 0.0, 0.0]
stiffness = 150.0
damping = 5.0
length = 0.3
"""


@pytest.fixture(scope="module")
def spring_four_bar(reference_run, tmp_path_factory):
    """four_bar plus a damped spring to the ground and one between the crank and the rocker,
    neither at its rest length, trained briefly on the four_bar's training run (not a spring
    simulation: parity needs no accurate model).  -> (model_dir, inputs, u, fmu) with
    ``fmu(fmi, interface)`` -> (fmu_path, export summary), exported once."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.data.poses import read_run
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    root = tmp_path_factory.mktemp("native-springs")
    mech = root / "mechanism.toml"
    run = Path(reference_run("four_bar", "train")["path"])  # generated in the session (runs are not committed)
    mech.write_text((run.parent.parent / "mechanism.toml").read_text() + SPRINGS)
    fit(mech, [run], TrainConfig(dof=1, samples=300, adam_epochs=40, lbfgs_iters=40), root / "model")
    mechanism = load_mechanism(mech)
    cache: dict[tuple, tuple] = {}

    def fmu(fmi: int = 2, interface: str = "cs"):
        if (fmi, interface) not in cache:
            path = root / f"springs-fmi{fmi}-{interface}.fmu"
            cache[fmi, interface] = (path, export_fmu(root / "model", path, "native", fmi, interface))
        return cache[fmi, interface]

    return root / "model", list(mechanism.input_names), np.atleast_2d(read_run(run, mechanism).u), fmu


def _without_damping(model):
    """The run-time model with its dampers removed (springs kept)."""
    import dataclasses

    sp = model.springs
    return dataclasses.replace(model, springs=dataclasses.replace(sp, c=np.zeros_like(sp.c)))


def test_spring_fmus_validate(spring_four_bar, native):
    """fmpy validate on FMI 2 CS/ME and FMI 3 both; the springs are in the self-check and the
    header; a model without springs has no spring data (and so no spring code compiled)."""
    from fmpy.validation import validate_fmu

    for fmi, interface in [(2, "cs"), (2, "me"), (3, "both")]:
        fmu, summary = spring_four_bar[3](fmi, interface)
        assert validate_fmu(str(fmu)) == [], (fmi, interface)
        assert summary["compiler_warnings"] == []
        assert summary["native_max_difference"]["springs"] <= 1e-12
        assert max(summary["native_max_difference"].values()) <= 1e-12
        with zipfile.ZipFile(fmu) as z:
            header = z.read("sources/mc2fmu_model.h").decode()
        assert "#define MC2FMU_NS 2" in header and "mc2fmu_P_h[" in header and "strut.damping" in header
    fmu, summary = native("four_bar")
    with zipfile.ZipFile(fmu) as z:
        header = z.read("sources/mc2fmu_model.h").decode()
    assert "#define MC2FMU_NS 0" in header and "mc2fmu_P_h" not in header
    assert "springs" not in summary["native_max_difference"]


def test_spring_co_simulation_equals_the_python_backend(spring_four_bar, tmp_path):
    """The springs in the C step map: the same outputs as the pythonfmu FMU (torch) over 3 s
    of the run's inputs, positions to 1e-10 m, with the exported physical parameters and with
    every kind set through FMI.  The damper alone moves q by far more than
    that, so a dropped spring or a damper on another velocity than each pass's fails here."""
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.mechanics.variants import physical_parameters
    from mc2fmu.models.simulate import initial_history, rollout

    model_dir, inputs, u, fmu = spring_four_bar
    trained_params = assert_python_parity(model_dir, fmu(2, "cs")[0], inputs, u[:3000], tmp_path, min_steps=2000)
    # every kind of physical parameter set through FMI: both backends form the same physics
    # (python: mc2fmu.mechanics.parameters into the graphs' inputs; native: its C), springs included
    art = load_artifact(model_dir)
    settings = {}
    for p in physical_parameters(art.mechanism):
        scale = {"mass": 1.1, "inertia": 0.9, "stiffness": 1.2, "damping": 0.8, "length": 0.99}.get(
            p.name.split(".")[-1].split("[")[0], 1.0)
        settings[p.name] = p.value * scale + (0.005 if ".com[1]" in p.name else 0.0)
    settings["gravity[1]"] = 1.0
    variant = assert_python_parity(model_dir, fmu(2, "cs")[0], inputs, u[:1000], tmp_path, min_steps=1000,
                                   parameters=settings)
    assert np.abs(variant - trained_params[:1000]).max() > 1e-3  # the parameters were taken
    start = start_values(model_dir)
    q0, qd0 = np.array([start["q_start[1]"]]), np.array([start["qd_start[1]"]])
    q = [rollout(model, initial_history(model, q0, qd0, u[0]), q0, u[:1000])
         for model in (art.model, _without_damping(art.model))]
    assert np.abs(q[0] - q[1]).max() > 1e-6


def test_spring_model_exchange_derivatives_equal_torch(spring_four_bar, tmp_path):
    """fmi2GetDerivatives at states over the envelope (velocities up to 3x its bounds, so the
    damper weighs in) against torch's acceleration, which includes J^T f_spring(x, J qd)."""
    import torch

    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    model_dir, inputs, u, fmu = spring_four_bar
    art = load_artifact(model_dir)
    pts = sample_points(art.envelope, art.model, 20, seed=3)
    q = np.concatenate([p["q"] for p in pts])
    qd = np.concatenate([p["qd"] for p in pts]) * np.linspace(-3.0, 3.0, len(pts))[:, None]
    uu = np.concatenate([p["u"] for p in pts])
    res = run_json(FMPY_SIM, {"kind": "derivatives", "fmu": str(fmu(2, "me")[0]), "start": start_values(model_dir),
                              "inputs": inputs, "states": np.hstack([q, qd]).tolist(), "u": uu.tolist()}, tmp_path)
    dx = np.array(res["dx"])
    with torch.no_grad():
        ref, undamped = (from_runtime(m).acceleration(*(torch.as_tensor(a) for a in (q, qd, uu))).numpy()
                         for m in (art.model, _without_damping(art.model)))
    assert np.array_equal(dx[:, :1], qd)
    assert np.all(np.abs(dx[:, 1:] - ref) <= 1e-12 * np.maximum(1.0, np.abs(ref)))
    assert np.abs(ref - undamped).max() > 1e-3 * np.abs(ref).max()


# ---------------------------------------------------------------------------- no Python: the C host


def _needed_libraries(path: Path) -> str:
    return subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout


@pytest.mark.parametrize("name", TRAINED)
def test_c_host_without_python_matches_fmpy(native, trained, reference_run, c_host, tmp_path, name):
    """The C host (dlopen + fmi2 calls, empty environment) gives exactly fmpy's outputs."""
    fmu = native(name)[0]
    lib, guid, md = extract(fmu, tmp_path / "fmu")
    assert "python" not in _needed_libraries(lib).lower() and "python" not in _needed_libraries(c_host).lower()
    model_dir = trained(name)[0]
    inputs, t, u = run_inputs(name, reference_run)
    start = start_values(model_dir)
    names, ref = _fmu_host_steps(fmu, start, inputs, u[:2000], 2.0, tmp_path)  # the brief model's finite range
    names2, got = run_host(c_host, lib, guid, md, start=start, inputs=inputs, rows=u[:2000], n_steps=2000,
                           outputs=names)
    assert got.shape == (2000, 1 + len(names))
    assert np.allclose(got[:, 0], np.arange(1, 2001) * 1e-3, rtol=0, atol=1e-12)
    assert np.array_equal(got[:, 1:], ref)


@pytest.mark.parametrize("fmi", [2, 3])
def test_built_from_the_sources_alone_gives_the_same_results(native, trained, reference_run, tmp_path, fmi):
    """As a user on another platform would: compile what sources/ lists (SourceFiles in the
    FMI 2 model description, buildDescription.xml for FMI 3) against fmpy's headers, put the
    library in place of the shipped one and run the FMU: the same outputs."""
    from fmpy import read_model_description

    from mc2fmu.fmu.backends.native import fmi_headers

    name = "four_bar"
    fmu = native(name, fmi, "cs")[0]
    md = read_model_description(str(fmu))
    ident = md.coSimulation.modelIdentifier
    rebuilt = tmp_path / "rebuilt"
    with zipfile.ZipFile(fmu) as z:
        z.extractall(rebuilt)
    src = rebuilt / "sources"
    (config,) = md.buildConfigurations  # FMI 2: <SourceFiles>; FMI 3: sources/buildDescription.xml
    files = [f for fs in config.sourceFileSets for f in fs.sourceFiles]
    assert files == [f"mc2fmu_fmi{fmi}.c"] and config.modelIdentifier == ident
    if fmi == 3:
        build = ElementTree.parse(src / "buildDescription.xml").getroot()
        assert [e.get("name") for e in build.iter("SourceFile")] == files
    platform = "linux64" if fmi == 2 else "x86_64-linux"
    lib = rebuilt / "binaries" / platform / f"{ident}.so"
    shipped = lib.read_bytes()
    lib.unlink()
    cmd = ["gcc", "-std=c99", "-O3", "-fPIC", "-shared", "-Wall", "-Wextra", "-I", str(src), "-I", str(fmi_headers()),
           *(str(src / f) for f in files), "-o", str(lib), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert lib.read_bytes() != b"" and len(shipped) > 0
    model_dir = trained(name)[0]
    inputs, t, u = run_inputs(name, reference_run)
    outs = [v.name for v in md.modelVariables if v.causality == "output"]
    req = {"kind": "simulate", "fmi_type": "CoSimulation", "start": start_values(model_dir), "stop_time": 1.0,
           "output": outs, "inputs": {"time": t[:1001].tolist(), **{k: u[:1001, i].tolist() for i, k in enumerate(inputs)}}}
    a = run_json(FMPY_SIM, {**req, "fmu": str(fmu)}, tmp_path)
    b = run_json(FMPY_SIM, {**req, "fmu": str(rebuilt)}, tmp_path)
    for o in outs:
        assert np.abs(np.array(a[o]) - np.array(b[o])).max() <= 1e-12, o


def test_poses_newton_polar_factor_matches_numpy_svd(native, trained, tmp_path):
    """Decoded points are not exactly rigid: the C polar factor (Newton) and quaternion
    against an independent reference for points perturbed by up to 1e-3 L: the polar factor
    by scipy's SVD, the quaternion by scipy's Rotation (sign w >= 0), the origin as
    ``r0 - R com``."""
    from scipy.linalg import svd
    from scipy.spatial.transform import Rotation

    from mc2fmu.fmu.backends.native import compile_library
    from mc2fmu.models.artifact import load_artifact

    name = "macpherson"  # six spatial bodies
    fmu = native(name)[0]
    with zipfile.ZipFile(fmu) as z:
        z.extractall(tmp_path / "fmu")
    lib_path = tmp_path / "selftest.so"
    assert compile_library(tmp_path / "fmu" / "sources" / "mc2fmu_fmi2.c", lib_path, extra=["-DMC2FMU_SELFTEST"]) == []
    lib = ctypes.CDLL(str(lib_path))
    art = load_artifact(trained(name)[0])
    layout, n_b = art.layout, len(art.layout.bodies)
    rng = np.random.default_rng(1)
    worst = 0.0
    for k in range(200):
        x = art.decode(np.array([[art.envelope.q_min[0] + rng.random() * (art.envelope.q_max[0] - art.envelope.q_min[0])]]))[0]
        for b in layout.bodies:
            x[b.offset:b.offset + 12] += 1e-3 * b.length * rng.standard_normal(12) * (k % 4 != 0)
        x = np.ascontiguousarray(x)
        pose = np.zeros(7 * n_b)
        lib.mc2fmu_selftest_poses(x.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                                  pose.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
        for b, bl in enumerate(layout.bodies):
            pts = x[bl.offset:bl.offset + 12].reshape(4, 3)
            U, _, Vt = svd((pts[1:] - pts[0]).T / bl.length)
            R = U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt
            quat = Rotation.from_matrix(R).as_quat(scalar_first=True)
            ref = np.concatenate([pts[0] - R @ np.asarray(bl.com), quat if quat[0] >= 0 else -quat])
            worst = max(worst, np.abs(pose[7 * b:7 * b + 7] - ref).max())
    assert worst <= 1e-12, worst


# ---------------------------------------------------------------------------- state, errors, processes


@pytest.mark.parametrize("name", TRAINED)
def test_get_set_and_serialized_state_reproduce_the_run(native, trained, reference_run, tmp_path, name):
    model_dir = trained(name)[0]
    inputs, t, u = run_inputs(name, reference_run, "low")
    blocks = [list(u[int(np.searchsorted(t, k * 0.01 - 1e-12))]) for k in range(61)]
    req = {"kind": "state", "fmu": str(native(name)[0]), "start": start_values(model_dir), "steps": [0.0025],
           "t_split": 0.3, "t_end": 0.6, "block": 0.01, "inputs": inputs, "u_blocks": blocks}
    res = run_json(FMU_HOST, req, tmp_path)
    first = np.array(res["first"])
    assert first.shape[0] == 120 and np.isfinite(first).all()
    assert np.array_equal(first, np.array(res["second"]))
    assert np.array_equal(first, np.array(res["deserialized"]))


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_input_is_an_error_with_a_message(native, trained, tmp_path, value):
    model_dir = trained("four_bar")[0]
    res = run_json(FMU_HOST, {"kind": "nan", "fmu": str(native("four_bar")[0]), "start": start_values(model_dir),
                                      "steps": [0.001], "inputs": ["tau"], "value": value}, tmp_path)
    assert "status 3 (error)" in res["status"]["set"] and "status 3 (error)" in res["status"]["step"]
    text = " ".join(m["message"] for m in res["messages"])
    assert f"tau = {value} refused" in text and "must be finite" in text
    assert all(m["status"] == 3 for m in res["messages"])
    res3 = run_json(FMPY_SIM, {"kind": "nan", "fmu": str(native("four_bar", 3, "cs")[0]), "input": "tau",
                                       "value": value}, tmp_path)
    assert "fmi3SetFloat64" in res3["status"]["set"] and "error" in res3["status"]["set"].lower()
    assert "error" in res3["status"]["step"].lower()
    assert any("tau" in m["message"] and "must be finite" in m["message"] for m in res3["messages"])


def test_leaving_the_envelope_warns_once(native, trained, c_host, tmp_path):
    """A large constant input drives the model out of its training envelope: one warning."""
    from mc2fmu.models.artifact import load_artifact

    model_dir = trained("four_bar")[0]
    art = load_artifact(model_dir)
    lib, guid, md = extract(native("four_bar")[0], tmp_path / "fmu")
    big = art.envelope.u_max[0] + 0.5 * (art.envelope.u_max[0] - art.envelope.u_min[0])
    names, data = run_host(c_host, lib, guid, md, start=start_values(model_dir), inputs=["tau"],
                           rows=np.full((1, 1), big), n_steps=20, outputs=["envelope"], work=tmp_path)
    assert data[-1, 1] > 0.01
    proc = subprocess.run([str(c_host), str(lib), guid, str(tmp_path / "spec-run.txt")], capture_output=True,
                          text=True, env={})
    assert proc.stderr.count("left its training envelope") == 1


def test_two_native_fmus_in_one_process(native, trained, reference_run, tmp_path):
    requests, alone = [], []
    for name in TRAINED:
        model_dir = trained(name)[0]
        inputs, t, u = run_inputs(name, reference_run, "low")
        blocks = [list(u[int(np.searchsorted(t, k * 0.01 - 1e-12))]) for k in range(41)]
        sub = {"kind": "steps", "fmu": str(native(name)[0]), "start": start_values(model_dir), "steps": [0.002],
               "t_end": 0.4, "block": 0.01, "inputs": inputs, "u_blocks": blocks}
        requests.append(sub)
        alone.append(np.array(run_json(FMU_HOST, sub, tmp_path)["runs"]["0.002"]["y"]))
    both = run_json(FMU_HOST, {"kind": "two", "fmus": [r["fmu"] for r in requests], "requests": requests,
                                       "step": 0.002, "t_end": 0.4}, tmp_path)
    assert both["outputs"][0] != both["outputs"][1]
    for k in range(2):
        assert np.array_equal(np.array(both["y"][k]), alone[k])


#: valgrind repetitions in the suite; benchmarks/targets.py runs the same checks 10,000 times
VALGRIND_CYCLES = 500
VALGRIND_STATES = 1_000


@pytest.mark.skipif(not have_valgrind(), reason="valgrind is not installed")
def test_instantiate_free_cycles_leak_nothing(native, trained, c_host, tmp_path):
    valgrind_cycles(c_host, native("four_bar")[0], start_values(trained("four_bar")[0]), tmp_path, VALGRIND_CYCLES)


# ---------------------------------------------------------------------------- CLI and errors


def test_cli_exports_a_native_fmu(trained, tmp_path, capsys):
    from fmpy.validation import validate_fmu

    from mc2fmu.cli import main

    out = tmp_path / "fb.fmu"
    assert main(["export", str(trained("four_bar")[0]), "-o", str(out), "--backend", "native", "--fmi", "3",
                 "--interface", "both"]) == 0
    printed = capsys.readouterr().out
    assert "native backend, FMI 3 both" in printed and "C code matches the model" in printed
    assert validate_fmu(str(out)) == []


def test_missing_compiler_is_a_clear_error(trained, tmp_path, monkeypatch, capsys):
    from mc2fmu.cli import main

    monkeypatch.setenv("CC", "no-such-cc-mc2fmu")
    out = tmp_path / "x.fmu"
    assert main(["export", str(trained("four_bar")[0]), "-o", str(out), "--backend", "native"]) == 2
    err = capsys.readouterr().err
    assert "needs a C compiler" in err and "no-such-cc-mc2fmu" in err and "--backend python" in err
    assert not out.exists()


def test_compile_errors_show_the_first_lines(tmp_path):
    from mc2fmu.errors import ExportError
    from mc2fmu.fmu.backends.native import compile_library

    bad = tmp_path / "bad.c"
    bad.write_text("int f(void) { return undefined_thing; }\n")
    with pytest.raises(ExportError, match=r"C compiler failed(.|\n)*undefined_thing"):
        compile_library(bad, tmp_path / "bad.so")


# ---------------------------------------------------------------------------- an adversarial host


def _misuse(native, trained, tmp_path, case, interface="cs"):
    model_dir = trained("four_bar")[0]
    fmu = native("four_bar", 2, interface)[0]
    return run_misuse(FMPY_SIM, fmu, model_dir, case, tmp_path, both=interface == "both")


@pytest.mark.parametrize("case, call, message", [
    ("huge_step", "doStep h=1e20", "use smaller communication steps"),
    ("wrong_time", "doStep from -5", "a communication step starts where the previous one ended"),
    ("wrong_time", "doStep from 10", "the FMU is at t = 0"),
    ("nan_start", "setupExperiment NaN", "start time nan refused"),
    ("fixed_after_init", "set q_start after init", "q_start[1] cannot be changed after initialisation"),
    ("after_terminate", "doStep after terminate", "fmi2DoStep refused in terminated"),
    ("phases", "exitInitializationMode first", "fmi2ExitInitializationMode refused in instantiated"),
    ("phases", "enterInitializationMode twice", "fmi2EnterInitializationMode refused in step complete"),
])
def test_misuse_is_refused_with_a_message(native, trained, tmp_path, case, call, message):
    """What an adversarial FMI 2 host does: an error status and a message that says why, never
    OK with garbage or a hang (h = 1e20 used to overflow the grid index and return OK)."""
    calls, text = _misuse(native, trained, tmp_path, case)
    assert calls[call] != "ok" and "error" in calls[call].lower(), calls
    assert message in text, text


def test_legal_calls_around_the_misuse_still_work(native, trained, tmp_path):
    calls, _ = _misuse(native, trained, tmp_path, "wrong_time")
    assert calls["doStep 0 -> 0.01"] == "ok"
    calls, _ = _misuse(native, trained, tmp_path, "after_terminate")
    assert calls["doStep"] == "ok" and calls["terminate"] == "ok"


def test_serialized_state_cannot_be_forged(native, trained, tmp_path):
    """Bit flips fail the checksum; a forged blob with a valid checksum but a grid index of
    INT64_MIN (used to step for minutes) or t0 = NaN (used to step on NaN) fails the field
    checks; a truncated blob and a co-simulation state loaded into model exchange are refused."""
    calls, text = _misuse(native, trained, tmp_path, "state", "both")
    assert calls["intact"] == "ok" and calls["intact: set"] == "ok" and calls["intact: step"] == "ok", calls
    refused = [k for k in calls if k.startswith(("bit flip", "forged", "truncated", "co-simulation state"))
               and ":" not in k]
    assert len(refused) == 7, calls
    assert all(calls[k] != "ok" for k in refused), calls
    assert text.count("checksum does not match") == 3
    assert "grid index that does not match its time" in text and "a non-finite time" in text
    assert "other interface" in text and "bytes refused" in text


@pytest.mark.skipif(not have_valgrind(), reason="valgrind is not installed")
def test_corrupted_states_under_valgrind(native, trained, c_host, tmp_path):
    valgrind_states(c_host, native("four_bar")[0], start_values(trained("four_bar")[0]), tmp_path, VALGRIND_STATES)


def test_an_input_set_after_initialisation_drives_the_first_step(native, trained, tmp_path):
    """Native backend: the first grid step uses the input set before it is taken, so a host
    that sets the input only after exitInitializationMode gets the same run as one that set it
    before (it used to differ by 2.7e-4 in q on a held-out run), and the run differs from one
    without that input.  (The python backend: tests/test_export.py.)"""
    model_dir = trained("four_bar")[0]
    fmu = native("four_bar")[0]
    start = start_values(model_dir)
    req = {"kind": "misuse", "case": "input_after_init", "fmu": str(fmu), "start": start, "inputs": ["tau"]}
    with_u = run_json(FMPY_SIM, {**req, "u": [0.8]}, tmp_path)["runs"]
    without = run_json(FMPY_SIM, {**req, "u": [0.0]}, tmp_path)["runs"]
    assert np.array_equal(np.array(with_u[0]), np.array(with_u[1]))
    assert np.abs(np.array(with_u[0]) - np.array(without[0])).max() > 1e-6


# ---------------------------------------------------------------------------- directional derivatives


def _reference_unknowns(art, torch_model, q, qd, u) -> np.ndarray:
    """The FMU's unknowns (outputs, der(q), der(qd), the motion outputs) in its order, from the
    Python side: poses from numpy's decoder and rotations, the acceleration from torch, the
    envelope's distance, the motion outputs from numpy's decoder and mc2fmu.models.motion."""
    import torch

    from mc2fmu.mechanics.natural import poses_from_nc
    from mc2fmu.mechanics.rotations import matrix_to_quaternion
    from mc2fmu.mechanics.variants import parameter_vector
    from mc2fmu.models import motion

    origin, rotation = poses_from_nc(art.layout, art.model.decode(q[None]))
    pose = np.concatenate([origin[0], matrix_to_quaternion(rotation[0])], axis=1).ravel()
    with torch.no_grad():
        acc = torch_model.acceleration(*(torch.as_tensor(a[None]) for a in (q, qd, u)))[0].numpy()
    env = art.envelope.distance(q[None], qd[None], u[None])[0]
    x, J, _ = art.model.decode_jh(q[None])
    geometry = motion.MotionGeometry.of(art.layout, art.model.springs.D, art.model.springs.e, art.model.springs.laws)
    moving = motion.evaluate(geometry, x, J[0] @ qd, parameter_vector(art.mechanism))[0]
    return np.concatenate([pose, q, qd, [env], qd, acc, moving])


def _finite_difference_jacobian(f, z: np.ndarray, h: float = 1e-4) -> np.ndarray:
    """Five-point central differences (error O(h^4 f^(5)) + rounding/h: the identified
    friction's tanh(v / p) with a small p needs h well under p)."""
    cols = []
    for j in range(len(z)):
        e = np.zeros_like(z)
        e[j] = h
        cols.append((8 * (f(z + e) - f(z - e)) - (f(z + 2 * e) - f(z - 2 * e))) / (12 * h))
    return np.array(cols).T


def _check_directional(model_dir: Path, fmu: Path, tmp_path: Path, points: int = 4, qd_factor: float = 1.0) -> float:
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    art = load_artifact(model_dir)
    m = art.dof
    pts = sample_points(art.envelope, art.model, points, seed=11)
    q = np.concatenate([p["q"] for p in pts])
    qd = np.concatenate([p["qd"] for p in pts]) * qd_factor
    u = np.concatenate([p["u"] for p in pts]) if art.n_u else np.zeros((points, 0))
    res = run_json(FMPY_SIM, {"kind": "jacobian", "fmu": str(fmu), "start": start_values(model_dir),
                              "states": np.hstack([q, qd]).tolist(), "u": u.tolist()}, tmp_path)
    assert res["knowns"][:2 * m] == [f"q[{i + 1}]" for i in range(m)] + [f"qd[{i + 1}]" for i in range(m)]
    torch_model = from_runtime(art.model)

    def f(z):
        return _reference_unknowns(art, torch_model, z[:m], z[m:2 * m], z[2 * m:])

    worst = 0.0
    for k in range(points):
        z = np.concatenate([q[k], qd[k], u[k]])
        ref_value = f(z)
        assert np.allclose(res["values"][k], ref_value, rtol=1e-10, atol=1e-10)  # the FMU's point is this point
        J, J_fd = np.array(res["J"][k]), _finite_difference_jacobian(f, z)
        assert J.shape == J_fd.shape == (len(res["unknowns"]), len(res["knowns"]))
        # norm-wise per unknown: |dd - fd| against the largest derivative of that unknown (and 1)
        scale = np.maximum(1.0, np.abs(J_fd).max(axis=1, keepdims=True))
        worst = max(worst, float((np.abs(J - J_fd) / scale).max()))
        assert np.any(np.abs(J[-m:, :m]) > 1e-3)  # d qdd / dq is not trivially zero
    return worst


@pytest.mark.parametrize("name,fmi", [("four_bar", 2), ("four_bar", 3), ("two_bar", 2), ("macpherson", 3),
                                      ("macpherson_nl", 2)])
def test_directional_derivatives_equal_finite_differences_of_torch(native, trained, tmp_path, name, fmi):
    """fmi2/fmi3GetDirectionalDerivative (complex step through the C code) of every output and
    state derivative along every state and input, against five-point differences of the torch
    acceleration and numpy's poses and motion outputs: 1e-8 relative (1 and 2 DOF, planar and
    spatial; macpherson_nl: a learned spring law, its potential in the energy output)."""
    assert _check_directional(trained(name)[0], native(name, fmi, "me")[0], tmp_path) <= 1e-8


def test_directional_derivatives_with_springs_and_dampers(spring_four_bar, tmp_path):
    """The spring-dampers' J^T f(x, J qd) differentiated too (velocities 3x the envelope's)."""
    model_dir, _, _, fmu = spring_four_bar
    assert _check_directional(model_dir, fmu(2, "me")[0], tmp_path, qd_factor=3.0) <= 1e-8


def test_the_self_check_allows_the_round_off_of_a_solve_with_an_ill_conditioned_mass_matrix(trained):
    """The accelerations solve M_m qdd = f, so two correct codes differ by up to about
    n eps cond(M_m): an acceleration 5e-12 off (relative) is refused where M_m is well
    conditioned and accepted where its condition number is 1e4 (the tolerance 16 eps cond =
    3.6e-11 there); a decoder 5e-12 off is refused either way."""
    from mc2fmu.fmu.backends import native as nb
    from mc2fmu.mechanics.natural import poses_from_nc
    from mc2fmu.mechanics.rotations import matrix_to_quaternion
    from mc2fmu.models.artifact import load_artifact

    art = load_artifact(trained("four_bar")[0])
    records = [r for r in nb._selftest_records(art, 2) if r["kind"] == 0]

    def excess(key: str, condition: float) -> float:
        outputs = []
        for rec in records:
            rec["condition"] = condition
            out = {k: np.array(v, dtype=float) for k, v in rec["ref"].items()}
            origin, rotation = poses_from_nc(art.layout, out["x_value"][None])
            out["pose"] = np.concatenate([origin[0], matrix_to_quaternion(rotation[0])], axis=1).ravel()
            out[key] = out[key] + 5e-12 * max(1.0, np.abs(out[key]).max())
            outputs.append(out)
        worst, excess = nb._compare_selftest(art, records, outputs)
        label = {"qdd": "rhs", "x": "decoder"}[key]
        assert worst[label] == pytest.approx(5e-12, rel=1e-3)
        return excess[label]

    assert excess("qdd", 1.0) > 1.0 and excess("qdd", 1e4) < 1.0
    assert excess("x", 1.0) > 1.0 and excess("x", 1e4) > 1.0


@pytest.mark.parametrize("fmi", [2, 3])
def test_directional_derivative_capability_and_dependencies(native, trained, fmi):
    """providesDirectionalDerivative(s) in model exchange, and ModelStructure lists what each
    output and state derivative depends on; fmpy validates it."""
    from fmpy import read_model_description
    from fmpy.validation import validate_fmu

    fmu = native("two_bar", fmi, "me")[0]
    assert validate_fmu(str(fmu)) == []
    md = read_model_description(str(fmu))
    with zipfile.ZipFile(fmu) as z:
        me = ElementTree.fromstring(z.read("modelDescription.xml")).find("ModelExchange")
    assert me.get("providesDirectionalDerivative" if fmi == 2 else "providesDirectionalDerivatives") == "true"
    names = {v: v.name for v in md.modelVariables}
    deps = {names[u.variable]: sorted(names[d] for d in u.dependencies) for u in md.outputs + md.derivatives}
    states = ["q[1]", "q[2]", "qd[1]", "qd[2]"]
    assert deps["der(q[2])"] == ["qd[2]"]
    assert deps["der(qd[1])"] == sorted(states + [v.name for v in md.modelVariables if v.causality == "input"])
    assert deps["q[1]"] == ["q[1]"]
    first_pose = next(v.name for v in md.modelVariables if v.causality == "output")
    assert deps[first_pose] == ["q[1]", "q[2]"]
    # value references count from 1: no dependencies list names 0 (OMSimulator reads FMI 3's
    # value reference 0 there as "none" and refuses the FMU), read from the XML itself
    with zipfile.ZipFile(fmu) as z:
        root = ElementTree.fromstring(z.read("modelDescription.xml"))
    refs = [int(e.get("valueReference")) for e in root.find("ModelVariables")] if fmi == 3 else \
        [int(e.get("valueReference")) for e in root.iter("ScalarVariable")]
    assert refs == list(range(1, len(refs) + 1))
    listed = [int(d) for e in root.find("ModelStructure").iter() for d in e.get("dependencies", "").split()]
    assert listed and 0 not in listed


def test_the_self_checks_local_pca_start_is_held_to_its_solves_tolerance():
    """The local-PCA start solves encode(V z + mu) = q0 by secant steps to START_TOLERANCE (a
    MacPherson's C start stopped a step from numpy's, 1.2e-11 apart): the self-check allows
    that on the start, and only rounding (1e-12) on the step and the outputs."""
    from mc2fmu.fmu.backends.native import TOLERANCE, _compare_selftest
    from mc2fmu.models.local_linear import START_TOLERANCE

    ref = {"start": np.array([3.0, 0.4, -0.2, 0.1]), "next": np.array([3.0, 0.41, -0.2, 0.1]),
           "observed": np.array([0.5, 0.2])}
    rec = {"kind": 2, "ref": ref}

    def excess(key, by):
        out = {k: v.copy() for k, v in ref.items()}
        out[key][1] += by
        return _compare_selftest(None, [rec], [out])[1]

    assert excess("start", 0.5 * START_TOLERANCE * 3.0)["local-pca start"] <= 1.0
    assert excess("start", 3.0 * START_TOLERANCE * 3.0)["local-pca start"] > 1.0
    assert excess("next", 0.5 * START_TOLERANCE * 3.0)["local-pca step"] > 1.0
    assert excess("next", 0.5 * TOLERANCE * 3.0)["local-pca step"] <= 1.0
