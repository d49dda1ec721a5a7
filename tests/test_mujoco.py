"""The MuJoCo reader, checked against MuJoCo's own quantities.

A pendulum hinged to a ground-welded base (with an unnamed second link on a hinge and a
slider on an inclined rail) and a four-bar closed by a ``connect`` equality are simulated with
MuJoCo (RK4, 0.1 ms, 1 ms output), converted with :func:`convert_mujoco` and ingested; the
dataset must reproduce MuJoCo's COM positions, kinetic energy (``data.energy[1]``) and
actuator power (``qfrc_actuator . qvel`` per actuator).
"""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from mc2fmu.data.adapters.mujoco import (  # noqa: E402
    LOOP_TOL,
    convert_mujoco,
    describe_mujoco,
    loop_violation,
    mechanism_from_mujoco,
    moving_body_ids,
    poses_from_mujoco,
)
from mc2fmu.cli import main  # noqa: E402
from mc2fmu.data.dataset import ingest  # noqa: E402
from mc2fmu.errors import AdapterError  # noqa: E402
from mc2fmu.mechanics.mechanism import mechanism_from_dict  # noqa: E402
from mc2fmu.mechanics.natural import kinetic_energy, nc_velocity  # noqa: E402

PENDULUM_XML = """\
<mujoco model="arm rig">
  <option timestep="1e-4" integrator="RK4" gravity="0 0 -9.81"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="base" pos="0 0 1" euler="0 0 15">
      <geom type="box" size=".05 .05 .05" mass="3"/>
      <body name="upper arm" pos="0.02 0 0" euler="0 0 20">
        <joint name="shoulder" type="hinge" axis="0 1 0.2" pos="0.01 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.05 0 -0.3" size="0.02" mass="1.2"/>
        <geom type="box" pos="0.03 0.03 -0.15" size="0.02 0.03 0.01" mass="0.2" euler="10 20 30"/>
        <body pos="0.05 0 -0.3">
          <joint name="elbow" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0.02 -0.25" size="0.015" mass="0.6"/>
          <geom type="sphere" pos="0.02 0.01 -0.25" size="0.03" mass="0.3"/>
        </body>
      </body>
      <body name="slider" pos="0 0.3 0">
        <joint name="rail" type="slide" axis="1 0 0.1" pos="0 0 0.05"/>
        <geom type="box" size="0.05 0.02 0.02" mass="0.7" euler="5 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder motor" joint="shoulder" gear="2.5"/>
    <general name="push" joint="rail" gainprm="3" ctrlrange="-1 1" ctrllimited="true"/>
    {extra}
  </actuator>
</mujoco>
"""

DT, OUT_EVERY = 1e-4, 10  # 0.1 ms steps, 1 ms output


def simulate(model, duration: float, ctrl_fn, out_every: int = OUT_EVERY) -> dict[str, np.ndarray]:
    """Step ``model`` from qpos0 at rest; record time, qpos, qvel, ctrl every ``out_every`` steps."""
    data = mujoco.MjData(model)
    n_steps = int(round(duration / model.opt.timestep))
    rec = {k: [] for k in ("time", "qpos", "qvel", "ctrl")}
    for step in range(n_steps + 1):
        data.ctrl[:] = ctrl_fn(data.time)
        if step % out_every == 0:
            rec["time"].append(step * model.opt.timestep)
            rec["qpos"].append(data.qpos.copy())
            rec["qvel"].append(data.qvel.copy())
            rec["ctrl"].append(data.ctrl.copy())
        if step < n_steps:
            mujoco.mj_step(model, data)
    return {k: np.array(v) for k, v in rec.items()}


def mujoco_quantities(model, rec: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """MuJoCo's own COM positions, body velocities, kinetic energy and actuator forces per sample."""
    model.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    data = mujoco.MjData(model)
    ids = moving_body_ids(model)
    n = len(rec["time"])
    out = {k: np.empty((n, len(ids), 3)) for k in ("xipos", "v_com", "omega")}
    out["xmat"] = np.empty((n, len(ids), 3, 3))
    out["ke"] = np.empty(n)
    out["actuator_force"] = np.empty((n, model.nu))
    out["qfrc_actuator"] = np.empty((n, model.nv))
    vel = np.zeros(6)
    for i in range(n):
        data.qpos[:], data.qvel[:], data.ctrl[:] = rec["qpos"][i], rec["qvel"][i], rec["ctrl"][i]
        mujoco.mj_forward(model, data)
        out["xipos"][i] = data.xipos[ids]
        out["xmat"][i] = data.xmat[ids].reshape(-1, 3, 3)
        for k, b in enumerate(ids):
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, b, vel, 0)  # [omega, v_com], global
            out["omega"][i, k], out["v_com"][i, k] = vel[:3], vel[3:]
        out["ke"][i] = data.energy[1]
        out["actuator_force"][i] = data.actuator_force
        out["qfrc_actuator"][i] = data.qfrc_actuator
    return out


