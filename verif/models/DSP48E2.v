// DSP48E2: behavioral simulation model of the subset of the Xilinx UltraScale+ DSP48E2 that
// qllm-cores drives (the AccLLM packed multiplier, contract section 6).
//
// Written from the equations of the DSP48E2 user guide (UG579); no vendor or third-party source
// was used. Yosys ships only a blackbox DSP48E2 (xilinx/cells_xtra.v); this model has the same
// module name, port names and parameter names, so an instance synthesizes with Yosys (kept as a
// cell) and simulates with Verilator (or Icarus) against this file.
//
// Datapath (all arithmetic two's complement):
//   AD = INMODE[2] ? D : 0   (+ or -, INMODE[3] = 0 adds, 1 subtracts)
//        INMODE[1] ? 0 : (INMODE[0] ? A1 : A2)[26:0]            27 bits, wraps modulo 2^27
//   M  = (AMULTSEL == "AD" ? AD : (INMODE[1] ? 0 : (INMODE[0] ? A1 : A2)[26:0]))
//        * (INMODE[4] ? B1 : B2)                                 27 x 18 signed -> 45 bits
//   P  = W + Z + X + Y + CIN                                      ALUMODE 0000, modulo 2^48
// The multiplier's two partial products are modelled as X = sext48(M), Y = 0 when OPMODE selects
// X = M and Y = M (the sum is the same; the split of real silicon is not visible at P).
//
// Encodings (UG579):
//   INMODE[4:0]  [0] A1 (1) / A2 (0); [1] zero the A input; [2] D into the pre-adder;
//                [3] subtract (D - A); [4] B1 (1) / B2 (0).
//                AD = D + A2 with B2: INMODE = 5'b00100. D - A2: 5'b01100. A2 alone: 5'b00000.
//   OPMODE[8:0]  {W[8:7], Z[6:4], Y[3:2], X[1:0]}
//                X: 00 = 0, 01 = M (needs Y = 01)          (10 = P, 11 = A:B not modelled)
//                Y: 00 = 0, 01 = M (needs X = 01), 11 = C  (10 = all ones not modelled)
//                Z: 000 = 0, 010 = P (needs PREG = 1), 011 = C  (PCIN, shifted: not modelled)
//                W: 00 = 0, 01 = P (needs PREG = 1), 10 = RND, 11 = C
//                P = M: 9'b00_000_01_01; P = M + C: 9'b00_011_01_01 (Z = C) or 9'b11_000_01_01
//                (W = C); P = P + M (accumulate): 9'b00_010_01_01.
//   ALUMODE      4'b0000 only (Z + W + X + Y + CIN).
//   CARRYINSEL   3'b000 only (CIN = CARRYIN, through the CARRYIN register if CARRYINREG = 1).
// An unmodelled OPMODE / ALUMODE / CARRYINSEL value that reaches P stops the simulation with
// $fatal (it never silently computes a wrong P).
//
// Registers (each with its clock enable and active-high synchronous reset; the reset wins over
// the clock enable, as UG579 describes; all registers power up to zero like the device's GSR):
//   A1/A2: AREG 0/1/2, CEA1/CEA2, RSTA. AREG = 1 uses only A2 (CEA2); INMODE[0] then reads the
//          same value (assumption: with AREG < 2 there is no distinct A1 stage in this model).
//   B1/B2: BREG 0/1/2, CEB1/CEB2, RSTB (same convention as A).
//   C: CREG, CEC, RSTC.  D: DREG, CED, RSTD.  AD: ADREG, CEAD, RSTD.  M: MREG, CEM, RSTM.
//   P: PREG, CEP, RSTP.  INMODE: INMODEREG, CEINMODE, RSTINMODE.
//   OPMODE and CARRYINSEL: OPMODEREG / CARRYINSELREG, CECTRL, RSTCTRL.
//   ALUMODE: ALUMODEREG, CEALUMODE, RSTALUMODE.  CARRYIN: CARRYINREG, CECARRYIN, RSTALLCARRYIN.
// Latency to P in enabled clock edges, for AMULTSEL = "AD":
//   A, D: AREG (resp. DREG) + ADREG + MREG + PREG;  B: BREG + MREG + PREG;  C: CREG + PREG;
//   OPMODE: OPMODEREG + PREG;  INMODE: INMODEREG + ADREG + MREG + PREG (INMODE[4]: + MREG + PREG
//   only). With AREG = DREG = ADREG = MREG = PREG = 1, B needs BREG = 2 to line up with A and D.
//
// Parameters checked at elaboration ($error when set to an unsupported value):
//   AREG, BREG in {0, 1, 2}; CREG, DREG, ADREG, MREG, PREG, INMODEREG, OPMODEREG, ALUMODEREG,
//   CARRYINREG, CARRYINSELREG in {0, 1}; AMULTSEL in {"A", "AD"}; BMULTSEL = "B";
//   PREADDINSEL = "A"; USE_MULT = "MULTIPLY"; USE_SIMD = "ONE48"; A_INPUT = B_INPUT = "DIRECT";
//   USE_PATTERN_DETECT = "NO_PATDET"; AUTORESET_PATDET = "NO_RESET"; USE_WIDEXOR = "FALSE";
//   every IS_*_INVERTED = 0.
// Accepted and ignored: ACASCREG, BCASCREG, AUTORESET_PRIORITY, MASK, PATTERN, SEL_MASK,
//   SEL_PATTERN, XORSIMD. RND is used by W = 10.
// Outputs: P and PCOUT (= P) are modelled; ACOUT, BCOUT, CARRYCASCOUT, CARRYOUT, MULTSIGNOUT,
//   OVERFLOW, UNDERFLOW, PATTERNDETECT, PATTERNBDETECT, XOROUT are tied to 0.
//   Inputs ACIN, BCIN, PCIN, CARRYCASCIN, MULTSIGNIN are ignored.

