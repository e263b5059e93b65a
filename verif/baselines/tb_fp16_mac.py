"""cocotb test bench for ``fp16_mac`` against its golden adapter
:data:`golden.baselines.beats.fp16_mac` (:func:`golden.baselines.fp16_mac.fp16_mac_run`), in either
reading (the manifest's ``acc``: ``"fp32"``, binary32 accumulation, or ``"fp16"``, binary16
accumulation with the product rounded to binary16).

A stimulus is a dict of beat arrays ``a``, ``b`` (binary16 bit patterns), ``first`` and ``last``;
the expected output is the golden model's binary32 (binary16) pattern for every ``last`` beat.
Outputs are compared with the adapter's ``acc`` comparison,
:func:`golden.baselines.fp16_mac.fp32_match` (any binary32 NaN equals any NaN, all else bit for bit,
signs of zeros and infinities included; binary16 results bit for bit, the golden model giving the
canonical NaN), and every NaN the RTL emits must be the documented
:data:`golden.baselines.fp16_mac.CANONICAL_NAN`
(:data:`golden.baselines.fp16_mac.CANONICAL_NAN_FP16`).

Tests
-----
directed_special_cases
    :func:`directed_beats`: every pair of special and boundary operands (+-0, +-inf, quiet and
    signalling NaNs of both signs, binary16 subnormals, the smallest normal, 65504) as a single
    product and added to a second product; round-to-nearest-even ties built from the
    accumulator's exponent, both ways round and with a sticky bit either side; exact
    cancellation to +0; near cancellation (long normalization shifts); long accumulations of
    65504^2 and of 2^-48 with partial sums read out; an infinity carried along, turned into NaN
    by the opposite infinity and cleared by ``first``. Light backpressure. With ``acc="fp16"``
    also :func:`half_corners`: products rounded to binary16 across the whole range (ties of
    the product's rounding, subnormal products, products that round to zero or overflow to
    infinity), ties of the binary16 sum in both directions, the sum's overflow at 65520, the
    subnormal/normal boundary, cancellation into subnormals and to +0, -0 products added to
    +0 and to a nonzero accumulator, and long sums that stop growing (1.0 x 3000 stays at
    2048).
random_dot_products_backpressure
    ``QLLM_BEATS`` (default 100,000) beats in dot products of random lengths (1 to 2048), a
    tenth continuing the previous accumulator (no ``first``) and some partial sums (``last``
    inside a dot product); operands are a mix of random binary16 bit patterns, normally
    distributed values, values of magnitude 2^-26 .. 2^16, special values and near-cancelling
    pairs (with ``acc="fp16"`` magnitudes of 2^-14 .. 2^8 and normal values scaled by
    2^-6 .. 2^3, so that products and sums stay mostly in binary16's range, some of them
    subnormal or overflowing). Random gaps on ``i.valid`` (p = 0.7) and ``o.ready`` (p = 0.6).
full_rate_latency
    No backpressure: short dot products and a block with ``last`` on every beat. Checks that
    ``i`` accepts a beat every cycle and that each result leaves exactly ``latency`` cycles
    after its ``last`` beat (the manifest's ``latency``, which the unit's ``pipeline`` sets).

The results are checked in order and the streams by their valid/ready rules only: apart from
the latency check of ``full_rate_latency``, nothing depends on the unit's depth, and the bench
passes at every ``pipeline`` value.
"""

import os
import time

import cocotb
import numpy as np

from qllm_cores.golden.baselines.fp16_mac import (CANONICAL_NAN, CANONICAL_NAN_FP16, fp16_is_nan,
                                                  fp32_is_nan)
from qllm_cores.verif.bench import Bench, record_metrics

#: binary16 patterns at and around every class boundary.
SPECIAL_FP16 = [
    0x0000, 0x8000,                  # +0, -0
    0x7C00, 0xFC00,                  # +inf, -inf
    0x7E00, 0xFE00, 0x7C01, 0xFD55,  # quiet and signalling NaNs, both signs, several payloads
    0x7FFF,
    0x0001, 0x8001, 0x03FF, 0x83FF,  # smallest and largest subnormals
    0x0400, 0x8400,                  # smallest normal 2^-14
    0x7BFF, 0xFBFF,                  # largest normal 65504
    0x3C00, 0xBC00, 0x3C01, 0x3BFF,  # 1, -1, 1 + 2^-10, 1 - 2^-11
    0x0200, 0x5A4B,                  # a subnormal power of two, an arbitrary normal
]

