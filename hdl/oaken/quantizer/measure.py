"""The measurement of the Oaken quantizer (:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`):
per decomposed beat the lanes' values, signs and groups (written to the chunk buffer) and per
group a min and a max tree over the lanes, then the reduction of a chunk's beats to its
statistics (per-group min and max, present flags, outlier count).
"""

from amaranth.hdl import Cat, Mux, Signal, Value, signed

from ...common.arith import adder_tree_cut, or_tree
from ...common.lanes import split_lanes
from ...common.stream_stage import pack_fields
from ..decomposer import MIDDLE
from .parts import min_max_tree, pair_leaves
from .stages import GROUPS, Stages, register

__all__ = ["BEAT_TREE_MAX", "measure_beats", "reduce_chunk"]

#: Chunks of up to this many beats are reduced by a tree over their beats after the last one;
#: longer ones by running accumulators (see :func:`reduce_chunk`).
BEAT_TREE_MAX = 8


def measure_beats(m, unit, decomposers, side, buffer, marks):
    """Measure every decomposed beat of ``unit`` (an ``OakenQuantizer``).

    Inputs: the outputs of the ``decomposers`` (:func:`~hdl.oaken.quantizer.front.decompose`)
    and ``side`` (the beat's ``first`` and ``last`` flags beside them). Per lane ``v = s``
    (middle) or ``|s|`` (inner, outer), the sign and the group, registered with the ``abs``
    cut, then written to the chunk buffer ``buffer``. Per group a min and a max tree over the
    lanes (the first level compares the lanes in pairs, one comparator shared by the six
    trees), the group's present flag and the beat's outlier count, with the registers of the
    ``tree`` and ``lanes`` cuts; the beat's flags are delayed beside them. Every register's
    mark of a chunk's last beat is appended to ``marks``.

    Returns ``(here, beat, trees, count)``: the valid bit after the last register, the beat's
    ``first``, ``last`` and per-group ``present`` flags, the trees' results
    (``"<group>_min"``, ``"<group>_max"``) and the outlier count.
    """
    L, D, S, cuts = unit.lanes, unit.data_bits, unit.shift_bits, unit.cuts
    per = L // unit.decomposer_parts
    meas = Stages(m, decomposers[0].o.valid,
                  depth=("abs" in cuts) + len(unit.tree_levels) + unit.pair_cut
                  + len(unit.split_levels),
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
        buffer.w_en.eq(meas.here),
        buffer.w_data.eq(pack_fields(unit.word_layout,
                                     {k: state[k] for k in ("group", "sign", "v")})),
    ]
    # Level 1: the lanes in pairs, one comparator per pair shared by the six trees; then
    # per group a min and a max tree over the pairs.
    top, bottom = (1 << D) - 1, -(1 << D)
    trees = {}
    stage = meas.stage_fn(True)
    levels = unit.tree_levels
    members = {code: [state["member"][lane][k] for lane in range(L)]
               for k, (_, code) in enumerate(GROUPS)}
    # (With the "tree" cut the pairs' comparisons are registered before the selection.)
    pairs = pair_leaves(m, state["v"], members, top=top, bottom=bottom,
                        stage=meas.stage_fn(unit.pair_cut), name="pair")
    for g, code in GROUPS:
        for k, kind in enumerate(("min", "max")):
            leaves = pairs[code][k]
            if 1 in levels:
                leaves = [stage(v, f"{g}_{kind}_l1_{j}_r") for j, v in enumerate(leaves)]
            trees[f"{g}_{kind}"] = min_max_tree(m, leaves, minimum=kind == "min",
                                                cut_levels=levels, stage=stage,
                                                name=f"{g}_{kind}", first_level=2,
                                                split_levels=unit.split_levels)
        trees[f"{g}_present"] = or_tree(members[code])
    # The beat's outlier count, its adder tree registered level by level with the trees.
    trees["count"] = adder_tree_cut([state["group"][lane] != MIDDLE for lane in range(L)],
                                    cut_after=levels | ({0} if unit.pair_cut else set()),
                                    register=lambda v: stage(v, None))
    beat = {key: state[key] for key in side}
    beat["present"] = [trees.pop(f"{g}_present") for g, _ in GROUPS]
    count = trees.pop("count")
    for k in range(len(unit.split_levels)):
        count = stage(count, f"count_split{k}")
    for _ in range(len(levels) + unit.pair_cut + len(unit.split_levels)):
        beat = meas.cut(beat, True, f"tree{meas.cuts}")
        marks.append(meas.here & beat["last"])
    assert meas.cuts == meas.depth
    return meas.here, beat, trees, count


