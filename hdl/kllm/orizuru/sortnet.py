"""Sorting-network baseline for Orizuru: top-k and bottom-k comparator network (contract 3).

The unit is here; the networks (plain Python) are in :mod:`hdl.kllm.orizuru.sortnet_networks`,
their circuits and shared blocks in :mod:`hdl.kllm.orizuru.sortnet_circuits`.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import named, one_hot_wires, or_tree
from ...common.fp16 import total_order_key, total_order_value
from ...common.lanes import split_lanes
from .orizuru import stream_layouts
from .sortnet_circuits import comparator_network, FullMergeBlock, NetworkBlock
from .sortnet_networks import (FULL_MERGE_SLACK, SelectionNetwork, network_outputs,
                                       full_merge_network, full_merge_outputs, selection_blocks,
                                       selection_network)
from ...common.params import check_int
from ...common.shared_modules import SharedModules
from ...common.stream_stage import StallPipeline, check_pipeline

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


class OrizuruSortnet(wiring.Component):
    """Baseline for Orizuru: the k largest and k smallest of n binary16 values by a pipelined
    comparator network, one vector per cycle into the network, k output beats per vector.

    What a designer would build instead of Orizuru's trees: a sorting network pruned to the
    outputs needed (:func:`selection_network`). Each element is a composite key
    ``Cat(~index, key)`` (``key``: the binary16 totalOrder key, :func:`hdl.common.fp16.total_order_key`;
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
    merge block per pair of blocks below, each block a :class:`NetworkBlock` emitted once
    as a Verilog module (:class:`hdl.common.shared_modules.SharedModules`) and instantiated per
    group (merges that are the same circuit share one module). The levels and the cuts
    (placed on the flat network's level numbers) are the flat network's, so are the latency
    and the stage structure, and so are the comparators except where a merge of two whole
    sorted groups is built as the full merge (:func:`full_merge_outputs`: at most
    :data:`FULL_MERGE_SLACK` times that block's comparators, where k >= a quarter of its
    lanes). A full merge is a :class:`FullMergeBlock`: two merges of half its size and one
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
            resolve = comparator_network(m, net, elements, self._cut_levels(),
                                          lambda value, name: pipe.stage(value, name=name))
            records = [{"max": resolve(net.top[-1 - j]), "min": resolve(net.bottom[j])}
                       for j in range(self.k)]
        else:
            records = self._elaborate_blocks(m, pipe, elements)
        self._serialise(m, record, records)
        return m

    def _elaborate_blocks(self, m, pipe, elements):
        """The network from :attr:`blocks`: a :class:`NetworkBlock` per group of
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
                module = FullMergeBlock.module_name(size // 2, width, block_cuts)
            else:
                module = modules.setdefault(
                    (network, tuple(block_cuts)),
                    f"orizuru_sortnet_n{self.n}_k{self.k}_p{self.pipeline}_{kind}{size}")
            outputs = []
            for j, inputs in enumerate(groups):
                if full:
                    block = FullMergeBlock(size // 2, width, block_cuts, self.shared_modules)
                else:
                    block = NetworkBlock(network, width, block_cuts)
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
                for j, symbol in enumerate(network_outputs(network))}
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
