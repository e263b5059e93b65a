"""KLLM's units in the registry (:data:`gen.registry.UNITS`): the Concat array, the Index
Distribution Counter, the index-based MatMul column, and Orizuru with its two baselines
(``orizuru_scan``, ``orizuru_sortnet``)."""

from qllm_cores.gen.spec import ReportConfig, UnitSpec

__all__ = ["SPECS"]


def _orizuru_cycles(params):
    """Cycles per vector of ``orizuru`` back to back (see
    :func:`hdl.kllm.orizuru.orizuru.cycles_per_vector`)."""
    from qllm_cores.hdl.kllm.orizuru.orizuru import (DEFAULT_PIPELINES, cycles_per_vector,
                                                     resolve_structure)
    structure = resolve_structure(params["n"], params.get("structure"))
    pipeline = params["pipeline"]
    if pipeline is None:
        pipeline = DEFAULT_PIPELINES[structure]
    return cycles_per_vector(params["n"], params["k"], structure, pipeline)


SPECS = (
    UnitSpec(
        name="kllm_concat",
        factory="qllm_cores.hdl.kllm.concat:KllmConcat",
        configs={
            # KLLM Table I: a PE lane holds 4096 Concat units; KLLM-A4 is W4A4, KLLM-A3 W4A3.
            "kllm-a4-lane": {"a_bits": 4, "b_bits": 4, "lanes": 4096},
            "kllm-a3-lane": {"a_bits": 3, "b_bits": 4, "lanes": 4096},
            # One counter's worth of concatenated indices per beat (16-input counter).
            "kllm-a4-16": {"a_bits": 4, "b_bits": 4, "lanes": 16},
            "kllm-a3-16": {"a_bits": 3, "b_bits": 4, "lanes": 16},
        },
        testbench="qllm_cores.verif.kllm.tb_concat",
        golden="qllm_cores.golden.kllm.beats:kllm_concat",
        doc="docs/units/kllm_concat.md",
        # KLLM Table I: a Concat array feeding one 16-input counter (the 4096-lane PE-lane
        # configuration has 32,768 output flip-flops: beyond both small FPGAs; `make area`
        # has it).
        report=(ReportConfig("kllm-a4-16"),),
        result="index pair",
        rate=lambda p: p["lanes"],
        summary="KLLM Concat array: y = (a << b_bits) | b per lane, registered",
    ),
    UnitSpec(
        name="kllm_idx_counter",
        factory="qllm_cores.hdl.kllm.idx_counter.idx_counter:KllmIdxCounter",
        configs={
            # KLLM section IV-B / Table I: 16-input counters over W4A4 concatenated indices.
            "kllm-a4": {"n_inputs": 16, "idx_bits": 8, "mode": "kk", "max_len": 4096},
            # W4A3 (KLLM-A3): 3-bit activation + 4-bit weight indices.
            "kllm-a3": {"n_inputs": 16, "idx_bits": 7, "mode": "kk", "max_len": 4096},
            # Not a KLLM configuration (KLLM-A3 is W4A3): 3-bit x 3-bit indices, 64 bins,
            # the smallest kk counter at K = 4096, for benches and studies.
            "w3a3-64bins": {"n_inputs": 16, "idx_bits": 6, "mode": "kk", "max_len": 4096},
            # Integer x K-Means (attention scores x V, Fig. 3(b)): V's 4-bit K-Means indices,
            # 4-bit integer scores as "+n" weights.
            "kllm-ik-a4": {"n_inputs": 16, "idx_bits": 4, "mode": "ik", "weight_bits": 4,
                           "max_len": 4096},
        },
        testbench="qllm_cores.verif.kllm.tb_idx_counter",
        golden="qllm_cores.golden.kllm.beats:kllm_idx_counter",
        doc="docs/units/kllm_idx_counter.md",
        # KLLM's two configurations, W4A4 and W4A3, both placed on the ECP5 25F; W4A4 also with
        # its per-lane histograms in ECP5 block RAM (ECP5 only).
        report=(ReportConfig("kllm-a4"), ReportConfig("kllm-a3"),
                ReportConfig("kllm-a4", overrides=(("counts", "memory"), ("target", "ecp5")))),
        benchmark="qllm_cores.verif.benchmarks:counter_table",
        result="index",
        rate=lambda p: p["n_inputs"],
        summary="KLLM 16-input Index Distribution Counter: per-bin histogram, serial readout",
    ),
    UnitSpec(
        name="kllm_column",
        factory="qllm_cores.hdl.kllm.column:KllmColumn",
        configs={
            # KLLM section III-B, Fig. 3(a) / Table I: one output element of a W4A4
            # K-Means x K-Means MatMul (Concat, 16-input counter, weighted sum).
            "kllm-a4": {"a_bits": 4, "b_bits": 4, "mode": "kk"},
            # W4A3 (KLLM-A3).
            "kllm-a3": {"a_bits": 3, "b_bits": 4, "mode": "kk"},
            # Not a KLLM configuration (KLLM-A3 is W4A3): 3-bit x 3-bit indices, 64 bins.
            "w3a3-64bins": {"a_bits": 3, "b_bits": 3, "mode": "kk"},
            # Integer x K-Means (attention scores x V, Fig. 3(b)): 4-bit activation
            # indices, 4-bit integer weights.
            "kllm-ik-a4": {"a_bits": 4, "mode": "ik", "weight_bits": 4},
        },
        testbench="qllm_cores.verif.kllm.tb_column",
        golden="qllm_cores.golden.kllm.beats:kllm_column",
        doc="docs/units/kllm_column.md",
        # KLLM's two kk configurations and the integer x K-Means one; kllm-a4 is placed on
        # the ECP5 85F: it fills 97 % of the 25F's LUTs and did not route there in the
        # flow's 1,200 s (docs/units/kllm_column.md). On ECP5 the W4A4 column fits the 25F
        # with its counter's per-lane histograms in block RAM (ECP5 only).
        report=(ReportConfig("kllm-a4", fmax_skip=("ecp5",)), ReportConfig("kllm-a3"),
                ReportConfig("kllm-ik-a4"),
                ReportConfig("kllm-a4", overrides=(("counts", "memory"), ("target", "ecp5")))),
        summary="KLLM index-based MatMul column: Concat, counter, FP32 codebook weighted sum",
        result="MAC",
        rate=lambda p: p["n_inputs"],
        baseline="fp16_mac",
        ops_per_cycle=None,
    ),
    UnitSpec(
        name="orizuru",
        factory="qllm_cores.hdl.kllm.orizuru.orizuru:Orizuru",
        configs={
            # KLLM Table I: 16-input Orizuru units; the 0.5 % largest and smallest of a
            # 4096-wide token (20 per side) from 273 of them (16^2 + 16 + 1).
            "kllm-16": {"n": 16, "k": 2},
            "kllm-4096": {"n": 4096, "k": 20},
        },
        testbench="qllm_cores.verif.kllm.tb_orizuru",
        golden="qllm_cores.golden.kllm.beats:orizuru",
        doc="docs/units/orizuru.md",
        # Orizuru's one-cycle-per-pop circuit (every comparison of a pop unrolled in space)
        # beside the paper's time-multiplexed trees; both against the scan baseline.
        report=(ReportConfig("kllm-16"),
                ReportConfig("kllm-16", overrides=(("structure", "unrolled"),))),
        benchmark="qllm_cores.verif.benchmarks:orizuru_table",
        summary="KLLM Orizuru: top-k largest and smallest, shared-leaf max/min trees",
        result="vector",
        rate=lambda p: 1 / _orizuru_cycles(p),
        baseline="orizuru_scan",
    ),
    UnitSpec(
        name="orizuru_scan",
        factory="qllm_cores.hdl.kllm.orizuru.orizuru:OrizuruScan",
        testbench="qllm_cores.verif.kllm.tb_orizuru",
        golden="qllm_cores.golden.kllm.beats:orizuru",
        doc="docs/units/orizuru.md",
        summary="Baseline for orizuru: k-pass max/min scan, same interface and outputs",
        result="vector",
        rate=lambda p: 1 / p["k"],
    ),
    UnitSpec(
        name="orizuru_sortnet",
        factory="qllm_cores.hdl.kllm.orizuru.sortnet:OrizuruSortnet",
        configs={
            # Orizuru's paper configuration (KLLM Table I), for the report row beside it.
            "kllm-16": {"n": 16, "k": 2},
        },
        testbench="qllm_cores.verif.kllm.tb_orizuru",
        golden="qllm_cores.golden.kllm.beats:orizuru",
        doc="docs/units/orizuru.md",
        # Orizuru's second baseline beside `orizuru_scan` (derived from the registry's
        # `baseline`): the pipelined top-k/bottom-k sorting network, at the same n and k,
        # its own default depth.
        report=(ReportConfig("kllm-16", baseline_of="orizuru@kllm-16"),),
        summary="Baseline for orizuru: pipelined top-k/bottom-k sorting network, same "
                "interface and outputs",
        result="vector",
        rate=lambda p: 1 / p["k"],
    ),
)
