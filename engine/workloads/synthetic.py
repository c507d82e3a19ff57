"""Synthetic seeded key streams: ``zipf`` (with Fang's fluctuation rate f), ``drift``, ``gaussian``,
``country-skew``.

Common conventions (all workloads in this module)
-------------------------------------------------
* The vocabulary is built once, in the constructor, for every key the workload can emit; ``batches``
  then only draws ids with vectorised numpy (inverse-CDF sampling: ``np.searchsorted`` of uniform
  draws on the cumulative probabilities, ``side="right"``, so keys of probability 0 are never drawn).
* Randomness: ``numpy.random.Generator(PCG64(seed))`` for the message draws and, where a workload
  also evolves its distribution between intervals, an independent stream ``PCG64(seed).jumped()``
  for that evolution, so the evolution does not depend on the interval size.  Every call of
  ``batches`` replays the same stream from its beginning (the state is reset per call).
* ``batches(messages, interval_messages)`` yields ``ceil(messages / interval_messages)`` ``int64``
  arrays; all have ``interval_messages`` ids except possibly the last.  ``messages = 0`` yields
  nothing; ``interval_messages < 1`` or ``messages < 0`` is a :class:`ParamError`.
* "Interval" = one batch: the unit at which Fang's fluctuation, the drift and Guo & Zhou's
  statistic windows change the distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Mapping

import numpy as np
from numba import njit

from skewlab.engine.algorithms.keys import mix64, reduce_range
from skewlab.engine.config.params import Param, ParamError
from skewlab.engine.workloads import Workload, register_workload

__all__ = [
    "COUNTRIES",
    "CountrySkewWorkload",
    "DriftWorkload",
    "FluctuationRecord",
    "GaussianWorkload",
    "ZipfWorkload",
    "generator_instances",
    "interval_sizes",
    "sample_cdf",
    "zipf_probabilities",
]

MAX_KEYS = 5_000_000  # vocabulary memory (~300 B per key in Python) bounds the key domain


# ---------------------------------------------------------------------------------------- helpers
def interval_sizes(messages: int, interval_messages: int) -> Iterator[int]:
    """Sizes of the batches: ``interval_messages`` each, the last one shorter; none for 0 messages."""
    try:
        messages = int(messages)
        interval_messages = int(interval_messages)
    except (TypeError, ValueError):
        raise ParamError("messages and interval_messages must be integers") from None
    if messages < 0:
        raise ParamError(f"messages must be >= 0, got {messages}")
    if interval_messages < 1:
        raise ParamError(f"interval_messages must be >= 1, got {interval_messages}")
    full, rest = divmod(messages, interval_messages)
    for _ in range(full):
        yield interval_messages
    if rest:
        yield rest


def _seed64(seed: int) -> int:
    return int(seed) % (1 << 64)


def _rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """(message stream, evolution stream): ``PCG64(seed)`` and the same generator jumped 2^127 ahead."""
    bg = np.random.PCG64(_seed64(seed))
    return np.random.Generator(bg), np.random.Generator(np.random.PCG64(_seed64(seed)).jumped())


def zipf_probabilities(keys: int, z: float) -> np.ndarray:
    """``p_r = r^-z / H_{K,z}`` for ranks ``r = 1..K`` (index ``r - 1``), ``float64``, summing to 1."""
    ranks = np.arange(1, int(keys) + 1, dtype=np.float64)
    w = ranks ** (-float(z)) if z else np.ones_like(ranks)
    return w / w.sum()


def _cdf(probs: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(probs, dtype=np.float64)
    total = cdf[-1]
    if not total > 0:  # all-zero weights: fall back to uniform
        cdf = np.arange(1, probs.size + 1, dtype=np.float64)
        total = cdf[-1]
    cdf /= total
    cdf[-1] = 1.0
    return cdf


def generator_instances(fps: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Task instance in ``[0, n)`` of each fingerprint under the fluctuation generator's own hash.

    ``reduce_range(mix64(fp XOR salt), n)`` with a 64-bit salt drawn from
    ``SeedSequence([seed mod 2^64, 0x66616E67])``: a seeded hash independent of every routing hash
    (``fp mod n``, the salted choices ``F_i``, the consistent-hash ring), so that the instance the
    generator pushes is not a worker of any grouping (see :class:`ZipfWorkload`).
    """
    salt = np.random.SeedSequence([_seed64(seed), 0x66616E67]).generate_state(1, np.uint64)[0]
    return reduce_range(mix64(np.asarray(fps, dtype=np.uint64) ^ salt), int(n)).astype(np.int64)


