"""The model artifact: a directory every stage after training reads, written and read here only.

Layout (format :data:`FORMAT` version :data:`FORMAT_VERSION`)::

    MODEL_DIR/model.json      the schema below (strict JSON)
    MODEL_DIR/arrays.npz      the reduced model's arrays by name (float64; no pickles)
    MODEL_DIR/resources/...   the reduced model's extra files (e.g. its ONNX graphs)

``model.json`` keys: ``format``, ``version``, ``reducer`` (the registry name that trained it),
``kind`` (the run-time model kind, :data:`mc2fmu.models.model.MODEL_KINDS`), ``mechanism``,
``layout`` (the NC layout), ``dof``, ``dt``, ``angles``, ``coordinates`` (the names of known
minimal coordinates; empty when they were learnt), ``envelope``, ``initial_state`` (``q``,
``qd``, ``u`` of the first training run), ``training`` (runs, samples, duration, metrics, the
reducer's options), ``versions``, ``model`` (the run-time model's own parameters),
``arrays`` (name -> shape) and ``resources`` (file names).

:func:`load_artifact` refuses another format version, a missing key, a value of the wrong
type, an array of the wrong shape and a resource that is not inside ``resources/`` (an
absolute name, ``..``, a link leading out), each with a message naming the file, the key and
the fix; :func:`save_artifact` refuses such resource names too.  Reading imports neither torch nor onnx.
"""

from __future__ import annotations

import json
import os
import platform
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from .. import __version__
from ..capabilities import variant_problems
from ..errors import ModelError
from ..files import atomic_directory, file_problem, json_safe
from ..mechanics.mechanism import Mechanism, mechanism_from_dict
from ..mechanics.natural import NCLayout, build_layout, finite_difference_velocity
from .envelope import Envelope
from .simulate import unwrap_angles
from .model import MODEL_KINDS, ReducedModel

FORMAT = "mc2fmu-model"
#: the newest format version, and every one this mc2fmu reads.  A model is written in the
#: oldest version that holds it (:func:`format_version`), so an earlier mc2fmu reads what it can
#: read right and refuses the rest ("written by a newer mc2fmu; upgrade")
FORMAT_VERSION = 3
READ_VERSIONS = (2, 3)
#: the version each of the models' :meth:`~mc2fmu.models.model.ReducedModel.saved_features`
#: first appeared in (a model with none of them is version 2): 3 added learned spring laws
#: learnt as potentials (``form = "potential"``), whose network version 2 would take for the tension
FEATURE_VERSIONS = {"potential spring laws": 3}
FILES = ("model.json", "arrays.npz")
RETRAIN = "re-create it with `mc2fmu train`"


@dataclass(frozen=True)
class InitialState:
    """The default start of a simulation: the first training run's initial state."""

    q: tuple[float, ...]
    qd: tuple[float, ...]
    u: tuple[float, ...]

    def to_dict(self) -> dict:
        return {"q": list(self.q), "qd": list(self.qd), "u": list(self.u)}


