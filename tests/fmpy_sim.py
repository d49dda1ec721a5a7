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
* ``jacobian``: model exchange (FMI 2 or 3, ``fmi``), at each row of ``states`` and ``u``: the
  values of every output and state derivative (``unknowns``) and their directional
  derivatives along each state and input in turn (``knowns``), one Jacobian per row
  (``J[row][unknown][known]``).
* ``parameters``: model exchange (FMI 2 or 3, ``fmi``): set each of ``values`` (name, value)
  in turn in Instantiated mode, then initialise; returns each call's outcome ("ok" or the
  error), the FMU's messages and, if initialisation succeeded, a parameter's value read back
  (``read``) and an attempt to set it again after initialisation.
* ``parameter_states``: FMI 2 model exchange; instance A with ``values`` set before
  initialisation and instance B with the start values, in one process: the derivatives of each
  at ``states`` (``u``); A's FMU state taken, A reset (``read``: a parameter's value after the
  reset) and initialised again with its start values, then the state restored; the serialized
  state loaded into B: the derivatives after each.
* ``me_analytic``: FMI 2 model exchange under fmpy's CVode (``fmpy.sundials.CVodeSolver``,
  relative tolerance ``rtol``) with analytic inputs, set at every right-hand-side evaluation
  (fmpy's own loop holds inputs between its steps): input ``k`` is ``static[k] + amp[k] sin(2 pi
  freq[k] t)``; returns ``output`` at the ``times``.
* ``nan``: set a non-finite input on an FMI 3 co-simulation FMU; returns the statuses and the
  logged messages.
* ``misuse``: FMI 2 calls an adversarial host makes (``case``), each on a fresh instance of
  the FMU's ``fmi_type``; returns per call whether it was refused, and the logged messages.
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


def _me_derivatives(fmu, input_vrs: list[int], n: int, states, us) -> list[list[float]]:
    """FMI 2 model exchange in Continuous-Time Mode: the state derivatives at each state (and
    input row)."""
    import ctypes

    rows = []
    for x, u in zip(states, us):
        if input_vrs:
            fmu.setReal(input_vrs, u)
        fmu.setContinuousStates((ctypes.c_double * n)(*x), n)
        dx = (ctypes.c_double * n)()
        fmu.getDerivatives(dx, n)
        rows.append(list(dx))
    return rows


def derivatives(req: dict) -> dict:
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
    rows = _me_derivatives(fmu, [vr[k] for k in req["inputs"]], n, req["states"], req["u"])
    fmu.terminate()
    fmu.freeInstance()
    return {"dx": rows}