def sample_cdf(rng: np.random.Generator, cdf: np.ndarray, size: int) -> np.ndarray:
    """``size`` indices drawn from the distribution with cumulative probabilities ``cdf`` (last = 1)."""
    idx = np.searchsorted(cdf, rng.random(size), side="right")
    np.minimum(idx, cdf.size - 1, out=idx)  # guards against float round-off; cdf[-1] == 1 > u anyway
    return idx.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------------------- Zipf family
class _ZipfBase(Workload):
    """K keys ``k0 .. k{K-1}``; at interval 0 key ``k{r-1}`` has Zipf rank ``r`` (``k0`` is hottest)."""

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        self.n_keys = int(self.p["keys"])
        self.probs = zipf_probabilities(self.n_keys, float(self.p["z"]))
        self.cdf = _cdf(self.probs)
        self.key_ids = self.vocab.extend([f"k{i}" for i in range(self.n_keys)])

    def top_share(self) -> float:
        """Theoretical share of the hottest key, ``1 / H_{K,z}``."""
        return float(self.probs[0])


@dataclass(frozen=True)
class FluctuationRecord:
    """What Fang's fluctuation step did at the start of one interval.

    ``instance`` is the task instance d whose load was pushed up (−1 when nothing was done);
    ``change`` is the achieved ``|L_i(d) − L_{i−1}(d)| / L̄`` of that instance over the
    expected loads and ``reached`` is ``change >= f``.  ``attempts`` counts drawn key pairs,
    ``swaps`` the applied ones.
    """

    interval: int
    instance: int
    attempts: int
    swaps: int
    change: float
    reached: bool


@njit(cache=True)
def _swap_kernel(key_of_rank, inst_of_key, probs, ra, rb, target, sign, delta, goal):  # pragma: no cover
    """Fang's frequency swaps (Sec. V) until instance ``target``'s load moved by ``sign · goal``.

    ``key_of_rank[r]`` is the key holding the r-th largest frequency ``probs[r]``; swapping the
    frequencies of two keys swaps their ranks.  Pair t is ranks ``ra[t]`` (drawn by frequency) and
    ``rb[t]`` (uniform).  A pair is applied only if its keys sit on different instances, one of them
    ``target``, and the swap moves ``target``'s load in direction ``sign``; ``delta[d]``
    accumulates every instance's load change.  Returns (pairs used, swaps applied, goal reached).
    """
    swaps = 0
    for t in range(ra.size):
        r1 = ra[t]
        r2 = rb[t]
        a = key_of_rank[r1]
        b = key_of_rank[r2]
        da = inst_of_key[a]
        db = inst_of_key[b]
        if da == db:
            continue
        diff = probs[r1] - probs[r2]  # load that moves from da to db when a and b swap
        if da == target:
            gain = -diff
        elif db == target:
            gain = diff
        else:
            continue
        if gain * sign <= 0.0:
            continue
        key_of_rank[r1] = b
        key_of_rank[r2] = a
        delta[da] -= diff
        delta[db] += diff
        swaps += 1
        if sign * delta[target] >= goal:
            return t + 1, swaps, True
    return ra.size, swaps, False


