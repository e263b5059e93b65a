"""AccLLM reconfigurable DSP processing element (AccLLM section V-B, Fig. 10; contract section 10).

The unit and its fabric targets are here; the DSP48E2 circuit of the ``xilinx`` target is in
:mod:`hdl.accllm.pe.xilinx`. The packing arithmetic (fields, rounding constants, DSP48E2
register sets) and the MULT18X18D instance come from the packed multiplier
(:mod:`hdl.accllm.dsp_mul.packing`, :mod:`hdl.accllm.dsp_mul.fabric`).
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..dsp_mul.fabric import mult18x18d
from ..dsp_mul.packing import CUTS, MAX_PIPELINE, product_range, signed_width
from .xilinx import elaborate_xilinx
from ...common.params import check_choice, check_int
from ...common.stream_stage import StallPipeline, check_pipeline

__all__ = ["AccllmPe", "TARGETS", "MODE_W8", "MODE_W4", "MODE_W2", "MAX_ACC_BITS",
           "DEFAULT_PIPELINE", "MAX_PIPELINE", "CUTS", "product_bits"]

TARGETS = ("generic", "xilinx", "ecp5")
#: Values of the ``mode`` field (contract 10); 3 is reserved (decoded as w8, see the class).
MODE_W8, MODE_W4, MODE_W2 = 0, 1, 2
#: Widest accumulator: the DSP48E2's P width (the golden model sums in 64-bit integers).
MAX_ACC_BITS = 48
#: Registers on both sides of the multiplier and in front of the operand decode; closes timing
#: at >= 150 MHz on ECP5 (target ``ecp5``), see docs/units/accllm_pe.md.
DEFAULT_PIPELINE = 3
#: Width of the 8-bit weight fields and of the KV4 code / zero point.
W_FIELD_BITS, KV4_BITS = 8, 4


def product_bits(x_bits, x_signed):
    """Signed width of the widest product the PE adds (mode w8, ``x * w`` with 8-bit w; the
    KV4 weights ``q - zp`` lie in -15..15 and give narrower products)."""
    return signed_width(*product_range(x_bits, W_FIELD_BITS, x_signed))


class AccllmPe(wiring.Component):
    """Two dot products on one packed multiplier, the mode chosen per beat.

    AccLLM's reconfigurable computing engine (section V-B, Fig. 10) packs two precision-scalable
    multipliers of adjacent PE blocks into one DSP48E2 (Fig. 10(a), (d)) and accumulates the
    partial sums across cycles in each block (Fig. 10(b)). This unit is that pair of
    multipliers with their two accumulators: every beat adds two products, in the mode its
    ``mode`` field names (contract 10):

    * ``w8`` (0), ``w4`` (1): ``s1 += x1 * w1``, ``s2 += x1 * w2`` (Fig. 10(d-1): one activation
      broadcast to two output channels; A8 x LoRA W8, Q x K and S x V with 4-bit K / V);
    * ``w2`` (2): ``s1 += x1 * w1``, ``s2 += x2 * w2`` (Fig. 10(d-2): two activations, each the
      one :class:`~hdl.accllm.sparse_selector.AccllmSparseSelector` picked for its weight row;
      row 1 gives ``x1``, ``w1``, row 2 ``x2``, ``w2``).

    Weights: ``w8`` reads all 8 bits of ``w1``/``w2`` signed, ``w4`` the low 4 bits signed, ``w2``
    the low 2 bits signed; the bits above are ignored. With ``kv4`` set in mode ``w4`` the low 4
    bits are an unsigned KV4 code ``q`` and the weight is ``q - zp`` (-15..15), exact; ``kv4`` and
    ``zp`` are ignored in the other modes. ``mode`` = 3 is reserved: this implementation decodes
    it as ``w8`` (not part of the contract; the golden model refuses it).

    **Mode changes inside a dot product are defined**, not rejected: each beat adds its own
    mode's two products to ``s1`` and ``s2`` (a ``w2`` beat adds ``x1*w1`` and ``x2*w2``, a
    ``w8``/``w4`` beat ``x1*w1`` and ``x1*w2``). The mode may change on every beat, with no
    bubble.

    Accumulation: ``first`` clears the sums and ``overflow`` before the beat's products are
    added; without ``first`` a beat (or a whole dot product after a ``last``) carries on from the
    previous sums. Each ``last`` beat emits one output beat with the sums after its own products.
    After reset the sums and ``overflow`` are 0. ``overflow`` is set when a running sum (after
    any beat) leaves the signed ``acc_bits`` range and stays set until the next ``first``; the
    sums wrap modulo ``2^acc_bits`` (contract 10 leaves them unspecified after an overflow).
    The accumulators are fabric adders, not the DSP's P feedback: the packed fields leave too
    few guard bits for the dot products of any length that the PE takes (7 ``w8`` products or
    1 ``w2`` product per field, :func:`hdl.accllm.dsp_mul.dsp_mul.accumulation_limit`), and the fields'
    layout changes with the mode from beat to beat.

    Targets
    -------
    ``generic``
        Two plain multiplies ``xa * wa``, ``xb * wb`` (Amaranth ``*``) of the decoded operands:
        ``wa``/``wb`` the signed weights (KV4: ``q - zp``, a 4-bit subtraction in fabric),
        ``xa = x1``, ``xb = x2`` in mode w2 else ``x1``.
    ``ecp5``
        As ``generic``; from ``pipeline`` = 2 each multiply is an instantiated MULT18X18D whose
        input registers hold the decoded operands (Yosys maps ``*`` to an unregistered
        MULT18X18D and absorbs no register); such a design synthesizes for ECP5 only.
    ``xilinx``
        One DSP48E2 for both products whatever the mode, driven per beat
        (:mod:`hdl.accllm.pe.xilinx`): A, D and B are multiplexed in fabric to the packing of
        the beat's mode (contract 6); ``INMODE`` is D + A2, or D - A2 for a KV4 beat
        (``D = q1 + (q2 << 18)``, ``A = zp + (zp << 18)``: the zero point enters through the
        pre-adder, no fabric subtractor); ``OPMODE`` adds ``RND`` (the w8/w4 rounding constant)
        on w8/w4 beats and the C port on w2 beats, where C carries the w2 rounding constant
        plus the B-port correction of contract 6, read from a 32-entry table. Every product is then
        a slice of P; the fabric selects the mode's slices and accumulates.

    Pipeline
    --------
    ``pipeline`` (0..3, default 3) adds the register cuts of :data:`CUTS` (``product``,
    ``operands``, ``inputs``, in that order) in front of the accumulator, which is the output
    register. Fabric targets: ``product`` registers the two products, ``operands`` the decoded
    operands (on ``ecp5`` in the MULT18X18D), ``inputs`` the input beat. ``xilinx``: the DSP48E2
    registers of :func:`hdl.accllm.dsp_mul.dsp_mul.dsp48e2_registers` (``pipeline``) -- P always (the
    slice multiplexer and the accumulator adder follow it), then M with C and OPMODE, then AD and
    B, then A, D (and INMODE) and B's second register.

    Latency (cycles from an input transfer to its output beat with ``o.ready`` high, for a
    ``last`` beat): ``1 + pipeline`` on ``generic`` and ``ecp5``, ``2 + pipeline`` on
    ``xilinx``. One beat per cycle at every depth and for every sequence of modes. Every
    register loads on one clock enable ``~o.valid | o.ready`` (``i.ready`` is that enable,
    combinational in ``o.ready``); ``o.valid`` and ``o.payload`` come from registers.

    Parameters
    ----------
    x_bits : int
        Activation width, 2..8 (default 8).
    x_signed : bool
        Activations signed (default) or unsigned (Fig. 10(d) zero-extends X).
    target : str
        ``"generic"`` (default), ``"xilinx"`` or ``"ecp5"``.
    acc_bits : int
        Accumulator width, :func:`product_bits` (16 for 8-bit X) .. 48 (default 32).
    pipeline : int
        Register cuts, 0..3 (default 3).

    Members
    -------
    i : ``In(stream.Signature(in_layout))``
        ``mode`` (2 bits), ``x1``, ``x2`` (``x_bits``, signed per ``x_signed``), ``w1``, ``w2``
        (8 bits, signed), ``kv4`` (1), ``zp`` (4 bits unsigned), ``first``, ``last``.
    o : ``Out(stream.Signature(out_layout))``
        ``s1``, ``s2`` (``acc_bits`` signed), ``overflow`` (1); one beat per ``last``.
    latency : int
        See above.

    Raises
    ------
    TypeError, ValueError
        If a parameter has a wrong type or value; the message names it and its range.
    """

    def __init__(self, *, x_bits=8, x_signed=True, target="generic", acc_bits=32,
                 pipeline=DEFAULT_PIPELINE):
        # w2's 10-bit fields of P hold an x_bits + 2-bit product: x_bits <= 8.
        self.x_bits = check_int("x_bits", x_bits, min_value=2, max_value=8)
        if not isinstance(x_signed, bool):
            raise TypeError(f"x_signed must be a bool, not {x_signed!r}")
        self.x_signed = x_signed
        self.target = check_choice("target", target, TARGETS)
        self.p_bits = product_bits(self.x_bits, x_signed)
        acc_bits = check_int("acc_bits", acc_bits, min_value=0)
        if not self.p_bits <= acc_bits <= MAX_ACC_BITS:
            raise ValueError(
                f"acc_bits must be in range {self.p_bits}..{MAX_ACC_BITS} (at least the "
                f"{self.p_bits}-bit product of x_bits={self.x_bits}, x_signed={x_signed} and "
                f"an 8-bit weight), not {acc_bits}")
        self.acc_bits = acc_bits
        self.pipeline = check_pipeline(pipeline, max_value=MAX_PIPELINE)
        self.cuts = CUTS[:self.pipeline]
        self.latency = self.pipeline + (2 if target == "xilinx" else 1)
        self.primitives = ()
        self.synth_targets = None
        if target == "xilinx":
            self.primitives = ("DSP48E2",)
            self.synth_targets = ("xilinx",)
        elif target == "ecp5" and "operands" in self.cuts:
            self.primitives = ("MULT18X18D",)
            self.synth_targets = ("ecp5",)
        x_shape = signed(self.x_bits) if x_signed else self.x_bits
        self.in_layout = data.StructLayout({
            "mode": 2, "x1": x_shape, "x2": x_shape,
            "w1": signed(W_FIELD_BITS), "w2": signed(W_FIELD_BITS),
            "kv4": 1, "zp": KV4_BITS, "first": 1, "last": 1,
        })
        self.out_layout = data.StructLayout({
            "s1": signed(self.acc_bits), "s2": signed(self.acc_bits), "overflow": 1,
        })
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    # --- shared pieces ---------------------------------------------------------------------

    @staticmethod
    def decode_mode(m, mode, name=""):
        """Return ``(is_w4, is_w2)`` of a ``mode`` value (mode 3 decodes as w8)."""
        is_w4 = Signal(name=f"{name}is_w4")
        is_w2 = Signal(name=f"{name}is_w2")
        m.d.comb += [is_w4.eq(mode == MODE_W4), is_w2.eq(mode == MODE_W2)]
        return is_w4, is_w2

    def accumulate(self, m, pipe, term1, term2, first, here):
        """The output register: ``s1``, ``s2``, ``overflow`` accumulating ``term1``/``term2``
        when a beat enters it (``pipe.ce & here``), cleared first where ``first`` is set.

        Each sum is kept with one bit more than ``acc_bits`` (its low ``acc_bits`` are the
        output, wrapping as the contract says), so that leaving the range is read from the
        register, not from the adder's carry out: ``overflow`` is a flag of the sums before
        the latest beat ORed with the range check of the sums now."""
        o = self.o.payload
        s1 = Signal(signed(self.acc_bits + 1), name="s1")
        s2 = Signal(signed(self.acc_bits + 1), name="s2")
        earlier = Signal(name="overflow_before")   # a sum left the range before the latest beat
        updates = []
        for acc, term in ((s1, term1), (s2, term2)):
            # |term| < 2^(p_bits - 1) <= 2^(acc_bits - 1): one beat from inside the range
            # stays within acc_bits + 1 bits; once outside, the flag holds.
            updates.append(acc.eq(Mux(first, 0, acc[:self.acc_bits].as_signed()) + term))
        leaves = Signal(name="sums_leave")
        m.d.comb += leaves.eq((s1[-1] != s1[-2]) | (s2[-1] != s2[-2]))
        with m.If(pipe.ce & here):
            m.d.sync += updates
            m.d.sync += earlier.eq(~first & (earlier | leaves))
        m.d.comb += [o.s1.eq(s1[:self.acc_bits]), o.s2.eq(s2[:self.acc_bits]),
                     o.overflow.eq(earlier | leaves)]

    def weights(self, m, p, is_w4, is_w2):
        """The signed weights of payload ``p`` (8 bits: KV4 ``q - zp`` in -15..15)."""
        kv4 = is_w4 & p.kv4
        out = []
        for name in ("w1", "w2"):
            w = getattr(p, name)
            weight = Signal(signed(W_FIELD_BITS), name=f"{name}_weight")
            code = w[:KV4_BITS]
            m.d.comb += weight.eq(Mux(is_w2, w[:2].as_signed(),
                                      Mux(kv4, code - p.zp,
                                          Mux(is_w4, code.as_signed(), w))))
            out.append(weight)
        return out

    # --- elaboration -----------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        pipe = StallPipeline(m, self.i, self.o, latency=self.latency,
                             emit=self.i.payload.last, name="pe")
        if self.target == "xilinx":
            elaborate_xilinx(self, m, pipe)
        else:
            self._elaborate_fabric(m, pipe)
        return m

    def _elaborate_fabric(self, m, pipe):
        depth = 0                                   # registers passed so far

        def cut(name, values, enable=True):
            nonlocal depth
            if name not in self.cuts or not enable:
                return values
            depth += 1
            return {key: pipe.stage(value, name=f"{name}_{key}") for key, value in values.items()}

        p = cut("inputs", {"payload": self.i.payload})["payload"]
        is_w4, is_w2 = self.decode_mode(m, p.mode)
        w1, w2 = self.weights(m, p, is_w4, is_w2)
        xb = Signal.like(p.x1, name="xb")
        m.d.comb += xb.eq(Mux(is_w2, p.x2, p.x1))
        operands = {"xa": p.x1, "wa": w1, "xb": xb, "wb": w2, "first": p.first}
        hard = self.target == "ecp5" and "operands" in self.cuts
        if hard:            # the MULT18X18D's input registers hold the operands
            depth += 1
            first = pipe.stage(p.first, name="operands_first")
            products = {
                name: mult18x18d(m, operands[x], operands[w], pipe.ce, name=f"mult_{name}")
                for name, x, w in (("p1", "xa", "wa"), ("p2", "xb", "wb"))}
        else:
            operands = cut("operands", operands)
            first = operands["first"]
            products = {"p1": operands["xa"] * operands["wa"],
                        "p2": operands["xb"] * operands["wb"]}
        terms = {}
        for name, value in products.items():
            term = Signal(signed(self.p_bits), name=f"{name}_term")
            m.d.comb += term.eq(value)
            terms[name] = term
        staged = cut("product", {**terms, "first": first})
        here = pipe.beat[depth - 1] if depth else self.i.valid
        self.accumulate(m, pipe, staged["p1"], staged["p2"], staged["first"], here)
        assert depth + 1 == self.latency
