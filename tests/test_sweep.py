"""Tests of `fpga.sweep`: command-line checks, reports, and real sweeps of ``kllm_concat`` on a
local process pool and on a dask ``LocalCluster``."""

from __future__ import annotations

import csv
import gc
import io
import json
import os
import shutil
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pytest

from qllm_cores.fpga.fmax import SEEDS
from qllm_cores.fpga.jobs import DASK_INSTALL_HINT, Failure, LocalExecutor, make_executor
from qllm_cores.fpga.sweep import PointResult, SweepResult, main, make_plan, parse_value, run_sweep
from qllm_cores.fpga.sweep_report import CSV_COLUMNS, plot_sweep, sweep_csv, sweep_table

ROOT = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LANES = (1, 2, 4)


def _new_build_dir() -> Path:
    # Under the project, not /tmp: the YoWASP tools run in WebAssembly (see fpga/yosys.py).
    return ROOT / "build" / "test-sweep" / uuid.uuid4().hex


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    try:
        path.parent.rmdir()          # build/test-sweep, once no other test uses it
    except OSError:
        pass


@pytest.fixture
def build_dir():
    path = _new_build_dir()
    yield path
    _remove(path)


def _rows(csv_path: Path) -> list[dict]:
    with open(csv_path, newline="") as stream:
        return list(csv.DictReader(stream))


def _metrics(rows: list[dict]) -> dict:
    """{(param_value, target, metric): value} from CSV rows."""
    return {(row["param_value"], row["target"], row["metric"]): row["value"] for row in rows}


def _sweep_args(build_dir: Path, *values, targets=("ice40",), fmax=()) -> list[str]:
    args = ["--unit", "kllm_concat", "--param", "lanes", "--values", *map(str, values),
            "--target", *targets, "--build-dir", str(build_dir), "--jobs", "2"]
    return args + (["--fmax-target", *fmax] if fmax else [])


def _refusal(**params) -> str:
    """The message KllmConcat's constructor raises for `params`."""
    from qllm_cores.hdl.kllm.concat import KllmConcat

    with warnings.catch_warnings():      # the half-built component is "never used"
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError) as refused:
            KllmConcat(**params)
        message = str(refused.value)
        del refused
        gc.collect()
    return message


# --------------------------------------------------------------------------- fast checks


@pytest.mark.parametrize("args, message", [
    (["--unit", "nope", "--param", "lanes", "--values", "1"], "unknown unit 'nope'"),
    (["--unit", "kllm_concat", "--param", "width", "--values", "1"],
     "unknown parameter 'width' for unit 'kllm_concat'; known: a_bits, b_bits, lanes, pipeline"),
    (["--unit", "kllm_concat", "--param", "lanes"], "no values to sweep lanes"),
    (["--unit", "kllm_concat", "--param", "lanes", "--values"], "no values to sweep lanes"),
    (["--unit", "kllm_concat", "--param", "lanes", "--values", "1", "--set", "lanes=2"],
     "lanes is the swept parameter"),
    (["--unit", "kllm_concat", "--param", "lanes", "--values", "1", "--set", "depth=2"],
     "unknown parameter 'depth'"),
    (["--unit", "kllm_concat", "--param", "lanes", "--values", "1", "--config", "nope"],
     "unknown configuration 'nope'"),
])
def test_bad_input_exits_2(args, message, capsys):
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_bad_target_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--unit", "kllm_concat", "--param", "lanes", "--values", "1", "--target", "asic"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'asic'" in capsys.readouterr().err


def test_values_parse_like_set():
    assert [parse_value("p", text) for text in ("8", "0x10", "true", "none", "w4")] == \
        [8, 16, True, None, "w4"]
    plan = make_plan("kllm_concat", "lanes", ["4", "1", "4", "0x2"], config="kllm-a3-16",
                     area_targets=["cmos"], build_dir="build")
    assert plan.values == (4, 1, 2)                   # duplicates removed, order kept
    assert plan.other_params() == {"a_bits": 3, "b_bits": 4, "pipeline": 0}
    assert plan.point_dir(4) == ROOT / "build" / "sweep" / "kllm_concat-lanes" / "4"


def test_scheduler_without_dask_exits_2(monkeypatch, capsys):
    # A None entry makes `import distributed` raise ImportError, as if it were not installed.
    for name in ("dask", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)
    args = ["--unit", "kllm_concat", "--param", "lanes", "--values", "1",
            "--scheduler", "tcp://127.0.0.1:8786"]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert "--scheduler needs dask.distributed" in error and DASK_INSTALL_HINT in error
    with make_executor(None, 1) as executor:       # the local pool needs no dask
        assert isinstance(executor, LocalExecutor)


