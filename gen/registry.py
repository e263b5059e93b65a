# amaranth: UnusedElaboratable=no
# (Components built here are handed to a converter, a bench or a board build; one a constructor
# refused half-way, or one built only for its signature, is not a forgotten submodule.)
"""Registry of units: name -> component factory, default parameters, paper configurations."""

import importlib
import inspect
from dataclasses import dataclass, field
from functools import cached_property

__all__ = ["ReportConfig", "UnitSpec", "UNITS", "load_object", "resolve_params",
           "parse_assignment"]


def load_object(reference):
    """The object a ``"module:name"`` string names (``name`` may be dotted: ``"m:Class.attr"``),
    imported on demand: the registry names factories and golden adapters without importing
    them.

    Raises
    ------
    ValueError
        If ``reference`` is not of the form ``"module:name"``.
    ImportError, AttributeError
        If the module or the name does not exist.
    """
    module_name, sep, name = str(reference).partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"expected a 'module:name' reference, not {reference!r}")
    target = importlib.import_module(module_name)
    for part in name.split("."):
        target = getattr(target, part)
    return target


@dataclass(frozen=True)
class ReportConfig:
    """One row of ``make report`` for a unit (:mod:`fpga.report` builds its rows from these).

    Attributes
    ----------
    config : str or None
        Named configuration of the unit, or None for the defaults.
    overrides : tuple of (str, value)
        Parameters set on top of the configuration.
    baseline_of : str, tuple of str or None
        Label(s) of the report row(s) (``unit@config``) this row is a second baseline of
        (the report's ratio table compares them with it too).
    fmax : bool
        Whether to place and route the row (False: area only, the reason given where the row
        is listed).
    fmax_skip : tuple of str
        Devices of the report's Fmax columns (``fpga.fmax`` targets) not tried for this row:
        it goes straight to the column's next, larger device (the reason given where the row
        is listed).
    """

    config: str | None = None
    overrides: tuple = ()
    baseline_of: str | tuple[str, ...] | None = None
    fmax: bool = True
    fmax_skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class UnitSpec:
    """How to build one unit.

    Parameters
    ----------
    name : str
        Unit name; also the Verilog top module and the file stem in ``build/verilog``.
    factory : str
        ``"module:Class"`` of the :class:`amaranth.lib.wiring.Component`, imported lazily so
        that listing units does not elaborate anything.
    configs : dict
        Named configurations from the papers: name -> parameter overrides.
    testbench : str
        Dotted name of the cocotb test module in ``verif``.
    golden : str or None
        ``"qllm_cores.golden.<paper>.beats:<name>"``: the unit's beat-level golden adapter
        (:class:`golden.common.beats.BeatModel`: input beats -> expected output beats), shared by
        the bench and the board host; resolved lazily (:func:`load_object`, or
        ``verif.bench.golden_model(unit)``).
    doc : str or None
        The unit's documentation, relative to the repository root (``docs/units/...``).
    report : tuple of ReportConfig
        The unit's rows of ``make report`` (its registered baseline's rows are derived).
    benchmark : str or None
        ``"module:function"`` printing the unit's throughput table (``make bench``).
    summary : str
        One line for ``qllm list``.
    baseline : str or None
        Unit to compare area with (``make area`` prints the ratio when both are synthesized).
    ops_per_cycle : int or None
        Operations (MACs, comparisons...) per cycle at full rate, for area-efficiency figures.
    result : str
        What one result of the unit is (``"MAC"``, ``"vector"``...): a unit and its baseline
        name the same thing, so their throughputs compare.
    rate : callable or None
        ``rate(params) -> float``: results per cycle at full rate (no backpressure, the
        pipeline full) for resolved ``params``; throughput = Fmax x rate.
    """

    name: str
    factory: str
    configs: dict = field(default_factory=dict)
    testbench: str | None = None
    golden: str | None = None
    doc: str | None = None
    report: tuple = ()
    benchmark: str | None = None
    summary: str = ""
    baseline: str | None = None
    ops_per_cycle: int | None = None
    result: str = "beat"
    rate: object = None

    @cached_property
    def defaults(self):
        """Every constructor parameter with its default, read from the factory's signature
        (keyword-only parameters, in order); ``None`` where the unit chooses (``orizuru``'s
        ``structure``, the counter's ``weight_bits`` outside mode ``ik``)."""
        signature = inspect.signature(load_object(self.factory))
        return {name: parameter.default for name, parameter in signature.parameters.items()
                if parameter.kind is inspect.Parameter.KEYWORD_ONLY}

    def resolved(self, component):
        """The parameters ``component`` was built with, as it resolved them (a ``None``
        default replaced by what the unit chose; parameters that do not apply, i.e. still
        ``None``, left out): what the manifest records."""
        return {name: getattr(component, name) for name in self.defaults
                if getattr(component, name, None) is not None}

    def results_per_cycle(self, params):
        """Results per cycle at full rate for resolved ``params`` (None if not declared)."""
        return None if self.rate is None else float(self.rate(params))

    def build(self, params):
        """Return the component for fully resolved ``params``."""
        return load_object(self.factory)(**params)


