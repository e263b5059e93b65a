"""Golden models of KLLM (golden/kllm/) against independent formulations and hand values.

Counter: a Python loop, a one-hot sum and integer bincounts per weight value. MatMuls: the
dense float MatMul of the dequantized operands. Nothing here is copied from the model's output.
"""

import warnings

import numpy as np
import pytest

from qllm_cores.golden.kllm import (
    activation_codebook, counter_width, dequantize, index_distribution, index_distributions,
    kmeans_codebook, kmeans_quantize, max_abs_scale, outliers_per_side, quantize_weights,
    split_outliers,
)


def loop_histogram(idx, idx_bits, mask=None, weights=None):
    """Reference counter: one lane at a time, Python integers."""
    bins = [0] * (1 << idx_bits)
    for k, index in enumerate(idx):
        if mask is None or mask[k]:
            bins[int(index)] += 1 if weights is None else int(weights[k])
    return bins


def one_hot_histogram(idx, idx_bits, mask, weights):
    """Reference counter as the paper draws it: one-hot decode, then column sums (int64)."""
    one_hot = np.eye(1 << idx_bits, dtype=np.int64)[np.asarray(idx)]
    lane = np.asarray(mask, dtype=np.int64) * (1 if weights is None else np.asarray(weights))
    return (one_hot * lane[:, None]).sum(axis=0)


# --- Index Distribution Counter: bit-exact ---------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 15, 16, 17, 100, 1000])
@pytest.mark.parametrize("idx_bits", [1, 3, 8])
@pytest.mark.parametrize("mode", ["kk", "ik"])
def test_index_distribution_matches_lane_loop(length, idx_bits, mode):
    rng = np.random.default_rng(1000 * length + 10 * idx_bits + (mode == "ik"))
    idx = rng.integers(0, 1 << idx_bits, length)
    mask = rng.integers(0, 2, length)
    weights = rng.integers(-8, 8, length) if mode == "ik" else None
    hist = index_distribution(idx, idx_bits, mask=mask, weights=weights)
    assert hist.dtype == np.int64 and hist.shape == (1 << idx_bits,)
    assert hist.tolist() == loop_histogram(idx, idx_bits, mask, weights)
    # A boolean mask means the same as the 0/1 one.
    again = index_distribution(idx, idx_bits, mask=mask.astype(bool), weights=weights)
    np.testing.assert_array_equal(again, hist)


def test_index_distribution_4096_lanes_against_integer_bincounts():
    # Independent formulation for ik mode: integer bincounts (no float weights), one per weight
    # value, scaled by that value.
    rng = np.random.default_rng(4096)
    idx = rng.integers(0, 256, 4096)
    mask = rng.random(4096) < 0.99
    weights = rng.integers(-8, 8, 4096)
    expected = np.zeros(256, dtype=np.int64)
    for value in range(-8, 8):
        expected += value * np.bincount(idx[mask & (weights == value)], minlength=256)
    np.testing.assert_array_equal(index_distribution(idx, 8, mask, weights), expected)
    np.testing.assert_array_equal(index_distribution(idx, 8, mask),
                                  np.bincount(idx[mask], minlength=256))
    np.testing.assert_array_equal(index_distribution(idx, 8, mask, weights),
                                  one_hot_histogram(idx, 8, mask, weights))


@pytest.mark.parametrize("mode", ["kk", "ik"])
def test_index_distribution_all_lanes_masked_is_zero(mode):
    idx = np.arange(37) % 16
    weights = np.full(37, -8) if mode == "ik" else None
    hist = index_distribution(idx, 4, mask=np.zeros(37, dtype=bool), weights=weights)
    assert hist.tolist() == [0] * 16


def test_index_distribution_every_index_equal():
    idx = np.full(4096, 0xA5)
    hist = index_distribution(idx, 8)
    assert hist[0xA5] == 4096 and hist.sum() == 4096
    weights = np.tile([3, -1], 2048)
    hist = index_distribution(idx, 8, weights=weights)
    assert hist[0xA5] == 2048 * 2 and np.count_nonzero(hist) == 1


def test_index_distribution_extreme_weights():
    # 4096 lanes of the extreme signed 4-bit weights on one bin: the ik counter's range ends.
    idx = np.full(4096, 7)
    assert index_distribution(idx, 4, weights=np.full(4096, -8))[7] == -32768
    assert index_distribution(idx, 4, weights=np.full(4096, 7))[7] == 28672
    # Integer arithmetic: float64 accumulation would lose the +1 (2**61 + 1 == 2**61).
    assert index_distribution([2, 2, 2], 2, weights=[2**61, 1, -(2**61)]).tolist() == [0, 0, 1, 0]


