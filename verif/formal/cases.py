"""Every proof of ``make formal``, generated from the unit registry, and the summary table
(unit, configuration, property, engine, depth, result, seconds) in
``build/formal/summary.md``.

Configurations: the stream rules are proved for every unit at every ``pipeline`` depth from 0 to
its default (``orizuru``: 0 and its default, ``None``, the structure's own depth), the counting
properties at 0 and the default (at a reduced shape where named below). Counting proofs run
PDR directly: k-induction cannot relate the harness's counters to the unit's state.

Then the data properties, each module's ``proofs()`` (their docstrings give the configurations
and the reach): :mod:`~verif.formal.arith_accllm` (products of ``accllm_dsp_mul``),
:mod:`~verif.formal.arith_p3_oaken` (``p3_pe`` lanes, ``oaken_decomposer`` groups) and
:mod:`~verif.formal.orizuru` (the top-k invariants).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from gen.registry import UNITS, resolve_params

from . import Proof, arith_accllm, arith_p3_oaken, orizuru
from .engines import ENGINES as ENGINE_NAMES
from .counting import PROPERTIES as COUNTING
from .counting import StreamCountHarness
from .stream import StreamHoldHarness

__all__ = ["proofs", "main"]


def pipeline_depths(unit):
    """``pipeline`` values proved for ``unit``: 0 up to its default."""
    default = UNITS[unit].defaults.get("pipeline")
    if not isinstance(default, int):
        return [0, default]
    return list(range(default + 1))


#: Counting proofs run at a reduced shape where the default one is beyond PDR in minutes (the
#: column's at its smallest, and bounded: see BOUNDED): the
#: counter's 256 bins of 13 bits at 16 inputs did not finish in 600 s, nor did "drains" at 4
#: bins of 2 inputs and pipeline=3 in 300 s (a 30-cycle bounded check passes); the same control
#: logic (two banks, readout, bin clearing, the pipeline) at 2 bins of 1 input proves in ~50 s.
#: Orizuru's family proves at n = 16 (orizuru "drains" in ~200 s, orizuru_scan's at pipeline=3
#: not in 300 s) and in under a minute at n = 4; the dequantizer's chunk bookkeeping at 4 lanes
#: of 16-element chunks.
COUNTING_SHAPES = {"kllm_idx_counter": {"n_inputs": 1, "idx_bits": 1, "max_len": 4},
                   "orizuru": {"n": 4}, "orizuru_scan": {"n": 4}, "orizuru_sortnet": {"n": 4},
                   "oaken_dequantizer": {"lanes": 4, "vec_len": 16},
                   "kllm_column": {"a_bits": 1, "b_bits": 1, "n_inputs": 1, "max_len": 2}}

#: The k-induction depth of the hold proofs: the hold is a relation between two consecutive
#: cycles, and k = 2 proves it on every unit but Orizuru's trees (which go to PDR; k = 8 did not
#: prove them either), 2 to 4 times as fast as k = 8.
HOLD_DEPTH = 2

#: Counting properties checked bounded (cycles from reset), by design, not proved: the
#: dequantizer's "drains". PDR decides it at no shape within the budget (4 lanes of 16-element
#: chunks: not in 300 s at ``pipeline`` 0 or 7; 1 lane of 2-element chunks, 2-bit data: 119 to
#: 262 s at ``pipeline`` 0, not in 400 s at 7). 40 cycles hold a few chunks of that shape
#: through the 7-stage pipeline.
BOUNDED = {("oaken_dequantizer", "drains"): 40,
           # kllm_column (issue 18): PDR decides none of the three at the smallest shape (4
           # bins of 1 input) in 120 s: the binary32 weighted sum (a 24-bit adder loop, the
           # codebook memory) is in the cone of every output beat. 60 cycles hold two
           # reductions through that shape at the default depth.
           **{("kllm_column", prop): 60 for prop in ("nothing from nothing",
                                                     "bounded in flight", "drains")}}

#: Units with no proofs yet, and why (issue 18). oaken_quantizer: its hold proofs end
#: UNKNOWN in the 120 s budget at every depth (PDR and a 30-cycle bounded check alike: the
#: ping-pong chunk buffer is a memory of 2 x 64 x 17 bits that memory_map turns into logic),
#: and the counting harness counts one output stream (`o`) where it has three.
NO_PROOFS = {"oaken_quantizer"}

#: Cycles of the bounded check that follows a proof no engine decided: no proof, but it tells
#: "no counterexample that short" from a failing design.
BOUNDED_DEPTH = 30


def stream_proofs(unit):
    """The hold rule at every depth; the counting properties at 0 and the default."""
    rows = []
    depths = pipeline_depths(unit)
    for depth in depths:
        _, params = resolve_params(unit, None, {"pipeline": depth})
        rows.append(Proof(unit, f"pipeline={depth}", "stream hold", StreamHoldHarness, params,
                          depth=HOLD_DEPTH))
    reduced = COUNTING_SHAPES.get(unit, {})
    for depth in dict.fromkeys((depths[0], depths[-1])):
        overrides = {**reduced, "pipeline": depth}
        _, params = resolve_params(unit, None, overrides)
        configuration = ",".join(f"{name}={value}" for name, value in overrides.items())
        for prop in COUNTING:
            bounded = BOUNDED.get((unit, prop))
            engine, proof_depth = ("bmc", bounded) if bounded else ("pdr", 8)
            rows.append(Proof(unit, configuration, prop,
                              partial(StreamCountHarness, unit=unit, params=params, prop=prop),
                              params, engine, proof_depth))
    return rows


#: The modules of the data properties, in table order.
DATA = (arith_accllm, arith_p3_oaken, orizuru)


def proofs(units=None):
    """Every proof, in table order: the stream rules unit by unit, then the data properties
    (of the chosen ``units``)."""
    chosen = [unit for unit in (units or UNITS) if unit not in NO_PROOFS]
    rows = []
    for unit in chosen:
        rows += stream_proofs(unit)
    for module in DATA:
        rows += [row for row in module.proofs() if row.unit in chosen]
    return rows


#: The stream properties' row names.
STREAM_PROPERTIES = ("stream hold", *COUNTING)

HEADER = ["| unit | configuration | property | engine | depth | result | seconds |",
          "|---|---|---|---|---:|---|---:|"]


def row_line(proof, result):
    depth = {"pdr": "unbounded", "kind": f"k = {result.depth}"}.get(result.engine,
                                                                   f"{result.depth} cycles")
    status = result.status + (f" ({result.detail})" if result.detail else "")
    return (f"| {proof.unit} | {proof.configuration} | {result.prop} | "
            f"{ENGINE_NAMES[result.engine]} | {depth} | {status} | {result.seconds:.1f} |")


def _run(proof, build_dir):
    """The proof's result, and a bounded check's when the proof is undecided."""
    result = proof.run(build_dir)
    if result.status != "UNKNOWN":
        return [result]
    bounded = replace(proof, engine="bmc", depth=BOUNDED_DEPTH).run(build_dir)
    return [result, replace(bounded, prop=bounded.prop + ", bounded")]


def main(units=None, build_dir="build", select=None, jobs=None) -> int:
    """Run every proof (``select``: a substring of the property names), ``jobs`` at a time
    (default: one more than the cores, so that a proof being elaborated in Python overlaps the
    tools of the others); print the table in proof order
    and write it to ``build/formal/summary.md``; exit code 1 unless every proof passes."""
    chosen = [proof for proof in proofs(units) if not select or select in proof.prop]
    lines = list(HEADER)
    print("\n".join(lines), flush=True)
    started = time.perf_counter()
    results = []
    with ThreadPoolExecutor(max_workers=jobs or (os.cpu_count() or 1) + 1) as pool:
        # The data proofs (the longest) start first; the table keeps its order.
        order = sorted(range(len(chosen)), key=lambda n: chosen[n].prop in STREAM_PROPERTIES)
        futures = {n: pool.submit(_run, chosen[n], build_dir) for n in order}
        for proof, ran in ((chosen[n], futures[n].result()) for n in range(len(chosen))):
            results.append(ran[0])
            for result in ran:
                lines.append(row_line(proof, result))
                print(lines[-1], flush=True)
    failed = sum(result.status != "PASS" for result in results)
    total = f"\n{len(results)} proofs, {failed} not passed, {time.perf_counter() - started:.0f} s"
    print(total, flush=True)
    Path(build_dir, "formal").mkdir(parents=True, exist_ok=True)
    Path(build_dir, "formal", "summary.md").write_text("\n".join(lines) + "\n" + total + "\n")
    return 1 if failed else 0
