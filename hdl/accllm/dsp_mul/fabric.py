"""The fabric targets of the AccLLM DSP-packed multiplier
(:class:`hdl.accllm.dsp_mul.dsp_mul.AccllmDspMul`: ``generic``, ``ecp5``, ``ice40``): the packed
multiply written with ``*`` (or an instantiated MULT18X18D on ECP5), the register cuts around
it, the optional accumulator and the borrow chain that reads the fields."""

from amaranth.hdl import ClockSignal, Const, Instance, Mux, Signal, signed

from .packing import (AD_BITS, B_BITS, FABRIC_MULTIPLIERS, P_BITS, W2_W_SHIFT,
                                     W2_X_SHIFT, W8_W_SHIFT)

__all__ = ["elaborate_fabric", "mult18x18d"]


def kept_register(m, pipe, value, name):
    """``value`` registered at ``pipe``'s clock enable, with the Verilog attribute ``keep`` (no
    bit is trimmed by synthesis)."""
    register = Signal(value.shape(), name=name, reset_less=True, attrs={"keep": 1})
    with m.If(pipe.ce):
        m.d.sync += register.eq(value)
    return register


def _operands(unit, m, p):
    """Return the multiplier's operands from payload ``p``: ``(A + D, B)`` (generic) or
    ``(W1 + (W2 << s), X)`` (ecp5, ice40), and the width of the packed word."""
    if unit.target == "generic":
        a = Signal(signed(AD_BITS), name="a_port")
        d = Signal(signed(AD_BITS), name="d_port")
        ad = Signal(signed(AD_BITS), name="ad")   # the pre-adder: 27 bits, as in the DSP48E2
        if unit.mode == "w2":
            b = Signal(signed(B_BITS + 1), name="b_port")   # room for X1 + (X2 << 10)
            m.d.comb += [a.eq(p.w1), d.eq(p.w2 << W2_W_SHIFT),
                         b.eq(p.x1 + (p.x2 << W2_X_SHIFT))]
        else:
            b = Signal(signed(B_BITS), name="b_port")
            m.d.comb += [a.eq(p.w2 << W8_W_SHIFT), d.eq(p.w1), b.eq(p.x)]
        m.d.comb += ad.eq(a + d)
        return ad, b, P_BITS
    bits, _ = FABRIC_MULTIPLIERS[unit.target]
    shift = unit.fields[1][1]
    packed_w = Signal(signed(bits), name="packed_w")   # W1 + (W2 << s): inside the port
    m.d.comb += packed_w.eq(p.w1 + (p.w2 << shift))
    return packed_w, p.x, 2 * bits


def mult18x18d(m, a, b, ce, name="mult"):
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


def elaborate_fabric(unit, m, first, pipe):
    """The multiplier of ``unit`` on a fabric target, in ``m``: ``first`` says that the beat
    on ``i`` starts a run, ``pipe`` is the unit's valid chain and clock enable."""
    accumulating = unit.acc_depth > 1
    depth = 0                                   # registers passed so far

    def cut(name, values):
        nonlocal depth
        if name not in unit.cuts:
            return values
        depth += 1
        return {key: pipe.stage(value, name=f"{name}_{key}") for key, value in values.items()}

    def run_flags(values):
        return {key: values[key] for key in ("first", "last") if key in values}

    flags = {"first": first, "last": unit.i.payload.last} if accumulating else {}
    values = cut("inputs", {"payload": unit.i.payload, **flags})
    # Operand and product registers at the natural widths of the multiply, with nothing
    # between them and ``*``: the shape Yosys' ice40_dsp absorbs into the SB_MAC16.
    a, b, word_bits = _operands(unit, m, values["payload"])
    product = Signal((a * b).shape(), name="product")
    if unit.target == "ecp5" and "operands" in unit.cuts:
        # The operand registers are the MULT18X18D's own input registers (Yosys maps ``*``
        # to an unregistered MULT18X18D and absorbs no register on ECP5).
        depth += 1
        values = {key: pipe.stage(value, name=f"operands_{key}")
                  for key, value in run_flags(values).items()}
        m.d.comb += product.eq(mult18x18d(m, a, b, pipe.ce))
    else:
        values = cut("operands", {"a": a, "b": b, **run_flags(values)})
        m.d.comb += product.eq(values["a"] * values["b"])
    if unit.target == "ice40" and "product" in unit.cuts:
        # Yosys trims the product register's top bit when the fields never read it (it
        # copies the sign), and ice40_dsp then no longer absorbs the register into the
        # SB_MAC16 (it must cover the whole product): ``keep`` holds the full width.
        depth += 1
        flags = run_flags(values)
        values = {key: pipe.stage(value, name=f"product_{key}")
                  for key, value in flags.items()}
        values["product"] = kept_register(m, pipe, product, "product_product")
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
        here = pipe.beat[depth - 1] if depth else unit.i.valid
        with m.If(pipe.ce & here):
            m.d.sync += acc.eq(total)
    rest = total
    extracted = {}
    for name, _shift, width in unit.fields:                # the borrow chain, bottom up
        field = Signal(signed(width), name=f"field_{name}")
        m.d.comb += field.eq(rest[:width])
        extracted[name] = field
        above = Signal(signed(len(rest) - width + 1), name=f"rest_above_{name}")
        m.d.comb += above.eq((rest >> width) + rest[width - 1])
        rest = above
    outputs = {name: extracted[name][:unit.sum_bits] for name in unit.products}
    if accumulating:
        outputs["last"] = values["last"]
    for name, value in outputs.items():                     # the output register
        m.d.comb += getattr(unit.o.payload, name).eq(pipe.stage(value, name=f"out_{name}"))
    assert depth + 1 == unit.latency