`default_nettype none

module DSP48E2 #(
    /* verilator lint_off UNUSEDPARAM */
    parameter integer ACASCREG = 1,
    parameter integer ADREG = 1,
    parameter integer ALUMODEREG = 1,
    parameter AMULTSEL = "A",
    parameter integer AREG = 1,
    parameter AUTORESET_PATDET = "NO_RESET",
    parameter AUTORESET_PRIORITY = "RESET",
    parameter A_INPUT = "DIRECT",
    parameter integer BCASCREG = 1,
    parameter BMULTSEL = "B",
    parameter integer BREG = 1,
    parameter B_INPUT = "DIRECT",
    parameter integer CARRYINREG = 1,
    parameter integer CARRYINSELREG = 1,
    parameter integer CREG = 1,
    parameter integer DREG = 1,
    parameter integer INMODEREG = 1,
    parameter [3:0] IS_ALUMODE_INVERTED = 4'b0000,
    parameter [0:0] IS_CARRYIN_INVERTED = 1'b0,
    parameter [0:0] IS_CLK_INVERTED = 1'b0,
    parameter [4:0] IS_INMODE_INVERTED = 5'b00000,
    parameter [8:0] IS_OPMODE_INVERTED = 9'b000000000,
    parameter [0:0] IS_RSTALLCARRYIN_INVERTED = 1'b0,
    parameter [0:0] IS_RSTALUMODE_INVERTED = 1'b0,
    parameter [0:0] IS_RSTA_INVERTED = 1'b0,
    parameter [0:0] IS_RSTB_INVERTED = 1'b0,
    parameter [0:0] IS_RSTCTRL_INVERTED = 1'b0,
    parameter [0:0] IS_RSTC_INVERTED = 1'b0,
    parameter [0:0] IS_RSTD_INVERTED = 1'b0,
    parameter [0:0] IS_RSTINMODE_INVERTED = 1'b0,
    parameter [0:0] IS_RSTM_INVERTED = 1'b0,
    parameter [0:0] IS_RSTP_INVERTED = 1'b0,
    parameter [47:0] MASK = 48'h3FFFFFFFFFFF,
    parameter integer MREG = 1,
    parameter integer OPMODEREG = 1,
    parameter [47:0] PATTERN = 48'h000000000000,
    parameter PREADDINSEL = "A",
    parameter integer PREG = 1,
    parameter [47:0] RND = 48'h000000000000,
    parameter SEL_MASK = "MASK",
    parameter SEL_PATTERN = "PATTERN",
    parameter USE_MULT = "MULTIPLY",
    parameter USE_PATTERN_DETECT = "NO_PATDET",
    parameter USE_SIMD = "ONE48",
    parameter USE_WIDEXOR = "FALSE",
    parameter XORSIMD = "XOR24_48_96"
    /* verilator lint_on UNUSEDPARAM */
) (
    output wire [29:0] ACOUT,
    output wire [17:0] BCOUT,
    output wire        CARRYCASCOUT,
    output wire [3:0]  CARRYOUT,
    output wire        MULTSIGNOUT,
    output wire        OVERFLOW,
    output wire [47:0] P,
    output wire        PATTERNBDETECT,
    output wire        PATTERNDETECT,
    output wire [47:0] PCOUT,
    output wire        UNDERFLOW,
    output wire [7:0]  XOROUT,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire [29:0] A,
    input  wire [29:0] ACIN,
    input  wire [3:0]  ALUMODE,
    input  wire [17:0] B,
    input  wire [17:0] BCIN,
    input  wire [47:0] C,
    input  wire        CARRYCASCIN,
    input  wire        CARRYIN,
    input  wire [2:0]  CARRYINSEL,
    input  wire        CEA1,
    input  wire        CEA2,
    input  wire        CEAD,
    input  wire        CEALUMODE,
    input  wire        CEB1,
    input  wire        CEB2,
    input  wire        CEC,
    input  wire        CECARRYIN,
    input  wire        CECTRL,
    input  wire        CED,
    input  wire        CEINMODE,
    input  wire        CEM,
    input  wire        CEP,
    input  wire        CLK,
    input  wire [26:0] D,
    input  wire [4:0]  INMODE,
    input  wire        MULTSIGNIN,
    input  wire [8:0]  OPMODE,
    input  wire [47:0] PCIN,
    input  wire        RSTA,
    input  wire        RSTALLCARRYIN,
    input  wire        RSTALUMODE,
    input  wire        RSTB,
    input  wire        RSTC,
    input  wire        RSTCTRL,
    input  wire        RSTD,
    input  wire        RSTINMODE,
    input  wire        RSTM,
    input  wire        RSTP
    /* verilator lint_on UNUSEDSIGNAL */
);

    // ---- elaboration checks: unsupported parameter values -------------------------------------
    // Each is an elaboration-time $fatal (Verilator reports it as USERFATAL, an error unless
    // warnings are made non-fatal) and the same $fatal at time 0 of the simulation, so that a
    // build with -Wno-fatal still refuses to simulate an unsupported configuration.
    // String parameters are compared as bit vectors of different widths: WIDTHEXPAND is benign.
    /* verilator lint_off WIDTHEXPAND */
    generate
        if (AREG < 0 || AREG > 2) begin : g_bad_areg
            $fatal(1, "DSP48E2 model: AREG must be 0, 1 or 2");
            initial $fatal(1, "DSP48E2 model: AREG must be 0, 1 or 2");
        end
        if (BREG < 0 || BREG > 2) begin : g_bad_breg
            $fatal(1, "DSP48E2 model: BREG must be 0, 1 or 2");
            initial $fatal(1, "DSP48E2 model: BREG must be 0, 1 or 2");
        end
        if (CREG < 0 || CREG > 1 || DREG < 0 || DREG > 1 || ADREG < 0 || ADREG > 1
                || MREG < 0 || MREG > 1 || PREG < 0 || PREG > 1) begin : g_bad_reg
            $fatal(1, "DSP48E2 model: CREG, DREG, ADREG, MREG and PREG must be 0 or 1");
            initial $fatal(1, "DSP48E2 model: CREG, DREG, ADREG, MREG and PREG must be 0 or 1");
        end
        if (INMODEREG < 0 || INMODEREG > 1 || OPMODEREG < 0 || OPMODEREG > 1
                || ALUMODEREG < 0 || ALUMODEREG > 1 || CARRYINREG < 0 || CARRYINREG > 1
                || CARRYINSELREG < 0 || CARRYINSELREG > 1) begin : g_bad_ctrlreg
            $fatal(1, "DSP48E2 model: INMODEREG, OPMODEREG, ALUMODEREG, CARRYINREG and CARRYINSELREG must be 0 or 1");
            initial $fatal(1, "DSP48E2 model: INMODEREG, OPMODEREG, ALUMODEREG, CARRYINREG and CARRYINSELREG must be 0 or 1");
        end
        if (AMULTSEL != "A" && AMULTSEL != "AD") begin : g_bad_amultsel
            $fatal(1, "DSP48E2 model: AMULTSEL must be \"A\" or \"AD\"");
            initial $fatal(1, "DSP48E2 model: AMULTSEL must be \"A\" or \"AD\"");
        end
        if (BMULTSEL != "B") begin : g_bad_bmultsel
            $fatal(1, "DSP48E2 model: only BMULTSEL = \"B\" is modelled");
            initial $fatal(1, "DSP48E2 model: only BMULTSEL = \"B\" is modelled");
        end
        if (PREADDINSEL != "A") begin : g_bad_preaddinsel
            $fatal(1, "DSP48E2 model: only PREADDINSEL = \"A\" is modelled");
            initial $fatal(1, "DSP48E2 model: only PREADDINSEL = \"A\" is modelled");
        end
        if (USE_MULT != "MULTIPLY") begin : g_bad_use_mult
            $fatal(1, "DSP48E2 model: only USE_MULT = \"MULTIPLY\" is modelled");
            initial $fatal(1, "DSP48E2 model: only USE_MULT = \"MULTIPLY\" is modelled");
        end
        if (USE_SIMD != "ONE48") begin : g_bad_use_simd
            $fatal(1, "DSP48E2 model: only USE_SIMD = \"ONE48\" is modelled");
            initial $fatal(1, "DSP48E2 model: only USE_SIMD = \"ONE48\" is modelled");
        end
        if (A_INPUT != "DIRECT" || B_INPUT != "DIRECT") begin : g_bad_input
            $fatal(1, "DSP48E2 model: only A_INPUT = B_INPUT = \"DIRECT\" is modelled (no cascade)");
            initial $fatal(1, "DSP48E2 model: only A_INPUT = B_INPUT = \"DIRECT\" is modelled (no cascade)");
        end
        if (USE_PATTERN_DETECT != "NO_PATDET" || AUTORESET_PATDET != "NO_RESET") begin : g_bad_patdet
            $fatal(1, "DSP48E2 model: pattern detection is not modelled");
            initial $fatal(1, "DSP48E2 model: pattern detection is not modelled");
        end
        if (USE_WIDEXOR != "FALSE") begin : g_bad_widexor
            $fatal(1, "DSP48E2 model: the wide XOR is not modelled");
            initial $fatal(1, "DSP48E2 model: the wide XOR is not modelled");
        end
        if (IS_ALUMODE_INVERTED != 4'b0000 || IS_CARRYIN_INVERTED != 1'b0
                || IS_CLK_INVERTED != 1'b0 || IS_INMODE_INVERTED != 5'b00000
                || IS_OPMODE_INVERTED != 9'b000000000 || IS_RSTALLCARRYIN_INVERTED != 1'b0
                || IS_RSTALUMODE_INVERTED != 1'b0 || IS_RSTA_INVERTED != 1'b0
                || IS_RSTB_INVERTED != 1'b0 || IS_RSTCTRL_INVERTED != 1'b0
                || IS_RSTC_INVERTED != 1'b0 || IS_RSTD_INVERTED != 1'b0
                || IS_RSTINMODE_INVERTED != 1'b0 || IS_RSTM_INVERTED != 1'b0
                || IS_RSTP_INVERTED != 1'b0) begin : g_bad_inverted
            $fatal(1, "DSP48E2 model: IS_*_INVERTED must be 0 (pin inversion is not modelled)");
            initial $fatal(1, "DSP48E2 model: IS_*_INVERTED must be 0 (pin inversion is not modelled)");
        end
    endgenerate

    localparam USE_AD = (AMULTSEL == "AD");
    /* verilator lint_on WIDTHEXPAND */

    // ---- registers (power-up value 0) ----------------------------------------------------------
    // A and B have two stages and P feeds back (below); the others are DSP48E2_optional_reg.
    reg [29:0] a1_q, a2_q;
    reg [17:0] b1_q, b2_q;

    initial begin
        a1_q = 30'd0; a2_q = 30'd0; b1_q = 18'd0; b2_q = 18'd0;
    end

    // ---- A, B, C, D input stages ---------------------------------------------------------------
    always @(posedge CLK) begin
        if (RSTA) begin
            a1_q <= 30'd0;
            a2_q <= 30'd0;
        end else begin
            if (CEA1) a1_q <= A;
            if (CEA2) a2_q <= (AREG == 2) ? a1_q : A;
        end
    end

    always @(posedge CLK) begin
        if (RSTB) begin
            b1_q <= 18'd0;
            b2_q <= 18'd0;
        end else begin
            if (CEB1) b1_q <= B;
            if (CEB2) b2_q <= (BREG == 2) ? b1_q : B;
        end
    end

    wire [29:0] a2_o = (AREG == 0) ? A : a2_q;
    wire [29:0] a1_o = (AREG == 2) ? a1_q : a2_o;
    wire [17:0] b2_o = (BREG == 0) ? B : b2_q;
    wire [17:0] b1_o = (BREG == 2) ? b1_q : b2_o;
    wire [47:0] c_o;
    wire [26:0] d_o;
    wire [4:0] inmode;
    DSP48E2_optional_reg #(.WIDTH(48), .USED(CREG != 0)) c_reg (
        .clk(CLK), .rst(RSTC), .ce(CEC), .d(C), .q(c_o));
    DSP48E2_optional_reg #(.WIDTH(27), .USED(DREG != 0)) d_reg (
        .clk(CLK), .rst(RSTD), .ce(CED), .d(D), .q(d_o));
    DSP48E2_optional_reg #(.WIDTH(5), .USED(INMODEREG != 0)) inmode_reg (
        .clk(CLK), .rst(RSTINMODE), .ce(CEINMODE), .d(INMODE), .q(inmode));

    // ---- pre-adder (27 bits, wraps) ------------------------------------------------------------
    // Only A[26:0] reaches the pre-adder and the multiplier (A[29:27] feed only ACOUT and A:B).
    /* verilator lint_off UNUSEDSIGNAL */
    wire [29:0] a_sel = inmode[0] ? a1_o : a2_o;
    /* verilator lint_on UNUSEDSIGNAL */
    wire [26:0] a_pre = inmode[1] ? 27'd0 : a_sel[26:0];
    wire [26:0] d_pre = inmode[2] ? d_o : 27'd0;
    wire [26:0] ad_sum = inmode[3] ? d_pre - a_pre : d_pre + a_pre;

    wire [26:0] ad_o;
    DSP48E2_optional_reg #(.WIDTH(27), .USED(ADREG != 0)) ad_reg (
        .clk(CLK), .rst(RSTD), .ce(CEAD), .d(ad_sum), .q(ad_o));

    // ---- multiplier (27 x 18 signed, 45-bit product) -------------------------------------------
    wire [26:0] mult_a = USE_AD ? ad_o : a_pre;
    wire [17:0] mult_b = inmode[4] ? b1_o : b2_o;
    wire [44:0] m_full = {{18{mult_a[26]}}, mult_a} * {{27{mult_b[17]}}, mult_b};

    wire [44:0] m_o;
    DSP48E2_optional_reg #(.WIDTH(45), .USED(MREG != 0)) m_reg (
        .clk(CLK), .rst(RSTM), .ce(CEM), .d(m_full), .q(m_o));
    wire [47:0] m_ext = {{3{m_o[44]}}, m_o};

    // ---- control registers -----------------------------------------------------------------------
    wire [8:0] opmode;
    wire [2:0] carryinsel;
    wire [3:0] alumode;
    wire carryin;
    DSP48E2_optional_reg #(.WIDTH(9), .USED(OPMODEREG != 0)) opmode_reg (
        .clk(CLK), .rst(RSTCTRL), .ce(CECTRL), .d(OPMODE), .q(opmode));
    DSP48E2_optional_reg #(.WIDTH(3), .USED(CARRYINSELREG != 0)) carryinsel_reg (
        .clk(CLK), .rst(RSTCTRL), .ce(CECTRL), .d(CARRYINSEL), .q(carryinsel));
    DSP48E2_optional_reg #(.WIDTH(4), .USED(ALUMODEREG != 0)) alumode_reg (
        .clk(CLK), .rst(RSTALUMODE), .ce(CEALUMODE), .d(ALUMODE), .q(alumode));
    DSP48E2_optional_reg #(.WIDTH(1), .USED(CARRYINREG != 0)) carryin_reg (
        .clk(CLK), .rst(RSTALLCARRYIN), .ce(CECARRYIN), .d(CARRYIN), .q(carryin));

    // ---- X, Y, Z, W multiplexers and the post-adder ----------------------------------------------
    wire [1:0] sel_x = opmode[1:0];
    wire [1:0] sel_y = opmode[3:2];
    wire [2:0] sel_z = opmode[6:4];
    wire [1:0] sel_w = opmode[8:7];

    // X + Y = M when both select M (the partial products' sum); Y may also add C.
    wire [47:0] mux_x = (sel_x == 2'b01) ? m_ext : 48'd0;
    wire [47:0] mux_y = (sel_y == 2'b11) ? c_o : 48'd0;
    reg [47:0] p_q;         // the P register (fed back by Z = P, W = P)
    initial p_q = 48'd0;
    wire [47:0] mux_z = (sel_z == 3'b011) ? c_o : (sel_z == 3'b010) ? p_q : 48'd0;
    wire [47:0] mux_w = (sel_w == 2'b11) ? c_o : (sel_w == 2'b01) ? p_q
                      : (sel_w == 2'b10) ? RND : 48'd0;
    wire cin = (carryinsel == 3'b000) ? carryin : 1'b0;
    wire [47:0] alu = mux_z + mux_w + mux_x + mux_y + {47'd0, cin};

    // Modes this model does not compute (never silently wrong): see the header.
    wire bad_x = (sel_x == 2'b10) || (sel_x == 2'b11) || ((sel_x == 2'b01) != (sel_y == 2'b01));
    wire bad_y = (sel_y == 2'b10);
    wire bad_z = !((sel_z == 3'b000) || (sel_z == 3'b011) || (sel_z == 3'b010 && PREG != 0));
    wire bad_w = (sel_w == 2'b01) && (PREG == 0);
    wire bad_alu = (alumode != 4'b0000) || (carryinsel != 3'b000);
    wire unsupported = bad_x || bad_y || bad_z || bad_w || bad_alu;

    always @(posedge CLK) begin
        if (unsupported === 1'b1 && ((PREG == 0) || (CEP && !RSTP))) begin
            $fatal(1, "DSP48E2 model: unmodelled mode OPMODE=%b ALUMODE=%b CARRYINSEL=%b",
                   opmode, alumode, carryinsel);
        end
    end

    // ---- outputs ---------------------------------------------------------------------------------
    always @(posedge CLK) begin
        if (RSTP) p_q <= 48'd0;
        else if (CEP) p_q <= alu;
    end

    assign P = (PREG != 0) ? p_q : alu;
    assign PCOUT = P;
    assign ACOUT = 30'd0;
    assign BCOUT = 18'd0;
    assign CARRYCASCOUT = 1'b0;
    assign CARRYOUT = 4'd0;
    assign MULTSIGNOUT = 1'b0;
    assign OVERFLOW = 1'b0;
    assign UNDERFLOW = 1'b0;
    assign PATTERNDETECT = 1'b0;
    assign PATTERNBDETECT = 1'b0;
    assign XOROUT = 8'd0;

endmodule

// One optional pipeline register of the DSP48E2: with USED, q is d registered (clock enable,
// synchronous reset that wins over the enable, power-up 0); without, q is d. It lives in this
// file so that the model stays one source file (hence the DECLFILENAME waiver).
/* verilator lint_off DECLFILENAME */
module DSP48E2_optional_reg #(
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
