"""The ``rvv_inductor::linear_packed`` operator: Linear on an already-packed BF16 weight.

``linear_packed(x[M, K], wp[ceil(N/nb), K, nb], bias[N]?, n) -> y[M, N]`` (all bf16).
Eagerly it runs the C++ dispatcher (RVV or the scalar reference). Under torch.compile
with ``rvv_inductor.enable()``, Inductor lowers it to the C++ GEMM template with the RVV
micro-GEMM, reading ``wp`` in place: one generated kernel, no per-call weight copy, and
the weight stays a graph *input*, so in-place updates are seen without recompiling.

``linear_packed_q(x[M, K], wq[bytes] uint8, bias[N]?, n, fmt, group_size, scale_dtype,
zero_points, nb, options=0) -> y[M, N]``: the same for an INT8/INT4 weight quantized and
packed by ``quantized.py`` (the ints are the C ABI's layout fields; ``options`` its
``rvv_linear_packed_opts`` bits: 2 = INT8 activations for M >= 2, ``policy.X8_GEMM_OPTION``). It has no Inductor lowering:
inside a compiled graph it is one extern call of the C++ kernel (no graph break).
"""
from __future__ import annotations

import torch

from . import packed, quantized

_lib = torch.library.Library("rvv_inductor", "DEF")
_lib.define("linear_packed(Tensor x, Tensor wp, Tensor? bias, int n) -> Tensor")


@torch.library.impl(_lib, "linear_packed", "CPU")
def _linear_packed_cpu(x, wp, bias, n):
    return packed.linear(x, wp, bias, n)


@torch.library.register_fake("rvv_inductor::linear_packed")
def _linear_packed_fake(x, wp, bias, n):
    torch._check(x.dim() == 2 and wp.dim() == 3 and x.shape[1] == wp.shape[1],
                 lambda: f"linear_packed: x {tuple(x.shape)} does not match packed weight {tuple(wp.shape)}")
    return x.new_empty(x.shape[0], n)


linear_packed = torch.ops.rvv_inductor.linear_packed.default


_lib.define("linear_packed_q(Tensor x, Tensor wq, Tensor? bias, int n, int fmt, int group_size, int scale_dtype, "
            "int zero_points, int nb, int options=0) -> Tensor")


@torch.library.impl(_lib, "linear_packed_q", "CPU")
def _linear_packed_q_cpu(x, wq, bias, n, fmt, group_size, scale_dtype, zero_points, nb, options=0):
    lay = quantized.layout(fmt, group_size, scale_dtype, bool(zero_points), n, x.shape[1], nb)
    return quantized.linear(x, wq, bias, lay, options)


@torch.library.register_fake("rvv_inductor::linear_packed_q")
def _linear_packed_q_fake(x, wq, bias, n, fmt, group_size, scale_dtype, zero_points, nb, options=0):
    torch._check(x.dim() == 2 and wq.dim() == 1,
                 lambda: f"linear_packed_q: x {tuple(x.shape)} / packed weight {tuple(wq.shape)}")
    return x.new_empty(x.shape[0], n)


linear_packed_q = torch.ops.rvv_inductor.linear_packed_q.default
