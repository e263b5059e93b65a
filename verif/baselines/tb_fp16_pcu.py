"""cocotb test bench for ``fp16_pcu`` against its golden adapter
:data:`golden.baselines.beats.fp16_pcu` (:func:`golden.baselines.fp16_mac.fp16_mac_run` per lane).

A stimulus is a dict of beat arrays ``act`` (beats,), ``wgt`` (beats, lanes) (binary16 bit
patterns), ``first`` and ``last``; the expected output is, for every ``last`` beat, each lane's
binary32 pattern from the golden MAC over ``(act, wgt[:, j])``. Every result of every lane is
compared with the adapter's ``acc`` comparison, :func:`golden.baselines.fp16_mac.fp32_match` (any
NaN equals any NaN, all else bit for bit), and every NaN the RTL emits must be the documented
:data:`golden.baselines.fp16_mac.CANONICAL_NAN`.

Tests
-----
directed_special_cases
    :func:`directed_beats`: every special and boundary binary16 operand (from
    :data:`verif.baselines.tb_fp16_mac.SPECIAL_FP16`: +-0, +-inf, NaNs, subnormals, 65504...) as
    the activation against every one as a weight, in every lane, the lanes of one beat holding
    different specials (NaN, infinities, -0, subnormals side by side), ``first`` and ``last``
    on every beat; two-beat sums of a few specials with different pairs per lane (``inf -
    inf`` in one lane, a finite sum in the next); then ``fp16_mac``'s whole directed stimulus
    (:func:`verif.baselines.tb_fp16_mac.directed_beats`: rounding ties, cancellations, long dot
    products of 6,000 beats, an infinity carried and cleared) as lane 0's operands, lane 1 the same
    with every weight negated, the other lanes with the weights rotated. Light backpressure.
random_dot_products_backpressure
    ``QLLM_BEATS`` (default 20,000) beats in dot products of random lengths (1 to 2048), a
    tenth continuing the previous accumulators (no ``first``), some partial sums; operands from
    ``fp16_mac``'s bench mix (random bit patterns, normal values, wide magnitudes, specials in
    a sixth of the dot products) and near-cancelling beat pairs (the same activation, every
    lane's weight nearly negated). Random gaps on ``i.valid`` (p = 0.7) and ``o.ready``
    (p = 0.6).
full_rate_latency
    No backpressure: 64 beats with ``last`` on every beat (:meth:`Bench.check_full_rate`: one
    result per cycle, the first ``latency`` cycles after the first beat), then short dot
    products. Checks that ``i`` accepts a beat every cycle and that each result leaves exactly
    ``latency`` cycles after its ``last`` beat (the manifest's ``latency``).

The results are checked in order and the streams by their valid/ready rules only: apart from
the latency checks of ``full_rate_latency``, nothing depends on the unit's depth or lane count.
"""

import os
import time

import cocotb
import numpy as np

from qllm_cores.golden.baselines.fp16_mac import CANONICAL_NAN, fp32_is_nan
from qllm_cores.verif.bench import Bench, record_metrics
from qllm_cores.verif.baselines.tb_fp16_mac import SPECIAL_FP16, random_fp16
from qllm_cores.verif.baselines.tb_fp16_mac import directed_beats as mac_directed_beats


class Stimulus:
    """Collects dot products of ``lanes`` lanes as beat arrays."""

    def __init__(self, lanes):
        self.lanes = lanes
        self.parts = {"act": [], "wgt": [], "first": [], "last": []}

    def add(self, act, wgt, *, first=True, last=None):
        """Append one dot product: ``act`` (beats,), ``wgt`` (beats, lanes); ``first`` on its
        first beat (if asked; an array: where it says), ``last`` on its final beat, or where the
        ``last`` array says."""
        act = np.asarray(act, dtype=np.int64)
        wgt = np.asarray(wgt, dtype=np.int64).reshape(len(act), self.lanes)
        if np.ndim(first):
            first_bits = np.asarray(first, dtype=np.int64)
        else:
            first_bits = np.zeros(len(act), dtype=np.int64)
            first_bits[0] = int(first)
        if last is None:
            last = np.zeros(len(act), dtype=np.int64)
            last[-1] = 1
        for name, value in zip(self.parts, (act, wgt, first_bits, np.asarray(last, np.int64))):
            self.parts[name].append(value)

    def beats(self):
        return {name: np.concatenate(values) for name, values in self.parts.items()}


