"""Tunable physics against the engine: a trained model run with a variant's physical parameters.

    python benchmarks/variants.py [NAMES...] [--models DIR] [--out out/bench-variants] [--no-cost]
                                  [--curvature-weight W]

For each suite mechanism, the default-setting model (learnt coordinates, seed 0:
``DIR/<name>-autoencoder-w1`` as benchmarks/train_accuracy.py leaves it, default out/bench,
else trained here with the defaults into that folder; with ``--curvature-weight W`` the
defaults but ``L_curv`` at weight W, trained into ``OUT/<name>-curvature-W``) is run
on Exudyn simulations of physical variants of its mechanism, each held in the reference
configuration by its own static inputs (re-solved for the variant) and driven by the ``low``
excitation for 10 s, inside the training range:

* ``mass``: the last body 1.6 times as heavy (mass and inertia), the first 0.8 times;
* ``com``: the last body's centre of mass moved off its trained point by 0.3 of the body's
  RMS mass radius along its x axis and 0.15 along y (a payload off-centre);
* ``gravity``: gravity tilted by 30 degrees (about z for a planar mechanism, else about x);
* ``spring``: every spring's stiffness x1.3 and damping x1.5 (mechanisms with springs);
* ``point``: the first force input applied 0.3 body radii further along the body's x axis
  (mechanisms with a force input).

A variant whose static inputs lie outside the trained input range starts outside the
training envelope (the envelope output says so from t = 0); its row says when the rollout
first left the envelope, and the targets are asserted for the variants that stay inside.
The acceleration error (the model's accelerations along the engine's run, from the encoded
run's second differences every 50 ms, rms over the rms acceleration) of the variant and of the
held-out ``low`` run tell the chart's accuracy from the rollout's growth of it.

Per variant: the position NRMSE of `mc2fmu simulate` with the trained parameters and with
the variant's file; that figure over the model's held-out NRMSE (the worse of the ``low`` and
``shape`` runs; target <= 2); the small-oscillation frequencies of `mc2fmu linearize
--mechanism` against the engine's free oscillations about the variant's equilibrium (as
benchmarks/linearize.py; target within 1 %).  Then, unless ``--no-cost``, the native FMI 2
co-simulation FMU's cost per 1 ms step in the plain-C host (tests/c_host/host.c, best of 5),
with its exported parameters and with the ``mass`` variant's set through FMI; and the python
backend's (:func:`python_step_cost`), with the dynamics graphs holding the physics as
constants (as they were exported before they took it) and taking it as inputs: one call of
the step graph under onnxruntime, and one 1 ms doStep of the FMU under fmpy (constants;
inputs at the start values; inputs with the ``mass`` variant set).
Prints the tables; exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.linearize import resolvable_groups  # noqa: E402
from benchmarks.train_accuracy import DOF, UNKNOWN_FORCES, ensure_runs, evaluate  # noqa: E402
from examples import _exudyn, reference  # noqa: E402
from examples.reference import MECHANISMS  # noqa: E402
from tests.oracles import acceleration_error  # noqa: E402

HELD_OUT = ("low", "shape")
NRMSE_RATIO_TARGET = 2.0
FREQUENCY_TARGET = 0.01


def _radius(body) -> float:
    J = np.asarray(body.inertia, dtype=float)
    J = np.diag(J) if J.ndim == 1 else J
    return float(np.sqrt(max(np.trace(J), 1e-30) / (2.0 * body.mass)))


def variants_of(base) -> dict:
    """The variants of the module docstring (reference :class:`examples._model.Model` objects)."""
    out = {}
    first, last = base.bodies[0], base.bodies[-1]

    def scaled(b, k):
        J = np.asarray(b.inertia, dtype=float) * k
        return replace(b, mass=k * b.mass, inertia=tuple(map(tuple, J.tolist())) if J.ndim == 2 else tuple(J.tolist()))

    out["mass"] = replace(base, bodies=tuple(scaled(b, 1.6) if b is last else scaled(b, 0.8) if b is first else b
                                             for b in base.bodies))
    r = _radius(last)
    com = tuple((np.asarray(last.com, dtype=float) + r * np.array([0.3, 0.15, 0.0])).tolist())
    out["com"] = replace(base, bodies=tuple(replace(b, com=com) if b is last else b for b in base.bodies))
    g = np.asarray(base.gravity, dtype=float)
    c, s = np.cos(np.radians(30.0)), np.sin(np.radians(30.0))
    tilt = (np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) if abs(g[2]) < 0.5 * np.linalg.norm(g) else
            np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]))
    out["gravity"] = replace(base, gravity=tuple((tilt @ g).tolist()))
    if base.springs:
        out["spring"] = replace(base, springs=tuple(replace(sp, stiffness=1.3 * sp.stiffness, damping=1.5 * sp.damping)
                                                    for sp in base.springs))
    force = next((i for i in base.inputs if i.kind == "force" and i.point is not None), None)
    if force is not None:
        body = next(b for b in base.bodies if b.name == force.body)
        point = tuple((np.asarray(force.point, dtype=float) + 0.3 * _radius(body) * np.array([1.0, 0.0, 0.0])).tolist())
        out["point"] = replace(base, inputs=tuple(replace(i, point=point) if i is force else i for i in base.inputs))
    return out


def engine_run(m, folder: Path) -> tuple[Path, Path, object]:
    """The variant held by its own static inputs, its mechanism file and its ``low`` run."""
    from mc2fmu.data.poses import write_run
    from mc2fmu.mechanics.mechanism import mechanism_toml

    u, residual = _exudyn.support_inputs(replace(m, static_inputs=None))
    m = replace(m, static_inputs=tuple(float(v) for v in u))
    folder.mkdir(parents=True, exist_ok=True)
    mech = folder / "mechanism.toml"
    mech.write_text(mechanism_toml(reference.mechanism_dict(m)))
    run_path = folder / "low.csv.gz"
    if not run_path.exists():
        run = reference.simulate(m, "low", t_end=10.0)
        write_run(run_path, run["t"], run["body_names"], run["origin"], run["rotation"], run["input_names"], run["u"])
    return mech, run_path, m


def frequencies(model_dir: Path, m, mech: Path) -> tuple[np.ndarray, np.ndarray, float]:
    """Reduced (linearize --mechanism) and engine small-oscillation frequencies (Hz) about the
    variant's equilibrium, and the largest relative difference (NaN: no oscillatory mode)."""
    from mc2fmu.control.linearize import linearize

    lin = linearize(model_dir, u=list(m.static_inputs), mechanism=mech)
    reduced = np.sort([abs(md["imag"]) / (2 * np.pi) for md in lin.modes() if md["oscillatory"]])
    if not reduced.size:
        return reduced, np.zeros(0), float("nan")
    ref = reference.small_oscillations(m)
    groups = resolvable_groups(reduced, float(ref["t"][-1] - ref["t"][0]))
    engine = reference.oscillation_frequencies(ref["t"], ref["origin"].reshape(len(ref["t"]), -1), len(groups),
                                               damped=True)
    if len(engine) != len(groups):
        return reduced, engine, float("inf")
    err = max(abs(reduced[i] / engine[g] - 1) for g, members in enumerate(groups) for i in members)
    return reduced, engine, float(err)


