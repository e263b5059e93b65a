"""Golden models of KLLM's index-based MatMul: the product codebook, K-Means x K-Means and
Integer x K-Means MatMuls from indices, and the full MatMul of Fig. 5.

Reference: KLLM section III-B (Fig. 3: (1) concatenate indices, (2) histogram them with the
Index Distribution Counter, (3) reduce with the offline product codebook) and III-D (Fig. 5:
the dense index path and the sparse FP16 outlier path). Float references of the paper's
algorithm (float64).

Reading adopted here (the contract: "the code must document the reading"):

* **Integer x K-Means** (section III-B2, IV-B): in the paper's notation ``A`` (1 x K) is
  K-Means-quantized and ``B`` (K x N) integer-quantized; the counter one-hot decodes A's
  indices and adds B's integers ("+n counting"). In the model itself the integer operand is
  the attention score and the K-Means operand is V (activation), i.e. the other way round;
  :func:`index_matmul_ik` supports both with ``integer_operand``.
"""

import numpy as np

from ..common.checks import check_int as _check_int
from .checks import check_codebook as _check_codebook
from .checks import check_index_array as _check_index_array
from .checks import check_int64_array as _check_int_array
from .checks import check_mask as _check_mask
from .checks import check_ndim as _check_ndim
from .checks import check_real_array as _check_real_array
from .checks import check_vector_matrix as _check_vector_matrix
from .checks import codebook_bits as _codebook_bits
from .concat import concat_indices
from .idx_counter import index_distributions
from .kmeans import quantize_activation

__all__ = [
    "product_codebook", "index_elementwise_product", "index_matmul_kk", "index_matmul_ik",
    "kllm_matmul",
    # the two halves of kllm_matmul, shared with golden.kllm.nonlinear.kllm_rmsnorm_matmul
    "quantize_operands", "kllm_parts",
]


def product_codebook(ca, cb):
    """Return the offline Cartesian-product codebook of the partial-sum matrix Y'.

    Section III-B1, Fig. 3(a): ``codebook[concat(i, j)] = ca[i] * cb[j]`` with ``concat`` from
    :func:`concat_indices` (activation index high), i.e. ``2**(n_A+n_B)`` FP products.
    """
    ca = _check_codebook("ca", ca)
    cb = _check_codebook("cb", cb)
    return np.outer(ca, cb).ravel()


def _check_matmul_operands(a_idx, b_idx, a_bits, b_bits):
    a_idx = _check_index_array("a_idx", a_idx, a_bits)
    b_idx = _check_index_array("b_idx", b_idx, b_bits)
    _check_vector_matrix("a_idx", a_idx, "b_idx", b_idx)
    return a_idx, b_idx


def index_elementwise_product(a_idx, b_idx, ca, cb, a_bits, b_bits):
    """Element-wise product of two K-Means-quantized tensors, by index concatenation.

    Section III-B1, last paragraph (e.g. the gate x up product in LLaMA's FFN): only step 1 of
    the index-based MatMul. The product is ``codebook[idx]``.

    Returns
    -------
    idx : numpy.ndarray of int64
        ``concat_indices(a_idx, b_idx, a_bits, b_bits)``.
    codebook : numpy.ndarray of float64, shape (2**(a_bits + b_bits),)
        :func:`product_codebook` of ``ca`` and ``cb``.
    """
    a_bits = _check_int("a_bits", a_bits, 1, 8)
    b_bits = _check_int("b_bits", b_bits, 1, 8)
    ca = _check_codebook("ca", ca, a_bits)
    cb = _check_codebook("cb", cb, b_bits)
    return concat_indices(a_idx, b_idx, a_bits, b_bits), product_codebook(ca, cb)


