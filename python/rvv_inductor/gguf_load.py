"""``load_gguf(path)``: a transformers Qwen2/Llama model from a GGUF file, its Q8_0/Q4_0
Linear weights kept as the file's own blocks, packed bit for bit (no BF16 round trip).

The file is read with ``gguf`` (Debian's python3-gguf). Per tensor type:

* Q8_0 (blocks of 32: FP16 d, 32 int8): an ``RVVQuantLinear`` INT8, group 32, FP16 scales;
* Q4_0 (blocks of 32: FP16 d, 16 bytes; byte j holds element j in its low nibble and
  element j + 16 in its high one; w = (q - 8)·d): INT4 symmetric, group 32, FP16 scales;
* BF16, F16, F32: loaded into the model in BF16 (F16 and F32 are rounded to BF16); Linear
  layers in these types stay ``nn.Linear`` (``compile_linears(model)`` packs them);
  embedding and norms likewise, whatever their type (quantized ones dequantized).

Anything else (another architecture, another tensor type, a truncated or corrupt file, a
tensor that does not fit the model) is a ``GGUFError`` with the name of what is wrong.
Llama's q/k rows, which llama.cpp's converter permutes for its RoPE, are permuted back
(rows only: blocks run along K and stay intact).
"""
from __future__ import annotations

import os

import numpy as np
import torch

from . import cpu, quantized
from ._native import RVV_DTYPE_F16, RVV_DTYPE_INT4, RVV_DTYPE_INT8

ARCHITECTURES = ("qwen2", "llama")
_LINEAR = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
           "ffn_down": "mlp.down_proj"}
_OTHER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


class GGUFError(ValueError):
    pass


def _gguf():
    try:
        import gguf
    except ImportError as e:
        raise GGUFError("load_gguf needs the gguf package (Debian: apt install python3-gguf)") from e
    return gguf


def _hf_name(name: str) -> str | None:
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit():
        i, kind, what = parts[1], parts[2], parts[3]
        if kind in _LINEAR:
            return f"model.layers.{i}.{_LINEAR[kind]}.{what}"
        if kind in _OTHER:
            return f"model.layers.{i}.{_OTHER[kind]}.{what}"
    return None


