"""Beat-level golden adapters of the P3-LLM units
(:class:`golden.common.beats.BeatModel`: a unit's input beats -> the output beats its golden
model gives).

Adapters and the units they serve:

* ``p3_pe``: ``p3_pe``;
* ``p3_pcu``: ``p3_pcu``.

Pure NumPy on top of the golden models of :mod:`golden.p3`; nothing here looks at the RTL.
"""

import numpy as np

from ..common.beats import BeatModel
from ..common.beats import runs_ending_at_last as _runs_ending_at_last
from .pe import pcu_run, pe_run

__all__ = ["p3_pe", "p3_pcu"]


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
"""contract 5: one beat per ``last`` (``acc``, sticky ``overflow`` and ``nan``)."""


# --------------------------------------------------------------------------- p3_pcu


def _p3_act_codes(rng, act_fmt):
    """Activation codes (beats, 4) for per-beat formats ``act_fmt``: uniform, with extra NaNs
    (E4M3), largest exponents and subnormals (as ``verif/p3/tb_pe.py``'s ``random_codes``)."""
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
"""contract 9: ``pes`` PE lanes sharing ``act``; one beat per ``last`` in the order of the ``last``
beats: ``acc``, ``overflow``, ``nan`` (each (beats, pes)) and the ``slot`` of that ``last`` beat
(:func:`golden.p3.pe.pcu_run`: each slot is an independent accumulator set, any slot order).
At ``reuse`` 1 there is no ``slot`` field (contract 9's ``ceil(log2 reuse)`` bits: none), in
the input or the output beats. The stimulus: ``count`` beats of dot products of random length,
formats, ``sv_sel`` and ``zp`` per dot product (one in ten per weight column), activation codes
biased to NaN, largest exponents and subnormals, one dot product in 50 long and one in 50 long
with large same-sign products (overflow); at ``reuse`` 2 weight columns of slot 0 / slot 1 beat
pairs sharing ``wgt``, ``sv_sel``, ``zp`` and formats (``first``/``last`` on both), and one run
in ten of random slots with ``first``/``last`` per slot."""
