"""The local-PCA piecewise-linear ROM (seed 002): against an analytic linear motion, its
energy-preserving switch against a general-purpose constrained optimiser, its fits against
their definitions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import eigh
from scipy.optimize import minimize

from mc2fmu.mechanics.mechanism import mechanism_from_dict
from mc2fmu.mechanics.natural import build_layout, force_model, mass_matrix, nc_from_poses
from mc2fmu.models.local_linear import LocalState, Quadratic, nearest_on_level_set
from mc2fmu.reducers.local_pca.fit import fit_local_linear, kmeans, symmetric_psd_lstsq


def _body(name, mass, com=(0.0, 0.0, 0.0), inertia=(0.01, 0.012, 0.014)):
    return {"name": name, "mass": mass, "com": list(com), "inertia": list(inertia)}


def _spring(a, pa, b, pb, k, length, c=0.0):
    return {"name": f"s_{a}_{b}", "body_a": a, "point_a": list(pa), "body_b": b, "point_b": list(pb),
            "stiffness": k, "damping": c, "length": length}


def _system(mech_dict):
    mech = mechanism_from_dict(mech_dict)
    layout = build_layout(mech)
    M = mass_matrix(mech, layout)
    return mech, layout, M, force_model(mech, layout, M)


# ---------------------------------------------------------------- an exactly linear mechanism

MASSES, STIFFNESS = np.array([1.0, 0.7, 1.3]), np.array([40.0, 25.0, 30.0])


def _chain():
    """Three blocks on a line (x), ground-1-2-3 coupled by springs along x at rest length 1 m:
    the motion is a translation of every block along x, an affine 3-D subspace of the NC."""
    bodies = [_body(f"b{i + 1}", float(m)) for i, m in enumerate(MASSES)]
    springs = [_spring("ground", (0.0, 0.0, 0.0), "b1", (0.0, 0.0, 0.0), STIFFNESS[0], 1.0),
               _spring("b1", (0.0, 0.0, 0.0), "b2", (0.0, 0.0, 0.0), STIFFNESS[1], 1.0),
               _spring("b2", (0.0, 0.0, 0.0), "b3", (0.0, 0.0, 0.0), STIFFNESS[2], 1.0)]
    return _system({"name": "chain", "gravity": [0.0, 0.0, 0.0], "bodies": bodies, "springs": springs})


def _chain_nc(layout, s):
    """NC of block displacements ``s`` (n_t, 3) from the rest positions x = 1, 2, 3 m."""
    origin = np.zeros((len(s), 3, 3))
    origin[:, :, 0] = np.arange(1.0, 4.0) + s
    return nc_from_poses(layout, origin, np.tile(np.eye(3), (len(s), 3, 1, 1)))


def _chain_analytic(t):
    k1, k2, k3 = STIFFNESS
    Ks = np.array([[k1 + k2, -k2, 0.0], [-k2, k2 + k3, -k3], [0.0, -k3, k3]])
    w2, Phi = eigh(Ks, np.diag(MASSES))  # mass-normalised modes
    s0 = np.array([0.04, -0.03, 0.05])
    a = Phi.T @ np.diag(MASSES) @ s0
    w = np.sqrt(w2)
    s = np.cos(np.outer(t, w)) * a @ Phi.T
    sd = -(np.sin(np.outer(t, w)) * (a * w)) @ Phi.T
    return s, sd, w2


def test_a_mass_spring_chain_reproduces_the_analytic_solution():
    """An exactly linear motion: one cluster with three modes spans it, the reduced mass and
    stiffness are the chain's (frequencies to rounding), and Algorithm 1 follows the modal
    solution with second-order convergence in the step."""
    mech, layout, M, forces = _chain()
    t = np.arange(0.0, 5.0 + 1e-12, 1e-3)
    s, sd, w2 = _chain_analytic(t)
    x = _chain_nc(layout, s)
    B = np.stack([_chain_nc(layout, np.eye(3)[i][None])[0] - _chain_nc(layout, np.zeros((1, 3)))[0] for i in range(3)], 1)
    xd = sd @ B.T
    rom = fit_local_linear(x, xd, M, forces, 1e-3, clusters=1, modes=3)
    assert np.allclose(np.sort(eigh(rom.K[0], rom.M[0], eigvals_only=True)), w2, rtol=1e-9)
    # the equilibrium is the rest configuration: no internal force left at q = V^T (x_rest - mu)
    q_rest = rom.project(0, _chain_nc(layout, np.zeros((1, 3)))[0])
    assert np.abs(rom.K[0] @ q_rest + rom.c[0]).max() < 1e-9

    Bp = np.linalg.pinv(B)
    x_rest = _chain_nc(layout, np.zeros((1, 3)))[0]
    errors = []
    for dt in (1e-3, 5e-4):
        rom.dt = dt
        tt = np.arange(0.0, 5.0 + 1e-12, dt)
        out = rom.rollout(x[0], xd[0], np.zeros((len(tt), 0)))
        s_rom = (out["x"] - x_rest) @ Bp.T
        errors.append(np.abs(s_rom - _chain_analytic(tt)[0]).max() / np.abs(s).max())
        assert (out["cluster"] == 0).all()
    assert errors[0] < 1e-3, errors
    assert 3.5 < errors[0] / errors[1] < 4.5, errors  # second order


# ---------------------------------------------------------------- the energy-preserving switch

def _carriage_pendulum():
    """Seed 002's Fig. 1: a carriage on x and a pendulum swinging in the yz plane below it,
    a spring on the carriage and one from the carriage to the pendulum's tip; gravity -z."""
    bodies = [_body("carriage", 2.0), _body("pendulum", 0.8, com=(0.0, 0.0, -0.25), inertia=(0.02, 0.02, 0.001))]
    springs = [_spring("ground", (-0.5, 0.0, 0.0), "carriage", (0.0, 0.0, 0.0), 60.0, 0.5, c=0.8),
               _spring("carriage", (0.0, 0.3, 0.0), "pendulum", (0.0, 0.0, -0.5), 15.0, 0.45, c=0.3)]
    return _system({"name": "carriage", "gravity": [0.0, 0.0, -9.81], "bodies": bodies, "springs": springs})


