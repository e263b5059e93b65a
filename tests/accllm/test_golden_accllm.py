"""Golden model of AccLLM (golden/accllm/) against exhaustive and independent references.

References written here, not taken from the model: products ``x * w`` in NumPy and Python
integers; a DSP48E2 written bit by bit with Python big integers (two's complement masks); the
B-port range as the integer inequality; worst-case accumulations that attain the depth limit;
plain loops for pruning and the sparse selector; reconstruction bounds from the step size.
"""

import numpy as np
import pytest

from qllm_cores.golden.accllm import (
    ActQuant, W2Quant, accumulate_packed, b_fits, dequantize_a8, dequantize_kv4,
    dequantize_w2, dsp48e2_p, extract_w2, extract_w8, max_accumulation_depth, pack_w2,
    pack_w8, packed_p_w2, product_range, prune_2_4, quantize_a8, quantize_kv4, quantize_w2,
    sparse_select,
)


def x_values(x_bits, x_signed):
    return np.arange(-(1 << (x_bits - 1)), 1 << (x_bits - 1)) if x_signed \
        else np.arange(0, 1 << x_bits)


def w_values(bits):
    return np.arange(-(1 << (bits - 1)), 1 << (bits - 1))


def ref_dsp(a, d, b):
    """DSP48E2 (A + D) * B for Python ints: 27-bit AD register, 48-bit P, by bit masks."""
    ad = (a + d) & ((1 << 27) - 1)
    if ad & (1 << 26):
        ad -= 1 << 27
    p = (ad * b) & ((1 << 48) - 1)
    if p & (1 << 47):
        p -= 1 << 48
    return p


# --- DSP48E2 ---------------------------------------------------------------------------------


def test_dsp48e2_hand_values_and_preadder_wrap():
    assert dsp48e2_p(3, 4, 5) == 35
    assert dsp48e2_p(-(1 << 26), 0, -(1 << 17)) == 1 << 43          # largest product
    assert dsp48e2_p((1 << 26) - 1, 1, 1) == -(1 << 26)             # AD wraps to -2^26
    assert dsp48e2_p(-(1 << 26), -1, 1) == (1 << 26) - 1            # and the other way
    assert dsp48e2_p((1 << 26) - 1, (1 << 26) - 1, 3) == -2 * 3     # 2^27 - 2 -> -2


def test_dsp48e2_against_big_int_reference():
    rng = np.random.default_rng(1)
    n = 4000
    a = rng.integers(-(1 << 26), 1 << 26, n)
    d = rng.integers(-(1 << 26), 1 << 26, n)         # half of these pairs wrap in the pre-adder
    b = rng.integers(-(1 << 17), 1 << 17, n)
    extremes = [-(1 << 26), -(1 << 26) + 1, -1, 0, 1, (1 << 26) - 1]
    bext = [-(1 << 17), -1, 0, 1, (1 << 17) - 1]
    grid = np.array([(x, y, z) for x in extremes for y in extremes for z in bext]).T
    a, d, b = (np.concatenate([u, g]) for u, g in zip((a, d, b), grid))
    got = dsp48e2_p(a, d, b)
    want = [ref_dsp(int(x), int(y), int(z)) for x, y, z in zip(a, d, b)]
    assert got.tolist() == want
    wrapped = np.abs(a + d) >= (1 << 26)
    assert wrapped.sum() > 1000                       # the wrap is actually exercised


# --- modes w8 / w4 ---------------------------------------------------------------------------


@pytest.mark.parametrize("x_signed", [True, False])
def test_w4_exhaustive(x_signed):
    x, w1, w2 = np.meshgrid(x_values(8, x_signed), w_values(4), w_values(4), indexing="ij")
    assert x.size == 65536
    a, d, b = pack_w8(x, w1, w2, w_bits=4, x_signed=x_signed)
    p = dsp48e2_p(a, d, b)
    assert np.array_equal(p, x * w1 + x * w2 * (1 << 18))
    p1, p2 = extract_w8(p, w_bits=4, x_signed=x_signed)
    assert np.array_equal(p1, x * w1)
    assert np.array_equal(p2, x * w2)


