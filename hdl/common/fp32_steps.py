"""binary32 arithmetic in steps for KLLM's codebook weighted sum (:class:`hdl.kllm.column.
KllmColumn`, contract section 7): the product of an integer count and a binary16 codebook entry
rounded to binary32, the binary32 addition rounded to nearest even, and the rounding of a
binary32 number to binary16.

Each operation is a sequence of combinational steps with an optional register after each one,
chosen by the caller (``cut``): the same arithmetic at every depth.

Numbers between the steps are :data:`FP32_UNPACKED`: sign, biased exponent, the 24-bit
significand with its hidden bit, and the class as flags. Zero is ``sig = 0, exp = 0`` (the
smallest magnitude, so that the adder's datapath handles a zero operand like any other and
needs no case for it). The weighted sum never meets a binary32 subnormal or overflow (see
:class:`~hdl.kllm.column.KllmColumn`): the adder has neither path.
"""

from amaranth.hdl import Array, Cat, Const, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data

from .arith import adder_tree_cut
from ..baselines.fp16_mac.formats import leading_zeros, unpack_fp16
from .stream_stage import enabled_register

__all__ = ["FP32_UNPACKED", "FP16_NAN", "ADD_CUTS", "PRODUCT_CUTS", "product_registers",
           "count_times_fp16", "fp32_add", "fp32_to_fp16"]

#: A binary32 number taken apart: ``value = sig * 2^(exp - 150)`` for normal numbers.
FP32_UNPACKED = data.StructLayout({
    "sig": 24, "exp": 8, "sign": 1, "zero": 1, "inf": 1, "nan": 1,
})

#: The one binary16 NaN the column emits (quiet, positive, payload 0).
FP16_NAN = 0x7E00

#: Optional registers of the adder, in step order (after the exponent comparison, the sticky
#: mask, the alignment shift, the addition, the leading-zero count's per-group flags, the
#: count, the normalization shift by the count's multiple of 4, the rest of the shift).
ADD_CUTS = ("compare", "mask", "align", "add", "groups", "count", "coarse", "shift")
#: Optional registers of the product (after the count's magnitude, after the leading-zero
#: counts, before the multiplier, inside its adder tree, after it, after the round decision).
PRODUCT_CUTS = ("magnitude", "leading", "operands", "partial", "product", "normalized")


def _register(m, value, name, enable, clock_enable):
    """``value`` registered (at ``clock_enable``, or every cycle if None) if ``enable``."""
    if not enable:
        return value
    if clock_enable is None:
        register = Signal.like(value, name=name, reset_less=True)
        m.d.sync += register.eq(value)
        return register
    return enabled_register(m, value, clock_enable, name=name)


def product_registers(cuts):
    """Registers :func:`count_times_fp16` inserts for ``cuts`` (``partial`` is two)."""
    return len(cuts) + int("partial" in cuts)


