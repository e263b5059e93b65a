"""Golden model of P3-LLM (golden/p3/, golden/p3/report.py) against independent formulations.

References written here, not taken from the model: FP8-E4M3 from ``ml_dtypes`` and from a
textbook ``(1 + m/8) 2^(e-7)`` decode; FP8-S0E4M4 as the top byte of an FP16 magnitude and a
brute-force nearest search over all 256 codes for every non-negative FP16; BitMoD as a
per-element loop over each variant's value list; a scalar, bit-string decode of contract section 5
and a plain Python loop of the PE (Python integers, wrap by modulo); exact float64 dot products
of decoded values.
"""

import numpy as np
import pytest

from qllm_cores.golden import p3

ALL8 = np.arange(256)
ALL4 = np.arange(16)
INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


# --- independent scalar references -----------------------------------------------------------


def e4m3_value(code):
    """Textbook OCP E4M3FN decode of one code (NaN for S.1111.111)."""
    bits = format(int(code), "08b")
    s, e, m = int(bits[0]), int(bits[1:5], 2), int(bits[5:], 2)
    if e == 15 and m == 7:
        return float("nan")
    mag = (m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -mag if s else mag


def s0e4m4_value(code):
    """S0E4M4 is the top byte of a 15-bit FP16 magnitude: read it back through float16."""
    return float(np.array([int(code) << 6], np.uint16).view(np.float16)[0])


BITMOD_REAL = {0: 0.0, 1: 0.5, 2: 1.0, 3: 1.5, 4: 2.0, 5: 3.0, 6: 4.0, 7: 6.0}
SPECIAL_REAL = {0: 5.0, 1: -5.0, 2: 8.0, 3: -8.0}


def weight_real(code, wgt_fmt, sv_sel, zp):
    """Real weight of one 4-bit code, in its unit-free real value (BitMoD 0.5 steps)."""
    code = int(code)
    if wgt_fmt == 1:
        return float(code - zp)
    if code == 8:
        return SPECIAL_REAL[sv_sel]
    mag = BITMOD_REAL[code % 8]
    return -mag if code >= 8 else mag


def ref_term(a, w, act_fmt, wgt_fmt, sv_sel, zp):
    """(term, nan) of one lane, from contract section 5's words, on Python integers."""
    a = int(a)
    if act_fmt == 0:
        sign, e, m = a >> 7, (a >> 3) & 0xF, a & 0x7
        if e == 15 and m == 7:
            return 0, True
        mant = (16 if e else 0) + 2 * m
    else:
        sign, e, m = 0, a >> 4, a & 0xF
        mant = (16 if e else 0) + m
    wi = round(2 * weight_real(w, wgt_fmt, sv_sel, zp)) if wgt_fmt == 0 else int(w) - zp
    term = mant * wi * 2 ** (max(e, 1) - 1)
    return (-term if sign else term), False


def ref_pe(act, wgt, act_fmt, wgt_fmt, sv_sel, zp, first, last):
    """The PE as a loop over beats with a wrapped 32-bit accumulator (brief's rule)."""
    acc, ovf, nan = 0, False, False
    out = []
    for i in range(len(act)):
        if first[i]:
            acc, ovf, nan = 0, False, False
        total = 0
        for lane in range(4):
            t, n = ref_term(act[i][lane], wgt[i][lane], act_fmt[i], wgt_fmt[i], sv_sel[i],
                            zp[i])
            total += t
            nan = nan or n
        exact = acc + total
        ovf = ovf or not (INT32_MIN <= exact <= INT32_MAX)
        acc = (exact - INT32_MIN) % 2 ** 32 + INT32_MIN
        if last[i]:
            out.append((acc, ovf, nan))
    return out


def run_model(stream):
    res = p3.pe_run(*stream)
    return list(zip(res["acc"].tolist(), res["overflow"].tolist(), res["nan"].tolist()))


def random_stream(rng, n, p_first=0.1, p_last=0.15, nan_rate=0.0, fmt=None):
    act = rng.integers(0, 256, (n, 4))
    if nan_rate == 0.0:
        act = np.where(((act & 0x7F) == 0x7F), act ^ 1, act)   # no E4M3 NaN patterns
    else:
        act = np.where(rng.random((n, 4)) < nan_rate, 0x7F | (act & 0x80), act)
    wgt = rng.integers(0, 16, (n, 4))
    act_fmt = rng.integers(0, 2, n) if fmt is None else np.full(n, fmt[0])
    wgt_fmt = rng.integers(0, 2, n) if fmt is None else np.full(n, fmt[1])
    sv_sel = rng.integers(0, 4, n)
    zp = rng.integers(0, 16, n)
    first = rng.random(n) < p_first
    last = rng.random(n) < p_last
    return act, wgt, act_fmt, wgt_fmt, sv_sel, zp, first, last


# --- FP8-E4M3 --------------------------------------------------------------------------------


def test_e4m3_decode_all_codes_three_ways():
    via_ml = p3.decode_e4m3(ALL8)
    via_spec = p3.decode_act_value(ALL8, p3.ACT_E4M3)
    by_hand = np.array([e4m3_value(c) for c in ALL8])
    np.testing.assert_array_equal(via_ml, by_hand)        # NaN positions compare equal
    np.testing.assert_array_equal(via_spec, by_hand)
    assert np.flatnonzero(np.isnan(by_hand)).tolist() == [0x7F, 0xFF]
    assert via_spec[0x7E] == 448.0 and via_spec[0x01] == 2.0 ** -9


def nearest_e4m3_rne(y):
    """Brute force: the finite E4M3 code nearest to each y, ties to the even mantissa."""
    codes = np.array([c for c in ALL8 if (c & 0x7F) != 0x7F and c != 0x80])
    values = np.array([e4m3_value(c) for c in codes])
    out = []
    for v in y:
        d = np.abs(values - v)
        best = codes[d == d.min()]
        out.append(best[0] if best.size == 1 else [c for c in best if c % 2 == 0][0])
    return np.array(out)


def test_quantize_e4m3_is_per_token_rne_of_the_scaled_value():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 200)) * np.array([1e-3, 1, 30, 1e4, 1, 1])[:, None]
    x[4, 7] = -50.0                                          # outlier channel in one token
    codes, scales = p3.quantize_e4m3(x)
    assert codes.dtype == np.uint8 and scales.shape == (6, 1)
    np.testing.assert_array_equal(scales[:, 0], np.abs(x).max(axis=1) / 448)
    y = x / scales
    for row in range(6):
        want = nearest_e4m3_rne(y[row])                     # values: +0 and -0 compare equal
        np.testing.assert_array_equal(p3.decode_e4m3(codes[row]), p3.decode_e4m3(want))
    # the absmax element of each token is exactly +-448
    idx = np.abs(x).argmax(axis=1)
    top = p3.decode_e4m3(codes[np.arange(6), idx])
    np.testing.assert_array_equal(np.abs(top), 448.0)
    assert not np.isnan(p3.decode_e4m3(codes)).any()


