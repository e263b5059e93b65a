"""hdl/common/fp32_steps: the binary32 adder (:func:`fp32_add`) and the rounding to binary16
(:func:`fp32_to_fp16`) simulated with Amaranth's simulator against NumPy.

The expected values come from NumPy's float32 addition (round to nearest, ties to even) and its
float32 -> float16 conversion (cross-checked with :mod:`struct`'s ``'e'`` format), never from
the implementation. The adder has no subnormal and no overflow path (the module's docstring):
its operands are normal numbers, zeros, infinities and NaN, and pairs whose sum would be a
binary32 subnormal or overflow are left out. Each check runs the purely combinational steps
and again with every optional register (one vector per clock cycle through the pipeline).
"""

import struct
from fractions import Fraction

import numpy as np
import pytest
from amaranth.hdl import Module, Shape, Signal
from amaranth.sim import Simulator

from qllm_cores.hdl.common.fp32_steps import (ADD_CUTS, FP16_NAN, FP32_UNPACKED, fp32_add,
                                              fp32_to_fp16)

F32 = np.float32
MIN_NORMAL = 2.0 ** -126
MAX_FINITE = float(np.finfo(np.float32).max)

# --- FP32_UNPACKED <-> binary32 ---------------------------------------------------------------

_FIELDS = {name: (FP32_UNPACKED[name].offset, Shape.cast(FP32_UNPACKED[name].shape).width)
           for name in ("sig", "exp", "sign", "zero", "inf", "nan")}


def f32(value):
    """``value`` (a Python float, exactly representable) as np.float32, checked exact."""
    result = F32(value)
    assert np.isnan(value) or float(result) == value, value
    return result


def near(value):
    """The binary32 number nearest to ``value``, as a Python float."""
    return float(F32(value))


def f32_bits(bits):
    return np.uint32(bits).view(np.float32)


def bits_of(value):
    return int(F32(value).view(np.uint32))


def to_unpacked(value):
    """The FP32_UNPACKED fields of binary32 ``value`` (no subnormals: the format has none).
    Zero, infinities and NaN carry ``sig = exp = 0`` and their class flag."""
    bits = bits_of(value)
    sign, exp, frac = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    fields = {"sig": 0, "exp": 0, "sign": sign, "zero": 0, "inf": 0, "nan": 0}
    if exp == 0xFF:
        fields["nan" if frac else "inf"] = 1
        if frac:
            fields["sign"] = 0
    elif exp == 0:
        if frac:
            raise ValueError(f"{float(value)!r} is subnormal")
        fields["zero"] = 1
    else:
        fields["sig"], fields["exp"] = frac | 1 << 23, exp
    return fields


def pack(fields):
    """The FP32_UNPACKED fields as the struct's integer value."""
    word = 0
    for name, (offset, width) in _FIELDS.items():
        assert 0 <= fields[name] < 1 << width
        word |= fields[name] << offset
    return word


def unpack(word):
    return {name: (word >> offset) & ((1 << width) - 1)
            for name, (offset, width) in _FIELDS.items()}


def from_unpacked(fields):
    """The binary32 value of FP32_UNPACKED ``fields`` (np.float32), or a string naming why
    the encoding is malformed (more than one class flag, a zero with a significand, a normal
    number without its hidden bit or with a reserved exponent)."""
    classes = [name for name in ("zero", "inf", "nan") if fields[name]]
    if len(classes) > 1:
        return f"malformed: class flags {classes}"
    if fields["nan"]:
        return F32(np.nan)
    sign = fields["sign"] << 31
    if fields["inf"]:
        return f32_bits(sign | 0x7F800000)
    if fields["zero"]:
        if fields["sig"] or fields["exp"]:
            return f"malformed: zero with sig={fields['sig']:#x} exp={fields['exp']}"
        return f32_bits(sign)
    if not fields["sig"] >> 23 or not 1 <= fields["exp"] <= 254:
        return f"malformed: normal with sig={fields['sig']:#x} exp={fields['exp']}"
    return f32_bits(sign | fields["exp"] << 23 | (fields["sig"] & 0x7FFFFF))