def test_module_imports_without_dask_or_tqdm():
    code = ("import sys; sys.modules.update(dask=None, distributed=None, tqdm=None); "
            "import qllm_cores.fpga.sweep; print('ok')")
    completed = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                               text=True, timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "ok"


def test_reports_of_a_categorical_sweep(build_dir):
    """CSV, table and plot from made-up results: string values, a failed point, a failed
    run, a skipped target, three plot panels."""
    plan = make_plan("accllm_dsp_mul", "mode", ["w2", "w4", "w8", "w3"],
                     area_targets=["ice40", "cmos"], fmax_targets=["ice40"],
                     build_dir=build_dir)
    area = {"ice40": {"LUT": 10, "FF": 5, "CARRY": 0, "DSP": 1, "BRAM": 0},
            "cmos": {"transistors": 9000, "cells": 700, "uncosted_cells": 0}}
    fmax = {"fmax_mhz": 51.234, "resources": {"LC": 40, "DSP": 1, "BRAM": 0}, "wrapper_ff": 30}
    points = [
        PointResult("w2", params={}, area=area, fmax={"ice40": fmax}, latency=3),
        PointResult("w4", params={}, area={"ice40": area["ice40"]}, fmax={"ice40": fmax},
                    failures={("area", "cmos"): Failure(
                        ("area", "w4", "cmos"),
                        "SynthError: yosys exited with code 1\nERROR: out of memory")}),
        PointResult("w8", params={}, area={"cmos": area["cmos"]},
                    skipped=[("area", "ice40"), ("fmax", "ice40")]),
        PointResult("w3", failure=Failure(
            ("generate", "w3", None),
            "ValueError: mode must be one of 'w2', 'w4', 'w8', not 'w3'")),
    ]
    result = SweepResult(plan, points, "test", 0.0)

    rows = list(csv.DictReader(io.StringIO(sweep_csv(result))))
    assert tuple(rows[0]) == CSV_COLUMNS
    # w2: latency, ice40, cmos, fmax; w4: ice40, fmax; w8: cmos
    assert len(rows) == 1 + 5 + 3 + 5 + 5 + 5 + 3
    assert {row["param_value"] for row in rows} == {"w2", "w4", "w8"}
    assert _metrics(rows)["w2", "manifest", "latency"] == "3"
    assert _metrics(rows)["w2", "ice40", "fmax_mhz"] == "51.23"
    assert _metrics(rows)["w2", "ice40", "pnr_LC"] == "40"

    table = sweep_table(result)
    assert "| mode | latency (cycles) | target | LUT | FF | CARRY | DSP | BRAM | transistors " \
           "| cells | uncosted_cells | Fmax MHz |" in table
    assert "| w2 | 3 | ice40 | 10 | 5 |" in table
    assert "| w4 | - | cmos | - | - | - | - | - | failed | failed | failed | - |" in table
    assert "| w8 | - | ice40 | skipped |" in table
    assert "| w3 | - | failed |" in table
    assert "- mode=w3: ValueError: mode must be one of" in table
    assert "- mode=w4 area cmos failed: SynthError: yosys exited with code 1 " \
           "(ERROR: out of memory)" in table

    png = plot_sweep(result, build_dir / "categorical.png")
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000


# --------------------------------------------------------------------------- real sweeps


@pytest.fixture(scope="module")
def local_sweep():
    """One real sweep on the local pool: lanes 1, 2, 4 on ice40."""
    build_dir = _new_build_dir()
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        from contextlib import redirect_stderr, redirect_stdout

        with redirect_stdout(stdout), redirect_stderr(stderr):
            status = main(_sweep_args(build_dir, *LANES))
        reports = build_dir / "reports"
        yield {"status": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(),
               "build_dir": build_dir,
               "rows": _rows(reports / "sweep-kllm_concat-lanes.csv")
               if (reports / "sweep-kllm_concat-lanes.csv").is_file() else [],
               "png": reports / "sweep-kllm_concat-lanes.png"}
    finally:
        _remove(build_dir)


