"""The byte protocol between a unit behind the UART bridge and the host: both ends' rules.

Pure Python (no Amaranth): the frame layout comes from the unit's manifest (``ports`` and
``signals``, as :func:`gen.verilog.generate` writes them), so the host needs no hardware
description to talk to a board. The gateware end is :class:`fpga.bridge.gateware.UartBridge`,
the host end :class:`BridgeClient` below.

Serial line
-----------
8N1 at the baud rate of the build (``divisor = round(f_clk / baud)`` clock cycles per bit,
:func:`divisor_for`). The frames are derived from the unit's signature (:class:`BridgeLayout`):
its input streams are numbered 0, 1, ... and its output streams 0, 1, ... in the order of the
signature; a stream's payload travels as ``nbytes = ceil(width / 8)`` bytes, little-endian (the
payload's bit 0 is bit 0 of the first byte; the unused top bits of the last byte are sent as 0
and ignored on input). Plain output signals (such as the Oaken dequantizer's sticky
``coo_error``) are read with the status command; plain input signals, if a unit had any, stay
at their initial value.

Host to board, one command at a time:

================  =========================================================================
``k``, then       ``0x00 <= k < n_in``: the payload of one beat for input stream ``k``
``nbytes[k]``     (``nbytes[k]`` bytes). The bridge offers it to the unit (``valid``) and
bytes             holds it until the unit takes it (``ready``).
``0x7D``          Identify (:attr:`Command.IDENTIFY`).
``0x7E``          Reset the unit (:attr:`Command.RESET`): the bridge waits until the frame it
                  is sending (if any) is finished, asserts the unit's reset for one cycle
                  (beats inside the unit are lost) and clears the sticky flags of the status
                  frame.
``0x7F``          Status (:attr:`Command.STATUS`).
anything else     Unknown command: ignored, flagged in the status frame.
================  =========================================================================

Board to host (:class:`Header`):

=====================  ==================================================================
``0x80 | k``, then     One beat of output stream ``k`` (``k < 64``); sent for every beat
``nbytes[k]`` bytes    the unit produces, in order per stream.
``0xFB`` + 6 bytes     Reply to identify: CRC-32 (4 bytes, little-endian) of the unit name,
                       parameters and frame layout (:func:`bridge_identity`), then the depth
                       of the receive buffer in bytes (2 bytes, little-endian).
``0xFC``               Reply to an unknown command byte.
``0xFD``               Acknowledgement of an input beat: sent once the unit has taken it.
``0xFE``               Reply to reset: the unit's reset has been applied.
``0xFF`` + status      Reply to status: ``status_bytes = 1 + ceil(S / 8)`` bytes. Byte 0:
                       sticky flags (:class:`Flag`) since power-up or the last reset command:
                       bit 0 a framing error was received (stop bit 0), bit 1 a received byte
                       was dropped because the receive buffer was full, bit 2 an unknown
                       command byte was received. Then the unit's plain output signals,
                       ``S`` bits in all, in signature order, the first in the least
                       significant bits (sampled when the frame starts).
=====================  ==================================================================

Every command gets exactly one reply (``0xFD``, ``0xFB``, ``0xFE``, ``0xFF`` or ``0xFC``), in
command order; output frames may come between replies, never inside another frame.

A break on the line (``rx`` low for a whole frame, e.g. pyserial's ``send_break()``) resets the
whole bridge and the unit: the receive buffer is emptied, a command being received or a beat
waiting for the unit is dropped, a frame being sent is cut short, pending replies are
forgotten and the flags are cleared. The host uses it to start from a known state even if the
unit stopped taking beats (commands queue behind a beat the unit does not take).

Flow control. The receiving UART cannot stop the host, so the bridge buffers received bytes in
a FIFO of ``rx_fifo_depth`` bytes (reported by identify) and the host keeps the bytes it has
sent and not yet seen a reply for at or below that depth. A reply is only sent once its command
has left the FIFO, so the FIFO never overflows; a host that does not follow the rule loses bytes
(status bit 1). Output beats never get lost: the bridge sends one frame at a time and takes a
beat from the unit (``ready``) only as the last byte of its frame enters the transmitter, so the
unit is stalled while the line is busy, its input ``ready`` follows, and the unsent commands
wait in the FIFO.
"""

from __future__ import annotations

import json
import zlib
from collections import deque
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Protocol

from qllm_cores.hdl.common.params import check_int

__all__ = [
    "BridgeClient",
    "BridgeLayout",
    "Command",
    "DEFAULT_BAUD",
    "DEFAULT_FIFO_DEPTH",
    "Flag",
    "Header",
    "HostError",
    "StreamFrame",
    "Transport",
    "bridge_identity",
    "divisor_for",
]


