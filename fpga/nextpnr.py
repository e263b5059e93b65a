"""nextpnr's results: the ``--report`` file (clocks, utilisation) and the log's capacity lines.

The place-and-route layer of ``fpga/``: the Fmax flow (:mod:`fpga.fmax`), the report and the
board build read nextpnr's output through these, and its failures are :class:`FmaxError`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from qllm_cores.fpga.tools import log_tail

__all__ = ["FmaxError", "FmaxTimeout", "capacity_shortfall", "nextpnr_report",
           "over_capacity", "over_capacity_text"]


class FmaxError(RuntimeError):
    """A run failed, or its report is missing or has no Fmax; quotes the log tail."""


class FmaxTimeout(FmaxError):
    """Yosys or nextpnr did not finish within the run's time limit."""


def nextpnr_report(path: Path, log: Path | None = None
                   ) -> tuple[dict[str, tuple[float, float | None]], dict[str, tuple[int, int]]]:
    """Clocks and utilization of a nextpnr ``--report`` file.

    Returns
    -------
    fmax : dict of str to (float, float or None)
        Clock net -> (achieved MHz, constrained MHz).
    utilization : dict of str to (int, int)
        Bel type -> (used, available).

    Raises
    ------
    FmaxError
        If the report is missing, not JSON, or has no Fmax entry (quoting `log`'s tail).
    """
    tail = log_tail(log) if log else ""
    if not Path(path).is_file():
        raise FmaxError(f"nextpnr wrote no {Path(path).name}{tail}")
    try:
        report = json.loads(Path(path).read_text())
    except json.JSONDecodeError as error:
        raise FmaxError(f"{Path(path).name} is not JSON ({error}){tail}") from error
    clocks = report.get("fmax") or {}
    fmax = {name: (float(entry["achieved"]), entry.get("constraint"))
            for name, entry in clocks.items()
            if isinstance(entry, dict) and isinstance(entry.get("achieved"), (int, float))}
    if not fmax:
        raise FmaxError(f"{Path(path).name} has no fmax entry (clocks: {list(clocks)}){tail}")
    utilization = {bel: (int(entry.get("used", 0)), int(entry.get("available", 0)))
                   for bel, entry in (report.get("utilization") or {}).items()
                   if isinstance(entry, dict)}
    return fmax, utilization


_UTILIZATION_LINE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.MULTILINE)


def over_capacity(nextpnr_log: str) -> list[tuple[str, int, int]]:
    """``(bel type, used, available)`` for every bel type that nextpnr's "Device
    utilisation" lines show over 100 % (the design does not fit)."""
    return [(bel, int(used), int(available))
            for bel, used, available in _UTILIZATION_LINE.findall(nextpnr_log)
            if int(available) and int(used) > int(available)]


def over_capacity_text(nextpnr_log: str) -> str:
    """:func:`over_capacity` as text, e.g. ``"26104/5280 ICESTORM_LC, 9/8 ICESTORM_DSP"``;
    empty if every bel type fits."""
    return ", ".join(f"{used}/{available} {bel}"
                     for bel, used, available in over_capacity(nextpnr_log))


def capacity_shortfall(nextpnr_log: str) -> str | None:
    """What a design lacked if nextpnr failed for want of room, e.g. ``"26104/5280
    ICESTORM_LC"``; None if the log shows no capacity problem."""
    over = over_capacity_text(nextpnr_log)
    if over:
        return over
    lacking = re.search(r"no BELs remaining to implement cell type '(\w+)'", nextpnr_log)
    if lacking:
        return f"not enough {lacking.group(1)}"
    if "design is probably at utilisation limit" in nextpnr_log:
        return "at the utilisation limit"
    return None
