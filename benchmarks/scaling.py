"""How training and the FMU scale with the mechanism's size, and issue 43's targets at 6 DOF.

    python benchmarks/scaling.py [--out out/bench-scaling] [--rows NAME:MODE ...] [--reuse]

Each row trains one mechanism with every default (`mc2fmu train`; learnt coordinates, with
``--dof auto`` on the machines and the linkages' known DOF, or known ones with the suite's
coordinates, benchmarks/train_accuracy.py KNOWN) on its 10 s ``train`` run, one job, then
measures:

* training: the whole `train` command's seconds, Adam and L-BFGS seconds (from the training's
  progress records), L-BFGS iterations and milliseconds per L-BFGS iteration;
* accuracy: position NRMSE on ``train`` and the held-out in-range runs (``low``, ``shape``),
  and on ``high`` when the envelope flag first rose and when the error first passed 10 %;
* the native FMU (FMI 2 co-simulation, 1 ms steps of the ``low`` run): microseconds per step in
  the plain-C host (q only, best of 3 processes of 5 runs each) and the largest body-origin difference from `mc2fmu
  simulate` over the run (fmpy);
* for the machines (4-10 DOF): the small-oscillation frequencies without the dampers (the
  mechanism's undamped variant: `mc2fmu linearize --mechanism` at the static equilibrium under
  the static inputs, against the engine's free oscillation after a pulse,
  examples.reference.undamped_modes), and the Modelica export compiled with pymoca
  (learnt rows: seconds; its der(qd) against the FMU's at 3 states, relative).

Then the cost's growth: power laws ``c * DOF^a`` and ``c * bodies^b`` fitted (least squares in
logs) to the learnt rows' milliseconds per iteration, L-BFGS iterations, training seconds and
FMU microseconds per step.

Exits 1 when a target of issue 43 is missed on the 6-DOF hexapod (both modes): train at most
0.3 %, held-out at most 0.5 %, the `train` command at most 300 s, `high` flagged before its
error passes 10 % (met if it never does), the FMU at most 20 us per step and equal to
`simulate` to 1e-9 m, every frequency within 1 % of the engine's, and (learnt rows) the Modelica
export compiling with der(qd) within 1e-10 of the FMU's.  Timings need a quiet
machine: run nothing beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, KNOWN, ensure_runs, evaluate, native_cost  # noqa: E402

ROWS = ["four_bar:learnt", "five_bar:learnt", "three_rrr:learnt", "half_car:learnt", "half_car:known",
        "hexapod:learnt", "hexapod:known"]
MACHINES = ("half_car", "hexapod")
#: issue 43's targets, asserted on these mechanisms (both modes)
TARGET_MECHANISMS = ("hexapod",)
TARGETS = {"train_nrmse": 0.003, "held_out_nrmse": 0.005, "train_s": 300.0, "fmu_us": 20.0, "fmu_vs_simulate_m": 1e-9,
           "frequency": 0.01}


def train_row(name: str, mode: str, model_dir: Path, reuse: bool) -> dict:
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    folder = ensure_runs(name)
    meta = model_dir / "scaling.json"
    if reuse and meta.exists() and (model_dir / "model.json").exists():
        return json.loads(meta.read_text())
    # --dof auto on the machines (issue 43's targets are with it); the linkages' DOF as the suite
    # gives it (estimate-dof does not decide the 3-RRR's train run: benchmarks/dof_estimate.py)
    cfg = TrainConfig(dof="auto" if name in MACHINES else DOF[name], coords=KNOWN[name] if mode == "known" else ())
    marks: dict[str, float] = {}

    def progress(e: dict) -> None:
        if "elapsed" in e and e.get("stage") in ("adam", "warmup", "lbfgs"):
            marks[e["stage"]] = float(e["elapsed"])

    t0 = time.perf_counter()
    train(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], cfg, model_dir, progress=progress)
    fit_s = time.perf_counter() - t0
    art = load_artifact(model_dir)
    m = art.training["metrics"]
    adam_s = max([v for k, v in marks.items() if k != "lbfgs"], default=0.0)
    row = {"fit_s": fit_s, "train_s": float(m["train_seconds"]), "adam_s": adam_s,
           "lbfgs_s": marks.get("lbfgs", float("nan")) - adam_s, "lbfgs_iterations": int(m["lbfgs_iterations"]),
           "val_loss": float(m["val_loss"]), "dof": art.dof, "bodies": len(art.mechanism.body_names)}
    meta.write_text(json.dumps(row))
    return row


def fmu_vs_simulate(model_dir: Path, folder: Path, work: Path) -> float:
    """The largest body-origin distance (m) between the native FMU under fmpy and `simulate` on
    the ``low`` run (inf if either of them stops before its end)."""
    from mc2fmu.data.poses import read_run
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.mechanics.natural import nc_from_poses, poses_from_nc
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.simulate import simulate_run
    from mc2fmu.validation.validate import fmu_artifact, validate_run

    work.mkdir(parents=True, exist_ok=True)
    fmu = work / "cs.fmu"
    export_fmu(model_dir, fmu, "native")
    art, mech = load_artifact(model_dir), load_mechanism(folder / "mechanism.toml")
    run_path = folder / "runs" / "low.csv.gz"
    run = read_run(run_path, mech)
    ref = simulate_run(art, nc_from_poses(art.layout, run.origin, run.rotation), run.u)
    if not np.isfinite(ref["x"]).all():
        return float("inf")
    origin = poses_from_nc(art.layout, ref["x"])[0]
    series = validate_run(fmu, fmu_artifact(fmu), mech, run_path)["series"]
    if len(series["t"]) != len(run.t):
        return float("inf")
    return float(np.abs(series["origin"] - origin).max())


def frequencies(name: str, model_dir: Path, work: Path) -> tuple[np.ndarray, np.ndarray, float]:
    """(engine, reduced, largest relative error) without the dampers: the engine's
    small-oscillation frequencies (Hz) from its free oscillation
    (:func:`examples.reference.undamped_modes`, one per group of modes closer than 0.005 Hz) and
    `mc2fmu linearize --mechanism` with the undamped variant's file at the static equilibrium
    under the static inputs (|Im lambda| / 2 pi, ascending), each reduced mode against its
    group's frequency."""
    from examples.reference import mechanism_dict, model, undamped, undamped_modes
    from mc2fmu.control.linearize import linearize
    from mc2fmu.mechanics.mechanism import mechanism_toml

    engine, groups = undamped_modes(name)
    work.mkdir(parents=True, exist_ok=True)
    variant = work / "undamped.toml"
    variant.write_text(mechanism_toml(mechanism_dict(undamped(name))))
    lin = linearize(model_dir, u=list(model(name).static_inputs), mechanism=variant)
    reduced = np.sort([abs(m["imag"]) / (2 * np.pi) for m in lin.modes() if m["oscillatory"]])
    if len(reduced) != sum(len(g) for g in groups):
        return engine, reduced, float("inf")
    err = max(abs(reduced[i] / engine[g] - 1) for g, members in enumerate(groups) for i in members)
    return engine, reduced, float(err)


