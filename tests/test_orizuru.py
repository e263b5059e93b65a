# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""orizuru: parameters, the binary16 comparator, elaboration, benches, mutation, synthesis."""


import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.orizuru import total_order_key
from hdl.fp16 import Fp16TotalOrderCompare
from hdl.orizuru import Orizuru
from verif.runner import BenchFailure, edit_site, run_testbench


@pytest.mark.parametrize("kwargs,error,message", [
    ({"n": 1}, ValueError, r"n must be in range 2\.\.1024, not 1"),
    ({"n": 2048}, ValueError, r"n must be in range 2\.\.1024, not 2048"),
    ({"n": 12}, ValueError, r"n must be a power of two in 2\.\.1024, not 12"),
    ({"k": 0}, ValueError, r"k must be in range 1\.\.16, not 0"),
    ({"n": 8, "k": 9}, ValueError, r"k must be in range 1\.\.8, not 9"),
    ({"width": 32}, ValueError, r"width must be in range 16\.\.16, not 32"),
    ({"structure": "heap"}, ValueError, r"structure must be one of 'tree', 'scan'"),
    ({"n": 16.0}, TypeError, r"n must be an integer, not 16\.0"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        Orizuru(**kwargs)


def test_comparator_is_ieee_total_order():
    specials = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFFFF, 0x0001, 0x8001,
                0x03FF, 0x83FF, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF]
    rng = np.random.default_rng(5)
    pairs = [(a, b) for a in specials for b in specials]
    pairs += [tuple(pair) for pair in rng.integers(0, 1 << 16, (600, 2))]
    dut = Fp16TotalOrderCompare()
    results = []

    async def bench(ctx):
        for a, b in pairs:
            ctx.set(dut.a, int(a))
            ctx.set(dut.b, int(b))
            results.append(ctx.get(dut.gt))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    a, b = np.array(pairs).T
    expected = total_order_key(a) > total_order_key(b)
    np.testing.assert_array_equal(np.array(results, dtype=bool), expected)
    # Ordinary numbers agree with float16 order (and -0 < +0, which float order calls equal).
    finite = np.isfinite(a.astype(np.uint16).view(np.float16)) & np.isfinite(
        b.astype(np.uint16).view(np.float16))
    fa, fb = a.astype(np.uint16).view(np.float16), b.astype(np.uint16).view(np.float16)
    strict = finite & (fa != fb)
    np.testing.assert_array_equal(np.array(results)[strict], (fa > fb)[strict])


BENCH_CONFIGS = [
    pytest.param("orizuru", {}, 5000, id="paper-n16-k2"),
    pytest.param("orizuru", {"n": 2, "k": 2}, 1000, id="n2-k2"),
    pytest.param("orizuru", {"n": 8, "k": 8}, 1000, id="n8-k8"),
    pytest.param("orizuru", {"n": 64, "k": 4}, 300, id="n64-k4"),
    pytest.param("orizuru_scan", {}, 2000, id="scan-baseline-n16-k2"),
]


@pytest.mark.sim
@pytest.mark.parametrize("unit,params,vectors", BENCH_CONFIGS)
def test_bench(unit, params, vectors):
    metrics = run_testbench(unit, params, extra_env={"QLLM_VECTORS": vectors})
    assert metrics["tests"] == 3
    assert metrics["sustained_rate"]["cycles_per_vector"] == params.get("k", 2)


def _min_tree_ties_left(text):
    """The min tree's leaf level copies the max tree's bit instead of its inverse."""
    return edit_site(text, r"(assign init_min_bit_8 = )~ ?([^;]+);", r"\1\2;")


@pytest.mark.sim
def test_bench_fails_on_broken_rtl():
    with pytest.raises(BenchFailure):
        run_testbench("orizuru", {}, extra_env={"QLLM_VECTORS": 300},
                      mutation=("min-leaf", _min_tree_ties_left))
