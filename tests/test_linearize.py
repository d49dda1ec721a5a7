"""``mc2fmu linearize``: exact derivatives of the reduced ODE at an operating point.

References: central finite differences of the numpy run-time model (real arithmetic, against
the complex step under test), mc2fmu's own pose extraction (polar decomposition) for the
outputs, and analytic signals for the engine-side frequency fit.  The engine check of
default-trained models (small-oscillation frequencies within 1 % of the full Exudyn model's,
and the controller designed on the reduced model run on the full one) is
``benchmarks/targets.py``'s: a default training takes minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main


def _fd_jacobian(f, z: np.ndarray, h: float = 1e-6) -> np.ndarray:
    cols = []
    for i in range(len(z)):
        e = np.zeros_like(z)
        e[i] = h * max(1.0, abs(z[i]))
        cols.append((f(z + e) - f(z - e)) / (2 * e[i]))
    return np.stack(cols, 1)


@pytest.mark.parametrize("form", ["potential", "tension"])
def test_complex_step_through_learned_laws_and_identified_terms_equals_finite_differences(form):
    """The complex step (mc2fmu.models.array_ops' complex namespace) through the parts with a
    kink or a branch, |w| in a learned damping law and softplus's threshold, and the identified
    terms' smoothed signs: against central differences of the real evaluation.  Both forms of
    the law's elastic part: a learnt potential with its quadratic part (the tension its
    propagated slope) and, as models saved before hold, the network as the tension."""
    from mc2fmu.control.linearize import _complex_step
    from mc2fmu.models.mlp import MLPWeights
    from mc2fmu.models.spring_laws import SpringLaw, SpringLaws
    from mc2fmu.models.terms import COS, Q, TANH, V, evaluate

    rng = np.random.default_rng(4)

    def net(widths, scale=1.0):
        return MLPWeights(tuple(scale * rng.standard_normal((b, a)) for a, b in zip(widths[:-1], widths[1:])),
                          tuple(rng.standard_normal(b) for b in widths[1:]), "tanh")

    # a large h-net output scale puts softplus on both sides of its threshold of 20 (checked below)
    h = net([3, 8, 1], 12.0)
    h = MLPWeights(h.weights, h.biases[:-1] + (h.biases[-1] + 35.0,), "tanh")
    law = SpringLaw(0, net([1, 8, 1]), h, np.array([0.3, 0.05, 0.4, 150.0, 20.0]), form,
                    np.array([0.7]) if form == "potential" else None)
    laws = SpringLaws((law,), 1)
    kinds = np.array([[TANH, Q, 0], [COS, V, 0]])
    index = np.array([[1, 0, 0], [0, 1, 0]])
    param = np.array([[0.2, 0.0, 0.0], [0.0, 0.0, 0.0]])

    def f(z):
        z = np.atleast_2d(z)
        length, ldot, q, v = z[:, :1], z[:, 1:2], z[:, 2:4], z[:, 4:6]
        return np.concatenate([laws.tension(length, ldot), evaluate(kinds, index, param, q, v, np.zeros((len(z), 0)))], 1)

    from mc2fmu.models.mlp import get_activation, mlp

    points = [[0.31, -0.7, 0.4, -1.2, 0.05, -0.3], [0.27, 0.9, -2.0, 0.5, -0.02, 0.8],
              [0.36, -0.2, 1.1, 0.3, -0.1, 0.4], [0.24, 0.3, 0.2, -0.6, 0.3, -0.9]]
    pre = []  # softplus's argument at each point
    for z in points:
        w = z[1] / law.norm[2]
        feats = np.array([[(z[0] - law.norm[0]) / law.norm[1], w, abs(w)]])
        pre.append(float(mlp(law.h.layers, get_activation("tanh"), feats)[0, 0]))
    assert min(pre) < 20.0 < max(pre), pre
    for z in points:
        z = np.array(z)
        value, J = _complex_step(f, z)
        np.testing.assert_allclose(value, f(z)[0], rtol=1e-14, atol=1e-12)
        fd = _fd_jacobian(lambda y: f(y)[0], z)
        np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


@pytest.fixture(scope="module")
def brief(reference_run, tmp_path_factory):
    """``brief(name, dof)`` -> model dir trained briefly (derivatives are a property of any model)."""
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    cache = {}
    root = tmp_path_factory.mktemp("linearize")

    def get(name: str, dof: int, **kw):
        key = (name, dof, tuple(sorted(kw.items())))
        if key not in cache:
            run = reference_run(name, "train")
            mech = Path(run["path"]).parent.parent / "mechanism.toml"
            out = root / f"{name}-{len(cache)}"
            fit(mech, [run["path"]], TrainConfig(dof=dof, samples=300, adam_epochs=30, lbfgs_iters=30, **kw), out)
            cache[key] = out
        return cache[key]

    return get


@pytest.mark.parametrize("name, dof", [("four_bar", 1), ("two_bar", 2), ("macpherson", 1)])
def test_a_b_c_against_finite_differences(brief, name, dof):
    """A and B against central differences of the numpy model's acceleration, at the
    equilibrium and at a moving state with a non-zero input; C (body origins) against
    differences of mc2fmu's pose extraction from the decoded natural coordinates."""
    from mc2fmu.control.linearize import linearize
    from mc2fmu.mechanics.natural import poses_from_nc
    from mc2fmu.models.artifact import load_artifact

    model_dir = brief(name, dof)
    art = load_artifact(model_dir)
    model, m, n_u = art.model, art.model.dof, art.model.n_u
    rng = np.random.default_rng(1)
    eq = linearize(model_dir, u=list(art.initial_state.u))  # the training run starts at rest under this input
    assert eq.equilibrium and eq.residual <= 1e-8
    assert np.abs(model.acceleration(eq.q[None], np.zeros((1, m)), eq.u[None])).max() <= 1e-8
    q1 = eq.q + 0.05 * rng.standard_normal(m)
    moving = linearize(model_dir, q=list(q1), qd=list(0.3 * rng.standard_normal(m)),
                       u=list(rng.standard_normal(n_u)))
    assert not moving.equilibrium
    for lin in (eq, moving):
        def f(z):
            return model.acceleration(z[None, :m], z[None, m:2 * m], z[None, 2 * m:])[0]

        F = _fd_jacobian(f, np.concatenate([lin.q, lin.qd, lin.u]))
        exact = np.concatenate([lin.A[m:, :], lin.B[m:, :]], 1)
        assert np.abs(exact - F).max() <= 1e-6 * max(1.0, np.abs(F).max()), name
        assert np.array_equal(lin.A[:m], np.hstack([np.zeros((m, m)), np.eye(m)]))

        def origins(qq):
            origin, _ = poses_from_nc(art.layout, model.decode(qq[None]))
            return origin[0].ravel()

        Y = _fd_jacobian(origins, lin.q)
        n_y = Y.shape[0]
        # the decoded bodies are rigid only to the training's accuracy: the polar factor and the
        # linear extraction agree to that order
        assert np.abs(lin.C[:n_y, :m] - Y).max() <= 2e-2 * max(1.0, np.abs(Y).max()), name
        assert np.array_equal(lin.C[n_y:], np.eye(2 * m)) and not lin.D.any()


