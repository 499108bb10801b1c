"""``load_gguf(path)``: a transformers Qwen2/Qwen3/Llama model from a GGUF file, its quantized
Linear weights kept as the file's own blocks, packed bit for bit (no BF16 round trip).

The file is read with ``gguf`` (Debian's python3-gguf). Per tensor type:

* Q8_0 (blocks of 32: FP16 d, 32 int8): an ``RVVQuantLinear`` INT8, group 32, FP16 scales;
* Q4_0 (blocks of 32: FP16 d, 16 bytes; byte j holds element j in its low nibble and
  element j + 16 in its high one; w = (q - 8)·d): INT4 symmetric, group 32, FP16 scales;
* Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (GGUF block formats; a Q4_K_M or Q5_K_M file mixes
  them, and holds Q5_0 / Q5_1 where K is not a multiple of 256): an
  ``RVVQuantLinear`` of that format holding the file's blocks, rearranged for the kernels
  value for value at the file's bytes per weight (csrc/rvv_inductor/block_quant.h);
* BF16, F16, F32: loaded into the model in BF16 (F16 and F32 are rounded to BF16); Linear
  layers in these types stay ``nn.Linear`` (``compile_linears(model)`` packs them);
  embedding and norms likewise, whatever their type (quantized ones dequantized);
* a tied file (no ``output.weight``: Qwen2.5-0.5B/1.5B) whose ``token_embd`` is quantized
  (llama-quantize's K-quant mixes make it Q6_K): lm_head is an ``RVVQuantLinear`` of
  those blocks, as llama.cpp reads them for its output, and the embedding an
  ``RVVTiedEmbedding`` looking its rows up in them (no BF16 table: one copy of the
  vocabulary matrix, at the file's bytes per weight).

Anything else (another architecture, another tensor type, a truncated or corrupt file, a
tensor that does not fit the model) is a ``GGUFError`` with the name of what is wrong.
Llama's q/k rows, which llama.cpp's converter permutes for its RoPE, are permuted back
(rows only: blocks run along K and stay intact); Qwen2's and Qwen3's are not permuted.
Qwen3's head size is ``qwen3.attention.key_length`` (not necessarily hidden / heads) and
its per-head q/k RMSNorm weights (``attn_q_norm``, ``attn_k_norm``) load as the other norms.
"""
from __future__ import annotations

import functools
import os

import numpy as np
import torch
import transformers

try:
    import gguf
except ImportError as e:  # optional (python3-gguf): _gguf() says so when a file is loaded
    gguf, _GGUF_MISSING = None, e

from . import _native, cpu, gguf_checks, quantized
from ._native import RVV_DTYPE_F16, RVV_DTYPE_INT4, RVV_DTYPE_INT8
from .gguf_checks import ARCHITECTURES, GGUFError  # defined there: gguf_checks imports nothing of ours
from .policy import DEFAULT_ACTIVATIONS, check_activations
from .regional import RVVQuantLinear, RVVTiedEmbedding, compile_linears

SUPPORTED_TYPES = gguf_checks.SUPPORTED_TYPES  # the file types load_gguf reads (checked in gguf_checks)



@functools.cache
def _block_types() -> dict[str, str]:
    """GGUF type name -> weight format, for the block formats packed from the file's blocks
    as they are: every format of the library's table with a fixed record
    (weight_formats.inl, read through the C ABI), so a format added there loads here."""
    return {f["gguf_type"]: name for name, f in _native.weight_formats().items() if f["record_bytes"] > 0}

_LINEAR = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
           "ffn_down": "mlp.down_proj"}
_OTHER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
          "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}  # (the last two: qwen3)


def _gguf():
    if gguf is None:
        raise GGUFError("load_gguf needs the gguf package (Debian: apt install python3-gguf)") from _GGUF_MISSING
    return gguf


# GGUF tensor names outside the blocks -> transformers parameter names (and back).
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight"}
_TOP_GGUF = {hf: g for g, hf in _TOP.items()}


def _hf_name(name: str) -> str | None:
    if name in _TOP:
        return _TOP[name]
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


def _read(f, t, path) -> np.ndarray:
    """The tensor's bytes (uint8), read from the file (not mapped: only the tensor being
    loaded is in memory, and a file page never counts towards this process's RSS)."""
    buf = np.empty(int(t.n_bytes), dtype=np.uint8)
    f.seek(int(t.data_offset))
    if f.readinto(memoryview(buf)) != buf.nbytes:
        raise GGUFError(f"{path}: tensor {t.name} ends past the end of the file (truncated?)")
    return buf


