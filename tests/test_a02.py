"""The IFToMM A02 N four-bar (81 bodies) against the benchmark's published ADAMS solution
(``examples/a02/adams_B0.csv``): the Exudyn model mc2fmu's A02 data comes from, and the degrees
of freedom estimated from that data.  The first 5 s of the run (about 2.6 turns of the first
crank, through the collinear configurations) are simulated once per session on a 1 ms grid;
the whole 20 s run, the degrees of freedom estimated from it (every configuration must be
passed five times: about ten turns) and the reduced model trained on it with the defaults are
``benchmarks/targets.py a02``'s."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("exudyn")

SECONDS = 5.0


@pytest.fixture(scope="module")
def a02_data():
    from examples import a02

    return a02.simulate(t_end=SECONDS, output_step=1e-3)


def test_the_adams_file_is_read_whole():
    from examples import a02

    adams = a02.read_adams()
    assert adams.shape == (401, 3)
    assert np.allclose(adams[:, 0], np.arange(401) * 0.05)
    assert np.allclose(adams[0, 1:], [0.0, 1.0], atol=1e-9)  # B0 starts straight above the first pivot


def test_exudyn_reproduces_the_adams_solution(a02_data):
    """B0 within the benchmark's high-precision tolerance (1e-3 m) over the simulated span."""
    from examples import a02

    adams = a02.read_adams()
    adams = adams[adams[:, 0] <= SECONDS + 1e-9]
    assert len(adams) == int(SECONDS / 0.05) + 1
    assert a02.b0_error(a02_data["t"], a02_data["B0"], adams) < 1e-3


def test_the_chain_turns_through_the_collinear_configurations(a02_data):
    """What makes A02 hard holds over the simulated span: the first crank makes full turns."""
    R = a02_data["rotation"][:, 0]
    angle = np.unwrap(np.arctan2(R[:, 1, 0], R[:, 0, 0]))
    assert np.ptp(angle) > 4 * np.pi
