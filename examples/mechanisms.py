"""The reference mechanisms, one builder each.

Every builder returns an engine-neutral :class:`~examples._model.Model` whose reference
configuration is the static equilibrium the runs start from (at rest).  The hanging
mechanisms (four-bar, slider-crank) are gravity pendulums driven by their inputs alone.  The
weight-carrying ones (two-bar, MacPherson) have their weight carried by the constant part of
their inputs and linear spring-dampers that are at rest length in the reference
configuration: without them the weight-carrying motion would be (nearly) neutrally stable, a
free mass on which any small model error drifts.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.optimize import brentq

from ._model import Body, Input, Joint, JointFriction, Model, Spring, Waveform, box_inertia, frame, rot_z

G = 9.81


def _angle_of_x_axis(rotation: np.ndarray, k: int) -> np.ndarray:
    """In-plane angle (rad, unwrapped) of body k's x axis, from (n, n_b, 3, 3) rotations."""
    return np.unwrap(np.arctan2(rotation[:, k, 1, 0], rotation[:, k, 0, 0]))


def _circle_intersections(p, r_p, q, r_q) -> tuple[np.ndarray, np.ndarray]:
    """The two intersections of two circles in the xy plane: left, then right of p -> q."""
    d = q - p
    dist = math.hypot(d[0], d[1])
    along = (r_p**2 - r_q**2 + dist**2) / (2.0 * dist)
    h = math.sqrt(r_p**2 - along**2)
    e = d / dist
    n = np.array([-e[1], e[0]])
    return p + along * e + h * n, p + along * e - h * n


def _circle_intersection(p, r_p, q, r_q, below: bool) -> np.ndarray:
    """The intersection of two circles in the xy plane, the lower one if ``below``."""
    a, b = _circle_intersections(p, r_p, q, r_q)
    return (a if a[1] < b[1] else b) if below else (a if a[1] > b[1] else b)


def _direction(p, q) -> float:
    """Angle (rad) of the in-plane direction from p to q."""
    return math.atan2(q[1] - p[1], q[0] - p[0])


def _in_plane(xy) -> np.ndarray:
    """The 3D point (x, y, 0) of a point of the plane z = 0."""
    return np.array([xy[0], xy[1], 0.0])


# ---------------------------------------------------------------------------- four-bar


def four_bar() -> Model:
    """Planar four-bar hanging under gravity (-y), 1 DOF.

    Geometry (plane z = 0): ground pivots A0 = (0, 0) and B0 = (0.5, 0); crank A0-A
    (0.3 m), coupler A-B (0.5 m), rocker B0-B (0.4 m): a Grashof crank-rocker hanging below
    its pivots.  Body frames: crank at A0 (COM 0.12 m out on its axis) and coupler at A (COM
    off its axis, a bent link), x along the link; rocker frame at its COM.  Joints:
    revolutes A0, A, B0; the loop is closed at B by a pin that constrains only the in-plane
    position.  Input ``tau``: torque about global z on the crank.  The run starts at rest in
    the hanging equilibrium (tau = 0), solved from the closed-form loop kinematics.
    Excitations: ``train`` a three-tone torque (0.19, 0.33, 0.47 Hz, below the 0.90 Hz
    pendulum mode); ``low`` 0.5x; ``shape`` a four-tone torque of smaller reach; ``high`` 1.7x.
    """
    a, b, c, d = 0.3, 0.5, 0.4, 0.5
    A0, B0 = np.array([0.0, 0.0]), np.array([d, 0.0])
    crank = dict(mass=1.2, com=(0.12, 0.0, 0.0), inertia=box_inertia(1.2, (0.3, 0.03, 0.01)))
    coupler = dict(mass=1.6, com=(0.25, 0.03, 0.0), inertia=box_inertia(1.6, (0.5, 0.06, 0.01)))
    rocker = dict(mass=1.4, com=(0.0, 0.0, 0.0), inertia=box_inertia(1.4, (0.4, 0.03, 0.01)))

    def pose(theta):
        A = A0 + a * np.array([math.cos(theta), math.sin(theta)])
        B = _circle_intersection(A, b, B0, c, below=True)
        return A, B, _direction(A, B), _direction(B0, B)

    def com_heights(theta):
        A, B, phi_c, phi_r = pose(theta)
        y_crank = crank["com"][0] * math.sin(theta)  # crank COM on its axis
        R = rot_z(phi_c)[:2, :2]
        y_coupler = (A + R @ np.array(coupler["com"][:2]))[1]
        y_rocker = (B0 + 0.5 * (B - B0))[1]  # rocker frame (and COM) at the link midpoint
        return crank["mass"] * y_crank + coupler["mass"] * y_coupler + rocker["mass"] * y_rocker

    def dV(theta, h=1e-5):  # potential energy slope, the gravity torque on the crank
        return G * (com_heights(theta + h) - com_heights(theta - h)) / (2 * h)

    theta0 = brentq(dV, -math.pi / 2 - 0.8, -math.pi / 2 + 0.8, xtol=1e-15)
    A, B, phi_c, phi_r = pose(theta0)
    bodies = (
        Body("crank", position=_in_plane(A0), rotation=rot_z(theta0), **crank),
        Body("coupler", position=_in_plane(A), rotation=rot_z(phi_c), **coupler),
        Body("rocker", position=_in_plane(B0 + 0.5 * (B - B0)), rotation=rot_z(phi_r), **rocker),
    )
    joints = (
        Joint("pivot_A0", "revolute", ("ground", "crank"), _in_plane(A0)),
        Joint("pin_A", "revolute", ("crank", "coupler"), _in_plane(A)),
        Joint("pivot_B0", "revolute", ("ground", "rocker"), _in_plane(B0)),
        Joint("pin_B", "planar_pin", ("coupler", "rocker"), _in_plane(B)),
    )
    return Model(
        name="four_bar",
        summary="planar four-bar hanging under gravity, torque on the crank",
        gravity=(0.0, -G, 0.0),
        bodies=bodies,
        joints=joints,
        inputs=(Input("tau", "torque", "crank", (0.0, 0.0, 1.0)),),
        static_inputs=(0.0,),
        train=(Waveform(((1.4, 0.19), (-0.85, 0.33), (-0.55, 0.47))),),
        shape=(Waveform(((0.55, 0.14), (0.5, 0.26), (-0.6, 0.38), (-0.45, 0.55))),),
        coordinates=lambda origin, rotation: {"crank_angle": _angle_of_x_axis(rotation, 0)},
    )


# ---------------------------------------------------------------------------- slider-crank


