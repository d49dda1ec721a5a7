"""A crank-angle controller designed on the reduced model, run on its FMU and on the full model.

    python examples/control/closed_loop.py [MECHANISM] [--model MODEL_DIR] [--fmu OUT.fmu]
                                           [--seconds 10] [--amplitude 0.25] [--frequency 0.4]
                                           [--plot OUT.png]

For a bundled 1-DOF mechanism driven by one torque on its crank (four_bar, slider_crank,
spatial_four_bar):

1. **Design, on the reduced model alone.** The model (``--model``, or trained here with the
   defaults on the mechanism's ``train`` run) is linearised at its static equilibrium
   (:func:`mc2fmu.control.linearize.linearize`); the crank angle ``theta`` (about the torque's
   axis, 0 at the equilibrium) is read from the decoded crank, so the design model is
   ``d/dt (theta, theta') = A (theta, theta') + B tau``.  An LQR gain ``K`` (weights: 5 mrad,
   0.1 rad/s, 2 N m) and the reduced model's static torque ``tau_s(theta)`` that holds the crank
   at ``theta`` (gravity compensation, solved on the decoder's manifold) make the controller

       tau = tau_s(theta_ref) - K (theta - theta_ref, theta' - theta_ref')

   sampled every 1 ms (zero-order hold), ``theta'`` a backward difference of the measured
   angle.  The reference is ``theta_ref = amplitude (1 - cos 2 pi f t) / 2``: from rest at the
   equilibrium, inside the training range.
2. **The reduced plant:** the model's native FMU in fmpy (co-simulation, 1 ms steps), the
   crank angle from its pose outputs; and the same FMU in libcosim (the Open Simulation
   Platform's co-simulation engine, ``libcosimpy``, when installed): the controller overrides
   the input and reads the outputs through libcosim's manipulator and observer, one engine
   step per sample.
3. **The full plant:** the mechanism in Exudyn (all bodies, index-3 joints, 0.1 ms steps), the
   same controller reading the crank's rotation at the same 1 ms samples.

Prints the tracking errors side by side and the cost per 1 ms step of each plant; ``--plot``
draws the reference, both responses and both errors.  ``main`` returns the figures (the
benchmark ``benchmarks/closed_loop.py`` tabulates them).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CONTROL_STEP = 1e-3  # s, the controller's sample time (and the FMU's communication step)
LQR_WEIGHTS = (5e-3, 0.1, 2.0)  # acceptable angle error (rad), rate error (rad/s), torque (N m)


# ---------------------------------------------------------------------------- geometry


def crank_axis(rotation0: np.ndarray, axis: np.ndarray) -> int:
    """The crank's body axis most nearly perpendicular to the torque axis (its angle is read off it)."""
    return int(np.argmin(np.abs(axis @ rotation0)))


def crank_angle(rotation: np.ndarray, rotation0: np.ndarray, axis: np.ndarray, k: int) -> np.ndarray:
    """Angle (rad) of the crank about ``axis`` from its pose ``rotation0``: body axis ``k`` now
    against then, both projected on the plane normal to ``axis``."""
    e0 = rotation0[:, k] - axis * (axis @ rotation0[:, k])
    e = rotation[..., :, k] - np.multiply.outer(rotation[..., :, k] @ axis, axis)
    return np.arctan2(np.cross(e0, e) @ axis, e @ e0)


def quaternion_matrix(w, x, y, z) -> np.ndarray:
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


# ---------------------------------------------------------------------------- design


