"""AccLLM DSP-packed multiplier (AccLLM section V-B3, Fig. 10(d); SPEC section 6)."""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_choice, check_int
from .stream_stage import output_register

__all__ = ["AccllmDspMul", "AccllmPlainMul", "MODES", "TARGETS", "LATENCY", "W_BITS", "W2_FIELDS", "W8_FIELDS",
           "packing", "product_range", "accumulation_limit", "rounding_constant"]

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
#: Cycles from a beat accepted on ``i`` to its result on ``o``, per target.
LATENCY = {"generic": 1, "xilinx": 4, "ecp5": 1, "ice40": 1}
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
    ``generic`` (latency 1)
        ``(A + D) * B`` with Amaranth's ``*``; the fields are read with a borrow chain,
        ``f = sext(R mod 2^w)``, ``R <- (R >> w) + R[w-1]``. In mode ``w2`` B gets 19 bits,
        because ``X1 + (X2 << 10)`` leaves the signed 18-bit range for some inputs.
    ``xilinx`` (latency 4)
        One instantiated DSP48E2 (AREG = DREG = ADREG = MREG = PREG = 1, BREG = 2): the
        pre-adder ``A + D`` inside the DSP (``AMULTSEL = "AD"``). The post-adder adds the
        rounding constant ``RND`` (:func:`rounding_constant`), after which every field is a
        slice of P: no fabric adder. In mode ``w2``, B is the concatenation
        ``{X2, 0.., X1 mod 2^x_bits}``, which always fits the 18-bit port; the difference to
        ``X1 + (X2 << 10)`` (``2^x_bits`` when X1 < 0; ``-2^18`` when an unsigned 8-bit X2 is
        >= 128) times ``A + D`` is cancelled through the C port, read from a 32-entry table of
        (W1, W2, flag). Backpressure stalls the DSP pipeline through its clock enables.
    ``ecp5``, ``ice40`` (latency 1)
        Mode ``w4`` only: ``X * (W1 + (W2 << s))`` in one MULT18X18D (s = 13) or SB_MAC16
        (s = 11, so x_bits <= 7); see :func:`packing`. Other modes raise ``ValueError``.

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

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``, ``w1``, ``w2`` (``w8``/``w4``) or ``x1``, ``x2``, ``w1``, ``w2`` (``w2``)
        [, ``last``].
    o : ``Out(stream.Signature(out_layout))``
        ``p1``, ``p2`` (``w8``/``w4``) or ``p11``, ``p22`` [, ``p12``, ``p21``] (``w2``)
        [, ``last``]; ``x_bits + w_bits`` bits signed, wider sums when accumulating.

    Latency: :data:`LATENCY` per target; one beat per cycle.

    Raises
    ------
    TypeError, ValueError
        If a parameter is invalid or the configuration cannot be packed; the message names the
        parameter and its limit.
    """

    def __init__(self, *, mode="w4", x_signed=True, x_bits=8, cross_products=False,
                 target="generic", acc_depth=1):
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
        self.latency = LATENCY[self.target]
        self.primitives = PRIMITIVES[self.target]
        self.synth_targets = SYNTH_TARGETS.get(self.target)
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

    # --- fabric targets: generic, ecp5, ice40 --------------------------------------------

    def _fabric_product(self, m):
        p = self.i.payload
        if self.target == "generic":
            a = Signal(signed(AD_BITS))
            d = Signal(signed(AD_BITS))
            ad = Signal(signed(AD_BITS))          # the pre-adder: 27 bits, as in the DSP48E2
            if self.mode == "w2":
                b = Signal(signed(B_BITS + 1))    # room for X1 + (X2 << 10)
                m.d.comb += [a.eq(p.w1), d.eq(p.w2 << W2_W_SHIFT),
                             b.eq(p.x1 + (p.x2 << W2_X_SHIFT))]
            else:
                b = Signal(signed(B_BITS))
                m.d.comb += [a.eq(p.w2 << W8_W_SHIFT), d.eq(p.w1), b.eq(p.x)]
            product = Signal(signed(P_BITS))
            m.d.comb += [ad.eq(a + d), product.eq(ad * b)]
            return product
        bits, _ = FABRIC_MULTIPLIERS[self.target]
        shift = self.fields[1][1]
        packed_w = Signal(signed(bits))           # W1 + (W2 << s): inside the signed port
        x = Signal(signed(bits))
        product = Signal(signed(2 * bits))
        m.d.comb += [packed_w.eq(p.w1 + (p.w2 << shift)), x.eq(p.x), product.eq(packed_w * x)]
        return product

    def _elaborate_fabric(self, m):
        first, close = self._runs(m)
        product = self._fabric_product(m)
        load = output_register(m, self.i, self.o, emit=close)
        total = product
        if self.acc_depth > 1:
            acc = Signal(signed(len(product)), name="acc")      # the sum of the run so far
            total = Signal(signed(len(product)), name="acc_total")
            m.d.comb += total.eq(Mux(first, product, acc + product))
            with m.If(load):
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
        out = Signal(self.out_layout, reset_less=True)
        m.d.comb += self.o.payload.eq(out)
        with m.If(load & close):
            m.d.sync += [getattr(out, name).eq(extracted[name][:self.sum_bits])
                         for name in self.products]
            if self.acc_depth > 1:
                m.d.sync += out.last.eq(self.i.payload.last)

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
        first, close = self._runs(m)
        stages = 4
        valid = [Signal(name=f"stage{k}_valid") for k in range(stages)]
        accumulating = self.acc_depth > 1
        # Without accumulation every beat closes its own run: no run flags in the pipeline.
        last_of_run = ([Signal(name=f"stage{k}_close") for k in range(stages)] if accumulating
                       else [Const(1)] * stages)
        first_of_run = ([Signal(name=f"stage{k}_first") for k in range(2)] if accumulating
                        else [Const(1)] * 2)
        ce = Signal(name="pipeline_ce")
        m.d.comb += [
            self.o.valid.eq(valid[-1] & last_of_run[-1]),
            ce.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(ce),
        ]
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

        # Fabric side of the pipeline: valid, run flags and the C-port correction inputs.
        last_payload = [Signal(name=f"stage{k}_last") for k in range(stages)] if accumulating \
            else None
        with m.If(ce):
            m.d.sync += valid[0].eq(self.i.valid)
            m.d.sync += [valid[k].eq(valid[k - 1]) for k in range(1, stages)]
            if accumulating:
                m.d.sync += [last_of_run[0].eq(close), first_of_run[0].eq(first),
                             first_of_run[1].eq(first_of_run[0])]
                m.d.sync += [last_of_run[k].eq(last_of_run[k - 1]) for k in range(1, stages)]
                m.d.sync += last_payload[0].eq(p.last)
                m.d.sync += [last_payload[k].eq(last_payload[k - 1]) for k in range(1, stages)]

        c = Signal(P_BITS, name="c_port")
        if flag is not None:
            key_bits = Cat(p.w1, p.w2, flag)
            key = [Signal(len(key_bits), name=f"stage{k}_c_key") for k in range(2)]
            with m.If(ce):
                m.d.sync += [key[0].eq(key_bits), key[1].eq(key[0])]
            with m.Switch(key[1]):
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
        m.d.comb += opmode.eq(Mux(first_of_run[1], _opmode("RND", z_first),
                                  _opmode(w_more, "P")))

        product = Signal(signed(P_BITS), name="p_port")
        m.submodules.dsp = Instance(
            "DSP48E2",
            p_AMULTSEL="AD", p_BMULTSEL="B", p_PREADDINSEL="A", p_USE_MULT="MULTIPLY",
            p_USE_SIMD="ONE48", p_USE_PATTERN_DETECT="NO_PATDET",
            p_AREG=1, p_ACASCREG=1, p_BREG=2, p_BCASCREG=2, p_DREG=1, p_ADREG=1, p_MREG=1,
            p_PREG=1, p_CREG=1 if flag is not None else 0, p_INMODEREG=0, p_OPMODEREG=1,
            p_ALUMODEREG=0, p_CARRYINREG=0, p_CARRYINSELREG=0,
            p_RND=Const(rounding_constant(self.fields), P_BITS),
            i_CLK=ClockSignal(),
            i_A=a, i_B=b, i_C=c, i_D=d,
            i_INMODE=Const(INMODE_D_PLUS_A2, 5), i_OPMODE=opmode, i_ALUMODE=Const(0, 4),
            i_CARRYIN=Const(0, 1), i_CARRYINSEL=Const(0, 3),
            i_ACIN=Const(0, 30), i_BCIN=Const(0, 18), i_PCIN=Const(0, 48),
            i_CARRYCASCIN=Const(0, 1), i_MULTSIGNIN=Const(0, 1),
            i_CEA1=Const(0, 1), i_CEA2=ce, i_CEB1=ce, i_CEB2=ce, i_CEC=ce, i_CED=ce,
            i_CEAD=ce, i_CEM=ce, i_CEP=ce & valid[2], i_CECTRL=ce, i_CEINMODE=Const(0, 1),
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
            m.d.comb += self.o.payload.last.eq(last_payload[-1])

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

    Parameters
    ----------
    mode, x_signed, x_bits, cross_products
        As for :class:`AccllmDspMul`.

    Latency: one cycle; one beat per cycle.
    """

    OPERANDS = {"p1": ("x", "w1"), "p2": ("x", "w2"), "p11": ("x1", "w1"), "p22": ("x2", "w2"),
                "p12": ("x1", "w2"), "p21": ("x2", "w1")}

    def __init__(self, *, mode="w4", x_signed=True, x_bits=8, cross_products=False):
        super().__init__(mode=mode, x_signed=x_signed, x_bits=x_bits,
                         cross_products=cross_products)

    def elaborate(self, platform):
        m = Module()
        load = output_register(m, self.i, self.o)
        with m.If(load):
            for name in self.products:
                x, w = self.OPERANDS[name]
                m.d.sync += getattr(self.o.payload, name).eq(
                    getattr(self.i.payload, x) * getattr(self.i.payload, w))
        return m
