# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""orizuru_sortnet: parameters, the comparator network, every pipeline depth, benches,
mutation."""


import numpy as np
import pytest
from amaranth.hdl import Fragment

from qllm_cores.gen.verilog import convert
from qllm_cores.golden.kllm.orizuru import orizuru_beats
from qllm_cores.hdl.kllm.orizuru import sortnet
from qllm_cores.hdl.kllm.orizuru.sortnet import (DEFAULT_BLOCK_LANES, DEFAULT_PIPELINE, MAX_PIPELINE,
                                 FULL_MERGE_SLACK, OrizuruSortnet, FullMergeBlock,
                                 network_outputs, full_merge_network, selection_blocks,
                                 selection_network)
from qllm_cores.verif.kllm.orizuru_sim import simulate
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench


@pytest.mark.parametrize("kwargs,error,message", [
    ({"n": 1}, ValueError, r"n must be in range 2\.\.1024, not 1"),
    ({"n": 2048}, ValueError, r"n must be in range 2\.\.1024, not 2048"),
    ({"n": 12}, ValueError, r"n must be a power of two in 2\.\.1024, not 12"),
    ({"n": 16.0}, TypeError, r"n must be an integer, not 16\.0"),
    ({"k": 0}, ValueError, r"k must be in range 1\.\.16, not 0"),
    ({"n": 8, "k": 9}, ValueError, r"k must be in range 1\.\.8, not 9"),
    ({"k": "2"}, TypeError, r"k must be an integer, not '2'"),
    ({"width": 32}, ValueError, r"width must be in range 16\.\.16, not 32"),
    ({"pipeline": 4}, ValueError, r"pipeline must be in range 0\.\.3, not 4"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.3, not -1"),
    ({"pipeline": True}, TypeError, r"pipeline must be an integer, not True"),
    ({"block_lanes": 1}, ValueError, r"block_lanes must be in range 2\.\.1024, not 1"),
    ({"block_lanes": 48}, ValueError,
     r"block_lanes must be a power of two in 2\.\.1024, not 48"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        OrizuruSortnet(**kwargs)


# --- the comparator network -----------------------------------------------------------------


@pytest.mark.parametrize("n,k", [(n, k) for n in (2, 4, 8) for k in range(1, n + 1)]
                         + [(16, 1), (16, 2), (16, 5)])
def test_network_selects_on_every_zero_one_input(n, k):
    """The 0-1 principle: a comparator network that puts the k smallest and the k largest,
    sorted, on its outputs for every 0/1 input does so for every input."""
    network = selection_network(n, k)
    rows = _zero_one_rows(n)
    ordered = np.sort(rows, axis=1)
    bottom, top = _evaluate_rows(network, rows)
    assert (bottom == ordered[:, :k]).all() and (top == ordered[:, n - k:]).all()
    # (the row evaluation is the network's own on single inputs)
    for bits in rows[::max(1, len(rows) // 64)].tolist():
        assert network.evaluate(bits) == (sorted(bits)[:k], sorted(bits)[n - k:]), bits


def _zero_one_rows(n):
    """Every 0/1 input of ``n`` lanes, one per row."""
    return ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(np.int64)


def _evaluate_rows(network, rows):
    """``network.evaluate`` on every row of the 2-D array ``rows`` at once: ``(bottom, top)``,
    arrays with one result per row."""
    value = dict(enumerate(rows.T))
    for a, b, low, high in network.comparators:
        value[low], value[high] = np.minimum(value[a], value[b]), np.maximum(value[a], value[b])
    return _columns(value, network.bottom, rows), _columns(value, network.top, rows)


def _columns(value, symbols, rows):
    """The ``symbols``' values (one column each, a row per row of ``rows``)."""
    if not symbols:
        return np.empty((len(rows), 0), rows.dtype)
    return np.stack([value[s] for s in symbols], axis=1)


@pytest.mark.parametrize("n,k", [(32, 3), (64, 4), (128, 128)])
def test_network_selects_on_random_distinct_inputs(n, k):
    network = selection_network(n, k)
    rng = np.random.default_rng(n + k)
    for _ in range(50):
        values = [int(v) for v in rng.permutation(4 * n)[:n]]
        ordered = sorted(values)
        assert network.evaluate(values) == (ordered[:k], ordered[-k:])


