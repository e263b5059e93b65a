"""What KLLM's Index Distribution Counter must cost at its described structure, on standard
cells, beside Table I.

``qllm counter-bound [--bins 128 256] [--inputs 16] [--length 4096] [--library sky130 ihp]
[--build-dir build]``

KLLM section IV-B describes the counter as one-hot decoders and bit counters ("BTCs") over the
bins, counting a reduction of ``length`` indices arriving ``inputs`` a cycle. At full rate and
with nothing kept outside the counter, any circuit of that structure holds, at least:

* per input lane, a decoder of its index to one line per bin;
* per bin, the count of the lines set this cycle and its running count of
  ``bits(length)`` bits (the population count and the accumulator register, "bin");
* per bin, a second copy of that count for the readout, because the next reduction starts
  while the last one's histogram is read out (one bin a cycle, as the column's MACs consume
  it): a register loaded at the end of a reduction and shifted towards bin 0 ("readout word").

Each of the three blocks is generated alone, flattened, and mapped on the library by the
project's standard-cell flow (:mod:`fpga.stdcell`); the bound is their sum at the counts
above, with no pipeline register, control or output buffer. The project's ``fp16_mac`` is
mapped in the same run to express it in FP16 MACs, as Table I does: at ``pipeline=0``, without
pipeline registers as the blocks are, which is also the depth ``make paper`` maps it at for
KLLM's clock on sky130 and IHP. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib import wiring

from qllm_cores.gen.verilog import generate
from qllm_cores.hdl.common.arith import lowest_one_hot, one_hot_index, popcount
from qllm_cores.hdl.kllm.idx_counter.spill import BinSpill, spill_shape

from .area import Unit
from .paper.sources import NAND2_28NM_SOURCE, TABLE_I, nand2_eq_28nm
from .stdcell import LIBRARIES, LibraryError, facts_for, find_liberty, stdcell_job
from .stdcell.cli import DEFAULT_LIBRARIES

__all__ = ["Bound", "BinCount", "BinPopcount", "DrainPort", "OneHotDecoder",
           "ReadoutWord", "Spill", "WidthFloor", "bound", "main", "readings", "width_floors"]

#: KLLM Table I: one 16-input counter (um^2, 28 nm) and the FP16 MACs its area buys.
PAPER_COUNTER_UM2 = TABLE_I["counter"].per_unit_um2
PAPER_COUNTER_MACS = PAPER_COUNTER_UM2 / TABLE_I["mac"].per_unit_um2


class OneHotDecoder(Elaboratable):
    """One lane's index (``idx_bits``) to ``2**idx_bits`` lines, all low unless ``valid``."""

    def __init__(self, idx_bits: int):
        self.idx = Signal(idx_bits)
        self.valid = Signal()
        self.lines = Signal(2 ** idx_bits)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.lines.eq(self.valid << self.idx)
        return m


class BinCount(Elaboratable):
    """One bin: ``count = (fresh ? 0 : count) + popcount(hits)`` every cycle."""

    def __init__(self, inputs: int, count_bits: int):
        self.hits = Signal(inputs)
        self.fresh = Signal()
        self.count = Signal(count_bits)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(
            (self.count & ~self.fresh.replicate(len(self.count))) + popcount(self.hits))
        return m


class BinPopcount(Elaboratable):
    """One bin's count of this cycle's lines alone (combinational; no running count)."""

    def __init__(self, inputs: int):
        self.hits = Signal(inputs)
        self.count = Signal(inputs.bit_length())

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.count.eq(popcount(self.hits))
        return m


class ReadoutWord(Elaboratable):
    """One bin of the readout copy: loads the finished count or takes its neighbour's."""

    def __init__(self, count_bits: int):
        self.load = Signal()
        self.count = Signal(count_bits)
        self.neighbour = Signal(count_bits)
        self.word = Signal(count_bits)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.word.eq(Mux(self.load, self.count, self.neighbour))
        return m


class DrainPort(Elaboratable):
    """The least logic one drain of the spill needs a cycle: the lowest of ``bins`` pending
    flags, as one-hot (to clear it) and as a bin number (combinational, no flags)."""

    def __init__(self, bins: int):
        self.flags = Signal(bins)
        self.clear = Signal(bins)
        self.bin = Signal(max(1, (bins - 1).bit_length()))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.clear.eq(lowest_one_hot(self.flags))
        m.d.comb += self.bin.eq(one_hot_index(self.clear, len(self.bin)))
        return m


