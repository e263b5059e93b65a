"""The data proofs of ``fp16_mac``'s binary16 reading (verif/formal/arith_float_half.py): each
row is proved, and each bites: a bug seeded in the unit's RTLIL (``edit_site``) fails it with a
counterexample trace.

The seeded bugs:

* the product step on every exact product: the rounding's condition ``sticky | lsb`` (above
  half, or a tie with an odd LSB) becomes ``sticky & lsb``;
* class/sign/exponent window (``pipeline`` = 0): the product's exponent subtracts the
  normalization's carry instead of adding it;
* exact product with one operand a power of two (``pipeline`` = 0): the product's sticky bit
  needs both of its halves (``$or`` -> ``$and``): subnormal products round wrongly, a
  significand-only bug the window does not see;
* zero product of a two-beat reduction (``pipeline`` = 0): the loop's ``x + 0`` path drops
  the accumulator's significand.
"""

import pytest

from tests.formal_checks import assert_proved, assert_seeded_bug_fails
from qllm_cores.verif.formal.arith_float_half import proofs


def _row(configuration, prop):
    [row] = [row for row in proofs() if (row.configuration, row.prop) == (configuration, prop)]
    return row


def _cell(cell, driven):
    """A pattern for the ``cell`` cell driving the wire ``driven``; group 1 is the rest of it."""
    return rf"cell \{cell} (\$\d+\n(?:    [^\n]*\n)*?    connect \\Y \\{driven}\n)"


#: Name -> (configuration, property, (pattern, replacement, sites) of its seeded bug).
QUICK = {
    "step": ("acc=fp16,step=round_product", "fp16(p) of every exact product",
             (r"cell \$or (\$\d+\n(?:    [^\n]*\n)*?    connect \\A \\product_next_sticky "
              r"\[0\]\n)", r"cell $and \1", 1)),
    "window": ("pipeline=0,acc=fp16", "acc = fp16 a*b class/sign/exponent",
               (_cell("$add", "product_next_exp"), r"cell $sub \1", 1)),
    "exact": ("pipeline=0,acc=fp16,frac=10+0 or 0+10", "acc = fp16 a*b",
              (_cell("$or", "product_next_sticky"), r"cell $and \1", 1)),
    "zero": ("pipeline=0,acc=fp16,frac=10+0 or 0+10", "zero product adds nothing",
             (r"(cell \$mux \$\d+\n    parameter \\WIDTH 11\n    connect \\S \$\d+ \[0\]\n"
              r"    connect \\A )\\acc \[10:0\](\n    connect \\B 11'0{11}\n)",
              r"\g<1>11'00000000000\2", 1)),
}

#: Proofs over 15 s on this machine (shared, under load): in make test-large only.
SLOW_PROOFS = {"exact", "zero"}


def _marks(name):
    return pytest.param(name, marks=pytest.mark.large) if name in SLOW_PROOFS else name


@pytest.mark.parametrize("name", [_marks(name) for name in sorted(QUICK)])
def test_the_property_is_proved(tmp_path, name):
    configuration, prop, _ = QUICK[name]
    assert_proved(_row(configuration, prop), tmp_path)


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_seeded_bug_fails_with_a_trace(tmp_path, name):
    configuration, prop, (pattern, replacement, sites) = QUICK[name]
    assert_seeded_bug_fails(_row(configuration, prop), tmp_path, pattern, replacement, sites)