@pytest.mark.parametrize("n,k,comparators,depth", [
    (2, 1, 1, 1), (16, 1, 22, 4), (16, 2, 38, 7), (16, 4, 54, 9), (16, 8, 63, 10),
    (8, 8, 19, 6), (64, 4, 264, 15),
])
def test_comparator_count_and_depth(n, k, comparators, depth):
    """The figures of the docstring and docs/units/orizuru.md (a full Batcher sort of 16 is
    63 comparators in 10 levels)."""
    dut = OrizuruSortnet(n=n, k=k)
    assert (dut.comparators, dut.depth) == (comparators, depth)


def _evaluate_blocks(blocks, rows, full_outputs=None):
    """Apply :func:`selection_blocks`' networks to every row of ``rows`` (a 2-D array, one
    input per row) the way the unit wires them: a first-level block per group of lanes, then
    one per pair of blocks below; a block with ``full_outputs`` (the unit's plan,
    :func:`full_merge_outputs`) is the full merge of its inputs, those of its outputs kept.
    Returns the root's ``(smallest k, largest k)``, arrays with one result per row."""
    full_outputs = full_outputs or [None] * len(blocks)
    lanes, first = blocks[0]
    groups = []
    for start in range(0, rows.shape[1], lanes):
        bottom, top = _evaluate_rows(first, rows[:, start:start + lanes])
        groups.append(_block_outputs(first, bottom, top))
    for (size, network), kept in zip(blocks[1:], full_outputs[1:]):
        results = []
        for j in range(0, len(groups), 2):
            pair = np.concatenate([groups[j], groups[j + 1]], axis=1)
            if kept is None:
                bottom, top = _evaluate_rows(network, pair)
                results.append(_block_outputs(network, bottom, top))
            else:
                merged, _ = _evaluate_rows(full_merge_network(size // 2), pair)
                results.append(merged[:, list(kept)])
        groups = results
    root = blocks[-1][1]
    value = dict(zip(_outputs_of(root), groups[0].T))
    return _columns(value, root.bottom, rows), _columns(value, root.top, rows)


def _outputs_of(network):
    return list(dict.fromkeys((*network.bottom, *network.top)))


def _block_outputs(network, bottom, top):
    """A block's output values in port order (columns): its distinct output symbols, the
    bottom list's then the top list's new ones (how a parent block sees them)."""
    value = dict(zip(network.bottom, bottom.T)) | dict(zip(network.top, top.T))
    return np.stack([value[s] for s in _outputs_of(network)], axis=1)


def _assert_selects(result, rows, k):
    """``result`` (bottom, top) holds each row's k smallest and k largest, ascending."""
    ordered = np.sort(rows, axis=1)
    bottom, top = result
    assert (bottom == ordered[:, :k]).all() and (top == ordered[:, rows.shape[1] - k:]).all()


def _random_rows(n, count, rng):
    """``count`` rows of ``n`` distinct values."""
    return np.stack([rng.permutation(4 * n)[:n] for _ in range(count)]).astype(np.int64)


@pytest.mark.parametrize("n,k,lanes", [(16, 2, 4), (16, 5, 2), (32, 3, 8), (16, 16, 4),
                                       (64, 4, 16), (128, 64, 64), (256, 2, 64), (32, 1, 2)])
def test_blocks_are_the_flat_network(n, k, lanes):
    """The blocks select what the flat network selects (random distinct values and every 0-1
    input of 16), with its comparators and its depth, so that the unit built from blocks has
    the flat network's latency at every ``pipeline``."""
    blocks = selection_blocks(n, k, lanes)
    flat = selection_network(n, k)
    assert [size for size, _ in blocks] == [lanes << j for j in range(len(blocks))]
    assert blocks[-1][0] == n
    assert sum(len(net.comparators) * n // size for size, net in blocks) == len(flat.comparators)
    assert sum(net.depth for _, net in blocks) == flat.depth
    rows = _random_rows(n, 30, np.random.default_rng(n * k + lanes))
    _assert_selects(_evaluate_blocks(blocks, rows), rows, k)
    if n == 16:
        rows = _zero_one_rows(n)
        _assert_selects(_evaluate_blocks(blocks, rows), rows, k)


def _is_full_merge(network):
    """Whether ``network`` (a merge block of :func:`selection_blocks`) is the full odd-even
    merge of its two input halves (every input kept)."""
    if network.n % 2 or network.n & (network.n - 1):
        return False
    full = full_merge_network(network.n // 2)
    return (network.comparators, network_outputs(network)) == (full.comparators, full.bottom)


@pytest.mark.parametrize("n,k,lanes", [(8, 3, 4), (16, 6, 4), (16, 7, 8), (32, 13, 4),
                                       (32, 10, 2), (1024, 511, 64), (1024, 400, 64)])
def test_merges_built_as_full_merges(n, k, lanes):
    """Where the unit builds a merge block as the full merge of two whole sorted groups and
    keeps the outputs needed, it selects what the flat network selects (every 0/1 input up to
    n = 16, random distinct values), has the flat network's depth (so its latency), and at most
    FULL_MERGE_SLACK times that block's comparators."""
    dut = OrizuruSortnet(n=n, k=k, block_lanes=lanes)
    flat = OrizuruSortnet(n=n, k=k, block_lanes=n)
    assert dut.latency == flat.latency
    plan = list(zip(dut.blocks, dut._full_outputs))
    assert any(kept is not None and not _is_full_merge(net) for (_, net), kept in plan)
    for (size, network), kept in plan:
        if kept is not None:
            full = full_merge_network(size // 2)
            assert full.depth == network.depth
            assert len(full.comparators) <= FULL_MERGE_SLACK * len(network.comparators)
    assert dut.comparators >= len(dut.network.comparators) - 1   # k = 511: one fewer
    rows = _random_rows(n, 20, np.random.default_rng(n + k))
    if n <= 16:
        rows = np.concatenate([_zero_one_rows(n), rows])
    _assert_selects(_evaluate_blocks(dut.blocks, rows, dut._full_outputs), rows, k)


def test_blocks_only_above_block_lanes():
    assert OrizuruSortnet(n=DEFAULT_BLOCK_LANES).blocks is None
    blocked = OrizuruSortnet(n=2 * DEFAULT_BLOCK_LANES, k=3)
    assert [size for size, _ in blocked.blocks] == [DEFAULT_BLOCK_LANES, 2 * DEFAULT_BLOCK_LANES]


@pytest.mark.parametrize("block_lanes,sizes", [
    (DEFAULT_BLOCK_LANES, (2, 4, 8, 16)), (4, (2, 4, 8, 16)),
    pytest.param(DEFAULT_BLOCK_LANES, (32,), marks=pytest.mark.large),
    pytest.param(4, (32,), marks=pytest.mark.large)])
def test_every_k_elaborates_at_every_cut(block_lanes, sizes):
    """Every (n, k) up to n = 32 elaborates with cuts: a value read at two levels (an element in
    both lists of a group feeds a comparator of each merge) stays registered until its
    deepest use (n = 16, k = 6 raised KeyError at every ``pipeline`` >= 1 before)."""
    for n in sizes:
        for k in range(1, n + 1):
            for pipeline in (1, 3):
                dut = OrizuruSortnet(n=n, k=k, pipeline=pipeline, block_lanes=block_lanes)
                Fragment.get(dut, None)


# --- every pipeline depth, in Amaranth's simulator ------------------------------------------


def _vectors(n, count, rng):
    """Random bit patterns, few-valued vectors (many ties), signed zeros and NaNs only, and
    float16 normals; the first vector all equal, the second alternating +0 / -0."""
    kinds = rng.integers(0, 4, count)
    raw = rng.integers(0, 1 << 16, (count, n))
    ties = rng.integers(0, 3, (count, n)) * 0x0400 + 0x3C00
    zeros = rng.choice([0x0000, 0x8000, 0x7E00, 0xFE00, 0x0001], (count, n))
    normal = rng.standard_normal((count, n)).astype(np.float16).view(np.uint16)
    xs = np.where(kinds[:, None] == 0, raw, np.where(
        kinds[:, None] == 1, ties, np.where(kinds[:, None] == 2, zeros, normal)))
    xs[0] = 0x3C00
    xs[1] = np.where(np.arange(n) % 2 == 0, 0x0000, 0x8000)
    return xs.astype(np.int64)


SIM_CONFIGS = [(2, 1), (2, 2), (4, 3), (8, 2), (8, 8), (16, 2), (16, 5), (16, 6), (32, 3)]


#: Networks built from blocks (``block_lanes`` below n): (n, k, block_lanes).
#: (16, 6, 4), (32, 13, 4): a merge built as the full merge, the outputs needed kept.
SIM_BLOCK_CONFIGS = [(16, 2, 4), (16, 5, 2), (32, 3, 8), (16, 16, 4), (32, 16, 4), (32, 13, 4),
                     (16, 6, 4)]


@pytest.mark.parametrize("pipeline", range(MAX_PIPELINE + 1))
def test_every_depth_matches_golden_under_backpressure(pipeline):
    rng = np.random.default_rng([pipeline, 7])
    configs = [(n, k, n) for n, k in SIM_CONFIGS] + SIM_BLOCK_CONFIGS
    for n, k, lanes in configs:
        dut = OrizuruSortnet(n=n, k=k, pipeline=pipeline, block_lanes=lanes)
        assert (dut.blocks is None) == (lanes == n)
        xs = _vectors(n, 16, rng)
        beats, _ = simulate(dut, xs, rng, valid_probability=0.7, ready_probability=0.6)
        expected = orizuru_beats(xs, k)
        for field, values in beats.items():
            assert values == [int(v) for v in expected[field]], (n, k, lanes, field)


@pytest.mark.parametrize("pipeline", [0, 2, 3])
def test_full_merges_nested_to_single_comparators(pipeline, monkeypatch):
    """A full merge is two merges of half its size and a last level (Batcher), down to
    :attr:`FullMergeBlock.FLAT_LISTS` elements per list; with 1, every merge of the network
    is nested down to single comparators (n = 16, k = 16, blocks of 2: merges of 4, 8, 16)."""
    monkeypatch.setattr(FullMergeBlock, "FLAT_LISTS", 1)
    dut = OrizuruSortnet(n=16, k=16, pipeline=pipeline, block_lanes=2)
    assert all(_is_full_merge(network) for _, network in dut.blocks[1:])
    assert dut.latency == OrizuruSortnet(n=16, k=16, pipeline=pipeline).latency
    rng = np.random.default_rng([pipeline, 11])
    xs = _vectors(16, 8, rng)
    beats, _ = simulate(dut, xs, rng, valid_probability=0.8, ready_probability=0.7)
    expected = orizuru_beats(xs, 16)
    for field, values in beats.items():
        assert values == [int(v) for v in expected[field]], field


@pytest.mark.parametrize("pipeline", range(MAX_PIPELINE + 1))
def test_mask_gathered_over_the_beats(pipeline, monkeypatch):
    """Above DIRECT_MASK_ANDS (n x 2k) the mask is gathered over the beats (two decodes and a
    register) instead of decoding all 2k indices at the last beat; forced here at small n,
    with k = 1 (every beat the last), under backpressure on both streams."""
    monkeypatch.setattr(sortnet, "DIRECT_MASK_ANDS", 0)
    rng = np.random.default_rng([pipeline, 13])
    for n, k, lanes in [(16, 2, 16), (8, 8, 8), (16, 1, 16), (16, 5, 4)]:
        dut = OrizuruSortnet(n=n, k=k, pipeline=pipeline, block_lanes=lanes)
        xs = _vectors(n, 12, rng)
        beats, _ = simulate(dut, xs, rng, valid_probability=0.7, ready_probability=0.6)
        expected = orizuru_beats(xs, k)
        for field, values in beats.items():
            assert values == [int(v) for v in expected[field]], (n, k, field)


def test_full_merge_detection():
    """Merges of whole sorted lists are full merges; a merge that keeps k of 2k is not."""
    kinds = [_is_full_merge(network) for _, network in selection_blocks(1024, 256, 64)[1:]]
    assert kinds == [True, True, True, False]
    assert not any(_is_full_merge(network) for _, network in selection_blocks(64, 2, 16)[1:])


@pytest.mark.parametrize("pipeline", range(MAX_PIPELINE + 1))
def test_every_depth_keeps_k_cycles_per_vector_and_its_latency(pipeline):
    rng = np.random.default_rng(3)
    for n, k, lanes in [(16, 2, 16), (8, 3, 8), (4, 1, 4), (16, 2, 4), (32, 3, 8), (32, 16, 4)]:
        dut = OrizuruSortnet(n=n, k=k, pipeline=pipeline, block_lanes=lanes)
        xs = _vectors(n, 16, rng)
        _, cycles = simulate(dut, xs, rng, valid_probability=1, ready_probability=1)
        assert cycles["o"][0] - cycles["i"][0] == dut.latency
        # One beat per cycle from the first to the last: k cycles per vector back to back.
        assert cycles["o"] == list(range(cycles["o"][0], cycles["o"][0] + len(xs) * k))


@pytest.mark.parametrize("n,k,pipeline,latency", [
    (16, 2, 0, 1), (16, 2, 1, 2), (16, 2, 2, 4), (16, 2, 3, 7), (2, 2, 3, 1), (2, 1, 0, 1),
    (16, 8, 3, 10), (16, 8, 1, 3), (64, 4, 3, 15), (64, 4, 2, 8),
])
def test_latency_attribute(n, k, pipeline, latency):
    assert OrizuruSortnet(n=n, k=k, pipeline=pipeline).latency == latency


def test_default_depth():
    assert OrizuruSortnet().pipeline == DEFAULT_PIPELINE == 3


# --- cocotb benches on the generated Verilog -----------------------------------------------


BENCH_CONFIGS = [
    pytest.param({}, 3000, id="n16-k2"),
    pytest.param({"pipeline": 0}, 2000, id="n16-k2-pipeline0"),
    pytest.param({"n": 8, "k": 8}, 1000, id="n8-k8"),
    # Built from blocks (shared Verilog modules): 4 of 16 lanes, then two merge levels.
    pytest.param({"n": 64, "k": 4, "block_lanes": 16}, 300, marks=pytest.mark.large,
                 id="n64-k4-blocks16"),
    # Full merges (k = n) nested: merges of 32 and 64 are two half merges and a last level.
    pytest.param({"n": 64, "k": 64, "block_lanes": 8}, 60, marks=pytest.mark.large,
                 id="n64-k64-blocks8"),
]


def test_combinational_network_verilog_grows_with_the_comparators():
    # Without register cuts every comparator output feeds the next level: an expression that
    # is not a named signal would be emitted again in every statement that uses it, which
    # grows exponentially with the levels (issue 15: 0.78 MB at n = 16, k = 8, and Yosys
    # crashed at n = 32, k = 16). Per comparator the Verilog stays about constant.
    def bytes_per_comparator(n, k):
        unit = OrizuruSortnet(n=n, k=k, pipeline=0)
        return len(convert(unit, "orizuru_sortnet")) / unit.comparators

    small = bytes_per_comparator(16, 8)        # 63 comparators in 10 levels
    assert small < 2000
    assert bytes_per_comparator(64, 16) < 2 * small


@pytest.mark.sim
@pytest.mark.parametrize("params,vectors", BENCH_CONFIGS)
def test_bench(params, vectors):
    metrics = run_testbench("orizuru_sortnet", params, extra_env={"QLLM_VECTORS": vectors})
    assert metrics["tests"] == 3
    assert metrics["sustained_rate"]["cycles_per_vector"] == params.get("k", 2)


def _first_comparator_ties_high(text):
    """The first comparator (lanes 0 and 1) gets its index tie-break backwards: on equal keys
    lane 1 counts as the larger, so an all-equal vector reports lane 1 before lane 0."""
    return edit_site(text, r"(assign c0_swap = \{ [^,]+, )4'he( \} < \{ [^,]+, )4'hf \};",
                     r"\g<1>4'hf\g<2>4'he };")


@pytest.mark.sim
def test_bench_fails_on_broken_tie_break():
    with pytest.raises(BenchFailure):
        run_testbench("orizuru_sortnet", {}, extra_env={"QLLM_VECTORS": 300},
                      mutation=("tie-break", _first_comparator_ties_high))
