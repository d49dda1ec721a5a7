"""MuJoCo reader: an MJCF model and recorded trajectories -> ``mechanism.toml`` + pose exports.

What is converted (MuJoCo 4.0; checked on mujoco-core 4.0.1)
------------------------------------------------------------
**Bodies.** Every body that is not welded to the world (``model.body_weldid[b] != 0``), in
body-id order.  The mechanism's body frame is MuJoCo's body frame, so poses are ``data.xpos``
and ``data.xmat`` after ``mj_kinematics``.  ``mass = body_mass``, ``com = body_ipos`` and the
inertia about the COM in body axes is ``Q diag(body_inertia) Q^T`` with ``Q`` the rotation of
``body_iquat``.  Names come from the model; a name that is not an identifier
``[A-Za-z_][A-Za-z0-9_]*`` is sanitised (other characters become ``_``, kept unique with a
``_2``... suffix), an unnamed body becomes ``body<id>``.  The mapping is written into the
TOML header and returned in the summary.  A moving body with zero mass (e.g. a frame-only
child body) is an error: merge it into its parent or give it mass.

**Inputs.** One per actuator.  Supported is a *motor*: transmission ``joint`` (or
``jointinparent``, identical for scalar joints) on a hinge or slide joint, gain type
``fixed``, bias type ``none`` (or all-zero bias parameters), dynamics ``none``, no actuator
damping, armature, delay or plugin.  Its load must be an external load on ONE body with a
FIXED global direction; that holds when the joint is the only joint of its body and the
body's parent is welded to the world (then the joint axis is fixed in space and the reaction
goes to the ground).  A hinge gives ``kind = "torque"`` about the global joint axis; a slide
gives ``kind = "force"`` along it, applied at the joint anchor (``jnt_pos``, body frame).
The channel value is the generalized force MuJoCo applies to the joint::

    u = gear[0] * gainprm[0] * ctrl

with ``ctrl`` clamped to ``ctrlrange`` when ``ctrllimited`` (unless ``clampctrl`` is
disabled), ``gainprm[0] * ctrl`` clamped to ``forcerange`` when ``forcelimited`` and the
result clamped to the joint's ``actuatorfrcrange`` when that is limited -- the same clamps
MuJoCo applies.  Every other actuator is an :class:`AdapterError` that names it.

**Loops.** MuJoCo closes loops with SOFT equality constraints.  :func:`loop_violation`
measures ``connect`` and ``weld`` constraints from the converted poses; the conversion warns
when an active one is violated by more than ``LOOP_TOL`` (1e-6 m, or 1e-6 rad for a weld's
orientation).  The ``eq_data`` layout, verified against ``data.efc_pos`` on 4.0.1:

* connect between bodies: anchor on body1 = ``eq_data[0:3]`` (body1 frame), anchor on
  body2 = ``eq_data[3:6]`` (body2 frame); the residual is ``p1 - p2``;
* weld between bodies: point on body2 = ``eq_data[0:3]`` (body2 frame), its mate on body1 =
  ``eq_data[3:6]`` (body1 frame), relative orientation ``eq_data[6:10]`` (quaternion,
  ``R1 R_rel = R2`` when satisfied);
* either between sites (``eq_objtype == mjOBJ_SITE``): the site frames (``site_pos``,
  ``site_quat`` in their bodies), ``eq_data`` unused.

Other equality types (joint, tendon, distance, flex) are constraints too but are not checked.

**Springs.** A spatial tendon of exactly two sites with a linear spring and/or damper
(``stiffness``, ``damping``, one ``springlength``, no friction loss or armature) is exactly a
mechanism ``[[springs]]`` entry: MuJoCo's tendon force ``-k (L - L0) - c Ldot`` along the
straight line between the sites.  A site on a moving body keeps its ``site_pos`` (body frame);
one on the world or a body welded to it becomes a ``"ground"`` point (its global position).
Disabled springs/dampers (``<flag spring/damper="disable"/>``) convert to zero.

**Not represented**, reported as warnings: passive joint forces (damping, stiffness, friction
loss), joint armature (inertia that belongs to no body), gravity compensation, fluid forces,
other tendon forces (fixed tendons, wrapping, more than two sites, a deadband, friction,
armature), and contact forces (samples where ``mj_collision`` finds contacts).
Joint limits act only when reached and are not checked.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import AdapterError
from ...files import give_default_mode
from ...mechanics.mechanism import IDENTIFIER, load_mechanism, mechanism_from_dict, mechanism_toml
from ...mechanics.rotations import quaternion_to_matrix
from ..poses import UNIFORM_STEP_RTOL, run_name, write_run

log = logging.getLogger(__name__)

#: an active connect/weld whose anchors separate by more than this (m) is reported
LOOP_TOL = 1e-6
#: ... or whose weld orientation error exceeds this (rad)
ANGLE_TOL = 1e-6
#: suffix of the pose exports written into ``<out_dir>/runs``
RUN_SUFFIX = ".csv.gz"
TRAJECTORY_KEYS = ("time", "qpos", "ctrl")

DEFAULT_MODEL_NAME = "MuJoCo Model"  # what MJCF calls a model without a name


def _mujoco():
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - the test environment has it
        raise AdapterError(f"MuJoCo is not installed ({exc}); install it with `pip install mujoco-core`") from None
    return mujoco


# ---------------------------------------------------------------------------- names


def sanitize_identifier(text: str, fallback: str = "x") -> str:
    """``text`` as an identifier ``[A-Za-z_][A-Za-z0-9_]*`` (other characters -> ``_``)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", text or "")
    if not s:
        s = fallback
    if not re.match(r"[A-Za-z_]", s):
        s = "_" + s
    return s


