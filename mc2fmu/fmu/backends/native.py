"""The native FMU backend: generated C, FMI 2.0 and 3.0, co-simulation and model exchange.

The FMU carries a compiled library (``binaries/<platform>/<modelIdentifier>.so``, built here
with the C compiler ``$CC``, default ``gcc``) and its C sources (``sources/``, with
``buildDescription.xml`` for FMI 3), so the importer needs no Python at all and users on
other platforms compile the sources themselves.

* ``sources/mc2fmu_model.h`` is rendered from ``mc2fmu/fmu/templates/native/mc2fmu_model.h.in``: data
  only (sizes, the variable table of :func:`mc2fmu.fmu.description.fmu_variables`, weights
  as ``static const double`` arrays written with 17 significant digits, ``M`` and the force
  model as sparse rows, the output layer and the springs folded into the last hidden layer,
  the body layout, the envelope);
* ``sources/mc2fmu_motion.h``, ``sources/mc2fmu_terms.h``, ``sources/mc2fmu_laws.h``,
  ``sources/mc2fmu_envelope.h``, ``sources/mc2fmu_solve.h``, ``sources/mc2fmu_poses.h``, ``sources/mc2fmu_step.h`` and
  ``sources/mc2fmu_mass.h`` are
  printed per model from the run-time model's own Python (:func:`render_motion`:
  :mod:`mc2fmu.models.motion`; :func:`render_terms`: :func:`mc2fmu.models.terms.traced`;
  :func:`render_laws`: the learned spring laws, :func:`mc2fmu.models.spring_laws.traced`;
  :func:`render_envelope`: the training envelope's distance, :func:`mc2fmu.models.envelope.traced`;
  :func:`render_solve`: the reduced mass matrix's Cholesky solve,
  :func:`mc2fmu.models.manifold.cholesky_steps`; :func:`render_poses`: a body's pose,
  :func:`mc2fmu.models.poses.traced`; :func:`render_step`: the one-step map,
  :mod:`mc2fmu.models.step_maps`, and a node model's RK4 step, :func:`mc2fmu.models.node.rk4_step`;
  for ``double`` and the complex twin alike;
  :func:`render_mass`: a body's point mass block,
  :func:`mc2fmu.mechanics.parameters.body_mass_entries`);
* ``mc2fmu_native.h`` (runtime and state machine), ``mc2fmu_dynamics.h``, ``mc2fmu_lpca.h``,
  ``mc2fmu_fmi.h`` (the FMI functions both versions share) and ``mc2fmu_fmi2.c`` /
  ``mc2fmu_fmi3.c`` (the per-version glue) are copied unchanged from the package's
  ``templates/native/``.

Everything but the FMI functions has internal linkage (one translation unit, ``static``,
``-fvisibility=hidden``), so two native FMUs live side by side in one process without
``FMI2_FUNCTION_PREFIX``.

At export the same sources are also compiled into a self-check library whose decoder
(value, J, H), right-hand side, step map and poses are compared with the run-time model
(numpy; it is checked against torch in the tests) and :mod:`mc2fmu.mechanics.rotations` at
points spread over the training envelope; a difference above :data:`TOLERANCE` is an
:class:`~mc2fmu.errors.ExportError`.  The backend takes decoder-manifold models
(:class:`~mc2fmu.models.manifold.ManifoldModel`, the autoencoder reducer's) and neural-ODE
models (:class:`~mc2fmu.models.charted.NodeModel`, the node reducer's: ``MC2FMU_NODE`` 1,
the network and one RK4 step per sample in C, the chart's decoder for the poses, the
acceleration and step checked like the manifold's) and local-PCA models
(:class:`~mc2fmu.models.charted.LocalPcaModel`, the local-pca reducer's: ``MC2FMU_LPCA`` 1,
``mc2fmu_lpca.h``: Algorithm 1 with the energy-preserving switch, the chart's encoder and
decoder for ``q`` and ``qd``; co-simulation only; the start, a step with a forced switch and
the chart's reading checked against numpy); other kinds are refused with a message.

The FMU also carries the model artifact under ``resources/model/`` (not read by the C code;
what `mc2fmu validate` and `mc2fmu simulate` read).
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import shutil
import struct
import re
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ...capabilities import kind as capability
from ... import __version__
from ...errors import ExportError
from ...files import json_safe, write_zip
from ...mechanics.natural import poses_from_nc
from ...mechanics import mechanism as mechanism_limits
from ...mechanics.parameters import BODY_SLOTS, MASS_ENTRIES, MASS_VALUES
from ...mechanics.variants import parameter_names, parameter_vector
from ...mechanics.rotations import matrix_to_quaternion
from ...models.artifact import MASS_CHECKS, mass_check_configurations
from ...models.charted import LocalPcaModel, NodeModel
from ...models.envelope import LEAVE_THRESHOLD, sample_points, traced as envelope_traced
from ...models.local_linear import START_ITERATIONS, START_TOLERANCE
from ...models.expr import CallTrace, emit_c, emit_c_calls, inputs as expr_inputs, sqrt as expr_sqrt
from ...models.manifold import ManifoldModel, cholesky_steps, spring_force
from ...models.motion import traced_law_energy as motion_law_energy, traced_mass, traced_parts as motion_parts
from ...models.poses import traced as poses_traced
from ...models.spring_laws import POTENTIAL_NODES, traced as law_traced
from ...models.node import rk4_step
from ...models.step_maps import get_step_map
from ...models.terms import active_terms, traced as terms_traced
from ..common import LOG_CATEGORIES, artifact_members, require_manifold, model_digest, model_identifier, render, template_path
from ..description import fmu_variables, model_description_fmi2, model_description_fmi3
from ..platforms import (GLIBC_FLOOR, PLATFORMS, Platform, compiler_of, emulator_env, emulator_of, host_name,
                         inspect_binary, resolve)

log = logging.getLogger(__name__)

SHARED_SOURCES = ("mc2fmu_native.h", "mc2fmu_dynamics.h", "mc2fmu_lpca.h", "mc2fmu_fmi.h")
GLUE = {2: "mc2fmu_fmi2.c", 3: "mc2fmu_fmi3.c"}
#: portable flags: no -march=native, so the binary runs on any x86-64 (set $MC2FMU_CFLAGS to override)
CFLAGS = ("-std=c99", "-O3", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra")
TOLERANCE = 1e-12  # self-check: max |C - torch| of an output relative to max(1, max |output|) (norm-wise)
#: the accelerations solve M_m qdd = f: two correct codes that sum in another order differ by
#: up to about n eps cond(M_m) relatively; the self-check allows this much times cond(M_m)
#: where that is above TOLERANCE (a 6-DOF model with cond 3e3: 2.8e-12 measured)
SOLVE_ROUNDOFF = 16 * float(np.finfo(np.float64).eps)
ACTIVATIONS = {"tanh": 0, "sigmoid": 1, "softplus": 2}
ROLES = {"input": "MC2FMU_ROLE_INPUT", "pose": "MC2FMU_ROLE_POSE", "q": "MC2FMU_ROLE_Q", "qd": "MC2FMU_ROLE_QD",
         "envelope": "MC2FMU_ROLE_ENVELOPE", "q_start": "MC2FMU_ROLE_Q_START", "qd_start": "MC2FMU_ROLE_QD_START",
         "der_q": "MC2FMU_ROLE_DER_Q", "der_qd": "MC2FMU_ROLE_DER_QD", "time": "MC2FMU_ROLE_TIME",
         "physics": "MC2FMU_ROLE_PHYSICS", "motion": "MC2FMU_ROLE_MOTION"}


def fmi_headers() -> Path:
    """The FMI 2/3 C headers of the installed fmpy package (not copies in this repository)."""
    try:
        import fmpy
    except ImportError:  # pragma: no cover - fmpy is a dependency
        raise ExportError("the native backend compiles against fmpy's FMI headers; install fmpy "
                          "(python -m pip install fmpy)") from None
    path = Path(fmpy.__file__).parent / "c-code"
    if not (path / "fmi2Functions.h").exists() or not (path / "fmi3Functions.h").exists():
        raise ExportError(f"{path}: the FMI headers are missing from the fmpy installation; reinstall fmpy")
    return path


def compiler(platform: Platform | None = None) -> str:
    """The C compiler that builds for ``platform`` (default: this machine, ``$CC`` or gcc)."""
    platform = platform or PLATFORMS[host_name()]
    path = compiler_of(platform)
    if path is None:
        resolve(platform.name)  # raises the error that names the package to install
    return path


def cflags() -> list[str]:
    extra = os.environ.get("MC2FMU_CFLAGS")
    return list(CFLAGS) + (extra.split() if extra else [])


# ------------------------------------------------------------------ rendering


def _c_double(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(v)  # shortest round-trip repr: gcc parses it back to the same double


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _array(ctype: str, name: str, values, per_line: int = 4, comment: str = "") -> str:
    values = list(values)
    fmt = _c_double if ctype == "double" else (lambda v: str(int(v)))
    if not values:  # C has no zero-length arrays: a placeholder the sizes never reach
        values, note = [0], " /* empty */"
    else:
        note = ""
    lines = [", ".join(fmt(v) for v in values[i:i + per_line]) for i in range(0, len(values), per_line)]
    head = f"/* {comment} */\n" if comment else ""
    return f"{head}static const {ctype} {name}[{len(values)}] = {{{note}\n    " + ",\n    ".join(lines) + "\n};"


def _strings(name: str, values: list[str]) -> str:
    return f"static const char *const {name}[{len(values)}] = {{\n    " + ",\n    ".join(map(_c_string, values)) + "\n};"


#: eigenvalues of the folded mass matrix below this fraction of the largest are dropped: its own
#: rounding (64 x 64, float64) is ~1e-15 of the largest, and an exact rank deficiency (the
#: decoder's outputs span the data's hull, e.g. 6 directions for the five-bar's 48 coordinates)
#: is what is left out
MASS_RANK_TOL = 1e-14


def mass_factor(A: np.ndarray) -> np.ndarray:
    """``G`` (k, NH) with ``A = G^T G`` to ``MASS_RANK_TOL``: the folded mass matrix
    ``A = W_L^T S M S W_L`` (NH x NH, symmetric positive semidefinite) has the rank of the
    decoder's output span, often far below NH, and ``M_m = (G Jh)^T (G Jh)``, ``J^T M (H : v v)
    = (G Jh)^T G (Hh : v v)`` cost k NH per column instead of NH^2.  Measured: the five-bar's
    (2 DOF, NH 64, k = 6) native step in the C host 10.3 -> 8.5 us."""
    lam, V = np.linalg.eigh((A + A.T) / 2.0)
    keep = lam > MASS_RANK_TOL * max(float(lam.max()), 1e-300)
    if not keep.any():  # no mass at all: one zero row keeps the C arrays non-empty
        return np.zeros((1, A.shape[0]))
    return (np.sqrt(lam[keep])[:, None] * V[:, keep].T)[::-1].copy()


def low_rank(C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``L`` (m, k), ``R`` (k, n) with ``C = L R`` for an (m, n) matrix ``C``, to
    ``MASS_RANK_TOL`` of its largest singular value: a folded input-force matrix ``C_i = W_L^T S f_C[i] S W_L`` has at most the
    rank of ``f_C[i]`` (a torque on one body moves that body's 12 coordinates: rank <= 6 or so),
    and ``C_i h = L (R h)`` costs ``2 k NH`` instead of ``NH^2``.  Measured (native step in the C
    host, benchmarks/train_accuracy.py's cost, one Hessian row per velocity on): the 3-RRR (three
    torques, NH 64, k = 6) 11.2 -> 9.1 us, the five-bar (two torques) 7.2 -> 6.5 us.  ``k = 0``
    for a zero matrix."""
    U, S, Vt = np.linalg.svd(C, full_matrices=False)
    keep = S > MASS_RANK_TOL * max(float(S[0]) if S.size else 0.0, 1e-300)
    if not S.size or S[0] == 0.0:
        keep[:] = False
    return U[:, keep] * S[keep], Vt[keep].copy()


