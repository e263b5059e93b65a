"""AccLLM DSP-packed multiplier (AccLLM section V-B3, Fig. 10(d); SPEC section 6)."""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_choice, check_int
from .stream_stage import StallPipeline, check_pipeline

__all__ = ["AccllmDspMul", "AccllmPlainMul", "MODES", "TARGETS", "CUTS", "MAX_PIPELINE",
           "DEFAULT_PIPELINE", "W_BITS", "W2_FIELDS", "W8_FIELDS", "packing", "product_range",
           "accumulation_limit", "rounding_constant", "dsp48e2_registers"]

MODES = ("w8", "w4", "w2")
TARGETS = ("generic", "xilinx", "ecp5", "ice40")
#: Weight width per mode.
W_BITS = {"w8": 8, "w4": 4, "w2": 2}
#: DSP48E2 port widths (UG579): A/D into the 27-bit pre-adder, B 18 bits, P 48 bits.
AD_BITS, B_BITS, P_BITS = 27, 18, 48
#: (output, shift, width) of the fields of the DSP48E2's P, bottom up.
W8_FIELDS = (("p1", 0, 18), ("p2", 18, 30))
W2_FIELDS = (("p11", 0, 10), ("p21", 10, 12), ("p12", 22, 10), ("p22", 32, 16))
W2_X_SHIFT, W2_W_SHIFT = 10, 22      # B = X1 + (X2 << 10), D = W2 << 22
W8_W_SHIFT = 18                      # A = W2 << 18
#: Signed hard multipliers of the fabric targets: operand width (both operands) and primitive.
FABRIC_MULTIPLIERS = {"ecp5": (18, "MULT18X18D"), "ice40": (16, "SB_MAC16")}
#: Register cuts in front of the output register, in the order ``pipeline`` adds them (a unit
#: built with ``pipeline = n`` has the first ``n``). ``product``: the multiplier's output (the
#: DSP48E2's M register); ``operands``: the multiplier's operands, after the pre-adder (AD and
#: B); ``inputs``: the raw inputs, in front of the pre-adder (A, B, D).
CUTS = ("product", "operands", "inputs")
MAX_PIPELINE = len(CUTS)
#: Registers on both sides of every multiplier and in front of the pre-adder: the DSP48E2's
#: full pipeline, and on ECP5 / iCE40 the registers the hard multiplier needs (see the class).
DEFAULT_PIPELINE = 3
#: Vendor primitives each target instantiates (a simulation needs a model of each).
PRIMITIVES = {"generic": (), "xilinx": ("DSP48E2",), "ecp5": (), "ice40": ()}
#: Area targets each target can be synthesized for (the DSP48E2 exists only on xilinx).
SYNTH_TARGETS = {"xilinx": ("xilinx",)}

#: DSP48E2 outputs the packed multiplier leaves unused (cascades, flags), with their widths.
DSP48E2_UNUSED_OUTPUTS = {"ACOUT": 30, "BCOUT": 18, "CARRYCASCOUT": 1, "CARRYOUT": 4,
                          "MULTSIGNOUT": 1, "OVERFLOW": 1, "PATTERNBDETECT": 1,
                          "PATTERNDETECT": 1, "PCOUT": 48, "UNDERFLOW": 1, "XOROUT": 8}
# DSP48E2 control words (UG579 tables 2-4..2-9): INMODE = D + A2 into the pre-adder, B2 into
# the multiplier; OPMODE = {W[8:7], Z[6:4], Y[3:2], X[1:0]}.
INMODE_D_PLUS_A2 = 0b00100
OPMODE_X_Y_M = 0b01_01
OPMODE_Z = {"0": 0b000, "P": 0b010, "C": 0b011}
OPMODE_W = {"0": 0b00, "P": 0b01, "RND": 0b10, "C": 0b11}


def _opmode(w, z):
    return (OPMODE_W[w] << 7) | (OPMODE_Z[z] << 4) | OPMODE_X_Y_M