def _bf16(raw: np.ndarray, t) -> torch.Tensor:
    """A BF16/F16/F32 tensor's bytes -> BF16 torch tensor in [rows, cols] order (F16 and
    F32 rounded to nearest even, BF16 as stored)."""
    gguf = _gguf()
    q = gguf.GGMLQuantizationType
    shape = [int(d) for d in reversed(t.shape)]
    if t.tensor_type == q.BF16:
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16).reshape(shape)
    if t.tensor_type == q.F16:
        return torch.from_numpy(raw.view(np.float16)).to(torch.bfloat16).reshape(shape)
    if t.tensor_type == q.F32:
        return torch.from_numpy(raw.view(np.float32)).to(torch.bfloat16).reshape(shape)
    # Q8_0/Q4_0 outside a Linear (embedding): dequantized in FP32, then BF16
    return torch.from_numpy(np.asarray(gguf.dequantize(raw, t.tensor_type), dtype=np.float32)).to(
        torch.bfloat16).reshape(shape)


def _gguf_name(hf: str) -> str:
    """The GGUF name of a transformers parameter (for error messages)."""
    if hf in _TOP_GGUF:
        return _TOP_GGUF[hf]
    parts = hf.split(".")
    if len(parts) >= 5 and parts[:2] == ["model", "layers"]:
        rest = ".".join(parts[3:-1])
        for g, h in list(_LINEAR.items()) + list(_OTHER.items()):
            if h == rest:
                return f"blk.{parts[2]}.{g}.{parts[-1]}"
    return hf


def _set_tensor(model, hf: str, value: torch.Tensor, path: str, gname: str) -> None:
    """Put ``value`` where the (meta) parameter ``hf`` is, after checking its shape."""
    mod_name, _, pname = hf.rpartition(".")
    mod = model.get_submodule(mod_name)
    old = mod._parameters.get(pname)
    if old is None:
        raise GGUFError(f"{path}: tensor {gname} has no place in this model")
    if tuple(old.shape) != tuple(value.shape):
        raise GGUFError(f"{path}: {gname} is {list(value.shape)}, the model expects {list(old.shape)}")
    mod._parameters[pname] = torch.nn.Parameter(value, requires_grad=False)


def _linear_for(model, hf: str, t, path: str):
    """The (meta) nn.Linear that GGUF weight ``t`` (transformers name ``hf``) replaces, after
    checking the tensor's shape and that the layer's bias, if it has one, is loaded."""
    mod_name = hf[:-len(".weight")]
    lin = model.get_submodule(mod_name)
    n, k = int(t.shape[1]), int(t.shape[0])
    if (n, k) != (lin.out_features, lin.in_features):
        raise GGUFError(f"{path}: {t.name} is [{n}, {k}], the model expects [{lin.out_features}, {lin.in_features}]")
    if lin.bias is not None and lin.bias.is_meta:
        raise GGUFError(f"{path}: {_gguf_name(mod_name + '.bias')} is missing from the file")
    return lin


def _replace_module(model, name: str, layer) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, layer)


