"""cocotb test bench for ``kllm_column`` (contract section 7) against its golden model
(:func:`golden.kllm.column.column_outputs`, :func:`golden.kllm.column.load_codebook`; the beat
adapter :data:`golden.kllm.beats.kllm_column` uses the same functions).

A run is a list of segments: an optional codebook load (``cb`` beats) followed by reductions
(``i`` beats). A reduction of K entries takes ``ceil(K / n_inputs)`` beats; the lanes after its
final entry are padding with random indices (and weights) and mask 0, and its final beat has
``last``. The two input streams are sequenced as the unit's interface requires: a load is sent
only once every earlier ``i`` beat has been taken, and the reductions after it only once the
whole load has been taken; with that, the codebook each reduction sees is known and the
results are deterministic. Every ``o`` beat is compared: ``overflow`` always, ``y`` (binary16,
every NaN the canonical 0x7E00) wherever the golden ``overflow`` is 0 (``y`` is unspecified
otherwise).

Every entry of the codebook reads +0.0 after reset until it is loaded (the unit clears its
codebook after reset). ``directed_corners`` checks reductions before any load against the +0.0
codebook; every other test starts with a full load, which defines every entry.

Tests
-----
directed_corners
    Reductions before any load (the codebook is +0.0: y = +0); a codebook of special entries
    (+-inf, NaNs of both signs and several payloads, 65504 and -65504, the smallest subnormal,
    -0, 4096 and -4096, 1 + 2^-10, 2^-11) and reductions that hit them: inf - inf = NaN, NaN
    bins that count nothing (count 0, or signed weights that cancel in ik mode), masked lanes
    on NaN bins, overflow of the binary16 result to +-inf at 65520, binary16 subnormal
    results, ties of the binary32 products and sums and of the binary16 rounding, exact
    cancellation to +0, the bin order of the sum; all-masked reductions (y = +0), K = 1,
    K = max_len in one bin; a load ended early by ``last`` (later entries kept), a load with
    beats past the final entry (ignored), two loads back to back. Light backpressure.
random_reductions_backpressure
    ``QLLM_REDUCTIONS`` (default 2000) reductions with K uniform in log scale from 1 to 4096
    (at most ``max_len``), histograms from one bin to every bin, masks from none to every lane
    (all-masked reductions included), ik weights uniform, extreme or cancelling in pairs; a
    codebook reload about every ``QLLM_REDUCTIONS / 8`` reductions (random binary16 values of
    several kinds: normal values over a few binades, values over the whole range, random bit
    patterns with NaNs and infinities, a few special entries; full loads, loads ended early,
    loads with extra beats). Random gaps on ``cb`` and ``i`` valid and ``o`` ready.
overflow_boundaries
    The bin counters at their limits (width :func:`golden.kllm.idx_counter.counter_width` of the
    manifest's ``max_len``): K = max_len in one bin (ik: with the most negative and the most
    positive weight) must not overflow, one count more must; in ik mode a running count that leaves
    the range and comes back still overflows. A normal reduction follows each one (the flag is per
    reduction). Meant for a small ``max_len`` (16 or 40); cheap at 4096 too.
throughput
    No backpressure: a few reductions of 1, 16 and 256 beats with one bin or every bin
    non-zero; records ``i`` beats per cycle and cycles per reduction (the unit stalls ``i``
    while its weighted sum is busy: recorded, not asserted).
"""

import os

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from qllm_cores.golden.kllm import column_outputs, counter_width, load_codebook, reductions_to_beats
from qllm_cores.verif.bench import Bench, record_metrics

#: binary16 specials used by the random codebooks.
SPECIAL_FP16 = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x7FFF,
                         0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00])

