"""The DSP48E2 behavioral model (verif/models/DSP48E2.v): lint (also in the register
configuration of every ``pipeline`` depth of accllm_dsp_mul), elaboration checks, and its cocotb
bench (verif/accllm/tb_dsp48e2_model.py) on Verilator in the AccLLM multiplier's full-pipeline
configuration."""

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from qllm_cores.verif.__main__ import lint_file
from qllm_cores.verif.runner import BUILD, ROOT, bench_environment, tool_environment

MODEL = ROOT / "verif" / "models" / "DSP48E2.v"
HARNESS_TOP = "dsp48e2_model_harness"
BUILD_DIR = BUILD / "sim" / "dsp48e2_model"

#: The configuration of the AccLLM packed multiplier: pre-adder AD = D + A2 (INMODE 5'b00100),
#: every pipeline register on, one clock enable and one reset for all of them; P = M, or
#: P = M + C through Z (OPMODE 9'b00_011_01_01) or W (9'b11_000_01_01).
HARNESS = """\
`default_nettype none
module dsp48e2_model_harness #(
    parameter integer BREG = 1
) (
    input  wire        clk,
    input  wire        rst,
    input  wire        ce,
    input  wire [29:0] a,
    input  wire [26:0] d,
    input  wire [17:0] b,
    input  wire [47:0] c,
    input  wire        use_c,
    input  wire        c_on_w,
    output wire [47:0] p
);
    wire [1:0] w_sel = (use_c && c_on_w) ? 2'b11 : 2'b00;
    wire [2:0] z_sel = (use_c && !c_on_w) ? 3'b011 : 3'b000;
    wire [8:0] opmode = {w_sel, z_sel, 2'b01, 2'b01};
    /* verilator lint_off PINCONNECTEMPTY */
    DSP48E2 #(
        .AMULTSEL("AD"), .BMULTSEL("B"), .PREADDINSEL("A"), .USE_MULT("MULTIPLY"),
        .USE_SIMD("ONE48"), .AREG(1), .ACASCREG(1), .BREG(BREG), .BCASCREG(BREG), .CREG(1),
        .DREG(1), .ADREG(1), .MREG(1), .PREG(1), .INMODEREG(1), .OPMODEREG(1), .ALUMODEREG(1),
        .CARRYINREG(1), .CARRYINSELREG(1)
    ) dsp (
        .CLK(clk), .A(a), .B(b), .C(c), .D(d),
        .INMODE(5'b00100), .OPMODE(opmode), .ALUMODE(4'b0000),
        .CARRYIN(1'b0), .CARRYINSEL(3'b000),
        .ACIN(30'd0), .BCIN(18'd0), .PCIN(48'd0), .CARRYCASCIN(1'b0), .MULTSIGNIN(1'b0),
        .CEA1(ce), .CEA2(ce), .CEB1(ce), .CEB2(ce), .CEC(ce), .CED(ce), .CEAD(ce), .CEM(ce),
        .CEP(ce), .CEINMODE(ce), .CECTRL(ce), .CEALUMODE(ce), .CECARRYIN(ce),
        .RSTA(rst), .RSTB(rst), .RSTC(rst), .RSTD(rst), .RSTM(rst), .RSTP(rst),
        .RSTINMODE(rst), .RSTCTRL(rst), .RSTALUMODE(rst), .RSTALLCARRYIN(rst),
        .P(p), .PCOUT(), .ACOUT(), .BCOUT(), .CARRYCASCOUT(), .CARRYOUT(), .MULTSIGNOUT(),
        .OVERFLOW(), .UNDERFLOW(), .PATTERNDETECT(), .PATTERNBDETECT(), .XOROUT()
    );
    /* verilator lint_on PINCONNECTEMPTY */
endmodule
`default_nettype wire
"""


def write_harness(folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{HARNESS_TOP}.v"
    if not path.exists() or path.read_text() != HARNESS:
        path.write_text(HARNESS)
    return path


def verilator_lint(sources, top, *extra):
    """``verilator --lint-only -Wall`` without the project's waivers; return the % lines."""
    tool_environment()
    command = ["verilator", "--lint-only", "-Wall", *map(str, sources), "--top-module", top,
               *extra]
    result = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in result.stderr.splitlines() if line.startswith("%")]
    if result.returncode != 0 and not lines:
        lines = [f"%Error: verilator exited with {result.returncode}: {result.stderr[-500:]}"]
    return lines


