"""cocotb test bench for ``oaken_quantizer``, and the quantizer -> dequantizer round trip.

The expected output beats come from the unit's golden adapter
:data:`golden.oaken.beats.oaken_quantizer` (:func:`golden.oaken.online.quantize_vector` per chunk,
COO beats packed full); every bench also checks the adapter's beats against ``quantize_vector``
directly (header, codes, and the COO entries read back from the beats).

Tests (on ``oaken_quantizer``)
------------------------------
random_chunks_backpressure(density)
    ``QLLM_CHUNKS`` (default 2,000) back-to-back random chunks at 0 %, 1 %, 10 %, 50 % or
    100 % outliers, each with its own random thresholds (equal thresholds and empty groups
    included), drawn by :mod:`verif.oaken.chunks` (the dequantizer bench's generators); random
    gaps on ``i.valid`` and on ``hdr``, ``dense`` and ``coo`` ready; every output beat
    compared, in order. ``threshold_error`` must stay low. With ``QLLM_ROUND_TRIP`` (a
    folder) the captured output beats and the golden round trip are saved there for
    ``round_trip_decode``.
sustained_rate(density)
    No backpressure: the input must take one beat per cycle (every input beat transfers in
    consecutive cycles) at every density, ``dense`` leaves one beat per cycle, and the first
    ``dense`` beat is valid ``latency`` cycles after the first chunk's last input beat.
    Records ``beats_per_cycle``.
threshold_faults
    Well-formed chunks, then chunks whose first beat has misordered thresholds and chunks
    whose later beats carry other thresholds, then well-formed chunks, under backpressure:
    ``threshold_error`` stays low through the first part and is high at the end; every chunk
    leaves as one ``hdr``, ``vec_len / lanes`` ``dense`` beats and a COO run; the faulty chunks
    follow the documented rule (the first beat's thresholds, the decomposer's priority order)
    and the well-formed chunks before and after them are bit-exact with ``quantize_vector``.
corner_chunks
    Directed chunks: all values equal, the data range's ends, every group empty in turn,
    all outliers, spans whose code boundaries ``30 (v - min) = (2k - 1) span`` are hit
    exactly, the widest spans (misordered thresholds included).

Test on ``oaken_dequantizer`` (run with ``QLLM_ROUND_TRIP_DECODE``)
------------------------------------------------------------------
round_trip_decode
    Drives the beats that ``random_chunks_backpressure`` captured from the quantizer RTL into
    the dequantizer RTL under random backpressure and compares its output with
    ``dequantize_vector(quantize_vector(x))``. :func:`round_trip` runs both halves
    (``python -m qllm_cores.verif.oaken.tb_quantizer`` runs it at 2,000 chunks per density).
"""

import os
from pathlib import Path

import cocotb
import numpy as np

from qllm_cores.golden.oaken import dequantize_vector, quantize_vector, unpack_coo
from qllm_cores.verif.bench import Bench, compare_fields, record_metrics
from qllm_cores.verif.oaken.chunks import random_chunk_values, random_thresholds

DENSITIES = [0.0, 0.01, 0.10, 0.50, 1.0]
NAMES = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")
META = ("mid_min", "mid_d", "in_min", "in_d", "out_min", "out_d")
ROUND_TRIP = os.environ.get("QLLM_ROUND_TRIP")
DECODE = os.environ.get("QLLM_ROUND_TRIP_DECODE")


def _params(bench):
    p = bench.params
    return p["lanes"], p["vec_len"], p["data_bits"], p["frac_bits"]


def random_chunks(rng, count, density, *, vec_len, data_bits):
    """``count`` chunks ``(x, thresholds)`` from the dequantizer bench's generators."""
    chunks = []
    for _ in range(count):
        thresholds = random_thresholds(rng, data_bits, need_middle=density == 0)
        chunks.append((random_chunk_values(rng, thresholds, density, vec_len, data_bits),
                       thresholds))
    return chunks


