"""Oaken's offline threshold profiling and the synthetic KV data it runs on.

Reference: Kim et al., "Oaken: Fast and Efficient LLM Serving with Online-Offline Hybrid KV
Cache Quantization", section 4.1 (KV distribution: per-layer magnitudes, input-independent,
channel outliers with exceptions), 4.3 (offline outlier threshold profiling: "approximately a
hundred offline inferences ... four group thresholds are extracted ... from the KV cache of each
inference run using topK operations, and their averages are computed for each decoder layer")
and 6.1 (outer / middle / inner ratio 4 / 90 / 6 %); contract section 4. The online quantizer itself
is :mod:`golden.oaken.online`; this module only calls it.

The baselines, Oaken's bit counts and the error metrics are in :mod:`.baselines`.

Readings fixed here (the paper does not spell them out):

* **Cut points of one run** (:func:`run_cut_points`). A run is all KV values of one layer (K or
  V) seen in one profiling inference, flattened to ``n`` values. With
  ``k_out = round(outer * n)`` split into ``k_hi = round(outer * outer_split * n)`` values on the
  upper tail and ``k_lo = k_out - k_hi`` on the lower tail (``outer_split = 0.5``: the outer
  fraction splits evenly between the tails), and ``k_in = round(inner * n)``
  (round half up), using the ascending sort ``x_(0) <= ... <= x_(n-1)`` and the ascending sort
  ``a_(0) <= ... <= a_(n-1)`` of ``|x|``:

  - ``t_hi_o = x_(n-1-k_hi)``: the largest value *not* in ``topK(x, k_hi)``, so the outer
    upper group ``x > t_hi_o`` is exactly the top ``k_hi`` values when they are distinct;
  - ``t_lo_o = x_(k_lo)``: the smallest value not in ``topK(-x, k_lo)``, likewise for
    ``x < t_lo_o``;
  - ``t_hi_i = a_(k_in-1)`` and ``t_lo_i = -a_(k_in-1)``: the largest magnitude in
    ``topK(-|x|, k_in)``, the ``k_in`` smallest-magnitude values, so the inner group
    ``t_lo_i <= x <= t_hi_i`` is ``|x| <= a_(k_in-1)`` (Oaken's "small-magnitude outliers";
    the interval is symmetric about zero). ``inner = 0`` (``k_in = 0``) gives
    ``t_lo_i = t_hi_i = 0``: with the contract's inclusive bounds the inner group then holds exact
    zeros only.

  In NumPy terms ``x_(k)`` is ``np.partition(x, k)[k]`` (what this module computes, along the
  last axis for all runs at once), equal in exact arithmetic to
  ``np.quantile(x, (k + 1) / n, method="inverted_cdf")``; in float64 ``(k + 1) / n * n`` can
  land just above ``k + 1`` and pick ``x_(k+1)``, hence the partition. Ties: integer data may
  repeat a cut point; the outer groups (strict inequalities, the contract) then hold at most ``k_lo``
  and ``k_hi`` values and the inner group (inclusive) at least ``k_in``.
* **Degenerate runs.** At most ``n - 1`` values go to the outer tails (``k_lo + k_hi <= n - 1``,
  ``k_hi`` kept first) so that ``t_lo_o <= t_hi_o``. The inner interval is then clipped into
  the outer one: ``t_lo_i = clip(-a, t_lo_o, t_hi_o)``, ``t_hi_i = clip(a, t_lo_i, t_hi_o)``.
  On data spread on both sides of zero the clip never acts; on one-sided data (all values
  positive, say) the smallest magnitudes lie in a tail and the clip keeps the order
  ``t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o``.
* **Average over runs** (:func:`profile_thresholds`): each of the four cut points is averaged
  over the runs and rounded half up, exactly in integers: ``floor((2 S + R) / (2 R))`` for the
  sum ``S`` over ``R`` runs. Averaging and this rounding are monotone, so the ordered per-run
  cut points give ordered thresholds, each within the signed ``data_bits`` range.
* **Synthetic KV** (:func:`synthetic_kv`): Q(data_bits - frac_bits).frac_bits fixed point
  (default Q8.8 in 16 bits: ``x_int = round(x_real * 256)``, saturated). Errors in this module
  and in :mod:`golden.oaken.report` are in units of that LSB.
"""

import math

import numpy as np

