"""The counting half of the stream rules (SPEC section 0: "no data is dropped or duplicated"),
proved on every unit's output ``o`` from its reset state, under any input behaviour that keeps
the stream rules and any pattern of ``o.ready``:

* **nothing from nothing**: every output beat taken is one the inputs taken so far allow
  (``granted``: each unit's beats-per-transaction rule below, from the SPEC);
* **bounded in flight**: the beats allowed and not yet taken never exceed a bound (the unit
  backpressures its inputs instead of growing without limit);
* **drains**: while output beats are owed for complete transactions (``owed``) and the
  consumer is ready, the unit never goes ``drain_cycles`` cycles without giving one.

The per-unit rule (:data:`ACCOUNTS`) says, as Amaranth expressions on the unit's ports, how
many output beats each cycle's accepted input beats grant (the upper bound) and owe (the beats
of transactions whose inputs are complete); the two differ only where outputs may leave before
their transaction is complete (the dequantizer's zero insertion runs beside its COO stream).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Assert, Assume, Module, Signal, Value
from amaranth.utils import ceil_log2

from .stream import UnitHarness, assume_input_hold

__all__ = ["Account", "ACCOUNTS", "PROPERTIES", "StreamCountHarness"]


@dataclass(frozen=True)
class Account:
    """How one unit counts: ``grant(m, dut)`` and ``owe(m, dut)`` return the output beats that
    this cycle's accepted inputs allow and owe (Amaranth values, unsigned); ``beats`` is the
    output beats of one transaction; ``in_flight`` the transactions a unit may hold (the
    bound); ``drain_cycles`` the longest gap between owed output beats while ready."""

    grant: object
    beats: object
    in_flight: int
    drain_cycles: int
    owe: object = None


def _fire(stream):
    return stream.valid & stream.ready


def _per_beat(m, dut):
    return _fire(dut.i)


def _per_last(m, dut):
    return _fire(dut.i) & dut.i.payload.last


def _chunk_owed(m, dut, params):
    """The dequantizer's chunk is complete when its header, its vec_len / lanes dense beats
    and its last COO beat are all in; the environment is assumed to run at most two chunks
    ahead on any one stream (the unit backpressures the rest)."""
    dense_beats = params["vec_len"] // params["lanes"]
    dense_index = Signal(range(dense_beats))
    with m.If(_fire(dut.dense)):
        m.d.sync += dense_index.eq(0 if dense_beats == 1 else (dense_index + 1) % dense_beats)
    tokens = {"hdr": _fire(dut.hdr), "dense": _fire(dut.dense) & (dense_index == dense_beats - 1),
              "coo": _fire(dut.coo) & dut.coo.payload.last}
    counts = {name: Signal(range(4), name=f"{name}_chunks") for name in tokens}
    complete = Signal()
    for count in counts.values():
        m.d.comb += Assume(count <= 2)
    m.d.comb += complete.eq(counts["hdr"].bool() & counts["dense"].bool()
                            & counts["coo"].bool())
    for name, count in counts.items():
        m.d.sync += count.eq(count + tokens[name] - complete)
    return complete * dense_beats


def _units():
    def constant(n):
        return lambda m, dut, params: n

    def one_to_one(in_flight, drain):
        return lambda params: Account(lambda m, d, p: _per_beat(m, d), constant(1), in_flight,
                                      drain)

    def per_last(in_flight, drain):
        return lambda params: Account(lambda m, d, p: _per_last(m, d), constant(1), in_flight,
                                      drain)

    def orizuru(in_flight, drain):
        return lambda params: Account(lambda m, d, p: _per_beat(m, d) * p["k"],
                                      lambda m, d, p: p["k"], in_flight, drain)

    return {
        "kllm_concat": one_to_one(4, 4),
        "kllm_idx_counter": lambda params: Account(
            lambda m, d, p: _per_last(m, d) << p["idx_bits"],
            lambda m, d, p: 1 << p["idx_bits"], 3, 16),
        "orizuru": orizuru(3, 64),
        "orizuru_scan": orizuru(3, 64),
        "orizuru_sortnet": orizuru(3, 64),
        "oaken_decomposer": one_to_one(4, 4),
        "oaken_dequantizer": lambda params: Account(
            lambda m, d, p: _fire(d.dense), lambda m, d, p: p["vec_len"] // p["lanes"], 3,
            16, owe=_chunk_owed),
        # One result per reduction; a reduction of the reduced shape (4 bins) holds the loop
        # for at most 4 x 6 cycles after its readout.
        "kllm_column": per_last(8, 64),
        "p3_pe": per_last(8, 8),
        "fp16_mac": per_last(8, 8),
        "accllm_dsp_mul": one_to_one(8, 8),
        "accllm_plain_mul": one_to_one(8, 8),
        "accllm_sparse_selector": one_to_one(4, 4),
    }


#: Unit name -> ``params -> Account``.
ACCOUNTS = _units()


#: The three counting properties, by row name.
PROPERTIES = ("nothing from nothing", "bounded in flight", "drains")


class StreamCountHarness(UnitHarness):
    """``dut`` with the stream rules assumed on its inputs and one counting property
    (``prop``, one of :data:`PROPERTIES`) asserted on ``o``."""

    def __init__(self, dut, unit, params, prop):
        if prop not in PROPERTIES:
            raise ValueError(f"prop must be one of {PROPERTIES}, not {prop!r}")
        self.params = params
        self.prop = prop
        self.account = ACCOUNTS[unit](params)
        super().__init__(dut)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        account, params = self.account, self.params
        assume_input_hold(m, dut, self.ports)
        beats = account.beats(m, dut, params)
        bound = (dut.latency + account.in_flight) * beats
        taken = _fire(dut.o)
        grant = Value.cast(account.grant(m, dut, params))
        if self.prop != "drains":
            granted = Signal(ceil_log2(2 * bound + 2) + 1)  # beats allowed and not yet taken
            m.d.sync += granted.eq(granted + grant - taken)
            if self.prop == "nothing from nothing":
                with m.If(taken):
                    m.d.comb += Assert(granted > 0)
            else:
                m.d.comb += Assert(granted <= bound)
            return m
        owe = grant if account.owe is None else Value.cast(account.owe(m, dut, params))
        owed = Signal(range(-2 * bound, 2 * bound + 1))     # owed for complete transactions
        stall = Signal(range(account.drain_cycles + 1))
        m.d.sync += owed.eq(owed + owe - taken)
        with m.If(dut.o.ready & (owed > 0) & ~taken):
            m.d.sync += stall.eq(stall + 1)
        with m.Else():
            m.d.sync += stall.eq(0)
        m.d.comb += Assert(stall < account.drain_cycles)
        return m
