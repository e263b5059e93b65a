# amaranth: UnusedElaboratable=no
# (parameter-error tests build components whose constructor raises on purpose)
"""kllm_idx_counter: parameter checks, counter width, elaboration, benches, mutation, synthesis."""

import re

import numpy as np

import pytest
from amaranth.back import verilog

from qllm_cores.gen import generate
from qllm_cores.golden.kllm import counter_width
from qllm_cores.hdl.kllm.idx_counter.idx_counter import KllmIdxCounter
from qllm_cores.verif.runner import BenchFailure, edit_site, run_testbench

# --- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,message", [
    ({"n_inputs": 0}, ValueError, r"n_inputs must be in range 1\.\.64, not 0"),
    ({"n_inputs": 65}, ValueError, r"n_inputs must be in range 1\.\.64, not 65"),
    ({"idx_bits": 0}, ValueError, r"idx_bits must be in range 1\.\.10, not 0"),
    ({"idx_bits": 11}, ValueError, r"idx_bits must be in range 1\.\.10, not 11"),
    ({"mode": "kmeans"}, ValueError, r"mode must be one of 'kk', 'ik', not 'kmeans'"),
    ({"max_len": 0}, ValueError, r"max_len must be in range 1\.\., not 0"),
    ({"max_len": 1 << 32}, ValueError, r"max_len=4294967296 needs a 33-bit counter"),
    ({"mode": "ik", "max_len": 1 << 29}, ValueError,
     r"max_len=536870912 needs a 33-bit counter in mode 'ik'"),
    ({"mode": "ik", "weight_bits": 1}, ValueError, r"weight_bits must be in range 2\.\.8, not 1"),
    ({"mode": "kk", "weight_bits": 4}, ValueError, r"weight_bits applies to mode 'ik' only"),
    ({"n_inputs": 16.0}, TypeError, r"n_inputs must be an integer, not 16\.0"),
    ({"max_len": "4096"}, TypeError, r"max_len must be an integer, not '4096'"),
    ({"pipeline": -1}, ValueError, r"pipeline must be in range 0\.\.4, not -1"),
    ({"pipeline": 5}, ValueError, r"pipeline must be in range 0\.\.4, not 5"),
    # The distribute cut (pipeline 4) copies the low chunk's lines per group of bins: kk mode,
    # flip-flop counts, two index chunks.
    ({"pipeline": 4, "idx_bits": 5}, ValueError,
     r"pipeline=4 applies to mode='kk', counts='full' and 6\.\.8 index bits \(got "
     r"mode='kk', counts='full', idx_bits=5\)"),
    ({"pipeline": 4, "mode": "ik", "idx_bits": 6}, ValueError,
     r"pipeline=4 applies to .*mode='ik'"),
    ({"pipeline": 4, "counts": "spill"}, ValueError, r"pipeline=4 applies to .*counts='spill'"),
    ({"pipeline": 2.0}, TypeError, r"pipeline must be an integer, not 2\.0"),
    ({"banks": 0}, ValueError, r"banks must be in range 1\.\.2, not 0"),
    ({"banks": 3}, ValueError, r"banks must be in range 1\.\.2, not 3"),
    ({"banks": "2"}, TypeError, r"banks must be an integer, not '2'"),
    ({"counts": "narrow"}, ValueError,
     r"counts must be one of 'full', 'spill', 'memory', not 'narrow'"),
    ({"counts": "memory", "mode": "ik"}, ValueError,
     r"counts='memory' needs mode='kk' \(got mode='ik'\)"),
    ({"counts": "memory", "banks": 1}, ValueError,
     r"counts='memory' needs banks=2 \(got banks=1\)"),
    ({"counts": "spill", "mode": "ik"}, ValueError, r"counts='spill' needs mode='kk' \(got mode='ik'\)"),
    ({"counts": "spill", "banks": 1}, ValueError, r"counts='spill' needs banks=2 \(got banks=1\)"),
    ({"counts": "spill", "overflow": True}, ValueError,
     r"counts='spill' needs overflow=False \(got overflow=True\)"),
    ({"counts": "spill", "idx_bits": 9}, ValueError,
     r"counts='spill' needs idx_bits in 1\.\.8 \(got idx_bits=9\)"),
    ({"counts": "spill", "max_len": 16}, ValueError,
     r"counts='spill' has no narrow count shorter than the 5-bit count at n_inputs=16, "
     r"max_len=16"),
])
def test_invalid_parameters_name_the_parameter(kwargs, error, message):
    with pytest.raises(error, match=message):
        KllmIdxCounter(**kwargs)