class Command(IntEnum):
    """Command bytes, host to board (input stream indices are the bytes below these)."""

    IDENTIFY = 0x7D
    RESET = 0x7E
    STATUS = 0x7F


class Header(IntEnum):
    """Frame headers, board to host (output stream ``k`` is ``OUTPUT | k``)."""

    OUTPUT = 0x80
    IDENTIFY = 0xFB
    UNKNOWN = 0xFC
    ACK = 0xFD
    RESET = 0xFE
    STATUS = 0xFF


class Flag(IntFlag):
    """Sticky flags, byte 0 of the status frame."""

    FRAMING = 1 << 0
    OVERRUN = 1 << 1
    UNKNOWN = 1 << 2


#: Status names of the flags, in bit order (:meth:`BridgeLayout.decode_status`).
FLAG_NAMES = {Flag.FRAMING: "framing_error", Flag.OVERRUN: "rx_overrun",
              Flag.UNKNOWN: "unknown_command"}
#: Streams per direction: input indices stay below the commands, output headers below 0xC0.
MAX_STREAMS = 64
IDENTIFY_BYTES = 6
DEFAULT_FIFO_DEPTH = 512
MAX_FIFO_DEPTH = 0xFFFF
DEFAULT_BAUD = 115_200
#: Largest accepted difference between the requested and the achieved baud rate.
MAX_BAUD_ERROR = 0.02
#: Smallest clock cycles per bit of the UART (:data:`fpga.bridge.uart.MIN_DIVISOR`).
MIN_DIVISOR = 4


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class StreamFrame:
    """One stream of the unit as the protocol carries it.

    Attributes
    ----------
    name : str
        Port name in the unit's signature.
    index : int
        Stream number within its direction (the command byte, or ``header & 0x3F``).
    width : int
        Payload bits.
    description : dict
        Payload layout (the manifest's ``ports[name]["payload"]``), for
        :class:`verif.payload.PayloadCodec`.
    """

    name: str
    index: int
    width: int
    description: dict

    @property
    def nbytes(self) -> int:
        """Payload bytes in a frame."""
        return (self.width + 7) // 8


@dataclass(frozen=True)
class BridgeLayout:
    """The frames of the bridge for one unit, derived from its manifest.

    Attributes
    ----------
    inputs, outputs : tuple of StreamFrame
        Input and output streams in signature order.
    signals : tuple of (str, int)
        Plain output signals (name, width) in signature order, reported by the status frame.
    plain_inputs : tuple of str
        Plain input signals; the bridge leaves them at their initial value.
    """

    inputs: tuple[StreamFrame, ...]
    outputs: tuple[StreamFrame, ...]
    signals: tuple[tuple[str, int], ...]
    plain_inputs: tuple[str, ...] = ()

    @classmethod
    def from_manifest(cls, manifest: dict) -> "BridgeLayout":
        """The layout of the unit ``manifest`` describes (its ``ports`` and ``signals``, each
        in signature order).

        Raises
        ------
        ValueError
            If a direction has more than 64 streams.
        """
        inputs, outputs = [], []
        for name, port in manifest["ports"].items():
            target = inputs if port["direction"] == "in" else outputs
            target.append(StreamFrame(name, len(target), port["payload"]["width"],
                                      port["payload"]))
        signals = manifest.get("signals", {})
        for what, streams in (("input", inputs), ("output", outputs)):
            if len(streams) > MAX_STREAMS:
                raise ValueError(f"the unit has {len(streams)} {what} streams; the UART bridge "
                                 f"carries at most {MAX_STREAMS}")
        return cls(tuple(inputs), tuple(outputs),
                   tuple((name, s["width"]) for name, s in signals.items()
                         if s["direction"] == "out"),
                   tuple(name for name, s in signals.items() if s["direction"] == "in"))

    @property
    def signal_bits(self) -> int:
        return sum(width for _, width in self.signals)

    @property
    def status_bytes(self) -> int:
        """Bytes after the ``0xFF`` header: the flags byte and the plain output signals."""
        return 1 + (self.signal_bits + 7) // 8

    @property
    def max_input_frame(self) -> int:
        """Longest host-to-board frame in bytes (a command byte if there is no input)."""
        return 1 + max((s.nbytes for s in self.inputs), default=0)

    def reply_length(self, header: int) -> int | None:
        """Bytes after ``header`` in a board-to-host frame; None for an unknown header."""
        if Header.OUTPUT <= header < Header.OUTPUT + len(self.outputs):
            return self.outputs[header - Header.OUTPUT].nbytes
        return {Header.IDENTIFY: IDENTIFY_BYTES, Header.UNKNOWN: 0, Header.ACK: 0,
                Header.RESET: 0, Header.STATUS: self.status_bytes}.get(header)

    def decode_status(self, status: int) -> dict[str, int]:
        """Status frame value -> flag and signal values by name."""
        decoded = {name: int(bool(status & flag)) for flag, name in FLAG_NAMES.items()}
        offset = 8
        for name, width in self.signals:
            decoded[name] = (status >> offset) & ((1 << width) - 1)
            offset += width
        return decoded