def dsp48e2_registers(pipeline):
    """Register attributes of the DSP48E2 for a ``pipeline`` depth (0..3).

    PREG is always used (P holds the output beat, and the accumulation); ``product`` adds MREG,
    ``operands`` ADREG and BREG = 1, ``inputs`` AREG = DREG = 1 and BREG = 2 (B's second
    register lines it up with A + D). CREG and OPMODEREG are used from depth 1 on (C and OPMODE
    then enter the DSP one stage before P, like M); at depth 0 they are combinational.
    """
    cuts = CUTS[:check_pipeline(pipeline, max_value=MAX_PIPELINE)]
    areg = int("inputs" in cuts)
    breg = int("operands" in cuts) + int("inputs" in cuts)
    control = int(bool(cuts))
    return {"AREG": areg, "ACASCREG": areg, "BREG": breg, "BCASCREG": breg, "DREG": areg,
            "ADREG": int("operands" in cuts), "MREG": int("product" in cuts), "PREG": 1,
            "CREG": control, "OPMODEREG": control}


def _kept_register(m, pipe, value, name):
    """``value`` registered at ``pipe``'s clock enable, with the Verilog attribute ``keep`` (no
    bit is trimmed by synthesis)."""
    register = Signal(value.shape(), name=name, reset_less=True, attrs={"keep": 1})
    with m.If(pipe.ce):
        m.d.sync += register.eq(value)
    return register


def product_range(x_bits, w_bits, x_signed):
    """Return ``(lo, hi)``, the extreme products of an ``x_bits`` activation and a signed
    ``w_bits`` weight."""
    x_lo, x_hi = ((-(1 << (x_bits - 1)), (1 << (x_bits - 1)) - 1) if x_signed
                  else (0, (1 << x_bits) - 1))
    w_lo, w_hi = -(1 << (w_bits - 1)), (1 << (w_bits - 1)) - 1
    corners = [x * w for x in (x_lo, x_hi) for w in (w_lo, w_hi)]
    return min(corners), max(corners)


def signed_width(lo, hi):
    """Smallest signed width holding every integer in ``lo..hi``."""
    width = 1
    while lo < -(1 << (width - 1)) or hi > (1 << (width - 1)) - 1:
        width += 1
    return width


