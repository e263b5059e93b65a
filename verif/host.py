"""Host side of :class:`fpga.bitstream.UartBridge`: stream beats to a board, check the results.

``python -m verif.host --port /dev/ttyUSB1 --unit U [--config C] [--set k=v ...]
[--baud 115200] --count N [--seed S] [--inputs beats.npz] [--save out.npz]`` resets the unit
on the board, checks that the board runs the same unit and parameters (identify), sends
``N`` random input beats (or the beats of ``--inputs``) packed by the unit's payload layout,
receives every output beat, unpacks it by field name and compares it with the project's
golden model when :data:`GOLDEN` has one for the unit. Mismatches are printed; the exit code
is 1 on any mismatch, missing or extra beat, bridge error flag or a board that stops answering
(0 if all is well, 2 for bad arguments or inputs, or a port that cannot be opened). The frames
and the flow control are those of :mod:`fpga.bitstream`; the session starts with a break
(where the port can send one) and reset commands, so it recovers from any earlier state.

Random beats come from the golden model's generator (valid stimulus for the unit, e.g. 2:4
indices for the sparse selector); a unit without a golden model gets uniformly random fields,
its outputs are reported and saved but not checked. ``--inputs`` takes an ``.npz`` with one
array per input field named ``<port>.<field>`` (:func:`verif.payload.flatten_fields`, as
:func:`verif.runner.replay` uses), the beat on the first axis. The bridge hands the unit one
beat at a time, in sending order: with several input ports, beat ``b`` of every port goes before
beat ``b + 1`` of any, unless the file has an array ``order`` giving the port name of every beat
in sending order.

The transport is any object with ``write(bytes)`` and ``read(n) -> bytes``, where ``read``
returns fewer than ``n`` bytes only when nothing more arrived within its timeout (a
``serial.Serial`` opened with a ``timeout``; the tests use a simulation of the bridge).
pyserial is imported only by :func:`open_serial`.

Python use::

    from verif.host import open_serial, run_unit
    with open_serial("/dev/ttyUSB1", 115200) as port:
        result = run_unit(port, "kllm_concat", count=1000, seed=1)
    assert result.ok, result.report()
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from fpga.bitstream import (
    CMD_IDENTIFY,
    CMD_RESET,
    CMD_STATUS,
    FLAG_FRAMING,
    FLAG_OVERRUN,
    FLAG_UNKNOWN,
    HDR_ACK,
    HDR_IDENTIFY,
    HDR_RESET,
    HDR_STATUS,
    HDR_UNKNOWN,
    OUTPUT_BASE,
    BridgeLayout,
    bridge_identity,
)
from gen.registry import UNITS, parse_assignment, resolve_params
from verif.payload import PayloadCodec, flatten_fields, nest_fields

__all__ = [
    "BridgeClient",
    "GOLDEN",
    "GoldenModel",
    "HostError",
    "HostResult",
    "Transport",
    "compare_outputs",
    "main",
    "open_serial",
    "run_unit",
    "unit_layout",
]

#: Mismatches printed in full (all are counted).
SHOWN_MISMATCHES = 10
DEFAULT_TIMEOUT_S = 2.0
#: Length of the break that resets the bridge (many frames at any supported baud rate).
BREAK_SECONDS = 0.05


class Transport(Protocol):
    def write(self, data: bytes) -> object: ...

    def read(self, n: int) -> bytes: ...


class HostError(RuntimeError):
    """The board does not answer as the protocol says (timeout, unknown frame, wrong
    identity)."""


# --------------------------------------------------------------------------- protocol


@dataclass
class _Pending:
    kind: int          # the reply header expected
    nbytes: int        # bytes of the command, freed from the board's FIFO by the reply


class BridgeClient:
    """Talk to a :class:`~fpga.bitstream.UartBridge` over ``transport``.

    Parameters
    ----------
    transport : Transport
    layout : BridgeLayout
        The unit's frames (:meth:`BridgeLayout.from_component`).
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
        length = self.layout.reply_length(header)
        if length is None:
            raise HostError(f"unknown frame header {header:#04x} while waiting for {what}")
        payload = self._read_exact(length, f"the {length} bytes of frame {header:#04x}")
        return header, int.from_bytes(payload, "little")

    def _handle(self, header: int, value: int) -> None:
        if header >= OUTPUT_BASE and header < OUTPUT_BASE + len(self.layout.outputs):
            self.outputs[header - OUTPUT_BASE].append(value)
            return
        if header == HDR_UNKNOWN:
            raise HostError("the board did not understand a command (reply 0xfc)")
        if not self._pending:
            raise HostError(f"reply {header:#04x} without a command")
        expected = self._pending.popleft()
        if header != expected.kind:
            raise HostError(f"reply {header:#04x} where {expected.kind:#04x} was due")
        self._in_flight -= expected.nbytes
        if header == HDR_STATUS:
            self.status = value
        elif header == HDR_IDENTIFY:
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
        self.transport.write(bytes([CMD_RESET]) * self.layout.max_input_frame)
        while self.transport.read(4096):
            pass
        self._pending.clear()
        self._in_flight = 0
        self._send([(bytes([CMD_RESET]), HDR_RESET), (bytes([CMD_IDENTIFY]), HDR_IDENTIFY)])
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
            commands.append((bytes([index]) + data, HDR_ACK))
        self._send(commands)

    def read_status(self) -> int:
        """Send the status command and wait for its reply (and all earlier ones)."""
        self._send([(bytes([CMD_STATUS]), HDR_STATUS)])
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
            length = self.layout.reply_length(header[0])
            if length is None:
                raise HostError(f"unknown frame header {header[0]:#04x}")
            payload = self._read_exact(length, f"frame {header[0]:#04x}")
            self._handle(header[0], int.from_bytes(payload, "little"))

    def decode_status(self, status: int) -> dict[str, int]:
        """Status frame value -> flag and signal values by name."""
        decoded = {
            "framing_error": (status >> FLAG_FRAMING) & 1,
            "rx_overrun": (status >> FLAG_OVERRUN) & 1,
            "unknown_command": (status >> FLAG_UNKNOWN) & 1,
        }
        offset = 8
        for name, width in self.layout.signals:
            decoded[name] = (status >> offset) & ((1 << width) - 1)
            offset += width
        return decoded


