"""The IFToMM / MBSbenchmark problem A02, the N four-bar mechanism (N = 40: 81 bodies).

A row of ``N + 1`` cranks pivoted on the ground at x = 0, 1, ..., N and ``N`` couplers joining
the tips of neighbouring cranks, all bars 1 m, 1 kg, ``J = m L^2 / 12``: ``N`` parallelogram
four-bars in series, 1 DOF, gravity -y, no input.  At t = 0 the cranks are vertical and every
coupler moves at 1 m/s in +x.  The chain turns full revolutions and passes through the
singular configuration where all bars are collinear (the DOF jump from 1 to N + 1 for an
instant).  The benchmark's reference is the path of point B0 (the first crank's tip) by
ADAMS, ``examples/a02/adams_B0.csv`` (every 0.05 s over 20 s, as published with the benchmark).

    python -m examples.a02 [--n 40] [--step 1e-4] [--out DIR]

simulates it with Exudyn, prints B0's largest distance from the ADAMS solution and, with
``--out``, writes ``DIR/a02/mechanism.toml`` and ``DIR/a02/runs/train.csv.gz`` (20 s on a
5 ms grid: the run a reduced model is trained on).

The engine model is planar (Exudyn's 2D rigid bodies and revolute joints, 3 coordinates per
body, a sparse factorisation, modified Newton, and a Newton tolerance that lets it pass the
collinear configurations): a 3D model of the chain, whose loops close with in-plane pins,
stopped at the first collinear passage (t = 1.24 s).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

G = 9.81
L = 1.0
MASS = 1.0
#: the benchmark's published ADAMS solution of point B0 (time, x, y every 0.05 s over 20 s)
ADAMS_FILE = Path(__file__).resolve().parent / "a02" / "adams_B0.csv"


def body_names(n: int) -> list[str]:
    return [f"crank_{i}" for i in range(n + 1)] + [f"coupler_{i}" for i in range(1, n + 1)]


def mechanism(n: int = 40) -> dict:
    """The mechanism file's content: every bar's frame at one end, x along the bar, COM at
    mid-length; inertia ``m L^2 / 12`` about the two transverse axes (a thin bar: zero about
    its own axis, which the plane motion never turns)."""
    bar = {"mass": MASS, "com": [0.5 * L, 0.0, 0.0], "inertia": [0.0, MASS * L * L / 12.0, MASS * L * L / 12.0]}
    return {"name": "a02", "gravity": [0.0, -G, 0.0], "bodies": [{"name": b, **bar} for b in body_names(n)],
            "inputs": []}


def read_adams(path: Path = ADAMS_FILE) -> np.ndarray:
    """``(t, x, y)`` rows of B0 from the published ADAMS solution (CSV, ``#`` comments, a header)."""
    return np.loadtxt(path, delimiter=",", comments="#", skiprows=4)


def simulate(n: int = 40, t_end: float = 20.0, step: float = 1e-4, output_step: float = 5e-3) -> dict:
    """Exudyn run: ``t``, ``origin`` (n_t, n_b, 3) and ``rotation`` (n_t, n_b, 3, 3) of the body
    frames (see :func:`mechanism`), ``B0`` (n_t, 2) and the wall time."""
    import exudyn as exu
    import exudyn.itemInterface as eii

    from ._exudyn import settings

    container = exu.SystemContainer()
    mbs = container.AddSystem()
    ground = mbs.AddObject(eii.ObjectGround())
    J = MASS * L * L / 12.0
    # (x, y, angle) and its rate of each body's node, at the frame end of each bar (COM half a
    # bar out along its x axis): cranks vertical, turning at -1 rad/s (tip at +1 m/s in x);
    # couplers horizontal, translating at 1 m/s
    initial = [([float(i), 0.0, 0.5 * math.pi], [0.0, 0.0, -1.0]) for i in range(n + 1)]
    initial += [([i - 1.0, L, 0.0], [1.0, 0.0, 0.0]) for i in range(1, n + 1)]
    nodes = [mbs.AddNode(eii.NodeRigidBody2D(referenceCoordinates=ref, initialVelocities=vel)) for ref, vel in initial]
    bodies = []
    for nd in nodes:
        # RigidBody2D's inertia is about the node: J + m (L/2)^2 for the end-point node
        bodies.append(mbs.AddObject(eii.ObjectRigidBody2D(nodeNumber=nd, mass=MASS, inertia=J + MASS * 0.25 * L * L,
                                                          centerOfMass=[0.5 * L, 0.0])))
        mbs.AddLoad(eii.LoadMassProportional(markerNumber=mbs.AddMarker(eii.MarkerBodyMass(bodyNumber=bodies[-1])),
                                             loadVector=[0.0, -G, 0.0]))

    def point(body, x):
        return mbs.AddMarker(eii.MarkerBodyPosition(bodyNumber=body, localPosition=[x, 0.0, 0.0]))

    def pin(m0, m1):
        mbs.AddObject(eii.RevoluteJoint2D(markerNumbers=[m0, m1]))

    for i in range(n + 1):
        pin(mbs.AddMarker(eii.MarkerBodyPosition(bodyNumber=ground, localPosition=[float(i), 0.0, 0.0])), point(bodies[i], 0.0))
    for i in range(1, n + 1):
        coupler = bodies[n + i]
        pin(point(bodies[i - 1], L), point(coupler, 0.0))
        pin(point(coupler, L), point(bodies[i], L))

    def sensor(body, kind):
        return mbs.AddSensor(eii.SensorBody(bodyNumber=body, localPosition=[0.0, 0.0, 0.0], storeInternal=True,
                                            writeToFile=False, outputVariableType=getattr(exu.OutputVariableType, kind)))

    pos = [sensor(b, "Position") for b in bodies]
    rot = [sensor(b, "Rotation") for b in bodies]
    mbs.Assemble()
    s = settings(t_end, step, output_step)
    s.timeIntegration.generalizedAlpha.computeInitialAccelerations = True
    s.timeIntegration.newton.useModifiedNewton = True
    # at the default relative tolerance (1e-8) Newton stalls at 2.3e-8 in a collinear passage at
    # t = 10.55 s; at 1e-7 the whole run passes and B0 stays within 1e-5 m of ADAMS
    s.timeIntegration.newton.relativeTolerance = 1e-7
    s.linearSolver.solverType = exu.LinearSolverType.EigenSparse
    start = time.perf_counter()
    if not mbs.SolveDynamic(s):
        raise RuntimeError("Exudyn's dynamic solver did not converge on A02")
    wall = time.perf_counter() - start
    t = mbs.GetSensorStoredData(pos[0])[:, 0]
    origin = np.stack([mbs.GetSensorStoredData(p)[:, 1:4] for p in pos], axis=1)
    # the 2D rotation sensor gives the angle relative to the node's reference angle
    reference = np.array([ref[2] for ref, _ in initial])
    angle = reference + np.stack([mbs.GetSensorStoredData(r)[:, -1] for r in rot], axis=1)
    c, sn = np.cos(angle), np.sin(angle)
    rotation = np.zeros(angle.shape + (3, 3))
    rotation[..., 0, 0], rotation[..., 0, 1], rotation[..., 1, 0], rotation[..., 1, 1] = c, -sn, sn, c
    rotation[..., 2, 2] = 1.0
    return {"t": t, "origin": origin, "rotation": rotation, "B0": b0(origin, rotation), "wall_time": wall,
            "names": body_names(n)}


def b0(origin: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """Point B0 (n_t, 2), the first crank's tip: 1 m along its frame's x axis."""
    return origin[:, 0, :2] + L * rotation[:, 0, :2, 0]


def b0_error(t: np.ndarray, B0: np.ndarray, adams: np.ndarray) -> float:
    """Largest distance (m) between B0 and the ADAMS solution at the ADAMS sample times."""
    x = np.interp(adams[:, 0], t, B0[:, 0])
    y = np.interp(adams[:, 0], t, B0[:, 1])
    return float(np.max(np.hypot(x - adams[:, 1], y - adams[:, 2])))


def model_b0(model_dir, folder) -> dict:
    """A trained reduced model rolled out over the run in ``folder`` from its initial state:
    ``t``, its ``B0`` (n_t, 2), Exudyn's ``exudyn_B0`` and the position NRMSE over all bodies."""
    from mc2fmu.data.poses import read_run
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.simulate import simulate_run
    from mc2fmu.validation.metrics import position_nrmse

    art = load_artifact(model_dir)
    run = read_run(Path(folder) / "runs" / "train.csv.gz", load_mechanism(Path(folder) / "mechanism.toml"))
    res = simulate_run(art, nc_from_poses(art.layout, run.origin, run.rotation), run.u)
    ok = np.isfinite(res["x"]).all(axis=1)
    origin = np.full_like(run.origin, np.inf)
    rotation = np.zeros_like(run.rotation)
    origin[ok], rotation[ok] = poses_from_nc(art.layout, res["x"][ok])
    return {"t": run.t, "B0": b0(origin, rotation), "nrmse": position_nrmse(origin, run.origin),
            "exudyn_B0": b0(run.origin, run.rotation)}


def write(run: dict, out_dir, n: int = 40) -> Path:
    """``out_dir/a02/mechanism.toml`` and ``runs/train.csv.gz``; returns the folder."""
    from mc2fmu.data.poses import write_run
    from mc2fmu.mechanics.mechanism import mechanism_toml

    folder = Path(out_dir) / "a02"
    (folder / "runs").mkdir(parents=True, exist_ok=True)
    (folder / "mechanism.toml").write_text(mechanism_toml(mechanism(n), header=[
        f"a02: IFToMM benchmark A02, the N four-bar mechanism, N = {n} ({2 * n + 1} bodies), free motion.",
        "Generated by `python -m examples.a02` from examples/a02.py; do not edit by hand."]))
    write_run(folder / "runs" / "train.csv.gz", run["t"], run["names"], run["origin"], run["rotation"], [],
              np.zeros((len(run["t"]), 0)))
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.a02", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40, help="number of four-bar loops (default 40, the benchmark's)")
    ap.add_argument("--step", type=float, default=1e-4, help="Exudyn time step, s (default 1e-4)")
    ap.add_argument("--out", help="write <OUT>/a02/mechanism.toml and runs/train.csv.gz")
    args = ap.parse_args(argv)
    run = simulate(args.n, step=args.step)
    adams = read_adams()
    print(f"A02, N = {args.n}: {2 * args.n + 1} bodies, Exudyn h = {args.step:g} s in {run['wall_time']:.1f} s; "
          f"B0 against ADAMS: largest distance {b0_error(run['t'], run['B0'], adams):.2e} m over {adams[-1, 0]:g} s")
    if args.out:
        print(f"wrote {write(run, args.out, args.n)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
