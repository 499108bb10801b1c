"""Hand the heap memory that packing frees back to the OS, layer by layer.

Packing a Linear allocates its packed copy while the original (or the tensor just read by
``load=``) is still alive, then frees the original. glibc serves blocks of a few MiB to
~32 MiB from its heap once its mmap threshold has risen (it rises to the size of the first
large block freed), and freed originals below live packed copies stayed resident: at
Qwen2.5-1.5B layer dimensions ~60 MiB per layer, 1.43x eager's peak over the whole model
in BF16 (measured; ``malloc_trim`` released it, tests/python/test_memory.py). INT4 did
not show it (its packed copies are a quarter of the originals and refill the holes).
``malloc_trim(0)`` returns the free pages of every free block to the OS (``madvise``),
not only the top of the heap, so calling it after each layer keeps at most one layer's
transient resident.

Other C libraries (musl) have no ``malloc_trim``: then this does nothing.
"""
from __future__ import annotations

import ctypes

_trim = None
_looked_up = False


def _malloc_trim():
    global _trim, _looked_up
    if not _looked_up:
        _looked_up = True
        try:
            fn = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            fn = None
        if fn is not None:
            fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
        _trim = fn
    return _trim


def release_freed() -> bool:
    """Give free heap pages back to the OS; True if the C library can (glibc)."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
