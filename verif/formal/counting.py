"""The counting half of the stream rules (contract section 0: "no data is dropped or duplicated"),
proved on every output stream of every unit from its reset state, under any input behaviour
that keeps the stream rules and any pattern of output ``ready``:

* **nothing from nothing**: every output beat taken is one the inputs taken so far allow
  (``granted``: each unit's beats-per-transaction rule below, from the contract);
* **bounded in flight**: the beats allowed and not yet taken never exceed a bound (the unit
  backpressures its inputs instead of growing without limit);
* **drains**: while output beats are owed for complete transactions (``owed``) and every
  consumer is ready, the unit never goes ``drain_cycles`` cycles without giving one.

The per-unit rule (:data:`ACCOUNTS`) says, as Amaranth expressions on the unit's ports, how
many beats of each output stream each cycle's accepted input beats grant (the upper bound) and
owe (the beats of transactions whose inputs are complete); the two differ only where outputs
may leave before their transaction is complete (the dequantizer's zero insertion runs beside
its COO stream). A unit with several outputs (the Oaken quantizer's ``hdr``, ``dense`` and
``coo``) has one :class:`Output` per stream, all asserted in the same proof.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Assert, Assume, Module, Mux, Signal, Value
from amaranth.utils import ceil_log2

from .stream import UnitHarness, assume_input_hold

__all__ = ["Output", "Account", "ACCOUNTS", "PROPERTIES", "StreamCountHarness"]


@dataclass(frozen=True)
class Output:
    """How one output stream counts. ``grant(m, dut, params)`` and ``owe(m, dut, params)``
    return the beats of this stream that this cycle's accepted inputs allow and owe (Amaranth
    values, unsigned; ``owe`` None: the grant); ``beats(m, dut, params)`` is the beats of one
    transaction; ``counted(stream)`` the beats that count against the grant (None: every
    beat taken; the quantizer counts its COO stream by its ``last`` beats, whose number per
    chunk varies). ``name``: the stream (a member of the unit's signature)."""

    grant: object
    beats: object
    owe: object = None
    counted: object = None
    name: str = "o"


@dataclass(frozen=True)
class Account:
    """How one unit counts: its ``outputs`` (:class:`Output`), ``in_flight`` the transactions
    it may hold (the bound: ``(latency + in_flight) * beats`` per stream) and
    ``drain_cycles`` the longest gap between owed output beats while every consumer is
    ready. ``lemmas(dut, counts)``, if given, returns conditions asserted beside the
    property (proved with it, so that k-induction can relate the harness's counters to the
    unit's state): ``counts`` maps each output's name to the harness's count of its beats
    granted (or owed) and not taken."""

    outputs: tuple
    in_flight: int
    drain_cycles: int
    lemmas: object = None


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


def _chunk_end(m, dut, params, names):
    """The quantizer's chunk is complete with its ``vec_len / lanes``-th input beat (the input
    has no ``last``: contract 8 counts beats). The beat counter goes to ``names["index"]``."""
    windows = params["vec_len"] // params["lanes"]
    if windows == 1:
        return _fire(dut.i)
    index = names["index"] = Signal(range(windows), name="chunk_beat")
    with m.If(_fire(dut.i)):
        m.d.sync += index.eq(Mux(index == windows - 1, 0, index + 1))
    return _fire(dut.i) & (index == windows - 1)


def _quantizer(params):
    """contract 8: per chunk one ``hdr`` beat, ``vec_len / lanes`` ``dense`` beats, and COO beats
    of which the last (one per chunk) is counted; all granted and owed at the chunk's last
    input beat (every output of a chunk depends on its statistics). Lemmas: the chunk
    position and the ``hdr`` and ``dense`` counts are the unit's own (``OakenQuantizer.owed``).
    """
    windows = params["vec_len"] // params["lanes"]
    chunk = {}

    def at_end(beats):
        def grant(m, dut, p):
            if not chunk:
                chunk["end"] = Signal(name="chunk_end")
                m.d.comb += chunk["end"].eq(_chunk_end(m, dut, p, chunk))
            return chunk["end"] * beats
        return grant

    def lemmas(dut, counts):
        owed = dut.owed
        return ([counts[name] == owed[name] for name in ("hdr", "dense") if name in counts]
                + ([chunk["index"] == owed["position"]] if "index" in chunk else []))

    return Account((Output(at_end(1), lambda m, d, p: 1, name="hdr"),
                    Output(at_end(windows), lambda m, d, p: windows, name="dense"),
                    Output(at_end(1), lambda m, d, p: 1, name="coo",
                           counted=lambda s: s.payload.last)),
                   in_flight=16, drain_cycles=24, lemmas=lemmas)


def _units():
    def constant(n):
        return lambda m, dut, params: n

    def one(grant, beats=constant(1), owe=None):
        return (Output(grant, beats, owe),)

    def one_to_one(in_flight, drain):
        return lambda params: Account(one(lambda m, d, p: _per_beat(m, d)), in_flight, drain)

    def per_last(in_flight, drain):
        return lambda params: Account(one(lambda m, d, p: _per_last(m, d)), in_flight, drain)

    def orizuru(in_flight, drain):
        return lambda params: Account(one(lambda m, d, p: _per_beat(m, d) * p["k"],
                                          lambda m, d, p: p["k"]), in_flight, drain)

    return {
        "kllm_concat": one_to_one(4, 4),
        "kllm_idx_counter": lambda params: Account(one(
            lambda m, d, p: _per_last(m, d) << p["idx_bits"],
            lambda m, d, p: 1 << p["idx_bits"]), 3, 16),
        "orizuru": orizuru(3, 64),
        "orizuru_scan": orizuru(3, 64),
        "orizuru_sortnet": orizuru(3, 64),
        "oaken_decomposer": one_to_one(4, 4),
        "oaken_dequantizer": lambda params: Account(one(
            lambda m, d, p: _fire(d.dense), lambda m, d, p: p["vec_len"] // p["lanes"],
            owe=_chunk_owed), 3, 16),
        "oaken_quantizer": _quantizer,
        # One result per reduction; a reduction of the reduced shape (4 bins) holds the loop
        # for at most 4 x 6 cycles after its readout.
        "kllm_column": per_last(8, 64),
        "p3_pe": per_last(8, 8),
        # One result per `last` (either slot); up to 16 results in its output queue.
        "p3_pcu": per_last(8, 16),
        "fp16_mac": per_last(8, 8),
        "fp16_pcu": per_last(8, 8),
        "accllm_dsp_mul": one_to_one(8, 8),
        "accllm_plain_mul": one_to_one(8, 8),
        "accllm_sparse_selector": one_to_one(4, 4),
        "accllm_pe": per_last(8, 8),
    }


#: Unit name -> ``params -> Account``.
ACCOUNTS = _units()


#: The three counting properties, by row name.
PROPERTIES = ("nothing from nothing", "bounded in flight", "drains")


class StreamCountHarness(UnitHarness):
    """``dut`` with the stream rules assumed on its inputs and one counting property
    (``prop``, one of :data:`PROPERTIES`) asserted on every output of its account."""

    def __init__(self, dut, unit, params, prop, streams=None):
        if prop not in PROPERTIES:
            raise ValueError(f"prop must be one of {PROPERTIES}, not {prop!r}")
        if unit not in ACCOUNTS:
            raise ValueError(f"unit {unit!r} has no counting account (verif/formal/"
                             f"counting.py: ACCOUNTS)")
        self.params = params
        self.prop = prop
        self.account = ACCOUNTS[unit](params)
        names = [output.name for output in self.account.outputs]
        if streams is not None and not set(streams) <= set(names):
            raise ValueError(f"streams must be among {names}, not {list(streams)!r}")
        self.streams = names if streams is None else list(streams)
        super().__init__(dut)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        account = self.account
        assume_input_hold(m, dut, self.ports)
        all_ready = 1
        for output in account.outputs:
            all_ready = all_ready & getattr(dut, output.name).ready
        counts = {output.name: self._count(m, output, all_ready)
                  for output in account.outputs if output.name in self.streams}
        if account.lemmas is not None:
            m.d.comb += [Assert(lemma) for lemma in account.lemmas(dut, counts)]
        return m

    def _count(self, m, output, all_ready):
        dut, account, params = self.dut, self.account, self.params
        stream = getattr(dut, output.name)
        name = output.name
        beats = output.beats(m, dut, params)
        bound = (dut.latency + account.in_flight) * beats
        fired = _fire(stream)
        taken = fired if output.counted is None else fired & output.counted(stream)
        grant = Value.cast(output.grant(m, dut, params))
        if self.prop != "drains":
            # beats allowed and not yet taken
            granted = Signal(ceil_log2(2 * bound + 2) + 1, name=f"{name}_granted")
            m.d.sync += granted.eq(granted + grant - taken)
            if self.prop == "nothing from nothing":
                with m.If(taken):
                    m.d.comb += Assert(granted > 0)
            else:
                m.d.comb += Assert(granted <= bound)
            return granted
        owe = grant if output.owe is None else Value.cast(output.owe(m, dut, params))
        # owed for complete transactions
        owed = Signal(range(-2 * bound, 2 * bound + 1), name=f"{name}_owed")
        stall = Signal(range(account.drain_cycles + 1), name=f"{name}_stall")
        m.d.sync += owed.eq(owed + owe - taken)
        with m.If(all_ready & (owed > 0) & ~fired):
            m.d.sync += stall.eq(stall + 1)
        with m.Else():
            m.d.sync += stall.eq(0)
        m.d.comb += Assert(stall < account.drain_cycles)
        return owed
