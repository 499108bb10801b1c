"""inductor/prefix_overlay.py: the one-line edit of cpp_prefix.h's vector gate is applied
only to exactly the text it expects."""
from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from rvv_inductor.inductor import prefix_overlay

GATE = ("#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2) || \\\n"
        "    defined(CPU_CAPABILITY_ZVECTOR) || defined(CPU_CAPABILITY_NEON) ||  \\\n"
        "    defined(CPU_CAPABILITY_VSX) || defined(CPU_CAPABILITY_SVE256) ||   \\\n"
        "    defined(CPU_CAPABILITY_SVE128)\n"
        "#define INDUCTOR_USE_VECTOR_TYPES() 1\n")


def test_patch_adds_rvv_to_the_gate():
    out = prefix_overlay.patch("// head\n" + GATE + "// tail\n")
    assert out is not None and out.count("CPU_CAPABILITY_RVV") == 1
    assert "defined(CPU_CAPABILITY_SVE128) || defined(CPU_CAPABILITY_RVV)\n" in out
    assert out.startswith("// head\n") and out.endswith("// tail\n")


@pytest.mark.parametrize("text", ["", GATE.replace("SVE128", "SVE64"), GATE + GATE])
def test_unexpected_text_is_left_alone(text):
    assert prefix_overlay.patch(text) is None


def _installed_headers() -> list[str]:
    """cpp_prefix.h of the torch that runs here, or of the emulated root filesystem."""
    try:
        from torch.utils.cpp_extension import include_paths

        found = [str(Path(p) / "torch/csrc/inductor/cpp_prefix.h") for p in include_paths()]
        return [p for p in found if os.path.isfile(p)]
    except ImportError:
        cache = os.environ.get("RVV_INDUCTOR_CACHE", os.path.expanduser("~/.cache/rvv-inductor"))
        return sorted(glob.glob(f"{cache}/rootfs-*/usr/include/torch/csrc/inductor/cpp_prefix.h"))


def test_the_real_header_matches():
    headers = _installed_headers()
    if not headers:
        pytest.skip("no torch 2.14 cpp_prefix.h here")
    for h in headers:
        assert prefix_overlay.patch(Path(h).read_text()) is not None, h
