"""The golden model of ``accllm_pe`` (golden/accllm/pe.py: ``pe_weights``, ``pe_products``,
``pe_run``; golden/accllm/beats.py: ``accllm_pe``) against contract section 10 written out as a plain
Python integer loop, hand-worked cases, and its argument checks."""

import numpy as np
import pytest

from qllm_cores.golden.accllm import beats
from qllm_cores.golden.accllm import PE_MODES, pe_product_bits, pe_products, pe_run, pe_weights

FIELDS = ("mode", "x1", "x2", "w1", "w2", "kv4", "zp", "first", "last")


def _signed(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _loop(beats_, acc_bits, x_bits=8, x_signed=True):
    """contract 10 beat by beat on Python integers (no NumPy, nothing shared with the model)."""
    s1 = s2 = 0
    overflow = False
    out = []
    lo, hi = -(1 << (acc_bits - 1)), (1 << (acc_bits - 1)) - 1
    for mode, x1, x2, w1, w2, kv4, zp, first, last in beats_:
        if first:
            s1 = s2 = 0
            overflow = False
        weights = []
        for w in (w1, w2):
            if mode == 0:
                weights.append(_signed(w, 8))
            elif mode == 1:
                weights.append((w & 15) - zp if kv4 else _signed(w, 4))
            else:
                weights.append(_signed(w, 2))
        s1 += x1 * weights[0]
        s2 += (x2 if mode == 2 else x1) * weights[1]
        overflow = overflow or not (lo <= s1 <= hi and lo <= s2 <= hi)
        if last:
            out.append((_signed(s1, acc_bits), _signed(s2, acc_bits), int(overflow)))
    return out


def _as_rows(result):
    return list(zip(result["s1"].tolist(), result["s2"].tolist(),
                    result["overflow"].tolist()))


def test_modes_are_numbered_as_in_spec():
    assert PE_MODES == {"w8": 0, "w4": 1, "w2": 2}


def test_hand_worked_dot_product_with_a_mode_change_per_beat():
    # Beat 0, w8: x1 = 3, w1 = -5, w2 = 0x7F (127): s1 = -15, s2 = 381.
    # Beat 1, w4: w1 = 0xF9: low 4 bits 9 -> -7, w2 = 0x13: 3 -> 3 (bits above ignored);
    #   x1 = -2: s1 += 14, s2 += -6 -> s1 = -1, s2 = 375.
    # Beat 2, w4 kv4: codes 0xFF & 15 = 15, 2 with zp = 9: 6, -7; x1 = 10: s1 += 60, s2 += -70
    #   -> s1 = 59, s2 = 305.
    # Beat 3, w2: w1 = 0xFE: low 2 bits 2 -> -2, w2 = 1 -> 1; x1 = 7, x2 = -128 (x2 is used):
    #   s1 += -14, s2 += -128 -> s1 = 45, s2 = 177; last.
    rows = [(0, 3, 100, -5, 0x7F, 1, 3, 1, 0),
            (1, -2, 50, -7, 0x13, 0, 9, 0, 0),
            (1, 10, 0, -1, 2, 1, 9, 0, 0),
            (2, 7, -128, -2, 1, 1, 0, 0, 1)]
    got = pe_run(*np.array(rows).T)
    assert _as_rows(got) == [(45, 177, 0)]
    assert _loop(rows, 32) == [(45, 177, 0)]


def test_kv4_zero_points_0_and_15():
    # q - zp: code 15 with zp 0 = 15, code 0 with zp 15 = -15, code 7 with zp 7 = 0.
    assert pe_weights(1, [15, 0, 7, 0xF0], kv4=1, zp=[0, 15, 7, 15]).tolist() == [15, -15, 0,
                                                                                   -15]
    # kv4 and zp are ignored outside mode w4 (w8: 15; w2: 0b11 = -1); w4 kv4: 15 - 15 = 0;
    # w4 without kv4 reads signed 4 bits (0xF -> -1).
    assert pe_weights([0, 2, 1], 15, kv4=1, zp=15).tolist() == [15, -1, 0]
    assert pe_weights(1, 15, kv4=0, zp=15).tolist() == -1


def test_unsigned_activations():
    # x_signed False: 255 x (w8 -128) = -32640; w2: x2 = 255 x (w2 = 0b10 = -2) = -510.
    t1, t2 = pe_products([0, 2], [255, 0], [0, 255], [-128, 0], [1, 2], x_signed=False)
    assert t1.tolist() == [-32640, 0] and t2.tolist() == [255, -510]
    assert pe_product_bits(8, False) == pe_product_bits(8, True) == 16
    assert pe_product_bits(4, True) == 12


def test_overflow_at_the_accumulator_limit_is_sticky_until_first():
    # acc_bits 16: max 32767. x = -128, w8 w1 = -128: +16384 per beat. Two beats: 32768 -> out
    # of range (overflow), the sum wraps to -32768. One beat: no overflow.
    # Then a dot product that carries on (no first) keeps the flag; a first clears it.
    rows = [(0, -128, 0, -128, 0, 0, 0, 1, 1),
            (0, -128, 0, -128, 0, 0, 0, 1, 0),
            (0, -128, 0, -128, 0, 0, 0, 0, 1),
            (0, 1, 0, -1, 0, 0, 0, 0, 1),       # carries on: s1 = -32768 - 1 wraps to 32767
            (0, 1, 0, 1, 0, 0, 0, 1, 1)]
    want = [(16384, 0, 0), (-32768, 0, 1), (32767, 0, 1), (1, 0, 0)]
    assert _as_rows(pe_run(*np.array(rows).T, acc_bits=16)) == want
    assert _loop(rows, 16) == want


def test_a_partial_sum_out_of_range_counts_even_if_the_final_sum_returns():
    # acc_bits 16: +16384 twice (32768, out of range), then 127 x -128 = -16256: the final
    # sum 16512 is in range, but the flag stays (the contract: sticky once a sum leaves the range).
    rows = [(0, -128, 0, -128, 0, 0, 0, 1, 0), (0, -128, 0, -128, 0, 0, 0, 0, 0),
            (0, 128 - 1, 0, -128, 0, 0, 0, 0, 1)]
    got = _as_rows(pe_run(*np.array(rows).T, acc_bits=16))
    assert got == [(16512, 0, 1)] == _loop(rows, 16)


def test_beats_before_the_first_first_accumulate_from_reset():
    rows = [(0, 2, 0, 3, 4, 0, 0, 0, 0), (0, 1, 0, 1, 1, 0, 0, 0, 1)]
    assert _as_rows(pe_run(*np.array(rows).T)) == [(7, 9, 0)] == _loop(rows, 32)


@pytest.mark.parametrize("acc_bits", [16, 18, 24, 32, 48])
@pytest.mark.parametrize("x_signed", [True, False])
def test_adapter_stimulus_against_the_python_loop(acc_bits, x_signed):
    p = {"x_bits": 8, "x_signed": x_signed, "acc_bits": acc_bits, "target": "generic",
         "pipeline": 3}
    inputs = beats.accllm_pe.stimulus(np.random.default_rng(acc_bits), p, 300)["i"]
    rows = list(zip(*(np.asarray(inputs[name]).tolist() for name in FIELDS)))
    expected = beats.accllm_pe.expected(p, {"i": inputs})["o"]
    assert _as_rows(expected) == _loop(rows, acc_bits, 8, x_signed)
    assert len(expected["s1"]) == 300
    modes = np.asarray(inputs["mode"])
    assert set(modes.tolist()) == {0, 1, 2}
    if acc_bits <= 18:
        assert expected["overflow"].any() and not expected["overflow"].all()


@pytest.mark.parametrize("x_bits", [2, 5, 8])
def test_narrow_activations(x_bits):
    p = {"x_bits": x_bits, "x_signed": True, "acc_bits": pe_product_bits(x_bits, True) + 2,
         "target": "generic", "pipeline": 0}
    inputs = beats.accllm_pe.stimulus(np.random.default_rng(x_bits), p, 100)["i"]
    rows = list(zip(*(np.asarray(inputs[name]).tolist() for name in FIELDS)))
    expected = beats.accllm_pe.expected(p, {"i": inputs})["o"]
    assert _as_rows(expected) == _loop(rows, p["acc_bits"], x_bits, True)


def test_every_single_product_per_mode():
    xs = np.arange(-128, 128)
    ws = np.arange(-128, 128)
    x, w = (v.ravel() for v in np.meshgrid(xs, ws, indexing="ij"))
    for mode, read in ((0, lambda v: _signed(v, 8)), (1, lambda v: _signed(v, 4)),
                       (2, lambda v: _signed(v, 2))):
        t1, t2 = pe_products(mode, x, x[::-1], w, w[::-1])
        want1 = [a * read(int(b)) for a, b in zip(x.tolist(), w.tolist())]
        assert t1.tolist() == want1
        second = x[::-1] if mode == 2 else x
        assert t2.tolist() == [a * read(int(b)) for a, b in zip(second.tolist(),
                                                                 w[::-1].tolist())]


def test_empty_stream_and_beats_after_the_final_last():
    got = pe_run([], [], [], [], [], [], [], [], [])
    assert all(len(v) == 0 for v in got.values())
    rows = [(0, 1, 0, 1, 1, 0, 0, 1, 1), (0, 5, 0, 5, 5, 0, 0, 1, 0)]
    assert _as_rows(pe_run(*np.array(rows).T)) == [(1, 1, 0)]


@pytest.mark.parametrize("kwargs,error,message", [
    ({"mode": [3]}, ValueError, r"mode must hold modes 0 \(w8\), 1 \(w4\), 2 \(w2\) "
                                r"\(0\.\.2\), not 3"),
    ({"x1": [128]}, ValueError, r"x1 must hold signed 8-bit values \(-128\.\.127\), not 128"),
    ({"x2": [-129]}, ValueError, r"x2 must hold signed 8-bit values"),
    ({"w1": [256]}, ValueError, r"w must hold 8-bit fields \(-128\.\.255\), not 256"),
    ({"zp": [16]}, ValueError, r"zp must hold 4-bit zero points \(0\.\.15\), not 16"),
    ({"kv4": [2]}, ValueError, r"kv4 must hold 0/1 values"),
    ({"first": [1, 0]}, ValueError, r"first must have shape \(1,\), not \(2,\)"),
    ({"last": [0.5]}, TypeError, r"last must hold integers"),
    ({"acc_bits": 15}, ValueError, r"acc_bits must be in range 16\.\.48, not 15"),
    ({"acc_bits": 49}, ValueError, r"acc_bits must be in range 16\.\.48, not 49"),
    ({"acc_bits": 32.0}, TypeError, r"acc_bits must be an integer, not 32\.0"),
    ({"x_bits": 9}, ValueError, r"x_bits must be in range 2\.\.8, not 9"),
    ({"x_signed": 1}, TypeError, r"x_signed must be a bool, not 1"),
])
def test_arguments_are_checked(kwargs, error, message):
    args = {"mode": [0], "x1": [1], "x2": [1], "w1": [1], "w2": [1], "kv4": [0], "zp": [0],
            "first": [1], "last": [1]}
    options = {}
    for key, value in kwargs.items():
        (args if key in args else options)[key] = value
    with pytest.raises(error, match=message):
        pe_run(*(args[name] for name in FIELDS), **options)


def test_unsigned_activation_range_is_checked():
    with pytest.raises(ValueError, match=r"x1 must hold unsigned 8-bit values \(0\.\.255\), "
                                         r"not -1"):
        pe_products(0, -1, 0, 0, 0, x_signed=False)
