"""cocotb test bench for ``accllm_sparse_selector`` against its golden adapter
:data:`golden.accllm.beats.accllm_sparse_selector`
(:func:`golden.accllm.sparse_selector.select_by_index`).

Beats from 2:4 masks go through :func:`golden.accllm.sparse_selector.sparse_select` (which gives the
indices sent to the unit, and selected inputs that must equal the adapter's expected outputs); beats
with arbitrary indices are sent as they are. Every output beat is compared with the adapter's, in
order, so a lost, duplicated or reordered beat fails; the monitor checks the stream rules.

Tests
-----
corner_beats_full_rate
    Directed inputs (every lane at the minimum, the maximum, 0 and -1 (unsigned: 1 and max - 1);
    the four values spread over the positions of each group in all four rotations; one position
    at the maximum and the rest at the minimum; every lane different), each with every one of
    the 6 masks of a group in all rows and groups, and with a different mask per row and group.
    No backpressure: checks one beat per cycle and that the first result leaves ``latency``
    cycles after its input.
random_masks_backpressure
    ``QLLM_BEATS`` (default 5,000) random inputs with a random valid 2:4 mask per row and group,
    random gaps on ``i.valid`` and ``o.ready``.
unordered_indices_backpressure
    The documented behaviour for indices that no 2:4 mask gives: every one of the 16
    ``(idx1, idx2)`` pairs (``idx1 > idx2`` and ``idx1 == idx2`` included) in every row and
    group, then ``QLLM_BEATS / 4`` beats of random indices, under random backpressure.
"""

import os
import time

import cocotb
import numpy as np

from qllm_cores.golden.accllm import sparse_select
from qllm_cores.verif.bench import Bench, compare_fields, record_metrics

#: The 6 two-of-four patterns of a group, as position pairs.
PAIRS = np.array([(a, b) for a in range(4) for b in range(a + 1, 4)], dtype=np.int64)


def x_range(params):
    """Smallest and largest input value."""
    bits = params["x_bits"]
    if params["x_signed"]:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def masks_from_pairs(pair_ids):
    """2:4 masks, shape ``pair_ids.shape[:-1] + (4 * groups,)``, from indices into PAIRS."""
    pairs = PAIRS[pair_ids]                                  # (..., groups, 2)
    mask = np.zeros(pair_ids.shape + (4,), dtype=bool)
    np.put_along_axis(mask, pairs, True, axis=-1)
    return mask.reshape(pair_ids.shape[:-1] + (4 * pair_ids.shape[-1],))


def select_from_masks(x, mask):
    """Golden selection for inputs ``x`` (beats, 4 * groups) shared by the rows of ``mask``."""
    return sparse_select(np.broadcast_to(x[:, None, :], mask.shape), mask)


def extremes(params):
    """Minimum, maximum, 0 and -1 (unsigned: 1 and maximum - 1): distinct for x_bits >= 2."""
    lo, hi = x_range(params)
    return np.array([lo, hi, 0, -1] if params["x_signed"] else [lo, hi, 1, hi - 1])


