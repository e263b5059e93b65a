"""Golden models of P3-LLM's hybrid numerical formats: FP8-E4M3 activations, FP8-S0E4M4
attention scores, BitMoD weights, INT4-asymmetric KV cache, key smoothing, and the baselines
they are compared with.

Reference: Chen et al., "P3-LLM: An Integrated NPU-PIM Accelerator for LLM Inference Using
Hybrid Numerical Formats": section II-C (Eq. 1, group quantization), IV-A (INT4-asym KV cache,
dynamic per-channel key smoothing, Eq. 2), IV-B (FP8-S0E4M4 attention scores), IV-C (BitMoD
weights), IV-D (FP8-E4M3 activations) and V-B (granularity: weights per group of 128,
activations per token, KV per head of 128, scores unscaled).

The quantizers are float models of the paper's algorithm: :func:`quantize_e4m3`,
:func:`quantize_s0e4m4`, :func:`quantize_bitmod`, :func:`quantize_int4_asym`, the baselines
:func:`quantize_fp4`, :func:`quantize_int4_sym`, :func:`quantize_int8`, and
:func:`smooth_keys`; each has its decoder. The bit-exact PE and compute unit that take these
codes are in :mod:`golden.p3.pe`.

Readings fixed here (the paper and the contract leave them open):

* **FP8-E4M3 activations.** Per token (``axis``): ``scale = absmax / 448`` (float64), codes the
  E4M3 value nearest to the float64 ``x / scale``, ties to even, in one rounding (the quantum of
  the value's binade, ``2^-9`` below ``2^-6``). ``ml_dtypes`` is not used for the rounding: it
  converts float64 through float32, a double rounding that misses the nearest code when ``x /
  scale`` lies within 2^-24 relative of a midpoint (2 of 1,048,576 random activations). ``|x /
  scale| <= 448 (1 + 2^-52)`` rounds to 448, so no code is NaN. An all-zero token stores scale
  1.0 (all codes 0).
* **FP8-S0E4M4 scores.** The layout is the FP16 magnitude truncated to 8 bits: same exponent
  field and bias (15), the top 4 of the 10 mantissa bits. So ``e = e16`` for every FP16 exponent
  ``e16`` in 0..15 (FP16 subnormals, ``e16 = 0``, map to S0E4M4 subnormals with the same
  ``2^-14`` scale) and the quantizer is ``code = min((bits16 + 32) >> 6, 0xFF)`` on the 15-bit
  FP16 magnitude ``bits16``: the 6 dropped bits round half up on the magnitude (``>= 32`` adds
  one to the 4-bit mantissa), a carry out of the mantissa increments the exponent (0 -> 1 turns a
  subnormal into a normal), and anything that reaches ``e16 >= 16`` (values ``>= 1.96875``,
  +inf) saturates at 0xFF = 1.9375. Values in [1, 1.9375] are representable (``e = 15``), so a
  softmax output of exactly 1.0 is exact. ``decode(quantize(x))`` is the nearest code value,
  ties to the larger one, saturated (tested exhaustively). Negative inputs (other than -0.0,
  which gives code 0) and NaN raise ValueError naming ``x_fp16``: scores are non-negative by
  construction (section IV-B, V-B), so a negative one is a caller bug, not data to clamp.
* **BitMoD weights** (section II-C Eq. 1, IV-C). Four variants, ``sv_sel`` 0..3 = special
  value +5, -5, +8, -8 (real units) replacing negative zero. Per group and variant the scale is
  Eq. 1 with ``Q_max`` the largest magnitude of *that variant's* value list: ``absmax / 6`` for
  ``sv_sel`` 0, 1 and ``absmax / 8`` for ``sv_sel`` 2, 3 (with ``absmax / 6`` the +-8 values
  could never be the nearest, so the variants would be pointless; this is also the rule of the
  BitMoD authors' public quantizer, ``qmax = max |value|`` per data type). Elements round to the
  nearest value of the variant; a tie (an element exactly midway between two values) goes as
  the authors' quantizer breaks it, to the smaller value (``ties="down"``: a value in
  ``(mid[i-1], mid[i]]`` is the i-th), or away from zero with ``ties="away"`` (the round half
  away of the FP4 baseline). The variant with the least sum of squared errors in real units
  wins, ties keep the lower ``sv_sel`` (the authors' order and strict comparison). The authors
  quantize in float16 tensors; this model computes in float64. Codes: bit 3 sign, bits [2:0]
  magnitude index into half units {0, 1, 2, 3, 4, 6, 8, 12}; zero is code 0, the special value
  is code 8 (0b1000). An all-zero group stores scale 1.0 and ``sv_sel`` 0.
* **INT4 asymmetric KV** (section IV-A). Per group: ``lo = min(min(x), 0)``,
  ``hi = max(max(x), 0)``, ``scale = (hi - lo) / 15``, ``zp = clip(rint(-lo / scale), 0, 15)``,
  ``q = clip(rint(x / scale) + zp, 0, 15)`` (``rint``: half to even, as ``torch.round``).
  Widening the range to include 0 keeps ``zp`` an exact 4-bit integer; it equals P3's reference
  quantizer whenever a group holds both signs (the usual case for a 128-element head).
  ``zero_in_range=False`` is the reference's reading (``lo = min(x)``, ``hi = max(x)``; a
  single-signed group's zero point clips to 0 or 15 and so do its far values). A group with an
  empty range (all zero; with ``False``, all equal) stores scale 1.0 (the reference clamps the
  scale at 1e-6).
* **Key smoothing** (section IV-A, Eq. 2): factor = per-channel ``max |K|`` over the first
  ``n_prefill`` tokens (all tokens by default); every token, prefill or decode, is divided by it,
  so decode tokens may exceed [-1, 1]. An all-zero channel gets factor 1.0.

All functions are deterministic and vectorized; argument errors raise TypeError (wrong type) or
ValueError (wrong value) naming the parameter. This module never imports ``hdl``.
"""

