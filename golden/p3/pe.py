"""Golden models of P3-LLM's 4-way FP8 x INT4/BitMoD PE and of the PIM compute unit built
from it.

Reference: Chen et al., "P3-LLM: An Integrated NPU-PIM Accelerator for LLM Inference Using
Hybrid Numerical Formats", section V-C (the PE and the 16-PE compute unit) and V-D (the
throughput-enhanced compute unit); contract sections 5 and 9. The codes are those of
:mod:`golden.p3.formats`. Two models live here:

* **The bit-exact PE** (integer, the contract with the ``p3_pe`` RTL, contract section 5):
  :func:`decode_act`, :func:`decode_weight`, :func:`pe_products`, :func:`pe_run`, and
  :func:`acc_to_real` that turns an accumulator into the real dot product.
* **The bit-exact compute unit** (integer, the contract with the ``p3_pcu`` RTL, contract section
  9): :func:`pcu_run`, ``pes`` PE lanes sharing the activations of a beat, with ``reuse``
  accumulator sets selected per beat by ``slot``.

Readings fixed here (the paper and the contract leave them open):

* **PE overflow.** the contract: sticky ``overflow`` when "the exact sum leaves the 32-bit range"; the
  per-beat rule is ``exact = acc + sum(terms)``, ``overflow |= exact not in int32``. Up to the
  first overflow ``acc`` equals the true running sum, so both readings set the flag on the same
  beat, and the flag is sticky: :func:`pe_run` computes it from true segment prefix sums.
* **PCU slots** (contract section 9, section V-D). ``slot`` is a free per-beat selector of the
  accumulator set: any sequence of slots ``0..reuse-1`` is valid, not only the slot 0 / slot 1
  pairs that share a weight column. For every slot ``s`` and PE ``j``, the beats with
  ``slot == s`` are one independent :func:`pe_run` stream over PE ``j``'s fields; every set
  starts at 0 with clear flags after reset. Outputs come in the order of their ``last`` beats,
  each with the slot of its ``last`` beat. With ``reuse`` 1 ``slot`` is a 0-bit field: absent
  (None) or all zeros.

All functions are deterministic and vectorized; argument errors raise TypeError (wrong type) or
ValueError (wrong value) naming the parameter. This module never imports ``hdl``.
"""

import numpy as np

from ..common.checks import check_int as _check_int
from ..common.checks import check_int_array as _int_array
from .checks import bit_array as _bit_array
from .checks import broadcast as _broadcast
from .formats import ACT_S0E4M4, WGT_BITMOD, WGT_INT4, decode_bitmod, decode_int4

__all__ = [
    "LANES", "ACC_BITS",
    "decode_act", "decode_act_value", "decode_weight", "pe_products", "pe_run", "acc_to_real",
    "pcu_run",
]

LANES = 4                            # products per beat
ACC_BITS = 32
_ACC_MIN, _ACC_MAX = -(1 << (ACC_BITS - 1)), (1 << (ACC_BITS - 1)) - 1


# --- the PE (section V-C, contract section 5) ----------------------------------------------------


def decode_act(codes, act_fmt):
    """Decode FP8 activation codes into the PE's multiplier fields (contract section 5).

    * ``act_fmt`` 0, FP8-E4M3: sign s = bit 7, e = bits [6:3], m = bits [2:0];
      ``M5 = (e != 0) << 4 | m << 1``; NaN when ``e == 15 and m == 7``.
    * ``act_fmt`` 1, FP8-S0E4M4: no sign (0), e = bits [7:4], m = bits [3:0];
      ``M5 = (e != 0) << 4 | m``; never NaN.

    In both, ``shift = max(e, 1) - 1`` (0..14): the PE term is ``(-1)^s * M5 * w << shift``
    and the real value is ``(-1)^s * M5 * 2^shift`` times 2^-10 (E4M3) or 2^-18 (S0E4M4).

    Parameters
    ----------
    codes : array_like of int in 0..255
    act_fmt : int or array_like of int in {0, 1}, broadcastable with ``codes``

    Returns
    -------
    dict of numpy.ndarray, each of the broadcast shape
        ``sign`` (int64 0/1), ``m5`` (int64 0..31), ``shift`` (int64 0..14), ``nan`` (bool).
    """
    codes = _int_array("codes", codes, 0, 255, "8-bit codes")
    act_fmt = _int_array("act_fmt", act_fmt, 0, 1, "activation formats")
    codes, act_fmt = _broadcast(codes=codes, act_fmt=act_fmt)
    s0 = act_fmt == ACT_S0E4M4
    e = np.where(s0, codes >> 4, (codes >> 3) & 15)
    m = np.where(s0, codes & 15, codes & 7)
    hidden = (e != 0).astype(np.int64) << 4
    return {
        "sign": np.where(s0, 0, codes >> 7),
        "m5": hidden | np.where(s0, m, m << 1),
        "shift": np.maximum(e, 1) - 1,
        "nan": ~s0 & (e == 15) & (m == 7),
    }


