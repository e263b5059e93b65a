"""Command line: ``python -m gen {list,verilog}``."""

import argparse
import sys

from .registry import UNITS, parse_assignment
from .verilog import generate


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gen", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list units, their defaults and paper configurations")
    gen = sub.add_parser("verilog", help="write build/verilog/<unit>.v and its manifest")
    gen.add_argument("--unit", action="append", help="unit name (repeatable; default: all)")
    gen.add_argument("--config", help="named paper configuration of the unit")
    gen.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override one parameter (repeatable)")
    gen.add_argument("--out", default="build/verilog", help="output folder")
    args = parser.parse_args(argv)

    if args.command == "list":
        for spec in UNITS.values():
            print(f"{spec.name}: {spec.summary}")
            print(f"    defaults: {spec.defaults}")
            for name, overrides in spec.configs.items():
                print(f"    config {name}: {overrides}")
        return 0

    units = args.unit or list(UNITS)
    if (args.set or args.config) and len(units) != 1:
        parser.error("--set and --config need exactly one --unit")
    try:
        overrides = dict(parse_assignment(text) for text in args.set)
        for unit in units:
            path = generate(unit, overrides, args.out, config=args.config)
            print(f"wrote {path}")
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
