"""Perplexity of SmolLM2-135M under every quantization scheme, beside the papers' claims.

Usage::

    qllm model-report [--tokens N] [--layers N] [--schemes NAME ...] [--out DIR] [--jobs N]
    python -m qllm_cores.golden.llm.report  (same options)

Evaluation text: the named topics :data:`EVAL_TOPICS` of ``pydoc_data.topics`` (the Python
reference manual shipped with the interpreter), joined by blank lines, first ``--tokens``
tokens. Calibration text (KLLM's activation codebooks, Oaken's thresholds): the different
topics :data:`CALIBRATION_TOPICS`, first :data:`CALIBRATION_TOKENS` tokens.
:func:`check_disjoint` makes sure the two share no line of text. For the float model and every
scheme of :data:`~.schemes.SCHEMES` (or ``--schemes``): the perplexity on the evaluation
window, its ratio to float, the effective bits per element of each quantized tensor
(:attr:`~.schemes.Scheme.bits`), the paper's claim the row tests (:data:`CLAIMS`) and whether
our ratio agrees with it (:func:`verdict`).

Writes ``model-report.md``, ``model-report.csv`` and ``model-report.png`` (perplexity against
mean effective bits, log x and y) under ``--out`` (default ``build/model-report``) and prints the
Markdown table. Progress: a tqdm bar on standard error. BLAS is limited to one thread per
process; ``--jobs`` (default 2) worker processes build and run the schemes. A bad option
writes nothing and exits 2 with one line on standard error.
"""

import argparse
import csv
import io
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EVAL_TOPICS", "CALIBRATION_TOPICS", "CALIBRATION_TOKENS", "KMEANS_SAMPLE",
           "DEFAULT_TOKENS", "CLAIMS", "COLUMNS", "Claim", "texts", "check_disjoint",
           "scheme_options", "verdict", "run_report", "make_row", "render_markdown", "render_csv",
           "plot", "main"]

#: Evaluation topics of ``pydoc_data.topics`` (prose of the language reference's data model).
EVAL_TOPICS = ("objects", "types")
#: Calibration topics (different chapters: execution model, naming, exceptions).
CALIBRATION_TOPICS = ("execmodel", "naming", "exceptions")
#: Default evaluation window (tokens) and calibration window (tokens): sized so that the
#: default run of every scheme on all 30 blocks stays under 10 minutes on 2 cores.
DEFAULT_TOKENS = 128
CALIBRATION_TOKENS = 128
#: Values KLLM's weight codebooks are trained on (per layer; cheaper than all weights).
KMEANS_SAMPLE = 20000
DEFAULT_OUT = "build/model-report"

COLUMNS = ("scheme", "paper", "bits", "mean_bits", "perplexity", "ratio", "paper_claim",
           "agreement")


@dataclass(frozen=True)
class Claim:
    """A paper's result a scheme's row tests: ``text`` (paraphrased, with its table or
    section), and the perplexity ratio (quantized / float) band that counts as agreeing in
    direction and size: ``low <= ratio <= high``. ``note``: why a disagreement is expected."""

    text: str
    low: float
    high: float
    note: str = ""


def _band(largest_increase):
    """The agreeing ratio band for a paper whose largest relative perplexity increase in the
    cited setting is ``largest_increase``: from 0.98 (a quantized model is not clearly better;
    the margin absorbs the noise of a short window) to ``1 + 2 * largest_increase`` (the same
    direction, at most twice the paper's size)."""
    return 0.98, round(1 + 2 * largest_increase, 3)


