"""The ``xilinx`` target of the AccLLM PE (:class:`hdl.accllm.pe.pe.AccllmPe`): one DSP48E2 whose
ports, ``INMODE``, ``OPMODE`` and C input follow the mode of every beat, then the slice
multiplexer and the fabric accumulators.

Per beat (contract 6 packing; ``K8``, ``K2`` the rounding constants of
:func:`hdl.accllm.dsp_mul.dsp_mul.rounding_constant` for the w8 and w2 fields)::

    mode      A (30)            D (27)             B (18)              INMODE   OPMODE W   C
    w8        sext(w2) << 18    sext(w1)           x1                  D + A2   RND = K8   -
    w4        sext(w2[3:0])<<18 sext(w1[3:0])      x1                  D + A2   RND = K8   -
    w4 kv4    zp + (zp << 18)   q1 + (q2 << 18)    x1                  D - A2   RND = K8   -
    w2        sext(w1[1:0])     sext(w2[1:0])<<22  {x2, 0, x1 mod 2^n} D + A2   C          K2 + corr

X and Y select M, Z = 0. ``corr`` cancels the difference between the 18-bit B and
``x1 + (x2 << 10)`` (the B-port overflow of contract 6), from the packed multiplier's 32-entry table.
P then holds, for w8/w4: ``x1*w1`` in ``P[15:0]`` and ``x1*w2`` in ``P[33:18]``; for w2:
``x1*w1`` in ``P[9:0]`` with bit 9 inverted and ``x2*w2`` in ``P[41:32]``.
"""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Mux, Signal, signed

from ..dsp_mul.packing import (AD_BITS, B_BITS, P_BITS, W2_FIELDS, W2_W_SHIFT,
                                     W8_FIELDS, W8_W_SHIFT, dsp48e2_registers,
                                     rounding_constant)
# The packed multiplier's B-port builder / C-port correction and OPMODE encoding, reused as
# they are (private helpers of that module).
from ..dsp_mul.xilinx import (DSP48E2_UNUSED_OUTPUTS, INMODE_D_PLUS_A2, dsp_b_port,
                                    dsp_opmode)

__all__ = ["elaborate_xilinx", "OPMODE_W8", "OPMODE_W2", "K8", "K2", "INMODE_D_MINUS_A2"]

#: The KV4 zero point through the pre-adder: ``INMODE`` = D - A2 (UG579, INMODE[3] = 1).
INMODE_D_MINUS_A2 = 0b01100

#: Rounding constants that make every field a slice of P (w8/w4 through RND, w2 through C).
K8 = rounding_constant(W8_FIELDS)
K2 = rounding_constant(W2_FIELDS)
#: OPMODE per mode: P = M + RND (w8/w4), P = M + C (w2).
OPMODE_W8 = dsp_opmode("RND", "0")
OPMODE_W2 = dsp_opmode("C", "0")


def _c_port(unit, m, pipe, key_bits, flag, correction, ahead):
    """The C input: ``K2`` plus the B-port correction of the w2 beat that reaches the
    post-adder (its key ``(w1, w2, flag)`` delayed ``ahead`` stages)."""
    c = Signal(P_BITS, name="c_port")
    if flag is None:                    # B always exact (narrow unsigned X)
        m.d.comb += c.eq(K2)
        return c
    key = pipe.delay(Cat(key_bits, flag), ahead, name="c_key")
    with m.Switch(key):
        for w1 in range(-2, 2):
            for w2 in range(-2, 2):
                with m.Case((w1 & 3) | ((w2 & 3) << 2) | (1 << 4)):
                    m.d.comb += c.eq((K2 + correction(w1, w2)) % (1 << P_BITS))
        with m.Default():
            m.d.comb += c.eq(K2)
    return c


