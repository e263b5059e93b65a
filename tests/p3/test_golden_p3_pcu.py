"""Golden model of the P3-LLM PIM compute unit (``golden.p3.pe.pcu_run``, contract section 9) and its
beat adapter (``golden.p3.beats.p3_pcu``).

References: the PE model :func:`golden.p3.pe.pe_run` run per PE and per slot (slot bookkeeping
written here), a hand-worked stream, and a float64 reference independent of the integer model
(E4M3 from ``ml_dtypes``, S0E4M4 as ``(1 + m/16) 2^(e-15)`` / ``m/16 2^-14``, BitMoD and INT4
weights as real values) checked exactly against ``acc * 2^-10 * unit`` / ``acc * 2^-18 * unit``.
"""

import ml_dtypes
import numpy as np
import pytest

from qllm_cores.golden import p3
from qllm_cores.golden.p3 import beats
from qllm_cores.verif.payload import PayloadCodec

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1
FIELDS = ("act", "wgt", "act_fmt", "wgt_fmt", "sv_sel", "zp", "first", "last")


# --- stream generators and the per-PE / per-slot reference -----------------------------------


def random_codes(rng, act_fmt):
    """(n, 4) activation codes for per-beat formats: uniform, 1 in 10 NaN-or-largest-exponent."""
    n = len(act_fmt)
    codes = rng.integers(0, 256, (n, 4))
    e4m3 = (np.asarray(act_fmt) == 0)[:, None]
    special = np.where(e4m3, rng.choice([0x7F, 0xFF, 0x7E, 0xF8, 0x01], (n, 4)),
                       rng.choice([0xFF, 0xF0, 0x01], (n, 4)))
    return np.where(rng.random((n, 4)) < 0.1, special, codes)


def random_beats(rng, n, pes, *, slots=None, reuse=1):
    """Random beats, every field random per beat; ``first``/``last`` random."""
    act_fmt = rng.integers(0, 2, n)
    return {"act": random_codes(rng, act_fmt), "wgt": rng.integers(0, 16, (n, pes, 4)),
            "act_fmt": act_fmt, "wgt_fmt": rng.integers(0, 2, n),
            "sv_sel": rng.integers(0, 4, (n, pes)), "zp": rng.integers(0, 16, (n, pes)),
            "first": rng.random(n) < 0.3, "last": rng.random(n) < 0.3,
            "slot": rng.integers(0, reuse, n) if slots is None else np.asarray(slots)}


def reference(i):
    """pe_run per slot and PE, outputs merged in the order of the ``last`` beats."""
    slot = np.asarray(i["slot"])
    last = np.asarray(i["last"], bool)
    pes = np.asarray(i["wgt"]).shape[1]
    per_slot = {}
    for s in np.unique(slot):
        rows = slot == s
        runs = [p3.pe_run(i["act"][rows], i["wgt"][rows, j], i["act_fmt"][rows],
                          i["wgt_fmt"][rows], i["sv_sel"][rows, j], i["zp"][rows, j],
                          i["first"][rows], i["last"][rows]) for j in range(pes)]
        per_slot[s] = {name: np.stack([r[name] for r in runs], axis=1)
                       for name in ("acc", "overflow", "nan")}
    out = {name: [] for name in ("acc", "overflow", "nan", "slot")}
    seen = {s: 0 for s in per_slot}
    for beat in np.flatnonzero(last):                     # the order of the last beats
        s = slot[beat]
        for name in ("acc", "overflow", "nan"):
            out[name].append(per_slot[s][name][seen[s]])
        out["slot"].append(s)
        seen[s] += 1
    return {name: np.array(value).reshape((len(value),) + ((pes,) if name != "slot" else ()))
            for name, value in out.items()}


def run(i, reuse, slot="slot"):
    return p3.pcu_run(*(i[name] for name in FIELDS), None if slot is None else i[slot],
                      reuse=reuse)


def assert_same(got, want):
    assert sorted(got) == ["acc", "nan", "overflow", "slot"]
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert got["acc"].dtype == np.int64 and got["slot"].dtype == np.int64
    assert got["overflow"].dtype == bool and got["nan"].dtype == bool