def _accllm_products(params):
    """Products per beat of the packed multiplier (and of its plain baseline)."""
    if params["mode"] == "w2" and params["cross_products"]:
        return 4
    return 2


def _orizuru_cycles(params):
    """Cycles per vector of ``orizuru`` back to back (see :func:`hdl.kllm.orizuru.orizuru.cycles_per_vector`)."""
    from qllm_cores.hdl.kllm.orizuru.orizuru import DEFAULT_PIPELINES, cycles_per_vector, resolve_structure
    structure = resolve_structure(params["n"], params.get("structure"))
    pipeline = params["pipeline"]
    if pipeline is None:
        pipeline = DEFAULT_PIPELINES[structure]
    return cycles_per_vector(params["n"], params["k"], structure, pipeline)


UNITS = {
    spec.name: spec
    for spec in [
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
            testbench="qllm_cores.verif.tb_kllm_concat",
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
            testbench="qllm_cores.verif.tb_kllm_idx_counter",
            golden="qllm_cores.golden.kllm.beats:kllm_idx_counter",
            doc="docs/units/kllm_idx_counter.md",
            # KLLM's two configurations, W4A4 and W4A3, both placed on the ECP5 25F.
            report=(ReportConfig("kllm-a4"), ReportConfig("kllm-a3")),
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
            testbench="qllm_cores.verif.tb_kllm_column",
            golden="qllm_cores.golden.kllm.beats:kllm_column",
            doc="docs/units/kllm_column.md",
            # KLLM's two kk configurations and the integer x K-Means one; kllm-a4 is placed on
            # the ECP5 85F: it fills 97 % of the 25F's LUTs and did not route there in the
            # flow's 1,200 s (docs/units/kllm_column.md).
            report=(ReportConfig("kllm-a4", fmax_skip=("ecp5",)), ReportConfig("kllm-a3"),
                    ReportConfig("kllm-ik-a4")),
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
            testbench="qllm_cores.verif.tb_orizuru",
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
            testbench="qllm_cores.verif.tb_orizuru",
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
            testbench="qllm_cores.verif.tb_orizuru",
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
        UnitSpec(
            name="oaken_decomposer",
            factory="qllm_cores.hdl.oaken.decomposer:OakenDecomposer",
            configs={
                # Oaken section 5.2 / contract 4: 16-bit fixed-point KV values, 16 per beat.
                "oaken-16": {"lanes": 16, "data_bits": 16},
                # A whole 64-element chunk per beat.
                "oaken-64": {"lanes": 64, "data_bits": 16},
            },
            testbench="qllm_cores.verif.tb_oaken_decomposer",
            golden="qllm_cores.golden.oaken.beats:oaken_decomposer",
            doc="docs/units/oaken.md",
            report=(ReportConfig("oaken-16"),),
            result="element",
            rate=lambda p: p["lanes"],
            summary="Oaken decomposer: threshold grouping, group shift, inlier/outlier lanes",
        ),
        UnitSpec(
            name="oaken_dequantizer",
            factory="qllm_cores.hdl.oaken.dequantizer.dequantizer:OakenDequantizer",
            configs={
                "oaken-16": {"lanes": 16, "vec_len": 64, "data_bits": 16, "frac_bits": 8},
                "oaken-64": {"lanes": 64, "vec_len": 64, "data_bits": 16, "frac_bits": 8},
            },
            testbench="qllm_cores.verif.tb_oaken_dequantizer",
            golden="qllm_cores.golden.oaken.beats:oaken_dequantizer",
            doc="docs/units/oaken.md",
            report=(ReportConfig("oaken-16"),),
            benchmark="qllm_cores.verif.benchmarks:oaken_table",
            result="element",
            rate=lambda p: p["lanes"],
            summary="Oaken dequantizer: COO zero insert, per-group integer dequantization",
        ),
        UnitSpec(
            name="oaken_quantizer",
            factory="qllm_cores.hdl.oaken.quantizer.quantizer:OakenQuantizer",
            configs={
                "oaken-16": {"lanes": 16, "vec_len": 64, "data_bits": 16, "frac_bits": 8},
            },
            testbench="qllm_cores.verif.tb_oaken_quantizer",
            golden="qllm_cores.golden.oaken.beats:oaken_quantizer",
            doc="docs/units/oaken_quantizer.md",
            report=(ReportConfig("oaken-16"),),
            result="element",
            rate=lambda p: p["lanes"],
            summary="Oaken online quantizer: chunk min/max, 4-bit codes, dense + COO streams",
        ),
        UnitSpec(
            name="p3_pe",
            factory="qllm_cores.hdl.p3.pe:P3Pe",
            configs={
                # P3-LLM section V-C / Fig. 6(c): one PE of the PCU, a 4-way dot product.
                "p3-pcu-pe": {},
            },
            testbench="qllm_cores.verif.tb_p3_pe",
            golden="qllm_cores.golden.p3.beats:p3_pe",
            doc="docs/units/p3_pe.md",
            report=(ReportConfig("p3-pcu-pe"),),
            result="MAC",
            rate=lambda p: 4,
            summary="P3-LLM PE: 4-way FP8 (E4M3/S0E4M4) x INT4/BitMoD dot product, 32-bit acc",
            baseline="fp16_mac",
            ops_per_cycle=4,
        ),
        UnitSpec(
            name="p3_pcu",
            factory="qllm_cores.hdl.p3.pcu:P3Pcu",
            configs={
                # P3-LLM section V-C / Fig. 6(c): 16 PEs, a 1 x 4 x 16 tile per column read.
                "p3-pcu": {"pes": 16, "reuse": 1},
                # Section V-D / Fig. 7: the throughput-enhanced PCU, two accumulator sets.
                "p3-pcu-te": {"pes": 16, "reuse": 2},
            },
            testbench="qllm_cores.verif.tb_p3_pcu",
            golden="qllm_cores.golden.p3.beats:p3_pcu",
            doc="docs/units/p3_pcu.md",
            report=(ReportConfig("p3-pcu"), ReportConfig("p3-pcu-te")),
            result="MAC",
            rate=lambda p: 4 * p["pes"],
            summary="P3-LLM PCU: 16 PEs sharing FP8 activations, 1 x 4 x 16 GEMV tile per beat",
            baseline="fp16_pcu",
            ops_per_cycle=64,
        ),
        UnitSpec(
            name="fp16_mac",
            factory="qllm_cores.hdl.baselines.fp16_mac.fp16_mac:Fp16Mac",
            configs={
                # contract 5's second reading (the papers do not say which accumulator their
                # "FP16 MAC" has): binary16 accumulator, product rounded to binary16.
                "fp16-acc": {"acc": "fp16"},
            },
            testbench="qllm_cores.verif.tb_fp16_mac",
            golden="qllm_cores.golden.baselines.beats:fp16_mac",
            doc="docs/units/fp16_mac.md",
            # The other reading of "an FP16 MAC" beside the FP32-accumulating one (the derived
            # baseline of these rows): the ratio table shows both.
            report=(ReportConfig("fp16-acc", baseline_of=(
                "p3_pe@p3-pcu-pe", "kllm_column@kllm-a4", "kllm_column@kllm-a3",
                "kllm_column@kllm-ik-a4")),),
            result="MAC",
            rate=lambda p: 1,
            summary="Baseline for p3_pe: FP16 x FP16 multiply, FP32 accumulate (HBM-PIM style)",
            ops_per_cycle=1,
        ),
        UnitSpec(
            name="fp16_pcu",
            factory="qllm_cores.hdl.baselines.fp16_pcu:Fp16Pcu",
            testbench="qllm_cores.verif.tb_fp16_pcu",
            golden="qllm_cores.golden.baselines.beats:fp16_pcu",
            doc="docs/units/fp16_pcu.md",
            result="MAC",
            rate=lambda p: p["lanes"],
            summary="Baseline for p3_pcu: HBM-PIM PCU, 16 FP16 x FP16 MACs sharing one "
                    "activation, FP32 accumulate",
            # At the default 16 lanes (ops_per_cycle is one number per unit; rate follows
            # lanes).
            ops_per_cycle=16,
        ),
        UnitSpec(
            name="accllm_dsp_mul",
            factory="qllm_cores.hdl.accllm.dsp_mul.dsp_mul:AccllmDspMul",
            configs={
                # AccLLM section V-B3, Fig. 10(d): one DSP48E2 per two precision-scalable
                # multipliers. (1) A8 x LoRA W8; (2) Q x K / S x V, 8 x 4 bits; (3) A8 x W2 after
                # the 2:4 sparse selector, four products of which X1 W1 and X2 W2 are kept.
                "accllm-w8-xilinx": {"mode": "w8", "target": "xilinx"},
                "accllm-w4-xilinx": {"mode": "w4", "target": "xilinx"},
                "accllm-w2-xilinx": {"mode": "w2", "target": "xilinx"},
                # The figure zero-extends X into B: unsigned activations.
                "accllm-w2-xilinx-unsigned": {"mode": "w2", "target": "xilinx",
                                              "x_signed": False},
                # Dot-product tiles accumulated in the P register (WP486's 7 INT8 products).
                "accllm-w8-xilinx-acc7": {"mode": "w8", "target": "xilinx", "acc_depth": 7},
                # Other geometries: mode w4 only (see docs/units/accllm_dsp_mul.md).
                "accllm-w4-ecp5": {"mode": "w4", "target": "ecp5"},
                "accllm-w4-ice40": {"mode": "w4", "target": "ice40", "x_bits": 7},
            },
            testbench="qllm_cores.verif.tb_accllm_dsp_mul",
            golden="qllm_cores.golden.accllm.beats:accllm_mul",
            doc="docs/units/accllm_dsp_mul.md",
            # AccLLM: the DSP48E2 packings (Xilinx only) and the packings ECP5/iCE40 allow.
            report=tuple(ReportConfig(config) for config in (
                "accllm-w4-xilinx", "accllm-w2-xilinx", "accllm-w4-ecp5", "accllm-w4-ice40")),
            summary="AccLLM DSP-packed multiplier: 2 (w8/w4) or 4 (w2) products per DSP48E2",
            result="product",
            rate=_accllm_products,
            baseline="accllm_plain_mul",
            ops_per_cycle=2,
        ),
        UnitSpec(
            name="accllm_plain_mul",
            factory="qllm_cores.hdl.accllm.dsp_mul.dsp_mul:AccllmPlainMul",
            testbench="qllm_cores.verif.tb_accllm_dsp_mul",
            golden="qllm_cores.golden.accllm.beats:accllm_mul",
            doc="docs/units/accllm_dsp_mul.md",
            summary="Baseline for accllm_dsp_mul: the same products from separate multipliers",
            result="product",
            rate=_accllm_products,
            ops_per_cycle=2,
        ),
        UnitSpec(
            name="accllm_sparse_selector",
            factory="qllm_cores.hdl.accllm.sparse_selector:AccllmSparseSelector",
            configs={
                # AccLLM section VI-A2: RCE (R x M) x T = (32 x 16) x 16, A8 activations. In 2:4
                # mode a PE block's R = 32 multipliers take 32 selected inputs per cycle, 2 per
                # group of 4: 16 groups (64 dense inputs) per weight row. MM mode broadcasts the
                # inputs to the M = 16 blocks of a tile (Fig. 10(b)), each its own weight row.
                "accllm-block": {"groups": 16, "rows": 1, "x_bits": 8, "x_signed": True},
                "accllm-tile": {"groups": 16, "rows": 16, "x_bits": 8, "x_signed": True},
            },
            testbench="qllm_cores.verif.tb_accllm_sparse_selector",
            golden="qllm_cores.golden.accllm.beats:accllm_sparse_selector",
            doc="docs/units/accllm_sparse_selector.md",
            report=(ReportConfig("accllm-block"),),
            result="selected pair",
            rate=lambda p: p["groups"] * p["rows"],
            summary="AccLLM 2:4 sparse selector: x1/x2 = x[4g + idx1/idx2] per row, registered",
        ),
        UnitSpec(
            name="accllm_pe",
            factory="qllm_cores.hdl.accllm.pe.pe:AccllmPe",
            configs={
                # AccLLM section V-B, Fig. 10: two precision-scalable multipliers of adjacent
                # PE blocks on one DSP48E2 (mode w8 / w4 / w2 per beat), each with its partial
                # sum accumulated across cycles; U280 target.
                "accllm-pe-xilinx": {"target": "xilinx"},
                # The figure zero-extends X into B: unsigned activations.
                "accllm-pe-xilinx-unsigned": {"target": "xilinx", "x_signed": False},
                # The same PE in fabric multipliers (any synthesizer) and on ECP5 with the
                # operands in the MULT18X18D input registers.
                "accllm-pe-generic": {"target": "generic"},
                "accllm-pe-ecp5": {"target": "ecp5"},
            },
            testbench="qllm_cores.verif.tb_accllm_pe",
            golden="qllm_cores.golden.accllm.beats:accllm_pe",
            doc="docs/units/accllm_pe.md",
            # One DSP48E2 (xilinx, area only) and the fabric / MULT18X18D PE (ECP5 Fmax).
            report=(ReportConfig("accllm-pe-xilinx"), ReportConfig("accllm-pe-ecp5"),
                    ReportConfig("accllm-pe-generic")),
            result="MAC",
            rate=lambda p: 2,
            summary="AccLLM PE: mode w8/w4/w2 (KV4 zero points) per beat on one DSP48E2, two "
                    "exact accumulators",
            ops_per_cycle=2,
        ),
    ]
}


