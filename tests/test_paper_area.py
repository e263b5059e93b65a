# amaranth: UnusedElaboratable=no
# (depth ranges and row labels construct components that are never elaborated)
"""``qllm paper-area`` (fpga/paper/): the papers' hardware tables beside ours.

Expected values are worked out by hand from the paper texts (``../shared/papers``), from a toy
Liberty library whose tables are linear (so the FO4 fixed point has a closed form), from an
independent re-reading of sky130's inverter tables, and from Orizuru's structure; the tables
are rendered from made-up synthesis results. Only the last test synthesises (marked ``synth``
and ``large``: fp16_mac, its FP16-accumulating reading and the Concat array on sky130 and IHP,
about 25 s on an idle machine).
"""

import csv
import gzip
import io
import math
import re
from pathlib import Path

import pytest

from qllm_cores.fpga.jobs import Failure
from qllm_cores.fpga.paper import cli, kllm_lane, render, rows as rows_module
from qllm_cores.fpga.paper.comparisons import orizuru_counts, rtl_comparators
from qllm_cores.fpga.paper.rows import Design, rows, select_rows
from qllm_cores.fpga.paper.search import DepthSearch, target_mhz
from qllm_cores.fpga.paper.sources import (CLOCKS, PAPER_TEXTS, QUOTES, TABLE_I, lane_rows_check,
                                nand2_eq_28nm, um2_28nm)
from qllm_cores.fpga.stdcell.liberty import LibraryError, fo4_delay, nldm_lookup, parse_liberty

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ROOT.parent / "shared" / "papers"


# --- the papers' side --------------------------------------------------------------------------


def _paper_lines(paper):
    path = PAPERS / PAPER_TEXTS[paper]
    if not path.is_file():
        pytest.skip(f"paper text {path} not available")
    return path.read_text(encoding="utf-8").splitlines()


def test_every_quoted_row_stands_on_one_line_of_its_paper():
    quotes = [*TABLE_I.values(), *QUOTES.values()]
    for quote in quotes:
        if not quote.cells:
            assert quote.paper == "BitMoD" and "HPCA 2025" in quote.source
            continue
        lines = _paper_lines(quote.paper)
        assert any(all(cell in line for cell in quote.cells) for line in lines), quote.cells
    for clock in CLOCKS.values():
        assert any(clock.quote in line for line in _paper_lines(clock.paper)), clock.quote


def test_table_i_and_the_other_tables_per_unit():
    # KLLM Table I (um^2 per unit): MAC 0.0905 mm^2 / 32, Concat 0.0868 / 4096, IdxCounter
    # 0.271 / 32, Orizuru 0.739 / 273; P3-LLM Table VIII one PE; Oaken Table 4 one engine.
    expected = {"mac": 2828.125, "concat": 21.19140625, "counter": 8468.75,
                "orizuru": 2706.9597}
    for key, um2 in expected.items():
        assert TABLE_I[key].per_unit_um2 == pytest.approx(um2, rel=1e-7), key
    assert QUOTES["p3.pe"].per_unit_um2 / QUOTES["p3.mac"].per_unit_um2 == pytest.approx(
        1109.2 / 1023.1)                                       # "1.08×"
    assert QUOTES["p3.pcu"].area_um2 / QUOTES["p3.pcu.base"].area_um2 == pytest.approx(
        8.4 / 7.7)
    assert QUOTES["oaken.dequant"].area_um2 == pytest.approx(252_000)
    assert QUOTES["oaken.quant"].area_um2 / QUOTES["oaken.core"].area_um2 == pytest.approx(
        0.0186, abs=5e-5)                                      # Table 4's "1.86" %
    assert QUOTES["bitmod.fp16"].area_um2 == pytest.approx(1733.5)
    assert not QUOTES["p3.pcu"].absolute and QUOTES["p3.pe"].absolute


def test_lane_rows_add_up_to_the_pe_lane_area():
    # 0.0868 + 0.0675 + 0.271 + 0.0905 = 0.5158 against 8.25 / 16 = 0.515625.
    lanes, pe_lane = lane_rows_check()
    assert lanes == pytest.approx(0.5158) and pe_lane == pytest.approx(0.515625)


