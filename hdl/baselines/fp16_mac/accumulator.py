"""The accumulation loop of the FP16 MAC (:class:`hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`): a two-path
binary32 adder, rounded to nearest even, with the exponent comparison for the next beat beside
it."""

from amaranth.hdl import Cat, Const, Mux, Signal, signed
from amaranth.lib import data

from ...common.arith import at_least
from .formats import ACC_LAYOUT, ALIGN_LAYOUT, CLASS_FIELDS, leading_zeros

__all__ = ["accumulate"]


def accumulate(m, acc, align, p, next_exp, update):
    """The loop: the accumulator after adding product ``p``
    (:data:`~hdl.baselines.fp16_mac.formats.PRODUCT_LAYOUT`) to ``acc`` (:data:`ACC_LAYOUT`), or to +0.0
    if ``p.first``, rounded to nearest even; and the comparison of its exponent with
    ``next_exp``, the exponent of the product that follows (combinational). Returns
    ``(acc_next, align_next)``.

    ``align`` (:data:`ALIGN_LAYOUT`) compares ``acc.exp`` with ``p.exp``; ``update`` is high
    if ``p`` is a beat (else ``align_next`` compares the unchanged accumulator).

    Both operands of the adder are normal (zeros, infinities and NaNs are flags, handled by
    the selection at the end), and the sum is never subnormal and never overflows (see
    :class:`hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`). Two paths are computed side by side and one is selected:

    * far path (an addition, or a subtraction of exponents at least 2 apart, or 1 apart
      with a result >= 1): :func:`_far_path`. The result's exponent is the larger
      operand's, one above or one below.
    * near path (a subtraction of exponents at most 1 apart whose result is below the
      larger operand's leading bit): :func:`_near_path`. Exact: no rounding. The result's
      exponent is the larger operand's minus the normalization shift.

    The special cases (NaN, infinity, a zero operand, ``first``, exact cancellation) only
    depend on flags and comparisons known early in the cycle; they are resolved first and
    the late data of the two paths enter the last multiplexer. The exponent differences
    for the next beat are computed for every candidate exponent (from the accumulator, the
    product, the far path's three and the near path's, the latter from the shift count)
    and selected with the exponent.
    """
    first = p.first
    x_zero = acc.zero | first
    x_inf = acc.inf & ~first
    x_nan = acc.nan & ~first
    x_sign = acc.sign & ~first

    ex, ey = acc.exp, p.exp
    mx = Cat(acc.frac, Const(1, 1))                     # 24 bits, 1.23
    my = Cat(Const(0, 2), p.frac, Const(1, 1))          # 24 bits, 1.21 + 00
    subtract = Signal(name="subtract")
    m.d.comb += subtract.eq(acc.sign ^ p.sign)
    x_ge = Signal(name="x_ge")
    m.d.comb += x_ge.eq(~align.d_xy[8])

    big = Signal(data.StructLayout({"sig": 24, "exp": 8, "exp_p1": 8, "exp_m1": 8,
                                    "sign": 1}), name="big")
    m.d.comb += [
        big.sig.eq(Mux(x_ge, mx, my)),
        big.exp.eq(Mux(x_ge, ex, ey)),
        big.exp_p1.eq(Mux(x_ge, ex + 1, p.exp_p1)),
        big.exp_m1.eq(Mux(x_ge, ex - 1, p.exp_m1)),
        big.sign.eq(Mux(x_ge, acc.sign, p.sign)),
    ]
    small_sig = Signal(24, name="small_sig")
    m.d.comb += small_sig.eq(Mux(x_ge, my, mx))
    shift = Mux(x_ge, align.d_xy[0:8], align.d_yx)
    align_shift = Signal(5, name="align_shift")
    m.d.comb += align_shift.eq(Mux(shift[5:8].any(), 31, shift[0:5]))

    far_frac, far_up, far_down = _far_path(m, big, small_sig, align_shift, subtract)
    near_select = Signal(name="near_select")
    near_frac, near_count, near_sign, near_zero = _near_path(
        m, mx, my, big, p.sign, subtract, align, near_select)

    # --- special cases -----------------------------------------------------------------------
    special = Signal(data.StructLayout({"frac": 23, "sign": 1, **CLASS_FIELDS}),
                     name="special")
    is_special = Signal(name="is_special")
    take_product = Signal(name="take_product")
    m.d.comb += is_special.eq(1)
    with m.If(x_nan | p.nan | (x_inf & p.inf & (x_sign != p.sign))):
        m.d.comb += special.nan.eq(1)
    with m.Elif(x_inf | p.inf):
        m.d.comb += [special.inf.eq(1), special.sign.eq(Mux(x_inf, x_sign, p.sign))]
    with m.Elif(p.zero):
        # x + 0 = x; (+0) + (-0) = +0, (-0) + (-0) = -0.
        m.d.comb += [special.frac.eq(acc.frac), special.zero.eq(x_zero),
                     special.sign.eq(Mux(x_zero, x_sign & p.sign, x_sign))]
    with m.Elif(x_zero):
        m.d.comb += [special.frac.eq(Cat(Const(0, 2), p.frac)), special.sign.eq(p.sign),
                     take_product.eq(1)]
    with m.Elif(near_zero):
        m.d.comb += special.zero.eq(1)      # exact cancellation: +0
    with m.Else():
        m.d.comb += is_special.eq(0)

    # --- exponent, with its difference to the next product's -------------------------------
    def exponent(exp, d_xy, d_yx, zero, plus_one, minus_one):
        return {"exp": exp, "d_xy": d_xy, "d_yx": d_yx, "zero": zero,
                "plus_one": plus_one, "minus_one": minus_one}

    def early(name, exp):
        d_xy = Signal(signed(9), name=f"{name}_d_xy")
        d_yx = Signal(signed(9), name=f"{name}_d_yx")
        m.d.comb += [d_xy.eq(exp - next_exp), d_yx.eq(next_exp - exp)]
        return exponent(exp, d_xy, d_yx, d_xy == 0, d_xy == 1, d_yx == 1)

    keep = early("keep", ex)
    product_exp = early("product", ey)
    same = early("far_same", big.exp)
    up = early("far_up", big.exp_p1)
    down = early("far_down", big.exp_m1)
    count = near_count.as_unsigned()
    near_exp = Signal(8, name="near_exp")
    near_d_xy = Signal(signed(9), name="near_d_xy")
    near_d_yx = Signal(signed(9), name="near_d_yx")
    m.d.comb += [near_exp.eq(big.exp - count), near_d_xy.eq(same["d_xy"] - count),
                 near_d_yx.eq(same["d_yx"] + count)]

    def equals_count(value):
        # value == count as gates (Yosys would fold an equality into a subtraction's chain)
        return ~value[5:9].any() & ~(value[0:5] ^ count).any()

    near = exponent(near_exp, near_d_xy, near_d_yx, equals_count(same["d_xy"]),
                    equals_count(down["d_xy"]), equals_count(up["d_xy"]))
    # The multiplexers are ordered by arrival: the early choices (no beat, special cases)
    # first, then the far path's, and the near path's (the latest data) last.
    use_early = Signal(name="use_early")
    use_near = Signal(name="use_near")
    m.d.comb += [use_early.eq(~update | is_special),
                 use_near.eq(update & ~is_special & near_select)]

    def select(key):
        early_value = Mux(take_product & update, product_exp[key], keep[key])
        far_value = Mux(far_up, up[key], Mux(far_down, down[key], same[key]))
        return Mux(use_near, near[key], Mux(use_early, early_value, far_value))

    align_next = Signal(ALIGN_LAYOUT, name="align_next")
    m.d.comb += [align_next[name].eq(select(name)) for name in ALIGN_LAYOUT.members]
    result = Signal(ACC_LAYOUT, name="acc_next")
    m.d.comb += [
        result.frac.eq(Mux(use_near, near_frac, Mux(is_special, special.frac, far_frac))),
        result.exp.eq(select("exp")),
        result.sign.eq(Mux(use_near, near_sign, Mux(is_special, special.sign, big.sign))),
        result.zero.eq(special.zero), result.inf.eq(special.inf), result.nan.eq(special.nan),
    ]
    return result, align_next

