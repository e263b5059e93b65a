"""Elaborate a unit to Verilog and write its manifest."""

import gc
import json
import os
import re
from pathlib import Path

import amaranth
from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib import data, wiring

from .axis import SUFFIX, axis_header, axis_manifest, wrap
from .registry import resolve_params

__all__ = ["LINT_WAIVERS", "convert", "generate", "header", "layout_description", "manifest",
           "port_description", "signal_description", "unit_manifest", "waived",
           "wrap_long_lines", "write_manifest"]

#: ``verilator -Wall`` rules every emitted file waives inline, around its modules (so that it
#: lints clean on its own or inside another project, and the waivers end with the file). Each
#: is a property of how Amaranth and Yosys write Verilog, not of a unit's design
#: (docs/verification.md, "Lint").
LINT_WAIVERS = ("DECLFILENAME", "PROCASSINIT", "UNUSEDSIGNAL", "WIDTHEXPAND", "WIDTHTRUNC")

#: Longest generated Verilog line. Yosys writes a concatenation on one line; Verilator refuses
#: lines of more than 40,000 preprocessor tokens (``kllm_concat`` with 4096 lanes has 8192).
MAX_LINE = 200


def layout_description(shape):
    """Describe a payload shape as plain JSON data (offsets from the least significant bit).

    ``{"kind": "int", "width": w, "signed": s}`` for a plain shape,
    ``{"kind": "struct", "width": w, "fields": [{"name", "offset", "shape"}, ...]}`` and
    ``{"kind": "array", "width": w, "length": n, "elem": shape}`` for ``lib.data`` layouts.
    """
    if isinstance(shape, data.StructLayout):
        return {
            "kind": "struct",
            "width": shape.size,
            "fields": [
                {"name": name, "offset": fld.offset, "shape": layout_description(fld.shape)}
                for name, fld in shape
            ],
        }
    if isinstance(shape, data.ArrayLayout):
        return {
            "kind": "array",
            "width": shape.size,
            "length": shape.length,
            "elem": layout_description(shape.elem_shape),
        }
    if isinstance(shape, data.Layout):
        raise TypeError(f"payload layout {shape!r} is not a StructLayout or an ArrayLayout")
    cast = Shape.cast(shape)
    return {"kind": "int", "width": cast.width, "signed": cast.signed}


def port_description(component):
    """Describe every stream port of ``component``: direction and payload layout."""
    ports = {}
    for name, member in component.signature.members.items():
        if not member.is_signature:
            continue
        members = member.signature.members
        if not {"valid", "ready", "payload"} <= set(members):
            continue
        ports[name] = {
            "direction": "in" if member.flow == wiring.In else "out",
            "payload": layout_description(members["payload"].shape),
        }
    return ports


def signal_description(component):
    """Describe every plain (non-stream) port of ``component``: direction and width."""
    signals = {}
    for name, member in component.signature.members.items():
        if member.is_port:
            shape = Shape.cast(member.shape)
            signals[name] = {"direction": "in" if member.flow == wiring.In else "out",
                             "width": shape.width, "signed": shape.signed}
    return signals


#: A ``--prefix``: empty, or the start of a Verilog identifier.
PREFIX_PATTERN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)?")


def check_prefix(prefix):
    """``prefix`` if it is a valid module-name prefix (``""`` or ``[A-Za-z_][A-Za-z0-9_]*``),
    else ``ValueError`` naming it."""
    if not isinstance(prefix, str) or not PREFIX_PATTERN.fullmatch(prefix):
        raise ValueError(f"prefix must be empty or a Verilog identifier ([A-Za-z_]"
                         f"[A-Za-z0-9_]*), not {prefix!r}")
    return prefix


def convert(component, name, prefix=""):
    """Verilog text of ``component`` as module ``prefix + name`` (``emit_src=False``),
    followed by the modules of its shared units (:class:`hdl.common.shared_modules.SharedModules`,
    a component's ``shared_modules``), each converted once however many times it is
    instantiated, in name order, its name prefixed too; a shared unit may instantiate others
    (their modules are converted in turn)."""
    check_prefix(prefix)
    shared = getattr(component, "shared_modules", None)
    if shared is not None:
        shared.emit = True
        shared.prefix = prefix
    texts = [verilog.convert(component, name=prefix + name, emit_src=False)]
    converted = set()
    while shared is not None and set(shared.modules) - converted:
        for module_name in sorted(set(shared.modules) - converted):
            texts.append(verilog.convert(shared.modules[module_name],
                                         name=prefix + module_name, emit_src=False))
            converted.add(module_name)
    return wrap_long_lines("".join(texts))


def header(described):
    """The comment that opens an emitted file: package version, unit, configuration,
    resolved parameters, latency, clock and reset (from the manifest ``described``)."""
    from qllm_cores import __version__

    params = " ".join(f"{key}={value}" for key, value in described["params"].items())
    clock, reset = described["clock"], described["reset"]
    lines = [
        f"Generated by qllm-cores {__version__}: unit {described['unit']}"
        + (f", configuration {described['config']}" if described["config"] else ""),
        f"Parameters: {params or '(none)'}",
        f"Latency (cycles): {described['latency']}; clock {clock['name']} ({clock['edge']} edge); "
        f"reset {reset['name']} (active {reset['polarity']}, "
        f"{'synchronous' if reset['synchronous'] else 'asynchronous'})",
    ]
    return "".join(f"// {line}\n" for line in lines)


