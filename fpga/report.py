"""One table of every unit at its paper configuration: area, Fmax and baseline ratios.

``qllm report [--unit U ...] [--jobs N] [--build-dir build]`` (``make report``)

1. generates every row of `REPORT_ROWS` (a registered unit at a named paper configuration,
   the registry's ``report`` entries)
   and, for a unit with a registered baseline, that baseline with the parameters the two
   share (same ``n``/``k``/``width`` for Orizuru's scan, same mode and X width for AccLLM's
   plain multipliers) into ``BUILD_DIR/report/verilog/<row>/``;
2. synthesizes each with the area flows of `fpga.yosys` (iCE40 UP5K, ECP5, Xilinx ``xcup``)
   and the standard-cell flow of `fpga.stdcell` (sky130 and IHP from ``PDK_ROOT``), skipping
   the targets a unit's manifest excludes (a DSP48E2 instance is Xilinx only);
3. places and routes each with nextpnr inside `fpga.fmax`'s registered timing wrapper on
   iCE40 UP5K and ECP5 25F; a design that does not fit the 25F (or whose registry row skips
   it: ``fmax_skip``) is placed on the 85F, and a design that does not fit the UP5K is
   reported as such, with the resource it lacks;
4. writes ``BUILD_DIR/reports/report.md``, ``report.csv`` (long format) and ``report.json``
   (everything the tables are rendered from) and prints the Markdown.

``qllm report --publish docs/results [--plot PNG ...] [--readme docs/results.md]`` copies
``report.json`` (and the plots) to the published folder and rewrites the page's "Results"
section from them, so that every number there comes from a command
(`fpga.report_render.render_readme_section`, links relative to the page;
``tests/test_report.py`` checks docs/results.md against the published JSON).

LUT and FF counts are Yosys's (the unit alone, as in ``make area``); nextpnr's iCE40 report
only counts logic cells. Fmax is nextpnr's achieved figure for ``clk`` at a fixed seed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from qllm_cores.fpga.area import (Unit, area_job, find_units, format_params, largest_first,
                                  positive_int_argument)
from qllm_cores.fpga.fmax import fmax_job, tool_versions
from qllm_cores.fpga.jobs import Failure, JobSetupError, run_jobs
from qllm_cores.fpga.nextpnr import FmaxError
from qllm_cores.fpga.report_render import (AREA_TARGETS, FMAX_COLUMNS, STDCELL_TARGETS, publish,
    render_csv, render_markdown)
from qllm_cores.fpga.stdcell import LibraryError, find_liberty, stdcell_job
from qllm_cores.gen.registry import UNITS, resolve_params
from qllm_cores.gen.verilog import generate

__all__ = [
    "REPORT_ROWS",
    "ReportRow",
    "baseline_row",
    "main",
    "run_report",
    "stdcell_area_job",
]



@dataclass(frozen=True)
class ReportRow:
    """A unit at a configuration: a named paper configuration and/or parameter overrides.

    Attributes
    ----------
    unit : str
        Registered unit name.
    config : str or None
        Named configuration of the unit (``gen.registry``), or None for the defaults.
    overrides : tuple of (str, value)
        Parameters set on top of the configuration (used for derived baselines).
    baseline_of : str or None
        Label of the row this row is the baseline of.
    fmax : bool
        Whether to place and route the row (False: area only, the reason given where the row
        is listed).
    fmax_skip : tuple of str
        Devices of the Fmax columns not tried for this row (``gen.registry.ReportConfig``).
    """

    unit: str
    config: str | None = None
    overrides: tuple[tuple[str, object], ...] = ()
    baseline_of: str | None = None
    fmax: bool = True
    fmax_skip: tuple[str, ...] = ()

    @property
    def params(self) -> dict:
        return resolve_params(self.unit, self.config, dict(self.overrides))[1]

    @property
    def label(self) -> str:
        """Unique, path-safe row name: ``unit``, ``unit@config``, ``unit@k=v,...`` or
        ``unit@config,k=v,...``."""
        parts = ([self.config] if self.config else []) + [
            f"{key}={value}" for key, value in self.overrides]
        return f"{self.unit}@" + ",".join(parts) if parts else self.unit


REPORT_ROWS: tuple[ReportRow, ...] = tuple(
    ReportRow(unit, row.config, tuple(row.overrides), row.baseline_of, row.fmax,
              tuple(row.fmax_skip))
    for unit, spec in UNITS.items() for row in spec.report)
"""The rows of ``make report``: every unit's ``report`` configurations in the registry's order
(`gen.registry.ReportConfig`, where each row's reason is given); baselines are derived by
`baseline_row`."""


def baseline_row(row: ReportRow) -> ReportRow | None:
    """The registered baseline of `row`'s unit, with every parameter the two units share set
    to `row`'s value except ``pipeline`` (each circuit at its own timing-closed default
    depth); None if the unit has no baseline."""
    spec = UNITS[row.unit]
    if spec.baseline is None:
        return None
    baseline_defaults = UNITS[spec.baseline].defaults
    params = row.params
    overrides = tuple((key, params[key]) for key in baseline_defaults
                      if key in params and key != "pipeline"
                      and params[key] != baseline_defaults[key])
    return ReportRow(spec.baseline, None, overrides, baseline_of=row.label)


def report_rows(units: Sequence[str] = ()) -> list[ReportRow]:
    """`REPORT_ROWS` of the named units (all when empty), each followed by its baseline the
    first time that baseline appears."""
    unknown = [unit for unit in units if unit not in {row.unit for row in REPORT_ROWS}]
    if unknown:
        known = ", ".join(dict.fromkeys(row.unit for row in REPORT_ROWS))
        raise ValueError(f"unit(s) not in the report: {', '.join(unknown)}; known: {known}")
    rows: list[ReportRow] = []
    seen: set[str] = set()
    for row in REPORT_ROWS:
        if units and row.unit not in units:
            continue
        for candidate in (row, baseline_row(row)):
            if candidate is not None and candidate.label not in seen:
                seen.add(candidate.label)
                rows.append(candidate)
    return rows


def baseline_label(row: ReportRow) -> str | None:
    base = baseline_row(row)
    return None if base is None else base.label


# --------------------------------------------------------------------------- running


def generate_row(row: ReportRow, verilog_root: Path) -> Unit:
    """Write the row's Verilog and manifest into ``verilog_root/<label>/``; return it as a
    `Unit` named by the row's label (the Verilog top module keeps the unit's name)."""
    out_dir = Path(verilog_root) / row.label
    generate(row.unit, dict(row.overrides), out_dir=out_dir, config=row.config)
    return replace(find_units(out_dir, [row.unit])[0], name=row.label)


FMAX_TIMEOUT_S = 1200
"""Time limit of one Yosys or nextpnr step of an Fmax run (``--fmax-timeout``); a run over it
is reported as not placed in that time rather than holding the report for hours."""


def fmax_devices(row: ReportRow, column: str) -> tuple[str, ...]:
    """The devices `row` is placed on, in order, for the report's Fmax `column` (the next
    only when the design does not fit): the column's devices but the row's ``fmax_skip``."""
    return tuple(device for device in FMAX_COLUMNS[column] if device not in row.fmax_skip)


def _failed_cell(kind: str, failure: Failure) -> dict:
    """The report's cell of a failed run: the first line of its message (a place-and-route
    run's own `FmaxError` as the tool put it, without the type)."""
    headline = failure.headline
    if kind == "fmax":
        headline = headline.removeprefix(f"{FmaxError.__name__}: ")
    return {"failed": headline}