class Design:
    """The controller's ingredients, from the reduced model alone."""

    def __init__(self, model_dir: Path, mechanism: str):
        from scipy.linalg import solve_continuous_are

        from examples.reference import model as engine_model
        from mc2fmu.control.linearize import linearize
        from mc2fmu.mechanics.natural import poses_from_nc
        from mc2fmu.models.artifact import load_artifact

        art = load_artifact(model_dir)
        self.model, layout = art.model, art.layout
        em = engine_model(mechanism)
        if self.model.dof != 1 or self.model.n_u != 1 or em.inputs[0].kind != "torque":
            raise SystemExit(f"{mechanism}: the example needs a 1-DOF model driven by one torque "
                             f"(this one has {self.model.dof} coordinate(s) and {self.model.n_u} input(s))")
        inp = em.inputs[0]
        self.body_name = inp.body
        self.body = [b.name for b in em.bodies].index(inp.body)
        self.axis = np.asarray(inp.direction, float) / np.linalg.norm(inp.direction)
        self.rotation0 = np.asarray(em.bodies[self.body].rotation, float)  # the run's start: the equilibrium
        self.k = crank_axis(self.rotation0, self.axis)
        self._poses = lambda x: poses_from_nc(layout, x)[1][:, self.body]

        lin = linearize(model_dir)
        self.q_eq = float(lin.q[0])
        env = art.envelope
        self.q_range = ((float(env.q_min[0]), float(env.q_max[0])) if np.isfinite(env.q_min[0])
                        else (self.q_eq - math.pi, self.q_eq + math.pi))  # a full-turn angle: one turn
        c = self.dtheta_dq(self.q_eq)
        # (theta, theta') = c (dq, dq'): the same A, B in the measured coordinate
        self.A = np.array([[0.0, 1.0], [lin.A[1, 0], lin.A[1, 1]]])
        self.B = np.array([[0.0], [c * lin.B[1, 0]]])
        Q = np.diag([1 / LQR_WEIGHTS[0] ** 2, 1 / LQR_WEIGHTS[1] ** 2])
        R = np.array([[1 / LQR_WEIGHTS[2] ** 2]])
        P = solve_continuous_are(self.A, self.B, Q, R)
        self.K = (np.linalg.solve(R, self.B.T @ P)).ravel()
        self.modes_hz = np.abs(np.linalg.eigvals(self.A - self.B @ self.K[None])) / (2 * math.pi)

    def theta(self, q):
        """The crank angle of the decoded configuration at ``q`` (scalar or array)."""
        qq = np.atleast_1d(np.asarray(q, dtype=float))
        R = self._poses(self.model.decode(qq[:, None]))
        th = crank_angle(R, self.rotation0, self.axis, self.k)
        return float(th[0]) if np.ndim(q) == 0 else th

    def dtheta_dq(self, q: float, h: float = 1e-6) -> float:
        return (self.theta(q + h) - self.theta(q - h)) / (2 * h)

    def static_torque(self, thetas: np.ndarray) -> np.ndarray:
        """The torque that holds the reduced model at rest at each crank angle: ``q(theta)`` by
        inverting ``theta(q)`` on the stretch of the training range about the equilibrium where
        it is monotonic, then ``f(q, 0, tau) = 0``, affine in ``tau``."""
        lo, hi = self.q_range
        qs = np.linspace(lo, hi, 2001)
        ths = self.theta(qs)
        # the stretch about the equilibrium where theta(q) is monotonic
        sign = np.sign(np.diff(ths))
        i = min(int(np.searchsorted(qs, self.q_eq)), len(sign) - 1)
        a = b = i
        while a > 0 and sign[a - 1] == sign[i]:
            a -= 1
        while b < len(sign) - 1 and sign[b + 1] == sign[i]:
            b += 1
        qs, ths = qs[a:b + 2], ths[a:b + 2]
        order = np.argsort(ths)
        if thetas.min() < ths.min() or thetas.max() > ths.max():
            raise SystemExit(f"the reference ({thetas.min():.3f} to {thetas.max():.3f} rad from the equilibrium) leaves "
                             f"the training range ({ths.min():.3f} to {ths.max():.3f} rad): use a smaller --amplitude")
        q = np.interp(thetas, ths[order], qs[order])[:, None]
        zero = np.zeros_like(q)
        f0 = self.model.acceleration(q, zero, zero)[:, 0]
        f1 = self.model.acceleration(q, zero, np.ones_like(q))[:, 0]
        return -f0 / (f1 - f0)


