"""KLLM Concat array (KLLM section III-B and IV-A, contract section 1)."""

from amaranth.hdl import Cat, Module, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..common.lanes import split_lanes
from ..common.params import check_int
from ..common.stream_stage import StallPipeline, check_pipeline, pack_fields

__all__ = ["KllmConcat"]

#: Highest ``pipeline`` value: input register stages in front of the output register.
MAX_PIPELINE = 2
#: The output register alone already runs far above 150 MHz (docs/units/kllm_concat.md).
DEFAULT_PIPELINE = 0
#: Widest ``lanes * (a_bits + b_bits)`` payload: Amaranth 0.5 numbers a cell's output bits
#: below 2**16, and a 65,536-bit concatenation fails inside its netlist builder.
MAX_PAYLOAD_BITS = (1 << 16) - 1


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
    pipeline : int
        Register stages in front of the output register, 0..2 (default 0).

        * 0: the output register alone (the paper's Concat unit); latency 1.
        * 1: plus one input register stage holding ``a`` and ``b`` (``lanes x (a_bits +
          b_bits)`` more flip-flops); latency 2. It gives the placer a register next to the
          source and one next to the consumer, for a 4096-lane array whose inputs and outputs
          are spread over the die; the concatenation itself has no logic to cut.
        * 2: two input register stages; latency 3.

        Every stage loads at the one clock enable ``~o.valid | o.ready``
        (:class:`~hdl.common.stream_stage.StallPipeline`), so ``i.ready`` stays combinational in
        ``o.ready`` at every depth. The default is 0: the output register alone runs far above
        150 MHz on ECP5 and iCE40 (docs/units/kllm_concat.md, Timing), and the input stages
        measured no faster at 16 lanes.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Input stream; payload fields ``a`` (``lanes`` x ``a_bits``) and ``b``
        (``lanes`` x ``b_bits``), lane 0 in the least significant bits.
    o : ``Out(stream.Signature(out_layout))``
        Output stream; payload field ``y`` (``lanes`` x ``a_bits + b_bits``).
    latency : int
        Cycles from a transfer on ``i`` to the corresponding beat being valid on ``o``:
        ``1 + pipeline``.

    Latency and throughput: ``1 + pipeline`` cycles from the transfer on ``i`` to ``o.valid``;
    one beat per cycle sustained at every depth. ``i.ready`` is combinational in ``o.ready``
    (``~o.valid | o.ready``); ``o.valid`` and ``o.payload`` come straight from flip-flops.

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is outside its range, or a beat would exceed ``MAX_PAYLOAD_BITS``
        (4096 lanes of 8 + 8 bits; 4096 lanes of 8 + 7 bits are accepted).
    """

    def __init__(self, *, a_bits=4, b_bits=4, lanes=16, pipeline=DEFAULT_PIPELINE):
        self.a_bits = check_int("a_bits", a_bits, min_value=1, max_value=8)
        self.b_bits = check_int("b_bits", b_bits, min_value=1, max_value=8)
        self.lanes = check_int("lanes", lanes, min_value=1, max_value=4096)
        payload_bits = self.lanes * (self.a_bits + self.b_bits)
        if payload_bits > MAX_PAYLOAD_BITS:
            raise ValueError(
                f"lanes * (a_bits + b_bits) must be at most {MAX_PAYLOAD_BITS} (a beat's payload "
                f"must stay below Amaranth's 65,536-bit net limit), not {self.lanes} * "
                f"({self.a_bits} + {self.b_bits}) = {payload_bits}")
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        #: Cycles from a transfer on ``i`` to the corresponding beat being valid on ``o``.
        self.latency = 1 + self.pipeline
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
        # One valid chain and one clock enable for the input stages and the output register.
        # The payload registers are reset-less (no reset mux per bit where the target has no
        # free synchronous reset); only the valid chain is reset.
        pipe = StallPipeline(m, self.i, self.o, latency=self.latency, name="concat")
        operands = pipe.delay(self.i.payload, self.pipeline, name="operands")
        a = split_lanes(m, operands.a, self.a_bits, self.lanes, name="a")
        b = split_lanes(m, operands.b, self.b_bits, self.lanes, name="b")
        # Cat puts its first argument in the least significant bits: lane 0 first, and within
        # a lane the weight index low, the activation index high. One assignment for the whole
        # register keeps elaboration linear in ``lanes`` (per-lane slices were quadratic).
        product_indices = Cat(*(Cat(b[lane], a[lane]) for lane in range(self.lanes)))
        y_reg = pipe.stage(product_indices, name="y_reg")
        m.d.comb += self.o.payload.eq(pack_fields(self.out_layout, {"y": y_reg}))
        return m
