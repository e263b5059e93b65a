# amaranth: UnusedElaboratable=no
"""Data properties of ``fp16_mac``'s second reading, ``acc="fp16"`` (contract section 5; the
contract is :class:`hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`'s docstring): ``acc = fp16(acc + fp16(a * b))``, each
rounding to nearest, ties to even, binary16 subnormal results, overflow to infinity, every NaN
result 0x7E00, ``first`` starting from +0.0. The expected values are written here from the IEEE
754 binary16 definition, never from the RTL: the operands taken apart by
:func:`~verif.formal.arith_float.fp16_operand`, the exact product ``P * 2^E`` (``P = sig_a *
sig_b``, ``E = e_a + e_b - 50``), and its rounding to binary16 as the definition reads
(:func:`round_to_fp16`): the grid of binary16 around ``2^L`` (``L``, the exponent of the
product's leading one) is ``2^q`` with ``q = max(L, -14) - 10``; ``P`` is divided by ``2^(q -
E)`` and the quotient rounded up when the remainder is above half the divisor, or equal to it
with an odd quotient (the remainder's top bit and the OR of the bits below it); the rounded
multiple of ``2^q`` is then encoded (a subnormal below ``2^10``, one exponent up at ``2^11``,
infinity from exponent 31 on). The RTL's product step normalizes first, shifts subnormals by
``1 - e`` with a masked sticky bit and packs with the ``((exp - 1) << 10) + sig`` identity:
another circuit.

Properties (framed k-induction, :class:`~verif.formal.transaction.TransactionHarness`, as in
:mod:`~verif.formal.arith_float`), single-beat reductions ``acc = fp16(+0.0 + fp16(a * b))``,
which is the rounded product, except that a product rounded to -0 gives +0:

* ``"acc = fp16 a*b class/sign/exponent"`` (:class:`HalfMacHarness`, ``exact=False``), all
  inputs: NaN operands and ``0 * inf`` exactly 0x7E00, infinite operands the infinity of the
  product's sign, zero products +0; for a finite nonzero product with ``t = e_a + e_b - 15``
  (its biased exponent if the significand product's leading one is at bit 20; the value lies in
  ``[2^(t - 15), 2^(t - 13))``): an infinity of its sign if ``t >= 31``, never one if ``t <
  29``; +0 only if ``t <= -10``; otherwise the product's sign, a nonzero magnitude and an
  exponent field between ``max(t, 0)`` and ``max(t + 2, 0)`` (31 only for an infinity). It
  needs no significand product.
* ``"acc = fp16 a*b"`` (exact, :func:`half_single_beat`), with the significands restricted as in
  :mod:`~verif.formal.arith_float` (``frac=fa+fb``): ``10+0 or 0+10`` (one operand a power of two,
  the other any: every product exact in the normal range, overflowing from 2^16 on, and rounded
  with every shift in the subnormal range, ties included, down to zero). The multiplier,
  the product step and its registers, the loop's ``first`` path and the output packing, wired
  as in the unit.
* ``"fp16(p) of every exact product"`` (:class:`RoundingHarness`, the product step alone,
  ``step=round_product``): the rounding of every significand product the multiplier can give,
  at every exponent (ties both ways in the normal and the subnormal range, the carry into the
  next exponent, overflow at 65520, rounding to zero). Combinational; it covers what the
  restricted rows cannot: a ``10+1 or 1+10`` unit row (12-bit products, rounded in the normal
  range) did not finish in 120 s (100 s with another form of the reference), the full 11 x 11
  product is beyond the solver as for binary32.
* ``"zero product adds nothing"`` (:class:`HalfZeroProductHarness`, ``10+0 or 0+10``, the
  finite nonzero product exact and normal): a two-beat reduction in which one product is a
  zero (a zero operand) gives the other beat's single-beat result: the binary16 loop's ``x +
  0`` and ``0 + y`` paths, the sign of zero sums, infinite and NaN accumulators.

Configurations: ``pipeline`` 0 and the default 2, with ``acc="fp16"`` (``pipeline`` 1 is the
default's circuit without the register in front of the multiplier); the product step once.
Times are in :func:`proofs`.

Not proved here, and why: as for binary32 (:mod:`~verif.formal.arith_float`), products of two
unrestricted significands (the solver's reach: the window covers all inputs without them) and
the accumulation of two nonzero products (the binary16 adder's alignment, rounding,
cancellation and overflow: a reference adder in the proof would bring back the multiplier
before it; the bench's directed and random simulation against the golden model covers them).
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Assert, Assume, Cat, Const, Module, Mux, Signal, signed

from qllm_cores.gen.registry import UNITS, resolve_params
from qllm_cores.hdl.baselines.fp16_mac.formats import HALF_RAW_PRODUCT_LAYOUT
from qllm_cores.hdl.baselines.fp16_mac.half import pack_half, round_product

from . import Proof
from .arith_float import (ALL, MacHarness, ZeroProductHarness, fp16_operand, restricted,
                          significand_product)
from .stream import UnitHarness

__all__ = ["CANONICAL_NAN_FP16", "round_to_fp16", "half_single_beat", "HalfMacHarness",
           "HalfZeroProductHarness", "RoundingHarness", "proofs"]

#: The contract's one binary16 NaN result (quiet, positive, payload 0).
CANONICAL_NAN_FP16 = 0x7E00


def round_to_fp16(m, sign, sig, exp, name):
    """binary16 bits of ``(-1)^sign * sig * 2^exp`` rounded to nearest, ties to even, for a
    22-bit ``sig`` with its leading one at bit 21 or 20 (IEEE 754: the grid ``2^q``, ``q =
    max(L, -14) - 10`` for a value in ``[2^L, 2^(L + 1))``; infinity from 2^16 on)."""
    lead = Signal(signed(10), name=f"spec_{name}_lead")         # L
    m.d.comb += lead.eq(exp + 20 + sig[21])
    quantum = Signal(signed(10), name=f"spec_{name}_quantum")   # q
    m.d.comb += quantum.eq(Mux(lead < -14, -14, lead) - 10)
    drop = Signal(signed(10), name=f"spec_{name}_drop")         # q - E, at least 10
    m.d.comb += drop.eq(quantum - exp)
    shift = Signal(5, name=f"spec_{name}_shift")                # capped: 23 drops all of sig
    m.d.comb += shift.eq(Mux(drop > 23, 23, drop))
    # The remainder of sig / 2^shift against half the divisor: its top bit (sig's bit shift - 1)
    # and whether any bit below that is set.
    quotient = Signal(13, name=f"spec_{name}_quotient")
    halfway = Signal(name=f"spec_{name}_halfway")
    beyond = Signal(name=f"spec_{name}_beyond")
    below = Signal(5, name=f"spec_{name}_half_shift")
    m.d.comb += [
        below.eq(shift - 1),
        quotient.eq(sig >> shift),
        halfway.eq((sig >> below)[0]),
        beyond.eq((sig & ((Const(1, 23) << below) - 1)[0:22]) != 0),
    ]
    rounded = Signal(13, name=f"spec_{name}_rounded")
    m.d.comb += rounded.eq(quotient + (halfway & (beyond | quotient[0])))
    # rounded * 2^q: a subnormal below 2^10 (q = -24), else field q + 25 (q + 26 at 2^11).
    field = Signal(signed(10), name=f"spec_{name}_field")
    m.d.comb += field.eq(Mux(rounded[11], quantum + 26, quantum + 25))
    bits = Signal(16, name=f"spec_{name}_bits")
    with m.If(rounded < 1024):
        m.d.comb += bits.eq(Cat(rounded[0:10], Const(0, 5), sign))
    with m.Elif(field >= 31):
        m.d.comb += bits.eq(Cat(Const(0, 10), Const(31, 5), sign))
    with m.Else():
        m.d.comb += bits.eq(Cat(Mux(rounded[11], 0, rounded[0:10]), field[0:5], sign))
    return bits


def half_single_beat(m, a, b, name, free=((ALL, ALL),)):
    """The binary16 bits of ``fp16(+0.0 + fp16(a * b))``: the canonical NaN for a NaN operand
    or ``0 * inf``, an infinity of the product's sign for an infinite operand, +0 for a zero
    product, else the product rounded to binary16 (:func:`round_to_fp16`), with a -0 (a
    product that underflows) turned to +0 by the addition to +0."""
    x, y = fp16_operand(m, a, f"{name}_a"), fp16_operand(m, b, f"{name}_b")
    sign = x.sign ^ y.sign
    exp = Signal(signed(8), name=f"spec_{name}_exp")
    m.d.comb += exp.eq(x.exp + y.exp - 50)
    rounded = round_to_fp16(m, sign, significand_product(m, x, y, name, free), exp, name)
    bits = Signal(16, name=f"spec_{name}")
    m.d.comb += bits.eq(
        Mux(x.nan | y.nan | (x.inf & y.zero) | (x.zero & y.inf), CANONICAL_NAN_FP16,
            Mux(x.inf | y.inf, Cat(Const(0x7C00, 15), sign),
                Mux(x.zero | y.zero | (rounded[0:15] == 0), 0, rounded))))
    return bits


def half_window(m, a, b, acc, name):
    """The assertion about one single-beat result ``acc`` that needs no significand product
    (see the module docstring)."""
    x, y = fp16_operand(m, a, f"{name}_a"), fp16_operand(m, b, f"{name}_b")
    t = Signal(signed(8), name=f"spec_{name}_t")
    m.d.comb += t.eq(x.exp + y.exp - 15)
    low = Signal(signed(8), name=f"spec_{name}_low")
    high = Signal(signed(8), name=f"spec_{name}_high")
    m.d.comb += [low.eq(Mux(t < 0, 0, t)), high.eq(Mux(t < -2, 0, t + 2))]
    sign = x.sign ^ y.sign
    field = acc[10:15]
    is_inf = (field == 31) & (acc[0:10] == 0)
    with m.If(x.nan | y.nan | (x.inf & y.zero) | (x.zero & y.inf)):
        m.d.comb += Assert(acc == CANONICAL_NAN_FP16)
    with m.Elif(x.inf | y.inf):
        m.d.comb += Assert(acc == Cat(Const(0x7C00, 15), sign))
    with m.Elif(x.zero | y.zero):
        m.d.comb += Assert(acc == 0)
    with m.Elif(acc == 0):
        m.d.comb += Assert(t <= -10)
    with m.Else():
        m.d.comb += [Assert(acc[15] == sign), Assert(acc[0:15] != 0),
                     Assert((field != 31) | is_inf),
                     Assert((t < 31) | is_inf), Assert(~is_inf | (t >= 29))]
        with m.If(~is_inf):
            m.d.comb += [Assert(field >= low), Assert(field <= high)]


class HalfMacHarness(MacHarness):
    """:class:`~verif.formal.arith_float.MacHarness` for ``acc="fp16"``: each output of a
    single-beat reduction is ``fp16(+0.0 + fp16(a*b))`` (:func:`half_single_beat`), or the
    :func:`half_window` for all inputs."""

    single_beat = staticmethod(half_single_beat)
    window = staticmethod(half_window)


class HalfZeroProductHarness(ZeroProductHarness):
    """:class:`~verif.formal.arith_float.ZeroProductHarness` for ``acc="fp16"``: the other
    beat's result is :func:`half_single_beat` (of that beat's operands, selected first: one
    reference circuit). The finite nonzero products are exact normal numbers (a power-of-two
    operand, and the exponent in range): the row is about the loop's zero paths, whose
    operand's rounding the single-beat rows and the rounding step row prove; with rounded
    products in it (subnormal, overflowing) it took 100 s, beyond the budget."""

    def __init__(self, dut, **options):
        self.assumed = []
        super().__init__(dut, **options)

    def assume_operands(self, m, x, y):
        """The significands' ``free`` bits, and a finite nonzero product in the normal range
        before rounding (``t = e_a + e_b - 15`` in 1..30: with a power-of-two operand exact,
        see :class:`HalfZeroProductHarness`)."""
        super().assume_operands(m, x, y)
        t = Signal(signed(8), name=f"spec_{len(self.assumed)}_t")
        self.assumed.append(t)
        m.d.comb += [t.eq(x.exp + y.exp - 15),
                     Assume(~x.finite | ~y.finite | x.zero | y.zero | ((t >= 1) & (t <= 30)))]

    def expected(self, m, records, first_zero):
        a = Mux(first_zero, records[1].a, records[0].a)
        b = Mux(first_zero, records[1].b, records[0].b)
        return half_single_beat(m, a, b, "other", self.free)


class RoundingHarness(UnitHarness):
    """The binary16 reading's product step, :func:`hdl.baselines.fp16_mac.half.round_product` (the
    step :class:`~hdl.baselines.fp16_mac.fp16_mac.Fp16Mac` builds between its ``raw_product`` and ``product``
    registers), on every exact product the multiplier can give: a free
    :data:`~hdl.baselines.fp16_mac.formats.HALF_RAW_PRODUCT_LAYOUT` value with at most one class flag
    and, if finite and nonzero, a 22-bit significand product with its leading one at bit 21
    or 20 and an exponent in -33..45 (``e_a + e_b - 15`` for normalized operands of exponents
    -9..30). Asserted: its binary16 bits (:func:`hdl.baselines.fp16_mac.half.pack_half`, the output
    packing) are :func:`round_to_fp16` of ``sig * 2^(exp - 35)`` (the class flags: the
    canonical NaN, an infinity, a zero of the product's sign), and its ``zero`` flag (the
    loop's) is set exactly for a finite result of magnitude 0. Combinational: one step of
    k-induction. It covers every significand product, which the unit-level rows cannot (the
    multiplier is beyond the solver there)."""

    def __init__(self, dut, *, framed=True):
        super().__init__(dut)
        self.raw = Signal(HALF_RAW_PRODUCT_LAYOUT, name="raw")

    @property
    def free_ports(self):
        return [self.raw.as_value()]

    def induction_depth(self, slack=0):
        return 1 + slack

    def elaborate(self, platform):
        m = Module()
        raw = self.raw
        product = round_product(m, raw)
        bits = pack_half(m, product, name="product_bits")
        finite = ~raw.nan & ~raw.inf
        m.d.comb += [
            Assume(~(raw.zero & raw.inf) & ~(raw.zero & raw.nan) & ~(raw.inf & raw.nan)),
            Assume(~finite | raw.zero | ((raw.sig[20:22] != 0) & (raw.exp >= -33)
                                        & (raw.exp <= 45))),
        ]
        exp = Signal(signed(10), name="spec_exp")
        m.d.comb += exp.eq(raw.exp - 35)
        rounded = round_to_fp16(m, raw.sign, raw.sig, exp, "product")
        expected = Signal(16, name="spec_bits")
        m.d.comb += expected.eq(
            Mux(raw.nan, CANONICAL_NAN_FP16,
                Mux(raw.inf, Cat(Const(0x7C00, 15), raw.sign),
                    Mux(raw.zero, Cat(Const(0, 15), raw.sign), rounded))))
        m.d.comb += [Assert(bits == expected),
                     Assert(product.zero == (finite & (expected[0:15] == 0))),
                     Assert(product.first == raw.first)]
        return m


#: Property names of the rows.
STEP = "fp16(p) of every exact product"
WINDOW = "acc = fp16 a*b class/sign/exponent"
EXACT = "acc = fp16 a*b"
ZERO = "zero product adds nothing"
#: The significand restrictions of the exact rows.
POWER_OF_TWO = ((ALL, 0), (0, ALL))


def _row(overrides, prop, harness, free=None, label="", **options):
    """One framed k-induction row of ``fp16_mac`` at ``overrides``."""
    _, params = resolve_params("fp16_mac", None, overrides)
    if free is not None:
        options["free"] = free
        label = ",frac=" + " or ".join(f"{fx}+{fy}" for fx, fy in free)
    build = partial(harness, framed=True, **options)
    depth = build(UNITS["fp16_mac"].build(params)).induction_depth()
    configuration = ",".join(f"{key}={value}" for key, value in overrides.items()) + label
    return Proof("fp16_mac", configuration, prop, build, params, "kind", depth)


def proofs():
    """The rows, framed k-induction (k = latency + 2, the two-beat row latency + 4; the product
    step k = 1), with their times (one proof at a time, wall clock, 2 cores shared with other
    work at a load of about 5.5):

    * ``pipeline`` 0: class/sign/exponent 2.5 s; exact ``10+0 or 0+10`` 14 s; zero product
      13.5 s.
    * ``pipeline`` 2: class/sign/exponent 2.6 s; exact ``10+0 or 0+10`` 19.4 s; zero product
      11.6 s.
    * the product step: 1.8 s.
    """
    rows = []
    for pipeline in dict.fromkeys((0, UNITS["fp16_mac"].defaults["pipeline"])):
        mac = {"pipeline": pipeline, "acc": "fp16"}
        rows += [
            _row(mac, WINDOW, HalfMacHarness, exact=False),
            _row(mac, EXACT, HalfMacHarness, POWER_OF_TWO),
            _row(mac, ZERO, HalfZeroProductHarness, POWER_OF_TWO),
        ]
    rows.append(_row({"acc": "fp16"}, STEP, RoundingHarness, label=",step=round_product"))
    return rows
