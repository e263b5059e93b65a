"""Throughput tables measured in simulation (cycles, not seconds): ``make bench``.

Each function prints one unit's table; the registry names it (``UnitSpec.benchmark``) and
``qllm bench [--unit U]`` runs them.
"""

from qllm_cores.gen import UNITS

from .runner import run_testbench

__all__ = ["counter_table", "oaken_table", "orizuru_table"]


#: The counter table's rows: (configuration, bench environment).
COUNTER_BENCHMARKS = [
    ("kllm-a4", {"QLLM_COLUMNS": 16, "QLLM_K": 4096}),
    ("kllm-a4", {"QLLM_COLUMNS": 16, "QLLM_K": 1024}),
    ("w3a3-64bins", {"QLLM_COLUMNS": 16, "QLLM_K": 4096}),
    ("kllm-ik-a4", {"QLLM_COLUMNS": 16, "QLLM_K": 4096}),
]


def counter_table():
    """``kllm_idx_counter``: sustained indices per cycle and readout overlap per configuration."""
    print("| unit | config | K | bins | indices/cycle | cycles/column | readout overlap | "
          "first-bin latency | total cycles (serial) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for config, env in COUNTER_BENCHMARKS:
        metrics = run_testbench("kllm_idx_counter", {}, config=config,
                                testcase="sustained_throughput", extra_env=env, name="bench")
        m = metrics["sustained_throughput"]
        print(f"| kllm_idx_counter | {config} | {m['k']} | {m['bins']} | "
              f"{m['indices_per_cycle']:.2f} | {m['cycles_per_column']:.1f} | "
              f"{100 * m['readout_overlap']:.0f} % | {m['first_bin_latency']} | "
              f"{m['total_cycles']} ({m['serial_cycles']}) |")


def orizuru_table():
    """``orizuru``: cycles per vector back to back, against the analytical count, per structure."""
    from qllm_cores.hdl.kllm.orizuru.orizuru import DEFAULT_PIPELINES, cycles_per_vector
    print("| unit | structure | n | k | cycles/vector (back to back) | analytical | "
          "latency to first beat |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for structure in ("tree", "unrolled", "units"):
        for n in (8, 16, 64):
            for k in (1, 2, 4):
                params = {"n": n, "k": k, "structure": structure}
                metrics = run_testbench("orizuru", params, testcase="sustained_rate",
                                        extra_env={"QLLM_RATE_VECTORS": 64}, name="bench")
                m = metrics["sustained_rate"]
                pipeline = DEFAULT_PIPELINES[structure]
                analytical = cycles_per_vector(n, k, structure, pipeline)
                print(f"| orizuru | {structure} | {n} | {k} | {m['cycles_per_vector']:.2f} | "
                      f"{analytical} | {m['latency']} |")


def oaken_table():
    """``oaken_dequantizer``: output beats per cycle against the outlier density."""
    densities = (0.0, 0.01, 0.1, 0.5, 1.0)
    print("| unit | config | COO packing | chunks/density | "
          + " | ".join(f"beats/cycle at {100 * d:g} %" for d in densities)
          + " | first beat (cycle) |")
    print("|---|---|---|---:|" + "---:|" * len(densities) + "---:|")
    for config, packing in (("oaken-16", "full"), ("oaken-16", "random"), ("oaken-64", "full"),
                            ("oaken-64", "random")):
        metrics = run_testbench("oaken_dequantizer", {}, config=config,
                                testcase=[f"sustained_rate/density={d!r}" for d in densities],
                                extra_env={"QLLM_CHUNKS": 2000, "QLLM_COO_PACKING": packing},
                                name=f"bench-{packing}")
        runs = [metrics[f"sustained_rate[{d}]"] for d in densities]
        lanes = UNITS["oaken_dequantizer"].configs[config]["lanes"]
        print(f"| oaken_dequantizer | {config} | {packing} | {runs[0]['beats'] * lanes // 64} | "
              + " | ".join(f"{r['beats_per_cycle']:.3f}" for r in runs)
              + f" | {runs[0]['first_beat_cycle']} |")
