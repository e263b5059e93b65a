"""P3-LLM PIM compute unit: 16 PEs sharing one set of FP8 activations (P3-LLM V-C, V-D,
Fig. 6(c), Fig. 7; contract section 9)."""

from amaranth.hdl import Cat, Const, Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.compressor import Compressor42
from ..common.invariants import invariant
from ..common.lanes import split_lanes
from .datapath import (ACC_BITS, SUM_BITS, TERM_BITS, WAYS, accumulate, booth_digits,
                          booth_product, decode_activation, decode_weight)
from ..common.params import check_choice, check_int
from ..oaken.quantizer.parts import LutQueue
from ..common.stream_stage import StallPipeline, check_pipeline, distinct_copies

__all__ = ["P3Pcu", "DEFAULT_PIPELINE", "MAX_PES", "PIPELINE_CUTS"]

#: Every cut (docs/units/p3_pcu.md: 157.4 MHz at 16 PEs with one accumulator set, 162.7 with
#: two, on the ECP5-25F).
DEFAULT_PIPELINE = 8
MAX_PES = 64
#: PEs served by one registered copy of a shared value (the decoded activations and their
#: shifts, ``first``, ``slot``): one register would drive all 16 PEs. (The Booth digits have
#: one register per PE.)
PES_PER_COPY = 4
#: Keys (first word) of the values shared by every PE that are copied per group of PEs.
SHARED = ("mag", "neg", "wgtfmt", "shift", "first", "slot")
#: Optional register cuts, in the order ``pipeline`` turns them on: ``p3_pe``'s first three,
#: then ``broadcast`` (the decoded activations copied per group of PEs, and each PE's weight
#: fields, registered before the weight decoders), ``output`` (a never-stalling pipeline into
#: an output queue with credits, so that no clock enable reaches every stage), then
#: ``p3_pe``'s split accumulator, ``align`` (the exponent shift in two steps) and ``resolve``
#: (each PE's compressed pair added before the accumulator loop).
PIPELINE_CUTS = ("multiply", "decode", "shift", "broadcast", "output", "accumulate", "align",
                 "resolve")


