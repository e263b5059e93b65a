"""Beat-level golden adapters of the AccLLM units
(:class:`golden.common.beats.BeatModel`: a unit's input beats -> the output beats its golden
model gives).

Adapters and the units they serve:

* ``accllm_mul``: ``accllm_dsp_mul``, ``accllm_plain_mul``;
* ``accllm_sparse_selector``: ``accllm_sparse_selector``;
* ``accllm_pe``: ``accllm_pe``.

Pure NumPy on top of the golden models of :mod:`golden.accllm`; nothing here looks at the RTL.
"""

import numpy as np

from ..common.beats import BeatModel
from ..common.beats import runs_ending_at_last as _runs_ending_at_last
from ..common.beats import x_range as _x_range
from .dsp_mul import run_sums
from .pe import pe_products, pe_run
from .sparse_selector import select_by_index

__all__ = ["accllm_mul", "accllm_sparse_selector", "accllm_pe"]


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
"""contract 6: the exact products, one beat per input beat (``p1 = x*w1``, ``p2 = x*w2``; mode w2
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


# --------------------------------------------------------------------------- accllm_pe


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
    t1, t2 = pe_products(mode, x, x, w1, w2, kv4, zp, p["x_bits"], p["x_signed"])
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
    out = pe_run(*(i[name] for name in _PE_FIELDS), acc_bits=p["acc_bits"],
                 x_bits=p["x_bits"], x_signed=p["x_signed"])
    return {"o": {name: np.asarray(value, np.int64) for name, value in out.items()}}


accllm_pe = BeatModel("accllm_pe", _accllm_pe_stimulus, _accllm_pe_expected)
"""contract 10: one ``o`` beat per ``last``: ``s1``, ``s2`` (the sums since ``first`` of each
beat's own mode's products, modulo ``2^acc_bits``) and the sticky ``overflow``
(:func:`golden.accllm.pe.pe_run`). The stimulus is ``count`` dot products (``count`` ``last``
beats): 1..16 beats (one in 25: 17..128), half of them in one mode, half with a random mode
per beat, random bits above the w4 / w2 weights, ``kv4`` and ``zp`` random on every beat, one
in 20 carrying on without ``first``; one in 50 a run of one extreme product pair (w8, or w4
KV4 with ``q - zp = +-15``) ending about where the accumulator range is left (-2..+2 beats),
at most 400 beats (so the range is reached for ``acc_bits`` up to about 22 with 8-bit X)."""
