"""The circuits of the sorting-network baseline (:class:`hdl.kllm.orizuru.sortnet.OrizuruSortnet`):
a comparator network built on values with register cuts after chosen levels
(:func:`comparator_network`), and the blocks emitted once as Verilog modules, one block of
:func:`~hdl.kllm.orizuru.sortnet_networks.selection_blocks` (:class:`NetworkBlock`) or a nested
full merge (:class:`FullMergeBlock`)."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import named
from .sortnet_networks import SelectionNetwork, network_outputs, full_merge_network
from ...common.stream_stage import enabled_register, register_packed

#: Nothing public: the circuits are internals of :mod:`hdl.kllm.orizuru.sortnet`, which imports them.
__all__ = []

#: Values per packed stage register of a comparator network (see :func:`_register_live`).
_GROUP = 32


def comparator_network(m, network, inputs, cuts, register):
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


class NetworkBlock(wiring.Component):
    """One block of :func:`selection_blocks`: ``network`` on the ``width``-bit elements packed
    in ``x`` (input symbol j at bits ``j * width``), its outputs (:func:`network_outputs`) packed the
    same way in ``y``, with register cuts after the block's levels in ``cuts``, loading at
    ``ce`` (the sorting network's clock enable)."""

    def __init__(self, network, width, cuts):
        self.network, self.width, self.cuts = network, width, list(cuts)
        super().__init__({
            "ce": In(1),
            "x": In(network.n * width),
            "y": Out(len(network_outputs(network)) * width),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.width
        inputs = [self.x[j * w:(j + 1) * w] for j in range(self.network.n)]
        resolve = comparator_network(
            m, self.network, inputs, self.cuts,
            lambda value, name: enabled_register(m, value, self.ce, name=name))
        m.d.comb += self.y.eq(Cat(resolve(symbol) for symbol in network_outputs(self.network)))
        return m


class FullMergeBlock(wiring.Component):
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
            resolve = comparator_network(m, network, elements, self.cuts, register)
            m.d.comb += self.y.eq(Cat(resolve(symbol) for symbol in network.bottom))
            return m
        inner_cuts = [level for level in self.cuts if level < self.depth]
        merged = []
        for parity in ("even", "odd"):
            start = 0 if parity == "even" else 1
            inner = FullMergeBlock(half // 2, w, inner_cuts, self.shared)
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
        resolve = comparator_network(m, layer, even + odd,
                                      [1] if self.depth in self.cuts else [], register)
        m.d.comb += self.y.eq(Cat(resolve(symbol) for symbol in layer.bottom))
        return m
