"""FP16 x FP16 multiply, FP32 accumulate: the HBM-PIM style MAC (SPEC sections 0 and 5)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import at_least
from .stream_stage import StallPipeline, check_pipeline

__all__ = ["Fp16Mac", "CANONICAL_NAN", "FP32_LAYOUT", "FP16_UNPACKED_LAYOUT", "OPERANDS_LAYOUT",
           "RAW_PRODUCT_LAYOUT", "PRODUCT_LAYOUT", "ACC_LAYOUT", "ALIGN_LAYOUT", "unpack_fp16",
           "normalize_fp16", "leading_zeros"]

#: A binary32 number as sent on ``o``.
FP32_LAYOUT = data.StructLayout({"frac": 23, "exp": 8, "sign": 1})

#: A binary16 operand taken apart: significand with its hidden bit, effective exponent
#: (1 for subnormals, whose hidden bit is 0) and the class flags.
FP16_UNPACKED_LAYOUT = data.StructLayout({
    "sig": 11, "exp": 5, "sign": 1, "zero": 1, "inf": 1, "nan": 1,
})

#: Class of a product or of the accumulator: at most one flag is set; none for a normal number.
_CLASS_FIELDS = {"zero": 1, "inf": 1, "nan": 1}

#: The multiplier's operands (register before the multiplier): normalized significands (bit 10
#: set unless the operand is zero), signed exponents with ``value = sig * 2^(exp - 25)``, the
#: product's sign and class, and the stream's ``first`` (``last`` travels in the pipeline's
#: valid chain).
OPERANDS_LAYOUT = data.StructLayout({
    "a_sig": 11, "b_sig": 11, "a_exp": signed(6), "b_exp": signed(6), "sign": 1,
    **_CLASS_FIELDS, "first": 1,
})

#: The multiplier's result (register after the multiplier): the 22-bit significand product,
#: whose leading one is bit 21 or bit 20, and the binary32 exponent for either case
#: (``exp_hi`` for bit 21, ``exp_lo = exp_hi - 1`` for bit 20), computed beside the multiplier.
RAW_PRODUCT_LAYOUT = data.StructLayout({
    "sig": 22, "exp_hi": 8, "exp_lo": 8, "sign": 1, **_CLASS_FIELDS, "first": 1,
})

#: The exact product as a normalized binary32 number, the register in front of the
#: accumulator. A product of 11-bit significands has 22 bits, so the binary32 fraction's two low
#: bits are always 0 and are not stored: ``frac`` is the top 21 fraction bits. ``exp_p1`` and
#: ``exp_m1`` are ``exp + 1`` and ``exp - 1``, computed in front of the loop (candidates of the
#: accumulator's new exponent, and compared with its exponent). The class flags replace the exponent/fraction encodings of zero, infinity and
#: NaN, which the accumulator never decodes.
PRODUCT_LAYOUT = data.StructLayout({
    "frac": 21, "exp": 8, "exp_p1": 8, "exp_m1": 8, "sign": 1, **_CLASS_FIELDS, "first": 1,
})

#: The accumulator register: a binary32 number with its class as flags (reset: +0.0).
ACC_LAYOUT = data.StructLayout({"frac": 23, "exp": 8, "sign": 1, **_CLASS_FIELDS})

#: The accumulator's exponent compared with the product's in front of it, a register of the
#: loop: ``d_xy = acc.exp - product.exp``, ``d_yx`` the low 8 bits of ``-d_xy`` (the shift when
#: the product is the larger operand), and whether ``d_xy`` is 0, +1 or -1. It is computed in the
#: cycle before, beside the accumulator's new value, so that the adder starts from it instead
#: of from a subtraction.
ALIGN_LAYOUT = data.StructLayout({
    "d_xy": signed(9), "d_yx": 8, "zero": 1, "plus_one": 1, "minus_one": 1,
})

#: binary32 exponent bias minus the two binary16 biases, plus one because the normalized
#: 22-bit product has its leading one at bit 21, i.e. 1.f x 2^(ea + eb - 30 + 1).
_PRODUCT_EXP_OFFSET = 127 - 2 * 15 + 1

#: The one NaN the unit emits: quiet, positive, payload 0 (0x7FC00000).
CANONICAL_NAN = 0x7FC0_0000


def unpack_fp16(m, bits, *, name):
    """Take a binary16 bit pattern apart (combinational); return a view of
    :data:`FP16_UNPACKED_LAYOUT` named ``<name>_unpacked``.

    Subnormals get hidden bit 0 and effective exponent 1, so that the value is always
    ``sig * 2^(exp - 25)``, exactly.
    """
    bits = Value.cast(bits)
    fields = Signal(FP16_UNPACKED_LAYOUT, name=f"{name}_unpacked")
    frac, exp = bits[0:10], bits[10:15]
    exp_zero, exp_ones = exp == 0, exp == 0x1F
    m.d.comb += [
        fields.sig.eq(Cat(frac, ~exp_zero)),
        fields.exp.eq(Mux(exp_zero, 1, exp)),
        fields.sign.eq(bits[15]),
        fields.zero.eq(exp_zero & (frac == 0)),
        fields.inf.eq(exp_ones & (frac == 0)),
        fields.nan.eq(exp_ones & (frac != 0)),
    ]
    return fields


def normalize_fp16(m, fields, *, name):
    """Shift a subnormal's significand up to bit 10 (combinational).

    Returns ``(sig, exp)``: ``sig`` (11 bits) has bit 10 set unless the operand is zero, and
    ``exp`` (signed, 6 bits, -9..30) keeps ``value = sig * 2^(exp - 25)``. For normal numbers
    both are the unpacked ones.
    """
    count = Signal(4, name=f"{name}_lz")
    m.d.comb += count.eq(leading_zeros(fields.sig))
    sig = Signal(11, name=f"{name}_sig")
    exp = Signal(signed(6), name=f"{name}_exp")
    m.d.comb += [sig.eq((fields.sig << count)[0:11]), exp.eq(fields.exp - count)]
    return sig, exp


def _leading_zeros_tree(bits):
    """``(any_set, count)`` for a power-of-two number of bits: a balanced tree of 2:1 merges."""
    if len(bits) == 2:
        return bits[0] | bits[1], ~bits[1]
    half = len(bits) // 2
    high_any, high_count = _leading_zeros_tree(bits[half:])
    low_any, low_count = _leading_zeros_tree(bits[:half])
    return high_any | low_any, Cat(Mux(high_any, high_count, low_count), ~high_any)


def leading_zeros(value):
    """Return the number of zero bits above the most significant one of ``value``
    (combinational).

    The count is ``ceil(log2(len(value)))`` bits wide (at least 1); for ``value == 0`` it is
    all ones, so callers treat zero separately. ``value`` is padded with zeros below to a power
    of two, which leaves the count of a non-zero value unchanged.
    """
    value = Value.cast(value)
    width = 1 << max(1, (len(value) - 1).bit_length())
    padded = Cat(Const(0, width - len(value)), value)
    return _leading_zeros_tree(padded)[1]


def _pack(m, state, *, name):
    """binary32 bits of an :data:`ACC_LAYOUT` value (combinational)."""
    bits = Signal(FP32_LAYOUT, name=name)
    with m.If(state.nan):
        m.d.comb += bits.eq(CANONICAL_NAN)
    with m.Elif(state.inf):
        m.d.comb += [bits.sign.eq(state.sign), bits.exp.eq(0xFF)]
    with m.Elif(state.zero):
        m.d.comb += bits.sign.eq(state.sign)
    with m.Else():
        m.d.comb += [bits.sign.eq(state.sign), bits.exp.eq(state.exp), bits.frac.eq(state.frac)]
    return bits


class Fp16Mac(wiring.Component):
    """FP16 x FP16 multiply with FP32 accumulate, one MAC per cycle.

    The area baseline for the P3-LLM PE (``p3_pe``): P3-LLM Table VIII normalizes every PE to
    "an FP16 MAC", the processing element of HBM-PIM [42], whose PIM units multiply binary16
    operands and accumulate in binary32 (P3-LLM section V-C: the P3 PE "eliminates the
    area-hungry components such as high-precision multipliers and exponent alignment modules in
    the conventional FP16/FP32 MAC unit"). This unit is that conventional MAC:

    ``acc = fp32(acc + fp32(a) * fp32(b))``

    The product of two binary16 numbers is exact in binary32 (a 22-bit significand, magnitude
    2^-48 .. (65504)^2 < 2^32, always normal), so the one rounding is the addition's: to nearest,
    ties to even, IEEE 754. binary16 subnormal operands are exact (no flush to zero).
    Infinities and NaNs follow IEEE 754 (``0 * inf``, ``inf - inf`` and any NaN operand give
    NaN; an infinite operand gives an infinity of its sign). Every NaN result is the one pattern
    0x7FC00000 (:data:`CANONICAL_NAN`): no NaN payload or sign is propagated.

    Readings that size the datapath (argued in docs/units/fp16_mac.md, bounds checked in the tests):
    every product and every accumulator value is a multiple of 2^-48, so a non-zero accumulator
    is never a binary32 subnormal; a product is below 2^32 and is rounded away once
    ``|acc| >= 2^56``, so a finite accumulator never overflows. The adder therefore has neither
    a subnormal-result path nor an overflow check; zeros, infinities and NaNs are class flags
    beside it.

    Pipeline: the accumulation ``acc = fp32(acc + p)`` is a recurrence, one binary32
    add-and-round per beat, so it is one stage whatever ``pipeline`` says: splitting it would
    change the order or the number of roundings, and interleaving accumulators would give up
    one result per cycle for one dot product. Everything around it is pipelined:

    * multiplier inputs: unpack ``a`` and ``b`` (:func:`unpack_fp16`), shift subnormal
      significands up (:func:`normalize_fp16`), the product's sign and class;
    * multiplier: 11 x 11 significand product, and beside it the product's binary32 exponent
      for either position of its leading one;
    * product: one-bit normalization of the product, selection of its exponent;
    * accumulate (the loop, :meth:`_accumulate`): a two-path binary32 adder; the classes of
      its operands are flags, ``first`` (+0.0) is selected at the end instead of multiplexed
      in front, and the exponent difference for the next beat is computed beside the result
      (a register of the loop) so that the adder does not start with a subtraction;
    * output: the binary32 bits of the accumulator.

    ``pipeline`` chooses the registers between these steps; every value adds one register
    stage to the previous one (latency ``2 + pipeline``):

    * 0: the lowest latency, 2 (as before ``pipeline`` existed): the input steps, the
      multiplier and the product step are one combinational stage in front of the product
      register, and the output register is loaded from the loop's result.
    * 1: + a register after the multiplier (the DSP block's output register: SB_MAC16 on
      iCE40 absorbs it; fabric flip-flops after ECP5's unregistered MULT18X18D).
    * 2 (default): + a register before the multiplier (the DSP block's input registers). The
      loop is the only long path left.

    The output register is loaded from the loop's result (its binary32 packing is a
    multiplexer on flags known early in the cycle); a further stage between the accumulator
    and the output register was measured not to change Fmax (docs/units/fp16_mac.md) and is
    not offered.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Input stream; payload fields in order ``a`` (16, binary16 bits), ``b`` (16, binary16
        bits), ``first`` (1: clear the accumulator to +0.0 before this beat), ``last`` (1: emit
        the accumulator after this beat).
    o : ``Out(stream.Signature(out_layout))``
        Output stream, one beat per input beat with ``last``; payload field ``acc`` (32,
        binary32 bits).

    Parameters
    ----------
    pipeline : int
        Register stages, 0..2 (see above). Default 2.

    Attributes
    ----------
    latency : int
        Cycles from the transfer of a ``last`` beat on ``i`` to its result being valid on
        ``o`` (with ``o.ready`` high): ``2 + pipeline``.

    Raises
    ------
    TypeError, ValueError
        If ``pipeline`` is not an integer in 0..2.

    The accumulator is +0.0 after reset and keeps its value across a ``last`` unless the next
    beat has ``first``. Latency and throughput: one beat per cycle (also with ``last`` on every
    beat); a ``last`` beat accepted in cycle t is valid on ``o`` in cycle t + ``latency``. All
    stages advance together (:class:`~hdl.stream_stage.StallPipeline`): ``i.ready`` is
    ``~o.valid | o.ready``, combinational in ``o.ready``; ``o.valid`` and ``o.payload`` come
    from flip-flops.
    """

    #: Largest ``pipeline`` value.
    MAX_PIPELINE = 2

    def __init__(self, *, pipeline=2):
        self.pipeline = check_pipeline(pipeline, max_value=self.MAX_PIPELINE)
        self.latency = 2 + self.pipeline
        self.in_layout = data.StructLayout({
            "a": unsigned(16), "b": unsigned(16), "first": unsigned(1), "last": unsigned(1),
        })
        self.out_layout = data.StructLayout({"acc": unsigned(32)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    @property
    def flip_flops(self):
        """Flip-flops of the design: stage registers, the loop's registers (accumulator and
        exponent comparison), the output register and the valid chain."""
        count = PRODUCT_LAYOUT.size + ACC_LAYOUT.size + ALIGN_LAYOUT.size + FP32_LAYOUT.size
        front = 0
        if self.pipeline >= 1:
            count += RAW_PRODUCT_LAYOUT.size
            front += 1
        if self.pipeline >= 2:
            count += OPERANDS_LAYOUT.size
            front += 1
        # Valid chain: one valid bit per stage (the beats with ``last``), and one beat bit
        # per stage up to the product register (any beat: it enables the accumulator).
        return count + self.latency + front + 1

    def elaborate(self, platform):
        m = Module()
        cut_after_mul = self.pipeline >= 1
        cut_before_mul = self.pipeline >= 2
        pipe = StallPipeline(m, self.i, self.o, latency=self.latency,
                             emit=self.i.payload.last, name="pipe")

        # --- multiplier inputs ---------------------------------------------------------------
        a = unpack_fp16(m, self.i.payload.a, name="a")
        b = unpack_fp16(m, self.i.payload.b, name="b")
        a_sig, a_exp = normalize_fp16(m, a, name="a")
        b_sig, b_exp = normalize_fp16(m, b, name="b")
        operands_next = Signal(OPERANDS_LAYOUT, name="operands_next")
        nan = a.nan | b.nan | (a.inf & b.zero) | (a.zero & b.inf)
        inf = ~nan & (a.inf | b.inf)
        m.d.comb += [
            operands_next.a_sig.eq(a_sig), operands_next.b_sig.eq(b_sig),
            operands_next.a_exp.eq(a_exp), operands_next.b_exp.eq(b_exp),
            operands_next.sign.eq(a.sign ^ b.sign),
            operands_next.nan.eq(nan), operands_next.inf.eq(inf),
            operands_next.zero.eq(~nan & ~inf & (a.zero | b.zero)),
            operands_next.first.eq(self.i.payload.first),
        ]
        operands = pipe.stage(operands_next, name="operands", enable=cut_before_mul)

        # --- multiplier ----------------------------------------------------------------------
        raw_next = Signal(RAW_PRODUCT_LAYOUT, name="raw_product_next")
        exp_sum = operands.a_exp + operands.b_exp
        m.d.comb += [
            raw_next.sig.eq(operands.a_sig * operands.b_sig),
            raw_next.exp_hi.eq(exp_sum + _PRODUCT_EXP_OFFSET),
            raw_next.exp_lo.eq(exp_sum + _PRODUCT_EXP_OFFSET - 1),
        ]
        for field in ("sign", "zero", "inf", "nan", "first"):
            m.d.comb += raw_next[field].eq(operands[field])
        raw = pipe.stage(raw_next, name="raw_product", enable=cut_after_mul)

        # --- product: one-bit normalization --------------------------------------------------
        product_next = Signal(PRODUCT_LAYOUT, name="product_next")
        top = raw.sig[21]
        m.d.comb += [
            product_next.frac.eq(Mux(top, raw.sig[0:21], Cat(Const(0, 1), raw.sig[0:20]))),
            product_next.exp_p1.eq(Mux(top, raw.exp_hi + 1, raw.exp_hi)),
            product_next.exp.eq(Mux(top, raw.exp_hi, raw.exp_lo)),
            product_next.exp_m1.eq(Mux(top, raw.exp_lo, raw.exp_lo - 1)),
        ]
        for field in ("sign", "zero", "inf", "nan", "first"):
            m.d.comb += product_next[field].eq(raw[field])
        product = pipe.stage(product_next, name="product")
        product_stage = int(cut_before_mul) + int(cut_after_mul)

        # --- accumulate: the loop ------------------------------------------------------------
        acc = Signal(ACC_LAYOUT, name="acc", init={"zero": 1})  # +0.0 after reset
        align = Signal(ALIGN_LAYOUT, name="align")
        update = pipe.beat[product_stage]
        acc_next, align_next = self._accumulate(m, acc, align, product, product_next.exp,
                                                update)
        with m.If(pipe.ce):
            m.d.sync += align.eq(align_next)
            with m.If(update):
                m.d.sync += acc.eq(acc_next)

        # --- output --------------------------------------------------------------------------
        out = pipe.stage(_pack(m, acc_next, name="out_next"), name="out_reg")
        m.d.comb += self.o.payload.acc.eq(out)
        return m

    @staticmethod
    def _accumulate(m, acc, align, p, next_exp, update):
        """The loop: the accumulator after adding product ``p`` (:data:`PRODUCT_LAYOUT`) to
        ``acc`` (:data:`ACC_LAYOUT`), or to +0.0 if ``p.first``, rounded to nearest even; and
        the comparison of its exponent with ``next_exp``, the exponent of the product that
        follows (combinational). Returns ``(acc_next, align_next)``.

        ``align`` (:data:`ALIGN_LAYOUT`) compares ``acc.exp`` with ``p.exp``; ``update`` is high
        if ``p`` is a beat (else ``align_next`` compares the unchanged accumulator).

        Both operands of the adder are normal (zeros, infinities and NaNs are flags, handled by
        the selection at the end), and the sum is never subnormal and never overflows (see the
        class docstring). Two paths are computed side by side and one is selected:

        * far path (an addition, or a subtraction of exponents at least 2 apart, or 1 apart
          with a result >= 1): :meth:`_far_path`. The result's exponent is the larger
          operand's, one above or one below.
        * near path (a subtraction of exponents at most 1 apart whose result is below the
          larger operand's leading bit): :meth:`_near_path`. Exact: no rounding. The result's
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

        far_frac, far_up, far_down = Fp16Mac._far_path(m, big, small_sig, align_shift, subtract)
        near_select = Signal(name="near_select")
        near_frac, near_count, near_sign, near_zero = Fp16Mac._near_path(
            m, mx, my, big, p.sign, subtract, align, near_select)

        # --- special cases -------------------------------------------------------------------
        special = Signal(data.StructLayout({"frac": 23, "sign": 1, **_CLASS_FIELDS}),
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

        # --- exponent, with its difference to the next product's ---------------------------
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

    @staticmethod
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

    @staticmethod
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