# --------------------------------------------------------------------------- golden models


@dataclass(frozen=True)
class GoldenModel:
    """Stimulus and expected output of a unit.

    Attributes
    ----------
    stimulus : callable ``(rng, params, count) -> {port: fields}``
        ``count`` valid random input beats per input port.
    expected : callable ``(params, inputs) -> {port: fields}``
        The output beats the golden model gives for ``inputs``.
    equal : dict of str to callable, optional
        Field name -> ``(got, want) -> bool array`` for fields not compared bit for bit.
    """

    stimulus: Callable
    expected: Callable
    equal: dict = field(default_factory=dict)


def _kllm_concat_stimulus(rng, p, count):
    return {"i": {"a": rng.integers(0, 1 << p["a_bits"], (count, p["lanes"])),
                  "b": rng.integers(0, 1 << p["b_bits"], (count, p["lanes"]))}}


def _kllm_concat_expected(p, inputs):
    from golden.kllm import concat_indices
    i = inputs["i"]
    return {"o": {"y": concat_indices(i["a"], i["b"], p["a_bits"], p["b_bits"])}}


def _idx_counter_stimulus(rng, p, count):
    n, bits = p["n_inputs"], p["idx_bits"]
    last = (rng.random(count) < 0.2).astype(np.int64)
    last[-1:] = 1
    fields = {"idx": rng.integers(0, 1 << bits, (count, n)),
              "mask": np.where(rng.random(count) < 0.5, (1 << n) - 1,
                               rng.integers(0, 1 << n, count, dtype=np.int64)
                               if n < 63 else 0),
              "last": last}
    if p["mode"] == "ik":
        half = 1 << ((p["weight_bits"] or 4) - 1)
        fields["weight"] = rng.integers(-half, half, (count, n))
    return {"i": fields}