def bridge_identity(layout: BridgeLayout, unit: str | None = None,
                    params: dict | None = None) -> int:
    """CRC-32 of the unit name, its parameters and the frame layout (the identify reply)."""
    text = json.dumps({
        "unit": unit,
        "params": params,
        "inputs": [[s.name, s.description] for s in layout.inputs],
        "outputs": [[s.name, s.description] for s in layout.outputs],
        "signals": [list(signal) for signal in layout.signals],
    }, sort_keys=True, default=repr)
    return zlib.crc32(text.encode())


def divisor_for(clock_hz: float, baud: int) -> int:
    """Clock cycles per bit for ``baud`` at ``clock_hz``.

    Raises
    ------
    ValueError
        If ``baud`` is not positive, needs fewer than 4 cycles per bit, or the nearest
        divisor misses it by more than 2 %.
    """
    baud = check_int("baud", baud, min_value=1)
    top = int(clock_hz // MIN_DIVISOR)
    if baud > top:
        raise ValueError(f"baud must be at most {top} ({MIN_DIVISOR} clock cycles per bit at "
                         f"{clock_hz / 1e6:g} MHz), not {baud}")
    divisor = round(clock_hz / baud)
    error = clock_hz / divisor / baud - 1
    if abs(error) > MAX_BAUD_ERROR:
        raise ValueError(f"baud {baud} is {error:+.1%} off with divisor {divisor} at "
                         f"{clock_hz / 1e6:g} MHz (at most {MAX_BAUD_ERROR:.0%} allowed)")
    return divisor


# --------------------------------------------------------------------------- host end


#: Length of the break that resets the bridge (many frames at any supported baud rate).
BREAK_SECONDS = 0.05


class Transport(Protocol):
    """A serial port: ``read`` returns fewer than ``n`` bytes only when nothing more arrived
    within its timeout (a ``serial.Serial`` opened with a ``timeout``)."""

    def write(self, data: bytes) -> object: ...

    def read(self, n: int) -> bytes: ...


class HostError(RuntimeError):
    """The board does not answer as the protocol says (timeout, unknown frame, wrong
    identity)."""


@dataclass
class _Pending:
    kind: int          # the reply header expected
    nbytes: int        # bytes of the command, freed from the board's FIFO by the reply


class BridgeClient:
    """Talk to a :class:`~fpga.bridge.gateware.UartBridge` over ``transport``.

    Parameters
    ----------
    transport : Transport
    layout : BridgeLayout
        The unit's frames (:meth:`BridgeLayout.from_manifest`).
    window : int, optional
        Bytes sent and not yet answered at most; set from the identify reply (the board's
        receive buffer) by :meth:`connect`.
    """

    def __init__(self, transport: Transport, layout: BridgeLayout, *, window: int | None = None):
        self.transport = transport
        self.layout = layout
        self.window = window if window is not None else layout.max_input_frame
        self._pending: deque[_Pending] = deque()
        self._in_flight = 0
        self.outputs: dict[int, list[int]] = {s.index: [] for s in layout.outputs}
        self.status: int | None = None
        self.identity: tuple[int, int] | None = None

    # ---- frames
    def _read_exact(self, n: int, what: str) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.transport.read(n - len(data))
            if not chunk:
                raise HostError(f"timeout waiting for {what} ({len(data)} of {n} bytes "
                                "received)")
            data += chunk
        return data

    def _read_frame(self, what: str) -> tuple[int, int]:
        header = self._read_exact(1, what)[0]
        return header, self._read_payload(header, f" while waiting for {what}")

    def _read_payload(self, header: int, context: str = "") -> int:
        length = self.layout.reply_length(header)
        if length is None:
            raise HostError(f"unknown frame header {header:#04x}{context}")
        payload = self._read_exact(length, f"the {length} bytes of frame {header:#04x}")
        return int.from_bytes(payload, "little")

    def _handle(self, header: int, value: int) -> None:
        if Header.OUTPUT <= header < Header.OUTPUT + len(self.layout.outputs):
            self.outputs[header - Header.OUTPUT].append(value)
            return
        if header == Header.UNKNOWN:
            raise HostError("the board did not understand a command (reply 0xfc)")
        if not self._pending:
            raise HostError(f"reply {header:#04x} without a command")
        expected = self._pending.popleft()
        if header != expected.kind:
            raise HostError(f"reply {header:#04x} where {expected.kind:#04x} was due")
        self._in_flight -= expected.nbytes
        if header == Header.STATUS:
            self.status = value
        elif header == Header.IDENTIFY:
            self.identity = (value & 0xFFFF_FFFF, value >> 32)

    def _receive_one(self, what: str) -> None:
        self._handle(*self._read_frame(what))

    def _send(self, commands: list[tuple[bytes, int]]) -> None:
        """Send ``(frame, reply kind)`` commands, as many at once as the window allows."""
        batch = bytearray()
        for frame, kind in commands:
            if len(frame) > self.window:
                raise HostError(f"a {len(frame)}-byte frame does not fit the board's "
                                f"{self.window}-byte receive buffer")
            if self._in_flight + len(frame) > self.window:
                if batch:
                    self.transport.write(bytes(batch))
                    batch.clear()
                while self._in_flight + len(frame) > self.window:
                    self._receive_one("acknowledgements (the unit may have stopped "
                                      "accepting input)")
            batch += frame
            self._pending.append(_Pending(kind, len(frame)))
            self._in_flight += len(frame)
        if batch:
            self.transport.write(bytes(batch))

    def _settle(self, what: str) -> None:
        while self._pending:
            self._receive_one(what)

    # ---- commands
    def connect(self, identity: int | None = None) -> None:
        """Bring the board to a known state: send a break (if the transport can) and reset
        commands, drain the line, reset the unit, identify it (checking ``identity`` if
        given) and clear the outputs.

        Raises
        ------
        HostError
            If the board does not answer, or runs a design with another identity.
        """
        # A break resets the whole bridge (pyserial has send_break; other transports may
        # not). Without it, a frame cut short by an earlier session is completed by the
        # first reset bytes and the others reset. Replies and late output are drained unread.
        send_break = getattr(self.transport, "send_break", None)
        if send_break is not None:
            try:
                send_break(BREAK_SECONDS)
            except OSError:         # e.g. a pseudo-terminal: the reset bytes must do
                pass
        self.transport.write(bytes([Command.RESET]) * self.layout.max_input_frame)
        while self.transport.read(4096):
            pass
        self._pending.clear()
        self._in_flight = 0
        self._send([(bytes([Command.RESET]), Header.RESET),
                    (bytes([Command.IDENTIFY]), Header.IDENTIFY)])
        self._settle("the reset and identify replies")
        crc, depth = self.identity
        if identity is not None and crc != identity:
            raise HostError(f"the board runs another design (identity {crc:#010x}, expected "
                            f"{identity:#010x}): rebuild and load the bitstream for this unit "
                            "and parameters")
        self.window = depth
        for beats in self.outputs.values():
            beats.clear()

    def send_beats(self, beats: list[tuple[int, int]]) -> None:
        """Send ``(input stream index, payload)`` beats in order, within the window."""
        commands = []
        for index, payload in beats:
            stream = self.layout.inputs[index]
            data = int(payload).to_bytes(stream.nbytes, "little")
            commands.append((bytes([index]) + data, Header.ACK))
        self._send(commands)

    def read_status(self) -> int:
        """Send the status command and wait for its reply (and all earlier ones)."""
        self._send([(bytes([Command.STATUS]), Header.STATUS)])
        self._settle("the status reply")
        return self.status

    def wait_outputs(self, counts: dict[int, int]) -> None:
        """Read frames until output stream ``k`` has ``counts[k]`` beats (or more)."""
        while any(len(self.outputs[k]) < n for k, n in counts.items()):
            missing = {self.layout.outputs[k].name: n - len(self.outputs[k])
                       for k, n in counts.items() if len(self.outputs[k]) < n}
            self._receive_one(f"output beats (missing: {missing})")

    def drain(self) -> None:
        """Read frames until the line stays quiet for the transport's timeout."""
        while True:
            header = self.transport.read(1)
            if not header:
                return
            self._handle(header[0], self._read_payload(header[0]))

    def decode_status(self, status: int) -> dict[str, int]:
        """Status frame value -> flag and signal values by name."""
        return self.layout.decode_status(status)
