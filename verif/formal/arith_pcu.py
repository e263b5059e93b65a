# amaranth: UnusedElaboratable=no
"""Arithmetic property of ``p3_pcu`` (contract sections 5 and 9): every output beat is what the contract
formula gives for the input beat it answers, for every input the assumptions below allow, the
output stalled at will. The expected values are written here from the contract text (with the contract 5
decoders :func:`~verif.formal.arith_p3_oaken.activation` and
:func:`~verif.formal.arith_p3_oaken.weight`), never from the RTL.

``lanes = the contract formula`` (:class:`PcuLanesHarness`): every input beat is a single-beat reduction
(``first`` = ``last`` = 1), so its output beat holds that beat alone. For each checked PE ``j``:

* ``acc[j] = sum_i((-1)^s_i * M5_i * w_ji << (max(e_i, 1) - 1))`` over the 4 lanes: the
  activations ``act`` shared by every PE, PE ``j``'s weights ``wgt[j]`` (PE-major, weight ``i``
  paired with ``act[i]``), its special value ``sv_sel[j]`` and zero point ``zp[j]``; both
  activation formats and both weight formats, every field free per beat;
* ``nan[j]``: some lane holds the E4M3 NaN pattern (which adds 0);
* ``overflow[j] = 0``: a single beat never leaves the 32-bit range (below ``2^25``); ``acc`` is
  compared with the exact, unwrapped value, so the claim is checked too;
* with ``reuse`` 2, ``slot`` is the slot of the input beat (every slot value free per beat).

**Reach.** One lane (``lane``) has a free activation; the others have one whose term is 0
whatever its weight (``M5 = 0``, either sign, or NaN), their weights free, so the sum is the free
lane's term. Two free lanes are out of reach: at ``pipeline`` 0 (one PE) they took 106 s with the
lemmas below (one lane: 6 s); at ``pipeline`` 8 they did not finish in 200 s, not even with a
second lemma on the shifted terms (the compressor and accumulator summing two free terms is the
hard part). The configuration is shrunk to 1 PE (2 and 5 for the rows that check PE 1 and PE 4):
``P3Pcu`` generates the same PE circuit ``pes`` times (``for pe in range(P)``), and what differs
between PEs is only which slice of ``wgt``, ``sv_sel`` and ``zp`` it reads and which registered
copy of a shared value it uses (:func:`~hdl.common.stream_stage.distinct_copies`: copy ``k`` of a value
is held inverted when bit 0 of ``k`` is set; PE ``j`` uses group copy ``j // 4`` of the decoded
activations, registered from ``pipeline`` 1 on, and per-PE copy ``j % 4`` of the accumulators'
``first`` and ``slot`` and, from ``pipeline`` 2 on, of the Booth digits). The rows
``pes=2,pe=1`` (the second PE's slices and its inverted per-PE copies, at 0 and 8) and
``pes=5,pe=4`` (the inverted group copy of the second group, at 8) check those; the other PEs of
those rows are built but not checked (checking both PEs of ``pes=2`` in one row took 79 to
140 s at ``pipeline`` 8, one of them 9 to 18 s). Copies 2 and 3 differ from 0 and 1 only in
their reset value, which no beat reads.

Rows: ``pipeline`` 0 (no cut) and 8 (the default: every cut, and the output queue), one row per
free lane at ``reuse`` 1; lane 0 at ``reuse`` 2 (the second accumulator set and ``slot``: the
lanes' circuit does not depend on ``reuse``); lane 0 on PE 1 (both depths) and PE 4 (``pipeline``
8).

Engine: k-induction, framed (:class:`~verif.formal.transaction.TransactionHarness`: one beat in
flight, waits of at most one cycle, an output no sooner than the unit's latency), at the depth
the frame gives (``pipeline`` + 4), so a proof for every input at every time under that
environment; the stream proofs cover the unit under any environment. Three things make it
decide, each an assertion (proved with the property: a wrong one fails the proof, it cannot make
it pass) or a rewriting of the contract value:

* **the contract values at the input.** The contract product ``(-1)^s * M5 * w`` (0 for NaN) of the free
  lane on each checked PE, its shift ``max(e, 1) - 1`` and the NaN flag are computed from the
  input payload in the cycle the beat is taken, and held (``held_*``: under the frame they
  follow the record's single entry); the output beat is compared with
  ``held_product << held_shift``. Computed from the record at the output instead, the contract
  multiplier is a second copy, ``latency`` cycles later, that the solver must prove equal to
  the first.
* **Product lemma.** The unit's product of the free lane before the exponent shift (contract 5's
  "6-bit signed multipliers (sign + 5-bit mantissa by decoded weight)") equals the contract product:
  the register ``mul_prod_<lane>_<pe>`` while stage ``pcu_beat<k>`` holds the beat (``k``: the
  cuts ``broadcast`` and ``decode`` before it), or at ``pipeline`` 0 the combinational
  ``prod_<pe>_<lane>`` in the cycle the beat is taken. This cuts the proof in two: the Booth
  multiplier against ``M5 * w`` (no shift), then shift, compressor and accumulator against
  ``product << shift`` (no multiplier). Without the lemma and the held values, one free lane
  took 60 to 80 s at ``pipeline`` 0 and did not finish in 400 s at 8 (the multiplier inside the
  variable shift: with the exponent fixed, 21 s at 0). The lemma names RTL signals: they are
  looked up by name in the elaborated unit, and one not found (exactly once) is an error, never
  a skipped check. (The unit is elaborated once by the harness, which replaces that instance's
  ``elaborate`` by the fragment, so that the names are the netlist's signals.)
* **Queue invariant** (``pipeline`` >= 5, the output queue): ``produce - consume = level``
  modulo its 16 entries. Without it k-induction's step starts from read and write pointers out
  of step, and a stream of equal beats then reads stale entries that are the right answers for
  any number of cycles (the step failed at depth 12). ``LutQueue`` states the same relation
  itself when elaborated for a proof (:mod:`hdl.common.invariants`); it is asserted here too, so that
  the rows do not depend on it.

Measured one proof at a time on 2 cores shared with other proofs: at a load of 2.4 to 3, the
``pipeline`` 0 rows 2.5 to 4 s, the ``pipeline`` 8 rows 10 to 18 s; at a load of 4 to 8, 4.6 to
14 s and 23 to 55 s (the slowest: ``reuse`` 2 and ``pes=5,pe=4`` at ``pipeline`` 8).

Not covered: multi-beat reductions (accumulation across beats, the sticky flags, a real
overflow: the same limit as ``p3_pe``'s proof), two free lanes in one row, the copies 2 and 3
of each group and 16 PEs in one netlist (the hold proofs run ``p3_pcu`` at 4 PEs for the same
reason), ``pipeline`` 1 to 7 (the harness handles them; no rows), and the unframed environment
(longer stalls, several beats in flight: the stream proofs, hold and counting).
"""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