@register_workload
class ZipfWorkload(_ZipfBase):
    """Zipf keys with Fang et al.'s fluctuation rate ``f`` (HPDC 2017, Sec. V "Synthetic Data").

    Keys: ``k0 .. k{K-1}``; rank ``r`` (1-based) has probability ``r^-z / H_{K,z}``.

    Fluctuation (Fang Sec. V): "At the beginning of a new interval, our generator keeps swapping
    frequencies between keys from different task instances until the change on workload is
    significant enough, i.e. ``|L_i(d) − L_{i−1}(d)| / L̄ >= f``."  Implemented as follows:

    * task instances are the ``instances`` = N_D groups of the generator's own seeded hash
      (:func:`generator_instances`), not of any grouping's hash.  Deviation: Fang measures L(d) on
      the instances of the system under test; with ``h(k) = fp(k) mod N_D`` (the base hash of
      ``hash`` and ``mixed``) the surge would land on exactly one worker of those groupings and be
      spread over several workers of every other grouping, so the workload would favour some
      algorithms over others.  With an independent hash every grouping sees the same kind of
      surge: the keys that get heavier are scattered over its workers.  The loads ``L_i(d)`` are
      the *expected* loads (sum of the key probabilities on d; L̄ = 1/N_D), so the criterion is
      exact and independent of sampling noise;
    * a swap exchanges the frequencies of two keys on different instances, so the multiset of
      frequencies (the Zipf shape, the top-key share 1/H_{K,z}) never changes; only which key holds
      which frequency does;
    * the paper says neither which pairs are swapped nor for which d the criterion must hold.  Random
      swaps of random pairs do not work: the heavy frequencies just hop between instances and the
      loads stay near their stationary values, so e.g. f = 1 with z = 0.85, K = 10⁶ (Fang's own
      settings) is never reached.  We therefore push one instance: at each interval an instance d
      is drawn uniformly, then key pairs are drawn, the first key *by frequency* (a rank drawn
      from the Zipf law itself) and the second uniformly, and a pair's frequencies are swapped
      when the two keys sit on different instances, one of them d, and the swap makes d heavier.
      This stops as soon as ``|L_i(d) − L_{i−1}(d)| / L̄ >= f``, so the change overshoots f by at
      most one key's share; the partners' instances get lighter.  We only push instances up: a
      symmetric "make d lighter" step needs d to lose f·L̄, which is impossible for f >= 1 on an
      average instance and converges very slowly by random swaps when the frequencies are flat
      (measured: z = 0.5, K = 10⁵, f = 0.5 stalled at 0.36 after 10⁶ pairs).  So each interval
      a random instance receives a load surge of f·L̄ taken from the others.  L_{i−1} are the
      loads of the previous interval;
    * ``f = 0`` gives a static Zipf stream.  Swapping cannot change anything when ``z = 0``,
      ``K = 1`` or ``N_D = 1``, and an instance's load cannot exceed the sum of the largest
      frequencies its keys can hold, so a large ``f`` may be unreachable: the step then stops
      after ``max_swaps`` drawn pairs and reports it (:attr:`fluctuation_log`, ``reached =
      False``) instead of looping.

    Fang's Table II: K ∈ {5·10³, 10⁴, 10⁵, 10⁶}, z ∈ [0, 1] (0.85 listed as the middle/default
    value), f ∈ [0, 2] (1.0 listed; f = 1 is used in the TPC-H experiment).  Our defaults are
    z = 1, K = 10⁴, f = 0 (a static Zipf stream, the common baseline); ``f`` is allowed up to 10
    because with many instances (``L̄`` small) a change of several ``L̄`` is reachable.

    After each yielded batch, :attr:`rank_to_key` holds the mapping used for it (ids into
    :attr:`vocab`, ``rank_to_key[r - 1]`` = key with rank r) and :attr:`fluctuation_log` one
    :class:`FluctuationRecord` per interval after the first (both belong to the most recently
    started ``batches`` iteration).
    """

    name: ClassVar[str] = "zipf"
    summary: ClassVar[str] = "Zipf(z) over K keys; Fang's fluctuation rate f swaps frequencies per interval"
    params: ClassVar[tuple[Param, ...]] = (
        Param("z", "float", 1.0, "Zipf exponent: P(rank r) ∝ r^-z (0 = uniform)", low=0, high=5),
        Param("keys", "int", 10_000, "number of distinct keys K (k0..k{K-1}, k0 hottest at start)",
              low=1, high=MAX_KEYS),
        Param("f", "float", 0.0, "Fang's fluctuation rate: each interval, swap key frequencies until "
              "one instance's load changed by f·mean load (0 = static)", low=0, high=10),
        Param("instances", "int", 10, "task instances N_D on which f is measured (groups of the "
              "generator's own seeded hash, not of a grouping's)", low=1, high=1_000_000),
        Param("max_swaps", "int", 1_000_000, "cap on key pairs drawn per interval when f is unreachable",
              low=1, high=100_000_000),
    )

    _CHUNK = 1 << 16

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        self.rank_to_key = self.key_ids.copy()
        self.fluctuation_log: list[FluctuationRecord] = []
        self._inst: np.ndarray | None = None

    def instance_of_keys(self) -> np.ndarray:
        """The generator's task instance of every key id: its own seeded hash (see the class docstring)."""
        if self._inst is None:
            self._inst = generator_instances(self.vocab.fps, int(self.p["instances"]), self.seed)
        return self._inst

    def instance_loads(self) -> np.ndarray:
        """Expected load share of each generator task instance under :attr:`rank_to_key` (sums to 1)."""
        n = int(self.p["instances"])
        inst = self.instance_of_keys()[self.rank_to_key]  # instance of the key at each rank
        return np.bincount(inst, weights=self.probs, minlength=n)

    def _fluctuate(self, rng: np.random.Generator, interval: int, key_of_rank: np.ndarray) -> None:
        f = float(self.p["f"])
        n = int(self.p["instances"])
        if f <= 0.0:
            self.fluctuation_log.append(FluctuationRecord(interval, -1, 0, 0, 0.0, True))
            return
        if n == 1 or self.n_keys == 1 or float(self.p["z"]) == 0.0:
            # Every swap is within one instance or exchanges equal frequencies: nothing can change.
            self.fluctuation_log.append(FluctuationRecord(interval, -1, 0, 0, 0.0, False))
            return
        goal = f / n  # f · L̄ with the expected loads summing to 1
        target = int(rng.integers(0, n))
        delta = np.zeros(n, dtype=np.float64)
        budget = int(self.p["max_swaps"])
        inst = self.instance_of_keys()
        attempts = swaps = 0
        reached = False
        while attempts < budget and not reached:
            m = min(self._CHUNK, budget - attempts)
            ra = sample_cdf(rng, self.cdf, m)
            rb = rng.integers(0, self.n_keys, size=m, dtype=np.int64)
            used, applied, reached = _swap_kernel(
                key_of_rank, inst, self.probs, ra, rb, target, 1.0, delta, goal
            )
            attempts += int(used)
            swaps += int(applied)
        change = float(abs(delta[target]) * n)
        self.fluctuation_log.append(
            FluctuationRecord(interval, target, attempts, swaps, change, bool(reached))
        )

    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        sizes = interval_sizes(messages, interval_messages)
        rng, evo = _rngs(self.seed)
        key_of_rank = self.key_ids.copy()
        self.rank_to_key = key_of_rank
        self.fluctuation_log = []
        for i, size in enumerate(sizes):
            if i > 0:
                self._fluctuate(evo, i, key_of_rank)
            self.rank_to_key = key_of_rank
            yield key_of_rank[sample_cdf(rng, self.cdf, size)]


