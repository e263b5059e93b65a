"""Running the open FPGA tools: the bottom layer of ``fpga/``.

Finding a tool (the YoWASP wheels install beside the interpreter), the last lines of a
tool's log for an error message, and small helpers the studies share. The Yosys and nextpnr
layers (:mod:`fpga.yosys`, :mod:`fpga.nextpnr`) and the board build use these; nothing here
knows a unit or a study.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LOG_TAIL_LINES", "find_tool", "flattened_size", "log_tail", "unique"]

LOG_TAIL_LINES = 25
"""Lines of a log quoted in an error message."""


def find_tool(name: str, error: type[Exception] = RuntimeError) -> Path:
    """The executable ``name``: the one beside the running interpreter (a wheel installed
    in the same environment) if present, else the one on ``PATH``.

    Raises
    ------
    error
        If neither exists, naming the package to install.
    """
    beside_interpreter = Path(sys.executable).parent / name
    if beside_interpreter.is_file():
        return beside_interpreter
    on_path = shutil.which(name)
    if on_path is None:
        raise error(f"{name} not found beside {sys.executable} nor on PATH; "
                    f"install it with `pip install {name}`")
    return Path(on_path)


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``log``, formatted to be appended to an error message."""
    log = Path(log)
    if not log.is_file():
        return f"\n(no log at {log})"
    text = log.read_text(errors="replace").rstrip().splitlines()
    tail = "\n".join(text[-lines:])
    return f"\nlast {min(len(text), lines)} lines of {log}:\n{tail}"


_MODULE = re.compile(r"^module\s+\\?([^\s(;]+)(.*?)^endmodule", re.M | re.S)
_INSTANCE = re.compile(r"^\s+\\?([^\s(#]+)\s+(?:#\s*\(.*?\)\s*)?\\?[^\s(]+\s*\(", re.M | re.S)


def flattened_size(verilog: Path, top: str) -> int:
    """Characters of Verilog ``top`` would have if every instance of a module defined in
    the file were written out in place: a cheap, deterministic estimate of a design's
    synthesis work, by which the studies start their longest runs first (a module shared
    by 16 lanes counts 16 times). Instances of modules not defined in the file (vendor
    primitives) count nothing; 0 if ``top`` is not defined there."""
    modules = {match.group(1): match.group(2) for match in _MODULE.finditer(
        Path(verilog).read_text(errors="replace"))}
    sizes: dict[str, int] = {}

    def size(name: str, seen: frozenset) -> int:
        if name not in sizes:
            body = modules[name]
            sizes[name] = len(body) + sum(
                size(child, seen | {name}) for child in _INSTANCE.findall(body)
                if child in modules and child not in seen | {name})
        return sizes[name]

    return size(top, frozenset()) if top in modules else 0


def unique(items: Iterable) -> list:
    """``items`` without repeats, in first-seen order."""
    return list(dict.fromkeys(items))
