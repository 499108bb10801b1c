"""The comment that marks generated C++ as an RVV micro-GEMM kernel.

``micro_gemm.py`` writes it into every kernel it generates; ``verify`` finds it in
Inductor's cache to tell RVV template kernels from the rest. One definition for both."""
from __future__ import annotations

import re

_PATTERN = re.compile(r"// rvv_inductor (.+?) micro-GEMM \(kernel headers (\w+)\)")


def line(variant: str, digest: str) -> str:
    """The marker for a kernel of ``variant`` ("GEMV 1xNr") built from headers ``digest``."""
    text = f"// rvv_inductor {variant} micro-GEMM (kernel headers {digest})"
    assert _PATTERN.fullmatch(text), text
    return text


def find(source: str) -> str | None:
    """The variant of the RVV micro-GEMM in generated ``source``, or None."""
    m = _PATTERN.search(source)
    return m.group(1) if m else None