def decode_act_value(codes, act_fmt):
    """Real value of activation codes from :func:`decode_act`'s fields (the contract's formulas).

    E4M3: ``(-1)^s * M5 * 2^(max(e,1) - 11)``; S0E4M4: ``M5 * 2^(max(e,1) - 19)``; NaN codes
    give NaN. Returns float64.
    """
    f = decode_act(codes, act_fmt)
    act_fmt = np.broadcast_to(np.asarray(act_fmt), f["m5"].shape)
    exp = f["shift"] - np.where(act_fmt == ACT_S0E4M4, 18, 10)
    value = np.ldexp(np.where(f["sign"] == 1, -f["m5"], f["m5"]).astype(np.float64), exp)
    return np.where(f["nan"], np.nan, value)


def decode_weight(codes, wgt_fmt, sv_sel, zp):
    """Decode 4-bit weight codes to the PE's signed integer ``w`` (contract section 5).

    ``wgt_fmt`` 0, BitMoD: :func:`decode_bitmod` (half units, -16..16, unit 0.5); ``wgt_fmt``
    1, INT4 asymmetric: ``w = q - zp`` (-15..15, unit 1). ``sv_sel`` only matters for BitMoD
    and ``zp`` only for INT4, but both are hardware fields and are range-checked always.

    Parameters
    ----------
    codes : array_like of int in 0..15
    wgt_fmt : int or array_like of int in {0, 1}
    sv_sel : int or array_like of int in 0..3
    zp : int or array_like of int in 0..15
        All broadcastable with ``codes``.

    Returns
    -------
    numpy.ndarray of int64, the broadcast shape
    """
    codes = _int_array("codes", codes, 0, 15, "4-bit codes")
    wgt_fmt = _int_array("wgt_fmt", wgt_fmt, 0, 1, "weight formats")
    sv_sel = _int_array("sv_sel", sv_sel, 0, 3, "special-value selectors")
    zp = _int_array("zp", zp, 0, 15, "4-bit zero points")
    codes, wgt_fmt, sv_sel, zp = _broadcast(codes=codes, wgt_fmt=wgt_fmt, sv_sel=sv_sel, zp=zp)
    return np.where(wgt_fmt == WGT_INT4, decode_int4(codes, zp), decode_bitmod(codes, sv_sel))


def _check_beats(act, wgt):
    act = _int_array("act", act, 0, 255, "8-bit activation codes")
    wgt = _int_array("wgt", wgt, 0, 15, "4-bit weight codes")
    if act.ndim < 1 or act.shape[-1] != LANES:
        raise ValueError(f"act must have shape (..., {LANES}), not {act.shape}")
    if wgt.shape != act.shape:
        raise ValueError(f"wgt must have the shape of act {act.shape}, not {wgt.shape}")
    return act, wgt


def _beat_field(name, values, shape, lo, hi, what):
    values = _int_array(name, values, lo, hi, what)
    try:
        return np.broadcast_to(values, shape)
    except ValueError:
        raise ValueError(f"{name} must be a scalar or have shape {shape} (one per beat), "
                         f"not {values.shape}") from None


