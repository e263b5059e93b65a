"""Oaken offline threshold profiling, baselines and bit counts (golden/oaken/, report).

References written here, not taken from the model: per-run cut points from ``heapq`` topK
selections and their mean as an exact ``Fraction``; data whose order statistics are known in
closed form (permutations of an integer range, uniform integers); bit counts of hand-built
chunks; per-group steps of the baselines recomputed with explicit loops over the groups.
"""

import heapq
import math
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from qllm_cores.golden.oaken import (
    INNER, MIDDLE, OUTER, decompose, dequantize_vector, quantize_dequantize_float,
    quantize_vector,
)
from qllm_cores.golden.oaken import (
    atom_like, coo23_mixed, effective_bitwidth, error_metrics, group_fractions, kivi_like,
    oaken_chunk_bits, oaken_float_roundtrip, oaken_roundtrip, per_token_int4, profile_layers,
    profile_thresholds, run_cut_points, synthetic_kv, topk_counts,
)
from qllm_cores.golden.oaken.report import main

ROOT = Path(__file__).resolve().parents[2]
TH = (-100, -10, 10, 100)


def round_half_up(q):
    return math.floor(q + Fraction(1, 2))


def brute_cut_points(run, outer, inner):
    """One run's (t_lo_o, t_lo_i, t_hi_i, t_hi_o) from topK selections (even outer split)."""
    v = [int(a) for a in np.ravel(run)]
    n = len(v)
    k_out = round_half_up(Fraction(outer).limit_denominator(10 ** 6) * n)
    k_hi = round_half_up(Fraction(outer / 2).limit_denominator(10 ** 6) * n)
    k_lo = k_out - k_hi
    k_in = round_half_up(Fraction(inner).limit_denominator(10 ** 6) * n)
    # the largest value left after removing topK(x, k_hi), i.e. the (k_hi + 1)-th largest
    t_hi_o = heapq.nlargest(k_hi + 1, v)[-1]
    t_lo_o = heapq.nsmallest(k_lo + 1, v)[-1]
    a = heapq.nsmallest(k_in, (abs(e) for e in v))[-1] if k_in else 0
    # the documented clip of the inner interval into the outer one (acts on skewed runs only)
    t_lo_i = min(max(-a, t_lo_o), t_hi_o)
    t_hi_i = min(max(a, t_lo_i), t_hi_o)
    return t_lo_o, t_lo_i, t_hi_i, t_hi_o


def brute_profile(runs, outer, inner):
    cuts = [brute_cut_points(r, outer, inner) for r in runs]
    return tuple(round_half_up(Fraction(sum(c[i] for c in cuts), len(cuts))) for i in range(4))


def key_runs(seed, n_runs=40, tokens=32, channels=128, kind="key", layer=0):
    return np.stack([synthetic_kv(np.random.default_rng([seed, r]), tokens, channels, kind,
                                  layer) for r in range(n_runs)])


# --- profiling: known distributions ------------------------------------------------------------


def test_permutations_of_a_range_give_exact_cut_points():
    rng = np.random.default_rng(0)
    runs = np.stack([rng.permutation(np.arange(-500, 500)) for _ in range(7)])
    # n = 1000: 20 values per outer tail, 60 smallest |x| (0, ±1, ..., ±29, then 30)
    assert profile_thresholds(runs) == (-480, -30, 30, 479)
    assert (run_cut_points(runs) == [-480, -30, 30, 479]).all()
    x = runs[0]
    assert np.count_nonzero(x > 479) == 20 and np.count_nonzero(x < -480) == 20


