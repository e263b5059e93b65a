"""Oaken stimulus: random chunks at a chosen outlier density, encoded by the golden model and
cut into the ``oaken_dequantizer``'s ``hdr`` / ``dense`` / ``coo`` beats.

Used by the cocotb benches and by ``tests/``; everything is drawn from a NumPy generator, so a
seed reproduces a run.
"""

import numpy as np

from qllm_cores.golden.oaken import dequantize_vector, quantize_vector

__all__ = ["random_thresholds", "random_chunk_values", "encode_chunks", "coo_beats",
           "chunk_streams"]


def _signed_range(bits):
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def random_thresholds(rng, data_bits, *, need_middle=False):
    """Four ordered thresholds; about one draw in four has some of them equal (empty groups).

    Spans are drawn on a log scale so that narrow and wide groups (``d`` below and above 1)
    both occur. With ``need_middle`` the middle range is never empty.
    """
    lo, hi = _signed_range(data_bits)
    while True:
        centre = int(rng.integers(lo // 2, hi // 2 + 1))
        widths = np.exp2(rng.uniform(0, data_bits - 2, 4)).astype(np.int64)
        t_lo_i = centre - int(widths[0]) // 2
        t_hi_i = centre + int(widths[1]) // 2
        t_lo_o = t_lo_i - int(widths[2])
        t_hi_o = t_hi_i + int(widths[3])
        t = [t_lo_o, t_lo_i, t_hi_i, t_hi_o]
        if rng.random() < 0.25:               # equal thresholds: empty middle or inner parts
            pick = rng.integers(0, 3)
            if pick == 0:
                t[1] = t[2] = centre              # one-value inner group
            elif pick == 1:
                t[0] = t[1]                       # no lower middle
            else:
                t[3] = t[2]                       # no upper middle
        t = [int(np.clip(v, lo, hi)) for v in t]
        if need_middle and t[0] == t[1] and t[2] == t[3]:
            continue
        return tuple(t)


def random_chunk_values(rng, thresholds, density, vec_len, data_bits):
    """One chunk with ``Binomial(vec_len, density)`` outliers (inner or outer), the rest middle.

    Where a group's range is empty (equal thresholds, or outer thresholds at the data range's
    ends) its elements fall back to another group, so the realised density can differ; a few
    elements sit exactly on the thresholds and on the data range's ends (in their own group).
    """
    lo, hi = _signed_range(data_bits)
    t_lo_o, t_lo_i, t_hi_i, t_hi_o = thresholds
    n_out = int(rng.binomial(vec_len, density))
    is_outlier = np.zeros(vec_len, bool)
    is_outlier[rng.choice(vec_len, n_out, replace=False)] = True

    def uniform(a, b):          # inclusive, a <= b
        return rng.integers(a, b + 1, vec_len)

    inner = uniform(t_lo_i, t_hi_i)
    outer_lo = uniform(lo, t_lo_o - 1) if t_lo_o > lo else inner
    outer_hi = uniform(t_hi_o + 1, hi) if t_hi_o < hi else inner
    mid_lo = uniform(t_lo_o, t_lo_i - 1) if t_lo_o < t_lo_i else None
    mid_hi = uniform(t_hi_i + 1, t_hi_o) if t_hi_i < t_hi_o else None
    if mid_lo is None and mid_hi is None:
        middle = inner
    else:
        middle = np.where(rng.random(vec_len) < 0.5, mid_lo if mid_lo is not None else mid_hi,
                          mid_hi if mid_hi is not None else mid_lo)
    outer = np.where(rng.random(vec_len) < 0.5, outer_lo, outer_hi)
    outlier = np.where(rng.random(vec_len) < 0.5, inner, outer)
    x = np.where(is_outlier, outlier, middle)
    # Corner values, at about 5 % of the positions, without changing any element's group:
    # outliers may sit on the inner thresholds, on 0 (if inner) or on the range ends (if outer);
    # middle elements on the outer thresholds (which are middle when the middle side exists).
    spots = rng.random(vec_len) < 0.05
    outlier_corners = [v for v in (t_lo_i, t_hi_i, 0, lo, hi)
                       if t_lo_i <= v <= t_hi_i or v < t_lo_o or v > t_hi_o]
    middle_corners = ([t_lo_o] if mid_lo is not None else []) + (
        [t_hi_o] if mid_hi is not None else [])
    x = np.where(spots & is_outlier, rng.choice(outlier_corners, vec_len), x)
    if middle_corners:
        x = np.where(spots & ~is_outlier, rng.choice(middle_corners, vec_len), x)
    if density == 0 and mid_lo is None and mid_hi is None:
        raise ValueError("density 0 needs thresholds with a non-empty middle range")
    return np.clip(x, lo, hi).astype(np.int64)


def encode_chunks(rng, count, density, *, vec_len, data_bits, frac_bits):
    """``count`` random chunks, each with its own thresholds: a list of
    ``(thresholds, OakenChunk, expected x')`` with the golden encoder and decoder."""
    chunks = []
    for _ in range(count):
        thresholds = random_thresholds(rng, data_bits, need_middle=density == 0)
        x = random_chunk_values(rng, thresholds, density, vec_len, data_bits)
        chunk = quantize_vector(x, thresholds, frac_bits, data_bits, vec_len)
        expected = dequantize_vector(chunk.dense, chunk.coo, chunk.meta, thresholds, frac_bits,
                                     data_bits)
        chunks.append((thresholds, chunk, expected))
    return chunks


def coo_beats(entries, lanes, rng=None):
    """Cut one chunk's COO entries into beats: ``[(entries, last)]``.

    Without ``rng`` every beat but the last is full (``lanes`` entries), the packing at which
    the dequantizer keeps pace; with ``rng`` beat sizes are random (0..lanes, empty beats
    included). A chunk without entries gets one empty beat with ``last``.
    """
    entries = [int(e) for e in entries]
    sizes = []
    remaining = len(entries)
    while remaining:
        size = lanes if rng is None else int(rng.integers(0, lanes + 1))
        size = min(size, remaining)
        sizes.append(size)
        remaining -= size
    if rng is not None and rng.random() < 0.2:
        sizes.append(0)                        # a trailing empty last beat is legal too
    if not sizes:
        sizes = [0]
    beats, start = [], 0
    for k, size in enumerate(sizes):
        beats.append((entries[start:start + size], k == len(sizes) - 1))
        start += size
    return beats


def chunk_streams(chunks, lanes, rng, *, random_packing=False):
    """Field dicts for the three input streams and the expected output, for a list of chunks.

    ``chunks`` items are ``(thresholds, dense, coo entries, meta)`` or the triples of
    :func:`encode_chunks` (``(thresholds, OakenChunk, expected)``); filler entries beyond
    ``count`` are random, which the unit must ignore.
    """
    names = ("t_lo_o", "t_lo_i", "t_hi_i", "t_hi_o")
    meta_names = ("mid_min", "mid_d", "in_min", "in_d", "out_min", "out_d")
    hdr = {name: [] for name in names + meta_names}
    dense, coo_entries, coo_count, coo_last = [], [], [], []
    for thresholds, chunk, _expected in chunks:
        for name, value in zip(names, thresholds):
            hdr[name].append(value)
        for name, value in zip(meta_names, chunk.meta):
            hdr[name].append(value)
        dense.append(np.asarray(chunk.dense, np.int64).reshape(-1, lanes))
        for entries, last in coo_beats(chunk.coo, lanes, rng if random_packing else None):
            filler = rng.integers(0, 256, lanes)
            filler[:len(entries)] = entries
            coo_entries.append(filler)
            coo_count.append(len(entries))
            coo_last.append(int(last))
    streams = {
        "hdr": {name: np.array(values, np.int64) for name, values in hdr.items()},
        "dense": {"codes": np.concatenate(dense)},
        "coo": {"entries": np.array(coo_entries, np.int64),
                "count": np.array(coo_count, np.int64),
                "last": np.array(coo_last, np.int64)},
    }
    expected = {"x": np.concatenate([np.asarray(e, np.int64).reshape(-1, lanes)
                                     for _t, _c, e in chunks])}
    return streams, expected
