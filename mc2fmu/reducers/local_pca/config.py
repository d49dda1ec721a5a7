"""The ``local-pca`` reducer's options (no torch import: the command line reads them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import TrainingError
from ...models.local_linear import DEFAULT_EPS
from ..base import finite_number, whole_number_problem
from ..chart import chart_problems, coords_field, dof_field, from_field, seed_field

#: the default cluster count, and the fewest samples a default cluster is given.  Measured
#: (benchmarks/local_pca.py, 10 s runs at 1 ms): 160 clusters against 40 improve the 1-DOF
#: linkages 2-15x on held-out runs and leave the MacPherson unchanged; more clusters than
#: samples / 50 leave clusters too thin to fit their stiffness and damping
DEFAULT_CLUSTERS, MIN_SAMPLES_PER_CLUSTER = 160, 50


@dataclass(frozen=True)
class LocalPcaConfig:
    dof: int | str = dof_field()
    coords: tuple[str, ...] = coords_field()
    from_model: str = from_field()
    clusters: int = field(default=0, metadata={
        "flag": "--clusters", "help": f"local-pca: k-means clusters of the natural coordinates (default "
        f"{DEFAULT_CLUSTERS}, fewer when the data has under {MIN_SAMPLES_PER_CLUSTER} samples per cluster)"})
    modes: int = field(default=0, metadata={
        "flag": "--modes", "help": "local-pca: PCA modes per cluster (default: the DOF; more modes have no stiffness "
        "of their own and are measured to diverge)"})
    eps: float = field(default=DEFAULT_EPS, metadata={
        "flag": "--eps", "help": f"local-pca: singular values of V_i^T V_j above 1 - eps span the subspace a switch "
        f"keeps (default {DEFAULT_EPS:g})"})
    seed: int = seed_field()

    def validate(self) -> None:
        problems = chart_problems(self)
        for problem in (whole_number_problem("--clusters", self.clusters, 0, what="a number of clusters (0: the default)"),
                        whole_number_problem("--modes", self.modes, 0, what="a number of modes (0: the DOF)")):
            if problem:
                problems.append(problem)
        if not ((e := finite_number(self.eps)) is not None and 0 < e < 1):
            problems.append(f"--eps {self.eps}: must be in (0, 1)")
        if problems:
            raise TrainingError(problems)

    def cluster_count(self, samples: int) -> int:
        return self.clusters or max(1, min(DEFAULT_CLUSTERS, samples // MIN_SAMPLES_PER_CLUSTER))
