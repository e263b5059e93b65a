"""FP16 x FP16 multiply, FP32 accumulate: the HBM-PIM style MAC (SPEC sections 0 and 5)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Fp16Mac", "CANONICAL_NAN", "FP32_LAYOUT", "FP16_UNPACKED_LAYOUT", "PRODUCT_LAYOUT",
           "unpack_fp16", "leading_zeros", "round_nearest_even"]

#: A binary32 number as stored in the accumulator and sent on ``o``.
FP32_LAYOUT = data.StructLayout({"frac": 23, "exp": 8, "sign": 1})

#: A binary16 operand taken apart: significand with its hidden bit, effective exponent
#: (1 for subnormals, whose hidden bit is 0) and the class flags.
FP16_UNPACKED_LAYOUT = data.StructLayout({
    "sig": 11, "exp": 5, "sign": 1, "zero": 1, "inf": 1, "nan": 1,
})

#: The exact product as a binary32 number, pipeline register between the two stages. A product
#: of 11-bit significands has 22 bits, so the binary32 fraction's two low bits are always 0 and
#: are not stored: ``frac`` is the top 21 fraction bits. ``first``/``last`` travel along.
PRODUCT_LAYOUT = data.StructLayout({
    "frac": 21, "exp": 8, "sign": 1, "first": 1, "last": 1,
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


def round_nearest_even(m, normalized, *, name="round_up"):
    """Round a normalized 28-bit sum to a 24-bit significand, ties to even (combinational).

    ``normalized`` has its leading one at bit 27: bits 27..4 are the significand, bit 3 the
    guard bit and bits 2..0 the sticky bits. Returns the 25-bit rounded significand; bit 24 is
    the carry out of rounding (significand 2.0: the exponent goes up by one, the fraction is 0).
    The round-up decision is the signal ``name`` (``round_up``).
    """
    normalized = Value.cast(normalized)
    round_up = Signal(name=name)
    lsb, guard, sticky = normalized[4], normalized[3], normalized[0:3].any()
    m.d.comb += round_up.eq(guard & (sticky | lsb))
    rounded = Signal(25, name="rounded")
    m.d.comb += rounded.eq(normalized[4:28] + round_up)
    return rounded


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
    a subnormal-result path nor an overflow check; zeros, infinities and NaNs are handled by
    class flags beside it.

    Pipeline (``latency = 2``):

    1. unpack ``a`` and ``b`` (:func:`unpack_fp16`), multiply the 11-bit significands,
       normalize the 22-bit product (:func:`leading_zeros`), compute the product exponent and
       class; register the product as a binary32 number (:data:`PRODUCT_LAYOUT`).
    2. add the product to the accumulator (+0.0 if the beat has ``first``): order by magnitude,
       align the smaller with guard/round/sticky bits, add or subtract, normalize with a
       leading-zero count, round to nearest even (:func:`round_nearest_even`), select the
       special-case result; write the accumulator, and on ``last`` the output register. The
       accumulator feeds back within this stage, so one beat per cycle is sustained.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Input stream; payload fields in order ``a`` (16, binary16 bits), ``b`` (16, binary16
        bits), ``first`` (1: clear the accumulator to +0.0 before this beat), ``last`` (1: emit
        the accumulator after this beat).
    o : ``Out(stream.Signature(out_layout))``
        Output stream, one beat per input beat with ``last``; payload field ``acc`` (32,
        binary32 bits).

    The accumulator is +0.0 after reset and keeps its value across a ``last`` unless the next
    beat has ``first``. Throughput: one beat per cycle. Latency: a ``last`` beat accepted in
    cycle t is valid on ``o`` in cycle t + 2. ``i.ready`` is low only while a ``last`` beat
    waits in stage 2 for the output register (``o.valid & ~o.ready``); it is combinational in
    ``o.ready``. Registers: 33 (stage 1, with its valid), 32 (accumulator), 33 (output, with
    ``o.valid``): 98 flip-flops.
    """

    #: Cycles from a transfer on ``i`` (with ``last``) to the result being valid on ``o``.
    latency = 2

    #: Flip-flops of the design: stage 1 (product + first + last + valid), accumulator, output.
    flip_flops = PRODUCT_LAYOUT.size + 1 + FP32_LAYOUT.size + FP32_LAYOUT.size + 1

    def __init__(self):
        self.in_layout = data.StructLayout({
            "a": unsigned(16), "b": unsigned(16), "first": unsigned(1), "last": unsigned(1),
        })
        self.out_layout = data.StructLayout({"acc": unsigned(32)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()

        # --- stage 1: unpack, significand multiply, normalize the exact product --------------
        a = unpack_fp16(m, self.i.payload.a, name="a")
        b = unpack_fp16(m, self.i.payload.b, name="b")
        significand_product = Signal(22, name="significand_product")
        m.d.comb += significand_product.eq(a.sig * b.sig)
        product_lz = Signal(5, name="product_lz")
        m.d.comb += product_lz.eq(leading_zeros(significand_product))
        product_normalized = Signal(22, name="product_normalized")
        m.d.comb += product_normalized.eq((significand_product << product_lz)[0:22])

        product_next = Signal(PRODUCT_LAYOUT, name="product_next")
        product_nan = a.nan | b.nan | (a.inf & b.zero) | (a.zero & b.inf)
        product_sign = a.sign ^ b.sign
        m.d.comb += [
            product_next.first.eq(self.i.payload.first),
            product_next.last.eq(self.i.payload.last),
        ]
        with m.If(product_nan):
            m.d.comb += product_next.eq(Cat(Const(CANONICAL_NAN >> 2, 30),
                                            self.i.payload.first, self.i.payload.last))
        with m.Elif(a.inf | b.inf):
            m.d.comb += [product_next.sign.eq(product_sign), product_next.exp.eq(0xFF)]
        with m.Elif(a.zero | b.zero):
            m.d.comb += product_next.sign.eq(product_sign)
        with m.Else():
            m.d.comb += [
                product_next.sign.eq(product_sign),
                product_next.exp.eq(a.exp + b.exp + _PRODUCT_EXP_OFFSET - product_lz),
                product_next.frac.eq(product_normalized[0:21]),
            ]

        product = Signal(PRODUCT_LAYOUT, name="product", reset_less=True)
        product_valid = Signal(name="product_valid")

        # --- stage 2: accumulate -------------------------------------------------------------
        acc = Signal(FP32_LAYOUT, name="acc")  # +0.0 after reset
        acc_in = Signal(FP32_LAYOUT, name="acc_in")
        m.d.comb += acc_in.eq(Mux(product.first, 0, acc))
        addend = Signal(FP32_LAYOUT, name="addend")
        m.d.comb += addend.eq(Cat(Const(0, 2), product.frac, product.exp, product.sign))
        sum_bits = self._add(m, acc_in, addend)

        # --- handshake -----------------------------------------------------------------------
        out_reg = Signal(FP32_LAYOUT, name="out_reg", reset_less=True)
        m.d.comb += self.o.payload.acc.eq(out_reg)
        stall = Signal(name="stall")
        m.d.comb += stall.eq(product_valid & product.last & self.o.valid & ~self.o.ready)
        advance = product_valid & ~stall
        m.d.comb += self.i.ready.eq(~stall)
        with m.If(self.i.ready):
            m.d.sync += product_valid.eq(self.i.valid)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += product.eq(product_next)
        with m.If(advance):
            m.d.sync += acc.eq(sum_bits)
            with m.If(product.last):
                m.d.sync += out_reg.eq(sum_bits)
        with m.If(advance & product.last):
            m.d.sync += self.o.valid.eq(1)
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m

    @staticmethod
    def _add(m, x, y):
        """binary32 ``x + y`` rounded to nearest even, for the operands this unit produces
        (normal, zero, infinity or NaN; never subnormal, and no finite overflow): returns a
        signal of :data:`FP32_LAYOUT` (combinational)."""
        # Classes. A zero has exponent 0 and fraction 0; reachable values are never subnormal.
        x_inf, y_inf = (x.exp == 0xFF) & (x.frac == 0), (y.exp == 0xFF) & (y.frac == 0)
        x_nan, y_nan = (x.exp == 0xFF) & (x.frac != 0), (y.exp == 0xFF) & (y.frac != 0)

        # Order by magnitude: for non-negative binary32 numbers the bit patterns are ordered.
        swap = Signal(name="swap")
        m.d.comb += swap.eq(y.as_value()[0:31] > x.as_value()[0:31])
        big = Signal(FP32_LAYOUT, name="big")
        small = Signal(FP32_LAYOUT, name="small")
        m.d.comb += [big.eq(Mux(swap, y, x)), small.eq(Mux(swap, x, y))]

        # Align the smaller significand: 3 extra bits (guard, round, sticky) below the larger's
        # 24; everything shifted further out is ORed into the sticky bit.
        align_shift = Signal(5, name="align_shift")
        exp_difference = (big.exp - small.exp)[0:8]
        m.d.comb += align_shift.eq(Mux(exp_difference[5:8].any(), 31, exp_difference[0:5]))
        small_wide = Cat(Const(0, 32), small.frac, small.exp != 0) >> align_shift
        align_sticky = Signal(name="align_sticky")
        m.d.comb += align_sticky.eq(small_wide[0:30].any())
        aligned = Signal(27, name="aligned")
        m.d.comb += aligned.eq(Cat(align_sticky, small_wide[30:56]))
        big_sig = Cat(Const(0, 3), big.frac, big.exp != 0)

        # Add or subtract (the larger minus the smaller: never negative); bit 27 is the carry.
        total = Signal(28, name="total")
        subtract = big.sign ^ small.sign
        m.d.comb += total.eq(Mux(subtract, big_sig - aligned, big_sig + aligned))

        # Normalize: leading one to bit 27; exponent of bit 27 is big.exp + 1.
        sum_lz = Signal(5, name="sum_lz")
        m.d.comb += sum_lz.eq(leading_zeros(total))
        normalized = Signal(28, name="normalized")
        m.d.comb += normalized.eq((total << sum_lz)[0:28])
        rounded = round_nearest_even(m, normalized)
        exp_sum = Signal(8, name="exp_sum")
        m.d.comb += exp_sum.eq(big.exp + 1 - sum_lz + rounded[24])

        result = Signal(FP32_LAYOUT, name="sum_bits")
        with m.If(x_nan | y_nan | (x_inf & y_inf & (x.sign != y.sign))):
            m.d.comb += result.eq(CANONICAL_NAN)
        with m.Elif(x_inf | y_inf):
            m.d.comb += [result.sign.eq(Mux(x_inf, x.sign, y.sign)), result.exp.eq(0xFF)]
        with m.Elif(total == 0):
            # Exact zero: -0 only for (-0) + (-0); any other exact cancellation gives +0.
            m.d.comb += result.sign.eq(x.sign & y.sign)
        with m.Else():
            m.d.comb += [result.sign.eq(big.sign), result.exp.eq(exp_sum),
                         result.frac.eq(rounded[0:23])]
        return result
