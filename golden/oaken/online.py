"""Golden model of Oaken's online KV-cache quantization: decomposer, encoder and dequantizer.

Reference: Kim et al., "Oaken: Fast and Efficient LLM Serving with Online-Offline Hybrid KV
Cache Quantization", section 4.3 (threshold grouping, Eq. 2-3), 4.4 (group shift, Eq. 4),
4.5 (fused dense-and-sparse encoding) and 5.2 (Fig. 9, decomposer and dequantization engine);
contract section 4. Integer functions are bit-exact with the RTL; :func:`quantize_dequantize_float`
is the paper's algorithm in floating point.

Readings fixed here (contract section 4 leaves them to the golden model):

* **Groups at the thresholds** (the contract's inequalities, exactly): ``x == t_lo_i`` and
  ``x == t_hi_i`` are *inner*; ``x == t_lo_o`` is *middle* lower side (if ``t_lo_o < t_lo_i``,
  else inner) and ``x == t_hi_o`` is *middle* upper side (if ``t_hi_i < t_hi_o``, else inner).
  Equal thresholds simply empty a group.
* **Side** (the decomposer's ``side`` bit, 1 = upper): outer ``x > t_hi_o``; middle
  ``x > t_hi_i``; inner ``x >= 0``. The shifted value therefore has a fixed sign per side:
  middle and outer ``s >= 1`` on the upper side and ``s <= -1`` on the lower side; inner
  ``s = x``. The COO sign bit is ``s < 0``, i.e. ``1 - side`` for inner and outer elements.
* **Codes.** The encoder divides by the exact rational step ``d = (max - min) / 15``:
  ``q = round_half_up((v - min) / d) = floor((30 (v - min) + (max - min)) / (2 (max - min)))``
  in integers, ``v`` being ``s`` (middle) or ``|s|`` (inner, outer). Since
  ``0 <= v - min <= max - min`` the clip to 0..15 never acts. ``max == min`` gives code 0.
* **Fixed-point metadata** (``frac_bits`` = F fractional bits): ``min_fx = min * 2^F`` (exact:
  min is an integer) and ``d_fx = round_half_up((max - min) * 2^F / 15)
  = floor(((max - min) * 2^(F+1) + 15) / 30)``, exact in integers, never via floats.
  So ``|d_fx / 2^F - d| <= 2^-(F+1)``. An empty group stores ``min_fx = d_fx = 0``.
* **Dequantization** is the contract's integer formula. For a middle element the decoder has no side
  bit: the sign of the reconstruction ``m`` picks it, ``m >= 0`` meaning upper (``t_hi_i``),
  so a reconstruction of exactly 0 lands on ``t_hi_i``, and an element whose ``m`` comes out
  with the opposite sign to ``s`` (possible when the middle range straddles 0 and ``|s| <
  d/2``) is rebuilt on the other side, off by the gap ``t_hi_i - t_lo_i``. Per element,
  ``|m - s| <= d/2 + 15 * 2^-(F+1) + 1/2`` (see :func:`reconstruction_bound`).
* **COO validity.** :func:`dequantize_vector` rejects (ValueError naming ``coo``) entries whose
  index is ``>= vec_len`` or that are not strictly increasing by index; a decoder that accepted
  them would have no defined position for the outlier.

Payloads. One chunk is ``vec_len`` (default 64, at most 64: 6-bit COO index) elements. Dense:
``vec_len`` 4-bit codes (uint8), the middle code or the outlier's magnitude code. COO: one uint8
per inner/outer element, in increasing index order, bits [7:2] index, [1] group (0 inner,
1 outer), [0] sign. Metadata: :class:`OakenMeta`, six signed integers of ``M = data_bits +
frac_bits + 2`` bits.
"""

from typing import NamedTuple

import numpy as np

from ..common.checks import check_int as _check_int
from ..common.checks import check_int_array as _check_int_array

__all__ = [
    "MIDDLE", "INNER", "OUTER", "MAX_VEC_LEN", "OakenMeta", "OakenChunk",
    "check_thresholds", "decompose", "quantize_vector", "dequantize_vector",
    "quantize_dequantize_float", "pack_coo", "unpack_coo", "reconstruction_bound",
]

MIDDLE, INNER, OUTER = 0, 1, 2
MAX_VEC_LEN = 64            # 6-bit COO index