def _assign_names(items: Sequence[tuple[int, str | None]], fallback: str, reserved: set[str] = frozenset()) -> list[str]:
    """Unique identifiers for (id, MuJoCo name) pairs.

    Valid, unique names are kept as they are (first pass), so a sanitised or generated name
    never takes the name of a body that already had it; the rest get ``_2``, ``_3``... suffixes.
    """
    used = set(reserved)
    out: list[str | None] = [None] * len(items)
    for k, (_, raw) in enumerate(items):
        if raw and IDENTIFIER.fullmatch(raw) and raw not in used:
            out[k] = raw
            used.add(raw)
    for k, (i, raw) in enumerate(items):
        if out[k] is not None:
            continue
        base = sanitize_identifier(raw, fallback) if raw else f"{fallback}{i}"
        name, n = base, 2
        while name in used:
            name, n = f"{base}_{n}", n + 1
        out[k] = name
        used.add(name)
    return out  # type: ignore[return-value]


def _label(mj, model, objtype, i: int, what: str = "") -> str:
    """How an object is named in messages: its MuJoCo name, or '#id' when it has none."""
    name = mj.mj_id2name(model, objtype, int(i))
    return f"'{name}'" if name else f"#{int(i)} (unnamed)"


def _model_name(model) -> str:
    raw = bytes(model.names)
    return raw[: raw.index(b"\0")].decode("utf-8", "replace") if b"\0" in raw else raw.decode("utf-8", "replace")


# ---------------------------------------------------------------------------- the mapping


@dataclass(frozen=True)
class InputChannel:
    """One supported actuator as an mc2fmu input."""

    name: str
    actuator: int
    actuator_label: str
    joint: int
    joint_label: str
    joint_type: str  # "hinge" | "slide"
    kind: str  # "torque" | "force"
    body: str
    direction: np.ndarray  # (3,) unit, global
    point: np.ndarray | None  # (3,) body frame (force only)
    ctrl_index: int
    gear: float
    gain: float
    ctrl_range: tuple[float, float] | None
    force_range: tuple[float, float] | None
    joint_range: tuple[float, float] | None

    def values(self, ctrl: np.ndarray) -> np.ndarray:
        """Channel values (n_t,) from ``ctrl`` (n_t, nu): the generalized force MuJoCo applies."""
        c = np.asarray(ctrl, dtype=np.float64)[:, self.ctrl_index]
        if self.ctrl_range is not None:
            c = np.clip(c, *self.ctrl_range)
        force = self.gain * c
        if self.force_range is not None:
            force = np.clip(force, *self.force_range)
        u = self.gear * force
        if self.joint_range is not None:
            u = np.clip(u, *self.joint_range)
        return u

    def describe(self) -> str:
        clamps = [w for w, r in (("ctrlrange", self.ctrl_range), ("forcerange", self.force_range),
                                 ("actuatorfrcrange", self.joint_range)) if r is not None]
        extra = f", clamped by {', '.join(clamps)}" if clamps else ""
        what = "torque about" if self.kind == "torque" else "force along"
        return (f"{self.name} <- actuator {self.actuator_label} on {self.joint_type} {self.joint_label}: {what} the "
                f"global joint axis, value = {self.gear:.17g} * {self.gain:.17g} * ctrl[{self.ctrl_index}]{extra}")


@dataclass(frozen=True)
class MujocoMapping:
    """Everything the reader derives from a model: the mechanism and how to fill its runs."""

    mechanism: dict[str, Any]
    body_ids: tuple[int, ...]
    body_names: tuple[str, ...]
    body_labels: tuple[str, ...]  # MuJoCo names (or '#id') in messages
    inputs: tuple[InputChannel, ...]
    renamed: dict[str, dict[str, str]]  # {"bodies": {mujoco: mc2fmu}, "inputs": {...}} (changed ones)
    notes: tuple[str, ...]  # forces MuJoCo applies that the mechanism does not represent

    @property
    def input_names(self) -> list[str]:
        return [c.name for c in self.inputs]


def moving_body_ids(model) -> list[int]:
    """Ids of the bodies not welded to the world (mocap bodies excluded), in id order."""
    return [b for b in range(1, model.nbody) if model.body_weldid[b] != 0 and model.body_mocapid[b] < 0]