def test_distinct_magnitudes_give_exact_group_sizes():
    # positives even, negatives odd: every |x| distinct, so each group is exactly its topK
    pos, neg = 2 * np.arange(1, 601), -(2 * np.arange(600) + 1)
    rng = np.random.default_rng(1)
    x = rng.permutation(np.concatenate([pos, neg]))            # n = 1200
    for outer, inner in [(0.04, 0.06), (0.1, 0.2), (0.0, 0.5), (0.3, 0.0)]:
        k_lo, k_hi, k_in = topk_counts(x.size, outer, inner)
        th = profile_thresholds(x[None], outer, inner)
        assert np.count_nonzero(x > th[3]) == k_hi
        assert np.count_nonzero(x < th[0]) == k_lo
        if k_in:
            assert np.count_nonzero((x >= th[1]) & (x <= th[2])) == k_in
        assert k_lo + k_hi == round(outer * x.size)


def test_uniform_integers_match_analytic_quantiles():
    L = 10000
    rng = np.random.default_rng(2)
    runs = rng.integers(-L, L + 1, size=(50, 20000))
    t_lo_o, t_lo_i, t_hi_i, t_hi_o = profile_thresholds(runs)
    # uniform on [-L, L]: 2 % per tail -> +-0.96 L; 6 % smallest |x| -> |x| <= 0.06 L
    assert abs(t_hi_o - 0.96 * L) < 100 and abs(t_lo_o + 0.96 * L) < 100
    assert abs(t_hi_i - 0.06 * L) < 15 and t_lo_i == -t_hi_i


def test_outer_split_moves_the_outer_fraction_between_tails():
    rng = np.random.default_rng(3)
    x = rng.permutation(np.arange(-500, 500))
    assert profile_thresholds(x[None], 0.04, 0.0, outer_split=1.0) == (-500, 0, 0, 459)
    assert profile_thresholds(x[None], 0.04, 0.0, outer_split=0.0) == (-460, 0, 0, 499)
    assert profile_thresholds(x[None], 0.04, 0.0, outer_split=0.25) == (-470, 0, 0, 489)


# --- profiling: averaging over runs -----------------------------------------------------------


@pytest.mark.parametrize("outer, inner", [(0.04, 0.06), (0.02, 0.1), (0.1, 0.0), (0.5, 0.5)])
def test_average_over_runs_matches_brute_force_topk(outer, inner):
    rng = np.random.default_rng(4)
    # runs of different scales and skews, so that the average differs from any single run
    runs = np.stack([np.clip(rng.standard_t(3, 777) * 300 * (1 + r / 5) + 40 * (r % 3),
                             -32768, 32767).astype(np.int64) for r in range(13)])
    assert profile_thresholds(runs, outer, inner) == brute_profile(runs, outer, inner)
    want = [brute_cut_points(r, outer, inner) for r in runs]
    assert run_cut_points(runs, outer, inner).tolist() == [list(w) for w in want]


def test_average_rounds_half_up():
    a = np.array([-10, -1, 0, 1, 10])
    b = np.array([-11, -2, 0, 2, 11])
    # n = 5, outer 0.4: one value per tail -> 2nd smallest / 2nd largest; inner 0.2: |x| <= 0
    # run a: (-1, 0, 0, 1), run b: (-2, 0, 0, 2) -> mean (-1.5, 0, 0, 1.5) -> (-1, 0, 0, 2)
    assert profile_thresholds(np.stack([a, b]), 0.4, 0.2) == (-1, 0, 0, 2)


def test_profile_layers_equals_per_layer_profiles():
    kv = np.stack([np.stack([synthetic_kv(np.random.default_rng([5, r, layer]), 16, 64,
                                          "key", layer) for layer in range(3)])
                   for r in range(9)])
    got = profile_layers(kv, 0.05, 0.05)
    assert got == [profile_thresholds(kv[:, layer], 0.05, 0.05) for layer in range(3)]
    assert len(set(got)) == 3                              # layers really differ


# --- profiling: ordering on hard inputs ------------------------------------------------------