class Controller:
    """Sampled PD (LQR gains) with the reduced model's static torque as feedforward."""

    def __init__(self, design: Design, amplitude: float, frequency: float):
        self.K, self.a, self.w = design.K, amplitude, 2 * math.pi * frequency
        grid = np.linspace(min(0.0, amplitude) - 0.05, max(0.0, amplitude) + 0.05, 121)
        self.grid, self.tau_s = grid, design.static_torque(grid)
        self.prev = None

    def reference(self, t):
        return 0.5 * self.a * (1 - np.cos(self.w * t)), 0.5 * self.a * self.w * np.sin(self.w * t)

    def __call__(self, t: float, theta: float) -> float:
        rate = 0.0 if self.prev is None else (theta - self.prev) / CONTROL_STEP
        self.prev = theta
        ref, ref_rate = self.reference(t)
        return float(np.interp(ref, self.grid, self.tau_s) - self.K @ [theta - ref, rate - ref_rate])


# ---------------------------------------------------------------------------- plants


def run_fmu(fmu_path: Path, design: Design, controller: Controller, body: str, n: int) -> dict:
    """The reduced plant: the FMU in fmpy, one 1 ms co-simulation step per controller sample."""
    from fmpy import extract, read_model_description
    from fmpy.fmi2 import FMU2Slave

    md = read_model_description(fmu_path)
    vr = {v.name: v.valueReference for v in md.modelVariables}
    quat = [vr[f"{body}.q{c}"] for c in "wxyz"]
    (inp,) = [v.valueReference for v in md.modelVariables if v.causality == "input"]
    unzipped = extract(fmu_path)
    fmu = FMU2Slave(guid=md.guid, unzipDirectory=unzipped, modelIdentifier=md.coSimulation.modelIdentifier,
                    instanceName="plant")
    theta, tau, envelope = np.zeros(n + 1), np.zeros(n), np.zeros(n + 1)
    fmu.instantiate()
    fmu.setupExperiment(startTime=0.0)
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    env_vr = vr["envelope"]

    def measure(k):
        R = quaternion_matrix(*fmu.getReal(quat))
        theta[k] = crank_angle(R, design.rotation0, design.axis, design.k)
        envelope[k] = fmu.getReal([env_vr])[0]

    measure(0)
    spent = 0.0
    for k in range(n):
        tau[k] = controller(k * CONTROL_STEP, theta[k])
        t0 = time.perf_counter()
        fmu.setReal([inp], [tau[k]])
        fmu.doStep(currentCommunicationPoint=k * CONTROL_STEP, communicationStepSize=CONTROL_STEP)
        spent += time.perf_counter() - t0
        measure(k + 1)
    fmu.terminate()
    fmu.freeInstance()
    return {"theta": theta, "tau": tau, "envelope": envelope, "us_per_step": 1e6 * spent / n}


def run_libcosim(fmu_path: Path, design: Design, controller: Controller, body: str, n: int) -> dict | None:
    """The reduced plant in libcosim (None when libcosimpy is not installed): the FMU as a
    local slave, the controller's torque set through an override manipulator before each
    1 ms step, the pose read through a last-value observer after it.  libcosim initialises the
    slave at its first step, so the first sample is the FMU's start pose (``q_start``'s
    decoded crank), which is what fmpy reads at t = 0."""
    try:
        from libcosimpy.CosimExecution import CosimExecution
        from libcosimpy.CosimLogging import CosimLogLevel, log_output_level
        from libcosimpy.CosimManipulator import CosimManipulator
        from libcosimpy.CosimObserver import CosimObserver
        from libcosimpy.CosimSlave import CosimLocalSlave
    except ImportError:
        return None
    from fmpy import read_model_description

    log_output_level(CosimLogLevel.WARNING)  # not libcosim's debug lines on every load and release
    md = read_model_description(fmu_path)
    vr = {v.name: v.valueReference for v in md.modelVariables}
    starts = [float(v.start) for v in md.modelVariables if v.name.startswith("q_start")]
    quat = [vr[f"{body}.q{c}"] for c in "wxyz"]
    (inp,) = [v.valueReference for v in md.modelVariables if v.causality == "input"]
    ex = CosimExecution.from_step_size(step_size=int(round(CONTROL_STEP * 1e9)))
    idx = ex.add_local_slave(CosimLocalSlave(fmu_path=str(fmu_path), instance_name="plant"))
    manip = CosimManipulator.create_override()
    ex.add_manipulator(manip)
    obs = CosimObserver.create_last_value()
    ex.add_observer(obs)
    theta, tau = np.zeros(n + 1), np.zeros(n)
    theta[0] = design.theta(starts[0])
    spent = 0.0
    for k in range(n):
        tau[k] = controller(k * CONTROL_STEP, theta[k])
        t0 = time.perf_counter()
        manip.slave_real_values(idx, [inp], [tau[k]])
        if not ex.step():
            raise RuntimeError(f"libcosim: the step at t = {k * CONTROL_STEP:.3f} s failed")
        spent += time.perf_counter() - t0
        R = quaternion_matrix(*obs.last_real_values(idx, quat))
        theta[k + 1] = crank_angle(R, design.rotation0, design.axis, design.k)
    return {"theta": theta, "tau": tau, "us_per_step": 1e6 * spent / n}