def test_28nm_conversion():
    # 0.49 um^2 per NAND2: 1,000 NAND2-eq are 490 um^2; P3-LLM's 1023.1 um^2 FP16 MAC is
    # 2,087.96 NAND2-eq.
    assert um2_28nm(1000) == pytest.approx(490)
    assert nand2_eq_28nm(1023.1) == pytest.approx(2087.959, rel=1e-6)
    assert nand2_eq_28nm(um2_28nm(1234.5)) == pytest.approx(1234.5)


def test_clocks_scale_by_fo4():
    # 500 MHz at 28 nm (FO4 14 ps) on a library of FO4 70 ps: 100 MHz.
    assert target_mhz(500, 14, 70) == pytest.approx(100)
    assert CLOCKS["KLLM"].mhz == 500 and CLOCKS["Oaken"].mhz == CLOCKS["P3-LLM"].mhz == 1000


# --- FO4 from NLDM tables ----------------------------------------------------------------------

TOY = """
library (toy) {
  time_unit : "1ns";
  capacitive_load_unit (1, pf);
  lu_table_template (tpl) {
    variable_1 : total_output_net_capacitance;
    variable_2 : input_net_transition;
    index_1 ("0.0, 1.0");
    index_2 ("0.0, 1.0");
  }
  %s
}
"""

INVERTER = """
  cell (%s) {
    area : %s;
    pin (A) { direction : input; capacitance : %s; }
    pin (Y) {
      direction : output;
      function : "!A";
      timing () {
        related_pin : "A";
        cell_rise (tpl) { values ("0.03, 0.23", "1.03, 1.23"); }
        cell_fall (tpl) { values ("0.01, 0.11", "0.51, 0.61"); }
        rise_transition (tpl) { values ("0.02, 0.27", "0.52, 0.77"); }
        fall_transition (tpl) { values ("0.01, 0.51", "0.26, 0.76"); }
      }
    }
  }
"""


def _toy(tmp_path, cells):
    path = tmp_path / "toy.lib"
    path.write_text(TOY % "".join(INVERTER % cell for cell in cells))
    return path


def test_fo4_of_linear_tables_has_its_closed_form(tmp_path):
    # Tables on the corners C, s in {0, 1} (C load, s slew; ns, pF), linear, so interpolation
    # is exact: rise_tr = 0.02 + 0.5 C + 0.25 s, fall_tr = 0.01 + 0.25 C + 0.5 s,
    # cell_rise = 0.03 + C + 0.2 s, cell_fall = 0.01 + 0.5 C + 0.1 s. inv_small (0.1 pF) drives
    # 0.4 pF: s_r = 0.22 + 0.25 s_f, s_f = 0.11 + 0.5 s_r -> s_r = 0.2475 / 0.875 = 0.282857,
    # s_f = 0.251429; rise = 0.43 + 0.2 s_f = 0.480286, fall = 0.21 + 0.1 s_r = 0.238286;
    # FO4 = 0.359286 ns. inv_big (0.5 pF) is a larger drive; skip_inv (0.05 pF) is excluded.
    path = _toy(tmp_path, [("inv_big", 3, 0.5), ("inv_small", 2, 0.1), ("skip_inv", 1, 0.05)])
    fo4 = fo4_delay([path], ("skip*",))
    assert fo4.cell == "inv_small" and fo4.load == pytest.approx(0.4)
    assert fo4.slew_rise == pytest.approx(282.857, rel=1e-5)
    assert fo4.slew_fall == pytest.approx(251.429, rel=1e-5)
    assert (fo4.rise, fo4.fall) == (pytest.approx(480.286, rel=1e-5),
                                    pytest.approx(238.286, rel=1e-5))
    assert fo4.delay == pytest.approx(359.286, rel=1e-5)
    assert fo4_delay([path]).cell == "skip_inv"               # no dont_use: the smallest
    empty = tmp_path / "empty.lib"
    empty.write_text(TOY % "")
    with pytest.raises(LibraryError, match="no inverter"):
        fo4_delay([empty])


