"""A controller designed on the reduced model, on its FMU and on the full Exudyn model.

    python benchmarks/closed_loop.py [MECHANISMS...] [--models DIR] [--plot-dir DIR]

For each 1-DOF crank mechanism (default four_bar slider_crank spatial_four_bar) runs
``examples/control/closed_loop.py`` (LQR + static-torque feedforward designed on the reduced
model's linearisation, 1 ms sampling, 10 s crank-angle reference) with the model
``DIR/<name>-autoencoder-w1`` of ``benchmarks/train_accuracy.py`` when it exists (else trains
one), and prints one table: rms and peak tracking error on the reduced model's FMU (fmpy) and
on the full model (Exudyn), their ratio, the cost of one 1 ms step of each plant, and the
largest difference of the same loop run on the FMU in libcosim from the fmpy run.
Plots go to ``--plot-dir`` (default out/closed_loop).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.control import closed_loop  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mechanisms", nargs="*", default=["four_bar", "slider_crank", "spatial_four_bar"])
    ap.add_argument("--models", default=str(ROOT / "out" / "bench"))
    ap.add_argument("--plot-dir", default=str(ROOT / "out" / "closed_loop"))
    args = ap.parse_args(argv)
    rows = []
    for name in args.mechanisms:
        model = Path(args.models) / f"{name}-autoencoder-w1"
        argv_ = [name, "--plot", str(Path(args.plot_dir) / f"{name}.png")]
        if (model / "model.json").exists():
            argv_ += ["--model", str(model)]
        rows.append(closed_loop.main(argv_))
    print()
    print("| mechanism | closed-loop modes Hz | reduced rms mrad | full rms mrad | full / reduced | reduced peak mrad "
          "| full peak mrad | responses differ by mrad | FMU us/step | Exudyn us/step | libcosim - fmpy mrad "
          "| libcosim us/step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mechanism']} | {', '.join(f'{f:.2f}' for f in r['closed_loop_hz'])} | {1e3 * r['rms']['fmu']:.3f} | "
              f"{1e3 * r['rms']['engine']:.3f} | {r['ratio']:.2f} | {1e3 * r['peak']['fmu']:.3f} | "
              f"{1e3 * r['peak']['engine']:.3f} | {1e3 * r['difference']:.4f} | {r['fmu']['us_per_step']:.1f} | "
              f"{r['engine']['us_per_step']:.0f} | "
              + ("- | - |" if r["libcosim"] is None else
                 f"{1e3 * r['libcosim_difference']:.1g} | {r['libcosim']['us_per_step']:.1f} |"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
