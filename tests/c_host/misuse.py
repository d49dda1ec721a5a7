"""The misuse matrix of a native FMU: build ``misuse.c``, run every case in a fresh process and
classify what the FMU answered (tests and ``benchmarks/fmu_misuse.py``).

A case is ``PHASE:CALL`` (reach PHASE by legal calls, make CALL once) or a named case of
misuse.c (NULL pointers, non-finite values, times, FMU states).  What the standard allows in
each state is written here from the FMI 2.0 and 3.0 state tables (FMI 2.0.4 sections 3.2.3 and
4.2.4; FMI 3.0 sections 2.3, 3.2 and 4.2), apart from the FMU's code.  After an Error the
product's rule applies: everything but reset and the FMU-state calls is refused until the
host resets the instance or restores a state.

Classes: ``crash`` (the process died: a signal, an abort, no final line), ``hang`` (over the
timeout), ``ok_nonfinite`` (OK or Warning with a non-finite value), ``ok_forbidden`` (OK for a
call the standard forbids there), ``legal_refused`` (Error for a call that is legal there) and,
under valgrind, ``memcheck`` (invalid reads or writes, or memory definitely lost).
"""

from __future__ import annotations

import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .run import fmi_headers

SOURCE = Path(__file__).with_name("misuse.c")

PHASES = {"cs": ("instantiated", "init", "step", "terminated", "failed"),
          "me": ("instantiated", "init", "event", "continuous", "terminated", "failed")}
I, N, E, C, S, T = "instantiated", "init", "event", "continuous", "step", "terminated"
RUNNING = {N, E, C, S, T}


def allowed(fmi: int, iface: str) -> dict[str, set[str]]:
    """CALL -> the states where the standard allows it, for this FMU (its capabilities included:
    no directional derivatives in co-simulation, no Event Mode in co-simulation, the start
    parameters fixed, q[i] a continuous state in model exchange and an output in co-simulation)."""
    me = iface == "me"
    table = {
        "enterInitializationMode": {I},
        "exitInitializationMode": {N},
        "terminate": {E, C} if me else {S},
        "reset": {I, N, E, C, S, T, "failed"},
        "getFMUState": {I, N, E, C, S, T, "failed"},
        "get q": ({N} if fmi == 2 else {I, N}) | {E, C, S, T},
        "set input": {I, N, E, C, S},
        "set q_start": {I, N},
        "set q": {E, C} if (fmi == 3 and me) else set(),
        "directionalDerivative": {N, E, C, T} if me else set(),
        "enterEventMode": ({E, C} if fmi == 2 else {C}) if me else set(),
        "discreteStates": {E} if me else set(),
        "enterContinuousTimeMode": {E} if me else set(),
        "completedIntegratorStep": {C} if me else set(),
        "setTime": ({E, C} if fmi == 2 else {C}) if me else set(),  # FMI 3.0 section 3.2.1
        "setContinuousStates": {C} if me else set(),
        "getContinuousStates": {N, E, C, T} if me else set(),
        "getEventIndicators": {N, E, C, T} if me else set(),
        "getDerivatives": ({E, C, T} if fmi == 2 else {N, E, C, T}) if me else set(),
        "getNominals": ({I, E, C, T} if fmi == 2 else {N, E, C, T}) if me else set(),
        "doStep": set() if me else {S},
    }
    if fmi == 2:
        table["setupExperiment"] = {I}
    else:
        table["getNumberOfContinuousStates"] = {I, E} if me else set()  # FMI 3.0 sections 2.3.2, 2.3.5
        table["enterStepMode"] = set()  # it leaves Event Mode, which this co-simulation FMU has not
        table["evaluateDiscreteStates"] = set()  # providesEvaluateDiscreteStates = false
    return table


