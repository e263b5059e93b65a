"""cocotb test bench for ``accllm_dsp_mul`` (and its baseline ``accllm_plain_mul``).

Every output is compared with the unit's golden adapter :data:`golden.accllm.beats.accllm_mul` (the
exact products ``x * w``, or their run sums with ``acc_depth`` > 1) and, for the DSP48E2 layout
(targets ``generic`` and ``xilinx``), the adapter's products are cross-checked against the
golden packed arithmetic of :mod:`golden.accllm` (``pack_w8``/``extract_w8``,
``packed_p_w2``/``extract_w2``), which models the 48-bit P word and its borrow-corrected fields
independently of the RTL.

Tests
-----
exhaustive
    Mode ``w4``: every (x, w1, w2); mode ``w2``: every (x1, x2, w1, w2), 2^(2 x_bits + 4)
    beats (1,048,576 for 8-bit X); mode ``w8``: ``QLLM_VECTORS`` (default 1,000,000) random
    (x, w1, w2) plus every combination of the corner values (x, w in {min, min+1, -1, 0, 1,
    max}, unsigned x in {0, 1, mid, mid+1, max}); ``QLLM_VECTORS=all``: all 2^24 (x, w1, w2).
    Back to back in bursts of 2^20 beats, no gaps: the unit must take one beat per cycle (a
    refused beat fails). With ``acc_depth`` > 1 every beat carries ``last``.
random_backpressure
    ``QLLM_BEATS`` (default 20,000) random beats, a third of them drawn from the corner values,
    with random gaps on ``i.valid`` (0.7) and ``o.ready`` (0.6): the stall through the clock
    enables loses and repeats nothing. With ``acc_depth`` > 1, ``last`` is random too.
accumulation
    (``acc_depth`` > 1.) Runs of 1..acc_depth + 3 beats (longer runs are cut into partial sums
    at the depth), a tenth of them repeating the extreme product so that the narrowest field
    reaches its limit exactly, under random backpressure; every sum and ``last`` flag checked.
"""

import os

import cocotb
import numpy as np

from qllm_cores.golden.accllm import extract_w2, extract_w8, pack_w8, packed_p_w2
from qllm_cores.verif.bench import Bench, compare_fields, record_metrics

W_BITS = {"w8": 8, "w4": 4, "w2": 2}


