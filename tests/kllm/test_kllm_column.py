# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""kllm_column: parameter checks, ports, the cocotb bench in both modes and at the lowest and
the default depth, overflow at a small max_len, the float reference end to end, mutants.

The acceptance run (2,000 reductions per mode, K from 1 to 4096) is the bench at its defaults:
``qllm sim --unit kllm_column [--config kllm-ik-a4]``; the runs here are shorter.
"""

import numpy as np
import pytest

from qllm_cores.gen.verilog import port_description
from qllm_cores.golden.kllm import column_float_reference, reductions_to_beats
from qllm_cores.hdl.kllm.column import KllmColumn
from qllm_cores.verif.runner import BenchFailure, edit_site, replay, run_testbench

# --- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,message", [
    ({"a_bits": 0}, ValueError, r"a_bits must be in range 1\.\.8, not 0"),
    ({"a_bits": 9}, ValueError, r"a_bits must be in range 1\.\.8, not 9"),
    ({"b_bits": 9}, ValueError, r"b_bits must be in range 1\.\.8, not 9"),
    ({"a_bits": 4.0}, TypeError, r"a_bits must be an integer, not 4\.0"),
    ({"n_inputs": 0}, ValueError, r"n_inputs must be in range 1\.\.64, not 0"),
    ({"n_inputs": 65}, ValueError, r"n_inputs must be in range 1\.\.64, not 65"),
    ({"n_inputs": "16"}, TypeError, r"n_inputs must be an integer, not '16'"),
    ({"mode": "kmeans"}, ValueError, r"mode must be one of 'kk', 'ik', not 'kmeans'"),
    ({"a_bits": 6, "b_bits": 5}, ValueError, r"a_bits \+ b_bits must be at most 10"),
    ({"mode": "kk", "weight_bits": 4}, ValueError, r"weight_bits applies to mode 'ik' only"),
    ({"mode": "ik", "weight_bits": 1}, ValueError, r"weight_bits must be in range 2\.\.8, not 1"),
    ({"mode": "ik", "weight_bits": 9}, ValueError, r"weight_bits must be in range 2\.\.8, not 9"),
    ({"max_len": 0}, ValueError, r"max_len must be in range 1\.\., not 0"),
    ({"max_len": 4096.0}, TypeError, r"max_len must be an integer, not 4096\.0"),
    # fp32(count) must be exact: counts up to 2^24 in magnitude.
    ({"max_len": 1 << 24}, ValueError, r"max_len=16777216 needs a 25-bit count"),
    ({"mode": "ik", "weight_bits": 4, "max_len": (1 << 21) + 1}, ValueError,
     r"max_len=2097153 needs a 26-bit count in mode 'ik'"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.7, not -1"),
    ({"pipeline": 8}, ValueError, r"pipeline must be in range 0\.\.7, not 8"),
    ({"pipeline": 1.0}, TypeError, r"pipeline must be an integer, not 1\.0"),
    ({"banks": 0}, ValueError, r"banks must be in range 1\.\.2, not 0"),
    ({"banks": 3}, ValueError, r"banks must be in range 1\.\.2, not 3"),
    ({"banks": 2.0}, TypeError, r"banks must be an integer, not 2\.0"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        KllmColumn(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"max_len": (1 << 24) - 1},                                   # 24-bit counts, exact
    {"mode": "ik", "weight_bits": 4, "max_len": 1 << 21},         # -2^24 .. 2^24 - 2^21
    {"a_bits": 8, "b_bits": 2}, {"mode": "ik", "a_bits": 8, "weight_bits": 8},
    {"n_inputs": 1, "a_bits": 1, "b_bits": 1, "max_len": 1},
])
def test_limits_are_accepted(kwargs):
    KllmColumn(**kwargs)


@pytest.mark.parametrize("mode,n,a_bits,b_bits,weight_bits,i_width", [
    # a (16 x 4) + b (16 x 4) + mask 16 + last 1 = 145
    ("kk", 16, 4, 4, None, 145),
    # a (5 x 3) + weight (5 x 6, signed) + mask 5 + last 1 = 51
    ("ik", 5, 3, 4, 6, 51),
])
def test_ports_follow_the_spec(mode, n, a_bits, b_bits, weight_bits, i_width):
    ports = port_description(KllmColumn(mode=mode, n_inputs=n, a_bits=a_bits, b_bits=b_bits,
                                        weight_bits=weight_bits, max_len=40))
    assert {name: port["direction"] for name, port in ports.items()} == \
        {"cb": "in", "i": "in", "o": "out"}
    fields = {name: [f["name"] for f in port["payload"]["fields"]]
              for name, port in ports.items()}
    assert fields == {"cb": ["value", "last"],
                      "i": ["a", "b" if mode == "kk" else "weight", "mask", "last"],
                      "o": ["y", "overflow"]}
    assert ports["cb"]["payload"]["width"] == 17 and ports["o"]["payload"]["width"] == 17
    assert ports["i"]["payload"]["width"] == i_width
    if mode == "ik":
        weight = ports["i"]["payload"]["fields"][1]["shape"]
        assert weight["length"] == n and weight["elem"] == {"kind": "int", "width": 6,
                                                             "signed": True}


# --- benches ---------------------------------------------------------------------------------

#: (config, params, reductions). The small-max_len configurations run the whole bench, so their
#: overflow test works at the counters' limits cheaply (kk: max_len 40, 6-bit counters; ik: 3-bit
#: weights, max_len 16, 7-bit counters); the others reach K = 4096.
BENCH_CONFIGS = [
    pytest.param(None, {"a_bits": 2, "b_bits": 2, "max_len": 40, "pipeline": 0}, 300,
                 id="kk-16bins-maxlen40-pipeline0"),
    pytest.param(None, {"a_bits": 2, "b_bits": 2}, 300, marks=pytest.mark.large,
                 id="kk-16bins"),
    pytest.param("w3a3-64bins", {}, 150, id="w3a3-64bins"),
    # One bank, at the lowest and the default depth.
    pytest.param(None, {"a_bits": 2, "b_bits": 2, "max_len": 40, "banks": 1, "pipeline": 0},
                 300, id="kk-16bins-maxlen40-banks1-pipeline0"),
    pytest.param(None, {"a_bits": 3, "b_bits": 3, "max_len": 40, "banks": 1}, 150,
                 id="kk-64bins-maxlen40-banks1"),
    pytest.param("kllm-ik-a4", {}, 300, id="kllm-ik-a4"),
    pytest.param(None, {"mode": "ik", "a_bits": 2, "weight_bits": 3, "n_inputs": 5,
                        "max_len": 16, "pipeline": 0}, 300,
                 id="ik-4bins-5in-maxlen16-pipeline0"),
    # The counter's per-lane histograms in memory (kk), with small counters: inferred at the
    # lowest depth, on ECP5 block RAMs (DP16KD model) at the default depth; and at KLLM-A4 on
    # ECP5 (make test-large; make test benches the counter alone there).
    pytest.param(None, {"a_bits": 2, "b_bits": 2, "max_len": 40, "counts": "memory",
                        "pipeline": 0}, 300, id="kk-16bins-maxlen40-memory-pipeline0"),
    pytest.param(None, {"a_bits": 2, "b_bits": 2, "max_len": 40, "counts": "memory",
                        "target": "ecp5"}, 300, id="kk-16bins-maxlen40-memory-ecp5"),
    pytest.param("kllm-a4", {"counts": "memory", "target": "ecp5"}, 40,
                 marks=pytest.mark.large, id="kllm-a4-memory-ecp5"),
]


@pytest.mark.sim
@pytest.mark.parametrize("config,params,reductions", BENCH_CONFIGS)
def test_bench(config, params, reductions):
    metrics = run_testbench("kllm_column", params, config=config,
                            extra_env={"QLLM_REDUCTIONS": reductions})
    assert metrics["tests"] == 4
    assert metrics["random_reductions_backpressure"]["reductions"] == reductions
    assert metrics["overflow_boundaries"]["overflows"] > 0
    if metrics["manifest"]["params"]["max_len"] >= 4096:
        assert metrics["random_reductions_backpressure"]["max_k"] > 1024


# --- the float reference end to end ----------------------------------------------------------


@pytest.mark.sim
@pytest.mark.parametrize("config,mode,a_bits,b_bits", [
    ("w3a3-64bins", "kk", 3, 3), ("kllm-ik-a4", "ik", 4, None),
])
def test_rtl_equals_the_float_matmul_of_the_dequantized_operands(config, mode, a_bits, b_bits):
    """KLLM Fig. 3 through the RTL: K-Means-quantized activations (outliers masked, Fig. 5) and
    weights (kk) or integer weights (ik); the unit's y for each output column equals the golden
    codebook path bit for bit and the float MatMul of the dequantized operands to FP16
    accuracy."""
    rng = np.random.default_rng(31 + a_bits)
    k, columns, n = 1024, 4, 16
    a = rng.standard_normal(k) * np.exp(rng.standard_normal(k))       # heavy tails: outliers
    b = rng.standard_normal((k, columns)) if mode == "kk" else rng.integers(-8, 8, (k, columns))
    ref = column_float_reference(a, b, a_bits, b_bits, mode, fraction=0.01, seed=5)
    assert ref.counted.sum() < k                                       # outliers were masked
    lanes = {"a": np.tile(ref.a_idx, columns), "w": ref.b.T.ravel(),
             "mask": np.tile(ref.counted, columns)}
    beats = reductions_to_beats(np.full(columns, k), n, lanes)
    fields = {"a": beats["a"], ("b" if mode == "kk" else "weight"): beats["w"],
              "mask": beats["mask"].astype(np.int64) @ (1 << np.arange(n)),
              "last": beats["last"]}
    last = np.zeros(ref.codebook.size, np.int64)
    last[-1] = 1
    # Both streams are driven from the first cycle with no gaps on the inputs: the unit takes
    # the waiting load first and holds i until its last beat.
    out = replay("kllm_column", {}, {"cb": {"value": ref.codebook, "last": last}, "i": fields},
                 columns, config=config, ready_probability=0.7, name="float-reference")["o"]
    assert not np.any(out["overflow"])
    np.testing.assert_array_equal(out["y"], ref.y)
    y = np.asarray(out["y"], np.int64).astype(np.uint16).view(np.float16).astype(np.float64)
    assert np.all(np.abs(y - ref.y_float) <= ref.bound), (y, ref.y_float, ref.bound)


# --- mutants: the bench fails on broken RTL --------------------------------------------------

MUTANT_PARAMS = {"a_bits": 2, "b_bits": 2, "max_len": 40, "pipeline": 0}


def _count_zero_not_skipped(text):
    """Bins of count 0 enter the sum (0 x a NaN or infinite entry is NaN)."""
    return edit_site(text, r"(assign product_next\[\d+\] = )\\\$\d+ ;", r"\g<1>1'h0;")


def _writes_past_the_last_entry(text):
    """Load beats past the final entry wrap around and overwrite entry 0, 1, ..."""
    return edit_site(text, r"assign (\\\$\d+)  = ~ write_full;", r"assign \1  = 1'h1;")


@pytest.mark.sim
@pytest.mark.parametrize("mutation", [
    pytest.param(("zeroskip", _count_zero_not_skipped), id="count-zero-not-skipped"),
    pytest.param(("pastend", _writes_past_the_last_entry), marks=pytest.mark.large,
                 id="writes-past-last-entry")])
def test_bench_fails_on_broken_rtl(mutation):
    with pytest.raises(BenchFailure, match="results differ"):
        run_testbench("kllm_column", MUTANT_PARAMS, testcase="directed_corners",
                      mutation=mutation)