def test_nldm_lookup_interpolates_and_extrapolates(tmp_path):
    # A 2 x 3 table (variable_1 slew s = 0, 1; variable_2 load l = 0, 1, 3) of l (1 + s): at
    # (0.5, 2) halfway between l = 1 and 3 on both rows (2 and 4), then halfway: 3.0; beyond
    # the slews at (2, 0.5): rows 0.5 and 1.0, extrapolated to s = 2: 1.5; beyond the loads at
    # (0, 4): the segment l = 1..3 of row 0 continued: 4.
    text = """library (t) { time_unit : "1ns";
      lu_table_template (t2) { variable_1 : input_net_transition;
        variable_2 : total_output_net_capacitance; index_1 ("0, 1"); index_2 ("0, 1, 3"); }
      cell (c) { pin (Y) { timing () { cell_rise (t2) { values ("0, 1, 3", "0, 2, 6"); } } } }
    }"""
    top = parse_liberty(text, "t.lib")
    templates = {g.name: g for g in top.groups_of("lu_table_template")}
    table = top.groups_of("cell")[0].groups_of("pin")[0].groups_of("timing")[0] \
        .groups_of("cell_rise")[0]
    assert nldm_lookup(table, templates, 0.5, 2) == pytest.approx(3.0)
    assert nldm_lookup(table, templates, 2.0, 0.5) == pytest.approx(1.5)
    assert nldm_lookup(table, templates, 0.0, 4.0) == pytest.approx(4.0)


def _bilinear(xs, ys, rows, x, y):
    def seg(points, v):
        i = max(0, min(len(points) - 2, sum(1 for p in points[1:-1] if v > p)))
        return i, (v - points[i]) / (points[i + 1] - points[i])
    i, s = seg(xs, x)
    j, t = seg(ys, y)
    low = rows[i][j] * (1 - t) + rows[i][j + 1] * t
    high = rows[i + 1][j] * (1 - t) + rows[i + 1][j + 1] * t
    return low * (1 - s) + high * s


def test_fo4_on_sky130_against_a_hand_reading_of_its_tables(pdk_root):
    path = pdk_root / "sky130A/libs.ref/sky130_fd_sc_hd/lib/sky130_fd_sc_hd__tt_025C_1v80.lib.gz"
    if not path.is_file():
        pytest.skip(f"no {path}")
    text = gzip.open(path, "rt").read()
    cell = text[text.index('cell ("sky130_fd_sc_hd__inv_1")'):]
    cell = cell[:cell.index("cell (", 10)]
    capacitance = float(re.search(r'pin \("A"\) \{\s*capacitance : ([0-9.]+);', cell)[1])
    tables = {}
    for kind in ("cell_rise", "cell_fall", "rise_transition", "fall_transition"):
        body = re.search(kind + r' \("del_1_7_7"\) \{(.*?)\}', cell, re.S)[1]
        index = [[float(v) for v in m.split(",")] for m in re.findall(r'index_\d\("([^"]*)"\)',
                                                                       body)]
        values = [[float(v) for v in m.split(",")] for m in re.findall(r'"([-0-9., ]+)"',
                                                                       body.split("values")[1])]
        tables[kind] = (index[0], index[1], values)   # slew (index_1) x load (index_2), ns/pF

    def look(kind, slew, load):
        return _bilinear(*tables[kind], slew, load)

    load, s_rise, s_fall = 4 * capacitance, 0.01, 0.01
    for _ in range(200):
        s_rise, s_fall = look("rise_transition", s_fall, load), look("fall_transition",
                                                                   s_rise, load)
    expected = 1000 * (look("cell_rise", s_fall, load) + look("cell_fall", s_rise, load)) / 2
    fo4 = fo4_delay([path], ("*lpflow*",))
    assert fo4.cell == "sky130_fd_sc_hd__inv_1"
    assert fo4.delay == pytest.approx(expected, rel=1e-6)
    assert 30 < fo4.delay < 200                                # a 130 nm inverter, in ps


# --- Orizuru's comparators in the RTL ---------------------------------------------------------