def test_unpacked_round_trip():
    for value in (1.0, -1.5, MIN_NORMAL, -MAX_FINITE, 0.0, -0.0, np.inf, -np.inf):
        fields = to_unpacked(F32(value))
        assert unpack(pack(fields)) == fields
        assert bits_of(from_unpacked(fields)) == bits_of(F32(value))
    assert to_unpacked(F32(1.0)) == {"sig": 1 << 23, "exp": 127, "sign": 0, "zero": 0,
                                     "inf": 0, "nan": 0}
    assert to_unpacked(F32(-0.0)) == {"sig": 0, "exp": 0, "sign": 1, "zero": 1, "inf": 0,
                                      "nan": 0}
    assert np.isnan(from_unpacked(to_unpacked(F32(np.nan))))
    with pytest.raises(ValueError):
        to_unpacked(F32(2.0 ** -149))


def describe(value):
    value = F32(value)
    return f"{float(value)!r} ({bits_of(value):#010x})"


# --- simulation -------------------------------------------------------------------------------


def _run(build, vectors, clocked):
    """Simulates the design ``build(m)`` adds to ``m`` (it returns its input signals, its
    output and its number of registers) on ``vectors`` (tuples of input integers):
    combinationally, or one vector per clock cycle through the registers. Returns the output
    integers in vector order."""
    m = Module()
    inputs, output, registers = build(m)
    assert (registers > 0) == clocked
    results = []

    async def bench(ctx):
        for cycle in range(len(vectors) + registers):
            if cycle < len(vectors):
                for signal, value in zip(inputs, vectors[cycle]):
                    ctx.set(signal, value)
            if not clocked:
                await ctx.delay(1e-9)         # settle the inputs together (faster than per set)
            if cycle >= registers:
                # The vector set `registers` clock edges ago (each register loads every cycle).
                results.append(ctx.get(output))
            if clocked:
                await ctx.tick()

    sim = Simulator(m)
    if clocked:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return results


# --- fp32_add ---------------------------------------------------------------------------------


