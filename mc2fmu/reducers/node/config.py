"""The ``node`` reducer's options (no torch import: the command line reads them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import TrainingError
from ..base import int_list, whole_number_problem, widths_problem
from ..chart import chart_problems, coords_field, dof_field, from_field, seed_field


@dataclass(frozen=True)
class NodeReducerConfig:
    dof: int | str = dof_field()
    coords: tuple[str, ...] = coords_field()
    from_model: str = from_field()
    node_hidden: tuple[int, ...] = field(default=(256, 256), metadata={
        "flag": "--node-hidden", "help": "the neural ODE's hidden widths (default 256,256, the paper's)",
        "metavar": "W,...", "parse": int_list})
    node_epochs: int = field(default=50, metadata={
        "flag": "--node-epochs", "help": "epochs of 256-sample batches (default 50; the paper's total learning-rate "
        "decay is spread over them)"})
    seed: int = seed_field()

    def validate(self) -> None:
        problems = chart_problems(self)
        for problem in (whole_number_problem("--node-epochs", self.node_epochs, 1, what="a number of epochs"),
                        widths_problem("--node-hidden", self.node_hidden)):
            if problem:
                problems.append(problem)
        if problems:
            raise TrainingError(problems)