@pytest.mark.parametrize("mode,weight_bits,max_len", [
    ("kk", None, 1), ("kk", None, 15), ("kk", None, 16), ("kk", None, 4096),
    ("kk", None, (1 << 32) - 1), ("ik", 4, 1), ("ik", 4, 4096), ("ik", 2, 3), ("ik", 8, 1000),
    ("ik", 8, 1 << 24),
])
def test_counter_width_matches_the_golden_derivation(mode, weight_bits, max_len):
    unit = KllmIdxCounter(mode=mode, weight_bits=weight_bits, max_len=max_len, idx_bits=1,
                          n_inputs=1)
    assert unit.count_bits == counter_width(max_len, mode, weight_bits or 4)


def test_paper_configuration_widths():
    # 16 inputs, 256 bins, K up to 4096: 0..4096 needs 13 bits.
    assert KllmIdxCounter().count_bits == 13
    # ik, 4-bit weights: -8 * 4096 .. 7 * 4096 = -32768 .. 28672 needs 16 bits.
    assert KllmIdxCounter(mode="ik", idx_bits=4).count_bits == 16


@pytest.mark.parametrize("pipeline,latency", [(0, 2), (1, 4), (2, 5), (3, 5), (4, 7)])
def test_latency_follows_the_pipeline_depth(pipeline, latency, tmp_path):
    import json

    assert KllmIdxCounter(pipeline=pipeline).latency == latency
    params = {"n_inputs": 4, "idx_bits": 6 if pipeline == 4 else 3, "pipeline": pipeline}
    generate("kllm_idx_counter", params, tmp_path)
    assert json.loads((tmp_path / "kllm_idx_counter.json").read_text())["latency"] == latency


def test_default_pipeline_is_the_timing_closed_depth():
    assert KllmIdxCounter().pipeline == 3


@pytest.mark.parametrize("pipeline", [0, 1, 2, 3])
def test_verilog_ports_are_the_same_at_every_depth(pipeline):
    text = verilog.convert(KllmIdxCounter(n_inputs=4, idx_bits=3, mode="ik", max_len=20,
                                          pipeline=pipeline),
                           name="kllm_idx_counter", emit_src=False)
    assert "input [32:0] i__payload;" in text
    assert "output [9:0] o__payload;" in text


def test_verilog_ports_follow_the_spec():
    text = verilog.convert(KllmIdxCounter(n_inputs=4, idx_bits=3, mode="ik", max_len=20),
                           name="kllm_idx_counter", emit_src=False)
    header = re.search(r"module kllm_idx_counter\((.*?)\);", text, re.S)
    ports = {port.strip() for port in header.group(1).split(",")}
    assert ports == {"clk", "rst", "i__valid", "i__ready", "i__payload",
                     "o__valid", "o__ready", "o__payload"}
    # idx 4x3 + weight 4x4 + mask 4 + last 1 = 33; count (20 * -8 = -160 -> 9 bits) + last.
    assert "input [32:0] i__payload;" in text
    assert "output [9:0] o__payload;" in text


# --- benches ---------------------------------------------------------------------------------

#: counts="spill" at 64 bins: 5-bit narrow counts (carry at 32), 2 events a reduction.
SPILL_PARAMS = {"n_inputs": 5, "idx_bits": 6, "max_len": 64, "counts": "spill"}
#: counts="memory" with odd lanes and a 5-bit count (wrapping exercised cheaply).
MEMORY_PARAMS = {"n_inputs": 5, "idx_bits": 3, "max_len": 20, "counts": "memory"}

