"""``mc2fmu export MODEL_DIR --format casadi -o MODEL.casadi``: the reduced ODE as a CasADi function.

The function is built from the model's weights in CasADi's SX graph, so CasADi's own AD
gives every derivative an MPC or estimation toolchain (do-mpc, acados, rockit, Opti) asks for:

    model(q, qd, u) -> (qdd, origins, motion)

``qdd`` is the reduced ODE's right-hand side (the decoder ``x(q)``, ``J = dx/dq`` and
``(dJ/dq qd) qd`` by CasADi's AD, then ``M_m qdd = J^T (f(x, u) - M (dJ/dq qd) qd) + J^T f_spring``,
as :mod:`mc2fmu.models.manifold`), and ``origins`` every body's origin (x, y, z, global frame,
m; ``r0 - R com`` with ``R``'s columns ``(r_k - r0) / L`` of the decoded points, as
``mc2fmu linearize``), and ``motion`` the motion outputs of :mod:`mc2fmu.models.motion` (each
body's origin velocity and angular velocity, global frame, then the kinetic and the potential
energy, at the exported mechanism's physical parameters; the FMUs' ``<body>.vx ... wz``,
``kinetic_energy``, ``potential_energy``), from the same description the native FMU's C is
printed from, evaluated on CasADi's symbols with ``xd = J qd``.  Load it with ``casadi.Function.load("MODEL.casadi")``.  CasADi is an
optional extra (``pip install casadi``).

The decoder network, the identified terms (``--identify``) and the recorded springs' learned
laws (``law = "recorded"``) are the run-time model's own code (:func:`mc2fmu.models.mlp.mlp`,
:func:`mc2fmu.models.terms.identified_force`, :class:`mc2fmu.models.spring_laws.SpringLaws`)
evaluated on CasADi's symbols (:func:`mc2fmu.models.array_ops.ops`), a batch of one as a row.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..capabilities import require
from ..errors import ExportError
from ..files import atomic_output
from ..mechanics.variants import parameter_vector
from ..models.motion import MotionGeometry, motion_outputs


def _casadi():
    try:
        import casadi
    except ImportError:
        raise ExportError("--format casadi needs CasADi: pip install casadi") from None
    return casadi


def casadi_model(art) -> Any:
    """The CasADi ``Function`` ``model(q, qd, u) -> (qdd, origins, motion)`` of a model artifact."""
    from ..models.manifold import ManifoldModel, cholesky_steps
    from ..models.mlp import get_activation, mlp
    from ..models.terms import identified_force

    require(art, "casadi", ExportError)
    ca = _casadi()
    model = art.model
    assert isinstance(model, ManifoldModel)  # the table gives casadi to decoder-manifold models only
    m, n_u = model.dof, model.n_u
    q, qd, u = ca.SX.sym("q", m), ca.SX.sym("qd", m), ca.SX.sym("u", n_u)
    feats = []
    for i, is_angle in enumerate(model.angles):
        feats += [ca.cos(q[i]), ca.sin(q[i])] if is_angle else [(q[i] - model.q_mean[i]) / model.q_scale[i]]
    z = mlp(model.decoder.layers, get_activation(model.decoder.activation), ca.horzcat(*feats)).T  # (n, 1)
    x = ca.DM(model.x_mean) + ca.DM(model.x_scale) * z
    J = ca.jacobian(x, q)
    Hvv = ca.mtimes(ca.jacobian(ca.mtimes(J, qd), q), qd)
    M = ca.DM(model.M)
    f = ca.DM(model.f_g)
    if n_u:
        f = f + ca.mtimes(ca.DM(model.f_B), u)
        for i in range(n_u):
            f = f + u[i] * ca.mtimes(ca.DM(model.f_C[i]), x)
    MJ = ca.mtimes(M, J)
    rhs = ca.mtimes(J.T, f) - ca.mtimes(MJ.T, Hvv)
    s = model.springs
    lines = []  # per spring: D J, its unit vector, length and rate
    for k in range(len(s.k)):
        D = ca.DM(s.D[k])
        d = ca.mtimes(D, x) + ca.DM(s.e[k])
        length = ca.sqrt(ca.dot(d, d))
        n = d / length
        DJ = ca.mtimes(D, J)
        lines.append((DJ, n, length, ca.dot(n, ca.mtimes(DJ, qd))))
    learned = None
    if lines and s.laws is not None and len(s.laws):  # the recorded springs' learned tensions (1, n_s)
        learned = s.laws.tension(ca.horzcat(*[ln[2] for ln in lines]), ca.horzcat(*[ln[3] for ln in lines]))
    for k, (DJ, n, length, ldot) in enumerate(lines):
        tension = float(s.k[k]) * (length - float(s.L0[k])) + float(s.c[k]) * ldot
        if learned is not None:
            tension = tension + learned[0, k]
        rhs = rhs - ca.mtimes(DJ.T, n) * tension
    lib = model.library
    if lib is not None and len(lib):  # identified terms Xi^T lambda(q, qd, u)
        rhs = rhs + identified_force(lib, lib.Xi, q.T, qd.T, u.T, lib.param).T
    Mm = ca.mtimes(J.T, MJ)
    # the run-time model's unrolled Cholesky, so the function agrees with it to round-off
    qdd = ca.vertcat(*cholesky_steps(lambda i, j: Mm[i, j], lambda i: rhs[i], m, ca.sqrt))
    origins = []
    for bl in art.layout.bodies:
        p = [x[bl.offset + 3 * j: bl.offset + 3 * j + 3] for j in range(4)]
        R = ca.horzcat(*[(p[j] - p[0]) / bl.length for j in (1, 2, 3)])
        origins.append(p[0] - ca.mtimes(R, ca.DM(np.asarray(bl.com, dtype=np.float64))))
    n_x = art.layout.size
    xd = ca.mtimes(J, qd)
    geometry = MotionGeometry.of(art.layout, s.D, s.e, s.laws)
    moving = motion_outputs(geometry, [x[i] for i in range(n_x)], [xd[i] for i in range(n_x)],
                            [float(t) for t in parameter_vector(art.mechanism)])
    return ca.Function("model", [q, qd, u], [qdd, ca.vertcat(*origins), ca.vertcat(*moving)], ["q", "qd", "u"],
                       ["qdd", "origins", "motion"])


def export_casadi(model_dir: str | os.PathLike, out: str | os.PathLike) -> dict[str, Any]:
    """Write ``out`` (``casadi.Function.save``); returns a summary."""
    from ..models.artifact import load_artifact

    out = Path(out)
    if out.suffix != ".casadi":
        raise ExportError(f"{out}: a CasADi function is written as .casadi; name the output '<name>.casadi'")
    art = load_artifact(model_dir)
    fn = casadi_model(art)
    with atomic_output(out) as tmp:
        fn.save(str(tmp))
    return {"file": str(out), "dof": art.model.dof, "inputs": list(art.mechanism.input_names),
            "bodies": list(art.mechanism.body_names)}