def overflowing_beats(rng, n, pes, reuse):
    """One long run per slot of 448 x +8 or -8 (BitMoD special, sign per PE) in every lane:
    29,360,128 per beat, past the int32 range after 73 beats of a slot."""
    return {"act": np.full((n, 4), 0x7E), "wgt": np.full((n, pes, 4), 8),
            "act_fmt": np.zeros(n, int), "wgt_fmt": np.zeros(n, int),
            "sv_sel": np.repeat(rng.integers(2, 4, (1, pes)), n, 0),
            "zp": np.zeros((n, pes), int), "first": np.arange(n) < reuse,
            "last": rng.random(n) < 0.05, "slot": np.arange(n) % reuse}


# --- (a) reuse 1: every PE is the PE model ---------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_reuse_1_is_pe_run_per_pe(seed):
    rng = np.random.default_rng(seed)
    i = random_beats(rng, 400, 16, slots=np.zeros(400, int))
    want = reference(i)
    assert len(want["slot"]) > 50 and want["nan"].any()
    assert_same(run(i, 1), want)
    assert_same(run(i, 1, slot=None), want)                # slot absent: all zeros
    i0 = dict(i, slot=0)
    assert_same(run(i0, 1), want)                          # a scalar slot
    o = overflowing_beats(rng, 200, 3, 1)
    want = reference(o)
    assert want["overflow"].any() and not want["overflow"].all()
    assert_same(run(o, 1), want)


def test_pes_other_than_16_and_scalar_fields():
    rng = np.random.default_rng(7)
    i = random_beats(rng, 60, 1, slots=np.zeros(60, int))
    assert_same(run(i, 1), reference(i))
    # Scalars for per-beat and per-PE fields apply everywhere.
    i = random_beats(rng, 60, 5, slots=np.zeros(60, int))
    i.update(act_fmt=np.zeros(60, int), wgt_fmt=np.ones(60, int), sv_sel=np.full((60, 5), 3),
             zp=np.full((60, 5), 9))
    want = reference(i)
    got = p3.pcu_run(i["act"], i["wgt"], 0, 1, 3, 9, i["first"], i["last"])
    assert_same(got, want)


# --- (b) reuse 2: two independent accumulator sets, outputs in the order of last --------------


def test_reuse_2_hand_worked_order():
    # 2 PEs. E4M3 0x38 = 1.0: M5 16, shift 6 -> 1024 w per lane; 0x40 = 2.0: 2048 w per lane.
    # BitMoD code 2 -> w 2 (PE 0), code 4 -> w 4 (PE 1).
    # beat 0, slot 0, first:        act 0x38 x4 -> PE0 4 * 2048 = 8192, PE1 16384.
    # beat 1, slot 1, first + last: act 0x40 x4 -> PE0 4 * 4096 = 16384, PE1 32768: output 1.
    # beat 2, slot 0, last:         act 0x38 in lane 0 only -> PE0 + 2048 = 10240, PE1 + 4096 =
    #   20480 (slot 1's first did not clear slot 0): output 2.
    # beat 3, slot 1, first:        NaN (0x7F) in lane 0, 0x38 in lane 1 -> PE0 2048, PE1 4096.
    # beat 4, slot 0, first + last: 0xB8 (-1.0) in lane 3 -> PE0 -2048, PE1 -4096: output 3.
    # beat 5, slot 1, last:         zeros -> PE0 2048, PE1 4096, nan: output 4.
    act = [[0x38] * 4, [0x40] * 4, [0x38, 0, 0, 0], [0x7F, 0x38, 0, 0], [0, 0, 0, 0xB8],
           [0] * 4]
    wgt = np.broadcast_to(np.array([[2] * 4, [4] * 4]), (6, 2, 4))
    out = p3.pcu_run(act, wgt, 0, 0, 0, 0, [1, 1, 0, 1, 1, 0], [0, 1, 1, 0, 1, 1],
                     [0, 1, 0, 1, 0, 1], reuse=2)
    assert_same(out, {"acc": [[16384, 32768], [10240, 20480], [-2048, -4096], [2048, 4096]],
                      "overflow": np.zeros((4, 2), bool),
                      "nan": [[0, 0], [0, 0], [0, 0], [1, 1]], "slot": [1, 0, 0, 1]})


