"""The platforms a native FMU carries binaries for, their toolchains, and what a binary needs.

A native FMU holds one shared library per platform, built here from its C sources:

* ``x86_64-linux`` (FMI 2 folder ``linux64``): this machine's compiler, ``$CC`` or gcc;
* ``x86_64-windows`` (``win64``): ``x86_64-w64-mingw32-gcc`` (Debian ``gcc-mingw-w64-x86-64``),
  libgcc linked in; checked under wine (``wine64``);
* ``aarch64-linux`` (``aarch64-linux`` in both versions): ``aarch64-linux-gnu-gcc`` (Debian
  ``gcc-aarch64-linux-gnu``); checked under ``qemu-aarch64`` (``qemu-user``).

FMI 2.0 names folders for x86 only (``win64``, ``linux64``, ...); for any other platform its
section 2.3 (2.0.4) says to use the FMI 3.0 platform tuple, hence ``aarch64-linux`` in both.
The platform of this machine is built with ``$CC`` (default ``gcc``); the others with their
cross-compiler.  :func:`resolve` turns ``--platforms`` into platforms, :func:`inspect_binary`
reads what a library links against (the DLLs of a PE file; the shared objects and the highest
glibc symbol version of an ELF file) without any tool.
"""

from __future__ import annotations

import logging
import os
import platform as _platform
import shutil
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ExportError

log = logging.getLogger(__name__)

#: the setting read when ``--platforms`` is not given (e.g. ``MC2FMU_PLATFORMS=x86_64-linux``
#: for quick exports during development); unset or ``auto``: every platform with a toolchain
ENV = "MC2FMU_PLATFORMS"


@dataclass(frozen=True)
class Platform:
    name: str  #: FMI 3 platform tuple, the name used on the command line
    fmi2: str  #: the binaries/ folder of an FMI 2 FMU
    suffix: str  #: shared-library suffix
    compiler: str  #: cross-compiler (the machine's own platform uses $CC instead)
    package: str  #: the Debian package that installs ``compiler``
    flags: tuple[str, ...]  #: flags beside the common ones
    #: the command (program, then its arguments before the executable) that runs this
    #: platform's programs on an x86-64 Linux machine, and the Debian package of the program
    emulator: tuple[str, ...] = field(default=())
    emulator_package: str = ""
    os: str = "linux"
    machine: str = "x86_64"

    def folder(self, fmi_version: int) -> str:
        """``binaries/<folder>`` for an FMU of this FMI version."""
        return self.fmi2 if fmi_version == 2 else self.name

    @property
    def native(self) -> bool:
        """True if this machine runs the platform's programs itself."""
        return self.name == host_name()


#: position-independent code; no stack protector or fortified calls (toolchains that enable them
#: by default would add symbols from a newer glibc, or from the dynamic loader)
LINUX_FLAGS = ("-fPIC", "-fno-stack-protector", "-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=0")
#: the highest glibc symbol version a Linux binary may need (mc2fmu_native.h binds the rest)
GLIBC_FLOOR = {"x86_64-linux": "2.2.5", "aarch64-linux": "2.17"}
#: the platform whose programs the emulators of :data:`PLATFORMS` run on (wine64, qemu-aarch64)
EMULATING_HOST = "x86_64-linux"

PLATFORMS: dict[str, Platform] = {
    p.name: p for p in (
        # -fPIC for the shared object; the library needs libc and libm only
        Platform("x86_64-linux", "linux64", ".so", "x86_64-linux-gnu-gcc", "gcc-x86-64-linux-gnu", LINUX_FLAGS),
        # libgcc linked in: the DLL imports KERNEL32.dll and msvcrt.dll only, both part of Windows
        Platform("x86_64-windows", "win64", ".dll", "x86_64-w64-mingw32-gcc", "gcc-mingw-w64-x86-64",
                 ("-static-libgcc", "-fno-stack-protector"), ("wine64",), "wine64", os="windows"),
        Platform("aarch64-linux", "aarch64-linux", ".so", "aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu", LINUX_FLAGS,
                 ("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"), "qemu-user", machine="aarch64"),
    )
}
#: the order binaries are built and listed in
ORDER = tuple(PLATFORMS)


def host_name() -> str:
    """This machine's platform tuple (``x86_64-linux`` on the machines mc2fmu is developed on)."""
    machine = _platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = "windows" if sys.platform.startswith("win") else "darwin" if sys.platform == "darwin" else "linux"
    return f"{machine}-{system}"