@pytest.mark.parametrize("data_bits", [16, 8])
def test_thresholds_ordered_and_in_range_on_hard_inputs(data_bits):
    lo, hi = -(1 << (data_bits - 1)), (1 << (data_bits - 1)) - 1
    rng = np.random.default_rng(6)
    cases = [
        rng.integers(1, hi + 1, (5, 100)),                   # all positive
        rng.integers(lo, 0, (5, 100)),                       # all negative
        np.full((3, 50), 7),                                 # constant
        rng.integers(lo, hi + 1, (4, 1)),                    # one value per run
        rng.integers(lo, hi + 1, (4, 2)),
        np.stack([np.full(64, lo), np.full(64, hi)]),        # range ends
        rng.choice([lo, hi], (6, 64)),
    ]
    ratios = [(0.04, 0.06), (1.0, 0.0), (0.0, 1.0), (0.5, 0.5), (0.0, 0.0), (0.9, 0.1)]
    for runs in cases:
        for outer, inner in ratios:
            for split in (0.0, 0.5, 1.0):
                th = profile_thresholds(runs, outer, inner, data_bits, split)
                assert th[0] <= th[1] <= th[2] <= th[3], (runs, outer, inner, th)
                assert all(lo <= t <= hi for t in th)
                # usable by the online quantizer
                quantize_vector(runs.ravel()[:8], th, data_bits=data_bits,
                                vec_len=min(8, runs.size))


def test_one_sided_data_clips_inner_into_outer():
    x = np.arange(1, 101)                                  # all positive, n = 100
    th = profile_thresholds(x[None], 0.04, 0.06)
    # outer: 2nd..99th kept; smallest |x| lie in the lower tail: inner clipped to [3, 6]
    assert th == (3, 3, 6, 98)


# --- profiling: held-out data ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["key", "value"])
@pytest.mark.parametrize("outer, inner", [(0.04, 0.06), (0.02, 0.03)])
def test_group_fractions_on_held_out_data_match_the_ratio(kind, outer, inner):
    for layer in range(2):
        th = profile_thresholds(key_runs(10, kind=kind, layer=layer), outer, inner)
        x = synthetic_kv(np.random.default_rng(999), 512, 128, kind, layer)
        f_outer, f_middle, f_inner = group_fractions(x, th)
        assert abs(f_outer - outer) < 0.004, (layer, f_outer)
        # inner is inclusive at both +-a: integer ties push it up by a few tenths of a percent
        assert -0.002 < f_inner - inner < 0.008, (layer, f_inner)
        assert abs(f_middle - (1 - outer - inner)) < 0.01


# --- argument checks -------------------------------------------------------------------------


