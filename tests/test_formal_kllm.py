"""The quick proofs of the KLLM data properties (verif/formal/arith_kllm.py), each unit at its
cheapest row: the property is proved, and it bites: one bug seeded in the unit's RTLIL
(``edit_site``) fails it with a counterexample trace.

The seeded bugs:

* ``kllm_concat`` (16 lanes, ``pipeline`` 0): lane 0 concatenates the other way round,
  ``(b << a_bits) | a`` (the commutative reading the contract rules out).
* ``kllm_idx_counter`` (1 lane, 4 bins, ``kk``, 2 banks, ``pipeline`` 0): the accumulators are
  never started afresh (the ``fresh ? 0 : acc`` multiplexer always takes ``acc``), so a
  histogram includes the reductions before it.
* ``kllm_idx_counter`` with ``counts="spill"`` (1 lane, 2 bins, reductions of up to 5 beats,
  ``pipeline`` 0): the readout ignores the list of spilled events (``high`` is 0), so a bin that
  carried before the end of its reduction reads 4 short.
* ``kllm_idx_counter`` with ``counts="memory"`` (1 lane, 2 bins, reductions of up to 2 beats,
  ``pipeline`` 0): the word the beat just ahead wrote is never taken (flag ``f1``), so a beat
  whose index equals the previous beat's misses that beat's count.
"""

import pytest

from qllm_cores.verif.formal import arith_kllm
from tests.formal_checks import assert_proved, assert_seeded_bug_fails


def _row(unit, configuration):
    [row] = [row for row in arith_kllm.proofs()
             if (row.unit, row.configuration) == (unit, configuration)]
    return row


#: Name -> (the proof, (pattern, replacement, sites) of its seeded bug).
QUICK = {
    "kllm_concat": (_row("kllm_concat", "pipeline=0"),
                    (r"\\i__payload \[3:0\] \\i__payload \[67:64\] \}",
                     r"\\i__payload [67:64] \\i__payload [3:0] }", 1)),
    "kllm_idx_counter": (_row("kllm_idx_counter",
                              "n_inputs=1,idx_bits=2,max_len=4,mode=kk,banks=2,pipeline=0,"
                              "beats=2"),
                         (r"connect \\S \\fresh \[0\]\n    connect \\A \\acc \[11:0\]",
                          r"connect \\S 1'0\n    connect \\A \\acc [11:0]", 1)),
    "kllm_idx_counter_spill": (_row("kllm_idx_counter",
                                    "n_inputs=1,idx_bits=1,max_len=5,mode=kk,counts=spill,"
                                    "pipeline=0,beats=5"),
                               (r"connect \\A \\high \[0\]\n", r"connect \\A 1'0\n", 1)),
    "kllm_idx_counter_memory": (_row("kllm_idx_counter",
                                     "idx_bits=1,max_len=4,mode=kk,counts=memory,n_inputs=1,"
                                     "pipeline=0,beats=2,in_flight=1"),
                                (r"connect \\S \\lane0_f1 \[0\]\n", r"connect \\S 1'0\n", 1)),
}


def test_the_rows_are_distinct_and_cover_every_concat_depth():
    rows = arith_kllm.proofs()
    assert len({row.case for row in rows}) == len(rows)
    concat = {row.params["pipeline"] for row in rows if row.unit == "kllm_concat"}
    assert concat == {0, 1, 2}


@pytest.mark.parametrize("name", sorted(QUICK))
def test_the_property_is_proved(tmp_path, name):
    assert_proved(QUICK[name][0], tmp_path)


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_seeded_bug_fails_with_a_trace(tmp_path, name):
    quick, (pattern, replacement, sites) = QUICK[name]
    assert_seeded_bug_fails(quick, tmp_path, pattern, replacement, sites)
