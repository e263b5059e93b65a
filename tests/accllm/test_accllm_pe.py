# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""accllm_pe (contract section 10): parameters, ports and latency (manifest), the fabric targets in
Amaranth's simulator against the golden adapter, the chained 2:4-pruned W2 dot product through
the sparse selector, the cocotb benches (generic and xilinx through the DSP48E2 model), and the
xilinx synthesis: one DSP48E2 per PE."""

import json

import numpy as np
import pytest
from amaranth.hdl import Shape

from qllm_cores.gen import generate
from qllm_cores.golden.accllm import prune_2_4, quantize_w2
from qllm_cores.golden.accllm.beats import accllm_pe
from qllm_cores.hdl.accllm.pe.pe import CUTS, DEFAULT_PIPELINE, MAX_PIPELINE, AccllmPe, product_bits
from qllm_cores.hdl.accllm.sparse_selector import AccllmSparseSelector
from qllm_cores.verif.amaranth_sim import simulate_streams
from qllm_cores.verif.payload import compare_outputs
from qllm_cores.verif.runner import run_testbench

UNIT = "accllm_pe"


@pytest.mark.parametrize("kwargs,error,message", [
    ({"x_bits": 9}, ValueError, r"x_bits must be in range 2\.\.8, not 9"),
    ({"x_bits": 1}, ValueError, r"x_bits must be in range 2\.\.8, not 1"),
    ({"x_bits": 8.0}, TypeError, r"x_bits must be an integer, not 8\.0"),
    ({"x_signed": 1}, TypeError, r"x_signed must be a bool, not 1"),
    ({"target": "ice40"}, ValueError,
     r"target must be one of 'generic', 'xilinx', 'ecp5', not 'ice40'"),
    ({"acc_bits": 15}, ValueError,
     r"acc_bits must be in range 16\.\.48 \(at least the 16-bit product of x_bits=8, "
     r"x_signed=True and an 8-bit weight\), not 15"),
    ({"acc_bits": 49}, ValueError, r"acc_bits must be in range 16\.\.48 .*not 49"),
    ({"x_bits": 4, "acc_bits": 11}, ValueError, r"acc_bits must be in range 12\.\.48 "),
    ({"acc_bits": True}, TypeError, r"acc_bits must be an integer, not True"),
    ({"pipeline": 4}, ValueError, r"pipeline must be in range 0\.\.3, not 4"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.3, not -1"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        AccllmPe(**kwargs)


def test_ports_and_fields():
    pe = AccllmPe()
    assert list(pe.in_layout.members) == ["mode", "x1", "x2", "w1", "w2", "kv4", "zp", "first",
                                          "last"]
    widths = {name: Shape.cast(shape).width for name, shape in pe.in_layout.members.items()}
    assert widths == {"mode": 2, "x1": 8, "x2": 8, "w1": 8, "w2": 8, "kv4": 1, "zp": 4,
                      "first": 1, "last": 1}
    assert list(pe.out_layout.members) == ["s1", "s2", "overflow"]
    assert pe.out_layout.size == 2 * 32 + 1
    assert AccllmPe(acc_bits=20).out_layout.size == 41
    assert product_bits(8, True) == product_bits(8, False) == 16


def test_latency_targets_and_primitives():
    assert DEFAULT_PIPELINE == MAX_PIPELINE == len(CUTS) == 3
    for pipeline in range(MAX_PIPELINE + 1):
        assert AccllmPe(pipeline=pipeline).latency == 1 + pipeline
        assert AccllmPe(target="ecp5", pipeline=pipeline).latency == 1 + pipeline
        assert AccllmPe(target="xilinx", pipeline=pipeline).latency == 2 + pipeline
        assert AccllmPe(target="xilinx", pipeline=pipeline).primitives == ("DSP48E2",)
        ecp5 = AccllmPe(target="ecp5", pipeline=pipeline)
        assert ecp5.primitives == (("MULT18X18D",) if pipeline >= 2 else ())
    assert AccllmPe().primitives == () and AccllmPe().synth_targets is None


@pytest.mark.parametrize("target,pipeline", [("generic", 3), ("xilinx", 3), ("generic", 0),
                                             ("xilinx", 0)])
def test_latency_in_the_manifest(target, pipeline, tmp_path):
    source = generate(UNIT, {"target": target, "pipeline": pipeline}, tmp_path)
    manifest = json.loads(source.with_suffix(".json").read_text())
    assert manifest["latency"] == AccllmPe(target=target, pipeline=pipeline).latency
    assert manifest["primitives"] == (["DSP48E2"] if target == "xilinx" else [])


# --- Amaranth simulator: fabric targets against the golden adapter ------------------------


@pytest.mark.parametrize("params", [
    {"pipeline": 0}, {"pipeline": 1}, {"pipeline": 2}, {"pipeline": 3},
    {"x_signed": False, "acc_bits": 18}, {"target": "ecp5", "pipeline": 1, "acc_bits": 17},
    {"x_bits": 5, "acc_bits": 14, "pipeline": 2},
], ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_fabric_agrees_with_the_golden_adapter(params):
    full = {"x_bits": 8, "x_signed": True, "target": "generic", "acc_bits": 32,
            "pipeline": 3, **params}
    rng = np.random.default_rng(len(str(params)))
    inputs = accllm_pe.stimulus(rng, full, 150)
    result = simulate_streams(AccllmPe(**full), inputs, rng=rng, valid_probability=0.7,
                              ready_probability=0.6)
    assert result.problems == []
    expected = accllm_pe.expected(full, inputs)
    assert compare_outputs(result.outputs, expected) == []


def test_reserved_mode_3_decodes_as_w8():
    rng = np.random.default_rng(4)
    n = 200
    fields = {"mode": np.full(n, 3), "x1": rng.integers(-128, 128, n),
              "x2": rng.integers(-128, 128, n), "w1": rng.integers(-128, 128, n),
              "w2": rng.integers(-128, 128, n), "kv4": rng.integers(0, 2, n),
              "zp": rng.integers(0, 16, n), "first": np.ones(n, int), "last": np.ones(n, int)}
    params = {"x_bits": 8, "x_signed": True, "target": "generic", "acc_bits": 32,
              "pipeline": 0}
    result = simulate_streams(AccllmPe(**params), {"i": fields}, rng=rng)
    as_w8 = accllm_pe.expected(params, {"i": {**fields, "mode": np.zeros(n, int)}})
    assert compare_outputs(result.outputs, as_w8) == []


# --- chained: 2:4-pruned W2 weights -> sparse selector -> PE (mode w2) -------------------


def test_pruned_w2_dot_products_through_the_sparse_selector():
    """Two weight rows (the output channels of two adjacent PE blocks, Fig. 10(a)) share the
    input vector; each keeps 2 of every 4 weights (2:4), quantized to 2 bits. The selector
    (Fig. 10(c), ``rows`` = 2) picks per row and group the two inputs meeting the kept weights.
    Fig. 10(d-2) pairs the two rows in one DSP: per group, two PE beats, beat k (k = 0, 1) taking
    the k-th kept weight of each row -- ``x1`` = row 0's k-th selected input, ``w1`` = row 0's
    k-th kept weight, ``x2`` = row 1's, ``w2`` = row 1's. Then ``s1`` and ``s2`` are the two
    rows' dense dot products with the pruned weights."""
    rng = np.random.default_rng(19)
    groups, vectors = 16, 12
    dense = rng.standard_normal((vectors, 2, 4 * groups))
    pruned, mask = prune_2_4(dense)
    quant = quantize_w2(pruned, group=4 * groups)
    weights = np.where(mask, quant.q.astype(np.int64) - 2, 0)    # signed 2-bit, 0 where pruned
    x = rng.integers(-128, 128, (vectors, 4 * groups))
    x[:, :8] = rng.choice([-128, -1, 127], (vectors, 8))        # B-port corner inputs
    reference = np.einsum("vj,vrj->vr", x, weights)              # dense dot products

    # Kept positions per row and group (ascending), as the pruned weights' indices.
    kept = np.argsort(~mask.reshape(vectors, 2, groups, 4), axis=-1, kind="stable")[..., :2]
    selector = AccllmSparseSelector(groups=groups, rows=2)
    sel_in = {"i": {"x": x, "idx1": kept[..., 0], "idx2": kept[..., 1]}}
    selected = simulate_streams(selector, sel_in, rng=rng, valid_probability=0.8,
                                ready_probability=0.8)
    assert selected.problems == []
    x_sel = np.stack([np.asarray(selected.outputs["o"]["x1"]),
                      np.asarray(selected.outputs["o"]["x2"])], axis=-1)   # (v, row, g, k)
    w_kept = np.take_along_axis(weights.reshape(vectors, 2, groups, 4), kept, axis=-1)
    # PE beats: (vector, group, k) in order; row 0 on x1/w1, row 1 on x2/w2.
    n = vectors * groups * 2
    beat = {"mode": np.full(n, 2), "x1": x_sel[:, 0].reshape(n), "x2": x_sel[:, 1].reshape(n),
            "w1": w_kept[:, 0].reshape(n), "w2": w_kept[:, 1].reshape(n),
            "kv4": np.zeros(n, int), "zp": np.zeros(n, int),
            "first": (np.arange(n) % (2 * groups) == 0).astype(int),
            "last": (np.arange(n) % (2 * groups) == 2 * groups - 1).astype(int)}
    params = {"x_bits": 8, "x_signed": True, "target": "generic", "acc_bits": 32,
              "pipeline": 3}
    result = simulate_streams(AccllmPe(**params), {"i": beat}, rng=rng, valid_probability=0.7,
                              ready_probability=0.6)
    assert result.problems == []
    out = result.outputs["o"]
    np.testing.assert_array_equal(np.asarray(out["s1"]), reference[:, 0])
    np.testing.assert_array_equal(np.asarray(out["s2"]), reference[:, 1])
    assert not np.asarray(out["overflow"]).any()
    # The golden PE agrees on the same beats.
    golden = accllm_pe.expected(params, {"i": beat})["o"]
    np.testing.assert_array_equal(golden["s1"], reference[:, 0])


