# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""accllm_sparse_selector: index-driven golden model, parameters, ports, the cocotb bench at
pipeline 0 (the default) and 1."""

import itertools
import re

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.lib import data

from qllm_cores.golden.accllm import prune_2_4, select_by_index, sparse_select
from qllm_cores.hdl.accllm.sparse_selector import AccllmSparseSelector
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench

UNIT = "accllm_sparse_selector"
PAIRS = list(itertools.combinations(range(4), 2))      # the 6 masks of a group of 4

# --- golden model: select_by_index (any indices) against sparse_select (2:4 masks) -----------


def _reference(x, idx1, idx2):
    """Loop form of Fig. 10(c): x1 = x[4g + idx1], x2 = x[4g + idx2]."""
    x1 = [x[4 * g + i] for g, i in enumerate(idx1)]
    x2 = [x[4 * g + i] for g, i in enumerate(idx2)]
    return x1, x2


def test_select_by_index_equals_sparse_select_on_every_mask():
    # Three groups, every combination of the 6 masks: 216 patterns, rows on the first axis.
    x = np.array([11, -7, 0, 127, -128, 5, 64, -1, 3, 2, 1, -2])
    masks = []
    for combo in itertools.product(PAIRS, repeat=3):
        mask = np.zeros(12, dtype=bool)
        for g, pair in enumerate(combo):
            mask[[4 * g + pair[0], 4 * g + pair[1]]] = True
        masks.append(mask)
    masks = np.array(masks)
    sel = sparse_select(np.broadcast_to(x, masks.shape), masks)
    assert (sel.idx1 < sel.idx2).all()
    x1, x2 = select_by_index(x[None, :], sel.idx1, sel.idx2)
    np.testing.assert_array_equal(x1, sel.x1)
    np.testing.assert_array_equal(x2, sel.x2)
    for row in range(len(masks)):
        assert _reference(x, sel.idx1[row], sel.idx2[row]) == (x1[row].tolist(),
                                                                x2[row].tolist())


def test_select_by_index_on_pruned_weights():
    rng = np.random.default_rng(5)
    w = rng.normal(size=(6, 32))
    x = rng.integers(-128, 128, size=32)
    _, mask = prune_2_4(w)
    sel = sparse_select(np.broadcast_to(x, mask.shape), mask)
    x1, x2 = select_by_index(x[None, :], sel.idx1, sel.idx2)
    np.testing.assert_array_equal(x1, sel.x1)
    np.testing.assert_array_equal(x2, sel.x2)


def test_select_by_index_takes_unordered_and_equal_indices_as_they_are():
    x = np.array([10, 20, 30, 40])
    for i, j in itertools.product(range(4), repeat=2):
        x1, x2 = select_by_index(x, [i], [j])
        assert (x1.tolist(), x2.tolist()) == ([x[i]], [x[j]])
        if i > j:
            # Descending indices: the mask's pair in swapped order.
            mask = np.isin(np.arange(4), [i, j])
            sel = sparse_select(x, mask)
            assert (x1.tolist(), x2.tolist()) == (sel.x2.tolist(), sel.x1.tolist())


@pytest.mark.parametrize("args,error,message", [
    (([0, 1, 2], [0], [1]), ValueError, "multiple of 4, not 3"),
    ((5, 0, 1), ValueError, r"at least one dimension"),
    (([0, 1, 2, 3], [4], [0]), ValueError, r"idx1 must hold 2-bit indices \(0\.\.3\), not 4"),
    (([0, 1, 2, 3], [0], [-1]), ValueError, r"idx2 must hold 2-bit indices \(0\.\.3\), not -1"),
    (([0, 1, 2, 3], [0.5], [0]), TypeError, "idx1 must hold integers"),
    (([0] * 8, [0, 1, 2], [0]), ValueError, "must broadcast with the groups of x"),
])
def test_select_by_index_rejects_bad_arguments(args, error, message):
    with pytest.raises(error, match=message):
        select_by_index(*args)


# --- parameter validation -------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,message", [
    ({"groups": 0}, ValueError, r"groups must be in range 1\.\.64, not 0"),
    ({"groups": 65}, ValueError, r"groups must be in range 1\.\.64, not 65"),
    ({"rows": 0}, ValueError, r"rows must be in range 1\.\.64, not 0"),
    ({"rows": 65}, ValueError, r"rows must be in range 1\.\.64, not 65"),
    ({"x_bits": 1}, ValueError, r"x_bits must be in range 2\.\.16, not 1"),
    ({"x_bits": 17}, ValueError, r"x_bits must be in range 2\.\.16, not 17"),
    ({"groups": 2.0}, TypeError, r"groups must be an integer, not 2\.0"),
    ({"rows": "2"}, TypeError, r"rows must be an integer, not '2'"),
    ({"x_bits": True}, TypeError, r"x_bits must be an integer, not True"),
    ({"x_signed": 1}, TypeError, r"x_signed must be a bool, not 1"),
    ({"x_signed": "yes"}, TypeError, r"x_signed must be a bool, not 'yes'"),
    ({"groups": 64, "rows": 64, "x_bits": 9}, ValueError,
     r"rows \* groups \* x_bits must be at most 32768 .*not 64 \* 64 \* 9 = 36864"),
    ({"pipeline": 2}, ValueError, r"pipeline must be in range 0\.\.1, not 2"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.1, not -1"),
    ({"pipeline": "1"}, TypeError, r"pipeline must be an integer, not '1'"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        AccllmSparseSelector(**kwargs)


def test_pipeline_and_latency():
    assert AccllmSparseSelector().pipeline == 0          # the default: it closes timing already
    assert [AccllmSparseSelector(pipeline=p).latency for p in (0, 1)] == [1, 2]


def test_numpy_integers_are_accepted():
    unit = AccllmSparseSelector(groups=np.int64(3), rows=np.uint8(2), x_bits=np.int16(5))
    assert (unit.groups, unit.rows, unit.x_bits) == (3, 2, 5)
    # The largest product allowed: 64 x 64 x 8 (elaboration is tested by hand: ~17 s).
    assert AccllmSparseSelector(groups=64, rows=64, x_bits=8).out_layout.size == 65536


# --- elaboration ----------------------------------------------------------------------------


def test_payload_layouts():
    unit = AccllmSparseSelector(groups=3, rows=2, x_bits=5, x_signed=False)
    i, o = unit.in_layout, unit.out_layout
    assert i["x"].shape == data.ArrayLayout(5, 12)
    assert i["idx1"].shape == i["idx2"].shape == data.ArrayLayout(data.ArrayLayout(2, 3), 2)
    assert o["x1"].shape == o["x2"].shape == data.ArrayLayout(data.ArrayLayout(5, 3), 2)
    signed_unit = AccllmSparseSelector(x_bits=7)
    assert signed_unit.in_layout["x"].shape.elem_shape.signed
    assert signed_unit.out_layout["x1"].shape.elem_shape.elem_shape.signed


@pytest.mark.parametrize("kwargs,in_bits,out_bits", [
    ({}, 4 * 8 + 2 + 2, 2 * 8),
    ({"groups": 3, "rows": 2, "x_bits": 5, "x_signed": False}, 12 * 5 + 2 * 12, 2 * 6 * 5),
    ({"groups": 16, "rows": 16}, 64 * 8 + 2 * 512, 2 * 256 * 8),
])
def test_verilog_ports(kwargs, in_bits, out_bits):
    text = verilog.convert(AccllmSparseSelector(**kwargs), name=UNIT, emit_src=False)
    header = re.search(rf"module {UNIT}\((.*?)\);", text, re.S)
    assert header, f"top module {UNIT} not found"
    ports = {port.strip() for port in header.group(1).split(",")}
    assert ports == {"clk", "rst", "i__valid", "i__ready", "i__payload",
                     "o__valid", "o__ready", "o__payload"}
    assert f"input [{in_bits - 1}:0] i__payload;" in text
    assert f"output [{out_bits - 1}:0] o__payload;" in text


def test_verilog_is_reproducible_and_has_no_paths():
    first = verilog.convert(AccllmSparseSelector(groups=2, rows=3), name=UNIT, emit_src=False)
    second = verilog.convert(AccllmSparseSelector(groups=2, rows=3), name=UNIT, emit_src=False)
    assert first == second
    assert "/work" not in first and "src =" not in first and ".py:" not in first


# --- cocotb bench on Verilator --------------------------------------------------------------

# pipeline 0 (the default) and 1; every configuration runs under random backpressure.
BENCH_CONFIGS = [
    pytest.param({}, None, 3_000, id="default"),
    pytest.param({}, "accllm-tile", 2_000, marks=pytest.mark.large,
                 id="accllm-tile"),
    pytest.param({"groups": 3, "rows": 2, "x_bits": 5, "x_signed": False, "pipeline": 1}, None,
                 3_000, id="g3r2-u5-p1"),
]


@pytest.mark.sim
@pytest.mark.parametrize("params,config,beats", BENCH_CONFIGS)
def test_bench(params, config, beats):
    metrics = run_testbench(UNIT, params, config=config, extra_env={"QLLM_BEATS": beats})
    assert metrics["tests"] == 3
    assert metrics["manifest"]["latency"] == 1 + params.get("pipeline", 0)
    assert metrics["random_masks_backpressure"]["beats"] == beats
    assert metrics["unordered_indices_backpressure"]["beats"] == 16 + beats // 4


def _wrong_arm(text):
    """Row 0, group 0: idx1 = 2 selects input 1 instead of input 2."""
    return edit_site(text, r"(2'h2:\s+x1_r0_g0 = )i__payload\[23:16\];", r"\1i__payload[15:8];")


def _x2_by_idx1(text):
    """Row 0, group 0: the x2 multiplexer is driven by idx1 (bits 33:32) instead of idx2."""
    return edit_site(text, r"casez \(i__payload\[35:34\]\)", "casez (i__payload[33:32])")


@pytest.mark.sim
@pytest.mark.parametrize("mutation", [
    pytest.param(("arm", _wrong_arm), marks=pytest.mark.large, id="wrong-mux-arm"),
    pytest.param(("select", _x2_by_idx1), marks=pytest.mark.large, id="x2-selected-by-idx1")])
def test_bench_fails_on_broken_mux(mutation):
    # Every test of the bench catches it (each sends idx1 = 2 and idx1 != idx2 beats).
    with pytest.raises(BenchFailure, match="3 of 3 cocotb tests failed"):
        run_testbench(UNIT, {}, extra_env={"QLLM_BEATS": 500}, mutation=mutation)