def index_matmul_kk(a_idx, b_idx, ca, cb, a_bits, b_bits, mask=None):
    """K-Means x K-Means MatMul ``Y = ca[a_idx] @ cb[b_idx]`` computed from indices.

    Section III-B1, Fig. 3(a), scaling factors and outliers omitted as in the paper:
    (1) concatenate the activation index (high) with each column's weight index (low);
    (2) histogram each column's ``n_A + n_B``-bit indices with the Index Distribution Counter
    (:func:`index_distribution`, "kk" mode); (3) reduce with ``2**(n_A+n_B)`` multiply-adds,
    ``Y[n] = hist_n @ product_codebook(ca, cb)``.

    Parameters
    ----------
    a_idx : array_like of int, shape (K,)
        Activation indices (vector A, 1 x K).
    b_idx : array_like of int, shape (K, N)
        Weight indices (matrix B).
    ca, cb : array_like of float
        Codebooks of ``2**a_bits`` and ``2**b_bits`` centroids.
    a_bits, b_bits : int
        n_A and n_B, 1..8 each.
    mask : array_like of bool or 0/1 int, shape (K,), optional
        Rows k of the reduction that count (False: an outlier row, handled by the sparse
        path). None counts all.

    Returns
    -------
    numpy.ndarray of float64, shape (N,)
    """
    a_bits = _check_int("a_bits", a_bits, 1, 8)
    b_bits = _check_int("b_bits", b_bits, 1, 8)
    ca = _check_codebook("ca", ca, a_bits)
    cb = _check_codebook("cb", cb, b_bits)
    a_idx, b_idx = _check_matmul_operands(a_idx, b_idx, a_bits, b_bits)
    counted = _check_mask("mask", mask, a_idx.shape)
    length, columns = b_idx.shape
    y_idx = concat_indices(np.broadcast_to(a_idx[:, None], b_idx.shape), b_idx, a_bits, b_bits)
    hist = index_distributions(y_idx.T, a_bits + b_bits,
                               mask=np.broadcast_to(counted, (columns, length)))
    return hist @ product_codebook(ca, cb)


def index_matmul_ik(a, b, centroids, idx_bits, integer_operand="b", mask=None):
    """Integer x K-Means MatMul ``Y = A @ B`` with "+n" counting (section III-B2, Fig. 3(b)).

    The integer operand needs no Cartesian product: its values are its indices, so the K-Means
    operand's codebook serves as the codebook of Y', and the counter adds the integer value of
    each lane to the bin of its K-Means index ("ik" mode of :func:`index_distribution`). Then
    ``Y[n] = hist_n @ centroids``.

    * ``integer_operand="b"`` (the paper's notation, "let vector A be K-Means-quantized and B
      be integer-quantized"; section IV-B decodes A's indices and weights them by B): ``a``
      holds K-Means indices (K,), ``b`` integers (K, N). Column n counts ``a`` weighted by
      ``b[:, n]``.
    * ``integer_operand="a"`` (the attention-score x V MatMul as the model runs it: integer
      scores, K-Means V): ``a`` holds integers (K,), ``b`` K-Means indices (K, N). Column n
      counts ``b[:, n]`` weighted by ``a``.

    Integers are taken as given (signed, zero point already removed); their scale and the
    K-Means scale multiply Y outside this function.

    Parameters
    ----------
    a : array_like of int, shape (K,)
    b : array_like of int, shape (K, N)
    centroids : array_like of float, shape (2**idx_bits,)
        Codebook of the K-Means operand.
    idx_bits : int
        K-Means index width, 1..16.
    integer_operand : str
        ``"b"`` (default) or ``"a"``.
    mask : array_like of bool or 0/1 int, shape (K,), optional
        Rows of the reduction that count. None counts all.

    Returns
    -------
    numpy.ndarray of float64, shape (N,)
    """
    idx_bits = _check_int("idx_bits", idx_bits, 1, 16)
    centroids = _check_codebook("centroids", centroids, idx_bits)
    if not isinstance(integer_operand, str):
        raise TypeError(f"integer_operand must be a string, not {integer_operand!r}")
    if integer_operand not in ("a", "b"):
        raise ValueError(f"integer_operand must be 'a' or 'b', not {integer_operand!r}")
    if integer_operand == "b":
        a = _check_index_array("a", a, idx_bits)
        b = _check_int_array("b", b)
    else:
        a = _check_int_array("a", a)
        b = _check_index_array("b", b, idx_bits)
    _check_vector_matrix("a", a, "b", b)
    counted = _check_mask("mask", mask, a.shape)
    length, columns = b.shape
    rows_a = np.broadcast_to(a, (columns, length))
    rows_mask = np.broadcast_to(counted, (columns, length))
    if integer_operand == "b":
        hist = index_distributions(rows_a, idx_bits, rows_mask, weights=b.T)
    else:
        hist = index_distributions(b.T, idx_bits, rows_mask, weights=rows_a)
    return hist @ centroids


