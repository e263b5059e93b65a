"""Beat-level golden adapters of the FP16 baseline units
(:class:`golden.common.beats.BeatModel`: a unit's input beats -> the output beats its golden
model gives).

Adapters and the units they serve:

* ``fp16_mac``: ``fp16_mac``;
* ``fp16_pcu``: ``fp16_pcu``.

Pure NumPy on top of the golden models of :mod:`golden.baselines`; nothing here looks at the RTL.
"""

import numpy as np

from ..common.beats import BeatModel
from ..common.beats import runs_ending_at_last as _runs_ending_at_last
from .fp16_mac import fp16_mac_run, fp32_match

__all__ = ["fp16_mac", "fp16_pcu"]


# --------------------------------------------------------------------------- fp16_mac


def _fp16_mac_stimulus(rng, p, count):
    def fp16(n):
        values = rng.standard_normal(n).astype(np.float16).view(np.uint16).astype(np.int64)
        return np.where(rng.random(n) < 0.05, rng.integers(0, 1 << 16, n), values)
    last = _runs_ending_at_last(count, rng, 0.2)
    first = np.concatenate(([1], last[:-1]))
    return {"i": {"a": fp16(count), "b": fp16(count), "first": first, "last": last}}


def _fp16_mac_expected(p, inputs):
    i = inputs["i"]
    # The accumulator format (absent from parameters of before ``acc`` existed: binary32).
    acc = fp16_mac_run(i["a"], i["b"], i["first"], i["last"], acc=p.get("acc", "fp32"))
    return {"o": {"acc": np.asarray(acc, np.int64)}}


def _fp32_equal(got, want):
    return fp32_match(np.asarray(got, np.int64), np.asarray(want, np.int64))


fp16_mac = BeatModel("fp16_mac", _fp16_mac_stimulus, _fp16_mac_expected,
                     equal={"acc": _fp32_equal})
"""contract 5 (baseline): one binary32 pattern per ``last``; ``acc`` compares NaN to any NaN
(:func:`golden.baselines.fp16_mac.fp32_match`). With the parameter ``acc="fp16"`` (contract 5's second
reading) one binary16 pattern per ``last``, every NaN the canonical 0x7E00: the same comparison
is then bit for bit (no 16-bit pattern is a binary32 NaN)."""


# --------------------------------------------------------------------------- fp16_pcu


def _fp16_pcu_stimulus(rng, p, count):
    def fp16(shape):
        values = rng.standard_normal(shape).astype(np.float16).view(np.uint16).astype(np.int64)
        return np.where(rng.random(shape) < 0.05, rng.integers(0, 1 << 16, shape), values)
    last = _runs_ending_at_last(count, rng, 0.2)
    first = np.concatenate(([1], last[:-1]))
    return {"i": {"act": fp16(count), "wgt": fp16((count, p["lanes"])), "first": first,
                  "last": last}}


def _fp16_pcu_expected(p, inputs):
    i = inputs["i"]
    act = np.asarray(i["act"], np.int64)
    wgt = np.asarray(i["wgt"], np.int64)
    if wgt.shape != (len(act), p["lanes"]):
        raise ValueError(f"wgt must have shape (beats, lanes) = ({len(act)}, {p['lanes']}), "
                         f"not {wgt.shape}")
    acc = [fp16_mac_run(act, wgt[:, j], i["first"], i["last"]) for j in range(p["lanes"])]
    return {"o": {"acc": np.stack(acc, axis=1).astype(np.int64)}}


fp16_pcu = BeatModel("fp16_pcu", _fp16_pcu_stimulus, _fp16_pcu_expected,
                     equal={"acc": _fp32_equal})
"""HBM-PIM PCU baseline of contract 9: ``lanes`` ``fp16_mac`` lanes sharing ``act``, lane ``j`` over
``(act, wgt[j])``; one beat per ``last``, ``acc`` (beats, lanes) of binary32 patterns, compared
element by element with :func:`golden.baselines.fp16_mac.fp32_match` (NaN equals any NaN)."""