import ml_dtypes
import numpy as np

from ..common.checks import check_int as _check_int
from ..common.checks import check_int_array as _int_array
from .checks import broadcast as _broadcast
from .checks import expand as _expand
from .checks import float_array as _float_array
from .checks import grouped as _grouped
from .checks import round_to_set as _round_to_set
from .checks import safe_scale as _safe_scale
from .checks import TIES as _TIES

__all__ = [
    "ACT_E4M3", "ACT_S0E4M4", "WGT_BITMOD", "WGT_INT4",
    "E4M3_MAX", "S0E4M4_MAX", "BITMOD_HALF_UNITS", "BITMOD_SPECIAL_HALF", "FP4_VALUES",
    "quantize_e4m3", "decode_e4m3", "dequantize_e4m3",
    "quantize_s0e4m4", "decode_s0e4m4",
    "quantize_bitmod", "decode_bitmod", "dequantize_bitmod",
    "quantize_int4_asym", "decode_int4", "dequantize_int4_asym",
    "quantize_fp4", "decode_fp4", "dequantize_fp4",
    "quantize_int4_sym", "dequantize_int4_sym", "quantize_int8", "dequantize_int8",
    "smooth_keys",
]

ACT_E4M3, ACT_S0E4M4 = 0, 1          # act_fmt
WGT_BITMOD, WGT_INT4 = 0, 1          # wgt_fmt


E4M3_MAX = 448.0
S0E4M4_MAX = 1.9375                  # code 0xFF: M5 = 31, e = 15 -> 31 * 2^-4
BITMOD_HALF_UNITS = (0, 1, 2, 3, 4, 6, 8, 12)      # bits [2:0] -> magnitude in half units
BITMOD_SPECIAL_HALF = (10, -10, 16, -16)           # sv_sel -> special value of code 0b1000
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # E2M1 magnitudes, real units

_HALF = np.array(BITMOD_HALF_UNITS, np.int64)
_SPECIAL = np.array(BITMOD_SPECIAL_HALF, np.int64)
_HALF_TO_INDEX = np.full(13, -1, np.int64)
_HALF_TO_INDEX[_HALF] = np.arange(8)


# --- FP8-E4M3 activations (section IV-D, V-B) ------------------------------------------------


def quantize_e4m3(x, axis=-1):
    """Quantize activations to FP8-E4M3 per token (P3-LLM section IV-D, V-B).

    ``scale = absmax / 448`` along ``axis`` (float64), codes the OCP E4M3FN value nearest to
    the float64 ``x / scale``, ties to even, rounded once (see the module docstring). The
    absmax element maps to +-448.

    Parameters
    ----------
    x : array_like of real, at least 1-D
        Finite activations.
    axis : int
        The token's hidden axis (the reduction axis of the scale).

    Returns
    -------
    codes : numpy.ndarray of uint8, shape of ``x``
        OCP E4M3FN bit patterns (sign [7], exponent [6:3], mantissa [2:0]); never NaN codes.
    scales : numpy.ndarray of float64
        Shape of ``x`` with ``axis`` of length 1; 1.0 for an all-zero token.

    Raises
    ------
    TypeError, ValueError
        If ``x`` is not real and finite or ``axis`` is not a valid axis (the message names it).
    """
    x = _float_array("x", x)
    if x.ndim < 1:
        raise ValueError(f"x must have at least 1 dimension, not shape {x.shape}")
    axis = _check_int("axis", axis, -x.ndim, x.ndim - 1)
    absmax = np.max(np.abs(x), axis=axis, keepdims=True, initial=0.0)
    scales = _safe_scale(absmax / E4M3_MAX)
    codes = _round_e4m3(x / scales).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    return codes, scales


