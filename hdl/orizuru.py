"""Orizuru: top-k largest and smallest with two shared-leaf binary trees (KLLM IV-C, SPEC 3)."""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import named, one_hot_decode
from .fp16 import Fp16TotalOrderCompare, total_order_key, total_order_value
from .lanes import split_lanes
from .orizuru_units import elaborate_units, units_cycles_per_vector, units_latency
from .params import check_choice, check_int
from .shared_modules import SharedModules
from .stream_stage import StallPipeline, check_pipeline, register_packed

__all__ = ["Orizuru", "OrizuruScan", "cycles_per_vector", "resolve_structure",
           "stream_layouts"]


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
UNROLLED_MAX_PIPELINE = max(PIPELINE_CUTS)
#: Largest ``n`` (SPEC 3), built from 16-input units above :data:`MAX_FLAT_N`.
MAX_N = 4096
#: Largest ``n`` of the structures that are one pair of trees (or one scan).
MAX_FLAT_N = 1024
#: Largest ``k`` when ``n`` > :data:`MAX_FLAT_N` (SPEC 3).
MAX_WIDE_K = 64
#: Values per input beat: a vector of n > 1024 arrives as n / 1024 beats (SPEC 3; Amaranth
#: caps a design's input ports at 65,535 bits, one short of 4096 x 16).
MAX_BEAT_LANES = 1024
STRUCTURES = ("tree", "unrolled", "scan", "units")
#: ``pipeline`` range (0..max) of each structure.
MAX_PIPELINES = {"tree": 2, "unrolled": UNROLLED_MAX_PIPELINE, "scan": UNROLLED_MAX_PIPELINE,
                 "units": 2}
#: The depth of each structure that closes timing on ECP5 at n = 16 (docs/units/orizuru.md).
DEFAULT_PIPELINES = {"tree": 2, "unrolled": 3, "scan": 3, "units": 2}


