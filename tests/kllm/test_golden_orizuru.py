"""Golden model of Orizuru (golden/kllm/orizuru.py) against independent formulations and hand
values.

References written here, not taken from the model: a sign-magnitude totalOrder rank checked
against float16 arithmetic; numpy sorting (multisets of the top-k/bottom-k values, and the exact
beat order as a stable lexicographic sort); a brute-force model that rebuilds both trees from
scratch after every pop; directed tie and special-value vectors whose beats are worked out by
hand from the node rules.
"""

import math

import numpy as np
import pytest

from qllm_cores.golden.kllm.orizuru import (
    comparison_count, orizuru, orizuru_beats, pack_mask, total_order_key, unpack_mask,
)

ALL_PATTERNS = np.arange(1 << 16, dtype=np.int64)


def rank(x):
    """totalOrder rank, written independently: sign-magnitude read as ``mag`` or ``-mag-1``."""
    x = np.asarray(x, dtype=np.int64)
    magnitude = x & 0x7FFF
    return np.where(x >> 15, -magnitude - 1, magnitude)


def expected_comparisons(n, k):
    return (n - 1) + (n // 2 - 1) + 2 * k * int(math.log2(n))


def check_against_sort(x, k, result):
    """The model's result for ``x`` agrees with numpy sorting on the totalOrder rank."""
    x = np.asarray(x, dtype=np.int64)
    n = x.size
    r = rank(x)
    lanes = np.arange(n)
    for index, value in ((result.max_index, result.max_value),
                         (result.min_index, result.min_value)):
        assert index.shape == value.shape == (k,)
        assert len(set(index.tolist())) == k                   # distinct lanes per tree
        assert np.all((index >= 0) & (index < n))
        np.testing.assert_array_equal(value, x[index])          # values are the inputs' bits
    # Multisets of values: the k largest / k smallest ranks.
    np.testing.assert_array_equal(np.sort(r[result.max_index]), np.sort(r)[n - k:])
    np.testing.assert_array_equal(np.sort(r[result.min_index]), np.sort(r)[:k])
    # Beat order: largest first (ties: lowest lane first), smallest first (ties: highest first).
    np.testing.assert_array_equal(result.max_index, np.lexsort((lanes, -r))[:k])
    np.testing.assert_array_equal(result.min_index, np.lexsort((-lanes, r))[:k])
    mask = np.zeros(n, dtype=bool)
    mask[result.max_index] = True
    mask[result.min_index] = True
    np.testing.assert_array_equal(result.mask, mask)
    assert result.mask.dtype == np.bool_
    assert result.comparisons == expected_comparisons(n, k)


def brute_force_beats(xs, k):
    """Reference stream: rebuild both trees from scratch (same node rules) after every pop.

    Each level pairs the winners of the level below: max tree takes the right one only if its
    effective rank is strictly greater; min tree takes the right one if it is less or equal.
    Popped lanes rank below everything (max tree) or above everything (min tree).
    """
    xs = np.asarray(xs, dtype=np.int64)
    vectors, n = xs.shape
    below, above = -(1 << 20), 1 << 20
    beats = {name: [] for name in ("max_index", "max_value", "min_index", "min_value",
                                   "last", "mask")}
    for x in xs:
        r = rank(x)
        popped = {"max": np.zeros(n, dtype=bool), "min": np.zeros(n, dtype=bool)}
        for j in range(k):
            for tree in ("max", "min"):
                effective = np.where(popped[tree], below if tree == "max" else above, r)
                winners = np.arange(n)
                while winners.size > 1:
                    left, right = winners[0::2], winners[1::2]
                    if tree == "max":
                        take_right = effective[right] > effective[left]
                    else:
                        take_right = effective[right] <= effective[left]
                    winners = np.where(take_right, right, left)
                lane = int(winners[0])
                popped[tree][lane] = True
                beats[f"{tree}_index"].append(lane)
                beats[f"{tree}_value"].append(int(x[lane]))
            final = j == k - 1
            beats["last"].append(int(final))
            union = popped["max"] | popped["min"]
            beats["mask"].append(sum(1 << i for i in range(n) if union[i]) if final else 0)
    return beats


# --- totalOrder key --------------------------------------------------------------------------


def test_total_order_key_is_the_sign_magnitude_rank_exhaustively():
    key = total_order_key(ALL_PATTERNS)
    assert key.dtype == np.int64
    np.testing.assert_array_equal(key, rank(ALL_PATTERNS) + 0x8000)
    np.testing.assert_array_equal(np.sort(key), ALL_PATTERNS)      # a bijection of 0..0xFFFF


def test_total_order_key_orders_like_float16_exhaustively():
    values = ALL_PATTERNS.astype(np.uint16).view(np.float16).astype(np.float64)
    order = np.argsort(total_order_key(ALL_PATTERNS), kind="stable")
    ordered = values[order]
    nan = np.isnan(ordered)
    # NaNs sit at both ends: negative NaNs first, positive NaNs last.
    negative = (ALL_PATTERNS[order] >> 15) == 1
    assert np.all(nan[:1023] & negative[:1023]) and np.all(nan[-1023:] & ~negative[-1023:])
    numbers = ordered[~nan]
    assert numbers[0] == -np.inf and numbers[-1] == np.inf
    assert np.all(np.diff(numbers) >= 0)
    # Equal float values are exactly -0 and +0, and -0 comes first.
    ties = np.flatnonzero(np.diff(numbers) == 0)
    assert ties.size == 1
    patterns = ALL_PATTERNS[order][~nan]
    assert patterns[ties[0]] == 0x8000 and patterns[ties[0] + 1] == 0x0000


@pytest.mark.parametrize("pattern, key", [
    (0xFFFF, 0x0000), (0xFE00, 0x01FF), (0xFC00, 0x03FF), (0x8000, 0x7FFF), (0x0000, 0x8000),
    (0x3C00, 0xBC00), (0x7C00, 0xFC00), (0x7E00, 0xFE00), (0x7FFF, 0xFFFF),
])
def test_total_order_key_hand_values(pattern, key):
    assert total_order_key(pattern) == key


# --- against numpy sorting -------------------------------------------------------------------


def k_values(n):
    return sorted({1, 2, 3, n // 4, n // 2, n - 1, n} & set(range(1, n + 1)))


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64, 1024])
def test_random_bit_patterns_match_numpy_sort(n):
    rng = np.random.default_rng(n)
    for k in k_values(n):
        # Full-range patterns, and a narrow range that forces many equal values.
        for x in (rng.integers(0, 1 << 16, n), rng.integers(0x3C00, 0x3C00 + max(2, n // 8), n)):
            check_against_sort(x, k, orizuru(x, k))


@pytest.mark.parametrize("n", [2048, 4096])
def test_token_wide_vectors_match_numpy_sort(n):
    # KLLM's 4096-wide tokens (k at most 64 above n = 1024; 20 is KLLM's 0.5 %).
    rng = np.random.default_rng(n + 3)
    for k in (1, 20, 64):
        for x in (rng.integers(0, 1 << 16, n), rng.integers(0x3C00, 0x3C00 + 64, n)):
            check_against_sort(x, k, orizuru(x, k))


@pytest.mark.parametrize("distribution", ["normal", "student_t", "cauchy", "tiny"])
@pytest.mark.parametrize("n", [16, 64, 1024])
def test_float16_data_matches_numpy_sort(distribution, n):
    rng = np.random.default_rng(7 * n + len(distribution))
    sample = {
        "normal": lambda: rng.standard_normal(n),
        "student_t": lambda: 30 * rng.standard_t(1.5, n),         # heavy tails, outliers
        "cauchy": lambda: 1000 * rng.standard_cauchy(n),          # overflows to +-inf
        "tiny": lambda: 1e-6 * rng.standard_normal(n),            # subnormals and +-0
    }[distribution]
    for k in (1, max(1, n // 200), n // 8, n):
        with np.errstate(over="ignore"):
            x = sample().astype(np.float16).view(np.uint16)
        check_against_sort(x, k, orizuru(x, k))


def test_float16_data_reaches_the_special_values():
    """The distributions above really exercise infinities, subnormals and both zeros."""
    rng = np.random.default_rng(3)
    with np.errstate(over="ignore"):
        cauchy = (1000 * rng.standard_cauchy(1024)).astype(np.float16)
    tiny = (1e-6 * rng.standard_normal(1024)).astype(np.float16)
    assert np.isposinf(cauchy).any() and np.isneginf(cauchy).any()
    bits = tiny.view(np.uint16)
    assert np.any((bits & 0x7C00) == 0) and np.any(bits == 0x8000) and np.any(bits == 0)


# --- tie rule and special values (hand-derived beats) ---------------------------------------


@pytest.mark.parametrize("n", [2, 8, 64])
@pytest.mark.parametrize("value", [0x3C00, 0x0000, 0x8000, 0xFFFF, 0x7FFF, 0x7C00])
def test_all_equal_values(n, value):
    """Ties go left in the max tree (">" is strict) and right in the min tree ("<="), and a popped
    leaf loses to every value, also key 0 (0xFFFF, max tree) and key 0xFFFF (0x7FFF, min tree).
    So the max tree reports 0, 1, 2, ... and the min tree n-1, n-2, ..."""
    x = np.full(n, value)
    result = orizuru(x, n)
    np.testing.assert_array_equal(result.max_index, np.arange(n))
    np.testing.assert_array_equal(result.min_index, np.arange(n)[::-1])
    np.testing.assert_array_equal(result.max_value, x)
    assert result.mask.all()
    assert orizuru(x, 1).max_index.tolist() == [0] and orizuru(x, 1).min_index.tolist() == [n - 1]


def test_two_values_only():
    high, low = 0x4000, 0xC000                       # +2.0 and -2.0
    x = np.array([low, high, high, low, low, high, low, high])
    result = orizuru(x, 8)
    assert result.max_index.tolist() == [1, 2, 5, 7, 0, 3, 4, 6]
    assert result.min_index.tolist() == [6, 4, 3, 0, 7, 5, 2, 1]
    three = orizuru(x, 3)
    assert three.max_index.tolist() == [1, 2, 5] and three.min_index.tolist() == [6, 4, 3]
    assert three.max_value.tolist() == [high] * 3 and three.min_value.tolist() == [low] * 3
    assert np.flatnonzero(three.mask).tolist() == [1, 2, 3, 4, 5, 6]


def test_signed_zeros_are_distinct():
    """-0 < +0 in totalOrder: +0 lanes come first in the max tree, -0 lanes in the min tree."""
    x = np.array([0x0000, 0x8000, 0x0000, 0x8000])
    result = orizuru(x, 4)
    assert result.max_index.tolist() == [0, 2, 1, 3]
    assert result.min_index.tolist() == [3, 1, 2, 0]
    assert orizuru(x, 2).max_value.tolist() == [0x0000, 0x0000]
    assert orizuru(x, 2).min_value.tolist() == [0x8000, 0x8000]


def test_infinities_and_nans_of_both_signs():
    #              0       1       2       3       4       5       6       7
    x = np.array([0x3C00, 0xFC00, 0x7E00, 0xFE00, 0x7C00, 0x7C01, 0xFFFF, 0x8000])
    #            +1      -inf    +qNaN   -qNaN   +inf    +sNaN   -NaN(max payload) -0
    ascending = [6, 3, 1, 7, 0, 4, 5, 2]
    result = orizuru(x, 8)
    assert result.max_index.tolist() == ascending[::-1]
    assert result.min_index.tolist() == ascending
    assert result.max_value.tolist() == [0x7E00, 0x7C01, 0x7C00, 0x3C00, 0x8000, 0xFC00,
                                         0xFE00, 0xFFFF]


def test_subnormals():
    #              0       1       2       3       4       5       6       7
    x = np.array([0x0001, 0x83FF, 0x0400, 0x8001, 0x03FF, 0x0000, 0x8400, 0x8000])
    #            +min sub -max sub +min nrm -min sub +max sub +0   -min nrm  -0
    ascending = [6, 1, 3, 7, 5, 0, 4, 2]
    result = orizuru(x, 8)
    assert result.max_index.tolist() == ascending[::-1]
    assert result.min_index.tolist() == ascending
    check_against_sort(x, 3, orizuru(x, 3))


def test_popped_leaf_never_returns_while_values_remain():
    """k = n pops every lane exactly once per tree, even for the extreme keys 0 and 0xFFFF."""
    x = np.array([0xFFFF, 0x7FFF] * 8)
    result = orizuru(x, 16)
    assert sorted(result.max_index.tolist()) == list(range(16))
    assert result.max_index.tolist() == list(range(1, 16, 2)) + list(range(0, 16, 2))
    assert result.min_index.tolist() == list(range(14, -1, -2)) + list(range(15, 0, -2))


# --- comparisons -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4, 8, 16, 64, 1024])
def test_comparison_count(n):
    rng = np.random.default_rng(n + 1)
    x = rng.integers(0, 1 << 16, n)
    for k in k_values(n):
        assert comparison_count(n, k) == expected_comparisons(n, k)
        # The paper's 1.5N + 2k log2 N, less 2: n-1 max-tree nodes plus n/2-1 min-tree nodes.
        assert comparison_count(n, k) == 1.5 * n + 2 * k * math.log2(n) - 2
        if n <= 64 or k in (1, n // 4):
            assert orizuru(x, k).comparisons == expected_comparisons(n, k)


# --- path maintenance equals full recomputation ----------------------------------------------


@pytest.mark.parametrize("n, k, vectors", [
    (2, 1, 8), (2, 2, 8), (4, 3, 8), (8, 8, 8), (16, 5, 6), (16, 16, 6), (64, 64, 3),
    (256, 20, 2), (1024, 12, 1),
])
def test_path_maintenance_equals_brute_force(n, k, vectors):
    rng = np.random.default_rng(100 * n + k)
    xs = rng.integers(0, 1 << 16, (vectors, n))
    # Half the vectors from a narrow range: many ties, so the tie rules are exercised.
    xs[::2] = rng.integers(0x7BFE, 0x7C03, (len(xs[::2]), n))
    got = orizuru_beats(xs, k)
    want = brute_force_beats(xs, k)
    for name, values in want.items():
        assert got[name].tolist() == values, name


# --- the beat stream -------------------------------------------------------------------------


@pytest.mark.parametrize("n, k", [(8, 3), (32, 32), (64, 4), (1024, 3)])
def test_beats_concatenate_the_vectors(n, k):
    rng = np.random.default_rng(n * k)
    xs = rng.integers(0, 1 << 16, (5, n)).astype(np.uint16)
    beats = orizuru_beats(xs, k)
    assert set(beats) == {"max_index", "max_value", "min_index", "min_value", "last", "mask"}
    for name, values in beats.items():
        assert values.shape == (5 * k,), name
    assert beats["mask"].dtype == (np.int64 if n <= 62 else object)
    for v, x in enumerate(xs):
        result = orizuru(x, k)
        span = slice(v * k, (v + 1) * k)
        for name in ("max_index", "max_value", "min_index", "min_value"):
            np.testing.assert_array_equal(beats[name][span], getattr(result, name))
        assert beats["last"][span].tolist() == [0] * (k - 1) + [1]
        assert beats["mask"][span].tolist() == [0] * (k - 1) + [result.mask_bits]
        mask = beats["mask"][span][-1]
        assert isinstance(int(mask), int)
        np.testing.assert_array_equal(unpack_mask(int(mask), n), result.mask)


def test_wide_mask_is_a_python_int():
    x = np.zeros(1024, dtype=np.int64)
    x[1000] = 0x7C00                                     # +inf: popped first by the max tree
    x[1023] = 0xFC00                                     # -inf: popped first by the min tree
    beats = orizuru_beats(x[None], 1)
    assert beats["mask"].tolist() == [(1 << 1000) | (1 << 1023)]
    assert beats["max_index"].tolist() == [1000] and beats["min_index"].tolist() == [1023]


def test_empty_batch():
    beats = orizuru_beats(np.zeros((0, 8), dtype=np.int64), 2)
    for values in beats.values():
        assert values.shape == (0,)


def test_pack_and_unpack_mask():
    mask = np.array([1, 0, 0, 1, 1, 0, 0, 0, 1], dtype=bool)
    assert pack_mask(mask) == 0b100011001
    np.testing.assert_array_equal(unpack_mask(0b100011001, 9), mask)
    assert pack_mask(np.zeros(4, dtype=bool)) == 0


# --- argument checks -------------------------------------------------------------------------


@pytest.mark.parametrize("call, error, match", [
    (lambda: orizuru(np.zeros(12, dtype=int), 1), ValueError, r"length n of x .* not 12"),
    (lambda: orizuru(np.zeros(1, dtype=int), 1), ValueError, r"length n of x .* not 1"),
    (lambda: orizuru(np.zeros(8192, dtype=int), 1), ValueError, r"length n of x .* 2\.\.4096"),
    (lambda: orizuru(np.zeros(2048, dtype=int), 65), ValueError, r"k must be in range 1\.\.64"),
    (lambda: orizuru(np.zeros((2, 4), dtype=int), 1), ValueError, r"x must be 1-D"),
    (lambda: orizuru(np.zeros(4, dtype=np.float16), 1), TypeError, r"x must hold binary16 .*view"),
    (lambda: orizuru(np.zeros(4, dtype=bool), 1), TypeError, r"x must hold integers"),
    (lambda: orizuru([0, 1, 0x10000, 3], 1), ValueError, r"x must hold 16-bit .* not 65536"),
    (lambda: orizuru([0, 1, -1, 3], 1), ValueError, r"x must hold 16-bit .* not -1"),
    (lambda: orizuru(np.zeros(8, dtype=int), 0), ValueError, r"k must be in range 1\.\.8, not 0"),
    (lambda: orizuru(np.zeros(8, dtype=int), 9), ValueError, r"k must be in range 1\.\.8, not 9"),
    (lambda: orizuru(np.zeros(8, dtype=int), 2.0), TypeError, r"k must be an integer"),
    (lambda: orizuru(np.zeros(8, dtype=int), True), TypeError, r"k must be an integer"),
    (lambda: orizuru_beats(np.zeros(8, dtype=int), 1), ValueError, r"xs must be 2-D"),
    (lambda: orizuru_beats(np.zeros((3, 6), dtype=int), 1), ValueError,
     r"row length n of xs .* not 6"),
    (lambda: orizuru_beats(np.full((3, 4), 70000), 1), ValueError, r"xs must hold 16-bit"),
    (lambda: orizuru_beats(np.zeros((3, 4)), 1), TypeError, r"xs must hold binary16"),
    (lambda: orizuru_beats(np.zeros((3, 4), dtype=int), 5), ValueError,
     r"k must be in range 1\.\.4"),
    (lambda: comparison_count(12, 1), ValueError, r"n must be a power of two .* not 12"),
    (lambda: comparison_count(8192, 1), ValueError, r"n must be in range 2\.\.4096"),
    (lambda: comparison_count(8, 9), ValueError, r"k must be in range 1\.\.8"),
    (lambda: comparison_count("8", 1), TypeError, r"n must be an integer"),
    (lambda: total_order_key(0x10000), ValueError, r"x must hold 16-bit"),
    (lambda: total_order_key([1.5]), TypeError, r"x must hold binary16"),
    (lambda: unpack_mask(16, 4), ValueError, r"bits must be in range 0\.\.15"),
    (lambda: pack_mask(np.array([0, 2])), ValueError, r"mask must hold only 0 and 1"),
])
def test_invalid_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()
