"""Elaboration benchmark: seconds from constructor to Verilog text, per configuration.

``qllm elaboration`` (``make elaboration``) builds every case of :data:`CASES` in its
own Python process (one core, nothing cached between cases: Amaranth's import and the
construction are in the time), converts it to Verilog with ``emit_src=False`` as ``make
verilog`` does, and prints one line per case: seconds (wall), CPU seconds (the process and
its Yosys child: the one-core time even when other jobs share the machine), the Verilog size,
and whether the wall time stays within ``--limit`` (default 30 s, the budget of the KLLM-scale
issue). A case that runs past
``--timeout`` is stopped and printed as such. It is a benchmark: it prints numbers and exits 0
unless a case fails to build; no test asserts a time.

The cases are each unit's default, its paper configurations, and the largest corners its
parameter checks accept (the widest lanes, the most bins, the largest ``n`` and ``k``), where
elaboration time grows.
"""

import argparse
import json
import subprocess
import sys
import time

from .registry import UNITS

__all__ = ["CASES", "cases", "main"]

#: The largest legal corners of each unit, beyond its default and paper configurations.
CASES = {
    "kllm_concat": [
        # The widest beat the constructor accepts (8 + 8 bits x 4096 lanes is refused).
        {"a_bits": 8, "b_bits": 7, "lanes": 4096},
    ],
    "kllm_idx_counter": [
        {"n_inputs": 16, "idx_bits": 10},
        {"n_inputs": 64, "idx_bits": 8},
        {"n_inputs": 64, "idx_bits": 10},
        {"n_inputs": 64, "idx_bits": 10, "mode": "ik", "weight_bits": 8},
        # The widest counters (32 bits: the largest max_len each mode accepts), and the other
        # bank and depth variants, at the most bins and inputs.
        {"n_inputs": 64, "idx_bits": 10, "max_len": (1 << 32) - 1},
        {"n_inputs": 64, "idx_bits": 10, "mode": "ik", "weight_bits": 8,
         "max_len": (1 << 24) - 1},
        {"n_inputs": 64, "idx_bits": 10, "mode": "ik", "weight_bits": 8, "banks": 1},
        {"n_inputs": 64, "idx_bits": 10, "mode": "ik", "weight_bits": 8, "pipeline": 0},
        # Two parts of 256 bins (9 index bits).
        {"n_inputs": 64, "idx_bits": 9, "mode": "ik", "weight_bits": 8},
    ],
    "orizuru": [
        {"n": 256, "k": 2},
        {"n": 1024, "k": 2},
        {"n": 256, "k": 16},
        {"n": 1024, "k": 64},
        {"n": 1024, "k": 64, "pipeline": 0},
        {"n": 256, "k": 16, "structure": "unrolled"},
        {"n": 1024, "k": 64, "structure": "unrolled"},
        # The lowest depths: one combinational circuit (the loop, the network).
        {"n": 1024, "k": 64, "structure": "unrolled", "pipeline": 0},
        {"n": 1024, "k": 64, "structure": "scan", "pipeline": 0},
        # The composition of 16-input units (the default above n = 1024): the largest n and k,
        # the lowest depth, and at n = 1024 beside the single tree.
        {"n": 4096, "k": 64},
        {"n": 2048, "k": 64, "pipeline": 0},
        {"n": 1024, "k": 64, "structure": "units"},
        # k = n, the largest k a single tree accepts (the tree's pop counter is all k changes).
        {"n": 1024, "k": 1024},
        # The pipelined unrolled circuit (k pops laid out in space) just past k = 2: its state
        # grows as k x n log2 n (docs/units/orizuru.md, elaboration).
        {"n": 1024, "k": 3, "structure": "unrolled"},
    ],
    "orizuru_scan": [
        {"n": 1024, "k": 2},
        {"n": 1024, "k": 3},
    ],
    "orizuru_sortnet": [
        {"n": 1024, "k": 2},
        {"n": 256, "k": 16},
        {"n": 1024, "k": 64},
        {"n": 1024, "k": 64, "pipeline": 0},
        # Larger k up to a full sort (k = n). k = 307: the largest root merge built pruned
        # (one module of 3,062 comparators; above, the full merge, in halves: see
        # hdl.kllm.orizuru.sortnet.full_merge_outputs), the slowest k.
        {"n": 1024, "k": 307},
        {"n": 1024, "k": 511},
        {"n": 1024, "k": 1024},
        {"n": 1024, "k": 1024, "pipeline": 0},
    ],
    "oaken_decomposer": [
        {"lanes": 64, "data_bits": 32},
    ],
    "oaken_dequantizer": [
        {"lanes": 64, "vec_len": 64, "data_bits": 32, "frac_bits": 16},
    ],
    "accllm_sparse_selector": [
        {"groups": 64, "rows": 32, "x_bits": 16},
    ],
}


