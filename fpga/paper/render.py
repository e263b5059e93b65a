"""Tables of ``make paper``'s area comparison: values per row and library, Markdown, CSV and
the notes.

Input: the rows (:mod:`fpga.paper.rows`) and per ``(row id, library)`` an *outcome*: a dict
with ``depth`` (the depth chosen by :mod:`fpga.paper.search`), ``met`` (its estimated clock
meets ``target`` MHz), ``depths`` (the legal range), ``result`` and ``result0`` (the standard
cell results at that depth and at depth 0: :meth:`fpga.stdcell.StdcellResult.as_dict`, or
a :class:`fpga.jobs.Failure` where that synthesis failed: its cells read "failed").
"""

from __future__ import annotations

import csv
import io

from qllm_cores.fpga.jobs import Failure

from .sources import CLOCKS, NAND2_28NM_UM2, nand2_eq_28nm, um2_28nm

__all__ = ["COLUMNS", "CSV_COLUMNS", "nand2_per_unit", "row_values", "table_csv",
           "table_markdown"]


def nand2_per_unit(row, result) -> float | None:
    """NAND2-equivalents of one paper unit of ``row`` in ``result``: the whole area, or for
    ``measure == "combinational"`` the area less its sequential cells (None for a failed
    synthesis)."""
    if isinstance(result, Failure):
        return None
    eq = result["nand2_eq"]
    if row.measure == "combinational" and result["area"]:
        eq *= 1 - result["sequential_area"] / result["area"]
    return eq / row.units


def row_values(rows, outcomes: dict, library: str) -> list[dict]:
    """One dict per row on ``library``: the row, the paper's per-unit um^2 and NAND2-eq, ours
    (NAND2-eq, 28 nm um^2, both per paper unit, at the chosen depth and at depth 0), ours
    over the paper's, and the ratios to the references (the paper's, ours: one per
    reference, None where a reference is missing)."""
    by_id = {row.row_id: row for row in rows}
    ours = {row.row_id: nand2_per_unit(row, outcomes[row.row_id, library]["result"])
            for row in rows if (row.row_id, library) in outcomes}
    out = []
    for row in rows:
        outcome = outcomes.get((row.row_id, library))
        if outcome is None:
            continue
        mine = ours[row.row_id]
        quote = row.quote
        paper_um2 = quote.per_unit_um2 if quote else None
        refs = [by_id[ref] for ref in row.references if ref in by_id]
        first = refs[0] if refs else None
        paper_ratio = (paper_um2 / first.quote.per_unit_um2
                       if paper_um2 is not None and first is not None and first.quote
                       else None)
        um2 = None if mine is None else um2_28nm(mine)
        out.append({
            "row": row, "outcome": outcome, "paper_um2": paper_um2,
            "paper_nand2": (nand2_eq_28nm(paper_um2)
                            if paper_um2 is not None and quote.absolute else None),
            "nand2": mine, "um2_28nm": um2,
            "nand2_0": nand2_per_unit(row, outcome["result0"]),
            "ours_over_paper": (um2 / paper_um2
                                if um2 is not None and paper_um2 and quote.absolute else None),
            "paper_ratio": paper_ratio,
            "ours_ratios": [mine / ours[ref.row_id] if mine is not None and ours.get(ref.row_id)
                            else None for ref in refs],
            "references": [ref.row_id for ref in refs],
        })
    return out


COLUMNS = ("row", "paper (verbatim cells)", "paper um^2 / unit", "paper NAND2-eq",
           "ours: unit (per paper unit)", "depth", "est. MHz (target)", "ours NAND2-eq",
           "ours 28 nm um^2", "ours / paper", "ratio: paper", "ratio: ours",
           "depth 0: NAND2-eq, MHz")
"""Columns of the Markdown table."""


def _num(value, digits=3) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _mhz(result) -> str:
    return "failed" if isinstance(result, Failure) else f"{result['fmax_mhz']:.0f}"


def _round(value, digits=1):
    return "" if value is None else round(value, digits)


def _cell(text) -> str:
    return str(text).replace("|", "\\|")


