"""Print the papers' checkable numbers next to ours, each of ours computed by the golden models.

Usage::

    python -m qllm_cores.golden.paper [--seed N] [--tokens N] [--out-dir DIR]

Writes ``DIR/paper.md`` (Markdown table and notes) and ``DIR/paper.csv`` (one row per number,
columns ``paper, quantity, paper_value, ours, how_computed, agreement``) and prints the table.
``DIR`` defaults to ``build/reports`` (relative to the working directory). Nothing on the "ours"
side is typed in: each value comes from a call of a golden function on deterministic synthetic
data (``numpy.random.default_rng`` seeded from ``--seed``) or from counting the bits of the
arrays a golden encoder returns. The paper column quotes the paper text (``../shared/papers``);
where a paper gives no number the cell says "not stated". Each row's ``quote`` (kept in
:class:`Row`, checked against the paper text by the tests) is the exact source substring.

Where the paper numbers come from, and how ours are computed:

1. **Orizuru (KLLM section IV-C, Fig. 7, Table I).** The paper: "1.5N + 2k log2(N)"
   comparisons; the max tree's initialisation "requires N - 1 FP16 comparisons"; reusing the
   leaf level "reduc[es] the total comparisons for its initialization [of the min tree] by 50%";
   each maintenance "requires log2(N) sequential comparisons". Ours: comparisons *counted while
   the golden algorithm runs* on data: :func:`count_orizuru` wraps the node-rule method of
   :mod:`golden.kllm.orizuru`'s trees (``_Tree._compare``) for the duration of one
   :func:`golden.kllm.orizuru.orizuru` call and adds up the nodes it compares, split into
   initialisation and maintenance of each tree (N = 4096 is beyond the golden model's
   2..1024 range; there the same code runs through ``orizuru._run`` without the range check).
   Configurations: N = 8, k = 3 (Fig. 7's example, "top-3"), N = 16, k = 1 (Table I's 16-input
   units, 1 % outliers), N = 1024 and N = 4096 (an activation vector of LLaMA-2-7B, K = 4096)
   with ``k = kllm.outliers_per_side(N, 0.01)``; and N = 16, k = 2, the RTL's ``kllm-16``
   configuration, also run with k - 1 pops on the same vector: the golden model maintains
   each tree after every pop, the last one included, which no output needs (the RTL's own
   comparator count is ``qllm paper-area``'s, from the elaborated design). Baselines (no
   paper number): k passes of a linear max scan plus k of a min scan over the remaining
   elements, and one full sort (Python's Timsort); both count the comparisons a counting key
   object actually receives.
2. **Oaken (sections 4.4, 4.5, 6.2, Tables 2 and 3).** Bits per outlier entry (8, against the
   23 of mixed precision) and the effective bitwidth (4.8 at outer / middle / inner = 4 / 90 / 6
   and at the two-group ratios 90 / 10, 10 / 90 of Table 3; 4.82 / 4.82 / 4.89 for Llama2-7B /
   13B / 70B in Table 2). Ours: thresholds profiled with
   :func:`golden.oaken.profile.profile_thresholds` on 100 runs of
   :func:`golden.oaken.profile.synthetic_kv` (16 tokens x 128 channels each), then fresh
   tokens (128 x 128, keys and values) encoded chunk by chunk with
   :func:`golden.oaken.baselines.oaken_roundtrip` (the bit-exact :mod:`golden.oaken` encoder), its
   bits counted on the returned chunks; the 23-bit baseline is
   :func:`golden.oaken.baselines.coo23_mixed`. Table 2 reading: the paper's effective bitwidth
   adds six 16-bit per-token values (thresholds / group parameters) to the 4.8, spread over one
   token's K (or V) vector: 4096 elements for Llama2-7B (32 heads x 128), 5120 for 13B (40 x
   128), 1024 for 70B (8 KV heads x 128, GQA); these model shapes are the Llama 2 configuration,
   not numbers from the Oaken paper. The golden chunk format stores instead six
   ``data_bits + frac_bits + 2`` = 26-bit values per 64-element chunk (contract section 4).
3. **P3-LLM (sections IV-A to IV-D, VI-B, Tables II, III, VI).** Effective bits: "4.16 bits" for
   per-head INT4-Asym KV (16-bit scale + 4-bit zero point per 128); FP8-S0E4M4 needs no scale;
   BitMoD weights (group 128) and FP8-E4M3 activations (per token) have no stated figure. Ours:
   the bits of the arrays :func:`golden.p3.formats.quantize_int4_asym`,
   :func:`golden.p3.formats.quantize_bitmod`, :func:`golden.p3.formats.quantize_e4m3`,
   :func:`golden.p3.formats.quantize_s0e4m4` return (fields at their stored widths: codes 4 or 8,
   scales 16, INT4 zero points 4, BitMoD ``sv_sel`` 2), divided by the element count. Orderings the
   paper claims (Table II: S0E4M4 beats E4M3 and INT8 on attention scores; IV-C: BitMoD beats
   INT4-asym on weights; Table VI / IV-D: FP8-E4M3 beats INT8 on activations; Table VI: key
   smoothing helps INT4 keys), checked by the SQNR or RMSE of the golden quantizers on synthetic
   data: softmax rows of ``sigma * N(0, 1)`` logits (16 x 4096, rounded to FP16 first, sigma = 0.5,
   1, 2, 4), Gaussian weights with and without 1 % x5 element outliers (64 x 4096), activations
   ``0.5 t(4)`` with 8 outlier channels x30 (64 x 4096), keys with 6 outlier channels x15 (512
   tokens x 4 heads x 128, smoothing factors from the first half).
4. **KLLM (section II-A2, Fig. 2; Fig. 11; Table IV).** "This reduces the root mean square error
   (RMSE) between the online and offline centroids of the two datasets from 0.14 to 0.01" (4-bit,
   top 0.5 % largest and smallest excluded); integer -> K-Means quantization "reduces the PPL
   from >600,000 to 8.03" (W4A3); Table IV: more outliers kept, lower PPL. The paper gives no
   quantization-error number, so the comparisons are of direction. Synthetic activations
   (documented heavy-tailed stand-in for LLM activations, rounded to FP16): ``--tokens`` tokens
   x 4096 of ``0.5 * t(4)`` (Student-t, 4 degrees of freedom: heavy tails, excess kurtosis
   unbounded) plus 8 fixed outlier channels (0.2 %, fixed across datasets as in LLMs) scaled by
   ``gain * exp(N(0, 0.3))`` per token: gain 20 in the "offline" (calibration) set, 30 in the
   "online" set (a shift between datasets, like WikiText-2 vs C4). Codebooks from
   :func:`golden.kllm.kmeans.activation_codebook` (offline set, equal sample weights: no Fisher
   information), quantization with :func:`golden.kllm.kmeans.quantize_activation` /
   :func:`golden.kllm.kmeans.dequantize_activation` on the online set (the outliers are kept in
   FP16, so they reconstruct exactly). The uniform quantizer at the same bit width is the same path
   with the integer codebook ``arange(-2^(b-1), 2^(b-1)) / (2^(b-1) - 1)`` (symmetric RTN INT-b on
   the per-token scale: "integer quantization can be considered a special case of K-Means
   quantization", section III-B2).
5. **AccLLM (sections I, IV, VI-B, Tables II and V, Fig. 15).** Llama-2-7B "consists of 7
   billion parameters, requiring approximately 14GB of memory in FP16"; model sizes (GB) of
   Table V: FP16 12.1, W8A8 6.03, W4A8KV4 3.08, 2:4 pruning 6.60, ours (W2A8KV4 + 2:4 + Lambda
   attention) 1.53; "12.6%" of FP16; "74.6% and 50.3%" smaller than W8 / W4; KV4 "reduces KV
   cache size by 75%". Ours: a 64 x 4096 Gaussian layer pruned by
   :func:`golden.accllm.quant.prune_2_4`, quantized by :func:`golden.accllm.quant.quantize_w2`
   (group 64), selected by :func:`golden.accllm.sparse_selector.sparse_select`; bits counted on
   those arrays (2-bit codes and 2-bit indices of the kept weights, FP16 scale + 2-bit zero point
   per group); the alternative index code of ceil(log2 C(4,2)) = 3 bits per group of 4 is also
   shown. W8 is :func:`golden.accllm.quant.quantize_a8` applied per output row (symmetric, FP16
   scale per row), W4 is :func:`golden.p3.formats.quantize_int4_asym` (group 128), KV4 is
   :func:`golden.accllm.quant.quantize_kv4`. Sizes: bits per weight x the decoder's linear-layer
   weights (32 x (4 x 4096^2 + 3 x 4096 x 11008), Llama 2 configuration) in GiB, the reading that
   reproduces Table V's 12.1 and 6.03; the 14 GB of section I is all 6.74e9 parameters in decimal
   GB. LoRA weights are not counted.
"""

