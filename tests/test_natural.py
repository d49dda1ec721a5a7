"""Natural coordinates against closed-form rigid-body mechanics (no engine needed)."""

from __future__ import annotations

import numpy as np
import pytest

from mc2fmu.mechanics.mechanism import load_mechanism, mechanism_from_dict
from mc2fmu.mechanics.natural import (
    affine_weights,
    build_layout,
    force_model,
    kinetic_energy,
    mass_matrix,
    nc_from_poses,
    nc_velocity,
    poses_from_nc,
    rigidity_residual,
)

from .conftest import analytic_motion, rotation_about
from .oracles import power_errors, spring_states

REL = 1e-9


def _rigid_ke(mech, R, v_com, omega):
    """0.5 m v^2 + 0.5 w^T (R J R^T) w, summed over bodies."""
    ke = 0.0
    for k, b in enumerate(mech.bodies):
        Jg = R[:, k] @ b.inertia @ np.swapaxes(R[:, k], 1, 2)
        ke = ke + 0.5 * b.mass * np.sum(v_com[:, k] ** 2, 1) + 0.5 * np.einsum("ni,nij,nj->n", omega[:, k], Jg, omega[:, k])
    return ke


def test_kinetic_energy_matches_rigid_body_formula(toy_mechanism):
    mech = load_mechanism(toy_mechanism)
    layout = build_layout(mech)
    M = mass_matrix(mech, layout)
    m = analytic_motion()
    xd = nc_velocity(layout, m["rotation"], m["v_com"], m["omega"])
    ke_nc = kinetic_energy(M, xd)
    ke_ref = _rigid_ke(mech, m["rotation"], m["v_com"], m["omega"])
    assert np.max(np.abs(ke_nc - ke_ref) / ke_ref) < REL


def test_nc_velocity_is_derivative_of_nc_positions(toy_mechanism):
    """nc_velocity (used as the exact-velocity oracle) against finite differences of x(t)."""
    mech = load_mechanism(toy_mechanism)
    layout = build_layout(mech)
    m0 = analytic_motion(n=3, dt=1e-6)
    x = nc_from_poses(layout, m0["origin"], m0["rotation"])
    xd_fd = (x[2] - x[0]) / 2e-6
    xd = nc_velocity(layout, m0["rotation"], m0["v_com"], m0["omega"])[1]
    assert np.max(np.abs(xd_fd - xd)) < 1e-6


@pytest.mark.parametrize(
    "inertia, rank",
    [([0.02, 0.03, 0.04], 3), ([0.0, 0.2, 0.2], 1), ([0.1, 0.1, 0.2], 2), ([0.0, 0.0, 0.0], 0)],
    ids=["solid", "rod", "plate", "point"],
)
def test_singular_bodies_keep_exact_energy(inertia, rank):
    """A rod, a plate and a point mass: M is PSD with the right rank and the energy is still exact."""
    mech = mechanism_from_dict({"name": "b", "bodies": [
        {"name": "b", "mass": 1.7, "com": [0.1, -0.2, 0.3], "inertia": inertia},
        {"name": "ref", "mass": 1.0, "inertia": [0.1, 0.1, 0.1]},
    ]})
    layout = build_layout(mech)
    M = mass_matrix(mech, layout)
    block = M[:12, :12]
    eig = np.linalg.eigvalsh(block)
    assert eig.min() > -1e-12
    # mass (3 translational) + second moments: 3 * (1 + rank) nonzero eigenvalues
    assert np.sum(eig > 1e-9 * eig.max()) == 3 * (1 + rank)
    assert layout.bodies[0].inertia_rank == rank
    assert layout.bodies[0].length > 0
    rng = np.random.default_rng(0)
    R = np.linalg.qr(rng.normal(size=(5, 2, 3, 3)))[0]
    R *= np.sign(np.linalg.det(R))[..., None, None]
    v, w = rng.normal(size=(5, 2, 3)), rng.normal(size=(5, 2, 3))
    xd = nc_velocity(layout, R, v, w)
    ke = kinetic_energy(M, xd)
    ref = _rigid_ke(mech, R, v, w)
    assert np.max(np.abs(ke - ref) / ref) < REL


def test_point_weights_reproduce_body_points(toy_mechanism):
    mech = load_mechanism(toy_mechanism)
    layout = build_layout(mech)
    m = analytic_motion(n=7)
    x = nc_from_poses(layout, m["origin"], m["rotation"])
    xi = np.array([0.3, -0.7, 0.25])
    for k, bl in enumerate(layout.bodies):
        c = affine_weights(bl, xi)
        p = np.einsum("j,njk->nk", c, x[:, bl.slice].reshape(-1, 4, 3))
        p_ref = m["origin"][:, k] + m["rotation"][:, k] @ xi
        assert np.max(np.abs(p - p_ref)) < 1e-12


