# amaranth: UnusedElaboratable=no
"""Data properties of ``kllm_concat`` (contract section 1) and ``kllm_idx_counter`` (contract section
2): every output beat is what the contract gives for the input it answers, for every input the
assumptions below allow, the output stalled at will. The expected values are written here from
the contract text, never from the RTL.

``y = (a << b_bits) | b`` (:class:`ConcatHarness`): every lane of every output beat, at the
registry's defaults (16 lanes, ``a_bits`` = ``b_bits`` = 4) at every ``pipeline`` (0, the
default, to 2), and KLLM-A3's ``a_bits`` = 3. PDR, any environment: the record FIFO of
:class:`~verif.formal.transaction.TransactionHarness` is one deeper than the unit can hold
(``latency + 1``) and the harness asserts that the unit never holds more than ``latency``
beats, so the FIFO's assumption never binds.

``histogram = bincount`` (:class:`HistogramHarness`): the harness builds each reduction's
histogram from the contract as its beats are taken (per bin, the number of unmasked lanes whose
index is the bin, ``kk``, or the sum of their signed weights, ``ik``, over every beat from the
one after a ``last`` up to the next ``last``) and records it on the ``last`` beat; the
``2**idx_bits`` output beats that follow must carry the bins in order, ``count`` exact (no
wrap: a row's reductions count at most ``max_len`` indices, checked when the harness is
built) and ``last`` on the final bin only; an output beat while no histogram is owed fails.
A row's reductions have 1 to ``beats`` beats (``beats=2``: single-beat and two-beat
reductions, any order), any mask, indices and weights.

Engines:

* PDR, any environment (the stream rules on ``i``, ``o.ready`` free), so the next reductions
  accumulate, and their ``last`` beats wait, while a histogram is read out. The record FIFO
  holds ``latency`` histograms, the most the unit holds (the harness asserts that the unit
  never takes a ``last`` beat while that many are owed, so the FIFO never holds the
  environment back), or, in the rows marked ``in_flight=2``, two: the environment then holds a
  ``last`` beat back while two histograms are owed (still a reduction accumulated and its
  ``last`` beat taken while the one before is read out).
* k-induction, framed (:class:`~verif.formal.transaction.TransactionHarness`'s frame: one
  reduction at a time, waits of at most one cycle, the first bin no sooner than ``latency``
  cycles after the ``last`` beat), at :meth:`HistogramHarness.induction_depth`: the step may
  start with accumulators holding sums that no output shows until the *next* reduction's bins
  leave, so the depth spans two reductions (at one reduction's life k-induction's step fails
  on such a state at both ends of the pipeline range).

Shapes (the default, 16 lanes of 8-bit indices, is 256 bins of 13-bit counts: out of reach):

* the readout shape :data:`BANK_SHAPE` (1 lane, 2 index bits, ``max_len`` 4): 4 bins, not
  the 2 of the counting proofs' shape, because the pipelined readout takes a special case at
  2 bins (``penultimate`` set at the load). The bank control (``busy``, ``pointer``,
  ``at_last_bin``, ``penultimate``, the bank's free/held/load/enable flip-flops, ``fresh`` /
  ``clear``, the single bank's shift) is generated the same at every ``n_inputs`` and, but for
  the pointer's width and its comparisons with ``bins - 1``, ``- 2`` and ``- 3``, at every
  ``idx_bits`` from 2 up; the accumulators and the readout bank are rows of identical
  ``count_bits``-wide slots. Both modes, ``pipeline`` 0 and the default (3), 1 and 2 banks,
  by PDR (:data:`PDR_ROWS`) and framed (:data:`FRAMED_ROWS`, which also has ``pipeline`` 1
  and 2, 2 banks).
* the lane shape :data:`LANE_SHAPE` (5 lanes, 1 index bit), framed: ``kk`` forms the counts
  of the lane pairs 0-1 and 2-3 and of lane 4 alone; ``ik`` has lanes 0-3 as one full group
  (the equal-index merge of all 6 lane pairs into the leader's carried weight) and lane 4 a
  second; either way the per-bin adder tree above the groups is in the proof. 16 lanes are
  more such groups and more levels of the same :func:`~hdl.common.arith.adder_tree`.
* :data:`WIDE_SHAPE`: ``kk`` at the default 16 lanes (2 bins, single-beat reductions), framed.

Times (one proof at a time, 2 cores shared with other engineers' proofs, load average 5 to
6): concat 2 to 15 s a row; counter by PDR 3 to 20 s, framed 6 to 20 s; all 27 rows about 5
minutes. Split for the budget: two-beat reductions at ``pipeline`` 3 by PDR with the full
FIFO took 43 s (``kk``, 2 banks; 75 s at load average 8), and ``ik`` two-beat reductions by
PDR at ``pipeline`` 0, 2 banks, 44 s (51 s with two in flight); so ``kk`` at 3 has a
single-beat row with the full FIFO and a two-beat row with two in flight, and ``ik`` two-beat
reductions at 0 (2 banks) and 3 are framed.

Not proved, and why:

* ``ik`` two-beat reductions by PDR at ``pipeline`` 3 (not in 120 s, even at 2 bins and two in
  flight) and ``ik`` at ``pipeline`` 3 by PDR with the full FIFO (6 histograms: 56 s at 2 bins
  with 2 banks, not in 120 s with 1): framed, and by PDR single-beat with two in flight.
* ``pipeline`` 1 and 2 by PDR (``kk`` at 2: not in 120 s): framed only, 2 banks only.
* ``ik`` on more lanes: two-beat reductions on 4 lanes, and single-beat on 8 lanes at
  ``pipeline`` 3, did not finish in 120 s (8 lanes at ``pipeline`` 0: 95 s); ``kk`` two-beat
  reductions at 16 lanes: 65 s at ``pipeline`` 0, not in 120 s at 3.
* more than 4 index bits (the predecode's second chunk: 32 bins and up) and more than 8 (the
  bins built in parts, shared modules): no row.
* reductions longer than 2 beats: the accumulation is the same ``acc + contribution`` at every
  beat; the two-beat rows add to nonzero accumulators, longer ones repeat it.
* ``overflow=True`` (the sticky flag ``kllm_column`` uses; the harness refuses it) and counts
  past ``max_len`` (they wrap; the contract gives no value): not checked.
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Assert, Assume, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data

from qllm_cores.gen.registry import UNITS, resolve_params

from . import Proof
from .stream import UnitHarness, assume_input_hold
from .transaction import PATIENCE, TransactionHarness, frame

__all__ = ["ConcatHarness", "HistogramHarness", "concat_row", "counter_row", "proofs"]

CONCAT_PROPERTY = "y = (a << b_bits) | b"
HISTOGRAM_PROPERTY = "histogram = bincount"


class ConcatHarness(TransactionHarness):
    """Every output beat of ``kllm_concat`` holds ``y[j] = (a[j] << b_bits) | b[j]`` of the
    input beat it answers, on every lane (contract 1). Unframed, the harness also asserts that the
    unit never holds more than ``latency`` beats, so that a record FIFO of ``latency + 1``
    entries never holds the environment back."""

    def check(self, m, record, out, beat):
        b_bits = self.dut.b_bits
        for lane in range(self.dut.lanes):
            expected = (record.a[lane] << b_bits) | record.b[lane]
            m.d.comb += Assert(out.y[lane] == expected)

    def elaborate(self, platform):
        m = super().elaborate(platform)
        if not self.framed:
            dut = self.dut
            inside = Signal(range(self.in_flight + 2), name="inside")   # taken, not given
            m.d.sync += inside.eq(inside + (dut.i.valid & dut.i.ready)
                                  - (dut.o.valid & dut.o.ready))
            m.d.comb += Assert(inside <= dut.latency)
        return m


class HistogramHarness(UnitHarness):
    """The histograms of ``kllm_idx_counter`` (contract 2), reductions of 1 to ``beats`` beats.

    The harness keeps the histogram of the reduction being received (``partial``: per bin, the
    number of unmasked lanes with that index, ``kk``, or the sum of their weights, ``ik``, over
    the beats taken since the last ``last``); the beat with ``last`` pushes the finished
    histogram into a FIFO of records, and the ``2**idx_bits`` output beats that follow are
    checked against the oldest record in bin order (``count`` = the bin's value, ``last`` on the
    final bin only); the record is dropped with the final bin. An output beat offered while no
    record is held fails (nothing from nothing).

    Unframed (``pdr``): the environment is free (the stream rules on ``i``, ``o.ready`` free)
    and the FIFO holds ``in_flight`` records (default: the unit's ``latency``). From
    ``latency`` up the proof asserts that the unit never takes a ``last`` beat while
    ``in_flight`` histograms are owed (the FIFO never restricts the environment); below it,
    the environment is assumed to hold a ``last`` beat back while the FIFO is full.
    Framed (``framed=True``, k-induction): one reduction at a time and the frame of
    :class:`~verif.formal.transaction.TransactionHarness` (waits of at most
    :data:`~verif.formal.transaction.PATIENCE` cycles, the first bin no sooner than
    ``latency`` cycles after the ``last`` beat).
    """

    def __init__(self, dut, *, beats=1, framed=False, in_flight=None):
        if dut.overflow:
            raise ValueError("the histogram harness does not check the overflow flag")
        if dut.n_inputs * beats > dut.max_len:
            raise ValueError(f"{beats} beats of {dut.n_inputs} lanes exceed max_len "
                             f"{dut.max_len}: the contract gives no count past it")
        self.beats = beats
        self.framed = framed
        self.in_flight = 1 if framed else in_flight or dut.latency
        super().__init__(dut)
        counted = dut.n_inputs * beats
        if dut.mode == "kk":
            self.value_shape = unsigned(counted.bit_length())
        else:
            self.value_shape = signed(dut.weight_bits + counted.bit_length())
        self.record_layout = data.ArrayLayout(self.value_shape, dut.bins)

    def induction_depth(self, slack=0):
        """The k-induction depth: the longest life of a framed reduction (``beats`` input
        beats each after an idle wait, the latency, ``2**idx_bits`` output beats each after a
        wait) and what the reduction before it may leave that no output shows until this
        one's bins leave (its beats in the front, ``latency - 1`` cycles, and its readout,
        during which the accumulators hold the next sums unseen), plus ``slack``."""
        dut = self.dut
        life = (self.beats * (1 + PATIENCE) - 1 + dut.latency + dut.bins - 1
                + (dut.bins + 1) * PATIENCE)
        before = dut.latency - 1 + dut.bins * (1 + PATIENCE)
        return life + before + slack

    def contribution(self, payload, bin_):
        """contract 2: the beat's addend to bin ``bin_`` (masked lanes count nothing)."""
        dut = self.dut
        total = 0
        for lane in range(dut.n_inputs):
            hit = payload.mask[lane] & (payload.idx[lane] == bin_)
            term = hit if dut.mode == "kk" else Mux(hit, payload.weight[lane], 0)
            total = total + term
        return total

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        assume_input_hold(m, dut, self.ports)
        bins = dut.bins
        records = [Signal(self.record_layout, name=f"record{n}") for n in range(self.in_flight)]
        partial = Signal(self.record_layout, name="partial")
        finished = Signal(self.record_layout, name="finished")
        received = Signal(range(self.beats), name="received")   # beats of the reduction so far
        count = Signal(range(self.in_flight + 1))
        beat = Signal(range(max(2, bins)))
        age = Signal(range(dut.latency + 1), name="age")   # cycles since the last `last` beat

        payload = dut.i.payload
        with m.If(dut.i.valid & (received == self.beats - 1)):
            m.d.comb += Assume(payload.last)
        if self.framed:
            m.d.comb += Assume(~dut.i.valid | (count < self.in_flight))
        push = dut.i.valid & dut.i.ready
        push_last = push & payload.last
        for bin_ in range(bins):
            # The first beat of a reduction starts from 0 (whatever `partial` holds).
            so_far = Mux(received == 0, 0, partial[bin_])
            m.d.comb += finished[bin_].eq(so_far + self.contribution(payload, bin_))
        with m.If(push):
            m.d.sync += [partial.eq(Mux(payload.last, 0, finished)),
                         received.eq(Mux(payload.last, 0, received + 1))]

        taken = dut.o.valid & dut.o.ready
        pop = Signal()
        m.d.comb += pop.eq(taken & (beat == bins - 1))
        with m.If(dut.o.valid):
            m.d.comb += Assert(count > 0)
            with m.If(count > 0):
                if self.framed:
                    m.d.comb += Assert(age == dut.latency)
                m.d.comb += [Assert(dut.o.payload.count == records[0][beat]),
                             Assert(dut.o.payload.last == (beat == bins - 1))]
        with m.If(taken):
            m.d.sync += beat.eq(Mux(beat == bins - 1, 0, beat + 1))
        kept = Signal(range(self.in_flight + 1))
        m.d.comb += kept.eq(count - pop)
        if not self.framed and self.in_flight >= dut.latency:
            m.d.comb += Assert(~push_last | (kept < self.in_flight))
        elif not self.framed:
            m.d.comb += Assume(~(dut.i.valid & payload.last) | (count < self.in_flight))
        m.d.sync += count.eq(kept + push_last)
        for n, record in enumerate(records):
            later = records[n + 1] if n + 1 < self.in_flight else record
            with m.If(push_last & (kept == n)):
                m.d.sync += record.eq(finished)
            with m.Elif(pop):
                m.d.sync += record.eq(later)
        if self.framed:
            frame(m, dut, age, push_last, count)
        return m