@pytest.mark.parametrize("offset", [0.0, 2.0 ** -40, -(2.0 ** -40)])
def test_quantize_e4m3_rounds_once(offset):
    """Every midpoint between two E4M3 values, and each nudged by 2^-40 relative (a float32
    step would land back on the midpoint and round it to even): the code is the exactly
    nearest one (ties to even), from a token whose scale is 1."""
    values = p3.decode_e4m3(np.arange(256))
    finite = np.unique(values[np.isfinite(values)])
    mids = (finite[:-1] + finite[1:]) / 2
    mids = mids[mids != 0] * (1 + offset)
    x = np.concatenate([[448.0], mids])
    codes, scales = p3.quantize_e4m3(x)
    assert scales.tolist() == [1.0]
    want = nearest_e4m3_rne(x)
    np.testing.assert_array_equal(p3.decode_e4m3(codes), p3.decode_e4m3(want))
    if offset:                     # off the midpoint: the nearest is the one on its side
        side = np.sign(offset)
        assert (np.sign(p3.decode_e4m3(codes[1:]) - x[1:]) == side * np.sign(x[1:])).all()


def test_quantize_e4m3_axis_and_zero_token():
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 4.0]])
    codes, scales = p3.quantize_e4m3(x.T, axis=0)
    assert scales.shape == (1, 2)
    assert scales[0, 0] == 1.0 and (codes[:, 0] == 0).all()
    np.testing.assert_allclose(p3.dequantize_e4m3(codes, scales)[:, 1], [1.0, -2.0, 4.0],
                               rtol=1e-15)
    assert p3.decode_e4m3(codes[:, 1]).tolist() == [112.0, -224.0, 448.0]


