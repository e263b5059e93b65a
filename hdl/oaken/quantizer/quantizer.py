"""Oaken quantizer: the online quantization engine (Oaken section 5.2, Fig. 9(a); contract 8).

The unit (parameters, layouts, latency and queue sizes) is here; :meth:`OakenQuantizer.elaborate`
composes its stages, one module each in :mod:`hdl.oaken.quantizer`: ``credits`` (the queues,
the credits, their invariants), ``front`` (the chunk's thresholds and their checks, the
decomposers), ``measure`` (the per-beat min/max trees, the chunk reduction), ``statistics``
(the coding constants and the header), ``coding`` (the code search and the COO compaction
beside it) and ``gearbox`` (full COO beats); ``stages`` holds what they share. The arithmetic
and the COO pieces (division by 15, min/max trees, code search, zero-remove shifter,
two-write queue) are in ``parts``.
"""

from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...common.stream_stage import check_pipeline
from ..decomposer import THRESHOLDS
from ..dequantizer.coo import ENTRY_BITS
from ..dequantizer.dequantizer import ChunkStreams
from .coding import code_beats
from .credits import Credits, make_queues
from .front import check_thresholds, decompose, hold_input
from .gearbox import Gearbox
from .measure import BEAT_TREE_MAX, measure_beats, reduce_chunk
from .parts import div15_plan
from .stages import GROUPS
from .statistics import chunk_statistics

__all__ = ["OakenQuantizer", "CUT_ORDER", "DEFAULT_PIPELINE", "GROUPS"]

#: Optional cuts, in the order ``pipeline`` turns them on (see :class:`OakenQuantizer`).
CUT_ORDER = ("fetch", "select", "code", "stats", "meta", "classify", "abs", "tree", "hold",
             "out", "beats", "lanes")
#: The depth that closes timing at the paper configuration (docs/units/oaken_quantizer.md).
DEFAULT_PIPELINE = len(CUT_ORDER)


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
        queues = make_queues(m, self)
        # Credits: every queue has room for every beat in flight towards it.
        credits = Credits(m, platform, self)
        # The chunks on their way to the statistics and the header: the `last` beats in every
        # register from the input to the header queue (the invariants of the credits).
        marks = []
        # Front: the chunk's thresholds, checked; the decomposers (Fig. 9(a) step 1).
        front, valid, used, held = hold_input(m, self, credits, marks)
        check_thresholds(m, self, credits, front, held)
        decomposers, side, thresholds = decompose(m, platform, self, credits, front, used,
                                                  valid, marks)
        # Measure: v, sign, per-group min/max over the chunk; its statistics.
        here, beat, trees, count = measure_beats(m, self, decomposers, side, queues.buffer,
                                                 marks)
        acc, chunk_valid = reduce_chunk(m, self, here, beat, trees, count, marks)
        chunk_valid, stats_marks = chunk_statistics(m, self, acc, chunk_valid, thresholds,
                                                    queues, marks)
        # Back: code every beat of a chunk whose statistics are ready; the COO gearbox.
        coded = code_beats(m, platform, self, credits, queues, chunk_valid)
        gearbox = Gearbox(m, platform, self, credits, queues.pre)
        # Invariants (proofs only, hdl.common.invariants).
        credits.check(m, platform, self, queues=queues, marks=marks, stats_marks=stats_marks,
                      coded=coded.coded, issued=coded.issued, gearbox=gearbox)
        return m