class Config:
    """The unit's parameters, as the manifest gives them (the baseline has no target)."""

    def __init__(self, manifest):
        params = manifest["params"]
        self.mode = params["mode"]
        self.x_signed = params["x_signed"]
        self.x_bits = params["x_bits"]
        self.w_bits = W_BITS[self.mode]
        self.target = params.get("target", "generic")
        self.acc_depth = params.get("acc_depth", 1)
        self.products = [field["name"] for field in manifest["ports"]["o"]["payload"]["fields"]
                         if field["name"] != "last"]
        self.inputs = ["x1", "x2", "w1", "w2"] if self.mode == "w2" else ["x", "w1", "w2"]

    def x_range(self):
        if self.x_signed:
            return -(1 << (self.x_bits - 1)), (1 << (self.x_bits - 1)) - 1
        return 0, (1 << self.x_bits) - 1

    def w_range(self):
        return -(1 << (self.w_bits - 1)), (1 << (self.w_bits - 1)) - 1

    def values(self, name):
        lo, hi = self.x_range() if name.startswith("x") else self.w_range()
        return np.arange(lo, hi + 1)

    def corners(self, name):
        lo, hi = self.x_range() if name.startswith("x") else self.w_range()
        if name.startswith("x") and not self.x_signed:
            return np.unique([0, 1, hi // 2, hi // 2 + 1, hi])
        return np.unique([lo, lo + 1, -1, 0, 1, hi])

    def random(self, rng, n):
        beats = {}
        for name in self.inputs:
            lo, hi = self.x_range() if name.startswith("x") else self.w_range()
            draw = rng.integers(lo, hi + 1, n)
            corner = self.corners(name)
            beats[name] = np.where(rng.random(n) < 1 / 3, rng.choice(corner, n), draw)
        return beats


def expected_outputs(bench, beats):
    """The golden adapter's output beats for ``beats`` (products, or run sums and ``last``)."""
    expected = bench.expected({"i": beats})["o"]
    config = Config(bench.manifest)
    names = config.products + (["last"] if config.acc_depth > 1 else [])
    assert sorted(expected) == sorted(names), (
        f"golden fields {sorted(expected)}, the unit's {sorted(names)}")
    return expected


def golden_products(config, beats):
    """The packed DSP48E2 arithmetic of golden.accllm (layout of targets generic/xilinx)."""
    if config.mode == "w2":
        p = packed_p_w2(beats["x1"], beats["x2"], beats["w1"], beats["w2"], config.x_bits,
                        config.x_signed)
        fields = extract_w2(p, config.x_bits, config.x_signed)._asdict()
    else:
        a, d, b = pack_w8(beats["x"], beats["w1"], beats["w2"], config.w_bits, config.x_bits,
                          config.x_signed)
        fields = extract_w8((a + d) * b, config.w_bits, config.x_bits,
                            config.x_signed)._asdict()
    return {name: fields[name] for name in config.products}


def check_products(bench, config, beats):
    expected = expected_outputs(bench, beats)
    bench.check("o", expected)
    if config.target in ("generic", "xilinx"):
        golden = golden_products(config, beats)
        for name in config.products:   # the golden packed model agrees with plain products
            np.testing.assert_array_equal(golden[name], expected[name])


def exhaustive_beats(config, rng):
    if config.mode in ("w4", "w2") or os.environ.get("QLLM_VECTORS") == "all":
        grids = np.meshgrid(*(config.values(name) for name in config.inputs), indexing="ij")
        return {name: grid.ravel() for name, grid in zip(config.inputs, grids)}
    vectors = int(os.environ.get("QLLM_VECTORS", 1_000_000))
    grids = np.meshgrid(*(config.corners(name) for name in config.inputs), indexing="ij")
    corners = {name: grid.ravel() for name, grid in zip(config.inputs, grids)}
    randoms = {name: rng.integers(config.values(name)[0], config.values(name)[-1] + 1, vectors)
               for name in config.inputs}
    return {name: np.concatenate([corners[name], randoms[name]]) for name in config.inputs}


#: Beats per full-rate burst of ``exhaustive`` (bounds the memory of the packed words).
CHUNK = 1 << 20


@cocotb.test()
async def exhaustive(dut):
    bench = Bench(dut)
    config = Config(bench.manifest)
    beats = exhaustive_beats(config, bench.rng)
    n = len(beats[config.inputs[0]])
    await bench.start(streams=False)
    cycles = 0
    for start in range(0, n, CHUNK):
        chunk = {name: values[start:start + CHUNK] for name, values in beats.items()}
        size = len(chunk[config.inputs[0]])
        if config.acc_depth > 1:
            chunk["last"] = np.ones(size, np.int64)  # every beat its own run: plain products
        got = await bench.full_rate("i", chunk, "o", size, max_cycles=size + 100)
        cycles += bench.full_rate_cycles
        expected = expected_outputs(bench, chunk)
        compare_fields("o", got, expected)
        if config.target in ("generic", "xilinx"):
            golden = golden_products(config, chunk)
            for name in config.products:   # the golden packed model agrees with plain products
                np.testing.assert_array_equal(golden[name], expected[name])
    # full_rate fails on any refused beat: each burst of k beats takes k + latency cycles.
    record_metrics("exhaustive", beats=n, cycles=cycles, bursts=-(-n // CHUNK))


def run_lasts(rng, config, runs):
    lengths = rng.integers(1, config.acc_depth + 4, runs)
    lengths = np.where(rng.random(runs) < 0.3, config.acc_depth, lengths)
    last = np.zeros(int(lengths.sum()), np.int64)
    last[np.cumsum(lengths) - 1] = 1
    return last, lengths


@cocotb.test()
async def random_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    config = Config(bench.manifest)
    n = int(os.environ.get("QLLM_BEATS", 20_000))
    beats = config.random(bench.rng, n)
    if config.acc_depth > 1:
        beats["last"] = (bench.rng.random(n) < 1 / config.acc_depth).astype(np.int64)
        beats["last"][-1] = 1          # the final run closes: every beat reaches an output
    await bench.start()
    bench.send("i", beats)
    if config.acc_depth > 1:
        expected = expected_outputs(bench, beats)
        await bench.wait_for("o", len(expected["last"]), max_cycles=20 * n + 100)
        bench.check("o", expected)
    else:
        await bench.wait_for("o", n, max_cycles=20 * n + 100)
        check_products(bench, config, beats)
    assert bench.drivers["i"].idle, "beats left unconsumed"
    record_metrics("random_backpressure", beats=n)


@cocotb.test()
async def accumulation(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.7, seed_offset=2)
    config = Config(bench.manifest)
    if config.acc_depth == 1:
        dut._log.info("acc_depth = 1: nothing accumulates")
        return
    runs = int(os.environ.get("QLLM_RUNS", 3_000))
    last, lengths = run_lasts(bench.rng, config, runs)
    n = len(last)
    beats = config.random(bench.rng, n)
    # A tenth of the runs repeat one extreme product: the field sums reach N*lo or N*hi.
    run_of_beat = np.repeat(np.arange(runs), lengths)
    extreme = (bench.rng.random(runs) < 0.1)[run_of_beat]
    x_lo, x_hi = config.x_range()
    w_lo, w_hi = config.w_range()
    pick = bench.rng.integers(0, 4, runs)[run_of_beat]
    x_pick = np.where(pick % 2 == 0, x_lo, x_hi)
    w_pick = np.where(pick // 2 == 0, w_lo, w_hi)
    for name in config.inputs:
        value = x_pick if name.startswith("x") else w_pick
        beats[name] = np.where(extreme, value, beats[name])
    beats["last"] = last
    expected = expected_outputs(bench, beats)
    await bench.start()
    bench.send("i", beats)
    await bench.wait_for("o", len(expected["last"]), max_cycles=20 * n + 100)
    bench.check("o", expected)
    record_metrics("accumulation", beats=n, results=len(expected["last"]))
