# amaranth: UnusedElaboratable=no
"""Data properties of the floating-point MACs ``fp16_mac`` and ``fp16_pcu`` (contract sections 0
and 5; the contract is :class:`hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`'s docstring): ``acc = fp32(acc + fp32(a) *
fp32(b))``, one rounding (to nearest, ties to even), binary16 subnormals exact, IEEE infinities
and NaNs, every NaN result 0x7FC00000, ``first`` starting from +0.0. The expected values are
written here from the IEEE 754 binary16 and binary32 encodings (:func:`fp16_operand`,
:func:`product`, :func:`single_beat`), never from the RTL: the operand's fields, a subnormal's
significand normalized by a priority chain, the exact product ``sig_a * sig_b * 2^(e_a + e_b -
50)`` normalized at bit 21 or 20, the biased binary32 exponent ``e_a + e_b + 97`` or one more.

Properties (framed k-induction, :class:`~verif.formal.transaction.TransactionHarness`: one
reduction in flight, waits of at most one cycle, the result exactly ``latency`` after its last
beat; a proof for every input allowed below at every time under that environment, the stream
proofs covering the unit under any environment):

* ``"acc = a*b class/sign/exponent"`` (:class:`MacHarness`, ``exact=False``), all inputs,
  single-beat reductions (``first`` = ``last`` = 1, so ``acc = fp32(+0.0 + a*b)``): a NaN
  operand or ``0 * inf`` gives exactly 0x7FC00000, an infinite operand the infinity of the
  product's sign, a zero product +0.0 (``+0 + -0 = +0`` under round to nearest: the
  ``first`` reading of the contract), and a finite nonzero product its sign, the exponent
  ``e_a + e_b + 97`` or one more, the two (three at the lower exponent) fraction bits below
  the 22-bit significand product 0 (:func:`window`). What it leaves out is the product's
  significand bits (and whether the exponent is the upper or the lower one): they need the
  significand product. A significand-only bug (a subnormal significand not shifted up, its
  exponent still lowered) passes it; the exact rows fail it.
* ``"acc = a*b"`` (exact, :func:`single_beat`), single-beat reductions with the significands
  restricted, ``frac=fa+fb``: the normalized significands of ``a`` and ``b`` have no fraction
  bits set below their top ``fa`` and ``fb`` (``or``: either pair). Every sign, exponent and
  class (subnormals included: a subnormal with few bits set normalizes to a restricted
  significand) is free. ``10+0 or 0+10``: one operand's significand a power of two, the
  other's any (each of its bits reaches the output, at every shift); ``10+1 or 1+10``: one
  operand any, the other 1.0 or 1.5 (two partial products, carries across the full width,
  products at or above 2, so both normalizations); ``3+3``: both significands of four bits
  (a 4 x 4 product, both normalizations).
* ``"zero product adds nothing"`` (:class:`ZeroProductHarness`, exact, ``10+0 or 0+10``): a
  two-beat reduction in which one product is a zero gives the other beat's single-beat
  result. It checks the accumulation loop's ``x + 0`` path with an accumulator that was not
  cleared (the second product zero) and its ``0 + y`` path with a zero accumulator that is not
  ``first`` (the first product zero), including the signs of zero sums and NaN and infinite
  accumulators.
* ``fp16_pcu`` (:class:`PcuHarness`): the same single-beat properties on every lane
  (``a = act`` shared, ``b = wgt[j]``), and the lanes' lockstep (every lane's ``o.valid`` the
  same in every cycle: the class docstring's claim, which k-induction also needs, since lanes
  out of step could otherwise stall forever in its unreachable start states). The lanes are
  one circuit, :class:`~hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`, built ``lanes`` times by one loop that wires
  lane ``j`` to ``wgt[j]`` and ``acc[j]`` and ANDs the handshakes; 2 lanes cover the lane
  circuit, the per-lane slicing at two indices and the AND, and one row at the default 16
  lanes checks the last lane's wiring (``check=15``) and the lockstep of all 16.

Configurations: ``pipeline`` 0 and the default 2 (``pipeline`` 1 is the default's circuit
without the register in front of the multiplier: not a row of its own), except ``10+1 or
1+10`` at 0 only (31 to 43 s at 0, 57 s at 2). ``fp16_pcu`` at 2 lanes, and at its default 16
lanes (``pipeline`` 0; 55 s at 2) the class/sign/exponent row of lane 15.

Reach (measured one proof at a time, wall clock, on 2 cores shared with other proofs, load
about 8): the full 11 x 11 significand product is beyond the solver: with all inputs free
the base case does not decide the first output beat in 120 s (the RTL's multiplier and the
specification's are different circuits with different normalizations in front of them, the
miter SAT solvers are known to blow up on). A restriction assumed on the stimulus is not enough
either: with the specification's full ``sig_a * sig_b`` and the low fraction bits assumed 0,
even ``0+0`` (powers of two) does not finish in 120 s, nor does a shift-and-add specification;
the restriction must be in the formula, so :func:`product` multiplies only the free bits
(``(sig_a >> (10 - fa)) * (sig_b >> (10 - fb)) << (20 - fa - fb)``, the same number under the
assumption). Then ``3+3`` proves in 14 to 36 s, ``4+4`` in 60 s, ``10+2`` in 37 s (``pipeline``
0). Neither PDR (``0+0``, framed) nor ABC's ``dprove`` (the full product) decides in 120 s.
Engine of every row: framed k-induction at the frame's depth (``latency + 2``; the two-beat
harness ``latency + 4``); the times of the rows are in :func:`proofs`.

Not proved here, and why: the significand bits of a product of two unrestricted significands
(the window and the restricted rows above are the reach; the random and directed simulation
against the golden model covers the rest); accumulation of nonzero products (the adder's
alignment, rounding and cancellation): the expected value needs a reference binary32 adder
with rounding, and its products bring back the multiplier; reductions longer than two beats;
stalls longer than one cycle (the stream proofs' part). ``kllm_column``'s weighted sum ("after
a codebook load, a one-index reduction gives ``y = fp16(fp32(codebook[entry]))``", at 4 bins of
1 input, ``pipeline`` 0): a harness with a model of the codebook load was tried and left out: a
bounded check reached 24 cycles from reset in 80 s (a reduction after a load answers after
about 25), ``dprove`` did not decide in 120 s.
"""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

