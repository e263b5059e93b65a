"""Golden model of Orizuru, the top-k largest and smallest element detection engine.

Reference: Wu et al., "KLLM: Fast LLM Inference with K-Means Quantization", section IV-C
(Fig. 7); contract section 3. Bit-exact integer model: the RTL reproduces every beat it returns.

Algorithm (the paper's, with the choices contract section 3 leaves to the golden model fixed here):

* **Order.** Inputs are IEEE binary16 bit patterns ``x`` (0..0xFFFF), compared by IEEE
  totalOrder through :func:`total_order_key`: ``key = ~x & 0xFFFF`` if the sign bit is set,
  else ``x | 0x8000``, compared as unsigned integers
  (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN; NaNs ordered by payload).
* **Trees.** Two complete binary trees over the same ``n`` leaves, heap-numbered: internal
  nodes ``1 .. n-1``, node ``v`` has children ``2v`` (left) and ``2v+1`` (right), lane ``i``
  (0-based) is leaf ``n+i``. Each internal node holds one bit (0: left child wins, 1: right
  child wins); the winner of a node is the leaf reached by following the bits down from it.
  Each tree has its own availability vector (the paper's masks m^(p), m^(q)).
* **Effective keys** (17 bits, so that a popped leaf is beyond every binary16 value, including
  key 0 = 0xFFFF and key 0xFFFF = 0x7FFF): max tree ``emax(i) = 0x10000 | key[i]`` if lane
  ``i`` is available there, else 0; min tree ``emin(i) = key[i]`` if available, else 0x10000.
* **Node rules.** Max tree: ``bit = emax(winner(right)) > emax(winner(left))``. Min tree:
  ``bit = emin(winner(right)) <= emin(winner(left))``. When both leaves are available the min
  bit is exactly the inverse of the max bit, which is how the paper reuses the comparisons.
* **Initialisation**, bottom-up, level by level: the max tree computes all ``n-1`` nodes
  (``n-1`` comparisons); the min tree takes its leaf-level nodes (``n/2 .. n-1``) as the
  inverse of the max tree's (no comparison) and computes nodes ``1 .. n/2-1`` (``n/2-1``).
* **Pop** (``k`` times, both trees each time): the root winner is found by following the bits
  from node 1 (no comparison). Then **maintenance**: the popped leaf becomes unavailable in
  that tree only, and the bits of its ``log2 n`` ancestors are recomputed bottom-up with the
  node rule, one comparison per level. Maintenance follows every pop, the k-th included, so
  a vector costs ``(n-1) + (n/2-1) + 2 k log2 n`` comparisons (:func:`comparison_count`; the
  paper's ``1.5N + 2k log2 N``).

Tie rule (a consequence of the node rules; the RTL reproduces it):

* The **max tree** pops in order of decreasing key, and among equal keys the **lowest index
  first** (ties go left). Its k beats are the first k of a stable descending sort.
* The **min tree** pops in order of increasing key, and among equal keys the **highest index
  first** (ties go right, since ``<=`` is the inverse of ``>``).
* Example: an all-equal vector gives ``max_index = 0, 1, 2, ...`` and
  ``min_index = n-1, n-2, ...``.

Why: by induction from the leaves, the winner of a node is, among the available leaves of its
subtree, the one of largest key and, among those, lowest index (max tree); a popped leaf
(``emax = 0``) never beats an available one. Only the popped leaf's effective key changes in a
pop, and only its ancestors have it in their subtree, so recomputing just that path leaves the
trees exactly as a full recomputation would. With ``k <= n`` a root always has an available
leaf to report, so each tree reports ``k`` distinct indices.

Output stream: ``k`` beats per vector; beat ``j`` carries the j-th largest (``max_index``,
``max_value``) and the j-th smallest (``min_index``, ``min_value``). Beats before the k-th
carry ``last = 0`` and ``mask = 0``; the k-th beat carries ``last = 1`` and the union mask, 1 at
every index reported by either tree (between ``k`` and ``2k`` bits set).
"""

from typing import NamedTuple

import numpy as np

from ..common.checks import check_int as _check_int

__all__ = [
    "OrizuruResult", "orizuru", "orizuru_beats", "total_order_key", "comparison_count",
    "pack_mask", "unpack_mask", "MIN_N", "MAX_N", "MAX_BEAT_LANES", "beat_lanes", "run_trees",
]

MIN_N = 2
MAX_N = 4096
#: contract 3: k is at most this when n > 1024 (KLLM's 0.5 % of 4096 is 20.48 per side).
MAX_WIDE_K = 64
_MAX_FLAT_N = 1024
#: Values per input beat of the ``orizuru`` units (contract 3: a vector wider than 1024 values,
#: built from 16-input units, streams in as n / 1024 beats; lane j of beat b is element
#: 1024 b + j).
MAX_BEAT_LANES = 1024

