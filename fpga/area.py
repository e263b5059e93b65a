"""Area report of the generated units: synthesise every (unit, target) pair and tabulate.

Units are found in ``<build-dir>/verilog/``: every ``<unit>.v`` has a manifest
``<unit>.json`` beside it holding at least ``{"unit": ..., "top": ..., "params": {...}}``.
Yosys runs happen in ``<build-dir>/synth/<unit>/<top>-<target>/``; the reports are
``<build-dir>/reports/area.md`` and ``<build-dir>/reports/area.csv``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qllm_cores.fpga.cache import cached, flow_fingerprint
from qllm_cores.fpga.jobs import Failure, run_jobs
from qllm_cores.fpga.tools import flattened_size, unique
from qllm_cores.fpga.yosys import TARGETS, SynthResult, synth

__all__ = [
    "AreaInputError",
    "Unit",
    "area_csv",
    "area_job",
    "area_markdown",
    "area_table",
    "comparison_table",
    "find_units",
    "long_csv",
    "format_params",
    "largest_first",
    "positive_int_argument",
    "read_sources",
    "remove_reports",
    "synthesize_all",
    "write_reports",
    "write_sources",
]

CSV_COLUMNS = ("unit", "params", "target", "metric", "value")


class AreaInputError(ValueError):
    """The units to report on cannot be found or their manifests are malformed."""


@dataclass(frozen=True)
class Unit:
    """One generated unit: its Verilog file and what its manifest says about it."""

    name: str
    top: str
    params: dict
    verilog: Path
    baseline: str | None = None
    ops_per_cycle: int | None = None
    synth_targets: tuple[str, ...] | None = None
    """Targets the unit can be synthesized for (e.g. a DSP48E2 instance: xilinx only); None: all."""


def find_units(verilog_dir: Path, names: Sequence[str] = ()) -> list[Unit]:
    """Find the generated units in `verilog_dir`, sorted by name.

    Parameters
    ----------
    verilog_dir : Path
        Directory holding ``<unit>.v`` and ``<unit>.json`` pairs.
    names : sequence of str, optional
        Units to return; all of them when empty.

    Returns
    -------
    list of Unit

    Raises
    ------
    AreaInputError
        If no unit is found, a named unit was not generated, or a manifest is missing or
        malformed.
    """
    verilog_dir = Path(verilog_dir)
    generated = sorted(path.stem for path in verilog_dir.glob("*.v"))
    if not generated:
        raise AreaInputError(
            f"no generated unit found: {verilog_dir} holds no <unit>.v files; "
            "run the Verilog generator first"
        )
    missing = [name for name in names if name not in generated]
    if missing:
        raise AreaInputError(
            f"unit(s) not generated: {', '.join(missing)} (no such .v in {verilog_dir}); "
            f"generated units: {', '.join(generated)}"
        )
    selected = unique(names) if names else generated
    return [_load_unit(verilog_dir / f"{name}.v") for name in selected]


def format_params(params: dict) -> str:
    """Render parameters compactly in manifest order, e.g. ``"depth=16, width=8"``."""

    def render(value) -> str:
        if isinstance(value, (str, int, float, bool)):
            return str(value)
        return json.dumps(value, separators=(",", ":"), sort_keys=True)

    return ", ".join(f"{key}={render(value)}" for key, value in params.items())


def largest_first(units: Sequence[Unit]) -> list[Unit]:
    """`units` ordered by their flattened Verilog size (:func:`fpga.tools.flattened_size`),
    largest first, ties in the given order: the order the studies submit their runs in, so
    the longest ones start first and do not finish alone at the end."""
    return sorted(units, key=lambda unit: -flattened_size(unit.verilog, unit.top))


def synthesize_all(
    units: Sequence[Unit],
    targets: Sequence[str],
    synth_dir: Path,
    *,
    jobs: int = 2,
    progress=None,
) -> tuple[dict[tuple[str, str], SynthResult], list[Failure]]:
    """Synthesise every (unit, target) pair in a process pool, the largest units first.

    Parameters
    ----------
    units : sequence of Unit
    targets : sequence of str
        Keys of `TARGETS`.
    synth_dir : Path
        Base directory; unit ``u`` is synthesised under ``synth_dir / u``.
    jobs : int, optional
        Number of Yosys runs at once (at least 1).
    progress : callable, optional
        Called with a one-line message after every run.

    Returns
    -------
    results : dict of (unit, target) to SynthResult
    failures : list of Failure
        Tagged ``(unit, target)``, sorted.

    Raises
    ------
    ValueError
        If `jobs` is below 1 or a target is unknown.
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be at least 1")
    unknown = [target for target in targets if target not in TARGETS]
    if unknown:
        raise ValueError(f"target={unknown[0]!r} is not one of {', '.join(TARGETS)}")
    pairs = [(unit, target) for unit in largest_first(units) for target in targets
             if unit.synth_targets is None or target in unit.synth_targets]
    results: dict[tuple[str, str], SynthResult] = {}
    failures: list[Failure] = []
    runs = [((unit.name, target), synth, unit.verilog, unit.top, target,
             Path(synth_dir) / unit.name) for unit, target in pairs]
    for done, total, (unit_name, target), result in run_jobs(runs, workers=jobs):
        if isinstance(result, Failure):
            failures.append(result)
            status = "FAILED"
        else:
            results[unit_name, target] = result
            status = f"{result.seconds:.1f} s"
        if progress is not None:
            progress(f"[{done}/{total}] {unit_name} {target}: {status}")
    failures.sort(key=lambda failure: failure.job)
    return results, failures


