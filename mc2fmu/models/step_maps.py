"""The one-step maps of the second-order reduced ODE, for any array library.

A step map advances ``q_{i-1}, q_i`` to ``q_{i+1}`` given ``acceleration(v)``, the reduced
acceleration at ``q_i`` (and the input ``u_i``) as a function of the velocity only: the
position-dependent terms are evaluated once per step by the caller.  The maps use nothing
but arithmetic on their arguments, so the same object drives training (torch tensors), the
run-time model and ``mc2fmu simulate`` (numpy) and the exported graphs: what is trained is
what runs.

String registry :data:`STEP_MAPS`; a new map is a subclass of :class:`StepMap` registered
with :func:`register_step_map`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ModelError

Array = Any  # numpy.ndarray or torch.Tensor: the maps use arithmetic only


class StepMap:
    """Base class: ``step`` and the velocity it uses at ``q_i``, taken from a data triplet."""

    name: str = ""
    description: str = ""
    #: global order of accuracy (an undamped free run's energy drift falls as dt^order:
    #: benchmarks/motion_outputs.py)
    order: int = 0

    def step(self, acceleration: Callable[[Array], Array], q_prev: Array, q: Array, dt) -> Array:
        raise NotImplementedError

    def training_velocity(self, q_prev: Array, q: Array, q_next: Array, dt) -> Array:
        raise NotImplementedError


class PaperMap(StepMap):
    """Seed 000, Algorithm 1: ``v = (q_i - q_{i-1})/dt``, ``q_{i+1} = 2 q_i - q_{i-1} + dt^2 a(v)``.
    Its velocity lags half a step: an error floor of its own (docs/method.md, the step maps)."""

    name = "paper"
    description = "seed 000 Algorithm 1: velocity (q_i - q_{i-1})/dt in G_m"
    order = 1

    def step(self, acceleration, q_prev, q, dt):
        return 2.0 * q - q_prev + dt * dt * acceleration((q - q_prev) / dt)

    def training_velocity(self, q_prev, q, q_next, dt):
        return (q - q_prev) / dt


class CentredMap(StepMap):
    """The same update with the centred velocity ``v = (q_{i+1} - q_{i-1}) / (2 dt)``,
    ``q_{i+1}`` predicted by one ``paper`` pass: time-symmetric, second order in the velocity,
    one position evaluation per step (only the velocity terms are evaluated twice)."""

    name = "centred"
    description = "Stormer-Verlet with a centred velocity in G_m (one fixed-point pass)"
    order = 2

    def step(self, acceleration, q_prev, q, dt):
        base = 2.0 * q - q_prev
        q_pred = base + dt * dt * acceleration((q - q_prev) / dt)
        return base + dt * dt * acceleration((q_pred - q_prev) / (2.0 * dt))

    def training_velocity(self, q_prev, q, q_next, dt):
        return (q_next - q_prev) / (2.0 * dt)


STEP_MAPS: dict[str, StepMap] = {}


def register_step_map(step_map: StepMap) -> StepMap:
    STEP_MAPS[step_map.name] = step_map
    return step_map


register_step_map(CentredMap())
register_step_map(PaperMap())


def get_step_map(name: str) -> StepMap:
    try:
        return STEP_MAPS[name]
    except KeyError:
        raise ModelError(f"step map '{name}' is not available; choose one of {', '.join(STEP_MAPS)}") from None
