"""Generic cocotb bench: drive a unit with given input beats and record its output beats.

Used by :func:`verif.runner.replay` to chain units (one unit's RTL output becomes the next
one's input) or to run your own vectors. Environment (set by the runner):

``QLLM_REPLAY_IN``
    ``.npz`` with one array per input field, named ``<port>.<field>[.<subfield>]``, the beat on
    the first axis. With several input ports, all are driven at once from the first cycle
    (a unit that orders its inputs, e.g. ``kllm_column``'s codebook before the reductions,
    sees each port's first beat valid in cycle 0 when ``QLLM_REPLAY_VALID`` is 1).
``QLLM_REPLAY_OUT``
    ``.npz`` written with the received output fields, named the same way.
``QLLM_REPLAY_BEATS``
    Number of output beats to wait for: an integer (a unit with one output port) or a JSON
    object ``{port: beats}``.
``QLLM_REPLAY_VALID``, ``QLLM_REPLAY_READY``
    Backpressure probabilities (default 1.0).
"""

import json
import os

import cocotb
import numpy as np

from qllm_cores.verif.bench import Bench
from qllm_cores.verif.payload import flatten_fields, nest_fields


@cocotb.test()
async def replay(dut):
    bench = Bench(dut, valid_probability=float(os.environ.get("QLLM_REPLAY_VALID", 1.0)),
                  ready_probability=float(os.environ.get("QLLM_REPLAY_READY", 1.0)))
    with np.load(os.environ["QLLM_REPLAY_IN"], allow_pickle=False) as data:
        inputs = nest_fields({key: data[key] for key in data.files})
    counts = json.loads(os.environ["QLLM_REPLAY_BEATS"])
    if not isinstance(counts, dict):
        (out_port,) = bench.monitors
        counts = {out_port: int(counts)}
    await bench.start()
    sent = sum(bench.send(port, fields) for port, fields in inputs.items())
    received = {}
    for out_port, count in counts.items():
        await bench.wait_for(out_port, count, max_cycles=50 * (sent + count) + 1000)
    for out_port, count in counts.items():
        received[out_port] = bench.received(out_port)
        extra = len(bench.monitors[out_port].words) - count
        assert extra == 0, f"{extra} beats more than the {count} expected on {out_port}"
    np.savez(os.environ["QLLM_REPLAY_OUT"], **flatten_fields(received))
