"""Amaranth's own simulator as a second simulator: a unit's streams driven with the beats of its
golden adapter, every output beat collected by field name, no Verilog and no C++ compiler.

The cocotb benches (:mod:`verif.bench`) run the generated Verilog under Verilator; this harness
runs the Amaranth description itself under :class:`amaranth.sim.Simulator`, so two independent
simulators check every unit against the same :class:`golden.common.beats.BeatModel` on a machine
with pip alone (``tests/test_amaranth_sim.py``). It applies the stream rules the benches apply:
random gaps on every input's ``valid`` (a beat, once offered, is held until taken) and on every
output's ``ready``, and a waiting output beat must keep ``valid`` and its payload.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.sim import Simulator

from qllm_cores.gen.verilog import port_description
from qllm_cores.verif.payload import PayloadCodec

__all__ = ["SimResult", "simulate_streams"]

#: Simulated clock period (s); the value only scales the simulator's time axis.
PERIOD = 1e-6


@dataclass
class SimResult:
    """What :func:`simulate_streams` saw.

    Attributes
    ----------
    outputs : dict
        ``{port: fields}`` of every output beat, in order.
    cycles : int
        Clock cycles simulated.
    problems : list of str
        Stream-rule violations (a waiting output beat that changed or left) and inputs that
        were not all taken.
    """

    outputs: dict
    cycles: int
    problems: list


def simulate_streams(dut, inputs: dict, *, rng: np.random.Generator,
                     valid_probability: float = 1.0, ready_probability: float = 1.0,
                     idle_cycles: int = 200, max_cycles: int = 1_000_000,
                     order=None) -> SimResult:
    """Offer ``inputs`` (``{port: fields}``) to ``dut``'s input streams and collect its output
    streams until every input beat is taken and no output beat came for ``idle_cycles``.

    Every input port is driven on its own (a unit whose streams must agree takes them in any
    arrival order the stream rules allow); ``valid_probability`` is the chance a free input
    offers its next beat in a cycle, ``ready_probability`` the chance an output is ready.
    ``order`` (the input port of every beat, e.g. :attr:`golden.common.beats.BeatModel.order`), if
    given, serializes the inputs: a port offers its next beat only when it is the next in
    ``order`` (for a unit whose result depends on the arrival order across its inputs, such
    as ``kllm_column``'s codebook load before the reductions).
    """
    ports = port_description(dut)
    codecs = {name: PayloadCodec(port["payload"]) for name, port in ports.items()}
    unknown = set(inputs) - {name for name, port in ports.items() if port["direction"] == "in"}
    if unknown:
        raise ValueError(f"inputs for unknown ports {sorted(unknown)}")
    words = {name: [int(w) for w in codecs[name].pack_batch(fields)]
             for name, fields in inputs.items()}
    received = {name: [] for name, port in ports.items() if port["direction"] == "out"}
    problems: list[str] = []
    state = {"cycles": 0}

    async def bench(ctx):
        sent = dict.fromkeys(words, 0)
        offered: dict[str, int] = {}
        waiting: dict[str, int] = {}
        idle = 0
        for cycle in range(max_cycles):
            position = sum(sent.values())
            for name, beats in words.items():
                port = getattr(dut, name)
                turn = order is None or (position < len(order) and order[position] == name)
                if name not in offered and sent[name] < len(beats) and turn \
                        and rng.random() < valid_probability:
                    offered[name] = beats[sent[name]]
                ctx.set(port.valid, name in offered)
                if name in offered:
                    ctx.set(port.payload.as_value(), offered[name])
            ready = {name: bool(rng.random() < ready_probability) for name in received}
            for name, value in ready.items():
                ctx.set(getattr(dut, name).ready, value)
            await ctx.delay(PERIOD / 1000)          # combinational ready/valid settle
            moved = False
            for name in received:
                port = getattr(dut, name)
                valid, payload = ctx.get(port.valid), ctx.get(port.payload.as_value())
                if name in waiting and not (valid and payload == waiting[name]):
                    problems.append(f"cycle {cycle}: {name}: a beat waiting for ready "
                                    "changed or left")
                waiting.pop(name, None)
                if valid and ready[name]:
                    received[name].append(payload)
                    moved = True
                elif valid:
                    waiting[name] = payload
            for name in list(offered):
                if ctx.get(getattr(dut, name).ready):
                    del offered[name]
                    sent[name] += 1
            await ctx.tick()
            state["cycles"] = cycle + 1
            done = all(sent[name] == len(beats) for name, beats in words.items())
            idle = 0 if moved or not done else idle + 1
            if idle >= idle_cycles:
                return
        untaken = {name: len(beats) - sent[name] for name, beats in words.items()
                   if sent[name] < len(beats)}
        problems.append(f"stopped after {max_cycles} cycles; input beats not taken: "
                        f"{untaken or 'none'}")

    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    sim.add_testbench(bench)
    sim.run()
    outputs = {name: codecs[name].unpack_batch(values) for name, values in received.items()}
    return SimResult(outputs, state["cycles"], problems)
