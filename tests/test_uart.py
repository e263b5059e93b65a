# amaranth: UnusedElaboratable=no
"""UartRx / UartTx (fpga/bridge/uart.py) in Amaranth's Python simulator.

The line is modelled here, independently of the RTL: ``line_bits`` gives the 8N1 bit sequence
of a byte, ``drive_line`` plays it on ``rx`` with any bit length (fractional, for a sender
whose clock is off), and ``decode_line`` recovers bytes from a recorded ``tx`` waveform and
checks that every bit lasts exactly ``divisor`` cycles.
"""

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from qllm_cores.fpga.bridge.uart import UartRx, UartTx


def line_bits(byte, stop=1):
    """Start bit, 8 data bits LSB first, stop bit."""
    return [0] + [(byte >> bit) & 1 for bit in range(8)] + [stop]


async def drive_line(ctx, line, bits, bit_cycles, start_cycle=0.0):
    """Play ``bits`` on ``line``, bit k from cycle ``round(start + k * bit_cycles)``; return
    the (fractional) cycle where the next bit would start, relative to the call."""
    edges = [round(start_cycle + k * bit_cycles) for k in range(len(bits) + 1)]
    for bit, begin, end in zip(bits, edges, edges[1:]):
        ctx.set(line, bit)
        await ctx.tick().repeat(max(end - begin, 1))
    return start_cycle + len(bits) * bit_cycles - edges[-1]


def decode_line(samples, divisor):
    """Bytes in a per-cycle ``tx`` recording; every bit must last exactly ``divisor`` cycles
    and the stop bit must be high. Returns (bytes, start cycles)."""
    samples = list(samples)
    out, starts, t = [], [], 0
    while t < len(samples):
        if samples[t]:
            t += 1
            continue
        if t + 10 * divisor > len(samples):
            raise AssertionError(f"frame starting at cycle {t} is cut off")
        bits = []
        for k in range(10):
            window = samples[t + k * divisor:t + (k + 1) * divisor]
            assert len(set(window)) == 1, f"bit {k} of the frame at {t} is not {divisor} " \
                                          f"cycles of one level: {window}"
            bits.append(window[0])
        assert bits[0] == 0 and bits[9] == 1, f"bad start/stop bit in frame at {t}: {bits}"
        out.append(sum(bit << k for k, bit in enumerate(bits[1:9])))
        starts.append(t)
        t += 10 * divisor
    return out, starts


def stream_monitor(port, received, rng=None, ready_probability=1.0):
    """Testbench recording transfers on ``port`` (an output stream) under random ready."""
    async def monitor(ctx):
        ctx.set(port.ready, 1)
        async for _, _, valid, ready, payload in ctx.tick().sample(port.valid, port.ready,
                                                                    port.payload):
            if valid and ready:
                received.append(payload)
            if rng is not None:
                ctx.set(port.ready, int(rng.random() < ready_probability))
    return monitor


def pulse_counter(signal, counts, key):
    async def count(ctx):
        async for _, _, value in ctx.tick().sample(signal):
            counts[key] += value
    return count


def run(dut, *benches, background=()):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for bench in benches:
        sim.add_testbench(bench)
    for bench in background:
        sim.add_testbench(bench, background=True)
    sim.run()


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("cls", [UartRx, UartTx])
@pytest.mark.parametrize("divisor", [3, 0, -8])
def test_divisor_below_4_is_refused(cls, divisor):
    with pytest.raises(ValueError, match=rf"divisor must be in range 4\.\., not {divisor}"):
        cls(divisor)


@pytest.mark.parametrize("cls", [UartRx, UartTx])
@pytest.mark.parametrize("divisor", [4.0, "8", True, None])
def test_divisor_must_be_an_integer(cls, divisor):
    with pytest.raises(TypeError, match="divisor must be an integer"):
        cls(divisor)


def test_signatures():
    rx, tx = UartRx(4), UartTx(104)
    assert rx.divisor == 4 and tx.divisor == 104
    assert set(rx.signature.members) == {"rx", "o", "framing_error", "line_break", "overrun"}
    assert set(tx.signature.members) == {"i", "tx"}
    assert rx.o.payload.shape().width == 8 and tx.i.payload.shape().width == 8


# --------------------------------------------------------------------------- transmitter


@pytest.mark.parametrize("divisor", [4, 7])
def test_tx_bit_timing_and_back_to_back_frames(divisor):
    """Exact bit length, LSB first, idle high, and no gap between queued bytes."""
    rng = np.random.default_rng(divisor)
    data = [int(v) for v in rng.integers(0, 256, 12)] + [0x00, 0xFF, 0x55]
    dut = UartTx(divisor)
    samples = []

    async def push(ctx):
        for index, byte in enumerate(data):
            if index in (3, 4):                      # two pauses: idle line between frames
                await ctx.tick().repeat(3 * divisor)
            ctx.set(dut.i.payload, byte)
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)
        await ctx.tick().repeat(12 * divisor)

    async def record(ctx):
        async for _, _, tx in ctx.tick().sample(dut.tx):
            samples.append(tx)

    run(dut, push, background=[record])
    assert samples[0] == 1
    got, starts = decode_line(samples, divisor)
    assert got == data
    # Bytes queued while a frame is on the line follow it with no idle time.
    gaps = np.diff(starts)
    back_to_back = [k for k in range(1, len(data)) if k not in (3, 4)]
    assert all(gaps[k - 1] == 10 * divisor for k in back_to_back), gaps


# --------------------------------------------------------------------------- loopback