def test_model_is_lint_clean():
    assert lint_file(MODEL, "DSP48E2") == []  # the project's way (with its waivers)
    assert verilator_lint([MODEL], "DSP48E2") == []  # and without any waiver file


@pytest.mark.parametrize("breg", [1, 2])
def test_harness_configuration_is_lint_clean(tmp_path, breg):
    harness = write_harness(tmp_path)
    assert verilator_lint([MODEL, harness], HARNESS_TOP, f"-GBREG={breg}") == []


@pytest.mark.parametrize("pipeline", [0, 1, 2, 3])
def test_model_is_lint_clean_in_every_configuration_the_multiplier_uses(pipeline):
    # accllm_dsp_mul's `pipeline` selects the register attributes (its benches run the model in
    # each of them against the exact products).
    from qllm_cores.hdl.accllm.dsp_mul.dsp_mul import dsp48e2_registers
    overrides = [f"-G{name}={value}" for name, value in dsp48e2_registers(pipeline).items()]
    assert verilator_lint([MODEL], "DSP48E2", '-GAMULTSEL="AD"', *overrides) == []


@pytest.mark.parametrize("override, message", [
    ('-GPREADDINSEL="B"', 'only PREADDINSEL = "A"'),
    ('-GAMULTSEL="B"', 'AMULTSEL must be'),
    ("-GAREG=3", "AREG must be 0, 1 or 2"),
    ("-GMREG=2", "MREG and PREG must be 0 or 1"),
    ('-GUSE_SIMD="FOUR12"', 'only USE_SIMD = "ONE48"'),
    ("-GIS_CLK_INVERTED=1", "IS_*_INVERTED must be 0"),
])
def test_unsupported_parameters_are_refused(override, message):
    lines = verilator_lint([MODEL], "DSP48E2", override)
    assert any("USERFATAL" in line and message in line for line in lines), lines


def _run_bench(breg, seed):
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    tool_environment()
    build_dir = BUILD_DIR / f"breg{breg}"
    build_dir.mkdir(parents=True, exist_ok=True)
    runner = get_runner("verilator")
    with open(build_dir.with_suffix(".lock"), "w") as lock:  # safe under pytest-xdist
        fcntl.flock(lock, fcntl.LOCK_EX)
        harness = write_harness(build_dir / "rtl")
        runner.build(sources=[MODEL, harness], hdl_toplevel=HARNESS_TOP, build_dir=build_dir,
                     parameters={"BREG": breg}, build_args=["-Wno-fatal", "-O3"],
                     timescale=("1ns", "1ps"), log_file=build_dir / "build.log")
    test_dir = build_dir / "runs" / f"seed{seed}-{os.getpid()}"
    test_dir.mkdir(parents=True, exist_ok=True)
    results = test_dir / "results.xml"
    env = bench_environment({"QLLM_DSP_BREG": breg})
    try:
        runner.test(test_module="qllm_cores.verif.accllm.tb_dsp48e2_model",
                    hdl_toplevel=HARNESS_TOP, build_dir=build_dir, test_dir=test_dir, seed=seed,
                    extra_env=env, results_xml=str(results), timescale=("1ns", "1ps"),
                    log_file=test_dir / "sim.log")
    except (SystemExit, RuntimeError):
        pass  # the runner exits on failed tests under pytest; the results file says which
    tests, failed = get_results(results)
    log = (test_dir / "sim.log").read_text(errors="replace") if (test_dir / "sim.log").exists() \
        else "(no log)"
    assert tests == 2 and failed == 0, f"{failed} of {tests} cocotb tests failed:\n{log[-4000:]}"


@pytest.mark.sim
@pytest.mark.large
@pytest.mark.parametrize("breg", [1, 2])
def test_dsp48e2_model_bench(breg):
    _run_bench(breg, int(os.environ.get("QLLM_SEED", 1)))
