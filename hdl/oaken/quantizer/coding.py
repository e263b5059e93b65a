"""The coding pipeline of the Oaken quantizer
(:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`), the back of the unit: every beat of a
chunk whose statistics are queued is issued from the chunk buffer, its lanes' 4-bit codes are
found by binary search over the code boundaries (Oaken Fig. 9(a) steps 2, 3) and, beside the
search, its outliers become COO entries, compacted (the zero-remove shifter) and rotated to
the fill position of the chunk's COO beat. The codes go to the ``dense`` queue, the COO side to
the pre-queue of the gearbox (:mod:`hdl.oaken.quantizer.gearbox`).
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Mux, Signal, signed, unsigned

from ...common.invariants import invariant
from ...common.stream_stage import distinct_copies, pack_fields
from ..decomposer import MIDDLE, OUTER
from ..dequantizer.coo import ENTRY_BITS
from .parts import code_step, compact, prefix_count, rotate, select_by_group
from .stages import GROUPS, Stages, chunk_position

__all__ = ["code_beats", "coo_fill", "fetch_beat", "prefix_split", "search_codes",
           "select_constants", "write_coded", "writes_ordered"]


def writes_ordered(word):
    """``word`` (a view of a COO pre-queue word, ``pre_layout``) has its second write only
    with its first."""
    return ~word.write_b | word.write_a


def prefix_split(lane_bits):
    """The levels of the prefix counts, the compaction and the rotation done before the
    ``select`` cut and the first code step: ``range(prefix_split(lane_bits))``."""
    return (lane_bits + 1) // 2


def code_beats(m, platform, unit, credits, queues, chunk_valid):
    """Build the coding pipeline of ``unit`` (an ``OakenQuantizer``): a beat issues (at
    ``credits.issue_ok``, a flip-flop) from the chunk buffer with its chunk's constants from
    the statistics queue (``queues``: the namespace of
    :func:`~hdl.oaken.quantizer.credits.make_queues`; ``chunk_valid``: the statistics queue's
    write, counted by ``credits``), and ``unit.code_latency`` cycles later (one register per
    cut of ``fetch``, ``select``, three of ``code``, ``out``) its codes are written to the
    ``dense`` queue and its COO side to the pre-queue.

    Returns a namespace: ``issued`` (the beats of the chunk being coded issued so far) and
    ``coded`` (the beats in the pipeline's registers), for the credits' invariants.
    """
    m.d.comb += credits.issue.eq(credits.issue_ok)
    back, fetched, chunk_copies, issued = fetch_beat(m, platform, unit, credits, queues,
                                                     chunk_valid)
    beat = select_constants(m, unit, back, fetched, chunk_copies)
    result = search_codes(m, platform, unit, back, beat)
    write_coded(m, platform, unit, back, result, queues)
    return SimpleNamespace(issued=issued, coded=sum(back.valid[1:]))


def fetch_beat(m, platform, unit, credits, queues, chunk_valid):
    """Issue: at ``credits.issue`` read the chunk buffer, and the statistics queue at the
    chunk's last beat (a window counter gives the beat's position); drive the credits'
    ``stats_write`` (``chunk_valid``) and ``stats_pop``. With the ``fetch`` cut the reads are
    registered, the statistics in a copy per group of four lanes.

    Returns ``(back, fetched, chunk_copies, issued)``: the coding pipeline's
    :class:`~hdl.oaken.quantizer.stages.Stages` (the ``fetch`` cut made); the issued beat
    after the cut (``word``: the decomposed beat, a view of ``word_layout``; ``window``,
    ``first``, ``last``: its position in the chunk); the chunk's constants per group of lanes
    (views of ``stats_layout``); and the beats of the chunk issued so far.
    """
    cuts = unit.cuts
    buf, cst = queues.buffer, queues.stats
    issue = credits.issue
    first_w, last_w, window, _ = chunk_position(m, platform, issue, windows=unit.windows,
                                                name="window")
    issued = window                             # (beats of the chunk being coded)
    m.d.comb += [credits.stats_write.eq(chunk_valid), credits.stats_pop.eq(issue & last_w)]
    m.d.comb += [buf.r_en.eq(issue), cst.r_en.eq(issue & last_w)]
    back = Stages(m, issue, depth=unit.code_latency, name="code")
    # Cut "fetch": the queues' outputs (asynchronous LUT RAM reads) are registered first,
    # the chunk's statistics in a copy per group of four lanes
    # (:func:`~hdl.common.stream_stage.distinct_copies`; one register feeding all 16 lanes'
    # selections measured 148.2 MHz on ECP5).
    fetched = back.cut({"word": buf.r_data, "window": window, "first": first_w,
                        "last": last_w}, "fetch" in cuts, "fetch")
    word = Signal(unit.word_layout, name="coded_word")
    m.d.comb += word.eq(fetched["word"])
    fetched["word"] = word
    parts = unit.decomposer_parts
    chunk_copies = []
    for k, value in enumerate(distinct_copies(m, cst.r_data, parts, name="fetch_chunk")
                              if "fetch" in cuts else [cst.r_data] * parts):
        chunk = Signal(unit.stats_layout, name=f"coded_chunk_{k}")
        m.d.comb += chunk.eq(value)
        chunk_copies.append(chunk)
    return back, fetched, chunk_copies, issued


def select_constants(m, unit, back, fetched, chunk_copies):
    """Per lane of the issued beat ``fetched`` (:func:`fetch_beat`'s) select its group's
    constants from ``chunk_copies``: ``u = 2 v - (min + max)``, the span and the zero-span
    flag; form its COO entry (``index = window * lanes + lane``, the group, the sign; 0 for a
    middle lane) and flag. Beside them, prefix counts of the unflagged lanes below each lane
    (the zero-remove shifts) and of the flagged ones (the beat's outlier count ``n``), their
    levels split around the ``select`` cut (the cut is made here).

    Returns the beat's state (a dict of values and lists of values: ``u``, ``span``,
    ``zero``, ``entry``, ``flag``, ``shift``, ``n``, ``first``, ``last``, ``total``) after the
    cut, for :func:`search_codes`.
    """
    L, D, S, lb = unit.lanes, unit.data_bits, unit.shift_bits, unit.lane_bits
    per = L // unit.decomposer_parts
    word, window = fetched["word"], fetched["window"]
    first_w, last_w = fetched["first"], fetched["last"]
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
    split = prefix_split(lb)
    # The beat's outlier count `n` from a prefix count of the flags of its own (only its
    # top sum is kept), split the same way: `L - zeros` put a subtraction after the
    # prefix's last levels (measured 7.1 ns on ECP5).
    zeros = prefix_count(m, [~flag for flag in lanes["flag"]], width=lb + 1,
                         levels=range(split), name="coo_prefix")
    ones = prefix_count(m, lanes["flag"], width=lb + 1, levels=range(split),
                        name="coo_ones")
    beat = {**lanes, "zeros": zeros, "ones": ones, "first": first_w, "last": last_w,
            "total": chunk_copies[0].total}
    beat = back.cut(beat, "select" in unit.cuts, "select")
    zeros = prefix_count(m, beat.pop("zeros"), width=lb + 1, levels=range(split, lb),
                         name="coo_prefix")
    ones = prefix_count(m, beat.pop("ones"), width=lb + 1, levels=range(split, lb),
                        name="coo_ones")
    beat["shift"] = [Const(0, max(1, lb))] + [z[:max(1, lb)] for z in zeros[:-1]]
    beat["n"] = Signal(range(L + 1), name="coo_n")
    m.d.comb += beat["n"].eq(ones[-1])
    return beat


def search_codes(m, platform, unit, back, beat):
    """The code search over ``beat`` (:func:`select_constants`' state): per lane
    ``r = 15 u``, then four steps of :func:`~hdl.oaken.quantizer.parts.code_step` (one code
    bit each, most significant first; the ``code`` cut registers after each of the first
    three); the code is 0 for a zero-span group. Beside it the COO side: the fill position
    (:func:`coo_fill`, after the first cut), the compaction (two steps), then the first
    levels of the rotation.

    Returns the coded beat: ``codes`` (per lane, 4 bits), ``entries`` (rotated by the low
    levels only) and the gearbox's fields ``h``, ``wrap``, ``write_a``, ``write_b``,
    ``full_last``, ``pcount``, for :func:`write_coded`.
    """
    L, D, lb, cuts = unit.lanes, unit.data_bits, unit.lane_bits, unit.cuts
    split = prefix_split(lb)
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
            beat.update(coo_fill(m, unit, back.here, beat))
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
    return {"codes": codes, "entries": beat["entry"],
            **{key: beat[key] for key in ("h", "wrap", "write_a", "write_b", "full_last",
                                           "pcount")}}


def write_coded(m, platform, unit, back, result, queues):
    """Write the coded beat ``result`` (:func:`search_codes`') after the ``out`` cut: its
    codes to the ``dense`` queue, its COO side to the pre-queue (``queues``: the namespace of
    :func:`~hdl.oaken.quantizer.credits.make_queues`) with the rotation's last levels done and
    ``below``, the mask of the slots under the fill position. Both writes happen at the
    coding pipeline's output valid."""
    L, lb = unit.lanes, unit.lane_bits
    dq, pq = queues.dense, queues.pre
    result = back.cut(result, "out" in unit.cuts, "out")
    invariant(m, platform, ~result["write_b"] | result["write_a"], name="out_invariant")
    assert back.cuts == back.depth
    result["entries"] = rotate(m, result["entries"], result["h"],
                               levels=range(prefix_split(lb), lb), name="coo_rotate4")
    result["below"] = Cat(*((result["h"] > s) if s < L - 1 else Const(0, 1)
                            for s in range(L)))
    m.d.comb += [
        dq.w_en.eq(back.here),
        dq.w_data.eq(pack_fields(unit.dense_layout, {"codes": result["codes"]})),
        pq.w_en.eq(back.here),
        pq.w_data.eq(pack_fields(unit.pre_layout, {
            key: result[key] for key in ("entries", "below", "wrap", "write_a", "write_b",
                                         "full_last", "pcount")})),
    ]


def coo_fill(m, unit, valid, beat):
    """The COO gearbox's view of a coded beat: the chunk's running outlier count (a
    register updated while ``valid``) gives the fill position ``h`` of this beat's entries;
    whether they complete a beat (``wrap``), the remainder's count, whether the chunk ends
    with a partial (or empty) beat, and the count after this beat (``after``: a full beat
    is the chunk's last when it equals the chunk's total)."""
    L, lb = unit.lanes, unit.lane_bits
    cum = Signal(range(unit.vec_len + 1), name="coo_cum", reset_less=True)
    before = Signal(range(unit.vec_len + 1), name="coo_before")
    after = Signal(range(unit.vec_len + 1), name="coo_after")
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
