"""`make lint` stays clean: every unit's generated Verilog passes verilator -Wall with the
project's documented waivers (verif/lint_waivers.vlt, README "Lint")."""

import pytest

from gen import UNITS, generate
from verif.__main__ import lint_file


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_default_configuration_is_lint_clean(unit, tmp_path):
    source = generate(unit, {}, tmp_path)
    assert lint_file(source, unit) == []


def test_lint_reports_a_real_problem(tmp_path):
    source = tmp_path / "bad.v"
    source.write_text("module bad(input clk, output [3:0] y);\n"
                      "  wire [7:0] unused_wide;\n  assign y = 4'h1;\nendmodule\n")
    warnings = lint_file(source, "bad")
    assert any("UNUSEDSIGNAL" in line for line in warnings)
