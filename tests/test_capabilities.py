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


def test_content_rules_refuse_with_their_reason(trained, tmp_path, capsys):
    """A model's content rules a target out: a learned spring law of another shape than the
    generated C and Modelica write (here: one hidden layer of 8) keeps the model from the
    native backend and the Modelica export, with the rule's message, while the CasADi export
    (which evaluates the law's own code) and the python backend take it."""
    from dataclasses import replace

    from mc2fmu.models.artifact import load_artifact, save_artifact
    from mc2fmu.models.mlp import MLPWeights

    art = load_artifact(trained("macpherson_nl")[0])
    laws = art.model.springs.laws
    rng = np.random.default_rng(0)
    g = MLPWeights((rng.normal(size=(8, 1)), rng.normal(size=(1, 8))), (np.zeros(8), np.zeros(1)), "tanh")
    other = replace(laws, laws=(replace(laws.laws[0], g=g),) + laws.laws[1:])
    model = replace(art.model, springs=replace(art.model.springs, laws=other))
    model_dir = save_artifact(tmp_path / "other-law", replace(art, model=model))
    assert capabilities.problems(load_artifact(model_dir), "casadi") == []
    assert capabilities.problems(load_artifact(model_dir), "fmu", "python") == []
    for target, args, needle in (("fmu", ["--backend", "native", "-o", tmp_path / "m.fmu"], "native backend"),
                                 ("modelica", ["--format", "modelica", "-o", tmp_path / "M.mo"], "Modelica export")):
        code, err = _refusal(capsys, ["export", model_dir, *args])
        assert code != 0 and "spring law 0" in err and needle in " ".join(err.split()), (target, err)
        assert not Path(args[-1]).exists()
        assert any("spring law 0" in p for p in capabilities.problems(load_artifact(model_dir), target,
                                                                      "native" if target == "fmu" else None))
    # the CasADi export runs the law's own code, whatever its shape: its qdd is numpy's
    pytest.importorskip("casadi")
    from mc2fmu.control.casadi_export import casadi_model
    from mc2fmu.models.envelope import sample_points

    other_art = load_artifact(model_dir)
    fn = casadi_model(other_art)
    for pt in sample_points(other_art.envelope, other_art.model, 4, seed=2):
        ref = other_art.model.acceleration(pt["q"], pt["qd"], pt["u"])[0]
        got = np.array(fn(pt["q"][0], pt["qd"][0], pt["u"][0])[0]).ravel()
        assert np.abs(got - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max())