# amaranth: UnusedElaboratable=no
"""The quick proofs of the data properties of ``make formal`` (verif/formal/: arith_accllm,
arith_p3_oaken, orizuru), each at its cheapest row: the property is proved, and it bites: one bug
seeded in the unit's RTLIL (``edit_site``) fails it with a counterexample trace.

The seeded bugs:

* ``accllm_dsp_mul``, ``generic`` (``w4``): the signed field ``p1`` loses the borrow it takes
  from ``p2`` (the ``+ R[w-1]`` of the borrow chain); ``xilinx`` (``w2``): the C-port correction
  of the B port (``X1 < 0``) is lost. Both at ``x_bits`` = 4, ``pipeline`` = 0, by PDR.
* ``p3_pe`` (``pipeline`` = 0, lane 0 active): the lane 0 INT4 decoder adds the zero point (the
  ``$sub`` cell driving ``int4_0`` becomes ``$add``: ``q + zp``).
* ``oaken_decomposer`` (4 lanes, ``pipeline`` = 0): the lane 0 upper outer comparison
  ``x > t_hi_o`` (the sign of ``t_hi_o - x``) takes the sign of ``t_hi_o + x`` instead.
* Orizuru's tree at ``pipeline`` = 0: for the order (n = 2, each side), the initialisation
  comparator ``right > left`` gets its operands swapped, so the max tree keeps the smaller value
  of the pair (and the min tree, which inverts that bit, the larger); for the distinct indices
  (n = 4), the max tree no longer marks the popped leaf unavailable when its walk starts
  (``path_avail & ~maintain_start``, emitted twice, loses the ``~maintain_start``), so the leaf
  can win the next pop again.
"""

import pytest

from qllm_cores.verif.formal import arith_p3_oaken
from qllm_cores.verif.formal.arith_accllm import proof as accllm_proof
from qllm_cores.verif.formal.orizuru import DistinctIndicesHarness, TopKOrderHarness
from qllm_cores.verif.formal.orizuru import proof as orizuru_proof
from tests.formal_checks import assert_proved, assert_seeded_bug_fails


def _p3_oaken_row(unit, configuration):
    [row] = [row for row in arith_p3_oaken.proofs()
             if (row.unit, row.configuration) == (unit, configuration)]
    return row


def _cell(cell, driven):
    """A pattern for the ``cell`` cell driving the wire ``driven``; group 1 is the rest of it."""
    return rf"cell \{cell} (\$\d+\n(?:    [^\n]*\n)*?    connect \\Y \\{driven}\n)"


TREE = {"structure": "tree", "pipeline": 0}
SWAPPED_COMPARATOR = (r"connect \\A \\work_0 \[15:0\]\n    connect \\B \\work_1 \[15:0\]\n"
                      r"    connect \\Y \\init_gt_0\n",
                      r"connect \\A \\work_1 [15:0]\n    connect \\B \\work_0 [15:0]\n"
                      r"    connect \\Y \\init_gt_0\n", 1)

#: Name -> (the proof, (pattern, replacement, sites) of its seeded bug).
QUICK = {
    "accllm-generic": (accllm_proof("generic", "w4", True, framed=False, pipeline=0, x_bits=4),
                       (r"connect \\B \{ 1'0 \\product \[17\] \}", r"connect \\B 2'00", 1)),
    "accllm-xilinx": (accllm_proof("xilinx", "w2", True, framed=False, pipeline=0, x_bits=4),
                      (r"connect \\C \\c_port \[47:0\]", r"connect \\C 48'0", 1)),
    "p3_pe": (_p3_oaken_row("p3_pe", "pipeline=0,lane=0"),
              (_cell("$sub", "int4_0"), r"cell $add \1", 1)),
    "oaken_decomposer": (_p3_oaken_row("oaken_decomposer", "lanes=4,pipeline=0"),
                         (_cell("$sub", "t_hi_o_past_0"), r"cell $add \1", 1)),
    **{f"orizuru-order-{side}": (orizuru_proof("orizuru", {"n": 2, **TREE}, TopKOrderHarness,
                                               framed=True, side=side), SWAPPED_COMPARATOR)
       for side in ("max", "min")},
    "orizuru-distinct": (orizuru_proof("orizuru", {"n": 4, **TREE}, DistinctIndicesHarness,
                                       framed=False),
                         (r"(connect \\A \\max_path_avail \[0\]\n    connect \\B )\$\d+ \[0\]",
                          r"\g<1>1'1", 2)),
}


#: Proofs over 15 s on this machine: in make test-large (and `make formal`) only.
SLOW_PROOFS = {"p3_pe", "oaken_decomposer"}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.large) if name in SLOW_PROOFS else name
    for name in sorted(QUICK)])
def test_the_property_is_proved(tmp_path, name):
    assert_proved(QUICK[name][0], tmp_path)


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_seeded_bug_fails_with_a_trace(tmp_path, name):
    quick, (pattern, replacement, sites) = QUICK[name]
    assert_seeded_bug_fails(quick, tmp_path, pattern, replacement, sites)