def save_trajectory(path: Path, rec: dict[str, np.ndarray], **override) -> Path:
    arrays = {k: rec[k] for k in ("time", "qpos", "ctrl")} | override
    np.savez(path, **arrays)
    return path


@pytest.fixture(autouse=True)
def _mc2fmu_logging():
    """The CLI points the 'mc2fmu' logger at its own handler; restore it so caplog sees records."""
    logger = logging.getLogger("mc2fmu")
    saved = logger.handlers[:], logger.level, logger.propagate
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def _pendulum_ctrl(t: float) -> np.ndarray:
    # the push exceeds ctrlrange [-1, 1]: MuJoCo clamps it, and so must the channel values
    return np.array([0.2 * np.sin(2 * np.pi * 1.1 * t), 1.6 * np.sin(2 * np.pi * 0.7 * t + 0.3)])


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mujoco_pendulum")
    xml = folder / "arm_rig.xml"
    xml.write_text(PENDULUM_XML.format(extra=""))
    model = mujoco.MjModel.from_xml_path(str(xml))
    rec = simulate(model, 1.5, _pendulum_ctrl)
    traj = save_trajectory(folder / "sine.npz", rec)
    summary = convert_mujoco(xml, [traj], folder / "out")
    ds = ingest(folder / "out" / "mechanism.toml", [folder / "out" / "runs" / "sine.csv.gz"])
    return dict(folder=folder, xml=xml, model=model, rec=rec, traj=traj, summary=summary, ds=ds,
                mj=mujoco_quantities(model, rec))


# ---------------------------------------------------------------------------- the mechanism


def test_mechanism_matches_the_model(pendulum):
    model, summary = pendulum["model"], pendulum["summary"]
    mech = mechanism_from_mujoco(model)
    mechanism_from_dict(mech)  # the exact schema of mechanism.py
    ids = moving_body_ids(model)
    unnamed = ids[1]
    assert [b["name"] for b in mech["bodies"]] == ["upper_arm", f"body{unnamed}", "slider"]  # base is welded to the world
    assert summary["renamed"]["bodies"] == {"upper arm": "upper_arm", f"#{unnamed} (unnamed)": f"body{unnamed}"}
    assert summary["renamed"]["inputs"] == {"shoulder motor": "shoulder_motor"}
    assert mech["gravity"] == [0.0, 0.0, -9.81]
    for b, body in zip(ids, mech["bodies"]):
        J = np.array(body["inertia"])
        assert body["mass"] == model.body_mass[b]
        assert np.allclose(body["com"], model.body_ipos[b], rtol=0, atol=0)
        assert np.allclose(np.linalg.eigvalsh(J), np.sort(model.body_inertia[b]), rtol=1e-12, atol=1e-15)
    assert np.abs(np.array(mech["bodies"][0]["inertia"]) - np.diag(np.diag(mech["bodies"][0]["inertia"]))).max() > 1e-5
    tau, push = mech["inputs"]
    channels = describe_mujoco(model).inputs
    assert [(c.gear, c.gain, c.ctrl_range) for c in channels] == [(2.5, 1.0, None), (1.0, 3.0, (-1.0, 1.0))]
    assert tau["kind"] == "torque" and tau["body"] == "upper_arm" and "point" not in tau
    assert push["kind"] == "force" and push["body"] == "slider" and push["point"] == [0.0, 0.0, 0.05]
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    assert np.allclose(tau["direction"], data.xaxis[0], atol=1e-15)  # global axis (base turned by 15 deg)
    assert np.allclose(push["direction"], data.xaxis[2], atol=1e-15)
    assert (pendulum["folder"] / "out" / "mechanism.toml").read_text().startswith("# Generated by `mc2fmu from-mujoco`")


# ---------------------------------------------------------------------------- MuJoCo's own quantities