def load_gguf(path: str | os.PathLike, *, activations: str = DEFAULT_ACTIVATIONS, compile_layers: bool = False):
    """The model of a Qwen2/Qwen3/Llama GGUF file (see the module docstring), in eval mode.

    ``activations``: how its quantized layers treat X at M >= 2 (prompt, batched decode),
    as in ``compile_linears``: "int8" (per 32 values, as llama.cpp does with these files),
    "bf16" (the FP path) or "auto" (default: int8 for Q4_0, Q4_1 and the K-quants, bf16
    for Q8_0).

    ``compile_layers=True``: the file's BF16/F16 Linears are packed too and every decoder
    layer runs as one compiled region, all layers through one shared graph
    (``compile_linears(model, compile_layers=True)``; nothing is compiled on a CPU without V).

    Memory: the model is built on the meta device and filled tensor by tensor, each read
    from the file into a buffer of its own size; Q8_0/Q4_0 Linear weights go from the
    file's blocks to the packed layout directly, BF16 tensors are used as stored. The peak
    is the loaded model plus the largest tensor's transients (for a Q4_0 weight: its bytes,
    its int8 values and its packed copy)."""
    check_activations(activations, "load_gguf")
    if not isinstance(compile_layers, bool):
        raise ValueError(f"load_gguf: compile_layers must be True or False, got {compile_layers!r}")
    gguf = _gguf()
    path = os.fspath(path)
    reader = gguf_checks.open_checked(path)  # layout, tensor types and metadata, before anything is built

    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise GGUFError(f"{path}: architecture {arch!r} is not supported (only {', '.join(ARCHITECTURES)})")
    q = gguf.GGMLQuantizationType
    tensors = {}
    for t in reader.tensors:
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
    elif arch == "qwen3":
        # head_dim from key_length (gguf_checks: checked against attn_k's rows, and
        # value_length equal to it), which need not be hidden // heads (Qwen3-0.6B: 16 heads
        # of 128 in a width of 1024); no q/k/v bias, per-head q/k RMSNorm
        head_dim = _field(reader, "qwen3.attention.key_length", False) or \
            _field(reader, "qwen3.attention.value_length", False) or hidden // n_head
        config = transformers.Qwen3Config(head_dim=int(head_dim), attention_bias=False, **common)
        cls = transformers.Qwen3ForCausalLM
    else:
        has_bias = any(h.endswith("_proj.bias") for h in tensors)
        config, cls = transformers.LlamaConfig(attention_bias=has_bias, **common), transformers.LlamaForCausalLM
    with torch.device("meta"):
        model = cls(config).to(torch.bfloat16)
    model.eval()
    emb_type = tensors["model.embed_tokens.weight"].tensor_type
    tied_packed = config.tie_word_embeddings and (emb_type.name in _block_types() or emb_type in (q.Q8_0, q.Q4_0))
    if tied_packed:  # token_embd is the output matrix too: packed once, as lm_head
        tensors["lm_head.weight"] = tensors.pop("model.embed_tokens.weight")

    nb = cpu.effective().block_n
    linear_names = {v.rsplit(".", 1)[-1] for v in _LINEAR.values()} | {"lm_head"}
    with open(path, "rb") as f:
        # biases first: a quantized layer is built with its bias
        order = sorted(tensors, key=lambda hf: not hf.endswith(".bias"))
        for hf in order:
            t = tensors[hf]
            heads = n_head if hf.endswith(("q_proj.weight", "q_proj.bias")) else \
                n_kv if hf.endswith(("k_proj.weight", "k_proj.bias")) else 0
            permute = arch == "llama" and heads
            raw = _read(f, t, path)
            is_linear_weight = hf.endswith(".weight") and hf.rsplit(".", 2)[-2] in linear_names
            if t.tensor_type.name in _block_types() and is_linear_weight:
                # Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: the file's blocks packed as they are, one
                # row of blocks per output channel (Llama's q/k rows permuted back as whole rows).
                lin = _linear_for(model, hf, t, path)
                n, k = lin.out_features, lin.in_features
                fmt = _block_types()[t.tensor_type.name]
                blocks = raw.reshape(n, -1)
                if permute:
                    blocks = _unpermute(blocks, heads)
                layer = RVVQuantLinear(k, n, lin.bias, nb, fmt, quantized.format_info(fmt)["super_rows"], "f16",
                                       activations)
                layer.packed_weight = quantized.pack_gguf_blocks(torch.from_numpy(np.ascontiguousarray(blocks)),
                                                                 layer._layout)
                del raw, blocks
                _replace_module(model, hf[:-len(".weight")], layer)
                continue
            if t.tensor_type in (q.Q8_0, q.Q4_0) and is_linear_weight:
                lin = _linear_for(model, hf, t, path)
                n, k = lin.out_features, lin.in_features
                values, scales = _blocks(type("T", (), {"data": raw, "tensor_type": t.tensor_type}), n, k)
                del raw
                if permute:
                    values, scales = _unpermute(values, heads), _unpermute(scales, heads)
                fmt = "int8" if t.tensor_type == q.Q8_0 else "int4"
                layer = RVVQuantLinear(k, n, lin.bias, nb, fmt, 32, "f16", activations)
                lay = quantized.layout(RVV_DTYPE_INT8 if fmt == "int8" else RVV_DTYPE_INT4, 32, RVV_DTYPE_F16, False,
                                       n, k, nb)
                layer.packed_weight = quantized.pack_quantized(
                    torch.from_numpy(np.ascontiguousarray(values)),
                    torch.from_numpy(np.ascontiguousarray(scales)).view(torch.float16), None, lay)
                del values, scales
                _replace_module(model, hf[:-len(".weight")], layer)
                continue
            w = _bf16(raw, t)
            if permute:
                w = torch.from_numpy(np.ascontiguousarray(_unpermute(w.view(torch.int16).numpy(), heads))).view(
                    torch.bfloat16)
            _set_tensor(model, hf, w.contiguous(), path, t.name)
            del raw, w
    if tied_packed:
        model.model.embed_tokens = RVVTiedEmbedding(model.model.embed_tokens, model.lm_head)
    elif config.tie_word_embeddings and not isinstance(model.lm_head, RVVQuantLinear):
        model.lm_head.weight = model.model.embed_tokens.weight
    # buffers computed at construction (RoPE frequencies) are on the meta device: rebuild
    for name, mod in list(model.named_modules()):
        if any(b is not None and b.is_meta for b in mod._buffers.values()):
            if not name.endswith("rotary_emb"):
                raise GGUFError(f"{path}: internal: buffer of {name} left on the meta device")
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, type(mod)(config=config))
    missing = [_gguf_name(n) for n, p in model.named_parameters() if p.is_meta]
    if missing:
        raise GGUFError(f"{path}: tensors missing from the file: {', '.join(missing)}")
    if compile_layers:
        compile_linears(model, activations=activations, compile_layers=True)
    return model