@dataclass(frozen=True)
class ModelArtifact:
    """A trained reduced model with everything the later stages need to use it."""

    reducer: str
    mechanism: Mechanism
    layout: NCLayout
    dt: float
    angles: tuple[bool, ...]
    coordinates: tuple[str, ...]
    envelope: Envelope
    initial_state: InitialState
    training: dict[str, Any]
    model: ReducedModel
    versions: dict[str, str] = field(default_factory=dict)
    path: str = ""

    @property
    def dof(self) -> int:
        return len(self.angles)

    @property
    def n_u(self) -> int:
        return len(self.mechanism.inputs)

    @property
    def mode(self) -> str:
        """``known`` (named minimal coordinates) or ``learnt``."""
        return "known" if self.coordinates else "learnt"

    @property
    def stop_time(self) -> float:
        """The first training run's length: the FMU's default experiment."""
        return float(self.training.get("duration", 0.0))

    @property
    def description(self) -> str:
        step = getattr(self.model, "step_map_name", "")
        coords = f"known coordinates {', '.join(self.coordinates)}" if self.coordinates else "learnt coordinates"
        return (f"mc2fmu reduced model of '{self.mechanism.name}': {self.dof} minimal coordinate(s), "
                f"{self.reducer}, {coords}" + (f", step map {step}" if step else ""))

    @property
    def decoder_model(self):
        """The decoder-manifold model whose decoder maps ``q`` to ``x``: the model itself, or a
        node or local-PCA model's chart."""
        return getattr(self.model, "chart", self.model)

    def encode_series(self, x: np.ndarray) -> np.ndarray:
        """``q`` (n_t, m) of a time series of ``x``, angle-type columns unwrapped in time."""
        return unwrap_angles(self.model.encode(x), self.angles)

    def decode(self, q: np.ndarray) -> np.ndarray:
        return self.model.decode(q)

    def initial_state_of(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(q0, qd0)`` of a run from its first three NC samples (``qd0`` by a second-order
        one-sided difference), exactly as an FMU is started with ``q_start``/``qd_start``."""
        from .simulate import initial_state

        return initial_state(self.model, x)

    def check_mechanism(self, mechanism: Mechanism, source: str | os.PathLike, *,
                        why: str = "this model runs the trained physical parameters",
                        mine: str = "the mechanism the model was trained on") -> None:
        """The strict rule for "this run belongs to this model": its mechanism file describes
        ``mine``, this artifact's mechanism (bodies, inputs, masses, inertias, loads, springs;
        the name is not compared).  ``why``: why a physical variant does not do here."""
        from ..mechanics.variants import physical_differences

        diffs = physical_differences(self.mechanism, mechanism, source)  # another mechanism: an error naming it
        if diffs:
            raise ModelError(f"{source}: changes {', '.join(d.item for d in diffs)} from {mine}, and {why}; use "
                             f"the mechanism file of {mine} (`mc2fmu simulate` and `linearize` take a physical "
                             "variant; `export --mechanism` writes an FMU for one)")

    def for_mechanism(self, mechanism: Mechanism, source: str | os.PathLike) -> tuple["ModelArtifact", list]:
        """This model with the physical parameters of ``mechanism`` (a file that differs from
        the trained one in masses, centres of mass, inertias, gravity, spring constants and
        attachment points, input directions and points only: :mod:`mc2fmu.mechanics.variants`),
        and the list of what differs (empty: the trained mechanism, and ``self``).  Anything
        else is a :class:`ModelError` naming the item; so is any difference for a model that
        learnt its dynamics (node, local-PCA).  The chart, the NC layout and the envelope stay
        the trained ones."""
        from ..mechanics.natural import force_model, mass_matrix
        from ..mechanics.variants import physical_differences

        diffs = physical_differences(self.mechanism, mechanism, source)
        if not diffs:
            return self, []
        refused = variant_problems(self.reducer)
        if refused:
            raise ModelError([f"{source}: changes {', '.join(d.item for d in diffs)}; {p}" for p in refused])
        laws = self.model.springs.laws
        if laws is not None:
            learned = [d.item for d in diffs for s in self.mechanism.springs
                       if s.recorded and d.item == f"{s.name}.damping"]
            if learned:
                raise ModelError(f"{source}: changes {', '.join(learned)}: a recorded spring's learned law was fitted "
                                 "beside its trained damping (the law's part keeps the total damping from going "
                                 "below zero), so that damping stays; change its stiffness, length or points only")
        mechanism = replace(mechanism, name=self.mechanism.name)  # the name is not a parameter
        M = mass_matrix(mechanism, self.layout)
        model = self.model.with_physics(M, force_model(mechanism, self.layout, M))
        _check_reduced_mass(model, self.envelope, source)
        return replace(self, mechanism=mechanism, model=model), diffs

    def check_step(self, dt: float, source: str | os.PathLike) -> None:
        if abs(dt - self.dt) > 1e-9 * self.dt:
            raise ModelError(f"{source}: sample step {dt:g} s differs from the model's step {self.dt:g} s; "
                             "resample the run to the model's step")


#: configurations over the envelope where a physical variant must leave ``J^T M J`` regular
MASS_CHECKS = 32


def mass_check_configurations(envelope: Envelope, model) -> np.ndarray:
    """The :data:`MASS_CHECKS` configurations (rows of ``q``) spread over the training envelope
    where a physical variant must leave the reduced mass matrix regular (here, and in the
    FMUs, whose parameters can be set)."""
    from .envelope import sample_points

    return np.concatenate([p["q"] for p in sample_points(envelope, model, MASS_CHECKS, seed=3)])


def _check_reduced_mass(model, envelope: Envelope, source) -> None:
    """A variant must leave the reduced mass matrix ``J^T M J`` positive definite over the
    trained configurations (a body made a rod or a point mass can make it singular)."""
    from ..mechanics.parameters import reduced_mass_regular

    q = mass_check_configurations(envelope, model)
    Mm = model.terms(q, np.zeros((len(q), model.n_u))).Mm
    if not reduced_mass_regular(Mm):
        raise ModelError(f"{source}: with these masses and inertias the reduced mass matrix is singular at "
                         "configurations the model was trained on (a body without the inertia its motion needs); "
                         "give every moving body mass and inertia about the axes it turns about")


def _versions() -> dict[str, str]:
    return {"mc2fmu": __version__, "numpy": np.__version__, "python": platform.python_version()}


def describe_training_data(model: ReducedModel, runs) -> tuple[Envelope, InitialState]:
    """Envelope of the training runs (``q``, ``qd``, ``u`` and the round-trip error) and the
    first run's initial state."""
    qs, qds, us, rt = [], [], [], 0.0
    first = None
    for run in runs:
        q = unwrap_angles(model.encode(run.x), model.angles)
        qd = finite_difference_velocity(q, model.dt)
        rt = max(rt, float(np.abs(model.decode(q) - run.x).max()))
        qs.append(q)
        qds.append(qd)
        us.append(run.u)
        if first is None:
            first = InitialState(tuple(q[0].tolist()), tuple(qd[0].tolist()), tuple(run.u[0].tolist()))
    env = Envelope.from_data(np.concatenate(qs), np.concatenate(qds), np.concatenate(us), rt, list(model.angles))
    return env, first


