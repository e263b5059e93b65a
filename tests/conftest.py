"""Shared pytest configuration."""

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from qllm_cores.verif.runner import locked

ROOT = Path(__file__).resolve().parent.parent

# The benches here are short: a Verilator build's C++ compile is most of their time, and -O0
# compiles it about twice as fast as Verilator's -Os (verif.runner.cxx_optimization).
os.environ.setdefault("QLLM_CXX_OPT", "-O0")


def _pdk_root():
    """``PDK_ROOT``, else ``../shared/pdk`` beside this clone or beside the repository it was
    cloned from (the Makefile's default); None if none exists."""
    if os.environ.get("PDK_ROOT"):
        return Path(os.environ["PDK_ROOT"])
    origin = subprocess.run(["git", "config", "--get", "remote.origin.url"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    for base in (ROOT, Path(origin) if origin else None):
        if base is not None and (base.parent / "shared" / "pdk").is_dir():
            return base.parent / "shared" / "pdk"
    return None


@pytest.fixture(scope="session")
def pdk_root():
    """The standard-cell libraries' PDK root (docs/stdcell.md); the test is skipped, naming
    PDK_ROOT, on a machine without one."""
    root = _pdk_root()
    if root is None:
        pytest.skip("no PDK: set PDK_ROOT to a volare/ciel PDK root (../shared/pdk here)")
    return root


@pytest.fixture(scope="session")
def session_folder(tmp_path_factory):
    """``with session_folder(name) as folder:`` a folder common to all of the session's xdist
    workers (``--dist worksteal`` spreads one module's tests over them), held under an
    exclusive lock: work done once for several tests goes there, and the lock makes a second
    worker wait for the first instead of repeating it."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                       # <session>/popen-gwN -> <session>

    @contextlib.contextmanager
    def hold(name):
        folder = base / f"shared-{name}"
        with locked(base / f"shared-{name}.lock"):
            folder.mkdir(exist_ok=True)
            yield folder
    return hold
