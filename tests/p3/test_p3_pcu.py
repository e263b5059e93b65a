# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""p3_pcu: parameters, ports, what is shared between the PEs, every pipeline depth with both
accumulator-set counts in Amaranth's simulator, the cocotb bench, a seeded bug."""

import json
import re

import numpy as np
import pytest
from amaranth.back import verilog

from qllm_cores.gen import UNITS, generate
from qllm_cores.hdl.p3.pcu import DEFAULT_PIPELINE, PIPELINE_CUTS, P3Pcu
from qllm_cores.verif.amaranth_sim import simulate_streams
from qllm_cores.verif.bench import golden_model
from qllm_cores.verif.payload import compare_outputs
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench


@pytest.mark.parametrize("kwargs,error,message", [
    ({"pes": 0}, ValueError, r"pes must be in range 1\.\.64, not 0"),
    ({"pes": 65}, ValueError, r"pes must be in range 1\.\.64, not 65"),
    ({"pes": 16.0}, TypeError, r"pes must be an integer, not 16\.0"),
    ({"reuse": 3}, ValueError, r"reuse must be in range 1\.\.2, not 3"),
    ({"reuse": 0}, ValueError, r"reuse must be in range 1\.\.2, not 0"),
    ({"reuse": True}, TypeError, r"reuse must be an integer, not True"),
    ({"pipeline": 9}, ValueError, r"pipeline must be in range 0\.\.8, not 9"),
    ({"pipeline": "3"}, TypeError, r"pipeline must be an integer, not '3'"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        P3Pcu(**kwargs)


def test_defaults_and_latency():
    assert UNITS["p3_pcu"].defaults == {"pes": 16, "reuse": 1, "pipeline": DEFAULT_PIPELINE}
    assert [P3Pcu(pipeline=p).latency for p in range(len(PIPELINE_CUTS) + 1)] == [
        2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert P3Pcu().latency == 10


@pytest.mark.parametrize("reuse", [1, 2])
def test_ports_follow_the_spec(reuse):
    text = verilog.convert(P3Pcu(pes=2, reuse=reuse, pipeline=0), name="p3_pcu",
                           emit_src=False)
    header = re.search(r"module p3_pcu\((.*?)\);", text, re.S)
    assert {p.strip() for p in header.group(1).split(",")} == {
        "clk", "rst", "i__valid", "i__ready", "i__payload", "o__valid", "o__ready", "o__payload"}
    # act 32 + wgt 2 x 16 + formats 2 + sv_sel 2 x 2 + zp 2 x 4 + first, last + slot (0 or 1).
    slot = reuse - 1
    assert f"input [{32 + 32 + 2 + 4 + 8 + 2 + slot - 1}:0] i__payload;" in text
    # acc 2 x 32 + overflow 2 + nan 2 + slot.
    assert f"output [{64 + 2 + 2 + slot - 1}:0] o__payload;" in text


def _names(unit):
    text = verilog.convert(unit, name="p3_pcu", emit_src=False)
    return set(re.findall(r"\b(?:wire|reg) (?:signed )?(?:\[[0-9:]+\] )?\\?([a-z0-9_]+)", text))


def test_activation_decoders_and_booth_digits_are_shared():
    """Four activation decoders and four Booth recoders for 8 PEs (at the default depth one
    recoder per way and group of four PEs, from the group's copy of the decoded activations);
    32 weight decoders and multipliers."""
    for pipeline, recoders in ((0, 4), (DEFAULT_PIPELINE, 8)):
        names = _names(P3Pcu(pes=8, pipeline=pipeline))
        assert {n for n in names if n.startswith("m5_")} == {f"m5_{w}" for w in range(4)}
        assert len({n for n in names if n.startswith("booth_digits_")}) == recoders
        assert len({n for n in names if re.fullmatch(r"bitmod_\d+_\d+", n)}) == 32
        assert len({n for n in names if re.fullmatch(r"prod_\d+_\d+", n)}) == 32
        if pipeline:
            # The broadcast cut's copies: one of each decoded activation field per 4 PEs.
            assert {n for n in names if re.fullmatch(r"bc_neg_0_\d", n)} == {
                "bc_neg_0_0", "bc_neg_0_1"}


@pytest.mark.parametrize("pipeline", range(len(PIPELINE_CUTS) + 1))
@pytest.mark.parametrize("reuse", [1, 2])
def test_every_depth_matches_the_golden_model(pipeline, reuse):
    """Amaranth's simulator, 4 PEs (the cocotb bench runs 16), random gaps on both streams."""
    params = {"pes": 4, "reuse": reuse, "pipeline": pipeline}
    model = golden_model("p3_pcu")
    rng = np.random.default_rng([pipeline, reuse])
    inputs = model.stimulus(rng, params, 250)
    result = simulate_streams(P3Pcu(**params), inputs, rng=rng, valid_probability=0.7,
                              ready_probability=0.6)
    assert result.problems == []
    expected = model.expected(params, inputs)
    assert len(expected["o"]["acc"]) >= 5
    assert compare_outputs(result.outputs, expected, model.equal) == []


def test_manifest_gives_the_latency(tmp_path):
    generate("p3_pcu", {"pes": 2, "pipeline": 1}, tmp_path)
    manifest = json.loads((tmp_path / "p3_pcu.json").read_text())
    assert manifest["latency"] == 3


@pytest.mark.sim
@pytest.mark.parametrize("params", [
    # make test: 4 PEs (a quarter of the build); the paper's 16 in make test-large and in
    # `qllm sim --unit p3_pcu [--config p3-pcu-te]`.
    pytest.param({"pes": 4, "reuse": 2}, id="te-default-4pes"),
    pytest.param({"pes": 4, "pipeline": 0}, id="pipeline0-4pes"),
    pytest.param({"reuse": 2}, id="te-default", marks=pytest.mark.large),
    pytest.param({"pipeline": 0}, id="pipeline0", marks=pytest.mark.large),
])
def test_bench(params):
    metrics = run_testbench("p3_pcu", params, extra_env={"QLLM_BEATS": 4_000})
    assert metrics["tests"] == 3
    spec = {**UNITS["p3_pcu"].defaults, **params}
    assert metrics["manifest"]["latency"] == P3Pcu(**spec).latency
    # 2 activation formats x (4 special-value selects + 4 zero points) x 256 codes, a weight
    # code per PE.
    assert metrics["exhaustive_single_products"]["results"] == 2 * 8 * 256
    assert metrics["exhaustive_single_products"]["products"] == 2 * 8 * 256 * spec["pes"]
    run = metrics["random_dot_products_backpressure"]
    assert run["beats"] == 4_000 and run["results"] > 200
    if spec["reuse"] == 2:
        assert min(run["slots"]) > 100


@pytest.mark.sim
@pytest.mark.large
def test_bench_fails_on_broken_rtl():
    """A seeded bug: PE 7's INT4 decoder adds the zero point (``q + zp``)."""
    def int4_adds(text):
        return edit_site(text, r"(assign int4_7_1 = [^;]*?) - ([^;]+);", r"\1 + \2;")
    with pytest.raises(BenchFailure):
        run_testbench("p3_pcu", {"pipeline": 0}, extra_env={"QLLM_BEATS": 2_000},
                      mutation=("int4-adds", int4_adds))
