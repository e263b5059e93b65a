# amaranth: UnusedElaboratable=no
# (row labels read the effective parameters from components that are never elaborated)
"""``python -m fpga.paper_area``: KLLM Table I area ratios next to ours (fpga/paper_area.py).

The paper-side values expected here are worked out by hand from Table I's cells (KLLM text,
``../shared/papers/kllm.txt``), not taken from the module. The table is rendered from made-up
synthesis results, so only the last test runs Yosys (marked ``synth``: fp16_mac and the
16-lane Concat array, cmos and ecp5, one run at a time, about 20 s).
"""

import csv
import io
from pathlib import Path

import pytest

from fpga import paper_area
from fpga.paper_area import (ROWS, TABLE_I, lane_rows_check, main, paper_ratio, row_values,
                             select_rows, table_csv, table_markdown)
from fpga.yosys import SynthResult

ROOT = Path(__file__).resolve().parent.parent
KLLM_TEXT = ROOT.parent / "shared" / "papers" / "kllm.txt"


# --- paper side ------------------------------------------------------------------------------


def test_table_i_per_unit_areas():
    # Table I area column (mm2) / units named in the specification, in um2:
    # MAC 0.0905 / 32, Concat 0.0868 / 4096, IdxCounter 0.271 / 32, Orizuru 0.739 / 273.
    expected_um2 = {"mac": 2828.125, "concat": 21.19140625, "counter": 8468.75,
                    "orizuru": 2706.9597}
    for key, um2 in expected_um2.items():
        assert TABLE_I[key].per_unit_mm2 * 1e6 == pytest.approx(um2, rel=1e-7), key


def test_table_i_ratios_to_the_fp16_mac():
    # Concat: (0.0868 / 4096) / (0.0905 / 32) = 2.7776 / 370.688; IdxCounter: 0.271 / 0.0905
    # (both per 32); Orizuru: 0.739 x 32 / (273 x 0.0905) = 23.648 / 24.7065.
    assert paper_ratio("mac") == 1
    assert paper_ratio("concat") == pytest.approx(0.00749309, rel=1e-6)
    assert paper_ratio("counter") == pytest.approx(2.994475, rel=1e-6)
    assert paper_ratio("orizuru") == pytest.approx(0.957157, rel=1e-6)


def test_lane_rows_add_up_to_the_pe_lane_area():
    # 0.0868 + 0.0675 + 0.271 + 0.0905 = 0.5158 against 8.25 / 16 = 0.515625: area, not power
    # (the PE Lane power, 5.73 W / 16 = 0.358, does not fit).
    lanes, pe_lane = lane_rows_check()
    assert lanes == pytest.approx(0.5158)
    assert pe_lane == pytest.approx(0.515625)


@pytest.mark.skipif(not KLLM_TEXT.is_file(), reason="paper text not available")
def test_table_i_cells_are_quoted_from_the_paper():
    text = KLLM_TEXT.read_text(encoding="utf-8")
    assert "Module\tSpecification\tArea (mm^2)\tPower (W)" in text
    for unit in (*TABLE_I.values(), paper_area.WEIGHT_BUFFER):
        assert unit.quote in text, unit.quote
        assert unit.specification.startswith(f"{unit.count} ") or unit.count == 1
    assert "16 PE Lanes per chip\t8.25\t5.73" in text


# --- our side, from made-up synthesis results ----------------------------------------------


def _result(target, **metrics):
    return SynthResult(target=target, top="top", cell_counts={}, metrics=metrics, seconds=0.1,
                       log_path=Path("unused.log"))


def _fake_results(rows, mac_lut=100, uncosted=0):
    cmos = {"fp16_mac": 1000, "kllm_concat": 3200, "kllm_idx_counter": 5000,
            "orizuru": 1500, "orizuru-unrolled": 2500}
    ecp5 = {"fp16_mac": (mac_lut, 10, 50, 1), "kllm_concat": (16, 0, 128, 0),
            "kllm_idx_counter": (400, 20, 300, 0), "orizuru": (90, 5, 100, 0),
            "orizuru-unrolled": (150, 15, 200, 0)}
    results = {}
    for row in rows:
        results[row.row_id, "cmos"] = _result(
            "cmos", transistors=cmos[row.row_id], cells=1, uncosted_cells=uncosted)
        lut, carry, ff, dsp = ecp5[row.row_id]
        results[row.row_id, "ecp5"] = _result("ecp5", LUT=lut, FF=ff, CARRY=carry, DSP=dsp,
                                              BRAM=0, LUTRAM=0)
    return results


