# amaranth: UnusedElaboratable=no
# (components are built for their signature only, or simulated without being converted)
"""One name finds everything: every registered unit names its golden adapter, bench and doc, and
the adapter speaks the unit's ports and payload fields.

The adapter (in its paper's ``golden.<paper>.beats``) is what the benches and the board host
compare the RTL with; these tests check that it fits the unit it is registered for: at the
unit's parameters its stimulus has exactly the unit's input ports and payload fields (in range,
in the layout's shapes) and its expected output exactly the output ports and fields, with one
beat count per port.
"""

import gc
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from qllm_cores.gen.registry import UNITS, load_object, resolve_params
from qllm_cores.gen.verilog import port_description
from qllm_cores.golden.adapters import MODELS
from qllm_cores.golden.common.beats import BeatModel
from qllm_cores.verif.bench import golden_model
from qllm_cores.verif.payload import PayloadCodec

ROOT = Path(__file__).resolve().parent.parent

#: Besides every unit's defaults: configurations that change the ports' fields.
EXTRA_CONFIGS = [
    ("kllm_idx_counter", "kllm-ik-a4", {}),
    ("kllm_idx_counter", None, {"n_inputs": 64, "idx_bits": 3}),   # a 64-bit mask
    ("orizuru", None, {"n": 2048, "k": 3}),                          # two beats per vector
    ("oaken_dequantizer", "oaken-64", {}),
    ("accllm_dsp_mul", "accllm-w2-xilinx", {"cross_products": True}),
    ("accllm_dsp_mul", "accllm-w8-xilinx-acc7", {}),
    ("accllm_plain_mul", None, {"mode": "w8", "x_signed": False}),
    ("accllm_sparse_selector", None, {"groups": 3, "rows": 2}),
    ("fp16_mac", "fp16-acc", {}),                                    # a 16-bit result
]

CASES = [(unit, None, {}) for unit in sorted(UNITS)] + EXTRA_CONFIGS


def _case_id(case):
    unit, config, overrides = case
    return "-".join([unit] + ([config] if config else [])
                    + [f"{k}{v}" for k, v in overrides.items()])


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_golden_names_a_beat_model(unit):
    spec = UNITS[unit]
    assert spec.golden is not None, unit
    module, _, name = spec.golden.partition(":")
    assert module.startswith("qllm_cores.golden.") and module.endswith(".beats"), spec.golden
    model = load_object(spec.golden)
    assert isinstance(model, BeatModel)
    assert model is golden_model(unit)
    assert MODELS[model.name] is model
    assert name == model.name, spec.golden


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_testbench_module_exists(unit):
    spec = UNITS[unit]
    assert spec.testbench is not None and spec.testbench.startswith("qllm_cores.verif.")
    assert spec.testbench.rpartition(".")[2].startswith("tb_"), spec.testbench
    assert importlib.util.find_spec(spec.testbench) is not None, spec.testbench


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_doc_exists(unit):
    spec = UNITS[unit]
    assert spec.doc is not None and spec.doc.startswith("docs/units/"), spec.doc
    assert (ROOT / spec.doc).is_file(), spec.doc


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_report_rows_and_benchmark_resolve(unit):
    """Report rows name the unit's configurations and parameters; a benchmark is a function."""
    spec = UNITS[unit]
    for row in spec.report:
        resolve_params(unit, row.config, dict(row.overrides))     # raises if unknown
        named = (row.baseline_of,) if isinstance(row.baseline_of, str) else row.baseline_of
        for label in named or ():
            base, _, config = label.partition("@")
            assert any(r.config == config for r in UNITS[base].report), label
    if spec.benchmark is not None:
        assert callable(load_object(spec.benchmark))


def test_every_adapter_serves_a_unit():
    used = {load_object(spec.golden).name for spec in UNITS.values()}
    assert used == set(MODELS)


def test_load_object():
    assert load_object("qllm_cores.gen.registry:UNITS") is UNITS
    assert load_object("qllm_cores.golden.common.beats:BeatModel.same") is BeatModel.same
    for bad in ("qllm_cores.gen.registry", "gen.registry:", ":UNITS"):
        with pytest.raises(ValueError, match="module:name"):
            load_object(bad)
    with pytest.raises(AttributeError):
        load_object("qllm_cores.gen.registry:NO_SUCH_NAME")


def test_golden_model_of_an_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit 'nope'"):
        golden_model("nope")


# --------------------------------------------------------------------------- ports and fields


def _leaf_shapes(description, path=()):
    """``{field path: array shape}`` of a payload description (a plain field: ())."""
    if description["kind"] == "struct":
        shapes = {}
        for fld in description["fields"]:
            shapes.update(_leaf_shapes(fld["shape"], path + (fld["name"],)))
        return shapes
    shape = ()
    while description["kind"] == "array":
        shape += (description["length"],)
        description = description["elem"]
    return {path: shape}


def _leaves(fields, path=()):
    leaves = {}
    for name, value in fields.items():
        if isinstance(value, dict):
            leaves.update(_leaves(value, path + (name,)))
        else:
            leaves[path + (name,)] = np.asarray(value)
    return leaves