def _field(reader, key: str, required: bool = True, default=None):
    f = reader.get_field(key)
    if f is None:
        if required:
            raise GGUFError(f"GGUF metadata has no {key!r}")
        return default
    return f.contents()


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of llama.cpp's convert permute of q/k rows (any trailing dims)."""
    n = w.shape[0]
    return w.reshape(n_head, n // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _blocks(t, n: int, k: int):
    """(values int8 [n, k], scales f16-bits uint16 [n, k/32]) of a Q8_0/Q4_0 tensor."""
    gguf = _gguf()
    raw = np.asarray(t.data, dtype=np.uint8).reshape(n, -1)
    nblk = k // 32
    if t.tensor_type == gguf.GGMLQuantizationType.Q8_0:
        b = raw.reshape(n, nblk, 34)
        values = b[:, :, 2:].view(np.int8).reshape(n, k)
    else:
        b = raw.reshape(n, nblk, 18)
        nib = b[:, :, 2:]
        values = np.concatenate([nib & 0x0F, nib >> 4], axis=2).astype(np.int8).reshape(n, k)
    scales = np.ascontiguousarray(b[:, :, :2]).view(np.uint16).reshape(n, nblk)
    return values, scales


def _float(t) -> np.ndarray:
    gguf = _gguf()
    return np.asarray(gguf.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(
        [int(d) for d in reversed(t.shape)])


def load_gguf(path: str | os.PathLike):
    """The model of a Qwen2/Llama GGUF file (see the module docstring), in eval mode."""
    gguf = _gguf()
    import transformers

    from .regional import RVVQuantLinear

    path = os.fspath(path)
    try:
        reader = gguf.GGUFReader(path, "r")
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001  (numpy/struct errors of a short or corrupt file)
        raise GGUFError(f"{path}: not a readable GGUF file (truncated or corrupt?): {type(e).__name__}: {e}") from None
    size = os.path.getsize(path)
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size or t.data.nbytes != t.n_bytes:
            raise GGUFError(f"{path}: tensor {t.name} ends past the end of the file (truncated?)")

    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise GGUFError(f"{path}: architecture {arch!r} is not supported (only {', '.join(ARCHITECTURES)})")
    q = gguf.GGMLQuantizationType
    supported = {q.F32, q.F16, q.BF16, q.Q8_0, q.Q4_0}
    tensors = {}
    for t in reader.tensors:
        if t.tensor_type not in supported:
            raise GGUFError(f"{path}: tensor {t.name} has type {t.tensor_type.name}; supported: "
                            + ", ".join(s.name for s in supported))
        hf = _hf_name(t.name)
        if hf is None:
            raise GGUFError(f"{path}: tensor {t.name} has no place in a {arch} model")
        tensors[hf] = t
    if "model.embed_tokens.weight" not in tensors:
        raise GGUFError(f"{path}: no token_embd.weight")

    hidden = int(_field(reader, f"{arch}.embedding_length"))
    n_head = int(_field(reader, f"{arch}.attention.head_count"))
    n_kv = int(_field(reader, f"{arch}.attention.head_count_kv", False, n_head))
    vocab = int(tensors["model.embed_tokens.weight"].shape[1])
    common = dict(hidden_size=hidden, intermediate_size=int(_field(reader, f"{arch}.feed_forward_length")),
                  num_hidden_layers=int(_field(reader, f"{arch}.block_count")), num_attention_heads=n_head,
                  num_key_value_heads=n_kv, vocab_size=vocab,
                  max_position_embeddings=int(_field(reader, f"{arch}.context_length", False, 2048)),
                  rms_norm_eps=float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", False, 1e-6)),
                  rope_theta=float(_field(reader, f"{arch}.rope.freq_base", False, 10000.0)),
                  tie_word_embeddings="lm_head.weight" not in tensors)
    if arch == "qwen2":
        config, cls = transformers.Qwen2Config(**common), transformers.Qwen2ForCausalLM
    else:
        config, cls = transformers.LlamaConfig(**common), transformers.LlamaForCausalLM
    model = cls(config).to(torch.bfloat16).eval()

    nb = cpu.effective().block_n
    state = {}
    for hf, t in tensors.items():
        heads = n_head if hf.endswith("q_proj.weight") or hf.endswith("q_proj.bias") else \
            n_kv if hf.endswith("k_proj.weight") or hf.endswith("k_proj.bias") else 0
        permute = arch == "llama" and heads
        if t.tensor_type in (q.Q8_0, q.Q4_0) and hf.endswith(".weight") and hf.rsplit(".", 2)[-2] in \
                {v.rsplit(".", 1)[-1] for v in _LINEAR.values()} | {"lm_head"}:
            mod_name = hf[:-len(".weight")]
            lin = model.get_submodule(mod_name)
            n, k = int(t.shape[1]), int(t.shape[0])
            if (n, k) != (lin.out_features, lin.in_features):
                raise GGUFError(f"{path}: {t.name} is [{n}, {k}], the model expects "
                                f"[{lin.out_features}, {lin.in_features}]")
            values, scales = _blocks(t, n, k)
            if permute:
                values, scales = _unpermute(values, heads), _unpermute(scales, heads)
            fmt = "int8" if t.tensor_type == q.Q8_0 else "int4"
            layer = RVVQuantLinear(k, n, lin.bias, nb, fmt, 32, "f16")
            lay = quantized.layout(RVV_DTYPE_INT8 if fmt == "int8" else RVV_DTYPE_INT4, 32, RVV_DTYPE_F16, False,
                                   n, k, nb)
            layer.packed_weight = quantized.pack_quantized(torch.from_numpy(np.ascontiguousarray(values)),
                                                           torch.from_numpy(np.ascontiguousarray(scales)).view(
                                                               torch.float16), None, lay)
            parent, _, child = mod_name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, layer)
            continue
        w = _float(t)
        if permute:
            w = _unpermute(w, heads)
        state[hf] = torch.from_numpy(np.ascontiguousarray(w)).to(torch.bfloat16)
    # biases of quantized layers: the module took lin.bias at construction; load them now
    direct = {hf for hf, t in tensors.items() if hf.endswith(".weight") and t.tensor_type in (q.Q8_0, q.Q4_0)
              and isinstance(model.get_submodule(hf[:-len(".weight")]), RVVQuantLinear)}
    for hf in list(state):
        mod_name, _, pname = hf.rpartition(".")
        mod = model.get_submodule(mod_name)
        if isinstance(mod, RVVQuantLinear) and pname == "bias":
            if mod.bias is None or tuple(mod.bias.shape) != tuple(state[hf].shape):
                raise GGUFError(f"{path}: {tensors[hf].name} does not fit the model")
            with torch.no_grad():
                mod.bias.copy_(state.pop(hf))
            direct.add(hf)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:
        raise GGUFError(f"{path}: tensors do not fit the {arch} model: {e}") from None
    missing = [m for m in missing if m not in direct]
    if config.tie_word_embeddings:
        missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise GGUFError(f"{path}: tensors missing from the file: {missing}; not in the model: {unexpected}")
    return model
