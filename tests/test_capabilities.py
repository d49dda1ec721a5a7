"""The capability table (mc2fmu.capabilities) is the one place support is decided: every
refusal of the command line for a model kind, target, FMI version or interface carries the
table's own reason, every supported combination is not refused for support, every registered
reducer has an entry, and docs/reducers.md's table is the one it prints."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from mc2fmu import capabilities
from mc2fmu.capabilities import BACKENDS, FMI_VERSIONS, INTERFACES, KINDS, option_problems
from mc2fmu.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_reducer_has_an_entry():
    from mc2fmu.reducers.base import REDUCERS

    assert set(KINDS) == set(REDUCERS)
    for k in KINDS.values():
        assert set(k.backends) <= set(BACKENDS)
        assert set(k.refused) <= set(capabilities.TARGETS) - {"fmu"}
        assert k.continuous or not any(i != "cs" for _, i in k.pairs("native"))  # model exchange needs an ODE


def test_the_docs_table_is_the_one_the_table_prints():
    text = (ROOT / "docs" / "reducers.md").read_text()
    block = text.split("<!-- capabilities -->\n", 1)[1].split("\n<!-- /capabilities -->", 1)[0]
    assert block == capabilities.markdown_table()


@pytest.fixture(scope="module")
def models(trained, tmp_path_factory):
    """One model directory per reducer: a brief autoencoder, and node and local-PCA models on
    its coordinates."""
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.local_pca.config import LocalPcaConfig
    from mc2fmu.reducers.node.config import NodeReducerConfig

    chart, mech, run = trained("four_bar")
    root = tmp_path_factory.mktemp("capabilities")
    train(mech, [run], NodeReducerConfig(dof=1, from_model=str(chart), node_hidden=(8,), node_epochs=2), root / "node",
          reducer="node")
    train(mech, [run], LocalPcaConfig(dof=1, from_model=str(chart)), root / "lpca", reducer="local-pca")
    return {"autoencoder": chart, "node": root / "node", "local-pca": root / "lpca"}


def _refusal(capsys, argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("reducer", list(KINDS))
def test_every_cli_refusal_of_a_target_is_the_tables(models, tmp_path, capsys, reducer):
    model = models[reducer]
    k = KINDS[reducer]
    for target, argv in (("modelica", ["export", model, "--format", "modelica", "-o", tmp_path / "M.mo"]),
                         ("casadi", ["export", model, "--format", "casadi", "-o", tmp_path / "m.casadi"]),
                         ("linearize", ["linearize", model, "-o", tmp_path / "lin.json"])):
        code, err = _refusal(capsys, argv)
        if target in k.refused:
            assert code != 0 and k.refused[target] in " ".join(err.split()), (reducer, target, err)
        else:
            assert code == 0, (reducer, target, err)
    assert not (tmp_path / "M.mo").exists() or "modelica" not in k.refused


@pytest.mark.parametrize("reducer", list(KINDS))
def test_every_cli_refusal_of_an_fmu_interface_is_the_tables(models, tmp_path, capsys, reducer):
    """Each (backend, FMI version, interface) the table refuses is refused by `export` with the
    table's message before anything is written; the ones it gives are not refused for support
    (checked through the options alone: building them all is the export tests' work)."""
    model = models[reducer]
    k = KINDS[reducer]
    for backend, fmi, interface in itertools.product(BACKENDS, FMI_VERSIONS, INTERFACES):
        expected = option_problems("fmu", backend, fmi, interface, reducer)
        assert bool(expected) == ((fmi, interface) not in k.pairs(backend))
        if not expected:
            continue
        out = tmp_path / f"{backend}{fmi}{interface}.fmu"
        code, err = _refusal(capsys, ["export", model, "-o", out, "--backend", backend, "--fmi", fmi,
                                      "--interface", interface])
        assert code != 0 and all(p in " ".join(err.split()) for p in expected), (backend, fmi, interface, err)
        assert not out.exists()


def test_a_learned_law_of_another_shape_goes_to_every_target(trained, tmp_path):
    """The native C and the Modelica model print a learned spring law from the run-time model's
    own evaluation (mc2fmu.models.spring_laws.traced), so a law of another shape than training
    makes (here g: one hidden layer of 8, h: sigmoid) needs no rule: the native FMU's
    self-check holds its dynamics to numpy's (an export fails otherwise), pymoca's der(qd) of
    the Modelica model and the CasADi function equal numpy's qdd; and the law changes qdd."""
    from dataclasses import replace

    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.modelica.export import export_modelica
    from mc2fmu.models.artifact import load_artifact, save_artifact
    from mc2fmu.models.envelope import sample_points
    from mc2fmu.models.mlp import MLPWeights

    art = load_artifact(trained("macpherson_nl")[0])
    laws = art.model.springs.laws
    rng = np.random.default_rng(0)
    g = MLPWeights((rng.normal(size=(8, 1)), rng.normal(size=(1, 8))), (np.zeros(8), np.full(1, 0.3)), "tanh")
    h = replace(laws.laws[0].h, activation="sigmoid")
    other = replace(laws, laws=(replace(laws.laws[0], g=g, h=h),) + laws.laws[1:])
    model = replace(art.model, springs=replace(art.model.springs, laws=other))
    model_dir = save_artifact(tmp_path / "other-law", replace(art, model=model))
    other_art = load_artifact(model_dir)
    saved = other_art.model.springs.laws.laws[0]
    assert len(saved.g.layers) == 2 and saved.h.activation == "sigmoid" and saved.g.activation == "tanh"
    for target, backend in (("fmu", "native"), ("fmu", "python"), ("modelica", None), ("casadi", None)):
        assert capabilities.problems(other_art, target, backend) == [], (target, backend)
    summary = export_fmu(model_dir, tmp_path / "m.fmu", "native", 2, "both")
    assert (tmp_path / "m.fmu").exists() and summary
    assert summary["compiler_warnings"] == []  # the printed law compiles clean under -Wall -Wextra

    points = sample_points(other_art.envelope, other_art.model, 4, seed=2)
    ref = np.concatenate([other_art.model.acceleration(pt["q"], pt["qd"], pt["u"]) for pt in points])
    trained_qdd = np.concatenate([art.model.acceleration(pt["q"], pt["qd"], pt["u"]) for pt in points])
    assert np.abs(ref - trained_qdd).max() > 1e-3 * np.abs(ref).max(), "the other law changes the dynamics"
    pytest.importorskip("pymoca")
    from tests.modelica_host import CompiledModel

    export_modelica(model_dir, tmp_path / "OtherLaw.mo")
    cm = CompiledModel(tmp_path / "OtherLaw.mo")
    p = cm.parameter_vector()
    got = np.array([cm.qdd(pt["q"][0], pt["qd"][0], pt["u"][0], p) for pt in points])
    assert np.abs(got - ref).max() <= 1e-10 * np.abs(ref).max()
    # the CasADi export runs the law's own code on its symbols
    pytest.importorskip("casadi")
    from mc2fmu.control.casadi_export import casadi_model

    fn = casadi_model(other_art)
    for pt, want in zip(points, ref):
        got = np.array(fn(pt["q"][0], pt["qd"][0], pt["u"][0])[0]).ravel()
        assert np.abs(got - want).max() <= 1e-12 * max(1.0, np.abs(want).max())