MAX_FP16 = 0x7BFF


def fp16(values):
    """binary16 bit patterns of ``values``, which must be exactly representable."""
    values = np.asarray(values, dtype=np.float64)
    halves = values.astype(np.float16)
    if not np.array_equal(halves.astype(np.float64), values, equal_nan=True):
        raise ValueError("value not exactly representable in binary16")
    return halves.view(np.uint16).astype(np.int64)


class Stimulus:
    """Collects dot products as beat arrays."""

    def __init__(self):
        self.parts = {"a": [], "b": [], "first": [], "last": []}

    def add(self, a, b, *, first=True, last=None):
        """Append one dot product: ``first`` on its first beat (if asked), ``last`` on its final
        beat, or where the ``last`` array says."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        first_bits = np.zeros(len(a), dtype=np.int64)
        first_bits[0] = int(first)
        if last is None:
            last = np.zeros(len(a), dtype=np.int64)
            last[-1] = 1
        for name, value in zip(self.parts, (a, b, first_bits, np.asarray(last, np.int64))):
            self.parts[name].append(value)

    def beats(self):
        return {name: np.concatenate(values) for name, values in self.parts.items()}


def _tie_cases(stimulus, rng, count):
    """Two-beat dot products whose sum lies at, or just beside, a rounding midpoint.

    The first product ``p1`` has exponent E; the second is ``+-m * 2^(E - 24 + s)`` with
    ``m`` in {1, 3, 1 + 2^-10, 1 - 2^-11, 1.5 + 2^-10} and ``s`` in {-1, 0, 1}: with s = 0
    and m odd the exact sum is halfway between two binary32 numbers (unless the subtraction
    lowers the exponent). Both orders are sent, so the small product is also the accumulator.
    """
    multipliers = [1.0, 3.0, 1.0 + 2.0 ** -10, 1.0 - 2.0 ** -11, 1.5 + 2.0 ** -10]
    made = 0
    while made < count:
        a1 = rng.integers(1 << 10, 1 << 11) * 2.0 ** (int(rng.integers(-7, 16)) - 10)
        b1 = rng.integers(1 << 10, 1 << 11) * 2.0 ** (int(rng.integers(-7, 16)) - 10)
        if a1 > 65504 or b1 > 65504:
            continue
        exponent = int(np.floor(np.log2(a1 * b1)))
        target = exponent - 24 + int(rng.integers(-1, 2))
        m = multipliers[int(rng.integers(len(multipliers)))]
        b2_exp = max(-13, target - 15)
        a2_exp = target - b2_exp
        if not -24 <= a2_exp <= 15:
            continue
        sign1, sign2 = rng.choice([-1.0, 1.0], 2)
        try:
            a = fp16([sign1 * a1, sign2 * 2.0 ** a2_exp])
            b = fp16([b1, m * 2.0 ** b2_exp])
        except ValueError:  # m * 2^b2_exp not a binary16 number (too large)
            continue
        stimulus.add(a, b)
        stimulus.add(a[::-1], b[::-1])
        made += 1


def directed_beats(seed=0, acc="fp32"):
    """The directed stimulus (see the module docstring); deterministic for a ``seed``. With
    ``acc="fp16"`` the binary16 reading's corners (:func:`half_corners`) follow."""
    rng = np.random.default_rng([seed, 0xF16])
    stimulus = Stimulus()
    specials = np.array(SPECIAL_FP16, dtype=np.int64)
    # Every special x special product on its own ...
    for x in specials:
        stimulus.add(np.full(len(specials), x), specials, last=np.ones(len(specials)),
                     first=True)
        # (each beat is its own dot product: first on every beat)
        stimulus.parts["first"][-1][:] = 1
    # ... and every product of a few operands added to every product of the others.
    few = specials[[0, 1, 2, 3, 4, 5, 9, 10, 15, 16, 17, 18]]
    for x in few:
        for y in few:
            stimulus.add([x, y], [0x3C00, 0x3C00])
            stimulus.add([x, y], [y, x])
    _tie_cases(stimulus, rng, 400)
    # Exact cancellation to +0, and near cancellation (normalization shifts up to 23 bits).
    for _ in range(200):
        a, b = (int(v) for v in rng.integers(0x0001, 0x7C00, 2))
        stimulus.add([a, a], [b, b ^ 0x8000])
        stimulus.add([a, a ^ 0x8000], [b, b])
        stimulus.add([a, a], [b, (b ^ 0x8000) + int(rng.choice([-2, -1, 1, 2]))])
        stimulus.add([a, a], [b, b], last=[1, 1])
        stimulus.add([a, a], [b ^ 0x8000, b ^ 0x8000], first=False)
    # Cancellation after a sum of many terms: sum, then subtract the same terms.
    values = rng.integers(0x1000, 0x6000, 64)
    stimulus.add(np.concatenate([values, values]), np.concatenate(
        [np.full(64, 0x3C00), np.full(64, 0xBC00)]))
    # Long accumulations: 65504^2 per beat (growing to 2^44.6, rounded from 2^34 on),
    # alternating signs, and 2^-48 per beat from 0 (exact) and from 1.0 (rounded away).
    n = 6000
    stimulus.add(np.full(n, MAX_FP16), np.full(n, MAX_FP16), last=np.arange(n) % 250 == 249)
    stimulus.add(np.full(n, MAX_FP16), np.where(np.arange(n) % 3, MAX_FP16, MAX_FP16 | 0x8000),
                 last=np.arange(n) % 500 == 499)
    stimulus.add(np.full(n, 0x0001), np.full(n, 0x0001), last=np.arange(n) % 1000 == 999)
    stimulus.add(np.r_[0x3C00, np.full(n - 1, 0x0001)], np.r_[0x3C00, np.full(n - 1, 0x0001)])
    # Halfway ties at large magnitude: acc near 2^32 (ulp 2^8), then +-8 * 16 (half an ulp)
    # and +-8 * 48 (one and a half ulps), so that the even neighbour lies either way.
    steps = np.r_[MAX_FP16, np.full(40, 0x4800)]                      # 8.0
    factors = np.r_[MAX_FP16, np.where(np.arange(40) % 3, 0x4C00, 0x5200)]  # 16.0, 48.0
    stimulus.add(steps, factors, last=np.ones(41))
    stimulus.add(steps, factors | np.r_[0, np.full(40, 0x8000)], last=np.ones(41))
    # Infinity carried along, made NaN by the opposite infinity, NaN sticky, cleared by first.
    stimulus.add([0x3C00, 0x7C00, 0x7BFF, 0xFBFF, 0x3C00], [0x3C00, 0x3C00, 0x7BFF, 0x7BFF,
                                                          0x3C00], last=np.ones(5))
    stimulus.add([0x7C00, 0xFC00, 0x3C00, 0x7C00], [0x3C00, 0x3C00, 0x3C00, 0x3C00],
                 first=False, last=np.ones(4))
    stimulus.add([0x3C00, 0x4000], [0x3C00, 0x4000], last=np.ones(2))
    # The accumulator persists across `last` without `first`.
    stimulus.add([0x3C00, 0x3C00, 0x3C00], [0x3C00, 0x3C00, 0x3C00], first=False,
                 last=np.ones(3))
    if acc == "fp16":
        half_corners(stimulus, np.random.default_rng([seed, 0xF16, 16]))
    return stimulus.beats()


