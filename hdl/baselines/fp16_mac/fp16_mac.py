"""FP16 x FP16 multiply, FP32 accumulate: the HBM-PIM style MAC (contract sections 0 and 5), and
its second reading with a binary16 accumulator (``acc="fp16"``).

The unit and its pipeline are here; the stage layouts and the binary16 input pieces are in
:mod:`hdl.baselines.fp16_mac.formats`, the accumulation loop's binary32 adder in
:mod:`hdl.baselines.fp16_mac.accumulator`, the binary16 reading's product rounding and loop in
:mod:`hdl.baselines.fp16_mac.half`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .accumulator import accumulate
from .formats import (ACC_FORMATS, ACC_LAYOUT, ALIGN_LAYOUT, CANONICAL_NAN,
                               CANONICAL_NAN_FP16, FP16_UNPACKED_LAYOUT, FP32_LAYOUT, HALF_LAYOUT,
                               HALF_PRODUCT_LAYOUT, HALF_RAW_PRODUCT_LAYOUT, OPERANDS_LAYOUT,
                               PRODUCT_LAYOUT, RAW_PRODUCT_LAYOUT, leading_zeros, normalize_fp16,
                               unpack_fp16)
from .half import accumulate_half, multiply_half, pack_half, round_product
from ...common.params import check_choice
from ...common.stream_stage import StallPipeline, check_pipeline

__all__ = ["Fp16Mac", "ACC_FORMATS", "CANONICAL_NAN", "CANONICAL_NAN_FP16", "FP32_LAYOUT",
           "FP16_UNPACKED_LAYOUT", "OPERANDS_LAYOUT", "RAW_PRODUCT_LAYOUT", "PRODUCT_LAYOUT",
           "ACC_LAYOUT", "ALIGN_LAYOUT", "unpack_fp16", "normalize_fp16", "leading_zeros"]

#: binary32 exponent bias minus the two binary16 biases, plus one because the normalized
#: 22-bit product has its leading one at bit 21, i.e. 1.f x 2^(ea + eb - 30 + 1).
_PRODUCT_EXP_OFFSET = 127 - 2 * 15 + 1


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
    """FP16 x FP16 multiply with FP32 accumulate (or, ``acc="fp16"``, FP16 accumulate), one MAC
    per cycle.

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
    * accumulate (the loop, :func:`hdl.baselines.fp16_mac.accumulator.accumulate`): a two-path binary32
      adder; the classes of its operands are flags, ``first`` (+0.0) is selected at the end
      instead of multiplexed in front, and the exponent difference for the next beat is
      computed beside the result (a register of the loop) so that the adder does not start
      with a subtraction;
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

    Second reading, ``acc="fp16"`` (contract section 5: the papers do not say which accumulator
    their "FP16 MAC" has): a binary16 accumulator, and per beat

    ``acc = fp16(acc + fp16(a * b))``

    the product rounded once to binary16, then the sum rounded once to binary16, each to
    nearest, ties to even: NumPy float16 ``acc = acc + a * b``, two roundings per beat (as a
    binary16 multiplier followed by a binary16 adder; not a fused multiply-add). Unlike the
    binary32 reading, both roundings can leave the normal range: a product or a sum below
    2^-14 is a binary16 subnormal (rounded, no flush to zero), a product below 2^-25 rounds to
    a zero of its sign, and a product or sum that rounds to 2^16 or more overflows to an
    infinity of its sign (round to nearest overflows to infinity: 65520 and above). ``first``
    starts from +0.0 as above (``+0 + -0 = +0``: a product that underflows to -0 leaves +0); a
    NaN operand, ``0 * inf`` and ``inf - inf`` give NaN. Every NaN result is the one pattern
    0x7E00 (:data:`CANONICAL_NAN_FP16`). The steps are the same as above with a binary16 back
    end (:mod:`hdl.baselines.fp16_mac.half`): the multiplier gives the product's binary16 exponent, the
    product step rounds the product to binary16 (subnormal shift, sticky bit, overflow), and
    the loop is a one-path binary16 adder with a subnormal-result limit on its normalization
    shift and an overflow check, the classes (NaN, infinity, zero operands, ``first``)
    selected at its end from flags (:func:`hdl.baselines.fp16_mac.half.accumulate_half`); the
    accumulator register holds the binary16 number taken apart (no exponent comparison
    register). ``pipeline`` places the same registers as above, and the latency is the same.
    Why two roundings and not one (a fused multiply-add): contract section 5 fixes this reading
    (NumPy float16 ``acc + a * b``), the arithmetic of a binary16 multiplier feeding a binary16
    adder.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Input stream; payload fields in order ``a`` (16, binary16 bits), ``b`` (16, binary16
        bits), ``first`` (1: clear the accumulator to +0.0 before this beat), ``last`` (1: emit
        the accumulator after this beat).
    o : ``Out(stream.Signature(out_layout))``
        Output stream, one beat per input beat with ``last``; payload field ``acc`` (32,
        binary32 bits; with ``acc="fp16"`` 16, binary16 bits).

    Parameters
    ----------
    pipeline : int
        Register stages, 0..2 (see above). Default 2.
    acc : str
        Accumulator format, one of :data:`ACC_FORMATS`: ``"fp32"`` (default, binary32
        accumulation of exact products) or ``"fp16"`` (the second reading above).

    Attributes
    ----------
    latency : int
        Cycles from the transfer of a ``last`` beat on ``i`` to its result being valid on
        ``o`` (with ``o.ready`` high): ``2 + pipeline``.

    Raises
    ------
    TypeError, ValueError
        If ``pipeline`` is not an integer in 0..2, or ``acc`` not one of ``"fp32"``,
        ``"fp16"``.

    The accumulator is +0.0 after reset and keeps its value across a ``last`` unless the next
    beat has ``first``. Latency and throughput: one beat per cycle (also with ``last`` on every
    beat); a ``last`` beat accepted in cycle t is valid on ``o`` in cycle t + ``latency``. All
    stages advance together (:class:`~hdl.common.stream_stage.StallPipeline`): ``i.ready`` is
    ``~o.valid | o.ready``, combinational in ``o.ready``; ``o.valid`` and ``o.payload`` come
    from flip-flops.
    """

    #: Largest ``pipeline`` value.
    MAX_PIPELINE = 2

    def __init__(self, *, pipeline=2, acc="fp32"):
        self.pipeline = check_pipeline(pipeline, max_value=self.MAX_PIPELINE)
        self.acc = check_choice("acc", acc, ACC_FORMATS)
        self.latency = 2 + self.pipeline
        self.in_layout = data.StructLayout({
            "a": unsigned(16), "b": unsigned(16), "first": unsigned(1), "last": unsigned(1),
        })
        self.out_layout = data.StructLayout({"acc": unsigned(16 if acc == "fp16" else 32)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    @property
    def flip_flops(self):
        """Flip-flops of the design: stage registers, the loop's registers (accumulator and,
        for binary32, exponent comparison), the output register and the valid chain."""
        if self.acc == "fp16":
            count = HALF_PRODUCT_LAYOUT.size + HALF_LAYOUT.size + 16
            raw_size = HALF_RAW_PRODUCT_LAYOUT.size
        else:
            count = (PRODUCT_LAYOUT.size + ACC_LAYOUT.size + ALIGN_LAYOUT.size
                     + FP32_LAYOUT.size)
            raw_size = RAW_PRODUCT_LAYOUT.size
        front = 0
        if self.pipeline >= 1:
            count += raw_size
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
        if self.acc == "fp16":
            self._elaborate_half(m, pipe, operands, cut_after_mul, cut_before_mul)
            return m

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
        acc_next, align_next = accumulate(m, acc, align, product, product_next.exp, update)
        with m.If(pipe.ce):
            m.d.sync += align.eq(align_next)
            with m.If(update):
                m.d.sync += acc.eq(acc_next)

        # --- output --------------------------------------------------------------------------
        out = pipe.stage(_pack(m, acc_next, name="out_next"), name="out_reg")
        m.d.comb += self.o.payload.acc.eq(out)
        return m

    def _elaborate_half(self, m, pipe, operands, cut_after_mul, cut_before_mul):
        """The binary16 reading's steps after the multiplier's operands (see the class
        docstring): multiplier, product rounding, the binary16 loop, the output."""
        raw = pipe.stage(multiply_half(m, operands), name="raw_product", enable=cut_after_mul)
        product_next = round_product(m, raw)
        product = pipe.stage(product_next, name="product")
        product_stage = int(cut_before_mul) + int(cut_after_mul)

        acc = Signal(HALF_LAYOUT, name="acc", init={"exp": 1, "zero": 1})  # +0.0 after reset
        acc_next = accumulate_half(m, acc, product)
        with m.If(pipe.ce & pipe.beat[product_stage]):
            m.d.sync += acc.eq(acc_next)
        out = pipe.stage(pack_half(m, acc_next, name="out_next"), name="out_reg")
        m.d.comb += self.o.payload.acc.eq(out)
