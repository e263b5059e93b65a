"""Number formats of the FP16 MAC (:class:`hdl.baselines.fp16_mac.fp16_mac.Fp16Mac`): the bit layouts of its
stage registers (binary32 accumulation, and the ``acc="fp16"`` reading's binary16 ones) and the
binary16 pieces of its input step (unpack, normalize, leading zeros)."""

from amaranth.hdl import Cat, Const, Mux, Signal, Value, signed
from amaranth.lib import data

__all__ = ["CANONICAL_NAN", "FP32_LAYOUT", "FP16_UNPACKED_LAYOUT", "OPERANDS_LAYOUT",
           "RAW_PRODUCT_LAYOUT", "PRODUCT_LAYOUT", "ACC_LAYOUT", "ALIGN_LAYOUT",
           "ACC_FORMATS", "CANONICAL_NAN_FP16", "HALF_RAW_PRODUCT_LAYOUT", "HALF_LAYOUT",
           "HALF_PRODUCT_LAYOUT", "unpack_fp16", "normalize_fp16", "leading_zeros"]

#: A binary32 number as sent on ``o``.
FP32_LAYOUT = data.StructLayout({"frac": 23, "exp": 8, "sign": 1})

#: A binary16 operand taken apart: significand with its hidden bit, effective exponent
#: (1 for subnormals, whose hidden bit is 0) and the class flags.
FP16_UNPACKED_LAYOUT = data.StructLayout({
    "sig": 11, "exp": 5, "sign": 1, "zero": 1, "inf": 1, "nan": 1,
})

#: Class of a product or of the accumulator: at most one flag is set; none for a normal number.
CLASS_FIELDS = {"zero": 1, "inf": 1, "nan": 1}

#: The multiplier's operands (register before the multiplier): normalized significands (bit 10
#: set unless the operand is zero), signed exponents with ``value = sig * 2^(exp - 25)``, the
#: product's sign and class, and the stream's ``first`` (``last`` travels in the pipeline's
#: valid chain).
OPERANDS_LAYOUT = data.StructLayout({
    "a_sig": 11, "b_sig": 11, "a_exp": signed(6), "b_exp": signed(6), "sign": 1,
    **CLASS_FIELDS, "first": 1,
})

#: The multiplier's result (register after the multiplier): the 22-bit significand product,
#: whose leading one is bit 21 or bit 20, and the binary32 exponent for either case
#: (``exp_hi`` for bit 21, ``exp_lo = exp_hi - 1`` for bit 20), computed beside the multiplier.
RAW_PRODUCT_LAYOUT = data.StructLayout({
    "sig": 22, "exp_hi": 8, "exp_lo": 8, "sign": 1, **CLASS_FIELDS, "first": 1,
})

#: The exact product as a normalized binary32 number, the register in front of the
#: accumulator. A product of 11-bit significands has 22 bits, so the binary32 fraction's two low
#: bits are always 0 and are not stored: ``frac`` is the top 21 fraction bits. ``exp_p1`` and
#: ``exp_m1`` are ``exp + 1`` and ``exp - 1``, computed in front of the loop (candidates of the
#: accumulator's new exponent, and compared with its exponent). The class flags replace the
#: exponent/fraction encodings of zero, infinity and NaN, which the accumulator never decodes.
PRODUCT_LAYOUT = data.StructLayout({
    "frac": 21, "exp": 8, "exp_p1": 8, "exp_m1": 8, "sign": 1, **CLASS_FIELDS, "first": 1,
})

#: The accumulator register: a binary32 number with its class as flags (reset: +0.0).
ACC_LAYOUT = data.StructLayout({"frac": 23, "exp": 8, "sign": 1, **CLASS_FIELDS})

#: The accumulator's exponent compared with the product's in front of it, a register of the
#: loop: ``d_xy = acc.exp - product.exp``, ``d_yx`` the low 8 bits of ``-d_xy`` (the shift when
#: the product is the larger operand), and whether ``d_xy`` is 0, +1 or -1. It is computed in the
#: cycle before, beside the accumulator's new value, so that the adder starts from it instead
#: of from a subtraction.
ALIGN_LAYOUT = data.StructLayout({
    "d_xy": signed(9), "d_yx": 8, "zero": 1, "plus_one": 1, "minus_one": 1,
})

#: The one NaN the unit emits: quiet, positive, payload 0 (0x7FC00000).
CANONICAL_NAN = 0x7FC0_0000

# --- the binary16 accumulator (``acc="fp16"``) --------------------------------------------------

#: Accumulator formats of the unit (its ``acc`` parameter), the default first.
ACC_FORMATS = ("fp32", "fp16")