_SIGN = 0x8000
_KEY_MASK = 0xFFFF
_ABOVE_ALL = 0x10000         # 17th bit: available max-tree keys sit above 0, popped min-tree keys
_PACKED_INT64_MAX_N = 62     # masks of up to this many lanes are packed into int64


class OrizuruResult(NamedTuple):
    """The outcome of :func:`orizuru` for one vector.

    Attributes
    ----------
    max_index, max_value : numpy.ndarray of int64, shape (k,)
        Lanes and binary16 bit patterns of the k largest elements, largest first (equal keys:
        lowest index first).
    min_index, min_value : numpy.ndarray of int64, shape (k,)
        Lanes and bit patterns of the k smallest elements, smallest first (equal keys: highest
        index first).
    mask : numpy.ndarray of bool, shape (n,)
        True at every lane reported by either tree.
    comparisons : int
        Comparisons made by both trees (initialisation and all ``k`` maintenances).
    """

    max_index: np.ndarray
    max_value: np.ndarray
    min_index: np.ndarray
    min_value: np.ndarray
    mask: np.ndarray
    comparisons: int

    @property
    def mask_bits(self):
        """The mask packed into a Python int, bit i = lane i (:func:`pack_mask`)."""
        return pack_mask(self.mask)


# --- argument checks -------------------------------------------------------------------------


def _check_n(n, what):
    """Check the vector length n, a power of two in MIN_N..MAX_N; ``what`` names it."""
    if not (MIN_N <= n <= MAX_N and n & (n - 1) == 0):
        raise ValueError(f"{what} must be a power of two in {MIN_N}..{MAX_N}, not {n}")
    return n


def beat_lanes(n):
    """Values per input beat for vectors of ``n`` values: ``min(n, MAX_BEAT_LANES)``."""
    return min(_check_n(n, "n"), MAX_BEAT_LANES)


def _max_k(n):
    """The largest k for vectors of length n (contract 3)."""
    return n if n <= _MAX_FLAT_N else min(n, MAX_WIDE_K)


def _check_bits(name, values):
    """Return binary16 bit patterns (integers 0..0xFFFF) as an int64 array."""
    values = np.asarray(values)
    if values.dtype.kind == "f":
        raise TypeError(f"{name} must hold binary16 bit patterns as integers, not "
                        f"{values.dtype} values (pass float16 data as x.view(numpy.uint16))")
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        raise TypeError(f"{name} must hold integers (binary16 bit patterns), not {values.dtype}")
    if values.size and (values.min() < 0 or values.max() > _KEY_MASK):
        bad = values[(values < 0) | (values > _KEY_MASK)].flat[0]
        raise ValueError(f"{name} must hold 16-bit patterns 0..0xFFFF, not {int(bad)}")
    return values.astype(np.int64)


# --- public helpers ----------------------------------------------------------------------------


def total_order_key(x):
    """Map binary16 bit patterns to unsigned keys that order them by IEEE totalOrder.

    ``key = ~x & 0xFFFF`` where the sign bit (0x8000) is set, else ``x | 0x8000``. Comparing
    keys as unsigned integers gives -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN (negative
    NaNs with larger payloads first, positive NaNs with larger payloads last). The map is a
    bijection of 0..0xFFFF.

    Parameters
    ----------
    x : array_like of int
        Bit patterns 0..0xFFFF, any shape.

    Returns
    -------
    numpy.ndarray of int64, shape of ``x`` (0-d for a scalar)

    Raises
    ------
    TypeError
        If ``x`` does not hold integers (float16 data: pass ``x.view(numpy.uint16)``).
    ValueError
        If a value is outside 0..0xFFFF.
    """
    x = _check_bits("x", x)
    return np.where(x & _SIGN, ~x & _KEY_MASK, x | _SIGN)


