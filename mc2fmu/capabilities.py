"""What each kind of model supports: one table, which the command line (its help and its
refusals), every exporter, ``linearize`` and the docs' tables read.  Nothing decides support
anywhere else.

A *kind* is a reducer's product (:data:`KINDS`, by reducer name): how it trains (on an
autoencoder's chart, with several seeds), its run-time model kind,
whether it has a continuous right-hand side ``qdd = f(q, qd, u)`` (model exchange, Modelica,
CasADi and ``linearize`` need one), the FMU backends with the (FMI version, interface) pairs
each writes, whether its FMUs carry the physical parameters, and per target the reason it is
refused (None: supported).  A model's *content* can rule a target out too (an activation a
target does not write, in its networks or its learned spring laws): those rules are
:data:`CONTENT_RULES`, by target.

Targets (:data:`TARGETS`): ``fmu`` (with a backend, :data:`BACKENDS`), ``modelica``,
``casadi``, ``linearize``.  :func:`option_problems` checks a request's options (before the
model is read, or with its reducer), :func:`problems` a model directory's model for a target
(empty: supported), :func:`require` raises them as the error of the caller's stage, and
:func:`variant_problems` says whether a physical variant (``--mechanism``) can go there.
Nothing here imports beyond the error classes: every stage may read it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import ModelError

#: FMI versions and interfaces the FMU exporters write
FMI_VERSIONS = (2, 3)
INTERFACES = {"cs": "co-simulation", "me": "model exchange", "both": "co-simulation and model exchange"}
ALL_PAIRS = frozenset((v, i) for v in FMI_VERSIONS for i in INTERFACES)
CS_PAIRS = frozenset((v, "cs") for v in FMI_VERSIONS)

#: the FMU backends: name -> (what it is, "module:function" of its exporter).  The function
#: takes (artifact, model_dir, work_dir, out_path, fmi_version=, interface=) and returns a summary
BACKENDS: dict[str, tuple[str, str]] = {
    "python": ("pythonfmu + onnxruntime, FMI 2 co-simulation", "mc2fmu.fmu.backends.python:export_python"),
    "native": ("generated C compiled with $CC, FMI 2/3, co-simulation and/or model exchange",
               "mc2fmu.fmu.backends.native:export_native"),
}
#: the default of export, convert and demo: the native FMU is the one no host can be crashed by.
#: The python backend runs in the host's interpreter through pythonfmu 0.7, whose wrapper leaks
#: about 1.2 kB of the host's memory per instantiation (its findClass lists and reprs the slave
#: class's MRO every time and frees none of it; docs/fmus.md, "The python backend").
DEFAULT_BACKEND = "native"
#: what a model can be turned into
TARGETS = {"fmu": "an FMU (--format fmu, a --backend)", "modelica": "Modelica source (--format modelica)",
           "casadi": "a CasADi function (--format casadi)", "linearize": "a linear state-space model (linearize)"}


@dataclass(frozen=True)
class Kind:
    """What the models of one reducer support (see the module's docstring)."""

    reducer: str
    model: str  # the run-time model's kind (ModelArtifact.model.kind)
    continuous: bool  # a continuous right-hand side qdd = f(q, qd, u)
    why_discrete: str  # why not, when not (for the messages)
    backends: dict[str, frozenset]  # FMU backend -> the (FMI version, interface) pairs it writes
    refused: dict[str, str] = field(default_factory=dict)  # target -> why it is refused
    physical_parameters: bool = False  # its FMUs and Modelica model take the physical parameters
    chart: bool = False  # it runs on an autoencoder's coordinates (its config's --from; else one is trained first)
    seeds: bool = False  # its config's --seeds trains several seeds and keeps the best
    # the targets ("native", "python", "modelica", "casadi") whose output of its models has the motion
    # outputs (mc2fmu/models/motion.py: body velocities, angular velocities, kinetic and potential energy).
    # A model on a chart (node, local-PCA) reports those of its decoded motion: x = decode(q),
    # xd = J(q) qd at the q, qd it outputs, with the trained mechanism's masses, gravity and springs
    motion: frozenset = frozenset()

    def pairs(self, backend: str) -> frozenset:
        return self.backends.get(backend, frozenset())


_PYTHON_PAIRS = frozenset({(2, "cs")})

#: the table: reducer name -> what its models support
KINDS: dict[str, Kind] = {
    "autoencoder": Kind(
        "autoencoder", "manifold", True, "",
        {"native": ALL_PAIRS, "python": _PYTHON_PAIRS}, physical_parameters=True, seeds=True,
        motion=frozenset({"native", "python", "modelica", "casadi"})),
    "node": Kind(
        "node", "node", True, "",
        {"native": ALL_PAIRS, "python": _PYTHON_PAIRS},
        refused={"modelica": "the Modelica export writes decoder-manifold models (the autoencoder reducer's), not yet "
                             "a node model's neural ODE; export it as an FMU (--format fmu)",
                 "casadi": "the CasADi export writes decoder-manifold models (the autoencoder reducer's), not yet a "
                           "node model's neural ODE; export it as an FMU (--format fmu)",
                 "linearize": "linearize reads a decoder-manifold model (the autoencoder reducer's), not yet a node "
                              "model's neural ODE"}, chart=True,
        motion=frozenset({"native", "python"})),
    "local-pca": Kind(
        "local-pca", "local-pca", False,
        "its Algorithm 1 switches clusters between steps, so it has no continuous right-hand side",
        {"native": CS_PAIRS, "python": _PYTHON_PAIRS},
        refused={"modelica": "", "casadi": "", "linearize": ""}, chart=True,
        motion=frozenset({"native", "python"})),
}
for _kind in KINDS.values():  # a discrete-time model is refused every continuous target for that reason
    for _target in ("modelica", "casadi", "linearize"):
        if not _kind.continuous:
            _kind.refused[_target] = f"a '{_kind.reducer}' model is discrete-time ({_kind.why_discrete}), so it cannot " \
                                     f"be turned into {TARGETS[_target]}; export it as an FMU for co-simulation"


def _learned_laws(model) -> list:
    springs = getattr(model, "springs", None)
    laws = getattr(springs, "laws", None)
    return list(laws.laws) if laws is not None else []


#: the activations the generated C and Modelica write (every one mc2fmu.models.mlp registers)
WRITTEN_ACTIVATIONS = ("tanh", "sigmoid", "softplus")


def _native_networks(model) -> str | None:
    """The native C's networks and step maps: a node model's dynamics network, a local-PCA
    model's chart encoder, and the decoder and step map of the model or of its chart."""
    chart = getattr(model, "chart", None) if model.kind != "manifold" else model
    nets = []
    if model.kind == "node":
        nets.append(("node", model.dynamics.net.activation))
    if model.kind == "local-pca" and chart.encoder is not None:
        nets.append(("encoder", chart.encoder.activation))
    nets.append(("decoder", chart.decoder.activation))
    bad = [f"{where} {act}" for where, act in nets if act not in WRITTEN_ACTIVATIONS]
    if bad or chart.step_map_name not in ("centred", "paper"):
        return (f"the native backend supports activations {', '.join(WRITTEN_ACTIVATIONS)} and step maps "
                f"centred/paper; this model has {', '.join(bad) or chart.step_map_name}")
    return None


def _written_laws(model) -> str | None:
    """The learned laws the native C and the Modelica model print (mc2fmu.models.spring_laws.traced):
    networks of any depth and widths, with an activation those targets write."""
    for law in _learned_laws(model):
        bad = [a for a in (law.g.activation, law.h.activation) if a not in WRITTEN_ACTIVATIONS]
        if bad:
            return (f"spring law {law.spring}: activation {bad[0]} is not written by this target "
                    f"({', '.join(WRITTEN_ACTIVATIONS)} are); export an FMU with --backend python")
    return None


def _activation(model) -> str | None:
    decoder = getattr(model, "decoder", None)
    act = getattr(decoder, "activation", None)
    if act is not None and act not in WRITTEN_ACTIVATIONS:
        return f"activation {act} is not written by this target (tanh, sigmoid, softplus are)"
    return None


#: rules on a model's content, by target ("fmu:<backend>" for an FMU backend): each returns why
#: the model cannot go to that target, or None
CONTENT_RULES: dict[str, tuple[Callable[[Any], str | None], ...]] = {
    "fmu:native": (_native_networks, _written_laws),
    "modelica": (_activation, _written_laws),
    "casadi": (),  # the export runs the run-time model's own code on CasADi's symbols: every model it has
}


#: the targets that take a physical variant of the trained mechanism file (``--mechanism``), for
#: the kinds with physical parameters; why the others do not
VARIANT_REFUSED = {"casadi": "--format casadi exports the trained physical parameters only; export the variant as an "
                             "FMU (--format fmu)"}


def variant_problems(reducer: str, target: str | None = None) -> list[str]:
    """Why a physical variant (``--mechanism``) cannot go to ``target`` (None: anywhere) for
    ``reducer``'s models (empty: it can)."""
    k = kind(reducer)
    if not k.physical_parameters:
        return [f"a '{reducer}' model learnt its dynamics from the training runs, so it runs the trained physical "
                "parameters only: use the mechanism file it was trained with, or train it on runs of the variant"]
    return [VARIANT_REFUSED[target]] if target in VARIANT_REFUSED else []


def kind(reducer: str) -> Kind:
    """The table's entry of ``reducer``."""
    try:
        return KINDS[reducer]
    except KeyError:
        raise ModelError(f"'{reducer}' models are not known to this version of mc2fmu (known: "
                         f"{', '.join(KINDS)}); a model directory of another version, or a damaged one") from None


def exported_by(reducer: str) -> list[str]:
    """The FMU backends that export the models of ``reducer``."""
    return [b for b in BACKENDS if KINDS[reducer].pairs(b)]


def option_problems(target: str, backend: str | None = None, fmi_version: int | None = None,
                    interface: str | None = None, reducer: str | None = None, pairs: bool = True) -> list[str]:
    """What is wrong with a request before the model is read (``reducer`` None: not known
    yet): the backend, FMI version and interface exist, and the reducer's models go there
    (``pairs=False``: the names alone, the rest once the reducer is known)."""
    out = []
    if target == "fmu":
        if fmi_version is not None and fmi_version not in FMI_VERSIONS:
            out.append(f"--fmi {fmi_version}: choose one of {', '.join(map(str, FMI_VERSIONS))}")
        if interface is not None and interface not in INTERFACES:
            out.append(f"--interface {interface}: choose one of {', '.join(INTERFACES)}")
        if backend is not None and backend not in BACKENDS:
            out.append(f"backend '{backend}' is not available; choose one of {', '.join(BACKENDS)}")
        if out or not pairs:
            return out
        backend = backend or DEFAULT_BACKEND
        pair = (fmi_version or 2, interface or "cs")
        kinds = [kind(reducer)] if reducer is not None else list(KINDS.values())
        if not any(k.pairs(backend) for k in kinds):
            others = exported_by(reducer)
            out.append(f"the {backend} backend does not export models of the '{reducer}' reducer; "
                       + (f"use --backend {' or '.join(others)}" if others else
                          "no backend does so far: run it with `mc2fmu simulate`"))
            return out
        if any(pair in k.pairs(backend) for k in kinds):
            return out
        discrete = reducer is not None and not kinds[0].continuous and pair[1] != "cs"
        if discrete:
            out.append(f"--interface {pair[1]}: a '{reducer}' model is discrete-time ({kinds[0].why_discrete}); "
                       "export it for co-simulation (--interface cs)")
        # what the backend cannot write for these models apart from the interface the model refuses
        wanted = (pair[0], "cs") if discrete else pair
        if not any(wanted in k.pairs(backend) for k in kinds):
            written = frozenset().union(*(k.pairs(backend) for k in kinds))
            others = [b for b in BACKENDS if b != backend and any(wanted in k.pairs(b) for k in kinds)]
            out.append(f"--fmi {wanted[0]} --interface {wanted[1]}: the {backend} backend writes "
                       f"{_pairs_text(written)} only" + (f"; use --backend {' or '.join(others)}" if others else ""))
        return out
    if reducer is not None and target in kind(reducer).refused:
        out.append(kind(reducer).refused[target])
    return out


def _pairs_text(pairs) -> str:
    return ", ".join(f"FMI {v}.0 {INTERFACES[i]}" for v, i in sorted(pairs) if i != "both") or "nothing"


def problems(artifact, target: str, backend: str | None = None, fmi_version: int | None = None,
             interface: str | None = None) -> list[str]:
    """Everything that keeps ``artifact``'s model from ``target`` (empty: supported): the
    table's entry for its reducer, then the content rules."""
    out = option_problems(target, backend, fmi_version, interface, artifact.reducer)
    if out:
        return out
    model_kind = getattr(artifact.model, "kind", None)
    if model_kind != kind(artifact.reducer).model:
        return [f"the model.json says reducer '{artifact.reducer}', whose models are of kind "
                f"'{kind(artifact.reducer).model}', but it holds a '{model_kind}' model (a damaged model directory)"]
    key = f"fmu:{backend or DEFAULT_BACKEND}" if target == "fmu" else target
    for rule in CONTENT_RULES.get(key, ()):
        why = rule(artifact.model)
        if why:
            out.append(why)
    return out


def require(artifact, target: str, error: type[Exception], **options) -> None:
    """Raise ``error`` with ``artifact``'s path and every problem of :func:`problems`, if any."""
    found = problems(artifact, target, **options)
    if found:
        where = getattr(artifact, "path", None) or getattr(artifact, "source", "")
        raise error([f"{where}: {p}" if where else p for p in found])


def support_table() -> list[list[str]]:
    """The docs' table (docs/reducers.md): per reducer, each target's support, as rows of
    text (header first)."""
    header = ["reducer", "model", "continuous", *[f"FMU {b}" for b in BACKENDS], "Modelica", "CasADi", "linearize",
              "physical parameters", "motion outputs"]
    rows = [header]
    for k in KINDS.values():
        fmus = [_pairs_text(k.pairs(b)) if k.pairs(b) else "no" for b in BACKENDS]
        rows.append([k.reducer, k.model, "yes" if k.continuous else "no", *fmus,
                     *["yes" if t not in k.refused else "no" for t in ("modelica", "casadi", "linearize")],
                     "yes" if k.physical_parameters else "no",
                     ", ".join(t for t in ("native", "python", "modelica", "casadi") if t in k.motion) or "no"])
    return rows


def support_text(indent: str = "  ") -> str:
    """What each reducer's models go to, one paragraph per reducer (``export --help``)."""
    lines = []
    for k in KINDS.values():
        fmus = "; ".join(f"FMU {b}: {_pairs_text(k.pairs(b))}" for b in BACKENDS if k.pairs(b))
        others = [t for t in ("modelica", "casadi", "linearize") if t not in k.refused]
        refused = [t for t in ("modelica", "casadi", "linearize") if t in k.refused]
        text = f"{k.reducer}: {fmus}"
        if others:
            text += "; " + ", ".join(others)
        if k.physical_parameters:
            text += "; with the physical parameters"
        if k.motion:
            text += f"; velocities and energies as outputs ({', '.join(sorted(k.motion))})"
        if refused:
            why = f"discrete-time: {k.why_discrete}" if not k.continuous else "not yet written for its model"
            text += f" (not {', '.join(refused)}: {why})"
        lines.append(textwrap.fill(text, width=92, initial_indent=indent, subsequent_indent=indent + "  "))
    return "\n".join(lines)


def markdown_table() -> str:
    """:func:`support_table` as the markdown table docs/reducers.md holds."""
    rows = support_table()
    return "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])] +
                     ["| " + " | ".join(r) + " |" for r in rows[1:]])


if __name__ == "__main__":
    print(markdown_table())