from amaranth.hdl import Assert, Assume, Cat, Const, Module, Mux, Signal, signed

from qllm_cores.gen.registry import UNITS, resolve_params

from . import Proof
from .stream import UnitHarness, assume_input_hold
from .transaction import PATIENCE, TransactionHarness

__all__ = ["CANONICAL_NAN", "fp16_operand", "product", "significand_product", "single_beat",
           "MacHarness", "PcuHarness", "ZeroProductHarness", "proofs"]

#: The contract's one NaN result (quiet, positive, payload 0).
CANONICAL_NAN = 0x7FC0_0000
#: All significand bits free (the unrestricted operand).
ALL = 10


def _leading_zeros(sig):
    """Leading zeros of an 11-bit value, 0..10 (11 for 0): a priority chain, the highest set bit
    applied last."""
    count = Const(11, 4)
    for bit in range(11):
        count = Mux(sig[bit], 10 - bit, count)
    return count


def fp16_operand(m, bits, name):
    """IEEE 754 binary16 ``bits`` (bias 15, subnormals ``frac * 2^-24``) taken apart: ``sign``,
    the class (``zero``, ``inf``, ``nan``, ``finite``), and for a finite nonzero number
    ``value = sig * 2^(exp - 25)`` with ``sig`` normalized to bit 10 (a subnormal's significand
    shifted up by its leading zeros, its exponent lowered by as many)."""
    exp_field, frac = bits[10:15], bits[0:10]
    raw = Signal(11, name=f"spec_{name}_raw")
    lz = Signal(4, name=f"spec_{name}_lz")
    sig = Signal(11, name=f"spec_{name}_sig")
    exp = Signal(signed(7), name=f"spec_{name}_exp")
    m.d.comb += [
        raw.eq(Cat(frac, exp_field != 0)),
        lz.eq(_leading_zeros(raw)),
        sig.eq((raw << lz)[0:11]),
        exp.eq(Mux(exp_field == 0, 1, exp_field) - lz),
    ]
    return SimpleNamespace(sign=bits[15], sig=sig, exp=exp,
                           zero=(exp_field == 0) & (frac == 0),
                           inf=(exp_field == 31) & (frac == 0),
                           nan=(exp_field == 31) & (frac != 0),
                           finite=exp_field != 31)


