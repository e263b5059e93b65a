"""Tests of `fpga.fmax`: the timing wrapper (pure Python) and one real nextpnr run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qllm_cores.fpga.fmax import FMAX_TARGETS, SEEDS, FmaxError, main, median, read_report
from qllm_cores.fpga.wrapper import (
    WrapperPorts,
    check_ports_against_verilog,
    unit_ports,
    wrapper_verilog,
    xor_tree_widths,
)

MANIFEST = {
    "unit": "demo",
    "top": "demo",
    "params": {},
    "ports": {
        "i": {"direction": "in", "payload": {"width": 12}},
        "o": {"direction": "out", "payload": {"width": 9}},
    },
    "signals": {
        "mode": {"direction": "in", "width": 3},
        "err": {"direction": "out", "width": 1},
    },
}

# Amaranth-style registered 8-bit adder stream unit: i carries a and b, o the 9-bit sum.
ADDER_UNIT_VERILOG = """\
module add8(clk, rst, i__valid, i__payload, i__ready, o__valid, o__payload, o__ready);
  input clk;
  input rst;
  input i__valid;
  input [15:0] i__payload;
  output i__ready;
  output o__valid;
  output [8:0] o__payload;
  input o__ready;
  reg [8:0] sum;
  reg valid;
  assign i__ready = o__ready | ~valid;
  assign o__valid = valid;
  assign o__payload = sum;
  always @(posedge clk)
    if (rst) valid <= 1'b0;
    else if (i__ready) begin
      valid <= i__valid;
      sum <= i__payload[7:0] + i__payload[15:8];
    end
