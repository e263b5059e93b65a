"""Amaranth-simulator driver for circuits with Orizuru's stream interface (``orizuru``,
``orizuru_scan``, ``orizuru_sortnet``): the pytest harness beside the cocotb bench
(:mod:`verif.kllm.tb_orizuru`), both compared with :func:`golden.kllm.orizuru.orizuru_beats`."""

from amaranth.sim import Simulator

__all__ = ["simulate"]


def simulate(dut, xs, rng, valid_probability, ready_probability):
    """Drive ``xs`` into ``dut`` with random gaps on ``i.valid`` and ``o.ready``, check that a
    waiting output beat holds, and return the beats and the transfer cycles."""
    fields = ("max_index", "max_value", "min_index", "min_value", "last", "mask")
    beats = {field: [] for field in fields}
    cycles = {"i": [], "o": []}
    expected_beats = len(xs) * dut.k

    async def bench(ctx):
        sent = cycle = 0
        held = None
        while len(beats["last"]) < expected_beats:
            assert cycle < 200 * (len(xs) + 2) * (dut.k + dut.latency), "no progress"
            offer = sent < len(xs) and rng.random() < valid_probability
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload.x, [int(v) for v in xs[sent]])
            ready = rng.random() < ready_probability
            ctx.set(dut.o.ready, ready)
            await ctx.delay(1e-9)
            if held is not None:
                assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload.as_value()) == held, (
                    f"cycle {cycle}: a beat waiting for o.ready changed or left")
            held = None
            if ctx.get(dut.o.valid):
                if ready:
                    payload = ctx.get(dut.o.payload)
                    for field in fields:
                        beats[field].append(int(getattr(payload, field)))
                    cycles["o"].append(cycle)
                else:
                    held = ctx.get(dut.o.payload.as_value())
            if offer and ctx.get(dut.i.ready):
                cycles["i"].append(cycle)
                sent += 1
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return beats, cycles
