"""Decode attention on the C++ kernel ``csrc/rvv_inductor/attention.h``.

Three pieces:

* ``rvv_inductor::decode_attention(q, k, v, mask?, scale) -> out``: a custom op with
  SDPA's semantics for transformers' layouts: q ``[B, H, T, D]``, k/v the KV cache
  ``[B, Hkv, L, D]`` (grouped-query heads *not* repeated), mask bool ``[B, 1|H, T, L]``
  (True = attend) or None, out ``[B, T, H, D]`` (what transformers' attention functions
  return). All BF16. Eagerly it is FP32 math in torch (the reference); a row whose mask is
  all False gives zeros (SDPA gives NaN).
* Its Inductor lowering (installed by ``enable()`` on a CPU with V): one generated kernel
  that includes ``attention.h`` and calls ``rvv_inductor::attention_bf16``, so an
  AOTInductor package runs it with no ATen call. It skips masked cache positions, so a
  static cache of L positions with n filled costs ~n, and it reads each K/V row once per
  group of query heads instead of a ``repeat_kv`` copy. Other cases (not BF16, dynamic
  shapes, no V) fall back to the op's eager kernel.
* ``use_in(model)``: a context manager that makes a transformers model call the op
  (``AttentionInterface`` "rvv", with SDPA's boolean masks); ``export`` uses it.
* ``rvv_inductor::varlen_attention(q, k, v, cu_q, cu_k, scale, window) -> out``: attention
  over a packed batch of variable-length sequences, the layout of transformers' continuous
  batching, on the C++ kernel through the core library (``attention_varlen`` in
  ``linear.h``), and ``paged_attention_forward``, the "paged|rvv" attention function that
  calls it from transformers' paged KV cache (``serve --continuous-batching`` uses it).
"""
from __future__ import annotations

import contextlib
import ctypes

import torch

from . import _native

NAME = "rvv"  # the transformers attention implementation name
_lib = torch.library.Library("rvv_inductor", "FRAGMENT")
_lib.define("decode_attention(Tensor q, Tensor k, Tensor v, Tensor? mask, float scale) -> Tensor")


def _check(q, k, v, mask):
    torch._check(q.dim() == 4 and k.dim() == 4 and v.dim() == 4,
                 lambda: f"decode_attention: q, k, v must be 4-D, got {q.dim()}, {k.dim()}, {v.dim()}")
    B, H, T, D = q.shape
    torch._check(k.shape == v.shape and k.shape[0] == B and k.shape[3] == D,
                 lambda: f"decode_attention: k {tuple(k.shape)} / v {tuple(v.shape)} do not match q {tuple(q.shape)}")
    torch._check(H % k.shape[1] == 0, lambda: f"decode_attention: {H} query heads, {k.shape[1]} kv heads")
    if mask is not None:
        torch._check(mask.dtype == torch.bool and mask.dim() == 4,
                     lambda: f"decode_attention: mask must be a 4-D bool tensor, got {mask.dtype} {mask.dim()}-D")


@torch.library.impl(_lib, "decode_attention", "CompositeExplicitAutograd")
def _decode_attention_eager(q, k, v, mask, scale):
    _check(q, k, v, mask)
    g = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(g, dim=1)
    vf = v.float().repeat_interleave(g, dim=1)
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # an all-False row: zeros, as the kernel
    return torch.matmul(p, vf).transpose(1, 2).to(q.dtype).contiguous()


@torch.library.register_fake("rvv_inductor::decode_attention")
def _decode_attention_fake(q, k, v, mask, scale):
    _check(q, k, v, mask)
    B, H, T, D = q.shape
    return q.new_empty(B, T, H, D)


decode_attention = torch.ops.rvv_inductor.decode_attention.default


# ---------------------------------------------------------------- transformers
def attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                      is_causal=None, **kwargs):
    """A transformers attention function (the signature of ``sdpa_attention_forward``)."""
    # lazy: transformers; enable() imports this module and must not load it
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    mask_ok = attention_mask is None or (attention_mask.dtype == torch.bool and attention_mask.dim() == 4)
    causal_prefill = attention_mask is None and query.shape[2] > 1 and (
        is_causal if is_causal is not None else getattr(module, "is_causal", True))
    if (dropout and module.training) or not mask_ok or causal_prefill or query.dtype != torch.bfloat16 \
            or kwargs.get("output_attentions", False):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return decode_attention(query, key.to(query.dtype), value.to(query.dtype), attention_mask, float(scale)), None


# ---------------------------------------------------------------- packed variable-length batches
_lib.define("varlen_attention(Tensor q, Tensor k, Tensor v, Tensor cu_q, Tensor cu_k, float scale, int window) -> Tensor")


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


