"""cocotb test bench for ``oaken_dequantizer``: golden encode -> RTL dequantize == golden decode.

The expected output beats come from the unit's golden adapter
:data:`golden.oaken.beats.oaken_dequantizer` (the three input streams decoded chunk by chunk with
:func:`golden.oaken.online.dequantize_vector`), checked against the decode of the encoded chunks.

Tests
-----
random_chunks_backpressure(density)
    ``QLLM_CHUNKS`` (default 2,000) back-to-back random chunks per outlier density (0 %, 1 %,
    10 %, 50 %, 100 %), each with its own random thresholds (equal thresholds and empty groups
    included) encoded by :func:`golden.oaken.online.quantize_vector`; random gaps on ``hdr``,
    ``dense`` and ``coo`` and on ``o.ready``; every output beat compared, in order, with
    :func:`golden.oaken.online.dequantize_vector`. ``coo_error`` must stay low.
random_coo_packing
    The same with COO beats of random sizes (0..lanes entries, trailing empty ``last`` beats).
sustained_rate(density)
    No backpressure, COO beats packed full: records output beats per cycle and checks that the
    unit keeps one beat per cycle (after the pipeline fills) at every density. With
    ``QLLM_COO_PACKING=random`` the COO beats have random sizes and the rate is only recorded
    (``make bench`` prints both).
malformed_coo
    Chunks whose COO entries are out of order or out of range, between well-formed chunks:
    ``coo_error`` rises, exactly ``vec_len / lanes`` beats leave per chunk, and every
    well-formed chunk before and after still decodes bit-exactly.
"""

import os

import cocotb
import numpy as np

from qllm_cores.golden.oaken import pack_coo, unpack_coo
from qllm_cores.verif.bench import Bench, compare_fields, record_metrics
from qllm_cores.verif.oaken.chunks import chunk_streams, encode_chunks

DENSITIES = [0.0, 0.01, 0.10, 0.50, 1.0]


def _params(bench):
    p = bench.params
    return dict(vec_len=p["vec_len"], data_bits=p["data_bits"], frac_bits=p["frac_bits"])


def _expected(bench, streams, chunk_expected=None):
    """The adapter's output beats for ``streams``; equal to ``chunk_expected`` (the golden
    decode of each encoded chunk) when given."""
    expected = bench.expected(streams)["o"]
    if chunk_expected is not None:
        compare_fields("golden adapter", expected, chunk_expected)
    return expected


def _concat_streams(*parts):
    """One set of streams from several, in order."""
    return {port: {name: np.concatenate([part[port][name] for part in parts])
                   for name in parts[0][port]} for port in parts[0]}


async def _run(bench, chunks, *, random_packing=False, cycles_per_beat=30):
    lanes = bench.params["lanes"]
    streams, by_chunk = chunk_streams(chunks, lanes, bench.rng, random_packing=random_packing)
    expected = _expected(bench, streams, by_chunk)
    await bench.start()
    for port, fields in streams.items():
        bench.send(port, fields)
    beats = len(expected["x"])
    await bench.wait_for("o", beats, max_cycles=cycles_per_beat * beats + 200)
    bench.check("o", expected)
    for port in streams:
        assert bench.drivers[port].idle, f"{port}: beats left unconsumed"
    return beats


@cocotb.test()
@cocotb.parametrize(density=DENSITIES)
async def random_chunks_backpressure(dut, density):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.7,
                  seed_offset=int(density * 1000) + 1)
    count = int(os.environ.get("QLLM_CHUNKS", 2000))
    chunks = encode_chunks(bench.rng, count, density, **_params(bench))
    beats = await _run(bench, chunks)
    assert int(dut.coo_error.value) == 0, "coo_error set by well-formed chunks"
    outliers = sum(len(c.coo) for _t, c, _e in chunks)
    dut._log.info("density %.2f: %d chunks, %d beats, %d outliers", density, count, beats,
                  outliers)
    record_metrics(f"random_chunks_backpressure[{density}]", chunks=count, beats=beats,
                   outliers=outliers)