def _idx_counter_expected(p, inputs):
    from golden.kllm import counter_width, index_distribution, wrap_counts
    i = inputs["i"]
    n, ik = p["n_inputs"], p["mode"] == "ik"
    width = counter_width(p["max_len"], p["mode"], p["weight_bits"] or 4)
    lanes = (np.asarray(i["mask"], np.int64)[:, None] >> np.arange(n)) & 1
    counts, start = [], 0
    for end in np.flatnonzero(np.asarray(i["last"])) + 1:   # a reduction ends at last
        histogram = index_distribution(
            np.asarray(i["idx"])[start:end].ravel(), p["idx_bits"],
            mask=lanes[start:end].ravel().astype(bool),
            weights=np.asarray(i["weight"])[start:end].ravel() if ik else None)
        counts.append(wrap_counts(histogram, width, p["mode"]))   # wraps beyond max_len
        start = end
    bins = 1 << p["idx_bits"]
    last = np.tile((np.arange(bins) == bins - 1).astype(np.int64), len(counts))
    return {"o": {"count": np.concatenate(counts) if counts else np.zeros(0, np.int64),
                  "last": last}}


def _x_range(bits, signed):
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _sparse_selector_stimulus(rng, p, count):
    lo, hi = _x_range(p["x_bits"], p["x_signed"])
    shape = (count, p["rows"], p["groups"])
    # Half the beats from valid 2:4 masks (idx1 < idx2), half any indices.
    pairs = np.array([(a, b) for a in range(4) for b in range(a + 1, 4)])
    masked = pairs[rng.integers(0, len(pairs), shape)]
    anyway = rng.integers(0, 4, shape + (2,))
    idx = np.where(rng.random(count)[:, None, None, None] < 0.5, masked, anyway)
    return {"i": {"x": rng.integers(lo, hi + 1, (count, 4 * p["groups"])),
                  "idx1": idx[..., 0], "idx2": idx[..., 1]}}


def _sparse_selector_expected(p, inputs):
    from golden.accllm import select_by_index
    i = inputs["i"]
    x1, x2 = select_by_index(np.asarray(i["x"])[:, None, :], i["idx1"], i["idx2"])
    return {"o": {"x1": x1, "x2": x2}}


def _orizuru_stimulus(rng, p, count):
    normal = rng.standard_normal((count, p["n"])).astype(np.float16).view(np.uint16)
    raw = rng.integers(0, 1 << 16, (count, p["n"]))
    x = np.where(rng.random((count, 1)) < 0.5, normal, raw).astype(np.int64)
    # n > 1024: n / 1024 beats per vector (SPEC 3).
    from hdl.orizuru import MAX_BEAT_LANES
    return {"i": {"x": x.reshape(-1, min(p["n"], MAX_BEAT_LANES))}}


def _orizuru_expected(p, inputs):
    from golden.orizuru import orizuru_beats
    xs = np.asarray(inputs["i"]["x"]).reshape(-1, p["n"])
    return {"o": orizuru_beats(xs, p["k"])}


_DECOMPOSER_THRESHOLDS = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")


def _decomposer_stimulus(rng, p, count):
    bits = p["data_bits"]
    lo, hi = _x_range(bits, True)
    t = np.sort(rng.integers(lo, hi + 1, (count, 4)), axis=1)
    near = t[np.arange(count)[:, None], rng.integers(0, 4, (count, p["lanes"]))]
    near = np.clip(near + rng.integers(-2, 3, near.shape), lo, hi)
    x = np.where(rng.random(near.shape) < 0.5, near, rng.integers(lo, hi + 1, near.shape))
    fields = {"x": x}
    fields.update({name: t[:, k] for k, name in enumerate(_DECOMPOSER_THRESHOLDS)})
    return {"i": fields}


def _decomposer_expected(p, inputs):
    from golden.oaken import decompose
    i = inputs["i"]
    out = {name: [] for name in ("group", "side", "inlier", "outlier")}
    for beat, row in enumerate(np.asarray(i["x"])):
        thresholds = tuple(int(i[name][beat]) for name in _DECOMPOSER_THRESHOLDS)
        parts = decompose(row, thresholds, p["data_bits"])
        for name in out:
            out[name].append(parts[name])
    return {"o": {name: np.array(values) for name, values in out.items()}}