def _check_weight_operands(b_idx, cb, b_scale):
    b_bits = _codebook_bits("cb", cb)
    cb = _check_codebook("cb", cb)
    b_idx = _check_index_array("b_idx", b_idx, b_bits)
    _check_ndim("b_idx", b_idx, 2, "(K, N)")
    b_scale = _check_real_array("b_scale", b_scale)
    if b_scale.shape != (b_idx.shape[1],):
        raise ValueError(f"b_scale must have shape ({b_idx.shape[1]},) (one scale per output "
                         f"channel), not {b_scale.shape}")
    return b_idx, cb, b_scale, b_bits


def quantize_operands(a, ca, b_idx, cb, b_scale, fraction):
    """Check the weight operands, quantize the activation, and check that K agrees."""
    a_bits = _codebook_bits("ca", ca)
    b_idx, cb, b_scale, b_bits = _check_weight_operands(b_idx, cb, b_scale)
    q = quantize_activation(a, ca, fraction)
    if q.idx.shape[0] != b_idx.shape[0]:
        raise ValueError(f"b_idx must have K = {q.idx.shape[0]} rows (the length of a), "
                         f"not {b_idx.shape[0]}")
    return a_bits, b_idx, cb, b_scale, b_bits, q


def kllm_parts(q, ca, b_idx, cb, b_scale, a_bits, b_bits, dense_scale, weight_divisor):
    """Dense index path and sparse FP16 path of Fig. 5 for a quantized token ``q``."""
    dense = index_matmul_kk(q.idx, b_idx, ca, cb, a_bits, b_bits, mask=q.counted)
    y_dense = dense_scale * b_scale * dense
    # Sparse path: the outlier rows of B are dequantized (codebook lookup) and multiplied by the
    # FP16 outlier values. An RMSNorm denominator is folded into the weight centroids here.
    cb_sparse = cb / weight_divisor
    b_outlier = cb_sparse[b_idx[q.outlier_indices]] * b_scale
    y_sparse = q.outlier_values.astype(np.float64) @ b_outlier
    return y_dense, y_sparse


def kllm_matmul(a, ca, b_idx, cb, b_scale, fraction=0.01, return_parts=False):
    """The full KLLM MatMul of Fig. 5: ``Y = A @ B`` with outliers and scaling factors.

    Section III-D: Orizuru splits the FP16 activation A into FP16 outliers A_o and inliers A_i;
    A_i is quantized per token (:func:`quantize_activation`) and multiplied with the weight
    indices by the index-based scheme (:func:`index_matmul_kk` with the outlier rows masked);
    the product of the two scales, ``s_A * s_B[n]``, is applied to that result Y_i; the outlier
    rows of B are dequantized and multiplied with A_o (sparse FP16 path, Y_o);
    ``Y = Y_i + Y_o``. All in float64 except the FP16 outlier values.

    Parameters
    ----------
    a : array_like of float, shape (K,)
        Input activation (one token; ``float16`` in the paper).
    ca : array_like of float, shape (2**n_A,)
        Normalized activation codebook, sorted.
    b_idx : array_like of int, shape (K, N)
        Weight indices.
    cb : array_like of float, shape (2**n_B,)
        Normalized weight codebook.
    b_scale : array_like of float, shape (N,)
        Per-output-channel weight scales.
    fraction : float
        Total activation outlier fraction (default 0.01).
    return_parts : bool
        Also return ``Y_i`` and ``Y_o``.

    Returns
    -------
    numpy.ndarray of float64, shape (N,)
        Y, or ``(Y, Y_i, Y_o)`` with ``return_parts``.
    """
    a_bits, b_idx, cb, b_scale, b_bits, q = quantize_operands(a, ca, b_idx, cb, b_scale,
                                                               fraction)
    y_dense, y_sparse = kllm_parts(q, ca, b_idx, cb, b_scale, a_bits, b_bits, q.scale, 1.0)
    y = y_dense + y_sparse
    return (y, y_dense, y_sparse) if return_parts else y
