"""Sorting-network baseline for Orizuru: top-k and bottom-k comparator network (SPEC 3)."""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import named, one_hot_wires, or_tree
from .fp16 import total_order_key, total_order_value
from .lanes import split_lanes
from .orizuru import stream_layouts
from .params import check_int
from .shared_modules import SharedModules
from .stream_stage import StallPipeline, check_pipeline, enabled_register, register_packed

__all__ = ["OrizuruSortnet", "SelectionNetwork", "selection_network", "selection_blocks",
           "full_merge_network", "full_merge_outputs", "LEVELS_PER_STAGE", "MAX_PIPELINE",
           "DEFAULT_PIPELINE", "DEFAULT_BLOCK_LANES", "FULL_MERGE_SLACK"]

#: Comparator levels between two register cuts for each ``pipeline`` value (0: the whole
#: network, one register behind it).
LEVELS_PER_STAGE = {0: None, 1: 4, 2: 2, 3: 1}
MAX_PIPELINE = max(LEVELS_PER_STAGE)
#: The depth that closes timing on ECP5-25F at n = 16, k = 2 (docs/units/orizuru.md).
DEFAULT_PIPELINE = 3
#: Largest n x 2k for which the mask is the OR of the 2k indices' one-hot decodes at the last
#: beat (fewest LUTs at small n and k); above it the mask is gathered over the beats, two
#: decodes whatever k (2 million ANDs at n = 1024, k = 1024 otherwise).
DIRECT_MASK_ANDS = 1 << 16
#: Lanes of the smallest shared block; networks of more lanes are built from blocks
#: (:func:`selection_blocks`), fewer are flat.
DEFAULT_BLOCK_LANES = 64

# Constant slots of a merge padded to a power of two: below and above every element.
_BELOW, _ABOVE = -1, -2


@dataclass(frozen=True)
class SelectionNetwork:
    """A comparator network whose outputs are the k smallest and the k largest of n elements.

    Elements are symbols: ``0 .. n-1`` the inputs (lane order), comparator ``c`` of
    ``comparators`` is ``(a, b, low, high)``: it takes symbols ``a`` and ``b`` and produces
    ``low`` (the smaller) and ``high`` (the larger), new symbols. Comparators are listed in an
    order where every input is produced before it is used; ``levels[c]`` is comparator c's
    level (1 + the deepest level among its inputs' comparators; inputs are level 0).

    ``bottom``: symbols of the k smallest, ascending; ``top``: of the k largest, ascending
    (the largest last).
    """

    n: int
    k: int
    comparators: tuple
    levels: tuple
    bottom: tuple
    top: tuple

    @property
    def depth(self):
        """Comparator levels on the longest path."""
        return max(self.levels, default=0)

    def evaluate(self, values):
        """Apply the network to ``values`` (n mutually comparable Python values) and return
        ``(bottom, top)``, each ascending (a model for tests)."""
        value = dict(enumerate(values))
        for a, b, low, high in self.comparators:
            value[low], value[high] = min(value[a], value[b]), max(value[a], value[b])
        return [value[s] for s in self.bottom], [value[s] for s in self.top]


