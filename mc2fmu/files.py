"""File helpers every stage shares: atomic outputs, deterministic zips, strict JSON, digests.

Nothing half-written is ever left behind: every file or directory mc2fmu writes goes through
:func:`atomic_output` or :func:`atomic_directory`.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import OutputError


_UMASK_LOCK = threading.Lock()

#: the longest file name when the file system does not say (Linux, Windows, macOS: 255)
NAME_MAX = 255


def file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be read as an input file (None: it can): missing, or not a regular
    file. Checked before opening it, so that a FIFO, a device or a directory never blocks or
    half-reads (``open`` on a FIFO waits for a writer)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as exc:  # a name too long, a NUL character, no permission
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device or socket"
        return f"is {kind}, not a regular file; give the file itself"
    return None


def output_name_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be written (None: as far as its name goes): a NUL character, or a
    name longer than the file system allows (checked up front, before any work)."""
    text = os.fspath(path)
    if "\0" in text:
        return "a path cannot hold a NUL character"
    p = Path(text).absolute()

    def exists(a: Path) -> bool:
        try:
            return a.exists()
        except (OSError, ValueError):  # a name too long to look up
            return False

    existing = next((a for a in [p, *p.parents] if exists(a)), Path(p.anchor or "/"))
    try:
        limit = os.pathconf(existing if existing.is_dir() else existing.parent, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # (no pathconf on Windows)
        limit = NAME_MAX
    new = p.parts[len(existing.parts):] if p != existing else ()
    for part in new:  # the names still to be made (an existing one is the file system's own)
        if len(os.fsencode(part)) > limit:
            shown = part if len(part) <= 40 else part[:37] + "..."
            return (f"the name '{shown}' has {len(os.fsencode(part))} bytes; this file system allows {limit}: "
                    "choose a shorter name")
    return None


def _temp_prefix(path: Path) -> str:
    """A temporary sibling's prefix: the output's name, cut so that the temporary name stays
    short (a legal name near the length limit must not fail because of it)."""
    return f".{path.name[:40]}."


def current_umask() -> int:
    """The process's umask, read without changing it: on Linux from the ``Umask:`` line of
    ``/proc/self/status`` (Python 3.11 has no ``os.getumask``).  Only where that is unavailable
    is it set and restored, under a lock (which orders mc2fmu's own threads only); a file
    another thread creates in that instant is owner-only, never wider than it should be."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        umask = os.umask(0o077)  # the owner-only mask while it is changed: nothing is made wider
        os.umask(umask)
    return umask


def give_default_mode(path: Path) -> None:
    """The mode a plain ``open``/``mkdir`` would have given: ``mkstemp``/``mkdtemp`` make
    their files owner-only, which would carry over to the output moved into place."""
    os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~current_umask())


@contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it into place only if the block succeeds.

    Nothing half-written is ever left at ``path``: on any error the temporary file is removed.
    """
    path = Path(path)
    problem = output_name_problem(path)
    if problem:
        raise OutputError(f"{path}: {problem}")
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; name the file to write")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".part", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written ({exc.strerror or exc}); choose another output path") from None
    os.close(fd)
    tmp_path = Path(tmp)
    give_default_mode(tmp_path)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory next to ``path``; it replaces ``path`` (a complete
    directory or nothing) only if the block succeeds.

    The old directory is moved aside (to a hidden sibling) before the new one is moved in, back
    if that fails, and removed only once the new one is in place: a crash between the two
    renames leaves it in that sibling, never lost."""
    path = Path(path)
    problem = output_name_problem(path)
    if problem:
        raise OutputError(f"{path}: {problem}")
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: is a file; a directory is written here, choose another path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), dir=path.parent))
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written ({exc.strerror or exc}); choose another output path") from None
    give_default_mode(tmp)
    try:
        yield tmp
        _move_into_place(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _move_into_place(new: Path, path: Path) -> None:
    """Rename the directory ``new`` to ``path``; the old ``path`` is removed only once ``new``
    is there, and put back if the rename fails (for any reason, an interrupt included)."""
    aside = new.with_name(new.name + ".old") if path.exists() or path.is_symlink() else None
    try:
        if aside is not None:
            os.replace(path, aside)
        try:
            os.replace(new, path)
        except BaseException:
            if aside is not None:
                os.replace(aside, path)
            raise
    except OSError as exc:
        old = ("nothing was written" if aside is None else
               f"its previous content is still at {aside}" if aside.exists() else "its previous content is kept")
        raise OutputError(f"{path}: cannot be written ({exc.strerror or exc}); {old}") from None
    if aside is not None:
        if aside.is_symlink():
            aside.unlink()
        else:
            shutil.rmtree(aside, ignore_errors=True)


def write_zip(out: str | os.PathLike, members: dict[str, bytes], executable: Iterable[str] = ()) -> None:
    """A deterministic zip (sorted members, fixed timestamps, deflated): the same members give
    the same bytes.  Members whose name starts with a prefix in ``executable`` get mode 755."""
    prefixes = tuple(executable)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if prefixes and name.startswith(prefixes) else 0o644) << 16
            z.writestr(info, members[name])


def json_safe(obj: Any) -> Any:
    """``obj`` with non-finite floats as None (strict JSON has no Infinity or NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def digest(*parts: bytes | str) -> str:
    """SHA-256 (hex) of the parts in order; strings are UTF-8 encoded."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
    return h.hexdigest()