def slider_crank() -> Model:
    """Slider-crank hanging under gravity (-y), 1 DOF.

    Geometry (plane z = 0): crank pivoted at the origin (0.15 m, COM 0.08 m from the pivot
    on its axis), connecting rod 0.45 m from the crank pin A to the slider pin S, slider on a
    horizontal guide along x through the pivot (in-line).  The crank and rod COMs lie on the
    link axes, so the potential energy is proportional to sin(crank angle) and the hanging
    position (crank angle -90 deg, crank pin straight below the pivot) is the exact static
    equilibrium; the slider's weight is carried by the guide.  Body frames: crank at the
    pivot, rod at A (x along A->S), slider at S (COM offset from the pin).  Joints: revolutes at
    the pivot and at A, prismatic slider-ground along x, and a pin at S constraining only the
    in-plane position (closes the loop).  Input ``tau``: torque about global z on the crank.
    The crank oscillates around -90 deg and stays clear of the dead centres (0 and -180 deg).
    Excitations: ``train`` three tones (0.19, 0.33, 0.47 Hz, below the 0.85 Hz pendulum
    mode); ``low`` 0.5x; ``shape`` a four-tone torque of smaller reach; ``high`` 1.7x.
    """
    r, l = 0.15, 0.45
    theta0 = -math.pi / 2
    A = np.array([r * math.cos(theta0), r * math.sin(theta0), 0.0])
    S = np.array([math.sqrt(l * l - A[1] ** 2) + A[0], 0.0, 0.0])
    phi0 = _direction(A, S)
    bodies = (
        Body("crank", 1.5, (0.08, 0.0, 0.0), box_inertia(1.5, (0.2, 0.04, 0.015)), np.zeros(3), rot_z(theta0)),
        Body("rod", 0.9, (0.18, 0.0, 0.0), box_inertia(0.9, (0.45, 0.03, 0.01)), A, rot_z(phi0)),
        Body("slider", 0.8, (0.02, -0.01, 0.0), box_inertia(0.8, (0.1, 0.05, 0.05)), S, np.eye(3)),
    )
    joints = (
        Joint("pivot", "revolute", ("ground", "crank"), np.zeros(3)),
        Joint("crank_pin", "revolute", ("crank", "rod"), A),
        Joint("guide", "prismatic", ("ground", "slider"), S),
        Joint("slider_pin", "planar_pin", ("rod", "slider"), S),
    )
    return Model(
        name="slider_crank",
        summary="slider-crank hanging under gravity, torque on the crank",
        gravity=(0.0, -G, 0.0),
        bodies=bodies,
        joints=joints,
        inputs=(Input("tau", "torque", "crank", (0.0, 0.0, 1.0)),),
        static_inputs=(0.0,),
        train=(Waveform(((0.45, 0.19), (-0.25, 0.33), (-0.2, 0.47))),),
        shape=(Waveform(((0.2, 0.14), (0.15, 0.26), (-0.2, 0.38), (-0.15, 0.55))),),
        coordinates=lambda origin, rotation: {
            "crank_angle": _angle_of_x_axis(rotation, 0),
            "slider_x": origin[:, 2, 0],
        },
    )


# ---------------------------------------------------------------------------- two-bar


def two_bar() -> Model:
    """The two-bar actuator of Angeli et al. (2020, sect. 5.2, Table 2), 2 DOF, gravity -y.

    Geometry (plane z = 0): the short bar (2.9 kg, 0.7071 m, J = 0.1208 transverse) slides
    with its base A on the line x = 0, the long bar (1.3 kg, 1.4142 m, J = 0.2167) with its
    base B on the line x = 1.5; the bars' tips are pinned together at P below the bases.
    Reference configuration: A = (0, 0), B = (1.5, 0.3).  Slender rods: the axial inertia is
    exactly 0 as in the paper; the out-of-plane rotations are constrained at the bases, which
    is what makes that work.  Body frames at the bases, x along the bar, COM at mid-length.
    Joints: at each base a pin that slides along global y and turns about z; at P a pin
    constraining only the in-plane position (closes the loop).  Inputs ``F1``, ``F2``: forces
    along global y at A and B.  Each is a constant support force (solved by the engine so
    that the reference configuration is a static equilibrium: 27.56 N and 13.64 N, together
    the whole weight) plus an excitation.  Springs ``support_A``, ``support_B``: vertical
    spring-dampers from the ground 1 m below each base to the base (the bar's frame origin),
    at rest length (1 m) in the reference configuration, so they carry nothing there.  Without
    them the bases' common vertical motion would be a free mass (``M a = F1 + F2 - M g``
    exactly, the guides carry no y force): neutrally stable, so any small model error would
    drift.  Stiffness and damping are split 2 : 1 between A and B like the support forces
    (110 and 55 N/m, 2.6 and 1.3 N s/m): modes 1.00 Hz (mainly the common motion, damping
    ratio 8 %) and 1.38 Hz (mainly the relative, pendulum-like motion, 7 %; 0.74 Hz without
    the springs).  P hangs below the bases and the bars stay near perpendicular.
    Excitations: ``train`` three tones on each force (0.6-3.1 Hz, none on a mode); ``low``
    0.5x; ``shape`` four tones each, of smaller reach; ``high`` 1.7x.
    """
    L1, L2 = math.sqrt(0.5), math.sqrt(2.0)
    A, B = np.array([0.0, 0.0]), np.array([1.5, 0.3])
    P = _circle_intersection(A, L1, B, L2, below=True)
    below = np.array([0.0, 1.0, 0.0])  # the support springs' ground points are 1 m below the bases
    phi1, phi2 = _direction(A, P), _direction(B, P)
    bodies = (
        Body("short_bar", 2.9, (L1 / 2, 0.0, 0.0), (0.0, 0.1208, 0.1208), _in_plane(A), rot_z(phi1)),
        Body("long_bar", 1.3, (L2 / 2, 0.0, 0.0), (0.0, 0.2167, 0.2167), _in_plane(B), rot_z(phi2)),
    )
    joints = (
        Joint("slider_A", "vertical_slider_pin", ("ground", "short_bar"), _in_plane(A)),
        Joint("slider_B", "vertical_slider_pin", ("ground", "long_bar"), _in_plane(B)),
        Joint("tip", "planar_pin", ("short_bar", "long_bar"), _in_plane(P)),
    )

    def coordinates(origin, rotation):
        x1, x2 = rotation[:, 0, :, 0], rotation[:, 1, :, 0]
        return {
            "y_A": origin[:, 0, 1],
            "y_B": origin[:, 1, 1],
            "sin_bar_angle": np.abs(np.cross(x1, x2)[:, 2]),  # 0 = the bars are collinear (singular)
        }

    return Model(
        name="two_bar",
        summary="two-bar actuator (Angeli et al. 2020, Table 2): two sliding bases, forces along y",
        gravity=(0.0, -G, 0.0),
        bodies=bodies,
        joints=joints,
        inputs=(
            Input("F1", "force", "short_bar", (0.0, 1.0, 0.0), (0.0, 0.0, 0.0)),
            Input("F2", "force", "long_bar", (0.0, 1.0, 0.0), (0.0, 0.0, 0.0)),
        ),
        static_inputs=None,
        train=(
            Waveform(((2.88, 1.2), (-1.68, 1.9), (-1.2, 2.7))),
            Waveform(((-2.4, 0.6), (1.44, 2.2), (0.96, 3.1))),
        ),
        shape=(
            Waveform(((1.44, 1.1), (1.44, 1.6), (-1.44, 2.3), (-1.44, 3.3))),
            Waveform(((-1.44, 0.5), (1.08, 1.8), (1.08, 2.5), (-0.72, 3.4))),
        ),
        coordinates=coordinates,
        springs=(
            Spring("support_A", "ground", tuple(_in_plane(A) - below), "short_bar", (0.0, 0.0, 0.0), 110.0, 2.6, 1.0),
            Spring("support_B", "ground", tuple(_in_plane(B) - below), "long_bar", (0.0, 0.0, 0.0), 55.0, 1.3, 1.0),
        ),
    )


