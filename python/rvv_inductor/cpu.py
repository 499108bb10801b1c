"""What the CPU offers, as the C++ detector sees it, narrowed by RVV_INDUCTOR_CPU."""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import platform

from . import _native


class CpuOverrideError(RuntimeError):
    """RVV_INDUCTOR_CPU asked for a feature this CPU does not have."""


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    """The vector features code is generated for (rvv_cpu_features in cpu_features.h)."""

    is_riscv64: bool
    has_v: bool
    vlen: int  # bits; 0 without V
    has_zvfh: bool
    has_zvfbfmin: bool
    has_zvfbfwma: bool
    sources: int

    @property
    def march(self) -> str:
        """``-march`` for code generated for exactly these features ("rv64gcv_zvfh")."""
        return _native.march_string(self._struct())

    @property
    def block_n(self) -> int:
        """The block width nb of packed weights and of the micro-GEMMs at this VLEN."""
        return _native.nb_for_vlen(self.vlen)

    def _struct(self) -> _native.CpuFeatures:
        return _native.CpuFeatures(int(self.is_riscv64), int(self.has_v), self.vlen // 8, int(self.has_zvfh),
                                   int(self.has_zvfbfmin), int(self.has_zvfbfwma), self.sources,
                                   _native.RVV_CPU_FEATURES_VERSION)

    @property
    def hw_bf16(self) -> bool:
        return self.has_zvfbfmin and self.has_zvfbfwma


_SCALAR = CpuInfo(platform.machine() == "riscv64", False, 0, False, False, False, 0)


def _from_struct(s: _native.CpuFeatures) -> CpuInfo:
    if s.version != _native.RVV_CPU_FEATURES_VERSION:
        raise _native.NativeLibraryError(
            f"rvv_cpu_features version {s.version}, this package reads {_native.RVV_CPU_FEATURES_VERSION}: the "
            "library and this package come from different versions; rebuild the library or reinstall the package")
    return CpuInfo(bool(s.is_riscv64), bool(s.has_v), s.vlenb * 8, bool(s.has_zvfh),
                   bool(s.has_zvfbfmin), bool(s.has_zvfbfwma), s.sources)


def detect() -> CpuInfo:
    """The hardware's answer, ignoring RVV_INDUCTOR_CPU."""
    if platform.machine() != "riscv64":
        return _SCALAR
    s = _native.CpuFeatures()
    _native.lib().rvv_detect_cpu(ctypes.byref(s))
    return _from_struct(s)


@functools.cache
def _resolve(spec: str | None) -> CpuInfo:
    if platform.machine() != "riscv64":
        return _SCALAR
    s = _native.CpuFeatures()
    err = ctypes.create_string_buffer(512)
    rc = _native.lib().rvv_resolve_cpu(spec.encode() if spec else None, ctypes.byref(s), err, len(err))
    if rc != 0:
        raise CpuOverrideError(err.value.decode())
    return _from_struct(s)


def effective() -> CpuInfo:
    """What rvv_inductor will generate code for. Raises CpuOverrideError when the
    RVV_INDUCTOR_CPU override claims something the CPU lacks (instead of a later SIGILL)."""
    return _resolve(os.environ.get("RVV_INDUCTOR_CPU") or None)