def test_row_values_divide_by_the_units_and_by_the_mac():
    values = {v["row"].row_id: v for v in row_values(ROWS, _fake_results(ROWS))}
    concat = values["kllm_concat"]
    assert concat["transistors"] == 200                     # 3200 / 16 lanes
    assert concat["cmos_ratio"] == pytest.approx(0.2)
    assert concat["lut_ratio"] == pytest.approx(1 / 100)    # 16 / 16 over 100
    assert concat["lut_carry_ratio"] == pytest.approx(1 / 120)
    assert concat["ff_ratio"] == pytest.approx(8 / 50)
    assert concat["paper_ratio"] == pytest.approx(0.00749309, rel=1e-6)
    assert values["kllm_idx_counter"]["cmos_ratio"] == pytest.approx(5)
    assert values["orizuru-unrolled"]["lut_carry_ratio"] == pytest.approx(180 / 120)
    assert values["fp16_mac"]["cmos_ratio"] == 1
    assert not concat["cmos_lower_bound"]


def test_table_renders_rows_parameters_and_ratios():
    table = table_markdown(ROWS, _fake_results(ROWS))
    lines = table.splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert all(line.count(" | ") == len(paper_area.COLUMNS) - 1 for line in lines[2:])
    concat = next(line for line in lines if "kllm_concat@kllm-a4-16" in line)
    assert "per unit: / 16 (lanes)" in concat and "0.00749" in concat and "| 0.2 |" in concat
    assert "| 200 |" in concat and "| 0.0868 | 21.2 |" in concat
    tree = next(line for line in lines if "orizuru@kllm-16 (" in line)
    assert "structure=tree, pipeline=2" in tree
    unrolled = next(line for line in lines if "structure=unrolled (" in line)
    assert "structure=unrolled, pipeline=3" in unrolled and "| 2.5 |" in unrolled
    counter = next(line for line in lines if "kllm_idx_counter@kllm-a4" in line)
    assert "n_inputs=16, idx_bits=8" in counter and "| 2.99 |" in counter


def test_lower_bounds_and_missing_references():
    table = table_markdown(ROWS, _fake_results(ROWS, mac_lut=0, uncosted=3))
    mac = next(line for line in table.splitlines()[2:] if "fp16_mac (" in line)
    assert "| 1000+ |" in mac
    assert "| - |" in mac                                   # no LUT4 in the reference


def test_csv_has_one_line_per_row():
    records = list(csv.DictReader(io.StringIO(table_csv(ROWS, _fake_results(ROWS)))))
    assert [r["row_id"] for r in records] == [row.row_id for row in ROWS]
    assert tuple(records[0]) == paper_area.CSV_COLUMNS
    concat = records[1]
    assert float(concat["paper_area_mm2"]) == 0.0868 and concat["paper_units"] == "4096"
    assert concat["units_per_instance"] == "16" and float(concat["cmos_ratio"]) == 0.2


def test_notes_name_the_mac_and_the_structures():
    notes = " ".join(paper_area.notes(ROWS, _fake_results(ROWS)))
    assert "accumulates in FP32" in notes and "accumulator precision" in notes
    assert "1 MULT18X18D" in notes
    assert "k = 2 per side" in notes


def test_select_rows_keeps_the_reference():
    assert [row.row_id for row in select_rows(ROWS, ["orizuru"])] == ["fp16_mac", "orizuru"]
    assert select_rows(ROWS, []) == list(ROWS)
    with pytest.raises(ValueError, match=r"unknown row id\(s\): nope; known: fp16_mac"):
        select_rows(ROWS, ["nope"])


def test_command_line_rejects_an_unknown_row(capsys):
    assert main(["--row", "nope"]) == 2
    assert "unknown row id(s): nope" in capsys.readouterr().err


# --- one real run --------------------------------------------------------------------------


@pytest.mark.synth
@pytest.mark.large
def test_concat_and_mac_from_one_run(tmp_path, capsys):
    assert main(["--row", "kllm_concat", "--jobs", "1", "--build-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "kllm_concat@kllm-a4-16" in printed
    records = list(csv.DictReader((tmp_path / "reports" / "paper-area.csv").open()))
    assert [r["row_id"] for r in records] == ["fp16_mac", "kllm_concat"]
    mac, concat = records
    assert float(mac["cmos_ratio"]) == 1
    # A Concat lane holds its 8-bit result in a register: at least 8 flip-flops per lane.
    assert float(concat["ecp5_ff_per_unit"]) >= 8
    assert 0 < float(concat["cmos_ratio"]) < 0.1
    assert (tmp_path / "reports" / "paper-area.md").is_file()