def _field_depth(width, lo, hi):
    """Largest N for which N products in ``lo..hi`` (lo < 0 < hi) sum inside ``width`` bits."""
    return min(((1 << (width - 1)) - 1) // hi, (1 << (width - 1)) // -lo)


def packing(mode, target, x_bits=8, x_signed=True):
    """Return the fields ``((output, shift, width), ...)`` of the packed product, bottom up.

    ``generic`` and ``xilinx`` use the DSP48E2 layout of SPEC section 6. ``ecp5`` and ``ice40``
    have an ``n x n`` signed multiplier (n = 18, 16) and no pre-adder; mode ``w4`` packs there as
    ``X * (W1 + (W2 << s))`` with the largest ``s`` that keeps the packed weight inside the
    signed port, ``s = n - w_bits - 1`` (13 on ECP5, 11 on iCE40); the lower field then holds
    ``s`` bits.

    Raises
    ------
    ValueError
        If the mode cannot be packed on the target without overlapping fields; the message
        names the limit.
    """
    if target in ("generic", "xilinx"):
        return W2_FIELDS if mode == "w2" else W8_FIELDS
    bits, primitive = FABRIC_MULTIPLIERS[target]
    if mode == "w2":
        raise ValueError(
            f"mode 'w2' does not pack on target {target!r}: its four products need the "
            f"DSP48E2's 27-bit pre-adder operand W1 + (W2 << 22) and a 48-bit product, and "
            f"{primitive} multiplies {bits} x {bits} bits (use target 'generic' or 'xilinx')")
    w_bits = W_BITS[mode]
    shift = bits - w_bits - 1
    lo, hi = product_range(x_bits, w_bits, x_signed)
    need = signed_width(lo, hi)
    if shift < need:
        raise ValueError(
            f"mode {mode!r} with x_bits={x_bits} does not pack on target {target!r}: "
            f"W1 + (W2 << s) fits {primitive}'s signed {bits}-bit port only for s <= {shift}, "
            f"and the {need}-bit product x*w1 needs s >= {need}")
    return (("p1", 0, shift), ("p2", shift, 2 * bits - shift))


def accumulation_limit(mode, target, x_bits=8, x_signed=True):
    """Largest number of packed products that may be summed before any field overflows.

    Summing packed words sums every field; the borrow-corrected extraction stays exact while
    each field's sum lies in its signed range, so the narrowest field decides:
    ``min over fields of min(floor((2^(w-1) - 1) / hi), floor(2^(w-1) / -lo))`` with ``lo, hi``
    from :func:`product_range`.
    """
    lo, hi = product_range(x_bits, W_BITS[mode], x_signed)
    return min(_field_depth(width, lo, hi)
               for _, _, width in packing(mode, target, x_bits, x_signed))


def rounding_constant(fields):
    """Half of every field but the top one: ``sum 2^(shift + width - 1)``.

    Adding it to P makes a plain slice of ``P + K`` equal to the borrow chain: bits
    ``[shift, shift + width)`` of ``P + K`` are the field ``sext(R mod 2^width)`` with its top
    bit inverted (top field: not inverted), where ``R = (R >> w) + R[w - 1]`` is the chain.
    The xilinx target adds K in the DSP48E2's post-adder (W = RND), so no fabric adder is left.
    """
    return sum(1 << (shift + width - 1) for _, shift, width in fields[:-1])


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

    # --- fabric targets: generic, ecp5, ice40 --------------------------------------------

    def _operands(self, m, p):
        """Return the multiplier's operands from payload ``p``: ``(A + D, B)`` (generic) or
        ``(W1 + (W2 << s), X)`` (ecp5, ice40), and the width of the packed word."""
        if self.target == "generic":
            a = Signal(signed(AD_BITS), name="a_port")
            d = Signal(signed(AD_BITS), name="d_port")
            ad = Signal(signed(AD_BITS), name="ad")   # the pre-adder: 27 bits, as in the DSP48E2
            if self.mode == "w2":
                b = Signal(signed(B_BITS + 1), name="b_port")   # room for X1 + (X2 << 10)
                m.d.comb += [a.eq(p.w1), d.eq(p.w2 << W2_W_SHIFT),
                             b.eq(p.x1 + (p.x2 << W2_X_SHIFT))]
            else:
                b = Signal(signed(B_BITS), name="b_port")
                m.d.comb += [a.eq(p.w2 << W8_W_SHIFT), d.eq(p.w1), b.eq(p.x)]
            m.d.comb += ad.eq(a + d)
            return ad, b, P_BITS
        bits, _ = FABRIC_MULTIPLIERS[self.target]
        shift = self.fields[1][1]
        packed_w = Signal(signed(bits), name="packed_w")   # W1 + (W2 << s): inside the port
        m.d.comb += packed_w.eq(p.w1 + (p.w2 << shift))
        return packed_w, p.x, 2 * bits

    @staticmethod
    def _mult18x18d(m, a, b, ce, name="mult"):
        """Return ``a * b`` (36 bits, signed) from an instantiated MULT18X18D whose input
        registers (clock CLK0, enable CE0 = ``ce``) hold the operands."""
        a18, b18 = Signal(signed(18), name=f"{name}_a"), Signal(signed(18), name=f"{name}_b")
        p = Signal(signed(36), name=f"{name}_p")
        m.d.comb += [a18.eq(a), b18.eq(b)]
        zero = Const(0, 1)
        ports = {f"i_A{k}": a18[k] for k in range(18)}
        ports.update({f"i_B{k}": b18[k] for k in range(18)})
        ports.update({f"i_C{k}": zero for k in range(18)})
        ports.update({f"o_P{k}": p[k] for k in range(36)})
        # Outputs not used here, bound so that every pin of the instance is connected (the
        # cascade inputs SRIA/SRIB stay open: nextpnr cannot route a constant to them, and the
        # model in verif/models leaves them out).
        unused = Signal(5 * 18 + 1, name=f"{name}_unused")
        outputs = [f"{port}{k}" for port in ("SROA", "SROB", "ROA", "ROB", "ROC")
                   for k in range(18)] + ["SIGNEDP"]
        ports.update({f"o_{pin}": unused[k] for k, pin in enumerate(outputs)})
        m.submodules[name] = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0", p_REG_INPUTA_CE="CE0", p_REG_INPUTA_RST="RST0",
            p_REG_INPUTB_CLK="CLK0", p_REG_INPUTB_CE="CE0", p_REG_INPUTB_RST="RST0",
            p_REG_INPUTC_CLK="NONE", p_REG_PIPELINE_CLK="NONE", p_REG_OUTPUT_CLK="NONE",
            p_GSR="DISABLED", p_RESETMODE="SYNC", p_MULT_BYPASS="DISABLED",
            i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1), i_SOURCEA=zero, i_SOURCEB=zero,
            i_CLK0=ClockSignal(), i_CLK1=zero, i_CLK2=zero, i_CLK3=zero,
            i_CE0=ce, i_CE1=zero, i_CE2=zero, i_CE3=zero,
            i_RST0=zero, i_RST1=zero, i_RST2=zero, i_RST3=zero,
            **ports)
        return p

    def _elaborate_fabric(self, m):
        accumulating = self.acc_depth > 1
        first, close = self._runs(m)
        pipe = self._pipe(m, close)
        depth = 0                                   # registers passed so far

        def cut(name, values):
            nonlocal depth
            if name not in self.cuts:
                return values
            depth += 1
            return {key: pipe.stage(value, name=f"{name}_{key}") for key, value in values.items()}

        def run_flags(values):
            return {key: values[key] for key in ("first", "last") if key in values}

        flags = {"first": first, "last": self.i.payload.last} if accumulating else {}
        values = cut("inputs", {"payload": self.i.payload, **flags})
        # Operand and product registers at the natural widths of the multiply, with nothing
        # between them and ``*``: the shape Yosys' ice40_dsp absorbs into the SB_MAC16.
        a, b, word_bits = self._operands(m, values["payload"])
        product = Signal((a * b).shape(), name="product")
        if self.target == "ecp5" and "operands" in self.cuts:
            # The operand registers are the MULT18X18D's own input registers (Yosys maps ``*``
            # to an unregistered MULT18X18D and absorbs no register on ECP5).
            depth += 1
            values = {key: pipe.stage(value, name=f"operands_{key}")
                      for key, value in run_flags(values).items()}
            m.d.comb += product.eq(self._mult18x18d(m, a, b, pipe.ce))
        else:
            values = cut("operands", {"a": a, "b": b, **run_flags(values)})
            m.d.comb += product.eq(values["a"] * values["b"])
        if self.target == "ice40" and "product" in self.cuts:
            # Yosys trims the product register's top bit when the fields never read it (it
            # copies the sign), and ice40_dsp then no longer absorbs the register into the
            # SB_MAC16 (it must cover the whole product): ``keep`` holds the full width.
            depth += 1
            flags = run_flags(values)
            values = {key: pipe.stage(value, name=f"product_{key}")
                      for key, value in flags.items()}
            values["product"] = _kept_register(m, pipe, product, "product_product")
        else:
            values = cut("product", {"product": product, **run_flags(values)})
        total = Signal(signed(word_bits), name="word")
        m.d.comb += total.eq(values["product"])
        if accumulating:
            acc = Signal(signed(word_bits), name="acc")    # the sum of the run so far
            word = total
            total = Signal(signed(word_bits), name="acc_total")
            m.d.comb += total.eq(Mux(values["first"], word, acc + word))
            # The beat at this point of the chain (registered ``depth`` times) moves on.
            here = pipe.beat[depth - 1] if depth else self.i.valid
            with m.If(pipe.ce & here):
                m.d.sync += acc.eq(total)
        rest = total
        extracted = {}
        for name, _shift, width in self.fields:                # the borrow chain, bottom up
            field = Signal(signed(width), name=f"field_{name}")
            m.d.comb += field.eq(rest[:width])
            extracted[name] = field
            above = Signal(signed(len(rest) - width + 1), name=f"rest_above_{name}")
            m.d.comb += above.eq((rest >> width) + rest[width - 1])
            rest = above
        outputs = {name: extracted[name][:self.sum_bits] for name in self.products}
        if accumulating:
            outputs["last"] = values["last"]
        for name, value in outputs.items():                     # the output register
            m.d.comb += getattr(self.o.payload, name).eq(pipe.stage(value, name=f"out_{name}"))
        assert depth + 1 == self.latency

    # --- xilinx: one DSP48E2 -------------------------------------------------------------

    def _b_port(self, m):
        """Return ``(b, flag, correction)`` for mode w2: the 18-bit B operand, the 1-bit flag
        selecting the C-port correction, and ``correction(w1, w2)`` giving its value."""
        p = self.i.payload
        x_bits = self.x_bits
        upper = Signal(signed(8) if self.x_signed else 8, name="b_upper")
        b = Signal(signed(B_BITS), name="b_port")
        m.d.comb += [upper.eq(p.x2),
                     b.eq(Cat(p.x1.as_unsigned(), Const(0, W2_X_SHIFT - x_bits), upper))]
        if self.x_signed:       # B = X1 + 2^x_bits + (X2 << 10) when X1 < 0
            flag = p.x1[x_bits - 1]
            error = 1 << x_bits
        elif x_bits == 8:       # B = X1 + (X2 << 10) - 2^18 when X2 >= 128
            flag = p.x2[7]
            error = -(1 << B_BITS)
        else:                   # always exact
            return b, None, None

        def correction(w1, w2):
            return (-(w1 + (w2 << W2_W_SHIFT)) * error) % (1 << P_BITS)
        return b, flag, correction

    def _elaborate_xilinx(self, m):
        p = self.i.payload
        accumulating = self.acc_depth > 1
        first, close = self._runs(m)
        pipe = self._pipe(m, close)
        ce = pipe.ce
        registers = dsp48e2_registers(self.pipeline)
        # C and OPMODE reach the post-adder together with M: through CREG / OPMODEREG one
        # stage before P (depth >= 1), so the fabric delays them by latency - 2 stages; at
        # depth 0 they are combinational from the input beat.
        ahead = max(self.latency - 2, 0)
        # The operands: wiring only (the A port is 30 bits, of which the pre-adder uses 27).
        a = Signal(signed(30), name="a_port")
        d = Signal(signed(AD_BITS), name="d_port")
        flag = None
        if self.mode == "w2":
            m.d.comb += [a.eq(p.w1), d.eq(p.w2 << W2_W_SHIFT)]
            b, flag, correction = self._b_port(m)
        else:
            b = Signal(signed(B_BITS), name="b_port")
            m.d.comb += [a.eq(p.w2 << W8_W_SHIFT), d.eq(p.w1), b.eq(p.x)]

        c = Signal(P_BITS, name="c_port")
        if flag is not None:
            key = pipe.delay(Cat(p.w1, p.w2, flag), ahead, name="c_key")
            with m.Switch(key):
                for w1 in range(-2, 2):
                    for w2 in range(-2, 2):
                        case = (w1 & 3) | ((w2 & 3) << 2) | (1 << 4)
                        with m.Case(case):
                            m.d.comb += c.eq(correction(w1, w2))
                with m.Default():
                    m.d.comb += c.eq(0)
            z_first, w_more = "C", "C"
        else:
            z_first, w_more = "0", "0"
        opmode = Signal(9, name="opmode")
        first_at_alu = pipe.delay(first, ahead, name="first") if accumulating else Const(1)
        m.d.comb += opmode.eq(Mux(first_at_alu, _opmode("RND", z_first), _opmode(w_more, "P")))
        # P loads only when a beat enters it: bubbles never touch an accumulating P.
        entering_p = pipe.beat[self.latency - 2] if self.latency >= 2 else self.i.valid

        product = Signal(signed(P_BITS), name="p_port")
        m.submodules.dsp = Instance(
            "DSP48E2",
            p_AMULTSEL="AD", p_BMULTSEL="B", p_PREADDINSEL="A", p_USE_MULT="MULTIPLY",
            p_USE_SIMD="ONE48", p_USE_PATTERN_DETECT="NO_PATDET",
            p_AREG=registers["AREG"], p_ACASCREG=registers["ACASCREG"],
            p_BREG=registers["BREG"], p_BCASCREG=registers["BCASCREG"],
            p_DREG=registers["DREG"], p_ADREG=registers["ADREG"], p_MREG=registers["MREG"],
            p_PREG=registers["PREG"], p_CREG=registers["CREG"] if flag is not None else 0,
            p_INMODEREG=0, p_OPMODEREG=registers["OPMODEREG"],
            p_ALUMODEREG=0, p_CARRYINREG=0, p_CARRYINSELREG=0,
            p_RND=Const(rounding_constant(self.fields), P_BITS),
            i_CLK=ClockSignal(),
            i_A=a, i_B=b, i_C=c, i_D=d,
            i_INMODE=Const(INMODE_D_PLUS_A2, 5), i_OPMODE=opmode, i_ALUMODE=Const(0, 4),
            i_CARRYIN=Const(0, 1), i_CARRYINSEL=Const(0, 3),
            i_ACIN=Const(0, 30), i_BCIN=Const(0, 18), i_PCIN=Const(0, 48),
            i_CARRYCASCIN=Const(0, 1), i_MULTSIGNIN=Const(0, 1),
            i_CEA1=Const(0, 1), i_CEA2=ce, i_CEB1=ce, i_CEB2=ce, i_CEC=ce, i_CED=ce,
            i_CEAD=ce, i_CEM=ce, i_CEP=ce & entering_p, i_CECTRL=ce, i_CEINMODE=Const(0, 1),
            i_CEALUMODE=Const(0, 1), i_CECARRYIN=Const(0, 1),
            i_RSTA=Const(0, 1), i_RSTB=Const(0, 1), i_RSTC=Const(0, 1), i_RSTD=Const(0, 1),
            i_RSTM=Const(0, 1), i_RSTP=Const(0, 1), i_RSTCTRL=Const(0, 1),
            i_RSTINMODE=Const(0, 1), i_RSTALUMODE=Const(0, 1), i_RSTALLCARRYIN=Const(0, 1),
            o_P=product,
            # Outputs not used here, connected so that every pin of the instance is bound.
            **{f"o_{pin}": Signal(width, name=f"dsp_{pin.lower()}_unused")
               for pin, width in DSP48E2_UNUSED_OUTPUTS.items()},
        )
        # P + RND: every field is a slice; fields below the top one have their sign inverted.
        top = self.fields[-1][0]
        for name, shift, width in self.fields:
            if name not in self.products:
                continue
            bits = product[shift:shift + self.sum_bits]
            if name != top and self.sum_bits == width:
                bits = Cat(bits[:-1], ~bits[-1])
            m.d.comb += getattr(self.o.payload, name).eq(bits)
        if accumulating:
            m.d.comb += self.o.payload.last.eq(pipe.delay(p.last, self.latency, name="last"))

    def elaborate(self, platform):
        m = Module()
        if self.target == "xilinx":
            self._elaborate_xilinx(m)
        else:
            self._elaborate_fabric(m)
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
                    self._mult18x18d(m, operands[x], operands[w], pipe.ce, name=f"mult_{name}"))
            else:
                product = operands[x] * operands[w]
            # One register per product at the natural width of its multiply, kept whole so that
            # Yosys' ice40_dsp can absorb it into the SB_MAC16 (see AccllmDspMul).
            m.d.comb += getattr(self.o.payload, name).eq(
                _kept_register(m, pipe, product, f"{name}_reg"))
        return m
