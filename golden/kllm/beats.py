"""Beat-level golden adapters of the KLLM units
(:class:`golden.common.beats.BeatModel`: a unit's input beats -> the output beats its golden
model gives).

Adapters and the units they serve:

* ``kllm_concat``: ``kllm_concat``;
* ``kllm_idx_counter``: ``kllm_idx_counter``;
* ``orizuru``: ``orizuru``, ``orizuru_scan``, ``orizuru_sortnet``;
* ``kllm_column``: ``kllm_column`` (two input streams, ``cb`` and ``i``: it has an ``order``).

Pure NumPy on top of the golden models of :mod:`golden.kllm`; nothing here looks at the RTL.
"""

import numpy as np

from ..common.beats import BeatModel
from ..common.beats import pack_bits as _pack_bits
from ..common.beats import runs_ending_at_last as _runs_ending_at_last
from ..common.beats import unpack_bits as _unpack_bits
from .column import column_outputs, load_codebook
from .concat import concat_indices
from .idx_counter import counter_width, index_distributions, wrap_counts
from .orizuru import beat_lanes, orizuru_beats

__all__ = ["kllm_concat", "kllm_idx_counter", "orizuru", "kllm_column"]


# --------------------------------------------------------------------------- kllm_concat


def _kllm_concat_stimulus(rng, p, count):
    return {"i": {"a": rng.integers(0, 1 << p["a_bits"], (count, p["lanes"])),
                  "b": rng.integers(0, 1 << p["b_bits"], (count, p["lanes"]))}}


def _kllm_concat_expected(p, inputs):
    i = inputs["i"]
    return {"o": {"y": concat_indices(i["a"], i["b"], p["a_bits"], p["b_bits"])}}


kllm_concat = BeatModel("kllm_concat", _kllm_concat_stimulus, _kllm_concat_expected)
"""contract 1: ``y[j] = (a[j] << b_bits) | b[j]``, one output beat per input beat."""


# --------------------------------------------------------------------------- kllm_idx_counter


def _weight_bits(p):
    return p.get("weight_bits") or 4


def _idx_counter_stimulus(rng, p, count):
    n, bits = p["n_inputs"], p["idx_bits"]
    # Half the beats fully unmasked, half with random masks.
    lanes = np.where(rng.random((count, 1)) < 0.5, True, rng.random((count, n)) < 0.5)
    fields = {"idx": rng.integers(0, 1 << bits, (count, n)),
              "mask": _pack_bits(lanes),
              "last": _runs_ending_at_last(count, rng, 0.2)}
    if p["mode"] == "ik":
        half = 1 << (_weight_bits(p) - 1)
        fields["weight"] = rng.integers(-half, half, (count, n))
    return {"i": fields}


def _idx_counter_expected(p, inputs):
    i = inputs["i"]
    n, bins, ik = p["n_inputs"], 1 << p["idx_bits"], p["mode"] == "ik"
    width = counter_width(p["max_len"], p["mode"], _weight_bits(p))
    idx = np.asarray(i["idx"], np.int64).reshape(-1, n)
    mask = _unpack_bits(i["mask"], n)
    weight = np.asarray(i["weight"], np.int64).reshape(-1, n) if ik else None
    ends = np.flatnonzero(np.asarray(i["last"])) + 1      # a reduction ends at `last`
    counts = []
    for start, end in zip(np.concatenate(([0], ends[:-1])), ends):
        histogram = index_distributions(
            idx[start:end].reshape(1, -1), p["idx_bits"], mask[start:end].reshape(1, -1),
            weight[start:end].reshape(1, -1) if ik else None)[0]
        counts.append(wrap_counts(histogram, width, p["mode"]))    # wraps beyond max_len
    last = np.tile((np.arange(bins) == bins - 1).astype(np.int64), len(counts))
    return {"o": {"count": np.concatenate(counts) if counts else np.zeros(0, np.int64),
                  "last": last}}


kllm_idx_counter = BeatModel("kllm_idx_counter", _idx_counter_stimulus, _idx_counter_expected)
"""contract 2: after every ``last`` beat, the ``2**idx_bits`` bins of the reduction's histogram of
unmasked indices (``ik``: weighted), ``last`` on the final bin; counts wrap at the counter width
:func:`golden.kllm.idx_counter.counter_width` gives for ``max_len`` (beats after the final ``last``
give nothing)."""


# --------------------------------------------------------------------------- orizuru


def _orizuru_stimulus(rng, p, count):
    n = p["n"]
    normal = rng.standard_normal((count, n)).astype(np.float16).view(np.uint16)
    heavy = rng.standard_normal((count, n)) * np.exp(2 * rng.standard_normal((count, n)))
    heavy = np.clip(heavy, -65000, 65000).astype(np.float16).view(np.uint16)
    raw = rng.integers(0, 1 << 16, (count, n))
    kind = rng.integers(0, 3, (count, 1))
    x = np.where(kind == 0, normal, np.where(kind == 1, heavy, raw)).astype(np.int64)
    return {"i": {"x": x.reshape(-1, beat_lanes(n))}}


def _orizuru_expected(p, inputs):
    xs = np.asarray(inputs["i"]["x"], np.int64).reshape(-1, p["n"])
    return {"o": orizuru_beats(xs, p["k"])}


