"""The Modelica export: export time, file size, pymoca and rumoca times, agreement with the FMU.

    python benchmarks/modelica.py [NAMES...] [--models DIR] [--out out/bench-modelica]

For each suite mechanism's default-setting model (``DIR/<name>-autoencoder-w1`` as
benchmarks/train_accuracy.py leaves it, default out/bench, else trained there): the time of
``mc2fmu export --format modelica`` and the file's size; pymoca 0.12's compile time to CasADi
(tests/modelica_host.py) and rumoca's parse-and-flatten time; and the largest difference of
the compiled model's der(qd) from the native FMI 3 model-exchange FMU's (fmpy) at 16 states
spread over the training envelope, relative to the largest |qdd| (the suite asserts 1e-10).
Prints a table; exits 1 if a difference is above 1e-10.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_accuracy import DOF, UNKNOWN_FORCES, ensure_runs  # noqa: E402
from examples.reference import MECHANISMS  # noqa: E402

TOLERANCE = 1e-10


def der_qd_difference(model: Path, cm, work: Path, points: int) -> float:
    """The largest difference of the compiled Modelica model ``cm``'s der(qd) from the native
    FMI 3 model-exchange FMU's (fmpy) at ``points`` states spread over the training envelope,
    relative to the largest |qdd|."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.fmu.platforms import host_name
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points
    from tests.fmu_helpers import run_json, start_values

    fmu = work / "me.fmu"
    export_fmu(model, fmu, "native", 3, "me", platforms=host_name())
    art = load_artifact(model)
    pts = sample_points(art.envelope, art.model, points, seed=11)
    q, qd, u = (np.concatenate([p[k] for p in pts]) for k in ("q", "qd", "u"))
    res = run_json(ROOT / "tests" / "fmpy_sim.py", {"kind": "jacobian", "fmu": str(fmu), "start": start_values(model),
                                                     "states": np.hstack([q, qd]).tolist(), "u": u.tolist()}, work)
    idx = [res["unknowns"].index(f"der(qd[{i + 1}])") for i in range(art.dof)]
    want = np.array(res["values"])[:, idx]
    p = cm.parameter_vector()
    got = np.array([cm.qdd(q[k], qd[k], u[k], p) for k in range(len(q))])
    return float(np.abs(got - want).max() / np.abs(want).max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=[m for m in MECHANISMS if m not in UNKNOWN_FORCES])
    ap.add_argument("--models", type=Path, default=ROOT / "out" / "bench",
                    help="where benchmarks/train_accuracy.py left the default models (<name>-autoencoder-w1); "
                         "missing ones are trained there")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-modelica")
    args = ap.parse_args(argv)

    import rumoca

    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from tests.modelica_host import CompiledModel

    rows, bad = [], []
    for name in args.names:
        model = args.models / f"{name}-autoencoder-w1"
        if not (model / "model.json").exists():
            folder = ensure_runs(name)
            train(folder / "mechanism.toml", [folder / "runs" / "train.csv.gz"], TrainConfig(dof=DOF[name]), model)
        work = args.out / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        mo = work / "ReducedModel.mo"
        t0 = time.perf_counter()
        summary = export_modelica(model, mo)
        export_s = time.perf_counter() - t0
        src = mo.read_text()
        t0 = time.perf_counter()
        diagnostics = rumoca.validate_source(src)
        rumoca.Session().loads(src, model="ReducedModel").summary()
        rumoca_s = time.perf_counter() - t0
        cm = CompiledModel(mo)
        art = load_artifact(model)
        diff = der_qd_difference(model, cm, work, 16)
        rows.append((name, art.dof, summary["bytes"], export_s, cm.compile_seconds, rumoca_s, len(diagnostics), diff))
        if not diff <= TOLERANCE or diagnostics:
            bad.append(name)
        print(f"{name}: {summary['bytes'] / 1024:.0f} kB, export {export_s:.2f} s, pymoca {cm.compile_seconds:.1f} s, "
              f"rumoca {rumoca_s:.2f} s, der(qd) vs FMU {diff:.1e}", flush=True)

    print("\n| mechanism | DOF | file | export | pymoca compile | rumoca | rumoca diagnostics | max der(qd) difference |")
    print("|---|---|---|---|---|---|---|---|")
    for name, dof, size, export_s, compile_s, rumoca_s, ndiag, diff in rows:
        print(f"| {name} | {dof} | {size / 1024:.0f} kB | {export_s:.2f} s | {compile_s:.1f} s | {rumoca_s:.2f} s | "
              f"{ndiag} | {diff:.1e} |")
    if bad:
        print(f"above {TOLERANCE:g} or with diagnostics: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
