"""Orizuru's time-multiplexed trees (:class:`hdl.kllm.orizuru.orizuru.Orizuru`, ``structure="tree"``, the
paper's circuit): an initialisation engine of n/2 comparators shared by the levels builds the
next vector's trees while a pop engine pops the current vector and walks each popped path up
one level per cycle, one comparator per tree."""

from amaranth.hdl import Cat, Const, Mux, Signal

from ...common.arith import one_hot_decode
from ...common.fp16 import total_order_value

__all__ = ["elaborate_tree"]


def elaborate_tree(orizuru, m):
    """The time-multiplexed trees of ``orizuru`` (``structure="tree"``; see
    :class:`hdl.kllm.orizuru.orizuru.Orizuru`), built in ``m``: an initialisation engine of n/2 shared
    comparators building the next vector's trees, one level per step, while the pop engine
    pops the current vector and maintains its popped paths, one level per cycle with one
    comparator per tree."""
    n, levels, k = orizuru.n, orizuru.levels, orizuru.k
    half = n // 2
    trees = ("max", "min")

    # --- initialisation engine -------------------------------------------------------------
    # ``work`` holds the values still competing, compacted in place: comparator c always
    # compares work[2c] (left) with work[2c + 1] (right) and writes the winner to work[c];
    # step 1 also writes the loser (the min tree's leaf-level winner) to work[n/2 + c].
    # At step t >= 2 the n >> t max-tree pairs come first and as many min-tree pairs
    # follow, so after step L work[0] and work[1] hold the two roots' keys.
    step = Signal(range(levels + 2), name="init_step")   # 0 idle, 1..L running, L+1 done
    work = [Signal(16, name=f"work_{c}", reset_less=True) for c in range(n)]
    next_leaves = [Signal(16, name=f"next_leaf_{c}", reset_less=True) for c in range(n)]
    next_bits = {
        "max": [None] + [Signal(name=f"next_max_bit_{v}", reset_less=True)
                         for v in range(1, n)],
        "min": [None] + [Signal(name=f"next_min_bit_{v}", reset_less=True)
                         for v in range(1, half)],
    }
    running = Signal(name="init_running")
    m.d.comb += running.eq((step != 0) & (step != levels + 1))
    load = Signal(name="init_load")
    incoming_keys = orizuru.input_keys(m, "x_key")
    gts = []
    for c in range(half):
        left, right = work[2 * c], work[2 * c + 1]
        gt = Signal(name=f"init_gt_{c}")        # right > left in totalOrder (on keys)
        m.d.comb += gt.eq(left < right)
        gts.append(gt)
        # Comparator c >= 1 serves the min tree at exactly one step, L - floor(log2 c):
        # there the smaller value (ties: the right one) wins.
        min_step = levels - (c.bit_length() - 1) if c else 0
        # The comparison result is the last select of the register's input: the step's
        # role (max or min: a registered decode) and the acceptance of a vector are
        # folded into the two candidates beside the comparator.
        is_min = Const(0, 1)
        if min_step >= 2:
            is_min = Signal(name=f"init_is_min_{c}")
            m.d.sync += is_min.eq(running & (step == min_step - 1))
        for slot in (c, half + c):
            if slot >= half:        # step 1: the loser
                if_gt, if_not, enable = left, right, load | (step == 1)
            else:                   # the winner: right if gt (max) / if not gt (min)
                if_gt = Mux(is_min, left, right)
                if_not = Mux(is_min, right, left)
                enable = load | running
            with m.If(enable):
                m.d.sync += work[slot].eq(Mux(gt, Mux(load, incoming_keys[slot], if_gt),
                                              Mux(load, incoming_keys[slot], if_not)))
    # Node v at height t (heap numbering, root 1, leaves n..2n-1) is written once, at
    # step t: the max tree's by comparator v - 2^floor(log2 v), the min tree's (height
    # >= 2, i.e. v < n/2) by comparator v. The min tree's leaf-level bits are the inverted
    # max bits (taken at the handover below).
    for v in range(1, n):
        height = levels - (v.bit_length() - 1)
        with m.If(step == height):
            m.d.sync += next_bits["max"][v].eq(gts[v - (1 << (v.bit_length() - 1))])
            if v < half:
                m.d.sync += next_bits["min"][v].eq(~gts[v])
    with m.If(step == 1):
        # ``work`` still holds the keys loaded at acceptance: the next vector's leaves.
        m.d.sync += [leaf.eq(key) for leaf, key in zip(next_leaves, work)]

    # --- pop engine: the current vector --------------------------------------------------
    # Each tree's root winner is ``root`` (from the initialisation) until the first pop,
    # then ``path``: the maintenance's path winner, which is the new root once the walk
    # reaches the top (``fresh`` tells which). Keeping the two apart leaves one multiplexer
    # between the maintenance comparator and its register.
    leaves = [Signal(16, name=f"leaf_{c}", reset_less=True) for c in range(n)]
    bits = {tree: [None] + [Signal(name=f"{tree}_bit_{v}", reset_less=True)
                            for v in range(1, n)] for tree in trees}
    avail = {tree: Signal(n, name=f"{tree}_avail", reset_less=True) for tree in trees}
    root = {tree: {"key": Signal(16, name=f"{tree}_root_key", reset_less=True),
                   "index": Signal(levels, name=f"{tree}_root_index", reset_less=True)}
            for tree in trees}
    path = {tree: {"key": Signal(16, name=f"{tree}_path_key", reset_less=True),
                   "avail": Signal(name=f"{tree}_path_avail", reset_less=True),
                   "index": Signal(levels, name=f"{tree}_path_index", reset_less=True)}
            for tree in trees}
    fresh = Signal(name="fresh")
    current = {}
    for tree in trees:
        current[tree] = {field: Signal.like(root[tree][field], name=f"{tree}_current_{field}")
                         for field in ("key", "index")}
        m.d.comb += [current[tree][field].eq(Mux(fresh, root[tree][field],
                                                 path[tree][field]))
                     for field in ("key", "index")]
    loaded = Signal(name="loaded")
    beat = Signal(range(max(k, 2)), name="beat")
    height = Signal(range(levels + 2), name="maintain_height")   # 0: the roots are current

    last = Signal(name="last_beat")
    pop = Signal(name="pop")
    handover = Signal(name="handover")
    m.d.comb += [
        last.eq(beat == k - 1),

        pop.eq(orizuru.o.valid & orizuru.o.ready),
        handover.eq((step == levels + 1) & (~loaded | (pop & last))),
        # Registered decode only: i.ready does not wait for o.ready (a vector is taken
        # the cycle after the handover of the previous one).
        orizuru.i.ready.eq(step == 0),
    ]
    m.d.comb += load.eq(orizuru.i.valid & orizuru.i.ready)

    with m.If(running):
        m.d.sync += step.eq(step + 1)
    with m.If(handover):
        m.d.sync += step.eq(0)
    with m.If(load):
        m.d.sync += step.eq(1)

    # --- output beat -----------------------------------------------------------------------
    # The current roots' leaves, one-hot (a predecoded decoder: a dynamic shift costs
    # O(n^2) at elaboration).
    root_lane = {}
    for tree in trees:
        root_lane[tree] = Signal(n, name=f"{tree}_root_lane")
        m.d.comb += root_lane[tree].eq(Cat(one_hot_decode(current[tree]["index"])))
    reported = Signal(n, name="reported")
    m.d.comb += [
        reported.eq(~avail["max"] | ~avail["min"] | root_lane["max"] | root_lane["min"]),
        orizuru.o.payload.max_index.eq(current["max"]["index"]),
        orizuru.o.payload.max_value.eq(total_order_value(current["max"]["key"])),
        orizuru.o.payload.min_index.eq(current["min"]["index"]),
        orizuru.o.payload.min_value.eq(total_order_value(current["min"]["key"])),
        orizuru.o.payload.last.eq(last),
        orizuru.o.payload.mask.eq(Mux(last, reported, 0)),
    ]
    with m.If(pop):
        m.d.sync += [beat.eq(Mux(last, 0, beat + 1)), orizuru.o.valid.eq(0)]
        with m.If(last):
            m.d.sync += loaded.eq(0)

    # --- handover: the next vector's trees become current -----------------------------------
    handed = {"max": next_bits["max"],
              "min": next_bits["min"] + [~next_bits["max"][v] for v in range(half, n)]}
    handed_index = {}
    for tree in trees:
        handed_index[tree] = Signal(levels, name=f"next_{tree}_root_index")
        m.d.comb += handed_index[tree].eq(orizuru.follow_winner(m, handed[tree], f"next_{tree}"))
    with m.If(handover):
        m.d.sync += [leaf.eq(value) for leaf, value in zip(leaves, next_leaves)]
        m.d.sync += [loaded.eq(1), beat.eq(0), fresh.eq(1)]
        for slot, tree in enumerate(trees):
            m.d.sync += [bits[tree][v].eq(handed[tree][v]) for v in range(1, n)]
            m.d.sync += [
                avail[tree].eq(-1),
                root[tree]["key"].eq(work[slot]),
                root[tree]["index"].eq(handed_index[tree]),
            ]

    # --- maintenance of the popped paths, one level per cycle ---------------------------------
    leaf_keys = Signal(16 * n, name="leaf_keys")
    m.d.comb += leaf_keys.eq(Cat(leaves))
    start = Signal(name="maintain_start")
    m.d.comb += start.eq(pop & ~last)
    with m.If(start):
        m.d.sync += fresh.eq(0)
        for tree in trees:
            m.d.sync += avail[tree].eq(avail[tree] & ~root_lane[tree])
    # The two trees walk up in step: one height counter. ``at_top``: this cycle compares
    # at height L (with ``pipeline=1`` a register, decoded a cycle ahead); the beat is
    # valid from the next cycle (``o.valid`` is a register).
    active = (height != 0) | (start if orizuru.pipeline == 0 else Const(0, 1))
    walking = Mux(height == 0, 1, height)
    with m.If(active):
        m.d.sync += height.eq(Mux(walking == levels, 0, walking + 1))
    begin = Signal(name="maintain_begin")      # the walk's first cycle comes next
    if orizuru.pipeline >= 2:
        m.d.sync += begin.eq(start)
    else:
        m.d.comb += begin.eq(start)
    if orizuru.pipeline >= 1:
        with m.If(begin):
            m.d.sync += height.eq(1)
        at_top = Signal(name="at_top")
        m.d.sync += at_top.eq(Mux(begin, levels == 1,
                                  (height != 0) & (height == levels - 1)))
    else:
        at_top = Signal(name="at_top")
        m.d.comb += at_top.eq(active & (walking == levels))
    with m.If(at_top):
        m.d.sync += orizuru.o.valid.eq(1)
    with m.If(handover):
        m.d.sync += orizuru.o.valid.eq(1)
    for tree in trees:
        _tree_maintenance(orizuru, m, tree, leaf_keys, bits[tree], avail[tree], current[tree],
                          path[tree], height, start, begin, handover,
                          handed_index[tree], at_top)