BENCH_CONFIGS = [
    # The paper configuration: 16 inputs, 256 bins, K up to 4096 (default pipeline).
    pytest.param({}, 40, id="kllm-a4-256bins"),
    # The distribute cut (pipeline 4, kllm_column's default front): 256 bins, and 64 bins of
    # odd lanes and one bank.
    pytest.param({"pipeline": 4}, 40, id="kllm-a4-256bins-pipeline4"),
    pytest.param({"n_inputs": 5, "idx_bits": 6, "max_len": 20, "banks": 1, "pipeline": 4}, 200,
                 id="kk-5in-64bins-banks1-pipeline4"),
    pytest.param({"n_inputs": 5, "idx_bits": 7, "max_len": 20, "pipeline": 4}, 200,
                 marks=pytest.mark.large, id="kk-5in-128bins-pipeline4"),
    pytest.param({"idx_bits": 6}, 100, marks=pytest.mark.large,
                 id="w3a3-64bins"),
    pytest.param({"mode": "ik", "idx_bits": 4, "weight_bits": 4}, 2000, id="ik-16bins"),
    # 2,000 reductions in each mode under backpressure; small bins keep the readout short.
    pytest.param({"idx_bits": 4}, 2000, marks=pytest.mark.large,
                 id="kk-16bins"),
    # Odd sizes and a short max_len (5-bit counter) so that wrapping is exercised cheaply; these
    # two run the lowest-latency circuit (pipeline=0), the others the default depth.
    pytest.param({"n_inputs": 5, "idx_bits": 3, "max_len": 20, "pipeline": 0}, 500,
                 id="kk-5in-maxlen20-pipeline0"),
    pytest.param({"n_inputs": 3, "idx_bits": 2, "mode": "ik", "weight_bits": 3, "max_len": 9,
                  "pipeline": 0}, 500, id="ik-3in-maxlen9-pipeline0"),
    # The intermediate depth with the shortest front (2 stages).
    pytest.param({"n_inputs": 5, "idx_bits": 3, "max_len": 20, "pipeline": 1}, 500,
                 marks=pytest.mark.large,
                 id="kk-5in-maxlen20-pipeline1"),
    # One bank (the input waits for every readout), at the default depth and at pipeline 0, in
    # both modes; odd lane counts leave partial groups of lanes.
    pytest.param({"idx_bits": 6, "banks": 1}, 100, marks=pytest.mark.large,
                 id="w3a3-64bins-banks1"),
    pytest.param({"mode": "ik", "idx_bits": 4, "weight_bits": 4, "banks": 1}, 500,
                 marks=pytest.mark.large,
                 id="ik-16bins-banks1"),
    pytest.param({"n_inputs": 5, "idx_bits": 3, "max_len": 20, "banks": 1, "pipeline": 0}, 300,
                 id="kk-5in-maxlen20-banks1-pipeline0"),
    pytest.param({"n_inputs": 7, "idx_bits": 3, "mode": "ik", "weight_bits": 3, "max_len": 9,
                  "banks": 1, "pipeline": 2}, 300, marks=pytest.mark.large,
                 id="ik-7in-maxlen9-banks1-pipeline2"),
    # Odd lane counts (partial groups of 2 and 3 lanes) in ik mode at the default depth, where
    # equal indices within a group are merged before the bins are selected.
    pytest.param({"n_inputs": 6, "idx_bits": 2, "mode": "ik", "weight_bits": 5, "max_len": 30},
                 500, marks=pytest.mark.large,
                 id="ik-6in-4bins"),
    pytest.param({"n_inputs": 7, "idx_bits": 5, "mode": "ik", "weight_bits": 2}, 300,
                 marks=pytest.mark.large,
                 id="ik-7in-32bins"),
    # Above 8 index bits the bins are built in parts of 256 (one shared Verilog module): the
    # largest bins in each bank variant and mode (few reductions: each reads out 512 or 1024).
    pytest.param({"n_inputs": 5, "idx_bits": 10, "max_len": 20}, 12, marks=pytest.mark.large,
                 id="kk-5in-1024bins"),
    pytest.param({"n_inputs": 6, "idx_bits": 9, "mode": "ik", "weight_bits": 3, "max_len": 9,
                  "pipeline": 0}, 12, marks=pytest.mark.large,
                 id="ik-6in-512bins-pipeline0"),
    pytest.param({"n_inputs": 7, "idx_bits": 10, "mode": "ik", "weight_bits": 4, "banks": 1},
                 12, marks=pytest.mark.large, id="ik-7in-1024bins-banks1"),
    # Narrow counts with the overflow spill: the paper configuration, and 64 bins (4 groups of
    # slots) with 5-bit narrow counts, 2 events a reduction, at the lowest and default depth.
    pytest.param({"counts": "spill"}, 40, marks=pytest.mark.large, id="kllm-a4-spill"),
    pytest.param(SPILL_PARAMS, 300, id="spill-5in-64bins"),
    pytest.param({**SPILL_PARAMS, "pipeline": 0}, 300, id="spill-5in-64bins-pipeline0"),
    # Per-lane histograms in memory: the paper configuration (inferred memories in make
    # test-large; DP16KD in make test), and 8 bins x 5 lanes at the lowest, an intermediate
    # and the default depth.
    pytest.param({"counts": "memory"}, 40, marks=pytest.mark.large, id="kllm-a4-memory"),
    # The same on ECP5 block RAMs (DP16KD instances, simulated with verif/models/DP16KD.v).
    pytest.param({"counts": "memory", "target": "ecp5"}, 40, id="kllm-a4-memory-ecp5"),
    pytest.param({**MEMORY_PARAMS, "target": "ecp5", "pipeline": 0}, 300,
                 id="memory-5in-8bins-ecp5-pipeline0"),
    pytest.param(MEMORY_PARAMS, 500, id="memory-5in-8bins"),
    pytest.param({**MEMORY_PARAMS, "pipeline": 0}, 500, id="memory-5in-8bins-pipeline0"),
    pytest.param({**MEMORY_PARAMS, "pipeline": 1}, 300, marks=pytest.mark.large,
                 id="memory-5in-8bins-pipeline1"),
]