@cocotb.test()
async def random_coo_packing(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.8, seed_offset=77)
    count = max(1, int(os.environ.get("QLLM_CHUNKS", 2000)) // 4)
    chunks = []
    for k in range(count):
        chunks += encode_chunks(bench.rng, 1, DENSITIES[k % len(DENSITIES)], **_params(bench))
    await _run(bench, chunks, random_packing=True, cycles_per_beat=60)
    assert int(dut.coo_error.value) == 0, "coo_error set by well-formed chunks"


@cocotb.test()
@cocotb.parametrize(density=DENSITIES)
async def sustained_rate(dut, density):
    bench = Bench(dut, seed_offset=int(density * 1000) + 500)
    count = max(8, int(os.environ.get("QLLM_CHUNKS", 2000)) // 20)
    chunks = encode_chunks(bench.rng, count, density, **_params(bench))
    random_packing = os.environ.get("QLLM_COO_PACKING", "full") == "random"
    beats = await _run(bench, chunks, random_packing=random_packing)
    cycles = bench.monitors["o"].transfer_cycles
    span = cycles[-1] - cycles[0] + 1
    rate = beats / span
    dut._log.info("density %.2f: %d beats in %d cycles: %.3f beats/cycle, first beat at "
                  "cycle %d", density, beats, span, rate, cycles[0])
    record_metrics(f"sustained_rate[{density}]", beats=beats, cycles=span,
                   beats_per_cycle=rate, first_beat_cycle=cycles[0])
    assert random_packing or span == beats, (
        f"density {density}: {beats} beats took {span} cycles; full COO packing must sustain "
        f"one beat per cycle")


def _malformed(rng, chunk, vec_len):
    """A copy of ``chunk``'s COO entries made ill-formed in one of three ways."""
    index, outer, sign = unpack_coo(chunk.coo)
    kind = rng.integers(0, 3 if vec_len < 64 else 2)
    if kind == 0 or index.size < 2:          # duplicate an entry (not increasing)
        k = rng.integers(0, max(1, index.size)) if index.size else 0
        if index.size:
            index = np.insert(index, k, index[k])
            outer = np.insert(outer, k, outer[k])
            sign = np.insert(sign, k, sign[k])
        else:
            index, outer, sign = np.array([3, 3]), np.array([0, 1]), np.array([1, 0])
            index %= vec_len
    elif kind == 1:                             # swap two neighbours (out of order)
        k = rng.integers(0, index.size - 1)
        index[[k, k + 1]] = index[[k + 1, k]]
    else:                                       # an index at or beyond vec_len
        index = np.append(index, rng.integers(vec_len, 64))
        outer = np.append(outer, 1)
        sign = np.append(sign, 0)
    return chunk._replace(coo=pack_coo(index, outer, sign))


@cocotb.test()
async def malformed_coo(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.8, seed_offset=99)
    p = _params(bench)
    lanes, vec_len = bench.params["lanes"], p["vec_len"]
    windows = vec_len // lanes
    good_before = encode_chunks(bench.rng, 20, 0.5, **p)
    bad = [(t, _malformed(bench.rng, c, vec_len), e)
           for t, c, e in encode_chunks(bench.rng, 20, 0.5, **p)]
    good_after = encode_chunks(bench.rng, 20, 0.1, **p)
    before, before_x = chunk_streams(good_before, lanes, bench.rng, random_packing=True)
    malformed, _ = chunk_streams(bad, lanes, bench.rng, random_packing=True)
    after, after_x = chunk_streams(good_after, lanes, bench.rng, random_packing=True)
    # The malformed chunks' values are unspecified: placeholders, not compared.
    expected = {"x": np.concatenate([_expected(bench, before, before_x)["x"],
                                     np.zeros((len(bad) * windows, lanes), np.int64),
                                     _expected(bench, after, after_x)["x"]])}
    await bench.start()
    # Well-formed first: coo_error stays low.
    split = len(good_before) * windows
    for port, fields in before.items():
        bench.send(port, fields)
    await bench.wait_for("o", split, max_cycles=60 * split + 200)
    assert int(dut.coo_error.value) == 0, "coo_error set by well-formed chunks"
    # Then the malformed chunks and more well-formed ones.
    for port, fields in _concat_streams(malformed, after).items():
        bench.send(port, fields)
    total = len(expected["x"])
    await bench.wait_for("o", total, max_cycles=60 * total + 200)
    assert int(dut.coo_error.value) == 1, "malformed COO entries did not set coo_error"
    got = bench.received("o")["x"]
    assert len(got) == total, f"{len(got)} beats for {total} expected"
    bad_beats = slice(split, split + len(bad) * windows)
    keep = np.ones(total, bool)
    keep[bad_beats] = False
    compare_fields("o", {"x": np.asarray(got)[keep]}, {"x": expected["x"][keep]})
    for port in before:
        assert bench.drivers[port].idle, f"{port}: beats left unconsumed"