#: Scheme name -> the paper claim it tests (the papers in /work/shared/papers; numbers quoted
#: with their table, ratios computed here as quantized / FP16 perplexity; docs/llm.md).
CLAIMS = {
    "float": Claim("reference: float32 forward pass of the GGUF file's (Q4_1) weights",
                   1.0, 1.0),
    "kllm-w4a4": Claim(
        "KLLM Table II: W4A4 WikiText-2 PPL (seq. 2048) rises 5.5-9.5 % over FP16 across seven "
        "7B-70B models (LLaMA-2-7B 5.47 -> 5.90, the +0.43 of Table IV at 1 % outliers)",
        *_band(0.095)),
    "kllm-w4a3": Claim(
        "KLLM Table II: W4A3 WikiText-2 PPL rises 22-39 % over FP16 (LLaMA-2-7B 5.47 -> 7.49, "
        "LLaMA-7B 5.68 -> 7.17)", *_band(0.385)),
    "oaken-kv": Claim(
        "Oaken Table 2: KV at 4.82 effective bits raises Wikitext2 PPL 0.2-1.9 % over FP16 on "
        "eight models (Llama2-7B 5.47 -> 5.53), 0.87 % mean accuracy loss (section 6.2); "
        "P3-LLM Table IV has Oaken at +2.6 % on Llama-3.2-3B (7.81 -> 8.01)", *_band(0.026)),
    "p3": Claim(
        "P3-LLM Table IV: W4A8KV4P8 (BitMoD weights, FP8 activations, smoothed INT4 KV, "
        "S0E4M4 scores) raises Wikitext-2 PPL 2.3-8.2 % over FP16 on eight models (mean "
        "+0.25; Llama-2-7B 5.47 -> 5.65, Llama-3.2-3B 7.81 -> 8.39)", *_band(0.082)),
    "accllm-w2-kv4": Claim(
        "AccLLM Table III: Llama-2-7B (3k tokens) 6.506 FP16; 2:4 + W2 without fine-tuning "
        "16.695 (x2.57), with LoRA 7.408 (x1.14); Table V W2A8KV4 + 2:4 8.038 (x1.24)",
        *_band(1.57), note="expected: no LoRA fine-tuning and no trained clipping here, and "
        "the paper itself reports x2.57 without LoRA on a 7B model; a 135M model collapses"),
    "int8-w8a8": Claim(
        "AccLLM Tables V/VI: SmoothQuant W8A8 on Llama-2-7B (3k tokens) 6.506 -> 6.778 "
        "(+4.2 %, WikiText-103) and 18.497 -> 18.967 (+2.5 %, WikiText-2)", *_band(0.042)),
    "int4-w4": Claim(
        "P3-LLM Table VI: INT4 weights add 0.13 (Llama-2-7B, +2.4 % of FP16 5.47) and 0.44 "
        "(Llama-3.1-8B, +7.1 % of 6.24) Wikitext-2 PPL; BitMoD recovers 0.01 / 0.07 of it",
        *_band(0.071)),
    "bitmod-w4": Claim(
        "P3-LLM Table VI: 4-bit BitMoD weights in place of INT4 lower Wikitext-2 PPL by 0.01 "
        "(Llama-2-7B 5.64 -> 5.63) and 0.07 (Llama-3.1-8B 6.79 -> 6.72): at most the INT4 "
        "row's +2.4 / +7.1 % over FP16", *_band(0.071)),
    "int4-kv4": Claim(
        "P3-LLM Table VI: plain INT4 KV (per head, no smoothing) raises Wikitext-2 PPL 2.6 % "
        "(Llama-2-7B 5.47 -> 5.61) and 4.5 % (Llama-3.1-8B 6.24 -> 6.52); Oaken Table 2: 4-bit "
        "Atom / QServe KV +0.8-5.5 %", *_band(0.055)),
}


def texts(eval_topics=EVAL_TOPICS, calibration_topics=CALIBRATION_TOPICS):
    """The evaluation and calibration texts: each tuple of topic names joined by blank lines."""
    from pydoc_data.topics import topics

    return ("\n\n".join(topics[name] for name in eval_topics),
            "\n\n".join(topics[name] for name in calibration_topics))


def check_disjoint(a, b, min_chars=20):
    """ValueError if texts ``a`` and ``b`` share a line of at least ``min_chars`` characters
    (stripped); returns the number of such lines of ``a`` checked."""
    lines_a = {line.strip() for line in a.splitlines() if len(line.strip()) >= min_chars}
    lines_b = {line.strip() for line in b.splitlines() if len(line.strip()) >= min_chars}
    shared = lines_a & lines_b
    if shared:
        raise ValueError(f"evaluation and calibration texts share {len(shared)} line(s), "
                         f"e.g. {sorted(shared)[0]!r}")
    return len(lines_a)


def scheme_options(name):
    """The options :func:`~.schemes.build_scheme` gets for scheme ``name`` in this report."""
    return {"kmeans_sample": KMEANS_SAMPLE} if name.startswith("kllm-") else {}


def verdict(name, ratio):
    """``"agrees"`` / ``"disagrees"`` (with the band and the reason) for a row's ratio."""
    claim = CLAIMS.get(name)
    if claim is None:
        return "no claim"
    if not math.isfinite(ratio):
        return "disagrees: perplexity not finite"
    band = (f"ratio {claim.low:g}" if claim.low == claim.high
            else f"ratio {claim.low:g}..{claim.high:g}")
    if claim.low <= ratio <= claim.high:
        return f"agrees ({band})"
    side = "larger" if ratio > claim.high else "smaller"
    note = f"; {claim.note}" if claim.note else ""
    return f"disagrees: {side} than the paper's {band}{note}"


# --- the computation ---------------------------------------------------------------------------

_STATE = {}


def _limit_blas():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:                                   # pragma: no cover
        return None
    return threadpool_limits(limits=1, user_api="blas")