def test_index_distribution_16_bit_indices():
    idx = np.array([0, 65535, 65535, 40000])
    hist = index_distribution(idx, 16, weights=[1, 2, 3, -4])
    assert hist.shape == (65536,)
    assert (hist[0], hist[65535], hist[40000]) == (1, 5, -4)
    assert np.count_nonzero(hist) == 3


@pytest.mark.parametrize("mode", ["kk", "ik"])
def test_batched_equals_per_row(mode):
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 64, (9, 131))
    mask = rng.random((9, 131)) < 0.8
    weights = rng.integers(-8, 8, (9, 131)) if mode == "ik" else None
    batched = index_distributions(idx, 6, mask, weights)
    assert batched.shape == (9, 64)
    for row in range(9):
        single = index_distribution(idx[row], 6, mask[row],
                                    None if weights is None else weights[row])
        np.testing.assert_array_equal(batched[row], single)


@pytest.mark.parametrize("call,error,message", [
    (lambda: index_distribution([0], 0), ValueError, r"idx_bits must be in range 1\.\.16, not 0"),
    (lambda: index_distribution([0], 17), ValueError, r"idx_bits must be in range 1\.\.16, not 17"),
    (lambda: index_distribution([0], True), TypeError, r"idx_bits must be an integer, not True"),
    (lambda: index_distribution([16], 4), ValueError, r"idx must hold 4-bit unsigned"),
    (lambda: index_distribution([-1], 4), ValueError, r"idx must hold 4-bit unsigned"),
    (lambda: index_distribution([0.0], 4), TypeError, r"idx must hold integers"),
    (lambda: index_distribution([[0]], 4), ValueError, r"idx must be 1-D"),
    (lambda: index_distributions([0], 4), ValueError, r"idx must be 2-D"),
    (lambda: index_distribution([0, 1], 4, mask=[1]), ValueError, r"mask must have shape"),
    (lambda: index_distribution([0, 1], 4, mask=[1, 2]), ValueError, r"mask must hold only 0"),
    (lambda: index_distribution([0], 4, mask=[0.5]), TypeError, r"mask must hold booleans"),
    (lambda: index_distribution([0], 4, weights=[1.0]), TypeError, r"weights must hold integ"),
    (lambda: index_distribution([0], 4, weights=[True]), TypeError, r"weights must hold integ"),
    (lambda: index_distribution([0, 1], 4, weights=[1]), ValueError, r"weights must have shape"),
    (lambda: index_distribution([0, 0, 0, 0], 4, weights=[2**61] * 4), ValueError,
     r"weights up to .* overflow"),
])
def test_index_distribution_rejects_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- counter_width ---------------------------------------------------------------------------


@pytest.mark.parametrize("max_len,mode,weight_bits,width", [
    (1, "kk", 4, 1), (2, "kk", 4, 2), (3, "kk", 4, 2), (4, "kk", 4, 3), (16, "kk", 4, 5),
    (4095, "kk", 4, 12), (4096, "kk", 4, 13),
    (4096, "ik", 4, 16),   # -32768 .. 28672
    (4095, "ik", 4, 16),   # -32760 .. 28665
    (2048, "ik", 4, 15),   # -16384 .. 14336
    (1, "ik", 4, 4),       # one weight: -8 .. 7
    (3, "ik", 4, 6),       # -24 .. 21
    (1, "ik", 1, 1),       # -1 .. 0
    (4096, "ik", 8, 20),   # -524288 .. 520192
])
def test_counter_width_hand_values(max_len, mode, weight_bits, width):
    assert counter_width(max_len, mode, weight_bits) == width