import argparse
import csv
import re
from pathlib import Path

from ..common.checks import non_negative_int_arg, positive_int_arg, report_main
from .accllm import GIB, LLAMA2_7B, accllm_bits, llama2_7b_params
from .accllm import accllm_rows as _accllm_rows
from .kllm import (KLLM_FRACTIONS, count_orizuru, kllm_activations, kllm_errors, orizuru_configs,
                   uniform_codebook)
from .kllm import kllm_rows as _kllm_rows
from .kllm import orizuru_rows as _orizuru_rows
from .oaken import OAKEN_TOKEN_META, OAKEN_TOKEN_WIDTH, oaken_bits
from .oaken import oaken_rows as _oaken_rows
from .p3 import SCORE_SIGMAS, p3_bits, p3_orderings
from .p3 import p3_rows as _p3_rows
from .rows import Row

__all__ = [
    "Row", "COLUMNS", "LLAMA2_7B", "count_orizuru", "orizuru_configs", "oaken_bits",
    "p3_bits", "p3_orderings", "kllm_activations", "uniform_codebook", "kllm_errors",
    "llama2_7b_params", "accllm_bits", "collect", "render_markdown", "write_csv", "run", "main",
    "OAKEN_TOKEN_WIDTH", "OAKEN_TOKEN_META", "SCORE_SIGMAS", "KLLM_FRACTIONS", "GIB",
]