def velocity_factor(SW: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``U`` (NX, k), ``V`` (k, NH) with ``S W_L = U V`` (:func:`low_rank`), for the poses'
    ``x = x0 + U (V h)`` and the motion outputs' ``xd = S W_L (Jh qd) = U (V (Jh qd))``: the
    output layer maps onto the data's hull (k its dimension, e.g. 3 for the four-bar's 36
    coordinates), so each product costs ``k (NX + NH)`` instead of ``NX NH``.  None when that
    is not cheaper (a decoder without a hull)."""
    U, V = low_rank(SW)
    k = V.shape[0]
    if k * (SW.shape[0] + SW.shape[1]) >= SW.shape[0] * SW.shape[1]:
        return None
    if k == 0:  # a zero output layer: one zero direction keeps the C arrays non-empty
        return np.zeros((SW.shape[0], 1)), np.zeros((1, SW.shape[1]))
    return U, V


def _csr(A: np.ndarray) -> tuple[list[int], list[int], list[float]]:
    row, col, val = [0], [], []
    for i in range(A.shape[0]):
        nz = np.flatnonzero(A[i])
        col += nz.tolist()
        val += A[i, nz].tolist()
        row.append(len(col))
    return row, col, val


def instantiation_token(model_dir: Path, fmi_version: int, interface: str, mechanism=None) -> str:
    """The FMU's GUID / instantiation token: a hash of the model's files, the variant and the
    mechanism whose physics it runs (``mechanism``: a physical variant's, or None)."""
    import json

    extra = [json.dumps(json_safe(mechanism.to_dict()), sort_keys=True)] if mechanism is not None else []
    h = model_digest(model_dir, f"native fmi{fmi_version} {interface}", *extra)
    return "{" + str(uuid.UUID(hex=h[:32], version=4)) + "}"


def node_model(artifact) -> NodeModel | None:
    """The artifact's neural-ODE model (None for another kind).  What the C is generated for
    (activations, step maps) is the capability table's rule, checked by export_fmu."""
    model = artifact.model
    return model if isinstance(model, NodeModel) else None


def local_pca_model(artifact) -> LocalPcaModel | None:
    """The artifact's local-PCA model (None for another kind)."""
    model = artifact.model
    return model if isinstance(model, LocalPcaModel) else None


def manifold_model(artifact) -> ManifoldModel:
    """The decoder-manifold model whose decoder (and, for the autoencoder's own models, whose
    dynamics) the C code carries: the artifact's model, or a node or local-PCA model's chart."""
    charted = node_model(artifact) or local_pca_model(artifact)
    return charted.chart if charted is not None else require_manifold(artifact)


def render_model_header(artifact, variables, *, token: str, ident: str, interface: str) -> str:
    """``mc2fmu_model.h``: the model's data, rendered from the artifact."""
    model = manifold_model(artifact)
    m, n_x, n_u = artifact.dof, artifact.layout.size, artifact.n_u
    bodies = artifact.layout.bodies
    Ws, bs = list(model.decoder.weights), list(model.decoder.biases)
    n_layers, n_feat = len(Ws), Ws[0].shape[1]
    wmax = max([n_feat] + [W.shape[0] for W in Ws])
    M_row, M_col, M_val = _csr(model.M)
    f_C = model.f_C.reshape(n_u, n_x, n_x)
    C_row, C_col, C_val = [], [], []
    for k in range(n_u):
        r, c, v = _csr(f_C[k])
        C_row += [x + len(C_col) for x in r]
        C_col += c
        C_val += v
    if not n_u:
        C_row = [0] * (n_x + 1)
    # the output layer folded into the dynamics (exact algebra, float64): with
    # x = x_mean + S (W_L h + b_L), J = S W_L Jh, H = S W_L Hh, the step needs only
    # A = W_L^T S M S W_L, g = W_L^T S f_g, B = W_L^T S f_B, C_i = W_L^T S f_C[i] S W_L and
    # c_i = W_L^T S f_C[i] (x_mean + S b_L); see mc2fmu_eval_geometry in mc2fmu_native.h
    n_h = Ws[-1].shape[1]
    SW = model.x_scale[:, None] * Ws[-1]
    x0 = model.x_mean + model.x_scale * bs[-1]
    G_h = mass_factor(SW.T @ model.M @ SW)  # its rank NK; the C code forms G from the parameters
    xd_UV = velocity_factor(SW)  # x = x0 + SW h and the motion outputs' xd = SW vh through the hull
    B_h = SW.T @ model.f_B.reshape(n_x, n_u) if n_u else np.zeros((n_h, 0))
    C_lr = [low_rank(SW.T @ f_C[k] @ SW) for k in range(n_u)]  # C_i = L_i R_i
    C_rank = [R.shape[0] for _, R in C_lr]
    C_off = np.concatenate([[0], np.cumsum(C_rank)]).astype(int).tolist()
    c_h = [SW.T @ (f_C[k] @ x0) for k in range(n_u)]
    # spring s spans d_s = D_s x + e_s = P_s h + p_s with P_s = D_s S W_L, p_s = D_s (x_mean + S b_L) + e_s
    sp = model.springs
    n_s = sp.D.shape[0]
    P_h = sp.D @ SW
    p_h = sp.D @ x0 + sp.e
    lib = active_terms(model.library)
    laws = list(sp.laws.laws) if sp.laws is not None else []
    n_t = 0 if lib is None else len(lib)
    env = artifact.envelope
    node = node_model(artifact)
    lpca = local_pca_model(artifact)
    mass_check_q = mass_check_configurations(env, model)
    defines = {
        "MC2FMU_MODEL_NAME": _c_string(artifact.mechanism.name),
        "MC2FMU_MODEL_IDENTIFIER": _c_string(ident),
        "MC2FMU_INSTANTIATION_TOKEN": _c_string(token),
        "MC2FMU_NQ": m, "MC2FMU_NX": n_x, "MC2FMU_NU": n_u, "MC2FMU_NB": len(bodies), "MC2FMU_NL": n_layers,
        "MC2FMU_NF": n_feat, "MC2FMU_NH": n_h, "MC2FMU_NK": len(G_h), "MC2FMU_WMAX": wmax, "MC2FMU_NV": len(variables), "MC2FMU_NS": n_s,
        "MC2FMU_NT": n_t, "MC2FMU_NPHYS": len(parameter_vector(artifact.mechanism)),
        "MC2FMU_NMOTION": sum(v.role == "motion" for v in variables),
        "MC2FMU_NXD": f"{0 if xd_UV is None else xd_UV[0].shape[1]} /* x, xd = x0 + U (V h), U (V vh) through this many directions (0: through SW) */",
        "MC2FMU_BODY_SLOTS": BODY_SLOTS, "MC2FMU_NCHECK": MASS_CHECKS, "MC2FMU_MASS_RANK_TOL": _c_double(MASS_RANK_TOL),
        "MC2FMU_INERTIA_RTOL": _c_double(mechanism_limits.INERTIA_RTOL),
        "MC2FMU_MIN_MASS": _c_double(mechanism_limits.MIN_MASS), "MC2FMU_MAX_MASS": _c_double(mechanism_limits.MAX_MASS),
        "MC2FMU_MAX_LENGTH": _c_double(mechanism_limits.MAX_LENGTH),
        "MC2FMU_MAX_INERTIA": _c_double(mechanism_limits.MAX_INERTIA),
        "MC2FMU_MAX_GRAVITY": _c_double(mechanism_limits.MAX_GRAVITY),
        "MC2FMU_MAX_STIFFNESS": _c_double(mechanism_limits.MAX_SPRING["stiffness"]),
        "MC2FMU_MAX_DAMPING": _c_double(mechanism_limits.MAX_SPRING["damping"]),
        "MC2FMU_NLAW": len(laws),
        "MC2FMU_ACTIVATION": f"{ACTIVATIONS[model.decoder.activation]} /* {model.decoder.activation} */",
        "MC2FMU_DT": _c_double(artifact.dt),
        "MC2FMU_LEAVE_THRESHOLD": _c_double(LEAVE_THRESHOLD),
        "MC2FMU_HAS_CS": int(interface in ("cs", "both")), "MC2FMU_HAS_ME": int(interface in ("me", "both")),
        "MC2FMU_NODE": f"{int(node is not None)} /* 1: the node reducer's neural ODE, the decoder for the poses */",
        "MC2FMU_LPCA": f"{int(lpca is not None)} /* 1: the local-pca reducer's piecewise-linear ROM */",
    }
    if node is not None:
        net, sc = node.dynamics.net, node.dynamics.scales
        defines.update({"MC2FMU_NODE_NL": len(net.weights), "MC2FMU_NODE_WMAX": max(net.widths),
                        "MC2FMU_NODE_ACTIVATION": f"{ACTIVATIONS[net.activation]} /* {net.activation} */"})
    if lpca is not None:
        rom, chart = lpca.rom, lpca.chart
        defines.update({"MC2FMU_LPCA_K": rom.clusters, "MC2FMU_LPCA_R": rom.r, "MC2FMU_LPCA_EPS": _c_double(rom.eps),
                        "MC2FMU_LPCA_START_ITERATIONS": START_ITERATIONS,
                        "MC2FMU_LPCA_START_TOLERANCE": _c_double(START_TOLERANCE),
                        "MC2FMU_ENC_LINEAR": int(chart.encoder is None)})
        if chart.encoder is not None:
            enc = chart.encoder
            defines.update({"MC2FMU_ENC_NL": len(enc.weights), "MC2FMU_ENC_WMAX": max(enc.widths),
                            "MC2FMU_ENC_ACTIVATION": f"{ACTIVATIONS[enc.activation]} /* {enc.activation} */"})
    arrays = [
        _array("int", "mc2fmu_angle", [int(a) for a in artifact.angles], comment="1: an angle coordinate (cos, sin in)"),
        _array("double", "mc2fmu_q_mean", model.q_mean),
        _array("double", "mc2fmu_q_scale", model.q_scale),
        _array("double", "mc2fmu_x_mean", model.x_mean),
        _array("double", "mc2fmu_x_scale", model.x_scale),
        _array("int", "mc2fmu_layer_in", [W.shape[1] for W in Ws], per_line=16),
        _array("int", "mc2fmu_layer_out", [W.shape[0] for W in Ws], per_line=16),
    ]
    for i, (W, b) in enumerate(zip(Ws, bs)):
        arrays.append(_array("double", f"mc2fmu_WT{i}", W.T.ravel(), comment=f"decoder layer {i}: W^T ({W.shape[1]} x {W.shape[0]})"))
        arrays.append(_array("double", f"mc2fmu_b{i}", b))
    if xd_UV is not None:
        arrays.append(_array("double", "mc2fmu_xd_V", xd_UV[1].ravel(), comment="the output layer S W_L = U V: V, row-major (NXD x NH)"))
        arrays.append(_array("double", "mc2fmu_xd_U", xd_UV[0].ravel(), comment="U, row-major (NX x NXD)"))
        arrays.append(_array("double", "mc2fmu_x0", x0, comment="x0 = x_mean + S b_L: the poses' x = x0 + U (V h)"))
    arrays.append("static const double *const mc2fmu_WT[%d] = {%s};" % (n_layers, ", ".join(f"mc2fmu_WT{i}" for i in range(n_layers))))
    arrays.append("static const double *const mc2fmu_b[%d] = {%s};" % (n_layers, ", ".join(f"mc2fmu_b{i}" for i in range(n_layers))))
    arrays += [
        _array("int", "mc2fmu_M_row", M_row, per_line=16, comment="NC mass matrix M, compressed sparse rows"),
        _array("int", "mc2fmu_M_col", M_col, per_line=16),
        _array("double", "mc2fmu_M_val", M_val),
        _array("double", "mc2fmu_f_g", model.f_g, comment="f = f_g + f_B u + sum_i u_i f_C[i] x"),
        _array("double", "mc2fmu_f_B", model.f_B.reshape(n_x, n_u).ravel() if n_u else [], comment="f_B, row-major (NX x NU)"),
        _array("int", "mc2fmu_C_row", C_row, per_line=16, comment="f_C[i], compressed sparse rows, one block of NX + 1 per input"),
        _array("int", "mc2fmu_C_col", C_col, per_line=16),
        _array("double", "mc2fmu_C_val", C_val),
        _array("double", "mc2fmu_phys_start", parameter_vector(artifact.mechanism),
               comment="the physical parameters' start values (NPHYS): per body mass, com x y z, inertia xx yy zz "
               "xy xz yz; gravity x y z; per spring stiffness, damping, rest length.  From them mc2fmu_physics_apply "
               "forms the output layer folded in (NH = last hidden width): A = W_L^T S M S W_L = G^T G "
               "(G: NK x NH) and g = W_L^T S f_g"),
        _array("double", "mc2fmu_B_h", B_h.ravel() if n_u else [], comment="B = W_L^T S f_B, row-major (NH x NU)"),
        _array("int", "mc2fmu_C_off", C_off, per_line=16,
               comment="C_i = W_L^T S f_C[i] S W_L = L_i R_i of rank k_i: rows C_off[i] .. C_off[i + 1] - 1 of CR, CL"),
        _array("double", "mc2fmu_CR_h", [v for _, R in C_lr for v in R.ravel()], comment="R_i, row-major (k_i x NH)"),
        _array("double", "mc2fmu_CL_h", [v for L, _ in C_lr for v in L.T.ravel()],
               comment="L_i^T, row-major (k_i x NH)"),
        _array("double", "mc2fmu_c_h", [v for k in range(n_u) for v in c_h[k]],
               comment="c_i = W_L^T S f_C[i] (x_mean + S b_L), one NH block per input"),
    ]
    if n_s:
        arrays += [
            _array("double", "mc2fmu_P_h", P_h.ravel(), comment="springs (NS) folded like the output layer: "
                   "d_s = P_s h + p_s, P_s = D_s S W_L (3 x NH, row-major)"),
            _array("double", "mc2fmu_p_h", p_h.ravel(), per_line=3, comment="p_s = D_s (x_mean + S b_L) + e_s"),
        ]
    if laws:
        law_of = [-1] * n_s
        for k, law in enumerate(laws):
            law_of[law.spring] = k
        arrays += [
            _array("int", "mc2fmu_law_of_spring", law_of, per_line=16, comment="recorded springs' learned laws "
                   "(NLAW): the law of spring s, -1 for a linear spring"),
        ]
    if node is not None:
        arrays += [
            _array("int", "mc2fmu_node_width", net.widths, per_line=16, comment="node network: layer widths"),
            _array("double", "mc2fmu_node_W", [v for W in net.weights for v in np.asarray(W).T.ravel()],
                   comment="node network: W^T per layer, row-major (in x out)"),
            _array("double", "mc2fmu_node_b", [v for b in net.biases for v in np.asarray(b).ravel()],
                   comment="node network: b per layer"),
        ]
        for name in ("q_mean", "q_scale", "qd_mean", "qd_scale", "u_mean", "u_scale", "a_mean", "a_scale"):
            arrays.append(_array("double", f"mc2fmu_node_{name}", np.asarray(getattr(sc, name)).ravel(),
                                 comment="node normalisation: features (v - mean) / scale, qdd = out * a_scale + a_mean"
                                 if name == "q_mean" else ""))
    if lpca is not None:
        arrays += [
            _array("double", "mc2fmu_lpca_centroids", rom.centroids.ravel(), comment="local-PCA clusters (K): centroids mu_i (K x NX)"),
            _array("double", "mc2fmu_lpca_bases", rom.bases.ravel(), comment="bases V_i, row-major NX x R per cluster"),
            _array("double", "mc2fmu_lpca_M", rom.M.ravel(), comment="M_i = V_i^T M V_i (R x R per cluster)"),
            _array("double", "mc2fmu_lpca_K", rom.K.ravel(), comment="K_i (R x R, symmetric PSD)"),
            _array("double", "mc2fmu_lpca_c", rom.c.ravel(), comment="c_i (R)"),
            _array("double", "mc2fmu_lpca_D", rom.D.ravel(), comment="D_i (R x R)"),
            _array("double", "mc2fmu_lpca_P", rom.P.ravel(), comment="P_i: the springs' energy at the centroid"),
            _array("double", "mc2fmu_lpca_radius", rom.radius.ravel(), comment="R_i: the cluster's extent (training samples' "
                   "largest distance from mu_i)"),
        ]
        if chart.encoder is None:
            arrays += [
                _array("double", "mc2fmu_enc_E", chart.E.ravel(), comment="the chart's linear encoder q = E x + e0 (NQ x NX)"),
                _array("double", "mc2fmu_enc_e0", chart.e0.ravel()),
            ]
        else:
            arrays += [
                _array("int", "mc2fmu_enc_width", enc.widths, per_line=16, comment="the chart's encoder: layer widths"),
                _array("double", "mc2fmu_enc_W", [v for W in enc.weights for v in np.asarray(W).T.ravel()],
                       comment="encoder: W^T per layer, row-major (in x out)"),
                _array("double", "mc2fmu_enc_b", [v for b in enc.biases for v in np.asarray(b).ravel()]),
                _array("double", "mc2fmu_enc_x_mean", chart.enc_x_mean, comment="encoder input (x - mean) / scale"),
                _array("double", "mc2fmu_enc_x_scale", chart.enc_x_scale),
            ]
    arrays += [
        _array("int", "mc2fmu_body_offset", [b.offset for b in bodies], per_line=16, comment="bodies: first NC index, L_b, COM"),
        _array("double", "mc2fmu_body_length", [b.length for b in bodies]),
        _array("double", "mc2fmu_body_com", [c for b in bodies for c in b.com], per_line=3),
        _array("double", "mc2fmu_mass_check_q", mass_check_q.ravel(), comment="configurations (NCHECK x NQ) where "
               "a change of the physical parameters must leave the reduced mass matrix regular"),
        _strings("mc2fmu_body_names", [b.name for b in bodies]),
        _strings("mc2fmu_phys_names", parameter_names(artifact.mechanism)),
        _array("double", "mc2fmu_env_lo", env.lower, comment="training envelope of q, qd, u (INFINITY: unbounded)"),
        _array("double", "mc2fmu_env_hi", env.upper),
    ]
    rows = [f"    {{{_c_string(v.name)}, {ROLES[v.role]}, {v.index}, {_c_double(v.start if v.start is not None else 0.0)}}}"
            for v in variables]
    arrays.append(f"/* the variables in value-reference order (mc2fmu.fmu.description.fmu_variables) */\n"
                  f"static const mc2fmu_variable mc2fmu_variables[{len(variables)}] = {{\n" + ",\n".join(rows) + "\n};")
    return render("native/mc2fmu_model.h.in",
        model_name=artifact.mechanism.name, mc2fmu_version=__version__,
        defines="\n".join(f"#define {k} {v}" for k, v in defines.items()), arrays="\n\n".join(arrays))


def render_motion(artifact, variables) -> str:
    """``mc2fmu_motion.h``: the motion outputs' C.  :func:`mc2fmu.models.motion.body_outputs`
    and :func:`~mc2fmu.models.motion.spring_energy` printed once each (the code's size does not
    grow with the bodies), run per body and per spring by ``MC2FMU_(motion)``, which sums the
    energies in :func:`~mc2fmu.models.motion.motion_outputs`' order; the springs' maps ``d = D
    x + e`` as data.  An empty stub when the FMU has no motion outputs."""
    head = ("/* mc2fmu_motion.h: the motion outputs of the mc2fmu model '{name}' (body velocities, angular "
            "velocities,\n   kinetic and potential energy), printed by mc2fmu {version} from "
            "mc2fmu/models/motion.py; do not edit.\n   Included by mc2fmu_dynamics.h for each scalar type "
            "(mc2fmu_real) when MC2FMU_NMOTION > 0. */\n").format(name=artifact.mechanism.name, version=__version__)
    if not any(v.role == "motion" for v in variables):
        return head
    springs = manifold_model(artifact).springs
    n_s = len(springs.D)
    rows, cols, vals = _csr(springs.D.reshape(3 * n_s, springs.D.shape[-1]))
    data = ["#ifndef MC2FMU_MOTION_DATA", "#define MC2FMU_MOTION_DATA",
            "/* spring s, axis a: d = e + sum D x over its row 3 s + a (CSR) */"]
    if n_s:
        data += [_array("int", "mc2fmu_motion_row", rows, per_line=16), _array("int", "mc2fmu_motion_col", cols or [0],
                                                                                per_line=16),
                 _array("double", "mc2fmu_motion_val", vals or [0.0]), _array("double", "mc2fmu_motion_e",
                                                                           springs.e.ravel())]
    data.append("#endif")
    body, spring = motion_parts()
    code = [head, "\n".join(data), "",
            "/* one body (mc2fmu.models.motion.body_outputs): x, xd its 12 coordinates and rates, mass its point "
            "mass block\n   (mc2fmu_mass.h, formed with the physics), g gravity, geo its point length and layout centre "
            "of mass;\n   out: vx vy vz wx wy wz, its kinetic energy, gravity's potential of it */",
            "MC2FMU_STATIC void MC2FMU_(motion_body)(const mc2fmu_real *x, const mc2fmu_real *xd, const double *mass, "
            "const double *g,\n                                       const double *geo, mc2fmu_real *out) {",
            emit_c(body), "}", ""]
    if n_s:
        code += ["/* one spring's elastic energy (mc2fmu.models.motion.spring_energy): d its vector, ks = (k, L0) */",
                 "MC2FMU_STATIC mc2fmu_real MC2FMU_(motion_spring)(const mc2fmu_real *d, const double *ks) {",
                 "    mc2fmu_real out[1];", emit_c([spring]), "    return out[0];", "}", ""]
    code += [
            "/* every motion output (mc2fmu.models.motion.motion_outputs) */",
            "MC2FMU_STATIC void MC2FMU_(motion)(const mc2fmu_real *x, const mc2fmu_real *xd, const double *theta, "
            "const double *mass,\n                                  mc2fmu_real *out) {",
            "    mc2fmu_real kinetic = 0.0, potential = 0.0, v[8];",
            "    int b, k;",
            "    for (b = 0; b < MC2FMU_NB; b++) {",
            "        const int o = mc2fmu_body_offset[b];",
            "        double geo[4];",
            "        geo[0] = mc2fmu_body_length[b];",
            "        for (k = 0; k < 3; k++) geo[1 + k] = mc2fmu_body_com[3 * b + k];",
            "        MC2FMU_(motion_body)(x + o, xd + o, mass + MC2FMU_MASS_VALUES * b, theta + MC2FMU_PHYS_GRAVITY, "
            "geo, v);",
            "        for (k = 0; k < 6; k++) out[6 * b + k] = v[k];",
            "        kinetic += v[6];",
            "        potential += v[7];",
            "    }"]
    if n_s:
        code += ["    for (b = 0; b < MC2FMU_NS; b++) {",
                 "        mc2fmu_real d[3];",
                 "        double ks[2];",
                 "        int a;",
                 "        for (a = 0; a < 3; a++) {",
                 "            mc2fmu_real acc = mc2fmu_motion_e[3 * b + a];",
                 "            for (k = mc2fmu_motion_row[3 * b + a]; k < mc2fmu_motion_row[3 * b + a + 1]; k++)",
                 "                acc += mc2fmu_motion_val[k] * x[mc2fmu_motion_col[k]];",
                 "            d[a] = acc;",
                 "        }",
                 "        ks[0] = theta[MC2FMU_PHYS_SPRINGS + 3 * b];",
                 "        ks[1] = theta[MC2FMU_PHYS_SPRINGS + 3 * b + 2];",
                 "        potential += MC2FMU_(motion_spring)(d, ks);"]
        if springs.laws is not None and len(springs.laws):  # mc2fmu.models.motion.law_energy (mc2fmu_laws.h)
            code += ["        if (mc2fmu_law_of_spring[b] >= 0) potential += MC2FMU_(law_potential)(mc2fmu_law_of_spring[b], d);"]
        code += ["    }"]
    code += ["    out[6 * MC2FMU_NB] = kinetic;", "    out[6 * MC2FMU_NB + 1] = potential;", "}", ""]
    return "\n".join(code)


def render_mass(artifact) -> str:
    """``mc2fmu_mass.h``: a body's point mass block, ``mc2fmu_body_mass(th, geo, out)``, printed
    from :func:`mc2fmu.mechanics.parameters.body_mass_entries` (the text every target forms the
    mass matrix from); ``mc2fmu_physics_form`` runs it per body when the parameters are set."""
    index = {e: k for k, e in enumerate(MASS_ENTRIES)}
    head = ("/* mc2fmu_mass.h: a body's point mass block of the mc2fmu model '{name}', printed by mc2fmu {version} "
            "from\n   mc2fmu/mechanics/parameters.py (body_mass_entries); do not edit. */\n"
            ).format(name=artifact.mechanism.name, version=__version__)
    return "\n".join([
        head, f"#define MC2FMU_MASS_VALUES {MASS_VALUES} /* the block's distinct entries, then its row sums */",
        f"#define MC2FMU_MASS_ROWSUMS {len(MASS_ENTRIES)} /* where the row sums start */",
        "/* entry (i, j) of the block: its index in mc2fmu_body_mass's out */",
        "static const int mc2fmu_mass_entry[4][4] = {"
        + ", ".join("{" + ", ".join(str(index[min(i, j), max(i, j)]) for j in range(4)) + "}" for i in range(4)) + "};", "",
        "/* th: the body's parameter slots (mass, com, inertia), geo: its point length and the centre of mass its "
        "points\n   were placed about; out: the entries " + " ".join(f"({i},{j})" for i, j in MASS_ENTRIES)
        + " and the row sums */",
        "static void mc2fmu_body_mass(const double *th, const double *geo, double *out) {",
        emit_c(traced_mass(), ctype="double"), "}", ""])


def _printed_head(artifact, header: str, what: str, source: str, when: str = "") -> str:
    """The opening comment of a header printed per model from ``source`` and included by
    mc2fmu_dynamics.h for each scalar type (``when``: the condition of its inclusion)."""
    return (f"/* {header}: {what} of the mc2fmu model '{artifact.mechanism.name}', printed by mc2fmu {__version__} "
            f"from\n   {source}; do not edit.  Included by mc2fmu_dynamics.h for each scalar type "
            f"(mc2fmu_real){when}. */\n")


def render_laws(artifact) -> str:
    """``mc2fmu_laws.h``: the recorded springs' learned laws, ``MC2FMU_(law_elastic)(k, l)`` (the
    elastic tension ``g``) and ``MC2FMU_(law_damping)(k, l, ldot)`` (the learned damping ``h -
    c``) of law ``k``, printed from :func:`mc2fmu.models.spring_laws.traced` (the run-time
    model's own evaluation, its weights constants), and ``MC2FMU_(law_potential)(k, d)``, the
    motion outputs' elastic potential of law ``k`` at its spring's vector ``d``, printed from
    :func:`mc2fmu.models.motion.traced_law_energy`.  An empty stub without laws."""
    head = _printed_head(artifact, "mc2fmu_laws.h", "the learned spring laws", "mc2fmu/models/spring_laws.py")
    sp = manifold_model(artifact).springs
    laws = list(sp.laws.laws) if sp.laws is not None else []
    if not laws:
        return head
    graphs = [law_traced(law) for law in laws]
    code = [head]
    for fn, args, which in (("law_elastic", "mc2fmu_real l0", 0), ("law_damping", "mc2fmu_real l0, mc2fmu_real ldot0", 1)):
        code += [f"MC2FMU_STATIC mc2fmu_real MC2FMU_({fn})(int k, {args}) {{",
                 "    mc2fmu_real l[1], ldot[1], out[1];",
                 "    l[0] = l0;", "    ldot[0] = " + ("ldot0;" if which else "0.0;"), "    out[0] = 0.0;"]
        code.append("    (void)l;\n    (void)ldot;")
        code.append("    switch (k) {")
        for k, (law, g) in enumerate(zip(laws, graphs)):
            code += [f"    case {k}: {{ /* spring {law.spring} */", emit_c([g[which]], indent="        "), "        break;",
                     "    }"]
        code += ["    }", "    return out[0];", "}", ""]
    # the motion outputs' potential energy of law k at the spring's vector d: printed from
    # mc2fmu.models.motion.traced_law_energy (the learnt potential, or the quadrature of a
    # "tension" law's g, g by law_elastic)
    quadrature = any(law.form == "tension" for law in laws)
    code += ["MC2FMU_STATIC MC2FMU_UNUSED mc2fmu_real MC2FMU_(law_potential)(int k, const mc2fmu_real *d) {",
             f"    mc2fmu_real nodes[{POTENTIAL_NODES}], g[{POTENTIAL_NODES}], out[1];" if quadrature
             else "    mc2fmu_real out[1];"]
    code += ["    int i;"] if quadrature else []
    code += ["    out[0] = 0.0;", "    switch (k) {"]
    for k, law in enumerate(laws):
        nodes, total = motion_law_energy(law)
        code += [f"    case {k}: {{ /* spring {law.spring} */"]
        if nodes:
            code += ["        {", emit_c(nodes, out="nodes", indent="            "), "        }",
                     f"        for (i = 0; i < {POTENTIAL_NODES}; i++) g[i] = MC2FMU_(law_elastic)(k, nodes[i]);"]
        code += ["        {", emit_c([total], indent="            "), "        }", "        break;", "    }"]
    code += ["    }", "    return out[0];", "}", ""]
    return "\n".join(code)


def render_terms(artifact) -> str:
    """``mc2fmu_terms.h``: the identified terms' C, ``MC2FMU_(identified)(q, v, u, rhs)`` adding
    ``Xi^T lambda(q, v, u)`` to ``rhs``, printed from :func:`mc2fmu.models.terms.traced` (the
    run-time model's own :func:`~mc2fmu.models.terms.identified_force`), of the terms with a
    nonzero coefficient (as the pruned library the Modelica export and the header's ``NT``
    count: a zero-coefficient term's factor is never evaluated, so one that would not be finite
    cannot make the force NaN).  Only the head without identified terms."""
    head = _printed_head(artifact, "mc2fmu_terms.h", "the identified terms", "mc2fmu/models/terms.py",
                         "\n   when MC2FMU_NT > 0")
    model = manifold_model(artifact)
    lib = active_terms(model.library)
    if lib is None:
        return head
    body = emit_c(terms_traced(lib, artifact.dof, artifact.n_u, ("q", "v", "u")), out="f")
    return head + "\n".join([
        "/* rhs += Xi^T lambda(q, v, u) (mc2fmu.models.terms.identified_force) */",
        "MC2FMU_STATIC void MC2FMU_(identified)(const mc2fmu_real *q, const mc2fmu_real *v, const mc2fmu_real *u, "
        "mc2fmu_real *rhs) {",
        "    mc2fmu_real f[MC2FMU_NQ];",
        "    int j;",
        "    (void)q; (void)v; (void)u;",
        body,
        "    for (j = 0; j < MC2FMU_NQ; j++) rhs[j] += f[j];",
        "}", ""])


def render_envelope(artifact) -> str:
    """``mc2fmu_envelope.h``: the training envelope's channel excursions and distance,
    ``MC2FMU_(envelope_channels)(v, ex)`` and ``MC2FMU_(envelope)(v)`` of the finite channels
    ``v = (q, qd, u)``, printed from :func:`mc2fmu.models.envelope.traced`; the complex-step
    twin gives the distance's directional derivative."""
    channels, distance = envelope_traced(artifact.envelope)
    head = _printed_head(artifact, "mc2fmu_envelope.h", "the training envelope", "mc2fmu/models/envelope.py")
    return head + "\n".join([
        "/* ex[c] = channel c's excursion beyond the envelope, in training spans (mc2fmu.models.envelope.excursions) */",
        "MC2FMU_STATIC void MC2FMU_(envelope_channels)(const mc2fmu_real *v, mc2fmu_real *ex) {",
        "    (void)v;", emit_c(channels, out="ex"), "}", "",
        "/* the distance outside the envelope: the largest excursion, 0 inside (mc2fmu.models.envelope.distance_of) */",
        "MC2FMU_STATIC mc2fmu_real MC2FMU_(envelope)(const mc2fmu_real *v) {",
        "    mc2fmu_real out[1];", "    (void)v;", emit_c([distance], out="out"), "    return out[0];", "}", ""])


def render_step(artifact) -> str:
    """``mc2fmu_step.h``: ``MC2FMU_(step_map)(T, q_prev, q, dt, q_next)``, the model's one-step
    map (``q_{i+1}`` from ``q_{i-1}, q_i``, ``T`` evaluated at ``q_i, u_i``), printed from its
    :class:`~mc2fmu.models.step_maps.StepMap` (what training and ``simulate`` run), each of its
    calls of the acceleration a call of ``MC2FMU_(acceleration)(T, v, a)``; for a node model
    also ``MC2FMU_(node_step)(q, qd, u, dt, q_next, qd_next)``, printed from
    :func:`mc2fmu.models.node.rk4_step`."""
    model = manifold_model(artifact)
    step_map = get_step_map(model.step_map_name)
    node = node_model(artifact) is not None
    head = _printed_head(artifact, "mc2fmu_step.h", f"the one-step map '{step_map.name}'" + (" and the RK4 step" if node else ""),
                         "mc2fmu/models/step_maps.py" + (" and mc2fmu/models/node.py" if node else ""))
    m = artifact.dof
    leaf = lambda name, i: "dt" if name == "dt" else f"{name}[{i}]"  # noqa: E731  (dt is a scalar argument)
    accel = CallTrace("a")
    obj = lambda xs: np.array(xs, dtype=object)  # noqa: E731  (element-wise arithmetic on expressions)
    q_next = step_map.step(lambda v: obj(accel(list(v))), obj(expr_inputs("q_prev", m)), obj(expr_inputs("q", m)),
                           expr_inputs("dt", 1)[0])
    body = emit_c_calls(list(q_next), accel, lambda k: f"MC2FMU_(acceleration)(T, v{k}, a{k});", arg="v", out="q_next",
                        leaf=leaf)
    code = [head, f"/* q_{{i+1}} by the step map '{step_map.name}': {step_map.description} */",
            "MC2FMU_STATIC void MC2FMU_(step_map)(MC2FMU_(terms) *T, const mc2fmu_real *q_prev, const mc2fmu_real *q, "
            "double dt, mc2fmu_real *q_next) {", "    (void)T; (void)q_prev; (void)q; (void)dt; /* a map may not read them all */",
            body, "}", ""]
    if node:
        # the neural ODE's step: mc2fmu.models.node.rk4_step, each evaluation of f a call of the
        # C's MC2FMU_(node_acceleration)(q, qd, u, a) on the stage's position and velocity
        accel = CallTrace("a", n_out=m)
        q_next, qd_next = rk4_step(lambda p, v, u: obj(accel([*p, *v])), obj(expr_inputs("q", m)),
                                   obj(expr_inputs("qd", m)), None, expr_inputs("dt", 1)[0])
        body = emit_c_calls([*q_next, *qd_next], accel, lambda k: f"MC2FMU_(node_acceleration)(s{k}, s{k} + {m}, u, a{k});",
                            arg="s", out=lambda k: f"q_next[{k}]" if k < m else f"qd_next[{k - m}]", leaf=leaf)
        code += ["/* one classical Runge-Kutta step of (q, qd)' = (qd, f(q, qd, u)), u held (mc2fmu.models.node.rk4_step) */",
                 "MC2FMU_STATIC void MC2FMU_(node_step)(const mc2fmu_real *q, const mc2fmu_real *qd, const mc2fmu_real *u, "
                 "double dt, mc2fmu_real *q_next, mc2fmu_real *qd_next) {", body, "}", ""]
    return "\n".join(code)


def render_poses(artifact) -> str:
    """``mc2fmu_poses.h``: ``MC2FMU_(pose_body)(p, g, pose)``, one body's origin and quaternion
    from its 12 coordinates ``p`` and ``g = (L, com)``, printed from
    :func:`mc2fmu.models.poses.traced` (the same text the python backend prints), run per
    body by ``MC2FMU_(poses)``."""
    head = _printed_head(artifact, "mc2fmu_poses.h", "a body's pose", "mc2fmu/models/poses.py")
    return head + "\n".join([
        "/* [x, y, z, qw, qx, qy, qz] of one body: p its 12 natural coordinates, g its length and centre-of-mass offset */",
        "MC2FMU_STATIC void MC2FMU_(pose_body)(const mc2fmu_real *p, const double *g, mc2fmu_real *pose) {",
        emit_c(poses_traced(), out="pose"), "}", ""])


def render_solve(artifact) -> str:
    """``mc2fmu_solve.h``: ``MC2FMU_(cholesky_solve)(A, b, y)``, ``y = A^-1 b`` for the small
    SPD ``A`` (NQ x NQ, row-major), printed from :func:`mc2fmu.models.manifold.cholesky_steps`
    (the unrolled factorisation numpy, torch and CasADi run: the same operations in the same
    order)."""
    m = artifact.dof
    A, b = expr_inputs("A", m * m), expr_inputs("b", m)
    y = cholesky_steps(lambda i, j: A[i * m + j], lambda i: b[i], m, expr_sqrt)
    head = _printed_head(artifact, "mc2fmu_solve.h", "the reduced systems' solve", "mc2fmu/models/manifold.py")
    return head + "\n".join([
        "/* y = A^-1 b, A small SPD: the unrolled Cholesky of mc2fmu.models.manifold.cholesky_steps */",
        "MC2FMU_STATIC void MC2FMU_(cholesky_solve)(const mc2fmu_real *A, const mc2fmu_real *b, mc2fmu_real *y) {",
        emit_c(y, out="y"), "}", ""])


# ------------------------------------------------------------------ building


def write_sources(artifact, variables, folder: Path, *, fmi_version: int, token: str, ident: str,
                  interface: str) -> list[str]:
    """Write the C sources into ``folder``; returns the file names (the compiled one first)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mc2fmu_model.h").write_text(render_model_header(artifact, variables, token=token, ident=ident,
                                                               interface=interface))
    (folder / "mc2fmu_motion.h").write_text(render_motion(artifact, variables))
    (folder / "mc2fmu_mass.h").write_text(render_mass(artifact))
    (folder / "mc2fmu_laws.h").write_text(render_laws(artifact))
    (folder / "mc2fmu_terms.h").write_text(render_terms(artifact))
    (folder / "mc2fmu_envelope.h").write_text(render_envelope(artifact))
    (folder / "mc2fmu_solve.h").write_text(render_solve(artifact))
    (folder / "mc2fmu_poses.h").write_text(render_poses(artifact))
    (folder / "mc2fmu_step.h").write_text(render_step(artifact))
    names = [GLUE[fmi_version], *SHARED_SOURCES]
    for name in names:
        shutil.copyfile(template_path(f"native/{name}"), folder / name)
    return [names[0], "mc2fmu_model.h", "mc2fmu_motion.h", "mc2fmu_mass.h", "mc2fmu_laws.h", "mc2fmu_terms.h",
            "mc2fmu_envelope.h", "mc2fmu_solve.h", "mc2fmu_poses.h", "mc2fmu_step.h", *names[1:]]


def finite_math_problem(platform: Platform | None = None) -> str | None:
    """Why the compiler and flags of ``platform`` cannot build an FMU (None: they can): they
    assume finite maths (``__FINITE_MATH_ONLY__`` 1: ``-ffinite-math-only``, ``-ffast-math``,
    ``-Ofast``, or the same inside a ``$CC`` wrapper), under which every NaN and infinity check
    of the FMU compiles away and a NaN input is taken with OK.  Asked of the compiler itself."""
    platform = platform or PLATFORMS[host_name()]
    cmd = [compiler(platform), *cflags(), *platform.flags, "-dM", "-E", "-x", "c", "-"]
    try:
        proc = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the C compiler for {platform.name} cannot be run ({exc})"
    if proc.returncode != 0:
        return None  # the build reports the compiler's own error
    if re.search(r"^#define __FINITE_MATH_ONLY__ 1\s*$", proc.stdout, re.M):
        return (f"the C compiler and flags for {platform.name} assume finite maths (__FINITE_MATH_ONLY__ is 1: "
                f"-ffinite-math-only, -ffast-math or -Ofast, in $MC2FMU_CFLAGS or a $CC wrapper; flags "
                f"{' '.join(cflags())}): the FMU's checks for NaN and infinite values would be compiled away; "
                "remove those flags")
    return None


def compile_library(source: Path, out: Path, *, extra: list[str] | None = None, platform: Platform | None = None,
                    program: bool = False) -> list[str]:
    """Compile one translation unit into a shared library (or, ``program``, an executable) for
    ``platform`` (default: this machine's); returns the compiler's warnings."""
    platform = platform or PLATFORMS[host_name()]
    cmd = [compiler(platform), *cflags(), *([] if program else ["-shared"]), *platform.flags, "-I", str(source.parent),
           "-I", str(fmi_headers()), *(extra or []), str(source), "-o", str(out), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        first = "\n".join(proc.stderr.strip().splitlines()[:15])
        raise ExportError(f"{source.name}: the C compiler failed (exit {proc.returncode}, building for "
                          f"{platform.name}):\n{first}\n"
                          f"command: {' '.join(cmd)}")
    warnings = [line for line in proc.stderr.splitlines() if "warning:" in line]
    for w in warnings:
        log.warning("C compiler (%s): %s", platform.name, w)
    return warnings


#: the self-check's C functions: record kind -> (function, its outputs (name, size of
#: (dof, n_x, n_bodies, local-PCA r)) in the order of its arguments); mc2fmu_selftest.c reads
#: and writes the same records
SELFTEST_OUTPUTS = {
    0: ("mc2fmu_selftest", (("x", lambda m, nx, nb, r: nx), ("J", lambda m, nx, nb, r: nx * m),
                            ("H", lambda m, nx, nb, r: nx * m * m), ("x_value", lambda m, nx, nb, r: nx),
                            ("qdd", lambda m, nx, nb, r: m), ("q_next", lambda m, nx, nb, r: m),
                            ("pose", lambda m, nx, nb, r: 7 * nb), ("spring", lambda m, nx, nb, r: m))),
    1: ("mc2fmu_selftest_node", (("qdd", lambda m, nx, nb, r: m), ("q_next", lambda m, nx, nb, r: m),
                                 ("qd_next", lambda m, nx, nb, r: m))),
    2: ("mc2fmu_selftest_lpca", (("start", lambda m, nx, nb, r: 1 + 3 * r), ("next", lambda m, nx, nb, r: 1 + 3 * r),
                                 ("observed", lambda m, nx, nb, r: 2 * m))),
    3: ("mc2fmu_selftest_refusals", (("refused", lambda m, nx, nb, r: 2),)),
}

#: the self-check's finite-value probe: what the FMU must refuse (record kind 3's outputs)
REFUSALS = ("a NaN input", "a NaN start value q_start[1]")


def self_check(artifact, sources: Path, work: Path, points: int = 16, fmi_version: int = 2,
               platform: Platform | None = None, records: list[dict] | None = None) -> dict[str, float]:
    """Compile the sources with ``-DMC2FMU_SELFTEST`` for ``platform`` (default: this machine's)
    and compare the C dynamics with the run-time model (decoder value/J/H, rhs, step map; with
    springs also their part of the rhs alone; node and local-PCA models their own step) and the C
    poses with :mod:`mc2fmu.mechanics.rotations` at points spread over the training envelope;
    returns the largest relative difference of each.  This machine's platform is loaded
    in-process; another runs as a program (``mc2fmu_selftest.c``: the FMU's translation unit
    built by that platform's compiler) under its emulator.  ``records``: the points'
    inputs and references (:func:`_selftest_records`), when already made."""
    platform = platform or PLATFORMS[host_name()]
    records = records if records is not None else _selftest_records(artifact, points)
    if platform.native:
        lib_path = work / f"selftest-{platform.name}{platform.suffix}"
        compile_library(sources / GLUE[fmi_version], lib_path, extra=["-DMC2FMU_SELFTEST"], platform=platform)
        outputs = _run_selftest_library(artifact, lib_path, records)
    else:
        outputs = _run_selftest_program(artifact, sources, work, fmi_version, platform, records)
    _check_refusals(records, outputs, platform)
    worst, excess = _compare_selftest(artifact, records, outputs)
    for name, err in worst.items():
        log.info("native %s (%s): max |C - reference| = %.1e (relative)", name, platform.name, err)
        if not excess[name] <= 1.0:
            raise ExportError(f"the generated C code's {name} on {platform.name} differs from the reference by "
                              f"{err:.2e} ({excess[name]:.1f}x its tolerance: {TOLERANCE:g}, or for the "
                              f"accelerations {SOLVE_ROUNDOFF:g} x the reduced mass matrix's condition number where "
                              f"that is larger, for the local-PCA start its solve's {START_TOLERANCE:g}); this is a bug in the native backend, please report it with the model")
    return worst


def _check_refusals(records: list[dict], outputs: list[dict[str, np.ndarray]], platform: Platform) -> None:
    """The binary refuses a NaN input and a NaN start value (record kind 3): a build whose
    compiler assumed finite maths despite :func:`finite_math_problem` (a wrapper, a pragma, a
    flag it did not show) is caught here, before its FMU could run on NaN with OK."""
    for rec, out in zip(records, outputs, strict=True):
        if rec["kind"] != 3:
            continue
        accepted = [what for what, ok in zip(REFUSALS, out["refused"]) if ok != 1.0]
        if accepted:
            raise ExportError(f"the binary built for {platform.name} accepts {' and '.join(accepted)} with OK: its "
                              "compiler removed the FMU's finite-value checks (it assumes finite maths: "
                              "-ffinite-math-only, -ffast-math or -Ofast, in MC2FMU_CFLAGS, CFLAGS or a CC wrapper); "
                              "build without them")


def _selftest_sizes(artifact) -> tuple[int, int, int, int]:
    lpca = local_pca_model(artifact)
    return artifact.dof, artifact.layout.size, len(artifact.layout.bodies), lpca.rom.r if lpca is not None else 0


def _selftest_records(artifact, points: int) -> list[dict]:
    """The self-check's calls: per point, the inputs of each C function (record kinds of
    :data:`SELFTEST_OUTPUTS`) and what the run-time model gives for its outputs."""
    from ...models.charted import chart_velocity
    from ...models.local_linear import LocalState

    n_u = artifact.n_u
    model, node, lpca = manifold_model(artifact), node_model(artifact), local_pca_model(artifact)
    springs = len(model.springs) > 0
    rng = np.random.default_rng(3)
    records = []
    for p in sample_points(artifact.envelope, model, points, seed=7):
        q, qd, qp = (np.ascontiguousarray(p[k][0], dtype=np.float64) for k in ("q", "qd", "q_prev"))
        u = np.ascontiguousarray(p["u"][0] if n_u else np.zeros(1), dtype=np.float64)
        uu = p["u"]
        rx, rJ, rH = (a[0] for a in model.decode_jh(q[None]))
        xv = model.decode(q[None])[0]
        ref = {"x": rx, "J": rJ.ravel(), "H": rH.ravel(), "x_value": xv,
               "qdd": model.acceleration(q[None], qd[None], uu)[0], "q_next": model.step(qp[None], q[None], uu)[0]}
        with np.errstate(invalid="ignore", divide="ignore"):
            terms = model.terms(q[None], uu)
            if springs:  # J^T f_spring(x, J qd) alone: a small spring force is checked on its own scale
                ref["spring"] = spring_force(terms, qd[None])[0]
            Mm = np.asarray(terms.Mm[0])
            condition = float(np.linalg.cond(Mm)) if np.isfinite(Mm).all() else 1.0
        records.append({"kind": 0, "inputs": [q, qd, u, qp], "ref": ref, "condition": condition})
        if node is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                ref_q, ref_qd = node.dynamics.step(q[None], qd[None], uu)
                acc = node.acceleration(q[None], qd[None], uu)[0]
            records.append({"kind": 1, "inputs": [q, qd, u], "ref": {"qdd": acc, "q_next": ref_q[0],
                                                                     "qd_next": ref_qd[0]}})
        if lpca is not None:
            # the start from (q, qd), one step from the projection of (x, xd) (their natural
            # coordinates) into a random cluster (usually not the nearest: the energy-preserving
            # switch runs), and the chart's reading of the result, against models.local_linear
            rom = lpca.rom
            ref0 = lpca.start(q, qd, uu[0])
            i = int(rng.integers(rom.clusters))
            xd0 = rJ @ qd
            lq, lqd = rom.project(i, rx), rom.bases[i].T @ xd0
            s = LocalState(i, lq, lqd, rom.acceleration(i, lq, lqd, uu[0]))
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                ref1 = rom.step(s, uu[0])
                x1, xd1 = rom.decode(ref1.cluster, ref1.q), rom.bases[ref1.cluster] @ ref1.qd
                q1 = lpca.chart.encode(x1[None])
                qd1 = chart_velocity(lpca.chart, q1, xd1[None])
            packed = np.concatenate([[float(ref1.cluster)], ref1.q, ref1.qd, ref1.qdd])
            records.append({"kind": 2, "inputs": [q, qd, u, np.array([float(i)]), *(np.ascontiguousarray(a, dtype=np.float64)
                                                                                     for a in (s.q, s.qd, s.qdd))],
                            "ref": {"start": ref0, "next": packed, "observed": np.concatenate([q1[0], qd1[0]])}})
    q, qd, u = records[0]["inputs"][:3]
    records.append({"kind": 3, "inputs": [q, qd, u, np.array([np.nan])], "ref": {"refused": np.ones(2)}})
    return records


def _empty_outputs(artifact, kind: int) -> dict[str, np.ndarray]:
    sizes = _selftest_sizes(artifact)
    return {name: np.zeros(size(*sizes)) for name, size in SELFTEST_OUTPUTS[kind][1]}


def _run_selftest_library(artifact, lib_path: Path, records: list[dict]) -> list[dict[str, np.ndarray]]:
    """Each record's outputs from the self-check library loaded in this process."""
    lib = ctypes.CDLL(str(lib_path))

    def ptr(a):
        return np.ascontiguousarray(a, dtype=np.float64).ctypes.data_as(ctypes.POINTER(ctypes.c_double))

    results = []
    for rec in records:
        fn = getattr(lib, SELFTEST_OUTPUTS[rec["kind"]][0])
        out = _empty_outputs(artifact, rec["kind"])
        args = list(rec["inputs"])
        if rec["kind"] == 2:
            args[3] = ctypes.c_int(int(args[3][0]))
        elif rec["kind"] == 3:  # the program reads (q, qd, u) first for every record; the function takes the value
            args = args[3:]
        arrays = [a if isinstance(a, ctypes.c_int) else np.ascontiguousarray(a, dtype=np.float64) for a in args]
        fn.restype = ctypes.c_int if rec["kind"] == 0 else None
        fn(*(a if isinstance(a, ctypes.c_int) else ptr(a) for a in arrays), *(ptr(v) for v in out.values()))
        results.append(out)
    return results


def _run_selftest_program(artifact, sources: Path, work: Path, fmi_version: int, platform: Platform,
                          records: list[dict]) -> list[dict[str, np.ndarray]]:
    """Each record's outputs from ``mc2fmu_selftest.c`` built for ``platform`` and run under its
    emulator."""
    runner = emulator_of(platform)
    if runner is None:
        raise ExportError(f"{platform.name}: checking its binary needs {platform.emulator[0]}, which is not installed; "
                          f"install it (`apt-get install {platform.emulator_package}`) or leave {platform.name} out "
                          "of --platforms")
    main = work / "mc2fmu_selftest.c"
    shutil.copyfile(template_path("native/mc2fmu_selftest.c"), main)
    exe = work / f"selftest-{platform.name}{'.exe' if platform.os == 'windows' else ''}"
    compile_library(main, exe, extra=["-DMC2FMU_SELFTEST", f'-DMC2FMU_GLUE="{GLUE[fmi_version]}"', "-I", str(sources)],
                    platform=platform, program=True)
    blob = bytearray()
    for rec in records:
        blob += struct.pack("<i", rec["kind"])
        blob += np.concatenate([np.ravel(a) for a in rec["inputs"]]).astype("<f8").tobytes()
    f_in, f_out = work / f"selftest-{platform.name}.in", work / f"selftest-{platform.name}.out"
    f_in.write_bytes(bytes(blob))
    cmd = [*runner, str(exe), str(f_in), str(f_out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=emulator_env(platform), timeout=600)
    except subprocess.TimeoutExpired:
        raise ExportError(f"{platform.name}: the self-check program did not finish in 600 s under "
                          f"{runner[0]}") from None
    if proc.returncode != 0 or not f_out.exists():
        raise ExportError(f"{platform.name}: the self-check program failed under {runner[0]} (exit "
                          f"{proc.returncode}): {proc.stderr.strip()[-800:]}\ncommand: {' '.join(cmd)}")
    sizes = [sum(v.size for v in _empty_outputs(artifact, rec["kind"]).values()) + (rec["kind"] == 0)
             for rec in records]
    raw = f_out.read_bytes()
    if len(raw) != 8 * sum(sizes):
        raise ExportError(f"{platform.name}: the self-check program wrote {len(raw)} bytes where {8 * sum(sizes)} "
                          "were expected")
    data, pos, results = np.frombuffer(raw, dtype="<f8"), 0, []
    for rec, size in zip(records, sizes, strict=True):
        out = _empty_outputs(artifact, rec["kind"])
        start = pos
        for v in out.values():
            v[:] = data[pos:pos + v.size]
            pos += v.size
        pos = start + size  # mc2fmu_selftest's return value follows its outputs
        results.append(out)
    return results


def _rel(got, ref) -> float:
    """max |got - ref| relative to max(1, max |ref|); the same non-finite value on both sides
    (e.g. a barely trained model whose M_m is not positive definite at a point) is agreement,
    any other non-finite difference is not."""
    got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
    same = (np.isnan(got) & np.isnan(ref)) | (np.isinf(ref) & (got == ref))
    if not got.size:
        return 0.0
    scale = max(1.0, float(np.max(np.abs(np.where(same, 0.0, ref)))))
    return float(np.max(np.where(same, 0.0, np.abs(got - ref)))) / scale


def _compare_selftest(artifact, records: list[dict],
                      outputs: list[dict[str, np.ndarray]]) -> tuple[dict[str, float], dict[str, float]]:
    """The largest relative difference of each checked quantity over the records, and the
    largest ratio of a difference to its tolerance (:data:`TOLERANCE`; for the accelerations
    and the step, which solve with the reduced mass matrix, at least :data:`SOLVE_ROUNDOFF`
    times its condition number at the record's point).  The poses against
    :mod:`mc2fmu.mechanics.rotations` applied to the C code's own decoded coordinates, so a
    decoder difference is not counted twice."""
    worst: dict[str, float] = {"decoder": 0.0, "rhs": 0.0, "step": 0.0, "poses": 0.0}
    excess: dict[str, float] = {name: 0.0 for name in worst}

    def note(label: str, err: float, allowed: float = TOLERANCE) -> None:
        worst[label] = max(worst.get(label, 0.0), err)
        excess[label] = max(excess.get(label, 0.0), err / allowed if err == err else np.inf)

    names = {0: {"x": "decoder", "J": "decoder", "H": "decoder", "x_value": "decoder", "qdd": "rhs",
                 "q_next": "step", "spring": "springs"},
             1: {"qdd": "node rhs", "q_next": "node step", "qd_next": "node step"},
             2: {"start": "local-pca start", "next": "local-pca step", "observed": "local-pca outputs"}}
    for rec, out in zip(records, outputs, strict=True):
        if rec["kind"] == 3:  # the refusals: _check_refusals
            continue
        for key, ref in rec["ref"].items():
            label = names[rec["kind"]][key]
            with np.errstate(invalid="ignore"):
                err = _rel(out[key], ref)
            solves = rec["kind"] == 0 and key in ("qdd", "q_next")
            allowed = max(TOLERANCE, SOLVE_ROUNDOFF * rec["condition"]) if solves else TOLERANCE
            if rec["kind"] == 2 and key == "start":
                # the local-PCA start solves encode(V z + mu) = q0 by secant steps while the
                # residual falls, to START_TOLERANCE: two implementations agree to that, not to
                # rounding (measured: the MacPherson's 1.2e-11 where C stopped a step apart)
                allowed = max(allowed, START_TOLERANCE)
            note(label, err, allowed)
        if rec["kind"] == 0:
            origin, rotation = poses_from_nc(artifact.layout, out["x_value"][None])
            ref_pose = np.concatenate([origin[0], matrix_to_quaternion(rotation[0])], axis=1).ravel()
            note("poses", _rel(out["pose"], ref_pose))
    return worst, excess


#: what a binary may load: the C library and libm on Linux, DLLs of every Windows on Windows
SYSTEM_LIBRARIES = {"linux": {"libc.so.6", "libm.so.6"}, "windows": {"kernel32.dll", "msvcrt.dll"}}


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".") if x.isdigit())


def check_binary(binary: Path, platform: Platform, fmi_version: int):
    """Read what ``binary`` links against (:func:`~mc2fmu.fmu.platforms.inspect_binary`) and
    refuse one for another machine, without the FMI functions, or loading more than
    :data:`SYSTEM_LIBRARIES` (e.g. from flags added with $MC2FMU_CFLAGS)."""
    info = inspect_binary(binary.read_bytes(), str(binary))
    problems = []
    if info.machine != platform.machine:
        problems.append(f"it is built for {info.machine}, not {platform.machine}")
    if f"fmi{fmi_version}GetVersion" not in info.exports:
        problems.append(f"it does not export fmi{fmi_version}GetVersion")
    floor = GLIBC_FLOOR.get(platform.name)
    if info.glibc and floor and _version(info.glibc) > _version(floor):
        problems.append(f"it needs glibc {info.glibc}, above the {floor} it is meant to load on (a libc symbol "
                        "the build took from a newer glibc; bind its old version in mc2fmu_native.h)")
    extra = [n for n in info.needed if n.lower() not in SYSTEM_LIBRARIES[platform.os]]
    if extra:
        problems.append(f"it loads {', '.join(extra)}, which a {platform.os} machine may not have (allowed: "
                        f"{', '.join(sorted(SYSTEM_LIBRARIES[platform.os]))}); check $MC2FMU_CFLAGS")
    if problems:
        raise ExportError([f"{platform.name} binary {binary.name}: {p}" for p in problems])
    return info


def build_description(ident: str, source: str) -> bytes:
    """FMI 3 ``sources/buildDescription.xml``: one C99 translation unit."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<fmiBuildDescription fmiVersion="3.0">\n'
            f'  <BuildConfiguration modelIdentifier="{ident}">\n'
            f'    <SourceFileSet language="C99">\n'
            f'      <SourceFile name="{source}"/>\n'
            f'    </SourceFileSet>\n'
            f'    <Library name="m"/>\n'
            f'  </BuildConfiguration>\n'
            f'</fmiBuildDescription>\n').encode()


def export_native(artifact, model_dir: Path, work: Path, out: Path, fmi_version: int = 2,
                  interface: str = "cs", platforms: str | None = None) -> dict[str, Any]:
    """The ``native`` entry of :data:`mc2fmu.capabilities.BACKENDS`; ``platforms``: see
    :func:`mc2fmu.fmu.platforms.resolve` (default: every platform with a toolchain here)."""
    me, cs = interface in ("me", "both"), interface in ("cs", "both")
    manifold_model(artifact)
    kind = capability(artifact.reducer)
    variables = fmu_variables(artifact, model_exchange=me, independent_time=fmi_version == 3,
                              physics=kind.physical_parameters, motion="native" in kind.motion)
    ident = model_identifier(artifact.mechanism.name)
    token = instantiation_token(model_dir, fmi_version, interface, artifact.mechanism)
    sources = work / "sources"
    files = write_sources(artifact, variables, sources, fmi_version=fmi_version, token=token, ident=ident,
                          interface=interface)
    platforms = resolve(platforms)
    problems = [problem for problem in map(finite_math_problem, platforms) if problem]
    if problems:
        raise ExportError(problems)
    records = _selftest_records(artifact, 16)  # the same points and references for every platform

    def build(p: Platform) -> dict[str, Any]:
        binary = work / p.name / f"{ident}{p.suffix}"
        binary.parent.mkdir()
        warnings = compile_library(sources / files[0], binary, platform=p)
        info = check_binary(binary, p, fmi_version)
        checks = self_check(artifact, sources, binary.parent, fmi_version=fmi_version, platform=p, records=records)
        return {"folder": p.folder(fmi_version), "binary": binary, "compiler": compiler(p), "warnings": warnings,
                "max_difference": checks, "needed": info.needed, "glibc": info.glibc, "bytes": binary.stat().st_size}

    # one thread per platform: the compilers and emulators are processes of their own
    with ThreadPoolExecutor(max_workers=max(1, min(len(platforms), os.cpu_count() or 1))) as pool:
        built = dict(zip([p.name for p in platforms], pool.map(build, platforms), strict=True))
    common = dict(
        model_name=artifact.mechanism.name, model_identifier=ident, description=artifact.description,
        generation_tool=f"mc2fmu {__version__} (native backend)", stop_time=artifact.stop_time,
        step_size=artifact.dt, log_categories=LOG_CATEGORIES, co_simulation=cs, model_exchange=me)
    if fmi_version == 2:
        # FMI 2 SourceFiles: the files to compile (C sources only; the headers sit beside them)
        xml = model_description_fmi2(variables, guid=token, source_files=files[:1], **common)
    else:
        xml = model_description_fmi3(variables, instantiation_token=token, **common)
    members = {"modelDescription.xml": xml}
    for name, b in built.items():
        members[f"binaries/{b['folder']}/{ident}{PLATFORMS[name].suffix}"] = b["binary"].read_bytes()
    for name in files:
        members[f"sources/{name}"] = (sources / name).read_bytes()
    if fmi_version == 3:
        members["sources/buildDescription.xml"] = build_description(ident, files[0])
    members.update(artifact_members(model_dir, artifact))
    write_zip(out, members, executable=("binaries/",))
    host = built[platforms[0].name]
    return {"native_max_difference": host["max_difference"], "model_identifier": ident, "instantiation_token": token,
            "compiler": host["compiler"], "cflags": cflags(),
            "compiler_warnings": [w for b in built.values() for w in b["warnings"]], "variables": len(variables),
            "platforms": {name: {k: v for k, v in b.items() if k not in ("binary", "warnings")}
                          for name, b in built.items()},
            "sources": [f"sources/{n}" for n in files]}