@pytest.mark.parametrize("max_len", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("weight_bits", [1, 2, 3])
def test_counter_width_is_the_minimum_by_brute_force(max_len, weight_bits):
    # Every result a reduction of up to max_len lanes can produce (a masked lane adds 0).
    lane_values = list(range(-(1 << (weight_bits - 1)), 1 << (weight_bits - 1))) + [0]
    reachable = {0}
    for _ in range(max_len):
        reachable = {s + v for s in reachable for v in lane_values}
    signed = 1
    while not all(-(1 << (signed - 1)) <= s < (1 << (signed - 1)) for s in reachable):
        signed += 1
    assert counter_width(max_len, "ik", weight_bits) == signed
    # kk: counts 0..max_len, unsigned.
    unsigned = 1
    while max_len >= (1 << unsigned):
        unsigned += 1
    assert counter_width(max_len, "kk") == unsigned
    # And the histogram of such a reduction really fits.
    low = index_distribution([0] * max_len, 1, weights=[lane_values[0]] * max_len)[0]
    assert low >= -(1 << (signed - 1))


@pytest.mark.parametrize("kwargs,error,message", [
    ({"max_len": 0, "mode": "kk"}, ValueError, r"max_len must be in range >= 1, not 0"),
    ({"max_len": 4.0, "mode": "kk"}, TypeError, r"max_len must be an integer, not 4\.0"),
    ({"max_len": 16, "mode": "kx"}, ValueError, r"mode must be 'kk' or 'ik', not 'kx'"),
    ({"max_len": 16, "mode": 1}, TypeError, r"mode must be a string"),
    ({"max_len": 16, "mode": "ik", "weight_bits": 0}, ValueError,
     r"weight_bits must be in range 1\.\.32, not 0"),
])
def test_counter_width_rejects_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        counter_width(**kwargs)


# --- K-Means quantization --------------------------------------------------------------------


def test_kmeans_codebook_is_deterministic_and_sorted():
    x = np.random.default_rng(11).standard_normal(3000)
    first = kmeans_codebook(x, 4, seed=3)
    assert first.shape == (16,) and np.all(np.diff(first) > 0)
    np.testing.assert_array_equal(kmeans_codebook(x, 4, seed=3), first)


def test_kmeans_codebook_finds_separated_clusters():
    rng = np.random.default_rng(12)
    centres = np.array([-3.0, -1.0, 0.5, 4.0])
    clumps = [c + 0.05 * rng.standard_normal(500) for c in centres]
    centroids = kmeans_codebook(np.concatenate(clumps), 2)
    np.testing.assert_allclose(centroids, [c.mean() for c in clumps], rtol=0, atol=1e-9)


def test_kmeans_codebook_uses_sample_weight():
    # Two clusters for three values 0, 1, 10. Unweighted: {0, 1} -> 0.5 and {10} -> 10.
    # With weight 1000 on the value 1 the first centroid is the weighted mean 1000/1001.
    x = np.repeat([0.0, 1.0, 10.0], 50)
    weight = np.repeat([1.0, 1000.0, 1.0], 50)
    np.testing.assert_allclose(kmeans_codebook(x, 1), [0.5, 10.0], rtol=1e-12)
    np.testing.assert_allclose(kmeans_codebook(x, 1, sample_weight=weight), [1000 / 1001, 10.0],
                               rtol=1e-12)
    # A zero weight removes a sample: only 1 and 10 are left, each its own centroid.
    np.testing.assert_array_equal(
        kmeans_codebook(x, 1, sample_weight=np.repeat([0.0, 1.0, 1.0], 50)), [1.0, 10.0])


def test_kmeans_codebook_degenerate_input():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        few = kmeans_codebook(np.tile([0.25, -1.0, 0.5], 40), 2)
        constant = kmeans_codebook(np.full(10, 0.75), 3)
    np.testing.assert_array_equal(few, [-1.0, 0.25, 0.5, 0.5])
    np.testing.assert_array_equal(constant, [0.75] * 8)
    # Values are reproduced exactly, the padding copies are never chosen.
    idx = kmeans_quantize([0.5, -1.0, 0.25, 0.6], few)
    assert idx.tolist() == [2, 0, 1, 2]
    np.testing.assert_array_equal(dequantize(idx[:3], few), [0.5, -1.0, 0.25])
    assert kmeans_quantize([3.0, -3.0], constant).tolist() == [0, 0]


def test_kmeans_quantize_is_nearest_centroid():
    rng = np.random.default_rng(13)
    centroids = np.sort(rng.standard_normal(16))
    x = rng.standard_normal((50, 40)) * 2
    expected = np.argmin(np.abs(x[..., None] - centroids), axis=-1)
    idx = kmeans_quantize(x, centroids)
    assert idx.shape == x.shape and idx.dtype == np.int64
    np.testing.assert_array_equal(idx, expected)
    # Exactly between two centroids: the lower index.
    assert kmeans_quantize([0.5, 1.5, 2.5], [0.0, 1.0, 2.0, 3.0]).tolist() == [0, 1, 2]


def test_quantize_weights_per_output_channel():
    rng = np.random.default_rng(14)
    w = rng.standard_normal((256, 8)) * np.array([0.01, 0.1, 1, 10, 100, 1, 1, 0])
    q = quantize_weights(w, 4)
    np.testing.assert_array_equal(q.scale[:7], np.abs(w[:, :7]).max(axis=0))
    assert q.scale[7] == 0.0                          # all-zero channel
    assert q.idx.shape == (256, 8) and q.centroids.shape == (16,)
    w_hat = q.centroids[q.idx] * q.scale
    assert np.all(np.isfinite(w_hat)) and np.all(w_hat[:, 7] == 0.0)
    # One shared codebook of normalized centroids; each weight takes the nearest one.
    normalized = w[:, :7] / np.abs(w[:, :7]).max(axis=0)
    assert np.all(np.abs(normalized).max(axis=0) == 1.0)
    nearest = np.argmin(np.abs(normalized[..., None] - q.centroids), axis=-1)
    np.testing.assert_array_equal(q.idx[:, :7], nearest)
    # 4-bit K-Means of a Gaussian: RMS error a few percent of each channel's max.
    rms = np.sqrt(np.mean((w_hat - w)[:, :7] ** 2, axis=0))
    assert np.all(rms < 0.05 * q.scale[:7])


def test_max_abs_scale():
    np.testing.assert_array_equal(max_abs_scale([[1, -3], [-2, 0]], axis=0), [2, 3])
    np.testing.assert_array_equal(max_abs_scale([[0, -3], [0, 2]], axis=1), [3, 2])
    assert max_abs_scale(np.zeros(5), axis=None) == 0.0


@pytest.mark.parametrize("call,error,message", [
    (lambda: kmeans_codebook([1.0, 2.0], 0), ValueError, r"n_bits must be in range 1\.\.8, not 0"),
    (lambda: kmeans_codebook([1.0, 2.0], 9), ValueError, r"n_bits must be in range 1\.\.8, not 9"),
    (lambda: kmeans_codebook([1.0], 2, seed=-1), ValueError, r"seed must be in range"),
    (lambda: kmeans_codebook([], 2), ValueError, r"x must hold at least one value"),
    (lambda: kmeans_codebook([1.0, np.nan], 2), ValueError, r"x must hold finite values"),
    (lambda: kmeans_codebook(["a"], 2), TypeError, r"x must hold real numbers"),
    (lambda: kmeans_codebook([1.0, 2.0], 1, sample_weight=[1.0]), ValueError,
     r"sample_weight must have the shape of x"),
    (lambda: kmeans_codebook([1.0, 2.0], 1, sample_weight=[1.0, -1.0]), ValueError,
     r"sample_weight must be non-negative"),
    (lambda: kmeans_codebook([1.0, 2.0], 1, sample_weight=[0, 0]), ValueError,
     r"sample_weight must not be all zero"),
    (lambda: kmeans_quantize([0.0], [1.0, 0.0]), ValueError, r"centroids must be in non-decr"),
    (lambda: kmeans_quantize([np.inf], [0.0, 1.0]), ValueError, r"x must hold finite values"),
    (lambda: dequantize([2], [0.0, 1.0]), ValueError, r"idx must hold indices 0\.\.1"),
    (lambda: dequantize([0.0], [0.0, 1.0]), TypeError, r"idx must hold integers"),
    (lambda: quantize_weights(np.ones(4), 4), ValueError, r"w must be 2-D"),
])
def test_quantization_rejects_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- outliers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("length,fraction,k", [
    (4096, 0.01, 21), (4096, 0.0, 0), (100, 0.01, 1), (200, 0.01, 1), (201, 0.01, 2),
    (10, 0.5, 3), (7, 1.0, 4), (0, 0.5, 0), (1, 1, 1),
])
def test_outliers_per_side(length, fraction, k):
    assert outliers_per_side(length, fraction) == k


def test_split_outliers_against_sorting():
    rng = np.random.default_rng(15)
    a = (rng.standard_normal(4096) * 3).astype(np.float16)
    a = np.unique(a)[:3100]                           # distinct values: no ties
    assert a.size == 3100
    rng.shuffle(a)
    inliers, (indices, values), mask = split_outliers(a, 0.01)
    k = 16                                            # ceil(0.01 * 3100 / 2) = ceil(15.5)
    ordered = np.sort(a)
    expected = (a <= ordered[k - 1]) | (a >= ordered[-k])
    np.testing.assert_array_equal(mask, expected)
    np.testing.assert_array_equal(indices, np.flatnonzero(expected))
    assert values.dtype == np.float16
    np.testing.assert_array_equal(values, a[expected])
    np.testing.assert_array_equal(inliers, np.where(expected, 0, a.astype(np.float64)))


def test_split_outliers_ties_overlap_and_fp16():
    a = np.array([1.0, 5.0, 5.0, 5.0, 0.0, 0.0])
    _, (indices, _), mask = split_outliers(a, 0.5)   # k = ceil(1.5) = 2 per side
    assert mask.tolist() == [False, True, True, False, True, True]
    assert indices.tolist() == [1, 2, 4, 5]
    # Odd length, fraction 1: both sides take ceil(5/2) = 3 and overlap; all are outliers.
    assert split_outliers(np.arange(5.0), 1.0)[2].all()
    # float64 input: the outliers are rounded to binary16, the inliers are not.
    a = np.array([1000.3, 0.1, 0.2, 0.3, -7.77])
    inliers, (indices, values), _ = split_outliers(a, 0.4)   # k = 1
    assert indices.tolist() == [0, 4]
    assert values.tolist() == [np.float16(1000.3), np.float16(-7.77)]
    assert inliers.tolist() == [0.0, 0.1, 0.2, 0.3, 0.0]


def test_split_outliers_tie_rule_is_orizurus():
    # Equal values: the largest side takes the lowest index first, the smallest side the
    # highest (Orizuru's max tree ties left, its min tree right).
    a = np.array([3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 2.0, 2.0])
    _, (indices, _), _ = split_outliers(a, 0.5)       # k = 2 per side
    assert indices.tolist() == [0, 1, 4, 5]
    # Signed zeros are ordered (-0 < +0), as binary16 totalOrder orders them.
    a = np.array([0.0, -0.0, 0.0, 5.0], dtype=np.float16)
    _, (indices, values), _ = split_outliers(a, 0.5)  # k = 1: -0 is the smallest
    assert indices.tolist() == [1, 3]
    assert np.signbit(values[0])
    # float64 values that round to the same binary16 tie (ranked as the hardware sees them).
    a = np.array([1.0001, 1.0002, 0.5, 0.25])
    assert np.float16(a[0]) == np.float16(a[1])
    _, (indices, _), _ = split_outliers(a, 0.25)      # k = 1: lane 0 wins the tie
    assert indices.tolist() == [0, 3]


@pytest.mark.parametrize("n,k,fraction", [(16, 2, 0.25), (64, 3, 0.09), (8, 4, 1.0)])
def test_split_outliers_mask_is_orizurus_mask(n, k, fraction):
    """The algorithm's outlier set is exactly Orizuru's mask (golden.kllm.orizuru), on vectors full
    of ties and signed zeros: few distinct binary16 values, both zeros among them."""
    from qllm_cores.golden.kllm.orizuru import orizuru

    assert outliers_per_side(n, fraction) == k
    rng = np.random.default_rng(n + k)
    alphabet = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 65504.0, -65504.0],
                        dtype=np.float16)
    for _ in range(200):
        a = rng.choice(alphabet[:rng.integers(2, alphabet.size + 1)], n)
        _, _, mask = split_outliers(a, fraction)
        np.testing.assert_array_equal(mask, orizuru(a.view(np.uint16), k).mask)


