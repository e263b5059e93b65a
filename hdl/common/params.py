"""Constructor parameter checks shared by every unit.

Every message names the parameter, shows the rejected value and the allowed range, so that a wrong
``--set`` on the command line or a wrong keyword in Python is understood without reading the RTL.
Wrong types raise :class:`TypeError`, wrong values :class:`ValueError`; nothing is clamped.
"""

from numbers import Integral

__all__ = ["check_int", "check_choice"]


def check_int(name, value, *, min_value, max_value=None):
    """Return ``value`` as an ``int`` if it is an integer within ``min_value..max_value``.

    Raises
    ------
    TypeError
        If ``value`` is not an integer (``bool`` is refused as well).
    ValueError
        If ``value`` is outside the inclusive range.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    value = int(value)
    upper = "" if max_value is None else f"{max_value}"
    if value < min_value or (max_value is not None and value > max_value):
        raise ValueError(f"{name} must be in range {min_value}..{upper}, not {value!r}")
    return value


def check_choice(name, value, choices):
    """Return ``value`` if it is one of ``choices``, else raise :class:`ValueError`."""
    if value not in choices:
        allowed = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"{name} must be one of {allowed}, not {value!r}")
    return value
