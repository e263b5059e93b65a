"""The standard-cell flow of one unit on one library: area and an estimated clock.

:func:`stdcell_synth` runs :mod:`fpga.stdcell.run` in a process of its own (the native Yosys
of ``pyosys``) in ``out_dir`` and reads what it wrote:

* area: the area-mapped netlist's cell area (``stat -liberty``) in um^2 and in
  NAND2-equivalents (divided by the library's smallest 2-input NAND), and the share of it in
  sequential cells;
* timing: ABC's ``stime`` of the delay-mapped, buffered netlist (the longest path between
  registers and ports, in ps) plus the clock-to-Q and setup of the slowest flip-flop the
  netlist uses (read from its Liberty tables at a short transition and a light load), giving
  an estimated Fmax. No wires beyond ABC's load model, no clock skew: an estimate for
  comparing units and depths on one library, not a signoff.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from qllm_cores.fpga.cache import cached, flow_fingerprint, package_version
from qllm_cores.fpga.tools import log_tail

from .liberty import LIBRARIES, LibraryError, find_liberty, library_facts

__all__ = ["StdcellError", "StdcellResult", "stdcell_job", "stdcell_synth", "facts_for"]


class StdcellError(RuntimeError):
    """A standard-cell run failed (the message ends with its log's tail)."""


@dataclass(frozen=True)
class StdcellResult:
    """One unit on one library (areas in um^2, times in ps)."""

    library: str
    area: float
    nand2_eq: float
    sequential_area: float
    cells: int
    delay: float
    flop: str
    clock_to_q: float
    setup: float
    seconds: float

    @property
    def ff_share(self) -> float:
        """Sequential cells' share of the area."""
        return self.sequential_area / self.area if self.area else 0.0

    @property
    def period(self) -> float:
        return self.clock_to_q + self.delay + self.setup

    @property
    def fmax_mhz(self) -> float:
        return 1e6 / self.period

    def as_dict(self) -> dict:
        return {**asdict(self), "ff_share": self.ff_share, "fmax_mhz": self.fmax_mhz}


_FACTS = {}
#: The Yosys process's script (it imports nothing of the project).
RUNNER = Path(__file__).resolve().with_name("run.py")


def facts_for(liberty):
    """The parsed facts of the Liberty files ``liberty`` (:func:`library_facts`, parsed once
    per process: a library takes seconds to read)."""
    key = tuple(str(Path(path).resolve()) for path in liberty)
    if key not in _FACTS:
        _FACTS[key] = library_facts(key)
    return _FACTS[key]


def stdcell_synth(verilog, top, library, out_dir, *, liberty=None, pdk_root=None,
                  timeout_s=None) -> StdcellResult:
    """Map ``top`` of ``verilog`` to ``library`` (a key of
    :data:`~fpga.stdcell.liberty.LIBRARIES`, or any name with explicit ``liberty`` files) in
    ``out_dir``.

    Raises
    ------
    LibraryError
        The library cannot be found (``PDK_ROOT``) or read.
    StdcellError
        Yosys failed or left no result.
    """
    if liberty is None:
        liberty = find_liberty(library, pdk_root)
    liberty = [Path(path).resolve() for path in liberty]
    facts = facts_for(liberty)
    spec = LIBRARIES.get(library)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("area.json", "delay.log"):
        (out_dir / stale).unlink(missing_ok=True)
    (out_dir / "spec.json").write_text(json.dumps({
        "verilog": str(Path(verilog).resolve()), "top": top,
        "liberty": [str(path) for path in liberty],
        "dont_use": list(spec.dont_use) if spec else []}))
    log = out_dir / "yosys.log"
    started = time.perf_counter()
    with open(log, "w") as handle:
        try:
            status = subprocess.run([sys.executable, str(RUNNER), "spec.json"], cwd=out_dir,
                                    stdout=handle, stderr=subprocess.STDOUT,
                                    timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            raise StdcellError(f"{top} on {library}: Yosys timed out after {timeout_s} s"
                               + log_tail(log)) from None
    seconds = time.perf_counter() - started
    if status != 0 or not (out_dir / "area.json").is_file():
        raise StdcellError(f"{top} on {library}: Yosys failed (exit {status})" + log_tail(log))
    statistics = _statistics(out_dir / "area.json", top)
    # (the library's cells; Yosys also counts non-physical ones such as $scopeinfo)
    cells = {name: count for name, count in statistics["num_cells_by_type"].items()
             if name in facts.areas}
    delay = _delay(out_dir / "delay.log")
    used = [name for name in cells if name in facts.flop_timing]
    if used:
        flop = max(used, key=lambda name: sum(facts.flop_timing[name]))
        clock_to_q, setup = facts.flop_timing[flop]
    else:                                              # purely combinational
        flop, clock_to_q, setup = "", 0.0, 0.0
    area = float(statistics["area"])
    return StdcellResult(library, area, area / facts.nand2_area,
                         facts.sequential_area(cells), sum(cells.values()), delay,
                         flop, clock_to_q, setup, seconds)


def _statistics(path, top):
    text = path.read_text()
    data = json.loads(text[text.index("{"):])        # (after "Found gzip magic ..." lines)
    modules = data["modules"]
    key = f"\\{top}" if f"\\{top}" in modules else next(iter(modules))
    return modules[key]


_DELAY = re.compile(r"Delay\s*=\s*([0-9.]+)\s*ps")


def _delay(path):
    if not path.is_file():
        raise StdcellError(f"no delay report at {path}")
    found = _DELAY.findall(path.read_text(errors="replace"))
    if not found:
        raise StdcellError(f"ABC printed no delay in {path}" + log_tail(path))
    return float(found[-1])


def stdcell_job(unit, library, workdir, cache_dir=None, liberty=None, pdk_root=None) -> dict:
    """Job (:mod:`fpga.jobs`) of the report and the command line: ``unit`` (an
    :class:`fpga.area.Unit`) on ``library`` in ``workdir/<top>-<library>``; returns
    :meth:`StdcellResult.as_dict` (rounded). With ``cache_dir``, a result of the same Verilog,
    top, Liberty files (their contents), Yosys and flow comes from :mod:`fpga.cache`."""
    files = [Path(path).resolve() for path in (liberty or find_liberty(library, pdk_root))]

    def run():
        result = stdcell_synth(unit.verilog, unit.top, library,
                               Path(workdir) / f"{unit.top}-{library}", liberty=files)
        return {key: round(value, 4) if isinstance(value, float) else value
                for key, value in result.as_dict().items()}

    def key():
        return (Path(unit.verilog).read_text(), unit.top, library,
                [hashlib.sha256(path.read_bytes()).hexdigest() for path in files],
                package_version("pyosys"), flow_fingerprint("stdcell/flow", "stdcell/run",
                                                    "stdcell/liberty"))

    return cached("stdcell", key, cache_dir, run)