def stream_layouts(n):
    """Payload layouts ``(in_layout, out_layout)`` of the Orizuru interface (SPEC 3) for
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
    :func:`hdl.orizuru_units.units_cycles_per_vector`.
    """
    if structure == "units":
        return units_cycles_per_vector(n, k, pipeline, beats=max(1, n // MAX_BEAT_LANES))
    if structure != "tree":
        return k
    levels = n.bit_length() - 1
    return max(1 + (k - 1) * (levels + pipeline), levels + 2)


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


def _map_state(state, function):
    """``state`` (nested dicts and lists of values) with ``function`` applied to every value;
    None, strings and constants pass unchanged."""
    if state is None or isinstance(state, (Const, str)):
        return state
    if isinstance(state, dict):
        return {key: _map_state(item, function) for key, item in state.items()}
    if isinstance(state, list):
        return [_map_state(item, function) for item in state]
    return function(state)


class _Stages:
    """Places the register cuts of the unrolled pipeline on a :class:`StallPipeline`.

    A cut registers every value of the pipeline's state (leaves, node bits, winners, records)
    packed, up to :attr:`GROUP` values per register, so that a stage of a wide tree is a few
    wide registers rather than one per value (a smaller netlist, a faster Verilator build and
    elaboration; groups keep Amaranth's cost of slicing a signal linear in n).
    """

    GROUP = 64

    def __init__(self, pipe):
        self.pipe = pipe
        self.count = 0

    def cut(self, live):
        """Register every value in ``live`` (nested dicts and lists of values; None, strings
        and constants pass unchanged; a value met twice gets one register) and return the
        registered copy, one stage further."""
        self.count += 1
        name = f"p{self.count}"
        items, slots = [], {}

        def collect(value):
            if id(value) not in slots:
                slots[id(value)] = len(items)
                items.append(value)

        _map_state(live, collect)
        registered = register_packed(
            items, lambda value, label: self.pipe.stage(value, name=label),
            group=self.GROUP, name=name)
        return _map_state(live, lambda value: registered[slots[id(value)]])


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

    Three structures (KLLM IV-C; docs/units/orizuru.md):

    * ``structure="tree"`` (default), the paper's time-multiplexed trees: an initialisation
      engine of n/2 comparators shared by the levels (log2 n steps on a compacting register of
      keys) builds the next vector's trees while a pop engine pops the current vector and walks
      each popped path up one level per cycle with one comparator per tree
      (:meth:`_elaborate_tree`). ``pipeline`` 0..2 (default 2): a pop every log2 n +
      ``pipeline`` cycles (0: the sibling's key selected and compared in one cycle; 1: read a
      cycle ahead; 2: also a cycle between the pop and the walk). Latency log2 n + 2; cycles
      per vector :func:`cycles_per_vector`, max(1 + (k - 1)(log2 n + ``pipeline``),
      log2 n + 2). ``i.ready`` is a registered decode (it does not wait for ``o.ready``).
    * ``structure="unrolled"``: every comparison of a pop in space, k cycles per vector; the
      circuits below.
    * ``structure="units"`` (default above n = 1024, the only structure there): KLLM's
      token-wide composition of 16-input units (Table I: 273 per chip at n = 4096), leaf units
      under merge units whose popped leaf is refilled from the child's prefetched root
      (:mod:`hdl.orizuru_units`). ``pipeline`` 0..2 (default 2): a register after every
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
    vector's first beat follows the last beat with no gap). ``pipeline=0``: a vector is initialised in the edge that accepts it and
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
            self._elaborate_tree(m)
        elif self.pipeline == 0:
            self._elaborate_loop(m)
        else:
            self._elaborate_unrolled(m)
        return m

    def _incoming_keys(self, m, name):
        """The accepted vector's totalOrder keys, one wire per lane (``<name>_<lane>``)."""
        keys = []
        for lane, value in enumerate(split_lanes(m, self.i.payload.x, 16, self.n, name="x")):
            key = Signal(16, name=f"{name}_{lane}")
            m.d.comb += key.eq(total_order_key(value))
            keys.append(key)
        return keys

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

    # --- structure="tree": the paper's time-multiplexed trees ----------------------------------

    def _elaborate_tree(self, m):
        """The time-multiplexed trees (``structure="tree"``; see the class docstring): an
        initialisation engine of n/2 shared comparators building the next vector's trees, one
        level per step, while the pop engine pops the current vector and maintains its popped
        paths, one level per cycle with one comparator per tree."""
        n, levels, k = self.n, self.levels, self.k
        half = n // 2
        trees = ("max", "min")

        # --- initialisation engine ---------------------------------------------------------
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
        incoming_keys = self._incoming_keys(m, "x_key")
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

        # --- pop engine: the current vector ----------------------------------------------
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

            pop.eq(self.o.valid & self.o.ready),
            handover.eq((step == levels + 1) & (~loaded | (pop & last))),
            # Registered decode only: i.ready does not wait for o.ready (a vector is taken
            # the cycle after the handover of the previous one).
            self.i.ready.eq(step == 0),
        ]
        m.d.comb += load.eq(self.i.valid & self.i.ready)

        with m.If(running):
            m.d.sync += step.eq(step + 1)
        with m.If(handover):
            m.d.sync += step.eq(0)
        with m.If(load):
            m.d.sync += step.eq(1)

        # --- output beat -------------------------------------------------------------------
        # The current roots' leaves, one-hot (a predecoded decoder: a dynamic shift costs
        # O(n^2) at elaboration).
        root_lane = {}
        for tree in trees:
            root_lane[tree] = Signal(n, name=f"{tree}_root_lane")
            m.d.comb += root_lane[tree].eq(Cat(one_hot_decode(current[tree]["index"])))
        reported = Signal(n, name="reported")
        m.d.comb += [
            reported.eq(~avail["max"] | ~avail["min"] | root_lane["max"] | root_lane["min"]),
            self.o.payload.max_index.eq(current["max"]["index"]),
            self.o.payload.max_value.eq(total_order_value(current["max"]["key"])),
            self.o.payload.min_index.eq(current["min"]["index"]),
            self.o.payload.min_value.eq(total_order_value(current["min"]["key"])),
            self.o.payload.last.eq(last),
            self.o.payload.mask.eq(Mux(last, reported, 0)),
        ]
        with m.If(pop):
            m.d.sync += [beat.eq(Mux(last, 0, beat + 1)), self.o.valid.eq(0)]
            with m.If(last):
                m.d.sync += loaded.eq(0)

        # --- handover: the next vector's trees become current -------------------------------
        handed = {"max": next_bits["max"],
                  "min": next_bits["min"] + [~next_bits["max"][v] for v in range(half, n)]}
        handed_index = {}
        for tree in trees:
            handed_index[tree] = Signal(levels, name=f"next_{tree}_root_index")
            m.d.comb += handed_index[tree].eq(self._follow(m, handed[tree], f"next_{tree}"))
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

        # --- maintenance of the popped paths, one level per cycle -----------------------------
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
        active = (height != 0) | (start if self.pipeline == 0 else Const(0, 1))
        walking = Mux(height == 0, 1, height)
        with m.If(active):
            m.d.sync += height.eq(Mux(walking == levels, 0, walking + 1))
        begin = Signal(name="maintain_begin")      # the walk's first cycle comes next
        if self.pipeline >= 2:
            m.d.sync += begin.eq(start)
        else:
            m.d.comb += begin.eq(start)
        if self.pipeline >= 1:
            with m.If(begin):
                m.d.sync += height.eq(1)
            at_top = Signal(name="at_top")
            m.d.sync += at_top.eq(Mux(begin, levels == 1,
                                      (height != 0) & (height == levels - 1)))
        else:
            at_top = Signal(name="at_top")
            m.d.comb += at_top.eq(active & (walking == levels))
        with m.If(at_top):
            m.d.sync += self.o.valid.eq(1)
        with m.If(handover):
            m.d.sync += self.o.valid.eq(1)
        for tree in trees:
            self._tree_maintenance(m, tree, leaf_keys, bits[tree], avail[tree], current[tree],
                                   path[tree], height, start, begin, handover,
                                   handed_index[tree], at_top)

    def _tree_maintenance(self, m, tree, leaf_keys, bits, avail, root, path, height, start,
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
        n, levels = self.n, self.levels
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
        base = popped if self.pipeline >= 2 else root["index"]
        first = self._sibling_indices(m, prefix, bits, base)
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
        if self.pipeline >= 2:
            # The root's leaf sibling is read in the cycle after the pop.
            with m.If(start):
                m.d.sync += address.eq(root["index"] ^ 1)
            with m.Else():
                m.d.sync += address.eq(address_else)
        else:
            address_other = Mux(handover, handed_index ^ 1, address_else)
        if self.pipeline == 0:
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
            if self.pipeline >= 2:
                current_popped = popped

        child_is_right = Signal(name=f"{prefix}_child_is_right")
        if self.pipeline == 0:
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
        if self.pipeline >= 1:
            # Height 1 needs no comparison: the path is the popped leaf, unavailable, and
            # wins only when its sibling is popped too, on the tie side.
            first_step = Signal(name=f"{prefix}_first_step")
            m.d.sync += first_step.eq(begin)
            m.d.comb += new_bit.eq(~(Mux(first_step, ~sibling["avail"] & tie_side, path_wins)
                                     ^ child_is_right))
        else:
            m.d.comb += new_bit.eq(~(path_wins ^ child_is_right))
        if self.pipeline == 0:
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
            if self.pipeline == 1 and levels == 1:
                m.d.sync += address.eq(Mux(at_top, height_1["index"] ^ 1, address_other))
            elif self.pipeline == 1:
                m.d.sync += address.eq(Mux(path_wins,
                                           Mux(at_top, path["index"] ^ 1, address_other),
                                           Mux(at_top, sibling["index"] ^ 1, address_other)))

        # The new bit of the path's node at height h. The root's bit is never read (pops take
        # the root winner from the maintenance), so only heights 1..L-1 are stored. With
        # ``pipeline=1`` the write lands a cycle later, off the comparator's path: the next
        # pop, L + 1 cycles after this one, reads the bits after the last write.
        write = {"enable": active & (current_height != levels), "bit": new_bit,
                 "height": current_height, "popped": current_popped}
        if self.pipeline >= 1:
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

    def _sibling_indices(self, m, prefix, bits, popped):
        """Leaf indices of the winners of the popped path's sibling subtrees at heights
        1..L-1 (the siblings met at path heights 2..L), from the node bits (the paper's MUX
        tree, on the winners' local indices only)."""
        n, levels = self.n, self.levels
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
        if self.structure == "unrolled":
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

        if self.structure == "unrolled":
            self._maintain(m, "max", max_bits, max_index, leaves, avail_max, self._max_bit, pop)
            self._maintain(m, "min", min_bits, min_index, leaves, avail_min, self._min_bit, pop)

        # --- load: bottom-up initialisation from the input, in the accepting edge ---------
        incoming = split_lanes(m, self.i.payload.x, 16, n, name="x")
        with m.If(load):
            m.d.sync += [leaf.eq(value) for leaf, value in zip(leaves, incoming)]
            m.d.sync += [avail_max.eq(-1), avail_min.eq(-1), loaded.eq(1), pops.eq(0)]
        if self.structure == "unrolled":
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
        k = self.k
        cuts = PIPELINE_CUTS[self.pipeline]
        record = stream.Signature(1).create(path=("record",))
        pipe = StallPipeline(m, self.i, record, latency=self.latency, name="pipe")
        stages = _Stages(pipe)
        keys = self._incoming_keys(m, "key")

        # Pop 1: the initialisation's root winners (the scan's first pass is the same circuit).
        tree = self.structure == "unrolled"
        state = self._unrolled_init(m, stages, cuts, keys,
                                    keep_leaves=k > 2 if tree else k > 1, keep_bits=tree and k > 2,
                                    keep_siblings=tree and k > 1)
        for pop in range(2, k + 1):
            last = pop == k
            if self.structure == "unrolled":
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
                level = [self._named(m, f"{prefix}_h{height}_{offset}",
                                     _select(bits[first + offset], level[2 * offset + 1],
                                             level[2 * offset]))
                         for offset in range(first)]
        return siblings

    @staticmethod
    def _named(m, prefix, entry):
        """``entry`` with every field a named signal. Amaranth lowers each statement's
        expression on its own: a multiplexer tree left as expressions is emitted again in
        every statement that reads it (here every level's sibling multiplexer and the level
        above), a named signal once."""
        return {field: None if value is None else named(m, value, f"{prefix}_{field}")
                for field, value in entry.items()}

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

    def __init__(self, *, n=16, k=2, width=16, pipeline=None):
        super().__init__(n=n, k=k, width=width, structure="scan", pipeline=pipeline)