RUNS = np.zeros((2, 8), np.int64)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: profile_thresholds(RUNS, outer=-0.1), ValueError, r"outer must be in range 0..1"),
    (lambda: profile_thresholds(RUNS, inner=1.5), ValueError, r"inner must be in range 0..1"),
    (lambda: profile_thresholds(RUNS, outer=float("nan")), ValueError, r"outer must be"),
    (lambda: profile_thresholds(RUNS, outer=0.6, inner=0.5), ValueError,
     r"outer \+ inner must be at most 1 \(middle = 1 - outer - inner\), not 0.6 \+ 0.5"),
    (lambda: profile_thresholds(RUNS, outer="0.04"), TypeError, r"outer must be a real number"),
    (lambda: profile_thresholds(RUNS, inner=True), TypeError, r"inner must be a real number"),
    (lambda: profile_thresholds(RUNS, outer_split=1.5), ValueError, r"outer_split"),
    (lambda: profile_thresholds(RUNS, data_bits=1), ValueError, r"data_bits"),
    (lambda: profile_thresholds(RUNS.astype(float)), TypeError, r"runs must hold integers"),
    (lambda: profile_thresholds(np.zeros(8, int)), ValueError, r"runs must have shape"),
    (lambda: profile_thresholds(np.zeros((0, 8), int)), ValueError, r"runs must not be empty"),
    (lambda: profile_thresholds([[0, 40000]]), ValueError, r"runs must hold signed 16-bit.*40000"),
    (lambda: profile_thresholds([[0, 200]], data_bits=8), ValueError, r"runs must hold signed 8"),
    (lambda: profile_layers(RUNS), ValueError, r"kv must have shape \(n_runs, n_layers"),
    (lambda: profile_layers(RUNS[None], inner=2), ValueError, r"inner must be"),
    (lambda: topk_counts(0), ValueError, r"n must be in range"),
    (lambda: effective_bitwidth(0.7, 0.7), ValueError, r"outer \+ inner"),
    (lambda: synthetic_kv(0, 4, 4, kind="query"), ValueError, r"kind must be 'key' or 'value'"),
    (lambda: synthetic_kv(0, 0, 4), ValueError, r"n_tokens"),
    (lambda: synthetic_kv(0, 4, 4, frac_bits=16), ValueError, r"frac_bits"),
    (lambda: synthetic_kv("seed", 4, 4), TypeError, r"rng must be"),
    (lambda: synthetic_kv(0, 4, 4, spike_rate=2), ValueError, r"spike_rate"),
    (lambda: synthetic_kv(0, 4, 4, n_outlier_channels=5), ValueError, r"n_outlier_channels"),
    (lambda: per_token_int4(np.zeros((2, 8)), group_size=0), ValueError, r"group_size"),
    (lambda: per_token_int4(np.zeros((2, 8)), bits=0), ValueError, r"bits"),
    (lambda: kivi_like(np.zeros(8)), ValueError, r"x must be a non-empty array"),
    (lambda: kivi_like(np.zeros((2, 8)), kind="k"), ValueError, r"kind must be"),
    (lambda: atom_like(np.zeros((2, 8)), n_outlier_channels=9), ValueError,
     r"n_outlier_channels"),
    (lambda: atom_like(np.zeros((2, 8)), calib=np.zeros((2, 7))), ValueError,
     r"calib must have 8 channels"),
    (lambda: coo23_mixed(np.zeros(8), TH), TypeError, r"x must hold integers"),
    (lambda: oaken_roundtrip(np.zeros(8, int), TH, vec_len=65), ValueError, r"vec_len"),
    (lambda: error_metrics(np.zeros(3), np.zeros(4)), ValueError, r"y must have the shape"),
])
def test_invalid_arguments_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# --- Oaken bits ------------------------------------------------------------------------------


def hand_chunk():
    """64 values under TH: 3 outer (-130, 160, 101), 5 inner (0, 5, -3, 10, -10), 56 middle."""
    x = np.full(64, 50)
    x[[0, 9, 63]] = [-130, 160, 101]
    x[[3, 4, 5, 20, 40]] = [0, 5, -3, 10, -10]
    x[[1, 2, 6]] = [-70, -40, 40]
    return x


def test_oaken_bits_hand_count():
    x = hand_chunk()
    c = quantize_vector(x, TH)
    assert len(c.coo) == 8
    m = 16 + 8 + 2                                          # metadata width M
    assert oaken_chunk_bits(c) == 4 * 64 + 8 * 8 + 6 * m
    assert oaken_chunk_bits(c, metadata=False) == 4 * 64 + 8 * 8
    assert oaken_chunk_bits(c, frac_bits=4) == 4 * 64 + 8 * 8 + 6 * 22
    r = oaken_roundtrip(x[None], TH)
    assert r.bits_per_element == (4 * 64 + 8 * 8 + 6 * m) / 64
    assert r.bits_per_element_no_meta == 5.0
    assert (r.n_inner, r.n_outer, r.n_chunks, r.bits_per_outlier) == (5, 3, 1, 8)