def build(out_dir: Path, flags: tuple[str, ...] = ("-O0", "-g")) -> Path:
    exe = Path(out_dir) / "misuse"
    cmd = ["gcc", "-std=c99", *flags, "-Wall", "-Wextra", "-I", str(fmi_headers()), str(SOURCE), "-o", str(exe),
           "-ldl", "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or proc.stderr.strip():
        raise RuntimeError(f"building misuse.c failed or warned:\n{proc.stderr}")
    return exe


def named_cases(exe: Path) -> list[str]:
    return subprocess.run([str(exe), "--list"], capture_output=True, text=True, check=True).stdout.split()


@dataclass
class Variant:
    """One native FMU unpacked: its library and what misuse.c needs to drive it."""

    fmi: int
    iface: str
    lib: Path
    token: str
    vrs: str
    has_input: bool

    @classmethod
    def unpack(cls, fmu: Path, out_dir: Path, iface: str) -> "Variant":
        from fmpy import read_model_description

        out_dir = Path(out_dir)
        with zipfile.ZipFile(fmu) as z:
            z.extractall(out_dir)
        md = read_model_description(str(fmu))
        fmi = int(md.fmiVersion[0])
        kind = md.modelExchange if iface == "me" else md.coSimulation
        vr = {v.name: v.valueReference for v in md.modelVariables}
        inputs = [v.valueReference for v in md.modelVariables if v.causality == "input"]
        nx = 2 * sum(1 for name in vr if name.startswith("q_start["))
        token = md.guid if fmi == 2 else md.instantiationToken
        vrs = f"{vr['q[1]']},{vr['qd[1]']},{vr['q_start[1]']},{inputs[0] if inputs else -1}," \
              f"{vr.get('der(qd[1])', 0)},{nx}"
        platform = "linux64" if fmi == 2 else "x86_64-linux"
        return cls(fmi, iface, out_dir / "binaries" / platform / f"{kind.modelIdentifier}.so", token, vrs,
                   bool(inputs))

    def cases(self, exe: Path) -> list[str]:
        """Every PHASE:CALL of the table and every named case."""
        calls = allowed(self.fmi, self.iface)
        out = [f"{phase}:{call}" for phase in PHASES[self.iface] for call in calls
               if self.has_input or call != "set input"]
        return out + named_cases(exe)


@dataclass
class Outcome:
    case: str
    problems: dict[str, list[str]] = field(default_factory=dict)  # class -> the calls
    lines: list[list[str]] = field(default_factory=list)
    stderr: str = ""
    rss_per_cycle: float | None = None

    def add(self, kind: str, what: str) -> None:
        self.problems.setdefault(kind, []).append(what)


def run_case(exe: Path, variant: Variant, case: str, *, wrapper: tuple[str, ...] = (), timeout: float = 30,
             work: Path | None = None) -> Outcome:
    """One case in a fresh process; classifies every call it made."""
    out = Outcome(case)
    cmd = [*wrapper, str(exe), str(variant.lib), variant.token, str(variant.fmi), variant.iface, variant.vrs, case]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={}, cwd=work)
    except subprocess.TimeoutExpired:
        out.add("hang", case)
        return out
    out.stderr = proc.stderr
    lines = proc.stdout.splitlines()
    if proc.returncode in (2, 3) and not wrapper:
        raise RuntimeError(f"misuse.c could not run {case}: {proc.stderr[-2000:]}")
    if proc.returncode == 99:
        out.add("memcheck", case)
    elif proc.returncode != 0 or not lines or lines[-1] != "done":
        out.add("crash", f"{case} (exit {proc.returncode})")
    probe_expect = None
    if ":" in case:
        phase, call = case.split(":", 1)
        probe_expect = "ok" if phase in allowed(variant.fmi, variant.iface)[call] else "refuse"
    for line in lines:
        parts = line.split("\t")
        if parts[0] == "rss_per_cycle":
            out.rss_per_cycle = float(parts[1])
            continue
        if len(parts) != 4:
            continue
        out.lines.append(parts)
        label, status, expect, finite = parts[0], int(parts[1]), parts[2], parts[3] == "1"
        if expect == "probe":
            expect = probe_expect
        ok = 0 <= status <= 1
        if expect == "ok" and not ok:
            out.add("legal_refused", label)
        if expect == "refuse" and ok:
            out.add("ok_forbidden", label)
        if ok and not finite:
            out.add("ok_nonfinite", label)
    return out


CLASSES = ("crash", "hang", "ok_nonfinite", "ok_forbidden", "legal_refused", "memcheck")


def run_matrix(exe: Path, variant: Variant, cases: list[str], **kw) -> tuple[dict[str, int], list[Outcome]]:
    """Every case; returns the count of cases per class and the outcomes with a problem."""
    counts = dict.fromkeys(CLASSES, 0)
    bad = []
    for case in cases:
        outcome = run_case(exe, variant, case, **kw)
        for kind in outcome.problems:
            counts[kind] += 1
        if outcome.problems:
            bad.append(outcome)
    return counts, bad


VALGRIND = ("valgrind", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
            "--show-leak-kinds=definite", "-q")