def cases(units=None):
    """``[(unit, label, overrides)]``: defaults, paper configurations, then :data:`CASES`."""
    out = []
    for name, spec in UNITS.items():
        if units and name not in units:
            continue
        out.append((name, "defaults", {}))
        for config, overrides in spec.configs.items():
            out.append((name, config, dict(overrides)))
        for overrides in CASES.get(name, []):
            out.append((name, ",".join(f"{k}={v}" for k, v in overrides.items()), overrides))
    return out


_CHILD = """
import json, resource, sys, time
started = time.perf_counter()
from qllm_cores.gen.registry import resolve_params
from qllm_cores.gen.verilog import convert
unit, overrides = sys.argv[1], json.loads(sys.argv[2])
spec, params = resolve_params(unit, None, overrides)
text = convert(spec.build(params), unit)
cpu = time.process_time()
children = resource.getrusage(resource.RUSAGE_CHILDREN)   # Amaranth's Yosys (write_verilog)
cpu += children.ru_utime + children.ru_stime
print(json.dumps({"seconds": time.perf_counter() - started, "cpu": cpu, "bytes": len(text)}))
"""


def measure(unit, overrides, timeout):
    """Run one case in a fresh interpreter: ``{"seconds", "bytes"}``, ``{"timeout"}`` or
    ``{"error"}``."""
    started = time.perf_counter()
    try:
        run = subprocess.run([sys.executable, "-c", _CHILD, unit, json.dumps(overrides)],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": time.perf_counter() - started}
    if run.returncode != 0:
        lines = (run.stderr or run.stdout).strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {run.returncode}"}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="qllm elaboration",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--unit", action="append", help="only this unit (repeatable)")
    parser.add_argument("--limit", type=float, default=30.0,
                        help="seconds a case should stay within (default 30)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="stop a case after this many seconds (default 120)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.unit or ()) - set(UNITS))
    if unknown:
        print(f"error: unknown unit {unknown[0]!r}; known units: {', '.join(sorted(UNITS))}",
              file=sys.stderr)
        return 2
    failed = over = 0
    print(f"{'unit':<24} {'case':<52} {'seconds':>8} {'CPU s':>7} {'Verilog':>9}")
    for unit, label, overrides in cases(args.unit):
        result = measure(unit, overrides, args.timeout)
        if "error" in result:
            failed += 1
            print(f"{unit:<24} {label:<52} {'error':>8}  {result['error']}")
            continue
        if "timeout" in result:
            over += 1
            print(f"{unit:<24} {label:<52} {'>' + format(args.timeout, 'g'):>8}  "
                  f"stopped (over {args.limit:g} s)", flush=True)
            continue
        mark = "" if result["seconds"] <= args.limit else f"  over {args.limit:g} s"
        over += bool(mark)
        print(f"{unit:<24} {label:<52} {result['seconds']:>8.1f} {result['cpu']:>7.1f} "
              f"{result['bytes'] / 1e6:>7.2f} MB{mark}", flush=True)
    print(f"{len(cases(args.unit))} cases, {over} over {args.limit:g} s, {failed} failed")
    return 1 if failed else 0