def count_times_fp16(m, count, count_signed, cb_bits, *, cuts, ce, name="product"):
    """``fp32(count * fp16)`` rounded to nearest even (steps; registers at ``ce`` after the
    steps named in ``cuts``, a subset of :data:`PRODUCT_CUTS`). Returns an
    :data:`FP32_UNPACKED` value and the number of registers inserted.

    ``count`` is an integer of ``len(count)`` bits (two's complement if ``count_signed``),
    at most 2^24 in magnitude so that ``fp32(count)`` is exact and the product has one
    rounding. ``cb_bits`` is a binary16 bit pattern. A count of 0 gives a zero (the caller
    skips such bins); an infinite entry gives an infinity, a NaN entry NaN.
    """
    mag_bits = len(count)
    registers = 0
    # The count's magnitude, the entry taken apart (value = sig * 2^(exp - 25)).
    negative = count[-1] if count_signed else Const(0, 1)
    cb = unpack_fp16(m, cb_bits, name=f"{name}_cb")
    magnitude_layout = data.StructLayout({
        "mag": mag_bits, "sig": 11, "exp": 5, "sign": 1, "zero": 1, "inf": 1, "nan": 1,
    })
    magnitude = Signal(magnitude_layout, name=f"{name}_magnitude_next")
    m.d.comb += [
        magnitude.mag.eq(Mux(negative, -count.as_signed(), count)),
        magnitude.sig.eq(cb.sig), magnitude.exp.eq(cb.exp),
        magnitude.sign.eq(negative ^ cb.sign),
        magnitude.zero.eq(cb.zero | (count == 0)),
        magnitude.inf.eq(cb.inf), magnitude.nan.eq(cb.nan),
    ]
    if "magnitude" in cuts:
        magnitude = _register(m, magnitude, f"{name}_magnitude", True, ce)
        registers += 1

    # The leading zeros of both: the count's magnitude and the entry's significand (a
    # subnormal's).
    lz_bits = max(1, (mag_bits - 1).bit_length())
    leading_layout = data.StructLayout({
        "mag": mag_bits, "mag_lz": lz_bits, "sig": 11, "sig_lz": 4, "exp": 5, "sign": 1,
        "zero": 1, "inf": 1, "nan": 1,
    })
    leading = Signal(leading_layout, name=f"{name}_leading_next")
    m.d.comb += [leading.mag_lz.eq(leading_zeros(magnitude.mag)),
                 leading.sig_lz.eq(leading_zeros(magnitude.sig))]
    for field in ("mag", "sig", "exp", "sign", "zero", "inf", "nan"):
        m.d.comb += leading[field].eq(magnitude[field])
    if "leading" in cuts:
        leading = _register(m, leading, f"{name}_leading", True, ce)
        registers += 1

    # Both normalized: their leading ones at the top; the entry's exponent lowered to match.
    operands_layout = data.StructLayout({
        "mag": mag_bits, "mag_lz": lz_bits, "sig": 11, "exp": signed(6), "sign": 1,
        "zero": 1, "inf": 1, "nan": 1,
    })
    operands = Signal(operands_layout, name=f"{name}_operands_next")
    m.d.comb += [
        operands.mag.eq((leading.mag << leading.mag_lz)[:mag_bits]),
        operands.mag_lz.eq(leading.mag_lz),
        operands.sig.eq((leading.sig << leading.sig_lz)[:11]),
        operands.exp.eq(leading.exp - leading.sig_lz),
    ]
    for field in ("sign", "zero", "inf", "nan"):
        m.d.comb += operands[field].eq(leading[field])
    if "operands" in cuts:
        operands = _register(m, operands, f"{name}_operands", True, ce)
        registers += 1

    # value = mag * 2^-lz * sig * 2^(exp - 25), mag's leading one at bit mag_bits - 1 and sig's
    # at bit 10: the product's leading one is at bit P - 1 or P - 2.
    prod_bits = mag_bits + 11
    raw_layout = data.StructLayout({
        "prod": prod_bits, "exp_hi": signed(10), "exp_hi_p1": signed(10), "exp_lo": signed(10),
        "sign": 1, "zero": 1, "inf": 1, "nan": 1,
    })
    raw = Signal(raw_layout, name=f"{name}_raw_next")
    # Biased binary32 exponent with the leading one at bit P - 1 (the count's magnitude is
    # mag * 2^-lz with its leading one at bit mag_bits - 1):
    # (P - 1) - lz + (exp - 25) + 127 = exp - lz + mag_bits + 112.
    side = Signal(data.StructLayout({field: value.shape for field, value in raw_layout
                                     if field != "prod"}), name=f"{name}_side_next")
    m.d.comb += [
        side.exp_hi.eq(operands.exp - operands.mag_lz + (mag_bits + 112)),
        side.exp_hi_p1.eq(operands.exp - operands.mag_lz + (mag_bits + 113)),
        side.exp_lo.eq(operands.exp - operands.mag_lz + (mag_bits + 111)),
    ]
    for field in ("sign", "zero", "inf", "nan"):
        m.d.comb += side[field].eq(operands[field])
    # The multiplier in LUTs: one partial product per significand bit, summed by a balanced
    # adder tree (a ``*`` maps to an unregistered MULT18X18D on ECP5, 3.9 ns plus its routing:
    # no 150 MHz stage). ``partial`` registers the tree after its first and third levels (of
    # four: 11 -> 6 -> 3 -> 2 -> 1 values).
    partial_products = [Mux(operands.sig[k], operands.mag << k, 0) for k in range(11)]
    if "partial" in cuts:
        def tree_register(value):
            return _register(m, value, f"{name}_partial", True, ce)
        m.d.comb += raw.prod.eq(adder_tree_cut(partial_products, cut_after=(1, 3),
                                               register=tree_register))
        for level in range(2):
            side = _register(m, side, f"{name}_side{level}", True, ce)
        registers += 2
    else:
        m.d.comb += raw.prod.eq(adder_tree_cut(partial_products))
    for field, _ in side.shape():
        m.d.comb += raw[field].eq(side[field])
    if "product" in cuts:
        raw = _register(m, raw, f"{name}_raw", True, ce)
        registers += 1

    # One-place normalization and the round decision (nearest, ties to even); then the
    # rounding itself. ``normalized`` registers between the two.
    top = raw.prod[prod_bits - 1]
    aligned = Signal(prod_bits, name=f"{name}_aligned")
    m.d.comb += aligned.eq(Mux(top, raw.prod, raw.prod << 1))
    normalized = Signal(data.StructLayout({
        "kept": 24, "round_up": 1, "exp": signed(10), "exp_p1": signed(10), "sign": 1,
        "zero": 1, "inf": 1, "nan": 1}), name=f"{name}_normalized_next")
    m.d.comb += [normalized.exp.eq(Mux(top, raw.exp_hi, raw.exp_lo)),
                 normalized.exp_p1.eq(Mux(top, raw.exp_hi_p1, raw.exp_hi))]
    if prod_bits <= 24:
        m.d.comb += normalized.kept.eq(Cat(Const(0, 24 - prod_bits), aligned))
    else:
        kept = aligned[prod_bits - 24:]
        guard = aligned[prod_bits - 25]
        sticky = aligned[:prod_bits - 25].any() if prod_bits > 25 else Const(0, 1)
        m.d.comb += [normalized.kept.eq(kept),
                     normalized.round_up.eq(guard & (sticky | kept[0]))]
    for field in ("sign", "zero", "inf", "nan"):
        m.d.comb += normalized[field].eq(raw[field])
    if "normalized" in cuts:
        normalized = _register(m, normalized, f"{name}_normalized", True, ce)
        registers += 1

    rounded = Signal(25, name=f"{name}_rounded")
    m.d.comb += rounded.eq(normalized.kept + normalized.round_up)
    carry = rounded[24]
    sig24 = Mux(carry, Const(1 << 23, 24), rounded[:24])
    result = Signal(FP32_UNPACKED, name=f"{name}_fp32")
    normal = ~normalized.zero & ~normalized.inf & ~normalized.nan
    m.d.comb += [
        result.sig.eq(Mux(normal, sig24, 0)),
        result.exp.eq(Mux(normal, Mux(carry, normalized.exp_p1, normalized.exp)[:8], 0)),
        result.sign.eq(normalized.sign),
        result.zero.eq(normalized.zero & ~normalized.inf & ~normalized.nan),
        result.inf.eq(normalized.inf), result.nan.eq(normalized.nan),
    ]
    return result, registers


