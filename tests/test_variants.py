"""Physical variants: a mechanism file that changes masses, centres of mass, inertias, gravity,
springs or input points in place of the trained one (``mc2fmu.mechanics.variants``).

The references are independent of the model: a rigid body's kinetic energy and gravity's power
in closed form, and Exudyn runs of the variant mechanisms."""

from __future__ import annotations

import copy
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mc2fmu.errors import ExportError, ModelError
from mc2fmu.mechanics.mechanism import load_mechanism, mechanism_from_dict, mechanism_toml
from mc2fmu.mechanics.natural import affine_weights, build_layout, force_model, mass_matrix
from mc2fmu.mechanics.variants import physical_differences
from tests.oracles import acceleration_error, reduced_acceleration


def _random_rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _example(name: str):
    """A bundled mechanism, its NC layout and its dict form (to edit into a variant)."""
    trained = load_mechanism(Path(__file__).parents[1] / "examples" / name / "mechanism.toml")
    return trained, build_layout(trained), trained.to_dict()


def _layout_points(bl) -> list[np.ndarray]:
    """A body's NC points in its body frame: the layout's centre and one length along each axis."""
    return [np.asarray(bl.com)] + [np.asarray(bl.com) + bl.length * e for e in np.eye(3)]


@pytest.mark.parametrize("name", ["four_bar", "macpherson"])
def test_a_variants_mass_matrix_gives_the_rigid_bodies_kinetic_energy_and_gravitys_power(name):
    """In the trained layout (points at the trained centres of mass), a variant with other
    masses, shifted centres of mass, full inertia tensors and tilted gravity gives
    ``x_dot^T M x_dot / 2 = m |v_c|^2 / 2 + w^T R I R^T w / 2`` and ``f_g . x_dot = m g . v_c``
    for random rigid motions of every body."""
    trained, layout, data = _example(name)
    rng = np.random.default_rng(1)
    for b in data["bodies"]:
        scale = max(np.trace(np.asarray(b["inertia"], dtype=float)) / 3.0, 1e-4 * b["mass"])
        b["mass"] *= 1.0 + rng.uniform(0.2, 1.5)
        b["com"] = (np.asarray(b["com"]) + rng.uniform(-0.05, 0.05, 3)).tolist()
        Rb = _random_rotation(rng)  # a full tensor: principal values within the triangle inequalities
        b["inertia"] = (Rb @ np.diag(scale * (1.0 + rng.uniform(0.0, 0.3, 3))) @ Rb.T).tolist()
    g = np.array([3.0, -1.0, -9.0])
    data["gravity"] = g.tolist()
    variant = mechanism_from_dict(data)
    M = mass_matrix(variant, layout)
    f_g = force_model(variant, layout, M).f_g
    for body, bl in zip(variant.bodies, layout.bodies):
        points = _layout_points(bl)
        for j, s in enumerate(points):  # the layout's points are where the affine weights say
            assert np.allclose(affine_weights(bl, s), np.eye(4)[j])
        for _ in range(5):
            R, w, v0 = _random_rotation(rng), rng.normal(size=3), rng.normal(size=3)
            xdot = np.zeros(layout.size)
            for j, s in enumerate(points):
                xdot[bl.offset + 3 * j: bl.offset + 3 * j + 3] = v0 + np.cross(w, R @ s)
            vc = v0 + np.cross(w, R @ np.asarray(body.com))
            energy = 0.5 * body.mass * vc @ vc + 0.5 * w @ R @ body.inertia @ R.T @ w
            assert 0.5 * xdot @ M @ xdot == pytest.approx(energy, rel=1e-12)
            assert f_g @ xdot == pytest.approx(body.mass * g @ vc, rel=1e-12, abs=1e-12 * body.mass * np.abs(g).sum())
    assert np.linalg.eigvalsh(M).min() >= -1e-12 * np.abs(M).max()


def _other(names, current):
    return next(n for n in names if n != current)


def _edited(mech_path: Path, edit):
    data = copy.deepcopy(load_mechanism(mech_path).to_dict())
    edit(data)
    return mechanism_from_dict(data)


def test_kinematic_changes_are_refused_naming_the_item_and_physical_ones_listed():
    root = Path(__file__).parents[1] / "examples"
    four, mac = root / "four_bar" / "mechanism.toml", root / "macpherson" / "mechanism.toml"
    trained4, trained_mac = load_mechanism(four), load_mechanism(mac)
    refused = [
        (four, lambda d: d["bodies"][1].update(name="arm"), "bodies"),
        (four, lambda d: d["bodies"].reverse(), "bodies"),
        (four, lambda d: d["bodies"].pop(), "bodies"),
        (four, lambda d: d["inputs"][0].update(name="torque2"), "inputs"),
        (four, lambda d: d["inputs"][0].update(body=_other(trained4.body_names, d["inputs"][0]["body"])),
         f"input '{trained4.inputs[0].name}' acts"),
        (mac, lambda d: d["springs"][0].update(body_b=_other(trained_mac.body_names, d["springs"][0]["body_b"])),
         f"spring '{trained_mac.springs[0].name}' connects"),
        (mac, lambda d: d["springs"][0].update(law="recorded"), f"spring '{trained_mac.springs[0].name}' has law"),
    ]
    for path, edit, item in refused:
        trained = load_mechanism(path)
        with pytest.raises(ModelError, match=item):
            physical_differences(trained, _edited(path, edit), "variant.toml")
    # a torque made a force (kind) is refused too
    with pytest.raises(ModelError, match="is a force"):
        physical_differences(trained4, _edited(four, lambda d: d["inputs"][0].update(
            kind="force", point=[0.0, 0.0, 0.0])), "variant.toml")
    assert physical_differences(trained4, _edited(four, lambda d: d.update(name="other")), "v") == []
    changed = physical_differences(trained_mac, _edited(mac, lambda d: (
        d["bodies"][0].update(mass=2 * d["bodies"][0]["mass"]), d["springs"][0].update(stiffness=1.5 * d["springs"][0][
            "stiffness"]), d.update(gravity=[0.0, 4.9, -8.5]))), "v")
    assert [c.item for c in changed] == [f"{trained_mac.bodies[0].name}.mass", "gravity",
                                         f"{trained_mac.springs[0].name}.stiffness"]


