"""cocotb driver and monitor for Amaranth ``lib.stream`` ports, with random backpressure.

Ports are found by the names Amaranth gives them in Verilog: ``<port>__valid``,
``<port>__ready`` and ``<port>__payload``.

Timing discipline: every cycle, both the driver and the monitor change their outputs just after
the falling clock edge and sample the handshake in the read-only phase that follows, when all
combinational logic has settled. Nothing changes again before the rising edge, so the sampled
``valid & ready`` is exactly the transfer that the rising edge performs. This holds even when the
unit's ``ready`` depends combinationally on ``valid`` (allowed by the stream rules).
"""

from collections import deque

import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

__all__ = ["StreamDriver", "StreamMonitor", "StreamProtocolError"]


class StreamProtocolError(AssertionError):
    """A unit broke a ``lib.stream`` transfer rule."""


class _StreamPort:
    def __init__(self, dut, name, clock, probability, rng):
        if not 0.0 < probability <= 1.0:
            raise ValueError(f"probability must be in (0, 1], not {probability!r}")
        self.name = name
        self.clock = clock
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.width = len(self.payload)
        self.probability = probability
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.cycles = 0

    def _coin(self):
        return self.probability >= 1.0 or self.rng.random() < self.probability

    def _random_word(self):
        """Random bits for the payload while ``valid`` is low (the unit must ignore them)."""
        return int.from_bytes(self.rng.bytes((self.width + 7) // 8), "little") & (
            (1 << self.width) - 1)


class StreamDriver(_StreamPort):
    """Drive a stream input of the unit from a queue of packed payload words.

    Parameters
    ----------
    dut : cocotb handle
        The top level.
    name : str
        The stream port name (``"i"``).
    clock : cocotb handle
        The clock signal.
    valid_probability : float
        Chance per cycle that a pending beat is offered (1.0: no gaps).
    rng : numpy.random.Generator
        Source of the gaps and of the filler payload driven while ``valid`` is low.
    """

    def __init__(self, dut, name, clock, *, valid_probability=1.0, rng=None):
        super().__init__(dut, name, clock, valid_probability, rng)
        self.queue = deque()
        self.sent = 0
        self.transfer_cycles = []
        self.valid.value = 0

    def send(self, words):
        """Queue packed payload words to be sent in order."""
        self.queue.extend(int(word) for word in words)

    @property
    def idle(self):
        """True when every queued beat has been transferred."""
        return not self.queue and not self._holding

    _holding = False

    async def run(self):
        """Drive the port forever (start with ``cocotb.start_soon``)."""
        while True:
            await FallingEdge(self.clock)
            self.cycles += 1
            if not self._holding:
                if self.queue and self._coin():
                    self.payload.value = self.queue[0]
                    self.valid.value = 1
                    self._holding = True
                else:
                    self.valid.value = 0
                    self.payload.value = self._random_word()
            await ReadOnly()
            if self._holding and int(self.ready.value):
                self.queue.popleft()
                self._holding = False
                self.sent += 1
                self.transfer_cycles.append(self.cycles)


class StreamMonitor(_StreamPort):
    """Accept beats from a stream output of the unit and check the transfer rules.

    Every transferred payload is appended to :attr:`words` (packed integers, in order). While
    the unit offers a beat that is not yet accepted, the monitor checks that ``valid`` stays high
    and the payload does not change; a violation raises :class:`StreamProtocolError`.

    Parameters
    ----------
    ready_probability : float
        Chance per cycle that ``ready`` is high (1.0: never stalls the unit).
    """

    def __init__(self, dut, name, clock, *, ready_probability=1.0, rng=None):
        super().__init__(dut, name, clock, ready_probability, rng)
        self.words = []
        self.transfer_cycles = []
        self.ready.value = 0
        self.enabled = False

    async def run(self):
        """Monitor the port forever (start with ``cocotb.start_soon``)."""
        offered = None
        while True:
            await FallingEdge(self.clock)
            self.cycles += 1
            self.ready.value = int(self.enabled and self._coin())
            await ReadOnly()
            valid = int(self.valid.value)
            payload = self.payload.value.to_unsigned() if valid else None
            if offered is not None:
                if not valid:
                    raise StreamProtocolError(
                        f"{self.name}: valid fell at cycle {self.cycles} before the beat "
                        f"offered was accepted")
                if payload != offered:
                    raise StreamProtocolError(
                        f"{self.name}: payload changed at cycle {self.cycles} while valid and "
                        f"not accepted: {offered:#x} -> {payload:#x}")
            if valid and int(self.ready.value):
                self.words.append(payload)
                self.transfer_cycles.append(self.cycles)
                offered = None
            else:
                offered = payload
