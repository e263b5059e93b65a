"""P3-LLM processing element golden models (``golden.p3``): decoders, products, streams against
the loop reference, the report (formats and quantizers: test_golden_p3.py)."""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qllm_cores.golden import p3
from qllm_cores.golden.p3 import report as p3_report
from tests.p3.test_golden_p3 import (e4m3_value, random_stream, ref_pe, run_model,
                                     s0e4m4_value, weight_real)

ALL8 = np.arange(256)
ALL4 = np.arange(16)
INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


# --- PE: decoders ----------------------------------------------------------------------------


def test_decode_act_fields_all_codes():
    for fmt in (0, 1):
        f = p3.decode_act(ALL8, fmt)
        for c in ALL8:
            bits = format(int(c), "08b")
            if fmt == 0:
                s, e, m = int(bits[0]), int(bits[1:5], 2), int(bits[5:], 2)
                m5, nan = (16 if e else 0) + 2 * m, e == 15 and m == 7
            else:
                s, e, m = 0, int(bits[:4], 2), int(bits[4:], 2)
                m5, nan = (16 if e else 0) + m, False
            assert (f["sign"][c], f["m5"][c], f["shift"][c], f["nan"][c]) == \
                (s, m5, max(e, 1) - 1, nan)
    f = p3.decode_act([[0x38, 0x38]], [[0, 1]])                # broadcasting formats
    assert f["m5"].tolist() == [[16, 24]] and f["shift"].tolist() == [[6, 2]]


def test_decoders_name_mismatched_shapes():
    with pytest.raises(ValueError, match=r"codes and act_fmt must broadcast together, not "
                                         r"codes \(3,\), act_fmt \(2,\)"):
        p3.decode_act([1, 2, 3], [0, 1])
    with pytest.raises(ValueError, match="codes and wgt_fmt and sv_sel and zp must broadcast"):
        p3.decode_weight([1, 2, 3], 0, [0, 1], 0)
    with pytest.raises(ValueError, match="q and zp must broadcast"):
        p3.decode_int4([1, 2, 3], [0, 1])


def test_decode_weight_formats_and_broadcast():
    w = p3.decode_weight(ALL4[:, None], [0, 1], [[2, 2]], [[0, 3]])
    assert w.shape == (16, 2)
    assert w[:, 0].tolist() == p3.decode_bitmod(ALL4, 2).tolist()
    assert w[:, 1].tolist() == (ALL4 - 3).tolist()
    for name, kwargs in [("wgt_fmt", dict(wgt_fmt=2)), ("sv_sel", dict(sv_sel=-1)),
                         ("zp", dict(zp=16))]:
        args = dict(codes=1, wgt_fmt=0, sv_sel=0, zp=0) | kwargs
        with pytest.raises(ValueError, match=name):
            p3.decode_weight(**args)


# --- PE: single products and exact dot products ----------------------------------------------


WEIGHT_CASES = [(0, sv, 0) for sv in range(4)] + [(1, 0, zp) for zp in (0, 1, 7, 8, 15)]


@pytest.mark.parametrize("act_fmt", [0, 1])
@pytest.mark.parametrize("wgt_fmt, sv_sel, zp", WEIGHT_CASES)
def test_every_single_product_is_exact(act_fmt, wgt_fmt, sv_sel, zp):
    a, w = np.meshgrid(ALL8, ALL4, indexing="ij")
    a, w = a.ravel(), w.ravel()
    n = a.size
    lane = np.arange(n) % 4                                    # the product visits every lane
    act = np.zeros((n, 4), np.int64)
    wgt = np.zeros((n, 4), np.int64)
    act[np.arange(n), lane] = a
    wgt[np.arange(n), lane] = w
    wgt[np.arange(n), (lane + 1) % 4] = 15                     # zero activations: no effect
    res = p3.pe_run(act, wgt, act_fmt, wgt_fmt, sv_sel, zp, True, True)
    real = p3.acc_to_real(res["acc"], act_fmt, wgt_fmt)
    av = np.array([e4m3_value(c) if act_fmt == 0 else s0e4m4_value(c) for c in a])
    wv = np.array([weight_real(c, wgt_fmt, sv_sel, zp) for c in w])
    is_nan = np.isnan(av)
    np.testing.assert_array_equal(res["nan"], is_nan)
    np.testing.assert_array_equal(real[~is_nan], av[~is_nan] * wv[~is_nan])
    assert (res["acc"][is_nan] == 0).all() and not res["overflow"].any()
    # the products directly
    prod = p3.pe_products(act, wgt, act_fmt, wgt_fmt, sv_sel, zp)
    np.testing.assert_array_equal(prod["terms"].sum(-1), res["acc"])


