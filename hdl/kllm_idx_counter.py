"""KLLM Index Distribution Counter (KLLM section IV-B, SPEC section 2)."""

from amaranth.hdl import Array, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .arith import adder_tree, one_hot_decode, popcount
from .params import check_choice, check_int

__all__ = ["KllmIdxCounter", "counter_bits"]

#: Widest bin counter the unit builds (the ``count`` field of the output stream).
MAX_COUNT_BITS = 32


def counter_bits(max_len, mode, weight_bits):
    """Bits a bin counter needs so that no reduction of up to ``max_len`` counted indices
    overflows.

    ``kk``: unsigned, holds ``0 .. max_len``. ``ik``: two's complement, holds
    ``max_len * -2**(weight_bits-1) .. max_len * (2**(weight_bits-1) - 1)``.
    """
    if mode == "kk":
        return max(1, max_len.bit_length())
    most_negative = max_len << (weight_bits - 1)       # magnitude of the lowest sum
    most_positive = max_len * ((1 << (weight_bits - 1)) - 1)
    bits = 1
    while -(1 << (bits - 1)) > -most_negative or (1 << (bits - 1)) - 1 < most_positive:
        bits += 1
    return bits


class KllmIdxCounter(wiring.Component):
    """Index Distribution Counter: the histogram of a stream of indices, read out bin by bin.

    KLLM's index-based MatMul reduces a column of K concatenated indices to the frequency of
    each of the ``2**idx_bits`` possible indices (section III-B, step 2), which then weights the
    offline codebook. The counter decodes ``n_inputs`` indices per beat into one-hot vectors and
    adds them per bin with bit counters (BTCs) into per-bin accumulators (section IV-B). In
    Integer x K-Means mode (section III-B2, Fig. 3(b)) each index adds its signed integer weight
    ("+n" counting) instead of 1.

    Reading of the paper adopted here (SPEC section 2): the histogram of one reduction is
    everything from the first beat after a ``last`` (or after reset) up to and including the
    next beat with ``last``. Lanes whose ``mask`` bit is 0 (outliers, padding) count nothing.
    After the ``last`` beat the histogram is copied to a readout bank and sent as ``2**idx_bits``
    beats in bin order; the next reduction accumulates meanwhile. Only a following ``last`` beat
    waits, if the readout bank is still busy.

    Parameters
    ----------
    n_inputs : int
        Indices per beat, 1..64 (default 16, the paper's 16-input design).
    idx_bits : int
        Index width, 1..10 (default 8 = n_A + n_B); ``2**idx_bits`` bins held in flip-flops.
    mode : str
        ``"kk"`` (K-Means x K-Means: +1 per index) or ``"ik"`` (Integer x K-Means: + weight).
    weight_bits : int or None
        Width of the signed integer weights in ``ik`` mode, 2..8 (default 4). Must be ``None``
        in ``kk`` mode, which has no weights.
    max_len : int
        Longest reduction (counted indices) that must not overflow, >= 1 (default 4096). The
        counter width is derived from it (:func:`counter_bits`); more than
        ``MAX_COUNT_BITS`` bits is refused.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        Fields ``idx`` (n_inputs x idx_bits), ``weight`` (n_inputs x signed weight_bits, ``ik``
        only), ``mask`` (n_inputs bits, bit j for lane j), ``last`` (1).
    o : ``Out(stream.Signature(out_layout))``
        Fields ``count`` (``count_bits``, unsigned in ``kk``, signed in ``ik``) and ``last``
        (on bin ``2**idx_bits - 1``).

    Latency and throughput: one beat (``n_inputs`` indices) per cycle. The first bin leaves 2
    cycles after the ``last`` beat is accepted; the readout takes ``2**idx_bits`` cycles and
    overlaps the next reduction, so reductions of at least ``2**idx_bits`` beats stream with
    no stall. Counts beyond ``max_len`` wrap modulo ``2**count_bits`` (two's complement in
    ``ik``). ``i.ready`` is combinational in ``o.ready``.

    Raises
    ------
    TypeError, ValueError
        For a parameter of the wrong type, out of range, or an impossible combination.
    """

    def __init__(self, *, n_inputs=16, idx_bits=8, mode="kk", weight_bits=None, max_len=4096):
        self.n_inputs = check_int("n_inputs", n_inputs, min_value=1, max_value=64)
        self.idx_bits = check_int("idx_bits", idx_bits, min_value=1, max_value=10)
        self.mode = check_choice("mode", mode, ("kk", "ik"))
        if self.mode == "kk":
            if weight_bits is not None:
                raise ValueError(f"weight_bits applies to mode 'ik' only; mode 'kk' counts +1 "
                                 f"per index (got weight_bits={weight_bits!r})")
            self.weight_bits = None
        else:
            self.weight_bits = check_int("weight_bits", 4 if weight_bits is None else weight_bits,
                                         min_value=2, max_value=8)
        self.max_len = check_int("max_len", max_len, min_value=1)
        self.count_bits = counter_bits(self.max_len, self.mode, self.weight_bits)
        if self.count_bits > MAX_COUNT_BITS:
            raise ValueError(
                f"max_len={self.max_len} needs a {self.count_bits}-bit counter in mode "
                f"{self.mode!r}, more than the {MAX_COUNT_BITS} bits of the count field")
        self.bins = 1 << self.idx_bits

        fields = {"idx": data.ArrayLayout(unsigned(self.idx_bits), self.n_inputs)}
        if self.mode == "ik":
            fields["weight"] = data.ArrayLayout(signed(self.weight_bits), self.n_inputs)
        fields["mask"] = unsigned(self.n_inputs)
        fields["last"] = unsigned(1)
        self.in_layout = data.StructLayout(fields)
        count_shape = (signed if self.mode == "ik" else unsigned)(self.count_bits)
        self.out_layout = data.StructLayout({"count": count_shape, "last": unsigned(1)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    #: Cycles from accepting a ``last`` beat to the first bin being valid on ``o``.
    latency = 2

    def elaborate(self, platform):
        m = Module()
        count_shape = self.out_layout["count"].shape

        # Stage 1: the accepted beat, registered.
        beat = Signal(self.in_layout, reset_less=True)
        beat_valid = Signal()

        # Stage 2 (combinational from `beat`): per-bin contribution of this beat.
        selected = [[] for _ in range(self.bins)]            # selected[bin][lane]
        for lane in range(self.n_inputs):
            lines = one_hot_decode(beat.idx[lane])
            for bin_ in range(self.bins):
                selected[bin_].append(lines[bin_] & beat.mask[lane])
        if self.mode == "kk":
            contributions = [popcount(lanes) for lanes in selected]
        else:
            contributions = [
                adder_tree([Mux(sel, beat.weight[lane], 0) for lane, sel in enumerate(lanes)])
                for lanes in selected
            ]

        # The accumulating bank and the readout bank.
        acc = [Signal(count_shape, name=f"acc_{b}") for b in range(self.bins)]
        fresh = Signal(init=1)        # acc holds nothing of the current reduction yet
        readout = Array(Signal(count_shape, name=f"readout_{b}", reset_less=True)
                        for b in range(self.bins))
        pointer = Signal(self.idx_bits)

        # Named once: each sum feeds both banks, and Amaranth would otherwise emit it twice.
        sums = [Signal(count_shape, name=f"sum_{b}") for b in range(self.bins)]
        m.d.comb += [total.eq(Mux(fresh, 0, acc[b]) + contributions[b])
                     for b, total in enumerate(sums)]

        at_last_bin = Signal()
        final_beat = Signal()
        m.d.comb += [
            at_last_bin.eq(pointer == self.bins - 1),
            final_beat.eq(self.o.valid & self.o.ready & at_last_bin),
        ]
        # o.valid is the "readout bank busy" flag: high while a histogram is being sent.
        bank_free = ~self.o.valid | final_beat
        advance = Signal()
        m.d.comb += advance.eq(beat_valid & (~beat.last | bank_free))

        # Input handshake: take a beat when stage 1 is empty or moves on this cycle.
        m.d.comb += self.i.ready.eq(~beat_valid | advance)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.eq(self.i.payload), beat_valid.eq(1)]
        with m.Elif(advance):
            m.d.sync += beat_valid.eq(0)

        with m.If(advance):
            m.d.sync += [a.eq(s) for a, s in zip(acc, sums)]
            m.d.sync += fresh.eq(beat.last)
            with m.If(beat.last):
                m.d.sync += [r.eq(s) for r, s in zip(readout, sums)]

        # Readout: bins in order from the readout bank.
        m.d.comb += [
            self.o.payload.count.eq(readout[pointer]),
            self.o.payload.last.eq(at_last_bin),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += pointer.eq(pointer + 1)
        with m.If(advance & beat.last):
            m.d.sync += [self.o.valid.eq(1), pointer.eq(0)]
        with m.Elif(final_beat):
            m.d.sync += self.o.valid.eq(0)
        return m
