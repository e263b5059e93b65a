"""FPGA and ASIC-style area estimates of the generated units, by Yosys (YoWASP build).

`synth` maps one Verilog file to one target and returns its cell counts; ``qllm
area`` does that for every generated unit and target and writes ``reports/area.md`` and
``reports/area.csv``.

Layers, bottom up: `fpga.tools` (finding a tool, log tails), `fpga.yosys` (synthesis ->
cell counts), `fpga.nextpnr` (nextpnr's report and capacity lines), `fpga.wrapper` (the
registered timing wrapper), `fpga.fmax` (a place-and-route run), `fpga.cache` (results kept
by Verilog and flow), `fpga.jobs` (the job runner: local process pool or dask, one progress
bar, one failure shape `fpga.jobs.Failure`); the studies above them describe rows and render
(`area`, `fmax`, `report` + `report_render`, `sweep` + `sweep_report`, `accllm_table` +
`accllm_report`, `paper_area`, `kllm_counter_split`), all run by `qllm <command>`.
The board link is the package `fpga.bridge` (protocol, gateware, board builds, host;
``qllm bitstream`` and ``qllm host``).
"""

from qllm_cores.fpga.yosys import (TARGETS, SynthError, SynthResult, Target, find_yosys, synth,
    yosys_version)

__all__ = [
    "TARGETS",
    "SynthError",
    "SynthResult",
    "Target",
    "find_yosys",
    "synth",
    "yosys_version",
]
