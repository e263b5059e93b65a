"""P3-LLM processing element: 4-way FP8 x INT4/BitMoD dot product (P3-LLM V-C; contract section 5)."""

from amaranth.hdl import Cat, Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.compressor import Compressor42
from ..common.lanes import split_lanes
from .datapath import (ACC_BITS, BITMOD_HALF_UNITS, BITMOD_SPECIAL, SUM_BITS, TERM_BITS, WAYS,
                          accumulate, booth_digits, booth_product, decode_activation,
                          decode_weight)
from ..common.stream_stage import StallPipeline, check_pipeline

__all__ = ["P3Pe", "BITMOD_HALF_UNITS", "BITMOD_SPECIAL", "PIPELINE_CUTS"]

#: The register cuts that ``pipeline`` = 1, 2, 3, 4 adds, in this order, to the two stages of
#: ``pipeline`` = 0 (see :class:`P3Pe`).
PIPELINE_CUTS = ("multiply", "decode", "shift", "accumulate")


class P3Pe(wiring.Component):
    """One P3-LLM PE: a 4-way FP8 x 4-bit dot product into a 32-bit fixed-point accumulator.

    P3-LLM's PCU (section V-C, Fig. 6(c)) has 16 such PEs sharing their activations. Each PE
    multiplies the signed 5-bit activation significand by the decoded weight in a 6-bit signed
    multiplier, shifts the product by the activation's exponent, reduces the four shifted
    products with a 4:2 compressor tree and accumulates in 32-bit fixed point. There is no
    floating-point adder and no accumulator alignment. Per contract section 5:

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
    exponent; the four terms enter a :class:`~hdl.common.compressor.Compressor42`; a 3:2 carry-save
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
    advance together (:class:`~hdl.common.stream_stage.StallPipeline`): while ``o`` holds an
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
            magnitude, negative, shift, nan = decode_activation(m, acts[lane], p.act_fmt,
                                                                suffix=lane)
            weight = decode_weight(m, wgts[lane], negative, p.wgt_fmt, p.sv_sel, p.zp,
                                   suffix=lane)
            values.update({f"mag_{lane}": magnitude, f"w_{lane}": weight,
                           f"shift_{lane}": shift})
            nans.append(nan)
        beat_nan = Signal(name="beat_nan")
        m.d.comb += beat_nan.eq(Cat(*nans).any())
        values.update(nan=beat_nan, first=p.first)
        values = cut("decode", values, "dec")

        # --- 6-bit signed multipliers ---------------------------------------------------------
        for lane in range(WAYS):
            values[f"prod_{lane}"] = booth_product(m, booth_digits(values.pop(f"mag_{lane}")),
                                                   values.pop(f"w_{lane}"), suffix=lane)
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

        [(acc, overflow)], flags, _ = accumulate(
            m, pipe, first=values["first"], pairs=[(values["sum"], values["carry"])],
            flags={"nan": values["nan"]}, slot=None, slots=1, split="accumulate" in self.cuts)
        m.d.comb += [
            self.o.payload.acc.eq(acc),
            self.o.payload.overflow.eq(overflow),
            self.o.payload.nan.eq(flags["nan"]),
        ]
        return m
