"""Golden model of Oaken (golden/oaken/online.py) against hand values and independent formulations.

References written here, not taken from the model: a scalar if/elif classifier straight from
contract section 4's inequalities; a bit-by-bit COO unpacker; chunks whose codes, COO entries,
metadata and reconstructions are worked out by hand; error bounds derived from the step size
and the fixed-point rounding; the float reference of the paper's algorithm.
"""

import numpy as np
import pytest

from qllm_cores.golden.oaken import (
    INNER, MIDDLE, OUTER, OakenMeta, check_thresholds, decompose, dequantize_vector,
    quantize_dequantize_float, quantize_vector,
)

TH = (-100, -10, 10, 100)


def classify(x, t_lo_o, t_lo_i, t_hi_i, t_hi_o):
    """contract section 4 for one value: (group, side, s), written as plain branches."""
    if x > t_hi_o:
        return OUTER, 1, x - t_hi_o
    if x < t_lo_o:
        return OUTER, 0, x - t_lo_o
    if t_lo_i <= x <= t_hi_i:
        return INNER, int(x >= 0), x
    if x > t_hi_i:
        return MIDDLE, 1, x - t_hi_i
    return MIDDLE, 0, x - t_lo_i


def unpack(entry):
    """COO entry -> (index, group, sign), one bit field at a time."""
    entry = int(entry)
    assert 0 <= entry <= 255
    index = sum(((entry >> (2 + b)) & 1) << b for b in range(6))
    return index, (OUTER if (entry >> 1) & 1 else INNER), entry & 1


def random_thresholds(rng, lo, hi):
    t = np.sort(rng.integers(lo, hi + 1, size=4))
    if rng.random() < 0.3:                        # equal thresholds: empty groups
        i = rng.integers(0, 3)
        t[i + 1] = t[i]
    return tuple(int(v) for v in t)


def kv_like(rng, shape, scale=600):
    """Gaussian bulk with a heavy Student-t tail, clipped to int16."""
    bulk = rng.normal(0, scale, size=shape)
    tail = rng.standard_t(2, size=shape) * scale * 3
    x = np.where(rng.random(shape) < 0.08, tail, bulk)
    return np.clip(np.rint(x), -32768, 32767).astype(np.int64)


def profile(x):
    """Thresholds at the 2 / 47 / 53 / 98 % quantiles (4 % outer, 6 % inner)."""
    q = np.quantile(x, [0.02, 0.47, 0.53, 0.98])
    return tuple(int(v) for v in np.rint(q))


def bound(span, frac_bits):
    """|m - s| <= d/2 + 15 * 2^-(F+1) + 1/2, integers on both sides."""
    return int(np.floor(span / 30 + 15 / 2 ** (frac_bits + 1) + 0.5))


# --- thresholds and argument checks ----------------------------------------------------------


def test_check_thresholds_accepts_ordered_and_equal():
    assert check_thresholds(-3, -1, 1, 3) == (-3, -1, 1, 3)
    assert check_thresholds(0, 0, 0, 0) == (0, 0, 0, 0)


@pytest.mark.parametrize("t", [(1, 0, 2, 3), (0, 2, 1, 3), (0, 1, 3, 2), (5, 4, 3, 2)])
def test_check_thresholds_rejects_misordered(t):
    shown = ", ".join(f"{n}={v}" for n, v in zip(("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o"), t))
    with pytest.raises(ValueError, match=shown):
        check_thresholds(*t)


