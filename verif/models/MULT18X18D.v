// MULT18X18D: behavioral simulation model of the subset of the Lattice ECP5 sysDSP 18 x 18
// multiplier that qllm-cores drives (the AccLLM packed multiplier and its plain-multiplier
// baseline on target "ecp5", contract section 6).
//
// Written from the ECP5 sysDSP usage guide's description of the MULT18X18D primitive (ports,
// parameters, register stages); no vendor or third-party source was used. Yosys ships only a
// blackbox MULT18X18D (lattice/cells_bb_ecp5.v); this model has the same module name, port names
// and parameter names, so an instance synthesizes with Yosys (kept as a cell, placed by
// nextpnr-ecp5) and simulates with Verilator (or Icarus) against this file.
//
// Datapath:
//   P[35:0] = A' * B'   with A' = SIGNEDA ? sext(A) : zext(A), B' likewise (18 bits each),
//                       the exact 36-bit two's complement product.
// Registers (clock CLK0 only; each with its clock enable CE0..CE3 and synchronous reset
// RST0..RST3 chosen by the REG_*_CE / REG_*_RST parameters; the reset wins over the enable; all
// registers power up to zero):
//   input A:  REG_INPUTA_CLK = "CLK0" registers A and SIGNEDA ("NONE": combinational);
//   input B:  REG_INPUTB_CLK likewise for B and SIGNEDB;
//   pipeline: REG_PIPELINE_CLK registers the product (and the sign mode);
//   output:   REG_OUTPUT_CLK registers P.
// Latency from A/B to P in enabled clock edges: the number of the four stages in use.
// Assumption: SIGNEDA/SIGNEDB travel through the input register of A/B (the packed multiplier
// ties them to constants, so the choice is invisible to it).
//
// Parameters checked at elaboration ($fatal when set to an unsupported value):
//   REG_INPUTA_CLK, REG_INPUTB_CLK, REG_PIPELINE_CLK, REG_OUTPUT_CLK in {"NONE", "CLK0"};
//   REG_INPUTC_CLK = "NONE" (C only feeds the cascade outputs); every REG_*_CE in
//   {"CE0".."CE3"}, every REG_*_RST in {"RST0".."RST3"}; RESETMODE = "SYNC";
//   MULT_BYPASS = "DISABLED".
// Accepted and ignored: GSR (registers power up to 0 either way), CLK0_DIV..CLK3_DIV,
//   HIGHSPEED_CLK, CAS_MATCH_REG, SOURCEB_MODE.
// Dynamic checks: SOURCEA or SOURCEB high (shift-register input selection) stops the simulation
//   with $fatal at a CLK0 edge.
// Outputs: P is modelled; SIGNEDP is the registered sign mode (SIGNEDA | SIGNEDB); SROA, SROB,
//   ROA, ROB, ROC (cascade and register outputs) are tied to 0. Inputs C and CLK1..3 are
//   ignored. The shift-register cascade inputs SRIA[17:0] and SRIB[17:0] are left out of the
//   port list: only a neighbouring DSP can drive them (nextpnr cannot route a constant there),
//   so an instance leaves them unconnected.

