"""Shared fixtures: a small analytic mechanism and its pose exports.

The analytic motion is a rigid body spinning and translating with closed-form position,
rotation, velocity and angular velocity, so checks have an independent reference.
"""

from __future__ import annotations

import os
import pickle
import textwrap
from pathlib import Path

# pytest-xdist runs the suite in one worker process per core: one torch / BLAS thread each
# (read when torch is first imported, and inherited by the commands the tests start)
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
# The suite's native exports build this machine's binary only: the other platforms' compilers
# and emulated self-checks would take several seconds of each of its many exports.
# test_platforms.py builds every platform's binaries, and checks the default without this.
from mc2fmu.fmu.platforms import host_name  # noqa: E402

os.environ.setdefault("MC2FMU_PLATFORMS", host_name())
# the suite's trainings (tiny, run by pytest-xdist workers and their subprocesses side by side)
# on one torch thread each: two threads per training would oversubscribe the cores
os.environ.setdefault("MC2FMU_TRAIN_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from filelock import FileLock  # noqa: E402

from mc2fmu.data.poses import write_run  # noqa: E402


def shared_dir(tmp_path_factory, name: str) -> Path:
    """A folder every worker of this test run shares (the workers' common temporary root
    under pytest-xdist, this run's own otherwise): what one worker makes there, the others
    reuse, under a :class:`FileLock`."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / f"shared-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder

MECHANISM_TOML = textwrap.dedent(
    """\
    name = "toy"
    gravity = [0.0, -9.81, 0.0]

    [[bodies]]
    name = "arm"
    mass = 2.0
    com = [0.2, 0.05, 0.0]
    inertia = [0.01, 0.03, 0.035]

    [[bodies]]
    name = "rod"
    mass = 1.3
    com = [0.0, 0.0, 0.0]
    inertia = [[0.2, 0.0, 0.0], [0.0, 0.2, 0.0], [0.0, 0.0, 0.0]]

    [[inputs]]
    name = "tau"
    kind = "torque"
    body = "arm"
    direction = [0, 0, 1]

    [[inputs]]
    name = "F"
    kind = "force"
    body = "rod"
    direction = [0, 1, 0]
    point = [0.0, 0.0, 0.5]
    """
)


def rotation_about(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation matrices (n, 3, 3) about a unit axis by angles (n,)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3) + s * K + (1 - c) * (K @ K)


def analytic_motion(n: int = 201, dt: float = 1e-2):
    """Two bodies in closed form: origins, rotations, COM velocities, angular velocities, inputs."""
    t = np.arange(n) * dt
    ax0, ax1 = np.array([0.0, 0.0, 1.0]), np.array([1.0, 2.0, 0.5]) / np.linalg.norm([1.0, 2.0, 0.5])
    th0, th0d = 0.8 * np.sin(2.0 * t), 1.6 * np.cos(2.0 * t)
    th1, th1d = 0.5 * t + 0.3 * np.sin(3.0 * t), 0.5 + 0.9 * np.cos(3.0 * t)
    R = np.stack([rotation_about(ax0, th0), rotation_about(ax1, th1)], axis=1)
    omega = np.stack([th0d[:, None] * ax0, th1d[:, None] * ax1], axis=1)
    # body origins move on smooth curves; COM velocity = origin velocity + omega x (R com)
    o0 = np.stack([0.1 * np.sin(t), 0.2 * np.cos(t), 0 * t], 1)
    o0d = np.stack([0.1 * np.cos(t), -0.2 * np.sin(t), 0 * t], 1)
    o1 = np.stack([1 + 0.3 * t, 0.5 * np.sin(2 * t), 0.1 * np.cos(t)], 1)
    o1d = np.stack([0.3 + 0 * t, np.cos(2 * t), -0.1 * np.sin(t)], 1)
    origin = np.stack([o0, o1], axis=1)
    coms = [np.array([0.2, 0.05, 0.0]), np.zeros(3)]
    v_com = np.stack(
        [od + np.cross(omega[:, k], R[:, k] @ coms[k]) for k, od in enumerate([o0d, o1d])], axis=1
    )
    u = np.stack([np.sin(t), 3.0 * np.cos(0.5 * t)], axis=1)
    return dict(t=t, origin=origin, rotation=R, v_com=v_com, omega=omega, u=u)


@pytest.fixture()
def toy_mechanism(tmp_path: Path) -> Path:
    path = tmp_path / "toy.toml"
    path.write_text(MECHANISM_TOML)
    return path


@pytest.fixture()
def toy_run(tmp_path: Path) -> Path:
    m = analytic_motion()
    path = tmp_path / "run.csv"
    write_run(path, m["t"], ["arm", "rod"], m["origin"], m["rotation"], ["tau", "F"], m["u"])
    return path


# ---------------------------------------------------------------------------- Exudyn reference data


_RUN_CACHE: dict[tuple[str, str], dict] = {}


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory):
    """``reference_run(name, excitation)``: simulate once per test run (across the xdist
    workers: the run and the engine's arrays are kept in a shared folder), write the run file
    and ``mechanism.toml``; returns the engine's arrays plus ``path``."""
    pytest.importorskip("exudyn")
    from examples.reference import write_run_file

    folder = shared_dir(tmp_path_factory, "reference")

    def get(name: str, excitation: str = "train") -> dict:
        key = (name, excitation)
        if key not in _RUN_CACHE:
            saved = folder / f"{name}-{excitation}.pkl"
            with FileLock(str(folder / f"{name}.lock")):  # one writer per mechanism folder
                if saved.exists():
                    run = pickle.loads(saved.read_bytes())
                else:
                    run = write_run_file(name, excitation, folder)
                    saved.write_bytes(pickle.dumps(run))
            _RUN_CACHE[key] = run
        return _RUN_CACHE[key]

    return get


@pytest.fixture(scope="session")
def spinning_pendulum(tmp_path_factory) -> tuple[Path, Path, np.ndarray]:
    """A compound pendulum that turns full revolutions (~5 in 3 s), integrated with scipy.

    Returns the mechanism (JSON), the run (CSV) and the reference angle.
    """
    import json

    from scipy.integrate import solve_ivp

    m, l, Jc, g = 1.5, 0.4, 0.02, 9.81
    mech = {"name": "spin", "gravity": [0, -g, 0],
            "bodies": [{"name": "arm", "mass": m, "com": [l, 0, 0], "inertia": [0.001, Jc, Jc]}],
            "inputs": [{"name": "tau", "kind": "torque", "body": "arm", "direction": [0, 0, 1]}]}
    Jp = Jc + m * l * l
    t = np.arange(3001) * 1e-3
    tau = np.sin(1.3 * t)
    sol = solve_ivp(lambda s, y: [y[1], (-m * g * l * np.cos(y[0]) + np.sin(1.3 * s)) / Jp], (0, 3),
                    [-np.pi / 2, 10.0], t_eval=t, rtol=1e-11, atol=1e-12, method="DOP853")
    theta = sol.y[0]
    folder = tmp_path_factory.mktemp("spin")
    (folder / "spin.json").write_text(json.dumps(mech))
    run = folder / "spin.csv"
    write_run(run, t, ["arm"], np.zeros((len(t), 1, 3)), rotation_about([0, 0, 1], theta)[:, None], ["tau"], tau[:, None])
    return folder / "spin.json", run, theta


# ---- briefly trained models and their native FMUs (test_native, test_importers)

TRAINED = ["four_bar", "slider_crank"]
BRIEF_LBFGS = {"four_bar": 100, "slider_crank": 100}
#: the barely trained models' extra options: four_bar_friction with identified terms (macpherson_nl's
#: recorded strut gets its learned law from the mechanism file)
BARELY = {"four_bar_friction": {"coords": ("crank.R11",), "identify": "default", "identify_iters": 10}}


@pytest.fixture(scope="session")
def trained(reference_run, tmp_path_factory):
    """``trained(name)`` -> (model_dir, mechanism_path, train_run): four_bar and slider_crank
    trained briefly (1 DOF); two_bar (2 DOF), macpherson, four_bar_friction (identified terms)
    and macpherson_nl (a learned spring law) barely (export checks only)."""
    cache: dict[str, tuple] = {}
    root = shared_dir(tmp_path_factory, "native-models")  # trained once across the xdist workers

    def get(name: str):
        if name not in cache:
            run = reference_run(name, "train")
            mech = Path(run["path"]).parent.parent / "mechanism.toml"
            with FileLock(str(root / f"{name}.lock")):
                if not (root / name / "model.json").exists():
                    _fit_briefly(name, mech, run["path"], root / name)
            cache[name] = (root / name, mech, run["path"])
        return cache[name]

    return get


def _fit_briefly(name: str, mech: Path, run: str, out: Path) -> None:
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    # L-BFGS iterations: after 40 the slider-crank's and (with L_curv) the four_bar's models left
    # their envelope before 1 s of the training run (the parity tests compare at least 1 s); after
    # 100 they stay near it for the whole 10 s
    cfg = (TrainConfig(dof=1, samples=300, adam_epochs=40, lbfgs_iters=BRIEF_LBFGS[name]) if name in TRAINED else
           TrainConfig(dof=2 if name == "two_bar" else 1, samples=64, adam_epochs=2, lbfgs_iters=2,
                       **BARELY.get(name, {})))
    fit(mech, [run], cfg, out)


@pytest.fixture(scope="session")
def native(trained, tmp_path_factory):
    """``native(name, fmi, interface)`` -> (fmu_path, export summary), exported once."""
    from mc2fmu.fmu.export import export_fmu

    cache: dict[tuple, tuple] = {}
    root = tmp_path_factory.mktemp("native-fmus")

    def get(name: str, fmi: int = 2, interface: str = "cs"):
        key = (name, fmi, interface)
        if key not in cache:
            fmu = root / f"{name}-fmi{fmi}-{interface}.fmu"
            cache[key] = (fmu, export_fmu(trained(name)[0], fmu, "native", fmi, interface))
        return cache[key]

    return get


# ---- CI: no silent skips

NO_SKIPS = os.environ.get("MC2FMU_NO_SKIPS") == "1"


def _no_skip(report) -> None:
    """With ``MC2FMU_NO_SKIPS=1`` (CI sets it) a skipped test or module is a failure: a missing
    engine, importer, compiler or valgrind must not pass unnoticed."""
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, and MC2FMU_NO_SKIPS=1 forbids skips: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _no_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _no_skip(outcome.get_result())
