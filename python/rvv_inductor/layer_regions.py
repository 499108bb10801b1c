"""``compile_linears(model, compile_layers=True)``: every repeated block of the model (the
decoder layers of a transformers model) runs as one compiled region around its packed
Linear layers.

In eager decode, the work between the Linear kernels (RMSNorm, RoPE, the KV-cache update,
attention, SiLU, residual adds) is dozens of ATen calls per layer, each dispatched from
transformers' Python. Compiled per layer, it is a few generated kernels and one Python
call per layer; the Linear layers trace into the same graph (their ops are graph nodes:
``linear_packed`` lowered to the RVV template, ``linear_packed_q`` an extern call of its
C++ kernel) and keep their packed weights as graph inputs, so weight updates are seen
without recompiling. Attention goes through ``rvv_inductor::decode_attention``
(attention.py), which ``enable()`` lowers to the RVV kernel of ``csrc/rvv_inductor/attention.h``
that skips the unfilled positions of a static cache.

One graph for every layer: each block's ``forward`` is replaced, on the instance, by a
small eager step (``_region_forward``) that hands the layer its own slice of the KV cache
(``_LayerKV`` for a transformers ``Cache``, ``_PagedLayerKV`` for continuous batching's
paged cache) and calls one compiled function shared by all blocks. Without it Dynamo
specialises each layer on its index (``cache.layers[self.layer_idx]``): a model of L
layers compiled L copies of the same code (84 graphs and ~22 min of emulated compile at
28 layers). With it the graph count does not grow with depth: the blocks differ only in
their weights, which are graph inputs guarded by shape and dtype. The layer index, which
transformers' attention still reads and passes to the cache view (who ignores it), is
traced as an unspecialised int (``allow_unspec_int_on_nn_module``): at most one recompile
makes it dynamic. Prompt lengths and cache lengths become dynamic after their first change
(Dynamo's automatic dynamic shapes), so after a short warm-up a mixed workload compiles
nothing new. Inductor's persistent caches (FX graph and kernels, on by default) make a
restart load the graphs instead of compiling them.
"""
from __future__ import annotations

import types

import torch

from . import attention, cpu


def repeated_blocks(model: torch.nn.Module, packed_types: tuple[type, ...]) -> list[tuple[str, torch.nn.Module]]:
    """(name, module) of each item of an nn.ModuleList whose items hold a packed Linear: the
    decoder layers of a transformers model, in order."""
    out = []
    for name, mod in model.named_modules():
        if not isinstance(mod, torch.nn.ModuleList):
            continue
        for i, item in enumerate(mod):
            if any(isinstance(m, packed_types) for m in item.modules()):
                out.append((f"{name}.{i}" if name else str(i), item))
    return out


