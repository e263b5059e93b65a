"""``qllm paper-area``: the papers' hardware tables beside ours (``make paper``).

Usage::

    qllm paper-area [--library L ...] [--row ID ...] [--jobs N] [--build-dir DIR]
                              [--pdk-root DIR] [--no-cache]

Libraries: ``sky130`` and ``ihp`` by default, ``asap7`` on request (``--library`` replaces the
default). Prints, per library, one table of every row of :func:`fpga.paper.rows.rows` (the
paper's cells, its per-unit area in um^2 and NAND2-eq; ours in NAND2-eq and 28 nm um^2 at the
depth :mod:`fpga.paper.search` chose, its estimated clock against the scaled target, and depth
0 beside it), then Orizuru's comparison counts and the notes; writes
``DIR/reports/paper-area.md`` and ``.csv``. Progress and the wall time go to standard error.
A synthesis that fails is marked "failed" in its cells and listed under the tables (the
search goes on past it). Exit codes: 0; 1 if a synthesis failed (the report is written with
the failures marked); 2 for bad input (one line naming the value or the folder searched).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from qllm_cores.fpga.area import positive_int_argument, write_reports
from qllm_cores.fpga.stdcell.liberty import (FO4_28NM_PS, FO4_28NM_SOURCE, LIBRARIES, LibraryError,
                                  find_liberty, fo4_delay)

from .comparisons import orizuru_counts
from .kllm_lane import efficiency_table, lane_table
from .render import implied_nand2_lines, library_line, table_csv, table_markdown
from .rows import FP16_ACC_CONFIG, rows, select_rows
from .search import DepthSearch, run_searches, target_mhz
from .sources import CLOCKS, NAND2_28NM_SOURCE, NAND2_28NM_UM2, lane_rows_check

__all__ = ["DEFAULT_LIBRARIES", "main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
REPORT_NAME = "paper-area"
#: The libraries of a run without ``--library`` (``asap7`` on request).
DEFAULT_LIBRARIES = ("sky130", "ihp")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qllm paper-area",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", action="append", default=[], metavar="NAME",
                        help=f"one of {', '.join(LIBRARIES)} (repeatable; default: "
                             f"{' and '.join(DEFAULT_LIBRARIES)})")
    parser.add_argument("--row", action="append", default=[], metavar="ID",
                        help="only this row (or every row starting 'ID.'; repeatable) and "
                             "the rows its ratios divide by")
    parser.add_argument("--jobs", type=positive_int_argument, default=2, metavar="N",
                        help="parallel syntheses (default 2)")
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--pdk-root", type=Path, metavar="DIR",
                        help="volare/ciel PDK root (default: $PDK_ROOT)")
    parser.add_argument("--no-cache", action="store_true",
                        help="synthesise even what build/cache holds")
    return parser


def main(argv=None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    arguments = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        table = select_rows(rows(), arguments.row)
        names = list(dict.fromkeys(arguments.library)) or list(DEFAULT_LIBRARIES)
        libraries = {name: find_liberty(name, arguments.pdk_root) for name in names}
        fo4 = {name: fo4_delay(files, LIBRARIES[name].dont_use)
               for name, files in libraries.items()}
    except (ValueError, LibraryError) as error:
        _say(f"paper-area: {error}")
        return EXIT_BAD_INPUT
    designs = {row.design: row.design for row in table}
    searches, keys = {}, {}
    for row in table:
        for library in libraries:
            target = target_mhz(row.clock_mhz, FO4_28NM_PS, fo4[library].delay)
            key = (row.design, library, round(target, 3))
            keys[row.row_id, library] = key
            if key not in searches:
                searches[key] = DepthSearch(target, row.design.depths())
    _say(f"paper-area: {len(table)} rows x {', '.join(libraries)}; {len(searches)} depth "
         f"searches, {arguments.jobs} syntheses at once")
    cache = None if arguments.no_cache else arguments.build_dir / "cache"
    results, failures = run_searches(searches, designs, libraries, arguments.build_dir, cache,
                                     arguments.jobs, _say)
    reports = arguments.build_dir / "reports"
    outcomes = {}
    for (row_id, library), key in keys.items():
        search = searches[key]
        known = results[key[0], library]
        outcomes[row_id, library] = {"depth": search.chosen, "met": search.met,
                                     "target": search.target, "depths": search.depths,
                                     "result": known[search.chosen], "result0": known[0]}
    syntheses = sum(len(known) for known in results.values())
    cached = sum(1 for known in results.values() for r in known.values()
                 if isinstance(r, dict) and r.get("cached"))
    seconds = time.perf_counter() - started
    text = _report(table, outcomes, libraries, fo4)
    if failures:
        text += "\n\n## Failed syntheses\n\n" + "\n".join(
            f"* {failure.job[0][0].label} pipeline={failure.job[1]} on {failure.job[0][1]}: "
            f"{failure.headline}" for failure in failures)
        for failure in failures:
            _say(f"\n=== {failure.job[0][0].label} pipeline={failure.job[1]} on "
                 f"{failure.job[0][1]} failed ===\n{failure.message}")
    footer = (f"{syntheses} syntheses ({cached} from build/cache), wall time {seconds:.0f} s "
              f"with {arguments.jobs} at once")
    markdown_path, csv_path = write_reports(
        reports, "# The papers' hardware tables beside ours\n\n" + text + f"\n\n{footer}.\n",
        table_csv(table, outcomes, libraries), REPORT_NAME)
    print(text)
    print()
    print(footer)
    _say(f"paper-area: wrote {markdown_path} and {csv_path}"
         + (f"; {len(failures)} synthesis run(s) failed (marked in the tables)"
            if failures else ""))
    return EXIT_FAILED if failures else EXIT_OK


def _report(table, outcomes, libraries, fo4) -> str:
    parts = []
    for library in libraries:
        papers = dict.fromkeys(row.clock for row in table)
        targets = {paper: target_mhz(CLOCKS[paper].mhz, FO4_28NM_PS, fo4[library].delay)
                   for paper in papers}
        parts += [f"## {library}", "", library_line(library, fo4[library], FO4_28NM_PS,
                                                    targets), "",
                  table_markdown(table, outcomes, library), ""]
    for library in libraries:
        efficiency = efficiency_table(table, outcomes, library)
        if efficiency:
            parts += [f"## KLLM's efficiency claim on {library}: index-MACs a cycle per FP16 "
                      "MAC of area", "", efficiency, ""]
        lane = lane_table(table, outcomes, library)
        if lane:
            parts += [f"## KLLM's PE lane on {library}, composed at Table I's proportions", "",
                      lane, ""]
    counts = orizuru_counts(16, 2)
    parts += ["## Orizuru comparisons (n = 16, k = 2: the kllm-16 configuration)", "",
              "| count | comparisons |", "|---|---:|",
              f"| KLLM section IV-C: 1.5N + 2k log2(N) | {counts.formula:g} |",
              f"| golden model (golden.kllm.orizuru.comparison_count) | {counts.golden} |",
              f"| RTL, unrolled structure: comparators = comparisons per vector | "
              f"{counts.unrolled} |",
              f"| RTL, tree structure (the paper's): comparators in hardware | {counts.tree} |",
              "", "## Notes", ""]
    parts += [f"* {note}" for note in _notes(table, outcomes, libraries)]
    return "\n".join(parts)


def _notes(table, outcomes, libraries) -> list[str]:
    lane_sum, lane = lane_rows_check()
    ids = {row.row_id for row in table}
    notes = [
        "Ours: the standard-cell flow (fpga/stdcell, docs/stdcell.md): area-mapped netlist in "
        "NAND2-equivalents (area / the library's smallest NAND2), and a clock estimated from "
        "ABC's delay-mapped critical path plus the flip-flop's clock-to-Q and setup. 28 nm "
        f"um^2 = NAND2-eq x {NAND2_28NM_UM2} um^2: {NAND2_28NM_SOURCE}. Paper NAND2-eq = its "
        "um^2 / the same figure.",
        "Depth: the shallowest `pipeline` whose estimated clock meets the paper's clock x "
        f"28 nm FO4 / the library's FO4 (28 nm FO4 {FO4_28NM_PS:g} ps: {FO4_28NM_SOURCE}); "
        "searched from 0, then one guess from its clock, the deepest, and bisection; '(misses)': "
        "even the deepest misses. Depth 0 is given beside it.",
        f"KLLM Table I: per unit = the row's area / the units it names; the per-lane rows add "
        f"up to {lane_sum:.4f} mm^2 = the PE Lane row / 16 = {lane:.4f} mm^2 (area, not "
        "power). The table does not say W4A4 or W4A3: the counter is given at both.",
    ]
    acc = any(row.row_id.endswith(".fp16acc") for row in table)
    notes.append("FP16 MAC readings: fp16_mac accumulates in FP32; ratios list one value per "
                 "reference, "
                 + ("the second against fp16_mac@" + FP16_ACC_CONFIG + " (FP16 accumulation)."
                    if acc else
                    f"here only that one (fp16_mac has no {FP16_ACC_CONFIG} configuration "
                    "yet; its rows appear when it is registered)."))
    if ids & {"p3.pe", "p3.pcu"}:
        notes.append("P3-LLM: Table VIII gives one PE (4 MACs) against HBM-PIM's FP16 MAC (1 "
                     "MAC) at 1 GHz; Table VII gives the compute area of all PCUs of the "
                     "device scaled to a 20 nm DRAM process, so only its ratio (8.4 / 7.7) "
                     "compares, with p3_pcu / fp16_pcu.")
    if ids & {"oaken.quant", "oaken.dequant"}:
        notes.append("Oaken Table 4: the engines' lane count is not stated, so their um^2 "
                     "compare with our 16-lane units only in size class; their shares of a "
                     "compute core (1.86 %, 6.35 %) have no counterpart (no MPU/VPU here); "
                     "the dequantization / quantization ratio compares.")
    if ids & {"bitmod.pe", "bitmod.fp16"}:
        notes.append("BitMoD: its sheet is not in the texts here (P3-LLM's Table VIII has "
                     "its PE with registers, 1291.6 um^2 for 2 MACs); ours without "
                     "flip-flops, i.e. area less the sequential cells of the mapped netlist.")
    notes += [f"Implied 28 nm NAND2 area, {line}"
              for line in implied_nand2_lines(table, outcomes, libraries)]
    return notes


def _say(message) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