@pytest.fixture(scope="module")
def four_bar_variants(tmp_path_factory):
    """Exudyn runs (5 s, the ``low`` excitation) of the four-bar with the rocker twice as
    heavy, and with gravity tilted by 30 degrees, each with its mechanism file."""
    pytest.importorskip("exudyn")
    from examples import _exudyn, reference
    from mc2fmu.data.poses import write_run

    base = reference.model("four_bar")
    root = tmp_path_factory.mktemp("variants")
    rocker = base.bodies[-1].name
    g = np.asarray(base.gravity, dtype=float)
    c, s_ = np.cos(np.radians(30.0)), np.sin(np.radians(30.0))
    if abs(g[2]) < 0.5 * np.linalg.norm(g):  # tilted about z (in the plane of a planar mechanism), else about x
        tilt = np.array([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]])
    else:
        tilt = np.array([[1.0, 0.0, 0.0], [0.0, c, -s_], [0.0, s_, c]])
    tilted = tilt @ g
    variants = {
        "heavy_rocker": replace(base, bodies=tuple(replace(b, mass=2.0 * b.mass) if b.name == rocker else b
                                                   for b in base.bodies)),
        "tilted_gravity": replace(base, gravity=tuple(float(v) for v in tilted)),
    }
    out = {}
    for tag, m in variants.items():
        # the constant inputs that hold the variant in the reference configuration, as the
        # bundled runs' hold theirs: the motion stays in the trained configurations
        u, _ = _exudyn.support_inputs(replace(m, static_inputs=None))
        m = replace(m, static_inputs=tuple(float(v) for v in u))
        run = reference.simulate(m, "low", t_end=5.0)
        folder = root / tag
        folder.mkdir()
        (folder / "mechanism.toml").write_text(mechanism_toml(reference.mechanism_dict(m)))
        write_run(folder / "low.csv.gz", run["t"], run["body_names"], run["origin"], run["rotation"],
                  run["input_names"], run["u"])
        out[tag] = (folder / "mechanism.toml", folder / "low.csv.gz")
    return out


@pytest.mark.parametrize("tag", ["heavy_rocker", "tilted_gravity"])
def test_the_model_follows_an_engine_run_of_a_variant_with_its_parameters(trained, four_bar_variants, tmp_path, tag,
                                                                          capsys):
    """On Exudyn's run of a variant, the model's accelerations with the variant's file are far
    closer to the engine's than with the trained parameters (what it gave before it took the
    file); `simulate` runs it to the end and prints what differs."""
    from mc2fmu.cli import main
    from mc2fmu.models.artifact import load_artifact

    model, _, _ = trained("four_bar")
    variant, run = four_bar_variants[tag]
    trained_art = load_artifact(model)
    variant_art, changed = trained_art.for_mechanism(load_mechanism(variant), variant)
    assert changed
    # the engine's accelerations at samples 0.2 s apart
    with_variant = acceleration_error(variant_art, variant, run, every=200)
    with_trained = acceleration_error(trained_art, variant, run, every=200)
    assert with_variant < 0.5 * with_trained, (with_variant, with_trained)
    assert main(["simulate", str(model), str(variant), str(run), "-o", str(tmp_path / "c.csv")]) == 0
    printed = capsys.readouterr().out
    assert "physical parameter(s) differ from the trained mechanism" in printed
    assert ("gravity" in printed) == (tag == "tilted_gravity") and (".mass" in printed) == (tag == "heavy_rocker")


def test_validate_and_learned_dynamics_refuse_what_they_cannot_run(trained, four_bar_variants, tmp_path, native):
    """An FMU has parameters for masses, inertias, gravity and springs, not for where an input
    acts, and a node model learnt its dynamics: both refuse such a variant file, saying so,
    rather than run the trained parameters."""
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.node.config import NodeReducerConfig
    from mc2fmu.validation.simulate import simulate_file
    from mc2fmu.validation.validate import validate_fmu

    variant, run = four_bar_variants["heavy_rocker"]
    fmu, _ = native("four_bar")
    d = load_mechanism(variant).to_dict()
    d["inputs"][0]["direction"] = (-np.asarray(d["inputs"][0]["direction"], dtype=float)).tolist()
    turned = tmp_path / "turned.toml"
    turned.write_text(mechanism_toml(d))
    with pytest.raises(ModelError, match=rf"changes {d['inputs'][0]['name']}.direction, which {fmu.name} has no "
                                         "parameter for"):
        validate_fmu(fmu, turned, [str(run)])
    chart, mech, train_run = trained("four_bar")
    node = tmp_path / "node"
    train(mech, [train_run], NodeReducerConfig(dof=1, from_model=str(chart), node_hidden=(8,), node_epochs=2), node,
          reducer="node")
    with pytest.raises(ModelError, match="learnt its dynamics"):
        simulate_file(node, variant, run, tmp_path / "n.csv")


