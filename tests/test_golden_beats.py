"""The beat-level golden adapters (golden/*/beats.py) on small cases worked out by hand from
docs/contract.md: every expected value below is computed in the comment beside it, not by the code."""

import numpy as np
import pytest

from qllm_cores.golden import adapters as beats
from qllm_cores.golden.kllm.orizuru import MAX_BEAT_LANES, beat_lanes


def _assert_fields(got, want):
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(value), err_msg=name)


# --------------------------------------------------------------------------- kllm_concat


def test_kllm_concat_puts_the_activation_index_high():
    # contract 1: y = (a << b_bits) | b. a = 3, b = 5 -> 0x35 = 53; a = 15, b = 0 -> 0xF0 = 240;
    # a_bits = 3, b_bits = 2: a = 5, b = 2 -> 0b101_10 = 22.
    p = {"a_bits": 4, "b_bits": 4, "lanes": 2, "pipeline": 0}
    out = beats.kllm_concat.expected(p, {"i": {"a": [[3, 15]], "b": [[5, 0]]}})
    _assert_fields(out["o"], {"y": [[53, 240]]})
    p = {"a_bits": 3, "b_bits": 2, "lanes": 1, "pipeline": 0}
    out = beats.kllm_concat.expected(p, {"i": {"a": [[5]], "b": [[2]]}})
    _assert_fields(out["o"], {"y": [[22]]})


# --------------------------------------------------------------------------- kllm_idx_counter


def _counter(**overrides):
    p = {"n_inputs": 4, "idx_bits": 2, "mode": "kk", "weight_bits": None, "max_len": 8,
         "banks": 2, "pipeline": 3}
    p.update(overrides)
    return p


def test_idx_counter_histograms_of_unmasked_lanes_per_reduction():
    # Reduction 1: beat 0 idx (0, 1, 1, 3) all lanes; beat 1 idx (2, 2, 0, 1), mask 0b0011:
    # lanes 0 and 1 only (2, 2). Counted: 0, 1, 1, 3, 2, 2 -> bins (1, 2, 2, 1).
    # Reduction 2: idx (3, 3, 3, 3), mask 0b1010: lanes 1 and 3 -> bins (0, 0, 0, 2).
    # A beat after the final `last` ends no reduction: no output.
    i = {"idx": [[0, 1, 1, 3], [2, 2, 0, 1], [3, 3, 3, 3], [1, 1, 1, 1]],
         "mask": [0b1111, 0b0011, 0b1010, 0b1111], "last": [0, 1, 1, 0]}
    out = beats.kllm_idx_counter.expected(_counter(), {"i": i})["o"]
    _assert_fields(out, {"count": [1, 2, 2, 1, 0, 0, 0, 2],
                         "last": [0, 0, 0, 1, 0, 0, 0, 1]})


def test_idx_counter_wraps_past_max_len():
    # kk, max_len 8: counters of 8.bit_length() = 4 bits. 5 beats x 4 lanes of index 0 = 20
    # entries: 20 mod 16 = 4.
    i = {"idx": np.zeros((5, 4), int), "mask": [15] * 5, "last": [0, 0, 0, 0, 1]}
    out = beats.kllm_idx_counter.expected(_counter(), {"i": i})["o"]
    _assert_fields(out, {"count": [4, 0, 0, 0], "last": [0, 0, 0, 1]})


def test_idx_counter_weighted_in_ik_mode():
    # ik, 2 lanes, 1-bit indices, 4-bit weights, max_len 2: the counter holds
    # 2 * -8 .. 2 * 7 = -16..14: 5 bits, -16..15.
    # Reduction 1: beat 0 idx (0, 1) weights (-3, 5); beat 1 idx (1, 1) weights (2, -8), lane 0
    # only -> bin 0: -3, bin 1: 5 + 2 = 7.
    # Reduction 2: three entries of index 0 with weight -8 = -24, past max_len: 5-bit two's
    # complement -24 + 32 = 8; bin 1: lane 1 of beat 3, weight 7.
    p = _counter(n_inputs=2, idx_bits=1, mode="ik", weight_bits=4, max_len=2)
    i = {"idx": [[0, 1], [1, 1], [0, 0], [0, 1]], "weight": [[-3, 5], [2, -8], [-8, -8], [-8, 7]],
         "mask": [0b11, 0b01, 0b11, 0b11], "last": [0, 1, 0, 1]}
    out = beats.kllm_idx_counter.expected(p, {"i": i})["o"]
    _assert_fields(out, {"count": [-3, 7, 8, 7], "last": [0, 1, 0, 1]})