def comparison_count(n, k):
    """Return the comparisons Orizuru makes for one vector: ``(n-1) + (n/2-1) + 2 k log2 n``.

    ``n-1`` to initialise the max tree, ``n/2-1`` for the min tree (its leaf level reuses the
    max tree's comparisons, inverted) and ``log2 n`` per tree for each of the ``k``
    maintenances: the paper's ``1.5N + 2k log2 N`` up to the constant -2.

    Parameters
    ----------
    n : int
        Vector length, a power of two in 2..4096.
    k : int
        Elements popped per tree, 1..n (at most 64 when n > 1024).

    Returns
    -------
    int

    Raises
    ------
    TypeError, ValueError
        If ``n`` or ``k`` is not an integer in range (the message names it).
    """
    n = _check_int("n", n, MIN_N, MAX_N)
    _check_n(n, "n")
    k = _check_int("k", k, 1, _max_k(n))
    return (n - 1) + (n // 2 - 1) + 2 * k * (n.bit_length() - 1)


def pack_mask(mask):
    """Pack a boolean lane mask (shape (n,)) into a Python int, bit i = lane i."""
    mask = np.asarray(mask)
    if mask.ndim != 1 or (mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.integer)):
        raise TypeError(f"mask must be a 1-D array of booleans or 0/1 integers, not "
                        f"{mask.dtype} of shape {mask.shape}")
    if mask.dtype != np.bool_ and mask.size and (mask.min() < 0 or mask.max() > 1):
        raise ValueError("mask must hold only 0 and 1")
    return sum(1 << int(i) for i in np.flatnonzero(mask))


def unpack_mask(bits, n):
    """Unpack an n-lane mask packed by :func:`pack_mask` into a boolean array, shape (n,)."""
    n = _check_int("n", n, 1, 1 << 20)
    bits = _check_int("bits", bits, 0, (1 << n) - 1)
    return np.array([(bits >> i) & 1 for i in range(n)], dtype=bool)


# --- the two trees -----------------------------------------------------------------------------


