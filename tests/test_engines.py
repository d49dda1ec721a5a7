"""Natural coordinates against an independent engine: Exudyn's own energies and velocities.

These are the acceptance checks of the ingest stage on every bundled mechanism:
kinetic energy (exact and finite-difference velocities), virtual power of every load and
rigidity of the ingested coordinates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("exudyn")

from examples.reference import MACHINES, MECHANISMS, simulate  # noqa: E402
from mc2fmu.data.dataset import ingest  # noqa: E402
from mc2fmu.mechanics.mechanism import mechanism_from_dict  # noqa: E402
from mc2fmu.mechanics.natural import (  # noqa: E402
    build_layout,
    kinetic_energy,
    mass_matrix,
    nc_velocity,
    rigidity_residual,
)
from examples.reference import mechanism_dict  # noqa: E402

from .oracles import power_errors  # noqa: E402


@pytest.fixture(scope="module", params=MECHANISMS + MACHINES)
def short_run(request):
    """2 s of the training excitation with the engine's exact velocities."""
    name = request.param
    run = simulate(name, "train", t_end=2.0)
    mech = mechanism_from_dict(mechanism_dict(name), source=name)
    return name, mech, run


def test_kinetic_energy_with_engine_velocities(short_run):
    """0.5 xdot^T M xdot with the engine's exact velocities equals Exudyn's kinetic energy to 1e-9."""
    name, mech, run = short_run
    layout = build_layout(mech)
    M = mass_matrix(mech, layout)
    xd = nc_velocity(layout, run["rotation"], run["velocity_com"], run["omega"])
    ke_nc = kinetic_energy(M, xd)
    ke_engine = run["kinetic_energy"]
    assert ke_engine.max() > 0
    assert np.max(np.abs(ke_nc - ke_engine)) / ke_engine.max() < 1e-9, name


def test_virtual_power_of_every_load(short_run):
    """f . xdot equals the physical power of gravity, each force, each torque and each spring, to 1e-9."""
    name, mech, run = short_run
    errors = power_errors(mech, build_layout(mech), run["rotation"], run["origin"], run["velocity_com"],
                          run["omega"], run["u"])
    assert set(errors) == {"gravity", *mech.input_names, *(s.name for s in mech.springs)}
    for load, err in errors.items():
        assert err < 1e-9, (name, load, err)


@pytest.mark.slow
@pytest.mark.parametrize("name", MECHANISMS)
def test_ingested_run_energy_and_rigidity(name, reference_run, tmp_path):
    """An ingested 10 s export: FD kinetic energy within 1e-4 of the engine's, or where the motion
    is fast (the 3-RRR) as far off as the central difference's leading error term says
    (``xd^T M x3 dt^2 / 6``, x3 the third derivative from the engine's exact velocities), and
    off by that term and nothing else; rigidity < 1e-12 m."""
    run = reference_run(name, "train")
    path = Path(run["path"])
    mech_path = path.parent.parent / "mechanism.toml"
    out = tmp_path / "ds.npz"
    ds = ingest(mech_path, [path], out)
    assert out.exists()
    ke_fd = kinetic_energy(ds.M, ds.xd)
    ke = run["kinetic_energy"]
    xd = nc_velocity(ds.layout, run["rotation"], run["velocity_com"], run["omega"])
    dt = float(ds.dt[0])
    x3 = np.zeros_like(xd)
    x3[1:-1] = (xd[2:] - 2.0 * xd[1:-1] + xd[:-2]) / dt**2
    leading = np.einsum("ni,ij,nj->n", xd, ds.M, x3) * dt**2 / 6.0  # KE_fd - KE to leading order
    err = np.abs(ke_fd - ke)[1:-1]
    assert np.max(err) / ke.max() < max(1e-4, 2.0 * np.max(np.abs(leading)) / ke.max()), name
    assert np.max(np.abs(ke_fd - ke - leading)[1:-1]) < 0.2 * np.max(err) + 1e-12 * ke.max(), name
    assert ds.rigidity.max() < 1e-12
    assert rigidity_residual(ds.layout, ds.x).max() < 1e-12
    # the stored generalized force is the engine's load history mapped exactly
    assert np.max(np.abs(ds.u - run["u"])) < 1e-12 * max(1.0, np.abs(run["u"]).max())
