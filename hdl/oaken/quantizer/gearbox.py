"""The COO gearbox of the Oaken quantizer (:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`):
the coded beats' compacted, rotated entries are packed into full COO beats (the chunk's
remainder leaves with ``last``) in the two-write COO queue that drives the ``coo`` output.
"""

from amaranth.hdl import Const, Mux, Signal

from ...common.stream_stage import pack_fields
from ..dequantizer.coo import ENTRY_BITS
from .coding import writes_ordered
from .parts import TwoWriteQueue

__all__ = ["COO_QUEUE_DEPTH", "Gearbox"]

#: Entries of the COO queue behind the gearbox (two writes per cycle at most; its level stays
#: at most 2 at full rate).
COO_QUEUE_DEPTH = 8


class Gearbox:
    """The gearbox of ``unit`` (an ``OakenQuantizer``), built into ``m``: it reads the COO
    pre-queue ``pre_queue`` (the words of :func:`~hdl.oaken.quantizer.coding.write_coded`) at
    ``credits.gear`` (driven here: a word is queued and the COO queue has room for its writes
    and for those of the word read before) into a register, and works on that register a
    cycle later.

    Slots below the fill position ``h`` hold the partial beat kept from earlier windows (the
    held entries, updated at every word read), the others take the rotated new entries.
    Write ``a`` is the full beat when the fill wraps (it is the chunk's last when the
    chunk's outlier count is reached), else the chunk's remainder with ``last``; write
    ``b``, at the chunk's final window after a full beat, the remainder with ``last``. Both
    go to the :class:`~hdl.oaken.quantizer.parts.TwoWriteQueue` (``COO_QUEUE_DEPTH``
    entries) that drives ``unit.coo``.

    Attributes
    ----------
    queue : TwoWriteQueue
        The COO queue.
    pre : Signal
        The pre-queue word read (a view of ``unit.pre_layout``; reset-less).
    fetched : Signal
        ``pre`` holds a word read in the previous cycle.
    """

    def __init__(self, m, platform, unit, credits, pre_queue):
        L, lb = unit.lanes, unit.lane_bits
        pq, gear = pre_queue, credits.gear
        # The pre-queue's read is registered (the gearbox works on flip-flops); a beat is read
        # while the COO queue has room for its writes and for those of the beat read before.
        queue = TwoWriteQueue(unit.coo_layout, COO_QUEUE_DEPTH, name="coo_queue")
        m.d.comb += [gear.eq(pq.valid & queue.room4), pq.r_en.eq(gear)]
        pre = Signal(unit.pre_layout, name="gear_in", reset_less=True)
        fetched = Signal(name="gear_valid")
        m.d.sync += [pre.eq(pq.r_data), fetched.eq(gear)]
        held_entries = [Signal(ENTRY_BITS, name=f"gear_held_{s}", reset_less=True)
                        for s in range(L)]
        # Slots below h hold the partial beat kept from earlier windows; the rotated new
        # entries fill the others and, past the end of the beat, wrap into the next one.
        entries_a, entries_b = [], []
        for s in range(L):
            below, new = pre.below[s], pre.entries[s]
            entry_a = Signal(ENTRY_BITS, name=f"gear_full_{s}")
            entry_b = Signal(ENTRY_BITS, name=f"gear_wrapped_{s}")
            m.d.comb += [
                entry_a.eq(Mux(below, held_entries[s], new)),
                entry_b.eq(Mux(below, new, 0)),
            ]
            with m.If(fetched):
                m.d.sync += held_entries[s].eq(Mux(below & ~pre.wrap, held_entries[s], new))
            entries_a.append(entry_a)
            entries_b.append(entry_b)
        remainder = Signal(L.bit_length(), name="gear_rest_count")
        count_a = Signal(L.bit_length(), name="gear_count_a")
        m.d.comb += [remainder.eq(pre.pcount if lb else 0),
                     count_a.eq(Mux(pre.wrap, L, remainder))]
        # Beat a: the full beat (wrap), else the chunk's remainder; beat b: the remainder after
        # a full beat at the chunk's final window.
        data_a = pack_fields(unit.coo_layout, {"entries": entries_a, "count": count_a,
                                               "last": Mux(pre.wrap, pre.full_last, 1)})
        data_b = pack_fields(unit.coo_layout, {"entries": entries_b, "count": remainder,
                                               "last": Const(1, 1)})
        queue.elaborate_into(m, unit.coo, write_a=fetched & pre.write_a, data_a=data_a,
                             write_b=fetched & pre.write_b, data_b=data_b, platform=platform)
        self.queue, self.pre, self.fetched = queue, pre, fetched

    def conditions(self):
        """The gearbox's invariants, for the credits'
        (:meth:`~hdl.oaken.quantizer.credits.Credits.check`): a word is read only with room in
        the COO queue for its writes, and the word read writes ``b`` only with ``a``."""
        return [~self.fetched | (self.queue.level <= COO_QUEUE_DEPTH - 2),
                writes_ordered(self.pre)]
