"""4:2 compressor: four addends to a sum and a carry vector, without carry propagation."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["Compressor42"]


class Compressor42(wiring.Component):
    """Reduce four ``width``-bit addends to two, modulo ``2**width``.

    Each bit position is the classic 4:2 cell: a full adder over ``a, b, c`` whose majority
    output ``cout`` goes to the next position, and a second full adder over the first sum,
    ``d`` and the ``cout`` of the previous position. ``cout`` does not depend on the incoming
    carry, so there is no ripple: the delay is two full adders at any width (three XOR levels).

    ``sum + carry == a + b + c + d (mod 2**width)``; ``carry`` already carries its one-position
    shift (its bit 0 is 0). With two's-complement addends sign-extended to a width that holds
    the exact result, ``sum + carry`` read as signed is the exact sum.

    Used by ``p3_pe`` for its 4:2 compressor tree (P3-LLM section V-C, Fig. 6(c)).

    Parameters
    ----------
    width : int
        Bits per addend, 1..128.

    Members
    -------
    a, b, c, d : ``In(width)``
        Addends.
    sum, carry : ``Out(width)``
        The two vectors whose sum (modulo ``2**width``) is the sum of the addends.

    Purely combinational.
    """

    def __init__(self, width):
        self.width = check_int("width", width, min_value=1, max_value=128)
        super().__init__({
            "a": In(self.width), "b": In(self.width), "c": In(self.width), "d": In(self.width),
            "sum": Out(self.width), "carry": Out(self.width),
        })

    def elaborate(self, platform):
        m = Module()
        a, b, c, d = self.a, self.b, self.c, self.d
        first_sum = Signal(self.width)
        cout = Signal(self.width)          # majority(a, b, c): to the next position
        m.d.comb += [
            first_sum.eq(a ^ b ^ c),
            cout.eq((a & b) | (a & c) | (b & c)),
        ]
        cin = Signal(self.width)
        m.d.comb += cin.eq(Cat(0, cout[:-1]) if self.width > 1 else 0)
        carry_out = Signal(self.width)
        m.d.comb += [
            self.sum.eq(first_sum ^ d ^ cin),
            carry_out.eq((first_sum & d) | (first_sum & cin) | (d & cin)),
            self.carry.eq(Cat(0, carry_out[:-1]) if self.width > 1 else 0),
        ]
        return m
