"""Checks of native FMUs that the suite (tests/test_native.py) and benchmarks/targets.py share:
the inputs of a reference run, parity with the python backend, model exchange against
co-simulation, and valgrind over the plain-C host."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.c_host.run import extract, run_host
from tests.fmu_helpers import run_json, start_values

FMPY_SIM = Path(__file__).parent / "fmpy_sim.py"


def run_inputs(name: str, reference_run, excitation: str = "train") -> tuple[list[str], np.ndarray, np.ndarray]:
    from mc2fmu.mechanics.mechanism import load_mechanism

    run = reference_run(name, excitation)
    mech = load_mechanism(Path(run["path"]).parent.parent / "mechanism.toml")
    return list(mech.input_names), np.asarray(run["t"]), np.atleast_2d(np.asarray(run["u"]).T).T


def positions(names: list[str]) -> list[int]:
    return [i for i, o in enumerate(names) if o.rsplit(".", 1)[-1] in ("x", "y", "z")]


def assert_python_parity(model_dir: Path, native_fmu: Path, inputs, u, tmp_path: Path, min_steps: int,
                         parameters: dict[str, float] | None = None) -> np.ndarray:
    """Both backends under fmpy, 1 ms communication steps, each with ``parameters`` set (FMU
    parameters by name): every output (poses, q, qd, envelope, the motion outputs) to 1e-9
    (relative), positions to 1e-10 m, and the same failure step if the model leaves its range.
    Returns the python FMU's outputs."""
    from mc2fmu.fmu.export import export_fmu

    py_fmu = tmp_path / "python.fmu"
    export_fmu(model_dir, py_fmu, "python")
    req = {"kind": "steps", "start": {**start_values(model_dir), **(parameters or {})}, "inputs": inputs,
           "u": np.asarray(u).tolist(), "h": 1e-3, "n_steps": len(u)}
    ref = run_json(FMPY_SIM, {**req, "fmu": str(py_fmu)}, tmp_path)
    got = run_json(FMPY_SIM, {**req, "fmu": str(native_fmu)}, tmp_path)
    assert got["outputs"] == ref["outputs"]
    assert "kinetic_energy" in ref["outputs"]  # both backends have the motion outputs
    a, b = np.array(ref["y"]), np.array(got["y"])
    assert len(a) == len(b) >= min_steps, (len(a), len(b), ref["failure"], got["failure"])
    assert (ref["failure"] is None) == (got["failure"] is None)
    pos = positions(ref["outputs"])
    assert np.abs(b[:, pos] - a[:, pos]).max() <= 1e-10
    # every output while the model is near its envelope (a diverging model's q grows to 1e10)
    near = a[:, ref["outputs"].index("envelope")] <= 1.0
    assert near[:min_steps].all()
    assert np.all(np.abs(b[near] - a[near]) <= 1e-9 * np.maximum(1.0, np.abs(a[near])))
    return a


def me_vs_cs(model_dir: Path, cs_fmu: Path, me_fmu: Path, inputs, t, u, stop: float, tmp_path: Path) -> float:
    from fmpy import read_model_description

    outs = [v.name for v in read_model_description(str(cs_fmu)).modelVariables if v.causality == "output"]
    pos = [outs[i] for i in positions(outs)]
    req = {"kind": "simulate", "start": start_values(model_dir), "stop_time": stop, "output": pos,
           "inputs": {"time": t.tolist(), **{k: u[:, i].tolist() for i, k in enumerate(inputs)}}}
    cs = run_json(FMPY_SIM, {**req, "fmu": str(cs_fmu), "fmi_type": "CoSimulation"}, tmp_path)
    me = run_json(FMPY_SIM, {**req, "fmu": str(me_fmu), "fmi_type": "ModelExchange"}, tmp_path)
    assert len(cs["time"]) == len(me["time"]) == int(round(stop / 1e-3)) + 1
    return max(np.abs(np.array(cs[o]) - np.array(me[o])).max() for o in pos)


def valgrind_cycles(c_host, fmu: Path, start: dict, work: Path, repeats: int, timeout: float = 900) -> str:
    """valgrind over the C host: ``repeats`` x (instantiate, initialise, 5 steps, get/set/serialise
    the state, free) of a four-bar FMU; fails on a definite, indirect or possible leak or a
    memory error."""
    lib, guid, md = extract(fmu, work / "fmu")
    _, out = run_host(c_host, lib, guid, md, mode="cycles", n_steps=5, repeats=repeats, start=start,
                      inputs=["tau"], rows=np.full((1, 1), 0.1), outputs=["crank.x", "envelope"],
                      wrapper=["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect,possible",
                               "--error-exitcode=9", "-q"], timeout=timeout)
    assert f"cycles {repeats}" in out
    return out


def valgrind_states(c_host, fmu: Path, start: dict, work: Path, repeats: int, timeout: float = 600) -> dict:
    """``repeats`` corrupted copies of a serialized state (random bytes, bit flips, truncations
    and extensions, forged fields with a recomputed checksum) loaded, set and stepped by the C
    host under valgrind: no memory error, no hang (a timeout), and no state that is accepted and
    then steps with fmi2OK to a non-finite output; the intact state always restores."""
    lib, guid, md = extract(fmu, work / "fmu")
    _, out = run_host(c_host, lib, guid, md, mode="states", n_steps=20, repeats=repeats, start=start,
                      inputs=["tau"], rows=np.array([[0.3]]), work=work, timeout=timeout,
                      wrapper=["valgrind", "--error-exitcode=3", "--leak-check=full",
                               "--errors-for-leak-kinds=definite,indirect,possible"])
    line = next(x for x in out.splitlines() if x.startswith("states "))
    fields = dict(zip(line.split()[0::2], map(int, line.split()[1::2])))
    assert fields["states"] == repeats and fields["refused"] + fields["accepted"] == repeats
    assert fields["refused"] >= 0.75 * repeats  # random bytes, flips and lengths never pass; forged fields often do not
    assert fields["nan_ok"] == 0 and fields["restore_failed"] == 0, line
    assert "ERROR SUMMARY: 0 errors" in out
    return fields
