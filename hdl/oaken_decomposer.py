"""Oaken decomposer: threshold grouping and group shift (Oaken section 4.3-4.4, 5.2; SPEC 4)."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lanes import split_lanes
from .params import check_int
from .stream_stage import output_register

__all__ = ["OakenDecomposer", "MIDDLE", "INNER", "OUTER", "THRESHOLDS", "check_lanes"]

#: Group codes on the ``group`` field (SPEC section 4).
MIDDLE, INNER, OUTER = 0, 1, 2
#: Threshold field names, in SPEC order (lowest first).
THRESHOLDS = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")


def check_lanes(lanes, vec_len=64):
    """Return ``lanes`` if it is a power of two dividing ``vec_len``, else raise."""
    lanes = check_int("lanes", lanes, min_value=1, max_value=vec_len)
    if lanes & (lanes - 1) or vec_len % lanes:
        raise ValueError(f"lanes must be a power of two dividing vec_len ({vec_len}), "
                         f"not {lanes}")
    return lanes


class OakenDecomposer(wiring.Component):
    """Split KV values into Oaken's three groups and shift each group by its threshold.

    Oaken's quantization engine first compares every value with the four offline-profiled
    thresholds and subtracts the threshold of its side (Fig. 9(a), step 1; Eq. 1 and 4):

    * outer, upper side ``x > t_hi_o``: ``s = x - t_hi_o``; lower side ``x < t_lo_o``:
      ``s = x - t_lo_o``;
    * inner ``t_lo_i <= x <= t_hi_i``: ``s = x``, side = ``x >= 0``;
    * middle otherwise: upper side ``x > t_hi_i``: ``s = x - t_hi_i``, lower side
      ``s = x - t_lo_i``.

    The middle value goes to the ``inlier`` lane and the inner/outer value to the ``outlier``
    lane; the lane not taken carries 0 (the zero the paper's dense/sparse split leaves).

    Thresholds arrive with every beat, so a layer change costs nothing. Misordered thresholds
    are not an error here (there is no error path on a stream); the rules are applied in the
    priority order outer-upper, outer-lower, inner, middle, exactly as
    ``golden.oaken.decompose(..., check_order=False)`` does. ``x == t_hi_o`` is middle
    (upper), ``x == t_lo_o`` middle (lower), ``x == t_lo_i`` and ``x == t_hi_i`` inner, all
    as SPEC's inequalities say.

    Parameters
    ----------
    lanes : int
        Elements per beat, a power of two dividing 64 (default 16).
    data_bits : int
        Width of a signed KV value and of each threshold, 2..32 (default 16).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Payload ``x`` (``lanes`` x ``data_bits`` signed), ``t_lo_o``, ``t_lo_i``, ``t_hi_i``,
        ``t_hi_o`` (``data_bits`` signed each).
    o : ``Out(stream.Signature(out_layout))``
        Payload ``group`` (``lanes`` x 2: 0 middle, 1 inner, 2 outer), ``side`` (``lanes`` x 1,
        1 = upper side), ``inlier`` and ``outlier`` (``lanes`` x ``data_bits + 1`` signed).

    Latency and throughput: one cycle, one beat per cycle; ``i.ready`` is combinational in
    ``o.ready``.

    Raises
    ------
    TypeError, ValueError
        If a parameter is not an integer or out of range (the message names it).
    """

    latency = 1

    def __init__(self, *, lanes=16, data_bits=16):
        self.lanes = check_lanes(lanes)
        self.data_bits = check_int("data_bits", data_bits, min_value=2, max_value=32)
        self.shift_bits = self.data_bits + 1
        value = signed(self.data_bits)
        self.in_layout = data.StructLayout({
            "x": data.ArrayLayout(value, self.lanes),
            **{name: value for name in THRESHOLDS},
        })
        self.out_layout = data.StructLayout({
            "group": data.ArrayLayout(unsigned(2), self.lanes),
            "side": data.ArrayLayout(unsigned(1), self.lanes),
            "inlier": data.ArrayLayout(signed(self.shift_bits), self.lanes),
            "outlier": data.ArrayLayout(signed(self.shift_bits), self.lanes),
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.i.payload
        out = Signal(self.out_layout, reset_less=True)
        m.d.comb += self.o.payload.eq(out)

        xs = split_lanes(m, p.x, self.data_bits, self.lanes, name="x")
        groups, sides, inliers, outliers = [], [], [], []
        for lane, raw in enumerate(xs):
            x = Signal(signed(self.data_bits), name=f"x_{lane}")
            m.d.comb += x.eq(raw)
            outer_hi = Signal(name=f"outer_hi_{lane}")
            outer = Signal(name=f"outer_{lane}")
            inner = Signal(name=f"inner_{lane}")
            above_inner = Signal(name=f"above_inner_{lane}")
            m.d.comb += [
                outer_hi.eq(x > p.t_hi_o),
                outer.eq(outer_hi | (x < p.t_lo_o)),
                above_inner.eq(x > p.t_hi_i),
                inner.eq(~outer & (x >= p.t_lo_i) & ~above_inner),
            ]
            middle = ~outer & ~inner
            # The threshold subtracted: one subtractor per lane behind a 5:1 select.
            shift = Signal(signed(self.data_bits), name=f"shift_{lane}")
            with m.If(outer_hi):
                m.d.comb += shift.eq(p.t_hi_o)
            with m.Elif(outer):
                m.d.comb += shift.eq(p.t_lo_o)
            with m.Elif(inner):
                m.d.comb += shift.eq(0)
            with m.Elif(above_inner):
                m.d.comb += shift.eq(p.t_hi_i)
            with m.Else():
                m.d.comb += shift.eq(p.t_lo_i)
            s = Signal(signed(self.shift_bits), name=f"s_{lane}")
            m.d.comb += s.eq(x - shift)
            groups.append(Mux(outer, OUTER, Mux(inner, INNER, MIDDLE)).as_unsigned()[:2])
            sides.append(Mux(outer, outer_hi, Mux(inner, x >= 0, above_inner)))
            inliers.append(Mux(middle, s, 0)[:self.shift_bits])
            outliers.append(Mux(middle, 0, s)[:self.shift_bits])

        load = output_register(m, self.i, self.o)
        with m.If(load):
            m.d.sync += out.as_value().eq(Cat(*groups, *sides, *inliers, *outliers))
        return m
