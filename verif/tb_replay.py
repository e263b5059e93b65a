"""Generic cocotb bench: drive a unit with given input beats and record its output beats.

Used by :func:`verif.runner.replay` to chain units (one unit's RTL output becomes the next
one's input) or to run your own vectors. Environment (set by the runner):

``QLLM_REPLAY_IN``
    ``.npz`` with one array per input field, named ``<port>.<field>[.<subfield>]``, the beat on
    the first axis (one input stream port).
``QLLM_REPLAY_OUT``
    ``.npz`` written with the received output fields, named the same way.
``QLLM_REPLAY_BEATS``
    Number of output beats to wait for.
``QLLM_REPLAY_VALID``, ``QLLM_REPLAY_READY``
    Backpressure probabilities (default 1.0).
"""

import os

import cocotb
import numpy as np

from verif.bench import Bench
from verif.payload import flatten_fields, nest_fields


@cocotb.test()
async def replay(dut):
    bench = Bench(dut, valid_probability=float(os.environ.get("QLLM_REPLAY_VALID", 1.0)),
                  ready_probability=float(os.environ.get("QLLM_REPLAY_READY", 1.0)))
    with np.load(os.environ["QLLM_REPLAY_IN"], allow_pickle=False) as data:
        inputs = nest_fields({key: data[key] for key in data.files})
    count = int(os.environ["QLLM_REPLAY_BEATS"])
    (in_port,) = inputs
    (out_port,) = bench.monitors
    await bench.start()
    sent = bench.send(in_port, inputs[in_port])
    await bench.wait_for(out_port, count, max_cycles=50 * (sent + count) + 1000)
    received = bench.received(out_port)
    extra = len(bench.monitors[out_port].words) - count
    assert extra == 0, f"{extra} beats more than the {count} expected on {out_port}"
    np.savez(os.environ["QLLM_REPLAY_OUT"], **flatten_fields({out_port: received}))