def test_check_thresholds_rejects_non_integer():
    with pytest.raises(TypeError, match="t_hi_i must be an integer"):
        check_thresholds(0, 0, 1.5, 2)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: decompose([32768], TH), ValueError, r"x must hold signed 16-bit values.*32768"),
    (lambda: decompose([-129], TH, data_bits=8), ValueError, r"x must hold signed 8-bit"),
    (lambda: decompose([0.5], TH), TypeError, r"x must hold integers"),
    (lambda: decompose([0], (-100, -10, 10, 200), data_bits=8), ValueError, r"t_hi_o"),
    (lambda: decompose([0], (1, 0, 2, 3)), ValueError, r"t_lo_o=1, t_lo_i=0"),
    (lambda: decompose([0], TH, data_bits=1), ValueError, r"data_bits"),
    (lambda: quantize_vector(np.zeros(64, int), TH, frac_bits=0), ValueError, r"frac_bits"),
    (lambda: quantize_vector(np.zeros(65, int), TH, vec_len=65), ValueError, r"vec_len"),
    (lambda: quantize_vector(np.zeros(8, int), TH), ValueError, r"x must have shape \(64,\)"),
    (lambda: dequantize_vector([16] + [0] * 7, [], (0,) * 6, TH), ValueError, r"dense"),
    (lambda: dequantize_vector([0] * 8, [8 << 2], (0,) * 6, TH), ValueError,
     r"coo entries must index 0..7"),
    (lambda: dequantize_vector([0] * 8, [3 << 2, 1 << 2], (0,) * 6, TH), ValueError,
     r"coo entries must have strictly increasing"),
    (lambda: dequantize_vector([0] * 8, [1 << 2, 1 << 2 | 1], (0,) * 6, TH), ValueError,
     r"coo entries must have strictly increasing"),
    (lambda: dequantize_vector([0] * 8, [256], (0,) * 6, TH), ValueError, r"coo must hold"),
    (lambda: dequantize_vector([0] * 8, [], (1 << 25, 0, 0, 0, 0, 0), TH), ValueError,
     r"meta.mid_min"),
    (lambda: dequantize_vector([0] * 8, [], (0,) * 5, TH), TypeError, r"meta must be"),
])
def test_invalid_arguments_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- decomposer ------------------------------------------------------------------------------


def test_decompose_hand_values_every_group_side_and_threshold():
    x = [-101, -100, -50, -11, -10, -1, 0, 10, 11, 100, 101]
    want_group = [OUTER, MIDDLE, MIDDLE, MIDDLE, INNER, INNER, INNER, INNER, MIDDLE, MIDDLE, OUTER]
    want_side = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    want_inlier = [0, -90, -40, -1, 0, 0, 0, 0, 1, 90, 0]
    want_outlier = [-1, 0, 0, 0, -10, -1, 0, 10, 0, 0, 1]
    d = decompose(np.array(x), TH)
    assert d["group"].tolist() == want_group
    assert d["side"].tolist() == want_side
    assert d["inlier"].tolist() == want_inlier
    assert d["outlier"].tolist() == want_outlier


def test_decompose_equal_thresholds_empty_groups():
    d = decompose([-2, -1, 0, 1, 2], (0, 0, 0, 0))
    assert d["group"].tolist() == [OUTER, OUTER, INNER, OUTER, OUTER]
    assert d["outlier"].tolist() == [-2, -1, 0, 1, 2]
    assert d["side"].tolist() == [0, 0, 1, 1, 1]
    d = decompose([-6, -5, 5, 6], (-5, -5, 5, 5))        # threshold values are inner
    assert d["group"].tolist() == [OUTER, INNER, INNER, OUTER]
    assert d["outlier"].tolist() == [-1, -5, 5, 1]


def test_decompose_range_ends_fit_data_bits_plus_one():
    d = decompose([-32768, 32767], (32767,) * 4)
    assert d["group"].tolist() == [OUTER, INNER]
    assert d["outlier"].tolist() == [-65535, 32767]
    d = decompose([-32768, 32767], (-32768,) * 4)
    assert d["group"].tolist() == [INNER, OUTER]
    assert d["outlier"].tolist() == [-32768, 32767 + 32768]
    d = decompose([-32768, 32767], (-32768, 0, 0, 32767))
    assert d["inlier"].tolist() == [-32768, 32767]


def test_decompose_matches_scalar_classifier_random():
    rng = np.random.default_rng(1)
    for _ in range(60):
        th = random_thresholds(rng, -300, 300)
        x = rng.integers(-400, 401, size=(4, 16))
        d = decompose(x, th)
        for idx in np.ndindex(x.shape):
            g, side, s = classify(int(x[idx]), *th)
            assert (d["group"][idx], d["side"][idx]) == (g, side)
            assert d["inlier"][idx] == (s if g == MIDDLE else 0)
            assert d["outlier"][idx] == (0 if g == MIDDLE else s)


# --- encoder: hand-worked chunks -------------------------------------------------------------


