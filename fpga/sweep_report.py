"""The sweep's reports: CSV (long form), Markdown table, and the plot of area, Fmax and
latency against the swept parameter, from a :class:`fpga.sweep.SweepResult`."""

from __future__ import annotations

import csv
import io
import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from qllm_cores.fpga.area import format_params
from qllm_cores.fpga.fmax import SEEDS
from qllm_cores.fpga.yosys import TARGETS

if TYPE_CHECKING:
    from qllm_cores.fpga.sweep import PointResult, SweepPlan, SweepResult

__all__ = ["CSV_COLUMNS", "plot_sweep", "sweep_csv", "sweep_markdown", "sweep_table"]

CSV_COLUMNS = ("unit", "param", "param_value", "target", "metric", "value")
"""Columns of the sweep CSV (``param_value``: the swept parameter's value at that point)."""


def _fmax_metrics(run: dict) -> dict:
    return {"fmax_mhz": f"{run['fmax_mhz']:.2f}",
            **{f"fmax_mhz_seed{seed}": f"{mhz:.2f}"
               for seed, mhz in zip(SEEDS, run.get("seeds_mhz", ())) if mhz is not None},
            **{f"pnr_{name}": count for name, count in run["resources"].items()},
            "pnr_wrapper_ff": run["wrapper_ff"]}


def sweep_csv(result: SweepResult) -> str:
    """Long-format CSV (`CSV_COLUMNS`): one row per point x target x metric; failed points
    and runs are left out."""
    plan = result.plan
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for point in result.points:
        if point.latency is not None:
            writer.writerow((plan.unit, plan.param, point.value, "manifest", "latency",
                             point.latency))
        for target in plan.area_targets:
            for metric, value in point.area.get(target, {}).items():
                writer.writerow((plan.unit, plan.param, point.value, target, metric, value))
        for target in plan.fmax_targets:
            if target in point.fmax:
                for metric, value in _fmax_metrics(point.fmax[target]).items():
                    writer.writerow((plan.unit, plan.param, point.value, target, metric, value))
    return buffer.getvalue()


def _first_line(text: str, limit: int = 200) -> str:
    """The first line of an error message, and the tool's first ``ERROR`` line if it quotes
    one (e.g. nextpnr's "Unable to place cell ..." after "nextpnr exited with code 125")."""
    lines = text.strip().splitlines() or [""]
    tool_error = next((line.strip() for line in lines[1:]
                       if line.lstrip().startswith("ERROR")), None)
    line = lines[0] + (f" ({tool_error})" if tool_error else "")
    return line if len(line) <= limit else line[:limit - 3] + "..."


def sweep_table(result: SweepResult) -> str:
    """Markdown table: one row per (point, target), area metrics then Fmax; notes after it."""
    plan = result.plan
    metric_columns = list(dict.fromkeys(
        metric for target in plan.area_targets for metric in TARGETS[target].metrics))
    fmax_column = ["Fmax MHz"] if plan.fmax_targets else []
    row_targets = list(dict.fromkeys([*plan.area_targets, *plan.fmax_targets]))
    header = [plan.param, "latency (cycles)", "target", *metric_columns, *fmax_column]
    rows = ["| " + " | ".join(header) + " |",
            "|---|---:|---|" + "---:|" * (len(metric_columns) + len(fmax_column))]
    notes = []
    for point in result.points:
        value = str(point.value).replace("|", "\\|")
        if not point.ok:
            rows.append(f"| {value} | - | failed | " + " | ".join(
                "-" for _ in metric_columns + fmax_column) + " |")
            notes.append(f"- {plan.param}={value}: {_first_line(point.failure.message)}")
            continue
        for target in row_targets:
            cells = []
            for metric in metric_columns:
                has_metric = target in TARGETS and metric in TARGETS[target].metrics
                cells.append(_cell(point, "area", target, plan.area_targets,
                                   lambda run, m=metric: str(run.get(m, "-")))
                             if has_metric else "-")
            if fmax_column:
                cells.append(_cell(point, "fmax", target, plan.fmax_targets,
                                   lambda run: f"{run['fmax_mhz']:.1f}"))
            latency = "-" if point.latency is None else str(point.latency)
            rows.append(f"| {value} | {latency} | {target} | " + " | ".join(cells) + " |")
        for (flow, target), failure in point.failures.items():
            notes.append(f"- {plan.param}={value} {flow} {target} failed: "
                         f"{_first_line(failure.message)}")
        for flow, target in point.skipped:
            notes.append(f"- {plan.param}={value} {flow} {target}: skipped (the unit's "
                         "synth_targets exclude it)")
    return "\n".join(rows + ([""] + notes if notes else []))


