"""Oaken dequantizer: zero-insert of COO outliers and integer dequantization (Oaken 5.2; SPEC 4)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import popcount
from .lanes import split_lanes
from .oaken_decomposer import THRESHOLDS, check_lanes
from .params import check_int

__all__ = ["OakenDequantizer", "METADATA"]

#: Metadata field names of the header, in SPEC order.
METADATA = ("mid_min", "mid_d", "in_min", "in_d", "out_min", "out_d")

COO_INDEX_BITS = 6
ENTRY_BITS = 8


def _or_all(values):
    """Bitwise OR of equal-width values, as a balanced tree."""
    while len(values) > 1:
        values = [values[k] | values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


class OakenDequantizer(wiring.Component):
    """Rebuild KV values from Oaken's fused dense-and-sparse encoding, ``lanes`` per cycle.

    Oaken's dequantization engine (section 5.2, Fig. 9(b)) reads the dense 4-bit codes and the
    8-bit COO entries of a chunk, re-aligns each outlier to its position by zero insertion, and
    dequantizes every element with its group's metadata. Per element, with ``q`` its dense code
    and (``min_fx``, ``d_fx``) the metadata of its group (middle unless a COO entry names the
    position; then bit 1 of the entry picks inner (0) or outer (1) and bit 0 is the sign), the
    output is SPEC section 4's integer formula::

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
    it is needed and there is room, whatever the others are doing.

    **Zero insert.** Entries wait in a buffer of ``2 * lanes`` entries. The output beat for
    window ``w`` (positions ``w*lanes .. w*lanes + lanes - 1``) leaves once every entry that can
    fall in the window is known: the buffer holds an entry at or beyond the window's last
    position, or ``lanes`` entries below the window end, or the chunk's ``last`` beat. The
    window's entries are then at the head of the buffer; each is decoded to a one-hot lane
    (the inserted zeros are the lanes no entry names) and the buffer shifts by their number.
    A COO beat is accepted whenever at most ``lanes`` entries remain after this cycle's shift.

    **Pace.** With COO beats packed full (``count == lanes`` on every beat but a chunk's
    last), the unit emits one output beat per cycle at any outlier density, 0 % to 100 %,
    and back-to-back chunks follow without a bubble: the chunk's last window and the next
    chunk's first COO beat and header share a cycle. Sparser COO packing is decoded correctly
    but may stall for COO beats (the unit needs the entries of a window, not their beats).

    **Malformed COO streams.** An entry whose index is not greater than the previous entry's
    of the same chunk, an index ``>= vec_len``, or a ``count`` above ``lanes`` sets the
    ``coo_error`` output, which stays high until reset. The chunk's values are then
    unspecified, but the unit never stalls or loses alignment: it emits exactly ``vec_len /
    lanes`` beats for the chunk, consumes its COO beats up to ``last`` (entries beyond the
    chunk's final window are dropped), and decodes the next chunk normally. A ``count`` above
    ``lanes`` is read as ``lanes``.

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

    Latency: two cycles from the ``dense`` transfer to ``o.valid`` (one for the zero insert,
    one for the arithmetic). Throughput: one beat per cycle (see Pace).

    Raises
    ------
    TypeError, ValueError
        If a parameter is not an integer or out of range (the message names it).
    """

    latency = 2

    def __init__(self, *, lanes=16, vec_len=64, data_bits=16, frac_bits=8):
        self.vec_len = check_int("vec_len", vec_len, min_value=1, max_value=1 << COO_INDEX_BITS)
        self.lanes = check_lanes(lanes, self.vec_len)
        self.data_bits = check_int("data_bits", data_bits, min_value=2, max_value=32)
        self.frac_bits = check_int("frac_bits", frac_bits, min_value=1, max_value=16)
        self.meta_bits = self.data_bits + self.frac_bits + 2
        self.windows = self.vec_len // self.lanes
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
        self.out_layout = data.StructLayout({
            "x": data.ArrayLayout(value, self.lanes),
        })
        super().__init__({
            "hdr": In(stream.Signature(self.hdr_layout)),
            "dense": In(stream.Signature(self.dense_layout)),
            "coo": In(stream.Signature(self.coo_layout)),
            "o": Out(stream.Signature(self.out_layout)),
            "coo_error": Out(1),
        })

    # --- stage 1: COO buffer, window bookkeeping, zero insert ---------------------------------

    def elaborate(self, platform):
        m = Module()
        L, W = self.lanes, self.windows
        lane_bits = (L - 1).bit_length()
        buf_entries = 2 * L
        idx_width = COO_INDEX_BITS + 1          # room for window ends up to 64

        buf = Signal(buf_entries * ENTRY_BITS, name="coo_buf")     # head entry at bit 0
        occ = Signal(range(buf_entries + 1), name="coo_occ")
        last_seen = Signal(name="coo_last_seen")   # the chunk's last COO beat is in the buffer
        drain = Signal(name="coo_drain")           # windows done, dropping COO beats to last
        hdr_held = Signal(name="hdr_held")
        hdr = Signal(self.hdr_layout, name="hdr_reg", reset_less=True)
        win = Signal(range(max(W, 2)), name="window")
        prev_index = Signal(COO_INDEX_BITS, name="coo_prev_index")
        prev_held = Signal(name="coo_prev_held")   # prev_index belongs to this chunk
        error = Signal(name="coo_error_reg")
        m.d.comb += self.coo_error.eq(error)

        final = Signal(name="final_window")
        m.d.comb += final.eq(win == W - 1)
        win_base = Signal(idx_width, name="window_base")
        m.d.comb += win_base.eq(win << lane_bits)

        # Head entries 0..L (entry L only as a sentinel).
        entries = [buf[k * ENTRY_BITS:(k + 1) * ENTRY_BITS] for k in range(L + 1)]
        take = []              # entry k is below the window end and so are all before it
        hits = []              # per entry: the lanes it lands on (one-hot, or none)
        sentinels = []
        for k, entry in enumerate(entries):
            index = entry[2:]
            valid = occ > k
            sentinel = Signal(name=f"sentinel_{k}")
            m.d.comb += sentinel.eq(valid & (index >= win_base + (L - 1)))
            sentinels.append(sentinel)
            if k == L:
                break
            below = valid & (index < win_base + L)
            t = Signal(name=f"take_{k}")
            m.d.comb += t.eq(below & (take[-1] if take else 1))
            take.append(t)
            inside = Signal(name=f"inside_{k}")
            m.d.comb += inside.eq(t & (index >= win_base))
            hit = Signal(L, name=f"hit_{k}")                   # the zero insert
            m.d.comb += hit.eq((Const(1, L) << index[:lane_bits]) & inside.replicate(L))
            hits.append((hit, entry[1], entry[0]))
        taken = Signal(range(L + 1), name="taken")
        m.d.comb += taken.eq(popcount(Cat(*take)))
        complete = Signal(name="window_complete")
        m.d.comb += complete.eq(last_seen | take[-1] | Cat(*sentinels).any())

        # Stage-1 output register (mid) feeding the arithmetic stage (o).
        mid_valid = Signal(name="mid_valid")
        mid_ready = Signal(name="mid_ready")
        mid = Signal(data.StructLayout({
            "codes": data.ArrayLayout(unsigned(4), L),
            "outlier": unsigned(L), "outer": unsigned(L), "sign": unsigned(L),
            "hdr": self.hdr_layout,
        }), name="mid", reset_less=True)

        emit = Signal(name="emit")
        m.d.comb += emit.eq(hdr_held & self.dense.valid & complete & ~drain
                            & (~mid_valid | mid_ready))
        m.d.comb += self.dense.ready.eq(emit)
        # Per lane, OR over the head entries (at most one hits a lane in a well-formed chunk).
        lane_outlier = Signal(L, name="lane_outlier")
        lane_outer = Signal(L, name="lane_outer")
        lane_sign = Signal(L, name="lane_sign")
        m.d.comb += [
            lane_outlier.eq(_or_all([h for h, _, _ in hits])),
            lane_outer.eq(_or_all([h & g.replicate(L) for h, g, _ in hits])),
            lane_sign.eq(_or_all([h & s.replicate(L) for h, _, s in hits])),
        ]
        with m.If(emit):
            m.d.sync += [
                mid.codes.as_value().eq(self.dense.payload.codes.as_value()),
                mid.outlier.eq(lane_outlier),
                mid.outer.eq(lane_outer),
                mid.sign.eq(lane_sign),
                mid.hdr.eq(hdr),
                mid_valid.eq(1),
                win.eq(Mux(final, 0, win + 1)),
            ]
        with m.Elif(mid_ready):
            m.d.sync += mid_valid.eq(0)

        # Header: held until the chunk's final window leaves.
        release = Signal(name="chunk_done")
        m.d.comb += release.eq(emit & final)
        m.d.comb += self.hdr.ready.eq(~hdr_held | release)
        with m.If(self.hdr.valid & self.hdr.ready):
            m.d.sync += [hdr.eq(self.hdr.payload), hdr_held.eq(1)]
        with m.Elif(release):
            m.d.sync += hdr_held.eq(0)

        # COO buffer: shift out the taken entries, append an accepted beat behind the rest.
        kept = Signal(range(buf_entries + 1), name="coo_kept")
        base = Signal(len(buf), name="coo_base")
        with m.If(release):
            m.d.comb += [kept.eq(0), base.eq(0)]
        with m.Elif(emit):
            m.d.comb += [kept.eq(occ - taken), base.eq(buf >> Cat(Const(0, 3), taken))]
        with m.Else():
            m.d.comb += [kept.eq(occ), base.eq(buf)]

        coo = self.coo.payload
        count = Signal(range(L + 1), name="coo_count")
        overfull = coo.count > L if (1 << len(coo.count)) - 1 > L else Const(0, 1)
        m.d.comb += count.eq(Mux(overfull, L, coo.count))
        incoming = split_lanes(m, coo.entries, ENTRY_BITS, L, name="coo_entry")
        masked = Cat(*(Mux(count > j, incoming[j], 0) for j in range(L)))
        # Drop: the chunk's windows are done (drain) or finish this cycle without its last beat.
        dropping = Signal(name="coo_dropping")
        m.d.comb += dropping.eq(drain | (release & ~last_seen))
        with m.If(dropping):
            m.d.comb += self.coo.ready.eq(1)
        with m.Elif(last_seen):
            m.d.comb += self.coo.ready.eq(release)
        with m.Else():
            m.d.comb += self.coo.ready.eq(kept <= L)
        place = Signal(range(L + 1), name="coo_place")     # kept <= L whenever a beat enters
        m.d.comb += place.eq(kept)
        accept = Signal(name="coo_accept")
        m.d.comb += accept.eq(self.coo.valid & self.coo.ready)

        with m.If(accept & ~dropping):
            m.d.sync += [
                buf.eq(base | (masked << Cat(Const(0, 3), place))),
                occ.eq(kept + count),
                last_seen.eq(coo.last),
            ]
        with m.Else():
            m.d.sync += [buf.eq(base), occ.eq(kept)]
            with m.If(release):
                m.d.sync += last_seen.eq(0)
        with m.If(dropping):
            with m.If(accept & coo.last):
                m.d.sync += drain.eq(0)
            with m.Elif(release):
                m.d.sync += drain.eq(1)

        # Well-formedness of accepted COO beats (sets the sticky coo_error).
        indices = [incoming[j][2:] for j in range(L)]
        bad = [overfull]
        for j in range(L):
            if self.vec_len < (1 << COO_INDEX_BITS):
                bad.append((count > j) & (indices[j] >= self.vec_len))
            if j:
                bad.append((count > j) & (indices[j] <= indices[j - 1]))
        bad.append((count > 0) & prev_held & (indices[0] <= prev_index))
        malformed = Signal(name="coo_malformed")
        m.d.comb += malformed.eq(Mux(dropping, count > 0, Cat(*bad).any()))
        last_index = self._last_index(m, indices, count)
        with m.If(accept):
            with m.If(malformed):
                m.d.sync += error.eq(1)
            with m.If(coo.last):
                m.d.sync += prev_held.eq(0)
            with m.Elif(count > 0):
                m.d.sync += [prev_held.eq(1), prev_index.eq(last_index)]

        self._arithmetic(m, mid, mid_valid, mid_ready)
        return m

    def _last_index(self, m, indices, count):
        """Index of entry ``count - 1`` (entry 0 when ``count`` is 0 or 1)."""
        last = Signal(COO_INDEX_BITS, name="coo_last_index")
        with m.Switch(count):
            for j in range(1, len(indices)):
                with m.Case(j + 1):
                    m.d.comb += last.eq(indices[j])
            with m.Default():
                m.d.comb += last.eq(indices[0])
        return last

    # --- stage 2: per-lane integer dequantization --------------------------------------------

    def _arithmetic(self, m, mid, mid_valid, mid_ready):
        F, D, M = self.frac_bits, self.data_bits, self.meta_bits
        h = mid.hdr
        x_reg = Signal(self.out_layout, name="x_reg", reset_less=True)
        m.d.comb += self.o.payload.eq(x_reg)
        m.d.comb += mid_ready.eq(~self.o.valid | self.o.ready)
        load = mid_valid & mid_ready
        with m.If(load):
            m.d.sync += self.o.valid.eq(1)
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        lo, hi = -(1 << (D - 1)), (1 << (D - 1)) - 1
        codes = split_lanes(m, mid.codes, 4, self.lanes, name="code")
        results = []
        for lane in range(self.lanes):
            outlier, outer, sign = mid.outlier[lane], mid.outer[lane], mid.sign[lane]
            minimum = Signal(signed(M), name=f"min_{lane}")
            step = Signal(signed(M), name=f"d_{lane}")
            m.d.comb += [
                minimum.eq(Mux(outlier, Mux(outer, h.out_min, h.in_min), h.mid_min)),
                step.eq(Mux(outlier, Mux(outer, h.out_d, h.in_d), h.mid_d)),
            ]
            v = Signal(signed(M + 5), name=f"v_{lane}")
            m.d.comb += v.eq(minimum + codes[lane] * step)
            mag = Signal(signed(M + 6 - F), name=f"m_{lane}")
            m.d.comb += mag.eq((v + (1 << (F - 1))) >> F)
            negate = outlier & sign
            offset = Signal(signed(D), name=f"offset_{lane}")
            with m.If(~outlier):
                m.d.comb += offset.eq(Mux(mag[-1], h.t_lo_i, h.t_hi_i))
            with m.Elif(outer):
                m.d.comb += offset.eq(Mux(sign, h.t_lo_o, h.t_hi_o))
            with m.Else():
                m.d.comb += offset.eq(0)
            full = Signal(signed(M + 8 - F), name=f"xfull_{lane}")
            m.d.comb += full.eq(Mux(negate, -mag, mag) + offset)
            sat = Signal(signed(D), name=f"xsat_{lane}")
            with m.If(full < lo):
                m.d.comb += sat.eq(lo)
            with m.Elif(full > hi):
                m.d.comb += sat.eq(hi)
            with m.Else():
                m.d.comb += sat.eq(full)
            results.append(sat)
        with m.If(load):
            m.d.sync += x_reg.as_value().eq(Cat(*results))
