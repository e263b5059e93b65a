"""IEEE binary16 helpers: the totalOrder key and a total-order comparator component."""

from amaranth.hdl import Module, Mux, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["total_order_key", "total_order_value", "Fp16TotalOrderCompare"]


def total_order_key(x):
    """Map a binary16 bit pattern to a 16-bit unsigned key whose unsigned order is IEEE
    totalOrder (combinational): ``~x`` if the sign bit is set, else ``x | 0x8000``.

    -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN; -0 and +0 are distinct, NaNs are ordered
    by sign and payload.
    """
    x = Value.cast(x)
    if len(x) != 16:
        raise ValueError(f"x must be 16 bits wide, not {len(x)}")
    return Mux(x[15], ~x, x | 0x8000)


def total_order_value(key):
    """The binary16 bit pattern whose :func:`total_order_key` is ``key`` (combinational):
    ``key & 0x7FFF`` if the key's top bit is set, else ``~key``.
    """
    key = Value.cast(key)
    if len(key) != 16:
        raise ValueError(f"key must be 16 bits wide, not {len(key)}")
    return Mux(key[15], key & 0x7FFF, ~key)


class Fp16TotalOrderCompare(wiring.Component):
    """Combinational binary16 comparator in IEEE totalOrder.

    Members
    -------
    a, b : ``In(16)``
        binary16 bit patterns.
    gt : ``Out(1)``
        ``a > b`` in totalOrder (strict; ``a == b`` only for identical bit patterns).

    No latency (combinational). Orizuru's trees use one per comparison node.
    """

    a: In(16)
    b: In(16)
    gt: Out(1)

    def elaborate(self, platform):
        m = Module()
        # Written as b < a: Yosys maps ``<`` to the carry chain alone, ``>`` to the carry chain
        # and an equality reduction (11 more LUT4s at 16 bits on ECP5).
        m.d.comb += self.gt.eq(total_order_key(self.b) < total_order_key(self.a))
        return m