def test_virtual_power_of_generalized_forces(toy_mechanism):
    """f . xdot equals the physical power: m g . v_com, F . v_point, T . omega (per load)."""
    mech = load_mechanism(toy_mechanism)
    m = analytic_motion()
    errors = power_errors(mech, build_layout(mech), m["rotation"], m["origin"], m["v_com"], m["omega"], m["u"])
    assert set(errors) == {"gravity", "tau", "F"}
    for load, err in errors.items():
        assert err < REL, (load, err)


def test_torque_force_is_linear_in_x_and_pure_torque(toy_mechanism):
    """A torque's NC force has zero resultant and a moment about the COM equal to T."""
    mech = load_mechanism(toy_mechanism)
    layout = build_layout(mech)
    fm = force_model(mech, layout)
    m = analytic_motion(n=4)
    x = nc_from_poses(layout, m["origin"], m["rotation"])
    u = np.array([[2.5, 0.0]] * 4)
    f = (fm(x, u) - fm.f_g)[:, layout.bodies[0].slice].reshape(-1, 4, 3)
    pts = x[:, layout.bodies[0].slice].reshape(-1, 4, 3)
    assert np.max(np.abs(f.sum(axis=1))) < 1e-12
    moment = np.cross(pts - pts[:, :1], f).sum(axis=1)
    assert np.max(np.abs(moment - 2.5 * mech.inputs[0].direction)) < 1e-12


def test_rigidity_and_pose_round_trip(toy_mechanism):
    mech = load_mechanism(toy_mechanism)
    layout = build_layout(mech)
    m = analytic_motion()
    x = nc_from_poses(layout, m["origin"], m["rotation"])
    assert rigidity_residual(layout, x).max() < 1e-12
    origin, R = poses_from_nc(layout, x)
    assert np.max(np.abs(origin - m["origin"])) < 1e-12
    assert np.max(np.abs(R - m["rotation"])) < 1e-12
    # a deformed body is measured: stretch one point by 1 mm
    x2 = x.copy()
    x2[:, 3] += 1e-3
    assert rigidity_residual(layout, x2)[:, 0].max() == pytest.approx(1e-3, rel=0.3)


SPRINGS_TOML = """
[[springs]]
name = "link"
body_a = "arm"
point_a = [0.1, 0.2, 0.0]
body_b = "rod"
point_b = [0.0, 0.0, 0.3]
stiffness = 50.0
damping = 3.0
length = 0.7

[[springs]]
name = "anchor"
body_a = "ground"
point_a = [0.5, 0.5, 0.5]
body_b = "rod"
point_b = [0.1, 0.0, 0.0]
stiffness = 20.0
length = 0.2
"""


def test_spring_force_power_and_energy(toy_mechanism):
    """Spring-dampers in NC against point kinematics: lengths, f . xdot = -(k (l - L0) + c ldot) ldot,
    and the stiffness part is minus the gradient of 0.5 k (l - L0)^2 (finite differences in x)."""
    toy_mechanism.write_text(toy_mechanism.read_text() + SPRINGS_TOML)
    mech = load_mechanism(toy_mechanism)
    layout = build_layout(mech)
    fm = force_model(mech, layout)
    m = analytic_motion()
    x = nc_from_poses(layout, m["origin"], m["rotation"])
    xd = nc_velocity(layout, m["rotation"], m["v_com"], m["omega"])
    length, ldot = spring_states(mech, m["rotation"], m["origin"], m["v_com"], m["omega"])
    assert np.max(np.abs(fm.springs.lengths(x) - length)) < 1e-12
    k, c, L0 = (np.array([getattr(sp, a) for sp in mech.springs]) for a in ("stiffness", "damping", "length"))
    power = -((k * (length - L0) + c * ldot) * ldot).sum(1)
    errors = power_errors(mech, layout, m["rotation"], m["origin"], m["v_com"], m["omega"], m["u"])
    assert errors["link"] < REL and errors["anchor"] < REL, errors
    f_spring = fm(x, m["u"], xd) - fm(x, m["u"], np.zeros_like(xd)) + fm.springs(x, np.zeros_like(xd))
    assert np.max(np.abs(np.einsum("ni,ni->n", f_spring, xd) - power)) < REL * np.abs(power).max()
    h = 1e-6
    x0 = x[7]
    grad = np.array([(fm.springs.energy(x0 + h * e) - fm.springs.energy(x0 - h * e)) / (2 * h) for e in np.eye(len(x0))])
    stiff = fm.springs(x0, np.zeros_like(x0))
    assert np.max(np.abs(stiff + grad)) < 1e-7 * np.abs(stiff).max()
    with pytest.raises(ValueError, match="velocity"):
        fm(x, m["u"])