endmodule
"""

ADDER_MANIFEST = {
    "unit": "add8",
    "top": "add8",
    "params": {"width": 8},
    "ports": {
        "i": {"direction": "in", "payload": {"width": 16}},
        "o": {"direction": "out", "payload": {"width": 9}},
    },
    "signals": {},
    "synth_targets": None,
}


def test_ports_from_manifest():
    ports = unit_ports(MANIFEST)
    assert ports.inputs == (("rst", 1), ("i__valid", 1), ("i__payload", 12),
                            ("o__ready", 1), ("mode", 3))
    assert ports.outputs == (("i__ready", 1), ("o__valid", 1), ("o__payload", 9), ("err", 1))
    assert ports.scan_bits == 18
    assert ports.output_bits == 12


def test_manifest_without_outputs_or_with_bad_width_is_rejected():
    with pytest.raises(FmaxError, match="no output"):
        unit_ports({"unit": "x", "signals": {"a": {"direction": "in", "width": 2}}})
    with pytest.raises(FmaxError, match="width"):
        unit_ports({"unit": "x", "signals": {"a": {"direction": "out", "width": 0}}})


def test_xor_tree_widths():
    assert xor_tree_widths(1) == []
    assert xor_tree_widths(4) == [1]
    assert xor_tree_widths(5) == [2, 1]
    assert xor_tree_widths(12) == [3, 1]
    assert xor_tree_widths(1000) == [250, 63, 16, 4, 1]


def test_wrapper_scan_chain_and_xor_tree():
    ports = unit_ports(MANIFEST)
    text = wrapper_verilog("demo", ports)
    assert "module fmax_top(input clk, input sin, output sout);" in text
    # The scan chain is exactly as long as all unit inputs together, and fed by sin.
    assert f"reg [{ports.scan_bits - 1}:0] scan;" in text
    assert f"scan <= {{scan[{ports.scan_bits - 2}:0], sin}};" in text
    slices = re.findall(r"\.(\w+)\(scan\[(\d+):(\d+)\]\)", text)
    covered = sorted(bit for _, high, low in slices for bit in range(int(low), int(high) + 1))
    assert covered == list(range(ports.scan_bits))
    assert [name for name, _, _ in slices] == [name for name, _ in ports.inputs]
    # Every output is registered, then one registered level per tree width, ending in sout.
    assert "reg [11:0] level0;" in text
    assert "reg [2:0] level1;" in text and "reg [0:0] level2;" in text
    assert "level3" not in text
    assert "assign sout = level2[0];" in text
    assert "level1[2] <= ^level0[11:8];" in text
    assert ports.wrapper_flip_flops == 18 + 12 + 3 + 1


def test_single_output_bit_needs_no_tree():
    ports = WrapperPorts(inputs=(("rst", 1),), outputs=(("q", 1),))
    text = wrapper_verilog("tiny", ports)
    assert "scan <= sin;" in text
    assert "assign sout = level0[0];" in text


def test_port_check_finds_manifest_mismatch():
    ports = unit_ports(ADDER_MANIFEST)
    check_ports_against_verilog(ADDER_UNIT_VERILOG, "add8", ports)
    wrong = unit_ports({**ADDER_MANIFEST, "ports": {
        **ADDER_MANIFEST["ports"], "o": {"direction": "out", "payload": {"width": 8}}}})
    with pytest.raises(FmaxError, match="o__payload"):
        check_ports_against_verilog(ADDER_UNIT_VERILOG, "add8", wrong)


def test_report_without_fmax_is_an_error(tmp_path):
    with pytest.raises(FmaxError, match="no report.json"):
        read_report(tmp_path / "report.json", FMAX_TARGETS["ice40"])
    (tmp_path / "report.json").write_text(json.dumps({"fmax": {}, "utilization": {}}))
    with pytest.raises(FmaxError, match="no fmax"):
        read_report(tmp_path / "report.json", FMAX_TARGETS["ice40"])


@pytest.mark.synth
def test_fmax_command_on_ice40(tmp_path, capsys):
    build_dir = tmp_path / "build"
    verilog_dir = build_dir / "verilog"
    verilog_dir.mkdir(parents=True)
    (verilog_dir / "add8.v").write_text(ADDER_UNIT_VERILOG)
    (verilog_dir / "add8.json").write_text(json.dumps(ADDER_MANIFEST))
    assert main(["--build-dir", str(build_dir), "--target", "ice40"]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("| add8 "))
    fmax = float(row.split("|")[4])
    assert fmax > 0
    assert (build_dir / "reports" / "fmax.md").is_file()
    csv_text = (build_dir / "reports" / "fmax.csv").read_text()
    assert "add8,width=8,ice40,fmax_mhz," in csv_text
    run_dir = build_dir / "fmax" / "add8-ice40"
    seeds = [float(json.loads((run_dir / f"report-s{seed}.json").read_text())["fmax"]
                   [name]["achieved"])
             for seed in SEEDS
             for name in json.loads((run_dir / f"report-s{seed}.json").read_text())["fmax"]]
    # The table's figure is the median of the seeds' own nextpnr reports, each listed beside it.
    assert len(seeds) == len(SEEDS) == 3
    assert fmax == pytest.approx(sorted(seeds)[1], abs=0.06)
    assert row.split("|")[5].strip() == " / ".join(f"{mhz:.1f}" for mhz in seeds)
    for seed in SEEDS:
        assert f"add8,width=8,ice40,fmax_mhz_seed{seed}," in csv_text


def test_median_of_the_seeds():
    assert median([150.0, 140.0, 160.0]) == 150.0
    assert median([3.0]) == 3.0
    assert median([1.0, 4.0, 2.0, 3.0]) == 2.5


@pytest.mark.synth
def test_larger_ecp5_places_the_smaller_ones_netlist(tmp_path):
    """``netlist=``: the 85F run reuses the 25F run's net.json (same Yosys script) and runs
    nextpnr only; a netlist from another script is refused."""
    from qllm_cores.fpga.area import find_units
    from qllm_cores.fpga.fmax import fmax_run

    (tmp_path / "add8.v").write_text(ADDER_UNIT_VERILOG)
    (tmp_path / "add8.json").write_text(json.dumps(ADDER_MANIFEST))
    (unit,) = find_units(tmp_path, ["add8"])
    small = fmax_run(unit, "ecp5", tmp_path / "runs")
    large = fmax_run(unit, "ecp5-85k", tmp_path / "runs", netlist=small.run_dir / "net.json")
    assert large.fmax_mhz > 0 and large.run_dir.name == "add8-ecp5-85k"
    assert not (large.run_dir / "yosys.log").exists()
    assert (large.run_dir / "net.json").read_bytes() == (small.run_dir / "net.json").read_bytes()
    def available_luts(run):
        report = json.loads((run.run_dir / f"report-s{SEEDS[0]}.json").read_text())
        return report["utilization"]["TRELLIS_COMB"]["available"]

    # Placed on the larger device: LFE5U-85F has 83,640 LUT4s, the 25F 24,288.
    assert (available_luts(small), available_luts(large)) == (24288, 83640)
    ice40_dir = tmp_path / "runs" / "add8-ice40"
    ice40_dir.mkdir()
    (ice40_dir / "yosys.ys").write_text("synth_ice40\n")
    (ice40_dir / "net.json").write_text("{}")
    with pytest.raises(FmaxError, match="not made by this target's Yosys script"):
        fmax_run(unit, "ecp5-85k", tmp_path / "runs", netlist=ice40_dir / "net.json")


def test_a_seed_not_routed_in_time_counts_as_the_slowest(monkeypatch, tmp_path):
    """Seeds 1 and 3 route (140 and 160 MHz), seed 2 times out: the median is 140 (the
    timed-out seed below both); with two seeds timed out there is no median."""
    from qllm_cores.fpga import fmax
    from qllm_cores.fpga.area import find_units
    from qllm_cores.fpga.nextpnr import FmaxTimeout

    (tmp_path / "add8.v").write_text(ADDER_UNIT_VERILOG)
    (tmp_path / "add8.json").write_text(json.dumps(ADDER_MANIFEST))
    (unit,) = find_units(tmp_path, ["add8"])
    achieved = {1: 140.0, 2: None, 3: 160.0}

    def fake_run(command, cwd, tool, log, timeout_s):
        if tool == "yosys":
            (cwd / "net.json").write_text("{}")
            return
        seed = int(command[command.index("--seed") + 1])
        if achieved[seed] is None:
            raise FmaxTimeout(f"{tool} timed out after {timeout_s} s")
        (cwd / f"report-s{seed}.json").write_text(json.dumps({
            "fmax": {"clk": {"achieved": achieved[seed], "constraint": 12.0}},
            "utilization": {"ICESTORM_LC": {"used": 9, "available": 5280}}}))

    monkeypatch.setattr(fmax, "_run", fake_run)
    result = fmax.fmax_run(unit, "ice40", tmp_path / "runs", timeout_s=5)
    assert result.seeds_mhz == (140.0, None, 160.0) and result.fmax_mhz == 140.0
    assert fmax.seeds_text({"seeds_mhz": list(result.seeds_mhz)}) == "140.0 / timed out / 160.0"
    achieved[3] = None
    with pytest.raises(FmaxTimeout, match="timed out after 5 s"):
        fmax.fmax_run(unit, "ice40", tmp_path / "runs", timeout_s=5)


def test_nextpnr_over_capacity_is_stopped_at_once(tmp_path):
    """A nextpnr whose log shows a bel type over 100 % is stopped, not waited for, and fails
    with the shortfall in its log."""
    import sys
    import time as clock

    from qllm_cores.fpga import fmax
    from qllm_cores.fpga.nextpnr import capacity_shortfall

    fake = tmp_path / "fake_nextpnr.py"
    fake.write_text(
        "import pathlib, time\n"
        "pathlib.Path('nextpnr.log').write_text("
        "'Info: Device utilisation:\\nInfo: \\t        TRELLIS_COMB:   26986/  24288   111%\\n')\n"
        "time.sleep(60)\n")
    started = clock.monotonic()
    with pytest.raises(FmaxError, match="does not fit"):
        fmax._run([sys.executable, str(fake)], tmp_path, "nextpnr (seed 1)",
                  tmp_path / "nextpnr.log", 120)
    assert clock.monotonic() - started < 30
    assert capacity_shortfall((tmp_path / "nextpnr.log").read_text()) == "26986/24288 TRELLIS_COMB"
