"""Pose exports: reading and writing one simulation run in the tool-neutral layout.

A run file (CSV, ``.csv.gz`` or ``.npz``) holds, per sample:

* ``time`` (s), strictly increasing with a uniform step;
* per body ``<body>.x``, ``<body>.y``, ``<body>.z``: the body-frame origin in the global
  frame (m), and its orientation, either ``<body>.qw .qx .qy .qz`` (unit quaternion
  body->global, scalar first) or ``<body>.R11`` ... ``<body>.R33`` (rotation-matrix rows);
* per mechanism input a column named like the input holding its value;
* per spring with ``law = "recorded"`` its tension ``<spring>.tension`` (N, the sign
  convention of the linear springs: positive pulls the two points together).

Other columns are ignored with a warning.  Everything is validated before anything is
returned; every problem names the file, the row/column and the rule.
"""

from __future__ import annotations

import csv
import gzip
import zlib
import io
import logging
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PoseDataError
from ..files import atomic_output, file_problem
from ..mechanics.mechanism import Mechanism
from ..mechanics.rotations import matrix_to_quaternion, nearest_rotation, quaternion_to_matrix

log = logging.getLogger(__name__)

POSITION_FIELDS = ("x", "y", "z")
QUATERNION_FIELDS = ("qw", "qx", "qy", "qz")
MATRIX_FIELDS = tuple(f"R{i}{j}" for i in (1, 2, 3) for j in (1, 2, 3))
POSE_FIELDS = POSITION_FIELDS + QUATERNION_FIELDS + MATRIX_FIELDS

#: |‖q‖ - 1| allowed for a quaternion before it is renormalised.
QUATERNION_TOL = 1e-6
#: max |R^T R - I| allowed for a rotation matrix before it is re-orthonormalised.
ORTHOGONALITY_TOL = 1e-6
#: relative deviation of a time step from the run's mean step that still counts as uniform.
UNIFORM_STEP_RTOL = 1e-6
#: sane magnitudes where values enter (beyond them finite differences overflow or the export is wrong)
MAX_POSITION = 1e6  # m
MAX_LOAD = 1e12  # N or N.m (inputs, recorded tensions)
MAX_TIME = 1e9  # s
MIN_STEP = 1e-9  # s

SUFFIXES = (".csv", ".csv.gz", ".npz")


@dataclass(frozen=True)
class PoseRun:
    """One run of a mechanism: poses of every body and the input values over time."""

    path: str
    name: str
    t: np.ndarray  # (n_t,)
    origin: np.ndarray  # (n_t, n_b, 3) body-frame origin, global frame
    rotation: np.ndarray  # (n_t, n_b, 3, 3) body -> global, exactly orthonormal
    u: np.ndarray  # (n_t, n_u) input values in mechanism order
    tension: np.ndarray | None = None  # (n_t, n_recorded) tensions of the recorded springs, mechanism order

    @property
    def dt(self) -> float:
        return float((self.t[-1] - self.t[0]) / (len(self.t) - 1))


def run_name(path: str | os.PathLike) -> str:
    """The run's name: the file name without its data suffix (``train.csv.gz`` -> ``train``)."""
    name = Path(path).name
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem


# ---------------------------------------------------------------------------- reading