def _rot_x(a):
    c, s = np.cos(a), np.sin(a)
    R = np.zeros((len(a), 3, 3))
    R[:, 0, 0] = 1.0
    R[:, 1, 1], R[:, 1, 2], R[:, 2, 1], R[:, 2, 2] = c, -s, s, c
    return R


def _carriage_motion(layout, t):
    s = 0.08 * np.sin(1.1 * t) + 0.03 * np.sin(2.3 * t + 0.4)
    a = 0.9 * np.sin(0.7 * t) + 0.35 * np.sin(1.9 * t + 1.0)
    origin = np.zeros((len(t), 2, 3))
    origin[:, :, 0] = s[:, None]
    rot = np.stack([np.tile(np.eye(3), (len(t), 1, 1)), _rot_x(a)], axis=1)
    x = nc_from_poses(layout, origin, rot)
    return x, np.gradient(x, t, axis=0)


@pytest.fixture(scope="module")
def carriage_rom():
    mech, layout, M, forces = _carriage_pendulum()
    t = np.arange(0.0, 12.0, 2e-3)
    x, xd = _carriage_motion(layout, t)
    return fit_local_linear(x, xd, M, forces, 1e-3, clusters=6, modes=2), x, xd


def _reference_projection(e: Quadratic, level, target, C, d, start):
    """The same problem by SLSQP: min |q - target|^2, e(q) = level, C q = d."""
    cons = [{"type": "eq", "fun": lambda q: np.array([e(q) - level]), "jac": lambda q: (e.b + e.A @ q)[None]}]
    if C.size:
        cons.append({"type": "eq", "fun": lambda q: C @ q - d, "jac": lambda q: C})
    res = minimize(lambda q: np.sum((q - target) ** 2), start, jac=lambda q: 2 * (q - target),
                   constraints=cons, method="SLSQP", options={"ftol": 1e-15, "maxiter": 500})
    return res.x


