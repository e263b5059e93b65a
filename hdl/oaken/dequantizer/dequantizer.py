"""Oaken dequantizer: zero-insert of COO outliers and integer dequantization (Oaken 5.2; contract 4).

The unit (slots, COO intake, issue) is here; the predecode and scatter of a COO beat are in
:mod:`hdl.oaken.dequantizer.coo`, the per-lane arithmetic in
:mod:`hdl.oaken.dequantizer.arithmetic`.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ...common.arith import at_least, or_tree
from ..decomposer import THRESHOLDS, check_lanes
from .arithmetic import dequantize
from .coo import COO_INDEX_BITS, ENTRY_BITS, predecode, scatter
from ...common.params import check_int
from ...common.stream_stage import StallPipeline, check_pipeline, pack_fields

__all__ = ["OakenDequantizer", "METADATA", "CUT_ORDER", "ChunkStreams"]

#: Metadata field names of the header, in the contract order.
METADATA = ("mid_min", "mid_d", "in_min", "in_d", "out_min", "out_d")
#: Groups in the order of the metadata pairs.
GROUPS = ("mid", "in", "out")


class ChunkStreams:
    """The parameters and the three stream layouts of an encoded chunk (contract sections 4 and 8):
    what ``oaken_quantizer`` sends and ``oaken_dequantizer`` takes, checked and built in one
    place for both ends.

    Attributes: ``lanes``, ``vec_len``, ``data_bits``, ``frac_bits`` (checked: ``ValueError`` /
    ``TypeError`` naming the parameter, its value and range), ``windows`` (beats per chunk),
    ``meta_bits`` (``data_bits + frac_bits + 2``), and the layouts ``hdr_layout`` (thresholds,
    then the six metadata values), ``dense_layout`` (``codes``, L x 4) and ``coo_layout``
    (``entries`` L x 8, ``count``, ``last``).
    """

    def __init__(self, *, lanes, vec_len, data_bits, frac_bits):
        self.vec_len = check_int("vec_len", vec_len, min_value=1, max_value=1 << COO_INDEX_BITS)
        self.lanes = check_lanes(lanes, self.vec_len)
        self.data_bits = check_int("data_bits", data_bits, min_value=2, max_value=32)
        self.frac_bits = check_int("frac_bits", frac_bits, min_value=1, max_value=16)
        self.windows = self.vec_len // self.lanes
        self.meta_bits = self.data_bits + self.frac_bits + 2
        value, meta = signed(self.data_bits), signed(self.meta_bits)
        self.hdr_layout = data.StructLayout({
            **{name: value for name in THRESHOLDS},
            **{name: meta for name in METADATA},
        })
        self.dense_layout = data.StructLayout({
            "codes": data.ArrayLayout(unsigned(4), self.lanes),
        })
        self.coo_layout = data.StructLayout({
            "entries": data.ArrayLayout(unsigned(ENTRY_BITS), self.lanes),
            "count": unsigned(self.lanes.bit_length()),
            "last": unsigned(1),
        })


#: Optional cuts, in the order ``pipeline`` turns them on (see :class:`OakenDequantizer`).
CUT_ORDER = ("coo", "scatter", "select", "sum", "partial", "offset", "queue")
#: Cycles from a write into ``SyncFIFOBuffered`` to the entry being readable.
QUEUE_LATENCY = 2
#: The depth that closes timing at the paper configuration (docs/units/oaken.md, Timing).
DEFAULT_PIPELINE = len(CUT_ORDER)


def _register(m, value, name, *, reset=False):
    """``value`` delayed by one clock (no enable; reset-less unless ``reset``)."""
    register = Signal.like(value, name=name, reset_less=not reset)
    m.d.sync += register.eq(value)
    return register


class OakenDequantizer(wiring.Component):
    """Rebuild KV values from Oaken's fused dense-and-sparse encoding, ``lanes`` per cycle.

    Oaken's dequantization engine (section 5.2, Fig. 9(b)) reads the dense 4-bit codes and the
    8-bit COO entries of a chunk, re-aligns each outlier to its position by zero insertion, and
    dequantizes every element with its group's metadata. Per element, with ``q`` its dense code
    and (``min_fx``, ``d_fx``) the metadata of its group (middle unless a COO entry names the
    position; then bit 1 of the entry picks inner (0) or outer (1) and bit 0 is the sign), the
    output is contract section 4's integer formula::

        v  = min_fx + q * d_fx
        m  = (v + 2^(frac_bits-1)) >> frac_bits            # arithmetic
        x' = m + (t_hi_i if m >= 0 else t_lo_i)            # middle
        x' = -m if sign else m                             # inner
        x' = (-m if sign else m) + (t_lo_o if sign else t_hi_o)   # outer

    saturated to the signed ``data_bits`` range.

    **Streams.** Per chunk of ``vec_len`` elements: one ``hdr`` beat, ``vec_len / lanes``
    ``dense`` beats, and COO beats up to and including the one with ``last`` set. A COO beat
    carries ``count`` entries packed from entry 0; a chunk without outliers sends one beat with
    ``count`` 0 and ``last`` 1. The three streams are independent: each is accepted as soon as
    there is room for it, whatever the others are doing.

    **Zero insert.** Every chunk owns a *slot*: a position map of ``vec_len`` x 3 bits
    (outlier, outer, sign) and a header register. A COO beat is accepted whenever its chunk's
    slot is free or already open, whatever its packing; each of its entries is decoded to a
    one-hot position (``index``) and ORed into the map, so the positions no entry names stay
    middle (the inserted zeros). The header is stored with ``min + 2^(frac_bits-1)`` already
    added (the rounding constant, once per chunk instead of once per element). The output beat
    for window ``w`` (positions ``w*lanes .. w*lanes + lanes - 1``) is issued, with the
    matching ``dense`` beat, once every entry that can fall in the window is in the map: the
    chunk's ``last`` beat has been written, or an entry at or beyond the window's last position
    (indices strictly increase). A slot is freed when its chunk's final window has been issued
    and its ``last`` beat written. There are enough slots (two at the paper configuration;
    more when a chunk has few windows) that the next chunks' COO beats and headers are taken
    while the current chunk is issued. The issue decision reads one register per (slot,
    window), loaded with the next state of "header present and window complete": the same
    cycle-by-cycle behaviour as reading those flags directly, with two LUT levels from
    flip-flops to ``dense.ready``.

    **Pace.** One output beat per cycle at any outlier density, 0 % to 100 %, and back-to-back
    chunks follow without a bubble, as long as a chunk's COO beats are not more than its
    windows (``vec_len / lanes``; with full packing, ``count == lanes`` on every beat but the
    last, they never are). Sparser packing is decoded at the same rate while the slots cover
    it, and waits for COO beats beyond that.

    **Malformed COO streams.** An entry whose index is not greater than the previous entry's
    of the same chunk, an index ``>= vec_len``, or a ``count`` above ``lanes`` sets the
    ``coo_error`` output, which stays high until reset. The chunk's values are then
    unspecified, but the unit never loses alignment: it emits exactly ``vec_len / lanes``
    beats for the chunk, consumes its COO beats up to ``last``, and decodes the next chunk
    normally. A ``count`` above ``lanes`` is read as ``lanes``.

    Parameters
    ----------
    lanes : int
        Elements per beat L, a power of two dividing ``vec_len`` (default 16).
    vec_len : int
        Chunk length, a multiple of ``lanes``, 1..64 (default 64: 6-bit COO index).
    data_bits : int
        Width of a KV value and of each threshold, 2..32 (default 16).
    frac_bits : int
        Fractional bits F of the metadata, 1..16 (default 8). Metadata values are
        ``M = data_bits + frac_bits + 2`` bits, signed.
    pipeline : int
        Register cuts, 0..7 (default 7). Each value adds the next cut of ``CUT_ORDER``:

        0. the issue register (codes, the window's position flags, the header) and the output
           register: latency 2, the lowest.
        1. ``coo``: the accepted COO beat is registered predecoded (per entry one-hot high and
           low index lines, presence, reach) before it is scattered into positions.
        2. ``scatter``: the scattered beat (64 x 3 position bits, the windows it completes, its
           first/last index and its per-entry malformed checks) is registered before the
           map write; the malformed checks are ORed into ``coo_error`` one cycle later.
        3. ``select``: each lane's (min, d, 3d), chosen by its group, is registered.
        4. ``sum``: ``m = v >> F`` (with the sign applied when ``offset`` is on) is registered.
        5. ``partial``: ``min + q[1:0] d`` and ``q[3:2] d`` are registered.
        6. ``offset``: the offset sum (before saturation) is registered.
        7. ``queue``: the output register becomes an output queue (``SyncFIFOBuffered``, one
           entry per beat in flight): the arithmetic never stalls (its clock enable is
           constant), a window is issued only while the queue has room for every beat in flight
           (a credit count), and ``o.ready`` reaches nothing but the queue. Two cycles more
           than the output register it replaces.

        ``coo`` and ``scatter`` do not change the latency (the COO side runs ahead of the dense
        side; they may add a slot when a chunk has few windows); ``select`` to ``offset`` add
        one cycle each, ``queue`` two.

    Members
    -------
    hdr : ``In(stream.Signature(hdr_layout))``
        ``t_lo_o``, ``t_lo_i``, ``t_hi_i``, ``t_hi_o`` (``data_bits`` signed), then
        ``mid_min``, ``mid_d``, ``in_min``, ``in_d``, ``out_min``, ``out_d`` (M signed).
    dense : ``In(stream.Signature(dense_layout))``
        ``codes`` (L x 4).
    coo : ``In(stream.Signature(coo_layout))``
        ``entries`` (L x 8: bits [7:2] index, [1] group, [0] sign), ``count``, ``last``.
    o : ``Out(stream.Signature(out_layout))``
        ``x`` (L x ``data_bits`` signed).
    coo_error : ``Out(1)``
        Sticky flag: a malformed COO stream was seen since reset.

    Latency and throughput: ``latency`` cycles from the ``dense`` transfer to the
    corresponding beat being valid on ``o`` with ``o.ready`` high (2 at ``pipeline=0``,
    2 / 2 / 3 / 4 / 5 / 6 / 7 at 1..7, 7 at the default); a window is issued once its COO
    entries are in the map (see Zero insert), which with the COO stream running ahead costs
    nothing. One beat per cycle at every depth (see Pace). ``dense.ready``, ``hdr.ready`` and
    ``coo.ready`` do not depend on the valid of their own stream; ``dense.ready`` is
    combinational in ``o.ready`` unless the ``queue`` cut is on. ``coo_error`` rises 1 cycle
    after the offending COO transfer at ``pipeline=0``, 2 at 1 and 4 from 2 on (a sticky
    flag; the ``scatter`` cut also registers the checks before they are ORed).

    Raises
    ------
    TypeError, ValueError
        If a parameter is not an integer or out of range (the message names it).
    """

    def __init__(self, *, lanes=16, vec_len=64, data_bits=16, frac_bits=8,
                 pipeline=DEFAULT_PIPELINE):
        # Parameters, windows, meta_bits and the input layouts, shared with the quantizer.
        vars(self).update(vars(ChunkStreams(lanes=lanes, vec_len=vec_len, data_bits=data_bits,
                                            frac_bits=frac_bits)))
        self.pipeline = check_pipeline(pipeline, max_value=len(CUT_ORDER))
        self.cuts = frozenset(CUT_ORDER[:self.pipeline])
        #: Cycles from a COO transfer to its entries counting for window completeness.
        self.coo_latency = 1 + len(self.cuts & {"coo", "scatter"})
        # A slot is freed one cycle after its final window; the next chunks' COO beats must
        # be in their maps by the time their windows are due.
        self.slots = 1 + -(-(self.coo_latency + 1) // self.windows)
        arithmetic_cuts = len(self.cuts & {"select", "partial", "sum", "offset"})
        if "queue" in self.cuts:
            # Issue register and arithmetic cuts; the queue (written from the last stage)
            # adds two cycles and holds every beat in flight.
            self.pipe_latency = 1 + arithmetic_cuts
            latency = self.pipe_latency + QUEUE_LATENCY
            self.queue_depth = latency + 1
        else:
            # Issue register, arithmetic cuts, output register.
            self.pipe_latency = 2 + arithmetic_cuts
            latency = self.pipe_latency
            self.queue_depth = 0
        #: Cycles from the ``dense`` transfer to the corresponding beat being valid on ``o``
        #: (with ``o.ready`` high).
        self.latency = latency
        value, meta = signed(self.data_bits), signed(self.meta_bits)
        self.out_layout = data.StructLayout({
            "x": data.ArrayLayout(value, self.lanes),
        })
        # The header as a slot stores it: rounding constant added to the minima, t_lo_o + 1.
        self.stored_layout = data.StructLayout({
            "t_lo_i": value, "t_hi_i": value, "t_hi_o": value,
            "t_lo_o1": signed(self.data_bits + 1),
            **{f"{g}_min": signed(self.meta_bits + 1) for g in GROUPS},
            **{f"{g}_d": meta for g in GROUPS},
            **{f"{g}_d3": signed(self.meta_bits + 2) for g in GROUPS},
        })
        super().__init__({
            "hdr": In(stream.Signature(self.hdr_layout)),
            "dense": In(stream.Signature(self.dense_layout)),
            "coo": In(stream.Signature(self.coo_layout)),
            "o": Out(stream.Signature(self.out_layout)),
            "coo_error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        L, W, V, NS = self.lanes, self.windows, self.vec_len, self.slots
        cuts = self.cuts

        # --- slots: header registers, position maps, bookkeeping ---------------------------
        hdr_full = Signal(NS, name="hdr_full")
        hdr_regs = [Signal(self.stored_layout, name=f"hdr_{s}", reset_less=True)
                    for s in range(NS)]
        hit = [Signal(V, name=f"map_hit_{s}") for s in range(NS)]
        outer = [Signal(V, name=f"map_outer_{s}") for s in range(NS)]
        sign = [Signal(V, name=f"map_sign_{s}") for s in range(NS)]
        busy = Signal(NS, name="slot_busy")            # a chunk's COO beats own the slot
        written = Signal(NS, name="slot_last")         # its last COO beat is in the map
        done = Signal(NS, name="slot_done")            # its final window has been issued
        # Windows whose entries are all in the map (thermometer: bit w for window w).
        ready_windows = [Signal(W, name=f"slot_complete_{s}") for s in range(NS)]
        release = Signal(NS, name="slot_release")
        m.d.comb += release.eq(done & written)

        def advance(pointer):
            return Mux(pointer == NS - 1, 0, pointer + 1)

        # Header intake: one register per slot, filled in chunk order.
        hdr_wp = Signal(range(NS), name="hdr_wp")
        m.d.comb += self.hdr.ready.eq(~(hdr_full >> hdr_wp)[0])
        h = self.hdr.payload
        half = 1 << (self.frac_bits - 1)
        stored = Signal(self.stored_layout, name="hdr_stored")
        m.d.comb += [
            stored.t_lo_i.eq(h.t_lo_i), stored.t_hi_i.eq(h.t_hi_i), stored.t_hi_o.eq(h.t_hi_o),
            stored.t_lo_o1.eq(h.t_lo_o + 1),
            *(stored[f"{g}_min"].eq(h[f"{g}_min"] + half) for g in GROUPS),
            *(stored[f"{g}_d"].eq(h[f"{g}_d"]) for g in GROUPS),
            *(stored[f"{g}_d3"].eq(h[f"{g}_d"] + (h[f"{g}_d"] << 1)) for g in GROUPS),
        ]
        hdr_set = Signal(NS, name="hdr_set")
        with m.If(self.hdr.valid & self.hdr.ready):
            m.d.sync += hdr_wp.eq(advance(hdr_wp))
            m.d.comb += hdr_set.eq(1 << hdr_wp)
            for s in range(NS):
                with m.If(hdr_wp == s):
                    m.d.sync += hdr_regs[s].eq(stored)

        # COO intake: a beat is taken when its chunk's slot is open or free.
        coo_wp = Signal(range(NS), name="coo_wp")
        coo_open = Signal(name="coo_open")
        m.d.comb += self.coo.ready.eq(coo_open | ~(busy >> coo_wp)[0])
        coo_take = self.coo.valid & self.coo.ready
        busy_set = Signal(NS, name="busy_set")
        with m.If(coo_take):
            m.d.comb += busy_set.eq(1 << coo_wp)
            with m.If(self.coo.payload.last):
                m.d.sync += [coo_open.eq(0), coo_wp.eq(advance(coo_wp))]
            with m.Else():
                m.d.sync += coo_open.eq(1)
        # Predecode (-> "coo" cut) -> scatter (-> "scatter" cut) -> map write.
        pre = predecode(m, self.coo.payload, lanes=L, windows=W)
        beat_valid, beat_slot = coo_take, coo_wp
        if "coo" in cuts:
            pre = _register(m, pre, "coo_lines")
            beat_slot = _register(m, beat_slot, "coo_lines_slot")
            beat_valid = _register(m, beat_valid, "coo_lines_valid", reset=True)
        dec = scatter(m, pre, lanes=L, vec_len=V, windows=W)
        if "scatter" in cuts:
            dec = _register(m, dec, "scatter")
            beat_slot = _register(m, beat_slot, "scatter_slot")
            beat_valid = _register(m, beat_valid, "scatter_valid", reset=True)

        # Map write (OR in the beat's positions) and slot release (clear).
        error = Signal(name="coo_error_reg")
        m.d.comb += self.coo_error.eq(error)
        prev_index = Signal(COO_INDEX_BITS, name="coo_prev_index")
        prev_held = Signal(name="coo_prev_held")     # prev_index belongs to this chunk
        bad_order = dec.any & prev_held & (dec.first_index <= prev_index)
        written_set = Signal(NS, name="last_set")
        windows_next = [Signal(W, name=f"slot_complete_next_{s}") for s in range(NS)]
        for s in range(NS):
            write = Signal(name=f"map_write_{s}")
            m.d.comb += write.eq(beat_valid & (beat_slot == s))
            keep = ~release[s]
            m.d.sync += [
                hit[s].eq(Mux(keep, hit[s], 0) | Mux(write, dec.hit, 0)),
                outer[s].eq(Mux(keep, outer[s], 0) | Mux(write, dec.outer, 0)),
                sign[s].eq(Mux(keep, sign[s], 0) | Mux(write, dec.sign, 0)),
            ]
            with m.If(write & (dec.last | dec.any)):
                m.d.comb += windows_next[s].eq(Mux(dec.last, (1 << W) - 1, dec.reach))
            with m.Elif(release[s]):
                m.d.comb += windows_next[s].eq(0)
            with m.Else():
                m.d.comb += windows_next[s].eq(ready_windows[s])
            m.d.sync += ready_windows[s].eq(windows_next[s])
            with m.If(write & dec.last):
                m.d.comb += written_set.eq(1 << s)
        # With the "scatter" cut the checks (ORed over the entries) are registered first:
        # coo_error is a sticky flag, a cycle later does not matter.
        fault = Signal(name="coo_fault")
        m.d.comb += fault.eq(beat_valid & (dec.bad.any() | bad_order))
        if "scatter" in cuts:
            fault = _register(m, fault, "coo_fault_reg", reset=True)
        with m.If(fault):
            m.d.sync += error.eq(1)
        with m.If(beat_valid):
            with m.If(dec.last):
                m.d.sync += prev_held.eq(0)
            with m.Elif(dec.any):
                m.d.sync += [prev_held.eq(1), prev_index.eq(dec.last_index)]

        # --- issue: one window per cycle, with its dense beat --------------------------------
        queue = "queue" in cuts
        if queue:
            # The arithmetic never stalls (its clock enable is constant): beats leave it into
            # an output queue, and a window is only issued while the queue has room for every
            # beat in flight (a credit count), so no beat is ever lost.
            core = stream.Signature(self.out_layout).create(path=("core",))
            m.d.comb += core.ready.eq(1)
            m.submodules.queue = fifo = SyncFIFOBuffered(width=len(self.o.payload.as_value()),
                                                         depth=self.queue_depth)
            m.d.comb += [
                fifo.w_en.eq(core.valid),
                fifo.w_data.eq(core.payload),
                self.o.valid.eq(fifo.r_rdy),
                self.o.payload.eq(fifo.r_data),
                fifo.r_en.eq(self.o.ready),
            ]
            in_flight = Signal(range(self.queue_depth + 1), name="queue_credit")
            room = Signal(name="queue_room")
            m.d.comb += room.eq(~at_least(in_flight, self.queue_depth))
        else:
            core = self.o
            room = Const(1, 1)
        issue = stream.Signature(unsigned(1)).create(path=("issue",))
        pipe = StallPipeline(m, issue, core, latency=self.pipe_latency, name="deq")
        # The window being issued, one-hot over (slot, window) in chunk order, and its slot
        # one-hot: the reads below are AND-OR selections, two LUT levels.
        current = Signal(NS * W, name="read_window", init=1)
        slot = Signal(NS, name="read_slot", init=1)
        final = Signal(name="final_window")
        m.d.comb += final.eq(or_tree([current[s * W + W - 1] for s in range(NS)]))
        # issuable[s * W + w]: slot s holds its header and window w is complete. A register
        # loaded with the next state of hdr_full & slot_complete (the same values one cycle
        # later as they would be combinationally), so that window_ready is one AND-OR level
        # (two LUTs) from flip-flops.
        issuable = Signal(NS * W, name="window_issuable")
        window_ready = Signal(name="window_ready")
        m.d.comb += window_ready.eq(or_tree([current[k] & issuable[k] for k in range(NS * W)]))
        header = Signal(self.stored_layout, name="read_header")
        m.d.comb += header.eq(or_tree([Mux(slot[s], hdr_regs[s].as_value(), 0)
                                       for s in range(NS)]))
        flags = [Signal(L, name=f"read_{n}") for n in ("hit", "outer", "sign")]
        for flag, bits in zip(flags, (hit, outer, sign)):
            m.d.comb += flag.eq(or_tree([
                Mux(current[s * W + w], bits[s][w * L:(w + 1) * L], 0)
                for s in range(NS) for w in range(W)]))
        m.d.comb += [
            issue.valid.eq(self.dense.valid & window_ready & room),
            self.dense.ready.eq(issue.ready & window_ready & room),
        ]
        fire = issue.valid & issue.ready
        if queue:
            leave = self.o.valid & self.o.ready
            m.d.sync += in_flight.eq(in_flight + fire - leave)
        hdr_clear = Signal(NS, name="hdr_clear")
        done_set = Signal(NS, name="done_set")
        with m.If(fire):
            m.d.sync += current.eq(current.rotate_left(1))
            with m.If(final):
                m.d.sync += slot.eq(slot.rotate_left(1))
                m.d.comb += [hdr_clear.eq(slot), done_set.eq(slot)]
        hdr_next = Signal(NS, name="hdr_full_next")
        m.d.comb += hdr_next.eq((hdr_full & ~hdr_clear) | hdr_set)
        m.d.sync += issuable.eq(Cat(*(windows_next[s] & hdr_next[s].replicate(W)
                                      for s in range(NS))))
        m.d.sync += [
            hdr_full.eq(hdr_next),
            busy.eq((busy & ~release) | busy_set),
            written.eq((written & ~release) | written_set),
            done.eq((done & ~release) | done_set),
        ]

        # --- arithmetic ---------------------------------------------------------------------
        codes = pipe.stage(self.dense.payload.codes, name="i_codes")
        lane_hit, lane_outer, lane_sign = (pipe.stage(f, name=f"i_{n}") for f, n in
                                           zip(flags, ("hit", "outer", "sign")))
        header = pipe.stage(header, name="i_header")
        results = dequantize(self, m, pipe, codes, lane_hit, lane_outer, lane_sign, header)
        # The output register (the queue's storage plays that part when there is a queue).
        out = pipe.stage(pack_fields(self.out_layout, {"x": results}), name="x_reg",
                         enable=not queue)
        m.d.comb += core.payload.eq(out)
        return m