def _far_path(m, big, small_sig, align_shift, subtract):
    """Far path of the adder: ``big +- small`` rounded to nearest even, for an addition or
    for a subtraction whose result is at least half the larger operand (combinational).
    Returns ``(frac, exp_up, exp_down)``: the fraction, and whether the exponent is one
    above or one below the larger operand's.

    The smaller significand is shifted right by ``align_shift`` (31: everything shifted
    out) with guard, round and sticky bits; the sticky bit is the OR of the significand's
    bits that the shift moves below the round bit, computed from the unshifted significand
    and a mask of the shift amount, beside the shifter. The result's leading one is at
    most one place above or below the larger operand's, so there are two candidate
    rounding positions: ``upper`` (carry out of an addition; no shift for a subtraction)
    and ``lower`` (no shift for an addition; one place left for a subtraction). Rounding to
    nearest is the addition of half an ulp at the rounding position ("injection"); the
    larger operand's three low bits are zero, so the half ulp becomes the carry into bit 3
    and each candidate is one adder with its own carry-in. Three adders run side by side
    (the sum itself, to choose the position, and the two injected sums); a tie (the
    discarded bits exactly half an ulp, known from the three low aligned bits) clears the
    least significant bit: ties to even.
    """
    # Align: aligned = {small, 000} >> shift, the bits shifted out ORed into bit 0.
    shifted = Signal(26, name="shifted")
    m.d.comb += shifted.eq(Cat(Const(0, 2), small_sig) >> align_shift)
    align_sticky = Signal(name="align_sticky")
    m.d.comb += align_sticky.eq(Cat(
        small_sig[j] & at_least(align_shift, j + 3) for j in range(24)).any())
    low = Cat(align_sticky, shifted[0:2])               # guard..sticky: 3 bits below big
    high = shifted[2:26]                                 # 24 bits beside big.sig
    operand = Signal(24, name="far_operand")
    m.d.comb += operand.eq(high ^ subtract.replicate(24))

    # Carries into bit 3 of {big, 000} +- aligned (+ half an ulp at bit 3, 2 or 1).
    carry_in_base = Signal(name="carry_in_base")
    carry_in_upper = Signal(name="carry_in_upper")
    carry_in_lower = Signal(name="carry_in_lower")
    m.d.comb += [
        carry_in_base.eq(subtract & (low == 0)),
        carry_in_upper.eq(~subtract | (low <= 4)),
        carry_in_lower.eq(Mux(subtract, low <= 2, low[2])),
    ]
    sums = {}
    for name, carry_in in (("base", carry_in_base), ("upper", carry_in_upper),
                           ("lower", carry_in_lower)):
        # big + operand + carry_in on one carry chain: the carry enters below bit 0.
        sums[name] = Signal(25, name=f"far_sum_{name}")
        m.d.comb += sums[name].eq(
            (Cat(Const(1, 1), big.sig) + Cat(carry_in, operand))[1:26])
    upper = Signal(name="far_upper")
    m.d.comb += upper.eq(Mux(subtract, sums["base"][23], sums["base"][24]))

    # Ties: the discarded bits are exactly half an ulp (before injection).
    tie_hi = Signal(name="tie_hi")
    tie_mid = Signal(name="tie_mid")
    tie_lo = Signal(name="tie_lo")
    m.d.comb += [
        tie_hi.eq((big.sig[0] ^ high[0]) & (low == 0)),
        tie_mid.eq(low == 4),
        tie_lo.eq(low[1] & ~low[0]),
    ]
    su, sl = sums["upper"], sums["lower"]
    lo_bit2 = (low >= 3) & (low <= 6)     # bit 2 of {big, 000} - aligned + 2
    frac = Signal(23, name="far_frac")
    with m.If(~subtract & upper):           # carry out: round at bit 4
        m.d.comb += frac.eq(Cat(su[1] & ~tie_hi, su[2:24]))
    with m.Elif(~subtract):                 # round at bit 3
        m.d.comb += frac.eq(Cat(sl[0] & ~tie_mid, sl[1:23]))
    with m.Elif(upper):                     # subtraction, no shift: round at bit 3
        m.d.comb += frac.eq(Cat(su[0] & ~tie_mid, su[1:23]))
    with m.Else():                          # subtraction, one place left: round at bit 2
        m.d.comb += frac.eq(Cat(lo_bit2 & ~tie_lo, sl[0:22]))
    # Exponent: the larger operand's, one above (carry out, or rounding up to the next
    # power of two) or one below (one place left, unless rounding carries back).
    exp_up = Signal(name="far_exp_up")
    exp_down = Signal(name="far_exp_down")
    m.d.comb += [exp_up.eq(~subtract & (upper | sl[24])),
                 exp_down.eq(subtract & ~upper & ~sl[23])]
    return frac, exp_up, exp_down

