"""Oaken decomposer: threshold grouping and group shift (Oaken section 4.3-4.4, 5.2; contract 4)."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.lanes import split_lanes
from ..common.params import check_int
from ..common.stream_stage import SkidBuffer, StallPipeline, check_pipeline, pack_fields

__all__ = ["OakenDecomposer", "MIDDLE", "INNER", "OUTER", "THRESHOLDS", "check_lanes"]

#: Optional cuts, in the order ``pipeline`` turns them on (see :class:`OakenDecomposer`).
CUT_ORDER = ("classify", "skid")
#: The depth that closes timing at the paper configuration (docs/units/oaken.md, Timing).
DEFAULT_PIPELINE = 1

#: Group codes on the ``group`` field (contract section 4).
MIDDLE, INNER, OUTER = 0, 1, 2
#: Threshold field names, in the contract order (lowest first).
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
    as the contract's inequalities say.

    Parameters
    ----------
    lanes : int
        Elements per beat, a power of two dividing 64 (default 16).
    data_bits : int
        Width of a signed KV value and of each threshold, 2..32 (default 16).
    pipeline : int
        Register cuts, 0..2 (default 1). Each value adds the next cut of ``CUT_ORDER``:

        0. the output register only: latency 1, the lowest.
        1. ``classify``: the four threshold differences and the two upper comparisons are
           registered before the group decision and the lane multiplexers.
        2. ``skid``: a :class:`~hdl.common.stream_stage.SkidBuffer` on ``o`` (``i.ready`` and the
           clock enable come from flip-flops instead of ``o.ready``); measured slower and larger
           than 1 at the paper configuration (docs/units/oaken.md, Timing), kept available.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Payload ``x`` (``lanes`` x ``data_bits`` signed), ``t_lo_o``, ``t_lo_i``, ``t_hi_i``,
        ``t_hi_o`` (``data_bits`` signed each).
    o : ``Out(stream.Signature(out_layout))``
        Payload ``group`` (``lanes`` x 2: 0 middle, 1 inner, 2 outer), ``side`` (``lanes`` x 1,
        1 = upper side), ``inlier`` and ``outlier`` (``lanes`` x ``data_bits + 1`` signed).

    Latency and throughput: ``latency = 1 + pipeline`` cycles from a transfer on ``i`` to the
    corresponding beat being valid on ``o`` (2 at the default), one beat per cycle at every
    depth; ``i.ready`` is combinational in ``o.ready`` unless the ``skid`` cut is on.

    Raises
    ------
    TypeError, ValueError
        If a parameter is not an integer or out of range (the message names it).
    """

    def __init__(self, *, lanes=16, data_bits=16, pipeline=DEFAULT_PIPELINE):
        self.lanes = check_lanes(lanes)
        self.data_bits = check_int("data_bits", data_bits, min_value=2, max_value=32)
        self.pipeline = check_pipeline(pipeline, max_value=len(CUT_ORDER))
        self.cuts = frozenset(CUT_ORDER[:self.pipeline])
        #: Cycles from a transfer on ``i`` to the corresponding beat being valid on ``o``.
        self.latency = 1 + self.pipeline
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
        cuts = self.cuts
        # The core's output stream: ``o`` itself, or the input of the skid buffer in front of it.
        if "skid" in cuts:
            core = stream.Signature(self.out_layout).create(path=("core",))
            m.submodules.skid = skid = SkidBuffer(self.out_layout)
            wiring.connect(m, core, skid.i)
            wiring.connect(m, skid.o, wiring.flipped(self.o))
        else:
            core = self.o
        pipe = StallPipeline(m, self.i, core, latency=1 + ("classify" in cuts), name="decomp")
        classify = "classify" in cuts

        xs = split_lanes(m, p.x, self.data_bits, self.lanes, name="x")
        S = self.shift_bits
        groups, sides, inliers, outliers = [], [], [], []
        for lane, raw in enumerate(xs):
            x = Signal(signed(self.data_bits), name=f"x_{lane}")
            m.d.comb += x.eq(raw)
            # Every group shift is computed (four subtractors in parallel); the two lower
            # comparisons are the signs of their differences, the two upper ones are
            # comparators. The group then only selects (no arithmetic after the decision).
            diff = {}
            for name in THRESHOLDS:
                diff[name] = Signal(signed(S), name=f"{name}_diff_{lane}")
                m.d.comb += diff[name].eq(x - p[name])
            # x > t as the sign of t - x (D + 1 bits, never overflows): a carry chain's last
            # bit. (Written as x > t, synthesis shares the subtractor of x - t and adds a zero
            # test of its 17 bits after the chain.)
            above_outer = Signal(name=f"above_outer_{lane}")
            above_inner = Signal(name=f"above_inner_{lane}")
            for above, name in ((above_outer, "t_hi_o"), (above_inner, "t_hi_i")):
                past = Signal(signed(S), name=f"{name}_past_{lane}")
                m.d.comb += [past.eq(p[name] - x), above.eq(past[-1])]
            below_outer = diff["t_lo_o"][-1]                       # x < t_lo_o
            below_inner = diff["t_lo_i"][-1]                       # x < t_lo_i
            # Cut "classify": the differences and the comparisons are registered.
            x, above_outer, above_inner, below_outer, below_inner = (
                pipe.stage(v, name=f"{n}_{lane}_c", enable=classify)
                for n, v in (("x", x), ("above_outer", above_outer),
                             ("above_inner", above_inner), ("below_outer", below_outer),
                             ("below_inner", below_inner)))
            diff = {n: pipe.stage(v, name=f"{n}_diff_{lane}_c", enable=classify)
                    for n, v in diff.items()}
            outer = Signal(name=f"outer_{lane}")
            inner = Signal(name=f"inner_{lane}")
            middle = Signal(name=f"middle_{lane}")
            m.d.comb += [
                outer.eq(above_outer | below_outer),
                inner.eq(~outer & ~below_inner & ~above_inner),
                middle.eq(~outer & ~inner),
            ]
            groups.append(Mux(outer, OUTER, Mux(inner, INNER, MIDDLE)).as_unsigned()[:2])
            sides.append(Mux(outer, above_outer, Mux(inner, ~x[-1], above_inner)))
            inliers.append(Mux(middle, Mux(above_inner, diff["t_hi_i"], diff["t_lo_i"]),
                               0)[:S])
            outliers.append(Mux(outer, Mux(above_outer, diff["t_hi_o"], diff["t_lo_o"]),
                                Mux(inner, x, 0))[:S])

        out = pipe.stage(pack_fields(self.out_layout, {"group": groups, "side": sides,
                                                       "inlier": inliers, "outlier": outliers}),
                         name="out")
        m.d.comb += core.payload.eq(out)
        return m
