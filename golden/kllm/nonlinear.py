"""Golden models of KLLM's index-based nonlinear operations: element-wise functions on the
codebook, RMSNorm from the index histogram, and RMSNorm fused into the MatMul.

Reference: KLLM section III-C (Fig. 4: SiLU (Eq. 2) and RMSNorm (Eq. 3) on 2**n centroids
instead of K elements; the RMSNorm division delayed into the scaling factors). Float references
of the paper's algorithm (float64).
"""

import math

import numpy as np

from .checks import check_codebook as _check_codebook
from .checks import check_real_array as _check_real_array
from .checks import codebook_bits as _codebook_bits
from .idx_counter import index_distribution
from .kmeans import QuantizedActivation
from .matmul import kllm_parts as _kllm_parts
from .matmul import quantize_operands as _quantize_operands

__all__ = ["silu", "apply_elementwise", "rmsnorm", "rms_from_indices", "kllm_rmsnorm_matmul"]


def silu(x):
    """SiLU (Eq. 2), ``x / (1 + exp(-x))``, in float64."""
    x = _check_real_array("x", x, finite=False)
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


def apply_elementwise(centroids, fn, scale=1.0):
    """Apply an R -> R function to a quantized tensor by replacing its codebook.

    Section III-C1: the output has the same index vector as the input; its centroids are
    ``fn`` of the input centroids, 2**n evaluations instead of one per element.

    With per-token scaling (section III-A) the function sees ``scale * c``, not ``c``: unless
    ``fn`` is positively homogeneous (ReLU), SiLU(s * c) != s * SiLU(c). This model therefore
    returns ``fn(scale * centroids)`` as an absolute-valued codebook (output scale 1): 2**n
    evaluations per token, or offline if ``scale`` is fixed. FP16 outliers go through ``fn``
    directly.

    Parameters
    ----------
    centroids : array_like of float, shape (C,)
    fn : callable
        Vectorized R -> R function (e.g. :func:`silu`).
    scale : float
        Scale of the token the codebook is applied to (default 1: the normalized codebook).

    Returns
    -------
    numpy.ndarray of float64, shape (C,)

    Raises
    ------
    TypeError
        If ``fn`` is not callable.
    ValueError
        If ``fn`` changes the shape or returns a non-finite centroid.
    """
    centroids = _check_codebook("centroids", centroids)
    if not callable(fn):
        raise TypeError(f"fn must be callable, not {fn!r}")
    scale = float(_check_real_array("scale", scale))
    out = np.asarray(fn(scale * centroids), dtype=np.float64)
    if out.shape != centroids.shape:
        raise ValueError(f"fn must return one value per centroid (shape {centroids.shape}), "
                         f"not shape {out.shape}")
    if not np.all(np.isfinite(out)):
        raise ValueError("fn returned a non-finite output centroid")
    return out


def rmsnorm(x, eps=0.0):
    """RMSNorm (Eq. 3) along the last axis: ``x / sqrt(mean(x**2) + eps)``, float64.

    The learned gain is taken as folded into the next layer's weights (a per-input-channel
    scale of B's rows, applied offline before quantization) and so is not part of this model.
    """
    x = _check_real_array("x", x)
    eps = float(_check_real_array("eps", eps))
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def rms_from_indices(q, ca, eps=0.0):
    """RMS of a quantized token from its index histogram (section III-C2, Fig. 4 steps 1-2).

    Step 1 squares the 2**n centroids (:func:`apply_elementwise`), not the K elements; step 2
    reduces with the index histogram (:func:`index_distribution`, the same counter as the
    MatMul): ``sum x**2 = s_A**2 * hist @ ca**2 + sum(outliers**2)``, 2**n MACs plus one per
    FP16 outlier. Returns ``sqrt(sum / K + eps)``.
    """
    if not isinstance(q, QuantizedActivation):
        raise TypeError(f"q must be a QuantizedActivation, not {type(q).__name__}")
    a_bits = _codebook_bits("ca", ca)
    eps = float(_check_real_array("eps", eps))
    squares = apply_elementwise(ca, np.square)
    hist = index_distribution(q.idx, a_bits, mask=q.counted)
    outliers = q.outlier_values.astype(np.float64)
    total = q.scale ** 2 * (hist @ squares) + outliers @ outliers
    return math.sqrt(total / q.idx.size + eps)


def kllm_rmsnorm_matmul(a, ca, b_idx, cb, b_scale, fraction=0.01, eps=0.0):
    """``RMSNorm(A) @ B`` with the RMSNorm fused into the KLLM MatMul (section III-C2, Fig. 4).

    The MatMul runs on the quantized un-normalized A, in parallel with the RMS (computed by
    :func:`rms_from_indices`); the division is delayed and folded into the scaling factors,
    which is correct because the MatMul is linear. This model's reading of "incorporated into
    the input activation's scaling factor and the weight matrix's centroids": the dense index
    path uses the activation scale ``s_A / rms`` (one division), the sparse FP16 outlier path
    uses the weight centroids ``cb / rms`` (2**n_B divisions).

    Parameters
    ----------
    a, ca, b_idx, cb, b_scale, fraction
        As :func:`kllm_matmul`.
    eps : float
        Added to the mean square before the square root (Eq. 3 has none; LLaMA uses ~1e-6).

    Returns
    -------
    numpy.ndarray of float64, shape (N,)

    Raises
    ------
    ValueError
        Besides argument errors: if the RMS is 0 (an all-zero ``a`` with ``eps = 0``).
    """
    a_bits, b_idx, cb, b_scale, b_bits, q = _quantize_operands(a, ca, b_idx, cb, b_scale,
                                                               fraction)
    rms = rms_from_indices(q, ca, eps)
    if rms == 0.0:
        raise ValueError("a is all zero and eps is 0: the RMS is 0")
    y_dense, y_sparse = _kllm_parts(q, ca, b_idx, cb, b_scale, a_bits, b_bits,
                                    q.scale / rms, rms)
    return y_dense + y_sparse