@pytest.mark.parametrize("x_signed", [True, False])
def test_w8_exhaustive(x_signed):
    xv, wv = x_values(8, x_signed), w_values(8)
    x, w1 = np.meshgrid(xv, wv, indexing="ij")
    x, w1 = x.ravel(), w1.ravel()
    for w2_block in np.split(wv, 16):                 # 2^24 cases in 16 chunks of 2^20
        w2 = np.repeat(w2_block, x.size)
        xx, ww1 = np.tile(x, w2_block.size), np.tile(w1, w2_block.size)
        p1, p2 = extract_w8(dsp48e2_p(*pack_w8(xx, ww1, w2, w_bits=8, x_signed=x_signed)),
                            w_bits=8, x_signed=x_signed)
        assert np.array_equal(p1, xx * ww1)
        assert np.array_equal(p2, xx * w2)


def test_w8_ports_match_figure_10d1():
    a, d, b = pack_w8(-3, -1, -2, w_bits=8)
    assert (int(a), int(d), int(b)) == (-2 << 18, -1, -3)
    a, d, b = pack_w8(200, 5, 7, w_bits=8, x_signed=False)    # X zero-extended
    assert (int(a), int(d), int(b)) == (7 << 18, 5, 200)


@pytest.mark.parametrize("x_bits, w_bits, x_signed", [(10, 8, True), (14, 4, False),
                                                      (17, 1, True), (1, 8, False)])
def test_w8_widest_accepted_configurations_exact(x_bits, w_bits, x_signed):
    rng = np.random.default_rng(x_bits * 100 + w_bits)
    xs, ws = x_values(x_bits, x_signed), w_values(w_bits)
    x = np.concatenate([rng.choice(xs, 5000), [xs[0], xs[-1]] * 4])
    w1 = np.concatenate([rng.choice(ws, 5000), [ws[0]] * 4 + [ws[-1]] * 4])
    w2 = np.concatenate([rng.choice(ws, 5000), [ws[0], ws[-1]] * 4])
    p1, p2 = extract_w8(dsp48e2_p(*pack_w8(x, w1, w2, w_bits, x_bits, x_signed)),
                        w_bits, x_bits, x_signed)
    assert np.array_equal(p1, x * w1) and np.array_equal(p2, x * w2)


def test_w8_width_limit_is_tight():
    # x_bits + w_bits = 19: the product (-2^10)(-2^7) = 2^17 no longer fits the low field
    with pytest.raises(ValueError, match=r"x_bits \+ w_bits must be at most 18"):
        pack_w8(0, 0, 0, w_bits=8, x_bits=11)
    with pytest.raises(ValueError, match=r"18-bit low field"):
        extract_w8(0, w_bits=4, x_bits=15, x_signed=False)
    with pytest.raises(ValueError, match=r"w_bits must be in range 1..8, not 9"):
        pack_w8(0, 0, 0, w_bits=9, x_bits=8)
    # and the limit is real: at 19 bits the raw arithmetic does give a wrong p1
    p = ref_dsp((-(1 << 7)) << 18, -(1 << 7), -(1 << 10))
    low = p & ((1 << 18) - 1)
    assert low - (1 << 18) * (low >> 17) != (1 << 17)


def test_product_range_attained():
    for x_bits, w_bits, x_signed in [(8, 8, True), (8, 8, False), (8, 2, True), (3, 5, False)]:
        prods = np.multiply.outer(x_values(x_bits, x_signed), w_values(w_bits))
        assert product_range(x_bits, w_bits, x_signed) == (prods.min(), prods.max())


# --- mode w2 ---------------------------------------------------------------------------------


def w2_grid(x_signed):
    xv = x_values(8, x_signed)
    return [g.ravel() for g in np.meshgrid(xv, xv, w_values(2), w_values(2), indexing="ij")]