@pytest.mark.sim
@pytest.mark.parametrize("params,reductions", BENCH_CONFIGS)
def test_bench(params, reductions):
    metrics = run_testbench("kllm_idx_counter", params,
                            extra_env={"QLLM_REDUCTIONS": reductions, "QLLM_COLUMNS": 3})
    assert metrics["tests"] == 3
    assert metrics["random_reductions_backpressure"]["reductions"] == reductions
    throughput = metrics["sustained_throughput"]
    unit = KllmIdxCounter(**params)
    beats = throughput["k"] // unit.n_inputs
    if beats >= unit.stall_free_beats and unit.banks == 2:
        assert throughput["indices_per_cycle"] == unit.n_inputs
    elif beats >= unit.bins and unit.banks == 2:
        # The per-lane memories: a reduction of bins .. stall_free_beats beats waits at most
        # for the beats it lacks.
        least = unit.n_inputs * beats / unit.stall_free_beats
        assert unit.n_inputs > throughput["indices_per_cycle"] >= least


# The mutants below are for MUTANT_PARAMS at the default depth: idx (5 x 3 bits) fills
# i__payload[14:0], mask i__payload[19:15]; with the decode cut the mask bits are ANDed into
# the predecoded lines ahead of the input register.
MUTANT_PARAMS = {"n_inputs": 5, "idx_bits": 3, "max_len": 20}