def test_oaken_bits_count_every_chunk_including_a_short_one():
    rng = np.random.default_rng(7)
    x = rng.integers(-300, 301, (3, 150))                  # chunks 64, 64, 22 per row
    r = oaken_roundtrip(x, TH)
    groups = decompose(x, TH)["group"]
    n_out = int(np.count_nonzero(groups != MIDDLE))
    assert r.n_chunks == 9
    assert r.n_inner == np.count_nonzero(groups == INNER)
    assert r.n_outer == np.count_nonzero(groups == OUTER)
    assert r.bits_per_element == (4 * x.size + 8 * n_out + 9 * 6 * 26) / x.size
    for i in range(3):                                      # and the codes are the chunks'
        for s in (0, 64, 128):
            chunk = x[i, s:s + 64]
            c = quantize_vector(chunk, TH, vec_len=chunk.size)
            assert (r.recon[i, s:s + 64] == dequantize_vector(c.dense, c.coo, c.meta, TH)).all()


def test_effective_bitwidth():
    assert effective_bitwidth() == pytest.approx(4.8)
    assert effective_bitwidth(0.05, 0.05) == pytest.approx(4.8)
    assert effective_bitwidth(0.0, 0.0) == 4.0
    # measured on held-out data without metadata, close to the paper's 4.8
    th = profile_thresholds(key_runs(11))
    r = oaken_roundtrip(synthetic_kv(12, 256, 128), th)
    assert abs(r.bits_per_element_no_meta - 4.8) < 0.06
    assert r.bits_per_element == pytest.approx(r.bits_per_element_no_meta + 6 * 26 / 64)


# --- error: Oaken against the baselines -------------------------------------------------------


@pytest.mark.parametrize("kind", ["key", "value"])
def test_oaken_beats_per_token_int4_on_heavy_tailed_data(kind):
    th = profile_thresholds(key_runs(13, kind=kind), 0.04, 0.06)
    x = synthetic_kv(np.random.default_rng(14), 256, 128, kind)
    assert np.mean(((x - np.median(x)) / x.std()) ** 4) > 5     # heavy-tailed indeed
    oaken = error_metrics(x, oaken_roundtrip(x, th).recon)
    flt = error_metrics(x, oaken_float_roundtrip(x, th))
    for group in (64, None):
        base = error_metrics(x, per_token_int4(x, group).recon)
        assert oaken.rmse < 0.6 * base.rmse
        assert oaken.sqnr_db > base.sqnr_db + 3
    assert abs(oaken.rmse - flt.rmse) < 0.02 * flt.rmse


def test_float_roundtrip_handles_a_short_last_chunk():
    rng = np.random.default_rng(15)
    x = rng.integers(-400, 401, (2, 100))
    y = oaken_float_roundtrip(x, TH)
    assert np.array_equal(y[:, :64], quantize_dequantize_float(x[:, :64], TH))
    assert np.array_equal(y[:, 64:], quantize_dequantize_float(x[:, 64:], TH, vec_len=36))


def group_steps(x, axis, size, levels=15):
    """(max - min) / levels of every group of ``size`` along ``axis``, by explicit loops."""
    x = np.moveaxis(np.asarray(x, float), axis, -1)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        for s in range(0, x.shape[-1], size):
            g = x[idx][s:s + size]
            out[idx][s:s + size] = (g.max() - g.min()) / levels
    return np.moveaxis(out, -1, axis)


def data():
    return synthetic_kv(np.random.default_rng(16), 70, 130, "key").astype(float)


def test_per_token_int4_steps_bits_and_bound():
    x = data()
    r = per_token_int4(x, 64, meta_dtype=None)
    assert np.allclose(r.step, group_steps(x, -1, 64))
    assert np.all(np.abs(r.recon - x) <= r.step / 2 + 1e-9)
    assert r.bits_per_element == 4 + 32 * 3 / 130 and r.bits_per_element_no_meta == 4
    whole = per_token_int4(x, None, meta_dtype=None)
    assert np.allclose(whole.step, group_steps(x, -1, 130))
    assert whole.bits_per_element == 4 + 32 / 130


@pytest.mark.parametrize("kind, axis", [("key", 0), ("value", 1)])
def test_kivi_like_groups_keys_per_channel_values_per_token(kind, axis):
    x = data()
    r = kivi_like(x, kind, 32, meta_dtype=None)
    assert np.allclose(r.step, group_steps(x, axis, 32))
    assert np.all(np.abs(r.recon - x) <= r.step / 2 + 1e-9)
    n_groups = 3 * 130 if kind == "key" else 70 * 5          # ceil(70/32), ceil(130/32)
    assert r.bits_per_element == pytest.approx(4 + 32 * n_groups / x.size)


