# amaranth: UnusedElaboratable=no
"""Data properties of ``accllm_pe`` (contract section 10), its packed multiplier's baseline
``accllm_plain_mul`` (contract section 6) and ``accllm_sparse_selector`` (AccLLM Fig. 10(c)): every
output beat is what the contract (the selector: its documented contract) gives for the input beat it
answers, for every input the assumptions below allow, the output stalled at will. The expected
values are written here from the contract and the unit docs, never from the RTL.

``s1/s2 = products of one beat`` (:class:`PeProductsHarness`): every input beat is a single-beat
reduction (``first`` = ``last`` = 1), so its output beat holds that beat's two products alone,
exact, and ``overflow`` = 0 (``acc_bits`` >= the product width):

* ``w8`` (mode 0): ``s1 = x1*w1``, ``s2 = x1*w2``, the weights all 8 bits signed;
* ``w4`` (mode 1): the same with the low 4 bits of ``w1``/``w2`` signed, the bits above ignored;
  with ``kv4`` the low 4 bits are an unsigned code ``q`` and the weight is ``q - zp`` (-15..15);
* ``w2`` (mode 2): ``s1 = x1*w1``, ``s2 = x2*w2``, the low 2 bits of the weights signed.

Every field is free on every beat (the unused ones too: the contract says they are ignored) and the
mode is free per beat among 0..2 (3 is reserved: the contract gives it no value; the unit decodes
it as ``w8``, not checked). A row checks the beats of the modes it names (``check=``, default
all); beats of the other modes still come and go between them. The rows of one target together
check every mode, but for ``xilinx`` with signed activations in ``w8`` (below). ``acc_bits`` is
the least the unit takes (:func:`hdl.accllm.pe.pe.product_bits`), the accumulator's adders being
part of every check (at 32 bits the ``generic`` row at ``x_bits`` = 4 takes twice as long).

``products = x*w`` on ``accllm_plain_mul``: :class:`~verif.formal.arith_accllm.ProductsHarness`
as it is (the baseline is an :class:`~hdl.accllm.dsp_mul.dsp_mul.AccllmDspMul` with ``acc_depth`` = 1,
the same interface). Its ``xilinx`` target elaborates the same circuit as ``generic`` (plain
``*``; identical RTLIL), so ``generic`` stands for both; ``ecp5``/``ice40`` are not proved.

``x1/x2 = x[4g + idx]`` (:class:`SelectorHarness`): for every row ``r`` and group ``g``,
``x1[r][g] = x[4 g + idx1[r][g]]`` and ``x2[r][g] = x[4 g + idx2[r][g]]``, the value passed
unchanged, for any indices (``idx1 >= idx2`` included: the docs define them too).

Reach (measured one proof at a time on 2 cores shared with other engineers' proofs, at a load
of 3 to 9: the times below are of the last run of every row, at 3 to 5, and vary about twofold
with the load; the time grows with the width of the multipliers and the pipeline a proof must
unroll):

* ``accllm_pe``, ``generic``: every mode at ``x_bits`` = 4, ``pipeline`` 0 and 3 (17 to 36 s).
  At ``x_bits`` = 5 it proves in 33 s (``pipeline`` 0) and 43 s (3) at a load of 3, but 65 and
  100 s at 8, so the rows stay at 4 bits; 6 and 8 are not decided in 120 s. The unit has one
  multiplier per product whose x and weight are multiplexed by the mode; the contract's products
  are one per mode: the solver must prove the two equal.
* ``accllm_pe``, ``xilinx`` (the DSP48E2 model read into the proof, :class:`ModelProof`):

  - unsigned activations, every mode at ``x_bits`` = 3, ``pipeline`` 0 and 3 (10 to 12 s;
    ``w8`` beats alone at ``pipeline`` 3: 20 s at 4 bits, 68 s at 5);
  - ``w2`` beats at the full width (``x_bits`` = 8, with the B-port corrections of contract 6:
    signed ``X2 = -128`` with ``X1 < 0``; unsigned ``X2 >= 128``, which exists at 8 bits only),
    signed and unsigned, ``pipeline`` 0 and 3 (28 to 41 s);
  - signed ``w4`` beats (KV4 included: the zero point through the pre-adder, D - A) at
    ``x_bits`` = 3, ``pipeline`` 0 (9 s), and 4 at ``pipeline`` 3 (28 s; 85 s at 4 bits and
    ``pipeline`` 0 at a load of 8);
  - **signed ``w8`` beats are not proved**: not decided in 120 s even at ``x_bits`` = 2,
    ``pipeline`` 0 (k-induction or PDR, with the mode free or only ``w8`` offered; at 3 bits
    neither with the sign of ``x1`` fixed per row); with the mode tied to ``w8`` in the
    netlist, so that Yosys folds the DSP48E2's multiplexers as in ``accllm_dsp_mul``, PDR
    proves ``x_bits`` = 2 in 99 s (load 6), over the budget, and such a row would not change
    modes. A signed x, sign-extended into B, times a signed 8-bit weight, sign-extended
    through the pre-adder, is the product the solver cannot take apart in the 45-bit
    multiplier; ``accllm_dsp_mul``'s constant-mode rows prove that packing at 3 bits
    (:mod:`verif.formal.arith_accllm`); the PE's signed ``w8`` slices of P are checked by
    simulation only (the bench against the golden model).
* ``accllm_plain_mul``: ``w2`` with the cross products at the full width (4 s), ``w4`` at the
  full width (17 s), ``w8`` at ``x_bits`` = 5 (7 to 12 s; 6 bits: 67 s at a load of 8; 8 bits:
  not decided in 120 s), signed and unsigned.
* ``accllm_sparse_selector``: the defaults and the paper's block (16 groups, 1 row) whole, at
  both depths, and a reduced tile (4 rows of 4 groups, unsigned 4-bit) whole (1 to 5 s). The
  paper's tile (16 rows of 16 groups) is not decided in 120 s whole; one row proves in 8 s
  (20 s at a load of 8) and 4 rows in 113 s (load 8), so the tile has one row checked
  (``check=row15``, the farthest offsets in ``idx1``/``idx2``/``x1``/``x2``); its other rows are
  the same multiplexers at other offsets, which the reduced tile proves for every row.

Engine: k-induction, framed (:class:`~verif.formal.transaction.TransactionHarness`: one beat in
flight, waits of at most one cycle, an output no sooner than the unit's latency), at the depth
the frame gives: a proof for every input at every time under that environment; the stream proofs
cover the units under any environment. Not proved: reductions of several beats (the
accumulation across beats and the sticky ``overflow``; the single-beat check includes the
accumulator's adder and the clearing by ``first``), mode 3, the ``ecp5`` targets.
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Assert, Assume, Cat, Const, Mux

from qllm_cores.gen.registry import UNITS, resolve_params
from qllm_cores.hdl.accllm.pe.pe import product_bits

from . import Proof
from .arith_accllm import PROPERTY as PRODUCTS_PROPERTY
from .arith_accllm import ModelProof, ProductsHarness
from .transaction import TransactionHarness

__all__ = ["PeProductsHarness", "SelectorHarness", "pe_weights", "pe_row", "proofs"]

PE_PROPERTY = "s1/s2 = products of one beat"
SELECTOR_PROPERTY = "x1/x2 = x[4g + idx]"
#: contract 10: the ``mode`` codes (3 is reserved).
W8, W4, W2 = 0, 1, 2
MODE_NAMES = {W8: "w8", W4: "w4", W2: "w2"}
#: The selector's inputs per group (2:4: an index picks one of 4).
GROUP = 4


def _any(value, codes):
    """``value`` is one of ``codes``."""
    hit = Const(0, 1)
    for code in codes:
        hit = hit | (value == code)
    return hit


def pe_weights(beat, mode):
    """contract 10's weights ``(w1, w2)`` of ``beat`` in ``mode``: ``w8`` all 8 bits signed, ``w4``
    the low 4 bits signed (``kv4``: the unsigned code minus ``zp``, exact), ``w2`` the low 2 bits
    signed."""
    weights = []
    for w in (beat.w1, beat.w2):
        if mode == W8:
            weights.append(w.as_signed())
        elif mode == W2:
            weights.append(w[0:2].as_signed())
        else:
            code = Cat(w[0:4], Const(0, 1)).as_signed()          # 0..15
            zp = Cat(beat.zp, Const(0, 1)).as_signed()           # 0..15
            weights.append(Mux(beat.kv4, code - zp, w[0:4].as_signed()))
    return weights


class PeProductsHarness(TransactionHarness):
    """Each single-beat reduction (``first`` = ``last`` = 1) of ``accllm_pe`` in one of the
    modes ``modes`` gives the two products of its beat (contract 10) and no ``overflow``; every
    beat's mode is free among 0..2. ``vendor_models``: the Verilog models the unit needs, read
    by :class:`~verif.formal.arith_accllm.ModelProof` (``models`` stays empty)."""

    def __init__(self, dut, *, modes=(W8, W4, W2), **options):
        self.modes = tuple(modes)
        self.vendor_models = tuple(f"{name}.v" for name in dut.primitives)
        super().__init__(dut, **options)

    def assume_input(self, m, payload):
        m.d.comb += Assume(payload.first & payload.last & _any(payload.mode, (W8, W4, W2)))

    def check(self, m, record, out, beat):
        for mode in self.modes:
            w1, w2 = pe_weights(record, mode)
            x2 = record.x2 if mode == W2 else record.x1
            with m.If(record.mode == mode):
                m.d.comb += [
                    Assert(out.s1 == record.x1 * w1),
                    Assert(out.s2 == x2 * w2),
                    Assert(out.overflow == 0),
                ]


class SelectorHarness(TransactionHarness):
    """``x1[r][g] = x[4 g + idx1[r][g]]``, ``x2[r][g] = x[4 g + idx2[r][g]]`` on every group of
    the rows ``rows`` (default: all) of ``accllm_sparse_selector``, for any indices."""

    def __init__(self, dut, *, rows=None, **options):
        self.rows = range(dut.rows) if rows is None else rows
        super().__init__(dut, **options)

    def check(self, m, record, out, beat):
        for row in self.rows:
            for group in range(self.dut.groups):
                for name, index in (("x1", "idx1"), ("x2", "idx2")):
                    selected = getattr(out, name)[row][group]
                    idx = getattr(record, index)[row][group]
                    for k in range(GROUP):
                        with m.If(idx == k):
                            m.d.comb += Assert(selected == record.x[GROUP * group + k])


def _row(unit, overrides, prop, harness, label="", model=False, name=None, **options):
    """One framed k-induction row (``model``: a :class:`ModelProof`); its configuration is
    ``name`` (default: the overrides) and ``label``."""
    _, params = resolve_params(unit, None, overrides)
    build = partial(harness, framed=True, **options)
    depth = build(UNITS[unit].build(params)).induction_depth()
    if name is None:
        name = ",".join(f"{key}={value}" for key, value in overrides.items())
    return (ModelProof if model else Proof)(unit, name + label, prop, build, params, "kind",
                                            depth)


def pe_row(target, x_signed, x_bits, pipeline, modes=(W8, W4, W2)):
    """An ``accllm_pe`` row at the least ``acc_bits``, checking the beats of ``modes``."""
    overrides = {"target": target, "x_signed": x_signed, "x_bits": x_bits,
                 "acc_bits": product_bits(x_bits, x_signed), "pipeline": pipeline}
    name = (f"{target},{'signed' if x_signed else 'unsigned'},x_bits={x_bits},"
            f"acc_bits={overrides['acc_bits']},pipeline={pipeline}")
    label = "" if len(modes) == 3 else ",check=" + "+".join(MODE_NAMES[m] for m in modes)
    return _row("accllm_pe", overrides, PE_PROPERTY, PeProductsHarness, label,
                model=target == "xilinx", name=name, modes=modes)


#: ``accllm_pe`` rows: (target, x_signed, x_bits, pipeline, modes checked); see the docstring.
PE_ROWS = (("generic", True, 4, 0, (W8, W4, W2)), ("generic", True, 4, 3, (W8, W4, W2)),
           ("generic", False, 4, 3, (W8, W4, W2)),
           ("xilinx", False, 3, 0, (W8, W4, W2)), ("xilinx", False, 3, 3, (W8, W4, W2)),
           ("xilinx", True, 8, 0, (W2,)), ("xilinx", True, 8, 3, (W2,)),
           ("xilinx", False, 8, 0, (W2,)), ("xilinx", False, 8, 3, (W2,)),
           ("xilinx", True, 3, 0, (W4,)), ("xilinx", True, 4, 3, (W4,)))
#: ``accllm_plain_mul`` rows (``generic``): overrides of the registry's defaults.
PLAIN_ROWS = ({"mode": "w2", "cross_products": True, "pipeline": 0},
              {"mode": "w2", "cross_products": True, "pipeline": 3},
              {"mode": "w2", "cross_products": True, "x_signed": False, "pipeline": 3},
              {"mode": "w4", "pipeline": 0}, {"mode": "w4", "pipeline": 3},
              {"mode": "w8", "x_bits": 5, "pipeline": 0},
              {"mode": "w8", "x_bits": 5, "pipeline": 3},
              {"mode": "w8", "x_bits": 5, "x_signed": False, "pipeline": 3})
#: ``accllm_sparse_selector`` rows: (overrides, rows checked or None for all).
SELECTOR_ROWS = (({"pipeline": 0}, None), ({"pipeline": 1}, None),
                 ({"groups": 16, "rows": 1, "pipeline": 0}, None),
                 ({"groups": 16, "rows": 1, "pipeline": 1}, None),
                 ({"groups": 4, "rows": 4, "x_bits": 4, "x_signed": False, "pipeline": 0}, None),
                 ({"groups": 4, "rows": 4, "x_bits": 4, "x_signed": False, "pipeline": 1}, None),
                 ({"groups": 16, "rows": 16, "pipeline": 0}, (15,)))


def proofs():
    """The rows of the table: :data:`PE_ROWS`, :data:`PLAIN_ROWS`, :data:`SELECTOR_ROWS`."""
    rows = [pe_row(*row) for row in PE_ROWS]
    rows += [_row("accllm_plain_mul", overrides, PRODUCTS_PROPERTY, ProductsHarness)
             for overrides in PLAIN_ROWS]
    rows += [_row("accllm_sparse_selector", overrides, SELECTOR_PROPERTY, SelectorHarness,
                  "" if checked is None else ",check=" + "+".join(f"row{r}" for r in checked),
                  rows=checked)
             for overrides, checked in SELECTOR_ROWS]
    return rows