# --- cocotb benches (Verilator; xilinx through verif/models/DSP48E2.v) --------------------

#: In make test the accumulators are 20 bits wide, so that the overflow test reaches the limit in
#: a few thousand beats (at the default 32 bits it takes 262,000: make test-large and
#: `qllm sim --unit accllm_pe`).
BENCH_CONFIGS = {
    "generic": (None, {"acc_bits": 20}),
    "generic-p0": (None, {"pipeline": 0, "acc_bits": 20}),
    "xilinx": ("accllm-pe-xilinx", {"acc_bits": 20}),
    "generic-acc32": (None, {}),
    "xilinx-p0-acc20": ("accllm-pe-xilinx", {"pipeline": 0, "acc_bits": 20}),
    "xilinx-unsigned-p1": ("accllm-pe-xilinx-unsigned", {"pipeline": 1}),
    "xilinx-x5-p2": ("accllm-pe-xilinx", {"x_bits": 5, "pipeline": 2, "acc_bits": 18}),
    "ecp5": ("accllm-pe-ecp5", {}),
}
#: (make test-large: the xilinx target's lowest depth; generic runs at both depths in make test)
#: (make test: the xilinx target at the default depth, the generic one at pipeline=0)
LARGE = {"generic", "generic-acc32", "xilinx-p0-acc20", "xilinx-unsigned-p1", "xilinx-x5-p2",
         "ecp5"}


