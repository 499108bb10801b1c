"""The comment that marks generated C++ as an RVV micro-GEMM kernel.

``micro_gemm.py`` and ``quant_lowering.py`` write it into every kernel they generate;
``verify`` finds it in Inductor's cache to tell RVV template kernels from the rest. One
definition for both. A quantized kernel's variant is ``quantized <format> g<group size>
<kernel>`` ("quantized int4 g64 rvv/int4/gemv_1xm8"), the kernel named as in the C++
kernel table (``csrc/rvv_inductor/kernel_table.inl``)."""
from __future__ import annotations

import re

from .. import _native

_PATTERN = re.compile(r"// rvv_inductor (.+?) micro-GEMM \(kernel headers (\w+)\)")
# any weight-format name of the library (weight_formats.inl): lower-case word characters
_QUANT = re.compile(r"quantized ([a-z0-9_]+) g(\d+) (\S+)")


def line(variant: str, digest: str) -> str:
    """The marker for a kernel of ``variant`` ("GEMV 1xNr") built from headers ``digest``."""
    text = f"// rvv_inductor {variant} micro-GEMM (kernel headers {digest})"
    assert _PATTERN.fullmatch(text), text
    return text


def quant_variant(fmt: str, group_size: int, kernel: str) -> str:
    """The variant of a quantized kernel (``fmt`` a weight-format name such as "int4" or
    "q4_k", ``group_size`` 0 = per output channel, ``kernel`` its kernel-table name)."""
    text = f"quantized {fmt} g{group_size} {kernel}"
    assert _QUANT.fullmatch(text) and fmt != "bf16" and fmt in _native.weight_formats(), text
    return text


def find(source: str) -> str | None:
    """The variant of the RVV micro-GEMM in generated ``source``, or None."""
    m = _PATTERN.search(source)
    return m.group(1) if m else None


def parse_quant(variant: str | None) -> dict | None:
    """{"format", "group_size", "kernel"} of a quantized variant, else None."""
    m = _QUANT.fullmatch(variant or "")
    return {"format": m.group(1), "group_size": int(m.group(2)), "kernel": m.group(3)} if m else None