def _near_path(m, mx, my, big, y_sign, subtract, align, near_select):
    """Near path of the adder: a subtraction of operands whose exponents differ by at most
    one, with a result below the larger operand's leading bit (combinational). Drives
    ``near_select`` and returns ``(frac, count, sign, zero)``: ``count`` is the
    normalization shift, which the caller subtracts from the larger operand's exponent.

    The result is exact: ``x - y`` or ``y - x`` (equal exponents), ``2x - y`` or ``2y - x``
    (exponents one apart) on 25 bits, computed side by side without alignment; the selected
    difference is normalized by its leading-zero count, the shifter taking the count's
    bits from the most significant (available first) down.
    """
    d_is_0, d_is_p1, d_is_m1 = align.zero, align.plus_one, align.minus_one
    x_minus_y = Signal(signed(25), name="x_minus_y")
    y_minus_x = Signal(signed(25), name="y_minus_x")
    two_x_minus_y = Signal(26, name="two_x_minus_y")
    two_y_minus_x = Signal(26, name="two_y_minus_x")
    m.d.comb += [
        x_minus_y.eq(mx - my), y_minus_x.eq(my - mx),
        two_x_minus_y.eq(Cat(Const(0, 1), mx) - my),
        two_y_minus_x.eq(Cat(Const(0, 1), my) - mx),
    ]
    y_bigger = x_minus_y[24]
    difference = Signal(25, name="near_difference")
    m.d.comb += difference.eq(
        Mux(d_is_0, Mux(y_bigger, Cat(Const(0, 1), y_minus_x[0:24]),
                        Cat(Const(0, 1), x_minus_y[0:24])),
            Mux(d_is_p1, two_x_minus_y[0:25], two_y_minus_x[0:25])))
    m.d.comb += near_select.eq(subtract & (
        d_is_0 | (d_is_p1 & ~two_x_minus_y[24]) | (d_is_m1 & ~two_y_minus_x[24])))
    zero = Signal(name="cancel")
    m.d.comb += zero.eq(near_select & d_is_0 & ~(mx ^ my).any())
    # Leading zeros of each candidate (side by side, from the subtractors), then selected.
    count = Signal(5, name="near_lz")
    m.d.comb += count.eq(
        Mux(d_is_0, Mux(y_bigger, leading_zeros(Cat(Const(0, 1), y_minus_x[0:24])),
                        leading_zeros(Cat(Const(0, 1), x_minus_y[0:24]))),
            Mux(d_is_p1, leading_zeros(two_x_minus_y[0:25]),
                leading_zeros(two_y_minus_x[0:25]))))
    normalized = Cat(Const(0, 7), difference)           # 32 bits
    for k in reversed(range(5)):
        normalized = Mux(count[k], (normalized << (1 << k))[0:32], normalized)
    frac = Signal(23, name="near_frac")
    m.d.comb += frac.eq(normalized[8:31])
    sign = Mux(d_is_0 & y_bigger, y_sign, big.sign)
    return frac, count, sign, zero