def _reference_sum(x, y):
    """NumPy's float32 ``x + y`` (round to nearest even), or None if the pair is outside the
    adder's domain (a subnormal or overflowing sum of finite operands)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = F32(x) + F32(y)
    if np.isfinite(x) and np.isfinite(y):
        if not np.isfinite(total) or (total != 0 and abs(float(total)) < MIN_NORMAL):
            return None
    return total


def _directed_add_pairs():
    """The corners, as ``(x, y)`` binary32 pairs, each inside the adder's domain."""
    u = 2.0 ** -23                       # ulp of 1.0
    below2 = 2.0 - u                     # 0x3FFFFFFF: all-ones significand
    pairs = [
        # Exact cancellation gives +0, in either order and at either end of the range.
        (1.0, -1.0), (-1.0, 1.0), (1.5, -1.5), (-below2, below2), (MAX_FINITE, -MAX_FINITE),
        (-MAX_FINITE, MAX_FINITE), (MIN_NORMAL, -MIN_NORMAL), (-MIN_NORMAL, MIN_NORMAL),
        (near(1e-30), -near(1e-30)), (-near(3e30), near(3e30)),
        # Signed zeros: only -0 + -0 is -0.
        (-0.0, -0.0), (0.0, -0.0), (-0.0, 0.0), (0.0, 0.0),
        # A zero operand (exp = 0: the largest exponent difference) leaves the other exact.
        *[(z, v) for z in (0.0, -0.0) for v in (1.0, -1.0, below2, -MAX_FINITE, MIN_NORMAL,
                                                 -MIN_NORMAL * 1.5, near(3e-20), near(7e25))],
        *[(v, z) for z in (0.0, -0.0) for v in (1.0, -below2, MAX_FINITE, -MIN_NORMAL)],
        # Carries out of the significand.
        (below2, below2), (-below2, -below2), (below2, 1.0 + u), (1.5, 1.5), (1.0, 1.0),
        (MAX_FINITE / 2, MAX_FINITE / 2), (MIN_NORMAL, MIN_NORMAL),
        (1.0 + u, 1.0 + 2 * u),          # 2 + 3u: a carry with a tie, to even (2 + 4u)
        (1.0 + u, 1.0),                  # 2 + u: a carry with a tie, to even (2)
        (1.0 + 3 * u, 1.0),              # 2 + 3u: a carry with a tie, up to even (2 + 4u)
        (1.5, 1.5 + u), (1.5 + u, 1.5 + 2 * u),
        # Ties without a carry: to even.
        (1.0, u / 2), (1.0 + u, u / 2), (1.0 + 2 * u, u / 2), (-1.0 - u, -u / 2),
        (1.0, u / 2 * (1 + u)),          # just above the tie: up
        (1.0 + u, -u / 2),               # 1 + u/2: tie, to even (1)
        (1.0 + 2 * u, -u / 2),           # 1 + 1.5u: tie, to even (1 + 2u)
        (1.5, 0.75 * u), (1.5, 0.25 * u),
        # Rounding an all-ones significand up carries into the exponent.
        (below2, u / 2), (below2, 0.75 * u), (below2, u / 2 * (1 + u)), (-below2, -u / 2),
        (below2 * 2.0 ** 50, 2.0 ** 50 * u / 2), (below2 * 2.0 ** -60, 2.0 ** -60 * 0.625 * u),
        (below2, u / 2 * (1 - u)),       # just below the tie: stays
        (2.0, -u / 4), (2.0, -u / 2), (2.0, -0.75 * u), (2.0, -2.0 ** -60), (1.0, -2.0 ** -60),
        (2.0, -u / 2 * (1 + u)), (-4.0, u / 2 * 2), (1.0, -u / 4), (1.0, -u / 4 * (1 + u)),
        (1.0, -u / 4 * (1 - u)), (1.0, -u / 2), (1.0 + u, -u / 4 * 3),
        # Subtraction normalizing by one place, with guard and sticky bits.
        (1.0, -(u / 2 + u / 4)), (1.0 + u, -(u / 2 + u / 4 + u / 8)), (2.0, -(1.0 + u)),
        (2.0, -(1.0 + 3 * u)), (4.0, -(1.0 + u)), (4.0, -(2.0 + 2 * u)),
        # Large exponent differences: the small operand all in the sticky bit.
        *[(s * 1.0, t * 2.0 ** -d * m) for d in (24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 35,
                                                  40, 60, 64, 100, 120)
          for s in (1, -1) for t in (1, -1) for m in (1.0, 1.5, below2)],
        (MAX_FINITE, 1.0), (MAX_FINITE, -1.0), (-MAX_FINITE, MIN_NORMAL),
        (MAX_FINITE, -MIN_NORMAL), (MIN_NORMAL, -MAX_FINITE), (2.0 ** 100, 2.0 ** -100),
        (2.0 ** -100, -(2.0 ** 100)),
        (MAX_FINITE, -(2.0 ** 103)),     # MAX_FINITE minus half an ulp: tie, to even
        (MAX_FINITE, -(2.0 ** 104)),     # exact
        (-MAX_FINITE, 2.0 ** 102),       # a quarter of an ulp: stays
        # The bottom of the range: sums that stay normal.
        (MIN_NORMAL * 2.5, -MIN_NORMAL * 1.5),
        (MIN_NORMAL * 3, -(2.0 ** -125)), (MIN_NORMAL * (1 + u), MIN_NORMAL),
        (2.0 ** -125 * below2, -MIN_NORMAL * (1 + u)),
        # Equal exponents, the smaller magnitude first (the sum takes the other's sign).
        (1.25, -1.5), (-1.25, 1.5), (1.0 + u, -(1.0 + 2 * u)), (-(1.0 + u), 1.0 + 2 * u),
        (1.0, -below2), (-1.0, below2), (3.0, -3.5), (-(2.0 ** 77), 1.5 * 2.0 ** 77),
        (1.5, -1.5 - u), (1.0, -(1.0 + u)),
        # Infinities and NaN.
        (np.inf, -np.inf), (-np.inf, np.inf), (np.inf, np.inf), (-np.inf, -np.inf),
        (np.inf, 1.0), (np.inf, -MAX_FINITE), (-np.inf, near(1e30)), (1.0, -np.inf),
        (-MAX_FINITE, np.inf), (np.inf, 0.0), (-0.0, -np.inf), (np.inf, -0.0),
        (np.nan, 1.0), (1.0, np.nan), (np.nan, np.inf), (-np.inf, np.nan), (np.nan, np.nan),
        (np.nan, 0.0), (-0.0, np.nan),
    ]
    result = []
    for x, y in pairs:
        x, y = f32(x), f32(y)
        assert _reference_sum(x, y) is not None, (x, y)
        result.append((x, y))
    return result


def _random_fraction(rng, mode, low_bits):
    """A 23-bit fraction: uniform, (nearly) all ones, sparse, or with its lowest ``low_bits``
    bits a tie pattern (100...0) so that the bits the alignment drops make a tie."""
    if mode == 0:
        return int(rng.integers(0, 1 << 23))
    if mode == 1:
        return (1 << 23) - 1 - int(rng.integers(0, 4)) * int(rng.integers(0, 2))
    if mode == 2:
        frac = 0
        for _ in range(int(rng.integers(0, 4))):
            frac |= 1 << int(rng.integers(0, 23))
        return frac
    frac = int(rng.integers(0, 1 << 23))
    if 1 <= low_bits <= 23:
        frac = (frac >> low_bits << low_bits) | 1 << (low_bits - 1)
    return frac


