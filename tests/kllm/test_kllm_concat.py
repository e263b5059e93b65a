# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""kllm_concat: golden model, parameter checks, elaboration, and the cocotb bench."""

import re

import numpy as np
import pytest
from amaranth.back import verilog

from qllm_cores.golden.kllm import concat_indices, split_indices
from qllm_cores.hdl.kllm.concat import KllmConcat
from qllm_cores.gen import generate
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench

# --- golden model (from KLLM section III-B: activation index high, weight index low) ---------


@pytest.mark.parametrize("a_bits,b_bits", [(1, 1), (1, 2), (3, 4), (4, 4), (8, 8), (8, 1)])
def test_golden_concat_is_bijective_and_non_commutative(a_bits, b_bits):
    a, b = np.meshgrid(np.arange(1 << a_bits), np.arange(1 << b_bits), indexing="ij")
    y = concat_indices(a, b, a_bits, b_bits)
    # Bijective onto 0 .. 2**(a_bits+b_bits) - 1.
    assert sorted(y.ravel().tolist()) == list(range(1 << (a_bits + b_bits)))
    a_back, b_back = split_indices(y, a_bits, b_bits)
    np.testing.assert_array_equal(a_back, a)
    np.testing.assert_array_equal(b_back, b)


def test_golden_concat_matches_string_concatenation():
    # Independent formulation: the binary digits of a followed by those of b.
    rng = np.random.default_rng(7)
    a = rng.integers(0, 8, 500)
    b = rng.integers(0, 16, 500)
    y = concat_indices(a, b, 3, 4)
    expected = [int(format(x, "03b") + format(z, "04b"), 2) for x, z in zip(a, b)]
    assert y.tolist() == expected
    # Non-commutative: swapping the operands' roles changes the index when a != b.
    differ = a != b
    assert np.all(concat_indices(b[differ] % 8, a[differ], 3, 4) != y[differ])


def test_golden_concat_rejects_out_of_range_indices():
    with pytest.raises(ValueError, match="a must hold 4-bit"):
        concat_indices([16], [0], 4, 4)
    with pytest.raises(ValueError, match="b must hold 2-bit"):
        concat_indices([0], [-1], 4, 2)
    with pytest.raises(TypeError, match="integers"):
        concat_indices([0.5], [0], 4, 4)


