"""The one error hierarchy of mc2fmu.

Every error a user can cause derives from :class:`Mc2fmuError`; the CLI turns it into
a message on stderr and a non-zero exit, never a traceback.  A message names the file,
the item (row, column, body, key), the value, the rule and, where there is one, the fix.
Validators collect every problem they find and raise once with all of them.
"""

from __future__ import annotations

from collections.abc import Iterable


class Mc2fmuError(Exception):
    """Base class of every error mc2fmu reports to a user.

    ``problems`` holds one line per problem found; ``str(err)`` joins them.
    """

    def __init__(self, problems: str | Iterable[str]):
        if isinstance(problems, str):
            problems = [problems]
        self.problems: list[str] = list(problems)
        if not self.problems:
            raise ValueError("an Mc2fmuError needs at least one problem")
        super().__init__("\n".join(self.problems))


class MechanismError(Mc2fmuError):
    """The mechanism description (TOML/JSON) is malformed or physically invalid."""


class PoseDataError(Mc2fmuError):
    """A pose export (CSV/NPZ run file) is malformed or inconsistent with the mechanism."""


class DatasetError(Mc2fmuError):
    """A natural-coordinate dataset (.npz written by `mc2fmu ingest`) cannot be used."""


class AdapterError(Mc2fmuError):
    """A tool-specific reader (e.g. MuJoCo) cannot convert its input."""


class TrainingError(Mc2fmuError):
    """Training arguments are invalid or training failed (e.g. a NaN loss)."""


class ModelError(Mc2fmuError):
    """A trained model artifact is missing, incomplete or inconsistent."""


class ExportError(Mc2fmuError):
    """ONNX or FMU export failed, or an exported graph disagrees with the model."""


class OutputError(Mc2fmuError):
    """An output path cannot be written (a directory, a path under a file, no permission)."""


class ValidationError(Mc2fmuError):
    """An FMU could not be validated against reference runs."""


class LinearizeError(Mc2fmuError):
    """A model cannot be linearised at the requested operating point (or none was found)."""


#: what the CLI prints of one error: at most this many problems, lines per problem, characters per line
MAX_PROBLEMS_SHOWN = 20
MAX_LINES_PER_PROBLEM = 12
MAX_LINE_CHARS = 500


def for_terminal(text: str, prefix: str = "") -> list[str]:
    """``text`` as terminal lines that cannot hurt: control characters (NUL, ANSI escapes, ...)
    shown as ``\\xNN`` escapes, each line cut to :data:`MAX_LINE_CHARS`, at most
    :data:`MAX_LINES_PER_PROBLEM` lines, the first prefixed with ``prefix`` and the others
    indented (so no value read from a file can start a line of its own, e.g. a forged
    ``error:``)."""
    def clean(line: str) -> str:
        line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}... ({len(line)} characters)"
        return line

    lines = text.split("\n")
    shown = [clean(x) for x in lines[:MAX_LINES_PER_PROBLEM]]
    if len(lines) > MAX_LINES_PER_PROBLEM:
        shown.append(f"... ({len(lines) - MAX_LINES_PER_PROBLEM} more lines)")
    return [prefix + shown[0]] + ["  " + x for x in shown[1:]]


def problem_lines(problems: list[str], prefix: str = "error: ") -> list[str]:
    """The lines the CLI prints for an error's problems (bounded: :func:`for_terminal`)."""
    out = [line for p in problems[:MAX_PROBLEMS_SHOWN] for line in for_terminal(p, prefix)]
    if len(problems) > MAX_PROBLEMS_SHOWN:
        out.append(f"{prefix}... and {len(problems) - MAX_PROBLEMS_SHOWN} more problems of the same kind or others; "
                   "fix these first")
    return out
