"""The reduced dynamics driven by an EXACT kinematic map instead of a trained decoder.

The slider-crank's natural coordinates are known in closed form as a function of the crank
angle.  Fed with that map, ``M_m``, ``G_m``, ``f_m`` and the one-step maps must reproduce
the Exudyn simulation of the same mechanism: this checks the reduced-dynamics assembly
independently of any training, and measures each step map's own error floor.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

pytest.importorskip("exudyn")

from examples._model import Spring  # noqa: E402
from examples.reference import mechanism_dict, model as reference_model, simulate  # noqa: E402
from mc2fmu.mechanics.mechanism import mechanism_from_dict  # noqa: E402
from mc2fmu.validation.metrics import position_nrmse  # noqa: E402
from mc2fmu.reducers.autoencoder.torch_model import TorchManifoldModel  # noqa: E402
from mc2fmu.mechanics.natural import build_layout, force_model, mass_matrix, poses_from_nc  # noqa: E402
from mc2fmu.models.simulate import initial_history, rollout  # noqa: E402

R_CRANK, L_ROD = 0.15, 0.45  # examples/mechanisms.py slider_crank()


class ExactSliderCrank(torch.nn.Module):
    """x(theta): the NC points of crank, rod and slider in closed form, with J and H.

    Crank pin ``A = r (cos t, sin t)``, rod angle ``phi = asin(-r sin t / l)``, slider
    ``S = (r cos t + w, 0)``, ``w = sqrt(l^2 - r^2 sin^2 t)``; every NC point is
    ``o + R (com + L e_k)``, linear in each body's (o, R), so its derivatives follow from
    ``o', o''`` and ``R' = R K phi'``, ``R'' = R (K^2 phi'^2 + K phi'')`` (``K`` = [e_z]x).
    """

    def __init__(self, layout):
        super().__init__()
        self.layout = layout
        self.K = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)

    @staticmethod
    def _rz(a):
        c, s = torch.cos(a), torch.sin(a)
        z, o = torch.zeros_like(a), torch.ones_like(a)
        return torch.stack([torch.stack([c, -s, z], -1), torch.stack([s, c, z], -1), torch.stack([z, z, o], -1)], -2)

    def _bodies(self, th):
        r, l = R_CRANK, L_ROD
        c, s = torch.cos(th), torch.sin(th)
        w = torch.sqrt(l * l - (r * s) ** 2)
        w1 = -r * r * s * c / w
        w2 = -r * r * (c * c - s * s) / w - r**4 * s * s * c * c / w**3
        phi = torch.asin(-r * s / l)
        phi1 = -r * c / w
        phi2 = r * s * (w * w - r * r * c * c) / w**3
        z = torch.zeros_like(th)
        K = self.K
        # (origin, origin', origin'', R, R', R'') per body
        Rc = self._rz(th)
        Rr = self._rz(phi)
        eye = torch.eye(3, dtype=th.dtype).expand(len(th), 3, 3)
        zero3 = torch.zeros(len(th), 3, dtype=th.dtype)
        return [
            (zero3, zero3, zero3, Rc, Rc @ K, Rc @ K @ K),
            (torch.stack([r * c, r * s, z], -1), torch.stack([-r * s, r * c, z], -1), torch.stack([-r * c, -r * s, z], -1),
             Rr, Rr @ K * phi1[:, None, None], Rr @ (K @ K * phi1[:, None, None] ** 2 + K * phi2[:, None, None])),
            (torch.stack([r * c + w, z, z], -1), torch.stack([-r * s + w1, z, z], -1), torch.stack([-r * c + w2, z, z], -1),
             eye, 0 * eye, 0 * eye),
        ]

    def value_jh(self, q: torch.Tensor):
        th = q[:, 0]
        xs, js, hs = [], [], []
        for bl, (o, o1, o2, R, R1, R2) in zip(self.layout.bodies, self._bodies(th)):
            com = torch.tensor(bl.com, dtype=q.dtype)
            for k in range(4):
                p = com if k == 0 else com + bl.length * torch.eye(3, dtype=q.dtype)[k - 1]
                xs.append(o + R @ p)
                js.append(o1 + R1 @ p)
                hs.append(o2 + R2 @ p)
        x = torch.cat(xs, -1)
        return x, torch.cat(js, -1)[..., None], torch.cat(hs, -1)[..., None, None]

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return self.value_jh(q)[0]


@pytest.fixture(scope="module")
def exact_setup(reference_run):
    run = reference_run("slider_crank", "train")
    mech = mechanism_from_dict(mechanism_dict("slider_crank"), source="slider_crank")
    layout = build_layout(mech)
    M = mass_matrix(mech, layout)
    fm = force_model(mech, layout, M)
    return run, layout, M, fm


@pytest.fixture(scope="module")
def sprung_setup():
    """The slider-crank plus a ground-slider and a crank-rod spring-damper (both preloaded),
    simulated by Exudyn: 4 s of the training excitation."""
    springs = (
        Spring("guide_spring", "ground", (0.9, 0.05, 0.0), "slider", (0.0, 0.0, 0.0), 40.0, 6.0, 0.42),
        Spring("link_spring", "crank", (0.12, 0.02, 0.0), "rod", (0.25, 0.0, 0.0), 80.0, 4.0, 0.2),
    )
    variant = replace(reference_model("slider_crank"), springs=springs)
    run = simulate(variant, "train", t_end=4.0)
    mech = mechanism_from_dict(mechanism_dict(variant), source="sprung slider_crank")
    layout = build_layout(mech)
    M = mass_matrix(mech, layout)
    return run, layout, M, force_model(mech, layout, M)


class _Stepper:
    """The exact torch model behind the numpy interface `rollout` drives (dt, acceleration, step)."""

    def __init__(self, model, dt: float):
        self.model, self.dt = model, dt

    def acceleration(self, q, v, u):
        with torch.no_grad():
            return self.model.acceleration(*(torch.as_tensor(np.atleast_2d(a)) for a in (q, v, u))).numpy()

    def step(self, q_prev, q, u):
        with torch.no_grad():
            return self.model.step(*(torch.as_tensor(np.atleast_2d(a)) for a in (q_prev, q, u)), self.dt).numpy()


def _simulate(exact_setup, step_map: str, seconds: float):
    run, layout, M, fm = exact_setup
    dec = ExactSliderCrank(layout)
    dt = 1e-3
    model = _Stepper(TorchManifoldModel(dec, torch.nn.Identity(), M, fm, step_map), dt)
    n = int(round(seconds / 1e-3)) + 1
    R = run["rotation"][:n, 0]
    theta = np.arctan2(R[:, 1, 0], R[:, 0, 0])
    # the engine starts at rest: q0 from its pose, qd0 = 0
    q_prev = initial_history(model, theta[:1], np.zeros(1), run["u"][0])
    q = rollout(model, q_prev, theta[:1], run["u"][:n])
    with torch.no_grad():
        x = dec(torch.as_tensor(q)).numpy()
    origin, _ = poses_from_nc(layout, x)
    return position_nrmse(origin, run["origin"][:n]), float(np.max(np.abs(q[:, 0] - theta)))


@pytest.mark.slow
def test_exact_map_reproduces_engine_with_centred_step(exact_setup):
    nrmse, max_angle = _simulate(exact_setup, "centred", 4.0)
    # measured 3e-5 % / 1.4e-6 rad: the centred map's floor; an assembly error would be >> 1 %
    assert nrmse < 1e-4, nrmse
    assert max_angle < 1e-4, max_angle


@pytest.mark.slow
def test_paper_step_map_has_a_larger_floor(exact_setup):
    """Algorithm 1's half-step velocity lag: a visible but small error with the exact map."""
    nrmse_paper, _ = _simulate(exact_setup, "paper", 4.0)
    nrmse_centred, _ = _simulate(exact_setup, "centred", 4.0)
    assert nrmse_paper < 1e-2, nrmse_paper
    assert nrmse_paper > 3 * nrmse_centred, (nrmse_paper, nrmse_centred)


@pytest.mark.slow
def test_exact_map_with_springs_reproduces_engine(sprung_setup):
    """Spring-dampers in the reduced dynamics, J^T f_spring(x, J qdot), against Exudyn's
    spring-dampers: the exact map must stay on the engine's trajectory as without springs."""
    run = sprung_setup[0]
    theta = np.arctan2(run["rotation"][:, 0, 1, 0], run["rotation"][:, 0, 0, 0])
    assert -3.0 < theta.min() and theta.max() < -0.15  # clear of the dead centres, no wrap
    # the dampers take out a good part of the energy the motion carries
    assert run["energy_balance"]["dissipated"][-1] > 0.5 * run["kinetic_energy"].max(), run["kinetic_energy"].max()
    nrmse, max_angle = _simulate(sprung_setup, "centred", 4.0)
    assert nrmse < 1e-4, nrmse
    assert max_angle < 1e-4, max_angle
