"""Training checkpoints: their file, their checks on resume, and what an option a checkpoint
predates counts as (each loss term's :attr:`~.loss.LossTerm.before`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import numpy as np
import torch

from ...errors import TrainingError
from ...models.terms import TermLibrary
from ..base import Checkpointer
from .config import TrainConfig
from .loss import before_options
from .samples import Windows
from .torch_model import TorchManifoldModel

#: 4: the L-BFGS of :mod:`.lbfgs` (its memory in ring buffers) with 200 pairs (3: torch's with 100,
#: 2: with 50); an optimiser state of an earlier version would not resume this optimiser
CHECKPOINT_VERSION = 4


def write_checkpoint(checkpoint: Checkpointer, state: dict) -> None:
    checkpoint.save(lambda tmp: torch.save(state, tmp))


def read_checkpoint(checkpoint: Checkpointer, config: dict, data_hash: str) -> dict:
    p = checkpoint.path
    if not p.exists():
        raise TrainingError(f"{p}: no checkpoint to resume from; run without --resume to start training")
    try:
        state = torch.load(p, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user error
        raise TrainingError(f"{p}: not a readable training checkpoint ({type(exc).__name__}); "
                            "delete it and run without --resume to start over") from None
    if not isinstance(state, dict) or state.get("version") != CHECKPOINT_VERSION:
        raise TrainingError(f"{p}: not a training checkpoint of this mc2fmu version; "
                            "delete it and run without --resume to start over")
    fix = f"resume with the same data and options, or delete {p} (and drop --resume) to start over"
    try:
        saved = json.loads(state["config"])
        saved_hash = str(state["data_hash"])
        if not isinstance(saved, dict):
            raise TypeError("its options are not a table")
    except (KeyError, TypeError, ValueError) as exc:
        raise TrainingError(f"{p}: a damaged training checkpoint ({type(exc).__name__}); delete it and run without "
                            "--resume to start over") from None
    # an option a checkpoint predates counts as what training did before it existed: its default, or
    # for a term that came in off and became the default later, off
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig) if f.default is not dataclasses.MISSING}
    defaults.update(before_options())
    changed = [f"{k} {saved.get(k, defaults.get(k))!r} -> {v!r}" for k, v in config.items()
               if saved.get(k, defaults.get(k)) != v]
    if changed:
        raise TrainingError(f"{p}: the checkpoint was made with other training options "
                            f"({'; '.join(changed)}): {fix}")
    if saved_hash != data_hash:
        raise TrainingError(f"{p}: the checkpoint was made from other training data "
                            f"(hash {saved_hash[:12]}, this data {data_hash[:12]}): {fix}")
    return state


def data_hash(W: Windows, model: TorchManifoldModel) -> str:
    h = hashlib.sha256()
    physics = [model.M, model.f_g, model.f_B, model.f_C] + [getattr(model, b) for b in model.SPRING_BUFFERS]
    for a in W.arrays() + [t.numpy() for t in physics]:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def check_resumed_state(state: dict, n_steps: int, source) -> int:
    """The step a checkpoint resumes at, after the checks that need no model: a whole number
    in ``0..n_steps`` and a best validation loss that is a number (``inf`` included: after a
    warm-up, or when the first L-BFGS share broke the model, no finite one exists yet)."""
    first, best = state["step"], state["best_val"]
    if not isinstance(first, int) or isinstance(first, bool) or not 0 <= first <= n_steps \
            or not isinstance(best, float) or math.isnan(best):
        raise TrainingError(f"{source}: the checkpoint's step {first!r} (of {n_steps}) or its best validation loss "
                            f"{best!r} is not one a training leaves; delete it and run without --resume")
    return first


def library_state(library: TermLibrary | None) -> dict | None:
    if library is None:
        return None
    return {"kinds": torch.as_tensor(library.kinds), "index": torch.as_tensor(library.index),
            "param": torch.as_tensor(library.param), "Xi": torch.as_tensor(library.Xi),
            "groups": ",".join(library.groups), "kappa": library.kappa}


def library_from_state(state: dict) -> TermLibrary:
    return TermLibrary(state["kinds"].numpy(), state["index"].numpy(), state["param"].numpy(), state["Xi"].numpy(),
                       tuple(g for g in state["groups"].split(",") if g), float(state["kappa"]))
