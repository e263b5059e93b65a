"""One command line for the studies and the board link: ``qllm {area,fmax,report,
sweep,accllm,paper-area,counter-split,counter-bound,stdcell,bitstream,host} ...``.

``area [--unit NAME ...] [--target T ...] [--jobs N]`` is here; the others are the studies'
own command lines (``qllm <command> --help``), which ``python -m qllm_cores.fpga.<module>``
still runs. Exit codes of ``area``: 0 on success, 1 if any synthesis run failed, 2 for bad
arguments or when the units to report on cannot be found.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from qllm_cores.fpga.area import (
    AreaInputError,
    area_csv,
    area_markdown,
    area_table,
    comparison_table,
    find_units,
    positive_int_argument,
    remove_reports,
    synthesize_all,
    write_reports,
)
from qllm_cores.fpga.yosys import TARGETS, SynthError, yosys_version

EXIT_OK = 0
EXIT_SYNTH_FAILED = 1
EXIT_BAD_INPUT = 2

#: Commands run by a study's own ``main(argv)``: name -> (module, one-line help).
COMMANDS = {
    "fmax": ("qllm_cores.fpga.fmax",
             "nextpnr Fmax of the generated units in the registered wrapper"),
    "report": ("qllm_cores.fpga.report",
               "every unit at its paper configuration: area, Fmax, ratios"),
    "sweep": ("qllm_cores.fpga.sweep", "area (and Fmax) against one parameter of a unit"),
    "accllm": ("qllm_cores.fpga.accllm_table", "AccLLM DSP packing against plain multipliers"),
    "paper-area": ("qllm_cores.fpga.paper.cli",
                   "the papers' hardware tables beside ours, standard cells"),
    "counter-split": ("qllm_cores.fpga.kllm_counter_split",
                      "the KLLM counter's area split by block"),
    "counter-bound": ("qllm_cores.fpga.kllm_counter_bound",
                      "the KLLM counter's lower bound at its structure, standard cells"),
    "stdcell": ("qllm_cores.fpga.stdcell.cli",
                "standard-cell area and estimated Fmax on open PDKs"),
    "bitstream": ("qllm_cores.fpga.bridge.board",
                  "a unit behind the UART bridge, built for a board"),
    "host": ("qllm_cores.fpga.bridge.host",
             "stream beats to a unit on a board, check its golden model"),
}


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default: ``sys.argv[1:]``); return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])
    arguments = _parser().parse_args(argv)
    return arguments.command_function(arguments)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qllm", description="FPGA and CMOS area estimates of the generated units."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    area = commands.add_parser(
        "area",
        help="synthesise the generated units and write reports/area.md and reports/area.csv",
    )
    area.add_argument(
        "--unit",
        action="append",
        default=[],
        metavar="NAME",
        help="unit to report on (repeatable; default: every unit in BUILD_DIR/verilog)",
    )
    area.add_argument(
        "--target",
        action="append",
        default=[],
        choices=list(TARGETS),
        help="target to synthesise for (repeatable; default: all)",
    )
    area.add_argument(
        "--jobs", type=positive_int_argument, default=2, metavar="N", help="parallel Yosys runs"
    )
    area.add_argument(
        "--build-dir", type=Path, default=Path("build"), help="build directory (default: build)"
    )
    area.set_defaults(command_function=_area_command)
    for name, (module, text) in COMMANDS.items():
        # Listed for --help; main() hands their arguments to the module before parsing.
        commands.add_parser(name, help=f"{text} (qllm {name} --help)",
                            add_help=False)
    return parser


def _area_command(arguments: argparse.Namespace) -> int:
    build_dir: Path = arguments.build_dir
    targets = [target for target in TARGETS if not arguments.target or target in arguments.target]
    try:
        units = find_units(build_dir / "verilog", arguments.unit)
    except AreaInputError as error:
        _report(f"fpga area: {error}")
        return EXIT_BAD_INPUT
    try:
        version = yosys_version()  # also compiles the WebAssembly once, before the pool
    except SynthError as error:
        _report(f"fpga area: {error}")
        return EXIT_SYNTH_FAILED

    results, failures = synthesize_all(
        units, targets, build_dir / "synth", jobs=arguments.jobs, progress=_report
    )
    if failures:
        for failure in failures:
            _report(f"\n=== {' / '.join(failure.job)} failed ===\n{failure.message}")
        failed_pairs = ", ".join("/".join(failure.job) for failure in failures)
        stale_reports = remove_reports(build_dir / "reports")
        removed = f" (removed stale {', '.join(map(str, stale_reports))})" if stale_reports else ""
        _report(
            f"\nfpga area: {len(failures)} of {len(units) * len(targets)} synthesis runs "
            f"failed: {failed_pairs}; no report written{removed}"
        )
        return EXIT_SYNTH_FAILED

    markdown_path, csv_path = write_reports(
        build_dir / "reports",
        area_markdown(units, targets, results, version),
        area_csv(units, targets, results),
    )
    print(area_table(units, targets, results))
    comparison = comparison_table(units, targets, results)
    if comparison:
        print()
        print(comparison)
    _report(f"fpga area: wrote {markdown_path} and {csv_path}")
    return EXIT_OK


def _report(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