def jacobian(req: dict) -> dict:
    import ctypes

    from fmpy import extract, read_model_description
    from fmpy.simulation import instantiate_fmu

    md = read_model_description(req["fmu"])
    fmi3 = md.fmiVersion.startswith("3")
    vr = {v.name: v.valueReference for v in md.modelVariables}
    n = md.numberOfContinuousStates
    states = [f"q[{i + 1}]" for i in range(n // 2)] + [f"qd[{i + 1}]" for i in range(n // 2)]
    inputs = [v.name for v in md.modelVariables if v.causality == "input"]
    unknowns = [v.name for v in md.modelVariables if v.causality == "output" or v.name.startswith("der(")]
    knowns = states + inputs
    fmu = instantiate_fmu(extract(req["fmu"]), md, "ModelExchange")
    set_real, get_real = (fmu.setFloat64, fmu.getFloat64) if fmi3 else (fmu.setReal, fmu.getReal)
    if fmi3:
        set_real([vr[k] for k in req["start"]], list(req["start"].values()))
        fmu.enterInitializationMode(startTime=0.0)
    else:
        fmu.setupExperiment(startTime=0.0)
        set_real([vr[k] for k in req["start"]], list(req["start"].values()))
        fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    fmu.enterContinuousTimeMode()
    values, jacobians = [], []
    for x, u in zip(req["states"], req["u"]):
        if inputs:
            set_real([vr[k] for k in inputs], list(u))
        fmu.setContinuousStates((ctypes.c_double * n)(*x), n)
        values.append(list(get_real([vr[k] for k in unknowns])))
        cols = []
        for j in range(len(knowns)):
            seed = [0.0] * len(knowns)
            seed[j] = 1.0
            cols.append(fmu.getDirectionalDerivative([vr[k] for k in unknowns], [vr[k] for k in knowns], seed))
        jacobians.append(np.array(cols).T.tolist())
    fmu.terminate()
    fmu.freeInstance()
    return {"unknowns": unknowns, "knowns": knowns, "values": values, "J": jacobians}


def parameter_states(req: dict) -> dict:
    from fmpy import extract, read_model_description
    from fmpy.simulation import instantiate_fmu

    md = read_model_description(req["fmu"])
    vr = {v.name: v.valueReference for v in md.modelVariables}
    n = md.numberOfContinuousStates
    unzipped = extract(req["fmu"])
    inputs = [v.name for v in md.modelVariables if v.causality == "input"]

    def start(fmu, values):
        fmu.setupExperiment(startTime=0.0)
        fmu.setReal([vr[k] for k in req["start"]], list(req["start"].values()))
        if values:
            fmu.setReal([vr[k] for k in values], list(values.values()))
        fmu.enterInitializationMode()
        fmu.exitInitializationMode()
        fmu.enterContinuousTimeMode()

    def derivatives(fmu):
        return _me_derivatives(fmu, [vr[k] for k in inputs], n, req["states"], req["u"])

    a = instantiate_fmu(unzipped, md, "ModelExchange")
    b = instantiate_fmu(unzipped, md, "ModelExchange")
    start(a, req["values"])
    start(b, {})
    out = {"a": derivatives(a), "b": derivatives(b)}
    state = a.getFMUstate()
    blob = a.serializeFMUstate(state)
    a.reset()
    start(a, {})
    out["read_after_reset"] = list(a.getReal([vr[req["read"]]]))[0]
    out["a_reset"] = derivatives(a)
    a.setFMUstate(state)
    out["a_restored"] = derivatives(a)
    b.setFMUstate(b.deSerializeFMUstate(blob))
    out["b_deserialized"] = derivatives(b)
    a.freeFMUstate(state)
    for fmu in (a, b):
        fmu.terminate()
        fmu.freeInstance()
    return out


def me_analytic(req: dict) -> dict:
    import math

    from fmpy import extract, read_model_description
    from fmpy.simulation import instantiate_fmu
    from fmpy.sundials import CVodeSolver

    md = read_model_description(req["fmu"])
    vr = {v.name: v.valueReference for v in md.modelVariables}

    def logger(env, instance, status, category, message):
        if status > 1:
            print(f"FMU: {message.decode(errors='replace')}", file=sys.stderr)

    fmu = instantiate_fmu(extract(req["fmu"]), md, "ModelExchange", debug_logging=True, logger=logger)
    in_vr = [vr[k] for k in req["inputs"]]
    out_vr = [vr[k] for k in req["output"]]

    def u(t):
        return [s + a * math.sin(2 * math.pi * f * t) for s, a, f in zip(req["static"], req["amp"], req["freq"])]

    def set_time(t):
        fmu.setTime(t)
        if in_vr:
            fmu.setReal(in_vr, u(t))

    class NoInput:
        def apply(self, *args, **kwargs):
            pass

    times = req["times"]
    fmu.setupExperiment(startTime=times[0])
    fmu.setReal([vr[k] for k in req["start"]], list(req["start"].values()))
    if in_vr:
        fmu.setReal(in_vr, u(times[0]))
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    fmu.enterContinuousTimeMode()
    n = md.numberOfContinuousStates
    solver = CVodeSolver(nx=n, nz=0, get_x=fmu.getContinuousStates, set_x=fmu.setContinuousStates,
                         get_dx=fmu.getDerivatives, get_z=fmu.getEventIndicators,
                         get_nominals=fmu.getNominalsOfContinuousStates, set_time=set_time, input=NoInput(),
                         startTime=times[0], relativeTolerance=req["rtol"], maxNumSteps=1000000)
    rows = [list(fmu.getReal(out_vr))]
    t = times[0]
    for t_next in times[1:]:
        _, _, t = solver.step(t, t_next)
        set_time(t)
        fmu.completedIntegratorStep()
        rows.append(list(fmu.getReal(out_vr)))
    fmu.terminate()
    fmu.freeInstance()
    return {"y": rows}


def parameters(req: dict) -> dict:
    from fmpy import extract, read_model_description
    from fmpy.simulation import instantiate_fmu

    md = read_model_description(req["fmu"])
    fmi3 = md.fmiVersion.startswith("3")
    vr = {v.name: v.valueReference for v in md.modelVariables}
    messages, calls = [], []

    def logger(*args):
        status, message = args[-3], args[-1]
        messages.append({"status": int(status), "message": message.decode(errors="replace")})

    def call(name, fn, *args):
        try:
            out = fn(*args)
            calls.append([name, "ok"])
            return out
        except Exception as exc:  # fmpy raises for error statuses
            calls.append([name, str(exc)])
            return None

    kind = "ModelExchange" if md.modelExchange is not None else "CoSimulation"
    fmu = instantiate_fmu(extract(req["fmu"]), md, kind, debug_logging=True, logger=logger)
    set_real, get_real = (fmu.setFloat64, fmu.getFloat64) if fmi3 else (fmu.setReal, fmu.getReal)
    if not fmi3:
        fmu.setupExperiment(startTime=0.0)
    for name, value in req["values"]:
        call(f"set {name}", set_real, [vr[name]], [float(value)])
    call("enterInitializationMode", *((fmu.enterInitializationMode, 0.0) if fmi3 else (fmu.enterInitializationMode,)))
    if calls[-1][1] == "ok":
        call("exitInitializationMode", fmu.exitInitializationMode)
    read = None
    if calls[-1] == ["exitInitializationMode", "ok"] and req.get("read"):
        read = list(get_real([vr[req["read"]]]))[0]
        call(f"set {req['read']} after initialisation", set_real, [vr[req["read"]]], [read])
    return {"calls": calls, "messages": messages, "read": read}


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


def _fnv(seed: int, data: bytes) -> int:
    h = seed
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def misuse(req: dict) -> dict:
    """One misuse ``case``; every FMI call's outcome is recorded as "ok" or the error fmpy raised."""
    import struct

    from fmpy import extract, read_model_description
    from fmpy.simulation import instantiate_fmu

    md = read_model_description(req["fmu"])
    vr = {v.name: v.valueReference for v in md.modelVariables}
    messages, calls = [], []
    unzipped = extract(req["fmu"])

    def logger(env, instance, status, category, message):
        messages.append({"status": int(status), "message": message.decode(errors="replace")})

    def new(fmi_type="CoSimulation"):
        return instantiate_fmu(unzipped, md, fmi_type, debug_logging=True, logger=logger)

    def call(name, fn, *args, **kw):
        try:
            out = fn(*args, **kw)
            calls.append([name, "ok"])
            return out
        except Exception as exc:  # fmpy raises for error statuses
            calls.append([name, str(exc)])
            return None

    def started(fmi_type="CoSimulation"):
        fmu = new(fmi_type)
        fmu.setupExperiment(startTime=0.0)
        fmu.setReal([vr[k] for k in req["start"]], list(req["start"].values()))
        fmu.enterInitializationMode()
        fmu.exitInitializationMode()
        return fmu

    case = req["case"]
    if case == "input_after_init":  # the same input set before or after initialisation: the same run
        runs = []
        for when in ("before", "after"):
            fmu = new()
            fmu.setupExperiment(startTime=0.0)
            fmu.setReal([vr[k] for k in req["start"]], list(req["start"].values()))
            in_vr = [vr[k] for k in req["inputs"]]
            if when == "before":
                fmu.setReal(in_vr, req["u"])
            fmu.enterInitializationMode()
            fmu.exitInitializationMode()
            if when == "after":
                fmu.setReal(in_vr, req["u"])
            rows = []
            for k in range(200):
                fmu.doStep(currentCommunicationPoint=k * 0.001, communicationStepSize=0.001)
                rows.append(list(fmu.getReal([vr["q[1]"]])))
            runs.append(rows)
        return {"runs": runs, "messages": messages}
    if case == "huge_step":
        fmu = started()
        call("doStep h=1e20", fmu.doStep, currentCommunicationPoint=0.0, communicationStepSize=1e20)
    elif case == "wrong_time":
        fmu = started()
        call("doStep 0 -> 0.01", fmu.doStep, currentCommunicationPoint=0.0, communicationStepSize=0.01)
        call("doStep from -5", started().doStep, currentCommunicationPoint=-5.0, communicationStepSize=0.01)
        call("doStep from 10", started().doStep, currentCommunicationPoint=10.0, communicationStepSize=0.01)
    elif case == "nan_start":
        fmu = new()
        call("setupExperiment NaN", fmu.setupExperiment, startTime=float("nan"))
    elif case == "fixed_after_init":
        fmu = started()
        call("set q_start after init", fmu.setReal, [vr["q_start[1]"]], [0.1])
    elif case == "after_terminate":
        fmu = started()
        call("doStep", fmu.doStep, currentCommunicationPoint=0.0, communicationStepSize=0.001)
        call("terminate", fmu.terminate)
        call("doStep after terminate", fmu.doStep, currentCommunicationPoint=0.001, communicationStepSize=0.001)
    elif case == "phases":
        fmu = new()
        call("exitInitializationMode first", fmu.exitInitializationMode)
        fmu = started()
        call("enterInitializationMode twice", fmu.enterInitializationMode)
    elif case == "state":
        fmu = started()
        for k in range(5):
            fmu.doStep(currentCommunicationPoint=k * 0.001, communicationStepSize=0.001)
        state = fmu.getFMUstate()
        blob = bytes(fmu.serializeFMUstate(state))
        header = 40  # magic 8, format 4, size 4, token 8, interface 4, pad 4, checksum 8
        token, interface = struct.unpack_from("<QI", blob, 16)

        def load(name, data, target=None):
            target = target or started()
            st = call(name, target.deSerializeFMUstate, data)
            if st is not None:
                call(name + ": set", target.setFMUstate, st)
                call(name + ": step", target.doStep, currentCommunicationPoint=0.005, communicationStepSize=0.001)

        load("intact", blob)
        for pos in (header + 3, header + 17, len(blob) - 9):  # bit flips in the state's bytes
            flipped = bytearray(blob)
            flipped[pos] ^= 0x10
            load(f"bit flip at {pos}", bytes(flipped))

        def forged(offset, fmt, value):
            data = bytearray(blob)
            struct.pack_into(fmt, data, header + offset, value)
            struct.pack_into("<Q", data, 32, _fnv(token ^ interface, bytes(data[header:])))
            return bytes(data)

        load("forged k = INT64_MIN", forged(16, "<q", -2**63))  # t0 8, time 8, k 8
        load("forged t0 = NaN", forged(0, "<d", float("nan")))
        load("truncated", blob[:-1])
        if req.get("both"):
            load("co-simulation state into model exchange", blob, started("ModelExchange"))
    elif case == "python_state":  # the python backend's blob: SHA-256 (64 hex bytes), then JSON
        import hashlib

        fmu = started()
        for k in range(5):
            fmu.doStep(currentCommunicationPoint=k * 0.001, communicationStepSize=0.001)
        blob = bytes(fmu.serializeFMUstate(fmu.getFMUstate()))

        def load(name, data):
            target = started()
            st = call(name, target.deSerializeFMUstate, data)
            if st is not None:
                call(name + ": set", target.setFMUstate, st)
                call(name + ": step", target.doStep, currentCommunicationPoint=0.005, communicationStepSize=0.001)
            call(name + ": getReal", target.getReal, [vr["q[1]"]])
            target.terminate()
            target.freeInstance()

        def forged(key, value):
            state = json.loads(blob[64:])
            state[key] = value
            body = json.dumps(state).encode()
            return hashlib.sha256(body).hexdigest().encode() + body

        load("intact", blob)
        for pos in (70, len(blob) // 2, len(blob) - 2):
            flipped = bytearray(blob)
            flipped[pos] ^= 0x10
            load(f"bit flip at {pos}", bytes(flipped))
        load("forged k = INT64_MIN", forged("k", -2**63))
        load("forged k = 10**6", forged("k", 10**6))
        load("forged t0 = NaN", forged("t0", float("nan")))
        load("forged history = NaN", forged("hist", [[float("nan")]] * 3))
        load("forged list", forged("u", "a string"))
        load("truncated", blob[:-1])
        load("empty", b"")
    elif case == "references":  # value references and variables a host may get wrong
        fmu = started()
        call("getReal vr 4294967295", fmu.getReal, [4294967295])
        call("setReal vr 4294967295", fmu.setReal, [4294967295], [1.0])
        call("setReal on an output", fmu.setReal, [vr["q[1]"]], [1.0])
        call("getInteger vr 0", fmu.getInteger, [0])
        call("getReal after them", fmu.getReal, [vr["q[1]"]])
        call("doStep after them", fmu.doStep, currentCommunicationPoint=0.0, communicationStepSize=0.001)
        call("terminate", fmu.terminate)
        fmu.freeInstance()
    elif case == "after_failure":  # a failed call, then everything a host may still do
        fmu = started()
        call("setReal NaN", fmu.setReal, [vr[req["inputs"][0]]], [float("nan")])
        for i in range(3):
            call(f"getReal {i}", fmu.getReal, [vr["q[1]"]])
            call(f"doStep {i}", fmu.doStep, currentCommunicationPoint=0.0, communicationStepSize=0.001)
        call("terminate", fmu.terminate)
        fmu.freeInstance()
        fresh = started()
        call("a fresh instance steps", fresh.doStep, currentCommunicationPoint=0.0, communicationStepSize=0.001)
        fresh.terminate()
        fresh.freeInstance()
    return {"calls": calls, "messages": messages}


if __name__ == "__main__":
    request = json.loads(open(sys.argv[1]).read())
    kinds = {"simulate": simulate, "steps": steps, "derivatives": derivatives, "jacobian": jacobian, "parameters": parameters, "me_analytic": me_analytic, "parameter_states": parameter_states, "nan": nan, "misuse": misuse}
    result = kinds[request["kind"]](request)
    # on a line of its own, last: what the FMU logged to stdout on the way comes before it
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    from mc2fmu.fmu.runner import leave

    leave(0)  # no interpreter finalisation: pythonfmu 0.7 can abort there (see mc2fmu.fmu.runner.leave)