def _pattern(sign, field, frac):
    """binary16 patterns from sign, exponent field and fraction arrays."""
    return (np.asarray(sign) << 15) | (np.asarray(field) << 10) | np.asarray(frac)


def half_corners(stimulus, rng):
    """The binary16 reading's corners (see the module docstring), appended to ``stimulus``."""
    one, minus_one = 0x3C00, 0xBC00
    # Products rounded to binary16: a random significand times one with few bits (1.5, 1.25,
    # 1.75, 1 + 2^-10, 2 - 2^-10, 1.333), so that the 22-bit product has ties and near ties at
    # the rounding point; the product's exponent field t uniform in -12..32 (below 1:
    # subnormal or rounded to zero; 31 and above: overflow). Alone, and added to a first
    # product of the same exponent.
    n = 1500
    field_a = rng.integers(1, 31, n)
    target = rng.integers(-12, 33, n)
    field_b = np.clip(target - field_a + 15, 1, 30)
    a = _pattern(rng.integers(0, 2, n), field_a, rng.integers(0, 1 << 10, n))
    frac_b = rng.choice([0x200, 0x100, 0x300, 0x001, 0x3FF, 0x155], n)
    b = _pattern(rng.integers(0, 2, n), field_b, frac_b)
    stimulus.add(a, b, last=np.ones(n))
    stimulus.parts["first"][-1][:] = 1
    for k in range(0, n, 2):
        stimulus.add([a[k], a[k + 1]], [b[k], b[k + 1]])
    # Ties of the binary16 sum: p1 = a1 (times 1.0) with exponent E, p2 = +-m * 2^(E - 11 + s),
    # m in {1, 3, 1 + 2^-10, 1 - 2^-11, 1.5 + 2^-10}, s in {-1, 0, 1}; both orders.
    multipliers = [1.0, 3.0, 1.0 + 2.0 ** -10, 1.0 - 2.0 ** -11, 1.5 + 2.0 ** -10]
    made = 0
    while made < 400:
        exponent = int(rng.integers(-12, 16))
        a1 = int(rng.integers(1 << 10, 1 << 11)) * 2.0 ** (exponent - 10)
        m = multipliers[int(rng.integers(len(multipliers)))]
        a2 = m * 2.0 ** (exponent - 11 + int(rng.integers(-1, 2)))
        sign1, sign2 = rng.choice([-1.0, 1.0], 2)
        try:
            pair = fp16([sign1 * a1, sign2 * a2])
        except ValueError:  # a2 not a binary16 number
            continue
        stimulus.add(pair, [one, one])
        stimulus.add(pair[::-1], [one, one])
        made += 1
    # The sum's overflow: 65504 + 15.99 stays, + 16 (the midpoint 65520, even: 2^16) and
    # + 16.01 overflow; both signs; an overflowed sum carried along, then -inf: NaN.
    for x in (0x4BFF, 0x4C00, 0x4C01, 0x7BFF, 0x7800):
        stimulus.add([0x7BFF, x], [one, one])
        stimulus.add([0xFBFF, x | 0x8000], [one, one])
    stimulus.add([0x7BFF, 0x7BFF, one, 0xFC00, one], [one, one, one, one, one],
                 last=np.ones(5))
    # Products at the overflow boundary: 255.875 x 256 = 65504, 256 x 256, 255.875 x 256.25,
    # 65504 x (1 - 2^-11) = 65472.03 (rounded to 65472).
    stimulus.add([0x5BFF, 0x5C00, 0x5BFF, 0x7BFF], [0x5C00, 0x5C00, 0x5C01, 0x3BFF],
                 last=np.ones(4))
    stimulus.parts["first"][-1][:] = 1
    # The subnormal/normal boundary and cancellation into subnormals.
    for pair in ([0x03FF, 0x0001], [0x0400, 0x8001], [0x0401, 0x8400], [0x03FF, 0x03FF],
                 [0x8200, 0x0400], [0x0001, 0x8001], [0x0400, 0x8400]):
        stimulus.add(pair, [one, one])
    # Products 2^-25 (a tie: +0), 3 * 2^-26 (2^-24), -2^-25 (-0: +0 + -0 = +0), and a -0
    # product added to a nonzero accumulator (unchanged) and to +0 (+0).
    stimulus.add([0x0C00, 0x0E00, 0x8C00], [0x0800, 0x0800, 0x0800], last=np.ones(3))
    stimulus.parts["first"][-1][:] = 1
    stimulus.add([one, 0x8C00, 0x0001, 0x8001], [one, 0x0800, one, one], last=np.ones(4))
    stimulus.add([0x8000, 0x8000], [one, one], last=np.ones(2))
    # 2^-24 products summed 1500 times (exact, through the subnormal range into the normals),
    # 1.0 x 3000 (stops at 2048: 2048 + 1 is a tie, the even 2048 stays), 0.1 x 1000.
    stimulus.add(np.full(1500, 0x0C00), np.full(1500, 0x0C00), last=np.arange(1500) % 100 == 99)
    stimulus.add(np.full(3000, one), np.full(3000, one), last=np.arange(3000) % 500 == 499)
    stimulus.add(np.full(1000, 0x2E66), np.full(1000, one), last=np.arange(1000) % 50 == 49)
    stimulus.add(np.r_[np.full(500, one), np.full(500, minus_one)], np.full(1000, one),
                 last=np.arange(1000) % 100 == 99)


