"""Sorting-network baseline for Orizuru: top-k and bottom-k comparator network (SPEC 3)."""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import named, one_hot_wires, or_tree
from .fp16 import total_order_key, total_order_value
from .lanes import split_lanes
from .orizuru import stream_layouts
from .params import check_int
from .stream_stage import StallPipeline, check_pipeline

__all__ = ["OrizuruSortnet", "SelectionNetwork", "selection_network",
           "LEVELS_PER_STAGE", "MAX_PIPELINE", "DEFAULT_PIPELINE"]

#: Comparator levels between two register cuts for each ``pipeline`` value (0: the whole
#: network, one register behind it).
LEVELS_PER_STAGE = {0: None, 1: 4, 2: 2, 3: 1}
MAX_PIPELINE = max(LEVELS_PER_STAGE)
#: The depth that closes timing on ECP5-25F at n = 16, k = 2 (docs/units/orizuru.md).
DEFAULT_PIPELINE = 3

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
    needed = set(bottom) | set(top)
    kept = []
    for comparator in reversed(builder.comparators):
        a, b, low, high = comparator
        if low in needed or high in needed:
            needed |= {a, b}
            kept.append(comparator)
    kept.reverse()
    level = dict.fromkeys(range(n), 0)
    levels = []
    for a, b, low, high in kept:
        level[low] = level[high] = max(level[a], level[b]) + 1
        levels.append(level[low])
    return SelectionNetwork(n=n, k=k, comparators=tuple(kept), levels=tuple(levels),
                            bottom=tuple(bottom), top=tuple(top))


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

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``: n x 16-bit binary16 patterns.
    o : ``Out(stream.Signature(out_layout))``
        ``max_index``, ``max_value``, ``min_index``, ``min_value``, ``last``, ``mask`` (n bits,
        1 at every index reported for the vector, on the ``last`` beat; 0 before).
    network : SelectionNetwork
        The comparator network.
    comparators : int
        Comparators in the network.
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

    #: Elements of a packed stage register (see :meth:`_cut`).
    GROUP = 32

    def __init__(self, *, n=16, k=2, width=16, pipeline=DEFAULT_PIPELINE):
        self.n = check_int("n", n, min_value=2, max_value=1024)
        if self.n & (self.n - 1):
            raise ValueError(f"n must be a power of two in 2..1024, not {self.n}")
        self.k = check_int("k", k, min_value=1, max_value=self.n)
        self.width = check_int("width", width, min_value=16, max_value=16)
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.index_bits = self.n.bit_length() - 1
        self.network = selection_network(self.n, self.k)
        self.comparators = len(self.network.comparators)
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
        value = {}       # symbol -> its value in the current stage (resolved)
        fresh = {}       # symbol -> (swap, a, b, is_high): made in this stage, not yet muxed
        for lane, x in enumerate(incoming):
            element = Signal(16 + self.index_bits, name=f"element_{lane}")
            m.d.comb += element.eq(Cat(Const(n - 1 - lane, self.index_bits), total_order_key(x)))
            value[lane] = element

        def resolve(symbol):
            if symbol not in value:
                swap, a, b, is_high = fresh[symbol]
                # low = b if swapped else a; high = a if swapped else b. A named signal:
                # Amaranth lowers every statement's expression on its own, so an unnamed
                # multiplexer would be emitted again inside every later expression that uses
                # it, and a network's expressions reconverge (both outputs of a comparator
                # use both inputs): without names the Verilog grows exponentially in the
                # levels between two cuts.
                value[symbol] = named(m, Mux(swap, a, b) if is_high else Mux(swap, b, a),
                                      f"e{symbol}")
            return value[symbol]

        last_use = {}
        for (a, b, _, _), level in zip(net.comparators, net.levels):
            last_use[a] = last_use[b] = level
        for symbol in (*net.bottom, *net.top):
            last_use[symbol] = self.depth + 1

        cuts = self._cut_levels()
        by_level = {}
        for index, level in enumerate(net.levels):
            by_level.setdefault(level, []).append(index)
        for level in range(1, self.depth + 1):
            for index in by_level[level]:
                a_symbol, b_symbol, low, high = net.comparators[index]
                a, b = resolve(a_symbol), resolve(b_symbol)
                swap = Signal(name=f"c{index}_swap")
                m.d.comb += swap.eq(b < a)          # a > b: carry chain only
                fresh[low] = (swap, a, b, False)
                fresh[high] = (swap, a, b, True)
            if level in cuts:
                value, fresh = self._cut(pipe, level, value, fresh, last_use)

        records = [{"max": resolve(net.top[-1 - j]), "min": resolve(net.bottom[j])}
                   for j in range(self.k)]
        self._serialise(m, record, records)
        return m

    def _cut(self, pipe, level, value, fresh, last_use):
        """Register every symbol used after ``level``: the swap bit and both inputs of a
        comparator made in this stage (once for both its outputs), else the value. Values are
        registered packed, :attr:`GROUP` per register (a smaller netlist than one per
        element). Returns the next stage's ``value`` and ``fresh``."""
        live = [symbol for symbol, last in last_use.items()
                if last > level and (symbol in value or symbol in fresh)]
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
        registered = [None] * len(items)
        for first in range(0, len(items), self.GROUP):
            group = [Value.cast(item) for item in items[first:first + self.GROUP]]
            packed = pipe.stage(Cat(group), name=f"s{level}_{first}" if first else f"s{level}")
            offset = 0
            for position, item in enumerate(group, start=first):
                registered[position] = packed[offset:offset + len(item)]
                offset += len(item)
        new_value, new_fresh = {}, {}
        for symbol, entry in plan.items():
            if entry[0] == "value":
                new_value[symbol] = registered[entry[1]]
            else:
                _, swap, a, b, is_high = entry
                new_fresh[symbol] = (registered[swap], registered[a], registered[b], is_high)
        return new_value, new_fresh

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
        indices = {side: [~element[:bits] for element in fields[side]] for side in fields}

        def pick(values):
            if k == 1:
                return values[0]
            # Padded to every value of the counter, so that the multiplexer is a full case.
            return Array(values + values[-1:] * ((1 << len(beat)) - k))[beat]

        # The mask: an OR of the 2k reported indices' one-hot decodes (n x 2k small ANDs,
        # where comparing every lane with every index costs n x 2k comparators).
        reported = Signal(n, name="reported")
        decoded = [one_hot_wires(m, index, name=f"{side}_{j}_decoded")
                   for side in indices for j, index in enumerate(indices[side])]
        m.d.comb += reported.eq(or_tree(decoded))
        max_element, min_element = pick(fields["max"]), pick(fields["min"])
        m.d.comb += [
            self.o.payload.max_index.eq(~max_element[:bits]),
            self.o.payload.max_value.eq(total_order_value(max_element[bits:])),
            self.o.payload.min_index.eq(~min_element[:bits]),
            self.o.payload.min_value.eq(total_order_value(min_element[bits:])),
            self.o.payload.last.eq(last),
            self.o.payload.mask.eq(Mux(last, reported, 0)),
        ]
