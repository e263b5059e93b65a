# amaranth: UnusedElaboratable=no
"""``make formal`` covers every registered unit: a hold proof at every ``pipeline`` depth, a
counting account and the three counting properties at the lowest and the default depth, and a
data property (or a written reason in ``NO_DATA_PROOF``), so that a new unit cannot land
without its proofs. The check itself is shown to bite (an account or a hold case removed is
reported), and ``qllm formal`` runs end to end on one unit: a hold, the counting
properties and a data property, the summary written, exit code 0."""

import pytest

from qllm_cores.gen.registry import UNITS
from qllm_cores.verif.formal import cases, counting


@pytest.fixture(scope="module")
def rows():
    return cases.proofs()


def test_every_registered_unit_is_covered(rows):
    assert cases.gaps(rows=rows) == []


def test_every_unit_has_a_counting_account():
    assert set(counting.ACCOUNTS) == set(UNITS)


def test_exemptions_name_registered_units_and_give_a_reason():
    for unit, reason in {**cases.NO_DATA_PROOF, **cases.NO_STREAM_PROOF}.items():
        assert unit in UNITS
        assert isinstance(reason, str) and len(reason) > 20, unit


def test_every_bounded_entry_names_a_row_that_runs(rows):
    """An entry of BOUNDED keyed to a depth must meet a counting row at that depth (one keyed
    to the column's old default depth 5 once matched nothing, and the rows at its new default
    fell to the engines' budget instead)."""
    counted = {(row.unit, row.prop, row.params.get("pipeline")) for row in rows
               if row.prop in counting.PROPERTIES}
    for key, (cycles, reason) in cases.BOUNDED.items():
        assert key[1] in counting.PROPERTIES, key
        if len(key) == 3:
            assert key in counted, key
        assert cycles > 0 and "bounded by design" in reason, key


def test_bounded_drains_outlast_the_stall_window(rows):
    """A bounded "drains" shorter than the account's stall window could never fail."""
    for row in rows:
        if row.prop == "drains" and row.engine == "bmc":
            window = counting.ACCOUNTS[row.unit](row.params).drain_cycles
            assert row.depth > window, (row.unit, row.configuration, row.depth, window)


#: The units whose stream proofs are required.
STREAM_UNITS = sorted(set(UNITS) - set(cases.NO_STREAM_PROOF))


@pytest.mark.parametrize("unit", STREAM_UNITS)
def test_a_missing_account_is_reported(unit, rows, monkeypatch):
    monkeypatch.delitem(counting.ACCOUNTS, unit)
    missing = cases.gaps([unit], [row for row in rows if row.unit == unit])
    assert f"{unit}: no counting account (verif/formal/counting.py ACCOUNTS)" in missing


@pytest.mark.parametrize("unit", STREAM_UNITS)
def test_a_missing_hold_case_is_reported(unit, rows):
    mine = [row for row in rows if row.unit == unit]
    holds = [row for row in mine if row.prop == "stream hold"]
    assert holds
    dropped = holds[-1]
    missing = cases.gaps([unit], [row for row in mine if row is not dropped])
    assert missing == [f"{unit}: no stream hold proof at pipeline="
                       f"{dropped.params.get('pipeline')}"]


@pytest.mark.parametrize("unit", STREAM_UNITS)
def test_missing_counting_and_data_rows_are_reported(unit, rows):
    mine = [row for row in rows if row.unit == unit]
    only_holds = [row for row in mine if row.prop == "stream hold"]
    missing = cases.gaps([unit], only_holds)
    for prop in counting.PROPERTIES:
        assert any(f"no {prop!r} proof" in line for line in missing)
    if unit not in cases.NO_DATA_PROOF:
        assert f"{unit}: no data property (a proofs() row of a module in DATA)" in missing


def test_the_command_proves_one_unit_end_to_end(tmp_path, capsys):
    """Every proof of kllm_concat (hold, counting, data), as ``make formal UNIT=kllm_concat``."""
    status = cases.main(["kllm_concat"], build_dir=tmp_path, jobs=2)
    out = capsys.readouterr().out
    summary = (tmp_path / "formal" / "summary.md").read_text()
    assert status == 0, out
    for prop in ("stream hold", *counting.PROPERTIES):
        assert f"| kllm_concat | pipeline=0 | {prop} |" in summary
    data = [line for line in summary.splitlines() if line.startswith("| kllm_concat")
            and not any(f"| {prop} |" in line for prop in cases.STREAM_PROPERTIES)]
    assert data and all("| PASS" in line for line in data)
    assert "missing proofs" not in summary
