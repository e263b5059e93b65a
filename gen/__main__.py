"""Command line: ``qllm {list,verilog,elaboration}``."""

import argparse
import sys
from pathlib import Path

from .axis import wrap
from .registry import UNITS, parse_assignment, resolve_params
from .verilog import check_prefix, generate


def main(argv=None):
    parser = argparse.ArgumentParser(prog="qllm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list units, their defaults and paper configurations")
    gen = sub.add_parser("verilog", help="write build/verilog/<unit>.v and its manifest")
    gen.add_argument("--unit", action="append", help="unit name (repeatable; default: all)")
    gen.add_argument("--config", help="named paper configuration of the unit")
    gen.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override one parameter (repeatable)")
    gen.add_argument("--prefix", default="",
                     help="prepended to the top module and every submodule's name, so that "
                          "several configurations share one Verilog project; also names the "
                          "files (<prefix><unit>.v)")
    gen.add_argument("--axis", action="store_true",
                     help="write the AXI4-Stream form instead: <prefix><unit>_axis.v, ports "
                          "s_axis_t*/m_axis_t*, aclk, aresetn (docs/integration.md)")
    gen.add_argument("--out", default="build/verilog", help="output folder")
    sub.add_parser("elaboration", add_help=False,
                   help="seconds to elaborate each unit's default, paper and largest "
                        "configurations (qllm elaboration --help)")
    args, rest = parser.parse_known_args(argv)
    if args.command == "elaboration":
        from .elaboration import main as elaboration

        return elaboration(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")

    if args.command == "list":
        for spec in UNITS.values():
            print(f"{spec.name}: {spec.summary}")
            print(f"    defaults: {spec.defaults}; {_timing(spec, None)}")
            for name, overrides in spec.configs.items():
                print(f"    config {name}: {overrides}; {_timing(spec, name)}")
        return 0

    units = args.unit or list(UNITS)
    if (args.set or args.config) and len(units) != 1:
        parser.error("--set and --config need exactly one --unit")
    try:
        overrides = dict(parse_assignment(text) for text in args.set)
        check_prefix(args.prefix)
        # Every unit and parameter is checked before anything is written.
        for unit in units:
            spec, params = resolve_params(unit, args.config, overrides)
            if args.axis:
                wrap(spec.build(params), unit)
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {args.out}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        for unit in units:
            path = generate(unit, overrides, args.out, config=args.config, prefix=args.prefix,
                            axis=args.axis)
            print(f"wrote {path}")
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: {error.filename or args.out}: {error.strerror or error}", file=sys.stderr)
        return 2
    return 0


def _timing(spec, config):
    """``latency N cycles, R <result>/cycle`` of a configuration (the constructor runs, the
    circuit is not elaborated)."""
    _, params = resolve_params(spec.name, config)
    latency = getattr(spec.build(params), "latency", None)
    rate = spec.results_per_cycle(params)
    cycles = "latency ?" if latency is None else f"latency {latency} cycle{'' if latency == 1 else 's'}"
    return cycles if rate is None else f"{cycles}, {rate:g} {spec.result}/cycle"


if __name__ == "__main__":
    sys.exit(main())