def run_engine(mechanism: str, design: Design, controller: Controller, n: int, step: float = 1e-4) -> dict:
    """The full plant: the mechanism in Exudyn; the controller samples the crank at the start of
    every 10th solver step and holds its torque (a pre-step user function)."""
    import exudyn as exu

    from examples import _exudyn
    from examples.reference import model as engine_model

    held = {"tau": 0.0, "k": -1}
    theta, tau = np.zeros(n + 1), np.zeros(n)
    built = _exudyn.build(engine_model(mechanism), [lambda t: held["tau"]])
    crank = built.body_objects[design.body]
    per = int(round(CONTROL_STEP / step))

    def measure() -> float:
        R = np.array(built.mbs.GetObjectOutputBody(crank, exu.OutputVariableType.RotationMatrix, [0.0, 0.0, 0.0],
                                                   exu.ConfigurationType.Current)).reshape(3, 3)
        return float(crank_angle(R, design.rotation0, design.axis, design.k))

    def pre_step(mbs, t):
        i = int(round(t / step))
        k = i // per
        if i % per == 0 and k != held["k"] and k <= n:
            theta[k] = measure()
            if k < n:
                held["tau"] = tau[k] = controller(k * CONTROL_STEP, theta[k])
            held["k"] = k
        return True

    built.mbs.SetPreStepUserFunction(pre_step)
    wall = _exudyn.solve(built, n * CONTROL_STEP, step, CONTROL_STEP)
    theta[n] = measure()
    return {"theta": theta, "tau": tau, "us_per_step": 1e6 * wall / n}


# ---------------------------------------------------------------------------- main


def _trained_model(mechanism: str, folder: Path) -> Path:
    from examples.reference import write_example
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    ex = ROOT / "examples" / mechanism
    if not (ex / "runs" / "train.csv.gz").exists():
        write_example(mechanism, ROOT / "examples")
    out = folder / f"{mechanism}.model"
    train(ex / "mechanism.toml", [ex / "runs" / "train.csv.gz"], TrainConfig(dof=1), out)
    return out


