# amaranth: UnusedElaboratable=no
"""fp16_mac's second reading, ``acc="fp16"`` (contract section 5): ``acc = fp16(acc + fp16(a * b))``.

The golden model (NumPy float16) against two independent references: the exact ``Fraction``
reference with a hand-written round to nearest even (tests/exact_float.py) on the bench's
stimulus, and vectorized integer arithmetic (every binary16 product a multiple of 2^-48, every
sum of two binary16 numbers a multiple of 2^-24, rounded to the binary16 grid by integer
shifts) on millions of products and sums. Then the unit: parameter checks, ports, the Amaranth
simulator at ``pipeline`` 1, the cocotb bench on Verilator at 0 and the default, mutants.
"""

import json

import numpy as np
import pytest
from amaranth.back import verilog

from qllm_cores.gen import generate
from qllm_cores.golden.baselines import beats
from qllm_cores.golden.baselines.fp16_mac import (CANONICAL_NAN_FP16, SHORT_RUN, fp16_is_nan,
                                                  fp16_mac_run, fp16_products)
from qllm_cores.hdl.baselines.fp16_mac.fp16_mac import Fp16Mac
from tests.exact_float import exact_mac_run
from qllm_cores.verif.amaranth_sim import simulate_streams
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench
from qllm_cores.verif.baselines.tb_fp16_mac import (SPECIAL_FP16, directed_beats, half_corners,
                                                    random_beats)

ONE, MINUS_ONE = 0x3C00, 0xBC00


def _fields(beats_list):
    a, b, first, last = (np.array(column) for column in zip(*beats_list))
    return {"a": a, "b": b, "first": first, "last": last}


def _half_corner_beats():
    from qllm_cores.verif.baselines.tb_fp16_mac import Stimulus
    stimulus = Stimulus()
    half_corners(stimulus, np.random.default_rng(0))
    return stimulus.beats()


# --- the golden model against the exact reference --------------------------------------------


def test_golden_matches_exact_reference_on_directed_beats():
    fields = directed_beats(acc="fp16")
    expected, mac = exact_mac_run(fields, "fp16")
    got = fp16_mac_run(fields["a"], fields["b"], fields["first"], fields["last"], acc="fp16")
    assert got.dtype == np.uint16 and len(got) == len(expected) > 5000
    assert np.array_equal(got.astype(np.int64), expected)
    # The directed stimulus reaches every corner of both roundings, ties both ways.
    events = mac.events
    for name in ("product tie_up", "product tie_down", "sum tie_up", "sum tie_down"):
        assert events[name] >= 50, (name, events)
    for name in ("product subnormal", "product zero", "product overflow", "sum subnormal",
                 "sum overflow", "cancellation"):
        assert events[name] >= 5, (name, events)
    assert fp16_is_nan(expected).any() and (expected == 0x7C00).any()
    assert (expected == 0xFC00).any() and (expected == 0).any()


@pytest.mark.parametrize("seed", [5, 6])
def test_golden_matches_exact_reference_on_random_beats(seed):
    fields = random_beats(np.random.default_rng(seed), 12_000, "fp16")
    expected, mac = exact_mac_run(fields, "fp16")
    got = fp16_mac_run(fields["a"], fields["b"], fields["first"], fields["last"], acc="fp16")
    assert len(got) == len(expected) > 300
    assert np.array_equal(got.astype(np.int64), expected)
    finite = ~fp16_is_nan(expected) & ((expected & 0x7FFF) != 0x7C00)
    assert finite.mean() > 0.6 and mac.events["sum inexact"] > 1000


