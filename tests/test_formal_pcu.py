# amaranth: UnusedElaboratable=no
"""The quick proofs of ``p3_pcu``'s data property (verif/formal/arith_pcu.py): its cheapest row
is proved, and the property bites: each bug below, seeded in the harness's RTLIL
(``edit_site``), fails a row with a counterexample trace.

The seeded bugs (one PE, lane 0 free, unless said):

* ``int4`` (``pipeline`` 0): the INT4 decoder adds the zero point (the ``$sub`` cell driving
  ``int4_up_0_0``, ``q - zp``, becomes ``$add``); the product lemma fails.
* ``pe1-zero-point`` (2 PEs, PE 1 checked, ``pipeline`` 0): PE 1's INT4 decoder reads PE 0's
  zero point (``zp[0]``, payload bits [73:70], for its own [77:74]).
* ``fine-shift`` (``pipeline`` 8): the second step of the exponent shift (by ``shift[0:2]``,
  after the ``align`` register) is lost; the product lemma holds, the output check fails.
* ``slot`` (``reuse`` 2, ``pipeline`` 0): the output ``slot`` is stuck at 0.
"""

import pytest

from qllm_cores.verif.formal import arith_pcu
from qllm_cores.verif.runner import edit_site


def _row(configuration):
    [row] = [row for row in arith_pcu.proofs() if row.configuration == configuration]
    return row


def _cell(cell, driven):
    """A pattern for the ``cell`` cell driving the wire ``driven``; group 1 is the rest of it."""
    return rf"cell \{cell} (\$\d+\n(?:    [^\n]*\n)*?    connect \\Y \\{driven}\n)"


CHEAPEST = "pes=1,reuse=1,pipeline=0,lane=0"

#: Name -> (row configuration, (pattern, replacement, sites) of its seeded bug).
BUGS = {
    "int4": (CHEAPEST, (_cell("$sub", "int4_up_0_0"), r"cell $add \1", 1)),
    "pe1-zero-point": ("pes=2,reuse=1,pipeline=0,pe=1,lane=0",
                       (r"connect \\B \\i__payload \[77:74\]\n    connect \\Y \\int4_up_1_0\n",
                        r"connect \\B \\i__payload [73:70]\n    connect \\Y \\int4_up_1_0\n", 1)),
    "fine-shift": ("pes=1,reuse=1,pipeline=8,lane=0",
                   (r"(connect \\A \\al_coarse_0_0 \[21:0\]\n    connect \\B )"
                    r"\\al_fine_0_0 \[1:0\]", r"\g<1>2'00", 1)),
    "slot": ("pes=1,reuse=2,pipeline=0,lane=0",
             (r"assign \\o__payload \[34\] \\out_slot \[0\]", r"assign \\o__payload [34] 1'0",
              1)),
}


def test_the_cheapest_row_is_proved(tmp_path):
    result = _row(CHEAPEST).run(tmp_path)
    assert result.status == "PASS", (result.detail, result.folder)
    assert result.traces == []


def test_every_row_is_framed_k_induction():
    rows = arith_pcu.proofs()
    assert len({row.case for row in rows}) == len(rows)
    for row in rows:
        assert (row.unit, row.engine, row.prop) == ("p3_pcu", "kind", arith_pcu.PROPERTY)
        assert row.depth == row.params["pipeline"] + 4       # latency + 2 waits
    assert {(row.params["pipeline"], row.params["reuse"]) for row in rows} == {
        (0, 1), (0, 2), (8, 1), (8, 2)}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_a_seeded_bug_fails_with_a_trace(tmp_path, name):
    configuration, (pattern, replacement, sites) = BUGS[name]
    result = _row(configuration).run(
        tmp_path, mutation=lambda text: edit_site(text, pattern, replacement, sites=sites))
    assert result.status == "FAIL", (result.detail, result.folder)
    assert result.traces and all(trace.stat().st_size > 0 for trace in result.traces)
