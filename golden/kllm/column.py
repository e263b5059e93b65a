"""Golden model of ``kllm_column``: the index-based MatMul column, Concat -> Index
Distribution Counter -> weighted sum of the codebook, as one unit.

Reference: KLLM section III-B (Fig. 3) and IV-A / IV-B; contract section 7. The RTL of
``hdl/kllm/column.py`` is checked against these functions (through the beat adapter
``golden.kllm.beats.kllm_column``), bit-exact: the arithmetic is NumPy float32 in the contract's
order. :func:`column_float_reference` is the float reference of the same MatMul.
"""

from typing import NamedTuple

import numpy as np

from ..common.checks import check_int as _check_int
from .checks import check_index_array as _check_index_array
from .checks import check_int64_array as _check_int_array
from .checks import check_mask as _check_mask
from .checks import check_mode as _check_mode
from .checks import check_ndim as _check_ndim
from .checks import check_real_array as _check_real_array
from .checks import check_vector_matrix as _check_vector_matrix
from .concat import concat_indices
from .idx_counter import counter_width, index_distributions
from .kmeans import kmeans_codebook, kmeans_quantize, split_outliers
from .matmul import product_codebook

__all__ = [
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

    contract section 7: for the bins in ascending order whose count is not 0,
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
    final ``last`` belong to no finished reduction and give nothing. Bins (contract section 7):
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
    ``codebook``. Where ``overflow`` is set the unit's ``y`` is unspecified (contract section 7):
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

    contract section 7 as the project reads it: beat k of a load writes entry k, counting from 0 at
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
