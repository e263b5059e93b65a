"""cocotb test bench for ``kllm_idx_counter`` against its golden adapter
:data:`golden.kllm.beats.kllm_idx_counter` (:func:`golden.kllm.idx_counter.index_distribution` per
reduction).

A reduction is a list of K (index, weight, mask) entries. It is sent as ``ceil(K / n_inputs)``
beats; lanes past K are padding with random indices and mask 0, and ``last`` marks the final beat.
The expected output is the golden histogram of the reduction (unmasked entries only),
``2**idx_bits`` beats in bin order with ``last`` on the final bin; counts wrap modulo
``2**count_bits`` (two's complement in ik mode), the unit's documented behaviour past ``max_len``;
the manifest's counter width must be :func:`golden.kllm.idx_counter.counter_width`'s.

Tests
-----
directed_reductions
    K not a multiple of n_inputs, every lane masked, every index equal, extreme weights, a
    single entry, K = max_len with one index (the largest count that must not overflow), and
    one reduction past the counter's range (wraps). With ``counts="spill"`` (defined up to
    ``max_len`` only) instead of the last: max_len entries over all bins, and two bins at the
    ends of the index range counted in lockstep for T = 2**k - 1, 2**k, 2**k + 1 beats, then 1
    to 3 masked beats (both carry at once; one event still waits when the reduction ends).
random_reductions_backpressure
    ``QLLM_REDUCTIONS`` random reductions (random masks, back to back; three in four short, up
    to 6 beats, one in four long, ``2**idx_bits`` to twice as many beats) under random gaps on
    ``i.valid`` and ``o.ready``; every bin of every histogram is compared.
sustained_throughput
    No backpressure, reductions of K = max_len: checks that the input never stalls when a
    reduction has at least ``2**idx_bits`` beats (readout fully overlapped; with ``banks=1``
    instead that the input waits for every readout), that shorter
    reductions keep the readout busy (histograms back to back), and that the first bin leaves
    the manifest's ``latency`` cycles after the ``last`` beat; records indices per cycle and
    cycles per column.
"""

import os

import cocotb
import numpy as np

from qllm_cores.golden.kllm import counter_width
from qllm_cores.verif.bench import Bench, record_metrics


