"""Every proof of ``make formal``, generated from the unit registry, and the summary table
(unit, configuration, property, engine, depth, result, seconds) in
``build/formal/summary.md``.

Configurations: the stream rules are proved for every unit at every ``pipeline`` depth from 0 to
its default (``orizuru``: 0 and its default, ``None``, the structure's own depth), the counting
properties at 0 and the default (at a reduced shape where named below). Counting proofs run
PDR directly (k-induction cannot relate the harness's counters to the unit's state), or the
engine :data:`COUNTING_ENGINES` names (k-induction where the account gives lemmas that do);
an output stream of :data:`BOUNDED_STREAMS` is counted in bounded rows of its own.

Then the data properties, each module's ``proofs()`` (their docstrings give the configurations
and the reach), in :data:`DATA`: :mod:`~verif.formal.arith_kllm` (Concat, the counter's
histograms), :mod:`~verif.formal.orizuru` (the top-k invariants),
:mod:`~verif.formal.arith_p3_oaken` (``p3_pe`` lanes, ``oaken_decomposer`` groups),
:mod:`~verif.formal.arith_oaken` (the dequantizer's values, the quantizer's thresholds and
COO entries),
:mod:`~verif.formal.arith_pcu` (``p3_pcu`` lanes), :mod:`~verif.formal.arith_float`
(``fp16_mac``, ``fp16_pcu``), :mod:`~verif.formal.arith_float_half` (``fp16_mac`` with
``acc="fp16"``), :mod:`~verif.formal.arith_accllm` (products of
``accllm_dsp_mul``) and :mod:`~verif.formal.arith_accllm_pe` (``accllm_pe``, its plain
baseline, the sparse selector).

:func:`gaps` checks that every registered unit has all of them (``make formal`` fails on a
gap; ``tests/test_formal_coverage.py`` in ``make test``); :data:`NO_STREAM_PROOF` and
:data:`NO_DATA_PROOF` name the exceptions and why.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from qllm_cores.gen.registry import UNITS, resolve_params

from . import (Proof, arith_accllm, arith_accllm_pe, arith_float, arith_float_half, arith_kllm,
               arith_oaken, arith_p3_oaken, arith_pcu, orizuru)
from .engines import ENGINES as ENGINE_NAMES
from .engines import warm_up
from .counting import ACCOUNTS, StreamCountHarness
from .counting import PROPERTIES as COUNTING
from .stream import StreamHoldHarness

__all__ = ["proofs", "gaps", "main", "drain_window"]


def pipeline_depths(unit):
    """``pipeline`` values proved for ``unit``: 0 up to its default."""
    default = UNITS[unit].defaults.get("pipeline")
    if not isinstance(default, int):
        return [0, default]
    return list(range(default + 1))


#: Hold proofs run at a reduced shape where the default one is beyond the budget: the units
#: below are ``lanes`` / ``pes`` copies of one circuit beside shared control, and the hold rule
#: is a property of the control (valid, ready, the stall of every register, the output
#: queues), which the copies do not change. p3_pcu: 16 PEs took 110 s at depth 8 on a loaded
#: machine (4 PEs: 16 s), its 16-entry output queue of 16 x 34-bit results mapped to logic.
#: (The quantizer proves at its default shape, 2-11 s a depth, with its invariants.)
HOLD_SHAPES = {"p3_pcu": {"pes": 4}}

#: Counting proofs run at a reduced shape where the default one is beyond PDR in minutes (the
#: column's at its smallest, and bounded: see BOUNDED): the
#: counter's 256 bins of 13 bits at 16 inputs did not finish in 600 s, nor did "drains" at 4
#: bins of 2 inputs and pipeline=3 in 300 s (a 30-cycle bounded check passes); the same control
#: logic (two banks, readout, bin clearing, the pipeline) at 2 bins of 1 input proves in ~50 s.
#: Orizuru's family proves at n = 16 (orizuru "drains" in ~200 s, orizuru_scan's at pipeline=3
#: not in 300 s) and in under a minute at n = 4; the dequantizer's chunk bookkeeping at 4 lanes
#: of 16-element chunks; the units of :data:`HOLD_SHAPES` at their hold shapes.
COUNTING_SHAPES = {"kllm_idx_counter": {"n_inputs": 1, "idx_bits": 1, "max_len": 4},
                   "orizuru": {"n": 4}, "orizuru_scan": {"n": 4}, "orizuru_sortnet": {"n": 4},
                   "oaken_dequantizer": {"lanes": 4, "vec_len": 16},
                   "kllm_column": {"a_bits": 1, "b_bits": 1, "n_inputs": 1, "max_len": 2},
                   **HOLD_SHAPES,
                   # p3_pcu: its credits, output queue and pipeline are the same at every
                   # `pes`; at 4 PEs PDR did not finish in 120 s at depth 8, and dprove's
                   # "drains" aborts at 2 and 4 PEs (1 PE: 22 s).
                   "p3_pcu": {"pes": 1},
                   # The quantizer: two lanes (a COO beat packs two entries) of two-window
                   # chunks, as its data property (its hdr and dense rows also prove at the
                   # default shape, 4-9 s; "drains" needs the 24-cycle window below).
                   "oaken_quantizer": {"lanes": 2, "vec_len": 4, "data_bits": 2,
                                       "frac_bits": 1}}

#: The k-induction depth of the hold proofs: the hold is a relation between two consecutive
#: cycles, and k = 2 proves it on every unit but Orizuru's trees (which go to PDR; k = 8 did not
#: prove them either), 2 to 4 times as fast as k = 8.
HOLD_DEPTH = 2

#: Counting properties checked bounded (cycles from reset), by design, not proved: the
#: dequantizer's "drains". PDR decides it at no shape within the budget (4 lanes of 16-element
#: chunks: not in 300 s at ``pipeline`` 0 or 7; 1 lane of 2-element chunks, 2-bit data: 119 to
#: 262 s at ``pipeline`` 0, not in 400 s at 7). 40 cycles hold a few chunks of that shape
#: through the 7-stage pipeline.
BOUNDED = {("oaken_dequantizer", "drains"):
           (40, "bounded by design: PDR decides it at no shape in 120 s"),
           # kllm_column (4 bins of 1 input, codebook of 1-bit entries): dprove leaves an
           # 84-latch miter it cannot decide (its PDR gives up after 60 s; plain PDR on that
           # miter undecided after 500 s) for "drains" at depth 0 and all three at the default
           # depth 6 (it proves "nothing from nothing" and "bounded in flight" at depth 0;
           # measured at 84f8ca0 and here, same Verilog; the entry was keyed to depth 5, the
           # default before the input buffer).
           # "drains" needs its 64-cycle stall window after a result: 85 cycles at depth 0
           # (the first result by cycle 20, latency 15) and 100 at depth 6 (latency 30) reach a
           # stall after the first result; the other two take 45 cycles at depth 6 (the first
           # results; a bounded check there grows from 3 s at 40 cycles to 95 s at 50).
           ("kllm_column", "drains", 0):
           (85, "bounded by design: dprove and PDR do not decide it at this depth"),
           **{("kllm_column", prop, 7): ((100 if prop == "drains" else 45),
                                         "bounded by design: dprove and PDR do not decide it "
                                         "at this depth")
              for prop in ("nothing from nothing", "bounded in flight", "drains")}}


def bounded(unit, prop, depth):
    """``(cycles, reason)`` of a counting property checked bounded by design, or None."""
    return BOUNDED.get((unit, prop, depth), BOUNDED.get((unit, prop)))

#: Units whose counting proofs run another engine than ``pdr`` (``(engine, depth)``): kllm_column's
#: ABC ``dprove`` (PDR decides none of the three at the smallest shape, 4 bins of 1 input, in 120 s
#: or 300 s: the binary32 weighted sum is in the cone of every output beat, since zero bins are
#: skipped; ``dprove`` simplifies first and proves two of them at depth 0, the rest being in
#: BOUNDED, 25-40 s a row with induction to depth 12:
#: at ABC's default 4 its final PDR, 60 s, gave up on "bounded in flight" once the ping-pong
#: buffers' occupancy became two flags); p3_pcu's ``dprove`` (PDR: not in 120 s at depth 8 at 4
#: PEs, the 16-entry output queue's 34-bit words in the design; dprove: 1-22 s at 1 PE); the
#: quantizer's k-induction with the lemmas of its account (its credits and queue levels are the
#: harness's counts, ``OakenQuantizer.owed``): k = 26 covers the 24-cycle drain window ("drains" at
#: ``pipeline`` 12 is not 12-inductive), 4-19 s a row; PDR and dprove decide none of the three in
#: 120 s. (kllm_idx_counter ran ``dprove`` while PDR did not decide "drains" at ``pipeline`` 3 in
#: 120 s; since the accumulators' reset is the ``acc_clear`` flip-flop, PDR proves it in 39 s and
#: YoWASP's ``dprove`` stops on a WebAssembly stack overflow, so it is back on the default
#: ``pdr``.)
COUNTING_ENGINES = {"kllm_column": ("dprove", 12), "p3_pcu": ("dprove", 8),
                    "oaken_quantizer": ("kind", 26)}

#: Output streams whose counting properties are checked bounded, by design, in rows of their
#: own (the unit's other streams are proved): ``unit -> (streams, {pipeline: cycles},
#: reason)``; "drains" runs at least until the stall window after the first transaction
#: closes (:data:`FIRST_OWED` cycles and the account's window).
#: Cycles from reset by which the reduced shapes' first transaction is complete (owed).
FIRST_OWED = 6

BOUNDED_STREAMS = {
    # The COO beat with `last` is the one where the chunk's running outlier count reaches its
    # total (from the statistics); that exactly one comes per chunk rests on that total
    # matching the chunk's beats in the buffer, a relation over LUT-RAM contents and the
    # measurement pipeline that k-induction, PDR and dprove do not find (dprove: "gave up"
    # after 65-76 s a property). 16 cycles at pipeline=0 hold about five chunks, 26 at 12
    # the 17-cycle latency and about four (the bounds of its data property).
    "oaken_quantizer": (
        ("coo",), {0: 16, 12: 26},
        "bounded by design: one COO last per chunk rests on the chunk's outlier total "
        "matching its buffered beats, which no engine relates in 120 s"),
}

#: Cycles of the bounded check that follows a proof no engine decided: no proof, but it tells
#: "no counterexample that short" from a failing design ("drains": this many more than the
#: unit's stall window, which a shorter check could never see close).
BOUNDED_DEPTH = 30


def drain_window(unit, params):
    """Cycles the unit may stall its outputs after a transaction closes (its stream account's
    ``drain_cycles``): a bounded "drains" check must reach past them to see anything."""
    return ACCOUNTS[unit](params).drain_cycles


def _configuration(overrides):
    return ",".join(f"{name}={value}" for name, value in overrides.items())


#: Depths above a unit's default that another unit builds it at, proved like the default:
#: depth -> (the counting shape's parameters changed, the counting engine): the hold rule at
#: the hold shape, the counting properties at the counting shape so changed.
#: kllm_idx_counter's ``pipeline`` 4 (the distribute cut, kllm_column's default front) needs
#: 6..8 index bits: 64 bins of 1 lane, by ``dprove`` (PDR decided none of the three in 120 s,
#: nor a 90-cycle bounded check; dprove 6 to 43 s).
EXTRA_DEPTHS = {"kllm_idx_counter": {4: ({"idx_bits": 6, "max_len": 4}, ("dprove", 12))}}


def stream_proofs(unit):
    """The hold rule at every depth; the counting properties at 0 and the default (and at
    :data:`EXTRA_DEPTHS`)."""
    rows = []
    depths = pipeline_depths(unit)
    extra = EXTRA_DEPTHS.get(unit, {})
    shape = HOLD_SHAPES.get(unit, {})
    for depth in [*depths, *extra]:
        overrides = {**shape, "pipeline": depth}
        _, params = resolve_params(unit, None, overrides)
        rows.append(Proof(unit, _configuration(overrides), "stream hold", StreamHoldHarness,
                          params, depth=HOLD_DEPTH))
    reduced = COUNTING_SHAPES.get(unit, {})
    for depth in [*dict.fromkeys((depths[0], depths[-1])), *extra]:
        changed, engine_here = extra.get(depth, ({}, None))
        overrides = {**reduced, **changed, "pipeline": depth}
        _, params = resolve_params(unit, None, overrides)
        configuration = _configuration(overrides)
        # (streams asserted, configuration shown, (cycles, reason) if bounded by design)
        groups = [(None, configuration, None)]
        if unit in BOUNDED_STREAMS:
            apart, cycles, reason = BOUNDED_STREAMS[unit]
            proved = [output.name for output in ACCOUNTS[unit](params).outputs
                      if output.name not in apart]
            groups = [(proved, f"{configuration},streams={'+'.join(proved)}", None),
                      (list(apart), f"{configuration},streams={'+'.join(apart)}",
                       (cycles[depth], reason))]
        for prop in COUNTING:
            for streams, shown, fixed in groups:
                cycles, note = fixed or bounded(unit, prop, depth) or (None, "")
                if fixed and prop == "drains":
                    # the stall window after the first transaction closes within the check
                    cycles = max(cycles, FIRST_OWED + drain_window(unit, params))
                default = engine_here or COUNTING_ENGINES.get(unit, ("pdr", 8))
                engine, proof_depth = ("bmc", cycles) if cycles else default
                rows.append(Proof(unit, shown, prop,
                                  partial(StreamCountHarness, unit=unit, params=params,
                                          prop=prop, streams=streams),
                                  params, engine, proof_depth, note))
    return rows


#: The modules of the data properties, in table order.
DATA = (arith_kllm, orizuru, arith_p3_oaken, arith_oaken, arith_pcu, arith_float,
        arith_float_half, arith_accllm, arith_accllm_pe)


def proofs(units=None):
    """Every proof, in table order: the stream rules unit by unit, then the data properties
    (of the chosen ``units``)."""
    chosen = list(units or UNITS)
    rows = []
    for unit in chosen:
        if unit not in NO_STREAM_PROOF:
            rows += stream_proofs(unit)
    for module in DATA:
        rows += [row for row in module.proofs() if row.unit in chosen]
    return rows


#: The stream properties' row names.
STREAM_PROPERTIES = ("stream hold", *COUNTING)

#: Units without a data property, and why (the table's coverage check, :func:`gaps`, requires
#: one of every other unit).
NO_DATA_PROOF = {
    "kllm_column": "its output is a binary32 weighted sum over a codebook loaded on a second "
                   "stream: at the smallest shape (4 bins of 1 input) a reduction after a "
                   "codebook load answers about 25 cycles from reset, a bounded check reached "
                   "24 cycles in 80 s and dprove did not finish in 120 s; its parts are proved "
                   "(the counter's histograms, kllm_concat) and the column is simulated "
                   "against the golden model",
}

#: Units without stream proofs, and why (:func:`gaps` requires them of every other unit; the
#: summary lists these under "not proved").
NO_STREAM_PROOF = {}


def gaps(units=None, rows=None):
    """What the proofs of ``units`` (default: every registered unit) miss, one line each: a
    unit without a counting account, a ``pipeline`` depth without a hold proof, a counting
    property not proved at the lowest and the default depth (and :data:`EXTRA_DEPTHS`), a unit
    without a data property (unless :data:`NO_DATA_PROOF` says why). Empty when every unit is
    covered."""
    units = list(units or UNITS)
    rows = proofs(units) if rows is None else rows
    missing = []
    for unit in units:
        mine = [row for row in rows if row.unit == unit]
        if unit in NO_STREAM_PROOF:
            data = [row for row in mine if row.prop not in STREAM_PROPERTIES]
            if not data and unit not in NO_DATA_PROOF:
                missing.append(f"{unit}: no data property (a proofs() row of a module in "
                               f"DATA)")
            continue
        if unit not in ACCOUNTS:
            missing.append(f"{unit}: no counting account (verif/formal/counting.py ACCOUNTS)")
        depths = pipeline_depths(unit)
        extra = list(EXTRA_DEPTHS.get(unit, {}))
        held = {row.params.get("pipeline") for row in mine if row.prop == "stream hold"}
        missing += [f"{unit}: no stream hold proof at pipeline={depth}"
                    for depth in [*depths, *extra] if depth not in held]
        for prop in COUNTING:
            counted = {row.params.get("pipeline") for row in mine if row.prop == prop}
            missing += [f"{unit}: no {prop!r} proof at pipeline={depth}"
                        for depth in [*dict.fromkeys((depths[0], depths[-1])), *extra]
                        if depth not in counted]
        data = [row for row in mine if row.prop not in STREAM_PROPERTIES]
        if not data and unit not in NO_DATA_PROOF:
            missing.append(f"{unit}: no data property (a proofs() row of a module in DATA)")
    return missing

HEADER = ["| unit | configuration | property | engine | depth | result | seconds |",
          "|---|---|---|---|---:|---|---:|"]


def row_line(proof, result):
    depth = {"pdr": "unbounded", "dprove": "unbounded",
             "kind": f"k = {result.depth}"}.get(result.engine,
                                                                   f"{result.depth} cycles")
    detail = result.detail or (proof.note if result.engine == "bmc" else "")
    status = result.status + (f" ({detail})" if detail else "")
    return (f"| {proof.unit} | {proof.configuration} | {result.prop} | "
            f"{ENGINE_NAMES[result.engine]} | {depth} | {status} | {result.seconds:.1f} |")


def _run(proof, build_dir):
    """The proof's result, and a bounded check's when the proof is undecided."""
    result = proof.run(build_dir)
    if result.status != "UNKNOWN":
        return [result]
    cycles = BOUNDED_DEPTH
    if proof.prop == "drains":
        cycles += drain_window(proof.unit, proof.params)
    bounded = replace(proof, engine="bmc", depth=cycles).run(build_dir)
    return [result, replace(bounded, prop=bounded.prop + ", bounded")]


def main(units=None, build_dir="build", select=None, jobs=None) -> int:
    """Run every proof (``select``: a substring of the property names), ``jobs`` at a time
    (default: one more than the cores, so that a proof being elaborated in Python overlaps the
    tools of the others); print the table in proof order
    and write it to ``build/formal/summary.md``; exit code 1 unless every proof passes and
    (without ``select``) every unit has every proof :func:`gaps` asks for."""
    rows = proofs(units)
    missing = [] if select else gaps(units, rows)
    chosen = [proof for proof in rows if not select or select in proof.prop]
    warm_up()
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
    exempt = {**{unit: f"no stream proofs: {why}" for unit, why in NO_STREAM_PROOF.items()},
              **{unit: f"no data property: {why}" for unit, why in NO_DATA_PROOF.items()}}
    exempt = [f"  {unit}: {why}" for unit, why in exempt.items() if unit in (units or UNITS)]
    if exempt and not select:
        total += "\nnot proved (by design, see verif/formal/cases.py):\n" + "\n".join(exempt)
    if missing:
        total += "\nmissing proofs:\n" + "\n".join(f"  {line}" for line in missing)
    print(total, flush=True)
    Path(build_dir, "formal").mkdir(parents=True, exist_ok=True)
    Path(build_dir, "formal", "summary.md").write_text("\n".join(lines) + "\n" + total + "\n")
    return 1 if failed or missing else 0
