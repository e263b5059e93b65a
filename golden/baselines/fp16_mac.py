"""Golden model for ``fp16_mac``: FP16 x FP16 multiply, FP32 accumulate (contract sections 0 and 5).

The baseline against which P3-LLM compares its PE (P3-LLM Table VIII, "HBM-PIM [42]: 1 MAC"):
HBM-PIM's processing unit multiplies binary16 operands and accumulates in binary32. Per beat

``acc = fp32(acc + fp32(a) * fp32(b))``

The product of two binary16 values is exact in binary32 (11 x 11 significand bits fit in 24;
magnitudes 2^-48 .. 65504^2 < 2^32 are normal binary32 numbers), so the only rounding is the
one of the addition: round to nearest, ties to even, as NumPy's ``float32`` addition does. The
model therefore computes with NumPy ``float32`` arithmetic only; it never looks at the RTL.

Stream reading (contract section 5, ``first``/``last`` as for ``p3_pe``): the accumulator is +0.0
after reset; a beat with ``first`` clears it to +0.0 before adding its product; a beat with
``last`` emits the accumulator after its product. Without ``first`` the accumulator carries on
across a ``last`` (partial sums can be read out).

NaN: IEEE gives no rule for the payload and NumPy's depends on the host's FPU, so outputs are
compared with :func:`fp32_match` (every NaN equals every NaN; everything else, including the
sign of zeros and infinities, bit for bit). The RTL emits the one pattern :data:`CANONICAL_NAN`.

Readings that follow from the number ranges (documented in docs/units/fp16_mac.md):

* Every product and every accumulator value is an integer multiple of 2^-48 (binary16 values are
  multiples of 2^-24), so a non-zero accumulator has magnitude >= 2^-48: binary32 subnormals are
  never produced.
* A product is below 2^32, and once ``|acc| >= 2^56`` every product is below half an ulp of the
  accumulator and is rounded away: ``|acc| < 2^57`` always, so finite operands never overflow to
  infinity. Infinities come only from infinite operands.
* The accumulator starts at +0.0 and ``(+0) + (-0) = +0`` under round to nearest, so the result
  -0.0 cannot occur either.

Second reading, ``acc="fp16"`` (contract section 5: the papers do not say which accumulator their
"FP16 MAC" has): a binary16 accumulator, per beat ``acc = fp16(acc + fp16(a * b))``, the product
rounded to binary16 and the sum rounded to binary16, each to nearest, ties to even, exactly
NumPy float16 ``acc = acc + a * b``. NumPy evaluates a float16 operation in float32 and rounds
the result to float16; that is correctly rounded (the float32 product of two binary16 numbers
is exact, and float32's 24 bits are at least 2 x 11 + 2, so rounding a float32 sum to binary16
again gives the correctly rounded sum), so the model computes with NumPy ``float16`` arithmetic
only. Here products and sums can be binary16 subnormals, round to zero, and overflow to
infinity (at 65520 and above). The output patterns are 16 bits, every NaN given as the canonical
:data:`CANONICAL_NAN_FP16` (0x7E00): the unit's documented NaN, so that results compare bit for
bit (:func:`fp32_match` on 16-bit patterns is equality: none is a binary32 NaN).
"""

import numpy as np

__all__ = ["ACC_FORMATS", "CANONICAL_NAN", "CANONICAL_NAN_FP16", "fp16_mac_run",
           "fp16_products", "fp16_is_nan", "fp32_is_nan", "fp32_match", "canonical_nan"]

#: Runs (``first`` to next ``first``) up to this length are summed side by side, longer ones
#: one at a time: either way strictly left to right.
SHORT_RUN = 64

#: The quiet NaN the RTL emits for every NaN result (sign 0, exponent 255, fraction MSB set).
CANONICAL_NAN = 0x7FC0_0000

#: The binary16 quiet NaN of the ``acc="fp16"`` reading (sign 0, exponent 31, fraction MSB set).
CANONICAL_NAN_FP16 = 0x7E00

#: Accumulator formats (``acc``) and their NumPy types.
ACC_FORMATS = {"fp32": np.float32, "fp16": np.float16}


def _bit_array(name, values, width):
    """``values`` as an int64 array of ``width``-bit unsigned integers, or raise."""
    array = np.asarray(values)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, not {array.dtype}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, not of shape {array.shape}")
    array = array.astype(np.int64)
    if array.size and (array.min() < 0 or array.max() >= 1 << width):
        bad = array[(array < 0) | (array >= 1 << width)][0]
        raise ValueError(f"{name} must hold {width}-bit patterns 0..{(1 << width) - 1}, "
                         f"not {bad}")
    return array


def fp16_products(a_bits, b_bits, *, acc="fp32"):
    """Return ``fp32(a) * fp32(b)`` as a ``float32`` array (exact: no rounding happens), or for
    ``acc="fp16"`` ``fp16(a * b)`` as a ``float16`` array (rounded to nearest even).

    Parameters
    ----------
    a_bits, b_bits : array of int
        binary16 bit patterns (0..0xFFFF), one per beat.
    acc : str
        ``"fp32"`` or ``"fp16"``, the reading (see the module docstring).
    """
    kind = _acc_type(acc)
    a = _bit_array("a_bits", a_bits, 16)
    b = _bit_array("b_bits", b_bits, 16)
    if a.shape != b.shape:
        raise ValueError(f"a_bits and b_bits must have the same length, not {a.size} "
                         f"and {b.size}")
    a32 = a.astype(np.uint16).view(np.float16).astype(kind)
    b32 = b.astype(np.uint16).view(np.float16).astype(kind)
    # 0 * inf = NaN is the IEEE answer, not an error; so are overflow and underflow in float16.
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        return a32 * b32