#: The leading-zero count's 4-bit groups over the adder's 27-bit window (zeros padded below).
LZ_GROUPS = 7


def _nibble_flags(value):
    """Per 4-bit group of ``value`` (27 bits, zeros padded below to 28), from the top: whether
    it is non-zero and its own leading-zero count (2 bits); one LUT each. Returns ``(any,
    within)`` as :data:`LZ_GROUPS` and ``2 * LZ_GROUPS`` bits, group 0 the top one."""
    value = Value.cast(value)
    padded = Cat(Const(0, 4 * LZ_GROUPS - len(value)), value)
    groups = [padded[k:k + 4] for k in range(4 * LZ_GROUPS - 4, -1, -4)]
    return (Cat(group.any() for group in groups),
            Cat(Mux(group[3], 0, Mux(group[2], 1, Mux(group[1], 2, 3)))[:2]
                for group in groups))


def _first_group_count(m, any_group, within, name):
    """Leading zero bits (5 bits; all ones for 0) from :func:`_nibble_flags`: the count of the
    first non-zero group from the top (a priority selection). Shallower than the binary tree of
    :func:`~hdl.baselines.fp16_mac.formats.leading_zeros` (the adder's count step)."""
    count = Signal(5, name=name)
    m.d.comb += count.eq(31)
    for index in reversed(range(LZ_GROUPS)):
        with m.If(any_group[index]):
            m.d.comb += count.eq(4 * index + within[2 * index:2 * index + 2])
    return count