def loopback(divisor):
    m = Module()
    m.submodules.tx = tx = UartTx(divisor)
    m.submodules.rx = rx = UartRx(divisor)
    m.d.comb += rx.rx.eq(tx.tx)
    return m, tx, rx


@pytest.mark.parametrize("divisor", [4, 5, 13])
def test_loopback_random_bytes(divisor):
    """Random bytes with random gaps through tx -> rx, random ready on rx.o."""
    rng = np.random.default_rng(100 + divisor)
    data = [int(v) for v in rng.integers(0, 256, 60)] + [0, 255]
    m, tx, rx = loopback(divisor)
    received, counts = [], {"framing": 0, "overrun": 0}

    async def push(ctx):
        for byte in data:
            if rng.random() < 0.3:
                await ctx.tick().repeat(int(rng.integers(1, 4 * divisor)))
            ctx.set(tx.i.payload, byte)
            ctx.set(tx.i.valid, 1)
            await ctx.tick().until(tx.i.ready)
            ctx.set(tx.i.valid, 0)
        await ctx.tick().repeat(12 * divisor)

    run(m, push, background=[
        stream_monitor(rx.o, received, rng, ready_probability=0.3),
        pulse_counter(rx.framing_error, counts, "framing"),
        pulse_counter(rx.overrun, counts, "overrun"),
    ])
    assert received == data
    assert counts == {"framing": 0, "overrun": 0}


@pytest.mark.parametrize("skew", [-0.035, 0.035])
def test_rx_tolerates_sender_clock_skew(skew):
    """A sender 3.5 % slow or fast, back to back: every byte still arrives."""
    divisor = 16
    rng = np.random.default_rng(7)
    data = [int(v) for v in rng.integers(0, 256, 20)]
    dut = UartRx(divisor)
    received, counts = [], {"framing": 0, "overrun": 0}

    async def send(ctx):
        await ctx.tick().repeat(5)
        phase = 0.0
        for byte in data:
            phase = await drive_line(ctx, dut.rx, line_bits(byte), divisor * (1 + skew), phase)
        await ctx.tick().repeat(3 * divisor)

    run(dut, send, background=[stream_monitor(dut.o, received),
                               pulse_counter(dut.framing_error, counts, "framing"),
                               pulse_counter(dut.overrun, counts, "overrun")])
    assert received == data
    assert counts == {"framing": 0, "overrun": 0}


# --------------------------------------------------------------------------- errors


def test_framing_error_drops_the_byte_and_pulses_once():
    divisor = 6
    dut = UartRx(divisor)
    received, counts = [], {"framing": 0, "break": 0, "overrun": 0}

    async def send(ctx):
        await ctx.tick().repeat(4)
        await drive_line(ctx, dut.rx, line_bits(0x3C, stop=0), divisor)   # bad stop bit
        await drive_line(ctx, dut.rx, [1] * 2, divisor)
        await drive_line(ctx, dut.rx, line_bits(0xA5), divisor)           # good frame
        await drive_line(ctx, dut.rx, [0] * 30, divisor)                  # a break: 30 bits low
        await drive_line(ctx, dut.rx, [1] * 3, divisor)
        await drive_line(ctx, dut.rx, line_bits(0x5A), divisor)           # recovers
        await ctx.tick().repeat(3 * divisor)

    run(dut, send, background=[stream_monitor(dut.o, received),
                               pulse_counter(dut.framing_error, counts, "framing"),
                               pulse_counter(dut.line_break, counts, "break"),
                               pulse_counter(dut.overrun, counts, "overrun")])
    assert received == [0xA5, 0x5A]
    # One framing error for the bad stop bit, one for the break, which is also a line break.
    assert counts == {"framing": 2, "break": 1, "overrun": 0}


def test_start_glitch_is_ignored():
    divisor = 8
    dut = UartRx(divisor)
    received, counts = [], {"framing": 0, "overrun": 0}

    async def send(ctx):
        await ctx.tick().repeat(4)
        ctx.set(dut.rx, 0)
        await ctx.tick().repeat(2)                        # shorter than half a bit
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(3 * divisor)
        await drive_line(ctx, dut.rx, line_bits(0x81), divisor)
        await ctx.tick().repeat(2 * divisor)

    run(dut, send, background=[stream_monitor(dut.o, received),
                               pulse_counter(dut.framing_error, counts, "framing")])
    assert received == [0x81]
    assert counts["framing"] == 0


def test_overrun_keeps_the_waiting_byte_and_drops_the_new_one():
    divisor = 5
    dut = UartRx(divisor)
    received, counts = [], {"framing": 0, "overrun": 0}

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(3)
        for byte in (0x11, 0x22, 0x33):                   # nobody reads: 0x22, 0x33 dropped
            await drive_line(ctx, dut.rx, line_bits(byte), divisor)
        await ctx.tick().repeat(2 * divisor)
        assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload) == 0x11
        ctx.set(dut.o.ready, 1)
        await ctx.tick()
        received.append(0x11)
        ctx.set(dut.o.ready, 0)
        await ctx.tick()
        assert not ctx.get(dut.o.valid)
        await drive_line(ctx, dut.rx, line_bits(0x44), divisor)   # accepted again
        await ctx.tick().repeat(2 * divisor)
        assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload) == 0x44

    run(dut, bench, background=[pulse_counter(dut.overrun, counts, "overrun"),
                                pulse_counter(dut.framing_error, counts, "framing")])
    assert counts == {"framing": 0, "overrun": 2}