def _round_e4m3(y):
    """``y`` (float64) rounded once to the nearest E4M3 value, ties to even, saturated at 448:
    exact in float64 (the result converts to ``float8_e4m3fn`` without another rounding)."""
    _, exponent = np.frexp(y)                   # |y| in [2^(exponent-1), 2^exponent)
    quantum = np.maximum(exponent - 1, -6) - 3  # 3 mantissa bits; subnormals below 2^-6
    magnitude = np.ldexp(np.rint(np.ldexp(np.abs(y), -quantum)), quantum)
    return np.copysign(np.minimum(magnitude, E4M3_MAX), y)


def decode_e4m3(codes):
    """Real values of FP8-E4M3 codes via ``ml_dtypes.float8_e4m3fn`` (NaN for 0x7F, 0xFF).

    Parameters
    ----------
    codes : array_like of int in 0..255

    Returns
    -------
    numpy.ndarray of float64
    """
    codes = _int_array("codes", codes, 0, 255, "8-bit codes").astype(np.uint8)
    return codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def dequantize_e4m3(codes, scales):
    """``decode_e4m3(codes) * scales`` (``scales`` broadcast as returned by quantize_e4m3)."""
    return decode_e4m3(codes) * _float_array("scales", scales)


# --- FP8-S0E4M4 attention scores (section IV-B, V-B) -----------------------------------------


def quantize_s0e4m4(x_fp16):
    """Round FP16 attention scores to FP8-S0E4M4 codes (P3-LLM section IV-B, V-B; contract 5).

    No scaling: the FP16 exponent field is kept (``e = e16``, same bias 15, subnormals to
    subnormals) and the top 4 of its 10 mantissa bits are kept, rounding the dropped 6 bits half
    up on the magnitude with carry into the exponent: ``code = min((bits16 + 32) >> 6, 0xFF)``
    on the 15-bit magnitude ``bits16``. Results with ``e16 >= 16`` (``x >= 1.96875``, +inf)
    saturate at 0xFF (1.9375). ``decode_s0e4m4(code)`` is then the nearest code value to ``x``,
    ties to the larger one.

    Parameters
    ----------
    x_fp16 : array_like of float16
        Non-negative scores (-0.0 allowed, it gives code 0; +inf saturates).

    Returns
    -------
    numpy.ndarray of uint8, shape of ``x_fp16``
        Exponent in bits [7:4], mantissa in bits [3:0].

    Raises
    ------
    TypeError
        If ``x_fp16`` is not float16 (convert first: the rounding is defined on FP16 bits).
    ValueError
        If an element is negative or NaN.
    """
    x = np.asarray(x_fp16)
    if x.dtype != np.float16:
        raise TypeError(f"x_fp16 must be a float16 array, not {x.dtype} "
                        f"(convert with .astype(numpy.float16) first)")
    if np.isnan(x).any():
        raise ValueError("x_fp16 must not hold NaN (attention scores are numbers)")
    if (x < 0).any():
        raise ValueError(f"x_fp16 must be non-negative (FP8-S0E4M4 has no sign bit), not "
                         f"{float(x[x < 0].flat[0])}")
    magnitude = x.view(np.uint16).astype(np.int64) & 0x7FFF
    return np.minimum((magnitude + 32) >> 6, 0xFF).astype(np.uint8)


def decode_s0e4m4(codes):
    """Real values of FP8-S0E4M4 codes: ``M5 * 2^(max(e, 1) - 19)``, ``M5 = (e != 0) << 4 | m``.

    Parameters
    ----------
    codes : array_like of int in 0..255

    Returns
    -------
    numpy.ndarray of float64 (never NaN; 0xFF = 1.9375 is the largest)
    """
    codes = _int_array("codes", codes, 0, 255, "8-bit codes")
    e, m = codes >> 4, codes & 15
    m5 = ((e != 0).astype(np.int64) << 4) | m
    return np.ldexp(m5.astype(np.float64), np.maximum(e, 1) - 19)


