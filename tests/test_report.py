"""`make report` (fpga.report): rows, baselines, capacity fallback, rendering, README section."""

import csv
import io
import json
import re
import shutil
import uuid
from pathlib import Path

import pytest

from qllm_cores.fpga import area, fmax, report, report_render
from qllm_cores.fpga.area import area_job
from qllm_cores.fpga.fmax import FMAX_TARGETS, FmaxError, FmaxResult, fmax_job
from qllm_cores.fpga.jobs import Failure, error_text
from qllm_cores.fpga.nextpnr import FmaxTimeout, capacity_shortfall
from qllm_cores.fpga.report import REPORT_ROWS, ReportRow, baseline_row, report_rows
from qllm_cores.fpga.report_render import (
    FMAX_COLUMNS,
    README_BEGIN,
    README_END,
    render_csv,
    render_markdown,
    render_readme_section,
    replace_readme_section,
)
from qllm_cores.gen.registry import UNITS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def work_dir():
    # Under the project: the YoWASP tools cannot see /tmp.
    path = ROOT / "build" / "test-report" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_every_row_is_a_registered_paper_configuration():
    for row in REPORT_ROWS:
        assert row.config in UNITS[row.unit].configs, row
    # Unique before report_rows() drops repeats: a row that shares its label with another is
    # silently lost (a configuration row with overrides once lost its overrides in the label).
    labels = [row.label for row in REPORT_ROWS]
    assert len(labels) == len(set(labels)), labels
    assert "orizuru@kllm-16,structure=unrolled" in labels
    labels = [row.label for row in report_rows()]
    assert len(labels) == len(set(labels))
    # Every registered unit is reported, directly or as a baseline.
    assert {row.unit for row in report_rows()} == set(UNITS)


@pytest.mark.parametrize("row", [r for r in REPORT_ROWS if UNITS[r.unit].baseline],
                         ids=lambda r: r.label)
def test_baseline_shares_every_common_parameter(row):
    base = baseline_row(row)
    assert base.unit == UNITS[row.unit].baseline and base.baseline_of == row.label
    mine, theirs = row.params, base.params
    shared = (set(mine) & set(theirs)) - {"pipeline"}   # each at its own default depth
    assert all(mine[key] == theirs[key] for key in shared)
    # The baseline's other parameters stay at its defaults.
    defaults = UNITS[base.unit].defaults
    assert all(theirs[key] == defaults[key] for key in set(theirs) - shared)


def test_baselines_follow_their_unit_once():
    rows = report_rows(["accllm_dsp_mul"])
    labels = [row.label for row in rows]
    assert labels[0] == "accllm_dsp_mul@accllm-w4-xilinx"
    # w4, 8-bit signed X: the baseline's defaults, built for the unit's target (shared param).
    assert labels[1] == "accllm_plain_mul@target=xilinx"
    assert "accllm_plain_mul@mode=w2,target=xilinx" in labels
    assert "accllm_plain_mul@target=ecp5" in labels        # MULT18X18D input registers
    assert "accllm_plain_mul@x_bits=7,target=ice40" in labels  # the iCE40 packing's 7-bit X
    assert len(labels) == len(set(labels))                 # each baseline once
    with pytest.raises(ValueError, match="not in the report: nope"):
        report_rows(["nope"])


ICE40_LOG = """Info: Device utilisation:
Info: 	         ICESTORM_LC:   26104/   5280   494%
Info: 	        ICESTORM_RAM:       0/     30     0%
Info: 	        ICESTORM_DSP:       9/      8   112%
ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'ICESTORM_LC'
"""


def test_capacity_shortfall_names_what_is_lacking():
    assert capacity_shortfall(ICE40_LOG) == "26104/5280 ICESTORM_LC, 9/8 ICESTORM_DSP"
    assert capacity_shortfall("ERROR: Unable to place cell 'y', no BELs remaining to "
                              "implement cell type 'MULT18X18D'") == "not enough MULT18X18D"
    assert capacity_shortfall("ERROR: Unable to find legal placement for all cells, design "
                              "is probably at utilisation limit.") == "at the utilisation limit"
    assert capacity_shortfall("Info: TRELLIS_COMB: 10/24288 0%\nERROR: timing") is None


