"""cocotb test bench for ``p3_pe`` against its golden adapter :data:`golden.p3.beats.p3_pe`
(:func:`golden.p3.pe.pe_run`).

Tests
-----
exhaustive_single_products
    Every (activation code, weight code) pair, 256 x 16, for both activation formats, BitMoD with
    each of the four special-value selects and INT4 with zero points 0, 1, 8 and 15. One product
    per beat (``first`` and ``last`` set, the other three lanes hold zero activations), the lane
    rotating; no backpressure: one result per cycle.
random_dot_products_backpressure
    ``QLLM_DOTS`` (default 20,000) dot products of random length (1..16 beats, a few up to 256),
    random formats per dot product and now and then per beat, codes biased toward NaN, the
    largest exponent and subnormals; random gaps on ``i.valid`` and ``o.ready``.
directed_overflow_nan_and_continuation
    Long runs of the largest products in both signs (the accumulator wraps; ``overflow`` is
    sticky until ``first``), NaN in one lane, accumulation continuing across ``last`` without
    ``first``, and ``first`` on every beat.

Nothing here depends on the PE's ``pipeline`` depth: results are matched in order, and only
``exhaustive_single_products`` reads the manifest's ``latency``, to check that the first result
arrives exactly that many cycles after the first beat (then one per cycle).
"""

import os

import cocotb
import numpy as np

from qllm_cores.verif.bench import Bench, record_metrics

FIELDS = ("act", "wgt", "act_fmt", "wgt_fmt", "sv_sel", "zp", "first", "last")


async def run_checked(bench, beats, *, max_cycles_per_beat=20):
    """Send ``beats``, check every result; return the expected output fields (shared with
    ``verif/p3/tb_pcu.py``)."""
    await bench.start()
    bench.send("i", beats)
    expected = bench.expected({"i": beats})["o"]
    count = int(np.sum(beats["last"]))
    assert len(expected["acc"]) == count, "one result per last beat"
    total = len(beats["act"])
    await bench.wait_for("o", count, max_cycles=max_cycles_per_beat * total + 100)
    bench.check("o", expected)
    assert bench.drivers["i"].idle, "beats left unconsumed"
    return expected


def single_product_beats():
    """All 256 x 16 code pairs for every format / select combination, one product a beat."""
    act, wgt = np.meshgrid(np.arange(256), np.arange(16), indexing="ij")
    act, wgt = act.ravel(), wgt.ravel()
    n = act.size
    lane = np.arange(n) % 4
    blocks = []
    selects = [(0, sv, 0) for sv in range(4)] + [(1, 0, zp) for zp in (0, 1, 8, 15)]
    for act_fmt in (0, 1):
        for wgt_fmt, sv_sel, zp in selects:
            acts = np.zeros((n, 4), np.int64)
            wgts = np.zeros((n, 4), np.int64)
            acts[np.arange(n), lane] = act
            wgts[np.arange(n), lane] = wgt
            # The idle lanes: zero activation (+0), and a random weight the PE must ignore.
            idle = np.ones((n, 4), bool)
            idle[np.arange(n), lane] = False
            wgts[idle] = (np.arange(idle.sum()) * 7) % 16
            blocks.append({
                "act": acts, "wgt": wgts,
                "act_fmt": np.full(n, act_fmt), "wgt_fmt": np.full(n, wgt_fmt),
                "sv_sel": np.full(n, sv_sel), "zp": np.full(n, zp),
                "first": np.ones(n, np.int64), "last": np.ones(n, np.int64),
            })
    return {name: np.concatenate([b[name] for b in blocks]) for name in FIELDS}


def random_codes(rng, shape, act_fmt):
    """Activation codes: uniform, with extra NaNs, largest exponents and subnormals."""
    codes = rng.integers(0, 256, shape)
    kind = rng.random(shape)
    e4m3 = np.broadcast_to(np.asarray(act_fmt) == 0, shape)
    nan = np.where(rng.random(shape) < 0.5, 0x7F, 0xFF)
    big = np.where(e4m3, (rng.integers(0, 2, shape) << 7) | 0x78 | rng.integers(0, 7, shape),
                   0xF0 | rng.integers(0, 16, shape))
    sub = np.where(e4m3, (rng.integers(0, 2, shape) << 7) | rng.integers(0, 8, shape),
                   rng.integers(0, 16, shape))
    codes = np.where(kind < 0.03, np.where(e4m3, nan, codes), codes)
    codes = np.where((kind >= 0.03) & (kind < 0.15), big, codes)
    codes = np.where((kind >= 0.15) & (kind < 0.25), sub, codes)
    return codes