def run_report(rows: Sequence[ReportRow], build_dir: Path, *, jobs: int = 2,
               fmax: bool = True, fmax_timeout_s: float | None = FMAX_TIMEOUT_S,
               progress: Callable[[str], None] = lambda _: None,
               scheduler: str | None = None, cache: bool = True) -> dict:
    """Generate, synthesize and place every row; return the report data (see `main`).

    The runs go to a local process pool of ``jobs`` workers, or to the dask.distributed
    scheduler at ``scheduler`` (its workers must see ``build_dir``: a local cluster, or a
    shared file system). With ``cache``, a run whose Verilog and flow are unchanged since an
    earlier report takes its result from ``build_dir/cache`` (:mod:`fpga.cache`)."""
    build_dir = Path(build_dir)
    libraries = {library: find_liberty(library) for library in STDCELL_TARGETS}
    units = {row.label: generate_row(row, build_dir / "report" / "verilog") for row in rows}
    jobs_list = []
    rank = {id(unit): k for k, unit in enumerate(largest_first(list(units.values())))}
    for row in sorted(rows, key=lambda row: rank[id(units[row.label])]):
        unit = units[row.label]
        for target in AREA_TARGETS:
            if unit.synth_targets is None or target in unit.synth_targets:
                jobs_list.append(("area", row.label, target))
        if fmax and row.fmax:
            jobs_list += [("fmax", row.label, column) for column in FMAX_COLUMNS]
    devices = {(row.label, column): fmax_devices(row, column)
               for row in rows for column in FMAX_COLUMNS}
    area: dict[str, dict] = {row.label: {} for row in rows}
    timing: dict[str, dict] = {row.label: {} for row in rows}
    failures: list[str] = []
    cache_dir = build_dir / "cache" if cache else None
    synth_dir, fmax_dir = build_dir / "report" / "synth", build_dir / "report" / "fmax"
    runs = [((kind, label, target), stdcell_area_job, units[label], target, synth_dir / label,
             cache_dir, libraries[target])
            if kind == "area" and target in STDCELL_TARGETS else
            ((kind, label, target), area_job, units[label], target, synth_dir / label, cache_dir)
            if kind == "area" else
            ((kind, label, target), fmax_job, units[label], target, fmax_dir, fmax_timeout_s,
             cache_dir, None, devices[label, target])
            for kind, label, target in jobs_list]
    for done, total, (kind, label, target), result in run_jobs(runs, workers=jobs,
                                                               scheduler=scheduler):
        outcome = _failed_cell(kind, result) if isinstance(result, Failure) else result
        cached = " (cached)" if outcome.pop("cached", False) else ""
        (area if kind == "area" else timing)[label][target] = outcome
        if "failed" in outcome:
            failures.append(f"{label} {kind} {target}: {outcome['failed']}")
            status = "FAILED: " + outcome["failed"]
        elif "fmax_mhz" in outcome:
            status = f"{outcome['fmax_mhz']:.1f} MHz on {outcome['target']}"
        elif "timed_out" in outcome:
            status = "timed out: " + outcome["timed_out"]
        elif "does_not_fit" in outcome:
            status = "does not fit: " + "; ".join(
                f"{t['target']} {t['shortfall']}" for t in outcome["does_not_fit"])
        elif "skipped" in outcome:
            status = "skipped (" + outcome["skipped"] + ")"
        else:
            status = f"{outcome['seconds']} s"
        progress(f"[{done}/{total}] {label} {kind} {target}: {status}{cached}")
    manifests = {label: json.loads(unit.verilog.with_suffix(".json").read_text())
                 for label, unit in units.items()}
    return {
        "tools": tool_versions([t for ts in FMAX_COLUMNS.values() for t in ts]) if fmax else [],
        "rows": [
            {
                "label": row.label, "unit": row.unit, "config": row.config,
                "params": format_params(units[row.label].params),
                "baseline": baseline_label(row), "baseline_of": row.baseline_of,
                "ops_per_cycle": units[row.label].ops_per_cycle,
                "latency": manifests[row.label].get("latency"),
                "result": manifests[row.label].get("result"),
                "results_per_cycle": manifests[row.label].get("results_per_cycle"),
                "area": area[row.label], "fmax": timing[row.label],
            }
            for row in rows
        ],
        "failures": failures,
    }