def _check_port(where, fields, description):
    """Exactly the layout's fields, each (beats,) + the layout's array shape, one beat count,
    every value in its field's range (packing refuses any other); return the beat count."""
    shapes = _leaf_shapes(description)
    leaves = _leaves(fields)
    assert sorted(leaves) == sorted(shapes), f"{where}: fields {sorted(leaves)}, " \
                                             f"the unit's {sorted(shapes)}"
    beats = {len(value) for value in leaves.values()}
    assert len(beats) == 1, f"{where}: fields with different beat counts {beats}"
    for path, value in leaves.items():
        assert value.shape[1:] == shapes[path], (
            f"{where}.{'.'.join(path)}: shape {value.shape}, the layout's (beats,) + "
            f"{shapes[path]}")
    PayloadCodec(description).pack_batch(fields)
    return beats.pop()


@pytest.fixture(scope="module")
def port_descriptions():
    cache = {}

    def describe(unit, params):
        key = (unit, tuple(sorted(params.items())))
        if key not in cache:
            component = UNITS[unit].build(params)
            cache[key] = port_description(component)
            del component
            gc.collect()
        return cache[key]
    return describe


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_adapter_speaks_the_units_ports_and_fields(case, port_descriptions):
    unit, config, overrides = case
    _, params = resolve_params(unit, config, overrides)
    ports = port_descriptions(unit, params)
    model = golden_model(unit)
    inputs = model.stimulus(np.random.default_rng(5), params, 4)
    outputs = model.expected(params, inputs)
    in_ports = {name for name, port in ports.items() if port["direction"] == "in"}
    out_ports = {name for name, port in ports.items() if port["direction"] == "out"}
    assert set(inputs) == in_ports
    assert set(outputs) == out_ports
    sent = {port: _check_port(f"{unit} {port}", inputs[port], ports[port]["payload"])
            for port in sorted(in_ports)}
    received = {port: _check_port(f"{unit} {port}", outputs[port], ports[port]["payload"])
                for port in sorted(out_ports)}
    assert all(n > 0 for n in sent.values()), sent
    assert all(n > 0 for n in received.values()), received
    # Every field compared otherwise than bit for bit is an output field.
    out_fields = {path[-1] for port in out_ports for path in _leaves(outputs[port])}
    assert set(model.equal) <= out_fields
    if model.order is not None:
        order = np.asarray(model.order(params, inputs)).tolist()
        assert {port: order.count(port) for port in in_ports} == sent
    else:
        assert len(in_ports) == 1, "several input streams need an order"


def test_stimulus_is_reproducible():
    for unit in sorted(UNITS):
        _, params = resolve_params(unit)
        model = golden_model(unit)
        first = _leaves(model.stimulus(np.random.default_rng(9), params, 3))
        again = _leaves(model.stimulus(np.random.default_rng(9), params, 3))
        assert first.keys() == again.keys()
        for path in first:
            np.testing.assert_array_equal(first[path], again[path])


# --------------------------------------------------------------------------- order


def _simulate_in_order(unit, params, inputs, order, *, max_wait=200):
    """Run the unit in Amaranth's simulator, offering one beat at a time in ``order`` (as the
    UART bridge does) with the output always ready; return the output fields per port."""
    from amaranth.sim import Simulator

    dut = UNITS[unit].build(params)
    ports = port_description(dut)
    codecs = {name: PayloadCodec(port["payload"]) for name, port in ports.items()}
    words = {name: codecs[name].pack_batch(inputs[name]) for name in inputs}
    got = {name: [] for name, port in ports.items() if port["direction"] == "out"}
    position = dict.fromkeys(words, 0)
    stuck = []

    async def bench(ctx):
        for name in got:
            ctx.set(getattr(dut, name).ready, 1)
        for port in order:
            stream = getattr(dut, port)
            ctx.set(stream.payload.as_value(), words[port][position[port]])
            ctx.set(stream.valid, 1)
            for _ in range(max_wait):
                _, _, ready = await ctx.tick().sample(stream.ready)
                for name in got:
                    out = getattr(dut, name)
                    if ctx.get(out.valid):
                        got[name].append(ctx.get(out.payload.as_value()))
                if ready:
                    break
            else:
                stuck.append(f"{port} beat {position[port]} not taken in {max_wait} cycles")
                return
            ctx.set(stream.valid, 0)
            position[port] += 1
        for _ in range(max_wait):
            await ctx.tick()
            for name in got:
                out = getattr(dut, name)
                if ctx.get(out.valid):
                    got[name].append(ctx.get(out.payload.as_value()))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not stuck, stuck
    return {name: codecs[name].unpack_batch(values) for name, values in got.items()}


@pytest.mark.parametrize("unit,overrides", [
    ("oaken_dequantizer", {"lanes": 4, "vec_len": 16, "data_bits": 8, "frac_bits": 4}),
    ("oaken_dequantizer", {"lanes": 8, "vec_len": 16, "data_bits": 8, "frac_bits": 4,
                           "pipeline": 0}),
])
def test_order_is_taken_one_beat_at_a_time(unit, overrides):
    """The adapter's order never offers a beat the unit cannot take before another stream's
    beat arrives, and the outputs are the adapter's expected beats."""
    _, params = resolve_params(unit, None, overrides)
    model = golden_model(unit)
    inputs = model.stimulus(np.random.default_rng(11), params, 12)
    order = np.asarray(model.order(params, inputs)).tolist()
    got = _simulate_in_order(unit, params, inputs, order)
    expected = model.expected(params, inputs)
    for port, fields in expected.items():
        for path, want in _leaves(fields).items():
            have = np.asarray(_leaves(got[port])[path])
            assert have.shape[0] == want.shape[0], f"{port}: {have.shape[0]} beats of " \
                                                   f"{want.shape[0]}"
            np.testing.assert_array_equal(have.reshape(want.shape), want)
