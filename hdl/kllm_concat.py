"""KLLM Concat array (KLLM section III-B and IV-A, SPEC section 1)."""

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .lanes import split_lanes
from .params import check_int
from .stream_stage import output_register

__all__ = ["KllmConcat"]


class KllmConcat(wiring.Component):
    """An array of ``lanes`` KLLM Concat units behind one stream.

    KLLM replaces the element-wise products of a K-Means x K-Means MatMul by concatenating the
    two operands' centroid indices (section III-B, Fig. 3(a) step 1): the activation index goes
    to the high bits and the weight index to the low bits, which makes the map from index pairs
    to product indices bijective and non-commutative. Each lane computes

    ``y[j] = (a[j] << b_bits) | b[j]``

    and the result is registered, as in the paper's Concat unit ("concatenates two 4-bit inputs
    and stores the result in an 8-bit register", section IV-A). The paper's PE lane has 4096
    such units (``lanes=4096``); the default array of 16 matches one Index Distribution Counter.

    Parameters
    ----------
    a_bits : int
        Activation index width n_A, 1..8 (default 4).
    b_bits : int
        Weight index width n_B, 1..8 (default 4).
    lanes : int
        Number of Concat units, 1..4096 (default 16).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Input stream; payload fields ``a`` (``lanes`` x ``a_bits``) and ``b``
        (``lanes`` x ``b_bits``), lane 0 in the least significant bits.
    o : ``Out(stream.Signature(out_layout))``
        Output stream; payload field ``y`` (``lanes`` x ``a_bits + b_bits``).

    Latency and throughput: one cycle from the transfer on ``i`` to ``o.valid``; one beat per
    cycle sustained. ``i.ready`` is combinational in ``o.ready`` (a single register stage).

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is outside its range.
    """

    #: Cycles from a transfer on ``i`` to the corresponding beat being valid on ``o``.
    latency = 1

    def __init__(self, *, a_bits=4, b_bits=4, lanes=16):
        self.a_bits = check_int("a_bits", a_bits, min_value=1, max_value=8)
        self.b_bits = check_int("b_bits", b_bits, min_value=1, max_value=8)
        self.lanes = check_int("lanes", lanes, min_value=1, max_value=4096)
        self.in_layout = data.StructLayout({
            "a": data.ArrayLayout(unsigned(self.a_bits), self.lanes),
            "b": data.ArrayLayout(unsigned(self.b_bits), self.lanes),
        })
        self.out_layout = data.StructLayout({
            "y": data.ArrayLayout(unsigned(self.a_bits + self.b_bits), self.lanes),
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        # Only ``o.valid`` needs a reset; the payload register does not (saves a reset mux per
        # bit where the target has no free synchronous reset).
        y_reg = Signal(self.out_layout, reset_less=True)
        m.d.comb += self.o.payload.eq(y_reg)
        a = split_lanes(m, self.i.payload.a, self.a_bits, self.lanes, name="a")
        b = split_lanes(m, self.i.payload.b, self.b_bits, self.lanes, name="b")
        # Cat puts its first argument in the least significant bits: lane 0 first, and within
        # a lane the weight index low, the activation index high. One assignment for the whole
        # register keeps elaboration linear in ``lanes`` (per-lane slices were quadratic).
        product_indices = Cat(*(Cat(b[lane], a[lane]) for lane in range(self.lanes)))
        load = output_register(m, self.i, self.o)
        with m.If(load):
            m.d.sync += y_reg.as_value().eq(product_indices)
        return m
