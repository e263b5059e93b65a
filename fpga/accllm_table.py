# amaranth: UnusedElaboratable=no
# (rows are described by constructing components that are never elaborated here; the Verilog
# of each row is generated again in the worker that synthesizes it)
"""AccLLM DSP-packing resource table from one run: packed vs plain multipliers per target.

Usage::

    qllm accllm [--jobs N] [--build-dir DIR] [--row ID ...]

Every row is one variant of :class:`hdl.accllm.dsp_mul.dsp_mul.AccllmDspMul` (``x_bits = 8``, signed
activations) synthesized by Yosys for one FPGA family, next to its baseline
:class:`hdl.accllm.dsp_mul.dsp_mul.AccllmPlainMul` (the same products from separate ``x * w``
multipliers, left to the synthesizer):

* ``xilinx`` (UltraScale+): the packed design with its instantiated DSP48E2
  (``target="xilinx"``), Yosys' own inference of the same packing (``target="generic"``:
  ``(A + D) * B`` written with ``*``), and the plain multipliers;
* ``ecp5``: the packing into one MULT18X18D (``target="ecp5"``) where it fits, otherwise a row
  saying why not; the plain multipliers;
* ``ice40`` (UP5K): the packing into one SB_MAC16 (``target="ice40"``) where it fits,
  otherwise a row saying why not, plus a row at the largest ``x_bits`` that does fit (mode
  ``w4``: ``x_bits = 7``) with plain multipliers of the same ``x_bits`` beside it.

Modes ``w8``, ``w4`` and ``w2`` (the two wanted products X1 W1 and X2 W2), and ``w2`` with
``cross_products=True`` (all four products). Columns: cells of the mapped netlist (DSP, LUT,
CARRY, FF; see :data:`fpga.yosys.TARGETS`), products per beat and per DSP, the accumulation
limit of the packed rows (:func:`hdl.accllm.dsp_mul.dsp_mul.accumulation_limit`) and the latency in
cycles. Every row is built at the default ``pipeline`` (the timing-closed depth: the DSP48E2's
full pipeline; the SB_MAC16 / MULT18X18D registers in use); the plain multipliers are built for
the row's family (``AccllmPlainMul(target=...)``).

Each row's Verilog is generated into ``<build-dir>/accllm_table/<row-id>/`` and synthesized
there (Yosys runs in ``<row-id>/<unit>-<target>/``); the table (:mod:`fpga.accllm_report`)
goes to standard output and to ``<build-dir>/reports/accllm_dsp_mul.md`` and ``.csv``;
progress goes to standard error.

Exit codes: 0 on success, 1 if a synthesis run failed (no report is written and stale ones
are removed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qllm_cores.fpga.accllm_report import COLUMNS, report_markdown, table_csv, table_markdown
from qllm_cores.fpga.area import positive_int_argument, remove_reports, write_reports
from qllm_cores.fpga.jobs import Failure, run_jobs
from qllm_cores.fpga.yosys import SynthError, SynthResult, synth, yosys_version
from qllm_cores.gen import generate
from qllm_cores.hdl.accllm.dsp_mul.dsp_mul import FABRIC_MULTIPLIERS, AccllmDspMul, AccllmPlainMul

__all__ = [
    "COLUMNS",
    "MODES",
    "PACKED_VARIANT",
    "Row",
    "SYNTH_TARGETS",
    "build_rows",
    "main",
    "select_rows",
    "short_reason",
    "synthesize_rows",
    "table_csv",
    "table_markdown",
    "report_markdown",
]

X_BITS = 8
"""Activation width of the table (AccLLM's A8)."""

X_SIGNED = True

MODES = (("w8", False), ("w4", False), ("w2", False), ("w2", True))
"""``(mode, cross_products)`` of the table, in row order."""

SYNTH_TARGETS = ("xilinx", "ecp5", "ice40")
"""FPGA families of the table, in row order within a mode."""

PACKED_VARIANT = {
    "xilinx": "packed DSP48E2",
    "ecp5": f"packed {FABRIC_MULTIPLIERS['ecp5'][1]}",
    "ice40": f"packed {FABRIC_MULTIPLIERS['ice40'][1]}",
}
"""Variant name of the packed design on each family (the primitive it packs into)."""

INFERRED_VARIANT = "generic inference"
PLAIN_VARIANT = "plain multipliers"

PACKED_UNIT, PLAIN_UNIT = "accllm_dsp_mul", "accllm_plain_mul"

REPORT_NAME = "accllm_dsp_mul"
"""Stem of the report files in ``<build-dir>/reports``."""


@dataclass(frozen=True)
class Row:
    """One row of the table: a design variant synthesized for one FPGA family.

    Attributes
    ----------
    row_id : str
        Unique name, also the directory of the row under ``<build-dir>/accllm_table``, e.g.
        ``"w4-xilinx-packed-x8"`` (``w2c`` is mode ``w2`` with cross products).
    mode : str
        ``"w8"``, ``"w4"`` or ``"w2"``.
    cross_products : bool
        Mode ``w2`` with all four products.
    target : str
        Family synthesized for: ``"xilinx"``, ``"ecp5"`` or ``"ice40"``.
    variant : str
        ``PACKED_VARIANT[target]``, ``"generic inference"`` or ``"plain multipliers"``.
    x_bits : int
        Activation width.
    products : int
        Products per beat (outputs of the component).
    unit : str or None
        Unit generated (``"accllm_dsp_mul"`` or ``"accllm_plain_mul"``); None when the
        combination cannot be packed and there is nothing to synthesize.
    params : dict
        Parameters of the unit (empty when ``unit`` is None).
    latency : int or None
        Cycles from input to output beat (the component's ``latency``).
    acc_limit : int or None
        Packed rows: the accumulation limit of the packing; None otherwise.
    reason : str or None
        Why the combination cannot be packed (short form of the ``ValueError``); None if it
        can. :attr:`full_reason` keeps the whole message.
    note : str
        Remark shown in the table ("" if none).
    """

    row_id: str
    mode: str
    cross_products: bool
    target: str
    variant: str
    x_bits: int
    products: int
    unit: str | None
    params: dict = field(hash=False)
    latency: int | None
    acc_limit: int | None
    reason: str | None = None
    full_reason: str | None = None
    note: str = ""

    @property
    def packable(self) -> bool:
        """Whether there is a design to synthesize."""
        return self.unit is not None

    @property
    def mode_label(self) -> str:
        """``"w2 (cross)"`` for mode w2 with cross products, else the mode."""
        return f"{self.mode} (cross)" if self.cross_products else self.mode


def short_reason(message: str) -> str:
    """Shorten a not-packable ``ValueError`` message of :func:`hdl.accllm.dsp_mul.dsp_mul.packing`.

    Drops the leading ``"mode ... does not pack on target ...: "`` (the row says that) and a
    trailing parenthesis (advice such as ``"(use target 'generic' or 'xilinx')"``). A message
    of another form is returned unchanged.
    """
    head, separator, rest = message.partition(": ")
    if not separator or "does not pack" not in head:
        return message
    return re.sub(r"\s*\([^()]*\)\s*$", "", rest)


def build_rows(x_bits: int = X_BITS, x_signed: bool = X_SIGNED) -> list[Row]:
    """Return every row of the table, in order (pure Python: nothing is generated).

    Parameters
    ----------
    x_bits : int
        Activation width of the table (default 8); on ``ecp5``/``ice40`` a mode that does
        not pack at this width also gets a row at the largest width that does, if any.
    x_signed : bool
        Signed activations (default).

    Raises
    ------
    TypeError, ValueError
        If ``x_bits`` or ``x_signed`` is not accepted by the components.
    """
    rows: list[Row] = []
    for mode, cross in MODES:
        for target in SYNTH_TARGETS:
            rows.extend(_rows_for(mode, cross, target, x_bits, x_signed))
    ids = [row.row_id for row in rows]
    duplicates = sorted({row_id for row_id in ids if ids.count(row_id) > 1})
    if duplicates:
        raise AssertionError(f"duplicate row ids: {', '.join(duplicates)}")
    return rows


def select_rows(rows: Sequence[Row], row_ids: Iterable[str]) -> list[Row]:
    """Return the rows named in ``row_ids`` in table order (all rows when it is empty).

    Raises
    ------
    ValueError
        If a name is not a row of ``rows``; the message lists the known ones.
    """
    wanted = list(dict.fromkeys(row_ids))
    if not wanted:
        return list(rows)
    known = {row.row_id for row in rows}
    unknown = [row_id for row_id in wanted if row_id not in known]
    if unknown:
        raise ValueError(f"unknown row id(s): {', '.join(unknown)}; known: "
                         f"{', '.join(row.row_id for row in rows)}")
    return [row for row in rows if row.row_id in wanted]


def _rows_for(mode: str, cross: bool, target: str, x_bits: int, x_signed: bool) -> list[Row]:
    """Rows of one (mode, family): packed variant(s), then plain multipliers."""
    base = {"mode": mode, "x_signed": x_signed, "cross_products": cross}
    if target == "xilinx":
        return [
            _packed_row(mode, cross, target, "xilinx", PACKED_VARIANT[target], x_bits, base),
            _packed_row(mode, cross, target, "generic", INFERRED_VARIANT, x_bits, base,
                        note="Yosys maps (A + D) * B written with *"),
            _plain_row(mode, cross, target, x_bits, base),
        ]
    packed = _packed_row(mode, cross, target, target, PACKED_VARIANT[target], x_bits, base)
    rows = [packed, _plain_row(mode, cross, target, x_bits, base)]
    if not packed.packable:
        narrower = _widest_packable_x_bits(mode, cross, target, x_bits, x_signed)
        if narrower is not None:
            _, primitive = FABRIC_MULTIPLIERS[target]
            note = (f"x_bits={narrower}: mode {mode} packs into {primitive} only for "
                    f"x_bits <= {narrower}")
            rows += [
                _packed_row(mode, cross, target, target, PACKED_VARIANT[target], narrower,
                            base, note=note),
                _plain_row(mode, cross, target, narrower, base,
                           note=f"x_bits={narrower}, to compare with the packed row above"),
            ]
    return rows


def _widest_packable_x_bits(mode, cross, target, x_bits, x_signed) -> int | None:
    """Largest activation width below ``x_bits`` that packs on ``target``; None if none."""
    for narrower in range(x_bits - 1, 1, -1):
        try:
            AccllmDspMul(mode=mode, x_signed=x_signed, x_bits=narrower, cross_products=cross,
                         target=target)
        except ValueError:
            continue
        return narrower
    return None


def _row_id(mode, cross, target, kind, x_bits) -> str:
    return f"{mode}{'c' if cross else ''}-{target}-{kind}-x{x_bits}"


def _packed_row(mode, cross, target, design_target, variant, x_bits, base, *, note="") -> Row:
    """The packed design built for ``design_target`` (the family itself, or ``"generic"``
    for Yosys' inference), synthesized for ``target``; a not-packable row if it raises."""
    kind = "packed" if design_target != "generic" else "generic"
    params = {**base, "x_bits": x_bits, "target": design_target, "acc_depth": 1}
    products = len(AccllmPlainMul(mode=mode, x_signed=base["x_signed"], x_bits=x_bits,
                                  cross_products=cross).products)
    common = dict(row_id=_row_id(mode, cross, target, kind, x_bits), mode=mode,
                  cross_products=cross, target=target, variant=variant, x_bits=x_bits,
                  products=products)
    try:
        component = AccllmDspMul(**params)
    except ValueError as error:
        reason = short_reason(str(error))
        return Row(**common, unit=None, params={}, latency=None, acc_limit=None,
                   reason=reason, full_reason=str(error), note=f"not packable: {reason}")
    if design_target != "generic" and target not in (component.synth_targets or (target,)):
        raise AssertionError(f"{PACKED_UNIT} target={design_target!r} cannot be synthesized "
                             f"for {target!r} (synth_targets={component.synth_targets})")
    return Row(**common, unit=PACKED_UNIT, params=params, latency=component.latency,
               acc_limit=component.acc_limit, note=note)


def _plain_row(mode, cross, target, x_bits, base, *, note="") -> Row:
    # The baseline built for the same family: on ECP5 its operands sit in the MULT18X18D input
    # registers, as the packed design's do (AccllmPlainMul's ``target``).
    params = {**base, "x_bits": x_bits, "target": target}
    component = AccllmPlainMul(**params)
    return Row(row_id=_row_id(mode, cross, target, "plain", x_bits), mode=mode,
               cross_products=cross, target=target, variant=PLAIN_VARIANT, x_bits=x_bits,
               products=len(component.products), unit=PLAIN_UNIT, params=params,
               latency=component.latency, acc_limit=None, note=note)


# --- synthesis -------------------------------------------------------------------------------


def synthesize_rows(
    rows: Sequence[Row],
    build_dir: Path,
    *,
    jobs: int = 2,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, SynthResult], list[Failure]]:
    """Generate and synthesize every packable row in a process pool.

    Row ``r`` is generated and synthesized in ``build_dir / "accllm_table" / r.row_id``
    (:func:`fpga.yosys.synth` runs Yosys inside that directory with relative paths only).

    Parameters
    ----------
    rows : sequence of Row
        Rows to run (not-packable rows are skipped).
    build_dir : Path
    jobs : int, optional
        Number of Yosys runs at once (at least 1).
    progress : callable, optional
        Called with a one-line message after every run.

    Returns
    -------
    results : dict of row id to SynthResult
    failures : list of Failure
        Tagged by row id, in table order.

    Raises
    ------
    ValueError
        If ``jobs`` is below 1.
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be at least 1")
    runnable = [row for row in rows if row.packable]
    table_dir = Path(build_dir) / "accllm_table"
    results: dict[str, SynthResult] = {}
    failed: dict[str, Failure] = {}
    runs = [(row.row_id, _row_job, row.unit, row.params, row.target, table_dir / row.row_id)
            for row in runnable]
    for done, total, row_id, result in run_jobs(runs, workers=jobs):
        if isinstance(result, Failure):
            failed[row_id] = result
            status = "FAILED"
        else:
            results[row_id] = result
            status = f"{result.seconds:.1f} s"
        if progress is not None:
            progress(f"[{done}/{total}] {row_id}: {status}")
    return results, [failed[row.row_id] for row in runnable if row.row_id in failed]


def _row_job(unit: str, params: dict, target: str, row_dir: Path) -> SynthResult:
    """Worker: generate the row's Verilog and synthesize it."""
    verilog = generate(unit, params, row_dir)
    return synth(verilog, unit, target, row_dir)


