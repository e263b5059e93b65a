"""FuseSoC generator: a FuseSoC core instantiates a unit with parameters (docs/integration.md).

The generator core ``qllm:cores:generator`` (``gen/capi2/qllm_cores.core``, shipped with the
package; ``python -m qllm_cores.gen.fusesoc --cores-root`` prints its folder) registers the
generator ``qllm_gen``. A user's core depends on it and asks for a unit in a ``generate``
section::

    generate:
      concat4:
        generator: qllm_gen
        parameters: {unit: kllm_concat, params: {lanes: 4}}

FuseSoC runs ``python3 qllm_gen.py <input>.yml`` (GAPI 1.0: ``parameters``, ``vlnv``,
``files_root``) in a fresh folder; :func:`main` reads the parameters, writes the Verilog and
manifest there as ``qllm verilog`` does (:func:`gen.verilog.generate`) and a core named
``vlnv`` whose ``default`` target lists them, which FuseSoC adds to the user's build.

Parameters (the ``parameters`` map): ``unit`` (required, a registered unit: ``qllm list``),
``config`` (a named paper configuration), ``params`` (a map of parameter overrides), ``prefix``
(module and file name prefix), ``axis`` (bool: the AXI4-Stream form ``<unit>_axis``). Bad
parameters print one line and exit with status 2, which fails the FuseSoC run.
"""

import sys
from pathlib import Path

from .verilog import generate

__all__ = ["CORE", "PARAMETERS", "core_text", "main", "run"]

#: The generator core shipped with the package (its folder is a FuseSoC cores root).
CORE = Path(__file__).resolve().parent / "capi2" / "qllm_cores.core"

#: Generator parameter -> (type, required).
PARAMETERS = {"unit": (str, True), "config": (str, False), "params": (dict, False),
              "prefix": (str, False), "axis": (bool, False)}


def run(gapi, out_dir):
    """Generate what the GAPI input ``gapi`` (a dict: ``parameters``, ``vlnv``) asks for in
    ``out_dir``; return the path of the core file written. ``ValueError`` or ``TypeError``
    for bad parameters (nothing is written then)."""
    parameters = gapi.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise TypeError(f"parameters must be a map, not {parameters!r}")
    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; known: "
                         f"{', '.join(PARAMETERS)}")
    for name, (kind, required) in PARAMETERS.items():
        if required and name not in parameters:
            raise ValueError(f"parameter {name!r} is required (a unit of `qllm list`)")
        if name in parameters and not isinstance(parameters[name], kind):
            raise TypeError(f"parameter {name!r} must be a {kind.__name__}, not "
                            f"{parameters[name]!r}")
    vlnv = gapi.get("vlnv")
    if not isinstance(vlnv, str) or not vlnv:
        raise ValueError("the GAPI input names no vlnv")
    out_dir = Path(out_dir)
    verilog = generate(parameters["unit"], parameters.get("params"), out_dir,
                       config=parameters.get("config"), prefix=parameters.get("prefix", ""),
                       axis=parameters.get("axis", False))
    core = out_dir / (vlnv.replace(":", "_") + ".core")
    core.write_text(core_text(vlnv, verilog, parameters))
    return core


def core_text(vlnv, verilog, parameters):
    """The CAPI2 core of a generated unit: name ``vlnv``, fileset ``rtl`` with the Verilog
    ``verilog`` (top module: its stem) and its manifest (``user`` file), ``default`` target."""
    manifest = verilog.with_suffix(".json").name
    summary = ", ".join(f"{key}={value}" for key, value in parameters.items())
    return (
        "CAPI=2:\n"
        f"name: {_quoted(vlnv)}\n"
        f"description: {_quoted(f'qllm-cores unit, top module {verilog.stem} ({summary})')}\n"
        "filesets:\n"
        "  rtl:\n"
        "    files:\n"
        f"      - {_quoted(verilog.name)}: {{file_type: verilogSource}}\n"
        f"      - {_quoted(manifest)}: {{file_type: user}}\n"
        "targets:\n"
        "  default:\n"
        "    filesets: [rtl]\n"
    )


def _quoted(text):
    """``text`` as a double-quoted YAML scalar."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def main(argv=None):
    """``python -m qllm_cores.gen.fusesoc INPUT.yml`` (what FuseSoC runs, in the output
    folder) or ``--cores-root`` (print the folder holding the generator core)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--cores-root"]:
        print(CORE.parent)
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m qllm_cores.gen.fusesoc INPUT.yml | --cores-root",
              file=sys.stderr)
        return 2
    try:
        import yaml     # FuseSoC's own dependency: where FuseSoC runs, PyYAML is installed
    except ImportError:
        print("qllm_gen: error: reading FuseSoC's generator input needs PyYAML "
              "(pip install pyyaml)", file=sys.stderr)
        return 2
    try:
        gapi = yaml.safe_load(Path(argv[0]).read_text())
        if not isinstance(gapi, dict):
            raise ValueError(f"{argv[0]}: not a GAPI map")
        core = run(gapi, Path.cwd())
    except (ValueError, TypeError) as error:
        print(f"qllm_gen: error: {error}", file=sys.stderr)
        return 2
    except (OSError, yaml.YAMLError) as error:
        print(f"qllm_gen: error: {argv[0]}: {error}", file=sys.stderr)
        return 2
    print(f"qllm_gen: wrote {core}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
