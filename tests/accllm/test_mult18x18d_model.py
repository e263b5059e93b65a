"""The MULT18X18D simulation model (``verif/models/MULT18X18D.v``) on its own: lint-clean, refusing
the register options it does not model, and its register stages against a delay line of exact
products (a self-checking Verilator harness). ``accllm_dsp_mul``'s ECP5 target instantiates it;
``tests/accllm/test_accllm_dsp_mul.py`` checks the unit."""

import re

import pytest

from qllm_cores.verif.runner import MODELS


def test_mult18x18d_model_is_lint_clean_and_refuses_what_it_does_not_model():
    from tests.accllm.test_dsp48e2_model import verilator_lint
    from qllm_cores.verif.__main__ import lint_file
    model = MODELS / "MULT18X18D.v"
    assert lint_file(model, "MULT18X18D") == []
    assert verilator_lint([model], "MULT18X18D") == []
    registered = ['-GREG_INPUTA_CLK="CLK0"', '-GREG_INPUTB_CLK="CLK0"',
                  '-GREG_PIPELINE_CLK="CLK0"', '-GREG_OUTPUT_CLK="CLK0"', '-GREG_OUTPUT_CE="CE3"',
                  '-GREG_INPUTA_RST="RST2"']
    assert verilator_lint([model], "MULT18X18D", *registered) == []
    for override, message in (('-GREG_INPUTA_CLK="CLK1"', 'REG_\\*_CLK must be'),
                              ('-GREG_OUTPUT_CE="CE4"', 'REG_\\*_CE must be'),
                              ('-GREG_PIPELINE_RST="RST9"', 'REG_\\*_RST must be'),
                              ('-GREG_INPUTC_CLK="CLK0"', 'only REG_INPUTC_CLK'),
                              ('-GRESETMODE="ASYNC"', 'only RESETMODE'),
                              ('-GMULT_BYPASS="ENABLED"', 'only MULT_BYPASS')):
        lines = verilator_lint([model], "MULT18X18D", override)
        assert any("USERFATAL" in line and re.search(message, line) for line in lines), lines


@pytest.mark.large
def test_mult18x18d_model_register_stages():
    """The model in five register configurations (none; input registers; output register;
    pipeline and output; all) with CE1 / RST2 selected, random operands, sign modes, clock
    enable gaps and resets, against a delay line of exact products (Verilator, self-checking
    harness ``MULT_HARNESS``)."""
    _run_mult18x18d_harness()


