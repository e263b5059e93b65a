# amaranth: UnusedElaboratable=no
# (The unit builds its lanes in its constructor: their latency is its own. A unit built only for
# its signature leaves them unelaborated; the unit itself is still reported by the caller's file.)
"""HBM-PIM PIM compute unit baseline: ``lanes`` FP16 x FP16 MACs, FP32 accumulate, one shared
activation (P3-LLM section V-C; the baseline of ``p3_pcu``, contract section 9).

The lanes are :class:`hdl.baselines.fp16_mac.fp16_mac.Fp16Mac` instances run in lockstep; this module holds only
the fan-out of the input beat and the lockstep handshake.
"""

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .fp16_mac.fp16_mac import Fp16Mac
from ..common.params import check_int
from ..common.shared_modules import SharedModules
from ..common.stream_stage import check_pipeline

__all__ = ["Fp16Pcu"]


class Fp16Pcu(wiring.Component):
    """HBM-PIM's PIM compute unit: ``lanes`` FP16 x FP16 MACs with FP32 accumulators that share
    one binary16 activation, one beat per cycle.

    The throughput baseline for the P3-LLM PCU (``p3_pcu``): P3-LLM section V-C equips its PCU
    with 64 multipliers "to match the 256-bit column access granularity of HBM, effectively
    quadrupling the compute throughput compared to the baseline HBM-PIM with 16 FP16
    multipliers", and compares against "the baseline HBM-PIM [42] using FP32 accumulators".
    A DRAM bank delivers 256 bits per column read, "16 x 16-bit operands" (section II): here
    the ``lanes`` binary16 weights of one beat, each multiplied by the one activation that the
    host placed in the PCU's register. Per beat this unit computes a 1 x 1 x 16 GEMV tile (at
    the default 16 lanes); P3-LLM's PCU computes a 1 x 4 x 16 tile per column read, four times
    the MACs (4-bit weights, four activations per PE).

    Lane ``j`` is an :class:`~hdl.baselines.fp16_mac.fp16_mac.Fp16Mac` over ``a = act``, ``b = wgt[j]``, with the
    beat's ``first`` and ``last``; its result is exactly ``fp16_mac``'s for that operand
    stream:

    ``acc[j] = fp32(acc[j] + fp32(act) * fp32(wgt[j]))``

    (one rounding per beat, to nearest, ties to even; binary16 subnormals exact; IEEE
    infinities and NaNs; every NaN result the pattern 0x7FC00000: see
    :class:`~hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`).

    Lockstep: every lane receives the same ``valid``, ``first`` and ``last`` and the same
    output ``ready``, so their control state (the :class:`~hdl.common.stream_stage.StallPipeline`
    valid chains) is the same in every cycle. The handshake does not rely on that alone:

    * ``i.ready`` is the AND of the lanes' ``i.ready``, and each lane's ``i.valid`` is
      ``i.valid & i.ready``: a lane takes a beat only in a cycle in which every lane takes it,
      which is exactly a transfer on ``i``;
    * ``o.valid`` is the AND of the lanes' ``o.valid``, and each lane's ``o.ready`` is
      ``o.ready & o.valid``: a lane releases its result only in a cycle in which every lane
      releases its own, which is exactly a transfer on ``o``.

    No beat is therefore taken by some lanes and not others, nor a result released by some
    and held by others, under any pattern of ``i.valid`` and ``o.ready``. There is no
    combinational loop: a lane's ``i.ready`` (``~o.valid | o.ready`` of the lane) does not
    depend on its ``i.valid``.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Input stream; payload fields in order ``act`` (16, binary16 bits, shared by every
        lane), ``wgt`` (``lanes`` x 16, binary16 bits, lane ``j`` at bits ``16 j ..``: 256 bits
        at 16 lanes, one HBM column read), ``first`` (1: clear every accumulator to +0.0
        before this beat), ``last`` (1: emit every accumulator after this beat).
    o : ``Out(stream.Signature(out_layout))``
        Output stream, one beat per input beat with ``last``; payload field ``acc``
        (``lanes`` x 32, binary32 bits, lane ``j`` at bits ``32 j ..``).

    Parameters
    ----------
    lanes : int
        Number of MAC lanes, 1..64. Default 16 (HBM-PIM's 16 FP16 multipliers).
    pipeline : int
        Register stages of every lane, 0..2, as :class:`~hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`'s ``pipeline``.
        Default 2.

    Attributes
    ----------
    latency : int
        Cycles from the transfer of a ``last`` beat on ``i`` to its result being valid on
        ``o`` (with ``o.ready`` high): the lane's, ``2 + pipeline``.
    macs : list of Fp16Mac
        The lanes, lane ``j`` at index ``j`` (submodules ``lane<j>``).
    shared_modules : SharedModules
        In generated Verilog (:func:`gen.verilog.convert`) the lane is one module,
        :attr:`lane_module`, instantiated ``lanes`` times (converted once: 16 lanes inlined
        are 16 netlists of one circuit); in Amaranth's simulator the lanes are submodules.
    lane_module : str
        Name of the lane's Verilog module, ``fp16_pcu_lane_p<pipeline>``.

    Raises
    ------
    TypeError, ValueError
        If ``lanes`` is not an integer in 1..64 or ``pipeline`` not an integer in 0..2.

    Throughput: one beat (``lanes`` MACs) per cycle, also with ``last`` on every beat; a
    ``last`` beat accepted in cycle t is valid on ``o`` in cycle t + ``latency``. ``i.ready``
    is combinational in ``o.ready`` (as a lane's); ``o.valid`` is an AND of flip-flops and
    ``o.payload`` comes from flip-flops.
    """

    #: Largest ``pipeline`` value (the lane's).
    MAX_PIPELINE = Fp16Mac.MAX_PIPELINE
    #: Largest number of lanes.
    MAX_LANES = 64

    def __init__(self, *, lanes=16, pipeline=2):
        self.lanes = check_int("lanes", lanes, min_value=1, max_value=self.MAX_LANES)
        self.pipeline = check_pipeline(pipeline, max_value=self.MAX_PIPELINE)
        self.macs = [Fp16Mac(pipeline=self.pipeline) for _ in range(self.lanes)]
        self.latency = self.macs[0].latency
        self.lane_module = f"fp16_pcu_lane_p{self.pipeline}"
        self.shared_modules = SharedModules()
        self.in_layout = data.StructLayout({
            "act": unsigned(16),
            "wgt": data.ArrayLayout(unsigned(16), self.lanes),
            "first": unsigned(1),
            "last": unsigned(1),
        })
        self.out_layout = data.StructLayout({"acc": data.ArrayLayout(unsigned(32), self.lanes)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        for j, mac in enumerate(self.macs):
            self.shared_modules.add(m, f"lane{j}", self.lane_module, mac)

        # Lockstep handshake (see the class docstring).
        all_ready = Signal()
        all_valid = Signal()
        m.d.comb += [
            all_ready.eq(Cat(mac.i.ready for mac in self.macs).all()),
            all_valid.eq(Cat(mac.o.valid for mac in self.macs).all()),
            self.i.ready.eq(all_ready),
            self.o.valid.eq(all_valid),
        ]
        for j, mac in enumerate(self.macs):
            m.d.comb += [
                mac.i.valid.eq(self.i.valid & all_ready),
                mac.i.payload.a.eq(self.i.payload.act),
                mac.i.payload.b.eq(self.i.payload.wgt[j]),
                mac.i.payload.first.eq(self.i.payload.first),
                mac.i.payload.last.eq(self.i.payload.last),
                mac.o.ready.eq(self.o.ready & all_valid),
                self.o.payload.acc[j].eq(mac.o.payload.acc),
            ]
        return m
