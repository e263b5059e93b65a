"""Operand registers into the ECP5 multipliers: a netlist step of the ECP5 Fmax flow.

Yosys 0.70 maps a multiply to a ``MULT18X18D`` with every register stage bypassed
(``lattice/dsp_map_18x18.v``) and has no pass that moves flip-flops into it (it has one for
iCE40's SB_MAC16 and for Xilinx DSPs); nextpnr-ecp5 packs none either. A design whose operands
sit in fabric flip-flops right in front of the multiply therefore times as flip-flop -> route
-> 3.9 ns combinational multiplier -> route -> flip-flop, about 145 MHz on the LFE5U-25F
whatever the design does, where the vendor flow (and a design instantiating the primitive with
``REG_INPUTA_CLK = "CLK0"``) uses the multiplier's input registers.

:func:`absorb_operand_registers` does that move on the ``net.json`` Yosys writes, before
nextpnr reads it: for each unregistered ``MULT18X18D`` and each operand port (A, B) whose
every non-constant pin is the output of a ``TRELLIS_FF`` on one clock and one clock enable,
without set/reset (its ``LSR`` tied to 0, ``REGSET`` = ``RESET``, so it powers up to 0 like the
multiplier's registers), and whose sign input (``SIGNEDA``/``SIGNEDB``) is a constant, the
port's input register is turned on (``REG_INPUT{A,B}_CLK`` = ``CLK0``, its enable one of
CE0..CE3, ``RST0`` tied to 0) and the pins read the flip-flops' data inputs instead of their
outputs. Flip-flops left without a reader are removed; a flip-flop that also feeds other
logic stays (the multiplier holds a copy). The move keeps the behaviour cycle for cycle from
power-up: both registers load the same data on the same enabled edges
(``tests/test_ecp5_dsp.py`` checks it on a synthesized netlist for every input sequence of 8
cycles, with the simulation model ``verif/models/MULT18X18D.v``).

It changes only what nextpnr places; the Verilog the project emits is untouched.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["absorb_operand_registers"]

_PORT_WIDTH = 18
_ENABLES = ("CE0", "CE1", "CE2", "CE3")


def _connectivity(cells: dict) -> tuple[dict, dict]:
    """Netlist bit -> (cell name, port) driving it, and bit -> list of (cell name, port)
    reading it."""
    drivers, users = {}, defaultdict(list)
    for name, cell in cells.items():
        for port, bits in cell["connections"].items():
            output = cell["port_directions"].get(port) == "output"
            for bit in bits:
                if isinstance(bit, str):
                    continue
                if output:
                    drivers[bit] = (name, port)
                else:
                    users[bit].append((name, port))
    return drivers, users


def _plain_register(cell: dict):
    """(clock bit, enable bit or "1", data bit) of a TRELLIS_FF a multiplier's input register
    can stand in for, or None."""
    if cell["type"] != "TRELLIS_FF":
        return None
    parameters, connections = cell["parameters"], cell["connections"]
    if parameters.get("CLKMUX", "CLK").strip() != "CLK":
        return None
    if parameters.get("REGSET", "RESET").strip() != "RESET":
        return None
    if connections.get("LSR", ["0"]) != ["0"] or "DI" not in connections:
        return None
    enable_mux = parameters.get("CEMUX", "1").strip()
    if enable_mux == "CE":
        enable = connections["CE"][0]
    elif enable_mux == "1":
        enable = "1"
    else:
        return None
    return connections["CLK"][0], enable, connections["DI"][0]


def _connect(cell: dict, port: str, bit) -> None:
    cell["connections"][port] = [bit]
    cell["port_directions"][port] = "input"


def _absorb_module(cells: dict, protected: set, within: str) -> int:
    drivers, users = _connectivity(cells)
    absorbed = set()
    for name, cell in cells.items():
        if cell["type"] != "MULT18X18D":
            continue
        parameters, connections = cell["parameters"], cell["connections"]
        clock = None if parameters.get("REG_INPUTA_CLK", "NONE") == "NONE" and \
            parameters.get("REG_INPUTB_CLK", "NONE") == "NONE" else connections["CLK0"][0]
        enables = {}              # enable bit -> CEn already in use on this multiplier
        for key in ("REG_INPUTA", "REG_INPUTB", "REG_INPUTC", "REG_PIPELINE", "REG_OUTPUT"):
            if parameters.get(f"{key}_CLK", "NONE") != "NONE":
                slot = parameters.get(f"{key}_CE", "CE0")
                enables[connections[slot][0]] = slot
        for port in ("A", "B"):
            if parameters.get(f"REG_INPUT{port}_CLK", "NONE") != "NONE":
                continue
            # Whether the input register also holds SIGNEDA / SIGNEDB is not spelled out by the
            # sysDSP guide (verif/models/MULT18X18D.v assumes it does); with the constant sign
            # mode of Yosys' mapping the move preserves behaviour either way.
            if not isinstance(connections.get(f"SIGNED{port}", ["0"])[0], str):
                continue
            pins = [f"{port}{k}" for k in range(_PORT_WIDTH)]
            registers = {}
            for pin in pins:
                bit = connections[pin][0]
                if isinstance(bit, str):
                    continue
                source = drivers.get(bit)
                register = None
                if source is not None and source[1] == "Q" and source[0].startswith(within):
                    register = _plain_register(cells[source[0]])
                if register is None:
                    break
                registers[pin] = (source[0], *register)
            else:
                if not registers:
                    continue
                clocks = {register[1] for register in registers.values()}
                port_enables = {register[2] for register in registers.values()}
                if len(clocks) != 1 or len(port_enables) != 1:
                    continue
                (port_clock,), (enable,) = clocks, port_enables
                if clock is not None and port_clock != clock:
                    continue
                if enable not in enables:
                    free = [slot for slot in _ENABLES if slot not in enables.values()]
                    if not free:
                        continue
                    enables[enable] = free[0]
                    _connect(cell, free[0], enable)
                clock = port_clock
                _connect(cell, "CLK0", clock)
                _connect(cell, "RST0", "0")
                parameters[f"REG_INPUT{port}_CLK"] = "CLK0"
                parameters[f"REG_INPUT{port}_CE"] = enables[enable]
                parameters[f"REG_INPUT{port}_RST"] = "RST0"
                parameters["RESETMODE"] = "SYNC"
                parameters["GSR"] = "DISABLED"
                for pin, (register_name, _clock, _enable, data) in registers.items():
                    q_bit = connections[pin][0]
                    users[q_bit].remove((name, pin))
                    connections[pin] = [data]
                    users[data].append((name, pin))
                    absorbed.add(register_name)
    removed = 0
    for register_name in sorted(absorbed):
        q_bit = cells[register_name]["connections"]["Q"][0]
        if not users[q_bit] and q_bit not in protected:
            del cells[register_name]
            removed += 1
    return removed


def absorb_operand_registers(netlist: dict, within: str = "") -> int:
    """Move operand flip-flops into the input registers of every unregistered MULT18X18D of
    the Yosys JSON `netlist` (in place); return how many flip-flops were removed.

    Only flip-flops whose cell name starts with `within` are taken (the Fmax flow passes the
    unit's instance, so that a multiplier fed straight from the unit's inputs does not take
    the timing wrapper's registers). A flip-flop whose output is a module port is never
    removed.
    """
    removed = 0
    for module in netlist["modules"].values():
        cells = module.get("cells", {})
        if any(cell["type"] == "MULT18X18D" for cell in cells.values()):
            port_bits = {bit for port in module.get("ports", {}).values() for bit in port["bits"]}
            removed += _absorb_module(cells, port_bits, within)
    return removed