def reduce_chunk(m, unit, here, beat, trees, count, marks):
    """The chunk's statistics from its beats' (:func:`measure_beats`' results, valid on
    ``here``: per-group min and max, present flags, outlier count): ``(values, valid)``,
    registers valid for a cycle after the chunk's last beat (plus the levels of the beat
    tree, ``unit.chunk_levels`` cycles in all). The valid bits of its registers are appended
    to ``marks``.

    With up to ``BEAT_TREE_MAX`` beats per chunk the beats' results are kept in a shift
    register and reduced after the last beat by a tree with a register after each level:
    no loop through a comparator. With more, running accumulators (a comparator and a
    multiplexer in a loop)."""
    W, S = unit.windows, unit.shift_bits
    keys = [f"{g}_{kind}" for g, _ in GROUPS for kind in ("min", "max")]
    current = {**{key: trees[key] for key in keys}, "present": Cat(*beat["present"]),
               "count": count}
    last = beat["last"]
    if W > BEAT_TREE_MAX:
        first = beat["first"]
        acc = {}
        for key in keys:
            value = current[key]
            running = Signal(signed(S), name=f"acc_{key}", reset_less=True)
            better = (running < value) if key.endswith("min") else (running > value)
            with m.If(here):
                m.d.sync += running.eq(Mux(first | ~better, value, running))
            acc[key] = running
        acc["present"] = Signal(len(GROUPS), name="acc_present", reset_less=True)
        acc["count"] = Signal(range(unit.vec_len + 1), name="acc_count", reset_less=True)
        with m.If(here):
            m.d.sync += [
                acc["present"].eq(current["present"] | Mux(first, 0, acc["present"])),
                acc["count"].eq(current["count"] + Mux(first, 0, acc["count"])),
            ]
        marks.append(register(m, here & last, "chunk_valid", reset=True))
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
    split = "beats" in unit.cuts
    level = 0
    while True:
        level += 1
        combined = []
        for k in range(0, len(entries), 2):
            if k + 1 == len(entries):
                # Unpaired: delayed like the pairs (by their comparison register too).
                combined.append({key: register(m, value, f"chunk_l{level}_odd_{key}")
                                 for key, value in entries[k].items()}
                                if split else entries[k])
                continue
            a, b = entries[k], entries[k + 1]
            takes_a = {key: (a[key] < b[key]) if key.endswith("min") else (a[key] > b[key])
                       for key in keys}
            if split:
                # Cut "beats": the comparisons and both operands registered, then selected.
                a, b, takes_a = (
                    {key: register(m, value, f"chunk_l{level}_{side}_{key}_{k // 2}")
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
        entries = [{key: register(m, value, f"chunk_l{level}_{key}_{k}")
                    for key, value in entry.items()} for k, entry in enumerate(combined)]
        valid = register(m, valid, f"chunk_l{level}_valid", reset=True)
        marks.append(valid)
        if split:
            valid = register(m, valid, f"chunk_l{level}_compared_valid", reset=True)
            marks.append(valid)
        if len(entries) == 1:
            break
    result = dict(entries[0])
    count = Signal(range(unit.vec_len + 1), name="chunk_count")
    m.d.comb += count.eq(result["count"])
    result["count"] = count
    return result, valid