def test_ecp5_column_moves_to_the_85f_only_when_the_design_does_not_fit(monkeypatch, work_dir):
    unit = report.Unit("big", "big", {}, work_dir / "big.v")
    calls, netlists = [], []

    def fake_run(unit, target, workdir, netlist=None, **_):
        calls.append(target)
        netlists.append(netlist)
        run_dir = Path(workdir) / f"{unit.name}-{target}"
        run_dir.mkdir(parents=True, exist_ok=True)
        if target == "ecp5":
            (run_dir / f"nextpnr-s{fmax.SEEDS[0]}.log").write_text(
                "Info: 	        TRELLIS_COMB:   29905/  24288   123%\n")
            raise FmaxError("nextpnr exited with code 125")
        return FmaxResult(unit.name, target, 55.5, {"LUT": 29905}, 7, 1.0, run_dir)

    def column(unit, name, workdir, timeout_s=report.FMAX_TIMEOUT_S):
        """The report's job for one Fmax column."""
        return fmax_job(unit, name, workdir, timeout_s, None, None, FMAX_COLUMNS[name])

    monkeypatch.setattr(fmax, "fmax_run", fake_run)
    outcome = column(unit, "ecp5", work_dir)
    assert calls == ["ecp5", "ecp5-85k"]
    # The 85F places the 25F run's netlist (same Yosys script) instead of synthesizing again.
    assert netlists == [None, work_dir / "big-ecp5" / "net.json"]
    assert outcome["target"] == "ecp5-85k" and outcome["fmax_mhz"] == 55.5
    assert outcome["too_small"] == [{"target": "ecp5", "shortfall": "29905/24288 TRELLIS_COMB"}]

    # A failure that is not about room is reported, not retried elsewhere.
    calls.clear()

    def broken_run(unit, target, workdir, **_):
        calls.append(target)
        raise FmaxError("yosys exited with code 1\nlast lines ...")

    monkeypatch.setattr(fmax, "fmax_run", broken_run)
    with pytest.raises(FmaxError) as raised:
        column(unit, "ecp5", work_dir / "again")
    assert calls == ["ecp5"]
    # The report's cell quotes the tool's first line (another job's failure keeps its type).
    failure = Failure(("fmax", "big", "ecp5"), error_text(raised.value))
    assert report._failed_cell("fmax", failure) == {"failed": "yosys exited with code 1"}
    assert report._failed_cell("area", Failure(("area", "big", "ice40"), "SynthError: no\nlog")
                               ) == {"failed": "SynthError: no"}
    # A step over the time limit is reported as such, not as a failed run.
    def slow_run(unit, target, workdir, **_):
        raise FmaxTimeout("nextpnr timed out after 5 s")

    monkeypatch.setattr(fmax, "fmax_run", slow_run)
    outcome = column(unit, "ice40", work_dir / "slow", timeout_s=5)
    assert outcome == {"timed_out": "iCE40 UltraPlus UP5K (sg48): a step took over 5 s",
                       "too_small": []}
    assert report_render._fmax_cell({"fmax": {"ice40": outcome}}, "ice40").startswith(
        "not placed in time")
    # The iCE40 column has no larger device to move to.
    assert FMAX_COLUMNS["ice40"] == ("ice40",) and "ecp5-85k" in FMAX_TARGETS

    # A row that skips the 25F goes straight to the 85F; the other column is untouched.
    skipping = report.ReportRow("big", fmax_skip=("ecp5",))
    assert report.fmax_devices(skipping, "ecp5") == ("ecp5-85k",)
    assert report.fmax_devices(skipping, "ice40") == ("ice40",)
    assert report.fmax_devices(report.ReportRow("big"), "ecp5") == ("ecp5", "ecp5-85k")
    calls.clear()
    monkeypatch.setattr(fmax, "fmax_run", fake_run)
    outcome = fmax_job(unit, "ecp5", work_dir / "skip", None, None, None,
                       report.fmax_devices(skipping, "ecp5"))
    assert calls == ["ecp5-85k"] and outcome["target"] == "ecp5-85k"
    assert outcome["too_small"] == []
    # The registry's rows that skip a device name one of their column's.
    for row in report.REPORT_ROWS:
        assert set(row.fmax_skip) <= {d for ds in FMAX_COLUMNS.values() for d in ds}, row.label