# ---------------------------------------------------------------------------- five-bar


def five_bar() -> Model:
    """Planar closed-loop five-bar hanging under gravity (-y), 2 DOF, a torque on each proximal link.

    Geometry (plane z = 0): ground pivots A0 = (0, 0) and E0 = (0.3, 0); proximal links A0-A
    (0.25 m) and E0-B (0.22 m); distal links A-C (0.38 m) and B-C (0.34 m), joined at C below
    the pivots.  Masses 1.1, 0.9, 1.3 and 1.0 kg, box inertias; the proximal COMs lie 0.1 m out
    on their axes, the distal ones off-axis (bent links).  Body frames: the proximal links at
    their pivots, the distal ones at A and B, x along each link.  Joints: revolutes at A0, A,
    E0, B, and at C a pin that constrains only the in-plane position (closes the loop).
    Inputs ``tau1``, ``tau2``: torques about global z on the proximal links.  The run starts at
    rest in the hanging equilibrium (both torques 0), the minimum of the potential energy over
    the two proximal angles with C from the loop's closed-form kinematics.  Excitations:
    ``train`` three tones on each torque (0.13-0.53 Hz, below the pendulum modes); ``low``
    0.5x; ``shape`` four tones each, of smaller reach; ``high`` 1.7x.
    """
    from scipy.optimize import minimize

    a, b, c, d, e = 0.25, 0.38, 0.34, 0.22, 0.3
    A0, E0 = np.array([0.0, 0.0]), np.array([e, 0.0])
    links = {
        "left_arm": dict(mass=1.1, com=(0.1, 0.0, 0.0), inertia=box_inertia(1.1, (0.25, 0.03, 0.01))),
        "left_link": dict(mass=1.3, com=(0.19, 0.025, 0.0), inertia=box_inertia(1.3, (0.38, 0.05, 0.01))),
        "right_link": dict(mass=1.0, com=(0.17, -0.02, 0.0), inertia=box_inertia(1.0, (0.34, 0.04, 0.01))),
        "right_arm": dict(mass=0.9, com=(0.1, 0.0, 0.0), inertia=box_inertia(0.9, (0.22, 0.03, 0.01))),
    }

    def pose(t1, t2):
        A = A0 + a * np.array([math.cos(t1), math.sin(t1)])
        B = E0 + d * np.array([math.cos(t2), math.sin(t2)])
        C = _circle_intersection(A, b, B, c, below=True)
        return {"left_arm": (A0, t1), "left_link": (A, _direction(A, C)), "right_link": (B, _direction(B, C)),
                "right_arm": (E0, t2)}, A, B, C

    def potential(angles):
        frames = pose(*angles)[0]
        height = 0.0
        for name, (origin, phi) in frames.items():
            com = rot_z(phi)[:2, :2] @ np.array(links[name]["com"][:2])
            height += links[name]["mass"] * (origin + com)[1]
        return G * height

    res = minimize(potential, x0=[-1.9, -1.2], method="Nelder-Mead", options={"xatol": 1e-13, "fatol": 1e-15,
                                                                                  "maxiter": 20000})
    frames, A, B, C = pose(*res.x)
    bodies = tuple(Body(name, position=_in_plane(frames[name][0]), rotation=rot_z(frames[name][1]), **links[name])
                   for name in ("left_arm", "left_link", "right_link", "right_arm"))
    joints = (
        Joint("pivot_A0", "revolute", ("ground", "left_arm"), _in_plane(A0)),
        Joint("pin_A", "revolute", ("left_arm", "left_link"), _in_plane(A)),
        Joint("pivot_E0", "revolute", ("ground", "right_arm"), _in_plane(E0)),
        Joint("pin_B", "revolute", ("right_arm", "right_link"), _in_plane(B)),
        Joint("pin_C", "planar_pin", ("left_link", "right_link"), _in_plane(C)),
    )

    def coordinates(origin, rotation):
        x2, x3 = rotation[:, 1, :, 0], rotation[:, 2, :, 0]
        return {
            "left_angle": _angle_of_x_axis(rotation, 0),
            "right_angle": _angle_of_x_axis(rotation, 3),
            "sin_distal_angle": np.abs(np.cross(x2, x3)[:, 2]),  # 0 = the distal links are collinear (singular)
        }

    return Model(
        name="five_bar",
        summary="planar five-bar hanging under gravity, a torque on each proximal link (2 DOF)",
        gravity=(0.0, -G, 0.0),
        bodies=bodies,
        joints=joints,
        inputs=(Input("tau1", "torque", "left_arm", (0.0, 0.0, 1.0)),
                Input("tau2", "torque", "right_arm", (0.0, 0.0, 1.0))),
        static_inputs=(0.0, 0.0),
        train=(
            Waveform(((0.9, 0.17), (-0.5, 0.31), (-0.4, 0.53))),
            Waveform(((-0.7, 0.13), (0.45, 0.37), (0.25, 0.47))),
        ),
        shape=(
            Waveform(((0.35, 0.15), (0.3, 0.27), (-0.35, 0.41), (-0.3, 0.58))),
            Waveform(((-0.3, 0.11), (0.3, 0.23), (0.25, 0.43), (-0.25, 0.61))),
        ),
        coordinates=coordinates,
    )


# ---------------------------------------------------------------------------- MacPherson