def test_atom_like_outlier_channels_at_int8():
    x = data()[:, :10]
    calib = np.ones((5, 10))
    calib[:, [3, 7]] = 100                                   # channels 3 and 7 are outliers
    r = atom_like(x, 2, group_size=4, calib=calib, meta_dtype=None)
    out = x[:, [3, 7]]
    want_out = (out.max(1) - out.min(1)) / 255
    assert np.allclose(r.step[:, 3], want_out) and np.allclose(r.step[:, 7], want_out)
    rest = x[:, [0, 1, 2, 4, 5, 6, 8, 9]]                    # reordered inliers, groups of 4
    want_rest = group_steps(rest, -1, 4)
    assert np.allclose(r.step[:, [0, 1, 2, 4, 5, 6, 8, 9]], want_rest)
    assert np.all(np.abs(r.recon - x) <= r.step / 2 + 1e-9)
    assert r.bits_per_element == (4 * 8 + 8 * 2 + 32 * 3) / 10
    assert r.bits_per_element_no_meta == (4 * 8 + 8 * 2) / 10 and r.bits_per_outlier == 8


def test_coo23_mixed_keeps_outliers_exact_and_counts_23_bits():
    x = synthetic_kv(np.random.default_rng(17), 40, 100, "key")
    th = profile_thresholds(key_runs(18, n_runs=10, channels=100))
    r = coo23_mixed(x, th, meta_dtype=None)
    middle = decompose(x, th)["group"] == MIDDLE
    assert np.array_equal(r.recon[~middle], x[~middle]) and (r.step[~middle] == 0).all()
    assert np.all(np.abs(r.recon - x) <= r.step / 2 + 1e-9)
    # step of a chunk: range of its middle values / 15, no group shift
    xm = np.where(middle, x, np.nan)
    for t in range(3):
        for s, e in ((0, 64), (64, 100)):
            g = xm[t, s:e]
            want = (np.nanmax(g) - np.nanmin(g)) / 15
            assert np.allclose(r.step[t, s:e][middle[t, s:e]], want)
    n_out = int(np.count_nonzero(~middle))
    assert r.bits_per_element == (4 * x.size + 23 * n_out + 32 * 40 * 2) / x.size
    assert r.bits_per_outlier == 23


@pytest.mark.parametrize("scheme", ["per_token", "kivi_k", "kivi_v", "atom", "coo23"])
def test_fp16_metadata_error_within_step_bound(scheme):
    """With fp16 scale and zero: |err| <= d16/2 + 2^-11 (|min| + 15 d) (clipped codes)."""
    xi = synthetic_kv(np.random.default_rng(19), 64, 128, "key")
    x = xi.astype(float)
    r = {"per_token": lambda: per_token_int4(x),
         "kivi_k": lambda: kivi_like(x, "key"),
         "kivi_v": lambda: kivi_like(x, "value"),
         "atom": lambda: atom_like(x),
         "coo23": lambda: coo23_mixed(xi, profile_thresholds(xi[None]))}[scheme]()
    slack = 2.0 ** -11 * (np.abs(x).max() + 15 * r.step * (1 + 2.0 ** -10))
    err = np.abs(r.recon - x)
    assert np.all(err <= r.step / 2 + slack + 1e-9)
    assert err.max() > 0.2 * r.step.max()                    # a real quantizer, not identity


def test_error_metrics_hand_values():
    m = error_metrics([3, 4], [3, 5])
    assert m.rmse == pytest.approx(math.sqrt(0.5))
    assert m.max_abs == 1
    assert m.sqnr_db == pytest.approx(10 * math.log10(25))
    assert m.rel_err == pytest.approx(0.2)
    assert error_metrics([1, 2], [1, 2]).sqnr_db == math.inf


