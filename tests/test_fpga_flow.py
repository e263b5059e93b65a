"""Smoke tests of the Yosys flow in `fpga`: every target, the error paths and the CLI.

The first Yosys run on a machine compiles the WebAssembly module (40 s or more); later
runs take 0.3 to 7 s each. Every test synthesises on its own, so pytest-xdist can spread
them without repeating work.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from qllm_cores.fpga import TARGETS, SynthError, SynthResult, synth
from qllm_cores.fpga.__main__ import main

pytestmark = pytest.mark.synth

REGISTERED_ADDER_VERILOG = """\
module add8(input clk, input [7:0] a, input [7:0] b, output reg [8:0] sum);
  always @(posedge clk) sum <= a + b;
endmodule
"""
"""8-bit adder with a registered 9-bit sum: exactly 9 flip-flops on every target."""

ADDER_FLIP_FLOPS = 9

MULTIPLIER_AND_RAM_VERILOG = """\
module mul_ram(input clk, input we, input [7:0] addr, input [15:0] wdata,
               output reg [15:0] rdata, input [15:0] a, input [15:0] b,
               output reg [31:0] product);
  reg [15:0] mem [0:255];
  always @(posedge clk) begin
    if (we) mem[addr] <= wdata;
    rdata <= mem[addr];
    product <= a * b;
  end
endmodule
"""
"""A 16x16 multiplier and a 256x16 RAM: one SB_MAC16 and one SB_RAM40_4K on the UP5K."""

BROKEN_VERILOG = """\
module broken(input a, output b);
  assign b = a +;
