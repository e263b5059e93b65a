"""Print Oaken's profiled thresholds, stored bits and reconstruction error against 4-bit baselines.

Usage::

    python -m qllm_cores.golden.oaken.report [--seed N] [--eval-seed N] [--runs N] [--tokens N] ...

Oaken section 4.3 (offline threshold profiling), 4.4-4.5 (23-bit versus 8-bit outlier entries),
6.1-6.2 (ratio 4 / 90 / 6 %, baselines, effective bitwidth). Steps, all deterministic:

1. Profiling: ``--runs`` synthetic "inferences" of ``--profile-tokens`` tokens for each of
   ``--layers`` layers, keys and values separately (:func:`golden.oaken.profile.synthetic_kv`,
   token seeds ``[seed, 0, run, layer, kind]``); thresholds per layer and kind with
   :func:`golden.oaken.profile.profile_layers`.
2. Evaluation on fresh tokens of the same synthetic model (token seeds
   ``[eval_seed, 1, layer, kind]``; ``eval_seed`` defaults to ``seed + 1``): Oaken's integer
   path (:func:`golden.oaken.online.quantize_vector` / :func:`golden.oaken.online.dequantize_vector`
   per 64-element chunk), its float reference, per-token INT4, KIVI-like, Atom-like (outlier
   channels picked on the profiling data) and the 23-bit COO mixed-precision scheme.
3. One table per cache (keys, values) over all layers: bits per element stored (with and
   without per-group metadata), bits per outlier entry, RMSE, max |err|, SQNR and relative
   error, in units of the fixed-point LSB; plus the observed group fractions and bitwidths.
"""

import argparse
import sys

import numpy as np

from ..common.checks import non_negative_int_arg, positive_int_arg, report_main
from . import baselines as ob
from . import profile as op
from .online import MAX_VEC_LEN

KINDS = ("key", "value")


def _parser():
    p = argparse.ArgumentParser(prog="python -m qllm_cores.golden.oaken.report",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=non_negative_int_arg, default=0,
                   help="profiling seed (default 0)")
    p.add_argument("--eval-seed", type=non_negative_int_arg, default=None,
                   help="evaluation seed (default seed + 1)")
    p.add_argument("--model-seed", type=non_negative_int_arg, default=0,
                   help="synthetic model: per-layer structure (default 0)")
    p.add_argument("--runs", type=positive_int_arg, default=100,
                   help="profiling runs (default 100)")
    p.add_argument("--profile-tokens", type=positive_int_arg, default=32,
                   help="tokens per profiling run and layer (default 32)")
    p.add_argument("--tokens", type=positive_int_arg, default=256,
                   help="evaluation tokens per layer (default 256)")
    p.add_argument("--channels", type=positive_int_arg, default=128,
                   help="channels per token (default 128)")
    p.add_argument("--layers", type=positive_int_arg, default=4, help="layers (default 4)")
    p.add_argument("--outer", type=float, default=op.DEFAULT_OUTER,
                   help="outer group fraction (default 0.04)")
    p.add_argument("--inner", type=float, default=op.DEFAULT_INNER,
                   help="inner group fraction (default 0.06)")
    p.add_argument("--frac-bits", type=positive_int_arg, default=8,
                   help="fractional bits of the data and of Oaken's metadata (default 8)")
    p.add_argument("--group", type=positive_int_arg, default=64,
                   help="per-token INT4 and Atom-like group size (default 64)")
    p.add_argument("--kivi-group", type=positive_int_arg, default=32,
                   help="KIVI-like group size (default 32)")
    p.add_argument("--atom-channels", type=non_negative_int_arg, default=8,
                   help="Atom-like INT8 outlier channels (default 8)")
    return p


class _Acc:
    """Accumulates reconstructions and bit totals of one scheme over layers."""

    def __init__(self, name, bits_per_outlier):
        self.name, self.bits_per_outlier = name, bits_per_outlier
        self.x, self.y = [], []
        self.bits = self.bits_no_meta = 0.0
        self.has_meta = True

    def add(self, x, y, bits_per_element, bits_no_meta):
        self.x.append(np.asarray(x, np.float64).ravel())
        self.y.append(np.asarray(y, np.float64).ravel())
        if bits_per_element is None:
            self.has_meta = False
        else:
            self.bits += bits_per_element * x.size
        self.bits_no_meta += bits_no_meta * x.size

    def row(self):
        x, y = np.concatenate(self.x), np.concatenate(self.y)
        m = ob.error_metrics(x, y)
        bits = f"{self.bits / x.size:.3f}" if self.has_meta else "-"
        outlier = "-" if self.bits_per_outlier is None else self.bits_per_outlier
        return [self.name, bits, f"{self.bits_no_meta / x.size:.3f}", outlier,
                f"{m.rmse:.2f}", f"{m.max_abs:.1f}", f"{m.sqnr_db:.2f}", f"{m.rel_err:.4f}"]


HEADER = ["scheme", "bits/elem", "w/o meta", "bits/outlier", "RMSE", "max |err|", "SQNR dB",
          "rel err"]


def _table(rows):
    widths = [max(len(str(r[i])) for r in [HEADER] + rows) for i in range(len(HEADER))]
    def fmt(r):
        return " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                          for i, (c, w) in enumerate(zip(r, widths)))
    return [fmt(HEADER), "-+-".join("-" * w for w in widths)] + [fmt(r) for r in rows]