def restricted(x, y, free):
    """Whether operands ``x`` and ``y`` keep the significand restriction ``free``: pairs
    ``(fx, fy)``, the fraction bits that may be set in each normalized significand (the
    ``10 - f`` low bits are 0); any pair may hold."""
    return Cat(((x.sig[0:ALL - fx] == 0) if fx < ALL else Const(1)) &
               ((y.sig[0:ALL - fy] == 0) if fy < ALL else Const(1))
               for fx, fy in free).any()



def significand_product(m, x, y, name, free=((ALL, ALL),)):
    """``P = x.sig * y.sig`` (22 bits, a signal ``spec_<name>_sig``) formed from the free
    significand bits only: under the restriction ``(fx, fy)`` of ``free`` that holds first,
    ``(x.sig >> (10 - fx)) * (y.sig >> (10 - fy)) << (20 - fx - fy)``, the same number."""
    sig = Signal(22, name=f"spec_{name}_sig")
    value = None
    for fx, fy in reversed(free):
        lx, ly = ALL - fx, ALL - fy
        term = (x.sig[lx:11] * y.sig[ly:11]) << (lx + ly)
        value = term if value is None else Mux(restricted(x, y, [(fx, fy)]), term, value)
    m.d.comb += sig.eq(value)
    return sig

def product(m, x, y, name, free=((ALL, ALL),)):
    """The binary32 ``(sign, exp, frac)`` of the exact product of finite nonzero operands ``x``
    and ``y`` (:func:`fp16_operand`): the 22-bit significand product ``P = x.sig * y.sig``
    (2^20 <= P < 2^22) times ``2^(x.exp + y.exp - 50)``, normalized: leading one at bit 21 or
    20, biased exponent ``x.exp + y.exp - 50 + 21 + 127`` or one less, the bits below the
    leading one the fraction (two or three zeros appended: exact, and never subnormal or
    overflowing, as the contract says).

    With a restriction ``free`` (:func:`restricted`, assumed on the stimulus) the product is
    formed from the free bits only: under ``(fx, fy)``, ``P = (x.sig >> (10 - fx)) *
    (y.sig >> (10 - fy)) << (20 - fx - fy)``, the same number (the first pair that holds is
    used)."""
    sig = significand_product(m, x, y, name, free)
    top = sig[21]
    exp = Signal(8, name=f"spec_{name}_exp")
    m.d.comb += exp.eq(x.exp + y.exp + 97 + top)
    frac = Mux(top, Cat(Const(0, 2), sig[0:21]), Cat(Const(0, 3), sig[0:20]))
    return x.sign ^ y.sign, exp, frac


def single_beat(m, a, b, name, free=((ALL, ALL),)):
    """The binary32 bits of ``fp32(+0.0 + fp32(a) * fp32(b))``, a reduction of one beat (the
    contract: ``first`` starts from +0.0): NaN (a NaN operand, ``0 * inf``) the canonical NaN;
    an infinite operand an infinity of the product's sign; a zero product +0.0 (round to
    nearest: +0 + -0 = +0); else the exact product (:func:`product`), as +0 + p = p."""
    x, y = fp16_operand(m, a, f"{name}_a"), fp16_operand(m, b, f"{name}_b")
    sign, exp, frac = product(m, x, y, name, free)
    nan = x.nan | y.nan | (x.inf & y.zero) | (x.zero & y.inf)
    bits = Signal(32, name=f"spec_{name}")
    m.d.comb += bits.eq(
        Mux(nan, CANONICAL_NAN,
            Mux(x.inf | y.inf, Cat(Const(0, 23), Const(0xFF, 8), sign),
                Mux(x.zero | y.zero, 0, Cat(frac, exp, sign)))))
    return bits