#: A readout bank in latches (transparent while ``load``), read by a ``BINS``:1 multiplexer:
#: Amaranth has no latch, so this block is Verilog (Yosys infers ``$dlatch``; ``dfflibmap``
#: maps it on the library's latch cell).
LATCH_BANK = """module {name} (load, counts, pointer, word);
  input load;
  input [{bins} * {bits} - 1:0] counts;
  input [{pointer_bits} - 1:0] pointer;
  output [{bits} - 1:0] word;
  reg [{bins} * {bits} - 1:0] bank;
  always @* if (load) bank = counts;
  assign word = bank[pointer * {bits} +: {bits}];
endmodule
"""


@dataclass(frozen=True)
class Spill:
    """The spill's blocks at one configuration (NAND2-equivalents): the narrow ``bin``
    (count + accumulator of ``narrow_bits``), its ``readout_word`` (with the event bit), the
    shared pending flags, slots and event lists (``shared``, once), and the whole readout bank
    in latches with its multiplexer (``latch_bank``, once)."""

    narrow_bits: int
    entries: int
    bin: float
    readout_word: float
    shared: float
    latch_bank: float


@dataclass(frozen=True)
class Bound:
    """The bound at one configuration on one library (NAND2-equivalents)."""

    bins: int
    library: str
    decoder: float
    bin: float
    readout_word: float
    popcount: float
    inputs: int
    length: int
    fp16_mac: float
    spill: Spill | None = None
    #: count bits -> one bin's count + accumulator of that width (``BinCount``)
    bins_by_width: dict = field(default_factory=dict)
    #: the library's smallest latch and flip-flop cells and one drain port
    #: (:class:`DrainPort`), NAND2-eq
    latch: float = 0.0
    flop: float = 0.0
    drain_port: float = 0.0

    @property
    def total(self) -> float:
        return self.inputs * self.decoder + self.bins * (self.bin + self.readout_word)

    @property
    def in_macs(self) -> float:
        return self.total / self.fp16_mac

    @property
    def macs_per_cycle_per_mac_area(self) -> float:
        """Index-MACs a cycle (one per input) per FP16 MAC of area."""
        return self.inputs / self.in_macs