@pytest.mark.parametrize("bad, exc, match", [
    (np.array([1.0, np.nan]), ValueError, "x must be finite"),
    (np.array([1.0, np.inf]), ValueError, "x must be finite"),
    (np.array([True, False]), TypeError, "x must hold real numbers"),
    (np.array(3.0), ValueError, "x must have at least 1 dimension"),
])
def test_quantize_e4m3_rejects_bad_x(bad, exc, match):
    with pytest.raises(exc, match=match):
        p3.quantize_e4m3(bad)


def test_quantize_e4m3_rejects_bad_axis():
    with pytest.raises(ValueError, match="axis must be in range -2..1, not 2"):
        p3.quantize_e4m3(np.ones((2, 3)), axis=2)
    with pytest.raises(TypeError, match="axis must be an integer"):
        p3.quantize_e4m3(np.ones((2, 3)), axis=1.0)


# --- FP8-S0E4M4 ------------------------------------------------------------------------------


def test_s0e4m4_decode_is_the_fp16_top_byte():
    want = np.array([s0e4m4_value(c) for c in ALL8])
    np.testing.assert_array_equal(p3.decode_s0e4m4(ALL8), want)
    np.testing.assert_array_equal(p3.decode_act_value(ALL8, p3.ACT_S0E4M4), want)
    assert want[0xFF] == p3.S0E4M4_MAX == 1.9375 and want[0xF0] == 1.0
    assert want[0x01] == 2.0 ** -18


def test_quantize_s0e4m4_exhaustive_against_nearest_search():
    bits = np.arange(0x7C01, dtype=np.uint16)               # +0 .. +inf, all non-negative
    x = bits.view(np.float16)
    got = p3.quantize_s0e4m4(x).astype(np.int64)
    values = np.array([s0e4m4_value(c) for c in ALL8])      # ascending in the code
    assert (np.diff(values) > 0).all()
    xv = x.astype(np.float64)
    finite = np.isfinite(xv)
    d = np.abs(xv[finite, None] - values[None, :])
    # nearest, ties to the larger value: the last code at minimum distance
    want = 255 - np.argmin(d[:, ::-1], axis=1)
    np.testing.assert_array_equal(got[finite], want)
    assert (got[~finite] == 0xFF).all()                     # +inf saturates


def test_quantize_s0e4m4_hand_values():
    x = np.array([0.0, -0.0, 1.0, 0.5, 1.9375, 1.96875, 65504.0], np.float16)
    assert p3.quantize_s0e4m4(x).tolist() == [0x00, 0x00, 0xF0, 0xE0, 0xFF, 0xFF, 0xFF]
    # rounding half up on the 6 dropped bits, with carry into the exponent
    b = np.array([0x3C1F, 0x3C20, 0x3BE0, 0x03F0, 0x03DF, 0x0020, 0x001F], np.uint16)
    got = p3.quantize_s0e4m4(b.view(np.float16)).tolist()
    assert got == [0xF0, 0xF1, 0xF0, 0x10, 0x0F, 0x01, 0x00]


@pytest.mark.parametrize("bad, exc, match", [
    (np.array([0.5, -0.25], np.float16), ValueError, "x_fp16 must be non-negative.*-0.25"),
    (np.array([np.nan], np.float16), ValueError, "x_fp16 must not hold NaN"),
    (np.array([0.5], np.float32), TypeError, "x_fp16 must be a float16 array, not float32"),
    ([0.5], TypeError, "x_fp16 must be a float16 array"),
])
def test_quantize_s0e4m4_rejects(bad, exc, match):
    with pytest.raises(exc, match=match):
        p3.quantize_s0e4m4(bad)


# --- BitMoD ----------------------------------------------------------------------------------


def test_decode_bitmod_table():
    for sv in range(4):
        got = p3.decode_bitmod(ALL4, sv)
        want = [round(2 * weight_real(c, 0, sv, 0)) for c in ALL4]
        assert got.tolist() == want
    assert p3.decode_bitmod(8, np.arange(4)).tolist() == [10, -10, 16, -16]


