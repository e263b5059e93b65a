"""Golden model of ``kllm_column`` (golden/kllm/column.py, contract section 7) against independent
models.

The weighted sum is checked against an exact model written here from the IEEE 754 definitions:
binary16 patterns decoded by hand into Python :class:`~fractions.Fraction` values, every
rounding to nearest even done on the exact fraction (:func:`round_exact`), infinities and NaN by
the IEEE rules. The counts and the overflow flag are checked against a lane-by-lane loop with
Python integers, the codebook load against a beat-by-beat loop. The float reference is checked
against the float MatMul of the dequantized operands. Hand-worked values are in the comments;
nothing here is copied from the model's output.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from qllm_cores.golden.kllm.beats import kllm_column
from qllm_cores.golden.kllm import (
    COLUMN_NAN, column_counts, column_float_reference, column_outputs, column_weighted_sum,
    counter_width, load_codebook, reductions_to_beats,
)

INF = float("inf")
NAN = float("nan")

# --------------------------------------------------------------------------- exact model


def decode_fp16(bits):
    """A binary16 pattern as a Fraction, or +-inf / NaN (floats), from the format's fields."""
    sign = -1 if bits & 0x8000 else 1
    exponent, fraction = (bits >> 10) & 0x1F, bits & 0x3FF
    if exponent == 0x1F:
        return NAN if fraction else sign * INF
    if exponent == 0:
        return sign * Fraction(fraction, 1 << 24)
    return sign * Fraction(1024 + fraction, 1024) * Fraction(2) ** (exponent - 15)


