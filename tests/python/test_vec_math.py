"""Inductor's vectorised exp on RVV (csrc/rvv_inductor/inductor_vec_math.h, included by
the cpp_prefix.h overlay): compiled exp and SiLU against eager torch, special values
included. Without it, ATen's generic Vectorized<float>::exp calls libm lane by lane."""
import math
import os
import time
from pathlib import Path

import pytest
import torch

import rvv_inductor

pytestmark = pytest.mark.usefixtures("inductor_cache")


def _compiled(fn, *args):
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    return run_and_get_code(torch.compile(fn), *args)


def test_exp_and_silu_match_eager(emulated):
    if emulated is not None and not emulated["v"]:
        pytest.skip("the vector exp needs V")
    rvv_inductor.enable()
    try:
        # What a user sets to get the vector exp in torch.compile (export does it itself): no
        # precompiled header, which GCC 16 cannot mix with RVV intrinsics.
        with torch._inductor.config.patch({"cpp_cache_precompile_headers": False,
                                           "aot_inductor.precompile_headers": False}):
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
    finally:
        rvv_inductor.disable()