from ..common.checks import check_int as _check_int
from .checks import check_fraction as _check_fraction
from .checks import check_ratios as _check_ratios
from .checks import check_samples as _check_samples
from .online import INNER, MIDDLE, OUTER, decompose

__all__ = [
    "DEFAULT_OUTER", "DEFAULT_INNER", "topk_counts", "run_cut_points", "profile_thresholds",
    "profile_layers", "synthetic_kv", "group_fractions",
]

DEFAULT_OUTER = 0.04        # Oaken section 6.1: outer / middle / inner = 4 / 90 / 6 %
DEFAULT_INNER = 0.06


def _round_half_up(value):
    return int(math.floor(value + 0.5))


# --- offline threshold profiling (section 4.3) -----------------------------------------------


def topk_counts(n, outer=DEFAULT_OUTER, inner=DEFAULT_INNER, outer_split=0.5):
    """Return ``(k_lo, k_hi, k_in)``: how many of ``n`` values each topK selects.

    ``k_hi = round(outer * outer_split * n)``, ``k_lo = round(outer * n) - k_hi``,
    ``k_in = round(inner * n)`` (round half up), then ``k_hi <= n - 1``,
    ``k_lo <= n - 1 - k_hi`` and ``k_in <= n`` (see the module docstring).

    Parameters
    ----------
    n : int
        Values per run, >= 1.
    outer, inner : float
        Fractions of the outer and inner groups, each in 0..1, ``outer + inner <= 1``.
    outer_split : float
        Share of the outer fraction on the upper tail, 0..1.

    Returns
    -------
    tuple of 3 int

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid (the message names it).
    """
    n = _check_int("n", n, 1)
    outer, inner, outer_split = _check_ratios(outer, inner, outer_split)
    k_out = _round_half_up(outer * n)
    k_hi = min(_round_half_up(outer * outer_split * n), k_out)
    k_lo = k_out - k_hi
    k_hi = min(k_hi, n - 1)
    k_lo = min(k_lo, n - 1 - k_hi)
    return k_lo, k_hi, min(_round_half_up(inner * n), n)


def _cut_points(x, k_lo, k_hi, k_in):
    """Per-run ``(t_lo_o, t_lo_i, t_hi_i, t_hi_o)`` along the last axis of int64 ``x``."""
    n = x.shape[-1]
    kth = sorted({k_lo, n - 1 - k_hi})
    part = np.partition(x, kth, axis=-1)
    t_lo_o, t_hi_o = part[..., k_lo], part[..., n - 1 - k_hi]
    if k_in:
        a = np.partition(np.abs(x), k_in - 1, axis=-1)[..., k_in - 1]
    else:
        a = np.zeros(x.shape[:-1], np.int64)
    t_lo_i = np.clip(-a, t_lo_o, t_hi_o)
    t_hi_i = np.clip(a, t_lo_i, t_hi_o)
    return np.stack([t_lo_o, t_lo_i, t_hi_i, t_hi_o], axis=-1)


def _average(cuts):
    """Round-half-up mean over axis 0, exact in integers."""
    runs = cuts.shape[0]
    return (2 * cuts.sum(axis=0) + runs) // (2 * runs)


def run_cut_points(runs, outer=DEFAULT_OUTER, inner=DEFAULT_INNER, data_bits=16,
                   outer_split=0.5):
    """Return the four cut points of every profiling run of one layer (before averaging).

    Oaken section 4.3: the thresholds of each inference run come from topK operations; here
    the order statistics of the module docstring, computed with :func:`numpy.partition` for all
    runs at once.

    Parameters
    ----------
    runs : array_like of int, shape (n_runs, ...)
        One layer's K (or V) values from each profiling run, signed ``data_bits`` fixed point;
        everything after the first axis is one run.
    outer, inner : float
        Outer and inner group fractions (default 0.04 and 0.06; middle = 1 - outer - inner).
    data_bits : int
        Width of the values, 2..32.
    outer_split : float
        Share of the outer fraction on the upper tail (default 0.5, even split).

    Returns
    -------
    numpy.ndarray of int64, shape (n_runs, 4)
        ``(t_lo_o, t_lo_i, t_hi_i, t_hi_o)`` per run, ordered.

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid (the message names it).
    """
    data_bits = _check_int("data_bits", data_bits, 2, 32)
    outer, inner, outer_split = _check_ratios(outer, inner, outer_split)
    runs = _check_samples("runs", runs, 2, data_bits, "(n_runs, ...) with non-empty runs")
    x = runs.reshape(runs.shape[0], -1)
    return _cut_points(x, *topk_counts(x.shape[1], outer, inner, outer_split))


