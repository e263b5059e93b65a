"""The AccLLM DSP-packing table's reports: the Markdown table, the full report and the CSV,
from the rows of :mod:`fpga.accllm_table` and their synthesis results."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

from qllm_cores.fpga.yosys import TARGETS, SynthResult

if TYPE_CHECKING:
    from qllm_cores.fpga.accllm_table import Row

__all__ = ["COLUMNS", "CSV_COLUMNS", "METRICS", "report_markdown", "table_csv",
           "table_markdown"]

METRICS = ("DSP", "LUT", "CARRY", "FF")
"""Cell counts shown per row (keys of :attr:`fpga.yosys.SynthResult.metrics`)."""

COLUMNS = ("mode", "target", "variant", "x_bits", "products/beat", *METRICS,
           "products/DSP", "acc. limit", "latency", "note")
"""Columns of the Markdown table."""

CSV_COLUMNS = ("row_id", "mode", "cross_products", "target", "variant", "x_bits",
               "products_per_beat", *METRICS, "products_per_dsp", "accumulation_limit",
               "latency", "packable", "note")


def _cells(row: Row, results: dict[str, SynthResult]) -> list[str]:
    """The row's values in :data:`COLUMNS` order, as text."""
    result = results.get(row.row_id)
    metrics = result.metrics if result is not None else {}
    counts = [str(metrics[metric]) if metric in metrics else "-" for metric in METRICS]
    dsp = metrics.get("DSP")
    per_dsp = "-" if not dsp else _number(row.products / dsp)
    return [row.mode_label, row.target, row.variant, str(row.x_bits), str(row.products),
            *counts, per_dsp, _optional(row.acc_limit), _optional(row.latency), row.note]


def table_markdown(rows: Sequence[Row], results: dict[str, SynthResult]) -> str:
    """Markdown table of ``rows`` ("-" where a row has no design or no DSP)."""
    numeric = {"x_bits", "products/beat", *METRICS, "products/DSP", "acc. limit", "latency"}
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "".join("---:|" if column in numeric else "---|" for column in COLUMNS),
    ]
    for row in rows:
        cells = [cell.replace("|", "\\|") for cell in _cells(row, results)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_markdown(rows: Sequence[Row], results: dict[str, SynthResult], version: str) -> str:
    """The full Markdown report: a header, the table, the full not-packable reasons and the
    Yosys commands."""
    lines = [
        "# AccLLM DSP packing: resources",
        "",
        f"{version}; cells counted in the flattened, mapped netlist. DSP counts DSP48E2 on "
        "xilinx, MULT18X18D and ALU54B on ecp5, SB_MAC16 on ice40. Activations signed; "
        "every design at its default `pipeline`; latency in cycles (input beat to output "
        "beat); the accumulation limit is the number of packed products that may be summed "
        "before a field overflows (`accumulation_limit`).",
        "",
        table_markdown(rows, results),
        "",
    ]
    reasons = [row for row in rows if not row.packable]
    if reasons:
        lines += ["Not packable:", ""]
        lines += [f"* `{row.row_id}`: {row.full_reason}" for row in reasons]
        lines.append("")
    lines += ["| target | device | Yosys synthesis command |", "|---|---|---|"]
    for target in dict.fromkeys(row.target for row in rows):
        spec = TARGETS[target]
        lines.append(f"| {target} | {spec.device} | `{spec.synth_command.format(top='TOP')}` |")
    return "\n".join(lines) + "\n"


def table_csv(rows: Sequence[Row], results: dict[str, SynthResult]) -> str:
    """One CSV line per row; empty fields where a row has no value."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        metrics = results[row.row_id].metrics if row.row_id in results else {}
        dsp = metrics.get("DSP")
        writer.writerow([
            row.row_id, row.mode, row.cross_products, row.target, row.variant, row.x_bits,
            row.products, *(metrics.get(metric, "") for metric in METRICS),
            _number(row.products / dsp) if dsp else "",
            "" if row.acc_limit is None else row.acc_limit,
            "" if row.latency is None else row.latency,
            row.packable, row.full_reason or row.note,
        ])
    return buffer.getvalue()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def _optional(value) -> str:
    return "-" if value is None else str(value)
