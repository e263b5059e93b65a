// DP16KD: behavioral simulation model of the subset of the Lattice ECP5 16-kbit true dual-port
// block RAM that qllm-cores drives (the KLLM index counter's per-lane histograms,
// kllm_idx_counter counts="memory", target "ecp5").
//
// Written from the ECP5 memory usage guide's description of the DP16KD primitive (ports,
// parameters, output register); no vendor or third-party source was used. Yosys ships only a
// blackbox DP16KD (lattice/cells_bb_ecp5.v); this model has the same module name, port names and
// parameter names, so an instance synthesizes with Yosys (kept as a cell, placed by
// nextpnr-ecp5) and simulates with Verilator (or Icarus) against this file.
//
// Modelled: both ports in the 1024 x 18 mode (DATA_WIDTH_A = DATA_WIDTH_B = 18): the word
// address on AD[13:4], byte enables on AD[1:0] (bit 0: bits 8..0, bit 1: bits 17..9), AD[3:2]
// ignored. A port clocked with CE high writes DI (WE high, under the byte enables) or reads
// (WE low) into its data register; WRITEMODE "NORMAL": a write leaves that register unchanged.
// REGMODE "NOREG": DO is the data register; "OUTREG": DO is a second register that loads the
// first at clock edges with OCE high. RST (synchronous, RESETMODE "SYNC") clears both registers.
// A read and a write of the same word by the two ports at one edge read the old word here; the
// device leaves it undefined, and the counter never uses such a read. Memory and registers
// power up to zero (the INITVAL parameters are not modelled).
// Parameters checked at elaboration ($fatal when set to an unsupported value): DATA_WIDTH_A/B,
//   REGMODE_A/B, WRITEMODE_A/B, RESETMODE, CSDECODE_A/B = "0b000" (chip selects CSx = 0).
// Accepted and ignored: GSR, ASYNC_RESET_RELEASE, CLKAMUX, CLKBMUX, INITVAL_*.

