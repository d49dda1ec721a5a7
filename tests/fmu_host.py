"""A minimal FMI 2.0 co-simulation master on fmpy's low-level API, run as a fresh process by
the tests: ``python fmu_host.py REQUEST.json`` prints a JSON result on stdout.

Requests (``"kind"``):

* ``steps``: one run per communication step size in ``steps``; inputs are piecewise
  constant (``u_blocks`` values, each held for ``block`` seconds); returns the outputs at
  every communication point.
* ``state``: run to ``t_split``, get the FMU state (and a serialized copy), run on, restore
  the state and run again, restore the deserialized copy in a new instance and run again.
* ``nan``: set a non-finite input; report the status and the FMU's log messages.
* ``two``: two FMUs in this one process, stepped alternately; returns both outputs.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
from fmpy import extract, read_model_description
from fmpy.simulation import instantiate_fmu


class Host:
    def __init__(self, fmu: str, name: str = "instance"):
        self.md = read_model_description(fmu)
        self.vr = {v.name: v.valueReference for v in self.md.modelVariables}
        self.messages: list[dict] = []

        def logger(env, instance, status, category, message):
            self.messages.append({"status": int(status), "message": message.decode(errors="replace")})

        self._logger = logger
        self.fmu = instantiate_fmu(extract(fmu), self.md, "CoSimulation", debug_logging=True, logger=logger)
        self.inputs = [v.name for v in self.md.modelVariables if v.causality == "input"]
        self.outputs = [v.name for v in self.md.modelVariables if v.causality == "output"]

    def start(self, start_values: dict[str, float], t0: float = 0.0) -> None:
        self.fmu.setupExperiment(startTime=t0)
        self.set(start_values)
        self.fmu.enterInitializationMode()
        self.fmu.exitInitializationMode()

    def set(self, values: dict[str, float]) -> None:
        if values:
            self.fmu.setReal([self.vr[k] for k in values], [float(v) for v in values.values()])

    def get(self) -> list[float]:
        return list(self.fmu.getReal([self.vr[k] for k in self.outputs]))

    def free(self) -> None:
        self.fmu.terminate()
        self.fmu.freeInstance()


def _input_at(req: dict, t: float) -> dict[str, float]:
    k = min(int(math.floor(t / req["block"] + 1e-9)), len(req["u_blocks"]) - 1)
    return dict(zip(req["inputs"], req["u_blocks"][k]))


def _run(host: Host, req: dict, h: float, t_from: float, t_to: float) -> tuple[list[float], list[list[float]]]:
    ts, ys = [], []
    n = int(round((t_to - t_from) / h))
    for i in range(n):
        t = t_from + i * h
        host.set(_input_at(req, t))
        host.fmu.doStep(currentCommunicationPoint=t, communicationStepSize=h)
        ts.append(t_from + (i + 1) * h)
        ys.append(host.get())
    return ts, ys


def steps(req: dict) -> dict:
    out = {}
    for h in req["steps"]:
        host = Host(req["fmu"])
        host.set(_input_at(req, 0.0))
        host.start(req["start"])
        ts, ys = _run(host, req, h, 0.0, req["t_end"])
        out[repr(h)] = {"t": ts, "y": ys}
        host.free()
    return {"outputs": host.outputs, "runs": out}


def state(req: dict) -> dict:
    h, t1, t2 = req["steps"][0], req["t_split"], req["t_end"]
    host = Host(req["fmu"])
    host.set(_input_at(req, 0.0))
    host.start(req["start"])
    _run(host, req, h, 0.0, t1)
    saved = host.fmu.getFMUstate()
    blob = host.fmu.serializeFMUstate(saved)
    _, first = _run(host, req, h, t1, t2)
    host.fmu.setFMUstate(saved)
    _, second = _run(host, req, h, t1, t2)
    host.fmu.freeFMUstate(saved)
    host.free()
    other = Host(req["fmu"], "other")
    other.set(_input_at(req, 0.0))
    other.start(req.get("other_start", req["start"]))  # other parameters: the state brings its own
    restored = other.fmu.deSerializeFMUstate(blob)
    other.fmu.setFMUstate(restored)
    _, third = _run(other, req, h, t1, t2)
    other.free()
    return {"first": first, "second": second, "deserialized": third}


def nan(req: dict) -> dict:
    host = Host(req["fmu"])
    host.start(req["start"])
    host.fmu.doStep(currentCommunicationPoint=0.0, communicationStepSize=req["steps"][0])
    status = {"set": "ok", "step": "ok"}
    try:
        host.set({req["inputs"][0]: float(req["value"])})
    except Exception as exc:  # fmpy raises for any status other than OK/warning
        status["set"] = str(exc)
    try:
        host.fmu.doStep(currentCommunicationPoint=req["steps"][0], communicationStepSize=req["steps"][0])
    except Exception as exc:
        status["step"] = str(exc)
    return {"status": status, "messages": host.messages}


def two(req: dict) -> dict:
    hosts = [Host(f, f"fmu{i}") for i, f in enumerate(req["fmus"])]
    for host, sub in zip(hosts, req["requests"]):
        host.set(_input_at(sub, 0.0))
        host.start(sub["start"])
    h, n = req["step"], int(round(req["t_end"] / req["step"]))
    ys: list[list] = [[] for _ in hosts]
    for i in range(n):
        for k, (host, sub) in enumerate(zip(hosts, req["requests"])):
            host.set(_input_at(sub, i * h))
            host.fmu.doStep(currentCommunicationPoint=i * h, communicationStepSize=h)
            ys[k].append(host.get())
    return {"outputs": [h.outputs for h in hosts], "y": ys}


if __name__ == "__main__":
    request = json.loads(open(sys.argv[1]).read())
    result = {"steps": steps, "state": state, "nan": nan, "two": two}[request["kind"]](request)
    # on a line of its own, last: what the FMU logged to stdout on the way comes before it
    sys.stdout.write("\n" + json.dumps(result, default=lambda o: float(o) if isinstance(o, np.floating) else str(o))
                     + "\n")
    from mc2fmu.fmu.runner import leave

    leave(0)  # no interpreter finalisation: pythonfmu 0.7 can abort there (see mc2fmu.fmu.runner.leave)