class OakenMeta(NamedTuple):
    """Per-group metadata of one chunk, signed fixed point with ``frac_bits`` fractional bits.

    Attributes
    ----------
    mid_min, mid_d : int
        Middle group: ``min(s) * 2^F`` and ``round_half_up((max - min) * 2^F / 15)``.
    in_min, in_d, out_min, out_d : int
        The same over ``|s|`` of the inner and the outer group.
    """

    mid_min: int
    mid_d: int
    in_min: int
    in_d: int
    out_min: int
    out_d: int


class OakenChunk(NamedTuple):
    """One encoded chunk: the fused dense-and-sparse encoding (Oaken section 4.5).

    Attributes
    ----------
    dense : numpy.ndarray of uint8, shape (vec_len,)
        4-bit codes: the middle code, or the magnitude code of an inner/outer element.
    coo : numpy.ndarray of uint8, shape (n_outliers,)
        Entries sorted by index: bits [7:2] index, [1] group (0 inner, 1 outer), [0] sign.
    meta : OakenMeta
    """

    dense: np.ndarray
    coo: np.ndarray
    meta: OakenMeta


# --- argument checks -------------------------------------------------------------------------


def _signed_range(bits):
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _check_widths(data_bits, frac_bits=None):
    data_bits = _check_int("data_bits", data_bits, 2, 32)
    if frac_bits is None:
        return data_bits
    return data_bits, _check_int("frac_bits", frac_bits, 1, 16)


def check_thresholds(t_lo_o, t_lo_i, t_hi_i, t_hi_o):
    """Check the ordering ``t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o`` of a layer's thresholds.

    Parameters
    ----------
    t_lo_o, t_lo_i, t_hi_i, t_hi_o : int
        Outer-low, inner-low, inner-high and outer-high thresholds (Oaken section 4.3).

    Returns
    -------
    tuple of 4 int

    Raises
    ------
    TypeError
        If a threshold is not an integer (the message names it).
    ValueError
        If the thresholds are out of order; the message names and shows all four.
    """
    names = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")
    values = tuple(_check_int(n, v, -(1 << 63), (1 << 63) - 1)
                   for n, v in zip(names, (t_lo_o, t_lo_i, t_hi_i, t_hi_o)))
    if not values[0] <= values[1] <= values[2] <= values[3]:
        shown = ", ".join(f"{n}={v}" for n, v in zip(names, values))
        raise ValueError(f"thresholds must satisfy t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o, "
                         f"not {shown}")
    return values


def _check_threshold_tuple(thresholds, data_bits, check_order=True):
    if not isinstance(thresholds, (tuple, list)) or len(thresholds) != 4:
        raise TypeError(f"thresholds must be a sequence (t_lo_o, t_lo_i, t_hi_i, t_hi_o), "
                        f"not {thresholds!r}")
    if check_order:
        values = check_thresholds(*thresholds)
    else:
        values = tuple(_check_int(n, v, -(1 << 63), (1 << 63) - 1)
                       for n, v in zip(("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o"), thresholds))
    lo, hi = _signed_range(data_bits)
    for name, value in zip(("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o"), values):
        if not lo <= value <= hi:
            raise ValueError(f"{name} must be a signed {data_bits}-bit value ({lo}..{hi}), "
                             f"not {value}")
    return values


# --- decomposer ------------------------------------------------------------------------------


