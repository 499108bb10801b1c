"""RVV BF16 micro-GEMMs in Inductor's micro-GEMM registry.

Two classes, one per shape regime, each registered with a CppMicroGemmConfig bound to
VecRVV (so they are only ever chosen when the RVV ISA was picked):

* M == 1 (decode): GEMV over one packed weight block, vector FMA along N.
* M >= 2 (prefill, batched decode): register-blocked rows sharing each widened weight
  vector.

Their generated code is a thin call shim: it includes the kernel headers under csrc/ and
calls ``rvv_inductor::micro_gemm_bf16f32_rvv``, the same function the C++ tests and the
benchmark exercise. No kernel body lives in a Python string.

Inductor blocks the frozen weight as ``[N/Nr, K, Nr]`` with ``Nr = block_n``; we set
``Nr`` to the block width the kernels are tuned for at the detected VLEN
(``CpuInfo.block_n``, from the C ABI: one e32/LMUL=8 register group, 64 at VLEN 256).
"""
from __future__ import annotations


import torch
import torch._inductor.lowering  # noqa: F401  (must precede codegen.cpp_*: circular-import trap)
from torch._inductor.codegen import cpp_micro_gemm as mg
from torch._inductor.codegen.cpp_template_kernel import CppTemplateKernel

from .. import cpu
from . import kernel_marker
from ..paths import headers_digest
from .vec_isa import VecRVV

# Rows per register tile of the M >= 2 kernel (see csrc/README.md for the counts).
GEMM_BLOCK_M = 6


class _RVVBF16MicroGemm(mg.CppMicroGemm):
    KERNEL_HEADER = "rvv_inductor/rvv/micro_gemm_bf16.h"
    VARIANT = ""

    TEMPLATE_ENTRY = r"""
{{marker}}: C[M,N] (+)= A[M,K] * B[K,N],
// A bf16 (lda), B one [K][Nr] block of the packed weight (ldb), C fp32 (ldc).
#include "{{header}}"
{{declare_kernel}} {
    rvv_inductor::micro_gemm_bf16f32_rvv(A, B, C, M, N, K, lda, ldb, ldc, accum);
}
"""

    def codegen_define(self, kernel: CppTemplateKernel) -> str:
        options = {
            "declare_kernel": self.get_kernel_declaration(),
            "header": self.KERNEL_HEADER,
            "marker": kernel_marker.line(self.VARIANT, headers_digest()),
            **self.get_common_options(),
        }
        return mg.KernelTemplate._template_from_string(self.TEMPLATE_ENTRY).render(options)


class CppMicroGemmRVVBF16Gemv(_RVVBF16MicroGemm):
    VARIANT = "GEMV 1xNr"


class CppMicroGemmRVVBF16Gemm(_RVVBF16MicroGemm):
    VARIANT = f"GEMM {GEMM_BLOCK_M}xNr"


def _static(kwargs) -> bool:
    return not kwargs.get("dynamic_M", False)


def _check_gemv(config, m, n, k, alpha, num_threads, **kwargs) -> bool:
    return _static(kwargs) and m == 1 and alpha == 1 and isinstance(kwargs.get("vec_isa"), VecRVV)


def _check_gemm(config, m, n, k, alpha, num_threads, **kwargs) -> bool:
    return _static(kwargs) and m >= 2 and alpha == 1 and isinstance(kwargs.get("vec_isa"), VecRVV)


def configs_for(info: cpu.CpuInfo) -> dict[type, list[mg.CppMicroGemmConfig]]:
    nr = info.block_n

    def cfg(block_m, check):
        return mg.CppMicroGemmConfig(
            torch.bfloat16, torch.bfloat16, torch.float, torch.float, VecRVV,
            mg.GemmBlocking(block_m, nr, 1), check)

    return {
        CppMicroGemmRVVBF16Gemv: [cfg(1, _check_gemv)],
        CppMicroGemmRVVBF16Gemm: [cfg(GEMM_BLOCK_M, _check_gemm)],
    }


RVV_MICRO_GEMM_CLASSES = (CppMicroGemmRVVBF16Gemv, CppMicroGemmRVVBF16Gemm)
