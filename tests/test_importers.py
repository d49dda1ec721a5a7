"""mc2fmu FMUs in the co-simulation engines other than fmpy: libcosim (the Open Simulation
Platform's engine, ``libcosimpy``) and Ecos (``ecospy``), in process and out of process.

Each engine runs the FMU on a held-out run's input with the input of row k applied before
step k, and must give fmpy's outputs to 1e-12 (they agree bit for bit: the engines call the
same FMI functions in the same order).  libcosim also runs an SSP file that connects two
mc2fmu FMUs through a linear transformation, checked against the same coupling done by hand
in fmpy.  Every engine runs in a fresh process (``cosim_host.py``).

The engines are installed by the test extra; Ecos also needs Debian's ``libtbb12`` (``.ci/run``
installs it).  Without them these tests skip, unless ``MC2FMU_NO_SKIPS=1`` (CI sets
it) makes a missing engine a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np
import pytest

from tests.fmu_helpers import run_json, start_values

HOST = Path(__file__).parent / "cosim_host.py"
N_STEPS = 500
H = 1e-3

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="the native backend needs gcc")


def _engine_available(module: str) -> str | None:
    """None when ``module`` imports, else why not (a missing shared library, say)."""
    try:
        __import__(module)
    except Exception as exc:  # ecospy raises OSError when libtbb.so.12 is missing
        return f"{module} does not load: {exc}"
    return None


def _require(module: str) -> None:
    why = _engine_available(module)
    if why is None:
        return
    if os.environ.get("MC2FMU_NO_SKIPS") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def python_fmu(trained, tmp_path_factory):
    from mc2fmu.fmu.export import export_fmu

    fmu = tmp_path_factory.mktemp("importer-fmus") / "four_bar-python.fmu"
    export_fmu(trained("four_bar")[0], fmu, "python", 2, "cs")
    return fmu


@pytest.fixture(scope="module")
def drive(reference_run):
    """The ``low`` run's input (never trained on) for N_STEPS steps."""
    run = reference_run("four_bar", "low")
    u = np.atleast_2d(np.asarray(run["u"]).T).T[:N_STEPS]
    return [[float(v) for v in row] for row in u]


def _run(engine: str, fmu: Path, start: dict, u: list, tmp_path: Path, **extra) -> dict:
    req = {"kind": engine, "engine": engine, "fmu": str(fmu), "start": start, "inputs": ["tau"], "u": u,
           "h": H, "n_steps": N_STEPS, **extra}
    return run_json(HOST, req, tmp_path, timeout=600)


CASES = [  # (engine, module, backend, fmi, out of process)
    ("libcosim", "libcosimpy", "native", 2, False),
    ("libcosim", "libcosimpy", "python", 2, False),
    ("ecos", "ecospy", "native", 2, False),
    ("ecos", "ecospy", "native", 3, False),
    ("ecos", "ecospy", "native", 2, True),
    ("ecos", "ecospy", "native", 3, True),
    ("ecos", "ecospy", "python", 2, False),
]


@pytest.mark.parametrize("engine, module, backend, fmi, proxy", CASES,
                         ids=[f"{e}-{b}-fmi{f}" + ("-proxy" if p else "") for e, _, b, f, p in CASES])
def test_engine_gives_fmpys_result(engine, module, backend, fmi, proxy, trained, native, python_fmu,
                                   drive, tmp_path):
    _require(module)
    fmu = python_fmu if backend == "python" else native("four_bar", fmi, "cs")[0]
    start = start_values(trained("four_bar")[0])
    ref = _run("fmpy", fmu, start, drive, tmp_path)
    got = _run(engine, fmu, start, drive, tmp_path, proxy=proxy)
    assert got["outputs"] == ref["outputs"]
    y_ref, y = np.array(ref["y"]), np.array(got["y"])
    assert y.shape == (N_STEPS, len(ref["outputs"])) and np.isfinite(y).all()
    assert np.abs(y - y_ref).max() <= 1e-12
    # the run moved (a frozen FMU would agree with itself too)
    iq = ref["outputs"].index("q[1]")
    assert np.ptp(y_ref[:, iq]) > 1e-3


