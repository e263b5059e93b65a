"""P3-LLM processing element: 4-way FP8 x INT4/BitMoD dot product (P3-LLM V-C; SPEC section 5)."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .compressor import Compressor42
from .lanes import split_lanes

__all__ = ["P3Pe", "BITMOD_HALF_UNITS", "BITMOD_SPECIAL"]

WAYS = 4
ACC_BITS = 32
#: BitMoD FP4 magnitudes in half units, by the code's bits [2:0] (0, 0.5, 1, 1.5, 2, 3, 4, 6).
BITMOD_HALF_UNITS = (0, 1, 2, 3, 4, 6, 8, 12)
#: BitMoD special values replacing negative zero, in half units, by ``sv_sel`` (+5 -5 +8 -8).
BITMOD_SPECIAL = (10, -10, 16, -16)
PRODUCT_BITS = 12          # (6-bit signed mantissa) x (6-bit signed weight)
TERM_BITS = PRODUCT_BITS + 14   # shifted left by up to max(e, 1) - 1 = 14
SUM_BITS = ACC_BITS + 2    # acc + four terms, exact: |acc| < 2^31, |terms| < 2^25 each


class P3Pe(wiring.Component):
    """One P3-LLM PE: a 4-way FP8 x 4-bit dot product into a 32-bit fixed-point accumulator.

    P3-LLM's PCU (section V-C, Fig. 6(c)) has 16 such PEs sharing their activations. Each PE
    multiplies the signed 5-bit activation significand by the decoded weight in a 6-bit signed
    multiplier, shifts the product by the activation's exponent, reduces the four shifted
    products with a 4:2 compressor tree and accumulates in 32-bit fixed point. There is no
    floating-point adder and no accumulator alignment. Per SPEC section 5:

    * activation ``act_fmt`` 0, FP8-E4M3: ``M5 = ((e != 0) << 4) | (m << 1)``, sign bit 7;
      ``e == 15, m == 7`` is NaN, which contributes 0 and sets ``nan``. ``act_fmt`` 1,
      FP8-S0E4M4 (unsigned, exponent bits [7:4]): ``M5 = ((e != 0) << 4) | m``;
    * weight ``wgt_fmt`` 0, BitMoD FP4: sign bit 3, magnitude ``{0,1,2,3,4,6,8,12}`` half units
      by bits [2:0], and code ``0b1000`` decodes to the special value ``+10, -10, +16, -16``
      (``sv_sel`` 0..3). ``wgt_fmt`` 1, INT4 asymmetric: ``w = q - zp``;
    * ``acc += sum_i((-1)^s_i * M5_i * w_i << (max(e_i, 1) - 1))`` with two's-complement wrap at
      32 bits; the sticky ``overflow`` flag is set when the exact sum leaves the 32-bit range.

    The accumulator and both flags are 0 after reset. A beat with ``first`` clears them before
    adding its own products; a beat with ``last`` emits ``acc``, ``overflow`` and ``nan`` after
    its own update. Without ``first``, accumulation continues across a ``last``. The format
    fields, ``sv_sel`` and ``zp`` are read on every beat, so a dot product may mix formats
    (P3-LLM switches between linear layers and attention this way).

    Pipeline: stage 1 decodes, multiplies, shifts and applies the first 4:2 compressor to the
    four products. Stage 2 adds the carry-save pair to the accumulator (a 3:2 row and one
    34-bit carry-propagate adder) and loads the output register on ``last``.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``act`` (4 x 8), ``wgt`` (4 x 4), ``act_fmt`` (1), ``wgt_fmt`` (1), ``sv_sel`` (2),
        ``zp`` (4), ``first`` (1), ``last`` (1).
    o : ``Out(stream.Signature(out_layout))``
        ``acc`` (32, signed), ``overflow`` (1), ``nan`` (1); one beat per ``last``.

    Latency and throughput: the result of a ``last`` beat is valid 2 cycles after its
    transfer. One beat (4 MACs) per cycle, unless a result cannot leave: ``i`` then waits while
    ``o`` holds an unaccepted result and another ``last`` beat is ready in stage 1.

    The PE has no parameters: SPEC section 5 fixes every width.
    """

    latency = 2

    def __init__(self):
        self.in_layout = data.StructLayout({
            "act": data.ArrayLayout(unsigned(8), WAYS),
            "wgt": data.ArrayLayout(unsigned(4), WAYS),
            "act_fmt": unsigned(1),
            "wgt_fmt": unsigned(1),
            "sv_sel": unsigned(2),
            "zp": unsigned(4),
            "first": unsigned(1),
            "last": unsigned(1),
        })
        self.out_layout = data.StructLayout({
            "acc": signed(ACC_BITS),
            "overflow": unsigned(1),
            "nan": unsigned(1),
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.i.payload

        # --- stage 1: decode, 6-bit signed multiply, exponent shift, 4:2 compressor ---------
        acts = split_lanes(m, p.act, 8, WAYS, name="act")
        wgts = split_lanes(m, p.wgt, 4, WAYS, name="wgt")
        terms, nans = [], []
        for lane in range(WAYS):
            term, nan = self._lane(m, lane, acts[lane], wgts[lane], p)
            terms.append(term)
            nans.append(nan)
        tree = m.submodules.compressor = Compressor42(SUM_BITS)
        m.d.comb += [
            tree.a.eq(terms[0]), tree.b.eq(terms[1]), tree.c.eq(terms[2]), tree.d.eq(terms[3]),
        ]

        s1_valid = Signal()
        s1_sum = Signal(SUM_BITS, reset_less=True)
        s1_carry = Signal(SUM_BITS, reset_less=True)
        s1_nan = Signal(reset_less=True)
        s1_first = Signal(reset_less=True)
        s1_last = Signal(reset_less=True)

        advance = Signal()
        m.d.comb += advance.eq(s1_valid & (~s1_last | ~self.o.valid | self.o.ready))
        m.d.comb += self.i.ready.eq(~s1_valid | advance)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                s1_valid.eq(1),
                s1_sum.eq(tree.sum), s1_carry.eq(tree.carry),
                s1_nan.eq(Cat(*nans).any()),
                s1_first.eq(p.first), s1_last.eq(p.last),
            ]
        with m.Elif(advance):
            m.d.sync += s1_valid.eq(0)

        # --- stage 2: accumulate (3:2 row + carry-propagate add), flags, output register ------
        acc = Signal(signed(ACC_BITS))
        overflow = Signal()
        nan = Signal()
        base = Signal(signed(ACC_BITS))
        m.d.comb += base.eq(Mux(s1_first, 0, acc))
        accumulate = m.submodules.accumulate = Compressor42(SUM_BITS)
        m.d.comb += [
            accumulate.a.eq(s1_sum), accumulate.b.eq(s1_carry),
            accumulate.c.eq(base.as_signed()), accumulate.d.eq(0),
        ]
        exact = Signal(signed(SUM_BITS))
        m.d.comb += exact.eq(accumulate.sum + accumulate.carry)
        left_range = Signal()        # exact sum outside the signed 32-bit range
        m.d.comb += left_range.eq(exact[ACC_BITS - 1:].any() & ~exact[ACC_BITS - 1:].all())
        new_overflow = Mux(s1_first, 0, overflow) | left_range
        new_nan = Mux(s1_first, 0, nan) | s1_nan

        out = Signal(self.out_layout, reset_less=True)
        m.d.comb += self.o.payload.eq(out)
        with m.If(advance):
            m.d.sync += [acc.eq(exact[:ACC_BITS]), overflow.eq(new_overflow), nan.eq(new_nan)]
            with m.If(s1_last):
                m.d.sync += [
                    out.acc.eq(exact[:ACC_BITS]), out.overflow.eq(new_overflow),
                    out.nan.eq(new_nan), self.o.valid.eq(1),
                ]
            with m.Elif(self.o.ready):
                m.d.sync += self.o.valid.eq(0)
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m

    def _lane(self, m, lane, code, wgt, p):
        """One way: returns the sign-extended shifted product and the lane's NaN flag."""
        e4m3 = ~p.act_fmt
        exponent = Signal(4, name=f"exp_{lane}")
        m.d.comb += exponent.eq(Mux(e4m3, code[3:7], code[4:8]))
        hidden = exponent != 0
        m5 = Signal(5, name=f"m5_{lane}")
        m.d.comb += m5.eq(Mux(e4m3, Cat(Const(0, 1), code[0:3], hidden),
                              Cat(code[0:4], hidden)))
        negative = e4m3 & code[7]
        nan = Signal(name=f"nan_{lane}")
        m.d.comb += nan.eq(e4m3 & (code[0:7] == 0x7F))
        shift = Signal(4, name=f"shift_{lane}")            # max(e, 1) - 1
        m.d.comb += shift.eq(Mux(hidden, exponent - 1, 0))
        mantissa = Signal(signed(6), name=f"mant_{lane}")  # sign + 5-bit significand
        m.d.comb += mantissa.eq(Mux(negative, -m5, m5))

        w = Signal(signed(6), name=f"w_{lane}")
        magnitudes = Array(Const(v, 4) for v in BITMOD_HALF_UNITS)
        special = Array(Const(v, signed(6)) for v in BITMOD_SPECIAL)
        bitmod = Signal(signed(6), name=f"bitmod_{lane}")
        magnitude = Signal(4, name=f"bitmod_mag_{lane}")
        m.d.comb += magnitude.eq(magnitudes[wgt[0:3]])
        with m.If(wgt == 0b1000):
            m.d.comb += bitmod.eq(special[p.sv_sel])
        with m.Elif(wgt[3]):
            m.d.comb += bitmod.eq(-magnitude)
        with m.Else():
            m.d.comb += bitmod.eq(magnitude)
        int4 = Signal(signed(6), name=f"int4_{lane}")                 # q - zp, -15..15
        m.d.comb += int4.eq(Cat(wgt, 0).as_signed() - Cat(p.zp, 0).as_signed())
        m.d.comb += w.eq(Mux(p.wgt_fmt, int4, bitmod))

        product = Signal(signed(PRODUCT_BITS), name=f"prod_{lane}")
        m.d.comb += product.eq(mantissa * w)
        term = Signal(signed(SUM_BITS), name=f"term_{lane}")
        m.d.comb += term.eq(Mux(nan, 0, product << shift))
        return term, nan