def _row(label, unit, lut, nand2, fmax, baseline=None, baseline_of=None, **extra):
    return {
        "label": label, "unit": unit, "config": None, "params": "", "baseline": baseline,
        "baseline_of": baseline_of, "ops_per_cycle": None,
        "area": {"ice40": {"metrics": {"LUT": lut, "FF": 10, "DSP": 0, "BRAM": 0}},
                 "sky130": {"metrics": {"NAND2": nand2, "um2": nand2 * 3.7536, "MHz": 500.0,
                                        "FF share": 0.5, "path_ps": 1000}}},
        "fmax": {"ice40": {"fmax_mhz": fmax, "target": "ice40", "resources": {"LC": lut}},
                 **extra},
    }


def test_rendering_ratios_and_cells():
    data = {"tools": ["Yosys X"], "failures": [], "rows": [
        _row("u", "u", 50, 3000, 100.0, baseline="b",
             ecp5={"fmax_mhz": 40.0, "target": "ecp5-85k", "resources": {}}),
        _row("b", "b", 200, 1000, 80.0, baseline_of="u",
             ecp5={"does_not_fit": [{"target": "ecp5", "shortfall": "9/8 DSP"},
                                    {"target": "ecp5-85k", "shortfall": "99/28 DSP"}]}),
    ]}
    data["rows"][0]["ops_per_cycle"], data["rows"][1]["ops_per_cycle"] = 4, 1
    data["rows"][0].update(latency=3, result="MAC", results_per_cycle=4.0)
    data["rows"][1].update(latency=2, result="MAC", results_per_cycle=1.0)
    markdown = render_markdown(data)
    # Throughput = Fmax x results per cycle: u 100 x 4 (iCE40), 40 x 4 (85F); b 80 x 1.
    assert "| `u` | 50 / 10 / 0 / 0 | n/a | n/a | 3,000 / 11,261 / 500 | n/a | 100.0 | " \
           "40.0 (85F) | 3 | 4 MAC | 400 / 160 |" in markdown
    assert "| `b` (baseline) | 200 / 10 / 0 / 0 | n/a | n/a | 1,000 / 3,754 / 500 | n/a | " \
           "80.0 | does not fit (99/28 DSP) | 2 | 1 MAC | 80 / n/a |" in markdown
    # LUT 50/200, sky130 NAND2-eq 3000/1000 (IHP not run), its MHz 500/500, Fmax 100/80;
    # figures one side lacks are n/a. Throughput per iCE40 LUT: (400 / 50) / (80 / 200) = 20.
    assert "| `u` / `b` (baseline) | 0.25 | n/a | n/a | n/a | n/a | 3.00 | n/a | 1.00 | 1.25 | " \
           "n/a | n/a | 20.00 | n/a | 4 / 1 |" in markdown
    # A report written before latency and rates were recorded still renders (n/a).
    for row in data["rows"]:
        del row["latency"], row["result"], row["results_per_cycle"]
    assert "| 40.0 (85F) | n/a | n/a | n/a / n/a |" in render_markdown(data)
    rows = list(csv.DictReader(io.StringIO(render_csv(data))))
    assert {"row": "u", "unit": "u", "config": "", "params": "", "target": "ecp5-85k",
            "metric": "fmax_mhz", "value": "40.0"} in rows
    assert not any(r["row"] == "b" and r["target"].startswith("ecp5") for r in rows)