def pe_products(act, wgt, act_fmt, wgt_fmt, sv_sel, zp):
    """The 4 integer products of each beat (P3-LLM section V-C; contract section 5).

    Per lane: ``term = (-1)^s * M5 * w << shift`` (:func:`decode_act`, :func:`decode_weight`),
    0 for a NaN activation lane; per beat: ``nan`` if any lane is NaN.

    Parameters
    ----------
    act : array_like of int in 0..255, shape (..., 4)
        Activation codes, lane ``i`` in ``act[..., i]``.
    wgt : array_like of int in 0..15, shape (..., 4)
        Weight codes.
    act_fmt, wgt_fmt, sv_sel, zp : int or array_like of int, shape (...)
        Per-beat fields (scalars apply to every beat): {0, 1}, {0, 1}, 0..3, 0..15.

    Returns
    -------
    dict
        ``terms``: int64 array (..., 4), each within +-31 * 16 * 2^14; ``nan``: bool (...).

    Raises
    ------
    TypeError, ValueError
        If an argument has a wrong type, value or shape (the message names it).
    """
    act, wgt = _check_beats(act, wgt)
    beats = act.shape[:-1]
    act_fmt = _beat_field("act_fmt", act_fmt, beats, 0, 1, "activation formats")
    wgt_fmt = _beat_field("wgt_fmt", wgt_fmt, beats, 0, 1, "weight formats")
    sv_sel = _beat_field("sv_sel", sv_sel, beats, 0, 3, "special-value selectors")
    zp = _beat_field("zp", zp, beats, 0, 15, "4-bit zero points")
    a = decode_act(act, act_fmt[..., None])
    w = decode_weight(wgt, wgt_fmt[..., None], sv_sel[..., None], zp[..., None])
    signed = np.where(a["sign"] == 1, -a["m5"], a["m5"])
    terms = np.where(a["nan"], 0, np.left_shift(signed * w, a["shift"]))
    return {"terms": terms, "nan": a["nan"].any(axis=-1)}


def _bit_flags(name, values, n):
    values = _bit_array(name, values)
    try:
        return np.broadcast_to(values, (n,)).copy()
    except ValueError:
        raise ValueError(f"{name} must be a scalar or have shape ({n},) (one per beat), "
                         f"not {values.shape}") from None


def _wrap(x):
    """Two's complement wrap of int64 values to signed ``ACC_BITS`` bits."""
    return ((x - _ACC_MIN) & ((1 << ACC_BITS) - 1)) + _ACC_MIN


def pe_run(act, wgt, act_fmt, wgt_fmt, sv_sel, zp, first, last):
    """Run a stream of beats through the PE and return one result per ``last`` beat.

    P3-LLM section V-C, contract section 5. After reset the accumulator and the sticky ``overflow``
    and ``nan`` flags are 0. A beat with ``first`` clears all three before adding its own terms.
    Every beat: ``exact = acc + sum(terms)``; ``overflow |= exact`` outside the int32 range;
    ``acc = wrap32(exact)``; ``nan |= beat has a NaN lane``. A beat with ``last`` emits
    ``(acc, overflow, nan)`` after its own update; without a ``first`` on the next beat, the
    accumulator and the flags carry on.

    Parameters
    ----------
    act : array_like of int in 0..255, shape (n, 4)
    wgt : array_like of int in 0..15, shape (n, 4)
    act_fmt, wgt_fmt, sv_sel, zp : int or array_like of int, shape (n,)
        Per-beat fields: {0, 1}, {0, 1}, 0..3, 0..15.
    first, last : bool or array_like of bool / 0-1 int, shape (n,)

    Returns
    -------
    dict of numpy.ndarray, one entry per ``last`` beat in stream order
        ``acc`` (int64 holding the signed 32-bit accumulator), ``overflow`` (bool), ``nan``
        (bool).

    Raises
    ------
    TypeError, ValueError
        If an argument has a wrong type, value or shape (the message names it).
    """
    act, wgt = _check_beats(act, wgt)
    if act.ndim != 2:
        raise ValueError(f"act must have shape (n, {LANES}), not {act.shape}")
    n = act.shape[0]
    first = _bit_flags("first", first, n)
    last = _bit_flags("last", last, n)
    prod = pe_products(act, wgt, act_fmt, wgt_fmt, sv_sel, zp)
    if n == 0:
        return {"acc": np.zeros(0, np.int64), "overflow": np.zeros(0, bool),
                "nan": np.zeros(0, bool)}
    exact, overflow, nan = _accumulate(prod["terms"].sum(axis=-1), prod["nan"], first)
    return {"acc": _wrap(exact)[last], "overflow": overflow[last], "nan": nan[last]}


