"""Invariants a unit states about its own state, for the proofs (``make formal``).

A k-induction proof starts its step from any state that satisfies its assertions for k
cycles, reachable or not. A unit whose correctness rests on a relation between registers (a
queue's pointers and its level, credits and the beats in flight) fails such a step from a
state that breaks the relation, though no run ever reaches it. :func:`invariant` asserts the
relation where the registers are built: the proof then proves it together with the property
(an assertion, never an assumption), and the step starts from states that keep it.

The assertions exist only when the unit is elaborated for a proof: the proofs pass a platform
whose ``formal`` attribute is true (:data:`FORMAL`, given by ``verif.formal.prove``). Every
other elaboration (``make verilog``, the benches, synthesis) passes none, and the Verilog is
unchanged.
"""

from types import SimpleNamespace

from amaranth.hdl import Assert, Signal

__all__ = ["FORMAL", "invariant"]

#: The platform of the proofs.
FORMAL = SimpleNamespace(formal=True)


def invariant(m, platform, *conditions, name="invariant"):
    """Assert every condition (Amaranth values) in every cycle when ``platform`` is a proof's
    (its ``formal`` attribute is true); otherwise do nothing. Each condition is a signal
    ``<name>_<k>`` (``k``: its position), so that a trace shows which one failed."""
    if getattr(platform, "formal", False):
        for k, condition in enumerate(conditions):
            held = Signal(name=f"{name}_{k}")
            m.d.comb += [held.eq(condition), Assert(held)]