def test_a_forced_switch_keeps_kinetic_and_potential_energy_and_the_common_motion(carriage_rom):
    rom, x, xd = carriage_rom
    # the carriage's translation is the same direction in every cluster: a common subspace
    assert all(rom.common_subspace(0, j).shape[1] >= 1 for j in range(1, rom.clusters))
    rng = np.random.default_rng(3)
    checked = 0
    for k in rng.choice(len(x), 40, replace=False):
        i = rom.nearest(x[k])
        j = int(np.argsort(np.sum((rom.centroids - x[k]) ** 2, axis=1))[1])  # the next-nearest: forced
        s = LocalState(i, rom.project(i, x[k]), rom.bases[i].T @ xd[k], rng.standard_normal(rom.r))
        before = rom.energy(s)
        n_inexact = rom.inexact_switches
        s2 = rom.switch(s, j)
        if rom.inexact_switches > n_inexact:
            continue  # the level is out of reach in cluster j (checked below that this is rare)
        checked += 1
        kin, pot = rom.energy(s2)
        assert abs(kin - before[0]) <= 1e-12 * max(1.0, before[0])
        assert abs(pot - before[1]) <= 1e-12 * max(1.0, abs(before[1]))
        Vc = rom.common_subspace(i, j)
        x_prev, v_prev = rom.decode(i, s.q), rom.bases[i] @ s.qd
        assert np.abs(Vc.T @ (rom.decode(j, s2.q) - x_prev)).max() < 1e-12
        assert np.abs(Vc.T @ (rom.bases[j] @ s2.qd - v_prev)).max() < 1e-12
        assert np.allclose(s2.qdd, rom.bases[j].T @ rom.bases[i] @ s.qdd, atol=1e-14)
        # the nearest such point: no better one than a general constrained optimiser finds
        C = Vc.T @ rom.bases[j]
        for e, level, target, d, got in (
            (rom.potential(j), before[1], rom.project(j, x_prev), Vc.T @ (x_prev - rom.centroids[j]), s2.q),
            (rom.kinetic(j), before[0], rom.bases[j].T @ v_prev, Vc.T @ v_prev, s2.qd),
        ):
            ref = _reference_projection(e, level, target, C, d, got + 1e-3)
            assert abs(e(ref) - level) < 1e-8 * max(1.0, abs(level))
            assert np.sum((got - target) ** 2) <= np.sum((ref - target) ** 2) + 1e-12
    assert checked >= 30


def test_the_level_set_projection_is_the_nearest_point_of_an_ellipse():
    """A closed form: the point of the circle |q| = rho nearest a target is target * rho / |target|."""
    e = Quadratic(np.eye(2), np.zeros(2), 0.0)
    for target, rho in (([0.3, -0.4], 1.0), ([2.0, 1.0], 0.5), ([-0.01, 0.02], 3.0)):
        target = np.array(target)
        q, exact = nearest_on_level_set(e, 0.5 * rho**2, target, np.zeros((0, 2)), np.zeros(0))
        assert exact and np.allclose(q, target * rho / np.linalg.norm(target), rtol=1e-13, atol=1e-15)
    # a level below the minimum is out of reach: the minimiser, flagged
    q, exact = nearest_on_level_set(Quadratic(np.eye(2), np.zeros(2), 1.0), 0.5, np.array([1.0, 1.0]),
                                    np.zeros((0, 2)), np.zeros(0))
    assert not exact and np.allclose(q, 0.0, atol=1e-12)


def test_a_free_run_across_clusters_stays_bounded_and_switches(carriage_rom):
    """From a training state with zero input, the piecewise model moves through several
    clusters (switching each time) and its energy does not run away (the dampers only take)."""
    rom, x, xd = carriage_rom
    rom.dt = 1e-3
    out = rom.rollout(x[0], xd[0], np.zeros((8000, 0)))
    assert np.isfinite(out["x"]).all()
    assert len(set(out["cluster"].tolist())) >= 3
    assert rom.switches > 0


