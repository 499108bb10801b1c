"""Small random transformers decoders for the emulated tests (one definition, not a copy per
test file): Qwen2 with random q/k/v biases (transformers initialises them to zero, which
would leave the bias path untested), Llama (no biases), or Qwen3 (heads of ``head_dim``,
which need not be hidden / heads; per-head q/k RMSNorm with random weights, not
transformers' ones, so that a q/k norm mix-up shows)."""
from __future__ import annotations

import torch


def random_decoder(arch: str, *, hidden: int, heads: int, kv_heads: int, vocab: int, max_positions: int,
                   init_range: float, tie: bool = False, layers: int = 2, seed: int = 0,
                   head_dim: int | None = None, intermediate: int | None = None):
    import transformers

    torch.manual_seed(seed)
    common = dict(hidden_size=hidden, intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                  max_position_embeddings=max_positions, tie_word_embeddings=tie, initializer_range=init_range)
    if arch == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
        for layer in model.model.layers:
            for p in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                torch.nn.init.normal_(p.bias, std=0.05)
    elif arch == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=head_dim or hidden // heads, **common))
        for layer in model.model.layers:
            for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm, layer.input_layernorm):
                torch.nn.init.normal_(norm.weight, mean=1.0, std=0.2)
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    return model
