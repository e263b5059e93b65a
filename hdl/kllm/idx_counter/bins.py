"""The bins of the KLLM Index Distribution Counter
(:class:`hdl.kllm.idx_counter.idx_counter.KllmIdxCounter`; KLLM IV-B): per lane the one-hot plane over the
bins, the bit counters (4-lane partial sums on bit planes, then the per-bin adder tree), the
accumulators and the readout bank."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...common.arith import adder_tree, named
from ...common.stream_stage import enabled_register
from .spill import BinSpill

#: The rest are internals of :mod:`hdl.kllm.idx_counter.idx_counter`, which imports them.
__all__ = ["DISTRIBUTE_GROUPS", "distribute_fits"]

#: With the ``distribute`` cut (the counter's ``pipeline`` 4), the groups of bins (by value of
#: the high index chunk) that each get their own copy of the low-chunk lines.
DISTRIBUTE_GROUPS = 4


def distribute_fits(mode, idx_bits, counts):
    """Whether the ``distribute`` cut (the counter's ``pipeline`` 4) applies to a counter of
    these parameters: kk mode, flip-flop counts, two index chunks whose high one has a multiple
    of :data:`DISTRIBUTE_GROUPS` lines (6..8 index bits)."""
    return mode == "kk" and counts == "full" and 6 <= idx_bits <= 8


def distributed_lines(front, m, lines, sizes, n):
    """The ``distribute`` cut: per lane, per group of bins (by value of the high chunk), a copy
    of the low-chunk ``lines``, gated by the OR of the group's high lines (the plane ANDs them
    anyway: each copy has its own input, so Yosys's ``opt_merge`` keeps them apart), and one
    copy of the high lines; registered as one more stage of ``front`` (in module ``m``).
    Returns the lines in :class:`BinCounters`' ``groups`` layout and the number of groups."""
    lo_n, hi_n = sizes
    per = hi_n // DISTRIBUTE_GROUPS
    line_bits = lo_n + hi_n
    copies = []
    for lane in range(n):
        low = lines[lane * line_bits:lane * line_bits + lo_n]
        high = lines[lane * line_bits + lo_n:(lane + 1) * line_bits]
        for g in range(DISTRIBUTE_GROUPS):
            near = high[g * per:(g + 1) * per].any()
            copies.append(front.stage(low & near.replicate(lo_n), name=f"dist_lo_{lane}_{g}",
                                      m=m))
        copies.append(front.stage(high, name=f"dist_hi_{lane}", m=m))
    return Cat(*copies), DISTRIBUTE_GROUPS


def bin_blocks(m, keep, names):
    """The modules of the blocks ``names``: new submodules of ``m`` with ``keep`` (the area
    split), else ``m`` itself for each."""
    if not keep:
        return [m] * len(names)
    blocks = []
    for name in names:
        m.submodules[name] = block = Module()
        blocks.append(block)
    return blocks


def _count_planes(m, planes, name):
    """Bit planes (least significant first) of the number of set planes among up to 4 one-bit
    ``planes``, bin by bin: a 4:3 counter on whole vectors (combinational)."""
    net = named
    if len(planes) == 1:
        return planes
    if len(planes) == 2:
        a, b = planes
        return [net(m, a ^ b, f"{name}_s0"), net(m, a & b, f"{name}_s1")]
    if len(planes) == 3:
        a, b, c = planes
        x = net(m, a ^ b, f"{name}_x")
        return [net(m, x ^ c, f"{name}_s0"), net(m, (a & b) | (x & c), f"{name}_s1")]
    a, b, c, d = planes
    x, y = net(m, a ^ b, f"{name}_x"), net(m, c ^ d, f"{name}_y")
    p, q = net(m, a & b, f"{name}_p"), net(m, c & d, f"{name}_q")
    t = net(m, x & y, f"{name}_t")
    # a + b + c + d = (x ^ y) + 2 (p + q + t), and p + q + t <= 2 (p excludes t, q too).
    return [net(m, x ^ y, f"{name}_s0"), net(m, p ^ q ^ t, f"{name}_s1"),
            net(m, (p & q) | (t & (p | q)), f"{name}_s2")]


def _group_sum_width(weight_bits, lanes):
    """Width of the weighted sum of a group of ``lanes`` (two's complement)."""
    return weight_bits + (len(lanes) - 1).bit_length()


def weights_carried(m, lines, weights, lanes, sizes, weight_bits, name, eq=None):
    """The weight each lane of a group carries (combinational, one signal per lane, signed,
    :func:`_group_sum_width` bits): the first lane of each distinct counted index (its leader)
    carries the sum of the weights of the group's lanes with that index, the others 0. Two
    lanes count the same index when every chunk of their predecode lines overlaps (a masked
    lane overlaps none), or as ``eq[(a, b)]`` says when given (lanes ``a < b``)."""
    wb = weight_bits
    line_bits = sum(sizes)

    def same_index(a, b):
        terms, base = [], 0
        for size in sizes:
            lo_a, lo_b = a * line_bits + base, b * line_bits + base
            terms.append((lines[lo_a:lo_a + size] & lines[lo_b:lo_b + size]).any())
            base += size
        return named(m, Cat(*terms).all(), f"{name}_eq{a}_{b}")

    weight = {lane: weights[lane * wb:(lane + 1) * wb].as_signed() for lane in lanes}
    if eq is None:
        eq = {(a, b): same_index(a, b) for i, a in enumerate(lanes) for b in lanes[i + 1:]}
    width = _group_sum_width(wb, lanes)
    carried = []
    for i, lane in enumerate(lanes):
        total = adder_tree([weight[lane]] + [Mux(eq[(lane, other)], weight[other], 0)
                                             for other in lanes[i + 1:]])
        if i:
            leader = ~Cat(*(eq[(other, lane)] for other in lanes[:i])).any()
            total = Mux(leader, total, 0)
        signal = Signal(signed(width), name=f"{name}_w{lane}")
        m.d.comb += signal.eq(total)
        carried.append(signal)
    return carried


class BinCounters(wiring.Component):
    """The bins of :class:`~hdl.kllm.idx_counter.idx_counter.KllmIdxCounter` (KLLM IV-B: bit counters,
    accumulators, readout bank) for ``prod(sizes)`` bins, from the lanes' predecode lines.

    Per lane, its one-hot plane over the bins (bit b is the AND of the chunk lines that b
    selects; with ``sliced``, also of the lane's ``select`` line, its top chunk's line of this
    part). Per group of 4 lanes, the first two levels of every bin's adder tree as bit planes
    (``kk``: a 4:3 counter of the planes; ``ik``: bit k is the OR of the planes of the lanes
    whose ``carried`` weight has bit k set, the leaders' planes being disjoint). Then the cut
    after them (``partial``), the per-bin adder tree, the cut before the accumulators
    (``accumulate``), and the accumulators and bank of the counter's ``bank_kind``. Every
    register loads at ``ce`` (the counter's front clock enable) except the bank's.

    With ``counts="spill"`` the accumulators hold narrow counts, each bank slot one more bit,
    and a :class:`~hdl.kllm.idx_counter.spill.BinSpill` keeps the carries' events; ``count``
    adds them back.

    The counter drives the members; ``count`` is bin 0 of the bank (``shift``, ``single``) or
    the bin at ``pointer`` (``direct``). ``shift_in`` enters the top bin when the bank shifts
    (the next part's ``count``; 0 at the top).
    """

    def __init__(self, counter, sizes, *, sliced, groups=1):
        self.counter = counter
        self.sizes = list(sizes)
        self.sliced = sliced
        #: >1: ``lines`` holds per lane ``groups`` copies of the low-chunk lines (the
        #: ``distribute`` cut), copy g for the bins whose high chunk is in group g.
        self.groups = groups
        self.bins = 1
        for size in self.sizes:
            self.bins *= size
        n, width = counter.n_inputs, counter.slot_bits
        #: Bits of ``lines`` per lane.
        self.line_bits = sum(self.sizes) + (groups - 1) * self.sizes[0]
        members = {"ce": In(1), "lines": In(n * self.line_bits)}
        if sliced:
            members["select"] = In(n)
        if counter.mode == "ik":
            members["carried"] = In(sum(_group_sum_width(counter.weight_bits, lanes) * len(lanes)
                                        for lanes in counter.lane_groups))
        kind = counter.bank_kind
        if kind == "direct":
            members.update(fresh=In(1), load=In(1), pointer=In((self.bins - 1).bit_length()))
        elif kind == "shift":
            members.update(clear=In(1), bank_enable=In(1), bank_load=In(1),
                           shift_in=In(self.bank_bits))
            if counter.counts == "spill":
                # == clear, from a flip-flop of the spill's own
                members["spill_end"] = In(1)
        else:
            members.update(shift=In(1), shift_in=In(width))
        members["count"] = Out(width)
        super().__init__(members)

    @property
    def acc_bits(self):
        """Bits per bin in the accumulators: the count (``counts="spill"``: its narrow low
        part), and with ``overflow`` its sticky flag."""
        c = self.counter
        return c.narrow_bits if c.counts == "spill" else c.slot_bits

    @property
    def bank_bits(self):
        """Bits per bin in the readout bank: as in the accumulators, and with
        ``counts="spill"`` the bin's event still outside the list when the bank loaded."""
        return self.acc_bits + int(self.counter.counts == "spill")

    @property
    def module_name(self):
        """The Verilog module name of this circuit (its shaping parameters)."""
        c = self.counter
        mode = c.mode if c.mode == "kk" else f"ik{c.weight_bits}"
        return (f"kllm_idx_counter_bins{self.bins}_n{c.n_inputs}_{mode}_c{c.count_bits}"
                f"_p{c.pipeline}_b{c.banks}" + ("_ov" if c.overflow else "")
                + ("_spill" if c.counts == "spill" else ""))

    def elaborate(self, platform):
        c = self.counter
        m = Module()
        n, sizes, width = c.n_inputs, self.sizes, self.acc_bits
        count_bits = c.count_bits
        cuts = c.cuts
        dec, btc, accm, rd = bin_blocks(m, c.keep_blocks,
                                     ("decode", "bit_counters", "accumulation", "readout"))

        def stage(value, name, module):
            return enabled_register(module, Value.cast(value), self.ce, name=name)

        # Per lane, its one-hot plane over the bins: bit b is the AND of the chunk lines that b
        # selects, built chunk by chunk from the least significant: the one-hot over the bins
        # of the chunks so far, repeated once per line of the next chunk and ANDed with it.
        line_bits = self.line_bits
        planes = []
        for lane in range(n):
            base = lane * line_bits
            if self.groups > 1:
                assert len(sizes) == 2 and not self.sliced, sizes
                lows = [self.lines[base + g * sizes[0]:base + (g + 1) * sizes[0]]
                        for g in range(self.groups)]
                base += self.groups * sizes[0]
                per = sizes[1] // self.groups
                planes.append(named(dec, Cat(*(Mux(self.lines[base + k], lows[k // per], 0)
                                               for k in range(sizes[1]))), f"plane_{lane}"))
                continue
            term = self.lines[base:base + sizes[0]]
            base += sizes[0]
            for size in sizes[1:]:
                term = Cat(*(Mux(self.lines[base + k], term, 0) for k in range(size)))
                base += size
            if self.sliced:
                term = Mux(self.select[lane], term, 0)
            planes.append(named(dec, term, f"plane_{lane}"))

        # Per group of 4 lanes (the first two levels of each bin's adder tree), the group's
        # count (kk) or weighted sum (ik) for every bin at once, as bit planes: plane j holds
        # bit j of the partial sum of every bin. Cut after them when asked ("partial").
        groups, offset = [], 0
        for g, lanes in enumerate(c.lane_groups):
            if c.mode == "kk":
                groups.append(_count_planes(btc, [planes[lane] for lane in lanes], f"g{g}"))
                continue
            group_width = _group_sum_width(c.weight_bits, lanes)
            carried = []
            for lane in lanes:
                carried.append(self.carried[offset:offset + group_width])
                offset += group_width
            out = []
            for k in range(group_width):
                bit = None
                for lane, value in zip(lanes, carried):
                    chosen = Mux(value[k], planes[lane], 0)
                    bit = chosen if bit is None else bit | chosen
                out.append(named(btc, bit, f"g{g}_s{k}"))
            groups.append(out)
        if "partial" in cuts:
            # One register per bit plane (`bins` bits): each bin's partial sums are then plain
            # bit selects of a signal.
            groups = [[stage(p, f"partial_{g}_{j}", btc) for j, p in enumerate(group)]
                      for g, group in enumerate(groups)]

        # Per bin: the adder tree over the groups' partial sums (levels 3 and up), then the cut
        # before the accumulators (one packed register of every bin's contribution).
        totals = []
        for bin_ in range(self.bins):
            operands = []
            for group in groups:
                value = Cat(*(p[bin_] for p in group))
                operands.append(value.as_signed() if c.mode == "ik" else value)
            totals.append(adder_tree(operands))
        step = len(totals[0])
        packed = Cat(*totals)
        if "accumulate" in cuts:
            packed = stage(packed, "contribution", btc)
        else:
            packed = named(btc, packed, "contribution")
        contributions = [packed[b * step:(b + 1) * step] for b in range(self.bins)]
        if c.mode == "ik":
            contributions = [value.as_signed() for value in contributions]

        # With the shift bank the accumulators have no reset of their own: `clear` starts
        # high after a reset and clears them in the next cycle, so that their reset is that
        # one flip-flop (a reset ORed into `clear` was a LUT in front of the whole fan-out:
        # measured 7.1 ns, 141 MHz, at 128 bins on ECP5).
        acc = Signal(self.bins * width, name="acc", reset_less=(c.bank_kind == "shift"))
        bank = self.bank_bits
        spill = None
        if c.counts == "spill":
            accm.submodules.spill = spill = BinSpill(
                bins=self.bins, idx_bits=c.idx_bits, entries=c.spill_entries,
                high_bits=count_bits - width, registered=c.bank_kind == "shift")

        def narrow(total):
            """The accumulators' part of the bank-format ``total`` (without the events)."""
            if spill is None:
                return total
            return Cat(*(total[b * bank:b * bank + width] for b in range(self.bins)))

        def count_of(slot):
            """The bin's count from its bank slot (with the spill: narrow count, event still
            outside the list, and the list's events of the bin being read)."""
            if spill is None:
                return slot
            return Cat(slot[:width], (spill.high + slot[width])[:count_bits - width])

        def sums(base):
            """Every bin's ``base + contribution`` modulo ``2**count_bits``, one signal; with
            ``overflow``, each bin's slot also holds a sticky flag above its count, set when
            the sum leaves the count's range (kk: a carry out; ik: the sum's bits from
            ``count_bits - 1`` up not all equal)."""
            if c.counts == "spill":
                # The narrow counts, and their carries (the spill's events).
                totals = [base[b * width:(b + 1) * width] + contribution
                          for b, contribution in enumerate(contributions)]
                m.d.comb += spill.carry.eq(Mux(self.ce, Cat(*(t[width] for t in totals)), 0))
                return named(accm, Cat(*(Cat(t[:width], spill.pending[b])
                                         for b, t in enumerate(totals))), "sum")
            if not c.overflow:
                return named(accm, Cat(*((base[b * width:(b + 1) * width] + contribution)[:width]
                                        for b, contribution in enumerate(contributions))), "sum")
            slots = []
            for b, contribution in enumerate(contributions):
                count = base[b * width:b * width + count_bits]
                sticky = base[b * width + count_bits]
                if c.mode == "ik":
                    total = count.as_signed() + contribution
                    top = total[count_bits - 1:]
                    left = ~(top.all() | ~top.any())
                else:
                    total = count + contribution
                    left = total[count_bits:].any()
                slots.append(Cat(total[:count_bits], sticky | left))
            return named(accm, Cat(*slots), "sum")

        kind = c.bank_kind
        if kind == "direct":
            # sum = (fresh ? 0 : acc) + contribution loads the accumulators at every clock
            # enable and, at the end of a reduction, the readout bank.
            readout = Signal(self.bins * bank, name="readout", reset_less=True)
            total = sums(named(accm, Mux(self.fresh, 0, acc), "acc_or_zero"))
            with accm.If(self.ce):
                accm.d.sync += acc.eq(narrow(total))
            with rd.If(self.load):
                rd.d.sync += readout.eq(total)
            if spill is not None:
                m.d.comb += [spill.end.eq(self.load), spill.load.eq(self.load),
                             spill.pointer.eq(self.pointer)]
            rd.d.comb += self.count.eq(count_of(readout.word_select(self.pointer, bank)))
        elif kind == "shift":
            # The `last` beat's sums load the bank, and the accumulators clear in the same
            # cycle: `clear` (a copy of the bank's load flip-flop, high only when the front
            # advances, and in the cycle after a reset) takes precedence over the clock
            # enable, so the clear is the flip-flops' own synchronous reset. Gated by the
            # enable instead (`If(ce): acc <= clear ? 0 : sum`) it cost one LUT per
            # accumulator bit on ECP5, which has no reset below the enable (measured: 13 LUT4
            # a bin). The bank loads the sums or shifts.
            readout = Signal(self.bins * bank, name="readout", reset_less=True)
            total = sums(acc)
            with accm.If(self.clear):
                accm.d.sync += acc.eq(0)
            with accm.Elif(self.ce):
                accm.d.sync += acc.eq(narrow(total))
            with rd.If(self.bank_enable):
                with rd.If(self.bank_load):
                    rd.d.sync += readout.eq(total)
                with rd.Else():
                    rd.d.sync += readout.eq(Cat(readout[bank:], self.shift_in))
            if spill is not None:
                # The bank loads only with `clear` (bank_load implies bank_enable); after a
                # reset `spill_end` loads the empty list into the empty readout list.
                m.d.comb += [spill.end.eq(self.spill_end), spill.load.eq(self.spill_end),
                             spill.shift.eq(self.bank_enable & ~self.bank_load)]
            rd.d.comb += self.count.eq(count_of(readout[:bank]))
        else:
            # One bank: the accumulators add, or shift out towards bin 0.
            total = sums(acc)
            with accm.If(self.ce):
                accm.d.sync += acc.eq(total)
            with accm.Elif(self.shift):
                accm.d.sync += acc.eq(Cat(acc[width:], self.shift_in))
            rd.d.comb += self.count.eq(acc[:width])
        return m