def _read_table(path: Path) -> tuple[list[str], np.ndarray]:
    """Column names and a float table (n_rows, n_cols) from a CSV, CSV.GZ or NPZ file."""
    name = path.name
    if name.endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as data:
                columns = list(data.files)
                arrays = [np.asarray(data[c]) for c in columns]
        except Exception as exc:  # zipfile/pickle errors come in many types
            raise PoseDataError(f"{path}: cannot read as .npz ({exc})") from None
        problems = []
        lengths = {a.shape[0] if a.ndim == 1 else -1 for a in arrays}
        for c, a in zip(columns, arrays):
            if a.ndim != 1:
                problems.append(f"{path}: array '{c}' has shape {a.shape}; every key must be a 1-D column")
            elif not np.issubdtype(a.dtype, np.number):
                problems.append(f"{path}: array '{c}' has dtype {a.dtype}; columns must be numeric")
        if not problems and len(lengths) > 1:
            problems.append(f"{path}: columns have different lengths {sorted(lengths)}; all must have one per sample")
        if problems:
            raise PoseDataError(problems)
        table = np.stack([a.astype(np.float64) for a in arrays], axis=1) if arrays else np.zeros((0, 0))
        return columns, table
    if not (name.endswith(".csv") or name.endswith(".csv.gz")):
        raise PoseDataError(f"{path}: unknown file type; a run must be one of {', '.join(SUFFIXES)}")
    opener = gzip.open if name.endswith(".gz") else open
    try:
        with opener(path, "rt", newline="") as fh:
            reader = csv.reader(fh)
            try:
                header = [h.strip() for h in next(reader)]
            except StopIteration:
                raise PoseDataError(f"{path}: the file is empty; expected a header row with 'time' and pose columns") from None
            table = _fast_table(fh, len(header))
            if table is not None:
                return header, table
            fh.seek(0)
            reader = csv.reader(fh)
            next(reader)
            rows = []
            for lineno, row in enumerate(reader, start=2):
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != len(header):
                    raise PoseDataError(
                        f"{path}: line {lineno}: {len(row)} values for {len(header)} columns; every row needs one value per header column"
                    )
                try:
                    rows.append([float(c) for c in row])
                except ValueError:
                    bad = next(i for i, c in enumerate(row) if not _is_float(c))
                    raise PoseDataError(
                        f"{path}: line {lineno}, column '{header[bad]}': '{row[bad].strip()}' is not a number"
                    ) from None
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile, zlib.error, csv.Error) as exc:
        raise PoseDataError(f"{path}: cannot read ({type(exc).__name__}: {exc}); is it a complete CSV or gzip-compressed "
                            "CSV file?") from None
    table = np.array(rows, dtype=np.float64).reshape(len(rows), len(header))
    return header, table