MULT_HARNESS = """\
`default_nettype none
// Self-checking harness: one MULT18X18D per register configuration, random operands and sign
// modes, random clock-enable gaps and resets; every cycle P is compared with a delay line of
// the expected products (one slot per register stage in use, advanced at enabled edges).
module mult_harness;
    reg clk = 1'b0;
    reg [17:0] a, b;
    reg sa, sb, ce, rst;
    integer cycle, errors, k, n;
    localparam integer CONFIGS = 5;
    // Register stages in use per configuration: none, A/B only, output only, pipeline +
    // output, all four.
    wire [35:0] p [0:CONFIGS-1];
    reg [35:0] expected [0:CONFIGS-1][0:4];
    reg [35:0] product;
    integer depth [0:CONFIGS-1];
    initial begin
        depth[0] = 0; depth[1] = 1; depth[2] = 1; depth[3] = 2; depth[4] = 3;
    end
`define MULT(I, RA, RP, RO) \
    MULT18X18D #(.REG_INPUTA_CLK(RA), .REG_INPUTB_CLK(RA), .REG_PIPELINE_CLK(RP), \
                 .REG_OUTPUT_CLK(RO), .REG_INPUTA_CE("CE1"), .REG_INPUTB_CE("CE1"), \
                 .REG_PIPELINE_CE("CE1"), .REG_OUTPUT_CE("CE1"), .REG_INPUTA_RST("RST2"), \
                 .REG_INPUTB_RST("RST2"), .REG_PIPELINE_RST("RST2"), .REG_OUTPUT_RST("RST2")) \
    m``I ( \
        .A17(a[17]), .A16(a[16]), .A15(a[15]), .A14(a[14]), .A13(a[13]), .A12(a[12]), \
        .A11(a[11]), .A10(a[10]), .A9(a[9]), .A8(a[8]), .A7(a[7]), .A6(a[6]), .A5(a[5]), \
        .A4(a[4]), .A3(a[3]), .A2(a[2]), .A1(a[1]), .A0(a[0]), \
        .B17(b[17]), .B16(b[16]), .B15(b[15]), .B14(b[14]), .B13(b[13]), .B12(b[12]), \
        .B11(b[11]), .B10(b[10]), .B9(b[9]), .B8(b[8]), .B7(b[7]), .B6(b[6]), .B5(b[5]), \
        .B4(b[4]), .B3(b[3]), .B2(b[2]), .B1(b[1]), .B0(b[0]), \
        .SIGNEDA(sa), .SIGNEDB(sb), .SOURCEA(1'b0), .SOURCEB(1'b0), \
        .CLK0(clk), .CE1(ce), .CE0(1'b0), .RST2(rst), .RST0(1'b0), \
        .P35(p[I][35]), .P34(p[I][34]), .P33(p[I][33]), .P32(p[I][32]), .P31(p[I][31]), \
        .P30(p[I][30]), .P29(p[I][29]), .P28(p[I][28]), .P27(p[I][27]), .P26(p[I][26]), \
        .P25(p[I][25]), .P24(p[I][24]), .P23(p[I][23]), .P22(p[I][22]), .P21(p[I][21]), \
        .P20(p[I][20]), .P19(p[I][19]), .P18(p[I][18]), .P17(p[I][17]), .P16(p[I][16]), \
        .P15(p[I][15]), .P14(p[I][14]), .P13(p[I][13]), .P12(p[I][12]), .P11(p[I][11]), \
        .P10(p[I][10]), .P9(p[I][9]), .P8(p[I][8]), .P7(p[I][7]), .P6(p[I][6]), .P5(p[I][5]), \
        .P4(p[I][4]), .P3(p[I][3]), .P2(p[I][2]), .P1(p[I][1]), .P0(p[I][0]));
    /* verilator lint_off PINMISSING */
    `MULT(0, "NONE", "NONE", "NONE")
    `MULT(1, "CLK0", "NONE", "NONE")
    `MULT(2, "NONE", "NONE", "CLK0")
    `MULT(3, "NONE", "CLK0", "CLK0")
    `MULT(4, "CLK0", "CLK0", "CLK0")
    /* verilator lint_on PINMISSING */

    function automatic [35:0] mul(input [17:0] x, input [17:0] y, input sx, input sy);
        reg signed [36:0] xe, ye;
        reg signed [73:0] full;
        begin
            xe = sx ? {{19{x[17]}}, x} : {19'd0, x};
            ye = sy ? {{19{y[17]}}, y} : {19'd0, y};
            full = xe * ye;
            mul = full[35:0];
        end
    endfunction

    initial begin
        errors = 0;
        for (n = 0; n < CONFIGS; n = n + 1)
            for (k = 0; k < 5; k = k + 1) expected[n][k] = 36'd0;
        a = 0; b = 0; sa = 0; sb = 0; ce = 0; rst = 0;
        for (cycle = 0; cycle < 20000; cycle = cycle + 1) begin
            // Drive at the falling edge, then check the combinational P of the new inputs.
            case ($urandom % 8)
                0: a = 18'h20000;
                1: a = 18'h1FFFF;
                2: a = 18'h3FFFF;
                default: a = $urandom;
            endcase
            case ($urandom % 8)
                0: b = 18'h20000;
                1: b = 18'h1FFFF;
                default: b = $urandom;
            endcase
            sa = $urandom; sb = $urandom;
            ce = ($urandom % 4) != 0;
            rst = ($urandom % 200) == 0;
            product = mul(a, b, sa, sb);
            #1;
            for (n = 0; n < CONFIGS; n = n + 1) begin
                expected[n][0] = product;
                if (p[n] !== expected[n][depth[n]]) begin
                    errors = errors + 1;
                    if (errors < 10) $display("cycle %0d config %0d: P = %h, expected %h",
                                              cycle, n, p[n], expected[n][depth[n]]);
                end
            end
            #4 clk = 1'b1;
            // The clock edge: every register stage moves at ce, clears at rst.
            for (n = 0; n < CONFIGS; n = n + 1)
                for (k = 4; k > 0; k = k - 1)
                    if (rst) expected[n][k] = 36'd0;
                    else if (ce) expected[n][k] = expected[n][k - 1];
            #5 clk = 1'b0;
        end
        if (errors != 0) $fatal(1, "MULT18X18D model: %0d mismatches", errors);
        $display("MULT18X18D model: 20000 cycles, 5 configurations, no mismatch");
        $finish;
    end
endmodule
`default_nettype wire
"""


def _run_mult18x18d_harness():
    import subprocess
    from qllm_cores.verif.runner import BUILD, tool_environment
    tool_environment()
    folder = BUILD / "sim" / "mult18x18d_model"
    folder.mkdir(parents=True, exist_ok=True)
    harness = folder / "mult_harness.v"
    harness.write_text(MULT_HARNESS)
    build = subprocess.run(
        ["verilator", "--binary", "--timing", "-CFLAGS", "-std=c++20", "-Wno-fatal", "-Wno-lint",
         "-Wno-style",
         "--top-module", "mult_harness", "-Mdir", str(folder / "obj"),
         str(MODELS / "MULT18X18D.v"), str(harness)],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(folder / "obj" / "Vmult_harness")], capture_output=True, text=True)
    assert run.returncode == 0 and "no mismatch" in run.stdout, run.stdout[-3000:] + run.stderr
