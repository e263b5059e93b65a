"""cocotb bench of a unit's AXI4-Stream form (``qllm verilog --axis``), with cocotbext-axi.

Every ``s_axis*`` stream is driven by an :class:`cocotbext.axi.AxiStreamSource` and every
``m_axis*`` stream read by an :class:`cocotbext.axi.AxiStreamSink`, through the names a user's
AXI4-Stream bench would use (``AxiStreamBus.from_prefix(dut, "s_axis")``): random beats of the
unit's golden adapter (:class:`golden.common.beats.BeatModel`), packed into ``tdata`` bytes by
the manifest's layout, random gaps on every source and random backpressure on every sink; every
output beat is compared with the adapter's ``expected`` (``BeatModel.equal`` for the fields not
compared bit for bit). Run by :func:`verif.axis_runner.run_axis_bench`.

What the bench checks of the wrapper's rules (docs/integration.md):

* ``tdata`` packing and padding: inputs are sent with random pad bits; outputs must have 0s.
* ``tlast`` on an input *is* the unit's ``last``: a stream with ``tlast`` is sent as one frame
  per run (``last`` beat), and the ``last`` bit in ``tdata`` is sent inverted, so a wrapper that
  read it from ``tdata`` would fail.
* ``tlast`` on an output mirrors ``last``: every received frame ends at the only beat whose
  ``last`` field is 1.
* Nothing more: after the expected beats a few more cycles must bring none.
* Plain outputs keep their names (their final values go to the metrics, ``signals``).

Environment (set by the runner): ``QLLM_MANIFEST`` (the ``_axis`` manifest), ``QLLM_METRICS``,
``QLLM_AXIS_BEATS`` (stimulus count, default 64), ``QLLM_AXIS_VALID`` and ``QLLM_AXIS_READY``
(probability that a source offers / a sink takes a beat in a cycle, default 0.7 and 0.6),
``QLLM_AXIS_WRONG_MODEL`` (``1``: flip one bit of one expected beat, to show that the bench
fails on a wrong model).
"""

import itertools
import logging
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from .bench import CLOCK_PERIOD_NS, golden_model, load_manifest, record_metrics
from .payload import PayloadCodec, compare_outputs, flatten_fields, nest_fields

__all__ = ["frames_of", "beats_of", "golden_frames"]


def frames_of(words, lasts, tdata_bytes, payload_width, rng):
    """The input beats ``words`` (packed payloads) as ``AxiStreamFrame`` s of ``tdata_bytes``
    bytes per beat, random pad bits above ``payload_width``. ``lasts`` is the ``last`` column
    of a stream with ``tlast`` (one frame per run, ending at a 1; ValueError if the final
    beat is not one), or None (one frame)."""
    pad = tdata_bytes * 8 - payload_width
    data = []
    for word in words:
        noise = int(rng.integers(0, 1 << pad)) << payload_width if pad else 0
        data.append((int(word) | noise).to_bytes(tdata_bytes, "little"))
    if lasts is None:
        return [AxiStreamFrame(b"".join(data))] if data else []
    lasts = np.asarray(lasts)
    if len(lasts) and not lasts[-1]:
        raise ValueError("a stream with tlast must end with a `last` beat")
    ends = np.flatnonzero(lasts) + 1
    starts = np.concatenate([[0], ends[:-1]])
    return [AxiStreamFrame(b"".join(data[start:end])) for start, end in zip(starts, ends)]


def beats_of(frame, tdata_bytes):
    """The ``tdata`` integers of the beats of a received frame."""
    data = bytes(frame.tdata)
    assert len(data) % tdata_bytes == 0, f"frame of {len(data)} bytes: not whole beats"
    return [int.from_bytes(data[start:start + tdata_bytes], "little")
            for start in range(0, len(data), tdata_bytes)]


def _pauses(rng, probability):
    """A pause generator: True (pause) in a cycle with probability ``1 - probability``."""
    return (bool(rng.random() >= probability) for _ in itertools.count())