def test_seeds_spread_and_a_second_baseline():
    """The Fmax cell gives the median and the seeds' range; a row naming ``u`` in its
    ``baseline_of`` list is a second ratio row of ``u`` beside its registered baseline."""
    seeds = {"fmax_mhz": 150.0, "seeds_mhz": [150.0, 140.0, 160.0], "target": "ecp5",
             "resources": {}}
    data = {"tools": ["Yosys X"], "failures": [], "rows": [
        _row("u", "u", 50, 3000, 100.0, baseline="b", ecp5=seeds),
        _row("b", "b", 200, 1000, 80.0, baseline_of="u"),
        _row("b@other", "b", 100, 500, 80.0, baseline_of=["v", "u"],
             ecp5={**seeds, "seeds_mhz": [150.0, None, 151.0]}),
    ]}
    markdown = render_markdown(data)
    assert "| 150.0 (140.0-160.0) |" in markdown
    assert "| 150.0 (a seed timed out-151.0) |" in markdown
    assert "| `u` / `b` (baseline) | 0.25 |" in markdown
    assert "| `u` / `b` (baseline, other) | 0.50 |" in markdown
    csv_rows = list(csv.DictReader(io.StringIO(render_csv(data))))
    assert [r["value"] for r in csv_rows if r["row"] == "b@other"
            and r["metric"].startswith("fmax_mhz_seed")] == ["150.0", "151.0"]


def test_readme_section_is_replaced_in_place_and_idempotent():
    data = {"tools": ["T"], "failures": [], "rows": [_row("u", "u", 1, 2, 3.0)]}
    section = render_readme_section(data, ["docs/results/p.png"])
    assert section.startswith(README_BEGIN) and section.rstrip().endswith(README_END)
    assert "![p](results/p.png)" in section           # from docs/results.md, the default
    assert "![p](docs/results/p.png)" in render_readme_section(data, ["docs/results/p.png"],
                                                               "README.md")
    readme = f"# t\n\nintro\n\n{README_BEGIN}\nold\n{README_END}\n\n## After\n"
    once = replace_readme_section(readme, section)
    assert once == f"# t\n\nintro\n\n{section}\n## After\n"
    assert replace_readme_section(once, section) == once
    assert replace_readme_section("# t\n", section) == "# t\n\n" + section


def test_readme_results_are_generated_from_the_published_report():
    """Every number in docs/results.md's Results section comes from `make results`."""
    published = ROOT / "docs" / "results" / "report.json"
    data = json.loads(published.read_text())
    page = (ROOT / "docs" / "results.md").read_text()
    begin, end = page.index(README_BEGIN), page.index(README_END) + len(README_END)
    assert page[begin:end] + "\n" == render_readme_section(data, data.get("plots", []),
                                                            "docs/results.md")
    # Its links resolve from the page.
    for link in re.findall(r"\]\(([^)#]+)\)", page[begin:end]):
        assert (ROOT / "docs" / link).is_file(), link
    for plot in data.get("plots", []):
        assert (ROOT / plot).is_file(), plot
    # The published report covers every unit row of the report (baselines' labels carry the
    # parameters they share with their unit, which change as units gain parameters).
    published = [(row["unit"], row["config"]) for row in data["rows"] if not row["baseline_of"]]
    assert published == [(row.unit, row.config) for row in report_rows() if not row.baseline_of]


def test_baselines_keep_their_own_pipeline_depth():
    """A unit's and its baseline's ``pipeline`` values mean different cuts: each is built at
    its own default depth."""
    for row in report_rows():
        if row.baseline_of:
            assert "pipeline" not in dict(row.overrides), row.label


@pytest.mark.synth
def test_a_small_row_end_to_end(work_dir, pdk_root, monkeypatch):
    """One real run: a 2-lane Concat array on every area target and both Fmax columns."""
    lanes, a_bits, b_bits = 2, 4, 4
    row = ReportRow("kllm_concat", None, (("lanes", lanes),))
    monkeypatch.setenv("PDK_ROOT", str(pdk_root))
    data = report.run_report([row], work_dir, jobs=2)
    assert data["failures"] == []
    (result,) = data["rows"]
    # Registered outputs: lanes x (a_bits + b_bits) payload bits plus the valid bit.
    flip_flops = lanes * (a_bits + b_bits) + 1
    for target in ("ice40", "ecp5", "xilinx"):
        assert result["area"][target]["metrics"]["FF"] == flip_flops
    # A sky130 flip-flop is over 4 NAND2-equivalents; the cells are mostly flip-flops.
    sky130 = result["area"]["sky130"]["metrics"]
    assert sky130["NAND2"] > 4 * flip_flops and sky130["FF share"] > 0.5
    assert result["area"]["ihp"]["metrics"]["MHz"] > 100
    for column in FMAX_COLUMNS:
        assert result["fmax"][column]["target"] == column
        assert result["fmax"][column]["fmax_mhz"] > 10
    assert "| `kllm_concat` (lanes=2) | " in render_markdown(data)