#: The directed codebook (entry -> binary16 pattern), used where the codebook has the entry.
DIRECTED_CODEBOOK = {
    0: 0x7C00,    # +inf
    1: 0xFC00,    # -inf
    2: 0x7E00,    # NaN
    3: 0xFE01,    # NaN, sign set, another payload
    4: 0x7BFF,    # 65504
    5: 0x3C00,    # 1.0
    6: 0x0001,    # 2^-24, the smallest subnormal
    7: 0x83FF,    # -1023 x 2^-24, the largest negative subnormal
    8: 0x0400,    # 2^-14, the smallest normal
    9: 0x8000,    # -0.0
    10: 0x6C00,   # 4096.0
    11: 0xEC00,   # -4096.0
    12: 0x3C01,   # 1 + 2^-10
    13: 0xBC00,   # -1.0
    14: 0x1000,   # 2^-11
    15: 0xFBFF,   # -65504
}

#: Directed reductions as {bin: count} (see the module docstring); a case is used when its
#: bins exist and the golden counters hold it (a count beyond the counter range would only
#: test the overflow flag, which overflow_boundaries does).
DIRECTED_COUNTS = [
    {0: 1, 1: 1},                 # inf - inf = NaN
    {2: 3}, {3: 1},               # a counted NaN gives 0x7E00
    {5: 7},                       # NaN entries present but not counted
    {0: 2}, {1: 3}, {0: 1, 5: 3},  # infinities
    {4: 1, 5: 15},                # 65519 -> 65504
    {4: 1, 5: 16},                # 65520 -> inf
    {15: 1, 13: 16},              # -65520 -> -inf
    {4: 40},                      # finite in binary32, inf in binary16
    {7: 1, 8: 1},                 # 2^-24: a subnormal result
    {6: 3}, {6: 1023}, {6: 1024},  # subnormals up to the smallest normal
    {5: 1, 14: 1}, {5: 1, 14: 3},  # binary16 ties: 1 + 2^-11 -> 1, 1 + 3 x 2^-11 -> 1 + 2^-9
    {10: 4096, 5: 1, 11: 4096},   # 2^24 + 1 -> 2^24 (binary32 tie), then - 2^24: +0
    {10: 4096, 5: 3, 11: 4096},   # 2^24 + 3 -> 2^24 + 4, then - 2^24: 4.0
    {12: 16385, 13: 16401},       # product tie (down), cancellation: +0
    {12: 16387, 13: 16403},       # product tie (up): 2^-8
    {9: 5},                       # 5 x -0 = -0; +0 + -0 = +0
    {5: 1, 13: 1},                # exact cancellation: +0
    {5: 2, 12: 1, 13: 3, 14: 5},  # a short mixed sum
]


def _pack_mask(lanes):
    """(beats, n) booleans -> one integer per beat, bit j = lane j (object ints past 62)."""
    lanes = np.asarray(lanes, dtype=np.int64)
    n = lanes.shape[1]
    if n <= 62:
        return lanes @ (np.int64(1) << np.arange(n, dtype=np.int64))
    return lanes.astype(object) @ np.array([1 << j for j in range(n)], dtype=object)


