"""Beat-level golden adapters: the :class:`BeatModel` type, and the stimulus helpers the
papers' adapters share.

A beat-level adapter maps a unit's input beats to the output beats its golden model gives. One
:class:`BeatModel` per unit family, named after the unit, lives in its paper's ``beats`` module
(``golden/kllm/beats.py``, ``golden/oaken/beats.py``, ``golden/p3/beats.py``,
``golden/accllm/beats.py``, ``golden/baselines/beats.py``; :data:`golden.adapters.MODELS`
gathers them), shared by the cocotb benches (``verif/<paper>/tb_*.py``), the board host and the
tests, so that they cannot disagree on what a unit must output. ``gen.registry`` names each unit's
adapter as ``"qllm_cores.golden.<paper>.beats:<name>"`` (``UnitSpec.golden``;
``verif.bench.golden_model(unit)`` resolves it).

Beats are field dicts: ``{port: {field: array}}``, fields named as in the unit's payload layout,
the beat on axis 0 (an array field of L lanes is an array ``(beats, L)``, an array of arrays
``(beats, outer, inner)``). Parameters are the unit's resolved constructor parameters
(:func:`gen.registry.resolve_params`, or a manifest's ``params``).

Pure NumPy; nothing here looks at the RTL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["BeatModel", "x_range", "pack_bits", "unpack_bits", "runs_ending_at_last"]


@dataclass(frozen=True)
class BeatModel:
    """Stimulus and expected output beats of a unit family.

    Attributes
    ----------
    name : str
        The adapter's name (its attribute name in its paper's ``beats`` module).
    stimulus : callable ``(rng, params, count) -> {port: fields}``
        Valid random input beats for every input port from the NumPy generator ``rng``:
        ``count`` beats per port, or ``count`` items where an item spans several beats
        (an ``orizuru`` vector of n > 1024 values, an ``oaken_dequantizer`` chunk).
    expected : callable ``(params, inputs) -> {port: fields}``
        The output beats the golden model gives for the input beats ``inputs``, in order.
    equal : dict of str to callable
        Field name -> ``(got, want) -> bool array`` for the fields not compared bit for bit
        (e.g. ``fp16_mac``'s ``acc``: every NaN equals every NaN); every other field is.
    order : callable ``(params, inputs) -> array of str`` or None
        For units with several input streams: the input port of every beat, in an order in
        which the unit takes them one beat at a time (as a UART bridge delivers them). None:
        any order does (a single input port).
    """

    name: str
    stimulus: Callable
    expected: Callable
    equal: dict = field(default_factory=dict)
    order: Callable | None = None

    def same(self, name, got, want):
        """Element-wise comparison of field ``name`` (the leaf name): ``equal[name]`` or ``==``."""
        if name in self.equal:
            return np.asarray(self.equal[name](got, want), bool)
        return np.asarray(got) == np.asarray(want)


# --------------------------------------------------------------------------- helpers


def x_range(bits, signed):
    """Smallest and largest value of a ``bits``-bit field."""
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def pack_bits(bits):
    """Pack a (beats, n) 0/1 array into one integer per beat, bit j = column j (int64 up to
    62 columns, Python ints beyond)."""
    bits = np.asarray(bits, np.int64)
    n = bits.shape[1]
    if n <= 62:
        return bits @ (np.int64(1) << np.arange(n, dtype=np.int64))
    weights = np.array([1 << j for j in range(n)], dtype=object)
    return bits.astype(object) @ weights


def unpack_bits(words, n):
    """The inverse of :func:`pack_bits`: (beats,) integers -> (beats, n) bool."""
    words = np.asarray(words)
    if n <= 62:                 # bits 0..61: int64 holds every word (object arrays included)
        return ((words.astype(np.int64)[:, None] >> np.arange(n)) & 1).astype(bool)
    return np.array([[(int(w) >> j) & 1 for j in range(n)] for w in words.tolist()],
                    dtype=bool).reshape(len(words), n)


def runs_ending_at_last(count, rng, probability):
    """A ``last`` column of ``count`` beats, 1 with ``probability`` and on the final beat."""
    last = (rng.random(count) < probability).astype(np.int64)
    last[-1:] = 1
    return last
