"""AccLLM DSP-packed multiplier (AccLLM section V-B3, Fig. 10(d); contract section 6).

The unit, its parameters and its baseline :class:`AccllmPlainMul` are here; the packing
arithmetic in :mod:`hdl.accllm.dsp_mul.packing`, the circuits of the fabric targets in
:mod:`hdl.accllm.dsp_mul.fabric` and of the DSP48E2 in :mod:`hdl.accllm.dsp_mul.xilinx`.
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .fabric import kept_register, elaborate_fabric, mult18x18d
from .packing import (AD_BITS, B_BITS, CUTS, DEFAULT_PIPELINE,
                                     FABRIC_MULTIPLIERS, MAX_PIPELINE, MODES, P_BITS,
                                     W2_FIELDS, W2_W_SHIFT, W2_X_SHIFT, W8_FIELDS, W8_W_SHIFT,
                                     W_BITS, accumulation_limit, dsp48e2_registers, packing,
                                     product_range, rounding_constant, signed_width)
from .xilinx import (DSP48E2_UNUSED_OUTPUTS, INMODE_D_PLUS_A2, OPMODE_W,
                                    OPMODE_X_Y_M, OPMODE_Z, elaborate_xilinx)
from ...common.params import check_choice, check_int
from ...common.stream_stage import StallPipeline, check_pipeline

__all__ = ["AccllmDspMul", "AccllmPlainMul", "MODES", "TARGETS", "CUTS", "MAX_PIPELINE",
           "DEFAULT_PIPELINE", "W_BITS", "W2_FIELDS", "W8_FIELDS", "packing", "product_range",
           "accumulation_limit", "rounding_constant", "dsp48e2_registers",
           # Defined in the modules above, importable from here as before they moved.
           "AD_BITS", "B_BITS", "P_BITS", "W2_X_SHIFT", "W2_W_SHIFT", "W8_W_SHIFT",
           "FABRIC_MULTIPLIERS", "DSP48E2_UNUSED_OUTPUTS", "INMODE_D_PLUS_A2", "OPMODE_X_Y_M",
           "OPMODE_Z", "OPMODE_W"]

TARGETS = ("generic", "xilinx", "ecp5", "ice40")
#: Vendor primitives each target instantiates (a simulation needs a model of each).
PRIMITIVES = {"generic": (), "xilinx": ("DSP48E2",), "ecp5": (), "ice40": ()}
#: Area targets each target can be synthesized for (the DSP48E2 exists only on xilinx).
SYNTH_TARGETS = {"xilinx": ("xilinx",)}


class AccllmDspMul(wiring.Component):
    """Two (modes ``w8``, ``w4``) or four (mode ``w2``) products from one ``(A + D) * B``.

    AccLLM (section V-B3, Fig. 10(d)) packs low-bit operands into one DSP48E2 multiply
    ``P = (A + D) * B`` (A, D 27-bit, B 18-bit, P 48-bit, all signed):

    * ``w8`` / ``w4``: ``A = W2 << 18``, ``D = W1``, ``B = X``, so
      ``P = X*W1 + (X*W2 << 18)``;
    * ``w2``: ``A = W1``, ``D = W2 << 22``, ``B = X1 + (X2 << 10)``, so
      ``P = X1*W1 + (X2*W1 << 10) + (X1*W2 << 22) + (X2*W2 << 32)``.

    Signed fields borrow from the field above; every product is output exactly.

    Targets
    -------
    ``generic``
        ``(A + D) * B`` with Amaranth's ``*``; the fields are read with a borrow chain,
        ``f = sext(R mod 2^w)``, ``R <- (R >> w) + R[w-1]``. In mode ``w2`` B gets 19 bits,
        because ``X1 + (X2 << 10)`` leaves the signed 18-bit range for some inputs.
    ``xilinx``
        One instantiated DSP48E2 with the pre-adder ``A + D`` inside (``AMULTSEL = "AD"``).
        The post-adder adds the rounding constant ``RND`` (:func:`rounding_constant`), after
        which every field is a slice of P: no fabric adder. In mode ``w2``, B is the
        concatenation ``{X2, 0.., X1 mod 2^x_bits}``, which always fits the 18-bit port; the
        difference to ``X1 + (X2 << 10)`` (``2^x_bits`` when X1 < 0; ``-2^18`` when an unsigned
        8-bit X2 is >= 128) times ``A + D`` is cancelled through the C port, read from a
        32-entry table of (W1, W2, flag). Backpressure stalls the DSP pipeline through its
        clock enables.
    ``ecp5``, ``ice40``
        Mode ``w4`` only: ``X * (W1 + (W2 << s))`` in one MULT18X18D (s = 13) or SB_MAC16
        (s = 11, so x_bits <= 7); see :func:`packing`. Other modes raise ``ValueError``.

    Pipeline
    --------
    ``pipeline`` (0..3, default 3) adds register cuts in front of the output register, in the
    order of :data:`CUTS`; the latency is ``1 + pipeline`` on every target:

    ======== ============================================ =====================================
    pipeline fabric targets (generic, ecp5, ice40)        xilinx (:func:`dsp48e2_registers`)
    ======== ============================================ =====================================
    0        output register only (today's circuit)       PREG (CREG, OPMODEREG combinational)
    1        + the product, right after the multiplier    + MREG, CREG, OPMODEREG
    2        + the multiplier's operands, after the       + ADREG, BREG = 1
             pre-adder (generic) / the packed weight
             ``W1 + (W2 << s)`` (ecp5, ice40)
    3        + the raw inputs, in front of the pre-adder  + AREG, DREG, BREG = 2 (full pipeline)
    ======== ============================================ =====================================

    The output register holds the fields (fabric: after the borrow chain and, with
    ``acc_depth`` > 1, the accumulator; xilinx: P itself). On ``ice40`` the operand and product
    registers (``pipeline`` >= 2) are the ones Yosys absorbs into the SB_MAC16 (A_REG, B_REG and
    the output register, TOPOUTPUT_SELECT = BOTOUTPUT_SELECT = 01, held through AHOLD / BHOLD /
    OHOLD; the product register is marked ``keep`` so that Yosys does not trim its sign-copy top
    bit, which would stop the absorption), so that nextpnr, which does not time the SB_MAC16's
    inside, leaves no combinational path through it. On ``ecp5`` Yosys maps ``*`` to an
    unregistered MULT18X18D and absorbs no register; from ``pipeline`` = 2 the unit therefore
    instantiates the MULT18X18D with its input registers holding the operands
    (``REG_INPUTA_CLK`` = ``REG_INPUTB_CLK`` = ``"CLK0"``, CE0 = the stage enable; simulation
    model ``verif/models/MULT18X18D.v``), and the product register stays in fabric right after
    it: nextpnr times that path through the multiplier (fabric registers on both sides of an
    unregistered MULT18X18D stop at about 145 MHz). Such a design synthesizes for ECP5 only
    (``synth_targets``). On ``xilinx`` the fabric holds only the valid chain and, in mode
    ``w2``, the C-port table key (``pipeline - 1`` stages of 5 bits from depth 2 on).

    Accumulation (``acc_depth`` > 1)
    --------------------------------
    Packed words of a run are summed (in the DSP's P register on xilinx) and the fields are read
    once per run. The input payload gains ``last``; a run ends at a beat with ``last`` or at its
    ``acc_depth``-th beat, whichever comes first, and emits one output beat holding the sums,
    with ``last`` copied from that beat (0 marks a partial sum cut at the depth). ``acc_depth``
    must not exceed :func:`accumulation_limit` (the guard bits of the narrowest field).

    Parameters
    ----------
    mode : str
        ``"w8"``, ``"w4"`` or ``"w2"`` (weight width 8, 4 or 2 bits).
    x_signed : bool
        Activations signed (default) or unsigned (AccLLM's figure zero-extends X).
    x_bits : int
        Activation width, 2..8 (default 8). Each product is ``x_bits + w_bits`` bits, signed.
    cross_products : bool
        Mode ``w2`` only: also output ``p12 = x1*w2`` and ``p21 = x2*w1``.
    target : str
        ``"generic"``, ``"xilinx"``, ``"ecp5"`` or ``"ice40"``.
    acc_depth : int
        1 (default: every beat gives its products) up to :func:`accumulation_limit`.
    pipeline : int
        Register cuts, 0..3 (default 3; see above).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``, ``w1``, ``w2`` (``w8``/``w4``) or ``x1``, ``x2``, ``w1``, ``w2`` (``w2``)
        [, ``last``].
    o : ``Out(stream.Signature(out_layout))``
        ``p1``, ``p2`` (``w8``/``w4``) or ``p11``, ``p22`` [, ``p12``, ``p21``] (``w2``)
        [, ``last``]; ``x_bits + w_bits`` bits signed, wider sums when accumulating.
    latency : int
        ``1 + pipeline``: cycles from the transfer of an input beat to its output beat being
        valid (with ``acc_depth`` > 1: from the transfer of a run's closing beat to the run's
        sum), with ``o.ready`` held high.

    Latency and throughput: ``1 + pipeline`` cycles on every target; one beat per cycle
    sustained at every depth. Every register of a stage, inside the DSP48E2 as well, loads on
    one clock enable ``~o.valid | o.ready`` (``i.ready`` is that enable, combinational in
    ``o.ready``); ``o.valid`` and ``o.payload`` come from registers (on xilinx: P).

    Raises
    ------
    TypeError, ValueError
        If a parameter is invalid or the configuration cannot be packed; the message names the
        parameter and its limit.
    """

    def __init__(self, *, mode="w4", x_signed=True, x_bits=8, cross_products=False,
                 target="generic", acc_depth=1, pipeline=DEFAULT_PIPELINE):
        self.mode = check_choice("mode", mode, MODES)
        if not isinstance(x_signed, bool):
            raise TypeError(f"x_signed must be a bool, not {x_signed!r}")
        if not isinstance(cross_products, bool):
            raise TypeError(f"cross_products must be a bool, not {cross_products!r}")
        self.x_signed = x_signed
        # w2's 10-bit fields hold an x_bits + 2-bit product: x_bits <= 8 in every mode.
        self.x_bits = check_int("x_bits", x_bits, min_value=2, max_value=8)
        if cross_products and self.mode != "w2":
            raise ValueError(f"cross_products applies to mode 'w2' only, not {self.mode!r}")
        self.cross_products = cross_products
        self.target = check_choice("target", target, TARGETS)
        self.fields = packing(self.mode, self.target, self.x_bits, x_signed)
        self.acc_limit = accumulation_limit(self.mode, self.target, self.x_bits, x_signed)
        self.acc_depth = check_int("acc_depth", acc_depth, min_value=1)
        if self.acc_depth > self.acc_limit:
            raise ValueError(
                f"acc_depth must be in range 1..{self.acc_limit} (the accumulation limit of "
                f"mode {self.mode!r} on target {self.target!r} with x_bits={self.x_bits}, "
                f"x_signed={x_signed}: the guard bits of the narrowest field), not {acc_depth}")
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        #: The register cuts in front of the output register (the first ``pipeline`` of CUTS).
        self.cuts = CUTS[:self.pipeline]
        self.latency = 1 + self.pipeline
        self._set_primitives()
        self.w_bits = W_BITS[self.mode]
        self.p_bits = self.x_bits + self.w_bits
        lo, hi = product_range(self.x_bits, self.w_bits, x_signed)
        self.sum_bits = max(self.p_bits, signed_width(self.acc_depth * lo, self.acc_depth * hi))
        x_shape = signed(self.x_bits) if x_signed else self.x_bits
        w_shape = signed(self.w_bits)
        if self.mode == "w2":
            inputs = {"x1": x_shape, "x2": x_shape, "w1": w_shape, "w2": w_shape}
            outputs = ["p11", "p22"] + (["p12", "p21"] if cross_products else [])
        else:
            inputs = {"x": x_shape, "w1": w_shape, "w2": w_shape}
            outputs = ["p1", "p2"]
        outputs = {name: signed(self.sum_bits) for name in outputs}
        if self.acc_depth > 1:
            inputs["last"] = 1
            outputs["last"] = 1
        self.in_layout = data.StructLayout(inputs)
        self.out_layout = data.StructLayout(outputs)
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def _set_primitives(self):
        """Vendor primitives the Verilog instantiates and the area targets it allows: the
        DSP48E2 (xilinx), the MULT18X18D holding the operand registers (ecp5 with the
        ``operands`` cut)."""
        self.primitives = PRIMITIVES[self.target]
        self.synth_targets = SYNTH_TARGETS.get(self.target)
        if self.target == "ecp5" and "operands" in self.cuts:
            self.primitives = ("MULT18X18D",)
            self.synth_targets = ("ecp5",)

    @property
    def products(self):
        """Names of the product outputs, in payload order."""
        return [name for name in self.out_layout.members if name != "last"]

    # --- runs of accumulated beats -------------------------------------------------------

    def _runs(self, m):
        """Return ``(first, close)``: the beat on ``i`` starts / ends a run."""
        if self.acc_depth == 1:
            return Const(1), Const(1)
        count = Signal(range(self.acc_depth), name="run_count")
        first = Signal(name="run_first")
        close = Signal(name="run_close")
        m.d.comb += [
            first.eq(count == 0),
            close.eq(self.i.payload.last | (count == self.acc_depth - 1)),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += count.eq(Mux(close, 0, count + 1))
        return first, close

    def _pipe(self, m, close):
        """The valid chain and clock enable of every stage (accumulating: only a run's closing
        beat is emitted)."""
        return StallPipeline(m, self.i, self.o, latency=self.latency,
                             emit=close if self.acc_depth > 1 else None, name="mul")

    def elaborate(self, platform):
        m = Module()
        first, close = self._runs(m)
        pipe = self._pipe(m, close)
        if self.target == "xilinx":
            elaborate_xilinx(self, m, first, pipe)
        else:
            elaborate_fabric(self, m, first, pipe)
        return m


class AccllmPlainMul(AccllmDspMul):
    """Baseline for :class:`AccllmDspMul`: the same products from separate plain multipliers.

    Same interface as ``AccllmDspMul`` with ``acc_depth = 1`` (no accumulation): two
    (``w8``/``w4``) or two to four (``w2``, ``cross_products``) independent ``x * w`` products,
    each left to the synthesizer (one hard multiplier per product where it maps one). The
    resource table uses it to show what packing saves.

    ``pipeline`` takes the values of :class:`AccllmDspMul` and the cuts of the same names
    (:data:`CUTS`): the output register holds the products, right after the multipliers (the
    ``product`` cut is always there); ``operands`` (``pipeline`` >= 2) registers the inputs in
    front of the multipliers; there is no pre-adder, so ``inputs`` adds nothing. Latency 1 at
    ``pipeline`` 0 and 1, 2 at 2 and 3 (default); one beat per cycle.

    ``target`` builds the multipliers for the same hard multiplier as the packed unit, so that
    the two compare at the same register structure: ``ecp5`` with the ``operands`` cut
    instantiates one MULT18X18D per product whose input registers hold the operands (as the
    packed unit does); the other targets write ``*`` (on iCE40 Yosys absorbs both registers
    into each SB_MAC16 that a product maps to; on Xilinx ``synth_xilinx`` maps the multipliers
    and their registers). Every mode is accepted on every target (nothing is packed).

    Parameters
    ----------
    mode, x_signed, x_bits, cross_products, pipeline
        As for :class:`AccllmDspMul`.
    target : str
        ``"generic"`` (default), ``"xilinx"``, ``"ecp5"`` or ``"ice40"``.
    """

    OPERANDS = {"p1": ("x", "w1"), "p2": ("x", "w2"), "p11": ("x1", "w1"), "p22": ("x2", "w2"),
                "p12": ("x1", "w2"), "p21": ("x2", "w1")}

    def __init__(self, *, mode="w4", x_signed=True, x_bits=8, cross_products=False,
                 target="generic", pipeline=DEFAULT_PIPELINE):
        # Nothing is packed: the parent class checks the other parameters on the generic layout.
        super().__init__(mode=mode, x_signed=x_signed, x_bits=x_bits,
                         cross_products=cross_products, pipeline=pipeline)
        self.target = check_choice("target", target, TARGETS)
        self.latency = 1 + ("operands" in self.cuts)
        self.primitives, self.synth_targets = (), None
        if self.target == "ecp5" and "operands" in self.cuts:
            self.primitives, self.synth_targets = ("MULT18X18D",), ("ecp5",)

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, latency=self.latency, name="plain")
        hard_registers = "MULT18X18D" in self.primitives
        operands = {name: pipe.stage(getattr(self.i.payload, name), name=f"operand_{name}",
                                     enable="operands" in self.cuts and not hard_registers)
                    for name in self.in_layout.members}
        for name in self.products:
            x, w = self.OPERANDS[name]
            if hard_registers:    # the operand registers are the MULT18X18D's input registers
                product = Signal((operands[x] * operands[w]).shape(), name=f"{name}_product")
                m.d.comb += product.eq(
                    mult18x18d(m, operands[x], operands[w], pipe.ce, name=f"mult_{name}"))
            else:
                product = operands[x] * operands[w]
            # One register per product at the natural width of its multiply, kept whole so that
            # Yosys' ice40_dsp can absorb it into the SB_MAC16 (see AccllmDspMul).
            m.d.comb += getattr(self.o.payload, name).eq(
                kept_register(m, pipe, product, f"{name}_reg"))
        return m