@pytest.mark.parametrize("name", ["arm\n", "arm x", "1arm", "arm;", "", "arm\x00"])
def test_names_must_be_whole_identifiers(name):
    """A name becomes a C and Python identifier in the FMU: a trailing newline or any other
    character after a valid prefix is refused, with the rule."""
    from mc2fmu.errors import MechanismError

    data = {"name": "m", "bodies": [{"name": name, "mass": 1.0, "inertia": [1.0, 1.0, 1.0]}]}
    with pytest.raises(MechanismError) as exc:
        mechanism_from_dict(data, source="m.toml")
    assert "m.toml" in str(exc.value) and "[A-Za-z_]" in str(exc.value)


def test_block_mass_product_is_the_dense_product_and_the_rigid_kinetic_energy(toy_mechanism):
    """The dynamics' O(n) product with M's 4x4 blocks against the dense product, and the
    kinetic energy it gives against the rigid-body formula."""
    import torch

    from mc2fmu.models.manifold import mass_blocks, mass_times

    mech = load_mechanism(toy_mechanism)
    layout = build_layout(mech)
    M = mass_matrix(mech, layout)
    A = mass_blocks(M)
    assert A is not None and A.shape == (len(layout.bodies), 4, 4)
    J = np.random.default_rng(0).standard_normal((7, layout.size, 2))
    dense = np.einsum("nk,bkm->bnm", M, J)
    assert np.max(np.abs(mass_times(A, J) - dense)) < 1e-13 * np.abs(dense).max()
    assert np.max(np.abs(mass_times(torch.as_tensor(A), torch.as_tensor(J)).numpy() - dense)) < 1e-13 * np.abs(dense).max()
    m = analytic_motion()
    xd = nc_velocity(layout, m["rotation"], m["v_com"], m["omega"])
    ke = 0.5 * np.einsum("bn,bn->b", xd, mass_times(A, xd[:, :, None])[:, :, 0])
    assert np.allclose(ke, _rigid_ke(mech, m["rotation"], m["v_com"], m["omega"]), rtol=REL, atol=0)
    # anything else is used densely: a coupling between two bodies, or a size that is not 12 per body
    M2 = M.copy()
    M2[0, 12] = M2[12, 0] = 1e-9
    assert mass_blocks(M2) is None and mass_blocks(np.eye(18)) is None


def test_rigidity_term_is_zero_for_rigid_bodies_and_measures_a_stretch(toy_mechanism):
    """The training's rigidity term on a decoder that is an exact rigid motion (closed form)
    is zero; stretching one point by 1 mm gives the distance errors it must."""
    import types

    import torch

    from mc2fmu.reducers.autoencoder.config import TrainConfig
    from mc2fmu.reducers.autoencoder.loss import LossFunction

    layout = build_layout(load_mechanism(toy_mechanism))
    axis = np.array([1.0, 2.0, 0.5]) / np.linalg.norm([1.0, 2.0, 0.5])
    stretch = [0.0]

    def decode(q):  # q (B, 1): body 0 turns about z, body 1 about an oblique axis, by q
        th = q[:, 0].numpy()
        R = np.stack([rotation_about(np.array([0.0, 0.0, 1.0]), th), rotation_about(axis, 0.7 * th)], axis=1)
        origin = np.stack([np.stack([0.1 * np.sin(th), 0.2 * np.cos(th), 0 * th], 1),
                           np.stack([1 + 0.3 * th, 0 * th, 0.1 * np.cos(th)], 1)], axis=1)
        x = nc_from_poses(layout, origin, R)
        x[:, 15] += stretch[0]  # body 1, point r1, x coordinate
        return torch.as_tensor(x)

    cfg = TrainConfig(dof=1, rigidity_weight=1.0)
    scales = {k: np.ones(layout.size) for k in "xva"}
    loss = LossFunction(types.SimpleNamespace(decoder=decode, reduced=False), cfg, [False], scales, layout)
    q = torch.linspace(-1.0, 2.0, 50, dtype=torch.float64)[:, None]
    assert loss.rigidity(q).item() < 1e-28
    stretch[0] = 1e-3
    value = loss.rigidity(q).item()
    # three of body 1's six distances involve r1 and change by about 1 mm times a direction
    # cosine; body 0's are exact: the mean over 12 distances is of order (1e-3)^2 / 4
    assert 1e-8 < value < 3e-7
