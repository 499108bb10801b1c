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

What it costs: Dynamo specialises each layer on its index (the KV cache it updates), so
each layer compiles its own graphs, one for decode and one for prompts (their length made
dynamic after the first two), sharing the generated code through Inductor's cache. The
per-function recompile limit is raised to fit them (``torch._dynamo.config.recompile_limit``).
"""
from __future__ import annotations

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


# Graphs per layer that the recompile limit must leave room for: decode, the first prompt
# length, prompts of dynamic length, one recompile after an in-place weight change (its
# sync runs eagerly), and slack.
GRAPHS_PER_LAYER = 6


def compile_layers(model: torch.nn.Module, packed_types: tuple[type, ...]) -> tuple[list[str], bool]:
    """Compile every repeated block of ``model`` in place (``nn.Module.compile``); returns
    the names of the compiled blocks and whether attention now runs through the RVV op.
    Nothing is compiled on a CPU without V (the layers would only add compile time)."""
    if not cpu.effective().has_v:
        return [], False
    blocks = repeated_blocks(model, packed_types)
    if not blocks:
        return [], False
    rvv_attention = _use_rvv_attention(model)
    dc = torch._dynamo.config
    dc.recompile_limit = max(dc.recompile_limit, GRAPHS_PER_LAYER * len(blocks))
    dc.accumulated_recompile_limit = max(dc.accumulated_recompile_limit, 2 * GRAPHS_PER_LAYER * len(blocks))
    for _, block in blocks:
        block.compile()
    return [name for name, _ in blocks], rvv_attention
