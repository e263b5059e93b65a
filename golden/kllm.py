"""Golden models for KLLM: index concatenation, the Index Distribution Counter, K-Means
quantization and the index-based MatMul / nonlinear flow.

Reference: Wu et al., "KLLM: Fast LLM Inference with K-Means Quantization", sections III-A to
III-D (algorithm) and IV-A / IV-B (Concat units, Index Distribution Counter); SPEC sections 1
and 2.

Two kinds of model live here:

* **Bit-exact integer models** that the RTL is checked against: :func:`concat_indices`,
  :func:`split_indices`, :func:`index_distribution`, :func:`index_distributions` and
  :func:`counter_width`. They use integer arithmetic only (int64).
* **Float references of the paper's algorithm** (everything else). They compute in float64.
  The only binary16 rounding is that of the activation outliers, which the paper keeps in FP16
  (:func:`split_outliers`; identity when the input activation already is ``float16``). The
  paper's codebooks, MatMul outputs and FP16 MAC accumulations are *not* rounded to binary16
  here: the float models describe the algorithm, not an FP16 datapath.

Readings of the paper adopted by these models (SPEC: "the code must document the reading"):

* **Scaling** (section III-A): weights ``B`` (K x N, column n = output channel n) get one scale
  per output channel, ``s_B[n] = max_k |B[k, n]|``; activations get one scale per token,
  ``s_A = max |inliers|`` (the largest magnitude left after the outliers are removed, i.e. the
  scale "determined by the outlier thresholds", section II-A2). The whole layer shares one
  codebook of *normalized* centroids trained on ``x / s`` (values in [-1, 1]). Zero points of
  Eq. (1) are 0: the K-Means centroids absorb any offset. An all-zero channel or token has
  scale 0: its normalized values are taken as 0 (no division) and it dequantizes to exactly 0.
* **Outliers** (sections III-A, III-D, IV-C): ``fraction`` is the *total* outlier fraction of
  one activation vector (the paper's ~1 %: 0.5 % largest and 0.5 % smallest). Per side,
  ``k = ceil(fraction * len / 2)`` elements (evaluated in float64), so K = 4096 with 1 % keeps
  21 + 21 elements. Largest and smallest are picked independently, as Orizuru's two trees do,
  and the outlier set is their union. Elements are ranked exactly as Orizuru ranks them
  (SPEC section 3, :mod:`golden.orizuru`): by IEEE totalOrder of their binary16 rounding
  (``-0`` below ``+0``; values that round to the same binary16 tie), ties going to the lower
  index first on the largest side and to the higher index first on the smallest side. The
  outlier mask of the algorithm is then the mask Orizuru reports.
* **Integer x K-Means** (section III-B2, IV-B): in the paper's notation ``A`` (1 x K) is
  K-Means-quantized and ``B`` (K x N) integer-quantized; the counter one-hot decodes A's
  indices and adds B's integers ("+n counting"). In the model itself the integer operand is
  the attention score and the K-Means operand is V (activation), i.e. the other way round;
  :func:`index_matmul_ik` supports both with ``integer_operand``.
"""

import math
from typing import NamedTuple

import numpy as np

from .checks import check_int as _check_int

__all__ = [
    # Concat (SPEC section 1)
    "concat_indices", "split_indices",
    # Index Distribution Counter (SPEC section 2)
    "index_distribution", "index_distributions", "counter_width", "wrap_counts",
    # K-Means quantization (section III-A)
    "kmeans_codebook", "kmeans_quantize", "dequantize", "max_abs_scale",
    "WeightQuantization", "quantize_weights",
    "outliers_per_side", "split_outliers", "activation_codebook",
    "QuantizedActivation", "quantize_activation", "dequantize_activation",
    # Index-based MatMul and nonlinear operations (sections III-B to III-D)
    "product_codebook", "index_elementwise_product", "index_matmul_kk", "index_matmul_ik",
    "kllm_matmul", "silu", "apply_elementwise", "rmsnorm", "rms_from_indices",
    "kllm_rmsnorm_matmul",
]

_INT64_MAX = (1 << 63) - 1


# --- argument checks -------------------------------------------------------------------------




def _check_index_array(name, values, bits):
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, not {values.dtype}")
    if values.size and (values.min() < 0 or values.max() >= (1 << bits)):
        raise ValueError(f"{name} must hold {bits}-bit unsigned indices (0..{(1 << bits) - 1})")
    return values.astype(np.int64)


# --- Concat (section III-B, SPEC section 1): bit-exact ---------------------------------------


def concat_indices(a, b, a_bits, b_bits):
    """Concatenate activation indices ``a`` (high) with weight indices ``b`` (low).

    ``y = a * 2**b_bits + b`` element-wise: the product-matrix index for the centroid pair
    (a, b). Bijective onto ``0 .. 2**(a_bits + b_bits) - 1`` and non-commutative.

    Parameters
    ----------
    a, b : array_like of int
        Indices of the same shape, ``0 <= a < 2**a_bits`` and ``0 <= b < 2**b_bits``.
    a_bits, b_bits : int
        Index widths n_A and n_B.

    Returns
    -------
    numpy.ndarray of int64
    """
    a = _check_index_array("a", a, a_bits)
    b = _check_index_array("b", b, b_bits)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, not {a.shape} and {b.shape}")
    return a * (1 << b_bits) + b


def split_indices(y, a_bits, b_bits):
    """Invert :func:`concat_indices`: return ``(a, b)`` for product indices ``y``."""
    y = _check_index_array("y", y, a_bits + b_bits)
    return y // (1 << b_bits), y % (1 << b_bits)



def _check_int_array(name, values):
    values = np.asarray(values)
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, not {values.dtype}")
    if values.dtype == np.uint64 and values.size and int(values.max()) > _INT64_MAX:
        raise ValueError(f"{name} must fit in int64, not hold {int(values.max())}")
    return values.astype(np.int64)


def _check_real_array(name, values, finite=True):
    values = np.asarray(values)
    if values.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, not {values.dtype}")
    values = values.astype(np.float64)
    if finite and not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must hold finite values (no NaN or infinity)")
    return values


def _check_ndim(name, values, ndim, what):
    if values.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {what}, not of shape {values.shape}")