def elaborate_xilinx(unit, m, pipe):
    """The DSP48E2 data path of ``unit`` (an :class:`~hdl.accllm.pe.pe.AccllmPe`) in ``m``;
    ``pipe`` is its valid chain and clock enable."""
    p = unit.i.payload
    ce = pipe.ce
    registers = dsp48e2_registers(unit.pipeline)
    dsp_latency = 1 + unit.pipeline     # input beat -> P
    # C and OPMODE reach the post-adder with M (CREG / OPMODEREG one stage before P from depth
    # 1 on): the fabric delays them by dsp_latency - 2 stages; INMODE enters with A and D.
    ahead = max(dsp_latency - 2, 0)
    is_w4, is_w2 = unit.decode_mode(m, p.mode)
    kv4 = Signal(name="kv4_beat")
    m.d.comb += kv4.eq(is_w4 & p.kv4)

    # A, D: the weights per mode (w4 reads the low 4 bits, w2 the low 2 bits, signed; a KV4
    # beat puts the codes on D and the zero point twice on A, and subtracts).
    w8 = {}
    for name in ("w1", "w2"):
        w = getattr(p, name)
        w8[name] = Signal(signed(8), name=f"{name}_w8")
        m.d.comb += w8[name].eq(Mux(is_w4, w[:4].as_signed(), w))
    a = Signal(signed(30), name="a_port")
    d = Signal(signed(AD_BITS), name="d_port")
    zp_twice = Cat(p.zp, Const(0, W8_W_SHIFT - 4), p.zp)
    codes = Cat(p.w1[:4], Const(0, W8_W_SHIFT - 4), p.w2[:4])
    m.d.comb += [
        a.eq(Mux(is_w2, p.w1[:2].as_signed(),
                 Mux(kv4, zp_twice, w8["w2"] << W8_W_SHIFT))),
        d.eq(Mux(is_w2, p.w2[:2].as_signed() << W2_W_SHIFT,
                 Mux(kv4, codes, w8["w1"]))),
    ]
    inmode = Signal(5, name="inmode")
    m.d.comb += inmode.eq(Mux(kv4, INMODE_D_MINUS_A2, INMODE_D_PLUS_A2))

    # B: x1 (w8/w4) or the w2 concatenation {x2, 0, x1 mod 2^x_bits} with its C correction.
    b_w2, flag, correction = dsp_b_port(unit, m)
    b = Signal(signed(B_BITS), name="b_mux")
    m.d.comb += b.eq(Mux(is_w2, b_w2, p.x1))
    w2_beat = pipe.delay(is_w2, ahead, name="w2_at_alu")
    c = _c_port(unit, m, pipe, Cat(p.w1[:2], p.w2[:2]), flag, correction, ahead)
    opmode = Signal(9, name="opmode")
    m.d.comb += opmode.eq(Mux(w2_beat, OPMODE_W2, OPMODE_W8))

    product = Signal(signed(P_BITS), name="p_port")
    m.submodules.dsp = Instance(
        "DSP48E2",
        p_AMULTSEL="AD", p_BMULTSEL="B", p_PREADDINSEL="A", p_USE_MULT="MULTIPLY",
        p_USE_SIMD="ONE48", p_USE_PATTERN_DETECT="NO_PATDET",
        p_AREG=registers["AREG"], p_ACASCREG=registers["ACASCREG"],
        p_BREG=registers["BREG"], p_BCASCREG=registers["BCASCREG"],
        p_DREG=registers["DREG"], p_ADREG=registers["ADREG"], p_MREG=registers["MREG"],
        p_PREG=registers["PREG"], p_CREG=registers["CREG"],
        # INMODE enters with A and D (registered with them from depth 3 on).
        p_INMODEREG=registers["AREG"], p_OPMODEREG=registers["OPMODEREG"],
        p_ALUMODEREG=0, p_CARRYINREG=0, p_CARRYINSELREG=0,
        p_RND=Const(K8, P_BITS),
        i_CLK=ClockSignal(),
        i_A=a, i_B=b, i_C=c, i_D=d,
        i_INMODE=inmode, i_OPMODE=opmode, i_ALUMODE=Const(0, 4),
        i_CARRYIN=Const(0, 1), i_CARRYINSEL=Const(0, 3),
        i_ACIN=Const(0, 30), i_BCIN=Const(0, 18), i_PCIN=Const(0, 48),
        i_CARRYCASCIN=Const(0, 1), i_MULTSIGNIN=Const(0, 1),
        i_CEA1=Const(0, 1), i_CEA2=ce, i_CEB1=ce, i_CEB2=ce, i_CEC=ce, i_CED=ce,
        i_CEAD=ce, i_CEM=ce, i_CEP=ce, i_CECTRL=ce, i_CEINMODE=ce,
        i_CEALUMODE=Const(0, 1), i_CECARRYIN=Const(0, 1),
        i_RSTA=Const(0, 1), i_RSTB=Const(0, 1), i_RSTC=Const(0, 1), i_RSTD=Const(0, 1),
        i_RSTM=Const(0, 1), i_RSTP=Const(0, 1), i_RSTCTRL=Const(0, 1),
        i_RSTINMODE=Const(0, 1), i_RSTALUMODE=Const(0, 1), i_RSTALLCARRYIN=Const(0, 1),
        o_P=product,
        **{f"o_{pin}": Signal(width, name=f"dsp_{pin.lower()}_unused")
           for pin, width in DSP48E2_UNUSED_OUTPUTS.items()},
    )

    # The mode's slices of P (every field below the top one has its sign bit inverted by the
    # rounding constant: only w2's x1*w1 is read up to that bit).
    w2_at_p = pipe.delay(is_w2, dsp_latency, name="w2_at_p")
    first_at_p = pipe.delay(p.first, dsp_latency, name="first_at_p")
    term1 = Signal(signed(unit.p_bits), name="term1")
    term2 = Signal(signed(unit.p_bits), name="term2")
    w2_low = Cat(product[:9], ~product[9]).as_signed()
    m.d.comb += [
        term1.eq(Mux(w2_at_p, w2_low, product[:16].as_signed())),
        term2.eq(Mux(w2_at_p, product[32:42].as_signed(), product[18:34].as_signed())),
    ]
    unit.accumulate(m, pipe, term1, term2, first_at_p, pipe.beat[dsp_latency - 1])
