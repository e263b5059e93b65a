"""The data proofs of the floating-point MACs (verif/formal/arith_float.py): the cheapest rows
are proved, and each bites: a bug seeded in the unit's RTLIL (``edit_site``) fails it with a
counterexample trace.

The seeded bugs:

* ``fp16_mac``, class/sign/exponent window (``pipeline`` = 0): the subnormal ``b``'s exponent
  is raised by its leading-zero count instead of lowered (the ``$sub`` cell driving ``b_exp``
  becomes ``$add``).
* ``fp16_mac``, exact product with one operand a power of two (``pipeline`` = 0): the
  subnormal ``a``'s significand is not shifted up (its shift amount is 0; the exponent is still
  lowered). The exponent window does not see this bug: only the significand is wrong.
* ``fp16_mac``, zero product of a two-beat reduction (``pipeline`` = 0): the accumulation's
  ``x + 0`` path drops the accumulator's fraction.
* ``fp16_pcu`` (2 lanes, ``pipeline`` = 0): lane 1 multiplies lane 0's weight.
"""

import pytest

from qllm_cores.verif.formal.arith_float import proofs
from qllm_cores.verif.runner import edit_site


def _row(unit, configuration, prop):
    [row] = [row for row in proofs()
             if (row.unit, row.configuration, row.prop) == (unit, configuration, prop)]
    return row


def _cell(cell, driven):
    """A pattern for the ``cell`` cell driving the wire ``driven``; group 1 is the rest of it."""
    return rf"cell \{cell} (\$\d+\n(?:    [^\n]*\n)*?    connect \\Y \\{driven}\n)"


#: Name -> (unit, configuration, property, (pattern, replacement, sites) of its seeded bug).
QUICK = {
    "fp16_mac-window": ("fp16_mac", "pipeline=0", "acc = a*b class/sign/exponent",
                        (_cell("$sub", "b_exp"), r"cell $add \1", 1)),
    "fp16_mac-exact": ("fp16_mac", "pipeline=0,frac=10+0 or 0+10", "acc = a*b",
                       (r"(connect \\A \\a_unpacked \[10:0\]\n    connect \\B )"
                        r"\{ \$\d+ \[0\] \$\d+ \[2:0\] \}", r"\g<1>4'0000", 1)),
    "fp16_mac-zero": ("fp16_mac", "pipeline=0,frac=10+0 or 0+10", "zero product adds nothing",
                      (r"assign \\special \[22:0\] \\acc \[22:0\]",
                       r"assign \\special [22:0] 23'" + "0" * 23, 1)),
    "fp16_pcu-window": ("fp16_pcu", "lanes=2,pipeline=0", "acc = a*b class/sign/exponent",
                        (r"(assign \\i__payload\$\d+ \[31:16\] \\i__payload\$\d+ )\[47:32\]",
                         r"\g<1>[31:16]", 1)),
}

#: Proofs over 20 s on this machine (shared, under load): in make test-large only.
SLOW_PROOFS = {"fp16_mac-zero"}


def _marks(name):
    return pytest.param(name, marks=pytest.mark.large) if name in SLOW_PROOFS else name


@pytest.mark.parametrize("name", [_marks(name) for name in sorted(QUICK)])
def test_the_property_is_proved(tmp_path, name):
    unit, configuration, prop, _ = QUICK[name]
    result = _row(unit, configuration, prop).run(tmp_path)
    assert result.status == "PASS", (result.detail, result.folder)
    assert result.traces == []


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_seeded_bug_fails_with_a_trace(tmp_path, name):
    unit, configuration, prop, (pattern, replacement, sites) = QUICK[name]
    result = _row(unit, configuration, prop).run(
        tmp_path, mutation=lambda text: edit_site(text, pattern, replacement, sites=sites))
    assert result.status == "FAIL", (result.detail, result.folder)
    assert result.traces and all(trace.stat().st_size > 0 for trace in result.traces)