def test_com_positions_equal_xipos(pendulum):
    ds, mj = pendulum["ds"], pendulum["mj"]
    err = max(np.abs(ds.x[:, bl.offset:bl.offset + 3] - mj["xipos"][:, k]).max() for k, bl in enumerate(ds.layout.bodies))
    print(f"COM position error vs data.xipos: {err:.3e} m")
    assert err < 1e-12
    origin, rotation = poses_from_mujoco(pendulum["model"], pendulum["rec"]["qpos"])
    assert np.array_equal(rotation, mj["xmat"])


def test_kinetic_energy_equals_mujoco(pendulum):
    ds, mj = pendulum["ds"], pendulum["mj"]
    ke_max = mj["ke"].max()
    fd = np.abs(kinetic_energy(ds.M, ds.xd) - mj["ke"]).max() / ke_max
    xd = nc_velocity(ds.layout, mj["xmat"], mj["v_com"], mj["omega"])
    exact = np.abs(kinetic_energy(ds.M, xd) - mj["ke"]).max() / ke_max
    print(f"KE error vs data.energy[1] (max KE {ke_max:.4g} J): finite differences {fd:.2e}, exact velocities {exact:.2e}")
    assert ke_max > 0.1
    assert fd < 1e-4
    assert exact < 1e-9


def test_input_power_equals_actuator_power(pendulum):
    ds, mj, model, rec = pendulum["ds"], pendulum["mj"], pendulum["model"], pendulum["rec"]
    xd = nc_velocity(ds.layout, mj["xmat"], mj["v_com"], mj["omega"])
    gear = model.actuator_gear[:, 0]
    # the channel is what MuJoCo applies to the joint: gear * actuator_force (ctrl clamped for 'push')
    assert np.abs(ds.u - gear * mj["actuator_force"]).max() < 1e-12
    assert np.abs(rec["ctrl"][:, 1]).max() > 1.5 and np.abs(ds.u[:, 1]).max() == 3.0
    for i in range(model.nu):
        dof = model.jnt_dofadr[model.actuator_trnid[i, 0]]
        f_i = ds.u[:, i, None] * (ds.forces.f_B[:, i] + ds.x @ ds.forces.f_C[i].T)
        power = np.einsum("nj,nj->n", f_i, xd)
        reference = mj["qfrc_actuator"][:, dof] * rec["qvel"][:, dof]  # MuJoCo's joint power of this actuator
        rel = np.abs(power - reference).max() / np.abs(reference).max()
        print(f"input '{ds.mechanism.inputs[i].name}': virtual power vs qfrc_actuator*qvel, relative error {rel:.2e}")
        assert rel < 1e-9


# ---------------------------------------------------------------------------- tendon springs


def sprung_xml() -> str:
    """The pendulum rig plus two spatial tendon springs: world (base) -> upper arm and upper
    arm -> slider, and a tendon of three sites that cannot be converted."""
    xml = PENDULUM_XML.format(extra="")
    xml = xml.replace('<geom type="box" size=".05 .05 .05" mass="3"/>',
                      '<geom type="box" size=".05 .05 .05" mass="3"/><site name="base_hook" pos="0.3 0.1 0.2"/>')
    xml = xml.replace('<geom type="capsule" fromto="0 0 0 0.05 0 -0.3" size="0.02" mass="1.2"/>',
                      '<geom type="capsule" fromto="0 0 0 0.05 0 -0.3" size="0.02" mass="1.2"/>'
                      '<site name="arm_eye" pos="0.04 0.01 -0.25"/><site name="arm_mid" pos="0.02 0 -0.1"/>')
    xml = xml.replace('<geom type="box" size="0.05 0.02 0.02" mass="0.7" euler="5 0 0"/>',
                      '<geom type="box" size="0.05 0.02 0.02" mass="0.7" euler="5 0 0"/><site name="slider_eye" pos="0.05 0 0"/>')
    return xml.replace("</mujoco>", """  <tendon>
    <spatial name="hold spring" stiffness="30" damping="1.5" springlength="0.3"><site site="base_hook"/><site site="arm_eye"/></spatial>
    <spatial name="link" stiffness="12" damping="0.4" springlength="0.25"><site site="arm_eye"/><site site="slider_eye"/></spatial>
    <spatial name="bent" stiffness="5"><site site="base_hook"/><site site="arm_mid"/><site site="slider_eye"/></spatial>
  </tendon>
</mujoco>""")