def test_golden_long_runs_round_every_step():
    # One run longer than SHORT_RUN goes through np.add.accumulate: each step must be a float16
    # rounding (a float32 accumulation rounded at the end would give other results).
    rng = np.random.default_rng(9)
    n = 5000
    a = (rng.normal(0, 4, n)).astype(np.float16).view(np.uint16).astype(np.int64)
    b = (rng.normal(0, 1, n)).astype(np.float16).view(np.uint16).astype(np.int64)
    last = (np.arange(n) % 97 == 96).astype(np.int64)
    last[-1] = 1
    fields = {"a": a, "b": b, "first": np.r_[1, np.zeros(n - 1, np.int64)], "last": last}
    assert n > SHORT_RUN
    expected, _ = exact_mac_run(fields, "fp16")
    got = fp16_mac_run(a, b, fields["first"], last, acc="fp16").astype(np.int64)
    assert np.array_equal(got, expected)
    once = np.add.accumulate(fp16_products(a, b).astype(np.float32)).astype(np.float16)
    assert not np.array_equal(once[last.astype(bool)].view(np.uint16), got)


def test_golden_hand_cases():
    cases = [
        ([(ONE, ONE, 1, 0), (0x1000, ONE, 0, 1)], [0x3C00]),        # 1 + 2^-11: tie, even 1
        ([(0x3C01, ONE, 1, 0), (0x1000, ONE, 0, 1)], [0x3C02]),     # odd + half ulp: up
        ([(0x3C01, 0x3E00, 1, 1)], [0x3E02]),     # (1 + 2^-10) x 1.5: product tie, even up
        ([(0x3C03, 0x3E00, 1, 1)], [0x3E04]),     # (1 + 3 * 2^-10) x 1.5 = 1.5 + 4.5 ulp
        ([(0x7BFF, ONE, 1, 0), (0x4C00, ONE, 0, 1)], [0x7C00]),     # 65504 + 16: inf
        ([(0x7BFF, ONE, 1, 0), (0x4BFF, ONE, 0, 1)], [0x7BFF]),     # 65504 + 15.99
        ([(0xFBFF, ONE, 1, 0), (0xCC00, ONE, 0, 1)], [0xFC00]),     # -65504 - 16: -inf
        ([(0x5C00, 0x5C00, 1, 1)], [0x7C00]),                       # 256 x 256: inf
        ([(0x5BFF, 0x5C00, 1, 1)], [0x7BFF]),                       # 255.875 x 256 = 65504
        ([(0x0C00, 0x0800, 1, 1)], [0x0000]),                       # 2^-25: tie, +0
        ([(0x0E00, 0x0800, 1, 1)], [0x0001]),                       # 3 * 2^-26: 2^-24
        ([(0x8C00, 0x0800, 1, 1)], [0x0000]),                       # -0 product: +0 + -0
        ([(ONE, ONE, 1, 0), (0x8C00, 0x0800, 0, 1)], [0x3C00]),     # x + (-0) = x
        ([(0x03FF, ONE, 1, 0), (0x0001, ONE, 0, 1)], [0x0400]),     # subnormal -> normal
        ([(0x0401, ONE, 1, 0), (0x8400, ONE, 0, 1)], [0x0001]),     # cancellation: 2^-24
        ([(0x3555, ONE, 1, 0), (0xB555, ONE, 0, 1)], [0x0000]),     # x - x = +0
        ([(0x7C00, 0, 1, 1)], [CANONICAL_NAN_FP16]),                # inf x 0
        ([(0x7C00, ONE, 1, 0), (0xFC00, ONE, 0, 1)], [CANONICAL_NAN_FP16]),  # inf - inf
        ([(0xFE01, ONE, 1, 1)], [CANONICAL_NAN_FP16]),              # a NaN operand
        ([(0xFC00, ONE, 1, 1), (ONE, ONE, 0, 1), (ONE, ONE, 1, 1)],  # -inf sticks; first
         [0xFC00, 0xFC00, 0x3C00]),
    ]
    for beats_list, outputs in cases:
        f = _fields(beats_list)
        got = fp16_mac_run(f["a"], f["b"], f["first"], f["last"], acc="fp16")
        assert [f"{x:#06x}" for x in got] == [f"{x:#06x}" for x in outputs], beats_list
        want, _ = exact_mac_run(f, "fp16")
        assert list(want) == outputs
    # 1.0 added 3000 times stops at 2048 (2048 + 1 is a tie; 2048 is even).
    n = 3000
    got = fp16_mac_run(np.full(n, ONE), np.full(n, ONE), np.r_[1, np.zeros(n - 1, int)],
                       np.r_[np.zeros(n - 1, int), 1], acc="fp16")
    assert list(got) == [0x6800]


