"""``python -m qllm_cores.golden.paper``: the papers' numbers next to ours (golden/paper/).

Expected values here come from the papers (quoted, and checked against the paper text when
``../shared/papers`` is present) or from first-principles arithmetic written in this file,
never from the report's output. Where cheap, "ours" is recomputed by a different route: a
plain-Python Orizuru written from KLLM section IV-C with a counting comparison, closed forms of
the scan baseline, bit budgets from the format definitions, a hand-written INT-b rounding, a
direct per-token K-Means-free uniform quantizer.
"""

import csv
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qllm_cores.golden import kllm, paper
from qllm_cores.golden.kllm import orizuru

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ROOT.parent / "shared" / "papers"
PAPER_FILES = {"KLLM": "kllm.txt", "Oaken": "oaken.txt", "P3-LLM": "p3-llm.txt",
               "AccLLM": "accllm.txt"}
TOKENS = 4                   # KLLM tokens per data set: small, keeps the module fast


@pytest.fixture(scope="module")
def rows():
    return paper.collect(seed=0, tokens=TOKENS)


@pytest.fixture(scope="module")
def by_key(rows):
    return {r.key: r for r in rows}


# --- the command ---------------------------------------------------------------------------


REQUIRED = {
    # item 1: Orizuru at the paper's configurations, phases, baselines
    "orizuru.total.n8", "orizuru.total.n16", "orizuru.total.n4096", "orizuru.init_max.n8",
    "orizuru.maint.n8", "orizuru.min_saving.n16", "orizuru.baseline.n16",
    "orizuru.baseline.n4096", "orizuru.kllm16",
    # item 2: Oaken bits per outlier and effective bitwidth at the paper's ratios
    "oaken.bits_per_outlier", "oaken.coo23", "oaken.eff.0.04_0.06", "oaken.eff.0_0.1",
    "oaken.eff.0.1_0", "oaken.table2.Llama2-7B", "oaken.table2.Llama2-13B",
    "oaken.table2.Llama2-70B", "oaken.chunk_meta",
    # item 3: P3-LLM bits and orderings
    "p3.int4_asym", "p3.bitmod", "p3.e4m3", "p3.s0e4m4", "p3.order.scores",
    "p3.order.weights", "p3.order.acts", "p3.order.keys",
    # item 4: KLLM
    "kllm.centroid_drift", "kllm.kmeans_vs_uniform.a3", "kllm.kmeans_vs_uniform.a4",
    "kllm.outlier_fraction",
    # item 5: AccLLM
    "accllm.bits.w2_sparse", "accllm.bits.w2_pattern", "accllm.llama2_fp16",
    "accllm.size.FP16", "accllm.size.W8A8 (SmoothQuant)", "accllm.pct_fp16",
    "accllm.reduction", "accllm.ratios", "accllm.kv4",
}


def test_every_required_row_is_there(rows, by_key):
    assert REQUIRED <= set(by_key), sorted(REQUIRED - set(by_key))
    assert len(by_key) == len(rows)                              # keys are unique
    assert {r.paper for r in rows} == set(PAPER_FILES)
    for r in rows:
        assert len(r) >= 6 and all(str(c).strip() for c in r[:6]), r.key
        # a number is quoted exactly when the paper states one
        assert (r.quote is None) == r.paper_value.startswith("not stated"), r.key