from amaranth.hdl import Assert, Fragment, Mux, Signal, signed

from qllm_cores.gen.registry import UNITS, resolve_params

from . import Proof
from .arith_p3_oaken import WAYS, activation, assume_one_free_lane, weight
from .transaction import TransactionHarness

__all__ = ["PcuLanesHarness", "proofs"]

PROPERTY = "lanes = the contract formula"
UNIT = "p3_pcu"
#: The contract product ``(-1)^s * M5 * w``: ``|31 * 16| < 2^11``.
PRODUCT = signed(12)
#: Cuts before the product register, in the unit's data flow (hdl/p3/pcu.py).
BEFORE_PRODUCT = frozenset({"broadcast", "decode"})


def _signals(fragment, names):
    """The signals of ``fragment`` (and below) named ``names``, each assigned in exactly one
    place (a lookup for the lemmas: a renamed signal is an error)."""
    found = {}

    def walk(fragment):
        for statements in fragment.statements.values():
            for statement in statements:
                for signal in statement._lhs_signals():
                    if signal.name in names:
                        found.setdefault(signal.name, {})[id(signal)] = signal
        for subfragment, _, _ in fragment.subfragments:
            walk(subfragment)

    walk(fragment)
    missing = [name for name in names if len(found.get(name, ())) != 1]
    if missing:
        raise LookupError(f"p3_pcu lemma signals not found once in the netlist: {missing} "
                          f"(update verif/formal/arith_pcu.py)")
    return {name: next(iter(signals.values())) for name, signals in found.items()}