def profile_thresholds(runs, outer=DEFAULT_OUTER, inner=DEFAULT_INNER, data_bits=16,
                       outer_split=0.5):
    """Profile one layer's group thresholds offline: per-run topK cut points, averaged.

    Oaken section 4.3 ("the four group thresholds are extracted ... from the KV cache of each
    inference run using topK operations, and their averages are computed for each decoder
    layer") and 6.1 (about a hundred runs, ratio 4 / 90 / 6 %). The cut points of each run are
    those of :func:`run_cut_points`; each is averaged over the runs and rounded half up
    (exact integer arithmetic).

    Parameters
    ----------
    runs : array_like of int, shape (n_runs, ...)
        One layer's K (or V) values from each profiling run, signed ``data_bits`` fixed point.
    outer, inner : float
        Outer and inner group fractions; middle = 1 - outer - inner.
    data_bits : int
        2..32.
    outer_split : float
        Share of the outer fraction on the upper tail (default 0.5).

    Returns
    -------
    tuple of 4 int
        ``(t_lo_o, t_lo_i, t_hi_i, t_hi_o)`` with ``t_lo_o <= t_lo_i <= t_hi_i <= t_hi_o``,
        each a signed ``data_bits`` value: the ``thresholds`` argument of
        :func:`golden.oaken.online.quantize_vector`.

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid (the message names it).
    """
    cuts = run_cut_points(runs, outer, inner, data_bits, outer_split)
    return tuple(int(t) for t in _average(cuts))


def profile_layers(kv, outer=DEFAULT_OUTER, inner=DEFAULT_INNER, data_bits=16,
                   outer_split=0.5):
    """Profile every decoder layer at once (Oaken section 4.1 observation 1: per layer).

    Equivalent to ``[profile_thresholds(kv[:, layer], ...) for layer in range(n_layers)]``,
    computed in one vectorized pass.

    Parameters
    ----------
    kv : array_like of int, shape (n_runs, n_layers, ...)
        K (or V) values of every layer in every profiling run.
    outer, inner, data_bits, outer_split
        As for :func:`profile_thresholds`.

    Returns
    -------
    list of tuple of 4 int
        One ``(t_lo_o, t_lo_i, t_hi_i, t_hi_o)`` per layer.

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid (the message names it).
    """
    data_bits = _check_int("data_bits", data_bits, 2, 32)
    outer, inner, outer_split = _check_ratios(outer, inner, outer_split)
    kv = _check_samples("kv", kv, 3, data_bits, "(n_runs, n_layers, ...) with non-empty runs")
    x = kv.reshape(kv.shape[0], kv.shape[1], -1)
    cuts = _cut_points(x, *topk_counts(x.shape[2], outer, inner, outer_split))
    return [tuple(int(t) for t in row) for row in _average(cuts)]


def group_fractions(x, thresholds, data_bits=16):
    """Return the observed ``(outer, middle, inner)`` fractions of ``x`` under ``thresholds``.

    Groups as in :func:`golden.oaken.online.decompose` (contract section 4).
    """
    group = decompose(x, thresholds, data_bits)["group"]
    n = group.size
    return tuple(float(np.count_nonzero(group == g)) / n for g in (OUTER, MIDDLE, INNER))


# --- synthetic KV cache ----------------------------------------------------------------------