def directed_beats(lanes):
    """The directed stimulus for ``lanes`` lanes (see the module docstring); deterministic."""
    stimulus = Stimulus(lanes)
    specials = np.array(SPECIAL_FP16, dtype=np.int64)
    n = len(specials)
    # Every special x special pair in every lane: beat k has activation specials[k] and lane j
    # weight specials[(k + j + shift) % n]; over the shifts every lane meets every pair.
    beat, lane = np.arange(n)[:, None], np.arange(lanes)[None, :]
    for shift in range(n):
        stimulus.add(specials, specials[(beat + lane + shift) % n], first=np.ones(n),
                     last=np.ones(n))
    # Two-beat sums of a few specials, each lane its own pair of weights.
    few = specials[[0, 1, 2, 3, 4, 5, 9, 10, 15, 16, 17, 18]]
    lane = np.arange(lanes)
    for p, x in enumerate(few):
        for q, y in enumerate(few):
            stimulus.add([x, y], [few[lane % len(few)], few[(lane + p + 5 * q) % len(few)]])
    # fp16_mac's directed stimulus: lane 0 as it is, lane 1 negated, the others rotated.
    mac = mac_directed_beats()
    b = mac["b"]
    columns = [b, b ^ 0x8000] + [np.roll(b, 7 * j) ^ (0x8000 * (j % 2))
                                 for j in range(2, lanes)]
    stimulus.add(mac["a"], np.stack(columns[:lanes], axis=1), first=mac["first"],
                 last=mac["last"])
    return stimulus.beats()


def random_beats(rng, beats, lanes):
    """``beats`` random beats grouped in dot products (see the module docstring)."""
    stimulus = Stimulus(lanes)
    total = 0
    while total < beats:
        band = rng.choice(4, p=[0.45, 0.40, 0.13, 0.02])
        low, high = [(1, 4), (5, 64), (65, 512), (513, 2048)][band]
        length = int(min(rng.integers(low, high + 1), beats - total))
        specials = rng.random() < 0.15
        act = random_fp16(rng, length, specials=specials)
        wgt = random_fp16(rng, length * lanes, specials=specials).reshape(length, lanes)
        if length >= 2 and rng.random() < 0.15:
            # Near cancellation: the next beat's products almost undo this one's, every lane.
            pairs = np.flatnonzero(rng.random(length - 1) < 0.5)
            act[pairs + 1] = act[pairs]
            before = wgt[pairs]
            finite = (before & 0x7C00) != 0x7C00
            nudge = rng.integers(-3, 4, before.shape)
            wgt[pairs + 1] = np.where(finite, np.clip((before & 0x7FFF) + nudge, 0, 0x7BFF)
                                      | (~before & 0x8000), before)
        last = (rng.random(length) < 0.03).astype(np.int64)
        last[-1] = 1
        stimulus.add(act, wgt, first=rng.random() >= 0.1, last=last)
        total += length
    return stimulus.beats()


def check_results(bench, fields):
    """Compare every lane of every output beat with the golden model; return the expected
    patterns (results, lanes)."""
    expected = bench.expected({"i": fields})["o"]["acc"]
    got = np.asarray(bench.received("o")["acc"], dtype=np.int64)
    assert len(got) == len(expected), (
        f"o: {len(got)} beats received, {len(expected)} expected (lost or duplicated beats)")
    got = got.reshape(expected.shape)
    bad = np.argwhere(~bench.golden.same("acc", got, expected))
    if bad.size:
        k, j = (int(x) for x in bad[0])
        beat = int(np.flatnonzero(fields["last"])[k])
        start = max(0, beat - 3)
        context = ", ".join(f"{fields['act'][t]:#06x}*{fields['wgt'][t, j]:#06x}"
                            f"{' (first)' if fields['first'][t] else ''}"
                            for t in range(start, beat + 1))
        raise AssertionError(
            f"o: {len(bad)} of {expected.size} lane results differ; first at output {k} lane "
            f"{j} (input beat {beat}): got {got[k, j]:#010x}, expected "
            f"{int(expected[k, j]):#010x}; lane {j}, beats {start}..{beat}: {context}")
    noncanonical = np.argwhere(fp32_is_nan(got) & (got != CANONICAL_NAN))
    assert not noncanonical.size, (
        f"o: NaN output {got[tuple(noncanonical[0])]:#010x} at output {noncanonical[0][0]} lane "
        f"{noncanonical[0][1]} is not the canonical {CANONICAL_NAN:#010x}")
    return expected