def _tree_maintenance(orizuru, m, tree, leaf_keys, bits, avail, root, path, height, start,
                      begin, handover, handed_index, at_top):
    """One tree's path maintenance in the time-multiplexed trees: at height h (1..L) the
    path winner so far (``path``) meets the winner of its sibling subtree, one comparator;
    the node's bit and the path winner are updated; after height L ``path`` holds the new
    root. ``root`` is the current root (index and key). ``pipeline=0`` reads the sibling
    (an n:1 selection of the leaf keys) and compares in the same cycle; ``pipeline=1``
    reads it into a register a cycle ahead (one more cycle per pop, a shorter path);
    ``pipeline=2`` also waits a cycle after the pop (``begin``) before the walk, so that
    the read address never depends on the comparator.

    The comparison is one carry chain on (availability, key, tie side): availability
    above the key, so that a popped entry loses to every available one (the min tree
    compares the inverted availability). Between two popped entries the winner is
    whichever the keys pick: it is popped either way, so no pop, value or mask depends
    on it (only that node's bit, which nothing outside sees)."""
    n, levels = orizuru.n, orizuru.levels
    prefix = f"{tree}_m"
    popped = Signal(levels, name=f"{prefix}_popped", reset_less=True)
    # The leaf index read: the root winner's leaf sibling while the root is current, then
    # the winners of the path's sibling subtrees, one height after another (fed from
    # ``later``: those of heights 3..L). A register of its own, so that the n:1 read
    # selection hangs off flip-flops (measured: a multiplexer in front of it doubles the
    # selection's LUTs).
    address = Signal(levels, name=f"{prefix}_address", reset_less=True)
    later = [Signal(levels, name=f"{prefix}_sibling_{h}", reset_less=True)
             for h in range(3, levels + 1)]
    read_avail = Signal(name=f"{prefix}_fetched_avail")
    m.d.comb += read_avail.eq(avail.bit_select(address, 1))
    fetched = {"key": leaf_keys.word_select(address, 16), "avail": read_avail,
               "index": address}
    # Winners of the sibling subtrees of the popped path (heights 2..L), known when the
    # walk begins: the subtrees beside the path do not change during its maintenance.
    base = popped if orizuru.pipeline >= 2 else root["index"]
    first = _sibling_indices(orizuru, m, prefix, bits, base)
    with m.If(start):
        m.d.sync += popped.eq(root["index"])
    with m.If(begin):
        m.d.sync += [register.eq(value) for register, value in zip(later, first[1:])]
    with m.If(height != 0):
        m.d.sync += [a.eq(b) for a, b in zip(later, later[1:])]
    # Every source of the next address but the path winner's (at the top of the walk,
    # the new root's leaf sibling), so that the winner passes one multiplexer.
    address_else = Signal(levels, name=f"{prefix}_address_else")
    m.d.comb += address_else.eq(Mux(
        begin & (len(first) > 0), first[0] if first else address,
        Mux((height != 0) & (len(later) > 0), later[0] if later else address, address)))
    if orizuru.pipeline >= 2:
        # The root's leaf sibling is read in the cycle after the pop.
        with m.If(start):
            m.d.sync += address.eq(root["index"] ^ 1)
        with m.Else():
            m.d.sync += address.eq(address_else)
    else:
        address_other = Mux(handover, handed_index ^ 1, address_else)
    if orizuru.pipeline == 0:
        current_height = Mux(start, 1, height)
        current_popped = Mux(start, root["index"], popped)
        current_path = {"key": path["key"], "avail": path["avail"] & ~start,
                        "index": Mux(start, root["index"], path["index"])}
        sibling = fetched
        active = start | (height != 0)
    else:
        read = {"key": Signal(16, name=f"{prefix}_read_key", reset_less=True),
                "avail": Signal(name=f"{prefix}_read_avail", reset_less=True),
                "index": Signal(levels, name=f"{prefix}_read_index", reset_less=True)}
        m.d.sync += [read[field].eq(fetched[field]) for field in read]
        current_height, current_popped, current_path, sibling = height, popped, path, read
        active = height != 0
        if orizuru.pipeline >= 2:
            current_popped = popped

    child_is_right = Signal(name=f"{prefix}_child_is_right")
    if orizuru.pipeline == 0:
        # Bit h - 1 of the popped index: the path child's side at height h.
        m.d.comb += child_is_right.eq(
            Cat(Const(0, 1), current_popped).bit_select(current_height, 1))
    else:
        # The same bit from a register shifted once per height: off the comparator's
        # path (it is the comparator's tie bit, the start of its carry chain).
        sides = Signal(levels, name=f"{prefix}_sides", reset_less=True)
        with m.If(begin):
            m.d.sync += sides.eq(base)
        with m.Elif(height != 0):
            m.d.sync += sides.eq(sides >> 1)
        m.d.comb += child_is_right.eq(sides[0])
    tie_side = ~child_is_right if tree == "max" else child_is_right
    # The path winner beats the sibling if it is better, or equal on the tie side: one
    # carry chain, the tie side as an extra least significant bit.
    path_wins = Signal(name=f"{prefix}_path_wins")
    if tree == "max":
        m.d.comb += path_wins.eq(Cat(Const(0, 1), sibling["key"], sibling["avail"]) <
                                 Cat(tie_side, current_path["key"], current_path["avail"]))
    else:
        m.d.comb += path_wins.eq(Cat(Const(0, 1), current_path["key"],
                                     ~current_path["avail"]) <
                                 Cat(tie_side, sibling["key"], ~sibling["avail"]))
    winner = {field: Mux(path_wins, current_path[field], sibling[field]) for field in path}
    new_bit = Signal(name=f"{prefix}_new_bit")
    if orizuru.pipeline >= 1:
        # Height 1 needs no comparison: the path is the popped leaf, unavailable, and
        # wins only when its sibling is popped too, on the tie side.
        first_step = Signal(name=f"{prefix}_first_step")
        m.d.sync += first_step.eq(begin)
        m.d.comb += new_bit.eq(~(Mux(first_step, ~sibling["avail"] & tie_side, path_wins)
                                 ^ child_is_right))
    else:
        m.d.comb += new_bit.eq(~(path_wins ^ child_is_right))
    if orizuru.pipeline == 0:
        with m.If(active):
            m.d.sync += [path[field].eq(winner[field]) for field in path]
        with m.If(at_top):
            m.d.sync += address.eq(winner["index"] ^ 1)
        with m.Else():
            m.d.sync += address.eq(address_other)
    else:
        # The comparison is the last select of every register it feeds (written as
        # Mux(path_wins, if the path wins, if the sibling wins)); height 1 (the leaf
        # sibling, or the popped leaf on the tie side when both are popped) and holding
        # are folded into both candidates.
        tie_leaf = Cat(Const(0 if tree == "max" else 1, 1), current_popped[1:])
        height_1 = {"key": sibling["key"], "avail": sibling["avail"],
                    "index": Mux(sibling["avail"], sibling["index"], tie_leaf)}
        for field in path:
            stay = Mux(first_step, height_1[field], path[field])
            take = Mux(first_step, height_1[field],
                       Mux(active, sibling[field], path[field]))
            m.d.sync += path[field].eq(Mux(path_wins, stay, take))
        if orizuru.pipeline == 1 and levels == 1:
            m.d.sync += address.eq(Mux(at_top, height_1["index"] ^ 1, address_other))
        elif orizuru.pipeline == 1:
            m.d.sync += address.eq(Mux(path_wins,
                                       Mux(at_top, path["index"] ^ 1, address_other),
                                       Mux(at_top, sibling["index"] ^ 1, address_other)))

    # The new bit of the path's node at height h. The root's bit is never read (pops take
    # the root winner from the maintenance), so only heights 1..L-1 are stored. With
    # ``pipeline=1`` the write lands a cycle later, off the comparator's path: the next
    # pop, L + 1 cycles after this one, reads the bits after the last write.
    write = {"enable": active & (current_height != levels), "bit": new_bit,
             "height": current_height, "popped": current_popped}
    if orizuru.pipeline >= 1:
        delayed = {"enable": Signal(name=f"{prefix}_write_enable"),
                   "bit": Signal(name=f"{prefix}_write_bit", reset_less=True),
                   "height": Signal.like(height, name=f"{prefix}_write_height",
                                         reset_less=True),
                   "popped": Signal(levels, name=f"{prefix}_write_popped", reset_less=True)}
        m.d.sync += [delayed[field].eq(write[field]) for field in delayed]
        write = delayed
    for v in range(2, n):
        node_height = levels - (v.bit_length() - 1)
        offset = v - (1 << (v.bit_length() - 1))
        on_path = (write["enable"] & (write["height"] == node_height)
                   & (write["popped"][node_height:] == offset))
        with m.If(on_path):
            m.d.sync += bits[v].eq(write["bit"])


def _sibling_indices(orizuru, m, prefix, bits, popped):
    """Leaf indices of the winners of the popped path's sibling subtrees at heights
    1..L-1 (the siblings met at path heights 2..L), from the node bits (the paper's MUX
    tree, on the winners' local indices only)."""
    n, levels = orizuru.n, orizuru.levels
    local = [None] * n
    for v in range(n - 1, 1, -1):
        node_height = levels - (v.bit_length() - 1)
        if node_height == 1:
            local[v] = bits[v]
        else:
            local[v] = Cat(Mux(bits[v], local[2 * v + 1], local[2 * v]), bits[v])
    indices = []
    for path_height in range(2, levels + 1):
        sibling_height = path_height - 1
        level = range(n >> sibling_height, n >> (sibling_height - 1))
        position = Cat(~popped[sibling_height], popped[sibling_height + 1:])
        packed = Signal(sibling_height * len(level), name=f"{prefix}_locals_{path_height}")
        m.d.comb += packed.eq(Cat(local[v] for v in level))
        indices.append(Cat(packed.word_select(position, sibling_height), position))
    return indices