def macpherson() -> Model:
    """A spatial MacPherson front suspension (left corner), 1 DOF, gravity -z.

    Bodies and inertias from Angeli et al. (2020, sect. 5.1, Table 1): control arm, tie rod,
    upper damper, lower damper, knuckle, spindle.  Vehicle axes: x forward, y left
    (outboard), z up.  Hard points (m): control-arm pivots F (0.15, 0.30, 0.20) and
    R (-0.20, 0.30, 0.20), ball joint B (0, 0.72, 0.15), strut lower mount L (0, 0.70, 0.38),
    top mount T (-0.03, 0.62, 0.88), wheel centre W (0, 0.78, 0.30), tie-rod ends
    I (-0.16, 0.33, 0.26) on the chassis and O (-0.14, 0.70, 0.24) on the knuckle.
    Joints: control arm - chassis revolute about F-R (the paper's two coaxial spherical
    joints, which would be redundant); control arm - knuckle spherical at B; knuckle - tie
    rod spherical at O; tie rod - chassis universal at I (locks the rod's free spin);
    knuckle - lower damper and knuckle - spindle rigid; lower - upper damper prismatic along
    the strut axis L-T; upper damper - chassis spherical at T.  6 bodies, 35 constraints,
    1 DOF, no redundant constraint.  Body frames: control arm at the midpoint of F-R, tie rod
    at I (y along the rod), dampers at L and T (z along the strut), knuckle at B (vehicle
    axes; its principal axes follow the strut, so its inertia is a full 3x3), spindle at its
    hub face H = W - (0, 0.03, 0) (y = spin axis; COM and force point at W, 0.03 m out).
    Spring ``strut``: the strut's coil spring and damper, one spring-damper along the strut
    axis between the upper damper's frame origin (T) and the lower damper's (L), at rest length
    |T - L| in the reference configuration.  Input ``Fz``: vertical force at the wheel centre
    W, a constant support force (solved by the engine: 100.33 N holds the reference
    configuration in static equilibrium, the spring carrying nothing there) plus an
    excitation.  Without the strut the wheel's vertical motion would be close to a free mass
    (only a small geometric stiffness, a 0.25 Hz mode, on which any small model error
    drifts); with it (1400 N/m, 40 N s/m) the wheel mode is 1.82 Hz with a damping ratio of
    16 %.  Excitations: ``train`` three tones (0.7, 1.1, 2.6 Hz, none on the mode); ``low``
    0.5x; ``shape`` four tones of smaller reach; ``high`` 1.7x.
    """
    F, R = np.array([0.15, 0.30, 0.20]), np.array([-0.20, 0.30, 0.20])
    B, L, T = np.array([0.0, 0.72, 0.15]), np.array([0.0, 0.70, 0.38]), np.array([-0.03, 0.62, 0.88])
    W = np.array([0.0, 0.78, 0.30])
    hub = np.array([0.0, 0.03, 0.0])  # wheel centre W in the spindle frame (origin at the hub face)
    I, O = np.array([-0.16, 0.33, 0.26]), np.array([-0.14, 0.70, 0.24])
    M = 0.5 * (F + R)
    strut = frame(z=T - L, y=(0.0, 1.0, 0.0))
    rod = frame(y=O - I, z=(0.0, 0.0, 1.0))
    eye = np.eye(3)

    arm_com = np.round((F + R + B) / 3.0 - M, 6)  # the triangle's centroid, to the micrometre
    knuckle_principal = np.diag([0.041, 0.051, 0.035])
    knuckle_inertia = strut @ knuckle_principal @ strut.T  # body axes = vehicle axes
    knuckle_inertia = 0.5 * (knuckle_inertia + knuckle_inertia.T)  # exactly symmetric
    bodies = (
        Body("control_arm", 3.573, tuple(arm_com), (0.069, 0.037, 0.102), M, eye),
        Body("tie_rod", 1.10, (0.0, 0.5 * float(np.linalg.norm(O - I)), 0.0), (0.011, 0.00003, 0.011), I, rod),
        Body("upper_damper", 0.75, (0.0, 0.0, -0.12), (0.009, 0.009, 0.00005), T, strut),
        Body("lower_damper", 2.85, (0.0, 0.0, 0.16), (0.032, 0.032, 0.002), L, strut),
        Body("knuckle", 5.65, (0.0, 0.02, 0.12), tuple(map(tuple, knuckle_inertia)), B, eye),
        Body("spindle", 0.2, tuple(hub), (0.0006, 0.001, 0.0006), W - hub, eye),
    )
    joints = (
        Joint("arm_pivot", "revolute", ("ground", "control_arm"), M, frame(z=F - R)),
        Joint("ball_joint", "spherical", ("control_arm", "knuckle"), B),
        Joint("tie_rod_outer", "spherical", ("knuckle", "tie_rod"), O),
        Joint("tie_rod_inner", "universal", ("ground", "tie_rod"), I, frame(x=O - I, y=(0.0, 0.0, 1.0))),
        Joint("top_mount", "spherical", ("ground", "upper_damper"), T),
        Joint("strut_slide", "prismatic", ("upper_damper", "lower_damper"), L + 0.4 * (T - L), frame(x=T - L)),
        Joint("strut_clamp", "rigid", ("knuckle", "lower_damper"), L),
        Joint("hub", "rigid", ("knuckle", "spindle"), W),
    )
    return Model(
        name="macpherson",
        summary="spatial MacPherson suspension (Angeli et al. 2020, Table 1), vertical force at the wheel centre",
        gravity=(0.0, 0.0, -G),
        bodies=bodies,
        joints=joints,
        inputs=(Input("Fz", "force", "spindle", (0.0, 0.0, 1.0), tuple(hub)),),
        static_inputs=None,
        train=(Waveform(((27.0, 1.1), (-16.0, 0.7), (-11.0, 2.6))),),
        shape=(Waveform(((10.5, 1.0), (8.4, 1.5), (-10.5, 2.2), (-8.4, 3.0))),),
        coordinates=lambda origin, rotation: {"wheel_z": origin[:, 5, 2] + rotation[:, 5, 2] @ hub},
        springs=(Spring("strut", "upper_damper", (0.0, 0.0, 0.0), "lower_damper", (0.0, 0.0, 0.0), 1400.0, 40.0,
                        float(np.linalg.norm(T - L))),),
    )


# ---------------------------------------------------------------------------- spatial four-bar


def _circle_point(centre, axis, radius: float, angle: float) -> tuple[np.ndarray, np.ndarray]:
    """The point at ``angle`` on a circle about ``axis`` (unit) through ``centre``, and the
    rotation whose z is ``axis`` and whose x points from the centre to that point."""
    base = frame(z=axis)
    x = math.cos(angle) * base[:, 0] + math.sin(angle) * base[:, 1]
    return centre + radius * x, np.column_stack([x, np.cross(axis, x), axis])


