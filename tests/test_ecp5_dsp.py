"""fpga.ecp5_dsp: operand flip-flops into MULT18X18D input registers, on a netlist
synthesized by the ECP5 flow's own Yosys script, proved equivalent to the netlist Yosys wrote
(bounded, from power-up, with the ECP5 cell models and ``verif/models/MULT18X18D.v``); a
wrong transform (an enable swapped) fails the same proof."""

import json
import shutil
import subprocess

import pytest

from qllm_cores.fpga.ecp5_dsp import absorb_operand_registers
from qllm_cores.fpga.fmax import FMAX_TARGETS
from qllm_cores.fpga.yosys import find_yosys
from qllm_cores.verif.runner import MODELS

# Four operand registers around two multiplies: `aq` (enable ce) also drives an output, so it
# stays in the fabric and the multiplier holds a copy; `bq` (enable ce2) and `dq` (no enable)
# are moved; `cq` has a synchronous reset, which the move does not take.
DESIGN = """
module mac(input clk, input ce, input ce2, input rst, input [3:0] a, input signed [3:0] b,
           input [3:0] c, input signed [3:0] d, output reg signed [8:0] p,
           output reg signed [8:0] q, output [3:0] tap);
  reg [3:0] aq; reg signed [3:0] bq; reg [3:0] cq; reg signed [3:0] dq;
  always @(posedge clk) if (ce) aq <= a;
  always @(posedge clk) if (ce2) bq <= b;
  always @(posedge clk) if (rst) cq <= 0; else cq <= c;
  always @(posedge clk) dq <= d;
  assign tap = aq;
  always @(posedge clk) begin
    p <= $signed({1'b0, aq}) * bq;
    q <= $signed({1'b0, cq}) * dq;
  end
endmodule
"""