COLUMNS = ("paper", "quantity", "paper_value", "ours", "how_computed", "agreement")


def collect(seed=0, tokens=16):
    """Compute every row (list of :class:`Row`), in the order of the package docstring."""
    seed = int(seed)
    rows = _orizuru_rows(seed)
    oaken_rows, oaken_main = _oaken_rows(seed)
    rows += oaken_rows
    rows += _p3_rows(seed, oaken_main)
    rows += _kllm_rows(seed, tokens)
    rows += _accllm_rows(seed)
    return rows


HEADER = ("paper", "quantity", "paper's value (source)", "ours", "how computed", "agreement")


def _md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(rows):
    """The Markdown table of ``rows`` (list of lines)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in r[:6]) + " |")
    return lines


def write_csv(rows, path):
    """Write ``rows`` to ``path`` as CSV with the header :data:`COLUMNS`."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(r[:6])


def _parser():
    p = argparse.ArgumentParser(prog="python -m qllm_cores.golden.paper",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=non_negative_int_arg, default=0, help="data seed (default 0)")
    p.add_argument("--tokens", type=positive_int_arg, default=16,
                   help="KLLM activation tokens per data set (default 16)")
    p.add_argument("--out-dir", default="build/reports",
                   help="directory for paper.md and paper.csv (default build/reports)")
    return p


def run(args, out):
    """Compute the table for parsed ``args``, write the two files and print the table."""
    out_dir = Path(args.out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out-dir must be a directory, not the file {str(out_dir)!r}")
    rows = collect(args.seed, args.tokens)
    title = "Paper numbers next to ours (golden models)"
    intro = (f"seed {args.seed}; all data synthetic and deterministic; every 'ours' value is "
             "computed by the golden models (see golden/paper/__init__.py for data and readings)")
    table = render_markdown(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = [f"# {title}", "", intro, "", *table, "", "## Data and readings", "",
           re.sub(r":(?:func|mod|data):`", "`",
                  __doc__[__doc__.index("Where the paper numbers"):].strip())]
    (out_dir / "paper.md").write_text("\n".join(doc) + "\n", encoding="utf-8")
    write_csv(rows, out_dir / "paper.csv")
    print(title, file=out)
    print(intro, file=out)
    print("", file=out)
    for line in table:
        print(line, file=out)
    print("", file=out)
    print(f"wrote {out_dir / 'paper.md'} and {out_dir / 'paper.csv'} ({len(rows)} rows)",
          file=out)


def main(argv=None):
    """Parse ``argv`` (default ``sys.argv[1:]``), run the report and print it to stdout."""
    return report_main(_parser(), run, argv)