def _ignore_lane0_mask(text):
    """Lane 0 counts even when masked: the mask bit ANDed into its 8 predecode lines is 1."""
    return edit_site(text, r"& \{\s*(?:beat_mask_in\[0\],\s*)+beat_mask_in\[0\]\s*\}", "& 8'hff")


def _readout_one_bin_short(text):
    """The readout ends (and flags last) at bin 6 of 8: `at_last_bin` is set one bin early
    (its flag `penultimate`, pointer == 6, is loaded from pointer == 5 instead of 4)."""
    return edit_site(text, r"pointer == 3'h5;", "pointer == 3'h4;")


def _stale_ready_prediction(text):
    """The skid buffer's predicted ready forgets that it stays high when no beat arrives: the
    readout bank's registered enable then disagrees with the transfers under backpressure."""
    return edit_site(text, r"assign ready_next = (\\\$\d+)  \| \\\$\d+ ;",
                     r"assign ready_next = \1 ;")


# Above 8 index bits (parts of 256 bins, kllm_idx_counter_bins* instantiated 4 times): 5 lanes
# of 10 bits, 36 predecode lines each (16 + 16 + 4; the top chunk's line selects the part).
SLICED_MUTANT_PARAMS = {"n_inputs": 5, "idx_bits": 10, "max_len": 20}


def _part1_selects_lane0_of_part0(text):
    """Part 1 (bins 256..511) takes lane 0's top-chunk line of part 0: lane 0's indices in bins
    0..255 are counted in 256..511 too, and those in 256..511 are not counted."""
    return edit_site(text, r"beat_lines\[33\] \}\)", "beat_lines[32] })")


def _readout_chain_broken(text):
    """Part 1's bank shifts in zeros instead of part 2's bin 0: bins 512..1023 read out as 0."""
    return edit_site(text, r"\.shift_in\((\\shift_in\$\d+) \)", ".shift_in(13'h0)",
                     sites=None)


def _spill_list_ignored(text):
    """The readout ignores the list of spilled events: a bin that carried before the end of its
    reduction reads ``2**narrow_bits`` short for each event."""
    return edit_site(text, r"assign high = [^;]+;", "assign high = 2'h0;")


def _spill_bank_event_dropped(text):
    """The event a bin still had outstanding when the bank loaded is not added at the readout."""
    return edit_site(text, r"assign (\\\$\d+)  = high \+ readout\[5\];", r"assign \1 = high;")


def _spill_slot_forgotten(text):
    """An event waiting in its group's slot when the reduction ends is lost (the bank's event
    bit takes the pending flags and carries only)."""
    return edit_site(text, r"assign pending = (\\\$\d+)  \| \{[^;]*\};", r"assign pending = \1 ;")


def _memory_no_forward_from_previous(text):
    """Lane 0 never takes the word the beat just ahead of it wrote (flag ``f1``): equal indices
    on consecutive beats lose a count."""
    return edit_site(text, r"lane0_f1 <= \\\$\d+ ;", "lane0_f1 <= 1'h0;")


def _memory_no_forward_from_second(text):
    """Lane 0 never takes the word the beat two ahead of it wrote (flag ``f2``): it reads the
    word that beat writes in the cycle of the read."""
    return edit_site(text, r"lane0_f2 <= [^;]+;", "lane0_f2 <= 1'h0;")


def _memory_no_forward_from_fourth(text):
    """Lane 0 never takes the word the beat four ahead of it wrote in the cycle of its read
    (flag ``f4``): it reads that word before the write."""
    return edit_site(text, r"lane0_f4 <= [^;]+;", "lane0_f4 <= 1'h0;")


def _memory_not_cleared(text):
    """Lane 0's bank 0 writes the word being counted where it should write 0 (the clears after
    reset and after each readout)."""
    return edit_site(text, r"lane0_bank0_wcount \? lane0_wrote1 : \d+'h0+;", "lane0_wrote1;")