def test_idx_counter_takes_a_64_bit_mask():
    # 64 lanes; the mask keeps lanes 0 and 63 only (bit 63 set: above int64's positive range).
    p = _counter(n_inputs=64, idx_bits=1)
    idx = np.zeros((1, 64), int)
    idx[0, 63] = 1
    out = beats.kllm_idx_counter.expected(p, {"i": {"idx": idx, "mask": [(1 << 63) | 1],
                                                    "last": [1]}})["o"]
    _assert_fields(out, {"count": [1, 1], "last": [0, 1]})


# --------------------------------------------------------------------------- orizuru


def test_orizuru_top_and_bottom_two():
    # n = 8, k = 2. Values 1.0, -2.0, 0.5, 3.0, 0.25, -0.5, 2.0, -1.0 (binary16 0x3C00, 0xC000,
    # 0x3800, 0x4200, 0x3400, 0xB800, 0x4000, 0xBC00). Largest: 3.0 (lane 3), 2.0 (lane 6);
    # smallest: -2.0 (lane 1), -1.0 (lane 7). Mask on the second beat: lanes 1, 3, 6, 7 =
    # 2 + 8 + 64 + 128 = 202.
    x = [0x3C00, 0xC000, 0x3800, 0x4200, 0x3400, 0xB800, 0x4000, 0xBC00]
    out = beats.orizuru.expected({"n": 8, "k": 2}, {"i": {"x": [x]}})["o"]
    _assert_fields(out, {"max_index": [3, 6], "max_value": [0x4200, 0x4000],
                         "min_index": [1, 7], "min_value": [0xC000, 0xBC00],
                         "last": [0, 1], "mask": [0, 202]})


def test_orizuru_total_order_of_zeros_infinities_and_nans():
    # contract 3 totalOrder: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
    # Lanes: +0, -0, +inf, -inf, +NaN (0x7E00), 1.0, -NaN (0xFE00), 2.0.
    # Largest two: +NaN (lane 4), +inf (lane 2); smallest two: -NaN (lane 6), -inf (lane 3).
    # Mask: lanes 2, 3, 4, 6 = 4 + 8 + 16 + 64 = 92.
    x = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0xFE00, 0x4000]
    out = beats.orizuru.expected({"n": 8, "k": 2}, {"i": {"x": [x]}})["o"]
    _assert_fields(out, {"max_index": [4, 2], "max_value": [0x7E00, 0x7C00],
                         "min_index": [6, 3], "min_value": [0xFE00, 0xFC00],
                         "last": [0, 1], "mask": [0, 92]})


def test_orizuru_wide_vectors_arrive_in_beats_of_1024():
    # contract 3: up to 1024 values per beat; n = 2048 is two beats, lane j of beat b is element
    # 1024 b + j. All 1.0 except element 1500 = 2.0 (beat 1, lane 476) and element 10 = -1.0.
    assert MAX_BEAT_LANES == 1024
    assert [beat_lanes(n) for n in (2, 16, 1024, 2048, 4096)] == [2, 16, 1024, 1024, 1024]
    x = np.full((2, 1024), 0x3C00)
    x[1, 476] = 0x4000
    x[0, 10] = 0xBC00
    out = beats.orizuru.expected({"n": 2048, "k": 1}, {"i": {"x": x}})["o"]
    _assert_fields(out, {"max_index": [1500], "max_value": [0x4000], "min_index": [10],
                         "min_value": [0xBC00], "last": [1], "mask": [(1 << 1500) | (1 << 10)]})
    stimulus = beats.orizuru.stimulus(np.random.default_rng(0), {"n": 2048, "k": 1}, 3)
    assert stimulus["i"]["x"].shape == (6, 1024)


# --------------------------------------------------------------------------- oaken


def _decomposer(x, t):
    fields = {"x": np.array([x])}
    fields.update({name: [v] for name, v in zip(("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o"), t)})
    return beats.oaken_decomposer.expected({"lanes": len(x), "data_bits": 8, "pipeline": 1},
                                           {"i": fields})["o"]


