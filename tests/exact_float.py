"""An exact reference for ``fp16_mac``'s golden model, independent of NumPy's float arithmetic:
binary16 decoded by hand into ``Fraction`` values, every sum and product exact, and an explicit
round to nearest, ties to even, into binary32 or binary16 (subnormals and overflow to infinity
included), the bit patterns encoded by hand.

Both readings of the MAC (contract section 5): ``acc="fp32"``, ``acc = fp32(acc + a * b)`` (the
product exact), and ``acc="fp16"``, ``acc = fp16(acc + fp16(a * b))`` (two roundings).
"""

from collections import Counter
from fractions import Fraction

import numpy as np

__all__ = ["FORMATS", "POS_INF", "NEG_INF", "NAN", "decode_fp16", "encode", "encode_fp32",
           "floor_log2", "round_exact", "ExactMac", "exact_mac_run"]

#: Format -> (significand bits with the hidden one, smallest normal exponent, largest exponent).
FORMATS = {"fp32": (24, -126, 127), "fp16": (11, -14, 15)}
#: Canonical patterns per format: +inf, -inf and the quiet NaN the unit emits.
POS_INF = {"fp32": 0x7F80_0000, "fp16": 0x7C00}
NEG_INF = {"fp32": 0xFF80_0000, "fp16": 0xFC00}
NAN = {"fp32": 0x7FC0_0000, "fp16": 0x7E00}


def decode_fp16(bits):
    """``("nan",)``, ``("inf", sign)`` or ``("num", sign, magnitude)`` from the bit pattern."""
    sign, exp, frac = bits >> 15, (bits >> 10) & 0x1F, bits & 0x3FF
    if exp == 0x1F:
        return ("nan",) if frac else ("inf", sign)
    if exp == 0:
        return ("num", sign, Fraction(frac, 1 << 24))
    return ("num", sign, Fraction(frac | 0x400) * Fraction(2) ** (exp - 25))


def floor_log2(q):
    """``floor(log2(q))`` of a positive Fraction."""
    exponent = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** exponent > q:
        exponent -= 1
    return exponent


def encode(fmt, sign, magnitude):
    """The bits of ``(-1)^sign * magnitude`` in ``fmt``; ``magnitude`` must be representable
    (or at least 2^(emax + 1): an infinity)."""
    precision, emin, emax = FORMATS[fmt]
    width = 32 if fmt == "fp32" else 16
    fraction_bits = precision - 1
    sign_bit = sign << (width - 1)
    if magnitude == 0:
        return sign_bit
    if magnitude >= Fraction(2) ** (emax + 1):
        return sign_bit | POS_INF[fmt]
    if magnitude < Fraction(2) ** emin:
        field = magnitude / Fraction(2) ** (emin - fraction_bits)
        assert field.denominator == 1
        return sign_bit | int(field)
    exponent = floor_log2(magnitude)
    significand = magnitude / Fraction(2) ** (exponent - fraction_bits)
    assert significand.denominator == 1 and 1 << fraction_bits <= significand < 1 << precision
    bias = emax
    return (sign_bit | ((exponent + bias) << fraction_bits)
            | (int(significand) - (1 << fraction_bits)))


def encode_fp32(sign, magnitude):
    """binary32 bits of ``(-1)^sign * magnitude`` (:func:`encode`)."""
    return encode("fp32", sign, magnitude)


def round_exact(fmt, exact):
    """``(kind, value)`` of ``exact`` > 0 rounded to nearest even in ``fmt``: kind is
    ``"exact"``, ``"tie_up"``, ``"tie_down"`` (a tie resolved to the even neighbour above or
    below) or ``"inexact"``; value is the rounded magnitude, or None for an overflow to
    infinity (the rounded value 2^(emax + 1) or more)."""
    precision, emin, emax = FORMATS[fmt]
    exponent = max(floor_log2(exact), emin)
    quantum = Fraction(2) ** (exponent - precision + 1)
    steps, remainder = divmod(exact, quantum)
    kind = "exact" if not remainder else "inexact"
    if remainder * 2 == quantum:
        kind = "tie_up" if steps % 2 else "tie_down"
    if remainder * 2 > quantum or kind == "tie_up":
        steps += 1
    value = steps * quantum
    return kind, (None if value >= Fraction(2) ** (emax + 1) else value)


