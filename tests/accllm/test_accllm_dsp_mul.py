# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""accllm_dsp_mul and its baseline accllm_plain_mul: parameters and limits, the pipeline
structure (latency, DSP48E2 registers), the generic design in Amaranth's simulator, the cocotb
benches on every target at pipeline 0, the default and the depths between (exhaustive w4 and w2,
1M-vector w8, accumulation, backpressure), mutations, lint of the DSP48E2 and MULT18X18D
instances, and synthesis counts (one DSP48E2 per packed multiplier;
the SB_MAC16 and MULT18X18D registers in use)."""

from pathlib import Path

import numpy as np
import pytest
from amaranth.sim import Simulator

from qllm_cores.gen import generate
from qllm_cores.golden.accllm import (extract_w2, extract_w8, max_accumulation_depth, pack_w8,
                           packed_p_w2)
from qllm_cores.hdl.accllm.dsp_mul.dsp_mul import (CUTS, DEFAULT_PIPELINE, MAX_PIPELINE, MODES,
    AccllmDspMul, AccllmPlainMul, accumulation_limit, dsp48e2_registers, packing, product_range,
    rounding_constant)
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench


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
    ({"pipeline": 4}, ValueError, r"pipeline must be in range 0\.\.3, not 4"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.3, not -1"),
    ({"pipeline": 1.0}, TypeError, r"pipeline must be an integer, not 1\.0"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        AccllmDspMul(**kwargs)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"target": "asic"}, ValueError, r"target must be one of 'generic', 'xilinx', 'ecp5', "
                                     r"'ice40', not 'asic'"),
    ({"pipeline": 4}, ValueError, r"pipeline must be in range 0\.\.3, not 4"),
    ({"acc_depth": 2}, TypeError, r"unexpected keyword argument 'acc_depth'"),
])
def test_baseline_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        AccllmPlainMul(**kwargs)


# --- pipeline structure ----------------------------------------------------------------------


def test_pipeline_cuts_and_latency():
    assert MAX_PIPELINE == len(CUTS) == 3 and DEFAULT_PIPELINE == 3
    for target in ("generic", "xilinx", "ecp5"):
        for pipeline in range(MAX_PIPELINE + 1):
            unit = AccllmDspMul(target=target, pipeline=pipeline)
            assert unit.cuts == CUTS[:pipeline]
            assert unit.latency == 1 + pipeline
    assert AccllmDspMul().pipeline == DEFAULT_PIPELINE
    # The baseline has no pre-adder and reads no fields: only the operand cut adds a register.
    assert [AccllmPlainMul(pipeline=p).latency for p in range(4)] == [1, 1, 2, 2]


def test_ecp5_operand_registers_are_the_mult18x18d_input_registers():
    for pipeline, primitives in ((0, ()), (1, ()), (2, ("MULT18X18D",)), (3, ("MULT18X18D",))):
        for unit in (AccllmDspMul(target="ecp5", pipeline=pipeline),
                     AccllmPlainMul(target="ecp5", pipeline=pipeline)):
            assert unit.primitives == primitives
            assert unit.synth_targets == (("ecp5",) if primitives else None)
    assert AccllmPlainMul(target="xilinx").primitives == ()
    assert AccllmDspMul(target="xilinx", pipeline=0).primitives == ("DSP48E2",)


def test_dsp48e2_registers_per_depth():
    # Depth 3 is the full pipeline of UG579 (today's circuit); lower depths drop the input
    # registers, then AD, then M. P is always used; C and OPMODE enter with M from depth 1 on.
    expected = [
        dict(AREG=0, BREG=0, DREG=0, ADREG=0, MREG=0, PREG=1, CREG=0, OPMODEREG=0),
        dict(AREG=0, BREG=0, DREG=0, ADREG=0, MREG=1, PREG=1, CREG=1, OPMODEREG=1),
        dict(AREG=0, BREG=1, DREG=0, ADREG=1, MREG=1, PREG=1, CREG=1, OPMODEREG=1),
        dict(AREG=1, BREG=2, DREG=1, ADREG=1, MREG=1, PREG=1, CREG=1, OPMODEREG=1),
    ]
    for pipeline, registers in enumerate(expected):
        got = dsp48e2_registers(pipeline)
        assert {key: got[key] for key in registers} == registers
        assert got["ACASCREG"] == got["AREG"] and got["BCASCREG"] == got["BREG"]
        # A and D reach P in as many enabled edges as B (UG579's latency rule).
        a_path = got["AREG"] + got["ADREG"] + got["MREG"] + got["PREG"]
        assert a_path == got["DREG"] + got["ADREG"] + got["MREG"] + got["PREG"]
        assert a_path == got["BREG"] + got["MREG"] + got["PREG"] == 1 + pipeline


def _simulate(dut, inputs, outputs):
    """Send ``inputs`` back to back with ``o.ready`` high; return the output rows (the first
    one ``dut.latency`` cycles after the first input)."""
    got = []
    rows = list(zip(*inputs.values()))

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        for cycle in range(len(rows) + dut.latency):
            ctx.set(dut.i.valid, cycle < len(rows))
            if cycle < len(rows):
                assert ctx.get(dut.i.ready)
                for name, value in zip(inputs, rows[cycle]):
                    ctx.set(getattr(dut.i.payload, name), int(value))
            await ctx.tick()
            if ctx.get(dut.o.valid):
                assert cycle + 1 - len(got) == dut.latency
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
@pytest.mark.parametrize("pipeline", [0, 3])
def test_two_products_per_multiply(mode, x_signed, pipeline):
    w_bits = 8 if mode == "w8" else 4
    w_lo, w_hi = -(1 << (w_bits - 1)), (1 << (w_bits - 1)) - 1
    ws = np.unique(np.concatenate([np.arange(w_lo, w_hi + 1, 1 if w_bits == 4 else 37),
                                   [w_lo, -1, 0, 1, w_hi]]))
    x, w1, w2 = (v.ravel() for v in np.meshgrid(_x_values(x_signed, 9), ws, ws, indexing="ij"))
    got = _simulate(AccllmDspMul(mode=mode, x_signed=x_signed, pipeline=pipeline),
                    {"x": x, "w1": w1, "w2": w2},
                    ["p1", "p2"])
    # Golden packed arithmetic: P = (A + D) * B, then the borrow-corrected fields.
    a, d, b = pack_w8(x, w1, w2, w_bits, 8, x_signed)
    expected = extract_w8((a + d) * b, w_bits, 8, x_signed)
    np.testing.assert_array_equal(got[:, 0], expected.p1)
    np.testing.assert_array_equal(got[:, 1], expected.p2)
    np.testing.assert_array_equal(got[:, 0], x * w1)
    np.testing.assert_array_equal(got[:, 1], x * w2)


@pytest.mark.parametrize("x_signed", [True, False])
@pytest.mark.parametrize("pipeline", [0, 2])
def test_four_products_per_multiply_including_b_port_overflow(x_signed, pipeline):
    xs = _x_values(x_signed, 23)
    x1, x2, w1, w2 = (v.ravel() for v in np.meshgrid(xs, xs, np.arange(-2, 2), np.arange(-2, 2),
                                                     indexing="ij"))
    got = _simulate(AccllmDspMul(mode="w2", x_signed=x_signed, cross_products=True,
                                 pipeline=pipeline),
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

X5_W2 = {"mode": "w2", "target": "xilinx", "x_bits": 5, "cross_products": True}

#: Every bench runs under random backpressure too (test random_backpressure). Configurations
#: without ``pipeline`` run at the default depth (3); the others cover depths 0..2, with and
#: without accumulation, on every target.
BENCH_CONFIGS = {
    # Exhaustive w4 (65,536 beats) and w2 (1,048,576 beats, all four products) on the generic
    # target and on the xilinx target through the DSP48E2 model.
    "generic-w4-p0": (None, {"pipeline": 0}, {}, "large"),
    "xilinx-w4": ("accllm-w4-xilinx", {}, {}),
    # (make test runs w2 exhaustively at 5-bit X, the x5 configurations below; the 8-bit
    # exhaustive runs are in make test-large.)
    "generic-w2": (None, {"mode": "w2", "cross_products": True}, {}, "large"),
    # Depth 0: PREG only, C and OPMODE combinational.
    "xilinx-w2-p0": ("accllm-w2-xilinx", {"cross_products": True, "pipeline": 0}, {}, "large"),
    # The figure's unsigned X: B's sign bit set by X2 >= 128, corrected through the C port
    # (depth 1: MREG, CREG; the C key is not delayed in fabric).
    "xilinx-w2-unsigned-p1": ("accllm-w2-xilinx-unsigned",
                              {"cross_products": True, "pipeline": 1}, {}, "large"),
    # w8: 1,000,000 random vectors and every corner combination on the xilinx target (depth 2:
    # ADREG and BREG = 1 without AREG / DREG).
    "xilinx-w8-p2": ("accllm-w8-xilinx", {"pipeline": 2}, {}, "large"),
    # The same build at make test's size.
    "xilinx-w8-p2-100k": ("accllm-w8-xilinx", {"pipeline": 2}, {"QLLM_VECTORS": 100_000},
                          "large"),
    # Accumulation (plus the exhaustive/random products with `last` on every beat).
    "xilinx-w8-acc7": ("accllm-w8-xilinx-acc7", {}, {"QLLM_VECTORS": 20_000}),
    "generic-w8-unsigned-acc4-p1": (None, {"mode": "w8", "x_signed": False, "acc_depth": 4,
                                           "pipeline": 1}, {"QLLM_VECTORS": 100_000},
                                    "large"),
    # Narrow activations: the C-port correction for 5-bit X, accumulating through W = C, Z = P,
    # at depths 0 and 1 (OPMODE and C combinational; registered, without fabric delay) and 3
    # (xilinx-w8-acc7: two fabric stages in front of CREG / OPMODEREG).
    "xilinx-w2-x5-acc15-p0": (None, {**X5_W2, "acc_depth": 15, "pipeline": 0}, {}, "large"),
    "xilinx-w2-x5-acc15-p1": (None, {**X5_W2, "acc_depth": 15, "pipeline": 1}, {}, "large"),
    # ECP5: the operands in the MULT18X18D's input registers (verif/models/MULT18X18D.v).
    "ecp5-w4-acc3-p2": (None, {"target": "ecp5", "acc_depth": 3, "pipeline": 2}, {}, "large"),
    "ice40-w4": ("accllm-w4-ice40", {}, {}, "large"),
}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.large) if BENCH_CONFIGS[name][3:] == ("large",)
    else name for name in sorted(BENCH_CONFIGS)])
def test_bench(name):
    config, params, env = BENCH_CONFIGS[name][:3]
    # Simulation-bound (exhaustive products, 20,000 random beats): Verilator's -Os, not the
    # suite's -O0 (xilinx-w4: 11.0 s of simulation alone at -O0, 12.4 s with the build at -Os).
    metrics = run_testbench("accllm_dsp_mul", params, config=config, extra_env=env,
                            cxx_opt="-Os")
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


@pytest.mark.parametrize("params", [
    {"mode": "w2", "cross_products": True, "pipeline": 0},
    # The default depth, on ECP5: one MULT18X18D per product holds the operands.
    {"mode": "w2", "cross_products": True, "target": "ecp5"},
], ids=["w2-p0", "w2-ecp5"])
def test_plain_multiplier_baseline_bench(params):
    metrics = run_testbench("accllm_plain_mul", params, testcase="random_backpressure")
    assert metrics["random_backpressure"]["beats"] == 20_000
    assert metrics["manifest"]["latency"] == AccllmPlainMul(**params).latency


def _drop_rounding_half(text):
    # The RND constant loses the half of field p11: p11's sign inverts.
    return edit_site(text, r"\.RND\(48'h000080200200\)", ".RND(48'h000080200000)")


def _wrong_correction(text):
    # One entry of the C-port table (W1 = 0, W2 = -2, X1 < 0) loses its correction.
    return edit_site(text, r"c_port = 48'h000080000000;", "c_port = 48'h000000000000;")


def _p_register_takes_bubbles(text):
    # The P register also loads in bubble cycles: accumulators pick up stale products.
    return edit_site(text, r"\.CEP\([^)]+\)", ".CEP(1'h1)")


def _mult_input_register_ignores_stalls(text):
    # The MULT18X18D's input registers load in every cycle: a stalled beat is overwritten.
    return edit_site(text, r"\.CE0\([^)]+\)", ".CE0(1'h1)")


@pytest.mark.parametrize("mutation,params,tests,message", [
    pytest.param(_drop_rounding_half, {"mode": "w2", "target": "xilinx", "cross_products": True},
                 ["random_backpressure"], r"mismatches in field p11", marks=pytest.mark.large),
    pytest.param(_wrong_correction, {"mode": "w2", "target": "xilinx", "cross_products": True},
                 ["random_backpressure"], r"mismatches in field p(12|22)",
                 marks=pytest.mark.large),
    # (P then changes under a stalled output: the stream monitor's protocol check fires.)
    pytest.param(_p_register_takes_bubbles, {**X5_W2, "acc_depth": 15}, ["accumulation"],
                 r"mismatches in field|payload changed", marks=pytest.mark.large),
    pytest.param(_mult_input_register_ignores_stalls, {"target": "ecp5"},
                 ["random_backpressure"], r"mismatches in field|payload changed",
                 marks=pytest.mark.large),
])
def test_bench_fails_on_mutant(mutation, params, tests, message):
    with pytest.raises(BenchFailure, match=message):
        run_testbench("accllm_dsp_mul", params, testcase=tests,
                      extra_env={"QLLM_BEATS": 5_000, "QLLM_RUNS": 500},
                      mutation=(mutation.__name__, mutation))


# --- lint and synthesis ----------------------------------------------------------------------


@pytest.mark.parametrize("config,params", [
    ("accllm-w8-xilinx-acc7", {}), ("accllm-w2-xilinx-unsigned", {}),
    ("accllm-w2-xilinx-unsigned", {"pipeline": 0}), ("accllm-w4-ecp5", {}),
    ("accllm-w4-ice40", {}),
])
def test_variant_is_lint_clean(config, params, tmp_path):
    from qllm_cores.verif.__main__ import lint_file
    source = generate("accllm_dsp_mul", params, tmp_path, config=config)
    assert lint_file(source, "accllm_dsp_mul") == []


@pytest.mark.parametrize("mode,products", [("w8", 2), ("w4", 2), ("w2", 4)])
def test_xilinx_target_is_one_dsp48e2_with_the_pre_adder_inside(mode, products, tmp_path):
    from qllm_cores.fpga.yosys import synth
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


@pytest.mark.parametrize("pipeline", [0, 1])
def test_xilinx_fabric_holds_only_the_valid_chain_at_low_depth(pipeline, tmp_path):
    from qllm_cores.fpga.yosys import synth
    params = {"mode": "w2", "target": "xilinx", "cross_products": True, "pipeline": pipeline}
    source = generate("accllm_dsp_mul", params, tmp_path / "rtl")
    result = synth(source, "accllm_dsp_mul", "xilinx", tmp_path / "synth")
    assert result.cell_counts["DSP48E2"] == 1 and result.metrics["CARRY"] == 0
    # Valid chain of 1 + pipeline bits; the C-port key reaches CREG without a fabric stage.
    assert result.metrics["FF"] == 1 + pipeline


def _dsp_cells(result_dir, cell):
    import json
    netlists = list(Path(result_dir).rglob("*.json"))
    found = []
    for path in netlists:
        try:
            netlist = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        for module in netlist.get("modules", {}).values():
            found += [c for c in module.get("cells", {}).values() if c.get("type") == cell]
    return found


def _bits(value):
    return int(value, 2) if isinstance(value, str) else int(value)


def test_fabric_targets_use_one_hard_multiplier_with_its_registers(tmp_path):
    """At the default depth: the SB_MAC16 holds the operand and product registers (A_REG,
    B_REG, output register through TOPOUTPUT_SELECT = BOTOUTPUT_SELECT = 01, all held by the
    clock enable), so nextpnr's untimed DSP is between registers only; the MULT18X18D holds the
    operands in its input registers (timed by nextpnr through its clock-to-out)."""
    from qllm_cores.fpga.yosys import synth
    source = generate("accllm_dsp_mul", None, tmp_path / "ecp5", config="accllm-w4-ecp5")
    result = synth(source, "accllm_dsp_mul", "ecp5", tmp_path / "synth-ecp5")
    assert result.cell_counts["MULT18X18D"] == 1, result.cell_counts
    text = source.read_text()
    for parameter in ("REG_INPUTA_CLK", "REG_INPUTB_CLK"):
        assert f'.{parameter}("CLK0")' in text

    source = generate("accllm_dsp_mul", None, tmp_path / "ice40", config="accllm-w4-ice40")
    netlist = tmp_path / "ice40" / "net.json"
    _yosys(f'read_verilog "{source.name}"; synth_ice40 -device u -dsp -top accllm_dsp_mul; '
           f'write_json "{netlist.name}"', tmp_path / "ice40")
    (mac,) = _dsp_cells(tmp_path / "ice40", "SB_MAC16")
    parameters = mac["parameters"]
    assert _bits(parameters["A_REG"]) == _bits(parameters["B_REG"]) == 1
    assert _bits(parameters["TOPOUTPUT_SELECT"]) == _bits(parameters["BOTOUTPUT_SELECT"]) == 1
    holds = {tuple(mac["connections"][port]) for port in ("AHOLD", "BHOLD", "OHOLDTOP",
                                                          "OHOLDBOT")}
    assert len(holds) == 1 and holds != {("0",)}, holds     # one hold signal: the clock enable


def _yosys(script, folder):
    import subprocess
    from qllm_cores.fpga.yosys import find_yosys
    result = subprocess.run([str(find_yosys()), "-q", "-p", script], cwd=folder,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