def floor_log2(x):
    """floor(log2(x)) of a positive Fraction, exactly."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    elif Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


def round_exact(x, precision, emin, emax):
    """Round a Fraction to the binary format (``precision`` significand bits, normal exponents
    ``emin..emax``), to nearest, ties to even; beyond the largest finite value: +-inf."""
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    m = abs(x)
    e = max(floor_log2(m), emin)
    quantum = Fraction(2) ** (e - precision + 1)
    q = m / quantum
    n = q.numerator // q.denominator
    rest = q - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2):
        n += 1
    result = n * quantum
    if result >= Fraction(2) ** (emax + 1):
        return sign * INF
    return sign * result


def fp32(x):
    return round_exact(x, 24, -126, 127)


def fp16(x):
    return round_exact(x, 11, -14, 15)


def is_nan(x):
    return isinstance(x, float) and math.isnan(x)


def ieee_mul(count, value):
    """fp32(fp32(count) * value) for an integer count != 0."""
    c = fp32(Fraction(count))
    if is_nan(value):
        return NAN
    if isinstance(value, float):                       # +-inf (c != 0)
        return value if c > 0 else -value
    return fp32(c * value)


def ieee_add(acc, p):
    if is_nan(acc) or is_nan(p):
        return NAN
    if isinstance(acc, float) and isinstance(p, float):
        return acc if acc == p else NAN                # inf + inf, inf - inf
    if isinstance(acc, float):
        return acc
    if isinstance(p, float):
        return p
    return fp32(acc + p)


def encode_fp16(x):
    """The binary16 pattern of a value already representable (or +-inf, NaN -> 0x7E00)."""
    if is_nan(x):
        return 0x7E00
    if isinstance(x, float):
        return 0x7C00 if x > 0 else 0xFC00
    sign = 0x8000 if x < 0 else 0
    m = abs(x)
    if m == 0:
        return sign
    if m < Fraction(1, 1 << 14):
        frac = m * (1 << 24)
        assert frac.denominator == 1
        return sign | int(frac)
    e = floor_log2(m)
    frac = (m / Fraction(2) ** e - 1) * 1024
    assert frac.denominator == 1
    return sign | ((e + 15) << 10) | int(frac)


def exact_weighted_sum(counts, codebook):
    """contract 7 on exact fractions: bins ascending, zero counts skipped, RNE at every step."""
    acc = Fraction(0)
    for count, bits in zip(counts, codebook):
        if count:
            acc = ieee_add(acc, ieee_mul(int(count), decode_fp16(int(bits))))
    if not is_nan(acc) and not isinstance(acc, float):
        acc = fp16(acc)
    return encode_fp16(acc)


def fp16_bits(value):
    """binary16 pattern of an exactly representable float (checked)."""
    half = np.float16(value)
    assert float(half) == value, value
    return int(half.view(np.uint16))


# --------------------------------------------------------------------------- the exact model


def test_exact_model_rounds_as_worked_by_hand():
    # 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even -> 1. 1 + 3 * 2^-11: -> 1 + 2^-9.
    assert fp16(1 + Fraction(1, 2048)) == 1
    assert fp16(1 + Fraction(3, 2048)) == 1 + Fraction(1, 512)
    # 65519 -> 65504 (below the midpoint 65520); 65520 -> even neighbour 65536 = inf.
    assert fp16(Fraction(65519)) == 65504 and fp16(Fraction(65520)) == INF
    # Subnormal quantum 2^-24: 2.5 * 2^-24 -> 2 * 2^-24 (even), 3.5 * 2^-24 -> 4 * 2^-24.
    assert fp16(Fraction(5, 1 << 25)) == Fraction(2, 1 << 24)
    assert fp16(Fraction(7, 1 << 25)) == Fraction(4, 1 << 24)
    # 2^24 + 1 -> 2^24 (even), 2^24 + 3 -> 2^24 + 4.
    assert fp32(Fraction((1 << 24) + 1)) == 1 << 24
    assert fp32(Fraction((1 << 24) + 3)) == (1 << 24) + 4
    assert [encode_fp16(decode_fp16(b)) for b in (0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF,
                                                  0xC000)] == [0x0001, 0x03FF, 0x0400, 0x3C00,
                                                               0x7BFF, 0xC000]


# --------------------------------------------------------------------------- weighted sum


def _random_codebook(rng, rows, bins, specials):
    """Rows of binary16 patterns: normal values over many binades, subnormals, and (if asked)
    NaNs, infinities and zeros of both signs."""
    mantissa = rng.integers(0, 1024, (rows, bins))
    exponent = rng.integers(1, 31, (rows, bins))
    bits = (rng.integers(0, 2, (rows, bins)) << 15) | (exponent << 10) | mantissa
    subnormal = rng.random((rows, bins)) < 0.1
    bits = np.where(subnormal, bits & 0x83FF, bits)
    if specials:
        pick = rng.random((rows, bins)) < 0.03
        special = rng.choice([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x7BFF],
                             (rows, bins))
        bits = np.where(pick, special, bits)
    return bits.astype(np.int64)


@pytest.mark.parametrize("mode", ["kk", "ik"])
@pytest.mark.parametrize("bins,specials", [(4, True), (16, False), (16, True), (64, True)])
def test_weighted_sum_matches_the_exact_model_on_random_cases(mode, bins, specials):
    rng = np.random.default_rng([bins, int(specials), mode == "ik"])
    rows = 300
    # Counts of every magnitude up to 2^16, many zero (sparse histograms).
    scale = np.exp2(rng.integers(0, 17, (rows, bins)))
    counts = (rng.random((rows, bins)) * scale).astype(np.int64)
    if mode == "ik":
        counts *= rng.choice([-1, 1], (rows, bins))
    counts[rng.random((rows, bins)) < 0.4] = 0
    # Narrow exponent ranges as well, so that sums cancel and round (not only one term wins).
    codebook = _random_codebook(rng, rows, bins, specials)
    narrow = rng.random(rows) < 0.5
    codebook[narrow] = (codebook[narrow] & 0x83FF) | (rng.integers(13, 17, (int(narrow.sum()),
                                                                          bins)) << 10)
    got = column_weighted_sum(counts, codebook)
    want = [exact_weighted_sum(c, b) for c, b in zip(counts, codebook)]
    assert got.tolist() == want
    assert 0x8000 not in want                    # (+0) + (-0) = +0: y is never -0


def test_one_codebook_for_all_reductions():
    rng = np.random.default_rng(4)
    counts = rng.integers(-50, 50, (20, 8))
    codebook = _random_codebook(rng, 1, 8, False)[0]
    got = column_weighted_sum(counts, codebook)
    assert got.tolist() == [exact_weighted_sum(c, codebook) for c in counts]


def _product_ties(rng, want):
    """(count, binary16 pattern) pairs whose exact product lies halfway between two binary32
    numbers: a count of 14 to 16 bits times an 11-bit significand has 25 to 27 bits."""
    counts = rng.integers(1 << 13, 1 << 16, 200_000)
    significand = rng.integers(1 << 10, 1 << 11, counts.size)
    product = counts * significand
    dropped = np.maximum(np.array([int(p).bit_length() for p in product]) - 24, 0)
    half = np.where(dropped > 0, 1 << np.maximum(dropped - 1, 0), -1)
    tie = (product % (1 << dropped)) == half
    picked = np.flatnonzero(tie)[:want]
    exponent = rng.integers(10, 20, picked.size)
    bits = (exponent << 10) | (significand[picked] - 1024)
    return counts[picked], bits


def test_product_ties_round_to_even_both_ways():
    rng = np.random.default_rng(7)
    counts, bits = _product_ties(rng, 200)
    assert counts.size == 200
    got = column_weighted_sum(counts[:, None], bits[:, None])
    up = down = 0
    for count, pattern, y in zip(counts.tolist(), bits.tolist(), got.tolist()):
        exact = count * decode_fp16(pattern)
        rounded = fp32(exact)
        up, down = up + (rounded > exact), down + (rounded < exact)
        assert y == exact_weighted_sum([count], [pattern])
    assert up > 20 and down > 20                 # both neighbours are the even one sometimes


def test_product_and_accumulation_ties_worked_by_hand():
    c4096, c1, m4096 = fp16_bits(4096.0), fp16_bits(1.0), fp16_bits(-4096.0)
    # Accumulation: 4096 x 4096.0 = 2^24, + 1 x 1.0 = 2^24 + 1, a binary32 tie -> 2^24 (even);
    # - 4096 x 4096.0: y = +0 although the exact sum is 1.
    assert column_weighted_sum([[4096, 1, 4096]], [c4096, c1, m4096]).tolist() == [0x0000]
    # With the negative product first in bin order the sum is exact: -2^24 + 1 is a binary32
    # number, and + 2^24 gives 1.0.
    assert column_weighted_sum([[4096, 1, 4096]], [m4096, c1, c4096]).tolist() == [c1]
    # 2^24 + 3 -> 2^24 + 4 (tie, the even neighbour above); - 2^24: y = 4.0 (0x4400), not 3.
    assert column_weighted_sum([[4096, 3, 4096]], [c4096, c1, m4096]).tolist() == [0x4400]
    # Products: 16385 x (1 + 2^-10) (0x3C01) = 16401 + 2^-10; the binary32 quantum at 2^14 is
    # 2^-9, so this is a tie -> 16401 (even significand 16401 x 2^9); - 16401 x 1.0 -> +0
    # (the exact 2^-10 would be 0x1400).
    assert column_weighted_sum([[16385, 16401]], [0x3C01, 0xBC00]).tolist() == [0x0000]
    # 16387 x (1 + 2^-10) = 16403 + 3 x 2^-10: a tie between 16403 + 2^-9 (odd) and
    # 16403 + 2^-8 (even) -> 16403 + 2^-8; - 16403: y = 2^-8 = 0x1C00 (exact: 0x1A00).
    assert column_weighted_sum([[16387, 16403]], [0x3C01, 0xBC00]).tolist() == [0x1C00]
    assert exact_weighted_sum([16387, 16403], [0x3C01, 0xBC00]) == 0x1C00


def test_specials_follow_ieee():
    one, nan, inf, ninf = 0x3C00, 0x7E00, 0x7C00, 0xFC00
    cases = [
        # inf - inf = NaN (the canonical pattern)
        ([1, 1, 0, 0], [inf, ninf, one, one], COLUMN_NAN),
        # NaN entries with count 0 are skipped; a negative count turns +inf into -inf
        ([0, 3, 0, 0], [nan, one, 0xFE01, 0x7C01], 0x4200),
        ([0, 0, -2, 5], [nan, nan, inf, one], ninf),
        # any NaN pattern that counts gives 0x7E00
        ([1, 0, 0, 0], [0xFE01, one, one, one], COLUMN_NAN),
        ([0, 2, 0, 0], [one, 0x7C01, one, one], COLUMN_NAN),
        # x * 0 with x != 0 is a zero; +0 + -0 = +0
        ([5, -3, 0, 0], [0x8000, 0x0000, one, one], 0x0000),
        ([-5, 0, 0, 0], [0x0000, one, one, one], 0x0000),
        # nothing counts: +0
        ([0, 0, 0, 0], [nan, inf, ninf, one], 0x0000),
    ]
    counts = [c for c, _, _ in cases]
    books = [b for _, b, _ in cases]
    assert column_weighted_sum(counts, books).tolist() == [y for _, _, y in cases]
    assert [exact_weighted_sum(c, b) for c, b in zip(counts, books)] == [y for _, _, y in cases]


def test_fp16_overflow_and_subnormal_results():
    big, one = fp16_bits(65504.0), fp16_bits(1.0)
    cases = [
        ([1, 15], [big, one], 0x7BFF),           # 65519 -> 65504
        ([1, 16], [big, one], 0x7C00),           # 65520: tie, even neighbour 65536 = inf
        ([-1, -16], [big, one], 0xFC00),         # -65520 -> -inf
        ([2, -1], [big, big], 0x7BFF),           # 131008 - 65504 = 65504 (binary32 exact)
        ([4096, 0], [big, one], 0x7C00),         # 2^12 x 65504: finite in binary32, inf in 16
        ([1, 1], [0x0400, 0x83FF], 0x0001),      # 2^-14 - 1023 x 2^-24 = 2^-24 (subnormal)
        ([3, 0], [0x0001, one], 0x0003),         # 3 x 2^-24
        ([1023, 0], [0x0001, one], 0x03FF),      # the largest subnormal
        ([1024, 0], [0x0001, one], 0x0400),      # 2^-14: the smallest normal
        ([1, 1], [0x3C00, 0x1000], 0x3C00),      # 1 + 2^-11: tie, even -> 1.0
        ([1, 3], [0x3C00, 0x1000], 0x3C02),      # 1 + 3 x 2^-11 -> 1 + 2^-9
        ([1, -1], [0x3C00, 0x3BFF], 0x1000),     # 1 - (1 - 2^-11) = 2^-11: cancellation
        ([7, -7], [0x5A4B, 0x5A4B], 0x0000),     # exact cancellation to +0
    ]
    counts = [c for c, _, _ in cases]
    books = [b for _, b, _ in cases]
    assert column_weighted_sum(counts, books).tolist() == [y for _, _, y in cases]
    assert [exact_weighted_sum(c, b) for c, b in zip(counts, books)] == [y for _, _, y in cases]


def test_bins_are_summed_in_ascending_order():
    # 2^24 (bin 0) + 1 (bin 1) + 1 (bin 2) - 2^24 (bin 3): each +1 is rounded away -> +0.
    # The same multiset summed with the ones first would give 2.
    c = [fp16_bits(4096.0), fp16_bits(1.0), fp16_bits(1.0), fp16_bits(-4096.0)]
    assert column_weighted_sum([[4096, 1, 1, 4096]], c).tolist() == [0x0000]
    c = [fp16_bits(1.0), fp16_bits(1.0), fp16_bits(4096.0), fp16_bits(-4096.0)]
    assert column_weighted_sum([[1, 1, 4096, 4096]], c).tolist() == [fp16_bits(2.0)]


def test_weighted_sum_checks_its_arguments():
    with pytest.raises(ValueError, match=r"codebook must have shape \(4,\) or \(1, 4\)"):
        column_weighted_sum([[1, 2, 3, 4]], [0, 0, 0])
    with pytest.raises(ValueError, match="codebook must hold binary16 bit patterns"):
        column_weighted_sum([[1]], [0x10000])
    with pytest.raises(TypeError, match="codebook must hold binary16 bit patterns"):
        column_weighted_sum([[1]], [1.0])
    with pytest.raises(TypeError, match="counts must hold integers"):
        column_weighted_sum([[1.0]], [0])


# --------------------------------------------------------------------------- counts, overflow


def loop_counts(a, b, mask, last, a_bits, b_bits, mode, weight_bits, max_len):
    """Lane-by-lane reference: Python ints, running counts checked after every beat."""
    width = counter_width(max_len, mode, weight_bits)
    low, high = (0, (1 << width) - 1) if mode == "kk" else (-(1 << (width - 1)),
                                                            (1 << (width - 1)) - 1)
    bins = 1 << (a_bits + b_bits if mode == "kk" else a_bits)
    results, running, over = [], [0] * bins, False
    for beat in range(len(last)):
        for lane in range(len(a[beat])):
            if mask[beat][lane]:
                if mode == "kk":
                    running[(int(a[beat][lane]) << b_bits) | int(b[beat][lane])] += 1
                else:
                    running[int(a[beat][lane])] += int(b[beat][lane])
        over = over or any(not low <= c <= high for c in running)
        if last[beat]:
            results.append((running, over))
            running, over = [0] * bins, False
    return results


@pytest.mark.parametrize("mode,max_len,weight_bits", [
    ("kk", 7, 4), ("kk", 16, 4), ("kk", 40, 4), ("ik", 3, 2), ("ik", 16, 4), ("ik", 9, 3),
])
def test_counts_and_overflow_match_the_lane_loop(mode, max_len, weight_bits):
    rng = np.random.default_rng([max_len, weight_bits, mode == "ik"])
    n, a_bits, b_bits, beats = 5, 2, 1, 600
    a = rng.integers(0, 1 << a_bits, (beats, n))
    # Few distinct bins (a = 0 mostly) so that counts reach the counters' limits.
    a[rng.random((beats, n)) < 0.7] = 0
    half = 1 << (weight_bits - 1)
    if mode == "kk":
        b = rng.integers(0, 1 << b_bits, (beats, n))
    else:
        # Runs of one sign (to overflow), then mixed (to come back).
        sign = np.where(rng.random((beats, 1)) < 0.5, -1, 1)
        b = np.clip(sign * rng.integers(0, half + 1, (beats, n)), -half, half - 1)
    mask = rng.random((beats, n)) < 0.85
    last = (rng.random(beats) < 0.08).astype(int)
    last[-1] = 1
    counts, overflow = column_counts(a, b, mask, last, a_bits, b_bits, mode, weight_bits,
                                     max_len)
    want = loop_counts(a, b, mask, last, a_bits, b_bits, mode, weight_bits, max_len)
    assert counts.tolist() == [c for c, _ in want]
    assert overflow.tolist() == [o for _, o in want]
    assert 0 < overflow.sum() < overflow.size      # both kinds happened


def test_overflow_boundaries_worked_by_hand():
    # kk, max_len 31: counter_width = 5 bits, 0..31. One lane per beat, all in bin 0.
    ones = lambda k: np.ones((k, 1), int)  # noqa: E731
    for k, over in [(31, False), (32, True)]:
        last = np.zeros(k, int)
        last[-1] = 1
        _, overflow = column_counts(ones(k) * 0, ones(k) * 0, ones(k), last, 1, 1, "kk",
                                    max_len=31)
        assert overflow.tolist() == [over]
    # ik, 4-bit weights, max_len 16: 4 + 4 = 8 bits, -128..127. 16 x -8 = -128 fits;
    # 17 x -8 = -136 does not; 19 x +7 = 133 does not, even if 19 x -7 then brings it to 0.
    w = lambda values: np.array(values).reshape(-1, 1)  # noqa: E731
    cases = [([-8] * 16, False), ([-8] * 17, True), ([7] * 18, False), ([7] * 19, True),
             ([7] * 19 + [-7] * 19, True), ([-8, 7] * 40, False)]
    for weights, over in cases:
        k = len(weights)
        last = np.zeros(k, int)
        last[-1] = 1
        counts, overflow = column_counts(np.zeros((k, 1), int), w(weights), ones(k), last, 1,
                                         mode="ik", weight_bits=4, max_len=16)
        assert overflow.tolist() == [over], weights
        assert counts[0, 0] == sum(weights)


def test_no_overflow_up_to_max_len_lanes():
    # max_len lanes of the largest magnitude, masked lanes included: never an overflow.
    for mode, weight in (("kk", 1), ("ik", -8), ("ik", 7)):
        for max_len in (1, 2, 15, 16, 17, 100):
            n = 4
            beats = -(-max_len // n)
            mask = (np.arange(beats * n) < max_len).reshape(beats, n)
            last = np.zeros(beats, int)
            last[-1] = 1
            b = np.full((beats, n), weight if mode == "ik" else 0)
            counts, overflow = column_counts(np.zeros((beats, n), int), b, mask, last, 1, 1,
                                             mode, 4, max_len)
            assert not overflow[0]
            assert counts[0, 0] == max_len * weight


def test_column_outputs_counts_concatenated_indices():
    # kk, a_bits 2, b_bits 1, 3 lanes. Beat 0: (a, b) = (1, 0), (3, 1), (1, 0) -> bins 2, 7, 2;
    # beat 1: (0, 1), (2, 0) masked, (1, 1) -> bins 1, 3 (last). Codebook entry j = j + 1.0:
    # y = 1 x 2.0 (bin 1) + 2 x 3.0 (bin 2) + 1 x 4.0 (bin 3) + 1 x 8.0 (bin 7) = 20.0.
    a = [[1, 3, 1], [0, 2, 1]]
    b = [[0, 1, 0], [1, 0, 1]]
    mask = [[1, 1, 1], [1, 0, 1]]
    codebook = [fp16_bits(j + 1.0) for j in range(8)]
    out = column_outputs(a, b, mask, [0, 1], codebook, 2, 1, "kk", max_len=6)
    assert out.counts.tolist() == [[0, 1, 2, 1, 0, 0, 0, 1]]
    assert out.y.tolist() == [fp16_bits(20.0)] and out.overflow.tolist() == [False]
    # ik: bins are a; weights add. a = (1, 1, 0), w = (3, -2, 4); a = (1, 0, 0), w = (5, 1, -4),
    # lane 1 masked -> bin 0: 4 - 4 = 0 (skipped: its NaN entry does not matter),
    # bin 1: 3 - 2 + 5 = 6; y = 6 x 1.5 = 9.0.
    out = column_outputs([[1, 1, 0], [1, 0, 0]], [[3, -2, 4], [5, 1, -4]],
                         [[1, 1, 1], [1, 0, 1]], [0, 1], [0x7E00, fp16_bits(1.5), 0, 0], 2,
                         mode="ik", weight_bits=4, max_len=6)
    assert out.counts.tolist() == [[0, 6, 0, 0]] and out.y.tolist() == [fp16_bits(9.0)]


def test_beats_after_the_final_last_give_nothing():
    out = column_outputs([[0], [0], [1]], [[0], [0], [0]], [[1], [1], [1]], [0, 1, 0],
                         [fp16_bits(1.0)] * 4, 1, 1)
    assert out.y.tolist() == [fp16_bits(2.0)] and out.counts.shape == (1, 4)


def test_column_counts_checks_its_arguments():
    with pytest.raises(ValueError, match=r"b must hold signed 4-bit weights \(-8\.\.7\)"):
        column_counts([[0]], [[8]], [[1]], [1], 1, mode="ik", weight_bits=4)
    with pytest.raises(ValueError, match="b must hold 1-bit unsigned indices"):
        column_counts([[0]], [[2]], [[1]], [1], 1, 1)
    with pytest.raises(ValueError, match=r"last must have shape \(1,\)"):
        column_counts([[0]], [[0]], [[1]], [1, 0], 1, 1)
    with pytest.raises(ValueError, match="mode must be 'kk' or 'ik'"):
        column_counts([[0]], [[0]], [[1]], [1], 1, 1, mode="ii")
    with pytest.raises(ValueError, match=r"a_bits must be in range 1\.\.8, not 9"):
        column_counts([[0]], [[0]], [[1]], [1], 9, 1)


# --------------------------------------------------------------------------- codebook load


def loop_load(codebook, value, last, position=0):
    codebook = list(codebook)
    for v, end in zip(value, last):
        if position < len(codebook):
            codebook[position] = int(v)
        position = 0 if end else position + 1
    return codebook, position


def test_load_codebook_worked_by_hand():
    zeros = np.zeros(4, int)
    # A full load: entries 0..3.
    book, pos = load_codebook(zeros, [10, 11, 12, 13], [0, 0, 0, 1])
    assert book.tolist() == [10, 11, 12, 13] and pos == 0
    # `last` after two beats: entries 2 and 3 unchanged; then a load with extra beats: the
    # beats past entry 3 (50, 51) are ignored.
    book, pos = load_codebook(book, [20, 21, 30, 31, 32, 33, 50, 51],
                              [0, 1, 0, 0, 0, 0, 0, 1])
    assert book.tolist() == [30, 31, 32, 33] and pos == 0
    book, pos = load_codebook([30, 31, 32, 33], [20, 21], [0, 1])
    assert book.tolist() == [20, 21, 32, 33] and pos == 0
    # An unfinished load carries its position over.
    book, pos = load_codebook(zeros, [1, 2], [0, 0])
    assert book.tolist() == [1, 2, 0, 0] and pos == 2
    book, pos = load_codebook(book, [3, 4, 5], [0, 1, 0], pos)
    assert book.tolist() == [5, 2, 3, 4] and pos == 1


def test_load_codebook_matches_the_beat_loop():
    rng = np.random.default_rng(8)
    for _ in range(50):
        beats = int(rng.integers(0, 40))
        value = rng.integers(0, 1 << 16, beats)
        last = (rng.random(beats) < 0.15).astype(int)
        start = rng.integers(0, 1 << 16, 16)
        position = int(rng.integers(0, 20))
        book, pos = load_codebook(start, value, last, position)
        assert (book.tolist(), pos) == loop_load(start, value, last, position)


# --------------------------------------------------------------------------- beat layout


def test_reductions_to_beats_pads_and_masks():
    # K = 3, 1, 5 with 2 lanes per beat: beats (0, 1), (2, pad) | (3, pad) | (4, 5), (6, 7),
    # (8, pad).
    out = reductions_to_beats([3, 1, 5], 2, {"a": np.arange(9) + 1,
                                             "mask": np.ones(9, dtype=bool)})
    assert out["a"].tolist() == [[1, 2], [3, 0], [4, 0], [5, 6], [7, 8], [9, 0]]
    assert out["last"].tolist() == [0, 1, 1, 0, 0, 1]
    assert out["mask"].tolist() == [[1, 1], [1, 0], [1, 0], [1, 1], [1, 1], [1, 0]]
    assert (out["padding"] == ~out["mask"]).all()
    with pytest.raises(ValueError, match="lengths must be >= 1"):
        reductions_to_beats([2, 0], 2, {})


# --------------------------------------------------------------------------- beat adapter


def test_adapter_worked_by_hand():
    # kk, 2 lanes, a_bits = b_bits = 1: codebook entries (a << 1) | b. The load has 5 beats
    # with `last` on the 5th: the 5th (9.0) is past the 4 entries and ignored.
    # Entries: 1.0, 2.0, 0.5, -4.0.
    p = {"a_bits": 1, "b_bits": 1, "n_inputs": 2, "mode": "kk", "weight_bits": None,
         "max_len": 8, "pipeline": 0}
    cb = {"value": [fp16_bits(v) for v in (1.0, 2.0, 0.5, -4.0, 9.0)], "last": [0, 0, 0, 0, 1]}
    # Reduction 0: (a, b) = (0, 1), (1, 1) and (1, 0), (1, 1) with lane 1 of beat 1 masked ->
    # bins 1, 3, 2: y = 2.0 - 4.0 + 0.5 = -1.5 (0xBE00).
    # Reduction 1: every lane masked -> +0.
    i = {"a": [[0, 1], [1, 1], [1, 0]], "b": [[1, 1], [0, 1], [1, 0]],
         "mask": [0b11, 0b01, 0b00], "last": [0, 1, 1]}
    out = kllm_column.expected(p, {"cb": cb, "i": i})["o"]
    assert np.asarray(out["y"]).tolist() == [0xBE00, 0x0000]
    assert np.asarray(out["overflow"]).tolist() == [0, 0]
    assert kllm_column.order(p, {"cb": cb, "i": i}).tolist() == ["cb"] * 5 + ["i"] * 3


@pytest.mark.parametrize("overrides", [
    {"mode": "kk", "a_bits": 2, "b_bits": 2, "n_inputs": 16, "max_len": 4096},
    {"mode": "kk", "a_bits": 3, "b_bits": 3, "n_inputs": 5, "max_len": 3},
    {"mode": "ik", "a_bits": 4, "b_bits": 4, "n_inputs": 16, "max_len": 20, "weight_bits": 4},
])
def test_adapter_stimulus_opens_with_a_masked_guard_and_never_overflows(overrides):
    p = {"weight_bits": None, "pipeline": 0, **overrides}
    stimulus = kllm_column.stimulus(np.random.default_rng(3), p, 50)
    entries = 1 << (p["a_bits"] + (p["b_bits"] if p["mode"] == "kk" else 0))
    assert len(stimulus["cb"]["value"]) == entries and stimulus["cb"]["last"][-1] == 1
    last = np.asarray(stimulus["i"]["last"])
    assert last.sum() == 50 and last[15] == 1 and last[:15].sum() == 0
    assert not np.any(np.asarray(stimulus["i"]["mask"])[:16])
    out = kllm_column.expected(p, stimulus)["o"]
    assert not np.any(out["overflow"]) and out["y"][0] == 0


# --------------------------------------------------------------------------- float reference


@pytest.mark.parametrize("mode,a_bits,b_bits", [("kk", 4, 4), ("kk", 3, 3), ("ik", 4, None)])
def test_codebook_path_equals_the_float_matmul_to_fp16_accuracy(mode, a_bits, b_bits):
    rng = np.random.default_rng([a_bits, b_bits or 0, mode == "ik"])
    k, columns = 1024, 6
    a = rng.standard_normal(k) * np.exp(rng.standard_normal(k))        # heavy tails: outliers
    if mode == "kk":
        b = rng.standard_normal((k, columns))
    else:
        b = rng.integers(-8, 8, (k, columns))
    ref = column_float_reference(a, b, a_bits, b_bits, mode, fraction=0.01, seed=3)
    assert ref.counted.sum() == k - 2 * 6                # ceil(0.01 x 1024 / 2) = 6 per side
    y = ref.codebook.astype(np.uint16).view(np.float16)   # (codebook sanity: all finite)
    assert np.all(np.isfinite(y))
    got = ref.y.astype(np.uint16).view(np.float16).astype(np.float64)
    assert np.all(np.abs(got - ref.y_float) <= ref.bound), (got, ref.y_float, ref.bound)
    # The bound is FP16 accuracy: a few binary16 ulps of the magnitudes summed.
    l1 = np.abs(np.where(ref.counted, ref.ca[ref.a_idx], 0)) @ np.abs(
        ref.cb[ref.b] if mode == "kk" else ref.b)
    assert np.all(ref.bound <= 2.0 ** -9 * l1 + 2.0 ** -10 * np.abs(ref.y_float) + 1e-4)
    # The float MatMul, computed independently here from the centroids.
    a_deq = np.where(ref.counted, ref.ca[ref.a_idx], 0.0)
    b_deq = ref.cb[ref.b] if mode == "kk" else ref.b.astype(float)
    np.testing.assert_allclose(ref.y_float, a_deq @ b_deq, rtol=1e-12, atol=1e-12)
    # A wrong projection (weight index high) lands outside the bound: the check has teeth.
    if mode == "kk":
        wrong = column_weighted_sum(ref.counts, ref.codebook.reshape(
            1 << a_bits, 1 << b_bits).T.ravel())
        wrong = wrong.astype(np.uint16).view(np.float16).astype(np.float64)
        assert np.any(np.abs(wrong - ref.y_float) > ref.bound)