def window(m, a, b, acc, name):
    """The assertion about one single-beat result ``acc`` that needs no significand product:
    the NaN, infinity and zero results exactly; for a finite nonzero product its sign, its
    exponent ``x.exp + y.exp + 97`` or one more (the leading one of the significand product
    at bit 20 or 21), and the fraction's appended zeros (two, three at the lower exponent)."""
    x, y = fp16_operand(m, a, f"{name}_a"), fp16_operand(m, b, f"{name}_b")
    low = Signal(8, name=f"spec_{name}_exp_low")
    m.d.comb += low.eq(x.exp + y.exp + 97)
    sign = x.sign ^ y.sign
    exp = acc[23:31]
    with m.If(x.nan | y.nan | (x.inf & y.zero) | (x.zero & y.inf)):
        m.d.comb += Assert(acc == CANONICAL_NAN)
    with m.Elif(x.inf | y.inf):
        m.d.comb += Assert(acc == Cat(Const(0, 23), Const(0xFF, 8), sign))
    with m.Elif(x.zero | y.zero):
        m.d.comb += Assert(acc == 0)
    with m.Else():
        m.d.comb += [Assert(acc[31] == sign), Assert((exp == low) | (exp == low + 1)),
                     Assert(acc[0:2] == 0), Assert((exp != low) | ~acc[2])]


class MacHarness(TransactionHarness):
    """Single-beat reductions of ``fp16_mac``: each output is ``fp32(+0.0 + a*b)`` of the beat
    it answers; exactly (``exact``) with the significands restricted to ``free``, or the
    :func:`window` for all inputs."""

    def __init__(self, dut, *, exact=True, free=((ALL, ALL),), **options):
        self.exact = exact
        self.free = tuple(free)
        super().__init__(dut, **options)

    def operands(self, payload):
        """``(a, b)`` pairs of the beat."""
        return [(payload.a, payload.b)]

    def results(self, out):
        return [out.acc]

    def assume_input(self, m, payload):
        m.d.comb += Assume(payload.first & payload.last)
        if self.exact and self.free != ((ALL, ALL),):
            for n, (a, b) in enumerate(self.operands(payload)):
                x, y = fp16_operand(m, a, f"in{n}_a"), fp16_operand(m, b, f"in{n}_b")
                m.d.comb += Assume(restricted(x, y, self.free))

    #: The reference of one single-beat result and the window check (the ``acc="fp16"``
    #: harness swaps in its own).
    single_beat = staticmethod(single_beat)
    window = staticmethod(window)

    def check(self, m, record, out, beat):
        for n, ((a, b), acc) in enumerate(zip(self.operands(record), self.results(out))):
            if self.exact:
                m.d.comb += Assert(acc == self.single_beat(m, a, b, f"p{n}", self.free))
            else:
                self.window(m, a, b, acc, f"p{n}")


class PcuHarness(MacHarness):
    """:class:`MacHarness` on the lanes ``checked`` (default: all) of ``fp16_pcu``: lane ``j``
    is ``a = act``, ``b = wgt[j]``."""

    def __init__(self, dut, *, checked=None, **options):
        self.checked = range(dut.lanes) if checked is None else checked
        super().__init__(dut, **options)

    def operands(self, payload):
        return [(payload.act, payload.wgt[j]) for j in self.checked]

    def results(self, out):
        return [out.acc[j] for j in self.checked]

    def elaborate(self, platform):
        m = super().elaborate(platform)
        valid = [mac.o.valid for mac in self.dut.macs]
        m.d.comb += [Assert(lane == valid[0]) for lane in valid[1:]]   # the lanes in lockstep
        return m