def test_linearize_follows_the_laws_of_scaled_physics(trained, tmp_path, capsys):
    """Exact physics, not the model's own output: with gravity the only load, scaling every
    mass and inertia by 3 leaves the motion as it is (the same A) and divides the inputs'
    effect by 3 (B); gravity 4 times as strong doubles every frequency at the same equilibrium."""
    from mc2fmu.cli import main
    from mc2fmu.control.linearize import linearize

    model, mech, _ = trained("four_bar")
    base = load_mechanism(mech).to_dict()
    heavy, strong = copy.deepcopy(base), copy.deepcopy(base)
    for b in heavy["bodies"]:
        b["mass"] *= 3.0
        b["inertia"] = (3.0 * np.asarray(b["inertia"], dtype=float)).tolist()
    strong["gravity"] = (4.0 * np.asarray(base["gravity"], dtype=float)).tolist()
    paths = {}
    for tag, data in (("heavy", heavy), ("strong", strong)):
        paths[tag] = tmp_path / f"{tag}.toml"
        paths[tag].write_text(mechanism_toml(data))
    ref = linearize(model)
    lin = {tag: linearize(model, mechanism=p) for tag, p in paths.items()}
    m = ref.q.size
    assert np.allclose(lin["heavy"].q, ref.q, atol=1e-9) and np.allclose(lin["strong"].q, ref.q, atol=1e-6)
    assert np.allclose(lin["heavy"].A, ref.A, rtol=1e-8, atol=1e-8 * np.abs(ref.A).max())
    assert np.allclose(lin["heavy"].B, ref.B / 3.0, rtol=1e-8, atol=1e-8 * np.abs(ref.B).max())
    f_ref = np.array([md["frequency_hz"] for md in ref.modes()])
    f_strong = np.array([md["frequency_hz"] for md in lin["strong"].modes()])
    assert ref.A[m:, :m].size and np.allclose(f_strong, 2.0 * f_ref, rtol=1e-6)
    assert main(["linearize", str(model), "--mechanism", str(paths["strong"]), "-o", str(tmp_path / "l.json")]) == 0
    assert "gravity" in capsys.readouterr().out