def step_cost(model_dir: Path, folder: Path, work: Path, parameters: dict[str, float]) -> float:
    """us per 1 ms step of the native FMI 2 co-simulation FMU in the plain-C host (q only), on
    the held-out ``low`` run, with ``parameters`` set before initialisation."""
    from mc2fmu.data.poses import read_run
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.fmu.platforms import host_name
    from mc2fmu.mechanics.mechanism import load_mechanism
    from tests.c_host.run import build_host, extract, run_host

    work.mkdir(parents=True, exist_ok=True)
    mech = load_mechanism(folder / "mechanism.toml")
    run = read_run(folder / "runs" / "low.csv.gz", mech)
    fmu = work / "native.fmu"
    if not fmu.exists():
        export_fmu(model_dir, fmu, "native", platforms=host_name())
    lib, guid, md = extract(fmu, work / "fmu")
    init = json.loads((model_dir / "model.json").read_text())["initial_state"]
    start = ({f"q_start[{i + 1}]": v for i, v in enumerate(init["q"])}
             | {f"qd_start[{i + 1}]": v for i, v in enumerate(init["qd"])} | parameters)
    n = len(run.t) - 1
    text = run_host(build_host(work), lib, guid, md, mode="bench", repeats=5, start=start, inputs=list(mech.input_names),
                    rows=run.u[:n], n_steps=n, work=work, outputs=["q[1]"])[1]
    return float(text.split("us_per_step")[1].split()[0])


