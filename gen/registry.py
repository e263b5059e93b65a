"""Registry of units: name -> component factory, default parameters, paper configurations.

The units are declared per paper in ``gen/units/`` (``kllm``, ``oaken``, ``p3``,
``baselines``, ``accllm``), their records in ``gen/spec.py``; :data:`UNITS` gathers them.
"""

from qllm_cores.gen.spec import ReportConfig, UnitSpec, load_object
from qllm_cores.gen.units import accllm, baselines, kllm, oaken, p3

__all__ = ["ReportConfig", "UnitSpec", "UNITS", "load_object", "resolve_params",
           "parse_assignment"]

#: Every unit by name, in the order ``qllm list``, ``qllm verilog`` and the reports use.
UNITS = {
    spec.name: spec
    for module in (kllm, oaken, p3, baselines, accllm)
    for spec in module.SPECS
}


def parse_assignment(text):
    """Split ``key=value`` into ``(key, value)``; integers (any base prefix), booleans and
    ``None`` are parsed, anything else stays a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ValueError(f"parameter assignment must look like key=value, not {text!r}")
    raw = raw.strip()
    if raw in ("True", "true"):
        return key.strip(), True
    if raw in ("False", "false"):
        return key.strip(), False
    if raw in ("None", "none"):
        return key.strip(), None
    try:
        return key.strip(), int(raw, 0)
    except ValueError:
        return key.strip(), raw


def resolve_params(unit, config=None, overrides=None):
    """Return ``(spec, params)``: defaults, then the named ``config``, then ``overrides``.

    Raises
    ------
    ValueError
        If the unit, the configuration or a parameter name is unknown.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}; known units: {', '.join(sorted(UNITS))}")
    spec = UNITS[unit]
    params = dict(spec.defaults)
    if config is not None:
        if config not in spec.configs:
            known = ", ".join(sorted(spec.configs)) or "none"
            raise ValueError(f"unknown configuration {config!r} for unit {unit!r}; known: {known}")
        params.update(spec.configs[config])
    for key, value in (overrides or {}).items():
        if key not in spec.defaults:
            known = ", ".join(sorted(spec.defaults))
            raise ValueError(f"unknown parameter {key!r} for unit {unit!r}; known: {known}")
        params[key] = value
    return spec, params