def _lost_mask(shift):
    """The significand bits (24) a right shift by ``shift`` (0..27) moves below the 27-bit
    window (3 guard positions): bit k is lost when ``shift > k + 3``. A table of the 5-bit
    shift, no comparator chain."""
    return Array(Const((1 << max(0, min(k - 3, 24))) - 1, 24) for k in range(32))[shift]


def _saturated(difference):
    """``min(difference[:8], 27)`` for an 8-bit exponent difference, with no comparator
    chain: at least 28 when a bit above 4 is set or bits 4..2 are all set (28 = 0b11100)."""
    difference = difference[:8]
    return Mux(difference[5:].any() | difference[2:5].all(), 27, difference[:5])


def fp32_add(m, x, y, *, cuts, name="add"):
    """``fp32(x + y)`` rounded to nearest even (steps; a register, loaded every cycle, after
    each step named in ``cuts``, a subset of :data:`ADD_CUTS`). ``x`` and ``y`` are
    :data:`FP32_UNPACKED`; returns the sum as :data:`FP32_UNPACKED` (combinational from the last
    register) and the number of registers inserted.

    Steps: (compare) the exponent comparison and both saturated exponent differences; (mask) the
    operands ordered by exponent, the significand bits that the shift moves out, and the other
    significand shifted right into 27 bits by the shift's multiple of 8; (align) shifted by the
    rest (0..7 places), the bits shifted out ORed into the lowest (sticky); (add) the 28-bit sum,
    or the non-negative one of the two differences (computed side by side: only equal exponents can
    give a negative one); (groups) each 4-bit group's non-zero flag and leading zeros; (count) the
    sum's leading zeros, from the first non-zero group; (coarse, shift) normalized to 27 bits, one
    place right after a carry or left by the count, in two steps: by its multiple of 4, then by the
    rest (a left shift of two or more places only follows an exact difference); then rounding to 24
    bits and the classes. Infinities and NaNs are flags beside the datapath: NaN if an operand is
    NaN or for ``inf - inf``, else an infinity if an operand is infinite. An exact cancellation
    gives +0; ``-0 + -0`` gives -0.
    """
    registers = 0

    def cut(value, step):
        nonlocal registers
        if step in cuts:
            registers += 1
        return _register(m, value, f"{name}_{step}", step in cuts, None)

    flags = {"nan": 1, "inf": 1, "inf_sign": 1, "both_zero": 1, "zero_sign": 1}
    # --- compare: the exponent comparisons only (an 8-bit comparison and both saturated
    # differences, side by side); the operands pass unchanged ------------------------------
    compare = Signal(data.StructLayout({
        "x": FP32_UNPACKED, "y": FP32_UNPACKED, "x_ge": 1, "shift_xy": 5, "shift_yx": 5}),
        name=f"{name}_compare_next")
    # The operand with the larger exponent is "big" (x on a tie). With equal exponents the
    # smaller magnitude may be "big"; the add step then takes the other difference and flips
    # the sign. The alignment shift, saturated at 27 (everything below the sticky position),
    # is computed for either order beside the comparison.
    m.d.comb += [
        compare.x.eq(x), compare.y.eq(y),
        compare.x_ge.eq(x.exp >= y.exp),
        compare.shift_xy.eq(_saturated(x.exp - y.exp)),
        compare.shift_yx.eq(_saturated(y.exp - x.exp)),
    ]
    compare = cut(compare, "compare")

    # --- mask: the operands ordered, and the significand bits the shift moves out ----------
    masked = Signal(data.StructLayout({
        "big_sig": 24, "big_exp": 8, "sign": 1, "small_sig": 24, "coarse": 27, "lost": 24,
        "shift": 5, "subtract": 1, **flags}), name=f"{name}_mask_next")
    x, y, x_ge = compare.x, compare.y, compare.x_ge
    subtract = x.sign ^ y.sign
    m.d.comb += [
        masked.big_sig.eq(Mux(x_ge, x.sig, y.sig)),
        masked.big_exp.eq(Mux(x_ge, x.exp, y.exp)),
        masked.sign.eq(Mux(x_ge, x.sign, y.sign)),
        masked.small_sig.eq(Mux(x_ge, y.sig, x.sig)),
        masked.shift.eq(Mux(x_ge, compare.shift_xy, compare.shift_yx)),
        masked.subtract.eq(subtract),
        masked.nan.eq(x.nan | y.nan | (x.inf & y.inf & subtract)),
        masked.inf.eq(x.inf | y.inf),
        masked.inf_sign.eq(Mux(x.inf, x.sign, y.sign)),
        masked.both_zero.eq(x.zero & y.zero),
        masked.zero_sign.eq(x.sign & y.sign),
    ]
    # The lost bits: a table of the shift, one small function per bit (no comparator chain).
    # The shift's multiple of 8 is applied here already (a 4:1 selection beside the table);
    # the align step shifts by the rest.
    m.d.comb += [
        masked.lost.eq(_lost_mask(masked.shift)),
        masked.coarse.eq(Cat(Const(0, 3), masked.small_sig)
                         >> Cat(Const(0, 3), masked.shift[3:])),
    ]
    compare = cut(masked, "mask")

    # --- align ----------------------------------------------------------------------------
    align = Signal(data.StructLayout({
        "big_sig": 24, "big_exp": 8, "sign": 1, "aligned": 27, "subtract": 1, **flags}),
        name=f"{name}_align_next")
    # The shift's remainder (0..7 places) and, beside it, the sticky bit: the significand's
    # bits under the mask.
    shifted = Signal(27, name=f"{name}_shifted")
    m.d.comb += shifted.eq(compare.coarse >> compare.shift[:3])
    m.d.comb += align.aligned.eq(Cat(shifted[0] | (compare.small_sig & compare.lost).any(),
                                     shifted[1:]))
    for field in ("big_sig", "big_exp", "sign", "subtract", *flags):
        m.d.comb += align[field].eq(compare[field])
    align = cut(align, "align")

    # --- add ------------------------------------------------------------------------------
    total = Signal(data.StructLayout({"sum": 28, "big_exp": 8, "sign": 1, **flags}),
                   name=f"{name}_add_next")
    big = Cat(Const(0, 3), align.big_sig, Const(0, 1))          # 28 bits, top bit 0
    aligned = Cat(align.aligned, Const(0, 1))
    # Both differences side by side: big - aligned is negative only for equal exponents
    # (then nothing was shifted out and the other difference is exact), and the sum takes the
    # sign of the other operand.
    difference = Signal(28, name=f"{name}_difference")
    reverse = Signal(28, name=f"{name}_reverse")
    m.d.comb += [difference.eq(big - aligned), reverse.eq(aligned - big)]
    negative = align.subtract & difference[27]
    m.d.comb += [
        total.sum.eq(Mux(align.subtract, Mux(difference[27], reverse, difference),
                         big + aligned)),
        total.sign.eq(align.sign ^ negative),
    ]
    for field in ("big_exp", *flags):
        m.d.comb += total[field].eq(align[field])
    total = cut(total, "add")

    # --- groups: each 4-bit group's non-zero flag and own leading-zero count -------------
    grouped = Signal(data.StructLayout({"sum": 28, "any": LZ_GROUPS, "within": 2 * LZ_GROUPS,
                                        "big_exp": 8, "sign": 1, **flags}),
                     name=f"{name}_groups_next")
    any_group, within = _nibble_flags(total.sum[:27])
    m.d.comb += [grouped.any.eq(any_group), grouped.within.eq(within)]
    for field in ("sum", "big_exp", "sign", *flags):
        m.d.comb += grouped[field].eq(total[field])
    grouped = cut(grouped, "groups")

    # --- count: the first non-zero group's count --------------------------------------------
    # The exponent plus one rides beside the count (the coarse step then subtracts the count
    # from it with one carry chain, not two in series).
    counted = Signal(data.StructLayout({"sum": 28, "lz": 5, "big_exp": 8, "big_exp_p1": 8,
                                        "sign": 1, **flags}), name=f"{name}_count_next")
    m.d.comb += [counted.lz.eq(_first_group_count(m, grouped.any, grouped.within,
                                                  f"{name}_lz")),
                 counted.big_exp_p1.eq(grouped.big_exp + 1)]
    for field in ("sum", "big_exp", "sign", *flags):
        m.d.comb += counted[field].eq(grouped[field])
    counted = cut(counted, "count")

    # --- coarse: the left shift by the count's multiple of 4 (after a carry: the right shift
    # by one, and no fine shift); the exponent and the zero check beside it ------------------
    coarse = Signal(data.StructLayout({"part": 27, "fine": 2, "exp": 8, "exp_p1": 8, "sign": 1,
                                       "exact_zero": 1, **flags}), name=f"{name}_coarse_next")
    carry = counted.sum[27]
    m.d.comb += [
        coarse.part.eq(Mux(carry, Cat(counted.sum[0] | counted.sum[1], counted.sum[2:28]),
                           (counted.sum[:27] << Cat(Const(0, 2), counted.lz[2:]))[:27])),
        coarse.fine.eq(Mux(carry, 0, counted.lz[:2])),
        coarse.exp.eq(Mux(carry, counted.big_exp_p1, counted.big_exp - counted.lz)),
        coarse.exp_p1.eq(Mux(carry, counted.big_exp + 2, counted.big_exp_p1 - counted.lz)),
        coarse.exact_zero.eq(counted.sum == 0),
    ]
    for field in ("sign", *flags):
        m.d.comb += coarse[field].eq(counted[field])
    coarse = cut(coarse, "coarse")

    # --- shift: the fine shift (0..3 places) ---------------------------------------------
    shifted = Signal(data.StructLayout({"kept": 24, "round_up": 1, "round_carry": 1, "exp": 8,
                                        "exp_p1": 8, "sign": 1, "exact_zero": 1, **flags}),
                     name=f"{name}_shift_next")
    norm = Signal(27, name=f"{name}_norm")
    m.d.comb += [
        norm.eq((coarse.part << coarse.fine)[:27]),
        # Round to nearest even: the guard bit, and the sticky bits or the kept LSB.
        shifted.kept.eq(norm[3:27]),
        shifted.round_up.eq(norm[2] & (norm[0] | norm[1] | norm[3])),
        # Rounding up all ones carries out of the significand: known before the increment,
        # and for each fine shift beside the shifter (from the coarse part, not through it).
        # (norm[2] is part[2 - f]: 0 at a shift of 3.)
        shifted.round_carry.eq(Array([*(coarse.part[2 - f] & coarse.part[3 - f:27 - f].all()
                                        for f in range(3)), Const(0)])[coarse.fine]),
    ]
    for field in ("exp", "exp_p1", "sign", "exact_zero", *flags):
        m.d.comb += shifted[field].eq(coarse[field])
    shifted = cut(shifted, "shift")

    # --- round and classes ----------------------------------------------------------------
    rounded = Signal(25, name=f"{name}_rounded")
    m.d.comb += rounded.eq(shifted.kept + shifted.round_up)
    result = Signal(FP32_UNPACKED, name=f"{name}_sum")
    special = shifted.nan | shifted.inf | shifted.exact_zero
    with m.If(shifted.nan):
        m.d.comb += result.nan.eq(1)
    with m.Elif(shifted.inf):
        m.d.comb += [result.inf.eq(1), result.sign.eq(shifted.inf_sign)]
    with m.Elif(shifted.exact_zero):
        m.d.comb += [result.zero.eq(1),
                     result.sign.eq(shifted.both_zero & shifted.zero_sign)]
    m.d.comb += [
        result.sig.eq(Mux(special, 0, Mux(shifted.round_carry, 1 << 23, rounded[:24]))),
        result.exp.eq(Mux(special, 0, Mux(shifted.round_carry, shifted.exp_p1, shifted.exp))),
    ]
    with m.If(~special):
        m.d.comb += result.sign.eq(shifted.sign)
    return result, registers


