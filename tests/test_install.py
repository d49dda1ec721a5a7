"""A non-editable install (a wheel built from this checkout, installed into a fresh virtual
environment) exports python and native FMUs that fmpy runs: the templates ship as package
data."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def see_running_site_packages(py: Path) -> None:
    """Let the virtual environment of ``py`` import what the running interpreter has installed:
    a ``.pth`` file in its site-packages lists the running environment's site-packages (and the
    user's, if enabled).  ``system_site_packages=True`` is not that: it gives the base
    interpreter's, which inside a virtual environment lack the dependencies.  The listed
    folders' own ``.pth`` files are not run, so an editable mc2fmu there stays invisible."""
    import site

    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    code = "import sysconfig; print(sysconfig.get_path('purelib')); print(sysconfig.get_path('platlib'))"
    own = set(subprocess.run([str(py), "-c", code], capture_output=True, text=True, check=True).stdout.split("\n"))
    for target in sorted(p for p in own if p):
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / "_running_site_packages.pth").write_text("".join(f"{f}\n" for f in folders if Path(f).is_dir()))


@pytest.mark.slow
def test_wheel_install_exports_and_validates_fmus(tmp_path, reference_run):
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run = reference_run("four_bar", "train")["path"]
    mech = Path(run).parent.parent / "mechanism.toml"
    train(mech, [run], TrainConfig(dof=1, samples=64, adam_epochs=2, lbfgs_iters=2), tmp_path / "m")

    # the wheel, built from a copy of the checkout's tracked files (no build artefacts, no out/)
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_bytes((ROOT / f).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True, text=True)
    wheel = next((tmp_path / "dist").glob("mc2fmu-*.whl"))

    # a venv that sees the installed dependencies but gets its own, non-editable mc2fmu
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    see_running_site_packages(py)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, text=True)
    code = ("import json, sys, mc2fmu, mc2fmu.fmu.common as c\n"
            "print(json.dumps({'package': mc2fmu.__file__, 'template': str(c.template_path('pythonfmu_slave.py.in')),"
            " 'native': str(c.template_path('native/mc2fmu_native.h'))}))")
    where = json.loads(subprocess.run([str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                                      check=True).stdout)
    site = str(env_dir)
    assert all(p.startswith(site) for p in where.values()), where  # not the checkout: the installed copy

    for backend in ("python", "native"):
        fmu = tmp_path / f"{backend}.fmu"
        proc = subprocess.run([str(env_dir / "bin" / "mc2fmu"), "export", str(tmp_path / "m"), "-o", str(fmu),
                               "--backend", backend], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        proc = subprocess.run([str(env_dir / "bin" / "mc2fmu"), "validate", str(fmu), str(mech), run, "--json"],
                              cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["model_description_problems"] == []
        assert result["runs"][0]["samples"] == 10001 and result["runs"][0]["stopped_at"] is not None
