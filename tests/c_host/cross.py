"""Build ``xhost.c`` for a platform and run an FMU's binary for that platform with it, under the
platform's emulator (wine, qemu-user) where it is not this machine's.  The host reads and writes
binary files, so no value goes through a C library's number formatting."""

from __future__ import annotations

import struct
import subprocess
import zipfile
from pathlib import Path

import numpy as np

from mc2fmu.fmu.platforms import PLATFORMS, compiler_of, emulator_env, emulator_of

from .run import fmi_headers

XHOST = Path(__file__).with_name("xhost.c")


def build_xhost(platform: str, out_dir: Path) -> Path:
    p = PLATFORMS[platform]
    exe = Path(out_dir) / f"xhost-{platform}{'.exe' if p.os == 'windows' else ''}"
    cmd = [compiler_of(p), "-std=c99", "-O2", "-Wall", "-Wextra", "-I", str(fmi_headers()), str(XHOST), "-o", str(exe)]
    cmd += [] if p.os == "windows" else ["-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or proc.stderr.strip():
        raise RuntimeError(f"building the {platform} host failed or warned:\n{proc.stderr}")
    return exe


def library(fmu: Path, out_dir: Path, platform: str, fmi: int) -> Path:
    """Unzip ``fmu`` into ``out_dir``; returns its library for ``platform``."""
    from fmpy import read_model_description

    with zipfile.ZipFile(fmu) as z:
        z.extractall(out_dir)
    md = read_model_description(str(fmu))
    ident = (md.coSimulation or md.modelExchange).modelIdentifier
    p = PLATFORMS[platform]
    return Path(out_dir) / "binaries" / p.folder(fmi) / f"{ident}{p.suffix}"


def run_xhost(platform: str, host: Path, lib: Path, fmu: Path, *, fmi: int, me: bool, inputs: list[str],
              rows: np.ndarray, outputs: list[str], h: float = 1e-3, n_steps: int = 10000,
              timeout: float = 600) -> np.ndarray:
    """The ``(n_steps, 1 + n_out)`` array of time and outputs after each step."""
    from fmpy import read_model_description

    md = read_model_description(str(fmu))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    nx = len(md.derivatives) if me else 0
    rows = np.atleast_2d(np.asarray(rows, dtype="<f8"))
    spec = struct.pack("<iiiid", fmi, int(me), nx, n_steps, h)
    spec += struct.pack(f"<i{len(inputs)}I", len(inputs), *(vr[k] for k in inputs))
    spec += struct.pack(f"<i{len(outputs)}I", len(outputs), *(vr[k] for k in outputs))
    spec += struct.pack("<i", len(rows) if inputs else 0) + (rows.tobytes() if inputs else b"")
    tag = f"{platform}-fmi{fmi}-{'me' if me else 'cs'}"
    spec_file, out_file = lib.parent / f"spec-{tag}.bin", lib.parent / f"out-{tag}.bin"
    spec_file.write_bytes(spec)
    p = PLATFORMS[platform]
    runner = emulator_of(p)
    lib_arg = f"Z:{lib}".replace("/", "\\") if p.os == "windows" else str(lib)
    token = md.guid if fmi == 2 else md.instantiationToken
    proc = subprocess.run([*runner, str(host), lib_arg, token, str(spec_file), str(out_file)], capture_output=True,
                          text=True, env=emulator_env(p), timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the {platform} host failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return np.frombuffer(out_file.read_bytes(), dtype="<f8").reshape(n_steps, 1 + len(outputs))
