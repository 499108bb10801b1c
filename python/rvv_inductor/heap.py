"""Hand the heap memory that packing frees back to the OS, layer by layer.

Packing a Linear allocates its packed copy while the original (or the tensor just read by
``load=``) is still alive, then frees the original. glibc serves these 1-32 MiB blocks
from the heap (its mmap threshold rises to the size of the first large block freed), and
a freed original below a live packed copy stays in the process as a hole: the next
original of the same size does not fit it (``posix_memalign`` asks for a little more), so
every layer can leave one behind. At Qwen2.5-1.5B dimensions in BF16 that was ~2 GiB of
resident, free memory after packing (INT4 packs smaller than the original, so its holes
are refilled). ``malloc_trim(0)`` returns the free pages of every hole to the OS
(``madvise``), not only the top of the heap, so calling it after each layer keeps at most
one layer's transient resident.

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