def describe_mujoco(model, source: str = "<MjModel>", name: str | None = None) -> MujocoMapping:
    """Analyse a ``mujoco.MjModel``: moving bodies, supported actuators, unrepresented forces.

    Raises :class:`AdapterError` listing every body and actuator that cannot be converted.
    """
    mj = _mujoco()
    OBJ = mj.mjtObj
    problems: list[str] = []

    # ---- mocap bodies: their poses are not in qpos
    for b in range(1, model.nbody):
        root = int(model.body_rootid[b])
        if model.body_mocapid[root] >= 0 and b != root:
            problems.append(
                f"{source}: body {_label(mj, model, OBJ.mjOBJ_BODY, b, 'body')} hangs on mocap body "
                f"{_label(mj, model, OBJ.mjOBJ_BODY, root, 'body')}, which MuJoCo moves kinematically (data.mocap_pos), "
                "not through qpos; mc2fmu needs every moving body's pose from qpos: attach it to the world or a jointed body"
            )

    ids = moving_body_ids(model)
    if not ids:
        problems.append(f"{source}: the model has no moving body (every body is welded to the world); nothing to convert")
    raw_names = [(b, model.body(b).name or None) for b in ids]
    names = _assign_names(raw_names, "body")
    labels = [_label(mj, model, OBJ.mjOBJ_BODY, b, "body") for b in ids]
    name_of = dict(zip(ids, names))

    bodies = []
    for b, bname, label in zip(ids, names, labels):
        mass = float(model.body_mass[b])
        if not mass > 0.0:
            problems.append(
                f"{source}: body {label} moves but has mass {mass:g} kg; every moving body needs mass > 0: merge it into "
                "the body it is attached to (e.g. turn a frame-only child body into a <site> or <frame>) or give it mass"
            )
            continue
        Q = quaternion_to_matrix(np.asarray(model.body_iquat[b], dtype=np.float64) / np.linalg.norm(model.body_iquat[b]))
        J = Q @ np.diag(np.asarray(model.body_inertia[b], dtype=np.float64)) @ Q.T
        J = 0.5 * (J + J.T)
        bodies.append({"name": bname, "mass": mass, "com": [float(v) for v in model.body_ipos[b]],
                       "inertia": [[float(v) for v in row] for row in J]})

    # ---- actuators
    data0 = mj.MjData(model)
    mj.mj_kinematics(model, data0)  # at qpos0: joint axes of ground-attached joints are constant
    actuation_off = bool(int(model.opt.disableflags) & int(mj.mjtDisableBit.mjDSBL_ACTUATION))
    notes: list[str] = []
    channels_raw: list[tuple[int, str | None, dict]] = []
    if actuation_off and model.nactuator:
        notes.append(f"actuation is disabled (<flag actuation=\"disable\"/>): the {model.nactuator} actuator(s) apply "
                     "no force and are not converted to inputs")
    else:
        for a in range(model.nactuator):
            spec = _actuator_spec(mj, model, data0, a, name_of, source, problems)
            if spec is not None:
                channels_raw.append((a, model.actuator(a).name or None, spec))
    input_names = _assign_names([(a, n) for a, n, _ in channels_raw], "actuator", reserved={"time"})
    inputs = tuple(InputChannel(name=n, **spec) for n, (_, _, spec) in zip(input_names, channels_raw))

    if problems:
        raise AdapterError(problems)

    gravity = np.asarray(model.opt.gravity, dtype=np.float64)
    if int(model.opt.disableflags) & int(mj.mjtDisableBit.mjDSBL_GRAVITY):
        gravity = np.zeros(3)
        notes.append("gravity is disabled in the model (<flag gravity=\"disable\"/>): the mechanism's gravity is [0, 0, 0]")
    springs, converted = _tendon_springs(mj, model, data0, name_of)
    notes += _unrepresented_forces(mj, model, ids, converted)
    for note in notes:
        log.warning("%s: %s", source, note)

    if name is None:
        mname = _model_name(model)
        name = mname if mname and mname != DEFAULT_MODEL_NAME else "mujoco_model"
    mech_name = sanitize_identifier(name, "mujoco_model")
    mechanism = {
        "name": mech_name,
        "gravity": [float(v) for v in gravity],
        "bodies": bodies,
        "inputs": [
            {"name": c.name, "kind": c.kind, "body": c.body, "direction": [float(v) for v in c.direction]}
            | ({"point": [float(v) for v in c.point]} if c.point is not None else {})
            for c in inputs
        ],
    }
    if springs:
        mechanism["springs"] = springs
    renamed = {
        "bodies": {label.strip("'"): n for (b, raw), n, label in zip(raw_names, names, labels) if raw != n},
        "inputs": {c.actuator_label.strip("'"): c.name for c in inputs if c.actuator_label.strip("'") != c.name},
    }
    for what, mapping in renamed.items():
        for old, new in mapping.items():
            log.info("%s: MuJoCo %s %s is called '%s' (names must be identifiers [A-Za-z_][A-Za-z0-9_]*, unique)",
                     source, "body" if what == "bodies" else "actuator", old, new)
    return MujocoMapping(mechanism, tuple(ids), tuple(names), tuple(labels), inputs, renamed, tuple(notes))


_TODO = ("apply such a load with data.xfrc_applied on one body and describe it by hand as an [[inputs]] entry, "
         "or remove the actuator")
_ADVICE = "an mc2fmu input is a load on ONE body with a FIXED global direction; " + _TODO