def test_golden_rejects_an_unknown_format():
    with pytest.raises(ValueError, match=r"acc must be one of 'fp32', 'fp16', not 'bf16'"):
        fp16_mac_run([0], [0], [1], [1], acc="bf16")


# --- the golden model's arithmetic against integer arithmetic ----------------------------------


def _fp16_parts(bits):
    """Finite binary16 patterns as ``(sign, sig, exp)``, ``value = sig * 2^(exp - 25)``
    (subnormals: exp 1), all int64."""
    bits = np.asarray(bits, np.int64)
    field, frac = (bits >> 10) & 0x1F, bits & 0x3FF
    return bits >> 15, np.where(field == 0, frac, frac | 0x400), np.maximum(field, 1)


def _round_to_fp16(sign, value, unit_log2):
    """binary16 patterns of ``(-1)^sign * value * 2^unit_log2`` (``value`` >= 0, int64; the
    unit per element), rounded to nearest even by integer shifts onto binary16's grid, whose
    spacing is 2^(max(e, -14) - 10) for ``2^e <= |x| < 2^(e + 1)``; 2^16 and above: infinity."""
    value = np.asarray(value, np.int64)
    unit_log2 = np.broadcast_to(np.asarray(unit_log2, np.int64), value.shape)
    top = np.where(value > 0, np.floor(np.log2(np.maximum(value, 1))).astype(np.int64), 0)
    # floor(log2) from float64 can be off by one near powers of two: fix it exactly.
    top = np.where((value >> top) == 0, top - 1, top)
    top = np.where((value >> top) >= 2, top + 1, top)
    quantum = np.maximum(top + unit_log2, -14) - 10          # log2 of the binary16 ulp
    shift = quantum - unit_log2
    assert np.all(shift <= 62)
    right = np.maximum(shift, 0)
    kept = value >> right
    remainder = value - (kept << right)
    half = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
    up = (right > 0) & ((remainder > half) | ((remainder == half) & ((kept & 1) == 1)))
    kept = (kept + up) << np.maximum(-shift, 0)               # exact when the value is short
    # kept * 2^quantum with kept < 2^11 (2^11 after a carry: one exponent up).
    field = np.where(kept >= 1 << 10, quantum + 25 + (kept >> 11), 0)
    frac = np.where(kept >= 1 << 11, 0, kept & 0x3FF)
    bits = np.where(field >= 31, 0x7C00, (field << 10) | frac)
    return (np.asarray(sign, np.int64) << 15) | np.where(value == 0, 0, bits)


def test_products_are_correctly_rounded():
    # Every finite binary16 a times 40 b (class boundaries and random), 2.5 million products:
    # NumPy's float16 product against the exact product rounded by integer shifts.
    a = np.arange(1 << 16)
    a = a[(a & 0x7C00) != 0x7C00]
    rng = np.random.default_rng(1)
    b_set = np.r_[[x for x in SPECIAL_FP16 if x & 0x7C00 != 0x7C00],
                  rng.integers(0, 0x7C00, 20) | (rng.integers(0, 2, 20) << 15)]
    aa, bb = np.repeat(a, len(b_set)), np.tile(b_set, len(a))
    got = fp16_products(aa, bb, acc="fp16").view(np.uint16).astype(np.int64)
    (sa, ma, ea), (sb, mb, eb) = _fp16_parts(aa), _fp16_parts(bb)
    want = _round_to_fp16(sa ^ sb, ma * mb, ea + eb - 50)
    assert np.array_equal(got, want)
    assert ((want & 0x7FFF) == 0x7C00).any() and ((want & 0x7C00) == 0).any()


