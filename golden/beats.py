"""Beat-level golden adapters: a unit's input beats -> the output beats its golden model gives.

One :class:`BeatModel` per unit family, named after the unit, shared by the cocotb benches
(``verif/tb_*.py``), the board host and the tests, so that they cannot disagree on what a unit
must output. ``gen.registry`` names each unit's adapter as ``"golden.beats:<name>"``
(``UnitSpec.golden``; ``verif.bench.golden_model(unit)`` resolves it).

Beats are field dicts: ``{port: {field: array}}``, fields named as in the unit's payload layout,
the beat on axis 0 (an array field of L lanes is an array ``(beats, L)``, an array of arrays
``(beats, outer, inner)``). Parameters are the unit's resolved constructor parameters
(:func:`gen.registry.resolve_params`, or a manifest's ``params``).

Adapters and the units they serve:

* ``kllm_concat``: ``kllm_concat``;
* ``kllm_idx_counter``: ``kllm_idx_counter``;
* ``orizuru``: ``orizuru``, ``orizuru_scan``, ``orizuru_sortnet``;
* ``oaken_decomposer``: ``oaken_decomposer``;
* ``oaken_dequantizer``: ``oaken_dequantizer`` (three input streams: it has an ``order``);
* ``p3_pe``: ``p3_pe``;
* ``p3_pcu``: ``p3_pcu``;
* ``fp16_mac``: ``fp16_mac``;
* ``fp16_pcu``: ``fp16_pcu``;
* ``accllm_mul``: ``accllm_dsp_mul``, ``accllm_plain_mul``;
* ``accllm_sparse_selector``: ``accllm_sparse_selector``.

Pure NumPy on top of the golden models of this package; nothing here looks at the RTL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .accllm import run_sums, select_by_index
from .fp16_mac import fp16_mac_run, fp32_match
from .kllm import concat_indices, counter_width, index_distributions, wrap_counts
from .oaken import decompose, dequantize_vector, quantize_vector
from .orizuru import beat_lanes, orizuru_beats
from .p3 import pcu_run, pe_run

__all__ = [
    "BeatModel", "MODELS",
    "kllm_concat", "kllm_idx_counter", "orizuru", "oaken_decomposer", "oaken_dequantizer",
    "p3_pe", "p3_pcu", "fp16_mac", "fp16_pcu", "accllm_mul", "accllm_sparse_selector",
]


@dataclass(frozen=True)
class BeatModel:
    """Stimulus and expected output beats of a unit family.

    Attributes
    ----------
    name : str
        The adapter's name (its attribute name in this module).
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


def _x_range(bits, signed):
    """Smallest and largest value of a ``bits``-bit field."""
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _pack_bits(bits):
    """Pack a (beats, n) 0/1 array into one integer per beat, bit j = column j (int64 up to
    62 columns, Python ints beyond)."""
    bits = np.asarray(bits, np.int64)
    n = bits.shape[1]
    if n <= 62:
        return bits @ (np.int64(1) << np.arange(n, dtype=np.int64))
    weights = np.array([1 << j for j in range(n)], dtype=object)
    return bits.astype(object) @ weights


def _unpack_bits(words, n):
    """The inverse of :func:`_pack_bits`: (beats,) integers -> (beats, n) bool."""
    words = np.asarray(words)
    if n <= 62:                 # bits 0..61: int64 holds every word (object arrays included)
        return ((words.astype(np.int64)[:, None] >> np.arange(n)) & 1).astype(bool)
    return np.array([[(int(w) >> j) & 1 for j in range(n)] for w in words.tolist()],
                    dtype=bool).reshape(len(words), n)


def _runs_ending_at_last(count, rng, probability):
    """A ``last`` column of ``count`` beats, 1 with ``probability`` and on the final beat."""
    last = (rng.random(count) < probability).astype(np.int64)
    last[-1:] = 1
    return last


# --------------------------------------------------------------------------- kllm_concat


def _kllm_concat_stimulus(rng, p, count):
    return {"i": {"a": rng.integers(0, 1 << p["a_bits"], (count, p["lanes"])),
                  "b": rng.integers(0, 1 << p["b_bits"], (count, p["lanes"]))}}


