"""Board builds (fpga/bridge/board.py): command-line errors, nextpnr's failures quoted, and real
bitstreams for the iCEBreaker and the ULX3S built with the YoWASP tools (``synth``)."""

import pytest

from qllm_cores.fpga.bridge import board


def test_bitstream_command_line_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        board.main(["--board", "nexys", "--unit", "kllm_concat"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'nexys'" in capsys.readouterr().err
    assert board.main(["--board", "icebreaker", "--unit", "nope"]) == 2
    assert "unknown unit 'nope'" in capsys.readouterr().err
    assert board.main(["--board", "icebreaker", "--unit", "kllm_concat",
                           "--set", "lanes=0"]) == 2
    assert "lanes must be in range 1..4096, not 0" in capsys.readouterr().err
    assert board.main(["--board", "icebreaker", "--unit", "kllm_concat",
                           "--baud", "9000000"]) == 2
    assert "baud must be at most 3000000" in capsys.readouterr().err


def test_does_not_fit_message_quotes_nextpnr(tmp_path):
    icebreaker = board.BOARDS["icebreaker"]
    (tmp_path / "big.json").write_text("{}")
    (tmp_path / "big.tim").write_text(
        "Info: Device utilisation:\n"
        "Info: \t         ICESTORM_LC:    9596/   5280   181%\n"
        "Info: \t        ICESTORM_RAM:       1/     30     3%\n"
        "ERROR: Unable to place cell 'x', no BELs remaining to implement cell type "
        "'ICESTORM_LC'\n")

    class Completed:
        returncode, stderr = 1, ""

    message = board._failure_message(icebreaker, "big", tmp_path, Completed())
    assert message.startswith("big does not fit the icebreaker board's FPGA (needs "
                              "9596/5280 ICESTORM_LC); nextpnr says:")
    assert "no BELs remaining to implement cell type 'ICESTORM_LC'" in message
    # Timing: nextpnr still writes the placed design, and the log says why it failed.
    (tmp_path / "big.tim").write_text(
        "Info: \t         ICESTORM_LC:    3000/   5280    56%\n"
        "ERROR: Max frequency for clock 'bridge.clk': 9.91 MHz (FAIL at 12.00 MHz)\n")
    (tmp_path / "big.asc").write_text("")
    (tmp_path / "report.json").write_text("{}")
    message = board._failure_message(icebreaker, "big", tmp_path, Completed())
    assert message.startswith("big is too slow for the icebreaker board's clock; nextpnr "
                              "says:\n    ERROR: Max frequency for clock 'bridge.clk': 9.91 MHz")
    assert "--timing-allow-fail" in message


#: Size of every iCE40 UP5K bitstream icepack writes (uncompressed, whatever the design;
#: measured: kllm_concat and accllm_sparse_selector behind the bridge both give 104,090 bytes).
UP5K_BITSTREAM_BYTES = 104_090
ICE40_SYNC = bytes.fromhex("7eaa997e")


@pytest.mark.synth
def test_icebreaker_bitstream(tmp_path, capsys):
    code = board.main(["--board", "icebreaker", "--unit", "accllm_sparse_selector",
                           "--build-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    path = tmp_path / "bitstream/icebreaker/accllm_sparse_selector/accllm_sparse_selector.bin"
    data = path.read_bytes()
    assert len(data) == UP5K_BITSTREAM_BYTES and ICE40_SYNC in data[:16]
    assert f"bitstream: {path} ({UP5K_BITSTREAM_BYTES} bytes)" in out.out
    assert "baud: 115200 (divisor 104, actual 115385, +0.16%)" in out.out
    assert "Fmax: " in out.out and "ICESTORM_LC " in out.out and "ICESTORM_RAM 1/30" in out.out


@pytest.mark.synth
def test_ulx3s_bitstream(tmp_path, capsys):
    code = board.main(["--board", "ulx3s-25f", "--unit", "accllm_sparse_selector",
                           "--build-dir", str(tmp_path), "--baud", "1000000"])
    out = capsys.readouterr()
    assert code == 0, out.err
    path = tmp_path / "bitstream/ulx3s-25f/accllm_sparse_selector/accllm_sparse_selector.bit"
    data = path.read_bytes()
    # ecppack --compress (amaranth-boards' ULX3S default): the size depends on the design.
    assert len(data) > 10_000 and data.startswith(b"\xff\x00Part: LFE5U-25F")
    assert "baud: 1000000 (divisor 25, actual 1000000, +0.00%)" in out.out
    assert "TRELLIS_COMB " in out.out and "DP16KD 1/" in out.out