def test_quantize_hand_chunk_all_groups():
    # s: outer-lo -30, mid -60, mid -30, inner 0, inner 5, inner -3, mid +30, outer-hi 60
    x = [-130, -70, -40, 0, 5, -3, 40, 160]
    c = quantize_vector(x, TH, vec_len=8)
    # middle min -60 max 30 d 6; inner |s| 0..5 d 1/3; outer |s| 30..60 d 2
    assert c.dense.tolist() == [0, 0, 5, 0, 15, 9, 15, 15]
    assert [unpack(e) for e in c.coo] == [
        (0, OUTER, 1), (3, INNER, 0), (4, INNER, 0), (5, INNER, 1), (7, OUTER, 0)]
    # fixed point, F = 8: min * 256, round_half_up(span * 256 / 15)
    assert c.meta == OakenMeta(-15360, 1536, 0, 85, 7680, 512)
    assert dequantize_vector(c.dense, c.coo, c.meta, TH).tolist() == x


def test_quantize_misordered_thresholds_refused_or_grouped_by_priority():
    # t_lo_o = 100 > t_hi_o = -100: refused by default. With check_order=False the decomposer's
    # priority order groups every value here as outer: 5 and 50 upper (s = x + 100: 105, 150),
    # -150 lower (s = -150 - 100 = -250); |s| 105..250, span 145.
    t = (100, -10, 10, -100)
    with pytest.raises(ValueError, match="t_lo_o"):
        quantize_vector([5, -150, 50], t, vec_len=3)
    c = quantize_vector([5, -150, 50], t, vec_len=3, check_order=False)
    # codes floor((30 (v - 105) + 145) / 290): 0, 15, 5
    assert c.dense.tolist() == [0, 15, 5]
    assert [unpack(e) for e in c.coo] == [(0, OUTER, 0), (1, OUTER, 1), (2, OUTER, 0)]
    # out_min = 105 * 256; out_d = round_half_up(145 * 256 / 15) = 2475; the others empty
    assert c.meta == OakenMeta(0, 0, 0, 0, 26880, 2475)
    # ordered thresholds: the same result either way
    ordered = quantize_vector([5, -150, 50], TH, vec_len=3)
    unchecked = quantize_vector([5, -150, 50], TH, vec_len=3, check_order=False)
    assert unchecked.dense.tolist() == ordered.dense.tolist()
    assert unchecked.coo.tolist() == ordered.coo.tolist() and unchecked.meta == ordered.meta


def test_quantize_rounds_half_up():
    # middle s = 1, 2, 31: d = 2, (2 - 1) / 2 = 0.5 -> code 1
    c = quantize_vector([11, 12, 41], TH, vec_len=3)
    assert c.dense.tolist() == [0, 1, 15]
    assert c.meta.mid_min == 256 and c.meta.mid_d == 512
    assert dequantize_vector(c.dense, c.coo, c.meta, TH).tolist() == [11, 13, 41]


def test_meta_d_rounds_half_up_in_fixed_point():
    # d_fx = round_half_up(span * 2^F / 15); span * 2^(F+1) is even, never an odd multiple of
    # 15, so there is no exact tie: span 1, F 1: 0.13 -> 0; span 7, F 2: 1.87 -> 2;
    # span 22, F 1: 2.93 -> 3; span 45, F 1: 6 exactly; span 8, F 3: 4.27 -> 4
    for span, f, want in [(1, 1, 0), (7, 2, 2), (22, 1, 3), (45, 1, 6), (8, 3, 4)]:
        c = quantize_vector([11, 11 + span], (-100, -10, 10, 10 ** 4), frac_bits=f, vec_len=2)
        assert (c.meta.mid_min, c.meta.mid_d) == (1 << f, want), (span, f)


def test_exact_round_trip_when_each_group_is_constant():
    x = np.array([50] * 20 + [-3, 3] * 10 + [500, -500] * 12)   # inner |s| 3, outer |s| 400
    c = quantize_vector(x, TH)
    assert (c.dense == 0).all()
    assert c.meta.mid_d == c.meta.in_d == c.meta.out_d == 0
    assert (dequantize_vector(c.dense, c.coo, c.meta, TH) == x).all()