def fp32_to_fp16(m, x, *, stage=None, name="fp16"):
    """The binary16 bit pattern of :data:`FP32_UNPACKED` ``x`` rounded to nearest even
    (steps; ``stage(value, name)`` registers a value between them, or None for none):
    overflow to an infinity of the sign, binary16 subnormals rounded as well, every NaN
    :data:`FP16_NAN`. Returns the bits and the number of ``stage`` calls (3).

    With ``e = x.exp - 127``: the kept significand is ``sig >> (13 + max(0, -14 - e))`` with
    its guard and sticky bits; ``bits = (E << 10) + rounded`` with ``E = e + 14`` for normal
    results (the hidden bit of ``rounded`` adds the missing one to the exponent field, and a
    carry out of the significand moves to the exponent by itself) and ``E = 0`` for subnormal
    ones (a rounding up to 2^10 is the smallest normal); at or above 0x7C00 the result is an
    infinity. Steps: (exponent) ``E`` and the extra shift from comparisons of ``x.exp`` with
    constants; (shift) the kept, guard and sticky bits (the sticky one from a mask of the
    shift, beside the shifter), the candidate exponent fields; (round) whether to round up and
    the 12-bit increment; (pack) the field its top bits select, the infinity check, the
    classes.
    """
    if stage is None:
        def stage(value, name):
            return value
    # --- exponent ----------------------------------------------------------------------------
    prepared = Signal(data.StructLayout({"sig": 24, "field": 8, "extra": 4, "huge": 1,
                                         "sign": 1, "zero": 1, "inf": 1, "nan": 1}),
                      name=f"{name}_exponent_next")
    subnormal = x.exp < 127 - 14
    m.d.comb += [
        prepared.sig.eq(x.sig),
        prepared.field.eq(Mux(subnormal, 0, x.exp - (127 - 14))),
        prepared.extra.eq(Mux(x.exp < 127 - 26, 12, Mux(subnormal, (127 - 14) - x.exp, 0))),
        prepared.huge.eq(x.exp > 127 + 15),
    ]
    for field in ("sign", "zero", "inf", "nan"):
        m.d.comb += prepared[field].eq(x[field])
    prepared = stage(prepared, f"{name}_exponent")

    # --- shift -------------------------------------------------------------------------------
    # Candidate exponent fields (E + 0, 1, 2: the rounded significand's bits 10 and 11 add to
    # E) and whether each is an infinity, computed here so that the last step has one
    # 12-bit increment and a selection.
    shifted = Signal(data.StructLayout({"kept": 11, "guard": 1, "sticky": 1, "field0": 5,
                                        "field1": 5,
                                        "field2": 5, "inf0": 1, "inf1": 1, "inf2": 1,
                                        "sign": 1, "zero": 1, "inf": 1, "nan": 1}),
                     name=f"{name}_shift_next")
    # 24 + 12 positions: the kept 11 bits at the top, guard below, sticky below that.
    wide = Signal(24 + 12, name=f"{name}_wide")
    m.d.comb += wide.eq(Cat(Const(0, 12), prepared.sig) >> prepared.extra)
    kept = wide[25:36]
    # The sticky bits (below the guard) from a mask of the shift beside the shifter: the
    # significand's bits below position 12 + extra.
    below_guard = Array(Const((1 << min(12 + k, 24)) - 1, 24) for k in range(16))
    sticky = (prepared.sig & below_guard[prepared.extra]).any()
    m.d.comb += [
        shifted.kept.eq(kept),
        shifted.guard.eq(wide[24]),
        shifted.sticky.eq(sticky),
    ]
    # E + k >= 31, as a table of E's low bits beside its high ones (no adder before a
    # comparator: two carry chains in series set the clock at kllm_column's kllm-a4 on ECP5).
    high_field = prepared.field[5:].any()
    for k in range(3):
        top = Cat(*(prepared.field[:5] == value for value in range(31 - k, 32))).any()
        m.d.comb += [shifted[f"field{k}"].eq(prepared.field + k),
                     shifted[f"inf{k}"].eq(prepared.huge | high_field | top)]
    for field in ("sign", "zero", "inf", "nan"):
        m.d.comb += shifted[field].eq(prepared[field])
    shifted = stage(shifted, f"{name}_shift")

    # --- pack --------------------------------------------------------------------------------
    # --- round -------------------------------------------------------------------------------
    rounding = Signal(data.StructLayout({"rounded": 12, "field0": 5, "field1": 5, "field2": 5,
                                         "inf0": 1, "inf1": 1, "inf2": 1, "sign": 1,
                                         "zero": 1, "inf": 1, "nan": 1}),
                      name=f"{name}_round_next")
    round_up = shifted.guard & (shifted.sticky | shifted.kept[0])
    m.d.comb += rounding.rounded.eq(shifted.kept + round_up)
    for field in ("field0", "field1", "field2", "inf0", "inf1", "inf2", "sign", "zero", "inf",
                  "nan"):
        m.d.comb += rounding[field].eq(shifted[field])
    shifted = stage(rounding, f"{name}_round")
    rounded = shifted.rounded

    # --- pack --------------------------------------------------------------------------------
    field = Signal(5, name=f"{name}_field")
    overflow = Signal(name=f"{name}_overflow")
    with m.Switch(rounded[10:12]):
        for k in range(2):
            with m.Case(k):
                m.d.comb += [field.eq(shifted[f"field{k}"]), overflow.eq(shifted[f"inf{k}"])]
        with m.Default():             # 2 (3 does not occur: rounded <= 2^11)
            m.d.comb += [field.eq(shifted.field2), overflow.eq(shifted.inf2)]
    bits = Signal(16, name=f"{name}_bits")
    with m.If(shifted.nan):
        m.d.comb += bits.eq(FP16_NAN)
    with m.Elif(shifted.inf | overflow):
        m.d.comb += bits.eq(Cat(Const(0x7C00, 15), shifted.sign))
    with m.Elif(shifted.zero):
        m.d.comb += bits.eq(Cat(Const(0, 15), shifted.sign))
    with m.Else():
        m.d.comb += bits.eq(Cat(rounded[:10], field, shifted.sign))
    return bits, 3