def _configuration(overrides, label=""):
    return ",".join(f"{key}={value}" for key, value in overrides.items()) + label


def concat_row(overrides):
    """The ``kllm_concat`` row at the registry ``overrides``: PDR, any environment (a record
    FIFO one deeper than the unit holds)."""
    _, params = resolve_params("kllm_concat", None, overrides)
    build = partial(ConcatHarness, in_flight=params["pipeline"] + 2)
    return Proof("kllm_concat", _configuration(overrides) or "default", CONCAT_PROPERTY, build,
                 params, "pdr", 8)


def counter_row(overrides, *, beats=1, framed=True, in_flight=None, slack=0):
    """The ``kllm_idx_counter`` row at the registry ``overrides``, reductions of 1 to
    ``beats`` beats: ``framed``, by k-induction at
    :meth:`HistogramHarness.induction_depth`, else by PDR with ``in_flight`` histograms
    (default: the unit's ``latency``, its most, asserted; fewer: assumed)."""
    _, params = resolve_params("kllm_idx_counter", None, overrides)
    build = partial(HistogramHarness, beats=beats, framed=framed, in_flight=in_flight)
    engine, depth = "pdr", 8
    if framed:
        engine = "kind"
        depth = build(UNITS["kllm_idx_counter"].build(params)).induction_depth(slack)
    label = f",beats={beats}" if beats > 1 else ""
    if in_flight is not None and not framed:
        label += f",in_flight={in_flight}"
    return Proof("kllm_idx_counter", _configuration(overrides, label), HISTOGRAM_PROPERTY, build,
                 params, engine, depth)