def readings(b: Bound) -> list[tuple[str, float, float, str]]:
    """Ways to read Table I's counter, each as ``(name, NAND2-eq, index-MACs a cycle,
    consequence)`` built from the same blocks (the lower-rate reading is ``--inputs``)."""
    beats = -(-b.length // b.inputs)
    spill = []
    if b.spill is not None:
        z = b.spill
        base = b.inputs * b.decoder + b.bins * z.bin + z.shared
        spill = [
            (f"narrow counts ({z.narrow_bits} bits) with the overflow spill "
             "(`counts=\"spill\"`)", base + b.bins * z.readout_word, b.inputs,
             f"counts exact up to {b.length} indices; {z.entries} events a reduction in a "
             "list"),
            ("narrow counts with the spill, readout bank in latches", base + z.latch_bank,
             b.inputs, f"a {b.bins}:1 multiplexer reads the bank; latches need a clock-gated "
             "load (no FPGA form)"),
        ]
    return [("as described: two copies of the counts", b.total, b.inputs, "none")] + spill + [
        ("one copy: the readout stalls the input", b.inputs * b.decoder + b.bins * b.bin,
         b.inputs * beats / (beats + b.bins),
         f"the input waits {b.bins} cycles per reduction of {beats} beats"),
        ("counts kept outside: the counter only counts this cycle's lines",
         b.inputs * b.decoder + b.bins * b.popcount, b.inputs,
         f"{b.bins} counts of {b.inputs.bit_length()} bits leave every cycle; the running "
         f"counts ({b.bins} x {b.length.bit_length()} bits, twice) live elsewhere"),
    ]


@dataclass(frozen=True)
class WidthFloor:
    """The floor of a full-rate counter whose bins hold ``width``-bit counts (NAND2-eq)."""

    width: int
    events: int          # carries a reduction can make (0: full counts, no spill)
    gap: int             # beats between two carries of one bin (0: no spill)
    ports: int           # drains a cycle so that no bin has two events outstanding
    counting: float      # decoders + the bins' count and accumulator at this width
    storage: float       # readout copy, event lists (latch cells), pending flags (flip-flops)
    drains: float        # ``ports`` drain ports

    @property
    def total(self) -> float:
        return self.counting + self.storage + self.drains


def width_floors(b: Bound) -> list[WidthFloor]:
    """Per count width from ``ceil(log2(inputs))`` (a bin carries at most once a beat) to the
    full ``bits(length)``: what any full-rate counter of the paper's structure with counts of
    that width in its bins holds at least. The decoders and each bin's count + accumulator as
    mapped (``BinCount``); the readout copy (``width`` bits a bin, one more for the event
    outstanding at the end with a spill) and the two event lists (``length >> width`` bin
    numbers each: the reduction's and the readout's) as bare latch cells; a pending flag a bin
    as a flip-flop; and ``ports`` drain ports (:class:`DrainPort`), where ``ports`` drain
    within ``gap`` cycles every event of a reduction (``2 * events / ports <= gap``, the bound of
    :func:`~hdl.kllm.idx_counter.spill.spill_shape` at one port). No pipeline register,
    control, multiplexer or list comparator."""
    full = b.length.bit_length()
    idx_bits = (b.bins - 1).bit_length()
    out = []
    for width in sorted(b.bins_by_width):
        spill = width < full
        events = b.length >> width if spill else 0
        gap = -(-((1 << width) - b.inputs + 1) // b.inputs) if spill else 0
        ports = -(-2 * events // gap) if spill else 0
        counting = b.inputs * b.decoder + b.bins * b.bins_by_width[width]
        storage = b.bins * (width + spill) * b.latch
        if spill:
            storage += b.bins * b.flop + 2 * events * idx_bits * b.latch
        out.append(WidthFloor(width, events, gap, ports, counting, storage,
                              ports * b.drain_port))
    return out


def _block(component, name: str, ports, directory: Path) -> Unit:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.v"
    if isinstance(component, wiring.Component):
        ports = None                                  # (its signature names them)
    path.write_text(verilog.convert(component, name=name, ports=ports, emit_src=False))
    return Unit(name, name, {}, path)


def bound(bins_list, inputs: int, length: int, libraries, build_dir: Path,
          progress=lambda _: None) -> list[Bound]:
    """Map the blocks and the FP16 MAC on every library; one :class:`Bound` per (bins,
    library). Raises ValueError on a parameter out of range, LibraryError without a library."""
    if inputs < 1:
        raise ValueError(f"inputs={inputs!r} must be at least 1")
    if length < 1:
        raise ValueError(f"length={length!r} must be at least 1")
    for bins in bins_list:
        if bins < 2 or bins & (bins - 1):
            raise ValueError(f"bins={bins!r} must be a power of two of at least 2")
    for library in libraries:
        find_liberty(library)
    count_bits = length.bit_length()
    work = Path(build_dir) / "counter-bound"
    mac_dir = work / "fp16_mac"
    mac = Unit("fp16_mac", "fp16_mac", {"pipeline": 0},
               generate("fp16_mac", {"pipeline": 0}, mac_dir))
    word = ReadoutWord(count_bits)
    count = BinCount(inputs, count_bits)
    lines = BinPopcount(inputs)
    shared = {
        "popcount": _block(lines, f"popcount_i{inputs}", [lines.hits, lines.count], work / "v"),
        "bin": _block(count, f"bin_i{inputs}_c{count_bits}",
                      [count.hits, count.fresh, count.count], work / "v"),
        "readout_word": _block(word, f"readout_word_c{count_bits}",
                               [word.load, word.count, word.neighbour, word.word], work / "v"),
    }
    shape = spill_shape(inputs, length, count_bits)
    if shape is not None:
        narrow, entries = shape
        count = BinCount(inputs, narrow)
        word = ReadoutWord(narrow + 1)
        shared["spill_bin"] = _block(count, f"bin_i{inputs}_c{narrow}",
                                     [count.hits, count.fresh, count.count], work / "v")
        shared["spill_word"] = _block(word, f"readout_word_c{narrow + 1}",
                                      [word.load, word.count, word.neighbour, word.word],
                                      work / "v")
    widths = {}
    for width in range(max(1, (inputs - 1).bit_length()), count_bits + 1):
        block = BinCount(inputs, width)
        widths[width] = _block(block, f"bin_i{inputs}_c{width}",
                               [block.hits, block.fresh, block.count], work / "v")
    results = []
    for library in libraries:
        def run(unit):
            progress(f"{unit.name} on {library}")
            return stdcell_job(unit, library, work / "synth", work / "cache")["nand2_eq"]
        mac_eq = run(mac)
        blocks = {name: run(unit) for name, unit in shared.items()}
        by_width = {width: run(unit) for width, unit in widths.items()}
        facts = facts_for(find_liberty(library))
        cells = {kind: facts.smallest(kind, LIBRARIES[library].dont_use)[1] / facts.nand2_area
                 for kind in ("latch", "flop")}
        for bins in bins_list:
            idx_bits = int(math.log2(bins))
            decoder = OneHotDecoder(idx_bits)
            unit = _block(decoder, f"decoder_{bins}", [decoder.idx, decoder.valid, decoder.lines],
                          work / "v")
            spill = None
            if shape is not None:
                lists = BinSpill(bins=bins, idx_bits=idx_bits, entries=entries,
                                 high_bits=count_bits - narrow)
                lists_unit = _block(lists, f"spill_{bins}_e{entries}",
                                    [lists.carry, lists.end, lists.load, lists.pending,
                                     lists.pointer, lists.high], work / "v")
                name = f"latch_bank_{bins}_c{narrow + 1}"
                path = work / "v" / f"{name}.v"
                path.write_text(LATCH_BANK.format(name=name, bins=bins, bits=narrow + 1,
                                                  pointer_bits=idx_bits))
                spill = Spill(narrow, entries, blocks["spill_bin"], blocks["spill_word"],
                              run(lists_unit), run(Unit(name, name, {}, path)))
            port = DrainPort(bins)
            port_unit = _block(port, f"drain_port_{bins}", [port.flags, port.clear, port.bin],
                               work / "v")
            results.append(Bound(bins, library, run(unit), blocks["bin"],
                                 blocks["readout_word"], blocks["popcount"], inputs, length,
                                 mac_eq, spill, by_width, cells["latch"], cells["flop"],
                                 run(port_unit)))
    return results


def render(bounds, inputs: int, length: int) -> str:
    """The Markdown table of :func:`bound`'s results beside Table I."""
    paper_eq = nand2_eq_28nm(PAPER_COUNTER_UM2)
    paper_macs = PAPER_COUNTER_MACS
    lines = [
        f"Floor of a {inputs}-input counter at full rate, reductions of {length} "
        f"indices ({length.bit_length()}-bit counts), at KLLM's structure (NAND2-eq of each "
        "block as mapped, not a proof of minimality; no pipeline register or control):",
        "",
        "| bins | library | decoder (x inputs) | bin: count + accumulator (x bins) | readout "
        "word (x bins) | total | FP16 MAC | total in FP16 MACs | index-MACs / cycle per "
        "FP16-MAC area |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for b in bounds:
        lines.append(f"| {b.bins} | {b.library} | {b.decoder:,.0f} | {b.bin:,.1f} | "
                     f"{b.readout_word:,.1f} | {b.total:,.0f} | {b.fp16_mac:,.0f} | "
                     f"{b.in_macs:.2f} | {b.macs_per_cycle_per_mac_area:.2f} |")
    lines += [
        f"| KLLM Table I | 28 nm | | | | {paper_eq:,.0f} ({PAPER_COUNTER_UM2:,.0f} um^2) | | "
        f"{paper_macs:.2f} | {16 / paper_macs:.2f} |",
        "",
        f"Table I's NAND2-eq: its um^2 / {NAND2_28NM_SOURCE}",
        "",
    ]
    lines += ["Floor by count width: what a full-rate counter holding counts of that "
              "width in its bins must hold at least (decoders and per-bin count + accumulator "
              "as mapped; readout copy and event lists as the library's smallest latch, "
              "pending flags as its smallest flip-flop; the drain ports a cycle that keep one "
              "event a bin outstanding; no pipeline, control or multiplexer):", "",
              "| bins | library | width | events / reduction | beats between carries | "
              "drain ports | counting | storage | drains | floor | FP16 MACs |",
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b in bounds:
        for f in width_floors(b):
            lines.append(f"| {b.bins} | {b.library} | {f.width} | {f.events} | {f.gap} | "
                         f"{f.ports} | {f.counting:,.0f} | {f.storage:,.0f} | "
                         f"{f.drains:,.0f} | {f.total:,.0f} | {f.total / b.fp16_mac:.2f} |")
        lowest = min(width_floors(b), key=lambda f: f.total)
        lines.append(f"| {b.bins} | {b.library} | lowest: {lowest.width} | | | | | | | "
                     f"**{lowest.total:,.0f}** | {lowest.total / b.fp16_mac:.2f} |")
    lines += ["", "Readings of Table I's counter, from the same blocks:", "",
              "| bins | library | reading | NAND2-eq | in FP16 MACs | index-MACs / cycle | per "
              "FP16-MAC area | consequence |",
              "| ---: | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for b in bounds:
        for name, area, rate, consequence in readings(b):
            macs = area / b.fp16_mac
            lines.append(f"| {b.bins} | {b.library} | {name} | {area:,.0f} | {macs:.2f} | "
                         f"{rate:.2f} | {rate / macs:.2f} | {consequence} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="qllm counter-bound",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--bins", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--inputs", type=int, default=16)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--library", nargs="+", default=list(DEFAULT_LIBRARIES))
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    args = parser.parse_args(argv)
    try:
        bounds = bound(args.bins, args.inputs, args.length, args.library, args.build_dir,
                       progress=lambda text: print(text, file=sys.stderr, flush=True))
    except (ValueError, LibraryError) as error:
        print(f"qllm counter-bound: {error}", file=sys.stderr)
        return 2
    print(render(bounds, args.inputs, args.length))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
