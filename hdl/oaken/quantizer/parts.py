"""Pieces of the Oaken quantizer (:class:`hdl.oaken.quantizer.quantizer.OakenQuantizer`): the exact
division by 15 of the metadata step, the chunk min/max trees, the 4-bit code by binary search
over Oaken's code boundaries, the zero-remove shifter of the COO entries and its rotation, and
the two-write COO queue behind the gearbox.

Every function builds combinational logic in the module ``m`` it is given; ``stage`` arguments
are callables ``(value, name) -> value`` that register a value (a pipeline cut) or return it
unchanged, so that one code path serves every ``pipeline`` depth.
"""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, signed
from amaranth.lib.memory import Memory

from ...common.invariants import invariant

__all__ = ["div15_plan", "div15_reference", "divide_by_15", "pair_leaves", "min_max_tree",
           "code_step", "prefix_count", "LutQueue",
           "compact", "rotate", "select_by_group", "TwoWriteQueue"]

#: ``e = 15 m - 2^P`` for the multiplier ``m = (2^P + 14) / 15`` of :func:`div15_plan`.
_DIV15_ERROR = 14


def div15_plan(n_max):
    """The multiply-shift that divides every ``0 <= n <= n_max`` by 15 exactly.

    ``floor(n / 15) == (n * (R + 1)) >> P`` with ``P = 4 * 2^j`` and ``R = (2^P - 1) / 15 =
    0x11...1`` (``P / 4`` hexadecimal ones), ``j`` the least with ``14 * n_max < 2^P``.
    ``n * R`` is built as ``x <- x + (x << s)`` for ``s`` in ``shifts`` (``4, 8, 16, ...``:
    ``R = (1 + 2^4)(1 + 2^8)(1 + 2^16)...``), so no multiplier is needed.

    Exactness: ``n (R + 1) / 2^P = n / 15 + 14 n / (15 * 2^P)``. With ``n / 15 = a + b / 15``
    (``0 <= b <= 14``) and ``14 n < 2^P`` the second term is below ``1/15``, so the value lies
    in ``[a, a + 1)`` and its floor is ``a``.

    Returns
    -------
    (int, tuple of int)
        ``P`` and the shifts.
    """
    j = 0
    while _DIV15_ERROR * n_max >= 1 << (4 << j):
        j += 1
    return 4 << j, tuple(4 << i for i in range(j))


def div15_reference(n, plan):
    """``floor(n / 15)`` computed the way :func:`divide_by_15` builds it (Python integers or a
    NumPy integer array; for checking the plan)."""
    total, shifts = plan
    x = n
    for shift in shifts:
        x = x + (x << shift)
    return (x + n) >> total


def divide_by_15(m, n, n_max, *, stage, name):
    """``floor(n / 15)`` for an unsigned ``n <= n_max`` (see :func:`div15_plan`), one adder per
    shift and a final one; ``stage`` is applied after every adder but the last. Returns the
    quotient (combinational after the last ``stage``), ``len(n)`` bits."""
    total, shifts = div15_plan(n_max)
    x, carried = n, n
    for k, shift in enumerate(shifts):
        # x + (x << s): the low s bits are x's own, the adder covers the rest.
        summed = Signal(len(x) + shift + 1, name=f"{name}_x{k + 1}")
        m.d.comb += summed.eq(Cat(x[:shift], (x >> shift) + x))
        x = stage(summed, f"{name}_x{k + 1}_r")
        carried = stage(carried, f"{name}_n{k + 1}_r")
    quotient = Signal(len(n), name=f"{name}_q")
    m.d.comb += quotient.eq((x + carried) >> total)
    return quotient


