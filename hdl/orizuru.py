"""Orizuru: top-k largest and smallest with two shared-leaf binary trees (KLLM IV-C, SPEC 3)."""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .fp16 import Fp16TotalOrderCompare, total_order_key, total_order_value
from .lanes import split_lanes
from .params import check_choice, check_int
from .stream_stage import StallPipeline, check_pipeline

__all__ = ["Orizuru", "OrizuruScan"]


@dataclass(frozen=True)
class _Cuts:
    """Register cuts of one ``pipeline`` value of the unrolled circuit (see :class:`Orizuru`).

    ``levels``: comparator levels per pipeline stage (None: a whole tree, or a whole path
    maintenance, per stage). ``siblings``: the sibling selection of a path maintenance (the
    MUX tree and the sibling multiplexers) gets a stage of its own.
    """

    levels: int | None
    siblings: bool


#: Register cuts of each ``pipeline`` value above 0 (0 is the loop circuit, no cut).
PIPELINE_CUTS = {
    1: _Cuts(levels=None, siblings=False),
    2: _Cuts(levels=2, siblings=True),
    3: _Cuts(levels=1, siblings=True),
}
MAX_PIPELINE = max(PIPELINE_CUTS)
#: The depth that closes timing on ECP5 at the paper configuration (docs/units/orizuru.md).
DEFAULT_PIPELINE = 3


def _avail(value):
    """An availability bit; None stands for "available" (no leaf popped there yet)."""
    return Const(1, 1) if value is None else value


def _mux_avail(select, first, second):
    if first is None and second is None:
        return None
    return Mux(select, _avail(first), _avail(second))


def _select(bit, right, left):
    """The winner of a node whose bit is ``bit``: the right child's entry if set, else the
    left's (the paper's 2:1 MUX). An entry's ``local`` index, relative to its subtree, gains
    ``bit`` as its new top bit."""
    local = bit if left["local"] is None else Cat(Mux(bit, right["local"], left["local"]), bit)
    entry = {"key": Mux(bit, right["key"], left["key"]), "local": local}
    if "avail" in left:
        entry["avail"] = _mux_avail(bit, right["avail"], left["avail"])
    return entry


def _select_beaten(bit, right, left):
    """:func:`_select`, the entry also carrying the list of entries its winner beat on the way
    up (``beaten``, lowest level first): the winner's own list and now the other child's
    winner. At the root these are the siblings of the winner's path."""
    entry = _select(bit, right, left)
    loser_local = ~bit if left["local"] is None else Cat(Mux(bit, left["local"], right["local"]),
                                                         ~bit)
    loser = {"key": Mux(bit, left["key"], right["key"]), "local": loser_local}
    entry["beaten"] = [
        {"key": Mux(bit, r["key"], l["key"]), "local": Cat(Mux(bit, r["local"], l["local"]), bit)}
        for r, l in zip(right["beaten"], left["beaten"])
    ] + [loser]
    return entry


def _pending(kind, bit, first, second):
    """A 2:1 selection not made yet: ``first`` if ``bit`` else ``second``. It is made by
    :func:`_resolve` where the winner is used, so that a register cut in between holds the bit
    and both candidates and the multiplexers sit after the cut, off the comparator's path.
    ``kind``: ``"node"`` (:func:`_select`), ``"beaten"`` (:func:`_select_beaten`) or ``"path"``
    (field-wise selection of a maintenance's path winner)."""
    return {"pending": kind, "bit": bit, "first": first, "second": second}


def _resolve(entry):
    """Make the selection of a :func:`_pending` entry (any other entry is returned as is)."""
    kind = entry.get("pending")
    if kind is None:
        return entry
    bit, first, second = entry["bit"], entry["first"], entry["second"]
    if kind == "node":
        return _select(bit, first, second)
    if kind == "beaten":
        return _select_beaten(bit, first, second)
    return {"key": Mux(bit, first["key"], second["key"]),
            "avail": _mux_avail(bit, first["avail"], second["avail"]),
            "index": Mux(bit, first["index"], second["index"])}


