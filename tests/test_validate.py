"""`mc2fmu validate` gives up on an FMU that hangs: its process (and whatever that started) is
stopped after the time limit and the command ends with an error that says how to allow more."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.test_files import _tiny_model


@pytest.fixture(scope="module")
def fmu_and_run(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(an FMU file carrying the tiny model, its mechanism, a run): the model description and
    the embedded model of an mc2fmu FMU, no binary (the FMU's process is replaced below)."""
    from mc2fmu.files import write_zip
    from mc2fmu.fmu.common import LOG_CATEGORIES, artifact_members, model_identifier
    from mc2fmu.fmu.description import fmu_variables, model_description_fmi2
    from mc2fmu.models.artifact import load_artifact

    folder = tmp_path_factory.mktemp("hung")
    model = _tiny_model(folder)
    art = load_artifact(model)
    xml = model_description_fmi2(fmu_variables(art), model_name=art.mechanism.name,
                                 model_identifier=model_identifier(art.mechanism.name),
                                 guid="{00000000-0000-4000-8000-000000000000}", description=art.description,
                                 generation_tool="tests", stop_time=art.stop_time, step_size=art.dt,
                                 log_categories=LOG_CATEGORIES)
    fmu = folder / "hung.fmu"
    write_zip(fmu, {"modelDescription.xml": xml, **artifact_members(model)})
    return fmu, folder / "toy.toml", folder / "run.csv"


HANG = """\
import subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(sys.argv[1], "w") as f:
    f.write(f"{__import__('os').getpid()} {helper.pid}")
time.sleep(120)  # doStep never returns
"""


@pytest.fixture()
def hanging_fmu_process(monkeypatch, tmp_path) -> Path:
    """Every FMU process hangs (as in an FMU whose doStep never returns) after starting a helper
    process of its own; returns the file where it writes both process ids."""
    import mc2fmu.fmu.runner as runner

    pids = tmp_path / "pids"
    monkeypatch.setattr(runner, "child_command", lambda request, result: [sys.executable, "-c", HANG, str(pids)])
    return pids


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for a parent that is not this process, e.g.
    init after the helper was orphaned, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _check_stopped(pids: Path) -> None:
    child, helper = (int(p) for p in pids.read_text().split())
    with pytest.raises(ProcessLookupError):  # reaped: neither running nor a zombie of ours
        os.kill(child, 0)
    deadline = time.monotonic() + 5
    while _running(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(helper), "the FMU process's own child was left running"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects processes in /proc")
def test_a_hung_fmu_is_stopped_after_the_timeout(fmu_and_run, hanging_fmu_process):
    from mc2fmu.errors import ValidationError
    from mc2fmu.validation.validate import validate_fmu

    fmu, mech, run = fmu_and_run
    start = time.monotonic()
    with pytest.raises(ValidationError) as exc:
        validate_fmu(fmu, mech, [str(run)], timeout=5.0)
    assert time.monotonic() - start < 60  # returned, long before the hung process (120 s) would have
    msg = str(exc.value)
    assert str(fmu) in msg and str(run) in msg and "5 s" in msg and "--timeout" in msg
    _check_stopped(hanging_fmu_process)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects processes in /proc")
def test_validate_cli_timeout_option(fmu_and_run, hanging_fmu_process, capsys):
    """`mc2fmu validate --timeout 5` on a hung FMU: exit code 2, an error line naming the
    option; the option is documented with its default."""
    from mc2fmu.cli import main

    fmu, mech, run = fmu_and_run
    start = time.monotonic()
    assert main(["validate", str(fmu), str(mech), str(run), "--timeout", "5"]) == 2
    assert time.monotonic() - start < 60  # returned, long before the hung process (120 s) would have
    err = capsys.readouterr().err
    assert any(line.startswith("error:") and "--timeout" in line and str(fmu) in line for line in err.splitlines()), err
    _check_stopped(hanging_fmu_process)

    from mc2fmu.validation.validate import TIMEOUT_BASE, TIMEOUT_PER_SIMULATED_SECOND

    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--timeout SECONDS" in text
    assert f"default: {TIMEOUT_BASE:g} s + {TIMEOUT_PER_SIMULATED_SECOND:g} x the run's simulated length" in text


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "x"])
def test_validate_cli_refuses_a_timeout_that_is_not_a_positive_number(fmu_and_run, hanging_fmu_process, capsys, value):
    from mc2fmu.cli import main

    fmu, mech, run = fmu_and_run
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(fmu), str(mech), str(run), f"--timeout={value}"])
    assert exc.value.code == 2 and "--timeout" in capsys.readouterr().err
    assert not hanging_fmu_process.exists()  # nothing was run