def build_artifact(reducer: str, model: ReducedModel, dataset, coordinates=(), training: dict | None = None,
                   versions: dict | None = None) -> ModelArtifact:
    """The artifact of a model trained on ``dataset`` (envelope and initial state from its runs)."""
    envelope, initial = describe_training_data(model, dataset.runs())
    first = dataset.run(0)
    info = {"runs": list(dataset.run_names), "samples": int(len(dataset.t)),
            "duration": float(first.t[-1] - first.t[0]), **(training or {})}
    return ModelArtifact(reducer, dataset.mechanism, dataset.layout, float(model.dt), tuple(model.angles),
                         tuple(coordinates), envelope, initial, info, model, {**_versions(), **(versions or {})})


def format_version(model: ReducedModel) -> int:
    """The oldest format version that holds ``model`` (see :data:`FORMAT_VERSION`)."""
    return max((FEATURE_VERSIONS[f] for f in model.saved_features()), default=READ_VERSIONS[0])


def to_json(art: ModelArtifact) -> dict[str, Any]:
    params, arrays = art.model.to_saved()
    return json_safe({
        "format": FORMAT, "version": format_version(art.model), "reducer": art.reducer, "kind": art.model.kind,
        "mechanism": art.mechanism.to_dict(), "layout": art.layout.to_dict(), "dof": art.dof, "dt": art.dt,
        "angles": list(art.angles), "coordinates": list(art.coordinates), "envelope": art.envelope.to_dict(),
        "initial_state": art.initial_state.to_dict(), "training": art.training, "versions": art.versions,
        "model": params, "arrays": {k: list(np.shape(v)) for k, v in arrays.items()},
        "resources": sorted(art.model.resources),
    })