# --- parameter validation -------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,message", [
    ({"a_bits": 0}, ValueError, r"a_bits must be in range 1\.\.8, not 0"),
    ({"a_bits": 9}, ValueError, r"a_bits must be in range 1\.\.8, not 9"),
    ({"b_bits": 0}, ValueError, r"b_bits must be in range 1\.\.8, not 0"),
    ({"b_bits": 9}, ValueError, r"b_bits must be in range 1\.\.8, not 9"),
    ({"lanes": 0}, ValueError, r"lanes must be in range 1\.\.4096, not 0"),
    ({"lanes": 4097}, ValueError, r"lanes must be in range 1\.\.4096, not 4097"),
    ({"a_bits": 4.0}, TypeError, r"a_bits must be an integer, not 4\.0"),
    ({"lanes": "16"}, TypeError, r"lanes must be an integer, not '16'"),
    ({"b_bits": True}, TypeError, r"b_bits must be an integer, not True"),
    ({"a_bits": 8, "b_bits": 8, "lanes": 4096}, ValueError,
     r"lanes \* \(a_bits \+ b_bits\) must be at most 65535 .*, not 4096 \* \(8 \+ 8\) = 65536"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.2, not -1"),
    ({"pipeline": 3}, ValueError, r"pipeline must be in range 0\.\.2, not 3"),
    ({"pipeline": 1.0}, TypeError, r"pipeline must be an integer, not 1\.0"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        KllmConcat(**kwargs)


@pytest.mark.parametrize("pipeline", [0, 1, 2])
def test_latency_follows_the_pipeline_depth(pipeline, tmp_path):
    import json

    unit = KllmConcat(pipeline=pipeline)
    assert unit.latency == 1 + pipeline
    assert KllmConcat().pipeline == 0
    generate("kllm_concat", {"pipeline": pipeline}, tmp_path)
    assert json.loads((tmp_path / "kllm_concat.json").read_text())["latency"] == 1 + pipeline


def test_numpy_integers_are_accepted():
    unit = KllmConcat(a_bits=np.int64(3), lanes=np.uint16(8))
    assert (unit.a_bits, unit.lanes) == (3, 8)
    assert "output [55:0] o__payload;" in verilog.convert(unit, name="kllm_concat",
                                                            emit_src=False)


# --- elaboration ----------------------------------------------------------------------------


def test_verilog_ports_follow_the_spec():
    text = verilog.convert(KllmConcat(a_bits=3, b_bits=4, lanes=5), name="kllm_concat",
                           emit_src=False)
    header = re.search(r"module kllm_concat\((.*?)\);", text, re.S)
    assert header, "top module kllm_concat not found"
    ports = {port.strip() for port in header.group(1).split(",")}
    assert ports == {"clk", "rst", "i__valid", "i__ready", "i__payload",
                     "o__valid", "o__ready", "o__payload"}
    assert re.search(r"input \[34:0\] i__payload;", text)   # 5 x (3 + 4)
    assert re.search(r"output \[34:0\] o__payload;", text)  # 5 x 7


def test_verilog_is_reproducible_and_has_no_paths():
    first = verilog.convert(KllmConcat(), name="kllm_concat", emit_src=False)
    second = verilog.convert(KllmConcat(), name="kllm_concat", emit_src=False)
    assert first == second
    assert "/work" not in first and "src =" not in first and ".py:" not in first


# --- cocotb bench on Verilator --------------------------------------------------------------

BENCH_CONFIGS = [
    pytest.param({}, 3_000, id="default-a4b4x16"),
    pytest.param({"a_bits": 3, "b_bits": 4, "lanes": 16}, 3_000, marks=pytest.mark.large,
                 id="kllm-a3"),
    pytest.param({"a_bits": 1, "b_bits": 8, "lanes": 1}, 3_000, id="a1b8x1"),
    # The deepest pipeline (the default, 0, runs in every other configuration).
    pytest.param({"a_bits": 8, "b_bits": 1, "lanes": 3, "pipeline": 2}, 3_000,
                 id="a8b1x3-pipeline2"),
    pytest.param({"a_bits": 4, "b_bits": 4, "lanes": 4096}, 100, marks=pytest.mark.large,
                 id="kllm-lane-4096"),
]


@pytest.mark.sim
@pytest.mark.parametrize("params,beats", BENCH_CONFIGS)
def test_bench(params, beats):
    metrics = run_testbench("kllm_concat", params, extra_env={"QLLM_BEATS": beats})
    assert metrics["tests"] == 2
    assert metrics["random_beats_backpressure"]["beats"] == beats


def _swap_first_lane(text):
    """Swap activation and weight index in lane 0: the non-commutativity the paper needs."""
    # Lane 0 is the last (least significant) pair of the concatenation: "a[0], b[0] };".
    return edit_site(text, r"(i__payload\[[0-9:]+\]),(\s+)(i__payload\[[0-9:]+\]) \};",
                     r"\3,\2\1 };")


def _always_ready(text):
    """Accept input even while the output register is full: beats get overwritten (lost)."""
    return edit_site(text, r"assign i__ready = [^;]+;", "assign i__ready = 1'h1;", sites=None)


@pytest.mark.sim
@pytest.mark.parametrize("mutation", [
    pytest.param(("swap", _swap_first_lane), id="swapped-operands"),
    pytest.param(("drop", _always_ready), marks=pytest.mark.large, id="lost-beats")])
def test_bench_fails_on_broken_rtl(mutation):
    with pytest.raises(BenchFailure):
        run_testbench("kllm_concat", {}, extra_env={"QLLM_BEATS": 2_000}, mutation=mutation)


# --- synthesis -------------------------------------------------------------------------------


@pytest.mark.synth
@pytest.mark.parametrize("target", ["ice40", "ecp5", "xilinx", "cmos"])
def test_synthesis_keeps_one_flop_per_output_bit(tmp_path, target):
    from qllm_cores.fpga.yosys import synth

    params = {"a_bits": 3, "b_bits": 4, "lanes": 16}
    source = generate("kllm_concat", params, tmp_path / "v")
    result = synth(source, "kllm_concat", target, tmp_path / "synth")
    # the contract: the output is registered: lanes x (a_bits + b_bits) payload bits plus o.valid.
    flops = 16 * 7 + 1
    if target == "cmos":
        assert result.metrics["uncosted_cells"] == 0
        assert sum(n for cell, n in result.cell_counts.items() if "DFF" in cell) == flops
        assert result.metrics["transistors"] >= 16 * flops
    else:
        assert result.metrics["FF"] == flops
        # Concatenation is wiring: only the handshake needs logic.
        assert result.metrics["LUT"] <= 4
        assert result.metrics["DSP"] == result.metrics["BRAM"] == 0


@pytest.mark.sim
@pytest.mark.large
def test_waves_on_request_only():
    from pathlib import Path

    from qllm_cores.verif.runner import wave_format

    import os

    params = {"a_bits": 2, "b_bits": 2, "lanes": 1}
    before = os.environ.get("WAVES")
    quiet = run_testbench("kllm_concat", params, testcase="corner_beats_full_rate", waves=False)
    assert not list(Path(quiet["run_dir"]).glob("dump.*"))
    traced = run_testbench("kllm_concat", params, testcase="corner_beats_full_rate", waves=True)
    dump = Path(traced["run_dir"]) / f"dump.{wave_format()}"
    assert dump.is_file() and dump.stat().st_size > 0
    # The request does not leak into later runs of this process (pytest-xdist workers).
    assert os.environ.get("WAVES") == before
