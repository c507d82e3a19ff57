"""The Spark driver's key ids (engine/algorithms/keys.py ``FingerprintVocabulary``): the same ids as a dict from
fingerprint to id in order of first appearance, across table growth, duplicates and pickling."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.engine.algorithms.keys import FingerprintVocabulary, fingerprints


def _reference(ref: dict[int, int], fps: np.ndarray) -> list[int]:
    return [ref.setdefault(int(f), len(ref)) for f in fps.tolist()]


@given(st.lists(st.lists(st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 1024, 2**63]), max_size=300),
                min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_ids_in_order_of_first_appearance(batches):
    vocab, ref = FingerprintVocabulary(), {}
    for b in batches:
        fps = np.asarray(b, dtype=np.uint64)
        ids = vocab.encode_fps(fps)
        assert ids.dtype == np.int64 and ids.tolist() == _reference(ref, fps)
        assert np.array_equal(vocab.fps[ids], fps) and len(vocab) == len(ref)


def test_growth_with_colliding_slots_and_many_new_keys():
    """Fingerprints that share their low bits (one probe chain) and batches far larger than the table."""
    vocab, ref = FingerprintVocabulary(), {}
    rng = np.random.default_rng(1)
    same_slot = (np.arange(3000, dtype=np.uint64) << np.uint64(40)) | np.uint64(7)
    for fps in (same_slot, rng.integers(0, 2**63, 50_000).astype(np.uint64), same_slot[::-1],
                np.zeros(0, np.uint64), rng.integers(0, 2**63, 20_000).astype(np.uint64)):
        assert vocab.encode_fps(fps).tolist() == _reference(ref, fps)
    assert 2 * len(vocab) <= vocab._slot_fp.size  # load factor stays <= 1/2


def test_pickle_keeps_ids_and_holds_only_fingerprints():
    vocab = FingerprintVocabulary()
    fps = fingerprints([f"k{i}" for i in range(10_000)])
    vocab.encode_fps(fps)
    raw = pickle.dumps(vocab)
    assert len(raw) < 8 * len(vocab) + 1000
    back = pickle.loads(raw)
    assert np.array_equal(back.encode_fps(fps[::-1]), np.arange(10_000)[::-1])
    assert back.encode_fps(fingerprints(["new"])).tolist() == [10_000]
    assert back.names[0] == f"#{int(fps[0]):016x}"


def test_duplicate_fingerprints_are_refused():
    with pytest.raises(ValueError, match="not distinct"):
        FingerprintVocabulary(np.array([5, 6, 5], dtype=np.uint64))
