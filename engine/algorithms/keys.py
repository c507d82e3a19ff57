"""Key identity and hashing: the one place where keys become numbers.

Every key is identified by its **fingerprint**: the first 64 bits of MurmurHash3 x64-128
(``mmh3.hash64``, seed 0, unsigned) of the key's UTF-8 bytes.  Fingerprints are computed once per
distinct key (a :class:`Vocabulary` caches them) and then everything — routing, routing tables,
heavy-hitter sketches, the controller's statistics, the snapshots shipped to Spark executors — works
on ``uint64`` arrays.  A fingerprint is process-independent, so a routing table computed by the
driver is valid in every executor.

Hash functions used by the groupings (all vectorised, all derived from the fingerprint):

* ``h(k) = fp(k) mod n`` — key grouping (``hash``), the instances of Fang's fluctuating workload,
  and the home worker of the Fang rebalancers with ``base=mod`` (Fang et al. Sec. III: F(k) = A[k] if
  k in A else h(k); their default base is the consistent-hash ring of
  :class:`skewlab.engine.algorithms.groupings.basic.ConsistentHashRing`, Fang Sec. V).
* ``F_i(k) = ⌊mix64(fp(k) + i * GOLDEN) · n / 2^64⌋`` for ``i >= 1`` and ``F_0 = h``: the ``d``
  independent hash functions of Greedy-d / PKG / D-Choices (Nasir et al. Alg. 1).  ``mix64`` is the
  SplitMix64 finaliser; it turns one 64-bit fingerprint into a family of well-mixed, effectively
  independent hashes without hashing the key bytes again.  The range reduction to ``[0, n)`` is
  Lemire's multiply-shift ("Fast random integer generation in an interval", ACM TOMACS 2019) rather
  than ``mod n``: as uniform for a well-mixed 64-bit input, and two 32-bit multiplications instead
  of an exact 64-bit remainder (the routing kernels compute F_1 for every tuple and F_2, F_3 for
  every D-Choices tuple).  Requires ``n < 2^32``.  Choices may collide (two
  F_i equal), exactly as with independent hash functions; Nasir et al.'s b_h (Eq. 3) accounts for
  that.

Keys whose fingerprints collide (probability ~K^2 / 2^65, i.e. ~3e-8 for K = 1e6) would be treated
as one key by routing; results stay exact because the operators keep state by key (the local runtime
by key id, the Spark workers by name).  The Spark driver's statistics and migration orders go by
fingerprint (:class:`FingerprintVocabulary`): colliding keys move together, as routing sends them.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import mmh3
import numpy as np
from skewlab.shared import copy_as_in_memory
import pyarrow as pa
from numba import njit

__all__ = [
    "GOLDEN",
    "FingerprintVocabulary",
    "Vocabulary",
    "candidate",
    "candidates",
    "fingerprint",
    "fingerprint_keys",
    "fingerprints",
    "home",
    "mix64",
    "mix64_scalar",
    "reduce_range",
    "reduce_scalar",
]

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_LO32 = np.uint64(0xFFFFFFFF)


def fingerprint(key: str | bytes) -> int:
    """64-bit fingerprint of one key (mmh3 x64-128, first half, seed 0, unsigned)."""
    data = key if isinstance(key, bytes) else str(key).encode("utf-8")
    return mmh3.hash64(data, seed=0, x64arch=True, signed=False)[0]


def fingerprints(keys: Iterable[str | bytes]) -> np.ndarray:
    """Fingerprints of many keys as a ``uint64`` array (same values as :func:`fingerprint`).

    Uses mmh3's signed default (fast positional call) and reinterprets the two's-complement bits
    as unsigned; ``str`` keys are hashed as their UTF-8 bytes by mmh3 itself.
    """
    h = mmh3.hash64
    return np.fromiter((h(k)[0] for k in keys), dtype=np.int64).view(np.uint64)


@njit(cache=True, inline="always")
def _rotl64(x, r):  # pragma: no cover - compiled
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix64(k):  # pragma: no cover - compiled
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True)
def _murmur3_h1(data, offsets, out):  # pragma: no cover - compiled
    """First 64 bits of MurmurHash3_x64_128 (seed 0) of every string of an Arrow string array.

    ``data``: the value bytes (``uint8``), ``offsets``: ``len(out) + 1`` start offsets (int32 or
    int64, may start anywhere: slices).  Same algorithm as mmh3's ``hash64(.., x64arch=True)[0]``
    (Appleby's reference ``MurmurHash3_x64_128``: 16-byte little-endian blocks, tail, ``fmix64``),
    so ``out[j] == fingerprint(key_j)`` bit for bit (tested against it).
    """
    c1 = np.uint64(0x87C37B91114253D5)
    c2 = np.uint64(0x4CF5AD432745937F)
    for j in range(out.size):
        s = np.int64(offsets[j])
        n = np.int64(offsets[j + 1]) - s
        h1 = np.uint64(0)
        h2 = np.uint64(0)
        nb = n // 16
        for b in range(nb):
            p = s + b * 16
            k1 = np.uint64(0)
            k2 = np.uint64(0)
            for t in range(8):
                k1 |= np.uint64(data[p + t]) << np.uint64(8 * t)
                k2 |= np.uint64(data[p + 8 + t]) << np.uint64(8 * t)
            k1 *= c1
            k1 = _rotl64(k1, 31)
            k1 *= c2
            h1 ^= k1
            h1 = _rotl64(h1, 27)
            h1 += h2
            h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
            k2 *= c2
            k2 = _rotl64(k2, 33)
            k2 *= c1
            h2 ^= k2
            h2 = _rotl64(h2, 31)
            h2 += h1
            h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
        p = s + nb * 16
        rem = n - nb * 16
        k1 = np.uint64(0)
        k2 = np.uint64(0)
        if rem > 8:
            for t in range(8, rem):
                k2 |= np.uint64(data[p + t]) << np.uint64(8 * (t - 8))
            k2 *= c2
            k2 = _rotl64(k2, 33)
            k2 *= c1
            h2 ^= k2
        if rem > 0:
            for t in range(min(rem, 8)):
                k1 |= np.uint64(data[p + t]) << np.uint64(8 * t)
            k1 *= c1
            k1 = _rotl64(k1, 31)
            k1 *= c2
            h1 ^= k1
        ln = np.uint64(n)
        h1 ^= ln
        h2 ^= ln
        h1 += h2
        h2 += h1
        h1 = _fmix64(h1)
        h2 = _fmix64(h2)
        out[j] = h1 + h2


def fingerprint_keys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Fingerprints (:func:`fingerprint`) of an Arrow string column, hashed in place.

    A numba MurmurHash3 over the Arrow value and offset buffers (no Python object per key, no
    per-process cache); bit-identical to ``mmh3.hash64(key)[0]`` unsigned.  NULL entries hash as
    the empty string (the router drops dead letters before routing; a NULL key never reaches it).
    """
    if isinstance(keys, pa.ChunkedArray):
        parts = [fingerprint_keys(c) for c in keys.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
    m = len(keys)
    out = np.empty(m, dtype=np.uint64)
    if m == 0:
        return out
    if keys.type not in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()):
        keys = keys.cast(pa.string())
    _, obuf, dbuf = keys.buffers()[:3]
    odt = np.int64 if keys.type in (pa.large_string(), pa.large_binary()) else np.int32
    offsets = np.frombuffer(obuf, dtype=odt)[keys.offset: keys.offset + m + 1]
    data = np.frombuffer(dbuf, dtype=np.uint8) if dbuf is not None and dbuf.size else np.zeros(1, dtype=np.uint8)
    _murmur3_h1(data, offsets, out)
    return out


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, vectorised over a ``uint64`` array (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> _S30
        z *= _M1
        z ^= z >> _S27
        z *= _M2
        z ^= z >> _S31
    return z


@njit(cache=True, inline="always")
def mix64_scalar(x):  # pragma: no cover - compiled
    """SplitMix64 finaliser for one ``uint64`` (numba)."""
    z = np.uint64(x)
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return z


@njit(cache=True, inline="always")
def reduce_scalar(x, n):  # pragma: no cover - compiled
    """``⌊x · n / 2^64⌋`` for one ``uint64`` x and ``n < 2^32`` (numba twin of :func:`reduce_range`)."""
    s = np.uint64(32)
    d = np.uint64(n)
    return ((x >> s) * d + (((x & np.uint64(0xFFFFFFFF)) * d) >> s)) >> s


def reduce_range(x: np.ndarray, n: int) -> np.ndarray:
    """Lemire's multiply-shift ``⌊x · n / 2^64⌋`` over a ``uint64`` array, ``1 <= n < 2^32``: a value in
    ``[0, n)``.  Exact: with x = 2^32·a + b, ⌊x·n/2^64⌋ = ⌊(a·n + ⌊b·n/2^32⌋)/2^32⌋, and
    a·n + ⌊b·n/2^32⌋ < 2^64 (no wrap-around)."""
    if not 1 <= int(n) < (1 << 32):
        raise ValueError(f"n must be in [1, 2^32), got {n}")
    x = np.asarray(x, dtype=np.uint64)
    d = np.uint64(n)
    return ((x >> _S32) * d + (((x & _LO32) * d) >> _S32)) >> _S32


@njit(cache=True, inline="always")
def candidate_scalar(fp, i, n):  # pragma: no cover - compiled
    """``F_i(k)`` for one fingerprint (numba twin of :func:`candidate`)."""
    if i == 0:
        return np.int64(np.uint64(fp) % np.uint64(n))
    return np.int64(reduce_scalar(mix64_scalar(np.uint64(fp) + np.uint64(i) * np.uint64(0x9E3779B97F4A7C15)), n))


def home(fps: np.ndarray, n: int) -> np.ndarray:
    """``h(k) = fp mod n`` as ``int64`` worker ids."""
    return (np.asarray(fps, dtype=np.uint64) % np.uint64(n)).astype(np.int64)


def candidate(fps: np.ndarray, i: int, n: int) -> np.ndarray:
    """The ``i``-th hash choice ``F_i(k)`` in ``[0, n)`` (``F_0 = h``)."""
    fps = np.asarray(fps, dtype=np.uint64)
    if i == 0:
        return home(fps, n)
    with np.errstate(over="ignore"):
        salted = fps + np.uint64(i) * GOLDEN
    return reduce_range(mix64(salted), n).astype(np.int64)


def candidates(fps: np.ndarray, d: int, n: int) -> np.ndarray:
    """Matrix ``(len(fps), d)`` of the first ``d`` hash choices of every key."""
    fps = np.asarray(fps, dtype=np.uint64)
    out = np.empty((fps.size, d), dtype=np.int64)
    for i in range(d):
        out[:, i] = candidate(fps, i, n)
    return out


class Vocabulary:
    """Dense integer ids for keys, with their names and cached fingerprints.

    Workloads emit batches of ids into a vocabulary; runtimes keep state by id (exact, no hash
    collisions) and route by ``fps[ids]``.

    Pickling (issue #4: the Spark engine snapshots the controller, vocabulary included, every
    micro-batch): the names are stored as **one** UTF-8 string of all names plus an array of their
    lengths (in code points), not as a list of ``str`` objects and a ``str -> id`` dict (~12 ms per
    100k keys to pickle, 2 objects per key).  Names only ever grow (``encode``/``extend`` append), so
    the packed form is cached and extended by the new names only.  Loading rebuilds the list and the
    index dict (one decode, one slice per name).  ``surrogatepass`` keeps any Python ``str`` (also lone
    surrogates) intact.
    """

    def __init__(self, names: Sequence[str] = ()) -> None:
        self._index: dict[str, int] = {}
        self.names: list[str] = []
        self._fps = np.empty(0, dtype=np.uint64)
        if names:
            self.encode(names)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def fps(self) -> np.ndarray:
        """Fingerprint of every id (``uint64``, indexable by id)."""
        return self._fps

    def extend(self, names: Sequence[str]) -> np.ndarray:
        """Add keys known to be distinct and new (bulk path for workloads); returns their ids."""
        start = len(self.names)
        names = [str(k) for k in names]
        self._index.update(zip(names, range(start, start + len(names))))
        if len(self._index) != start + len(names):
            raise ValueError("Vocabulary.extend: keys are not distinct or already present")
        self.names.extend(names)
        self._fps = np.concatenate([self._fps, fingerprints(names)])
        return np.arange(start, start + len(names), dtype=np.int64)

    def encode(self, keys: Iterable[str]) -> np.ndarray:
        """Ids of ``keys`` (new keys are added), as ``int64``."""
        index = self._index
        names = self.names
        start = len(names)
        out = []
        for key in keys:
            key = str(key)
            idx = index.get(key)
            if idx is None:
                idx = len(names)
                index[key] = idx
                names.append(key)
            out.append(idx)
        if len(names) > start:
            self._fps = np.concatenate([self._fps, fingerprints(names[start:])])
        return np.asarray(out, dtype=np.int64)

    def id_of(self, key: str) -> int | None:
        return self._index.get(str(key))

    def _packed_names(self) -> tuple[bytes, np.ndarray, int]:
        """``(UTF-8 of all names concatenated, code-point length of each, count)``, extended lazily."""
        n = len(self.names)
        cache = getattr(self, "_pack_cache", None)
        if cache is None or cache[2] > n:
            cache = (b"", np.zeros(0, dtype=np.int64), 0)
        if cache[2] < n:
            new = self.names[cache[2]:]
            blob = cache[0] + "".join(new).encode("utf-8", "surrogatepass")
            lengths = np.concatenate([cache[1], np.fromiter(map(len, new), dtype=np.int64, count=len(new))])
            cache = (blob, lengths, n)
            self._pack_cache = cache
        return cache

    def __getstate__(self) -> dict:
        blob, lengths, n = self._packed_names()
        small = lengths.astype(np.uint8) if lengths.size == 0 or lengths.max() < 256 else lengths
        return {"names_utf8": blob, "name_lengths": small, "fps": self._fps}

    def __setstate__(self, state: dict) -> None:
        blob = state["names_utf8"]
        lengths = np.asarray(state["name_lengths"]).astype(np.int64)
        text = blob.decode("utf-8", "surrogatepass")
        ends = np.cumsum(lengths).tolist()
        starts = [0] + ends[:-1]
        names = [text[a:b] for a, b in zip(starts, ends)]
        self.names = names
        self._index = dict(zip(names, range(len(names))))
        self._fps = np.asarray(state["fps"], dtype=np.uint64)
        self._pack_cache = (blob, lengths, len(names))


@njit(cache=True)
def _fp_encode(slot_fp, slot_id, fps, start, next_id, limit, out):  # pragma: no cover - compiled
    """From ``start``: ``out[j]`` = id of fingerprint ``fps[j]`` in the open-addressing table
    (``slot_id`` -1 = empty; slot = fp & mask, linear probing); a fingerprint not in the table gets
    ``next_id``, ``next_id + 1``, … in order of first appearance and is inserted.  Stops before
    inserting id ``limit`` (the table is then half full).  Returns ``(next j, next id)``."""
    mask = slot_fp.size - 1
    for j in range(start, fps.size):
        fp = fps[j]
        s = np.int64(fp & np.uint64(mask))
        while slot_id[s] >= 0 and slot_fp[s] != fp:
            s = (s + 1) & mask
        if slot_id[s] < 0:
            if next_id >= limit:
                return j, next_id
            slot_fp[s] = fp
            slot_id[s] = next_id
            next_id += 1
        out[j] = slot_id[s]
    return fps.size, next_id


class FingerprintVocabulary:
    """Dense integer ids for keys known only by their 64-bit fingerprint (:func:`fingerprint`).

    The Spark engine's driver keeps statistics, not state: the workers report per-key counts by
    fingerprint, the identity routing already acts on (hash choices, routing-table entries and
    migration orders all take the fingerprint), so two keys with one fingerprint are one key to every
    grouping and keeping them apart in the statistics would change nothing.  Per key this holds the
    fingerprint (8 bytes) and one slot of an open-addressing table (16 bytes, load factor ≤ 1/2),
    against a name, a dict entry and a list entry for :class:`Vocabulary`.

    Same interface as :class:`Vocabulary` where the controller uses it (``fps``, ``len``); ids are
    positions in order of first appearance.  ``names`` are the fingerprints in hex (``#`` + 16
    digits): the driver does not know key names.  Pickles as the fingerprint array only.
    """

    def __init__(self, fps: np.ndarray | None = None) -> None:
        self._fps = np.zeros(0, dtype=np.uint64)
        self._slot_fp = np.zeros(1024, dtype=np.uint64)
        self._slot_id = np.full(1024, -1, dtype=np.int64)
        if fps is not None and len(fps):
            ids = self.encode_fps(fps)
            if ids.size != self._fps.size:
                raise ValueError("FingerprintVocabulary: fingerprints are not distinct")

    def __len__(self) -> int:
        return int(self._fps.size)

    @property
    def fps(self) -> np.ndarray:
        """Fingerprint of every id (``uint64``, indexable by id)."""
        return self._fps

    @property
    def names(self) -> list[str]:
        return [f"#{int(fp):016x}" for fp in self._fps.tolist()]

    def encode_fps(self, fps: np.ndarray) -> np.ndarray:
        """Ids of the fingerprints ``fps`` (new ones are added in order of first appearance), ``int64``."""
        fps = np.ascontiguousarray(fps, dtype=np.uint64)
        n = self._fps.size
        out = np.empty(fps.size, dtype=np.int64)
        j, m = _fp_encode(self._slot_fp, self._slot_id, fps, 0, n, self._slot_fp.size // 2, out)
        while j < fps.size:  # half full: double the table, re-insert every id, go on
            new = np.empty(m - n, dtype=np.uint64)
            new[out[:j][out[:j] >= n] - n] = fps[:j][out[:j] >= n]
            known = np.concatenate([self._fps, new])
            size = 2 * self._slot_fp.size
            self._slot_fp = np.zeros(size, dtype=np.uint64)
            self._slot_id = np.full(size, -1, dtype=np.int64)
            _fp_encode(self._slot_fp, self._slot_id, known, 0, 0, size, np.empty(m, dtype=np.int64))
            j, m = _fp_encode(self._slot_fp, self._slot_id, fps, j, m, size // 2, out)
        if m > n:
            new = np.empty(m - n, dtype=np.uint64)
            new[out[out >= n] - n] = fps[out >= n]
            self._fps = np.concatenate([self._fps, new])
        return out

    def __deepcopy__(self, memo: dict) -> "FingerprintVocabulary":
        return copy_as_in_memory(self, memo)  # no packing, no rebuilt index

    def __getstate__(self) -> dict:
        return {"fps": self._fps}

    def __setstate__(self, state: dict) -> None:
        self.__init__(np.asarray(state["fps"], dtype=np.uint64))
