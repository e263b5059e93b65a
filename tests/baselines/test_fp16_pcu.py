# amaranth: UnusedElaboratable=no
"""fp16_pcu: parameter checks, elaboration and manifest, the lanes against the golden adapter
in Amaranth's simulator, and the cocotb bench on Verilator."""

import json
import re

import numpy as np
import pytest
from amaranth.back import verilog

from qllm_cores.gen import generate
from qllm_cores.golden.baselines.beats import fp16_pcu
from qllm_cores.golden.baselines.fp16_mac import fp16_mac_run
from qllm_cores.hdl.baselines.fp16_mac.fp16_mac import Fp16Mac
from qllm_cores.hdl.baselines.fp16_pcu import Fp16Pcu
from qllm_cores.verif.amaranth_sim import simulate_streams
from qllm_cores.verif.payload import compare_outputs
from qllm_cores.verif.runner import run_testbench
from qllm_cores.verif.baselines.tb_fp16_pcu import directed_beats, random_beats

# --- parameters ------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,message", [
    ({"lanes": 0}, ValueError, r"lanes must be in range 1\.\.64, not 0"),
    ({"lanes": 65}, ValueError, r"lanes must be in range 1\.\.64, not 65"),
    ({"lanes": 16.0}, TypeError, r"lanes must be an integer, not 16\.0"),
    ({"lanes": True}, TypeError, r"lanes must be an integer, not True"),
    ({"lanes": "16"}, TypeError, r"lanes must be an integer, not '16'"),
    ({"pipeline": 3}, ValueError, r"pipeline must be in range 0\.\.2, not 3"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.2, not -1"),
    ({"pipeline": 1.0}, TypeError, r"pipeline must be an integer, not 1\.0"),
])
def test_parameters_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        Fp16Pcu(**kwargs)


def test_defaults_and_range_ends():
    unit = Fp16Pcu()
    assert (unit.lanes, unit.pipeline) == (16, 2)
    assert Fp16Pcu.MAX_PIPELINE == Fp16Mac.MAX_PIPELINE
    assert len(unit.macs) == 16 and all(isinstance(mac, Fp16Mac) for mac in unit.macs)
    assert unit.in_layout.size == 16 + 16 * 16 + 2 and unit.out_layout.size == 16 * 32
    for lanes in (1, 64):
        assert Fp16Pcu(lanes=lanes).out_layout.size == 32 * lanes


@pytest.mark.parametrize("pipeline", range(Fp16Pcu.MAX_PIPELINE + 1))
def test_latency_is_the_lanes(pipeline, tmp_path):
    unit = Fp16Pcu(pipeline=pipeline)
    assert unit.latency == Fp16Mac(pipeline=pipeline).latency == 2 + pipeline
    assert all(mac.pipeline == pipeline for mac in unit.macs)
    generate("fp16_pcu", {"pipeline": pipeline}, tmp_path)
    manifest = json.loads((tmp_path / "fp16_pcu.json").read_text())
    assert manifest["latency"] == unit.latency
    assert manifest["shared_modules"] == [f"fp16_pcu_lane_p{pipeline}"]


# --- elaboration -----------------------------------------------------------------------------


def _ports(text, name):
    header = re.search(rf"module {name}\((.*?)\);", text, re.S)
    assert header, f"top module {name} not found"
    return {port.strip() for port in header.group(1).split(",")}


STREAM_PORTS = {"clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready",
                "o__payload"}


def test_verilog_ports_and_top_name():
    # Amaranth's converter on the component itself (lanes inlined as submodules): 2 lanes.
    text = verilog.convert(Fp16Pcu(lanes=2), name="fp16_pcu", emit_src=False)
    assert _ports(text, "fp16_pcu") == STREAM_PORTS
    assert re.search(r"input \[49:0\] i__payload;", text)     # 16 + 2 x 16 + 2
    assert re.search(r"output \[63:0\] o__payload;", text)    # 2 x 32
    assert "/work" not in text and "src =" not in text


def test_generated_verilog_and_manifest(tmp_path):
    # The generator emits the lane once as a module and instantiates it per lane.
    path = generate("fp16_pcu", {}, tmp_path)
    text = path.read_text()
    assert _ports(text, "fp16_pcu") == STREAM_PORTS
    assert re.search(r"input \[273:0\] i__payload;", text)    # 16 + 16 x 16 + 2
    assert re.search(r"output \[511:0\] o__payload;", text)   # 16 x 32
    assert len(re.findall(r"^module fp16_pcu_lane_p2\(", text, re.M)) == 1
    assert len(re.findall(r"^\s*fp16_pcu_lane_p2 lane\d+ \(", text, re.M)) == 16
    assert "/work" not in text
    manifest = json.loads((tmp_path / "fp16_pcu.json").read_text())
    assert manifest["params"] == {"lanes": 16, "pipeline": 2}
    fields = manifest["ports"]["i"]["payload"]["fields"]
    assert [(f["name"], f["offset"]) for f in fields] == [
        ("act", 0), ("wgt", 16), ("first", 272), ("last", 273)]
    wgt = fields[1]["shape"]
    assert (wgt["kind"], wgt["length"], wgt["elem"]["width"]) == ("array", 16, 16)
    (acc,) = manifest["ports"]["o"]["payload"]["fields"]
    assert (acc["name"], acc["shape"]["kind"], acc["shape"]["length"],
            acc["shape"]["elem"]["width"]) == ("acc", "array", 16, 32)
    assert (manifest["result"], manifest["results_per_cycle"]) == ("MAC", 16.0)
    assert manifest["latency"] == 4