def input_fields(chunks, lanes):
    """The ``i`` beats of ``chunks``: ``(x, thresholds)`` with one threshold tuple per chunk
    or one row of four per beat."""
    xs, ts = [], []
    for x, thresholds in chunks:
        x = np.asarray(x, np.int64).reshape(-1, lanes)
        t = np.asarray(thresholds, np.int64)
        xs.append(x)
        ts.append(np.broadcast_to(t, (len(x), 4)) if t.ndim == 1 else t)
    x, t = np.concatenate(xs), np.concatenate(ts)
    return {"x": x, **{name: t[:, k] for k, name in enumerate(NAMES)}}


def check_adapter(expected, chunks, bench, *, ordered=None):
    """Check the adapter's beats against ``quantize_vector`` for the chunks whose index is in
    ``ordered`` (default: all): header, codes, and the COO entries of each chunk's run (every
    beat full but the last)."""
    lanes, vec_len, data_bits, frac_bits = _params(bench)
    windows = vec_len // lanes
    count = np.asarray(expected["coo"]["count"])
    ends = np.flatnonzero(np.asarray(expected["coo"]["last"])) + 1
    assert len(ends) == len(chunks), "one COO run per chunk"
    starts = np.concatenate(([0], ends[:-1]))
    for c, (x, thresholds) in enumerate(chunks):
        if ordered is not None and c not in ordered:
            continue
        thresholds = tuple(int(v) for v in np.asarray(thresholds).reshape(-1, 4)[0])
        chunk = quantize_vector(np.asarray(x).ravel(), thresholds, frac_bits, data_bits, vec_len)
        for name, value in zip(NAMES + META, thresholds + tuple(chunk.meta)):
            assert expected["hdr"][name][c] == value, (c, name)
        np.testing.assert_array_equal(
            np.asarray(expected["dense"]["codes"])[c * windows:(c + 1) * windows].ravel(),
            chunk.dense)
        run = range(starts[c], ends[c])
        assert all(count[b] == lanes for b in run[:-1]), "COO beats packed full"
        entries = [np.asarray(expected["coo"]["entries"][b])[:count[b]] for b in run]
        np.testing.assert_array_equal(np.concatenate(entries), chunk.coo)


async def _run(bench, chunks, *, cycles_per_beat=20):
    """Send ``chunks``, wait for every output beat, compare; return the expected beats."""
    lanes = bench.params["lanes"]
    inputs = {"i": input_fields(chunks, lanes)}
    expected = bench.expected(inputs)
    await bench.start()
    sent = bench.send("i", inputs["i"])
    for port in ("hdr", "dense", "coo"):
        beats = len(next(iter(expected[port].values())))
        await bench.wait_for(port, beats, max_cycles=cycles_per_beat * (sent + beats) + 500)
    for port in ("hdr", "dense", "coo"):
        bench.check(port, expected[port])
    assert bench.drivers["i"].idle, "input beats left unconsumed"
    return expected


@cocotb.test(skip=DECODE is not None)
@cocotb.parametrize(density=DENSITIES)
async def random_chunks_backpressure(dut, density):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.7,
                  seed_offset=int(density * 1000) + 1)
    lanes, vec_len, data_bits, frac_bits = _params(bench)
    count = int(os.environ.get("QLLM_CHUNKS", 2000))
    chunks = random_chunks(bench.rng, count, density, vec_len=vec_len, data_bits=data_bits)
    expected = bench.expected({"i": input_fields(chunks, lanes)})
    check_adapter(expected, chunks, bench)
    await _run(bench, chunks)
    assert int(dut.threshold_error.value) == 0, "threshold_error set by well-formed chunks"
    outliers = int(np.asarray(expected["coo"]["count"]).sum())
    dut._log.info("density %.2f: %d chunks, %d outliers", density, count, outliers)
    record_metrics(f"random_chunks_backpressure[{density}]", chunks=count,
                   beats=count * vec_len // lanes, outliers=outliers,
                   coo_beats=len(expected["coo"]["count"]))
    if ROUND_TRIP:
        # The quantizer RTL's beats (as received) and the golden round trip, for the decoder.
        received = {port: bench.received(port) for port in ("hdr", "dense", "coo")}
        x_round = [dequantize_vector(*_golden_chunk(x, t, frac_bits, data_bits, vec_len), t,
                                     frac_bits, data_bits) for x, t in chunks]
        flat = {f"{port}.{name}": np.asarray(value, np.int64)
                for port, fields in received.items() for name, value in fields.items()}
        np.savez(Path(ROUND_TRIP) / f"round_trip_{density}.npz", x=np.concatenate(x_round),
                 **flat)


