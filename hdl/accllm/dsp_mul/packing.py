"""What the AccLLM DSP-packed multiplier (:class:`hdl.accllm.dsp_mul.dsp_mul.AccllmDspMul`) computes,
in plain Python: its modes and register cuts (:func:`dsp48e2_registers` on the DSP48E2), the
DSP48E2's port widths, the fields of the packed product on each target (:func:`packing`), how
many products a field sums without overflow (:func:`accumulation_limit`) and the rounding
constant that makes every field a slice (:func:`rounding_constant`)."""

from ...common.stream_stage import check_pipeline

__all__ = ["MODES", "W_BITS", "AD_BITS", "B_BITS", "P_BITS", "W8_FIELDS", "W2_FIELDS",
           "W2_X_SHIFT", "W2_W_SHIFT", "W8_W_SHIFT", "FABRIC_MULTIPLIERS", "CUTS", "MAX_PIPELINE",
           "DEFAULT_PIPELINE", "dsp48e2_registers", "product_range", "signed_width", "packing",
           "accumulation_limit", "rounding_constant"]

MODES = ("w8", "w4", "w2")
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
#: full pipeline, and on ECP5 / iCE40 the registers the hard multiplier needs (see
#: :class:`~hdl.accllm.dsp_mul.dsp_mul.AccllmDspMul`).
DEFAULT_PIPELINE = 3


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

    ``generic`` and ``xilinx`` use the DSP48E2 layout of contract section 6. ``ecp5`` and ``ice40``
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