def compiler_of(p: Platform) -> str | None:
    """The path of the C compiler that builds for ``p``, or None when it is not installed."""
    if p.native:
        return shutil.which(os.environ.get("CC", "gcc"))
    return shutil.which(p.compiler)


def emulator_of(p: Platform) -> list[str] | None:
    """The command prefix that runs ``p``'s programs here: [] for this machine's own platform,
    None when the emulator is not installed."""
    if p.native:
        return []
    if not p.emulator or host_name() != EMULATING_HOST:
        return None
    path = shutil.which(p.emulator[0])
    if path is None and p.emulator[0] == "wine64":  # Debian's wine64 puts the loader outside PATH
        path = shutil.which("wine") or (Path("/usr/lib/wine/wine64").exists() and "/usr/lib/wine/wine64") or None
    return None if path is None else [path, *p.emulator[1:]]


def emulator_env(p: Platform) -> dict[str, str]:
    """The environment for running ``p``'s programs under its emulator: wine quiet and in a
    prefix of mc2fmu's own (created on first use, about 5 s), so the user's is never touched."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG")}
    if p.os == "windows":
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mc2fmu" / "wine"
        cache.mkdir(parents=True, exist_ok=True)
        env |= {"WINEPREFIX": str(cache), "WINEDEBUG": "-all", "WINEDLLOVERRIDES": "mscoree,mshtml="}
    return env


def available() -> list[Platform]:
    """The platforms whose toolchain is installed, in :data:`ORDER`: their compiler, and for
    another machine's platform the emulator the export's self-check runs its binary under."""
    return [p for p in PLATFORMS.values() if compiler_of(p) is not None and emulator_of(p) is not None]


def platform_problems(spec: str) -> list[str]:
    """What is wrong with a ``--platforms`` value itself (unknown names), before any work; a
    missing toolchain is found by :func:`resolve`."""
    try:
        _names(spec)
    except ExportError as exc:
        return exc.problems
    return []


def _names(spec: str, source: str = "--platforms") -> list[str]:
    """The platform names of ``spec`` (``auto``: those with a compiler and an emulator, this
    machine's always); ``source``: where ``spec`` came from, for the message."""
    spec = spec.strip()
    host = host_name()
    aliases = {p.fmi2: p.name for p in PLATFORMS.values()}
    if spec == "auto":
        chosen = [p.name for p in available()]
        if host in PLATFORMS and host not in chosen:
            chosen.insert(0, host)  # its missing compiler is reported by resolve
        return chosen
    if spec == "all":
        return list(PLATFORMS)
    chosen, unknown = [], []
    for item in (s.strip() for s in spec.split(",")):
        name = aliases.get(item, item)
        if name not in PLATFORMS:
            unknown.append(item)
        elif name not in chosen:
            chosen.append(name)
    if unknown or not chosen:
        what = f"{', '.join(map(repr, unknown))} {'is not a platform' if len(unknown) == 1 else 'are not platforms'}"
        raise ExportError(f"{source} {spec}: {what if unknown else 'no platform named'}; "
                          f"choose from {', '.join(PLATFORMS)} (or auto, all; FMI 2 folder names work too)")
    return chosen


def resolve(spec: str | None) -> list[Platform]:
    """``--platforms`` (a comma-separated list of platform tuples or FMI 2 folder names, ``auto``
    or ``all``) -> platforms, this machine's first.  ``None`` reads :data:`ENV`, then ``auto``.

    This machine's platform is always built: ``validate`` and ``convert`` run the FMU here, and
    without a C compiler nothing can be built, which is an error.  ``auto``: every other
    platform whose compiler and emulator are installed (one that lacks either is left out, with
    a log line saying which package would add it).  ``all`` and named platforms must have both;
    a missing one is an error that names the Debian package to install."""
    source = "--platforms" if spec is not None else f"${ENV}"
    spec = spec if spec is not None else os.environ.get(ENV) or "auto"
    host = host_name()
    if host not in PLATFORMS:
        raise ExportError(f"the native backend builds on {', '.join(PLATFORMS)} machines, and this is {host}; "
                          "use --backend python, or compile the sources of a native FMU exported elsewhere")
    chosen = _names(spec, source)
    if spec.strip() == "auto":
        for p in PLATFORMS.values():
            if p.name not in chosen and compiler_of(p) is not None:
                log.info("--platforms auto: %s left out: %s is not installed (apt-get install %s)", p.name,
                         p.emulator[0] if p.emulator else "an emulator", p.emulator_package or "-")
    if host not in chosen:
        chosen.insert(0, host)
    chosen.sort(key=lambda n: (n != host, ORDER.index(n)))
    problems = []
    for name in chosen:
        p = PLATFORMS[name]
        if compiler_of(p) is None:
            if p.native:
                cc = os.environ.get("CC", "gcc")
                problems.append(f"{name}: the native backend needs a C compiler and '{cc}' was not found on PATH; "
                                "install one (e.g. `apt-get install gcc`) or set CC to its name, or use "
                                "--backend python")
            else:
                problems.append(f"{name}: its compiler {p.compiler} is not installed; install it "
                                f"(`apt-get install {p.package}`) or leave {name} out of --platforms")
        elif emulator_of(p) is None:
            if not p.emulator or host != EMULATING_HOST:
                problems.append(f"{name}: the export checks each binary by running it, and this {host} machine "
                                f"has no emulator for {name}; leave it out of --platforms")
            else:
                problems.append(f"{name}: the export runs its binary under {p.emulator[0]} to check it, and "
                                f"{p.emulator[0]} is not installed; install it (`apt-get install "
                                f"{p.emulator_package}`) or leave {name} out of --platforms")
    if problems:
        raise ExportError(problems)
    return [PLATFORMS[n] for n in chosen]


def platform_of_folder(folder: str) -> Platform | None:
    """The platform of a ``binaries/`` folder name (FMI 2 or 3), or None for another one."""
    for p in PLATFORMS.values():
        if folder in (p.name, p.fmi2):
            return p
    return None


# ------------------------------------------------------------------ what a binary links against


@dataclass
class BinaryInfo:
    format: str  #: "ELF" or "PE"
    machine: str  #: x86_64, aarch64, ...
    needed: list[str]  #: the libraries it loads (DT_NEEDED; the DLLs it imports)
    glibc: str | None  #: the highest GLIBC_x.y symbol version it needs (ELF), else None
    exports: list[str]  #: the functions it exports whose names start with "fmi"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".") if x.isdigit())


def inspect_binary(data: bytes, where: str = "binary") -> BinaryInfo:
    """What a shared library (ELF) or DLL (PE) links against; an :class:`ExportError` naming
    ``where`` if it is neither or is cut short."""
    try:
        if data[:4] == b"\x7fELF":
            return _inspect_elf(data)
        if data[:2] == b"MZ":
            return _inspect_pe(data)
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise ExportError(f"{where}: not a well-formed ELF or PE library ({exc})") from None
    raise ExportError(f"{where}: not an ELF or PE library")


def _cstr(data: bytes, off: int) -> str:
    end = data.index(b"\0", off)
    return data[off:end].decode("ascii", "replace")


def _inspect_elf(d: bytes) -> BinaryInfo:
    if d[4] != 2 or d[5] != 1:
        raise ValueError("only 64-bit little-endian ELF is read")
    machine = {0x3E: "x86_64", 0xB7: "aarch64"}.get(struct.unpack_from("<H", d, 18)[0], "other")
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", d, 0x3A)
    if shentsize != 64 or shoff + 64 * shnum > len(d):
        raise ValueError("the section headers are not where the header says")
    sections = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * 64) for i in range(shnum)]
    if any(off + size > len(d) for _n, kind, _f, _a, off, size, *_ in sections if kind != 8):  # 8: SHT_NOBITS
        raise ValueError("a section lies beyond the end of the file")
    SHT_DYNAMIC, SHT_DYNSYM, SHT_VERNEED = 6, 11, 0x6FFFFFFE
    needed, versions, exports = [], [], []
    for _name, kind, _flags, _addr, off, size, link, info, _align, entsize in sections:
        strtab = sections[link][4] if link < len(sections) else 0
        if kind == SHT_DYNAMIC:
            for k in range(size // 16):
                tag, val = struct.unpack_from("<qQ", d, off + 16 * k)
                if tag == 1:  # DT_NEEDED
                    needed.append(_cstr(d, strtab + val))
                elif tag == 0:
                    break
        elif kind == SHT_VERNEED:
            pos = off
            for _ in range(min(info, size // 16)):  # sh_info: the number of Elf64_Verneed entries
                _ver, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", d, pos)
                apos = pos + aux
                for _ in range(min(cnt, size // 16)):
                    _hash, _fl, _other, name, anext = struct.unpack_from("<IHHII", d, apos)
                    versions.append(_cstr(d, strtab + name))
                    apos += anext
                if not nxt:
                    break
                pos += nxt
        elif kind == SHT_DYNSYM:
            if entsize != 24:
                raise ValueError("a symbol table whose entries are not 24 bytes")
            for k in range(1, size // 24):
                name, info_b, _other, shndx = struct.unpack_from("<IBBH", d, off + k * 24)
                if shndx and (info_b & 0xF) == 2:  # a defined function
                    sym = _cstr(d, strtab + name)
                    if sym.startswith("fmi"):
                        exports.append(sym)
    glibc = [v[len("GLIBC_"):] for v in versions if v.startswith("GLIBC_") and v[6:7].isdigit()]
    return BinaryInfo("ELF", machine, needed, max(glibc, key=_version_key) if glibc else None, sorted(exports))


def _inspect_pe(d: bytes) -> BinaryInfo:
    pe, = struct.unpack_from("<I", d, 0x3C)
    if d[pe:pe + 4] != b"PE\0\0":
        raise ValueError("no PE signature")
    mach, nsec, _ts, _sym, _nsym, optsize, _ch = struct.unpack_from("<HHIIIHH", d, pe + 4)
    machine = {0x8664: "x86_64", 0xAA64: "aarch64", 0x14C: "x86"}.get(mach, "other")
    opt = pe + 24
    magic, = struct.unpack_from("<H", d, opt)
    if magic != 0x20B:
        raise ValueError("only PE32+ (64-bit) is read")
    ndirs, = struct.unpack_from("<I", d, opt + 108)
    dirs = [struct.unpack_from("<II", d, opt + 112 + 8 * i) for i in range(min(ndirs, 16))]
    secs = [struct.unpack_from("<8sIIII", d, opt + optsize + 40 * i) for i in range(nsec)]
    if any(rawptr + rawsize > len(d) for _n, _v, _a, rawsize, rawptr in secs):
        raise ValueError("a section lies beyond the end of the file")

    def at(rva: int) -> int:
        for _n, vsize, vaddr, rawsize, rawptr in secs:
            if vaddr <= rva < vaddr + max(vsize, rawsize):
                return rawptr + rva - vaddr
        raise ValueError(f"address {rva:#x} in no section")

    needed, exports = [], []
    if len(dirs) > 1 and dirs[1][0]:
        pos = at(dirs[1][0])
        while True:
            lookup, _t, _f, name, first = struct.unpack_from("<IIIII", d, pos)
            if not (lookup or name or first):
                break
            needed.append(_cstr(d, at(name)))
            pos += 20
    if dirs and dirs[0][0]:
        exp = at(dirs[0][0])
        n_names, = struct.unpack_from("<I", d, exp + 24)
        names_rva, = struct.unpack_from("<I", d, exp + 32)
        for k in range(n_names):
            sym = _cstr(d, at(struct.unpack_from("<I", d, at(names_rva) + 4 * k)[0]))
            if sym.startswith("fmi"):
                exports.append(sym)
    return BinaryInfo("PE", machine, needed, None, sorted(exports))


def fmu_binaries(fmu: str | os.PathLike) -> list[dict]:
    """The binaries an FMU carries: per ``binaries/<folder>/<file>`` library, its platform
    (None for a folder that is not one of :data:`PLATFORMS`), what it loads, its glibc floor,
    and ``problem``: why it would not load on its folder's platform (None: nothing found)."""
    import zipfile

    found = []
    with zipfile.ZipFile(fmu) as z:
        for name in sorted(z.namelist()):
            parts = name.split("/")
            if len(parts) != 3 or parts[0] != "binaries" or not parts[2].endswith((".so", ".dll", ".dylib")):
                continue
            p = platform_of_folder(parts[1])
            entry = {"folder": parts[1], "file": parts[2], "platform": p.name if p else None, "needed": [],
                     "glibc": None, "problem": None}
            try:
                info = inspect_binary(z.read(name), name)
            except ExportError as exc:
                entry["problem"] = str(exc) if p is not None else None  # another tool's folder: listed, not judged
            else:
                entry |= {"needed": info.needed, "glibc": info.glibc}
                if p is not None and info.machine != p.machine:
                    entry["problem"] = f"{name}: built for {info.machine}, but the folder is for {p.machine}"
            found.append(entry)
    return sorted(found, key=lambda e: ORDER.index(e["platform"]) if e["platform"] else len(ORDER))