def random_fp16(rng, n, *, specials=True, acc="fp32"):
    """``n`` binary16 patterns from a mix of distributions (see the module docstring); without
    ``specials``, no infinities or NaNs (long dot products would otherwise almost all be NaN);
    ``acc="fp16"``: the narrower magnitudes of the binary16 reading.
    """
    kind = rng.choice(4, size=n, p=[0.05, 0.47, 0.47, 0.01] if specials else [0.05, 0.5, 0.45, 0])
    bits = rng.integers(0, 1 << 16, n)
    if not specials:
        bits = np.where((bits & 0x7C00) == 0x7C00, bits ^ 0x4000, bits)
    half = acc == "fp16"
    if half:   # most of the random patterns below 2 (exponent field < 16)
        bits = np.where(rng.random(n) < 0.8, bits & 0xBFFF, bits)
    scale = 2.0 ** (rng.integers(-6, 4, n) if half else rng.integers(-10, 8, n))
    normal = (rng.normal(0.0, 1.0, n) * scale).astype(np.float16)
    magnitude = 2.0 ** (rng.uniform(-14.0, 8.0, n) if half else rng.uniform(-26.0, 16.0, n))
    wide = np.clip(magnitude, 0.0, 65504.0) * rng.choice([-1.0, 1.0], n)
    special = rng.choice(np.array(SPECIAL_FP16), n)
    return np.select(
        [kind == 0, kind == 1, kind == 2],
        [bits, normal.view(np.uint16), wide.astype(np.float16).view(np.uint16)],
        special).astype(np.int64)


