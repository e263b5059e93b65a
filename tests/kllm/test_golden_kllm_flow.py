"""KLLM golden models past the units: index-based MatMul, the full Fig. 5 flow and the
nonlinear operations (``golden.kllm``; the counter, K-Means and outliers: test_golden_kllm.py)."""

import math

import numpy as np
import pytest
from scipy.special import expit

from qllm_cores.golden.kllm import (
    QuantizedActivation, activation_codebook, apply_elementwise, concat_indices, dequantize,
    dequantize_activation, index_elementwise_product, index_matmul_ik, index_matmul_kk,
    kllm_matmul, kllm_rmsnorm_matmul, product_codebook, quantize_activation, quantize_weights,
    rms_from_indices, rmsnorm, silu,
)


# --- index-based MatMul ------------------------------------------------------------------------


def random_codebook(rng, bits):
    return np.sort(rng.standard_normal(1 << bits))


def test_product_codebook_matches_concat_projection():
    ca, cb = np.array([-1.5, 2.0]), np.array([-3.0, -0.5, 0.25, 4.0])
    codebook = product_codebook(ca, cb)
    for i in range(2):
        for j in range(4):
            assert codebook[int(concat_indices([i], [j], 1, 2)[0])] == ca[i] * cb[j]


def test_index_matmul_kk_hand_example():
    # K = 4, N = 1, n_A = 1, n_B = 2. Concatenated indices 7, 0, 7, 5 -> histogram
    # {0: 1, 5: 1, 7: 2}; codebook[0] = 0.5 * -1, [5] = 2 * 0, [7] = 2 * 4 -> Y = 15.5.
    y = index_matmul_kk([1, 0, 1, 1], [[3], [0], [3], [1]], [0.5, 2.0], [-1.0, 0.0, 1.0, 4.0],
                        1, 2)
    assert y.tolist() == [15.5]


@pytest.mark.parametrize("length,columns,a_bits,b_bits", [
    (8, 4, 1, 2),                                     # the paper's Fig. 3 example
    (37, 5, 2, 3),                                    # K not a multiple of 16
    (4096, 64, 4, 4),                                 # W4A4
    (4096, 64, 3, 4),                                 # W4A3
    (100, 3, 8, 8),                                   # 16-bit product indices
])
def test_index_matmul_kk_equals_dense(length, columns, a_bits, b_bits):
    rng = np.random.default_rng(length + columns)
    ca, cb = random_codebook(rng, a_bits), random_codebook(rng, b_bits)
    a_idx = rng.integers(0, 1 << a_bits, length)
    b_idx = rng.integers(0, 1 << b_bits, (length, columns))
    y = index_matmul_kk(a_idx, b_idx, ca, cb, a_bits, b_bits)
    np.testing.assert_allclose(y, ca[a_idx] @ cb[b_idx], rtol=1e-12, atol=1e-12 * length)
    # Masked rows drop out of the reduction.
    mask = rng.random(length) < 0.7
    y = index_matmul_kk(a_idx, b_idx, ca, cb, a_bits, b_bits, mask=mask)
    np.testing.assert_allclose(y, ca[a_idx[mask]] @ cb[b_idx[mask]], rtol=1e-12,
                               atol=1e-12 * length)


def test_index_matmul_kk_is_exact_on_integer_centroids():
    rng = np.random.default_rng(17)
    ca, cb = np.arange(-8.0, 8.0), np.arange(-7.0, 9.0)
    a_idx, b_idx = rng.integers(0, 16, 4096), rng.integers(0, 16, (4096, 16))
    np.testing.assert_array_equal(index_matmul_kk(a_idx, b_idx, ca, cb, 4, 4),
                                  ca[a_idx] @ cb[b_idx])


def test_index_elementwise_product():
    rng = np.random.default_rng(18)
    ca, cb = random_codebook(rng, 3), random_codebook(rng, 4)
    a_idx, b_idx = rng.integers(0, 8, (6, 7)), rng.integers(0, 16, (6, 7))
    idx, codebook = index_elementwise_product(a_idx, b_idx, ca, cb, 3, 4)
    np.testing.assert_array_equal(dequantize(idx, codebook), ca[a_idx] * cb[b_idx])


@pytest.mark.parametrize("length,columns,bits", [(8, 4, 2), (37, 5, 3), (4096, 64, 4)])
def test_index_matmul_ik_equals_dense(length, columns, bits):
    rng = np.random.default_rng(length * 3 + columns)
    centroids = random_codebook(rng, bits)
    km = rng.integers(0, 1 << bits, length)
    integers = rng.integers(-8, 8, (length, columns))
    integers[0] = -8                                  # extreme weights present
    integers[1] = 7
    mask = rng.random(length) < 0.9
    # The paper's notation: A K-Means-quantized, B integer-quantized.
    y = index_matmul_ik(km, integers, centroids, bits, mask=mask)
    np.testing.assert_allclose(y, centroids[km[mask]] @ integers[mask], rtol=1e-12,
                               atol=1e-12 * length)
    # Scores x V: A (scores) integer, B (V) K-Means.
    scores = integers[:, 0]
    v_idx = rng.integers(0, 1 << bits, (length, columns))
    y = index_matmul_ik(scores, v_idx, centroids, bits, integer_operand="a")
    np.testing.assert_allclose(y, scores @ centroids[v_idx], rtol=1e-12, atol=1e-12 * length)


