"""Readout control of the KLLM Index Distribution Counter
(:class:`hdl.kllm.idx_counter.idx_counter.KllmIdxCounter`), one function per arrangement of its banks
(``bank_kind``): when a reduction's sums enter the bank that is read out, and how the bank
sends them on ``source`` (``o``, or the skid buffer in front of it), one bin per beat.

Each function takes the counter, the module ``m`` to build in, the counter's front pipeline
``front`` and its ``contrib`` stream (valid: the beat at the accumulators ends a reduction),
the bins' ``parts`` (:class:`~hdl.kllm.idx_counter.bins.BinCounters`), ``source`` and the
``busy`` flag (the bank holds a histogram not yet sent).
"""

from amaranth.hdl import Array, Mux, Signal

from ...common.invariants import invariant

__all__ = ["direct_banks", "pipelined_banks", "single_bank"]

_KEEP = {"keep": 1}


def direct_banks(counter, m, front, contrib, parts, source, busy):
    """Control of the banks without cuts (``pipeline=0``, the lowest latency).

    ``sum = (fresh ? 0 : acc) + contribution`` loads the accumulators at every front clock
    enable and, at the end of a reduction, the readout bank
    (:class:`~hdl.kllm.idx_counter.bins.BinCounters`); a ``2**idx_bits``:1 multiplexer
    addressed by ``pointer`` drives ``o``. The bank is free when it is idle or its final bin
    leaves in this cycle.
    """
    fresh = Signal(init=1)        # acc holds nothing of the current reduction yet
    pointer = Signal(counter.idx_bits)
    at_last_bin = Signal()
    final_beat = Signal()
    low = len(parts[0].pointer)
    count = (parts[0].count if len(parts) == 1
             else Array(part.count for part in parts)[pointer[low:]])
    m.d.comb += [
        at_last_bin.eq(pointer == counter.bins - 1),
        final_beat.eq(source.valid & source.ready & at_last_bin),
        contrib.ready.eq(~busy | final_beat),
        source.valid.eq(busy),
        source.payload.last.eq(at_last_bin),
    ]
    _count(counter, m, source, count)
    end_of_reduction = contrib.valid & contrib.ready
    for part in parts:
        m.d.comb += [part.fresh.eq(fresh), part.load.eq(end_of_reduction),
                     part.pointer.eq(pointer[:low])]
    with m.If(front.ce):
        m.d.sync += fresh.eq(end_of_reduction)
    with m.If(source.valid & source.ready):
        m.d.sync += pointer.eq(pointer + 1)
    with m.If(end_of_reduction):
        m.d.sync += [busy.eq(1), pointer.eq(0)]
    with m.Elif(final_beat):
        m.d.sync += busy.eq(0)


def _count(counter, m, source, slot):
    """``source``'s ``count`` (and ``overflow``, the sticky flag above it) from a bin's slot."""
    m.d.comb += source.payload.count.eq(slot[:counter.count_bits])
    if counter.overflow:
        m.d.comb += source.payload.overflow.eq(slot[counter.count_bits])


def _chain(m, parts):
    """Bin 0 of each part's bank shifts into the top bin of the part below it."""
    for below, above in zip(parts, parts[1:]):
        m.d.comb += below.shift_in.eq(above.count)


