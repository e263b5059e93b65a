"""KLLM's efficiency claim in ``make paper``: index-MACs per cycle per FP16 MAC of area for each
counter structure, and the PE lane composed at Table I's proportions.

KLLM Table I prices a 16-input Index Distribution Counter at 2.99 FP16 MACs for 16 index-MACs a
cycle: 16 / 2.99 = 5.35 index-MACs a cycle per FP16 MAC of area, 5.35 times a plain FP16 MAC
(one MAC a cycle per FP16 MAC of area). Its PE lane holds 4096 Concat units, 32 counters and 32
FP16 MACs (and a 2 KB weight buffer) and performs 32 x 16 = 512 index-MACs a cycle. The same
figures from our rows (:mod:`fpga.paper.rows`: ``kllm.mac``, ``kllm.concat`` and every
``kllm.counter.*`` and ``kllm.column.*`` row), per library.
"""

from __future__ import annotations

from .render import row_values
from .sources import TABLE_I, um2_28nm

__all__ = ["efficiency_table", "lane_table", "LANE_CONCATS", "LANE_COUNTERS", "LANE_MACS"]

#: Table I's PE lane: Concat units, 16-input counters and FP16 MACs in one lane.
LANE_CONCATS = TABLE_I["concat"].units
LANE_COUNTERS = TABLE_I["counter"].units
LANE_MACS = TABLE_I["mac"].units
#: Index-MACs a 16-input counter performs a cycle.
COUNTER_RATE = 16


def _by_id(rows, outcomes, library):
    return {v["row"].row_id: v for v in row_values(rows, outcomes, library)}


def _paper_counter_macs() -> float:
    return TABLE_I["counter"].per_unit_um2 / TABLE_I["mac"].per_unit_um2


def efficiency_table(rows, outcomes, library) -> str:
    """Markdown: per counter row, its NAND2-eq, in FP16 MACs (ours: ``kllm.mac``), index-MACs
    a cycle, and index-MACs a cycle per FP16 MAC of area, beside Table I's. Empty without the
    MAC or a counter row."""
    values = _by_id(rows, outcomes, library)
    mac = values.get("kllm.mac", {}).get("nand2")
    counters = [v for key, v in values.items() if key.startswith("kllm.counter")]
    if not mac or not counters:
        return ""
    paper = _paper_counter_macs()
    lines = ["| counter | structure | NAND2-eq | FP16 MACs | index-MACs / cycle | "
             "per FP16-MAC area | / paper's |",
             "|---|---|---:|---:|---:|---:|---:|",
             f"| KLLM Table I | (not stated) | - | {paper:.2f} | {COUNTER_RATE} | "
             f"{COUNTER_RATE / paper:.2f} | 1 |"]
    for v in counters:
        row = v["row"]
        if v["nand2"] is None:
            lines.append(f"| {row.row_id} | {row.note} | failed | | | | |")
            continue
        macs = v["nand2"] / mac
        rate = row.design.params()["n_inputs"]
        lines.append(f"| {row.row_id} | {row.design.label} (depth {v['outcome']['depth']}) | "
                     f"{v['nand2']:,.0f} | {macs:.2f} | {rate} | {rate / macs:.2f} | "
                     f"{(rate / macs) / (COUNTER_RATE / paper):.2f} |")
    return "\n".join(lines)


def lane_table(rows, outcomes, library) -> str:
    """Markdown: the PE lane at Table I's proportions (Concat units, counters, FP16 MACs) for
    each counter row, and 32 of each ``kllm.column.*`` row, in NAND2-eq and 28 nm mm^2, beside
    Table I's lane (logic alone, and with its weight buffer); index-MACs a cycle per FP16 MAC
    of area, which is also the area of the FP16 MACs that give the same rate over the
    lane's."""
    values = _by_id(rows, outcomes, library)
    mac = values.get("kllm.mac", {}).get("nand2")
    concat = values.get("kllm.concat", {}).get("nand2")
    if not mac or not concat:
        return ""
    rate = LANE_COUNTERS * COUNTER_RATE
    paper_mac = TABLE_I["mac"].per_unit_um2
    logic = sum(TABLE_I[key].area_um2 for key in ("concat", "counter", "mac"))
    buffer = TABLE_I["wgt_buffer"].area_um2
    lines = ["| lane | NAND2-eq | 28 nm mm^2 | in FP16 MACs | index-MACs / cycle | per "
             "FP16-MAC area (= FP16 MAC lane of the same rate / this lane) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, um2 in ((f"KLLM Table I: {LANE_CONCATS} Concat + {LANE_COUNTERS} counters + "
                       f"{LANE_MACS} FP16 MACs", logic),
                      ("KLLM Table I, with the 2 KB weight buffer", logic + buffer)):
        macs = um2 / paper_mac
        lines.append(f"| {name} | - | {um2 / 1e6:.4f} | {macs:.1f} | {rate} | "
                     f"{rate / macs:.2f} |")

    def add(name, eq):
        macs = eq / mac
        lines.append(f"| {name} | {eq:,.0f} | {um2_28nm(eq) / 1e6:.4f} | {macs:.1f} | {rate} | "
                     f"{rate / macs:.2f} |")

    for key, v in values.items():
        if key.startswith("kllm.counter") and v["nand2"] is not None:
            add(f"{LANE_CONCATS} x kllm.concat + {LANE_COUNTERS} x {key} + {LANE_MACS} x "
                f"kllm.mac", LANE_CONCATS * concat + LANE_COUNTERS * v["nand2"]
                + LANE_MACS * mac)
        elif key.startswith("kllm.column") and v["nand2"] is not None:
            add(f"{LANE_COUNTERS} x {key} (each: 16 Concat lanes, a counter, its FP32 "
                f"weighted sum)", LANE_COUNTERS * v["nand2"])
    return "\n".join(lines)
