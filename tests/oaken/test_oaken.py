# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""oaken_decomposer and oaken_dequantizer: parameters, ports, benches, mutations, synthesis."""

import re

import numpy as np
import pytest
from amaranth.back import verilog

from qllm_cores.gen import generate
from qllm_cores.golden.oaken import decompose
from qllm_cores.hdl.oaken.decomposer import OakenDecomposer
from qllm_cores.hdl.oaken.dequantizer.dequantizer import OakenDequantizer
from qllm_cores.verif.oaken.chunks import coo_beats, encode_chunks
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench

# --- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize("cls,kwargs,error,message", [
    (OakenDecomposer, {"lanes": 0}, ValueError, r"lanes must be in range 1\.\.64, not 0"),
    (OakenDecomposer, {"lanes": 128}, ValueError, r"lanes must be in range 1\.\.64, not 128"),
    (OakenDecomposer, {"lanes": 12}, ValueError,
     r"lanes must be a power of two dividing vec_len \(64\), not 12"),
    (OakenDecomposer, {"data_bits": 1}, ValueError, r"data_bits must be in range 2\.\.32, not 1"),
    (OakenDecomposer, {"data_bits": 33}, ValueError,
     r"data_bits must be in range 2\.\.32, not 33"),
    (OakenDecomposer, {"lanes": 16.0}, TypeError, r"lanes must be an integer, not 16\.0"),
    (OakenDequantizer, {"vec_len": 0}, ValueError, r"vec_len must be in range 1\.\.64, not 0"),
    (OakenDequantizer, {"vec_len": 65}, ValueError, r"vec_len must be in range 1\.\.64, not 65"),
    (OakenDequantizer, {"vec_len": 8, "lanes": 16}, ValueError,
     r"lanes must be in range 1\.\.8, not 16"),
    (OakenDequantizer, {"vec_len": 40, "lanes": 16}, ValueError,
     r"lanes must be a power of two dividing vec_len \(40\), not 16"),
    (OakenDequantizer, {"lanes": 3}, ValueError,
     r"lanes must be a power of two dividing vec_len \(64\), not 3"),
    (OakenDequantizer, {"frac_bits": 0}, ValueError, r"frac_bits must be in range 1\.\.16, not 0"),
    (OakenDequantizer, {"frac_bits": 17}, ValueError,
     r"frac_bits must be in range 1\.\.16, not 17"),
    (OakenDequantizer, {"data_bits": 40}, ValueError,
     r"data_bits must be in range 2\.\.32, not 40"),
    (OakenDequantizer, {"frac_bits": "8"}, TypeError, r"frac_bits must be an integer, not '8'"),
    (OakenDequantizer, {"lanes": True}, TypeError, r"lanes must be an integer, not True"),
    (OakenDecomposer, {"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.2, not -1"),
    (OakenDecomposer, {"pipeline": 3}, ValueError, r"pipeline must be in range 0\.\.2, not 3"),
    (OakenDequantizer, {"pipeline": 8}, ValueError, r"pipeline must be in range 0\.\.7, not 8"),
    (OakenDequantizer, {"pipeline": 1.0}, TypeError, r"pipeline must be an integer, not 1\.0"),
])
def test_invalid_parameters_name_the_parameter(cls, kwargs, error, message):
    with pytest.raises(error, match=message):
        cls(**kwargs)


@pytest.mark.parametrize("cls,kwargs,latencies", [
    (OakenDecomposer, {}, [1, 2, 3]),
    # The COO cuts (pipeline 1, 2) run ahead of the dense side: no extra cycle; the queue
    # (pipeline 7) replaces the output register and adds two.
    (OakenDequantizer, {}, [2, 2, 2, 3, 4, 5, 6, 7]),
    (OakenDequantizer, {"lanes": 64}, [2, 2, 2, 3, 4, 5, 6, 7]),
])
def test_latency_follows_pipeline(cls, kwargs, latencies):
    assert [cls(**kwargs, pipeline=p).latency for p in range(len(latencies))] == latencies