# ---------------------------------------------------------------- the fits

def test_symmetric_psd_least_squares_against_its_definition():
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((200, 3))
    A_true = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, -0.2], [0.0, -0.2, 0.5]])
    assert np.allclose(symmetric_psd_lstsq(Q, Q @ A_true), A_true, atol=1e-12)  # exact data: recovered
    # an indefinite target: the answer is PSD and no PSD matrix fits better (random PSD trials
    # and the projection of the unconstrained answer)
    G = Q @ np.diag([1.0, -0.5, 0.2]) + 0.01 * rng.standard_normal((200, 3))
    A = symmetric_psd_lstsq(Q, G)
    assert np.linalg.eigvalsh(A).min() >= -1e-12 and np.allclose(A, A.T)
    best = np.linalg.norm(Q @ A - G)
    for _ in range(200):
        L = A + 0.05 * rng.standard_normal((3, 3))
        w, U = np.linalg.eigh(0.5 * (L + L.T))
        trial = (U * np.maximum(w, 0.0)) @ U.T
        assert np.linalg.norm(Q @ trial - G) >= best - 1e-10


def test_kmeans_separates_well_separated_groups_deterministically():
    rng = np.random.default_rng(1)
    centres = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    x = np.concatenate([c + 0.1 * rng.standard_normal((50, 2)) for c in centres])
    C, labels = kmeans(x, 3, seed=0)
    for g in range(3):
        assert len(set(labels[50 * g : 50 * (g + 1)].tolist())) == 1
    for g in range(3):  # each centroid is its group's mean
        assert np.allclose(C[labels[50 * g]], x[50 * g : 50 * (g + 1)].mean(axis=0), atol=1e-12)
        assert np.linalg.norm(C[labels[50 * g]] - centres[g]) < 0.1
    C2, labels2 = kmeans(x, 3, seed=0)
    assert np.array_equal(labels, labels2) and np.array_equal(C, C2)


def test_the_clusters_extent_is_the_training_samples_reach():
    """A cluster's radius is the largest distance of its samples from its centroid (one cluster
    here: of all samples from their mean), and the extent of a point is how far it lies beyond
    that radius, in radii."""
    _, layout, M, forces = _chain()
    t = np.arange(0.0, 2.0, 1e-3)
    s, sd, _ = _chain_analytic(t)
    x = _chain_nc(layout, s)
    xd = _chain_nc(layout, sd) - _chain_nc(layout, np.zeros_like(sd))
    rom = fit_local_linear(x, xd, M, forces, 1e-3, clusters=1, modes=3)
    mu = x.mean(axis=0)
    R = np.sqrt(((x - mu) ** 2).sum(axis=1)).max()
    assert rom.radius[0] == pytest.approx(R, rel=1e-12)
    assert max(rom.extent(0, xi) for xi in x) == 0.0
    e = np.random.default_rng(0).normal(size=x.shape[1])
    e /= np.linalg.norm(e)
    assert rom.extent(0, mu + 0.5 * R * e) == 0.0
    assert rom.extent(0, mu + 1.5 * R * e) == pytest.approx(0.5, rel=1e-12)
    assert rom.extent(0, mu + np.nan) == np.inf


# ---------------------------------------------------------------- a closed loop: the start and the FMUs

@pytest.fixture(scope="module")
def four_bar_lpca(trained, tmp_path_factory):
    """The local-PCA ROM of the four-bar (a closed loop), on the coordinates of the briefly
    trained autoencoder of ``conftest.trained``: (model_dir, mechanism, artifact)."""
    from mc2fmu.pipeline import train
    from mc2fmu.reducers.local_pca.config import LocalPcaConfig

    chart, mech, run = trained("four_bar")
    out = tmp_path_factory.mktemp("lpca-four-bar") / "model"
    return out, mech, train(mech, [run], LocalPcaConfig(dof=1, from_model=str(chart)), out, reducer="local-pca")