def _yosys(cwd, script):
    result = subprocess.run([str(find_yosys()), "-q", "-l", "yosys.log", "-p", script], cwd=cwd,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, (cwd / "yosys.log").read_text(errors="replace")


def _synthesize(tmp_path):
    (tmp_path / "mac.v").write_text(DESIGN)
    synth = FMAX_TARGETS["ecp5"].synth_command.replace("fmax_top", "mac")
    code, log = _yosys(tmp_path, f"read_verilog mac.v; {synth}")
    assert code == 0, log[-2000:]
    return json.loads((tmp_path / "net.json").read_text())


def _top_only(netlist):
    return {**netlist, "modules": {"mac": netlist["modules"]["mac"]}}


def _bounded_equivalence(tmp_path, gold, gate, steps=8):
    """True when `gold` and `gate` (Yosys JSON of module mac) agree on every output for
    `steps` cycles from power-up (all registers 0) under every input sequence."""
    shutil.copy(MODELS / "MULT18X18D.v", tmp_path / "MULT18X18D.v")
    for name, netlist in (("gold", gold), ("gate", gate)):
        (tmp_path / f"{name}.json").write_text(json.dumps(_top_only(netlist)))
        code, log = _yosys(tmp_path, f"read_json {name}.json; read_verilog -D NO_INCLUDES "
                                     f"+/ecp5/cells_sim.v; read_verilog -sv MULT18X18D.v; "
                                     f"hierarchy -top mac; proc; flatten; opt_clean; "
                                     f"rename mac {name}; write_rtlil {name}.il")
        assert code == 0, log[-2000:]
    code, log = _yosys(tmp_path, f"read_rtlil gold.il; read_rtlil gate.il; "
                                 f"miter -equiv -flatten -make_assert gold gate miter; "
                                 f"hierarchy -top miter; "
                                 f"sat -verify -seq {steps} -set-init-zero -prove-asserts miter")
    assert "SAT proof finished" in log, log[-2000:]
    return code == 0


def _multipliers(netlist):
    return [cell for cell in netlist["modules"]["mac"]["cells"].values()
            if cell["type"] == "MULT18X18D"]


def test_operand_registers_move_into_the_multiplier_and_behaviour_is_kept(tmp_path):
    gold = _synthesize(tmp_path)
    gate = json.loads(json.dumps(gold))
    flip_flops = sum(cell["type"] == "TRELLIS_FF" for cell in gold["modules"]["mac"]["cells"].values())
    assert all(cell["parameters"].get("REG_INPUTA_CLK", "NONE") == "NONE" for cell in _multipliers(gold))

    assert absorb_operand_registers(gate) == 8           # bq and dq; aq is an output too
    assert absorb_operand_registers(gate) == 0           # idempotent
    after = sum(cell["type"] == "TRELLIS_FF" for cell in gate["modules"]["mac"]["cells"].values())
    assert after == flip_flops - 8
    registered = sorted((cell["parameters"].get("REG_INPUTA_CLK", "NONE"),
                         cell["parameters"].get("REG_INPUTB_CLK", "NONE"))
                        for cell in _multipliers(gate))
    # p: both operands (aq copied, bq moved; two enables, CE0 and CE1); q: only dq (cq resets).
    assert registered in ([("CLK0", "CLK0"), ("NONE", "CLK0")], [("CLK0", "CLK0"), ("CLK0", "NONE")])
    enables = sorted({cell["parameters"].get(f"REG_INPUT{port}_CE")
                      for cell in _multipliers(gate) for port in "AB"
                      if cell["parameters"].get(f"REG_INPUT{port}_CLK") == "CLK0"})
    assert enables == ["CE0", "CE1"]

    assert _bounded_equivalence(tmp_path, gold, gate)

    # The proof can fail: the two operands of p on one enable.
    wrong = json.loads(json.dumps(gate))
    for cell in _multipliers(wrong):
        for port in "AB":
            if cell["parameters"].get(f"REG_INPUT{port}_CE") == "CE1":
                cell["parameters"][f"REG_INPUT{port}_CE"] = "CE0"
    assert not _bounded_equivalence(tmp_path, gold, wrong)


def _cell(kind, connections, parameters=None):
    directions = {port: ("output" if port in ("Q", "O") or port.startswith("P") else "input")
                  for port in connections}
    return {"type": kind, "parameters": parameters or {}, "port_directions": directions,
            "connections": connections}


def _tiny(register_parameters, lsr="0", second_clock=False):
    """One multiplier whose A port is two flip-flops (bits 10, 11 from data 20, 21)."""
    flip_flop = {"CEMUX": "CE", "CLKMUX": "CLK", "GSR": "DISABLED", "LSRMUX": "LSR",
                 "REGSET": "RESET", **register_parameters}
    cells = {
        "ff0": _cell("TRELLIS_FF", {"CLK": [2], "CE": [3], "LSR": [lsr], "DI": [20], "Q": [10]},
                     flip_flop),
        "ff1": _cell("TRELLIS_FF", {"CLK": [5 if second_clock else 2], "CE": [3], "LSR": ["0"],
                                    "DI": [21], "Q": [11]}, flip_flop),
        "mul": _cell("MULT18X18D", {**{f"A{k}": [10 + k] if k < 2 else ["0"] for k in range(18)},
                                    **{f"B{k}": ["0"] for k in range(18)},
                                    **{f"P{k}": [40 + k] for k in range(36)}}),
    }
    return {"modules": {"top": {"ports": {}, "cells": cells, "netnames": {}}}}


@pytest.mark.parametrize("case", ["plain", "set", "reset", "inverted enable", "two clocks",
                                  "outside the unit", "dynamic sign"])
def test_only_plain_registers_on_one_clock_are_moved(case):
    netlist = {
        "plain": lambda: _tiny({}),
        "set": lambda: _tiny({"REGSET": "SET"}),
        "reset": lambda: _tiny({}, lsr=7),
        "inverted enable": lambda: _tiny({"CEMUX": "INV"}),
        "two clocks": lambda: _tiny({}, second_clock=True),
        "outside the unit": lambda: _tiny({}),
        "dynamic sign": lambda: _tiny({}),
    }[case]()
    if case == "dynamic sign":
        multiplier = netlist["modules"]["top"]["cells"]["mul"]
        multiplier["connections"]["SIGNEDA"] = [9]
        multiplier["port_directions"]["SIGNEDA"] = "input"
    moved = absorb_operand_registers(netlist, within="dut." if case == "outside the unit" else "")
    cells = netlist["modules"]["top"]["cells"]
    if case == "plain":
        assert moved == 2 and set(cells) == {"mul"}
        assert cells["mul"]["connections"]["A0"] == [20] and cells["mul"]["connections"]["A1"] == [21]
        assert cells["mul"]["connections"]["CE0"] == [3] and cells["mul"]["connections"]["CLK0"] == [2]
        assert cells["mul"]["parameters"]["REG_INPUTA_CLK"] == "CLK0"
    else:
        assert moved == 0 and set(cells) == {"ff0", "ff1", "mul"}
        assert cells["mul"]["connections"]["A0"] == [10]
        assert cells["mul"]["parameters"].get("REG_INPUTA_CLK", "NONE") == "NONE"
