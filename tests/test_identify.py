"""Sparse identification of forces the mechanism file does not describe (``train --identify``, seed 004).

* the seed's two simulated examples, computed with Exudyn (examples/sindy_cases.py): the
  slides' coefficient tables recovered from the motion with the slides' library;
* the friction four-bar (crank-pivot friction its mechanism file does not list), briefly
  trained with ``--identify``: the identified terms are in the model, in both FMU backends
  and both FMI versions, equal to ``mc2fmu simulate``; model exchange derivatives equal torch;
* the artifact's terms are checked when read; bad options are refused with a message.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main
from mc2fmu.models.terms import ONE, Q, TANH, U, V, TermLibrary, build_library, equation, evaluate, stlsq
from tests.fmu_helpers import run_json, start_values

HERE = Path(__file__).resolve().parent
FMPY_SIM = HERE / "fmpy_sim.py"

#: the slides' library: u, u', u^2, u^3, 1, sgn(u'), cos(w t), cos(3 w t), u u' (inputs: the two cosines)
SLIDES_TERMS = [[(Q, 0)], [(V, 0)], [(Q, 0), (Q, 0)], [(Q, 0), (Q, 0), (Q, 0)], [], [(TANH, 0)], [(U, 0)], [(U, 1)],
                [(Q, 0), (V, 0)]]


def slides_library(v0: float) -> TermLibrary:
    n = len(SLIDES_TERMS)
    kinds, index, param = np.full((n, 3), ONE), np.zeros((n, 3), dtype=np.int64), np.zeros((n, 3))
    for r, term in enumerate(SLIDES_TERMS):
        for s, (k, i) in enumerate(term):
            kinds[r, s], index[r, s], param[r, s] = k, i, v0 if k == TANH else 0.0
    return TermLibrary(kinds, index, param, np.zeros((n, 1)))


def _fit(case: dict, known: np.ndarray, v0: float) -> np.ndarray:
    lib = slides_library(v0)
    u = np.stack([case["cos_wt"], case["cos_3wt"]], 1)
    Theta = evaluate(lib.kinds, lib.index, lib.param, case["u"][:, None], case["v"][:, None], u)
    F = case["params"]["m"] * case["a"] - known
    return stlsq(Theta, F[:, None], kappa=0.05)[:, 0]


def _assert_table(xi: np.ndarray, table, rel: float) -> None:
    table = np.asarray(table, dtype=float)
    zero = table == 0.0
    assert np.all(xi[zero] == 0.0), xi  # the thresholding removed every term not in the equation
    assert np.all(np.abs(xi[~zero] - table[~zero]) <= rel * np.abs(table[~zero])), (xi, table)


@pytest.fixture(scope="module")
def duffing():
    pytest.importorskip("exudyn")
    from examples.sindy_cases import duffing

    return duffing()


@pytest.fixture(scope="module")
def slider():
    pytest.importorskip("exudyn")
    from examples.sindy_cases import friction_slider

    return friction_slider()


def test_duffing_recovers_the_slides_tables(duffing):
    """Slides 'Simulated Example: Duffing Oscillator': the three tables for f^k = 0,
    0.65 cos(1.2 t) and 0.65 cos(1.2 t) + u - 0.3 u' (coefficients of u, u', u^2, u^3, 1,
    sgn(u'), cos(w t), cos(3 w t), u u')."""
    p, d = duffing["params"], duffing
    forcing = p["phi"] * d["cos_wt"]
    _assert_table(_fit(d, 0.0, 1e-3), [1, -0.3, 0, -1, 0, 0, 0.65, 0, 0], 1e-3)
    _assert_table(_fit(d, forcing, 1e-3), [1, -0.3, 0, -1, 0, 0, 0, 0, 0], 1e-3)
    _assert_table(_fit(d, forcing + d["u"] - 0.3 * d["v"], 1e-3), [0, 0, 0, -1, 0, 0, 0, 0, 0], 1e-3)


def test_friction_slider_recovers_the_slides_tables(slider):
    """Slides 'Simulated Example: Friction Slider', f^k = 0: -250 u - 5 u' + 10 cos(5 t) and the
    friction (here mu m g = 2 N on the smoothed sign); with f^k = 10 cos(5 t) - k u - d u' only
    the friction remains.  Near-sticking samples (|u'| < 2 v0) are a third of the data."""
    p, d = slider["params"], slider
    assert np.mean(np.abs(d["v"]) < 2 * p["v0"]) > 0.2
    _assert_table(_fit(d, 0.0, p["v0"]), [-250, -5, 0, 0, 0, -2, 10, 0, 0], 2e-3)
    known = p["phi"] * d["cos_wt"] - p["k"] * d["u"] - p["d"] * d["v"]
    _assert_table(_fit(d, known, p["v0"]), [0, 0, 0, 0, 0, -2, 0, 0, 0], 2e-3)


def test_stlsq_does_not_depend_on_the_units_of_the_terms():
    """The threshold is on contributions: the same terms are kept when a column is scaled by
    1e6 (its coefficient by 1e-6), where a raw-coefficient threshold would drop it."""
    rng = np.random.default_rng(0)
    Theta = rng.normal(size=(500, 4))
    F = Theta @ np.array([1.0, 0.0, -0.5, 0.0]) + 1e-9 * rng.normal(size=500)
    xi = stlsq(Theta, F[:, None], 0.05)[:, 0]
    scaled = Theta * np.array([1.0, 1.0, 1e6, 1.0])
    xi_s = stlsq(scaled, F[:, None], 0.05)[:, 0]
    assert np.array_equal(xi != 0, [True, False, True, False])
    assert np.array_equal(xi_s != 0, xi != 0)
    assert xi_s[2] == pytest.approx(-0.5e-6, rel=1e-6)


def test_library_groups_and_the_printed_equation():
    """Angle-type coordinates get sin/cos (never monomials), the others monomials (never sin/cos);
    the equation names the coordinates and inputs."""
    lib = build_library(("const", "poly", "trig", "friction"), 2, [True, False], 1, np.array([2.0, 0.5]))
    names = lib.names(["phi", "s"], ["tau"])
    assert "sin(phi)" in names and "cos(phi)" in names and "phi" not in names
    assert "s" in names and "s^3" in names and "sin(s)" not in names
    assert "tanh(phi'/0.04)" in names and "tanh(s'/0.1)" in names
    Xi = np.zeros((len(lib), 2))
    Xi[names.index("s"), 1], Xi[names.index("tanh(s'/0.1)"), 1] = -2.5, 0.125
    assert equation(lib.with_coefficients(Xi), ["phi", "s"], ["tau"]) == [
        "f_id[phi] = 0", "f_id[s] = -2.5 s + 0.125 tanh(s'/0.1)"]


# ---------------------------------------------------------------------------- the friction four-bar


@pytest.fixture(scope="module")
def friction_model(reference_run, tmp_path_factory):
    """four_bar_friction, briefly trained with --identify (known coordinate crank.R11)."""
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    root = tmp_path_factory.mktemp("identify")
    run = reference_run("four_bar_friction", "train")
    mech = Path(run["path"]).parent.parent / "mechanism.toml"
    cfg = TrainConfig(dof=1, coords=("crank.R11",), samples=400, adam_epochs=60, lbfgs_iters=100, identify="default",
                      identify_iters=60)
    fit(mech, [run["path"]], cfg, root / "model")
    return root / "model", mech, run


def test_the_identified_terms_are_in_the_model(friction_model):
    """The trained model holds a smoothed-sign term (the friction the file does not list) and
    its dynamics differ from the same model without the terms."""
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points

    art = load_artifact(friction_model[0])
    lib = art.model.library
    assert lib is not None and len(lib) >= 1
    assert np.any(lib.kinds == TANH)
    eq = art.training["metrics"]["identified"]
    assert eq[0].startswith("f_id[crank.R11] = ") and "tanh(crank.R11'/" in eq[0]
    pts = sample_points(art.envelope, art.model, 8, seed=1)
    q, qd, u = (np.concatenate([p[k] for p in pts]) for k in ("q", "qd", "u"))
    bare = dataclasses.replace(art.model, library=None)
    assert np.abs(art.model.acceleration(q, qd, u) - bare.acceleration(q, qd, u)).max() > 1e-3


@pytest.mark.parametrize("backend,fmi,interface", [("python", 2, "cs"), ("native", 2, "cs"), ("native", 3, "both")])
def test_identified_model_fmus_equal_simulate(friction_model, reference_run, tmp_path, backend, fmi, interface):
    """Both backends, FMI 2 and 3: positions equal `mc2fmu simulate` to 1e-9 m on a held-out run."""
    from tests.test_export import assert_exports_equal_simulate

    model_dir, mech, _ = friction_model
    assert_exports_equal_simulate(model_dir, mech, reference_run("four_bar_friction", "low")["path"], tmp_path,
                                  backend, fmi, interface)


def test_identified_model_exchange_derivatives_equal_torch(friction_model, tmp_path):
    """fmi2GetDerivatives (native, model exchange) at states whose velocities cross zero (where
    the smoothed sign turns) against torch's acceleration with the identified terms."""
    import torch

    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    model_dir, mech, _ = friction_model
    art = load_artifact(model_dir)
    fmu = tmp_path / "me.fmu"
    export_fmu(model_dir, fmu, "native", 2, "me")
    pts = sample_points(art.envelope, art.model, 20, seed=3)
    q = np.concatenate([p["q"] for p in pts])
    qd = np.concatenate([p["qd"] for p in pts]) * np.linspace(-1.0, 1.0, len(pts))[:, None]
    uu = np.concatenate([p["u"] for p in pts])
    res = run_json(FMPY_SIM, {"kind": "derivatives", "fmu": str(fmu), "start": start_values(model_dir),
                              "inputs": list(load_mechanism(mech).input_names), "states": np.hstack([q, qd]).tolist(),
                              "u": uu.tolist()}, tmp_path)
    dx = np.array(res["dx"])
    with torch.no_grad():
        ref = from_runtime(art.model).acceleration(*(torch.as_tensor(a) for a in (q, qd, uu))).numpy()
    assert np.all(np.abs(dx[:, 1:] - ref) <= 1e-12 * np.maximum(1.0, np.abs(ref)))


def test_identified_model_directional_derivatives(friction_model, tmp_path):
    """The native FMU's directional derivatives through the identified terms (tanh(v / p)
    friction) against five-point differences of torch: 1e-8 relative."""
    from mc2fmu.fmu.export import export_fmu
    from tests.test_native import _check_directional

    model_dir, _, _ = friction_model
    fmu = tmp_path / "me.fmu"
    export_fmu(model_dir, fmu, "native", 2, "me")
    assert _check_directional(model_dir, fmu, tmp_path) <= 1e-8


def test_corrupt_identified_terms_are_refused(friction_model, tmp_path):
    """An unknown factor code or an index past the coordinates in arrays.npz: a ModelError naming it."""
    import shutil

    from mc2fmu.errors import ModelError
    from mc2fmu.models.artifact import load_artifact

    for key, value, words in [("identify.kinds", 9.0, "unknown factor codes"),
                              ("identify.index", 5.0, "coordinate or input the model does not have"),
                              ("identify.param", -1.0, "must be > 0")]:
        bad = tmp_path / key
        shutil.copytree(friction_model[0], bad)
        with np.load(bad / "arrays.npz") as z:
            arrays = {k: z[k].copy() for k in z.files}
        t = int(np.flatnonzero(arrays["identify.kinds"][:, 0] == TANH)[0]) if key == "identify.param" else 0
        arrays[key][t, 0] = value
        np.savez(bad / "arrays.npz", **arrays)
        with pytest.raises(ModelError, match=words):
            load_artifact(bad)


@pytest.mark.parametrize("args,message", [
    (["--identify", "poly,springs"], "springs: unknown term group"),
    (["--identify", "--kappa", "1.5"], "--kappa 1.5"),
])
def test_bad_identify_options_are_refused(toy_mechanism, toy_run, tmp_path, capsys, args, message):
    out = tmp_path / "model"
    code = main(["train", str(toy_mechanism), str(toy_run), "--dof", "1", *args, "-o", str(out)])
    assert code != 0
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_traced_identified_terms_print_what_numpy_computes():
    """Every term group (two coordinates, one an angle, one input) traced through numpy object
    arrays (:func:`mc2fmu.models.terms.traced`, what the native C and the Modelica model print):
    the expressions evaluated and the printed Python equal ``identified_force`` on numbers to
    1e-14, and a zero coefficient prints nothing."""
    import math

    from mc2fmu.models import expr
    from mc2fmu.models.terms import GROUPS, build_library, identified_force, traced

    lib = build_library(tuple(GROUPS), 2, [True, False], 1, np.array([1.0, 2.0]))
    rng = np.random.default_rng(4)
    Xi = rng.normal(size=(len(lib), 2)) * (rng.random((len(lib), 2)) < 0.5)
    lib = type(lib)(lib.kinds, lib.index, lib.param, Xi, lib.groups, lib.kappa)
    out = traced(lib, 2, 1)
    source = expr.emit_python(out, "fid", ("q", "qd", "u"))
    scope = {"math": math}
    exec(source, scope)
    for _ in range(5):
        q, qd, u = rng.normal(size=2), rng.normal(size=2), rng.normal(size=1)
        want = identified_force(lib, Xi, q[None], qd[None], u[None])[0]
        got = expr.evaluate(out, {"q": q, "qd": qd, "u": u})
        assert np.abs(np.array(got) - want).max() <= 1e-14 * max(1.0, np.abs(want).max())
        assert np.abs(np.array(scope["fid"](q, qd, u)) - want).max() <= 1e-14 * max(1.0, np.abs(want).max())
    # terms whose coefficients are zero leave nothing in the printed code: with only the
    # constant term (the library's first) kept, no function and no state is read
    assert not lib.kinds[0].any()
    zero = np.zeros_like(Xi)
    zero[0] = [0.5, -2.0]
    lone = expr.emit_python(traced(type(lib)(lib.kinds, lib.index, lib.param, zero, lib.groups, lib.kappa), 2, 1),
                            "f", ("q", "qd", "u"))
    assert lone.splitlines()[-1].strip() == "return [0.5, (-2.0)]", lone