def _ssp(directory: Path, fmu: Path, start: dict, gain: float, offset: float) -> Path:
    """An SSP (unpacked: ``SystemStructure.ssd`` + ``resources/``) with two instances of ``fmu``:
    ``plant`` runs free, ``follower.tau = gain * plant.q[1] + offset``; both start from ``start``."""
    (directory / "resources").mkdir(parents=True)
    shutil.copy(fmu, directory / "resources" / "model.fmu")

    def component(name: str, connectors: list[tuple[str, str]]) -> str:
        conns = "".join(f'<ssd:Connector name={quoteattr(n)} kind="{k}"><ssc:Real/></ssd:Connector>'
                        for n, k in connectors)
        params = "".join(f'<ssv:Parameter name={quoteattr(k)}><ssv:Real value="{v!r}"/></ssv:Parameter>'
                         for k, v in start.items())
        return (f'<ssd:Component name="{name}" source="resources/model.fmu"><ssd:Connectors>{conns}</ssd:Connectors>'
                f'<ssd:ParameterBindings><ssd:ParameterBinding><ssd:ParameterValues>'
                f'<ssv:ParameterSet version="1.0" name="{name}-start"><ssv:Parameters>{params}</ssv:Parameters>'
                f'</ssv:ParameterSet></ssd:ParameterValues></ssd:ParameterBinding></ssd:ParameterBindings>'
                f'</ssd:Component>')

    ssd = f"""<?xml version="1.0" encoding="UTF-8"?>
<ssd:SystemStructureDescription xmlns:ssc="http://ssp-standard.org/SSP1/SystemStructureCommon"
    xmlns:ssd="http://ssp-standard.org/SSP1/SystemStructureDescription"
    xmlns:ssv="http://ssp-standard.org/SSP1/SystemStructureParameterValues" version="1.0" name="coupled">
  <ssd:System name="coupled">
    <ssd:Elements>
      {component("plant", [("q[1]", "output")])}
      {component("follower", [("tau", "input")])}
    </ssd:Elements>
    <ssd:Connections>
      <ssd:Connection startElement="plant" startConnector="q[1]" endElement="follower" endConnector="tau">
        <ssc:LinearTransformation factor="{gain!r}" offset="{offset!r}"/>
      </ssd:Connection>
    </ssd:Connections>
  </ssd:System>
  <ssd:DefaultExperiment startTime="0" stopTime="{N_STEPS * H!r}"/>
</ssd:SystemStructureDescription>
"""
    (directory / "SystemStructure.ssd").write_text(ssd)
    return directory


def test_libcosim_runs_an_ssp_of_two_connected_fmus(trained, native, tmp_path):
    """libcosim reads the SSP (components, parameter bindings, a connection with a linear
    transformation) and steps both FMUs as fmpy does when the follower's input is the
    transformed plant output of the previous communication point."""
    _require("libcosimpy")
    fmu = native("four_bar", 2, "cs")[0]
    start = start_values(trained("four_bar")[0])
    gain, offset = -2.0, 0.25
    ssp = _ssp(tmp_path / "coupled", fmu, start, gain, offset)
    got = run_json(HOST, {"kind": "ssp", "engine": "libcosim", "ssp": str(ssp), "h": H, "n_steps": N_STEPS,
                          "ssp_outputs": ["plant.q[1]", "follower.q[1]", "follower.tau"]}, tmp_path, timeout=600)
    y = np.array(got["y"])

    plant = _run("fmpy", fmu, start, [[0.0]] * N_STEPS, tmp_path)
    iq = plant["outputs"].index("q[1]")
    q_plant = np.array([plant["y0"][iq]] + [row[iq] for row in plant["y"]])
    tau = gain * q_plant[:-1] + offset  # the plant's output at the start of each step
    follower = _run("fmpy", fmu, start, [[v] for v in tau], tmp_path)
    q_follower = np.array([row[iq] for row in follower["y"]])

    assert np.abs(y[:, 0] - q_plant[1:]).max() <= 1e-12
    assert np.abs(y[:, 2] - tau).max() <= 1e-12
    assert np.abs(y[:, 1] - q_follower).max() <= 1e-12
    # the coupling acts: the follower does not move as the free plant does
    assert np.abs(q_follower - q_plant[1:]).max() > 1e-3
