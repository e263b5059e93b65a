"""Area split of ``kllm_idx_counter`` into the blocks of KLLM section IV-B, beside Table I.

``qllm counter-split [--config w3a3-64bins] [--set banks=1] [--build-dir build]``

The counter is generated with ``keep_blocks`` (the same circuit, with the decode, bit counters,
accumulation and readout as submodules) and synthesized once per target with the hierarchy kept
(``synth_ecp5 -noflatten``; for ``cmos`` Yosys' generic ``synth`` without ``-flatten``, the
flip-flop legalization of :mod:`fpga.yosys` and ``abc -g cmos4``), so that every block is
mapped on its own and ``stat`` counts it separately. The project's ``fp16_mac`` (defaults) is
synthesized for ``cmos`` in the same run, flattened as :mod:`fpga.yosys` does, to express the
counter in FP16-MAC units as KLLM's Table I allows (32 counters in 0.271 mm^2, 32 FP16 MACs in
0.0905 mm^2 per PE lane: 2.99 MACs per counter). Prints a Markdown table.

Keeping the hierarchy forbids optimization across block boundaries (e.g. ABC merging the last
AND of the decode into the bit counters' LUTs), so the blocks add up to somewhat more than the
flattened counter; both totals are printed.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from amaranth.back import verilog

from qllm_cores.gen.registry import parse_assignment, resolve_params
from qllm_cores.gen.verilog import generate

from .yosys import CMOS_FLIP_FLOP_LEGALIZATION, find_yosys, synth

__all__ = ["BLOCKS", "main", "split"]

#: Submodules of the counter built with ``keep_blocks``, in data-flow order; ``control`` is the
#: top module itself (the front's valid chain and clock enable).
BLOCKS = ("decode", "bit_counters", "accumulation", "readout")

#: KLLM Table I, per PE lane: 32 16-input counters and 32 FP16 MAC units (mm^2, 28 nm).
PAPER_COUNTERS_MM2 = 0.271
PAPER_MACS_MM2 = 0.0905

_SCRIPTS = {
    "ecp5": ["synth_ecp5 -noflatten -top {top}"],
    "cmos": ["synth -top {top}", CMOS_FLIP_FLOP_LEGALIZATION, "abc -g cmos4"],
}


def _run(source, top, target, run_dir):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "design.v").write_text(source)
    stat = "stat -tech cmos" if target == "cmos" else "stat"
    script = ["read_verilog design.v", f"hierarchy -top {top}",
              *(line.format(top=top) for line in _SCRIPTS[target]),
              "delete t:$scopeinfo", f"tee -q -o stat.json {stat} -json"]
    (run_dir / "run.ys").write_text("\n".join(script) + "\n")
    subprocess.run([str(find_yosys()), "-q", "-l", "run.log", "-s", "run.ys"], cwd=run_dir,
                   check=True, capture_output=True)
    return json.loads((run_dir / "stat.json").read_text())


def _block_of(module, top):
    """The block a module belongs to: the innermost of :data:`BLOCKS` on its path (the bins'
    blocks sit in the counter's ``bins`` submodule), else ``control``."""
    path = module.removeprefix("\\").removeprefix(top).split(".")
    return next((part for part in reversed(path) if part in BLOCKS), "control")


def split(params, build_dir):
    """Per block: ECP5 LUT/FF/CARRY and CMOS transistors, plus the flat totals and fp16_mac."""
    top = "kllm_idx_counter"
    spec, resolved = resolve_params(top, None, params)
    unit = spec.build(resolved)
    unit.keep_blocks = True
    source = verilog.convert(unit, name=top, emit_src=False)
    label = "-".join(f"{k}{v}" for k, v in sorted(params.items()))
    rows = {block: {} for block in (*BLOCKS, "control")}
    for target in ("ecp5", "cmos"):
        stats = _run(source, top, target, Path(build_dir) / "split" / label / target)
        # A module's transistor estimate includes its submodules': keep its own part.
        own = {}
        for module, data in stats["modules"].items():
            estimate = str(data.get("estimated_num_transistors", "0"))
            assert not estimate.endswith("+"), f"uncosted cells in {module}"
            own[module] = int(estimate)
        for module in list(own):
            for child in stats["modules"]:
                rest = child.removeprefix(module + ".")
                if rest != child and "." not in rest:
                    own[module] -= int(str(stats["modules"][child].get(
                        "estimated_num_transistors", "0")))
        for module, data in stats["modules"].items():
            block = rows[_block_of(module, top)]
            cells = data.get("num_cells_by_type", {})
            if target == "ecp5":
                for metric, cell in (("LUT", "LUT4"), ("FF", "TRELLIS_FF"), ("CARRY", "CCU2C")):
                    block[metric] = block.get(metric, 0) + int(cells.get(cell, 0))
            else:
                block["transistors"] = block.get("transistors", 0) + own[module]
    flat_dir = Path(build_dir) / "split" / label / "flat"
    flat = synth(generate(top, params, flat_dir / "v"), top, "cmos", flat_dir).metrics
    mac_dir = Path(build_dir) / "split" / "fp16_mac"
    mac = synth(generate("fp16_mac", {}, mac_dir / "v"), "fp16_mac", "cmos", mac_dir).metrics
    return rows, flat["transistors"], mac["transistors"], resolved


def main(argv=None):
    parser = argparse.ArgumentParser(prog="qllm counter-split",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="w3a3-64bins")
    parser.add_argument("--set", action="append", default=[], metavar="K=V")
    parser.add_argument("--build-dir", default="build")
    args = parser.parse_args(argv)
    try:
        overrides = dict(parse_assignment(text) for text in args.set)
        _, params = resolve_params("kllm_idx_counter", args.config, overrides)
        rows, flat, mac, resolved = split(params, args.build_dir)
    except (ValueError, TypeError) as error:
        print(f"fpga counter-split: {error}", file=sys.stderr)
        return 2
    total = {k: sum(row.get(k, 0) for row in rows.values())
             for k in ("LUT", "FF", "CARRY", "transistors")}
    print(f"kllm_idx_counter {json.dumps(resolved)}; fp16_mac (defaults): {mac} transistors")
    print("| block | ECP5 LUT | ECP5 FF | ECP5 CARRY | CMOS transistors | share | FP16 MACs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, row in [*rows.items(), ("sum of blocks", total)]:
        t = row.get("transistors", 0)
        print(f"| {name} | {row.get('LUT', 0):,} | {row.get('FF', 0):,} | "
              f"{row.get('CARRY', 0):,} | {t:,} | {t / total['transistors']:.1%} | "
              f"{t / mac:.2f} |")
    print(f"| flattened counter | | | | {flat:,} | | {flat / mac:.2f} |")
    print(f"| KLLM Table I (per counter) | | | | | | "
          f"{PAPER_COUNTERS_MM2 / PAPER_MACS_MM2:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