def _check_mask(name, mask, shape):
    """Return the boolean 'lane counts' array for a 0/1 or boolean mask (None: all count)."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.integer):
        raise TypeError(f"{name} must hold booleans or 0/1 integers, not {mask.dtype}")
    if mask.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, not {mask.shape}")
    if mask.dtype != np.bool_ and mask.size and (mask.min() < 0 or mask.max() > 1):
        raise ValueError(f"{name} must hold only 0 and 1")
    return mask.astype(bool)


def _check_mode(mode):
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, not {mode!r}")
    if mode not in ("kk", "ik"):
        raise ValueError(f"mode must be 'kk' or 'ik', not {mode!r}")
    return mode


def _check_codebook(name, centroids, bits=None):
    centroids = _check_real_array(name, centroids)
    _check_ndim(name, centroids, 1, "codebook")
    if bits is not None and centroids.size != (1 << bits):
        raise ValueError(f"{name} must hold 2**{bits} = {1 << bits} centroids, "
                         f"not {centroids.size}")
    if centroids.size == 0:
        raise ValueError(f"{name} must hold at least one centroid")
    return centroids


def _codebook_bits(name, centroids):
    """Index width of a codebook whose length must be 2**n, n in 1..8."""
    size = np.asarray(centroids).size
    bits = size.bit_length() - 1
    if size < 2 or size != 1 << bits or bits > 8:
        raise ValueError(f"{name} must hold 2**n centroids with n in 1..8, not {size}")
    return bits


# --- Index Distribution Counter (section IV-B, SPEC section 2): bit-exact ----------------------


def index_distributions(idx, idx_bits, mask=None, weights=None):
    """Compute the index histogram of each of several reductions (batched counter model).

    Row r of the result is :func:`index_distribution` of row r of the arguments.

    Parameters
    ----------
    idx : array_like of int, shape (reductions, K)
        Indices, ``0 <= idx < 2**idx_bits``.
    idx_bits : int
        Index width, 1..16 (the counter has ``2**idx_bits`` bins).
    mask : array_like of bool or 0/1 int, shape (reductions, K), optional
        Lane ``k`` of row ``r`` is counted only where ``mask[r, k]`` is 1 (masked lanes carry
        activation outliers or padding). None counts every lane.
    weights : array_like of int, shape (reductions, K), optional
        None for K-Means x K-Means mode ("kk": each counted index adds +1 to its bin). Signed
        integers for Integer x K-Means mode ("ik": each counted index adds its weight).

    Returns
    -------
    numpy.ndarray of int64, shape (reductions, 2**idx_bits)

    Raises
    ------
    TypeError
        If ``idx`` or ``weights`` hold non-integers, or ``mask`` neither booleans nor integers.
    ValueError
        If ``idx_bits`` is outside 1..16, an index is out of range, the arrays are not 2-D of
        one shape, ``mask`` holds values other than 0/1, or a sum could overflow int64.
    """
    idx_bits = _check_int("idx_bits", idx_bits, 1, 16)
    idx = _check_index_array("idx", idx, idx_bits)
    _check_ndim("idx", idx, 2, "(reductions, K)")
    counted = _check_mask("mask", mask, idx.shape)
    rows, length = idx.shape
    bins = 1 << idx_bits
    flat = (np.arange(rows, dtype=np.int64)[:, None] * bins + idx)[counted]
    if weights is None:
        # Integer counts: bincount without weights counts in int64, exactly.
        hist = np.bincount(flat, minlength=rows * bins).astype(np.int64)
    else:
        weights = _check_int_array("weights", weights)
        if weights.shape != idx.shape:
            raise ValueError(f"weights must have shape {idx.shape}, not {weights.shape}")
        if weights.size:
            largest = max(-int(weights.min()), int(weights.max()))
            if largest * length > _INT64_MAX:
                raise ValueError(f"weights up to {largest} over K = {length} lanes could "
                                 f"overflow the int64 histogram")
        hist = np.zeros(rows * bins, dtype=np.int64)
        np.add.at(hist, flat, weights[counted])          # int64 accumulation, no float
    return hist.reshape(rows, bins)


def index_distribution(idx, idx_bits, mask=None, weights=None):
    """Compute the index histogram of one reduction, as the Index Distribution Counter does.

    KLLM section IV-B: the counter one-hot decodes K indices into a K x 2**idx_bits matrix and
    its bit counters sum the columns (K-Means x K-Means, "+1" per index); for Integer x
    K-Means MatMuls the column sums are weighted by the integer operand ("+n", section III-B2,
    Fig. 3(b)). SPEC section 2: the result equals ``numpy.bincount(idx[mask], weights=...,
    minlength=2**idx_bits)``, computed here with integer arithmetic only.

    Parameters
    ----------
    idx : array_like of int, shape (K,)
        Indices, ``0 <= idx < 2**idx_bits``. K may be 0 (all-zero histogram).
    idx_bits : int
        Index width, 1..16.
    mask : array_like of bool or 0/1 int, shape (K,), optional
        Lane k counts only where ``mask[k]`` is 1. None counts every lane.
    weights : array_like of int, shape (K,), optional
        None for "kk" mode (+1 per counted index); signed integers for "ik" mode.

    Returns
    -------
    numpy.ndarray of int64, shape (2**idx_bits,)

    Raises
    ------
    TypeError, ValueError
        As :func:`index_distributions`; ``idx`` must be 1-D.
    """
    idx_bits = _check_int("idx_bits", idx_bits, 1, 16)
    idx = _check_index_array("idx", idx, idx_bits)
    _check_ndim("idx", idx, 1, "(K,)")
    counted = _check_mask("mask", mask, idx.shape)
    if weights is not None:
        weights = _check_int_array("weights", weights)
        if weights.shape != idx.shape:
            raise ValueError(f"weights must have shape {idx.shape}, not {weights.shape}")
        weights = weights[None]
    return index_distributions(idx[None], idx_bits, counted[None], weights)[0]


def counter_width(max_len, mode, weight_bits=4):
    """Return the bin-counter width that holds any result of a reduction of up to ``max_len``.

    * ``"kk"``: unsigned counters holding 0..max_len, so
      ``width = ceil(log2(max_len + 1)) = max_len.bit_length()`` (4096 -> 13).
    * ``"ik"``: two's complement counters holding
      ``max_len * -2**(weight_bits-1) .. max_len * (2**(weight_bits-1) - 1)``. The smallest
      ``w`` with ``-2**(w-1) <= low`` and ``high <= 2**(w-1) - 1``; since ``|low| > high`` this
      is ``w = weight_bits + ceil(log2(max_len))`` (4096 lanes of 4-bit weights: -32768..28672,
      16 bits).

    Parameters
    ----------
    max_len : int
        Longest reduction K, >= 1.
    mode : str
        ``"kk"`` or ``"ik"``.
    weight_bits : int
        Signed weight width in ``"ik"`` mode, 1..32 (ignored in ``"kk"`` mode).

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If an argument has the wrong type.
    ValueError
        If ``max_len`` < 1, ``mode`` is unknown or ``weight_bits`` is outside 1..32.
    """
    max_len = _check_int("max_len", max_len, 1)
    mode = _check_mode(mode)
    if mode == "kk":
        return max_len.bit_length()
    weight_bits = _check_int("weight_bits", weight_bits, 1, 32)
    low = -max_len * (1 << (weight_bits - 1))
    high = max_len * ((1 << (weight_bits - 1)) - 1)
    return 1 + max((-low - 1).bit_length(), high.bit_length())


def wrap_counts(counts, width, mode):
    """The values ``width``-bit bin counters hold for exact ``counts``: modulo ``2**width``,
    unsigned in ``"kk"`` mode and two's complement in ``"ik"`` mode (a reduction longer
    than the ``max_len`` the width was chosen for wraps around).

    Returns
    -------
    numpy.ndarray of int64
    """
    width = _check_int("width", width, 1, 62)
    mode = _check_mode(mode)
    wrapped = np.mod(np.asarray(counts, dtype=np.int64), 1 << width)
    if mode == "ik":
        wrapped = np.where(wrapped >= 1 << (width - 1), wrapped - (1 << width), wrapped)
    return wrapped


# --- K-Means quantization (section III-A) ----------------------------------------------------


def kmeans_codebook(x, n_bits, sample_weight=None, seed=0, n_init=4, max_iter=300):
    """Train a sorted codebook of ``2**n_bits`` centroids with (weighted) 1-D K-Means.

    KLLM section III-A: one codebook of normalized centroids per layer, trained offline with a
    weighted K-Means algorithm whose sample weights are Fisher-information values, which pulls
    the centroids towards sensitive values. This golden model takes the sample weights as given
    (computing Fisher information needs the network's gradients, e.g. the squared gradient of
    the loss with respect to each value over a calibration set); any non-negative weights work.

    Samples of equal value are merged (their weights added) before clustering: the weighted
    K-Means objective is unchanged and clustering FP16-valued data gets much faster.

    Degenerate input: if the samples of positive weight hold ``d <= 2**n_bits`` distinct
    values, the codebook is exactly those values (the zero-error optimum), followed by
    ``2**n_bits - d`` copies of the largest; no warning, no NaN. :func:`kmeans_quantize` maps
    a value to the lowest index among equal nearest centroids, so the copies stay unused.

    Parameters
    ----------
    x : array_like of float
        Training values (any shape; flattened), finite, at least one.
    n_bits : int
        Index width n, 1..8.
    sample_weight : array_like of float, optional
        Non-negative finite weights of ``x``'s shape, not all zero. None: all 1.
    seed : int
        ``random_state`` of :class:`sklearn.cluster.KMeans` (0..2**32-1): same seed, same
        codebook.
    n_init : int
        Number of k-means++ initialisations (best inertia kept), >= 1.
    max_iter : int
        Lloyd iterations per initialisation, >= 1 (scikit-learn's default tolerance, 1e-4 of
        the data variance, may stop it earlier).

    Returns
    -------
    numpy.ndarray of float64, shape (2**n_bits,)
        Centroids in non-decreasing order.

    Raises
    ------
    TypeError, ValueError
        On a wrong type or value of any argument (the message names it).
    """
    from sklearn.cluster import KMeans

    n_bits = _check_int("n_bits", n_bits, 1, 8)
    seed = _check_int("seed", seed, 0, (1 << 32) - 1)
    n_init = _check_int("n_init", n_init, 1)
    max_iter = _check_int("max_iter", max_iter, 1)
    x = _check_real_array("x", x)
    if x.size == 0:
        raise ValueError("x must hold at least one value")
    if sample_weight is None:
        weight = np.ones(x.shape)
    else:
        weight = _check_real_array("sample_weight", sample_weight)
        if weight.shape != x.shape:
            raise ValueError(f"sample_weight must have the shape of x {x.shape}, "
                             f"not {weight.shape}")
        if weight.size and weight.min() < 0:
            raise ValueError("sample_weight must be non-negative")
        if not weight.any():
            raise ValueError("sample_weight must not be all zero")
    x, weight = x.ravel(), weight.ravel()
    keep = weight > 0
    values, inverse = np.unique(x[keep], return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=weight[keep], minlength=values.size)
    clusters = 1 << n_bits
    if values.size <= clusters:
        return np.concatenate([values, np.full(clusters - values.size, values[-1])])
    kmeans = KMeans(n_clusters=clusters, init="k-means++", n_init=n_init, max_iter=max_iter,
                    random_state=seed, algorithm="lloyd")
    kmeans.fit(values[:, None], sample_weight=merged)
    return np.sort(kmeans.cluster_centers_[:, 0].astype(np.float64))


def kmeans_quantize(x, centroids):
    """Return the index of the nearest centroid for each element of ``x``.

    Ties (``x`` exactly at the float64 midpoint of two neighbouring distinct centroids) and
    duplicate centroids go to the lowest index.

    Parameters
    ----------
    x : array_like of float
        Finite values (any shape).
    centroids : array_like of float, shape (C,)
        Codebook in non-decreasing order (as :func:`kmeans_codebook` returns it).

    Returns
    -------
    numpy.ndarray of int64, shape of ``x``

    Raises
    ------
    TypeError, ValueError
        If ``x`` or ``centroids`` are not finite reals, or ``centroids`` is not sorted.
    """
    x = _check_real_array("x", x)
    centroids = _check_codebook("centroids", centroids)
    if np.any(np.diff(centroids) < 0):
        raise ValueError("centroids must be in non-decreasing order")
    distinct, first = np.unique(centroids, return_index=True)
    midpoints = distinct[:-1] + (distinct[1:] - distinct[:-1]) / 2
    return first[np.searchsorted(midpoints, x, side="left")].astype(np.int64)


def dequantize(idx, centroids):
    """Look up ``centroids[idx]`` (the codebook lookup KLLM avoids in its MatMuls).

    Parameters
    ----------
    idx : array_like of int
        Indices, ``0 <= idx < len(centroids)``.
    centroids : array_like of float, shape (C,)

    Returns
    -------
    numpy.ndarray of float64, shape of ``idx``
    """
    centroids = _check_codebook("centroids", centroids)
    idx = np.asarray(idx)
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"idx must hold integers, not {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= centroids.size):
        raise ValueError(f"idx must hold indices 0..{centroids.size - 1} into centroids")
    return centroids[idx]


def max_abs_scale(x, axis):
    """Return ``max |x|`` along ``axis``: the quantization scale (0 for an all-zero slice).

    Section III-A: per-output-channel scales for weights (``axis=0`` for B of shape K x N),
    per-token scales for activations.
    """
    x = _check_real_array("x", x)
    return np.max(np.abs(x), axis=axis)


def _normalize(x, scale):
    """``x / scale``, with 0 where the scale is 0 (an all-zero slice: no division, no NaN)."""
    scale = np.asarray(scale, dtype=np.float64)
    safe = np.where(scale > 0, scale, 1.0)
    return np.where(scale > 0, x / safe, 0.0)


class WeightQuantization(NamedTuple):
    """K-Means-quantized weight matrix B (K x N): ``B ~ centroids[idx] * scale[None, :]``."""

    idx: np.ndarray        #: int64, shape (K, N)
    centroids: np.ndarray  #: float64, shape (2**n_bits,), normalized, shared by the layer
    scale: np.ndarray      #: float64, shape (N,), one per output channel


def quantize_weights(w, n_bits, sample_weight=None, seed=0, n_init=4):
    """Quantize a weight matrix per output channel with one shared normalized codebook.

    Section III-A (and V-A: 4-bit, per output channel, no outlier protection): each column n
    of ``w`` (output channel n of ``Y = A @ w``) is divided by ``max_k |w[k, n]|``; one
    codebook is trained on all normalized values; each value gets its nearest centroid.

    Parameters
    ----------
    w : array_like of float, shape (K, N)
    n_bits : int
        Weight index width n_B, 1..8.
    sample_weight : array_like of float, shape (K, N), optional
        K-Means sample weights (e.g. Fisher information of the weights).
    seed, n_init : int
        Passed to :func:`kmeans_codebook`.

    Returns
    -------
    WeightQuantization
    """
    w = _check_real_array("w", w)
    _check_ndim("w", w, 2, "(K, N)")
    scale = max_abs_scale(w, axis=0) if w.size else np.zeros(w.shape[1])
    normalized = _normalize(w, scale)
    centroids = kmeans_codebook(normalized, n_bits, sample_weight, seed, n_init)
    return WeightQuantization(kmeans_quantize(normalized, centroids), centroids, scale)


def _check_fraction(fraction):
    if isinstance(fraction, (bool, np.bool_)) or not isinstance(
            fraction, (int, float, np.integer, np.floating)):
        raise TypeError(f"fraction must be a real number, not {fraction!r}")
    fraction = float(fraction)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in range 0..1, not {fraction}")
    return fraction


def outliers_per_side(length, fraction):
    """Return k, the number of largest and of smallest elements kept as outliers.

    ``k = ceil(fraction * length / 2)`` evaluated in float64: ``fraction`` is the total outlier
    fraction of a vector (KLLM keeps ~1 %, "the 0.5 % largest and the 0.5 % smallest",
    sections III-A and IV-C). Rounding up protects at least the requested fraction and keeps
    one outlier per side for any positive fraction (K = 4096 at 1 %: k = 21).

    Parameters
    ----------
    length : int
        Vector length, >= 0.
    fraction : float
        Total outlier fraction, 0..1.

    Returns
    -------
    int
    """
    length = _check_int("length", length, 0)
    fraction = _check_fraction(fraction)
    return min(length, math.ceil(fraction * length / 2))


def split_outliers(a, fraction=0.01):
    """Split an activation vector into a dense inlier part and sparse FP16 outliers.

    Sections III-D (Fig. 5) and IV-C: Orizuru marks the k largest and the k smallest elements
    (``k`` from :func:`outliers_per_side`) as outliers; they are kept in FP16 and bypass
    quantization, the rest is quantized. The two sides are selected independently and the
    outlier set is their union (with ``2k > len`` they overlap).

    Ranking (one tie rule with Orizuru, SPEC section 3): elements are compared by IEEE
    totalOrder of their binary16 rounding, the values the hardware compares, so ``-0.0`` ranks
    below ``+0.0`` and float64 values that round to the same binary16 are equal. Among equal
    keys the largest side takes the **lowest** index first (Orizuru's max tree: ties go left)
    and the smallest side the **highest** index first (its min tree: ties go right). The mask
    is therefore the one :func:`golden.orizuru.orizuru` reports for ``k`` on the binary16
    bit patterns of ``a``.

    Parameters
    ----------
    a : array_like of float, shape (K,)
        Finite activation vector (one token).
    fraction : float
        Total outlier fraction, 0..1 (default 0.01).

    Returns
    -------
    inliers : numpy.ndarray of float64, shape (K,)
        ``a`` with the outliers set to 0.
    outliers : tuple (indices, values)
        ``indices`` (int64, ascending) and ``values`` (``float16``: the FP16 rounding of ``a``
        at those indices, the one FP16 rounding in these models).
    outlier_mask : numpy.ndarray of bool, shape (K,)
        True at every outlier (Orizuru's mask). The Index Distribution Counter's lane mask is
        its complement.

    Raises
    ------
    TypeError, ValueError
        If ``a`` is not a finite real 1-D vector, ``fraction`` is outside 0..1, or an outlier
        lies outside the binary16 range.
    """
    a_in = np.asarray(a)
    a = _check_real_array("a", a)
    _check_ndim("a", a, 1, "activation vector")
    k = outliers_per_side(a.size, fraction)
    outlier_mask = np.zeros(a.size, dtype=bool)
    if k:
        key = _binary16_total_order_key(a_in if a_in.dtype == np.float16 else a)
        lanes = np.arange(a.size)
        # np.lexsort sorts by its last key first: by key, then by index.
        outlier_mask[np.lexsort((lanes, -key))[:k]] = True      # largest, lowest index first
        outlier_mask[np.lexsort((-lanes, key))[:k]] = True      # smallest, highest index first
    indices = np.flatnonzero(outlier_mask).astype(np.int64)
    source = a_in if a_in.dtype == np.float16 else a
    with np.errstate(over="ignore"):
        values = source[indices].astype(np.float16)
    if np.any(np.isinf(values)):
        raise ValueError("a holds outliers that overflow binary16 (|x| >= 65520)")
    return np.where(outlier_mask, 0.0, a), (indices, values), outlier_mask


def _binary16_total_order_key(a):
    """IEEE totalOrder key (int64, 0..0xFFFF) of the binary16 rounding of ``a``: the bit
    pattern ``x`` maps to ``~x`` if its sign bit is set, else to ``x | 0x8000`` (SPEC section
    3). Values beyond the binary16 range round to infinity and rank beyond every finite one."""
    with np.errstate(over="ignore"):
        bits = np.asarray(a).astype(np.float16).view(np.uint16).astype(np.int64)
    return np.where(bits & 0x8000, ~bits & 0xFFFF, bits | 0x8000)


class QuantizedActivation(NamedTuple):
    """One token: ``a ~ scale * centroids[idx]`` where ``counted``, FP16 outliers elsewhere."""

    idx: np.ndarray               #: int64 (K,): centroid indices; 0 at outlier lanes (padding)
    counted: np.ndarray           #: bool (K,): the counter's lane mask (False at outliers)
    scale: float                  #: per-token scale, max |inliers| (0 if all inliers are 0)
    outlier_indices: np.ndarray   #: int64, ascending
    outlier_values: np.ndarray    #: float16


def quantize_activation(a, centroids, fraction=0.01):
    """Quantize one activation token as KLLM does online (sections III-A, III-D).

    The outliers are split off (:func:`split_outliers`), the per-token scale is the largest
    inlier magnitude (the scale set by the outlier thresholds), and the normalized inliers are
    mapped to the nearest of the offline ``centroids`` (the paper's online clustering step with
    offline centroids). Outlier lanes carry index 0 and are masked out of the counter.

    Parameters
    ----------
    a : array_like of float, shape (K,)
    centroids : array_like of float, shape (2**n_A,)
        Offline normalized activation codebook (:func:`activation_codebook`), sorted.
    fraction : float
        Total outlier fraction (default 0.01).

    Returns
    -------
    QuantizedActivation
    """
    inliers, (indices, values), outlier_mask = split_outliers(a, fraction)
    scale = float(max_abs_scale(inliers, axis=None)) if inliers.size else 0.0
    idx = kmeans_quantize(_normalize(inliers, scale), centroids)
    idx[outlier_mask] = 0
    return QuantizedActivation(idx, ~outlier_mask, scale, indices, values)


def dequantize_activation(q, centroids):
    """Return the float64 activation that ``q`` represents (inliers and FP16 outliers)."""
    if not isinstance(q, QuantizedActivation):
        raise TypeError(f"q must be a QuantizedActivation, not {type(q).__name__}")
    a = q.scale * dequantize(q.idx, centroids)
    a[~q.counted] = 0.0
    a[q.outlier_indices] = q.outlier_values.astype(np.float64)
    return a


def activation_codebook(tokens, n_bits, fraction=0.01, sample_weight=None, seed=0, n_init=4):
    """Train the layer's normalized activation codebook offline on calibration tokens.

    Section III-A / V-A: activation centroids are trained offline (the paper uses 16 C4
    samples) with weighted K-Means, after excluding each token's outliers (section II-A2,
    Fig. 2(b)) and normalizing each token by its own scale (:func:`quantize_activation`).

    Parameters
    ----------
    tokens : array_like of float, shape (T, K)
        Calibration activations, one token per row.
    n_bits : int
        Activation index width n_A, 1..8 (KLLM: 3 or 4).
    fraction : float
        Total outlier fraction per token (default 0.01).
    sample_weight : array_like of float, shape (T, K), optional
        K-Means weights (the paper: Fisher information of the activations).
    seed, n_init : int
        Passed to :func:`kmeans_codebook`.

    Returns
    -------
    numpy.ndarray of float64, shape (2**n_bits,)
    """
    tokens = _check_real_array("tokens", tokens)
    _check_ndim("tokens", tokens, 2, "(T, K)")
    if sample_weight is not None:
        sample_weight = _check_real_array("sample_weight", sample_weight)
        if sample_weight.shape != tokens.shape:
            raise ValueError(f"sample_weight must have the shape of tokens {tokens.shape}, "
                             f"not {sample_weight.shape}")
    values, weights = [], []
    for row, token in enumerate(tokens):
        inliers, _, outlier_mask = split_outliers(token, fraction)
        scale = max_abs_scale(inliers, axis=None) if inliers.size else 0.0
        values.append(_normalize(inliers[~outlier_mask], scale))
        if sample_weight is not None:
            weights.append(sample_weight[row][~outlier_mask])
    weights = np.concatenate(weights) if sample_weight is not None else None
    return kmeans_codebook(np.concatenate(values), n_bits, weights, seed, n_init)


# --- Index-based MatMul (section III-B, Fig. 3) ----------------------------------------------


def product_codebook(ca, cb):
    """Return the offline Cartesian-product codebook of the partial-sum matrix Y'.

    Section III-B1, Fig. 3(a): ``codebook[concat(i, j)] = ca[i] * cb[j]`` with ``concat`` from
    :func:`concat_indices` (activation index high), i.e. ``2**(n_A+n_B)`` FP products.
    """
    ca = _check_codebook("ca", ca)
    cb = _check_codebook("cb", cb)
    return np.outer(ca, cb).ravel()


def _check_vector_matrix(a_name, a, b_name, b):
    """Check that ``a`` is (K,) and ``b`` is (K, N) with the same K."""
    _check_ndim(a_name, a, 1, "(K,)")
    _check_ndim(b_name, b, 2, "(K, N)")
    if b.shape[0] != a.shape[0]:
        raise ValueError(f"{b_name} must have K = {a.shape[0]} rows (the length of {a_name}), "
                         f"not {b.shape[0]}")


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


def _quantize_operands(a, ca, b_idx, cb, b_scale, fraction):
    """Check the weight operands, quantize the activation, and check that K agrees."""
    a_bits = _codebook_bits("ca", ca)
    b_idx, cb, b_scale, b_bits = _check_weight_operands(b_idx, cb, b_scale)
    q = quantize_activation(a, ca, fraction)
    if q.idx.shape[0] != b_idx.shape[0]:
        raise ValueError(f"b_idx must have K = {q.idx.shape[0]} rows (the length of a), "
                         f"not {b_idx.shape[0]}")
    return a_bits, b_idx, cb, b_scale, b_bits, q


def _kllm_parts(q, ca, b_idx, cb, b_scale, a_bits, b_bits, dense_scale, weight_divisor):
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
    a_bits, b_idx, cb, b_scale, b_bits, q = _quantize_operands(a, ca, b_idx, cb, b_scale,
                                                               fraction)
    y_dense, y_sparse = _kllm_parts(q, ca, b_idx, cb, b_scale, a_bits, b_bits, q.scale, 1.0)
    y = y_dense + y_sparse
    return (y, y_dense, y_sparse) if return_parts else y


# --- Index-based nonlinear operations (section III-C, Fig. 4) --------------------------------


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


# --- kllm_column: the index-based MatMul column (SPEC section 7): bit-exact ------------------
#
# Concat -> Index Distribution Counter -> weighted sum of the codebook, as one unit: the RTL of
# ``hdl/kllm/column.py`` is checked against these functions (through the beat adapter
# ``golden.beats.kllm_column``). The arithmetic is NumPy float32 in the SPEC's order.

__all__ += [
    "COLUMN_NAN", "column_weighted_sum", "column_counts", "ColumnOutputs", "column_outputs",
    "load_codebook", "reductions_to_beats", "ColumnReference", "column_float_reference",
]

#: The binary16 pattern of every NaN ``y`` of ``kllm_column`` (project choice: one canonical
#: quiet NaN, sign 0, exponent all ones, fraction MSB set).
COLUMN_NAN = 0x7E00

#: Beats x bins handled at once by :func:`column_counts` (bounds its memory to ~100 MB).
_COLUMN_CHUNK = 1 << 22


def _check_fp16_bits(name, values):
    values = np.asarray(values)
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold binary16 bit patterns (integers), not {values.dtype}")
    if values.size and (values.min() < 0 or values.max() > 0xFFFF):
        bad = values[(values < 0) | (values > 0xFFFF)].flat[0]
        raise ValueError(f"{name} must hold binary16 bit patterns 0..0xFFFF, not {int(bad)}")
    return values.astype(np.int64)


def _fp16_to_float32(bits):
    """binary16 patterns -> float32 values (exact; NaNs stay NaN, infinities infinite)."""
    return np.asarray(bits, np.int64).astype(np.uint16).view(np.float16).astype(np.float32)


def _column_bins(a_bits, b_bits, mode):
    """Bin-index width of the column: n_A + n_B in kk mode, n_A in ik mode."""
    a_bits = _check_int("a_bits", a_bits, 1, 8)
    mode = _check_mode(mode)
    if mode == "kk":
        return a_bits + _check_int("b_bits", b_bits, 1, 8)
    return a_bits


def column_weighted_sum(counts, codebook):
    """Return the FP16 results of the column's weighted sum, one per reduction (bit-exact).

    SPEC section 7: for the bins in ascending order whose count is not 0,
    ``p = fp32(fp32(count) * fp32(codebook[bin]))`` and ``acc = fp32(acc + p)``, both rounded
    to nearest even, ``acc`` starting from +0.0; then ``y = fp16(acc)`` (round to nearest even,
    overflow to infinity). NaN and infinite codebook entries follow IEEE 754 (``inf - inf`` and
    ``0 * inf`` give NaN; NumPy ``float32`` arithmetic in this order is the reference). Bins
    with count 0 are skipped, so a NaN or infinite entry that no lane indexes (or whose signed
    ``ik`` weights cancel to 0) does not matter. Every NaN result is :data:`COLUMN_NAN`
    (0x7E00: the project's one canonical NaN, whatever the codebook's NaN payloads).

    Consequences of the number ranges: a binary16 value is a multiple of 2**-24, so every
    product and partial sum is one too; a non-zero ``acc`` is at least 2**-24 in magnitude and
    binary32 subnormals never occur. ``(+0) + (-0) = +0``, so ``y`` is never -0.0.
    ``fp32(count)`` is exact for ``|count| <= 2**24`` and rounded to nearest even beyond.

    Parameters
    ----------
    counts : array_like of int, shape (reductions, bins)
        Each reduction's histogram (signed in ``ik`` mode), as the counter holds it.
    codebook : array_like of int, shape (bins,) or (reductions, bins)
        binary16 bit patterns: one codebook for all reductions, or one per reduction.

    Returns
    -------
    numpy.ndarray of int64, shape (reductions,)
        binary16 bit patterns of ``y``.

    Raises
    ------
    TypeError
        If ``counts`` or ``codebook`` do not hold integers.
    ValueError
        If the shapes disagree or a codebook entry is not a 16-bit pattern.
    """
    counts = _check_int_array("counts", counts)
    _check_ndim("counts", counts, 2, "(reductions, bins)")
    rows, bins = counts.shape
    codebook = _check_fp16_bits("codebook", codebook)
    if codebook.shape not in ((bins,), (rows, bins)):
        raise ValueError(f"codebook must have shape ({bins},) or ({rows}, {bins}) for counts "
                         f"of shape {counts.shape}, not {codebook.shape}")
    values = np.broadcast_to(_fp16_to_float32(codebook), (rows, bins))
    # int64 -> float64 is exact below 2**53; float64 -> float32 is then the one RNE rounding.
    factors = counts.astype(np.float64).astype(np.float32)
    acc = np.zeros(rows, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):     # inf and NaN are the IEEE answers
        for b in np.flatnonzero(np.any(counts != 0, axis=0)):
            used = counts[:, b] != 0
            product = factors[:, b] * values[:, b]          # float32 x float32, one rounding
            acc = np.where(used, acc + product, acc)        # float32 + float32, one rounding
        y = acc.astype(np.float16)                          # RNE, overflow to infinity
    bits = y.view(np.uint16).astype(np.int64)
    return np.where(np.isnan(y), COLUMN_NAN, bits)


def _column_beat_arrays(a, b, mask, last, a_bits, b_bits, mode, weight_bits):
    """Check the beat arrays of :func:`column_counts`; return (idx, weights, counted, last)."""
    bins_bits = _column_bins(a_bits, b_bits, mode)
    a = _check_index_array("a", a, a_bits)
    _check_ndim("a", a, 2, "(beats, n_inputs)")
    if mode == "kk":
        b = _check_index_array("b", b, b_bits)
    else:
        weight_bits = _check_int("weight_bits", weight_bits, 1, 16)
        b = _check_int_array("b", b)
        low, high = -(1 << (weight_bits - 1)), (1 << (weight_bits - 1)) - 1
        if b.size and (b.min() < low or b.max() > high):
            raise ValueError(f"b must hold signed {weight_bits}-bit weights ({low}..{high}) "
                             f"in mode 'ik'")
    if b.shape != a.shape:
        raise ValueError(f"b must have the shape of a {a.shape}, not {b.shape}")
    counted = _check_mask("mask", mask, a.shape)
    last = np.asarray(last)
    if last.shape != (a.shape[0],):
        raise ValueError(f"last must have shape ({a.shape[0]},) (one bit per beat), "
                         f"not {last.shape}")
    last = _check_mask("last", last, last.shape)
    if mode == "kk":
        return concat_indices(a, b, a_bits, b_bits), None, counted, last, bins_bits
    return a, b, counted, last, bins_bits


def column_counts(a, b, mask, last, a_bits, b_bits=None, mode="kk", weight_bits=4,
                  max_len=4096):
    """Return each reduction's histogram and whether a bin counter overflowed (bit-exact).

    A reduction is the run of beats up to and including a beat with ``last``; beats after the
    final ``last`` belong to no finished reduction and give nothing. Bins (SPEC section 7):
    ``(a << b_bits) | b`` in ``"kk"`` mode (the Concat; each unmasked lane adds 1), ``a`` in
    ``"ik"`` mode (each unmasked lane adds its signed weight ``b``).

    Overflow: the counters are ``W = counter_width(max_len, mode, weight_bits)`` bits wide,
    unsigned ``0 .. 2**W - 1`` in kk mode and two's complement ``-2**(W-1) .. 2**(W-1) - 1`` in
    ik mode. A reduction overflows iff some bin's running count, after some beat of the
    reduction (the beat's lanes are added together), lies outside that range; the running
    count is the sum of the per-beat histograms so far. In kk mode this is the final count
    exceeding ``2**W - 1``; in ik mode a count that leaves the range and comes back still
    overflows. A reduction of at most ``max_len`` lanes (masked lanes included) never does.
    The counts returned are the exact ones (int64), not wrapped.

    Parameters
    ----------
    a : array_like of int, shape (beats, n_inputs)
        Activation indices, ``a_bits`` wide.
    b : array_like of int, shape (beats, n_inputs)
        Weight indices (``b_bits`` wide) in kk mode; signed ``weight_bits`` weights in ik mode.
    mask : array_like of bool or 0/1 int, shape (beats, n_inputs)
        Lane j of a beat counts only where its mask is 1.
    last : array_like of 0/1, shape (beats,)
        Ends a reduction.
    a_bits, b_bits : int
        n_A (1..8) and, in kk mode, n_B (1..8).
    mode : str
        ``"kk"`` or ``"ik"``.
    weight_bits : int
        Signed weight width in ik mode (1..16).
    max_len : int
        The reduction length the counters are sized for (>= 1).

    Returns
    -------
    counts : numpy.ndarray of int64, shape (reductions, bins)
    overflow : numpy.ndarray of bool, shape (reductions,)
    """
    idx, weights, counted, last, bins_bits = _column_beat_arrays(
        a, b, mask, last, a_bits, b_bits, mode, weight_bits)
    width = counter_width(max_len, mode, weight_bits)
    low, high = (0, (1 << width) - 1) if mode == "kk" else \
        (-(1 << (width - 1)), (1 << (width - 1)) - 1)
    bins = 1 << bins_bits
    ends = np.flatnonzero(last) + 1                      # one past each reduction's last beat
    starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
    counts = np.zeros((ends.size, bins), dtype=np.int64)
    overflow = np.zeros(ends.size, dtype=bool)
    # Whole reductions per chunk, about _COLUMN_CHUNK beat-bins each (one at least).
    first = 0
    while first < ends.size:
        budget = starts[first] + max(1, _COLUMN_CHUNK // bins)
        stop = max(first + 1, int(np.searchsorted(ends, budget, side="right")))
        lo, hi = int(starts[first]), int(ends[stop - 1])
        per_beat = index_distributions(idx[lo:hi], bins_bits, counted[lo:hi],
                                       None if weights is None else weights[lo:hi])
        running = np.cumsum(per_beat, axis=0)
        # Subtract the running sum before each reduction's first beat: per-reduction sums.
        chunk_starts = starts[first:stop] - lo
        before = np.vstack([np.zeros((1, bins), np.int64), running])[chunk_starts]
        lengths = ends[first:stop] - starts[first:stop]
        running -= np.repeat(before, lengths, axis=0)
        counts[first:stop] = running[ends[first:stop] - lo - 1]
        outside = (running.min(axis=1) < low) | (running.max(axis=1) > high)
        overflow[first:stop] = np.logical_or.reduceat(outside, chunk_starts)
        first = stop
    return counts, overflow


class ColumnOutputs(NamedTuple):
    """The output beats of ``kllm_column`` for a run of reductions (one row per reduction)."""

    y: np.ndarray         #: int64 (reductions,): binary16 patterns (exact-count value on overflow)
    overflow: np.ndarray  #: bool (reductions,)
    counts: np.ndarray    #: int64 (reductions, bins): exact histograms


def column_outputs(a, b, mask, last, codebook, a_bits, b_bits=None, mode="kk", weight_bits=4,
                   max_len=4096):
    """The ``o`` beats of ``kllm_column``: ``y`` and ``overflow`` per reduction (bit-exact).

    :func:`column_counts` of the beats, then :func:`column_weighted_sum` of the counts with
    ``codebook``. Where ``overflow`` is set the unit's ``y`` is unspecified (SPEC section 7):
    this model still returns the weighted sum of the exact counts there, which a comparison
    must ignore.

    Parameters
    ----------
    a, b, mask, last, a_bits, b_bits, mode, weight_bits, max_len
        As :func:`column_counts`.
    codebook : array_like of int, shape (bins,) or (reductions, bins)
        binary16 patterns: the codebook in force (one for all reductions, or one per reduction
        where loads come between them); ``2**(a_bits + b_bits)`` entries in kk mode (entry
        ``(a << b_bits) | b`` = ``ca[a] * cb[b]``), ``2**a_bits`` in ik mode.

    Returns
    -------
    ColumnOutputs
    """
    counts, overflow = column_counts(a, b, mask, last, a_bits, b_bits, mode, weight_bits,
                                     max_len)
    return ColumnOutputs(column_weighted_sum(counts, codebook), overflow, counts)


def load_codebook(codebook, value, last, position=0):
    """Apply ``cb`` stream beats to a codebook; return ``(codebook, position)`` afterwards.

    SPEC section 7 as the project reads it: beat k of a load writes entry k, counting from 0 at
    the first beat after reset (the codebook then being all +0.0) or after a beat with
    ``last``; ``position`` is the entry the next beat writes (0 at a load's start). Beats past
    the last entry and before ``last`` are ignored; a ``last`` before the final entry leaves
    the later entries unchanged. The codebook stays until the next load.

    Parameters
    ----------
    codebook : array_like of int, shape (entries,)
        binary16 patterns in force before these beats (``np.zeros(entries)`` after reset).
    value : array_like of int, shape (beats,)
        binary16 patterns of the beats.
    last : array_like of 0/1, shape (beats,)
    position : int
        Entry the first beat writes (carried over from a load left unfinished).

    Returns
    -------
    codebook : numpy.ndarray of int64, shape (entries,)
        A new array.
    position : int
        Entry the next beat would write (0 after a ``last``).
    """
    codebook = _check_fp16_bits("codebook", codebook).copy()
    _check_ndim("codebook", codebook, 1, "(entries,)")
    value = _check_fp16_bits("value", value)
    _check_ndim("value", value, 1, "(beats,)")
    last = _check_mask("last", last, value.shape)
    position = _check_int("position", position, 0)
    beats = value.size
    if beats == 0:
        return codebook, position
    # Address of each beat: its index within its load, plus `position` for the first load.
    run = np.concatenate(([0], np.cumsum(last)[:-1]))           # load number of each beat
    starts = np.flatnonzero(np.concatenate(([True], run[1:] != run[:-1])))
    address = np.arange(beats) - np.repeat(starts, np.diff(np.append(starts, beats)))
    address = address + np.where(run == 0, position, 0)
    write = address < codebook.size
    # Later beats win: the last write to each entry.
    order = np.flatnonzero(write)[::-1]
    entries, first_seen = np.unique(address[order], return_index=True)
    codebook[entries] = value[order[first_seen]]
    next_position = 0 if last[-1] else int(address[-1]) + 1
    return codebook, next_position


def reductions_to_beats(lengths, n_inputs, lanes):
    """Lay reductions of given lengths out in beats of ``n_inputs`` lanes.

    Reduction r takes ``ceil(lengths[r] / n_inputs)`` beats, its lanes in order; the lanes after
    its final entry are padding (mask 0, field values 0: a caller may overwrite them) and its
    final beat has ``last``.

    Parameters
    ----------
    lengths : array_like of int, shape (reductions,)
        K of each reduction, >= 1.
    n_inputs : int
        Lanes per beat.
    lanes : dict of str to array_like, each of shape (sum(lengths),)
        Per-entry values (``"mask"`` included: booleans), reductions one after another.

    Returns
    -------
    beats : dict of str to numpy.ndarray
        Every field of ``lanes`` as ``(beats, n_inputs)`` (``"mask"`` False at padding), plus
        ``"last"`` (int64, (beats,)) and ``"padding"`` (bool, (beats, n_inputs)).
    """
    lengths = _check_int_array("lengths", lengths)
    _check_ndim("lengths", lengths, 1, "(reductions,)")
    if lengths.size and lengths.min() < 1:
        raise ValueError("lengths must be >= 1 (a reduction has at least one entry)")
    n_inputs = _check_int("n_inputs", n_inputs, 1)
    total = int(lengths.sum())
    per = -(-lengths // n_inputs)                              # beats per reduction
    beats = int(per.sum())
    lane_start = n_inputs * (np.cumsum(per) - per)             # first lane of each reduction
    entry_start = np.cumsum(lengths) - lengths
    where = np.repeat(lane_start - entry_start, lengths) + np.arange(total)
    out = {}
    for name, values in lanes.items():
        values = np.asarray(values)
        if values.shape != (total,):
            raise ValueError(f"lanes[{name!r}] must have shape ({total},), not {values.shape}")
        flat = np.zeros(beats * n_inputs, dtype=values.dtype)
        flat[where] = values
        out[name] = flat.reshape(beats, n_inputs)
    padding = np.ones(beats * n_inputs, dtype=bool)
    padding[where] = False
    out["padding"] = padding.reshape(beats, n_inputs)
    last = np.zeros(beats, dtype=np.int64)
    last[np.cumsum(per) - 1] = 1
    out["last"] = last
    return out


class ColumnReference(NamedTuple):
    """An index-based MatMul ``y = A @ B`` (one column per output) from float operands."""

    a_idx: np.ndarray      #: int64 (K,): activation indices (outlier lanes too: they are masked)
    b: np.ndarray          #: int64 (K, N): weight indices (kk) or integer weights (ik)
    counted: np.ndarray    #: bool (K,): the counter's lane mask (False at activation outliers)
    ca: np.ndarray         #: float64 (2**a_bits,): activation centroids, binary16 values
    cb: np.ndarray         #: float64 (2**b_bits,) weight centroids, binary16 values (kk only)
    codebook: np.ndarray   #: int64 (bins,): binary16 patterns loaded into the column
    counts: np.ndarray     #: int64 (N, bins): each column's histogram
    y: np.ndarray          #: int64 (N,): binary16 patterns of the codebook path
    y_float: np.ndarray    #: float64 (N,): ``(A_deq * counted) @ B_deq``
    bound: np.ndarray      #: float64 (N,): bound on ``|y - y_float|`` from the FP16 format


def column_float_reference(a, b, a_bits, b_bits=None, mode="kk", fraction=0.01, seed=0):
    """The index-based MatMul of KLLM Fig. 3 from float operands, by the codebook path and by
    a float MatMul of the dequantized operands (the float reference of ``kllm_column``).

    The activation ``a`` loses its outliers (:func:`split_outliers`, Fig. 5: they take the
    sparse FP16 path, so they count nothing here); its inliers train ``2**a_bits`` centroids
    (:func:`kmeans_codebook`) and every lane gets the index of its nearest centroid. The
    centroids are stored in FP16, as KLLM's codebook buffers hold them: ``ca`` (and ``cb``) are
    the binary16 roundings of the K-Means centroids, and the dequantized operands are
    ``A_deq = ca[a_idx]``, ``B_deq = cb[b_idx]`` (kk) or ``b`` itself (ik).

    * ``"kk"`` (Fig. 3(a)): ``b`` (K, N) floats are K-Means-quantized to ``2**b_bits``
      centroids; the codebook is the offline Cartesian product, entry ``(i << b_bits) | j`` =
      ``fp16(ca[i] * cb[j])``; column n counts ``concat(a_idx, b_idx[:, n])``.
    * ``"ik"`` (Fig. 3(b)): ``b`` (K, N) holds signed integers (the integer-quantized
      operand); the codebook is ``ca``; column n counts ``a_idx`` weighted by ``b[:, n]``.

    ``y`` is :func:`column_weighted_sum` of the histograms (the bit-exact rule of the RTL);
    ``y_float = (A_deq * counted) @ B_deq`` in float64. Their difference comes from the FP16
    format only: each kk codebook entry rounded to binary16 (relative 2**-11, absolute 2**-25
    below the normal range), the float32 products and sums (relative 2**-24 each, at most
    ``bins + 1`` roundings of partial sums bounded by the sum of magnitudes) and the final
    binary16 rounding (2**-11 relative, 2**-25 absolute). With ``L1 = |A_deq * counted| @
    |B_deq|``, ``bound = (e + (bins + 2) * 2**-24) * L1 + 2**-11 * (|y_float| + e * L1) +
    2**-25 * (n_counted + 1)``, ``e`` = 2**-11 in kk mode (0 in ik mode, whose codebook holds
    ``ca`` exactly).

    Parameters
    ----------
    a : array_like of float, shape (K,)
        One activation vector.
    b : array_like, shape (K, N)
        Floats (kk) or integers (ik).
    a_bits, b_bits : int
        n_A (1..8); n_B (1..8, kk only).
    mode : str
        ``"kk"`` or ``"ik"``.
    fraction : float
        Total activation outlier fraction (default 0.01).
    seed : int
        K-Means seed (the weight codebook uses ``seed + 1``).

    Returns
    -------
    ColumnReference
    """
    bins_bits = _column_bins(a_bits, b_bits, mode)
    seed = _check_int("seed", seed, 0, (1 << 32) - 2)
    a = _check_real_array("a", a)
    _check_ndim("a", a, 1, "activation vector")
    inliers, _, outlier_mask = split_outliers(a, fraction)
    counted = ~outlier_mask
    if not counted.any():
        raise ValueError("every activation is an outlier: nothing to quantize")
    with np.errstate(over="ignore"):
        ca = kmeans_codebook(inliers[counted], a_bits, seed=seed).astype(np.float16)
    if not np.all(np.isfinite(ca)):
        raise ValueError("activation centroids overflow binary16")
    ca = np.sort(ca.astype(np.float64))
    a_idx = kmeans_quantize(a, ca)
    if mode == "kk":
        b = _check_real_array("b", b)
        _check_vector_matrix("a", a, "b", b)
        with np.errstate(over="ignore"):
            cb = kmeans_codebook(b, b_bits, seed=seed + 1).astype(np.float16)
        if not np.all(np.isfinite(cb)):
            raise ValueError("weight centroids overflow binary16")
        cb = np.sort(cb.astype(np.float64))
        b_idx = kmeans_quantize(b, cb)
        with np.errstate(over="ignore"):
            entries = product_codebook(ca, cb).astype(np.float16)
        b_deq, b_out, error = cb[b_idx], b_idx, 2.0 ** -11
        idx = concat_indices(np.broadcast_to(a_idx[:, None], b_idx.shape), b_idx, a_bits,
                             b_bits)
        counts = index_distributions(idx.T, bins_bits,
                                     np.broadcast_to(counted, (b.shape[1], a.size)))
    else:
        b = _check_int_array("b", b)
        _check_vector_matrix("a", a, "b", b)
        cb = np.zeros(0)
        entries = ca.astype(np.float16)
        b_deq, b_out, error = b.astype(np.float64), b, 0.0
        columns = b.shape[1]
        counts = index_distributions(np.broadcast_to(a_idx, (columns, a.size)), bins_bits,
                                     np.broadcast_to(counted, (columns, a.size)), weights=b.T)
    codebook = entries.view(np.uint16).astype(np.int64)
    a_deq = np.where(counted, ca[a_idx], 0.0)
    y_float = a_deq @ b_deq
    l1 = np.abs(a_deq) @ np.abs(b_deq)
    bins = 1 << bins_bits
    bound = ((error + (bins + 2) * 2.0 ** -24) * l1 + 2.0 ** -11 * (np.abs(y_float) + error * l1)
             + 2.0 ** -25 * (counted.sum() + 1))
    y = column_weighted_sum(counts, codebook)
    return ColumnReference(a_idx, b_out, counted, ca, cb, codebook, counts, y, y_float, bound)