class _Builder:
    """Comparators on symbols, each pair of symbols compared at most once."""

    def __init__(self, n):
        self.next = n
        self.comparators = []
        self._made = {}

    def compare(self, a, b):
        """``(low, high)`` of symbols ``a`` and ``b``; a constant slot needs no comparator."""
        if _BELOW in (a, b):
            return _BELOW, b if a == _BELOW else a
        if _ABOVE in (a, b):
            return b if a == _ABOVE else a, _ABOVE
        if (a, b) not in self._made:
            low, high = self.next, self.next + 1
            self.next += 2
            self.comparators.append((a, b, low, high))
            self._made[(a, b)] = (low, high)
        return self._made[(a, b)]

    def odd_even_merge(self, slots, lo, hi, r):
        """Batcher's odd-even merge of ``slots[lo..hi]`` (two sorted halves), stride r."""
        step = 2 * r
        if step < hi - lo:
            self.odd_even_merge(slots, lo, hi, step)
            self.odd_even_merge(slots, lo + r, hi, step)
            for i in range(lo + r, hi - r, step):
                slots[i], slots[i + r] = self.compare(slots[i], slots[i + r])
        else:
            slots[lo], slots[lo + r] = self.compare(slots[lo], slots[lo + r])

    def merge(self, first, second, keep, largest):
        """The ``keep`` largest (or smallest) of two sorted lists, ascending: an odd-even merge
        of both padded to a power of two with constant slots (below every element in front
        for the largest, above at the back for the smallest)."""
        size = 1
        while size < max(len(first), len(second)):
            size *= 2
        if largest:
            slots = ([_BELOW] * (size - len(first)) + list(first)
                     + [_BELOW] * (size - len(second)) + list(second))
        else:
            slots = (list(first) + [_ABOVE] * (size - len(first))
                     + list(second) + [_ABOVE] * (size - len(second)))
        self.odd_even_merge(slots, 0, 2 * size - 1, 1)
        return slots[-keep:] if largest else slots[:keep]


