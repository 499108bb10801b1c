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
  batching (defined in ``ops.py``, re-exported here). Its CPU kernel is C++
  (``csrc/torch_ops/attention_ops.cpp`` in librvv_inductor_ops.so, calling the core's
  ``rvv_attention_varlen_bf16``; ctypes where that library is missing, ``ops.kernels()``).
  It has no Inductor lowering: a compiled layer calls it as one extern op. And
  ``paged_attention_forward``, the "paged|rvv" attention function that calls it from
  transformers' paged KV cache (``serve --continuous-batching`` uses it).
"""
from __future__ import annotations

import contextlib

import torch

from . import ops  # first: it defines the rvv_inductor library, varlen_attention included

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
# The op's schema, checks, reference and fake kernel are defined in ops.py (the schema must
# exist before librvv_inductor_ops.so, which holds its C++ kernel, loads); re-exported here.
_check_varlen = ops._check_varlen
_varlen_attention_fake = ops._varlen_attention_fake
varlen_attention_reference = ops.varlen_attention_reference
varlen_attention = ops.varlen_attention
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