def fp16_patterns(values):
    """binary16 patterns of float ``values`` (rounded to nearest, overflow to infinity)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, np.float64).astype(np.float16).view(np.uint16).astype(np.int64)


class Plan:
    """Segments of (codebook load, reductions) and what the golden model expects of them."""

    def __init__(self, params, rng):
        self.p = params
        self.rng = rng
        self.n = params["n_inputs"]
        self.ik = params["mode"] == "ik"
        self.a_bits = params["a_bits"]
        self.b_bits = params["b_bits"] if not self.ik else 0
        self.weight_bits = params.get("weight_bits") or 4
        self.half = 1 << (self.weight_bits - 1)
        self.entries = 1 << (self.a_bits + self.b_bits)
        self.width = counter_width(params["max_len"], params["mode"], self.weight_bits)
        self.count_low, self.count_high = ((0, (1 << self.width) - 1) if not self.ik else
                                           (-(1 << (self.width - 1)),
                                            (1 << (self.width - 1)) - 1))
        self.codebook = np.zeros(self.entries, np.int64)      # a fresh simulation: +0.0
        self.position = 0
        self.segments = []          # [cb fields or None, [i field dicts]]
        self.books = []             # the codebook of each reduction
        self.lengths = []           # K of each reduction
        self.i_beats = []           # i field dicts, in order

    # --- codebook loads -----------------------------------------------------------------

    def load(self, value, last=None):
        """Queue a load of the binary16 patterns ``value`` (``last`` on the final beat unless
        given) and apply it to the codebook the next reductions see."""
        value = np.asarray(value, np.int64)
        if last is None:
            last = np.zeros(value.size, np.int64)
            last[-1] = 1
        self.codebook, self.position = load_codebook(self.codebook, value, last, self.position)
        self.segments.append([{"value": value, "last": np.asarray(last, np.int64)}, []])

    def random_codebook(self, kind=None):
        """binary16 patterns of one of several kinds (see the module docstring)."""
        rng, size = self.rng, self.entries
        kind = kind or rng.choice(["normal", "normal", "wide", "raw", "specials"])
        if kind == "normal":
            values = rng.standard_normal(size) * np.exp2(rng.integers(-8, 5))
            return fp16_patterns(values * np.exp2(rng.integers(-3, 4, size)))
        if kind == "wide":
            magnitude = np.exp2(rng.uniform(-24, 16, size))
            return fp16_patterns(np.minimum(magnitude, 65504) * rng.choice([-1, 1], size))
        if kind == "raw":
            return rng.integers(0, 1 << 16, size)
        book = fp16_patterns(rng.standard_normal(size))
        pick = rng.random(size) < 0.1
        book[pick] = rng.choice(SPECIAL_FP16, int(pick.sum()))
        return book

    def random_load(self, full=False):
        """A load of a random codebook: full (most, or if ``full``), ended early, or with extra
        beats."""
        value = self.random_codebook()
        shape = "full" if full else self.rng.choice(["full", "full", "full", "early", "extra"])
        if shape == "early":
            value = value[:int(self.rng.integers(1, self.entries + 1))]
        elif shape == "extra":
            value = np.concatenate([value, self.rng.integers(0, 1 << 16,
                                                             int(self.rng.integers(1, 6)))])
        self.load(value)

    # --- reductions -----------------------------------------------------------------------

    def reductions(self, lengths, bins, mask, weights=None):
        """Queue reductions of K = ``lengths`` entries: ``bins`` (codebook entries: the
        concatenated index in kk mode, the activation index in ik mode), ``mask`` (bool) and, in
        ik mode, ``weights``, all flat over the entries."""
        lengths = np.asarray(lengths, np.int64)
        lanes = {"bin": np.asarray(bins, np.int64), "mask": np.asarray(mask, bool)}
        if self.ik:
            lanes["weight"] = np.asarray(weights, np.int64)
        beats = reductions_to_beats(lengths, self.n, lanes)
        padding = beats["padding"]
        # Padding lanes carry random indices and weights: the mask must silence them.
        random_bins = self.rng.integers(0, self.entries, padding.shape)
        bins = np.where(padding, random_bins, beats["bin"])
        fields = {"a": bins >> self.b_bits}
        if self.ik:
            random_weights = self.rng.integers(-self.half, self.half, padding.shape)
            fields["weight"] = np.where(padding, random_weights, beats["weight"])
        else:
            fields["b"] = bins & ((1 << self.b_bits) - 1)
        fields["mask"] = beats["mask"]
        fields["last"] = beats["last"]
        if not self.segments:
            self.segments.append([None, []])
        self.segments[-1][1].append(fields)
        self.i_beats.append(fields)
        self.books += [self.codebook] * lengths.size
        self.lengths += lengths.tolist()

    def lanes_for_counts(self, counts, shuffle=True):
        """(bins, weights) of lanes whose histogram is ``counts`` ({bin: count}): one lane per
        unit in kk mode; in ik mode weights of the largest magnitude that sum to the count (a
        count of 0 as a cancelling pair)."""
        bins, weights = [], []
        for b, count in counts.items():
            if not self.ik:
                bins += [b] * count
                continue
            if count == 0:
                parts = [3 % self.half or 1, -(3 % self.half or 1)]
            else:
                big = self.half - 1 if count > 0 else self.half
                big = big or 1
                whole, rest = divmod(abs(count), big)
                sign = 1 if count > 0 else -1
                parts = [sign * big] * whole + ([sign * rest] if rest else [])
            bins += [b] * len(parts)
            weights += parts
        bins, weights = np.array(bins, np.int64), np.array(weights, np.int64)
        if shuffle:
            order = self.rng.permutation(bins.size)
            bins = bins[order]
            weights = weights[order] if self.ik else weights
        return bins, (weights if self.ik else None)

    def counted(self, counts, masked_extra=0, shuffle=True):
        """Queue one reduction with histogram ``counts`` plus ``masked_extra`` masked lanes of
        random indices (and weights)."""
        bins, weights = self.lanes_for_counts(counts, shuffle)
        extra_bins = self.rng.integers(0, self.entries, masked_extra)
        bins = np.concatenate([bins, extra_bins])
        mask = np.arange(bins.size) < bins.size - masked_extra
        if self.ik:
            weights = np.concatenate([weights, self.rng.integers(-self.half, self.half,
                                                                 masked_extra)])
        if masked_extra:
            order = self.rng.permutation(bins.size)
            bins, mask = bins[order], mask[order]
            weights = weights[order] if self.ik else None
        self.reductions([bins.size], bins, mask, weights)

    def random_reductions(self, count, max_k):
        """``count`` random reductions (see the module docstring), K from 1 to ``max_k``."""
        rng = self.rng
        k = np.minimum(np.exp(rng.uniform(0, np.log(max_k + 1), count)).astype(np.int64), max_k)
        k = np.maximum(k, 1)
        total = int(k.sum())
        owner = np.repeat(np.arange(count), k)
        # Histogram density: each reduction draws its bins from a random subset of 2^s bins.
        support = np.minimum(1 << rng.integers(0, self.a_bits + self.b_bits + 1, count),
                             self.entries)
        subsets = np.argsort(rng.random((count, self.entries)), axis=1)
        pick = (rng.random(total) * support[owner]).astype(np.int64)
        bins = subsets[owner, pick]
        density = rng.choice([1.0, 1.0, 0.95, 0.5, 0.05, 0.0], count)
        mask = rng.random(total) < density[owner]
        weights = None
        if self.ik:
            kind = rng.integers(0, 3, count)[owner]
            uniform = rng.integers(-self.half, self.half, total)
            extreme = np.where(rng.random(total) < 0.5, -self.half, self.half - 1)
            weights = np.where(kind == 0, uniform, np.where(kind == 1, extreme, uniform))
            # kind 2: lanes in pairs (same bin, opposite weights): most counts cancel to 0.
            pairs = (kind == 2) & (np.arange(total) % 2 == 1) & (np.arange(total) > 0)
            prev = np.flatnonzero(pairs) - 1
            same = owner[prev] == owner[prev + 1]
            prev = prev[same]
            bins[prev + 1] = bins[prev]
            mask[prev + 1] = mask[prev]
            w = np.clip(weights[prev], -(self.half - 1), self.half - 1)
            weights[prev], weights[prev + 1] = w, -w
        self.reductions(k, bins, mask, weights)

    # --- expected outputs -----------------------------------------------------------------

    def all_i_fields(self):
        names = self.i_beats[0].keys()
        return {name: np.concatenate([f[name] for f in self.i_beats]) for name in names}

    def expected(self):
        """The golden :class:`golden.kllm.column.ColumnOutputs` of every reduction, in order."""
        i = self.all_i_fields()
        return column_outputs(i["a"], i["weight"] if self.ik else i["b"], i["mask"], i["last"],
                              np.array(self.books), self.a_bits, self.b_bits or None,
                              self.p["mode"], self.weight_bits, self.p["max_len"])

    def beat_count(self, port):
        if port == "i":
            return sum(len(f["last"]) for f in self.i_beats)
        return sum(len(cb["value"]) for cb, _ in self.segments if cb is not None)


async def _until(clock, condition):
    while not condition():
        await RisingEdge(clock)


async def drive(bench, plan):
    """Send the plan's segments in the order the unit requires (see the module docstring)."""
    cb, i = bench.drivers["cb"], bench.drivers["i"]
    for load, reductions in plan.segments:
        if load is not None:
            await _until(bench.dut.clk, lambda: i.idle)
            bench.send("cb", load)
            await _until(bench.dut.clk, lambda: cb.idle)
        for fields in reductions:
            bench.send("i", dict(fields, mask=_pack_mask(fields["mask"])))