def _kllm_concat_expected(p, inputs):
    i = inputs["i"]
    return {"o": {"y": concat_indices(i["a"], i["b"], p["a_bits"], p["b_bits"])}}


kllm_concat = BeatModel("kllm_concat", _kllm_concat_stimulus, _kllm_concat_expected)
"""SPEC 1: ``y[j] = (a[j] << b_bits) | b[j]``, one output beat per input beat."""


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
"""SPEC 2: after every ``last`` beat, the ``2**idx_bits`` bins of the reduction's histogram of
unmasked indices (``ik``: weighted), ``last`` on the final bin; counts wrap at the counter width
:func:`golden.kllm.counter_width` gives for ``max_len`` (beats after the final ``last`` give
nothing)."""


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
"""SPEC 3: ``k`` beats per vector (the j-th largest and smallest by IEEE totalOrder, the mask on
the k-th); a vector of n > 1024 values is ``n / 1024`` input beats
(:func:`golden.orizuru.beat_lanes`)."""


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
"""SPEC 4: per beat, every lane's group, side and shifted value (inlier for middle elements,
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
"""SPEC 4: per chunk (one ``hdr`` beat, ``vec_len / lanes`` ``dense`` beats, COO beats up to
``last``), ``vec_len / lanes`` output beats decoded by :func:`golden.oaken.dequantize_vector`.
Stimulus chunks come from the golden encoder :func:`golden.oaken.quantize_vector`; ``count`` is
the number of chunks. Malformed COO entries raise ValueError (the unit's values are unspecified
there)."""


# --------------------------------------------------------------------------- p3_pe


_P3_FIELDS = ("act", "wgt", "act_fmt", "wgt_fmt", "sv_sel", "zp", "first", "last")


def _p3_pe_stimulus(rng, p, count):
    last = _runs_ending_at_last(count, rng, 0.25)
    first = np.concatenate(([1], last[:-1]))
    first = np.where(rng.random(count) < 0.05, 0, first)        # some dot products carry on
    first[:1] = 1
    return {"i": {"act": rng.integers(0, 256, (count, 4)), "wgt": rng.integers(0, 16, (count, 4)),
                  "act_fmt": rng.integers(0, 2, count), "wgt_fmt": rng.integers(0, 2, count),
                  "sv_sel": rng.integers(0, 4, count), "zp": rng.integers(0, 16, count),
                  "first": first, "last": last}}


def _p3_pe_expected(p, inputs):
    i = inputs["i"]
    out = pe_run(*(i[name] for name in _P3_FIELDS))
    return {"o": {name: np.asarray(value, np.int64) for name, value in out.items()}}


p3_pe = BeatModel("p3_pe", _p3_pe_stimulus, _p3_pe_expected)
"""SPEC 5: one beat per ``last`` (``acc``, sticky ``overflow`` and ``nan``)."""


# --------------------------------------------------------------------------- p3_pcu


def _p3_act_codes(rng, act_fmt):
    """Activation codes (beats, 4) for per-beat formats ``act_fmt``: uniform, with extra NaNs
    (E4M3), largest exponents and subnormals (as ``verif/tb_p3_pe.py``'s ``random_codes``)."""
    shape = (len(act_fmt), 4)
    codes = rng.integers(0, 256, shape)
    kind = rng.random(shape)
    e4m3 = np.broadcast_to(np.asarray(act_fmt)[:, None] == 0, shape)
    nan = np.where(rng.random(shape) < 0.5, 0x7F, 0xFF)
    big = np.where(e4m3, (rng.integers(0, 2, shape) << 7) | 0x78 | rng.integers(0, 7, shape),
                   0xF0 | rng.integers(0, 16, shape))
    sub = np.where(e4m3, (rng.integers(0, 2, shape) << 7) | rng.integers(0, 8, shape),
                   rng.integers(0, 16, shape))
    codes = np.where((kind < 0.03) & e4m3, nan, codes)
    codes = np.where((kind >= 0.03) & (kind < 0.15), big, codes)
    return np.where((kind >= 0.15) & (kind < 0.25), sub, codes)


def _p3_pcu_stimulus(rng, p, count):
    pes, reuse = p["pes"], p["reuse"]
    slot, column, first, last, column_group, hot = [], [], [], [], [], []
    group = -1
    while len(slot) < count:
        group, start = group + 1, len(column_group)
        hot.append(False)
        if reuse > 1 and rng.random() < 0.1:
            # Irregular slot order: 1..8 beats of random slots, a weight column each; each slot's
            # first and last beat in the run carry its first and last.
            slots = rng.integers(0, reuse, int(rng.integers(1, 9))).tolist()
            for k, s in enumerate(slots):
                slot.append(s)
                column.append(start + k)
                first.append(s not in slots[:k])
                last.append(s not in slots[k + 1:])
            column_group += [group] * len(slots)
            continue
        # A dot product of 1..16 weight columns (one in 50: 17..128; one in 50 a "hot" one of
        # 100..160 columns of large same-sign products that overflows), each column `reuse`
        # beats (slots 0, 1, ... sharing the column); one in 20 carries on (no first).
        kind = rng.random()
        hot[-1] = bool(kind < 0.02)
        length = int(rng.integers(100, 161) if hot[-1] else rng.integers(17, 129)
                     if kind < 0.04 else rng.integers(1, 17))
        carry = rng.random() < 0.05
        for k in range(length):
            for s in range(reuse):
                slot.append(s)
                column.append(start + k)
                first.append(k == 0 and not carry)
                last.append(k == length - 1)
        column_group += [group] * length
    slot, column = np.array(slot[:count], np.int64), np.array(column[:count], np.int64)
    first, last = np.array(first[:count], np.int64), np.array(last[:count], np.int64)
    for s in range(reuse):                          # every slot opens with first, ends on last
        beats = np.flatnonzero(slot == s)
        first[beats[:1]] = 1
        last[beats[-1:]] = 1
    # Formats, sv_sel and zp per dot product (per weight column in one group of ten), shared by
    # the beats of a column; weight codes per column, one in ten the special value code 8.
    columns, groups = len(column_group), group + 1
    group_of = np.array(column_group, np.int64)
    mixed = (rng.random(groups) < 0.1)[group_of]

    def per_column(hi, shape=()):
        per_group = rng.integers(0, hi, (groups,) + shape)[group_of]
        each = rng.integers(0, hi, (columns,) + shape)
        return np.where(mixed.reshape((columns,) + (1,) * len(shape)), each, per_group)

    act_fmt, wgt_fmt = per_column(2), per_column(2)
    sv_sel, zp = per_column(4, (pes,)), per_column(16, (pes,))
    wgt = np.where(rng.random((columns, pes, 4)) < 0.1, 8, rng.integers(0, 16, (columns, pes, 4)))
    # Hot columns: E4M3 x BitMoD, the special value +-8 (sv_sel 2 or 3 per PE) in 7 lanes of 8.
    hot_col = np.array(hot, bool)[group_of]
    act_fmt[hot_col], wgt_fmt[hot_col] = 0, 0
    sv_sel[hot_col] = 2 + rng.integers(0, 2, (1, pes))
    wgt[hot_col] = np.where(rng.random((int(hot_col.sum()), pes, 4)) < 0.875, 8, 0)
    act = _p3_act_codes(rng, act_fmt[column])
    hot_beat = hot_col[column]
    act[hot_beat] = 0x78 | rng.integers(0, 7, (int(hot_beat.sum()), 4))    # +256..+448
    return {"i": {"act": act, "wgt": wgt[column].reshape(-1, pes, 4),
                  "act_fmt": act_fmt[column], "wgt_fmt": wgt_fmt[column],
                  "sv_sel": sv_sel[column].reshape(-1, pes), "zp": zp[column].reshape(-1, pes),
                  "first": first, "last": last, **({"slot": slot} if reuse > 1 else {})}}


def _p3_pcu_expected(p, inputs):
    i = inputs["i"]
    wgt = np.asarray(i["wgt"])
    if wgt.ndim != 3 or wgt.shape[1:] != (p["pes"], 4):
        raise ValueError(f"wgt must have shape (beats, pes, 4) with pes = {p['pes']}, not "
                         f"{wgt.shape}")
    out = pcu_run(*(i[name] for name in _P3_FIELDS), i.get("slot"), reuse=p["reuse"])
    if p["reuse"] == 1:
        del out["slot"]
    return {"o": {name: np.asarray(value, np.int64) for name, value in out.items()}}


p3_pcu = BeatModel("p3_pcu", _p3_pcu_stimulus, _p3_pcu_expected)
"""SPEC 9: ``pes`` PE lanes sharing ``act``; one beat per ``last`` in the order of the ``last``
beats: ``acc``, ``overflow``, ``nan`` (each (beats, pes)) and the ``slot`` of that ``last`` beat
(:func:`golden.p3.pcu_run`: each slot is an independent accumulator set, any slot order).
At ``reuse`` 1 there is no ``slot`` field (SPEC 9's ``ceil(log2 reuse)`` bits: none), in
the input or the output beats. The stimulus: ``count`` beats of dot products of random length,
formats, ``sv_sel`` and ``zp`` per dot product (one in ten per weight column), activation codes
biased to NaN, largest exponents and subnormals, one dot product in 50 long and one in 50 long
with large same-sign products (overflow); at ``reuse`` 2 weight columns of slot 0 / slot 1 beat
pairs sharing ``wgt``, ``sv_sel``, ``zp`` and formats (``first``/``last`` on both), and one run
in ten of random slots with ``first``/``last`` per slot."""


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
"""SPEC 5 (baseline): one binary32 pattern per ``last``; ``acc`` compares NaN to any NaN
(:func:`golden.fp16_mac.fp32_match`). With the parameter ``acc="fp16"`` (SPEC 5's second
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
"""HBM-PIM PCU baseline of SPEC 9: ``lanes`` ``fp16_mac`` lanes sharing ``act``, lane ``j``
over ``(act, wgt[j])``; one beat per ``last``, ``acc`` (beats, lanes) of binary32 patterns,
compared element by element with :func:`golden.fp16_mac.fp32_match` (NaN equals any NaN)."""


# --------------------------------------------------------------------------- accllm


_W_BITS = {"w8": 8, "w4": 4, "w2": 2}
_PRODUCTS = {"p1": ("x", "w1"), "p2": ("x", "w2"), "p11": ("x1", "w1"), "p22": ("x2", "w2"),
             "p12": ("x1", "w2"), "p21": ("x2", "w1")}


def _mul_stimulus(rng, p, count):
    x_lo, x_hi = _x_range(p["x_bits"], p["x_signed"])
    w_lo, w_hi = _x_range(_W_BITS[p["mode"]], True)
    names = ["x1", "x2", "w1", "w2"] if p["mode"] == "w2" else ["x", "w1", "w2"]
    fields = {}
    for name in names:
        lo, hi = (x_lo, x_hi) if name.startswith("x") else (w_lo, w_hi)
        # A third of the values at the ends of the range (the packing's borrow corners).
        fields[name] = np.where(rng.random(count) < 1 / 3, rng.choice([lo, hi], count),
                                rng.integers(lo, hi + 1, count))
    depth = p.get("acc_depth", 1)
    if depth > 1:
        fields["last"] = _runs_ending_at_last(count, rng, 1 / depth)
    return {"i": fields}


def _mul_expected(p, inputs):
    i = {name: np.asarray(value, np.int64) for name, value in inputs["i"].items()}
    if p["mode"] == "w2":
        names = ["p11", "p22"] + (["p12", "p21"] if p.get("cross_products") else [])
    else:
        names = ["p1", "p2"]
    products = {name: i[_PRODUCTS[name][0]] * i[_PRODUCTS[name][1]] for name in names}
    depth = p.get("acc_depth", 1)
    return {"o": products if depth == 1 else run_sums(products, i["last"], depth)}


accllm_mul = BeatModel("accllm_mul", _mul_stimulus, _mul_expected)
"""SPEC 6: the exact products, one beat per input beat (``p1 = x*w1``, ``p2 = x*w2``; mode w2
``p11``, ``p22`` and, with ``cross_products``, ``p12``, ``p21``); with ``acc_depth`` > 1 one sum
per run (a run ends at ``last`` or at its ``acc_depth``-th beat) and that beat's ``last``."""


def _sparse_selector_stimulus(rng, p, count):
    lo, hi = _x_range(p["x_bits"], p["x_signed"])
    shape = (count, p["rows"], p["groups"])
    # Half the beats from valid 2:4 masks (idx1 < idx2), half any indices.
    pairs = np.array([(a, b) for a in range(4) for b in range(a + 1, 4)])
    masked = pairs[rng.integers(0, len(pairs), shape)]
    anyway = rng.integers(0, 4, shape + (2,))
    idx = np.where(rng.random(count)[:, None, None, None] < 0.5, masked, anyway)
    return {"i": {"x": rng.integers(lo, hi + 1, (count, 4 * p["groups"])),
                  "idx1": idx[..., 0], "idx2": idx[..., 1]}}


def _sparse_selector_expected(p, inputs):
    i = inputs["i"]
    x = np.asarray(i["x"], np.int64)
    x1, x2 = select_by_index(x[:, None, :], i["idx1"], i["idx2"])
    return {"o": {"x1": x1, "x2": x2}}


accllm_sparse_selector = BeatModel("accllm_sparse_selector", _sparse_selector_stimulus,
                                   _sparse_selector_expected)
"""AccLLM Fig. 10(c): per row and group, ``x1 = x[4g + idx1]`` and ``x2 = x[4g + idx2]`` (any
indices, equal or in either order, are selected as they are)."""


#: Every adapter by name.
MODELS = {model.name: model for model in (
    kllm_concat, kllm_idx_counter, orizuru, oaken_decomposer, oaken_dequantizer, p3_pe,
    p3_pcu, fp16_mac, fp16_pcu, accllm_mul, accllm_sparse_selector)}


# --------------------------------------------------------------------------- kllm_column

from .kllm import column_outputs, load_codebook  # noqa: E402  (appended section)

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
"""SPEC 7: one ``o`` beat per reduction, ``y`` (binary16, every NaN 0x7E00) and ``overflow``
(:func:`golden.kllm.column_outputs`). Every ``cb`` beat is applied
(:func:`golden.kllm.load_codebook`, from the all +0.0 codebook of reset) before the first
reduction: the order the adapter's ``order`` gives and the unit's rule (a load is taken between
reductions, and ``i`` waits while a load is partly taken). The stimulus is one load and
``count`` reductions (the first all masked, see :func:`_column_stimulus`) and never overflows;
where ``overflow`` is set the unit's ``y`` is unspecified and the adapter's ``y`` (the weighted
sum of the exact counts) must not be compared. The bench (``verif/tb_kllm_column.py``) drives
reloads, overflows and long reductions itself."""

MODELS[kllm_column.name] = kllm_column
__all__.append("kllm_column")


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
"""SPEC 8: per chunk of ``vec_len / lanes`` input beats, :func:`golden.oaken.quantize_vector`
of its values with the thresholds of its first beat (misordered ones: the same coding of the
groups in the decomposer's priority order), as one ``hdr`` beat, ``vec_len / lanes`` ``dense``
beats and COO beats packed full (``lanes`` entries on every beat but the last, entries beyond
``count`` 0, one empty ``last`` beat for a chunk without outliers). The stimulus draws random
chunks at 0 / 1 / 10 / 50 / 100 % outliers (equal thresholds included), one in 16 with
misordered thresholds and one in 16 whose later beats carry other thresholds."""

__all__.append("oaken_quantizer")
MODELS[oaken_quantizer.name] = oaken_quantizer


# --------------------------------------------------------------------------- accllm_pe

from .accllm import pe_products as accllm_pe_products  # noqa: E402  (appended section)
from .accllm import pe_run as accllm_pe_run  # noqa: E402

_PE_FIELDS = ("mode", "x1", "x2", "w1", "w2", "kv4", "zp", "first", "last")
#: Beats of a "hot" dot product at most (a run of extreme products towards the accumulator
#: limit; it reaches the limit where ``acc_bits`` is small enough).
_PE_HOT_BEATS = 400


def _pe_x(rng, p, n):
    """Activations, a third of them at the ends of the range (the B-port corner of mode w2)."""
    lo, hi = _x_range(p["x_bits"], p["x_signed"])
    corners = np.array([lo, lo + 1, -1 if p["x_signed"] else 1, 0, hi])
    return np.where(rng.random(n) < 1 / 3, rng.choice(corners, n), rng.integers(lo, hi + 1, n))


def _pe_hot(rng, p):
    """One dot product repeating an extreme product pair in one mode (w8, or w4 with a KV4
    code at a zero point's distance) until the accumulator range is left, or for
    :data:`_PE_HOT_BEATS` beats where ``acc_bits`` needs more; its length is moved by -2..2
    beats around the limit (so that runs just inside the range occur too)."""
    lo, hi = _x_range(p["x_bits"], p["x_signed"])
    mode = int(rng.choice([0, 0, 1]))
    x = int(rng.choice([lo, hi]))
    if mode == 0:
        w1, w2 = (int(v) for v in rng.choice([-128, 127], 2))
        kv4, zp = 0, 0
    else:
        kv4, zp = 1, int(rng.choice([0, 15]))
        w1 = w2 = 15 - zp                            # q - zp = +15 or -15
    t1, t2 = accllm_pe_products(mode, x, x, w1, w2, kv4, zp, p["x_bits"], p["x_signed"])
    top = max(abs(int(t1)), abs(int(t2)), 1)
    need = (1 << (p["acc_bits"] - 1)) // top + 1     # beats to leave the range (about)
    n = max(1, min(_PE_HOT_BEATS, need + int(rng.integers(-2, 3))))
    return {"mode": np.full(n, mode), "x1": np.full(n, x), "x2": _pe_x(rng, p, n),
            "w1": np.full(n, w1), "w2": np.full(n, w2), "kv4": np.full(n, kv4),
            "zp": np.full(n, zp)}


def _accllm_pe_stimulus(rng, p, count):
    """``count`` dot products (``count`` is the number of ``last`` beats)."""
    parts, first, last = [], [], []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.02:                              # hot: towards or past the limit
            part = _pe_hot(rng, p)
            n = len(part["mode"])
        else:
            n = int(rng.integers(17, 129) if kind < 0.06 else rng.integers(1, 17))
            # Half the dot products in one mode throughout, half with a mode per beat.
            mode = (np.full(n, rng.integers(0, 3)) if rng.random() < 0.5
                    else rng.integers(0, 3, n))
            part = {"mode": mode, "x1": _pe_x(rng, p, n), "x2": _pe_x(rng, p, n),
                    # Any 8-bit pattern: modes w4 and w2 must ignore the bits above theirs.
                    "w1": rng.integers(-128, 128, n), "w2": rng.integers(-128, 128, n),
                    "kv4": rng.integers(0, 2, n), "zp": rng.integers(0, 16, n)}
        parts.append(part)
        f = np.zeros(n, np.int64)
        f[0] = rng.random() >= 0.05                  # one in 20 carries on (no first)
        first.append(f)
        last.append((np.arange(n) == n - 1).astype(np.int64))
    fields = {name: np.concatenate([part[name] for part in parts]).astype(np.int64)
              for name in _PE_FIELDS[:7]}
    fields["first"] = np.concatenate(first)
    fields["first"][:1] = 1
    fields["last"] = np.concatenate(last)
    return {"i": fields}


def _accllm_pe_expected(p, inputs):
    i = inputs["i"]
    out = accllm_pe_run(*(i[name] for name in _PE_FIELDS), acc_bits=p["acc_bits"],
                 x_bits=p["x_bits"], x_signed=p["x_signed"])
    return {"o": {name: np.asarray(value, np.int64) for name, value in out.items()}}


accllm_pe = BeatModel("accllm_pe", _accllm_pe_stimulus, _accllm_pe_expected)
"""SPEC 10: one ``o`` beat per ``last``: ``s1``, ``s2`` (the sums since ``first`` of each
beat's own mode's products, modulo ``2^acc_bits``) and the sticky ``overflow``
(:func:`golden.accllm.pe_run`). The stimulus is ``count`` dot products (``count`` ``last``
beats): 1..16 beats (one in 25: 17..128), half of them in one mode, half with a random mode
per beat, random bits above the w4 / w2 weights, ``kv4`` and ``zp`` random on every beat, one
in 20 carrying on without ``first``; one in 50 a run of one extreme product pair (w8, or w4
KV4 with ``q - zp = +-15``) ending about where the accumulator range is left (-2..+2 beats),
at most 400 beats (so the range is reached for ``acc_bits`` up to about 22 with 8-bit X)."""

MODELS[accllm_pe.name] = accllm_pe
__all__.append("accllm_pe")
