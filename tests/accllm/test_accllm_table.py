# amaranth: UnusedElaboratable=no
# (expected values are read from components that are never elaborated)
"""fpga.accllm_table: the rows of the AccLLM DSP-packing resource table (pure Python), the
Markdown/CSV writers without synthesis, the command line's argument errors, and one small
synthesis run (w4 on xilinx: packed DSP48E2 vs two plain multipliers).

Only the last test runs Yosys: two xilinx runs, in parallel (about 15 s each once the
WebAssembly module is compiled).
"""

import csv
import io

import pytest

from qllm_cores.fpga.accllm_table import (COLUMNS, MODES, PACKED_VARIANT, SYNTH_TARGETS,
    build_rows, main, select_rows, short_reason, table_csv, table_markdown)
from qllm_cores.hdl.accllm.dsp_mul.dsp_mul import AccllmDspMul, AccllmPlainMul, accumulation_limit, packing

ROWS = build_rows()
BY_ID = {row.row_id: row for row in ROWS}


def _rows(mode, cross, target):
    return [row for row in ROWS
            if (row.mode, row.cross_products, row.target) == (mode, cross, target)]


def _packs(mode, target, x_bits):
    try:
        packing(mode, target, x_bits, True)
    except ValueError:
        return False
    return True


def test_row_ids_are_unique_and_name_directories():
    assert len(BY_ID) == len(ROWS)
    for row in ROWS:
        assert row.row_id.replace("-", "").isalnum(), row.row_id


@pytest.mark.parametrize("mode,cross", MODES)
@pytest.mark.parametrize("target", SYNTH_TARGETS)
def test_every_mode_and_target_has_packed_and_plain_rows(mode, cross, target):
    rows = _rows(mode, cross, target)
    at_8 = [row for row in rows if row.x_bits == 8]
    variants = [row.variant for row in at_8]
    expected = [PACKED_VARIANT[target], "plain multipliers"]
    if target == "xilinx":
        expected.insert(1, "generic inference")
    assert variants == expected
    products = 4 if cross else 2
    for row in rows:
        assert row.products == products
        assert row.params.get("cross_products", cross) == cross
    plain = [row for row in rows if row.variant == "plain multipliers"]
    for row in plain:
        assert row.unit == "accllm_plain_mul" and row.params["target"] == target
        assert row.latency == AccllmPlainMul(**row.params).latency == 2   # default pipeline
    assert all(row.acc_limit is None for row in plain)


@pytest.mark.parametrize("mode,cross", MODES)
@pytest.mark.parametrize("target", SYNTH_TARGETS)
def test_packed_rows_match_the_packing_limits(mode, cross, target):
    for row in _rows(mode, cross, target):
        if row.variant == "plain multipliers":
            continue
        design_target = "generic" if row.variant == "generic inference" else target
        if _packs(mode, design_target, row.x_bits):
            component = AccllmDspMul(**row.params)
            assert row.unit == "accllm_dsp_mul" and row.reason is None
            assert row.params["target"] == design_target
            assert row.latency == component.latency
            assert row.acc_limit == accumulation_limit(mode, design_target, row.x_bits, True)
        else:
            assert row.unit is None and row.latency is None and row.acc_limit is None
            with pytest.raises(ValueError) as error:
                packing(mode, design_target, row.x_bits, True)
            assert row.full_reason == str(error.value)
            assert row.reason and row.reason in row.full_reason
            assert row.note == f"not packable: {row.reason}"


def test_not_packable_reasons():
    # The DSP48E2 takes every mode; the 18 x 18 and 16 x 16 multipliers have no pre-adder and
    # too narrow a product for w2's four fields, and too narrow a port for two 16-bit w8
    # fields. w4 (12-bit fields at x_bits = 8) fits MULT18X18D's 13-bit lower field only.
    not_packable = {row.row_id for row in ROWS if not row.packable}
    assert not_packable == {
        "w8-ecp5-packed-x8", "w8-ice40-packed-x8", "w4-ice40-packed-x8",
        "w2-ecp5-packed-x8", "w2-ice40-packed-x8", "w2c-ecp5-packed-x8", "w2c-ice40-packed-x8",
    }
    assert "only for s <= 9" in BY_ID["w8-ecp5-packed-x8"].reason
    assert "only for s <= 11" in BY_ID["w4-ice40-packed-x8"].reason
    assert "12-bit product" in BY_ID["w4-ice40-packed-x8"].reason
    for row_id in ("w2-ecp5-packed-x8", "w2c-ice40-packed-x8"):
        assert "pre-adder" in BY_ID[row_id].reason
        assert "use target" not in BY_ID[row_id].reason   # the advice is left out
        assert "use target" in BY_ID[row_id].full_reason