@pytest.mark.parametrize("name", ["macpherson_nl", "four_bar_friction"])
def test_a_and_b_of_models_with_learned_laws_and_identified_terms(trained, name):
    """Through a learned spring law (macpherson_nl) and identified terms (four_bar_friction):
    A and B against central differences of the numpy model, at the initial state of the
    training run and at a moving state."""
    from mc2fmu.control.linearize import linearize
    from mc2fmu.models.artifact import load_artifact

    model_dir = trained(name)[0]
    art = load_artifact(model_dir)
    model, m = art.model, art.model.dof
    has = (model.springs.laws is not None and len(model.springs.laws)) if name == "macpherson_nl" else \
        (model.library is not None and len(model.library.active))
    assert has, name  # the feature under test is in the model
    q0 = np.asarray(art.initial_state.q, dtype=float)
    for qd in (np.zeros(m), np.full(m, 0.4)):
        lin = linearize(model_dir, q=list(q0), qd=list(qd), u=list(art.initial_state.u))

        def f(z):
            return model.acceleration(z[None, :m], z[None, m:2 * m], z[None, 2 * m:])[0]

        F = _fd_jacobian(f, np.concatenate([lin.q, lin.qd, lin.u]))
        exact = np.concatenate([lin.A[m:, :], lin.B[m:, :]], 1)
        assert np.abs(exact - F).max() <= 1e-6 * max(1.0, np.abs(F).max()), (name, exact, F)


def test_cli_writes_json_and_refuses_bad_points(brief, tmp_path, capsys):
    model_dir = brief("two_bar", 2)
    out = tmp_path / "lin.json"
    from mc2fmu.models.artifact import load_artifact

    u0 = ",".join(repr(v) for v in load_artifact(model_dir).initial_state.u)
    assert main(["linearize", str(model_dir), "--at", f"u={u0}", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["states"] == ["q[1]", "q[2]", "qd[1]", "qd[2]"] and len(data["inputs"]) == 2
    assert np.array(data["A"]).shape == (4, 4) and np.array(data["B"]).shape == (4, 2)
    assert np.array(data["C"]).shape == (len(data["outputs"]), 4) and np.array(data["D"]).shape == (len(data["outputs"]), 2)
    assert "frequency (Hz)" in printed and "static equilibrium" in printed
    for bad, message in ((["q=1,2,3"], "2 finite value(s) expected"), (["w=1"], "NAME=V1"),
                         (["u=x,1"], "must be numbers"), (["qd=1,0"], "give q as well")):
        bad_out = tmp_path / "bad.json"
        assert main(["linearize", str(model_dir), "--at", *bad, "-o", str(bad_out)]) == 2
        assert message in capsys.readouterr().err and not bad_out.exists()


# ---------------------------------------------------------------------------- against the engine


def test_engine_frequency_fit_recovers_damped_and_undamped_modes():
    """The engine side of the frequency check: two modes with known frequencies shared by two
    channels.  Undamped: the plain fit finds them; decaying (damping ratios 0.07): the damped
    fit finds the damped frequencies to 1e-6, where the undamped one is biased."""
    from examples.reference import oscillation_frequencies

    t = np.arange(0.0, 20.0, 1e-3)
    f = np.array([0.98, 1.38])

    def signal(decay):
        a = [np.exp(-decay[k] * t) for k in range(2)]
        return np.stack([a[0] * np.cos(2 * np.pi * f[0] * t) + 0.5 * a[1] * np.sin(2 * np.pi * f[1] * t + 0.3),
                         0.3 * a[0] * np.sin(2 * np.pi * f[0] * t) - a[1] * np.cos(2 * np.pi * f[1] * t)], 1)

    assert np.abs(oscillation_frequencies(t, signal([0.0, 0.0]), 2) / f - 1).max() < 1e-6
    damped = signal([0.46, 0.64])
    assert np.abs(oscillation_frequencies(t, damped, 2, damped=True) / f - 1).max() < 1e-6
    assert np.abs(oscillation_frequencies(t, damped, 2) / f - 1).max() > 1e-3