def _mul_stimulus(rng, p, count):
    lo, hi = _x_range(p["x_bits"], p["x_signed"])
    w_bits = {"w8": 8, "w4": 4, "w2": 2}[p["mode"]]
    w_lo, w_hi = _x_range(w_bits, True)
    names = ["x1", "x2", "w1", "w2"] if p["mode"] == "w2" else ["x", "w1", "w2"]
    fields = {name: rng.integers(*((lo, hi + 1) if name.startswith("x") else (w_lo, w_hi + 1)),
                                 count) for name in names}
    if p.get("acc_depth", 1) > 1:
        fields["last"] = (rng.random(count) < 1 / p["acc_depth"]).astype(np.int64)
        fields["last"][-1:] = 1
    return {"i": fields}


_PRODUCTS = {"p1": ("x", "w1"), "p2": ("x", "w2"), "p11": ("x1", "w1"), "p22": ("x2", "w2"),
             "p12": ("x1", "w2"), "p21": ("x2", "w1")}


def _mul_expected(p, inputs):
    from golden.accllm import run_sums
    i = {name: np.asarray(value, np.int64) for name, value in inputs["i"].items()}
    if p["mode"] == "w2":
        names = ["p11", "p22"] + (["p12", "p21"] if p.get("cross_products") else [])
    else:
        names = ["p1", "p2"]
    products = {name: i[_PRODUCTS[name][0]] * i[_PRODUCTS[name][1]] for name in names}
    depth = p.get("acc_depth", 1)
    return {"o": products if depth == 1 else run_sums(products, i["last"], depth)}


def _p3_pe_stimulus(rng, p, count):
    last = (rng.random(count) < 0.25).astype(np.int64)
    last[-1:] = 1
    first = np.concatenate(([1], last[:-1]))
    first = np.where(rng.random(count) < 0.05, 0, first)
    first[:1] = 1
    return {"i": {"act": rng.integers(0, 256, (count, 4)), "wgt": rng.integers(0, 16, (count, 4)),
                  "act_fmt": rng.integers(0, 2, count), "wgt_fmt": rng.integers(0, 2, count),
                  "sv_sel": rng.integers(0, 4, count), "zp": rng.integers(0, 16, count),
                  "first": first, "last": last}}


def _p3_pe_expected(p, inputs):
    from golden.p3 import pe_run
    i = inputs["i"]
    out = pe_run(*(i[name] for name in ("act", "wgt", "act_fmt", "wgt_fmt", "sv_sel", "zp",
                                         "first", "last")))
    return {"o": {name: np.asarray(value, np.int64) for name, value in out.items()}}


def _fp16_mac_stimulus(rng, p, count):
    def fp16(n):
        values = rng.standard_normal(n).astype(np.float16).view(np.uint16).astype(np.int64)
        return np.where(rng.random(n) < 0.05, rng.integers(0, 1 << 16, n), values)
    last = (rng.random(count) < 0.2).astype(np.int64)
    last[-1:] = 1
    first = np.concatenate(([1], last[:-1]))
    return {"i": {"a": fp16(count), "b": fp16(count), "first": first, "last": last}}


def _fp16_mac_expected(p, inputs):
    from golden.fp16_mac import fp16_mac_run
    i = inputs["i"]
    acc = fp16_mac_run(i["a"], i["b"], i["first"], i["last"])
    return {"o": {"acc": np.asarray(acc, np.int64)}}


def _fp32_equal(got, want):
    from golden.fp16_mac import fp32_match
    return fp32_match(np.asarray(got, np.int64), np.asarray(want, np.int64))


_ORIZURU = GoldenModel(_orizuru_stimulus, _orizuru_expected)
_MUL = GoldenModel(_mul_stimulus, _mul_expected)

