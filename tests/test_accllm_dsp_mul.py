# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""accllm_dsp_mul: parameters and limits, the generic design in Amaranth's simulator, the
cocotb benches on every target (exhaustive w4 and w2, 1M-vector w8, accumulation,
backpressure), mutations, lint of the DSP48E2 instance, and synthesis counts."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from gen import generate
from golden.accllm import (extract_w2, extract_w8, max_accumulation_depth, pack_w8,
                           packed_p_w2)
from hdl.accllm_dsp_mul import (MODES, AccllmDspMul, accumulation_limit, packing,
                                product_range, rounding_constant)
from verif.runner import BenchFailure, edit_site, run_testbench


@pytest.mark.parametrize("kwargs,error,message", [
    ({"mode": "w3"}, ValueError, r"mode must be one of 'w8', 'w4', 'w2', not 'w3'"),
    ({"x_bits": 9}, ValueError, r"x_bits must be in range 2\.\.8, not 9"),
    ({"x_bits": 1}, ValueError, r"x_bits must be in range 2\.\.8, not 1"),
    ({"x_signed": 1}, TypeError, r"x_signed must be a bool, not 1"),
    ({"mode": "w4", "cross_products": True}, ValueError,
     r"cross_products applies to mode 'w2' only"),
    ({"target": "asic"}, ValueError,
     r"target must be one of 'generic', 'xilinx', 'ecp5', 'ice40', not 'asic'"),
    ({"acc_depth": 0}, ValueError, r"acc_depth must be in range 1\.\., not 0"),
    ({"mode": "w8", "acc_depth": 8}, ValueError,
     r"acc_depth must be in range 1\.\.7 \(the accumulation limit of mode 'w8' on target "
     r"'generic' with x_bits=8, x_signed=True: the guard bits of the narrowest field\), not 8"),
    ({"mode": "w4", "x_signed": False, "target": "xilinx", "acc_depth": 65}, ValueError,
     r"acc_depth must be in range 1\.\.64 "),
    ({"mode": "w2", "acc_depth": 2}, ValueError, r"acc_depth must be in range 1\.\.1 "),
    ({"mode": "w4", "target": "ecp5", "acc_depth": 4}, ValueError,
     r"acc_depth must be in range 1\.\.3 "),
    ({"mode": "w8", "target": "ecp5"}, ValueError,
     r"mode 'w8' with x_bits=8 does not pack on target 'ecp5': W1 \+ \(W2 << s\) fits "
     r"MULT18X18D's signed 18-bit port only for s <= 9, and the 16-bit product x\*w1 needs "
     r"s >= 16"),
    ({"mode": "w4", "target": "ice40"}, ValueError,
     r"fits SB_MAC16's signed 16-bit port only for s <= 11, and the 12-bit product x\*w1 "
     r"needs s >= 12"),
    ({"mode": "w2", "target": "ice40"}, ValueError, r"mode 'w2' does not pack on target 'ice40'"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        AccllmDspMul(**kwargs)


def _simulate(dut, inputs, outputs):
    got = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        for row in zip(*inputs.values()):
            for name, value in zip(inputs, row):
                ctx.set(getattr(dut.i.payload, name), int(value))
            await ctx.tick()
            got.append([ctx.get(getattr(dut.o.payload, name)) for name in outputs])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, np.int64)


def _x_values(x_signed, step):
    lo, hi = (-128, 127) if x_signed else (0, 255)
    return np.unique(np.concatenate([np.arange(lo, hi + 1, step), [lo, lo + 1, -1 if x_signed
                                                                   else 1, 0, hi]]))


@pytest.mark.parametrize("mode", ["w8", "w4"])
@pytest.mark.parametrize("x_signed", [True, False])
def test_two_products_per_multiply(mode, x_signed):
    w_bits = 8 if mode == "w8" else 4
    w_lo, w_hi = -(1 << (w_bits - 1)), (1 << (w_bits - 1)) - 1
    ws = np.unique(np.concatenate([np.arange(w_lo, w_hi + 1, 1 if w_bits == 4 else 37),
                                   [w_lo, -1, 0, 1, w_hi]]))
    x, w1, w2 = (v.ravel() for v in np.meshgrid(_x_values(x_signed, 9), ws, ws, indexing="ij"))
    got = _simulate(AccllmDspMul(mode=mode, x_signed=x_signed), {"x": x, "w1": w1, "w2": w2},
                    ["p1", "p2"])
    # Golden packed arithmetic: P = (A + D) * B, then the borrow-corrected fields.
    a, d, b = pack_w8(x, w1, w2, w_bits, 8, x_signed)
    expected = extract_w8((a + d) * b, w_bits, 8, x_signed)
    np.testing.assert_array_equal(got[:, 0], expected.p1)
    np.testing.assert_array_equal(got[:, 1], expected.p2)
    np.testing.assert_array_equal(got[:, 0], x * w1)
    np.testing.assert_array_equal(got[:, 1], x * w2)


@pytest.mark.parametrize("x_signed", [True, False])
def test_four_products_per_multiply_including_b_port_overflow(x_signed):
    xs = _x_values(x_signed, 23)
    x1, x2, w1, w2 = (v.ravel() for v in np.meshgrid(xs, xs, np.arange(-2, 2), np.arange(-2, 2),
                                                     indexing="ij"))
    got = _simulate(AccllmDspMul(mode="w2", x_signed=x_signed, cross_products=True),
                    {"x1": x1, "x2": x2, "w1": w1, "w2": w2}, ["p11", "p22", "p12", "p21"])
    expected = extract_w2(packed_p_w2(x1, x2, w1, w2, 8, x_signed), 8, x_signed)
    np.testing.assert_array_equal(got, np.stack([expected.p11, expected.p22, expected.p12,
                                                 expected.p21], axis=1))
    np.testing.assert_array_equal(got, np.stack([x1 * w1, x2 * w2, x1 * w2, x2 * w1], axis=1))
    # The inputs where X1 + (X2 << 10) leaves the 18-bit B port are among those checked.
    b = x1 + (x2 << 10)
    assert ((b < -(1 << 17)) | (b >= (1 << 17))).any()


# --- limits: against the golden derivation and against brute force ------------------------


@pytest.mark.parametrize("target", ["generic", "xilinx"])
def test_accumulation_limit_matches_the_golden_model(target):
    for mode in MODES:
        for x_bits in range(2, 9):
            for x_signed in (True, False):
                assert accumulation_limit(mode, target, x_bits, x_signed) == \
                    max_accumulation_depth(mode, x_bits, None, x_signed), (mode, x_bits, x_signed)


def _chain(total, fields):
    """The borrow chain written out on Python integers (independent of the RTL)."""
    values, rest = [], total
    for _, _, width in fields:
        low = rest % (1 << width)
        values.append(low - (1 << width) if low >> (width - 1) else low)
        rest = (rest >> width) + (low >> (width - 1))
    return values


@pytest.mark.parametrize("target,x_bits", [("ecp5", 8), ("ecp5", 5), ("ice40", 7), ("ice40", 3)])
@pytest.mark.parametrize("x_signed", [True, False])
def test_fabric_packing_limit_is_tight_by_brute_force(target, x_bits, x_signed):
    """N extreme products extract exactly for N = limit and not all for N = limit + 1."""
    fields = packing("w4", target, x_bits, x_signed)
    shift = fields[1][1]
    port = 18 if target == "ecp5" else 16
    limit = accumulation_limit("w4", target, x_bits, x_signed)
    lo, hi = product_range(x_bits, 4, x_signed)
    xs = range(-(1 << (x_bits - 1)), 1 << (x_bits - 1)) if x_signed else range(1 << x_bits)
    ws = range(-8, 8)
    for w1 in ws:
        for w2 in ws:
            packed = w1 + (w2 << shift)
            assert -(1 << (port - 1)) <= packed < (1 << (port - 1))
    assert lo < 0 < hi
    exact = [True, True]
    for x in (min(xs), max(xs)):
        for w1 in (-8, 7):
            for n, k in ((limit, 0), (limit + 1, 1)):
                total = n * x * (w1 + (w1 << shift))
                if _chain(total, fields) != [n * x * w1, n * x * w1]:
                    exact[k] = False
    assert exact == [True, False]


def test_rounding_constant_slices_equal_the_borrow_chain():
    fields = packing("w2", "xilinx")
    rng = np.random.default_rng(7)
    for total in rng.integers(-(1 << 47), 1 << 47, 20_000).tolist():
        shifted = (total + rounding_constant(fields)) % (1 << 48)
        sliced = []
        for k, (_, shift, width) in enumerate(fields):
            bits = (shifted >> shift) % (1 << width)
            if k < len(fields) - 1:
                bits ^= 1 << (width - 1)
            sliced.append(bits - (1 << width) if bits >> (width - 1) else bits)
        assert sliced == _chain(total % (1 << 48), fields)


# --- cocotb benches --------------------------------------------------------------------------

BENCH_CONFIGS = {
    # Exhaustive w4 (65,536 beats) and w2 (1,048,576 beats, all four products) on the generic
    # target and on the xilinx target through the DSP48E2 model.
    "generic-w4": (None, {}, {}),
    "xilinx-w4": ("accllm-w4-xilinx", {}, {}),
    "generic-w2": (None, {"mode": "w2", "cross_products": True}, {}),
    "xilinx-w2": ("accllm-w2-xilinx", {"cross_products": True}, {}),
    # The figure's unsigned X: B's sign bit set by X2 >= 128, corrected through the C port.
    "xilinx-w2-unsigned": ("accllm-w2-xilinx-unsigned", {"cross_products": True}, {}),
    # w8: 1,000,000 random vectors and every corner combination on the xilinx target.
    "xilinx-w8": ("accllm-w8-xilinx", {}, {}),
    # Accumulation (plus the exhaustive/random products with `last` on every beat).
    "xilinx-w8-acc7": ("accllm-w8-xilinx-acc7", {}, {"QLLM_VECTORS": 100_000}),
    "generic-w8-unsigned-acc4": (None, {"mode": "w8", "x_signed": False, "acc_depth": 4},
                                 {"QLLM_VECTORS": 100_000}),
    # Narrow activations: the C-port correction for 5-bit X, accumulating through W = C, Z = P.
    "xilinx-w2-x5-acc15": (None, {"mode": "w2", "target": "xilinx", "x_bits": 5,
                                  "acc_depth": 15, "cross_products": True}, {}),
    "ecp5-w4-acc3": (None, {"target": "ecp5", "acc_depth": 3}, {}),
    "ice40-w4": ("accllm-w4-ice40", {}, {}),
}


@pytest.mark.parametrize("name", sorted(BENCH_CONFIGS))
def test_bench(name):
    config, params, env = BENCH_CONFIGS[name]
    metrics = run_testbench("accllm_dsp_mul", params, config=config, extra_env=env)
    assert metrics["tests"] == 3
    p = metrics["manifest"]["params"]
    exhaustive = metrics["exhaustive"]
    latency = metrics["manifest"]["latency"]
    assert exhaustive["cycles"] <= exhaustive["beats"] + exhaustive["bursts"] * (latency + 1)
    if p["mode"] == "w2":
        assert exhaustive["beats"] == 1 << (2 * p["x_bits"] + 4)
    elif p["mode"] == "w4":
        assert exhaustive["beats"] == 1 << (p["x_bits"] + 8)
    else:
        assert exhaustive["beats"] >= env.get("QLLM_VECTORS", 1_000_000)
    if p["acc_depth"] > 1:
        assert metrics["accumulation"]["results"] > 0


def test_plain_multiplier_baseline_bench():
    metrics = run_testbench("accllm_plain_mul", {"mode": "w2", "cross_products": True},
                            testcase="random_backpressure")
    assert metrics["random_backpressure"]["beats"] == 20_000


def _drop_rounding_half(text):
    # The RND constant loses the half of field p11: p11's sign inverts.
    return edit_site(text, r"\.RND\(48'h000080200200\)", ".RND(48'h000080200000)")


def _wrong_correction(text):
    # One entry of the C-port table (W1 = 0, W2 = -2, X1 < 0) loses its correction.
    return edit_site(text, r"c_port = 48'h000080000000;", "c_port = 48'h000000000000;")


def _p_register_takes_bubbles(text):
    # The P register also loads in bubble cycles: accumulators pick up stale products.
    return edit_site(text, r"\.CEP\([^)]+\)", ".CEP(1'h1)")


X5_W2 = {"mode": "w2", "target": "xilinx", "x_bits": 5, "cross_products": True}


@pytest.mark.parametrize("mutation,params,tests,message", [
    (_drop_rounding_half, {"mode": "w2", "target": "xilinx", "cross_products": True},
     ["random_backpressure"], r"mismatches in field p11"),
    (_wrong_correction, {"mode": "w2", "target": "xilinx", "cross_products": True},
     ["random_backpressure"], r"mismatches in field p(12|22)"),
    # (P then changes under a stalled output: the stream monitor's protocol check fires.)
    (_p_register_takes_bubbles, {**X5_W2, "acc_depth": 15}, ["accumulation"],
     r"mismatches in field|payload changed"),
])
def test_bench_fails_on_mutant(mutation, params, tests, message):
    with pytest.raises(BenchFailure, match=message):
        run_testbench("accllm_dsp_mul", params, testcase=tests,
                      extra_env={"QLLM_BEATS": 5_000, "QLLM_RUNS": 500},
                      mutation=(mutation.__name__, mutation))


# --- lint and synthesis ----------------------------------------------------------------------


@pytest.mark.parametrize("config", ["accllm-w8-xilinx-acc7", "accllm-w2-xilinx-unsigned",
                                    "accllm-w4-ecp5", "accllm-w4-ice40"])
def test_variant_is_lint_clean(config, tmp_path):
    from verif.__main__ import lint_file
    source = generate("accllm_dsp_mul", None, tmp_path, config=config)
    assert lint_file(source, "accllm_dsp_mul") == []


@pytest.mark.parametrize("mode,products", [("w8", 2), ("w4", 2), ("w2", 4)])
def test_xilinx_target_is_one_dsp48e2_with_the_pre_adder_inside(mode, products, tmp_path):
    from fpga.yosys import synth
    params = {"mode": mode, "target": "xilinx", "cross_products": mode == "w2"}
    source = generate("accllm_dsp_mul", params, tmp_path / "rtl")
    result = synth(source, "accllm_dsp_mul", "xilinx", tmp_path / "synth")
    assert result.cell_counts["DSP48E2"] == 1
    # No carry chain anywhere: the pre-add and the field correction happen inside the DSP.
    assert result.metrics["CARRY"] == 0
    # Fabric flip-flops: the four stage valid bits, plus in w2 the C-port table's two stages
    # of (W1, W2, flag) = 5 bits.
    assert result.metrics["FF"] == 4 + (10 if mode == "w2" else 0)
    outputs = len(AccllmDspMul(**params).products)
    assert outputs / result.cell_counts["DSP48E2"] == products


def test_fabric_targets_use_one_hard_multiplier(tmp_path):
    from fpga.yosys import synth
    for config, target, cell in (("accllm-w4-ecp5", "ecp5", "MULT18X18D"),
                                 ("accllm-w4-ice40", "ice40", "SB_MAC16")):
        source = generate("accllm_dsp_mul", None, tmp_path / config, config=config)
        result = synth(source, "accllm_dsp_mul", target, tmp_path / "synth")
        assert result.cell_counts[cell] == 1, result.cell_counts