@pytest.mark.parametrize("x_signed", [True, False])
def test_b_fits_is_the_18_bit_range(x_signed):
    x1, x2 = (g.ravel() for g in np.meshgrid(x_values(8, x_signed), x_values(8, x_signed)))
    b = x1 + x2 * 1024
    want = (b >= -(1 << 17)) & (b <= (1 << 17) - 1)
    assert np.array_equal(b_fits(x1, x2, x_signed=x_signed), want)
    assert (~want).sum() == (128 if x_signed else 128 * 256)
    for x_bits in (1, 5, 7):
        x1, x2 = (g.ravel() for g in np.meshgrid(x_values(x_bits, x_signed),
                                                  x_values(x_bits, x_signed)))
        assert b_fits(x1, x2, x_bits, x_signed).all()


@pytest.mark.parametrize("x_signed", [True, False])
def test_w2_exhaustive(x_signed):
    x1, x2, w1, w2 = w2_grid(x_signed)
    fits = b_fits(x1, x2, x_signed=x_signed)
    a, d, b = pack_w2(x1[fits], x2[fits], w1[fits], w2[fits], x_signed=x_signed)
    assert np.array_equal(b, x1[fits] + x2[fits] * 1024)
    p = dsp48e2_p(a, d, b)
    got = extract_w2(p, x_signed=x_signed)
    for name, want in (("p11", x1 * w1), ("p22", x2 * w2), ("p12", x1 * w2), ("p21", x2 * w1)):
        assert np.array_equal(getattr(got, name), want[fits]), name
    # the ideal P (as from an RTL that corrects B) extracts exactly for every input
    ideal = packed_p_w2(x1, x2, w1, w2, x_signed=x_signed)
    assert np.array_equal(ideal[fits], p)
    got = extract_w2(ideal, x_signed=x_signed)
    assert np.array_equal(got.p11, x1 * w1) and np.array_equal(got.p22, x2 * w2)
    assert np.array_equal(got.p12, x1 * w2) and np.array_equal(got.p21, x2 * w1)
    # the simple per-field borrow P[s-1] agrees with the chain for single products
    for s, (name, width) in zip((10, 22, 32), (("p21", 12), ("p12", 10), ("p22", 16))):
        field = ((ideal >> s) + ((ideal >> (s - 1)) & 1)) & ((1 << width) - 1)
        field = field - ((field >> (width - 1)) << width)
        assert np.array_equal(field, getattr(got, name))


@pytest.mark.parametrize("x_signed, x1, x2", [(True, -1, -128), (True, -128, -128),
                                              (False, 0, 128), (False, 255, 255)])
def test_pack_w2_refuses_b_overflow(x_signed, x1, x2):
    with pytest.raises(ValueError, match=r"B = x1 \+ \(x2 << 10\) must fit the 18-bit signed"):
        pack_w2(x1, x2, 1, 1, x_signed=x_signed)


def test_w2_ports_match_figure_10d2():
    a, d, b = pack_w2(3, 5, -1, -2, x_signed=False)
    assert (int(a), int(d), int(b)) == (-1, -2 << 22, 3 + (5 << 10))


# --- accumulation ----------------------------------------------------------------------------


def test_accumulation_depth_values():
    assert max_accumulation_depth("w8") == 7                 # WP486's 7 INT8 accumulations
    assert max_accumulation_depth("w8", x_signed=False) == 4
    assert max_accumulation_depth("w4") == 127
    assert max_accumulation_depth("w4", x_signed=False) == 64
    assert max_accumulation_depth("w2") == 1
    assert max_accumulation_depth("w2", x_signed=False) == 1
    assert max_accumulation_depth("w2", x_bits=7) == 3       # 3 x 128 <= 511 < 4 x 128
    assert max_accumulation_depth("w2", x_bits=6) == 7       # 7 x 64 <= 511 < 8 x 64
    assert max_accumulation_depth("w8", x_bits=4, w_bits=4) == 2047