def test_a_local_pca_model_reads_its_start_as_the_start_values(four_bar_lpca):
    """The chart reads the ROM state a model starts in as the (q, qd) it was started from, so
    that the first q, qd of a run (`mc2fmu simulate`'s first row, an FMU's outputs at its start)
    start the same run again: start(observe(start(q, qd))) = start(q, qd), over the envelope.
    (The orthogonal projection of decode(q) into the nearest cluster, the start before, was
    read as a q up to 0.18 off here: decode(q) lies off the cluster's plane, and the briefly
    trained encoder reads the projected point elsewhere.)"""
    from mc2fmu.models.envelope import sample_points

    _, _, art = four_bar_lpca
    model = art.model
    pts = sample_points(art.envelope, model.chart, 24, seed=5)
    for p in pts:
        q, qd, u = p["q"][0], p["qd"][0], p["u"][0]
        s = model.start(q, qd, u)
        q1, qd1, _ = model.observe(s[None])
        assert np.abs(q1[0] - q).max() <= 1e-11 * max(1.0, np.abs(q).max())
        assert np.abs(qd1[0] - qd).max() <= 1e-10 * max(1.0, np.abs(qd).max())
        again = model.start(q1[0], qd1[0], u)
        assert again[0] == s[0]  # the same cluster
        assert np.abs(again - s).max() <= 1e-10 * max(1.0, np.abs(s).max())


@pytest.mark.parametrize("backend", ["native", "python"])
def test_the_local_pca_fmus_equal_simulate_on_a_closed_loop_mechanism(four_bar_lpca, reference_run, tmp_path, backend):
    """The four-bar's FMU (co-simulation, input row k held over step k) started from `mc2fmu
    simulate`'s first q, qd of the held-out `low` run, against simulate over 2 s: positions and
    q to 1e-9 (tests/test_export.py's parity tolerance).  (With the projection start, 2.5e-4 m
    in both backends: simulate's first q, qd were not its start values.)"""
    from mc2fmu.data.poses import read_run
    from mc2fmu.fmu.export import export_fmu
    from mc2fmu.mechanics.mechanism import load_mechanism
    from mc2fmu.mechanics.natural import poses_from_nc
    from mc2fmu.models.simulate import simulate_run
    from tests.fmu_helpers import run_json

    out, mech, art = four_bar_lpca
    run = read_run(reference_run("four_bar", "low")["path"], load_mechanism(mech))
    n = 2001
    x = nc_from_poses(art.layout, run.origin[:n], run.rotation[:n])
    ref = simulate_run(art, x, run.u[:n])
    assert np.isfinite(ref["x"]).all()
    origin = poses_from_nc(art.layout, ref["x"])[0]
    fmu = tmp_path / f"{backend}.fmu"
    summary = export_fmu(out, fmu, backend, 2, "cs")
    if backend == "native":
        assert max(summary["native_max_difference"].values()) <= 1e-12
    start = {"q_start[1]": float(ref["q"][0, 0]), "qd_start[1]": float(ref["qd"][0, 0])}
    req = {"kind": "steps", "fmu": str(fmu), "start": start, "inputs": art.mechanism.input_names,
           "u": run.u[: n - 1].tolist(), "h": art.dt, "n_steps": n - 1}
    res = run_json(Path(__file__).with_name("fmpy_sim.py"), req, tmp_path)
    assert res["failure"] is None, res["messages"]
    y, outs = np.array(res["y"]), res["outputs"]
    pos = np.stack([y[:, [outs.index(f"{b}.{c}") for c in "xyz"]] for b in art.mechanism.body_names], axis=1)
    assert np.abs(pos - origin[1:]).max() <= 1e-9, np.abs(pos - origin[1:]).max()
    assert np.abs(y[:, outs.index("q[1]")] - ref["q"][1:, 0]).max() <= 1e-9