def test_random_dot_products_equal_float64():
    rng = np.random.default_rng(11)
    for fmt in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        stream = random_stream(rng, 3000, p_first=0.0, p_last=0.0, fmt=fmt)
        act, wgt, act_fmt, wgt_fmt, sv_sel, zp, _, _ = stream
        lengths = rng.integers(1, 60, 200)
        ends = np.cumsum(lengths)
        ends = ends[ends <= 3000]
        first = np.zeros(3000, bool)
        last = np.zeros(3000, bool)
        first[np.concatenate([[0], ends[:-1]])] = True
        last[ends - 1] = True
        sv_seg = np.repeat(rng.integers(0, 4, ends.size), np.diff(np.concatenate([[0], ends])))
        zp_seg = np.repeat(rng.integers(0, 16, ends.size), np.diff(np.concatenate([[0], ends])))
        m = ends[-1]
        res = p3.pe_run(act[:m], wgt[:m], fmt[0], fmt[1], sv_seg, zp_seg, first[:m], last[:m])
        assert not res["overflow"].any() and not res["nan"].any()
        dec = e4m3_value if fmt[0] == 0 else s0e4m4_value
        av = np.vectorize(dec)(act[:m])
        wv = np.array([[weight_real(c, fmt[1], sv_seg[i], zp_seg[i]) for c in wgt[i]]
                       for i in range(m)])
        beat = (av * wv).sum(-1)                               # exact: dyadic, < 2^53 range
        want = [beat[s:e].sum() for s, e in zip(np.concatenate([[0], ends[:-1]]), ends)]
        np.testing.assert_array_equal(p3.acc_to_real(res["acc"], *fmt), want)


# --- PE: streams against the loop reference --------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_pe_run_matches_loop_on_random_streams(seed):
    rng = np.random.default_rng([seed, 99])
    stream = random_stream(rng, 400, p_first=[0.0, 0.05, 0.3][seed % 3],
                           p_last=[0.05, 0.2, 0.5][seed % 3], nan_rate=0.01 * (seed % 2))
    stream = tuple(np.asarray(s) for s in stream)
    assert run_model(stream) == ref_pe(*stream)


def test_pe_run_overflow_with_long_max_runs():
    # E4M3 448 (M5 28, shift 14) x BitMoD +8 (code 8, sv_sel 2: 16 half units) in every lane
    n = 300
    sign = np.where(np.arange(n) < 150, 0, 0x80)               # 150 positive, then negative
    act = np.repeat((0x7E | sign)[:, None], 4, 1)
    wgt = np.full((n, 4), 8)
    first = np.zeros(n, bool)
    first[[0, 200]] = True
    last = (np.arange(n) % 25 == 24) | np.isin(np.arange(n), [72, 73, 272, 273])
    got = run_model((act, wgt, 0, 0, 2, 0, first, last))
    per_beat_fields = [np.full(n, v) for v in (0, 0, 2, 0)]
    assert got == ref_pe(act, wgt, *per_beat_fields, first, last)
    per_beat = 4 * (28 * 16 << 14)
    assert 73 * per_beat <= INT32_MAX < 74 * per_beat
    results = dict(zip(np.flatnonzero(last).tolist(), got))
    assert results[72] == (73 * per_beat, False, False)
    assert results[73] == (74 * per_beat - 2 ** 32, True, False)   # wraps, flags overflow
    assert results[174][1] is True                             # sticky after wrapping back
    assert results[224] == (-25 * per_beat, False, False)      # first at 200 cleared it
    assert results[272] == (-73 * per_beat, False, False)
    assert results[273] == (2 ** 32 - 74 * per_beat, True, False)


