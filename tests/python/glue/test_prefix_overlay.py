"""inductor/prefix_overlay.py: the edits of cpp_prefix.h (RVV in the vector gate, our
vector math after the at::vec headers) are applied only to exactly the text they expect."""
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
VEC = "#include <ATen/cpu/vec/functional.h>\n#include <ATen/cpu/vec/vec.h>\n"


def test_patch_adds_rvv_to_the_gate():
    out = prefix_overlay.patch("// head\n" + GATE + VEC + "// tail\n")
    assert out is not None and out.count("CPU_CAPABILITY_RVV") == 2
    assert "defined(CPU_CAPABILITY_SVE128) || defined(CPU_CAPABILITY_RVV)\n" in out
    # the vector math comes right after the at::vec headers, only for RVV
    assert VEC + "#if defined(CPU_CAPABILITY_RVV) && __has_include(<rvv_inductor/inductor_vec_math.h>)\n" in out
    assert out.startswith("// head\n") and out.endswith("// tail\n")


@pytest.mark.parametrize("text", ["", GATE.replace("SVE128", "SVE64") + VEC, GATE + GATE + VEC, GATE, GATE + VEC + VEC])
def test_unexpected_text_is_left_alone(text):
    assert prefix_overlay.patch(text) is None


def _installed_headers() -> list[str]:
    """cpp_prefix.h of the torch that runs here, or of the emulated root filesystem."""
    try:
        from torch.utils.cpp_extension import include_paths

        # torch's own paths: a test that ran enable() before in this process left the
        # overlay (the patched header) first in the wrapped include_paths.
        found = [str(Path(p) / "torch/csrc/inductor/cpp_prefix.h")
                 for p in getattr(include_paths, "__wrapped__", include_paths)()]
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
