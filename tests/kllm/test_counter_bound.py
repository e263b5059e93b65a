"""qllm counter-bound: the KLLM counter's blocks at its described structure, on sky130.

Both tests map the same configuration into one build folder shared by the session's xdist
workers, one at a time: the second reads the first's standard-cell results from the flow's
cache (half of each run is the FP16 MAC), so the command is checked on what the blocks test
mapped."""

import pytest

from qllm_cores.fpga.kllm_counter_bound import bound, main, readings, width_floors

#: sky130_fd_sc_hd: dfxtp_1 20.0192 um^2 / nand2_1 3.7536 um^2 (the Liberty file's areas).
SKY130_FLOP_EQ = 20.0192 / 3.7536


@pytest.mark.parametrize("argv, message", [
    (["--bins", "12"], "bins=12 must be a power of two"),
    (["--inputs", "0"], "inputs=0 must be at least 1"),
    (["--length", "0"], "length=0 must be at least 1"),
    (["--library", "tsmc28"], "library must be one of"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    assert main([*argv, "--build-dir", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qllm counter-bound: ") and message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "b").exists()


@pytest.fixture
def shared_build(session_folder, pdk_root, monkeypatch):
    """The session's counter-bound folder, under its lock, with ``PDK_ROOT`` set."""
    monkeypatch.setenv("PDK_ROOT", str(pdk_root))
    with session_folder("counter-bound") as folder:
        yield folder


def test_blocks_hold_their_registers_and_grow_with_the_bins(shared_build):
    small, large = bound([4, 16], inputs=4, length=100, libraries=["sky130"],
                         build_dir=shared_build)
    count_bits = 7                                  # 0..100
    for b in (small, large):
        # every count bit is a flip-flop in the bin and in its readout word, plus logic
        assert b.bin > count_bits * SKY130_FLOP_EQ + 10
        assert count_bits * SKY130_FLOP_EQ < b.readout_word < count_bits * (SKY130_FLOP_EQ + 4)
        assert b.total == pytest.approx(4 * b.decoder + b.bins * (b.bin + b.readout_word))
        assert 4_000 < b.fp16_mac < 10_000
    assert (small.bin, small.readout_word) == (large.bin, large.readout_word)
    assert 2 < small.decoder < large.decoder      # 2 -> 4 and 4 -> 16 lines
    assert large.total > 3 * small.total
    assert 0 < small.popcount < small.bin - count_bits * SKY130_FLOP_EQ
    described, spill, latched, one_copy, outside = readings(small)
    assert described[1:3] == (small.total, 4)
    # Narrow counts at 4 inputs, length 100: 5 bits (3 events; gap 8 beats >= 2 x 3 cycles).
    z = small.spill
    assert (z.narrow_bits, z.entries) == (5, 3)
    assert 5 * SKY130_FLOP_EQ < z.bin < small.bin
    assert 6 * SKY130_FLOP_EQ < z.readout_word < small.readout_word
    assert spill[1] == pytest.approx(4 * small.decoder + 4 * (z.bin + z.readout_word)
                                     + z.shared) and spill[2] == 4
    # 4 bins x 6 bits of latches (sky130 dlxtp_1: 15.0144 um^2), fewer than 6 x 4 flip-flops
    assert 24 * 15.0144 / 3.7536 < z.latch_bank < 4 * z.readout_word
    assert latched[1] == pytest.approx(spill[1] - 4 * z.readout_word + z.latch_bank)
    assert large.spill.shared > z.shared                 # 16 bins: more flags to drain
    # The library's smallest latch and flip-flop (dlxtp_1, dfxtp_1).
    assert small.latch == pytest.approx(15.0144 / 3.7536)
    assert small.flop == pytest.approx(SKY130_FLOP_EQ)
    floors = {f.width: f for f in width_floors(small)}
    assert sorted(floors) == [2, 3, 4, 5, 6, 7]         # 4 inputs: a bin carries once a beat
    full = floors[7]                                     # no spill: the whole count
    assert (full.events, full.ports, full.drains) == (0, 0, 0)
    assert full.storage == pytest.approx(4 * 7 * small.latch)
    assert full.counting == pytest.approx(4 * small.decoder + 4 * small.bin)
    # 5 bits: 100 >> 5 = 3 events, carries 8 beats apart (32 - 3 counts at 4 a beat), one
    # drain (2 x 3 <= 8): the bound of the spill the unit builds.
    f = floors[5]
    assert (f.events, f.gap, f.ports) == (3, 8, 1)
    assert f.storage == pytest.approx(4 * 6 * small.latch + 4 * small.flop
                                      + 2 * 3 * 2 * small.latch)
    assert f.drains == pytest.approx(small.drain_port) and small.drain_port > 0
    assert floors[2].ports == 2 * 25                     # 25 events, a carry every beat
    assert one_copy[1] == pytest.approx(small.total - 4 * small.readout_word)
    assert one_copy[2] == pytest.approx(4 * 25 / (25 + 4))     # 25 beats, then 4 readout cycles
    assert outside[1] == pytest.approx(4 * small.decoder + 4 * small.popcount)


def test_the_table_names_table_i_and_its_28nm_gate(shared_build, capsys):
    assert main(["--bins", "4", "--inputs", "4", "--length", "100", "--library", "sky130",
                 "--build-dir", str(shared_build)]) == 0
    out = capsys.readouterr().out
    assert "| 4 | sky130 |" in out
    assert "| KLLM Table I | 28 nm | | | | 17,283 (8,469 um^2) | | 2.99 | 5.34 |" in out
    assert "0.49 um^2" in out