def greedy_terms(target):
    """Single-lane beats (act, wgt, act_fmt, wgt_fmt, sv_sel, zp) whose terms sum to target."""
    options = {}
    for fmt in (0, 1):
        f = p3.decode_act(ALL8, fmt)
        for a in ALL8:
            if f["nan"][a] or f["sign"][a]:
                continue
            for q in range(1, 16):
                t = int(f["m5"][a]) * q << int(f["shift"][a])
                options.setdefault(t, (int(a), q, fmt, 1, 0, 0))
    sizes = sorted(options, reverse=True)
    beats, rest = [], target
    while rest:
        t = next(s for s in sizes if s <= rest)
        beats.append(options[t])
        rest -= t
    return beats


def beats_to_stream(beats, sign=1):
    """Lane 0 carries each term; for sign -1 the INT4 weight is ``0 - q`` (code 0, zp = q)."""
    n = len(beats)
    act = np.zeros((n, 4), np.int64)
    wgt = np.zeros((n, 4), np.int64)
    fields = np.zeros((n, 4), np.int64)
    for i, (a, q, af, wf, sv, zp) in enumerate(beats):
        act[i, 0] = a
        wgt[i, 0], fields[i] = (q, (af, wf, sv, zp)) if sign > 0 else (0, (af, wf, sv, q))
    return act, wgt, fields


@pytest.mark.parametrize("sign", [1, -1])
def test_pe_run_overflow_exactly_at_the_boundary(sign):
    target = INT32_MAX if sign > 0 else -INT32_MIN
    beats = greedy_terms(target)
    act, wgt, fields = beats_to_stream(beats, sign)
    # one more beat of +-1: S0E4M4 code 1 (M5 = 1, shift 0) x INT4 1 / -1
    act = np.vstack([act, [[1, 0, 0, 0]]])
    wgt = np.vstack([wgt, [[1 if sign > 0 else 0, 0, 0, 0]]])
    fields = np.vstack([fields, [[1, 1, 0, 0 if sign > 0 else 1]]])
    n = len(act)
    last = np.zeros(n, bool)
    last[-2:] = True
    stream = (act, wgt, fields[:, 0], fields[:, 1], fields[:, 2], fields[:, 3],
              np.arange(n) == 0, last)
    got = run_model(stream)
    assert got == ref_pe(*stream)
    if sign > 0:
        assert got == [(INT32_MAX, False, False), (INT32_MIN, True, False)]
    else:
        assert got == [(INT32_MIN, False, False), (INT32_MAX, True, False)]


def test_pe_run_reset_persistence_and_nan():
    act = np.array([[0x38, 0, 0, 0], [0x7F, 0x38, 0, 0], [0x38, 0, 0, 0], [0x38, 0, 0, 0]])
    wgt = np.array([[2, 0, 0, 0], [5, 2, 0, 0], [2, 0, 0, 0], [2, 0, 0, 0]])
    # 0x38 = 1.0 (M5 16, shift 6): 16 * 2 << 6 = 2048 per beat (BitMoD code 2 = 1 half unit x2)
    res = p3.pe_run(act, wgt, 0, 0, 0, 0, [False, False, True, False], [True, True, False, True])
    assert res["acc"].tolist() == [2048, 4096, 4096]          # no first at the start: reset
    assert res["nan"].tolist() == [False, True, False]        # NaN lane: flag, contributes 0
    assert res["overflow"].tolist() == [False] * 3
    none = p3.pe_run(act, wgt, 0, 0, 0, 0, True, False)
    assert all(v.size == 0 for v in none.values())
    empty = p3.pe_run(np.zeros((0, 4), np.int64), np.zeros((0, 4), np.int64), 0, 0, 0, 0,
                      [], [])
    assert all(v.size == 0 for v in empty.values())
    assert p3.acc_to_real(res["acc"], 0, 0).tolist() == [1.0, 2.0, 2.0]


