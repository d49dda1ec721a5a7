"""The reducer interface and registry.

A *reducer* turns a natural-coordinate dataset into a reduced model, in the manner of a
scikit-learn / pysindy estimator or a pyMOR reductor: it is chosen by its registry name
(``mc2fmu train --reducer NAME``), configured by a frozen dataclass (its ``Config``), and its
:meth:`Reducer.fit` receives a :class:`~mc2fmu.data.dataset.Dataset` and returns a
:class:`~mc2fmu.models.artifact.ModelArtifact` (the run-time model with its envelope and
training record), nothing more: reading files and writing the model directory are the
pipeline's business.

A config field becomes a command-line option when its metadata has a ``flag``::

    dof: int = field(metadata={"flag": "--dof", "help": "...", "metavar": "N"})

(``choices``: a callable returning the valid values, e.g. a registry's keys; ``parse``: turns
the option's text into the field's value.)  :func:`add_config_arguments` and
:func:`config_from_args` are the only mapping between the two.

Registered reducers are imported lazily (:data:`REDUCERS` holds ``module:attribute`` paths of
the config class and the reducer), so the command line's options cost no torch import and
choosing a reducer imports what it trains with (torch for the autoencoder) and nothing else.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import numbers
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import TrainingError
from ..files import atomic_output


class Reducer(Protocol):
    """What a reducer is: a name, a description, a config class and ``fit``."""

    name: str
    description: str
    Config: type

    def fit(self, dataset, config, *, progress: Callable[[dict], None] | None = None,
            checkpoint: "Checkpointer | None" = None):
        """Train on ``dataset`` (deterministic for a given config); return a ModelArtifact.

        ``progress`` receives entries with at least ``done`` (0..1), ``stage``, ``iter``,
        ``loss``, ``val``.  With ``checkpoint`` the reducer saves its state through it and
        resumes from it when ``checkpoint.resume``.
        """


def _attr(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class ReducerEntry:
    """A registered reducer: its config class and the reducer itself, as ``module:attribute``
    paths imported on first use (the config's module must not import the training stack)."""

    name: str
    description: str
    config: str
    reducer: str

    def config_class(self) -> type:
        return _attr(self.config)

    def load(self) -> Reducer:
        return _attr(self.reducer)


REDUCERS: dict[str, ReducerEntry] = {}


def register_reducer(entry: ReducerEntry) -> ReducerEntry:
    REDUCERS[entry.name] = entry
    return entry


register_reducer(ReducerEntry(
    "autoencoder", "physics-informed autoencoder on natural coordinates (Angeli et al. 2020); known coordinates with --coords",
    "mc2fmu.reducers.autoencoder.config:TrainConfig", "mc2fmu.reducers.autoencoder.reducer:AUTOENCODER"))
register_reducer(ReducerEntry(
    "node", "MBD-NODE neural ODE baseline (Wang et al. 2024) on the coordinates of an autoencoder (--from, or trained first)",
    "mc2fmu.reducers.node.config:NodeReducerConfig", "mc2fmu.reducers.node.reducer:NODE"))
register_reducer(ReducerEntry(
    "local-pca", "local-PCA piecewise-linear ROM (Angeli et al., real-time MOR); q and qd read through an autoencoder's coordinates "
    "(--from, or trained first)",
    "mc2fmu.reducers.local_pca.config:LocalPcaConfig", "mc2fmu.reducers.local_pca.reducer:LOCAL_PCA"))
DEFAULT_REDUCER = "autoencoder"


def reducer_entry(name: str) -> ReducerEntry:
    if name not in REDUCERS:
        raise TrainingError(f"--reducer {name!r}: not available; choose one of {', '.join(REDUCERS)}")
    return REDUCERS[name]


# ------------------------------------------------------------------ config <-> command line


#: the largest seed: torch's and numpy's generators take 64-bit seeds, the checkpoint a signed one
SEED_MAX = 2**63 - 1


def _is_whole(value) -> bool:
    """A whole number (numpy's included), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np_bool()))


def np_bool():
    try:
        import numpy as np

        return np.bool_
    except ImportError:  # pragma: no cover - numpy is a dependency
        return bool


def finite_number(value) -> float | None:
    """``value`` as a finite float, or None when it is not a finite real number (a bool, text,
    a whole number too large for a float: no exception)."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np_bool())):
        return None
    try:
        v = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return v if math.isfinite(v) else None


def shown(value, limit: int | None = None) -> str:
    """A value as a message shows it: its repr (cut at ``limit`` characters), a whole number of
    more than 96 bits by its size (past 4300 digits one cannot even be printed: Python's
    int-to-string limit)."""
    if _is_whole(value) and int(value).bit_length() > 96:
        return f"a {int(value).bit_length()}-bit number"
    text = repr(value)
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


def whole_number_problem(flag: str, value, low: int, high: int | None = None, what: str = "") -> str | None:
    """The message for an option that must be a whole number in ``low .. high`` (None: fits)."""
    if _is_whole(value) and value >= low and (high is None or value <= high):
        return None
    rule = f">= {low}" if high is None else f"in {low} .. {high}" if high - low > 1 else f"{low} or {high}"
    return f"{flag}: {shown(value)} is not {what or 'allowed'}: give a whole number {rule}"


def positive_number_problem(flag: str, value, what: str) -> str | None:
    """The message for an option that must be a finite number > 0 (None: fits)."""
    v = finite_number(value)
    if v is not None and v > 0:
        return None
    return f"{flag}: {shown(value)} is not {what}: give a finite number > 0"


#: the widest hidden layer accepted: a 16384-wide layer already holds hundreds of millions of
#: weights between two such layers, far beyond what a reduced model needs (64-128)
MAX_WIDTH = 16384


def widths_problem(flag: str, widths) -> str | None:
    """The message for hidden widths that are not whole numbers in 1 .. :data:`MAX_WIDTH`
    (None: fit; empty: no hidden layer)."""
    if isinstance(widths, (tuple, list)) and all(_is_whole(w) and 1 <= w <= MAX_WIDTH for w in widths):
        return None
    return f"{flag}: {widths!r} are not layer widths: give whole numbers from 1 to {MAX_WIDTH}, e.g. 64,64"


def seed_problem(flag: str, value) -> str | None:
    return whole_number_problem(flag, value, 0, SEED_MAX, "a seed")


def int_list(text: str) -> tuple[int, ...]:
    """``"64,64"`` -> ``(64, 64)``; positive integers only."""
    try:
        widths = tuple(int(s) for s in name_list(text))
    except ValueError:
        raise ValueError(f"{text!r}: give comma-separated positive integers, e.g. 32,32") from None
    if not widths or min(widths) < 1:
        raise ValueError(f"{text!r}: give comma-separated positive integers, e.g. 32,32")
    return widths


def name_list(text: str) -> tuple[str, ...]:
    """``"a, b"`` -> ``("a", "b")``."""
    return tuple(s.strip() for s in text.split(",") if s.strip())


def option_fields(config_cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(config_cls) if "flag" in f.metadata]


def add_config_arguments(parser: argparse.ArgumentParser | Any, config_cls: type, seen: set[str] | None = None) -> None:
    """One option per field of ``config_cls`` that has a ``flag`` (skipping flags in ``seen``).

    Every option defaults to None, so only what the user gave overrides the dataclass defaults.
    """
    seen = set() if seen is None else seen
    for f in option_fields(config_cls):
        md = f.metadata
        if md["flag"] in seen:
            continue
        seen.add(md["flag"])
        # argparse %-formats a help text: a literal % (e.g. "0.02 %") is written %%
        kw: dict[str, Any] = {"dest": f.name, "default": None, "help": md.get("help", "").replace("%", "%%")}
        if "metavar" in md:
            kw["metavar"] = md["metavar"]
        if "choices" in md:
            kw["choices"] = list(md["choices"]())
        if "const" in md:  # an option whose value may be left out: --identify [GROUPS]
            kw["nargs"], kw["const"] = "?", md["const"]
        if f.type in ("int", int):
            kw["type"] = int
        elif f.type in ("float", float):
            kw["type"] = float
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw["required"] = True
        parser.add_argument(md["flag"], **kw)


def foreign_options(config_cls: type, args: argparse.Namespace, reducer: str) -> list[str]:
    """Options the user gave that belong to other reducers than ``reducer`` (they would be
    ignored silently)."""
    mine = {f.metadata["flag"] for f in option_fields(config_cls)}
    problems = []
    for name, entry in REDUCERS.items():
        for f in option_fields(entry.config_class()):
            flag = f.metadata["flag"]
            if flag not in mine and getattr(args, f.name, None) is not None:
                problems.append(f"{flag} is an option of the {name} reducer, not of {reducer}; leave it out "
                                f"(or add --reducer {name})")
                mine.add(flag)
    return problems


def config_from_args(config_cls: type, args: argparse.Namespace):
    """The config of the options the user gave (others keep their defaults)."""
    values, problems = {}, []
    for f in option_fields(config_cls):
        v = getattr(args, f.name, None)
        if v is None:
            continue
        parse = f.metadata.get("parse")
        if parse is not None:
            try:
                v = parse(v)
            except ValueError as exc:
                problems.append(f"{f.metadata['flag']} {exc}")
                continue
        values[f.name] = v
    if problems:
        raise TrainingError(problems)
    return config_cls(**values)


def config_to_dict(config) -> dict:
    """A config as JSON-able values (tuples as lists)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(config).items()}


def trained_artifact(reducer: str, model, dataset, config, metrics: dict,
                     graphs: Callable[[Any, str], tuple[dict[str, bytes], dict[str, float]]], *, coordinates=(),
                     versions: dict | None = None, extra: dict | None = None):
    """What a reducer's ``fit`` returns: the artifact of ``model`` trained on ``dataset``, its
    training record the ``metrics``, the ``config``, its seed and the entries of ``extra``;
    and the python FMU backend's ONNX graphs, ``graphs(envelope, folder) -> (files,
    max differences from torch)``, in the model's resources and their differences and seconds in
    the record."""
    import tempfile

    from ..models.artifact import build_artifact

    art = build_artifact(reducer, model, dataset, coordinates=coordinates,
                         training={"metrics": metrics, "config": config_to_dict(config), "seed": config.seed,
                                   **(extra or {})},
                         versions=versions)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mc2fmu-onnx-") as tmp:
        files, errors = graphs(art.envelope, tmp)
    model.resources.update(files)
    art.training["onnx_max_difference"] = errors
    art.training["onnx_seconds"] = time.perf_counter() - t0  # the graphs' export and check
    return art


# ------------------------------------------------------------------ checkpoints


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training; the state was saved to ``checkpoint`` (None: no checkpointing)."""

    def __init__(self, checkpoint: Path | None):
        super().__init__(str(checkpoint or ""))
        self.checkpoint = checkpoint


def checkpoint_path(out_dir) -> Path:
    """Where ``mc2fmu train -o MODEL_DIR`` keeps its training state: ``MODEL_DIR.checkpoint.pt``."""
    p = Path(out_dir)
    return p.with_name(p.name + ".checkpoint.pt")


@dataclass
class Checkpointer:
    """When and where a reducer saves its training state: atomically to ``path`` every
    ``every`` seconds (<= 0: only on Ctrl-C), at the reducer's iteration boundaries;
    ``resume``: continue from it.  The state's format is the reducer's."""

    path: Path
    every: float = 30.0
    resume: bool = False
    _last: float = field(default=0.0, repr=False)

    def start(self) -> None:
        """The first periodic write comes ``every`` seconds from now."""
        self._last = time.perf_counter()

    def due(self) -> bool:
        return self.every > 0 and time.perf_counter() - self._last >= self.every

    def save(self, writer: Callable[[Path], None]) -> None:
        """``writer(tmp)`` writes the state to a temporary file that then replaces ``path``."""
        with atomic_output(self.path) as tmp:
            writer(tmp)
        self._last = time.perf_counter()
