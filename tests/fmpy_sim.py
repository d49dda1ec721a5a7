"""fmpy in a fresh process for the native-backend tests: ``python fmpy_sim.py REQUEST.json``
prints a JSON result.

* ``simulate``: ``fmpy.simulate_fmu`` (``fmu``, ``fmi_type``, ``start``, ``inputs`` with
  ``time`` and one column per input, ``stop_time``, ``output``, ``solver``/``rtol`` for model
  exchange); returns the recorded columns.
* ``steps``: FMI 2 co-simulation with fmpy's low-level API, input row k set before step k,
  all outputs after it; stops at the first failing call and returns the rows so far with
  the FMU's messages (a briefly trained model may leave its range and fail).
* ``derivatives``: FMI 2 model exchange, ``fmi2GetDerivatives`` at the given continuous
  ``states`` with the inputs ``u`` (one row per state).
* ``nan``: set a non-finite input on an FMI 3 co-simulation FMU; returns the statuses and the
  logged messages.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def simulate(req: dict) -> dict:
    from fmpy import simulate_fmu

    kw = {}
    if req.get("inputs"):
        cols = [k for k in req["inputs"] if k != "time"]
        sig = np.zeros(len(req["inputs"]["time"]), dtype=[("time", float)] + [(k, float) for k in cols])
        for k in ["time", *cols]:
            sig[k] = req["inputs"][k]
        kw["input"] = sig
    if req["fmi_type"] == "ModelExchange":
        kw.update(solver=req.get("solver", "CVode"), relative_tolerance=req.get("rtol", 1e-10))
    res = simulate_fmu(req["fmu"], fmi_type=req["fmi_type"], start_values=req.get("start", {}),
                       stop_time=req["stop_time"], output_interval=req.get("output_interval", 1e-3),
                       output=req["output"], **kw)
    return {name: res[name].tolist() for name in res.dtype.names}


def steps(req: dict) -> dict:
    from fmpy import extract, read_model_description
    from fmpy.simulation import instantiate_fmu

    md = read_model_description(req["fmu"])
    vr = {v.name: v.valueReference for v in md.modelVariables}
    outputs = [v.name for v in md.modelVariables if v.causality == "output"]
    messages = []

    def logger(env, instance, status, category, message):
        messages.append({"status": int(status), "message": message.decode(errors="replace")})

    fmu = instantiate_fmu(extract(req["fmu"]), md, "CoSimulation", debug_logging=True, logger=logger)
    in_vr = [vr[k] for k in req["inputs"]]
    out_vr = [vr[k] for k in outputs]
    rows, h, failure = [], req["h"], None
    try:
        fmu.setupExperiment(startTime=0.0)
        fmu.setReal([vr[k] for k in req["start"]], list(req["start"].values()))
        fmu.setReal(in_vr, req["u"][0])
        fmu.enterInitializationMode()
        fmu.exitInitializationMode()
        for k in range(req["n_steps"]):
            fmu.setReal(in_vr, req["u"][min(k, len(req["u"]) - 1)])
            fmu.doStep(currentCommunicationPoint=k * h, communicationStepSize=h)
            rows.append(list(fmu.getReal(out_vr)))
    except Exception as exc:  # fmpy raises for error/fatal statuses
        failure = str(exc)
    return {"outputs": outputs, "y": rows, "failure": failure, "messages": messages}


def derivatives(req: dict) -> dict:
    import ctypes

    from fmpy import extract, read_model_description
    from fmpy.simulation import instantiate_fmu

    md = read_model_description(req["fmu"])
    vr = {v.name: v.valueReference for v in md.modelVariables}
    n = md.numberOfContinuousStates
    fmu = instantiate_fmu(extract(req["fmu"]), md, "ModelExchange")
    fmu.setupExperiment(startTime=0.0)
    fmu.setReal([vr[k] for k in req["start"]], list(req["start"].values()))
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    fmu.enterContinuousTimeMode()
    rows = []
    for x, u in zip(req["states"], req["u"]):
        fmu.setReal([vr[k] for k in req["inputs"]], u)
        fmu.setContinuousStates((ctypes.c_double * n)(*x), n)
        dx = (ctypes.c_double * n)()
        fmu.getDerivatives(dx, n)
        rows.append(list(dx))
    fmu.terminate()
    fmu.freeInstance()
    return {"dx": rows}


def nan(req: dict) -> dict:
    from fmpy import extract, read_model_description
    from fmpy.fmi3 import FMU3Slave

    md = read_model_description(req["fmu"])
    messages = []

    def logger(env, status, category, message):
        messages.append({"status": int(status), "message": message.decode(errors="replace")})

    vr = {v.name: v.valueReference for v in md.modelVariables}
    fmu = FMU3Slave(guid=md.guid, unzipDirectory=extract(req["fmu"]), modelIdentifier=md.coSimulation.modelIdentifier,
                    instanceName="nan")
    fmu.instantiate(loggingOn=True, logMessage=logger)
    fmu.enterInitializationMode(startTime=0.0)
    fmu.exitInitializationMode()
    status = {"set": "ok", "step": "ok"}
    try:
        fmu.setFloat64([vr[req["input"]]], [float(req["value"])])
    except Exception as exc:
        status["set"] = str(exc)
    try:
        fmu.doStep(0.0, 1e-3)
    except Exception as exc:
        status["step"] = str(exc)
    fmu.freeInstance()
    return {"status": status, "messages": messages}


if __name__ == "__main__":
    request = json.loads(open(sys.argv[1]).read())
    kinds = {"simulate": simulate, "steps": steps, "derivatives": derivatives, "nan": nan}
    json.dump(kinds[request["kind"]](request), sys.stdout)