def read_sources(verilog: Path) -> tuple[str, str]:
    """A unit's Verilog and manifest (the ``.json`` beside it) text: what its results are
    keyed by (:mod:`fpga.cache`)."""
    verilog = Path(verilog)
    return verilog.read_text(), verilog.with_suffix(".json").read_text()


def write_sources(verilog: Path, sources: tuple[str, str]) -> None:
    """Make `verilog` and its manifest hold ``sources`` (Verilog, manifest text), e.g. in a
    job on another host than the generation; writes are atomic, so concurrent jobs of one
    unit do not clash."""
    verilog = Path(verilog)
    verilog.parent.mkdir(parents=True, exist_ok=True)
    for path, text in zip((verilog, verilog.with_suffix(".json")), sources):
        if path.is_file() and path.read_text() == text:
            continue
        scratch = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        scratch.write_text(text)
        os.replace(scratch, path)


def area_job(unit: Unit, target: str, workdir: Path, cache_dir: Path | None = None,
             sources: tuple[str, str] | None = None) -> dict:
    """Job (:mod:`fpga.jobs`) of the report and the sweep: synthesize `unit` for `target` in
    `workdir` (:func:`fpga.yosys.synth`, in ``workdir/<top>-<target>``).

    Returns ``{"metrics": {...}, "seconds": s}`` (0.1 s) and raises on failure (the runner's
    `Failure`). With ``sources`` (Verilog, manifest text), ``unit.verilog`` is made to hold
    them first; with ``cache_dir``, a result of the same Verilog, manifest, top, target and
    flow comes from :mod:`fpga.cache` (marked ``"cached"``).
    """
    if sources is not None:
        write_sources(unit.verilog, sources)

    def run() -> dict:
        result = synth(unit.verilog, unit.top, target, workdir)
        return {"metrics": result.metrics, "seconds": round(result.seconds, 1)}

    return cached("area", lambda: (*(sources or read_sources(unit.verilog)), unit.top, target,
                                   flow_fingerprint("yosys", "tools")), cache_dir, run)


def area_markdown(
    units: Sequence[Unit],
    targets: Sequence[str],
    results: dict[tuple[str, str], SynthResult],
    yosys_version: str,
) -> str:
    """The full Markdown report: a header, the table, baseline ratios, the Yosys commands."""
    comparison = comparison_table(units, targets, results)
    lines = [
        "# Area report",
        "",
        f"{yosys_version}; cells counted in the flattened, mapped netlist.",
        "",
        area_table(units, targets, results),
        "",
        *([comparison, ""] if comparison else []),
        "| target | device | Yosys synthesis command |",
        "|---|---|---|",
    ]
    for target in targets:
        spec = TARGETS[target]
        command = spec.synth_command.format(top="TOP")
        lines.append(f"| {target} | {spec.device} | `{command}` |")
    return "\n".join(lines) + "\n"


def area_table(
    units: Sequence[Unit], targets: Sequence[str], results: dict[tuple[str, str], SynthResult]
) -> str:
    """Markdown table: one row per (unit, target), one column per metric name ("-" where a
    target has no such metric)."""
    metric_columns = unique(metric for target in targets for metric in TARGETS[target].metrics)
    header = ["unit", "params", "target", *metric_columns]
    rows = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * 3 + "---:|" * len(metric_columns),
    ]
    for unit in units:
        params = _markdown_escape(format_params(unit.params))
        for target in targets:
            if (unit.name, target) not in results:      # not synthesizable there
                continue
            metrics = results[unit.name, target].metrics
            values = [str(metrics.get(metric, "-")) for metric in metric_columns]
            rows.append("| " + " | ".join([unit.name, params, target, *values]) + " |")
    return "\n".join(rows)


#: Area metrics compared against a baseline, in order; the first one a target has is its
#: "area" for the operations-per-area figure.
COMPARED_METRICS = ("transistors", "LUT", "FF", "DSP")


