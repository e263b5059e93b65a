"""The comparator networks of the sorting-network baseline
(:class:`hdl.kllm.orizuru.sortnet.OrizuruSortnet`), as symbols in plain Python: the k smallest and k
largest of n elements by pruned Batcher odd-even merges (:func:`selection_network`), the same
network as blocks of equal circuits (:func:`selection_blocks`) and the full merge of two sorted
lists (:func:`full_merge_network`)."""

from dataclasses import dataclass

__all__ = ["SelectionNetwork", "selection_network", "selection_blocks", "full_merge_network",
           "full_merge_outputs", "FULL_MERGE_SLACK"]

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


def network_outputs(network):
    """The distinct output symbols of ``network``: its bottom list, then the top list's new
    ones (where a group has at most 2k elements both lists share symbols)."""
    return tuple(dict.fromkeys((*network.bottom, *network.top)))


def selection_blocks(n, k, lanes):
    """:func:`selection_network` of ``n`` and ``k`` as blocks: ``[(size, network), ...]``,
    bottom-up, ``size`` the lanes a block covers (``lanes``, then doubling up to ``n``).

    The first network selects the k smallest and k largest of ``lanes`` inputs (one block per
    aligned group of lanes); each later one merges two blocks of half its size: its inputs
    are the first child's outputs (:func:`network_outputs`, in order), then the second's, and it
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
        outputs = network_outputs(child)
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
    (:func:`network_outputs` order), when the merge block ``network`` (of two blocks ``child`` of
    ``child_lanes`` lanes) is built as :func:`full_merge_network`; None to build it as it is.

    A child whose outputs are all its lanes (k >= half its lanes) passes them on ascending
    (its smallest list, then the rest of its largest), so the block's inputs are two sorted
    lists and the full merge sorts all of them: the k smallest are its first k outputs, the k
    largest its last k. It is used when it has the block's levels (the latency and the cuts
    stay the flat network's) and at most :data:`FULL_MERGE_SLACK` times its comparators: near
    k = n / 2, where the root's pruned merges keep k of 2k and do not split into equal halves
    (n = 1024, k = 511: 4,609 comparators against 4,608, elaborated in halves)."""
    if len(network_outputs(child)) != child_lanes:
        return None
    full = full_merge_network(child_lanes)
    if (full.depth != network.depth
            or len(full.comparators) > FULL_MERGE_SLACK * len(network.comparators)):
        return None
    total, keep = 2 * child_lanes, len(network.bottom)
    position = {symbol: j for j, symbol in enumerate(network.bottom)}
    position.update((symbol, total - keep + j) for j, symbol in enumerate(network.top))
    return [position[symbol] for symbol in network_outputs(network)]
