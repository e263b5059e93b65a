"""Golden models of AccLLM's compression: 2:4 semi-structured pruning and W2A8KV4
quantization (2-bit weights with learnable clipping, 8-bit activations, 4-bit KV).

Reference: Liang et al., "AccLLM: Accelerating Long-Context LLM Inference Via
Algorithm-Hardware Co-Design", section IV-A1 (2:4 semi-structured pruning) and IV-B (W2A8KV4:
Eq. 7-9, Fig. 8). Float models of the paper's algorithm.

Readings fixed here (the paper leaves them open):

* **Pruning** (IV-A1). The paper scores weights with SparseGPT's ``W^2 / diag(H^-1)`` and
  updates the remaining columns (OBS). With no calibration data (``H`` a multiple of the
  identity) the score is ``W^2``: :func:`prune_2_4` is 2:4 *magnitude* pruning along the input
  (last) axis, ties keeping the lower index, with no OBS update.
* **2-bit weights** (Eq. 7-9): group-wise (``group`` consecutive inputs of one output row)
  asymmetric, ``S = (max' - min') / 3``, ``Z = clip(round(-min' / S), 0, 3)``,
  ``q = clip(round(w / S) + Z, 0, 3)``, ``w ~ S (q - Z)``, with the learnable weight clipping
  of Eq. 9 given as its trained values: ``max' = gamma * max``, ``min' = beta * min``
  (``gamma = sigmoid(lambda)``, ``beta = sigmoid(eta)``, each in (0, 1], default 1 = no
  clipping). Rounding is half up, ``floor(v + 1/2)``. A group with ``max' == min'`` gets
  ``S = 0``, ``Z = 0`` and codes 0 (Eq. 8 would divide by zero); it reconstructs as 0, exact for
  an all-zero group such as a fully pruned one.
* **8-bit activations** (IV-B2): "each activation token an individual scaling factor" names a
  scale and no zero point, so the default is *symmetric signed* per token,
  ``s = max|x| / 127``, ``q = clip(round(x / s), -127, 127)``. Fig. 10(d) zero-extends X into B
  (unsigned activations); ``signed=False`` gives that variant, asymmetric unsigned 0..255 with a
  per-token zero point (the zero-point term ``z * sum(w)`` is then outside the DSP).
* **4-bit KV** (IV-B2, Fig. 8(b)): per token and per head, asymmetric unsigned 0..15 with scale
  and zero point as for the weights (``b = 4``, no clipping).
"""

from typing import NamedTuple

import numpy as np

from ..common.checks import check_int as _check_int
from .checks import check_bool as _check_bool

__all__ = [
    "W2Quant", "ActQuant", "KV4Quant",
    "prune_2_4", "quantize_w2", "dequantize_w2", "quantize_a8", "dequantize_a8",
    "quantize_kv4", "dequantize_kv4",
]


class W2Quant(NamedTuple):
    """Group-wise 2-bit weights (AccLLM Eq. 7-9).

    Attributes
    ----------
    q : numpy.ndarray of uint8, shape of ``w``
        Codes 0..3.
    scale, zero : numpy.ndarray, shape ``w.shape[:-1] + (n_groups,)``
        Per-group step ``S`` (float64) and zero point ``Z`` (int64, 0..3).
    group : int
    """

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    group: int


class ActQuant(NamedTuple):
    """Per-token 8-bit activations (AccLLM section IV-B2).

    Attributes
    ----------
    q : numpy.ndarray of int16, shape of ``x``
        -127..127 (signed) or 0..255 (unsigned).
    scale, zero : numpy.ndarray, shape ``x.shape[:-1] + (1,)``
        Per-token step (float64) and zero point (int64; 0 when signed).
    """

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray


class KV4Quant(NamedTuple):
    """Per-token, per-head 4-bit KV (AccLLM section IV-B2, Fig. 8(b)).

    Attributes
    ----------
    q : numpy.ndarray of uint8, shape of ``kv``
        Codes 0..15.
    scale, zero : numpy.ndarray, shape ``kv.shape[:-1] + (n_heads,)``
        Per-token per-head step (float64) and zero point (int64, 0..15).
    head_dim : int
    """

    q: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    head_dim: int


