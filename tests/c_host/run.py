"""Build and drive the plain-C FMI 2 co-simulation host ``host.c`` (tests and benchmarks).

The host runs in a process of its own with an empty environment: no Python is loaded."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np

HOST_SOURCE = Path(__file__).with_name("host.c")


def fmi_headers() -> Path:
    import fmpy

    return Path(fmpy.__file__).parent / "c-code"


def build_host(out_dir: Path, flags: tuple[str, ...] = ("-O2",)) -> Path:
    exe = Path(out_dir) / "host"
    cmd = ["gcc", "-std=c99", *flags, "-Wall", "-Wextra", "-I", str(fmi_headers()), str(HOST_SOURCE), "-o", str(exe),
           "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or proc.stderr.strip():
        raise RuntimeError(f"building the C host failed or warned:\n{proc.stderr}")
    return exe


def extract(fmu: Path, out_dir: Path) -> tuple[Path, str, object]:
    """Unzip ``fmu``; returns (the linux64 library, the GUID, fmpy's model description)."""
    from fmpy import read_model_description

    out_dir = Path(out_dir)
    with zipfile.ZipFile(fmu) as z:
        z.extractall(out_dir)
    md = read_model_description(str(fmu))
    ident = md.coSimulation.modelIdentifier
    return out_dir / "binaries" / "linux64" / f"{ident}.so", md.guid, md


def run_host(host: Path, lib: Path, guid: str, md, *, mode: str = "run", h: float = 1e-3, n_steps: int = 1000,
             repeats: int = 1, start: dict[str, float] | None = None, inputs: list[str] = (),
             rows: np.ndarray | None = None, outputs: list[str] | None = None, wrapper: list[str] = (),
             work: Path | None = None, timeout: float = 900) -> tuple[list[str], np.ndarray | str]:
    """Run the host; returns (output names, the (n_steps, 1 + n_out) array with time first) for
    ``mode="run"``, else (names, the host's stdout)."""
    vr = {v.name: v.valueReference for v in md.modelVariables}
    if outputs is None:
        outputs = [v.name for v in md.modelVariables if v.causality == "output"]
    start = start or {}
    rows = np.zeros((0, len(inputs))) if rows is None else np.atleast_2d(rows)
    tokens = [mode, repr(float(h)), str(n_steps), str(repeats), str(len(start))]
    tokens += [f"{vr[k]} {float(v)!r}" for k, v in start.items()]
    tokens += [str(len(inputs)), *(str(vr[k]) for k in inputs), str(len(outputs)), *(str(vr[k]) for k in outputs)]
    tokens += [str(len(rows)), *(repr(float(x)) for x in rows.ravel())]
    spec = Path(work or lib.parent) / f"spec-{mode}.txt"
    spec.write_text("\n".join(tokens) + "\n")
    proc = subprocess.run([*wrapper, str(host), str(lib), guid, str(spec)], capture_output=True, text=True, env={},
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the C host failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    if mode != "run":
        return outputs, proc.stdout + proc.stderr
    data = np.array([[float(x) for x in line.split(",")] for line in proc.stdout.splitlines()])
    return outputs, data


def have_valgrind() -> bool:
    return shutil.which("valgrind") is not None