def pipelined_banks(counter, m, front, contrib, parts, source, busy, bank_held, platform):
    """Control of the banks with the readout cut (``pipeline >= 1``).

    * The readout bank is a shift register read at bin 0 (no wide multiplexer) behind a
      skid buffer (``source`` -> ``o``), so ``o.ready`` reaches no clock enable.
    * The `last` beat loads the sums into the readout bank and clears the accumulators: the
      clear is ``acc_clear``, a copy of the ``bank_load`` flip-flop (``contrib.valid &
      bank_free``, the cycles in which the `last` beat leaves the front) that is high after a
      reset (the accumulators' only reset), a synchronous reset over the accumulators' clock
      enable.
    * The decisions that fan out to a thousand flip-flops come from flip-flops: whether the
      bank is free (``bank_free``: it enters the front's clock enable), whether it loads
      (``bank_load``, its select) and whether it changes at all (``bank_enable``, its clock
      enable). Each is computed one cycle ahead from the next state of the control flops,
      the skid buffer's ``i.ready`` included (from its stream contract: it stays high
      while the buffer's output register is free or drains, and drops after a beat arrives
      while it is held).
    """
    pointer = Signal(counter.idx_bits)
    at_last_bin = Signal()        # readout[0] holds the final bin
    bank_free = Signal(init=1)    # == ~busy | (source.ready & at_last_bin)
    bank_load = Signal()          # == contrib.valid & bank_free
    bank_enable = Signal()        # == bank_load | (busy & source.ready)
    # == bank_load but in the cycle after a reset, where it clears the accumulators (their
    # reset); its reset value keeps synthesis from merging it with bank_load.
    acc_clear = Signal(init=1)

    # bank_free enters the front's clock enable (a net of high fan-out, long routes); the
    # control's next state and the counter's i.ready read its inverted copy `bank_held`
    # instead (the caller's signal), a flip-flop of low fan-out (inverted so that synthesis
    # does not merge the two).
    free_here = ~bank_held

    # pointer == bins - 2, a flip-flop (the comparison fed at_last_next, on the path to the
    # bank's enable: measured 142 MHz on ECP5 in kllm_column with it there).
    penultimate = Signal(init=int(counter.bins == 2))

    transfer = source.valid & source.ready
    m.d.comb += [
        contrib.ready.eq(bank_free),
        source.valid.eq(busy),
        source.payload.last.eq(at_last_bin),
    ]
    _count(counter, m, source, parts[0].count)
    # `contrib.valid` selects the clear of every accumulator (a net of high fan-out); the
    # control reads its inverted copy `contrib_idle` instead, a flip-flop of low fan-out
    # (measured at 128 bins: 143 MHz from `contrib.valid` through the control to the front's
    # enable flop).
    contrib_idle = Signal(init=1)
    here = ~contrib_idle
    end_of_reduction = here & free_here

    # Next state of the control flops. The readout's and the skid buffer's part comes first,
    # as named signals kept through synthesis (`keep`): the flops of the front (`here`,
    # `bank_held`, front.valid[-2]) then enter one LUT before each control flop. Without
    # the names ABC shares partial terms across the flops and the path from `contrib_idle`
    # to `bank_enable` took five LUTs (kllm_column at kllm-a3 on ECP5: 6.7 ns, 149 MHz).
    ready_next = Signal(attrs=_KEEP)  # the skid buffer's i.ready in the next cycle
    stay = Signal(attrs=_KEEP)        # busy in the next cycle, unless a reduction ends now
    keep_last = Signal()              # at_last_bin in the next cycle, unless one ends now
    free_later = Signal(attrs=_KEEP)  # bank_free in the next cycle, unless one ends now
    m.d.comb += [
        ready_next.eq(~counter.o.valid | counter.o.ready | (source.ready & ~busy)),
        stay.eq(busy & ~(source.ready & at_last_bin)),
        keep_last.eq(Mux(transfer, penultimate, at_last_bin)),
        free_later.eq(~stay | (ready_next & keep_last)),
    ]
    busy_next = end_of_reduction | stay
    at_last_next = ~end_of_reduction & keep_last
    # contrib.valid in the next cycle (the front's valid chain): it advances unless the
    # `last` beat at its end waits (written without `front.ce`, a net of high fan-out, so
    # that this is one LUT of flip-flops).
    last_beat_next = front.valid[-2] | (here & bank_held)
    free_next = ~end_of_reduction & free_later
    # A `last` beat at the front's end in the next cycle, and no reduction ends now (kept:
    # else synthesis builds load_next from free_next, a LUT placed near the front's clock
    # enable it also feeds, far from the bank's control: measured 135 MHz at one seed).
    going = Signal(attrs=_KEEP)
    m.d.comb += going.eq(last_beat_next & ~end_of_reduction)
    load_next = going & free_later
    clear_next = load_next
    contrib_busy = None
    if "distribute" in counter.cuts:
        # (pipeline 4, the bins spread wider) bank_load and acc_clear from their own copy of
        # load_next, one LUT of flip-flops and `free_later`: from `contrib_busy`, a copy of
        # contrib_idle inverted (so that synthesis merges neither the flops nor their LUTs);
        # load_next's LUT then feeds bank_enable only. Measured on kllm_column at kllm-a4
        # (docs/units/kllm_column.md, Measurements): with one LUT for all three, seeds at
        # 152.6 / 127.4 / 151.7 MHz, the slow one limited by that LUT's route to acc_clear;
        # with acc_clear's own LUT of the same inputs, 124.8 (median).
        contrib_busy = Signal()
        going_c = ((front.valid[-2] | (contrib_busy & bank_held))
                   & ~(contrib_busy & free_here))
        clear_next = going_c & free_later
        m.d.sync += contrib_busy.eq(last_beat_next)
    # The front's clock enable in the next cycle: ~contrib.valid | contrib.ready.
    m.d.comb += front.ce_next.eq(~last_beat_next | free_next)
    m.d.sync += [
        busy.eq(busy_next),
        at_last_bin.eq(at_last_next),
        contrib_idle.eq(~last_beat_next),
        bank_free.eq(free_next),
        bank_held.eq(~free_next),
        bank_load.eq(clear_next),
        acc_clear.eq(clear_next),
        bank_enable.eq(Mux(end_of_reduction, ready_next, load_next | (stay & ready_next))),
    ]
    with m.If(end_of_reduction):
        m.d.sync += [pointer.eq(0), penultimate.eq(counter.bins == 2)]
    with m.Elif(transfer):
        m.d.sync += [pointer.eq(pointer + 1),
                     penultimate.eq(pointer == counter.bins - 3 if counter.bins > 2 else 0)]
    # The spill's copy of acc_clear (its slots and lists, away from the accumulators' clear;
    # inverted so that synthesis does not merge the two).
    spill_run = Signal()
    if counter.counts == "spill":
        m.d.sync += spill_run.eq(~load_next)
    for part in parts:
        m.d.comb += [part.clear.eq(acc_clear), part.bank_enable.eq(bank_enable),
                     part.bank_load.eq(bank_load)]
        if counter.counts == "spill":
            m.d.comb += part.spill_end.eq(~spill_run)
    _chain(m, parts)
    held = [contrib_idle == ~contrib.valid, front.ce == front.advance,
            bank_load == (contrib.valid & bank_free), acc_clear | ~bank_load]
    if contrib_busy is not None:
        held.append(contrib_busy == contrib.valid)
    if counter.counts == "spill":
        held.append(spill_run == ~acc_clear)
    invariant(m, platform, *held, name="bank_control")