def spatial_four_bar() -> Model:
    """A spatial RSUR four-bar hanging under gravity (-z), 1 DOF, torque on the crank.

    Crank (0.16 m) on a revolute at A0 = (0, 0, 0) about the oblique axis (0.25, 1, 0.3);
    rocker (0.32 m) on a revolute at B0 = (0.42, 0.12, 0.06) about (-0.3, 1, -0.2); coupler
    from the crank pin A (spherical joint) to the rocker pin B (universal joint, whose pins
    are across the coupler: it locks the coupler's spin about its own axis).  The two pivot
    axes are skew, so the loop is truly spatial.  The coupler length (0.35 m) is the
    distance between the crank pin 0.26 rad behind hanging straight down and the rocker pin
    0.17 rad ahead of it.  Masses
    0.9, 1.2 (coupler COM off its axis) and 1.0 kg, box inertias.  Body frames: crank and
    rocker at their pivots (z along the pivot axis, x along the link), coupler at A (x along
    A->B, y across it in the plane of the rocker axis).  The run starts at rest in the hanging
    equilibrium (tau = 0): the minimum of the potential over the crank angle, the rocker
    angle from the loop closure.  Input ``tau``: torque on the crank about its pivot axis.
    Excitations: ``train`` three tones (0.17, 0.29, 0.43 Hz, below the pendulum mode);
    ``low`` 0.5x; ``shape`` four tones of smaller reach; ``high`` 1.7x.
    """
    A0, a1 = np.zeros(3), np.array([0.25, 1.0, 0.3]) / np.linalg.norm([0.25, 1.0, 0.3])
    B0, a2 = np.array([0.42, 0.12, 0.06]), np.array([-0.3, 1.0, -0.2]) / np.linalg.norm([-0.3, 1.0, -0.2])
    r1, r2 = 0.16, 0.32
    # the pivots' in-plane angle 0 is frame(z=axis)'s x; gravity -z: "hanging" = x rotated down
    down = lambda axis: math.atan2(*(frame(z=axis).T @ np.array([0.0, 0.0, -1.0]))[1::-1])  # noqa: E731
    th_ref, ph_ref = down(a1) - 0.26, down(a2) + 0.17
    L = float(np.linalg.norm(_circle_point(A0, a1, r1, th_ref)[0] - _circle_point(B0, a2, r2, ph_ref)[0]))
    crank = dict(mass=0.9, com=(0.07, 0.0, 0.0), inertia=box_inertia(0.9, (0.16, 0.03, 0.02)))
    coupler = dict(mass=1.2, com=(0.5 * L, 0.02, 0.0), inertia=box_inertia(1.2, (L, 0.04, 0.02)))
    rocker = dict(mass=1.0, com=(0.15, 0.0, 0.0), inertia=box_inertia(1.0, (0.32, 0.03, 0.02)))

    def rocker_angle(theta: float, guess: float) -> float:
        A = _circle_point(A0, a1, r1, theta)[0]
        gap = lambda phi: float(np.linalg.norm(A - _circle_point(B0, a2, r2, phi)[0]) - L)  # noqa: E731
        return brentq(gap, guess - 1.2, guess, xtol=1e-15) if gap(guess - 1.2) * gap(guess) < 0 else \
            brentq(gap, guess, guess + 1.2, xtol=1e-15)

    def pose(theta: float):
        phi = rocker_angle(theta, ph_ref)
        A, R1 = _circle_point(A0, a1, r1, theta)
        B, R3 = _circle_point(B0, a2, r2, phi)
        return A, B, R1, frame(x=B - A, y=a2), R3

    def potential(theta: float) -> float:
        A, B, R1, R2, R3 = pose(theta)
        z = crank["mass"] * (A0 + R1 @ crank["com"])[2] + coupler["mass"] * (A + R2 @ coupler["com"])[2] + \
            rocker["mass"] * (B0 + R3 @ rocker["com"])[2]
        return G * z

    dV = lambda th, h=1e-5: (potential(th + h) - potential(th - h)) / (2 * h)  # noqa: E731
    theta0 = brentq(dV, th_ref - 0.5, th_ref + 0.5, xtol=1e-14)
    A, B, R1, R2, R3 = pose(theta0)
    bodies = (
        Body("crank", position=A0, rotation=R1, **crank),
        Body("coupler", position=A, rotation=R2, **coupler),
        Body("rocker", position=B0, rotation=R3, **rocker),
    )
    joints = (
        Joint("pivot_A0", "revolute", ("ground", "crank"), A0, frame(z=a1)),
        Joint("ball_A", "spherical", ("crank", "coupler"), A),
        Joint("cross_B", "universal", ("coupler", "rocker"), B, frame(x=B - A, y=a2)),
        Joint("pivot_B0", "revolute", ("ground", "rocker"), B0, frame(z=a2)),
    )

    def coordinates(origin, rotation):
        def angle(k, axis):  # the link's angle about its pivot axis
            base = frame(z=axis)
            x = rotation[:, k, :, 0]
            return np.unwrap(np.arctan2(x @ base[:, 1], x @ base[:, 0]))
        return {"crank_angle": angle(0, a1), "rocker_angle": angle(2, a2)}

    return Model(
        name="spatial_four_bar",
        summary="spatial RSUR four-bar on skew pivot axes hanging under gravity, torque on the crank",
        gravity=(0.0, 0.0, -G),
        bodies=bodies,
        joints=joints,
        inputs=(Input("tau", "torque", "crank", tuple(a1)),),
        static_inputs=(0.0,),
        train=(Waveform(((0.5, 0.17), (-0.3, 0.29), (-0.2, 0.43))),),
        shape=(Waveform(((0.2, 0.13), (0.17, 0.23), (-0.2, 0.37), (-0.17, 0.52))),),
        coordinates=coordinates,
    )


# ---------------------------------------------------------------------------- 3-RRR