def _random_add_pairs(rng, count, differences, exp_range=(30, 225)):
    """``count`` pairs in the adder's domain: exponent differences drawn from
    ``differences``, random signs and significand patterns, either order."""
    pairs = []
    while len(pairs) < count:
        d = int(rng.choice(differences))
        big_exp = int(rng.integers(max(exp_range[0], 1 + d), exp_range[1] + 1))
        small_exp = big_exp - d
        k = d + int(rng.integers(-1, 2))
        fracs = [_random_fraction(rng, int(rng.integers(0, 4)), k) for _ in range(2)]
        signs = [int(rng.integers(0, 2)) for _ in range(2)]
        x = f32_bits(signs[0] << 31 | big_exp << 23 | fracs[0])
        y = f32_bits(signs[1] << 31 | small_exp << 23 | fracs[1])
        if rng.integers(0, 2):
            x, y = y, x
        if _reference_sum(x, y) is not None:
            pairs.append((x, y))
    return pairs


def _near_power_pairs(rng, count):
    """``2^a - t`` with ``t`` below an ulp of ``2^a``'s lower binade and far below 2^a (an
    exponent difference of 24..30): the difference normalizes one place left to an all-ones
    significand that rounds up into the exponent or stays, depending on the dropped bits."""
    pairs = []
    while len(pairs) < count:
        a = int(rng.integers(32, 230))
        d = int(rng.integers(24, 31))
        frac = _random_fraction(rng, int(rng.integers(0, 4)), int(rng.integers(0, 8)))
        sign = int(rng.integers(0, 2))
        x = f32_bits(sign << 31 | a << 23)
        y = f32_bits((1 - sign) << 31 | (a - d) << 23 | frac)
        pairs.append((y, x) if rng.integers(0, 2) else (x, y))
    return pairs


def _equal_exponent_pairs(rng, count):
    """Opposite signs and equal exponents, the smaller magnitude first."""
    pairs = []
    while len(pairs) < count:
        e = int(rng.integers(2, 254))
        fx, fy = sorted(int(v) for v in rng.integers(0, 1 << 23, size=2))
        if rng.integers(0, 4) == 0:
            fy = min((1 << 23) - 1, fx + int(rng.integers(0, 3)))
        sign = int(rng.integers(0, 2))
        x = f32_bits(sign << 31 | e << 23 | fx)
        y = f32_bits((1 - sign) << 31 | e << 23 | fy)
        if _reference_sum(x, y) is not None:
            pairs.append((x, y))
    return pairs


def _special_pairs(rng, count):
    """Random finite operands against zeros, infinities and NaN (both orders)."""
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan]
    pairs = []
    for _ in range(count):
        finite = f32_bits(int(rng.integers(0, 2)) << 31 | int(rng.integers(1, 255)) << 23
                          | int(rng.integers(0, 1 << 23)))
        special = F32(specials[int(rng.integers(0, len(specials)))])
        pairs.append((finite, special) if rng.integers(0, 2) else (special, finite))
    return pairs


def _random_add_vectors():
    rng = np.random.default_rng(20240611)
    return [
        *_random_add_pairs(rng, 4500, np.arange(0, 31)),
        *_random_add_pairs(rng, 400, np.arange(31, 254), exp_range=(1, 254)),
        *_random_add_pairs(rng, 400, np.arange(0, 31), exp_range=(1, 254)),
        *_near_power_pairs(rng, 600),
        *_equal_exponent_pairs(rng, 600),
        *_special_pairs(rng, 200),
    ]


DIRECTED_ADD_VECTORS = _directed_add_pairs()
RANDOM_ADD_VECTORS = _random_add_vectors()
#: All of them through the registered adder (cheap to simulate: one vector per cycle); the
#: combinational one (about three times slower in Amaranth's simulator, its settling runs
#: through every step) takes the directed vectors and every other random one.
ADD_VECTORS = DIRECTED_ADD_VECTORS + RANDOM_ADD_VECTORS
COMB_ADD_VECTORS = DIRECTED_ADD_VECTORS + RANDOM_ADD_VECTORS[::2]


