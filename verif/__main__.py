"""Command line: ``qllm {sim,lint}``.

``sim`` runs the golden test benches (all units' default configurations, or one unit with
``--unit``/``--config``/``--set``) and prints one line per bench with the vectors per second.
``lint`` runs ``verilator --lint-only -Wall`` on every ``build/verilog/<unit>.v``.
``bench`` prints throughput measured in simulation (cycles, not seconds).
"""

import argparse
import json
import multiprocessing
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from qllm_cores.gen import UNITS
from qllm_cores.gen.registry import load_object, parse_assignment

from .runner import ROOT, BenchFailure, primitive_models, run_testbench, tool_environment


def _run_bench(unit, overrides, args):
    """Run one unit's bench: ``(status, unit, line)``, status ``"pass"``, ``"fail"`` or
    ``"error"`` (bad parameters; ``line`` is the message)."""
    started = time.perf_counter()
    try:
        metrics = run_testbench(unit, overrides, config=args.config, seed=args.seed,
                                waves=args.waves or None, name="cli")
    except (ValueError, TypeError) as error:
        return "error", unit, str(error)
    except BenchFailure as error:
        return "fail", unit, f"FAIL {unit}: {error}"
    seconds = time.perf_counter() - started
    rates = [f"{name}: {m['beats']} beats at {m['beats_per_second']:.0f}/s"
             for name, m in metrics.items()
             if isinstance(m, dict) and "beats_per_second" in m]
    return "pass", unit, (f"PASS {unit} {metrics['manifest']['params']}: {metrics['tests']} "
                          f"tests in {seconds:.1f} s; {'; '.join(rates)}")


def _sim(args):
    units = args.unit or list(UNITS)
    if (args.set or args.config) and len(units) != 1:
        print("error: --set and --config need exactly one --unit", file=sys.stderr)
        return 2
    try:
        overrides = dict(parse_assignment(text) for text in args.set)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    jobs = min(args.jobs or 1, len(units))
    if jobs == 1:
        return _report_benches(_run_bench(unit, overrides, args) for unit in units)
    # Benches of different units build and run independently (each in its own build folder):
    # a process each, results printed as they finish.
    with ProcessPoolExecutor(max_workers=jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_run_bench, unit, overrides, args) for unit in units]
        status = _report_benches(future.result() for future in as_completed(futures))
        if status == 2:
            for future in futures:
                future.cancel()
        return status


def _report_benches(outcomes):
    """Print each bench's line as it comes; exit status 0 (all pass), 1 (a bench failed) or
    2 (bad parameters, reported at the first)."""
    failed = False
    for status, _, line in outcomes:
        if status == "error":
            print(f"error: {line}", file=sys.stderr)
            return 2
        print(line, flush=True)
        failed |= status == "fail"
    return 1 if failed else 0


def _bench(args):
    """Print sustained throughput of the streaming units, measured in simulation (cycles): the
    table each unit's registry entry names (``benchmark``)."""
    benchmarks = {unit: spec.benchmark for unit, spec in UNITS.items() if spec.benchmark}
    unknown = sorted(set(args.unit or []) - set(benchmarks))
    if unknown:
        print(f"no benchmark for {', '.join(unknown)}; benchmarks exist for "
              f"{', '.join(sorted(benchmarks))}", file=sys.stderr)
        return 2
    chosen = [unit for unit in benchmarks if not args.unit or unit in args.unit]
    for k, unit in enumerate(chosen):
        if k:
            print()
        load_object(benchmarks[unit])()
    return 0


def _formal(args):
    from .formal.cases import main as prove
    unknown = sorted(set(args.unit or []) - set(UNITS))
    if unknown:
        print(f"unknown unit(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    return prove(args.unit, select=args.property, jobs=args.jobs)


def lint_file(source, top):
    """Run ``verilator --lint-only -Wall`` on ``source`` alone (the waivers are inline in
    every generated file, :data:`gen.verilog.LINT_WAIVERS`); return the warnings.

    The behavioral models of the vendor primitives named in the unit's manifest (next to
    ``source``, if there is one) are read too, since the design instantiates them.
    """
    tool_environment()
    manifest = Path(source).with_suffix(".json")
    models = primitive_models(json.loads(manifest.read_text())) if manifest.is_file() else []
    command = ["verilator", "--lint-only", "-Wall", *map(str, models),
               str(source), "--top-module", top]
    result = subprocess.run(command, capture_output=True, text=True)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("%")]
    if result.returncode != 0 and not warnings:
        warnings = [f"%Error: verilator exited with {result.returncode}: {result.stderr[-500:]}"]
    return warnings


def _lint(args):
    sources = sorted(Path(args.dir).glob("*.v"))
    if not sources:
        print(f"error: no Verilog in {args.dir}: run `make verilog` first", file=sys.stderr)
        return 2
    status = 0
    for source in sources:
        warnings = lint_file(source, source.stem)
        print(f"{'FAIL ' if warnings else 'clean'} {source}")
        if warnings:
            print("\n".join(warnings[:20]))
            if len(warnings) > 20:
                print(f"... {len(warnings) - 20} more")
            status = 1
    return status


def positive_jobs(text):
    """``--jobs``: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(prog="qllm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("sim", help="run golden test benches")
    sim.add_argument("--unit", action="append", help="unit name (repeatable; default: all)")
    sim.add_argument("--config", help="named paper configuration")
    sim.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    sim.add_argument("--seed", type=int, help="random seed (default QLLM_SEED or 1)")
    sim.add_argument("--waves", action="store_true", help="write dump.fst (or set WAVES=1)")
    sim.add_argument("--jobs", type=positive_jobs, help="benches at a time (default 1)")
    lint = sub.add_parser("lint", help="verilator --lint-only -Wall on generated Verilog")
    lint.add_argument("--dir", default="build/verilog")
    bench = sub.add_parser("bench", help="print throughput measured in simulation")
    bench.add_argument("--unit", action="append", help="only these units")
    formal = sub.add_parser("formal", help="proofs: stream rules, arithmetic, Orizuru")
    formal.add_argument("--unit", action="append", help="only these units")
    formal.add_argument("--property", help="only properties whose name contains this")
    formal.add_argument("--jobs", type=int, help="proofs at a time (default: one per core)")
    args = parser.parse_args(argv)
    return {"sim": _sim, "lint": _lint, "bench": _bench, "formal": _formal}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