`default_nettype none

module MULT18X18D #(
    /* verilator lint_off UNUSEDPARAM */
    parameter REG_INPUTA_CLK = "NONE",
    parameter REG_INPUTA_CE = "CE0",
    parameter REG_INPUTA_RST = "RST0",
    parameter REG_INPUTB_CLK = "NONE",
    parameter REG_INPUTB_CE = "CE0",
    parameter REG_INPUTB_RST = "RST0",
    parameter REG_INPUTC_CLK = "NONE",
    parameter REG_INPUTC_CE = "CE0",
    parameter REG_INPUTC_RST = "RST0",
    parameter REG_PIPELINE_CLK = "NONE",
    parameter REG_PIPELINE_CE = "CE0",
    parameter REG_PIPELINE_RST = "RST0",
    parameter REG_OUTPUT_CLK = "NONE",
    parameter REG_OUTPUT_CE = "CE0",
    parameter REG_OUTPUT_RST = "RST0",
    parameter CLK0_DIV = "ENABLED",
    parameter CLK1_DIV = "ENABLED",
    parameter CLK2_DIV = "ENABLED",
    parameter CLK3_DIV = "ENABLED",
    parameter HIGHSPEED_CLK = "NONE",
    parameter GSR = "ENABLED",
    parameter CAS_MATCH_REG = "FALSE",
    parameter SOURCEB_MODE = "B_SHIFT",
    parameter MULT_BYPASS = "DISABLED",
    parameter RESETMODE = "SYNC"
    /* verilator lint_on UNUSEDPARAM */
) (
    A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0, B17, B16,
    B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0, C17, C16, C15, C14,
    C13, C12, C11, C10, C9, C8, C7, C6, C5, C4, C3, C2, C1, C0, SIGNEDA, SIGNEDB, SOURCEA,
    SOURCEB, CLK3, CLK2, CLK1, CLK0, CE3, CE2, CE1, CE0, RST3, RST2, RST1, RST0, SROA17, SROA16,
    SROA15, SROA14, SROA13, SROA12, SROA11, SROA10, SROA9, SROA8, SROA7, SROA6, SROA5, SROA4,
    SROA3, SROA2, SROA1, SROA0, SROB17, SROB16, SROB15, SROB14, SROB13, SROB12, SROB11, SROB10,
    SROB9, SROB8, SROB7, SROB6, SROB5, SROB4, SROB3, SROB2, SROB1, SROB0, ROA17, ROA16, ROA15,
    ROA14, ROA13, ROA12, ROA11, ROA10, ROA9, ROA8, ROA7, ROA6, ROA5, ROA4, ROA3, ROA2, ROA1,
    ROA0, ROB17, ROB16, ROB15, ROB14, ROB13, ROB12, ROB11, ROB10, ROB9, ROB8, ROB7, ROB6, ROB5,
    ROB4, ROB3, ROB2, ROB1, ROB0, ROC17, ROC16, ROC15, ROC14, ROC13, ROC12, ROC11, ROC10, ROC9,
    ROC8, ROC7, ROC6, ROC5, ROC4, ROC3, ROC2, ROC1, ROC0, P35, P34, P33, P32, P31, P30, P29,
    P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11,
    P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0, SIGNEDP
);
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0,
                B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0,
                C17, C16, C15, C14, C13, C12, C11, C10, C9, C8, C7, C6, C5, C4, C3, C2, C1, C0,
                SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK3, CLK2, CLK1, CLK0, CE3, CE2, CE1, CE0,
                RST3, RST2, RST1, RST0;
    /* verilator lint_on UNUSEDSIGNAL */
    output wire SROA17, SROA16, SROA15, SROA14, SROA13, SROA12, SROA11, SROA10, SROA9, SROA8,
                SROA7, SROA6, SROA5, SROA4, SROA3, SROA2, SROA1, SROA0, SROB17, SROB16, SROB15,
                SROB14, SROB13, SROB12, SROB11, SROB10, SROB9, SROB8, SROB7, SROB6, SROB5,
                SROB4, SROB3, SROB2, SROB1, SROB0, ROA17, ROA16, ROA15, ROA14, ROA13, ROA12,
                ROA11, ROA10, ROA9, ROA8, ROA7, ROA6, ROA5, ROA4, ROA3, ROA2, ROA1, ROA0, ROB17,
                ROB16, ROB15, ROB14, ROB13, ROB12, ROB11, ROB10, ROB9, ROB8, ROB7, ROB6, ROB5,
                ROB4, ROB3, ROB2, ROB1, ROB0, ROC17, ROC16, ROC15, ROC14, ROC13, ROC12, ROC11,
                ROC10, ROC9, ROC8, ROC7, ROC6, ROC5, ROC4, ROC3, ROC2, ROC1, ROC0, P35, P34,
                P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18,
                P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0,
                SIGNEDP;

    // ---- elaboration checks: unsupported parameter values -------------------------------------
    // Each is an elaboration-time $fatal (Verilator reports it as USERFATAL) and the same $fatal
    // at time 0 of the simulation, so that a build with -Wno-fatal still refuses to simulate an
    // unsupported configuration. String parameters are compared as bit vectors of different
    // widths: WIDTHEXPAND is benign.
    /* verilator lint_off WIDTHEXPAND */
    function automatic is_clock(input [8*4-1:0] value);
        is_clock = (value == "NONE") || (value == "CLK0");
    endfunction

    function automatic integer select_index(input [8*4-1:0] value, input [8*4-1:0] stem);
        // "CE0".."CE3" / "RST0".."RST3" -> 0..3; anything else -> -1.
        integer k;
        select_index = -1;
        for (k = 0; k < 4; k = k + 1)
            if ({8'd0, value} == {stem, 8'h30 + k[7:0]})
                select_index = k;
    endfunction

    localparam integer CE_A = select_index(REG_INPUTA_CE, "CE");
    localparam integer CE_B = select_index(REG_INPUTB_CE, "CE");
    localparam integer CE_P = select_index(REG_PIPELINE_CE, "CE");
    localparam integer CE_O = select_index(REG_OUTPUT_CE, "CE");
    localparam integer RST_A = select_index(REG_INPUTA_RST, "RST");
    localparam integer RST_B = select_index(REG_INPUTB_RST, "RST");
    localparam integer RST_P = select_index(REG_PIPELINE_RST, "RST");
    localparam integer RST_O = select_index(REG_OUTPUT_RST, "RST");

    generate
        if (!is_clock(REG_INPUTA_CLK) || !is_clock(REG_INPUTB_CLK) || !is_clock(REG_PIPELINE_CLK)
                || !is_clock(REG_OUTPUT_CLK)) begin : g_bad_clk
            $fatal(1, "MULT18X18D model: REG_*_CLK must be \"NONE\" or \"CLK0\"");
            initial $fatal(1, "MULT18X18D model: REG_*_CLK must be \"NONE\" or \"CLK0\"");
        end
        if (REG_INPUTC_CLK != "NONE") begin : g_bad_c
            $fatal(1, "MULT18X18D model: only REG_INPUTC_CLK = \"NONE\" is modelled");
            initial $fatal(1, "MULT18X18D model: only REG_INPUTC_CLK = \"NONE\" is modelled");
        end
        if (CE_A < 0 || CE_B < 0 || CE_P < 0 || CE_O < 0) begin : g_bad_ce
            $fatal(1, "MULT18X18D model: REG_*_CE must be \"CE0\" .. \"CE3\"");
            initial $fatal(1, "MULT18X18D model: REG_*_CE must be \"CE0\" .. \"CE3\"");
        end
        if (RST_A < 0 || RST_B < 0 || RST_P < 0 || RST_O < 0) begin : g_bad_rst
            $fatal(1, "MULT18X18D model: REG_*_RST must be \"RST0\" .. \"RST3\"");
            initial $fatal(1, "MULT18X18D model: REG_*_RST must be \"RST0\" .. \"RST3\"");
        end
        if (RESETMODE != "SYNC") begin : g_bad_resetmode
            $fatal(1, "MULT18X18D model: only RESETMODE = \"SYNC\" is modelled");
            initial $fatal(1, "MULT18X18D model: only RESETMODE = \"SYNC\" is modelled");
        end
        if (MULT_BYPASS != "DISABLED") begin : g_bad_bypass
            $fatal(1, "MULT18X18D model: only MULT_BYPASS = \"DISABLED\" is modelled");
            initial $fatal(1, "MULT18X18D model: only MULT_BYPASS = \"DISABLED\" is modelled");
        end
    endgenerate

    localparam USE_A = (REG_INPUTA_CLK == "CLK0");
    localparam USE_B = (REG_INPUTB_CLK == "CLK0");
    localparam USE_P = (REG_PIPELINE_CLK == "CLK0");
    localparam USE_O = (REG_OUTPUT_CLK == "CLK0");
    /* verilator lint_on WIDTHEXPAND */

    wire [3:0] ce = {CE3, CE2, CE1, CE0};
    wire [3:0] rst = {RST3, RST2, RST1, RST0};

    // ---- the stages ---------------------------------------------------------------------------
    wire [18:0] a_in = {SIGNEDA, A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4,
                        A3, A2, A1, A0};
    wire [18:0] b_in = {SIGNEDB, B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4,
                        B3, B2, B1, B0};
    wire [18:0] a_q, b_q;
    MULT18X18D_stage #(.WIDTH(19), .USED(USE_A)) a_reg (
        .clk(CLK0), .rst(rst[RST_A & 3]), .ce(ce[CE_A & 3]), .d(a_in), .q(a_q));
    MULT18X18D_stage #(.WIDTH(19), .USED(USE_B)) b_reg (
        .clk(CLK0), .rst(rst[RST_B & 3]), .ce(ce[CE_B & 3]), .d(b_in), .q(b_q));

    wire signed [18:0] a_ext = {a_q[18] & a_q[17], a_q[17:0]};
    wire signed [18:0] b_ext = {b_q[18] & b_q[17], b_q[17:0]};
    /* verilator lint_off UNUSEDSIGNAL */
    wire signed [37:0] full = a_ext * b_ext;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [36:0] product = {a_q[18] | b_q[18], full[35:0]};

    wire [36:0] pipe_q, out_q;
    MULT18X18D_stage #(.WIDTH(37), .USED(USE_P)) pipeline_reg (
        .clk(CLK0), .rst(rst[RST_P & 3]), .ce(ce[CE_P & 3]), .d(product), .q(pipe_q));
    MULT18X18D_stage #(.WIDTH(37), .USED(USE_O)) output_reg (
        .clk(CLK0), .rst(rst[RST_O & 3]), .ce(ce[CE_O & 3]), .d(pipe_q), .q(out_q));

`ifndef YOSYS
    // (Yosys, which reads this model for the equivalence proofs of fpga/ecp5_dsp.py, takes no
    // $fatal in a clocked block; the proofs tie SOURCEA/SOURCEB to 0.)
    always @(posedge CLK0) begin
        if (SOURCEA === 1'b1 || SOURCEB === 1'b1)
            $fatal(1, "MULT18X18D model: SOURCEA/SOURCEB (shift-register inputs) are not modelled");
    end
