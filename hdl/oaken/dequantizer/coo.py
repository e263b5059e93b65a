"""The COO side of the Oaken dequantizer (:class:`hdl.oaken.dequantizer.dequantizer.OakenDequantizer`):
a COO beat predecoded into one-hot index lines, then scattered into the positions it names (the
zero insert's map write), with the windows it completes and its malformed checks."""

from amaranth.hdl import Cat, Mux, Signal, unsigned
from amaranth.lib import data

from ...common.arith import at_least, or_tree
from ...common.lanes import split_lanes

__all__ = ["COO_INDEX_BITS", "ENTRY_BITS", "predecoded_layout", "scattered_layout", "predecode",
           "scatter"]

#: Bits of a COO entry's index (chunks of up to 64 elements).
COO_INDEX_BITS = 6
#: Bits of a COO entry: ``[7:2]`` index, ``[1]`` group (inner 0, outer 1), ``[0]`` sign.
ENTRY_BITS = 8


def predecoded_layout(lanes, windows):
    """Layout of a predecoded COO beat of ``lanes`` entries (:func:`predecode`)."""
    lines = data.ArrayLayout(unsigned(8), lanes)
    return data.StructLayout({
        "entries": data.ArrayLayout(unsigned(ENTRY_BITS), lanes),
        "high": lines, "high_outer": lines, "high_sign": lines, "low": lines,
        "reach": data.ArrayLayout(unsigned(windows), lanes),
        "present": unsigned(lanes), "last_entry": unsigned(lanes),
        "last": unsigned(1), "overfull": unsigned(1),
    })


def scattered_layout(lanes, vec_len, windows):
    """Layout of a scattered COO beat (:func:`scatter`) for chunks of ``vec_len`` elements."""
    # Malformed checks of a COO beat: count > lanes, per entry an index >= vec_len (when
    # vec_len < 64), per entry but the first an index not above the previous one.
    bad_bits = 1 + (lanes if vec_len < (1 << COO_INDEX_BITS) else 0) + lanes - 1
    return data.StructLayout({
        "hit": unsigned(vec_len), "outer": unsigned(vec_len),
        "sign": unsigned(vec_len), "reach": unsigned(windows),
        "first_index": unsigned(COO_INDEX_BITS), "last_index": unsigned(COO_INDEX_BITS),
        "bad": unsigned(bad_bits), "any": unsigned(1), "last": unsigned(1),
    })


def predecode(m, beat, *, lanes, windows):
    """Predecode a COO beat of ``lanes`` entries for chunks of ``windows`` windows
    (combinational): per entry, its index split into one-hot high (with presence, and with the
    group or sign bit folded in) and low 3-bit lines, whether it is the last present entry, and
    per window whether its index reaches the window's last position; the raw entries, presence
    and flags of the beat."""
    L, W = lanes, windows
    lane_bits = (L - 1).bit_length()
    pre = Signal(predecoded_layout(lanes, windows), name="coo_pre")
    count = beat.count
    overfull = at_least(count, L + 1)
    present = Signal(L, name="coo_present")
    with m.Switch(count):                  # thermometer: entry j present when j < count
        for c in range(L + 1):
            with m.Case(c):
                m.d.comb += present.eq((1 << c) - 1)
        with m.Default():
            m.d.comb += present.eq((1 << L) - 1)
    entries = split_lanes(m, beat.entries, ENTRY_BITS, L, name="coo_in")
    m.d.comb += [
        pre.entries.eq(beat.entries),
        pre.present.eq(present),
        pre.last_entry.eq(present & ~(present >> 1)),
        pre.last.eq(beat.last),
        pre.overfull.eq(overfull),
    ]
    for j, entry in enumerate(entries):
        index = entry[2:]
        for k in range(8):
            high = present[j] & (index[3:] == k)
            m.d.comb += [
                pre.high[j][k].eq(high),
                pre.high_outer[j][k].eq(high & entry[1]),
                pre.high_sign[j][k].eq(high & entry[0]),
                pre.low[j][k].eq(index[:3] == k),
            ]
        for w in range(W):
            m.d.comb += pre.reach[j][w].eq(at_least(index, ((w + 1) << lane_bits) - 1))
    return pre


def scatter(m, pre, *, lanes, vec_len, windows):
    """Decode the predecoded COO lines ``pre`` (:func:`predecode`) for chunks of ``vec_len``
    elements (combinational): the positions the beat names (one-hot ORed per position, for the
    hit / outer / sign maps), the windows it completes (thermometer), its first and last indices
    and its malformed checks (one bit per check, ORed by the caller)."""
    L, V = lanes, vec_len
    dec = Signal(scattered_layout(lanes, vec_len, windows), name="coo_dec")
    lines = (pre.high, pre.high_outer, pre.high_sign)
    # In a well-formed chunk entry j's index is at least j: lower positions skip it.
    for kind, field in enumerate((dec.hit, dec.outer, dec.sign)):
        for p in range(V):
            m.d.comb += field[p].eq(or_tree(
                lines[kind][j][p >> 3] & pre.low[j][p & 7] for j in range(min(L, p + 1))))
    indices = [pre.entries[j][2:] for j in range(L)]
    for w in range(windows):
        m.d.comb += dec.reach[w].eq(or_tree(pre.last_entry[j] & pre.reach[j][w]
                                            for j in range(L)))
    m.d.comb += dec.last_index.eq(or_tree([Mux(pre.last_entry[j], indices[j], 0)
                                           for j in range(L)]))
    bad = [pre.overfull]
    for j in range(L):
        if V < (1 << COO_INDEX_BITS):
            bad.append(pre.present[j] & at_least(indices[j], V))
        if j:
            bad.append(pre.present[j] & (indices[j] <= indices[j - 1]))
    m.d.comb += [
        dec.bad.eq(Cat(*bad)),
        dec.first_index.eq(indices[0]),
        dec.any.eq(pre.present[0]),
        dec.last.eq(pre.last),
    ]
    return dec
