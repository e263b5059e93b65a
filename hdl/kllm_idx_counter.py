"""KLLM Index Distribution Counter (KLLM section IV-B, SPEC section 2)."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import adder_tree, named
from .params import check_choice, check_int
from .shared_modules import SharedModules
from .stream_stage import SkidBuffer, StallPipeline, check_pipeline, enabled_register

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
    banks : int
        Histogram banks, 1..2 (default 2). 2: the accumulators load a readout bank on a
        ``last`` beat and the next reduction accumulates while the bank is read out. 1: no
        readout bank; the accumulators themselves are read out (shifting towards bin 0, zeros
        entering, so they are clear when the final bin leaves) and the input stalls
        (``i.ready`` low) from the ``last`` beat until the cycle after the final bin leaves.
        Outputs are bit-exact either way; 1 saves ``2**idx_bits x count_bits`` flip-flops.
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
        which holds only while a `last` beat waits for the readout bank (with ``banks=1``:
        while the bank is read out).

    Construction (elaboration time, issue 15): the netlist is built from few, wide
    operations. Per lane, its predecode lines are one vector (the comparators of each 4-bit
    chunk, the mask ANDed into the smallest chunk's) and its one-hot "plane" over the bins
    one vector (the chunk lines ANDed bin-block by bin-block). The first two levels of every
    bin's adder tree (4-lane partial sums) are computed for all bins at once on bit planes: a
    4:3 counter of the lanes' planes in ``kk``; in ``ik`` the group's lanes with equal indices
    are first merged as scalars (the first such lane carries their summed weight, the others 0), so
    that bit k of every bin's partial sum is the OR of the planes of the lanes whose carried
    weight has bit k set. Stage registers, accumulators and readout bank are packed signals.
    The per-bin adder tree above the 4-lane groups, the cuts and the control are as before.
    Above 8 index bits the bins are built in parts of 256 (:class:`_Bins`, one per value of
    the top index chunk), the same circuit emitted once as a Verilog module
    (:attr:`shared_modules`) and instantiated 2 or 4 times.

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

    Latency and throughput (``banks=2``): one beat (``n_inputs`` indices) per cycle at every
    depth. With ``banks=1`` a reduction of B beats occupies the input for about
    B + ``2**idx_bits`` cycles when reductions follow back to back (the readout no longer
    overlaps; a few beats enter the front meanwhile). The first
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

    #: Build the decode, bit counters, accumulation and readout as submodules (same circuit;
    #: for area studies only, elaboration is slower).
    keep_blocks = False

    def __init__(self, *, n_inputs=16, idx_bits=8, mode="kk", weight_bits=None, max_len=4096,
                 banks=2, pipeline=DEFAULT_PIPELINE):
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
        self.banks = check_int("banks", banks, min_value=1, max_value=2)
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.cuts = PIPELINE_CUTS[self.pipeline]
        self.front_stages = 1 + sum(cut in self.cuts for cut in ("partial", "accumulate"))
        #: Cycles from the transfer of a ``last`` beat on ``i`` to the first bin of its
        #: histogram being valid on ``o`` (with ``o.ready`` high and the readout bank free).
        self.latency = self.front_stages + 1 + ("readout" in self.cuts)
        #: Above 8 index bits, the parts of the bins emitted once as a Verilog module
        #: (``gen.verilog``; :class:`_Bins`).
        self.shared_modules = SharedModules()

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
        n = self.n_inputs

        # Front pipeline: input beat -> per-bin contributions of the beat, every stage at one
        # clock enable. Its output `contrib` is an internal stream (its payload is unused) that
        # carries the `last` beats only (`emit`): `contrib.valid` says "the beat at the
        # accumulators ends a reduction", and it waits there (stalling the front, and `i`) until
        # the readout bank is free. Every other beat, and every bubble, is added to the
        # accumulators as it passes: bubbles carry an all-zero mask, so they add nothing. With a
        # single bank the whole front holds while the bank is read out (`hold`).
        contrib = stream.Signature(unsigned(1)).create(path=("contrib",))
        busy = Signal()               # the readout bank holds a histogram not yet sent
        front = StallPipeline(m, self.i, contrib, latency=self.front_stages,
                              emit=self.i.payload.last, name="front",
                              hold=busy if self.banks == 1 else None)
        # Bubbles (i.valid low) enter with an all-zero mask.
        mask = Mux(self.i.valid, self.i.payload.mask, 0)
        # The four blocks of the paper's counter (the accumulation lives in the bins). With
        # `keep_blocks` (the area split of docs/units/kllm_idx_counter.md) they are
        # submodules, synthesized with their hierarchy kept; the front's valid chain and clock
        # enable stay at the top. Otherwise one module: ports of millions of bits between
        # submodules cost Amaranth more time than the logic.
        dec, btc, rd = _blocks(m, self.keep_blocks, ("decode", "bit_counters", "readout"))

        # The construction below works on whole vectors rather than single bits, so that the
        # netlist has few, wide operations (elaboration time; SPEC section 0 via issue 15):
        # per lane one vector of predecode lines, per lane one `bins`-bit one-hot "plane", per
        # group of 4 lanes the bit planes of its count, and packed stage registers.
        chunk_bits = [min(4, self.idx_bits - lo) for lo in range(0, self.idx_bits, 4)]
        sizes = [1 << bits for bits in chunk_bits]
        smallest = sizes.index(min(sizes))           # the chunk whose lines carry the mask
        line_bits = sum(sizes)

        def predecoded(idx, mask):
            """Per lane, the one-hot lines of each 4-bit chunk of its index (least significant
            chunk first), the mask ANDed into the smallest chunk's lines: ``line_bits`` bits."""
            lanes = []
            for lane in range(n):
                lo, lines = 0, []
                for c, bits in enumerate(chunk_bits):
                    chunk = idx[lane * self.idx_bits + lo:lane * self.idx_bits + lo + bits]
                    # One comparator per line (the mask ANDed into the smallest chunk's), as
                    # arith.predecode builds them: the form whose register Yosys maps without
                    # a synchronous reset on the clock enable's path.
                    decoded = Cat(*(chunk == k for k in range(sizes[c])))
                    if c == smallest:
                        decoded = decoded & mask[lane].replicate(sizes[c])
                    lines.append(decoded)
                    lo += bits
                lanes.append(Cat(*lines))
            return Cat(*lanes)

        idx_bits_in = self.i.payload.idx.as_value()
        if "decode" in cuts:
            idx_bits_in = named(dec, idx_bits_in, "beat_idx_in")
            mask = named(dec, mask, "beat_mask_in")
            lines = front.stage(predecoded(idx_bits_in, mask), name="beat_lines", m=dec)
        else:
            idx = front.stage(idx_bits_in, name="beat_idx", m=dec)
            lines = Signal(n * line_bits, name="beat_lines")
            dec.d.comb += lines.eq(predecoded(idx, front.stage(mask, name="beat_mask", m=dec)))

        # The bins: bit counters, accumulators and banks (:class:`_Bins`). Up to 8 index bits
        # one instance holds all of them. Above, one instance per value of the top chunk holds
        # the 256 bins of the two low chunks, selected by the lanes' top-chunk line (the mask
        # is ANDed into it, the smallest chunk): the same circuit, emitted once as a Verilog
        # module and instantiated by name (elaboration time, issue 15).
        if len(sizes) > 2:
            assert len(sizes) == 3, sizes              # idx_bits <= 10: chunks of 4, 4, 1..2
            low_sizes, slices = sizes[:2], sizes[2]
        else:
            low_sizes, slices = sizes, 1
        low_bits = sum(low_sizes)
        carried = None
        if self.mode == "ik":
            weights = front.stage(self.i.payload.weight.as_value(), name="beat_weight", m=btc)
            carried = Cat(*(value for g, lanes in enumerate(self.lane_groups)
                            for value in _carried_weights(btc, lines, weights, lanes, sizes,
                                                          self.weight_bits, f"g{g}")))
        parts = []
        for j in range(slices):
            part = _Bins(self, low_sizes, sliced=slices > 1)
            if slices == 1:
                m.submodules.bins = part
                m.d.comb += part.lines.eq(lines)
            else:
                self.shared_modules.add(m, f"bins{j}", part.module_name, part)
                m.d.comb += [
                    part.lines.eq(Cat(*(lines[lane * line_bits:lane * line_bits + low_bits]
                                        for lane in range(n)))),
                    part.select.eq(Cat(*(lines[lane * line_bits + low_bits + j]
                                         for lane in range(n)))),
                ]
            m.d.comb += part.ce.eq(front.ce)
            if carried is not None:
                m.d.comb += part.carried.eq(carried)
            parts.append(part)

        # Accumulators and readout: the front advances (clock enable `front.ce`) unless a
        # `last` beat waits at its end for the readout bank (`contrib.ready` low), or, with a
        # single bank, while that bank is read out.
        if "readout" in cuts:
            source = stream.Signature(self.out_layout).create(path=("readout",))
            rd.submodules.readout_buffer = buffer = SkidBuffer(self.out_layout)
            wiring.connect(rd, source, buffer.i)
            wiring.connect(rd, buffer.o, wiring.flipped(self.o))
        else:
            source = self.o
        if self.banks == 1:
            self._single_bank(rd, front, contrib, parts, source, busy)
        elif "readout" in cuts:
            self._pipelined_banks(rd, front, contrib, parts, source, busy)
        else:
            self._direct_banks(rd, front, contrib, parts, source, busy)
        return m

    @property
    def bank_kind(self):
        """How the bins are read out: ``"single"`` (``banks=1``), ``"shift"`` (a readout bank
        shifted towards bin 0, with the readout cut) or ``"direct"`` (``pipeline=0``: a
        multiplexer on the readout bank)."""
        if self.banks == 1:
            return "single"
        return "shift" if "readout" in self.cuts else "direct"

    @property
    def lane_groups(self):
        """The lanes of each group of 4 (the first two levels of every bin's adder tree)."""
        n = self.n_inputs
        return [list(range(g, min(g + 4, n))) for g in range(0, n, 4)]

    def _direct_banks(self, m, front, contrib, parts, source, busy):
        """Control of the banks without cuts (``pipeline=0``, the lowest latency).

        ``sum = (fresh ? 0 : acc) + contribution`` loads the accumulators at every front clock
        enable and, at the end of a reduction, the readout bank (:class:`_Bins`); a
        ``2**idx_bits``:1 multiplexer addressed by ``pointer`` drives ``o``. The bank is free
        when it is idle or its final bin leaves in this cycle.
        """
        fresh = Signal(init=1)        # acc holds nothing of the current reduction yet
        pointer = Signal(self.idx_bits)
        at_last_bin = Signal()
        final_beat = Signal()
        low = len(parts[0].pointer)
        count = (parts[0].count if len(parts) == 1
                 else Array(part.count for part in parts)[pointer[low:]])
        m.d.comb += [
            at_last_bin.eq(pointer == self.bins - 1),
            final_beat.eq(source.valid & source.ready & at_last_bin),
            contrib.ready.eq(~busy | final_beat),
            source.valid.eq(busy),
            source.payload.count.eq(count),
            source.payload.last.eq(at_last_bin),
        ]
        end_of_reduction = contrib.valid & contrib.ready
        for part in parts:
            m.d.comb += [part.fresh.eq(fresh), part.load.eq(end_of_reduction),
                         part.pointer.eq(pointer[:low])]
        with m.If(front.ce):
            m.d.sync += fresh.eq(end_of_reduction)
        with m.If(source.valid & source.ready):
            m.d.sync += pointer.eq(pointer + 1)
        with m.If(end_of_reduction):
            m.d.sync += [busy.eq(1), pointer.eq(0)]
        with m.Elif(final_beat):
            m.d.sync += busy.eq(0)

    @staticmethod
    def _chain(m, parts):
        """Bin 0 of each part's bank shifts into the top bin of the part below it."""
        for below, above in zip(parts, parts[1:]):
            m.d.comb += below.shift_in.eq(above.count)

    def _pipelined_banks(self, m, front, contrib, parts, source, busy):
        """Control of the banks with the readout cut (``pipeline >= 1``).

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
        pointer = Signal(self.idx_bits)
        at_last_bin = Signal()        # readout[0] holds the final bin
        bank_free = Signal(init=1)    # == ~busy | (source.ready & at_last_bin)
        bank_load = Signal()          # == contrib.valid & bank_free
        bank_enable = Signal()        # == bank_load | (busy & source.ready)

        transfer = source.valid & source.ready
        m.d.comb += [
            contrib.ready.eq(bank_free),
            source.valid.eq(busy),
            source.payload.count.eq(parts[0].count),
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
            # contrib.valid in the next cycle (the front's valid chain): it advances unless the
            # `last` beat at its end waits (written without `front.ce`, a net of high fan-out,
            # so that this is one LUT of flip-flops).
            last_beat_next.eq(front.valid[-2] | (contrib.valid & ~bank_free)),
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
        for part in parts:
            m.d.comb += [part.clear.eq(contrib.valid), part.bank_enable.eq(bank_enable),
                         part.bank_load.eq(bank_load)]
        self._chain(m, parts)

    def _single_bank(self, m, front, contrib, parts, source, busy):
        """Control of one bank (``banks=1``): the accumulators are read out themselves.

        The `last` beat's sums stay in the accumulators, which then shift towards bin 0 (read
        at ``o``, or at the skid buffer with the readout cut) one bin per transfer, zeros
        entering at the top: after the final bin they hold zeros, the start of the next
        reduction. While the bank is busy the whole front holds (``busy`` is its ``hold``),
        so ``i.ready`` is low; it resumes in the cycle after the final bin leaves.
        """
        pointer = Signal(self.idx_bits)
        at_last_bin = Signal()        # acc[0] holds the final bin
        transfer = source.valid & source.ready
        end_of_reduction = contrib.valid & front.ce
        m.d.comb += [
            contrib.ready.eq(1),
            source.valid.eq(busy),
            source.payload.count.eq(parts[0].count),
            source.payload.last.eq(at_last_bin),
        ]
        for part in parts:
            m.d.comb += part.shift.eq(transfer)
        self._chain(m, parts)
        with m.If(end_of_reduction):
            m.d.sync += [busy.eq(1), pointer.eq(0), at_last_bin.eq(0)]
        with m.Elif(transfer):
            m.d.sync += [pointer.eq(pointer + 1), at_last_bin.eq(pointer == self.bins - 2)]
            with m.If(at_last_bin):
                m.d.sync += busy.eq(0)


def _blocks(m, keep, names):
    """The modules of the blocks ``names``: new submodules of ``m`` with ``keep`` (the area
    split), else ``m`` itself for each."""
    if not keep:
        return [m] * len(names)
    blocks = []
    for name in names:
        m.submodules[name] = block = Module()
        blocks.append(block)
    return blocks


def _count_planes(m, planes, name):
    """Bit planes (least significant first) of the number of set planes among up to 4 one-bit
    ``planes``, bin by bin: a 4:3 counter on whole vectors (combinational)."""
    net = named
    if len(planes) == 1:
        return planes
    if len(planes) == 2:
        a, b = planes
        return [net(m, a ^ b, f"{name}_s0"), net(m, a & b, f"{name}_s1")]
    if len(planes) == 3:
        a, b, c = planes
        x = net(m, a ^ b, f"{name}_x")
        return [net(m, x ^ c, f"{name}_s0"), net(m, (a & b) | (x & c), f"{name}_s1")]
    a, b, c, d = planes
    x, y = net(m, a ^ b, f"{name}_x"), net(m, c ^ d, f"{name}_y")
    p, q = net(m, a & b, f"{name}_p"), net(m, c & d, f"{name}_q")
    t = net(m, x & y, f"{name}_t")
    # a + b + c + d = (x ^ y) + 2 (p + q + t), and p + q + t <= 2 (p excludes t, q too).
    return [net(m, x ^ y, f"{name}_s0"), net(m, p ^ q ^ t, f"{name}_s1"),
            net(m, (p & q) | (t & (p | q)), f"{name}_s2")]


def _group_sum_width(weight_bits, lanes):
    """Width of the weighted sum of a group of ``lanes`` (two's complement)."""
    return weight_bits + (len(lanes) - 1).bit_length()


def _carried_weights(m, lines, weights, lanes, sizes, weight_bits, name):
    """The weight each lane of a group carries (combinational, one signal per lane, signed,
    :func:`_group_sum_width` bits): the first lane of each distinct counted index (its leader)
    carries the sum of the weights of the group's lanes with that index, the others 0. Two
    lanes count the same index when every chunk of their predecode lines overlaps (a masked
    lane overlaps none)."""
    wb = weight_bits
    line_bits = sum(sizes)

    def same_index(a, b):
        terms, base = [], 0
        for size in sizes:
            lo_a, lo_b = a * line_bits + base, b * line_bits + base
            terms.append((lines[lo_a:lo_a + size] & lines[lo_b:lo_b + size]).any())
            base += size
        return named(m, Cat(*terms).all(), f"{name}_eq{a}_{b}")

    weight = {lane: weights[lane * wb:(lane + 1) * wb].as_signed() for lane in lanes}
    eq = {(a, b): same_index(a, b) for i, a in enumerate(lanes) for b in lanes[i + 1:]}
    width = _group_sum_width(wb, lanes)
    carried = []
    for i, lane in enumerate(lanes):
        total = weight[lane]
        for other in lanes[i + 1:]:
            total = total + Mux(eq[(lane, other)], weight[other], 0)
        if i:
            leader = ~Cat(*(eq[(other, lane)] for other in lanes[:i])).any()
            total = Mux(leader, total, 0)
        signal = Signal(signed(width), name=f"{name}_w{lane}")
        m.d.comb += signal.eq(total)
        carried.append(signal)
    return carried


class _Bins(wiring.Component):
    """The bins of :class:`KllmIdxCounter` (KLLM IV-B: bit counters, accumulators, readout
    bank) for ``prod(sizes)`` bins, from the lanes' predecode lines.

    Per lane, its one-hot plane over the bins (bit b is the AND of the chunk lines that b
    selects; with ``sliced``, also of the lane's ``select`` line, its top chunk's line of this
    part). Per group of 4 lanes, the first two levels of every bin's adder tree as bit planes
    (``kk``: a 4:3 counter of the planes; ``ik``: bit k is the OR of the planes of the lanes
    whose ``carried`` weight has bit k set, the leaders' planes being disjoint). Then the cut
    after them (``partial``), the per-bin adder tree, the cut before the accumulators
    (``accumulate``), and the accumulators and bank of the counter's ``bank_kind``. Every
    register loads at ``ce`` (the counter's front clock enable) except the bank's.

    The counter drives the members; ``count`` is bin 0 of the bank (``shift``, ``single``) or
    the bin at ``pointer`` (``direct``). ``shift_in`` enters the top bin when the bank shifts
    (the next part's ``count``; 0 at the top).
    """

    def __init__(self, counter, sizes, *, sliced):
        self.counter = counter
        self.sizes = list(sizes)
        self.sliced = sliced
        self.bins = 1
        for size in self.sizes:
            self.bins *= size
        n, width = counter.n_inputs, counter.count_bits
        members = {"ce": In(1), "lines": In(n * sum(self.sizes))}
        if sliced:
            members["select"] = In(n)
        if counter.mode == "ik":
            members["carried"] = In(sum(_group_sum_width(counter.weight_bits, lanes) * len(lanes)
                                        for lanes in counter.lane_groups))
        kind = counter.bank_kind
        if kind == "direct":
            members.update(fresh=In(1), load=In(1), pointer=In((self.bins - 1).bit_length()))
        elif kind == "shift":
            members.update(clear=In(1), bank_enable=In(1), bank_load=In(1),
                           shift_in=In(width))
        else:
            members.update(shift=In(1), shift_in=In(width))
        members["count"] = Out(width)
        super().__init__(members)

    @property
    def module_name(self):
        """The Verilog module name of this circuit (its shaping parameters)."""
        c = self.counter
        mode = c.mode if c.mode == "kk" else f"ik{c.weight_bits}"
        return (f"kllm_idx_counter_bins{self.bins}_n{c.n_inputs}_{mode}_c{c.count_bits}"
                f"_p{c.pipeline}_b{c.banks}")

    def elaborate(self, platform):
        c = self.counter
        m = Module()
        n, sizes, width = c.n_inputs, self.sizes, c.count_bits
        cuts = c.cuts
        dec, btc, accm, rd = _blocks(m, c.keep_blocks,
                                     ("decode", "bit_counters", "accumulation", "readout"))

        def stage(value, name, module):
            return enabled_register(module, Value.cast(value), self.ce, name=name)

        # Per lane, its one-hot plane over the bins: bit b is the AND of the chunk lines that b
        # selects, built chunk by chunk from the least significant: the one-hot over the bins
        # of the chunks so far, repeated once per line of the next chunk and ANDed with it.
        line_bits = sum(sizes)
        planes = []
        for lane in range(n):
            base = lane * line_bits
            term = self.lines[base:base + sizes[0]]
            base += sizes[0]
            for size in sizes[1:]:
                term = Cat(*(Mux(self.lines[base + k], term, 0) for k in range(size)))
                base += size
            if self.sliced:
                term = Mux(self.select[lane], term, 0)
            planes.append(named(dec, term, f"plane_{lane}"))

        # Per group of 4 lanes (the first two levels of each bin's adder tree), the group's
        # count (kk) or weighted sum (ik) for every bin at once, as bit planes: plane j holds
        # bit j of the partial sum of every bin. Cut after them when asked ("partial").
        groups, offset = [], 0
        for g, lanes in enumerate(c.lane_groups):
            if c.mode == "kk":
                groups.append(_count_planes(btc, [planes[lane] for lane in lanes], f"g{g}"))
                continue
            group_width = _group_sum_width(c.weight_bits, lanes)
            carried = []
            for lane in lanes:
                carried.append(self.carried[offset:offset + group_width])
                offset += group_width
            out = []
            for k in range(group_width):
                bit = None
                for lane, value in zip(lanes, carried):
                    chosen = Mux(value[k], planes[lane], 0)
                    bit = chosen if bit is None else bit | chosen
                out.append(named(btc, bit, f"g{g}_s{k}"))
            groups.append(out)
        if "partial" in cuts:
            # One register per bit plane (`bins` bits): each bin's partial sums are then plain
            # bit selects of a signal.
            groups = [[stage(p, f"partial_{g}_{j}", btc) for j, p in enumerate(group)]
                      for g, group in enumerate(groups)]

        # Per bin: the adder tree over the groups' partial sums (levels 3 and up), then the cut
        # before the accumulators (one packed register of every bin's contribution).
        totals = []
        for bin_ in range(self.bins):
            operands = []
            for group in groups:
                value = Cat(*(p[bin_] for p in group))
                operands.append(value.as_signed() if c.mode == "ik" else value)
            totals.append(adder_tree(operands))
        step = len(totals[0])
        packed = Cat(*totals)
        if "accumulate" in cuts:
            packed = stage(packed, "contribution", btc)
        else:
            packed = named(btc, packed, "contribution")
        contributions = [packed[b * step:(b + 1) * step] for b in range(self.bins)]
        if c.mode == "ik":
            contributions = [value.as_signed() for value in contributions]

        acc = Signal(self.bins * width, name="acc")

        def sums(base):
            """Every bin's ``base + contribution`` modulo ``2**count_bits``, one signal."""
            return named(accm, Cat(*((base[b * width:(b + 1) * width] + contribution)[:width]
                                    for b, contribution in enumerate(contributions))), "sum")

        kind = c.bank_kind
        if kind == "direct":
            # sum = (fresh ? 0 : acc) + contribution loads the accumulators at every clock
            # enable and, at the end of a reduction, the readout bank.
            readout = Signal(self.bins * width, name="readout", reset_less=True)
            total = sums(named(accm, Mux(self.fresh, 0, acc), "acc_or_zero"))
            with accm.If(self.ce):
                accm.d.sync += acc.eq(total)
            with rd.If(self.load):
                rd.d.sync += readout.eq(total)
            rd.d.comb += self.count.eq(readout.word_select(self.pointer, width))
        elif kind == "shift":
            # acc <= clear ? 0 : acc + contribution; the bank loads the sums or shifts.
            readout = Signal(self.bins * width, name="readout", reset_less=True)
            total = sums(acc)
            with accm.If(self.ce):
                accm.d.sync += acc.eq(Mux(self.clear, 0, total))
            with rd.If(self.bank_enable):
                with rd.If(self.bank_load):
                    rd.d.sync += readout.eq(total)
                with rd.Else():
                    rd.d.sync += readout.eq(Cat(readout[width:], self.shift_in))
            rd.d.comb += self.count.eq(readout[:width])
        else:
            # One bank: the accumulators add, or shift out towards bin 0.
            total = sums(acc)
            with accm.If(self.ce):
                accm.d.sync += acc.eq(total)
            with accm.Elif(self.shift):
                accm.d.sync += acc.eq(Cat(acc[width:], self.shift_in))
            rd.d.comb += self.count.eq(acc[:width])
        return m
