"""The board end of the bridge protocol (:mod:`fpga.bridge.protocol`): a unit behind a UART.

:class:`UartBridge` composes small components over :mod:`fpga.bridge.uart`: the receiver, a byte FIFO,
:class:`CommandDecoder` (commands from the FIFO: input beats for the unit, replies owed, the
reset command), :class:`FrameSender` (one frame at a time into the transmitter: replies,
acknowledgements and the unit's output beats) and the sticky status flags.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, ResetInserter, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from qllm_cores.fpga.bridge.protocol import (
    DEFAULT_FIFO_DEPTH,
    IDENTIFY_BYTES,
    MAX_FIFO_DEPTH,
    BridgeLayout,
    Command,
    Flag,
    Header,
    bridge_identity,
)
from qllm_cores.gen.verilog import port_description, signal_description
from qllm_cores.hdl.common.params import check_int
from qllm_cores.fpga.bridge.uart import MIN_DIVISOR, UartRx, UartTx

__all__ = ["CommandDecoder", "FrameSender", "Reply", "UartBridge", "layout_of"]


class Reply(enum.Enum, shape=2):
    """A reply the decoder owes the host, sent by :class:`FrameSender`."""

    STATUS = 0
    IDENTIFY = 1
    RESET = 2
    UNKNOWN = 3


#: The frame header of each reply.
REPLY_HEADERS = {Reply.STATUS: Header.STATUS, Reply.IDENTIFY: Header.IDENTIFY,
                 Reply.RESET: Header.RESET, Reply.UNKNOWN: Header.UNKNOWN}


def layout_of(component) -> BridgeLayout:
    """The frame layout of ``component`` (what its manifest would say).

    Raises
    ------
    ValueError
        If a member is neither an ``amaranth.lib.stream`` port nor a plain signal, or a
        direction has more than 64 streams.
    """
    ports, signals = port_description(component), signal_description(component)
    for name in component.signature.members:
        if name not in ports and name not in signals:
            raise ValueError(f"member {name!r} of {type(component).__name__} is neither a "
                             "stream nor a plain signal; the UART bridge cannot carry it")
    return BridgeLayout.from_manifest({"ports": ports, "signals": signals})


class CommandDecoder(wiring.Component):
    """Commands from the receive buffer, one at a time.

    Parameters
    ----------
    layout : BridgeLayout

    Members
    -------
    bytes : ``In(stream.Signature(8))``
        Received bytes (the FIFO's read side).
    beat : ``Out(stream.Signature(StructLayout({"port", "data"})))``
        An input beat: ``data`` holds the payload in its low bits, ``port`` the input stream
        index; held until taken.
    reply : ``Out(stream.Signature(Reply))``
        The reply owed for a command other than a beat; the next command waits until it is
        taken.
    sender_idle : ``In(1)``
        No frame on the line and no acknowledgement owed: the reset command waits for it.
    hold_outputs : ``Out(1)``
        Start no output frame (while a reset command waits and is applied).
    reset_unit : ``Out(1)``
        One cycle: reset the unit and clear the sticky flags.
    unknown : ``Out(1)``
        One cycle: an unknown command byte was read.
    """

    def __init__(self, layout: BridgeLayout):
        self.layout = layout
        self.in_bytes = max((s.nbytes for s in layout.inputs), default=0)
        beat = data.StructLayout({"port": range(max(1, len(layout.inputs))),
                                  "data": 8 * self.in_bytes})
        super().__init__({
            "bytes": In(stream.Signature(8)),
            "beat": Out(stream.Signature(beat)),
            "reply": Out(stream.Signature(Reply)),
            "sender_idle": In(1),
            "hold_outputs": Out(1),
            "reset_unit": Out(1),
            "unknown": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        layout = self.layout
        buffer = self.beat.payload.data           # bytes shift in from the top
        remaining = Signal(range(self.in_bytes + 1))

        with m.FSM(name="command"):
            with m.State("IDLE"):
                m.d.comb += self.bytes.ready.eq(1)
                with m.If(self.bytes.valid):
                    with m.Switch(self.bytes.payload):
                        for s in layout.inputs:
                            with m.Case(s.index):
                                m.d.sync += [self.beat.payload.port.eq(s.index),
                                             remaining.eq(s.nbytes)]
                                m.next = "COLLECT"
                        with m.Case(Command.IDENTIFY):
                            m.d.sync += self.reply.payload.eq(Reply.IDENTIFY)
                            m.next = "REPLY"
                        with m.Case(Command.RESET):
                            m.next = "RESET_WAIT"
                        with m.Case(Command.STATUS):
                            m.d.sync += self.reply.payload.eq(Reply.STATUS)
                            m.next = "REPLY"
                        with m.Default():
                            m.d.comb += self.unknown.eq(1)
                            m.d.sync += self.reply.payload.eq(Reply.UNKNOWN)
                            m.next = "REPLY"
            with m.State("COLLECT"):
                m.d.comb += self.bytes.ready.eq(1)
                with m.If(self.bytes.valid):
                    m.d.sync += [buffer.eq(Cat(buffer[8:], self.bytes.payload)),
                                 remaining.eq(remaining - 1)]
                    with m.If(remaining == 1):
                        m.next = "DELIVER"
            with m.State("DELIVER"):
                m.d.comb += self.beat.valid.eq(1)
                with m.If(self.beat.ready):
                    m.next = "IDLE"
            with m.State("RESET_WAIT"):
                # Finish the frame on the line and the acknowledgements owed, start no output
                # frame, then reset the unit with the transmitter idle.
                m.d.comb += self.hold_outputs.eq(1)
                with m.If(self.sender_idle):
                    m.next = "RESET_PULSE"
            with m.State("RESET_PULSE"):
                m.d.comb += [self.hold_outputs.eq(1), self.reset_unit.eq(1)]
                m.d.sync += self.reply.payload.eq(Reply.RESET)
                m.next = "REPLY"
            with m.State("REPLY"):
                m.d.comb += self.reply.valid.eq(1)
                with m.If(self.reply.ready):
                    m.next = "IDLE"
        return m


class FrameSender(wiring.Component):
    """One frame at a time into the transmitter: acknowledgements first, then the reply owed,
    then the unit's output beats (lowest stream first).

    An output beat is taken (``ready``) only as the last byte of its frame enters the
    transmitter, so nothing is lost and the unit stalls while the line is busy.

    Parameters
    ----------
    layout : BridgeLayout
    identity : int
        32-bit value of the identify reply.
    rx_fifo_depth : int
        Receive buffer depth reported by the identify reply.

    Members
    -------
    o<k> : ``In(stream.Signature(width))``
        Output stream ``k`` of the unit (raw payload bits).
    reply : ``In(stream.Signature(Reply))``
    ack : ``In(1)``
        One cycle: one more acknowledgement is owed (an input beat was taken).
    status : ``In(8 * layout.status_bytes)``
        The status frame's value, sampled when the frame starts.
    hold_outputs : ``In(1)``
    idle : ``Out(1)``
        No frame on the line and no acknowledgement owed.
    tx : ``Out(stream.Signature(8))``
        Bytes for the transmitter.
    """

    def __init__(self, layout: BridgeLayout, *, identity: int, rx_fifo_depth: int):
        self.layout = layout
        self.identity = identity
        self.rx_fifo_depth = rx_fifo_depth
        members = {f"o{s.index}": In(stream.Signature(s.width)) for s in layout.outputs}
        members.update({
            "reply": In(stream.Signature(Reply)),
            "ack": In(1),
            "status": In(8 * layout.status_bytes),
            "hold_outputs": In(1),
            "idle": Out(1),
            "tx": Out(stream.Signature(8)),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        layout = self.layout
        outputs = [getattr(self, f"o{s.index}") for s in layout.outputs]

        # Frame sources: output streams, then the replies (Reply order), then the
        # acknowledgement: (header, data, payload bytes).
        status = Signal.like(self.status)
        sources = [(Header.OUTPUT | s.index, port.payload, s.nbytes)
                   for s, port in zip(layout.outputs, outputs)]
        reply_data = {
            Reply.STATUS: (status, layout.status_bytes),
            Reply.IDENTIFY: (Cat(Const(self.identity, 32), Const(self.rx_fifo_depth, 16)),
                             IDENTIFY_BYTES),
        }
        first_reply = len(sources)
        for reply in Reply:
            value, nbytes = reply_data.get(reply, (Const(0, 0), 0))
            sources.append((REPLY_HEADERS[reply], value, nbytes))
        src_ack = len(sources)
        sources.append((Header.ACK, Const(0, 0), 0))
        longest = max(nbytes for _, _, nbytes in sources)

        busy = Signal()
        source = Signal(range(len(sources)))
        position = Signal(range(longest + 1))      # 0: header, then payload bytes
        acks_owed = Signal(range(self.rx_fifo_depth + 1))
        ack_take = Signal()
        m.d.sync += acks_owed.eq(acks_owed + self.ack - ack_take)
        m.d.comb += self.idle.eq(~busy & (acks_owed == 0))

        with m.If(~busy):
            with m.If(acks_owed != 0):
                m.d.comb += ack_take.eq(1)
                m.d.sync += [busy.eq(1), source.eq(src_ack)]
            with m.Elif(self.reply.valid):
                m.d.comb += self.reply.ready.eq(1)
                m.d.sync += [busy.eq(1), source.eq(first_reply + self.reply.payload.as_value())]
                with m.If(self.reply.payload == Reply.STATUS):
                    m.d.sync += status.eq(self.status)
            with m.Elif(~self.hold_outputs):
                for index, port in reversed(list(enumerate(outputs))):   # lowest index wins
                    with m.If(port.valid):
                        m.d.sync += [busy.eq(1), source.eq(index)]
        with m.Else():
            last_byte = Signal()
            with m.Switch(source):
                for index, (header, value, nbytes) in enumerate(sources):
                    with m.Case(index):
                        frame = Cat(Const(header, 8), value,
                                    Const(0, 8 * (nbytes + 1) - 8 - len(value)))
                        m.d.comb += [
                            self.tx.payload.eq(frame.word_select(position, 8)) if nbytes else
                            self.tx.payload.eq(header),
                            last_byte.eq(position == nbytes),
                        ]
            m.d.comb += self.tx.valid.eq(1)
            with m.If(self.tx.ready):
                m.d.sync += position.eq(position + 1)
                with m.If(last_byte):
                    m.d.sync += [busy.eq(0), position.eq(0)]
                    for index, port in enumerate(outputs):
                        with m.If(source == index):
                            m.d.comb += port.ready.eq(1)
        return m


class UartBridge(wiring.Component):
    """A unit behind an 8N1 UART, with the byte protocol of :mod:`fpga.bridge.protocol`.

    Parameters
    ----------
    unit : wiring.Component
        The unit: ``amaranth.lib.stream`` ports and plain signals only. It becomes the
        submodule ``unit``, reset by the reset command, a break on ``rx`` and the domain's
        own reset.
    divisor : int
        Clock cycles per bit, at least 4 (:class:`fpga.bridge.uart.UartRx`).
    rx_fifo_depth : int, optional
        Receive buffer in bytes, ``max_input_frame..65535`` (the longest host-to-board frame
        must fit). Default: 512 (one iCE40 or ECP5 block RAM), or the next power of two above
        the longest frame if that is larger.
    identity : int, optional
        32-bit value of the identify reply; default :func:`bridge_identity` of the layout
        without unit name and parameters (:func:`fpga.bridge.board.unit_bridge` includes
        them).

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
        carry (see :func:`layout_of`).
    """

    def __init__(self, unit, divisor, *, rx_fifo_depth=None, identity=None):
        self.unit = unit
        self.layout = layout_of(unit)
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
        # Everything else is reset by a break on the line (see the protocol).
        m = Module()
        top.submodules.core = ResetInserter(rx_uart.line_break)(m)

        layout = self.layout
        m.submodules.rx_fifo = fifo = SyncFIFOBuffered(width=8, depth=self.rx_fifo_depth)
        m.submodules.decoder = decoder = CommandDecoder(layout)
        m.submodules.sender = sender = FrameSender(layout, identity=self.identity,
                                                   rx_fifo_depth=self.rx_fifo_depth)
        m.submodules.tx_uart = tx_uart = UartTx(self.divisor)
        m.submodules.unit = ResetInserter(decoder.reset_unit)(self.unit)
        wiring.connect(m, rx_uart.o, fifo.w_stream)
        wiring.connect(m, fifo.r_stream, decoder.bytes)
        wiring.connect(m, decoder.reply, sender.reply)
        wiring.connect(m, sender.tx, tx_uart.i)
        m.d.comb += [
            self.tx.eq(tx_uart.tx),
            sender.hold_outputs.eq(decoder.hold_outputs),
            decoder.sender_idle.eq(sender.idle),
            sender.ack.eq(decoder.beat.valid & decoder.beat.ready),
        ]

        # Input beats to the unit; its output beats to the sender.
        beat = decoder.beat
        for s in layout.inputs:
            port = getattr(self.unit, s.name)
            low = 8 * (decoder.in_bytes - s.nbytes)      # the last nbytes bytes received
            m.d.comb += [
                port.payload.eq(beat.payload.data[low:low + s.width]),
                port.valid.eq(beat.valid & (beat.payload.port == s.index)),
            ]
            with m.If(beat.payload.port == s.index):
                m.d.comb += beat.ready.eq(port.ready)
        for s in layout.outputs:
            port, into = getattr(self.unit, s.name), getattr(sender, f"o{s.index}")
            m.d.comb += [into.payload.eq(port.payload), into.valid.eq(port.valid),
                         port.ready.eq(into.ready)]

        # Sticky flags, cleared by the reset command; then the unit's plain output signals.
        flags = Signal(8)
        raised = {Flag.FRAMING: rx_uart.framing_error, Flag.OVERRUN: rx_uart.overrun,
                  Flag.UNKNOWN: decoder.unknown}
        with m.If(decoder.reset_unit):
            m.d.sync += flags.eq(0)
        with m.Else():
            for flag, event in raised.items():
                with m.If(event):
                    m.d.sync += flags[flag.bit_length() - 1].eq(1)
        m.d.comb += [
            self.error.eq(flags != 0),
            sender.status.eq(Cat(flags, *(getattr(self.unit, name)
                                          for name, _ in layout.signals))),
        ]
        return top