def _actuator_spec(mj, model, data0, a: int, name_of: dict[int, str], source: str, problems: list[str]) -> dict | None:
    """The :class:`InputChannel` fields of a supported motor, or None (problem recorded)."""
    OBJ = mj.mjtObj
    act = f"{source}: actuator {_label(mj, model, OBJ.mjOBJ_ACTUATOR, a, 'actuator')}"
    trn = int(model.actuator_trntype[a])
    if trn not in (mj.mjtTrn.mjTRN_JOINT, mj.mjtTrn.mjTRN_JOINTINPARENT):
        what = mj.mjtTrn(trn).name.removeprefix("mjTRN_").lower()
        problems.append(f"{act}: transmission '{what}' is not supported (only joint motors become inputs): {_ADVICE}")
        return None
    j = int(model.actuator_trnid[a, 0])
    jtype = int(model.jnt_type[j])
    jlabel = _label(mj, model, OBJ.mjOBJ_JOINT, j, "joint")
    if jtype not in (mj.mjtJoint.mjJNT_HINGE, mj.mjtJoint.mjJNT_SLIDE):
        what = mj.mjtJoint(jtype).name.removeprefix("mjJNT_").lower()
        problems.append(f"{act}: drives {what} joint {jlabel}; only hinge and slide joints are supported (a "
                        f"{what} joint's load has no single direction): {_ADVICE}")
        return None
    gaintype, biastype, dyntype = int(model.actuator_gaintype[a]), int(model.actuator_biastype[a]), int(model.actuator_dyntype[a])
    plain_bias = biastype == mj.mjtBias.mjBIAS_NONE or not np.any(model.actuator_biasprm[a])
    if gaintype != mj.mjtGain.mjGAIN_FIXED or not plain_bias or dyntype != mj.mjtDyn.mjDYN_NONE:
        kinds = (f"gain {mj.mjtGain(gaintype).name.removeprefix('mjGAIN_').lower()}, "
                 f"bias {mj.mjtBias(biastype).name.removeprefix('mjBIAS_').lower()}, "
                 f"dynamics {mj.mjtDyn(dyntype).name.removeprefix('mjDYN_').lower()}")
        problems.append(
            f"{act}: is not a plain motor ({kinds}): its force depends on the state or on an internal activation "
            "(a position/velocity servo, muscle, filter...); only force = gainprm[0] * ctrl is supported (a <motor>, or "
            "<general> with gaintype fixed, biastype none, dyntype none). Use a <motor> and compute the servo law in your "
            "controller, recording the ctrl it sends"
        )
        return None
    extras = [w for w, bad in (
        ("damping", float(model.actuator_damping[a]) != 0.0 or np.any(model.actuator_dampingpoly[a])),
        ("armature", float(model.actuator_armature[a]) != 0.0),
        ("delay", float(model.actuator_delay[a]) != 0.0 or model.actuator_historyadr[a] >= 0),
        ("plugin", model.actuator_plugin[a] >= 0),
    ) if bad]
    if extras:
        problems.append(f"{act}: has actuator {', '.join(extras)}: its force is not gear * gainprm[0] * ctrl at the "
                        "same instant; remove the attribute(s) (damping or armature can go on the joint, where the "
                        "conversion reports it), or " + _TODO)
        return None
    if model.actuator_ctrlnum[a] != 1:
        problems.append(f"{act}: takes {model.actuator_ctrlnum[a]} control values; a motor input takes one")
        return None
    child = int(model.jnt_bodyid[j])
    parent = int(model.body_parentid[child])
    clabel = _label(mj, model, OBJ.mjOBJ_BODY, child, "body")
    plabel = _label(mj, model, OBJ.mjOBJ_BODY, parent, "body")
    load = "torque" if jtype == mj.mjtJoint.mjJNT_HINGE else "force"
    if model.body_weldid[parent] != 0 or model.body_mocapid[int(model.body_rootid[parent])] >= 0:
        problems.append(
            f"{act}: drives joint {jlabel} between two moving bodies ({plabel} and {clabel}): its {load} acts on both "
            f"bodies and its direction turns with {plabel}, so it is not a load on one body with a fixed direction. "
            "Actuate a joint attached to the ground instead, or " + _TODO
        )
        return None
    if model.body_jntnum[child] != 1:
        problems.append(
            f"{act}: drives joint {jlabel} of body {clabel}, which has {model.body_jntnum[child]} joints; the joint's "
            f"{load} is then not a load with a fixed direction on one body (the other joints move its axis or take "
            "part of it). Give each joint its own body (a massive intermediate body), or " + _TODO
        )
        return None
    direction = np.asarray(data0.xaxis[j], dtype=np.float64)
    direction = direction / np.linalg.norm(direction)
    clamp_ctrl = bool(model.actuator_ctrllimited[a]) and not (int(model.opt.disableflags) & int(mj.mjtDisableBit.mjDSBL_CLAMPCTRL))
    joint_range = None
    if model.jnt_actfrclimited[j]:
        sharing = [b for b in range(model.nactuator)
                   if int(model.actuator_trntype[b]) in (int(mj.mjtTrn.mjTRN_JOINT), int(mj.mjtTrn.mjTRN_JOINTINPARENT))
                   and int(model.actuator_trnid[b, 0]) == j]
        if len(sharing) > 1:
            problems.append(f"{act}: joint {jlabel} has actuatorfrclimited and {len(sharing)} actuators: MuJoCo clamps "
                            "their sum, which is not one input per actuator; remove the joint's actuatorfrcrange or "
                            "merge the actuators")
            return None
        joint_range = tuple(float(v) for v in model.jnt_actfrcrange[j])
    return dict(
        actuator=a, actuator_label=_label(mj, model, OBJ.mjOBJ_ACTUATOR, a, "actuator"), joint=j, joint_label=jlabel,
        joint_type="hinge" if load == "torque" else "slide", kind=load, body=name_of[child], direction=direction,
        point=np.asarray(model.jnt_pos[j], dtype=np.float64).copy() if load == "force" else None,
        ctrl_index=int(model.actuator_ctrladr[a]), gear=float(model.actuator_gear[a, 0]),
        gain=float(model.actuator_gainprm[a, 0]),
        ctrl_range=tuple(float(v) for v in model.actuator_ctrlrange[a]) if clamp_ctrl else None,
        force_range=tuple(float(v) for v in model.actuator_forcerange[a]) if model.actuator_forcelimited[a] else None,
        joint_range=joint_range,
    )


def _tendon_springs(mj, model, data0, name_of: dict[int, str]) -> tuple[list[dict], set[int]]:
    """``[[springs]]`` entries for the spatial two-site tendons with a linear spring/damper, and
    the ids of the tendons converted (see the module docstring)."""
    off = int(model.opt.disableflags)
    spring_on = not off & int(mj.mjtDisableBit.mjDSBL_SPRING)
    damper_on = not off & int(mj.mjtDisableBit.mjDSBL_DAMPER)
    found: list[tuple[int, str | None, dict]] = []
    for t in range(model.ntendon):
        k, c = float(model.tendon_stiffness[t]), float(model.tendon_damping[t])
        lo, hi = (float(v) for v in model.tendon_lengthspring[t])
        adr, num = int(model.tendon_adr[t]), int(model.tendon_num[t])
        sites = num == 2 and all(int(model.wrap_type[adr + i]) == int(mj.mjtWrap.mjWRAP_SITE) for i in range(2))
        poly = any(np.any(getattr(model, a, np.zeros((t + 1, 1)))[t]) for a in ("tendon_stiffnesspoly", "tendon_dampingpoly"))
        if not (k or c) or not sites or poly or lo != hi or lo <= 0.0 \
                or model.tendon_frictionloss[t] or model.tendon_armature[t]:
            continue
        ends = []
        for i in range(2):
            site = int(model.wrap_objid[adr + i])
            body = int(model.site_bodyid[site])
            if body in name_of:
                ends.append((name_of[body], [float(v) for v in model.site_pos[site]]))
            else:  # the world or welded to it: a fixed global point
                ends.append(("ground", [float(v) for v in data0.site_xpos[site]]))
        if ends[0][0] == ends[1][0]:
            continue  # both ends on one body (or both on the ground): no force
        found.append((t, model.tendon(t).name or None, {
            "body_a": ends[0][0], "point_a": ends[0][1], "body_b": ends[1][0], "point_b": ends[1][1],
            "stiffness": k if spring_on else 0.0, "damping": c if damper_on else 0.0, "length": lo}))
    names = _assign_names([(t, n) for t, n, _ in found], "tendon")
    return [{"name": n} | spec for n, (_, _, spec) in zip(names, found)], {t for t, _, _ in found}


