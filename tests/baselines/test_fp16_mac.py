# amaranth: UnusedElaboratable=no
"""fp16_mac (binary32 accumulation, the default): golden model against an exact reference,
elaboration, the cocotb bench, synthesis. The binary16 reading (``acc="fp16"``) is tested in
tests/baselines/test_fp16_mac_half.py."""

import re
import time
from fractions import Fraction

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from qllm_cores.gen import generate
from qllm_cores.golden.baselines.fp16_mac import (CANONICAL_NAN, canonical_nan, fp16_mac_run,
                                                  fp16_products, fp32_is_nan, fp32_match)
from qllm_cores.hdl.baselines.fp16_mac.fp16_mac import Fp16Mac, leading_zeros, unpack_fp16
from tests.exact_float import NEG_INF as EXACT_NEG_INF
from tests.exact_float import POS_INF as EXACT_POS_INF
from tests.exact_float import decode_fp16, exact_mac_run
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench
from qllm_cores.verif.baselines.tb_fp16_mac import SPECIAL_FP16, directed_beats, random_beats

# --- the exact reference (Fractions, a hand-written round to nearest even): tests/exact_float.py

POS_INF, NEG_INF = EXACT_POS_INF["fp32"], EXACT_NEG_INF["fp32"]


# --- golden model ---------------------------------------------------------------------------


def test_golden_matches_exact_reference_on_directed_beats():
    fields = directed_beats()
    expected, mac = exact_mac_run(fields)
    got = fp16_mac_run(fields["a"], fields["b"], fields["first"], fields["last"])
    assert fp32_match(got, expected).all()
    # The directed stimulus really builds ties (the rounding decided by the even rule), both
    # ways, and plenty of inexact sums decided by the guard and sticky bits.
    assert mac.ties_up >= 80 and mac.ties_down >= 80, (mac.ties_up, mac.ties_down)
    assert mac.inexact >= 1000


def test_golden_matches_exact_reference_on_random_beats():
    fields = random_beats(np.random.default_rng(5), 4000)
    expected, _ = exact_mac_run(fields)
    got = fp16_mac_run(fields["a"], fields["b"], fields["first"], fields["last"])
    assert len(got) == len(expected) > 100
    assert fp32_match(got, expected).all()
    assert fp32_is_nan(expected).any() and not fp32_is_nan(expected).all()


def test_golden_hand_cases():
    one, tiny, half_ulp = 0x3C00, 0x0C00, 0x0800   # 1, 2^-12, 2^-13 (2^-12 * 2^-12 = 2^-24)
    cases = [
        # (a, b, first, last) beats -> outputs
        ([(one, one, 1, 0), (tiny, tiny, 0, 1)], [0x3F80_0000]),          # 1 + 2^-24: tie, even
        ([(one, one, 1, 0), (tiny, 0x1000, 0, 0), (tiny, tiny, 0, 1)],    # odd + half: up
         [0x3F80_0002]),
        ([(one, 0xBC00, 1, 0), (tiny, half_ulp, 0, 1)], [0xBF80_0000]),   # -1 + 2^-25: tie
        ([(one, 0xBC00, 1, 0), (tiny, 0x0A00, 0, 1)], [0xBF7F_FFFF]),     # -1 + 3 * 2^-26
        ([(0x8000, one, 1, 1)], [0x0000_0000]),                           # (+0) + (-0) = +0
        ([(one, one, 1, 0), (one, 0xBC00, 0, 1)], [0x0000_0000]),         # 1 - 1 = +0
        ([(0x7C00, 0, 1, 1)], [CANONICAL_NAN]),                           # inf * 0
        ([(0x7C00, one, 1, 0), (0xFC00, one, 0, 1)], [CANONICAL_NAN]),    # inf - inf
        ([(0xFC00, one, 1, 1), (one, one, 0, 1), (one, one, 1, 1)],       # -inf sticks; first
         [NEG_INF, NEG_INF, 0x3F80_0000]),
        ([(0x0001, 0x0001, 1, 1)], [0x2780_0000]),                        # 2^-48
        ([(0x7BFF, 0x7BFF, 1, 1)], [0x4F7F_C004]),                        # 65504^2, exact
        ([(one, one, 1, 1), (one, one, 0, 1)], [0x3F80_0000, 0x4000_0000]),  # persists
    ]
    for beats, outputs in cases:
        a, b, first, last = (np.array(column) for column in zip(*beats))
        got = fp16_mac_run(a, b, first, last)
        assert [f"{x:#010x}" for x in canonical_nan(got)] == [f"{x:#010x}" for x in outputs]


