# amaranth: UnusedElaboratable=no
# (depth ranges are found by constructing components that are never elaborated)
"""Our side of ``make paper``'s area table: which registered unit stands beside which quoted
paper row, how many paper units one instance holds, and what the ratios divide by.

A `Design` is a registered unit at a named configuration (and overrides); its ``pipeline``
range is the one its constructor accepts (:meth:`Design.depths`). A `Row` sets a design beside
a paper `~fpga.paper.sources.Quote` at that paper's clock, and names the rows its ratios divide
by (``references``): the first is the paper's own reference, the others the same reference
read another way (the FP16-accumulating FP16 MAC, when ``fp16_mac`` registers it).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from qllm_cores.gen.registry import UNITS, resolve_params

from .sources import CLOCKS, QUOTES, TABLE_I, Quote

__all__ = ["Design", "FP16_ACC_CONFIG", "Row", "rows", "select_rows"]

#: The configuration of ``fp16_mac`` that accumulates in FP16 (the second FP16 MAC reading);
#: its rows appear when the registry has it.
FP16_ACC_CONFIG = "fp16-acc"


@dataclass(frozen=True)
class Design:
    """A registered ``unit`` at ``config`` with ``overrides`` (``(name, value)`` pairs)."""

    unit: str
    config: str | None = None
    overrides: tuple = ()

    def params(self, depth: int | None = None) -> dict:
        """Resolved parameters, with ``pipeline`` = ``depth`` unless None."""
        extra = dict(self.overrides)
        if depth is not None:
            extra["pipeline"] = depth
        return resolve_params(self.unit, self.config, extra)[1]

    @property
    def label(self) -> str:
        """``unit@config k=v``."""
        return (self.unit + (f"@{self.config}" if self.config else "")
                + "".join(f" {key}={value}" for key, value in self.overrides))

    @property
    def slug(self) -> str:
        """A path-safe name of the design."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.label.replace("@", "-").replace(" ", "-"))

    def depths(self) -> range:
        """The ``pipeline`` depths the unit's constructor accepts (0..max)."""
        return _depths(self)


#: Deepest ``pipeline`` tried when looking for a unit's range.
MAX_DEPTH = 64


@functools.lru_cache(maxsize=None)
def _depths(design: Design) -> range:
    spec = UNITS[design.unit]
    for depth in range(MAX_DEPTH + 1):
        try:
            spec.build(design.params(depth + 1))
        except ValueError:
            return range(depth + 1)
    raise ValueError(f"{design.label}: pipeline accepts every depth up to {MAX_DEPTH}")


@dataclass(frozen=True)
class Row:
    """One line of the table: ``design`` beside ``quote`` at ``clock`` (a key of
    :data:`~fpga.paper.sources.CLOCKS`).

    ``per``: the parameter whose value is the number of paper units in one instance (or an
    int; None: one). ``references``: row ids whose per-unit areas divide this row's (paper's
    and ours); empty for a reference itself. ``measure``: ``"total"`` or ``"combinational"``
    (the area without the flip-flops, for a quote that leaves registers out)."""

    row_id: str
    paper: str
    quote: Quote | None
    design: Design
    clock: str
    per: str | int | None = None
    references: tuple = ()
    measure: str = "total"
    note: str = ""

    @property
    def units(self) -> int:
        """Paper units in one instance of the design."""
        if self.per is None:
            return 1
        if isinstance(self.per, int):
            return self.per
        return int(self.design.params()[self.per])

    @property
    def clock_mhz(self) -> float:
        return CLOCKS[self.clock].mhz


def _has_fp16_acc() -> bool:
    return FP16_ACC_CONFIG in UNITS["fp16_mac"].configs


