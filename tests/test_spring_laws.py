"""Recorded force elements (``law = "recorded"``): the tool exports the element's tension, mc2fmu
learns its law (``mc2fmu.models.spring_laws``).

Against ``macpherson_nl``, whose strut is progressive and digressive in Exudyn (the law is
known here, not to mc2fmu): the learned law against the engine's, the learned damper's power on
random states far beyond the data, the FMUs against ``simulate``; the file contract's errors.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.cli import main
from mc2fmu.errors import MechanismError, ModelError, PoseDataError

SPRING = """
[[springs]]
name = "strut"
body_a = "ground"
point_a = [0.0, 0.0, 0.0]
body_b = "arm"
point_b = [0.3, 0.0, 0.0]
"""


@pytest.fixture(scope="module")
def nl_run(reference_run):
    run = reference_run("macpherson_nl", "train")
    return run, Path(run["path"]).parent.parent / "mechanism.toml"


@pytest.fixture(scope="module")
def nl_data(nl_run):
    from mc2fmu.data.dataset import ingest

    return ingest(nl_run[1], [nl_run[0]["path"]])


@pytest.fixture(scope="module")
def fitted(nl_data):
    from mc2fmu.models.spring_laws import fit_laws

    sp = nl_data.forces.springs
    return fit_laws(sp, nl_data.mechanism.springs, nl_data.x, nl_data.xd, nl_data.tensions)


def _engine_strut():
    from examples.reference import model

    (strut,) = model("macpherson_nl").springs
    return strut


def _states(ds):
    sp = ds.forces.springs
    d = sp.vectors(ds.x)
    length = np.linalg.norm(d, axis=-1)
    ldot = np.einsum("tsi,sij,tj->ts", d / length[..., None], sp.D, ds.xd)
    return length, ldot


def test_the_learned_law_is_the_engines(nl_data, fitted):
    """The whole tension (the file's linear part plus the learned remainder) against the
    engine's progressive, digressive law over the training run's lengths and rates: within 1 %
    of the tension's rms; the linear part alone is off by more than 10 %."""
    laws, report = fitted
    strut, sp = _engine_strut(), nl_data.forces.springs
    length, ldot = _states(nl_data)
    truth = strut.tension(length[:, 0] - strut.length, ldot[:, 0])
    linear = sp.k[0] * (length[:, 0] - sp.L0[0]) + sp.c[0] * ldot[:, 0]
    learned = linear + laws.tension(length, ldot)[:, 0]
    rms = np.sqrt(np.mean(truth**2))
    assert np.sqrt(np.mean((learned - truth) ** 2)) < 0.01 * rms
    assert np.sqrt(np.mean((linear - truth) ** 2)) > 0.1 * rms
    assert report["strut"] < 0.01


def test_the_learned_damper_never_generates_energy(nl_data, fitted):
    """The element's damping coefficient is >= 0 at 200,000 random states out to 5x the data's
    stroke and rate: the damper's power ``-h ldot^2`` is never positive (by construction)."""
    laws, _ = fitted
    (law,) = laws.laws
    length, ldot = _states(nl_data)
    rng = np.random.default_rng(0)
    mid, half = length.mean(), 5 * np.ptp(length)
    ls = rng.uniform(mid - half, mid + half, 200_000)
    vs = rng.uniform(-5, 5, 200_000) * np.abs(ldot).max()
    h = law.total_damping(ls, vs)
    assert np.all(h >= 0.0)
    damper_tension = nl_data.forces.springs.c[0] * vs + vs * law.damping(ls, vs)
    assert np.all(-damper_tension * vs <= 1e-12 * np.abs(damper_tension * vs).max())


def test_dataset_keeps_the_recorded_tension(nl_run, nl_data, tmp_path):
    from mc2fmu.data.dataset import load_dataset

    out = tmp_path / "d.npz"
    nl_data.save(out)
    back = load_dataset(out)
    assert np.array_equal(back.tensions, nl_data.tensions) and back.tensions.shape[1] == 1


@pytest.fixture(scope="module")
def law_model(nl_run, tmp_path_factory):
    from mc2fmu.pipeline import train as fit
    from mc2fmu.reducers.autoencoder.config import TrainConfig

    run, mech = nl_run
    root = tmp_path_factory.mktemp("laws")
    fit(mech, [run["path"]], TrainConfig(dof=1, samples=300, adam_epochs=40, lbfgs_iters=40), root / "model")
    return root / "model", mech


def test_the_model_carries_the_law(law_model):
    """The artifact holds the strut's law; the reduced dynamics differ without it."""
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points

    art = load_artifact(law_model[0])
    assert art.model.springs.laws is not None and len(art.model.springs.laws) == 1
    assert 0 < art.training["metrics"]["spring_law_residual"]["strut"] < 0.01
    pts = sample_points(art.envelope, art.model, 8, seed=2)
    q, qd, u = (np.concatenate([p[k] for p in pts]) for k in ("q", "qd", "u"))
    bare = dataclasses.replace(art.model, springs=dataclasses.replace(art.model.springs, laws=None))
    a, b = art.model.acceleration(q, qd, u), bare.acceleration(q, qd, u)
    assert np.abs(a - b).max() > 1e-3 * np.abs(a).max()


@pytest.mark.parametrize("backend,fmi,interface", [("python", 2, "cs"), ("native", 2, "cs"), ("native", 3, "both")])
def test_law_model_fmus_equal_simulate(law_model, reference_run, tmp_path, backend, fmi, interface):
    """Both backends, FMI 2 and 3: positions equal `mc2fmu simulate` to 1e-9 m on a held-out run."""
    from tests.test_export import assert_exports_equal_simulate

    model_dir, mech = law_model
    assert_exports_equal_simulate(model_dir, mech, reference_run("macpherson_nl", "low")["path"], tmp_path,
                                  backend, fmi, interface)


def test_law_model_directional_derivatives(law_model, tmp_path):
    """The native FMU's directional derivatives through the learned law (its MLPs, the softplus
    and |ldot|) against five-point differences of torch: 1e-8 relative."""
    from mc2fmu.fmu.export import export_fmu
    from tests.test_native import _check_directional

    model_dir, _ = law_model
    fmu = tmp_path / "me.fmu"
    export_fmu(model_dir, fmu, "native", 3, "me")
    assert _check_directional(model_dir, fmu, tmp_path) <= 1e-8


def test_corrupt_law_arrays_are_refused(law_model, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(law_model[0], bad)
    with np.load(bad / "arrays.npz") as z:
        arrays = {k: z[k].copy() for k in z.files}
    arrays["law0.norm"][1] = -1.0
    np.savez(bad / "arrays.npz", **arrays)
    from mc2fmu.models.artifact import load_artifact

    with pytest.raises(ModelError, match="law0.norm"):
        load_artifact(bad)


def test_a_laws_form_is_read_from_the_file(law_model, tmp_path):
    """A law is saved with its form: training writes ``potential`` with its quadratic
    coefficient, in model format version 3 (an mc2fmu that reads version 2 refuses it rather
    than take the potential for the tension); a version-2 file without a form (a model saved
    before learnt potentials) reads its network as ``g`` (``tension``), and an unknown form is
    refused, naming the law and the forms."""
    import json

    from mc2fmu.models.artifact import load_artifact

    def edited(name, change, drop_quad=False, version=None):
        out = tmp_path / name
        shutil.copytree(law_model[0], out)
        doc = json.loads((out / "model.json").read_text())
        change(doc["model"]["spring_laws"]["springs"][0])
        doc["version"] = version or doc["version"]
        if drop_quad:
            doc["version"] = 2
            doc["arrays"].pop("law0.quad")
            with np.load(out / "arrays.npz") as z:
                arrays = {k: z[k] for k in z.files if k != "law0.quad"}
            np.savez(out / "arrays.npz", **arrays)
        (out / "model.json").write_text(json.dumps(doc))
        return out

    assert json.loads((law_model[0] / "model.json").read_text())["version"] == 3
    law = load_artifact(law_model[0]).model.springs.laws.laws[0]
    assert law.form == "potential" and law.quad.shape == (1,)
    older = load_artifact(edited("older", lambda e: e.pop("form"), drop_quad=True))
    assert older.model.springs.laws.laws[0].form == "tension"
    with pytest.raises(ModelError, match="spring law 0: form 'spline' is not one of potential, tension"):
        load_artifact(edited("bad", lambda e: e.update(form="spline")))
    # a version-3 file whose law lost its form would take the potential for the tension, and a
    # version-2 file with a potential is what an mc2fmu reading version 2 misreads: both refused
    with pytest.raises(ModelError, match=r"version 3, but key 'model' holds nothing that needs a version after 2"):
        load_artifact(edited("formless", lambda e: e.pop("form")))
    with pytest.raises(ModelError, match=r"version 2, but key 'model' holds potential spring laws \(version 3\)"):
        load_artifact(edited("downgraded", lambda e: None, version=2))


def test_the_learnt_force_keeps_growing_beyond_the_recorded_lengths(fitted):
    """Far beyond the recorded lengths the network's slope fades (tanh), and a potential of the
    network alone would leave the strut without force; the quadratic part keeps the elastic
    tension growing with the stretch, monotonic from 3 to 8 standard deviations both ways and
    more than doubling between them (the engine's progressive spring grows faster still)."""
    laws, _ = fitted
    (law,) = laws.laws
    m, sd = float(law.norm[0]), float(law.norm[1])
    k = np.array([3.0, 4.0, 5.0, 6.0, 8.0])
    up, down = law.elastic(m + k * sd), law.elastic(m - k * sd)
    assert np.all(np.diff(up) > 0) and np.all(np.diff(down) < 0)
    assert up[-1] > 2 * up[0] > 0 and down[-1] < 2 * down[0] < 0  # more than doubles from 3 to 8


# ---------------------------------------------------------------------------- the file contract


def test_recorded_spring_schema(toy_mechanism, tmp_path):
    """A recorded spring needs no linear part (then it is zero); half a linear part, or an
    unknown law, is an error naming the spring."""
    from mc2fmu.mechanics.mechanism import load_mechanism

    base = toy_mechanism.read_text()
    ok = tmp_path / "ok.toml"
    ok.write_text(base + SPRING + 'law = "recorded"\n')
    (s,) = load_mechanism(ok).springs
    assert s.recorded and s.stiffness == 0.0 and s.damping == 0.0 and s.tension_column == "strut.tension"
    for extra, words in [('law = "recorded"\nstiffness = 100.0\n', "needs both stiffness and length"),
                         ('law = "cubic"\nstiffness = 1.0\nlength = 0.2\n', "law 'cubic' must be one of linear, recorded")]:
        bad = tmp_path / "bad.toml"
        bad.write_text(base + SPRING + extra)
        with pytest.raises(MechanismError, match=words):
            load_mechanism(bad)


def test_a_run_without_the_tension_is_refused(nl_run, tmp_path, capsys):
    """A recorded spring's tension column missing, or not finite: one line naming the file and
    the column, exit 2, nothing written."""
    import gzip

    run, mech = nl_run
    lines = gzip.open(run["path"], "rt").read().splitlines()
    header = lines[0].split(",")
    col = header.index("strut.tension")
    dropped = tmp_path / "dropped.csv"
    dropped.write_text("\n".join(",".join(v for i, v in enumerate(line.split(",")) if i != col)
                                 for line in lines[:50]) + "\n")
    nan = tmp_path / "nan.csv"
    rows = [line.split(",") for line in lines[:50]]
    rows[10][col] = "nan"
    nan.write_text("\n".join(",".join(r) for r in rows) + "\n")
    from mc2fmu.data.poses import read_run
    from mc2fmu.mechanics.mechanism import load_mechanism

    m = load_mechanism(mech)
    with pytest.raises(PoseDataError, match="missing column 'strut.tension'"):
        read_run(dropped, m)
    with pytest.raises(PoseDataError, match="column 'strut.tension'.*not finite"):
        read_run(nan, m)
    out = tmp_path / "model"
    assert main(["train", str(mech), str(dropped), "--dof", "1", "-o", str(out)]) == 2
    assert "strut.tension" in capsys.readouterr().err
    assert not out.exists()
