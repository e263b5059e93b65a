"""Narrow bin counters with an overflow spill, for the KLLM Index Distribution Counter
(:class:`hdl.kllm.idx_counter.idx_counter.KllmIdxCounter`, ``counts="spill"``).

Each bin keeps only the low ``narrow_bits`` of its count; a carry out of them is an event
"bin b passed another multiple of ``2**narrow_bits``". A reduction of at most ``max_len``
counted indices has at most ``max_len >> narrow_bits`` such events over all its bins, so they
are kept in a short list of bin numbers instead of ``count_bits - narrow_bits`` more bits in
every bin (twice: accumulators and readout bank). The count of bin b read out is its narrow
count plus ``2**narrow_bits`` times the number of its events.

The events reach the list one per cycle: a pending flag per bin (set by its carry), one slot per
group of 16 bins (the group's lowest pending bin moves there when the slot is empty) and the
lowest full slot drains every cycle (through a register into the list). :func:`spill_shape` picks the narrowest
count for which every event drains before its bin can carry again, so a bin never has two
events outstanding; the one a bin may have outstanding when its reduction ends rides in the
readout bank beside its narrow count (``pending``).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import lowest_one_hot, named, one_hot_index, popcount

__all__ = ["BinSpill", "spill_shape"]

#: Bins per slot (a 16-input priority choice per group).
GROUP = 16


def spill_shape(n_inputs, max_len, count_bits):
    """``(narrow_bits, entries)`` of the narrowest spill for reductions of at most ``max_len``
    counted indices arriving ``n_inputs`` a beat, or None when no narrow count is shorter than
    ``count_bits``.

    ``entries = max_len >> narrow_bits`` bounds the events of a reduction. A bin carries at
    most once a beat (``n_inputs <= 2**narrow_bits``) and, after a carry, not again for
    ``gap = ceil((2**narrow_bits - n_inputs + 1) / n_inputs)`` beats. An event is chosen to
    drain within ``2 * entries`` cycles (at most ``entries - 1`` others are chosen before it,
    and of two consecutive cycles at least one chooses) and leaves its slot a cycle later, so
    ``2 * entries + 1 <= gap`` keeps one event per bin outstanding.
    """
    for narrow in range(1, count_bits):
        if (1 << narrow) < n_inputs:
            continue
        entries = max_len >> narrow
        gap = -(-((1 << narrow) - n_inputs + 1) // n_inputs)
        if 2 * entries + 1 <= gap:
            return narrow, entries
    return None


class BinSpill(wiring.Component):
    """The events of the narrow bins' carries, per reduction, and the high part of a count.

    The lowest full slot drains into a register each cycle, which the list takes a cycle later
    (off the path from the slots to the list). With ``registered`` the readout's comparisons
    are registered too: each list entry's match with the bin read next is computed a cycle
    ahead from the readout's own count of shifts (``shift``), instead of from ``pointer``.

    Members
    -------
    carry : ``In(bins)``
        This cycle's carries out of the narrow counts (already gated by the clock enable).
    end : ``In(1)``
        The reduction ends in this cycle: nothing drains, and the pending flags, slots and
        list restart empty in the next (the reduction's events are in ``pending`` and in the
        list that ``load`` copies).
    load : ``In(1)``
        The readout bank loads in this cycle: the readout list takes the list's next value.
    pending : ``Out(bins)``
        Per bin, an event of the reduction that is not on its way to the list (its pending
        flag, its carry, or its group's slot): the readout bank's extra bit when it loads.
    pointer : ``In(idx_bits)``
        (Without ``registered``.) The bin being read out.
    shift : ``In(1)``
        (With ``registered``.) The readout moves to the next bin in this cycle (bin 0 follows
        ``load``).
    high : ``Out(high_bits)``
        The number of the readout list's events of the bin being read out.
    """

    def __init__(self, *, bins, idx_bits, entries, high_bits, registered=False):
        self.bins = bins
        self.idx_bits = idx_bits
        self.entries = entries
        self.registered = registered
        self.groups = -(-bins // GROUP)
        members = {"carry": In(bins), "end": In(1), "load": In(1), "pending": Out(bins),
                   "high": Out(high_bits)}
        if registered:
            members["shift"] = In(1)
        else:
            members["pointer"] = In(max(1, idx_bits))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bins, groups = self.bins, self.groups
        size = min(GROUP, bins)
        slot_bits = (size - 1).bit_length()
        flags = Signal(bins, name="flags")                    # pending, not in a slot
        full = Signal(groups, name="slot_full")
        slots = [Signal(slot_bits, name=f"slot{g}") for g in range(groups)]

        # The lowest full slot drains: chosen in one cycle (`drain`, from `vacant`, a copy of
        # the slots' state that drives nothing else), read out of its slot into `event` in the
        # next, and appended to the list in the one after. Nothing drains in the cycle a
        # reduction ends; an event chosen just before is then counted in `pending` instead.
        ones = (1 << groups) - 1
        vacant = Signal(groups, name="slot_vacant", init=ones)  # == ~full, kept apart
        chosen = Signal(groups, name="drain")
        m.d.sync += chosen.eq(Mux(self.end, 0, lowest_one_hot(~vacant)))
        event_bin = 0
        for g in range(groups):
            tag = Const(g, self.idx_bits - slot_bits) if groups > 1 else Cat()
            event_bin = event_bin | Mux(chosen[g], Cat(slots[g], tag), 0)
        event = Signal(self.idx_bits, name="event")
        event_valid = Signal(name="event_valid")
        m.d.sync += [event.eq(event_bin), event_valid.eq(chosen.any() & ~self.end)]
        # (`end` empties the slots at the flip-flops, so the slot drained needs no gate by it)
        drain = named(m, lowest_one_hot(full), "draining")

        # An empty slot takes its group's lowest pending bin (a slot chosen in the cycle before
        # is read in this one and written at its end).
        take = []
        for g in range(groups):
            lowest = named(m, lowest_one_hot(flags[g * size:(g + 1) * size]), f"lowest{g}")
            taking = named(m, Mux(full[g], 0, lowest), f"take{g}")
            take.append(taking)
            with m.If(~full[g] & lowest.any()):
                m.d.sync += slots[g].eq(one_hot_index(lowest, slot_bits))
        taken = Cat(*take)
        full_next = named(m, (full & ~drain) | Cat(*(t.any() for t in take)), "slot_full_next")

        with m.If(self.end):
            m.d.sync += [flags.eq(0), full.eq(0), vacant.eq(ones)]
        with m.Else():
            m.d.sync += [flags.eq((flags & ~taken) | self.carry), full.eq(full_next),
                         vacant.eq(~full_next)]

        # Per bin, the event not on its way to the list: its flag, its carry, or its slot
        # (full, or chosen in the cycle before and not yet read).
        in_slot = []
        for b in range(bins):
            g, k = divmod(b, size)
            in_slot.append((full[g] | chosen[g]) & (slots[g] == k))
        m.d.comb += self.pending.eq(flags | self.carry | Cat(*in_slot))

        # The list of this reduction's drained events (a shift register, the newest at the
        # top; past max_len the oldest fall out), and the readout's copy.
        entry_bits = self.idx_bits + 1
        width = self.entries * entry_bits
        current = Signal(width, name="events")
        readout = Signal(width, name="readout_events")
        following = named(m, Mux(event_valid, Cat(current[entry_bits:], event, 1), current),
                          "events_next")
        with m.If(self.end):
            m.d.sync += current.eq(0)
        with m.Else():
            m.d.sync += current.eq(following)
        with m.If(self.load):
            m.d.sync += readout.eq(following)

        def matches(events, bin_):
            out = []
            for e in range(self.entries):
                entry = events[e * entry_bits:(e + 1) * entry_bits]
                out.append(entry[self.idx_bits] & (entry[:self.idx_bits] == bin_))
            return Cat(*out)

        if self.registered:
            head = Signal(self.idx_bits, name="head")          # the bin read out
            match = Signal(self.entries, name="match")
            with m.If(self.load):
                m.d.sync += [head.eq(0), match.eq(matches(following, 0))]
            with m.Elif(self.shift):
                m.d.sync += [head.eq(head + 1), match.eq(matches(readout, head + 1))]
        else:
            match = matches(readout, self.pointer[:self.idx_bits])
        m.d.comb += self.high.eq(popcount(match))
        return m