def extremes(x_bits, w_bits, x_signed):
    """(x, w) pairs giving the smallest and the largest product."""
    xs, ws = x_values(x_bits, x_signed), w_values(w_bits)
    prods = np.multiply.outer(xs, ws)
    i_lo, i_hi = np.unravel_index(prods.argmin(), prods.shape), \
        np.unravel_index(prods.argmax(), prods.shape)
    return [(int(xs[i]), int(ws[j])) for i, j in (i_lo, i_hi)]


W8_CASES = [("w8", 8, True), ("w8", 8, False), ("w4", 4, True), ("w4", 4, False)]


@pytest.mark.parametrize("mode, w_bits, x_signed", W8_CASES)
def test_w8_accumulation_worst_case_at_limit_and_beyond(mode, w_bits, x_signed):
    n = max_accumulation_depth(mode, x_signed=x_signed)
    broken = []
    for x, w in extremes(8, w_bits, x_signed):
        words = dsp48e2_p(*pack_w8(np.full(n + 1, x), np.full(n + 1, w), np.full(n + 1, w),
                                   w_bits, x_signed=x_signed))
        p1, p2 = accumulate_packed(words[:n], mode, x_signed=x_signed)
        assert p1 == n * x * w and p2 == n * x * w
        with pytest.raises(ValueError, match=rf"N must be in 1\.\.{n} .*not {n + 1}"):
            accumulate_packed(words, mode, x_signed=x_signed)
        p1, _ = extract_w8(words.sum(), w_bits, x_signed=x_signed)
        broken.append(p1 != (n + 1) * x * w)
    # tight: for one of the two extreme products the raw sum of N + 1 words is wrong
    assert any(broken)


@pytest.mark.parametrize("mode, w_bits, x_signed", W8_CASES)
def test_w8_accumulation_random_at_limit(mode, w_bits, x_signed):
    rng = np.random.default_rng(7)
    n = max_accumulation_depth(mode, x_signed=x_signed)
    shape = (n, 500)
    x = rng.choice(x_values(8, x_signed), shape)
    w1, w2 = rng.choice(w_values(w_bits), (2,) + shape)
    words = dsp48e2_p(*pack_w8(x, w1, w2, w_bits, x_signed=x_signed))
    got = accumulate_packed(words, mode, x_signed=x_signed)
    assert np.array_equal(got.p1, (x * w1).sum(0)) and np.array_equal(got.p2, (x * w2).sum(0))
    got = accumulate_packed(words.T, mode, x_signed=x_signed, axis=1)
    assert np.array_equal(got.p1, (x * w1).sum(0))


def test_w2_accumulation_limit_and_tightness():
    x1, x2, w1, w2 = w2_grid(True)
    ideal = packed_p_w2(x1, x2, w1, w2)
    got = accumulate_packed(ideal[None, :], "w2")
    assert np.array_equal(got.p11, x1 * w1) and np.array_equal(got.p22, x2 * w2)
    with pytest.raises(ValueError, match=r"N must be in 1\.\.1 .*not 2"):
        accumulate_packed(ideal[:2], "w2")
    # two worst-case words: (-128)(-2) twice = 512 overflows the 10-bit field at 0
    p = packed_p_w2(-128, 0, -2, 0)
    assert extract_w2(2 * p).p11 != 512
    # with 7-bit X the depth is 3: 3 x (-64)(-2) = 384 fits the 10-bit fields, 4 x 128 does not
    p = packed_p_w2(-64, -64, -2, -2, x_bits=7)
    got = accumulate_packed(np.full(3, p), "w2", x_bits=7)
    assert (got.p11, got.p22, got.p12, got.p21) == (384, 384, 384, 384)
    assert extract_w2(4 * p, x_bits=7).p11 != 512


def test_accumulation_extracts_through_a_48_bit_wrap():
    # fields (-1, -2^28) + (0, -2^28): the sum -2^47 - 1 wraps to 2^47 - 1, yet the top field
    # is read modulo 2^30 and comes out as -2^29
    words = np.array([-(1 << 46) - 1, -(1 << 46)])
    got = accumulate_packed(words, "w8")
    assert (int(got.p1), int(got.p2)) == (-1, -(1 << 29))
    x = np.full(127, -128)
    w = np.full(127, -8)
    got = accumulate_packed(dsp48e2_p(*pack_w8(x, w, w, 4)), "w4")
    assert (int(got.p1), int(got.p2)) == (127 * 1024, 127 * 1024)