class PcuLanesHarness(TransactionHarness):
    """Each single-beat reduction of ``p3_pcu`` gives, on each PE of ``checked`` (default: all),
    the contract 5 sum of its lanes, the ``nan`` flag, no ``overflow`` and (``reuse`` 2) the
    beat's ``slot``; only lane ``lane`` has an activation that can make its term nonzero.
    Framed only (the held the contract values follow the framed record's single entry)."""

    def __init__(self, dut, *, lane, checked=None, framed=True, **options):
        if not framed:
            raise ValueError("PcuLanesHarness is framed only (one beat in flight)")
        self.lane = lane
        self.checked = tuple(range(dut.pes) if checked is None else checked)
        if not set(self.checked) <= set(range(dut.pes)) or lane not in range(WAYS):
            raise ValueError(f"checked PEs {self.checked} / lane {lane} out of range")
        super().__init__(dut, framed=True, **options)

    def spec(self, m, payload):
        """From the contract: per checked PE the signed product of the free lane (0 for NaN), the
        lane's shift ``max(e, 1) - 1``, the beat's NaN flag."""
        sign, e, m5, nan = activation(payload.act[self.lane], payload.act_fmt)
        shift = Signal(range(15), name="spec_shift")
        m.d.comb += shift.eq(Mux(e == 0, 1, e) - 1)
        products = {}
        for pe in self.checked:
            group = SimpleNamespace(wgt_fmt=payload.wgt_fmt, sv_sel=payload.sv_sel[pe],
                                    zp=payload.zp[pe])
            product = m5 * weight(payload.wgt[pe][self.lane], group)
            products[pe] = Signal(PRODUCT, name=f"spec_product_{pe}")
            m.d.comb += products[pe].eq(Mux(nan, 0, Mux(sign, -product, product)))
        nans = [activation(payload.act[lane], payload.act_fmt)[3] for lane in range(WAYS)]
        return products, shift, nans[0] | nans[1] | nans[2] | nans[3]

    def elaborate(self, platform):
        dut = self.dut
        fragment = Fragment.get(dut.elaborate(platform), platform)
        dut.elaborate = lambda platform: fragment       # the same netlist for the lemmas
        self.held_products = {pe: Signal(PRODUCT, name=f"held_product_{pe}")
                              for pe in self.checked}
        self.held_shift = Signal(range(15), name="held_shift")
        self.held_nan = Signal(name="held_nan")
        m = super().elaborate(platform)
        push = dut.i.valid & dut.i.ready
        products, shift, nan = self.spec(m, dut.i.payload)
        with m.If(push):
            m.d.sync += [self.held_products[pe].eq(products[pe]) for pe in self.checked]
            m.d.sync += [self.held_shift.eq(shift), self.held_nan.eq(nan)]
        # The product lemma.
        if "multiply" in dut.cuts:
            stage = f"pcu_beat{len(BEFORE_PRODUCT & dut.cuts)}"
            names = {pe: f"mul_prod_{self.lane}_{pe}" for pe in self.checked}
            found = _signals(fragment, [stage, *names.values()])
            when, expected = found[stage], self.held_products
        else:
            names = {pe: f"prod_{pe}_{self.lane}" for pe in self.checked}
            found = _signals(fragment, list(names.values()))
            when, expected = push, products
        with m.If(when):
            m.d.comb += [Assert(found[names[pe]] == expected[pe]) for pe in self.checked]
        # The queue invariant.
        if "output" in dut.cuts:
            queue = _signals(fragment.find_subfragment("out_queue"),
                             ["produce", "consume", "level"])
            depth = dut.queue_depth
            m.d.comb += Assert((queue["produce"] + depth - queue["consume"]) % depth
                               == queue["level"] % depth)
        return m

    def assume_input(self, m, payload):
        assume_one_free_lane(m, payload, self.lane)

    def check(self, m, record, out, beat):
        for pe in self.checked:
            term = Signal(signed(32), name=f"spec_term_{pe}")   # the sum: the other terms are 0
            m.d.comb += [
                term.eq(self.held_products[pe] << self.held_shift),
                Assert(out.acc[pe] == term),
                Assert(out.nan[pe] == self.held_nan),
                Assert(out.overflow[pe] == 0),
            ]
        if self.dut.reuse > 1:
            m.d.comb += Assert(out.slot == record.slot)


def _row(overrides, *, lane, pe=None):
    """One framed k-induction row at the frame's depth: ``overrides`` of the unit's defaults,
    free lane ``lane``, PE ``pe`` checked alone (None: every PE)."""
    _, params = resolve_params(UNIT, None, overrides)
    checked = None if pe is None else (pe,)
    build = partial(PcuLanesHarness, lane=lane, checked=checked)
    depth = build(UNITS[UNIT].build(params)).induction_depth()
    configuration = ",".join(f"{key}={value}" for key, value in overrides.items())
    configuration += ("" if pe is None else f",pe={pe}") + f",lane={lane}"
    return Proof(UNIT, configuration, PROPERTY, build, params, "kind", depth)


def proofs():
    """One PE at ``pipeline`` 0 and the default 8: one row per free lane at ``reuse`` 1, lane 0
    at ``reuse`` 2; PE 1 of 2 at both depths and PE 4 of 5 at 8 (see the module docstring)."""
    default = UNITS[UNIT].defaults["pipeline"]
    rows = []
    for pipeline in (0, default):
        rows += [_row({"pes": 1, "reuse": 1, "pipeline": pipeline}, lane=lane)
                 for lane in range(WAYS)]
    for pipeline in (0, default):
        rows.append(_row({"pes": 1, "reuse": 2, "pipeline": pipeline}, lane=0))
    for pipeline in (0, default):
        rows.append(_row({"pes": 2, "reuse": 1, "pipeline": pipeline}, lane=0, pe=1))
    rows.append(_row({"pes": 5, "reuse": 1, "pipeline": default}, lane=0, pe=4))
    return rows
