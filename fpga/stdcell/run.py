"""One standard-cell run, in a process of its own:
``python -m qllm_cores.fpga.stdcell.run the contract.json``.

The native Yosys of the ``pyosys`` wheel (it reads gzipped Liberty files and ships a native
``yosys-abc`` whose reports reach the log) synthesises the Verilog once, generically, then maps
it twice: for area (``dfflibmap``, ABC's default liberty script) and for delay (ABC: ``map``
for delay, ``topo`` (else a dangling node can stop ``buffer -p``), ``buffer -p``, ``upsize``,
``dnsize``, then ``stime -p``: the default script's
``dc2`` turns Brent-Kung adders back into ripple carry, and ``stime`` on an unbuffered netlist
is meaningless). Writes ``area.json`` (Yosys ``stat -json -liberty``) and ``delay.log`` (ABC's
report) in the current folder; Yosys's own log is this process's output. The spec: ``verilog``,
``top``, ``liberty`` (list), ``dont_use`` (list of patterns).
"""

from __future__ import annotations

import json
import sys

#: ABC's delay mapping (``{D}``: the target in ps; 1 asks for the fastest mapping).
DELAY_SCRIPT = ("strash\ndch\nmap -D {D}\ntopo\nbuffer -p\nupsize -D {D}\ndnsize -D {D}\n"
                "stime -p\n")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as handle:
        spec = json.load(handle)
    from pyosys import libyosys as yosys          # (imported here: a native library)

    design = yosys.Design()

    def run(command):
        yosys.run_pass(command, design)

    libs = " ".join(f"-liberty {path}" for path in spec["liberty"])
    avoid = " ".join(f"-dont_use {pattern}" for pattern in spec["dont_use"])
    with open("delay.abc", "w") as handle:
        handle.write(DELAY_SCRIPT.format(D=1))
    run("logger -notime")
    run(f"read_verilog -sv {spec['verilog']}")
    run(f"hierarchy -check -top {spec['top']}")
    run(f"synth -flatten -top {spec['top']}")
    run("design -save generic")
    run(f"dfflibmap {libs} {avoid}")
    run(f"abc {libs} {avoid}")
    run("opt_clean")
    run(f"tee -q -o area.json stat -json {libs}")
    run("design -load generic")
    run(f"dfflibmap {libs} {avoid}")
    run(f"tee -q -o delay.log abc {libs} {avoid} -script delay.abc")
    return 0


if __name__ == "__main__":
    sys.exit(main())