def random_beats(rng, beats, acc="fp32"):
    """``beats`` random beats grouped in dot products (see the module docstring), operands
    drawn for the reading ``acc``."""
    stimulus = Stimulus()
    total = 0
    while total < beats:
        band = rng.choice(4, p=[0.45, 0.40, 0.13, 0.02])
        low, high = [(1, 4), (5, 64), (65, 512), (513, 2048)][band]
        length = int(min(rng.integers(low, high + 1), beats - total))
        specials = rng.random() < 0.15
        a = random_fp16(rng, length, specials=specials, acc=acc)
        b = random_fp16(rng, length, specials=specials, acc=acc)
        if length >= 2 and rng.random() < 0.15:
            # Near cancellation: the product of the next beat almost undoes this one's.
            pairs = np.flatnonzero(rng.random(length - 1) < 0.5)
            a[pairs + 1] = a[pairs]
            finite = (b[pairs] & 0x7C00) != 0x7C00
            nudge = rng.integers(-3, 4, len(pairs))
            b[pairs + 1] = np.where(finite, np.clip((b[pairs] & 0x7FFF) + nudge, 0, 0x7BFF)
                                    | (~b[pairs] & 0x8000), b[pairs])
        last = (rng.random(length) < 0.03).astype(np.int64)
        last[-1] = 1
        stimulus.add(a, b, first=rng.random() >= 0.1, last=last)
        total += length
    return stimulus.beats()


def _reading(bench):
    """The unit's accumulator format, its NaN test, canonical NaN and infinity pattern."""
    if bench.params.get("acc", "fp32") == "fp16":
        return "fp16", fp16_is_nan, CANONICAL_NAN_FP16, 0x7C00
    return "fp32", fp32_is_nan, CANONICAL_NAN, 0x7F80_0000


