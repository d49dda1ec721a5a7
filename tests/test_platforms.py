"""Native FMUs for Linux x86-64, Windows x86-64 and Linux aarch64.

Each platform's binary runs a 10 s experiment at 1 ms steps in a host program built for that
platform (``c_host/xhost.c``), under wine or qemu-user, and must give the Linux x86-64 binary's
outputs; what each binary links against is read by mc2fmu and compared with binutils' objdump.
The toolchains come from Debian (``.ci/run`` installs them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.errors import ExportError
from mc2fmu.fmu.platforms import ENV, PLATFORMS, available, inspect_binary, resolve
from tests.c_host.cross import build_xhost, library, run_xhost

CROSS = ("x86_64-windows", "aarch64-linux")
MISSING = [p.name for p in PLATFORMS.values() if p not in available()]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"toolchain or emulator missing for {', '.join(MISSING)} "
                                                      "(apt-get install gcc-mingw-w64-x86-64 wine64 "
                                                      "gcc-aarch64-linux-gnu qemu-user)")
#: outputs compared on the scale of their kind: a fixed pivot's position (1e-8 m of drift) is
#: compared with the mechanism's largest position, not with itself
KINDS = {"x": "position", "y": "position", "z": "position", "qw": "rotation", "qx": "rotation", "qy": "rotation",
         "qz": "rotation", "vx": "velocity", "vy": "velocity", "vz": "velocity", "wx": "angular velocity",
         "wy": "angular velocity", "wz": "angular velocity"}


@pytest.fixture(scope="module")
def every_platform(trained, tmp_path_factory):
    """``every_platform(name, fmi)`` -> an FMU of both interfaces with every platform's binary."""
    from mc2fmu.fmu.export import export_fmu

    root, cache = tmp_path_factory.mktemp("platform-fmus"), {}

    def get(name: str, fmi: int):
        if (name, fmi) not in cache:
            fmu = root / f"{name}-fmi{fmi}.fmu"
            cache[name, fmi] = (fmu, export_fmu(trained(name)[0], fmu, "native", fmi, "both", platforms="all"))
        return cache[name, fmi]

    return get


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    root = tmp_path_factory.mktemp("xhosts")
    return {p: build_xhost(p, root) for p in PLATFORMS}


def _kind(name: str) -> str:
    suffix = name.rsplit(".", 1)[-1]
    return KINDS.get(suffix, re.sub(r"\[\d+\]$", "", name))


@pytest.mark.parametrize("fmi", [2, 3])
@pytest.mark.parametrize("name", ["four_bar", "slider_crank"])
def test_every_platform_runs_like_linux_x86_64(every_platform, hosts, tmp_path, name, fmi):
    """FMI 2 and 3, co-simulation (doStep) and model exchange (RK4 through the derivatives):
    the Windows DLL under wine and the aarch64 library under qemu-user, each in its own
    platform's host, give the Linux x86-64 outputs over 10 s to 1e-10 of each quantity's
    largest value (positions, quaternions, q, qd, velocities, angular velocities, each energy), with
    a torque that moves the mechanism."""
    from fmpy import read_model_description

    fmu, summary = every_platform(name, fmi)
    assert list(summary["platforms"]) == list(PLATFORMS)
    md = read_model_description(str(fmu))
    inputs = [v.name for v in md.modelVariables if v.causality == "input"]
    outputs = [v.name for v in md.modelVariables if v.causality == "output"]
    assert inputs, "a mechanism with an input, so the input path runs on every platform"
    t = np.arange(10000) * 1e-3
    rows = np.stack([0.5 * np.sin(1.7 * t + k) for k in range(len(inputs))], axis=1)
    for me in (False, True):
        runs = {}
        for p in PLATFORMS:
            lib = library(fmu, tmp_path / p, p, fmi)
            runs[p] = run_xhost(p, hosts[p], lib, fmu, fmi=fmi, me=me, inputs=inputs, rows=rows, outputs=outputs)
        ref = runs["x86_64-linux"]
        assert np.isfinite(ref).all() and np.allclose(ref[:, 0], t + 1e-3)
        assert np.ptp(ref[:, 1 + outputs.index("q[1]")]) > 0.1, "the run moves"
        kinds = [_kind(n) for n in outputs]
        scale = {k: np.abs(ref[:, 1:][:, [i for i, kk in enumerate(kinds) if kk == k]]).max() for k in set(kinds)}
        for p in CROSS:
            diff = np.abs(runs[p][:, 1:] - ref[:, 1:]).max(axis=0)
            rel = {n: diff[i] / max(scale[kinds[i]], 1e-300) for i, n in enumerate(outputs)}
            worst = max(rel, key=rel.get)
            assert rel[worst] <= 1e-10, (p, "me" if me else "cs", worst, rel[worst])


