"""Argument checks shared by the golden models (messages name the argument and the value)."""

import numpy as np

__all__ = ["check_int"]


def check_int(name, value, min_value, max_value=None):
    """Return ``value`` as an int if it is an integer (not a bool) in ``min_value..max_value``
    (no upper bound when ``max_value`` is None); else raise TypeError or ValueError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    value = int(value)
    if value < min_value or (max_value is not None and value > max_value):
        allowed = f"{min_value}..{max_value}" if max_value is not None else f">= {min_value}"
        raise ValueError(f"{name} must be in range {allowed}, not {value}")
    return value
