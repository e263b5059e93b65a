"""cocotb test bench for ``accllm_pe`` (contract section 10).

Every output beat (``s1``, ``s2``, ``overflow``) is compared bit for bit with the golden adapter
:data:`golden.accllm.beats.accllm_pe` (:func:`golden.accllm.pe.pe_run`); the stream monitor checks
the transfer rules on every cycle.

Tests
-----
random_dot_products
    ``QLLM_DOTS`` (default 10,000) dot products of the adapter's stimulus (random modes per beat,
    KV4 codes and zero points, random bits above the w4 / w2 weights, carried-on dot products,
    runs of extreme products towards the accumulator limit) with random gaps on ``i.valid``
    (0.7) and ``o.ready`` (0.6).
exhaustive_single_products
    Single-beat dot products (``first`` = ``last`` = 1), every mode interleaved in a random order
    (the mode changes on almost every beat) and sent back to back with ``o.ready`` high: the unit
    must take one beat per cycle (a refused beat fails). w8: every (x1, w1) and every (x1, w2);
    w4: every (x1, w1, w2) of 4-bit weights (random bits above); w4 KV4: every (x1, q1, zp) and
    (x1, q2, zp); w2: every (x1, x2, w1, w2) -- for 8-bit X the B-port overflow of contract 6 is
    among them. ``QLLM_EXHAUSTIVE=small`` keeps w2 to every (x1, x2) corner x (w1, w2).
mode_changes
    Dot products whose beats cycle through w8, w4, w4 KV4 and w2 (and random orders), back to
    back at full rate and again under backpressure: each beat adds its own mode's products.
kv4_zero_points
    Mode w4 KV4 with ``zp`` = 0 and 15 (the weight range ends -15 and +15), long dot products of
    the extreme codes, and every code against every zero point.
w2_extremes
    Mode w2 with activations at the ends of their range (x2 = -128 with x1 < 0 for signed X,
    x2 >= 128 for unsigned X: the B-port overflow), in dot products of 1..64 beats.
overflow
    At the accumulator limit, per sum and sign: a dot product of the largest count of the most
    extreme product that stays in range (exact sums, ``overflow`` 0), one beat longer
    (``overflow`` 1), a dot product that carries on without ``first`` (still 1) and one with
    ``first`` (0 again). Patterns are taken while the beats stay within ``QLLM_OVERFLOW_BEATS``
    (default 600,000; the two signs of a 32-bit accumulator need about 530,000).
"""

import os

import cocotb
import numpy as np

from qllm_cores.golden.accllm import pe_products
from qllm_cores.verif.bench import Bench, compare_fields, record_metrics

FIELDS = ("mode", "x1", "x2", "w1", "w2", "kv4", "zp", "first", "last")


def x_range(params):
    if params["x_signed"]:
        return -(1 << (params["x_bits"] - 1)), (1 << (params["x_bits"] - 1)) - 1
    return 0, (1 << params["x_bits"]) - 1


def beats_of(**fields):
    """A field dict of equal-length int64 arrays (scalars broadcast); ``w1``, ``w2`` may be
    given as any 8-bit pattern (0..255 too): they are read back as the signed field."""
    n = max(np.size(value) for value in fields.values())
    out = {name: np.broadcast_to(np.asarray(fields.get(name, 0), np.int64), (n,)).copy()
           for name in FIELDS}
    for name in ("w1", "w2"):
        out[name] = ((out[name] + 128) & 0xFF) - 128
    return out


def join(*parts):
    return {name: np.concatenate([part[name] for part in parts]) for name in FIELDS}


def single(fields):
    """Every beat its own dot product."""
    fields["first"][:] = 1
    fields["last"][:] = 1
    return fields


def dot(fields, first=1):
    """All beats one dot product (``first`` on the first beat unless ``first`` = 0)."""
    fields["first"][:] = 0
    fields["last"][:] = 0
    fields["first"][0] = first
    fields["last"][-1] = 1
    return fields


async def run_full_rate(bench, fields, label):
    """Send ``fields`` back to back with ``o.ready`` high, check every output beat and that
    no beat was refused; return the cycles taken."""
    expected = bench.expected({"i": fields})["o"]
    count = len(expected["s1"])
    beats = len(fields["mode"])
    got = await bench.full_rate("i", fields, "o", count, max_cycles=beats + 100)
    compare_fields("o", got, expected)
    cycles = bench.full_rate_cycles
    # One beat per cycle: the final result leaves `latency` cycles after the final beat.
    assert cycles <= beats + bench.latency + 1, (label, cycles, beats)
    return cycles


async def run_backpressure(bench, fields):
    expected = bench.expected({"i": fields})["o"]
    bench.send("i", fields)
    count = len(expected["s1"])
    await bench.wait_for("o", count, max_cycles=20 * len(fields["mode"]) + 200)
    bench.check("o", expected)
    assert bench.drivers["i"].idle, "beats left unconsumed"
    return expected


