"""Per-lane histograms in memory, for the KLLM Index Distribution Counter
(:class:`hdl.kllm.idx_counter.idx_counter.KllmIdxCounter`, ``counts="memory"``).

Each input lane keeps its own histogram of a reduction in a memory of ``2**idx_bits`` words
(the lane's count of each bin and, with ``overflow``, a sticky flag set when that count wraps),
two memories a lane: one counts a reduction while the other is read out and cleared.

Memories (:class:`LaneMemory`): one read port with a registered output (the read data leaves
an output register two cycles after the address, each register with its own clock enable) and
one write port. On ``target="ecp5"`` each is a DP16KD block RAM in its 18-bit mode with
``REGMODE="OUTREG"`` (the output register's 1 ns clock-to-output instead of the unregistered
port's 5.8 ns); on ``"generic"`` an Amaranth memory and a flip-flop register, the same cycles.

Counting: a read-modify-write a lane a cycle. The beat's index addresses the counting memory
(read stage), the word comes out of the output register two cycles later (write stage), gets 1
added and is written back. The two beats before it write the same lane after its read or in
the cycle of it: equal indices take the word they wrote instead (``f1``: the beat just ahead,
``f2``: the one before; flags compared a cycle or two ahead and registered), so a read that
meets a write of its own address is never used. Once accepted, a beat never stalls.

Banks: a reduction's beats take the bank ``in_bank`` (the other one after each ``last``); a beat
is accepted only while its bank is not ``owed`` (its previous histogram read out), so ``i.ready``
is a flip-flop gate. A bank is owed from its ``last`` beat's acceptance until the final bin of
its readout has left the memory's output register; its readout starts the cycle after the
``last`` beat's write and reads a bin a cycle (``2**idx_bits`` cycles; histograms follow each
other with no idle cycle) on the read port, and clears each bin on the write port two cycles
after reading it. Reductions of at least ``2**idx_bits + 6`` beats stream with no stall (one more
with the ``decode`` cut; :func:`stall_free_extra`): the ``last`` beat's 4-cycle
read-modify-write and the readout's two output registers.

After reset both memories of every lane are cleared, one word a cycle (``i`` waits).
"""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Mux, Signal, unsigned
from amaranth.lib import stream
from amaranth.lib.memory import Memory

from ...common.arith import adder_tree_cut, or_tree
from ...common.invariants import invariant
from ...common.stream_stage import StallPipeline, pack_fields

__all__ = ["LaneMemory", "lane_histograms", "memory_stages", "stall_free_extra", "TARGETS",
           "ECP5_WORD_BITS"]

#: Where the memories go: inferred (``generic``) or DP16KD instances (``ecp5``).
TARGETS = ("generic", "ecp5")
#: The widest word (count and sticky flag) a DP16KD holds in its 1024 x 18 mode.
ECP5_WORD_BITS = 18
#: Cycles from a read's address to its word at the output register's output.
READ_CYCLES = 2
#: Cycles from a beat's read to its write: the memory's two registers, a register of the word
#: read (the route from the block RAM) and one of the word to write (the route to it).
WRITE_CYCLES = READ_CYCLES + 2


def stall_free_extra(cuts):
    """Beats beyond ``2**idx_bits`` a reduction needs to stream with no stall at a ``pipeline``
    depth's register ``cuts``: the counting front (:func:`memory_stages`: the ``last`` beat
    reaches its write) and the readout's reads (:data:`READ_CYCLES`), while the other bank's
    readout finishes."""
    front, _ = memory_stages(cuts)
    return front + READ_CYCLES


def memory_stages(cuts):
    """``(front, readout)``: the stages of the counting front from ``i`` to the write (a
    register of the beat with the ``decode`` cut, the read, the memory, the output register)
    and of the readout (the memory, the output register, a register of the lanes' words with
    ``accumulate``, one in the middle of the adder tree with ``partial``) for a ``pipeline``
    depth's register ``cuts``; the latency is theirs, the start of the readout after the write
    and ``readout``'s buffer."""
    front = ("decode" in cuts) + WRITE_CYCLES
    readout = READ_CYCLES + ("accumulate" in cuts) + 2 * ("partial" in cuts)
    return front, readout