def _add_mismatches(pairs, got_words):
    mismatches = []
    for (x, y), word in zip(pairs, got_words, strict=True):
        expected = _reference_sum(x, y)
        got = from_unpacked(unpack(word))
        if isinstance(got, str):
            ok = False
        elif np.isnan(expected):
            ok = bool(np.isnan(got))
        else:
            ok = not np.isnan(got) and bits_of(got) == bits_of(expected)
        if not ok:
            mismatches.append(f"{describe(x)} + {describe(y)}: expected {describe(expected)}, "
                              f"got {got if isinstance(got, str) else describe(got)} "
                              f"{unpack(word)}")
    return mismatches


def _build_add(cuts):
    def build(m):
        x = Signal(FP32_UNPACKED, name="x")
        y = Signal(FP32_UNPACKED, name="y")
        total, registers = fp32_add(m, x, y, cuts=cuts)
        assert registers == len(cuts)
        return (x.as_value(), y.as_value()), total.as_value(), registers
    return build


def test_add_vectors_cover_the_corners():
    # The vector set itself: every exponent difference 0..30, both operand orders, all four
    # sign combinations, and ties and carries into the exponent among the expected sums.
    finite = [(x, y) for x, y in COMB_ADD_VECTORS if np.isfinite(x) and np.isfinite(y)
              and x != 0 and y != 0]
    differences = {abs(int(bits_of(x) >> 23 & 0xFF) - int(bits_of(y) >> 23 & 0xFF))
                   for x, y in finite}
    assert set(range(31)) <= differences
    assert {(x < 0, y < 0) for x, y in finite} == {(a, b) for a in (0, 1) for b in (0, 1)}
    assert any(abs(x) < abs(y) and (bits_of(x) >> 23 & 0xFF) == (bits_of(y) >> 23 & 0xFF)
               and (x < 0) != (y < 0) for x, y in finite)
    ties = 0
    for x, y in finite:
        total = _reference_sum(x, y)
        error = abs(Fraction(float(total)) - Fraction(float(x)) - Fraction(float(y)))
        # Half an ulp of the result's binade or of the one below (a rounding up into it).
        ulp = Fraction(2) ** (int(bits_of(total) >> 23 & 0xFF) - 150)
        ties += error in (ulp / 2, ulp / 4)
    assert ties > 100, ties


@pytest.mark.parametrize("cuts", [(), ADD_CUTS], ids=["comb", "all_cuts"])
def test_fp32_add_matches_numpy(cuts):
    pairs = ADD_VECTORS if cuts else COMB_ADD_VECTORS
    vectors = [(pack(to_unpacked(x)), pack(to_unpacked(y))) for x, y in pairs]
    got = _run(_build_add(cuts), vectors, clocked=bool(cuts))
    mismatches = _add_mismatches(pairs, got)
    assert not mismatches, (f"{len(mismatches)} of {len(pairs)} sums differ:\n"
                            + "\n".join(mismatches[:30]))


# --- fp32_to_fp16 -----------------------------------------------------------------------------


def _reference_fp16(value):
    """The binary16 bits of binary32 ``value`` rounded to nearest even (NumPy), every NaN
    FP16_NAN; finite non-overflowing results checked against :mod:`struct`'s conversion."""
    if np.isnan(value):
        return FP16_NAN
    with np.errstate(over="ignore"):
        bits = int(F32(value).astype(np.float16).view(np.uint16))
    if bits & 0x7C00 != 0x7C00:
        assert struct.unpack("<H", struct.pack("<e", float(value)))[0] == bits, value
    return bits


def _fp16_value(bits):
    return float(np.uint16(bits).view(np.float16))