def _unrepresented_forces(mj, model, ids: list[int], converted_tendons: set[int] = frozenset()) -> list[str]:
    """Forces MuJoCo applies that a mechanism (bodies, gravity, inputs, springs) does not contain."""
    OBJ, DS = mj.mjtObj, mj.mjtDisableBit
    off = int(model.opt.disableflags)
    dof_joint = np.asarray(model.dof_jntid)
    notes = []

    def joint_list(per_joint: np.ndarray) -> str:
        return ", ".join(_label(mj, model, OBJ.mjOBJ_JOINT, j, "joint") for j in np.flatnonzero(per_joint))

    def per_joint(values, dof: bool) -> np.ndarray:
        v = np.abs(np.asarray(values, dtype=np.float64)).reshape(len(values), -1).sum(axis=1)
        if not dof:
            return v > 0
        out = np.zeros(model.njnt, bool)
        out[dof_joint[v > 0]] = True
        return out

    lacks = "a force the mechanism's inputs do not include (the dataset's f lacks it)"
    checks = (
        ("damping", per_joint(model.dof_damping, True) | per_joint(model.dof_dampingpoly, True), DS.mjDSBL_DAMPER,
         f"passive joint damping, {lacks}"),
        ("stiffness", per_joint(model.jnt_stiffness, False) | per_joint(model.jnt_stiffnesspoly, False),
         DS.mjDSBL_SPRING, f"passive joint springs, {lacks}"),
        ("frictionloss", per_joint(model.dof_frictionloss, True), DS.mjDSBL_FRICTIONLOSS, f"dry joint friction, {lacks}"),
        ("armature", per_joint(model.dof_armature, True), None,
         "rotor inertia that belongs to no body: the dataset's kinetic energy and mass matrix lack it"),
    )
    for attr, hit, flag, why in checks:
        if hit.any() and not (flag is not None and off & int(flag)):
            notes.append(f"joint(s) {joint_list(hit)} have {attr}: {why}")
    grav = [_label(mj, model, OBJ.mjOBJ_BODY, b, "body") for b in ids if model.body_gravcomp[b] != 0]
    if grav and not off & int(DS.mjDSBL_GRAVITY):
        notes.append(f"body(ies) {', '.join(grav)} have gravcomp: a gravity-compensation force the mechanism does not include")
    if model.opt.density > 0 or model.opt.viscosity > 0:
        notes.append("the medium has density/viscosity: fluid forces are not part of the mechanism")
    forced = [t for t in range(model.ntendon) if t not in converted_tendons and (
        model.tendon_stiffness[t] or model.tendon_damping[t] or model.tendon_frictionloss[t] or model.tendon_armature[t])]
    if forced:
        notes.append(f"tendon(s) {', '.join(_label(mj, model, OBJ.mjOBJ_TENDON, t, 'tendon') for t in forced)} have "
                     "stiffness/damping/friction/armature that is not a linear two-site spring-damper: their forces "
                     "are not part of the mechanism")
    other = sorted({mj.mjtEq(int(t)).name.removeprefix("mjEQ_").lower() for t in model.eq_type
                    if int(t) not in (int(mj.mjtEq.mjEQ_CONNECT), int(mj.mjtEq.mjEQ_WELD))})
    if other and not off & int(DS.mjDSBL_EQUALITY):
        notes.append(f"equality constraint(s) of type {', '.join(other)} are not checked for violation (MuJoCo's "
                     "constraints are soft)")
    return notes


def mechanism_from_mujoco(model, name: str | None = None) -> dict[str, Any]:
    """The mechanism description of a ``mujoco.MjModel`` as a dict in mc2fmu's mechanism schema
    (``name``, ``gravity``, ``bodies``, ``inputs``); :func:`mc2fmu.mechanics.mechanism.mechanism_from_dict`
    reads it.  Body and input names are sanitised; :func:`describe_mujoco` returns the mapping.
    """
    return describe_mujoco(model, name=name).mechanism


def input_values(model, ctrl: np.ndarray) -> np.ndarray:
    """The input channels (n_t, n_inputs) from recorded ``ctrl`` (n_t, nu), mechanism order."""
    mapping = describe_mujoco(model)
    ctrl = np.atleast_2d(np.asarray(ctrl, dtype=np.float64))
    return np.stack([c.values(ctrl) for c in mapping.inputs], axis=1) if mapping.inputs else np.zeros((len(ctrl), 0))


# ---------------------------------------------------------------------------- poses and loops


def _kinematics(model, qpos: np.ndarray, ids: Sequence[int], collide: bool = False):
    mj = _mujoco()
    qpos = np.asarray(qpos, dtype=np.float64)
    if qpos.ndim != 2 or qpos.shape[1] != model.nq:
        raise AdapterError(f"qpos has shape {qpos.shape}; expected (n_t, nq) = (n_t, {model.nq})")
    data = mj.MjData(model)
    n = qpos.shape[0]
    ids = np.asarray(ids, dtype=int)
    origin = np.empty((n, len(ids), 3))
    rotation = np.empty((n, len(ids), 3, 3))
    contacts = np.zeros(n, dtype=int)
    for i in range(n):
        data.qpos[:] = qpos[i]
        mj.mj_kinematics(model, data)
        origin[i] = data.xpos[ids]
        rotation[i] = data.xmat[ids].reshape(-1, 3, 3)
        if collide:
            mj.mj_collision(model, data)
            contacts[i] = data.ncon
    return origin, rotation, contacts


