# amaranth: UnusedElaboratable=no
"""hdl.common.stream_stage: StallPipeline and SkidBuffer under random valid/ready, in Amaranth's simulator.

The reference is the stream rules themselves: every beat sent arrives once, in order, with the
value the stage function gives it; a producer holds payload and valid until ready; at ready held
high the pipeline takes a beat per cycle and each arrives ``latency`` cycles later. pack_fields
against the layout's own view of the packed bits.
"""

import numpy as np
import pytest
from amaranth.hdl import Cat, Const, Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from qllm_cores.hdl.common.stream_stage import SkidBuffer, StallPipeline, check_pipeline, pack_fields


class _AddChain(wiring.Component):
    """y = x + latency, one increment per stage; beats with ``x`` odd are absorbed when
    ``absorb_odd`` (the ``emit`` path)."""

    def __init__(self, latency, *, skid=False, absorb_odd=False):
        self.latency_stages = latency
        self.skid = skid
        self.absorb_odd = absorb_odd
        self.latency = latency + skid
        super().__init__({
            "i": In(stream.Signature(unsigned(16))),
            "o": Out(stream.Signature(unsigned(16))),
        })

    def elaborate(self, platform):
        m = Module()
        inner = stream.Signature(unsigned(16)).create() if self.skid else self.o
        emit = ~self.i.payload[0] if self.absorb_odd else None
        pipe = StallPipeline(m, self.i, inner, latency=self.latency_stages, emit=emit)
        value = self.i.payload
        for _ in range(self.latency_stages):
            value = pipe.stage((value + 1)[:16])
        m.d.comb += inner.payload.eq(value)
        if self.skid:
            m.submodules.skid = skid = SkidBuffer(unsigned(16))
            wiring.connect(m, inner, skid.i)
            wiring.connect(m, skid.o, wiring.flipped(self.o))
        return m


def _run(dut, beats, valid_p, ready_p, seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 1 << 15, beats).tolist()
    got, sent_at, got_at = [], [], []
    cycles = 4 * beats + 100

    async def bench(ctx):
        sent = 0
        held = None
        for cycle in range(cycles):
            offer = sent < beats and (held is not None or rng.random() < valid_p)
            ready = int(rng.random() < ready_p)
            if held is not None:
                assert offer
            ctx.set(dut.i.valid, int(offer))
            if offer:
                ctx.set(dut.i.payload, data[sent])
            ctx.set(dut.o.ready, ready)
            await ctx.delay(1e-9)  # settle combinational paths
            o_valid, o_payload = ctx.get(dut.o.valid), ctx.get(dut.o.payload)
            i_ready = ctx.get(dut.i.ready)
            await ctx.tick()
            if offer and i_ready:
                sent_at.append(cycle)
                sent += 1
                held = None
            elif offer:
                held = data[sent]
            if o_valid and ready:
                got.append(o_payload)
                got_at.append(cycle)
            elif o_valid:
                # Rule: once valid, neither valid nor payload change until the transfer.
                assert ctx.get(dut.o.valid) == 1
                assert ctx.get(dut.o.payload) == o_payload

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return data, got, sent_at, got_at


@pytest.mark.parametrize("latency", [1, 2, 5])
@pytest.mark.parametrize("skid", [False, True])
def test_stall_pipeline_keeps_every_beat_under_backpressure(latency, skid):
    dut = _AddChain(latency, skid=skid)
    data, got, _, _ = _run(dut, 300, 0.7, 0.6, seed=latency + 10 * skid)
    assert got == [(x + latency) & 0xFFFF for x in data]


@pytest.mark.parametrize("latency", [1, 3])
@pytest.mark.parametrize("skid", [False, True])
def test_full_rate_and_latency_at_ready_high(latency, skid):
    dut = _AddChain(latency, skid=skid)
    data, got, sent_at, got_at = _run(dut, 200, 1.0, 1.0, seed=3)
    assert got == [(x + latency) & 0xFFFF for x in data]
    assert sent_at == list(range(200))
    assert got_at == [t + dut.latency for t in sent_at]


def test_emit_absorbs_beats_without_losing_the_others():
    dut = _AddChain(3, absorb_odd=True)
    data, got, _, _ = _run(dut, 400, 0.8, 0.5, seed=5)
    assert got == [(x + 3) & 0xFFFF for x in data if x % 2 == 0]
    assert 0 < len(got) < len(data)


