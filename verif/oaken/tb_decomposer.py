"""cocotb test bench for ``oaken_decomposer`` against its golden adapter
:data:`golden.oaken.beats.oaken_decomposer` (:func:`golden.oaken.online.decompose` per beat).

Tests
-----
corner_beats_full_rate
    Directed beats: every value on and next to each threshold, the data range's ends, equal
    thresholds (empty groups), thresholds at the range ends; no backpressure; checks one beat
    per cycle and the latency.
random_beats_backpressure
    ``QLLM_BEATS`` (default 10,000) random beats, each with its own thresholds (ordered, with
    equal thresholds in about one beat in four), random gaps on ``i.valid`` and ``o.ready``.
misordered_thresholds
    Beats whose thresholds violate ``t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o``: the documented
    behavior is the priority order of ``decompose(..., check_order=False)`` (which the adapter
    applies to every beat; for ordered thresholds it is the same as ``check_order=True``, and
    the other tests check that too).
"""

import os

import cocotb
import numpy as np

from qllm_cores.golden.oaken import decompose
from qllm_cores.verif.bench import Bench, record_metrics
from qllm_cores.verif.oaken.chunks import random_thresholds

NAMES = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")


def golden_beats(bench, x, thresholds, check_order=True):
    """Expected output fields for beats ``x`` (beats x lanes) with per-beat ``thresholds``,
    from the unit's golden adapter. With ``check_order`` the thresholds of every beat must be
    ordered and the adapter's result is also checked against ``decompose`` in its checking
    mode (the two readings agree wherever the thresholds are ordered)."""
    expected = bench.expected({"i": beat_fields(x, thresholds)})["o"]
    if check_order:
        data_bits = bench.params["data_bits"]
        for beat in range(0, len(x), max(1, len(x) // 50)):      # a sample of beats
            parts = decompose(x[beat], tuple(int(v) for v in thresholds[beat]), data_bits)
            for name, values in parts.items():
                np.testing.assert_array_equal(expected[name][beat], values)
    return expected


def beat_fields(x, thresholds):
    fields = {"x": np.asarray(x, np.int64)}
    thresholds = np.asarray(thresholds, np.int64)
    for k, name in enumerate(NAMES):
        fields[name] = thresholds[:, k]
    return fields


def corner_beats(lanes, data_bits, rng):
    """Values on and beside every threshold, for ordinary, equal and extreme thresholds."""
    lo, hi = -(1 << (data_bits - 1)), (1 << (data_bits - 1)) - 1
    span = hi // 4
    threshold_sets = [
        (-3 * span, -span, span, 3 * span),
        (-span, 0, 0, span),                  # one-value inner group
        (-span, -span, span, span),           # no middle group
        (0, 0, 0, 0),                         # everything outer or inner
        (lo, lo, hi, hi),                     # everything inner
        (lo, -1, 1, hi),                      # no outer group
        (-2, -1, 1, 2),                       # narrow groups
        (span, 2 * span, 2 * span + 1, 3 * span),   # inner group above zero
    ]
    xs, ts = [], []
    for t in threshold_sets:
        t = tuple(sorted(int(np.clip(v, lo, hi)) for v in t))     # narrow data: keep order
        values = sorted({int(np.clip(v + d, lo, hi)) for v in t + (0, lo, hi)
                         for d in (-1, 0, 1)})
        for start in range(0, len(values), lanes):
            row = values[start:start + lanes]
            row += list(rng.choice(values, lanes - len(row)))
            xs.append(row)
            ts.append(t)
    return np.array(xs, np.int64), np.array(ts, np.int64)


@cocotb.test()
async def corner_beats_full_rate(dut):
    bench = Bench(dut)
    p = bench.params
    x, t = corner_beats(p["lanes"], p["data_bits"], bench.rng)
    await bench.start()
    count = bench.send("i", beat_fields(x, t))
    await bench.wait_for("o", count, max_cycles=count + 20)
    bench.check("o", golden_beats(bench, x, t))
    bench.check_full_rate("o", count)


@cocotb.test()
async def random_beats_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    p = bench.params
    beats = int(os.environ.get("QLLM_BEATS", 10_000))
    lo, hi = -(1 << (p["data_bits"] - 1)), (1 << (p["data_bits"] - 1)) - 1
    t = np.array([random_thresholds(bench.rng, p["data_bits"]) for _ in range(beats)])
    # Half the values near the thresholds (where the groups change), half anywhere.
    near = t[np.arange(beats)[:, None], bench.rng.integers(0, 4, (beats, p["lanes"]))]
    near = near + bench.rng.integers(-3, 4, near.shape)
    anywhere = bench.rng.integers(lo, hi + 1, (beats, p["lanes"]))
    x = np.clip(np.where(bench.rng.random(near.shape) < 0.5, near, anywhere), lo, hi)
    await bench.start()
    bench.send("i", beat_fields(x, t))
    await bench.wait_for("o", beats, max_cycles=20 * beats + 100)
    bench.check("o", golden_beats(bench, x, t))
    record_metrics("random_beats_backpressure", beats=beats,
                   cycles=bench.monitors["o"].cycles)


@cocotb.test()
async def misordered_thresholds(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.8, seed_offset=2)
    p = bench.params
    beats = 500
    lo, hi = -(1 << (p["data_bits"] - 1)), (1 << (p["data_bits"] - 1)) - 1
    t = bench.rng.integers(lo // 4, hi // 4 + 1, (beats, 4))
    t[:beats // 2] = -np.sort(-t[:beats // 2], axis=1)         # fully reversed half
    near = t[np.arange(beats)[:, None], bench.rng.integers(0, 4, (beats, p["lanes"]))]
    x = np.clip(near + bench.rng.integers(-2, 3, near.shape), lo, hi)
    await bench.start()
    bench.send("i", beat_fields(x, t))
    await bench.wait_for("o", beats, max_cycles=20 * beats + 100)
    bench.check("o", golden_beats(bench, x, t, check_order=False))