@pytest.mark.synth
def test_local_sweep_area_follows_the_unit(local_sweep):
    assert local_sweep["status"] == 0, local_sweep["stderr"]
    rows = local_sweep["rows"]
    assert {(row["unit"], row["param"], row["target"]) for row in rows} == \
        {("kllm_concat", "lanes", "ice40"), ("kllm_concat", "lanes", "manifest")}
    metrics = _metrics(rows)
    latency = {value: int(v) for (value, target, metric), v in metrics.items()
               if (target, metric) == ("manifest", "latency")}
    assert set(latency) == {str(lanes) for lanes in LANES} and min(latency.values()) >= 1
    for lanes in LANES:
        assert {metric for value, target, metric in metrics
                if value == str(lanes) and target == "ice40"} == \
            {"LUT", "FF", "CARRY", "DSP", "BRAM"}
    sweep_dir = local_sweep["build_dir"] / "sweep" / "kllm_concat-lanes"
    previous = None
    for lanes in LANES:
        manifest = json.loads((sweep_dir / str(lanes) / "verilog" / "kllm_concat.json")
                              .read_text())
        params = manifest["params"]
        assert params["lanes"] == lanes
        # hdl/kllm/concat.py registers y (lanes x (a_bits + b_bits) bits, no reset) and
        # output_register() adds the o.valid flip-flop: nothing else is stateful.
        flip_flops = int(metrics[str(lanes), "ice40", "FF"])
        assert flip_flops == lanes * (params["a_bits"] + params["b_bits"]) + 1
        current = {metric: int(metrics[str(lanes), "ice40", metric]) for metric in ("LUT", "FF")}
        if previous is not None:
            assert all(current[m] >= previous[m] for m in current), (previous, current)
        previous = current
    assert "| lanes | latency (cycles) | target | LUT | FF | CARRY | DSP | BRAM |" \
        in local_sweep["stdout"]
    assert f"| 4 | {latency['4']} | ice40 | " in local_sweep["stdout"]
    png = local_sweep["png"]
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 0


@pytest.mark.synth
def test_invalid_value_fails_alone_and_fmax_runs(build_dir, capsys):
    assert main(_sweep_args(build_dir, 0, 2, fmax=("ice40",))) == 0
    captured = capsys.readouterr()
    refusal = _refusal(lanes=0)
    assert f"- lanes=0: ValueError: {refusal}" in captured.out
    assert "| 0 | - | failed |" in captured.out
    rows = _rows(build_dir / "reports" / "sweep-kllm_concat-lanes.csv")
    assert {row["param_value"] for row in rows} == {"2"}
    metrics = _metrics(rows)
    assert int(metrics["2", "ice40", "FF"]) == 2 * 8 + 1
    assert float(metrics["2", "ice40", "fmax_mhz"]) > 0
    assert int(metrics["2", "ice40", "pnr_LC"]) > 0
    assert (build_dir / "sweep" / "kllm_concat-lanes" / "2" / "fmax" / "kllm_concat-ice40"
            / f"report-s{SEEDS[0]}.json").is_file()
    assert refusal in (build_dir / "reports" / "sweep-kllm_concat-lanes.md").read_text()


@pytest.mark.synth
def test_all_points_failed_exits_1(build_dir, capsys):
    assert main(_sweep_args(build_dir, 0, 5000)) == 1
    captured = capsys.readouterr()
    assert "| 0 | - | failed |" in captured.out and "| 5000 | - | failed |" in captured.out
    assert not (build_dir / "reports" / "sweep-kllm_concat-lanes.csv").exists()


@pytest.mark.synth
def test_local_sweep_without_dask_or_tqdm(build_dir, monkeypatch, capsys):
    for name in ("dask", "distributed", "tqdm"):
        monkeypatch.setitem(sys.modules, name, None)
    assert main(_sweep_args(build_dir, 2)) == 0
    error = capsys.readouterr().err
    # Without tqdm, one line per finished job: generation, then the ice40 run.
    assert "[1/2] lanes=2: generated" in error and "[2/2] lanes=2 ice40:" in error
    assert _metrics(_rows(build_dir / "reports" / "sweep-kllm_concat-lanes.csv"))[
        "2", "ice40", "FF"] == "17"


@pytest.mark.synth
@pytest.mark.large
def test_dask_cluster_gives_the_local_results(local_sweep, build_dir):
    distributed = pytest.importorskip("distributed")
    assert local_sweep["status"] == 0, local_sweep["stderr"]
    plan = make_plan("kllm_concat", "lanes", [str(lanes) for lanes in LANES],
                     area_targets=["ice40"], build_dir=build_dir)
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster:
        with make_executor(cluster.scheduler_address, jobs=2) as executor:
            result = run_sweep(plan, executor)
            worker_pids = set(executor.client.run(os.getpid).values())
    assert [point.failure for point in result.points] == [None] * len(LANES)
    assert _metrics(list(csv.DictReader(io.StringIO(sweep_csv(result))))) == \
        _metrics(local_sweep["rows"])
    # Every job (generation and synthesis) ran in the cluster's worker process.
    ran_in = {pid for _, pid in result.workers}
    assert ran_in and ran_in <= worker_pids and os.getpid() not in ran_in
    assert (build_dir / "sweep" / "kllm_concat-lanes" / "4" / "synth" / "kllm_concat-ice40"
            / "ice40.log").is_file()