def test_decomposer_groups_and_shifts():
    # Thresholds (-20, -5, 5, 20). -30: outer lower, s = -30 - (-20) = -10; -10: middle lower,
    # s = -10 - (-5) = -5; 3: inner, s = 3, side 1 (x >= 0); 25: outer upper, s = 25 - 20 = 5.
    out = _decomposer([-30, -10, 3, 25], (-20, -5, 5, 20))
    _assert_fields(out, {"group": [[2, 0, 1, 2]], "side": [[0, 0, 1, 1]],
                         "inlier": [[0, -5, 0, 0]], "outlier": [[-10, 0, 3, 5]]})
    # On the thresholds: -20 = t_lo_o is middle lower (s = -20 + 5 = -15); -5 and 5 are inner
    # (sides 0 and 1); 20 = t_hi_o is middle upper (s = 20 - 5 = 15).
    out = _decomposer([-20, -5, 5, 20], (-20, -5, 5, 20))
    _assert_fields(out, {"group": [[0, 1, 1, 0]], "side": [[0, 0, 1, 1]],
                         "inlier": [[-15, 0, 0, 15]], "outlier": [[0, -5, 5, 0]]})


def test_decomposer_misordered_thresholds_follow_the_priority():
    # (t_lo_o, t_lo_i, t_hi_i, t_hi_o) = (10, 0, 0, -10): outer upper (x > -10) first, then
    # outer lower (x < 10). -20: lower, s = -20 - 10 = -30; 0: upper, s = 0 + 10 = 10;
    # 5: upper, s = 15; -10: not > -10, < 10: lower, s = -10 - 10 = -20.
    out = _decomposer([-20, 0, 5, -10], (10, 0, 0, -10))
    _assert_fields(out, {"group": [[2, 2, 2, 2]], "side": [[0, 1, 1, 0]],
                         "inlier": [[0, 0, 0, 0]], "outlier": [[-30, 10, 15, -20]]})


DEQ = {"lanes": 2, "vec_len": 4, "data_bits": 8, "frac_bits": 2, "pipeline": 7}


def _dequantizer_inputs():
    """Two chunks of four elements, thresholds (-20, -5, 5, 20), F = 2 (x 4).

    Chunk 1: mid (min, d) = (-8, 4) i.e. (-2.0, 1.0), inner (0, 2), outer (8, 6); codes
    (3, 2, 0, 1); COO: index 1 inner negative = 1 << 2 | 0 | 1 = 5, index 3 outer positive =
    3 << 2 | 2 | 0 = 14, in two COO beats of one entry (filler 99 and 200 ignored).
    Chunk 2: no outliers (one empty `last` COO beat), mid (400, 40), codes (15, 15, 0, 0).
    """
    hdr = {"t_lo_o": [-20, -20], "t_lo_i": [-5, -5], "t_hi_i": [5, 5], "t_hi_o": [20, 20],
           "mid_min": [-8, 400], "mid_d": [4, 40], "in_min": [0, 0], "in_d": [2, 0],
           "out_min": [8, 0], "out_d": [6, 0]}
    return {"hdr": hdr, "dense": {"codes": [[3, 2], [0, 1], [15, 15], [0, 0]]},
            "coo": {"entries": [[5, 99], [14, 200], [7, 7]], "count": [1, 1, 0],
                    "last": [0, 1, 1]}}


def test_dequantizer_decodes_by_the_integer_formula():
    # v = min + q d, m = (v + 2) >> 2; middle m + (5 if m >= 0 else -5), inner +-m,
    # outer +-m + (20 or -20).
    # Chunk 1: lane 0 middle q 3: v = -8 + 12 = 4, m = 6 >> 2 = 1 -> 6.
    #          lane 1 inner q 2, negative: v = 4, m = 1 -> -1.
    #          lane 2 middle q 0: v = -8, m = -6 >> 2 = -2 -> -2 - 5 = -7.
    #          lane 3 outer q 1, positive: v = 8 + 6 = 14, m = 16 >> 2 = 4 -> 4 + 20 = 24.
    # Chunk 2: q 15: v = 400 + 600 = 1000, m = 1002 >> 2 = 250 -> 255, saturated to 127;
    #          q 0: v = 400, m = 402 >> 2 = 100 -> 105.
    out = beats.oaken_dequantizer.expected(DEQ, _dequantizer_inputs())["o"]
    _assert_fields(out, {"x": [[6, -1], [-7, 24], [127, 127], [105, 105]]})


def test_dequantizer_order_sends_header_and_coo_before_dense():
    order = beats.oaken_dequantizer.order(DEQ, _dequantizer_inputs())
    assert list(order) == ["hdr", "coo", "coo", "dense", "dense",
                           "hdr", "coo", "dense", "dense"]