def test_rtl_comparators_at_n16_k2():
    # Unrolled: initialisation (n - 1) = 15 for the max tree and n/2 - 1 = 7 above the shared
    # leaf level for the min tree; then k - 1 = 1 maintenance per tree walking log2 n - 1 = 3
    # levels (the popped leaf loses at the leaf level without a comparison): 15 + 7 + 2 x 3.
    counts = orizuru_counts(16, 2)
    assert counts.unrolled == 15 + 7 + 2 * 1 * 3 == 28
    # The paper's time-multiplexed trees: n/2 shared initialisation comparators + 1 per tree.
    assert counts.tree == 16 // 2 + 2
    assert counts.formula == 1.5 * 16 + 2 * 2 * 4 and counts.golden == 15 + 7 + 2 * 2 * 4
    # Each further pop adds one 3-comparator maintenance per tree.
    assert rtl_comparators("orizuru", overrides={"n": 16, "k": 3, "structure": "unrolled",
                                                 "pipeline": 3}) == 28 + 2 * 3


def test_rtl_comparators_count_through_submodules():
    # pipeline=0 (the loop): one Fp16TotalOrderCompare submodule per comparator: the 22 of
    # the initialisation and log2 n = 4 per tree for the same-cycle maintenance.
    assert rtl_comparators("orizuru", overrides={"n": 16, "k": 2, "structure": "unrolled",
                                                 "pipeline": 0}) == 22 + 2 * 4


# --- rows and the depth search -----------------------------------------------------------------


def test_depth_ranges_are_what_the_constructors_accept():
    from qllm_cores.gen.registry import UNITS
    for design in (Design("fp16_mac"), Design("orizuru", "kllm-16"),
                   Design("oaken_decomposer", "oaken-16")):
        last = design.depths()[-1]
        UNITS[design.unit].build(design.params(last))
        with pytest.raises(ValueError, match="pipeline"):
            UNITS[design.unit].build(design.params(last + 1))


def test_rows_follow_the_registry_and_selection_keeps_references(monkeypatch):
    table = rows()
    ids = [row.row_id for row in table]
    assert len(ids) == len(set(ids))
    assert all(ref in ids for row in table for ref in row.references)
    assert not any("w3a3" in str(row.design) for row in table)
    with_acc = "fp16-acc" in rows_module.UNITS["fp16_mac"].configs
    assert ("kllm.mac.fp16acc" in ids) == with_acc
    chosen = [row.row_id for row in select_rows(table, ["kllm.counter"])]
    assert chosen[:1] == ["kllm.mac"] and "kllm.counter.a4" in chosen
    assert "kllm.counter.a3" in chosen and "p3.pe" not in chosen
    with pytest.raises(ValueError, match=r"unknown row id\(s\): nope; known: kllm.mac"):
        select_rows(table, ["nope"])
    monkeypatch.delitem(rows_module.UNITS["fp16_mac"].configs, "fp16-acc", raising=False)
    assert not any(row.row_id.endswith("fp16acc") for row in rows())


def _clock(mhz):
    return {"fmax_mhz": mhz}


def _search(target, clocks, last):
    """Run a DepthSearch against made-up clocks per depth; return (chosen, met, probes)."""
    search, known, probes = DepthSearch(target, range(last + 1)), {}, []
    while True:
        wanted = search.wanted(known)
        if not wanted:
            return search.chosen, search.met, probes
        probes.append(wanted[0])
        value = clocks(wanted[0])
        known[wanted[0]] = value if isinstance(value, Failure) else _clock(value)


def test_depth_search_finds_the_shallowest_meeting_depth():
    # Depth 0 meets: one synthesis.
    assert _search(100, lambda d: 150, 12) == (0, True, [0])
    # 100 MHz per stage: 0 misses 250; the guess ceil(250 / 100) - 1 = 2 meets; 1 misses.
    assert _search(250, lambda d: 100 * (d + 1), 12) == (2, True, [0, 2, 1])
    # A clock that jumps late: the guess ceil(250 / 100) - 1 = 2 misses (102), the deepest
    # meets, then bisection between 2 and 12: 7 misses, 9 meets, 8 meets.
    assert _search(250, lambda d: 280 if d >= 8 else 100 + d, 12) == (
        8, True, [0, 2, 12, 7, 9, 8])
    # Even the deepest misses: the deepest, marked.
    assert _search(1000, lambda d: 100 + d, 3) == (3, False, [0, 3])
    # A failed depth 0 counts as a miss without a clock: depth 1 next.
    failed = Failure("job", "StdcellError: boom")
    assert _search(100, lambda d: failed if d == 0 else 150, 2) == (1, True, [0, 1])
    # Never more than 3 + ceil(log2(max)) syntheses, whatever the shallowest meeting depth.
    for meet in range(13):
        chosen, met, probes = _search(200, lambda d: 250 if d >= meet else 100, 12)
        assert (chosen, met) == (meet, True) and len(probes) <= 3 + math.ceil(math.log2(12))


