"""The generator: registry, parameter resolution, command line, manifests."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from amaranth.lib import data

from qllm_cores.gen import UNITS, generate, resolve_params
from qllm_cores.gen.registry import parse_assignment
from qllm_cores.gen.verilog import layout_description, wrap_long_lines
from qllm_cores.verif.payload import PayloadCodec


def run_gen(*args, cwd):
    return subprocess.run([sys.executable, "-m", "qllm_cores.gen", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_every_unit_builds_with_defaults_and_every_config():
    for spec in UNITS.values():
        for config in [None, *spec.configs]:
            _, params = resolve_params(spec.name, config)
            assert set(params) == set(spec.defaults)


def test_unknown_unit_config_and_parameter_are_clear_errors():
    with pytest.raises(ValueError, match="unknown unit 'nope'; known units: .*kllm_concat"):
        resolve_params("nope")
    with pytest.raises(ValueError, match="unknown configuration 'x' for unit 'kllm_concat'"):
        resolve_params("kllm_concat", "x")
    with pytest.raises(ValueError, match="unknown parameter 'lane' for unit 'kllm_concat'"):
        resolve_params("kllm_concat", None, {"lane": 3})


def test_parse_assignment():
    assert parse_assignment("lanes=0x10") == ("lanes", 16)
    assert parse_assignment("mode=kk") == ("mode", "kk")
    assert parse_assignment("x_signed=false") == ("x_signed", False)
    with pytest.raises(ValueError, match="key=value"):
        parse_assignment("lanes")


def test_cli_writes_verilog_and_manifest(tmp_path):
    out = tmp_path / "v"
    result = run_gen("verilog", "--unit", "kllm_concat", "--set", "lanes=5", "--set", "a_bits=3",
                     "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = (out / "kllm_concat.v").read_text()
    assert "module kllm_concat(" in text
    assert str(tmp_path) not in text
    manifest = json.loads((out / "kllm_concat.json").read_text())
    assert manifest["params"] == {"a_bits": 3, "b_bits": 4, "lanes": 5,
                                  "pipeline": UNITS["kllm_concat"].defaults["pipeline"]}
    assert manifest["ports"]["i"]["direction"] == "in"
    assert manifest["clock"] == {"name": "clk", "edge": "rising"}
    assert manifest["reset"] == {"name": "rst", "polarity": "high", "synchronous": True}
    header = text[text.index("module kllm_concat("):].split(")")[0]
    assert {"clk", "rst"} <= {name.strip() for name in header.split("(")[1].split(",")}
    assert "input clk;" in text and "input rst;" in text
    assert manifest["ports"]["o"]["payload"]["width"] == 5 * 7


@pytest.mark.parametrize("args,message", [
    (["--unit", "kllm_concat", "--set", "a_bits=9"], "a_bits must be in range 1..8, not 9"),
    (["--unit", "kllm_concat", "--set", "lanes=0"], "lanes must be in range 1..4096, not 0"),
    (["--unit", "bogus"], "unknown unit 'bogus'"),
    (["--unit", "kllm_concat", "--set", "width=3"], "unknown parameter 'width'"),
    (["--unit", "kllm_concat", "--config", "kllm-a9"], "unknown configuration 'kllm-a9'"),
])
def test_cli_errors_exit_2_with_a_message(tmp_path, args, message):
    result = run_gen("verilog", *args, "--out", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr


def test_generation_is_reproducible(tmp_path):
    first = generate("kllm_concat", {"lanes": 7}, tmp_path / "a").read_text()
    second = generate("kllm_concat", {"lanes": 7}, tmp_path / "b").read_text()
    assert first == second


def test_wrap_long_lines_keeps_tokens_and_strings():
    line = "  assign x = { " + ", ".join(f"p[{i}]" for i in range(400)) + ' }; // "a, b"'
    wrapped = wrap_long_lines(line, limit=80)
    assert max(len(part) for part in wrapped.split("\n")) <= 90
    assert " ".join(wrapped.split()) == " ".join(line.split())
    assert wrap_long_lines('(* x = "a, b, c" *)', limit=5) == '(* x = "a, b, c" *)'


def test_payload_codec_agrees_with_amaranth_packing():
    # The manifest's layout description, used by the benches, must pack exactly as lib.data.
    layout = data.StructLayout({
        "x": data.ArrayLayout(3, 5),
        "flag": 1,
        "s": data.ArrayLayout(data.signed(6), 4),
        "last": 1,
    })
    codec = PayloadCodec(layout_description(layout))
    rng = np.random.default_rng(3)
    fields = {
        "x": rng.integers(0, 8, (50, 5)),
        "flag": rng.integers(0, 2, 50),
        "s": rng.integers(-32, 32, (50, 4)),
        "last": rng.integers(0, 2, 50),
    }
    words = codec.pack_batch(fields)
    for beat, word in enumerate(words):
        const = data.Const(layout, word)
        assert [const.x[k] for k in range(5)] == fields["x"][beat].tolist()
        assert [const.s[k] for k in range(4)] == fields["s"][beat].tolist()
        assert const.flag == fields["flag"][beat] and const.last == fields["last"][beat]
    back = codec.unpack_batch(words)
    for name, values in fields.items():
        np.testing.assert_array_equal(back[name], values)


def test_payload_codec_packs_arrays_of_arrays_as_amaranth():
    # An array of arrays is one leaf with an axis per level, outer first (row-major bits).
    layout = data.StructLayout({
        "x": data.ArrayLayout(data.signed(5), 4),
        "idx": data.ArrayLayout(data.ArrayLayout(2, 3), 2),
        "s": data.ArrayLayout(data.ArrayLayout(data.signed(3), 2), 3),
    })
    codec = PayloadCodec(layout_description(layout))
    rng = np.random.default_rng(4)
    fields = {
        "x": rng.integers(-16, 16, (20, 4)),
        "idx": rng.integers(0, 4, (20, 2, 3)),
        "s": rng.integers(-4, 4, (20, 3, 2)),
    }
    words = codec.pack_batch(fields)
    for beat, word in enumerate(words):
        const = data.Const(layout, word)
        assert [[const.idx[r][g] for g in range(3)] for r in range(2)] == \
            fields["idx"][beat].tolist()
        assert [[const.s[r][g] for g in range(2)] for r in range(3)] == \
            fields["s"][beat].tolist()
    back = codec.unpack_batch(words)
    for name, values in fields.items():
        np.testing.assert_array_equal(back[name], values)
    with pytest.raises(ValueError, match=r"field idx must have shape \(beats, 2, 3\)"):
        codec.pack_batch({**fields, "idx": fields["idx"].reshape(20, 6)})


def test_payload_codec_wide_payloads_pack_as_amaranth():
    # Payloads of up to 62 bits are packed with int64 arithmetic, wider ones with Python
    # integers: both paths must agree with lib.data.
    layout = data.StructLayout({"a": data.ArrayLayout(data.signed(9), 10), "b": 7})
    codec = PayloadCodec(layout_description(layout))
    assert codec.width > 62
    rng = np.random.default_rng(5)
    fields = {"a": rng.integers(-256, 256, (30, 10)), "b": rng.integers(0, 128, 30)}
    words = codec.pack_batch(fields)
    for beat, word in enumerate(words):
        const = data.Const(layout, word)
        assert [const.a[k] for k in range(10)] == fields["a"][beat].tolist()
        assert const.b == fields["b"][beat]
    back = codec.unpack_batch(words)
    for name, values in fields.items():
        np.testing.assert_array_equal(back[name], values)


def test_payload_codec_rejects_out_of_range_fields():
    codec = PayloadCodec(layout_description(data.StructLayout({"s": data.signed(4)})))
    with pytest.raises(ValueError, match="field s holds values outside -8..7"):
        codec.pack_batch({"s": np.array([8])})
    with pytest.raises(KeyError, match="'s' is missing"):
        codec.pack_batch({"t": np.array([0])})


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_every_unit_takes_pipeline_and_states_its_latency(unit):
    """contract section 0: every unit and baseline takes ``pipeline`` (0 = lowest latency, the
    default closes timing) and states its latency; the registry states its rate."""
    spec = UNITS[unit]
    assert "pipeline" in spec.defaults, f"{unit}: no pipeline parameter in the registry"
    for config in [None, *spec.configs]:
        _, params = resolve_params(unit, config)
        low = spec.build({**params, "pipeline": 0}).latency
        default = spec.build(params).latency
        assert isinstance(low, int) and isinstance(default, int), (config, low, default)
        assert 1 <= low <= default, (config, low, default)
        assert spec.results_per_cycle(params) > 0
    _, params = resolve_params(unit)
    with pytest.raises(ValueError, match=r"pipeline must be in range 0\.\."):
        spec.build({**params, "pipeline": -1})
    with pytest.raises(TypeError, match=r"pipeline must be an integer"):
        spec.build({**params, "pipeline": 1.0})


def test_manifest_states_latency_and_rate(tmp_path):
    for depth in (0, None):
        overrides = {} if depth is None else {"pipeline": depth}
        generate("p3_pe", overrides, tmp_path / str(depth))
        manifest = json.loads((tmp_path / str(depth) / "p3_pe.json").read_text())
        spec, params = resolve_params("p3_pe", None, overrides)
        assert manifest["latency"] == spec.build(params).latency
        assert (manifest["result"], manifest["results_per_cycle"]) == ("MAC", 4.0)


def test_elaboration_cases_are_legal_and_cover_every_configuration():
    """Every case of the elaboration benchmark passes its unit's parameter checks (the
    constructor runs; nothing is elaborated), and every unit's default and paper configurations
    are among the cases."""
    from qllm_cores.gen.elaboration import CASES, cases

    assert set(CASES) <= set(UNITS)
    listed = cases()
    for unit, spec in UNITS.items():
        labels = {label for name, label, _ in listed if name == unit}
        assert {"defaults", *spec.configs} <= labels
    for unit, _, overrides in listed:
        spec, params = resolve_params(unit, None, overrides)
        spec.build(params)


@pytest.mark.large
def test_elaboration_benchmark_prints_seconds_per_case(capsys):
    from qllm_cores.gen.__main__ import main

    assert main(["elaboration", "--unit", "accllm_sparse_selector", "--timeout", "300"]) == 0
    lines = capsys.readouterr().out.splitlines()
    cases = [line for line in lines if line.startswith("accllm_sparse_selector ")]
    assert [line.split()[1] for line in cases] == [
        "defaults", "accllm-block", "accllm-tile", "groups=64,rows=32,x_bits=16"]
    assert all(float(line.split()[2]) > 0 for line in cases)
    # The summary counts the slow cases but does not judge them (a loaded machine is slow):
    # a benchmark prints numbers, it asserts no time.
    assert re.fullmatch(r"4 cases, \d+ over 30 s, 0 failed", lines[-1])
    assert main(["elaboration", "--unit", "nope"]) == 2


def test_cli_checks_every_unit_before_writing(tmp_path):
    result = run_gen("verilog", "--unit", "kllm_concat", "--unit", "nosuch", "--out",
                     str(tmp_path / "v"), cwd=tmp_path)
    assert result.returncode == 2 and "unknown unit 'nosuch'" in result.stderr
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("prefix", ["1a", "a-b", "a b", "é"])
def test_a_prefix_must_start_a_verilog_identifier(tmp_path, prefix):
    result = run_gen("verilog", "--unit", "kllm_concat", "--prefix", prefix, "--out",
                     str(tmp_path / "v"), cwd=tmp_path)
    assert result.returncode == 2 and f"prefix must be empty or a Verilog identifier" in \
        result.stderr and repr(prefix) in result.stderr
    assert not (tmp_path / "v").exists()


def test_prefixed_configurations_share_one_verilog_project(tmp_path):
    """Two configurations of a unit with shared submodules (fp16_pcu's lanes) and two of
    Orizuru, each under its own prefix, lint clean together: no module name is defined
    twice, and every module of a file carries its prefix."""
    from qllm_cores.verif.__main__ import lint_file

    cases = [("fp16_pcu", {"lanes": 2}, "a_"), ("fp16_pcu", {"lanes": 3}, "b_"),
             ("orizuru", {"n": 8}, "a_"), ("orizuru", {"n": 16}, "b_")]
    texts, tops = [], []
    for unit, params, prefix in cases:
        path = generate(unit, params, tmp_path / "v", prefix=prefix)
        assert path.name == f"{prefix}{unit}.v"
        text = path.read_text()
        modules = [line.split()[1].split("(")[0] for line in text.splitlines()
                   if line.startswith("module ")]
        assert modules[0] == prefix + unit and all(name.startswith(prefix) for name in modules)
        manifest = json.loads(path.with_suffix(".json").read_text())
        assert manifest["top"] == prefix + unit
        assert all(name.startswith(prefix) for name in manifest["shared_modules"])
        texts.append(text)
        tops.append(prefix + unit)
    assert len(modules_of := [line for t in texts for line in t.splitlines()
                              if line.startswith("module ")]) == len(set(modules_of))
    together = tmp_path / "together.v"
    together.write_text("".join(texts))
    for top in tops:
        assert lint_file(together, top) == [], top
    # Without a prefix the Verilog is what it always was.
    plain = generate("fp16_pcu", {"lanes": 2}, tmp_path / "plain").read_text()
    assert plain == texts[0].replace("a_fp16_pcu", "fp16_pcu")


def test_an_unusable_out_folder_is_one_line_and_exit_2(tmp_path):
    existing = tmp_path / "a_file"
    existing.write_text("keep")
    result = run_gen("verilog", "--unit", "kllm_concat", "--out", str(existing), cwd=tmp_path)
    assert result.returncode == 2 and "exists and is not a folder" in result.stderr
    assert "Traceback" not in result.stderr and existing.read_text() == "keep"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):           # running as root: permissions do not bind
            return
        result = run_gen("verilog", "--unit", "kllm_concat", "--out", str(locked / "v"),
                         cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert str(locked / "v") in result.stderr or "--out" in result.stderr
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize("unit,params", [
    ("orizuru", {"n": 8}),                                        # structure, pipeline: None
    ("kllm_idx_counter", {"n_inputs": 2, "idx_bits": 3, "max_len": 16}),   # weight_bits: kk
    ("kllm_idx_counter", {"n_inputs": 2, "idx_bits": 3, "mode": "ik", "max_len": 16}),
])
def test_the_manifest_holds_the_parameters_as_resolved(unit, params, tmp_path):
    """No ``None`` in a manifest's parameters; rebuilt from them, the unit's Verilog is the
    same file; the file's header states the package version and the same parameters."""
    from qllm_cores import __version__

    first = generate(unit, params, tmp_path / "a")
    manifest = json.loads(first.with_suffix(".json").read_text())
    assert None not in manifest["params"].values()
    assert set(manifest["params"]) <= set(UNITS[unit].defaults)
    again = generate(unit, manifest["params"], tmp_path / "b")
    assert again.read_text() == first.read_text()
    head = first.read_text().splitlines()[:3]
    assert __version__ in head[0] and unit in head[0]
    assert head[1] == "// Parameters: " + " ".join(f"{key}={value}" for key, value
                                                     in manifest["params"].items())
    assert f"Latency (cycles): {manifest['latency']};" in head[2]
    if unit == "orizuru":
        assert manifest["params"]["structure"] == "tree" and manifest["params"]["pipeline"] == 2
    elif params.get("mode") == "ik":
        assert manifest["params"]["weight_bits"] == 4
    else:
        assert "weight_bits" not in manifest["params"]


def test_registry_defaults_are_the_constructors():
    """Every keyword of a unit's constructor is a registry parameter with its default, so
    ``--set`` takes all of them (the counter's ``overflow`` was once missing)."""
    import inspect

    from qllm_cores.gen.registry import load_object

    for spec in UNITS.values():
        signature = inspect.signature(load_object(spec.factory))
        assert spec.defaults == {name: p.default for name, p in signature.parameters.items()
                                 if p.kind is p.KEYWORD_ONLY}, spec.name
    _, params = resolve_params("kllm_idx_counter", None, {"overflow": True})
    assert params["overflow"] is True
