"""The Fmax command's reports (:mod:`fpga.fmax`): the Markdown table of every (unit, target)
run with each seed's figure, and the long CSV."""

from __future__ import annotations

from typing import Sequence

from qllm_cores.fpga.area import Unit, format_params, long_csv
from qllm_cores.fpga.fmax import FMAX_TARGETS, SEEDS, TARGET_FREQUENCY_MHZ, seeds_text
from qllm_cores.fpga.jobs import Failure

__all__ = ["fmax_csv", "fmax_markdown", "fmax_table"]

RESOURCE_COLUMNS = ("LC", "LUT", "FF", "DSP", "BRAM")


def fmax_table(units: Sequence[Unit], targets: Sequence[str],
               results: dict[tuple[str, str], dict],
               failures: Sequence[Failure] = ()) -> str:
    """Markdown table: one row per (unit, target) run (`fmax_job`'s data); "-" for a resource
    a target lacks."""
    failed = {failure.job for failure in failures}
    header = ["unit", "params", "target", "Fmax MHz", "seeds MHz", *RESOURCE_COLUMNS,
              "wrapper FF"]
    rows = ["| " + " | ".join(header) + " |", "|---|---|---|" + "---:|" * (len(header) - 3)]
    for unit in units:
        params = format_params(unit.params).replace("|", "\\|")
        for target in targets:
            if (unit.name, target) in results:
                result = results[unit.name, target]
                values = [f"{result['fmax_mhz']:.1f}", seeds_text(result),
                          *(str(result["resources"].get(c, "-")) for c in RESOURCE_COLUMNS),
                          str(result["wrapper_ff"])]
            elif (unit.name, target) in failed:
                values = ["failed", "-", *("-" for _ in RESOURCE_COLUMNS), "-"]
            else:
                continue
            rows.append("| " + " | ".join([unit.name, params, target, *values]) + " |")
    return "\n".join(rows)


def fmax_markdown(units: Sequence[Unit], targets: Sequence[str],
                  results: dict[tuple[str, str], dict],
                  failures: Sequence[Failure], versions: Sequence[str]) -> str:
    lines = [
        "# Fmax report",
        "",
        f"{'; '.join(versions)}. Achieved Fmax of `clk` from nextpnr: the median of seeds "
        f"{', '.join(map(str, SEEDS))} (each seed's figure in `seeds MHz`; goal "
        f"{TARGET_FREQUENCY_MHZ} MHz, timing allowed to fail) with each unit inside a "
        "registered wrapper (scan chain in, registered outputs folded by a pipelined XOR "
        "tree out; see `fpga/fmax.py`). Resources are nextpnr's utilization and include "
        "the wrapper's flip-flops (`wrapper FF`); LC is an iCE40 logic cell (LUT4 + FF).",
        "",
        fmax_table(units, targets, results, failures),
        "",
        "| target | device | Yosys | nextpnr options |",
        "|---|---|---|---|",
    ]
    for target in targets:
        spec = FMAX_TARGETS[target]
        lines.append(f"| {target} | {spec.device} | `{spec.synth_command}` | "
                     f"`{' '.join(spec.nextpnr_options)}` |")
    return "\n".join(lines) + "\n"


def fmax_csv(units: Sequence[Unit], targets: Sequence[str],
             results: dict[tuple[str, str], dict]) -> str:
    """Long-format CSV: one row per unit x target x metric (failed runs left out)."""
    return long_csv(units, targets, results, lambda result: {
        "fmax_mhz": f"{result['fmax_mhz']:.2f}",
        **{f"fmax_mhz_seed{seed}": f"{mhz:.2f}"
           for seed, mhz in zip(SEEDS, result.get("seeds_mhz", ())) if mhz is not None},
        **result["resources"],
        "wrapper_ff": result["wrapper_ff"]})