def test_products_are_exact_and_normal():
    # Every class boundary against every other: the float32 product equals the exact one.
    pairs = np.array([(x, y) for x in SPECIAL_FP16 for y in SPECIAL_FP16])
    products = fp16_products(pairs[:, 0], pairs[:, 1])
    for (x, y), product in zip(pairs.tolist(), products.tolist()):
        dx, dy = decode_fp16(x), decode_fp16(y)
        if dx[0] == dy[0] == "num":
            assert Fraction(product) == (-1) ** (dx[1] ^ dy[1]) * dx[2] * dy[2]
            assert product == 0 or 2.0 ** -48 <= abs(product) < 2.0 ** 32


def test_reachable_range_has_no_subnormals_or_overflow():
    # The smallest non-zero product is 2^-48, every value a multiple of it: no binary32
    # subnormal. The largest product is below half an ulp of 2^56: the sum stops growing.
    assert fp16_products([0x0001], [0x0001])[0] == np.float32(2.0 ** -48)
    largest = fp16_products([0x7BFF], [0x7BFF])[0]
    assert largest < 2.0 ** 32
    assert np.float32(2.0 ** 56) + largest == np.float32(2.0 ** 56)
    assert np.float32(2.0 ** 55) + largest > np.float32(2.0 ** 55)
    fields = random_beats(np.random.default_rng(11), 50_000)
    out = fp16_mac_run(fields["a"], fields["b"], fields["first"], fields["last"])
    finite = out[~fp32_is_nan(out) & ((out & 0x7FFF_FFFF) != 0x7F80_0000)]
    magnitude = finite.view(np.float32)
    assert np.all((magnitude == 0) | (np.abs(magnitude) >= 2.0 ** -48))
    assert not np.any(finite == 0x8000_0000)   # -0 is unreachable from a +0 start


def test_golden_is_fast_enough_for_large_benches():
    rng = np.random.default_rng(3)
    n = 200_000
    a, b = rng.integers(0, 1 << 16, n), rng.integers(0, 1 << 16, n)
    for first in (np.ones(n, int), (rng.random(n) < 0.05).astype(int), np.r_[1, np.zeros(n - 1,
                                                                                         int)]):
        started = time.perf_counter()
        fp16_mac_run(a, b, first, np.roll(first, -1))
        assert time.perf_counter() - started < 2.0


def test_fp32_match_is_nan_equivalent_but_sign_exact():
    assert fp32_match([0x7FC0_0000, 0xFFC0_0001, 0x7F80_0001], [0xFF80_0123] * 3).all()
    assert not fp32_match([0x0000_0000], [0x8000_0000])[0]
    assert not fp32_match([POS_INF], [NEG_INF])[0]
    assert not fp32_match([POS_INF], [CANONICAL_NAN])[0]


@pytest.mark.parametrize("args,error,message", [
    (([0x10000], [0], [1], [1]), ValueError, r"a_bits must hold 16-bit patterns 0\.\.65535, "
                                             r"not 65536"),
    (([0], [-1], [1], [1]), ValueError, r"b_bits must hold 16-bit patterns .* not -1"),
    (([0], [0], [2], [1]), ValueError, r"first must hold 1-bit patterns 0\.\.1, not 2"),
    (([0.5], [0], [1], [1]), TypeError, r"a_bits must hold integers, not float64"),
    (([0, 1], [0], [1], [1]), ValueError, r"same length, not 2 and 1"),
    (([0], [0], [1], [1, 0]), ValueError, r"same length, not 1, 1 and 2"),
])
def test_golden_rejects_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        fp16_mac_run(*args)