`endif

    // ---- outputs ------------------------------------------------------------------------------
    assign {SIGNEDP, P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21,
            P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3,
            P2, P1, P0} = out_q;
    assign {SROA17, SROA16, SROA15, SROA14, SROA13, SROA12, SROA11, SROA10, SROA9, SROA8, SROA7,
            SROA6, SROA5, SROA4, SROA3, SROA2, SROA1, SROA0} = 18'd0;
    assign {SROB17, SROB16, SROB15, SROB14, SROB13, SROB12, SROB11, SROB10, SROB9, SROB8, SROB7,
            SROB6, SROB5, SROB4, SROB3, SROB2, SROB1, SROB0} = 18'd0;
    assign {ROA17, ROA16, ROA15, ROA14, ROA13, ROA12, ROA11, ROA10, ROA9, ROA8, ROA7, ROA6,
            ROA5, ROA4, ROA3, ROA2, ROA1, ROA0} = 18'd0;
    assign {ROB17, ROB16, ROB15, ROB14, ROB13, ROB12, ROB11, ROB10, ROB9, ROB8, ROB7, ROB6,
            ROB5, ROB4, ROB3, ROB2, ROB1, ROB0} = 18'd0;
    assign {ROC17, ROC16, ROC15, ROC14, ROC13, ROC12, ROC11, ROC10, ROC9, ROC8, ROC7, ROC6,
            ROC5, ROC4, ROC3, ROC2, ROC1, ROC0} = 18'd0;

endmodule

// One optional register stage of the MULT18X18D: with USED, q is d registered (clock enable,
// synchronous reset that wins over the enable, power-up 0); without, q is d. It lives in this
// file so that the model stays one source file (hence the DECLFILENAME waiver).
/* verilator lint_off DECLFILENAME */
module MULT18X18D_stage #(
    parameter integer WIDTH = 1,
    parameter USED = 1
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             ce,
    input  wire [WIDTH-1:0] d,
    output wire [WIDTH-1:0] q
);
    reg [WIDTH-1:0] r;

    initial r = {WIDTH{1'b0}};

    always @(posedge clk) begin
        if (rst) r <= {WIDTH{1'b0}};
        else if (ce) r <= d;
    end

    assign q = USED ? r : d;
endmodule
/* verilator lint_on DECLFILENAME */

`default_nettype wire