@register_workload
class DriftWorkload(_ZipfBase):
    """Zipf keys whose hot set rotates over time (concept drift; no single paper, used by all as a stress).

    Keys ``k0 .. k{K-1}``, Zipf(z) over ranks as in ``zipf``.  In interval ``i`` (0-based) the key
    with rank ``r`` (1-based) is ``k{(r − 1 + shift · ⌊i / period⌋) mod K}``: every ``period``
    intervals the rank→key mapping shifts by ``shift`` keys.  With ``shift = 1`` the previous
    rank-2 key becomes the hottest, every key moves up one rank and the previous hottest key falls
    to the coldest rank (it disappears); with ``shift`` at least the size of the hot set, a
    completely new set of keys becomes hot.  ``shift = 0`` (or a multiple of K) is a static Zipf stream.
    """

    name: ClassVar[str] = "drift"
    summary: ClassVar[str] = "Zipf(z) over K keys whose rank→key mapping shifts by `shift` every `period` intervals"
    params: ClassVar[tuple[Param, ...]] = (
        Param("z", "float", 1.0, "Zipf exponent: P(rank r) ∝ r^-z (0 = uniform)", low=0, high=5),
        Param("keys", "int", 10_000, "number of distinct keys K (k0..k{K-1})", low=1, high=MAX_KEYS),
        Param("shift", "int", 1, "keys the rank→key mapping moves by at each drift step", low=0, high=MAX_KEYS),
        Param("period", "int", 1, "intervals between drift steps", low=1, high=1_000_000_000),
    )

    def offset(self, interval: int) -> int:
        """Rank→key offset in interval ``interval``: ``shift · ⌊interval / period⌋ mod K``."""
        return (int(self.p["shift"]) * (int(interval) // int(self.p["period"]))) % self.n_keys

    def hottest_key(self, interval: int) -> str:
        return self.vocab.names[int(self.key_ids[self.offset(interval)])]

    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        rng, _ = _rngs(self.seed)
        k = np.int64(self.n_keys)
        for i, size in enumerate(interval_sizes(messages, interval_messages)):
            ranks = sample_cdf(rng, self.cdf, size)
            off = self.offset(i)
            if off:
                ranks += off
                ranks %= k
            yield self.key_ids[ranks]


# ---------------------------------------------------------------------------------------- Gaussian
@register_workload
class GaussianWorkload(Workload):
    """Guo & Zhou (Euro-Par 2017 workshops, Sec. 5 "Synthetic stream" S1): p substreams with
    normally distributed loads that change every statistic window.

    The paper: the partition key ``a1 ∈ [1, 100]`` splits S1 into p = 100 substreams and "Y_i
    [the histogram of substream loads in window i] satisfies the normal distribution", with the
    same mean as the Zipf stream S2 (both have the same total rate, so mean load = total / p).  We
    implement that: in window ``t`` the load of substream ``j`` is

        y_{j,t} = μ + ρ (y_{j,t−1} − μ) + √(1 − ρ²) · σ · ε_{j,t},   y_{j,0} = μ + σ ε_{j,0},

    ε i.i.d. N(0, 1), μ = 1, σ = ``cv`` (so the marginal is N(μ, σ²) in every window), clipped at 0
    (negative loads are impossible; with the default cv = 0.3 that is a 3.3σ event) and
    normalised to the window's message count; the window's keys are then drawn i.i.d. from these
    shares.  ``persistence`` ρ = 0 (default, the paper's i.i.d. histograms) redraws the loads in every
    window; ρ → 1 keeps them, giving the correlated load series CLB exploits.  The paper does not
    give σ; cv = 0.3 is our choice.  Its Poisson arrival process (λ = 10⁴/s) varies the *rate*;
    our windows have a fixed message count, so only the per-substream shares vary.

    Keys and substreams: with ``keys_per_substream = 1`` the keys are the paper's integer key values
    ``"1" .. "p"``; otherwise substream j has keys ``"j:1" .. "j:c"`` (uniform within the
    substream).  The substream of a key is the integer before ``:`` minus one
    (:meth:`substream_of`).  Groupings that hash keys into their own p partitions (ELB/CLB's H) see
    the same stream; only this workload's notion of substream is by key string.
    """

    name: ClassVar[str] = "gaussian"
    summary: ClassVar[str] = "p substreams with N(μ, (cv·μ)²) loads redrawn per window (Guo & Zhou S1)"
    params: ClassVar[tuple[Param, ...]] = (
        Param("substreams", "int", 100, "number of substreams p (paper: 100)", low=1, high=1_000_000),
        Param("keys_per_substream", "int", 1, "distinct keys per substream (uniform within it)",
              low=1, high=MAX_KEYS),
        Param("cv", "float", 0.3, "std/mean of a substream's load (σ/μ)", low=0, high=10),
        Param("persistence", "float", 0.0, "AR(1) coefficient ρ of each substream's load between windows "
              "(0 = independent windows, 1 = frozen loads)", low=0, high=1),
    )

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        p = int(self.p["substreams"])
        c = int(self.p["keys_per_substream"])
        if p * c > MAX_KEYS:
            raise ParamError(f"workload gaussian: substreams × keys_per_substream = {p * c} exceeds {MAX_KEYS} keys")
        self.n_substreams = p
        self.keys_per_substream = c
        if c == 1:
            names = [str(j + 1) for j in range(p)]
        else:
            names = [f"{j + 1}:{i + 1}" for j in range(p) for i in range(c)]
        self.key_ids = self.vocab.extend(names)
        self.substream_shares = np.full(p, 1.0 / p)  # shares of the most recently yielded window

    @staticmethod
    def substream_of(key: str) -> int:
        """0-based substream of a key string of this workload (``"7"`` or ``"7:3"`` → 6)."""
        return int(str(key).split(":", 1)[0]) - 1

    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        rng, evo = _rngs(self.seed)
        p, c = self.n_substreams, self.keys_per_substream
        sigma = float(self.p["cv"])
        rho = float(self.p["persistence"])
        innov = math.sqrt(max(0.0, 1.0 - rho * rho)) * sigma
        y = None
        for size in interval_sizes(messages, interval_messages):
            eps = evo.standard_normal(p)
            y = 1.0 + sigma * eps if y is None else 1.0 + rho * (y - 1.0) + innov * eps
            loads = np.maximum(y, 0.0)
            total = loads.sum()
            shares = loads / total if total > 0 else np.full(p, 1.0 / p)
            self.substream_shares = shares
            sub = sample_cdf(rng, _cdf(shares), size)
            if c > 1:
                idx = sub * c + rng.integers(0, c, size=size, dtype=np.int64)
            else:
                idx = sub
            yield self.key_ids[idx]


# ---------------------------------------------------------------------------------------- country-skew
# 193 UN member states, the 2 observer states and 9 widely listed territories: the paper's
# "names of the 204 countries on the globe" (Dalabasmaz & Can Sec. 5.1 do not list them).
COUNTRIES: tuple[str, ...] = (
    "Afghanistan", "Albania", "Algeria", "Andorra", "Angola", "Antigua and Barbuda", "Argentina",
    "Armenia", "Australia", "Austria", "Azerbaijan", "Bahamas", "Bahrain", "Bangladesh", "Barbados",
    "Belarus", "Belgium", "Belize", "Benin", "Bhutan", "Bolivia", "Bosnia and Herzegovina", "Botswana",
    "Brazil", "Brunei", "Bulgaria", "Burkina Faso", "Burundi", "Cabo Verde", "Cambodia", "Cameroon",
    "Canada", "Central African Republic", "Chad", "Chile", "China", "Colombia", "Comoros", "Congo",
    "Costa Rica", "Cote d'Ivoire", "Croatia", "Cuba", "Cyprus", "Czechia",
    "Democratic Republic of the Congo", "Denmark", "Djibouti", "Dominica", "Dominican Republic",
    "Ecuador", "Egypt", "El Salvador", "Equatorial Guinea", "Eritrea", "Estonia", "Eswatini", "Ethiopia",
    "Fiji", "Finland", "France", "Gabon", "Gambia", "Georgia", "Germany", "Ghana", "Greece", "Grenada",
    "Guatemala", "Guinea", "Guinea-Bissau", "Guyana", "Haiti", "Honduras", "Hungary", "Iceland", "India",
    "Indonesia", "Iran", "Iraq", "Ireland", "Israel", "Italy", "Jamaica", "Japan", "Jordan", "Kazakhstan",
    "Kenya", "Kiribati", "Kuwait", "Kyrgyzstan", "Laos", "Latvia", "Lebanon", "Lesotho", "Liberia",
    "Libya", "Liechtenstein", "Lithuania", "Luxembourg", "Madagascar", "Malawi", "Malaysia", "Maldives",
    "Mali", "Malta", "Marshall Islands", "Mauritania", "Mauritius", "Mexico", "Micronesia", "Moldova",
    "Monaco", "Mongolia", "Montenegro", "Morocco", "Mozambique", "Myanmar", "Namibia", "Nauru", "Nepal",
    "Netherlands", "New Zealand", "Nicaragua", "Niger", "Nigeria", "North Korea", "North Macedonia",
    "Norway", "Oman", "Pakistan", "Palau", "Panama", "Papua New Guinea", "Paraguay", "Peru",
    "Philippines", "Poland", "Portugal", "Qatar", "Romania", "Russia", "Rwanda", "Saint Kitts and Nevis",
    "Saint Lucia", "Saint Vincent and the Grenadines", "Samoa", "San Marino", "Sao Tome and Principe",
    "Saudi Arabia", "Senegal", "Serbia", "Seychelles", "Sierra Leone", "Singapore", "Slovakia",
    "Slovenia", "Solomon Islands", "Somalia", "South Africa", "South Korea", "South Sudan", "Spain",
    "Sri Lanka", "Sudan", "Suriname", "Sweden", "Switzerland", "Syria", "Tajikistan", "Tanzania",
    "Thailand", "Timor-Leste", "Togo", "Tonga", "Trinidad and Tobago", "Tunisia", "Turkey",
    "Turkmenistan", "Tuvalu", "Uganda", "Ukraine", "United Arab Emirates", "United Kingdom",
    "United States", "Uruguay", "Uzbekistan", "Vanuatu", "Venezuela", "Vietnam", "Yemen", "Zambia",
    "Zimbabwe",
    # observer states and territories
    "Vatican City", "Palestine", "Kosovo", "Taiwan", "Western Sahara", "Cook Islands", "Niue",
    "Greenland", "Puerto Rico", "Hong Kong", "Macau",
)


@register_workload
class CountrySkewWorkload(Workload):
    """Dalabasmaz & Can, "Dynamic Key Grouping", Sec. 5.1 / Table 2: ``country-skew-r<R>``.

    "The synthetic data consist of the names of the 204 countries on the globe ... skewed data sets
    are produced at different skewness ratios" r ∈ {0, 10, ..., 100} %.  Implemented as: one hot
    country receives exactly ``r`` % of the tuples (each tuple independently with probability
    r/100) and the other 203 countries share the remaining (100 − r) % uniformly.  The paper does
    not say how "the rest" is distributed; uniform is the reading that makes r the only skew.  With
    r = 0 the hot country never occurs (uniform over 203 keys).  The hot country is drawn from
    the 204 with the seed (:attr:`hot_key`), so seeds also vary its hash placement.

    ``half = true`` reproduces ``country-half-skew-r80`` (skewness 40 % in Table 2) as we read it:
    the first ⌊messages/2⌋ tuples are skewed as above, the rest uniform over all 204 countries
    (the hot key cools down to an ordinary one), giving an overall hot share of ≈ r/2 %.
    """

    name: ClassVar[str] = "country-skew"
    summary: ClassVar[str] = "204 country names; one hot country gets r% of tuples, the rest uniform (DKG)"
    params: ClassVar[tuple[Param, ...]] = (
        Param("r", "float", 50.0, "skewness ratio: percent of tuples carrying the hot country", low=0, high=100),
        Param("half", "bool", False, "skewed only in the first half of the stream, then uniform "
              "(country-half-skew)"),
    )

    def __init__(self, seed: int = 0, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(seed, params)
        self.key_ids = self.vocab.extend(COUNTRIES)
        pick = np.random.Generator(np.random.PCG64([_seed64(self.seed), 204]))
        self.hot_index = int(pick.integers(0, len(COUNTRIES)))
        self.hot_key = COUNTRIES[self.hot_index]
        others = np.delete(np.arange(len(COUNTRIES), dtype=np.int64), self.hot_index)
        self._cold_ids = self.key_ids[others]

    def batches(self, messages: int, interval_messages: int) -> Iterator[np.ndarray]:
        rng, _ = _rngs(self.seed)
        r = float(self.p["r"]) / 100.0
        half_at = int(messages) // 2 if self.p["half"] else None
        hot_id = self.key_ids[self.hot_index]
        n_all = len(COUNTRIES)
        start = 0
        for size in interval_sizes(messages, interval_messages):
            u = rng.random(size)
            cold = self._cold_ids[rng.integers(0, n_all - 1, size=size, dtype=np.int64)]
            out = np.where(u < r, hot_id, cold)
            if half_at is not None and start + size > half_at:
                late = np.arange(start, start + size) >= half_at
                uniform = self.key_ids[rng.integers(0, n_all, size=size, dtype=np.int64)]
                out = np.where(late, uniform, out)
            start += size
            yield out.astype(np.int64, copy=False)
