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
"""

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


def main(argv):
    if not argv:
        print("usage: objcache.py COMPILER ARGS...", file=sys.stderr)
        return 2
    cache = os.environ.get("QLLM_OBJCACHE")
    target = cacheable(argv) if cache else None
    if target is None:
        return subprocess.call(argv)
    source, output = target
    key = cache_key(argv, source)
    entry = Path(cache) / key
    depfile = Path(output).with_suffix(".d")
    if _copy_out(entry, output, depfile):
        return 0
    Path(cache).mkdir(parents=True, exist_ok=True)
    # One compile of a key at a time: parallel builds (pytest-xdist workers) that miss the
    # same object wait for the first instead of compiling it again.
    with open(Path(cache) / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _copy_out(entry, output, depfile):
            return 0
        status = subprocess.call(argv)
        if status == 0:
            staging = Path(tempfile.mkdtemp(dir=cache, prefix=".staging-"))
            shutil.copyfile(output, staging / "object")
            if depfile.is_file():
                shutil.copyfile(depfile, staging / "depend")
            try:
                staging.rename(entry)      # atomic; another build may have stored it first
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
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
