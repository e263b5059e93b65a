"""Parameter sweep of one unit: area (Yosys) and Fmax (nextpnr) against one parameter.

``qllm sweep --unit U --param P --values v1 v2 ... [--config C] [--set k=v ...]
[--target T ...] [--fmax-target T ...] [--jobs N] [--scheduler ADDRESS] [--build-dir DIR]``

Every value ``v`` is a sweep point: the unit's parameters (defaults, then ``--config``, then
``--set``) with ``P=v``. Values are parsed like ``--set`` (integers with any base prefix,
``true``/``false``, ``none``, anything else a string). For each point:

* a generation job writes ``DIR/sweep/<unit>-<param>/<value>/verilog/<unit>.v`` and its
  manifest; a value the unit's constructor refuses (``ValueError``/``TypeError``) makes a
  failed point, reported with the unit's message, and the other points still run;
* then one job per area target (Yosys, in ``.../<value>/synth/``) and per Fmax target
  (nextpnr, in ``.../<value>/fmax/``); targets the manifest's ``synth_targets`` excludes are
  skipped, not failed.

Jobs run in a local process pool (``--jobs``, default 2) or, with ``--scheduler ADDRESS``,
on an existing dask.distributed cluster (``distributed`` is an optional dependency: ``pip
install 'dask[distributed]'``). The workers must be able to import this project (run them
with its virtual environment, where it is installed with ``pip install -e .``) and see the
same file system; every path handed to them is absolute and every tool runs with its working
directory set explicitly, so a worker's own working directory does not matter. Jobs (the
generation here, :func:`fpga.area.area_job` and :func:`fpga.fmax.fmax_job`) return plain data
(metrics, the Verilog text) and raise on failure, which comes back as a
:class:`fpga.jobs.Failure`.

Outputs, in ``DIR/reports/``: ``sweep-<unit>-<param>.csv`` (long format, columns
`CSV_COLUMNS`: one row per point x target x metric; Fmax runs give ``fmax_mhz`` and nextpnr's
resources as ``pnr_<resource>``, ``pnr_wrapper_ff``), ``sweep-<unit>-<param>.md`` (the table
printed on standard output, with the failures) and ``sweep-<unit>-<param>.png`` (area and Fmax
against the parameter). Progress goes to standard error (a tqdm bar if tqdm is installed).

Exit status: 0 if at least one run gave a result (failed points and runs are listed in the
table and on standard error), 1 if none did, 2 for bad arguments, a missing ``distributed``
package with ``--scheduler``, or an unreachable scheduler.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from qllm_cores.fpga.area import area_job, find_units, positive_int_argument, write_reports
from qllm_cores.fpga.fmax import FMAX_TARGETS, FmaxError, fmax_job, tool_versions
from qllm_cores.fpga.jobs import (DASK_INSTALL_HINT, Failure, JobSetupError, LocalExecutor,
    Progress, call, make_executor, result_of)
from qllm_cores.fpga.sweep_report import plot_sweep, sweep_csv, sweep_markdown, sweep_table
from qllm_cores.fpga.yosys import TARGETS, SynthError, yosys_version
from qllm_cores.gen.registry import UNITS, parse_assignment, resolve_params

__all__ = [
    "PointResult",
    "SweepInputError",
    "SweepPlan",
    "SweepResult",
    "main",
    "make_plan",
    "parse_value",
    "run_sweep",
]

DEFAULT_AREA_TARGETS = tuple(TARGETS)
"""Area targets run when ``--target`` is not given (every Yosys target)."""


EXIT_OK, EXIT_ALL_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class SweepInputError(JobSetupError):
    """The sweep cannot start: bad arguments, no dask for ``--scheduler``, no scheduler."""


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep and where.

    Attributes
    ----------
    unit, param : str
    values : tuple
        Parsed values, duplicates removed, in command-line order.
    config : str or None
    overrides : dict
        ``--set`` assignments (never the swept parameter).
    area_targets, fmax_targets : tuple of str
    build_dir : Path
        Absolute build directory.
    """

    unit: str
    param: str
    values: tuple
    config: str | None
    overrides: dict
    area_targets: tuple[str, ...]
    fmax_targets: tuple[str, ...]
    build_dir: Path

    @property
    def name(self) -> str:
        """Stem of the report files and the sweep directory, ``sweep-<unit>-<param>``."""
        return f"sweep-{self.unit}-{self.param}"

    @property
    def sweep_dir(self) -> Path:
        return self.build_dir / "sweep" / f"{self.unit}-{self.param}"

    @property
    def reports_dir(self) -> Path:
        return self.build_dir / "reports"

    def point_dir(self, value) -> Path:
        return self.sweep_dir / value_slug(value)

    def point_overrides(self, value) -> dict:
        return {**self.overrides, self.param: value}

    def other_params(self) -> dict:
        """The resolved parameters other than the swept one (the same at every point)."""
        _, params = resolve_params(self.unit, self.config, self.overrides)
        return {key: value for key, value in params.items() if key != self.param}