@cocotb.test()
async def golden_frames(dut):
    """Random golden-adapter beats through cocotbext-axi sources and sinks, with gaps and
    backpressure; every output beat compared with the adapter's."""
    manifest = load_manifest()
    params, axis = manifest["params"], manifest["axis"]
    model = golden_model(manifest["unit"])
    seed = int(os.environ.get("COCOTB_RANDOM_SEED", cocotb.RANDOM_SEED))
    rng = np.random.default_rng([seed, 0xA515])
    dut._log.info("QLLM_SEED=%d, params %s", seed, params)
    inputs = model.stimulus(rng, params, int(os.environ.get("QLLM_AXIS_BEATS", 64)))
    expected = model.expected(params, inputs)
    if os.environ.get("QLLM_AXIS_WRONG_MODEL") == "1":
        expected = _wrong(expected)
    valid = float(os.environ.get("QLLM_AXIS_VALID", 0.7))
    ready = float(os.environ.get("QLLM_AXIS_READY", 0.6))
    logging.getLogger("cocotb").setLevel(logging.WARNING)   # cocotbext-axi logs every frame

    Clock(dut.aclk, CLOCK_PERIOD_NS, unit="ns").start()
    dut.aresetn.value = 0
    sources, sinks, codecs = {}, {}, {}
    for index, (prefix, described) in enumerate(axis.items()):
        port = described["port"]
        codecs[prefix] = PayloadCodec(manifest["ports"][port]["payload"])
        bus = AxiStreamBus.from_prefix(dut, prefix)
        port_rng = np.random.default_rng([seed, 0xA515, index])
        if described["direction"] == "in":
            sources[prefix] = AxiStreamSource(bus, dut.aclk, dut.aresetn,
                                              reset_active_level=False)
            sources[prefix].set_pause_generator(_pauses(port_rng, valid))
        else:
            sinks[prefix] = AxiStreamSink(bus, dut.aclk, dut.aresetn, reset_active_level=False)
            sinks[prefix].set_pause_generator(_pauses(port_rng, ready))
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1

    sent = 0
    for prefix, source in sources.items():
        described = axis[prefix]
        fields = dict(inputs[described["port"]])
        lasts = None
        if described["tlast"]:
            lasts = np.asarray(fields["last"])
            fields["last"] = 1 - lasts          # tdata's `last` bit must not matter
        words = codecs[prefix].pack_batch(fields)
        sent += len(words)
        for frame in frames_of(words, lasts, described["tdata_width"] // 8,
                               described["payload_width"], rng):
            source.send_nowait(frame)

    want = {prefix: _beat_count(expected[axis[prefix]["port"]]) for prefix in sinks}
    words = {prefix: [] for prefix in sinks}
    problems = []
    max_cycles = 50 * (sent + sum(want.values())) + 1000
    waited = 0
    while any(len(words[p]) < want[p] for p in sinks) and waited < max_cycles:
        await ClockCycles(dut.aclk, 16)
        waited += 16
        _drain(sinks, axis, codecs, words, problems)
    await ClockCycles(dut.aclk, 64)             # anything extra would arrive now
    _drain(sinks, axis, codecs, words, problems)

    got = {axis[prefix]["port"]: codecs[prefix].unpack_batch(words[prefix]) for prefix in sinks}
    problems += compare_outputs(got, expected, model.equal)
    # Plain outputs (sticky error flags) pass through under their names: their final values.
    signals = {name: int(getattr(dut, name).value) for name, signal
               in manifest["signals"].items() if signal["direction"] == "out"}
    record_metrics("axis", beats_in=sent, beats_out={p: len(w) for p, w in words.items()},
                   cycles=waited, signals=signals)
    assert not problems, f"{len(problems)} mismatches:\n" + "\n".join(problems[:20])


def _drain(sinks, axis, codecs, words, problems):
    """Move every received frame's beats into ``words``; note pad bits that are not 0 and
    frames whose ``tlast`` is not where the ``last`` field is."""
    for prefix, sink in sinks.items():
        described = axis[prefix]
        while not sink.empty():
            beats = beats_of(sink.recv_nowait(), described["tdata_width"] // 8)
            width = described["payload_width"]
            if any(beat >> width for beat in beats):
                problems.append(f"{prefix}: tdata pad bits not 0")
            beats = [beat & ((1 << width) - 1) for beat in beats]
            if described["tlast"]:
                lasts = codecs[prefix].unpack_batch(beats)["last"].tolist()
                if lasts != [0] * (len(lasts) - 1) + [1]:
                    problems.append(f"{prefix}: frame of {len(beats)} beats (from beat "
                                    f"{len(words[prefix])}) with `last` fields {lasts}: "
                                    f"tlast is not the last field")
            words[prefix].extend(beats)


def _beat_count(fields):
    flat = flatten_fields(fields)
    return len(next(iter(flat.values()))) if flat else 0


def _wrong(expected):
    """``expected`` with the lowest bit of the first field of the first beat of its first
    output port flipped (a deliberately wrong model)."""
    port = next(iter(expected))
    flat = {key: np.array(value, copy=True) for key, value in flatten_fields(
        expected[port]).items()}
    key = next(iter(flat))
    flat[key].reshape(len(flat[key]), -1)[0, 0] ^= 1
    return {**expected, port: nest_fields(flat)}