async def run(bench, fields, *, cycles_per_beat):
    """Send ``fields`` and wait for all results; return the number of results."""
    await bench.start()
    bench.send("i", fields)
    outputs = int(np.count_nonzero(fields["last"]))
    await bench.wait_for("o", outputs,
                         max_cycles=int(cycles_per_beat * len(fields["act"])) + 100)
    return outputs


@cocotb.test()
async def directed_special_cases(dut):
    bench = Bench(dut, valid_probability=0.9, ready_probability=0.8, seed_offset=0)
    fields = directed_beats(bench.params["lanes"])
    outputs = await run(bench, fields, cycles_per_beat=4)
    expected = check_results(bench, fields)
    record_metrics("directed_special_cases", beats=len(fields["act"]), results=outputs,
                   lane_results=int(expected.size),
                   nan_results=int(fp32_is_nan(expected).sum()))


@cocotb.test()
async def random_dot_products_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    beats = int(os.environ.get("QLLM_BEATS", 20_000))
    lanes = bench.params["lanes"]
    fields = random_beats(bench.rng, beats, lanes)
    dot_products = int(np.count_nonzero(fields["first"]))
    started = time.perf_counter()
    outputs = await run(bench, fields, cycles_per_beat=6)
    expected = check_results(bench, fields)
    elapsed = time.perf_counter() - started
    cycles = bench.monitors["o"].cycles
    special = fp32_is_nan(expected) | ((expected & 0x7FFF_FFFF) == 0x7F80_0000)
    dut._log.info("%d beats (%d MACs), %d dot products, %d results (%d lane results inf/NaN) "
                  "in %d cycles, %.1f s: %.0f beats/s", beats, beats * lanes, dot_products,
                  outputs, int(special.sum()), cycles, elapsed, beats / elapsed)
    record_metrics("random_dot_products_backpressure", beats=beats, macs=beats * lanes,
                   dot_products=dot_products, results=outputs,
                   special_results=int(special.sum()), cycles=cycles, seconds=elapsed,
                   beats_per_second=beats / elapsed)


@cocotb.test()
async def full_rate_latency(dut):
    bench = Bench(dut, seed_offset=2)
    lanes = bench.params["lanes"]
    stimulus = Stimulus(lanes)
    block = 64
    stimulus.add(random_fp16(bench.rng, block), random_fp16(bench.rng, block * lanes),
                 first=np.ones(block), last=np.ones(block))
    for _ in range(100):
        length = int(bench.rng.integers(1, 9))
        stimulus.add(random_fp16(bench.rng, length), random_fp16(bench.rng, length * lanes))
    fields = stimulus.beats()
    count = len(fields["act"])
    await run(bench, fields, cycles_per_beat=1)
    check_results(bench, fields)
    # The first block: one result per cycle, the first `latency` cycles after the first beat.
    bench.check_full_rate("o", block)
    sent = bench.drivers["i"].transfer_cycles
    assert sent == list(range(sent[0], sent[0] + count)), (
        f"not one beat per cycle at full rate: input transfers at cycles {sent[:20]} ...")
    emitted = bench.monitors["o"].transfer_cycles
    want = [sent[k] + bench.latency for k in np.flatnonzero(fields["last"])]
    assert emitted == want, (
        f"results not {bench.latency} cycles after their last beat: first difference at "
        f"{next(k for k, (x, y) in enumerate(zip(emitted, want)) if x != y)}")
    record_metrics("full_rate_latency", beats=count, results=len(emitted),
                   cycles_per_beat=(sent[-1] - sent[0] + 1) / count,
                   latency=emitted[0] - sent[int(np.flatnonzero(fields["last"])[0])])