def _golden_chunk(x, thresholds, frac_bits, data_bits, vec_len):
    chunk = quantize_vector(x, thresholds, frac_bits, data_bits, vec_len)
    return chunk.dense, chunk.coo, chunk.meta


@cocotb.test(skip=DECODE is not None)
@cocotb.parametrize(density=DENSITIES)
async def sustained_rate(dut, density):
    bench = Bench(dut, seed_offset=int(density * 1000) + 500)
    lanes, vec_len, data_bits, _ = _params(bench)
    windows = vec_len // lanes
    count = max(50, int(os.environ.get("QLLM_CHUNKS", 2000)) // 20)
    chunks = random_chunks(bench.rng, count, density, vec_len=vec_len, data_bits=data_bits)
    await _run(bench, chunks)
    taken = bench.drivers["i"].transfer_cycles
    beats = len(taken)
    span = taken[-1] - taken[0] + 1
    rate = beats / span
    dense = bench.monitors["dense"].transfer_cycles
    first_dense = dense[0] - taken[windows - 1]
    dut._log.info("density %.2f: %d input beats in %d cycles: %.3f beats/cycle; first dense "
                  "beat %d cycles after the first chunk's last beat", density, beats, span,
                  rate, first_dense)
    record_metrics(f"sustained_rate[{density}]", beats=beats, cycles=span,
                   beats_per_cycle=rate, latency=first_dense)
    assert span == beats, (f"density {density}: {beats} input beats took {span} cycles; the "
                           f"unit must take one beat per cycle")
    assert dense[-1] - dense[0] + 1 == len(dense), "dense beats must leave one per cycle"
    assert first_dense == bench.latency, (
        f"first dense beat {first_dense} cycles after the first chunk's last beat; the "
        f"manifest's latency is {bench.latency}")


def _fault_chunks(rng, count, *, lanes, vec_len, data_bits):
    """Chunks ``(x, per-beat thresholds)``, alternating: misordered thresholds on the first
    beat (later beats: anything, ignored), and ordered ones whose later beats differ."""
    windows = vec_len // lanes
    chunks = []
    for k in range(count):
        thresholds = random_thresholds(rng, data_bits)
        x = random_chunk_values(rng, thresholds, 0.3, vec_len, data_bits)
        per_beat = np.tile(np.asarray(thresholds, np.int64), (windows, 1))
        if k % 2 == 0 or windows == 1:
            while per_beat[0, 0] == per_beat[0, 3]:
                per_beat[0] = random_thresholds(rng, data_bits)
            per_beat[0] = per_beat[0, ::-1]                  # t_lo_o > t_hi_o: misordered
            for beat in range(1, windows):
                per_beat[beat] = rng.permuted(per_beat[0])
        else:
            for beat in range(1, windows):
                per_beat[beat] = random_thresholds(rng, data_bits)
            if (per_beat[1] == per_beat[0]).all():             # make beat 1 differ
                per_beat[1, 0] += 1 if per_beat[1, 0] < (1 << (data_bits - 1)) - 1 else -1
        chunks.append((x, per_beat))
    return chunks


@cocotb.test(skip=DECODE is not None)
async def threshold_faults(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.8, seed_offset=99)
    lanes, vec_len, data_bits, _ = _params(bench)
    before = random_chunks(bench.rng, 30, 0.3, vec_len=vec_len, data_bits=data_bits)
    faulty = _fault_chunks(bench.rng, 30, lanes=lanes, vec_len=vec_len, data_bits=data_bits)
    after = random_chunks(bench.rng, 30, 0.1, vec_len=vec_len, data_bits=data_bits)
    chunks = before + faulty + after
    expected = bench.expected({"i": input_fields(chunks, lanes)})
    good = set(range(len(before))) | set(range(len(before) + len(faulty), len(chunks)))
    check_adapter(expected, chunks, bench, ordered=good)
    await bench.start()
    # Well-formed first: threshold_error stays low.
    bench.send("i", input_fields(before, lanes))
    windows = vec_len // lanes
    await bench.wait_for("dense", len(before) * windows, max_cycles=40 * len(before) * windows)
    assert int(dut.threshold_error.value) == 0, "threshold_error set by well-formed chunks"
    bench.send("i", input_fields(faulty + after, lanes))
    for port in ("hdr", "dense", "coo"):
        beats = len(next(iter(expected[port].values())))
        await bench.wait_for(port, beats, max_cycles=40 * beats + 500)
        bench.check(port, expected[port])
    assert int(dut.threshold_error.value) == 1, "faulty thresholds did not set threshold_error"
    assert bench.drivers["i"].idle


def corner_chunks(lanes, vec_len, data_bits, rng):
    """Directed chunks ``(x, thresholds)``: equal values, range ends, empty groups, all
    outliers, exact code boundaries, widest spans."""
    lo, hi = -(1 << (data_bits - 1)), (1 << (data_bits - 1)) - 1
    quarter = max(1, hi // 4)

    def fit(values):
        return np.resize(np.clip(np.asarray(values, np.int64), lo, hi), vec_len)

    def ordered(*t):
        return tuple(sorted(int(np.clip(v, lo, hi)) for v in t))

    wide = ordered(-2 * quarter, -quarter, quarter, 2 * quarter)
    chunks = [
        (fit([0]), wide),                                   # all equal, inner
        (fit([hi]), wide), (fit([lo]), wide),               # all equal, outer
        (fit([quarter + 1]), wide),                         # all equal, middle
        (fit([lo, hi]), wide),                              # the range's ends
        (fit(rng.integers(lo, hi + 1, vec_len)), ordered(lo, lo, hi, hi)),   # all inner
        (fit(rng.integers(lo, hi + 1, vec_len)), ordered(0, 0, 0, 0)),       # all outer
        (fit(rng.integers(lo, hi + 1, vec_len)), ordered(lo, -1, 0, hi)),    # no outer
        (fit(rng.integers(lo, hi + 1, vec_len)), ordered(-1, -1, 0, 0)),     # no middle
        (fit([lo, hi, lo + 1, hi - 1]), ordered(lo + 1, lo + 1, hi - 1, hi - 1)),
        # Widest middle span: both middle sides at the range's ends.
        (fit([lo, hi, 0, lo + 1, hi - 1]), ordered(lo, 0, 0, hi)),
        # Widest spans of all: misordered thresholds (the decomposer's priority order).
        (fit([lo, hi, 0, -1, 1]), (hi, lo, hi, lo)),
        (fit([lo, hi, 0, lo + 1, hi - 1]), (0, hi, lo, 0)),
    ]
    # Exact code boundaries: middle (upper side) values min + u with 30 u = (2k - 1) span.
    for span in (30, 2, 6, 10, 60):
        if span + 2 > hi:
            continue
        base = 1
        values = [base + u for u in range(span + 1) if (30 * u) % span == 0] + [base,
                                                                                  base + span]
        chunks.append((fit(values), ordered(-1, 0, 0, base + span + 1)))
    return chunks


@cocotb.test(skip=DECODE is not None)
async def corner_chunks_test(dut):
    bench = Bench(dut, valid_probability=0.9, ready_probability=0.9, seed_offset=7)
    lanes, vec_len, data_bits, _ = _params(bench)
    chunks = corner_chunks(lanes, vec_len, data_bits, bench.rng)
    expected = bench.expected({"i": input_fields(chunks, lanes)})
    misordered = {c for c, (_x, t) in enumerate(chunks) if list(t) != sorted(t)}
    check_adapter(expected, chunks, bench, ordered=set(range(len(chunks))) - misordered)
    await _run(bench, chunks)
    assert int(dut.threshold_error.value) == (1 if misordered else 0)


@cocotb.test(skip=DECODE is None)
async def round_trip_decode(dut):
    """On ``oaken_dequantizer``: the quantizer's captured beats decode to the golden round
    trip."""
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.7, seed_offset=3)
    folder = Path(DECODE)
    files = sorted(folder.glob("round_trip_*.npz"))
    assert files, f"no round_trip_*.npz in {folder}"
    streams = {"hdr": {}, "dense": {}, "coo": {}}
    want = []
    for path in files:
        with np.load(path) as saved:
            want.append(saved["x"])
            for key in saved.files:
                if key == "x":
                    continue
                port, name = key.split(".")
                streams[port].setdefault(name, []).append(saved[key])
    streams = {port: {name: np.concatenate(parts) for name, parts in fields.items()}
               for port, fields in streams.items()}
    lanes = bench.params["lanes"]
    want = np.concatenate(want).reshape(-1, lanes)
    await bench.start()
    for port, fields in streams.items():
        bench.send(port, fields)
    await bench.wait_for("o", len(want), max_cycles=30 * len(want) + 500)
    compare_fields("o", bench.received("o"), {"x": want})
    assert int(dut.coo_error.value) == 0, "coo_error: the quantizer's COO stream is malformed"
    for port in streams:
        assert bench.drivers[port].idle, f"{port}: beats left unconsumed"
    # Every COO run is packed full (what keeps the dequantizer at one beat per cycle).
    count, last = streams["coo"]["count"], streams["coo"]["last"]
    assert ((count == lanes) | (last == 1)).all()
    record_metrics("round_trip_decode", chunks=len(want) * lanes // bench.params["vec_len"],
                   beats=len(want), files=len(files))


def round_trip(chunks=2000, params=None, *, seed=None):
    """Quantizer RTL -> dequantizer RTL on ``chunks`` random chunks per density (0 / 1 / 10 /
    50 / 100 % outliers) under random backpressure on every stream; both halves compared with
    the golden model (the encoding with ``quantize_vector``, the decode with
    ``dequantize_vector`` of it). ``params``: the shared parameters (``lanes``, ``vec_len``,
    ``data_bits``, ``frac_bits``) of both units. Returns the decode's metrics."""
    import tempfile

    from qllm_cores.verif.runner import BUILD, run_testbench

    params = dict(params or {})
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as folder:
        run_testbench("oaken_quantizer", params, test_filter=r"\.random_chunks_backpressure/",
                      seed=seed, name="round-trip-encode",
                      extra_env={"QLLM_CHUNKS": chunks, "QLLM_ROUND_TRIP": folder})
        shared = {key: value for key, value in params.items() if key != "pipeline"}
        return run_testbench("oaken_dequantizer", shared, seed=seed, name="round-trip-decode",
                             test_module="qllm_cores.verif.oaken.tb_quantizer",
                             testcase="round_trip_decode",
                             extra_env={"QLLM_ROUND_TRIP_DECODE": folder})


if __name__ == "__main__":
    import sys

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    metrics = round_trip(count)
    print(f"round trip: {metrics['round_trip_decode']['chunks']} chunks "
          f"({count} per density) decoded bit-exactly")
