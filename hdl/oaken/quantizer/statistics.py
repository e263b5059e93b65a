"""The chunk statistics of the Oaken quantizer
(:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`): from a chunk's per-group min and max,
its coding constants (into the statistics queue) and its header (``min_fx``, ``d_fx`` by an
exact division by 15; into the header queue).
"""

from amaranth.hdl import Mux, Signal, signed, unsigned

from ...common.stream_stage import pack_fields
from ..decomposer import THRESHOLDS
from .parts import divide_by_15
from .stages import GROUPS, Stages, register

__all__ = ["chunk_statistics"]


def chunk_statistics(m, unit, acc, chunk_valid, threshold_queue, queues, marks):
    """Turn a chunk's statistics into its coding constants and its header.

    Inputs: ``acc`` and ``chunk_valid`` (the result of
    :func:`~hdl.oaken.quantizer.measure.reduce_chunk`, valid for one cycle per chunk), the
    chunk's thresholds at the head of ``threshold_queue`` (read here, at ``chunk_valid``),
    ``queues`` (the namespace of :func:`~hdl.oaken.quantizer.credits.make_queues`). Per group
    ``span = max - min``, ``min + max``, the zero-span flag and ``min`` (0 for an empty group),
    registered with the ``stats`` cut; the constants (outlier count and per group sum, span,
    zero flag) are written to the statistics queue (``queues.stats``) then, and the header
    (thresholds, ``min_fx = min * 2^F``, ``d_fx = floor((span 2^F + 7) / 15)``, with a
    register after each adder of the division with the ``meta`` cut) to the header queue
    (``queues.hdr``) after the division.

    The marks of the chunk in the registers made are appended to ``marks``. Returns
    ``(chunk_valid, stats_marks)``: the statistics queue's write enable and the number of
    ``marks`` up to that write.
    """
    D, F, S, cuts = unit.data_bits, unit.frac_bits, unit.shift_bits, unit.cuts
    tq, cst, hq = threshold_queue, queues.stats, queues.hdr
    total = acc["count"]
    m.d.comb += tq.r_en.eq(chunk_valid)
    thresholds = {n: tq.r_data[k * D:(k + 1) * D].as_signed()
                  for k, n in enumerate(THRESHOLDS)}

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
        stats = {key: register(m, value, f"stats_{key}") for key, value in stats.items()}
        chunk_valid = register(m, chunk_valid, "stats_valid", reset=True)
        marks.append(chunk_valid)
    stats_marks = len(marks)                    # (the statistics queue is written here)
    fin = Stages(m, chunk_valid, depth=len(unit.div15[1]) if meta_cut else 0, name="chunk")
    constants = {key: stats[key] for key in ("total", *(f"{g}_{name}" for g, _ in GROUPS
                                                        for name in ("sum", "span", "zero")))}
    m.d.comb += [
        cst.w_en.eq(chunk_valid),
        cst.w_data.eq(pack_fields(unit.stats_layout, constants)),
    ]
    # Header: min_fx = min * 2^F; d_fx = floor((span 2^F + 7) / 15).
    n_max = (unit.span_max << F) + 7
    steps = fin.stage_fn(meta_cut)
    header = {n: stats[n] for n in THRESHOLDS}
    for g, _ in GROUPS:
        span = stats[f"{g}_span"]
        n = Signal(unsigned(n_max.bit_length()), name=f"{g}_dividend")
        m.d.comb += n.eq((span << F) + 7)
        header[f"{g}_d"] = divide_by_15(m, n, n_max, stage=steps, name=f"{g}_d")
        header[f"{g}_min"] = stats[f"{g}_min"] << F
    for k in range(len(unit.div15[1]) if meta_cut else 0):
        kept = {key: header[key] for key in (*THRESHOLDS, *(f"{g}_min" for g, _ in GROUPS))}
        header.update(fin.cut(kept, True, f"meta{k}"))
    assert fin.cuts == fin.depth
    marks += fin.valid[1:]
    fields = {n: header[n] for n in THRESHOLDS}
    for g, _ in GROUPS:
        for key in (f"{g}_min", f"{g}_d"):
            field = Signal(signed(unit.meta_bits), name=f"hdr_{key}")
            m.d.comb += field.eq(header[key])        # min sign-extends, d zero-extends
            fields[key] = field
    m.d.comb += [
        hq.w_en.eq(fin.here),
        hq.w_data.eq(pack_fields(unit.hdr_layout, fields)),
    ]
    return chunk_valid, stats_marks
