"""The native FMUs against an adversarial host: the misuse matrix of ``tests/c_host/misuse.c``
for FMI 2/3 x co-simulation/model exchange, each case in a fresh process.

What a host may call in which state comes from the standard's tables, written in
``tests/c_host/misuse.py`` apart from the FMU's code.  The full matrix (every state x every
call, and the named NULL-pointer, non-finite, time and FMU-state cases) runs here on the
four-bar and the slider-crank; the benchmark ``benchmarks/fmu_misuse.py`` runs it on more
models and everything under valgrind.  Here valgrind runs the NULL cases of two variants."""

from __future__ import annotations

import pytest

from tests.c_host import misuse
from tests.c_host.run import have_valgrind

VARIANTS = [(2, "cs"), (2, "me"), (3, "cs"), (3, "me")]


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return misuse.build(tmp_path_factory.mktemp("misuse"))


@pytest.fixture(scope="module")
def variant(native, tmp_path_factory):
    cache = {}

    def get(name: str, fmi: int, iface: str) -> misuse.Variant:
        if (name, fmi, iface) not in cache:
            fmu = native(name, fmi, iface)[0]
            cache[name, fmi, iface] = misuse.Variant.unpack(fmu, tmp_path_factory.mktemp(f"{name}-{fmi}{iface}"), iface)
        return cache[name, fmi, iface]

    return get


def _report(bad: list[misuse.Outcome]) -> str:
    return "\n".join(f"{o.case}: {o.problems}\n{o.stderr[-600:]}" for o in bad[:8])


@pytest.mark.parametrize("name, fmi, iface", [("four_bar", *v) for v in VARIANTS] +
                         [("slider_crank", 3, "me"), ("slider_crank", 2, "cs")])
def test_the_misuse_matrix_is_clean(probe, variant, name, fmi, iface):
    """0 crashes, 0 hangs, 0 OK with a non-finite value, 0 OK for a call the standard forbids
    there, and every legal call OK (the matrix used to find 5-9 crashes and 6-15 forbidden
    calls answered OK per variant)."""
    v = variant(name, fmi, iface)
    cases = v.cases(probe)
    counts, bad = misuse.run_matrix(probe, v, cases)
    assert not bad, f"{counts}\n{_report(bad)}"
    table = misuse.allowed(fmi, iface)
    forbidden = sum(1 for p in misuse.PHASES[iface] for call, ok in table.items() if p not in ok)
    assert len(cases) > 100 and forbidden > 60  # not a vacuous matrix


@pytest.mark.parametrize("fmi, iface", VARIANTS)
def test_refusals_name_the_call_and_the_state(probe, variant, fmi, iface):
    v = variant("four_bar", fmi, iface)
    out = misuse.run_case(probe, v, "instantiated:terminate")
    assert out.lines[-2][:2] == ["terminate", "3"]
    state = "instantiated" if fmi == 2 else "Instantiated"
    assert f"fmi{fmi}Terminate refused in {state}: the standard allows it in" in out.stderr
    out = misuse.run_case(probe, v, "null_get")
    assert f"fmi{fmi}{'GetReal' if fmi == 2 else 'GetFloat64'}: the values is NULL" in out.stderr


@pytest.mark.parametrize("fmi, iface", VARIANTS)
def test_an_error_holds_until_reset_or_a_restored_state(probe, variant, fmi, iface):
    """After an Error every call but reset and the FMU-state calls is refused; restoring a
    state taken before it, or resetting, makes the instance run again."""
    v = variant("four_bar", fmi, iface)
    out = misuse.run_case(probe, v, "restore_after_failure")
    assert not out.problems, out
    labels = [line[0] for line in out.lines]
    after = labels.index("get q[1] after the error")
    assert out.lines[after][1] == "3" and out.lines[-2][1] == "0", out.lines
    assert "refused: the FMU failed earlier" in out.stderr
    assert not misuse.run_case(probe, v, "reset_after_failure").problems


@pytest.mark.parametrize("fmi, iface", VARIANTS)
def test_unreleased_fmu_states_are_freed_at_free_instance(probe, variant, fmi, iface):
    """Two FMU states per instantiate/free cycle never freed by the host: the resident memory
    grows by under 10 B per cycle (it grew by about 400 B per state)."""
    out = misuse.run_case(probe, variant("four_bar", fmi, iface), "leak_cycles")
    assert not out.problems and out.rss_per_cycle is not None
    assert out.rss_per_cycle < 10, out.rss_per_cycle


@pytest.mark.skipif(not have_valgrind(), reason="valgrind is not installed")
@pytest.mark.parametrize("fmi, iface", [(3, "me"), (2, "cs")])
def test_null_pointer_cases_under_valgrind(probe, variant, fmi, iface):
    """No invalid read or write and nothing definitely lost, for every NULL-pointer case and
    the FMU states left to freeInstance."""
    v = variant("four_bar", fmi, iface)
    cases = [c for c in misuse.named_cases(probe) if c.startswith("null_")] + ["unreleased_states", "foreign_state"]
    counts, bad = misuse.run_matrix(probe, v, cases, wrapper=misuse.VALGRIND, timeout=120)
    assert not bad, f"{counts}\n{_report(bad)}"


@pytest.mark.parametrize("fmi, iface", VARIANTS)
def test_log_categories(probe, variant, fmi, iface):
    """A warning (leaving the training envelope) reaches the host only when its category is on
    (instantiated with loggingOn = false, then setDebugLogging(logStatusWarning)); errors always;
    an unknown category is refused."""
    v = variant("four_bar", fmi, iface)
    silent = misuse.run_case(probe, v, "warning_silent")
    enabled = misuse.run_case(probe, v, "warning_enabled")
    assert not silent.problems and not enabled.problems, (silent, enabled)
    assert "left its training envelope" not in silent.stderr
    assert enabled.stderr.count("[1 logStatusWarning] mc2fmu: the model left its training envelope") == 1
    out = misuse.run_case(probe, v, "unknown_category")
    assert not out.problems and "unknown log category logEverything" in out.stderr
