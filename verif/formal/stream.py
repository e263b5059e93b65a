"""The stream rules as proofs (contract section 0): every output port holds its beat until it is
taken, under any input behaviour that keeps the same rule.

:class:`StreamHoldHarness`: the unit's input payloads, input ``valid`` and output ``ready`` are
free in every cycle; the domain's reset is assumed low (the proof starts from the reset state).
An input beat offered and not taken is assumed to stay offered with the same payload; an output
beat offered and not taken is asserted to stay offered with the same payload.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal, Value
from amaranth.lib import wiring

from qllm_cores.gen.verilog import port_description

__all__ = ["UnitHarness", "StreamHoldHarness", "stream_free_ports", "assume_input_hold"]


def stream_free_ports(dut, ports):
    """The free inputs of a proof about ``dut``: input ``valid`` and payloads, output
    ``ready``."""
    free = []
    for name, port in ports.items():
        stream = getattr(dut, name)
        if port["direction"] == "in":
            free += [stream.valid, stream.payload.as_value()]
        else:
            free.append(stream.ready)
    return free


def _held(m, name, stream, started):
    """``(waiting, kept)``: a beat was offered and not taken in the previous cycle, and the same
    beat is offered now."""
    payload = stream.payload.as_value()
    was_valid, was_ready = Signal(name=f"{name}_was_valid"), Signal(name=f"{name}_was_ready")
    was_payload = Signal(len(Value.cast(payload)), name=f"{name}_was_payload")
    m.d.sync += [was_valid.eq(stream.valid), was_ready.eq(stream.ready),
                 was_payload.eq(payload)]
    return started & was_valid & ~was_ready, stream.valid & (payload == was_payload)


def assume_input_hold(m, dut, ports):
    """Reset low, and every input of ``dut`` keeps the stream rule; returns ``started`` (low
    in the initial state only)."""
    started = Signal()
    m.d.sync += started.eq(1)
    m.d.comb += Assume(~ResetSignal())
    for name, port in ports.items():
        if port["direction"] == "in":
            waiting, kept = _held(m, name, getattr(dut, name), started)
            with m.If(waiting):
                m.d.comb += Assume(kept)
    return started


class UnitHarness(wiring.Component):
    """The base of every proof harness: the unit ``dut``, its stream ports (``ports``, from
    its manifest description) and the free inputs of the proof (:func:`stream_free_ports`)."""

    def __init__(self, dut):
        self.dut = dut
        self.ports = port_description(dut)
        super().__init__({})

    @property
    def free_ports(self):
        return stream_free_ports(self.dut, self.ports)


class StreamHoldHarness(UnitHarness):
    """``dut`` with the stream rules assumed on its inputs and asserted on its outputs."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        started = assume_input_hold(m, self.dut, self.ports)
        for name, port in self.ports.items():
            if port["direction"] == "out":
                waiting, kept = _held(m, name, getattr(self.dut, name), started)
                with m.If(waiting):
                    m.d.comb += Assert(kept)
        return m
