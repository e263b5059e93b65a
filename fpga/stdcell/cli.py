"""``qllm stdcell [--unit NAME ...] [--library L ...] [--liberty FILE ...]``: the
generated units (``BUILD_DIR/verilog``, ``make verilog``) on open standard-cell libraries.

Libraries come from ``PDK_ROOT`` (``--pdk-root``; the volare/ciel layout) by name
(``sky130``, ``ihp``, ``asap7``; default the first two), or from explicit Liberty files
(``--liberty``, repeatable, one library named ``--library`` or ``custom``). Prints one row
per unit and library (um^2, NAND2-equivalents, flip-flop share, the critical path, the flop's
clock-to-Q and setup, the estimated Fmax) and writes ``BUILD_DIR/reports/stdcell.md`` and
``.csv``. Exit codes: 0; 1 if a run failed (no report written); 2 for bad input (one line
naming the value or the folder searched).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from qllm_cores.fpga.area import AreaInputError, find_units, positive_int_argument
from qllm_cores.fpga.jobs import Failure, run_jobs

from .flow import stdcell_job
from .liberty import LIBRARIES, LibraryError, find_liberty, library_facts

__all__ = ["main", "table"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
#: The libraries of a run without ``--library``.
DEFAULT_LIBRARIES = ("sky130", "ihp")
COLUMNS = ("unit", "library", "area_um2", "nand2_eq", "ff_share", "cells", "path_ps",
           "clock_to_q_ps", "setup_ps", "fmax_mhz")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="qllm stdcell", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--unit", action="append", default=[], metavar="NAME")
    parser.add_argument("--library", action="append", default=[], metavar="NAME",
                        help=f"one of {', '.join(LIBRARIES)} (repeatable; default: "
                             f"{', '.join(DEFAULT_LIBRARIES)}), or a name for --liberty")
    parser.add_argument("--liberty", action="append", default=[], type=Path, metavar="FILE",
                        help="Liberty file(s) of one library (.lib or .lib.gz)")
    parser.add_argument("--pdk-root", type=Path, metavar="DIR",
                        help="volare/ciel PDK root (default: $PDK_ROOT)")
    parser.add_argument("--jobs", type=positive_int_argument, default=2, metavar="N")
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--no-cache", action="store_true")
    arguments = parser.parse_args(argv)
    try:
        units = find_units(arguments.build_dir / "verilog", arguments.unit)
        libraries = _libraries(arguments)
    except (AreaInputError, LibraryError) as error:
        return _fail(str(error))
    cache = None if arguments.no_cache else arguments.build_dir / "cache"
    workdir = arguments.build_dir / "stdcell"
    runs = [((unit.name, library), stdcell_job, unit, library, workdir / unit.name, cache,
             files) for unit in units for library, files in libraries.items()]
    results, failed = {}, []
    for done, total, tag, result in run_jobs(runs, workers=arguments.jobs):
        if isinstance(result, Failure):
            failed.append(f"{'/'.join(tag)}: {result.headline}")
            _say(f"[{done}/{total}] {'/'.join(tag)}: FAILED {result.headline}")
            continue
        results[tag] = result
        _say(f"[{done}/{total}] {'/'.join(tag)}: {result['nand2_eq']:,.0f} NAND2-eq, "
             f"{result['fmax_mhz']:.0f} MHz")
    if failed:
        _say(f"fpga stdcell: {len(failed)} run(s) failed, no report written: "
             + "; ".join(failed))
        return EXIT_FAILED
    rows = [_row(unit.name, library, results[unit.name, library])
            for unit in units for library in libraries]
    text = table(rows)
    reports = arguments.build_dir / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "stdcell.md").write_text(text + "\n")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    (reports / "stdcell.csv").write_text(buffer.getvalue())
    print(text)
    _say(f"fpga stdcell: wrote {reports}/stdcell.md and .csv")
    return EXIT_OK


def _libraries(arguments) -> dict:
    """Library name -> its Liberty files (checked readable)."""
    if arguments.liberty:
        if len(arguments.library) > 1:
            raise LibraryError("--liberty gives one library: name it with one --library")
        missing = [str(path) for path in arguments.liberty if not path.is_file()]
        if missing:
            raise LibraryError(f"no Liberty file {', '.join(missing)}")
        name = arguments.library[0] if arguments.library else "custom"
        library_facts(arguments.liberty)                # readable, has a NAND2
        return {name: [path.resolve() for path in arguments.liberty]}
    names = arguments.library or list(DEFAULT_LIBRARIES)
    return {name: find_liberty(name, arguments.pdk_root) for name in names}


def _row(unit, library, result) -> dict:
    return {"unit": unit, "library": library, "area_um2": round(result["area"], 1),
            "nand2_eq": round(result["nand2_eq"]), "ff_share": round(result["ff_share"], 3),
            "cells": result["cells"], "path_ps": round(result["delay"]),
            "clock_to_q_ps": round(result["clock_to_q"]), "setup_ps": round(result["setup"]),
            "fmax_mhz": round(result["fmax_mhz"], 1)}


def table(rows) -> str:
    """The Markdown table of :func:`main`'s rows."""
    lines = ["| unit | library | um^2 | NAND2-eq | FF share | cells | path ps | "
             "clk-to-Q + setup ps | est. MHz |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['unit']} | {row['library']} | {row['area_um2']:,.1f} | "
                     f"{row['nand2_eq']:,} | {row['ff_share']:.0%} | {row['cells']:,} | "
                     f"{row['path_ps']:,} | {row['clock_to_q_ps'] + row['setup_ps']:,} | "
                     f"{row['fmax_mhz']:,.1f} |")
    return "\n".join(lines)


def _fail(message) -> int:
    _say(f"fpga stdcell: {message}")
    return EXIT_BAD_INPUT


def _say(message) -> None:
    print(message, file=sys.stderr, flush=True)