def waived(text):
    """``text`` between ``verilator lint_off`` and ``lint_on`` comments for
    :data:`LINT_WAIVERS`."""
    off = "".join(f"/* verilator lint_off {rule} */\n" for rule in LINT_WAIVERS)
    on = "".join(f"/* verilator lint_on {rule} */\n" for rule in LINT_WAIVERS)
    return off + text + on


def generate(unit, params=None, out_dir="build/verilog", *, config=None, prefix="",
             axis=False):
    """Write ``<out_dir>/<prefix><unit>.v`` and ``.json``; return the Verilog path.

    ``params`` override the unit's defaults (after the named ``config``, if any). The Verilog
    is generated with ``emit_src=False``: it carries no source paths and is reproducible.
    ``prefix`` is prepended to the top module and every module it instantiates, so that
    several configurations live in one Verilog project (contract section 0).
    ``axis`` writes the AXI4-Stream form instead, ``<prefix><unit>_axis.v`` and ``.json``
    (:mod:`gen.axis`, docs/integration.md); ``ValueError`` for a unit without streams.
    """
    check_prefix(prefix)
    spec, requested = resolve_params(unit, config, params)
    component = spec.build(requested)
    top = wrap(component, unit) if axis else component
    stem = unit + SUFFIX if axis else unit
    text = convert(top, stem, prefix)
    described = manifest(spec, component, config)
    if prefix:
        described["top"] = prefix + unit
        described["shared_modules"] = [prefix + name for name in described["shared_modules"]]
    if axis:
        described = axis_manifest(described, top)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    verilog_path = out_dir / f"{prefix}{stem}.v"
    notes = axis_header(described) if axis else ""
    _write_if_changed(verilog_path, header(described) + notes + waived(text))
    write_manifest(out_dir / f"{prefix}{stem}.json", described)
    return verilog_path


def manifest(spec, component, config=None):
    """The manifest of ``component``, built by ``spec``: what the benches, the board link and
    the flows read about a generated unit (plain JSON data). ``params`` are the parameters
    as the component resolved them (:meth:`~gen.registry.UnitSpec.resolved`: no ``None``)."""
    shared = getattr(component, "shared_modules", None)
    params = spec.resolved(component)
    return {
        "unit": spec.name,
        "top": spec.name,
        "config": config,
        "params": params,
        "latency": getattr(component, "latency", None),
        # One clock domain (contract section 0): Amaranth's `sync`, its reset synchronous.
        "clock": {"name": "clk", "edge": "rising"},
        "reset": {"name": "rst", "polarity": "high", "synchronous": True},
        "ports": port_description(component),
        "signals": signal_description(component),
        "baseline": spec.baseline,
        "ops_per_cycle": spec.ops_per_cycle,
        # Throughput at full rate: results (what ``result`` names) per cycle.
        "result": spec.result,
        "results_per_cycle": spec.results_per_cycle(params),
        # Units that end their input in reductions: the shortest reduction (beats) that
        # streams with no stall, where the unit states one.
        "stall_free_beats": getattr(component, "stall_free_beats", None),
        # Vendor primitives the Verilog instantiates (simulation adds verif/models/<name>.v),
        # and the area targets it can be synthesized for (None: all).
        "primitives": list(getattr(component, "primitives", ())),
        # Modules emitted once and instantiated many times (hdl.common.shared_modules): simulators
        # keep them as modules instead of inlining every instance.
        "shared_modules": sorted(shared.modules) if shared is not None else [],
        "synth_targets": _optional_list(getattr(component, "synth_targets", None)),
        "amaranth": amaranth.__version__,
    }


def unit_manifest(unit, params=None, *, config=None):
    """The manifest of a registered unit, without generating Verilog (the component is built
    for its signature and dropped)."""
    spec, requested = resolve_params(unit, config, params)
    component = spec.build(requested)
    described = manifest(spec, component, config)
    del component
    gc.collect()            # components hold reference cycles: free this one here
    return described


def write_manifest(path, described):
    """Write a manifest as ``make verilog`` does (unchanged files keep their timestamp)."""
    _write_if_changed(Path(path), json.dumps(described, indent=2) + "\n")


def _optional_list(value):
    return None if value is None else list(value)


def _write_if_changed(path, text):
    """Write ``text`` unless the file already holds it (keeps timestamps for incremental
    builds); through a temporary file renamed over ``path``, so that a reader never sees a
    partial file."""
    if path.is_file() and path.read_text() == text:
        return
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def wrap_long_lines(text, limit=MAX_LINE):
    """Break Verilog lines longer than ``limit`` after ``", "`` separators outside string
    literals. Verilog treats a newline like a space there, so the meaning is unchanged."""
    return "\n".join(_wrap_line(line, limit) for line in text.split("\n"))


def _wrap_line(line, limit):
    if len(line) <= limit:
        return line
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    pieces, start, in_string = [], 0, False
    for index, char in enumerate(line):
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            in_string = not in_string
        if (not in_string and char == "," and line.startswith(", ", index)
                and index - start > limit - len(indent)):
            pieces.append(line[start:index + 1])
            start = index + 2
    pieces.append(line[start:])
    return ("\n" + indent).join(pieces)