def _accumulate(beat_sum, beat_nan, first):
    """The accumulator state after every beat of one stream (axis 0; ``n >= 1`` beats).

    ``beat_sum`` (n, ...) int64 and ``beat_nan`` (n, ...) bool are each beat's summed terms and
    NaN flag; trailing axes are independent accumulators sharing ``first`` (n,) bool. The state
    restarts at every ``first`` beat and at beat 0 (reset). Returns the true (unwrapped) running
    sum, the sticky overflow and the sticky nan flag, each (n, ...).
    """
    starts = first.copy()
    starts[0] = True                                       # reset acts as a first
    start_of = np.flatnonzero(starts)[np.cumsum(starts) - 1]   # segment start of each beat

    def running(values):                                   # segment prefix sums, inclusive
        c = np.cumsum(values, axis=0, dtype=np.int64)
        c = np.concatenate([np.zeros((1,) + c.shape[1:], np.int64), c])
        return c[1:] - c[start_of]

    exact = running(beat_sum)                              # |beat_sum| < 2^25: exact in int64
    overflow = running((exact < _ACC_MIN) | (exact > _ACC_MAX)) > 0
    nan = running(beat_nan) > 0
    return exact, overflow, nan


def acc_to_real(acc, act_fmt, wgt_fmt):
    """The real dot product held by accumulator values (contract section 5).

    ``acc * 2^-10`` (E4M3) or ``acc * 2^-18`` (S0E4M4), times the weight unit 0.5 (BitMoD) or
    1 (INT4). Exact in float64 for any 32-bit ``acc``. Per-group scales (BitMoD, INT4) and
    per-token scales (E4M3) are applied by the NPU afterwards (section V-B) and are not here.

    Parameters
    ----------
    acc : array_like of int
    act_fmt, wgt_fmt : int or array_like of int in {0, 1}, broadcastable with ``acc``

    Returns
    -------
    numpy.ndarray of float64
    """
    acc = _int_array("acc", acc, _ACC_MIN, _ACC_MAX, "signed 32-bit values")
    act_fmt = _int_array("act_fmt", act_fmt, 0, 1, "activation formats")
    wgt_fmt = _int_array("wgt_fmt", wgt_fmt, 0, 1, "weight formats")
    acc, act_fmt, wgt_fmt = _broadcast(acc=acc, act_fmt=act_fmt, wgt_fmt=wgt_fmt)
    exp = -np.where(act_fmt == ACT_S0E4M4, 18, 10) - np.where(wgt_fmt == WGT_BITMOD, 1, 0)
    return np.ldexp(acc.astype(np.float64), exp)


# --- the compute unit (section V-C, V-D, contract section 9) -------------------------------------


def _lane_field(name, values, shape, lo, hi, what):
    """A per-beat, per-PE field: a scalar (every beat and PE) or exactly ``shape`` (n, pes)."""
    values = _int_array(name, values, lo, hi, what)
    if values.ndim == 0:
        return np.broadcast_to(values, shape)
    if values.shape != shape:
        raise ValueError(f"{name} must be a scalar or have shape {shape} (one per beat and PE), "
                         f"not {values.shape}")
    return values