def test_sums_are_correctly_rounded():
    # NumPy's float16 sum (one float32 addition rounded to float16) against the exact sum of
    # two binary16 numbers (multiples of 2^-24) rounded by integer shifts; 4 million pairs,
    # half of them at nearby exponents (cancellation, ties).
    rng = np.random.default_rng(2)
    n = 2_000_000
    x = rng.integers(0, 0x7C00, n) | (rng.integers(0, 2, n) << 15)
    near = (x & 0x7C00) + rng.integers(-0x800, 0x800, n)
    y = np.where(rng.random(n) < 0.5, np.clip(near, 0, 0x7BFF) | (rng.integers(0, 2, n) << 15),
                 rng.integers(0, 0x7C00, n) | (rng.integers(0, 2, n) << 15))
    with np.errstate(over="ignore"):
        got = (x.astype(np.uint16).view(np.float16) + y.astype(np.uint16).view(np.float16))
    got = got.view(np.uint16).astype(np.int64)
    (sx, mx, ex), (sy, my, ey) = _fp16_parts(x), _fp16_parts(y)
    mx, my = mx << (ex - 1), my << (ey - 1)               # multiples of 2^-24
    total = np.where(sx == 1, -mx, mx) + np.where(sy == 1, -my, my)
    want = _round_to_fp16((total < 0).astype(np.int64), np.abs(total), -24)
    zero = total == 0                      # IEEE: -0 only for (-0) + (-0)
    want = np.where(zero, (sx & sy) << 15, want)
    assert np.array_equal(got, want)


# --- the adapter and the unit --------------------------------------------------------------


def test_adapter_follows_acc():
    f = _fields([(ONE, ONE, 1, 0), (0x1000, ONE, 0, 1), (0x7C00, 0, 1, 1)])
    inputs = {"i": f}
    half = beats.fp16_mac.expected({"pipeline": 2, "acc": "fp16"}, inputs)["o"]["acc"]
    single = beats.fp16_mac.expected({"pipeline": 2, "acc": "fp32"}, inputs)["o"]["acc"]
    assert list(half) == [0x3C00, CANONICAL_NAN_FP16]
    assert single[0] == 0x3F80_1000                         # 1 + 2^-11 in binary32
    # binary16 results compare bit for bit (the canonical NaN only).
    assert list(beats.fp16_mac.same("acc", [0x3C00, 0x7E00, 0x7E01], [0x3C00, 0x7E00, 0x7E00]))\
        == [True, True, False]


@pytest.mark.parametrize("value,error,message", [
    ("bf16", ValueError, r"acc must be one of 'fp32', 'fp16', not 'bf16'"),
    (16, ValueError, r"acc must be one of 'fp32', 'fp16', not 16"),
])
def test_acc_is_checked(value, error, message):
    with pytest.raises(error, match=message):
        Fp16Mac(acc=value)


def test_ports_and_manifest(tmp_path):
    text = verilog.convert(Fp16Mac(acc="fp16"), name="fp16_mac", emit_src=False)
    assert "input [33:0] i__payload;" in text and "output [15:0] o__payload;" in text
    generate("fp16_mac", {"acc": "fp16"}, tmp_path)
    manifest = json.loads((tmp_path / "fp16_mac.json").read_text())
    [field] = manifest["ports"]["o"]["payload"]["fields"]
    assert (field["name"], field["offset"], field["shape"]["width"]) == ("acc", 0, 16)
    assert manifest["params"] == {"pipeline": 2, "acc": "fp16"}
    assert manifest["latency"] == 4


@pytest.mark.parametrize("pipeline", range(Fp16Mac.MAX_PIPELINE + 1))
def test_latency_follows_pipeline(pipeline):
    assert Fp16Mac(pipeline=pipeline, acc="fp16").latency == 2 + pipeline