def check(bench, plan):
    """Compare every output beat with the golden model; return the expected outputs."""
    want = plan.expected()
    got = bench.received("o")
    y = np.asarray(got["y"], np.int64)
    overflow = np.asarray(got["overflow"], np.int64)
    assert y.size == want.y.size, (
        f"o: {y.size} beats received, {want.y.size} expected (lost or duplicated beats)")
    bad = np.flatnonzero((overflow != want.overflow) | ((y != want.y) & ~want.overflow))
    if bad.size:
        r = int(bad[0])
        nonzero = np.flatnonzero(want.counts[r])
        book = plan.books[r]
        detail = ", ".join(f"bin {b}: {want.counts[r, b]} x {book[b]:#06x}"
                           for b in nonzero[:12])
        raise AssertionError(
            f"o: {bad.size} of {y.size} results differ; first at reduction {r} (K = "
            f"{plan.lengths[r]}): got y {y[r]:#06x} overflow {overflow[r]}, expected y "
            f"{int(want.y[r]):#06x} overflow {int(want.overflow[r])}; {nonzero.size} non-zero "
            f"bins: {detail}{' ...' if nonzero.size > 12 else ''}")
    return want


def cycle_budget(plan):
    """Generous cycles for the plan under backpressure: every beat, every bin of every
    reduction's weighted sum several times over, and the pipeline."""
    reductions = len(plan.lengths)
    per_reduction = 12 * plan.entries + 200
    return 8 * (plan.beat_count("i") + plan.beat_count("cb")) + reductions * per_reduction \
        + 2000