def test_every_element_an_outlier():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.integers(-50, 51, 16),
                        rng.choice([-1, 1], 48) * rng.integers(51, 3000, 48)])
    x = rng.permutation(x)
    th = (-50, -50, 50, 50)                                # no middle group
    c = quantize_vector(x, th)
    entries = [unpack(e) for e in c.coo]
    assert [e[0] for e in entries] == list(range(64))
    assert c.meta.mid_min == c.meta.mid_d == 0
    y = dequantize_vector(c.dense, c.coo, c.meta, th)
    for g in (INNER, OUTER):
        member = np.array([e[1] == g for e in entries])
        mag = np.abs(x[member] - np.where(x[member] > 0, 50, -50) * (g == OUTER))
        assert (np.abs(y[member] - x[member]) <= bound(np.ptp(mag), 8)).all()


def test_no_outliers_empty_coo():
    rng = np.random.default_rng(3)
    x = rng.choice([-1, 1], 64) * rng.integers(1, 1001, 64)
    th = (-1000, 0, 0, 1000)
    c = quantize_vector(x, th)
    assert c.coo.shape == (0,) and c.coo.dtype == np.uint8
    assert c.meta[2:] == (0, 0, 0, 0)
    y = dequantize_vector(c.dense, c.coo, c.meta, th)
    # t_hi_i = t_lo_i = 0: s = x on both sides, and a side flip costs no gap
    assert (np.abs(y - x) <= bound(x.max() - x.min(), 8)).all()


# --- dequantizer: hand metadata --------------------------------------------------------------


def test_dequantize_middle_rounding_and_side_at_zero():
    # one middle element, d = 0: m = (mid_min + 128) >> 8
    cases = [(-128, 10), (-129, -11), (-384, -11), (-385, -12), (127, 10), (128, 11)]
    for mid_min, want in cases:
        y = dequantize_vector([7], [], (mid_min, 0, 0, 0, 0, 0), TH)
        assert y.tolist() == [want], mid_min


def test_dequantize_inner_and_outer_signs():
    meta = (0, 0, 5 << 8, 256, 7 << 8, 512)                 # inner m = 5 + q, outer 7 + 2q
    coo = [0 << 2 | 0, 1 << 2 | 1, 2 << 2 | 2, 3 << 2 | 3]
    y = dequantize_vector([1, 2, 1, 2], coo, meta, TH)
    assert y.tolist() == [6, -7, 9 + 100, -11 - 100]


def test_saturation_from_metadata():
    th = (-30000, -10, 10, 30000)
    coo = [0 << 2 | 2, 1 << 2 | 3]
    y = dequantize_vector([0, 0], coo, (0, 0, 0, 0, 5000 << 8, 0), th)
    assert y.tolist() == [32767, -32768]
    y = dequantize_vector([0], [], (40000 << 8, 0, 0, 0, 0, 0), th)
    assert y.tolist() == [32767]
    y = dequantize_vector([0], [], (-40000 << 8, 0, 0, 0, 0, 0), th)
    assert y.tolist() == [-32768]
    y = dequantize_vector([0, 0], [0 << 2 | 0, 1 << 2 | 1], (0, 0, 40000 << 8, 0, 0, 0), th)
    assert y.tolist() == [32767, -32768]


def test_saturation_from_quantization_at_range_end():
    # outer upper |s| = 32645, 32667 (span 22), F = 1: d_fx = round(44/15) = 3 > 22/15 * 2;
    # code 15: v = 2 * 32645 + 45 = 65335, m = 65336 >> 1 = 32668, x' = 32768 -> 32767
    x = [32767 - 22, 32767]
    c = quantize_vector(x, TH, frac_bits=1, vec_len=2)
    assert c.dense.tolist() == [0, 15] and c.meta.out_d == 3
    assert dequantize_vector(c.dense, c.coo, c.meta, TH, frac_bits=1).tolist() == x
    # the lower end: |s| = 32668 - 22 .. 32668 -> -32769 saturates to -32768
    x = [-32768 + 22, -32768]
    c = quantize_vector(x, TH, frac_bits=1, vec_len=2)
    assert dequantize_vector(c.dense, c.coo, c.meta, TH, frac_bits=1).tolist() == x


# --- random chunks: encoding layout, error bounds, float reference ----------------------------


