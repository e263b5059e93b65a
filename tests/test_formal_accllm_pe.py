# amaranth: UnusedElaboratable=no
"""The quick proofs of :mod:`verif.formal.arith_accllm_pe` (``accllm_pe``, ``accllm_plain_mul``,
``accllm_sparse_selector``), each at its cheapest row: the property is proved, and it bites: one
bug seeded in the unit's RTLIL (``edit_site``) fails it with a counterexample trace.

The seeded bugs:

* ``accllm_pe``, ``generic`` (every mode, ``x_bits`` = 4, ``pipeline`` 0): the KV4 weight of
  ``w1`` adds the zero point (the ``$sub`` cell of ``q - zp``, reading ``w1[3:0]`` = payload
  bits [13:10], becomes ``$add``).
* ``accllm_pe``, ``xilinx`` (every mode, unsigned, ``x_bits`` = 3, ``pipeline`` 3): the
  DSP48E2's ``INMODE`` is always D + A2, so a KV4 beat adds the zero point through the
  pre-adder instead of subtracting it (the edit is on the unit's instance, before the DSP48E2
  model is read in).
* ``accllm_plain_mul`` (``w2`` with the cross products, ``pipeline`` 3): the multiplier of the
  cross product ``p21 = x2*w1`` takes ``x1``.
* ``accllm_sparse_selector`` (the defaults, ``pipeline`` 0): row 0, group 0's ``x1`` takes
  input 2 for index 1.
"""

import pytest

from qllm_cores.verif.formal.arith_accllm_pe import proofs
from qllm_cores.verif.runner import edit_site


def _row(unit, configuration):
    [row] = [row for row in proofs() if (row.unit, row.configuration) == (unit, configuration)]
    return row


#: Name -> (unit, configuration of its row, (pattern, replacement, sites) of its seeded bug).
QUICK = {
    "accllm_pe-generic": (
        "accllm_pe", "generic,signed,x_bits=4,acc_bits=12,pipeline=0",
        (r"cell \$sub (\$\d+\n(?:    [^\n]*\n)*?    connect \\A \\i__payload \[13:10\]\n)",
         r"cell $add \1", 1)),
    "accllm_pe-xilinx": (
        "accllm_pe", "xilinx,unsigned,x_bits=3,acc_bits=11,pipeline=3",
        (r"connect \\INMODE \{ 1'0 \$\d+ \[3:0\] \}", r"connect \\INMODE 5'00100", 1)),
    "accllm_plain_mul": (
        "accllm_plain_mul", "mode=w2,cross_products=True,pipeline=3",
        (r"(connect \\A )\\operand_x2 \[7:0\](\n    connect \\B \\operand_w1 \[1:0\])",
         r"\1\\operand_x1 [7:0]\2", 1)),
    "accllm_sparse_selector": (
        "accllm_sparse_selector", "pipeline=0",
        (r"(assign \\x1_r0_g0 \[7:0\] \\i__payload )\[15:8\]", r"\1[23:16]", 1)),
}

#: Proofs over 15 s on this machine: in make test-large only.
SLOW_PROOFS = {"accllm_pe-generic", "accllm_pe-xilinx"}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.large) if name in SLOW_PROOFS else name
    for name in sorted(QUICK)])
def test_the_property_is_proved(tmp_path, name):
    unit, configuration, _ = QUICK[name]
    result = _row(unit, configuration).run(tmp_path)
    assert result.status == "PASS", (result.detail, result.folder)
    assert result.traces == []


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_seeded_bug_fails_with_a_trace(tmp_path, name):
    unit, configuration, (pattern, replacement, sites) = QUICK[name]
    result = _row(unit, configuration).run(
        tmp_path, mutation=lambda text: edit_site(text, pattern, replacement, sites=sites))
    assert result.status == "FAIL", (result.detail, result.folder)
    assert result.traces and all(trace.stat().st_size > 0 for trace in result.traces)