# --- 2:4 pruning and the sparse selector -----------------------------------------------------


def test_prune_2_4_keeps_two_largest_per_block():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(16, 64))
    w[0, :4] = [1.0, -1.0, 1.0, 0.5]                 # ties: lower indices 0 and 1 kept
    w[1, :4] = 0.0
    pruned, mask = prune_2_4(w)
    assert mask[0, :4].tolist() == [True, True, False, False]
    assert mask[1, :4].tolist() == [True, True, False, False]
    for r in range(w.shape[0]):
        for blk in range(0, w.shape[1], 4):
            m = mask[r, blk:blk + 4]
            assert m.sum() == 2
            kept = np.abs(w[r, blk:blk + 4][m])
            dropped = np.abs(w[r, blk:blk + 4][~m])
            assert kept.min() >= dropped.max()
            assert np.array_equal(pruned[r, blk:blk + 4], np.where(m, w[r, blk:blk + 4], 0))


def loop_select(x, mask):
    out = []
    for row_x, row_m in zip(x, mask):
        for g in range(0, len(row_x), 4):
            idx = [i for i in range(4) if row_m[g + i]]
            out.append((row_x[g + idx[0]], row_x[g + idx[1]], idx[0], idx[1]))
    return out


def test_sparse_select_against_loop_and_dense_dot():
    rng = np.random.default_rng(4)
    w = rng.normal(size=(8, 32))
    pruned, mask = prune_2_4(w)
    x = rng.integers(-128, 128, size=(8, 32))
    sel = sparse_select(x, mask)
    flat = list(zip(*(a.ravel().tolist() for a in sel)))
    assert flat == loop_select(x, mask)
    assert (sel.idx1 < sel.idx2).all()
    # the selected pairs carry the whole dot product with the pruned weights
    wsel = sparse_select(pruned, mask)
    assert np.allclose((sel.x1 * wsel.x1 + sel.x2 * wsel.x2).sum(-1), (x * pruned).sum(-1))
    # all six 2:4 patterns, integer masks
    pats = [m for m in np.ndindex(2, 2, 2, 2) if sum(m) == 2]
    mask = np.array(pats).reshape(1, -1)
    xs = np.arange(mask.size).reshape(1, -1)
    assert list(zip(*(a.ravel().tolist() for a in sparse_select(xs, mask)))) == \
        loop_select(xs, mask)


@pytest.mark.parametrize("x_signed", [True, False])
def test_selector_feeds_mode_w2_and_the_packed_products_give_the_sparse_dot(x_signed):
    """The W2A8 path of Fig. 10(c)-(d2): 2:4 pruning, the selector, one packed multiply per
    group (X1 W1 and X2 W2 from one P word), summed: the dot product with the pruned weights."""
    rng = np.random.default_rng(11)
    scores = rng.normal(size=(16, 64))
    _, mask = prune_2_4(scores)
    w = np.where(mask, rng.integers(-2, 2, size=mask.shape), 0)     # signed 2-bit codes
    x = rng.integers(-128, 128, mask.shape) if x_signed else rng.integers(0, 256, mask.shape)
    xs = sparse_select(x, mask)
    ws = sparse_select(w, mask)
    products = extract_w2(packed_p_w2(xs.x1, xs.x2, ws.x1, ws.x2, 8, x_signed), 8, x_signed)
    np.testing.assert_array_equal((products.p11 + products.p22).sum(-1), (x * w).sum(-1))


@pytest.mark.parametrize("bad", [[1, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]])
def test_sparse_select_rejects_invalid_mask(bad):
    with pytest.raises(ValueError, match=r"mask must have exactly two ones"):
        sparse_select(np.arange(8), [1, 0, 1, 0] + bad)


# --- quantizers ------------------------------------------------------------------------------


