"""Inductor's vectorised exp and BF16 casts on RVV (csrc/rvv_inductor/inductor_vec_math.h,
included by the cpp_prefix.h overlay): compiled exp, SiLU and casts against eager torch,
special values included, in both builds: torch.compile's default (a precompiled
cpp_prefix.h: lane_math.h's plain C++, vectorised by GCC) and without a precompiled header
(export's: RVV intrinsics). Without it, ATen's generic Vectorized<float>::exp calls libm
lane by lane."""
import contextlib
import math
import os
import time
from pathlib import Path

import pytest
import torch

import rvv_inductor

pytestmark = pytest.mark.usefixtures("inductor_cache")


# precompiled: torch.compile's default; not precompiled: export's AOTI compile, where the
# intrinsic build is used (GCC 16 cannot mix RVV intrinsics with a precompiled header).
BUILDS = pytest.mark.parametrize("precompiled", [True, False], ids=["pch-lanes", "no-pch-intrinsics"])


@contextlib.contextmanager
def _vec_math(precompiled: bool):
    rvv_inductor.enable()
    try:
        with torch._inductor.config.patch({"cpp_cache_precompile_headers": precompiled,
                                           "aot_inductor.precompile_headers": precompiled}):
            yield
    finally:
        rvv_inductor.disable()


def _compiled(fn, *args):
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    return run_and_get_code(torch.compile(fn), *args)


@BUILDS
def test_exp_and_silu_match_eager(emulated, precompiled):
    if emulated is not None and not emulated["v"]:
        pytest.skip("the vector exp needs V")
    with _vec_math(precompiled):
        x = torch.cat([torch.linspace(-100, 100, 4099),
                       torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 88.72, 88.73, -87.33, -87.34])])
        t0 = time.time()
        y, code = _compiled(torch.exp, x)
        assert any(".exp()" in c for c in code), "exp was not vectorised"
        # The kernel's .so does not import libm's exp: the vector exp was compiled in.
        # (Kernels only: the vector ISA's build probe, vec_isa.py, calls exp through its own includes.)
        sos = [p for p in Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).rglob("*.so") if p.stat().st_mtime >= t0 - 1
               and p.with_suffix(".cpp").is_file() and "cpp_prefix.h" in p.with_suffix(".cpp").read_text()]
        assert sos, "no kernel .so built"
        for so in sos:
            assert b"expf" not in so.read_bytes(), f"{so} imports expf"
        want = torch.exp(x.double())
        normal = (x > -87.33654475) & (x < 88.72283905)
        rel = ((y.double() - want).abs() / want)[normal]
        assert float(rel.max()) <= 2.0 ** -21, float(rel.max())  # 4 ulp
        assert bool(torch.isnan(y[torch.isnan(x)]).all())
        assert bool((y[x >= 88.73] == math.inf).all()) and bool((y[x <= -87.34] == 0).all())

        h = (torch.randn(3, 8960) * 4).to(torch.bfloat16)
        s, _ = _compiled(torch.nn.functional.silu, h)
        ref = torch.nn.functional.silu(h.double())
        # one BF16 rounding of the result (2^-9 relative) and a little for FP32
        assert bool(((s.double() - ref).abs() <= ref.abs() * 2.0 ** -8 + 1e-6).all())


# The precompiled-header build only: without a precompiled header every kernel compile
# parses the ATen headers again (~1-2 min emulated), and the intrinsic casts are checked
# bit for bit over every BF16 pattern in tests/cpp/attention_test.cpp and run in every
# package test_export.py builds.
@pytest.mark.parametrize("precompiled", [True], ids=["pch-lanes"])
def test_bf16_conversions_match_eager_bit_for_bit(emulated, precompiled):
    """Generated code converts BF16 <-> FP32 with at::vec::convert, which our header
    vectorises (inductor_vec_math.h): the results must equal eager's casts bit for bit,
    NaN payloads, ties, Inf overflow, subnormals and the tails after the last full vector
    included."""
    if emulated is not None and not emulated["v"]:
        pytest.skip("the vector conversions need V")
    with _vec_math(precompiled):
        g = torch.Generator().manual_seed(0)
        lows = torch.tensor([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=torch.int64)
        his = torch.randint(0, 65536, (700,), generator=g, dtype=torch.int64)
        his = torch.cat([his, torch.tensor([0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x7F7F, 0xFF7F,
                                            0x0000, 0x8000, 0x0001, 0x8001, 0x3F80])])
        bits = (his[:, None] << 16 | lows[None, :]).reshape(-1)
        x = (bits - (bits >= 2**31).long() * 2**32).to(torch.int32).view(torch.float32)[:4099]
        assert x.numel() % 16 != 0  # a tail after the last vector

        def narrow(t):
            return t.to(torch.bfloat16)

        y, code = _compiled(narrow, x)
        assert any("at::vec::convert" in c for c in code), "the conversion was not vectorised"
        want = narrow(x)
        assert torch.equal(y.view(torch.int16), want.view(torch.int16))

        h = torch.randint(-32768, 32768, (4099,), generator=g, dtype=torch.int16).view(torch.bfloat16)

        def widen_and_narrow(t):
            return t.float() * 2.0, (t.float() * 0.5).to(torch.bfloat16)

        (w, n), code = _compiled(widen_and_narrow, h)
        assert any("at::vec::convert" in c for c in code), "the conversion was not vectorised"
        want_w, want_n = widen_and_narrow(h)
        assert torch.equal(w.view(torch.int32), want_w.view(torch.int32))
        assert torch.equal(n.view(torch.int16), want_n.view(torch.int16))
