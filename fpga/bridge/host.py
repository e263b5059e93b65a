"""Host end of the board link: stream beats to a unit on a board, check the results.

``qllm host --port /dev/ttyUSB1 (--unit U [--config C] [--set k=v ...] |
--manifest build/bitstream/<board>/<unit>/<unit>.manifest.json) [--baud 115200] --count N
[--seed S] [--inputs beats.npz] [--save out.npz]`` resets the unit on the board, checks that the
board runs the same unit and parameters (identify), sends ``N`` random input beats (or the beats
of ``--inputs``) packed by the unit's payload layout, receives every output beat, unpacks it by
field name and compares it with the unit's golden adapter (the registry's ``golden``: a
:class:`golden.common.beats.BeatModel`, the one the unit's cocotb bench uses). Mismatches are
printed; the exit code is 1 on any mismatch, missing or extra beat, bridge error flag or a board
that stops answering (0 if all is well, 2 for bad arguments or inputs, or a port that cannot be
opened). The frames and the flow control are those of :mod:`fpga.bridge.protocol`, read from the
unit's manifest (the board build writes it beside the bitstream; without ``--manifest`` it is
derived from the registry); the session starts with a break (where the port can send one) and reset
commands, so it recovers from any earlier state.

Random beats come from the golden adapter's generator (valid stimulus for the unit, e.g. 2:4
indices for the sparse selector, in an order the unit takes one beat at a time); a unit without
a golden adapter gets uniformly random fields, its outputs are reported and saved but not
checked. ``--inputs`` takes an ``.npz`` with one array per input field named ``<port>.<field>``
(:func:`verif.payload.flatten_fields`, as :func:`verif.runner.replay` uses), the beat on the
first axis. The bridge hands the unit one beat at a time, in sending order: with several input
ports, beat ``b`` of every port goes before beat ``b + 1`` of any, unless the file has an array
``order`` giving the port name of every beat in sending order.

The transport is any object with ``write(bytes)`` and ``read(n) -> bytes``
(:class:`fpga.bridge.protocol.Transport`; the tests use a simulation of the bridge). pyserial is
imported only by :func:`open_serial`.

Python use::

    from qllm_cores.fpga.bridge.host import open_serial, run_unit
    with open_serial("/dev/ttyUSB1", 115200) as port:
        result = run_unit(port, "kllm_concat", count=1000, seed=1)
    assert result.ok, result.report()
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from dataclasses import dataclass

import numpy as np

from qllm_cores.fpga.bridge.protocol import (BridgeClient, BridgeLayout, HostError, Transport,
    bridge_identity)
from qllm_cores.gen.registry import UNITS, parse_assignment
from qllm_cores.gen.verilog import unit_manifest
from qllm_cores.verif.bench import golden_model
from qllm_cores.verif.payload import PayloadCodec, compare_outputs, flatten_fields, nest_fields

__all__ = [
    "HostResult",
    "compare_outputs",
    "main",
    "open_serial",
    "run_unit",
]

#: Mismatches printed in full (all are counted).
SHOWN_MISMATCHES = 10
DEFAULT_TIMEOUT_S = 2.0


def _x_range(bits, signed):
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def pack_inputs(layout, inputs):
    """``{stream index: packed words}`` of ``inputs`` (``{port: fields}``); ``ValueError``
    naming the port and field for an unknown port, a missing or unknown field, or a value
    that does not fit."""
    unknown = set(inputs) - {s.name for s in layout.inputs}
    if unknown:
        raise ValueError(f"inputs for unknown ports {sorted(unknown)}; the unit's input "
                         f"ports: {[s.name for s in layout.inputs]}")
    words = {}
    for stream in layout.inputs:
        if stream.name not in inputs:
            continue
        try:
            words[stream.index] = PayloadCodec(stream.description).pack_batch(inputs[stream.name])
        except KeyError as error:
            raise ValueError(f"port {stream.name!r}: {error.args[0]}") from None
    return words


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
             inputs: dict | None = None, order=None, golden=None,
             check_identity: bool = True, manifest: dict | None = None) -> HostResult:
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
    golden : golden.common.beats.BeatModel, optional
        Overrides the unit's golden adapter (e.g. a deliberately wrong model in tests).
    check_identity : bool
        Refuse a board whose identify reply does not match the unit and parameters.
    manifest : dict, optional
        The unit's manifest as built (the board build's ``<unit>.manifest.json``): frames and
        parameters come from it; default: :func:`gen.verilog.unit_manifest` of ``unit``,
        ``params`` and ``config``.

    Raises
    ------
    ValueError
        For an unknown unit, configuration or parameter, or inputs that do not fit the layout.
    HostError
        If the board does not answer as the protocol says.
    """
    if manifest is None:
        manifest = unit_manifest(unit, params, config=config)
    layout, resolved = BridgeLayout.from_manifest(manifest), manifest["params"]
    golden = golden or golden_model(unit)
    rng = np.random.default_rng(seed)
    if inputs is None:
        inputs = golden.stimulus(rng, resolved, count) if golden else \
            _uniform_stimulus(rng, layout, count)
        if order is None and getattr(golden, "order", None) is not None:
            order = golden.order(resolved, inputs)
    words = pack_inputs(layout, inputs)
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
        prog="qllm host",
        description="Stream beats through a unit on a board (built with qllm "
                    "bitstream) and check them against the unit's golden adapter.")
    parser.add_argument("--port", required=True, help="serial port, e.g. /dev/ttyUSB1")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--unit", help=f"one of {', '.join(sorted(UNITS))}")
    which.add_argument("--manifest", help="the unit's manifest written by the board build "
                                          "(<unit>.manifest.json beside the bitstream)")
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
        if arguments.manifest:
            if arguments.config or overrides:
                raise ValueError("--manifest gives the parameters: no --config or --set")
            with open(arguments.manifest) as file:
                try:
                    manifest = json.load(file)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{arguments.manifest}: not a JSON manifest ({error})") \
                        from None
            if not isinstance(manifest, dict) or "unit" not in manifest:
                raise ValueError(f"{arguments.manifest}: not a unit manifest (no 'unit')")
        else:
            manifest = unit_manifest(arguments.unit, overrides, config=arguments.config)
        if manifest["unit"] not in UNITS:
            raise ValueError(f"unknown unit {manifest['unit']!r} in {arguments.manifest}")
        if arguments.count < 1:
            raise ValueError(f"--count must be at least 1, not {arguments.count}")
        inputs = order = None
        if arguments.inputs:
            try:
                with np.load(arguments.inputs, allow_pickle=False) as data:
                    arrays = {key: data[key] for key in data.files}
            except (ValueError, zipfile.BadZipFile, EOFError) as error:
                raise ValueError(f"{arguments.inputs}: not a .npz of input fields "
                                 f"({error})") from None
            if not isinstance(arrays, dict):
                raise ValueError(f"{arguments.inputs}: not a .npz of input fields")
            order = arrays.pop("order", None)
            inputs = nest_fields(arrays)
            # Checked against the unit's layout before the port is opened.
            try:
                pack_inputs(BridgeLayout.from_manifest(manifest), inputs)
            except ValueError as error:
                raise ValueError(f"{arguments.inputs}: {error}") from None
        port = open_serial(arguments.port, arguments.baud, arguments.timeout)
    except (ValueError, TypeError, OSError, HostError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        with port:
            result = run_unit(port, manifest["unit"], count=arguments.count,
                              seed=arguments.seed, inputs=inputs, order=order,
                              check_identity=not arguments.no_identify, manifest=manifest)
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