@pytest.mark.parametrize("lanes,vec_len,slots", [
    (16, 64, [2, 2, 2, 2, 2, 2, 2, 2]),    # 4 windows per chunk: two slots always
    (64, 64, [3, 4, 5, 5, 5, 5, 5, 5]),    # one window per chunk: more slots cover the COO side
    (8, 16, [2, 3, 3, 3, 3, 3, 3, 3]),
])
def test_dequantizer_slots_cover_the_coo_latency(lanes, vec_len, slots):
    assert [OakenDequantizer(lanes=lanes, vec_len=vec_len, pipeline=p).slots
            for p in range(8)] == slots


def _ports(text, top):
    header = re.search(rf"module {top}\((.*?)\);", text, re.S)
    return {port.strip() for port in header.group(1).split(",")}


def test_verilog_ports_follow_the_spec():
    text = verilog.convert(OakenDecomposer(), name="oaken_decomposer", emit_src=False)
    assert _ports(text, "oaken_decomposer") == {
        "clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready",
        "o__payload"}
    # x: 16 x 16, then four 16-bit thresholds; out: group 16x2, side 16x1, 2 x 16x17.
    assert "input [319:0] i__payload;" in text
    assert f"output [{16 * (2 + 1 + 17 + 17) - 1}:0] o__payload;" in text

    text = verilog.convert(OakenDequantizer(), name="oaken_dequantizer", emit_src=False)
    assert _ports(text, "oaken_dequantizer") == {
        "clk", "rst", "coo_error", "o__valid", "o__ready", "o__payload",
        *(f"{p}__{s}" for p in ("hdr", "dense", "coo") for s in ("valid", "ready", "payload"))}
    m_bits = 16 + 8 + 2
    assert f"input [{4 * 16 + 6 * m_bits - 1}:0] hdr__payload;" in text
    assert "input [63:0] dense__payload;" in text
    assert f"input [{16 * 8 + 5 + 1 - 1}:0] coo__payload;" in text     # count 0..16: 5 bits
    assert "output [255:0] o__payload;" in text


def test_manifest_lists_the_status_port(tmp_path):
    import json

    generate("oaken_dequantizer", {"lanes": 4, "vec_len": 16}, tmp_path)
    manifest = json.loads((tmp_path / "oaken_dequantizer.json").read_text())
    assert manifest["signals"] == {"coo_error": {"direction": "out", "width": 1,
                                                 "signed": False}}
    assert set(manifest["ports"]) == {"hdr", "dense", "coo", "o"}


# --- stimulus helpers (what the benches feed) --------------------------------------------------


def test_coo_beats_full_packing_and_empty_chunks():
    assert coo_beats([], 16) == [([], True)]
    beats = coo_beats(list(range(40)), 16)
    assert [len(e) for e, _ in beats] == [16, 16, 8]
    assert [last for _, last in beats] == [False, False, True]
    rng = np.random.default_rng(3)
    for _ in range(50):
        beats = coo_beats(list(range(30)), 8, rng)
        assert sum((e for e, _ in beats), []) == list(range(30))
        assert all(len(e) <= 8 for e, _ in beats) and beats[-1][1]
        assert not any(last for _, last in beats[:-1])


@pytest.mark.parametrize("density", [0.0, 0.01, 0.1, 0.5, 1.0])
def test_stimulus_hits_the_requested_outlier_density(density):
    rng = np.random.default_rng(11)
    chunks = encode_chunks(rng, 400, density, vec_len=64, data_bits=16, frac_bits=8)
    observed = np.mean([len(chunk.coo) for _t, chunk, _e in chunks]) / 64
    assert abs(observed - density) <= 0.01 + 0.02 * density
    # Equal thresholds (empty groups) occur in the stimulus.
    assert any(t[0] == t[1] or t[1] == t[2] or t[2] == t[3] for t, _c, _e in chunks)


# --- benches ----------------------------------------------------------------------------------