@pytest.mark.parametrize("change,message", [
    (lambda i: i["dense"].update(codes=[[3, 2], [0, 1], [15, 15]]), "need 4 dense beats"),
    (lambda i: i["coo"].update(last=[0, 0, 1]), "COO runs"),
    (lambda i: i["coo"].update(entries=[[14, 0], [5, 0], [7, 7]]), "increasing"),
])
def test_dequantizer_streams_must_agree(change, message):
    inputs = _dequantizer_inputs()
    change(inputs)
    with pytest.raises(ValueError, match=message):
        beats.oaken_dequantizer.expected(DEQ, inputs)


def test_dequantizer_stimulus_round_trips_through_the_encoder():
    # Chunks from golden.oaken's encoder decode within the reconstruction bound of contract 4:
    # the decoded values of a middle element stay within the middle range +- its step.
    p = {"lanes": 4, "vec_len": 8, "data_bits": 8, "frac_bits": 4, "pipeline": 7}
    inputs = beats.oaken_dequantizer.stimulus(np.random.default_rng(2), p, 30)
    assert len(inputs["hdr"]["t_lo_o"]) == 30
    assert len(inputs["dense"]["codes"]) == 30 * 2
    assert int(np.sum(inputs["coo"]["last"])) == 30
    assert (inputs["coo"]["count"] <= 4).all()
    out = beats.oaken_dequantizer.expected(p, inputs)["o"]["x"]
    assert out.shape == (60, 4) and (out >= -128).all() and (out <= 127).all()


# --------------------------------------------------------------------------- p3_pe


def _pe(rows):
    names = ("act", "wgt", "act_fmt", "wgt_fmt", "sv_sel", "zp", "first", "last")
    i = {name: np.array([row[k] for row in rows]) for k, name in enumerate(names)}
    return beats.p3_pe.expected({"pipeline": 3}, {"i": i})["o"]


def test_p3_pe_dot_products():
    # E4M3 0x38: e 7, m 0 -> M5 16, term 16 w << 6; 0x40: e 8 -> << 7; 0xB8: -1.0 (<< 6);
    # 0x30: e 6 -> << 5. BitMoD code 2 -> w = 2 half units (1.0).
    # Beat 1 (first, last): 16 * 2 << 6 = 2048 (1.0 x 1.0 = 2048 * 2^-10 * 0.5).
    # Beat 2 (first), INT4 zp 8, codes (10, 8, 0, 15) -> w (2, 0, -8, 7):
    #   2048 + 0 + (-16 * -8 << 6 = 8192) + (16 * 7 << 5 = 3584) = 13824 (13.5 x 2^10);
    # beat 3 (last, no first), INT4 zp 0, code 1 in lane 0: + 16 << 6 = 1024 -> 14848.
    # Beat 4 (first, last): NaN (0x7F) in lane 0 contributes 0 and sets nan; lane 1 2048.
    # Beat 5 (first, last): S0E4M4 0xF0: e 15, m 0 -> M5 16, << 14; INT4 zp 0 code 1:
    #   16 << 14 = 262144 (1.0 x 2^18).
    out = _pe([
        ([0x38, 0, 0, 0], [2, 0, 0, 0], 0, 0, 0, 0, 1, 1),
        ([0x38, 0x40, 0xB8, 0x30], [10, 8, 0, 15], 0, 1, 0, 8, 1, 0),
        ([0x38, 0, 0, 0], [1, 0, 0, 0], 0, 1, 0, 0, 0, 1),
        ([0x7F, 0x38, 0, 0], [2, 2, 0, 0], 0, 0, 0, 0, 1, 1),
        ([0xF0, 0, 0, 0], [1, 0, 0, 0], 1, 1, 0, 0, 1, 1),
    ])
    _assert_fields(out, {"acc": [2048, 14848, 2048, 262144], "overflow": [0, 0, 0, 0],
                         "nan": [0, 0, 1, 0]})


def test_p3_pe_wraps_and_flags_overflow():
    # E4M3 0x7E: e 15, m 6 -> M5 28, << 14; BitMoD code 8 with sv_sel 2 -> +16 half units:
    # 28 * 16 << 14 = 7,340,032 per lane, 29,360,128 per beat. 73 beats: 2,143,289,344
    # (< 2^31); 74 beats: 2,172,649,472, wrapped - 2^32 = -2,122,317,824, overflow.
    rows = [([0x7E] * 4, [8] * 4, 0, 0, 2, 0, int(k == 0), int(k >= 72)) for k in range(74)]
    out = _pe(rows)
    _assert_fields(out, {"acc": [2_143_289_344, -2_122_317_824], "overflow": [0, 1],
                         "nan": [0, 0]})