def stdcell_area_job(unit: Unit, library: str, workdir: Path, cache_dir: Path | None,
                     liberty) -> dict:
    """Job of the report's standard-cell columns: :func:`fpga.stdcell.stdcell_job` as an area
    outcome (``metrics``: NAND2-equivalents, um^2, flip-flop share, critical path in ps,
    estimated MHz)."""
    result = stdcell_job(unit, library, workdir, cache_dir, liberty)
    metrics = {"NAND2": round(result["nand2_eq"]), "um2": round(result["area"], 1),
               "FF share": round(result["ff_share"], 3), "path_ps": round(result["delay"]),
               "MHz": round(result["fmax_mhz"], 1)}
    return {"metrics": metrics, "seconds": round(result["seconds"], 1),
            **({"cached": True} if result.get("cached") else {})}


# --------------------------------------------------------------------------- command line

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    """``qllm report``; 0, 1 if any run failed (the report still marks it), 2 on
    bad input."""
    parser = argparse.ArgumentParser(
        prog="qllm report",
        description="Every unit at its paper configuration: LUT/FF/DSP/BRAM on iCE40, ECP5 "
                    "and Xilinx, standard cells on sky130 and IHP (PDK_ROOT), nextpnr Fmax, "
                    "ratios to the baselines.")
    parser.add_argument("--unit", action="append", default=[], metavar="NAME",
                        help="report only this unit (repeatable; its baseline comes with it)")
    parser.add_argument("--jobs", type=positive_int_argument, default=2, metavar="N")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on the dask.distributed scheduler at ADDRESS (workers "
                             "sharing this build directory) instead of a local pool")
    parser.add_argument("--no-fmax", action="store_true", help="area only (no nextpnr runs)")
    parser.add_argument("--no-cache", action="store_true",
                        help="run everything again (default: results of unchanged Verilog "
                             "and flow come from BUILD_DIR/cache)")
    parser.add_argument("--fmax-timeout", type=positive_int_argument, default=FMAX_TIMEOUT_S,
                        metavar="S", help="time limit of one Yosys or nextpnr step of an Fmax "
                                          f"run (default {FMAX_TIMEOUT_S} s)")
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--publish", type=Path, metavar="DIR",
                        help="copy the last report (and --plot files) to DIR and, with "
                             "--readme, rewrite that page's Results section (docs/results.md); "
                             "runs nothing")
    parser.add_argument("--plot", type=Path, action="append", default=[], metavar="PNG")
    parser.add_argument("--readme", type=Path, metavar="PAGE.md")
    arguments = parser.parse_args(argv)
    reports_dir = arguments.build_dir / "reports"
    if arguments.publish is not None:
        data_path = reports_dir / "report.json"
        missing = [p for p in (data_path, *arguments.plot) if not Path(p).is_file()]
        if missing:
            _say(f"fpga.report: missing {', '.join(map(str, missing))}; run `make report` "
                 "(and the sweep) first")
            return EXIT_BAD_INPUT
        publish(data_path, arguments.publish, arguments.plot, arguments.readme)
        _say(f"fpga.report: published to {arguments.publish}"
             + (f" and rewrote {arguments.readme}" if arguments.readme else ""))
        return EXIT_OK
    try:
        rows = report_rows(arguments.unit)
    except ValueError as error:
        _say(f"fpga.report: {error}")
        return EXIT_BAD_INPUT
    started = time.perf_counter()
    try:
        data = run_report(rows, arguments.build_dir, jobs=arguments.jobs,
                          fmax=not arguments.no_fmax, fmax_timeout_s=arguments.fmax_timeout,
                          progress=_say, scheduler=arguments.scheduler,
                          cache=not arguments.no_cache)
    except (JobSetupError, LibraryError) as error:
        _say(f"fpga.report: {error}")
        return EXIT_BAD_INPUT
    reports_dir.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(data)
    (reports_dir / "report.md").write_text(markdown)
    (reports_dir / "report.csv").write_text(render_csv(data))
    (reports_dir / "report.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(markdown)
    _say(f"fpga.report: wrote {reports_dir}/report.md, .csv and .json "
         f"({time.perf_counter() - started:.0f} s)")
    return EXIT_RUN_FAILED if data["failures"] else EXIT_OK


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