class ZeroProductHarness(UnitHarness):
    """Two-beat reductions of ``fp16_mac`` in which one product is a zero (a zero operand times
    a finite one): the result is the other beat's single-beat result (:func:`single_beat`),
    the significands of both beats restricted to ``free`` (as :class:`MacHarness`).

    The contract's accumulation: after the first beat ``acc = fp32(+0.0 + p1)``, the single-beat
    result ``R1``; then ``fp32(R1 + p2)``. With ``p2 = +-0``: a finite nonzero ``R1 + 0 = R1``,
    ``+0 + (+-0) = +0`` (round to nearest), an infinity or a NaN stays one: ``R1``. With
    ``p1 = +-0``: ``R1 = +0`` and ``+0 + p2`` is the single-beat result ``R2``. So the first beat
    checks the loop's ``x + 0`` path with an accumulator that is not cleared, the second its
    ``0 + y`` path with an accumulator that is zero but not ``first``.

    Framed, for k-induction (as :class:`~verif.formal.transaction.TransactionHarness`): one
    reduction in flight (no beat offered from its second beat's transfer until its result is
    taken), every wait (an idle input, including between the two beats, a stalled output) at most
    :data:`~verif.formal.transaction.PATIENCE` cycles; the result is asserted to come exactly
    ``latency`` cycles after the second beat, and never without one."""

    def __init__(self, dut, *, free=((ALL, ALL),), framed=True):
        if not framed:
            raise ValueError("the two-beat harness is framed only")
        self.free = tuple(free)
        super().__init__(dut)

    def induction_depth(self, slack=0):
        """The longest life of a reduction: an idle cycle before each beat, the two beats, the
        latency and a stall (a deeper induction is no less sound)."""
        return self.dut.latency + 1 + 3 * PATIENCE + slack

    def assume_operands(self, m, x, y):
        """The restriction of an input beat's operands (:func:`fp16_operand`): the
        significands' ``free`` bits."""
        if self.free != ((ALL, ALL),):
            m.d.comb += Assume(restricted(x, y, self.free))

    def expected(self, m, records, first_zero):
        """The contract's result: the single-beat result (:func:`single_beat`) of the beat
        whose product is not the zero one (the second if ``first_zero``). A subclass gives
        another reading's."""
        return Mux(first_zero, single_beat(m, records[1].a, records[1].b, "second", self.free),
                   single_beat(m, records[0].a, records[0].b, "first", self.free))

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        assume_input_hold(m, dut, self.ports)
        beat = dut.i.payload
        phase = Signal(name="phase")            # 1: the first beat is taken
        pending = Signal(name="pending")        # the second beat is taken, its result not
        records = [Signal(beat.shape(), name=f"record{n}") for n in (1, 2)]
        age = Signal(range(dut.latency + 1), name="age")

        def zero_product(payload, name):
            x = fp16_operand(m, payload.a, f"{name}_a")
            y = fp16_operand(m, payload.b, f"{name}_b")
            return x, y, (x.zero & y.finite) | (y.zero & x.finite)

        with m.If(dut.i.valid):
            m.d.comb += [Assume(~pending), Assume(beat.first == ~phase),
                         Assume(beat.last == phase)]
            x, y, zero = zero_product(beat, "in")
            self.assume_operands(m, x, y)
            with m.If(phase):
                m.d.comb += Assume(zero_product(records[0], "in_first")[2] | zero)
        push = dut.i.valid & dut.i.ready
        taken = dut.o.valid & dut.o.ready
        with m.If(push):
            m.d.sync += phase.eq(~phase)
            with m.If(~phase):
                m.d.sync += records[0].eq(beat)
            with m.Else():
                m.d.sync += [pending.eq(1), records[1].eq(beat)]
        with m.If(taken):
            m.d.sync += pending.eq(0)
        m.d.sync += age.eq(Mux(push & phase, 1, Mux(age == dut.latency, age, age + 1)))
        m.d.comb += Assert(~(phase & pending))      # the harness's own invariant
        with m.If(dut.o.valid):
            m.d.comb += Assert(pending)
            with m.If(pending):
                m.d.comb += Assert(age == dut.latency)
                first_zero = zero_product(records[0], "first")[2]
                expected = Signal(len(dut.o.payload.acc), name="spec_acc")
                m.d.comb += [
                    expected.eq(self.expected(m, records, first_zero)),
                    Assert(dut.o.payload.acc == expected),
                ]
        for name, waiting in (("stall", dut.o.valid & ~dut.o.ready),
                              ("idle", ~dut.i.valid & ~pending)):
            cycles = Signal(range(PATIENCE + 2), name=f"{name}_cycles")
            m.d.sync += cycles.eq(Mux(waiting, cycles + 1, 0))
            m.d.comb += Assume(~waiting | (cycles < PATIENCE))
        return m