# --- BitMoD weights (section IV-C) -----------------------------------------------------------


def _bitmod_values(sv_sel):
    """Ascending real values of one BitMoD variant (15 FP4 values + the special value)."""
    mags = np.array(FP4_VALUES[1:])
    values = np.concatenate([-mags, [0.0], mags, [BITMOD_SPECIAL_HALF[sv_sel] / 2]])
    return np.sort(values)


def _bitmod_qmax(sv_sel):
    return max(6.0, abs(BITMOD_SPECIAL_HALF[sv_sel]) / 2)


def _half_to_code(half, special_half):
    """Codes of values in half units; ``special_half`` (broadcast) is coded as 0b1000."""
    is_special = half == special_half
    mag = np.minimum(np.abs(half), 12)
    code = ((half < 0).astype(np.int64) << 3) | _HALF_TO_INDEX[mag]
    return np.where(is_special, 8, code)


def quantize_bitmod(w, group=128, ties="down"):
    """Quantize weights to BitMoD FP4 per group (P3-LLM section IV-C, V-B; BitMoD, HPCA 2025).

    For each group of ``group`` elements along the last axis and each variant ``sv_sel`` 0..3
    (special value +5, -5, +8, -8 in real units replacing negative zero): ``scale = absmax /
    Q_max`` with ``Q_max`` 6 (``sv_sel`` 0, 1) or 8 (2, 3) (Eq. 1), round ``w / scale`` to the
    nearest value of the variant, error ``sum((w - scale * q)^2)``. The variant with the least
    error wins; ties keep the lower ``sv_sel``.

    Parameters
    ----------
    w : array_like of real, shape (..., n)
        Finite weights; ``n`` a multiple of ``group``.
    group : int
        Group size (>= 1; the paper uses 128).
    ties : str
        An element exactly midway between two values of the variant: ``"down"`` the smaller
        one (the BitMoD authors' public quantizer), ``"away"`` the one farther from zero.

    Returns
    -------
    codes : numpy.ndarray of uint8, shape of ``w``
        4-bit codes (bit 3 sign, bits [2:0] magnitude index; 0b1000 the special value).
    sv_sel : numpy.ndarray of uint8, shape (..., n // group)
    scales : numpy.ndarray of float64, shape (..., n // group)
        Real weight = ``decode_bitmod(code, sv_sel) * 0.5 * scale``.

    Raises
    ------
    TypeError, ValueError
        If ``w`` or ``group`` is invalid (the message names it).
    """
    w = _float_array("w", w)
    wg, group = _grouped("w", w, group)
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {', '.join(map(repr, _TIES))}, not {ties!r}")
    absmax = np.max(np.abs(wg), axis=-1, initial=0.0)
    best_err = best_q = best_scale = None
    best_sel = np.zeros(wg.shape[:-1], np.int64)
    for sel in range(4):
        scale = _safe_scale(absmax / _bitmod_qmax(sel))
        q = _round_to_set(wg / scale[..., None], _bitmod_values(sel), ties)
        err = np.sum((wg - q * scale[..., None]) ** 2, axis=-1)
        if sel == 0:
            best_err, best_q, best_scale = err, q, scale
            continue
        better = err < best_err                     # strict: ties keep the earlier variant
        best_err = np.where(better, err, best_err)
        best_q = np.where(better[..., None], q, best_q)
        best_scale = np.where(better, scale, best_scale)
        best_sel = np.where(better, sel, best_sel)
    half = np.rint(best_q * 2).astype(np.int64)
    codes = _half_to_code(half, _SPECIAL[best_sel][..., None])
    return (codes.reshape(w.shape).astype(np.uint8), best_sel.astype(np.uint8),
            best_scale)


def decode_bitmod(codes, sv_sel):
    """Signed half-unit integers of BitMoD codes (contract section 5), element-wise.

    Bit 3 is the sign, bits [2:0] index {0, 1, 2, 3, 4, 6, 8, 12}; code 0b1000 decodes to the
    special value of ``sv_sel`` (0: +10, 1: -10, 2: +16, 3: -16).

    Parameters
    ----------
    codes : array_like of int in 0..15
    sv_sel : array_like of int in 0..3, broadcastable with ``codes``

    Returns
    -------
    numpy.ndarray of int64
    """
    codes = _int_array("codes", codes, 0, 15, "4-bit codes")
    sv_sel = _int_array("sv_sel", sv_sel, 0, 3, "special-value selectors")
    codes, sv_sel = _broadcast(codes=codes, sv_sel=sv_sel)
    mag = _HALF[codes & 7]
    w = np.where(codes >> 3, -mag, mag)
    return np.where(codes == 8, _SPECIAL[sv_sel], w)


