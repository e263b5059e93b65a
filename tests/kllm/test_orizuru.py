# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""orizuru: parameters, the binary16 comparator, every pipeline depth, benches, mutation."""


import numpy as np
import pytest
from amaranth.sim import Simulator

from qllm_cores.gen.verilog import convert
from qllm_cores.golden.kllm.orizuru import orizuru_beats, total_order_key
from qllm_cores.hdl.common.fp16 import Fp16TotalOrderCompare
from qllm_cores.hdl.kllm.orizuru.orizuru import (DEFAULT_PIPELINES, MAX_PIPELINES, Orizuru, OrizuruScan,
    cycles_per_vector)
from qllm_cores.hdl.kllm.orizuru.units import settle_cycles, unit_levels
from qllm_cores.verif.kllm.orizuru_sim import simulate
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench


@pytest.mark.parametrize("kwargs,error,message", [
    ({"n": 1}, ValueError, r"n must be in range 2\.\.4096, not 1"),
    ({"n": 8192}, ValueError, r"n must be in range 2\.\.4096, not 8192"),
    ({"n": 2048, "structure": "tree"}, ValueError,
     r"n must be in range 2\.\.1024 for structure='tree', not 2048 .*structure='units'"),
    ({"n": 2048, "structure": "unrolled"}, ValueError,
     r"n must be in range 2\.\.1024 for structure='unrolled'"),
    ({"n": 2048, "k": 65}, ValueError, r"k must be in range 1\.\.64, not 65"),
    ({"n": 12}, ValueError, r"n must be a power of two in 2\.\.4096, not 12"),
    ({"k": 0}, ValueError, r"k must be in range 1\.\.16, not 0"),
    ({"n": 8, "k": 9}, ValueError, r"k must be in range 1\.\.8, not 9"),
    ({"width": 32}, ValueError, r"width must be in range 16\.\.16, not 32"),
    ({"structure": "heap"}, ValueError,
     r"structure must be one of 'tree', 'unrolled', 'scan', 'units'"),
    ({"structure": "units", "pipeline": 3}, ValueError, r"pipeline must be in range 0\.\.2, not 3"),
    ({"n": 16.0}, TypeError, r"n must be an integer, not 16\.0"),
    ({"pipeline": 3}, ValueError, r"pipeline must be in range 0\.\.2, not 3"),
    ({"structure": "unrolled", "pipeline": 4}, ValueError,
     r"pipeline must be in range 0\.\.3, not 4"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.2, not -1"),
    ({"pipeline": 1.0}, TypeError, r"pipeline must be an integer, not 1\.0"),
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


# --- every pipeline depth, in Amaranth's simulator ------------------------------------------


def _vectors(n, count, rng):
    """Random bit patterns, few-valued vectors (many ties) and float16 normals; the first vector
    all equal."""
    kinds = rng.integers(0, 3, count)
    raw = rng.integers(0, 1 << 16, (count, n))
    ties = rng.integers(0, 3, (count, n)) * 0x0400 + 0x3C00
    normal = rng.standard_normal((count, n)).astype(np.float16).view(np.uint16)
    xs = np.where(kinds[:, None] == 0, raw, np.where(kinds[:, None] == 1, ties, normal))
    xs[0] = 0x3C00
    return xs.astype(np.int64)


# pipeline=0 and the default run in the cocotb benches below as well.
SIM_CONFIGS = [(2, 1), (2, 2), (4, 3), (8, 2), (8, 8), (16, 5), (32, 3)]
#: The composition of 16-input units: one level, two (a merge unit of 2 and of 16), and three
#: levels of units (leaf units of 2 under two levels of 16-input merge units).
UNITS_SIM_CONFIGS = [(16, 5), (32, 7), (64, 64)]
#: The units' larger compositions (make test-large): three and four levels of units.
UNITS_SIM_CONFIGS_LARGE = [(256, 20), (512, 3)]


#: (structure, pipeline) of every circuit; pipeline=0 and the defaults also run in the cocotb
#: benches below.
DEPTHS = ([(s, p) for s in ("tree", "units") for p in range(MAX_PIPELINES[s] + 1)]
          + [(s, p) for s in ("unrolled", "scan") for p in range(MAX_PIPELINES[s] + 1)])


@pytest.mark.parametrize("structure,pipeline", [d for d in DEPTHS if d != ("unrolled", 0)
                                                and d != ("scan", 0)])
def test_every_depth_matches_golden_under_backpressure(structure, pipeline):
    _every_depth_matches_golden(structure, pipeline,
                                UNITS_SIM_CONFIGS if structure == "units" else SIM_CONFIGS)


@pytest.mark.large
@pytest.mark.parametrize("pipeline", range(MAX_PIPELINES["units"] + 1))
def test_every_depth_of_larger_units_matches_golden_under_backpressure(pipeline):
    _every_depth_matches_golden("units", pipeline, UNITS_SIM_CONFIGS_LARGE)


def _every_depth_matches_golden(structure, pipeline, configs):
    rng = np.random.default_rng([pipeline, DEPTHS.index((structure, pipeline))])
    for n, k in configs:
        dut = Orizuru(n=n, k=k, structure=structure, pipeline=pipeline)
        xs = _vectors(n, 12, rng)
        beats, _ = simulate(dut, xs, rng, valid_probability=0.7, ready_probability=0.6)
        expected = orizuru_beats(xs, k)
        for field, values in beats.items():
            assert values == [int(v) for v in expected[field]], (n, k, field)


@pytest.mark.parametrize("structure,pipeline", DEPTHS)
def test_every_depth_keeps_its_cycles_per_vector_and_latency(structure, pipeline):
    rng = np.random.default_rng(3)
    shapes = [(16, 2), (8, 3), (4, 1)] + ([(64, 3), (32, 2)] if structure == "units" else [])
    for n, k in shapes:
        dut = Orizuru(n=n, k=k, structure=structure, pipeline=pipeline)
        xs = _vectors(n, 16, rng)
        beats, cycles = simulate(dut, xs, rng, valid_probability=1, ready_probability=1)
        assert cycles["o"][0] - cycles["i"][0] == dut.latency
        firsts = cycles["o"][::k]
        assert np.diff(firsts).tolist() == [dut.cycles_per_vector] * (len(xs) - 1), (n, k)
        if structure == "units":
            # A pop every S + 2 cycles (the taking edge, the refill of the popped leaf, the top
            # unit's settling), the next vector accepted the cycle after the last beat.
            gap = settle_cycles(unit_levels(n)[-1], pipeline) + 2
            within = [b - a for a, b in zip(cycles["o"], cycles["o"][1:])]
            for j, step in enumerate(within):
                assert step == (gap if (j + 1) % k else dut.latency + 1), (n, k, j)
            assert dut.cycles_per_vector == dut.latency + (k - 1) * gap + 1
        elif structure != "tree":
            # One beat per cycle from the first to the last: k cycles per vector back to back.
            assert dut.cycles_per_vector == k
            assert cycles["o"] == list(range(cycles["o"][0], cycles["o"][0] + len(xs) * k))
        else:
            # A pop every log2(n) + pipeline cycles (the path maintenance), the next vector's
            # first beat right after the last (its initialisation overlapped).
            gap = n.bit_length() - 1 + pipeline
            within = [b - a for a, b in zip(cycles["o"], cycles["o"][1:])]
            for j, step in enumerate(within):
                assert step == (gap if (j + 1) % k else
                                 dut.cycles_per_vector - (k - 1) * gap), (n, k, j)


@pytest.mark.parametrize("structure,n,k,pipeline,latency", [
    ("tree", 16, 2, 0, 6), ("tree", 16, 2, 1, 6), ("tree", 16, 2, 2, 6), ("tree", 2, 1, 1, 3),
    ("tree", 1024, 64, 2, 12),
    ("unrolled", 16, 2, 0, 1), ("unrolled", 16, 2, 1, 2), ("unrolled", 16, 2, 2, 4),
    ("unrolled", 16, 2, 3, 7), ("scan", 16, 2, 3, 8), ("scan", 16, 2, 2, 4),
    ("unrolled", 16, 4, 3, 15), ("unrolled", 16, 1, 3, 4), ("unrolled", 2, 2, 3, 1),
    ("unrolled", 2, 2, 1, 1), ("unrolled", 1024, 2, 3, 19), ("scan", 1024, 2, 3, 20),
    # Units: every level settles (S cycles: its register cuts); a merge level loads two
    # cycles after its children settle (their valid registered, then the load).
    ("units", 16, 2, 2, 5), ("units", 16, 2, 0, 2), ("units", 32, 2, 2, 8),
    ("units", 2048, 20, 2, 16), ("units", 4096, 20, 2, 17), ("units", 4096, 20, 1, 11),
    ("units", 4096, 20, 0, 8),
])
def test_latency_attribute(structure, n, k, pipeline, latency):
    assert Orizuru(n=n, k=k, structure=structure, pipeline=pipeline).latency == latency


@pytest.mark.parametrize("n,k,pipeline,cycles", [
    # 1 + (k - 1) (log2 n + pipeline), at least log2 n + 2 (acceptance, initialisation, handover).
    (16, 2, 0, 6), (16, 2, 1, 6), (16, 2, 2, 7), (16, 5, 2, 25), (16, 1, 1, 6), (2, 2, 1, 3),
    (2, 1, 0, 3), (1024, 20, 1, 210),
])
def test_tree_cycles_per_vector(n, k, pipeline, cycles):
    assert cycles_per_vector(n, k, "tree", pipeline) == cycles
    assert Orizuru(n=n, k=k, pipeline=pipeline).cycles_per_vector == cycles


@pytest.mark.parametrize("n,k,pipeline,cycles", [
    # latency + (k - 1) pop periods + the input beats of the next vector (n / 1024 above 1024).
    (4096, 20, 2, 17 + 19 * 6 + 4), (2048, 64, 1, 11 + 63 * 4 + 2), (16, 2, 2, 5 + 6 + 1),
    (32, 3, 0, 5 + 2 * 3 + 1),
])
def test_units_cycles_per_vector(n, k, pipeline, cycles):
    assert cycles_per_vector(n, k, "units", pipeline) == cycles
    assert Orizuru(n=n, k=k, structure="units", pipeline=pipeline).cycles_per_vector == cycles


@pytest.mark.parametrize("n,pipeline", [(16, 1), (32, 0), (256, 2),
                                        pytest.param(4096, 1, marks=pytest.mark.large)])
def test_units_verilog_has_no_zero_width_wires(n, pipeline):
    # Amaranth writes a zero-width signal as [-1:0], which Yosys reads as two bits (an
    # internal assertion in synth_ecp5).
    text = convert(Orizuru(n=n, k=2, structure="units", pipeline=pipeline), "orizuru")
    assert "[-1:0]" not in text


def test_units_refill_needs_children_no_slower_than_parents(monkeypatch):
    # A merge unit refills a popped leaf from the child's root without waiting for the child's
    # valid, relying on every child settling no slower than its parent. With the remainder at
    # the top (a 2-input merge unit, S = 1, over two 16-input units, S = 4) the refill reads
    # a child that has not settled, and the outputs go wrong: the arrangement matters.
    import qllm_cores.hdl.kllm.orizuru.units as units
    rng = np.random.default_rng(9)
    xs = _vectors(32, 8, rng)
    expected = orizuru_beats(xs, 6)
    beats, _ = simulate(Orizuru(n=32, k=6, structure="units"), xs, rng, 1, 1)
    assert beats["max_index"] == [int(v) for v in expected["max_index"]]
    monkeypatch.setattr(units, "unit_levels", lambda n: [4, 1])
    beats, _ = simulate(Orizuru(n=32, k=6, structure="units"), xs, rng, 1, 1)
    assert beats["max_index"] != [int(v) for v in expected["max_index"]]


def test_unit_levels_put_the_remainder_at_the_leaves():
    # A parent never settles faster than its children, so the prefetch stays ahead.
    assert unit_levels(4096) == [4, 4, 4]
    assert unit_levels(2048) == [3, 4, 4]
    assert unit_levels(32) == [1, 4]
    assert unit_levels(16) == [4]
    assert unit_levels(2) == [1]


def test_default_depth_and_baseline_defaults():
    assert Orizuru().structure == "tree"
    assert Orizuru(n=2048).structure == Orizuru(n=4096, k=20).structure == "units"
    assert Orizuru(n=4096, k=20).beats_per_vector == 4
    assert Orizuru(n=1024).beats_per_vector == 1
    assert Orizuru().pipeline == DEFAULT_PIPELINES["tree"] == 2
    assert Orizuru(structure="unrolled").pipeline == OrizuruScan().pipeline == 3
    assert OrizuruScan(pipeline=0).latency == 1


# --- cocotb benches on the generated Verilog -----------------------------------------------


BENCH_CONFIGS = [
    pytest.param("orizuru", {}, 3000, id="paper-n16-k2"),
    pytest.param("orizuru", {"pipeline": 0}, 2000, id="paper-n16-k2-pipeline0"),
    pytest.param("orizuru", {"n": 2, "k": 2}, 1000, marks=pytest.mark.large,
                 id="n2-k2"),
    pytest.param("orizuru", {"n": 8, "k": 8}, 500, marks=pytest.mark.large, id="n8-k8"),
    pytest.param("orizuru", {"n": 64, "k": 4}, 300, marks=pytest.mark.large,
                 id="n64-k4"),
    pytest.param("orizuru", {"structure": "unrolled"}, 3000, id="unrolled-n16-k2"),
    pytest.param("orizuru", {"structure": "unrolled", "pipeline": 0}, 1000,
                 id="unrolled-n16-k2-pipeline0"),
    pytest.param("orizuru", {"structure": "unrolled", "n": 64, "k": 4}, 300,
                 marks=pytest.mark.large, id="unrolled-n64-k4"),
    # The composition of 16-input units: one leaf unit, at the default and the lowest depth;
    # 16 units under a 16-input merge unit; leaf units of 4 exhausted (k = n); and KLLM's
    # 273 units at n = 4096, k = 20 (four input beats per vector).
    pytest.param("orizuru", {"structure": "units"}, 1000, id="units-n16-k2"),
    pytest.param("orizuru", {"structure": "units", "pipeline": 0}, 500,
                 marks=pytest.mark.large,
                 id="units-n16-k2-pipeline0"),
    pytest.param("orizuru", {"structure": "units", "n": 256, "k": 20}, 300,
                 marks=pytest.mark.large, id="units-n256-k20"),
    pytest.param("orizuru", {"structure": "units", "n": 64, "k": 64, "pipeline": 0}, 100,
                 marks=pytest.mark.large, id="units-n64-k64-pipeline0"),
    pytest.param("orizuru", {"n": 4096, "k": 20}, 200, marks=pytest.mark.large,
                 id="kllm-4096-k20"),
    pytest.param("orizuru_scan", {}, 2000, id="scan-baseline-n16-k2"),
    pytest.param("orizuru_scan", {"pipeline": 0}, 1000, id="scan-baseline-n16-k2-pipeline0"),
]


@pytest.mark.sim
@pytest.mark.parametrize("unit,params,vectors", BENCH_CONFIGS)
def test_bench(unit, params, vectors):
    metrics = run_testbench(unit, params, extra_env={"QLLM_VECTORS": vectors})
    assert metrics["tests"] == 3
    dut = Orizuru(**{**params, "structure": "scan"} if unit == "orizuru_scan" else params)
    assert metrics["sustained_rate"]["cycles_per_vector"] == dut.cycles_per_vector


def _min_tree_ties_left(text):
    """The min tree's leaf level copies the max tree's bit instead of its inverse (the same
    site at every depth)."""
    return edit_site(text, r"(assign init_min_bit_8 = )~ ?([^;]+);", r"\1\2;")


def _maintenance_ties_to_sibling(text):
    """In the pipelined maintenance, the max tree's path winner loses every tie at height 2
    (its tie-side bit forced to 0): pop 2 of an all-equal vector becomes lane 2, not 1."""
    return edit_site(text, r"(assign m2_max_better_2 = \{[^}]*\} < \{[^,]+, )[^}]+\}",
                     r"\g<1>1'h0 }")


def _tree_min_root_takes_larger(text):
    """Time-multiplexed trees: comparator 1 never learns that the last initialisation step
    is the min tree's root, and takes the larger value there."""
    return edit_site(text, r"(init_is_min_1 <= )[^;]+;", r"\g<1>1'h0;")


def _tree_min_path_loses_ties(text):
    """Time-multiplexed trees: the min tree's path winner loses every tie to the sibling
    (its tie-side bit forced to 0)."""
    return edit_site(text, r"(assign min_m_path_wins = \{[^}]*\} < \{[^}]*, )min_m_sides\[0\] \}",
                     r"\g<1>1'h0 }")


def _units_max_node_ignores_right(text):
    """Units: node 0 of the max tree's level 2 in the leaf unit (the first module with the
    site; the merge unit has one too) never takes its right child (a maximum among lanes
    4..7 of a unit is missed)."""
    return edit_site(text, r"(assign max_l2_0_right = )[^;]+;", r"\g<1>1'h0;", sites=None)


def _units_refill_keeps_child(text):
    """Units: a merge unit loads the popped leaf from the child's root without taking it, so
    the child never pops (the same maximum comes back)."""
    return edit_site(text, r"(end else if \(max_pending\) begin\n\s*child_max_take = )\{[^}]*\};",
                     r"\g<1>0;")


@pytest.mark.sim
@pytest.mark.parametrize("name,params,edit", [
    pytest.param("min-leaf", {"structure": "unrolled"}, _min_tree_ties_left,
                 marks=pytest.mark.large),
    pytest.param("maintenance-ties", {"structure": "unrolled"}, _maintenance_ties_to_sibling,
                 marks=pytest.mark.large),
    pytest.param("tree-min-root", {}, _tree_min_root_takes_larger,
                 marks=pytest.mark.large),
    ("tree-min-ties", {}, _tree_min_path_loses_ties),
    pytest.param("units-max-node", {"structure": "units", "n": 256, "k": 20},
                 _units_max_node_ignores_right, marks=pytest.mark.large),
    pytest.param("units-refill", {"structure": "units", "n": 256, "k": 20},
                 _units_refill_keeps_child, marks=pytest.mark.large),
])
def test_bench_fails_on_broken_rtl(name, params, edit):
    with pytest.raises(BenchFailure):
        run_testbench("orizuru", params, extra_env={"QLLM_VECTORS": 300},
                      mutation=(name, edit))


def test_loop_verilog_grows_linearly_with_n():
    # The loop (pipeline=0) follows the node bits down from the root; each level's offset is
    # used twice by the next, so unnamed offsets were emitted 2**levels times in every
    # statement that reads the popped index (issue 15: 46 MB at n = 256, k = 16).
    sizes = {n: len(convert(Orizuru(n=n, k=4, structure="unrolled", pipeline=0), "orizuru")) / n
             for n in (16, 128)}
    assert sizes[128] < 1.5 * sizes[16], sizes