def check_chunk(x, th, frac_bits, data_bits=16):
    c = quantize_vector(x, th, frac_bits=frac_bits, data_bits=data_bits)
    assert c.dense.dtype == np.uint8 and c.dense.max(initial=0) <= 15
    groups, _, shifted = zip(*(classify(int(v), *th) for v in x))
    groups, shifted = np.array(groups), np.array(shifted)
    # COO: every inner/outer element once, sorted by index, group and sign bits correct
    entries = [unpack(e) for e in c.coo]
    assert [e[0] for e in entries] == np.flatnonzero(groups != MIDDLE).tolist()
    for index, g, sign in entries:
        assert g == groups[index] and sign == int(shifted[index] < 0)
    y = dequantize_vector(c.dense, c.coo, c.meta, th, frac_bits=frac_bits, data_bits=data_bits)
    lo, hi = -(1 << (data_bits - 1)), (1 << (data_bits - 1)) - 1
    assert y.min() >= lo and y.max() <= hi
    err = np.abs(y - x)
    t_lo_o, t_lo_i, t_hi_i, t_hi_o = th
    for g in (MIDDLE, INNER, OUTER):
        member = groups == g
        if not member.any():
            continue
        v = shifted[member] if g == MIDDLE else np.abs(shifted[member])
        b = bound(int(v.max() - v.min()), frac_bits)
        if g == MIDDLE:
            # the decoder picks the side from the sign of m; a flip costs the inner gap
            m = np.where(y[member] >= t_hi_i, y[member] - t_hi_i, y[member] - t_lo_i)
            assert (np.abs(m - shifted[member]) <= b).all()
            assert (err[member] <= b + (t_hi_i - t_lo_i)).all()
        else:
            assert (err[member] <= b).all()
    return y


@pytest.mark.parametrize("frac_bits", [8, 4])
def test_random_kv_like_chunks_within_bounds(frac_bits):
    rng = np.random.default_rng(10 + frac_bits)
    x = kv_like(rng, (150, 64))
    th = profile(x)
    for row in x:
        check_chunk(row, th, frac_bits)


def test_random_thresholds_including_equal():
    rng = np.random.default_rng(20)
    for _ in range(150):
        th = random_thresholds(rng, -2000, 2000)
        x = rng.integers(-4000, 4001, size=64)
        check_chunk(x, th, 8)


@pytest.mark.parametrize("frac_bits", [1, 3])
def test_random_8_bit_data_full_range_thresholds(frac_bits):
    # small F: d_fx error up to 15 * 2^-(F+1), reconstructions may cross the range ends
    rng = np.random.default_rng(40 + frac_bits)
    for _ in range(150):
        th = random_thresholds(rng, -128, 127)
        x = rng.integers(-128, 128, size=64)
        x[rng.integers(0, 64, 4)] = rng.choice([-128, 127], 4)
        check_chunk(x, th, frac_bits, data_bits=8)


def test_integer_path_matches_float_reference():
    rng = np.random.default_rng(30)
    x = kv_like(rng, (200, 64))
    th = profile(x)
    ref = quantize_dequantize_float(x, th)
    y = np.stack([dequantize_vector(*quantize_vector(row, th), th) for row in x])
    groups = np.array([[classify(int(v), *th)[0] for v in row] for row in x])
    # float reconstruction of a middle s: away from 0 the side rule agrees with the integer one
    _, t_lo_i, t_hi_i, _ = th
    r = np.where(ref >= t_hi_i, ref - t_hi_i, ref - t_lo_i)
    near_zero = (groups == MIDDLE) & (np.abs(r) < 1)
    diff = np.abs(y - ref)
    assert (diff[~near_zero] <= 0.5 + 15 / 2 ** 9 + 1e-9).all()
    assert near_zero.mean() < 0.01
    # and the float reference itself reconstructs inner/outer within d/2 of x
    assert np.abs(ref - x)[groups != MIDDLE].max() <= np.ptp(x) / 30 + 1e-9


def test_float_reference_hand_chunk():
    x = np.array([[-130, -70, -40, 0, 5, -3, 40, 160], [11, 12, 41, 11, 11, 11, 11, 11]])
    ref = quantize_dequantize_float(x, TH, vec_len=8)
    assert np.allclose(ref[0], x[0])
    assert np.allclose(ref[1], [11, 13, 41, 11, 11, 11, 11, 11])
