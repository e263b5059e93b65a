"""The loop circuit of Orizuru (:class:`hdl.kllm.orizuru.orizuru.Orizuru`, ``pipeline=0``) for the unrolled
structure and the scan: a vector initialised in the edge that accepts it (the whole bottom-up
initialisation combinational from ``i.payload``), then popped once per cycle, each pop
maintaining its path in the same cycle (the scan recomputes both trees each cycle instead)."""

from amaranth.hdl import Array, Cat, Const, Mux, Signal

from ...common.fp16 import Fp16TotalOrderCompare
from ...common.lanes import split_lanes

__all__ = ["elaborate_loop"]


def _compare(m, name, a, b):
    """``a > b`` in totalOrder through a comparator instance."""
    cmp = Fp16TotalOrderCompare()
    m.submodules[name] = cmp
    m.d.comb += [cmp.a.eq(a), cmp.b.eq(b)]
    return cmp.gt


def _max_bit(gt_right_left, right_avail, left_avail):
    # Max tree: a popped leaf is below every value; ties go left. None: both present.
    if right_avail is None:
        return gt_right_left
    return right_avail & (~left_avail | gt_right_left)


def _min_bit(gt_right_left, right_avail, left_avail):
    # Min tree: a popped leaf is above every value; right wins if right <= left.
    if right_avail is None:
        return ~gt_right_left
    return Mux(right_avail, ~left_avail | ~gt_right_left, ~left_avail)


def _winner_signals(orizuru, m, prefix, v, bit, right, left, with_avail, keep=True):
    """The winner of node ``v`` as named signals (value, index[, avail]) selected by
    ``bit`` between the children's winners: the paper's MUX passing its winner up, O(1)
    per node (indexing the leaves by a winner index instead costs an n:1 mux each)."""
    if not keep:
        return None
    fields = [("value", 16), ("index", orizuru.levels)] + ([("avail", 1)] if with_avail else [])
    winner = {}
    for field, width in fields:
        winner[field] = Signal(width, name=f"{prefix}_{field}_{v}")
        m.d.comb += winner[field].eq(Mux(bit, right[field], left[field]))
    return winner


def _leaf(orizuru, lane, value, avail):
    leaf = {"value": value, "index": Const(lane, orizuru.levels)}
    if avail is not None:
        leaf["avail"] = avail
    return leaf