@pytest.mark.parametrize("call,error,message", [
    (lambda: index_matmul_kk([0], [[0]], [0.0, 1.0], [0.0, 1.0], 0, 1), ValueError,
     r"a_bits must be in range 1\.\.8, not 0"),
    (lambda: index_matmul_kk([0], [[0]], [0.0, 1.0, 2.0], [0.0, 1.0], 1, 1), ValueError,
     r"ca must hold 2\*\*1 = 2 centroids, not 3"),
    (lambda: index_matmul_kk([0], [[2]], [0.0, 1.0], [0.0, 1.0], 1, 1), ValueError,
     r"b_idx must hold 1-bit"),
    (lambda: index_matmul_kk([0, 1], [[0]], [0.0, 1.0], [0.0, 1.0], 1, 1), ValueError,
     r"b_idx must have K = 2 rows"),
    (lambda: index_matmul_kk([0], [0], [0.0, 1.0], [0.0, 1.0], 1, 1), ValueError,
     r"b_idx must be 2-D"),
    (lambda: index_matmul_ik([0], [[0.5]], [0.0, 1.0], 1), TypeError, r"b must hold integers"),
    (lambda: index_matmul_ik([0.5], [[0]], [0.0, 1.0], 1, integer_operand="a"), TypeError,
     r"a must hold integers"),
    (lambda: index_matmul_ik([0], [[0]], [0.0, 1.0], 1, integer_operand="c"), ValueError,
     r"integer_operand must be 'a' or 'b', not 'c'"),
    (lambda: index_matmul_ik([0], [[0]], [0.0, 1.0], 2), ValueError,
     r"centroids must hold 2\*\*2 = 4 centroids"),
])
def test_matmul_rejects_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- the full Fig. 5 flow ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def layer():
    """A K = 4096, N = 64 layer: W4 weights and A4/A3 activation codebooks."""
    rng = np.random.default_rng(19)
    w = rng.standard_normal((4096, 64)) * rng.uniform(0.5, 2.0, 64)
    calibration = rng.standard_normal((4, 4096))
    return {
        "w": w,
        "wq": quantize_weights(w, 4, n_init=1),
        "ca": {bits: activation_codebook(calibration, bits, n_init=1) for bits in (3, 4)},
    }


def reference_dequantized_activation(a, ca, k):
    """Fig. 5 by hand: k largest and k smallest in FP16, the rest scaled and nearest-rounded."""
    a64 = a.astype(np.float64)
    order = np.argsort(a64)
    outlier = np.zeros(a.size, dtype=bool)
    outlier[order[:k]] = outlier[order[a.size - k:]] = True
    scale = np.abs(a64[~outlier]).max()
    nearest = np.argmin(np.abs(a64[:, None] / scale - ca[None, :]), axis=1)
    return np.where(outlier, a64.astype(np.float16).astype(np.float64), scale * ca[nearest])