def table_markdown(rows, outcomes: dict, library: str) -> str:
    """The Markdown table of ``rows`` on ``library`` (`COLUMNS`)."""
    numeric = {2, 3, 6, 7, 8, 9, 10, 11}
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "".join("---:|" if i in numeric else "---|" for i in range(len(COLUMNS)))]
    for v in row_values(rows, outcomes, library):
        row, outcome, quote = v["row"], v["outcome"], v["row"].quote
        result, result0 = outcome["result"], outcome["result0"]
        paper = (f"{quote.paper} {quote.table}: {quote.text}" if quote else
                 f"{row.paper}: no row ({row.note})")
        per = f" / {row.units}" if row.units != 1 else ""
        comb = ", without flip-flops" if row.measure == "combinational" else ""
        ours = f"{row.design.label}{per}{comb}"
        depth = (f"{outcome['depth']} of 0..{outcome['depths'][-1]}"
                 + ("" if outcome["met"] else " (misses)"))
        clock = f"{_mhz(result)} ({outcome['target']:.0f})"
        ratios = " / ".join(_num(r) for r in v["ours_ratios"]) if v["ours_ratios"] else "-"
        cells = [row.row_id, paper, _num(v["paper_um2"], 5), _num(v["paper_nand2"]), ours,
                 depth, clock, _num(v["nand2"]), _num(v["um2_28nm"], 4),
                 _num(v["ours_over_paper"]), _num(v["paper_ratio"]), ratios,
                 f"{_num(v['nand2_0'])}, {_mhz(result0)}"]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


CSV_COLUMNS = ("library", "row_id", "paper", "table", "paper_cells", "paper_per_unit_um2",
               "paper_nand2_eq", "unit", "config", "overrides", "units_per_instance",
               "measure", "paper_clock_mhz", "target_mhz", "depth", "max_depth", "met",
               "fmax_mhz", "nand2_eq_per_unit", "um2_28nm_per_unit", "library_um2_per_unit",
               "ff_share", "ours_over_paper", "paper_ratio", "references", "ours_ratios",
               "depth0_nand2_eq_per_unit", "depth0_fmax_mhz")


def table_csv(rows, outcomes: dict, libraries) -> str:
    """One CSV line per row and library (`CSV_COLUMNS`; ratios joined by ``;``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for library in libraries:
        for v in row_values(rows, outcomes, library):
            row, outcome, quote = v["row"], v["outcome"], v["row"].quote
            result, result0 = outcome["result"], outcome["result0"]
            ok = not isinstance(result, Failure)
            writer.writerow([
                library, row.row_id, row.paper, quote.table if quote else "",
                " / ".join(quote.cells) if quote else "", _blank(v["paper_um2"]),
                _blank(v["paper_nand2"]), row.design.unit, row.design.config or "",
                " ".join(f"{k}={val}" for k, val in row.design.overrides), row.units,
                row.measure, CLOCKS[row.clock].mhz, round(outcome["target"], 1),
                outcome["depth"], outcome["depths"][-1], outcome["met"],
                round(result["fmax_mhz"], 1) if ok else "failed", _round(v["nand2"]),
                _round(v["um2_28nm"]), round(result["area"] / row.units, 1) if ok else "",
                round(result["sequential_area"] / result["area"], 4)
                if ok and result["area"] else "",
                _blank(v["ours_over_paper"]), _blank(v["paper_ratio"]),
                ";".join(v["references"]),
                ";".join("" if r is None else f"{r:.4g}" for r in v["ours_ratios"]),
                _round(v["nand2_0"]),
                "failed" if isinstance(result0, Failure) else round(result0["fmax_mhz"], 1)])
    return buffer.getvalue()


def _blank(value):
    return "" if value is None else (f"{value:.6g}" if isinstance(value, float) else value)


def library_line(library: str, fo4, fo4_28nm: float, targets: dict) -> str:
    """One line per library: its FO4, the ratio to 28 nm and the scaled clocks."""
    clocks = ", ".join(f"{paper} {CLOCKS[paper].mhz:g} MHz -> {mhz:.0f} MHz"
                       for paper, mhz in targets.items())
    return (f"{library}: FO4 {fo4.delay:.1f} ps ({fo4.cell}, load {fo4.load:.4g}, input "
            f"slews {fo4.slew_rise:.1f}/{fo4.slew_fall:.1f} ps) = {fo4.delay / fo4_28nm:.2f} "
            f"x the 28 nm {fo4_28nm:g} ps; clocks: {clocks}")


def implied_nand2_lines(rows, outcomes: dict, libraries) -> list[str]:
    """The 28 nm NAND2 area the papers' FP16 MACs imply (their um^2 / our fp16_mac's
    NAND2-eq), beside the :data:`~fpga.paper.sources.NAND2_28NM_UM2` assumed."""
    out = []
    for library in libraries:
        for v in row_values(rows, outcomes, library):
            row = v["row"]
            if row.row_id in ("kllm.mac", "p3.mac", "bitmod.fp16") and v["paper_um2"] \
                    and v["nand2"]:
                out.append(f"{library} {row.row_id}: {v['paper_um2']:,.1f} um^2 / "
                           f"{v['nand2']:,.0f} NAND2-eq = {v['paper_um2'] / v['nand2']:.3f} "
                           f"um^2 (assumed {NAND2_28NM_UM2})")
    return out
