# amaranth: UnusedElaboratable=no
"""Mutants of the KLLM Concat unit, shared by the tests that show a check bites: the board host
(test_bridge.py), the Amaranth-simulator harness (test_amaranth_sim.py) and the stream-rule
proof (test_formal.py)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring

from qllm_cores.hdl.kllm.concat import KllmConcat

__all__ = ["LossyConcat", "StuckBitConcat", "WithdrawingConcat"]


class StuckBitConcat(wiring.Component):
    """Mutant: KllmConcat with bit 0 of lane 0 stuck at 1."""

    def __init__(self, **params):
        self.inner = KllmConcat(**params)
        super().__init__(self.inner.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        wiring.connect(m, wiring.flipped(self.i), inner.i)
        m.d.comb += [
            self.o.valid.eq(inner.o.valid),
            inner.o.ready.eq(self.o.ready),
            self.o.payload.eq(inner.o.payload.as_value() | 1),
        ]
        return m


class LossyConcat(StuckBitConcat):
    """Mutant: KllmConcat that silently drops every fifth output beat."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        count = Signal(range(5))
        drop = count == 4
        wiring.connect(m, wiring.flipped(self.i), inner.i)
        m.d.comb += [
            self.o.valid.eq(inner.o.valid & ~drop),
            inner.o.ready.eq(self.o.ready | drop),
            self.o.payload.eq(inner.o.payload),
        ]
        with m.If(inner.o.valid & inner.o.ready):
            m.d.sync += count.eq(Mux(drop, 0, count + 1))
        return m


class WithdrawingConcat(StuckBitConcat):
    """Mutant: KllmConcat whose output drops ``valid`` every other cycle while not ready
    (a stream-rule violation)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        toggle = Signal()
        m.d.sync += toggle.eq(~toggle)
        m.d.comb += [self.o.valid.eq(self.inner.o.valid & (toggle | self.o.ready)),
                     self.o.payload.eq(self.inner.o.payload)]
        return m
