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

``varlen_attention(q[Tq, H, D], k[Lk, Hkv, D], v[Lk, Hkv, D], cu_q[S+1], cu_k[S+1], scale,
window) -> out[Tq, H, D]``: attention over a packed batch of variable-length sequences
(continuous batching's layout; ``attention.paged_attention_forward`` calls it, and
``attention`` re-exports it). Its schema, checks, FP32 reference and fake kernel live here
so that the schema exists before librvv_inductor_ops.so loads; its C++ kernel is
``csrc/torch_ops/attention_ops.cpp`` (BF16 on the core's ``rvv_attention_varlen_bf16``,
other dtypes on a scalar reference), its ctypes kernel ``_varlen_attention_ctypes`` below.
It has no Inductor lowering: inside a compiled graph it is one extern call of the kernel.
"""
from __future__ import annotations

import ctypes
import logging

import torch

from . import _native, packed, quantized

log = logging.getLogger("rvv_inductor")

_lib = torch.library.Library("rvv_inductor", "DEF")
_lib.define("linear_packed(Tensor x, Tensor wp, Tensor? bias, int n) -> Tensor")
_lib.define("linear_packed_q(Tensor x, Tensor wq, Tensor? bias, int n, int fmt, int group_size, int scale_dtype, "
            "int zero_points, int nb, int options=0) -> Tensor")
_lib.define("varlen_attention(Tensor q, Tensor k, Tensor v, Tensor cu_q, Tensor cu_k, float scale, int window) "
            "-> Tensor")


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


def _check_varlen(q, k, v, cu_q, cu_k, window):
    torch._check(q.dim() == 3 and k.dim() == 3 and k.shape == v.shape and q.shape[2] == k.shape[2],
                 lambda: f"varlen_attention: q [Tq, H, D], k/v [Lk, Hkv, D] expected, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    torch._check(q.shape[1] % k.shape[1] == 0, lambda: f"varlen_attention: {q.shape[1]} heads, {k.shape[1]} kv heads")
    torch._check(cu_q.dim() == 1 and cu_q.shape == cu_k.shape and cu_q.shape[0] >= 1,
                 lambda: f"varlen_attention: cu_q {tuple(cu_q.shape)} / cu_k {tuple(cu_k.shape)}")
    torch._check(window >= 0, lambda: f"varlen_attention: window {window} < 0")


def varlen_attention_reference(q, k, v, cu_q, cu_k, scale, window):
    """The definition in torch, FP32: query j of a sequence with nq queries and nk keys
    attends keys [0, nk - nq + j] of its own sequence (the last ``window`` of them when
    window > 0); rows past cu_q[-1] are zeros. For dtypes the kernel does not take."""
    out = torch.zeros(q.shape, dtype=q.dtype)
    g = q.shape[1] // k.shape[1]
    cq, ck = cu_q.tolist(), cu_k.tolist()
    for s in range(len(cq) - 1):
        nq, nk = cq[s + 1] - cq[s], ck[s + 1] - ck[s]
        if nq == 0:
            continue
        torch._check(nk >= nq, lambda: f"varlen_attention: sequence {s} has {nq} queries but {nk} keys")
        qs = q[cq[s]:cq[s + 1]].float().transpose(0, 1)                              # [H, nq, D]
        ks = k[ck[s]:ck[s + 1]].float().repeat_interleave(g, dim=1).transpose(0, 1)  # [H, nk, D]
        vs = v[ck[s]:ck[s + 1]].float().repeat_interleave(g, dim=1).transpose(0, 1)
        last = torch.arange(nq).unsqueeze(1) + (nk - nq)                             # [nq, 1]
        pos = torch.arange(nk).unsqueeze(0)
        allowed = (pos <= last) & ((pos > last - window) if window > 0 else True)
        sc = (qs @ ks.transpose(1, 2)) * scale
        p = torch.softmax(sc.masked_fill(~allowed, float("-inf")), dim=-1)
        out[cq[s]:cq[s + 1]] = (p @ vs).transpose(0, 1).to(q.dtype)
    return out


def _varlen_attention_ctypes(q, k, v, cu_q, cu_k, scale, window):
    """The Python kernel: the core's rvv_attention_varlen_bf16 through ctypes for BF16,
    ``varlen_attention_reference`` otherwise."""
    _check_varlen(q, k, v, cu_q, cu_k, window)
    if not (q.dtype == k.dtype == v.dtype == torch.bfloat16):
        return varlen_attention_reference(q, k, v, cu_q, cu_k, scale, window)
    # The kernel wants D contiguous and int32 offsets; anything else is copied once here.
    q, k, v = (t if t.stride(2) == 1 else t.contiguous() for t in (q, k, v))
    cu_q, cu_k = (c.to(torch.int32).contiguous() for c in (cu_q, cu_k))
    out = torch.empty(q.shape, dtype=torch.bfloat16)
    if out.numel() == 0:  # no rows (an empty tensor has no data pointer for the core)
        return out
    a = _native.VarlenAttention(
        q=q.data_ptr(), q_st=q.stride(0), q_sh=q.stride(1), k=k.data_ptr(), k_sl=k.stride(0), k_sh=k.stride(1),
        v=v.data_ptr(), v_sl=v.stride(0), v_sh=v.stride(1), cu_q=cu_q.data_ptr(), cu_k=cu_k.data_ptr(),
        out=out.data_ptr(), S=cu_q.shape[0] - 1, Tq=q.shape[0], Lk=k.shape[0], H=q.shape[1], Hkv=k.shape[1],
        D=q.shape[2], window=int(window), scale=float(scale))
    _native.check(_native.lib().rvv_attention_varlen_bf16(ctypes.byref(a), torch.get_num_threads()),
                  "varlen_attention", ValueError)
    return out


if _CPP_MISSING:
    torch.library.impl(_lib, "varlen_attention", "CPU")(_varlen_attention_ctypes)


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


@torch.library.register_fake("rvv_inductor::varlen_attention")
def _varlen_attention_fake(q, k, v, cu_q, cu_k, scale, window):
    _check_varlen(q, k, v, cu_q, cu_k, window)
    return q.new_empty(q.shape)


linear_packed = torch.ops.rvv_inductor.linear_packed.default
linear_packed_q = torch.ops.rvv_inductor.linear_packed_q.default
varlen_attention = torch.ops.rvv_inductor.varlen_attention.default