def run(args, out):
    """Run the report for parsed ``args``, printing to the text stream ``out``."""
    eval_seed = args.seed + 1 if args.eval_seed is None else args.eval_seed
    data_bits, frac_bits, vec_len = 16, args.frac_bits, MAX_VEC_LEN
    if frac_bits >= data_bits:
        raise ValueError(f"frac_bits must be in range 1..{data_bits - 1}, not {frac_bits}")
    op.topk_counts(1, args.outer, args.inner)            # validates the ratios
    say = lambda *a: print(*a, file=out)                # noqa: E731
    lsb = 1 << frac_bits
    outer, inner = args.outer, args.inner
    middle = 1.0 - outer - inner

    say("Oaken offline threshold profiling and KV quantization error report")
    say(f"synthetic model seed {args.model_seed}: {args.layers} layers, {args.channels} "
        f"channels, Q{data_bits - frac_bits}.{frac_bits} in {data_bits} bits "
        f"(errors in LSB = 1/{lsb})")
    say(f"profiling: {args.runs} runs x {args.profile_tokens} tokens per layer (seed "
        f"{args.seed}); evaluation: {args.tokens} fresh tokens per layer (seed {eval_seed})")
    say(f"group ratio outer / middle / inner = {100 * outer:.1f} / {100 * middle:.1f} / "
        f"{100 * inner:.1f} %; Oaken chunk {vec_len} elements, metadata 6 x "
        f"{data_bits + frac_bits + 2} bits")

    profile, thresholds = {}, {}
    for k, kind in enumerate(KINDS):
        profile[kind] = np.stack([
            np.stack([op.synthetic_kv(np.random.default_rng([args.seed, 0, r, layer, k]),
                                      args.profile_tokens, args.channels, kind, layer,
                                      args.model_seed, frac_bits, data_bits)
                      for layer in range(args.layers)])
            for r in range(args.runs)])
        thresholds[kind] = op.profile_layers(profile[kind], outer, inner, data_bits)

    say("")
    say("profiled thresholds per layer (t_lo_o, t_lo_i, t_hi_i, t_hi_o), integer and real:")
    for layer in range(args.layers):
        for kind in KINDS:
            th = thresholds[kind][layer]
            real = ", ".join(f"{t / lsb:.3f}" for t in th)
            say(f"  layer {layer} {kind:5}: {str(th):28} ({real})")

    tables, observed = {}, {}
    for k, kind in enumerate(KINDS):
        accs = [
            _Acc("Oaken (integer path)", ob.COO_BITS),
            _Acc("Oaken (float reference)", ob.COO_BITS),
            _Acc(f"per-token INT4 (g{args.group})", None),
            _Acc(f"KIVI-like INT4 (g{args.kivi_group})", None),
            _Acc(f"Atom-like ({args.atom_channels} ch INT8, g{args.group})",
                 "8 (ch)" if args.atom_channels else None),
            _Acc(f"mixed 23-bit COO + INT4 (g{vec_len})", data_bits + 7),
        ]
        counts = np.zeros(3, np.int64)                  # outer, middle, inner
        for layer in range(args.layers):
            th = thresholds[kind][layer]
            x = op.synthetic_kv(np.random.default_rng([eval_seed, 1, layer, k]), args.tokens,
                                args.channels, kind, layer, args.model_seed, frac_bits,
                                data_bits)
            o = ob.oaken_roundtrip(x, th, frac_bits, data_bits, vec_len)
            counts += [o.n_outer, o.n_elements - o.n_outer - o.n_inner, o.n_inner]
            accs[0].add(x, o.recon, o.bits_per_element, o.bits_per_element_no_meta)
            accs[1].add(x, ob.oaken_float_roundtrip(x, th, vec_len), None,
                        o.bits_per_element_no_meta)
            calib = profile[kind][:, layer].reshape(-1, args.channels)
            for acc, r in zip(accs[2:], (
                    ob.per_token_int4(x, args.group),
                    ob.kivi_like(x, kind, args.kivi_group),
                    ob.atom_like(x, min(args.atom_channels, args.channels), args.group,
                                 calib=calib),
                    ob.coo23_mixed(x, th, vec_len, data_bits=data_bits))):
                acc.add(x, r.recon, r.bits_per_element, r.bits_per_element_no_meta)
        tables[kind] = [a.row() for a in accs]
        observed[kind] = (counts / counts.sum(), accs[0])

    say("")
    say("observed group fractions on the evaluation data (inner/outer from the COO group bits):")
    for kind in KINDS:
        f = observed[kind][0]
        say(f"  {kind:5}: outer {100 * f[0]:.2f} %  middle {100 * f[1]:.2f} %  "
            f"inner {100 * f[2]:.2f} %  (outliers {100 * (f[0] + f[2]):.2f} %)")
    eff = ob.effective_bitwidth(outer, inner)
    say(f"effective bitwidth at {100 * outer:.1f} / {100 * middle:.1f} / {100 * inner:.1f} %: "
        f"4 + 8 x {outer + inner:.3f} = {eff:.3f} bits per element (no metadata)")
    for kind in KINDS:
        acc = observed[kind][1]
        n = sum(a.size for a in acc.x)
        say(f"  observed Oaken {kind:5}: {acc.bits_no_meta / n:.3f} bits per element without "
            f"metadata, {acc.bits / n:.3f} with it")

    for kind in KINDS:
        say("")
        say(f"{kind} cache: {args.layers} layers x {args.tokens} tokens x {args.channels} "
            f"channels")
        for line in _table(tables[kind]):
            say(line)
    say("")
    say("bits/elem: all bits stored per element, per-group metadata included (fp16 scale + "
        "zero for the")
    say("  baselines; '-' for the float reference, whose metadata is float64); w/o meta: codes "
        "and sparse")
    say("  entries only; bits/outlier: one COO entry (Oaken 8, mixed 23) or one element of an "
        "INT8")
    say("  outlier channel (Atom).")


def main(argv=None):
    """Parse ``argv`` (default ``sys.argv[1:]``), run the report and print it to stdout."""
    return report_main(_parser(), run, argv)


if __name__ == "__main__":
    sys.exit(main())
