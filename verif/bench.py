"""Shared test-bench environment: manifest, clock, reset, stream ports, scoreboard.

A unit's cocotb test module builds one :class:`Bench` per test. The runner passes the unit's
manifest path in ``QLLM_MANIFEST``; parameters, payload layouts and the latency come from there,
so a bench never hard-codes bit offsets. The expected output beats come from the unit's
beat-level golden adapter (:func:`golden_model`, :meth:`Bench.expected`), the one the board host
uses too.
"""

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from qllm_cores.gen.registry import UNITS, load_object

from .payload import PayloadCodec
from .stream import StreamDriver, StreamMonitor

__all__ = ["Bench", "compare_fields", "golden_model", "load_manifest", "record_metrics"]

CLOCK_PERIOD_NS = 10


def load_manifest(path=None):
    """Read the manifest named by ``path`` or by the ``QLLM_MANIFEST`` environment variable."""
    path = path or os.environ.get("QLLM_MANIFEST")
    if not path:
        raise RuntimeError("QLLM_MANIFEST is not set: run benches through verif.runner")
    with open(path) as file:
        return json.load(file)


def golden_model(unit):
    """The beat-level golden adapter of registered ``unit`` (a
    :class:`golden.common.beats.BeatModel` named by ``UNITS[unit].golden``), or None if the registry
    names none.

    Raises
    ------
    ValueError
        If ``unit`` is not registered.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; known units: {', '.join(sorted(UNITS))}")
    reference = UNITS[unit].golden
    return None if reference is None else load_object(reference)


class Bench:
    """Clock, reset, drivers and monitors for every stream port of a unit.

    Parameters
    ----------
    dut : cocotb handle
        The top level.
    valid_probability, ready_probability : float
        Backpressure on every input (gaps in ``valid``) and every output (gaps in ``ready``).
    """

    def __init__(self, dut, *, valid_probability=1.0, ready_probability=1.0, seed_offset=0):
        self.dut = dut
        self.manifest = load_manifest()
        self.params = self.manifest["params"]
        self.latency = self.manifest.get("latency")
        # The runner's seed (QLLM_SEED, default 1); each test mixes in its own offset so tests
        # draw different data. Reproduce a failure with the logged QLLM_SEED.
        self.seed = int(os.environ.get("COCOTB_RANDOM_SEED", cocotb.RANDOM_SEED))
        self.rng = np.random.default_rng([self.seed, seed_offset])
        dut._log.info("QLLM_SEED=%d (test offset %d), params %s", self.seed, seed_offset,
                      self.params)
        self.codecs = {}
        self.drivers = {}
        self.monitors = {}
        for name, port in self.manifest["ports"].items():
            self.codecs[name] = PayloadCodec(port["payload"])
            port_rng = np.random.default_rng([self.seed, seed_offset, len(self.codecs)])
            if port["direction"] == "in":
                self.drivers[name] = StreamDriver(
                    dut, name, dut.clk, valid_probability=valid_probability, rng=port_rng)
            else:
                self.monitors[name] = StreamMonitor(
                    dut, name, dut.clk, ready_probability=ready_probability, rng=port_rng)

    @property
    def golden(self):
        """The unit's golden adapter (:func:`golden_model` of the manifest's unit)."""
        return golden_model(self.manifest["unit"])

    def expected(self, inputs):
        """The output beats ``{port: fields}`` the unit's golden adapter gives for the input
        beats ``inputs`` (``{port: fields}``) at the manifest's parameters."""
        return self.golden.expected(self.params, inputs)

    async def start(self, reset_cycles=3, *, streams=True):
        """Start the clock, hold reset, then start every driver and monitor (unless
        ``streams`` is False: :meth:`full_rate` drives the ports itself)."""
        Clock(self.dut.clk, CLOCK_PERIOD_NS, unit="ns").start()
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, reset_cycles)
        await FallingEdge(self.dut.clk)
        self.dut.rst.value = 0
        if not streams:
            return
        for monitor in self.monitors.values():
            monitor.enabled = True
            cocotb.start_soon(monitor.run())
        for driver in self.drivers.values():
            cocotb.start_soon(driver.run())

    def send(self, port, fields):
        """Pack a batch of beats (field dict, beat on the first axis) and queue it on ``port``."""
        words = self.codecs[port].pack_batch(fields)
        self.drivers[port].send(words)
        return len(words)

    async def wait_for(self, port, count, *, max_cycles):
        """Wait until ``count`` beats have arrived on ``port``; fail after ``max_cycles``."""
        monitor = self.monitors[port]
        started = time.perf_counter()
        waited = 0
        while len(monitor.words) < count:
            if waited >= max_cycles:
                raise AssertionError(f"{port}: {len(monitor.words)} of {count} beats arrived "
                                     f"in {max_cycles} cycles")
            # At most one beat transfers per cycle, so the missing ones need at least as many
            # cycles: wait for them in one trigger instead of waking up on every edge.
            step = min(count - len(monitor.words), max_cycles - waited)
            await ClockCycles(self.dut.clk, step)
            waited += step
        self.wall_seconds = time.perf_counter() - started
        # A few more cycles: anything extra (a duplicated beat) would show up here.
        await ClockCycles(self.dut.clk, 4 + (self.latency or 0))

    async def full_rate(self, in_port, fields, out_port, count, *, max_cycles):
        """Send ``fields`` on ``in_port`` back to back and accept ``count`` beats on
        ``out_port`` with ``ready`` held high, in one coroutine; return the received field dict.

        For long exhaustive runs: one wake-up pair per cycle instead of one per driver and
        monitor (about twice as fast). Start the bench with ``start(streams=False)``. Fails if
        ``in_port`` ever refuses a beat (the unit must take one beat per cycle) or ``count``
        beats do not arrive within ``max_cycles``.
        """
        words = self.codecs[in_port].pack_batch(fields)
        port = self.drivers[in_port]
        out = self.monitors[out_port]
        clock = self.dut.clk
        out.ready.value = 1
        got = []
        sent = cycles = 0
        while len(got) < count:
            await FallingEdge(clock)
            cycles += 1
            if cycles > max_cycles:
                raise AssertionError(f"{out_port}: {len(got)} of {count} beats arrived in "
                                     f"{max_cycles} cycles")
            offered = sent < len(words)
            port.valid.value = int(offered)
            if offered:
                port.payload.value = words[sent]
            await ReadOnly()
            if offered:
                if not port.ready.value:
                    raise AssertionError(f"{in_port}: beat {sent} refused at cycle {cycles} "
                                         f"with the output always ready")
                sent += 1
            if out.valid.value:
                got.append(out.payload.value.to_unsigned())
        await FallingEdge(clock)
        port.valid.value = 0
        self.full_rate_cycles = cycles
        return self.codecs[out_port].unpack_batch(got)

    def check_full_rate(self, port, count):
        """Assert that the ``count`` beats on ``port`` left one per cycle, the first one
        ``latency`` cycles after the first input (sent in cycle 1, no gaps anywhere)."""
        cycles = self.monitors[port].transfer_cycles[:count]
        assert cycles == list(range(cycles[0], cycles[0] + count)), (
            f"not one beat per cycle at full rate: {port} transfers at cycles {cycles[:20]} ...")
        assert cycles[0] == 1 + self.latency, (
            f"first result at monitor cycle {cycles[0]}, expected {1 + self.latency} "
            f"(input at cycle 1, latency {self.latency})")
        return cycles[-1] - cycles[0] + 1

    def received(self, port):
        """The field dict of every beat received on ``port`` so far."""
        return self.codecs[port].unpack_batch(self.monitors[port].words)

    def check(self, port, expected):
        """Compare every received beat on ``port`` with ``expected`` (a field dict)."""
        compare_fields(port, self.received(port), expected)


