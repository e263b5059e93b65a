# amaranth: UnusedElaboratable=no
"""The board link (fpga/bridge/): the UART bridge and the host (board builds: test_board.py).

The host's Python API runs unchanged against a simulated board: :class:`SimulatedPort` is a
transport (``write``/``read``) whose other end is Amaranth's simulator running
:class:`UartBridge` around a unit, with the serial lines modelled bit by bit here (random
pauses between the host's bytes). Every output beat is checked against the golden model by the
host itself; mutants (a unit with a stuck bit, one that loses beats, a wrong golden model)
show that the check catches them.
"""

import dataclasses
import json
import subprocess
import sys
import time
from collections import deque

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from qllm_cores.fpga.bridge import host
from qllm_cores.fpga.bridge.board import unit_bridge
from qllm_cores.fpga.bridge.gateware import UartBridge, layout_of
from qllm_cores.fpga.bridge.host import run_unit
from qllm_cores.fpga.bridge.protocol import (
    BridgeClient,
    BridgeLayout,
    Command,
    Header,
    HostError,
    bridge_identity,
    divisor_for,
)
from qllm_cores.gen.registry import UNITS, resolve_params
from qllm_cores.gen.verilog import unit_manifest, write_manifest
from qllm_cores.hdl.kllm.concat import KllmConcat
from tests.concat_mutants import LossyConcat, StuckBitConcat
from qllm_cores.verif.bench import golden_model

DIVISOR = 4
BREAK = object()