def selection_network(n, k):
    """Build the :class:`SelectionNetwork` of ``n`` (a power of two) inputs and ``k``.

    Recursive: the k smallest and k largest of a group (both ascending) are merged from its
    halves' by two odd-even merges (of the halves' smallest lists, of their largest lists), a
    single element being its own smallest and largest; a pair of symbols is compared once
    even where both merges ask for it (small groups, where the lists overlap). Comparators on
    which no output depends are then removed, and the rest levelled as soon as possible.
    """
    builder = _Builder(n)

    def select(first, size):
        if size == 1:
            return [first], [first]
        keep = min(k, size)
        low_1, high_1 = select(first, size // 2)
        low_2, high_2 = select(first + size // 2, size // 2)
        return (builder.merge(low_1, low_2, keep, largest=False),
                builder.merge(high_1, high_2, keep, largest=True))

    bottom, top = select(0, n)
    return _pruned(builder, n, k, bottom, top)


def _pruned(builder, inputs, k, bottom, top):
    """The :class:`SelectionNetwork` of ``builder``'s comparators that an output in ``bottom``
    or ``top`` depends on, levelled as soon as possible."""
    needed = set(bottom) | set(top)
    kept = []
    for comparator in reversed(builder.comparators):
        a, b, low, high = comparator
        if low in needed or high in needed:
            needed |= {a, b}
            kept.append(comparator)
    kept.reverse()
    level = dict.fromkeys(range(inputs), 0)
    levels = []
    for a, b, low, high in kept:
        level[low] = level[high] = max(level[a], level[b]) + 1
        levels.append(level[low])
    return SelectionNetwork(n=inputs, k=k, comparators=tuple(kept), levels=tuple(levels),
                            bottom=tuple(bottom), top=tuple(top))


def _outputs(network):
    """The distinct output symbols of ``network``: its bottom list, then the top list's new
    ones (where a group has at most 2k elements both lists share symbols)."""
    return tuple(dict.fromkeys((*network.bottom, *network.top)))


def selection_blocks(n, k, lanes):
    """:func:`selection_network` of ``n`` and ``k`` as blocks: ``[(size, network), ...]``,
    bottom-up, ``size`` the lanes a block covers (``lanes``, then doubling up to ``n``).

    The first network selects the k smallest and k largest of ``lanes`` inputs (one block per
    aligned group of lanes); each later one merges two blocks of half its size: its inputs
    are the first child's outputs (:func:`_outputs`, in order), then the second's, and it
    outputs the merged lists. Every block of one size is the same circuit on other wires, so
    that the network can be built from one module per size. Their comparators are the flat
    network's, group by group, each block levelled as soon as possible from its own inputs,
    and the blocks' depths add up to the flat network's depth (the tests check both), so
    that cuts placed on the flat network's level numbers give the same latency.
    """
    blocks = [(lanes, selection_network(lanes, k))]
    size = lanes
    while size < n:
        size *= 2
        child = blocks[-1][1]
        outputs = _outputs(child)
        width = len(outputs)
        position = {symbol: j for j, symbol in enumerate(outputs)}
        builder = _Builder(2 * width)
        lists = [[position[s] + offset for s in symbols]
                 for offset in (0, width) for symbols in (child.bottom, child.top)]
        keep = min(k, size)
        bottom = builder.merge(lists[0], lists[2], keep, largest=False)
        top = builder.merge(lists[1], lists[3], keep, largest=True)
        blocks.append((size, _pruned(builder, 2 * width, k, bottom, top)))
    return blocks


def full_merge_network(lists):
    """Batcher's odd-even merge of two sorted lists of ``lists`` elements (a power of two):
    a :class:`SelectionNetwork` on ``2 * lists`` inputs (the first list, then the second)
    whose bottom and top are all ``2 * lists`` outputs, ascending."""
    builder = _Builder(2 * lists)
    slots = list(range(2 * lists))
    builder.odd_even_merge(slots, 0, 2 * lists - 1, 1)
    return _pruned(builder, 2 * lists, 2 * lists, tuple(slots), tuple(slots))


#: A merge block whose inputs are two whole sorted groups is built as the full merge (nested,
#: fast to elaborate) when that has its levels and at most this many times its comparators.
FULL_MERGE_SLACK = 3 / 2


def full_merge_outputs(child, child_lanes, network):
    """The positions, among the full merge's ascending outputs, of ``network``'s outputs
    (:func:`_outputs` order), when the merge block ``network`` (of two blocks ``child`` of
    ``child_lanes`` lanes) is built as :func:`full_merge_network`; None to build it as it is.

    A child whose outputs are all its lanes (k >= half its lanes) passes them on ascending
    (its smallest list, then the rest of its largest), so the block's inputs are two sorted
    lists and the full merge sorts all of them: the k smallest are its first k outputs, the k
    largest its last k. It is used when it has the block's levels (the latency and the cuts
    stay the flat network's) and at most :data:`FULL_MERGE_SLACK` times its comparators: near
    k = n / 2, where the root's pruned merges keep k of 2k and do not split into equal halves
    (n = 1024, k = 511: 4,609 comparators against 4,608, elaborated in halves)."""
    if len(_outputs(child)) != child_lanes:
        return None
    full = full_merge_network(child_lanes)
    if (full.depth != network.depth
            or len(full.comparators) > FULL_MERGE_SLACK * len(network.comparators)):
        return None
    total, keep = 2 * child_lanes, len(network.bottom)
    position = {symbol: j for j, symbol in enumerate(network.bottom)}
    position.update((symbol, total - keep + j) for j, symbol in enumerate(network.top))
    return [position[symbol] for symbol in _outputs(network)]


#: Values per packed stage register of a comparator network (see :func:`_register_live`).
_GROUP = 32


def _comparator_network(m, network, inputs, cuts, register):
    """Build ``network`` (a :class:`SelectionNetwork`) in ``m`` on ``inputs`` (a value per
    input symbol) with a register cut after each comparator level in ``cuts``; ``register(value,
    name)`` returns ``value`` registered. Returns ``resolve(symbol)``: an output's value after
    the network (call it after the build, in the order the outputs are wanted).

    A comparator is ``b < a`` on the carry chain (its swap bit) and two multiplexers passing
    the pair on ordered, built where an output is first used: a cut registers the swap bit and
    both inputs, so that the multiplexers sit after the register and a stage is multiplex,
    compare, register.
    """
    value = dict(enumerate(inputs))     # symbol -> its value in the current stage (resolved)
    fresh = {}          # symbol -> (swap, a, b, is_high): made in this stage, not yet muxed

    def resolve(symbol):
        if symbol not in value:
            swap, a, b, is_high = fresh[symbol]
            # low = b if swapped else a; high = a if swapped else b. A named signal: Amaranth
            # lowers every statement's expression on its own, so an unnamed multiplexer would
            # be emitted again inside every later expression that uses it, and a network's
            # expressions reconverge (both outputs of a comparator use both inputs): without
            # names the Verilog grows exponentially in the levels between two cuts.
            value[symbol] = named(m, Mux(swap, a, b) if is_high else Mux(swap, b, a),
                                  f"e{symbol}")
        return value[symbol]

    # symbol -> the deepest level that reads it: a symbol in both lists of a group feeds a
    # comparator of each merge, at different levels, listed in either order.
    last_use = {}
    for (a, b, _, _), level in zip(network.comparators, network.levels):
        for symbol in (a, b):
            last_use[symbol] = max(last_use.get(symbol, 0), level)
    for symbol in (*network.bottom, *network.top):
        last_use[symbol] = network.depth + 1

    by_level = {}
    for index, level in enumerate(network.levels):
        by_level.setdefault(level, []).append(index)
    for level in range(1, network.depth + 1):
        for index in by_level[level]:
            a_symbol, b_symbol, low, high = network.comparators[index]
            a, b = resolve(a_symbol), resolve(b_symbol)
            swap = Signal(name=f"c{index}_swap")
            m.d.comb += swap.eq(b < a)          # a > b: carry chain only
            fresh[low] = (swap, a, b, False)
            fresh[high] = (swap, a, b, True)
        if level in cuts:
            live = [symbol for symbol, last in last_use.items()
                    if last > level and (symbol in value or symbol in fresh)]
            value, fresh = _register_live(register, level, live, value, fresh)
    return resolve


def _register_live(register, level, live, value, fresh):
    """Register the ``live`` symbols after ``level``: the swap bit and both inputs of a
    comparator made in this stage (once for both its outputs), else the value. Values are
    registered packed, :data:`_GROUP` per register (a smaller netlist than one per element).
    Returns the next stage's ``value`` and ``fresh``."""
    items = []       # values to register, in order
    slots = {}       # id of a value -> its position in items
    plan = {}

    def slot(item):
        if id(item) not in slots:
            slots[id(item)] = len(items)
            items.append(item)
        return slots[id(item)]

    for symbol in sorted(live):
        if symbol in value:
            plan[symbol] = ("value", slot(value[symbol]))
        else:
            swap, a, b, is_high = fresh[symbol]
            plan[symbol] = ("fresh", slot(swap), slot(a), slot(b), is_high)
    registered = register_packed(items, register, group=_GROUP, name=f"s{level}")
    new_value, new_fresh = {}, {}
    for symbol, entry in plan.items():
        if entry[0] == "value":
            new_value[symbol] = registered[entry[1]]
        else:
            _, swap, a, b, is_high = entry
            new_fresh[symbol] = (registered[swap], registered[a], registered[b], is_high)
    return new_value, new_fresh


class _NetworkBlock(wiring.Component):
    """One block of :func:`selection_blocks`: ``network`` on the ``width``-bit elements packed
    in ``x`` (input symbol j at bits ``j * width``), its outputs (:func:`_outputs`) packed the
    same way in ``y``, with register cuts after the block's levels in ``cuts``, loading at
    ``ce`` (the sorting network's clock enable)."""

    def __init__(self, network, width, cuts):
        self.network, self.width, self.cuts = network, width, list(cuts)
        super().__init__({
            "ce": In(1),
            "x": In(network.n * width),
            "y": Out(len(_outputs(network)) * width),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.width
        inputs = [self.x[j * w:(j + 1) * w] for j in range(self.network.n)]
        resolve = _comparator_network(
            m, self.network, inputs, self.cuts,
            lambda value, name: enabled_register(m, value, self.ce, name=name))
        m.d.comb += self.y.eq(Cat(resolve(symbol) for symbol in _outputs(self.network)))
        return m


class _FullMergeBlock(wiring.Component):
    """Batcher's odd-even merge of two sorted lists of ``lists`` elements (``x``: the first
    list, then the second; ``y``: all ``2 * lists``, ascending), with register cuts after the
    levels in ``cuts``, loading at ``ce``: the merges of the even-numbered and of the
    odd-numbered elements of both lists, each a block of half the size (an instance of one
    shared module), then one level comparing every odd merge output with the next even one.
    Up to :attr:`FLAT_LISTS` elements per list it is one flat network."""

    FLAT_LISTS = 8

    def __init__(self, lists, width, cuts, shared):
        self.lists, self.width, self.cuts, self.shared = lists, width, list(cuts), shared
        self.depth = (2 * lists).bit_length() - 1
        super().__init__({
            "ce": In(1),
            "x": In(2 * lists * width),
            "y": Out(2 * lists * width),
        })

    @staticmethod
    def module_name(lists, width, cuts):
        """The Verilog module of a merge of two lists of ``lists`` with cuts after ``cuts``."""
        mask = sum(1 << level for level in cuts)
        return f"orizuru_sortnet_w{width}_merge{2 * lists}_cuts{mask:x}"

    def elaborate(self, platform):
        m = Module()
        half, w = self.lists, self.width
        elements = [self.x[j * w:(j + 1) * w] for j in range(2 * half)]

        def register(value, name):
            return enabled_register(m, value, self.ce, name=name)

        if half <= self.FLAT_LISTS:
            network = full_merge_network(half)
            resolve = _comparator_network(m, network, elements, self.cuts, register)
            m.d.comb += self.y.eq(Cat(resolve(symbol) for symbol in network.bottom))
            return m
        inner_cuts = [level for level in self.cuts if level < self.depth]
        merged = []
        for parity in ("even", "odd"):
            start = 0 if parity == "even" else 1
            inner = _FullMergeBlock(half // 2, w, inner_cuts, self.shared)
            self.shared.add(m, parity, self.module_name(half // 2, w, inner_cuts), inner)
            m.d.comb += [inner.ce.eq(self.ce),
                         inner.x.eq(Cat(elements[start::2]))]
            merged.append([inner.y[j * w:(j + 1) * w] for j in range(half)])
        even, odd = merged
        # The last level: odd output j against even output j + 1 (Batcher's final layer);
        # even 0 and odd half-1 pass.
        layer = SelectionNetwork(
            n=2 * half, k=2 * half,
            comparators=tuple((half + j, j + 1, 2 * half + 2 * j, 2 * half + 2 * j + 1)
                              for j in range(half - 1)),
            levels=(1,) * (half - 1),
            bottom=(0, *(2 * half + j for j in range(2 * half - 2)), 2 * half - 1),
            top=())
        resolve = _comparator_network(m, layer, even + odd,
                                      [1] if self.depth in self.cuts else [], register)
        m.d.comb += self.y.eq(Cat(resolve(symbol) for symbol in layer.bottom))
        return m


class OrizuruSortnet(wiring.Component):
    """Baseline for Orizuru: the k largest and k smallest of n binary16 values by a pipelined
    comparator network, one vector per cycle into the network, k output beats per vector.

    What a designer would build instead of Orizuru's trees: a sorting network pruned to the
    outputs needed (:func:`selection_network`). Each element is a composite key
    ``Cat(~index, key)`` (``key``: the binary16 totalOrder key, :func:`hdl.fp16.total_order_key`;
    ``index``: the lane, inverted, in the least significant bits), so that all n elements are
    distinct and the order is total: larger key first, equal keys lower index first. The
    largest k in descending order are Orizuru's max beats (equal keys lowest index first), the
    smallest k in ascending order its min beats (equal keys highest index first): the outputs
    are bit-exact with :func:`golden.orizuru.orizuru_beats` and identical to ``orizuru``'s.

    Network: the k smallest and k largest of each group of lanes, both sorted, come from its
    halves' by Batcher odd-even merges, recursively down to single lanes; comparators no
    output depends on are removed. A comparator is a (16 + log2 n)-bit unsigned compare on the
    carry chain and two multiplexers passing the pair on ordered. Comparators
    (:attr:`comparators`) and levels (:attr:`depth`) at a few shapes: n = 16: 22 / 4 (k = 1),
    38 / 7 (k = 2), 54 / 9 (k = 4), 63 / 10 (k = 8, a full sort); n = 64, k = 4: 264 / 15;
    n = 1024, k = 2: 2810 / 19. For comparison, a full Batcher sort of 16 is 63 comparators
    in 10 levels, and pruning it to k = 2 leaves 52.

    Register cuts (``pipeline``): a cut registers every element still needed after it; a
    comparator's result crosses a cut as its swap bit and its two inputs, the two 2:1
    multiplexers being placed after the register, so that a stage is: multiplex, compare,
    register. ``pipeline=0``: the whole network combinational, one register behind it;
    1, 2, 3: a cut every 4, 2, 1 comparator levels (and behind the last).

    Blocks (``block_lanes``, default 64): above that many lanes the network is built from
    :func:`selection_blocks`, a first-level block per group of ``block_lanes`` lanes, then a
    merge block per pair of blocks below, each block a :class:`_NetworkBlock` emitted once
    as a Verilog module (:class:`hdl.shared_modules.SharedModules`) and instantiated per
    group (merges that are the same circuit share one module). The levels and the cuts
    (placed on the flat network's level numbers) are the flat network's, so are the latency
    and the stage structure, and so are the comparators except where a merge of two whole
    sorted groups is built as the full merge (:func:`full_merge_outputs`: at most
    :data:`FULL_MERGE_SLACK` times that block's comparators, where k >= a quarter of its
    lanes). A full merge is a :class:`_FullMergeBlock`: two merges of half its size and one
    level, nested.
    The Verilog is hierarchical and elaborates in a fraction of the flat network's time
    (n = 1024, k = 64: 10 s against 88 s).

    Output: the last stage holds a vector's 2k results; they leave one beat per cycle, beat j
    with the j-th largest (``max_index``, ``max_value``) and the j-th smallest (``min_index``,
    ``min_value``), the k-th beat with ``last`` and ``mask`` (1 at every reported lane). The
    pipeline advances, and the next vector's results load, with the last beat.

    Parameters
    ----------
    n : int
        Inputs, a power of two in 2..1024 (default 16).
    k : int
        Values reported per side, 1..n (default 2).
    width : int
        Value width; 16 (IEEE binary16) is the only one supported.
    pipeline : int
        Register cuts, 0..3 (default 3; see above).
    block_lanes : int
        Lanes of a first-level block, a power of two in 2..1024 (default 64); n at most this:
        one flat network. A construction choice: the outputs, the latency and the timing
        structure do not depend on it.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``: n x 16-bit binary16 patterns.
    o : ``Out(stream.Signature(out_layout))``
        ``max_index``, ``max_value``, ``min_index``, ``min_value``, ``last``, ``mask`` (n bits,
        1 at every index reported for the vector, on the ``last`` beat; 0 before).
    network : SelectionNetwork
        The comparator network.
    blocks : list or None
        ``[(lanes, SelectionNetwork), ...]`` of :func:`selection_blocks` when n >
        ``block_lanes``, else None.
    shared_modules : SharedModules
        The blocks' Verilog modules (filled when the generator converts the unit).
    comparators : int
        Comparators built: the network's, or more where a merge block is built as the full
        merge (above).
    depth : int
        Comparator levels on the longest path.
    latency : int
        Cycles from the transfer of a vector on ``i`` to its first output beat being valid on
        ``o`` (with the unit empty and ``o.ready`` high): the number of register stages, 1 at
        ``pipeline=0``, else ``ceil(depth / levels per stage)`` (7 at n = 16, k = 2 and the
        default). Beat j follows j cycles later.

    Throughput: the network takes one vector per cycle while it fills; the output sends k
    beats per vector, so one vector every k cycles back to back (no gap between vectors).
    ``i.ready`` is combinational in ``o.ready`` at every depth.

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is outside its range (``n`` also: not a power of two).
    """

    def __init__(self, *, n=16, k=2, width=16, pipeline=DEFAULT_PIPELINE,
                 block_lanes=DEFAULT_BLOCK_LANES):
        self.n = check_int("n", n, min_value=2, max_value=1024)
        if self.n & (self.n - 1):
            raise ValueError(f"n must be a power of two in 2..1024, not {self.n}")
        self.k = check_int("k", k, min_value=1, max_value=self.n)
        self.width = check_int("width", width, min_value=16, max_value=16)
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.block_lanes = check_int("block_lanes", block_lanes, min_value=2, max_value=1024)
        if self.block_lanes & (self.block_lanes - 1):
            raise ValueError(f"block_lanes must be a power of two in 2..1024, "
                             f"not {self.block_lanes}")
        self.index_bits = self.n.bit_length() - 1
        self.network = selection_network(self.n, self.k)
        self.blocks = (selection_blocks(self.n, self.k, self.block_lanes)
                       if self.n > self.block_lanes else None)
        # Per block: the full merge's outputs it keeps (built as the full merge), or None.
        self._full_outputs = [None] + [
            full_merge_outputs(child, child_size, network)
            for (child_size, child), (_, network) in zip(self.blocks, self.blocks[1:])
        ] if self.blocks else None
        self.shared_modules = SharedModules()
        if self.blocks is None:
            self.comparators = len(self.network.comparators)
        else:
            self.comparators = sum(
                (self.n // size) * len(network.comparators if kept is None
                                       else full_merge_network(size // 2).comparators)
                for (size, network), kept in zip(self.blocks, self._full_outputs))
        self.depth = self.network.depth
        per_stage = LEVELS_PER_STAGE[self.pipeline] or self.depth
        #: Cycles from a vector's transfer on ``i`` to its first beat being valid on ``o``.
        self.latency = -(-self.depth // per_stage)
        self.in_layout, self.out_layout = stream_layouts(self.n)
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def _cut_levels(self):
        """The comparator levels after which a register cut is placed."""
        per_stage = LEVELS_PER_STAGE[self.pipeline] or self.depth
        return sorted({*range(per_stage, self.depth, per_stage), self.depth})

    def elaborate(self, platform):
        m = Module()
        n, net = self.n, self.network
        record = stream.Signature(1).create(path=("record",))
        pipe = StallPipeline(m, self.i, record, latency=self.latency, name="pipe")

        # Composite keys: the totalOrder key above the inverted lane index.
        incoming = split_lanes(m, self.i.payload.x, 16, n, name="x")
        elements = []
        for lane, x in enumerate(incoming):
            element = Signal(16 + self.index_bits, name=f"element_{lane}")
            m.d.comb += element.eq(Cat(Const(n - 1 - lane, self.index_bits), total_order_key(x)))
            elements.append(element)

        if self.blocks is None:
            resolve = _comparator_network(m, net, elements, self._cut_levels(),
                                          lambda value, name: pipe.stage(value, name=name))
            records = [{"max": resolve(net.top[-1 - j]), "min": resolve(net.bottom[j])}
                       for j in range(self.k)]
        else:
            records = self._elaborate_blocks(m, pipe, elements)
        self._serialise(m, record, records)
        return m

    def _elaborate_blocks(self, m, pipe, elements):
        """The network from :attr:`blocks`: a :class:`_NetworkBlock` per group of
        ``block_lanes`` lanes, then one per pair of blocks below, up to the root, each on the
        register cuts of the flat network's levels; returns the root's k result pairs."""
        width = 16 + self.index_bits
        cuts, offset = self._cut_levels(), 0
        outputs = None
        modules = {}     # (network, cuts) -> module name: equal merges above k lanes share one
        for (size, network), kept in zip(self.blocks, self._full_outputs):
            kind = "select" if outputs is None else "merge"
            block_cuts = [level - offset for level in cuts
                          if offset < level <= offset + network.depth]
            offset += network.depth
            if outputs is None:
                groups = [Cat(elements[first:first + size]) for first in range(0, self.n, size)]
            else:
                groups = [Cat(outputs[j], outputs[j + 1]) for j in range(0, len(outputs), 2)]
            full = kept is not None
            if full:
                module = _FullMergeBlock.module_name(size // 2, width, block_cuts)
            else:
                module = modules.setdefault(
                    (network, tuple(block_cuts)),
                    f"orizuru_sortnet_n{self.n}_k{self.k}_p{self.pipeline}_{kind}{size}")
            outputs = []
            for j, inputs in enumerate(groups):
                if full:
                    block = _FullMergeBlock(size // 2, width, block_cuts, self.shared_modules)
                else:
                    block = _NetworkBlock(network, width, block_cuts)
                self.shared_modules.add(m, f"{kind}{size}_{j}", module, block)
                m.d.comb += [block.ce.eq(pipe.ce), block.x.eq(inputs)]
                if full:
                    # Named: later slices of a Cat of hundreds of parts would each lower it.
                    outputs.append(named(m, Cat(block.y[p * width:(p + 1) * width]
                                                for p in kept), f"{kind}{size}_{j}_kept"))
                else:
                    outputs.append(block.y)
        network = self.blocks[-1][1]
        root = {symbol: outputs[0][j * width:(j + 1) * width]
                for j, symbol in enumerate(_outputs(network))}
        return [{"max": root[network.top[-1 - j]], "min": root[network.bottom[j]]}
                for j in range(self.k)]

    def _serialise(self, m, record, records):
        """Send the last stage's k result pairs one beat per cycle; the pipeline advances (and
        the next vector's results load) with the last beat."""
        n, k, bits = self.n, self.k, self.index_bits
        beat = Signal(range(max(k, 2)), name="beat")
        last = Signal(name="last_beat")
        m.d.comb += [
            last.eq(beat == k - 1),
            self.o.valid.eq(record.valid),
            record.ready.eq(self.o.ready & last),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))

        fields = {}
        for side in ("max", "min"):
            elements = []
            for j, entry in enumerate(records):
                element = Signal(16 + bits, name=f"{side}_{j}")
                m.d.comb += element.eq(entry[side])
                elements.append(element)
            fields[side] = elements

        def pick(values):
            if k == 1:
                return values[0]
            # Padded to every value of the counter, so that the multiplexer is a full case.
            return Array(values + values[-1:] * ((1 << len(beat)) - k))[beat]

        if 2 * k * n <= DIRECT_MASK_ANDS:
            # The mask: an OR of the 2k reported indices' one-hot decodes (n x 2k small ANDs,
            # where comparing every lane with every index costs n x 2k comparators).
            indices = {side: [~element[:bits] for element in fields[side]] for side in fields}
            reported = Signal(n, name="reported")
            decoded = [one_hot_wires(m, index, name=f"{side}_{j}_decoded")
                       for side in indices for j, index in enumerate(indices[side])]
            m.d.comb += reported.eq(or_tree(decoded))
            max_element, min_element = pick(fields["max"]), pick(fields["min"])
            max_index, min_index = ~max_element[:bits], ~min_element[:bits]
        else:
            # Named: a k-way multiplexer read by several expressions (the index, the value's
            # conversion) is emitted once.
            max_element = named(m, pick(fields["max"]), "beat_max")
            min_element = named(m, pick(fields["min"]), "beat_min")
            max_index = named(m, ~max_element[:bits], "beat_max_index")
            min_index = named(m, ~min_element[:bits], "beat_min_index")
            # The mask gathered over the beats: the lanes of this beat (two one-hot decodes)
            # and of the vector's beats before it (a register, cleared with the last beat).
            beat_lanes = Signal(n, name="beat_lanes")
            m.d.comb += beat_lanes.eq(one_hot_wires(m, max_index, name="beat_max_decoded")
                                      | one_hot_wires(m, min_index, name="beat_min_decoded"))
            sent = Signal(n, name="reported_before")
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += sent.eq(Mux(last, 0, sent | beat_lanes))
            reported = sent | beat_lanes
        m.d.comb += [
            self.o.payload.max_index.eq(max_index),
            self.o.payload.max_value.eq(total_order_value(max_element[bits:])),
            self.o.payload.min_index.eq(min_index),
            self.o.payload.min_value.eq(total_order_value(min_element[bits:])),
            self.o.payload.last.eq(last),
            self.o.payload.mask.eq(Mux(last, reported, 0)),
        ]
