"""Orizuru: top-k largest and smallest with two shared-leaf binary trees (KLLM IV-C, contract 3).

The unit is here: its parameters, interface, latency and the choice of structure. Each
structure's circuit has a module of its own: the time-multiplexed trees in
:mod:`hdl.kllm.orizuru.tree`, the unrolled structure and the scan in :mod:`hdl.kllm.orizuru.loop`
(``pipeline=0``) and :mod:`hdl.kllm.orizuru.unrolled` (``pipeline >= 1``), the composition of
16-input units in :mod:`hdl.kllm.orizuru.units`.
"""

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import named
from ...common.fp16 import total_order_key
from ...common.lanes import split_lanes
from .loop import elaborate_loop
from .tree import elaborate_tree
from .units import elaborate_units, units_cycles_per_vector, units_latency
from .unrolled import PIPELINE_CUTS, UNROLLED_MAX_PIPELINE, elaborate_unrolled
from ...common.params import check_choice, check_int
from ...common.shared_modules import SharedModules
from ...common.stream_stage import check_pipeline

__all__ = ["Orizuru", "OrizuruScan", "cycles_per_vector", "resolve_structure",
           "stream_layouts"]


#: Largest ``n`` (contract 3), built from 16-input units above :data:`MAX_FLAT_N`.
MAX_N = 4096
#: Largest ``n`` of the structures that are one pair of trees (or one scan).
MAX_FLAT_N = 1024
#: Largest ``k`` when ``n`` > :data:`MAX_FLAT_N` (contract 3).
MAX_WIDE_K = 64
#: Values per input beat: a vector of n > 1024 arrives as n / 1024 beats (contract 3; Amaranth
#: caps a design's input ports at 65,535 bits, one short of 4096 x 16).
MAX_BEAT_LANES = 1024
STRUCTURES = ("tree", "unrolled", "scan", "units")
#: ``pipeline`` range (0..max) of each structure.
MAX_PIPELINES = {"tree": 2, "unrolled": UNROLLED_MAX_PIPELINE, "scan": UNROLLED_MAX_PIPELINE,
                 "units": 2}
#: The depth of each structure that closes timing on ECP5 at n = 16 (docs/units/orizuru.md).
DEFAULT_PIPELINES = {"tree": 2, "unrolled": 3, "scan": 3, "units": 2}


def stream_layouts(n):
    """Payload layouts ``(in_layout, out_layout)`` of the Orizuru interface (contract 3) for
    vectors of ``n`` values, shared by :class:`Orizuru` and its baselines: ``x`` holds
    min(n, 1024) values per beat; the output beat carries one pair and, on the last beat,
    the n-bit mask."""
    index = unsigned(n.bit_length() - 1)
    in_layout = data.StructLayout({"x": data.ArrayLayout(16, min(n, MAX_BEAT_LANES))})
    out_layout = data.StructLayout({
        "max_index": index, "max_value": 16, "min_index": index, "min_value": 16,
        "last": 1, "mask": n,
    })
    return in_layout, out_layout


def resolve_structure(n, structure):
    """The structure ``structure=None`` stands for: ``"tree"`` up to n = 1024, ``"units"``
    (the composition of 16-input units) above."""
    if structure is None:
        return "tree" if n <= MAX_FLAT_N else "units"
    return structure