# --------------------------------------------------------------------------- fp16_mac


def test_fp16_mac_accumulates_in_binary32():
    # 1.0 x 1.5 + 2.0 x 0.25 = 2.0 -> 0x40000000.
    # 1.0 x 1.0 + 2^-12 x 2^-12: 1 + 2^-24 is half an ulp, ties to even -> 1.0 (0x3F800000);
    # then + 2^-12 x 3 2^-12: 1 + 1.5 ulp, rounds to 1 + 2 ulp -> 0x3F800002.
    # +inf x 0 -> NaN (any NaN).
    a = [0x3C00, 0x4000, 0x3C00, 0x0C00, 0x0C00, 0x7C00]
    b = [0x3E00, 0x3400, 0x3C00, 0x0C00, 0x1200, 0x0000]
    first = [1, 0, 1, 0, 0, 1]
    last = [0, 1, 0, 1, 1, 1]
    out = beats.fp16_mac.expected({"pipeline": 2}, {"i": {"a": a, "b": b, "first": first,
                                                          "last": last}})["o"]
    np.testing.assert_array_equal(out["acc"][:3], [0x4000_0000, 0x3F80_0000, 0x3F80_0002])
    same = beats.fp16_mac.same("acc", [0x4000_0000, 0x3F80_0000, 0x3F80_0002, 0x7FC0_0000],
                               out["acc"])
    assert same.all()
    # NaN equals any NaN, nothing else: +inf is not NaN, -0.0 is not +0.0.
    assert not beats.fp16_mac.same("acc", [0x7F80_0000], out["acc"][3:]).any()
    assert not beats.fp16_mac.same("acc", [0x8000_0000], [0]).any()


# --------------------------------------------------------------------------- accllm


def test_accllm_mul_products():
    # w4, signed: x = -128, w1 = -8, w2 = 7 -> p1 = 1024, p2 = -896.
    p = {"mode": "w4", "x_signed": True, "x_bits": 8, "cross_products": False,
         "target": "generic", "acc_depth": 1, "pipeline": 3}
    out = beats.accllm_mul.expected(p, {"i": {"x": [-128], "w1": [-8], "w2": [7]}})["o"]
    _assert_fields(out, {"p1": [1024], "p2": [-896]})
    # w2 with cross products: x1 = 3, x2 = -2, w1 = 1, w2 = -2 -> p11 = 3, p22 = 4,
    # p12 = x1 w2 = -6, p21 = x2 w1 = -2.
    p.update(mode="w2", cross_products=True)
    out = beats.accllm_mul.expected(p, {"i": {"x1": [3], "x2": [-2], "w1": [1],
                                              "w2": [-2]}})["o"]
    _assert_fields(out, {"p11": [3], "p22": [4], "p12": [-6], "p21": [-2]})


def test_accllm_mul_runs_end_at_last_or_at_the_depth():
    # acc_depth 3, last only on beat 4: runs beats 0-2 (cut at the depth, last 0) and 3-4.
    # p1 = x w1 = x: 2 + 3 + 4 = 9, 5 + 6 = 11; p2 = -x: -9, -11.
    p = {"mode": "w8", "x_signed": True, "x_bits": 8, "cross_products": False,
         "target": "generic", "acc_depth": 3, "pipeline": 3}
    out = beats.accllm_mul.expected(p, {"i": {"x": [2, 3, 4, 5, 6], "w1": [1] * 5,
                                              "w2": [-1] * 5, "last": [0, 0, 0, 0, 1]}})["o"]
    _assert_fields(out, {"p1": [9, 11], "p2": [-9, -11], "last": [0, 1]})


def test_accllm_sparse_selector_picks_by_index():
    # Groups of 4: x = (10, 11, 12, 13 | 20, 21, 22, 23), 2 rows.
    # Row 0: (0, 2) -> 10, 12; (1, 3) -> 21, 23. Row 1: (3, 3) -> 13, 13; (2, 0) -> 22, 20.
    p = {"groups": 2, "rows": 2, "x_bits": 8, "x_signed": True, "pipeline": 0}
    i = {"x": [[10, 11, 12, 13, 20, 21, 22, 23]], "idx1": [[[0, 1], [3, 2]]],
         "idx2": [[[2, 3], [3, 0]]]}
    out = beats.accllm_sparse_selector.expected(p, {"i": i})["o"]
    _assert_fields(out, {"x1": [[[10, 21], [13, 22]]], "x2": [[[12, 23], [13, 20]]]})