def test_lint_clean(tmp_path):
    from qllm_cores.verif.__main__ import lint_file

    source = generate("fp16_mac", {"acc": "fp16", "pipeline": 0}, tmp_path)
    assert lint_file(source, "fp16_mac") == []


def test_amaranth_simulation_at_pipeline_1():
    # The depth the Verilator bench does not run: the corners of the binary16 reading under
    # backpressure in Amaranth's simulator, every result against the golden model.
    fields = _half_corner_beats()
    keep = np.arange(len(fields["a"])) < 2200
    fields = {name: value[keep] for name, value in fields.items()}
    fields["last"][-1] = 1
    result = simulate_streams(Fp16Mac(pipeline=1, acc="fp16"), {"i": fields},
                              rng=np.random.default_rng(4), valid_probability=0.8,
                              ready_probability=0.7)
    assert result.problems == []
    want = fp16_mac_run(fields["a"], fields["b"], fields["first"], fields["last"], acc="fp16")
    assert np.array_equal(np.asarray(result.outputs["o"]["acc"], np.int64),
                          want.astype(np.int64))


@pytest.mark.sim
@pytest.mark.parametrize("pipeline", [0, Fp16Mac.MAX_PIPELINE], ids=["pipeline0", "default"])
def test_bench(pipeline):
    metrics = run_testbench("fp16_mac", {"pipeline": pipeline, "acc": "fp16"},
                            extra_env={"QLLM_BEATS": 10_000})
    assert metrics["tests"] == 3
    assert metrics["manifest"]["params"]["acc"] == "fp16"
    assert metrics["random_dot_products_backpressure"]["beats"] == 10_000
    assert metrics["full_rate_latency"]["cycles_per_beat"] == 1.0
    assert metrics["full_rate_latency"]["latency"] == 2 + pipeline


def _no_product_sticky(text):
    """The product's rounding without its sticky bit: ties decided wrongly."""
    return edit_site(text, r"assign product_next_sticky = [^;]+;",
                     "assign product_next_sticky = 1'h0;")


def _no_subnormal_limit(text):
    """The loop normalizes by the full leading-zero count (no marker bit at the smallest
    exponent): subnormal sums get a wrong exponent."""
    return edit_site(text, r"assign acc_next_lz_input = acc_next_sum\[13:0\] \| [^;]+;",
                     "assign acc_next_lz_input = acc_next_sum[13:0];")


def _truncate_sum(text):
    """The loop's sum truncated instead of rounded to nearest even."""
    return edit_site(text, r"assign acc_next_rounded = acc_next_norm\[13:3\] \+ [^;]+;",
                     "assign acc_next_rounded = acc_next_norm[13:3] + 1'h0;")


@pytest.mark.sim
@pytest.mark.large
@pytest.mark.parametrize("mutation", [
    ("nosticky16", _no_product_sticky), ("nolimit16", _no_subnormal_limit),
    ("truncate16", _truncate_sum)], ids=["no-product-sticky", "no-subnormal-limit",
                                          "truncated-sum"])
def test_bench_fails_on_broken_rtl(mutation):
    with pytest.raises(BenchFailure, match=r"results differ"):
        run_testbench("fp16_mac", {"acc": "fp16"}, extra_env={"QLLM_BEATS": 2_000},
                      mutation=mutation)


@pytest.mark.synth
@pytest.mark.large
def test_synthesis_ecp5_registers_and_multiplier(tmp_path):
    from qllm_cores.fpga.yosys import synth

    source = generate("fp16_mac", {"acc": "fp16"}, tmp_path / "v")
    result = synth(source, "fp16_mac", "ecp5", tmp_path / "synth")
    # The documented registers (operands, raw product, rounded product, accumulator, output,
    # valid chain) and nothing else; the significand product in one DSP.
    assert result.metrics["FF"] == Fp16Mac(acc="fp16").flip_flops
    assert result.metrics["DSP"] == 1 and result.metrics["BRAM"] == 0