def test_skid_buffer_ready_is_registered():
    # No combinational path from o.ready to i.ready: i.ready must not change within a cycle
    # when only o.ready changes.
    dut = SkidBuffer(unsigned(8))

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 0)
        for value in range(3):
            ctx.set(dut.i.payload, value)
            await ctx.tick()
        before = ctx.get(dut.i.ready)
        ctx.set(dut.o.ready, 1)
        await ctx.delay(1e-9)
        assert ctx.get(dut.i.ready) == before == 0

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_pipeline_parameter_check_names_the_parameter():
    assert check_pipeline(2, max_value=3) == 2
    with pytest.raises(ValueError, match=r"pipeline must be in range 0\.\.3, not 4"):
        check_pipeline(4, max_value=3)
    with pytest.raises(TypeError, match=r"pipeline must be an integer, not '1'"):
        check_pipeline("1", max_value=3)
    with pytest.raises(ValueError, match="latency must be at least 1"):
        StallPipeline(Module(), None, None, latency=0)
    with pytest.raises(ValueError, match="registered_ce are for a pipeline without hold"):
        sig = stream.Signature(unsigned(1))
        StallPipeline(Module(), sig.flip().create(), sig.create(), latency=1, hold=Const(0),
                      registered_ce=True)


_LAYOUT = data.StructLayout({"a": unsigned(3), "lanes": data.ArrayLayout(signed(4), 2),
                             "flag": unsigned(1)})


@pytest.mark.parametrize("lanes_whole", [False, True])
def test_pack_fields_places_each_field_by_name(lanes_whole):
    # Fields given in another order than the layout's; the array field as its elements or as
    # one value.
    m = Module()
    a, flag = Signal(3), Signal()
    lanes = [Signal(signed(4)), Signal(signed(4))]
    view = Signal(_LAYOUT)
    m.d.comb += view.eq(pack_fields(_LAYOUT, {
        "flag": flag, "lanes": Cat(*lanes) if lanes_whole else lanes, "a": a}))
    cases = [(5, -3, 7, 1), (0, -8, -1, 0), (7, 0, 2, 1), (1, 6, -5, 0)]

    async def bench(ctx):
        for case in cases:
            for signal, value in zip((a, *lanes, flag), case):
                ctx.set(signal, value)
            await ctx.delay(1e-9)
            assert (ctx.get(view.a), ctx.get(view.lanes[0]), ctx.get(view.lanes[1]),
                    ctx.get(view.flag)) == case

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


def test_pack_fields_refuses_fields_that_do_not_match_the_layout():
    a, flag = Signal(3), Signal()
    lanes = [Signal(signed(4)), Signal(signed(4))]
    fields = {"a": a, "lanes": lanes, "flag": flag}
    assert len(pack_fields(_LAYOUT, fields)) == _LAYOUT.size
    with pytest.raises(ValueError, match=r"Unknown field 'flags'; the layout's fields are "
                                         r"'a', 'lanes', 'flag'"):
        pack_fields(_LAYOUT, {**fields, "flags": flag})
    with pytest.raises(ValueError, match=r"Field 'flag' is missing"):
        pack_fields(_LAYOUT, {"a": a, "lanes": lanes})
    with pytest.raises(ValueError, match=r"Field 'a' must be 3 bits wide, not 4"):
        pack_fields(_LAYOUT, {**fields, "a": Signal(4)})
    with pytest.raises(ValueError, match=r"Field 'lanes' must be 8 bits wide, not 7"):
        pack_fields(_LAYOUT, {**fields, "lanes": Signal(7)})
    with pytest.raises(ValueError, match=r"Element 1 of field 'lanes' must be 4 bits wide, "
                                         r"not 3"):
        pack_fields(_LAYOUT, {**fields, "lanes": [lanes[0], Signal(3)]})
    with pytest.raises(ValueError, match=r"Field 'lanes' must be given 2 elements, not 1"):
        pack_fields(_LAYOUT, {**fields, "lanes": lanes[:1]})
    with pytest.raises(TypeError, match=r"Field 'a' is not an ArrayLayout"):
        pack_fields(_LAYOUT, {**fields, "a": [a]})
    with pytest.raises(TypeError, match=r"Fields must be a mapping"):
        pack_fields(_LAYOUT, [a, lanes, flag])
    with pytest.raises(ValueError, match=r"must tile its bits"):
        pack_fields(data.UnionLayout({"a": 3, "b": 3}), {"a": a, "b": Signal(3)})
