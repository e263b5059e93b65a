"""The 4-bit KV-cache baselines Oaken is compared with, Oaken's own stored bits and round
trips on the same data, and the error metrics of the comparison.

Reference: Kim et al., "Oaken: Fast and Efficient LLM Serving with Online-Offline Hybrid KV
Cache Quantization", section 4.4 (mixed-precision outliers cost "23 bits per entry: 16 bits for
the value, 6 bits for the index, and 1 bit to indicate the group"), 4.5 (fused dense-and-sparse
encoding: 8-bit COO entries), 6.1 (baselines KIVI, Atom, KVQuant, QServe) and 6.2 (effective
bitwidth, Table 2-3); contract section 4. Oaken's chunks come from the bit-exact encoder of
:mod:`golden.oaken.online`; the thresholds from :mod:`golden.oaken.profile`.

Readings fixed here (the paper does not spell them out):

* **Baselines** are simulated quantize-then-dequantize functions in float64 returning
  :class:`QuantResult`. Asymmetric b-bit quantization of a group with minimum ``lo`` and
  maximum ``hi``: scale ``d = (hi - lo) / (2^b - 1)`` and zero ``lo``, both stored as fp16
  (``meta_dtype``; 32 bits per group) and used as stored,
  ``q = clip(floor((x - lo) / d + 1/2), 0, 2^b - 1)``, ``x' = lo + q d``; ``d = 0`` codes 0.
  Bit counts exclude anything stored once per layer (channel permutations, thresholds).
* **Oaken bits** are counted on real :class:`golden.oaken.online.OakenChunk` outputs:
  ``4 vec_len`` dense bits + 8 per COO entry + ``6 M`` metadata bits per chunk with
  ``M = data_bits + frac_bits + 2`` (contract section 4), also reported without the metadata.
  The paper's effective bitwidth ``4 + 8 (outer + inner)`` (4.8 at 4/90/6, Table 3) leaves the
  per-token metadata out; its Table 2 figure of 4.82 for Llama2-7B is consistent with six
  16-bit values per 4096-element token (our reading), whereas here a 64-element chunk carries
  ``6 x 26`` bits of metadata (2.44 bits per element).
"""

import math
from typing import NamedTuple

import numpy as np

from ..common.checks import check_int as _check_int
from .checks import check_float_array as _check_float_array
from .checks import check_ratios as _check_ratios
from .checks import check_samples as _check_samples
from .online import MAX_VEC_LEN, MIDDLE, decompose, dequantize_vector, quantize_dequantize_float, \
    quantize_vector, unpack_coo
from .profile import DEFAULT_INNER, DEFAULT_OUTER

__all__ = [
    "COO_BITS", "MIXED_COO_BITS", "CODE_BITS",
    "QuantResult", "per_token_int4", "kivi_like", "atom_like", "coo23_mixed", "OakenResult",
    "oaken_chunk_bits", "oaken_roundtrip", "oaken_float_roundtrip", "effective_bitwidth",
    "ErrorMetrics", "error_metrics",
]

COO_BITS = 8                # Oaken section 4.5: 6 index + 1 group + 1 sign bits per entry
MIXED_COO_BITS = 23         # Oaken section 4.4: 16 value + 6 index + 1 group bits per entry
CODE_BITS = 4


# --- baselines -------------------------------------------------------------------------------


class QuantResult(NamedTuple):
    """A simulated quantize-dequantize pass and what it stores.

    Attributes
    ----------
    recon : numpy.ndarray of float64
        Reconstruction, the shape of the input.
    step : numpy.ndarray of float64
        Quantization step used for each element (the stored scale); 0 where the element is
        stored exactly or its group has ``max == min``.
    bits_per_element : float
        All bits stored (codes, sparse entries, per-group metadata) over the element count.
    bits_per_element_no_meta : float
        The same without per-group metadata (scales, zeros).
    bits_per_outlier : float or None
        Bits of one sparse or high-precision outlier entry; None if the scheme has none.
    """

    recon: np.ndarray
    step: np.ndarray
    bits_per_element: float
    bits_per_element_no_meta: float
    bits_per_outlier: object


def _check_bits(name, bits):
    return _check_int(name, bits, 1, 16)


