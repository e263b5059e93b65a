"""The second event-driven simulator: every unit's cocotb bench at its defaults under Icarus
Verilog, when ``iverilog`` is on the PATH (it installs from no PyPI wheel; a machine without
it skips with the reason). The pip-only second simulator, Amaranth's own, runs every unit in
tests/test_amaranth_sim.py."""

import shutil

import pytest

from qllm_cores.gen.registry import UNITS
from qllm_cores.verif.runner import run_testbench

BENCHED = [unit for unit, spec in UNITS.items() if spec.testbench]


@pytest.mark.sim
@pytest.mark.skipif(shutil.which("iverilog") is None,
                    reason="Icarus Verilog (optional second simulator) is not installed: "
                           "iverilog is on no PyPI wheel; install it with the system's "
                           "package manager to run every bench under Icarus too")
@pytest.mark.parametrize("unit", BENCHED)
def test_bench_on_icarus(unit):
    metrics = run_testbench(unit, sim="icarus", name=f"{unit}-icarus",
                            extra_env={"QLLM_BEATS": 500})
    assert metrics["tests"] >= 1     # run_testbench raises on a failing cocotb test