class Reductions:
    """Builds the beats of a sequence of reductions (the golden adapter gives their
    histograms)."""

    def __init__(self, params, count_bits, rng):
        self.n = params["n_inputs"]
        self.idx_bits = params["idx_bits"]
        self.ik = params["mode"] == "ik"
        self.weight_bits = params.get("weight_bits") or 4
        self.count_bits = count_bits
        self.rng = rng
        self.beats = {"idx": [], "mask": [], "last": []}
        if self.ik:
            self.beats["weight"] = []
        self.entries = 0
        self.lanes = 0

    def random_weights(self, size):
        half = 1 << (self.weight_bits - 1)
        return self.rng.integers(-half, half, size)

    def add(self, idx, mask, weights=None):
        """Queue one reduction of ``len(idx)`` entries (``len(idx) >= 1``)."""
        idx = np.asarray(idx, dtype=np.int64)
        mask = np.asarray(mask, dtype=bool)
        k = len(idx)
        beats = -(-k // self.n)
        pad = beats * self.n - k
        lane_idx = np.concatenate([idx, self.rng.integers(0, 1 << self.idx_bits, pad)])
        lane_mask = np.concatenate([mask, np.zeros(pad, dtype=bool)])
        self.beats["idx"].append(lane_idx.reshape(beats, self.n))
        bit_values = 1 << np.arange(self.n, dtype=object)
        self.beats["mask"].append(lane_mask.reshape(beats, self.n).astype(object) @ bit_values)
        last = np.zeros(beats, dtype=np.int64)
        last[-1] = 1
        self.beats["last"].append(last)
        if self.ik:
            weights = np.asarray(weights, dtype=np.int64)
            padded = np.concatenate([weights, self.random_weights(pad)])
            self.beats["weight"].append(padded.reshape(beats, self.n))
        self.entries += int(mask.sum())
        self.lanes += k

    def add_random(self, k):
        idx = self.rng.integers(0, 1 << self.idx_bits, k)
        mask = self.rng.random(k) < self.rng.choice([1.0, 0.9, 0.5])
        self.add(idx, mask, self.random_weights(k) if self.ik else None)

    def input_fields(self):
        return {name: np.concatenate(parts) for name, parts in self.beats.items()}


def count_bits(bench):
    """The manifest's counter width, checked against the golden model's."""
    width = bench.manifest["ports"]["o"]["payload"]["fields"][0]["shape"]["width"]
    p = bench.params
    golden = counter_width(p["max_len"], p["mode"], p.get("weight_bits") or 4)
    assert width == golden, f"count is {width} bits wide, the golden counter width is {golden}"
    return width


async def run(bench, reductions, *, max_cycles):
    """Send the reductions, check every output beat; return the golden expected fields."""
    await bench.start()
    inputs = reductions.input_fields()
    bench.send("i", inputs)
    expected = bench.expected({"i": inputs})["o"]
    await bench.wait_for("o", len(expected["count"]), max_cycles=max_cycles)
    bench.check("o", expected)
    return expected


@cocotb.test()
async def directed_reductions(dut):
    bench = Bench(dut)
    p = bench.params
    r = Reductions(p, count_bits(bench), bench.rng)
    n, top = p["n_inputs"], (1 << p["idx_bits"]) - 1
    half = 1 << ((p.get("weight_bits") or 4) - 1)
    ones = lambda k: np.ones(k, dtype=bool)  # noqa: E731
    weights = lambda k: r.random_weights(k) if r.ik else None  # noqa: E731

    r.add(r.rng.integers(0, top + 1, 3 * n + 5), ones(3 * n + 5), weights(3 * n + 5))  # K % n != 0
    r.add(r.rng.integers(0, top + 1, 2 * n), np.zeros(2 * n, bool), weights(2 * n))  # all masked
    r.add(np.full(2 * n + 1, top), ones(2 * n + 1), weights(2 * n + 1))  # one index everywhere
    r.add([0], [True], [half - 1] if r.ik else None)  # a single entry
    # Lanes of one group with equal low index bits and different top bits (above 8 index bits
    # the bins are built in parts of 256 selected by the top bits): distinct indices.
    quarter = (top + 1) // 4 or 1
    spread = (7 + (np.arange(4 * n) % 4) * quarter) % (top + 1)
    r.add(spread, ones(4 * n), weights(4 * n))
    if r.ik:
        r.add(np.full(n, 1), ones(n), np.full(n, half - 1))  # largest positive weights
        r.add(np.full(n, 2), ones(n), np.full(n, -half))  # most negative weights
        r.add(np.full(p["max_len"], 3 % (top + 1)), ones(p["max_len"]), np.full(p["max_len"], -half))
    else:
        r.add(np.full(p["max_len"], top), ones(p["max_len"]))  # K = max_len, no overflow
    # Past the counter's range: 2**count_bits identical entries (+ weight 1) wrap to 0 (+n).
    # (Not with counts="spill": its counts are defined up to max_len only.)
    past = 0 if p.get("counts") == "spill" else (1 << r.count_bits) + n
    if past:
        r.add(np.full(past, 1 % (top + 1)), ones(past),
              np.ones(past, dtype=np.int64) if r.ik else None)
    else:
        # The most events the spill's list holds (max_len counts) spread over distinct bins.
        spread = np.repeat(np.arange(top + 1), -(-p["max_len"] // (top + 1)))[:p["max_len"]]
        r.add(spread, ones(p["max_len"]))
        # Bins 0 and `top` (the first and last group of slots) counted in lockstep, one each
        # a beat, T beats, then 1..3 fully masked beats: at T = 2**narrow_bits both carry in
        # one beat and one event is still waiting in its slot when the reduction ends. The
        # reduction starts with `bins` masked beats, so that the last readout is over and the
        # `last` beat does not wait (the events would drain meanwhile).
        if n >= 2 and top >= 1:
            lead = top + 1
            for t in sorted({v for k in range(1, p["max_len"].bit_length())
                             for v in ((1 << k) - 1, 1 << k, (1 << k) + 1)
                             if 2 * v <= p["max_len"]}):
                for tail in (1, 2, 3):
                    lanes = np.zeros((lead + t + tail, n), dtype=np.int64)
                    lanes[lead:lead + t, 1] = top
                    used = np.zeros((lead + t + tail, n), dtype=bool)
                    used[lead:lead + t, :2] = True
                    r.add(lanes.ravel(), used.ravel())
    expected = await run(bench, r, max_cycles=20 * (past + p["max_len"]) + 1000 * (top + 1))
    # The third reduction put all its entries in the top bin.
    assert expected["count"][2 * (top + 1) + top] != 0 or r.ik


@cocotb.test()
async def random_reductions_backpressure(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.7, seed_offset=1)
    p = bench.params
    r = Reductions(p, count_bits(bench), bench.rng)
    count = int(os.environ.get("QLLM_REDUCTIONS", 200))
    n, bins = p["n_inputs"], 1 << p["idx_bits"]
    max_k = min(p["max_len"], 6 * n)
    # One reduction in four is long (bins to 2 x bins beats, wrapping past max_len where that is
    # small): the readout then drains before the next `last` arrives, so a `last` also finds
    # the bank idle while the output is held, besides waiting for a busy bank (short ones).
    long_ones = bench.rng.random(count) < 0.25
    lengths = np.where(long_ones, bench.rng.integers(bins * n, 2 * bins * n + 1, count),
                       bench.rng.integers(1, max_k + 1, count))
    if p.get("counts") == "spill":
        # Defined up to max_len counted indices; long ones then skew to few bins, so that
        # the narrow counts carry often (the spill's events).
        lengths = np.minimum(lengths, p["max_len"])
        long_ones &= bench.rng.random(count) < 0.5
        for k, skewed in zip(lengths, long_ones):
            if skewed:
                few = bench.rng.choice(bins, min(bins, 3), replace=False)
                r.add(bench.rng.choice(few, int(k)), bench.rng.random(int(k)) < 0.9)
            else:
                r.add_random(int(k))
        lengths = lengths[:0]
    for k in lengths:
        r.add_random(int(k))
    await run(bench, r, max_cycles=40 * (count * (bins + 6) + r.lanes // n))
    record_metrics("random_reductions_backpressure", reductions=count, entries=r.entries,
                   output_beats=count * bins, beats=count * bins,
                   seconds=bench.wall_seconds,
                   beats_per_second=count * bins / bench.wall_seconds)


@cocotb.test()
async def sustained_throughput(dut):
    bench = Bench(dut, seed_offset=2)
    p = bench.params
    r = Reductions(p, count_bits(bench), bench.rng)
    n, bins = p["n_inputs"], 1 << p["idx_bits"]
    columns = int(os.environ.get("QLLM_COLUMNS", 4))
    # Whole beats; the paper's K = 4096 by default, or QLLM_K.
    k = int(os.environ.get("QLLM_K", p["max_len"]))
    k = min(k, p["max_len"]) // n * n or n
    for _ in range(columns):
        r.add(r.rng.integers(0, bins, k), np.ones(k, dtype=bool),
              r.random_weights(k) if r.ik else None)
    await run(bench, r, max_cycles=4 * columns * (k // n + bins) + 100)
    cycles = bench.drivers["i"].transfer_cycles
    input_cycles = cycles[-1] - cycles[0] + 1
    out_cycles = bench.monitors["o"].transfer_cycles
    beats_per_column = k // n
    # The shortest reduction that streams with no stall (the manifest's; bins when the unit
    # states none): the flip-flop bins read out while the next reduction counts; the
    # per-lane memories need a few cycles more.
    stall_free_beats = bench.manifest.get("stall_free_beats") or bins
    stall_free = beats_per_column >= stall_free_beats
    if p.get("banks", 2) == 1:
        # One bank: a reduction waits for the previous readout (bins cycles); only the beats
        # that fit in the front pipeline (fewer than `latency`) enter meanwhile.
        if beats_per_column > bench.latency:
            least = len(cycles) + (columns - 1) * (bins - bench.latency)
            assert input_cycles >= least, (
                f"input did not wait for the readout with one bank: {len(cycles)} beats in "
                f"{input_cycles} cycles (at least {least} expected)")
    elif stall_free:
        assert input_cycles == len(cycles), (
            f"input stalled: {len(cycles)} beats took {input_cycles} cycles although every "
            f"reduction ({beats_per_column} beats) covers the {stall_free_beats}-beat "
            f"readout")
    elif beats_per_column <= 2 * bins - stall_free_beats:
        # Readout-bound: each histogram follows the previous one with no idle cycle.
        gaps = np.flatnonzero(np.diff(out_cycles) != 1)
        assert gaps.size == 0, (
            f"readout idle between histograms: output beat {gaps[0] + 1} at cycle "
            f"{out_cycles[gaps[0] + 1]} after cycle {out_cycles[gaps[0]]}")
    else:
        # Between the two: each reduction waits at most for the beats it lacks.
        most = len(cycles) + columns * (stall_free_beats - beats_per_column)
        assert input_cycles <= most, (
            f"input stalled too long: {len(cycles)} beats took {input_cycles} cycles (at "
            f"most {most}: {stall_free_beats - beats_per_column} a reduction)")
    first_bin_latency = out_cycles[0] - cycles[beats_per_column - 1]
    assert first_bin_latency == bench.latency, (
        f"first bin {first_bin_latency} cycles after its last beat, the manifest declares "
        f"latency {bench.latency}")
    total = out_cycles[-1] - cycles[0] + 1
    indices_per_cycle = columns * k / input_cycles
    dut._log.info("%d columns of K=%d: %.2f indices/cycle on input, %d cycles in all "
                  "(%.1f cycles per column incl. readout drain)", columns, k,
                  indices_per_cycle, total, total / columns)
    # Readout overlap: the share of the readout cycles (bins per column) hidden under input.
    serial = columns * (beats_per_column + bins)
    hidden = serial - total
    record_metrics("sustained_throughput", columns=columns, k=k, bins=bins,
                   input_beats=len(cycles), input_cycles=input_cycles,
                   indices_per_cycle=indices_per_cycle, total_cycles=total,
                   cycles_per_column=input_cycles / columns, serial_cycles=serial,
                   readout_overlap=hidden / (columns * bins),
                   first_bin_latency=first_bin_latency)