def test_command_writes_both_files_and_prints_the_table(rows, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(paper, "collect", lambda seed, tokens: rows)   # computed once above
    out_dir = tmp_path / "nested" / "reports"
    assert paper.main(["--out-dir", str(out_dir)]) == 0
    stdout = capsys.readouterr().out
    with open(out_dir / "paper.csv", newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert tuple(table[0]) == paper.COLUMNS
    assert [tuple(line) for line in table[1:]] == [tuple(map(str, r[:6])) for r in rows]
    md = (out_dir / "paper.md").read_text(encoding="utf-8")
    md_rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(md_rows) == len(rows) + 1                           # header + one per row
    for r in rows:
        assert r.quantity.replace("|", "\\|") in md
        assert r.quantity.replace("|", "\\|") in stdout
    assert "## Data and readings" in md
    assert "wrote" in stdout and f"({len(rows)} rows)" in stdout


@pytest.mark.parametrize("argv, message", [
    (["--seed", "-1"], "must be a non-negative integer"),
    (["--tokens", "0"], "must be a positive integer"),
    (["--bogus"], "unrecognized arguments"),
])
def test_bad_arguments_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        paper.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_out_dir_that_is_a_file_exits_2(tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("x")
    with pytest.raises(SystemExit) as exc:
        paper.main(["--out-dir", str(target)])
    assert exc.value.code == 2
    assert "--out-dir must be a directory" in capsys.readouterr().err


def test_module_entry_point_rejects_bad_option():
    res = subprocess.run([sys.executable, "-m", "qllm_cores.golden.paper", "--tokens", "x"],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2 and "--tokens" in res.stderr


def test_golden_paper_never_imports_hdl():
    code = ("import sys, golden.paper; "
            "sys.exit(any(m == 'hdl' or m.startswith('hdl.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


@pytest.mark.skipif(not PAPERS.is_dir(), reason="paper texts not available")
def test_quotes_are_verbatim_from_the_papers(rows):
    def norm(text):
        return re.sub(r"\s+", " ", text)

    texts = {p: norm((PAPERS / f).read_text(encoding="utf-8")) for p, f in PAPER_FILES.items()}
    quoted = [r for r in rows if r.quote]
    assert len(quoted) >= 25
    for r in quoted:
        assert norm(r.quote) in texts[r.paper], (r.key, r.quote)


# --- 1. Orizuru: an independent, plain-Python Orizuru with a counting comparison ------------


def reference_orizuru(keys, k):
    """KLLM section IV-C written afresh: max tree P and min tree Q over shared leaves,
    bottom-up initialisation, Q's leaf level = inverted P comparisons, k pops each with a
    log2(N) maintenance of the popped path. Returns (max lanes, min lanes, comparisons)."""
    n = len(keys)
    count = [0]

    def better(a, b, is_max, avail):
        """Does lane b beat lane a? One counted comparison (popped = -inf / +inf)."""
        count[0] += 1
        if not avail[a]:
            return avail[b]
        if not avail[b]:
            return False
        return keys[b] > keys[a] if is_max else keys[b] <= keys[a]

    trees = {}
    for is_max in (True, False):
        avail = [True] * n
        win = [0] * (2 * n)
        for i in range(n):
            win[n + i] = i
        for v in range(n - 1, 0, -1):
            a, b = win[2 * v], win[2 * v + 1]
            if not is_max and v >= n // 2:       # leaf level reused, inverted: no comparison
                win[v] = a if keys[b] > keys[a] else b
            else:
                win[v] = b if better(a, b, is_max, avail) else a
        trees[is_max] = (avail, win)
    popped = {True: [], False: []}
    for _ in range(k):
        for is_max in (True, False):
            avail, win = trees[is_max]
            lane = win[1]
            popped[is_max].append(lane)
            avail[lane] = False
            v = (n + lane) // 2
            while v >= 1:
                a, b = win[2 * v], win[2 * v + 1]
                win[v] = b if better(a, b, is_max, avail) else a
                v //= 2
    return popped[True], popped[False], count[0]


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_orizuru_count_equals_brute_force_and_first_principles(n):
    rng = np.random.default_rng(n)
    for k in sorted({1, 2, n // 2, n}):
        x = rng.permutation(np.arange(0x3C00, 0x3C00 + n))   # distinct positive binary16
        c = paper.count_orizuru(n, k, x=x)
        keys = [int(v) for v in x]                             # positive: bits order = value
        ref_max, ref_min, ref_count = reference_orizuru(keys, k)
        log2n = int(math.log2(n))
        assert c["total"] == ref_count == (n - 1) + (n // 2 - 1) + 2 * k * log2n
        assert c["total"] == 1.5 * n + 2 * k * log2n - 2       # the paper's formula - 2
        assert c["reported"] == c["total"] == orizuru.comparison_count(n, k)
        assert (c["init_max"], c["init_min"]) == (n - 1, n // 2 - 1)
        assert c["maint_max"] == c["maint_min"] == k * log2n
        order = np.argsort(-x, kind="stable")
        assert list(c["k_max"]) == ref_max == list(order[:k])
        assert list(c["k_min"]) == ref_min == list(order[::-1][:k])


def test_orizuru_baseline_counts_match_closed_forms():
    for n, k in [(16, 1), (64, 5), (256, 3)]:
        x = np.random.default_rng(n).permutation(np.arange(0x3C00, 0x3C00 + n))
        c = paper.count_orizuru(n, k, x=x)
        # max(): L - 1 comparisons over L elements, L = n, n-1, ..., n-k+1; same for min()
        assert c["scan"] == 2 * sum(n - 1 - j for j in range(k))
        assert n - 1 <= c["sort"] <= n * math.ceil(math.log2(n))


def test_orizuru_rows_against_the_paper(by_key):
    for n, k, _ in paper.orizuru_configs():
        r = by_key[f"orizuru.total.n{n}"]
        formula = 1.5 * n + 2 * k * int(math.log2(n))
        assert f"= {formula:g}" in r.paper_value
        assert int(r.ours) == formula - 2 and "differs by -2" in r.agreement
    assert paper.orizuru_configs()[0][:2] == (8, 3)                  # Fig. 7, "top-3"
    assert paper.orizuru_configs()[1][:2] == (16, 1)                 # Table I, 1 % of 16
    assert by_key["orizuru.init_max.n8"].ours == "7"                 # N - 1
    assert by_key["orizuru.maint.n8"].ours == "3"                    # log2 N
    assert by_key["orizuru.min_saving.n4096"].agreement == "matches"  # 2047 / 4095 -> 50.0 %
    base = by_key["orizuru.baseline.n4096"].values
    assert base["scan"] > base["sort"] > base["total"]


def test_orizuru_kllm16_row_counts_the_maintenance_after_the_last_pop(by_key):
    # The RTL's kllm-16 configuration, N = 16, k = 2: the whole golden run against the
    # reference Orizuru above at k = 2, and the run that stops before the last pop's
    # maintenance against the reference at k = 1 (the same vector).
    r = by_key["orizuru.kllm16"]
    full, before = r.values["all"], r.values["before_last"]
    assert "= 40" in r.paper_value                            # 1.5 x 16 + 2 x 2 x 4
    assert r.ours == f"{full['total']} | {before['total']}"
    x = np.random.default_rng(16).permutation(np.arange(0x3C00, 0x3C10))
    keys = [int(v) for v in x]
    assert paper.count_orizuru(16, 2, x=x)["total"] == reference_orizuru(keys, 2)[2] == 38
    assert paper.count_orizuru(16, 1, x=x)["total"] == reference_orizuru(keys, 1)[2] == 30
    assert (full["total"], before["total"]) == (38, 30)
    assert "8 of the 38 maintain the trees after the last pop" in r.agreement


# --- 2. Oaken ----------------------------------------------------------------------------------


def test_oaken_bits_from_the_format_definition():
    r = paper.oaken_bits(0.04, 0.06, runs=20, tokens=32)
    assert r["bits_per_outlier"] == 6 + 1 + 1          # index + group + sign (section 4.5)
    assert r["coo23_bits_per_outlier"] == 16 + 6 + 1   # value + index + group (section 4.4)
    # every element costs a 4-bit dense code, every outlier one 8-bit entry
    assert r["bits_no_meta"] == pytest.approx(4 + 8 * r["outlier_fraction"], abs=1e-12)
    assert abs(r["outlier_fraction"] - 0.10) < 0.015   # profiled for 4 + 6 %
    # the golden chunk adds 6 metadata values of 16 + 8 + 2 bits per 64 elements (contract 4)
    assert r["bits_chunk_meta"] - r["bits_no_meta"] == pytest.approx(6 * 26 / 64, abs=1e-12)


def test_oaken_table2_reading_from_first_principles(by_key):
    # 4 + 8 x (4 % + 6 %) plus six 16-bit values per token: K or V of all KV heads x 128
    for model, heads, quoted in [("Llama2-7B", 32, 4.82), ("Llama2-13B", 40, 4.82),
                                 ("Llama2-70B", 8, 4.89)]:
        assert round(4 + 8 * 0.10 + 6 * 16 / (heads * 128), 2) == quoted
        r = by_key[f"oaken.table2.{model}"]
        measured = by_key["oaken.eff.0.04_0.06"].values["bits_no_meta"]
        assert r.values["ours"] == pytest.approx(measured + 96 / (heads * 128), abs=1e-12)
        assert str(quoted) in r.paper_value
    for key in ("oaken.eff.0.04_0.06", "oaken.eff.0_0.1", "oaken.eff.0.1_0"):
        assert round(float(by_key[key].ours), 1) == 4.8             # Table 3


# --- 3. P3-LLM ---------------------------------------------------------------------------------


def test_p3_bits_from_the_format_definitions(by_key):
    b = paper.p3_bits(seed=3)
    assert b["int4_asym"] == 4 + (16 + 4) / 128         # code + (scale + zero) / head
    assert round(b["int4_asym"], 2) == 4.16              # the paper's "4.16 bits"
    assert b["bitmod"] == 4 + (16 + 2) / 128             # code + (scale + sv_sel) / group
    assert b["e4m3"] == 8 + 16 / 4096                    # code + scale / token
    assert b["s0e4m4"] == 8                              # no scale
    assert by_key["p3.int4_asym"].agreement.startswith("matches")
    assert by_key["p3.oaken_vs_p3"].agreement == "ordering matches"


def test_p3_orderings_hold_on_other_data():
    o = paper.p3_orderings(seed=7)
    for d in o["weights"].values():
        assert d["BitMoD"] < d["INT4-asym"]
    assert o["acts"]["E4M3"] > o["acts"]["INT8"]
    assert o["keys"]["smoothed"] < o["keys"]["plain"]
    for sigma in (1.0, 2.0):                             # peaked softmax rows
        d = o["scores"][sigma]
        assert d["S0E4M4"] > d["E4M3"] > d["INT8"]


def test_p3_ordering_rows(by_key):
    for key in ("p3.order.weights", "p3.order.acts", "p3.order.keys"):
        assert by_key[key].agreement == "ordering matches"
    scores = by_key["p3.order.scores"]
    assert "full order matches at sigma = 1, 2" in scores.agreement


# --- 4. KLLM -----------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [3, 4])
def test_uniform_codebook_is_integer_rounding(bits):
    half = 2 ** (bits - 1)
    x = np.random.default_rng(bits).uniform(-1, 1, 10_000)
    idx = kllm.kmeans_quantize(x, paper.uniform_codebook(bits))
    # symmetric INT-b round to nearest on the scale 1 / (2^(b-1) - 1)
    assert np.array_equal(idx - half, np.clip(np.rint(x * (half - 1)), -half, half - 1))


def test_kllm_uniform_error_recomputed_directly(by_key):
    """Uniform INT4 with 1 % outliers in FP16, written out per token without kllm."""
    on = paper.kllm_activations(0, TOKENS, online=True)
    k = math.ceil(0.01 * on.shape[1] / 2)
    err = []
    for a in on:
        out = np.zeros(a.size, bool)
        out[np.argsort(a, kind="stable")[:k]] = True
        out[np.argsort(-a, kind="stable")[:k]] = True
        s = np.abs(a[~out]).max()
        q = np.clip(np.rint(a / s * 7), -8, 7) * s / 7
        err.append(np.where(out, 0.0, q - a))          # FP16 data: outliers are exact
    rmse = float(np.sqrt(np.mean(np.square(err))))
    row = by_key["kllm.kmeans_vs_uniform.a4"]
    assert row.values["rmse"][4, "uniform", 0.01] == pytest.approx(rmse, rel=1e-12)


def test_kllm_directions(by_key):
    e = by_key["kllm.centroid_drift"].values
    assert e["centroid_rmse"][0.01] < e["centroid_rmse"][0.0]          # Fig. 2: 0.14 -> 0.01
    for bits in (3, 4):
        assert e["rmse"][bits, "kmeans", 0.01] < e["rmse"][bits, "uniform", 0.01]
    seq = [e["rmse"][4, "kmeans", f] for f in paper.KLLM_FRACTIONS]
    assert all(b < a for a, b in zip(seq, seq[1:]))                    # Table IV trend
    assert paper.KLLM_FRACTIONS[2] == 0.01


def test_kllm_data_is_heavy_tailed_with_outlier_channels():
    x = paper.kllm_activations(0, TOKENS, online=True)
    bulk = np.sort(np.abs(x), axis=1)[:, : -8]                          # drop 8 outlier lanes
    kurt = np.mean(bulk ** 4) / np.mean(bulk ** 2) ** 2
    assert kurt > 3                                                      # heavier than Gaussian
    assert np.abs(x).max(axis=1).min() > 10 * np.sqrt(np.mean(bulk ** 2))
    assert np.array_equal(x, x.astype(np.float16).astype(np.float64))   # FP16 activations


# --- 5. AccLLM ---------------------------------------------------------------------------------


def llama2_7b():
    d, f, layers, vocab = 4096, 11008, 32, 32000                       # Llama 2 config
    linear = layers * (4 * d * d + 3 * d * f)
    return linear, linear + 2 * vocab * d + (2 * layers + 1) * d


def test_accllm_bits_from_first_principles():
    b = paper.accllm_bits(seed=5)
    # per 4 weights: 2 kept x (2-bit code + 2-bit index); per 64: 16-bit scale + 2-bit zero
    assert b["w2_sparse"] == (2 * (2 + 2)) / 4 + (16 + 2) / 64 == 2.28125
    assert b["w2_sparse_pattern"] == (2 * 2 + math.ceil(math.log2(6))) / 4 + 18 / 64
    assert b["w2_dense"] == 2 + 18 / 64
    assert b["fp16_sparse"] == 2 * (16 + 2) / 4
    assert b["w8"] == 8 + 16 / 4096 and b["w4"] == 4 + 20 / 128
    assert b["kv4"] == 4 + (16 + 4) / 128


def test_accllm_model_sizes_against_the_paper(by_key):
    linear, total = llama2_7b()
    assert paper.llama2_7b_params()["total"] == total
    assert round(total / 1e9) == 7 and abs(2 * total / 1e9 - 14) < 1     # "7 billion", "~14GB"
    gib = linear / 8 / 2 ** 30
    assert round(16 * gib, 1) == 12.1                                       # Table V FP16
    assert round((8 + 16 / 4096) * gib, 2) == 6.03                          # Table V W8A8
    assert round((1.75 + 18 / 64) * gib, 2) == 1.53                         # Table V ours
    assert round((8 + 0.75) * gib, 2) == 6.60                               # Table V 2:4
    assert by_key["accllm.size.FP16"].agreement.startswith("matches")
    assert by_key["accllm.size.W8A8 (SmoothQuant)"].agreement.startswith("matches")
    assert by_key["accllm.size.W2A8KV4 + 2:4 + Lambda (ours), 3-bit pattern"] \
        .agreement.startswith("matches")
    # KV cache footnote: 2 x 32 layers x 7k x 32 heads x 128 x 16 bits = 3.5 GiB
    assert 2 * 32 * 7 * 1024 * 32 * 128 * 16 / 8 / 2 ** 30 == 3.5
    assert by_key["accllm.kv_cache"].ours == "3.50 GiB"
    ratios = by_key["accllm.ratios"].values
    assert ratios["fp16"] == pytest.approx(16 / 2.28125)