def dequantize_bitmod(codes, sv_sel, scales, group=128):
    """Real weights ``decode_bitmod(codes, sv_sel) * 0.5 * scales``, per-group arrays expanded.

    ``codes`` has shape (..., n), ``sv_sel`` and ``scales`` (..., n // group).
    """
    group = _check_int("group", group, 1)
    scales = _float_array("scales", scales)
    sv = _int_array("sv_sel", sv_sel, 0, 3, "special-value selectors")
    return decode_bitmod(codes, _expand(sv, group)) * 0.5 * _expand(scales, group)


# --- INT4 asymmetric KV cache (section IV-A) --------------------------------------------------


def quantize_int4_asym(x, group=128, zero_in_range=True):
    """Quantize to INT4 asymmetric with a 4-bit integer zero point per group (section IV-A).

    ``lo = min(min(x), 0)``, ``hi = max(max(x), 0)``, ``scale = (hi - lo) / 15``,
    ``zp = clip(rint(-lo / scale), 0, 15)``, ``q = clip(rint(x / scale) + zp, 0, 15)``
    (``rint`` rounds half to even). Real value ``(q - zp) * scale``.

    Parameters
    ----------
    x : array_like of real, shape (..., n)
        Finite values; ``n`` a multiple of ``group`` (per KV head: 128, section V-B).
    group : int
        Group size (>= 1).
    zero_in_range : bool
        True: the range is widened to include 0, as above (``zp`` is then exact). False: P3's
        public quantizer, ``lo = min(x)``, ``hi = max(x)``: a group of one sign gets ``zp`` 0
        or 15 by the clip and its far values are clipped. The two agree on every group that
        holds both signs (or a 0).

    Returns
    -------
    q : numpy.ndarray of uint8, shape of ``x`` (0..15)
    zp : numpy.ndarray of uint8, shape (..., n // group) (0..15)
    scales : numpy.ndarray of float64, shape (..., n // group); 1.0 for an all-zero group

    Raises
    ------
    TypeError, ValueError
        If ``x`` or ``group`` is invalid (the message names it).
    """
    x = _float_array("x", x)
    xg, group = _grouped("x", x, group)
    if not isinstance(zero_in_range, (bool, np.bool_)):
        raise TypeError(f"zero_in_range must be a bool, not {zero_in_range!r}")
    if zero_in_range:
        lo = np.min(xg, axis=-1, initial=0.0)      # min(min(x), 0)
        hi = np.max(xg, axis=-1, initial=0.0)      # max(max(x), 0)
    else:
        lo, hi = np.min(xg, axis=-1), np.max(xg, axis=-1)
    scales = _safe_scale((hi - lo) / 15)
    zp = np.clip(np.rint(-lo / scales), 0, 15)
    q = np.clip(np.rint(xg / scales[..., None]) + zp[..., None], 0, 15)
    return q.reshape(x.shape).astype(np.uint8), zp.astype(np.uint8), scales


def decode_int4(q, zp):
    """``w = q - zp`` (contract section 5), element-wise with broadcasting; int64 in -15..15."""
    q = _int_array("q", q, 0, 15, "4-bit values")
    zp = _int_array("zp", zp, 0, 15, "4-bit zero points")
    q, zp = _broadcast(q=q, zp=zp)
    return q - zp


def dequantize_int4_asym(q, zp, scales, group=128):
    """Real values ``(q - zp) * scales``, with per-group ``zp`` and ``scales`` expanded."""
    group = _check_int("group", group, 1)
    zp = _int_array("zp", zp, 0, 15, "4-bit zero points")
    scales = _float_array("scales", scales)
    return decode_int4(q, _expand(zp, group)) * _expand(scales, group)


# --- baselines for the report ----------------------------------------------------------------


_FP4_SET = np.concatenate([-np.array(FP4_VALUES[:0:-1]), np.array(FP4_VALUES)])


