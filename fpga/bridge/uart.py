"""8N1 UART receiver and transmitter with ``amaranth.lib.stream`` byte ports.

Used by :mod:`fpga.bridge.gateware` to put a unit behind a serial link on a real board. Both
directions use the classic asynchronous frame: the line idles high, a byte is a start bit (low),
eight data bits least significant first and one stop bit (high), each bit ``divisor`` clock
cycles long (``divisor = round(f_clk / baud)``).
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from qllm_cores.hdl.common.params import check_int

__all__ = ["UartRx", "UartTx", "MIN_DIVISOR"]

#: Smallest number of clock cycles per bit: the receiver needs a start-bit centre at least one
#: cycle after it sees the edge and one sample per bit.
MIN_DIVISOR = 4

#: Data bits per frame.
DATA_BITS = 8


def _check_divisor(divisor):
    return check_int("divisor", divisor, min_value=MIN_DIVISOR)


class UartRx(wiring.Component):
    """8N1 receiver: one byte on ``o`` for every frame on ``rx`` with a valid stop bit.

    ``rx`` passes through a two-flip-flop synchronizer (it is asynchronous to the clock). A
    frame starts at the first synchronized low sample; the receiver samples the line again
    ``divisor // 2`` cycles later, in the middle of the start bit (a high sample there is taken
    for a glitch and ignored), and then every ``divisor`` cycles: eight data bits, least
    significant first, and the stop bit. After the stop-bit sample, in the middle of the stop
    bit, the receiver is ready for the next start edge, so a sender's clock may be slightly
    faster or slower (about +-4 % for ``divisor >= 16``, less for small divisors where the
    sampling point is quantized to whole cycles).

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4.

    Members
    -------
    rx : ``In(1, init=1)``
        Serial input (idle high). Any clock domain: it is synchronized here.
    o : ``Out(stream.Signature(8))``
        Received bytes. ``o.valid`` and ``o.payload`` come from flip-flops; a byte is offered
        one cycle after its stop-bit sample and held until ``o.ready``.
    framing_error : ``Out(1)``
        Pulse, high for one cycle when a frame ends with a low stop bit. The byte is discarded,
        and the receiver waits for the line to return high before it looks for the next start
        bit (a line held low, a "break", gives one pulse, not a stream of zero bytes).
    line_break : ``Out(1)``
        Pulse with ``framing_error`` when the data bits were all 0 as well: the line was low
        for a whole frame (a "break", e.g. pyserial's ``send_break()``).
    overrun : ``Out(1)``
        Pulse, high for one cycle when a byte is dropped because the previous one is still
        waiting on ``o`` (``o.valid`` high and ``o.ready`` low when the new byte's stop bit is
        sampled). The consumer has a whole frame time (``10 * divisor`` cycles) to take a byte
        before this happens. The byte already on ``o`` is kept.

    Latency: a byte is valid on ``o`` about ``9.5 * divisor + 4`` cycles after the falling
    edge of its start bit (two synchronizer stages, half a start bit, eight data bits, half a
    stop bit, one output register).

    Raises
    ------
    TypeError
        If ``divisor`` is not an integer.
    ValueError
        If ``divisor`` is less than 4.
    """

    def __init__(self, divisor):
        self.divisor = _check_divisor(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(DATA_BITS)),
            "framing_error": Out(1),
            "line_break": Out(1),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1, stages=2)

        timer = Signal(range(self.divisor))     # cycles to the next sample
        count = Signal(range(DATA_BITS))        # data bits received so far
        shift = Signal(DATA_BITS)               # data bits, shifted in from the top

        m.d.sync += [self.framing_error.eq(0), self.line_break.eq(0), self.overrun.eq(0)]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        sample = timer == 0

        with m.FSM(name="rx_fsm"):
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += timer.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(sample):
                    with m.If(rx):                      # too short for a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [timer.eq(self.divisor - 1), count.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(sample):
                    m.d.sync += [
                        timer.eq(self.divisor - 1),
                        shift.eq(Cat(shift[1:], rx)),
                        count.eq(count + 1),
                    ]
                    with m.If(count == DATA_BITS - 1):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(sample):
                    with m.If(~rx):
                        m.d.sync += [self.framing_error.eq(1), self.line_break.eq(shift == 0)]
                        m.next = "BREAK"
                    with m.Else():
                        with m.If(self.o.valid & ~self.o.ready):
                            m.d.sync += self.overrun.eq(1)
                        with m.Else():
                            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(shift)]
                        m.next = "IDLE"
            with m.State("BREAK"):
                with m.If(rx):
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """8N1 transmitter: every byte taken from ``i`` is sent on ``tx``.

    A byte is accepted when the transmitter is idle or in the last cycle of the previous
    frame's stop bit, so back-to-back bytes leave with no idle time between frames: exactly
    ``10 * divisor`` cycles per byte.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4.

    Members
    -------
    i : ``In(stream.Signature(8))``
        Bytes to send. ``i.ready`` is combinational in the transmitter state only (it does not
        depend on ``i.valid``).
    tx : ``Out(1, init=1)``
        Serial output, from a flip-flop (idle high). The start bit begins the cycle after the
        transfer on ``i``.

    Raises
    ------
    TypeError
        If ``divisor`` is not an integer.
    ValueError
        If ``divisor`` is less than 4.
    """

    def __init__(self, divisor):
        self.divisor = _check_divisor(divisor)
        super().__init__({
            "i": In(stream.Signature(DATA_BITS)),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))     # cycles left in the bit on ``tx``, minus one
        bits = Signal(range(DATA_BITS + 3))     # bits left including the one on ``tx``
        # The bits after the one on ``tx``: data bits, then the stop bit; ones shift in at the
        # top, so the line returns to idle (high) by itself after the stop bit.
        shift = Signal(DATA_BITS + 1, init=(1 << (DATA_BITS + 1)) - 1)

        bit_done = timer == 0
        m.d.comb += self.i.ready.eq((bits == 0) | ((bits == 1) & bit_done))
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                self.tx.eq(0),                                  # start bit
                shift.eq(Cat(self.i.payload, 1)),
                bits.eq(DATA_BITS + 2),
                timer.eq(self.divisor - 1),
            ]
        with m.Elif(bits != 0):
            with m.If(bit_done):
                m.d.sync += [
                    self.tx.eq(shift[0]),
                    shift.eq(Cat(shift[1:], 1)),
                    bits.eq(bits - 1),
                    timer.eq(self.divisor - 1),
                ]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m