@pytest.mark.parametrize("seed", [0, 1])
def test_reuse_2_alternating_pairs_are_two_pe_streams(seed):
    rng = np.random.default_rng(seed)
    n = 600                                               # 300 slot 0 / slot 1 pairs
    i = random_beats(rng, n, 16, slots=np.arange(n) % 2)
    for name in ("wgt", "act_fmt", "wgt_fmt", "sv_sel", "zp"):
        i[name][1::2] = i[name][0::2]                     # pairs share the weight column
    lasts = rng.random(n // 2) < 0.3                      # first/last per slot, own pattern
    i["last"][0::2], i["last"][1::2] = lasts, np.roll(lasts, 1)
    want = reference(i)
    assert set(want["slot"].tolist()) == {0, 1}
    assert_same(run(i, 2), want)
    # The output order follows the last beats: a slot's results alone are its pe_run stream.
    got = run(i, 2)
    np.testing.assert_array_equal(got["slot"], i["slot"][i["last"]])
    o = overflowing_beats(rng, 300, 4, 2)
    want = reference(o)
    assert want["overflow"].any() and not want["overflow"].all()
    assert_same(run(o, 2), want)


def test_reuse_2_irregular_slot_orders():
    rng = np.random.default_rng(3)
    for slots in (rng.integers(0, 2, 300), np.ones(50, int), np.r_[np.ones(20, int), 0, 0]):
        i = random_beats(rng, len(slots), 3, slots=slots)
        assert_same(run(i, 2), reference(i))
    empty = p3.pcu_run(np.zeros((0, 4), int), np.zeros((0, 16, 4), int), 0, 0, 0, 0, [], [], [],
                       reuse=2)
    assert empty["acc"].shape == (0, 16) and empty["slot"].shape == (0,)


# --- (c) float reference, independent of the integer model ------------------------------------


BITMOD = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
SPECIAL = np.array([5.0, -5.0, 8.0, -8.0])


def act_real(codes, fmt):
    """E4M3 via ml_dtypes (NaN kept); S0E4M4: (1 + m/16) 2^(e-15), subnormal m/16 2^-14."""
    codes = np.asarray(codes)
    e4m3 = codes.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    e, m = codes >> 4, codes & 15
    s0 = np.where(e > 0, (1 + m / 16) * 2.0 ** (e - 15), m / 16 * 2.0 ** -14)
    return np.where(fmt == 0, e4m3, s0)


def wgt_real(codes, fmt, sv_sel, zp):
    """BitMoD: sign bit 3, magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}, 0b1000 the special value;
    INT4: q - zp."""
    bitmod = np.where(codes == 8, SPECIAL[sv_sel],
                      np.where(codes >> 3, -1, 1) * BITMOD[codes & 7])
    return np.where(fmt == 0, bitmod, (codes - zp).astype(np.float64))


def one_format_stream(rng, dots, pes):
    """Reuse-2 pairs; each dot product one (act_fmt, wgt_fmt) and one sv_sel / zp per PE."""
    lengths = np.where(rng.random(dots) < 0.1, rng.integers(80, 200, dots),
                       rng.integers(1, 12, dots))
    cols = int(lengths.sum())
    dot = np.repeat(np.arange(dots), lengths)
    start = np.r_[0, np.cumsum(lengths)[:-1]]
    hot = (rng.random(dots) < 0.3)[dot]                   # large same-sign runs: overflow
    col = {"act_fmt": rng.integers(0, 2, dots)[dot], "wgt_fmt": rng.integers(0, 2, dots)[dot],
           "sv_sel": rng.integers(0, 4, (dots, pes))[dot],
           "zp": rng.integers(0, 16, (dots, pes))[dot],
           "wgt": rng.integers(0, 16, (cols, pes, 4)),
           "first": np.isin(np.arange(cols), start),
           "last": np.isin(np.arange(cols), start + lengths - 1)}
    col["act_fmt"][hot], col["wgt_fmt"][hot] = 0, 0
    col["sv_sel"][hot] = 2
    col["wgt"][hot] = 8
    i = {name: np.repeat(value, 2, axis=0) for name, value in col.items()}   # slot 0 / 1 pairs
    i["act"] = random_codes(rng, i["act_fmt"])
    i["act"][np.repeat(hot, 2)] = 0x7E
    i["slot"] = np.arange(2 * cols) % 2
    return i


def test_float_reference_of_every_lane():
    rng = np.random.default_rng(11)
    pes = 4
    i = one_format_stream(rng, 120, pes)
    got = run(i, 2)
    a = act_real(i["act"], i["act_fmt"][:, None])                       # (n, 4)
    w = wgt_real(i["wgt"], i["wgt_fmt"][:, None, None], i["sv_sel"][..., None],
                 i["zp"][..., None])                                    # (n, pes, 4)
    nan_lane = np.isnan(a)
    products = np.where(nan_lane[:, None, :], 0.0, np.nan_to_num(a)[:, None, :] * w).sum(-1)
    # One unit per beat: 2^-10 (E4M3) or 2^-18 (S0E4M4), times 0.5 (BitMoD) or 1 (INT4).
    unit = 2.0 ** np.where(i["act_fmt"] == 0, -10, -18) * np.where(i["wgt_fmt"] == 0, 0.5, 1)
    rows = {"overflow": 0, "clean": 0, "nan": 0}
    k = 0
    for s_end in np.flatnonzero(i["last"]):
        s = i["slot"][s_end]
        begin = max(b for b in np.flatnonzero(i["first"]) if b <= s_end and i["slot"][b] == s)
        beats_ = [b for b in range(begin, s_end + 1) if i["slot"][b] == s]
        assert len(set(unit[beats_])) == 1                              # one format per dot
        prefix = np.cumsum(products[beats_], axis=0) / unit[s_end]      # exact integers
        total = prefix[-1]
        overflow = ((prefix < INT32_MIN) | (prefix > INT32_MAX)).any(axis=0)
        nan = nan_lane[beats_].any()
        assert got["slot"][k] == s
        np.testing.assert_array_equal(got["nan"][k], np.full(pes, nan))
        np.testing.assert_array_equal(got["overflow"][k], overflow)
        for j in range(pes):
            if not overflow[j] and not nan:
                assert got["acc"][k, j] * unit[s_end] == products[beats_, j].sum()
                rows["clean"] += 1
            else:
                wrapped = (int(total[j]) - INT32_MIN) % 2 ** 32 + INT32_MIN
                assert got["acc"][k, j] == wrapped                       # NaN lanes add 0
                rows["overflow" if overflow[j] else "nan"] += 1
        k += 1
    assert k == len(got["slot"])
    assert min(rows.values()) > 20, rows


# --- (d) argument validation ------------------------------------------------------------------


def _args(n=3, pes=2):
    return dict(act=np.zeros((n, 4), int), wgt=np.zeros((n, pes, 4), int), act_fmt=0, wgt_fmt=0,
                sv_sel=0, zp=0, first=True, last=True)


@pytest.mark.parametrize("change, error, match", [
    (dict(reuse=0), ValueError, r"reuse must be in range 1\.\.2, not 0"),
    (dict(reuse=3), ValueError, r"reuse must be in range 1\.\.2, not 3"),
    (dict(reuse=True), TypeError, "reuse must be an integer"),
    (dict(reuse=2.0), TypeError, "reuse must be an integer"),
    (dict(slot=[0, 2, 1], reuse=2), ValueError, r"slot must hold .*\(0\.\.1\), not 2"),
    (dict(slot=[0, 1, 0]), ValueError, r"slot must hold .*\(0\.\.0\), not 1"),
    (dict(slot=[0, 0]), ValueError, r"slot must be a scalar or have shape \(3,\)"),
    (dict(slot=[0.0, 1.0, 0.0], reuse=2), TypeError, "slot must hold integers"),
    (dict(act=np.zeros((3, 3), int)), ValueError, r"act must have shape \(n, 4\), not \(3, 3\)"),
    (dict(act=np.full((3, 4), 256)), ValueError, r"act must hold .*\(0\.\.255\), not 256"),
    (dict(wgt=np.zeros((3, 4), int)), ValueError, r"wgt must have shape \(n, pes, 4\)"),
    (dict(wgt=np.zeros((2, 2, 4), int)), ValueError, r"wgt must have shape .* not \(2, 2, 4\)"),
    (dict(wgt=np.zeros((3, 0, 4), int)), ValueError, "pes >= 1"),
    (dict(wgt=np.full((3, 2, 4), 16)), ValueError, r"wgt must hold .*\(0\.\.15\), not 16"),
    (dict(act_fmt=2), ValueError, r"act_fmt must hold .*\(0\.\.1\), not 2"),
    (dict(wgt_fmt=[0, 0]), ValueError, r"wgt_fmt must be a scalar or have shape \(3,\)"),
    (dict(sv_sel=4), ValueError, r"sv_sel must hold .*\(0\.\.3\), not 4"),
    (dict(sv_sel=[0, 1, 2]), ValueError, r"sv_sel must be a scalar or have shape \(3, 2\)"),
    (dict(zp=np.full((3, 2), -1)), ValueError, r"zp must hold .*\(0\.\.15\), not -1"),
    (dict(zp=np.zeros((2, 3), int)), ValueError, r"zp must be a scalar or have shape \(3, 2\)"),
    (dict(first=[1, 2, 0]), ValueError, r"first must hold .*\(0\.\.1\), not 2"),
    (dict(last=[True, False]), ValueError, r"last must be a scalar or have shape \(3,\)"),
])
def test_arguments_are_checked_and_named(change, error, match):
    args = _args() | change
    with pytest.raises(error, match=match):
        p3.pcu_run(**args)


# --- (e) the beat adapter ---------------------------------------------------------------------


def _params(pes=16, reuse=1):
    return {"pes": pes, "reuse": reuse, "pipeline": 3}


@pytest.mark.parametrize("pes, reuse", [(16, 1), (16, 2), (3, 1), (3, 2)])
def test_adapter_stimulus_runs_and_gives_one_output_per_last(pes, reuse):
    p = _params(pes, reuse)
    inputs = beats.p3_pcu.stimulus(np.random.default_rng(2), p, 4000)
    i = inputs["i"]
    # (no slot field at reuse 1: contract 9's ceil(log2 reuse) bits are none)
    assert set(inputs) == {"i"} and set(i) == set(FIELDS) | ({"slot"} if reuse > 1 else set())
    shapes = {"act": (4000, 4), "wgt": (4000, pes, 4), "sv_sel": (4000, pes),
              "zp": (4000, pes)}
    for name in i:
        assert np.asarray(i[name]).shape == shapes.get(name, (4000,)), name
    out = beats.p3_pcu.expected(p, inputs)["o"]
    assert sorted(out) == ["acc", "nan", "overflow"] + (["slot"] if reuse > 1 else [])
    if reuse == 1:
        i = {**i, "slot": np.zeros(len(i["last"]), np.int64)}
        out = {**out, "slot": np.zeros(len(out["acc"]), np.int64)}
    m = int(np.sum(i["last"]))
    assert out["acc"].shape == out["overflow"].shape == out["nan"].shape == (m, pes)
    assert all(value.dtype == np.int64 for value in out.values())
    np.testing.assert_array_equal(out["slot"], np.asarray(i["slot"])[np.asarray(i["last"], bool)])
    want = reference({name: np.asarray(value) for name, value in i.items()})
    for name in want:
        np.testing.assert_array_equal(out[name], want[name], err_msg=name)
    # Every slot opens with first and ends on last; overflow, NaN and clean results all occur.
    for s in range(reuse):
        slot_beats = np.flatnonzero(i["slot"] == s)
        assert i["first"][slot_beats[0]] and i["last"][slot_beats[-1]]
    assert out["overflow"].any() and out["nan"].any() and (~out["nan"].astype(bool)).any()
    if reuse == 2:
        s = np.asarray(i["slot"])
        pair = (s[:-1] == 0) & (s[1:] == 1)               # a slot 0 beat then a slot 1 beat
        share = np.all([(np.asarray(i[name])[:-1] == np.asarray(i[name])[1:])
                        .reshape(len(s) - 1, -1).all(1)
                        for name in ("wgt", "sv_sel", "zp", "act_fmt", "wgt_fmt")], axis=0)
        assert (pair & share).sum() > 0.4 * len(s)        # mostly slot 0 / slot 1 pairs
        assert (s[:-1] == s[1:]).any()                    # and some irregular slot orders
        assert (np.asarray(i["act"])[:-1][pair & share] != np.asarray(i["act"])[1:][pair & share]
                ).any()


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7])
def test_adapter_small_counts(count):
    for reuse in (1, 2):
        p = _params(4, reuse)
        inputs = beats.p3_pcu.stimulus(np.random.default_rng(count), p, count)
        assert len(inputs["i"]["last"]) == count
        out = beats.p3_pcu.expected(p, inputs)["o"]
        assert len(out["acc"]) == int(np.sum(inputs["i"]["last"])) >= min(count, 1)
    again = beats.p3_pcu.stimulus(np.random.default_rng(count), p, count)
    for name, value in inputs["i"].items():
        np.testing.assert_array_equal(value, again["i"][name])


