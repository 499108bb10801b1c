"""What both lowerings to Inductor's C++ GEMM template share (``routing.py`` for
``aten.mm``/``addmm``, ``packed_lowering.py`` for ``rvv_inductor::linear_packed``): the
config the template requires and the micro-GEMM it would pick."""
from __future__ import annotations

import math
import os

import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor import config as inductor_config
from torch._inductor import cpu_vec_isa
from torch._inductor.codegen.cpp_gemm_template import CppGemmTemplate, GemmBlocking
from torch._inductor.codegen.cpp_micro_gemm import create_micro_gemm
from torch._inductor.utils import parallel_num_threads

from .. import cpu
from .micro_gemm import RVV_MICRO_GEMM_CLASSES
from .vec_isa import VecRVV


def conditions():
    """A local ``config.patch`` with exactly what ``use_cpp_gemm_template()`` and
    ``CppGemmTemplate.add_choices`` ask for, and nothing global: the C++ GEMM backend and
    weight prepacking."""
    return inductor_config.patch(
        {"max_autotune_gemm": True, "max_autotune_gemm_backends": "CPP", "cpp.weight_prepack": True}
    )


def micro_gemm_for(m: int, n: int, k: int):
    """The micro-GEMM the template would use for a BF16 x BF16 -> FP32 GEMM of this shape."""
    return create_micro_gemm("micro_gemm", m, n, k, input_dtype=torch.bfloat16, input2_dtype=torch.bfloat16,
                             output_dtype=torch.float, num_threads=parallel_num_threads(), use_ref=True)


def is_rvv(micro, block_n: int | None = None) -> bool:
    """True when ``micro`` is one of ours (and, if given, blocks N by ``block_n``)."""
    return isinstance(micro, RVV_MICRO_GEMM_CLASSES) and (
        block_n is None or micro.register_blocking.block_n == block_n)



# --- cache blocking: stream the weight once -------------------------------------------
#
# CppGemmTemplate's loops are, per thread, ``for mc: for nc: for kc: micro_gemm`` over its
# thread block (Mt x Nt x Kt register blocks), so every Mc block of rows streams the
# thread's whole weight slice again. Upstream's "strategy 1" keeps A (Mc x Kt) in half the
# L2 and sets Mc = floor(L2 / 2 / (Mr x K x 2 bytes)): at K = 8960 (down_proj) and the K1's
# 512 KiB L2 that is 2 register blocks (12 rows), so a prefill of 64 / 128 rows reads the
# 27.5 MB weight 6 / 11 times; at K = 1536 (q/o/gate/up) Mc = 14 blocks (84 rows), so
# M = 128 reads it twice. On x86 with 1-2 MB of L2 per core and fast DRAM that trade
# is fine; on the K1 DRAM is the bottleneck and the weight is the large operand. For our
# micro-GEMMs we therefore take upstream's own "strategy 2" whenever strategy 1 would split
# the thread's rows: Mc = Mt (the weight streams once per thread), A re-used from L2 in
# (Mc x Kc) tiles across Nc = ceil(Mc x Mr / Nr) weight blocks, shrinking Mc only if
# A tile + accumulator would not fit half the L2 (upstream's formula). Compute is the same
# micro-GEMM calls in another order, so results are bit-identical. bench/prefill.sh counts
# both (RVV_INDUCTOR_UPSTREAM_BLOCKING=1 keeps upstream's choice).
UPSTREAM_BLOCKING_ENV = "RVV_INDUCTOR_UPSTREAM_BLOCKING"
L2_LIMIT_FACTOR = 0.5  # upstream's effective share of the L2 (cpp_gemm_template.py)


def weight_once_blocking(mr: int, nr: int, kr: int, mt: int, nt: int, mc: int, nc: int, kc: int,
                         l2_bytes: int, a_bytes: int = 2) -> tuple[int, int, int]:
    """(Mc, Nc, Kc) in register blocks: upstream's (mc, nc, kc) when it keeps all of the
    thread's Mt row blocks together, else upstream's strategy 2 forced (see above)."""
    if mc >= mt:
        return mc, nc, kc
    l2 = l2_bytes * L2_LIMIT_FACTOR
    mc = mt
    nc = min(math.ceil(mc * mr / nr), nt)
    kc_bytes = kc * kr * a_bytes
    if mc * mr * (kc_bytes + nc * nr * 4) > l2:
        m_max = (math.sqrt(kc_bytes * kc_bytes + 16 * l2) - kc_bytes) / 8
        if m_max < mc * mr:
            mc = max(1, math.floor(m_max / mr))
            nc = min(math.ceil(mc * mr / nr), nt)
    return mc, max(nc, 1), kc


def blocking_key() -> str:
    """The cache blocking in force, for Inductor's FX cache key (integration.CacheKeyPass):
    a graph compiled under one blocking must not be reused under the other."""
    return "upstream" if os.environ.get(UPSTREAM_BLOCKING_ENV) == "1" else "weight-once-1"


def _ours(tmpl) -> bool:
    """A BF16 x BF16 template for our micro-GEMM (our ISA picked, our block width)."""
    try:
        dtypes = (tmpl.input_nodes[0].get_dtype(), tmpl.input_nodes[1].get_dtype())
    except (AttributeError, IndexError):
        return False
    return (dtypes == (torch.bfloat16, torch.bfloat16) and isinstance(cpu_vec_isa.pick_vec_isa(), VecRVV)
            and tmpl.register_blocking.block_n == cpu.effective().block_n)


def _install_blocking() -> None:
    orig = CppGemmTemplate._cache_blocking
    if getattr(orig, "_rvv_inductor", False):
        return

    def _cache_blocking(self, num_threads: int):
        b = orig(self, num_threads)
        if os.environ.get(UPSTREAM_BLOCKING_ENV) == "1" or self.is_dynamic_M or not _ours(self):
            return b
        rb, tb = self.register_blocking, self.thread_blocking(num_threads)
        if inductor_config.cpp.gemm_cache_blocking is not None:  # the user's explicit choice wins
            return b
        l2 = torch.cpu.get_capabilities().get("l2_cache_size", 0)
        if l2 <= 0:
            return b
        return GemmBlocking(*weight_once_blocking(rb.block_m, rb.block_n, rb.block_k, tb.block_m, tb.block_n,
                                                  b.block_m, b.block_n, b.block_k, l2))

    _cache_blocking._rvv_inductor = True
    CppGemmTemplate._cache_blocking = _cache_blocking


_install_blocking()