def brute_bitmod_group(x, ties="down"):
    """One group: loop over the four variants and the elements (Eq. 1, ties as documented)."""
    absmax = max(abs(v) for v in x)
    best = None
    for sv in range(4):
        values = [0.0] + [s * v for v in (0.5, 1, 1.5, 2, 3, 4, 6) for s in (1, -1)]
        values.append(SPECIAL_REAL[sv])
        qmax = max(abs(v) for v in values)
        scale = absmax / qmax if absmax > 0 else 1.0
        qs, err = [], 0.0
        for v in x:
            y = v / scale
            dist = [abs(y - c) for c in values]
            dmin = min(dist)
            tied = [c for c, d in zip(values, dist) if d == dmin]
            q = min(tied) if ties == "down" else max(tied, key=abs)
            qs.append(q)
            err += (v - q * scale) ** 2
        if best is None or err < best[0]:
            best = (err, sv, scale, qs)
    return best


def bitmod_code(q, sv):
    if q == SPECIAL_REAL[sv]:
        return 8
    mag = [k for k, v in BITMOD_REAL.items() if v == abs(q)][0]
    return mag | (8 if q < 0 else 0)


@pytest.mark.parametrize("ties", ["down", "away"])
@pytest.mark.parametrize("group", [8, 128])
def test_quantize_bitmod_against_loop(group, ties):
    rng = np.random.default_rng(group)
    w = rng.standard_normal((3, 4 * group))
    w = np.where(rng.random(w.shape) < 0.02, w * 8, w)
    w[1, :group] = np.rint(w[1, :group] * 2) / 2              # grid-friendly group
    # a row of values of the +-5 variants (scale 1) and a quarter of their midpoints
    grid, mids = [0, 0.5, 1, 1.5, 2, 3, 4, 5, 6], [0.25, 0.75, 1.25, 1.75, 2.5, 3.5]
    n = 4 * group
    w[2] = np.where(rng.random(n) < 0.25, rng.choice(mids, n), rng.choice(grid, n))
    w[2] *= rng.choice([-1.0, 1.0], n)
    w[2, ::group] = 6.0
    codes, sv_sel, scales = p3.quantize_bitmod(w, group, ties=ties)
    other = p3.quantize_bitmod(w, group, ties="away" if ties == "down" else "down")[0]
    assert (codes != other).any()                             # ties were met
    assert codes.shape == w.shape and sv_sel.shape == scales.shape == (3, 4)
    for r in range(3):
        for g in range(4):
            x = w[r, g * group:(g + 1) * group].tolist()
            err, sv, scale, qs = brute_bitmod_group(x, ties)
            assert sv_sel[r, g] == sv and scales[r, g] == scale
            want = [bitmod_code(q, sv) for q in qs]
            assert codes[r, g * group:(g + 1) * group].tolist() == want
            deq = p3.dequantize_bitmod(codes, sv_sel, scales, group)[r, g * group:(g + 1) * group]
            assert deq.tolist() == [q * scale for q in qs]
    assert len(np.unique(sv_sel)) > 1


def variant_errors(x):
    errs = []
    for sv in range(4):
        values = np.array(sorted([0.0] + [s * v for v in (0.5, 1, 1.5, 2, 3, 4, 6)
                                          for s in (1, -1)] + [SPECIAL_REAL[sv]]))
        scale = np.abs(x).max() / np.abs(values).max()
        q = values[np.abs(x[:, None] / scale - values[None, :]).argmin(axis=1)]
        errs.append(float(np.sum((x - q * scale) ** 2)))
    return errs


@pytest.mark.parametrize("ties, want", [
    # 6 and 5 make variant 0 (scale 1) the best; 1.25, -1.75, 0.25, -0.25 are midpoints
    ("down", [0b0111, 0b1000, 0b0010, 0b1100, 0b0000, 0b1001, 0b0010, 0b1010]),
    ("away", [0b0111, 0b1000, 0b0011, 0b1100, 0b0001, 0b1001, 0b0010, 0b1010]),
])
def test_bitmod_ties_between_values(ties, want):
    """The authors' quantizer takes the smaller neighbour of a midpoint (1.25 -> 1, -1.75 ->
    -2, 0.25 -> 0, -0.25 -> -0.5); ``ties="away"`` the one farther from zero."""
    x = np.array([6.0, 5.0, 1.25, -1.75, 0.25, -0.25, 1.0, -1.0])
    codes, sv, scales = p3.quantize_bitmod(x, 8, ties=ties)
    assert sv.tolist() == [0] and scales.tolist() == [1.0]
    assert codes.tolist() == want


def test_bitmod_ties_default_is_the_authors():
    x = np.array([6.0, 5.0, 1.25, -1.75, 0.25, -0.25, 1.0, -1.0])
    assert (p3.quantize_bitmod(x, 8)[0] == p3.quantize_bitmod(x, 8, ties="down")[0]).all()


