"""Shared arithmetic pieces (hdl/common/arith.py) against Python, exhaustively at small widths, in
Amaranth's simulator."""

from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from qllm_cores.hdl.common.arith import (at_least, lowest_one_hot, one_hot_index, one_hot_wires,
                                         or_tree)


def _settle(values, outputs, cases):
    """Drive ``values`` with each case of ``cases`` and return the outputs' values."""
    m = Module()
    probes = [Signal.like(out, name=f"probe_{k}") for k, out in enumerate(outputs)]
    m.d.comb += [probe.eq(out) for probe, out in zip(probes, outputs)]
    seen = []

    async def bench(ctx):
        for case in cases:
            for signal, value in zip(values, case):
                ctx.set(signal, value)
            seen.append([ctx.get(probe) for probe in probes])

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_at_least_is_greater_or_equal_for_every_value_and_bound():
    value = Signal(4)
    bounds = range(-2, 19)
    seen = _settle([value], [at_least(value, bound) for bound in bounds],
                   [(v,) for v in range(16)])
    for v, row in enumerate(seen):
        assert row == [int(v >= bound) for bound in bounds], v


def test_or_tree_is_the_bitwise_or_of_any_count():
    inputs = [Signal(3, name=f"x{k}") for k in range(5)]
    cases = [(1, 2, 0, 4, 0), (0, 0, 0, 0, 0), (7, 0, 0, 0, 1), (0, 0, 0, 0, 6)]
    seen = _settle(inputs, [or_tree(inputs[:count]) for count in range(6)], cases)
    for case, row in zip(cases, seen):
        expected = [0]
        for x in case:
            expected.append(expected[-1] | x)
        assert row == expected, case


def test_one_hot_wires_decodes_every_value():
    # Widths with one chunk, several whole chunks and a short top chunk (10 = 4 + 4 + 2 bits).
    m = Module()
    cases = [(1, 4), (3, 4), (5, 2), (8, 4), (10, 4)]
    values = [Signal(width, name=f"v{width}_{chunk}") for width, chunk in cases]
    decoded = [one_hot_wires(m, value, name=f"d{width}_{chunk}", chunk_bits=chunk)
               for value, (width, chunk) in zip(values, cases)]
    zero_width = one_hot_wires(m, Signal(0), name="d0")
    seen = {}

    async def bench(ctx):
        seen["zero"] = ctx.get(zero_width)
        for value, out, (width, _) in zip(values, decoded, cases):
            seen[width] = []
            for v in range(1 << width):
                ctx.set(value, v)
                seen[width].append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert seen["zero"] == 1            # a zero-width index has one value
    for width, _ in cases:
        assert seen[width] == [1 << v for v in range(1 << width)], width


def test_lowest_one_hot_and_its_index_for_every_value():
    value = Signal(5)
    lowest = lowest_one_hot(value)
    seen = _settle([value], [lowest, one_hot_index(lowest, 3)], [(v,) for v in range(32)])
    for v, (one_hot, index) in enumerate(seen):
        expected = v & -v                              # the lowest set bit (0 when none)
        assert one_hot == expected, v
        assert index == (expected.bit_length() - 1 if v else 0), v