@torch.library.impl(_lib, "varlen_attention", "CPU")
def _varlen_attention_cpu(q, k, v, cu_q, cu_k, scale, window):
    _check_varlen(q, k, v, cu_q, cu_k, window)
    if not (q.dtype == k.dtype == v.dtype == torch.bfloat16):
        return varlen_attention_reference(q, k, v, cu_q, cu_k, scale, window)
    # The kernel wants D contiguous and int32 offsets; anything else is copied once here.
    q, k, v = (t if t.stride(2) == 1 else t.contiguous() for t in (q, k, v))
    cu_q, cu_k = (c.to(torch.int32).contiguous() for c in (cu_q, cu_k))
    out = torch.empty(q.shape, dtype=torch.bfloat16)
    a = _native.VarlenAttention(
        q=q.data_ptr(), q_st=q.stride(0), q_sh=q.stride(1), k=k.data_ptr(), k_sl=k.stride(0), k_sh=k.stride(1),
        v=v.data_ptr(), v_sl=v.stride(0), v_sh=v.stride(1), cu_q=cu_q.data_ptr(), cu_k=cu_k.data_ptr(),
        out=out.data_ptr(), S=cu_q.shape[0] - 1, Tq=q.shape[0], Lk=k.shape[0], H=q.shape[1], Hkv=k.shape[1],
        D=q.shape[2], window=int(window), scale=float(scale))
    _native.check(_native.lib().rvv_attention_varlen_bf16(ctypes.byref(a), torch.get_num_threads()),
                  "varlen_attention", ValueError)
    return out


@torch.library.register_fake("rvv_inductor::varlen_attention")
def _varlen_attention_fake(q, k, v, cu_q, cu_k, scale, window):
    _check_varlen(q, k, v, cu_q, cu_k, window)
    return q.new_empty(q.shape)


varlen_attention = torch.ops.rvv_inductor.varlen_attention.default
PAGED_NAME = "paged|rvv"  # what continuous batching calls NAME: transformers prefixes "paged|"


def paged_attention_forward(module, query, key, value, attention_mask, scaling=None, cache=None,
                            cu_seq_lens_q=None, cu_seq_lens_k=None, **kwargs):
    """transformers' paged attention function for continuous batching (the signature of
    ``sdpa_attention_paged_forward``): writes the new K/V into the paged cache, reads each
    request's context back, and attends each request's queries to its own keys only. No
    mask is built for "paged|rvv" (it is not a mask interface), so this needs the
    cumulative sequence lengths, which continuous batching always passes."""
    if cu_seq_lens_q is None or cu_seq_lens_k is None:
        raise ValueError("rvv paged attention needs cu_seq_lens_q / cu_seq_lens_k (transformers' continuous "
                         "batching passes them); use attn_implementation 'rvv' outside continuous batching")
    window = int(getattr(module, "sliding_window", None) or 0)
    if isinstance(cu_seq_lens_k, dict):
        cu_seq_lens_k = cu_seq_lens_k["sliding_attention" if window else "full_attention"]
    if cache is not None:
        # A compiled layer's cache is its own view (layer_regions._PagedLayerKV), which needs
        # no index: not reading module.layer_idx keeps one graph for every layer.
        layer_idx = None if getattr(cache, "per_layer", False) else module.layer_idx
        key, value = cache.update(key_states=key, value_states=value, layer_idx=layer_idx,
                                  read_index=kwargs["read_index"], write_index=kwargs["write_index"])
    else:  # [1, Hkv, Lk, D] -> [Lk, Hkv, D]
        key, value = key[0].transpose(0, 1), value[0].transpose(0, 1)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    q = query[0].transpose(0, 1)  # [1, H, Tq, D] -> [Tq, H, D], a view
    out = varlen_attention(q, key.to(q.dtype), value.to(q.dtype), cu_seq_lens_q, cu_seq_lens_k, float(scale), window)
    return out.unsqueeze(0), None


_registered = False


def register() -> None:
    """Register "rvv" with transformers' attention and mask interfaces, and "paged|rvv"
    with its attention interface only (idempotent)."""
    global _registered
    if _registered:
        return
    # lazy: transformers; enable() imports this module and must not load it
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention_forward)
    AttentionInterface.register(PAGED_NAME, paged_attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _registered = True


@contextlib.contextmanager
def use_in(model):
    """Within the block, ``model`` (a transformers model) attends through the op."""
    register()
    configs = {id(c): c for c in (model.config, model.config.get_text_config())}.values()
    saved = [(c, c._attn_implementation) for c in configs]
    try:
        for c, _ in saved:
            c._attn_implementation = NAME
        yield
    finally:
        for c, impl in saved:
            c._attn_implementation = impl