def single_bank(counter, m, front, contrib, parts, source, busy):
    """Control of one bank (``banks=1``): the accumulators are read out themselves.

    The `last` beat's sums stay in the accumulators, which then shift towards bin 0 (read
    at ``o``, or at the skid buffer with the readout cut) one bin per transfer, zeros
    entering at the top: after the final bin they hold zeros, the start of the next
    reduction. While the bank is busy the whole front holds (``busy`` is its ``hold``),
    so ``i.ready`` is low; it resumes in the cycle after the final bin leaves.
    """
    pointer = Signal(counter.idx_bits)
    at_last_bin = Signal()        # acc[0] holds the final bin
    transfer = source.valid & source.ready
    end_of_reduction = contrib.valid & front.ce
    m.d.comb += [
        contrib.ready.eq(1),
        source.valid.eq(busy),
        source.payload.last.eq(at_last_bin),
    ]
    _count(counter, m, source, parts[0].count)
    for part in parts:
        m.d.comb += part.shift.eq(transfer)
    _chain(m, parts)
    with m.If(end_of_reduction):
        m.d.sync += [busy.eq(1), pointer.eq(0), at_last_bin.eq(0)]
    with m.Elif(transfer):
        m.d.sync += [pointer.eq(pointer + 1), at_last_bin.eq(pointer == counter.bins - 2)]
        with m.If(at_last_bin):
            m.d.sync += busy.eq(0)