# --- golden adapter and stimulus ------------------------------------------------------------


def test_adapter_is_fp16_mac_per_lane():
    params = {"lanes": 5, "pipeline": 2}
    inputs = fp16_pcu.stimulus(np.random.default_rng(2), params, 300)
    i = inputs["i"]
    acc = fp16_pcu.expected(params, inputs)["o"]["acc"]
    assert acc.shape == (int(i["last"].sum()), 5)
    for j in range(5):
        lane = fp16_mac_run(i["act"], i["wgt"][:, j], i["first"], i["last"])
        assert fp16_pcu.same("acc", acc[:, j], lane).all()
    with pytest.raises(ValueError, match=r"wgt must have shape \(beats, lanes\) = \(300, 4\)"):
        fp16_pcu.expected({"lanes": 4}, inputs)


def test_bench_stimulus_covers_the_lanes():
    lanes = 16
    fields = directed_beats(lanes)
    assert fields["wgt"].shape == (len(fields["act"]), lanes)
    # One beat carries NaN, infinities, -0 and subnormals in different lanes.
    beat = fields["wgt"][0]
    assert {0x7E00, 0x7C00, 0xFC00, 0x8000, 0x0001} <= set(beat.tolist()) | {
        int(fields["act"][0])}
    acc = fp16_pcu.expected({"lanes": lanes}, {"i": fields})["o"]["acc"]
    assert np.unique(acc, axis=1).shape[1] == lanes     # the lanes do differ
    fields = random_beats(np.random.default_rng(4), 2000, lanes)
    assert len(fields["act"]) == 2000 and fields["wgt"].shape == (2000, lanes)
    assert fields["last"][-1] == 1 and 0 < fields["first"].sum() < fields["last"].sum()


# --- Amaranth simulation -----------------------------------------------------------------------


@pytest.mark.parametrize("lanes,pipeline", [(3, 0), (2, 2)])
def test_lanes_in_lockstep_under_backpressure(lanes, pipeline):
    # Amaranth's simulator (the lanes as submodules), random gaps on both streams: every lane
    # of every result is fp16_mac's, no beat lost or duplicated, the stream rules kept.
    params = {"lanes": lanes, "pipeline": pipeline}
    rng = np.random.default_rng([7, lanes, pipeline])
    inputs = fp16_pcu.stimulus(rng, params, 200)
    result = simulate_streams(Fp16Pcu(**params), inputs, rng=rng, valid_probability=0.7,
                              ready_probability=0.5)
    assert result.problems == []
    expected = fp16_pcu.expected(params, inputs)
    assert compare_outputs(result.outputs, expected, fp16_pcu.equal) == []
    assert len(result.outputs["o"]["acc"]) == len(expected["o"]["acc"]) > 10


# --- cocotb bench on Verilator --------------------------------------------------------------


@pytest.mark.sim
@pytest.mark.parametrize("pipeline,lanes", [
    # make test: 4 lanes at the default depth (the lane's pipeline=0 is benched by fp16_mac's
    # tests); 16 lanes at both depths in make test-large and `qllm sim`.
    pytest.param(Fp16Pcu.MAX_PIPELINE, 4, id="default-4lanes"),
    pytest.param(0, 16, marks=pytest.mark.large, id="pipeline0"),
    pytest.param(Fp16Pcu.MAX_PIPELINE, 16, marks=pytest.mark.large, id="default")])
def test_bench(pipeline, lanes):
    # Random backpressure (valid p = 0.7, ready p = 0.6; 0.9/0.8 in directed_special_cases),
    # every lane of every result compared.
    metrics = run_testbench("fp16_pcu", {"pipeline": pipeline, "lanes": lanes},
                            extra_env={"QLLM_BEATS": 3_000})
    assert metrics["tests"] == 3
    assert metrics["random_dot_products_backpressure"]["beats"] == 3_000
    assert metrics["random_dot_products_backpressure"]["macs"] == 3_000 * lanes
    assert metrics["directed_special_cases"]["lane_results"] > 3_000 * lanes
    assert metrics["full_rate_latency"]["cycles_per_beat"] == 1.0
    assert metrics["manifest"]["latency"] == Fp16Pcu(pipeline=pipeline).latency
    assert metrics["full_rate_latency"]["latency"] == Fp16Pcu(pipeline=pipeline).latency