@pytest.mark.sim
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.large) if name in LARGE else name
    for name in BENCH_CONFIGS])
def test_bench(name):
    config, params = BENCH_CONFIGS[name]
    # Simulation-bound (the DSP48E2 model): Verilator's -Os, not the suite's -O0 (xilinx:
    # 22.6 s of simulation at -O0, 23.9 s with the build at -Os).
    metrics = run_testbench(UNIT, params, config=config, cxx_opt="-Os",
                            extra_env={"QLLM_DOTS": 2_000, "QLLM_EXHAUSTIVE": "small"})
    assert metrics["tests"] == 6
    p = metrics["manifest"]["params"]
    assert metrics["manifest"]["latency"] == AccllmPe(**p).latency
    assert metrics["random_dot_products"]["dots"] == 2_000
    assert metrics["random_dot_products"]["mode_changes"] > 1_000
    exhaustive = metrics["exhaustive_single_products"]
    # Full rate with the mode changing on most beats: no bubble.
    assert exhaustive["cycles"] <= exhaustive["beats"] + 2 * (p["pipeline"] + 3)
    assert exhaustive["mode_changes"] > exhaustive["beats"] // 4
    assert metrics["overflow"]["patterns"]


# --- synthesis ----------------------------------------------------------------------------


@pytest.mark.synth
@pytest.mark.parametrize("pipeline", [3, pytest.param(0, marks=pytest.mark.large)])
def test_xilinx_target_is_one_dsp48e2(pipeline, tmp_path):
    from qllm_cores.fpga.yosys import synth
    params = {"target": "xilinx", "pipeline": pipeline}
    source = generate(UNIT, params, tmp_path / "rtl")
    result = synth(source, UNIT, "xilinx", tmp_path / "synth")
    assert result.cell_counts["DSP48E2"] == 1, result.cell_counts
    assert not any(cell.startswith("DSP") and cell != "DSP48E2" for cell in result.cell_counts)