#: Property names of the rows.
WINDOW = "acc = a*b class/sign/exponent"
EXACT = "acc = a*b"
ZERO = "zero product adds nothing"
#: The significand restrictions of the exact rows (see the module docstring).
POWER_OF_TWO = ((ALL, 0), (0, ALL))
ONE_AND_A_HALF = ((ALL, 1), (1, ALL))
THREE_BITS = ((3, 3),)


def _label(free):
    return ",frac=" + " or ".join(f"{fx}+{fy}" for fx, fy in free)


def _row(unit, overrides, prop, harness, label="", **options):
    """One framed k-induction row at the registry's defaults and ``overrides``."""
    _, params = resolve_params(unit, None, overrides)
    build = partial(harness, framed=True, **options)
    depth = build(UNITS[unit].build(params)).induction_depth()
    configuration = ",".join(f"{key}={value}" for key, value in overrides.items()) + label
    return Proof(unit, configuration, prop, build, params, "kind", depth)


def proofs():
    """The rows, framed k-induction, with their times (two runs, one proof at a time, wall
    clock, 2 cores at a load of about 8 from other proofs):

    * ``fp16_mac``, ``pipeline`` 0 (k = 4; the two-beat row k = 6): class/sign/exponent
      8-10 s; exact ``10+0 or 0+10`` 10 s, ``3+3`` 26-33 s, ``10+1 or 1+10`` 32-43 s; zero
      product 17-26 s.
    * ``fp16_mac``, ``pipeline`` 2 (k = 6; k = 8): class/sign/exponent 7-10 s; exact
      ``10+0 or 0+10`` 6-13 s, ``3+3`` 14-25 s; zero product 20-26 s.
    * ``fp16_pcu``, 2 lanes: ``pipeline`` 0 (k = 4) class/sign/exponent 10-12 s, exact
      ``10+0 or 0+10`` 17-18 s; ``pipeline`` 2 (k = 6) 14-15 s and 20-26 s. 16 lanes,
      ``pipeline`` 0, lane 15 and the lockstep: 28-30 s."""
    default = UNITS["fp16_mac"].defaults["pipeline"]
    rows = []
    for pipeline in dict.fromkeys((0, default)):
        mac = {"pipeline": pipeline}
        rows += [
            _row("fp16_mac", mac, WINDOW, MacHarness, exact=False),
            _row("fp16_mac", mac, EXACT, MacHarness, _label(POWER_OF_TWO), free=POWER_OF_TWO),
            _row("fp16_mac", mac, EXACT, MacHarness, _label(THREE_BITS), free=THREE_BITS),
        ]
        if pipeline == 0:
            rows.append(_row("fp16_mac", mac, EXACT, MacHarness, _label(ONE_AND_A_HALF),
                             free=ONE_AND_A_HALF))
        rows.append(_row("fp16_mac", mac, ZERO, ZeroProductHarness, _label(POWER_OF_TWO),
                         free=POWER_OF_TWO))
    for pipeline in dict.fromkeys((0, UNITS["fp16_pcu"].defaults["pipeline"])):
        pcu = {"lanes": 2, "pipeline": pipeline}
        rows += [
            _row("fp16_pcu", pcu, WINDOW, PcuHarness, exact=False),
            _row("fp16_pcu", pcu, EXACT, PcuHarness, _label(POWER_OF_TWO), free=POWER_OF_TWO),
        ]
    wide = UNITS["fp16_pcu"].defaults["lanes"]
    rows.append(_row("fp16_pcu", {"lanes": wide, "pipeline": 0}, WINDOW, PcuHarness,
                     f",check={wide - 1}", exact=False, checked=[wide - 1]))
    return rows