`default_nettype none

module DP16KD #(
    /* verilator lint_off UNUSEDPARAM */
    parameter DATA_WIDTH_A = 18,
    parameter DATA_WIDTH_B = 18,
    parameter REGMODE_A = "NOREG",
    parameter REGMODE_B = "NOREG",
    parameter WRITEMODE_A = "NORMAL",
    parameter WRITEMODE_B = "NORMAL",
    parameter RESETMODE = "SYNC",
    parameter ASYNC_RESET_RELEASE = "SYNC",
    parameter CSDECODE_A = "0b000",
    parameter CSDECODE_B = "0b000",
    parameter CLKAMUX = "CLKA",
    parameter CLKBMUX = "CLKB",
    parameter GSR = "ENABLED"
    /* verilator lint_on UNUSEDPARAM */
) (
    input wire CLKA, input wire CEA, input wire OCEA, input wire WEA, input wire RSTA,
    input wire CSA0, input wire CSA1, input wire CSA2,
    input wire ADA0, input wire ADA1, input wire ADA2, input wire ADA3, input wire ADA4,
    input wire ADA5, input wire ADA6, input wire ADA7, input wire ADA8, input wire ADA9,
    input wire ADA10, input wire ADA11, input wire ADA12, input wire ADA13,
    input wire DIA0, input wire DIA1, input wire DIA2, input wire DIA3, input wire DIA4,
    input wire DIA5, input wire DIA6, input wire DIA7, input wire DIA8, input wire DIA9,
    input wire DIA10, input wire DIA11, input wire DIA12, input wire DIA13, input wire DIA14,
    input wire DIA15, input wire DIA16, input wire DIA17,
    output wire DOA0, output wire DOA1, output wire DOA2, output wire DOA3, output wire DOA4,
    output wire DOA5, output wire DOA6, output wire DOA7, output wire DOA8, output wire DOA9,
    output wire DOA10, output wire DOA11, output wire DOA12, output wire DOA13,
    output wire DOA14, output wire DOA15, output wire DOA16, output wire DOA17,
    input wire CLKB, input wire CEB, input wire OCEB, input wire WEB, input wire RSTB,
    input wire CSB0, input wire CSB1, input wire CSB2,
    input wire ADB0, input wire ADB1, input wire ADB2, input wire ADB3, input wire ADB4,
    input wire ADB5, input wire ADB6, input wire ADB7, input wire ADB8, input wire ADB9,
    input wire ADB10, input wire ADB11, input wire ADB12, input wire ADB13,
    input wire DIB0, input wire DIB1, input wire DIB2, input wire DIB3, input wire DIB4,
    input wire DIB5, input wire DIB6, input wire DIB7, input wire DIB8, input wire DIB9,
    input wire DIB10, input wire DIB11, input wire DIB12, input wire DIB13, input wire DIB14,
    input wire DIB15, input wire DIB16, input wire DIB17,
    output wire DOB0, output wire DOB1, output wire DOB2, output wire DOB3, output wire DOB4,
    output wire DOB5, output wire DOB6, output wire DOB7, output wire DOB8, output wire DOB9,
    output wire DOB10, output wire DOB11, output wire DOB12, output wire DOB13,
    output wire DOB14, output wire DOB15, output wire DOB16, output wire DOB17
);
    initial begin
        if (DATA_WIDTH_A != 18 || DATA_WIDTH_B != 18)
            $fatal(1, "DP16KD model: only DATA_WIDTH_A = DATA_WIDTH_B = 18 is modelled");
        if ((REGMODE_A != "NOREG" && REGMODE_A != "OUTREG")
                || (REGMODE_B != "NOREG" && REGMODE_B != "OUTREG"))
            $fatal(1, "DP16KD model: REGMODE must be NOREG or OUTREG");
        if (WRITEMODE_A != "NORMAL" || WRITEMODE_B != "NORMAL")
            $fatal(1, "DP16KD model: only WRITEMODE NORMAL is modelled");
        if (RESETMODE != "SYNC")
            $fatal(1, "DP16KD model: only RESETMODE SYNC is modelled");
        if (CSDECODE_A != "0b000" || CSDECODE_B != "0b000")
            $fatal(1, "DP16KD model: only CSDECODE 0b000 is modelled");
    end

    reg [17:0] mem [0:1023];
    integer k;
    initial for (k = 0; k < 1024; k = k + 1) mem[k] = 18'h0;

    wire [9:0] addr_a = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4};
    wire [9:0] addr_b = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4};
    wire [1:0] be_a = {ADA1, ADA0};
    wire [1:0] be_b = {ADB1, ADB0};
    wire [17:0] di_a = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8,
                        DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
    wire [17:0] di_b = {DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8,
                        DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0};
    wire chip_a = ~(CSA0 | CSA1 | CSA2);
    wire chip_b = ~(CSB0 | CSB1 | CSB2);
    /* verilator lint_off UNUSEDSIGNAL */
    wire unused = ADA2 ^ ADA3 ^ ADB2 ^ ADB3;
    /* verilator lint_on UNUSEDSIGNAL */

    reg [17:0] data_a = 18'h0, out_a = 18'h0, data_b = 18'h0, out_b = 18'h0;

    always @(posedge CLKA) begin
        if (RSTA) begin
            data_a <= 18'h0;
            out_a <= 18'h0;
        end else begin
            if (CEA && chip_a) begin
                if (WEA) begin
                    if (be_a[0]) mem[addr_a][8:0] <= di_a[8:0];
                    if (be_a[1]) mem[addr_a][17:9] <= di_a[17:9];
                end else begin
                    data_a <= mem[addr_a];
                end
            end
            if (OCEA) out_a <= data_a;
        end
    end

    always @(posedge CLKB) begin
        if (RSTB) begin
            data_b <= 18'h0;
            out_b <= 18'h0;
        end else begin
            if (CEB && chip_b) begin
                if (WEB) begin
                    if (be_b[0]) mem[addr_b][8:0] <= di_b[8:0];
                    if (be_b[1]) mem[addr_b][17:9] <= di_b[17:9];
                end else begin
                    data_b <= mem[addr_b];
                end
            end
            if (OCEB) out_b <= data_b;
        end
    end

    wire [17:0] do_a = REGMODE_A == "OUTREG" ? out_a : data_a;
    wire [17:0] do_b = REGMODE_B == "OUTREG" ? out_b : data_b;
    assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6,
            DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = do_a;
    assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6,
            DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = do_b;
endmodule

`default_nettype wire