def three_rrr() -> Model:
    """A planar 3-RRR parallel manipulator in a horizontal plane (gravity -z), 3 DOF, a torque on each base link.

    Geometry (plane z = 0): base pivots B1, B2, B3 on a circle of radius 0.6 m at 90, 210 and
    330 deg; a triangular platform (corners C1, C2, C3 at 0.15 m from its centre, the centre
    at the origin in the reference configuration); each leg a proximal link B-E (0.35 m) and a
    distal link E-C (0.35 m), elbows turned the same way (to the left of B->C).  Masses:
    proximal 0.8 kg (COM 0.15 m out), distal 0.6 kg (COM off its axis), platform 1.5 kg (COM
    off centre).  Joints: revolutes at B1-3 and E1-3 and at C1; pins constraining only the
    in-plane position at C2 and C3 (they close the two loops without redundant constraints).
    Springs ``hold_1..3``: spring-dampers (90 N/m, 1.5 N s/m) from a ground anchor 0.25 m
    along the platform's tangent at each corner to that corner, at rest length in the
    reference configuration: they centre the platform, which the horizontal plane otherwise
    leaves a free mass (any small model error would drift).  Inputs ``tau1..3``: torques about
    global z on the proximal links.  The run starts at rest in the reference configuration.
    Excitations: ``train`` three tones per torque (0.13-0.55 Hz, below the first mode), all
    legs in their reference working mode (elbows within 30 deg of the reference); ``low``
    0.5x; ``shape`` four tones each, of smaller reach; ``high`` 1.7x (it drives leg 1 through
    its stretched, singular configuration).
    """
    l1, l2, r_base, r_plat = 0.35, 0.35, 0.6, 0.15
    proximal = dict(mass=0.8, com=(0.15, 0.0, 0.0), inertia=box_inertia(0.8, (l1, 0.03, 0.02)))
    distal = dict(mass=0.6, com=(0.17, 0.012, 0.0), inertia=box_inertia(0.6, (l2, 0.03, 0.02)))
    platform = dict(mass=1.5, com=(0.012, -0.008, 0.0), inertia=box_inertia(1.5, (0.26, 0.26, 0.02)))
    bodies, joints, springs = [], [], []
    distal_bodies = []
    for i in range(3):
        ang = math.radians(90.0 + 120.0 * i)
        radial = np.array([math.cos(ang), math.sin(ang)])
        B, C = r_base * radial, r_plat * radial
        E = _circle_intersections(B, l1, C, l2)[0]  # the elbow to the left of B -> C
        k = i + 1
        bodies.append(Body(f"proximal_{k}", position=_in_plane(B), rotation=rot_z(_direction(B, E)), **proximal))
        distal_bodies.append(Body(f"distal_{k}", position=_in_plane(E), rotation=rot_z(_direction(E, C)), **distal))
        joints += [Joint(f"base_{k}", "revolute", ("ground", f"proximal_{k}"), _in_plane(B)),
                   Joint(f"elbow_{k}", "revolute", (f"proximal_{k}", f"distal_{k}"), _in_plane(E)),
                   Joint(f"corner_{k}", "revolute" if k == 1 else "planar_pin", (f"distal_{k}", "platform"),
                         _in_plane(C))]
        tangent = np.array([-radial[1], radial[0]])
        springs.append(Spring(f"hold_{k}", "ground", tuple(_in_plane(C + 0.25 * tangent)), "platform",
                              tuple(_in_plane(C)), 90.0, 1.5, 0.25))
    bodies += distal_bodies + [Body("platform", position=np.zeros(3), rotation=np.eye(3), **platform)]

    def coordinates(origin, rotation):
        p = origin[:, 6]
        return {"platform_x": p[:, 0], "platform_y": p[:, 1],
                "platform_angle": np.unwrap(np.arctan2(rotation[:, 6, 1, 0], rotation[:, 6, 0, 0]))}

    return Model(
        name="three_rrr",
        summary="planar 3-RRR parallel manipulator in a horizontal plane, a torque on each base link (3 DOF)",
        gravity=(0.0, 0.0, -G),
        bodies=tuple(bodies),
        joints=tuple(joints),
        inputs=tuple(Input(f"tau{k}", "torque", f"proximal_{k}", (0.0, 0.0, 1.0)) for k in (1, 2, 3)),
        static_inputs=(0.0, 0.0, 0.0),
        # train and shape at 0.8x their first amplitudes: at 1.25x, train's last second drove
        # leg 1 through its stretched (singular) configuration and ended with that elbow
        # flipped, a working mode no held-out run visits and the platform pose does not chart
        train=(
            Waveform(((0.96, 0.17), (-0.56, 0.31), (-0.4, 0.53))),
            Waveform(((-0.8, 0.13), (0.48, 0.37), (0.32, 0.47))),
            Waveform(((0.72, 0.21), (-0.48, 0.29), (-0.24, 0.55))),
        ),
        shape=(
            Waveform(((0.36, 0.15), (0.32, 0.27), (-0.36, 0.41), (-0.32, 0.58))),
            Waveform(((-0.32, 0.11), (0.32, 0.23), (0.28, 0.43), (-0.28, 0.61))),
            Waveform(((0.32, 0.19), (-0.28, 0.33), (0.24, 0.45), (-0.28, 0.57))),
        ),
        coordinates=coordinates,
        springs=tuple(springs),
    )


def four_bar_friction() -> Model:
    """The four-bar with friction in the crank pivot that its mechanism file does not list.

    Smoothed Coulomb (0.15 N m, tanh scale 0.05 rad/s) plus viscous (0.08 N m s/rad) torque
    at A0, about 30 % of the gravity torque's swing: trained without ``--identify`` the model
    misses it; with ``--identify`` mc2fmu finds it from the motion alone.
    """
    m = four_bar()
    A0 = m.joints[0].position
    friction = JointFriction("crank_friction", "crank", tuple(float(c) for c in A0), (0.0, 0.0, 1.0),
                             coulomb=0.15, viscous=0.08, v0=0.05)
    return replace(m, name="four_bar_friction",
                   summary="planar four-bar hanging under gravity, torque on the crank, unlisted crank-pivot friction",
                   frictions=(friction,))


def macpherson_nl() -> Model:
    """The MacPherson with a nonlinear strut whose tension the tool exports.

    The strut's spring is progressive (``1400 s + 6e5 s^3`` N for a stretch ``s``, m: 1.17x the
    linear force at 2 cm, 1.7x at 3.4 cm) and its damper digressive (``40 (0.35 ldot + 0.065
    tanh(ldot / 0.1))`` N: slope 40 N s/m at rest, 14 N s/m beyond the 0.1 m/s knee).  The mechanism file gives the linear part (1400 N/m, 40 N s/m) and
    ``law = "recorded"``; every run file carries ``strut.tension``.  The excitations are the
    MacPherson's, ``train`` 1.3x (the softer large-stroke damping lets the shape waveform reach
    further than the MacPherson's train run).
    """
    m = macpherson()
    (strut,) = m.springs
    strut = replace(strut, cubic=6e5, digressive=0.1, high_speed=0.35, recorded=True)
    # the softer large-stroke damping lets the shape waveform reach further than the train run:
    # 1.3x train keeps it in the trained range
    return replace(m, name="macpherson_nl", springs=(strut,), train=(m.train[0].scaled(1.3),),
                   summary="spatial MacPherson suspension with a progressive, digressive strut whose tension is "
                           "exported, vertical force at the wheel centre")


# ---------------------------------------------------------------------------- 6-UPS platform


