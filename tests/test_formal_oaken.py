# amaranth: UnusedElaboratable=no
"""The data properties of ``oaken_dequantizer`` and ``oaken_quantizer``
(verif/formal/arith_oaken.py): each unit's cheapest row passes, and seeded bugs (``edit_site`` on
the harness's RTLIL) fail with a counterexample trace.

The seeded bugs:

* the lane 0 partial sum ``min + q[1:0] d`` (the ``$add`` driving ``partial_0``) subtracts
  instead: the middle-group proof at ``pipeline`` 0 fails;
* the header read always ORs in slot 1's header register (the select of the ``hdr_1`` term
  of ``read_header`` tied high), so a chunk read from slot 0 mixes in the header of an older
  chunk: the bounded check with free data per chunk fails, and the rigid proof, whose chunks all
  carry the same header, passes (the gap its docstring names);
* quantizer, ``pipeline`` 0: its decomposer's upper outer comparison ``x > t_hi_o`` (the sign
  of ``t_hi_o - x``) takes the sign of ``t_hi_o + x``: the bounded check of the COO entries
  fails.

The other rows (the outer- and middle-group proofs, the bounded checks: 15 to 40 s each) are in
``make test-large``.
"""

import pytest

from qllm_cores.verif.formal import arith_oaken
from qllm_cores.verif.runner import edit_site


def _row(unit, configuration):
    [row] = [row for row in arith_oaken.proofs()
             if row.unit == unit and row.configuration.endswith(configuration)]
    return row


def _cell(cell, driven):
    """A pattern for the ``cell`` cell driving the wire ``driven``; group 1 is the rest of it."""
    return rf"cell \{cell} (\$\d+\n(?:    [^\n]*\n)*?    connect \\Y \\{driven}\n)"


PARTIAL_SUBTRACTS = (_cell("$add", "partial_0"), r"cell $sub \1", 1)
STALE_HEADER = (r"connect \\S \\read_slot \[1\]\n(    connect \\A 63'0+\n    connect \\B \\hdr_1 )",
                r"connect \\S 1'1\n\1", 1)
UPPER_OUTER_ADDS = (_cell("$sub", "t_hi_o_past_0"), r"cell $add \1", 1)

DEQUANTIZER, QUANTIZER = "oaken_dequantizer", "oaken_quantizer"
#: Each unit's cheapest row (about 15 s each).
QUICK = {DEQUANTIZER: "pipeline=0,group=in", QUANTIZER: "pipeline=0"}
#: Name -> (unit, row, seeded bug, expected status).
SEEDED = {
    "partial-subtracts": (DEQUANTIZER, "pipeline=0,group=mid", PARTIAL_SUBTRACTS, "FAIL"),
    "stale-header-bounded": (DEQUANTIZER, "pipeline=0,free", STALE_HEADER, "FAIL"),
    "stale-header-rigid": (DEQUANTIZER, "pipeline=0,group=mid", STALE_HEADER, "PASS"),
    "upper-outer-adds": (QUANTIZER, "pipeline=0", UPPER_OUTER_ADDS, "FAIL"),
}
SLOW_SEEDED = {"stale-header-rigid"}


def _mutation(bug):
    pattern, replacement, sites = bug
    return lambda text: edit_site(text, pattern, replacement, sites=sites)


@pytest.mark.parametrize("unit", sorted(QUICK))
def test_the_property_is_proved(tmp_path, unit):
    result = _row(unit, QUICK[unit]).run(tmp_path)
    assert result.status == "PASS", (result.detail, result.folder)
    assert result.traces == []


@pytest.mark.large
@pytest.mark.parametrize("unit,configuration", [
    (row.unit, row.configuration) for row in arith_oaken.proofs()
    if not row.configuration.endswith(QUICK[row.unit])])
def test_every_row_passes(tmp_path, unit, configuration):
    result = _row(unit, configuration).run(tmp_path)
    assert result.status == "PASS", (result.detail, result.folder)
    assert result.traces == []


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.large) if name in SLOW_SEEDED else name
    for name in sorted(SEEDED)])
def test_a_seeded_bug(tmp_path, name):
    unit, configuration, bug, expected = SEEDED[name]
    result = _row(unit, configuration).run(tmp_path, mutation=_mutation(bug))
    assert result.status == expected, (result.detail, result.folder)
    if expected == "FAIL":
        assert result.traces and all(trace.stat().st_size > 0 for trace in result.traces)
