"""The two simulated examples of seed 004 (Slimak et al. 2023), computed with Exudyn.

* Duffing oscillator ``m u'' + d u' + k u + k_nl u^3 = phi cos(w t)`` with the slides' values
  ``m = 1, d = 0.3, k = -1, k_nl = 1, phi = 0.65, w = 1.2`` (a double-well oscillator): a
  ``Mass1D`` on a ``CoordinateSpringDamper`` whose user function is the cubic spring and the
  damper, driven by a ``LoadCoordinate``;
* friction slider ``m u'' + d u' + k u + f_fric(u') = phi cos(w t)`` with ``m = 1, d = 5,
  k = 250, phi = 10, w = 5`` and dry friction ``f_fric = mu m g tanh(u' / v0)``, ``mu m g = 2 N``,
  ``v0 = 1e-3 m/s`` (a smoothed stick-slip: the slider nearly sticks near its turning points):
  the same ``CoordinateSpringDamper`` with the friction in its user function.  (Exudyn's own
  regularized friction, ``CoordinateSpringDamperExt``, saturates linearly inside its zone, a
  shape no smoothed sign reproduces: its ~30 % near-sticking samples then bias the fit.)

Each returns ``t``, ``u`` (position), ``v`` and ``a`` (the second-order central differences of
``u``, as mc2fmu takes them from position data) and the forcing signals ``cos(w t)``,
``cos(3 w t)``, on the interior points of the output grid.
"""

from __future__ import annotations

import math

import numpy as np

DUFFING = {"m": 1.0, "d": 0.3, "k": -1.0, "k_nl": 1.0, "phi": 0.65, "w": 1.2}
SLIDER = {"m": 1.0, "d": 5.0, "k": 250.0, "phi": 10.0, "w": 5.0, "friction": 2.0, "v0": 1e-3}


def _oscillator(m: float, phi: float, w: float, u0: float, connector, t_end: float, step: float,
                output_step: float) -> dict:
    import exudyn as exu
    from exudyn.itemInterface import LoadCoordinate, Mass1D, MarkerNodeCoordinate, Node1D, NodePointGround, SensorNode

    sc = exu.SystemContainer()
    mbs = sc.AddSystem()
    n = mbs.AddNode(Node1D(referenceCoordinates=[0.0], initialCoordinates=[u0], initialVelocities=[0.0]))
    mbs.AddObject(Mass1D(nodeNumber=n, mass=m))
    ground = mbs.AddNode(NodePointGround())
    m_ground = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=ground, coordinate=0))
    m_u = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=n, coordinate=0))
    mbs.AddObject(connector([m_ground, m_u]))
    mbs.AddLoad(LoadCoordinate(markerNumber=m_u, load=0.0,
                               loadUserFunction=lambda mbs, t, load: phi * math.cos(w * t)))
    sensor = mbs.AddSensor(SensorNode(nodeNumber=n, storeInternal=True, writeToFile=False,
                                      outputVariableType=exu.OutputVariableType.Coordinates))
    mbs.Assemble()
    s = exu.SimulationSettings()
    s.timeIntegration.endTime = t_end
    s.timeIntegration.numberOfSteps = int(round(t_end / step))
    s.timeIntegration.adaptiveStep = False
    s.timeIntegration.verboseMode = 0
    s.timeIntegration.generalizedAlpha.spectralRadius = 1.0
    s.solution.file.write = False
    s.solution.sensors.writePeriod = output_step
    if not mbs.SolveDynamic(s):
        raise RuntimeError("Exudyn's dynamic solver did not converge")
    data = mbs.GetSensorStoredData(sensor)
    t, u = data[:, 0], data[:, 1]
    h = output_step
    v = (u[2:] - u[:-2]) / (2 * h)
    a = (u[2:] - 2 * u[1:-1] + u[:-2]) / (h * h)
    t = t[1:-1]
    return {"t": t, "u": u[1:-1], "v": v, "a": a, "cos_wt": np.cos(w * t), "cos_3wt": np.cos(3 * w * t)}


def duffing(t_end: float = 100.0, step: float = 1e-3, output_step: float = 1e-3) -> dict:
    """The forced double-well Duffing oscillator from u(0) = 1 at rest."""
    from exudyn.itemInterface import CoordinateSpringDamper

    p = DUFFING

    def force(mbs, t, item, u, ud, stiffness, damping, offset):
        return p["k"] * u + p["k_nl"] * u**3 + p["d"] * ud  # resists the motion like a spring

    def connector(markers):
        return CoordinateSpringDamper(markerNumbers=markers, springForceUserFunction=force)

    return _oscillator(p["m"], p["phi"], p["w"], 1.0, connector, t_end, step, output_step) | {"params": p}


def friction_slider(t_end: float = 20.0, step: float = 1e-4, output_step: float = 1e-3) -> dict:
    """The forced spring-mass with dry friction (sticks near the turning points), from rest at u = 0."""
    from exudyn.itemInterface import CoordinateSpringDamper

    p = SLIDER

    def force(mbs, t, item, u, ud, stiffness, damping, offset):
        return p["k"] * u + p["d"] * ud + p["friction"] * math.tanh(ud / p["v0"])

    def connector(markers):
        return CoordinateSpringDamper(markerNumbers=markers, springForceUserFunction=force)

    return _oscillator(p["m"], p["phi"], p["w"], 0.0, connector, t_end, step, output_step) | {"params": p}