def _objdump(binary: Path, tool: str) -> str:
    return subprocess.run([tool, "-p", str(binary)], capture_output=True, text=True, check=True).stdout


def test_what_each_binary_loads_agrees_with_objdump_and_the_stated_floors(every_platform, tmp_path):
    """mc2fmu's reading of each binary (the libraries it loads, its glibc floor) equals
    binutils' objdump; the Linux ones load libc and libm only, need glibc 2.2.5 (x86-64) and
    2.17 (aarch64: its first glibc), and the DLL imports KERNEL32.dll and msvcrt.dll only."""
    fmu, summary = every_platform("four_bar", 3)
    tools = {"x86_64-linux": "objdump", "aarch64-linux": "aarch64-linux-gnu-objdump",
             "x86_64-windows": "x86_64-w64-mingw32-objdump"}
    floors = {"x86_64-linux": "2.2.5", "aarch64-linux": "2.17", "x86_64-windows": None}
    for p in PLATFORMS:
        lib = library(fmu, tmp_path, p, 3)
        info = inspect_binary(lib.read_bytes())
        dump = _objdump(lib, tools[p])
        if PLATFORMS[p].os == "windows":
            assert info.needed == re.findall(r"DLL Name: (\S+)", dump)
            assert {n.lower() for n in info.needed} == {"kernel32.dll", "msvcrt.dll"}
        else:
            assert info.needed == re.findall(r"NEEDED\s+(\S+)", dump)
            assert sorted(info.needed) == ["libc.so.6", "libm.so.6"]
            versions = re.findall(r"GLIBC_([0-9.]+)", dump)
            assert info.glibc == max(versions, key=lambda v: tuple(map(int, v.split("."))))
        assert info.glibc == floors[p] == summary["platforms"][p]["glibc"]
        assert "fmi3InstantiateModelExchange" in info.exports and "fmi3DoStep" in info.exports