@pytest.mark.sim
@pytest.mark.parametrize("mutation,params,reductions", [
    pytest.param(("memory-f1", _memory_no_forward_from_previous), MEMORY_PARAMS, 100,
                 id="memory-forward-f1"),
    pytest.param(("memory-f2", _memory_no_forward_from_second), MEMORY_PARAMS, 100,
                 marks=pytest.mark.large, id="memory-forward-f2"),
    pytest.param(("memory-f4", _memory_no_forward_from_fourth), MEMORY_PARAMS, 100,
                 marks=pytest.mark.large, id="memory-forward-f4"),
    pytest.param(("memory-clear", _memory_not_cleared), MEMORY_PARAMS, 100,
                 marks=pytest.mark.large, id="memory-clear"),
    pytest.param(("spill-list", _spill_list_ignored), SPILL_PARAMS, 100, id="spill-list"),
    pytest.param(("spill-bank", _spill_bank_event_dropped), SPILL_PARAMS, 100,
                 marks=pytest.mark.large, id="spill-bank-event"),
    pytest.param(("spill-slot", _spill_slot_forgotten), SPILL_PARAMS, 300,
                 marks=pytest.mark.large, id="spill-slot"),
    pytest.param(("nomask", _ignore_lane0_mask), MUTANT_PARAMS, 50,
                 marks=pytest.mark.large, id="ignores-mask"),
    pytest.param(("short", _readout_one_bin_short), MUTANT_PARAMS, 50, id="short-readout"),
    pytest.param(("ready", _stale_ready_prediction), MUTANT_PARAMS, 50,
                 marks=pytest.mark.large, id="stale-ready-prediction"),
    # Few reductions: each reads out 1024 bins.
    pytest.param(("select", _part1_selects_lane0_of_part0), SLICED_MUTANT_PARAMS, 4,
                 marks=pytest.mark.large, id="part-select"),
    pytest.param(("chain", _readout_chain_broken), SLICED_MUTANT_PARAMS, 4,
                 marks=pytest.mark.large, id="readout-chain"),
])
def test_bench_fails_on_broken_rtl(mutation, params, reductions):
    with pytest.raises(BenchFailure):
        run_testbench("kllm_idx_counter", params,
                      extra_env={"QLLM_REDUCTIONS": reductions, "QLLM_COLUMNS": 1},
                      mutation=mutation)


# --- synthesis -------------------------------------------------------------------------------


@pytest.mark.synth
@pytest.mark.parametrize("pipeline", [0, 3])
def test_synthesis_of_a_small_counter_keeps_both_banks(tmp_path, pipeline):
    from qllm_cores.fpga.yosys import synth

    params = {"n_inputs": 4, "idx_bits": 3, "max_len": 20, "pipeline": pipeline}
    source = generate("kllm_idx_counter", params, tmp_path / "v")
    result = synth(source, "kllm_idx_counter", "ice40", tmp_path / "synth")
    banks = 8 * 5 * 2                   # 8 bins x 5-bit accumulators and readout bank
    if pipeline == 0:
        # The beat register (4 x 3 idx + 4 mask), valid, fresh, busy and a 3-bit pointer.
        minimum = banks + 16 + 1 + 1 + 1 + 3
    else:
        # Predecoded lines (4 lanes x 8), the per-bin 3-bit partial sums and contributions
        # (4 lanes: the partial cut falls on the last tree level), the skid buffer (2 x 6 + 2).
        minimum = banks + 4 * 8 + 8 * 3 * 2 + 14
    assert result.metrics["FF"] >= minimum - 2  # Yosys may merge a constant flop or two
    assert result.metrics["LUT"] > 0


# --- per-bin overflow flags (kllm_column's overflow) ----------------------------------------