#: The counter's readout shape: 4 bins (the readout's general case), one lane.
BANK_SHAPE = {"n_inputs": 1, "idx_bits": 2, "max_len": 4}
#: The counter's lane shape: two groups of lanes (4 + 1), 2 bins.
LANE_SHAPE = {"n_inputs": 5, "idx_bits": 1, "max_len": 10}
#: The counter at the registry's default lane count (``kk``, single-beat reductions), 2 bins.
WIDE_SHAPE = {"n_inputs": 16, "idx_bits": 1, "max_len": 16}
#: The narrow counts with the overflow spill (``counts="spill"``): one lane, 2 bins, reductions
#: of up to 5 beats, so that a 2-bit count carries in the middle of a reduction (its event
#: reaches the list) and at its end (the event rides in the readout bank). PDR, 4 s at
#: ``pipeline`` 0; at 3 with 2 histograms in flight (assumed, as the other default-depth rows
#: with 2 beats) 45 s beside another job (the unit's most, 5: 70-80 s alone, over the 120 s
#: budget under load); k-induction does not decide it at the frame's depth.
SPILL_SHAPE = {"n_inputs": 1, "idx_bits": 1, "max_len": 5, "mode": "kk", "counts": "spill"}
#: Per-lane histograms in memory (``counts="memory"``): 2 bins, so that reductions of 2 beats
#: swap the banks while the other's readout ends, the readout's clears meet the next counting,
#: and equal indices on consecutive beats are forwarded (``f1``; ``f2``..``f4`` need reductions
#: of 3 to 5 beats in one lane: PDR did not decide 5 beats in 120 s, the benches' mutants cover
#: them). One histogram owed at a time (assumed): with the unit's most (its latency, 7 at
#: ``pipeline`` 0) PDR did not converge in 300 s, with 2 it took 92 s beside other jobs. One
#: lane at ``pipeline`` 0 (29 s beside ``make report``) and the default (57 s), and two lanes,
#: the lanes' sum, at 0 with single-beat reductions (10 s; 2 beats: over 120 s).
MEMORY_SHAPE = {"idx_bits": 1, "max_len": 4, "mode": "kk", "counts": "memory"}
#: The modes: registry overrides (``ik`` at the contract's default weight width).
MODES = {"kk": {"mode": "kk"}, "ik": {"mode": "ik", "weight_bits": 4}}
#: The counter's PDR rows on :data:`BANK_SHAPE`: ``(mode, pipeline, banks, beats,
#: in_flight)``; ``pipeline`` None: the registry's default; ``in_flight`` None: the unit's
#: most (asserted), else assumed. What is left out is over the budget (module docstring).
PDR_ROWS = (
    ("kk", 0, 2, 2, None), ("kk", 0, 1, 2, None),
    ("kk", None, 2, 1, None), ("kk", None, 2, 2, 2),
    ("kk", None, 1, 1, None), ("kk", None, 1, 2, 2),
    ("ik", 0, 2, 1, None), ("ik", 0, 1, 2, None),
    ("ik", None, 2, 1, 2), ("ik", None, 1, 1, 2),
)
#: The counter's framed rows (k-induction), reductions of up to 2 beats on
#: :data:`BANK_SHAPE`: ``(mode, pipeline, banks)``.
FRAMED_ROWS = (
    ("ik", 0, 2), ("ik", None, 2), ("ik", None, 1),
    ("kk", 1, 2), ("kk", 2, 2), ("ik", 1, 2), ("ik", 2, 2),
)