def test_the_default_export_carries_the_three_binaries_and_lists_them(trained, tmp_path):
    """``mc2fmu export`` with no --platforms (and no $MC2FMU_PLATFORMS) builds every platform
    whose toolchain is installed, here all three, in the folders each FMI version names, and
    prints them; ``validate`` lists them."""
    model, mech, run = trained("four_bar")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    folders = {2: ["aarch64-linux", "linux64", "win64"], 3: ["aarch64-linux", "x86_64-linux", "x86_64-windows"]}
    for fmi in (2, 3):
        fmu = tmp_path / f"m{fmi}.fmu"
        out = subprocess.run([sys.executable, "-m", "mc2fmu.cli", "export", str(model), "-o", str(fmu), "--fmi",
                              str(fmi)], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        with zipfile.ZipFile(fmu) as z:
            binaries = sorted(n.split("/")[1] for n in z.namelist() if n.startswith("binaries/"))
        assert binaries == folders[fmi]
        for p in PLATFORMS:
            assert re.search(rf"^\s+{p}\s+{PLATFORMS[p].folder(fmi)}\s", out.stdout, re.M), out.stdout
    val = subprocess.run([sys.executable, "-m", "mc2fmu.cli", "validate", str(fmu), str(mech), run],
                         capture_output=True, text=True, env=env)
    assert val.returncode == 0, val.stderr
    assert "binaries: x86_64-linux (glibc >= 2.2.5), x86_64-windows, aarch64-linux (glibc >= 2.17)" in val.stdout


def test_every_model_kind_passes_the_self_check_on_every_platform_within_the_glibc_floors(trained, reference_run,
                                                                                          tmp_path):
    """The emulated self-check covers the neural ODE's and the local-PCA ROM's own C code
    (their records of mc2fmu_selftest.c), and a sigmoid decoder whose exp the build binds to
    the old glibc symbol: every platform's binary of each stays within the stated floors."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.fmu.platforms import GLIBC_FLOOR
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.local_pca.config import LocalPcaConfig
    from mc2fmu.reducers.node.config import NodeReducerConfig

    chart, mech, run = trained("four_bar")
    configs = {"node": NodeReducerConfig(dof=1, from_model=str(chart), node_hidden=(8,), node_epochs=2),
               "local-pca": LocalPcaConfig(dof=1, from_model=str(chart)),
               "autoencoder": TrainConfig(dof=1, activation="sigmoid", samples=64, adam_epochs=2, lbfgs_iters=2)}
    own = {"node": "node step", "local-pca": "local-pca step", "autoencoder": "decoder"}
    for reducer, cfg in configs.items():
        out = tmp_path / reducer
        train(mech, [run], cfg, out, reducer=reducer)
        summary = export_fmu(out, tmp_path / f"{reducer}.fmu", "native", 2, "cs", platforms="all")
        for p in PLATFORMS:
            checked = summary["platforms"][p]["max_difference"]
            assert own[reducer] in checked and max(checked.values()) <= 1e-12, (reducer, p, checked)
            assert summary["platforms"][p]["glibc"] == GLIBC_FLOOR.get(p), (reducer, p)
        assert summary["compiler_warnings"] == []


def test_platform_choices_and_missing_toolchains_are_clear_errors(trained, tmp_path, monkeypatch):
    """Unknown names are refused before any work; FMI 2 folder names are accepted; a platform
    named without its compiler or emulator is an error naming the Debian package, and no FMU
    is written; ``auto`` then leaves it out."""
    import dataclasses

    from mc2fmu.fmu import platforms
    from mc2fmu.fmu.export import export_fmu

    with pytest.raises(ExportError, match="'mac64' is not a platform; choose from x86_64-linux"):
        resolve("linux64,mac64")
    assert [p.name for p in resolve("win64,linux64")] == ["x86_64-linux", "x86_64-windows"]
    assert [p.name for p in resolve("aarch64-linux")] == ["x86_64-linux", "aarch64-linux"]  # this machine's always
    monkeypatch.setenv(ENV, "linux64,mac64")
    with pytest.raises(ExportError, match=r"\$MC2FMU_PLATFORMS linux64,mac64: 'mac64' is not a platform"):
        resolve(None)
    assert PLATFORMS["aarch64-linux"].folder(2) == "aarch64-linux" and PLATFORMS["x86_64-windows"].folder(3) == \
        "x86_64-windows"
    with pytest.raises(ExportError, match="only the native backend"):
        export_fmu(trained("four_bar")[0], tmp_path / "p.fmu", "python", platforms="all")
    patched = dict(platforms.PLATFORMS)
    patched["x86_64-windows"] = dataclasses.replace(patched["x86_64-windows"], compiler="no-such-mingw-gcc")
    patched["aarch64-linux"] = dataclasses.replace(patched["aarch64-linux"], emulator=("no-such-qemu",))
    monkeypatch.setattr(platforms, "PLATFORMS", patched)
    fmu = tmp_path / "m.fmu"
    with pytest.raises(ExportError) as err:
        export_fmu(trained("four_bar")[0], fmu, "native", platforms="x86_64-windows,aarch64-linux")
    assert "apt-get install gcc-mingw-w64-x86-64" in str(err.value) and "apt-get install qemu-user" in str(err.value)
    assert not fmu.exists()
    monkeypatch.delenv(ENV, raising=False)
    assert [p.name for p in resolve(None)] == ["x86_64-linux"]  # auto: what is installed, this machine's always


def test_a_library_that_is_not_one_is_refused_cleanly(every_platform, tmp_path):
    """Empty, random, truncated and forged files (offsets beyond the file, a zero entry size)
    are refused with the file named, quickly, never an exception of another kind."""
    import struct

    fmu, _ = every_platform("four_bar", 2)
    real = {p: library(fmu, tmp_path, p, 2).read_bytes() for p in PLATFORMS}
    bad = [b"", b"\x7fELF" + bytes(60), b"MZ" + bytes(100), os.urandom(4096)]
    for p, data in real.items():
        bad += [data[:n] for n in (64, 200, len(data) // 2)]
        if data[:4] == b"\x7fELF":
            forged = bytearray(data)
            struct.pack_into("<Q", forged, 0x28, 2**63 + 5)  # section headers beyond any file
            bad.append(bytes(forged))
            forged = bytearray(data)
            struct.pack_into("<H", forged, 0x3A, 0)  # a zero section-header size
            bad.append(bytes(forged))
    for data in bad:
        with pytest.raises(ExportError, match="lib.so"):
            inspect_binary(data, "lib.so")


def test_the_binaries_are_built_with_each_platforms_compiler(every_platform):
    """The summary names the compiler that built each binary: the cross-compilers for the
    other platforms (the default one would have built x86-64 code, which the machine check
    of each export refuses)."""
    _, summary = every_platform("four_bar", 2)
    compilers = {p: Path(summary["platforms"][p]["compiler"]).name for p in PLATFORMS}
    assert compilers["x86_64-windows"] == "x86_64-w64-mingw32-gcc"
    assert compilers["aarch64-linux"] == "aarch64-linux-gnu-gcc"
    assert shutil.which(compilers["x86_64-linux"])