@pytest.mark.synth
@pytest.mark.large
def test_report_on_a_dask_cluster_gives_the_local_area(work_dir, pdk_root, monkeypatch):
    """``make report SCHEDULER=...``: the same rows from a dask.distributed cluster's worker
    (area only), with the jobs run in the worker, not here."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("PDK_ROOT", str(pdk_root))
    row = ReportRow("kllm_concat", None, (("lanes", 2),))
    local = report.run_report([row], work_dir / "local", jobs=2, fmax=False)
    with distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                                  dashboard_address=":0") as cluster:
        remote = report.run_report([row], work_dir / "dask", fmax=False,
                                   scheduler=cluster.scheduler_address)
    assert remote["failures"] == local["failures"] == []
    metrics = [{target: cell["metrics"] for target, cell in data["rows"][0]["area"].items()}
               for data in (local, remote)]
    assert metrics[0] == metrics[1]
    assert set(metrics[0]) == {"ice40", "ecp5", "xilinx", "sky130", "ihp"}


@pytest.mark.synth
@pytest.mark.large   # twelve Yosys runs, 34 s of make test (test_failures_are_not_cached stays)
def test_a_warm_report_reruns_only_what_changed(work_dir, pdk_root, monkeypatch):
    """Results of unchanged Verilog and flow come from build/cache: the same data, no Yosys
    run; a row whose Verilog changed runs again; --no-cache runs everything."""
    rows = [ReportRow("kllm_concat", None, (("lanes", 2),))]
    monkeypatch.setenv("PDK_ROOT", str(pdk_root))

    def run(rows, **options):
        lines = []
        data = report.run_report(rows, work_dir, jobs=2, fmax=False, progress=lines.append,
                                 **options)
        return data, [line for line in lines if line.startswith("[")]

    cold, cold_lines = run(rows)
    assert cold["failures"] == [] and not any("(cached)" in line for line in cold_lines)
    warm, warm_lines = run(rows)
    assert warm["rows"] == cold["rows"]
    assert len(warm_lines) == 5 and all(line.endswith("(cached)") for line in warm_lines)
    changed, changed_lines = run([ReportRow("kllm_concat", None, (("lanes", 3),))])
    assert not any("(cached)" in line for line in changed_lines)
    assert changed["rows"][0]["area"]["ice40"]["metrics"]["FF"] != \
        cold["rows"][0]["area"]["ice40"]["metrics"]["FF"]
    _, uncached_lines = run(rows, cache=False)
    assert not any("(cached)" in line for line in uncached_lines)


def test_failures_are_not_cached(work_dir, monkeypatch):
    unit = report.Unit("u", "u", {}, work_dir / "u.v")
    unit.verilog.write_text("module u; endmodule\n")
    unit.verilog.with_suffix(".json").write_text("{}")
    calls = []

    def failing_synth(*_):
        calls.append(1)
        raise ValueError("no")

    monkeypatch.setattr(area, "synth", failing_synth)
    for _ in range(2):
        with pytest.raises(ValueError):
            area_job(unit, "ice40", work_dir / "synth" / unit.name, work_dir / "cache")
    assert len(calls) == 2 and not (work_dir / "cache" / "area").exists()


def test_command_line_errors(tmp_path, capsys):
    assert report.main(["--unit", "nope", "--build-dir", str(tmp_path)]) == 2
    assert "not in the report" in capsys.readouterr().err
    assert report.main(["--publish", str(tmp_path / "pub"), "--build-dir", str(tmp_path)]) == 2
    assert "run `make report`" in capsys.readouterr().err