class P3Pcu(wiring.Component):
    """P3-LLM's PCU: ``pes`` PEs (:class:`~hdl.p3.pe.P3Pe`'s datapath) computing a 1 x 4 x
    ``pes`` GEMV tile per beat: one set of four FP8 activations shared by every PE, and one
    256-bit column read of 4-bit weights (four per PE) at 16 PEs.

    P3-LLM section V-C, Fig. 6(c) right: "16 processing elements (PEs), which share the same
    set of FP8 activations", each a 4-way dot product (6-bit multipliers, exponent shift, 4:2
    compressor, 32-bit fixed-point accumulator), and section V-D, Fig. 7: the
    throughput-enhanced PCU reuses each weight column read for two activation sets, each with
    its own accumulators (``reuse`` 2). Every PE is bit-exact with contract section 5; the contract
    section 9 gives the interface.

    **What is shared** (measured against 16 separate PEs, docs/units/p3_pcu.md): the four
    activation decoders (exponent, ``M5``, shift, NaN) exist once, and the radix-4 Booth digits
    of each ``M5`` (the multiplier's recoding depends on the activation only) once per group of
    four PEs (computed from that group's registered copy of the decoded activations); the
    weight decoders (BitMoD table or INT4 ``q - zp``, with the activation's sign applied), the
    Booth rows, the shifts, the compressors and the accumulators are per PE. Registered values
    shared by the PEs are held in one copy per four PEs
    (:func:`~hdl.common.stream_stage.distinct_copies`), those read by every bit of a PE (the Booth
    digits, the accumulators' ``first`` and ``slot``) in one per PE. The NaN flag depends on
    the activations only, so one sticky flag per accumulator set serves every PE (``nan`` has
    ``pes`` equal bits).

    **Slots.** With ``reuse`` 2 every PE has two accumulator sets; a beat's ``slot`` picks the
    set it updates (its ``first`` clears that set, its ``last`` emits it). The paper's pattern
    is slot 0 / slot 1 pairs sharing one column read (``wgt``, ``sv_sel``, ``zp``, formats),
    but any sequence of slots is accepted and computed as contract 9 says: per slot and PE, the
    beats of that slot form one ``p3_pe`` stream. Results leave in the order of the ``last``
    beats with their ``slot``. One beat per cycle in both modes: the paper's 2x clock for the
    throughput-enhanced mode is this unit's clock; ``reuse`` 2 halves the column reads per MAC.

    Parameters
    ----------
    pes : int
        PEs, 1..64 (default 16: 64 multipliers, a 256-bit column of 4-bit weights).
    reuse : int
        Accumulator sets per PE, 1 or 2 (default 1).
    pipeline : int
        Register cuts, 0..8 (default 8), in the order of :data:`PIPELINE_CUTS`: ``multiply``,
        ``decode``, ``shift`` (as :class:`~hdl.p3.pe.P3Pe`'s), ``broadcast`` (the decoded
        activations, in one copy per four PEs, and each PE's weight fields registered before
        the weight decoders: without it the activations' sign reaches all 64 weight decoders
        from one register, 105.8 MHz on ECP5), ``output`` (the stages never stall: results
        leave through a 16-entry LUT-RAM queue and ``i.ready`` is a flip-flop, room in it for
        every result accepted and not read; without it every stage's register has a clock
        enable from ``o.ready``), ``accumulate`` (``p3_pe``'s split accumulator), ``align``
        (the exponent shift in two steps: by ``4 * shift[2:4]``, a register, by
        ``shift[0:2]``), ``resolve`` (the compressor's sum and carry added and registered: the
        accumulator loop is then the set selection and the adder, without the 3:2 row).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``act`` (4 x 8), ``wgt`` (pes x 4 x 4, PE-major), ``act_fmt`` (1), ``wgt_fmt`` (1),
        ``sv_sel`` (pes x 2), ``zp`` (pes x 4), ``first``, ``last``, ``slot``
        (``ceil(log2 reuse)`` bits: at ``reuse`` 1 the field does not exist).
    o : ``Out(stream.Signature(out_layout))``
        ``acc`` (pes x 32 signed), ``overflow`` (pes), ``nan`` (pes), ``slot`` (``reuse`` 2);
        one beat per ``last``.
    latency : int
        ``pipeline + 2`` cycles from a ``last`` beat's transfer to its result (``o.ready``
        high): 10 at the default. One beat (4 x ``pes`` MACs) per cycle; the stages advance together
        (:class:`~hdl.common.stream_stage.StallPipeline`).

    Raises
    ------
    TypeError, ValueError
        If a parameter is not an integer or out of range (the message names it).
    """

    def __init__(self, *, pes=16, reuse=1, pipeline=DEFAULT_PIPELINE):
        self.pes = check_int("pes", pes, min_value=1, max_value=MAX_PES)
        self.reuse = check_choice("reuse", check_int("reuse", reuse, min_value=1, max_value=2),
                                  (1, 2))
        self.pipeline = check_pipeline(pipeline, max_value=len(PIPELINE_CUTS))
        self.cuts = frozenset(PIPELINE_CUTS[:self.pipeline])
        self.latency = 2 + self.pipeline
        #: Results the output queue holds (cut ``output``): every result accepted and not yet
        #: read, so one result per cycle needs more than ``latency`` of them.
        self.queue_depth = 16
        self.slot_bits = (self.reuse - 1).bit_length()
        P = self.pes
        self.in_layout = data.StructLayout({
            "act": data.ArrayLayout(unsigned(8), WAYS),
            "wgt": data.ArrayLayout(data.ArrayLayout(unsigned(4), WAYS), P),
            "act_fmt": unsigned(1),
            "wgt_fmt": unsigned(1),
            "sv_sel": data.ArrayLayout(unsigned(2), P),
            "zp": data.ArrayLayout(unsigned(4), P),
            "first": unsigned(1),
            "last": unsigned(1),
            **({"slot": unsigned(self.slot_bits)} if self.reuse > 1 else {}),
        })
        self.out_layout = data.StructLayout({
            "acc": data.ArrayLayout(signed(ACC_BITS), P),
            "overflow": data.ArrayLayout(unsigned(1), P),
            "nan": data.ArrayLayout(unsigned(1), P),
            **({"slot": unsigned(self.slot_bits)} if self.reuse > 1 else {}),
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        P = self.pes
        p = self.i.payload
        # Cut "output": the stages never stall. The results leave through a LUT-RAM queue,
        # and i.ready is a flip-flop: room in the queue for every result accepted and not yet
        # read (credits). A clock enable of every stage (thousands of flip-flops) measured
        # 120.1 MHz on ECP5 from o.ready, 114.0 behind a two-entry buffer: its fan-out alone
        # takes 4 to 6 ns of routing.
        if "output" in self.cuts:
            pipe_in = stream.Signature(self.in_layout).create(path=("pcu_in",))
            out = stream.Signature(self.out_layout).create(path=("pcu_out",))
            m.submodules.out_queue = queue = LutQueue(width=self.out_layout.size,
                                                      depth=self.queue_depth, track=True)
            credit = Signal(range(self.queue_depth + 1), name="out_credit")
            ready = Signal(name="i_ready", init=1)
            taken = self.i.valid & ready & p.last
            sent = self.o.valid & self.o.ready
            m.d.sync += [credit.eq(credit + taken - sent),
                         ready.eq(credit + taken - sent < self.queue_depth)]
            m.d.comb += [
                self.i.ready.eq(ready),
                pipe_in.valid.eq(self.i.valid & ready), pipe_in.payload.eq(p),
                out.ready.eq(1),
                queue.w_en.eq(out.valid), queue.w_data.eq(out.payload),
                self.o.valid.eq(queue.valid), self.o.payload.eq(queue.r_data),
                queue.r_en.eq(sent),
            ]
        else:
            pipe_in, out = self.i, self.o
        pipe = StallPipeline(m, pipe_in, out, latency=self.latency - ("output" in self.cuts),
                             emit=p.last, name="pcu")
        if "output" in self.cuts:
            # Every credit is a result in the (never stalling) pipeline or in the queue.
            in_flight = sum(pipe.valid)
            invariant(m, platform, credit <= self.queue_depth,
                      credit == queue.level + in_flight, ready == (credit < self.queue_depth))

        groups = -(-P // PES_PER_COPY)

        def cut(enabled, values, prefix):
            """Register ``values`` (a dict of values and lists) if ``enabled``. A shared value
            (key in ``SHARED``, a single value until its first register) becomes ``groups``
            distinct copies there, copy ``g`` serving PEs ``4g .. 4g + 3``."""
            def stage(value, key):
                return pipe.stage(value, name=f"{prefix}_{key}", enable=enabled)
            out = {}
            for key, value in values.items():
                if enabled and key.split("_")[0] in SHARED and not isinstance(value, list):
                    out[key] = distinct_copies(m, value, groups, name=f"{prefix}_{key}",
                                               enable=pipe.ce)
                elif isinstance(value, list):
                    out[key] = [stage(v, f"{key}_{k}") for k, v in enumerate(value)]
                else:
                    out[key] = stage(value, key)
            return out

        def per_pe(value, name):
            """A shared value (one, or one copy per group of PEs) registered once per PE: copy
            ``g``'s four PEs each get a distinct register of it. For the values read by every
            bit of a PE's logic (Booth digits, the accumulators' ``first`` and ``slot``): from
            one register per four PEs their routes alone measured 2.2 to 3 ns on ECP5."""
            sources = value if isinstance(value, list) else [value] * groups
            return [copy for g, source in enumerate(sources)
                    for copy in distinct_copies(m, source, min(PES_PER_COPY, P - g * PES_PER_COPY),
                                                name=f"{name}_{g}", enable=pipe.ce)]

        def of_pe(value, pe):
            """A shared value as PE ``pe`` sees it (its group's copy once copied)."""
            return value[pe // PES_PER_COPY] if isinstance(value, list) else value

        # --- shared: the activations' decoders ------------------------------------------------
        acts = split_lanes(m, p.act, 8, WAYS, name="act")
        # (no slot at reuse 1: a 0-bit field, no signals for it)
        shared = {"first": p.first, "wgtfmt": p.wgt_fmt,
                  **({"slot": p.slot} if self.reuse > 1 else {})}
        nans = []
        for way in range(WAYS):
            magnitude, negative, shift, nan = decode_activation(m, acts[way], p.act_fmt,
                                                                suffix=way)
            shared.update({f"mag_{way}": magnitude, f"neg_{way}": negative,
                           f"shift_{way}": shift})
            nans.append(nan)
        beat_nan = Signal(name="beat_nan")
        m.d.comb += beat_nan.eq(Cat(*nans).any())
        shared["nan"] = beat_nan
        # Cut "broadcast": the decoded activations in one copy per group of PEs, beside each
        # PE's weight fields, so that no register drives all 16 PEs' decoders.
        values = cut("broadcast" in self.cuts, {
            **shared, "wgt": [p.wgt[pe] for pe in range(P)],
            "sv": [p.sv_sel[pe] for pe in range(P)], "zp": [p.zp[pe] for pe in range(P)]},
            "bc")

        # --- per PE: the weight decoders (with the activation's sign); Booth digits -----------
        weights = {way: [] for way in range(WAYS)}
        wgts, svs, zps = values.pop("wgt"), values.pop("sv"), values.pop("zp")
        wgt_fmt = values.pop("wgtfmt")
        for pe in range(P):
            codes = split_lanes(m, wgts[pe], 4, WAYS, name=f"wgt_{pe}")
            for way in range(WAYS):
                weights[way].append(decode_weight(
                    m, codes[way], of_pe(values[f"neg_{way}"], pe), of_pe(wgt_fmt, pe),
                    svs[pe], zps[pe], suffix=f"{pe}_{way}", both_differences=True))
        for way in range(WAYS):
            del values[f"neg_{way}"]
            # The multiplier's recoding depends on the activation only: once (per copy).
            magnitudes = values.pop(f"mag_{way}")
            digits = []
            for g, magnitude in enumerate(magnitudes if isinstance(magnitudes, list)
                                          else [magnitudes]):
                bits = Signal(9, name=f"booth_digits_{way}" + (f"_{g}" if g else ""))
                m.d.comb += bits.eq(Cat(*(bit for digit in booth_digits(magnitude)
                                          for bit in digit)))
                digits.append(bits)
            values[f"digits_{way}"] = digits if isinstance(magnitudes, list) else digits[0]
            values[f"w_{way}"] = weights[way]
        # Cut "decode" holds the Booth digits once per PE (with one register per group of
        # four PEs: 149.8 MHz on ECP5, 2.2 ns of its 6.7 ns the route to a PE's Booth rows).
        pe_digits = ({way: per_pe(values.pop(f"digits_{way}"), f"dec_digits_{way}")
                      for way in range(WAYS)} if "decode" in self.cuts else {})
        values = cut("decode" in self.cuts, values, "dec")

        # --- per PE: multipliers (the Booth rows of the shared digits) ------------------------
        for way in range(WAYS):
            if way in pe_digits:
                digits_of_pe = pe_digits[way]
            else:
                shared_digits = values.pop(f"digits_{way}")
                digits_of_pe = [of_pe(shared_digits, pe) for pe in range(P)]
            products = []
            for pe, weight in enumerate(values.pop(f"w_{way}")):
                bits = digits_of_pe[pe]
                digits = [(bits[3 * j], bits[3 * j + 1], bits[3 * j + 2]) for j in range(3)]
                products.append(booth_product(m, digits, weight, suffix=f"{pe}_{way}"))
            values[f"prod_{way}"] = products
        values = cut("multiply" in self.cuts, values, "mul")

        # --- per PE: exponent shifts (shared amounts) -----------------------------------------
        # In two steps: by 4 x shift[2:4] (0, 4, 8, 12), then by shift[0:2] (0..3); cut
        # "align" registers between them (the shifter in one stage is four LUT levels: 148.2
        # MHz with two accumulator sets, a product's route to it 2.4 ns).
        for way in range(WAYS):
            shift = values.pop(f"shift_{way}")
            coarse = []
            for pe, product in enumerate(values.pop(f"prod_{way}")):
                shifted = Signal(signed(TERM_BITS - 2), name=f"coarse_{pe}_{way}")
                m.d.comb += shifted.eq(product << Cat(Const(0, 2), of_pe(shift, pe)[2:4]))
                coarse.append(shifted)
            values[f"coarse_{way}"] = coarse
            values[f"fine_{way}"] = ([copy[0:2] for copy in shift] if isinstance(shift, list)
                                     else shift[0:2])
        values = cut("align" in self.cuts, values, "al")
        for way in range(WAYS):
            fine = values.pop(f"fine_{way}")
            terms = []
            for pe, coarse in enumerate(values.pop(f"coarse_{way}")):
                term = Signal(signed(TERM_BITS), name=f"term_{pe}_{way}")
                m.d.comb += term.eq(coarse << of_pe(fine, pe))
                terms.append(term)
            values[f"term_{way}"] = terms
        values = cut("shift" in self.cuts, values, "sh")

        # --- per PE: 4:2 compressor (always followed by a register) ---------------------------
        sums, carries = [], []
        for pe in range(P):
            tree = m.submodules[f"compressor_{pe}"] = Compressor42(SUM_BITS)
            m.d.comb += [
                tree.a.eq(values["term_0"][pe]), tree.b.eq(values["term_1"][pe]),
                tree.c.eq(values["term_2"][pe]), tree.d.eq(values["term_3"][pe]),
            ]
            sums.append(tree.sum)
            carries.append(tree.carry)
        # The accumulators' first and slot (in the loop of every accumulator bit): one
        # register per PE (one per four PEs: 129.3 MHz with two sets, 3 ns of routing).
        control = {key: per_pe(values.pop(key), f"cmp_{key}")
                   for key in ("first", "slot") if key in values}
        values = cut(True, {"nan": values["nan"], "sum": sums, "carry": carries}, "cmp")
        # Cut "resolve": the compressor's pair added and registered, so that the accumulator
        # loop is the set selection and the adder (with the 3:2 row over the pair and the
        # set in the loop: 145.3 MHz with two sets).
        if "resolve" in self.cuts:
            beat_sums = [Signal(SUM_BITS, name=f"beat_sum_{pe}") for pe in range(P)]
            m.d.comb += [total.eq(pair_sum + pair_carry) for total, pair_sum, pair_carry
                         in zip(beat_sums, values["sum"], values["carry"])]
            values = {**cut(True, {"nan": values["nan"], "sum": beat_sums}, "res"),
                      "carry": [None] * P}
            control = {key: [pipe.stage(copy, name=f"res_{key}_{pe}")
                             for pe, copy in enumerate(copies)]
                       for key, copies in control.items()}

        # --- per PE: accumulators, one set per slot -------------------------------------------
        lanes, flags, out_slot = accumulate(
            m, pipe, first=control["first"],
            pairs=list(zip(values["sum"], values["carry"])), flags={"nan": values["nan"]},
            slot=control.get("slot"),
            slots=self.reuse,
            split="accumulate" in self.cuts)
        m.d.comb += [
            out.payload.acc.eq(Cat(*(acc for acc, _ in lanes))),
            out.payload.overflow.eq(Cat(*(overflow for _, overflow in lanes))),
            out.payload.nan.eq(Cat(*([flags["nan"]] * P))),
            *([out.payload.slot.eq(out_slot)] if self.reuse > 1 else []),
        ]
        return m