orizuru = BeatModel("orizuru", _orizuru_stimulus, _orizuru_expected)
"""contract 3: ``k`` beats per vector (the j-th largest and smallest by IEEE totalOrder, the mask on
the k-th); a vector of n > 1024 values is ``n / 1024`` input beats
(:func:`golden.kllm.orizuru.beat_lanes`)."""


# --------------------------------------------------------------------------- kllm_column


#: Beats of the all-masked reduction that opens the ``kllm_column`` stimulus (see below).
_COLUMN_GUARD_BEATS = 16

#: binary16 specials a ``kllm_column`` stimulus codebook may hold one of: +-0, +-inf, a NaN, the
#: smallest subnormal, 65504.
_COLUMN_SPECIALS = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x7BFF])


def _column_entries(p):
    """Codebook entries: 2**(a_bits + b_bits) in kk mode, 2**a_bits in ik mode."""
    return 1 << (p["a_bits"] + (p["b_bits"] if p["mode"] == "kk" else 0))


def _column_weight_bits(p):
    return p.get("weight_bits") or 4


def _column_stimulus(rng, p, count):
    n, ik, entries = p["n_inputs"], p["mode"] == "ik", _column_entries(p)
    # One codebook load: binary16 values of both signs over a few binades, and in one load of
    # two a single special entry (an infinity or NaN makes every result that counts it so).
    values = rng.standard_normal(entries) * np.exp2(rng.integers(-6, 3, entries))
    value = values.astype(np.float16).view(np.uint16).astype(np.int64)
    if rng.random() < 0.5:
        value[rng.integers(entries)] = rng.choice(_COLUMN_SPECIALS)
    last = np.zeros(entries, np.int64)
    last[-1] = 1
    # Reduction 0 is all masked (y = +0.0 whatever the codebook) and 16 beats long: a harness
    # that drives cb and i independently (verif.amaranth_sim) offers the load long before it
    # ends, so every later reduction sees the loaded codebook when the unit takes a waiting
    # load at the first reduction boundary. Then `count - 1` reductions of 1 to 4 beats, half
    # unmasked, half with random masks, at most max_len lanes counted (no overflow).
    beats = np.concatenate(([_COLUMN_GUARD_BEATS], rng.integers(1, 5, max(count - 1, 0))))
    total = int(beats.sum())
    first = np.repeat(np.cumsum(beats) - beats, beats)           # each beat's reduction start
    lane = (np.arange(total) - first)[:, None] * n + np.arange(n)   # lane within reduction
    dense = np.repeat(rng.random(beats.size) < 0.5, beats)[:, None]
    lanes = (dense | (rng.random((total, n)) < 0.5)) & (lane < p["max_len"])
    lanes[:_COLUMN_GUARD_BEATS] = False
    reduction_last = np.zeros(total, np.int64)
    reduction_last[np.cumsum(beats) - 1] = 1
    fields = {"a": rng.integers(0, 1 << p["a_bits"], (total, n))}
    if ik:
        half = 1 << (_column_weight_bits(p) - 1)
        fields["weight"] = rng.integers(-half, half, (total, n))
    else:
        fields["b"] = rng.integers(0, 1 << p["b_bits"], (total, n))
    fields["mask"] = _pack_bits(lanes)
    fields["last"] = reduction_last
    return {"cb": {"value": value, "last": last}, "i": fields}


def _column_expected(p, inputs):
    n, ik = p["n_inputs"], p["mode"] == "ik"
    cb, i = inputs["cb"], inputs["i"]
    codebook, _ = load_codebook(np.zeros(_column_entries(p), np.int64),
                                np.asarray(cb["value"], np.int64), np.asarray(cb["last"]))
    a = np.asarray(i["a"], np.int64).reshape(-1, n)
    b = np.asarray(i["weight" if ik else "b"], np.int64).reshape(-1, n)
    out = column_outputs(a, b, _unpack_bits(i["mask"], n), np.asarray(i["last"]), codebook,
                         p["a_bits"], p.get("b_bits"), p["mode"], _column_weight_bits(p),
                         p["max_len"])
    return {"o": {"y": out.y, "overflow": out.overflow.astype(np.int64)}}


def _column_order(p, inputs):
    """Every ``cb`` beat, then every ``i`` beat: the whole load before the reductions."""
    loads = len(np.asarray(inputs["cb"]["value"]))
    return np.array(["cb"] * loads + ["i"] * len(np.asarray(inputs["i"]["last"])), dtype=str)


kllm_column = BeatModel("kllm_column", _column_stimulus, _column_expected, order=_column_order)
"""contract 7: one ``o`` beat per reduction, ``y`` (binary16, every NaN 0x7E00) and ``overflow``
(:func:`golden.kllm.column.column_outputs`). Every ``cb`` beat is applied
(:func:`golden.kllm.column.load_codebook`, from the all +0.0 codebook of reset) before the first
reduction: the order the adapter's ``order`` gives and the unit's rule (a load is taken between
reductions, and ``i`` waits while a load is partly taken). The stimulus is one load and
``count`` reductions (the first all masked, see :func:`_column_stimulus`) and never overflows;
where ``overflow`` is set the unit's ``y`` is unspecified and the adapter's ``y`` (the weighted
sum of the exact counts) must not be compared. The bench (``verif/kllm/tb_column.py``) drives
reloads, overflows and long reductions itself."""
