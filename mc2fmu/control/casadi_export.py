"""``mc2fmu export MODEL_DIR --format casadi -o MODEL.casadi``: the reduced ODE as a CasADi function.

The function is built from the model's weights in CasADi's SX graph, so CasADi's own AD
gives every derivative an MPC or estimation toolchain (do-mpc, acados, rockit, Opti) asks for:

    model(q, qd, u) -> (qdd, origins, motion)

``qdd`` is the reduced ODE's right-hand side (the decoder ``x(q)``, ``J = dx/dq`` and
``(dJ/dq qd) qd`` by CasADi's AD, then ``M_m qdd = J^T (f(x, u) - M (dJ/dq qd) qd) + J^T f_spring
+ Xi^T lambda``: the run-time model's own :func:`mc2fmu.models.manifold.manifold_terms` and
:func:`~mc2fmu.models.manifold.acceleration` evaluated on numpy object arrays of CasADi's scalar
symbols), and ``origins`` every body's origin (x, y, z, global frame,
m; ``r0 - R com`` with ``R``'s columns ``(r_k - r0) / L`` of the decoded points, as
``mc2fmu linearize``), and ``motion`` the motion outputs of :mod:`mc2fmu.models.motion` (each
body's origin velocity and angular velocity, global frame, then the kinetic and the potential
energy, at the exported mechanism's physical parameters; the FMUs' ``<body>.vx ... wz``,
``kinetic_energy``, ``potential_energy``), from the same description the native FMU's C is
printed from, evaluated on CasADi's symbols with ``xd = J qd``.  Load it with ``casadi.Function.load("MODEL.casadi")``.  CasADi is an
optional extra (``pip install casadi``).

The decoder network, the assembly of the reduced dynamics with its springs, the recorded
springs' learned laws (``law = "recorded"``) and the identified terms (``--identify``) are the
run-time model's own code (:func:`mc2fmu.models.mlp.mlp`, :mod:`mc2fmu.models.manifold`,
:class:`mc2fmu.models.spring_laws.SpringLaws`, :func:`mc2fmu.models.terms.identified_force`)
evaluated on CasADi's symbols (:func:`mc2fmu.models.array_ops.ops`), the network a batch of one
as a row, the dynamics as numpy object arrays of scalars.
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
    from ..models.manifold import ManifoldModel, acceleration, applied_force, manifold_terms
    from ..models.mlp import get_activation, mlp

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
    # the reduced dynamics: the run-time model's own manifold_terms and acceleration (its
    # unrolled Cholesky) on numpy object arrays of CasADi's scalars, a batch of one
    def entries(v, *shape: int) -> np.ndarray:  # (1, *shape), entry by entry (numpy would ask SX for numbers)
        out = np.empty(shape, dtype=object)
        for i in np.ndindex(*shape):
            out[i] = v[i]
        return out[None]

    n_x = art.layout.size
    xo, qo, qdo, uo, Jo = entries(x, n_x), entries(q, m), entries(qd, m), entries(u, n_u), entries(J, n_x, m)
    lib = model.library
    ident = None if lib is None or not len(lib) else (lib, lib.Xi, lib.param, qo, uo)
    terms = manifold_terms(xo, Jo, None, model.mass, applied_force(model.f_g, model.f_B, model.f_C, xo, uo),
                           model.springs, ident)
    qdd = ca.vertcat(*acceleration(terms, qdo, entries(Hvv, n_x))[0])
    origins = []
    for bl in art.layout.bodies:
        p = [x[bl.offset + 3 * j: bl.offset + 3 * j + 3] for j in range(4)]
        R = ca.horzcat(*[(p[j] - p[0]) / bl.length for j in (1, 2, 3)])
        origins.append(p[0] - ca.mtimes(R, ca.DM(np.asarray(bl.com, dtype=np.float64))))
    xd = ca.mtimes(J, qd)
    sp = model.springs
    geometry = MotionGeometry.of(art.layout, sp.D, sp.e, sp.laws)
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