def _fp16_vectors():
    rng = np.random.default_rng(16)
    values = []
    # Every binary32 exponent of interest (2^-30 .. 2^20) with random and patterned
    # significands (the 13 dropped bits of a normal binary16: tie 0x1000, odd kept + tie, just
    # below and above the tie, all ones), both signs; a few of every other exponent.
    patterns = [0, 0x1000, 0x3000, 0x0FFF, 0x1001, 0x2FFF, 0x7FFFFF, 0x7FF000, 0x7FEFFF,
                0x400000, 0x000001]
    for exp in range(1, 255):
        fracs = patterns + [int(v) for v in rng.integers(0, 1 << 23, size=24)]
        if not 127 - 30 <= exp <= 127 + 20:
            fracs = fracs[:3] + fracs[-3:]
        for frac in fracs:
            sign = int(rng.integers(0, 2))
            values.append(f32_bits(sign << 31 | exp << 23 | frac))
    # Exact binary16 midpoints (ties) and their binary32 neighbours: normal range (a sample of
    # every exponent), subnormal range (all of them), into the next binade and to the smallest
    # normal.
    halves = []
    for exp in range(1, 31):
        halves += [exp << 10 | m for m in (0, 1, 2, 3, 0x1FF, 0x200, 0x3FE, 0x3FF)]
        halves += [exp << 10 | int(m) for m in rng.integers(0, 1024, size=4)]
    halves += list(range(0, 0x400))                 # subnormals (0 .. 1023 * 2^-24)
    for h in halves:
        if h == 0x7BFF:
            continue                                # 65520: below
        mid = f32((_fp16_value(h) + _fp16_value(h + 1)) / 2)
        for v in (mid, np.nextafter(mid, F32(0)), np.nextafter(mid, F32(np.inf))):
            if v != 0 and abs(float(v)) < MIN_NORMAL:
                continue
            values += [F32(v), F32(-v)]
    # The overflow threshold: 65504 is the largest binary16, 65520 its midpoint to 2^16.
    for v in (65504.0, 65520.0, 65536.0, 65519.0, 65521.0, 1e5, MAX_FINITE, 2.0 ** 15,
              2.0 ** 16, 32768.0 * 1.9990234375):
        values += [f32(v), f32(-v)]
    for base in (65504.0, 65520.0):
        values += [np.nextafter(f32(base), F32(0)), np.nextafter(f32(base), F32(np.inf))]
        values += [-np.nextafter(f32(base), F32(0)), -np.nextafter(f32(base), F32(np.inf))]
    # The bottom: the smallest subnormal, half of it (a tie to 0), around both; the largest
    # subnormal rounding up to the smallest normal.
    tiny = 2.0 ** -24
    for v in (tiny, tiny / 2, 1.5 * tiny, 2.5 * tiny, tiny / 4, 2.0 ** -26, 2.0 ** -30,
              MIN_NORMAL, 1023.5 * tiny, 1023.25 * tiny, 2.0 ** -14, 2.0 ** -14 * (1 - 2 ** -12)):
        values += [f32(v), f32(-v)]
        values += [np.nextafter(f32(v), F32(0)), np.nextafter(f32(v), F32(1))]
    values += [F32(0.0), F32(-0.0), F32(np.inf), F32(-np.inf), F32(np.nan)]
    # No binary32 subnormals (FP32_UNPACKED has none).
    return [v for v in values if not 0 < abs(float(v)) < MIN_NORMAL]


FP16_VECTORS = _fp16_vectors()


def test_fp16_vectors_cover_the_corners():
    expected = [_reference_fp16(v) for v in FP16_VECTORS]
    assert {0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x8001, 0x7BFF, 0x0400, FP16_NAN} \
        <= set(expected)
    assert sum(1 for e in expected if 0 < e & 0x7FFF < 0x400) > 1000   # subnormal results
    assert _reference_fp16(F32(65520.0)) == 0x7C00
    assert _reference_fp16(np.nextafter(F32(65520.0), F32(0))) == 0x7BFF
    assert _reference_fp16(F32(2.0 ** -25)) == 0x0000
    assert _reference_fp16(np.nextafter(F32(2.0 ** -25), F32(1))) == 0x0001


def _build_fp16(staged):
    def build(m):
        x = Signal(FP32_UNPACKED, name="x")
        stages = []

        def stage(value, name):
            register = Signal.like(value, name=name)
            m.d.sync += register.eq(value)
            stages.append(name)
            return register

        bits, calls = fp32_to_fp16(m, x, stage=stage if staged else None)
        assert calls == 3
        assert len(stages) == (3 if staged else 0)
        return (x.as_value(),), bits, len(stages)
    return build


@pytest.mark.parametrize("staged", [False, True], ids=["comb", "staged"])
def test_fp32_to_fp16_matches_numpy(staged):
    vectors = [(pack(to_unpacked(v)),) for v in FP16_VECTORS]
    got = _run(_build_fp16(staged), vectors, clocked=staged)
    mismatches = [f"{describe(v)}: expected {_reference_fp16(v):#06x}, got {g:#06x}"
                  for v, g in zip(FP16_VECTORS, got, strict=True) if g != _reference_fp16(v)]
    assert not mismatches, (f"{len(mismatches)} of {len(FP16_VECTORS)} roundings differ:\n"
                            + "\n".join(mismatches[:30]))
