"""The harness of the data properties: every input beat ``dut.i`` takes is recorded in order
(a FIFO of the payloads, ``in_flight`` deep: the environment offers no beat while it is full),
and every output beat ``dut.o`` offers is checked against the recorded beat it answers.

A property module subclasses :class:`TransactionHarness` and writes :meth:`check` (the
assertion about one output beat, from the contract formula: never from the RTL) and, where the
property needs it, :meth:`assume_input` (a restriction of the stimulus, e.g. single-beat
reductions) and ``beats_per_input`` (output beats that answer one input beat; the record is
dropped with the last of them). The stream rules hold on the inputs (assumed), output ``ready``
is free, the reset is low; an output beat offered while no input beat is recorded fails the
proof (nothing from nothing). Every unit's outputs are registered (``latency`` >= 1), so an
output beat always answers a beat recorded in an earlier cycle.

**Framed** (``framed=True``, for k-induction): one input beat in flight, and the environment
keeps an output beat waiting at most :data:`PATIENCE` cycles and, while no beat is recorded,
leaves the input idle at most :data:`PATIENCE` cycles. These restrict the stimulus, never the
unit, and are rules an environment can always keep. The frame also asserts that an output beat
comes no sooner than the unit's ``latency`` after the beat it answers (the manifest's latency
is the shortest). Under the frame every beat leaves the unit within
:meth:`~TransactionHarness.induction_depth` cycles, and a unit state that disagrees with the
record (which k-induction's step may start from: a beat in the pipeline that answers no record)
shows within that many cycles, so k-induction at that depth is a proof for every input and every
time. (Without the latency assertion it does not: a pipeline one beat fuller than the record,
fed the same beat every other cycle, pairs each output with the wrong record forever unseen.) Unframed (for ``pdr``): ``in_flight``
beats, any environment. How the unit behaves under longer stalls is the stream proofs' part
(hold and counting, unframed).
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Module, Mux, Signal

from .stream import UnitHarness, assume_input_hold

__all__ = ["PATIENCE", "TransactionHarness", "frame"]

#: The framed environment's longest wait, in cycles.
PATIENCE = 1


class TransactionHarness(UnitHarness):
    """Checks every output beat of ``dut`` against the input beat it answers."""

    #: Output beats per input beat (Orizuru: k).
    beats_per_input = 1
    #: Verilog models (file names in verif/models) of vendor primitives the unit instantiates.
    models = ()

    def __init__(self, dut, *, framed=False, in_flight=2):
        if dut.latency < 1:
            raise ValueError(f"latency must be at least 1 (a registered output), not "
                             f"{dut.latency}")
        self.framed = framed
        self.in_flight = 1 if framed else in_flight
        super().__init__(dut)

    def induction_depth(self, slack=0):
        """The k-induction depth: the longest life of a framed beat (an idle input, the
        latency, the unit's cycles per input beat after its first output beat and a wait
        before every output beat), plus ``slack`` cycles where the unit holds more than its
        pipeline (the decomposer's :class:`~hdl.common.stream_stage.SkidBuffer`: 2, its second entry
        and its wait). A deeper induction is no less sound, only slower."""
        cycles = getattr(self.dut, "cycles_per_vector", self.beats_per_input)
        return (self.dut.latency + cycles - 1 + (self.beats_per_input + 1) * PATIENCE
                + slack)

    def assume_input(self, m, payload):
        """Restrict the input beats offered (``payload``: a view of ``dut.i.payload``)."""

    def check(self, m, record, out, beat):
        """Assert what output beat ``out`` (a view) must be for the input beat ``record`` (a
        view); ``beat`` counts the output beats already given for it."""
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        assume_input_hold(m, dut, self.ports)
        shape = dut.i.payload.shape()
        entries = [Signal(shape, name=f"record{n}") for n in range(self.in_flight)]
        count = Signal(range(self.in_flight + 1))
        beat = Signal(range(max(2, self.beats_per_input)))
        age = Signal(range(dut.latency + 1), name="age")    # cycles since the last push
        with m.If(dut.i.valid):
            self.assume_input(m, dut.i.payload)
        m.d.comb += Assume(~dut.i.valid | (count < self.in_flight))
        push = dut.i.valid & dut.i.ready
        taken = dut.o.valid & dut.o.ready
        pop = Signal()
        m.d.comb += pop.eq(taken & (beat == self.beats_per_input - 1))
        with m.If(dut.o.valid):
            m.d.comb += Assert(count > 0)
            with m.If(count > 0):
                if self.framed:
                    m.d.comb += Assert(age == dut.latency)
                self.check(m, entries[0], dut.o.payload, beat)
        with m.If(taken):
            m.d.sync += beat.eq(0 if self.beats_per_input == 1 else
                                (beat + 1) % self.beats_per_input)
        # The FIFO: entries[0] is the oldest record; a push lands behind the records kept.
        kept = Signal(range(self.in_flight + 1))
        m.d.comb += kept.eq(count - pop)
        m.d.sync += count.eq(kept + push)
        for n, entry in enumerate(entries):
            later = entries[n + 1] if n + 1 < self.in_flight else entry
            with m.If(push & (kept == n)):
                m.d.sync += entry.eq(dut.i.payload)
            with m.Elif(pop):
                m.d.sync += entry.eq(later)
        if self.framed:
            frame(m, dut, age, push, count)
        return m


def frame(m, dut, age, push, count):
    """The framed environment: ``age`` counts the cycles since the last ``push`` (up to the
    unit's latency), an output beat waits at most :data:`PATIENCE` cycles, and while nothing is
    recorded (``count`` 0) the input idles at most :data:`PATIENCE` cycles."""
    m.d.sync += age.eq(Mux(push, 1, Mux(age == dut.latency, age, age + 1)))
    for name, waiting in (("stall", dut.o.valid & ~dut.o.ready),
                          ("idle", ~dut.i.valid & (count == 0))):
        cycles = Signal(range(PATIENCE + 2), name=f"{name}_cycles")
        m.d.sync += cycles.eq(Mux(waiting, cycles + 1, 0))
        m.d.comb += Assume(~waiting | (cycles < PATIENCE))