class ExactMac:
    """The MAC computed exactly, with one explicit round to nearest even per addition (and, for
    ``acc="fp16"``, per product).

    Counts the roundings that were exact ties (``ties_up``: the odd neighbour was left for the
    even one above, ``ties_down``: below) and those decided by bits beyond the halfway point
    (``inexact``); ``events`` counts them per operation (``"product tie_up"``, ``"sum
    inexact"``...) and the binary16 corners met: ``"product subnormal"``, ``"product zero"``
    (a nonzero product rounded to 0), ``"product overflow"``, ``"sum subnormal"``, ``"sum
    overflow"``, ``"cancellation"`` (an exact zero sum of nonzero operands).
    """

    def __init__(self, acc="fp32"):
        if acc not in FORMATS:
            raise ValueError(f"acc must be one of {', '.join(FORMATS)}, not {acc!r}")
        self.fmt = acc
        self.acc = ("num", 0, Fraction(0))
        self.ties_up = self.ties_down = self.inexact = 0
        self.events = Counter()

    def round(self, sign, exact, what="sum"):
        """Round ``(-1)^sign * exact`` (exact > 0) to the accumulator's format."""
        kind, value = round_exact(self.fmt, exact)
        self.ties_up += kind == "tie_up"
        self.ties_down += kind == "tie_down"
        self.inexact += kind != "exact"
        self.events[f"{what} {kind}"] += 1
        _, emin, _ = FORMATS[self.fmt]
        if value is None:
            self.events[f"{what} overflow"] += 1
            return ("inf", sign)
        if value == 0:
            self.events[f"{what} zero"] += 1
        elif value < Fraction(2) ** emin:
            self.events[f"{what} subnormal"] += 1
        return ("num", sign, value)

    def product(self, a, b):
        """The product of binary16 patterns ``a`` and ``b``: exact for binary32 accumulation,
        rounded to binary16 for ``acc="fp16"``."""
        x, y = decode_fp16(a), decode_fp16(b)
        if x[0] == "nan" or y[0] == "nan":
            return ("nan",)
        if x[0] == "inf" or y[0] == "inf":
            zero = (x[0] == "num" and x[2] == 0) or (y[0] == "num" and y[2] == 0)
            return ("nan",) if zero else ("inf", x[1] ^ y[1])
        sign, exact = x[1] ^ y[1], x[2] * y[2]
        if self.fmt == "fp32" or exact == 0:
            return ("num", sign, exact)
        return self.round(sign, exact, "product")

    def step(self, a, b, first):
        if first:
            self.acc = ("num", 0, Fraction(0))
        product = self.product(a, b)
        acc = self.acc
        if acc[0] == "nan" or product[0] == "nan":
            self.acc = ("nan",)
        elif acc[0] == "inf" and product[0] == "inf":
            self.acc = acc if acc[1] == product[1] else ("nan",)
        elif acc[0] == "inf" or product[0] == "inf":
            self.acc = acc if acc[0] == "inf" else product
        else:
            exact = (-1) ** acc[1] * acc[2] + (-1) ** product[1] * product[2]
            if exact == 0:   # -0 only if both addends are negative (zeros)
                if acc[2] != 0:
                    self.events["cancellation"] += 1
                self.acc = ("num", acc[1] & product[1], Fraction(0))
            else:
                self.acc = self.round(int(exact < 0), abs(exact))

    def bits(self):
        if self.acc[0] == "nan":
            return NAN[self.fmt]
        if self.acc[0] == "inf":
            return NEG_INF[self.fmt] if self.acc[1] else POS_INF[self.fmt]
        return encode(self.fmt, self.acc[1], self.acc[2])


def exact_mac_run(fields, acc="fp32"):
    """The outputs of the beats ``fields`` (arrays ``a``, ``b``, ``first``, ``last``), and the
    :class:`ExactMac` that computed them (its counts)."""
    mac = ExactMac(acc)
    out = []
    for a, b, first, last in zip(*(fields[name].tolist() for name in ("a", "b", "first",
                                                                       "last"))):
        mac.step(a, b, first)
        if last:
            out.append(mac.bits())
    return np.array(out, dtype=np.int64), mac