def decompose(x, thresholds, data_bits=16, check_order=True):
    """Split values into groups and shift them, as the ``oaken_decomposer`` RTL does.

    Oaken section 4.3-4.4 (Eq. 4), 5.2 (Fig. 9(a) ①); contract section 4. Element-wise:

    * outer ``x < t_lo_o`` (s = x - t_lo_o, lower) or ``x > t_hi_o`` (s = x - t_hi_o, upper);
    * middle ``t_lo_o <= x < t_lo_i`` (s = x - t_lo_i, lower) or ``t_hi_i < x <= t_hi_o``
      (s = x - t_hi_i, upper);
    * inner ``t_lo_i <= x <= t_hi_i`` (s = x; upper side when x >= 0).

    Parameters
    ----------
    x : array_like of int, any shape
        Signed ``data_bits`` values.
    thresholds : sequence of 4 int
        ``(t_lo_o, t_lo_i, t_hi_i, t_hi_o)``, ordered, each a signed ``data_bits`` value.
    data_bits : int
        2..32.
    check_order : bool
        If False, misordered thresholds are accepted and the element-wise rules above are
        applied in the RTL's priority order: outer upper side (``x > t_hi_o``) first, then
        outer lower side, then inner, else middle (upper side if ``x > t_hi_i``). This is what
        ``oaken_decomposer`` computes for misordered streamed thresholds.

    Returns
    -------
    dict of numpy.ndarray of int64, each of the shape of ``x``
        ``group`` (0 middle, 1 inner, 2 outer), ``side`` (1 upper), ``inlier`` (s for middle
        elements, else 0) and ``outlier`` (s for inner and outer elements, else 0); the shifted
        values fit ``data_bits + 1`` signed bits.

    Raises
    ------
    TypeError, ValueError
        If ``x``, ``thresholds`` or ``data_bits`` is invalid (the message names it).
    """
    data_bits = _check_widths(data_bits)
    t_lo_o, t_lo_i, t_hi_i, t_hi_o = _check_threshold_tuple(thresholds, data_bits,
                                                            check_order)
    lo, hi = _signed_range(data_bits)
    x = _check_int_array("x", x, lo, hi, f"signed {data_bits}-bit values")

    outer_hi = x > t_hi_o
    outer = (x < t_lo_o) | outer_hi
    inner = (x >= t_lo_i) & (x <= t_hi_i) & ~outer
    middle_hi = (x > t_hi_i) & ~outer
    group = np.where(outer, OUTER, np.where(inner, INNER, MIDDLE))
    side = np.where(outer, outer_hi, np.where(inner, x >= 0, middle_hi)).astype(np.int64)
    shift = np.select(
        [outer & outer_hi, outer, middle_hi, group == MIDDLE],
        [t_hi_o, t_lo_o, t_hi_i, t_lo_i], default=0)
    s = x - shift
    is_middle = group == MIDDLE
    return {
        "group": group.astype(np.int64),
        "side": side,
        "inlier": np.where(is_middle, s, 0),
        "outlier": np.where(is_middle, 0, s),
    }


# --- fused dense-and-sparse encoding ---------------------------------------------------------


def pack_coo(index, outer, sign):
    """Pack COO entries: ``index << 2 | outer << 1 | sign`` (uint8; index 0..63, bits 0/1)."""
    index = _check_int_array("index", index, 0, MAX_VEC_LEN - 1, "6-bit indices")
    outer = _check_int_array("outer", outer, 0, 1, "group bits")
    sign = _check_int_array("sign", sign, 0, 1, "sign bits")
    return ((index << 2) | (outer << 1) | sign).astype(np.uint8)


def unpack_coo(coo):
    """Return ``(index, outer, sign)`` int64 arrays from 8-bit COO entries."""
    coo = _check_int_array("coo", coo, 0, 255, "8-bit COO entries")
    return coo >> 2, (coo >> 1) & 1, coo & 1


