"""The arithmetic of the Oaken dequantizer (:class:`hdl.oaken.dequantizer.dequantizer.OakenDequantizer`):
per lane, the group's metadata selected, ``v = min + q d`` without a multiplier, the rounding
shift, the threshold offset and the saturation, with the optional register cuts between them."""

from amaranth.hdl import Array, Const, Mux, Signal, signed

from ...common.lanes import split_lanes

__all__ = ["dequantize"]


def _offset(unit, m, lane, outlier, outer, sign, below, shared):
    """The threshold term of lane ``lane`` for x' = offset + (-m if negated else m), with
    -m = ~m + 1 and the 1 in the offset; ``below`` is m < 0 (middle: t_lo_i instead of
    t_hi_i)."""
    offset = Signal(signed(unit.data_bits + 1), name=f"offset_{lane}")
    with m.If(~outlier):
        m.d.comb += offset.eq(Mux(below, shared["t_lo_i"], shared["t_hi_i"]))
    with m.Elif(outer):
        m.d.comb += offset.eq(Mux(sign, shared["t_lo_o1"], shared["t_hi_o"]))
    with m.Else():
        m.d.comb += offset.eq(Mux(sign, 1, 0))
    return offset


def dequantize(unit, m, pipe, codes, lane_hit, lane_outer, lane_sign, header):
    """Per lane of ``unit`` (the dequantizer: its lanes, widths and cuts): v = min + q d,
    m = v >> F, offset, saturation; the cuts of ``unit.cuts`` between the steps, placed on
    ``pipe``. ``codes`` are the dense codes, ``lane_hit``, ``lane_outer`` and ``lane_sign`` the
    window's position flags and ``header`` the chunk's stored header. Returns the saturated
    lane values (combinational, for the output register or the queue).

    ``q d = q[1:0] d + 4 q[3:2] d``, each a 4:1 choice of 0, d, 2d and 3d (3d is formed
    once per chunk with the header): no multiplier, two adders per lane. ``min`` already
    holds the rounding constant.
    """
    F, D = unit.frac_bits, unit.data_bits
    cuts = unit.cuts
    codes = split_lanes(m, codes, 4, unit.lanes, name="code")
    shared = {n: header[n] for n in ("t_lo_i", "t_hi_i", "t_hi_o", "t_lo_o1")}

    def cut(name, values, label):
        return [pipe.stage(v, name=f"{label}_{k}", enable=name in cuts)
                for k, v in enumerate(values)]

    def cut_shared(name):
        for n in list(shared):
            shared[n] = pipe.stage(shared[n], name=f"{name}_{n}", enable=name in cuts)

    def pick(group_of, outlier, outer):
        return Mux(outlier, Mux(outer, group_of("out"), group_of("in")), group_of("mid"))

    lanes = []
    for lane in range(unit.lanes):
        outlier, outer, sign = lane_hit[lane], lane_outer[lane], lane_sign[lane]
        minimum = pick(lambda g: header[f"{g}_min"], outlier, outer)
        step = pick(lambda g: header[f"{g}_d"], outlier, outer)
        step3 = pick(lambda g: header[f"{g}_d3"], outlier, outer)
        lanes.append(cut("select", (codes[lane], minimum, step, step3, outlier, outer,
                                    sign), f"s{lane}"))
    cut_shared("select")

    for lane, (q, minimum, step, step3, outlier, outer, sign) in enumerate(lanes):
        multiples = (0, step, step << 1, step3)
        low = Signal(signed(unit.meta_bits + 2), name=f"low_{lane}")
        high = Signal(signed(unit.meta_bits + 2), name=f"high_{lane}")
        m.d.comb += [low.eq(Array(multiples)[q[:2]]), high.eq(Array(multiples)[q[2:]])]
        partial = Signal(signed(unit.meta_bits + 3), name=f"partial_{lane}")
        m.d.comb += partial.eq(minimum + low)
        lanes[lane] = cut("partial", (partial, high, outlier, outer, sign), f"p{lane}")
    cut_shared("partial")

    # With the "offset" cut the sum stage also applies the sign (~m; the + 1 is in the
    # offset) and chooses the offset, so that the offset stage is two adders side by side
    # and one multiplexer level: middle elements take m + t_lo_i instead of m + t_hi_i
    # when m < 0, the sign of m being the last bit of the sum's adder.
    parallel = "offset" in cuts
    for lane, (partial, high, outlier, outer, sign) in enumerate(lanes):
        value = Signal(signed(unit.meta_bits + 5), name=f"v_{lane}")
        m.d.comb += value.eq(partial + (high << 2))
        mag = value >> F
        extra = ()
        if parallel:
            negate = outlier & sign
            mag = Mux(negate, ~mag, mag)
            offset = _offset(unit, m, lane, outlier, outer, sign, Const(0, 1), shared)
            low_offset = Signal(signed(D), name=f"offset_low_{lane}")
            m.d.comb += low_offset.eq(Mux(outlier, 0, shared["t_lo_i"]))
            extra = (offset, low_offset)
        lanes[lane] = cut("sum", (mag, outlier, outer, sign, *extra), f"m{lane}")
    cut_shared("sum")

    lo, hi = -(1 << (D - 1)), (1 << (D - 1)) - 1
    results = []
    for lane, (mag, outlier, outer, sign, *extra) in enumerate(lanes):
        full = Signal(signed(D + 8), name=f"xfull_{lane}")
        if parallel:
            offset, low_offset = extra
            added = Signal(signed(D + 8), name=f"xadded_{lane}")
            lowered = Signal(signed(D + 8), name=f"xlowered_{lane}")
            m.d.comb += [
                added.eq(offset + mag),
                lowered.eq(low_offset + mag),
                full.eq(Mux(~outlier & mag[-1], lowered, added)),
            ]
        else:
            offset = _offset(unit, m, lane, outlier, outer, sign, mag[-1], shared)
            m.d.comb += full.eq(offset + Mux(outlier & sign, ~mag, mag))
        full = pipe.stage(full, name=f"o_full_{lane}", enable="offset" in cuts)
        top = full[D - 1:]
        sat = Signal(signed(D), name=f"xsat_{lane}")
        m.d.comb += sat.eq(Mux((top == 0) | (top == (1 << len(top)) - 1), full[:D],
                               Mux(full[-1], lo, hi)))
        results.append(sat)
    return results
