"""Driver-side helpers of the Spark topology (engine/spark/topology.py): the persistent-hash-table
``VocabIndex`` gives exactly ``Vocabulary.encode``'s ids (also across table growth, NULLs, slices,
large strings and fingerprint collisions)."""

import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.keys import Vocabulary, fingerprints
from engine.spark.topology import VocabIndex


@given(st.lists(st.lists(st.sampled_from([f"k{i}" for i in range(40)] + ["", "ü€", "日本", "k1 ", "shared-16-bytes-a",
                                                                "shared-16-bytes-b", "shared-16-bytes-", "shared-16-bytes-aa"]), max_size=40),
                min_size=1, max_size=6),
       st.booleans())
@settings(max_examples=60, deadline=None)
def test_equals_vocabulary_encode(batches, large):
    ref, vocab, index = Vocabulary(["k3"]), Vocabulary(["k3"]), VocabIndex()
    for keys in batches:
        arr = pa.array(keys, pa.large_string() if large else pa.string())
        assert np.array_equal(index.encode(vocab, arr), ref.encode(keys))
        assert vocab.names == ref.names


def test_table_growth_and_many_new_keys():
    rng = np.random.default_rng(0)
    ref, vocab, index = Vocabulary(), Vocabulary(), VocabIndex()
    for b in range(6):  # grows past the initial 1024-slot table several times
        keys = [f"user-{int(x)}" for x in rng.integers(0, 1500 * (b + 1), 2500)]
        parts = pa.chunked_array([pa.array(keys[:1000]), pa.array(keys[1000:])])
        assert np.array_equal(index.encode(vocab, parts), ref.encode(keys))
    assert vocab.names == ref.names and np.array_equal(vocab.fps, ref.fps)
    vocab.encode(["from-elsewhere"]), ref.encode(["from-elsewhere"])  # added behind the index's back
    assert np.array_equal(index.encode(vocab, pa.array(["from-elsewhere", "user-1"])),
                          ref.encode(["from-elsewhere", "user-1"]))


def test_nulls_slices_and_replaced_vocabulary():
    index = VocabIndex()
    v, ref = Vocabulary(["z"]), Vocabulary(["z"])
    arr = pa.array(["z", None, "q", "z", None])
    # NULL keys go through vocab.encode like any unknown key (as str(None)), as before
    assert index.encode(v, arr).tolist() == ref.encode(["z", "None", "q", "z", "None"]).tolist()
    sliced = pa.array(["a", "q", "z", "b"]).slice(1, 2)
    assert index.encode(v, sliced).tolist() == [2, 0]
    assert index.encode(v, pa.array([], pa.string())).size == 0
    other = Vocabulary(["q", "z"])  # a restored controller brings another vocabulary object
    assert index.encode(other, pa.array(["z", "q"])).tolist() == [1, 0]
    smaller = Vocabulary(["zz"])
    assert index.encode(smaller, pa.array(["zz"])).tolist() == [0]


class CollidingVocab:
    """A vocabulary whose names share one fingerprint (real 64-bit collisions are not at hand)."""

    def __init__(self, names, like):
        self.names = list(names)
        f = fingerprints([like])[0]
        self._fps = np.array([f] * len(self.names), dtype=np.uint64)

    @property
    def fps(self):
        return self._fps

    def encode(self, keys):
        out = []
        for k in keys:
            if k not in self.names:
                self.names.append(k)
                self._fps = np.append(self._fps, fingerprints([k]))
            out.append(self.names.index(k))
        return np.array(out, dtype=np.int64)


def test_fingerprint_collisions_never_merge_keys():
    v = CollidingVocab(["b", "a"], "a")
    assert VocabIndex().encode(v, pa.array(["a", "b", "a", "c"])).tolist() == [1, 0, 1, 2]
    long = "0123456789abcdef-tail"  # same first 16 bytes and length: decided by the rest of the bytes
    v = CollidingVocab([long[:-1] + "X", long], long)
    assert VocabIndex().encode(v, pa.array([long, long[:-1] + "X", long])).tolist() == [1, 0, 1]