async def run(bench, plan):
    """Start the bench, drive the plan, wait for every result and check it."""
    await bench.start()
    cocotb.start_soon(drive(bench, plan))
    await bench.wait_for("o", len(plan.lengths), max_cycles=cycle_budget(plan))
    return check(bench, plan)


# --------------------------------------------------------------------------- tests


@cocotb.test()
async def directed_corners(dut):
    bench = Bench(dut, valid_probability=0.9, ready_probability=0.8, seed_offset=0)
    plan = Plan(bench.params, bench.rng)
    n, entries, max_len = plan.n, plan.entries, bench.params["max_len"]
    # Before any load: the codebook is +0.0 (y = +0 whatever counts).
    plan.random_reductions(3, min(64, max_len))
    # The directed codebook (random normal values where it has no directed entry).
    book = plan.random_codebook("normal")
    for entry, pattern in DIRECTED_CODEBOOK.items():
        if entry < entries:
            book[entry] = pattern
    plan.load(book)
    for counts in DIRECTED_COUNTS:
        if max(counts) >= entries:
            continue
        if not all(plan.count_low <= c <= plan.count_high for c in counts.values()):
            continue
        plan.counted(counts)
        plan.counted(counts, masked_extra=int(plan.rng.integers(1, 2 * n + 1)))
    if plan.ik and entries > 5:
        # NaN and infinite bins whose signed weights cancel: count 0, skipped.
        plan.counted({0: 0, 1: 0, 2: 0, 3: 0, 5: 2})
        plan.counted({2: 0, 5: -3})
    # All masked (y = +0), a single entry, K = max_len in one bin (ik: the most negative and
    # the most positive weight: the counter's extremes).
    plan.reductions([3 * n], plan.rng.integers(0, entries, 3 * n), np.zeros(3 * n, bool),
                    plan.rng.integers(-plan.half, plan.half, 3 * n) if plan.ik else None)
    plan.reductions([1], [min(5, entries - 1)], [True], [1] if plan.ik else None)
    top = min(5, entries - 1)
    for weight in ([-plan.half, plan.half - 1] if plan.ik else [None]):
        plan.reductions([max_len], np.full(max_len, top), np.ones(max_len, bool),
                        np.full(max_len, weight) if plan.ik else None)
    # A load ended early by `last` (entries 0..2 replaced, the rest kept), then one with extra
    # beats (ignored), then two loads back to back; reductions over every bin after each.
    every = np.arange(entries)
    plan.load(fp16_patterns([1.5, -2.0, 0.25])[:min(3, entries)])
    plan.reductions([entries], every, np.ones(entries, bool),
                    np.ones(entries, np.int64) if plan.ik else None)
    plan.load(np.concatenate([plan.random_codebook("normal"), [0x7E00, 0x7C00, 0x3C00]]))
    plan.reductions([2 * entries], np.tile(every, 2), np.ones(2 * entries, bool),
                    plan.rng.integers(-plan.half, plan.half, 2 * entries) if plan.ik else None)
    plan.load(plan.random_codebook("specials"))
    plan.load(plan.random_codebook("normal"))
    plan.random_reductions(40, min(4096, max_len))
    want = await run(bench, plan)
    record_metrics("directed_corners", reductions=len(plan.lengths),
                   nan_results=int(((want.y == 0x7E00) & ~want.overflow).sum()),
                   inf_results=int((((want.y & 0x7FFF) == 0x7C00) & ~want.overflow).sum()))