def parse_assignment(text):
    """Split ``key=value`` into ``(key, value)``; integers (any base prefix), booleans and
    ``None`` are parsed, anything else stays a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ValueError(f"parameter assignment must look like key=value, not {text!r}")
    raw = raw.strip()
    if raw in ("True", "true"):
        return key.strip(), True
    if raw in ("False", "false"):
        return key.strip(), False
    if raw in ("None", "none"):
        return key.strip(), None
    try:
        return key.strip(), int(raw, 0)
    except ValueError:
        return key.strip(), raw


def resolve_params(unit, config=None, overrides=None):
    """Return ``(spec, params)``: defaults, then the named ``config``, then ``overrides``.

    Raises
    ------
    ValueError
        If the unit, the configuration or a parameter name is unknown.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; known units: {', '.join(sorted(UNITS))}")
    spec = UNITS[unit]
    params = dict(spec.defaults)
    if config is not None:
        if config not in spec.configs:
            known = ", ".join(sorted(spec.configs)) or "none"
            raise ValueError(f"unknown configuration {config!r} for unit {unit!r}; known: {known}")
        params.update(spec.configs[config])
    for key, value in (overrides or {}).items():
        if key not in spec.defaults:
            known = ", ".join(sorted(spec.defaults))
            raise ValueError(f"unknown parameter {key!r} for unit {unit!r}; known: {known}")
        params[key] = value
    return spec, params