#: states at which the Modelica model's der(qd) is compared with the FMU's: the test harness
#: (tests/modelica_host.py) solves pymoca's residual equations with CasADi's Newton method on a
#: dense Jacobian, about a minute per state at 6 DOF
POINTS = 3


def modelica(model_dir: Path, work: Path) -> tuple[float, float]:
    """(pymoca's compile seconds, the largest der(qd) difference from the native FMI 3 ME FMU
    at POINTS states over the envelope, relative to the largest |qdd|)."""
    from benchmarks.modelica import der_qd_difference
    from mc2fmu.modelica.export import export_modelica
    from tests.modelica_host import CompiledModel

    work.mkdir(parents=True, exist_ok=True)
    mo = work / "ReducedModel.mo"
    export_modelica(model_dir, mo)
    cm = CompiledModel(mo)
    return cm.compile_seconds, der_qd_difference(model_dir, cm, work, POINTS)


def power_law(rows: list[dict], key: str, size: str) -> tuple[float, float, float]:
    """``key ~ c size^a`` (``size``: "dof" or "bodies"): (c, a, rms residual in log) by least
    squares in logs.  The bundled mechanisms' body counts grow with their DOF (1-3, 2-4, 3-7,
    4-7, 6-13), so the two cannot be told apart in one fit: each gets its own."""
    X = np.array([[1.0, np.log(r[size])] for r in rows])
    y = np.log([r[key] for r in rows])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(np.exp(coef[0])), float(coef[1]), float(np.sqrt(np.mean((X @ coef - y) ** 2)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-scaling")
    ap.add_argument("--rows", nargs="+", default=ROWS, metavar="NAME:MODE", help="mechanism:learnt|known rows")
    ap.add_argument("--reuse", action="store_true", help="reuse the models (and their training figures) in --out")
    args = ap.parse_args(argv)

    rows, missed = [], []
    for spec in args.rows:
        name, mode = spec.split(":")
        folder = ensure_runs(name)
        model_dir = args.out / f"{name}-{mode}"
        row = {"name": name, "mode": mode, **train_row(name, mode, model_dir, args.reuse)}
        res = evaluate(model_dir, folder)
        row["nrmse"] = {e: float(r["nrmse"]) for e, r in res.items()}
        row["flag"], row["err10"] = res["high"]["flag"], res["high"]["err10"]
        with tempfile.TemporaryDirectory() as tmp:
            # best of 3 host processes (each the best of 5 runs): on this machine one process's
            # figure for the same FMU moved between 15 and 23 us
            row["fmu_us"] = min(native_cost(model_dir, folder, Path(tmp) / f"cost{i}") for i in range(3))
            row["fmu_diff"] = fmu_vs_simulate(model_dir, folder, Path(tmp) / "parity")
            if name in MACHINES:
                engine, reduced, row["freq_err"] = frequencies(name, model_dir, Path(tmp) / "frequencies")
                row["engine_hz"], row["reduced_hz"] = engine.tolist(), reduced.tolist()
                row["modelica_s"], row["modelica_diff"] = float("nan"), float("nan")
                try:
                    if mode == "learnt":  # the same equations as the known rows'
                        row["modelica_s"], row["modelica_diff"] = modelica(model_dir, Path(tmp) / "modelica")
                except Exception as exc:  # a failure to compile is a figure here, reported in the table
                    row["modelica_s"], row["modelica_diff"] = float("nan"), float("inf")
                    print(f"{spec}: the Modelica export did not compile with pymoca: {exc}", flush=True)
        rows.append(row)
        print(f"{spec}: {row['dof']} DOF, {row['bodies']} bodies, train {row['fit_s']:.0f} s "
              f"({row['lbfgs_iterations']} L-BFGS iterations), NRMSE " +
              " / ".join(f"{100 * v:.3f}" for v in row["nrmse"].values()) + f" %, FMU {row['fmu_us']:.1f} us/step",
              flush=True)
        if name in TARGET_MECHANISMS:
            held = max(row["nrmse"]["low"], row["nrmse"]["shape"])
            checks = [(row["nrmse"]["train"] <= TARGETS["train_nrmse"], f"train NRMSE {100 * row['nrmse']['train']:.3f} %"),
                      (held <= TARGETS["held_out_nrmse"], f"held-out NRMSE {100 * held:.3f} %"),
                      (row["fit_s"] <= TARGETS["train_s"], f"train command {row['fit_s']:.0f} s"),
                      (row["err10"] is None or (row["flag"] is not None and row["flag"] <= row["err10"]),
                       f"high flagged at {row['flag']} s, 10 % error at {row['err10']} s"),
                      (row["fmu_us"] <= TARGETS["fmu_us"], f"FMU {row['fmu_us']:.1f} us/step"),
                      (row["fmu_diff"] <= TARGETS["fmu_vs_simulate_m"], f"FMU vs simulate {row['fmu_diff']:.1e} m"),
                      (row["freq_err"] <= TARGETS["frequency"], f"frequencies {100 * row['freq_err']:.2f} %"),
                      (mode != "learnt" or row["modelica_diff"] <= 1e-10, f"Modelica der(qd) {row['modelica_diff']:.1e}")]
            missed += [f"{spec}: {what}" for ok, what in checks if not ok]

    print("\n| mechanism | coordinates | DOF | bodies | train command s | Adam s | L-BFGS s | L-BFGS iterations | "
          "ms / iteration | NRMSE train % | low % | shape % | high flag s | high 10 % at s | FMU us / step | "
          "FMU - simulate m |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        nr = r["nrmse"]
        flag = "-" if r["flag"] is None else f"{r['flag']:.3f}"
        err10 = "-" if r["err10"] is None else f"{r['err10']:.3f}"
        print(f"| {r['name']} | {r['mode']} | {r['dof']} | {r['bodies']} | {r['fit_s']:.0f} | {r['adam_s']:.0f} | "
              f"{r['lbfgs_s']:.0f} | {r['lbfgs_iterations']} | {1e3 * r['lbfgs_s'] / max(r['lbfgs_iterations'], 1):.1f} | "
              f"{100 * nr['train']:.3f} | {100 * nr['low']:.3f} | {100 * nr['shape']:.3f} | "
              f"{flag} | {err10} | "
              f"{r['fmu_us']:.1f} | {r['fmu_diff']:.1e} |")
    machines = [r for r in rows if "engine_hz" in r]
    if machines:
        print("\n| mechanism | coordinates | engine undamped frequencies Hz | reduced model Hz | largest error | "
              "pymoca compile s | Modelica der(qd) vs FMU |")
        print("|---|---|---|---|---|---|---|")
        for r in machines:
            fmt = ", ".join
            mo = ("- | -" if np.isnan(r["modelica_diff"]) else f"{r['modelica_s']:.0f} | {r['modelica_diff']:.1e}")
            print(f"| {r['name']} | {r['mode']} | {fmt(f'{f:.4g}' for f in r['engine_hz'])} | "
                  f"{fmt(f'{f:.4g}' for f in r['reduced_hz'])} | {100 * r['freq_err']:.2f} % | {mo} |")
    learnt = [r for r in rows if r["mode"] == "learnt"]
    if len(learnt) >= 3:
        for r in learnt:
            r["ms_per_it"] = 1e3 * r["lbfgs_s"] / max(r["lbfgs_iterations"], 1)
        print("\n| learnt rows | c DOF^a: c | a | rms residual (log) | c bodies^b: c | b | rms residual (log) |")
        print("|---|---|---|---|---|---|---|")
        for key, what in (("ms_per_it", "ms per L-BFGS iteration"), ("lbfgs_iterations", "L-BFGS iterations"),
                          ("fit_s", "train command s"), ("fmu_us", "FMU us per step")):
            by_dof, by_bodies = power_law(learnt, key, "dof"), power_law(learnt, key, "bodies")
            print(f"| {what} | {by_dof[0]:.3g} | {by_dof[1]:.2f} | {by_dof[2]:.2f} | {by_bodies[0]:.3g} | "
                  f"{by_bodies[1]:.2f} | {by_bodies[2]:.2f} |")
    if missed:
        print("\nmissed targets (issue 43):\n  " + "\n  ".join(missed))
        return 1
    print("\nissue 43's targets met on " + ", ".join(TARGET_MECHANISMS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
