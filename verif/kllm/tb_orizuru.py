"""cocotb test bench for ``orizuru`` (and its baselines ``orizuru_scan``, ``orizuru_sortnet``)
against their golden adapter :data:`golden.kllm.beats.orizuru`
(:func:`golden.kllm.orizuru.orizuru_beats`).

Tests
-----
directed_vectors
    All equal, two values only, +0/-0, +-inf, NaNs of both signs and several payloads,
    subnormals, ascending and descending ramps; every output beat compared.
random_vectors_backpressure
    ``QLLM_VECTORS`` (default 1,000) vectors back to back: float16 normal, heavy-tailed with
    outliers, and raw random bit patterns (NaNs included), under random gaps on ``i.valid`` and
    ``o.ready``.
sustained_rate
    No backpressure: records cycles per vector (between first beats of consecutive vectors)
    and checks it against the manifest's ``results_per_cycle`` (k for the unrolled circuit and
    the baselines; see :func:`hdl.kllm.orizuru.orizuru.cycles_per_vector` for the time-multiplexed trees),
    and that the first beat leaves the manifest's ``latency``
    cycles after the first vector (its last input beat, when n > 1024 takes several) (the only place the bench uses the latency; the other tests
    pass at every ``pipeline`` depth whatever it is).
"""

import os

import cocotb
import numpy as np

from qllm_cores.golden.kllm.orizuru import beat_lanes
from qllm_cores.verif.bench import Bench, record_metrics

POS_ZERO, NEG_ZERO, POS_INF, NEG_INF = 0x0000, 0x8000, 0x7C00, 0xFC00


def directed(n, rng):
    lane = np.arange(n)
    vectors = [
        np.full(n, 0x3C00),                                   # all equal (1.0)
        np.where(lane % 2 == 0, 0x3C00, 0xBC00),              # two values only
        np.where(lane % 2 == 0, POS_ZERO, NEG_ZERO),          # +0 / -0
        np.where(lane % 3 == 0, POS_INF, np.where(lane % 3 == 1, NEG_INF, 0x3C00)),
        rng.choice([0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7FFF, 0xFFFF, 0x3C00], n),  # NaNs
        rng.integers(0x0001, 0x0400, n) | (rng.integers(0, 2, n) << 15),  # subnormals
        lane.astype(np.float16).view(np.uint16),              # ascending
        (-lane).astype(np.float16).view(np.uint16),           # descending
    ]
    return np.array(vectors, dtype=np.int64) & 0xFFFF


def random_vectors(count, n, rng):
    kinds = rng.integers(0, 3, count)
    normal = rng.standard_normal((count, n)).astype(np.float16).view(np.uint16)
    heavy = (rng.standard_normal((count, n)) * np.exp(2 * rng.standard_normal((count, n))))
    heavy = np.clip(heavy, -65000, 65000).astype(np.float16).view(np.uint16)
    raw = rng.integers(0, 1 << 16, (count, n))
    return np.where(kinds[:, None] == 0, normal, np.where(kinds[:, None] == 1, heavy, raw)
                    ).astype(np.int64)


def _lanes(bench):
    """Values per input beat (the manifest's ``x`` length, the golden beat width)."""
    fields = bench.manifest["ports"]["i"]["payload"]["fields"]
    lanes = next(field for field in fields if field["name"] == "x")["shape"]["length"]
    assert lanes == beat_lanes(bench.params["n"]), (
        f"{lanes} values per beat, contract 3's beat width is {beat_lanes(bench.params['n'])}")
    return lanes


async def run(bench, xs):
    k = bench.params["k"]
    await bench.start()
    # A vector of n > 1024 values arrives as n / 1024 beats (lane j of beat b: 1024 b + j).
    inputs = {"x": xs.reshape(-1, _lanes(bench))}
    bench.send("i", inputs)
    expected = bench.expected({"i": inputs})["o"]
    await bench.wait_for("o", len(xs) * k, max_cycles=40 * len(xs) * (k + 2) + 200)
    bench.check("o", expected)


@cocotb.test()
async def directed_vectors(dut):
    bench = Bench(dut)
    await run(bench, directed(bench.params["n"], bench.rng))


@cocotb.test()
async def random_vectors_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    count = int(os.environ.get("QLLM_VECTORS", 1000))
    await run(bench, random_vectors(count, bench.params["n"], bench.rng))
    record_metrics("random_vectors_backpressure", vectors=count,
                   beats=count * bench.params["k"], seconds=bench.wall_seconds,
                   beats_per_second=count * bench.params["k"] / bench.wall_seconds)


@cocotb.test()
async def sustained_rate(dut):
    bench = Bench(dut, seed_offset=2)
    n, k = bench.params["n"], bench.params["k"]
    count = int(os.environ.get("QLLM_RATE_VECTORS", 64))
    await run(bench, random_vectors(count, n, bench.rng))
    inputs = bench.drivers["i"].transfer_cycles
    outputs = bench.monitors["o"].transfer_cycles
    per_vector = (outputs[(count - 1) * k] - outputs[0]) / (count - 1)
    beats = n // _lanes(bench)
    # Latency counts from the vector's last input beat.
    first_latency = outputs[0] - inputs[beats - 1]
    expected = 1 / bench.manifest["results_per_cycle"]
    assert abs(per_vector - expected) < 1e-6, (
        f"{per_vector} cycles per vector back to back, expected {expected}")
    assert first_latency == bench.latency, f"first beat {first_latency} cycles after input"
    record_metrics("sustained_rate", vectors=count, n=n, k=k, cycles_per_vector=per_vector,
                   latency=first_latency)