def compare_fields(port, got, expected, path=()):
    """Assert that two field dicts are equal beat for beat; name the first difference."""
    for name, want in expected.items():
        where = path + (name,)
        if name not in got:
            raise AssertionError(f"{port}: field {'.'.join(where)} missing from the output")
        have = got[name]
        if isinstance(want, dict):
            compare_fields(port, have, want, where)
            continue
        want = np.asarray(want)
        have = np.asarray(have)
        if have.shape[0] != want.shape[0]:
            raise AssertionError(
                f"{port}: {have.shape[0]} beats received, {want.shape[0]} expected "
                f"(lost or duplicated beats)")
        have = have.reshape(want.shape)
        mismatch = np.argwhere(have != want)
        if mismatch.size:
            beat = int(mismatch[0][0])
            lane = tuple(int(x) for x in mismatch[0][1:])
            raise AssertionError(
                f"{port}: {len(mismatch)} mismatches in field {'.'.join(where)}; first at beat "
                f"{beat} lane {lane}: got {have[tuple(mismatch[0])]}, "
                f"expected {want[tuple(mismatch[0])]}")


def record_metrics(test, **values):
    """Merge ``values`` under ``test`` into the metrics file the runner reads back."""
    path = os.environ.get("QLLM_METRICS")
    if not path:
        return
    metrics = {}
    if os.path.exists(path):
        with open(path) as file:
            metrics = json.load(file)
    metrics.setdefault(test, {}).update(values)
    with open(path, "w") as file:
        json.dump(metrics, file, indent=2)