def quantize_fp4(w, group=128):
    """Plain FP4 E2M1 per group (no special value): ``scale = absmax / 6``, nearest, ties away
    from zero. Returns ``(codes, scales)``; codes as BitMoD's without code 0b1000 (zero is 0).
    """
    w = _float_array("w", w)
    wg, group = _grouped("w", w, group)
    absmax = np.max(np.abs(wg), axis=-1, initial=0.0)
    scales = _safe_scale(absmax / 6.0)
    q = _round_to_set(wg / scales[..., None], _FP4_SET)
    codes = _half_to_code(np.rint(q * 2).astype(np.int64), 99)
    return codes.reshape(w.shape).astype(np.uint8), scales


def decode_fp4(codes):
    """Real E2M1 values of 4-bit codes (bit 3 sign, bits [2:0] magnitude index; 0b1000 = -0)."""
    codes = _int_array("codes", codes, 0, 15, "4-bit codes")
    mag = np.array(FP4_VALUES)[codes & 7]
    return np.where(codes >> 3, -mag, mag)


def dequantize_fp4(codes, scales, group=128):
    """Real weights ``decode_fp4(codes) * scales`` with per-group ``scales`` expanded."""
    group = _check_int("group", group, 1)
    return decode_fp4(codes) * _expand(_float_array("scales", scales), group)


def quantize_int4_sym(w, group=128):
    """Symmetric INT4 per group: ``scale = absmax / 7``, ``q = clip(rint(w / scale), -7, 7)``.

    Returns ``(q int8, scales float64 (..., n // group))``.
    """
    w = _float_array("w", w)
    wg, group = _grouped("w", w, group)
    absmax = np.max(np.abs(wg), axis=-1, initial=0.0)
    scales = _safe_scale(absmax / 7.0)
    q = np.clip(np.rint(wg / scales[..., None]), -7, 7)
    return q.reshape(w.shape).astype(np.int8), scales


def dequantize_int4_sym(q, scales, group=128):
    """Real values ``q * scales`` with per-group ``scales`` expanded."""
    group = _check_int("group", group, 1)
    q = _int_array("q", q, -8, 7, "signed 4-bit values")
    return q * _expand(_float_array("scales", scales), group)


def quantize_int8(x, axis=-1):
    """Symmetric INT8 per token: ``scale = absmax / 127``, ``q = clip(rint(x / scale), -127,
    127)``. Returns ``(q int8, scales)`` with ``axis`` kept as length 1 in ``scales``.
    """
    x = _float_array("x", x)
    if x.ndim < 1:
        raise ValueError(f"x must have at least 1 dimension, not shape {x.shape}")
    axis = _check_int("axis", axis, -x.ndim, x.ndim - 1)
    absmax = np.max(np.abs(x), axis=axis, keepdims=True, initial=0.0)
    scales = _safe_scale(absmax / 127.0)
    return np.clip(np.rint(x / scales), -127, 127).astype(np.int8), scales


def dequantize_int8(q, scales):
    """Real values ``q * scales``."""
    return _int_array("q", q, -128, 127, "signed 8-bit values") * _float_array("scales", scales)


# --- dynamic key smoothing (section IV-A, Eq. 2) ---------------------------------------------


def smooth_keys(K, n_prefill=None):
    """Divide every key channel by its absolute maximum over the prefill tokens (Eq. 2).

    P3-LLM section IV-A: the smoothing factors are the per-channel ``max |K[:, c]|`` of the
    keys generated during prefilling; they are saved and reused to scale the keys of later
    (decode) tokens. Prefill keys land in [-1, 1]; decode keys may exceed it.

    Parameters
    ----------
    K : array_like of real, shape (..., n_tokens, channels)
        Finite keys (tokens on axis -2).
    n_prefill : int or None
        Number of leading prefill tokens (1..n_tokens); None means all tokens.

    Returns
    -------
    K_s : numpy.ndarray of float64, shape of ``K``
        ``K / factors[..., None, :]``.
    factors : numpy.ndarray of float64, shape (..., channels)
        Per-channel smoothing factors; 1.0 for a channel that is all zero in the prefill.

    Raises
    ------
    TypeError, ValueError
        If ``K`` or ``n_prefill`` is invalid (the message names it).
    """
    K = _float_array("K", K)
    if K.ndim < 2:
        raise ValueError(f"K must have shape (..., n_tokens, channels), not {K.shape}")
    n_tokens = K.shape[-2]
    if n_tokens < 1:
        raise ValueError(f"K must hold at least one token, not shape {K.shape}")
    n_prefill = n_tokens if n_prefill is None else _check_int("n_prefill", n_prefill, 1,
                                                              n_tokens)
    factors = _safe_scale(np.max(np.abs(K[..., :n_prefill, :]), axis=-2))
    return K / factors[..., None, :], factors