def _group_codes(values, member):
    """Codes and (min, max) of ``values`` over the elements where ``member`` holds."""
    if not member.any():
        return np.zeros(values.shape, np.int64), 0, 0
    vmin, vmax = int(values[member].min()), int(values[member].max())
    span = vmax - vmin
    if span == 0:
        codes = np.zeros(values.shape, np.int64)
    else:
        # round_half_up((v - min) / (span / 15)), exact in integers
        codes = np.clip((30 * (values - vmin) + span) // (2 * span), 0, 15)
    return np.where(member, codes, 0), vmin, vmax


def _meta_fx(vmin, vmax, frac_bits):
    span = vmax - vmin
    return vmin << frac_bits, (span * (1 << (frac_bits + 1)) + 15) // 30


def quantize_vector(x, thresholds, frac_bits=8, data_bits=16, vec_len=64, check_order=True):
    """Encode one chunk: grouping, group shift, 4-bit codes, fused dense-and-sparse encoding.

    Oaken section 4.3-4.5 (Eq. 2-4, Fig. 7); contract section 4. Middle: asymmetric 4-bit codes over
    ``s``; inner and outer: sign ``s < 0`` (in the COO entry) and a 4-bit magnitude code over
    ``|s|`` (in the dense vector). Per group ``d = (max - min) / 15``; codes
    ``round_half_up((v - min) / d)``, 0 when ``max == min``. Metadata per the module docstring.

    Parameters
    ----------
    x : array_like of int, shape (vec_len,)
        Signed ``data_bits`` values.
    thresholds : sequence of 4 int
        ``(t_lo_o, t_lo_i, t_hi_i, t_hi_o)``.
    frac_bits : int
        Fractional bits of the metadata, 1..16.
    data_bits : int
        2..32.
    vec_len : int
        Chunk length, 1..64.
    check_order : bool
        Refuse misordered thresholds (default). With False, values are grouped in
        :func:`decompose`'s priority order (outer upper, outer lower, inner, middle) and coded
        by the rules above for those groups: what ``oaken_quantizer`` does with a chunk whose
        thresholds are misordered.

    Returns
    -------
    OakenChunk

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid (the message names it).
    """
    data_bits, frac_bits = _check_widths(data_bits, frac_bits)
    vec_len = _check_int("vec_len", vec_len, 1, MAX_VEC_LEN)
    x = np.asarray(x)
    if x.shape != (vec_len,):
        raise ValueError(f"x must have shape ({vec_len},) (vec_len), not {x.shape}")
    parts = decompose(x, thresholds, data_bits, check_order=check_order)
    group = parts["group"]
    s = parts["inlier"] + parts["outlier"]
    mag = np.abs(s)

    mid_q, mid_lo, mid_hi = _group_codes(s, group == MIDDLE)
    in_q, in_lo, in_hi = _group_codes(mag, group == INNER)
    out_q, out_lo, out_hi = _group_codes(mag, group == OUTER)
    dense = (mid_q | in_q | out_q).astype(np.uint8)     # merged by OR (Fig. 9(a))

    index = np.flatnonzero(group != MIDDLE)
    coo = pack_coo(index, (group[index] == OUTER).astype(np.int64),
                   (s[index] < 0).astype(np.int64))
    meta = OakenMeta(*_meta_fx(mid_lo, mid_hi, frac_bits), *_meta_fx(in_lo, in_hi, frac_bits),
                     *_meta_fx(out_lo, out_hi, frac_bits))
    return OakenChunk(dense, coo, meta)


# --- dequantization --------------------------------------------------------------------------


def dequantize_vector(dense, coo, meta, thresholds, frac_bits=8, data_bits=16,
                      check_order=True):
    """Decode one chunk with contract section 4's bit-exact integer formula.

    Positions named in ``coo`` are inner or outer (by the group bit), all others middle (the
    zero-insert of Oaken section 5.2, Fig. 9(b) ⑤). With the element's group metadata,
    ``v = min_fx + q * d_fx`` and ``m = (v + 2^(F-1)) >> F`` (arithmetic); then middle
    ``x' = m + (t_hi_i if m >= 0 else t_lo_i)``, inner ``x' = -m if sign else m``, outer
    ``x' = (-m if sign else m) + (t_lo_o if sign else t_hi_o)``; ``x'`` saturates to the
    signed ``data_bits`` range.

    Parameters
    ----------
    dense : array_like of int, shape (vec_len,)
        4-bit codes, 1 <= vec_len <= 64.
    coo : array_like of int, shape (n,)
        8-bit entries with strictly increasing indices below ``vec_len``.
    meta : OakenMeta or sequence of 6 int
        Signed ``data_bits + frac_bits + 2``-bit fixed-point values.
    thresholds : sequence of 4 int
    frac_bits, data_bits : int
    check_order : bool
        If False, misordered thresholds are accepted: the formula does not depend on their
        order (``oaken_dequantizer`` applies it to whatever its header carries).

    Returns
    -------
    numpy.ndarray of int64, shape (vec_len,)

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid, including an out-of-range or out-of-order COO entry
        (the message names the argument).
    """
    data_bits, frac_bits = _check_widths(data_bits, frac_bits)
    t_lo_o, t_lo_i, t_hi_i, t_hi_o = _check_threshold_tuple(thresholds, data_bits,
                                                            check_order)
    dense = _check_int_array("dense", dense, 0, 15, "4-bit codes")
    if dense.ndim != 1 or not 1 <= dense.size <= MAX_VEC_LEN:
        raise ValueError(f"dense must have shape (vec_len,) with vec_len in 1..{MAX_VEC_LEN}, "
                         f"not {dense.shape}")
    vec_len = dense.size
    coo = _check_int_array("coo", coo, 0, 255, "8-bit COO entries")
    if coo.ndim != 1:
        raise ValueError(f"coo must be 1-D, not of shape {coo.shape}")
    index, outer_bit, sign = unpack_coo(coo)
    if index.size and index.max() >= vec_len:
        raise ValueError(f"coo entries must index 0..{vec_len - 1} (vec_len {vec_len}), "
                         f"not {int(index.max())}")
    if index.size > 1 and (np.diff(index) <= 0).any():
        raise ValueError(f"coo entries must have strictly increasing indices, not "
                         f"{index.tolist()}")
    if not isinstance(meta, (tuple, list)) or len(meta) != 6:
        raise TypeError(f"meta must be an OakenMeta or 6 integers, not {meta!r}")
    m_lo, m_hi = _signed_range(data_bits + frac_bits + 2)
    meta = OakenMeta(*(_check_int(f"meta.{n}", v, m_lo, m_hi)
                       for n, v in zip(OakenMeta._fields, meta)))

    group = np.full(vec_len, MIDDLE, np.int64)
    group[index] = np.where(outer_bit == 1, OUTER, INNER)
    sgn = np.zeros(vec_len, np.int64)
    sgn[index] = sign
    mins = np.array([meta.mid_min, meta.in_min, meta.out_min], np.int64)[group]
    steps = np.array([meta.mid_d, meta.in_d, meta.out_d], np.int64)[group]
    v = mins + dense * steps
    m = (v + (1 << (frac_bits - 1))) >> frac_bits
    signed_m = np.where(sgn == 1, -m, m)
    x = np.select(
        [group == MIDDLE, group == INNER],
        [m + np.where(m >= 0, t_hi_i, t_lo_i), signed_m],
        default=signed_m + np.where(sgn == 1, t_lo_o, t_hi_o))
    lo, hi = _signed_range(data_bits)
    return np.clip(x, lo, hi)


def reconstruction_bound(span, frac_bits=8):
    """Bound on ``|m - s|`` for a group of range ``span = max - min`` (integer path).

    ``d/2`` from the 4-bit code, ``15 * 2^-(F+1)`` from rounding ``d`` to ``d_fx`` (min is
    exact), ``1/2`` from rounding ``v`` to the integer ``m``; both sides are integers, so the
    floor of the sum bounds the error.
    """
    return int(np.floor(span / 30 + 15 / (1 << (frac_bits + 1)) + 0.5))


# --- float reference -------------------------------------------------------------------------


def quantize_dequantize_float(x, thresholds, vec_len=64):
    """Quantize and reconstruct with the paper's algorithm in float64 (no fixed point).

    Oaken Eq. 2-4: per chunk and group, ``d = (max - min) / 15``,
    ``q = clip(floor((v - min) * 15 / (max - min) + 1/2), 0, 15)`` (0 if ``d == 0``; evaluated
    in that order so that an exact half is exact in float64 and rounds up, as in
    :func:`quantize_vector`), ``r = min + q d``; then
    middle ``r + (t_hi_i if r >= 0 else t_lo_i)`` (the same side rule as the integer decoder),
    inner ``±r``, outer ``±r + (t_lo_o or t_hi_o)``. No saturation and no rounding of ``r``.

    Parameters
    ----------
    x : array_like of int, shape (..., vec_len)
        Signed 32-bit-or-narrower integers; chunks along the last axis.
    thresholds : sequence of 4 int
    vec_len : int
        1..64; the last axis of ``x``.

    Returns
    -------
    numpy.ndarray of float64, shape of ``x``
    """
    vec_len = _check_int("vec_len", vec_len, 1, MAX_VEC_LEN)
    x = np.asarray(x)
    if x.ndim < 1 or x.shape[-1] != vec_len:
        raise ValueError(f"x must have shape (..., {vec_len}) (vec_len), not {x.shape}")
    parts = decompose(x, thresholds, 32)
    t_lo_o, t_lo_i, t_hi_i, t_hi_o = (int(t) for t in thresholds)
    group = parts["group"]
    s = (parts["inlier"] + parts["outlier"]).astype(np.float64)
    out = np.zeros(x.shape, np.float64)
    for g, v in ((MIDDLE, s), (INNER, np.abs(s)), (OUTER, np.abs(s))):
        member = group == g
        vmin = np.where(member, v, np.inf).min(axis=-1, keepdims=True)
        vmax = np.where(member, v, -np.inf).max(axis=-1, keepdims=True)
        d = np.where(np.isfinite(vmin), (vmax - vmin) / 15, 0.0)
        vmin = np.where(np.isfinite(vmin), vmin, 0.0)
        span = vmax - vmin
        with np.errstate(divide="ignore", invalid="ignore"):
            # (v - min) * 15 / span: one rounding, so exact halves stay exact (ties as encoder)
            q = np.where(d > 0, np.clip(np.floor((v - vmin) * 15 / span + 0.5), 0, 15), 0.0)
        r = vmin + q * d
        if g == MIDDLE:
            rec = r + np.where(r >= 0, t_hi_i, t_lo_i)
        elif g == INNER:
            rec = np.where(s < 0, -r, r)
        else:
            rec = np.where(s < 0, -r + t_lo_o, r + t_hi_o)
        out = np.where(member, rec, out)
    return out