@cocotb.test()
async def random_reductions_backpressure(dut):
    bench = Bench(dut, valid_probability=0.8, ready_probability=0.7, seed_offset=1)
    plan = Plan(bench.params, bench.rng)
    count = int(os.environ.get("QLLM_REDUCTIONS", 2000))
    max_k = min(4096, bench.params["max_len"])
    done = 0
    while done < count:
        plan.random_load(full=not done)      # the first load defines every entry
        chunk = min(count - done, int(plan.rng.integers(1, max(2, count // 4))))
        plan.random_reductions(chunk, max_k)
        done += chunk
    want = await run(bench, plan)
    lengths = np.array(plan.lengths)
    dut._log.info("%d reductions (K %d..%d, %d entries), %d loads, %d i beats in %.1f s",
                  count, lengths.min(), lengths.max(), lengths.sum(), len(plan.segments),
                  plan.beat_count("i"), bench.wall_seconds)
    record_metrics("random_reductions_backpressure", reductions=count, loads=len(plan.segments),
                   entries=int(lengths.sum()), max_k=int(lengths.max()),
                   beats=plan.beat_count("i"), seconds=bench.wall_seconds,
                   beats_per_second=plan.beat_count("i") / bench.wall_seconds,
                   nan_results=int((want.y == 0x7E00).sum()),
                   zero_results=int((want.y == 0).sum()))


@cocotb.test()
async def overflow_boundaries(dut):
    bench = Bench(dut, valid_probability=0.9, ready_probability=0.8, seed_offset=2)
    plan = Plan(bench.params, bench.rng)
    max_len, entries = bench.params["max_len"], plan.entries
    plan.load(plan.random_codebook("normal"))
    b = min(3, entries - 1)

    def one_bin(weights):
        k = len(weights)
        plan.reductions([k], np.full(k, b), np.ones(k, bool),
                        np.asarray(weights) if plan.ik else None)
        plan.random_reductions(1, 3 * plan.n)          # a normal reduction after each

    if plan.ik:
        low, high = plan.count_low, plan.count_high
        most_negative, most_positive = -plan.half, plan.half - 1
        one_bin([most_negative] * max_len)              # within range by construction
        one_bin([most_positive] * max_len)
        one_bin([most_negative] * (low // most_negative + 1))        # one step below
        over_high = high // most_positive + 1
        one_bin([most_positive] * over_high)                         # above
        one_bin([most_positive] * over_high + [-most_positive] * over_high)  # out and back
        one_bin([most_negative, most_positive] * max_len)            # ups and downs inside
    else:
        one_bin([None] * max_len)                                    # max_len: fits
        one_bin([None] * plan.count_high)                            # the counter's maximum
        one_bin([None] * (plan.count_high + 1))                      # one more: overflow
        # Two bins over the limit, and masked lanes beyond it (they count nothing).
        k = plan.count_high + 1
        two = np.concatenate([np.full(k, b), np.full(k, (b + 1) % entries)])
        plan.reductions([2 * k], two, np.ones(2 * k, bool))
        plan.reductions([2 * k], np.full(2 * k, b), np.arange(2 * k) % 2 == 0)
    want = await run(bench, plan)
    assert want.overflow.any() and not want.overflow.all()
    record_metrics("overflow_boundaries", reductions=len(plan.lengths),
                   overflows=int(want.overflow.sum()), counter_bits=plan.width)


@cocotb.test()
async def throughput(dut):
    bench = Bench(dut, seed_offset=3)
    plan = Plan(bench.params, bench.rng)
    n, entries = plan.n, plan.entries
    await bench.start()
    driver, monitor = bench.drivers["i"], bench.monitors["o"]
    plan.load(plan.random_codebook("normal"))
    bench.send("cb", plan.segments[0][0])
    await _until(dut.clk, lambda: driver.idle and bench.drivers["cb"].idle)
    rows = []
    results = 0
    for beats in (1, 16, 256):
        for spread in ("one bin", "every bin"):
            reductions = 4
            k = beats * n
            first_beat, first_out = len(driver.transfer_cycles), len(monitor.words)
            for _ in range(reductions):
                bins = (np.full(k, 1 % entries) if spread == "one bin"
                        else np.arange(k) % entries)
                plan.reductions([k], bins, np.ones(k, bool),
                                np.ones(k, np.int64) if plan.ik else None)
                bench.send("i", dict(plan.i_beats[-1],
                                     mask=_pack_mask(plan.i_beats[-1]["mask"])))
            results += reductions
            await bench.wait_for("o", results, max_cycles=reductions * (beats + 12 * entries)
                                 + 2000)
            cycles = driver.transfer_cycles[first_beat:]
            outs = monitor.transfer_cycles[first_out:]
            input_cycles = cycles[-1] - cycles[0] + 1
            row = {"beats": beats, "spread": spread, "reductions": reductions,
                   "input_beats": len(cycles), "input_cycles": input_cycles,
                   "beats_per_cycle": len(cycles) / input_cycles,
                   "cycles_per_reduction": (outs[-1] - cycles[0] + 1) / reductions,
                   "first_result_after_last_beat": outs[0] - cycles[beats - 1]}
            rows.append(row)
            dut._log.info("%3d beats/reduction, %-9s: %.3f i beats/cycle, %.1f cycles per "
                          "reduction", beats, spread, row["beats_per_cycle"],
                          row["cycles_per_reduction"])
    check(bench, plan)
    record_metrics("throughput", rows=rows, bins=entries, latency=bench.latency)