def random_dot_products(rng, dots):
    lengths = np.where(rng.random(dots) < 0.02, rng.integers(17, 257, dots),
                       rng.integers(1, 17, dots))
    n = int(lengths.sum())
    starts = np.zeros(n, bool)
    starts[np.concatenate(([0], np.cumsum(lengths)[:-1]))] = True
    ends = np.zeros(n, bool)
    ends[np.cumsum(lengths) - 1] = True
    dot_of_beat = np.cumsum(starts) - 1
    # Formats per dot product; one dot product in ten switches formats on every beat.
    per_dot = {name: rng.integers(0, hi, dots) for name, hi in
               (("act_fmt", 2), ("wgt_fmt", 2), ("sv_sel", 4), ("zp", 16))}
    mixed = rng.random(dots) < 0.1
    beats = {}
    for name, hi in (("act_fmt", 2), ("wgt_fmt", 2), ("sv_sel", 4), ("zp", 16)):
        beats[name] = np.where(mixed[dot_of_beat], rng.integers(0, hi, n),
                               per_dot[name][dot_of_beat])
    beats["act"] = random_codes(rng, (n, 4), np.repeat(beats["act_fmt"][:, None], 4, axis=1))
    beats["wgt"] = np.where(rng.random((n, 4)) < 0.1, 8, rng.integers(0, 16, (n, 4)))
    # first marks every dot product start, except one in twenty that continues the previous.
    beats["first"] = (starts & ~(rng.random(n) < 0.05)).astype(np.int64)
    beats["first"][0] = 1
    beats["last"] = ends.astype(np.int64)
    return beats


@cocotb.test()
async def exhaustive_single_products(dut):
    bench = Bench(dut)
    beats = single_product_beats()
    count = len((await run_checked(bench, beats, max_cycles_per_beat=2))["acc"])
    span = bench.check_full_rate("o", count)
    record_metrics("exhaustive_single_products", products=count, cycles=span)


@cocotb.test()
async def random_dot_products_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    dots = int(os.environ.get("QLLM_DOTS", 20_000))
    beats = random_dot_products(bench.rng, dots)
    expected = await run_checked(bench, beats)
    count = len(expected["acc"])
    record_metrics("random_dot_products_backpressure", dot_products=count,
                   beats=len(beats["act"]), overflows=int(np.sum(expected["overflow"])),
                   nans=int(np.sum(expected["nan"])))


def directed_beats():
    """Overflow in both signs (sticky until ``first``), NaN lanes, continuation across
    ``last``, ``first`` on every beat with subnormals."""
    rows = []

    def beat(act, wgt, act_fmt=0, wgt_fmt=0, sv_sel=0, zp=0, first=0, last=0):
        rows.append((list(act), list(wgt), act_fmt, wgt_fmt, sv_sel, zp, first, last))

    # Largest E4M3 magnitude (e=15, m=6: M5 = 28, 448) x BitMoD special +16 half units:
    # 4 x 28 x 16 x 2^14 = 29,360,128 per beat; the 74th beat passes 2^31 (wrap, overflow).
    for sign in (0x00, 0x80):
        for k in range(80):
            beat([sign | 0x7E] * 4, [8] * 4, sv_sel=2, first=int(k == 0), last=int(k % 10 == 9))
    # Overflow is sticky until first, even when the sum comes back into range.
    for k in range(90):
        beat([0x7E] * 4, [8] * 4, sv_sel=2 if k < 75 else 3, first=int(k == 0), last=int(k >= 75))
    # S0E4M4 largest (e=15, m=15: 31 << 14) x INT4 (15 - 0): 30,474,240 per beat.
    for k in range(80):
        beat([0xFF] * 4, [15] * 4, act_fmt=1, wgt_fmt=1, first=int(k == 0), last=int(k >= 68))
    # NaN in one lane: nan set, the lane contributes 0; sticky over the dot product.
    beat([0x7F, 0x38, 0x38, 0x38], [2, 2, 2, 2], first=1)
    beat([0x38, 0x38, 0x38, 0x38], [2, 2, 2, 2], last=1)
    beat([0xFF, 0x00, 0x00, 0x00], [15, 0, 0, 0], first=1, last=1)    # -NaN
    # Continuation across last: no first on the second dot product.
    beat([0x40] * 4, [3] * 4, first=1, last=1)
    beat([0x40] * 4, [3] * 4, last=1)
    # first on every beat, subnormals (e = 0) in both formats.
    for k in range(16):
        beat([k, 0x80 | k, k, 0x80 | (k // 2)], [k, 15 - k, 8, 4], act_fmt=0, wgt_fmt=k % 2,
             sv_sel=k % 4, zp=k, first=1, last=1)
        beat([k, 15 - k, k, 0], [k, 15 - k, 8, 4], act_fmt=1, wgt_fmt=k % 2, sv_sel=k % 4,
             zp=15 - k, first=1, last=1)
    return {name: np.array([row[k] for row in rows], np.int64) for k, name in enumerate(FIELDS)}


@cocotb.test()
async def directed_overflow_nan_and_continuation(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.5, seed_offset=2)
    beats = directed_beats()
    expected = await run_checked(bench, beats)
    assert expected["overflow"].any() and not expected["overflow"].all(), (
        "directed cases lost their point: overflow")
    assert expected["nan"].any(), "directed cases lost their point: nan"