def _check_meta_dtype(meta_dtype):
    if meta_dtype is None:
        return None
    dtype = np.dtype(meta_dtype)
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"meta_dtype must be a floating dtype or None, not {meta_dtype!r}")
    return dtype


def _asym(v, mask, bits, meta_dtype):
    """Asymmetric ``bits``-bit quantization over the last axis, where ``mask`` holds.

    Returns ``(recon, step)`` (both the shape of ``v``; unmasked positions 0).
    """
    levels = (1 << bits) - 1
    lo = np.where(mask, v, np.inf).min(axis=-1, keepdims=True)
    hi = np.where(mask, v, -np.inf).max(axis=-1, keepdims=True)
    empty = ~np.isfinite(lo)
    lo = np.where(empty, 0.0, lo)
    hi = np.where(empty, 0.0, hi)
    d = (hi - lo) / levels
    if meta_dtype is not None:                       # scale and zero as stored
        d = d.astype(meta_dtype).astype(np.float64)
        lo = lo.astype(meta_dtype).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d > 0, np.clip(np.floor((v - lo) / d + 0.5), 0, levels), 0.0)
    recon = np.where(mask, lo + q * d, 0.0)
    step = np.where(mask, np.broadcast_to(d, v.shape), 0.0)
    return recon, step


def _grouped_asym(x, axis, group_size, bits, meta_dtype, mask=None):
    """Asymmetric quantization in groups of ``group_size`` along ``axis`` (last group ragged).

    Returns ``(recon, step, n_groups_total)``.
    """
    x = np.moveaxis(x, axis, -1)
    mask = np.ones(x.shape, bool) if mask is None else np.moveaxis(mask, axis, -1)
    n = x.shape[-1]
    g = n if group_size is None else group_size
    n_groups = -(-n // g)
    pad = n_groups * g - n
    widths = [(0, 0)] * (x.ndim - 1) + [(0, pad)]
    xp = np.pad(x, widths).reshape(x.shape[:-1] + (n_groups, g))
    mp = np.pad(mask, widths).reshape(xp.shape)
    recon, step = _asym(xp, mp, bits, meta_dtype)
    shape = x.shape[:-1] + (n_groups * g,)
    recon = np.moveaxis(recon.reshape(shape)[..., :n], -1, axis)
    step = np.moveaxis(step.reshape(shape)[..., :n], -1, axis)
    return recon, step, int(np.prod(x.shape[:-1])) * n_groups


def per_token_int4(x, group_size=64, bits=4, meta_dtype=np.float16):
    """Plain per-token asymmetric INT4: min / max per group of ``group_size`` channels.

    The simplest 4-bit KV baseline: each token's vector is cut into groups of ``group_size``
    consecutive channels (the last group may be shorter; ``None``: one group per token), each
    with its own fp16 scale and zero (module docstring). Default 64, the chunk of
    :mod:`golden.oaken`, so both carry metadata at the same granularity.

    Parameters
    ----------
    x : array_like of real, shape (..., n_channels)
    group_size : int or None
        >= 1, or None for whole tokens.
    bits : int
        Code width, 1..16.
    meta_dtype : dtype or None
        Storage type of scale and zero (None: float64, unrounded).

    Returns
    -------
    QuantResult
        ``bits + 32 n_groups / n`` bits per element (32 = fp16 scale + zero).
    """
    x = _check_float_array("x", x)
    if group_size is not None:
        group_size = _check_int("group_size", group_size, 1)
    bits = _check_bits("bits", bits)
    meta_dtype = _check_meta_dtype(meta_dtype)
    recon, step, n_groups = _grouped_asym(x, -1, group_size, bits, meta_dtype)
    return QuantResult(recon, step, bits + 32 * n_groups / x.size, float(bits), None)


def kivi_like(x, kind="key", group_size=32, bits=4, meta_dtype=np.float16):
    """KIVI-like baseline: keys per-channel, values per-token, asymmetric INT4 in groups.

    After KIVI (Liu et al., cited in Oaken section 3 and 6.1): a key channel is quantized over
    groups of ``group_size`` consecutive tokens, a value token over groups of ``group_size``
    consecutive channels; fp16 scale and zero per group. KIVI's full-precision window of
    recent tokens is not modelled (every token is quantized).

    Parameters
    ----------
    x : array_like of real, shape (..., n_tokens, n_channels)
    kind : {"key", "value"}
    group_size : int
        >= 1 (the last group along the axis may be shorter).
    bits : int
        1..16.
    meta_dtype : dtype or None

    Returns
    -------
    QuantResult
        ``bits + 32 n_groups / n`` bits per element (5.0 for INT4 with groups of 32).
    """
    x = _check_float_array("x", x, 2)
    if kind not in ("key", "value"):
        raise ValueError(f"kind must be 'key' or 'value', not {kind!r}")
    group_size = _check_int("group_size", group_size, 1)
    bits = _check_bits("bits", bits)
    meta_dtype = _check_meta_dtype(meta_dtype)
    axis = -2 if kind == "key" else -1
    recon, step, n_groups = _grouped_asym(x, axis, group_size, bits, meta_dtype)
    return QuantResult(recon, step, bits + 32 * n_groups / x.size, float(bits), None)


def atom_like(x, n_outlier_channels=8, group_size=64, bits=4, outlier_bits=8, calib=None,
              meta_dtype=np.float16):
    """Atom-like baseline: reordered outlier channels at INT8, the rest INT4 in groups.

    After Atom (Zhao et al., cited in Oaken section 3 and 6.1): the ``n_outlier_channels``
    channels of largest mean ``|x|`` over ``calib`` (calibration data, offline; default ``x``
    itself) are moved to the end of each token and quantized together at ``outlier_bits``; the
    remaining channels, in their original order, are quantized per token in groups of
    ``group_size`` at ``bits``. Every group (the outlier group included) is asymmetric with an
    fp16 scale and zero. The permutation is per layer and not counted.

    Parameters
    ----------
    x : array_like of real, shape (..., n_channels)
    n_outlier_channels : int
        0..n_channels.
    group_size : int
        >= 1 (the last inlier group may be shorter).
    bits, outlier_bits : int
        1..16.
    calib : array_like of real, shape (..., n_channels), optional
    meta_dtype : dtype or None

    Returns
    -------
    QuantResult
        ``bits_per_outlier`` is ``outlier_bits`` (per outlier-channel element).
    """
    x = _check_float_array("x", x)
    n_channels = x.shape[-1]
    n_out = _check_int("n_outlier_channels", n_outlier_channels, 0, n_channels)
    group_size = _check_int("group_size", group_size, 1)
    bits = _check_bits("bits", bits)
    outlier_bits = _check_bits("outlier_bits", outlier_bits)
    meta_dtype = _check_meta_dtype(meta_dtype)
    calib = x if calib is None else _check_float_array("calib", calib)
    if calib.shape[-1] != n_channels:
        raise ValueError(f"calib must have {n_channels} channels (the last axis of x), "
                         f"not {calib.shape[-1]}")
    energy = np.abs(calib).reshape(-1, n_channels).mean(axis=0)
    order = np.argsort(-energy, kind="stable")
    out_ch = np.sort(order[:n_out])
    in_ch = np.sort(order[n_out:])
    recon = np.zeros_like(x)
    step = np.zeros_like(x)
    tokens = x.size // n_channels
    meta_groups = 0
    if in_ch.size:
        r, s, g = _grouped_asym(x[..., in_ch], -1, group_size, bits, meta_dtype)
        recon[..., in_ch], step[..., in_ch] = r, s
        meta_groups += g
    if n_out:
        r, s, g = _grouped_asym(x[..., out_ch], -1, None, outlier_bits, meta_dtype)
        recon[..., out_ch], step[..., out_ch] = r, s
        meta_groups += g
    payload = tokens * (bits * in_ch.size + outlier_bits * n_out)
    return QuantResult(recon, step, (payload + 32 * meta_groups) / x.size, payload / x.size,
                       float(outlier_bits) if n_out else None)


def _chunks(n, vec_len):
    return [(start, min(start + vec_len, n)) for start in range(0, n, vec_len)]


def coo23_mixed(x, thresholds, vec_len=64, bits=4, data_bits=16, meta_dtype=np.float16):
    """Mixed-precision dense-and-sparse baseline: 23-bit COO outliers, INT4 inliers.

    Oaken section 4.4's comparison point ("a storage cost of 23 bits per entry: 16 bits for the
    value, 6 bits for the index, and 1 bit to indicate the group"), as in KVQuant-style
    dense-and-sparse schemes: with Oaken's own thresholds and groups (contract section 4), inner
    and outer elements are kept exactly as 16-bit values in COO entries; middle elements are
    quantized per ``vec_len`` chunk to ``bits`` asymmetric over their values *without* group
    shift (min / max of the middle values, fp16 scale and zero), in a dense vector of
    ``vec_len`` codes whose outlier positions are zeroed.

    Parameters
    ----------
    x : array_like of int, shape (..., n)
        Signed ``data_bits`` values; chunks of ``vec_len`` along the last axis (last one
        possibly shorter).
    thresholds : sequence of 4 int
    vec_len : int
        1..64.
    bits : int
        1..16.
    data_bits : int
        2..32; the COO entry is ``data_bits + 7`` bits (23 for 16-bit data).
    meta_dtype : dtype or None

    Returns
    -------
    QuantResult
        ``bits_per_outlier`` is ``data_bits + 7``.
    """
    data_bits = _check_int("data_bits", data_bits, 2, 32)
    x = _check_samples("x", x, 1, data_bits, "(..., n)")
    vec_len = _check_int("vec_len", vec_len, 1, MAX_VEC_LEN)
    bits = _check_bits("bits", bits)
    meta_dtype = _check_meta_dtype(meta_dtype)
    middle = decompose(x, thresholds, data_bits)["group"] == MIDDLE
    recon, step, n_groups = _grouped_asym(x.astype(np.float64), -1, vec_len, bits, meta_dtype,
                                          mask=middle)
    recon = np.where(middle, recon, x)
    n_outliers = int(np.count_nonzero(~middle))
    entry = data_bits + 7
    payload = bits * x.size + entry * n_outliers
    return QuantResult(recon, step, (payload + 32 * n_groups) / x.size, payload / x.size,
                       float(entry))


# --- Oaken: bits and round trips -------------------------------------------------------------


class OakenResult(NamedTuple):
    """Oaken's integer path over many chunks, with counts from the real encoder outputs.

    Attributes
    ----------
    recon : numpy.ndarray of int64
        :func:`golden.oaken.online.dequantize_vector` of every chunk, the shape of the input.
    bits_per_element, bits_per_element_no_meta : float
        Stored bits (dense codes, COO entries, and the metadata or not) per element.
    bits_per_outlier : int
        8 (one COO entry; the 4 magnitude bits ride in the dense vector).
    n_elements, n_chunks, n_inner, n_outer : int
        Element and chunk counts; inner and outer COO entries, by their group bit.
    """

    recon: np.ndarray
    bits_per_element: float
    bits_per_element_no_meta: float
    bits_per_outlier: int
    n_elements: int
    n_chunks: int
    n_inner: int
    n_outer: int


def oaken_chunk_bits(chunk, data_bits=16, frac_bits=8, metadata=True):
    """Return the bits one :class:`golden.oaken.online.OakenChunk` occupies.

    ``4 vec_len`` (dense codes) ``+ 8 n_coo`` (Oaken section 4.5) ``+ 6 M`` if ``metadata``,
    ``M = data_bits + frac_bits + 2`` (contract section 4: six signed fixed-point values).
    """
    data_bits = _check_int("data_bits", data_bits, 2, 32)
    frac_bits = _check_int("frac_bits", frac_bits, 1, 16)
    bits = CODE_BITS * len(chunk.dense) + COO_BITS * len(chunk.coo)
    return bits + (6 * (data_bits + frac_bits + 2) if metadata else 0)


def oaken_roundtrip(x, thresholds, frac_bits=8, data_bits=16, vec_len=64):
    """Encode and decode ``x`` with Oaken's bit-exact integer model, chunk by chunk.

    Every ``vec_len`` chunk along the last axis (the last one may be shorter) goes through
    :func:`golden.oaken.online.quantize_vector` and :func:`golden.oaken.online.dequantize_vector`;
    bits and outlier counts are taken from the returned chunks.

    Parameters
    ----------
    x : array_like of int, shape (..., n)
        Signed ``data_bits`` values.
    thresholds : sequence of 4 int
        One layer's ``(t_lo_o, t_lo_i, t_hi_i, t_hi_o)``.
    frac_bits, data_bits, vec_len : int
        As for :func:`golden.oaken.online.quantize_vector`.

    Returns
    -------
    OakenResult
    """
    data_bits = _check_int("data_bits", data_bits, 2, 32)
    x = _check_samples("x", x, 1, data_bits, "(..., n)")
    vec_len = _check_int("vec_len", vec_len, 1, MAX_VEC_LEN)
    rows = x.reshape(-1, x.shape[-1])
    recon = np.empty_like(rows)
    bits = bits_no_meta = n_inner = n_outer = n_chunks = 0
    for r, row in enumerate(rows):
        for start, stop in _chunks(row.size, vec_len):
            c = quantize_vector(row[start:stop], thresholds, frac_bits, data_bits, stop - start)
            recon[r, start:stop] = dequantize_vector(c.dense, c.coo, c.meta, thresholds,
                                                     frac_bits, data_bits)
            bits_no_meta += oaken_chunk_bits(c, data_bits, frac_bits, metadata=False)
            bits += oaken_chunk_bits(c, data_bits, frac_bits)
            outer_bit = unpack_coo(c.coo)[1]
            n_outer += int(outer_bit.sum())
            n_inner += int(outer_bit.size - outer_bit.sum())
            n_chunks += 1
    return OakenResult(recon.reshape(x.shape), bits / x.size, bits_no_meta / x.size, COO_BITS,
                       x.size, n_chunks, n_inner, n_outer)


def oaken_float_roundtrip(x, thresholds, vec_len=64):
    """:func:`golden.oaken.online.quantize_dequantize_float` over ``vec_len`` chunks of the last
    axis.

    Unlike that function, the last axis need not be a multiple of ``vec_len``: a shorter final
    chunk is handled on its own. Returns float64, the shape of ``x``.
    """
    x = np.asarray(x)
    vec_len = _check_int("vec_len", vec_len, 1, MAX_VEC_LEN)
    if x.ndim < 1:
        raise ValueError(f"x must have shape (..., n), not {x.shape}")
    n = x.shape[-1]
    full = n - n % vec_len
    out = np.empty(x.shape, np.float64)
    if full:
        head = x[..., :full].reshape(x.shape[:-1] + (full // vec_len, vec_len))
        out[..., :full] = quantize_dequantize_float(head, thresholds, vec_len).reshape(
            x.shape[:-1] + (full,))
    if full < n:
        out[..., full:] = quantize_dequantize_float(x[..., full:], thresholds, n - full)
    return out


def effective_bitwidth(outer=DEFAULT_OUTER, inner=DEFAULT_INNER, code_bits=CODE_BITS,
                       coo_bits=COO_BITS):
    """Oaken's effective bitwidth without metadata: ``code_bits + coo_bits (outer + inner)``.

    Oaken section 6.2 (Fig. 12(a), Table 3): 4.8 bits at 4 / 90 / 6 %.
    """
    outer, inner, _ = _check_ratios(outer, inner, 0.5)
    return code_bits + coo_bits * (outer + inner)


# --- error metrics ---------------------------------------------------------------------------


class ErrorMetrics(NamedTuple):
    """Reconstruction error of ``y`` against ``x``.

    Attributes
    ----------
    rmse : float
        ``sqrt(mean((y - x)^2))``.
    max_abs : float
        ``max |y - x|``.
    sqnr_db : float
        ``10 log10(sum x^2 / sum (y - x)^2)`` (``inf`` for an exact reconstruction).
    rel_err : float
        ``||y - x||_2 / ||x||_2``.
    """

    rmse: float
    max_abs: float
    sqnr_db: float
    rel_err: float


def error_metrics(x, y):
    """Return :class:`ErrorMetrics` of the reconstruction ``y`` of ``x`` (same shape)."""
    x = _check_float_array("x", x)
    y = _check_float_array("y", y)
    if x.shape != y.shape:
        raise ValueError(f"y must have the shape of x {x.shape}, not {y.shape}")
    e = y - x
    noise = float(np.sum(e * e))
    signal = float(np.sum(x * x))
    with np.errstate(divide="ignore"):
        sqnr = float(10 * np.log10(signal / noise)) if noise else math.inf
    return ErrorMetrics(math.sqrt(noise / e.size), float(np.abs(e).max()), sqnr,
                        math.sqrt(noise / signal) if signal else (0.0 if not noise else math.inf))
