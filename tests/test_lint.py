"""`make lint` stays clean: every unit's generated Verilog passes verilator -Wall with the
waivers it carries inline (gen.verilog.LINT_WAIVERS; docs/verification.md "Lint")."""

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


def test_the_inline_waivers_end_with_the_generated_file(tmp_path):
    """A generated file carries its waivers and takes them back at its end: a width bug in
    a file read after it is still reported."""
    source = generate("kllm_concat", {"lanes": 2}, tmp_path)
    text = source.read_text()
    assert text.count("verilator lint_off") == text.count("verilator lint_on") > 0
    after = tmp_path / "after.v"
    after.write_text(source.read_text() + "module after(input [3:0] a, output [1:0] y);\n"
                     "  assign y = a;\nendmodule\n")
    assert any("WIDTHTRUNC" in line for line in lint_file(after, "after"))
