#!/usr/bin/env python3
"""A compiler wrapper that reuses Verilator's runtime objects across builds (a small ccache).

Every Verilator build compiles the same runtime (``verilated.cpp``, ``verilated_vpi.cpp``,
``verilated_threads.cpp``, ``verilated_dpi.cpp``): about 14 of the 16 seconds of a small unit's
build, repeated for each of the suite's ~80 unit configurations. ccache is not on PyPI, so
:func:`verif.runner.tool_environment` passes this script as Verilator's ``OBJCACHE`` compiler
prefix (``$(OBJCACHE) $(CXX) ... -c -o verilated.o .../include/verilated.cpp``).

Only sources inside ``$VERILATOR_ROOT/include`` are cached: they include nothing from the build
directory, so the object depends only on the source, the compiler and the command line, which
form the key (with the source's bytes and the compiler's size and mtime). Everything else (the
design's own C++, cocotb's ``verilator.cpp``, which includes ``Vtop.h``) is passed through. A
miss compiles and stores the object and its ``-MMD`` dependency file atomically (safe with
parallel builds, which compile a key once: the others wait for it); a hit copies them. The
cache lives in ``$QLLM_OBJCACHE``; without it the wrapper only runs the command.

The build's own sources (the design's ``Vtop__ALL.cpp`` and cocotb's ``verilator.cpp``) are
compiled with a precompiled header of Verilator's headers (``verilated.h``, ``verilated_vpi.h``,
``verilated_dpi.h``) put in front with ``-include``: parsing those headers is most of such a
compile at ``-O0`` (0.9 s, 0.25 s with the header precompiled). The header is compiled once per
compiler, command line (less the source, output and dependency options) and header contents,
stored like an object, and only where the command has no ``-include`` of its own (a split
build's own precompiled header; one is used per compilation). The headers have include
guards, so the source's own includes of them are no-ops; a compiler that cannot use the
precompiled file reads the header's text instead (slower, same result).
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def cache_key(command, source):
    """The cache key of one compile ``command`` of ``source``."""
    digest = hashlib.sha256()
    compiler = shutil.which(command[0]) or command[0]
    stat = os.stat(compiler)
    digest.update(f"{compiler}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    digest.update("\0".join(command).encode())
    digest.update(Path(source).read_bytes())
    return digest.hexdigest()[:32]


def cacheable(command):
    """Return ``(source, output)`` if ``command`` compiles a Verilator runtime source."""
    root = os.environ.get("VERILATOR_ROOT")
    if not root or "-c" not in command or "-o" not in command:
        return None
    source = command[-1]
    output = command[command.index("-o") + 1]
    include = os.path.join(os.path.realpath(root), "include") + os.sep
    if not os.path.realpath(source).startswith(include) or not source.endswith(".cpp"):
        return None
    return source, output


PCH_HEADERS = ("verilated.h", "verilated_vpi.h", "verilated_dpi.h")
"""Verilator's headers precompiled for the build's own sources."""

#: Options (with their argument) that name this compile's files, not how it compiles.
_FILE_OPTIONS = {"-o", "-MF", "-MT", "-MQ"}
_FILE_FLAGS = {"-c", "-MMD", "-MD", "-MP"}


def pch_flags(command):
    """The compiler and flags of ``command`` that a precompiled header must share, or None if
    the command is no compile of a build's own ``.cpp`` (or brings an ``-include`` itself)."""
    root = os.environ.get("VERILATOR_ROOT")
    if (not root or "-c" not in command or "-include" in command or "-x" in command
            or not command[-1].endswith(".cpp") or cacheable(command) is not None):
        return None
    flags, skip = [], False
    for arg in command[:-1]:
        if skip:
            skip = False
        elif arg in _FILE_OPTIONS:
            skip = True
        elif arg not in _FILE_FLAGS:
            flags.append(arg)
    return flags


def precompiled_header(cache, flags):
    """The path of the header to ``-include`` (its ``.gch`` beside it), compiled on a miss;
    None if it cannot be compiled."""
    include = Path(os.environ["VERILATOR_ROOT"]) / "include"
    text = "".join(f'#include "{name}"\n' for name in PCH_HEADERS)
    digest = hashlib.sha256()
    digest.update(cache_key(flags, os.devnull).encode())
    for header in sorted(include.glob("*.h")):
        digest.update(header.name.encode() + b"\0" + header.read_bytes())
    key = "pch-" + digest.hexdigest()[:32]
    entry = Path(cache) / key
    header = entry / "verilated_pch.h"
    if (entry / "verilated_pch.h.gch").is_file():
        return header
    with _key_lock(cache, key):
        if (entry / "verilated_pch.h.gch").is_file():
            return header
        staging = Path(tempfile.mkdtemp(dir=cache, prefix=".staging-"))
        (staging / "verilated_pch.h").write_text(text)
        status = subprocess.call([*flags, "-x", "c++-header", str(staging / "verilated_pch.h"),
                                  "-o", str(staging / "verilated_pch.h.gch")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if status != 0:
            shutil.rmtree(staging, ignore_errors=True)
            return None
        _publish(staging, entry)
    return header


@contextlib.contextmanager
def _key_lock(cache, key):
    """One process at a time on ``key``: parallel builds (pytest-xdist workers) that miss the
    same entry wait for the first instead of making it again."""
    Path(cache).mkdir(parents=True, exist_ok=True)
    with open(Path(cache) / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _publish(staging, entry):
    """Move a filled ``staging`` folder to ``entry`` atomically (another build may have
    stored it first: then drop ours)."""
    try:
        staging.rename(entry)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv):
    if not argv:
        print("usage: objcache.py COMPILER ARGS...", file=sys.stderr)
        return 2
    cache = os.environ.get("QLLM_OBJCACHE")
    target = cacheable(argv) if cache else None
    if target is None:
        flags = pch_flags(argv) if cache else None
        header = precompiled_header(cache, flags) if flags else None
        if header is not None:
            argv = [argv[0], "-include", str(header), *argv[1:]]
        return subprocess.call(argv)
    source, output = target
    key = cache_key(argv, source)
    entry = Path(cache) / key
    depfile = Path(output).with_suffix(".d")
    if _copy_out(entry, output, depfile):
        return 0
    with _key_lock(cache, key):
        if _copy_out(entry, output, depfile):
            return 0
        status = subprocess.call(argv)
        if status == 0:
            staging = Path(tempfile.mkdtemp(dir=cache, prefix=".staging-"))
            shutil.copyfile(output, staging / "object")
            if depfile.is_file():
                shutil.copyfile(depfile, staging / "depend")
            _publish(staging, entry)
    return status


def _copy_out(entry, output, depfile):
    """Copy a stored object (and its dependency file) to ``output``; False on a miss."""
    if not (entry / "object").is_file():
        return False
    shutil.copyfile(entry / "object", output)
    if (entry / "depend").is_file():
        shutil.copyfile(entry / "depend", depfile)
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
