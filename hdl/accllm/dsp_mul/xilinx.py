"""The ``xilinx`` target of the AccLLM DSP-packed multiplier
(:class:`hdl.accllm.dsp_mul.dsp_mul.AccllmDspMul`): one instantiated DSP48E2 with the pre-adder, the
multiplier, the register cuts (:func:`~hdl.accllm.dsp_mul.packing.dsp48e2_registers`) and the
post-adder's rounding constant inside, and in mode ``w2`` the C-port correction table."""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Mux, Signal, signed

from .packing import (AD_BITS, B_BITS, P_BITS, W2_W_SHIFT, W2_X_SHIFT,
                                     W8_W_SHIFT, dsp48e2_registers, rounding_constant)

__all__ = ["elaborate_xilinx", "DSP48E2_UNUSED_OUTPUTS", "INMODE_D_PLUS_A2", "OPMODE_X_Y_M",
           "OPMODE_Z", "OPMODE_W"]

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


def dsp_opmode(w, z):
    return (OPMODE_W[w] << 7) | (OPMODE_Z[z] << 4) | OPMODE_X_Y_M


def dsp_b_port(unit, m):
    """Return ``(b, flag, correction)`` for mode w2: the 18-bit B operand, the 1-bit flag
    selecting the C-port correction, and ``correction(w1, w2)`` giving its value."""
    p = unit.i.payload
    x_bits = unit.x_bits
    upper = Signal(signed(8) if unit.x_signed else 8, name="b_upper")
    b = Signal(signed(B_BITS), name="b_port")
    m.d.comb += [upper.eq(p.x2),
                 b.eq(Cat(p.x1.as_unsigned(), Const(0, W2_X_SHIFT - x_bits), upper))]
    if unit.x_signed:       # B = X1 + 2^x_bits + (X2 << 10) when X1 < 0
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


def elaborate_xilinx(unit, m, first, pipe):
    """The multiplier of ``unit`` on the DSP48E2, in ``m``: ``first`` says that the beat on
    ``i`` starts a run, ``pipe`` is the unit's valid chain and clock enable."""
    p = unit.i.payload
    accumulating = unit.acc_depth > 1
    ce = pipe.ce
    registers = dsp48e2_registers(unit.pipeline)
    # C and OPMODE reach the post-adder together with M: through CREG / OPMODEREG one
    # stage before P (depth >= 1), so the fabric delays them by latency - 2 stages; at
    # depth 0 they are combinational from the input beat.
    ahead = max(unit.latency - 2, 0)
    # The operands: wiring only (the A port is 30 bits, of which the pre-adder uses 27).
    a = Signal(signed(30), name="a_port")
    d = Signal(signed(AD_BITS), name="d_port")
    flag = None
    if unit.mode == "w2":
        m.d.comb += [a.eq(p.w1), d.eq(p.w2 << W2_W_SHIFT)]
        b, flag, correction = dsp_b_port(unit, m)
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
    m.d.comb += opmode.eq(Mux(first_at_alu, dsp_opmode("RND", z_first), dsp_opmode(w_more, "P")))
    # P loads only when a beat enters it: bubbles never touch an accumulating P.
    entering_p = pipe.beat[unit.latency - 2] if unit.latency >= 2 else unit.i.valid

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
        p_RND=Const(rounding_constant(unit.fields), P_BITS),
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
    top = unit.fields[-1][0]
    for name, shift, width in unit.fields:
        if name not in unit.products:
            continue
        bits = product[shift:shift + unit.sum_bits]
        if name != top and unit.sum_bits == width:
            bits = Cat(bits[:-1], ~bits[-1])
        m.d.comb += getattr(unit.o.payload, name).eq(bits)
    if accumulating:
        m.d.comb += unit.o.payload.last.eq(pipe.delay(p.last, unit.latency, name="last"))