@pytest.mark.parametrize("call,error,message", [
    (lambda: split_outliers([1.0, 2.0], 1.5), ValueError, r"fraction must be in range 0\.\.1"),
    (lambda: split_outliers([1.0, 2.0], "1%"), TypeError, r"fraction must be a real number"),
    (lambda: split_outliers([1.0, np.nan], 0.5), ValueError, r"a must hold finite values"),
    (lambda: split_outliers([[1.0, 2.0]], 0.5), ValueError, r"a must be 1-D"),
    (lambda: split_outliers([1.0, 1e6], 0.5), ValueError, r"overflow binary16"),
    (lambda: outliers_per_side(-1, 0.5), ValueError, r"length must be in range >= 0"),
])
def test_outliers_reject_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_activation_codebook_excludes_outliers():
    rng = np.random.default_rng(16)
    tokens = rng.standard_normal((8, 1024))
    tokens[:, 5] = 80.0                               # one huge outlier channel
    tokens[:, 9] = -60.0
    protected = activation_codebook(tokens, 3, fraction=0.01)
    unprotected = activation_codebook(tokens, 3, fraction=0.0)
    # Normalized by the inliers' max, the inliers span about [-1, 1]; normalized by the
    # outlier, they are squeezed into a few percent of it.
    assert protected[-1] - protected[0] > 1.0
    assert unprotected[1] - unprotected[0] > unprotected[-2] - unprotected[1]
    weighted = activation_codebook(tokens, 3, sample_weight=np.abs(tokens))
    assert not np.array_equal(weighted, protected)
