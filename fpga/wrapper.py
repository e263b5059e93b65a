"""The registered timing wrapper of an Fmax run (the register-wrapper layer of ``fpga/``).

A unit has far more ports than a small package has pins, and a path from a pin to logic
says nothing about the unit. The wrapper ``fmax_top`` therefore has three ports only,
``clk``, ``sin`` and ``sout``:

* every unit input (``rst``, ``<p>__valid``/``<p>__payload`` of input streams,
  ``<p>__ready`` of output streams, plain input signals) is a slice of one long shift
  register fed by ``sin`` (a scan chain), so every input path starts at a flip-flop;
* every unit output is registered and the registers are folded into ``sout`` by a pipelined
  XOR tree (`XOR_FAN_IN` inputs per LUT, a register after every level), so no unit logic
  is optimised away and every output path ends at a flip-flop.

Scan-chain and tree paths are register to register through at most one LUT, so they do
not limit Fmax unless the unit itself is that shallow. The wrapper adds
`WrapperPorts.wrapper_flip_flops` flip-flops to the resource counts (reported as
``wrapper FF``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from qllm_cores.fpga.nextpnr import FmaxError

__all__ = ["WRAPPER_TOP", "XOR_FAN_IN", "WrapperPorts", "check_ports_against_verilog",
           "unit_ports", "wrapper_verilog", "xor_tree_widths"]

WRAPPER_TOP = "fmax_top"
"""Module name of the timing wrapper."""

XOR_FAN_IN = 4
"""Inputs per XOR of the output tree: one 4-input LUT on both families."""

@dataclass(frozen=True)
class WrapperPorts:
    """The unit's ports as the wrapper connects them (clock excluded).

    Attributes
    ----------
    inputs, outputs : tuple of (name, width)
        In scan-chain order (inputs; ``rst`` first) and XOR-tree order (outputs).
    """

    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]

    @property
    def scan_bits(self) -> int:
        return sum(width for _, width in self.inputs)

    @property
    def output_bits(self) -> int:
        return sum(width for _, width in self.outputs)

    @property
    def wrapper_flip_flops(self) -> int:
        """Flip-flops the wrapper adds: scan chain, output registers, XOR-tree levels."""
        return self.scan_bits + self.output_bits + sum(xor_tree_widths(self.output_bits))


def unit_ports(manifest: dict) -> WrapperPorts:
    """Ports of a unit from its manifest: ``rst``, streams (``ports``) and ``signals``.

    Raises
    ------
    FmaxError
        If the manifest describes a port without a direction or positive width, or the
        unit has no output.
    """
    inputs: list[tuple[str, int]] = [("rst", 1)]
    outputs: list[tuple[str, int]] = []
    for name, port in (manifest.get("ports") or {}).items():
        direction = port.get("direction")
        width = (port.get("payload") or {}).get("width")
        _check_port(name, direction, width)
        payload = (f"{name}__payload", width)
        if direction == "in":
            inputs += [(f"{name}__valid", 1), payload]
            outputs.append((f"{name}__ready", 1))
        else:
            inputs.append((f"{name}__ready", 1))
            outputs += [(f"{name}__valid", 1), payload]
    for name, signal in (manifest.get("signals") or {}).items():
        direction, width = signal.get("direction"), signal.get("width")
        _check_port(name, direction, width)
        (inputs if direction == "in" else outputs).append((name, width))
    if not outputs:
        raise FmaxError(f"unit {manifest.get('unit')!r} has no output to time")
    return WrapperPorts(tuple(inputs), tuple(outputs))


def _check_port(name: str, direction, width) -> None:
    if direction not in ("in", "out") or not isinstance(width, int) or width < 1:
        raise FmaxError(
            f"port {name!r}: direction={direction!r} and width={width!r} must be "
            "'in'/'out' and a positive integer"
        )


def xor_tree_widths(bits: int, fan_in: int = XOR_FAN_IN) -> list[int]:
    """Register widths of the XOR-tree levels folding `bits` bits into one (``[]`` for 1)."""
    if bits < 1 or fan_in < 2:
        raise ValueError(f"bits={bits} must be >= 1 and fan_in={fan_in} >= 2")
    widths = []
    while bits > 1:
        bits = math.ceil(bits / fan_in)
        widths.append(bits)
    return widths


def wrapper_verilog(top: str, ports: WrapperPorts, fan_in: int = XOR_FAN_IN) -> str:
    """Verilog of ``fmax_top``: scan chain -> unit `top` -> registers -> pipelined XOR tree."""
    scan_bits, out_bits = ports.scan_bits, ports.output_bits
    lines = [
        f"// Timing wrapper of {top}: {scan_bits}-bit scan chain, {out_bits} output registers,",
        f"// XOR tree of {fan_in}-input levels {xor_tree_widths(out_bits, fan_in)}.",
        f"module {WRAPPER_TOP}(input clk, input sin, output sout);",
        f"  reg [{scan_bits - 1}:0] scan;",
        "  always @(posedge clk) scan <= "
        + ("sin;" if scan_bits == 1 else f"{{scan[{scan_bits - 2}:0], sin}};"),
    ]
    connections = ["    .clk(clk)"]
    offset = 0
    for name, width in ports.inputs:
        connections.append(f"    .{name}(scan[{offset + width - 1}:{offset}])")
        offset += width
    for name, width in ports.outputs:
        lines.append(f"  wire [{width - 1}:0] out_{name};")
        connections.append(f"    .{name}(out_{name})")
    lines += [f"  {top} dut (", ",\n".join(connections), "  );"]
    concatenation = ", ".join(f"out_{name}" for name, _ in reversed(ports.outputs))
    lines += [
        f"  reg [{out_bits - 1}:0] level0;",
        f"  always @(posedge clk) level0 <= {{{concatenation}}};",
    ]
    previous, previous_width = "level0", out_bits
    for level, width in enumerate(xor_tree_widths(out_bits, fan_in), start=1):
        lines.append(f"  reg [{width - 1}:0] level{level};")
        lines.append("  always @(posedge clk) begin")
        for bit in range(width):
            low = bit * fan_in
            high = min(low + fan_in, previous_width) - 1
            lines.append(f"    level{level}[{bit}] <= ^{previous}[{high}:{low}];")
        lines.append("  end")
        previous, previous_width = f"level{level}", width
    lines += [f"  assign sout = {previous}[0];", "endmodule"]
    return "\n".join(lines) + "\n"


_PORT_DECLARATION = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):(\d+)\]\s*)?"
                               r"(\w+)\s*;", re.MULTILINE)


def check_ports_against_verilog(verilog_text: str, top: str, ports: WrapperPorts) -> None:
    """Check that the top module of `verilog_text` declares exactly the wrapper's ports.

    Only the ANSI-free style Amaranth emits (``input [7:0] a;`` inside the module) is
    parsed; if no such declaration is found the check is skipped.

    Raises
    ------
    FmaxError
        On a missing, extra or differently sized port.
    """
    match = re.search(rf"^module\s+{re.escape(top)}\s*\((.*?)^endmodule", verilog_text,
                      re.MULTILINE | re.DOTALL)
    if match is None:
        raise FmaxError(f"no module {top!r} in the unit's Verilog")
    declared = {
        name: ("in" if kind == "input" else "out",
               1 if not msb else abs(int(msb) - int(lsb)) + 1)
        for kind, msb, lsb, name in _PORT_DECLARATION.findall(match.group(1))
    }
    if not declared:
        return
    expected = {"clk": ("in", 1)}
    expected.update({name: ("in", width) for name, width in ports.inputs})
    expected.update({name: ("out", width) for name, width in ports.outputs})
    if declared != expected:
        differences = sorted(
            f"{name}: Verilog {declared.get(name)}, manifest {expected.get(name)}"
            for name in set(declared) | set(expected)
            if declared.get(name) != expected.get(name)
        )
        raise FmaxError(f"ports of {top!r} differ from its manifest: {'; '.join(differences)}")


# --------------------------------------------------------------------------- running