def _worker_init(layers, eval_ids, calibration_ids, limit_blas=True):
    """A worker's state: one BLAS thread, the model (inherited when forked), the windows."""
    if limit_blas:
        _STATE["blas"] = _limit_blas()
    if _STATE.get("layers") != layers or "model" not in _STATE:
        from .model import load_model

        _STATE["model"] = load_model(layers=layers)
        _STATE["layers"] = layers
    _STATE["eval"], _STATE["calibration"] = eval_ids, calibration_ids


def _run_one(name):
    """``(name, paper, bits, perplexity, seconds)`` of scheme ``name`` (or ``"float"``)."""
    from .schemes import build_scheme

    start = time.perf_counter()
    model = _STATE["model"]
    if name == "float":
        paper, bits, hooks = "-", {}, None
    else:
        scheme = build_scheme(name, model, calibration_ids=_STATE["calibration"],
                              **scheme_options(name))
        paper, bits, hooks = scheme.paper, dict(scheme.bits), scheme.hooks
    ppl = model.perplexity(_STATE["eval"], hooks=hooks)
    return name, paper, bits, ppl, time.perf_counter() - start


def run_report(tokens=DEFAULT_TOKENS, layers=None, schemes=None, jobs=2, progress=True):
    """The report's rows (dicts with :data:`COLUMNS` keys and ``seconds``), float first, then
    the schemes in :data:`~.schemes.SCHEMES` order, and the run's facts (a dict)."""
    from .model import load_model
    from .schemes import SCHEMES

    names = list(SCHEMES) if schemes is None else list(schemes)
    start = time.perf_counter()
    blas = _limit_blas()
    eval_text, calibration_text = texts()
    checked = check_disjoint(eval_text, calibration_text)
    model = load_model(layers=layers)
    eval_ids = model.tokenize(eval_text)[:tokens]
    calibration_ids = model.tokenize(calibration_text)[:CALIBRATION_TOKENS]
    if len(eval_ids) < tokens:
        raise ValueError(f"--tokens {tokens}: the evaluation text has only {len(eval_ids)}")
    _STATE.update(model=model, layers=layers)
    # the heaviest schemes first, so that two workers finish together
    order = sorted(["float", *names], key=lambda n: (not n.startswith(("kllm", "p3")), n))
    results = {}
    bar = None
    if progress:
        try:
            from tqdm import tqdm
            bar = tqdm(total=len(order), desc="model-report", unit="scheme", file=sys.stderr,
                       dynamic_ncols=True, leave=True)
        except ImportError:                               # pragma: no cover
            bar = None

    def done(result):
        results[result[0]] = result
        if bar is not None:
            bar.set_postfix_str(f"{result[0]} {result[3]:.4g}", refresh=False)
            bar.update(1)
        elif progress:                                    # pragma: no cover
            print(f"[{len(results)}/{len(order)}] {result[0]}", file=sys.stderr, flush=True)

    try:
        if jobs <= 1 or len(order) == 1:
            _worker_init(layers, eval_ids, calibration_ids, limit_blas=False)
            for name in order:
                done(_run_one(name))
        else:
            import multiprocessing

            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(method),
                                     initializer=_worker_init,
                                     initargs=(layers, eval_ids, calibration_ids)) as pool:
                for future in as_completed([pool.submit(_run_one, n) for n in order]):
                    done(future.result())
    finally:
        if bar is not None:
            bar.close()
        if blas is not None:
            blas.restore_original_limits()
    float_ppl = results["float"][3]
    rows = []
    for name in ["float", *names]:
        _, paper, bits, ppl, seconds = results[name]
        rows.append(make_row(name, paper, bits, ppl, float_ppl, seconds))
    facts = {"tokens": tokens, "layers": model.n_layers, "calibration_tokens":
             len(calibration_ids), "eval_topics": EVAL_TOPICS,
             "calibration_topics": CALIBRATION_TOPICS, "kmeans_sample": KMEANS_SAMPLE,
             "lines_checked": checked, "jobs": jobs,
             "seconds": time.perf_counter() - start,
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    return rows, facts


def make_row(name, paper, bits, ppl, float_ppl, seconds=0.0):
    """One table row (dict) from a scheme's results."""
    ratio = ppl / float_ppl
    claim = CLAIMS.get(name)
    mean_bits = sum(bits.values()) / len(bits) if bits else 32.0
    return {"scheme": name, "paper": paper,
            "bits": "; ".join(f"{k} {v:.3f}" for k, v in bits.items()) or "all 32 (float32)",
            "mean_bits": mean_bits, "perplexity": ppl, "ratio": ratio,
            "paper_claim": claim.text if claim else "", "agreement": verdict(name, ratio),
            "seconds": seconds}


# --- output ------------------------------------------------------------------------------------


def _cell(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "/")


def render_markdown(rows, facts):
    """The Markdown report: the run's settings, then the table (:data:`COLUMNS`)."""
    out = io.StringIO()
    out.write("# Perplexity of SmolLM2-135M under the papers' quantization schemes\n\n")
    out.write(f"Evaluation: first {facts['tokens']} tokens of pydoc_data.topics "
              f"{' + '.join(facts['eval_topics'])}; calibration: first "
              f"{facts['calibration_tokens']} tokens of "
              f"{' + '.join(facts['calibration_topics'])} (no shared line among "
              f"{facts['lines_checked']} checked); {facts['layers']} blocks; KLLM weight "
              f"codebooks on {facts['kmeans_sample']} sampled values; {facts['jobs']} worker(s); "
              f"{facts['date']}; {facts['seconds']:.0f} s.\n\n")
    out.write("| " + " | ".join(COLUMNS) + " |\n")
    out.write("|" + "---|" * len(COLUMNS) + "\n")
    for row in rows:
        out.write("| " + " | ".join(_cell(row[c]) for c in COLUMNS) + " |\n")
    return out.getvalue()


def render_csv(rows):
    """The table as CSV (:data:`COLUMNS` and ``seconds``; full precision)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS, "seconds"])
    for row in rows:
        writer.writerow([repr(row[c]) if isinstance(row[c], float) else row[c]
                         for c in (*COLUMNS, "seconds")])
    return out.getvalue()


def plot(rows, path):
    """Perplexity against mean effective bits (log x and y), one marker per row
    (legend: scheme and perplexity); PNG at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    markers = "o^sDvP*Xh<>p"
    for index, row in enumerate(rows):
        ppl = row["perplexity"]
        if not math.isfinite(ppl):
            continue
        ax.plot(row["mean_bits"], ppl, markers[index % len(markers)], markersize=7,
                label=f"{row['scheme']} ({ppl:.3g})",
                color="black" if row["scheme"] == "float" else None)
    float_ppl = rows[0]["perplexity"]
    ax.axhline(float_ppl, color="grey", linestyle=":", linewidth=1)
    ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("effective bits per element (mean over the quantized tensors; log2)")
    ax.set_ylabel("perplexity (log)")
    ax.set_title("SmolLM2-135M perplexity per quantization scheme")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    return path


# --- command line ------------------------------------------------------------------------------


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _Usage(message)


def _parser():
    p = _Parser(prog="qllm model-report", description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default=str(DEFAULT_TOKENS),
                   help=f"evaluation tokens (default {DEFAULT_TOKENS})")
    p.add_argument("--layers", default=None, help="first N blocks only (default all)")
    p.add_argument("--schemes", nargs="+", default=None, metavar="NAME",
                   help="a subset of the schemes (default all)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--jobs", default="2", help="worker processes (default 2)")
    return p


def _int_option(option, text, low, high=None):
    try:
        value = int(text)
    except ValueError:
        raise _Usage(f"{option} {text!r}: not an integer") from None
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise _Usage(f"{option} {value}: must be {span}")
    return value


def _check(args):
    """Validated ``(tokens, layers, schemes, out, jobs)``; :class:`_Usage` for a bad value."""
    from .schemes import SCHEMES

    tokens = _int_option("--tokens", args.tokens, 2, 8192)
    layers = None if args.layers is None else _int_option("--layers", args.layers, 0, 30)
    jobs = _int_option("--jobs", args.jobs, 1, 64)
    schemes = None
    if args.schemes is not None:
        for name in args.schemes:
            if name not in SCHEMES:
                raise _Usage(f"--schemes {name!r}: unknown; known: {', '.join(SCHEMES)}")
        schemes = list(dict.fromkeys(args.schemes))
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise _Usage(f"--out {args.out!r}: exists and is not a folder")
    return tokens, layers, schemes, out, jobs


def main(argv=None):
    """``qllm model-report``; returns the exit code (0, or 2 for a bad option)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "-h" in argv or "--help" in argv:
        _parser().print_help()
        return 0
    try:
        tokens, layers, schemes, out, jobs = _check(_parser().parse_args(argv))
        rows, facts = run_report(tokens, layers, schemes, jobs)
    except (_Usage, ValueError, TypeError) as exc:
        print(f"qllm model-report: error: {exc}", file=sys.stderr)
        return 2
    markdown = render_markdown(rows, facts)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model-report.md").write_text(markdown)
    (out / "model-report.csv").write_text(render_csv(rows))
    plot(rows, out / "model-report.png")
    sys.stdout.write(markdown)
    print(f"\nwritten: {out / 'model-report.md'}, .csv, .png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