def proofs():
    """The KLLM rows: ``kllm_concat`` at its defaults (16 lanes) at every ``pipeline``, by
    PDR; ``kllm_idx_counter`` by PDR (:data:`PDR_ROWS`), framed (:data:`FRAMED_ROWS`), and
    framed on :data:`LANE_SHAPE` at ``pipeline`` 0 and the default (``kk``: reductions of up
    to 2 beats; ``ik``: single-beat), ``counts="spill"`` on :data:`SPILL_SHAPE` and
    ``counts="memory"`` on :data:`MEMORY_SHAPE` (1 and 2 lanes) by PDR."""
    from qllm_cores.hdl.kllm.concat import MAX_PIPELINE

    rows = [concat_row({"pipeline": depth}) for depth in range(MAX_PIPELINE + 1)]
    rows.append(concat_row({"a_bits": 3}))          # KLLM-A3 (registry: kllm-a3-16)
    default = UNITS["kllm_idx_counter"].defaults["pipeline"]
    for mode, depth, banks, beats, in_flight in PDR_ROWS:
        shape = {**BANK_SHAPE, **MODES[mode], "banks": banks,
                 "pipeline": default if depth is None else depth}
        rows.append(counter_row(shape, beats=beats, framed=False, in_flight=in_flight))
    for mode, depth, banks in FRAMED_ROWS:
        shape = {**BANK_SHAPE, **MODES[mode], "banks": banks,
                 "pipeline": default if depth is None else depth}
        rows.append(counter_row(shape, beats=2))
    rows += [counter_row({**LANE_SHAPE, **MODES[mode], "pipeline": depth},
                         beats=2 if mode == "kk" else 1)
             for mode in MODES for depth in (0, default)]
    rows += [counter_row({**WIDE_SHAPE, **MODES["kk"], "pipeline": depth})
             for depth in (0, default)]
    rows += [counter_row({**SPILL_SHAPE, "pipeline": 0}, beats=5, framed=False),
             counter_row({**SPILL_SHAPE, "pipeline": default}, beats=5, framed=False,
                         in_flight=2)]
    rows += [counter_row({**MEMORY_SHAPE, "n_inputs": lanes, "pipeline": depth}, beats=beats,
                         framed=False, in_flight=1)
             for lanes, depth, beats in ((1, 0, 2), (1, default, 2), (2, 0, 1))]
    return rows