GOLDEN: dict[str, GoldenModel] = {
    "kllm_concat": GoldenModel(_kllm_concat_stimulus, _kllm_concat_expected),
    "kllm_idx_counter": GoldenModel(_idx_counter_stimulus, _idx_counter_expected),
    "accllm_sparse_selector": GoldenModel(_sparse_selector_stimulus, _sparse_selector_expected),
    "orizuru": _ORIZURU,
    "orizuru_scan": _ORIZURU,
    "orizuru_sortnet": _ORIZURU,
    "oaken_decomposer": GoldenModel(_decomposer_stimulus, _decomposer_expected),
    "accllm_dsp_mul": _MUL,
    "accllm_plain_mul": _MUL,
    "p3_pe": GoldenModel(_p3_pe_stimulus, _p3_pe_expected),
    "fp16_mac": GoldenModel(_fp16_mac_stimulus, _fp16_mac_expected,
                            equal={"acc": _fp32_equal}),
}
"""Units whose outputs the host checks: the golden functions of the ``verif/tb_*`` benches.
``oaken_dequantizer`` has none here (its three input streams must agree beat by beat): its
outputs are reported, not checked."""


def _uniform_stimulus(rng, layout, count):
    """Uniformly random fields for every input port (units without a golden model)."""
    def fields(description):
        if description["kind"] == "struct":
            return {f["name"]: fields(f["shape"]) for f in description["fields"]}
        shape = (count,)
        while description["kind"] == "array":
            shape += (description["length"],)
            description = description["elem"]
        lo, hi = _x_range(description["width"], description["signed"])
        if description["width"] <= 62:
            return rng.integers(lo, hi, shape, endpoint=True)
        values = [lo + int.from_bytes(rng.bytes(description["width"] // 8 + 1), "little")
                  % (hi - lo + 1) for _ in range(int(np.prod(shape)))]
        return np.array(values, dtype=object).reshape(shape)

    return {stream.name: fields(stream.description) for stream in layout.inputs}


# --------------------------------------------------------------------------- checking


def compare_outputs(got: dict, expected: dict, equal: dict | None = None) -> list[str]:
    """Compare output fields beat by beat; return one line per mismatch (beat counts first)."""
    equal = equal or {}
    problems = []
    for port, want_fields in expected.items():
        got_fields = flatten_fields(got.get(port, {}))
        want_fields = flatten_fields(want_fields)
        want_beats = len(next(iter(want_fields.values()))) if want_fields else 0
        got_beats = len(next(iter(got_fields.values()))) if got_fields else 0
        if got_beats != want_beats:
            problems.append(f"{port}: {got_beats} beats received, {want_beats} expected")
        beats = min(got_beats, want_beats)
        for name, want in want_fields.items():
            have = got_fields.get(name)
            if have is None:
                problems.append(f"{port}.{name}: field missing")
                continue
            have, want = np.asarray(have)[:beats], np.asarray(want)[:beats]
            leaf = name.split(".")[-1]
            if leaf in equal:
                same = np.asarray(equal[leaf](have, want), bool)
            else:
                same = have == want
            same = same.reshape(beats, -1).all(axis=1) if beats else same
            for beat in np.flatnonzero(~same):
                problems.append(f"{port}.{name} beat {beat}: got {_show(have[beat])}, "
                                f"expected {_show(want[beat])}")
    return problems


def _show(value):
    value = np.asarray(value)
    return str(value.tolist()) if value.ndim else str(value.item())


@dataclass
class HostResult:
    """What :func:`run_unit` sent, received and found."""

    unit: str
    params: dict
    sent: dict
    outputs: dict
    expected: dict | None
    mismatches: list
    status: dict
    errors: list

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.errors

    def report(self) -> str:
        beats_in = ", ".join(f"{port} {n}" for port, n in self.sent.items())
        beats_out = ", ".join(f"{port} {len(next(iter(flatten_fields(f).values()), []))}"
                              for port, f in self.outputs.items())
        lines = [f"{self.unit} {self.params}", f"sent beats: {beats_in}",
                 f"received beats: {beats_out}",
                 "status: " + ", ".join(f"{k}={v}" for k, v in self.status.items())]
        if self.expected is None:
            lines.append(f"no golden model for {self.unit}: outputs not checked")
        elif not self.mismatches:
            lines.append("every output beat matches the golden model")
        else:
            lines.append(f"{len(self.mismatches)} mismatches:")
            lines += [f"  {line}" for line in self.mismatches[:SHOWN_MISMATCHES]]
            if len(self.mismatches) > SHOWN_MISMATCHES:
                lines.append(f"  ... {len(self.mismatches) - SHOWN_MISMATCHES} more")
        lines += [f"error: {error}" for error in self.errors]
        return "\n".join(lines)


def unit_layout(unit: str, params: dict | None = None, *, config: str | None = None
                ) -> tuple[BridgeLayout, dict]:
    """The frame layout of a registered unit and its resolved parameters.

    The component is built only for its signature and then dropped (without Amaranth's
    "created but never used" warning).
    """
    spec, resolved = resolve_params(unit, config, params)
    component = spec.build(resolved)
    layout = BridgeLayout.from_component(component)
    del component
    gc.collect()            # components hold reference cycles: free it here
    return layout, resolved


def _send_order(layout: BridgeLayout, words: dict, order=None) -> list[tuple[int, int]]:
    """``(stream index, payload)`` in sending order: ``order`` names the input port (or its
    index) of every beat; without it, beat ``b`` of every port before beat ``b + 1`` of any."""
    if order is None:
        return [(index, stream_words[beat])
                for beat in range(max(map(len, words.values()), default=0))
                for index, stream_words in words.items() if beat < len(stream_words)]
    names = {s.name: s.index for s in layout.inputs}
    position = dict.fromkeys(words, 0)
    beats = []
    for entry in np.asarray(order).tolist():
        index = names.get(entry, entry)
        if index not in words:
            raise ValueError(f"order names {entry!r}, not an input port with beats "
                             f"({', '.join(layout.inputs[k].name for k in words)})")
        if position[index] >= len(words[index]):
            raise ValueError(f"order asks for more beats of {layout.inputs[index].name!r} "
                             f"than the {len(words[index])} given")
        beats.append((index, words[index][position[index]]))
        position[index] += 1
    unsent = [layout.inputs[k].name for k, n in position.items() if n < len(words[k])]
    if unsent:
        raise ValueError(f"order leaves beats of {unsent} unsent")
    return beats


def run_unit(transport: Transport, unit: str, params: dict | None = None, *,
             config: str | None = None, count: int = 100, seed: int = 1,
             inputs: dict | None = None, order=None, golden: GoldenModel | None = None,
             check_identity: bool = True) -> HostResult:
    """Stream beats through the unit behind ``transport`` and check them.

    Parameters
    ----------
    transport : Transport
    unit, params, config
        The unit as built (``params`` overrides after ``config``, as in
        :func:`gen.registry.resolve_params`).
    count : int
        Random beats per input port (ignored with ``inputs``).
    seed : int
        Random generator seed.
    inputs : dict, optional
        ``{port: fields}`` to send instead of random beats.
    order : sequence of str or int, optional
        The input port (name or index) of every beat, in sending order; default: beat ``b``
        of every port before beat ``b + 1`` of any. The bridge delivers beats one at a time,
        so a unit that needs beats of several streams must get them in an order it takes.
    golden : GoldenModel, optional
        Overrides :data:`GOLDEN` (e.g. a deliberately wrong model in tests).
    check_identity : bool
        Refuse a board whose identify reply does not match the unit and parameters.

    Raises
    ------
    ValueError
        For an unknown unit, configuration or parameter, or inputs that do not fit the layout.
    HostError
        If the board does not answer as the protocol says.
    """
    layout, resolved = unit_layout(unit, params, config=config)
    golden = golden or GOLDEN.get(unit)
    rng = np.random.default_rng(seed)
    if inputs is None:
        inputs = golden.stimulus(rng, resolved, count) if golden else \
            _uniform_stimulus(rng, layout, count)
    unknown = set(inputs) - {s.name for s in layout.inputs}
    if unknown:
        raise ValueError(f"inputs for unknown ports {sorted(unknown)}; the unit's input "
                         f"ports: {[s.name for s in layout.inputs]}")
    words = {s.index: PayloadCodec(s.description).pack_batch(inputs[s.name])
             for s in layout.inputs if s.name in inputs}
    beats = _send_order(layout, words, order)

    client = BridgeClient(transport, layout)
    client.connect(bridge_identity(layout, unit, resolved) if check_identity else None)
    expected = golden.expected(resolved, inputs) if golden else None
    try:
        client.send_beats(beats)
        status = client.read_status()
    except HostError as error:
        raise HostError(f"{error}; the unit stopped taking input beats (a unit whose input "
                        "streams must agree needs valid beats in an order it can take them "
                        "one at a time: --inputs with an 'order' array)") from error
    if expected is not None:
        counts = {s.index: len(next(iter(flatten_fields(expected[s.name]).values())))
                  for s in layout.outputs if s.name in expected}
        try:
            client.wait_outputs(counts)
        except HostError as error:          # missing beats: reported with the comparison
            timeout = str(error)
        else:
            timeout = None
    client.drain()              # late or extra beats

    outputs = {s.name: PayloadCodec(s.description).unpack_batch(client.outputs[s.index])
               for s in layout.outputs}
    decoded = client.decode_status(status)
    errors = [f"bridge flag {name} is set" for name in
              ("framing_error", "rx_overrun", "unknown_command") if decoded[name]]
    if expected is not None and timeout:
        errors.append(timeout)
    mismatches = compare_outputs(outputs, expected, golden.equal) if expected is not None \
        else []
    return HostResult(unit, resolved, {s.name: len(words.get(s.index, ()))
                                       for s in layout.inputs},
                      outputs, expected, mismatches, decoded, errors)


# --------------------------------------------------------------------------- command line


def open_serial(port: str, baud: int, timeout: float = DEFAULT_TIMEOUT_S):
    """Open ``port`` with pyserial (8N1, no flow control, ``timeout`` seconds per read)."""
    try:
        import serial
    except ImportError as error:
        raise HostError("pyserial is needed to talk to a board: pip install pyserial") \
            from error
    return serial.Serial(port, baud, timeout=timeout)


EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m verif.host",
        description="Stream beats through a unit on a board (built with python -m "
                    "fpga.bitstream) and check them against the golden model.")
    parser.add_argument("--port", required=True, help="serial port, e.g. /dev/ttyUSB1")
    parser.add_argument("--unit", required=True, help=f"one of {', '.join(sorted(UNITS))}")
    parser.add_argument("--config", help="named paper configuration (as built)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="parameter override, as built (repeatable)")
    parser.add_argument("--baud", type=int, default=115_200)
    parser.add_argument("--count", type=int, default=100, help="random beats (default 100)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--inputs", help=".npz of input beats (<port>.<field> arrays)")
    parser.add_argument("--save", help="write the received output beats to this .npz")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds of silence that end a read (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--no-identify", action="store_true",
                        help="do not check that the board runs this unit and parameters")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv``; return the exit code."""
    arguments = _parser().parse_args(argv)
    try:
        overrides = dict(parse_assignment(text) for text in arguments.set)
        unit_layout(arguments.unit, overrides, config=arguments.config)
        if arguments.count < 1:
            raise ValueError(f"--count must be at least 1, not {arguments.count}")
        inputs = order = None
        if arguments.inputs:
            with np.load(arguments.inputs, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
            order = arrays.pop("order", None)
            inputs = nest_fields(arrays)
        port = open_serial(arguments.port, arguments.baud, arguments.timeout)
    except (ValueError, TypeError, OSError, HostError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        with port:
            result = run_unit(port, arguments.unit, overrides, config=arguments.config,
                              count=arguments.count, seed=arguments.seed, inputs=inputs,
                              order=order,
                              check_identity=not arguments.no_identify)
    except ValueError as error:             # inputs that do not fit the unit
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except HostError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_MISMATCH
    print(result.report())
    if arguments.save:
        np.savez(arguments.save, **flatten_fields(result.outputs))
    return EXIT_OK if result.ok else EXIT_MISMATCH


if __name__ == "__main__":
    sys.exit(main())
