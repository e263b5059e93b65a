"""P3-LLM processing element: 4-way FP8 x INT4/BitMoD dot product (P3-LLM V-C; SPEC section 5)."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .compressor import Compressor42
from .lanes import split_lanes
from .stream_stage import StallPipeline, check_pipeline

__all__ = ["P3Pe", "BITMOD_HALF_UNITS", "BITMOD_SPECIAL", "PIPELINE_CUTS"]

WAYS = 4
ACC_BITS = 32
#: BitMoD FP4 magnitudes in half units, by the code's bits [2:0] (0, 0.5, 1, 1.5, 2, 3, 4, 6).
BITMOD_HALF_UNITS = (0, 1, 2, 3, 4, 6, 8, 12)
#: BitMoD special values replacing negative zero, in half units, by ``sv_sel`` (+5 -5 +8 -8).
BITMOD_SPECIAL = (10, -10, 16, -16)
MAGNITUDE_BITS = 5         # M5, the activation significand with its hidden bit
WEIGHT_BITS = 6            # (-1)^s * w: -16..16
PRODUCT_BITS = 10          # |M5 * w| <= 31 * 16 = 496 < 2^9
TERM_BITS = PRODUCT_BITS + 14   # shifted left by up to max(e, 1) - 1 = 14
SUM_BITS = ACC_BITS + 1    # acc + four terms, exact: |acc| < 2^31, |terms| < 2^23 each
#: The register cuts that ``pipeline`` = 1, 2, 3, 4 adds, in this order, to the two stages of
#: ``pipeline`` = 0 (see :class:`P3Pe`).
PIPELINE_CUTS = ("multiply", "decode", "shift", "accumulate")


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

    Datapath, per way: the decoder gives ``M5`` (0 for NaN), the shift ``max(e, 1) - 1`` and
    the weight with the activation's sign applied, ``(-1)^s * w`` (a table for BitMoD, one
    5-bit subtraction ``q - zp`` or ``zp - q`` for INT4: no negation). The multiplier is the
    paper's 6-bit signed product, built in LUTs as radix-4 Booth over ``M5``: three partial
    products ``{0, +-1, +-2} x (-1)^s w`` summed by one adder. The product is shifted by the
    exponent; the four terms enter a :class:`~hdl.compressor.Compressor42`; a 3:2 carry-save
    row adds the pair to the accumulator and one 33-bit carry-propagate adder resolves it.
    The multipliers are LUT logic at every depth: Yosys maps a ``*`` to an unregistered ECP5
    MULT18X18D, and register -> DSP -> register alone measured 7.3 ns (137 MHz); iCE40 timing is
    honest without SB_MAC16 (nextpnr does not time it); and a 16-PE PCU needs 64 multipliers.

    Pipeline (``pipeline`` = 0..4; each value adds one register cut to the previous one):

    * 0: the two stages the PE had before it took ``pipeline``. Stage 1 decodes, multiplies,
      shifts and compresses; stage 2 is the accumulator (3:2 row + adder), which drives ``o``.
      Latency 2.
    * 1: + a register after the multipliers. Latency 3.
    * 2: + a register after the decoders, before the multipliers. Latency 4.
    * 3: + a register after the exponent shifters, before the compressor. Latency 5. The
      default: closes 150 MHz on ECP5 (limited by the multiplier stage).
    * 4: + a split accumulator: 16-bit and 17-bit halves, the carry out of the low half is added
      to the high half with the next beat (one beat per cycle still), and a resolve stage adds
      the last pending carry and drives ``o``. Latency 6. Lifts the accumulator loop, which
      limits iCE40 at depth 3; ECP5 stays limited by the multipliers.

    The overflow test reads the registered 33-bit exact sum, off the adder's path: ``o``'s
    ``overflow`` is the sticky flag of the earlier beats ORed with the test of the last one.

    Parameters
    ----------
    pipeline : int
        Register cuts, 0..4 (see above). Default 3.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``act`` (4 x 8), ``wgt`` (4 x 4), ``act_fmt`` (1), ``wgt_fmt`` (1), ``sv_sel`` (2),
        ``zp`` (4), ``first`` (1), ``last`` (1).
    o : ``Out(stream.Signature(out_layout))``
        ``acc`` (32, signed), ``overflow`` (1), ``nan`` (1); one beat per ``last``.
    latency : int
        ``pipeline + 2``.

    Latency and throughput: the result of a ``last`` beat is valid ``latency`` cycles after the
    beat's transfer when ``o.ready`` is held high. One beat (4 MACs) per cycle. The stages
    advance together (:class:`~hdl.stream_stage.StallPipeline`): while ``o`` holds an
    unaccepted result, ``i.ready`` is low.

    Raises
    ------
    TypeError, ValueError
        If ``pipeline`` is not an integer in 0..4.
    """

    def __init__(self, *, pipeline=3):
        self.pipeline = check_pipeline(pipeline, max_value=len(PIPELINE_CUTS))
        self.cuts = frozenset(PIPELINE_CUTS[:self.pipeline])
        self.latency = 2 + self.pipeline
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
        pipe = StallPipeline(m, self.i, self.o, latency=self.latency, emit=p.last, name="pe")

        def cut(name, values, prefix):
            """Register ``values`` (a dict) at the cut ``name`` if this depth has it."""
            return {key: pipe.stage(value, name=f"{prefix}_{key}", enable=name in self.cuts)
                    for key, value in values.items()}

        # --- decode ---------------------------------------------------------------------------
        acts = split_lanes(m, p.act, 8, WAYS, name="act")
        wgts = split_lanes(m, p.wgt, 4, WAYS, name="wgt")
        values = {}
        nans = []
        for lane in range(WAYS):
            magnitude, weight, shift, nan = self._decode(m, lane, acts[lane], wgts[lane], p)
            values.update({f"mag_{lane}": magnitude, f"w_{lane}": weight,
                           f"shift_{lane}": shift})
            nans.append(nan)
        beat_nan = Signal(name="beat_nan")
        m.d.comb += beat_nan.eq(Cat(*nans).any())
        values.update(nan=beat_nan, first=p.first)
        values = cut("decode", values, "dec")

        # --- 6-bit signed multipliers ---------------------------------------------------------
        for lane in range(WAYS):
            values[f"prod_{lane}"] = self._multiply(m, lane, values.pop(f"mag_{lane}"),
                                                    values.pop(f"w_{lane}"))
        values = cut("multiply", values, "mul")

        # --- exponent shift -------------------------------------------------------------------
        for lane in range(WAYS):
            term = Signal(signed(TERM_BITS), name=f"term_{lane}")
            m.d.comb += term.eq(values.pop(f"prod_{lane}") << values.pop(f"shift_{lane}"))
            values[f"term_{lane}"] = term
        values = cut("shift", values, "sh")

        # --- 4:2 compressor (always followed by a register) -----------------------------------
        tree = m.submodules.compressor = Compressor42(SUM_BITS)
        m.d.comb += [
            tree.a.eq(values.pop("term_0")), tree.b.eq(values.pop("term_1")),
            tree.c.eq(values.pop("term_2")), tree.d.eq(values.pop("term_3")),
        ]
        values.update(sum=tree.sum, carry=tree.carry)
        values = {key: pipe.stage(value, name=f"cmp_{key}") for key, value in values.items()}

        self._accumulate(m, pipe, values)
        return m

    def _accumulate(self, m, pipe, values):
        """The accumulator: a 3:2 row over (pair, acc), then a carry-propagate adder.

        The output stage holds the 33-bit exact sum after the last beat (``acc`` is its low 32
        bits), the sticky overflow flag of the beats before it and the sticky NaN flag.
        """
        first, pair_sum, pair_carry = values["first"], values["sum"], values["carry"]
        split = "accumulate" in self.cuts
        exact_out = Signal(SUM_BITS, name="acc_exact")    # output stage: exact sum of the beat
        if split:
            # The running sum modulo 2^33, not wrapped at 32 bits, less the pending carry. It
            # equals the exact sum up to the first overflow; from there on the flag is sticky
            # and only the low 32 bits are read, which wrapping would not change.
            running = Signal(SUM_BITS, name="acc_running")
            base = Mux(first, 0, running)
        else:
            base = Mux(first, 0, exact_out[:ACC_BITS].as_signed())   # wrapped at 32 bits
        row_sum = Signal(SUM_BITS, name="row_sum")
        row_carry = Signal(SUM_BITS, name="row_carry")
        m.d.comb += [
            row_sum.eq(pair_sum ^ pair_carry ^ base),
            row_carry.eq(((pair_sum & pair_carry) | (pair_sum & base) | (pair_carry & base))
                         << 1),
        ]
        update = pipe.ce & pipe.beat[-2]      # a beat enters the output stage
        if split:
            # A 16-bit and a 17-bit adder; the carry out of the low half waits in ``pending``
            # and enters the high half with the next beat, as that adder's carry-in.
            low = SUM_BITS // 2
            pending = Signal(name="acc_pending")
            low_sum = Signal(low + 1, name="acc_low_sum")
            high_sum = Signal(SUM_BITS - low, name="acc_high_sum")
            m.d.comb += [
                low_sum.eq(row_sum[:low] + row_carry[:low]),
                # 1 + pending in an extra least significant position carries exactly pending.
                high_sum.eq((Cat(Const(1, 1), row_sum[low:])
                             + Cat(Mux(first, 0, pending), row_carry[low:]))[1:]),
            ]
            with m.If(pipe.ce & pipe.beat[-3]):
                m.d.sync += [running.eq(Cat(low_sum[:low], high_sum)), pending.eq(low_sum[low])]
            values = {key: pipe.stage(values[key], name=f"acc_{key}") for key in ("first", "nan")}
            first = values["first"]
            exact = Cat(running[:low], running[low:] + pending)
        else:
            exact = row_sum + row_carry
        overflow = Signal(name="overflow_before")    # sticky, beats before the output beat
        nan = Signal(name="nan_state")
        left_range = Signal()                        # output beat's exact sum outside int32
        top = exact_out[ACC_BITS - 1:]
        m.d.comb += left_range.eq(top.any() & ~top.all())
        with m.If(update):
            m.d.sync += [
                exact_out.eq(exact),
                overflow.eq(Mux(first, 0, overflow | left_range)),
                nan.eq(Mux(first, 0, nan) | values["nan"]),
            ]
        m.d.comb += [
            self.o.payload.acc.eq(exact_out[:ACC_BITS]),
            self.o.payload.overflow.eq(overflow | left_range),
            self.o.payload.nan.eq(nan),
        ]

    def _multiply(self, m, lane, magnitude, weight):
        """``magnitude * weight``: radix-4 Booth over the unsigned 5-bit ``magnitude``.

        Digits ``d_j = -2 b[2j+1] + b[2j] + b[2j-1]`` (``b[-1] = b[5] = 0``), so the top digit
        is never negative. Row ``j`` is ``|d_j| * weight`` inverted when ``d_j < 0``; the +1
        completing that negation sits in the free position ``2j`` of row ``j + 1``. One adder
        sums the three rows.
        """
        bits = Cat(Const(0, 1), magnitude, Const(0, 1))
        rows = []
        negative = []
        for j in range(3):
            triple = bits[2 * j:2 * j + 3]
            neg = triple[2] & ~(triple[0] & triple[1])
            one = triple[0] ^ triple[1]
            two = (triple == 0b011) | (triple == 0b100)
            select = Signal(signed(WEIGHT_BITS + 1), name=f"booth{j}_sel_{lane}")
            m.d.comb += select.eq(Mux(two, weight << 1, Mux(one, weight, 0)))
            row = Signal(signed(PRODUCT_BITS), name=f"booth{j}_{lane}")
            m.d.comb += row.eq(Mux(neg, ~select, select))
            if j:
                row = Cat(Const(0, 2 * j - 2), negative[-1], Const(0, 1),
                          row[:PRODUCT_BITS - 2 * j])
            rows.append(row)
            negative.append(neg)
        product = Signal(signed(PRODUCT_BITS), name=f"prod_{lane}")
        m.d.comb += product.eq(rows[0] + rows[1] + rows[2])
        return product

    def _decode(self, m, lane, code, wgt, p):
        """One way: ``M5`` (0 for NaN), ``(-1)^s * w``, the shift and the lane's NaN flag."""
        e4m3 = ~p.act_fmt
        exponent = Signal(4, name=f"exp_{lane}")
        m.d.comb += exponent.eq(Mux(e4m3, code[3:7], code[4:8]))
        hidden = exponent != 0
        m5 = Signal(MAGNITUDE_BITS, name=f"m5_{lane}")
        m.d.comb += m5.eq(Mux(e4m3, Cat(Const(0, 1), code[0:3], hidden),
                              Cat(code[0:4], hidden)))
        negative = e4m3 & code[7]
        nan = Signal(name=f"nan_{lane}")
        m.d.comb += nan.eq(e4m3 & (code[0:7] == 0x7F))
        shift = Signal(4, name=f"shift_{lane}")            # max(e, 1) - 1
        m.d.comb += shift.eq(Mux(hidden, exponent - 1, 0))
        magnitude = Signal(MAGNITUDE_BITS, name=f"mag_{lane}")
        m.d.comb += magnitude.eq(Mux(nan, 0, m5))

        # BitMoD: one table over (code, activation sign, sv_sel). The sign flips the code's
        # sign bit, and the special values come in +- pairs, so it flips sv_sel's bit 0.
        table = []
        for index in range(1 << 7):
            code4, sign, select = index & 15, (index >> 4) & 1, index >> 5
            if code4 == 0b1000:
                value = BITMOD_SPECIAL[select ^ sign]
            else:
                value = BITMOD_HALF_UNITS[code4 & 7] * (-1 if (code4 >> 3) ^ sign else 1)
            table.append(Const(value, signed(WEIGHT_BITS)))
        bitmod = Signal(signed(WEIGHT_BITS), name=f"bitmod_{lane}")
        m.d.comb += bitmod.eq(Array(table)[Cat(wgt, negative, p.sv_sel)])
        # INT4: q - zp, or zp - q for a negative activation, -15..15.
        minuend = Signal(5, name=f"int4_a_{lane}")
        subtrahend = Signal(5, name=f"int4_b_{lane}")
        m.d.comb += [
            minuend.eq(Mux(negative, p.zp, wgt)),
            subtrahend.eq(Mux(negative, wgt, p.zp)),
        ]
        int4 = Signal(signed(WEIGHT_BITS), name=f"int4_{lane}")
        m.d.comb += int4.eq(minuend.as_signed() - subtrahend.as_signed())
        weight = Signal(signed(WEIGHT_BITS), name=f"w_{lane}")
        m.d.comb += weight.eq(Mux(p.wgt_fmt, int4, bitmod))
        return magnitude, weight, shift, nan