def _use_rvv_attention(model: torch.nn.Module) -> bool:
    """Make a transformers model attend through rvv_inductor::decode_attention (True), or
    leave it (False: not a transformers model with an attention-implementation setting)."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "_attn_implementation"):
        return False
    attention.register()
    configs = {id(c): c for c in (config, getattr(config, "get_text_config", lambda: config)())}.values()
    for c in configs:
        c._attn_implementation = attention.NAME
    return True


# Graphs that the recompile limits must leave room for: decode, the first prompt length,
# prompts of dynamic length, the same under continuous batching (packed batches of any
# token count), the recompile that makes the layer index dynamic, one after an in-place
# weight change (its sync runs eagerly), layers of another Linear format mix (a GGUF K-quant
# file gives some layers Q6_K where others have Q4_K), and slack. Independent of depth.
MAX_GRAPHS = 32


class _LayerKV:
    """One layer of a transformers ``Cache``, as the attention of that layer sees it: its
    ``update(k, v, layer_idx, ...)`` goes to the layer this view was made for and ignores
    ``layer_idx``, so the compiled region does not index a list with it."""

    def __init__(self, layer) -> None:
        self.layer = layer

    def update(self, key_states, value_states, layer_idx=None, *args, **kwargs):
        return self.layer.update(key_states, value_states, *args, **kwargs)


class _PagedLayerKV:
    """One full-attention layer of continuous batching's ``PagedAttentionCache``: its K/V
    tensors and its layer group picked outside the compiled region. ``update`` writes the
    new tokens' K/V at ``write_index`` and reads the batch's context back at ``read_index``
    (each [tokens, kv heads, head dim]), as the paged cache does for such a layer."""

    per_layer = True  # attention.paged_attention_forward: no layer index to pass

    def __init__(self, cache, layer_idx: int) -> None:
        group, in_group = cache.layer_index_to_group_indices[layer_idx]
        self.group = group
        self.k_cache, self.v_cache = cache.key_cache[in_group], cache.value_cache[in_group]

    def update(self, key_states, value_states, layer_idx=None, read_index=None, write_index=None):
        k = key_states.transpose(1, 2).squeeze(0)   # [1, Hkv, T, D] -> [T, Hkv, D]
        v = value_states.transpose(1, 2).squeeze(0)
        read, write = read_index[self.group], write_index[self.group]
        self.k_cache.index_copy_(0, write, k)
        self.v_cache.index_copy_(0, write, v)
        if read.numel() == 0:  # only prompts without cached context: their own K/V is all
            return k, v
        return torch.index_select(self.k_cache, 0, read), torch.index_select(self.v_cache, 0, read)


def _paged_view(cache, layer_idx: int):
    """A ``_PagedLayerKV`` for that layer, or None where the paged cache is not the one it
    knows (sliding-window layers, another transformers): the cache is then passed as is."""
    try:
        if cache.sliding_windows[layer_idx] != 1:
            return None
        return _PagedLayerKV(cache, layer_idx)
    except (AttributeError, IndexError, KeyError, TypeError):
        return None


def _cache_view(cache, layer_idx: int):
    """A ``_LayerKV`` of a transformers ``Cache`` (its layers made as its ``update`` would
    make them), or None where there is no per-layer object to hand over (offloading)."""
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list) or getattr(cache, "offloading", False):
        return None
    make = getattr(cache, "layer_class_to_replicate", None)
    while len(layers) <= layer_idx and make is not None:
        layers.append(make())
    return _LayerKV(layers[layer_idx]) if layer_idx < len(layers) else None


def _step(block, args, kwargs):
    """The compiled region: one decoder layer's forward (its class's, not the instance's
    ``forward``, which is ``_region_forward``)."""
    return type(block).forward(block, *args, **kwargs)


_compiled_step = None


def _region_forward(self, *args, **kwargs):
    """A compiled block's ``forward``: the layer's cache view, then the shared graph."""
    idx = self._rvv_layer_index
    pkv = kwargs.get("past_key_values")
    if pkv is not None and not isinstance(pkv, _LayerKV):
        view = _cache_view(pkv, idx)
        if view is not None:
            kwargs["past_key_values"] = view
    paged = kwargs.get("cache")
    if paged is not None and hasattr(paged, "layer_index_to_group_indices"):
        view = _paged_view(paged, idx)
        if view is not None:
            kwargs["cache"] = view
    with torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True):
        return _compiled_step(self, args, kwargs)


def compile_layers(model: torch.nn.Module, packed_types: tuple[type, ...]) -> tuple[list[str], bool]:
    """Make every repeated block of ``model`` run as one compiled region, all blocks through
    one compiled function (compiled at the first call); returns the names of the blocks and
    whether attention now runs through the RVV op. Nothing is compiled on a CPU without V
    (the layers would only add compile time)."""
    global _compiled_step
    if not cpu.effective().has_v:
        return [], False
    blocks = repeated_blocks(model, packed_types)
    if not blocks:
        return [], False
    rvv_attention = _use_rvv_attention(model)
    dc = torch._dynamo.config
    dc.recompile_limit = max(dc.recompile_limit, MAX_GRAPHS)
    dc.accumulated_recompile_limit = max(dc.accumulated_recompile_limit, 2 * MAX_GRAPHS)
    if _compiled_step is None:
        _compiled_step = torch.compile(_step)
    for name, block in blocks:
        # The index the layer's attention passes its cache (transformers' layer_idx), else
        # its place in the list.
        block._rvv_layer_index = next((m.layer_idx for m in block.modules() if isinstance(getattr(m, "layer_idx", None), int)),
                                      int(name.rsplit(".", 1)[-1]))
        block.forward = types.MethodType(_region_forward, block)
    return [name for name, _ in blocks], rvv_attention


def is_compiled(block: torch.nn.Module) -> bool:
    """Whether ``compile_layers`` made ``block`` a compiled region."""
    fwd = block.__dict__.get("forward")
    return getattr(fwd, "__func__", None) is _region_forward
