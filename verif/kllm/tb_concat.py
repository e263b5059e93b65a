"""cocotb test bench for ``kllm_concat`` against its golden adapter
:data:`golden.kllm.beats.kllm_concat` (:func:`golden.kllm.concat.concat_indices`).

Tests
-----
corner_beats_full_rate
    Directed beats (all zeros, all ones, one operand at its maximum and the other zero, walking
    patterns, every lane different) with no backpressure: checks the values, that one beat is
    accepted every cycle, and that the first result appears ``latency`` cycles after its input.
random_beats_backpressure
    ``QLLM_BEATS`` (default 10,000) random beats with random gaps on ``i.valid`` and
    ``o.ready``: every output beat is compared in order with the golden model, so a lost,
    duplicated or reordered beat fails; the monitor checks the stream transfer rules.
"""

import os
import time

import cocotb
import numpy as np

from qllm_cores.verif.bench import Bench, record_metrics


def corner_operands(a_bits, b_bits, lanes):
    """Directed (a, b) beats: extremes, walking ones, and a distinct value in every lane."""
    a_max, b_max = (1 << a_bits) - 1, (1 << b_bits) - 1
    lane = np.arange(lanes)
    beats = [
        (np.zeros(lanes), np.zeros(lanes)),
        (np.full(lanes, a_max), np.full(lanes, b_max)),
        (np.full(lanes, a_max), np.zeros(lanes)),
        (np.zeros(lanes), np.full(lanes, b_max)),
        (lane % (a_max + 1), (lanes - 1 - lane) % (b_max + 1)),
        ((lane // (b_max + 1)) % (a_max + 1), lane % (b_max + 1)),
    ]
    beats += [(np.full(lanes, 1 << bit), np.zeros(lanes)) for bit in range(a_bits)]
    beats += [(np.zeros(lanes), np.full(lanes, 1 << bit)) for bit in range(b_bits)]
    a = np.array([beat[0] for beat in beats], dtype=np.int64)
    b = np.array([beat[1] for beat in beats], dtype=np.int64)
    return a, b


@cocotb.test()
async def corner_beats_full_rate(dut):
    bench = Bench(dut)
    p = bench.params
    a, b = corner_operands(p["a_bits"], p["b_bits"], p["lanes"])
    await bench.start()
    count = bench.send("i", {"a": a, "b": b})
    await bench.wait_for("o", count, max_cycles=count + 20)
    bench.check("o", bench.expected({"i": {"a": a, "b": b}})["o"])
    bench.check_full_rate("o", count)


@cocotb.test()
async def random_beats_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    p = bench.params
    beats = int(os.environ.get("QLLM_BEATS", 10_000))
    a = bench.rng.integers(0, 1 << p["a_bits"], size=(beats, p["lanes"]))
    b = bench.rng.integers(0, 1 << p["b_bits"], size=(beats, p["lanes"]))
    await bench.start()
    started = time.perf_counter()
    bench.send("i", {"a": a, "b": b})
    await bench.wait_for("o", beats, max_cycles=20 * beats + 100)
    bench.check("o", bench.expected({"i": {"a": a, "b": b}})["o"])
    elapsed = time.perf_counter() - started
    cycles = bench.monitors["o"].cycles
    dut._log.info("%d beats in %d cycles, %.2f s: %.0f beats/s", beats, cycles, elapsed,
                  beats / elapsed)
    record_metrics("random_beats_backpressure", beats=beats, cycles=cycles,
                   seconds=elapsed, beats_per_second=beats / elapsed)