def _running_out_of_range(idx, weights, mask, last, bins, width, mode):
    """Per reduction, per bin: whether the bin's running count after some beat left the
    counter's range (kk: above 2**width - 1; ik: outside the signed width-bit range). Written
    from contract section 7's overflow rule, independently of the RTL."""
    flags, start = [], 0
    for end in np.flatnonzero(last):
        beats = slice(start, end + 1)
        per_beat = np.zeros((end + 1 - start, bins), np.int64)
        rows = np.repeat(np.arange(end + 1 - start), idx.shape[1])
        np.add.at(per_beat, (rows, idx[beats].ravel()),
                  (weights[beats] * mask[beats]).ravel())
        running = np.cumsum(per_beat, axis=0)
        if mode == "kk":
            bad = running > (1 << width) - 1
        else:
            bad = (running < -(1 << (width - 1))) | (running > (1 << (width - 1)) - 1)
        flags.append(bad.any(axis=0))
        start = end + 1
    return np.array(flags)


@pytest.mark.parametrize("mode,pipeline,banks,counts", [
    (mode, pipeline, banks, "full")
    for mode in ("kk", "ik") for pipeline, banks in ((0, 2), (3, 2), (1, 1))
] + [("kk", 0, 2, "memory"), ("kk", 3, 2, "memory")])
def test_overflow_flags_report_every_bin_that_left_the_range(mode, pipeline, banks, counts):
    """``overflow=True``: the sticky per-bin flag beside each count, in all three bank
    arrangements (direct, shift, single) and with per-lane memories, in the Amaranth simulator
    with random gaps. Short reductions stay in range; long skewed ones leave it, in ik also by a
    running sum that comes back (the flag is sticky)."""
    from qllm_cores.verif.amaranth_sim import simulate_streams
    n, idx_bits, max_len = 2, 2, 3
    weight_bits = 3 if mode == "ik" else None
    counter = KllmIdxCounter(n_inputs=n, idx_bits=idx_bits, mode=mode, weight_bits=weight_bits,
                             max_len=max_len, overflow=True, banks=banks, counts=counts,
                             pipeline=pipeline)
    width = counter.count_bits
    rng = np.random.default_rng(7 + pipeline)
    idx_rows, weight_rows, mask_rows, last_rows = [], [], [], []
    for reduction in range(60):
        beats = int(rng.integers(1, 10))
        skew = rng.random() < 0.5
        idx_rows.append(np.where(skew, 1, rng.integers(0, 1 << idx_bits, (beats, n))))
        if mode == "ik":
            # One sign per reduction: a run of extreme weights, or weights of both signs.
            extreme = np.full((beats, n), rng.choice([-4, 3]))
            weight_rows.append(np.where(rng.random() < 0.6, extreme,
                                        rng.integers(-4, 4, (beats, n))))
        else:
            weight_rows.append(np.ones((beats, n), np.int64))
        mask_rows.append(rng.integers(0, 2, (beats, n)))
        last = np.zeros(beats, np.int64)
        last[-1] = 1
        last_rows.append(last)
    idx, weights = np.concatenate(idx_rows), np.concatenate(weight_rows)
    mask, last = np.concatenate(mask_rows), np.concatenate(last_rows)
    fields = {"idx": idx, "mask": mask @ (1 << np.arange(n)), "last": last}
    if mode == "ik":
        fields["weight"] = weights
    result = simulate_streams(counter, {"i": fields}, rng=rng, valid_probability=0.7,
                              ready_probability=0.7)
    assert not result.problems, result.problems
    out = result.outputs["o"]
    bins = 1 << idx_bits
    want = _running_out_of_range(idx, weights, mask, last, bins, width, mode)
    got = np.asarray(out["overflow"]).reshape(-1, bins).astype(bool)
    np.testing.assert_array_equal(got, want)
    assert want.any() and not want.all(), "the stimulus must overflow some bins, not all"
    counts = np.asarray(out["count"]).reshape(-1, bins)
    fine = ~want
    # Bins that never left the range hold their exact count.
    expected_counts = np.stack([np.bincount(i.ravel(), weights=(w * k).ravel(), minlength=bins)
                                for i, w, k in zip(idx_rows, weight_rows, mask_rows)])
    np.testing.assert_array_equal(counts[fine], expected_counts.astype(np.int64)[fine])
