"""The misuse matrix of the native FMUs: ``python benchmarks/fmu_misuse.py [--out DIR] [--no-valgrind]``.

Trains small models briefly (robustness does not depend on accuracy) on Exudyn runs: the
four-bar (1 DOF) and the two-link arm (2 DOF) with the autoencoder, and from the four-bar's
chart a node model and a local-PCA model.  Exports each as every native variant its reducer
has (FMI 2/3 x co-simulation/model exchange; local-PCA: co-simulation only) and runs, each
case in a fresh process of ``tests/c_host/misuse.c``:

* every state x every call of the standard's tables (``tests/c_host/misuse.py``) and the named
  cases (NULL pointers, non-finite values, times, FMU states), natively;
* the named cases again under valgrind (invalid accesses, memory definitely lost);
* 20,000 instantiate / two unreleased FMU states / free cycles: resident memory per cycle.

Prints one markdown table; exits 1 if any class is not 0 or the memory grows by 10 B per cycle
or more.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def models(out: Path) -> dict[str, Path]:
    from benchmarks.targets import References
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.local_pca.config import LocalPcaConfig
    from mc2fmu.reducers.node.config import NodeReducerConfig

    refs = References(out / "reference")
    made = {}
    plans = [("four_bar autoencoder", "four_bar", None, TrainConfig(dof=1, samples=300, adam_epochs=40, lbfgs_iters=40)),
             ("two_bar autoencoder (2 DOF)", "two_bar", None,
              TrainConfig(dof=2, samples=300, adam_epochs=40, lbfgs_iters=60)),
             ("four_bar node", "four_bar", "node", None),
             ("four_bar local-pca", "four_bar", "local-pca", None)]
    for label, name, reducer, cfg in plans:
        folder = out / label.split(" (")[0].replace(" ", "-")
        run = refs(name, "train")
        mech = Path(run["path"]).parent.parent / "mechanism.toml"
        if reducer == "node":
            cfg = NodeReducerConfig(dof=1, from_model=str(made["four_bar autoencoder"]), node_hidden=(32, 32),
                                    node_epochs=10)
        elif reducer == "local-pca":
            cfg = LocalPcaConfig(dof=1, from_model=str(made["four_bar autoencoder"]))
        if not (folder / "model.json").exists():
            print(f"training {label} ...", file=sys.stderr, flush=True)
            train(mech, [run["path"]], cfg, folder, **({"reducer": reducer} if reducer else {}))
        made[label] = folder
    return made


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-misuse")
    ap.add_argument("--no-valgrind", action="store_true", help="skip the valgrind runs")
    args = ap.parse_args(argv)

    from mc2fmu.fmu.export import export_fmu
    from tests.c_host import misuse
    from tests.c_host.run import have_valgrind

    args.out.mkdir(parents=True, exist_ok=True)
    exe = misuse.build(args.out)
    use_valgrind = have_valgrind() and not args.no_valgrind
    rows, failed = [], False
    for label, model in models(args.out).items():
        interfaces = ("cs",) if "local-pca" in label else ("cs", "me")
        for fmi in (2, 3):
            for iface in interfaces:
                tag = f"{model.name}-fmi{fmi}-{iface}"
                fmu = args.out / f"{tag}.fmu"
                export_fmu(model, fmu, "native", fmi, iface)
                variant = misuse.Variant.unpack(fmu, args.out / tag, iface)
                cases = variant.cases(exe)
                counts, bad = misuse.run_matrix(exe, variant, cases)
                named = misuse.named_cases(exe)
                if use_valgrind:
                    vg, vbad = misuse.run_matrix(exe, variant, named, wrapper=misuse.VALGRIND, timeout=300)
                    counts["memcheck"] = vg["memcheck"] + vg["crash"]
                    bad += vbad
                rss = misuse.run_case(exe, variant, "leak_cycles").rss_per_cycle
                for outcome in bad:
                    print(f"{tag} {outcome.case}: {outcome.problems}\n{outcome.stderr[-800:]}", file=sys.stderr)
                failed |= bool(bad) or rss is None or rss >= 10
                rows.append((label, f"FMI {fmi} {iface.upper()}", len(cases), counts, rss))
                print(f"{label}, FMI {fmi} {iface}: {counts}", file=sys.stderr, flush=True)
    memcheck = "valgrind, named cases" if use_valgrind else "valgrind (not run)"
    print(f"| model | variant | cases | crash | hang | OK with non-finite | OK, forbidden | legal refused | {memcheck} "
          "| RSS per cycle, 2 unreleased states |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, variant, n, c, rss in rows:
        print(f"| {label} | {variant} | {n} | {c['crash']} | {c['hang']} | {c['ok_nonfinite']} | {c['ok_forbidden']} "
              f"| {c['legal_refused']} | {c['memcheck'] if use_valgrind else 'n/a'} | {rss:.2f} B |")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