def _acc_type(acc):
    """The NumPy type of accumulator format ``acc``, or raise."""
    if acc not in ACC_FORMATS:
        raise ValueError(f"acc must be one of {', '.join(map(repr, ACC_FORMATS))}, not {acc!r}")
    return ACC_FORMATS[acc]


def fp16_mac_run(a_bits, b_bits, first, last, *, acc="fp32"):
    """Run the MAC over a stream of beats; return the FP32 bit patterns emitted (binary16 ones
    for ``acc="fp16"``).

    Parameters
    ----------
    a_bits, b_bits : array of int
        binary16 bit patterns, one per beat.
    first : array of int (0/1)
        Clear the accumulator to +0.0 before this beat.
    last : array of int (0/1)
        Emit the accumulator after this beat.
    acc : str
        ``"fp32"`` (default): binary32 accumulation of exact products; ``"fp16"``: the
        binary16 reading (see the module docstring).

    Returns
    -------
    numpy.ndarray of uint32 (uint16 for ``acc="fp16"``)
        One bit pattern per beat with ``last``, in order. binary32 NaN payloads are NumPy's
        (host-dependent): compare with :func:`fp32_match`; binary16 NaNs are
        :data:`CANONICAL_NAN_FP16`.

    Raises
    ------
    TypeError, ValueError
        If an argument is not an integer array of the right range or length, or ``acc`` is
        not a format of :data:`ACC_FORMATS`.
    """
    kind = _acc_type(acc)
    products = fp16_products(a_bits, b_bits, acc=acc)
    first = _bit_array("first", first, 1).astype(bool)
    last = _bit_array("last", last, 1).astype(bool)
    if not products.size == first.size == last.size:
        raise ValueError(f"a_bits, first and last must have the same length, not "
                         f"{products.size}, {first.size} and {last.size}")
    sums = np.empty_like(products)
    # The accumulator restarts from +0.0 at reset (beat 0) and at every `first`. Each run from
    # one restart to the next is a strictly sequential sum, one rounding per addition (float32,
    # or float16), beginning with (+0) + p as in the hardware ((+0) + (-0) = +0).
    starts = np.union1d([0], np.flatnonzero(first)) if products.size else np.array([], int)
    lengths = np.diff(np.append(starts, products.size))
    # inf and NaN results are IEEE answers
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        # Short runs, all at once: step k adds the k-th product of every run longer than k.
        short = lengths <= SHORT_RUN
        run_starts, run_lengths = starts[short], lengths[short]
        previous = np.zeros(run_starts.size, dtype=kind)
        for k in range(int(run_lengths.max(initial=0))):
            alive = run_lengths > k
            run_starts, run_lengths = run_starts[alive], run_lengths[alive]
            index = run_starts + k
            previous = previous[alive] + products[index]
            sums[index] = previous
        # Long runs one by one; np.add.accumulate adds left to right (never pairwise), each
        # float16 step rounded to float16 (tests/baselines/test_fp16_mac_half.py checks it against
        # the exact reference on long runs).
        zero = np.zeros(1, dtype=kind)
        for start, length in zip(starts[~short].tolist(), lengths[~short].tolist()):
            run = np.concatenate((zero, products[start:start + length]))
            sums[start:start + length] = np.add.accumulate(run, dtype=kind)[1:]
    if kind is np.float16:
        bits = sums[last].view(np.uint16)
        return np.where(fp16_is_nan(bits), CANONICAL_NAN_FP16, bits).astype(np.uint16)
    return sums[last].view(np.uint32)


def fp32_is_nan(bits):
    """True where the binary32 pattern is a NaN (exponent all ones, fraction non-zero)."""
    bits = np.asarray(bits, dtype=np.int64)
    return ((bits >> 23) & 0xFF == 0xFF) & (bits & 0x7F_FFFF != 0)


def fp16_is_nan(bits):
    """True where the binary16 pattern is a NaN (exponent all ones, fraction non-zero)."""
    bits = np.asarray(bits, dtype=np.int64)
    return ((bits >> 10) & 0x1F == 0x1F) & (bits & 0x3FF != 0)


def fp32_match(got, want):
    """Element-wise: equal bit patterns, or both NaN (any sign and payload)."""
    got = np.asarray(got, dtype=np.int64)
    want = np.asarray(want, dtype=np.int64)
    return (got == want) | (fp32_is_nan(got) & fp32_is_nan(want))


def canonical_nan(bits):
    """Replace every NaN pattern by :data:`CANONICAL_NAN` (returns int64)."""
    bits = np.asarray(bits, dtype=np.int64)
    return np.where(fp32_is_nan(bits), CANONICAL_NAN, bits)
