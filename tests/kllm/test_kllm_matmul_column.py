"""A column of KLLM's index-based MatMul through the RTL: Concat array -> Index Distribution
Counter -> golden reduction, compared with the golden float MatMul (KLLM Fig. 3(a), Fig. 5).

Both units run in Verilator under random backpressure; the Concat array's output beats are the
counter's input beats, and the activation outlier mask (Fig. 5's dense/sparse split) masks the
counter's lanes. A second test feeds the counter's lane mask from Orizuru's RTL instead, on
activations full of ties and signed zeros, where only a shared tie rule keeps the two equal.
"""

import numpy as np
import pytest

from qllm_cores.golden.kllm import (concat_indices, index_distributions, kmeans_codebook,
    kmeans_quantize, outliers_per_side, product_codebook, split_outliers)
from qllm_cores.verif.runner import replay

A_BITS = B_BITS = 4
LANES = 16


@pytest.mark.sim
def test_index_matmul_columns_through_concat_and_counter():
    rng = np.random.default_rng(11)
    k, columns = 1024, 3
    activations = rng.standard_normal(k) * np.exp(rng.standard_normal(k))  # heavy tails
    weights = rng.standard_normal((k, columns))
    inliers, _, outlier_mask = split_outliers(activations, fraction=0.01)
    counted = ~np.asarray(outlier_mask, dtype=bool)
    ca = kmeans_codebook(inliers[counted], A_BITS, seed=1)
    cb = kmeans_codebook(weights.ravel(), B_BITS, seed=2)
    a_idx = kmeans_quantize(activations, ca)    # outlier lanes get an index too; masked below
    b_idx = kmeans_quantize(weights, cb)

    # Step 1 in RTL: the Concat array, one column after another, 16 indices per beat.
    beats = k // LANES
    a_beats = np.tile(a_idx.reshape(beats, LANES), (columns, 1))
    b_beats = b_idx.T.reshape(columns * beats, LANES)
    concat = replay("kllm_concat", {"a_bits": A_BITS, "b_bits": B_BITS, "lanes": LANES},
                    {"i": {"a": a_beats, "b": b_beats}}, columns * beats,
                    valid_probability=0.8, ready_probability=0.7)["o"]["y"]
    np.testing.assert_array_equal(concat, concat_indices(a_beats, b_beats, A_BITS, B_BITS))

    # Step 2 in RTL: the counter, one reduction per column, outlier lanes masked.
    mask_bits = counted.reshape(beats, LANES).astype(np.int64) @ (1 << np.arange(LANES))
    last = np.zeros(columns * beats, dtype=np.int64)
    last[beats - 1::beats] = 1
    bins = 1 << (A_BITS + B_BITS)
    counts = replay("kllm_idx_counter", {"n_inputs": LANES, "idx_bits": A_BITS + B_BITS},
                    {"i": {"idx": concat, "mask": np.tile(mask_bits, columns), "last": last}},
                    columns * bins, valid_probability=0.8, ready_probability=0.7)["o"]
    histograms = counts["count"].reshape(columns, bins)
    assert counts["last"].reshape(columns, bins)[:, -1].all()
    expected = index_distributions(concat.reshape(columns, k), A_BITS + B_BITS,
                                   mask=np.tile(counted, (columns, 1)))
    np.testing.assert_array_equal(histograms, expected)

    # Step 3 in the golden model: the weighted sum with the offline Cartesian-product codebook,
    # equal to the float MatMul of the dequantized inliers with the dequantized weights.
    y_index = histograms @ product_codebook(ca, cb)
    y_float = (ca[a_idx] * counted) @ cb[b_idx]
    np.testing.assert_allclose(y_index, y_float, rtol=1e-12, atol=1e-9)
    assert counted.sum() < k  # the outlier path was exercised


@pytest.mark.sim
@pytest.mark.large
def test_orizuru_mask_drives_the_counter_mask_on_ties_and_signed_zeros():
    """KLLM Fig. 5: Orizuru marks each 16-element activation vector's outliers and the counter
    skips those lanes. With few distinct binary16 values (both zeros among them) nearly every
    vector has ties at its top-k and bottom-k boundaries: the RTL's mask must still be the
    algorithm's (`split_outliers`), and the counter's histograms the golden ones."""
    rng = np.random.default_rng(21)
    n, k, tokens, per_reduction = LANES, 2, 96, 16
    fraction = 0.25
    assert outliers_per_side(n, fraction) == k
    alphabet = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1024.0, -1024.0], dtype=np.float16)
    activations = np.stack([rng.choice(alphabet[:rng.integers(2, alphabet.size + 1)], n)
                            for _ in range(tokens)])
    expected_masks = np.stack([split_outliers(token, fraction)[2] for token in activations])

    beats = replay("orizuru", {"n": n, "k": k}, {"i": {"x": activations.view(np.uint16)}},
                   tokens * k, valid_probability=0.8, ready_probability=0.7)["o"]
    assert beats["last"].tolist() == [0, 1] * tokens
    lane_bits = 1 << np.arange(n)
    rtl_masks = (beats["mask"][k - 1::k, None] & lane_bits) != 0
    np.testing.assert_array_equal(rtl_masks, expected_masks)

    # The counter's lane mask is the complement of Orizuru's, one token per beat.
    idx = rng.integers(0, 1 << (A_BITS + B_BITS), (tokens, n))
    last = (np.arange(tokens) % per_reduction == per_reduction - 1).astype(np.int64)
    bins = 1 << (A_BITS + B_BITS)
    counts = replay("kllm_idx_counter", {"n_inputs": n, "idx_bits": A_BITS + B_BITS},
                    {"i": {"idx": idx, "mask": (~rtl_masks).astype(np.int64) @ lane_bits, "last": last}},
                    tokens // per_reduction * bins, valid_probability=0.8,
                    ready_probability=0.7)["o"]
    expected = index_distributions(idx.reshape(-1, per_reduction * n), A_BITS + B_BITS,
                                   mask=~expected_masks.reshape(-1, per_reduction * n))
    np.testing.assert_array_equal(counts["count"].reshape(-1, bins), expected)