def test_adapter_accepts_a_zero_slot_at_reuse_1_and_checks_pes():
    p = _params(2, 1)
    i = beats.p3_pcu.stimulus(np.random.default_rng(4), p, 50)["i"]
    without = beats.p3_pcu.expected(p, {"i": i})["o"]
    with_slot = beats.p3_pcu.expected(p, {"i": {**i, "slot": np.zeros(50, np.int64)}})["o"]
    assert "slot" not in i and sorted(with_slot) == sorted(without)
    for name in with_slot:
        np.testing.assert_array_equal(with_slot[name], without[name])
    with pytest.raises(ValueError, match=r"wgt must have shape \(beats, pes, 4\) with pes = 3"):
        beats.p3_pcu.expected(_params(3, 1), {"i": i})


def _layout(pes, reuse, port):
    """A payload description as gen.verilog.layout_description writes it (the unit's RTL is
    not needed): fields in contract 9's order, ``slot`` ceil(log2 reuse) bits (none at reuse 1)."""
    def uint(width, signed=False):
        return {"kind": "int", "width": width, "signed": signed}

    def array(elem, length):
        return {"kind": "array", "width": elem["width"] * length, "length": length, "elem": elem}

    slot = uint((reuse - 1).bit_length())
    if port == "i":
        fields = [("act", array(uint(8), 4)), ("wgt", array(array(uint(4), 4), pes)),
                  ("act_fmt", uint(1)), ("wgt_fmt", uint(1)), ("sv_sel", array(uint(2), pes)),
                  ("zp", array(uint(4), pes)), ("first", uint(1)), ("last", uint(1))]
    else:
        fields = [("acc", array(uint(32, True), pes)), ("overflow", array(uint(1), pes)),
                  ("nan", array(uint(1), pes))]
    fields += [("slot", slot)] if reuse > 1 else []
    offset, described = 0, []
    for name, shape in fields:
        described.append({"name": name, "offset": offset, "shape": shape})
        offset += shape["width"]
    return {"kind": "struct", "width": offset, "fields": described}


@pytest.mark.parametrize("pes, reuse", [(16, 1), (16, 2), (2, 1)])
def test_adapter_beats_pack_into_the_spec_layout(pes, reuse):
    # The adapter's beats pack into (and unpack from) the contract 9 layout (no slot at reuse 1).
    p = _params(pes, reuse)
    inputs = beats.p3_pcu.stimulus(np.random.default_rng(5), p, 60)
    outputs = beats.p3_pcu.expected(p, inputs)
    for port, fields in (("i", inputs["i"]), ("o", outputs["o"])):
        codec = PayloadCodec(_layout(pes, reuse, port))
        back = codec.unpack_batch(codec.pack_batch(fields))
        assert sorted(back) == sorted(fields)
        for name, value in fields.items():
            np.testing.assert_array_equal(back[name], np.asarray(value), err_msg=name)
    assert PayloadCodec(_layout(16, 2, "i")).width == 32 + 256 + 2 + 32 + 64 + 2 + 1