@pytest.mark.parametrize("a_bits", [4, 3])
def test_kllm_matmul_equals_dequantized_float_matmul(layer, a_bits):
    rng = np.random.default_rng(20 + a_bits)
    a = rng.standard_normal(4096)
    a[rng.choice(4096, 30, replace=False)] *= 40      # activation outliers
    a = a.astype(np.float16)
    wq, ca = layer["wq"], layer["ca"][a_bits]
    y, y_dense, y_sparse = kllm_matmul(a, ca, wq.idx, wq.centroids, wq.scale, 0.01,
                                       return_parts=True)
    w_hat = wq.centroids[wq.idx] * wq.scale
    a_hat = reference_dequantized_activation(a, ca, 21)
    np.testing.assert_allclose(y, a_hat @ w_hat, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(y_dense + y_sparse, y, rtol=0, atol=0)
    outliers = np.zeros(4096, dtype=bool)
    outliers[np.argsort(a.astype(np.float64))[[*range(21), *range(-21, 0)]]] = True
    np.testing.assert_allclose(y_sparse, a[outliers].astype(np.float64) @ w_hat[outliers],
                               rtol=1e-10, atol=1e-9)
    # The quantized result approximates the float MatMul, and outlier protection matters.
    exact = a.astype(np.float64) @ layer["w"]
    unprotected = kllm_matmul(a, ca, wq.idx, wq.centroids, wq.scale, 0.0)
    error = np.linalg.norm(y - exact) / np.linalg.norm(exact)
    assert error < (0.15 if a_bits == 4 else 0.25)
    assert np.linalg.norm(unprotected - exact) / np.linalg.norm(exact) > 2 * error


def test_kllm_matmul_fig3_size_and_zero_input():
    rng = np.random.default_rng(21)
    ca, cb = random_codebook(rng, 1), random_codebook(rng, 2)
    b_idx, b_scale = rng.integers(0, 4, (8, 4)), rng.uniform(0.5, 2, 4)
    a = rng.standard_normal(8)
    y = kllm_matmul(a, ca, b_idx, cb, b_scale, fraction=0.25)   # k = 1 per side
    a_hat = reference_dequantized_activation(a, ca, 1)
    np.testing.assert_allclose(y, a_hat @ (cb[b_idx] * b_scale), rtol=1e-12, atol=1e-12)
    assert kllm_matmul(np.zeros(8), ca, b_idx, cb, b_scale).tolist() == [0.0] * 4


def test_quantize_activation_round_trip():
    rng = np.random.default_rng(22)
    ca = np.linspace(-1, 1, 8)
    a = rng.standard_normal(300)
    q = quantize_activation(a, ca, 0.02)
    assert isinstance(q, QuantizedActivation)
    assert np.count_nonzero(~q.counted) == 6 and np.all(q.idx[~q.counted] == 0)
    np.testing.assert_allclose(dequantize_activation(q, ca),
                               reference_dequantized_activation(a, ca, 3), rtol=1e-15)


@pytest.mark.parametrize("call,error,message", [
    (lambda: kllm_matmul(np.ones(4), [0.0, 1.0, 2.0], np.zeros((4, 2), int), [0.0, 1.0],
                         np.ones(2)), ValueError, r"ca must hold 2\*\*n centroids"),
    (lambda: kllm_matmul(np.ones(4), [0.0, 1.0], np.zeros((4, 2), int), [0.0, 1.0],
                         np.ones(3)), ValueError, r"b_scale must have shape \(2,\)"),
    (lambda: kllm_matmul(np.ones(5), [0.0, 1.0], np.zeros((4, 2), int), [0.0, 1.0],
                         np.ones(2)), ValueError, r"b_idx must have K = 5 rows"),
    (lambda: kllm_rmsnorm_matmul(np.zeros(4), [0.0, 1.0], np.zeros((4, 2), int), [0.0, 1.0],
                                 np.ones(2)), ValueError, r"RMS is 0"),
    (lambda: dequantize_activation((1, 2), [0.0, 1.0]), TypeError,
     r"q must be a QuantizedActivation"),
])
def test_flow_rejects_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- nonlinear operations ----------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1.0, 0.37, 6.5])
def test_silu_by_codebook_substitution(scale):
    rng = np.random.default_rng(23)
    ca = random_codebook(rng, 4)
    idx = rng.integers(0, 16, 1000)
    out = apply_elementwise(ca, silu, scale)
    x = scale * ca[idx]
    np.testing.assert_allclose(dequantize(idx, out), x * expit(x), rtol=1e-14, atol=1e-300)
    # The index vector is untouched: only the 16 centroids were evaluated.
    assert out.shape == (16,)


def test_silu_reference_values():
    np.testing.assert_allclose(silu([0.0, 1.0, -1.0, -800.0, 800.0]),
                               [0.0, 1 / (1 + math.exp(-1)), -1 / (1 + math.e), 0.0, 800.0],
                               rtol=1e-15, atol=1e-300)


@pytest.mark.parametrize("call,error,message", [
    (lambda: apply_elementwise([0.0, 1.0], 3), TypeError, r"fn must be callable"),
    (lambda: apply_elementwise([0.0, 1.0], np.sum), ValueError, r"fn must return one value"),
    (lambda: apply_elementwise([-1.0, 1.0], np.log), ValueError, r"non-finite output centroid"),
])
def test_apply_elementwise_rejects_bad_functions(call, error, message):
    with np.errstate(invalid="ignore"), pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_rmsnorm_fusion_equals_direct(layer, eps):
    rng = np.random.default_rng(24)
    a = rng.standard_normal(4096) * 0.3
    a[[3, 99, 1500]] = [9.0, -11.0, 14.0]
    a = a.astype(np.float16)
    wq, ca = layer["wq"], layer["ca"][4]
    y = kllm_rmsnorm_matmul(a, ca, wq.idx, wq.centroids, wq.scale, 0.01, eps)
    x_hat = reference_dequantized_activation(a, ca, 21)
    direct = x_hat / np.sqrt(np.mean(x_hat ** 2) + eps)
    np.testing.assert_allclose(y, direct @ (wq.centroids[wq.idx] * wq.scale), rtol=1e-10,
                               atol=1e-9)
    np.testing.assert_allclose(rmsnorm(x_hat, eps), direct, rtol=1e-14)
    q = quantize_activation(a, ca, 0.01)
    assert rms_from_indices(q, ca, eps) == pytest.approx(math.sqrt(np.mean(x_hat ** 2) + eps),
                                                         rel=1e-12)


def test_wrap_counts_is_the_value_a_width_bit_counter_holds():
    from qllm_cores.golden.kllm import wrap_counts

    # 3-bit counters: unsigned 0..7 ("kk"), two's complement -4..3 ("ik").
    assert wrap_counts([0, 7, 8, 9, 17], 3, "kk").tolist() == [0, 7, 0, 1, 1]
    assert wrap_counts([3, 4, -4, -5, 12], 3, "ik").tolist() == [3, -4, -4, 3, -4]