def test_quantize_w2_reconstruction_within_half_step():
    rng = np.random.default_rng(5)
    w = rng.normal(size=(32, 256))
    pruned, _ = prune_2_4(w)
    for src in (w, pruned):
        qw = quantize_w2(src)
        assert isinstance(qw, W2Quant) and qw.q.max() <= 3 and qw.scale.shape == (32, 4)
        rec = dequantize_w2(qw)
        step = np.repeat(qw.scale, 64, axis=-1)
        assert (np.abs(rec - src) <= step / 2 * (1 + 1e-9)).all()
    assert (dequantize_w2(quantize_w2(pruned))[pruned == 0] == 0).all()   # zeros stay zero


def test_quantize_w2_clipping():
    rng = np.random.default_rng(6)
    w = rng.normal(size=(4, 128))
    gamma = np.array([[0.6], [0.8], [1.0], [0.5]])
    beta = 0.7
    qw = quantize_w2(w, group=64, gamma=gamma, beta=beta)
    g = w.reshape(4, 2, 64)
    hi, lo = gamma * g.max(-1), beta * g.min(-1)
    assert np.allclose(qw.scale, (hi - lo) / 3)
    rec = dequantize_w2(qw).reshape(4, 2, 64)
    step = qw.scale[..., None]
    inside = (g >= lo[..., None]) & (g <= hi[..., None])
    bound = np.broadcast_to(step / 2 * (1 + 1e-9), g.shape)
    assert (np.abs(rec - g)[inside] <= bound[inside]).all()
    q = qw.q.reshape(4, 2, 64)
    assert (q[g > hi[..., None]] == 3).all() and (q[g < lo[..., None]] == 0).all()
    assert (~inside).sum() > 0


def test_quantize_a8_signed_and_unsigned():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(10, 96)) * rng.uniform(0.1, 10, size=(10, 1))
    qa = quantize_a8(x)
    assert isinstance(qa, ActQuant) and qa.q.min() >= -127 and qa.q.max() <= 127
    assert np.allclose(qa.scale[:, 0], np.abs(x).max(-1) / 127) and (qa.zero == 0).all()
    assert (np.abs(dequantize_a8(qa) - x) <= qa.scale / 2 * (1 + 1e-9)).all()
    assert (np.abs(qa.q).max(-1) == 127).all()
    qu = quantize_a8(x, signed=False)
    assert qu.q.min() >= 0 and qu.q.max() <= 255
    assert (np.abs(dequantize_a8(qu) - x) <= qu.scale / 2 * (1 + 1e-9)).all()
    assert (quantize_a8(np.zeros((2, 8))).q == 0).all()


def test_quantize_kv4_per_token_per_head():
    rng = np.random.default_rng(9)
    kv = rng.normal(size=(5, 4 * 32)) * np.repeat(rng.uniform(0.1, 5, (5, 4)), 32, axis=1)
    qk = quantize_kv4(kv, head_dim=32)
    assert qk.q.max() <= 15 and qk.scale.shape == (5, 4) and qk.zero.shape == (5, 4)
    heads = kv.reshape(5, 4, 32)
    assert np.allclose(qk.scale, (heads.max(-1) - heads.min(-1)) / 15)
    step = np.repeat(qk.scale, 32, axis=1)
    assert (np.abs(dequantize_kv4(qk) - kv) <= step / 2 * (1 + 1e-9)).all()


# --- argument errors -------------------------------------------------------------------------