class SimulatedPort:
    """A serial port whose far end is ``bridge`` in Amaranth's simulator.

    ``write`` queues bytes that a testbench plays on ``bridge.rx`` (8N1, ``divisor`` cycles a
    bit) with random idle time before some of them; another testbench decodes ``bridge.tx``
    (sampling mid-bit, checking start and stop bits). ``read(n)`` advances the simulation until
    ``n`` bytes arrived or the line has been quiet in both directions for ``timeout_bytes``
    frame times, like a serial port's read timeout.
    """

    def __init__(self, bridge, *, seed=0, pause_probability=0.25, timeout_bytes=60):
        self.bridge = bridge
        self.divisor = bridge.divisor
        self.rng = np.random.default_rng(seed)
        self.pause_probability = pause_probability
        self.timeout_cycles = timeout_bytes * 10 * self.divisor
        self.to_board, self.from_board = deque(), deque()
        self.cycles = 0
        self.last_activity = 0
        self.sending = False
        self.line_errors = []
        self.sim = Simulator(bridge)
        self.sim.add_clock(1e-6)
        for bench in (self._clock, self._drive_rx, self._listen_tx):
            self.sim.add_testbench(bench, background=True)

    async def _clock(self, ctx):
        async for _ in ctx.tick():
            self.cycles += 1

    async def _drive_rx(self, ctx):
        rx, divisor = self.bridge.rx, self.divisor
        ctx.set(rx, 1)
        while True:
            if not self.to_board:
                self.sending = False
                await ctx.tick()
                continue
            self.sending = True
            byte = self.to_board.popleft()
            if byte is BREAK:
                ctx.set(rx, 0)
                await ctx.tick().repeat(20 * divisor)
                ctx.set(rx, 1)
                await ctx.tick().repeat(2 * divisor)
                continue
            if self.rng.random() < self.pause_probability:    # the host pauses
                await ctx.tick().repeat(int(self.rng.integers(1, 30 * divisor)))
            for bit in [0] + [(byte >> k) & 1 for k in range(8)] + [1]:
                ctx.set(rx, bit)
                await ctx.tick().repeat(divisor)
            self.last_activity = self.cycles

    async def _listen_tx(self, ctx):
        tx, divisor = self.bridge.tx, self.divisor
        while True:
            await ctx.tick()
            if ctx.get(tx) != 0:
                continue
            await ctx.tick().repeat(divisor // 2)
            if ctx.get(tx) != 0:
                self.line_errors.append(f"start bit glitch at cycle {self.cycles}")
                continue
            byte = 0
            for k in range(8):
                await ctx.tick().repeat(divisor)
                byte |= ctx.get(tx) << k
            await ctx.tick().repeat(divisor)
            if ctx.get(tx) != 1:
                self.line_errors.append(f"stop bit 0 at cycle {self.cycles}")
            self.from_board.append(byte)
            self.last_activity = self.cycles

    def send_break(self, duration):
        """Hold ``rx`` low for two frame times (``duration`` is ignored)."""
        self.to_board.append(BREAK)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def write(self, data):
        self.to_board.extend(bytes(data))
        return len(data)

    def read(self, n):
        out = bytearray()
        self.last_activity = max(self.last_activity, self.cycles)
        while len(out) < n:
            if self.from_board:
                out.append(self.from_board.popleft())
                continue
            if self.sending or self.to_board:
                self.last_activity = self.cycles
            elif self.cycles - self.last_activity > self.timeout_cycles:
                break
            self.sim.advance()
        return bytes(out)


def simulated(unit, params=None, *, seed=0, rx_fifo_depth=None, **port_options):
    bridge, _ = unit_bridge(unit, overrides=params, divisor=DIVISOR,
                            rx_fifo_depth=rx_fifo_depth)
    return SimulatedPort(bridge, seed=seed, **port_options)


# --------------------------------------------------------------------------- host vs simulation


@pytest.mark.parametrize("unit, params, count, fifo", [
    # Output frames (3 bytes + 1 acknowledgement) outweigh input frames (3 bytes): the
    # transmitter limits, the unit stalls, and an 8-byte receive buffer makes the host wait.
    ("kllm_concat", {"lanes": 2}, 150, 8),
    ("accllm_sparse_selector", {}, 120, None),
    # Many input beats per output burst (a 4-bin histogram per reduction).
    ("kllm_idx_counter", {"n_inputs": 3, "idx_bits": 2, "max_len": 12}, 100, None),
])
def test_host_against_simulated_board(unit, params, count, fifo):
    port = simulated(unit, params, seed=count, rx_fifo_depth=fifo)
    started = time.perf_counter()
    result = run_unit(port, unit, params, count=count, seed=5)
    seconds = time.perf_counter() - started
    assert result.ok, result.report()
    assert result.expected is not None
    assert result.sent == {"i": count}
    got = next(iter(result.outputs["o"].values()))
    want = next(iter(result.expected["o"].values()))
    assert len(got) == len(want) > 0
    assert result.status == {"framing_error": 0, "rx_overrun": 0, "unknown_command": 0}
    assert port.line_errors == []
    print(f"{unit}: {count} beats, {port.cycles} cycles, {seconds:.1f} s")


def test_host_command_line_with_an_inputs_file(tmp_path, monkeypatch, capsys):
    """``qllm host --inputs ... --save ...`` with the port replaced by a simulation."""
    params = {"lanes": 1, "a_bits": 2, "b_bits": 3}
    port = simulated("kllm_concat", params, seed=1)
    monkeypatch.setattr(host, "open_serial", lambda *args: port)
    np.savez(tmp_path / "in.npz", **{"i.a": [[0], [3], [1], [2]], "i.b": [[7], [0], [5], [2]]})
    code = host.main(["--port", "sim", "--unit", "kllm_concat", "--set", "lanes=1",
                      "--set", "a_bits=2", "--set", "b_bits=3",
                      "--inputs", str(tmp_path / "in.npz"), "--save", str(tmp_path / "out.npz")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "received beats: o 4" in out and "every output beat matches" in out
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["o.y"][:, 0].tolist() == [7, 24, 13, 18]


def test_send_order():
    layout = BridgeLayout.from_manifest(unit_manifest("oaken_dequantizer"))
    words = {0: [10, 11], 1: [20, 21, 22], 2: [30]}
    assert host._send_order(layout, words) == [(0, 10), (1, 20), (2, 30), (0, 11), (1, 21),
                                               (1, 22)]
    order = ["hdr", "dense", "dense", "coo", "dense", "hdr"]
    assert host._send_order(layout, words, order) == [(0, 10), (1, 20), (1, 21), (2, 30),
                                                      (1, 22), (0, 11)]
    with pytest.raises(ValueError, match=r"order leaves beats of \['hdr'\] unsent"):
        host._send_order(layout, words, order[:-1])
    with pytest.raises(ValueError, match="more beats of 'coo' than the 1 given"):
        host._send_order(layout, words, order + ["coo"])


# --------------------------------------------------------------------------- mutants


def mutant_port(mutant_class, params):
    spec, resolved = resolve_params("kllm_concat", None, params)
    mutant = mutant_class(**resolved)
    identity = bridge_identity(layout_of(mutant), "kllm_concat", resolved)
    return SimulatedPort(UartBridge(mutant, DIVISOR, identity=identity), seed=2)


def test_host_flags_a_stuck_bit_mutant(monkeypatch, capsys):
    params = {"lanes": 2}
    result = run_unit(mutant_port(StuckBitConcat, params), "kllm_concat", params, count=40,
                      seed=3)
    assert not result.ok
    b0 = np.asarray(result.expected["o"]["y"])[:, 0] & 1
    assert len(result.mismatches) == int(np.sum(b0 == 0)) > 0
    assert all(line.startswith("o.y beat") for line in result.mismatches)
    # The command line prints them and exits 1.
    monkeypatch.setattr(host, "open_serial", lambda *args: mutant_port(StuckBitConcat, params))
    assert host.main(["--port", "sim", "--unit", "kllm_concat", "--set", "lanes=2",
                      "--count", "12"]) == 1
    out = capsys.readouterr().out
    assert "mismatches:" in out and "o.y beat" in out


def test_host_flags_lost_beats():
    params = {"lanes": 2}
    result = run_unit(mutant_port(LossyConcat, params), "kllm_concat", params, count=20,
                      seed=4)
    assert not result.ok
    assert "o: 16 beats received, 20 expected" in result.mismatches
    assert any("missing" in error for error in result.errors)


def test_host_flags_a_wrong_golden_model():
    params = {"lanes": 2}
    right = golden_model("kllm_concat")

    def wrong_expected(p, inputs):
        y = right.expected(p, inputs)["o"]["y"]
        return {"o": {"y": y ^ (y == 0x35)}}       # off by one where y is 0x35

    stimulus = dataclasses.replace(right, stimulus=lambda rng, p, n: {"i": {
        "a": np.vstack([[[3, 3]], rng.integers(0, 16, (n - 1, 2))]),
        "b": np.vstack([[[5, 5]], rng.integers(0, 16, (n - 1, 2))])}}, expected=wrong_expected)
    result = run_unit(simulated("kllm_concat", params), "kllm_concat", params, count=10,
                      golden=stimulus)
    assert not result.ok
    assert result.mismatches[0] == "o.y beat 0: got [53, 53], expected [52, 52]"


# --------------------------------------------------------------------------- protocol


def test_identity_mismatch_is_refused():
    port = simulated("kllm_concat", {"lanes": 2})
    with pytest.raises(HostError, match="the board runs another design"):
        run_unit(port, "kllm_concat", {"lanes": 2, "a_bits": 3}, count=2)


def test_identify_unknown_command_status_and_reset():
    port = simulated("kllm_concat", {"lanes": 2}, pause_probability=0, rx_fifo_depth=32)
    layout = port.bridge.layout
    client = BridgeClient(port, layout)
    client.connect(port.bridge.identity)
    assert client.identity == (port.bridge.identity, 32) and client.window == 32
    port.write(bytes([0x55]))                                   # not a command
    assert port.read(1) == bytes([Header.UNKNOWN])
    assert client.decode_status(client.read_status())["unknown_command"] == 1
    # A beat in, its output out, then reset: the flags are clear again.
    client.send_beats([(0, 0x4321)])
    client.wait_outputs({0: 1})
    # a = (1, 2) and b = (3, 4) by lane, lane 0 lowest: y = (a << 4 | b) = (0x13, 0x24).
    assert client.outputs[0] == [0x2413]
    client.connect(port.bridge.identity)
    assert client.decode_status(client.read_status()) == {
        "framing_error": 0, "rx_overrun": 0, "unknown_command": 0}


def test_break_unblocks_a_bridge_whose_unit_never_takes_its_beat():
    """A unit that never takes its input (e.g. waiting for another stream) blocks every later
    command; connect()'s break resets the bridge anyway."""
    class Stuck(KllmConcat):
        # The Concat unit's ports and nothing behind them: ``i.ready`` and ``o.valid`` stay low.
        # (Forcing only ``i.ready`` low on the real unit would not stop it: its pipeline loads
        # on its own clock enable, and would stream outputs for a beat it never took.)
        def elaborate(self, platform):
            m = Module()
            m.d.comb += [self.i.ready.eq(0), self.o.valid.eq(0)]
            return m

    port = SimulatedPort(UartBridge(Stuck(lanes=1), DIVISOR), seed=3, timeout_bytes=20)
    client = BridgeClient(port, port.bridge.layout)
    client.connect()
    client.send_beats([(0, 0x12)])
    with pytest.raises(HostError, match="timeout waiting for the status reply"):
        client.read_status()
    client.connect()
    assert client.decode_status(client.read_status())["unknown_command"] == 0
    # Without the break, the reset command waits behind the blocked beat and the status.
    client.send_beats([(0, 0x12)])
    port.write(bytes([Command.RESET]))
    assert port.read(1) == b""


def test_layout_and_status_of_a_unit_with_plain_signals():
    layout = BridgeLayout.from_manifest(unit_manifest("oaken_dequantizer"))
    assert [s.name for s in layout.inputs] == ["hdr", "dense", "coo"]
    assert [s.name for s in layout.outputs] == ["o"]
    assert layout.signals == (("coo_error", 1),)
    assert layout.status_bytes == 2
    assert layout.reply_length(0xFF) == 2 and layout.reply_length(0x80) == 32
    assert layout.reply_length(0x81) is None
    client = BridgeClient(None, layout)
    assert client.decode_status(0x1_05) == {"framing_error": 1, "rx_overrun": 0,
                                            "unknown_command": 1, "coo_error": 1}


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_the_manifest_gives_the_components_frames(unit):
    """The host reads the frames from the manifest (as written to a file); the bridge from the
    component: both give the same layout and identity."""
    spec, params = resolve_params(unit, None, None)
    component = spec.build(params)
    from_file = json.loads(json.dumps(unit_manifest(unit)))
    layout = BridgeLayout.from_manifest(from_file)
    assert layout == layout_of(component)
    assert bridge_identity(layout, unit, from_file["params"]) == \
        bridge_identity(layout_of(component), unit, spec.resolved(component))


def test_a_member_that_is_neither_stream_nor_signal_is_refused():
    class Nested(wiring.Component):
        def __init__(self):
            super().__init__({"bus": wiring.Out(wiring.Signature({"a": wiring.Out(1)}))})

        def elaborate(self, platform):
            return Module()

    with pytest.raises(ValueError, match="member 'bus' of Nested is neither a stream nor a "
                                         "plain signal"):
        UartBridge(Nested(), DIVISOR)


def test_the_protocol_and_host_need_no_hardware_description():
    """The protocol module imports no Amaranth; the host reads a manifest file."""
    code = ("import sys, qllm_cores.fpga.bridge.protocol; "
            "print(sorted(m for m in sys.modules if m.startswith(('amaranth', "
            "'qllm_cores.hdl.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    assert out.stdout.strip() == "['qllm_cores.hdl.common', 'qllm_cores.hdl.common.params']"


def test_host_command_line_with_a_manifest(tmp_path, monkeypatch, capsys):
    params = {"lanes": 2, "a_bits": 3}
    port = simulated("kllm_concat", params, seed=4)
    write_manifest(tmp_path / "kllm_concat.manifest.json",
                   unit_manifest("kllm_concat", params))
    monkeypatch.setattr(host, "open_serial", lambda *args: port)
    code = host.main(["--port", "sim", "--manifest", str(tmp_path / "kllm_concat.manifest.json"),
                      "--count", "25"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "received beats: o 25" in out and "every output beat matches" in out
    assert host.main(["--port", "sim", "--manifest", str(tmp_path / "kllm_concat.manifest.json"),
                      "--set", "lanes=4"]) == 2
    assert "--manifest gives the parameters" in capsys.readouterr().err


# --------------------------------------------------------------------------- parameters


def test_bridge_parameter_errors():
    unit = KllmConcat(lanes=4)                   # 4-byte input frames + header: 5 bytes
    with pytest.raises(ValueError, match=r"divisor must be in range 4\.\., not 3"):
        UartBridge(unit, 3)
    with pytest.raises(ValueError, match=r"rx_fifo_depth must be in range 5\.\.65535, not 4"):
        UartBridge(unit, 4, rx_fifo_depth=4)
    with pytest.raises(TypeError, match="rx_fifo_depth must be an integer"):
        UartBridge(unit, 4, rx_fifo_depth=8.0)
    assert UartBridge(unit, 4).rx_fifo_depth == 512
    assert UartBridge(KllmConcat(lanes=1024), 4).rx_fifo_depth == 2048


def test_divisor_for_baud():
    assert divisor_for(12e6, 115_200) == 104
    assert divisor_for(25e6, 115_200) == 217
    with pytest.raises(ValueError, match="baud must be at most 3000000"):
        divisor_for(12e6, 4_000_000)
    with pytest.raises(ValueError, match=r"baud 2600000 is -7\.7% off with divisor 5"):
        divisor_for(12e6, 2_600_000)


def test_host_command_line_errors(capsys):
    assert host.main(["--port", "/nonexistent/tty", "--unit", "nope"]) == 2
    assert "unknown unit 'nope'" in capsys.readouterr().err
    assert host.main(["--port", "/nonexistent/tty", "--unit", "kllm_concat"]) == 2
    assert "error:" in capsys.readouterr().err       # no pyserial, or no such port


def test_host_names_the_bad_file_before_opening_the_port(tmp_path, monkeypatch, capsys):
    """A manifest that is not JSON, an inputs file that is not a .npz, and inputs missing a
    payload field: one line naming the file (and field), exit 2, and the port never opened."""
    opened = []
    monkeypatch.setattr(host, "open_serial", lambda *args: opened.append(args))
    manifest = tmp_path / "m.json"
    manifest.write_text("not json")
    assert host.main(["--port", "p", "--manifest", str(manifest)]) == 2
    assert f"{manifest}: not a JSON manifest" in capsys.readouterr().err
    manifest.write_text("[1, 2]")
    assert host.main(["--port", "p", "--manifest", str(manifest)]) == 2
    assert f"{manifest}: not a unit manifest" in capsys.readouterr().err
    garbage = tmp_path / "in.npz"
    garbage.write_bytes(b"garbage, not a zip file")
    assert host.main(["--port", "p", "--unit", "kllm_concat", "--inputs", str(garbage)]) == 2
    assert f"{garbage}: not a .npz of input fields" in capsys.readouterr().err
    partial = tmp_path / "partial.npz"
    np.savez(partial, **{"i.a": np.zeros((3, 16), dtype=np.int64)})     # no field b
    assert host.main(["--port", "p", "--unit", "kllm_concat", "--inputs", str(partial)]) == 2
    err = capsys.readouterr().err
    assert f"{partial}: port 'i': payload field 'b' is missing" in err, err
    assert "Traceback" not in err and opened == []




@pytest.mark.large
def test_host_checks_a_unit_whose_streams_must_agree():
    """The Oaken dequantizer's three input streams, sent one beat at a time in the order its
    golden adapter gives (header, COO beats, dense beats of each chunk), decode on the board to
    the golden values; its plain ``coo_error`` output is read with the status frame."""
    params = {"lanes": 4, "vec_len": 16}
    result = run_unit(simulated("oaken_dequantizer", params, seed=6), "oaken_dequantizer",
                      params, count=6, seed=2)
    assert result.ok, result.report()
    assert result.sent["hdr"] == 6 and result.sent["dense"] == 6 * 16 // 4
    assert len(result.outputs["o"]["x"]) == 6 * 16 // 4
    assert result.status["coo_error"] == 0
