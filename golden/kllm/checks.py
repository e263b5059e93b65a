"""Argument checks shared by the KLLM golden models (messages name the argument and the
value)."""

import numpy as np

__all__ = ["INT64_MAX", "check_index_array", "check_int64_array", "check_real_array",
           "check_ndim", "check_mask", "check_mode", "check_codebook", "codebook_bits",
           "check_vector_matrix"]

#: The largest int64 (histogram sums must stay below it).
INT64_MAX = (1 << 63) - 1


def check_index_array(name, values, bits):
    """``values`` as int64 if they are ``bits``-bit unsigned indices; else TypeError or
    ValueError."""
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, not {values.dtype}")
    if values.size and (values.min() < 0 or values.max() >= (1 << bits)):
        raise ValueError(f"{name} must hold {bits}-bit unsigned indices (0..{(1 << bits) - 1})")
    return values.astype(np.int64)


def check_int64_array(name, values):
    """``values`` as int64 if they are integers (not booleans) that fit int64."""
    values = np.asarray(values)
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, not {values.dtype}")
    if values.dtype == np.uint64 and values.size and int(values.max()) > INT64_MAX:
        raise ValueError(f"{name} must fit in int64, not hold {int(values.max())}")
    return values.astype(np.int64)


def check_real_array(name, values, finite=True):
    """``values`` as float64 if they are real (and, with ``finite``, finite)."""
    values = np.asarray(values)
    if values.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, not {values.dtype}")
    values = values.astype(np.float64)
    if finite and not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must hold finite values (no NaN or infinity)")
    return values


def check_ndim(name, values, ndim, what):
    """Raise ValueError unless ``values`` is ``ndim``-D (``what`` names the expected shape)."""
    if values.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {what}, not of shape {values.shape}")


def check_mask(name, mask, shape):
    """Return the boolean 'lane counts' array for a 0/1 or boolean mask (None: all count)."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.integer):
        raise TypeError(f"{name} must hold booleans or 0/1 integers, not {mask.dtype}")
    if mask.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, not {mask.shape}")
    if mask.dtype != np.bool_ and mask.size and (mask.min() < 0 or mask.max() > 1):
        raise ValueError(f"{name} must hold only 0 and 1")
    return mask.astype(bool)


def check_mode(mode):
    """``mode`` if it is ``"kk"`` or ``"ik"``; else TypeError or ValueError."""
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, not {mode!r}")
    if mode not in ("kk", "ik"):
        raise ValueError(f"mode must be 'kk' or 'ik', not {mode!r}")
    return mode


def check_codebook(name, centroids, bits=None):
    """``centroids`` as a finite float64 1-D codebook (of ``2**bits`` entries if ``bits``)."""
    centroids = check_real_array(name, centroids)
    check_ndim(name, centroids, 1, "codebook")
    if bits is not None and centroids.size != (1 << bits):
        raise ValueError(f"{name} must hold 2**{bits} = {1 << bits} centroids, "
                         f"not {centroids.size}")
    if centroids.size == 0:
        raise ValueError(f"{name} must hold at least one centroid")
    return centroids


def codebook_bits(name, centroids):
    """Index width of a codebook whose length must be 2**n, n in 1..8."""
    size = np.asarray(centroids).size
    bits = size.bit_length() - 1
    if size < 2 or size != 1 << bits or bits > 8:
        raise ValueError(f"{name} must hold 2**n centroids with n in 1..8, not {size}")
    return bits


def check_vector_matrix(a_name, a, b_name, b):
    """Check that ``a`` is (K,) and ``b`` is (K, N) with the same K."""
    check_ndim(a_name, a, 1, "(K,)")
    check_ndim(b_name, b, 2, "(K, N)")
    if b.shape[0] != a.shape[0]:
        raise ValueError(f"{b_name} must have K = {a.shape[0]} rows (the length of {a_name}), "
                         f"not {b.shape[0]}")