def _fast_table(fh, n_cols: int) -> np.ndarray | None:
    """The rows after the header as one float table, parsed by numpy's C reader (2x faster than
    the csv module on A02's 20001 x 568 values), or None when that reader refuses the text or
    the rows are not all ``n_cols`` long: then the csv module reads the file again and names
    the line and column that is wrong."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an empty body: numpy warns, the shape check below decides
            table = np.loadtxt(fh, delimiter=",", dtype=np.float64, ndmin=2, quotechar='"', comments=None)
    except (ValueError, TypeError):
        return None
    if table.size == 0:
        return np.zeros((0, n_cols))
    return table if table.shape[1] == n_cols else None


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _row_label(path: Path, index: int) -> str:
    """How a sample is named in messages: file line for CSV (header is line 1), index for NPZ."""
    if path.name.endswith(".npz"):
        return f"sample {index}"
    return f"line {index + 2}"


_BODY_COLUMN = re.compile(r"^(?P<body>[A-Za-z_][A-Za-z0-9_]*)\.(?P<field>[A-Za-z0-9_]+)$")


def read_run(path: str | os.PathLike, mechanism: Mechanism) -> PoseRun:
    """Read and validate one run file against a mechanism.

    Raises :class:`PoseDataError` listing every problem found.
    """
    path = Path(path)
    problem = file_problem(path)
    if problem:
        raise PoseDataError(f"{path}: {problem}")
    columns, table = _read_table(path)
    index = {}
    problems: list[str] = []
    for i, c in enumerate(columns):
        if c in index:
            problems.append(f"{path}: column '{c}' appears twice; every column name must be unique")
        index[c] = i

    body_names = [b.name for b in mechanism.bodies]
    input_names = [u.name for u in mechanism.inputs]
    used = set()

    def need(col: str, what: str) -> int | None:
        if col not in index:
            problems.append(f"{path}: missing column '{col}' ({what}); add it or fix the mechanism file")
            return None
        used.add(col)
        return index[col]

    t_col = need("time", "time in s")
    pos_cols: list[list[int | None]] = []
    rot_cols: list[tuple[str, list[int | None]]] = []
    for b in body_names:
        pos_cols.append([need(f"{b}.{f}", f"position of body '{b}'") for f in POSITION_FIELDS])
        has_q = [f"{b}.{f}" in index for f in QUATERNION_FIELDS]
        has_r = [f"{b}.{f}" in index for f in MATRIX_FIELDS]
        if any(has_q) and any(has_r):
            problems.append(
                f"{path}: body '{b}' has both quaternion ({b}.qw...) and matrix ({b}.R11...) columns; keep one orientation form"
            )
            continue
        if any(has_r):
            rot_cols.append(("R", [need(f"{b}.{f}", f"rotation matrix of body '{b}'") for f in MATRIX_FIELDS]))
        elif any(has_q):
            rot_cols.append(("q", [need(f"{b}.{f}", f"quaternion of body '{b}'") for f in QUATERNION_FIELDS]))
        else:
            problems.append(
                f"{path}: body '{b}' has no orientation columns; give {b}.qw, {b}.qx, {b}.qy, {b}.qz or {b}.R11 ... {b}.R33"
            )
    u_cols = [need(name, f"input '{name}'") for name in input_names]
    tension_cols = [need(s.tension_column, f"tension of spring '{s.name}' in N, which the mechanism file records "
                                           "(law = \"recorded\")") for s in mechanism.springs if s.recorded]

    ignored = []
    for c in columns:
        if c in used:
            continue
        m = _BODY_COLUMN.match(c)
        if m and m["field"] in POSE_FIELDS and m["body"] not in body_names:
            problems.append(
                f"{path}: column '{c}' is a pose of unknown body '{m['body']}'; the mechanism's bodies are {', '.join(body_names)}"
            )
        else:
            ignored.append(c)
    if problems:
        raise PoseDataError(problems)
    if ignored:
        log.warning("%s: ignoring %d column(s) the mechanism does not use: %s", path, len(ignored), ", ".join(ignored))

    n = table.shape[0]
    if n < 3:
        raise PoseDataError(f"{path}: {n} sample(s); a run needs at least 3 samples")

    # Only the columns in use must be finite; report the first bad sample of each column.
    for c in sorted(used, key=index.get):
        col = table[:, index[c]]
        bad = np.flatnonzero(~np.isfinite(col))
        if bad.size:
            problems.append(
                f"{path}: {_row_label(path, bad[0])}, column '{c}': value {col[bad[0]]} is not finite"
                + (f" ({bad.size} such samples)" if bad.size > 1 else "")
                + "; every value must be a finite number"
            )
    if problems:
        raise PoseDataError(problems)
    # sane magnitudes: finite differences of the poses must stay finite, and a step below a
    # nanosecond is an export error, not a simulation
    limits = [(c, MAX_POSITION, "m: positions must lie within 1e6 m of the origin") for c in used
              if c.rsplit(".", 1)[-1] in POSITION_FIELDS]
    limits += [(c, MAX_TIME, "s") for c in ("time",)]
    limits += [(name, MAX_LOAD, "(N or N.m): inputs must be below 1e12 in magnitude") for name in input_names]
    limits += [(s.tension_column, MAX_LOAD, "N: tensions must be below 1e12 in magnitude")
               for s in mechanism.springs if s.recorded]
    for c, limit, rule in limits:
        col = table[:, index[c]]
        bad = np.flatnonzero(np.abs(col) > limit)
        if bad.size:
            problems.append(f"{path}: {_row_label(path, bad[0])}, column '{c}': value {col[bad[0]]:.6g} exceeds "
                            f"{limit:g} {rule}" + (f" ({bad.size} such samples)" if bad.size > 1 else ""))
    if problems:
        raise PoseDataError(problems)

    t = table[:, t_col]
    steps = np.diff(t)
    nonpos = np.flatnonzero(steps <= 0)
    if nonpos.size:
        i = nonpos[0] + 1
        raise PoseDataError(
            f"{path}: {_row_label(path, i)}, column 'time': {t[i]!r} does not increase on the previous sample ({t[i - 1]!r}); time must be strictly increasing"
        )
    dt = (t[-1] - t[0]) / (n - 1)
    if dt < MIN_STEP:
        raise PoseDataError(f"{path}: column 'time': the mean step {dt:.3g} s is below {MIN_STEP:g} s; "
                            "is the time column in seconds?")
    off = np.abs(steps - dt) > UNIFORM_STEP_RTOL * dt
    if off.any():
        i = int(np.flatnonzero(off)[0]) + 1
        raise PoseDataError(
            f"{path}: {_row_label(path, i)}, column 'time': step {steps[i - 1]:.9g} s differs from the run's mean step {dt:.9g} s "
            f"by more than {UNIFORM_STEP_RTOL:g} relative; time must be uniformly sampled (resample the export)"
        )

    nb = len(body_names)
    origin = np.empty((n, nb, 3))
    rotation = np.empty((n, nb, 3, 3))
    for k, b in enumerate(body_names):
        origin[:, k, :] = table[:, pos_cols[k]]
        form, cols = rot_cols[k]
        raw = table[:, cols]
        if form == "q":
            norm = np.linalg.norm(raw, axis=1)
            dev = np.abs(norm - 1.0)
            i = int(np.argmax(dev))
            if dev[i] > QUATERNION_TOL:
                problems.append(
                    f"{path}: {_row_label(path, i)}, body '{b}': quaternion norm {norm[i]:.9g} is not 1 within {QUATERNION_TOL:g}; "
                    "export unit quaternions (scalar first)"
                )
                continue
            rotation[:, k] = quaternion_to_matrix(raw / norm[:, None])
        else:
            mats = raw.reshape(n, 3, 3)
            err = np.abs(np.einsum("nji,njk->nik", mats, mats) - np.eye(3)).max(axis=(1, 2))
            i = int(np.argmax(err))
            det = np.linalg.det(mats)
            if err[i] > ORTHOGONALITY_TOL:
                problems.append(
                    f"{path}: {_row_label(path, i)}, body '{b}': rotation matrix deviates from orthogonal by {err[i]:.3g} "
                    f"(max |R^T R - I|) > {ORTHOGONALITY_TOL:g}; export R11..R33 as the rows of an orthonormal matrix"
                )
                continue
            j = int(np.argmin(det))
            if det[j] < 0:
                problems.append(
                    f"{path}: {_row_label(path, j)}, body '{b}': rotation matrix has determinant {det[j]:.6g}; a rotation needs +1 (a reflection was exported)"
                )
                continue
            rotation[:, k] = nearest_rotation(mats)
    if problems:
        raise PoseDataError(problems)
    u = table[:, u_cols] if u_cols else np.zeros((n, 0))
    tension = table[:, tension_cols] if tension_cols else np.zeros((n, 0))
    return PoseRun(path=str(path), name=run_name(path), t=t.copy(), origin=origin, rotation=rotation, u=u.copy(),
                   tension=tension.copy())


# ---------------------------------------------------------------------------- writing


def pose_columns(body_names: Sequence[str], input_names: Sequence[str] = ()) -> list[str]:
    """Column names of a pose export (quaternion form), in the order mc2fmu writes them."""
    cols = ["time"]
    for b in body_names:
        cols += [f"{b}.{f}" for f in POSITION_FIELDS + QUATERNION_FIELDS]
    return cols + list(input_names)


def write_run(
    path: str | os.PathLike,
    t: np.ndarray,
    body_names: Sequence[str],
    origin: np.ndarray,
    rotation: np.ndarray,
    input_names: Sequence[str] = (),
    u: np.ndarray | None = None,
    extra: dict[str, np.ndarray] | None = None,
) -> None:
    """Write a run in the pose-export layout (quaternions), as CSV, CSV.GZ or NPZ by suffix.

    ``rotation`` is (n_t, n_b, 3, 3) or unit quaternions (n_t, n_b, 4).  ``extra`` columns
    (e.g. minimal coordinates) are appended after the inputs.  Written atomically.
    """
    t = np.asarray(t, dtype=np.float64)
    n = len(t)
    origin = np.asarray(origin, dtype=np.float64).reshape(n, len(body_names), 3)
    rotation = np.asarray(rotation, dtype=np.float64)
    quat = rotation if rotation.shape[-1] == 4 else matrix_to_quaternion(rotation)
    quat = quat.reshape(n, len(body_names), 4)
    u = np.zeros((n, 0)) if u is None else np.asarray(u, dtype=np.float64).reshape(n, len(input_names))
    blocks = [t[:, None]]
    for k in range(len(body_names)):
        blocks += [origin[:, k], quat[:, k]]
    blocks.append(u)
    names = pose_columns(body_names, input_names)
    for key, val in (extra or {}).items():
        val = np.asarray(val, dtype=np.float64).reshape(n, -1)
        blocks.append(val)
        names += [key] if val.shape[1] == 1 else [f"{key}[{i + 1}]" for i in range(val.shape[1])]
    table = np.concatenate(blocks, axis=1)
    path = Path(path)
    if not any(path.name.endswith(s) for s in SUFFIXES):
        raise PoseDataError(f"{path}: unknown output type; use one of {', '.join(SUFFIXES)}")
    with atomic_output(path) as tmp:
        if path.name.endswith(".npz"):
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **{c: table[:, i] for i, c in enumerate(names)})
        else:
            buf = io.StringIO()
            buf.write(",".join(names) + "\n")
            np.savetxt(buf, table, delimiter=",", fmt="%.17g")
            data = buf.getvalue().encode()
            if path.name.endswith(".gz"):
                # mtime=0: identical bytes for identical data, so regenerated files do not churn
                with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz:
                    gz.write(data)
            else:
                tmp.write_bytes(data)