# Every bench runs under random backpressure on both streams; the paper configuration at the
# default depth and at pipeline=0, the others at the remaining depths.
DECOMPOSER_CONFIGS = [
    pytest.param({}, 3_000, id="paper-16x16"),
    pytest.param({"pipeline": 0}, 2_000, id="paper-16x16-p0"),
    pytest.param({"lanes": 64, "pipeline": 2}, 2_000, marks=pytest.mark.large, id="64x16-p2"),
    pytest.param({"lanes": 1, "data_bits": 2, "pipeline": 0}, 2_000, id="1x2-p0"),
    pytest.param({"lanes": 4, "data_bits": 32}, 2_000, id="4x32"),
]


@pytest.mark.sim
@pytest.mark.parametrize("params,beats", DECOMPOSER_CONFIGS)
def test_decomposer_bench(params, beats):
    metrics = run_testbench("oaken_decomposer", params, extra_env={"QLLM_BEATS": beats})
    assert metrics["tests"] == 3
    assert metrics["random_beats_backpressure"]["beats"] == beats


# Every bench runs back-to-back chunks at 0 / 1 / 10 / 50 / 100 % outliers under random gaps on
# hdr, dense and coo and random o.ready. The paper configuration at the default depth (the
# acceptance run: 2,000 chunks per density) and at pipeline=0; the small configurations cover
# the depths in between (2: COO cuts only; 4: two arithmetic cuts; 6: all arithmetic cuts
# without the queue, o.ready on the clock enable).
DEQUANTIZER_CONFIGS = [
    # 200 chunks per density here, 2,000 in `qllm sim --unit oaken_dequantizer`.
    pytest.param({}, 200, id="paper-16x64"),
    pytest.param({"pipeline": 0}, 500, marks=pytest.mark.large, id="paper-16x64-p0"),
    pytest.param({"lanes": 4, "vec_len": 16, "pipeline": 0}, 300, id="4x16-p0"),
    pytest.param({"lanes": 4, "vec_len": 16, "pipeline": 2}, 300, marks=pytest.mark.large,
                 id="4x16-p2"),
    pytest.param({"lanes": 64}, 300, marks=pytest.mark.large, id="64x64"),
    pytest.param({"lanes": 1, "vec_len": 4, "data_bits": 4, "frac_bits": 1, "pipeline": 4},
                 300, marks=pytest.mark.large,
                 id="1x4-d4f1-p4"),
    pytest.param({"lanes": 8, "vec_len": 24, "data_bits": 32, "frac_bits": 16, "pipeline": 6},
                 300, marks=pytest.mark.large,
                 id="8x24-d32f16-p6"),
]


@pytest.mark.sim
@pytest.mark.parametrize("params,chunks", DEQUANTIZER_CONFIGS)
def test_dequantizer_bench(params, chunks):
    metrics = run_testbench("oaken_dequantizer", params, extra_env={"QLLM_CHUNKS": chunks})
    assert metrics["tests"] == 5 + 1 + 5 + 1
    windows = params.get("vec_len", 64) // params.get("lanes", 16)
    for density in (0.0, 0.01, 0.1, 0.5, 1.0):
        run = metrics[f"random_chunks_backpressure[{density}]"]
        assert run["chunks"] == chunks and run["beats"] == chunks * windows
        assert metrics[f"sustained_rate[{density}]"]["beats_per_cycle"] == 1.0


def _decomposer_inner_excludes_t_lo_i(text):
    """Lane 3 computes x - t_lo_i - 1 for x - t_lo_i: x == t_lo_i reads as below the inner
    group (middle instead of inner), and the lower middle shift is off by one."""
    return edit_site(text, r"(assign t_lo_i_diff_3 = \$signed\(i__payload\[63:48\]\) - "
                           r"\$signed\(i__payload\[\d+:\d+\]\));", r"\1 - 17'sh00001;")


def _dequantizer_drops_lane5_sign(text):
    """Lane 5 loses the sign bit of its COO entry (in the issue register)."""
    return edit_site(text, r"(\n\s*i_sign <= )([^;]+);", r"\1(\2) & 16'hffdf;")


def _dequantizer_inner_offset(text):
    """Lane 3 adds 1 to inner elements whatever their sign."""
    return edit_site(text, r"offset_3 = \{ 16'h0000, [^}]+\};", "offset_3 = { 16'h0000, 1'h1 };")