# --- RTL pieces (Amaranth simulation) and elaboration ----------------------------------------


def test_leading_zeros_and_unpack():
    m = Module()
    value = Signal(22)
    count = Signal(5)
    m.d.comb += count.eq(leading_zeros(value))
    bits = Signal(16)
    fields = unpack_fp16(m, bits, name="x")
    sim = Simulator(m)
    samples = [1 << k for k in range(22)] + [(1 << 22) - 1, 3, 0x155555]

    async def bench(ctx):
        for sample in samples:
            ctx.set(value, sample)
            assert ctx.get(count) == 22 - sample.bit_length()
        for pattern in SPECIAL_FP16:
            ctx.set(bits, pattern)
            kind = decode_fp16(pattern)
            assert ctx.get(fields.nan) == (kind[0] == "nan")
            assert ctx.get(fields.inf) == (kind[0] == "inf")
            assert ctx.get(fields.zero) == (kind[0] == "num" and kind[2] == 0)
            if kind[0] == "num":
                magnitude = Fraction(ctx.get(fields.sig)) * Fraction(2) ** (ctx.get(fields.exp)
                                                                            - 25)
                assert magnitude == kind[2] and ctx.get(fields.sign) == pattern >> 15

    sim.add_testbench(bench)
    sim.run()


def test_verilog_ports_follow_the_spec():
    text = verilog.convert(Fp16Mac(), name="fp16_mac", emit_src=False)
    header = re.search(r"module fp16_mac\((.*?)\);", text, re.S)
    assert header, "top module fp16_mac not found"
    ports = {port.strip() for port in header.group(1).split(",")}
    assert ports == {"clk", "rst", "i__valid", "i__ready", "i__payload",
                     "o__valid", "o__ready", "o__payload"}
    assert re.search(r"input \[33:0\] i__payload;", text)
    assert re.search(r"output \[31:0\] o__payload;", text)
    assert "/work" not in text and "src =" not in text
    assert text == verilog.convert(Fp16Mac(), name="fp16_mac", emit_src=False)


def test_manifest_payload_fields_in_spec_order(tmp_path):
    import json

    generate("fp16_mac", {}, tmp_path)
    manifest = json.loads((tmp_path / "fp16_mac.json").read_text())
    fields = manifest["ports"]["i"]["payload"]["fields"]
    assert [(f["name"], f["offset"], f["shape"]["width"]) for f in fields] == [
        ("a", 0, 16), ("b", 16, 16), ("first", 32, 1), ("last", 33, 1)]
    assert manifest["ports"]["o"]["payload"]["fields"][0]["name"] == "acc"
    assert manifest["params"]["pipeline"] == Fp16Mac.MAX_PIPELINE == 2
    assert manifest["latency"] == Fp16Mac().latency == 4


@pytest.mark.parametrize("pipeline", range(Fp16Mac.MAX_PIPELINE + 1))
def test_latency_follows_pipeline(pipeline, tmp_path):
    import json

    unit = Fp16Mac(pipeline=pipeline)
    assert unit.latency == 2 + pipeline
    generate("fp16_mac", {"pipeline": pipeline}, tmp_path)
    assert json.loads((tmp_path / "fp16_mac.json").read_text())["latency"] == unit.latency


@pytest.mark.parametrize("value,error,message", [
    (3, ValueError, r"pipeline must be in range 0\.\.2, not 3"),
    (-1, ValueError, r"pipeline must be in range 0\.\.2, not -1"),
    (1.0, TypeError, r"pipeline must be an integer, not 1\.0"),
    (True, TypeError, r"pipeline must be an integer, not True"),
])
def test_pipeline_is_checked(value, error, message):
    with pytest.raises(error, match=message):
        Fp16Mac(pipeline=value)


