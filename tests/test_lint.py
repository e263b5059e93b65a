"""`make lint` stays clean: every unit's generated Verilog passes verilator -Wall with the
project's documented waivers (verif/lint_waivers.vlt, README "Lint")."""

import pytest

from qllm_cores.gen import UNITS, generate
from qllm_cores.verif.__main__ import lint_file


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_default_configuration_is_lint_clean(unit, tmp_path):
    source = generate(unit, {}, tmp_path)
    assert lint_file(source, unit) == []


def test_lint_reports_a_real_problem(tmp_path):
    # An inferred latch: the class of bug the waivers must not hide.
    source = tmp_path / "bad.v"
    source.write_text("module bad(input en, input [3:0] d, output reg [3:0] q);\n"
                      "  always @* if (en) q = d;\nendmodule\n")
    warnings = lint_file(source, "bad")
    assert any("LATCH" in line for line in warnings)
