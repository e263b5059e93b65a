"""KLLM Index Distribution Counter (KLLM section IV-B, contract section 2).

The unit (parameters, the front pipeline and the predecode) is here; the bins (bit counters,
accumulators, readout bank) are in :mod:`hdl.kllm.idx_counter.bins`, the control of their
readout in :mod:`hdl.kllm.idx_counter.readout`.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import named
from .bins import BinCounters, bin_blocks, distribute_fits, distributed_lines, weights_carried
from .lanes import ECP5_WORD_BITS, TARGETS, lane_histograms, memory_stages, stall_free_extra
from .readout import direct_banks, pipelined_banks, single_bank
from .spill import spill_shape
from ...common.params import check_choice, check_int
from ...common.shared_modules import SharedModules
from ...common.stream_stage import SkidBuffer, StallPipeline, check_pipeline

__all__ = ["KllmIdxCounter", "counter_bits"]

#: Register cuts of each ``pipeline`` value (see :class:`KllmIdxCounter`).
PIPELINE_CUTS = {
    0: (),
    1: ("accumulate", "readout"),
    2: ("accumulate", "readout", "partial"),
    3: ("accumulate", "readout", "partial", "decode"),
    # kk, counts="full", 6..8 index bits: a register of the raw beat before the predecode, and
    # the predecode lines registered once more, copied per group of bins.
    4: ("accumulate", "readout", "partial", "decode", "input", "distribute"),
}
MAX_PIPELINE = max(PIPELINE_CUTS)
#: The depth that closes timing (>= 150 MHz on ECP5 at ``kllm-a3``, the median of three
#: placement seeds; Timing section of docs/units/kllm_idx_counter.md).
DEFAULT_PIPELINE = 3

#: How the bins hold their counts (the ``counts`` parameter).
COUNTS = ("full", "spill", "memory")

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

    Reading of the paper adopted here (contract section 2): the histogram of one reduction is
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
    overflow : bool
        Also report, per bin, whether its running count left the counter's range during the
        reduction (default False: the contract section 2 interface). True adds a sticky flag
        above every bin's count in the accumulators and the readout bank (``2**idx_bits``
        flip-flops each; the flag's logic is beside the accumulator adder, off its carry
        chain) and the field ``overflow`` after ``last`` on ``o``. ``kllm_column`` uses it.
    banks : int
        Histogram banks, 1..2 (default 2). 2: the accumulators load a readout bank on a
        ``last`` beat and the next reduction accumulates while the bank is read out. 1: no
        readout bank; the accumulators themselves are read out (shifting towards bin 0, zeros
        entering, so they are clear when the final bin leaves) and the input stalls
        (``i.ready`` low) from the ``last`` beat until the cycle after the final bin leaves.
        Outputs are bit-exact either way; 1 saves ``2**idx_bits x count_bits`` flip-flops.
    counts : str
        How the bins hold their counts. ``"full"`` (default): every bin's accumulator and
        readout slot hold the whole ``count_bits``-bit count. ``"spill"``: they hold only its
        low ``narrow_bits`` (:func:`~hdl.kllm.idx_counter.spill.spill_shape`: 9 at 16 inputs
        and ``max_len`` 4096) and one event bit; each carry out of a narrow count is an event
        (bin number) kept in a list of ``spill_entries`` per reduction
        (:class:`~hdl.kllm.idx_counter.spill.BinSpill`), and the bin's count read out is its
        narrow count plus ``2**narrow_bits`` per event. Same ports, latency and rate; counts
        are exact up to ``max_len`` counted indices a reduction and undefined past it (no
        wrap). Needs ``mode="kk"``, ``banks=2``, ``overflow=False``, ``idx_bits`` <= 8.
        ``"memory"``: every lane keeps its own histogram in two memories of ``2**idx_bits``
        words (one counts, one is read out; :mod:`hdl.kllm.idx_counter.lanes`): a
        read-modify-write a lane a cycle, the readout adding the lanes' counts bin by bin.
        Same ports and outputs (counts wrap as with ``"full"``); a longer latency
        (:attr:`latency`), reductions of at least :attr:`stall_free_beats` beats stream with no
        stall, and after reset ``i`` waits ``2**idx_bits`` cycles while the memories are
        cleared. Needs ``mode="kk"`` and ``banks=2``. Block RAM on an FPGA, flip-flops on
        standard cells.
    target : str
        Where ``counts="memory"`` puts its memories: ``"generic"`` (default; inferred, with a
        register after each read port) or ``"ecp5"`` (DP16KD block RAMs in their 1024 x 18 mode
        with the output register: the Verilog instantiates them and synthesizes for ECP5 only;
        a count and its overflow flag must fit 18 bits). Other values of ``counts`` take
        ``"generic"`` only.
    pipeline : int
        Register cuts, 0..4 (default 3, the depth that closes timing at 150 MHz on ECP5):

        * 0: today's lowest-latency circuit. The input register holds the beat; decode, bit
          counters and the accumulator adders are one combinational path into the
          accumulators, which load the readout bank on a ``last`` beat; a
          ``2**idx_bits``:1 multiplexer addressed by a counter drives ``o``. Latency 2.
        * 1: plus a register per bin before the accumulator (the beat's contribution), so the
          accumulator recurrence is one adder; the `last` beat clears the accumulators instead
          of a ``fresh`` multiplexer in front of the adders (a synchronous clear taking
          precedence over the clock enable, from a copy of the bank's load flip-flop, so that it
          maps onto the flip-flops' own reset). The readout bank becomes a shift
          register read at bin 0 (no wide multiplexer) behind a
          :class:`~hdl.common.stream_stage.SkidBuffer` (registered ready and output), and
          the bank's free/load/enable decisions are flip-flops computed one cycle ahead.
          Latency 4.
        * 2: plus a register after the 4-lane partial sums of every bin's bit counter (adder
          tree). Latency 5.
        * 3: the input register holds the predecoded index (one-hot lines of each 4-bit chunk,
          the mask ANDed in) instead of the raw index: one LUT before the input register, the
          decode off the bit-counter path. Latency 5, as for 2. In ``ik`` the equal-index
          flags of each group's lane pairs are also compared in front of the input register,
          and the carried weights (the merge's adders) get a register stage of their own
          (latency 6).
        * 4 (``kk``, ``counts="full"``, 6..8 index bits; else :class:`ValueError`): plus a
          register of the raw beat before the predecode, and after the predecode register,
          per lane, a copy of the low chunk's lines for each quarter of the bins (by their
          high chunk; gated by that quarter's high lines) and one of the high chunk's, so that
          no predecode register drives bins across the whole array; the bank's load and the
          accumulators' clear from a copy of the load decision of their own. Latency 7.

        With ``counts="memory"`` the cuts are: 1 (``accumulate``, ``readout``): a register of
        the lanes' words after the memories, and the skid buffer; 2 (``partial``): registers in
        the middle of the lanes' adder tree and after it; 3 (``decode``): a register of the
        beat before the memories are addressed. Latency 7, 9, 11, 12.

        Every front stage loads at one clock enable (:class:`~hdl.common.stream_stage.StallPipeline`),
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
    Above 8 index bits the bins are built in parts of 256
    (:class:`~hdl.kllm.idx_counter.bins.BinCounters`, one per value of the top index chunk), the
    same circuit emitted once as a Verilog module (:attr:`shared_modules`) and instantiated 2
    or 4 times.

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
        ``pipeline`` 0..3 (6 at 3 in ``ik``; ``counts="memory"``: 7, 9, 11, 12).
    stall_free_beats : int
        With ``banks=2``, reductions of at least this many beats follow each other with no
        stall: ``2**idx_bits`` (``counts="memory"``: 6 more, 7 with the ``decode`` cut).

    Latency and throughput (``banks=2``): one beat (``n_inputs`` indices) per cycle at every
    depth. With ``banks=1`` a reduction of B beats occupies the input for about
    B + ``2**idx_bits`` cycles when reductions follow back to back (the readout no longer
    overlaps; a few beats enter the front meanwhile). The first
    bin leaves ``latency`` cycles after the ``last`` beat is accepted; the readout takes
    ``2**idx_bits`` cycles and overlaps the next reduction, so reductions of at least
    ``2**idx_bits`` beats stream with no stall, and shorter ones keep the readout busy
    (histograms back to back, one bin per cycle). Counts beyond ``max_len`` wrap modulo
    ``2**count_bits`` (two's complement in ``ik``; ``counts="spill"``: undefined).
    ``i.ready`` is combinational in ``o.ready`` at ``pipeline=0``; from 1 on it is
    combinational in flip-flops of the unit only.

    Raises
    ------
    TypeError, ValueError
        For a parameter of the wrong type, out of range, or an impossible combination.
    """

    #: Build the decode, bit counters, accumulation and readout as submodules (same circuit;
    #: for area studies only, elaboration is slower).
    keep_blocks = False

    def __init__(self, *, n_inputs=16, idx_bits=8, mode="kk", weight_bits=None, max_len=4096,
                 banks=2, overflow=False, counts="full", target="generic",
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
        if not isinstance(overflow, bool):
            raise TypeError(f"overflow must be a bool, not {overflow!r}")
        self.overflow = overflow
        #: Bits per bin in the accumulators and the readout bank: the count, and with
        #: ``overflow`` its sticky flag above it.
        self.slot_bits = self.count_bits + int(overflow)
        self.banks = check_int("banks", banks, min_value=1, max_value=2)
        self.counts = check_choice("counts", counts, COUNTS)
        #: ``counts="spill"``: bits of each bin's narrow count, and the events of a reduction
        #: the list holds (:func:`~hdl.kllm.idx_counter.spill.spill_shape`); else None, 0.
        self.narrow_bits, self.spill_entries = None, 0
        if self.counts == "spill":
            self._check_spill()
        self.target = check_choice("target", target, TARGETS)
        self.primitives, self.synth_targets = (), None
        if self.counts == "memory":
            self._check_memory()
        elif self.target != "generic":
            raise ValueError(f"target={self.target!r} applies to counts='memory' only (got "
                             f"counts={self.counts!r})")
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.cuts = PIPELINE_CUTS[self.pipeline]
        if "distribute" in self.cuts and not distribute_fits(self.mode, self.idx_bits,
                                                             self.counts):
            raise ValueError(
                f"pipeline=4 applies to mode='kk', counts='full' and 6..8 index bits "
                f"(got mode={self.mode!r}, counts={self.counts!r}, "
                f"idx_bits={self.idx_bits})")
        #: ik with the decode cut: the carried weights get a register of their own.
        self.carry_stage = self.mode == "ik" and "decode" in self.cuts
        #: Reductions of at least this many beats stream with no stall (``banks=2``).
        self.stall_free_beats = self.bins
        if self.counts == "memory":
            # The readout starts the cycle after the `last` beat's write.
            self.front_stages, readout_stages = memory_stages(self.cuts)
            self.front_stages += 1
            self.stall_free_beats += stall_free_extra(self.cuts)
        else:
            self.front_stages = (1 + sum(cut in self.cuts for cut in
                                         ("partial", "accumulate", "input", "distribute"))
                                 + int(self.carry_stage))
            readout_stages = 1
        #: Cycles from the transfer of a ``last`` beat on ``i`` to the first bin of its
        #: histogram being valid on ``o`` (with ``o.ready`` high and the readout bank free).
        self.latency = self.front_stages + readout_stages + ("readout" in self.cuts)
        #: Above 8 index bits, the parts of the bins emitted once as a Verilog module
        #: (``gen.verilog``; :class:`~hdl.kllm.idx_counter.bins.BinCounters`).
        self.shared_modules = SharedModules()

        fields = {"idx": data.ArrayLayout(unsigned(self.idx_bits), self.n_inputs)}
        if self.mode == "ik":
            fields["weight"] = data.ArrayLayout(signed(self.weight_bits), self.n_inputs)
        fields["mask"] = unsigned(self.n_inputs)
        fields["last"] = unsigned(1)
        self.in_layout = data.StructLayout(fields)
        count_shape = (signed if self.mode == "ik" else unsigned)(self.count_bits)
        out_fields = {"count": count_shape, "last": unsigned(1)}
        if self.overflow:
            out_fields["overflow"] = unsigned(1)
        self.out_layout = data.StructLayout(out_fields)
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        if self.counts == "memory":
            lane_histograms(self, m, platform)
            return m
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
        # With the pipelined banks `contrib.ready` is the flip-flop `bank_free`, which also
        # drives the front's clock enable (placed amid the front); `i.ready` is formed from
        # its inverted copy `bank_held` (kllm_idx_counter_readout.pipelined_banks), so that
        # the producer's enable is not routed through the front (measured: 6.4 ns of routing
        # from `bank_free` through the front's enable to kllm_column's buffer, 136 MHz).
        bank_held = Signal(name="bank_held")
        pipelined = self.banks > 1 and "readout" in cuts
        # With the pipelined banks the front's clock enable (thousands of flip-flops: the
        # stages, the accumulators) is itself a flip-flop, computed one cycle ahead from the
        # banks' control (`pipelined_banks`); measured on ECP5 at 128 bins, the gate in front
        # of it cost a second long route (`bank_free` -> gate -> every enable, 134 MHz).
        front = StallPipeline(m, self.i, contrib, latency=self.front_stages,
                              emit=self.i.payload.last, name="front",
                              hold=busy if self.banks == 1 else None,
                              o_ready_copy=~bank_held if pipelined else None,
                              registered_ce=pipelined)
        # Bubbles (i.valid low) enter with an all-zero mask.
        mask = Mux(self.i.valid, self.i.payload.mask, 0)
        # The four blocks of the paper's counter (the accumulation lives in the bins). With
        # `keep_blocks` (the area split of docs/units/kllm_idx_counter.md) they are
        # submodules, synthesized with their hierarchy kept; the front's valid chain and clock
        # enable stay at the top. Otherwise one module: ports of millions of bits between
        # submodules cost Amaranth more time than the logic.
        dec, btc, rd = bin_blocks(m, self.keep_blocks, ("decode", "bit_counters", "readout"))

        # The construction below works on whole vectors rather than single bits, so that the
        # netlist has few, wide operations (elaboration time; contract section 0 via issue 15):
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
        if "input" in cuts:
            # The raw beat registered before the predecode (kk only: distribute_fits).
            idx_bits_in = front.stage(idx_bits_in, name="beat_idx_raw", m=dec)
            mask = front.stage(mask, name="beat_mask_raw", m=dec)
        lines_in = None
        if "decode" in cuts:
            idx_bits_in = named(dec, idx_bits_in, "beat_idx_in")
            mask = named(dec, mask, "beat_mask_in")
            lines_in = named(dec, predecoded(idx_bits_in, mask), "beat_lines_in")
            lines = front.stage(lines_in, name="beat_lines", m=dec)
        else:
            idx = front.stage(idx_bits_in, name="beat_idx", m=dec)
            lines = Signal(n * line_bits, name="beat_lines")
            dec.d.comb += lines.eq(predecoded(idx, front.stage(mask, name="beat_mask", m=dec)))

        # The bins: bit counters, accumulators and banks (:class:`BinCounters`). Up to 8 index bits
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
            def carried_weights(lines, weights):
                return Cat(*(value for g, lanes in enumerate(self.lane_groups)
                             for value in weights_carried(btc, lines, weights, lanes, sizes,
                                                           self.weight_bits, f"g{g}")))
            if self.carry_stage:
                # The equal-index flags of each group's lane pairs are compared on the raw
                # indices in front of the input register (beside the predecode) and registered;
                # the carried weights (the merge's adders) then get a register stage of their
                # own, the lines one more register to stay aligned: the bit counters start
                # from registers.
                flags = {}
                for g, lanes in enumerate(self.lane_groups):
                    for i, a in enumerate(lanes):
                        for b in lanes[i + 1:]:
                            same = ((idx_bits_in[a * self.idx_bits:(a + 1) * self.idx_bits]
                                     == idx_bits_in[b * self.idx_bits:(b + 1) * self.idx_bits])
                                    & mask[a] & mask[b])
                            flags[(a, b)] = same
                keys = list(flags)
                beat_eq = front.stage(Cat(*(flags[key] for key in keys)), name="beat_eq",
                                      m=btc)
                weights = front.stage(self.i.payload.weight.as_value(), name="beat_weight",
                                      m=btc)
                eq = {key: beat_eq[k] for k, key in enumerate(keys)}
                carried = front.stage(Cat(*(
                    value for g, lanes in enumerate(self.lane_groups)
                    for value in weights_carried(btc, lines, weights, lanes, sizes,
                                                  self.weight_bits, f"g{g}", eq=eq))),
                    name="beat_carried", m=btc)
                lines = front.stage(lines, name="beat_lines_carried", m=dec)
            else:
                weights = front.stage(self.i.payload.weight.as_value(), name="beat_weight",
                                      m=btc)
                carried = carried_weights(lines, weights)
        groups = 1
        if "distribute" in cuts:
            lines, groups = distributed_lines(front, dec, lines, sizes, n)
        parts = []
        for j in range(slices):
            part = BinCounters(self, low_sizes, sliced=slices > 1, groups=groups)
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
        source = self.readout_sink(rd)
        if self.banks == 1:
            single_bank(self, rd, front, contrib, parts, source, busy)
        elif pipelined:
            pipelined_banks(self, rd, front, contrib, parts, source, busy, bank_held,
                            platform)
        else:
            direct_banks(self, rd, front, contrib, parts, source, busy)
        return m

    def _check_spill(self):
        needs = {"mode": ("kk", self.mode), "banks": (2, self.banks),
                 "overflow": (False, self.overflow)}
        for name, (wanted, value) in needs.items():
            if value != wanted:
                raise ValueError(f"counts='spill' needs {name}={wanted!r} (got {name}={value!r})")
        if self.idx_bits > 8:
            raise ValueError(f"counts='spill' needs idx_bits in 1..8 (got idx_bits="
                             f"{self.idx_bits})")
        shape = spill_shape(self.n_inputs, self.max_len, self.count_bits)
        if shape is None:
            raise ValueError(
                f"counts='spill' has no narrow count shorter than the {self.count_bits}-bit "
                f"count at n_inputs={self.n_inputs}, max_len={self.max_len}: use counts='full'")
        self.narrow_bits, self.spill_entries = shape

    def readout_sink(self, m):
        """The stream the readout drives: with the ``readout`` cut a
        :class:`~hdl.common.stream_stage.SkidBuffer` in ``m`` in front of ``o`` (registered
        ready and output), else ``o`` itself."""
        if "readout" not in self.cuts:
            return self.o
        sink = stream.Signature(self.out_layout).create(path=("readout",))
        m.submodules.readout_buffer = buffer = SkidBuffer(self.out_layout)
        wiring.connect(m, sink, buffer.i)
        wiring.connect(m, buffer.o, wiring.flipped(self.o))
        return sink

    def _check_memory(self):
        needs = {"mode": ("kk", self.mode), "banks": (2, self.banks)}
        for name, (wanted, value) in needs.items():
            if value != wanted:
                raise ValueError(f"counts='memory' needs {name}={wanted!r} (got "
                                 f"{name}={value!r})")
        if self.target == "ecp5":
            word = self.count_bits + int(self.overflow)
            if word > ECP5_WORD_BITS:
                raise ValueError(
                    f"target='ecp5' holds words of at most {ECP5_WORD_BITS} bits; max_len="
                    f"{self.max_len} needs {word} (a {self.count_bits}-bit count"
                    f"{' and its overflow flag' if self.overflow else ''})")
            self.primitives, self.synth_targets = ("DP16KD",), ("ecp5",)

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
