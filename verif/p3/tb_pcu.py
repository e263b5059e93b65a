"""cocotb test bench for ``p3_pcu`` against its golden adapter :data:`golden.p3.beats.p3_pcu`
(:func:`golden.p3.pe.pcu_run`: per slot and PE, contract 5's ``p3_pe``).

Tests
-----
exhaustive_single_products
    Every (activation code, weight code) pair for both activation formats, BitMoD with each of
    the four special-value selects and INT4 with zero points 0, 1, 8 and 15: one beat per
    activation code and setting, the code in one way (rotating), PE j holding weight code
    ``(j + code) % 16`` in that way (16 PEs: every weight code in every beat), the other ways
    zero activations with random weights; ``first`` and ``last`` on every beat, the slot
    alternating (``reuse`` 2). No backpressure: one result per cycle, the first ``latency``
    cycles after the first beat.
random_dot_products_backpressure
    ``QLLM_BEATS`` (default 150,000) beats of the adapter's stimulus: dot products of random
    length (slot 0 / slot 1 pairs sharing a weight column with ``reuse`` 2, and now and then
    an irregular slot order), random formats per dot product and now and then per beat,
    activation codes biased to NaN, the largest exponent and subnormals, runs of large
    products that overflow; random gaps on ``i.valid`` and ``o.ready``.
directed_slots_overflow_and_nan
    Each accumulator set on its own: one slot overflows (sticky until its ``first``) while the
    other does not; NaN in one slot only; a ``first`` on one slot leaves the other's sum;
    accumulation continuing across ``last``; the same slot several beats in a row.

Results are matched in order; only ``exhaustive_single_products`` reads the manifest's
``latency`` (the first result's cycle). The bench passes at every ``pipeline``.
"""

import os

import cocotb
import numpy as np

from qllm_cores.verif.bench import Bench, record_metrics
from qllm_cores.verif.p3.tb_pe import run_checked

#: BitMoD with each special-value select, INT4 with four zero points: (wgt_fmt, sv_sel, zp).
WEIGHT_SETTINGS = [(0, sv, 0) for sv in range(4)] + [(1, 0, zp) for zp in (0, 1, 8, 15)]


def _fields(params, n):
    """Empty beat arrays for ``n`` beats."""
    pes = params["pes"]
    return {"act": np.zeros((n, 4), np.int64), "wgt": np.zeros((n, pes, 4), np.int64),
            "act_fmt": np.zeros(n, np.int64), "wgt_fmt": np.zeros(n, np.int64),
            "sv_sel": np.zeros((n, pes), np.int64), "zp": np.zeros((n, pes), np.int64),
            "first": np.zeros(n, np.int64), "last": np.zeros(n, np.int64),
            **({"slot": np.zeros(n, np.int64)} if params["reuse"] > 1 else {})}


def single_product_beats(params):
    """One beat per (activation format, weight setting, activation code)."""
    pes, reuse = params["pes"], params["reuse"]
    codes = np.arange(256)
    blocks = []
    for act_fmt in (0, 1):
        for wgt_fmt, sv_sel, zp in WEIGHT_SETTINGS:
            beats = _fields(params, 256)
            way = codes % 4
            beats["act"][codes, way] = codes
            # Idle ways: zero activations (+0) with weights the PEs must ignore.
            beats["wgt"][:] = (np.arange(256 * pes * 4).reshape(256, pes, 4) * 7) % 16
            beats["wgt"][codes, :, way] = (np.arange(pes)[None, :] + codes[:, None]) % 16
            beats["act_fmt"][:], beats["wgt_fmt"][:] = act_fmt, wgt_fmt
            beats["sv_sel"][:], beats["zp"][:] = sv_sel, zp
            beats["first"][:], beats["last"][:] = 1, 1
            if reuse > 1:
                beats["slot"][:] = codes % reuse
            blocks.append(beats)
    return {name: np.concatenate([b[name] for b in blocks]) for name in blocks[0]}


