"""FPGA and ASIC-style area estimates of the generated units, by Yosys (YoWASP build).

`synth` maps one Verilog file to one target and returns its cell counts; ``python -m fpga
area`` does that for every generated unit and target and writes ``reports/area.md`` and
``reports/area.csv``.
"""

from fpga.yosys import TARGETS, SynthError, SynthResult, Target, find_yosys, synth, yosys_version

__all__ = [
    "TARGETS",
    "SynthError",
    "SynthResult",
    "Target",
    "find_yosys",
    "synth",
    "yosys_version",
]