def pcu_run(act, wgt, act_fmt, wgt_fmt, sv_sel, zp, first, last, slot=None, *, reuse=1):
    """Run a stream of beats through the PIM compute unit; one result per ``last`` beat.

    P3-LLM section V-C (Fig. 6(c): 16 PEs share one set of 4 FP8 activations, a 1 x 4 x 16
    GEMV tile per 256-bit column read) and V-D (throughput-enhanced PCU: one weight column is
    reused for ``reuse`` activation sets, each with its own accumulators); contract section 9.

    Every beat carries 4 activation codes shared by all ``pes`` lanes and, per PE ``j``, four
    weight codes ``wgt[:, j, :]`` (weight ``k`` paired with ``act[:, k]``), a special-value
    selector ``sv_sel[:, j]`` and a zero point ``zp[:, j]``; the formats are per beat and shared.
    Each lane is the PE of contract section 5 (:func:`pe_products`, :func:`pe_run`), bit-exact.

    Slots (the reading adopted here): ``slot`` is a free per-beat selector of the accumulator
    set; any sequence of slots ``0..reuse-1`` is valid, not only slot 0 / slot 1 pairs. For
    every slot ``s`` and PE ``j``, the beats with ``slot == s`` form one independent
    :func:`pe_run` stream over PE ``j``'s fields (``act``, ``wgt[:, j]``, ``sv_sel[:, j]``,
    ``zp[:, j]``, ``act_fmt``, ``wgt_fmt``, ``first``, ``last``): ``first`` clears that slot's
    accumulators and sticky flags only, ``last`` emits that slot's state after the beat. Every
    accumulator set is 0 with clear flags after reset. The outputs are in the order of their
    ``last`` beats in the input stream, each carrying the slot of its ``last`` beat. Nothing
    here requires the beats of a slot pair to share ``wgt``, ``sv_sel``, ``zp`` or formats
    (contract 9 says the stream does; the arithmetic does not depend on it).

    Parameters
    ----------
    act : array_like of int in 0..255, shape (n, 4)
        Activation codes shared by every PE.
    wgt : array_like of int in 0..15, shape (n, pes, 4)
        Weight codes, PE-major (``pes >= 1``).
    act_fmt, wgt_fmt : int or array_like of int in {0, 1}, shape (n,)
        Per-beat formats (a scalar applies to every beat).
    sv_sel : int or array_like of int in 0..3, shape (n, pes)
        Per-beat, per-PE BitMoD special-value selector (a scalar applies everywhere).
    zp : int or array_like of int in 0..15, shape (n, pes)
        Per-beat, per-PE INT4 zero point (a scalar applies everywhere).
    first, last : bool or array_like of bool / 0-1 int, shape (n,)
    slot : None, int or array_like of int in 0..reuse-1, shape (n,)
        Accumulator set of each beat; None means all 0 (with ``reuse`` 1 the RTL field has 0
        bits: pass None or zeros).
    reuse : int, keyword-only
        Number of accumulator sets, 1 or 2.

    Returns
    -------
    dict of numpy.ndarray, one row per ``last`` beat in stream order (m = number of ``last``)
        ``acc`` (m, pes) int64 holding the signed 32-bit accumulators, ``overflow`` (m, pes)
        bool, ``nan`` (m, pes) bool, ``slot`` (m,) int64.

    Raises
    ------
    TypeError, ValueError
        If an argument has a wrong type, value or shape (the message names it, the value and
        the allowed range), e.g. a ``slot`` >= ``reuse``.
    """
    reuse = _check_int("reuse", reuse, 1, 2)
    act = _int_array("act", act, 0, 255, "8-bit activation codes")
    if act.ndim != 2 or act.shape[1] != LANES:
        raise ValueError(f"act must have shape (n, {LANES}), not {act.shape}")
    n = act.shape[0]
    wgt = _int_array("wgt", wgt, 0, 15, "4-bit weight codes")
    if wgt.ndim != 3 or wgt.shape[0] != n or wgt.shape[1] < 1 or wgt.shape[2] != LANES:
        raise ValueError(f"wgt must have shape (n, pes, {LANES}) with n = {n} (act's beats) and "
                         f"pes >= 1, not {wgt.shape}")
    pes = wgt.shape[1]
    act_fmt = _beat_field("act_fmt", act_fmt, (n,), 0, 1, "activation formats")
    wgt_fmt = _beat_field("wgt_fmt", wgt_fmt, (n,), 0, 1, "weight formats")
    sv_sel = _lane_field("sv_sel", sv_sel, (n, pes), 0, 3, "special-value selectors")
    zp = _lane_field("zp", zp, (n, pes), 0, 15, "4-bit zero points")
    first = _bit_flags("first", first, n)
    last = _bit_flags("last", last, n)
    slot = np.zeros(n, np.int64) if slot is None else \
        _beat_field("slot", slot, (n,), 0, reuse - 1, f"accumulator sets of reuse {reuse}")
    prod = pe_products(np.broadcast_to(act[:, None, :], (n, pes, LANES)), wgt,
                       act_fmt[:, None], wgt_fmt[:, None], sv_sel, zp)
    beat_sum = prod["terms"].sum(axis=-1)                  # (n, pes)
    exact = np.zeros((n, pes), np.int64)
    overflow = np.zeros((n, pes), bool)
    nan = np.zeros((n, pes), bool)
    for s in range(reuse):                                 # one independent stream per slot
        beats = np.flatnonzero(slot == s)
        if beats.size:
            exact[beats], overflow[beats], nan[beats] = _accumulate(
                beat_sum[beats], prod["nan"][beats], first[beats])
    return {"acc": _wrap(exact[last]), "overflow": overflow[last], "nan": nan[last],
            "slot": slot[last].astype(np.int64)}