endmodule
"""


def write_unit(verilog_dir: Path, name: str, verilog: str, params: dict) -> Path:
    """Write a ``<name>.v`` and ``<name>.json`` pair as the generator would."""
    verilog_dir.mkdir(parents=True, exist_ok=True)
    verilog_path = verilog_dir / f"{name}.v"
    verilog_path.write_text(verilog)
    manifest = {"unit": name, "top": name, "params": params}
    (verilog_dir / f"{name}.json").write_text(json.dumps(manifest))
    return verilog_path


def synth_adder(workdir: Path, target: str) -> SynthResult:
    """Synthesise the registered adder and check what every target must report."""
    verilog_path = workdir / "add8.v"
    verilog_path.write_text(REGISTERED_ADDER_VERILOG)
    result = synth(verilog_path, "add8", target, workdir)
    assert result.target == target
    assert result.top == "add8"
    assert list(result.metrics) == list(TARGETS[target].metrics)
    assert all(isinstance(value, int) and value >= 0 for value in result.metrics.values())
    assert result.seconds > 0
    assert result.log_path.is_file()
    assert "$scopeinfo" not in result.cell_counts
    return result


def test_every_target_is_tested():
    assert set(TARGETS) == {"ice40", "ecp5", "xilinx", "cmos"}


def test_ice40_adder(tmp_path):
    metrics = synth_adder(tmp_path, "ice40").metrics
    assert metrics["FF"] == ADDER_FLIP_FLOPS
    assert metrics["LUT"] > 0
    assert metrics["CARRY"] > 0
    assert metrics["DSP"] == metrics["BRAM"] == 0


def test_ecp5_adder(tmp_path):
    metrics = synth_adder(tmp_path, "ecp5").metrics
    assert metrics["FF"] == ADDER_FLIP_FLOPS
    assert metrics["LUT"] + metrics["CARRY"] > 0


def test_xilinx_adder_has_no_io_buffers(tmp_path):
    result = synth_adder(tmp_path, "xilinx")
    assert result.metrics["FF"] == ADDER_FLIP_FLOPS
    assert result.metrics["LUT"] > 0
    assert not {"IBUF", "OBUF", "BUFG"} & set(result.cell_counts)


def test_cmos_adder(tmp_path):
    result = synth_adder(tmp_path, "cmos")
    assert result.cell_counts["$_DFF_P_"] == ADDER_FLIP_FLOPS
    assert result.metrics["uncosted_cells"] == 0
    # Yosys costs a plain flip-flop at 16 transistors; the adder's gates come on top.
    assert result.metrics["transistors"] > 16 * ADDER_FLIP_FLOPS
    assert result.metrics["cells"] == sum(result.cell_counts.values())


def test_ice40_maps_multiplier_and_ram_to_hard_blocks(tmp_path):
    verilog_path = tmp_path / "mul_ram.v"
    verilog_path.write_text(MULTIPLIER_AND_RAM_VERILOG)
    metrics = synth(verilog_path, "mul_ram", "ice40", tmp_path).metrics
    assert metrics["DSP"] == 1
    assert metrics["BRAM"] == 1


def test_unknown_target_is_a_value_error(tmp_path):
    verilog_path = tmp_path / "add8.v"
    verilog_path.write_text(REGISTERED_ADDER_VERILOG)
    with pytest.raises(ValueError, match="target='asic'.*ice40"):
        synth(verilog_path, "add8", "asic", tmp_path)


def test_broken_verilog_is_a_synth_error_quoting_the_log(tmp_path):
    verilog_path = tmp_path / "broken.v"
    verilog_path.write_text(BROKEN_VERILOG)
    with pytest.raises(SynthError, match="syntax error"):
        synth(verilog_path, "broken", "ice40", tmp_path)


def test_missing_top_module_is_a_synth_error(tmp_path):
    verilog_path = tmp_path / "add8.v"
    verilog_path.write_text(REGISTERED_ADDER_VERILOG)
    with pytest.raises(SynthError, match="nosuch"):
        synth(verilog_path, "nosuch", "cmos", tmp_path)


def test_area_command_writes_reports_without_absolute_paths(tmp_path, capsys):
    build_dir = tmp_path / "build"
    write_unit(build_dir / "verilog", "add8", REGISTERED_ADDER_VERILOG, {"width": 8})

    exit_code = main(
        ["area", "--build-dir", str(build_dir), "--target", "ice40", "--target", "cmos"]
    )

    assert exit_code == 0
    markdown = (build_dir / "reports" / "area.md").read_text()
    csv_text = (build_dir / "reports" / "area.csv").read_text()
    for report in (markdown, csv_text):
        assert str(tmp_path) not in report
        assert "/tmp" not in report
    assert "| add8 | width=8 |" in markdown
    assert "| ice40 | iCE40 UltraPlus UP5K |" in markdown
    rows = list(csv.DictReader(csv_text.splitlines()))
    expected_metrics = len(TARGETS["ice40"].metrics) + len(TARGETS["cmos"].metrics)
    assert len(rows) == expected_metrics
    ice40_ff = [row for row in rows if (row["target"], row["metric"]) == ("ice40", "FF")]
    assert ice40_ff == [
        {"unit": "add8", "params": "width=8", "target": "ice40", "metric": "FF", "value": "9"}
    ]
    assert "| unit | params | target | LUT | FF |" in capsys.readouterr().out


def test_area_command_rejects_a_unit_that_was_not_generated(tmp_path, capsys):
    build_dir = tmp_path / "build"
    write_unit(build_dir / "verilog", "add8", REGISTERED_ADDER_VERILOG, {})
    assert main(["area", "--build-dir", str(build_dir), "--unit", "ghost"]) == 2
    assert "ghost" in capsys.readouterr().err


def test_area_command_needs_generated_units(tmp_path, capsys):
    assert main(["area", "--build-dir", str(tmp_path / "empty")]) == 2
    assert "no generated unit" in capsys.readouterr().err


def test_area_command_names_the_failed_run_and_drops_stale_reports(tmp_path, capsys):
    build_dir = tmp_path / "build"
    write_unit(build_dir / "verilog", "broken", BROKEN_VERILOG, {})
    stale_report = build_dir / "reports" / "area.md"
    stale_report.parent.mkdir(parents=True)
    stale_report.write_text("from an earlier run\n")

    exit_code = main(["area", "--build-dir", str(build_dir), "--target", "cmos"])

    assert exit_code == 1
    assert "broken/cmos" in capsys.readouterr().err
    assert not stale_report.exists()


def test_comparison_table_divides_unit_by_baseline_from_the_same_results():
    from pathlib import Path

    from qllm_cores.fpga.area import Unit, comparison_table
    from qllm_cores.fpga.yosys import SynthResult

    def result(target, **metrics):
        return SynthResult(target=target, top="t", cell_counts={}, metrics=metrics,
                           log_path=Path("log"), seconds=0.0)

    pe = Unit("pe", "pe", {}, Path("pe.v"), baseline="mac", ops_per_cycle=4)
    mac = Unit("mac", "mac", {}, Path("mac.v"), ops_per_cycle=1)
    other = Unit("other", "other", {}, Path("o.v"), baseline="missing")
    results = {
        ("pe", "xilinx"): result("xilinx", LUT=300, FF=100, DSP=0),
        ("mac", "xilinx"): result("xilinx", LUT=200, FF=50, DSP=1),
        ("pe", "cmos"): result("cmos", transistors=5000),
        ("mac", "cmos"): result("cmos", transistors=10000),
        ("other", "xilinx"): result("xilinx", LUT=1), ("other", "cmos"): result("cmos"),
    }
    table = comparison_table([pe, mac, other], ["xilinx", "cmos"], results)
    rows = [line for line in table.splitlines() if line.startswith("| pe / mac")]
    assert rows == [
        "| pe / mac | xilinx | - | 1.50 | 2.00 | 0.00 | 13.3, 5 (per 1k LUT) |",
        "| pe / mac | cmos | 0.50 | - | - | - | 0.8, 0.1 (per 1k transistors) |",
    ]
    assert comparison_table([mac, other], ["xilinx"], results) == ""


def test_unit_restricted_to_one_target_is_only_synthesized_there(tmp_path, capsys):
    """A manifest's synth_targets (accllm_dsp_mul's DSP48E2 instance: xilinx only) limits the
    runs; the other targets are skipped, not failed, and the tables leave them out."""
    build_dir = tmp_path / "build"
    write_unit(build_dir / "verilog", "add8", REGISTERED_ADDER_VERILOG, {"width": 8})
    manifest_path = build_dir / "verilog" / "add8.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["synth_targets"] = ["cmos"]
    manifest_path.write_text(json.dumps(manifest))

    exit_code = main(["area", "--build-dir", str(build_dir), "--target", "ice40",
                      "--target", "cmos"])

    assert exit_code == 0
    rows = list(csv.DictReader((build_dir / "reports" / "area.csv").read_text().splitlines()))
    assert {row["target"] for row in rows} == {"cmos"}
    assert "| add8 | width=8 | ice40 |" not in capsys.readouterr().out
