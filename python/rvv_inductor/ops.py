"""The ``rvv_inductor::linear_packed`` operator: Linear on an already-packed BF16 weight.

``linear_packed(x[..., K], wp[ceil(N/nb), K, nb], bias[N]?, n) -> y[..., N]`` (all bf16).
Eagerly it runs the C++ dispatcher (RVV or the scalar reference). Under torch.compile
with ``rvv_inductor.enable()``, Inductor lowers it (2-D x) to the C++ GEMM template with
the RVV micro-GEMM, reading ``wp`` in place: one generated kernel, no per-call weight
copy, and the weight stays a graph *input*, so in-place updates are seen without
recompiling.

``linear_packed_q(x[..., K], wq[bytes] uint8, bias[N]?, n, fmt, group_size, scale_dtype,
zero_points, nb, options=0) -> y[..., N]``: the same for an INT8/INT4 weight quantized and
packed by ``quantized.py`` (the ints are the C ABI's layout fields; ``options`` its
``rvv_linear_packed_opts`` bits: 2 = INT8 activations for M >= 2, ``policy.X8_GEMM_OPTION``). It has no Inductor lowering:
inside a compiled graph it is one extern call of the C++ kernel (no graph break).

The CPU kernels of both are C++ (``csrc/torch_ops/linear_ops.cpp``, librvv_inductor_ops.so
beside the core library): PyTorch's dispatcher calls the core directly, no Python on the
way. Where that library was not built (no LibTorch headers) or does not load, or with
``RVV_INDUCTOR_TORCH_OPS=0``, the kernels registered here are Python functions calling the
core through ctypes: the same results at a higher per-call cost. ``kernels()`` says which.
"""
from __future__ import annotations

import logging

import torch

from . import _native, packed, quantized

log = logging.getLogger("rvv_inductor")

_lib = torch.library.Library("rvv_inductor", "DEF")
_lib.define("linear_packed(Tensor x, Tensor wp, Tensor? bias, int n) -> Tensor")
_lib.define("linear_packed_q(Tensor x, Tensor wq, Tensor? bias, int n, int fmt, int group_size, int scale_dtype, "
            "int zero_points, int nb, int options=0) -> Tensor")


def _load_cpp_kernels() -> str:
    """Load librvv_inductor_ops.so (it registers the CPU kernels); the reason it was not
    loaded otherwise ("" when it was)."""
    path, why = _native.ops_library()
    if path is None:
        return why
    try:
        torch.ops.load_library(str(path))
    except OSError as e:  # a torch older than the stable ABI it targets, a missing dependency
        log.warning("rvv_inductor: %s does not load (%s); using the ctypes kernels", path, e)
        return f"{path} does not load: {e}"
    return ""


_CPP_MISSING = _load_cpp_kernels()


def kernels() -> str:
    """Which CPU kernels the operators run: "c++" (librvv_inductor_ops.so) or "ctypes (why)"."""
    return "c++" if not _CPP_MISSING else f"ctypes ({_CPP_MISSING})"


if _CPP_MISSING:
    @torch.library.impl(_lib, "linear_packed", "CPU")
    def _linear_packed_cpu(x, wp, bias, n):
        lead = x.shape[:-1]
        return packed.linear(x.reshape(-1, x.shape[-1]), wp, bias, n).reshape(*lead, n)

    @torch.library.impl(_lib, "linear_packed_q", "CPU")
    def _linear_packed_q_cpu(x, wq, bias, n, fmt, group_size, scale_dtype, zero_points, nb, options=0):
        lead = x.shape[:-1]
        lay = quantized.layout(fmt, group_size, scale_dtype, bool(zero_points), n, x.shape[-1], nb)
        if wq.dim() == 1 and wq.numel() != lay.bytes:  # as the C++ kernel: a buffer for another K
            raise quantized.QuantError(f"expected a uint8 buffer of {lay.bytes} bytes for [{n}, {lay.k}], "
                                       f"got {wq.numel()}")
        return quantized.linear(x.reshape(-1, x.shape[-1]), wq, bias, lay, options).reshape(*lead, n)


@torch.library.register_fake("rvv_inductor::linear_packed")
def _linear_packed_fake(x, wp, bias, n):
    torch._check(x.dim() >= 1 and wp.dim() == 3 and x.shape[-1] == wp.shape[1],
                 lambda: f"linear_packed: x {tuple(x.shape)} does not match packed weight {tuple(wp.shape)}")
    return x.new_empty(*x.shape[:-1], n)


@torch.library.register_fake("rvv_inductor::linear_packed_q")
def _linear_packed_q_fake(x, wq, bias, n, fmt, group_size, scale_dtype, zero_points, nb, options=0):
    torch._check(x.dim() >= 1 and wq.dim() == 1,
                 lambda: f"linear_packed_q: x {tuple(x.shape)} / packed weight {tuple(wq.shape)}")
    return x.new_empty(*x.shape[:-1], n)


linear_packed = torch.ops.rvv_inductor.linear_packed.default
linear_packed_q = torch.ops.rvv_inductor.linear_packed_q.default