def _full_tree(orizuru, m, prefix, values, avail, rule, leaf_bits=None, need_root=True):
    """Bits of a complete tree over ``values`` (combinational), bottom-up, and the root's
    winner. ``avail`` (an n-bit value) None means every leaf is present (initialisation);
    ``leaf_bits`` overrides the comparisons of the leaf-level nodes."""
    n = orizuru.n
    node = [None] * (2 * n)
    for lane in range(n):
        node[n + lane] = _leaf(orizuru, lane, values[lane], None if avail is None else avail[lane])
    bits = [None] * n
    for v in range(n - 1, 0, -1):
        left, right = node[2 * v], node[2 * v + 1]
        if leaf_bits is not None and v >= n // 2:
            bit = leaf_bits[v - n // 2]
        else:
            gt = _compare(m, f"{prefix}_{v}", right["value"], left["value"])
            if avail is None:
                bit = rule(gt, None, None)
            else:
                bit = rule(gt, right["avail"], left["avail"])
        bits[v] = Signal(name=f"{prefix}_bit_{v}")
        m.d.comb += bits[v].eq(bit)
        keep = v > 1 or need_root
        node[v] = _winner_signals(orizuru, m, prefix, v, bits[v], right, left,
                                  avail is not None, keep)
    return bits, (node[1]["index"] if need_root else None)


def elaborate_loop(orizuru, m):
    """The loop circuit of ``orizuru`` (``pipeline=0``; see :class:`hdl.kllm.orizuru.orizuru.Orizuru`),
    built in ``m``: initialisation in the accepting edge, one pop and its path maintenance per
    cycle."""
    n = orizuru.n

    leaves = [Signal(16, name=f"leaf_{i}", reset_less=True) for i in range(n)]
    avail_max = Signal(n)
    avail_min = Signal(n)
    loaded = orizuru.o.valid           # high while a vector is being popped
    pops = Signal(range(max(orizuru.k, 2)))  # beats already sent for this vector

    # --- the current winners (pop: follow bits from the root, no comparison) ---------------
    if orizuru.structure == "unrolled":
        max_bits = [Signal(name=f"max_node_{v}") if v else None for v in range(n)]
        min_bits = [Signal(name=f"min_node_{v}") if v else None for v in range(n)]
        max_index = orizuru.follow_winner(m, max_bits, "max")
        min_index = orizuru.follow_winner(m, min_bits, "min")
    else:
        _, max_index = _full_tree(orizuru, m, "scan_max", leaves, avail_max, _max_bit)
        _, min_index = _full_tree(orizuru, m, "scan_min", leaves, avail_min, _min_bit)

    leaf_array = Array(leaves)
    last_beat = pops == orizuru.k - 1
    popped_max = Signal(n)
    popped_min = Signal(n)
    m.d.comb += [
        popped_max.eq(Cat(max_index == lane for lane in range(n))),
        popped_min.eq(Cat(min_index == lane for lane in range(n))),
        orizuru.o.payload.max_index.eq(max_index),
        orizuru.o.payload.max_value.eq(leaf_array[max_index]),
        orizuru.o.payload.min_index.eq(min_index),
        orizuru.o.payload.min_value.eq(leaf_array[min_index]),
        orizuru.o.payload.last.eq(last_beat),
        orizuru.o.payload.mask.eq(Mux(last_beat,
                                      ~avail_max | ~avail_min | popped_max | popped_min, 0)),
    ]

    pop = orizuru.o.valid & orizuru.o.ready
    m.d.comb += orizuru.i.ready.eq(~loaded | (pop & last_beat))
    load = orizuru.i.valid & orizuru.i.ready

    with m.If(pop):
        m.d.sync += [
            pops.eq(Mux(last_beat, 0, pops + 1)),
            avail_max.eq(avail_max & ~popped_max),
            avail_min.eq(avail_min & ~popped_min),
        ]
        with m.If(last_beat):
            m.d.sync += loaded.eq(0)

    if orizuru.structure == "unrolled":
        _maintain(orizuru, m, "max", max_bits, max_index, leaves, avail_max, _max_bit, pop)
        _maintain(orizuru, m, "min", min_bits, min_index, leaves, avail_min, _min_bit, pop)

    # --- load: bottom-up initialisation from the input, in the accepting edge -------------
    incoming = split_lanes(m, orizuru.i.payload.x, 16, n, name="x")
    with m.If(load):
        m.d.sync += [leaf.eq(value) for leaf, value in zip(leaves, incoming)]
        m.d.sync += [avail_max.eq(-1), avail_min.eq(-1), loaded.eq(1), pops.eq(0)]
    if orizuru.structure == "unrolled":
        init_max, _ = _full_tree(orizuru, m, "init_max", incoming, None, _max_bit,
                                 need_root=False)
        # The min tree reuses the max tree's leaf-level comparisons, inverted.
        init_min, _ = _full_tree(orizuru, m, "init_min", incoming, None, _min_bit,
                                 leaf_bits=[~init_max[v] for v in range(n // 2, n)],
                                 need_root=False)
        with m.If(load):
            m.d.sync += [max_bits[v].eq(init_max[v]) for v in range(1, n)]
            m.d.sync += [min_bits[v].eq(init_min[v]) for v in range(1, n)]


def _maintain(orizuru, m, name, bits, popped, leaves, avail, rule, pop):
    """Recompute the popped leaf's ancestors bottom-up, one comparator per level."""
    n, levels = orizuru.n, orizuru.levels
    new_avail = Signal(n, name=f"{name}_avail_next")
    m.d.comb += new_avail.eq(avail & ~Cat(popped == lane for lane in range(n)))
    # Winner of every node under the current bits (the paper's MUX tree): the siblings on
    # the popped path are read from it; their subtrees do not hold the popped leaf.
    node = [None] * (2 * n)
    for lane in range(n):
        node[n + lane] = _leaf(orizuru, lane, leaves[lane], new_avail[lane])
    for v in range(n - 1, 1, -1):      # the root's winner is not needed here
        node[v] = _winner_signals(orizuru, m, f"{name}_tree", v, bits[v], node[2 * v + 1],
                                  node[2 * v], with_avail=True)
    # Walk up from the popped leaf: at height h the path node has offset popped >> h in
    # its level; its children are the path child (below) and a sibling.
    path = {"value": Array(leaves)[popped], "index": popped, "avail": Const(0, 1)}
    for height in range(1, levels + 1):
        first = n >> height
        level_nodes = range(first, 2 * first)
        child_is_right = popped[height - 1]
        offset = popped[height:]
        sibling = {}
        for field in ("value", "index", "avail"):
            if first == 1:
                right_sib, left_sib = node[3][field], node[2][field]
            else:
                right_sib = Array(node[2 * v + 1][field] for v in level_nodes)[offset]
                left_sib = Array(node[2 * v][field] for v in level_nodes)[offset]
            sibling[field] = Mux(child_is_right, left_sib, right_sib)
        right = {f: Mux(child_is_right, path[f], sibling[f]) for f in path}
        left = {f: Mux(child_is_right, sibling[f], path[f]) for f in path}
        gt = _compare(m, f"{name}_maint_{height}", right["value"], left["value"])
        bit = Signal(name=f"{name}_new_bit_{height}")
        m.d.comb += bit.eq(rule(gt, right["avail"], left["avail"]))
        with m.If(pop):
            for position, v in enumerate(level_nodes):
                with m.If(offset == position):
                    m.d.sync += bits[v].eq(bit)
        if height < levels:            # the root's new winner is not needed
            path = _winner_signals(orizuru, m, f"{name}_path", height, bit, right, left,
                                   with_avail=True)