def comparison_table(
    units: Sequence[Unit], targets: Sequence[str], results: dict[tuple[str, str], SynthResult]
) -> str:
    """Markdown table of unit / baseline area ratios from the same run ("" if no pair).

    One row per (unit with a baseline in ``units``, target): the ratio of each metric the
    target reports, and, where both units declare ``ops_per_cycle``, operations per cycle per
    1,000 units of the target's primary area metric (transistors on ``cmos``, LUTs on FPGAs)
    for the unit and its baseline.
    """
    by_name = {unit.name: unit for unit in units}
    pairs = [(unit, by_name[unit.baseline]) for unit in units
             if unit.baseline and unit.baseline in by_name]
    if not pairs:
        return ""
    rows = [
        "| unit / baseline | target | " + " | ".join(f"{m} ratio" for m in COMPARED_METRICS)
        + " | ops/cycle per 1k area (unit, baseline) |",
        "|---|---|" + "---:|" * (len(COMPARED_METRICS) + 1),
    ]
    for unit, base in pairs:
        for target in targets:
            if (unit.name, target) not in results or (base.name, target) not in results:
                continue
            mine, theirs = results[unit.name, target].metrics, results[base.name, target].metrics
            ratios = []
            for metric in COMPARED_METRICS:
                if metric not in mine or metric not in theirs:
                    ratios.append("-")
                elif theirs[metric] == 0:
                    ratios.append("-" if mine[metric] == 0 else "inf")
                else:
                    ratios.append(f"{mine[metric] / theirs[metric]:.2f}")
            primary = next((m for m in COMPARED_METRICS if m in mine and m in theirs), None)
            efficiency = "-"
            if primary and unit.ops_per_cycle and base.ops_per_cycle and mine[primary] \
                    and theirs[primary]:
                efficiency = (f"{1000 * unit.ops_per_cycle / mine[primary]:.3g}, "
                              f"{1000 * base.ops_per_cycle / theirs[primary]:.3g} "
                              f"(per 1k {primary})")
            rows.append(f"| {unit.name} / {base.name} | {target} | " + " | ".join(ratios)
                        + f" | {efficiency} |")
    return "\n".join(rows)


def area_csv(
    units: Sequence[Unit], targets: Sequence[str], results: dict[tuple[str, str], SynthResult]
) -> str:
    """Long-format CSV: one row per unit x target x metric."""
    return long_csv(units, targets, results, lambda result: result.metrics)


def long_csv(units: Sequence[Unit], targets: Sequence[str], results: dict, metrics_of) -> str:
    """Long-format CSV (``CSV_COLUMNS``): one row per unit x target x metric, the metrics of
    ``results[unit, target]`` given by ``metrics_of(result)`` (a dict); pairs without a result
    (skipped or failed runs) are left out."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for unit in units:
        params = format_params(unit.params)
        for target in targets:
            if (unit.name, target) not in results:
                continue
            for metric, value in metrics_of(results[unit.name, target]).items():
                writer.writerow((unit.name, params, target, metric, value))
    return buffer.getvalue()


def write_reports(
    reports_dir: Path, markdown: str, csv_text: str, name: str = "area"
) -> tuple[Path, Path]:
    """Write ``<name>.md`` and ``<name>.csv`` into `reports_dir`; return their paths."""
    markdown_path, csv_path = _report_paths(reports_dir, name)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(markdown)
    csv_path.write_text(csv_text)
    return markdown_path, csv_path


def remove_reports(reports_dir: Path, name: str = "area") -> list[Path]:
    """Delete ``<name>.md`` and ``<name>.csv`` from an earlier run; return those deleted."""
    existing = [path for path in _report_paths(reports_dir, name) if path.is_file()]
    for path in existing:
        path.unlink()
    return existing


def _report_paths(reports_dir: Path, name: str) -> tuple[Path, Path]:
    return Path(reports_dir) / f"{name}.md", Path(reports_dir) / f"{name}.csv"


def positive_int_argument(text: str) -> int:
    """``argparse`` type: a whole number of at least 1 (e.g. ``--jobs``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _load_unit(verilog: Path) -> Unit:
    manifest_path = verilog.with_suffix(".json")
    if not manifest_path.is_file():
        raise AreaInputError(f"unit {verilog.stem!r} has no manifest {manifest_path.name}")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as error:
        raise AreaInputError(f"manifest {manifest_path} is not valid JSON: {error}") from error
    problems = _manifest_problems(manifest, verilog.stem)
    if problems:
        raise AreaInputError(f"manifest {manifest_path}: {'; '.join(problems)}")
    synth_targets = manifest.get("synth_targets")
    return Unit(manifest["unit"], manifest["top"], manifest["params"], verilog,
                manifest.get("baseline"), manifest.get("ops_per_cycle"),
                None if synth_targets is None else tuple(synth_targets))


def _manifest_problems(manifest, expected_unit: str) -> list[str]:
    if not isinstance(manifest, dict):
        return ["must be a JSON object"]
    problems = []
    if manifest.get("unit") != expected_unit:
        problems.append(f"unit={manifest.get('unit')!r} must match the file name {expected_unit!r}")
    if not isinstance(manifest.get("top"), str) or not manifest.get("top"):
        problems.append(f"top={manifest.get('top')!r} must be a non-empty module name")
    if not isinstance(manifest.get("params"), dict):
        problems.append(f"params={manifest.get('params')!r} must be a JSON object")
    return problems


def _markdown_escape(text: str) -> str:
    return text.replace("|", "\\|")