# --- the tables, from made-up results ------------------------------------------------------------


def _result(nand2, mhz=200.0, ff=0.25):
    return {"nand2_eq": nand2, "fmax_mhz": mhz, "area": nand2 * 4.0,
            "sequential_area": nand2 * 4.0 * ff}


def _outcomes(table, library="lib"):
    sizes = {"fp16_mac": 6000, "kllm_concat": 1600, "p3_pe": 4000}
    out = {}
    for row in table:
        n = sizes[row.design.unit] / (2 if row.design.config == "fp16-acc" else 1)
        out[row.row_id, library] = {"depth": 1, "met": True, "target": 100.0,
                                    "depths": range(3), "result": _result(n),
                                    "result0": _result(n, 90.0)}
    return out


def test_row_values_divide_by_units_and_references():
    table = select_rows(rows(), ["kllm.concat", "p3.pe", "bitmod.pe"])
    values = {v["row"].row_id: v for v in render.row_values(table, _outcomes(table), "lib")}
    concat = values["kllm.concat"]
    assert concat["nand2"] == 100                              # 1600 / 16 lanes
    assert concat["um2_28nm"] == pytest.approx(49)
    assert concat["ours_ratios"][0] == pytest.approx(100 / 6000)
    assert concat["paper_ratio"] == pytest.approx((0.0868 / 4096) / (0.0905 / 32))
    assert concat["ours_over_paper"] == pytest.approx(49 / 21.19140625)
    pe = values["bitmod.pe"]                                   # without flip-flops: x 0.75
    assert pe["nand2"] == pytest.approx(3000)
    assert pe["ours_ratios"][0] == pytest.approx(3000 / 4500)
    assert pe["paper_ratio"] == pytest.approx(1221.6 / 1733.5)
    assert values["p3.pe"]["ours_ratios"][0] == pytest.approx(4000 / 6000)


def test_markdown_and_csv_render_every_row_and_failures():
    table = select_rows(rows(), ["kllm.concat"])
    outcomes = _outcomes(table)
    outcomes["kllm.mac", "lib"]["result0"] = Failure("job", "StdcellError: boom")
    text = render.table_markdown(table, outcomes, "lib")
    lines = text.splitlines()
    assert len(lines) == 2 + len(table)
    assert all(line.count(" | ") == len(render.COLUMNS) - 1 for line in lines[2:])
    concat = next(line for line in lines if line.startswith("| kllm.concat"))
    assert "kllm_concat@kllm-a4-16 / 16" in concat and "| 1 of 0..2 |" in concat
    assert "4096 Concat Units per lane / 8.68×10^{-2}" in concat
    assert "| 100 | 49 |" in concat
    assert "| -, failed |" in next(line for line in lines if line.startswith("| kllm.mac "))
    records = list(csv.DictReader(io.StringIO(render.table_csv(table, outcomes, ["lib"]))))
    assert [r["row_id"] for r in records] == [row.row_id for row in table]
    assert tuple(records[0]) == render.CSV_COLUMNS
    assert float(records[-1]["nand2_eq_per_unit"]) == 100