# --- command line ----------------------------------------------------------------------------

EXIT_OK = 0
EXIT_SYNTH_FAILED = 1
EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qllm accllm",
        description="AccLLM DSP-packing resource table: packed vs plain multipliers on "
                    "xilinx, ecp5 and ice40, from one run.")
    parser.add_argument("--jobs", type=positive_int_argument, default=2, metavar="N",
                        help="parallel Yosys runs (default 2)")
    parser.add_argument("--build-dir", type=Path, default=Path("build"),
                        help="build directory (default: build)")
    parser.add_argument("--row", action="append", default=[], metavar="ID",
                        help="only this row (repeatable; default: all rows; "
                             "e.g. w4-xilinx-packed-x8)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    arguments = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        rows = select_rows(build_rows(), arguments.row)
    except ValueError as error:
        _report(f"accllm_table: {error}")
        return EXIT_BAD_INPUT
    build_dir: Path = arguments.build_dir
    reports_dir = build_dir / "reports"
    try:
        version = yosys_version()  # also compiles the WebAssembly once, before the pool
    except SynthError as error:
        _report(f"accllm_table: {error}")
        return EXIT_SYNTH_FAILED
    runnable = sum(row.packable for row in rows)
    _report(f"accllm_table: {len(rows)} rows, {runnable} synthesis runs "
            f"({len(rows) - runnable} not packable), {arguments.jobs} at once; {version}")
    results, failures = synthesize_rows(rows, build_dir, jobs=arguments.jobs, progress=_report)
    if failures:
        for failure in failures:
            _report(f"\n=== {failure.job} failed ===\n{failure.message}")
        stale = remove_reports(reports_dir, REPORT_NAME)
        removed = f" (removed stale {', '.join(map(str, stale))})" if stale else ""
        _report(f"\naccllm_table: {len(failures)} of {runnable} synthesis runs failed: "
                f"{', '.join(failure.job for failure in failures)}; no report "
                f"written{removed}")
        return EXIT_SYNTH_FAILED
    markdown_path, csv_path = write_reports(
        reports_dir, report_markdown(rows, results, version), table_csv(rows, results),
        REPORT_NAME)
    print(table_markdown(rows, results))
    _report(f"accllm_table: wrote {markdown_path} and {csv_path} "
            f"in {time.perf_counter() - started:.0f} s")
    return EXIT_OK


def _report(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
