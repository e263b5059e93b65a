"""Orizuru: top-k largest and smallest with two shared-leaf binary trees (KLLM IV-C, SPEC 3)."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .fp16 import Fp16TotalOrderCompare
from .lanes import split_lanes
from .params import check_choice, check_int

__all__ = ["Orizuru"]


class Orizuru(wiring.Component):
    """The k largest and the k smallest of n binary16 values, one pair per output beat.

    Two complete binary trees of 2:1 selection nodes share the n leaves (the input values). A
    node holds one bit saying which child's winner wins; the root's winner is followed down by
    the bits to give the index of the maximum (max tree) or minimum (min tree) with no
    comparison. After a pop, only the popped leaf's ancestors are recomputed (one comparison per
    level), the popped leaf counting below every value in the max tree and above every value in
    the min tree. The min tree's leaf-level bits are the inverse of the max tree's leaf-level
    comparisons, so one comparator per leaf pair serves both trees (the paper's
    1.5N + 2k log2 N comparisons).

    Node rules (IEEE totalOrder, :class:`hdl.fp16.Fp16TotalOrderCompare`): max tree, right wins
    if right > left (ties go to the lower index); min tree, right wins if right <= left (ties go
    to the higher index), which is the inverse of the max tree's bit whenever both children are
    present.

    ``structure="scan"`` builds the straightforward baseline instead: no stored bits, every pop
    recomputes both complete trees from the availability masks (2(n-1) comparators, the same
    rules, hence the same outputs).

    Parameters
    ----------
    n : int
        Inputs, a power of two in 2..1024 (default 16).
    k : int
        Values reported per tree, 1..n (default 2).
    width : int
        Value width; 16 (IEEE binary16) is the only one supported.
    structure : str
        ``"tree"`` (Orizuru, default) or ``"scan"`` (k-pass max/min scan baseline).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``: n x 16-bit binary16 patterns.
    o : ``Out(stream.Signature(out_layout))``
        ``max_index``, ``max_value``, ``min_index``, ``min_value``, ``last``, ``mask`` (n bits,
        1 at every index reported for the vector, on the ``last`` beat; 0 before).

    Timing: a vector accepted at a clock edge is initialised in that same edge (combinational
    bottom-up initialisation from ``i.payload``), and its k beats follow one per cycle, the
    first one cycle later. The next vector is accepted with the last beat, so back-to-back
    vectors take k cycles each. ``i.ready`` is combinational in ``o.ready``.
    """

    def __init__(self, *, n=16, k=2, width=16, structure="tree"):
        self.n = check_int("n", n, min_value=2, max_value=1024)
        if self.n & (self.n - 1):
            raise ValueError(f"n must be a power of two in 2..1024, not {self.n}")
        self.k = check_int("k", k, min_value=1, max_value=self.n)
        self.width = check_int("width", width, min_value=16, max_value=16)
        self.structure = check_choice("structure", structure, ("tree", "scan"))
        self.levels = self.n.bit_length() - 1
        index = unsigned(self.levels)
        self.in_layout = data.StructLayout({"x": data.ArrayLayout(16, self.n)})
        self.out_layout = data.StructLayout({
            "max_index": index, "max_value": 16, "min_index": index, "min_value": 16,
            "last": 1, "mask": self.n,
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    #: Cycles from accepting a vector to its first output beat.
    latency = 1

    def _compare(self, m, name, a, b):
        """``a > b`` in totalOrder through a comparator instance."""
        cmp = Fp16TotalOrderCompare()
        m.submodules[name] = cmp
        m.d.comb += [cmp.a.eq(a), cmp.b.eq(b)]
        return cmp.gt

    @staticmethod
    def _max_bit(gt_right_left, right_avail, left_avail):
        # Max tree: a popped leaf is below every value; ties go left. None: both present.
        if right_avail is None:
            return gt_right_left
        return right_avail & (~left_avail | gt_right_left)

    @staticmethod
    def _min_bit(gt_right_left, right_avail, left_avail):
        # Min tree: a popped leaf is above every value; right wins if right <= left.
        if right_avail is None:
            return ~gt_right_left
        return Mux(right_avail, ~left_avail | ~gt_right_left, ~left_avail)

    def _winner_signals(self, m, prefix, v, bit, right, left, with_avail, keep=True):
        """The winner of node ``v`` as named signals (value, index[, avail]) selected by
        ``bit`` between the children's winners: the paper's MUX passing its winner up, O(1)
        per node (indexing the leaves by a winner index instead costs an n:1 mux each)."""
        if not keep:
            return None
        fields = [("value", 16), ("index", self.levels)] + ([("avail", 1)] if with_avail else [])
        winner = {}
        for field, width in fields:
            winner[field] = Signal(width, name=f"{prefix}_{field}_{v}")
            m.d.comb += winner[field].eq(Mux(bit, right[field], left[field]))
        return winner

    def _leaf(self, lane, value, avail):
        leaf = {"value": value, "index": Const(lane, self.levels)}
        if avail is not None:
            leaf["avail"] = avail
        return leaf

    def _full_tree(self, m, prefix, values, avail, rule, leaf_bits=None, need_root=True):
        """Bits of a complete tree over ``values`` (combinational), bottom-up, and the root's
        winner. ``avail`` (an n-bit value) None means every leaf is present (initialisation);
        ``leaf_bits`` overrides the comparisons of the leaf-level nodes."""
        n = self.n
        node = [None] * (2 * n)
        for lane in range(n):
            node[n + lane] = self._leaf(lane, values[lane], None if avail is None else avail[lane])
        bits = [None] * n
        for v in range(n - 1, 0, -1):
            left, right = node[2 * v], node[2 * v + 1]
            if leaf_bits is not None and v >= n // 2:
                bit = leaf_bits[v - n // 2]
            else:
                gt = self._compare(m, f"{prefix}_{v}", right["value"], left["value"])
                if avail is None:
                    bit = rule(gt, None, None)
                else:
                    bit = rule(gt, right["avail"], left["avail"])
            bits[v] = Signal(name=f"{prefix}_bit_{v}")
            m.d.comb += bits[v].eq(bit)
            keep = v > 1 or need_root
            node[v] = self._winner_signals(m, prefix, v, bits[v], right, left,
                                           avail is not None, keep)
        return bits, (node[1]["index"] if need_root else None)

    def elaborate(self, platform):
        m = Module()
        n = self.n

        leaves = [Signal(16, name=f"leaf_{i}", reset_less=True) for i in range(n)]
        avail_max = Signal(n)
        avail_min = Signal(n)
        loaded = self.o.valid           # high while a vector is being popped
        pops = Signal(range(max(self.k, 2)))  # beats already sent for this vector

        # --- the current winners (pop: follow bits from the root, no comparison) -----------
        if self.structure == "tree":
            max_bits = [Signal(name=f"max_node_{v}") if v else None for v in range(n)]
            min_bits = [Signal(name=f"min_node_{v}") if v else None for v in range(n)]
            max_index = self._follow(m, max_bits, "max")
            min_index = self._follow(m, min_bits, "min")
        else:
            _, max_index = self._full_tree(m, "scan_max", leaves, avail_max, self._max_bit)
            _, min_index = self._full_tree(m, "scan_min", leaves, avail_min, self._min_bit)

        leaf_array = Array(leaves)
        last_beat = pops == self.k - 1
        popped_max = Signal(n)
        popped_min = Signal(n)
        m.d.comb += [
            popped_max.eq(Cat(max_index == lane for lane in range(n))),
            popped_min.eq(Cat(min_index == lane for lane in range(n))),
            self.o.payload.max_index.eq(max_index),
            self.o.payload.max_value.eq(leaf_array[max_index]),
            self.o.payload.min_index.eq(min_index),
            self.o.payload.min_value.eq(leaf_array[min_index]),
            self.o.payload.last.eq(last_beat),
            self.o.payload.mask.eq(Mux(last_beat,
                                       ~avail_max | ~avail_min | popped_max | popped_min, 0)),
        ]

        pop = self.o.valid & self.o.ready
        m.d.comb += self.i.ready.eq(~loaded | (pop & last_beat))
        load = self.i.valid & self.i.ready

        with m.If(pop):
            m.d.sync += [
                pops.eq(Mux(last_beat, 0, pops + 1)),
                avail_max.eq(avail_max & ~popped_max),
                avail_min.eq(avail_min & ~popped_min),
            ]
            with m.If(last_beat):
                m.d.sync += loaded.eq(0)

        if self.structure == "tree":
            self._maintain(m, "max", max_bits, max_index, leaves, avail_max, self._max_bit, pop)
            self._maintain(m, "min", min_bits, min_index, leaves, avail_min, self._min_bit, pop)

        # --- load: bottom-up initialisation from the input, in the accepting edge ---------
        incoming = split_lanes(m, self.i.payload.x, 16, n, name="x")
        with m.If(load):
            m.d.sync += [leaf.eq(value) for leaf, value in zip(leaves, incoming)]
            m.d.sync += [avail_max.eq(-1), avail_min.eq(-1), loaded.eq(1), pops.eq(0)]
        if self.structure == "tree":
            init_max, _ = self._full_tree(m, "init_max", incoming, None, self._max_bit,
                                          need_root=False)
            # The min tree reuses the max tree's leaf-level comparisons, inverted.
            init_min, _ = self._full_tree(m, "init_min", incoming, None, self._min_bit,
                                          leaf_bits=[~init_max[v] for v in range(n // 2, n)],
                                          need_root=False)
            with m.If(load):
                m.d.sync += [max_bits[v].eq(init_max[v]) for v in range(1, n)]
                m.d.sync += [min_bits[v].eq(init_min[v]) for v in range(1, n)]
        return m

    def _follow(self, m, bits, name):
        """Index of the root's winner: follow the node bits down, one bit per level.

        Pure wiring and one bit-select per level; returned as an expression (named
        intermediate signals would only be kept by Yosys as unread aliases).
        """
        offset = bits[1]                   # position within the level below the root
        for level in range(1, self.levels):
            level_bits = Cat(bits[(1 << level) + o] for o in range(1 << level))
            offset = Cat(level_bits.bit_select(offset, 1), offset)
        return offset

    def _maintain(self, m, name, bits, popped, leaves, avail, rule, pop):
        """Recompute the popped leaf's ancestors bottom-up, one comparator per level."""
        n, levels = self.n, self.levels
        new_avail = Signal(n, name=f"{name}_avail_next")
        m.d.comb += new_avail.eq(avail & ~Cat(popped == lane for lane in range(n)))
        # Winner of every node under the current bits (the paper's MUX tree): the siblings on
        # the popped path are read from it; their subtrees do not hold the popped leaf.
        node = [None] * (2 * n)
        for lane in range(n):
            node[n + lane] = self._leaf(lane, leaves[lane], new_avail[lane])
        for v in range(n - 1, 1, -1):      # the root's winner is not needed here
            node[v] = self._winner_signals(m, f"{name}_tree", v, bits[v], node[2 * v + 1],
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
            gt = self._compare(m, f"{name}_maint_{height}", right["value"], left["value"])
            bit = Signal(name=f"{name}_new_bit_{height}")
            m.d.comb += bit.eq(rule(gt, right["avail"], left["avail"]))
            with m.If(pop):
                for position, v in enumerate(level_nodes):
                    with m.If(offset == position):
                        m.d.sync += bits[v].eq(bit)
            if height < levels:            # the root's new winner is not needed
                path = self._winner_signals(m, f"{name}_path", height, bit, right, left,
                                            with_avail=True)


class OrizuruScan(Orizuru):
    """The baseline for Orizuru's area: a k-pass max/min scan (``structure="scan"``).

    Same interface, rules and outputs as :class:`Orizuru`; every pop recomputes both complete
    comparator trees from the availability masks instead of keeping node bits.
    """

    def __init__(self, *, n=16, k=2, width=16):
        super().__init__(n=n, k=k, width=width, structure="scan")