def spread_extremes(params, turn):
    """The four :func:`extremes` over the positions of every group, rotated by group and
    ``turn``: every multiplexer arm carries a different value."""
    lane = np.arange(4 * params["groups"])
    return extremes(params)[(lane % 4 + lane // 4 + turn) % 4]


def corner_inputs(params):
    """Directed input vectors, shape (patterns, 4 * groups)."""
    lo, hi = x_range(params)
    lanes = 4 * params["groups"]
    position = np.arange(lanes) % 4
    patterns = [np.full(lanes, value) for value in extremes(params)]
    patterns += [spread_extremes(params, turn) for turn in range(4)]
    patterns += [np.where(position == k, hi, lo) for k in range(4)]
    patterns.append(lo + (np.arange(lanes) * 37 + 11) % (hi - lo + 1))
    return np.array(patterns, dtype=np.int64)


def corner_beats(params):
    """Every directed input with each uniform mask and with a mask varying per row and group."""
    rows, groups = params["rows"], params["groups"]
    x = corner_inputs(params)
    mixed = (np.arange(rows)[:, None] * groups + np.arange(groups)[None, :]) % len(PAIRS)
    pair_sets = [np.full((rows, groups), k) for k in range(len(PAIRS))] + [mixed]
    xs = np.repeat(x, len(pair_sets), axis=0)
    pair_ids = np.array([pair_sets[k % len(pair_sets)] for k in range(len(xs))])
    return xs, masks_from_pairs(pair_ids)


def masked_expected(bench, x, sel):
    """The adapter's output beats for the indices of a 2:4 selection ``sel``, checked against
    the inputs the mask selects."""
    expected = bench.expected({"i": {"x": x, "idx1": sel.idx1, "idx2": sel.idx2}})["o"]
    compare_fields("golden sparse_select", {"x1": sel.x1, "x2": sel.x2}, expected)
    return expected


async def _run(bench, inputs, expected, *, max_cycles_per_beat):
    await bench.start()
    started = time.perf_counter()
    count = bench.send("i", inputs)
    await bench.wait_for("o", count, max_cycles=max_cycles_per_beat * count + 100)
    bench.check("o", expected)
    assert bench.drivers["i"].idle, "beats left unconsumed"
    return count, time.perf_counter() - started


@cocotb.test()
async def corner_beats_full_rate(dut):
    bench = Bench(dut)
    x, mask = corner_beats(bench.params)
    sel = select_from_masks(x, mask)
    inputs = {"x": x, "idx1": sel.idx1, "idx2": sel.idx2}
    count, _ = await _run(bench, inputs, masked_expected(bench, x, sel), max_cycles_per_beat=1)
    bench.check_full_rate("o", count)


@cocotb.test()
async def random_masks_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    p = bench.params
    beats = int(os.environ.get("QLLM_BEATS", 5_000))
    lo, hi = x_range(p)
    x = bench.rng.integers(lo, hi + 1, size=(beats, 4 * p["groups"]))
    mask = masks_from_pairs(bench.rng.integers(0, len(PAIRS), size=(beats, p["rows"],
                                                                       p["groups"])))
    sel = select_from_masks(x, mask)
    inputs = {"x": x, "idx1": sel.idx1, "idx2": sel.idx2}
    count, elapsed = await _run(bench, inputs, masked_expected(bench, x, sel),
                                max_cycles_per_beat=20)
    cycles = bench.monitors["o"].cycles
    dut._log.info("%d beats in %d cycles, %.2f s: %.0f beats/s", count, cycles, elapsed,
                  count / elapsed)
    record_metrics("random_masks_backpressure", beats=count, cycles=cycles, seconds=elapsed,
                   beats_per_second=count / elapsed)


@cocotb.test()
async def unordered_indices_backpressure(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.5, seed_offset=2)
    p = bench.params
    rows, groups = p["rows"], p["groups"]
    beats = max(1, int(os.environ.get("QLLM_BEATS", 5_000)) // 4)
    lo, hi = x_range(p)
    # 16 beats give every row and group every (idx1, idx2) pair, shifted per row and group.
    shift = np.arange(rows)[:, None] * groups + np.arange(groups)[None, :]
    pair = (np.arange(16)[:, None, None] + shift) % 16
    idx1 = np.concatenate([pair // 4, bench.rng.integers(0, 4, size=(beats, rows, groups))])
    idx2 = np.concatenate([pair % 4, bench.rng.integers(0, 4, size=(beats, rows, groups))])
    x = bench.rng.integers(lo, hi + 1, size=(len(idx1), 4 * groups))
    x[:16] = [spread_extremes(p, turn) for turn in range(16)]
    inputs = {"x": x, "idx1": idx1, "idx2": idx2}
    count, elapsed = await _run(bench, inputs, bench.expected({"i": inputs})["o"],
                                max_cycles_per_beat=20)
    got = bench.received("o")
    equal = idx1 == idx2
    assert np.array_equal(got["x1"][equal], got["x2"][equal]), "equal indices, unequal outputs"
    record_metrics("unordered_indices_backpressure", beats=count, seconds=elapsed)