def synthetic_kv(rng, n_tokens, n_channels, kind="key", layer=0, model_seed=0, frac_bits=8,
                 data_bits=16, n_outlier_channels=None, outlier_scale=8.0, spike_rate=0.01,
                 spike_df=3.0, spike_scale=6.0):
    """Draw a synthetic K or V cache block with a Gaussian bulk and heavy-tailed outliers.

    Imitates Oaken section 4.1: magnitudes differ per layer (observation 1), the distribution
    is a property of the layer, not of the input (observation 2: the *structure* below depends
    only on ``model_seed``, ``layer`` and ``kind``; ``rng`` only draws the tokens), and large
    values gather in a few key channels, with scattered exceptions (observation 3).

    Structure, from ``numpy.random.default_rng([model_seed, layer, kind])``: a layer scale
    ``exp(N(0, 0.35))``; per channel a scale ``layer_scale * exp(N(0, 0.25))``; for keys a
    per-channel offset ``N(0, 0.3) * layer_scale`` and ``n_outlier_channels`` channels whose
    scale is multiplied by ``outlier_scale`` and whose offset is ``±1`` times that scale.
    Tokens, from ``rng``: ``offset + scale * N(0, 1)`` per element (values: times a per-token
    factor ``exp(N(0, 0.2))``); with probability ``spike_rate`` an element is replaced by a
    spike ``layer_scale * spike_scale * t(spike_df)`` (Student-t). Real values are converted to
    fixed point ``round(x * 2^frac_bits)`` and saturated to signed ``data_bits``.

    Parameters
    ----------
    rng : numpy.random.Generator or int
        Source of the token samples (an int is a seed for ``numpy.random.default_rng``).
    n_tokens, n_channels : int
        Shape of the block, each >= 1.
    kind : {"key", "value"}
    layer, model_seed : int
        Select the layer structure, each >= 0.
    frac_bits : int
        Fractional bits, 0..data_bits - 1 (default 8: Q8.8 in 16 bits).
    data_bits : int
        2..32.
    n_outlier_channels : int or None
        Key outlier channels; None is ``round(n_channels / 32)`` for keys and 0 for values.
    outlier_scale, spike_scale : float
        Scale factors, >= 0.
    spike_rate : float
        0..1.
    spike_df : float
        Student-t degrees of freedom, > 0 (small is heavier-tailed).

    Returns
    -------
    numpy.ndarray of int64, shape (n_tokens, n_channels)

    Raises
    ------
    TypeError, ValueError
        If an argument is invalid (the message names it).
    """
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        rng = np.random.default_rng(_check_int("rng", rng, 0))
    elif not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator or a seed, not {rng!r}")
    n_tokens = _check_int("n_tokens", n_tokens, 1)
    n_channels = _check_int("n_channels", n_channels, 1)
    if kind not in ("key", "value"):
        raise ValueError(f"kind must be 'key' or 'value', not {kind!r}")
    layer = _check_int("layer", layer, 0)
    model_seed = _check_int("model_seed", model_seed, 0)
    data_bits = _check_int("data_bits", data_bits, 2, 32)
    frac_bits = _check_int("frac_bits", frac_bits, 0, data_bits - 1)
    if n_outlier_channels is None:
        n_outlier_channels = round(n_channels / 32) if kind == "key" else 0
    n_outlier_channels = _check_int("n_outlier_channels", n_outlier_channels, 0, n_channels)
    outlier_scale = _check_fraction("outlier_scale", outlier_scale, 0.0, math.inf)
    spike_scale = _check_fraction("spike_scale", spike_scale, 0.0, math.inf)
    spike_rate = _check_fraction("spike_rate", spike_rate)
    spike_df = _check_fraction("spike_df", spike_df, 0.0, math.inf)
    if spike_df == 0.0:
        raise ValueError(f"spike_df must be positive, not {spike_df!r}")

    srng = np.random.default_rng([model_seed, layer, 0 if kind == "key" else 1])
    layer_scale = math.exp(srng.normal(0.0, 0.35))
    scale = layer_scale * np.exp(srng.normal(0.0, 0.25, n_channels))
    offset = np.zeros(n_channels)
    outliers = srng.choice(n_channels, n_outlier_channels, replace=False)
    if kind == "key":
        offset = srng.normal(0.0, 0.3, n_channels) * layer_scale
        scale[outliers] *= outlier_scale
        offset[outliers] = srng.choice([-1.0, 1.0], n_outlier_channels) * scale[outliers]

    x = offset + scale * rng.standard_normal((n_tokens, n_channels))
    if kind == "value":
        x *= np.exp(rng.normal(0.0, 0.2, (n_tokens, 1)))
    spikes = rng.random((n_tokens, n_channels)) < spike_rate
    tail = layer_scale * spike_scale * rng.standard_t(spike_df, (n_tokens, n_channels))
    x = np.where(spikes, tail, x)
    lo, hi = -(1 << (data_bits - 1)), (1 << (data_bits - 1)) - 1
    return np.clip(np.rint(x * (1 << frac_bits)), lo, hi).astype(np.int64)