def plot(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = result["t"]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    a1.plot(t, np.degrees(result["reference"]), "k--", lw=1, label="reference")
    a1.plot(t, np.degrees(result["fmu"]["theta"]), lw=1.2, label="reduced model (FMU, fmpy)")
    a1.plot(t, np.degrees(result["engine"]["theta"]), lw=1.2, ls=":", label="full model (Exudyn)")
    a1.set_ylabel("crank angle from equilibrium (deg)")
    a1.legend(loc="upper right", fontsize=8)
    a1.set_title(f"{result['mechanism']}: controller designed on the reduced model")
    for key, label in (("fmu", "reduced model"), ("engine", "full model")):
        a2.plot(t, 1e3 * (result[key]["theta"] - result["reference"]), lw=1, label=label)
    a2.set_ylabel("tracking error (mrad)")
    a2.set_xlabel("t (s)")
    a2.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mechanism", nargs="?", default="four_bar",
                    help="a bundled 1-DOF mechanism with one crank torque (default four_bar)")
    ap.add_argument("--model", help="a trained model directory (default: train one with the defaults)")
    ap.add_argument("--fmu", help="the model's FMU (default: export it, native, FMI 2 co-simulation)")
    ap.add_argument("--seconds", type=float, default=10.0, help="closed-loop duration in s (default 10)")
    ap.add_argument("--amplitude", type=float, default=0.25, help="reference swing in rad (default 0.25)")
    ap.add_argument("--frequency", type=float, default=0.4, help="reference frequency in Hz (default 0.4)")
    ap.add_argument("--plot", help="write the plot here (PNG)")
    args = ap.parse_args(argv)

    from mc2fmu.fmu.export import export_fmu

    with tempfile.TemporaryDirectory(prefix="mc2fmu-loop-") as tmp:
        model_dir = Path(args.model) if args.model else _trained_model(args.mechanism, Path(tmp))
        fmu = Path(args.fmu) if args.fmu else Path(tmp) / f"{args.mechanism}.fmu"
        if not args.fmu:
            export_fmu(model_dir, fmu)
        design = Design(model_dir, args.mechanism)
        n = int(round(args.seconds / CONTROL_STEP))
        reduced = run_fmu(fmu, design, Controller(design, args.amplitude, args.frequency), design.body_name, n)
        cosim = run_libcosim(fmu, design, Controller(design, args.amplitude, args.frequency), design.body_name, n)
        full = run_engine(args.mechanism, design, Controller(design, args.amplitude, args.frequency), n)
    t = np.arange(n + 1) * CONTROL_STEP
    ref = Controller(design, args.amplitude, args.frequency).reference(t)[0]
    rms = {k: float(np.sqrt(np.mean((r["theta"] - ref) ** 2))) for k, r in (("fmu", reduced), ("engine", full))}
    peak = {k: float(np.max(np.abs(r["theta"] - ref))) for k, r in (("fmu", reduced), ("engine", full))}
    result = {"mechanism": args.mechanism, "t": t, "reference": ref, "fmu": reduced, "engine": full, "K": design.K,
              "closed_loop_hz": design.modes_hz, "rms": rms, "peak": peak,
              "ratio": rms["engine"] / rms["fmu"], "left_envelope": bool(np.max(reduced["envelope"]) > 0.01),
              "difference": float(np.max(np.abs(reduced["theta"] - full["theta"]))), "libcosim": cosim}
    if cosim is not None:  # the same FMU and controller in another engine: the same closed loop
        rms["libcosim"] = float(np.sqrt(np.mean((cosim["theta"] - ref) ** 2)))
        result["libcosim_difference"] = float(np.max(np.abs(cosim["theta"] - reduced["theta"])))
    print(f"{args.mechanism}: LQR gains K = [{design.K[0]:.3g} N m/rad, {design.K[1]:.3g} N m s/rad], "
          f"closed-loop modes {', '.join(f'{f:.2f}' for f in design.modes_hz)} Hz")
    print(f"  {'plant':<26}{'rms error':>12}{'peak error':>12}{'us per 1 ms step':>18}")
    for key, label in (("fmu", "reduced model (FMU)"), ("engine", "full model (Exudyn)")):
        print(f"  {label:<26}{1e3 * rms[key]:>9.3f} mrad{1e3 * peak[key]:>8.3f} mrad{result[key]['us_per_step']:>18.1f}")
    if cosim is not None:
        print(f"  {'reduced model (libcosim)':<26}{1e3 * rms['libcosim']:>9.3f} mrad{'':>13}{cosim['us_per_step']:>18.1f}"
              f"  (differs from fmpy's by {1e3 * result['libcosim_difference']:.2g} mrad)")
    print(f"  full / reduced rms error: {result['ratio']:.2f}; the two responses differ by at most "
          f"{1e3 * result['difference']:.4f} mrad"
          + ("  (the reduced model left its training envelope)" if result["left_envelope"] else ""))
    if args.plot:
        print(f"  plot: {plot(result, Path(args.plot))}")
    return result


if __name__ == "__main__":
    main()
