"""Golden model of KLLM's Concat unit: activation index (high) joined to weight index (low).

Reference: KLLM section III-B (index-based MatMul, Fig. 3(a)) and IV-A (Concat units); the contract
section 1. Bit-exact with the ``kllm_concat`` RTL, integer arithmetic only (int64).
"""

from .checks import check_index_array as _check_index_array

__all__ = ["concat_indices", "split_indices"]


def concat_indices(a, b, a_bits, b_bits):
    """Concatenate activation indices ``a`` (high) with weight indices ``b`` (low).

    ``y = a * 2**b_bits + b`` element-wise: the product-matrix index for the centroid pair
    (a, b). Bijective onto ``0 .. 2**(a_bits + b_bits) - 1`` and non-commutative.

    Parameters
    ----------
    a, b : array_like of int
        Indices of the same shape, ``0 <= a < 2**a_bits`` and ``0 <= b < 2**b_bits``.
    a_bits, b_bits : int
        Index widths n_A and n_B.

    Returns
    -------
    numpy.ndarray of int64
    """
    a = _check_index_array("a", a, a_bits)
    b = _check_index_array("b", b, b_bits)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, not {a.shape} and {b.shape}")
    return a * (1 << b_bits) + b


def split_indices(y, a_bits, b_bits):
    """Invert :func:`concat_indices`: return ``(a, b)`` for product indices ``y``."""
    y = _check_index_array("y", y, a_bits + b_bits)
    return y // (1 << b_bits), y % (1 << b_bits)
