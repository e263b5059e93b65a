"""KLLM Index Distribution Counter (KLLM section IV-B, SPEC section 2)."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import adder_tree_cut, one_hot_from_lines, predecode
from .params import check_choice, check_int
from .stream_stage import SkidBuffer, StallPipeline, check_pipeline

__all__ = ["KllmIdxCounter", "counter_bits"]

#: Register cuts of each ``pipeline`` value (see :class:`KllmIdxCounter`).
PIPELINE_CUTS = {
    0: (),
    1: ("accumulate", "readout"),
    2: ("accumulate", "readout", "partial"),
    3: ("accumulate", "readout", "partial", "decode"),
}
MAX_PIPELINE = max(PIPELINE_CUTS)
#: The depth that closes timing (>= 150 MHz on ECP5-25F at ``kllm-w3a3``; Timing section of
#: docs/units/kllm_idx_counter.md).
DEFAULT_PIPELINE = 3

#: Widest bin counter the unit builds (the ``count`` field of the output stream).
MAX_COUNT_BITS = 32


def counter_bits(max_len, mode, weight_bits):
    """Bits a bin counter needs so that no reduction of up to ``max_len`` counted indices
    overflows.

    ``kk``: unsigned, holds ``0 .. max_len``. ``ik``: two's complement, holds
    ``max_len * -2**(weight_bits-1) .. max_len * (2**(weight_bits-1) - 1)``.
    """
    if mode == "kk":
        return max(1, max_len.bit_length())
    most_negative = max_len << (weight_bits - 1)       # magnitude of the lowest sum
    most_positive = max_len * ((1 << (weight_bits - 1)) - 1)
    bits = 1
    while -(1 << (bits - 1)) > -most_negative or (1 << (bits - 1)) - 1 < most_positive:
        bits += 1
    return bits


class KllmIdxCounter(wiring.Component):
    """Index Distribution Counter: the histogram of a stream of indices, read out bin by bin.

    KLLM's index-based MatMul reduces a column of K concatenated indices to the frequency of
    each of the ``2**idx_bits`` possible indices (section III-B, step 2), which then weights the
    offline codebook. The counter decodes ``n_inputs`` indices per beat into one-hot vectors and
    adds them per bin with bit counters (BTCs) into per-bin accumulators (section IV-B). In
    Integer x K-Means mode (section III-B2, Fig. 3(b)) each index adds its signed integer weight
    ("+n" counting) instead of 1.

    Reading of the paper adopted here (SPEC section 2): the histogram of one reduction is
    everything from the first beat after a ``last`` (or after reset) up to and including the
    next beat with ``last``. Lanes whose ``mask`` bit is 0 (outliers, padding) count nothing.
    After the ``last`` beat the histogram is copied to a readout bank and sent as ``2**idx_bits``
    beats in bin order; the next reduction accumulates meanwhile. Only a following ``last`` beat
    waits, if the readout bank is still busy.

    Parameters
    ----------
    n_inputs : int
        Indices per beat, 1..64 (default 16, the paper's 16-input design).
    idx_bits : int
        Index width, 1..10 (default 8 = n_A + n_B); ``2**idx_bits`` bins held in flip-flops.
    mode : str
        ``"kk"`` (K-Means x K-Means: +1 per index) or ``"ik"`` (Integer x K-Means: + weight).
    weight_bits : int or None
        Width of the signed integer weights in ``ik`` mode, 2..8 (default 4). Must be ``None``
        in ``kk`` mode, which has no weights.
    max_len : int
        Longest reduction (counted indices) that must not overflow, >= 1 (default 4096). The
        counter width is derived from it (:func:`counter_bits`); more than
        ``MAX_COUNT_BITS`` bits is refused.
    pipeline : int
        Register cuts, 0..3 (default 3, the depth that closes timing at 150 MHz on ECP5):

        * 0: today's lowest-latency circuit. The input register holds the beat; decode, bit
          counters and the accumulator adders are one combinational path into the
          accumulators, which load the readout bank on a ``last`` beat; a
          ``2**idx_bits``:1 multiplexer addressed by a counter drives ``o``. Latency 2.
        * 1: plus a register per bin before the accumulator (the beat's contribution), so the
          accumulator recurrence is one adder; the `last` beat clears the accumulators instead
          of a ``fresh`` multiplexer in front of the adders. The readout bank becomes a shift
          register read at bin 0 (no wide multiplexer) behind a
          :class:`~hdl.stream_stage.SkidBuffer` (registered ready and output), and
          the bank's free/load/enable decisions are flip-flops computed one cycle ahead.
          Latency 4.
        * 2: plus a register after the 4-lane partial sums of every bin's bit counter (adder
          tree). Latency 5.
        * 3: the input register holds the predecoded index (one-hot lines of each 4-bit chunk,
          the mask ANDed in) instead of the raw index: one LUT before the input register, the
          decode off the bit-counter path. Latency 5, as for 2.

        Every front stage loads at one clock enable (:class:`~hdl.stream_stage.StallPipeline`),
        which holds only while a `last` beat waits for the readout bank.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Fields ``idx`` (n_inputs x idx_bits), ``weight`` (n_inputs x signed weight_bits, ``ik``
        only), ``mask`` (n_inputs bits, bit j for lane j), ``last`` (1).
    o : ``Out(stream.Signature(out_layout))``
        Fields ``count`` (``count_bits``, unsigned in ``kk``, signed in ``ik``) and ``last``
        (on bin ``2**idx_bits - 1``).
    latency : int
        Cycles from the transfer of a ``last`` beat on ``i`` to the first bin of its histogram
        being valid on ``o``, with ``o.ready`` high and the readout bank free: 2, 4, 5, 5 for
        ``pipeline`` 0..3.

    Latency and throughput: one beat (``n_inputs`` indices) per cycle at every depth. The first
    bin leaves ``latency`` cycles after the ``last`` beat is accepted; the readout takes
    ``2**idx_bits`` cycles and overlaps the next reduction, so reductions of at least
    ``2**idx_bits`` beats stream with no stall, and shorter ones keep the readout busy
    (histograms back to back, one bin per cycle). Counts beyond ``max_len`` wrap modulo
    ``2**count_bits`` (two's complement in ``ik``). ``i.ready`` is combinational in
    ``o.ready`` at ``pipeline=0``; from 1 on it is combinational in flip-flops of the unit only.

    Raises
    ------
    TypeError, ValueError
        For a parameter of the wrong type, out of range, or an impossible combination.
    """

    def __init__(self, *, n_inputs=16, idx_bits=8, mode="kk", weight_bits=None, max_len=4096,
                 pipeline=DEFAULT_PIPELINE):
        self.n_inputs = check_int("n_inputs", n_inputs, min_value=1, max_value=64)
        self.idx_bits = check_int("idx_bits", idx_bits, min_value=1, max_value=10)
        self.mode = check_choice("mode", mode, ("kk", "ik"))
        if self.mode == "kk":
            if weight_bits is not None:
                raise ValueError(f"weight_bits applies to mode 'ik' only; mode 'kk' counts +1 "
                                 f"per index (got weight_bits={weight_bits!r})")
            self.weight_bits = None
        else:
            self.weight_bits = check_int("weight_bits", 4 if weight_bits is None else weight_bits,
                                         min_value=2, max_value=8)
        self.max_len = check_int("max_len", max_len, min_value=1)
        self.count_bits = counter_bits(self.max_len, self.mode, self.weight_bits)
        if self.count_bits > MAX_COUNT_BITS:
            raise ValueError(
                f"max_len={self.max_len} needs a {self.count_bits}-bit counter in mode "
                f"{self.mode!r}, more than the {MAX_COUNT_BITS} bits of the count field")
        self.bins = 1 << self.idx_bits
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.cuts = PIPELINE_CUTS[self.pipeline]
        self.front_stages = 1 + sum(cut in self.cuts for cut in ("partial", "accumulate"))
        #: Cycles from the transfer of a ``last`` beat on ``i`` to the first bin of its
        #: histogram being valid on ``o`` (with ``o.ready`` high and the readout bank free).
        self.latency = self.front_stages + 1 + ("readout" in self.cuts)

        fields = {"idx": data.ArrayLayout(unsigned(self.idx_bits), self.n_inputs)}
        if self.mode == "ik":
            fields["weight"] = data.ArrayLayout(signed(self.weight_bits), self.n_inputs)
        fields["mask"] = unsigned(self.n_inputs)
        fields["last"] = unsigned(1)
        self.in_layout = data.StructLayout(fields)
        count_shape = (signed if self.mode == "ik" else unsigned)(self.count_bits)
        self.out_layout = data.StructLayout({"count": count_shape, "last": unsigned(1)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        cuts = self.cuts
        lane_depth = (self.n_inputs - 1).bit_length()     # adder levels of the 16-lane tree

        # Front pipeline: input beat -> per-bin contributions of the beat, every stage at one
        # clock enable. Its output `contrib` is an internal stream (its payload is unused) that
        # carries the `last` beats only (`emit`): `contrib.valid` says "the beat at the
        # accumulators ends a reduction", and it waits there (stalling the front, and `i`) until
        # the readout bank is free. Every other beat, and every bubble, is added to the
        # accumulators as it passes: bubbles carry an all-zero mask, so they add nothing.
        contrib = stream.Signature(unsigned(1)).create(path=("contrib",))
        front = StallPipeline(m, self.i, contrib, latency=self.front_stages,
                              emit=self.i.payload.last, name="front")
        # Bubbles (i.valid low) enter with an all-zero mask.
        mask = Mux(self.i.valid, self.i.payload.mask, 0)

        # One-hot decode, predecoded in 4-bit chunks; the mask is ANDed into the lines of the
        # smallest chunk (fewest gates), so a masked lane selects no bin. The input register
        # (stage 0) holds the raw beat, or with the decode cut the predecoded lines.
        def predecoded(idx, mask):
            lines = []
            for lane in range(self.n_inputs):
                chunks = predecode(idx[lane])
                smallest = min(range(len(chunks)), key=lambda c: len(chunks[c]))
                chunks[smallest] = [line & mask[lane] for line in chunks[smallest]]
                lines.append(chunks)
            return lines

        weights = self.i.payload.weight if self.mode == "ik" else None
        if "decode" in cuts:
            lines = [[[front.stage(line, name=f"line_{lane}_{c}_{k}") for k, line in
                       enumerate(chunk)] for c, chunk in enumerate(chunks)]
                     for lane, chunks in enumerate(predecoded(self.i.payload.idx, mask))]
        else:
            idx = front.stage(self.i.payload.idx, name="beat_idx")
            lines = predecoded(idx, front.stage(mask, name="beat_mask"))
        if weights is not None:
            weights = front.stage(weights, name="beat_weight")
        selected = [[] for _ in range(self.bins)]            # selected[bin][lane]
        for lane_lines in lines:
            for bin_, line in enumerate(one_hot_from_lines(lane_lines)):
                selected[bin_].append(line)

        # Per bin: the bit counter (kk) or the adder tree of the selected weights (ik), cut
        # after the 4-lane partial sums when asked.
        tree_cuts = {min(2, lane_depth)} if "partial" in cuts else set()
        contributions = []
        for bin_, lanes in enumerate(selected):
            if self.mode == "kk":
                operands = [Cat(sel) for sel in lanes]
            else:
                operands = [Mux(sel, weights[lane], 0) for lane, sel in enumerate(lanes)]
            total = adder_tree_cut(operands, cut_after=tree_cuts, register=front.stage)
            contributions.append(front.stage(total, name=f"contribution_{bin_}",
                                             enable="accumulate" in cuts))

        # Accumulators and readout bank: the front advances (clock enable `front.ce`) unless a
        # `last` beat waits at its end for the readout bank (`contrib.ready` low).
        if "readout" in cuts:
            source = stream.Signature(self.out_layout).create(path=("readout",))
            m.submodules.readout_buffer = buffer = SkidBuffer(self.out_layout)
            wiring.connect(m, source, buffer.i)
            wiring.connect(m, buffer.o, wiring.flipped(self.o))
            self._pipelined_banks(m, front, contrib, contributions, source)
        else:
            self._direct_banks(m, front, contrib, contributions, self.o)
        return m

    def _direct_banks(self, m, front, contrib, contributions, source):
        """Accumulate and read out without cuts (``pipeline=0``, the lowest latency).

        ``sum = (fresh ? 0 : acc) + contribution`` loads the accumulators at every front clock
        enable and, at the end of a reduction, the readout bank; a ``2**idx_bits``:1
        multiplexer addressed by ``pointer`` drives ``o``. The bank is free when it is idle or
        its final bin leaves in this cycle.
        """
        count_shape = self.out_layout["count"].shape
        acc = [Signal(count_shape, name=f"acc_{b}") for b in range(self.bins)]
        readout = Array(Signal(count_shape, name=f"readout_{b}", reset_less=True)
                        for b in range(self.bins))
        fresh = Signal(init=1)        # acc holds nothing of the current reduction yet
        busy = Signal()               # the readout bank holds a histogram not yet sent
        pointer = Signal(self.idx_bits)
        at_last_bin = Signal()
        final_beat = Signal()
        m.d.comb += [
            at_last_bin.eq(pointer == self.bins - 1),
            final_beat.eq(source.valid & source.ready & at_last_bin),
            contrib.ready.eq(~busy | final_beat),
            source.valid.eq(busy),
            source.payload.count.eq(readout[pointer]),
            source.payload.last.eq(at_last_bin),
        ]
        end_of_reduction = contrib.valid & contrib.ready

        # Named once: each sum feeds both banks, and Amaranth would otherwise emit it twice.
        sums = [Signal(count_shape, name=f"sum_{b}") for b in range(self.bins)]
        m.d.comb += [total.eq(Mux(fresh, 0, acc[b]) + contributions[b])
                     for b, total in enumerate(sums)]
        with m.If(front.ce):
            m.d.sync += [a.eq(total) for a, total in zip(acc, sums)]
            m.d.sync += fresh.eq(end_of_reduction)

        with m.If(source.valid & source.ready):
            m.d.sync += pointer.eq(pointer + 1)
        with m.If(end_of_reduction):
            m.d.sync += [r.eq(total) for r, total in zip(readout, sums)]
            m.d.sync += [busy.eq(1), pointer.eq(0)]
        with m.Elif(final_beat):
            m.d.sync += busy.eq(0)

    def _pipelined_banks(self, m, front, contrib, contributions, source):
        """Accumulate and read out with the readout cut (``pipeline >= 1``).

        * The readout bank is a shift register read at bin 0 (no wide multiplexer) behind a
          skid buffer (``source`` -> ``o``), so ``o.ready`` reaches no clock enable.
        * ``acc <= last ? 0 : acc + contribution``: the `last` beat clears the accumulators
          (the select is the ``contrib.valid`` flop, after the carry chain) and loads the sums
          into the readout bank.
        * The decisions that fan out to a thousand flip-flops come from flip-flops: whether the
          bank is free (``bank_free``: it enters the front's clock enable), whether it loads
          (``bank_load``, its select) and whether it changes at all (``bank_enable``, its clock
          enable). Each is computed one cycle ahead from the next state of the control flops,
          the skid buffer's ``i.ready`` included (from its stream contract: it stays high
          while the buffer's output register is free or drains, and drops after a beat arrives
          while it is held).
        """
        count_shape = self.out_layout["count"].shape
        acc = [Signal(count_shape, name=f"acc_{b}") for b in range(self.bins)]
        readout = [Signal(count_shape, name=f"readout_{b}", reset_less=True)
                   for b in range(self.bins)]
        busy = Signal()               # the readout bank holds a histogram not yet sent
        pointer = Signal(self.idx_bits)
        at_last_bin = Signal()        # readout[0] holds the final bin
        bank_free = Signal(init=1)    # == ~busy | (source.ready & at_last_bin)
        bank_load = Signal()          # == contrib.valid & bank_free
        bank_enable = Signal()        # == bank_load | (busy & source.ready)

        transfer = source.valid & source.ready
        m.d.comb += [
            contrib.ready.eq(bank_free),
            source.valid.eq(busy),
            source.payload.count.eq(readout[0]),
            source.payload.last.eq(at_last_bin),
        ]
        end_of_reduction = contrib.valid & bank_free

        # Next state of the control flops.
        busy_next = Signal()
        at_last_next = Signal()
        ready_next = Signal()
        last_beat_next = Signal()
        m.d.comb += [
            busy_next.eq(end_of_reduction | (busy & ~(transfer & at_last_bin))),
            at_last_next.eq(Mux(end_of_reduction, 0,
                                Mux(transfer, pointer == self.bins - 2, at_last_bin))),
            # The skid buffer's i.ready in the next cycle.
            ready_next.eq(~self.o.valid | self.o.ready | (source.ready & ~transfer)),
            # contrib.valid in the next cycle (the front's valid chain).
            last_beat_next.eq(Mux(front.ce, front.valid[-2], contrib.valid)),
        ]
        free_next = ~busy_next | (ready_next & at_last_next)
        load_next = last_beat_next & free_next
        m.d.sync += [
            busy.eq(busy_next),
            at_last_bin.eq(at_last_next),
            bank_free.eq(free_next),
            bank_load.eq(load_next),
            bank_enable.eq(load_next | (busy_next & ready_next)),
        ]
        with m.If(end_of_reduction):
            m.d.sync += pointer.eq(0)
        with m.Elif(transfer):
            m.d.sync += pointer.eq(pointer + 1)

        sums = [Signal(count_shape, name=f"sum_{b}") for b in range(self.bins)]
        m.d.comb += [total.eq(acc[b] + contributions[b]) for b, total in enumerate(sums)]
        with m.If(front.ce):
            m.d.sync += [a.eq(Mux(contrib.valid, 0, total)) for a, total in zip(acc, sums)]
        # A `last` beat loads the bank (taking precedence over the shift: the bank is idle, or
        # its final bin leaves in this cycle).
        with m.If(bank_enable):
            with m.If(bank_load):
                m.d.sync += [r.eq(total) for r, total in zip(readout, sums)]
            with m.Else():
                m.d.sync += [r.eq(after) for r, after in zip(readout, readout[1:])]
