"""``mc2fmu export --format casadi``: the reduced ODE as a CasADi function.

References: the numpy run-time model (itself tested against torch, torch.func and finite
differences) at states spread over the training envelope, to 1e-12 of the accelerations'
scale there; CasADi's own AD against
``mc2fmu linearize`` (torch AD: two independent differentiations); the MPC example runs and
tracks its reference.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main

ca = pytest.importorskip("casadi")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def models(reference_run, tmp_path_factory):
    """Briefly trained four_bar (1 DOF), two_bar (2 DOF, two inputs) and a four_bar with two damped
    springs: the function is an export, any weights do."""
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    root = tmp_path_factory.mktemp("casadi")
    out = {}
    for name, dof in (("four_bar", 1), ("two_bar", 2), ("macpherson", 1)):
        run = reference_run(name, "train")
        mech = Path(run["path"]).parent.parent / "mechanism.toml"
        fit(mech, [run["path"]], TrainConfig(dof=dof, samples=200, adam_epochs=20, lbfgs_iters=20), root / name)
        out[name] = root / name
    return out


@pytest.mark.parametrize("name", ["four_bar", "two_bar", "macpherson"])
def test_function_equals_the_model_over_the_envelope(models, tmp_path, capsys, name):
    from mc2fmu.control.linearize import Dynamics
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points

    out = tmp_path / "m.casadi"
    assert main(["export", str(models[name]), "--format", "casadi", "-o", str(out)]) == 0
    assert "casadi.Function.load" in capsys.readouterr().out
    fn = ca.Function.load(str(out))
    art = load_artifact(models[name])
    dyn = Dynamics(art.model, art.layout)
    diff, scale, worst_y = 0.0, 1.0, 0.0
    for p in sample_points(art.envelope, art.model, 16, seed=3):
        qdd, origins, _ = fn(p["q"][0], p["qd"][0], p["u"][0])
        ref = art.model.acceleration(p["q"], p["qd"], p["u"])[0]
        diff, scale = max(diff, np.abs(np.array(qdd).ravel() - ref).max()), max(scale, np.abs(ref).max())
        ref_y = dyn.origins(p["q"])[0]
        worst_y = max(worst_y, np.abs(np.array(origins).ravel() - ref_y).max())
    # relative to the accelerations' scale over the envelope: where f_m and G_m nearly cancel, a
    # small qdd carries the rounding of the large terms (CasADi's AD forms J and H differently)
    assert diff / scale <= 1e-12 and worst_y <= 1e-12, (diff / scale, worst_y)


def test_casadi_derivatives_equal_the_linearization(models, tmp_path):
    """CasADi's AD of the exported function and mc2fmu linearize's complex step agree (A, B rows of
    the accelerations, C rows of the origins) at the equilibrium."""
    from mc2fmu.control.casadi_export import export_casadi
    from mc2fmu.control.linearize import linearize
    from mc2fmu.models.artifact import load_artifact

    export_casadi(models["two_bar"], tmp_path / "m.casadi")
    fn = ca.Function.load(str(tmp_path / "m.casadi"))
    u0 = list(load_artifact(models["two_bar"]).initial_state.u)
    lin = linearize(models["two_bar"], u=u0)
    m = len(lin.q)
    q, qd, u = ca.SX.sym("q", m), ca.SX.sym("qd", m), ca.SX.sym("u", len(u0))
    qdd, origins, _ = fn(q, qd, u)
    jac = ca.Function("j", [q, qd, u], [ca.jacobian(qdd, ca.vertcat(q, qd, u)), ca.jacobian(origins, q)])
    F, Y = (np.array(a) for a in jac(lin.q, lin.qd, lin.u))
    exact = np.concatenate([lin.A[m:], lin.B[m:]], 1)
    assert np.abs(F - exact).max() <= 1e-9 * max(1.0, np.abs(exact).max())
    assert np.abs(Y - lin.C[:Y.shape[0], :m]).max() <= 1e-9 * max(1.0, np.abs(Y).max())


def test_refusals(models, tmp_path, capsys):
    assert main(["export", str(models["four_bar"]), "--format", "casadi", "-o", str(tmp_path / "m.fmu")]) == 2
    assert "written as .casadi" in capsys.readouterr().err and not (tmp_path / "m.fmu").exists()


def test_mpc_example_tracks_a_step(models, tmp_path):
    """examples/control/mpc_casadi.py: IPOPT on the exported function drives q[1] 0.2 away from
    the equilibrium and holds it (the plant is the same model at a finer step)."""
    from mc2fmu.control.casadi_export import export_casadi

    export_casadi(models["four_bar"], tmp_path / "m.casadi")
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "control" / "mpc_casadi.py"), str(tmp_path / "m.casadi"),
                           "--seconds", "1.0", "--horizon", "10"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.strip().splitlines()[-1]
    final = float(line.split("error at the end ")[1].split(",")[0])
    assert final <= 1e-3, line


@pytest.mark.parametrize("name", ["four_bar_friction", "macpherson_nl"])
def test_function_carries_identified_terms_and_learned_laws(trained, tmp_path, name):
    """Identified terms (four_bar_friction, --identify) and a recorded spring's learned law
    (macpherson_nl) go into the function: its qdd equals the numpy run-time model's over the
    envelope to 1e-12 of the accelerations' scale, and differs from the model's without those
    terms (so they are there, not dropped)."""
    from dataclasses import replace

    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points

    model_dir = trained(name)[0]
    out = tmp_path / "m.casadi"
    assert main(["export", str(model_dir), "--format", "casadi", "-o", str(out)]) == 0
    fn = ca.Function.load(str(out))
    model = load_artifact(model_dir).model
    if name == "four_bar_friction":
        assert model.library is not None and np.any(model.library.Xi)
        without = replace(model, library=None)
    else:
        assert model.springs.laws is not None and len(model.springs.laws)
        without = replace(model, springs=replace(model.springs, laws=None))
    art = load_artifact(model_dir)
    diff, scale, moved = 0.0, 1.0, 0.0
    for p in sample_points(art.envelope, model, 16, seed=5):
        qdd = np.array(fn(p["q"][0], p["qd"][0], p["u"][0])[0]).ravel()
        ref = model.acceleration(p["q"], p["qd"], p["u"])[0]
        diff, scale = max(diff, np.abs(qdd - ref).max()), max(scale, np.abs(ref).max())
        moved = max(moved, np.abs(ref - without.acceleration(p["q"], p["qd"], p["u"])[0]).max())
    assert diff / scale <= 1e-12, diff / scale
    assert moved > 1e-6 * scale
