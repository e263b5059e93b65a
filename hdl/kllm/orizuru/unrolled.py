"""Orizuru's unrolled circuit (:class:`hdl.kllm.orizuru.orizuru.Orizuru`, ``pipeline >= 1`` of the unrolled
structure and of the scan): the k pops of a vector laid out in space along a feed-forward
pipeline (:class:`~hdl.common.stream_stage.StallPipeline`), the initialisation, then k - 1 path
maintenances (tree) or scan passes, each yielding the next pop, register cuts between their
comparator levels, and the beat serialiser."""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib import stream

from ...common.arith import named
from ...common.fp16 import total_order_value
from ...common.stream_stage import StallPipeline, register_packed

__all__ = ["PIPELINE_CUTS", "UNROLLED_MAX_PIPELINE", "elaborate_unrolled"]


@dataclass(frozen=True)
class _Cuts:
    """Register cuts of one ``pipeline`` value of the unrolled circuit (see
    :class:`hdl.kllm.orizuru.orizuru.Orizuru`).

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


def elaborate_unrolled(orizuru, m):
    """The unrolled circuit of ``orizuru`` (``pipeline >= 1``; see :class:`hdl.kllm.orizuru.orizuru.Orizuru`),
    built in ``m``: initialisation, then k - 1 maintenances (tree) or scan passes, along one
    :class:`StallPipeline`, then the beat serialiser."""
    k = orizuru.k
    cuts = PIPELINE_CUTS[orizuru.pipeline]
    record = stream.Signature(1).create(path=("record",))
    pipe = StallPipeline(m, orizuru.i, record, latency=orizuru.latency, name="pipe")
    stages = _Stages(pipe)
    keys = orizuru.input_keys(m, "key")

    # Pop 1: the initialisation's root winners (the scan's first pass is the same circuit).
    tree = orizuru.structure == "unrolled"
    state = _unrolled_init(orizuru, m, stages, cuts, keys,
                           keep_leaves=k > 2 if tree else k > 1, keep_bits=tree and k > 2,
                           keep_siblings=tree and k > 1)
    for pop in range(2, k + 1):
        last = pop == k
        if orizuru.structure == "unrolled":
            state = _unrolled_maintain(orizuru, m, stages, cuts, state, pop, last)
        else:
            state = _unrolled_scan_pass(orizuru, m, stages, cuts, state, pop, last)
    assert stages.count == orizuru.latency, (stages.count, orizuru.latency)
    _serialise(orizuru, m, record, state)


def _cut_after(cuts, level, final):
    """Whether a register follows comparator level ``level`` (1-based) of a tree or path."""
    return final or (cuts.levels is not None and level % cuts.levels == 0)


def _unrolled_init(orizuru, m, stages, cuts, keys, keep_leaves, keep_bits, keep_siblings):
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
    n, levels = orizuru.n, orizuru.levels
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
        if _cut_after(cuts, height, height == levels):
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


def _popped_avail(orizuru, avail, popped):
    """``avail`` (None: all available) with the leaf ``popped`` cleared."""
    return Cat((Const(1, 1) if avail is None else avail[lane]) & (popped != lane)
               for lane in range(orizuru.n))


def _unrolled_maintain(orizuru, m, stages, cuts, state, pop, last):
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
    n, levels = orizuru.n, orizuru.levels
    live = {"leaves": None if last else state["leaves"], "record": state["record"],
            "avail": {}, "bits": {}, "writes": {}, "p": state["p"], "path": {},
            "siblings": {}}
    for tree in ("max", "min"):
        popped = state["p"][tree]
        avail = state["avail"][tree]
        live["avail"][tree] = Signal(n, name=f"m{pop}_{tree}_avail")
        m.d.comb += live["avail"][tree].eq(_popped_avail(orizuru, avail, popped))
        if given is not None:
            siblings = given[tree]
        else:
            siblings = _siblings(orizuru, m, f"m{pop}_{tree}", state["leaves"],
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
            _write_path_bit(m, live["writes"][tree], 1, ~(path_wins ^ child_is_right),
                            f"m{pop}_{tree}")
    if given is None and (cuts.siblings or levels == 1):
        live = _cut_resolving_bits(orizuru, stages, live)
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
                _write_path_bit(m, live["writes"][tree], height,
                                ~(wins ^ child_is_right), f"m{pop}_{tree}")
        if _cut_after(cuts, height - 1, height == levels):
            live = _cut_resolving_bits(orizuru, stages, live)
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


def _cut_resolving_bits(orizuru, stages, live):
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
            first = orizuru.n >> height
            position = position_bits[height:]
            for offset in range(first):
                hit = (position == offset) if first > 1 else Const(1, 1)
                bits[first + offset] = Mux(hit, new, bits[first + offset])
        live["bits"][tree] = bits
        live["writes"][tree] = {}
    return live


def _siblings(orizuru, m, prefix, leaves, bits, avail, popped):
    """The winners (``key``, ``index``, ``avail``) of the popped path's siblings, leaf level
    first: the MUX tree's winner of every node of heights 0..L-1, then per level the one
    beside the path (combinational)."""
    n, levels = orizuru.n, orizuru.levels
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
            level = [_named(m, f"{prefix}_h{height}_{offset}",
                            _select(bits[first + offset], level[2 * offset + 1],
                                    level[2 * offset]))
                     for offset in range(first)]
    return siblings


def _named(m, prefix, entry):
    """``entry`` with every field a named signal. Amaranth lowers each statement's
    expression on its own: a multiplexer tree left as expressions is emitted again in
    every statement that reads it (here every level's sibling multiplexer and the level
    above), a named signal once."""
    return {field: None if value is None else named(m, value, f"{prefix}_{field}")
            for field, value in entry.items()}


def _write_path_bit(m, writes, height, bit, prefix):
    """Record ``bit`` as the new bit of the popped path's node at ``height``; it is stored
    into the node bits after the next cut (:func:`_cut_resolving_bits`)."""
    new = Signal(name=f"{prefix}_path_bit_{height}")
    m.d.comb += new.eq(bit)
    writes[height] = new


def _unrolled_scan_pass(orizuru, m, stages, cuts, state, pop, last):
    """Scan pass ``pop``: both complete trees recomputed under the availability masks
    (2(n-1) comparators), the previous pop cleared from them first."""
    n, levels = orizuru.n, orizuru.levels
    live = {"leaves": None if last else state["leaves"], "record": state["record"],
            "avail": {}, "winners": {}}
    for tree in ("max", "min"):
        avail = Signal(n, name=f"s{pop}_{tree}_avail")
        m.d.comb += avail.eq(_popped_avail(orizuru, state["avail"][tree], state["p"][tree]))
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
        if _cut_after(cuts, height, height == levels):
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


def _serialise(orizuru, m, record, state):
    """Send the last stage's k results one beat per cycle; the pipeline advances (and the
    next vector's results load) with the last beat."""
    n, k = orizuru.n, orizuru.k
    beat = Signal(range(max(k, 2)), name="beat")
    last = Signal(name="last_beat")
    m.d.comb += [
        last.eq(beat == k - 1),
        orizuru.o.valid.eq(record.valid),
        record.ready.eq(orizuru.o.ready & last),
    ]
    with m.If(orizuru.o.valid & orizuru.o.ready):
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
        orizuru.o.payload.max_index.eq(pick("max_index")),
        orizuru.o.payload.max_value.eq(total_order_value(pick("max_key"))),
        orizuru.o.payload.min_index.eq(pick("min_index")),
        orizuru.o.payload.min_value.eq(total_order_value(pick("min_key"))),
        orizuru.o.payload.last.eq(last),
        orizuru.o.payload.mask.eq(Mux(last, reported, 0)),
    ]
