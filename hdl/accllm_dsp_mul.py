"""AccLLM DSP-packed multiplier (AccLLM section V-B3, Fig. 10(d); SPEC section 6)."""

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_choice, check_int
from .stream_stage import output_register

__all__ = ["AccllmDspMul", "MODES", "TARGETS", "W_BITS", "W2_FIELDS", "W8_FIELDS"]

MODES = ("w8", "w4", "w2")
TARGETS = ("generic",)
#: Weight width per mode.
W_BITS = {"w8": 8, "w4": 4, "w2": 2}
#: DSP48E2 port widths (UG579): A/D into the 27-bit pre-adder, B 18 bits, P 48 bits.
AD_BITS, B_BITS, P_BITS = 27, 18, 48
#: (output, shift, width) of the fields of P, bottom up.
W8_FIELDS = (("p1", 0, 18), ("p2", 18, 30))
W2_FIELDS = (("p11", 0, 10), ("p21", 10, 12), ("p12", 22, 10), ("p22", 32, 16))
W2_X_SHIFT, W2_W_SHIFT = 10, 22      # B = X1 + (X2 << 10), D = W2 << 22
W8_W_SHIFT = 18                      # A = W2 << 18


class AccllmDspMul(wiring.Component):
    """Two (modes ``w8``, ``w4``) or four (mode ``w2``) products from one ``(A + D) * B``.

    AccLLM (section V-B3, Fig. 10(d)) packs low-bit operands into one DSP48E2 multiply
    ``P = (A + D) * B`` (A, D 27-bit, B 18-bit, P 48-bit, all signed):

    * ``w8`` / ``w4``: ``A = W2 << 18``, ``D = W1``, ``B = X``, so
      ``P = X*W1 + (X*W2 << 18)``;
    * ``w2``: ``A = W1``, ``D = W2 << 22``, ``B = X1 + (X2 << 10)``, so
      ``P = X1*W1 + (X2*W1 << 10) + (X1*W2 << 22) + (X2*W2 << 32)``.

    Signed fields borrow from the field above. The unit reads the fields bottom up with a borrow
    chain, ``f = sext(R mod 2^w)``, ``R <- (R >> w) + R[w-1]`` (for two fields:
    ``p1 = sext18(P[17:0])``, ``p2 = (P >> 18) + P[17]``), so every product is exact.

    Target ``generic`` computes ``(A + D) * B`` with Amaranth's ``*`` and leaves the mapping to
    the synthesizer. In mode ``w2``, ``X1 + (X2 << 10)`` needs 19 bits for some inputs (signed:
    ``X2 = -128`` with ``X1 < 0``; unsigned: ``X2 >= 128``). This target gives B the 19 bits;
    it is not held to the DSP48E2's 18-bit port.

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
        ``"generic"``.

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``x``, ``w1``, ``w2`` (``w8``/``w4``) or ``x1``, ``x2``, ``w1``, ``w2`` (``w2``).
    o : ``Out(stream.Signature(out_layout))``
        ``p1``, ``p2`` (``w8``/``w4``) or ``p11``, ``p22`` [, ``p12``, ``p21``] (``w2``).

    Latency: one cycle (target ``generic``); one beat per cycle.

    Raises
    ------
    TypeError, ValueError
        If a parameter is invalid; the message names it and its limit.
    """

    latency = 1

    def __init__(self, *, mode="w4", x_signed=True, x_bits=8, cross_products=False,
                 target="generic"):
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
        self.w_bits = W_BITS[self.mode]
        self.p_bits = self.x_bits + self.w_bits
        x_shape = signed(self.x_bits) if x_signed else self.x_bits
        w_shape = signed(self.w_bits)
        p_shape = signed(self.p_bits)
        if self.mode == "w2":
            inputs = {"x1": x_shape, "x2": x_shape, "w1": w_shape, "w2": w_shape}
            outputs = ["p11", "p22"] + (["p12", "p21"] if cross_products else [])
        else:
            inputs = {"x": x_shape, "w1": w_shape, "w2": w_shape}
            outputs = ["p1", "p2"]
        self.in_layout = data.StructLayout(inputs)
        self.out_layout = data.StructLayout({name: p_shape for name in outputs})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.i.payload
        a = Signal(signed(AD_BITS))
        d = Signal(signed(AD_BITS))
        ad = Signal(signed(AD_BITS))          # the pre-adder: 27 bits, as in the DSP48E2
        if self.mode == "w2":
            b = Signal(signed(B_BITS + 1))    # generic: room for X1 + (X2 << 10)
            m.d.comb += [
                a.eq(p.w1),
                d.eq(p.w2 << W2_W_SHIFT),
                b.eq(p.x1 + (p.x2 << W2_X_SHIFT)),
            ]
            fields = W2_FIELDS
        else:
            b = Signal(signed(B_BITS))
            m.d.comb += [a.eq(p.w2 << W8_W_SHIFT), d.eq(p.w1), b.eq(p.x)]
            fields = W8_FIELDS
        product = Signal(signed(P_BITS))
        m.d.comb += [ad.eq(a + d), product.eq(ad * b)]

        extracted = {}
        rest = product
        for name, _shift, width in fields:
            field = Signal(signed(width), name=f"field_{name}")
            m.d.comb += field.eq(rest[:width])
            extracted[name] = field
            borrowed = Signal(signed(len(rest) - width + 1), name=f"rest_above_{name}")
            m.d.comb += borrowed.eq((rest >> width) + rest[width - 1])
            rest = borrowed

        out = Signal(self.out_layout, reset_less=True)
        m.d.comb += self.o.payload.eq(out)
        load = output_register(m, self.i, self.o)
        with m.If(load):
            m.d.sync += out.as_value().eq(
                Cat(*(extracted[name][:self.p_bits] for name in self.out_layout.members)))
        return m