def _resource_problems(where: str | os.PathLike, names, folder: Path | None = None) -> list[str]:
    """Why ``names`` cannot be the model's resource files (empty: they can).  A resource name is a
    plain relative path (``onnx/rhs.onnx``): not absolute, no ``..``, no ``.``, no backslash.
    With ``folder`` (the model's ``resources/``, when reading) every entry in it, listed or not,
    must also stay inside it with links followed."""
    problems = []
    for name in names:
        rel = PurePosixPath(name) if isinstance(name, str) else None
        if rel is None or not name or "\\" in name or "\0" in name or rel.is_absolute() or ".." in rel.parts \
                or rel.as_posix() != name:
            problems.append(f"{where}: key 'resources': {name!r} is not a file name inside resources/ (absolute, "
                            f"'..' or not a plain relative path); {RETRAIN}")
    if folder is None or not (folder.exists() or folder.is_symlink()):
        return problems
    if not _inside(folder, folder.parent):
        return [*problems, f"{where}: key 'resources': the folder {folder} is a link that leads outside the model "
                           f"directory; {RETRAIN}"]
    for dirpath, dirnames, filenames in os.walk(folder):
        for entry in sorted(dirnames + filenames):
            p = Path(dirpath) / entry
            if not _inside(p, folder):
                problems.append(f"{where}: key 'resources': {p.relative_to(folder).as_posix()!r} is a link that "
                                f"leads outside resources/; {RETRAIN}")
    return problems