class LaneMemory:
    """One lane's memory of one bank: ``depth`` words of ``width`` bits, a read port with a
    registered output and a write port, in ``m``.

    Members (drive the inputs combinationally): ``read_addr``, ``read_en`` (the read: the
    memory's own register loads), ``out_en`` (the output register loads), ``data`` (output);
    ``write_addr``, ``write_data``, ``write_en``. A read and a write of the same address in one
    cycle read an undefined word (DP16KD); the generic memory reads the old one.
    """

    def __init__(self, m, name, *, depth, width, target):
        self.read_addr = Signal(range(depth), name=f"{name}_read_addr")
        self.read_en = Signal(name=f"{name}_read_en")
        self.out_en = Signal(name=f"{name}_out_en")
        self.data = Signal(width, name=f"{name}_data", reset_less=True)
        self.write_addr = Signal(range(depth), name=f"{name}_write_addr")
        self.write_data = Signal(width, name=f"{name}_write_data")
        self.write_en = Signal(name=f"{name}_write_en")
        if target == "ecp5":
            self._dp16kd(m, name, width)
        else:
            memory = Memory(shape=unsigned(width), depth=depth, init=[])
            m.submodules[name] = memory
            write = memory.write_port()
            read = memory.read_port(domain="sync")
            m.d.comb += [
                read.addr.eq(self.read_addr), read.en.eq(self.read_en),
                write.addr.eq(self.write_addr), write.data.eq(self.write_data),
                write.en.eq(self.write_en),
            ]
            with m.If(self.out_en):
                m.d.sync += self.data.eq(read.data)

    def _dp16kd(self, m, name, width):
        # 18-bit mode: address bits 13..4 (1024 words), bits 1..0 the write's byte enables.
        def address(value, byte_enables):
            return Cat(byte_enables, Const(0, 2), value, Const(0, 10 - len(value)))

        read_data = Signal(ECP5_WORD_BITS, name=f"{name}_doa")
        ports = {
            "p_DATA_WIDTH_A": 18, "p_DATA_WIDTH_B": 18,
            "p_REGMODE_A": "OUTREG", "p_REGMODE_B": "NOREG",
            "p_WRITEMODE_A": "NORMAL", "p_WRITEMODE_B": "NORMAL",
            "p_RESETMODE": "SYNC", "p_CSDECODE_A": "0b000", "p_CSDECODE_B": "0b000",
            "p_GSR": "DISABLED",
        }
        a_addr = address(self.read_addr, Const(0, 2))
        b_addr = address(self.write_addr, Const(0b11, 2))
        write_data = Cat(self.write_data, Const(0, ECP5_WORD_BITS - len(self.write_data)))
        for k in range(14):
            ports[f"i_ADA{k}"] = a_addr[k]
            ports[f"i_ADB{k}"] = b_addr[k]
        for k in range(18):
            ports[f"i_DIA{k}"] = Const(0, 1)
            ports[f"i_DIB{k}"] = write_data[k]
            ports[f"o_DOA{k}"] = read_data[k]
        for k in range(3):
            ports[f"i_CSA{k}"] = Const(0, 1)
            ports[f"i_CSB{k}"] = Const(0, 1)
        ports.update({
            "i_CLKA": ClockSignal("sync"), "i_CEA": self.read_en, "i_OCEA": self.out_en,
            "i_WEA": Const(0, 1), "i_RSTA": Const(0, 1),
            "i_CLKB": ClockSignal("sync"), "i_CEB": self.write_en, "i_OCEB": Const(1, 1),
            "i_WEB": self.write_en, "i_RSTB": Const(0, 1),
        })
        m.submodules[name] = Instance("DP16KD", **ports)
        m.d.comb += self.data.eq(read_data[:len(self.data)])