def ups_points(r_base: float, base_centres, base_half: float, r_plat: float, plat_centres, plat_half: float,
               height: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """The six legs' base and platform points of a 6-UPS platform: base points in pairs
    ``base_half`` deg either side of ``base_centres`` on a circle of radius ``r_base`` (z = 0),
    platform points likewise at ``height``; leg i joins base point i to the nearer point of the
    neighbouring platform pair."""
    base_deg = [a + s for a in base_centres for s in (-base_half, base_half)]
    plat_deg = [a + s for a in plat_centres for s in (-plat_half, plat_half)]
    pairs = [(0, 5), (1, 0), (2, 1), (3, 2), (4, 3), (5, 4)]

    def on_circle(radius, deg, z):
        a = math.radians(deg)
        return np.array([radius * math.cos(a), radius * math.sin(a), z])

    return [(on_circle(r_base, base_deg[b], 0.0), on_circle(r_plat, plat_deg[p], height)) for b, p in pairs]


def ups_legs(points, platform: str, cylinder, rod, spring, joint_names):
    """Six U-P-S legs between ``points`` (:func:`ups_points`) and the body ``platform``: per leg
    a cylinder on a universal joint at its base point (its spin about the leg locked), a rod in
    a prismatic joint along the leg and a spherical joint to the platform, and a spring-damper
    between the two joint centres at rest length in this configuration.  ``cylinder`` and
    ``rod``: (name prefix, mass, COM in the body frame, box dimensions), frames at the base and
    platform point with x along the leg; ``spring``: (name prefix, stiffness, damping);
    ``joint_names``: the universal, prismatic and spherical joints' prefixes.  Returns the
    cylinders, rods, joints and springs."""
    (cn, cm, cc, cd), (rn, rm, rc, rd), (sn, k, c) = cylinder, rod, spring
    un, pn, tn = joint_names
    cylinders, rods, joints, springs = [], [], [], []
    for i, (B, P) in enumerate(points, start=1):
        axis = frame(x=P - B, z=(0.0, 0.0, 1.0))
        length = float(np.linalg.norm(P - B))
        cylinders.append(Body(f"{cn}_{i}", cm, cc, box_inertia(cm, cd), B, axis))
        rods.append(Body(f"{rn}_{i}", rm, rc, box_inertia(rm, rd), P, axis))
        joints += [Joint(f"{un}_{i}", "universal", ("ground", f"{cn}_{i}"), B, axis),
                   Joint(f"{pn}_{i}", "prismatic", (f"{cn}_{i}", f"{rn}_{i}"), 0.5 * (B + P), axis),
                   Joint(f"{tn}_{i}", "spherical", (f"{rn}_{i}", platform), P)]
        springs.append(Spring(f"{sn}_{i}", f"{cn}_{i}", (0.0, 0.0, 0.0), f"{rn}_{i}", (0.0, 0.0, 0.0), k, c, length))
    return cylinders, rods, joints, springs


def hexapod() -> Model:
    """A 6-UPS motion platform (gravity -z), 6 DOF: forces and torques on the platform.

    Geometry: six base points on a circle of radius 0.5 m at 14 deg either side of 0, 120
    and 240 deg (z = 0); six platform points on a circle of radius 0.4 m at 10 deg either
    side of 60, 180 and 300 deg, the platform's centre 0.55 m above the base's in the
    reference configuration; leg i joins base point i to the nearer platform point of the
    neighbouring pair (legs leaning about 28 deg from the vertical, alternately to either
    side, so the six give the platform stiffness in every direction).  Each leg is a cylinder on a universal joint at its base point (its spin about the
    leg locked) and a rod in a prismatic joint along the leg, with a spherical joint to the
    platform: U-P-S, so each leg adds no constraint and the platform keeps all six degrees of
    freedom (13 bodies).  Masses: platform 16 kg with a payload that puts its COM at (4, -1.5,
    6) cm from its centre; cylinders 1.6 kg, rods 0.75 kg.  Springs ``leg_1..6``: one
    spring-damper along each leg (1600 N/m, 24 N s/m) between the universal joint's centre
    and the spherical joint's, at rest length in the reference configuration; the weight is
    carried by the constant part of the inputs (solved by the engine).  Inputs on the
    platform, global directions: forces ``Fx``, ``Fy``, ``Fz`` at its centre and torques
    ``Mx``, ``My``, ``Mz``.  Body frames: cylinders at their base point and rods at their
    platform point, x along the leg (base -> platform); the platform at its centre.
    Small oscillations without the dampers (the engine's free oscillation): 1.175 Hz (two sway
    modes 0.003 Hz apart), 2.413, 3.012, 4.189 and 4.400 Hz.  Excitations: ``train`` three
    tones per input (0.3-3.1 Hz), about 3 cm and 3-6 deg; ``low`` 0.5x; ``shape`` four tones
    each, of smaller reach; ``high`` 1.7x.
    """
    height = 0.55
    platform = Body("platform", 16.0, (0.04, -0.015, 0.06), box_inertia(16.0, (0.62, 0.56, 0.08)),
                    np.array([0.0, 0.0, height]), np.eye(3))
    cylinders, rods, joints, springs = ups_legs(
        ups_points(0.5, (0.0, 120.0, 240.0), 14.0, 0.4, (60.0, 180.0, 300.0), 10.0, height), "platform",
        ("cylinder", 1.6, (0.16, 0.0, 0.0), (0.36, 0.07, 0.07)), ("rod", 0.75, (-0.2, 0.0, 0.0), (0.42, 0.035, 0.035)),
        ("leg", 1600.0, 24.0), ("base", "slide", "top"))

    def coordinates(origin, rotation):
        p, R = origin[:, 0], rotation[:, 0]
        return {"platform_x": p[:, 0], "platform_y": p[:, 1], "platform_z": p[:, 2],
                "roll": np.arctan2(R[:, 2, 1], R[:, 2, 2]), "pitch": -np.arcsin(np.clip(R[:, 2, 0], -1.0, 1.0)),
                "yaw": np.arctan2(R[:, 1, 0], R[:, 0, 0])}

    return Model(
        name="hexapod",
        summary="6-UPS motion platform: forces and torques on the platform, a spring-damper in each leg (6 DOF)",
        gravity=(0.0, 0.0, -G),
        bodies=(platform, *cylinders, *rods),
        joints=tuple(joints),
        inputs=(Input("Fx", "force", "platform", (1.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
                Input("Fy", "force", "platform", (0.0, 1.0, 0.0), (0.0, 0.0, 0.0)),
                Input("Fz", "force", "platform", (0.0, 0.0, 1.0), (0.0, 0.0, 0.0)),
                Input("Mx", "torque", "platform", (1.0, 0.0, 0.0)),
                Input("My", "torque", "platform", (0.0, 1.0, 0.0)),
                Input("Mz", "torque", "platform", (0.0, 0.0, 1.0))),
        static_inputs=None,
        train=(
            Waveform(((12.0, 0.45), (-7.0, 0.9), (-5.0, 2.3))),
            Waveform(((-12.0, 0.6), (7.0, 1.7), (5.0, 2.9))),
            Waveform(((70.0, 0.35), (-40.0, 1.9), (-30.0, 3.1))),
            Waveform(((14.0, 0.55), (-8.0, 1.5), (-6.0, 2.7))),
            Waveform(((-14.0, 0.4), (8.0, 1.2), (6.0, 2.5))),
            Waveform(((14.0, 0.3), (-8.0, 1.1), (-6.0, 2.1))),
        ),
        shape=(
            Waveform(((5.0, 0.5), (4.0, 0.8), (-5.0, 1.6), (-4.0, 2.4))),
            Waveform(((-5.0, 0.35), (4.0, 1.0), (4.0, 1.8), (-3.0, 2.6))),
            Waveform(((30.0, 0.4), (25.0, 1.1), (-30.0, 2.0), (-25.0, 2.8))),
            Waveform(((6.0, 0.45), (-6.0, 1.3), (5.0, 2.2), (-5.0, 3.0))),
            Waveform(((-6.0, 0.3), (5.0, 0.8), (5.0, 1.9), (-4.0, 2.7))),
            Waveform(((5.0, 0.25), (-4.0, 0.95), (4.0, 1.7), (-5.0, 2.3))),
        ),
        coordinates=coordinates,
        springs=tuple(springs),
    )


def half_car() -> Model:
    """A half-car in its roll plane on a post rig (gravity -z), 4 DOF: body heave and roll, and
    each wheel's hop on a double-wishbone suspension.

    The body ("chassis", 380 kg, COM 9 cm above and 2 cm to the left of its pivot) moves on a
    vertical guide and rolls about the guide's pin (global x, 0.48 m above the ground):
    heave and roll.  Per side (y > 0 left, y < 0 right, mirrored): a lower wishbone from the
    body (y 0.32, z 0.24) to the upright (y 0.74, z 0.20), an upper wishbone from the body
    (y 0.45, z 0.56) to the upright (y 0.71, z 0.53) (shorter: the wheel gains camber in
    bump), and the upright with its wheel (29 kg, COM at the wheel centre, y 0.80, z 0.30).
    All joints turn about global x; each side's loop (body, two wishbones, upright) is closed
    by a pin constraining only the in-plane position, so no constraint is redundant
    (7 bodies).  Springs: a coilover from the lower wishbone (y 0.62) up to the
    body (y 0.52, z 0.78) (30 kN/m, 1900 N s/m) and a tyre from the wheel centre to the
    ground point below it (150 kN/m, 120 N s/m, rest length 0.30 m), both at rest length in
    the reference configuration; the weight is carried by the constant part of the inputs
    (solved by the engine).  Inputs: ``Fz`` a vertical force on the body at its pivot,
    ``Mx`` a roll moment on the body, ``F_left``, ``F_right`` vertical forces at the wheel
    centres (global directions).  Body frames: the body at its pivot, wishbones at their
    inner pivot with x along the arm, uprights at the lower ball joint with x up the
    upright.  Excitations: ``train`` three tones per input (body 0.6-2.5 Hz, wheels up to
    the wheel hop near 11 Hz), about 6 cm of heave, 4 deg of roll and 1.5 cm of wheel hop (the
    lower ball joints' height, ``wheel_left``/``wheel_right`` in the range checks);
    ``low`` 0.5x; ``shape`` four tones each, of smaller reach; ``high`` 1.7x.
    """
    pivot = np.array([0.0, 0.0, 0.48])
    ex = (1.0, 0.0, 0.0)
    bodies = [Body("chassis", 380.0, (0.0, 0.02, 0.09), (95.0, 60.0, 120.0), pivot, np.eye(3))]
    joints = [Joint("guide", "vertical_slider_pin", ("ground", "chassis"), pivot, frame(y=(0.0, 0.0, 1.0), z=ex))]
    springs = []
    for side, s in (("left", 1.0), ("right", -1.0)):
        def P(y, z):
            return np.array([0.0, s * y, z])
        lo_in, lo_out, up_in, up_out, wheel = P(0.32, 0.24), P(0.74, 0.20), P(0.45, 0.56), P(0.71, 0.53), P(0.80, 0.30)
        lo_frame = frame(x=lo_out - lo_in, z=ex)
        up_frame = frame(x=up_out - up_in, z=ex)
        upright_frame = frame(x=up_out - lo_out, z=ex)
        lower = Body(f"lower_{side}", 4.2, (0.21, 0.0, 0.0), box_inertia(4.2, (0.42, 0.05, 0.3)), lo_in, lo_frame)
        upper = Body(f"upper_{side}", 2.6, (0.13, 0.0, 0.0), box_inertia(2.6, (0.27, 0.04, 0.2)), up_in, up_frame)
        upright = Body(f"upright_{side}", 29.0, (0.0, 0.0, 0.0), (1.1, 0.75, 0.75), lo_out, upright_frame)
        upright = replace(upright, com=tuple(float(c) for c in upright.local(wheel)))
        bodies += [lower, upper, upright]
        joints += [Joint(f"lower_pivot_{side}", "revolute", ("chassis", f"lower_{side}"), lo_in, frame(z=ex)),
                   Joint(f"upper_pivot_{side}", "revolute", ("chassis", f"upper_{side}"), up_in, frame(z=ex)),
                   Joint(f"lower_ball_{side}", "revolute", (f"lower_{side}", f"upright_{side}"), lo_out, frame(z=ex)),
                   Joint(f"upper_ball_{side}", "planar_pin", (f"upper_{side}", f"upright_{side}"), up_out,
                         frame(z=ex))]
        seat, top = P(0.62, 0.2114), P(0.52, 0.78)
        springs += [Spring(f"coilover_{side}", f"lower_{side}", tuple(float(c) for c in lower.local(seat)), "chassis",
                           tuple(float(c) for c in bodies[0].local(top)), 30000.0, 1900.0,
                           float(np.linalg.norm(top - seat))),
                    Spring(f"tyre_{side}", f"upright_{side}", tuple(float(c) for c in upright.local(wheel)), "ground",
                           tuple(float(c) for c in P(0.80, 0.0)), 150000.0, 120.0, 0.30)]
    bodies = [bodies[0], *bodies[1::3], *bodies[2::3], *bodies[3::3]]

    def coordinates(origin, rotation):
        R = rotation[:, 0]
        return {"heave": origin[:, 0, 2], "roll": np.arctan2(R[:, 2, 1], R[:, 1, 1]),
                "wheel_left": origin[:, 5, 2], "wheel_right": origin[:, 6, 2]}

    return Model(
        name="half_car",
        summary="half-car in its roll plane on a post rig, double-wishbone corners: heave, roll and wheel hop (4 DOF)",
        gravity=(0.0, 0.0, -G),
        bodies=tuple(bodies),
        joints=tuple(joints),
        inputs=(Input("Fz", "force", "chassis", (0.0, 0.0, 1.0), (0.0, 0.0, 0.0)),
                Input("Mx", "torque", "chassis", (1.0, 0.0, 0.0)),
                Input("F_left", "force", "upright_left", (0.0, 0.0, 1.0), bodies[5].com),
                Input("F_right", "force", "upright_right", (0.0, 0.0, 1.0), bodies[6].com)),
        static_inputs=None,
        train=(
            Waveform(((720.0, 0.7), (-420.0, 1.6), (-300.0, 2.5))),
            Waveform(((500.0, 0.6), (-280.0, 1.3), (-220.0, 2.2))),
            Waveform(((600.0, 1.1), (-350.0, 4.3), (-250.0, 9.7))),
            Waveform(((-600.0, 0.9), (350.0, 3.7), (250.0, 10.6))),
        ),
        shape=(
            Waveform(((300.0, 0.5), (250.0, 1.2), (-300.0, 1.9), (-250.0, 2.8))),
            Waveform(((-200.0, 0.8), (150.0, 1.5), (200.0, 2.0), (-150.0, 2.9))),
            Waveform(((250.0, 0.8), (-200.0, 2.6), (200.0, 6.1), (-250.0, 8.8))),
            Waveform(((-250.0, 1.4), (200.0, 3.1), (200.0, 5.3), (-150.0, 9.2))),
        ),
        coordinates=coordinates,
        springs=tuple(springs),
    )


BUILDERS = {"four_bar": four_bar, "slider_crank": slider_crank, "two_bar": two_bar, "macpherson": macpherson,
            "five_bar": five_bar, "spatial_four_bar": spatial_four_bar,
            "three_rrr": three_rrr, "four_bar_friction": four_bar_friction, "macpherson_nl": macpherson_nl,
            "hexapod": hexapod, "half_car": half_car}
