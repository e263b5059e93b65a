"""What the stages of the Oaken quantizer (:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`)
share: the groups in metadata order, the never-stalling pipeline that carries their optional
cuts, a one-clock register and the beat-position counter of a chunk.
"""

from amaranth.hdl import Const, Mux, Signal, unsigned
from amaranth.lib import stream

from ...common.invariants import invariant
from ...common.stream_stage import StallPipeline
from ..decomposer import INNER, MIDDLE, OUTER

__all__ = ["GROUPS", "Stages", "chunk_position", "register"]

#: Groups in the order of the metadata pairs (contract section 4), with their ``group`` codes.
GROUPS = (("mid", MIDDLE), ("in", INNER), ("out", OUTER))


class Stages:
    """The valid chain and stage registers of a pipeline that never stalls: a
    :class:`~hdl.common.stream_stage.StallPipeline` whose output is always ready (its clock
    enable is constant, so its registers have none). Room downstream is guaranteed by credits
    instead. ``valid[k]`` is high when a beat is after the ``k``-th register (``valid[0]``: the
    input); ``depth`` registers in all, each made by a :meth:`cut` or a ``stage_fn`` call
    (none with ``depth`` 0).
    """

    def __init__(self, m, valid, *, depth, name):
        self.valid = [valid]
        self.pipe = None
        if depth:
            source = stream.Signature(unsigned(1)).create(path=(f"{name}_in",))
            sink = stream.Signature(unsigned(1)).create(path=(f"{name}_out",))
            m.d.comb += [source.valid.eq(valid), sink.ready.eq(1)]
            self.pipe = StallPipeline(m, source, sink, latency=depth, name=name)
            self.valid += self.pipe.valid
        self.depth = depth
        self.cuts = 0

    def cut(self, state, enable, tag):
        """Register every value of ``state`` (a dict of values and lists of values) when
        ``enable``; returns the state after the cut."""
        if not enable:
            return state
        self.cuts += 1
        assert self.cuts <= self.depth, "more cuts than the pipeline's depth"
        return {key: ([self.pipe.stage(v, name=f"{tag}_{key}_{k}") for k, v in enumerate(value)]
                      if isinstance(value, list) else self.pipe.stage(value, name=f"{tag}_{key}"))
                for key, value in state.items()}

    def stage_fn(self, enable):
        """A ``stage`` callable for :mod:`hdl.oaken.quantizer.parts`: registers when
        ``enable``."""
        if not enable:
            return lambda value, name: value
        return lambda value, name: self.pipe.stage(value, name=name)

    @property
    def here(self):
        """The valid bit after the cuts made so far."""
        return self.valid[self.cuts]


def register(m, value, name, *, reset=False):
    """``value`` delayed by one clock (no enable; reset-less unless ``reset``)."""
    delayed = Signal.like(value, name=name, reset_less=not reset)
    m.d.sync += delayed.eq(value)
    return delayed


def chunk_position(m, platform, advance, *, windows, name):
    """The position of the beat advancing on ``advance`` in its chunk of ``windows`` beats.

    Returns ``(first, last, position, last_next)``: the beat is its chunk's first / last
    (flags registered at the previous advance), its position (a counter of ``windows`` beats,
    updated at every advance), and ``last`` after this cycle (combinational). With one beat
    per chunk, constants.
    """
    W = windows
    if W == 1:
        return Const(1, 1), Const(1, 1), Const(0, 1), Const(1, 1)
    position = Signal(range(W), name=name)
    first = Signal(name=f"{name}_first", init=1)
    last = Signal(name=f"{name}_last")
    last_next = Signal(name=f"{name}_last_next")
    m.d.comb += last_next.eq(Mux(advance, ~last & (position == W - 2), last))
    m.d.sync += last.eq(last_next)
    with m.If(advance):
        m.d.sync += [position.eq(Mux(last, 0, position + 1)), first.eq(last)]
    invariant(m, platform, position < W, first == (position == 0),
              last == (position == W - 1), name=f"{name}_invariant")
    return first, last, position, last_next