def lane_histograms(unit, m, platform):
    """Build ``unit``'s bins as per-lane memories in ``m`` (``unit.i`` in, ``unit.o`` out)."""
    n, bins, width, idx_bits = unit.n_inputs, unit.bins, unit.count_bits, unit.idx_bits
    cuts = unit.cuts
    _, readout_stages = memory_stages(cuts)
    word = width + int(unit.overflow)               # a lane's count, and its sticky flag

    # After reset both memories of every lane are cleared, one word a cycle (the input waits).
    clearing = Signal(init=1)
    clear_ptr = Signal(range(bins), name="reset_clear_ptr")
    with m.If(clearing):
        m.d.sync += clear_ptr.eq(clear_ptr + 1)
        with m.If(clear_ptr == bins - 1):
            m.d.sync += clearing.eq(0)

    # --- admission ------------------------------------------------------------------------
    in_bank = Signal()             # the bank of the next beat accepted
    owed = Signal(2)               # per bank: a histogram counted there is not yet read out
    # The sweep's writes land a cycle after `clearing` (registered write ports): `i` waits one
    # cycle more.
    swept = Signal(name="swept")
    m.d.sync += swept.eq(~clearing)
    m.d.comb += unit.i.ready.eq(swept & ~(owed.bit_select(in_bank, 1)))
    accepted = unit.i.valid & unit.i.ready
    payload = unit.i.payload
    with m.If(accepted & payload.last):
        m.d.sync += in_bank.eq(~in_bank)

    def beat(valid, idx, mask, last, bank):
        return {"valid": valid, "idx": idx, "en": mask & valid.replicate(n),
                "last": last & valid, "bank": bank}

    def registered(fields, stage):
        out = {}
        for key, value in fields.items():
            out[key] = Signal.like(value, name=f"{stage}_{key}",
                                   reset_less=key not in ("valid", "en", "last"))
            m.d.sync += out[key].eq(value)
        return out

    entering = beat(accepted, payload.idx.as_value(), payload.mask, payload.last, in_bank)
    read = registered(entering, "decode") if "decode" in cuts else entering
    latch = registered(read, "memory")             # the beat whose word the memory holds
    out = registered(latch, "out")                 # ... whose word the output register holds
    loaded = registered(out, "loaded")             # ... whose word is in `loaded` (+ 1: `new`)
    write = registered(loaded, "write")            # ... whose new word is written

    def lane(fields, j):
        return fields["idx"][j * idx_bits:(j + 1) * idx_bits]

    # --- readout control ------------------------------------------------------------------
    written = Signal(2)            # per bank: its histogram is complete, the readout not begun
    reading = Signal()             # the readout reads bins of `reading_bank`
    reading_bank = Signal()
    next_bank = Signal()           # the bank the next readout reads
    # Per bank: the readout drives its read port, from the write of the histogram's `last`
    # beat (nothing counts into the bank after it) until the final bin leaves the output
    # register. A flip-flop: it selects every lane's read address (a net of 16 x 10 loads at
    # KLLM-A4), so nothing computes in front of it. While another bank is read out, the port
    # reads that readout's bins unused; the bank's own readout begins at bin 0.
    driven = Signal(2)
    pointer = Signal(range(bins), name="readout_pointer")
    with m.If(write["last"]):
        m.d.sync += [written.bit_select(write["bank"], 1).eq(1),
                     driven.bit_select(write["bank"], 1).eq(1)]

    source = stream.Signature(unsigned(1)).create(path=("bins",))
    sink = unit.readout_sink(m)
    readout = StallPipeline(m, source, sink, latency=readout_stages, name="readout")
    ready_next = written.bit_select(next_bank, 1)
    final_bin = pointer == bins - 1
    # A readout starts when its bank's histogram is complete and no other is being read, or
    # as the other's final bin is read: bins leave back to back.
    starting = ready_next & (~reading | (readout.ce & final_bin))
    current = Mux(reading, reading_bank, next_bank)
    m.d.comb += source.valid.eq(reading | ready_next)
    fire = readout.load                            # a bin of `current` is read
    with m.If(fire):
        m.d.sync += pointer.eq(pointer + 1)
        with m.If(final_bin):
            m.d.sync += reading.eq(0)
    with m.If(starting & (~reading | fire)):
        m.d.sync += [
            reading.eq(1), reading_bank.eq(next_bank), next_bank.eq(~next_bank),
            written.bit_select(next_bank, 1).eq(0),
        ]
    read_bank = readout.stage(current, name="read_bank")
    read_final = readout.stage(final_bin, name="read_final")
    out_bank = readout.stage(read_bank, name="out_bank")
    out_final = readout.stage(read_final, name="out_final")
    # Each bin read is cleared on the write port two cycles later: which bin of which bank was
    # read is registered once (`clear`), then loads the write ports' input registers (below),
    # so no readout logic sits in front of the 2 x n write enables. The bank is freed when the
    # final bin leaves the output register, the cycle of that bin's clear.
    clear = Signal(name="clear")
    clear_bank = Signal(name="clear_bank")
    clear_addr = Signal(range(bins), name="clear_addr")
    m.d.sync += [clear.eq(fire), clear_bank.eq(current), clear_addr.eq(pointer)]
    # The final bin leaves the output register: the bank is free for counting.
    leaves = readout.beat[1] & out_final & readout.ce
    with m.If(leaves):
        m.d.sync += [owed.bit_select(out_bank, 1).eq(0), driven.bit_select(out_bank, 1).eq(0)]
    with m.If(accepted & payload.last):
        m.d.sync += owed.bit_select(in_bank, 1).eq(1)

    # --- the memories -----------------------------------------------------------------------
    # A beat's word is read 4 cycles before the beat writes it: the 4 beats ahead of it write
    # the same lane after its read or in the cycle of it. Flag f<d>: the beat d ahead writes
    # this lane's word (compared as soon as both are known and registered); the beat takes the
    # word that one wrote, the nearest first.
    def same(a, b, j):
        return (lane(a, j) == lane(b, j)) & (a["bank"] == b["bank"]) & b["en"][j]

    def delayed(value, cycles, name):
        for k in range(cycles):
            register = Signal(name=f"{name}_d{k + 1}" if k + 1 < cycles else name)
            m.d.sync += register.eq(value)
            value = register
        return value

    words = []                     # per lane, the word at the readout's output registers
    for j in range(n):
        # f2..f4 are known a cycle before the word is: the choice among the words they name is
        # made then and registered (`earlier`, `forward`), leaving one multiplexer in front of
        # the adder.
        f1 = delayed(same(out, loaded, j), 1, f"lane{j}_f1")
        f2 = delayed(same(latch, loaded, j), 1, f"lane{j}_f2")
        f3 = delayed(same(read, loaded, j), 2, f"lane{j}_f3")
        f4 = delayed(same(read, write, j), 2, f"lane{j}_f4")
        memories = [LaneMemory(m, f"lane{j}_bank{b}", depth=bins, width=word, target=unit.target)
                    for b in range(2)]
        stored = Signal(word, name=f"lane{j}_loaded", reset_less=True)
        m.d.sync += stored.eq(Mux(out["bank"], memories[1].data, memories[0].data))
        # wrote[0]: the word being written (the beat 1 ahead), wrote[d]: the one d cycles ago.
        wrote = [Signal(word, name=f"lane{j}_wrote{d + 1}", reset_less=True) for d in range(3)]
        earlier = Signal(word, name=f"lane{j}_earlier", reset_less=True)
        forward = Signal(name=f"lane{j}_forward")
        m.d.sync += [earlier.eq(Mux(f2, wrote[0], Mux(f3, wrote[1], wrote[2]))),
                     forward.eq(f2 | f3 | f4)]
        old = Mux(f1, wrote[0], Mux(forward, earlier, stored))
        total = old[:width] + 1
        new = Signal(word, name=f"lane{j}_new")
        m.d.comb += new.eq(Cat(total[:width], old[width] | total[width]) if unit.overflow
                           else total[:width])
        m.d.sync += [wrote[0].eq(new), *(wrote[d].eq(wrote[d - 1]) for d in range(1, 3))]
        new = wrote[0]
        for b, memory in enumerate(memories):
            # The write port's address, enable and choice of word are registers, decided a
            # cycle ahead: the count of the beat at `loaded` (written with its new word in the
            # next cycle), the clear of the bin read a cycle earlier (`clear`), the sweep after
            # reset.
            counts = loaded["en"][j] & (loaded["bank"] == b)
            clears = clear & (clear_bank == b)
            write_addr = Signal(range(bins), name=f"lane{j}_bank{b}_waddr", reset_less=True)
            write_en = Signal(name=f"lane{j}_bank{b}_wen")
            write_count = Signal(name=f"lane{j}_bank{b}_wcount")
            m.d.sync += [
                write_addr.eq(Mux(clearing, clear_ptr, Mux(counts, lane(loaded, j), clear_addr))),
                write_en.eq(clearing | counts | clears),
                write_count.eq(counts),
            ]
            m.d.comb += [
                memory.read_addr.eq(Mux(driven[b], pointer, lane(read, j))),
                memory.read_en.eq(Mux(driven[b], readout.ce, 1)),
                memory.out_en.eq(Mux(driven[b], readout.ce, 1)),
                memory.write_addr.eq(write_addr),
                memory.write_data.eq(Mux(write_count, new, 0)),
                memory.write_en.eq(write_en),
            ]
            invariant(m, platform, ~(counts & clears), ~write_count | ~driven[b],
                      ~clears | driven[b], name=f"lane{j}_bank{b}_ports")
        words.append(Mux(out_bank, memories[1].data, memories[0].data))

    # --- the sum over the lanes -------------------------------------------------------------
    if "accumulate" in cuts:
        words = [readout.stage(value, name=f"lane{j}_word") for j, value in enumerate(words)]
    # With `partial`: registers in the middle of the tree (level 0, the words themselves, for
    # a single lane) and after it, before the overflow test.
    depth = (n - 1).bit_length()
    partial = ()
    if "partial" in cuts and depth > 0:
        partial = ((depth + 1) // 2 if depth > 1 else 0, depth)
    summed = adder_tree_cut([value[:width] for value in words], cut_after=partial,
                            register=readout.stage)
    if "partial" in cuts and depth == 0:
        summed = readout.delay(summed, 2, name="sum")
    final = readout.delay(out_final, readout_stages - READ_CYCLES, name="final")
    fields = {"count": summed[:width], "last": final}
    if unit.overflow:
        sticky = or_tree(value[width] for value in words)
        if "partial" in cuts:
            sticky = readout.delay(sticky, 2, name="sticky")
        fields["overflow"] = sticky | (summed[width:] != 0)
    m.d.comb += sink.payload.eq(pack_fields(unit.out_layout, fields))

    invariant(m, platform, ~clearing | ~(owed.any() | reading | written.any()),
              ~reading | driven.bit_select(reading_bank, 1),
              (written & ~driven) == 0,
              ~(leaves & write["last"] & (out_bank == write["bank"])),
              name="lanes_invariant")