def directed_beats(params):
    """Slots on their own: overflow, NaN, first and continuation per accumulator set."""
    rows = []
    pes, reuse = params["pes"], params["reuse"]

    def beat(act, wgt, *, slot=0, act_fmt=0, wgt_fmt=0, sv_sel=0, zp=0, first=0, last=0):
        rows.append({"act": list(act), "wgt": np.broadcast_to(np.asarray(wgt), (pes, 4)),
                     "act_fmt": act_fmt, "wgt_fmt": wgt_fmt,
                     "sv_sel": np.broadcast_to(np.asarray(sv_sel), (pes,)),
                     "zp": np.broadcast_to(np.asarray(zp), (pes,)), "first": first,
                     "last": last, **({"slot": slot} if reuse > 1 else {})})

    ramp = (np.arange(pes)[:, None] + np.arange(4)[None, :]) % 16
    # Largest E4M3 magnitude x BitMoD +-8 (sv_sel 2 / 3 by PE parity): 29,360,128 per beat, so
    # the sum leaves int32 after 74 beats in slot 0; slot 1 (small products) interleaved.
    signs = np.where(np.arange(pes) % 2, 3, 2)
    for k in range(80):
        beat([0x7E] * 4, 8, slot=0, sv_sel=signs, first=int(k == 0), last=int(k % 10 == 9))
        beat([0x38, 0x30, 0x28, 0x20], ramp, slot=1, wgt_fmt=1, zp=np.arange(pes) % 16,
             first=int(k == 0), last=int(k % 10 == 9))
    # Slot 0 back in range: overflow stays until first; slot 1 restarts meanwhile.
    for k in range(8):
        beat([0xFE] * 4, 8, slot=0, sv_sel=signs, last=1)
    beat([0x40] * 4, ramp, slot=1, first=1, last=1)
    beat([0x40] * 4, ramp, slot=0, first=1, last=1)
    # NaN in slot 1 only; slot 0 clean, then each slot continues across last.
    beat([0x7F, 0x38, 0x38, 0x38], ramp, slot=1, first=1, last=1)
    beat([0x38] * 4, ramp, slot=0, first=1, last=1)
    beat([0x38] * 4, ramp, slot=1, last=1)
    beat([0x38] * 4, ramp, slot=1, last=1)              # no first: NaN and sum carry on
    beat([0x38] * 4, ramp, slot=0, last=1)              # no first: carries on too
    # The same slot several beats in a row, S0E4M4 x INT4 largest.
    for k in range(6):
        beat([0xFF] * 4, 15, slot=1, act_fmt=1, wgt_fmt=1, first=int(k == 0), last=int(k == 5))
    keys = rows[0].keys()
    return {key: np.array([row[key] for row in rows], np.int64) for key in keys}


@cocotb.test()
async def exhaustive_single_products(dut):
    bench = Bench(dut)
    beats = single_product_beats(bench.params)
    count = len((await run_checked(bench, beats, max_cycles_per_beat=2))["acc"])
    span = bench.check_full_rate("o", count)
    pairs = len(beats["act"]) * min(bench.params["pes"], 16)
    record_metrics("exhaustive_single_products", results=count, cycles=span, products=pairs)


@cocotb.test()
async def random_dot_products_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    count = int(os.environ.get("QLLM_BEATS", 150_000))
    beats = bench.golden.stimulus(bench.rng, bench.params, count)["i"]
    expected = await run_checked(bench, beats)
    results = len(expected["acc"])
    record_metrics("random_dot_products_backpressure", beats=count, results=results,
                   dot_products=results * bench.params["pes"],
                   slots=np.bincount(expected.get("slot", np.zeros(results, np.int64)),
                                     minlength=2).tolist(),
                   overflows=int(np.sum(expected["overflow"])),
                   nans=int(np.sum(expected["nan"])))


@cocotb.test()
async def directed_slots_overflow_and_nan(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.5, seed_offset=2)
    expected = await run_checked(bench, directed_beats(bench.params))
    assert expected["overflow"].any() and not expected["overflow"].all(), (
        "directed cases lost their point: overflow")
    assert expected["nan"].any() and not expected["nan"].all(), (
        "directed cases lost their point: nan")