def rows() -> list[Row]:
    """The table's rows, in order (the FP16-accumulating MAC's rows only when ``fp16_mac``
    registers :data:`FP16_ACC_CONFIG`)."""
    mac, acc = Design("fp16_mac"), Design("fp16_mac", FP16_ACC_CONFIG)
    with_acc = _has_fp16_acc()

    def macs(prefix, quote, clock, measure="total"):
        out = [Row(f"{prefix}.mac", quote.paper, quote, mac, clock, measure=measure,
                   note="FP16 x FP16, FP32 accumulation")]
        if with_acc:
            out.append(Row(f"{prefix}.mac.fp16acc", quote.paper, quote, acc, clock,
                           measure=measure, note="FP16 x FP16, FP16 accumulation"))
        return out

    def refs(prefix):
        return (f"{prefix}.mac",) + ((f"{prefix}.mac.fp16acc",) if with_acc else ())

    kllm = refs("kllm")
    table = [
        *macs("kllm", TABLE_I["mac"], "KLLM"),
        Row("kllm.concat", "KLLM", TABLE_I["concat"], Design("kllm_concat", "kllm-a4-16"),
            "KLLM", per="lanes", references=kllm, note="16 Concat lanes, W4A4"),
        Row("kllm.counter.a4", "KLLM", TABLE_I["counter"],
            Design("kllm_idx_counter", "kllm-a4"), "KLLM", references=kllm,
            note="256 bins (W4A4)"),
        Row("kllm.counter.a3", "KLLM", TABLE_I["counter"],
            Design("kllm_idx_counter", "kllm-a3"), "KLLM", references=kllm,
            note="128 bins (W4A3)"),
        Row("kllm.counter.a4.spill", "KLLM", TABLE_I["counter"],
            Design("kllm_idx_counter", "kllm-a4", (("counts", "spill"),)), "KLLM",
            references=kllm, note="256 bins (W4A4), narrow counts with the overflow spill"),
        Row("kllm.counter.a3.spill", "KLLM", TABLE_I["counter"],
            Design("kllm_idx_counter", "kllm-a3", (("counts", "spill"),)), "KLLM",
            references=kllm, note="128 bins (W4A3), narrow counts with the overflow spill"),
        Row("kllm.column.a4", "KLLM", None, Design("kllm_column", "kllm-a4"), "KLLM",
            references=kllm, note="one output element: 16 Concat lanes, the 256-bin "
            "counter, FP32 weighted sum"),
        Row("kllm.column.a3", "KLLM", None, Design("kllm_column", "kllm-a3"), "KLLM",
            references=kllm, note="one output element: 16 Concat lanes, the 128-bin "
            "counter, FP32 weighted sum"),
        Row("kllm.orizuru", "KLLM", TABLE_I["orizuru"], Design("orizuru", "kllm-16"), "KLLM",
            references=kllm, note="the paper's time-multiplexed trees, k = 2"),
        Row("kllm.orizuru.units", "KLLM", TABLE_I["orizuru"],
            Design("orizuru", "kllm-16", (("structure", "units"),)), "KLLM",
            references=kllm, note="one 16-input unit of the 273-unit composition, k = 2"),
        Row("kllm.orizuru.unrolled", "KLLM", TABLE_I["orizuru"],
            Design("orizuru", "kllm-16", (("structure", "unrolled"),)), "KLLM",
            references=kllm, note="every comparison of a pop in space, k = 2"),
        *macs("p3", QUOTES["p3.mac"], "P3-LLM"),
        Row("p3.pe", "P3-LLM", QUOTES["p3.pe"], Design("p3_pe", "p3-pcu-pe"), "P3-LLM",
            references=refs("p3"), note="4-way FP8 x INT4/BitMoD dot product"),
        Row("p3.pcu.base", "P3-LLM", QUOTES["p3.pcu.base"], Design("fp16_pcu"), "P3-LLM",
            note="16 FP16 MACs (HBM-PIM's PCU)"),
        Row("p3.pcu", "P3-LLM", QUOTES["p3.pcu"], Design("p3_pcu", "p3-pcu"), "P3-LLM",
            references=("p3.pcu.base",), note="16 PEs"),
        Row("p3.pcu.te", "P3-LLM", QUOTES["p3.pcu"], Design("p3_pcu", "p3-pcu-te"), "P3-LLM",
            references=("p3.pcu.base",), note="16 PEs, two accumulator sets (section V-D)"),
        Row("oaken.quant", "Oaken", QUOTES["oaken.quant"],
            Design("oaken_quantizer", "oaken-16"), "Oaken",
            note="16 lanes, composes the decomposer"),
        Row("oaken.dequant", "Oaken", QUOTES["oaken.dequant"],
            Design("oaken_dequantizer", "oaken-16"), "Oaken", references=("oaken.quant",),
            note="16 lanes"),
        Row("oaken.decomposer", "Oaken", None, Design("oaken_decomposer", "oaken-16"), "Oaken",
            references=("oaken.quant",), note="16 lanes; inside the quantization engine"),
        Row("bitmod.fp16", "BitMoD", QUOTES["bitmod.fp16"], mac, "BitMoD",
            measure="combinational", note="FP16 x FP16, FP32 accumulation"),
    ]
    if with_acc:
        table.append(Row("bitmod.fp16.fp16acc", "BitMoD", QUOTES["bitmod.fp16"], acc, "BitMoD",
                         measure="combinational", note="FP16 x FP16, FP16 accumulation"))
    table.append(Row("bitmod.pe", "BitMoD", QUOTES["bitmod.pe"], Design("p3_pe", "p3-pcu-pe"),
                     "BitMoD", references=("bitmod.fp16",)
                     + (("bitmod.fp16.fp16acc",) if with_acc else ()),
                     measure="combinational", note="P3-LLM's PE against BitMoD's PE"))
    return table


def select_rows(table: list[Row], wanted) -> list[Row]:
    """The rows of ``table`` whose id is in ``wanted`` or starts with one of them plus a dot
    (``"kllm"`` selects every KLLM row), with the rows their ratios divide by; all when
    ``wanted`` is empty.

    Raises
    ------
    ValueError
        A name that selects nothing (the message lists the row ids).
    """
    wanted = list(wanted)
    if not wanted:
        return list(table)

    def hit(row, name):
        return row.row_id == name or row.row_id.startswith(name + ".")

    unknown = [name for name in wanted if not any(hit(row, name) for row in table)]
    if unknown:
        raise ValueError(f"unknown row id(s): {', '.join(unknown)}; known: "
                         f"{', '.join(row.row_id for row in table)}")
    chosen = {row.row_id for row in table if any(hit(row, name) for name in wanted)}
    chosen |= {ref for row in table if row.row_id in chosen for ref in row.references}
    return [row for row in table if row.row_id in chosen]
