"""The trained model artifact: a directory with ``model.json`` and ``weights.npz``.

Later stages (simulate, export, validate) read only this.  ``model.json`` holds everything
they need: mechanism, NC layout, dof, dt, architecture, normalisation, step map, the training
envelope, the default initial state, training metrics, library versions and the seed.
``weights.npz`` holds every tensor (network weights, normalisation buffers, ``M`` and the
force model) under its ``state_dict`` name, readable without torch.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import __version__
from .envelope import Envelope
from .errors import ModelError
from .mechanism import Mechanism, mechanism_from_dict
from .model import Decoder, LinearEncoder, NeuralEncoder, ReducedModel, unwrap_angles
from .natural import ForceModel, NCLayout, SpringModel, finite_difference_velocity
from .poses import give_default_mode

FORMAT = "mc2fmu-model"
FORMAT_VERSION = 1


@dataclass
class ModelArtifact:
    model: ReducedModel
    meta: dict[str, Any]
    mechanism: Mechanism
    layout: NCLayout
    envelope: Envelope
    path: str = ""

    @property
    def dt(self) -> float:
        return float(self.meta["dt"])

    @property
    def dof(self) -> int:
        return int(self.meta["dof"])

    @property
    def angles(self) -> list[bool]:
        return list(self.meta["angles"])

    def encode(self, x: np.ndarray) -> np.ndarray:
        """``q`` (n_t, m) of a time series of ``x``, angle-type columns unwrapped in time."""
        with torch.no_grad():
            q = self.model.encoder(torch.as_tensor(np.atleast_2d(x), dtype=torch.float64)).numpy()
        return unwrap_angles(q, self.angles)

    def decode(self, q: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.model.decoder(torch.as_tensor(np.atleast_2d(q), dtype=torch.float64)).numpy()


def _versions() -> dict[str, str]:
    import scipy

    return {"mc2fmu": __version__, "torch": torch.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "python": platform.python_version()}


def describe_training_data(model: ReducedModel, angles: list[bool], runs, dt: float) -> tuple[Envelope, dict]:
    """Envelope of the training runs and the first run's initial state ``(q0, qd0)``."""
    qs, qds, us, rt = [], [], [], 0.0
    first = None
    with torch.no_grad():
        for run in runs:
            x = torch.as_tensor(run.x, dtype=torch.float64)
            q = unwrap_angles(model.encoder(x).numpy(), angles)
            qd = finite_difference_velocity(q, dt)
            rt = max(rt, float((model.decoder(torch.as_tensor(q)) - x).abs().max()))
            qs.append(q); qds.append(qd); us.append(run.u)
            if first is None:
                first = {"q": q[0].tolist(), "qd": qd[0].tolist(), "u": run.u[0].tolist()}
    env = Envelope.from_data(np.concatenate(qs), np.concatenate(qds), np.concatenate(us), rt, angles)
    return env, first


def save_model(path: str | os.PathLike, model: ReducedModel, meta: dict[str, Any]) -> None:
    """Write the artifact directory atomically (a complete directory or nothing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    give_default_mode(tmp)
    try:
        state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
        np.savez(tmp / "weights.npz", **state)
        full = {"format": FORMAT, "version": FORMAT_VERSION, "versions": _versions(), **meta}
        (tmp / "model.json").write_text(json.dumps(full, indent=2))
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def load_model(path: str | os.PathLike) -> ModelArtifact:
    path = Path(path)
    mj, wz = path / "model.json", path / "weights.npz"
    if not path.is_dir():
        raise ModelError(f"{path}: not a model directory; create one with `mc2fmu train ... -o {path}`")
    for f in (mj, wz):
        if not f.exists():
            raise ModelError(f"{path}: missing {f.name}; the model directory is incomplete (re-run `mc2fmu train`)")
    try:
        meta = json.loads(mj.read_text())
    except json.JSONDecodeError as exc:
        raise ModelError(f"{mj}: line {exc.lineno}: malformed JSON: {exc.msg}") from None
    if meta.get("format") != FORMAT:
        raise ModelError(f"{mj}: format is {meta.get('format')!r}, expected {FORMAT!r}")
    mechanism = mechanism_from_dict(meta["mechanism"], source=f"{mj}:mechanism")
    layout = NCLayout.from_dict(meta["layout"])
    with np.load(wz) as w:
        state = {k: torch.as_tensor(w[k]) for k in w.files}
    arch = meta["architecture"]
    n_x, m = layout.size, int(meta["dof"])
    z = np.zeros
    decoder = Decoder(m, n_x, arch["hidden"], arch["activation"], meta["angles"], z(m), z(m) + 1, z(n_x), z(n_x) + 1)
    if meta["coords"]:
        encoder = LinearEncoder(z((m, n_x)), z(m))
    else:
        encoder = NeuralEncoder(n_x, m, arch["encoder_hidden"], arch["activation"], meta["angles"], z(n_x), z(n_x) + 1)
    n_u, n_s = len(mechanism.inputs), len(mechanism.springs)
    springs = SpringModel(z((n_s, 3, n_x)), z((n_s, 3)), z(n_s), z(n_s), z(n_s))
    model = ReducedModel(decoder, encoder, z((n_x, n_x)), ForceModel(z(n_x), z((n_x, n_u)), z((n_u, n_x, n_x)), springs),
                         arch["step_map"])
    if n_s == 0:  # models saved before springs existed have no spring buffers
        state.update({b: getattr(model, b) for b in model.SPRING_BUFFERS if b not in state})
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise ModelError(f"{wz}: weights do not match model.json ({str(exc).splitlines()[0]})") from None
    model.eval()
    return ModelArtifact(model, meta, mechanism, layout, Envelope.from_dict(meta["envelope"]), str(path))
