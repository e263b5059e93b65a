"""Golden model of KLLM's Index Distribution Counter: per-reduction index histograms.

Reference: KLLM section IV-B (the counter: one-hot decoding and bit counters, "+1" counting for
K-Means x K-Means and "+n" counting for Integer x K-Means, section III-B2, Fig. 3(b)); the contract
section 2. Bit-exact with the ``kllm_idx_counter`` RTL, integer arithmetic only (int64); also
the width of its counters (:func:`counter_width`) and what they hold past it
(:func:`wrap_counts`).
"""

import numpy as np

from ..common.checks import check_int as _check_int
from .checks import INT64_MAX as _INT64_MAX
from .checks import check_index_array as _check_index_array
from .checks import check_int64_array as _check_int_array
from .checks import check_mask as _check_mask
from .checks import check_mode as _check_mode
from .checks import check_ndim as _check_ndim

__all__ = ["index_distribution", "index_distributions", "counter_width", "wrap_counts"]


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
    Fig. 3(b)). contract section 2: the result equals ``numpy.bincount(idx[mask], weights=...,
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