def _inside(path: Path, folder: Path) -> bool:
    """``path``, links followed, is ``folder`` or in it (a link loop is not)."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # RuntimeError: a link loop (Python < 3.13)
        return False


def save_artifact(path: str | os.PathLike, art: ModelArtifact) -> Path:
    """Write the artifact directory atomically (a complete directory or nothing)."""
    path = Path(path)
    problems = _resource_problems(path / "model.json", art.model.resources)  # a fresh directory: names suffice
    if problems:
        raise ModelError(problems)
    _, arrays = art.model.to_saved()
    with atomic_directory(path) as tmp:
        np.savez(tmp / "arrays.npz", **{k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()})
        for name, data in art.model.resources.items():
            target = tmp / "resources" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (tmp / "model.json").write_text(json.dumps(to_json(art), indent=1, allow_nan=False))
    return path


# ------------------------------------------------------------------ reading

_SCHEMA: dict[str, tuple[type | tuple[type, ...], str]] = {
    "format": (str, "a string"),
    "version": (int, "an integer"),
    "reducer": (str, "a string"),
    "kind": (str, "a string"),
    "mechanism": (dict, "a table"),
    "layout": (dict, "a table"),
    "dof": (int, "an integer"),
    "dt": ((int, float), "a number"),
    "angles": (list, "a list of booleans"),
    "coordinates": (list, "a list of names"),
    "envelope": (dict, "a table"),
    "initial_state": (dict, "a table"),
    "training": (dict, "a table"),
    "versions": (dict, "a table"),
    "model": (dict, "a table"),
    "arrays": (dict, "a table"),
    "resources": (list, "a list of file names"),
}


def load_artifact(path: str | os.PathLike) -> ModelArtifact:
    """Read a model directory written by :func:`save_artifact`."""
    path = Path(path)
    if not path.is_dir():
        raise ModelError(f"{path}: not a model directory; create one with `mc2fmu train ... -o {path}`")
    mj = path / "model.json"
    if not mj.exists():
        raise ModelError(f"{path}: missing model.json; the model directory is incomplete ({RETRAIN})")
    problem = file_problem(mj)
    if problem:
        raise ModelError(f"{mj}: {problem}; {RETRAIN}")
    try:
        meta = json.loads(mj.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, json.JSONDecodeError) else ""
        raise ModelError(f"{mj}: {where}malformed JSON ({getattr(exc, 'msg', exc)}); {RETRAIN}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ModelError(f"{mj}: format is {got!r}, expected {FORMAT!r}: not an mc2fmu model directory")
    version = meta.get("version")
    if "version" not in meta:
        raise ModelError(f"{mj}: key 'version' is missing; {RETRAIN}")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ModelError(f"{mj}: key 'version' must be an integer, not {type(version).__name__}; {RETRAIN}")
    if version not in READ_VERSIONS:
        if version < min(READ_VERSIONS):
            fix = f"it was written by an earlier mc2fmu; {RETRAIN} (the same command and data give the same model)"
        else:
            fix = "it was written by a newer mc2fmu; upgrade mc2fmu"
        reads = " and ".join(str(v) for v in READ_VERSIONS)
        raise ModelError(f"{mj}: model format version {version!r}, this mc2fmu reads versions {reads}: {fix}")
    problems = []
    for key, (typ, what) in _SCHEMA.items():
        if key not in meta:
            problems.append(f"{mj}: key '{key}' is missing; {RETRAIN}")
        elif not isinstance(meta[key], typ) or isinstance(meta[key], bool) and typ is not bool:
            problems.append(f"{mj}: key '{key}' must be {what}, not {type(meta[key]).__name__}; {RETRAIN}")
    if problems:
        raise ModelError(problems)
    kind = MODEL_KINDS.get(meta["kind"])
    if kind is None:
        raise ModelError(f"{mj}: key 'kind': model kind {meta['kind']!r} is not one this mc2fmu runs "
                         f"({', '.join(MODEL_KINDS)}); upgrade mc2fmu")
    mechanism = mechanism_from_dict(meta["mechanism"], source=f"{mj}:mechanism")
    try:
        layout = NCLayout.from_dict(meta["layout"])
        envelope = Envelope.from_dict(meta["envelope"])
        init = meta["initial_state"]
        initial = InitialState(*(tuple(float(v) for v in init[k]) for k in ("q", "qd", "u")))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ModelError(f"{mj}: layout, envelope or initial_state is malformed ({type(exc).__name__}: {exc}); "
                         f"{RETRAIN}") from None
    if layout.to_dict() != build_layout(mechanism).to_dict():  # the layout is a function of the mechanism
        raise ModelError(f"{mj}: key 'layout' does not match the natural coordinates of its mechanism; {RETRAIN}")
    if not all(np.isfinite(v) for v in (*initial.q, *initial.qd, *initial.u)):
        raise ModelError(f"{mj}: key 'initial_state' holds non-finite values; {RETRAIN}")
    dt = float(meta["dt"]) if _is_real(meta["dt"]) else float("nan")
    if not (np.isfinite(dt) and dt > 0):
        raise ModelError(f"{mj}: key 'dt' is {dt!r}; a model's time step must be a finite number > 0; {RETRAIN}")
    dof, angles = int(meta["dof"]), tuple(bool(a) for a in meta["angles"])
    n_x, n_u, n_s = layout.size, len(mechanism.inputs), len(mechanism.springs)
    if len(angles) != dof or len(initial.q) != dof or len(initial.qd) != dof or len(initial.u) != n_u \
            or len(envelope.lower) != 2 * dof + n_u:
        raise ModelError(f"{mj}: angles, initial_state and envelope must have {dof} coordinate(s) and {n_u} input(s) "
                         f"(key 'dof' {dof}); {RETRAIN}")
    try:
        shapes = kind.array_shapes(meta["model"], dof, n_x, n_u, n_s, angles)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{mj}: key 'model' is malformed ({type(exc).__name__}: {exc}); {RETRAIN}") from None
    arrays = _read_arrays(path / "arrays.npz", shapes)
    if "M" in arrays:  # the natural-coordinate mass matrix: symmetric, positive semidefinite, not zero
        M = arrays["M"]
        scale = float(np.abs(M).max()) if M.size else 0.0
        if not (scale > 0 and np.abs(M - M.T).max() <= 1e-9 * scale
                and np.linalg.eigvalsh(0.5 * (M + M.T)).min() >= -1e-9 * scale):
            raise ModelError(f"{path / 'arrays.npz'}: array 'M' is not a mass matrix (symmetric, positive "
                             f"semidefinite, non-zero); {RETRAIN}")
    problems = _resource_problems(mj, meta["resources"], path / "resources")
    if problems:
        raise ModelError(problems)
    resources = {}
    for name in meta["resources"]:
        f = path / "resources" / name
        problem = file_problem(f)
        if problem:
            problem = "missing" if problem == "no such file" else problem
            raise ModelError(f"{f}: {problem} (listed under 'resources' in model.json); {RETRAIN}")
        resources[name] = f.read_bytes()
    try:
        model = kind.from_saved(meta["model"], arrays, dt=dt, angles=angles, resources=resources)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{mj}: key 'model' is malformed ({type(exc).__name__}: {exc}); {RETRAIN}") from None
    held = format_version(model)  # a version that does not say what the file holds: read otherwise by another mc2fmu
    if held != version:
        what = ", ".join(sorted(model.saved_features())) or "nothing that needs a version after 2"
        raise ModelError(f"{mj}: model format version {version}, but key 'model' holds {what} (version {held}): "
                         f"an edited or damaged file (e.g. a spring law's 'form' removed or changed); {RETRAIN}")
    return ModelArtifact(meta["reducer"], mechanism, layout, dt, angles,
                         tuple(str(c) for c in meta["coordinates"]), envelope, initial, meta["training"], model,
                         meta["versions"], str(path))


def artifact_files(path: str | os.PathLike) -> dict[str, bytes]:
    """A model directory's own files by relative name: ``model.json``, ``arrays.npz`` and the
    resources ``model.json`` lists, nothing else in the folder (a stray file or link is not
    the model's).  Read it with :func:`load_artifact` first: that checks the names."""
    path = Path(path)
    files = {name: (path / name).read_bytes() for name in FILES}
    for name in json.loads(files["model.json"])["resources"]:
        files[f"resources/{name}"] = (path / "resources" / name).read_bytes()
    return files


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e300


def _read_arrays(path: Path, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    if not path.exists():
        raise ModelError(f"{path}: missing; the model directory is incomplete ({RETRAIN})")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.asarray(z[k]) for k in z.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        raise ModelError(f"{path}: not a readable .npz ({type(exc).__name__}: {exc}); {RETRAIN}") from None
    problems = []
    for name, shape in shapes.items():
        if name not in arrays:
            problems.append(f"{path}: array '{name}' is missing (shape {tuple(shape)} expected); {RETRAIN}")
        elif arrays[name].shape != tuple(shape):
            problems.append(f"{path}: array '{name}' has shape {arrays[name].shape}, model.json needs "
                            f"{tuple(shape)}; {RETRAIN}")
        elif arrays[name].dtype != np.float64:
            problems.append(f"{path}: array '{name}' is {arrays[name].dtype}, not float64; {RETRAIN}")
        elif not np.isfinite(arrays[name]).all():
            problems.append(f"{path}: array '{name}' holds non-finite values; {RETRAIN}")
    if problems:
        raise ModelError(problems)
    return {k: arrays[k] for k in shapes}


def artifact_from_zip(fmu: str | os.PathLike, prefix: str, tmp: str | os.PathLike) -> ModelArtifact:
    """The artifact stored under ``prefix`` inside a zip (an FMU's ``resources/model/``),
    extracted into the folder ``tmp`` and read with the same checks."""
    out = Path(tmp) / "model"
    try:
        with zipfile.ZipFile(fmu) as z:
            names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
            if not names:
                raise ModelError(f"{fmu}: holds no mc2fmu model under {prefix} (not an FMU written by `mc2fmu export`)")
            for n in names:
                rel = Path(n[len(prefix):])
                if rel.is_absolute() or ".." in rel.parts:
                    raise ModelError(f"{fmu}: member {n!r} points outside its folder; the FMU is corrupt")
                target = out / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(n))
    except zipfile.BadZipFile as exc:
        raise ModelError(f"{fmu}: not a zip file ({exc}); an FMU is a zip archive") from None
    return load_artifact(out)

