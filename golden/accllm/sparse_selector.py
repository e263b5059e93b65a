"""Golden model of AccLLM's sparse selector: the two inputs of every group of 4 that meet
the kept weights of a 2:4 pattern.

Reference: Liang et al., "AccLLM: Accelerating Long-Context LLM Inference Via
Algorithm-Hardware Co-Design", section V-B2 (Fig. 10(c)). Integer models, bit-exact with
the ``accllm_sparse_selector`` RTL (inputs are returned unchanged, any dtype).

Reading fixed here (the paper leaves it open):

* **Sparse selector** (Fig. 10(c)): per group of 4 inputs the 2:4 mask's two positions, in
  index order; each output carries its 2-bit index (the multiplexer select).
"""

from typing import NamedTuple

import numpy as np

from ..common.checks import check_int_array as _int_array

__all__ = ["SparseSelection", "sparse_select", "select_by_index"]


class SparseSelection(NamedTuple):
    """Output of the 2:4 sparse selector, one entry per group of 4 inputs.

    Attributes
    ----------
    x1, x2 : numpy.ndarray
        The selected inputs, ``x1`` at the lower index.
    idx1, idx2 : numpy.ndarray of int64
        Their positions 0..3 within the group, ``idx1 < idx2``.
    """

    x1: np.ndarray
    x2: np.ndarray
    idx1: np.ndarray
    idx2: np.ndarray


def sparse_select(x, mask):
    """Select the two inputs of every group of 4 that meet a kept 2:4 weight (Fig. 10(c)).

    Parameters
    ----------
    x : array_like, shape (..., n)
        Inputs (any dtype; returned unchanged), ``n`` a multiple of 4.
    mask : array_like of bool or 0/1 integers, shape of ``x``
        The 2:4 pattern of the pruned weights (e.g. from :func:`prune_2_4`).

    Returns
    -------
    SparseSelection
        Arrays of shape (..., n // 4): ``x1 = x[4g + idx1]``, ``x2 = x[4g + idx2]``,
        ``idx1 < idx2`` the two set positions of the group's mask.

    Raises
    ------
    TypeError
        If ``mask`` holds values other than booleans or integers.
    ValueError
        If the shapes differ, the last axis is not a multiple of 4, ``mask`` holds values other
        than 0/1, or a group of ``mask`` does not have exactly two ones.
    """
    x = np.asarray(x)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        mask = _int_array("mask", mask, 0, 1, "0/1 values").astype(bool)
    if x.ndim == 0 or x.shape != mask.shape:
        raise ValueError(f"mask must have the shape of x {x.shape}, not {mask.shape}")
    n = x.shape[-1]
    if n % 4:
        raise ValueError(f"x must have a last axis that is a multiple of 4, not {n}")
    m = mask.reshape(mask.shape[:-1] + (n // 4, 4))
    count = m.sum(axis=-1)
    if (count != 2).any():
        where = np.argwhere(count != 2)[0]
        raise ValueError(f"mask must have exactly two ones in every group of 4, not "
                         f"{int(count[tuple(where)])} in group {tuple(int(i) for i in where)}")
    idx = np.argsort(~m, axis=-1, kind="stable")[..., :2]     # set positions, ascending
    g = x.reshape(m.shape)
    sel = np.take_along_axis(g, idx, axis=-1)
    return SparseSelection(sel[..., 0], sel[..., 1], idx[..., 0].astype(np.int64),
                           idx[..., 1].astype(np.int64))


def select_by_index(x, idx1, idx2):
    """Select ``x[4g + idx1]`` and ``x[4g + idx2]`` per group of 4, for any 2-bit indices.

    The multiplexers of the sparse selector (Fig. 10(c)) driven by raw indices. For the indices
    of a valid 2:4 mask (``idx1 < idx2``) this equals :func:`sparse_select`; indices in another
    order, or equal, are selected as they are (``idx1 == idx2`` gives the same input twice).

    Parameters
    ----------
    x : array_like, shape (..., n)
        Inputs (any dtype; returned unchanged), ``n`` a multiple of 4.
    idx1, idx2 : array_like of int
        Indices 0..3, broadcastable with ``x.shape[:-1] + (n // 4,)`` (e.g. an extra axis of
        weight rows sharing ``x``, with ``x[..., None, :]``).

    Returns
    -------
    (x1, x2) : tuple of numpy.ndarray
        The broadcast shape of ``x.shape[:-1] + (n // 4,)``, ``idx1`` and ``idx2``.

    Raises
    ------
    TypeError
        If an index is not an integer.
    ValueError
        If ``x`` is 0-d or its last axis is not a multiple of 4, an index is outside 0..3, or
        the shapes do not broadcast.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension, not shape ()")
    n = x.shape[-1]
    if n % 4:
        raise ValueError(f"x must have a last axis that is a multiple of 4, not {n}")
    idx1 = _int_array("idx1", idx1, 0, 3, "2-bit indices")
    idx2 = _int_array("idx2", idx2, 0, 3, "2-bit indices")
    groups = x.reshape(x.shape[:-1] + (n // 4, 4))
    try:
        shape = np.broadcast_shapes(groups.shape[:-1], idx1.shape, idx2.shape)
    except ValueError:
        raise ValueError(f"idx1 {idx1.shape} and idx2 {idx2.shape} must broadcast with the "
                         f"groups of x {groups.shape[:-1]}") from None
    groups = np.broadcast_to(groups, shape + (4,))
    x1 = np.take_along_axis(groups, np.broadcast_to(idx1, shape)[..., None], axis=-1)
    x2 = np.take_along_axis(groups, np.broadcast_to(idx2, shape)[..., None], axis=-1)
    return x1[..., 0], x2[..., 0]
