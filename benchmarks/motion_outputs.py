"""The motion outputs (body velocities, angular velocities, kinetic and potential energy)
of trained models against Exudyn.

    python benchmarks/motion_outputs.py [NAMES...] [--models DIR]

For each mechanism (default: the planar four-bar, the spatial four-bar and the MacPherson
strut, whose springs store energy): the default learnt-coordinate model `DIR/<name>-autoencoder-w1`
(written by benchmarks/train_accuracy.py; trained here with the defaults if missing) rolled out
with `mc2fmu simulate`'s run-time model on each run from its initial state, its motion outputs
(mc2fmu/models/motion.py, which the native FMU's C is printed from and equals to rounding:
tests/test_native.py) against the engine's sensors: the body origins' velocity (Exudyn's centre
of mass velocity and angular velocity carried to the origin) and angular velocity, as NRMSE
over all bodies and axes (rms error over the rms variation, as position NRMSE), beside the
model's position NRMSE on the same run; the kinetic energy's largest error and the potential
energy's (up to a constant: its mean offset removed) relative to the run's largest kinetic
energy.  Targets (issue 45): velocity NRMSE at most twice the position NRMSE or 0.1 %,
whichever is larger, and both energies within 1 % of the largest kinetic energy, on the
`train`, `low` and `shape` runs; the benchmark exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, ensure_runs  # noqa: E402
from examples import reference  # noqa: E402
from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc  # noqa: E402
from mc2fmu.mechanics.variants import parameter_vector  # noqa: E402
from mc2fmu.models import motion  # noqa: E402
from mc2fmu.models.artifact import load_artifact  # noqa: E402
from mc2fmu.models.simulate import simulate_run  # noqa: E402

RUNS = ("train", "low", "shape")
NAMES = ("four_bar", "spatial_four_bar", "macpherson")


def nrmse(got: np.ndarray, ref: np.ndarray) -> float:
    """rms error over the rms variation (about the mean), over every sample, body and axis."""
    return float(np.sqrt(np.mean((got - ref) ** 2)) / np.sqrt(np.mean((ref - ref.mean(axis=0)) ** 2)))


def compare(art, name: str, excitation: str) -> dict:
    run = reference.simulate(name, excitation)
    model = reference.model(name)
    layout = art.layout
    res = simulate_run(art, nc_from_poses(layout, run["origin"], run["rotation"]), run["u"])
    n = min(len(res["q"]), len(run["t"]))
    q, qd = res["q"][:n], res["qd"][:n]
    x, J, _ = art.model.decode_jh(q)
    xd = np.einsum("tnm,tm->tn", J, qd)
    springs = art.model.springs
    out = motion.evaluate(motion.MotionGeometry.of(layout, springs.D, springs.e), x, xd, parameter_vector(art.mechanism))
    nb = len(layout.bodies)
    per_body = out[:, :6 * nb].reshape(n, nb, 6)
    rotation, omega = run["rotation"][:n], run["omega"][:n]
    com = np.array([b.com for b in model.bodies], dtype=float)
    com_global = np.einsum("tbij,bj->tbi", rotation, com)
    v_origin = run["velocity_com"][:n] - np.cross(omega, com_global)
    origin = poses_from_nc(layout, x)[0]
    ke = run["kinetic_energy"][:n]
    pe = -np.einsum("b,tbi,i->t", [b.mass for b in model.bodies], run["origin"][:n] + com_global,
                    np.asarray(model.gravity, dtype=float))
    if model.springs:
        lengths, _ = reference.spring_states(model, {**run, **{k: run[k][:n] for k in
                                                              ("t", "origin", "rotation", "velocity_com", "omega")}})
        for i, s in enumerate(model.springs):
            pe = pe + s.potential(lengths[:, i] - s.length)
    pe_err = out[:, -1] - pe
    return {"position": nrmse(origin, run["origin"][:n]), "velocity": nrmse(per_body[..., :3], v_origin),
            "angular": nrmse(per_body[..., 3:], omega), "ke": float(np.abs(out[:, -2] - ke).max() / ke.max()),
            "pe": float(np.abs(pe_err - pe_err.mean()).max() / ke.max()), "pe_range": float(np.ptp(pe) / ke.max())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=list(NAMES))
    ap.add_argument("--models", type=Path, default=ROOT / "out" / "bench")
    args = ap.parse_args(argv)
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    print("| mechanism | run | position NRMSE % | velocity NRMSE % | angular velocity NRMSE % | kinetic energy err | "
          "potential energy err (up to a constant) | potential's range / max kinetic |")
    print("|---|---|---|---|---|---|---|---|")
    missed = []
    for name in args.names:
        folder = ensure_runs(name)
        model_dir = args.models / f"{name}-autoencoder-w1"
        if not (model_dir / "model.json").exists():
            train(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], TrainConfig(dof=DOF[name]), model_dir)
        art = load_artifact(model_dir)
        for excitation in RUNS:
            r = compare(art, name, excitation)
            print(f"| {name} | {excitation} | {100 * r['position']:.3f} | {100 * r['velocity']:.3f} | "
                  f"{100 * r['angular']:.3f} | {r['ke']:.1e} | {r['pe']:.1e} | {r['pe_range']:.1f} |", flush=True)
            allowed = max(2.0 * r["position"], 1e-3)
            if r["velocity"] > allowed or r["angular"] > allowed:
                missed.append(f"{name}/{excitation}: velocity NRMSE {100 * r['velocity']:.3f} / angular "
                              f"{100 * r['angular']:.3f} % above {100 * allowed:.3f} %")
            if r["ke"] > 1e-2 or r["pe"] > 1e-2:
                missed.append(f"{name}/{excitation}: energy error {max(r['ke'], r['pe']):.1e} of the largest kinetic "
                              "energy, above 1 %")
    print()
    print("NRMSE: rms error over the rms variation, all bodies and axes; energy errors relative to the run's largest "
          "kinetic energy")
    for m in missed:
        print(f"target missed: {m}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