def test_bitmod_ties_keep_the_earlier_variant():
    # sv_sel 0 and 1 tie (nothing near +-5 after the /6 scale), both beat the /8 variants
    x = np.array([6.0, -6.0, 3.0, -1.0, 0.5] + [1.5] * 11)
    e = variant_errors(x)
    assert e[0] == e[1] == 0.0 and min(e[2], e[3]) > 0
    assert p3.quantize_bitmod(x, 16)[1].tolist() == [0]
    # sv_sel 2 and 3 tie (+-8 both present, each variant loses one of them), beating 0 and 1
    x = np.array([8.0, -8.0] + [1.0] * 62)
    e = variant_errors(x)
    assert e[2] == e[3] == 4.0 and min(e[0], e[1]) > 4.0
    codes, sv, scales = p3.quantize_bitmod(x, 64)
    assert sv.tolist() == [2] and scales.tolist() == [1.0]
    assert codes[:2].tolist() == [8, 0b1111]                  # +8 special, -8 -> -6


@pytest.mark.parametrize("special, want", [(5.0, 0), (-5.0, 1), (8.0, 2), (-8.0, 3)])
def test_bitmod_picks_the_needed_special_value(special, want):
    x = np.array([special] * 4 + [-special * 0.75, special * 0.25, 0.0, special * 0.5])
    if abs(special) == 5.0:
        x[0] = 6.0 * np.sign(special)                         # absmax -> 6, five fits exactly
    codes, sv, _ = p3.quantize_bitmod(x, 8)
    assert sv.tolist() == [want]
    assert 8 in codes.tolist()