def test_kllm_efficiency_and_lane_tables_from_made_up_results():
    table = select_rows(rows(), ["kllm.counter.a4", "kllm.column.a3", "kllm.concat"])
    ids = [row.row_id for row in table]
    assert {"kllm.counter.a4", "kllm.counter.a4.spill", "kllm.column.a3", "kllm.mac"} <= set(ids)
    sizes = {"fp16_mac": 6000, "kllm_concat": 1600, "kllm_idx_counter": 60000,
             "kllm_column": 90000}
    outcomes = {(row.row_id, "lib"): {"depth": 2, "met": True, "target": 100.0,
                                      "depths": range(4),
                                      "result": _result(sizes[row.design.unit]),
                                      "result0": _result(sizes[row.design.unit])}
                for row in table}
    outcomes["kllm.counter.a4.spill", "lib"]["result"] = _result(48000)
    efficiency = kllm_lane.efficiency_table(table, outcomes, "lib").splitlines()
    # Table I: 8468.75 / 2828.125 = 2.994 FP16 MACs for 16 index-MACs: 5.34 a cycle per MAC.
    assert "| KLLM Table I | (not stated) | - | 2.99 | 16 | 5.34 | 1 |" in efficiency
    # 60,000 / 6,000 = 10 MACs: 1.6 a cycle per MAC, 1.6 / 5.343 = 0.30 of the paper's.
    a4 = next(line for line in efficiency if line.startswith("| kllm.counter.a4 |"))
    assert "| 60,000 | 10.00 | 16 | 1.60 | 0.30 |" in a4
    spill = next(line for line in efficiency if line.startswith("| kllm.counter.a4.spill |"))
    assert "| 48,000 | 8.00 | 16 | 2.00 | 0.37 |" in spill
    lane = kllm_lane.lane_table(table, outcomes, "lib").splitlines()
    # Table I's logic: 0.0868 + 0.271 + 0.0905 = 0.4483 mm^2 = 158.5 of its MACs (2828.125
    # um^2); 512 index-MACs a cycle: 3.23 per MAC, and 512 MACs = 3.23 times the lane.
    assert any(line.startswith("| KLLM Table I: 4096 Concat + 32 counters + 32 FP16 MACs | - "
                               "| 0.4483 | 158.5 | 512 | 3.23 |") for line in lane)
    assert any("| 0.5158 | 182.4 | 512 | 2.81 |" in line for line in lane)
    # Ours, counter a4: 4096 x 100 + 32 x 60,000 + 32 x 6,000 = 2,521,600 NAND2-eq = 1.2356
    # mm^2 at 0.49 um^2; 420.3 MACs; 512 / 420.3 = 1.22.
    ours = next(line for line in lane if "32 x kllm.counter.a4 +" in line)
    assert "| 2,521,600 | 1.2356 | 420.3 | 512 | 1.22 |" in ours
    # 32 columns: 2,880,000 NAND2-eq = 480 MACs; 512 / 480 = 1.07.
    columns = next(line for line in lane if "32 x kllm.column.a3" in line)
    assert "| 2,880,000 | 1.4112 | 480.0 | 512 | 1.07 |" in columns
    assert kllm_lane.lane_table(select_rows(rows(), ["p3.pe"]), {}, "lib") == ""


# --- command line -------------------------------------------------------------------------------


def test_bad_input_exits_2_with_one_line(capsys, tmp_path):
    assert cli.main(["--row", "nope", "--build-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown row id(s): nope" in err[0]
    assert cli.main(["--library", "tsmc28", "--build-dir", str(tmp_path)]) == 2
    assert "library must be one of" in capsys.readouterr().err
    assert cli.main(["--pdk-root", str(tmp_path / "none"), "--build-dir", str(tmp_path)]) == 2
    assert str(tmp_path / "none") in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


@pytest.mark.synth
@pytest.mark.large
def test_concat_and_the_fp16_macs_from_one_run(tmp_path, capsys, pdk_root):
    code = cli.main(["--row", "kllm.concat", "--pdk-root", str(pdk_root),
                     "--build-dir", str(tmp_path), "--no-cache"])
    printed = capsys.readouterr().out
    assert code in (0, 1)                      # 1: a synthesis failed, marked in the table
    assert "## sky130" in printed and "## ihp" in printed and "kllm_concat@kllm-a4-16" in printed
    records = list(csv.DictReader((tmp_path / "reports" / "paper-area.csv").open()))
    concat = [r for r in records if r["row_id"] == "kllm.concat"]
    assert {r["library"] for r in concat} == {"sky130", "ihp"}
    for record in concat:
        # A Concat lane is an 8-bit register: at least 8 flip-flops' worth of NAND2s.
        assert float(record["nand2_eq_per_unit"]) > 8
        assert float(record["fmax_mhz"]) >= float(record["target_mhz"]) or \
            record["met"] == "False"
        assert math.isfinite(float(record["ours_ratios"].split(";")[0]))