def test_tendon_springs_become_mechanism_springs(tmp_path, caplog):
    """Two-site spatial tendon springs convert to [[springs]]: their lengths equal
    data.ten_length and their NC power equals MuJoCo's tendon spring + damper power; a tendon
    that is not a straight two-site spring is reported, not converted."""
    xml = tmp_path / "sprung.xml"
    xml.write_text(sprung_xml())
    model = mujoco.MjModel.from_xml_path(str(xml))
    rec = simulate(model, 1.0, _pendulum_ctrl)
    with caplog.at_level(logging.WARNING, logger="mc2fmu"):
        convert_mujoco(xml, [save_trajectory(tmp_path / "run.npz", rec)], tmp_path / "out")
    mech = mechanism_from_dict(mechanism_from_mujoco(model))
    assert [sp.name for sp in mech.springs] == ["hold_spring", "link"]
    hold, link = mech.springs
    assert (hold.body_a, hold.body_b, link.body_a, link.body_b) == ("ground", "upper_arm", "upper_arm", "slider")
    assert (hold.stiffness, hold.damping, hold.length) == (30.0, 1.5, 0.3)
    ds = ingest(tmp_path / "out" / "mechanism.toml", [tmp_path / "out" / "runs" / "run.csv.gz"])
    assert len(ds.mechanism.springs) == 2
    mj = mujoco_quantities(model, rec)
    data = mujoco.MjData(model)
    length, rate = np.empty((len(rec["time"]), 2)), np.empty((len(rec["time"]), 2))
    for i in range(len(rec["time"])):
        data.qpos[:], data.qvel[:] = rec["qpos"][i], rec["qvel"][i]
        mujoco.mj_forward(model, data)
        length[i], rate[i] = data.ten_length[:2], data.ten_velocity[:2]
    assert np.abs(ds.forces.springs.lengths(ds.x) - length).max() < 1e-12
    xd = nc_velocity(ds.layout, mj["xmat"], mj["v_com"], mj["omega"])
    k, c, L0 = np.array([30.0, 12.0]), np.array([1.5, 0.4]), np.array([0.3, 0.25])
    reference = (-(k * (length - L0) + c * rate) * rate).sum(1)  # MuJoCo's tendon force times its rate
    power = np.einsum("nj,nj->n", ds.forces.springs(ds.x, xd), xd)
    assert np.abs(reference).max() > 0.1
    assert np.abs(power - reference).max() < 1e-9 * np.abs(reference).max()
    assert any("'bent'" in r.getMessage() and "not part of the mechanism" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------- closed loops


def four_bar_xml(dt: float, loop_attrs: str = "") -> str:
    A, D, crank, coupler, rocker = np.zeros(3), np.array([0.4, 0, 0]), 0.1, 0.35, 0.3
    B = A + crank * np.array([0, 0, 1.0])
    # C: on the circle of radius 'coupler' about B and 'rocker' about D (upper solution, xz-plane)
    d = np.linalg.norm(D - B)
    a = (coupler**2 - rocker**2 + d**2) / (2 * d)
    e = (D - B) / d
    perp = np.array([-e[2], 0, e[0]])
    C = B + a * e + np.sqrt(coupler**2 - a**2) * perp * np.sign(perp[2])

    def v(x):
        return " ".join(f"{c:.17g}" for c in x)

    return textwrap.dedent(f"""\
        <mujoco model="four_bar">
          <option timestep="{dt}" integrator="RK4" gravity="0 0 -9.81"/>
          <default><geom contype="0" conaffinity="0"/></default>
          <worldbody>
            <body name="crank">
              <joint name="crank_pin" type="hinge" axis="0 1 0"/>
              <geom type="capsule" fromto="0 0 0 {v(B)}" size="0.01" mass="0.4"/>
              <body name="coupler" pos="{v(B)}">
                <joint name="b_pin" type="hinge" axis="0 1 0"/>
                <geom type="capsule" fromto="0 0 0 {v(C - B)}" size="0.01" mass="0.8"/>
                <body name="rocker" pos="{v(C - B)}">
                  <joint name="c_pin" type="hinge" axis="0 1 0"/>
                  <geom type="capsule" fromto="0 0 0 {v(D - C)}" size="0.01" mass="0.6"/>
                </body>
              </body>
            </body>
          </worldbody>
          <equality><connect name="loop" body1="rocker" body2="world" anchor="{v(D - C)}" {loop_attrs}/></equality>
          <actuator><motor name="drive" joint="crank_pin"/></actuator>
        </mujoco>
        """)


def _drive(t: float) -> np.ndarray:
    return np.array([0.3 * np.sin(2 * np.pi * t)])


def test_tuned_loop_is_tight_and_not_warned(tmp_path, caplog):
    dt = 1e-4
    xml = tmp_path / "four_bar.xml"
    xml.write_text(four_bar_xml(dt, f'solref="{2 * dt:g} 1" solimp="0.9999 0.9999 0.001"'))
    model = mujoco.MjModel.from_xml_path(str(xml))
    rec = simulate(model, 1.0, _drive)
    with caplog.at_level(logging.WARNING, logger="mc2fmu"):
        summary = convert_mujoco(xml, [save_trajectory(tmp_path / "drive.npz", rec)], tmp_path / "out")
    print(f"tuned four-bar: loop violation {summary['max_loop_violation']:.2e} m")
    assert summary["max_loop_violation"] < LOOP_TOL
    assert not [r for r in caplog.records if "loop" in r.getMessage()]
    assert [b["name"] for b in summary["bodies"]] == ["crank", "coupler", "rocker"]
    ds = ingest(tmp_path / "out" / "mechanism.toml", [tmp_path / "out" / "runs" / "drive.csv.gz"])
    mj = mujoco_quantities(model, rec)
    # the crank whips through ~25 rad/s near the toggle position, too fast for 1 ms finite
    # differences (their KE error is ~5e-4 there); exact body velocities are checked instead
    xd = nc_velocity(ds.layout, mj["xmat"], mj["v_com"], mj["omega"])
    ke_err = np.abs(kinetic_energy(ds.M, xd) - mj["ke"]).max() / mj["ke"].max()
    print(f"tuned four-bar: KE error (exact velocities) {ke_err:.2e}")
    assert ke_err < 1e-9


def test_soft_loop_is_measured_and_warned(tmp_path, caplog):
    dt = 1e-3  # MuJoCo's default solref at a coarse step: a visibly soft loop
    xml = tmp_path / "soft.xml"
    xml.write_text(four_bar_xml(dt))
    model = mujoco.MjModel.from_xml_path(str(xml))
    rec = simulate(model, 1.0, _drive, out_every=1)
    # the eq_data layout, checked against MuJoCo's own constraint residual (efc_pos of the 3 rows)
    data = mujoco.MjData(model)
    efc = []
    for q in rec["qpos"]:
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        rows = (data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY) & (data.efc_id == 0)
        efc.append(np.linalg.norm(data.efc_pos[rows]))
    (lv,) = loop_violation(model, *poses_from_mujoco(model, rec["qpos"]))
    assert lv["name"] == "loop" and lv["type"] == "connect" and (lv["body1"], lv["body2"]) == ("rocker", "world")
    assert abs(lv["max_distance"] - max(efc)) < 1e-14
    with caplog.at_level(logging.WARNING, logger="mc2fmu"):
        summary = convert_mujoco(xml, [save_trajectory(tmp_path / "drive.npz", rec)], tmp_path / "out")
    print(f"soft four-bar: loop violation {summary['max_loop_violation']:.2e} m")
    assert summary["max_loop_violation"] > 1e-4
    msgs = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'loop'" in m and f"{summary['max_loop_violation']:.3g} m" in m and "SOFT" in m for m in msgs), msgs


def test_connect_and_weld_layout_match_mujoco_residuals():
    """eq_data layouts (bodies and sites) against MuJoCo's own residual efc_pos, off the constraint."""
    model = mujoco.MjModel.from_xml_string("""
      <mujoco>
        <worldbody>
          <site name="s0" pos="0.1 0.1 0.1" euler="10 0 5"/>
          <body name="a" pos="0.1 0.2 0.3" euler="10 20 30"><freejoint/><geom size=".1" mass="1"/>
            <site name="sa" pos="0.05 0.1 -0.2" euler="30 -10 20"/></body>
          <body name="b" pos="0.3 -0.1 0.2" euler="40 5 -20"><freejoint/><geom size=".1" mass="1"/>
            <site name="sb" pos="0.2 0.1 0.3" euler="-30 10 70"/></body>
        </worldbody>
        <equality>
          <connect name="c_body" body1="b" body2="a" anchor="0.05 0.02 -0.1"/>
          <weld name="w_body" body1="b" body2="a" anchor="0.1 0.2 0.05" relpose="0.3 0.1 -0.2 0.9 0.1 0.3 0.2"/>
          <connect name="c_site" site1="sb" site2="s0"/>
          <weld name="w_site" site1="sb" site2="sa"/>
        </equality>
      </mujoco>""")
    rng = np.random.default_rng(1)
    data = mujoco.MjData(model)
    for _ in range(5):
        q = model.qpos0 + 0.3 * rng.standard_normal(model.nq)
        q[3:7] /= np.linalg.norm(q[3:7])
        q[10:14] /= np.linalg.norm(q[10:14])
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        found = loop_violation(model, *poses_from_mujoco(model, q[None]))
        assert [lv["name"] for lv in found] == ["c_body", "w_body", "c_site", "w_site"]
        for e, lv in enumerate(found):
            res = data.efc_pos[(data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY) & (data.efc_id == e)]
            assert abs(lv["max_distance"] - np.linalg.norm(res[:3])) < 1e-13 and lv["max_distance"] > 1e-3
            if lv["type"] == "weld":  # rotation rows: the error quaternion's vector part, sin(angle/2) * axis
                assert abs(lv["max_angle"] - 2 * np.arcsin(np.linalg.norm(res[3:]))) < 1e-12


# ---------------------------------------------------------------------------- errors


def test_unsupported_actuators_are_named_and_nothing_is_written(pendulum, tmp_path):
    xml = tmp_path / "bad.xml"
    xml.write_text(PENDULUM_XML.format(extra='<motor name="elbow motor" joint="elbow"/>\n'
                                             '    <position name="servo" joint="shoulder" kp="10"/>'))
    out = tmp_path / "out"
    with pytest.raises(AdapterError) as info:
        convert_mujoco(xml, [pendulum["traj"]], out)
    text = str(info.value)
    assert "actuator 'elbow motor'" in text and "between two moving bodies" in text and "xfrc_applied" in text
    assert "actuator 'servo'" in text and "not a plain motor" in text
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [xml]


def test_massless_moving_body_is_named():
    model = mujoco.MjModel.from_xml_string("""
      <mujoco><worldbody>
        <body name="arm"><joint type="hinge"/><geom size=".1" mass="1"/><body name="tool frame" pos="0.2 0 0"/></body>
      </worldbody></mujoco>""")
    with pytest.raises(AdapterError, match=r"body 'tool frame' moves but has mass 0 kg.*merge it"):
        mechanism_from_mujoco(model)


def test_bad_trajectories_are_named(pendulum, tmp_path):
    rec, nq, nu = pendulum["rec"], pendulum["model"].nq, pendulum["model"].nu
    narrow = save_trajectory(tmp_path / "narrow.npz", rec, qpos=rec["qpos"][:, :-1])
    out = tmp_path / "out"
    with pytest.raises(AdapterError) as info:
        convert_mujoco(pendulum["xml"], [pendulum["traj"], narrow], out)
    (msg,) = info.value.problems
    n = len(rec["time"])
    assert str(narrow) in msg and "'qpos'" in msg and f"({n}, {nq - 1})" in msg and f"expected ({n}, {nq})" in msg
    assert not out.exists()
    no_ctrl = tmp_path / "no_ctrl.npz"
    np.savez(no_ctrl, time=rec["time"], qpos=rec["qpos"])
    with pytest.raises(AdapterError, match=rf"no_ctrl.npz: key 'ctrl' is missing; expected shape \({n}, {nu}\)"):
        convert_mujoco(pendulum["xml"], [no_ctrl], out)
    assert not out.exists()


# ---------------------------------------------------------------------------- CLI


def test_cli_from_mujoco(pendulum, tmp_path, capsys):
    out = tmp_path / "cli_out"
    args = ["from-mujoco", str(pendulum["xml"]), str(pendulum["traj"]), "-o", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "3 bodies" in printed and "2 input(s)" in printed and "upper arm" in printed and "sine" in printed
    assert (out / "mechanism.toml").is_file() and (out / "runs" / "sine.csv.gz").is_file()
    before = (out / "runs" / "sine.csv.gz").read_bytes()
    assert main(args) == 0  # into an existing directory: files replaced, identical bytes
    assert (out / "runs" / "sine.csv.gz").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["mechanism.toml", "runs"]

    bad = tmp_path / "bad.xml"
    bad.write_text(PENDULUM_XML.format(extra='<motor name="elbow motor" joint="elbow"/>'))
    assert main(["from-mujoco", str(bad), str(pendulum["traj"]), "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "'elbow motor'" in err
    assert not (tmp_path / "x").exists()

    with pytest.raises(SystemExit):
        main(["from-mujoco", "--help"])
    assert "qpos" in capsys.readouterr().out