def python_step_cost(model_dir: Path, folder: Path, work: Path, parameters: dict[str, float], repeats: int = 5,
                     calls: int = 2000, stop: float = 2.0) -> tuple[float, ...]:
    """The python backend's cost, its dynamics graphs exported from the same model with the
    physics as constants (as graphs were before they took them) and as inputs (a python FMU
    with physical parameters), interleaved in a shuffled order, best of ``repeats``: us per call
    of the step graph under onnxruntime (the one graph a grid step runs), then us per 1 ms doStep of the FMU under
    fmpy (``stop`` s of the held-out ``low`` run's inputs) with the constants, with the inputs
    at the start values and with ``parameters`` set."""
    import tempfile
    from dataclasses import replace as dc_replace

    from fmpy import simulate_fmu

    from mc2fmu.data.poses import read_run
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.models.artifact import load_artifact, save_artifact
    from mc2fmu.models.envelope import sample_points
    from mc2fmu.reducers.autoencoder.graphs import graph_specs, onnx_graphs, physics_feeds, session
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    work.mkdir(parents=True, exist_ok=True)
    art = load_artifact(model_dir)
    rt = art.model
    init = art.initial_state
    start = {f"q_start[{i + 1}]": float(v) for i, v in enumerate(init.q)} | \
        {f"qd_start[{i + 1}]": float(v) for i, v in enumerate(init.qd)}
    mech = load_mechanism(folder / "mechanism.toml")
    run = read_run(folder / "runs" / "low.csv.gz", mech)
    signals = np.array([(t, *u) for t, u in zip(run.t, np.atleast_2d(run.u))],
                       dtype=[("time", np.float64)] + [(n, np.float64) for n in mech.input_names])
    point = sample_points(art.envelope, rt, 1)[0]
    graphs, fmus, feeds = {}, {}, {}
    for inputs in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            files, _ = onnx_graphs(from_runtime(rt), rt, art.envelope, tmp, check_points=4, physics_inputs=inputs)
        (work / "step.onnx").write_bytes(files["onnx/step.onnx"])
        graphs[inputs] = session(work / "step.onnx")
        feed = {**point, **(physics_feeds(rt, 1)[0] if inputs else {})}
        feeds[inputs] = {k: feed[k] for k in graph_specs(rt.n_u, len(rt.springs), inputs)["step"].inputs}
        copy = work / ("inputs" if inputs else "constants")
        if copy.exists():
            shutil.rmtree(copy)
        save_artifact(copy, dc_replace(art, model=dc_replace(rt, resources=files)))
        fmus[inputs] = work / f"python-{copy.name}.fmu"
        export_fmu(copy, fmus[inputs], "python")
    cases = [("graph", False, None), ("graph", True, None), ("fmu", False, {}), ("fmu", True, {}),
             ("fmu", True, parameters)]
    best = [float("inf")] * len(cases)
    order = np.random.default_rng(0)
    for _ in range(repeats):
        for k in order.permutation(len(cases)):  # no case always first or last
            what, inputs, settings = cases[k]
            t0 = time.perf_counter()
            if what == "graph":
                for _ in range(calls):
                    graphs[inputs].run(["q_next"], feeds[inputs])
                n = calls
            else:
                simulate_fmu(str(fmus[inputs]), stop_time=stop, output_interval=1e-3, start_values=start | settings,
                             input=signals, output=["q[1]"])
                n = round(stop / 1e-3)
            best[k] = min(best[k], 1e6 * (time.perf_counter() - t0) / n)
    return tuple(best)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--models", type=Path, default=ROOT / "out" / "bench",
                    help="where benchmarks/train_accuracy.py left the default models (<name>-autoencoder-w1); "
                         "missing ones are trained there")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-variants")
    ap.add_argument("--curvature-weight", type=float, default=None, metavar="W",
                    help="models trained here with L_curv at weight W (OUT/<name>-curvature-W) instead of --models")
    ap.add_argument("--no-cost", action="store_true", help="skip the native step cost")
    ap.add_argument("--cost-only", action="store_true", help="only the native step cost (on an otherwise idle machine)")
    args = ap.parse_args(argv)

    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.mechanics.variants import parameter_settings, physical_parameters
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.validation.simulate import simulate_file

    rows, costs, missed = [], [], []
    for name in args.names:
        folder = ensure_runs(name)
        model_dir = args.models / f"{name}-autoencoder-w1"
        options = {}
        if args.curvature_weight is not None:
            model_dir = args.out / f"{name}-curvature-{args.curvature_weight:g}"
            options["curvature_weight"] = args.curvature_weight
        if not (model_dir / "model.json").exists():
            train(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"],
                  TrainConfig(dof=DOF[name], **options), model_dir)
        base = reference.model(name)
        held = max(evaluate(model_dir, folder)[e]["nrmse"] for e in HELD_OUT) if not args.cost_only else None
        if not args.cost_only:
            art = load_artifact(model_dir)
            held_acc = acceleration_error(art, folder / "mechanism.toml", folder / "runs" / "low.csv.gz", every=50)
        for tag, m in ({} if args.cost_only else variants_of(base)).items():
            t0 = time.perf_counter()
            mech, run, m = engine_run(m, args.out / "runs" / name / tag)
            trained = simulate_file(model_dir, folder / "mechanism.toml", run, args.out / "sim.csv")["nrmse"]
            sim = simulate_file(model_dir, mech, run, args.out / "sim.csv")
            variant, left = sim["nrmse"], sim["envelope_first_exit"]
            acc = acceleration_error(art.for_mechanism(load_mechanism(mech), mech)[0], mech, run, every=50)
            reduced, engine, f_err = frequencies(model_dir, m, mech)
            ratio = variant / held
            rows.append((name, tag, held, trained, variant, ratio, left, held_acc, acc, engine, reduced, f_err))
            if left is None and not ratio <= NRMSE_RATIO_TARGET:
                missed.append(f"{name}/{tag} (NRMSE x{ratio:.2f})")
            if (np.isfinite(f_err) and not f_err <= FREQUENCY_TARGET) or f_err == float("inf"):
                missed.append(f"{name}/{tag} (frequency {100 * f_err:.2f} %)")
            print(f"{name}/{tag}: held-out {100 * held:.3f} %, trained parameters {100 * trained:.3f} %, variant's "
                  f"{100 * variant:.3f} % (x{ratio:.2f}), left the envelope {left}; acceleration error {acc:.1e} "
                  f"(held-out {held_acc:.1e}); frequencies engine {np.round(engine, 4)} reduced {np.round(reduced, 4)} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if not args.no_cost:
            trained_mech = load_mechanism(folder / "mechanism.toml")
            mech, _, _ = engine_run(variants_of(base)["mass"], args.out / "runs" / name / "mass")
            exposed = {p.name for p in physical_parameters(trained_mech)}
            settings, _ = parameter_settings(trained_mech, load_mechanism(mech), exposed, mech, "the FMU")
            work = args.out / "cost" / name
            costs.append((name, step_cost(model_dir, folder, work, {}), step_cost(model_dir, folder, work, settings),
                          len(settings), *python_step_cost(model_dir, folder, work / "python", settings)))

    if rows:
        print("\n| mechanism | variant | held-out NRMSE | trained parameters | variant's parameters | ratio to held-out "
              "| left the envelope | acceleration error, held-out / variant | engine (Hz) | linearize (Hz) | frequency error |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, tag, held, trained, variant, ratio, left, held_acc, acc, engine, reduced, f_err in rows:
        fmt = ", ".join
        print(f"| {name} | {tag} | {100 * held:.3f} % | {100 * trained:.3f} % | {100 * variant:.3f} % | {ratio:.2f} | "
              f"{'no' if left is None else f'at {left:.2f} s'} | {held_acc:.1e} / {acc:.1e} | "
              f"{fmt(f'{f:.4g}' for f in engine) or '-'} | {fmt(f'{f:.4g}' for f in reduced) or '-'} | "
              f"{'-' if np.isnan(f_err) else f'{100 * f_err:.2f} %'} |")
    if costs:
        print("\n| mechanism | native: us/step, exported parameters | native: `mass` variant set through FMI "
              "| parameters set | python: us/call of the step graph, physics as constants | as inputs "
              "| python: us/doStep, physics as constants | as inputs | as inputs, `mass` variant set |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, default, changed, n, g_const, g_inputs, f_const, f_inputs, f_variant in costs:
            print(f"| {name} | {default:.2f} | {changed:.2f} | {n} | {g_const:.1f} | {g_inputs:.1f} | {f_const:.0f} | "
                  f"{f_inputs:.0f} | {f_variant:.0f} |")
    ratios = [r[5] for r in rows if r[6] is None]
    f_errs = [r[11] for r in rows if np.isfinite(r[11])]
    if not rows:
        return 0
    print(f"\nratio to held-out (variants inside the envelope): median {np.median(ratios):.2f}, worst {max(ratios):.2f} (target <= "
          f"{NRMSE_RATIO_TARGET:g}); frequency error: median {100 * np.median(f_errs):.2f} %, worst "
          f"{100 * max(f_errs):.2f} % (target <= {100 * FREQUENCY_TARGET:g} %)")
    if missed:
        print(f"targets missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
