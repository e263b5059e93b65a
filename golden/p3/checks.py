"""Argument checks and array helpers shared by the P3-LLM golden models (messages name the
argument and the value)."""

import numpy as np

from ..common.checks import check_int as _check_int
from ..common.checks import check_int_array as _int_array

__all__ = ["bit_array", "float_array", "broadcast", "grouped", "expand", "safe_scale",
           "round_to_set", "TIES"]


def bit_array(name, values):
    """``values`` (bool, or integers 0/1) as a bool array."""
    values = np.asarray(values)
    if values.dtype == np.bool_:
        return values
    return _int_array(name, values, 0, 1, "flags").astype(bool)


def float_array(name, x):
    """``x`` (real numbers, finite) as a float64 array."""
    x = np.asarray(x)
    if x.dtype == np.bool_ or not (np.issubdtype(x.dtype, np.floating)
                                   or np.issubdtype(x.dtype, np.integer)):
        raise TypeError(f"{name} must hold real numbers, not {x.dtype}")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        bad = x[~np.isfinite(x)].flat[0]
        raise ValueError(f"{name} must be finite, not {bad}")
    return x


def broadcast(**arrays):
    """Broadcast the named arrays together; a mismatch names them and their shapes."""
    try:
        return np.broadcast_arrays(*arrays.values())
    except ValueError:
        shown = ", ".join(f"{k} {np.shape(v)}" for k, v in arrays.items())
        raise ValueError(f"{' and '.join(arrays)} must broadcast together, not {shown}") \
            from None


def grouped(name, x, group):
    """Check ``group`` and reshape ``x`` (..., n) to (..., n // group, group)."""
    group = _check_int("group", group, 1)
    if x.ndim < 1:
        raise ValueError(f"{name} must have at least 1 dimension, not shape {x.shape}")
    if x.shape[-1] % group:
        raise ValueError(f"{name}'s last axis ({x.shape[-1]}) must be a multiple of group "
                         f"({group}), not shape {x.shape}")
    return x.reshape(x.shape[:-1] + (x.shape[-1] // group, group)), group


def expand(per_group, group):
    """(..., G) -> (..., G * group): each group's value repeated over its elements."""
    return np.repeat(per_group, group, axis=-1)


def safe_scale(scale):
    """``scale`` with 1.0 where it is not positive (a divisor for all-zero groups)."""
    return np.where(scale > 0, scale, 1.0)


#: How :func:`round_to_set` breaks a tie (a ``y`` exactly midway between two values).
TIES = ("away", "down")


def round_to_set(y, values, ties="away"):
    """Nearest element of the ascending 1-D ``values`` to each ``y``.

    ``ties``: ``"away"`` takes the neighbour farther from zero, ``"down"`` the smaller one (a
    value in ``(mid[i-1], mid[i]]`` is ``values[i]``)."""
    mids = (values[:-1] + values[1:]) / 2
    if ties == "down":
        return values[np.searchsorted(mids, y, side="left")]
    idx = np.where(y >= 0, np.searchsorted(mids, y, side="right"),
                   np.searchsorted(mids, y, side="left"))
    return values[idx]