def cycles_per_vector(n, k, structure, pipeline):
    """Cycles per vector of :class:`Orizuru` with vectors back to back and ``o.ready`` high.

    ``"unrolled"`` and ``"scan"``: k (one output beat per cycle). ``"tree"``: the pop engine
    takes 1 + (k - 1) * I cycles per vector, I = log2(n) + ``pipeline`` cycles from one pop
    to the next (the path maintenance); the initialisation of the next vector (accepted the
    cycle after the previous handover, log2(n) steps, then its handover) runs meanwhile and
    bounds it below by log2(n) + 2. ``"units"``:
    :func:`hdl.kllm.orizuru.units.units_cycles_per_vector`.
    """
    if structure == "units":
        return units_cycles_per_vector(n, k, pipeline, beats=max(1, n // MAX_BEAT_LANES))
    if structure != "tree":
        return k
    levels = n.bit_length() - 1
    return max(1 + (k - 1) * (levels + pipeline), levels + 2)


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

    Node rules (IEEE totalOrder, :class:`hdl.common.fp16.Fp16TotalOrderCompare`): max tree, right wins
    if right > left (ties go to the lower index); min tree, right wins if right <= left (ties go
    to the higher index), which is the inverse of the max tree's bit whenever both children are
    present.

    Three structures (KLLM IV-C; docs/units/orizuru.md):

    * ``structure="tree"`` (default), the paper's time-multiplexed trees: an initialisation
      engine of n/2 comparators shared by the levels (log2 n steps on a compacting register of
      keys) builds the next vector's trees while a pop engine pops the current vector and walks
      each popped path up one level per cycle with one comparator per tree
      (:func:`hdl.kllm.orizuru.tree.elaborate_tree`). ``pipeline`` 0..2 (default 2): a pop every log2 n +
      ``pipeline`` cycles (0: the sibling's key selected and compared in one cycle; 1: read a
      cycle ahead; 2: also a cycle between the pop and the walk). Latency log2 n + 2; cycles
      per vector :func:`cycles_per_vector`, max(1 + (k - 1)(log2 n + ``pipeline``),
      log2 n + 2). ``i.ready`` is a registered decode (it does not wait for ``o.ready``).
    * ``structure="unrolled"``: every comparison of a pop in space, k cycles per vector; the
      circuits below.
    * ``structure="units"`` (default above n = 1024, the only structure there): KLLM's
      token-wide composition of 16-input units (Table I: 273 per chip at n = 4096), leaf units
      under merge units whose popped leaf is refilled from the child's prefetched root
      (:mod:`hdl.kllm.orizuru.units`). ``pipeline`` 0..2 (default 2): a register after every
      tree level of a unit (2), every second level (1) or only its root (0).
    * ``structure="scan"`` builds the straightforward baseline instead: no stored bits, every
      pop recomputes both complete trees from the availability masks (2(n-1) comparators per
      pop, the same rules, hence the same outputs).

    Two circuits of the unrolled structure and the scan, chosen by ``pipeline``:

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
        Inputs, a power of two in 2..4096 (default 16); above 1024 only ``"units"``.
    k : int
        Values reported per tree, 1..n, at most 64 when n > 1024 (default 2).
    width : int
        Value width; 16 (IEEE binary16) is the only one supported.
    structure : str or None
        ``"tree"``, ``"unrolled"``, ``"scan"`` (k-pass max/min scan baseline) or ``"units"``.
        None (default): ``"tree"`` up to n = 1024, ``"units"`` above.
    pipeline : int or None
        Tree and units: 0..2; unrolled and scan: register cuts, 0..3 (see above). None
        (default): the structure's depth that closes timing on ECP5 (tree and units 2,
        unrolled and scan 3).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``: min(n, 1024) x 16-bit binary16 patterns; a vector of n > 1024 values is n /
        1024 beats (lane j of beat b: element 1024 b + j; Amaranth caps a design's inputs at
        65,535 bits).
    o : ``Out(stream.Signature(out_layout))``
        ``max_index``, ``max_value``, ``min_index``, ``min_value``, ``last``, ``mask`` (n bits,
        1 at every index reported for the vector, on the ``last`` beat; 0 before).
    latency : int
        Cycles from the transfer of a vector on ``i`` to its first output beat being valid on
        ``o`` (with the unit empty and ``o.ready`` high); for the unrolled structure and the
        scan, beat j follows j cycles later.
    cycles_per_vector : int
        Cycles per vector with vectors back to back and ``o.ready`` high.

    Latency and throughput of the unrolled structure and the scan: k output beats per vector,
    one per cycle, and k cycles per vector back to back at every ``pipeline`` value (the next
    vector's first beat follows the last beat with no gap). ``pipeline=0``: a vector is
    initialised in the edge that accepts it and its first beat is valid one cycle later
    (``latency = 1``); the next vector is accepted with the last beat. ``pipeline >= 1``:
    ``latency`` is the number of pipeline stages. With L = log2 n comparator levels per tree and
    g levels per stage (g = L at ``pipeline=1``, 2 at 2, 1 at 3), the initialisation takes
    ``ceil(L / g)`` stages; the tree's first maintenance ``ceil((L - 1) / g)``, each later one
    ``1 + ceil((L - 1) / g)`` (the sibling stage; 1 in all at ``pipeline=1``); each later scan
    pass ``ceil(L / g)``. At n = 16, k = 2, ``pipeline=3``: 7 (tree) and 8 (scan). The pipeline
    takes vectors one per cycle while it fills, then one every k cycles as the output drains
    them. ``i.ready`` is combinational in ``o.ready`` at every depth.

    Raises
    ------
    TypeError
        If a parameter is not an integer (``structure``: not a string).
    ValueError
        If a parameter is outside its range.
    """

    def __init__(self, *, n=16, k=2, width=16, structure=None, pipeline=None):
        self.n = check_int("n", n, min_value=2, max_value=MAX_N)
        if self.n & (self.n - 1):
            raise ValueError(f"n must be a power of two in 2..{MAX_N}, not {self.n}")
        self.k = check_int("k", k, min_value=1,
                           max_value=self.n if self.n <= MAX_FLAT_N else MAX_WIDE_K)
        self.width = check_int("width", width, min_value=16, max_value=16)
        if structure is not None:
            check_choice("structure", structure, STRUCTURES)
        self.structure = resolve_structure(self.n, structure)
        if self.structure != "units" and self.n > MAX_FLAT_N:
            raise ValueError(
                f"n must be in range 2..{MAX_FLAT_N} for structure={self.structure!r}, not "
                f"{self.n} (larger n is built from 16-input units: structure='units', the "
                f"default above {MAX_FLAT_N})")
        if pipeline is None:
            pipeline = DEFAULT_PIPELINES[self.structure]
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINES[self.structure])
        #: The units of ``structure="units"`` emitted once as Verilog modules (``gen.verilog``).
        self.shared_modules = SharedModules()
        self.levels = self.n.bit_length() - 1
        #: Cycles from a vector's transfer on ``i`` to its first beat being valid on ``o``.
        self.latency = self._stage_count()
        #: Cycles per vector with vectors offered back to back and ``o.ready`` high.
        self.cycles_per_vector = cycles_per_vector(self.n, self.k, self.structure, self.pipeline)
        #: Values per input beat, and beats per vector (lane j of beat b is element
        #: ``lanes * b + j``).
        self.lanes = min(self.n, MAX_BEAT_LANES)
        self.beats_per_vector = self.n // self.lanes
        self.in_layout, self.out_layout = stream_layouts(self.n)
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def _stage_count(self):
        """Latency of the chosen circuit (see the class docstring)."""
        if self.structure == "units":
            return units_latency(self.n, self.pipeline)
        if self.structure == "tree":
            return self.levels + 2
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
        if self.structure == "units":
            elaborate_units(self, m)
        elif self.structure == "tree":
            elaborate_tree(self, m)
        elif self.pipeline == 0:
            elaborate_loop(self, m)
        else:
            elaborate_unrolled(self, m)
        return m

    def input_keys(self, m, name):
        """The accepted vector's totalOrder keys, one wire per lane (``<name>_<lane>``): the
        leaves of the time-multiplexed trees and of the unrolled circuit."""
        keys = []
        for lane, value in enumerate(split_lanes(m, self.i.payload.x, 16, self.n, name="x")):
            key = Signal(16, name=f"{name}_{lane}")
            m.d.comb += key.eq(total_order_key(value))
            keys.append(key)
        return keys

    def follow_winner(self, m, bits, name):
        """Index of the root's winner: follow the node bits down, one bit per level (a pop of
        the loop circuit, the handover of the time-multiplexed trees).

        Pure wiring and one bit-select per level. Every level's offset is a named signal:
        Amaranth lowers each statement's expression on its own, and the offset is used twice
        per level (select and concatenation), so an expression would be emitted 2**levels
        times in every statement that reads the index.
        """
        offset = bits[1]                   # position within the level below the root
        for level in range(1, self.levels):
            level_bits = Cat(bits[(1 << level) + o] for o in range(1 << level))
            offset = named(m, Cat(level_bits.bit_select(offset, 1), offset),
                           f"{name}_offset_{level}")
        return offset


class OrizuruScan(Orizuru):
    """The baseline for Orizuru's area: a k-pass max/min scan (``structure="scan"``).

    Same interface, rules and outputs as :class:`Orizuru`; every pop recomputes both complete
    comparator trees from the availability masks instead of keeping node bits. ``pipeline``
    as for :class:`Orizuru` (0: one pass per cycle; 1..3: the k passes unrolled, pass 1 being
    Orizuru's initialisation circuit, with the same cuts), so that the two are compared at
    the same depth.
    """

    def __init__(self, *, n=16, k=2, width=16, pipeline=DEFAULT_PIPELINES["scan"]):
        super().__init__(n=n, k=k, width=width, structure="scan", pipeline=pipeline)