class _Tree:
    """One Orizuru tree over a batch of vectors (rows), advanced in lockstep.

    ``bit[:, v]`` holds node v's bit (v = 1..n-1; column 0 unused). ``winner[:, v]`` caches the
    lane selected by node v's MUX (leaves: ``winner[:, n+i] = i``); it always equals the lane
    reached by following the bits down from v, and serves only to feed the node rule.
    """

    def __init__(self, keys, is_max):
        self.keys = keys
        self.is_max = is_max
        self.rows = np.arange(keys.shape[0])
        self.n = n = keys.shape[1]
        self.levels = n.bit_length() - 1
        self.avail = np.ones(keys.shape, dtype=bool)
        self.bit = np.zeros(keys.shape, dtype=bool)
        self.winner = np.zeros((keys.shape[0], 2 * n), dtype=np.int64)
        self.winner[:, n:] = np.arange(n)
        self.comparisons = 0

    def _effective(self, lanes, rows):
        keys = self.keys[rows, lanes]
        avail = self.avail[rows, lanes]
        if self.is_max:
            return np.where(avail, _ABOVE_ALL | keys, 0)
        return np.where(avail, keys, _ABOVE_ALL)

    def _set(self, rows, nodes, bit):
        self.bit[rows, nodes] = bit
        self.winner[rows, nodes] = self.winner[rows, 2 * nodes + bit]

    def _compare(self, rows, nodes):
        """Apply the node rule at ``nodes`` (one comparison per node and vector)."""
        left = self._effective(self.winner[rows, 2 * nodes], rows)
        right = self._effective(self.winner[rows, 2 * nodes + 1], rows)
        bit = right > left if self.is_max else right <= left
        self._set(rows, nodes, bit)

    def init_level(self, first):
        """Compute the nodes ``first .. 2*first-1`` (one level) with the node rule."""
        nodes = np.arange(first, 2 * first)[None, :]
        self._compare(self.rows[:, None], nodes)
        self.comparisons += first

    def copy_inverted_leaf_level(self, other):
        """Take the leaf-level bits (nodes n/2 .. n-1) as the inverse of ``other``'s."""
        nodes = np.arange(self.n // 2, self.n)[None, :]
        rows = self.rows[:, None]
        self._set(rows, nodes, ~other.bit[rows, nodes])

    def initialise(self, reuse=None):
        """Bottom-up initialisation; ``reuse``: a tree whose leaf-level bits to invert."""
        first = self.n // 2
        if reuse is not None:
            self.copy_inverted_leaf_level(reuse)
            first //= 2
        while first >= 1:
            self.init_level(first)
            first //= 2

    def pop(self):
        """Report the root winner of every row, mark it popped and maintain its path."""
        node = np.ones(self.rows.shape, dtype=np.int64)
        for _ in range(self.levels):                 # follow the bits: no comparison
            node = 2 * node + self.bit[self.rows, node]
        lane = node - self.n
        self.avail[self.rows, lane] = False
        node //= 2
        for _ in range(self.levels):                 # ancestors, bottom-up: one compare each
            self._compare(self.rows, node)
            self.comparisons += 1
            node //= 2
        return lane


def run_trees(x, k):
    """Run Orizuru on the rows of ``x`` (vectors, n): (max lanes, min lanes, mask, comparisons)
    with lanes of shape (vectors, k)."""
    keys = total_order_key(x)
    max_tree = _Tree(keys, is_max=True)
    min_tree = _Tree(keys, is_max=False)
    max_tree.initialise()
    min_tree.initialise(reuse=max_tree)
    max_lanes = np.empty((x.shape[0], k), dtype=np.int64)
    min_lanes = np.empty((x.shape[0], k), dtype=np.int64)
    for j in range(k):
        max_lanes[:, j] = max_tree.pop()
        min_lanes[:, j] = min_tree.pop()
    mask = ~max_tree.avail | ~min_tree.avail
    return max_lanes, min_lanes, mask, max_tree.comparisons + min_tree.comparisons


# --- public models -----------------------------------------------------------------------------


def orizuru(x, k):
    """Pop the k largest and the k smallest elements of one binary16 vector, as Orizuru does.

    See the module docstring for the algorithm and the tie rule: largest first with equal keys
    lowest index first; smallest first with equal keys highest index first.

    Parameters
    ----------
    x : array_like of int, shape (n,)
        Binary16 bit patterns 0..0xFFFF; n a power of two in 2..4096.
    k : int
        Elements popped per tree, 1..n (at most 64 when n > 1024).

    Returns
    -------
    OrizuruResult
        ``max_index``, ``max_value``, ``min_index``, ``min_value`` (int64, shape (k,)), the
        union ``mask`` (bool, shape (n,)) and the number of ``comparisons``.

    Raises
    ------
    TypeError
        If ``x`` does not hold integers or ``k`` is not an integer.
    ValueError
        If ``x`` is not 1-D, its length is not a power of two in 2..4096, a value is outside
        0..0xFFFF, or ``k`` is outside 1..n (1..64 when n > 1024).
    """
    x = _check_bits("x", x)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D (n,), not of shape {x.shape}")
    n = _check_n(x.shape[0], "the length n of x")
    k = _check_int("k", k, 1, _max_k(n))
    max_lanes, min_lanes, mask, comparisons = run_trees(x[None, :], k)
    return OrizuruResult(
        max_index=max_lanes[0], max_value=x[max_lanes[0]],
        min_index=min_lanes[0], min_value=x[min_lanes[0]],
        mask=mask[0], comparisons=comparisons)


def orizuru_beats(xs, k):
    """Return the output stream Orizuru produces for a batch of vectors, one field per array.

    Beat ``v*k + j`` is beat j of vector v. Beats before the k-th of a vector carry
    ``last = 0`` and ``mask = 0``; the k-th carries ``last = 1`` and the union mask.

    Parameters
    ----------
    xs : array_like of int, shape (vectors, n)
        Binary16 bit patterns 0..0xFFFF, one vector per row; n a power of two in 2..4096.
        ``vectors`` may be 0 (an empty stream).
    k : int
        Elements popped per tree, 1..n (at most 64 when n > 1024).

    Returns
    -------
    dict of str to numpy.ndarray, each of shape (vectors * k,)
        ``"max_index"``, ``"max_value"``, ``"min_index"``, ``"min_value"`` and ``"last"``
        (0/1) as int64; ``"mask"`` packed as by :func:`pack_mask` (bit i = lane i): int64 for
        n <= 62, else an object array of Python ints.

    Raises
    ------
    TypeError
        If ``xs`` does not hold integers or ``k`` is not an integer.
    ValueError
        If ``xs`` is not 2-D, its row length is not a power of two in 2..4096, a value is
        outside 0..0xFFFF, or ``k`` is outside 1..n (1..64 when n > 1024).
    """
    xs = _check_bits("xs", xs)
    if xs.ndim != 2:
        raise ValueError(f"xs must be 2-D (vectors, n), not of shape {xs.shape}")
    n = _check_n(xs.shape[1], "the row length n of xs")
    k = _check_int("k", k, 1, _max_k(n))
    vectors = xs.shape[0]
    max_lanes, min_lanes, mask, _ = run_trees(xs, k)
    rows = np.arange(vectors)[:, None]
    last = np.zeros((vectors, k), dtype=np.int64)
    last[:, -1] = 1
    packed_dtype = np.int64 if n <= _PACKED_INT64_MAX_N else object
    packed = np.zeros((vectors, k), dtype=packed_dtype)
    for v in range(vectors):
        packed[v, -1] = pack_mask(mask[v])
    return {
        "max_index": max_lanes.ravel(),
        "max_value": xs[rows, max_lanes].ravel(),
        "min_index": min_lanes.ravel(),
        "min_value": xs[rows, min_lanes].ravel(),
        "last": last.ravel(),
        "mask": packed.ravel(),
    }