def check_results(bench, fields):
    """Compare every output beat with the golden model; return the expected patterns."""
    expected = bench.expected({"i": fields})["o"]["acc"]
    got = np.asarray(bench.received("o")["acc"], dtype=np.int64)
    assert len(got) == len(expected), (
        f"o: {len(got)} beats received, {len(expected)} expected (lost or duplicated beats)")
    bad = np.flatnonzero(~bench.golden.same("acc", got, expected))
    if bad.size:
        k = int(bad[0])
        beat = int(np.flatnonzero(fields["last"])[k])
        start = max(0, beat - 3)
        context = ", ".join(f"{fields['a'][j]:#06x}*{fields['b'][j]:#06x}"
                            f"{' (first)' if fields['first'][j] else ''}"
                            for j in range(start, beat + 1))
        raise AssertionError(
            f"o: {bad.size} of {len(expected)} results differ; first at output {k} (input beat "
            f"{beat}): got {got[k]:#010x}, expected {int(expected[k]):#010x}; beats "
            f"{start}..{beat}: {context}")
    _, is_nan, canonical, _ = _reading(bench)
    noncanonical = np.flatnonzero(is_nan(got) & (got != canonical))
    assert not noncanonical.size, (
        f"o: NaN output {got[noncanonical[0]]:#010x} at output {noncanonical[0]} is not the "
        f"canonical {canonical:#010x}")
    return expected


async def run(bench, fields, *, cycles_per_beat):
    """Send ``fields`` and wait for all results; return the number of results."""
    await bench.start()
    bench.send("i", fields)
    outputs = int(np.count_nonzero(fields["last"]))
    await bench.wait_for("o", outputs, max_cycles=int(cycles_per_beat * len(fields["a"])) + 100)
    return outputs


@cocotb.test()
async def directed_special_cases(dut):
    bench = Bench(dut, valid_probability=0.9, ready_probability=0.8, seed_offset=0)
    acc, is_nan, _, _ = _reading(bench)
    fields = directed_beats(acc=acc)
    outputs = await run(bench, fields, cycles_per_beat=4)
    expected = check_results(bench, fields)
    record_metrics("directed_special_cases", beats=len(fields["a"]), results=outputs,
                   nan_results=int(is_nan(expected).sum()))


@cocotb.test()
async def random_dot_products_backpressure(dut):
    bench = Bench(dut, valid_probability=0.7, ready_probability=0.6, seed_offset=1)
    beats = int(os.environ.get("QLLM_BEATS", 100_000))
    acc, is_nan, _, inf = _reading(bench)
    fields = random_beats(bench.rng, beats, acc)
    dot_products = int(np.count_nonzero(fields["first"]))
    started = time.perf_counter()
    outputs = await run(bench, fields, cycles_per_beat=6)
    expected = check_results(bench, fields)
    elapsed = time.perf_counter() - started
    cycles = bench.monitors["o"].cycles
    magnitude = 0x7FFF if acc == "fp16" else 0x7FFF_FFFF
    special = is_nan(expected) | ((expected & magnitude) == inf)
    dut._log.info("%d beats, %d dot products, %d results (%d inf/NaN) in %d cycles, %.1f s: "
                  "%.0f beats/s", beats, dot_products, outputs, int(special.sum()), cycles,
                  elapsed, beats / elapsed)
    record_metrics("random_dot_products_backpressure", beats=beats, dot_products=dot_products,
                   results=outputs, special_results=int(special.sum()), cycles=cycles,
                   seconds=elapsed, beats_per_second=beats / elapsed)


@cocotb.test()
async def full_rate_latency(dut):
    bench = Bench(dut, seed_offset=2)
    stimulus = Stimulus()
    acc = _reading(bench)[0]
    for _ in range(100):
        length = int(bench.rng.integers(1, 9))
        stimulus.add(random_fp16(bench.rng, length, acc=acc),
                     random_fp16(bench.rng, length, acc=acc))
    block = random_fp16(bench.rng, 64, acc=acc)
    stimulus.add(block, block[::-1], last=np.ones(64))
    fields = stimulus.beats()
    count = len(fields["a"])
    await run(bench, fields, cycles_per_beat=1)
    check_results(bench, fields)
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