# --- synthetic data --------------------------------------------------------------------------


def test_synthetic_kv_deterministic_saturated_and_structured():
    a = synthetic_kv(np.random.default_rng(20), 300, 128, "key", layer=2)
    assert a.dtype == np.int64 and a.shape == (300, 128)
    assert np.array_equal(a, synthetic_kv(20, 300, 128, "key", layer=2))
    assert a.min() >= -32768 and a.max() <= 32767
    b = synthetic_kv(np.random.default_rng(21), 300, 128, "key", layer=2)
    assert not np.array_equal(a, b)
    # outlier channels belong to the layer, not to the tokens (Oaken section 4.1)
    top = lambda v: set(np.argsort(-np.abs(v).mean(0))[:4].tolist())   # noqa: E731
    assert top(a) == top(b) and len(top(a)) == 4
    std = a.std(0)
    assert np.sort(std)[-4:].min() > 4 * np.median(std)
    other = synthetic_kv(np.random.default_rng(20), 300, 128, "key", layer=3)
    assert top(other) != top(a)
    v = synthetic_kv(np.random.default_rng(20), 300, 128, "value")
    assert np.sort(v.std(0))[-4:].min() < 4 * np.median(v.std(0))
    spikes = synthetic_kv(0, 2000, 64, "value", spike_rate=0.05, spike_df=2)
    assert np.abs(spikes).max() > 20 * np.median(np.abs(spikes))


# --- report ----------------------------------------------------------------------------------


SMALL = ["--runs", "6", "--profile-tokens", "8", "--tokens", "64", "--channels", "128",
         "--layers", "2"]
ROWS = ["Oaken (integer path)", "Oaken (float reference)", "per-token INT4 (g64)",
        "KIVI-like INT4 (g32)", "Atom-like (8 ch INT8, g64)", "mixed 23-bit COO + INT4 (g64)"]


def test_report_prints_tables_and_is_deterministic(capsys):
    assert main(SMALL) == 0
    out = capsys.readouterr().out
    assert main(SMALL) == 0
    assert capsys.readouterr().out == out
    lines = out.splitlines()
    headers = [ln for ln in lines if ln.startswith("scheme ")]
    assert len(headers) == 2
    for h in ("bits/elem", "bits/outlier", "RMSE", "max |err|", "SQNR dB"):
        assert h in headers[0]
    for name in ROWS:
        rows = [ln for ln in lines if ln.startswith(name)]
        assert len(rows) == 2, name
        cells = [c.strip() for c in rows[0].split("|")]
        assert len(cells) == 8 and float(cells[4]) > 0
    oaken = [c.strip() for c in next(ln for ln in lines if ln.startswith(ROWS[0])).split("|")]
    int4 = [c.strip() for c in next(ln for ln in lines if ln.startswith(ROWS[2])).split("|")]
    assert oaken[3] == "8" and float(oaken[4]) < float(int4[4])
    assert "4 + 8 x 0.100 = 4.800" in out
    assert out.count("observed Oaken") == 2 and "observed group fractions" in out
    assert "layer 1 value" in out
    assert main(SMALL + ["--eval-seed", "5"]) == 0
    assert capsys.readouterr().out != out


@pytest.mark.parametrize("argv, match", [
    (["--tokens", "0"], "must be a positive integer"),
    (["--outer", "0.7", "--inner", "0.5"], r"outer \+ inner must be at most 1"),
    (["--outer", "-1"], "outer must be in range"),
])
def test_report_rejects_bad_arguments(argv, match, capsys):
    with pytest.raises(SystemExit):
        main(SMALL + argv)
    assert re.search(match, capsys.readouterr().err)


def test_report_runs_as_a_module():
    res = subprocess.run([sys.executable, "-m", "qllm_cores.golden.oaken.report", *SMALL,
                          "--seed", "3"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Oaken (integer path)") == 2
