"""Keep the driver's resident memory close to what it holds.

Per micro-batch the driver builds temporaries proportional to the keys of the batch (the workers'
statistics as Arrow, numpy arrays of ids, codes and counts: tens of MB at 1e6 keys) and frees them.
Two allocators keep such memory after it is freed:

* glibc's ``malloc`` serves blocks above its mmap threshold with their own mapping and returns them to
  the system on ``free`` — but it raises that threshold to the size of the largest mapped block freed
  (up to 32 MiB on 64-bit), after which the next batches' temporaries come from the heap, whose pages
  stay resident.  :func:`limit_retained_memory` fixes the threshold at 1 MiB (``mallopt``), which
  also switches the dynamic adjustment off.
* Arrow's memory pool (mimalloc or jemalloc) keeps freed pages for reuse; :func:`release_unused`
  returns them after each batch.

Both are no-ops where they do not apply (another C library, an Arrow build without the call).
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["limit_retained_memory", "release_unused"]

_M_MMAP_THRESHOLD = -3  # glibc malloc.h
_THRESHOLD = 1 << 20


def limit_retained_memory() -> bool:
    """Fix glibc's mmap threshold at 1 MiB; returns whether it was set."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD))
    except (OSError, AttributeError):
        return False


def release_unused() -> None:
    """Return the pages Arrow's memory pool keeps for reuse."""
    import pyarrow as pa

    try:
        pa.default_memory_pool().release_unused()
    except (AttributeError, NotImplementedError):
        pass
