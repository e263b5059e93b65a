"""The binary16 reading of the FP16 MAC (:class:`hdl.baselines.fp16_mac.fp16_mac.Fp16Mac` with ``acc="fp16"``):
the product rounded to binary16, the binary16 accumulation loop, and the output packing.

Numbers between the steps are :data:`~hdl.baselines.fp16_mac.formats.HALF_LAYOUT` values (``value = sig *
2^(exp - 25)``, ``exp`` >= 1, subnormals and zero at ``exp = 1``). Their binary16 bit pattern
is ``((exp - 1) << 10) + sig`` for every finite value: bit 10 of a normal significand adds the
missing one to the exponent field, a subnormal (bit 10 clear) has field 0. Both roundings
below use the same identity: a rounding that carries out of the significand (2047 + 1) gives
``sig = 1024`` one exponent up, and a subnormal rounded up to 1024 is the smallest normal
number, at the same ``exp = 1``.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from ...common.arith import at_least
from .formats import (CANONICAL_NAN_FP16, HALF_LAYOUT, HALF_PRODUCT_LAYOUT,
                               HALF_RAW_PRODUCT_LAYOUT, leading_zeros)

__all__ = ["multiply_half", "round_product", "accumulate_half", "pack_half"]

#: The product's exponent field offset: ``e_a + e_b - 15`` is the biased binary16 exponent of
#: ``sig_a * sig_b * 2^(e_a + e_b - 50)`` with the product's leading one at bit 20.
_PRODUCT_EXP_OFFSET = -15


def multiply_half(m, operands, *, name="raw_product_next"):
    """The multiplier step (combinational): the significand product and the exponent of
    :data:`~hdl.baselines.fp16_mac.formats.HALF_RAW_PRODUCT_LAYOUT` from the multiplier's operands
    (:data:`~hdl.baselines.fp16_mac.formats.OPERANDS_LAYOUT`)."""
    raw = Signal(HALF_RAW_PRODUCT_LAYOUT, name=name)
    m.d.comb += [
        raw.sig.eq(operands.a_sig * operands.b_sig),
        raw.exp.eq(operands.a_exp + operands.b_exp + _PRODUCT_EXP_OFFSET),
    ]
    for field in ("sign", "zero", "inf", "nan", "first"):
        m.d.comb += raw[field].eq(operands[field])
    return raw


def round_product(m, raw, *, name="product_next"):
    """The exact product ``raw`` (:data:`~hdl.baselines.fp16_mac.formats.HALF_RAW_PRODUCT_LAYOUT`)
    rounded to binary16, to nearest, ties to even (combinational); returns a
    :data:`~hdl.baselines.fp16_mac.formats.HALF_PRODUCT_LAYOUT` value.

    The significand product is normalized to its leading one at bit 21 (``e``: the biased
    exponent of that bit). A result below the normal range (``e < 1``) is shifted right by
    ``1 - e`` more places (at most 12: everything below the guard bit), at ``exp = 1``. The top
    11 bits are kept, the next is the guard bit, every bit below it (including those the
    subnormal shift moves out, from the unshifted product and a mask of the shift) is sticky.
    A result at or above 2^16 after rounding (``exp`` 31) is an infinity: round to nearest
    overflows to infinity. A result that rounds to 0 is a zero of the product's sign.
    """
    top = raw.sig[21]
    norm = Signal(22, name=f"{name}_norm")
    m.d.comb += norm.eq(Mux(top, raw.sig, raw.sig << 1))
    e = Signal(signed(9), name=f"{name}_exp")
    m.d.comb += e.eq(raw.exp + top)
    below = Signal(name=f"{name}_subnormal")
    m.d.comb += below.eq(e < 1)
    shift = Signal(4, name=f"{name}_shift")
    m.d.comb += shift.eq(Mux(below, Mux(e < -11, 12, 1 - e), 0))
    shifted = Signal(22, name=f"{name}_shifted")
    m.d.comb += shifted.eq(norm >> shift)
    # Bit j of the product ends below the guard bit (10) when j - shift < 10.
    sticky = Signal(name=f"{name}_sticky")
    m.d.comb += sticky.eq(norm[0:10].any() | Cat(
        norm[j] & at_least(shift, j - 9) for j in range(10, 22)).any())
    kept = shifted[11:22]
    rounded = Signal(12, name=f"{name}_rounded")
    m.d.comb += rounded.eq(kept + (shifted[10] & (sticky | kept[0])))
    carry = rounded[11]
    exp = Signal(signed(10), name=f"{name}_exp_rounded")
    m.d.comb += exp.eq(Mux(below, 1, e + carry))

    product = Signal(HALF_PRODUCT_LAYOUT, name=name)
    finite = ~raw.nan & ~raw.inf
    m.d.comb += [
        product.sign.eq(raw.sign), product.nan.eq(raw.nan), product.first.eq(raw.first),
        product.inf.eq(raw.inf | (~raw.nan & ~raw.zero & (exp > 30))),
        product.zero.eq(finite & (raw.zero | (rounded == 0))),
        product.sig.eq(Mux(raw.zero, 0, Mux(carry, 1 << 10, rounded[0:11]))),
        product.exp.eq(Mux(raw.zero, 1, exp[0:5])),
    ]
    return product


def accumulate_half(m, acc, p, *, name="acc_next"):
    """The loop: ``acc + p`` (both :data:`~hdl.baselines.fp16_mac.formats.HALF_LAYOUT`; ``acc`` taken as
    +0.0 if ``p.first``) rounded to binary16, to nearest, ties to even (combinational); returns
    the new accumulator.

    The classes are resolved by a selection at the end, from flags known early in the cycle
    (as in the binary32 loop): NaN, infinity, ``x + 0 = x``, ``0 + y = y`` (``first`` is a
    zero accumulator: the product passes unchanged), an exact cancellation (``x = -y``, an
    equality of the registers) to +0. The adder's datapath sees the registers directly and its
    result is taken for two nonzero finite operands only. One path:

    * the operands ordered by exponent (a 5-bit subtraction each way, side by side); the
      smaller one's significand aligned with guard, round and sticky bits (shift saturated at
      14: all of it sticky);
    * the 15-bit sum, or the difference: both ``big - small`` and ``small - big`` side by side
      (with equal exponents the "big" one may be the smaller magnitude; its difference is then
      negative and the other one, exact, is taken, with the other sign);
    * normalized: one place right after a carry, else left by the leading zeros of the sum
      with a marker bit ORed in at the place of the smallest exponent (``exp = 1``), so that
      the count stops there: a subnormal result, without a comparison after the count. A left
      shift of more than one place only follows a subtraction of exponents at most one apart,
      which is exact, so three extra bits suffice;
    * rounded at the guard bit by an 11-bit increment; whether it carries out of the
      significand, and whether the exponent then overflows (31: an infinity of the sum's sign),
      are known from the normalized bits and the larger exponent, beside the increment.
    """
    first = p.first
    x_sign = acc.sign & ~first
    x_zero = acc.zero | first
    x_inf = acc.inf & ~first
    x_nan = acc.nan & ~first

    # --- order by exponent, align -----------------------------------------------------------
    d_xy = Signal(signed(6), name=f"{name}_d_xy")
    d_yx = Signal(signed(6), name=f"{name}_d_yx")
    m.d.comb += [d_xy.eq(acc.exp - p.exp), d_yx.eq(p.exp - acc.exp)]
    x_ge = Signal(name=f"{name}_x_ge")
    m.d.comb += x_ge.eq(~d_xy[5])
    big_sig = Signal(11, name=f"{name}_big_sig")
    big_exp = Signal(5, name=f"{name}_big_exp")
    big_sign = Signal(name=f"{name}_big_sign")
    small_sig = Signal(11, name=f"{name}_small_sig")
    difference = Signal(5, name=f"{name}_exp_difference")
    m.d.comb += [
        big_sig.eq(Mux(x_ge, acc.sig, p.sig)), big_exp.eq(Mux(x_ge, acc.exp, p.exp)),
        big_sign.eq(Mux(x_ge, acc.sign, p.sign)), small_sig.eq(Mux(x_ge, p.sig, acc.sig)),
        difference.eq(Mux(x_ge, d_xy[0:5], d_yx[0:5])),
    ]
    shift = Signal(4, name=f"{name}_align_shift")
    m.d.comb += shift.eq(Mux(at_least(difference, 14), 14, difference[0:4]))
    shifted = Signal(14, name=f"{name}_aligned")
    m.d.comb += shifted.eq(Cat(Const(0, 3), small_sig) >> shift)
    # Bit j of the significand (position j + 3) is shifted out below bit 0 when shift > j + 3.
    lost = Cat(small_sig[j] & at_least(shift, j + 4) for j in range(11)).any()
    aligned = Cat(shifted[0] | lost, shifted[1:14])

    # --- add or subtract ---------------------------------------------------------------------
    subtract = acc.sign ^ p.sign
    wide_big = Cat(Const(0, 3), big_sig)
    plus = Signal(15, name=f"{name}_plus")
    minus = Signal(15, name=f"{name}_minus")
    reverse = Signal(14, name=f"{name}_reverse")
    m.d.comb += [plus.eq(wide_big + aligned), minus.eq(wide_big - aligned),
                 reverse.eq(aligned - wide_big)]
    negative = subtract & minus[14]
    total = Signal(15, name=f"{name}_sum")
    m.d.comb += total.eq(Mux(subtract, Mux(minus[14], reverse, minus[0:14]), plus))
    sum_sign = big_sign ^ negative

    # --- normalize ---------------------------------------------------------------------------
    carry = total[14]
    # The marker: bit 13 - (big_exp - 1), where a left shift reaches exp = 1 (none beyond 13).
    marker = Signal(14, name=f"{name}_marker")
    m.d.comb += marker.eq(Cat(big_exp == 14 - i for i in range(14)))
    lz_input = Signal(14, name=f"{name}_lz_input")
    m.d.comb += lz_input.eq(total[0:14] | marker)
    count = Signal(4, name=f"{name}_lz")
    m.d.comb += count.eq(leading_zeros(lz_input))
    norm = Signal(14, name=f"{name}_norm")
    m.d.comb += norm.eq(Mux(carry, Cat(total[0] | total[1], total[2:15]),
                            (total[0:14] << count)[0:14]))
    exp_norm = Signal(6, name=f"{name}_exp_norm")
    exp_norm_p1 = Signal(6, name=f"{name}_exp_norm_p1")
    m.d.comb += [exp_norm.eq(Mux(carry, big_exp + 1, big_exp - count)),
                 exp_norm_p1.eq(Mux(carry, big_exp + 2, big_exp - count + 1))]

    # --- round -------------------------------------------------------------------------------
    kept = norm[3:14]
    round_up = Signal(name=f"{name}_round_up")
    m.d.comb += round_up.eq(norm[2] & (norm[1] | norm[0] | kept[0]))
    round_carry = Signal(name=f"{name}_round_carry")          # all ones + 1: 2^11
    m.d.comb += round_carry.eq(round_up & kept.all())
    rounded = Signal(12, name=f"{name}_rounded")
    m.d.comb += rounded.eq(kept + round_up)
    top = big_exp == 30
    overflow = Signal(name=f"{name}_overflow")                 # exponent 31 after rounding
    m.d.comb += overflow.eq((carry & top) | (round_carry & Mux(
        carry, big_exp >= 29, top & (count == 0))))
    cancel = Signal(name=f"{name}_cancel")                     # x = -y exactly
    m.d.comb += cancel.eq(subtract & (acc.exp == p.exp) & (acc.sig == p.sig))

    # --- the selection: early flags first, the datapath's result last ---------------------
    nan = Signal(name=f"{name}_nan")
    infinite = Signal(name=f"{name}_infinite")
    both = Signal(name=f"{name}_both_nonzero")
    m.d.comb += [
        nan.eq(x_nan | p.nan | (x_inf & p.inf & (x_sign != p.sign))),
        infinite.eq(~nan & (x_inf | p.inf)),
        both.eq(~x_zero & ~p.zero),
    ]
    early_sig = Mux(p.zero, Mux(x_zero, 0, acc.sig), p.sig)
    early_exp = Mux(p.zero, Mux(x_zero, 1, acc.exp), p.exp)
    early_sign = Mux(infinite, Mux(x_inf, x_sign, p.sign),
                     Mux(p.zero, Mux(x_zero, x_sign & p.sign, acc.sign), p.sign))
    result = Signal(HALF_LAYOUT, name=name)
    m.d.comb += [
        result.nan.eq(nan),
        result.inf.eq(infinite | (~nan & both & overflow)),
        result.zero.eq(~nan & ~infinite & Mux(both, cancel, x_zero & p.zero)),
        # (+x) + (-x) = +0 under round to nearest.
        result.sign.eq(Mux(infinite | ~both, early_sign, ~cancel & sum_sign)),
        result.sig.eq(Mux(both, Mux(cancel, 0, Mux(round_carry, 1 << 10, rounded[0:11])),
                          early_sig)),
        result.exp.eq(Mux(both, Mux(cancel, 1, Mux(round_carry, exp_norm_p1, exp_norm)[0:5]),
                          early_exp)),
    ]
    return result


def pack_half(m, state, *, name):
    """binary16 bits of a :data:`~hdl.baselines.fp16_mac.formats.HALF_LAYOUT` value (combinational):
    every NaN :data:`~hdl.baselines.fp16_mac.formats.CANONICAL_NAN_FP16`, an infinity of its sign, else
    ``((exp - 1) << 10) + sig`` as fields (the exponent field ``exp`` if bit 10 of ``sig`` is
    set, else 0)."""
    bits = Signal(16, name=name)
    with m.If(state.nan):
        m.d.comb += bits.eq(CANONICAL_NAN_FP16)
    with m.Elif(state.inf):
        m.d.comb += bits.eq(Cat(Const(0x7C00, 15), state.sign))
    with m.Else():
        m.d.comb += bits.eq(Cat(state.sig[0:10], Mux(state.sig[10], state.exp, 0),
                                state.sign))
    return bits
