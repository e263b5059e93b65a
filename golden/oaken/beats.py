"""Beat-level golden adapters of the Oaken units
(:class:`golden.common.beats.BeatModel`: a unit's input beats -> the output beats its golden
model gives).

Adapters and the units they serve:

* ``oaken_decomposer``: ``oaken_decomposer``;
* ``oaken_dequantizer``: ``oaken_dequantizer`` (three input streams: it has an ``order``);
* ``oaken_quantizer``: ``oaken_quantizer``.

Pure NumPy on top of the golden models of :mod:`golden.oaken`; nothing here looks at the RTL.
"""

import numpy as np

from ..common.beats import BeatModel
from ..common.beats import x_range as _x_range
from .online import decompose, dequantize_vector, quantize_vector

__all__ = ["oaken_decomposer", "oaken_dequantizer", "oaken_quantizer"]


# --------------------------------------------------------------------------- oaken


_THRESHOLDS = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")
_META = ("mid_min", "mid_d", "in_min", "in_d", "out_min", "out_d")


def _random_thresholds(rng, count, bits):
    """``count`` ordered threshold rows, spans on a log scale; about one row in four with
    equal neighbours (empty groups)."""
    lo, hi = _x_range(bits, True)
    centre = rng.integers(lo // 2, hi // 2 + 1, count)
    widths = np.exp2(rng.uniform(0, bits - 2, (count, 4))).astype(np.int64)
    t = np.stack([centre - widths[:, 0] // 2 - widths[:, 2], centre - widths[:, 0] // 2,
                  centre + widths[:, 1] // 2, centre + widths[:, 1] // 2 + widths[:, 3]], 1)
    t = np.clip(t, lo, hi)
    equal = rng.integers(0, 12, count)          # 0, 1, 2: merge a pair of neighbours
    for pair in range(3):
        rows = equal == pair
        t[rows, pair + 1] = t[rows, pair]
    return np.sort(t, axis=1)


def _decomposer_stimulus(rng, p, count):
    bits, lanes = p["data_bits"], p["lanes"]
    lo, hi = _x_range(bits, True)
    t = _random_thresholds(rng, count, bits)
    # One beat in eight with shuffled thresholds: documented priority behaviour.
    shuffled = rng.random(count) < 0.125
    t[shuffled] = rng.permuted(t[shuffled], axis=1)
    near = t[np.arange(count)[:, None], rng.integers(0, 4, (count, lanes))]
    near = np.clip(near + rng.integers(-2, 3, near.shape), lo, hi)
    x = np.where(rng.random(near.shape) < 0.5, near, rng.integers(lo, hi + 1, near.shape))
    fields = {"x": x}
    fields.update({name: t[:, k] for k, name in enumerate(_THRESHOLDS)})
    return {"i": fields}


def _decomposer_expected(p, inputs):
    i = inputs["i"]
    x = np.asarray(i["x"], np.int64)
    out = {name: np.zeros(x.shape, np.int64) for name in ("group", "side", "inlier", "outlier")}
    for beat in range(len(x)):
        thresholds = tuple(int(i[name][beat]) for name in _THRESHOLDS)
        # The unit takes any streamed thresholds: misordered ones follow the RTL's priority
        # (for ordered thresholds the groups are disjoint and priority changes nothing).
        parts = decompose(x[beat], thresholds, p["data_bits"], check_order=False)
        for name in out:
            out[name][beat] = parts[name]
    return {"o": out}


oaken_decomposer = BeatModel("oaken_decomposer", _decomposer_stimulus, _decomposer_expected)
"""contract 4: per beat, every lane's group, side and shifted value (inlier for middle elements,
outlier for inner and outer ones), against that beat's thresholds."""


def _chunk_values(rng, t, vec_len, bits):
    """One chunk: each element from the middle range, the inner range or anywhere, with a
    per-chunk outlier density of 0 to 100 %."""
    lo, hi = _x_range(bits, True)
    density = rng.choice([0.0, 0.01, 0.1, 0.5, 1.0])
    t_lo_o, t_lo_i, t_hi_i, t_hi_o = (int(v) for v in t)
    middle = rng.integers(t_lo_o, t_hi_o + 1, vec_len)
    inner = rng.integers(t_lo_i, t_hi_i + 1, vec_len)
    anywhere = rng.integers(lo, hi + 1, vec_len)
    outlier = rng.random(vec_len) < density
    return np.where(outlier, np.where(rng.random(vec_len) < 0.5, inner, anywhere), middle)


def _dequantizer_stimulus(rng, p, count):
    lanes, vec_len, bits, frac = p["lanes"], p["vec_len"], p["data_bits"], p["frac_bits"]
    t = _random_thresholds(rng, count, bits)
    hdr = {name: [] for name in _THRESHOLDS + _META}
    dense, entries, counts, lasts = [], [], [], []
    for row in t:
        chunk = quantize_vector(_chunk_values(rng, row, vec_len, bits), tuple(int(v) for v in row),
                                frac, bits, vec_len)
        for name, value in zip(_THRESHOLDS + _META, tuple(row) + tuple(chunk.meta)):
            hdr[name].append(int(value))
        dense.append(np.asarray(chunk.dense, np.int64).reshape(-1, lanes))
        coo = np.asarray(chunk.coo, np.int64)
        # COO beats packed full (the packing at which the unit keeps pace) or of random sizes
        # (0..lanes entries, empty beats included); random filler beyond `count`.
        if rng.random() < 0.5:
            sizes = [lanes] * (len(coo) // lanes) + ([len(coo) % lanes] if len(coo) % lanes
                                                    else [])
        else:
            sizes = []
            while sum(sizes) < len(coo):
                sizes.append(min(int(rng.integers(0, lanes + 1)), len(coo) - sum(sizes)))
            if rng.random() < 0.2:
                sizes.append(0)                 # a trailing empty `last` beat
        sizes = sizes or [0]                    # no outliers: one empty `last` beat
        start = 0
        for k, size in enumerate(sizes):
            beat = rng.integers(0, 256, lanes)
            beat[:size] = coo[start:start + size]
            start += size
            entries.append(beat)
            counts.append(size)
            lasts.append(int(k == len(sizes) - 1))
    return {
        "hdr": {name: np.array(values, np.int64) for name, values in hdr.items()},
        "dense": {"codes": np.concatenate(dense) if dense else np.zeros((0, lanes), np.int64)},
        "coo": {"entries": np.array(entries, np.int64).reshape(-1, lanes),
                "count": np.array(counts, np.int64), "last": np.array(lasts, np.int64)},
    }


def _dequantizer_chunks(p, inputs):
    """Split the three input streams into chunks: ``(thresholds, meta, dense beats, COO beat
    range)`` per header beat, checking that the streams agree."""
    windows = p["vec_len"] // p["lanes"]
    hdr, dense, coo = inputs["hdr"], inputs["dense"], inputs["coo"]
    chunks = len(np.asarray(hdr["t_lo_o"]))
    codes = np.asarray(dense["codes"], np.int64)
    if len(codes) != chunks * windows:
        raise ValueError(f"{chunks} hdr beats need {chunks * windows} dense beats "
                         f"(vec_len / lanes = {windows} per chunk), not {len(codes)}")
    ends = np.flatnonzero(np.asarray(coo["last"])) + 1
    if len(ends) != chunks or (chunks and ends[-1] != len(np.asarray(coo["last"]))):
        raise ValueError(f"{chunks} hdr beats need {chunks} COO runs ending at `last` and no "
                         f"COO beat after the final one, not {len(ends)} runs in "
                         f"{len(np.asarray(coo['last']))} beats")
    starts = np.concatenate(([0], ends[:-1])).astype(int)
    for c in range(chunks):
        thresholds = tuple(int(hdr[name][c]) for name in _THRESHOLDS)
        meta = tuple(int(hdr[name][c]) for name in _META)
        yield thresholds, meta, codes[c * windows:(c + 1) * windows], range(starts[c], ends[c])


def _dequantizer_expected(p, inputs):
    lanes = p["lanes"]
    entries = np.asarray(inputs["coo"]["entries"], np.int64)
    count = np.minimum(np.asarray(inputs["coo"]["count"], np.int64), lanes)
    out = []
    for thresholds, meta, codes, coo_beats in _dequantizer_chunks(p, inputs):
        coo = np.concatenate([entries[b, :count[b]] for b in coo_beats]) if len(coo_beats) \
            else np.zeros(0, np.int64)
        x = dequantize_vector(codes.ravel(), coo, meta, thresholds, p["frac_bits"],
                              p["data_bits"], check_order=False)
        out.append(x.reshape(-1, lanes))
    return {"o": {"x": np.concatenate(out) if out else np.zeros((0, lanes), np.int64)}}


def _dequantizer_order(p, inputs):
    """Per chunk: its header, its COO beats, then its dense beats. With the header and every
    COO entry of the chunk in place, each dense beat issues at once, so the unit never waits
    for a beat of another stream."""
    order = []
    for _t, _m, codes, coo_beats in _dequantizer_chunks(p, inputs):
        order += ["hdr"] + ["coo"] * len(coo_beats) + ["dense"] * len(codes)
    return np.array(order, dtype=str)


oaken_dequantizer = BeatModel("oaken_dequantizer", _dequantizer_stimulus,
                              _dequantizer_expected, order=_dequantizer_order)
"""contract 4: per chunk (one ``hdr`` beat, ``vec_len / lanes`` ``dense`` beats, COO beats up to
``last``), ``vec_len / lanes`` output beats decoded by
:func:`golden.oaken.online.dequantize_vector`. Stimulus chunks come from the golden encoder
:func:`golden.oaken.online.quantize_vector`; ``count`` is the number of chunks. Malformed COO
entries raise ValueError (the unit's values are unspecified there)."""


# --------------------------------------------------------------------------- oaken_quantizer


def _coo_full_beats(coo, lanes):
    """A chunk's COO entries as the quantizer packs them: ``(entries, count, last)`` rows, every
    beat full but the final one, one empty ``last`` beat for a chunk without outliers;
    entries beyond ``count`` are 0."""
    coo = np.asarray(coo, np.int64)
    beats = max(1, -(-len(coo) // lanes))
    entries = np.zeros(beats * lanes, np.int64)
    entries[:len(coo)] = coo
    count = np.full(beats, lanes, np.int64)
    count[-1] = len(coo) - (beats - 1) * lanes
    last = (np.arange(beats) == beats - 1).astype(np.int64)
    return entries.reshape(beats, lanes), count, last


def _quantizer_stimulus(rng, p, count):
    lanes, vec_len, bits = p["lanes"], p["vec_len"], p["data_bits"]
    windows = vec_len // lanes
    t = _random_thresholds(rng, count, bits)
    xs, ts = [], []
    for row in t:
        xs.append(_chunk_values(rng, row, vec_len, bits).reshape(windows, lanes))
        beat_t = np.tile(row, (windows, 1))
        kind = rng.random()
        if kind < 1 / 16:                           # misordered: coded in priority order
            beat_t[:] = rng.permuted(row)
        elif kind < 2 / 16 and windows > 1:         # later beats differ: the first beat's count
            beat_t[1:] = _random_thresholds(rng, windows - 1, bits)
        ts.append(beat_t)
    x = np.concatenate(xs) if xs else np.zeros((0, lanes), np.int64)
    t_beats = np.concatenate(ts) if ts else np.zeros((0, 4), np.int64)
    fields = {"x": x}
    fields.update({name: t_beats[:, k] for k, name in enumerate(_THRESHOLDS)})
    return {"i": fields}


def _quantizer_expected(p, inputs):
    lanes, vec_len, bits, frac = p["lanes"], p["vec_len"], p["data_bits"], p["frac_bits"]
    windows = vec_len // lanes
    i = inputs["i"]
    x = np.asarray(i["x"], np.int64).reshape(-1, lanes)
    chunks = len(x) // windows
    if len(x) != chunks * windows:
        raise ValueError(f"{len(x)} input beats are not whole chunks of vec_len / lanes = "
                         f"{windows} beats")
    hdr = {name: np.zeros(chunks, np.int64) for name in _THRESHOLDS + _META}
    dense, entries, counts, lasts = [], [], [], []
    for c in range(chunks):
        first = c * windows                          # the chunk's thresholds: its first beat's
        thresholds = tuple(int(i[name][first]) for name in _THRESHOLDS)
        # Misordered thresholds are coded in the decomposer's priority order, as the unit does.
        chunk = quantize_vector(x[first:first + windows].ravel(), thresholds, frac, bits,
                                vec_len, check_order=False)
        for name, value in zip(_THRESHOLDS + _META, thresholds + tuple(chunk.meta)):
            hdr[name][c] = value
        dense.append(np.asarray(chunk.dense, np.int64).reshape(windows, lanes))
        beat_entries, beat_count, beat_last = _coo_full_beats(chunk.coo, lanes)
        entries.append(beat_entries)
        counts.append(beat_count)
        lasts.append(beat_last)

    def joined(parts, shape):
        return np.concatenate(parts) if parts else np.zeros(shape, np.int64)

    return {
        "hdr": hdr,
        "dense": {"codes": joined(dense, (0, lanes))},
        "coo": {"entries": joined(entries, (0, lanes)), "count": joined(counts, (0,)),
                "last": joined(lasts, (0,))},
    }


oaken_quantizer = BeatModel("oaken_quantizer", _quantizer_stimulus, _quantizer_expected)
"""contract 8: per chunk of ``vec_len / lanes`` input beats, :func:`golden.oaken.online.quantize_vector`
of its values with the thresholds of its first beat (misordered ones: the same coding of the
groups in the decomposer's priority order), as one ``hdr`` beat, ``vec_len / lanes`` ``dense``
beats and COO beats packed full (``lanes`` entries on every beat but the last, entries beyond
``count`` 0, one empty ``last`` beat for a chunk without outliers). The stimulus draws random
chunks at 0 / 1 / 10 / 50 / 100 % outliers (equal thresholds included), one in 16 with
misordered thresholds and one in 16 whose later beats carry other thresholds."""
