"""Token-wide Orizuru from 16-input units (KLLM IV-C and Table I: 273 16-input units per chip).

KLLM detects the 0.5 % largest and smallest of 4096-wide activation vectors with 273 = 16^2 +
16 + 1 16-input Orizuru units. The paper gives the count, not the wiring; the composition here
is the one the count suggests, a tournament of tournaments:

* **Leaf units** (the 16^2 = 256 at n = 4096) hold 16 of the vector's values each, as the
  16-input Orizuru: a max tree and a min tree over shared leaves, one comparator per leaf pair
  serving both trees (the min tree's leaf-level bit is the inverse of the max tree's), a popped
  leaf counting below (max) or above (min) every value.
* **Merge units** (16, then 1) are the same 16-input trees whose leaves are the roots of 16
  units below: leaf j of the max tree holds child j's current maximum, leaf j of the min tree
  its current minimum (separate max and min leaves, since they come from different children's
  trees). A pop does not remove the leaf; it replaces it with the child's next winner.
* **Prefetch.** A unit's root is taken by its parent when the parent loads it into a leaf, and
  the child pops and maintains at once, so its next winner is ready before the parent asks for
  it: the replacement of a popped leaf is a register read, and a pop at the top costs one
  unit's maintenance, whatever the depth of the hierarchy.

Order and ties are those of :class:`hdl.kllm.orizuru.orizuru.Orizuru` (IEEE totalOrder keys; the max tree's
ties go to the lower index, the min tree's to the higher): both are strict total orders on
(key, index), and a tournament of tournaments under a strict total order yields the same
sequence as one tree over all the leaves, so the composition reports exactly what the flat
trees report.

Inside a unit every tree level has its comparators (f - 1 per tree; the leaf level's f/2 shared
by both trees) and is recomputed every cycle from the level below (:class:`OrizuruUnit`); a
register cut after every level (``pipeline=2``), every second level (1) or only at the root (0)
sets how many cycles S a change of a leaf takes to reach the root. A maintenance recomputes the
popped path (the other nodes recompute to the values they hold), one level per cycle at
``pipeline=2``: the paper's "parent updated in the subsequent cycle".
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import one_hot_decode, one_hot_wires
from ...common.fp16 import total_order_key, total_order_value
from ...common.lanes import split_lanes
from ...common.params import check_int

__all__ = ["OrizuruUnit", "UNIT_FANIN", "unit_levels", "settle_cycles", "units_latency",
           "units_cycles_per_vector", "elaborate_units"]

#: Leaves of a unit (KLLM Table I: 16-input Orizuru units).
UNIT_FANIN = 16
_UNIT_LEVELS = UNIT_FANIN.bit_length() - 1


def unit_levels(n):
    """Tree levels of each level of units, leaves first: ``[L_1, ..., L_top]`` with
    ``sum == log2(n)``. Every level above the leaf units has 16-input units; the leaf units
    take the remainder (log2(n) mod 4 levels, or 4), so that no unit sits above a deeper one
    (a parent's maintenance is never shorter than its child's, which keeps the prefetch ahead).
    """
    bits = n.bit_length() - 1
    count = max(1, -(-bits // _UNIT_LEVELS))
    leaf = bits - _UNIT_LEVELS * (count - 1)
    return [leaf] + [_UNIT_LEVELS] * (count - 1)


def _cut_levels(levels, pipeline):
    """Tree levels (1..levels) after which a unit registers its nodes; the root always."""
    if pipeline == 2:
        return set(range(1, levels + 1))
    if pipeline == 1:
        return {level for level in range(1, levels + 1) if level % 2 == 0} | {levels}
    return {levels}


def settle_cycles(levels, pipeline):
    """Cycles S from a leaf write to the unit's root being valid: its register cuts."""
    return len(_cut_levels(levels, pipeline))