def parse_value(param: str, text: str):
    """A sweep value parsed like ``--set param=text``."""
    return parse_assignment(f"{param}={text}")[1]


def value_slug(value) -> str:
    """Directory name of a sweep point (file-system safe rendering of the value)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", str(value)) or "_"


def make_plan(unit: str, param: str, values: Sequence[str], *, config: str | None = None,
              assignments: Sequence[str] = (), area_targets: Sequence[str] | None = None,
              fmax_targets: Sequence[str] = (), build_dir: Path | str = "build") -> SweepPlan:
    """Check the command-line input and build the plan.

    Raises
    ------
    SweepInputError
        Unknown unit, configuration, parameter or target, no values, the swept parameter also
        given with ``--set``, or a malformed assignment.
    """
    if unit not in UNITS:
        raise SweepInputError(f"unknown unit {unit!r}; known units: {', '.join(sorted(UNITS))}")
    spec = UNITS[unit]
    if param not in spec.defaults:
        known = ", ".join(sorted(spec.defaults)) or "none (it has no parameters)"
        raise SweepInputError(f"unknown parameter {param!r} for unit {unit!r}; known: {known}")
    if not values:
        raise SweepInputError(
            f"no values to sweep {param} over: give --values v1 v2 ... "
            '(make sweep ... VALUES="v1 v2 ...")')
    overrides = {}
    for text in assignments:
        try:
            key, value = parse_assignment(text)
        except ValueError as error:
            raise SweepInputError(str(error)) from None
        if key == param:
            raise SweepInputError(f"--set {text}: {param} is the swept parameter; "
                                  "give its values with --values")
        overrides[key] = value
    try:
        resolve_params(unit, config, overrides)
    except ValueError as error:
        raise SweepInputError(str(error)) from None
    area_targets = DEFAULT_AREA_TARGETS if area_targets is None else tuple(area_targets)
    for target in area_targets:
        if target not in TARGETS:
            raise SweepInputError(f"unknown area target {target!r}; known: {', '.join(TARGETS)}")
    for target in fmax_targets:
        if target not in FMAX_TARGETS:
            raise SweepInputError(
                f"unknown Fmax target {target!r}; known: {', '.join(FMAX_TARGETS)}")
    if not area_targets and not fmax_targets:
        raise SweepInputError("no target: give --target and/or --fmax-target")
    parsed = list(dict.fromkeys(parse_value(param, text) for text in values))
    slugs = [value_slug(value) for value in parsed]
    if len(set(slugs)) != len(slugs):
        raise SweepInputError(f"values {values} map to the same directory names {slugs}")
    return SweepPlan(unit, param, tuple(parsed), config, overrides,
                     tuple(dict.fromkeys(area_targets)), tuple(dict.fromkeys(fmax_targets)),
                     Path(build_dir).resolve())


# --------------------------------------------------------------------------- jobs
# Run in pool or dask worker processes through fpga.jobs.call: plain arguments in, plain data
# out (a failure raises).


def _generate_job(unit: str, config: str | None, overrides: dict, verilog_dir: str) -> dict:
    """Generate one point's Verilog; return it as a `fpga.area.Unit`, its Verilog and manifest
    text and its resolved parameters (a unit refusing the value raises: a failed point)."""
    from qllm_cores.gen.verilog import generate

    verilog = generate(unit, overrides, out_dir=verilog_dir, config=config)
    manifest_text = verilog.with_suffix(".json").read_text()
    return {"unit": find_units(verilog.parent, [unit])[0], "verilog": verilog.read_text(),
            "manifest": manifest_text, "params": json.loads(manifest_text)["params"]}


# --------------------------------------------------------------------------- running


@dataclass
class PointResult:
    """Everything measured at one sweep point.

    Attributes
    ----------
    value : object
        The swept parameter's value.
    params : dict or None
        Fully resolved parameters (None if generation failed).
    failure : Failure or None
        Why the point failed (generation refused the value); None if it was generated.
    area : dict
        Area target -> metrics.
    fmax : dict
        Fmax target -> ``{"fmax_mhz": float, "resources": dict, "wrapper_ff": int}``.
    failures : dict
        ``("area" | "fmax", target)`` -> the `Failure` of a failed run.
    skipped : list
        ``("area" | "fmax", target)`` pairs excluded by the manifest's ``synth_targets``.
    workers : set
        ``(host, pid)`` of the processes that ran this point's jobs.
    latency : int or None
        The unit's latency in cycles at this point (its manifest's ``latency``).
    """

    value: object
    params: dict | None = None
    failure: Failure | None = None
    latency: int | None = None
    area: dict = field(default_factory=dict)
    fmax: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    workers: set = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class SweepResult:
    plan: SweepPlan
    points: list[PointResult]
    executor: str
    seconds: float

    @property
    def has_results(self) -> bool:
        return any(point.area or point.fmax for point in self.points)

    @property
    def workers(self) -> set:
        return set().union(*(point.workers for point in self.points))


def _allowed(flow: str, target: str, synth_targets) -> bool:
    if synth_targets is None:
        return True
    family = FMAX_TARGETS[target].family if flow == "fmax" else target
    return family in synth_targets


def run_sweep(plan: SweepPlan, executor, progress: Progress | None = None) -> SweepResult:
    """Run every point of `plan` on `executor` (`LocalExecutor` or `DaskExecutor`)."""
    started = time.perf_counter()
    runs_per_point = len(plan.area_targets) + len(plan.fmax_targets)
    progress = progress or Progress(len(plan.values) * (1 + runs_per_point), enabled=False)
    points = {value: PointResult(value) for value in plan.values}
    for value in plan.values:
        executor.submit(("generate", value, None), call, _generate_job, plan.unit, plan.config,
                        plan.point_overrides(value), str(plan.point_dir(value) / "verilog"))
    label = plan.param
    for tag, outcome in executor.completed():
        kind, value, target = tag
        point = points[value]
        if "pid" in outcome:
            point.workers.add((outcome["host"], outcome["pid"]))
        result = result_of(tag, outcome)
        if kind == "generate":
            if isinstance(result, Failure):
                point.failure = result
                progress.drop(runs_per_point)
                progress.advance(f"{label}={value}: FAILED")
                progress.write(f"{label}={value}: point failed: {result.message}")
                continue
            point.params = result["params"]
            manifest = json.loads(result["manifest"])
            point.latency = manifest.get("latency")
            synth_targets = manifest.get("synth_targets")
            # The Verilog travels with the jobs: a worker on another host writes it first.
            unit, sources = result["unit"], (result["verilog"], result["manifest"])
            point_dir = plan.point_dir(value)
            for flow, targets, job, options in (
                    ("area", plan.area_targets, area_job, (point_dir / "synth", None)),
                    ("fmax", plan.fmax_targets, fmax_job, (point_dir / "fmax", None, None))):
                for run_target in targets:
                    if _allowed(flow, run_target, synth_targets):
                        executor.submit((flow, value, run_target), call, job, unit, run_target,
                                        *options, sources)
                    else:
                        point.skipped.append((flow, run_target))
                        progress.drop(1)
                        progress.write(f"{label}={value}: skip {flow} {run_target} "
                                       f"(synth_targets={synth_targets})")
            progress.advance(f"{label}={value}: generated")
            continue
        if isinstance(result, Failure):
            point.failures[kind, target] = result
            progress.advance(f"{label}={value} {kind} {target}: FAILED")
            progress.write(f"{label}={value} {kind} {target} failed: {result.message}")
        elif kind == "area":
            point.area[target] = result["metrics"]
            progress.advance(f"{label}={value} {target}: {outcome['seconds']:.1f} s")
        else:
            point.fmax[target] = {key: result[key]
                                  for key in ("fmax_mhz", "seeds_mhz", "resources", "wrapper_ff")
                                  if key in result}
            progress.advance(f"{label}={value} {target} Fmax: {result['fmax_mhz']:.1f} MHz "
                             f"({outcome['seconds']:.1f} s)")
    return SweepResult(plan, [points[value] for value in plan.values],
                       getattr(executor, "description", type(executor).__name__),
                       time.perf_counter() - started)


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qllm sweep",
        description="Sweep one parameter of a unit: area (Yosys) and Fmax (nextpnr) at every "
                    "value; writes BUILD_DIR/reports/sweep-<unit>-<param>.csv, .md and .png.")
    parser.add_argument("--unit", required=True, help="unit name (see qllm list)")
    parser.add_argument("--param", required=True, help="parameter to sweep")
    parser.add_argument("--values", nargs="*", default=[], metavar="V",
                        help="values of the parameter (parsed like --set)")
    parser.add_argument("--config", default=None, help="named paper configuration")
    parser.add_argument("--set", dest="assignments", action="append", default=[],
                        metavar="K=V", help="other parameter override (repeatable)")
    parser.add_argument("--target", dest="area_targets", action="extend", nargs="+",
                        default=None, choices=list(TARGETS), metavar="T",
                        help=f"area targets (default: {' '.join(DEFAULT_AREA_TARGETS)}; "
                             f"choices: {', '.join(TARGETS)})")
    parser.add_argument("--fmax-target", dest="fmax_targets", action="extend", nargs="+",
                        default=[], choices=list(FMAX_TARGETS), metavar="T",
                        help=f"Fmax targets (default: none; choices: {', '.join(FMAX_TARGETS)})")
    parser.add_argument("--jobs", type=positive_int_argument, default=2, metavar="N",
                        help="parallel jobs of the local process pool (default: 2)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run the jobs on the dask.distributed scheduler at ADDRESS "
                             f"(e.g. tcp://host:8786; needs `{DASK_INSTALL_HINT}`)")
    parser.add_argument("--build-dir", type=Path, default=Path("build"),
                        help="build directory (default: build)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar or per-job lines on standard error")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``qllm sweep``; see the module documentation for the exit status."""
    arguments = _parser().parse_args(argv)
    try:
        plan = make_plan(arguments.unit, arguments.param, arguments.values,
                         config=arguments.config, assignments=arguments.assignments,
                         area_targets=arguments.area_targets,
                         fmax_targets=arguments.fmax_targets, build_dir=arguments.build_dir)
        executor = make_executor(arguments.scheduler, arguments.jobs)
    except JobSetupError as error:      # SweepInputError, or no dask / no scheduler
        _report(f"fpga.sweep: {error}")
        return EXIT_BAD_INPUT

    with executor:
        versions = []
        if isinstance(executor, LocalExecutor):
            # Compile the WebAssembly modules once, before parallel jobs would each do it.
            try:
                versions = (tool_versions(plan.fmax_targets) if plan.fmax_targets
                            else [yosys_version()])
            except (SynthError, FmaxError) as error:
                _report(f"fpga.sweep: {error}")
                return EXIT_ALL_FAILED
        if not arguments.no_progress:
            _report(f"fpga.sweep: {plan.unit} {plan.param} in {list(plan.values)} on "
                    f"{executor.description}")
        runs = len(plan.area_targets) + len(plan.fmax_targets)
        progress = Progress(len(plan.values) * (1 + runs), f"{plan.unit} {plan.param}",
                            enabled=not arguments.no_progress)
        try:
            result = run_sweep(plan, executor, progress)
        finally:
            progress.close()

    for point in result.points:
        for (flow, target), failure in point.failures.items():
            _report(f"\n=== {plan.param}={point.value} {flow} {target} failed ===\n"
                    f"{failure.message}")
    markdown = sweep_markdown(result, versions)
    png_path = plan.reports_dir / f"{plan.name}.png"
    if not result.has_results:
        for stale in (png_path, plan.reports_dir / f"{plan.name}.csv",
                      plan.reports_dir / f"{plan.name}.md"):
            stale.unlink(missing_ok=True)
        print(sweep_table(result))
        _report("fpga.sweep: no point gave a result; no report written")
        return EXIT_ALL_FAILED
    markdown_path, csv_path = write_reports(plan.reports_dir, markdown, sweep_csv(result),
                                            plan.name)
    written = [csv_path, markdown_path.name]
    if plot_sweep(result, png_path) is None:
        png_path.unlink(missing_ok=True)
    else:
        written.append(png_path.name)
    print(sweep_table(result))
    failed = sum(not point.ok for point in result.points) + sum(
        len(point.failures) for point in result.points)
    _report(f"fpga.sweep: wrote {', '.join(map(str, written))} ({result.seconds:.0f} s" + (f"; {failed} failure(s)" if failed else "") + ")")
    return EXIT_OK


def _report(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    # Run the importable module, so that jobs pickle as fpga.sweep.<function> (and not
    # __main__.<function>, which dask workers and spawned pool workers cannot import).
    from qllm_cores.fpga.sweep import main as _main

    sys.exit(_main())