def _float_array(name, values):
    values = np.asarray(values)
    if values.dtype == np.bool_ or not (np.issubdtype(values.dtype, np.floating)
                                        or np.issubdtype(values.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, not {values.dtype}")
    values = values.astype(np.float64)
    if values.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension, not shape ()")
    if not np.isfinite(values).all():
        raise ValueError(f"{name} must be finite, not {values[~np.isfinite(values)].flat[0]}")
    return values


def _round_half_up(v):
    return np.floor(v + 0.5)


def prune_2_4(w):
    """Apply 2:4 semi-structured magnitude pruning along the input (last) axis.

    AccLLM section IV-A1 (block size ``Bs = 4``, two of every four weights removed), with the
    importance ``W^2`` (SparseGPT's score for ``H`` a multiple of the identity; no OBS update).

    Parameters
    ----------
    w : array_like of float, shape (..., n)
        Weights, ``n`` a multiple of 4; every block is 4 consecutive entries of the last axis.

    Returns
    -------
    pruned : numpy.ndarray of float64, shape of ``w``
        ``w`` with the two smaller-magnitude weights of each block set to 0.
    mask : numpy.ndarray of bool, shape of ``w``
        True at the kept weights: exactly two per block, the two largest ``|w|``; among equal
        magnitudes the lower index is kept.

    Raises
    ------
    TypeError
        If ``w`` is not real.
    ValueError
        If ``w`` is 0-d, not finite, or its last axis is not a multiple of 4.
    """
    w = _float_array("w", w)
    n = w.shape[-1]
    if n % 4:
        raise ValueError(f"w must have a last axis that is a multiple of 4, not {n}")
    blocks = np.abs(w).reshape(w.shape[:-1] + (n // 4, 4))
    order = np.argsort(-blocks, axis=-1, kind="stable")      # stable: lower index first
    mask = np.zeros(blocks.shape, dtype=bool)
    np.put_along_axis(mask, order[..., :2], True, axis=-1)
    mask = mask.reshape(w.shape)
    return np.where(mask, w, 0.0), mask


def _asym_quant(v, bits, vmax, vmin):
    """Asymmetric ``bits``-bit quantization of ``v`` against the (broadcast) range."""
    levels = (1 << bits) - 1
    span = vmax - vmin
    scale = span / levels
    safe = np.where(scale > 0, scale, 1.0)
    zero = np.where(scale > 0, np.clip(_round_half_up(-vmin / safe), 0, levels), 0.0)
    q = np.clip(_round_half_up(v / safe) + zero, 0, levels)
    q = np.where(scale > 0, q, 0.0)
    return q, scale, zero


def _unit_factor(name, value, shape):
    value = np.asarray(value)
    if value.dtype == np.bool_ or not (np.issubdtype(value.dtype, np.floating)
                                       or np.issubdtype(value.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, not {value.dtype}")
    value = value.astype(np.float64)
    bad = ~((value > 0) & (value <= 1))                     # also rejects NaN
    if bad.any():
        raise ValueError(f"{name} must be in (0, 1], not {value[bad].flat[0]}")
    try:
        return np.broadcast_to(value, shape)
    except ValueError:
        raise ValueError(f"{name} must broadcast to the group shape {shape}, "
                         f"not shape {value.shape}") from None


def quantize_w2(w, group=64, gamma=1.0, beta=1.0):
    """Quantize weights to 2 bits, group-wise asymmetric with learnable weight clipping.

    AccLLM section IV-B1, Eq. 7-9 (see the module docstring for the exact reading): per group
    of ``group`` consecutive entries of the last (input) axis, ``max' = gamma * max``,
    ``min' = beta * min``, ``S = (max' - min') / 3``, ``Z = clip(round(-min'/S), 0, 3)``,
    ``q = clip(round(w/S) + Z, 0, 3)``.

    For a group with ``min' <= 0 <= max'`` every ``w`` in ``[min', max']`` reconstructs within
    ``S / 2`` and 0 reconstructs exactly (so 2:4-pruned zeros stay zero); values outside the
    clipped range go to code 0 or 3.

    Parameters
    ----------
    w : array_like of float, shape (..., n)
        ``n`` a multiple of ``group``.
    group : int
        Group size, 1..n (default 64, the paper's).
    gamma, beta : float or array_like
        Trained clipping factors ``sigmoid(lambda)``, ``sigmoid(eta)`` of Eq. 9, in (0, 1],
        scalar or broadcastable to ``w.shape[:-1] + (n // group,)``.

    Returns
    -------
    W2Quant

    Raises
    ------
    TypeError
        If ``group`` is not an integer or ``w``, ``gamma``, ``beta`` are not real.
    ValueError
        If ``group`` does not divide the last axis, or ``gamma``/``beta`` are outside (0, 1].
    """
    w = _float_array("w", w)
    n = w.shape[-1]
    group = _check_int("group", group, 1, max(n, 1))
    if n % group:
        raise ValueError(f"group must divide the last axis of w ({n}), not {group}")
    g = w.reshape(w.shape[:-1] + (n // group, group))
    gamma = _unit_factor("gamma", gamma, g.shape[:-1])
    beta = _unit_factor("beta", beta, g.shape[:-1])
    vmax = gamma * g.max(axis=-1)
    vmin = beta * g.min(axis=-1)
    q, scale, zero = _asym_quant(g, 2, vmax[..., None], vmin[..., None])
    return W2Quant(q.reshape(w.shape).astype(np.uint8), scale[..., 0],
                   zero[..., 0].astype(np.int64), group)


def dequantize_w2(qw):
    """Reconstruct ``S (q - Z)`` from a :class:`W2Quant` (AccLLM Eq. 7).

    Returns
    -------
    numpy.ndarray of float64, shape of ``qw.q``
    """
    if not isinstance(qw, W2Quant):
        raise TypeError(f"qw must be a W2Quant, not {type(qw).__name__}")
    q = qw.q.astype(np.float64)
    g = q.reshape(q.shape[:-1] + (q.shape[-1] // qw.group, qw.group))
    return (qw.scale[..., None] * (g - qw.zero[..., None])).reshape(q.shape)


def quantize_a8(x, signed=True):
    """Quantize activations to 8 bits per token (one scale per row of the last axis).

    AccLLM section IV-B2, Fig. 8(a) left. ``signed=True`` (default, the paper's text: a scale
    per token, no zero point): ``s = max|x| / 127``, ``q = clip(round(x / s), -127, 127)``,
    zero point 0. ``signed=False`` (Fig. 10(d)'s zero-extended X): asymmetric unsigned,
    ``s = (max - min) / 255``, ``z = clip(round(-min / s), 0, 255)``,
    ``q = clip(round(x / s) + z, 0, 255)``. Either way a token with ``min <= 0 <= max``
    reconstructs within ``s / 2``. An all-zero (signed) or constant (unsigned) token gets
    ``s = 0`` and codes 0.

    Parameters
    ----------
    x : array_like of float, shape (..., hidden)
    signed : bool

    Returns
    -------
    ActQuant
    """
    x = _float_array("x", x)
    signed = _check_bool("signed", signed)
    if signed:
        scale = np.abs(x).max(axis=-1, keepdims=True) / 127
        safe = np.where(scale > 0, scale, 1.0)
        q = np.where(scale > 0, np.clip(_round_half_up(x / safe), -127, 127), 0.0)
        zero = np.zeros(scale.shape, dtype=np.int64)
    else:
        q, scale, zero = _asym_quant(x, 8, x.max(axis=-1, keepdims=True),
                                     x.min(axis=-1, keepdims=True))
        zero = zero.astype(np.int64)
    return ActQuant(q.astype(np.int16), scale, zero)


def dequantize_a8(qa):
    """Reconstruct ``s (q - z)`` from an :class:`ActQuant`."""
    if not isinstance(qa, ActQuant):
        raise TypeError(f"qa must be an ActQuant, not {type(qa).__name__}")
    return qa.scale * (qa.q.astype(np.float64) - qa.zero)


def quantize_kv4(kv, head_dim):
    """Quantize keys or values to 4 bits per token and per head, asymmetric.

    AccLLM section IV-B2, Fig. 8(b): the ``head_dim`` elements of one head of one token share
    a step ``S = (max - min) / 15`` and zero point ``Z = clip(round(-min/S), 0, 15)``;
    ``q = clip(round(kv/S) + Z, 0, 15)``. A head with ``min <= 0 <= max`` reconstructs within
    ``S / 2``.

    Parameters
    ----------
    kv : array_like of float, shape (..., n_heads * head_dim)
        One row per token; heads are consecutive slices of ``head_dim`` entries.
    head_dim : int
        1..last axis, dividing it.

    Returns
    -------
    KV4Quant
    """
    kv = _float_array("kv", kv)
    n = kv.shape[-1]
    head_dim = _check_int("head_dim", head_dim, 1, max(n, 1))
    if n % head_dim:
        raise ValueError(f"head_dim must divide the last axis of kv ({n}), not {head_dim}")
    g = kv.reshape(kv.shape[:-1] + (n // head_dim, head_dim))
    q, scale, zero = _asym_quant(g, 4, g.max(axis=-1, keepdims=True),
                                 g.min(axis=-1, keepdims=True))
    return KV4Quant(q.reshape(kv.shape).astype(np.uint8), scale[..., 0],
                    zero[..., 0].astype(np.int64), head_dim)


def dequantize_kv4(qkv):
    """Reconstruct ``S (q - Z)`` from a :class:`KV4Quant`."""
    if not isinstance(qkv, KV4Quant):
        raise TypeError(f"qkv must be a KV4Quant, not {type(qkv).__name__}")
    q = qkv.q.astype(np.float64)
    g = q.reshape(q.shape[:-1] + (q.shape[-1] // qkv.head_dim, qkv.head_dim))
    return (qkv.scale[..., None] * (g - qkv.zero[..., None])).reshape(q.shape)
