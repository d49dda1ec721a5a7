"""Other FMI importers in a fresh process: ``python cosim_host.py REQUEST.json`` prints a JSON
result on its last line (the engines log to the same streams before it).

Every request runs one co-simulation FMU (``fmu``) from ``start`` (parameter values by name)
for ``n_steps`` steps of ``h``, the input row k (``inputs`` names, ``u`` rows) applied before
step k, and returns the FMU's outputs after every step as ``y`` (rows, in ``outputs`` order).

* ``engine = "fmpy"``: fmpy's low-level API (the reference the engines are compared with);
  also returns the outputs after initialisation, ``y0``.
* ``engine = "libcosim"``: libcosimpy (the Open Simulation Platform's libcosim): initial
  values by ``real_initial_value``, inputs by an override manipulator, outputs by a
  last-value observer. With ``ssp`` (a path), the system is read from that SSP file instead
  and ``y`` holds the named ``ssp_outputs`` (``instance.variable``).
* ``engine = "ecos"``: ecospy (the Ecos engine), in process or, with ``proxy = true``, out of
  process through its ``proxyfmu`` server; FMI 2 and FMI 3.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _description(fmu: str):
    from fmpy import read_model_description

    md = read_model_description(fmu)
    vr = {v.name: v.valueReference for v in md.modelVariables}
    outputs = [v.name for v in md.modelVariables if v.causality == "output"]
    return md, vr, outputs


def run_fmpy(req: dict) -> dict:
    from fmpy import extract
    from fmpy.simulation import instantiate_fmu

    md, vr, outputs = _description(req["fmu"])
    fmu = instantiate_fmu(extract(req["fmu"]), md, "CoSimulation")
    fmi3 = md.fmiVersion.startswith("3")
    set_real = fmu.setFloat64 if fmi3 else fmu.setReal
    get_real = fmu.getFloat64 if fmi3 else fmu.getReal
    in_vr = [vr[k] for k in req["inputs"]]
    out_vr = [vr[k] for k in outputs]
    h = req["h"]
    if fmi3:
        fmu.enterInitializationMode(startTime=0.0)
    else:
        fmu.setupExperiment(startTime=0.0)
    set_real([vr[k] for k in req["start"]], list(req["start"].values()))
    if not fmi3:
        fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    y0 = list(get_real(out_vr))
    rows = []
    for k in range(req["n_steps"]):
        set_real(in_vr, req["u"][k])
        fmu.doStep(k * h, h)
        rows.append(list(get_real(out_vr)))
    fmu.terminate()
    fmu.freeInstance()
    return {"outputs": outputs, "y": rows, "y0": y0}


def run_libcosim(req: dict) -> dict:
    from libcosimpy.CosimExecution import CosimExecution
    from libcosimpy.CosimManipulator import CosimManipulator
    from libcosimpy.CosimObserver import CosimObserver
    from libcosimpy.CosimSlave import CosimLocalSlave

    h = req["h"]
    if req.get("ssp"):
        ex = CosimExecution.from_ssp_file(ssp_path=req["ssp"], step_size=int(round(h * 1e9)))
        names = req["ssp_outputs"]
        slaves = {s.name.decode(): s.index for s in ex.slave_infos()}
        refs = {}
        for name in names:
            inst, var = name.split(".", 1)
            idx = slaves[inst]
            table = {v.name.decode(): v.reference for v in ex.slave_variables(idx)}
            refs[name] = (idx, table[var])
        obs = CosimObserver.create_last_value()
        ex.add_observer(obs)
        rows = []
        for _ in range(req["n_steps"]):
            assert ex.step(), "libcosim step failed"
            rows.append([obs.last_real_values(i, [r])[0] for i, r in refs.values()])
        return {"outputs": names, "y": rows}

    _, vr, outputs = _description(req["fmu"])
    ex = CosimExecution.from_step_size(step_size=int(round(h * 1e9)))
    idx = ex.add_local_slave(CosimLocalSlave(fmu_path=str(req["fmu"]), instance_name="model"))
    for name, value in req["start"].items():
        ex.real_initial_value(idx, vr[name], value)
    in_vr = [vr[k] for k in req["inputs"]]
    out_vr = [vr[k] for k in outputs]
    manip = CosimManipulator.create_override()
    ex.add_manipulator(manip)
    obs = CosimObserver.create_last_value()
    ex.add_observer(obs)
    rows = []
    for k in range(req["n_steps"]):
        if in_vr:
            manip.slave_real_values(idx, in_vr, req["u"][k])
        assert ex.step(), "libcosim step failed"
        rows.append(list(obs.last_real_values(idx, out_vr)))
    return {"outputs": outputs, "y": rows}


def run_ecos(req: dict) -> dict:
    import ecospy
    from ecospy import EcosSimulation, EcosSimulationStructure

    binaries = Path(ecospy.__file__).parent / "binaries"
    for exe in ("ecos", "proxyfmu"):  # the wheel ships them without the executable bit
        path = binaries / exe
        if path.exists() and not os.access(path, os.X_OK):
            path.chmod(path.stat().st_mode | 0o111)

    _, vr, outputs = _description(req["fmu"])
    fmu = Path(req["fmu"]).resolve()
    os.chdir(fmu.parent)  # Ecos writes logs/ into the working directory
    uri = f"proxyfmu://localhost?file={fmu}" if req.get("proxy") else str(fmu)
    structure = EcosSimulationStructure()
    structure.add_model("model", uri)
    structure.add_parameter_set("start", {f"model::{k}": v for k, v in req["start"].items()})
    sim = EcosSimulation(structure=structure, step_size=req["h"])
    rows = []
    try:
        sim.init(parameter_set="start")
        for k in range(req["n_steps"]):
            for name, value in zip(req["inputs"], req["u"][k]):
                sim.set_real(f"model::{name}", value)
            sim.step(1)
            rows.append([sim.get_real(f"model::{o}") for o in outputs])
        sim.terminate()
    finally:
        sim.free()
    return {"outputs": outputs, "y": rows}


ENGINES = {"fmpy": run_fmpy, "libcosim": run_libcosim, "ecos": run_ecos}


if __name__ == "__main__":
    request = json.loads(Path(sys.argv[1]).read_text())
    result = ENGINES[request["engine"]](request)
    sys.stdout.flush()
    print(json.dumps(result), flush=True)
    os._exit(0)  # skip interpreter finalisation: an engine's threads may outlive it