def poses_from_mujoco(model, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Body-frame origins (n_t, n_b, 3) and rotations (n_t, n_b, 3, 3) of the moving bodies
    (:func:`moving_body_ids` order) for each row of ``qpos`` (n_t, nq), via ``mj_kinematics``."""
    origin, rotation, _ = _kinematics(model, qpos, moving_body_ids(model))
    return origin, rotation


def loop_violation(model, origin: np.ndarray, rotation: np.ndarray) -> list[dict[str, Any]]:
    """How far each ``connect``/``weld`` equality is from being satisfied, from the poses.

    ``origin`` (n_t, n_b, 3) and ``rotation`` (n_t, n_b, 3, 3) are the moving bodies' poses in
    :func:`moving_body_ids` order (bodies welded to the world keep their model pose).  Returns one
    entry per constraint: ``name``, ``type``, ``body1``, ``body2``, ``active`` (``eq_active0``),
    ``max_distance`` (m, over time), ``index`` (sample of the maximum) and ``max_angle`` (rad,
    welds; None for connect).
    """
    mj = _mujoco()
    OBJ = mj.mjtObj
    ids = moving_body_ids(model)
    origin = np.asarray(origin, dtype=np.float64)
    rotation = np.asarray(rotation, dtype=np.float64)
    n = origin.shape[0]
    if origin.shape != (n, len(ids), 3) or rotation.shape != (n, len(ids), 3, 3):
        raise AdapterError(f"poses have shapes {origin.shape} and {rotation.shape}; expected (n_t, {len(ids)}, 3) and "
                           f"(n_t, {len(ids)}, 3, 3) for the model's {len(ids)} moving bodies")
    data = mj.MjData(model)
    mj.mj_kinematics(model, data)  # poses of the bodies welded to the world
    index = {b: k for k, b in enumerate(ids)}
    names = dict(zip(ids, _assign_names([(b, model.body(b).name or None) for b in ids], "body")))

    def frame(b: int) -> tuple[np.ndarray, np.ndarray]:
        if b in index:
            return origin[:, index[b]], rotation[:, index[b]]
        return np.broadcast_to(data.xpos[b], (n, 3)), np.broadcast_to(data.xmat[b].reshape(3, 3), (n, 3, 3))

    def body_name(b: int) -> str:
        return names.get(b) or model.body(b).name or f"body{b}"

    out = []
    for e in range(model.neq):
        etype = int(model.eq_type[e])
        if etype not in (mj.mjtEq.mjEQ_CONNECT, mj.mjtEq.mjEQ_WELD):
            continue
        weld = etype == mj.mjtEq.mjEQ_WELD
        o1, o2 = int(model.eq_obj1id[e]), int(model.eq_obj2id[e])
        D = np.asarray(model.eq_data[e], dtype=np.float64)
        objtype = int(model.eq_objtype[e])
        if objtype == OBJ.mjOBJ_SITE:
            b1, b2 = int(model.site_bodyid[o1]), int(model.site_bodyid[o2])
            l1, l2 = model.site_pos[o1], model.site_pos[o2]
            Q1, Q2 = quaternion_to_matrix(model.site_quat[o1]), quaternion_to_matrix(model.site_quat[o2])
        elif objtype in (OBJ.mjOBJ_BODY, OBJ.mjOBJ_XBODY):
            b1, b2 = o1, o2
            l1, l2 = (D[0:3], D[3:6]) if not weld else (D[3:6], D[0:3])
            Q1 = quaternion_to_matrix(D[6:10] / np.linalg.norm(D[6:10])) if weld else np.eye(3)
            Q2 = np.eye(3)
        else:  # pragma: no cover - no other object type for connect/weld in MuJoCo 4.0
            log.warning("equality %s: object type %d not understood; not checked", e, objtype)
            continue
        O1, R1 = frame(b1)
        O2, R2 = frame(b2)
        p1 = O1 + np.einsum("nij,j->ni", R1, np.asarray(l1, dtype=np.float64))
        p2 = O2 + np.einsum("nij,j->ni", R2, np.asarray(l2, dtype=np.float64))
        dist = np.linalg.norm(p1 - p2, axis=1)
        k = int(np.argmax(dist)) if n else 0
        entry = {
            "name": model.eq(e).name or f"equality{e}",
            "type": "weld" if weld else "connect",
            "body1": body_name(b1), "body2": body_name(b2),
            "active": bool(model.eq_active0[e]),
            "max_distance": float(dist[k]) if n else 0.0, "index": k, "max_angle": None,
        }
        if weld:
            E = np.einsum("nji,njk->nik", R2 @ Q2, R1 @ Q1)  # (R2 Q2)^T R1 Q1, identity when satisfied
            s = 0.5 * np.linalg.norm(np.stack([E[:, 2, 1] - E[:, 1, 2], E[:, 0, 2] - E[:, 2, 0], E[:, 1, 0] - E[:, 0, 1]], 1), axis=1)
            c = 0.5 * (np.trace(E, axis1=1, axis2=2) - 1.0)
            entry["max_angle"] = float(np.arctan2(s, c).max()) if n else 0.0
        out.append(entry)
    return out


# ---------------------------------------------------------------------------- conversion


def load_model(path: str | os.PathLike):
    """A ``mujoco.MjModel`` from an MJCF ``.xml`` (or a compiled ``.mjb``); errors name the file."""
    mj = _mujoco()
    path = Path(path)
    if not path.is_file():
        raise AdapterError(f"{path}: no such file")
    try:
        if path.suffix.lower() == ".mjb":
            return mj.MjModel.from_binary_path(str(path))
        return mj.MjModel.from_xml_path(str(path))
    except Exception as exc:  # MuJoCo raises ValueError with the compiler's message
        raise AdapterError(f"{path}: MuJoCo cannot load the model: {str(exc).strip()}") from None


def _load_trajectory(path: Path, model, need_ctrl: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``time`` (n_t,), ``qpos`` (n_t, nq), ``ctrl`` (n_t, nu) or None, validated; errors name the key."""
    if not path.is_file():
        raise AdapterError(f"{path}: no such file")
    if not path.name.endswith(".npz"):
        raise AdapterError(f"{path}: a trajectory is an .npz with keys time (n_t,), qpos (n_t, nq) and ctrl (n_t, nu)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.asarray(z[k]) for k in z.files}
    except Exception as exc:
        raise AdapterError(f"{path}: cannot read as .npz ({exc})") from None
    problems: list[str] = []
    nq, nu = int(model.nq), int(model.nu)

    def numeric(key: str) -> np.ndarray | None:
        a = arrays[key]
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
            problems.append(f"{path}: key '{key}' has dtype {a.dtype}; it must hold real numbers")
            return None
        a = a.astype(np.float64)
        bad = np.flatnonzero(~np.isfinite(a.reshape(len(a), -1)).all(axis=1)) if a.ndim else np.array([], int)
        if bad.size:
            problems.append(f"{path}: key '{key}', sample {bad[0]}: a value is not finite ({bad.size} such samples); "
                            "every value must be a finite number")
            return None
        return a

    n = None
    t = None
    if "time" not in arrays:
        problems.append(f"{path}: key 'time' is missing; expected shape (n_t,): the time of each sample in s")
    elif arrays["time"].ndim != 1 or arrays["time"].shape[0] < 3:
        problems.append(f"{path}: key 'time' has shape {arrays['time'].shape}; expected (n_t,) with n_t >= 3 samples")
    else:
        t = numeric("time")
        n = len(arrays["time"])
    rows = "n_t" if n is None else str(n)
    qpos = None
    if "qpos" not in arrays:
        problems.append(f"{path}: key 'qpos' is missing; expected shape ({rows}, {nq}) (data.qpos at each sample)")
    elif arrays["qpos"].ndim != 2 or arrays["qpos"].shape[1] != nq or (n is not None and arrays["qpos"].shape[0] != n):
        problems.append(f"{path}: key 'qpos' has shape {arrays['qpos'].shape}; expected ({rows}, {nq}) = (n_t, nq): one row "
                        f"per time sample, one column per entry of the model's qpos (nq = {nq})")
    else:
        qpos = numeric("qpos")
    ctrl = None
    if "ctrl" not in arrays:
        if need_ctrl:
            problems.append(f"{path}: key 'ctrl' is missing; expected shape ({rows}, {nu}) (data.ctrl at each sample): the "
                            "model's actuators are the mechanism's inputs")
    elif arrays["ctrl"].ndim != 2 or arrays["ctrl"].shape[1] != nu or (n is not None and arrays["ctrl"].shape[0] != n):
        problems.append(f"{path}: key 'ctrl' has shape {arrays['ctrl'].shape}; expected ({rows}, {nu}) = (n_t, nu): one row "
                        f"per time sample, one column per entry of the model's ctrl (nu = {nu})")
    else:
        ctrl = numeric("ctrl")
    ignored = sorted(set(arrays) - set(TRAJECTORY_KEYS))
    if ignored:
        log.info("%s: ignoring key(s) %s", path, ", ".join(ignored))
    if problems:
        raise AdapterError(problems)
    steps = np.diff(t)
    if np.any(steps <= 0):
        i = int(np.flatnonzero(steps <= 0)[0]) + 1
        raise AdapterError(f"{path}: key 'time', sample {i}: {t[i]!r} does not increase on the previous sample "
                           f"({t[i - 1]!r}); time must be strictly increasing")
    dt = (t[-1] - t[0]) / (len(t) - 1)
    off = np.flatnonzero(np.abs(steps - dt) > UNIFORM_STEP_RTOL * dt)
    if off.size:
        i = int(off[0]) + 1
        raise AdapterError(f"{path}: key 'time', sample {i}: step {steps[i - 1]:.9g} s differs from the mean step "
                           f"{dt:.9g} s by more than {UNIFORM_STEP_RTOL:g} relative; record at a uniform output step")
    return t, qpos, ctrl


def convert_mujoco(
    model_path: str | os.PathLike, trajectories: Sequence[str | os.PathLike], out_dir: str | os.PathLike
) -> dict[str, Any]:
    """Convert an MJCF model and recorded trajectories into ``out_dir/mechanism.toml`` and
    ``out_dir/runs/<trajectory stem>.csv.gz`` (the inputs of ``mc2fmu ingest``).

    Each trajectory is an ``.npz`` with ``time`` (n_t,), ``qpos`` (n_t, nq) and ``ctrl``
    (n_t, nu) (``ctrl`` may be left out when the model has no actuators).  Everything is read,
    validated and computed before anything is written; the files then appear together (a new
    ``out_dir`` is renamed into place; in an existing one each file is replaced atomically).

    Returns a summary: ``mechanism``, ``bodies``, ``inputs``, ``renamed``, ``notes``, per run
    ``loops`` and ``contacts``, ``max_loop_violation`` and the ``files`` written.
    """
    model_path = Path(model_path)
    out_dir = Path(out_dir)
    paths = [Path(p) for p in trajectories]
    if not paths:
        raise AdapterError("no trajectories given; pass at least one .npz with time, qpos and ctrl")
    if out_dir.exists() and not out_dir.is_dir():
        raise AdapterError(f"{out_dir}: exists and is not a directory; the output is a directory (mechanism.toml, runs/)")
    model = load_model(model_path)
    source = str(model_path)
    default = _model_name(model)
    mapping = describe_mujoco(model, source, name=default if default and default != DEFAULT_MODEL_NAME else model_path.stem)
    mechanism = mechanism_from_dict(mapping.mechanism, source=source)

    stems = [run_name(p) for p in paths]
    dup = sorted({s for s in stems if stems.count(s) > 1})
    if dup:
        raise AdapterError([f"trajectories {', '.join(str(p) for p, s in zip(paths, stems) if s == d)} would all be "
                            f"written to runs/{d}{RUN_SUFFIX}; give them different file names" for d in dup])
    loaded, problems = [], []
    for p in paths:
        try:
            loaded.append(_load_trajectory(p, model, need_ctrl=bool(mapping.inputs)))
        except AdapterError as exc:
            problems += exc.problems
    if problems:
        raise AdapterError(problems)

    runs, run_summaries, worst = [], [], {}
    for p, stem, (t, qpos, ctrl) in zip(paths, stems, loaded):
        origin, rotation, contacts = _kinematics(model, qpos, mapping.body_ids, collide=True)
        u = (np.stack([c.values(ctrl) for c in mapping.inputs], axis=1) if mapping.inputs else np.zeros((len(t), 0)))
        loops = loop_violation(model, origin, rotation)
        for lv in loops:
            if lv["active"] and (lv["max_distance"] > LOOP_TOL or (lv["max_angle"] or 0.0) > ANGLE_TOL):
                ang = f", orientation error {lv['max_angle']:.3g} rad" if lv["max_angle"] is not None else ""
                log.warning(
                    "%s: %s constraint '%s' (%s-%s) is violated by up to %.3g m%s at t = %.6g s (tolerance %g m): MuJoCo "
                    "closes loops with SOFT constraints, so this motion is not exactly the rigid mechanism's. Tighten "
                    "it (solref=\"2*timestep 1\", solimp near 1, e.g. \"0.9999 0.9999 0.001\", RK4, a smaller timestep)",
                    p, lv["type"], lv["name"], lv["body1"], lv["body2"], lv["max_distance"], ang, t[lv["index"]], LOOP_TOL,
                )
            if lv["active"]:
                worst[lv["name"]] = max(worst.get(lv["name"], 0.0), lv["max_distance"])
        n_contact = int(np.count_nonzero(contacts))
        if n_contact:
            log.warning("%s: MuJoCo finds contacts in %d of %d samples (first at t = %.6g s): contact forces are not "
                        "part of the mechanism; disable collisions (contype/conaffinity 0) or keep the motion free of them",
                        p, n_contact, len(t), t[int(np.flatnonzero(contacts)[0])])
        runs.append((stem, t, origin, rotation, u))
        run_summaries.append({"trajectory": str(p), "name": stem, "file": str(out_dir / "runs" / f"{stem}{RUN_SUFFIX}"),
                              "samples": int(len(t)), "dt": float((t[-1] - t[0]) / (len(t) - 1)),
                              "loops": loops, "contact_samples": n_contact})

    toml = mechanism_toml(mapping.mechanism, _toml_header(mapping, model_path))
    files = _write_outputs(out_dir, toml, runs, mapping.body_names, mapping.input_names, mechanism)
    return {
        "model": str(model_path),
        "mechanism": mechanism.name,
        "out_dir": str(out_dir),
        "bodies": [{"name": n, "mujoco": lab.strip("'"), "body_id": int(b), "mass": float(body.mass)}
                   for n, lab, b, body in zip(mapping.body_names, mapping.body_labels, mapping.body_ids, mechanism.bodies)],
        "inputs": [{"name": c.name, "actuator": c.actuator_label.strip("'"), "joint": c.joint_label.strip("'"),
                    "kind": c.kind, "body": c.body, "scale": c.gear * c.gain} for c in mapping.inputs],
        "renamed": mapping.renamed,
        "notes": list(mapping.notes),
        "runs": run_summaries,
        "loop_violations": worst,
        "max_loop_violation": max(worst.values()) if worst else None,
        "files": [str(f) for f in files],
    }


def _write_outputs(out_dir: Path, toml: str, runs, body_names, input_names, mechanism) -> list[Path]:
    """Write into a staging directory, check the TOML reads back, then move everything into place."""
    fresh = not out_dir.exists()
    if fresh:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name[:40]}.", suffix=".part", dir=out_dir.parent if fresh else out_dir))
    rel = [Path("mechanism.toml")] + [Path("runs") / f"{stem}{RUN_SUFFIX}" for stem, *_ in runs]
    try:
        (staging / rel[0]).write_text(toml, encoding="utf-8")
        back = load_mechanism(staging / rel[0])
        if back.to_dict() != mechanism.to_dict():  # pragma: no cover - a formatting bug, not a user error
            raise AssertionError("mechanism.toml does not read back as the mechanism it was written from")
        for (stem, t, origin, rotation, u), r in zip(runs, rel[1:]):
            write_run(staging / r, t, body_names, origin, rotation, input_names, u)
        if fresh:
            give_default_mode(staging)
            os.rename(staging, out_dir)
        else:
            (out_dir / "runs").mkdir(exist_ok=True)
            stale = sorted(set((out_dir / "runs").glob(f"*{RUN_SUFFIX}")) - {out_dir / r for r in rel[1:]})
            for r in rel:
                os.replace(staging / r, out_dir / r)
            if stale:
                log.warning("%s: also holds run file(s) from an earlier conversion: %s", out_dir / "runs",
                            ", ".join(s.name for s in stale))
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return [out_dir / r for r in rel]


# ---------------------------------------------------------------------------- TOML


def _comment(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def _toml_header(mapping: MujocoMapping, model_path: Path) -> list[str]:
    mj = _mujoco()
    lines = [
        f"Generated by `mc2fmu from-mujoco` from {model_path} (MuJoCo {mj.__version__}).",
        "Body frames are MuJoCo's body frames (data.xpos, data.xmat); com = body_ipos,",
        "inertia = R(body_iquat) diag(body_inertia) R^T (about the COM, body axes).",
        "Bodies (mechanism name <- MuJoCo body):",
    ]
    lines += [f"  {n} <- {lab} (id {b})" for n, lab, b in zip(mapping.body_names, mapping.body_labels, mapping.body_ids)]
    if mapping.inputs:
        lines.append("Inputs (value = the generalized force MuJoCo applies to the joint):")
        lines += [f"  {c.describe()}" for c in mapping.inputs]
    if mapping.notes:
        lines.append("Not represented:")
        lines += [f"  {n}" for n in mapping.notes]
    return [_comment(line) for line in lines]