def test_an_fmu_exported_with_a_variant_runs_its_parameters(trained, four_bar_variants, tmp_path):
    """`export --mechanism VARIANT` (native, python): under fmpy the FMU gives
    `simulate`'s result on the engine's run of the variant (the same position error to 1e-9 m),
    it records the variant, and validating it with the trained file sets the trained mass back
    through FMI.  A variant that turns an input (no FMU parameter) gives `simulate`'s result
    under the python backend too.  A model whose graphs hold the trained physics (trained
    before they took it as inputs) is refused by the python backend, saying so."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.validation.simulate import simulate_file
    from mc2fmu.validation.validate import validate_fmu

    model, mech, _ = trained("four_bar")
    variant, run = four_bar_variants["heavy_rocker"]
    sim = simulate_file(model, variant, run, tmp_path / "s.csv")
    trained_sim = simulate_file(model, mech, run, tmp_path / "t.csv")
    for backend, fmi in (("native", 2), ("python", 2)):  # FMI 3: test_parameters_set_through_fmi_...
        fmu = tmp_path / f"v{backend}{fmi}.fmu"
        summary = export_fmu(model, fmu, backend, fmi, "cs", mechanism=variant)
        assert [c.item for c in summary["changed"]] == [f"{load_mechanism(variant).bodies[-1].name}.mass"]
        res = validate_fmu(fmu, variant, [str(run)])["runs"][0]
        assert res["reached_stop_time"]
        assert abs(res["max_position_error"] - sim["max_position_error"]) <= 1e-9
        assert res["position_nrmse"] == pytest.approx(sim["nrmse"], rel=1e-6)
        # the trained file: validate sets the variant's FMU back to the trained mass through FMI
        back = validate_fmu(fmu, mech, [str(run)])
        assert back["parameters"] == {f"{load_mechanism(mech).bodies[-1].name}.mass": load_mechanism(mech).bodies[-1].mass}
        assert abs(back["runs"][0]["max_position_error"] - trained_sim["max_position_error"]) <= 1e-9
    # an input's direction is no parameter: the python backend's dynamics graphs take the input
    # load maps as inputs, and the FMU feeds them the variant's (the torque's axis tilted by 25
    # deg out of the plane: 0.91 of it drives the crank)
    d = load_mechanism(variant).to_dict()
    axis = np.asarray(d["inputs"][0]["direction"], dtype=float)
    d["inputs"][0]["direction"] = (np.cos(np.radians(25)) * axis + np.sin(np.radians(25)) * np.array([1.0, 0, 0])).tolist()
    turned = tmp_path / "turned.toml"
    turned.write_text(mechanism_toml(d))
    turned_sim = simulate_file(model, turned, run, tmp_path / "u.csv")
    assert abs(turned_sim["max_position_error"] - sim["max_position_error"]) > 1e-4  # the tilt shows
    fmu = tmp_path / "turned.fmu"
    summary = export_fmu(model, fmu, "python", mechanism=turned)
    assert f"{d['inputs'][0]['name']}.direction" in [c.item for c in summary["changed"]]
    res = validate_fmu(fmu, turned, [str(run)])["runs"][0]
    assert res["reached_stop_time"] and abs(res["max_position_error"] - turned_sim["max_position_error"]) <= 1e-9
    graph = "resources/model/resources/onnx/rhs.onnx"
    with zipfile.ZipFile(fmu) as z:  # the trained graphs, fed the variant's maps
        assert z.read(graph) == (Path(model) / "resources" / "onnx" / "rhs.onnx").read_bytes()
        assert "resources/loads.npz" in z.namelist()
    # no parameter turns the input back: validating that FMU with the untilted file is refused
    with pytest.raises(ModelError, match=rf"changes {d['inputs'][0]['name']}.direction"):
        validate_fmu(fmu, variant, [str(run)])
    # a model whose graphs hold the trained physics (as before they took it as inputs): its python
    # FMU runs without physical parameters, and a variant is refused for it; one whose graphs
    # take the physics but hold the load maps (as before those were inputs) gets its two
    # dynamics graphs exported again for the tilt (torch at hand here; without it, an error:
    # tests/test_runtime_without_torch.py)
    older = _constant_physics_graphs(model, tmp_path / "older-model", loads=False)
    export_fmu(older, tmp_path / "t.fmu", "python", mechanism=turned)
    with zipfile.ZipFile(tmp_path / "t.fmu") as z:  # graphs exported again, with the maps as inputs
        assert z.read(graph) != (older / "resources" / "onnx" / "rhs.onnx").read_bytes()
        assert "resources/loads.npz" in z.namelist()
    res = validate_fmu(tmp_path / "t.fmu", turned, [str(run)])["runs"][0]
    assert res["reached_stop_time"] and abs(res["max_position_error"] - turned_sim["max_position_error"]) <= 1e-9
    assert export_fmu(older, tmp_path / "m.fmu", "python", mechanism=variant)["physical_parameters"] is True
    old = _constant_physics_graphs(model, tmp_path / "old-model")
    summary = export_fmu(old, tmp_path / "old.fmu", "python")
    assert summary["physical_parameters"] is False
    with pytest.raises(ExportError, match="hold the trained physical parameters"):
        export_fmu(old, tmp_path / "p.fmu", "python", mechanism=variant)
    res = validate_fmu(tmp_path / "old.fmu", mech, [str(run)])
    assert res["parameters"] == {} and res["runs"][0]["reached_stop_time"]
    assert abs(res["runs"][0]["max_position_error"] - trained_sim["max_position_error"]) <= 1e-9


@pytest.mark.parametrize("name", ["two_bar", "macpherson"])
def test_python_graphs_of_a_variant_that_moves_its_inputs_and_springs(trained, tmp_path, name):
    """A variant that turns the force inputs, moves their points and moves the springs'
    attachment points (no FMU parameter reaches them; the python backend's rhs graph takes their
    maps as inputs, from the loads.npz `export --backend python --mechanism` writes): fed the
    variant's maps, the trained rhs graph gives the accelerations assembled here in numpy from
    decoder.onnx's x, J and H and the variant file's mass matrix and force model; fed the
    trained maps, it does not."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points
    from mc2fmu.reducers.autoencoder.graphs import session

    model_dir = trained(name)[0]
    art = load_artifact(model_dir)
    d = art.mechanism.to_dict()
    axis = np.ones(3) / np.sqrt(3.0)  # 0.3 rad about a skew axis turns every direction
    K = np.cross(np.eye(3), axis)
    turn = np.eye(3) + np.sin(0.3) * K + (1 - np.cos(0.3)) * K @ K
    for k, inp in enumerate(d["inputs"]):
        inp["direction"] = (turn @ np.asarray(inp["direction"], dtype=float)).tolist()
        inp["point"] = (np.asarray(inp.get("point") or [0.0, 0.0, 0.0], dtype=float) + [0.05, 0.02 * k, 0.0]).tolist()
    for sp in d["springs"]:
        sp["point_a"] = (np.asarray(sp["point_a"], dtype=float) + [0.03, -0.02, 0.0]).tolist()
        sp["point_b"] = (np.asarray(sp["point_b"], dtype=float) + [-0.02, 0.0, 0.01]).tolist()
    variant_file = tmp_path / "variant.toml"
    variant_file.write_text(mechanism_toml(d))
    variant = mechanism_from_dict(d, source="variant")
    fmu = tmp_path / "v.fmu"
    summary = export_fmu(model_dir, fmu, "python", mechanism=variant_file)
    assert {c.item.rsplit(".", 1)[1] for c in summary["changed"]} == {"direction", "point", "point_a", "point_b"}
    with zipfile.ZipFile(fmu) as z:
        (tmp_path / "loads.npz").write_bytes(z.read("resources/loads.npz"))
    with np.load(tmp_path / "loads.npz") as z:
        loads = {k: z[k] for k in z.files}
    for g in ("decoder", "rhs"):
        (tmp_path / f"{g}.onnx").write_bytes(art.model.resources[f"onnx/{g}.onnx"])
    dec, rhs = (session(tmp_path / f"{g}.onnx") for g in ("decoder", "rhs"))
    M_v = mass_matrix(variant, art.layout)
    forces_v = force_model(variant, art.layout, M_v)
    physics = {"mass": art.model.mass, "f_g": art.model.f_g, "spring_k": art.model.springs.k,
               "spring_c": art.model.springs.c, "spring_L0": art.model.springs.L0}
    trained_maps = {"f_B": art.model.f_B, "f_C": art.model.f_C, "spring_D": art.model.springs.D,
                    "spring_e": art.model.springs.e}
    assert set(loads) == {k for k in trained_maps if k in {i.name for i in rhs.get_inputs()}} != set()
    trained_off = 0.0
    for p in sample_points(art.envelope, art.model, 8, seed=5):
        x, J, H = (a[0] for a in dec.run(["x", "J", "H"], {"q": p["q"]}))
        u = p["u"][0] + 1.0  # every input pushing, so that where it pushes shows
        v = p["qd"][0]
        expected = reduced_acceleration(M_v, forces_v, x, J, H, u, v)
        feed = {"q": p["q"], "qd": p["qd"], "u": u[None], **physics}
        got = rhs.run(["qdd"], {**feed, **loads})[0][0]
        assert np.allclose(got, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
        before = rhs.run(["qdd"], {**feed, **{k: trained_maps[k] for k in loads}})[0][0]
        trained_off = max(trained_off, np.abs(before - expected).max() / np.abs(expected).max())
    assert trained_off > 1e-3


def _constant_physics_graphs(model_dir: Path, out: Path, loads: bool = True) -> Path:
    """A copy of the model whose rhs and step graphs hold its physics as constants (the form
    of models trained before the graphs took it as inputs); ``loads=False``: that take the
    physical parameters and hold the input loads' and springs' maps (the form of models
    trained before those were inputs)."""
    from dataclasses import replace as dc_replace

    from mc2fmu.models.artifact import load_artifact, save_artifact
    from mc2fmu.reducers.autoencoder.graphs import onnx_graphs
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    art = load_artifact(model_dir)
    rt = art.model
    with tempfile.TemporaryDirectory() as tmp:
        if loads:
            graphs, _ = onnx_graphs(from_runtime(rt), rt, art.envelope, tmp, check_points=4, physics_inputs=False)
        else:
            from unittest import mock

            from mc2fmu.reducers.autoencoder import graphs as g

            feeds = g.physics_feeds
            with mock.patch.object(g, "LOAD_INPUTS", ()), mock.patch.object(g, "SPRING_GEOMETRY", ()), \
                    mock.patch.object(g, "physics_feeds", lambda *a, **k: [{n: v for n, v in f.items() if n not in
                                      ("f_B", "f_C", "spring_D", "spring_e")} for f in feeds(*a, **k)]):
                graphs, _ = onnx_graphs(from_runtime(rt), rt, art.envelope, tmp, check_points=4)
            graphs = {**rt.resources, **graphs}
    save_artifact(out, dc_replace(art, model=dc_replace(rt, resources=graphs)))
    return out


@pytest.mark.parametrize("name", ["macpherson", "two_bar"])
def test_a_variants_loads_and_springs_act_where_its_file_says(name):
    """With shifted centres of mass (the trained layout's points stay), moved force points and
    moved spring attachments: a force's generalized force does the power ``F . v`` of its point
    and a spring's vector is the distance of its two points, for random rigid motions."""
    trained, layout, data = _example(name)
    rng = np.random.default_rng(2)
    for b in data["bodies"]:
        b["com"] = (np.asarray(b["com"]) + rng.uniform(-0.05, 0.05, 3)).tolist()
    for i in data["inputs"]:
        if i["kind"] == "force":
            i["point"] = (np.asarray(i["point"]) + rng.uniform(-0.1, 0.1, 3)).tolist()
    for sp in data.get("springs", []):
        for key in ("point_a", "point_b"):
            sp[key] = (np.asarray(sp[key]) + rng.uniform(-0.05, 0.05, 3)).tolist()
    variant = mechanism_from_dict(data)
    forces = force_model(variant, layout)
    for _ in range(5):
        poses = {b.name: (_random_rotation(rng), rng.normal(size=3), rng.normal(size=3), rng.normal(size=3))
                 for b in variant.bodies}  # R, position of the body frame, its velocity, omega
        x, xdot = np.zeros(layout.size), np.zeros(layout.size)
        for bl in layout.bodies:
            R, p, v, w = poses[bl.name]
            for j, s in enumerate(_layout_points(bl)):
                x[bl.offset + 3 * j: bl.offset + 3 * j + 3] = p + R @ s
                xdot[bl.offset + 3 * j: bl.offset + 3 * j + 3] = v + np.cross(w, R @ s)
        for i, inp in enumerate(variant.inputs):
            if inp.kind != "force":
                continue
            R, p, v, w = poses[inp.body]
            assert forces.f_B[:, i] @ xdot == pytest.approx(inp.direction @ (v + np.cross(w, R @ inp.point)), rel=1e-10)
        for k, sp in enumerate(variant.springs):
            ends = []
            for body, point in ((sp.body_a, sp.point_a), (sp.body_b, sp.point_b)):
                if body == "ground":
                    ends.append(np.asarray(point))
                else:
                    R, p, _, _ = poses[body]
                    ends.append(p + R @ point)
            assert np.allclose(forces.springs.vectors(x)[k], ends[0] - ends[1], rtol=1e-10, atol=1e-12)


def test_a_variant_that_leaves_the_reduced_mass_singular_is_refused(trained):
    from mc2fmu.models.artifact import _check_reduced_mass, load_artifact

    art = load_artifact(trained("four_bar")[0])
    _check_reduced_mass(art.model, art.envelope, "v.toml")  # the trained masses: positive definite
    massless = art.model.with_physics(np.zeros_like(art.model.M), force_model(art.mechanism, art.layout))
    with pytest.raises(ModelError, match="v.toml: with these masses and inertias the reduced mass matrix is singular"):
        _check_reduced_mass(massless, art.envelope, "v.toml")


def _split_chart(model_dir: Path, out: Path) -> Path:
    """The two-bar model with its decoder's weights cut so that the first body's points depend on
    q[1] only and the second's on q[2] only (a block-structured MLP: exactly so), its graphs made
    again: a chart on which one body heavy and the other nearly massless leaves ``J^T M J``
    singular to rounding, as a well-trained chart of a mechanism whose bodies move apart does."""
    from dataclasses import replace as dc_replace

    from mc2fmu.models.artifact import load_artifact, save_artifact
    from mc2fmu.models.mlp import MLPWeights
    from mc2fmu.reducers.autoencoder.graphs import onnx_graphs
    from mc2fmu.reducers.autoencoder.torch_model import from_runtime

    art = load_artifact(model_dir)
    rt = art.model
    assert rt.dof == 2 and not any(rt.angles) and len(art.layout.bodies) == 2
    Ws = [W.copy() for W in rt.decoder.weights]
    half = [W.shape[0] // 2 for W in Ws[:-1]]
    Ws[0][:half[0], 1] = 0.0  # features 0, 1 are q[1], q[2] scaled
    Ws[0][half[0]:, 0] = 0.0
    for k in range(1, len(Ws) - 1):
        Ws[k][:half[k], half[k - 1]:] = 0.0
        Ws[k][half[k]:, :half[k - 1]] = 0.0
    Ws[-1][:12, half[-1]:] = 0.0
    Ws[-1][12:, :half[-1]] = 0.0
    rt = dc_replace(rt, decoder=MLPWeights(tuple(Ws), rt.decoder.biases, rt.decoder.activation), resources={})
    with tempfile.TemporaryDirectory() as tmp:
        graphs, _ = onnx_graphs(from_runtime(rt), rt, art.envelope, tmp)
    save_artifact(out, dc_replace(art, model=dc_replace(rt, resources=graphs)))
    return out


def test_fmus_refuse_parameters_that_leave_the_reduced_mass_singular(trained, tmp_path):
    """On a chart where each body moves with its own coordinate, the first body at 1e9 kg and
    the second at 1e-9 kg without inertia (each value within the file's limits) leave ``J^T M J``
    singular over the envelope: `simulate` refuses such a file, and the native (FMI 3; FMI 2
    runs the same C) and python FMUs refuse the same values set through FMI when initialisation ends, with the
    reason; both bodies at 1 kg are taken by all of them."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.models.artifact import load_artifact
    from tests.fmu_helpers import run_json

    model = _split_chart(trained("two_bar")[0], tmp_path / "split")
    art = load_artifact(model)
    a, b = (body.name for body in art.mechanism.bodies)
    Ja = np.asarray(art.mechanism.bodies[0].inertia, dtype=float)
    singular = {f"{a}.mass": 1e9, **{f"{a}.inertia[{k + 1}]": 1e9 * float(Ja[k, k]) for k in range(3)},
                f"{b}.mass": 1e-9, **{f"{b}.inertia[{k + 1}]": 0.0 for k in range(3)}}
    regular = {f"{a}.mass": 1.0, f"{b}.mass": 1.0}
    for values, refused in ((singular, True), (regular, False)):
        d = art.mechanism.to_dict()
        for body in d["bodies"]:
            body["mass"] = values[f"{body['name']}.mass"]
            if f"{body['name']}.inertia[1]" in values:
                body["inertia"] = [values[f"{body['name']}.inertia[{k + 1}]"] for k in range(3)]
        if refused:
            with pytest.raises(ModelError, match="reduced mass matrix is singular"):
                art.for_mechanism(mechanism_from_dict(d, source="v.toml"), "v.toml")
        else:
            art.for_mechanism(mechanism_from_dict(d, source="v.toml"), "v.toml")
    for backend, fmi in (("native", 3), ("python", 2)):
        fmu = tmp_path / f"{backend}{fmi}.fmu"
        export_fmu(model, fmu, backend, fmi, "cs")
        for values, refused in ((singular, True), (regular, False)):
            res = run_json(FMPY_SIM, {"kind": "parameters", "fmu": str(fmu), "values": list(values.items())}, tmp_path)
            assert all(c[1] == "ok" for c in res["calls"][:-1]), (backend, fmi, res["calls"])
            assert res["calls"][-1][0] == "exitInitializationMode"
            assert (res["calls"][-1][1] != "ok") == refused, (backend, fmi, res)
            assert any("reduced mass matrix is singular" in m["message"] for m in res["messages"]) == refused


# ------------------------------------------------------------------ the FMU's physical parameters

FMPY_SIM = Path(__file__).with_name("fmpy_sim.py")


@pytest.mark.parametrize("backend,fmi", [("native", 2), ("native", 3), ("python", 2)])
def test_parameters_set_through_fmi_run_an_engine_variant_as_simulate_does(trained, four_bar_variants, tmp_path,
                                                                           backend, fmi):
    """The trained model's co-simulation FMU (no --mechanism; each backend), its parameters set
    through FMI by `validate`, gives `simulate`'s result on Exudyn's runs of the heavy-rocker and
    tilted-gravity variants (the same position error to 1e-9 m), and the variant's error is
    below the trained parameters' on the same run."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.validation.simulate import simulate_file
    from mc2fmu.validation.validate import validate_fmu

    model, mech, _ = trained("four_bar")
    fmu = tmp_path / f"p{fmi}.fmu"
    export_fmu(model, fmu, backend, fmi, "cs")
    base = load_mechanism(mech)
    expected = {"heavy_rocker": {f"{base.bodies[-1].name}.mass"}, "tilted_gravity": {"gravity[1]", "gravity[2]"}}
    for tag, (variant, run) in four_bar_variants.items():
        sim = simulate_file(model, variant, run, tmp_path / f"{tag}.csv")
        res = validate_fmu(fmu, variant, [str(run)])
        assert set(res["parameters"]) == expected[tag] | ({"gravity[3]"} if tag == "tilted_gravity" and
                                                           base.gravity[2] != 0 else set())
        got = res["runs"][0]
        assert got["reached_stop_time"]
        assert abs(got["max_position_error"] - sim["max_position_error"]) <= 1e-9
        assert got["position_nrmse"] == pytest.approx(sim["nrmse"], rel=1e-6)
        trained_params = validate_fmu(fmu, mech, [str(run)])["runs"][0]
        assert got["position_nrmse"] < trained_params["position_nrmse"], tag


def _variant_of(mech: Path) -> dict:
    """Every kind of physical parameter changed at once: masses and inertias scaled per body,
    a centre of mass moved off the trained points, gravity tilted, spring constants changed."""
    d = load_mechanism(mech).to_dict()
    for k, b in enumerate(d["bodies"]):
        b["mass"] *= 1.0 + 0.3 * (k + 1)
        b["inertia"] = (np.asarray(b["inertia"], dtype=float) * (1.5 - 0.2 * k)).tolist()
    d["bodies"][-1]["com"] = (np.asarray(d["bodies"][-1]["com"], dtype=float) + [0.012, -0.007, 0.004]).tolist()
    g = np.asarray(d["gravity"], dtype=float)
    d["gravity"] = (0.8 * g + 0.3 * np.linalg.norm(g) * np.array([1.0, 0.5, 0.2])).tolist()
    for s in d.get("springs", []):
        s["stiffness"] *= 1.4
        s["damping"] = s.get("damping", 0.0) * 0.7 + 5.0
        s["length"] *= 1.02
    return d


@pytest.mark.parametrize("name,fmi", [("four_bar", 2), ("macpherson", 3)])
def test_model_exchange_derivatives_follow_the_parameters_set_through_fmi(trained, tmp_path, name, fmi):
    """A model-exchange FMU with every kind of parameter set through FMI (masses, inertias, a
    centre of mass, gravity, spring constants) returns the state derivatives of the model read
    with the variant's mechanism file, to 1e-10 of the largest acceleration, at states spread
    over the envelope; the description lists the parameters with units, fixed."""
    from fmpy import read_model_description

    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.models.artifact import load_artifact
    from mc2fmu.models.envelope import sample_points
    from tests.fmu_helpers import run_json, start_values

    model, mech, _ = trained(name)
    fmu = tmp_path / f"{name}.fmu"
    export_fmu(model, fmu, "native", fmi, "me")
    md = {v.name: v for v in read_model_description(str(fmu)).modelVariables}
    base = load_mechanism(mech)
    units = {"mass": "kg", "com": "m", "inertia": "kg.m2", "stiffness": "N/m", "damping": "N.s/m", "length": "m"}
    for b in base.bodies:
        for key in ("mass", "com[1]", "com[2]", "com[3]", "inertia[1]", "inertia[2]", "inertia[3]"):
            v = md[f"{b.name}.{key}"]
            assert (v.causality, v.variability, v.unit) == ("parameter", "fixed", units[key.split("[")[0]])
            assert float(v.start) == pytest.approx(float(np.ravel([b.mass, *b.com, *np.diag(b.inertia)])[
                ["mass", "com[1]", "com[2]", "com[3]", "inertia[1]", "inertia[2]", "inertia[3]"].index(key)]))
    for s in base.springs:
        for key in ("stiffness", "damping", "length"):
            assert md[f"{s.name}.{key}"].unit == units[key]
    assert md["gravity[2]"].unit == "m/s2"
    variant = mechanism_from_dict(_variant_of(mech), source="v")
    art = load_artifact(model)
    var_art, changed = art.for_mechanism(variant, "v")
    assert changed
    from mc2fmu.mechanics.variants import parameter_settings

    settings, _ = parameter_settings(art.mechanism, variant, set(md), "v", fmu.name)
    pts = sample_points(art.envelope, art.model, 12, seed=5)
    q = np.concatenate([p["q"] for p in pts])
    qd = np.concatenate([p["qd"] for p in pts])
    u = np.concatenate([p["u"] for p in pts])
    res = run_json(FMPY_SIM, {"kind": "jacobian", "fmu": str(fmu), "start": {**start_values(model), **settings},
                              "states": np.hstack([q, qd]).tolist(), "u": u.tolist()}, tmp_path)
    idx = [res["unknowns"].index(f"der(qd[{i + 1}])") for i in range(art.dof)]
    got = np.array(res["values"])[:, idx]
    want = var_art.model.acceleration(q, qd, u)
    trained_acc = art.model.acceleration(q, qd, u)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-10 * scale
    assert np.abs(trained_acc - want).max() > 1e-3 * scale  # the parameters did change the dynamics


@pytest.mark.parametrize("backend,fmi,interface", [("native", 2, "me"), ("native", 3, "me"), ("python", 2, "cs")])
def test_an_fmu_refuses_parameters_no_rigid_body_has_with_a_message(trained, tmp_path, backend, fmi, interface):
    """Bad values get an error status and a message naming the parameter, never a run: a
    negative or non-finite mass and an absurd gravity when they are set, an inertia breaking
    the triangle inequality at initialisation (its entries are set one at a time), a change
    after initialisation; good values are taken and read back."""
    from mc2fmu.fmu.export import export_fmu
    from tests.fmu_helpers import run_json

    model, mech, _ = trained("four_bar")
    fmu = tmp_path / "r.fmu"
    export_fmu(model, fmu, backend, fmi, interface)
    body = load_mechanism(mech).bodies[-1]
    J = np.diag(body.inertia)

    def run(values, read=None):
        return run_json(FMPY_SIM, {"kind": "parameters", "fmu": str(fmu), "values": values, "read": read}, tmp_path)

    bad_mass = run([[f"{body.name}.mass", -1.0]])
    assert bad_mass["calls"][0][1] != "ok"
    assert any(f"{body.name}.mass = -1 refused: a mass must lie in" in m["message"] for m in bad_mass["messages"])
    assert run([[f"{body.name}.mass", float("nan")]])["calls"][0][1] != "ok"
    triangle = run([[f"{body.name}.inertia[1]", float(J[1] + J[2]) * 1.5]])
    assert triangle["calls"][0][1] == "ok" and triangle["calls"][-1][0] == "exitInitializationMode"
    assert triangle["calls"][-1][1] != "ok"
    assert any(f"{body.name}.inertia" in m["message"] and "triangle inequality" in m["message"]
               for m in triangle["messages"])
    # the same entry set beside the others that make it a rigid body again: accepted
    fine = run([[f"{body.name}.inertia[1]", float(J[1] + J[2]) * 1.5], [f"{body.name}.inertia[2]", float(J[1] + J[2])],
                [f"{body.name}.inertia[3]", float(J[1] + J[2])], [f"{body.name}.mass", 2.5 * body.mass]],
               read=f"{body.name}.mass")
    assert all(c[1] == "ok" for c in fine["calls"][:-1]), fine["calls"]
    assert fine["read"] == 2.5 * body.mass
    assert fine["calls"][-1][1] != "ok" and any("fixed parameter" in m["message"] for m in fine["messages"])
    assert run([["gravity[2]", 1e9]])["calls"][0][1] != "ok"


def _rotated(J_diag, angles) -> list:
    """A full inertia tensor: the principal moments J_diag in axes turned by three angles."""
    from scipy.spatial.transform import Rotation

    R = Rotation.from_euler("xyz", angles).as_matrix()
    return (R @ np.diag(J_diag) @ R.T).tolist()


def test_full_inertia_tensors_states_and_instances_keep_their_own_parameters(trained, tmp_path):
    """An FMU exported with a full (non-diagonal) inertia tensor has six inertia parameters;
    another full tensor, a mass and a centre of mass set through FMI give the derivatives of
    the model read with that file (1e-10), while a second instance in the same process keeps
    the exported ones; a reset goes back to the exported values; a restored or deserialized
    FMU state carries its parameters with it."""
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.variants import parameter_settings, physical_parameters
    from mc2fmu.models.artifact import load_artifact
    from tests.fmu_helpers import run_json, start_values

    model, mech, _ = trained("four_bar")
    d = load_mechanism(mech).to_dict()
    body = d["bodies"][1]
    J = np.diag(np.asarray(body["inertia"], dtype=float)) if np.ndim(body["inertia"]) == 2 else np.asarray(body["inertia"])
    body["inertia"] = _rotated(J, [0.3, -0.2, 0.5])
    exported = tmp_path / "exported.toml"
    exported.write_text(mechanism_toml(d))
    fmu = tmp_path / "full.fmu"
    export_fmu(model, fmu, "native", 2, "me", mechanism=exported)
    names = [p.name for p in physical_parameters(load_mechanism(exported))]
    assert f"{body['name']}.inertia[6]" in names
    body["inertia"] = _rotated(1.3 * J, [-0.4, 0.25, 0.1])
    body["mass"] *= 1.4
    d["bodies"][2]["com"] = (np.asarray(d["bodies"][2]["com"], dtype=float) + [0.01, 0.02, 0.0]).tolist()
    variant = mechanism_from_dict(d, source="v")
    art = load_artifact(model)
    exported_art = art.for_mechanism(load_mechanism(exported), exported)[0]
    variant_art = art.for_mechanism(variant, "v")[0]
    settings, _ = parameter_settings(exported_art.mechanism, variant, set(names), "v", fmu.name)
    assert {f"{body['name']}.inertia[{k}]" for k in range(4, 7)} <= set(settings)
    from mc2fmu.models.envelope import sample_points

    pts = sample_points(art.envelope, art.model, 6, seed=9)
    q = np.concatenate([p["q"] for p in pts])
    qd = np.concatenate([p["qd"] for p in pts])
    u = np.concatenate([p["u"] for p in pts])
    res = run_json(FMPY_SIM, {"kind": "parameter_states", "fmu": str(fmu), "start": start_values(model),
                              "values": settings, "read": f"{body['name']}.mass",
                              "states": np.hstack([q, qd]).tolist(), "u": u.tolist()}, tmp_path)
    m = art.dof
    want_variant = variant_art.model.acceleration(q, qd, u)
    want_exported = exported_art.model.acceleration(q, qd, u)
    scale = np.abs(want_variant).max()
    assert np.abs(want_variant - want_exported).max() > 1e-3 * scale  # the parameters do matter here
    for key, want in (("a", want_variant), ("b", want_exported), ("a_reset", want_exported),
                      ("a_restored", want_variant), ("b_deserialized", want_variant)):
        got = np.array(res[key])[:, m:]
        assert np.abs(got - want).max() <= 1e-10 * scale, key
    assert res["read_after_reset"] == load_mechanism(exported).bodies[1].mass