@cocotb.test()
async def random_dot_products(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    dots = int(os.environ.get("QLLM_DOTS", 10_000))
    fields = bench.golden.stimulus(bench.rng, bench.params, dots)["i"]
    await bench.start()
    expected = await run_backpressure(bench, fields)
    modes = np.asarray(fields["mode"])
    changes = int((modes[1:] != modes[:-1]).sum())
    record_metrics("random_dot_products", dots=dots, beats=len(modes), mode_changes=changes,
                   overflows=int(np.sum(expected["overflow"])))


def exhaustive_beats(params, rng, small):
    lo, hi = x_range(params)
    xs = np.arange(lo, hi + 1)
    parts = []
    # w8: (x1, w1) all pairs; w2 the same pairs in another order (every (x1, w2) too).
    x, w = (v.ravel() for v in np.meshgrid(xs, np.arange(-128, 128), indexing="ij"))
    parts.append(beats_of(mode=0, x1=x, x2=rng.permutation(x), w1=w, w2=rng.permutation(w),
                          kv4=rng.integers(0, 2, x.size), zp=rng.integers(0, 16, x.size)))
    # w4: every (x1, w1, w2) of the low 4 bits, random bits above them.
    x, w1, w2 = (v.ravel() for v in np.meshgrid(xs, np.arange(16), np.arange(16),
                                                 indexing="ij"))
    high = rng.integers(0, 16, (2, x.size)) << 4
    parts.append(beats_of(mode=1, x1=x, x2=rng.permutation(x), w1=(w1 | high[0]) - 128,
                          w2=(w2 | high[1]) - 128, kv4=0, zp=rng.integers(0, 16, x.size)))
    # w4 KV4: every (x1, q1, zp), q2 the reverse code (every (x1, q2, zp) too).
    x, q, zp = (v.ravel() for v in np.meshgrid(xs, np.arange(16), np.arange(16),
                                                indexing="ij"))
    parts.append(beats_of(mode=1, x1=x, x2=rng.permutation(x), w1=q | high[0],
                          w2=(15 - q) | high[1], kv4=1, zp=zp))
    # w2: every (x1, x2, w1, w2), or the corners of x at small size.
    if small:
        corners = np.unique([lo, lo + 1, -1 if lo else 1, 0, hi, hi - 1, (lo + hi) // 2])
        xs = corners[(corners >= lo) & (corners <= hi)]
    x1, x2, w1, w2 = (v.ravel() for v in np.meshgrid(xs, xs, np.arange(4), np.arange(4),
                                                     indexing="ij"))
    high = rng.integers(0, 64, (2, x1.size)) << 2
    parts.append(beats_of(mode=2, x1=x1, x2=x2, w1=(w1 | high[0]) - 128,
                          w2=(w2 | high[1]) - 128, kv4=rng.integers(0, 2, x1.size),
                          zp=rng.integers(0, 16, x1.size)))
    fields = join(*parts)
    order = rng.permutation(len(fields["mode"]))       # modes interleaved
    return single({name: value[order] for name, value in fields.items()})


#: Beats per full-rate burst (bounds the memory of the received words).
CHUNK = 1 << 18


@cocotb.test()
async def exhaustive_single_products(dut):
    bench = Bench(dut, seed_offset=2)
    small = os.environ.get("QLLM_EXHAUSTIVE") == "small"
    fields = exhaustive_beats(bench.params, bench.rng, small)
    n = len(fields["mode"])
    await bench.start(streams=False)
    cycles = 0
    for start in range(0, n, CHUNK):
        chunk = {name: value[start:start + CHUNK] for name, value in fields.items()}
        cycles += await run_full_rate(bench, chunk, "exhaustive")
    modes = fields["mode"]
    record_metrics("exhaustive_single_products", beats=n, cycles=cycles,
                   mode_changes=int((modes[1:] != modes[:-1]).sum()),
                   w2_beats=int((modes == 2).sum()))


def cycling_modes(params, rng, dots, length):
    """Dot products whose beats cycle w8, w4, w4 KV4, w2 (then random modes)."""
    lo, hi = x_range(params)
    parts = []
    for k in range(dots):
        n = length if k % 2 == 0 else int(rng.integers(1, 2 * length))
        cycle = np.arange(n) % 4 if k % 3 else rng.integers(0, 4, n)
        part = beats_of(mode=np.where(cycle == 3, 2, np.minimum(cycle, 1)),
                        x1=rng.integers(lo, hi + 1, n), x2=rng.integers(lo, hi + 1, n),
                        w1=rng.integers(-128, 128, n), w2=rng.integers(-128, 128, n),
                        kv4=(cycle == 2).astype(int), zp=rng.integers(0, 16, n))
        parts.append(dot(part))
    return join(*parts)


@cocotb.test()
async def mode_changes(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.7, seed_offset=3)
    full = cycling_modes(bench.params, bench.rng, 300, 12)
    pressured = cycling_modes(bench.params, bench.rng, 300, 12)
    await bench.start(streams=False)
    cycles = await run_full_rate(bench, full, "mode_changes")
    for monitor in bench.monitors.values():     # now the streams with backpressure
        monitor.enabled = True
        cocotb.start_soon(monitor.run())
    for driver in bench.drivers.values():
        cocotb.start_soon(driver.run())
    await run_backpressure(bench, pressured)
    record_metrics("mode_changes", beats=len(full["mode"]) + len(pressured["mode"]),
                   full_rate_cycles=cycles)


@cocotb.test()
async def kv4_zero_points(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.7, seed_offset=4)
    lo, hi = x_range(bench.params)
    rng = bench.rng
    parts = []
    for zp in (0, 15):
        # Extreme codes (q - zp = +-15 or 0) in dot products of 1..200 beats.
        for _ in range(40):
            n = int(rng.integers(1, 201))
            q = rng.choice([0, 15], (2, n))
            parts.append(dot(beats_of(mode=1, kv4=1, zp=zp, x1=rng.choice([lo, hi], n),
                                      x2=rng.integers(lo, hi + 1, n),
                                      w1=q[0] | (rng.integers(0, 16, n) << 4),
                                      w2=q[1] | (rng.integers(0, 16, n) << 4))))
    q1, q2, zp = (v.ravel() for v in np.meshgrid(np.arange(16), np.arange(16), np.arange(16),
                                                 indexing="ij"))
    parts.append(single(beats_of(mode=1, kv4=1, zp=zp, w1=q1, w2=q2,
                                 x1=rng.choice([lo, hi, 1], q1.size), x2=0)))
    fields = join(*parts)
    await bench.start()
    await run_backpressure(bench, fields)
    record_metrics("kv4_zero_points", beats=len(fields["mode"]))


@cocotb.test()
async def w2_extremes(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.7, seed_offset=5)
    lo, hi = x_range(bench.params)
    rng = bench.rng
    corners = np.array([lo, lo + 1, hi - 1, hi, -1 if lo else 1])
    parts = []
    for _ in range(400):
        n = int(rng.integers(1, 65))
        parts.append(dot(beats_of(mode=2, x1=rng.choice(corners, n), x2=rng.choice(corners, n),
                                  w1=rng.integers(-128, 128, n), w2=rng.integers(-128, 128, n),
                                  kv4=rng.integers(0, 2, n), zp=rng.integers(0, 16, n))))
    fields = join(*parts)
    await bench.start()
    await run_backpressure(bench, fields)
    b = fields["x1"] + (fields["x2"] << 10)
    record_metrics("w2_extremes", beats=len(fields["mode"]),
                   b_port_overflows=int(((b < -(1 << 17)) | (b >= 1 << 17)).sum()))


def overflow_patterns(params):
    """``(name, beat, n_ok)``: the most extreme single beats for each sum and sign, with the
    largest beat count whose running sums stay in range."""
    lo, hi = x_range(params)
    acc_lo, acc_hi = -(1 << (params["acc_bits"] - 1)), (1 << (params["acc_bits"] - 1)) - 1
    candidates = [(x, w) for x in (lo, hi) for w in (-128, 127)]
    products = {(x, w): int(pe_products(0, x, x, w, w, 0, 0, params["x_bits"],
                                        params["x_signed"])[0]) for x, w in candidates}
    top = max(candidates, key=lambda c: products[c])
    bottom = min(candidates, key=lambda c: products[c])
    patterns = []
    for name, (x, w), which in (("s1 positive", top, "w1"), ("s2 negative", bottom, "w2"),
                                ("s1 negative", bottom, "w1"), ("s2 positive", top, "w2")):
        t = products[(x, w)]
        n_ok = acc_hi // t if t > 0 else -acc_lo // -t
        beat = beats_of(mode=0, x1=x, x2=0, **{which: w})
        patterns.append((name, beat, n_ok))
    return patterns


@cocotb.test()
async def overflow(dut):
    bench = Bench(dut, seed_offset=6)
    budget = int(os.environ.get("QLLM_OVERFLOW_BEATS", 600_000))
    await bench.start(streams=False)
    used = 0
    done = []
    for name, beat, n_ok in overflow_patterns(bench.params):
        if used + 2 * n_ok + 3 > budget:
            continue
        used += 2 * n_ok + 3
        repeat = {key: np.repeat(value, n_ok + 1) for key, value in beat.items()}
        inside = dot({key: value[:n_ok].copy() for key, value in repeat.items()})
        outside = dot({key: value.copy() for key, value in repeat.items()})
        carry = dot({key: value[:1].copy() for key, value in repeat.items()}, first=0)
        fresh = dot({key: value[:1].copy() for key, value in repeat.items()})
        fields = join(inside, outside, carry, fresh)
        expected = bench.expected({"i": fields})["o"]
        assert expected["overflow"].tolist() == [0, 1, 1, 0], (name, expected)
        await run_full_rate(bench, fields, name)
        done.append(name)
    assert done, f"no overflow pattern fits QLLM_OVERFLOW_BEATS={budget}"
    record_metrics("overflow", beats=used, patterns=done)