# --- cocotb bench on Verilator --------------------------------------------------------------


@pytest.mark.sim
@pytest.mark.parametrize("pipeline", [0, Fp16Mac.MAX_PIPELINE], ids=["pipeline0", "default"])
def test_bench(pipeline):
    # Lowest and default depth, each under random backpressure (valid p = 0.7, ready p = 0.6
    # in random_dot_products_backpressure; 0.9/0.8 in directed_special_cases), bit-exact.
    metrics = run_testbench("fp16_mac", {"pipeline": pipeline},
                            extra_env={"QLLM_BEATS": 10_000})
    assert metrics["tests"] == 3
    assert metrics["random_dot_products_backpressure"]["beats"] == 10_000
    assert metrics["full_rate_latency"]["cycles_per_beat"] == 1.0
    # The measured latency is the manifest's (the bench checks every result against it) and
    # the component's attribute.
    assert metrics["manifest"]["latency"] == Fp16Mac(pipeline=pipeline).latency
    assert metrics["full_rate_latency"]["latency"] == Fp16Mac(pipeline=pipeline).latency


def _truncate(text):
    """Round toward zero instead of to nearest even: the injected sums (half an ulp added at
    the rounding position, as their carry-in) get the plain sum's carry-in. (Each carry-in is
    the output of its own gate, read by its adder: not an unread alias in the netlist.)"""
    for name in ("upper", "lower"):
        text = edit_site(text, rf"assign carry_in_{name} = [^;]+;",
                         f"assign carry_in_{name} = carry_in_base;")
    return text


def _never_stall(text):
    """Advance the pipeline while a result waits for the consumer: results get overwritten
    (lost)."""
    return edit_site(text, r"assign i__ready = [^;]+;", "assign i__ready = 1'h1;")


def _drop_sticky(text):
    """Align without the sticky bit: bits shifted out below the guard and round bits are lost."""
    return edit_site(text, r"assign align_sticky = [^;]+;", "assign align_sticky = 1'h0;")


@pytest.mark.sim
@pytest.mark.parametrize("mutation,failure", [
    pytest.param(("truncate", _truncate), r"results differ", marks=pytest.mark.large,
                 id="truncation"),
    pytest.param(("nosticky", _drop_sticky), r"results differ", marks=pytest.mark.large,
                 id="no-sticky"),
    pytest.param(("nostall", _never_stall),
                 r"payload changed|valid fell|beats arrived|beats received",
                 marks=pytest.mark.large, id="lost-results"),
])
def test_bench_fails_on_broken_rtl(mutation, failure):
    # The message is checked too: a mutant that fails to build would also raise BenchFailure.
    with pytest.raises(BenchFailure, match=failure):
        run_testbench("fp16_mac", {}, extra_env={"QLLM_BEATS": 5_000}, mutation=mutation)


# --- synthesis -------------------------------------------------------------------------------


@pytest.mark.synth
@pytest.mark.large
def test_synthesis_ecp5_registers_and_multiplier(tmp_path):
    from qllm_cores.fpga.yosys import synth

    source = generate("fp16_mac", {}, tmp_path / "v")
    result = synth(source, "fp16_mac", "ecp5", tmp_path / "synth")
    # The documented registers and nothing else (no register duplicated, none optimized away):
    # the stage registers (the multiplier's inputs and output in fabric flip-flops: Yosys
    # keeps ECP5's MULT18X18D unregistered), the accumulator and its exponent comparison, the
    # output register and the valid chain.
    assert result.metrics["FF"] == Fp16Mac().flip_flops == 226
    # The 11 x 11 significand product maps to one DSP; the adder stays in LUTs and carries.
    assert result.metrics["DSP"] == 1
    assert result.metrics["BRAM"] == 0
    assert 0 < result.metrics["LUT"] < 2000 and result.metrics["CARRY"] > 0