def _cell(point: PointResult, flow: str, target: str, targets, render) -> str:
    runs = point.area if flow == "area" else point.fmax
    if target not in targets:
        return "-"
    if target in runs:
        return render(runs[target])
    if (flow, target) in point.failures:
        return "failed"
    if (flow, target) in point.skipped:
        return "skipped"
    return "-"


def _plot_title(plan: SweepPlan, *, width: int = 90) -> str:
    others = format_params(plan.other_params()) or "none"
    title = (f"{plan.unit}: {plan.param} sweep (config: {plan.config or 'defaults'}); "
             f"other params: {others}")
    return textwrap.fill(title, width)


def sweep_markdown(result: SweepResult, versions: Sequence[str] = ()) -> str:
    plan = result.plan
    header = [f"# Sweep of {plan.unit} over {plan.param}", "",
              _plot_title(plan, width=10**6) + ".",
              f"Ran on {result.executor} in {result.seconds:.0f} s"
              + (f"; {'; '.join(versions)}" if versions else "") + ".", ""]
    return "\n".join([*header, sweep_table(result)]) + "\n"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plot_sweep(result: SweepResult, path: Path) -> Path | None:
    """Draw area and Fmax against the swept parameter into the PNG `path`.

    Panels (only those with data): FPGA cells (LUTs solid, flip-flops dashed, per FPGA area
    target), CMOS transistors, Fmax, latency (the manifest's, in cycles). Numeric values go on a numeric axis (base-2 logarithmic
    if they are positive and span a factor of 8 or more), others are categories. Returns
    `path`, or None (and writes nothing) if there is nothing to plot.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    plan = result.plan
    values = [point.value for point in result.points if point.ok]
    numeric = all(_is_number(value) for value in values)
    positions = ({value: value for value in values} if numeric
                 else {value: index for index, value in enumerate(values)})

    def series(get):
        xs, ys = [], []
        for point in result.points:
            if point.ok:
                measured = get(point)
                xs.append(positions[point.value])
                ys.append(math.nan if measured is None else measured)
        return xs, ys

    panels = []  # (y label, [(legend, style, xs, ys)])
    fpga = [target for target in plan.area_targets if "LUT" in TARGETS[target].metrics]
    lines = [(f"{target} {metric}", "o-" if metric == "LUT" else "s--",
              *series(lambda p, t=target, m=metric: p.area.get(t, {}).get(m)))
             for target in fpga for metric in ("LUT", "FF")]
    panels.append(("FPGA cells (count)", lines))
    if "cmos" in plan.area_targets:
        panels.append(("transistors (count, cmos4 estimate)",
                       [("cmos", "o-", *series(lambda p: p.area.get("cmos", {})
                                               .get("transistors")))]))
    panels.append(("Fmax (MHz)", [
        (f"{target} (nextpnr)", "o-",
         *series(lambda p, t=target: p.fmax[t]["fmax_mhz"] if t in p.fmax else None))
        for target in plan.fmax_targets]))
    panels.append(("latency (cycles)", [("manifest", "o-", *series(lambda p: p.latency))]))
    panels = [(label, [line for line in lines if any(not math.isnan(y) for y in line[3])])
              for label, lines in panels]
    panels = [(label, lines) for label, lines in panels if lines]
    if not panels:
        return None

    figure = Figure(figsize=(7.5, 2.2 + 2.4 * len(panels)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, lines) in zip(axes, panels):
        for legend, style, xs, ys in lines:
            ax.plot(xs, ys, style, label=legend)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", ncols=2 if len(lines) > 4 else 1)
    ticks = list(positions.values())
    if numeric and min(ticks) > 0 and max(ticks) >= 8 * min(ticks):
        axes[-1].set_xscale("log", base=2)
    axes[-1].set_xticks(ticks, [str(value) for value in values])
    axes[-1].minorticks_off()
    axes[-1].set_xlabel(f"{plan.param} (unit parameter)")
    figure.suptitle(_plot_title(plan), fontsize="medium")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