def pair_leaves(m, values, members, *, top, bottom, stage, name):
    """The first level of the per-group min/max trees, for every group at once: the lanes in
    pairs, one comparator per pair (``values`` are signed), then ``stage`` (on the
    comparisons, the values and the membership bits); per group (``members``: group code ->
    the lanes' membership bits) the pair's minimum and maximum over its members, ``top`` /
    ``bottom`` when neither lane is a member. Returns ``{code: (minima, maxima)}``, one value
    per pair (a single lane: its own value, or the neutral one)."""
    below = []
    for k in range(0, len(values) - 1, 2):
        lt = Signal(name=f"{name}_lt{k // 2}")
        m.d.comb += lt.eq(values[k] < values[k + 1])
        below.append(stage(lt, f"{name}_lt{k // 2}_r"))
    if below:
        values = [stage(v, f"{name}_v{k}_r") for k, v in enumerate(values)]
        members = {code: [stage(b, f"{name}_m{code}_{k}_r") for k, b in enumerate(bits)]
                   for code, bits in members.items()}
    result = {code: ([], []) for code in members}
    for k in range(0, len(values), 2):
        a = values[k]
        pair = k + 1 < len(values)
        b = values[k + 1] if pair else None
        for code, bits in members.items():
            in_a = bits[k]
            in_b = bits[k + 1] if pair else 0
            for kind, neutral in (("min", top), ("max", bottom)):
                keep_a = (below[k // 2] if kind == "min" else ~below[k // 2]) if pair else 1
                take_a = Signal(name=f"{name}_{kind}{code}_a{k // 2}")
                chosen = Signal.like(a, name=f"{name}_{kind}{code}_{k // 2}")
                m.d.comb += [
                    take_a.eq(in_a & (~in_b | keep_a)),
                    chosen.eq(Mux(take_a, a, Mux(in_b, b, neutral) if pair else neutral)),
                ]
                result[code][0 if kind == "min" else 1].append(chosen)
    return result


def min_max_tree(m, leaves, *, minimum, cut_levels, stage, name, first_level=1,
                 split_levels=()):
    """Reduce ``leaves`` (signed values of one width) to their minimum (``minimum``) or maximum
    with a balanced tree of comparators; ``stage`` registers every value after the levels in
    ``cut_levels`` (the first row of comparators is level ``first_level``). At the levels in
    ``split_levels`` the comparisons and both operands (and an unpaired value) are registered
    before the selection, so that a comparison's carry chain and the selection's multiplexers
    are in different cycles. Returns the result."""
    values = list(leaves)
    level = first_level - 1
    while len(values) > 1:
        level += 1
        split = level in split_levels
        paired = []
        for k in range(0, len(values) - 1, 2):
            a, b = values[k], values[k + 1]
            takes_a = (a < b) if minimum else (a > b)
            if split:
                a, b, takes_a = (stage(v, f"{name}_l{level}_{side}{k // 2}_r")
                                 for side, v in (("a", a), ("b", b), ("takes_a", takes_a)))
            chosen = Signal.like(a, name=f"{name}_l{level}_{k // 2}")
            m.d.comb += chosen.eq(Mux(takes_a, a, b))
            paired.append(chosen)
        if len(values) % 2:
            odd = values[-1]
            paired.append(stage(odd, f"{name}_l{level}_odd_r") if split else odd)
        values = paired
        if level in cut_levels:
            values = [stage(v, f"{name}_l{level}_{k}_r") for k, v in enumerate(values)]
    return values[0]


def code_step(m, r, span, previous, shift, *, name):
    """One step of Oaken's 4-bit code by binary search (combinational).

    The code ``floor((30 (v - min) + span) / (2 span))`` is the number of ``k`` in 1..15 with
    ``30 (v - min) >= (2k - 1) span``, a condition monotone in ``k``, so four comparisons find
    it instead of a divider. Step 1 tests ``k = 8``: ``r = 15 (2 v - (min + max)) = 30 (v -
    min) - 15 span`` and code bit 3 is ``r >= 0``; each next step moves the tested ``k`` by 4, 2,
    1 codes up (bit was 1) or down: ``r - (span << shift)`` or ``r + (span << shift)`` with
    ``shift`` 3, 2, 1, and the next bit is the new ``r >= 0``. This returns the moved ``r``
    (the width of ``r``: ``|r| <= 29 span``) from the tested ``r``, the group's ``span`` and
    the ``previous`` bit."""
    moved = Signal.like(r, name=name)
    step = span << shift
    m.d.comb += moved.eq(Mux(previous, r - step, r + step))
    return moved


def prefix_count(m, counts, *, width, levels, name):
    """Inclusive prefix sums of ``counts`` (Sklansky): after level ``k`` every element whose
    index has bit ``k`` set adds the sum of the lower half of its block of ``2^(k+1)``. Apply
    the levels listed in ``levels`` (all of ``range(log2 len)``, in order, over one or more
    calls); returns the sums, ``width`` bits each."""
    sums = []
    for k, count in enumerate(counts):
        value = Signal(width, name=f"{name}_in{k}")
        m.d.comb += value.eq(count)
        sums.append(value)
    for level in levels:
        step = []
        for k, value in enumerate(sums):
            if (k >> level) & 1:
                added = Signal(width, name=f"{name}_l{level}_{k}")
                m.d.comb += added.eq(value + sums[((k >> level) << level) - 1])
                step.append(added)
            else:
                step.append(value)
        sums = step
    return sums


def compact(m, entries, flags, shifts, *, levels, name):
    """Zero-remove shifter (Oaken section 5.2): move every flagged entry down by its shift (the
    number of unflagged lanes below it), least significant shift bit first, over ``levels``
    (the shift bits to apply now, in order). Returns ``(entries, flags, shifts)`` after those
    levels; unflagged slots hold 0.

    No two flagged entries ever meet: after the bits below ``b`` are applied, entries ``i < j``
    sit at ``i - (z_i mod 2^b)`` and ``j - (z_j mod 2^b)`` with ``0 <= z_j - z_i < j - i``, so
    their distance ``j - i - ((z_j mod 2^b) - (z_i mod 2^b))`` is positive.
    """
    count = len(entries)
    for bit in levels:
        step = 1 << bit
        moved_entries, moved_flags, moved_shifts = [], [], []
        for p in range(count):
            stay = flags[p] & ~shifts[p][bit]
            come = (flags[p + step] & shifts[p + step][bit]) if p + step < count else Const(0, 1)
            entry = Signal.like(entries[p], name=f"{name}_b{bit}_e{p}")
            flag = Signal(name=f"{name}_b{bit}_f{p}")
            shift = Signal.like(shifts[p], name=f"{name}_b{bit}_s{p}")
            above = entries[p + step] if p + step < count else 0
            above_shift = shifts[p + step] if p + step < count else 0
            m.d.comb += [
                entry.eq(Mux(stay, entries[p], 0) | Mux(come, above, 0)),
                flag.eq(stay | come),
                shift.eq(Mux(come, above_shift, shifts[p])),
            ]
            moved_entries.append(entry)
            moved_flags.append(flag)
            moved_shifts.append(shift)
        entries, flags, shifts = moved_entries, moved_flags, moved_shifts
    return entries, flags, shifts


def rotate(m, entries, amount, *, levels, name):
    """Rotate ``entries`` up by ``amount`` slots (slot ``s`` to ``(s + amount) mod len``),
    applying the bits of ``amount`` listed in ``levels``. Returns the entries."""
    count = len(entries)
    for bit in levels:
        step = 1 << bit
        rotated = []
        for s in range(count):
            entry = Signal.like(entries[s], name=f"{name}_b{bit}_e{s}")
            m.d.comb += entry.eq(Mux(amount[bit], entries[(s - step) % count], entries[s]))
            rotated.append(entry)
        entries = rotated
    return entries


class TwoWriteQueue:
    """A queue of ``depth`` entries taking up to two per cycle (``a``, then ``b``) and giving
    one per cycle on a stream. The entries live in two LUT-RAM banks (even and odd slots), so
    that the two writes of a cycle go to different banks, one write port each; the head entry
    is an asynchronous read. ``valid`` and :attr:`room2` are flip-flops. Build it with
    :meth:`elaborate_into`.

    Attributes
    ----------
    room4 : Signal
        At least four entries are free (a flip-flop: no path from the consumer): room for the
        writes of two cycles.
    level : Signal
        Entries held, 0..``depth`` (created by :meth:`elaborate_into`).
    """

    def __init__(self, layout, depth, *, name):
        self.layout = layout
        self.depth = depth
        self.name = name
        self.room4 = Signal(name=f"{name}_room4", init=1)

    def elaborate_into(self, m, out, *, write_a, data_a, write_b, data_b, platform=None):
        """Drive the stream ``out`` (producer side) from the queue; ``write_b`` implies
        ``write_a``; the caller starts a write (a cycle ahead) only while :attr:`room4` is
        high. ``platform``: the elaborating platform (a proof's adds the queue's invariants,
        :mod:`hdl.common.invariants`; :attr:`level` is the occupancy, for the caller's)."""
        depth, name = self.depth, self.name
        assert depth >= 8 and depth & (depth - 1) == 0, "the queue depth is a power of two"
        width = len(Signal(self.layout).as_value())
        head = Signal(range(depth), name=f"{name}_head")
        tail = Signal(range(depth), name=f"{name}_tail")
        second = Signal(range(depth), name=f"{name}_tail1")
        self.level = level = Signal(range(depth + 1), name=f"{name}_level")
        valid = Signal(name=f"{name}_valid")
        m.d.comb += second.eq(tail + 1)
        reads = []
        for bank in (0, 1):
            memory = Memory(shape=width, depth=depth // 2, init=[])
            m.submodules[f"{name}_bank{bank}"] = memory
            write, read = memory.write_port(), memory.read_port(domain="comb")
            takes_a = tail[0] == bank               # entry a goes to the bank of the tail slot
            m.d.comb += [
                write.addr.eq(Mux(takes_a, tail[1:], second[1:])),
                write.data.eq(Mux(takes_a, data_a, data_b)),
                write.en.eq(Mux(takes_a, write_a, write_b)),
                read.addr.eq(head[1:]),
            ]
            reads.append(read.data)
        read_out = out.valid & out.ready
        written = Signal(range(3), name=f"{name}_written")
        m.d.comb += written.eq(Cat(write_a & ~write_b, write_b))
        m.d.sync += [
            tail.eq(tail + written),
            head.eq(head + read_out),
            level.eq(level + written - read_out),
        ]
        # The next valid and room4, chosen among comparisons of the level register by the
        # writes and the read (no adder on the path from them).
        fits = {}
        for w in range(3):
            for r in range(2):
                fit = Signal(name=f"{name}_fits{w}{r}")
                m.d.comb += fit.eq(level <= depth - 4 - w + r)
                fits[w, r] = fit
        several, one = Signal(name=f"{name}_several"), Signal(name=f"{name}_one")
        m.d.comb += [several.eq(level > 1), one.eq(level == 1)]

        def by_read(w):
            return Mux(read_out, fits[w, 1], fits[w, 0])

        m.d.sync += [
            valid.eq(write_a | several | (one & ~read_out)),
            self.room4.eq(Mux(write_b, by_read(2), Mux(write_a, by_read(1), by_read(0)))),
        ]
        m.d.comb += [
            out.valid.eq(valid),
            out.payload.eq(Mux(head[0], reads[1], reads[0])),
        ]
        # The tail is ``level`` slots after the head, ``valid`` says the queue is not empty,
        # ``room4`` is the level's comparison.
        invariant(m, platform, level <= depth, valid == (level != 0),
                  tail == (head + level)[:len(tail)], self.room4 == (level <= depth - 4),
                  name=f"{name}_invariant")


def select_by_group(group, values):
    """``values[group]`` for a 2-bit group code (0 middle, 1 inner, 2 outer), as two
    multiplexers (combinational)."""
    middle, inner, outer = values
    return Mux(group[1], outer, Mux(group[0], inner, middle))



class LutQueue(Elaboratable):
    """A first-in first-out queue of ``depth`` entries in LUT RAM (an asynchronous read of the
    entry at the read pointer). It has no full flag: the unit's credits guarantee that it is
    never written when full, and that it is read only when it holds an entry.

    With ``track`` it keeps its occupancy and offers ``valid`` (a flip-flop: high when it holds
    an entry), for a stream whose consumer decides when to read. ``entry`` (a function of an
    entry's bits giving a condition) is asserted of every slot in the proofs
    (:mod:`hdl.common.invariants`): a relation between fields that every write keeps.

    Attributes
    ----------
    w_en, w_data : Signal
        Write the entry ``w_data`` (at the end of the cycle; readable the next one).
    r_en : Signal
        Drop the entry at the read pointer (``r_data``).
    valid : Signal
        (With ``track``) the queue holds an entry.
    level : Signal
        (With ``track``) entries held, 0..``depth``.
    """

    def __init__(self, *, width, depth, track=False, entry=None):
        assert depth >= 1
        self.width, self.depth, self.track, self.entry = width, depth, track, entry
        self.w_en = Signal()
        self.w_data = Signal(width)
        self.r_en = Signal()
        self.r_data = Signal(width)
        self.valid = Signal()
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        m.submodules.storage = storage = Memory(shape=self.width, depth=depth, init=[])
        write = storage.write_port()
        read = storage.read_port(domain="comb")
        produce = Signal(range(depth))
        consume = Signal(range(depth))

        def advance(pointer):
            return Mux(pointer == depth - 1, 0, pointer + 1)

        m.d.comb += [
            write.addr.eq(produce), write.data.eq(self.w_data), write.en.eq(self.w_en),
            read.addr.eq(consume), self.r_data.eq(read.data),
        ]
        with m.If(self.w_en):
            m.d.sync += produce.eq(advance(produce))
        with m.If(self.r_en):
            m.d.sync += consume.eq(advance(consume))
        if self.track:
            level = self.level
            m.d.sync += level.eq(level + self.w_en - self.r_en)
            # valid after this cycle, from flags of the level register (one LUT level).
            many, one = Signal(), Signal()
            m.d.comb += [many.eq(level > 1), one.eq(level == 1)]
            m.d.sync += self.valid.eq(self.w_en | many | (one & ~self.r_en))
            # The pointers are ``level`` apart, and ``valid`` says the queue is not empty.
            ahead = consume + level
            invariant(m, platform, level <= depth, consume < depth, self.valid == (level != 0),
                      produce == Mux(ahead >= depth, ahead - depth, ahead))
        if self.entry is not None and getattr(platform, "formal", False):
            slots = [storage.read_port(domain="comb") for _ in range(depth)]
            m.d.comb += [port.addr.eq(k) for k, port in enumerate(slots)]
            invariant(m, platform, *(self.entry(port.data) for port in slots),
                      name="entry_invariant")
        return m