@pytest.mark.parametrize("change, exc, match", [
    (dict(act=np.zeros((3, 3), np.int64)), ValueError, r"act must have shape \(\.\.\., 4\)"),
    (dict(act=np.zeros((2, 3, 4), np.int64), wgt=np.zeros((2, 3, 4), np.int64)), ValueError,
     r"act must have shape \(n, 4\)"),
    (dict(wgt=np.zeros((2, 4), np.int64)), ValueError, "wgt must have the shape of act"),
    (dict(act=np.full((3, 4), 256)), ValueError, r"act must hold .* \(0..255\), not 256"),
    (dict(act=np.zeros((3, 4))), TypeError, "act must hold integers, not float64"),
    (dict(wgt=np.full((3, 4), True)), TypeError, "wgt must hold integers, not bool"),
    (dict(act_fmt=2), ValueError, "act_fmt must hold"),
    (dict(wgt_fmt=[0, 1]), ValueError, r"wgt_fmt must be a scalar or have shape \(3,\)"),
    (dict(sv_sel=4), ValueError, "sv_sel must hold"),
    (dict(zp=-1), ValueError, "zp must hold"),
    (dict(first=[0, 2, 0]), ValueError, "first must hold flags"),
    (dict(last=[True, False]), ValueError, r"last must be a scalar or have shape \(3,\)"),
    (dict(last=[0.0, 1.0, 0.0]), TypeError, "last must hold integers"),
])
def test_pe_run_rejects(change, exc, match):
    args = dict(act=np.zeros((3, 4), np.int64), wgt=np.zeros((3, 4), np.int64), act_fmt=0,
                wgt_fmt=0, sv_sel=0, zp=0, first=True, last=True) | change
    with pytest.raises(exc, match=match):
        p3.pe_run(**args)


def test_acc_to_real_units_and_range():
    assert p3.acc_to_real(1 << 10, 0, 1) == 1.0 and p3.acc_to_real(1 << 10, 0, 0) == 0.5
    assert p3.acc_to_real(1 << 18, 1, 1) == 1.0 and p3.acc_to_real(-(1 << 19), 1, 0) == -1.0
    with pytest.raises(ValueError, match="acc must hold signed 32-bit"):
        p3.acc_to_real(2 ** 31, 0, 0)


# --- report and isolation --------------------------------------------------------------------


def test_report_prints_its_tables(capsys):
    assert p3_report.main(["--rows", "4", "--width", "512", "--weight-rows", "8"]) == 0
    out = capsys.readouterr().out
    for marker in ["(a) attention scores", "(b) weights", "(c) effective bits",
                   "(d) keys", "(e) PE path", "FP8-S0E4M4", "FP8-E4M3 /token", "INT8 /token",
                   "BitMoD", "INT4-asym", "FP4 E2M1", "4.1562", "4.1406", "8.0039",
                   "overflow False, nan False"]:
        assert marker in out, marker
    assert p3_report.main(["--rows", "4", "--width", "512", "--weight-rows", "8"]) == 0
    assert capsys.readouterr().out == out                      # deterministic
    assert max(len(line) for line in out.splitlines()) <= 100


def test_report_rejects_bad_options(capsys):
    with pytest.raises(SystemExit):
        p3_report.main(["--rows", "0"])
    assert "must be a positive integer" in capsys.readouterr().err


def test_report_metrics():
    m = p3_report.error_metrics([1.0, 2.0, 0.0], [1.0, 1.0, 0.5], rel_floor=0.5)
    assert m["max_abs"] == 1.0 and m["max_rel"] == 0.5
    assert m["rmse"] == pytest.approx(np.sqrt(1.25 / 3))
    assert m["sqnr_db"] == pytest.approx(10 * np.log10(5 / 1.25))


def test_golden_never_imports_hdl():
    code = ("import sys, golden.p3, golden.p3.report; "
            "sys.exit(any(m == 'hdl' or m.startswith('hdl.') for m in sys.modules))")
    root = Path(p3.__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_ml_dtypes_is_the_e4m3_reference():
    # the quantizer's codes are ml_dtypes' own cast of the float32 quotient
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 64)) * 3
    codes, scales = p3.quantize_e4m3(x)
    want = (x / scales).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    np.testing.assert_array_equal(codes, want)