def units_latency(n, pipeline):
    """Cycles from a vector's (last) input beat to its first output beat (units empty,
    ``o.ready`` high): the leaf units load in that beat's edge; each level settles (S cycles);
    a merge unit registers that its children are valid and loads them the cycle after; the
    first beat goes out the cycle after the top settles."""
    levels = unit_levels(n)
    return sum(settle_cycles(level, pipeline) for level in levels) + 2 * len(levels) - 1


def _pop_period(n, pipeline):
    """Cycles from one output beat to the next: the taking edge, the edge that writes the
    popped leaf (a merge unit: the child's prefetched winner; a leaf unit: unavailable), and
    the top unit's maintenance (S cycles)."""
    return settle_cycles(unit_levels(n)[-1], pipeline) + 2


def units_cycles_per_vector(n, k, pipeline, beats=1):
    """Cycles per vector back to back with ``o.ready`` high: the latency (from the vector's
    last input beat), k - 1 pops, and the ``beats`` input beats of the next vector, accepted
    from the cycle after the last output beat (which empties the units)."""
    return units_latency(n, pipeline) + (k - 1) * _pop_period(n, pipeline) + beats


def _entry(index_bits):
    """A tree entry: totalOrder key, available, and the index below the node."""
    return data.StructLayout({"key": 16, "avail": 1, "index": unsigned(index_bits)})


