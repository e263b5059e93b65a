# amaranth: UnusedElaboratable=no
"""The Orizuru top-k invariants as proofs (contract section 3), for all inputs, at the output
level: what the k output beats of a vector must say about the vector, whatever the circuit.

Every input vector is recorded (:class:`verif.formal.transaction.TransactionHarness`) and each
of its k output beats checked against it; the harness keeps, per vector, the indices each side
reported on the beats already taken (cleared with the k-th). Both properties also check that
``last`` is 1 on the k-th beat only. Values are ordered by the contract's IEEE totalOrder key:
``~x`` if the sign bit is set, else ``x | 0x8000``, compared unsigned.

* ``"top-k order (root >= leaves)"`` (:class:`TopKOrderHarness`): on every beat ``max_value``
  is the value of its leaf (``x[max_index]``) and at least every element whose index the max
  side has not reported yet; ``min_value`` is ``x[min_index]`` and at most every element the
  min side has not reported. With the next property this makes beat j carry exactly the j-th
  largest and j-th smallest values, under any tie rule.
* ``"k distinct indices"`` (:class:`DistinctIndicesHarness`): no ``max_index`` repeats within
  a vector, no ``min_index`` either; ``mask`` is 0 before the k-th beat and on it has a 1
  exactly at the indices reported by either side (contract 3: "1 at every reported index"; the
  golden model, :func:`golden.kllm.orizuru.orizuru_beats`, reads it as the union of both sides,
  k to 2k bits set).

Engines and reach (``make formal`` on 2 cores):

* The distinct indices: PDR with two vectors in flight and a free environment, at the
  registry's defaults (n = 16, k = 2), 7 to 25 s a row; the sorting network's did not finish
  in 300 s even at n = 4, so it is proved framed
  (:class:`~verif.formal.transaction.TransactionHarness`) by k-induction.
* The order needs an invariant "the root's key >= every available leaf's key", an order
  between 16-bit words that PDR's clauses over bits cannot state compactly (PDR did not finish
  at n = 4 in 600 s), so it is proved framed by k-induction, at n = 4, k = 2 (4 to 11 s a
  row); at n = 16 the tree's max side does not finish in 120 s. The frame takes one vector at
  a time: the tree's initialisation of a vector during the pops of the previous one is covered
  by the distinct-index proof and by the simulation against the golden model, not by the
  order proof.
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Assert, Const, Mux, Signal, Value

from qllm_cores.gen.registry import UNITS, resolve_params

from . import Proof
from .transaction import TransactionHarness

__all__ = ["OrizuruHarness", "TopKOrderHarness", "DistinctIndicesHarness", "order_key",
           "proof", "proofs"]

SIDES = ("max", "min")


def order_key(x):
    """contract 3's totalOrder key of the binary16 pattern ``x``: ``~x`` if the sign bit is set,
    else ``x | 0x8000``; keys compare as unsigned integers."""
    x = Value.cast(x)
    return Mux(x[15], ~x, x | 0x8000)


class OrizuruHarness(TransactionHarness):
    """The k beats of every vector checked against it (``last`` on the k-th beat only), for
    :meth:`check_beat` to assert more; ``reported[side]``: the indices that side reported on
    the beats of this vector already taken. ``framed``: the frame of
    :class:`~verif.formal.transaction.TransactionHarness` (k-induction). Unframed (for ``pdr``): two vectors in flight, any
    environment."""

    def __init__(self, dut, *, framed=False):
        self.beats_per_input = dut.k
        super().__init__(dut, framed=framed)
        self.n = len(dut.o.payload.mask)
        self.reported = {side: Signal(self.n, name=f"reported_{side}") for side in SIDES}

    def check(self, m, record, out, beat):
        final = beat == self.beats_per_input - 1
        with m.If(self.dut.o.ready):
            for side in SIDES:
                index = out[f"{side}_index"]
                m.d.sync += self.reported[side].eq(
                    Mux(final, 0, self.reported[side] | (Const(1, self.n) << index)))
        m.d.comb += Assert(out.last == final)
        self.check_beat(m, record, out, final)

    def check_beat(self, m, record, out, final):
        """Assert the property of beat ``out`` of vector ``record`` (``final``: its k-th)."""
        raise NotImplementedError


class TopKOrderHarness(OrizuruHarness):
    """Each beat's max (min) is its leaf's value and >= (<=) every leaf not yet reported
    by that side (contract 3); framed (k-induction) by default. ``sides``: the sides checked
    (a proof checks one: both at once take the solver many times as long as each alone)."""

    prop = "top-k order (root >= leaves)"

    def __init__(self, dut, *, framed=True, sides=SIDES):
        super().__init__(dut, framed=framed)
        self.sides = sides

    def check_beat(self, m, record, out, final):
        x = record.x
        for side in self.sides:
            value = out[f"{side}_value"]
            m.d.comb += Assert(value == x[out[f"{side}_index"]])
            root = order_key(value)
            for i in range(self.n):
                key = order_key(x[i])
                beyond = root >= key if side == "max" else root <= key
                m.d.comb += Assert(self.reported[side][i] | beyond)


class DistinctIndicesHarness(OrizuruHarness):
    """No index repeats on either side within a vector; ``last`` on the k-th beat only;
    ``mask`` 0 before it and then exactly the indices reported by either side (contract 3)."""

    prop = "k distinct indices"

    def check_beat(self, m, record, out, final):
        union = 0
        for side in SIDES:
            index = out[f"{side}_index"]
            m.d.comb += Assert(~self.reported[side].bit_select(index, 1))
            union = union | self.reported[side] | (Const(1, self.n) << index)
        m.d.comb += Assert(out.mask == Mux(final, union[:self.n], 0))


#: The configurations proved: registry overrides of each unit's defaults (n = 16, k = 2).
CONFIGURATIONS = (
    ("orizuru", {"structure": "tree", "pipeline": 0}),
    ("orizuru", {"structure": "tree"}),
    ("orizuru", {"structure": "unrolled"}),
    ("orizuru_scan", {}),
    ("orizuru_sortnet", {}),
)
#: Units whose distinct indices are proved framed (k-induction): PDR did not finish the
#: sorting network's in 300 s at n = 4, 8 or 16.
FRAMED_DISTINCT = ("orizuru_sortnet",)
#: The order proof's vector length (the module docstring says why not 16).
ORDER_N = 4


def proof(unit, overrides, harness, *, framed, side=None):
    """The row proving ``harness`` on ``unit`` with the registry ``overrides``: ``framed``,
    by k-induction (``kind``), else by ``pdr``; ``side``: the order's side, max or min."""
    _, params = resolve_params(unit, None, overrides)
    configuration = ",".join(f"{name}={value}" for name, value in overrides.items())
    options = {"framed": framed} if side is None else {"framed": framed, "sides": (side,)}
    engine, depth = "pdr", 8
    if framed:
        engine = "kind"
        depth = harness(UNITS[unit].build(params), **options).induction_depth()
    prop = harness.prop if side is None else f"{harness.prop}, {side} side"
    return Proof(unit, configuration or "default", prop, partial(harness, **options), params,
                 engine, depth)


def proofs():
    """The Orizuru rows of the table: ``"k distinct indices"`` at the registry's defaults
    (by PDR; the units in :data:`FRAMED_DISTINCT` framed), ``"top-k order (root >=
    leaves)"`` framed at n = :data:`ORDER_N`, one row per side."""
    rows = [proof(unit, overrides, DistinctIndicesHarness, framed=unit in FRAMED_DISTINCT)
            for unit, overrides in CONFIGURATIONS]
    rows += [proof(unit, {"n": ORDER_N, **overrides}, TopKOrderHarness, framed=True,
                   side=side)
             for unit, overrides in CONFIGURATIONS for side in SIDES]
    return rows