def test_ice40_w4_gets_rows_at_x_bits_7():
    # SB_MAC16: W1 + (W2 << s) must fit 16 signed bits, so s <= 11; a signed x_bits x 4 product
    # needs s >= x_bits + 4.
    packed, plain = BY_ID["w4-ice40-packed-x7"], BY_ID["w4-ice40-plain-x7"]
    assert packed.unit == "accllm_dsp_mul" and packed.params["target"] == "ice40"
    assert plain.unit == "accllm_plain_mul" and plain.params["x_bits"] == 7
    assert "x_bits <= 7" in packed.note
    assert [row.x_bits for row in ROWS if row.x_bits != 8] == [7, 7]


def test_short_reason_keeps_other_messages():
    assert short_reason("x_bits must be in range 2..8, not 9") == \
        "x_bits must be in range 2..8, not 9"


def test_select_rows():
    picked = select_rows(ROWS, ["w4-xilinx-plain-x8", "w4-xilinx-packed-x8"])
    assert [row.row_id for row in picked] == ["w4-xilinx-packed-x8", "w4-xilinx-plain-x8"]
    assert select_rows(ROWS, []) == ROWS
    with pytest.raises(ValueError, match=r"unknown row id\(s\): w9-xilinx; known: w8-xilinx"):
        select_rows(ROWS, ["w9-xilinx"])


def test_unknown_row_is_a_usage_error(capsys, tmp_path):
    assert main(["--row", "w9-xilinx", "--build-dir", str(tmp_path)]) == 2
    assert "unknown row id(s): w9-xilinx" in capsys.readouterr().err


def test_tables_without_synthesis_show_dashes():
    markdown = table_markdown(ROWS, {})
    lines = markdown.splitlines()
    assert lines[0] == "| " + " | ".join(COLUMNS) + " |"
    assert len(lines) == 2 + len(ROWS)
    not_packable = next(line for line in lines if "w8 | ecp5 | packed MULT18X18D" in line)
    assert "| - | - | - | - | - |" in not_packable and "not packable:" in not_packable
    records = list(csv.DictReader(io.StringIO(table_csv(ROWS, {}))))
    assert [record["row_id"] for record in records] == [row.row_id for row in ROWS]
    assert records[0]["DSP"] == "" and records[0]["products_per_dsp"] == ""


@pytest.mark.synth
@pytest.mark.large
def test_w4_xilinx_packed_is_one_dsp48e2_and_plain_is_two(tmp_path, capsys):
    packed_id, plain_id = "w4-xilinx-packed-x8", "w4-xilinx-plain-x8"
    code = main(["--row", packed_id, "--row", plain_id, "--jobs", "2",
                 "--build-dir", str(tmp_path)])
    output = capsys.readouterr()
    assert code == 0, output.err
    records = {record["row_id"]: record for record in
               csv.DictReader(io.StringIO((tmp_path / "reports/accllm_dsp_mul.csv").read_text()))}
    assert set(records) == {packed_id, plain_id}
    assert (tmp_path / "reports/accllm_dsp_mul.md").is_file()
    assert output.out.count("\n") == 2 + 2        # header, rule and the two rows

    # Packed: one instantiated DSP48E2 per packed multiplier, carrying both products.
    packed = AccllmDspMul(mode="w4", target="xilinx")
    assert packed.primitives == ("DSP48E2",)
    assert int(records[packed_id]["DSP"]) == 1
    assert int(records[packed_id]["products_per_beat"]) == len(packed.products) == 2
    assert records[packed_id]["products_per_dsp"] == "2"
    assert int(records[packed_id]["latency"]) == packed.latency
    # Plain: one hard multiplier per product (8 x 4 bits is above Yosys' DSP threshold).
    plain = AccllmPlainMul(mode="w4")
    assert int(records[plain_id]["DSP"]) == len(plain.products) == 2
    assert records[plain_id]["products_per_dsp"] == "1"