@pytest.mark.parametrize("call, exc, match", [
    (lambda: dsp48e2_p(1 << 26, 0, 0), ValueError, r"a must hold signed 27-bit"),
    (lambda: dsp48e2_p(0, -(1 << 26) - 1, 0), ValueError, r"d must hold signed 27-bit"),
    (lambda: dsp48e2_p(0, 0, 1 << 17), ValueError, r"b must hold signed 18-bit"),
    (lambda: dsp48e2_p(0.5, 0, 0), TypeError, r"a must hold integers"),
    (lambda: pack_w8(128, 0, 0, 8), ValueError, r"x must hold signed 8-bit"),
    (lambda: pack_w8(-1, 0, 0, 8, x_signed=False), ValueError, r"x must hold unsigned 8-bit"),
    (lambda: pack_w8(0, 8, 0, 4), ValueError, r"w1 must hold signed 4-bit"),
    (lambda: pack_w8(0, 0, -9, 4), ValueError, r"w2 must hold signed 4-bit"),
    (lambda: pack_w8(0, 0, 0, 4, x_signed=1), TypeError, r"x_signed must be a bool"),
    (lambda: pack_w8(0, 0, 0, 4.0), TypeError, r"w_bits must be an integer"),
    (lambda: pack_w2(0, 0, 2, 0), ValueError, r"w1 must hold signed 2-bit"),
    (lambda: pack_w2(0, 0, 0, 0, x_bits=9), ValueError, r"x_bits must be at most 8"),
    (lambda: extract_w8(1 << 47, 8), ValueError, r"p must hold signed 48-bit"),
    (lambda: extract_w2([0.0], 8), TypeError, r"p must hold integers"),
    (lambda: max_accumulation_depth("w16"), ValueError, r"mode must be one of"),
    (lambda: max_accumulation_depth(8), TypeError, r"mode must be a string"),
    (lambda: max_accumulation_depth("w2", w_bits=4), ValueError, r"w_bits must be 2"),
    (lambda: accumulate_packed(np.zeros(0, np.int64), "w8"), ValueError, r"N must be in 1..7"),
    (lambda: prune_2_4(np.zeros((2, 6))), ValueError, r"w must have a last axis"),
    (lambda: prune_2_4([np.nan] * 4), ValueError, r"w must be finite"),
    (lambda: prune_2_4(["a"] * 4), TypeError, r"w must hold real numbers"),
    (lambda: quantize_w2(np.zeros((2, 96))), ValueError, r"group must divide"),
    (lambda: quantize_w2(np.zeros((2, 64)), group=0), ValueError, r"group must be in range"),
    (lambda: quantize_w2(np.zeros((2, 64)), gamma=1.5), ValueError, r"gamma must be in \(0, 1\]"),
    (lambda: quantize_w2(np.zeros((2, 64)), beta=0.0), ValueError, r"beta must be in \(0, 1\]"),
    (lambda: quantize_w2(np.zeros((2, 128)), gamma=np.ones(3)), ValueError,
     r"gamma must broadcast"),
    (lambda: quantize_a8(np.zeros(4), signed="yes"), TypeError, r"signed must be a bool"),
    (lambda: quantize_kv4(np.zeros((2, 10)), head_dim=4), ValueError, r"head_dim must divide"),
    (lambda: sparse_select(np.arange(8), [1, 1, 0, 0]), ValueError, r"mask must have the shape"),
    (lambda: sparse_select(np.arange(8), [2, 0, 0, 0] * 2), ValueError, r"mask must hold 0/1"),
    (lambda: sparse_select(np.arange(6), [1, 1, 0] * 2), ValueError, r"x must have a last axis"),
    (lambda: dequantize_w2((0, 0, 0, 0)), TypeError, r"qw must be a W2Quant"),
])
def test_invalid_arguments_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_run_sums_end_at_last_or_at_the_depth():
    from qllm_cores.golden.accllm import run_sums

    # Runs: [1, 2] ends at last; [3, 4] is cut at depth 2 (last 0); [5] ends at last.
    out = run_sums({"p": [1, 2, 3, 4, 5], "q": [10, 20, 30, 40, 50]}, [0, 1, 0, 0, 1], 2)
    assert out["p"].tolist() == [3, 7, 5]
    assert out["q"].tolist() == [30, 70, 50]
    assert out["last"].tolist() == [1, 0, 1]
    assert run_sums({"p": [4, 5]}, [1, 1], 1)["p"].tolist() == [4, 5]
    with pytest.raises(ValueError, match="depth must be in range"):
        run_sums({"p": [1]}, [1], 0)
