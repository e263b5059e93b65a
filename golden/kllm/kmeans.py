"""Golden models of KLLM's K-Means quantization: codebooks, weights, activations and outliers.

Reference: KLLM section III-A (weighted K-Means, scaling), II-A2 and III-D (activation
outliers, Fig. 2(b), Fig. 5) and IV-C (Orizuru's outlier selection). Float references of the
paper's algorithm (float64); the one binary16 rounding is that of the activation outliers,
which the paper keeps in FP16 (:func:`split_outliers`).

Readings of the paper adopted by these models (the contract: "the code must document the reading"):

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
  (contract section 3, :mod:`golden.kllm.orizuru`): by IEEE totalOrder of their binary16 rounding
  (``-0`` below ``+0``; values that round to the same binary16 tie), ties going to the lower
  index first on the largest side and to the higher index first on the smallest side. The
  outlier mask of the algorithm is then the mask Orizuru reports.
"""

import math
from typing import NamedTuple

import numpy as np

from ..common.checks import check_int as _check_int
from .checks import check_codebook as _check_codebook
from .checks import check_ndim as _check_ndim
from .checks import check_real_array as _check_real_array

__all__ = [
    "kmeans_codebook", "kmeans_quantize", "dequantize", "max_abs_scale",
    "WeightQuantization", "quantize_weights",
    "outliers_per_side", "split_outliers", "activation_codebook",
    "QuantizedActivation", "quantize_activation", "dequantize_activation",
]


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

    Ranking (one tie rule with Orizuru, contract section 3): elements are compared by IEEE
    totalOrder of their binary16 rounding, the values the hardware compares, so ``-0.0`` ranks
    below ``+0.0`` and float64 values that round to the same binary16 are equal. Among equal
    keys the largest side takes the **lowest** index first (Orizuru's max tree: ties go left)
    and the smallest side the **highest** index first (its min tree: ties go right). The mask
    is therefore the one :func:`golden.kllm.orizuru.orizuru` reports for ``k`` on the binary16
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
    pattern ``x`` maps to ``~x`` if its sign bit is set, else to ``x | 0x8000`` (contract section
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