def _any(terms):
    result = terms[0]
    for term in terms[1:]:
        result = result | term
    return result


class _Stages:
    """Places the register cuts of the unrolled pipeline on a :class:`StallPipeline`.

    A list of plain values (the leaves, the node bits of a tree) is registered packed, in groups
    of up to :attr:`GROUP` values per register, so that a stage of a wide tree is a few wide
    registers rather than one per lane (a smaller netlist, a faster Verilator build; groups
    keep Amaranth's cost of slicing a signal linear in n).
    """

    GROUP = 64

    def __init__(self, pipe):
        self.pipe = pipe
        self.count = 0
        self._seen = {}

    def cut(self, live):
        """Register every value in ``live`` (nested dicts and lists of values; None, strings
        and constants pass unchanged; a value met twice gets one register) and return the
        registered copy, one stage further."""
        self.count += 1
        self._seen = {}
        return self._register(live, f"p{self.count}")

    def _register(self, value, name):
        if value is None or isinstance(value, (Const, str)):
            return value
        if isinstance(value, dict):
            return {key: self._register(item, f"{name}_{key}") for key, item in value.items()}
        if isinstance(value, list):
            plain = [item for item in value if item is not None]
            if len(plain) > 1 and not any(isinstance(item, (dict, list, str)) for item in plain):
                return self._register_packed(value, name)
            return [self._register(item, f"{name}_{index}") for index, item in enumerate(value)]
        if id(value) not in self._seen:
            self._seen[id(value)] = (value, self.pipe.stage(value, name=name))
        return self._seen[id(value)][1]

    def _register_packed(self, values, name):
        """Register the values of ``values`` (None kept as None) packed in groups."""
        result = list(values)
        positions = [index for index, item in enumerate(values) if item is not None]
        for first in range(0, len(positions), self.GROUP):
            group = positions[first:first + self.GROUP]
            items = [Value.cast(values[index]) for index in group]
            packed = self.pipe.stage(Cat(items), name=f"{name}_{first}" if first else name)
            offset = 0
            for index, item in zip(group, items):
                result[index] = packed[offset:offset + len(item)]
                offset += len(item)
        return result


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
    recomputes both complete trees from the availability masks (2(n-1) comparators per pop,
    the same rules, hence the same outputs).

    Two circuits, chosen by ``pipeline``:

    * ``pipeline=0``, the loop: one set of node bits and availability masks, initialised in the
      edge that accepts a vector (the whole bottom-up initialisation is combinational from
      ``i.payload``), then popped once per cycle, each pop maintaining its path in the same
      cycle (log2 n comparators in series behind the bit following). The scan recomputes
      both trees each cycle instead.
    * ``pipeline >= 1``, unrolled: a pop is a recurrence (the next pop needs the bits the last
      maintenance wrote), far too long for one cycle at speed, so the k pops of a vector are
      laid out in space along a feed-forward pipeline (:class:`StallPipeline`): the
      initialisation (its root winner is pop 1), then k - 1 path maintenances, each yielding
      the next pop from the tree state (leaves, node bits, availability) passed down the
      pipeline. A maintenance takes the popped path's siblings (the winners beside the path,
      the paper's MUX outputs), then walks up the path, one comparator per level above the
      leaf level (the popped leaf loses at the leaf level without a comparison). The first
      maintenance's siblings come from the initialisation itself: every node also carries
      the entries its winner beat on the way up, so at the root they are the siblings of pop
      1's path and no selection is needed; a later maintenance selects them from the bits
      (the MUX tree and a multiplexer per level on the popped index). The scan unrolls the
      same way: pass 1 (nothing popped) is the initialisation circuit, each later pass
      recomputes both complete trees under the availability masks. The last stage holds the
      vector's k results and the availability masks; the output sends them one beat per
      cycle and takes the next vector's results with the last beat. The leaves travel as
      totalOrder keys (converted once at the input, back at the output), and a cut holds a
      node's comparison bit with both candidates, the 2:1 selection being made after the
      register, so that a stage is: select, compare on the carry chain, register.

      Cuts (every live value is registered at each):

      * ``pipeline=1``: after the initialisation and after each maintenance (or scan pass):
        one stage per pop.
      * ``pipeline=2``: after every second comparator level, and after the sibling selection
        of the maintenances after the first.
      * ``pipeline=3`` (default): after every comparator level, and after the sibling
        selection of the maintenances after the first.

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
    pipeline : int
        Register cuts, 0..3 (default 3; see above).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``: n x 16-bit binary16 patterns.
    o : ``Out(stream.Signature(out_layout))``
        ``max_index``, ``max_value``, ``min_index``, ``min_value``, ``last``, ``mask`` (n bits,
        1 at every index reported for the vector, on the ``last`` beat; 0 before).
    latency : int
        Cycles from the transfer of a vector on ``i`` to its first output beat being valid on
        ``o`` (with the unit empty and ``o.ready`` high); beat j follows j cycles later.

    Latency and throughput: k output beats per vector, one per cycle, and k cycles per vector
    back to back at every ``pipeline`` value (the next vector's first beat follows the last
    beat with no gap). ``pipeline=0``: a vector is initialised in the edge that accepts it and
    its first beat is valid one cycle later (``latency = 1``); the next vector is accepted
    with the last beat. ``pipeline >= 1``: ``latency`` is the number of pipeline stages. With
    L = log2 n comparator levels per tree and g levels per stage (g = L at ``pipeline=1``,
    2 at 2, 1 at 3), the initialisation takes ``ceil(L / g)`` stages; the tree's first
    maintenance ``ceil((L - 1) / g)``, each later one ``1 + ceil((L - 1) / g)`` (the sibling
    stage; 1 in all at ``pipeline=1``); each later scan pass ``ceil(L / g)``. At n = 16,
    k = 2, ``pipeline=3``: 7 (tree) and 8 (scan). The pipeline takes vectors one per cycle
    while it fills, then one every k cycles as the output drains them. ``i.ready`` is
    combinational in ``o.ready`` at every depth.

    Raises
    ------
    TypeError
        If a parameter is not an integer (``structure``: not a string).
    ValueError
        If a parameter is outside its range.
    """

    def __init__(self, *, n=16, k=2, width=16, structure="tree", pipeline=DEFAULT_PIPELINE):
        self.n = check_int("n", n, min_value=2, max_value=1024)
        if self.n & (self.n - 1):
            raise ValueError(f"n must be a power of two in 2..1024, not {self.n}")
        self.k = check_int("k", k, min_value=1, max_value=self.n)
        self.width = check_int("width", width, min_value=16, max_value=16)
        self.structure = check_choice("structure", structure, ("tree", "scan"))
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.levels = self.n.bit_length() - 1
        #: Cycles from a vector's transfer on ``i`` to its first beat being valid on ``o``.
        self.latency = self._stage_count()
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

    def _stage_count(self):
        """Pipeline stages of the chosen circuit (its latency, see the class docstring)."""
        if self.pipeline == 0:
            return 1
        cuts = PIPELINE_CUTS[self.pipeline]
        levels = self.levels
        per_stage = cuts.levels or levels
        init = -(-levels // per_stage)
        if self.structure == "scan":
            return init + (self.k - 1) * init
        # The first maintenance takes its siblings from the initialisation; the later ones
        # select them from the bits first (a stage of its own, or merged at pipeline=1).
        chain = -(-(levels - 1) // per_stage)
        later = chain + (1 if cuts.siblings or levels == 1 else 0)
        return init + min(self.k - 1, 1) * chain + max(self.k - 2, 0) * later

    def elaborate(self, platform):
        m = Module()
        if self.pipeline == 0:
            self._elaborate_loop(m)
        else:
            self._elaborate_unrolled(m)
        return m

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

    # --- pipeline=0: the loop circuit ----------------------------------------------------------

    def _elaborate_loop(self, m):
        """The loop circuit (``pipeline=0``): initialisation in the accepting edge, one pop
        and its path maintenance per cycle."""
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

    # --- pipeline >= 1: the k pops unrolled along a feed-forward pipeline ----------------------

    def _elaborate_unrolled(self, m):
        """The unrolled circuit (``pipeline >= 1``): initialisation, then k - 1 maintenances
        (tree) or scan passes, along one :class:`StallPipeline`, then the beat serialiser."""
        n, k = self.n, self.k
        cuts = PIPELINE_CUTS[self.pipeline]
        record = stream.Signature(1).create(path=("record",))
        pipe = StallPipeline(m, self.i, record, latency=self.latency, name="pipe")
        stages = _Stages(pipe)
        incoming = split_lanes(m, self.i.payload.x, 16, n, name="x")
        keys = []
        for lane, value in enumerate(incoming):
            key = Signal(16, name=f"key_{lane}")
            m.d.comb += key.eq(total_order_key(value))
            keys.append(key)

        # Pop 1: the initialisation's root winners (the scan's first pass is the same circuit).
        tree = self.structure == "tree"
        state = self._unrolled_init(m, stages, cuts, keys,
                                    keep_leaves=k > 2 if tree else k > 1, keep_bits=tree and k > 2,
                                    keep_siblings=tree and k > 1)
        for pop in range(2, k + 1):
            last = pop == k
            if self.structure == "tree":
                state = self._unrolled_maintain(m, stages, cuts, state, pop, last)
            else:
                state = self._unrolled_scan_pass(m, stages, cuts, state, pop, last)
        assert stages.count == self.latency, (stages.count, self.latency)
        self._serialise(m, record, state)

    def _cut_after(self, cuts, level, final):
        """Whether a register follows comparator level ``level`` (1-based) of a tree or path."""
        return final or (cuts.levels is not None and level % cuts.levels == 0)

    def _unrolled_init(self, m, stages, cuts, keys, keep_leaves, keep_bits, keep_siblings):
        """Bottom-up initialisation of both trees, one comparator level per tree level. The
        max tree's leaf-level comparisons, inverted, are the min tree's leaf-level bits.

        Returns the pipeline state after pop 1: ``leaves`` (keys), ``bits`` and ``avail`` (None:
        every leaf available) per tree, the popped index ``p`` per tree and the ``record`` of
        pops so far. ``keep_leaves``, ``keep_bits``: pass the leaves and the node bits on (for a
        scan pass, or a maintenance that selects its siblings). ``keep_siblings``: every entry
        also carries the entries its winner beat (:func:`_select_beaten`), so that the root
        holds the siblings of pop 1's path (``siblings`` per tree, leaf level first) for the
        first maintenance, with no selection.
        """
        n, levels = self.n, self.levels
        kind = "beaten" if keep_siblings else "node"
        winners = {tree: [{"key": key, "local": None, "beaten": []} for key in keys]
                   for tree in ("max", "min")}
        bits = {"max": [None] * n, "min": [None] * n} if keep_bits else None
        live = {"leaves": keys if keep_leaves else None, "bits": bits, "winners": winners}
        for height in range(1, levels + 1):
            first = n >> height
            merged = {"max": [], "min": []}
            for offset in range(first):
                node = first + offset
                max_bit = None
                for tree in ("max", "min"):
                    left = _resolve(live["winners"][tree][2 * offset])
                    right = _resolve(live["winners"][tree][2 * offset + 1])
                    bit = Signal(name=f"init_{tree}_bit_{node}")
                    if tree == "max":
                        m.d.comb += bit.eq(left["key"] < right["key"])
                    elif height == 1:
                        # The min tree reuses the max tree's leaf-level comparison, inverted.
                        m.d.comb += bit.eq(~max_bit)
                    else:
                        m.d.comb += bit.eq(~(left["key"] < right["key"]))
                    max_bit = bit
                    if live["bits"] is not None:
                        live["bits"][tree][node] = bit
                    merged[tree].append(_pending(kind, bit, right, left))
            live["winners"] = merged
            if self._cut_after(cuts, height, height == levels):
                live = stages.cut(live)
        root = {tree: _resolve(live["winners"][tree][0]) for tree in ("max", "min")}
        siblings = None
        if keep_siblings:
            siblings = {tree: [{"key": entry["key"], "index": entry["local"], "avail": None}
                               for entry in root[tree]["beaten"]] for tree in ("max", "min")}
        return {
            "leaves": live["leaves"], "siblings": siblings,
            "bits": live["bits"],
            "avail": {"max": None, "min": None},
            "p": {tree: root[tree]["local"] for tree in ("max", "min")},
            "record": [{"max_index": root["max"]["local"], "max_key": root["max"]["key"],
                        "min_index": root["min"]["local"], "min_key": root["min"]["key"]}],
        }

    def _popped_avail(self, avail, popped):
        """``avail`` (None: all available) with the leaf ``popped`` cleared."""
        return Cat((Const(1, 1) if avail is None else avail[lane]) & (popped != lane)
                   for lane in range(self.n))

    def _unrolled_maintain(self, m, stages, cuts, state, pop, last):
        """Path maintenance of both trees after pop ``pop - 1``; its new root is pop ``pop``.

        Sibling selection: the winner of every node below the root under the current bits
        (the paper's MUX tree) and, per level, the popped path's sibling (a multiplexer on the
        popped index). Then the walk up the path: at the leaf level the popped leaf loses to its
        sibling unless both are popped (no comparison); above, one comparator per level on the
        path winner and the sibling, ties to the lower index (max tree) or the higher (min
        tree). The path's new bits are written into the state passed on, except after the last
        pop (``last``), whose state only serves the mask. The first maintenance finds its
        siblings in ``state["siblings"]`` (carried up by the initialisation) and selects none.
        """
        given = state.get("siblings")
        n, levels = self.n, self.levels
        live = {"leaves": None if last else state["leaves"], "record": state["record"],
                "avail": {}, "bits": {}, "writes": {}, "p": state["p"], "path": {},
                "siblings": {}}
        for tree in ("max", "min"):
            popped = state["p"][tree]
            avail = state["avail"][tree]
            live["avail"][tree] = Signal(n, name=f"m{pop}_{tree}_avail")
            m.d.comb += live["avail"][tree].eq(self._popped_avail(avail, popped))
            if given is not None:
                siblings = given[tree]
            else:
                siblings = self._siblings(m, f"m{pop}_{tree}", state["leaves"],
                                          state["bits"][tree], avail, popped)
            # Leaf level: the popped leaf is unavailable; it wins only if its sibling is popped
            # too and it sits on the tie side (max: left, min: right).
            child_is_right = popped[0]
            tie_side = ~child_is_right if tree == "max" else child_is_right
            sibling = siblings[0]
            path_wins = Const(0, 1) if sibling["avail"] is None else ~sibling["avail"] & tie_side
            live["path"][tree] = {
                "key": sibling["key"], "avail": sibling["avail"],
                "index": Mux(path_wins, popped, sibling["index"]),
            }
            live["siblings"][tree] = siblings[1:]
            live["bits"][tree] = None if last else state["bits"][tree]
            live["writes"][tree] = None if last else {}
            if not last:
                self._write_path_bit(m, live["writes"][tree], 1, ~(path_wins ^ child_is_right),
                                     f"m{pop}_{tree}")
        if given is None and (cuts.siblings or levels == 1):
            live = self._cut_resolving_bits(stages, live)
        for height in range(2, levels + 1):
            for tree in ("max", "min"):
                popped = live["p"][tree]
                path = _resolve(live["path"][tree])
                sibling = live["siblings"][tree][0]
                live["siblings"][tree] = live["siblings"][tree][1:]
                child_is_right = popped[height - 1]
                tie_side = ~child_is_right if tree == "max" else child_is_right
                # The path winner beats the sibling if its key is better, or equal on the tie
                # side: one comparator, the tie side as an extra least significant bit.
                better = Signal(name=f"m{pop}_{tree}_better_{height}")
                if tree == "max":
                    m.d.comb += better.eq(Cat(Const(0, 1), sibling["key"]) <
                                          Cat(tie_side, path["key"]))
                else:
                    m.d.comb += better.eq(Cat(Const(0, 1), path["key"]) <
                                          Cat(tie_side, sibling["key"]))
                if path["avail"] is None and sibling["avail"] is None:
                    path_wins = better
                else:
                    path_avail = _avail(path["avail"])
                    sibling_avail = _avail(sibling["avail"])
                    path_wins = Mux(path_avail, ~sibling_avail | better,
                                    ~sibling_avail & tie_side)
                wins = Signal(name=f"m{pop}_{tree}_path_wins_{height}")
                m.d.comb += wins.eq(path_wins)
                live["path"][tree] = _pending("path", wins, path, sibling)
                if live["writes"][tree] is not None:
                    self._write_path_bit(m, live["writes"][tree], height,
                                         ~(wins ^ child_is_right), f"m{pop}_{tree}")
            if self._cut_after(cuts, height - 1, height == levels):
                live = self._cut_resolving_bits(stages, live)
        root = {tree: _resolve(live["path"][tree]) for tree in ("max", "min")}
        record = live["record"] + [{
            "max_index": root["max"]["index"], "max_key": root["max"]["key"],
            "min_index": root["min"]["index"], "min_key": root["min"]["key"],
        }]
        return {
            "leaves": live["leaves"], "bits": live["bits"],
            "avail": live["avail"], "p": {tree: root[tree]["index"] for tree in ("max", "min")},
            "record": record,
        }

    def _cut_resolving_bits(self, stages, live):
        """A cut in a maintenance. The path bits written before it (one new bit per height in
        ``live["writes"]``) are stored into the node bits after it, the node on the path
        found from the registered popped index: off the comparator's path."""
        live = stages.cut(live)
        for tree, writes in live["writes"].items():
            if not writes:
                continue
            bits = list(live["bits"][tree])
            position_bits = live["p"][tree]
            for height, new in writes.items():
                first = self.n >> height
                position = position_bits[height:]
                for offset in range(first):
                    hit = (position == offset) if first > 1 else Const(1, 1)
                    bits[first + offset] = Mux(hit, new, bits[first + offset])
            live["bits"][tree] = bits
            live["writes"][tree] = {}
        return live

    def _siblings(self, m, prefix, leaves, bits, avail, popped):
        """The winners (``key``, ``index``, ``avail``) of the popped path's siblings, leaf level
        first: the MUX tree's winner of every node of heights 0..L-1, then per level the one
        beside the path (combinational)."""
        n, levels = self.n, self.levels
        level = [{"key": leaves[lane], "avail": None if avail is None else avail[lane],
                  "local": None} for lane in range(n)]
        siblings = []
        for height in range(1, levels + 1):
            # Sibling at this height: in the level below, position (popped >> (height-1)) ^ 1.
            position = Cat(~popped[height - 1], popped[height:])
            sibling = {}
            for field in ("key", "avail", "local"):
                if level[0][field] is None:
                    sibling[field] = None
                    continue
                signal = Signal.like(level[0][field], name=f"{prefix}_sib{height}_{field}")
                if len(level) == 2:
                    m.d.comb += signal.eq(Mux(position, level[1][field], level[0][field]))
                else:
                    m.d.comb += signal.eq(Array(entry[field] for entry in level)[position])
                sibling[field] = signal
            local = sibling.pop("local")
            sibling["index"] = position if local is None else Cat(local, position)
            siblings.append(sibling)
            if height < levels:
                first = n >> height
                level = [_select(bits[first + offset], level[2 * offset + 1], level[2 * offset])
                         for offset in range(first)]
        return siblings

    @staticmethod
    def _write_path_bit(m, writes, height, bit, prefix):
        """Record ``bit`` as the new bit of the popped path's node at ``height``; it is stored
        into the node bits after the next cut (:meth:`_cut_resolving_bits`)."""
        new = Signal(name=f"{prefix}_path_bit_{height}")
        m.d.comb += new.eq(bit)
        writes[height] = new

    def _unrolled_scan_pass(self, m, stages, cuts, state, pop, last):
        """Scan pass ``pop``: both complete trees recomputed under the availability masks
        (2(n-1) comparators), the previous pop cleared from them first."""
        n, levels = self.n, self.levels
        live = {"leaves": None if last else state["leaves"], "record": state["record"],
                "avail": {}, "winners": {}}
        for tree in ("max", "min"):
            avail = Signal(n, name=f"s{pop}_{tree}_avail")
            m.d.comb += avail.eq(self._popped_avail(state["avail"][tree], state["p"][tree]))
            live["avail"][tree] = avail
            live["winners"][tree] = [{"key": state["leaves"][lane], "avail": avail[lane],
                                      "local": None} for lane in range(n)]
        for height in range(1, levels + 1):
            first = n >> height
            for tree in ("max", "min"):
                merged = []
                for offset in range(first):
                    node = first + offset
                    left = _resolve(live["winners"][tree][2 * offset])
                    right = _resolve(live["winners"][tree][2 * offset + 1])
                    gt = left["key"] < right["key"]
                    bit = Signal(name=f"s{pop}_{tree}_bit_{node}")
                    if tree == "max":
                        m.d.comb += bit.eq(right["avail"] & (~left["avail"] | gt))
                    else:
                        m.d.comb += bit.eq(Mux(right["avail"], ~left["avail"] | ~gt,
                                               ~left["avail"]))
                    merged.append(_pending("node", bit, right, left))
                live["winners"][tree] = merged
            if self._cut_after(cuts, height, height == levels):
                live = stages.cut(live)
        root = {tree: _resolve(live["winners"][tree][0]) for tree in ("max", "min")}
        record = live["record"] + [{
            "max_index": root["max"]["local"], "max_key": root["max"]["key"],
            "min_index": root["min"]["local"], "min_key": root["min"]["key"],
        }]
        return {
            "leaves": live["leaves"], "bits": None,
            "avail": live["avail"], "p": {tree: root[tree]["local"] for tree in ("max", "min")},
            "record": record,
        }

    def _serialise(self, m, record, state):
        """Send the last stage's k results one beat per cycle; the pipeline advances (and the
        next vector's results load) with the last beat."""
        n, k = self.n, self.k
        beat = Signal(range(max(k, 2)), name="beat")
        last = Signal(name="last_beat")
        m.d.comb += [
            last.eq(beat == k - 1),
            self.o.valid.eq(record.valid),
            record.ready.eq(self.o.ready & last),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))

        def pick(field):
            values = [entry[field] for entry in state["record"]]
            if k == 1:
                return values[0]
            # Padded to every value of the counter, so that the multiplexer is a full case.
            return Array(values + values[-1:] * ((1 << len(beat)) - k))[beat]

        reported = Signal(n, name="reported")
        for lane in range(n):
            terms = [state["p"]["max"] == lane, state["p"]["min"] == lane]
            for tree in ("max", "min"):
                if state["avail"][tree] is not None:
                    terms.append(~state["avail"][tree][lane])
            m.d.comb += reported[lane].eq(_any(terms))
        m.d.comb += [
            self.o.payload.max_index.eq(pick("max_index")),
            self.o.payload.max_value.eq(total_order_value(pick("max_key"))),
            self.o.payload.min_index.eq(pick("min_index")),
            self.o.payload.min_value.eq(total_order_value(pick("min_key"))),
            self.o.payload.last.eq(last),
            self.o.payload.mask.eq(Mux(last, reported, 0)),
        ]


class OrizuruScan(Orizuru):
    """The baseline for Orizuru's area: a k-pass max/min scan (``structure="scan"``).

    Same interface, rules and outputs as :class:`Orizuru`; every pop recomputes both complete
    comparator trees from the availability masks instead of keeping node bits. ``pipeline``
    as for :class:`Orizuru` (0: one pass per cycle; 1..3: the k passes unrolled, pass 1 being
    Orizuru's initialisation circuit, with the same cuts), so that the two are compared at
    the same depth.
    """

    def __init__(self, *, n=16, k=2, width=16, pipeline=DEFAULT_PIPELINE):
        super().__init__(n=n, k=k, width=width, structure="scan", pipeline=pipeline)