class OrizuruUnit(wiring.Component):
    """One unit of the composition (see the module docstring): max and min trees over ``fanin``
    leaves, each tree's root offered to the parent with a take handshake.

    Parameters
    ----------
    fanin : int
        Leaves, a power of two in 2..16.
    sub_bits : int
        Index bits below a leaf (0 for a leaf unit: its leaves are values; a merge unit over
        units of 2^s leaves each has s).
    leaf : bool
        True: a leaf unit, loaded with ``fanin`` binary16 values. False: a merge unit whose
        leaves are its children's roots.
    pipeline : int
        Register cuts, 0..2 (see the module docstring).

    Members
    -------
    load : ``In(1)`` (leaf unit)
        Load ``x`` into the leaves (all available) this edge; the roots are valid S cycles on.
    x : ``In(ArrayLayout(16, fanin))`` (leaf unit)
        Binary16 bit patterns.
    child_max, child_min : ``In(ArrayLayout(entry, fanin))`` (merge unit)
        The children's max and min roots.
    child_max_valid, child_min_valid : ``In(fanin)`` (merge unit)
        Each child's root is valid (an empty unit loads when all are; a refill relies on the
        composition's timing instead, see :meth:`elaborate`).
    child_max_take, child_min_take : ``Out(fanin)`` (merge unit)
        Child j's root is taken into leaf j this edge (the child pops and maintains).
    max_root, min_root : ``Out(entry)``
        Key, availability and index (within the unit's leaves, and below them) of the winner.
    max_valid, min_valid : ``Out(1)``
        The root is valid (loaded and settled, no pop pending).
    max_take, min_take : ``In(1)``
        The parent takes the root this edge (only while it is valid): the pop is pending, and
        the next edge replaces the popped leaf (leaf unit: unavailable; merge unit: the
        child's next root, as soon as it is valid); the root is valid again S cycles later.
    clear : ``In(1)``
        Empty the unit (the cycle after a vector's last beat): the roots are invalid until the
        next load (a leaf unit's load in the same edge wins).

    A merge unit loads all its leaves (and takes all its children) in the first edge in which
    it is empty and every child's max and min roots are valid.
    """

    def __init__(self, *, fanin, sub_bits, leaf, pipeline):
        self.fanin = check_int("fanin", fanin, min_value=2, max_value=UNIT_FANIN)
        if self.fanin & (self.fanin - 1):
            raise ValueError(f"fanin must be a power of two in 2..{UNIT_FANIN}, not {fanin}")
        self.sub_bits = check_int("sub_bits", sub_bits, min_value=0)
        self.leaf = bool(leaf)
        self.pipeline = check_int("pipeline", pipeline, min_value=0, max_value=2)
        self.levels = self.fanin.bit_length() - 1
        self.settle = settle_cycles(self.levels, self.pipeline)
        self.leaf_entry = _entry(self.sub_bits)
        self.root_entry = _entry(self.sub_bits + self.levels)
        members = {"clear": In(1)}
        if self.leaf:
            members.update({"load": In(1), "x": In(data.ArrayLayout(16, self.fanin))})
        else:
            for side in ("max", "min"):
                members.update({
                    f"child_{side}": In(data.ArrayLayout(self.leaf_entry, self.fanin)),
                    f"child_{side}_valid": In(self.fanin),
                    f"child_{side}_take": Out(self.fanin),
                })
        for side in ("max", "min"):
            members.update({f"{side}_root": Out(self.root_entry), f"{side}_valid": Out(1),
                            f"{side}_take": In(1)})
        super().__init__(members)

    @property
    def module_name(self):
        """The Verilog module name of this circuit (its shaping parameters)."""
        kind = "leaf" if self.leaf else f"merge_s{self.sub_bits}"
        return f"orizuru_unit{self.fanin}_{kind}_p{self.pipeline}"

    def elaborate(self, platform):
        m = Module()
        f = self.fanin
        loaded = Signal()
        if self.leaf:
            keys = Signal(data.ArrayLayout(16, f))
            with m.If(self.load):
                m.d.sync += [keys[j].eq(total_order_key(self.x[j])) for j in range(f)]
            level0 = {"max": [], "min": []}
            avails = {}
            for side in ("max", "min"):
                avails[side] = Signal(f, name=f"{side}_avail")
                # No index below a leaf of a leaf unit (None: no zero-width values, which
                # Amaranth writes as [-1:0] and Yosys then reads as two bits).
                level0[side] = [(keys[j], avails[side][j], None) for j in range(f)]
            # One comparator per leaf pair serves both trees (the min tree's bit is the
            # inverse of the max tree's wherever both children are available).
            leaf_gt = [Signal(name=f"leaf_gt{p}") for p in range(f // 2)]
            m.d.comb += [leaf_gt[p].eq(keys[2 * p + 1] > keys[2 * p]) for p in range(f // 2)]
        else:
            level0, leaf_gt = {}, None
            leaves = {}
            for side in ("max", "min"):
                leaves[side] = Signal(data.ArrayLayout(self.leaf_entry, f), name=f"{side}_leaf")
                level0[side] = [(leaves[side][j].key, leaves[side][j].avail,
                                 leaves[side][j].index) for j in range(f)]
            # Every child's roots valid, registered (the load of all leaves is then driven from
            # flip-flops, not from 2 x fanin children's state across the chip; a cycle of
            # latency per merge level). A child stays valid until taken, and the clear drops
            # the flag, so it is never stale.
            all_valid = Signal()
            m.d.sync += all_valid.eq(self.child_max_valid.all() & self.child_min_valid.all()
                                     & ~self.clear)
            start = Signal()
            m.d.comb += start.eq(~loaded & all_valid & ~self.clear)

        for side in ("max", "min"):
            root = self._tree(m, side, level0[side], leaf_gt)
            out_root = getattr(self, f"{side}_root")
            m.d.comb += [out_root.key.eq(root[0]), out_root.avail.eq(root[1]),
                         out_root.index.eq(root[2])]
            popped = root[2][self.sub_bits:]          # the winner's leaf
            count = Signal(range(self.settle + 1), name=f"{side}_settle")
            pending = Signal(name=f"{side}_pending")
            valid = getattr(self, f"{side}_valid")
            take = getattr(self, f"{side}_take")
            m.d.comb += valid.eq(loaded & ~pending & (count == 0))
            with m.If(count != 0):
                m.d.sync += count.eq(count - 1)
            # A take is registered (pending) and served the next cycle, so that no path runs
            # from a parent's root through the take into a child.
            with m.If(take & valid):
                m.d.sync += pending.eq(1)
            if self.leaf:
                # The popped leaf becomes unavailable.
                with m.If(pending):
                    decoded = Cat(one_hot_decode(popped))
                    m.d.sync += [avails[side].eq(avails[side] & ~decoded), pending.eq(0),
                                 count.eq(self.settle)]
                with m.If(self.clear):
                    m.d.sync += [count.eq(0), pending.eq(0)]
                # A load (a new vector) overrides the clear of the previous one in the same edge.
                with m.If(self.load):
                    m.d.sync += [avails[side].eq(-1), count.eq(self.settle), pending.eq(0)]
            else:
                children = getattr(self, f"child_{side}")
                child_take = getattr(self, f"child_{side}_take")
                # The popped leaf is refilled from its child the cycle after the take, without
                # waiting for the child's valid: the child was taken when the leaf was last
                # loaded and has settled since (a child never settles slower than its parent:
                # see unit_levels), so its root is its next winner. No path runs from the
                # children's state through the parent back into a child.
                selected = Cat(one_hot_decode(popped))
                with m.If(start):
                    m.d.sync += [leaves[side].eq(children), count.eq(self.settle)]
                    m.d.comb += child_take.eq(-1)
                with m.Elif(pending):
                    for j in range(f):
                        with m.If(selected[j]):
                            m.d.sync += leaves[side][j].eq(children[j])
                    m.d.sync += [pending.eq(0), count.eq(self.settle)]
                    m.d.comb += child_take.eq(selected)
                with m.If(self.clear):
                    m.d.sync += [count.eq(0), pending.eq(0)]
        if self.leaf:
            with m.If(self.clear):
                m.d.sync += loaded.eq(0)
            with m.If(self.load):
                m.d.sync += loaded.eq(1)
        else:
            with m.If(start):
                m.d.sync += loaded.eq(1)
            with m.If(self.clear):
                m.d.sync += loaded.eq(0)
        return m

    def _tree(self, m, side, entries, leaf_gt):
        """Reduce the leaf entries ``(key, avail, index)`` to the root, registering the levels
        of :func:`_cut_levels`; return the root (registered) as ``(key, avail, index)``."""
        cuts = _cut_levels(self.levels, self.pipeline)
        for level in range(1, self.levels + 1):
            nodes = []
            for p in range(len(entries) // 2):
                (lkey, lavail, lindex), (rkey, ravail, rindex) = entries[2 * p:2 * p + 2]
                gt = leaf_gt[p] if level == 1 and leaf_gt is not None else rkey > lkey
                # Max tree: the right child wins if it is greater (ties to the lower index);
                # min tree: if it is not greater (ties to the higher index). An unavailable
                # child always loses.
                wins = gt if side == "max" else ~gt
                right = Signal(name=f"{side}_l{level}_{p}_right")
                m.d.comb += right.eq(ravail & (~lavail | wins))
                index = right if lindex is None else Cat(Mux(right, rindex, lindex), right)
                node = (Mux(right, rkey, lkey), Mux(right, ravail, lavail), index)
                if level in cuts:
                    width = len(node[2])
                    key = Signal(16, name=f"{side}_l{level}_{p}_key")
                    avail = Signal(name=f"{side}_l{level}_{p}_avail")
                    index = Signal(width, name=f"{side}_l{level}_{p}_index")
                    m.d.sync += [key.eq(node[0]), avail.eq(node[1]), index.eq(node[2])]
                    node = (key, avail, index)
                nodes.append(node)
            entries = nodes
        return entries[0]


def elaborate_units(orizuru, m):
    """The composition of :class:`OrizuruUnit` for :class:`hdl.kllm.orizuru.orizuru.Orizuru` with
    ``structure="units"``: the stream ports, the units (through ``orizuru.shared_modules``),
    the beat count and the mask."""
    n, k, pipeline, lanes = orizuru.n, orizuru.k, orizuru.pipeline, orizuru.lanes
    beats = orizuru.beats_per_vector
    busy = Signal()
    accept = Signal()
    in_beat = Signal(range(beats)) if beats > 1 else None
    load_beat = one_hot_decode(in_beat) if beats > 1 else [Const(1, 1)]
    leaf_fanin = 1 << unit_levels(n)[0]
    # Each leaf unit's values, one slice of the beat each (through group wires: see
    # hdl.common.lanes).
    unit_values = split_lanes(m, orizuru.i.payload.x, 16 * leaf_fanin, lanes // leaf_fanin,
                              name="unit_x", group=8)
    m.d.comb += [orizuru.i.ready.eq(~busy), accept.eq(orizuru.i.valid & ~busy)]
    shared = orizuru.shared_modules
    levels = unit_levels(n)
    # Build the levels bottom-up: each unit's children are the next 2^L units of the level
    # below (leaf units: the next 2^L values).
    below, every = [], []
    sub_bits = 0
    for depth, tree_levels in enumerate(levels):
        fanin = 1 << tree_levels
        count = n >> (sub_bits + tree_levels)
        units = []
        for u in range(count):
            unit = OrizuruUnit(fanin=fanin, sub_bits=sub_bits, leaf=depth == 0,
                               pipeline=pipeline)
            shared.add(m, f"unit{depth + 1}_{u}", unit.module_name, unit)
            units.append(unit)
            every.append(unit)
            if depth == 0:
                beat, base = divmod(u * fanin, lanes)
                m.d.comb += [unit.load.eq(accept & load_beat[beat]),
                             unit.x.as_value().eq(unit_values[base // fanin])]
            else:
                children = below[u * fanin:(u + 1) * fanin]
                for side in ("max", "min"):
                    m.d.comb += [
                        getattr(unit, f"child_{side}_valid").eq(
                            Cat(getattr(child, f"{side}_valid") for child in children)),
                        Cat(getattr(child, f"{side}_take") for child in children).eq(
                            getattr(unit, f"child_{side}_take")),
                    ]
                    m.d.comb += [getattr(unit, f"child_{side}")[j].eq(
                        getattr(child, f"{side}_root")) for j, child in enumerate(children)]
        below = units
        sub_bits += tree_levels
    top = below[0]

    beat = Signal(range(max(k, 2)))
    seen = Signal(n)
    send = Signal()
    last = Signal()
    m.d.comb += [
        orizuru.o.valid.eq(busy & top.max_valid & top.min_valid),
        send.eq(orizuru.o.valid & orizuru.o.ready),
        last.eq(beat == k - 1),
    ]
    # The units empty the cycle after the last beat (a registered broadcast); a leaf unit
    # loaded by the next vector in that same edge takes the load.
    clear = Signal()
    m.d.sync += clear.eq(send & last)
    for unit in every:
        m.d.comb += unit.clear.eq(clear)
    # The top's roots are taken with every beat but the last (which empties the units).
    m.d.comb += [top.max_take.eq(send & ~last), top.min_take.eq(send & ~last)]

    payload = orizuru.o.payload
    reported = Signal(n)
    m.d.comb += [
        payload.max_index.eq(top.max_root.index),
        payload.max_value.eq(total_order_value(top.max_root.key)),
        payload.min_index.eq(top.min_root.index),
        payload.min_value.eq(total_order_value(top.min_root.key)),
        payload.last.eq(last),
        reported.eq(one_hot_wires(m, top.max_root.index, name="max_decoded") |
                    one_hot_wires(m, top.min_root.index, name="min_decoded")),
        payload.mask.eq(Mux(last, seen | reported, 0)),
    ]
    with m.If(accept):
        if beats > 1:
            m.d.sync += in_beat.eq(in_beat + 1)
            with m.If(in_beat == beats - 1):
                m.d.sync += busy.eq(1)
        else:
            m.d.sync += busy.eq(1)
    with m.If(send):
        with m.If(last):
            m.d.sync += [busy.eq(0), beat.eq(0), seen.eq(0)]
        with m.Else():
            m.d.sync += [beat.eq(beat + 1), seen.eq(seen | reported)]
