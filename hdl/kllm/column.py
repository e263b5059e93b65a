# amaranth: UnusedElaboratable=no
# (The column builds its Concat array and counter in its constructor: their widths and latency
# size the column. A column built only for its signature leaves them unelaborated.)
"""KLLM index-based MatMul column (KLLM section III-B, Fig. 3, Fig. 6; contract section 7): the
Concat array, the Index Distribution Counter and the codebook weighted sum in binary32.

The composition and the weighted-sum engine are here; the binary32 steps are in
:mod:`hdl.common.fp32_steps`.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..common.fp32_steps import (FP32_UNPACKED, PRODUCT_CUTS, count_times_fp16, fp32_add,
                         fp32_to_fp16, product_registers)
from ..common.invariants import invariant
from .concat import KllmConcat
from .idx_counter.bins import distribute_fits
from .idx_counter.idx_counter import KllmIdxCounter, counter_bits
from ..common.params import check_choice, check_int
from ..common.stream_stage import (PingPongBuffer, SkidBuffer, StallPipeline, check_pipeline,
                           enabled_register, pack_fields)

__all__ = ["KllmColumn", "PIPELINE_DEPTHS"]

#: What each ``pipeline`` value builds: the counter's own ``pipeline``, the product's optional
#: registers (:data:`hdl.common.fp32_steps.PRODUCT_CUTS`), the adder's
#: (:data:`hdl.common.fp32_steps.ADD_CUTS`) and how many registers the binary16 rounding has of its
#: own before the output register (0..3 of its steps' registers); ``input`` (kk mode): a
#: :class:`~hdl.common.stream_stage.PingPongBuffer` between ``i`` and the Concat array, so that
#: ``i.ready`` and the admission state read flip-flops, not the array's clock enable;
#: ``result``: a :class:`~hdl.common.stream_stage.SkidBuffer` between the result register and
#: the binary16 rounding. A counter ``pipeline`` of 4 falls back to 3 where the counter has no
#: 4 (:func:`~hdl.kllm.idx_counter.bins.distribute_fits`).
PIPELINE_DEPTHS = {
    0: {"counter": 0, "product": (), "add": (), "output": 0, "input": False, "result": False},
    1: {"counter": 1, "product": ("operands",), "add": ("align", "add"), "output": 1,
        "input": False, "result": False},
    2: {"counter": 2, "product": ("operands", "product"),
        "add": ("compare", "align", "add", "count"), "output": 2, "input": False,
        "result": False},
    3: {"counter": 3, "product": PRODUCT_CUTS,
        "add": ("compare", "mask", "align", "add", "count", "shift"), "output": 3,
        "input": False, "result": False},
    4: {"counter": 3, "product": PRODUCT_CUTS,
        "add": ("compare", "mask", "align", "add", "count", "coarse", "shift"), "output": 3,
        "input": False, "result": False},
    5: {"counter": 3, "product": PRODUCT_CUTS,
        "add": ("compare", "mask", "align", "add", "groups", "count", "coarse", "shift"),
        "output": 3, "input": False, "result": False},
}
PIPELINE_DEPTHS[6] = {**PIPELINE_DEPTHS[5], "input": True}
PIPELINE_DEPTHS[7] = {**PIPELINE_DEPTHS[6], "counter": 4, "result": True}
MAX_PIPELINE = max(PIPELINE_DEPTHS)
#: The default depth: the highest Fmax measured (docs/units/kllm_column.md).
DEFAULT_PIPELINE = 7
#: Largest count magnitude for which ``fp32(count)`` is exact (one rounding per product).
MAX_EXACT_COUNT = 1 << 24


class KllmColumn(wiring.Component):
    """One output element of KLLM's index-based MatMul: index pairs in, binary16 out.

    KLLM computes a MatMul column without multiplications (section III-B, Fig. 3): (1) the
    Concat units join each activation index with the weight index of the same row, (2) the
    Index Distribution Counter counts how often each joined index occurs over the reduction,
    and (3) FP MAC units weight the counts with the codebook: the offline Cartesian product of
    the two centroid tables in K-Means x K-Means mode, the activation centroids in Integer x
    K-Means mode, where the counter adds each row's integer weight instead of 1 (Fig. 3(b)).
    This unit composes :class:`~hdl.kllm.concat.KllmConcat` (kk mode) and
    :class:`~hdl.kllm.idx_counter.idx_counter.KllmIdxCounter` (with its per-bin ``overflow`` flags) and adds
    the codebook and the weighted sum, one MAC for the counter as in the paper's PE lane (32
    counters and 32 FP16 MAC units, Table I).

    Arithmetic (contract section 7, bit-exact): for the bins in ascending order whose count is not
    0, ``p = fp32(fp32(count) * fp32(codebook[bin]))`` and ``acc = fp32(acc + p)``, both rounded
    to nearest even, from ``acc = +0.0``; ``y = fp16(acc)`` rounded to nearest even with
    overflow to infinity. Every NaN result is 0x7E00. Readings that size the datapath: a count
    is at most 2^24 in magnitude (``max_len`` is refused above), so ``fp32(count)`` is exact and
    a product has one rounding; every product and every sum is a multiple of 2^-24 (the smallest
    binary16 subnormal) and below 2^24 * 2^16 * 2^10 in magnitude, so no binary32 value is ever
    subnormal or overflows: the adder has neither path.

    Micro-architecture:

    * front: ``i`` -> (``pipeline`` 6 and 7, kk:
      :class:`~hdl.common.stream_stage.PingPongBuffer`) -> Concat array (kk; ``mask`` and
      ``last`` travel beside it in registers on its clock enable) ->
      :class:`~hdl.common.stream_stage.PingPongBuffer` -> counter. The second buffer's payload
      registers load from the Concat side only, so the counter's clock enable (which
      fans out to its whole front) reaches two pointers, not the Concat array's registers; the
      first makes ``i.ready`` a gate of flip-flops instead of the Concat array's clock enable.
      In ik mode the activation index and the weight go to the counter directly. At
      ``pipeline`` 7 the counter runs at its own ``pipeline`` 4 where it has one.
    * codebook: a ``2**bits`` x 16 memory (banks of 64 from 65 to 256 entries) written by ``cb``
      a cycle after each beat (cleared after reset); read at the bin the counter sends, the
      entry registered once more before it is used.
    * product: the counter's readout (one bin per beat, in order) -> codebook read ->
      ``count * codebook`` (normalized count magnitude x binary16 significand, one multiplier,
      rounding to binary32) -> the weighted-sum loop, as a stream pipeline.
    * loop: one binary32 adder (:func:`hdl.common.fp32_steps.fp32_add`) whose steps are separated by
      the registers ``pipeline`` asks for; a product enters only when the previous sum is back
      in the accumulator (the sum is a recurrence: bin n + 1 adds to the rounded sum of bin n),
      so a non-zero bin takes ``add_cycles`` cycles; a zero bin is skipped in one cycle.
    * output: the accumulator after the final bin -> (``pipeline`` 7:
      :class:`~hdl.common.stream_stage.SkidBuffer`) -> binary16 rounding -> ``o``.

    Throughput: one ``i`` beat per cycle while the counter accepts; with ``banks=2`` the
    counter holds one histogram in its readout bank while the next reduction counts, so the
    weighted sum of one reduction overlaps the counting of the next (with ``banks=1`` it does
    not: ``i`` waits while the histogram is read). The weighted sum of a reduction whose
    histogram has ``z`` non-zero bins takes about ``2**bits + (add_cycles - 1) * z`` cycles.
    With ``banks=2`` reductions of at least that many beats stream with no stall (with every
    bin non-zero, ``add_cycles * 2**bits`` beats: 2,304 for 256 bins at the default depth;
    144 for the 16 bins of ik mode); shorter ones keep the adder busy: results back to back.
    With ``banks=1`` a reduction of B beats occupies ``i`` for about B + that many cycles.

    Parameters
    ----------
    a_bits, b_bits : int
        Activation / weight index widths n_A, n_B, 1..8 (default 4); kk mode uses
        ``a_bits + b_bits`` <= 10 index bits (the counter's limit), ik mode ``a_bits`` <= 10.
    n_inputs : int
        Indices per beat, 1..64 (default 16).
    mode : str
        ``"kk"`` (K-Means x K-Means) or ``"ik"`` (Integer x K-Means).
    weight_bits : int or None
        ik mode: signed integer weight width, 2..8 (default 4); None in kk mode.
    max_len : int
        Longest reduction that never overflows a bin (lanes, masked ones included), 1..
        (default 4096); the counter's width follows from it, and counts above 2^24 are refused.
    banks : int
        The counter's histogram banks, 1..2 (default 2;
        :class:`~hdl.kllm.idx_counter.idx_counter.KllmIdxCounter`). 2: the next reduction counts while the
        weighted sum reads the previous histogram. 1: no readout bank (``2**bits x
        (count_bits + 1)`` flip-flops fewer); ``i`` waits (``i.ready`` low) from a reduction's
        ``last`` beat until its histogram has left the counter, about ``2**bits`` cycles plus
        the weighted sum's own stalls. Outputs are the same either way.
    pipeline : int
        0..7 (default 7, the fastest clock measured): see :data:`PIPELINE_DEPTHS`.

    Members
    -------
    cb : ``In(stream.Signature(cb_layout))``
        Codebook load: ``value`` (16, binary16 bits), ``last`` (1). Entries are written at 0,
        1, 2... from the first beat after reset or after a ``last`` beat; beats past the final
        entry before ``last`` are ignored, a ``last`` before it leaves the later entries as
        they were. After reset the unit clears the codebook to +0.0 in ``2**bits`` cycles
        (``cb`` waits meanwhile; reductions may start at once). A load is accepted only
        between reductions, once every reduction accepted before it has been summed; while a
        load is under way (after its first beat, up to its ``last``), ``i`` is not accepted,
        and a load waiting at a reduction boundary goes first.
    i : ``In(stream.Signature(in_layout))``
        ``a`` (n_inputs x a_bits), ``b`` (n_inputs x b_bits, kk) or ``weight`` (n_inputs x
        signed weight_bits, ik), ``mask`` (n_inputs; 0: the lane counts nothing), ``last``.
    o : ``Out(stream.Signature(out_layout))``
        One beat per reduction: ``y`` (16, binary16 bits), ``overflow`` (1: a bin's running
        count left the counter's range during the reduction; ``y`` is then unspecified).
    latency : int
        Cycles from the transfer of a ``last`` beat on ``i`` to ``o.valid`` when every lane of
        the reduction was masked (no non-zero bin) and nothing waits: the counter's latency, its
        ``2**bits`` readout beats and the product and output stages. Each non-zero bin adds
        ``add_cycles - 1``.
    add_cycles : int
        Cycles per non-zero bin (the adder's registers + the accumulator).

    Raises
    ------
    TypeError, ValueError
        For a parameter of the wrong type, out of range, or an impossible combination.
    """

    def __init__(self, *, a_bits=4, b_bits=4, n_inputs=16, mode="kk", weight_bits=None,
                 max_len=4096, banks=2, counts="full", target="generic",
                 pipeline=DEFAULT_PIPELINE):
        self.a_bits = check_int("a_bits", a_bits, min_value=1, max_value=8)
        self.b_bits = check_int("b_bits", b_bits, min_value=1, max_value=8)
        self.n_inputs = check_int("n_inputs", n_inputs, min_value=1, max_value=64)
        self.mode = check_choice("mode", mode, ("kk", "ik"))
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.idx_bits = self.a_bits + self.b_bits if self.mode == "kk" else self.a_bits
        if self.idx_bits > 10:
            raise ValueError(f"a_bits + b_bits must be at most 10 in mode 'kk' (the counter's "
                             f"idx_bits range 1..10), not {self.a_bits} + {self.b_bits}")
        depth = PIPELINE_DEPTHS[self.pipeline]
        self.banks = check_int("banks", banks, min_value=1, max_value=2)
        # The counter validates weight_bits (None in kk), max_len and counts="memory" in ik;
        # the spill keeps no overflow flags.
        check_choice("counts", counts, ("full", "memory"))
        counter_pipeline = depth["counter"]
        if counter_pipeline == 4 and not distribute_fits(self.mode, self.idx_bits, counts):
            counter_pipeline = 3          # the counter's deepest front for these parameters
        self.counter = KllmIdxCounter(n_inputs=self.n_inputs, idx_bits=self.idx_bits,
                                      mode=self.mode, weight_bits=weight_bits, max_len=max_len,
                                      overflow=True, banks=self.banks, counts=counts,
                                      target=target, pipeline=counter_pipeline)
        self.counts, self.target = self.counter.counts, self.counter.target
        self.primitives = self.counter.primitives
        self.synth_targets = self.counter.synth_targets
        self.weight_bits = self.counter.weight_bits
        self.max_len = self.counter.max_len
        self.count_bits = self.counter.count_bits
        largest = (1 << self.count_bits) - 1 if self.mode == "kk" else 1 << (self.count_bits - 1)
        if largest > MAX_EXACT_COUNT:
            raise ValueError(
                f"max_len={self.max_len} needs a {self.count_bits}-bit count in mode "
                f"{self.mode!r}, whose magnitude reaches {largest}; counts above 2^24 would "
                f"make fp32(count) round (max_len must keep the count within 2^24)")
        self.concat = (KllmConcat(a_bits=self.a_bits, b_bits=self.b_bits, lanes=self.n_inputs,
                                  pipeline=0) if self.mode == "kk" else None)
        self.bins = 1 << self.idx_bits
        self.product_cuts = depth["product"]
        self.add_cuts = depth["add"]
        self.output_cuts = depth["output"]
        self.add_cycles = 1 + len(self.add_cuts)
        # Product pipeline: the codebook read register, a register of the entry read, the
        # optional product cuts, and the register in front of the loop.
        self.product_stages = 3 + product_registers(self.product_cuts)
        # ik: the counter takes i itself, and its front's clock enable is a flip-flop already.
        self.input_buffer = depth["input"] and self.mode == "kk"
        #: A skid buffer between the result register and the binary16 rounding.
        self.result_buffer = depth["result"]
        front = self.concat.latency + PingPongBuffer.latency if self.concat else 0
        front += PingPongBuffer.latency if self.input_buffer else 0
        self.latency = (front + self.counter.latency + PingPongBuffer.latency + self.bins - 1
                        + self.product_stages + SkidBuffer.latency
                        + 1 + 1 + self.output_cuts + 1 + int(self.output_cuts > 0)
                        + (SkidBuffer.latency if self.result_buffer else 0))

        self.cb_layout = data.StructLayout({"value": unsigned(16), "last": unsigned(1)})
        fields = {"a": data.ArrayLayout(unsigned(self.a_bits), self.n_inputs)}
        if self.mode == "kk":
            fields["b"] = data.ArrayLayout(unsigned(self.b_bits), self.n_inputs)
        else:
            fields["weight"] = data.ArrayLayout(signed(self.weight_bits), self.n_inputs)
        fields["mask"] = unsigned(self.n_inputs)
        fields["last"] = unsigned(1)
        self.in_layout = data.StructLayout(fields)
        self.out_layout = data.StructLayout({"y": unsigned(16), "overflow": unsigned(1)})
        super().__init__({
            "cb": In(stream.Signature(self.cb_layout)),
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.counter = counter = self.counter

        # --- admission: codebook loads between reductions ----------------------------------
        loading = Signal()            # a load has begun and not yet ended
        mid_reduction = Signal()      # a beat of an unfinished reduction was accepted on i
        outstanding = Signal(8)       # reductions accepted on i and not yet summed
        summed = Signal()             # the loop finishes a reduction in this cycle
        ended = Signal()              # a reduction's last beat was accepted in the cycle before
        clearing = Signal(init=1)     # the codebook is being cleared after reset
        # cb.ready is a flip-flop (it feeds the codebook's write enables and the load state):
        # loads are admitted outside the codebook's clearing, during a load, and between
        # reductions once every reduction accepted on i is summed (`outstanding` is 0 and no
        # finished reduction is still on its way into it: `ended` in this or the cycle before).
        # Written one cycle ahead: no beat of i is accepted now (`~i_take`; then neither is a
        # reduction left mid-way nor does one end) and the state's next value admits a load.
        clearing_next, loading_next, mid_next, ended_next = (
            Signal(name=f"{n}_next") for n in ("clearing", "loading", "mid_reduction", "ended"))
        admit = Signal()
        m.d.comb += self.cb.ready.eq(admit)
        cb_take = self.cb.valid & self.cb.ready
        # i waits while a load is under way, and while a load waits at a reduction boundary
        # (it goes first once the reductions before it are summed).
        block_i = loading | (self.cb.valid & ~mid_reduction)

        # --- front: Concat (kk) and counter -------------------------------------------------
        # block_i is one gate of flip-flops and cb.valid; the state that follows i (the
        # reduction in progress, the count of reductions in flight) is updated from i_take
        # and nothing reads it back in the same cycle but cb.ready.
        admitted = stream.Signature(self.in_layout).create(path=("admitted",))
        m.d.comb += [
            admitted.payload.eq(self.i.payload),
            admitted.valid.eq(self.i.valid & ~block_i),
            self.i.ready.eq(admitted.ready & ~block_i),
        ]
        if self.input_buffer:
            # i.ready and i_take are then gates of flip-flops: the Concat array's clock enable
            # stays at the buffer's pointers.
            # The admission state counts beats into the buffer, which belong to reductions
            # already accepted, so a load still waits for them (mid_reduction, outstanding).
            m.submodules.input_buffer = input_buffer = PingPongBuffer(self.in_layout)
            wiring.connect(m, admitted, input_buffer.i)
            front_i = input_buffer.o
        else:
            front_i = admitted
        i_take = self.i.valid & self.i.ready
        ending = i_take & self.i.payload.last
        m.d.comb += [mid_next.eq(Mux(i_take, ~self.i.payload.last, mid_reduction)),
                     ended_next.eq(ending)]
        m.d.sync += mid_reduction.eq(mid_next)
        # Both counted a cycle late (off the paths from the counter's clock enable through
        # i.ready and from o.ready through the output stages).
        summed_before = Signal()
        m.d.sync += [ended.eq(ended_next), summed_before.eq(summed),
                     outstanding.eq(outstanding + ended - summed_before)]
        m.d.sync += admit.eq(~clearing_next & (loading_next | (~i_take & ~mid_reduction & ~ended
                                                               & (outstanding == 0))))
        if getattr(platform, "formal", False):
            # The admission as the state decides it in the same cycle (for the proofs).
            ended_before = Signal()
            quiet = Signal(init=1)
            m.d.sync += [ended_before.eq(ended), quiet.eq(outstanding == 0)]
            invariant(m, platform, admit == (~clearing & (loading | (
                ~mid_reduction & ~ended & ~ended_before & quiet))), name="admission")

        if self.mode == "kk":
            m.submodules.concat = concat = self.concat
            m.d.comb += [
                concat.i.payload.a.eq(front_i.payload.a),
                concat.i.payload.b.eq(front_i.payload.b),
                concat.i.valid.eq(front_i.valid),
                front_i.ready.eq(concat.i.ready),
            ]
            # mask and last travel beside the Concat array: its stages all load at its clock
            # enable ~o.valid | o.ready (a StallPipeline), so registers on that enable stay
            # aligned with its output register.
            side = Cat(front_i.payload.mask, front_i.payload.last)
            concat_ce = ~concat.o.valid | concat.o.ready
            for k in range(concat.latency):
                side = enabled_register(m, side, concat_ce, name=f"side_{k}")
            # Into the counter through a ping-pong buffer: the Concat array's clock enable comes
            # from the buffer's occupancy, not from the counter's (which fans out to the whole
            # counter front).
            m.submodules.counter_buffer = joined = PingPongBuffer(counter.in_layout)
            m.d.comb += [
                joined.i.payload.idx.eq(concat.o.payload.y),
                joined.i.payload.mask.eq(side[:self.n_inputs]),
                joined.i.payload.last.eq(side[self.n_inputs]),
                joined.i.valid.eq(concat.o.valid),
                concat.o.ready.eq(joined.i.ready),
            ]
            wiring.connect(m, joined.o, counter.i)
        else:
            m.d.comb += [
                counter.i.payload.idx.eq(front_i.payload.a),
                counter.i.payload.weight.eq(front_i.payload.weight),
                counter.i.payload.mask.eq(front_i.payload.mask),
                counter.i.payload.last.eq(front_i.payload.last),
                counter.i.valid.eq(front_i.valid),
                front_i.ready.eq(counter.i.ready),
            ]

        # --- codebook ----------------------------------------------------------------------
        # From 65 to 256 entries the codebook is banks of 64, selected by the index's top
        # bits: FPGA synthesis takes a memory of up to 64 x 16 bits as LUT RAM (Yosys on
        # ECP5: 16 DPR16X4) and a larger one as block RAM, whose clock-to-data (DP16KD:
        # 5.8 ns) and the read-first logic Yosys adds behind it (the ports share a clock and
        # the read port is not transparent) limit the clock (kllm-a3: 132.6 MHz; kllm-a4 on
        # the 85F: 126.6 and 129.5 MHz at two seeds of three). A `ram_style` attribute would
        # do on ECP5 but fails synthesis on iCE40 (no LUT RAM). Above 256 entries the
        # codebook is one block RAM.
        bank_bits = 6 if 64 < self.bins <= 256 else self.idx_bits
        banks = [Memory(shape=16, depth=1 << bank_bits, init=[])
                 for _ in range(self.bins >> bank_bits)]
        for k, bank in enumerate(banks):
            m.submodules[f"codebook{k}" if len(banks) > 1 else "codebook"] = bank
        write_pointer = Signal(self.idx_bits)
        write_full = Signal()         # every entry of this load is written: ignore the rest
        m.d.comb += loading_next.eq(Mux(cb_take, ~self.cb.payload.last, loading))
        m.d.sync += loading.eq(loading_next)
        with m.If(cb_take):
            m.d.sync += [
                write_pointer.eq(Mux(self.cb.payload.last, 0, write_pointer + 1)),
                write_full.eq(~self.cb.payload.last
                              & (write_full | (write_pointer == self.bins - 1))),
            ]
        writing = cb_take & ~write_full
        # After reset the codebook is cleared to +0.0, one entry per cycle, while cb waits:
        # the counter reads its first bin several cycles after the first beat, bin k at least
        # k cycles later, so no entry is read before it is cleared.
        clear_pointer = Signal(self.idx_bits)
        m.d.comb += clearing_next.eq(clearing & (clear_pointer != self.bins - 1))
        m.d.sync += clearing.eq(clearing_next)
        with m.If(clearing):
            m.d.sync += clear_pointer.eq(clear_pointer + 1)
        # The write itself lands a cycle later, from registers (the codebook's write ports see
        # flip-flops only): no read can meet it, as the first bin of a reduction accepted after
        # the load is read tens of cycles later.
        write_addr = Mux(clearing, clear_pointer, write_pointer)
        for k, bank in enumerate(banks):
            write = bank.write_port()
            m.d.sync += [
                write.addr.eq(write_addr[:bank_bits]),
                write.data.eq(Mux(clearing, 0, self.cb.payload.value)),
                write.en.eq((clearing | writing) & (write_addr[bank_bits:] == k)),
            ]
        # --- product pipeline: readout -> codebook read -> count x entry -------------------
        product_layout = data.StructLayout({
            "p": FP32_UNPACKED, "skip": 1, "last": 1, "overflow": 1,
        })
        products = stream.Signature(product_layout).create(path=("products",))
        # The counter's readout enters through a ping-pong buffer: the product pipeline's
        # clock enable (which follows the loop) does not reach the counter's readout control.
        m.submodules.readout_buffer = bins = PingPongBuffer(counter.out_layout)
        wiring.connect(m, counter.o, bins.i)
        pipe = StallPipeline(m, bins.o, products, latency=self.product_stages,
                             name="product_pipe")
        read_pointer = Signal(self.idx_bits)
        with m.If(bins.o.valid & bins.o.ready):
            m.d.sync += read_pointer.eq(read_pointer + 1)  # wraps to 0 after the final bin
        read_data = []
        for bank in banks:
            read = bank.read_port(domain="sync")
            m.d.comb += [read.addr.eq(read_pointer[:bank_bits]), read.en.eq(pipe.ce)]
            read_data.append(read.data)
        read_entry = read_data[0]
        if len(banks) > 1:
            read_bank = Signal(self.idx_bits - bank_bits)   # the bank of the entry read
            with m.If(pipe.ce):
                m.d.sync += read_bank.eq(read_pointer[bank_bits:])
            read_entry = Array(read_data)[read_bank]
        beat = pipe.stage(Cat(bins.o.payload.count, bins.o.payload.last,
                              bins.o.payload.overflow), name="readout_beat")
        # The entry read is registered before any logic: above 256 entries the codebook is a
        # DP16KD block RAM on ECP5, which Yosys maps without its output register (5.8 ns from
        # the clock to its data; measured at 256 entries: 98.5 MHz with logic behind it), and
        # the register sits beside it; the banks' entry is chosen before it.
        entry = pipe.stage(read_entry, name="codebook_entry")
        beat = pipe.stage(beat, name="readout_beat_entry")

        count = beat[:self.count_bits]
        if self.mode == "ik":
            count = count.as_signed()
        p, registers = count_times_fp16(m, count, self.mode == "ik", entry,
                                        cuts=self.product_cuts, ce=pipe.ce)
        assert registers == product_registers(self.product_cuts)
        side = pipe.delay(Cat(count == 0, beat[self.count_bits:]), registers, name="side")
        payload = Signal(product_layout, name="product_next")
        m.d.comb += [payload.p.eq(p), payload.skip.eq(side[0]), payload.last.eq(side[1]),
                     payload.overflow.eq(side[2])]
        product = pipe.stage(payload, name="product")
        m.d.comb += products.payload.eq(product)
        # The loop takes the products from a skid buffer: the product pipeline's clock enable
        # (a few hundred flip-flops) comes from the buffer's registered ready, not from the
        # loop's state.
        m.submodules.product_buffer = product_buffer = SkidBuffer(product_layout)
        wiring.connect(m, products, product_buffer.i)
        products = product_buffer.o

        # --- the loop: acc = fp32(acc + p) -------------------------------------------------
        result_layout = data.StructLayout({"acc": FP32_UNPACKED, "overflow": 1})
        result = stream.Signature(result_layout).create(path=("result",))
        # The accumulator: +0.0 after reset and again when a finished sum leaves it.
        acc = Signal(FP32_UNPACKED, name="acc", init={"zero": 1})
        overflow = Signal()           # a bin of the current reduction overflowed
        pending = Signal()            # the final sum waits in acc for the result register
        in_flight = Signal(max(1, self.add_cycles - 1))   # a sum in the adder's registers
        last_flight = Signal(max(1, self.add_cycles - 1))
        busy = Signal()               # == in_flight.any(), as one flip-flop
        m.d.comb += products.ready.eq(~busy & ~pending)
        take = products.valid & products.ready
        launch = take & ~products.payload.skip

        total, registers = fp32_add(m, acc, products.payload.p, cuts=self.add_cuts)
        assert registers == self.add_cycles - 1
        if self.add_cycles > 1:
            m.d.sync += [in_flight.eq(Cat(launch, in_flight[:-1])),
                         busy.eq(launch | in_flight[:-1].any()),
                         last_flight.eq(Cat(launch & products.payload.last, last_flight[:-1]))]
            done, done_last = in_flight[-1], last_flight[-1]
        else:
            done, done_last = launch, launch & products.payload.last
        with m.If(done):
            m.d.sync += acc.eq(total)
        with m.If(take):
            m.d.sync += overflow.eq(overflow | products.payload.overflow)
            with m.If(products.payload.skip & products.payload.last):
                m.d.sync += pending.eq(1)
        with m.If(done_last):
            m.d.sync += pending.eq(1)

        # A finished reduction leaves acc for the result register once that is free.
        with m.If(result.ready | ~result.valid):
            m.d.sync += result.valid.eq(0)
            with m.If(pending):
                m.d.sync += [
                    result.valid.eq(1),
                    result.payload.acc.eq(acc),
                    result.payload.overflow.eq(overflow),
                    pending.eq(0), overflow.eq(0),
                    acc.eq(0), acc.zero.eq(1),
                ]
        m.d.comb += summed.eq(pending & (result.ready | ~result.valid))

        # --- output: binary16 rounding -----------------------------------------------------
        # The output stages stall together; o.ready reaches them through a skid buffer (from
        # pipeline 1 on), not as the clock enable of the result register and the loop's
        # hand-off.
        if self.output_cuts:
            output = stream.Signature(self.out_layout).create(path=("output",))
            m.submodules.out_buffer = out_buffer = SkidBuffer(self.out_layout)
            wiring.connect(m, output, out_buffer.i)
            wiring.connect(m, out_buffer.o, wiring.flipped(self.o))
        else:
            output = self.o
        if self.result_buffer:
            # result.ready (which clears acc and so reaches the adder's first step) is then a
            # flip-flop of the buffer, not the output stages' clock enable.
            m.submodules.result_buffer = result_buffer = SkidBuffer(result_layout)
            wiring.connect(m, result, result_buffer.i)
            result = result_buffer.o
        out_pipe = StallPipeline(m, result, output, latency=1 + self.output_cuts,
                                 name="out_pipe")
        steps = iter(range(self.output_cuts))

        def output_stage(value, name):
            return out_pipe.stage(value, name=name, enable=next(steps, None) is not None)

        y, _ = fp32_to_fp16(m, result.payload.acc, stage=output_stage)
        flag = out_pipe.delay(result.payload.overflow, self.output_cuts, name="overflow")
        out = out_pipe.stage(Cat(y, flag), name="out_reg")
        m.d.comb += output.payload.eq(pack_fields(self.out_layout,
                                                  {"y": out[:16], "overflow": out[16]}))
        return m
