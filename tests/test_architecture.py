"""The layering of the design card: golden and hdl stand on the papers and the spec alone,
verif and tests meet them, fpga measures what gen generates.

Imports are read from the source (``import x``, ``from x import y``, at any depth in a file),
so that a lazy import inside a function counts too.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: package -> packages of this project it must never import.
FORBIDDEN = {
    "golden": {"hdl", "verif", "gen", "fpga"},
    "hdl": {"golden", "verif", "gen", "fpga"},
    "gen": {"golden", "verif", "fpga"},
    "verif": {"fpga"},
}

#: Known imports across a forbidden edge, each waiting for its move (file -> packages); empty
#: since the board link moved to fpga/bridge/ (issue 16).
PENDING: dict[str, set[str]] = {}


#: The project's subpackages (``qllm_cores.<name>``, the repository's top-level folders).
SUBPACKAGES = ("hdl", "golden", "gen", "verif", "fpga")


def _imported_modules(path):
    """Absolute module names imported anywhere in ``path``."""
    modules = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
    return modules


def _imported_packages(path):
    """Top-level packages imported anywhere in ``path``; for the project's own modules
    (``qllm_cores.hdl.common.arith``) the subpackage (``hdl``)."""
    packages = set()
    for module in _imported_modules(path):
        parts = module.split(".")
        packages.add(parts[1] if parts[0] == "qllm_cores" and len(parts) > 1 else parts[0])
    return packages


def test_the_project_is_imported_by_its_one_name():
    """No bare ``import hdl`` (or gen, golden, verif, fpga) anywhere: the installed library
    has one top-level package, ``qllm_cores``."""
    bare = {}
    for folder in (*SUBPACKAGES, "qllm_cores", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found = sorted({m for m in _imported_modules(path) if m.split(".")[0] in SUBPACKAGES})
            if found:
                bare[path.relative_to(ROOT).as_posix()] = found
    assert bare == {}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_across_the_layers(package):
    crossing = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        bad = (_imported_packages(path) & FORBIDDEN[package]) - PENDING.get(name, set())
        if bad:
            crossing[name] = sorted(bad)
    assert crossing == {}, f"imports across the layers: {crossing}"


def test_pending_crossings_are_still_there():
    """An entry of PENDING that no longer imports across is removed from it (the list only
    shrinks)."""
    for name, packages in PENDING.items():
        assert packages <= _imported_packages(ROOT / name), name


def test_the_reader_sees_imports_at_any_depth(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("import os.path\nfrom qllm_cores.golden import kllm\n\ndef f():\n"
                      "    from qllm_cores.fpga.yosys import synth\n"
                      "    import qllm_cores.hdl.common.arith as arith\nfrom . import sibling\n"
                      "import qllm_cores\n")
    assert _imported_packages(source) == {"os", "golden", "fpga", "hdl", "qllm_cores"}


def test_every_package_folder_is_in_the_wheel():
    """Every folder of the project with an ``__init__.py`` is a package ``pyproject.toml``
    lists (its list is explicit: a package left out is missing from the wheel)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {"qllm_cores"}
    for name in SUBPACKAGES:
        for init in (ROOT / name).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(("qllm_cores", *parts)))
    assert found == listed


def _private_imports(path):
    """``(line, module, name)`` of every private name (``_x``, not ``__x__``) ``path`` imports
    from a project module, or a private project module it imports."""
    private = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        module = node.module or ""
        if node.level == 0 and module.split(".")[0] != "qllm_cores":
            continue
        names = [alias.name for alias in node.names]
        names += [part for part in module.split(".") if part]
        private += [(node.lineno, module, name) for name in names
                    if name.startswith("_") and not name.startswith("__")]
    return private


@pytest.mark.parametrize("folder", [*SUBPACKAGES, "tests"])
def test_no_private_name_is_imported_across_modules(folder):
    """A module's private names stay in it (house style): a name another module needs is
    public."""
    found = {path.relative_to(ROOT).as_posix(): bad
             for path in sorted((ROOT / folder).rglob("*.py")) if (bad := _private_imports(path))}
    assert found == {}


def test_the_private_import_reader_sees_names_and_modules(tmp_path):
    source = tmp_path / "module.py"
    source.write_text("from qllm_cores.hdl.common.arith import named, _helper\n"
                      "from ._checks import check_int\nfrom os import _exit\n"
                      "from .sibling import __all__\n")
    assert _private_imports(source) == [(1, "qllm_cores.hdl.common.arith", "_helper"),
                                        (2, "_checks", "_checks")]


#: Longest module in hdl/, gen/, verif/ and fpga/ (house style: split a module along its parts).
MAX_LINES = 550


@pytest.mark.parametrize("folder", ["hdl", "gen", "verif", "fpga"])
def test_no_module_is_longer_than_the_limit(folder):
    long = {path.relative_to(ROOT).as_posix(): n
            for path in sorted((ROOT / folder).rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}