#: The one binary16 NaN the unit emits with ``acc="fp16"``: quiet, positive, payload 0.
CANONICAL_NAN_FP16 = 0x7E00

#: The multiplier's result for the binary16 reading (register after the multiplier): the 22-bit
#: significand product (leading one at bit 21 or 20) and ``exp = e_a + e_b - 15``, the biased
#: binary16 exponent of the product if its leading one is at bit 20 (one more at bit 21), which
#: may lie outside 1..30 (``value = sig * 2^(exp - 35)``).
HALF_RAW_PRODUCT_LAYOUT = data.StructLayout({
    "sig": 22, "exp": signed(8), "sign": 1, **CLASS_FIELDS, "first": 1,
})

#: A binary16 number in the loop: ``value = sig * 2^(exp - 25)`` with ``exp`` 1..30, bit 10 of
#: ``sig`` set for a normal number; subnormals and zero have ``exp = 1`` (zero: ``sig = 0``, so
#: that its bit pattern is ``((exp - 1) << 10) + sig`` as for every finite value). The class is
#: in flags: ``zero`` (beside ``sig = 0``: the loop selects on it without decoding ``sig``),
#: ``inf`` and ``nan`` (``sig`` and ``exp`` then unused). This is the accumulator register
#: (reset: +0.0).
HALF_LAYOUT = data.StructLayout({"sig": 11, "exp": 5, "sign": 1, **CLASS_FIELDS})

#: The product rounded to binary16, the register in front of the loop: :data:`HALF_LAYOUT` and
#: the stream's ``first``.
HALF_PRODUCT_LAYOUT = data.StructLayout({"sig": 11, "exp": 5, "sign": 1, **CLASS_FIELDS,
                                         "first": 1})


def unpack_fp16(m, bits, *, name):
    """Take a binary16 bit pattern apart (combinational); return a view of
    :data:`FP16_UNPACKED_LAYOUT` named ``<name>_unpacked``.

    Subnormals get hidden bit 0 and effective exponent 1, so that the value is always
    ``sig * 2^(exp - 25)``, exactly.
    """
    bits = Value.cast(bits)
    fields = Signal(FP16_UNPACKED_LAYOUT, name=f"{name}_unpacked")
    frac, exp = bits[0:10], bits[10:15]
    exp_zero, exp_ones = exp == 0, exp == 0x1F
    m.d.comb += [
        fields.sig.eq(Cat(frac, ~exp_zero)),
        fields.exp.eq(Mux(exp_zero, 1, exp)),
        fields.sign.eq(bits[15]),
        fields.zero.eq(exp_zero & (frac == 0)),
        fields.inf.eq(exp_ones & (frac == 0)),
        fields.nan.eq(exp_ones & (frac != 0)),
    ]
    return fields


def normalize_fp16(m, fields, *, name):
    """Shift a subnormal's significand up to bit 10 (combinational).

    Returns ``(sig, exp)``: ``sig`` (11 bits) has bit 10 set unless the operand is zero, and
    ``exp`` (signed, 6 bits, -9..30) keeps ``value = sig * 2^(exp - 25)``. For normal numbers
    both are the unpacked ones.
    """
    count = Signal(4, name=f"{name}_lz")
    m.d.comb += count.eq(leading_zeros(fields.sig))
    sig = Signal(11, name=f"{name}_sig")
    exp = Signal(signed(6), name=f"{name}_exp")
    m.d.comb += [sig.eq((fields.sig << count)[0:11]), exp.eq(fields.exp - count)]
    return sig, exp


def _leading_zeros_tree(bits):
    """``(any_set, count)`` for a power-of-two number of bits: a balanced tree of 2:1 merges."""
    if len(bits) == 2:
        return bits[0] | bits[1], ~bits[1]
    half = len(bits) // 2
    high_any, high_count = _leading_zeros_tree(bits[half:])
    low_any, low_count = _leading_zeros_tree(bits[:half])
    return high_any | low_any, Cat(Mux(high_any, high_count, low_count), ~high_any)


def leading_zeros(value):
    """Return the number of zero bits above the most significant one of ``value``
    (combinational).

    The count is ``ceil(log2(len(value)))`` bits wide (at least 1); for ``value == 0`` it is
    all ones, so callers treat zero separately. ``value`` is padded with zeros below to a power
    of two, which leaves the count of a non-zero value unchanged.
    """
    value = Value.cast(value)
    width = 1 << max(1, (len(value) - 1).bit_length())
    padded = Cat(Const(0, width - len(value)), value)
    return _leading_zeros_tree(padded)[1]