def test_bitmod_zero_group():
    codes, sv, scales = p3.quantize_bitmod(np.zeros((2, 16)), 16)
    assert (codes == 0).all() and sv.tolist() == [[0], [0]] and scales.tolist() == [[1.0]] * 2


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"w": np.ones(100)}, ValueError, r"w's last axis \(100\) must be a multiple of group"),
    ({"w": np.ones(128), "group": 0}, ValueError, "group must be in range >= 1, not 0"),
    ({"w": np.ones(128), "group": 64.0}, TypeError, "group must be an integer"),
    ({"w": np.array([1 + 2j] * 128)}, TypeError, "w must hold real numbers"),
    ({"w": np.full(128, np.nan)}, ValueError, "w must be finite"),
    ({"w": np.ones(128), "ties": "even"}, ValueError,
     "ties must be one of 'away', 'down', not 'even'"),
])
def test_quantize_bitmod_rejects(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        p3.quantize_bitmod(**kwargs)


def test_decode_bitmod_rejects():
    with pytest.raises(ValueError, match=r"codes must hold 4-bit codes \(0..15\), not 16"):
        p3.decode_bitmod([16], 0)
    with pytest.raises(ValueError, match=r"sv_sel must hold .* \(0..3\), not 4"):
        p3.decode_bitmod([1], 4)
    with pytest.raises(TypeError, match="codes must hold integers, not float64"):
        p3.decode_bitmod([1.0], 0)


# --- INT4 asymmetric, baselines, smoothing ---------------------------------------------------


def test_decode_int4_all_pairs():
    q, zp = np.meshgrid(ALL4, ALL4, indexing="ij")
    np.testing.assert_array_equal(p3.decode_int4(q, zp), q - zp)
    with pytest.raises(ValueError, match="zp must hold"):
        p3.decode_int4(3, 16)


def test_quantize_int4_asym_hand_and_bound():
    q, zp, s = p3.quantize_int4_asym(np.array([-1.0, 0.0, 2.0, 0.5]), 4)
    assert s.tolist() == [0.2] and zp.tolist() == [5]
    assert q.tolist() == [0, 5, 15, 7]                        # 0.5 / 0.2 ~ 2.5 -> 2
    # one-signed groups: zero stays representable, zp at an end
    q, zp, s = p3.quantize_int4_asym(np.array([[1.0, 3.0], [-2.0, -0.5]]), 2)
    assert zp.tolist() == [[0], [15]] and s[:, 0].tolist() == [0.2, 2 / 15]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((50, 256)) * rng.uniform(0.01, 100, (50, 1)) + rng.normal(0, 1,
                                                                                      (50, 1))
    q, zp, s = p3.quantize_int4_asym(x, 128)
    assert q.max() <= 15 and zp.max() <= 15
    err = np.abs(p3.dequantize_int4_asym(q, zp, s, 128) - x)
    assert (err <= np.repeat(s, 128, -1) * (0.5 + 1e-9)).all()
    # the per-group formula, one group at a time
    for r, g in [(0, 0), (13, 1), (49, 1)]:
        v = x[r, 128 * g:128 * (g + 1)]
        lo, hi = min(v.min(), 0.0), max(v.max(), 0.0)
        scale = (hi - lo) / 15
        z = min(max(round(-lo / scale), 0), 15)               # Python round: half to even
        want = [min(max(round(e / scale) + z, 0), 15) for e in v]
        assert s[r, g] == scale and zp[r, g] == z and q[r, 128 * g:128 * (g + 1)].tolist() == want


def test_quantize_int4_asym_reference_reading():
    """``zero_in_range=False``: P3's public quantizer (range min..max of the group, the zero
    point and the far values clipped): a one-signed group's zero point sits at an end and its
    values beyond 15 steps clip; groups holding both signs are the same in both readings."""
    x = np.array([[1.0, 2.5, 4.0, 3.0], [-2.0, -0.5, -1.25, -2.0], [-1.0, 0.0, 2.0, 0.5]])
    q, zp, s = p3.quantize_int4_asym(x, 4, zero_in_range=False)
    assert s[:, 0].tolist() == [0.2, 0.1, 0.2] and zp[:, 0].tolist() == [0, 15, 5]
    assert q[0].tolist() == [5, 12, 15, 15]           # 2.5 / 0.2 = 12.5 -> 12; 20 and 15 -> 15
    assert q[1].tolist() == [0, 10, 3, 0]             # -20 + 15 clips; -5 + 15; -12 + 15
    widened = p3.quantize_int4_asym(x, 4)
    assert all((a[2] == b[2]).all() for a, b in zip(widened, (q, zp, s)))
    assert p3.quantize_int4_asym(np.full(4, 3.0), 4, zero_in_range=False)[2].tolist() == [1.0]
    with pytest.raises(TypeError, match="zero_in_range must be a bool, not 1"):
        p3.quantize_int4_asym(x, 4, zero_in_range=1)


def test_fp4_and_int_baselines():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 64))
    codes, s = p3.quantize_fp4(w, 32)
    assert (codes != 8).all()                                 # -0 is never produced
    y = w / np.repeat(s, 32, -1)
    grid = np.array(sorted({v * t for v in p3.FP4_VALUES for t in (1, -1)}))
    want = grid[np.abs(y[..., None] - grid).argmin(-1)]
    np.testing.assert_array_equal(p3.decode_fp4(codes), want)
    np.testing.assert_array_equal(np.abs(p3.dequantize_fp4(codes, s, 32)).reshape(4, 2, 32)
                                  .max(-1), s * 6)
    q, s = p3.quantize_int4_sym(w, 16)
    assert np.abs(q).max() == 7
    assert (np.abs(p3.dequantize_int4_sym(q, s, 16) - w) <= np.repeat(s, 16, -1) / 2 + 1e-12).all()
    q, s = p3.quantize_int8(w)
    assert np.abs(q).max() == 127 and s.shape == (4, 1)
    assert (np.abs(p3.dequantize_int8(q, s) - w) <= s / 2 + 1e-12).all()


def test_smooth_keys():
    rng = np.random.default_rng(5)
    K = rng.standard_normal((2, 10, 6))
    K[:, :, 2] *= 40                                           # outlier channel
    K[0, :, 4] = 0.0                                           # dead channel
    ks, f = p3.smooth_keys(K, n_prefill=6)
    assert f.shape == (2, 6)
    for b in range(2):
        for c in range(6):
            m = max(abs(v) for v in K[b, :6, c])
            assert f[b, c] == (m if m > 0 else 1.0)
    np.testing.assert_allclose(ks * f[:, None, :], K, rtol=1e-15)
    assert np.abs(ks[:, :6]).max() <= 1.0
    f_all = np.abs(K).max(axis=1)
    f_all[f_all == 0] = 1.0
    np.testing.assert_array_equal(p3.smooth_keys(K)[1], f_all)
    with pytest.raises(ValueError, match="n_prefill must be in range 1..10, not 11"):
        p3.smooth_keys(K, n_prefill=11)
    with pytest.raises(ValueError, match="K must have shape"):
        p3.smooth_keys(np.ones(4))
