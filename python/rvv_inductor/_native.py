"""Loads the C++ core (librvv_inductor_core.so) with ctypes.

Search order: RVV_INDUCTOR_LIB (a file path), the installed package directory, then the
repository's own build trees, so tests can run from a checkout without installing.
"""
from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

_LIBNAME = "librvv_inductor_core.so"
_PKG = Path(__file__).resolve().parent
_REPO = _PKG.parent.parent


class NativeLibraryError(RuntimeError):
    pass


def _candidates() -> list[Path]:
    env = os.environ.get("RVV_INDUCTOR_LIB")
    if env:
        return [Path(env)]
    out = [_PKG / _LIBNAME]
    for build in ("build/rv64", "build/native", "build/host"):
        out.append(_REPO / build / "csrc" / _LIBNAME)
    return out


@functools.cache
def lib() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        if path.is_file():
            try:
                handle = ctypes.CDLL(str(path))
            except OSError as e:  # wrong architecture, missing dependency
                tried.append(f"{path}: {e}")
                continue
            _declare(handle)
            return handle
        tried.append(f"{path}: not found")
    raise NativeLibraryError(
        "rvv_inductor's C++ core is not available. Install the package with "
        "`pip install --no-build-isolation .`, or build it with CMake and set "
        "RVV_INDUCTOR_LIB.\n  tried:\n    " + "\n    ".join(tried)
    )


class CpuFeatures(ctypes.Structure):
    _fields_ = [
        ("is_riscv64", ctypes.c_int),
        ("has_v", ctypes.c_int),
        ("vlenb", ctypes.c_int),
        ("has_zvfh", ctypes.c_int),
        ("has_zvfbfmin", ctypes.c_int),
        ("has_zvfbfwma", ctypes.c_int),
        ("sources", ctypes.c_int),
    ]


def _declare(h: ctypes.CDLL) -> None:
    p = ctypes.POINTER(CpuFeatures)
    h.rvv_detect_cpu.argtypes = [p]
    h.rvv_detect_cpu.restype = ctypes.c_int
    h.rvv_resolve_cpu.argtypes = [ctypes.c_char_p, p, ctypes.c_char_p, ctypes.c_size_t]
    h.rvv_resolve_cpu.restype = ctypes.c_int
    h.rvv_march_string.argtypes = [p, ctypes.c_char_p, ctypes.c_size_t]
    h.rvv_march_string.restype = ctypes.c_int