@pytest.mark.sim
@pytest.mark.parametrize("unit,mutation", [
    pytest.param("oaken_decomposer", ("inner-bound", _decomposer_inner_excludes_t_lo_i),
                 marks=pytest.mark.large, id="decomposer-inner-bound"),
    pytest.param("oaken_dequantizer", ("sign5", _dequantizer_drops_lane5_sign),
                 marks=pytest.mark.large, id="dequantizer-sign"),
    pytest.param("oaken_dequantizer", ("inner-offset", _dequantizer_inner_offset),
                 marks=pytest.mark.large, id="dequantizer-inner-offset"),
])
def test_bench_fails_on_broken_rtl(unit, mutation):
    with pytest.raises(BenchFailure):
        run_testbench(unit, {}, extra_env={"QLLM_BEATS": 500, "QLLM_CHUNKS": 100},
                      mutation=mutation)


# --- golden readings the RTL depends on ------------------------------------------------------


def test_misordered_thresholds_follow_the_documented_priority():
    # t_hi_o < t_lo_o: a value above t_hi_o is outer upper whatever t_lo_o says.
    parts = decompose([5, -9, 0], (8, 2, -2, 3), 8, check_order=False)
    assert parts["group"].tolist() == [2, 2, 2]
    assert parts["side"].tolist() == [1, 0, 0]
    assert parts["outlier"].tolist() == [5 - 3, -9 - 8, 0 - 8]
    with pytest.raises(ValueError, match="t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o"):
        decompose([0], (8, 2, -2, 3), 8)



# --- synthesis --------------------------------------------------------------------------------


@pytest.mark.synth
@pytest.mark.parametrize("target", ["ice40", pytest.param("xilinx", marks=pytest.mark.large)])
def test_decomposer_registers_exactly_its_outputs(tmp_path, target):
    from qllm_cores.fpga.yosys import synth

    params = {"lanes": 4, "data_bits": 8, "pipeline": 0}
    source = generate("oaken_decomposer", params, tmp_path / "v")
    result = synth(source, "oaken_decomposer", target, tmp_path / "synth")
    # group 2 + side 1 + inlier 9 + outlier 9 bits per lane, plus o.valid; a flop whose
    # value is constant would be removed, so the count also shows nothing is stuck.
    assert result.metrics["FF"] == 4 * (2 + 1 + 9 + 9) + 1
    assert result.metrics["DSP"] == result.metrics["BRAM"] == 0


@pytest.mark.synth
@pytest.mark.large
def test_dequantizer_synthesizes_with_its_documented_state(tmp_path):
    from qllm_cores.fpga.yosys import synth

    lanes, vec_len, d, f = 4, 16, 8, 4
    m_bits = d + f + 2
    slots, windows = 2, vec_len // lanes
    source = generate("oaken_dequantizer", {"lanes": lanes, "vec_len": vec_len, "data_bits": d,
                                            "frac_bits": f, "pipeline": 0}, tmp_path / "v")
    result = synth(source, "oaken_dequantizer", "xilinx", tmp_path / "synth")
    # A stored header: t_lo_i, t_hi_i, t_hi_o, t_lo_o + 1, three (min + 1/2, d, 3d).
    stored = 3 * d + (d + 1) + 3 * ((m_bits + 1) + m_bits + (m_bits + 2))
    state = (slots * stored + slots            # header registers and their full flags
             + 1 + 1 + 1                       # header / COO write pointers, COO chunk open
             + slots * vec_len * 3             # position maps (outlier, outer, sign)
             + slots * 3                       # busy, last written, final window issued
             + 2 * slots * windows             # complete windows, issuable windows
             + 6 + 1 + 1                       # previous index, its flag, coo_error
             + slots * windows + slots         # read pointer (one-hot window, slot)
             + 2                               # valid chain (issue, output)
             + lanes * (4 + 3) + stored        # issue register: codes, lane flags, header
             + lanes * d                       # output register
             # 3d and d share their bit 0 (one flip-flop each in the slots and the issue
             # register: Yosys merges flip-flops with the same input).
             - 3 * (slots + 1))
    assert result.metrics["FF"] == state
    assert result.metrics["DSP"] == result.metrics["BRAM"] == 0
