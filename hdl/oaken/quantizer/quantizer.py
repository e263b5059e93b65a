"""Oaken quantizer: the online quantization engine (Oaken section 5.2, Fig. 9(a); SPEC 8).

The unit (streams, chunk buffer, credits, gearbox) is here; the arithmetic and the COO pieces
(division by 15, min/max trees, code search, zero-remove shifter, two-write queue) are in
:mod:`hdl.oaken.quantizer.parts`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import adder_tree_cut, or_tree
from ...common.invariants import invariant
from ...common.lanes import split_lanes
from ..decomposer import INNER, MIDDLE, OUTER, THRESHOLDS, OakenDecomposer
from ..dequantizer.dequantizer import ChunkStreams
from ..dequantizer.coo import ENTRY_BITS
from .parts import (LutQueue, TwoWriteQueue, code_step, compact, div15_plan,
                                    divide_by_15, min_max_tree, pair_leaves, prefix_count,
                                    rotate, select_by_group)
from ...common.stream_stage import StallPipeline, check_pipeline, distinct_copies, pack_fields

__all__ = ["OakenQuantizer", "CUT_ORDER", "DEFAULT_PIPELINE", "GROUPS"]

#: Groups in the order of the metadata pairs (SPEC section 4), with their ``group`` codes.
GROUPS = (("mid", MIDDLE), ("in", INNER), ("out", OUTER))

#: Optional cuts, in the order ``pipeline`` turns them on (see :class:`OakenQuantizer`).
CUT_ORDER = ("fetch", "select", "code", "stats", "meta", "classify", "abs", "tree", "hold",
             "out", "beats", "lanes")
#: The depth that closes timing at the paper configuration (docs/units/oaken_quantizer.md).
DEFAULT_PIPELINE = len(CUT_ORDER)
#: Chunks of up to this many beats are reduced by a tree over their beats after the last one;
#: longer ones by running accumulators (see :meth:`OakenQuantizer._reduce_chunk`).
BEAT_TREE_MAX = 8
#: Entries of the COO queue behind the gearbox (two writes per cycle at most; its level stays
#: at most 2 at full rate).
COO_QUEUE_DEPTH = 8


class _Stages:
    """The valid chain and stage registers of a pipeline that never stalls: a
    :class:`~hdl.common.stream_stage.StallPipeline` whose output is always ready (its clock enable is
    constant, so its registers have none). Room downstream is guaranteed by credits instead.
    ``valid[k]`` is high when a beat is after the ``k``-th register (``valid[0]``: the input).
    """

    def __init__(self, m, valid, *, depth, name):
        self.valid = [valid]
        self.pipe = None
        if depth:
            source = stream.Signature(unsigned(1)).create(path=(f"{name}_in",))
            sink = stream.Signature(unsigned(1)).create(path=(f"{name}_out",))
            m.d.comb += [source.valid.eq(valid), sink.ready.eq(1)]
            self.pipe = StallPipeline(m, source, sink, latency=depth, name=name)
            self.valid += self.pipe.valid
        self.depth = depth
        self.cuts = 0

    def cut(self, state, enable, tag):
        """Register every value of ``state`` (a dict of values and lists of values) when
        ``enable``; returns the state after the cut."""
        if not enable:
            return state
        self.cuts += 1
        assert self.cuts <= self.depth, "more cuts than the pipeline's depth"
        return {key: ([self.pipe.stage(v, name=f"{tag}_{key}_{k}") for k, v in enumerate(value)]
                      if isinstance(value, list) else self.pipe.stage(value, name=f"{tag}_{key}"))
                for key, value in state.items()}

    def stage_fn(self, enable):
        """A ``stage`` callable for :mod:`hdl.oaken.quantizer.parts`: registers when
        ``enable``."""
        if not enable:
            return lambda value, name: value
        return lambda value, name: self.pipe.stage(value, name=name)

    @property
    def here(self):
        """The valid bit after the cuts made so far."""
        return self.valid[self.cuts]


class OakenQuantizer(wiring.Component):
    """Quantize Oaken KV chunks online into the fused dense-and-sparse encoding, ``lanes``
    values per cycle: the encoder that :class:`~hdl.oaken.dequantizer.dequantizer.OakenDequantizer`
    undoes.

    Oaken's quantization engine (section 5.2, Fig. 9(a)): the decomposer (step 1) groups and
    shifts every value; the inlier and outlier quantizers (steps 2, 3) find each group's min
    and max over the chunk, quantize to 4 bits, merge the codes into the dense vector and turn
    the outliers into 8-bit COO entries with a zero-remove shifter. Per chunk of ``vec_len``
    values the outputs are bit-exact with ``golden.oaken.quantize_vector``: middle group
    asymmetric over ``s``, inner and outer sign-magnitude over ``|s|``, per group
    ``code = floor((30 (v - min) + span) / (2 span))`` (``span = max - min``; 0 when the span
    is 0), ``min_fx = min * 2^F`` and ``d_fx = floor((span * 2^(F+1) + 15) / 30)``; an empty
    group stores ``min_fx = d_fx = 0``.

    **Streams.** Input ``i``: ``vec_len / lanes`` beats per chunk. Outputs, per chunk, exactly
    the dequantizer's inputs: one ``hdr`` beat, ``vec_len / lanes`` ``dense`` beats, and COO
    beats packed full (``count == lanes`` on every beat but the chunk's final one, which has
    ``last``; a chunk without outliers sends one beat with ``count`` 0). Entries beyond
    ``count`` are 0. The three outputs are independent streams; each is offered as soon as it
    is ready.

    **Thresholds.** A chunk's thresholds are those of its first beat, used for every beat of
    the chunk and sent in its ``hdr``. The sticky ``threshold_error`` output rises (one cycle
    after the transfer at ``pipeline`` below 9, five with the ``hold`` cut) when a chunk's
    first beat carries misordered thresholds (not ``t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o``)
    or a later beat of the chunk carries thresholds different from the first beat's. Such a
    chunk is still coded, with the first beat's thresholds: misordered ones group values in
    the decomposer's priority order (outer upper, outer lower, inner, middle:
    ``golden.oaken.decompose(..., check_order=False)``), and the codes and metadata follow the
    rules above for those groups. Every chunk still leaves as one ``hdr``, ``vec_len / lanes``
    ``dense`` beats and a COO run ending at ``last``, so no later chunk is affected.

    **Micro-architecture.** Nothing stalls inside the unit: every pipeline advances every
    cycle (no clock enable fans out), and credits (registered checks of counters) guarantee
    room in every queue for every beat in flight towards it.

    * Front. ``i.ready`` is a flip-flop (room in the chunk buffer, and at a chunk's last beat
      in the header queue). The first beat's thresholds are held and substituted on the later
      beats. The composed :class:`~hdl.oaken.decomposer.OakenDecomposer` (its output always
      ready, so a fixed delay: the chunk position and thresholds travel beside it). Per lane
      ``v = s`` (middle) or ``|s|`` (inner, outer), the sign and the group, written to the chunk
      buffer. Per group a min and a max tree over the lanes (the first level compares the
      lanes in pairs, one comparator shared by the six trees), then chunk accumulators; after
      the chunk's last beat, its statistics: ``span``, ``min + max``, the zero-span flags, the
      outlier count, then ``15 (min + max)`` into the statistics queue and ``min_fx``, ``d_fx``
      (an exact multiply-shift division by 15, :func:`~hdl.oaken.quantizer.parts.div15_plan`)
      into the header queue.
    * Chunk buffer: a LUT-RAM queue (:class:`~hdl.oaken.quantizer.parts.LutQueue`) of
      decomposed beats holding the chunk being measured and the chunk being coded (ping-pong)
      plus the measurement latency (``buffer_depth``).
    * Back: a beat issues (a flip-flop) while a chunk's statistics are queued (its beats are
      then all in the buffer) and the ``dense`` queue and the COO pre-queue have room. Per
      lane, the constants of the lane's group are selected, ``30 v`` formed, then the 4-bit
      code found by binary search over the 15 code boundaries
      (:func:`~hdl.oaken.quantizer.parts.code_step`: four comparisons of ``30 (v - min)`` with
      ``(2k - 1) span``, no divider). Beside it the COO side: entries
      ``index = window * lanes + lane`` for the inner and outer lanes, the zero-remove shifts
      (a prefix count of the middle lanes below each lane), the compaction (Oaken's zero-remove
      shifter), the chunk's running outlier count (its value modulo ``lanes`` is the fill
      position of the beat) and the rotation of the compacted entries to that position.
    * Gearbox: slots below the fill position hold the partial COO beat kept from earlier
      windows, the others take the rotated new entries. A full beat (``lanes`` entries) leaves
      when the fill wraps; it is the chunk's last when the chunk's outlier count (known from
      the measurement) is reached. After the chunk's final window the remainder leaves with
      ``last`` (an empty beat for a chunk without outliers). That final window can complete
      two beats: the COO queue (:class:`~hdl.oaken.quantizer.parts.TwoWriteQueue`, two LUT-RAM
      banks) takes two writes per cycle and gives one.

    **Pace.** One input beat per cycle at every outlier density (0 % to 100 %) when the
    outputs are always ready: a chunk never has more COO beats than windows, the queues and
    credits are sized from the latencies, and back-to-back chunks follow without a bubble.

    Parameters
    ----------
    lanes : int
        Elements per beat L, a power of two dividing ``vec_len`` (default 16).
    vec_len : int
        Chunk length, a multiple of ``lanes``, 1..64 (default 64: 6-bit COO index).
    data_bits : int
        Width of a KV value and of each threshold, 2..32 (default 16).
    frac_bits : int
        Fractional bits F of the metadata, 1..16 (default 8); metadata values are
        ``M = data_bits + frac_bits + 2`` bits, signed.
    pipeline : int
        Register cuts, 0..12 (default 12). Each value adds the next cut of ``CUT_ORDER``:

        0. none beyond the structure's own registers (decomposer output, chunk accumulators,
           credit flags, gearbox; the queues are LUT RAM with asynchronous reads): the lowest
           latency.
        1. ``fetch``: the chunk buffer's and the chunk statistics' reads are registered.
        2. ``select``: each lane's group constants, ``30 v``, the outlier count and the
           zero-remove shifts are registered before the code search.
        3. ``code``: a register after each of the first three code-search steps (and the
           COO compaction and rotation levels beside them).
        4. ``stats``: the chunk statistics (span, min + max, flags, min, thresholds) are
           registered before the statistics queue and the division.
        5. ``meta``: a register after each adder of the division by 15.
        6. ``classify``: the composed decomposer at its ``pipeline=1``.
        7. ``abs``: ``v``, the sign and the group are registered before the trees and the
           chunk buffer.
        8. ``tree``: a register after the pairs' comparisons and after every level of the
           min/max trees (``log2(lanes) + 1`` registers).
        9. ``hold``: the input (values, the chunk's thresholds) is registered before the
           decomposer.
        10. ``out``: the coded beat is registered before the ``dense`` and COO queues.
        11. ``beats``: the tree over a chunk's beats registers each level's comparisons (and
            their operands) before its selection (one more register per level).
        12. ``lanes``: the same in the lanes' min/max trees after their first level (one more
            register per level, ``log2(lanes) - 1``).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x`` (L x ``data_bits`` signed), ``t_lo_o``, ``t_lo_i``, ``t_hi_i``, ``t_hi_o``
        (``data_bits`` signed).
    hdr : ``Out(stream.Signature(hdr_layout))``
        ``t_lo_o``, ``t_lo_i``, ``t_hi_i``, ``t_hi_o`` (``data_bits`` signed), then
        ``mid_min``, ``mid_d``, ``in_min``, ``in_d``, ``out_min``, ``out_d`` (M signed).
    dense : ``Out(stream.Signature(dense_layout))``
        ``codes`` (L x 4).
    coo : ``Out(stream.Signature(coo_layout))``
        ``entries`` (L x 8: bits [7:2] index, [1] group (0 inner, 1 outer), [0] sign),
        ``count`` (``lanes.bit_length()`` bits), ``last``.
    threshold_error : ``Out(1)``
        Sticky flag: a chunk with misordered or changing thresholds was seen since reset.

    Latency and throughput: ``latency`` cycles from the transfer of a chunk's last input beat
    to its first ``dense`` beat being valid, with the outputs ready and the unit otherwise idle
    (5 at ``pipeline=0``, 25 at the default; ``docs/units/oaken_quantizer.md``); the chunk's
    ``hdr`` is valid no later, and a COO beat one cycle after the ``dense`` beat of the window
    that completes it. One beat per cycle in and out at every depth. ``i.ready`` and every
    output's ``valid`` are flip-flops; the outputs' payloads are queue reads.

    Raises
    ------
    TypeError, ValueError
        If a parameter is not an integer or out of range (the message names it).
    """

    def __init__(self, *, lanes=16, vec_len=64, data_bits=16, frac_bits=8,
                 pipeline=DEFAULT_PIPELINE):
        # Parameters, windows, meta_bits and the output layouts: the dequantizer's inputs.
        vars(self).update(vars(ChunkStreams(lanes=lanes, vec_len=vec_len, data_bits=data_bits,
                                            frac_bits=frac_bits)))
        self.pipeline = check_pipeline(pipeline, max_value=len(CUT_ORDER))
        self.cuts = frozenset(CUT_ORDER[:self.pipeline])
        L, D, F = self.lanes, self.data_bits, self.frac_bits
        self.lane_bits = (L - 1).bit_length()
        self.shift_bits = D + 1
        cuts = self.cuts

        # Stage counts (see the class docstring) and the latency and queue sizes they give.
        self.decomposer_pipeline = 1 if "classify" in cuts else 0
        #: Decomposers composed side by side (groups of four lanes).
        self.decomposer_parts = max(1, L // 4)
        self.tree_levels = set(range(1, self.lane_bits + 1)) if "tree" in cuts else set()
        self.pair_cut = int("tree" in cuts and L > 1)
        #: Levels of the lanes' min/max trees whose comparisons are registered before their
        #: selection (cut "lanes"; level 1, the pairs, has its own with the "tree" cut).
        self.split_levels = (set(range(2, self.lane_bits + 1)) if "lanes" in cuts else set())
        self.span_max = (1 << (D + 1)) - 2
        self.div15 = div15_plan((self.span_max << F) + 7)
        # A write into a queue (LUT RAM, asynchronous read) is readable a cycle later.
        queue_latency = 1
        #: Cycles from the transfer of a chunk's last beat to its statistics being registered.
        # The chunk reduction: a register per level of the tree over the chunk's beats, or
        # the accumulators.
        W = self.windows
        self.chunk_levels = (max(1, (W - 1).bit_length()) * (1 + ("beats" in cuts))
                             if W <= BEAT_TREE_MAX else 1)
        stats_cut = int("stats" in cuts)
        # (the "stats" cut registers the chunk's statistics before their queue and the header)
        self.front_latency = (("hold" in cuts) + 1 + self.decomposer_pipeline + ("abs" in cuts)
                              + len(self.tree_levels) + self.pair_cut
                              + len(self.split_levels) + self.chunk_levels
                              + stats_cut)
        meta_cuts = len(self.div15[1]) if "meta" in cuts else 0
        #: Registers of the coding pipeline (issue to the dense / COO queues).
        self.code_latency = (("fetch" in cuts) + ("select" in cuts) + 3 * ("code" in cuts)
                             + ("out" in cuts))
        to_stats = self.front_latency + queue_latency
        #: Cycles from the last input beat of a chunk to its first ``dense`` beat being valid.
        self.latency = to_stats + self.code_latency + queue_latency
        self.buffer_depth = W + to_stats
        self.stats_depth = 1 + -(-self.buffer_depth // W)
        to_hdr = self.front_latency + meta_cuts + queue_latency
        # (+1: the outputs return their credits a cycle late.)
        self.hdr_depth = max(2, -(-(to_hdr + 1) // W) + 1) + 1
        self.pre_depth = self.code_latency + queue_latency + 2
        self.out_depth = self.pre_depth + 1
        # Chunks between their last input beat and their statistics.
        self.threshold_depth = self.front_latency // W + 2

        value = signed(D)
        self.in_layout = data.StructLayout({
            "x": data.ArrayLayout(value, L),
            **{name: value for name in THRESHOLDS},
        })
        # Internal words: a decomposed beat (chunk buffer), a chunk's coding constants, a
        # coded beat's COO part (pre-queue).
        S = self.shift_bits
        self.word_layout = data.StructLayout({
            "group": data.ArrayLayout(unsigned(2), L),
            "sign": data.ArrayLayout(unsigned(1), L),
            "v": data.ArrayLayout(signed(S), L),
        })
        self.stats_layout = data.StructLayout({
            **{f"{g}_sum": signed(S + 1) for g, _ in GROUPS},
            **{f"{g}_span": unsigned(D + 1) for g, _ in GROUPS},
            **{f"{g}_zero": unsigned(1) for g, _ in GROUPS},
            "total": range(self.vec_len + 1),
        })
        self.pre_layout = data.StructLayout({
            "entries": data.ArrayLayout(unsigned(ENTRY_BITS), L),
            "below": unsigned(L),
            "wrap": unsigned(1),
            "write_a": unsigned(1),
            "write_b": unsigned(1),
            "full_last": unsigned(1),
            "pcount": unsigned(max(1, self.lane_bits)),
        })
        #: For the proofs (:mod:`hdl.common.invariants`; driven only when elaborated for one): the
        #: beats of the current input chunk taken so far (``position``), and per output the
        #: beats owed for the chunks taken (``hdr``, ``dense``).
        self.owed = {"position": Signal(range(self.windows), name="owed_position"),
                     "hdr": Signal(range(self.hdr_depth + 1), name="owed_hdr"),
                     "dense": Signal(range(self.out_depth + self.buffer_depth + 1),
                                     name="owed_dense")}
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "hdr": Out(stream.Signature(self.hdr_layout)),
            "dense": Out(stream.Signature(self.dense_layout)),
            "coo": Out(stream.Signature(self.coo_layout)),
            "threshold_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        L, W, D, F = self.lanes, self.windows, self.data_bits, self.frac_bits
        S, lb = self.shift_bits, self.lane_bits
        cuts = self.cuts
        m.submodules.chunk_buffer = buf = LutQueue(width=self.word_layout.size,
                                                   depth=self.buffer_depth)
        m.submodules.chunk_stats = cst = LutQueue(width=self.stats_layout.size,
                                                  depth=self.stats_depth)
        m.submodules.hdr_queue = hq = LutQueue(width=self.hdr_layout.size,
                                               depth=self.hdr_depth, track=True)
        m.submodules.dense_queue = dq = LutQueue(width=self.dense_layout.size,
                                                 depth=self.out_depth, track=True)
        m.submodules.coo_prequeue = pq = LutQueue(width=self.pre_layout.size,
                                                  depth=self.pre_depth, track=True,
                                                  entry=self._writes_ordered)
        m.d.comb += [
            self.hdr.valid.eq(hq.valid), self.hdr.payload.eq(hq.r_data),
            hq.r_en.eq(self.hdr.valid & self.hdr.ready),
            self.dense.valid.eq(dq.valid), self.dense.payload.eq(dq.r_data),
            dq.r_en.eq(self.dense.valid & self.dense.ready),
        ]

        # --- credits: every queue has room for every beat in flight towards it ---------------
        # Each credit check is registered (the comparison of the count's next value), so that
        # i.ready and the issue decision come from flip-flops.
        take, issue, gear = Signal(name="take"), Signal(name="issue"), Signal(name="gear_read")
        first_in, last_in, in_position, last_in_next = self._position(m, platform, take,
                                                                     "in_beat")
        room, credit = {}, {}
        # The header credit counts chunks at their last beat from a copy of the `last` flag
        # of its own (held inverted, so that synthesis does not merge it with `last_in`):
        # `take & last_in` also enables the threshold queue's write, which places it far
        # from the credit (measured: 5.9 ns of routing on that path, 140.6 MHz on ECP5).
        # (Reset state: not the last beat, as `last_in`; one-beat chunks: always the last.)
        not_last_copy = Signal(name="in_beat_not_last_copy", init=int(W > 1))
        m.d.sync += not_last_copy.eq(~last_in_next)
        # The outputs' transfers return their credits a cycle late (registered: the consumer's
        # ready reaches one flip-flop, not the counters; the queues have a slot more for it).
        hdr_sent = _register(m, self.hdr.valid & self.hdr.ready, "hdr_sent", reset=True)
        dense_sent = _register(m, self.dense.valid & self.dense.ready, "dense_sent", reset=True)
        for name, depth, up, down in (
                ("buffer", self.buffer_depth, take, issue),
                ("hdr", self.hdr_depth, take & ~not_last_copy, hdr_sent),
                ("dense", self.out_depth, issue, dense_sent),
                ("pre", self.pre_depth, issue, gear)):
            count = Signal(range(depth + 1), name=f"{name}_credit")
            m.d.sync += count.eq(count + up - down)
            credit[name] = count
            room[name] = _below_after(m, count, depth, up, down, name=f"{name}_room")
        # Chunks whose statistics are queued (their beats are all in the chunk buffer): the
        # back issues while there is one and room downstream; the decision is a flip-flop.
        stats_write, stats_pop = Signal(name="stats_write"), Signal(name="stats_pop")
        chunks = Signal(range(self.stats_depth + 1), name="chunks_ready")
        m.d.sync += chunks.eq(chunks + stats_write - stats_pop)
        # chunks after this cycle != 0, from flags of the register (no adder on the path).
        many, one = Signal(name="chunks_many"), Signal(name="chunks_one")
        m.d.comb += [many.eq(chunks > 1), one.eq(chunks == 1)]
        chunks_left = stats_write | many | (one & ~stats_pop)
        ready = Signal(name="i_ready", init=1)
        issue_ok = Signal(name="issue_ok")
        m.d.sync += [
            ready.eq(room["buffer"] & (~last_in_next | room["hdr"])),
            issue_ok.eq(chunks_left & room["dense"] & room["pre"]),
        ]
        m.d.comb += [
            self.i.ready.eq(ready),
            take.eq(self.i.valid & ready),
        ]

        # --- input: the chunk's thresholds, checked ------------------------------------------
        p = self.i.payload
        held = {n: Signal(signed(D), name=f"held_{n}", reset_less=True) for n in THRESHOLDS}
        used = {n: Signal(signed(D), name=f"chunk_{n}") for n in THRESHOLDS}
        for n in THRESHOLDS:
            m.d.comb += used[n].eq(Mux(first_in, p[n], held[n]))
        with m.If(take & first_in):
            m.d.sync += [held[n].eq(p[n]) for n in THRESHOLDS]
        front = {"x": p.x.as_value(), "last": last_in, "first": first_in,
                 **{n: used[n] for n in THRESHOLDS}}
        valid = take
        # The chunks on their way to the statistics and the header: the `last` beats in every
        # register from the input to the header queue (the invariants of the credits).
        marks = []
        if "hold" in cuts:
            front = {key: _register(m, value, f"hold_{key}") for key, value in front.items()}
            valid = _register(m, valid, "hold_valid", reset=True)
            marks.append(valid & front["last"])
        # The checks, beside the data path: a chunk's first beat's thresholds ordered, a
        # later beat's equal to them (held). With the "hold" cut the order is compared on the
        # registered thresholds (the first beat's are the used ones) in two registered
        # halves (upper half less / equal, lower half less or equal: a 16-bit comparison
        # with its operands' routes measured 7.4 ns on ECP5), then joined; the equality and
        # the beat's position are registered three times beside it, then the verdict.
        names = THRESHOLDS
        if "hold" in cuts:
            tests = {"valid": take, "first": first_in,
                     "same": Cat(*(p[n] == held[n] for n in names))}
            for stage in (1, 2, 3):
                tests = {key: _register(m, value, f"threshold_{key}_{stage}",
                                        reset=key == "valid")
                         for key, value in tests.items()}
            half = D // 2
            pairs = list(zip(names, names[1:]))
            # (the upper half signed, the lower half unsigned; data_bits >= 2, so both exist)
            upper_lt = _register(m, Cat(*(front[a][half:].as_signed()
                                          < front[b][half:].as_signed() for a, b in pairs)),
                                 "threshold_upper_lt")
            upper_eq = _register(m, Cat(*(front[a][half:] == front[b][half:]
                                          for a, b in pairs)), "threshold_upper_eq")
            lower_le = _register(m, Cat(*(front[a][:half] <= front[b][:half]
                                          for a, b in pairs)), "threshold_lower_le")
            tests["order"] = _register(m, upper_lt | (upper_eq & lower_le), "threshold_order")
        else:
            tests = {"valid": take, "first": first_in,
                     "order": Cat(*(p[a] <= p[b] for a, b in zip(names, names[1:]))),
                     "same": Cat(*(p[n] == held[n] for n in names))}
        fault = Signal(name="threshold_fault")
        m.d.comb += fault.eq(tests["valid"] & Mux(tests["first"], ~tests["order"].all(),
                                                  ~tests["same"].all()))
        if "hold" in cuts:
            fault = _register(m, fault, "threshold_fault_reg", reset=True)
        error = Signal(name="threshold_error_reg")
        m.d.comb += self.threshold_error.eq(error)
        with m.If(fault):
            m.d.sync += error.eq(1)

        # --- decomposer (Fig. 9(a) step 1), never stalled --------------------------------------
        # One decomposer per group of lanes (four at the paper configuration), each with its
        # own copy of the held thresholds (:func:`~hdl.common.stream_stage.distinct_copies`): a
        # register feeds four lanes' comparators, not all of them.
        parts, per = self.decomposer_parts, L // self.decomposer_parts
        xs = split_lanes(m, front["x"], D, L, name="front_x")
        held_copies = {n: (distinct_copies(m, used[n], parts, name=f"hold_{n}")
                           if "hold" in cuts else [front[n]] * parts) for n in THRESHOLDS}
        decomposers = []
        for k in range(parts):
            dec = OakenDecomposer(lanes=per, data_bits=D, pipeline=self.decomposer_pipeline)
            m.submodules[f"decomposer_{k}"] = dec
            decomposers.append(dec)
            thresholds = {n: held_copies[n][k] for n in THRESHOLDS}
            m.d.comb += [
                dec.i.valid.eq(valid),
                dec.i.payload.eq(pack_fields(dec.in_layout, {
                    "x": Cat(*xs[k * per:(k + 1) * per]), **thresholds})),
                dec.o.ready.eq(1),
            ]
        # The chunk position beside them: the decomposers are a fixed delay line. The chunk's
        # thresholds wait in a small queue for its statistics (written at its last beat).
        side = {key: front[key] for key in ("first", "last")}
        m.submodules.threshold_queue = tq = LutQueue(width=4 * D, depth=self.threshold_depth)
        m.d.comb += [
            tq.w_en.eq(take & last_in),
            tq.w_data.eq(Cat(*(used[n] for n in THRESHOLDS))),
        ]
        for k in range(decomposers[0].latency):
            side = {key: _register(m, value, f"side{k}_{key}") for key, value in side.items()}
            marks.append(self._shadow_valid(m, platform, valid, k, decomposers[0])
                         & side["last"])

        # --- measure: v, sign, per-group min/max over the chunk ------------------------------
        meas = _Stages(m, decomposers[0].o.valid,
                       depth=("abs" in cuts) + len(self.tree_levels) + self.pair_cut
                       + len(self.split_levels),
                       name="measure")
        groups, inliers, outliers = [], [], []
        for k, dec in enumerate(decomposers):
            q = dec.o.payload
            groups += split_lanes(m, q.group, 2, per, name=f"dgroup{k}")
            inliers += split_lanes(m, q.inlier, S, per, name=f"dinlier{k}")
            outliers += split_lanes(m, q.outlier, S, per, name=f"doutlier{k}")
        lanes = {"group": [], "sign": [], "v": [], "member": []}
        for lane in range(L):
            inlier, outlier = inliers[lane].as_signed(), outliers[lane].as_signed()
            v = Signal(signed(S), name=f"v_{lane}")
            m.d.comb += v.eq(Mux(groups[lane] == MIDDLE, inlier,
                                 Mux(outlier[-1], -outlier, outlier)))
            lanes["group"].append(groups[lane])
            lanes["sign"].append(outlier[-1])              # s < 0 (used for outliers only)
            lanes["v"].append(v)
            lanes["member"].append(Cat(*(groups[lane] == code for _, code in GROUPS)))
        state = meas.cut({**lanes, **side}, "abs" in cuts, "abs")
        if "abs" in cuts:
            marks.append(meas.here & state["last"])
        m.d.comb += [
            buf.w_en.eq(meas.here),
            buf.w_data.eq(pack_fields(self.word_layout,
                                      {k: state[k] for k in ("group", "sign", "v")})),
        ]
        # Level 1: the lanes in pairs, one comparator per pair shared by the six trees; then
        # per group a min and a max tree over the pairs.
        top, bottom = (1 << D) - 1, -(1 << D)
        trees = {}
        stage = meas.stage_fn(True)
        levels = self.tree_levels
        members = {code: [state["member"][lane][k] for lane in range(L)]
                   for k, (_, code) in enumerate(GROUPS)}
        # (With the "tree" cut the pairs' comparisons are registered before the selection.)
        pairs = pair_leaves(m, state["v"], members, top=top, bottom=bottom,
                            stage=meas.stage_fn(self.pair_cut), name="pair")
        for g, code in GROUPS:
            for k, kind in enumerate(("min", "max")):
                leaves = pairs[code][k]
                if 1 in levels:
                    leaves = [stage(v, f"{g}_{kind}_l1_{j}_r") for j, v in enumerate(leaves)]
                trees[f"{g}_{kind}"] = min_max_tree(m, leaves, minimum=kind == "min",
                                                    cut_levels=levels, stage=stage,
                                                    name=f"{g}_{kind}", first_level=2,
                                                    split_levels=self.split_levels)
            trees[f"{g}_present"] = or_tree(members[code])
        # The beat's outlier count, its adder tree registered level by level with the trees.
        trees["count"] = adder_tree_cut([state["group"][lane] != MIDDLE for lane in range(L)],
                                        cut_after=levels | ({0} if self.pair_cut else set()),
                                        register=lambda v: stage(v, None))
        beat = {key: state[key] for key in side}
        beat["present"] = [trees.pop(f"{g}_present") for g, _ in GROUPS]
        count = trees.pop("count")
        for k in range(len(self.split_levels)):
            count = stage(count, f"count_split{k}")
        for _ in range(len(levels) + self.pair_cut + len(self.split_levels)):
            beat = meas.cut(beat, True, f"tree{meas.cuts}")
            marks.append(meas.here & beat["last"])
        assert meas.cuts == meas.depth

        acc, chunk_valid = self._reduce_chunk(m, meas.here, beat, trees, count, marks)
        total = acc["count"]
        m.d.comb += tq.r_en.eq(chunk_valid)
        thresholds = {n: tq.r_data[k * D:(k + 1) * D].as_signed()
                      for k, n in enumerate(THRESHOLDS)}

        # --- chunk statistics -> coding constants and header ----------------------------------
        stats = {"total": total, **thresholds}
        for k, (g, _) in enumerate(GROUPS):
            present, low, high = acc["present"][k], acc[f"{g}_min"], acc[f"{g}_max"]
            span = Signal(unsigned(D + 1), name=f"{g}_span")
            both = Signal(signed(S + 1), name=f"{g}_sum")
            minimum = Signal(signed(S), name=f"{g}_minimum")
            m.d.comb += [
                span.eq(Mux(present, high - low, 0)),
                both.eq(low + high),
                minimum.eq(Mux(present, low, 0)),
            ]
            stats.update({f"{g}_span": span, f"{g}_sum": both, f"{g}_min": minimum,
                          f"{g}_zero": ~present | (low == high)})
        meta_cut = "meta" in cuts
        # The statistics (span, sum, zero flags, min, the chunk's thresholds) are registered
        # (cut "stats": the subtraction and the equality after the last level of the chunk's
        # tree measured 6.9 ns into the queue's LUT RAM on ECP5), then the coding constants
        # go to their queue and the header's inputs to the division.
        if "stats" in cuts:
            stats = {key: _register(m, value, f"stats_{key}") for key, value in stats.items()}
            chunk_valid = _register(m, chunk_valid, "stats_valid", reset=True)
            marks.append(chunk_valid)
        stats_marks = len(marks)                    # (the statistics queue is written here)
        fin = _Stages(m, chunk_valid, depth=len(self.div15[1]) if meta_cut else 0,
                      name="chunk")
        constants = {key: stats[key] for key in ("total", *(f"{g}_{name}" for g, _ in GROUPS
                                                            for name in ("sum", "span", "zero")))}
        m.d.comb += [
            cst.w_en.eq(chunk_valid),
            cst.w_data.eq(pack_fields(self.stats_layout, constants)),
        ]
        # Header: min_fx = min * 2^F; d_fx = floor((span 2^F + 7) / 15).
        n_max = (self.span_max << F) + 7
        steps = fin.stage_fn(meta_cut)
        header = {n: stats[n] for n in THRESHOLDS}
        for g, _ in GROUPS:
            span = stats[f"{g}_span"]
            n = Signal(unsigned(n_max.bit_length()), name=f"{g}_dividend")
            m.d.comb += n.eq((span << F) + 7)
            header[f"{g}_d"] = divide_by_15(m, n, n_max, stage=steps, name=f"{g}_d")
            header[f"{g}_min"] = stats[f"{g}_min"] << F
        for k in range(len(self.div15[1]) if meta_cut else 0):
            kept = {key: header[key] for key in (*THRESHOLDS, *(f"{g}_min" for g, _ in GROUPS))}
            header.update(fin.cut(kept, True, f"meta{k}"))
        assert fin.cuts == fin.depth
        marks += fin.valid[1:]
        fields = {n: header[n] for n in THRESHOLDS}
        for g, _ in GROUPS:
            for key in (f"{g}_min", f"{g}_d"):
                field = Signal(signed(self.meta_bits), name=f"hdr_{key}")
                m.d.comb += field.eq(header[key])        # min sign-extends, d zero-extends
                fields[key] = field
        m.d.comb += [
            hq.w_en.eq(fin.here),
            hq.w_data.eq(pack_fields(self.hdr_layout, fields)),
        ]

        # --- back: code every beat of a chunk whose statistics are ready ----------------------
        m.d.comb += issue.eq(issue_ok)
        first_w, last_w, window, _ = self._position(m, platform, issue, "window")
        issued = window                             # (beats of the chunk being coded)
        m.d.comb += [stats_write.eq(chunk_valid), stats_pop.eq(issue & last_w)]
        m.d.comb += [buf.r_en.eq(issue), cst.r_en.eq(issue & last_w)]
        back = _Stages(m, issue, depth=self.code_latency, name="code")
        # Cut "fetch": the queues' outputs (asynchronous LUT RAM reads) are registered first,
        # the chunk's statistics in a copy per group of four lanes
        # (:func:`~hdl.common.stream_stage.distinct_copies`; one register feeding all 16 lanes'
        # selections measured 148.2 MHz on ECP5).
        fetched = back.cut({"word": buf.r_data, "window": window, "first": first_w,
                            "last": last_w}, "fetch" in cuts, "fetch")
        first_w, last_w, window = fetched["first"], fetched["last"], fetched["window"]
        word = Signal(self.word_layout, name="coded_word")
        m.d.comb += word.eq(fetched["word"])
        parts, per = self.decomposer_parts, L // self.decomposer_parts
        chunk_copies = []
        for k, value in enumerate(distinct_copies(m, cst.r_data, parts, name="fetch_chunk")
                                  if "fetch" in cuts else [cst.r_data] * parts):
            chunk = Signal(self.stats_layout, name=f"coded_chunk_{k}")
            m.d.comb += chunk.eq(value)
            chunk_copies.append(chunk)
        # Per lane u = 2 v - (min + max) of its group (|u| <= span), then (next stage)
        # r = 15 u = 30 (v - min) - 15 span, the code search's first comparison.
        lanes = {"u": [], "span": [], "zero": [], "entry": [], "flag": []}
        for lane in range(L):
            g, v, chunk = word.group[lane], word.v[lane], chunk_copies[lane // per]
            u = Signal(signed(D + 3), name=f"u_{lane}")
            both = Signal(signed(S + 1), name=f"sum_{lane}")
            span = Signal(unsigned(D + 1), name=f"span_{lane}")
            zero = Signal(name=f"zero_{lane}")
            entry = Signal(ENTRY_BITS, name=f"entry_{lane}")
            index = Cat(Const(lane, lb), window) if lb else window
            m.d.comb += [
                both.eq(select_by_group(g, [chunk[f"{n}_sum"] for n, _ in GROUPS])),
                u.eq((v << 1) - both),
                span.eq(select_by_group(g, [chunk[f"{n}_span"] for n, _ in GROUPS])),
                zero.eq(select_by_group(g, [chunk[f"{n}_zero"] for n, _ in GROUPS])),
                # Entries of middle lanes are 0 (the compaction clears them, when there is one).
                entry.eq(Cat(word.sign[lane], g == OUTER, index) if lb else
                         Mux(g != MIDDLE, Cat(word.sign[lane], g == OUTER, index), 0)),
            ]
            for key, value in (("u", u), ("span", span), ("zero", zero),
                               ("entry", entry), ("flag", g != MIDDLE)):
                lanes[key].append(value)
        # Zero-remove shifts: per entry the number of unflagged lanes below it, from a prefix
        # count whose levels are split around the "select" cut.
        split = (lb + 1) // 2
        # The beat's outlier count `n` from a prefix count of the flags of its own (only its
        # top sum is kept), split the same way: `L - zeros` put a subtraction after the
        # prefix's last levels (measured 7.1 ns on ECP5).
        zeros = prefix_count(m, [~flag for flag in lanes["flag"]], width=lb + 1,
                             levels=range(split), name="coo_prefix")
        ones = prefix_count(m, lanes["flag"], width=lb + 1, levels=range(split),
                            name="coo_ones")
        beat = {**lanes, "zeros": zeros, "ones": ones, "first": first_w, "last": last_w,
                "total": chunk_copies[0].total}
        beat = back.cut(beat, "select" in cuts, "select")
        zeros = prefix_count(m, beat.pop("zeros"), width=lb + 1, levels=range(split, lb),
                             name="coo_prefix")
        ones = prefix_count(m, beat.pop("ones"), width=lb + 1, levels=range(split, lb),
                            name="coo_ones")
        beat["shift"] = [Const(0, max(1, lb))] + [z[:max(1, lb)] for z in zeros[:-1]]
        beat["n"] = Signal(range(L + 1), name="coo_n")
        m.d.comb += beat["n"].eq(ones[-1])

        # The code search; beside it the COO side: the fill position (after the first cut),
        # the compaction, then the rotation.
        # (The rotation's last levels come after the "out" cut.)
        network = [None, ("compact", list(range(split))), ("compact", list(range(split, lb))),
                   ("rotate", list(range(split)))]
        r = [Signal(signed(D + 7), name=f"r3_{lane}") for lane in range(L)]
        m.d.comb += [r[lane].eq((beat["u"][lane] << 4) - beat["u"][lane]) for lane in range(L)]
        beat["r"] = r
        beat["bits"] = []
        for step, shift in enumerate((3, 2, 1, 0)):
            if step == 1:
                beat.update(self._fill(m, back.here, beat))
                for key in ("n", "first", "last"):
                    del beat[key]
            if step == 2:
                # Whether a full beat is the chunk's last: the running count after this beat
                # reached the total, compared a stage after the count's adder (after the adder
                # it measured 6.9 ns on ECP5, the limit at 146.9 MHz).
                total, after = beat.pop("total"), beat.pop("after")
                low_total = total[:lb] if lb else Const(0, 1)
                beat["full_last"] = (after == total) & (low_total == 0)
            if network[step] is not None:
                kind, bits = network[step]
                if kind == "compact":
                    beat["entry"], beat["flag"], beat["shift"] = compact(
                        m, beat["entry"], beat["flag"], beat["shift"], levels=bits,
                        name=f"coo_compact{step}")
                else:
                    beat["entry"] = rotate(m, beat["entry"], beat["h"], levels=bits,
                                           name=f"coo_rotate{step}")
            bit = [~beat["r"][lane][-1] for lane in range(L)]
            beat["bits"] = beat["bits"] + [Cat(*bit)]
            if shift == 0:
                break
            for key in ("u",) + (("flag", "shift") if step == 2 else ()):
                beat.pop(key, None)
            beat = back.cut(beat, "code" in cuts, f"code{step}")
            if "write_a" in beat:
                invariant(m, platform, ~beat["write_b"] | beat["write_a"],
                          name=f"code{step}_invariant")
            beat["r"] = [code_step(m, beat["r"][lane], beat["span"][lane],
                                   beat["bits"][-1][lane], shift, name=f"r{2 - step}_{lane}")
                         for lane in range(L)]
        codes = []
        for lane in range(L):
            code = Signal(4, name=f"code_{lane}")
            value = Cat(*(beat["bits"][3 - b][lane] for b in range(4)))
            m.d.comb += code.eq(Mux(beat["zero"][lane], 0, value))
            codes.append(code)
        result = {"codes": codes, "entries": beat["entry"],
                  **{key: beat[key] for key in ("h", "wrap", "write_a", "write_b", "full_last",
                                                 "pcount")}}
        result = back.cut(result, "out" in cuts, "out")
        invariant(m, platform, ~result["write_b"] | result["write_a"], name="out_invariant")
        assert back.cuts == back.depth
        result["entries"] = rotate(m, result["entries"], result["h"], levels=range(split, lb),
                                   name="coo_rotate4")
        result["below"] = Cat(*((result["h"] > s) if s < L - 1 else Const(0, 1)
                                for s in range(L)))
        m.d.comb += [
            dq.w_en.eq(back.here),
            dq.w_data.eq(pack_fields(self.dense_layout, {"codes": result["codes"]})),
            pq.w_en.eq(back.here),
            pq.w_data.eq(pack_fields(self.pre_layout, {
                key: result[key] for key in ("entries", "below", "wrap", "write_a", "write_b",
                                             "full_last", "pcount")})),
        ]

        # --- gearbox: full COO beats, the remainder with `last` -------------------------------
        # The pre-queue's read is registered (the gearbox works on flip-flops); a beat is read
        # while the COO queue has room for its writes and for those of the beat read before.
        queue = TwoWriteQueue(self.coo_layout, COO_QUEUE_DEPTH, name="coo_queue")
        m.d.comb += [gear.eq(pq.valid & queue.room4), pq.r_en.eq(gear)]
        pre = Signal(self.pre_layout, name="gear_in", reset_less=True)
        fetched = Signal(name="gear_valid")
        m.d.sync += [pre.eq(pq.r_data), fetched.eq(gear)]
        held_entries = [Signal(ENTRY_BITS, name=f"gear_held_{s}", reset_less=True)
                        for s in range(L)]
        # Slots below h hold the partial beat kept from earlier windows; the rotated new
        # entries fill the others and, past the end of the beat, wrap into the next one.
        entries_a, entries_b = [], []
        for s in range(L):
            below, new = pre.below[s], pre.entries[s]
            entry_a = Signal(ENTRY_BITS, name=f"gear_full_{s}")
            entry_b = Signal(ENTRY_BITS, name=f"gear_wrapped_{s}")
            m.d.comb += [
                entry_a.eq(Mux(below, held_entries[s], new)),
                entry_b.eq(Mux(below, new, 0)),
            ]
            with m.If(fetched):
                m.d.sync += held_entries[s].eq(Mux(below & ~pre.wrap, held_entries[s], new))
            entries_a.append(entry_a)
            entries_b.append(entry_b)
        remainder = Signal(L.bit_length(), name="gear_rest_count")
        count_a = Signal(L.bit_length(), name="gear_count_a")
        m.d.comb += [remainder.eq(pre.pcount if lb else 0),
                     count_a.eq(Mux(pre.wrap, L, remainder))]
        # Beat a: the full beat (wrap), else the chunk's remainder; beat b: the remainder after
        # a full beat at the chunk's final window.
        data_a = pack_fields(self.coo_layout, {"entries": entries_a, "count": count_a,
                                               "last": Mux(pre.wrap, pre.full_last, 1)})
        data_b = pack_fields(self.coo_layout, {"entries": entries_b, "count": remainder,
                                               "last": Const(1, 1)})
        queue.elaborate_into(m, self.coo, write_a=fetched & pre.write_a, data_a=data_a,
                             write_b=fetched & pre.write_b, data_b=data_b, platform=platform)

        # --- invariants (proofs only, hdl.common.invariants) ------------------------------------------
        # Every credit is an entry of its queue or a beat on its way there (the header's: a
        # chunk's last beat in a register of the front, `marks`); the returns of the outputs
        # lag a cycle; the registered room checks agree with the counts; the gearbox reads a
        # beat only with room for its writes.
        coded = sum(back.valid[1:])
        invariant(m, platform,
                  not_last_copy == ~last_in,
                  credit["hdr"] == hq.level + sum(marks) + hdr_sent,
                  credit["hdr"] <= self.hdr_depth,
                  ~(ready & last_in) | (credit["hdr"] < self.hdr_depth),
                  credit["dense"] == dq.level + coded + dense_sent,
                  credit["pre"] == pq.level + coded,
                  credit["dense"] <= self.out_depth, credit["pre"] <= self.pre_depth,
                  ~issue_ok | ((credit["dense"] < self.out_depth)
                               & (credit["pre"] < self.pre_depth)),
                  ~fetched | (queue.level <= COO_QUEUE_DEPTH - 2),
                  self._writes_ordered(pre.as_value()), name="credit_invariant")
        # The chunk buffer holds the beats of the chunk being taken, of the chunks on their
        # way to the statistics queue or in it, less those of the chunk being coded issued so
        # far; a chunk is being coded only while its statistics are queued.
        measured = sum(marks[:stats_marks])
        invariant(m, platform,
                  credit["buffer"] <= self.buffer_depth,
                  ~ready | (credit["buffer"] < self.buffer_depth),
                  credit["buffer"] == in_position + W * (measured + chunks) - issued,
                  ~issue_ok | (chunks != 0), (issued == 0) | (chunks != 0),
                  name="buffer_invariant")
        if getattr(platform, "formal", False):
            owed = self.owed
            m.d.comb += [
                owed["position"].eq(in_position),
                owed["hdr"].eq(credit["hdr"] - hdr_sent),
                owed["dense"].eq(credit["dense"] - dense_sent + credit["buffer"] - in_position),
            ]
        return m

    def _writes_ordered(self, bits):
        """A COO pre-queue word's second write comes with its first."""
        word = self.pre_layout(bits)
        return ~word.write_b | word.write_a

    def _shadow_valid(self, m, platform, valid, k, decomposer):
        """(Proofs only) ``valid`` delayed ``k + 1`` cycles: the valid bit of the beat in the
        decomposer's stage ``k`` (its own is internal), asserted equal to its output valid
        after its last stage. Elsewhere a constant 0 (no logic)."""
        if not getattr(platform, "formal", False):
            return Const(0, 1)
        delayed = valid
        for stage in range(k + 1):
            delayed = _register(m, delayed, f"shadow_valid{stage}", reset=True)
        if k == decomposer.latency - 1:
            invariant(m, platform, delayed == decomposer.o.valid, name="shadow_invariant")
        return delayed

    def _reduce_chunk(self, m, here, beat, trees, count, marks):
        """The chunk's statistics from its beats' (per-group min and max, present flags,
        outlier count; thresholds): ``(values, valid)``, registers valid for a cycle after the
        chunk's last beat (plus the levels of the beat tree). The valid bits of its registers
        are appended to ``marks``.

        With up to ``BEAT_TREE_MAX`` beats per chunk the beats' results are kept in a shift
        register and reduced after the last beat by a tree with a register after each level:
        no loop through a comparator. With more, running accumulators (a comparator and a
        multiplexer in a loop)."""
        W, S = self.windows, self.shift_bits
        keys = [f"{g}_{kind}" for g, _ in GROUPS for kind in ("min", "max")]
        current = {**{key: trees[key] for key in keys}, "present": Cat(*beat["present"]),
                   "count": count}
        last = beat["last"]
        if W > BEAT_TREE_MAX:
            first = beat["first"]
            acc = {}
            for key in keys:
                value = current[key]
                register = Signal(signed(S), name=f"acc_{key}", reset_less=True)
                better = (register < value) if key.endswith("min") else (register > value)
                with m.If(here):
                    m.d.sync += register.eq(Mux(first | ~better, value, register))
                acc[key] = register
            acc["present"] = Signal(len(GROUPS), name="acc_present", reset_less=True)
            acc["count"] = Signal(range(self.vec_len + 1), name="acc_count", reset_less=True)
            with m.If(here):
                m.d.sync += [
                    acc["present"].eq(current["present"] | Mux(first, 0, acc["present"])),
                    acc["count"].eq(current["count"] + Mux(first, 0, acc["count"])),
                ]
            marks.append(_register(m, here & last, "chunk_valid", reset=True))
            return acc, marks[-1]

        # The chunk's beats: the current one and the W - 1 before it (shifted on each beat).
        entries = [current]
        for k in range(1, W):
            older = {key: Signal.like(Value.cast(value), name=f"beat{k}_{key}",
                                      reset_less=True)
                     for key, value in entries[-1].items()}
            with m.If(here):
                m.d.sync += [older[key].eq(entries[-1][key]) for key in older]
            entries.append(older)
        valid = here & last
        split = "beats" in self.cuts
        level = 0
        while True:
            level += 1
            combined = []
            for k in range(0, len(entries), 2):
                if k + 1 == len(entries):
                    # Unpaired: delayed like the pairs (by their comparison register too).
                    combined.append({key: _register(m, value, f"chunk_l{level}_odd_{key}")
                                     for key, value in entries[k].items()}
                                    if split else entries[k])
                    continue
                a, b = entries[k], entries[k + 1]
                takes_a = {key: (a[key] < b[key]) if key.endswith("min") else (a[key] > b[key])
                           for key in keys}
                if split:
                    # Cut "beats": the comparisons and both operands registered, then selected.
                    a, b, takes_a = (
                        {key: _register(m, value, f"chunk_l{level}_{side}_{key}_{k // 2}")
                         for key, value in values.items()}
                        for side, values in (("a", a), ("b", b), ("takes_a", takes_a)))
                pair = {}
                for key in keys:
                    chosen = Signal(signed(S), name=f"chunk_l{level}_{key}_{k // 2}")
                    m.d.comb += chosen.eq(Mux(takes_a[key], a[key], b[key]))
                    pair[key] = chosen
                pair["present"] = a["present"] | b["present"]
                pair["count"] = a["count"] + b["count"]
                combined.append(pair)
            entries = [{key: _register(m, value, f"chunk_l{level}_{key}_{k}")
                        for key, value in entry.items()} for k, entry in enumerate(combined)]
            valid = _register(m, valid, f"chunk_l{level}_valid", reset=True)
            marks.append(valid)
            if split:
                valid = _register(m, valid, f"chunk_l{level}_compared_valid", reset=True)
                marks.append(valid)
            if len(entries) == 1:
                break
        result = dict(entries[0])
        count = Signal(range(self.vec_len + 1), name="chunk_count")
        m.d.comb += count.eq(result["count"])
        result["count"] = count
        return result, valid

    def _fill(self, m, valid, beat):
        """The COO gearbox's view of a coded beat: the chunk's running outlier count (a
        register updated while ``valid``) gives the fill position ``h`` of this beat's entries;
        whether they complete a beat (``wrap``), the remainder's count, whether the chunk ends
        with a partial (or empty) beat, and the count after this beat (``after``: a full beat
        is the chunk's last when it equals the chunk's total)."""
        L, lb = self.lanes, self.lane_bits
        cum = Signal(range(self.vec_len + 1), name="coo_cum", reset_less=True)
        before = Signal(range(self.vec_len + 1), name="coo_before")
        after = Signal(range(self.vec_len + 1), name="coo_after")
        m.d.comb += [before.eq(Mux(beat["first"], 0, cum)), after.eq(before + beat["n"])]
        with m.If(valid):
            m.d.sync += cum.eq(after)
        fill = Signal(max(1, lb), name="coo_fill")
        t = Signal(range(2 * L + 1), name="coo_t")
        m.d.comb += [fill.eq(before[:lb] if lb else 0), t.eq(fill + beat["n"])]
        low_total = beat["total"][:lb] if lb else Const(0, 1)
        wrap = Signal(name="coo_wrap")
        final = Signal(name="coo_final")            # the chunk's final window ends a partial beat
        m.d.comb += [
            wrap.eq(t >= L),
            final.eq(beat["last"] & ((low_total != 0) | (beat["total"] == 0))),
        ]
        return {
            "h": fill,
            "wrap": wrap,
            "write_a": wrap | final,                # a full beat, or the chunk's remainder
            "write_b": wrap & final,                # the remainder after a full beat
            "pcount": t[:lb] if lb else Const(0, 1),
            "after": after,                         # full_last: compared a stage later
        }

    def _position(self, m, platform, advance, name):
        """``(first, last, position, last_next)``: the beat advancing on ``advance`` is its
        chunk's first / last (registered flags), its position in the chunk (a counter of
        ``vec_len / lanes`` beats), and ``last`` after this cycle (combinational)."""
        W = self.windows
        if W == 1:
            return Const(1, 1), Const(1, 1), Const(0, 1), Const(1, 1)
        position = Signal(range(W), name=name)
        first = Signal(name=f"{name}_first", init=1)
        last = Signal(name=f"{name}_last")
        last_next = Signal(name=f"{name}_last_next")
        m.d.comb += last_next.eq(Mux(advance, ~last & (position == W - 2), last))
        m.d.sync += last.eq(last_next)
        with m.If(advance):
            m.d.sync += [position.eq(Mux(last, 0, position + 1)), first.eq(last)]
        invariant(m, platform, position < W, first == (position == 0),
                  last == (position == W - 1), name=f"{name}_invariant")
        return first, last, position, last_next


def _below_after(m, count, limit, up, down, *, name):
    """``count + up - down < limit`` (``up``, ``down`` single bits), as a choice among three
    comparisons of the ``count`` register, so that ``up`` and ``down`` pass one LUT level."""
    flags = {}
    for offset in (-1, 0, 1):
        flag = Signal(name=f"{name}_{('lt', 'le', 'le2')[offset + 1]}")
        bound = limit + offset
        # (a bound beyond the register's range would be a constant comparison)
        m.d.comb += flag.eq(count < bound if bound < 1 << len(count) else 1)
        flags[offset] = flag
    result = Signal(name=name)
    m.d.comb += result.eq(Mux(up & ~down, flags[-1], Mux(down & ~up, flags[1], flags[0])))
    return result


def _register(m, value, name, *, reset=False):
    """``value`` delayed by one clock (no enable; reset-less unless ``reset``)."""
    register = Signal.like(value, name=name, reset_less=not reset)
    m.d.sync += register.eq(value)
    return register
