# amaranth: UnusedElaboratable=no
"""Arithmetic properties of ``p3_pe`` (contract section 5) and ``oaken_decomposer`` (contract section 4):
every output beat is what the contract formula gives for the input beat it answers, for every input
the assumptions below allow, the output stalled at will. The expected values are written here
from the contract text, never from the RTL.

``lanes = the contract formula`` (:class:`PeLanesHarness`): every input beat is a single-beat reduction
(``first`` = ``last`` = 1), so its output beat holds that beat alone:

* ``acc = sum_i((-1)^s_i * M5_i * w_i << (max(e_i, 1) - 1))`` over the 4 lanes, for both
  activation formats (E4M3: sign bit 7, ``M5 = ((e != 0) << 4) | (m << 1)``; S0E4M4: unsigned,
  exponent bits [7:4], ``M5 = ((e != 0) << 4) | m``) and both weight formats (BitMoD: sign bit
  3, magnitude ``{0,1,2,3,4,6,8,12}`` half units by bits [2:0], code ``0b1000`` the special
  value ``+10, -10, +16, -16`` by ``sv_sel``; INT4: ``w = q - zp``), every field free per beat;
* ``nan``: some lane holds the E4M3 NaN pattern (``e = 15, m = 7``), which adds 0;
* ``overflow = 0``: ``|M5 * w| <= 31 * 16`` and the shift is at most 14, so a term is below
  ``2^23`` and four below ``2^25``: one beat never leaves the 32-bit range. ``acc`` is compared
  with the exact, unwrapped value, so the claim is checked too.

One lane (``lane``) has a free activation; the others have one whose term is 0 whatever its
weight (``M5 = 0``, either sign, or NaN), their weights free, so the sum is the free lane's term.
One row per lane covers every code pair and format in every lane, through the unit's compressor
and accumulator, and every combination of NaN lanes. Two free lanes are out of reach: the solver
does not prove the sum of two of the unit's 6-bit Booth products equal to the sum of two plain
products within 300 s (``pipeline`` 0, first output beat; one free lane: about 20 s).

``groups/shifts = the contract`` (:class:`DecomposerHarness`): on every checked lane, ``group``,
``side``, ``inlier`` and ``outlier`` follow contract section 4's inequalities. The thresholds are
assumed ordered ``t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o``, as the contract requires (a sanity
assertion checks that the three groups then partition the values). Misordered thresholds make the
the contract's groups overlap or leave gaps (``t_lo_i > t_hi_i``: no inner group), so the contract gives no
value to compare with; the unit then applies its own priority order (its docstring), which is not
checked here. The 16-lane default is checked 4 lanes per row (about 10 s a row; all 16 in one
row did not finish in 120 s).

Engine: k-induction, framed (:class:`~verif.formal.transaction.TransactionHarness`: one beat in
flight, waits of at most one cycle, an output no sooner than the unit's latency), at the depth
the frame gives, so a proof for every input at every time under that environment; the stream
proofs cover the unit under any environment. Two things made k-induction decide here: the proof
scripts map memories to logic (Yosys turns the BitMoD magnitude table into a ROM, whose contents
k-induction's step otherwise treats as free state) and the frame's latency assertion. PDR does
not decide these (``p3_pe`` at ``pipeline`` 0 with one lane, the 4-lane decomposer at 16 bits:
it must learn products and differences as clauses over bits).
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Assert, Assume, Const, Mux, Signal, signed, unsigned

from qllm_cores.gen.registry import UNITS, resolve_params
from qllm_cores.hdl.oaken.decomposer import CUT_ORDER

from . import Proof
from .transaction import TransactionHarness

__all__ = ["PeLanesHarness", "DecomposerHarness", "activation", "weight",
           "assume_one_free_lane", "proofs"]

PE_PROPERTY = "lanes = the contract formula"
DECOMPOSER_PROPERTY = "groups/shifts = the contract"

#: contract 5: ``act_fmt`` of FP8-E4M3 (1: S0E4M4), ``wgt_fmt`` of INT4 (0: BitMoD), lanes per beat.
E4M3, INT4, WAYS = 0, 1, 4
#: contract 5: BitMoD magnitude in half units by bits [2:0] of the code (0, 0.5, 1, ..., 6).
HALF_UNITS = (0, 1, 2, 3, 4, 6, 8, 12)
#: contract 5: the BitMoD value of code 0b1000 by ``sv_sel``, in half units (+5, -5, +8, -8).
SPECIAL = (10, -10, 16, -16)
#: contract 4: ``group`` codes.
MIDDLE, INNER, OUTER = 0, 1, 2
#: Extra k-induction depth (:meth:`~verif.formal.transaction.TransactionHarness.induction_depth`):
#: the decomposer's skid buffer (at ``pipeline`` = 2 k-induction fails at 5, proves at 7).
SLACK = {"oaken_decomposer": 2}
#: Decomposer lanes checked by one row (see the module docstring).
CHECKED_LANES = 4


def _lookup(index, table, shape):
    """``table[index]`` as a chain of multiplexers."""
    value = Const(table[0], shape)
    for n, entry in enumerate(table[1:], 1):
        value = Mux(index == n, Const(entry, shape), value)
    return value


def activation(code, fmt):
    """``(sign, e, M5, nan)`` of the FP8 ``code`` in the format ``fmt`` (contract 5)."""
    e4m3 = fmt == E4M3
    e = Mux(e4m3, code[3:7], code[4:8])
    mant = Mux(e4m3, code[0:3], code[0:4])
    m5 = Mux(e4m3, ((e != 0) << 4) | (mant << 1), ((e != 0) << 4) | mant)
    return e4m3 & code[7], e, m5, e4m3 & (e == 15) & (mant == 7)


def weight(code, beat):
    """The decoded weight ``w`` of the 4-bit ``code`` in ``beat``'s format (contract 5; BitMoD in
    half units)."""
    magnitude = _lookup(code[0:3], HALF_UNITS, unsigned(4))
    bitmod = Mux(code == 0b1000, _lookup(beat.sv_sel, SPECIAL, signed(6)),
                 Mux(code[3], -magnitude, magnitude))
    return Mux(beat.wgt_fmt == INT4, code - beat.zp, bitmod)


def assume_one_free_lane(m, payload, lane):
    """A single-beat reduction (``first`` = ``last`` = 1) whose activations but ``lane``'s make
    a zero term whatever their weights (``M5 = 0``, either sign, or NaN)."""
    m.d.comb += Assume(payload.first & payload.last)
    for other in (other for other in range(WAYS) if other != lane):
        _, _, m5, nan = activation(payload.act[other], payload.act_fmt)
        m.d.comb += Assume((m5 == 0) | nan)


class PeLanesHarness(TransactionHarness):
    """Each single-beat reduction of ``p3_pe`` gives the contract 5 sum of its lanes, its ``nan``
    flag and no ``overflow``; only lane ``lane`` has an activation that can make its term
    nonzero."""

    def __init__(self, dut, *, lane, **options):
        self.lane = lane
        super().__init__(dut, **options)

    def assume_input(self, m, payload):
        assume_one_free_lane(m, payload, self.lane)

    def check(self, m, record, out, beat):
        sign, e, m5, nan = activation(record.act[self.lane], record.act_fmt)
        shift = Signal(range(15), name="spec_shift")      # max(e, 1) - 1 <= 14
        m.d.comb += shift.eq(Mux(e == 0, 1, e) - 1)
        product = m5 * weight(record.wgt[self.lane], record)
        exact = Mux(nan, 0, Mux(sign, -product, product) << shift)
        term = Signal(exact.shape(), name="spec_term")   # the sum: the other terms are 0
        m.d.comb += term.eq(exact)
        nans = [activation(record.act[lane], record.act_fmt)[3] for lane in range(WAYS)]
        m.d.comb += [
            Assert(out.acc == term),
            Assert(out.nan == (nans[0] | nans[1] | nans[2] | nans[3])),
            Assert(out.overflow == 0),
        ]


class DecomposerHarness(TransactionHarness):
    """contract 4's group, side and group shift on the lanes ``lanes`` (default: all) of
    ``oaken_decomposer``, the thresholds ordered."""

    def __init__(self, dut, *, lanes=None, **options):
        self.lanes = range(dut.lanes) if lanes is None else lanes
        super().__init__(dut, **options)

    def assume_input(self, m, payload):
        m.d.comb += Assume((payload.t_lo_o <= payload.t_lo_i) & (payload.t_lo_i <= payload.t_hi_i)
                           & (payload.t_hi_i <= payload.t_hi_o))

    def check(self, m, record, out, beat):
        t_lo_o, t_lo_i, t_hi_i, t_hi_o = (record.t_lo_o, record.t_lo_i, record.t_hi_i,
                                          record.t_hi_o)
        for lane in self.lanes:
            x = record.x[lane]
            group, side = out.group[lane], out.side[lane]
            inlier, outlier = out.inlier[lane], out.outlier[lane]
            outer = (x < t_lo_o) | (x > t_hi_o)
            middle = ((t_lo_o <= x) & (x < t_lo_i)) | ((t_hi_i < x) & (x <= t_hi_o))
            inner = (t_lo_i <= x) & (x <= t_hi_i)
            m.d.comb += Assert(outer + middle + inner == 1)      # the groups partition x
            with m.If(outer):
                m.d.comb += [Assert(group == OUTER), Assert(side == (x > t_hi_o)),
                             Assert(outlier == Mux(x > t_hi_o, x - t_hi_o, x - t_lo_o)),
                             Assert(inlier == 0)]
            with m.If(middle):
                m.d.comb += [Assert(group == MIDDLE), Assert(side == (x > t_hi_i)),
                             Assert(inlier == Mux(x > t_hi_i, x - t_hi_i, x - t_lo_i)),
                             Assert(outlier == 0)]
            with m.If(inner):
                m.d.comb += [Assert(group == INNER), Assert(side == (x >= 0)),
                             Assert(outlier == x), Assert(inlier == 0)]


def _row(unit, overrides, prop, harness, label="", **options):
    """One framed k-induction row (see the module docstring)."""
    _, params = resolve_params(unit, None, overrides)
    build = partial(harness, framed=True, **options)
    depth = build(UNITS[unit].build(params)).induction_depth(SLACK.get(unit, 0))
    configuration = ",".join(f"{key}={value}" for key, value in overrides.items()) + label
    return Proof(unit, configuration, prop, build, params, "kind", depth)


def proofs():
    """``p3_pe`` at its default ``pipeline`` (3), one row per active lane, and at ``pipeline`` 0
    with lane 0 (the lanes are one circuit generated four times; the cuts are what the depth
    changes); ``oaken_decomposer`` at 4 lanes at every ``pipeline`` (0..2), and at its default
    (16 lanes, ``pipeline`` 1) 4 checked lanes per row."""
    pe_default = UNITS["p3_pe"].defaults["pipeline"]
    rows = [_row("p3_pe", {"pipeline": pe_default}, PE_PROPERTY, PeLanesHarness,
                 f",lane={lane}", lane=lane) for lane in range(WAYS)]
    rows.append(_row("p3_pe", {"pipeline": 0}, PE_PROPERTY, PeLanesHarness, ",lane=0", lane=0))
    rows += [_row("oaken_decomposer", {"lanes": 4, "pipeline": pipeline}, DECOMPOSER_PROPERTY,
                  DecomposerHarness) for pipeline in range(len(CUT_ORDER) + 1)]
    default = {key: UNITS["oaken_decomposer"].defaults[key] for key in ("lanes", "pipeline")}
    rows += [_row("oaken_decomposer", default, DECOMPOSER_PROPERTY, DecomposerHarness,
                  f",check={first}-{first + CHECKED_LANES - 1}",
                  lanes=range(first, first + CHECKED_LANES))
             for first in range(0, default["lanes"], CHECKED_LANES)]
    return rows
