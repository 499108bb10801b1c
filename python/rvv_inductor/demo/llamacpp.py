"""llama.cpp on the demo's weights: a transformers Qwen2/Qwen3/Llama model written as GGUF
(BF16, Q8_0 or Q4_0, with python3-gguf), run by ``bench/llama_decode`` (Debian's libllama,
one marker region per decode step for the rvvcount plugin).

The driver is a riscv64 binary cross-built on the host (``ninja -C build/bench-rv64
llama_decode``, see bench/README.md); this module finds it through the environment
variable ``RVV_LLAMA_DECODE`` and runs it where the rest of the demo runs (inside the
riscv64 root filesystem, emulated or native).

What the GGUF holds, per ``fmt``:

* ``bf16``: every 2-D weight (Linear layers, ``lm_head``, the token embedding) in BF16,
  as llama.cpp's ``convert_hf_to_gguf.py --outtype bf16`` writes them (the model's BF16
  values, bit for bit);
* ``q8_0``/``q4_0``: the Linear layers, ``lm_head`` and the token embedding in that type,
  quantized from the model's BF16 values by python3-gguf's reference quantizer (the same
  rounding as ggml's ``quantize_row_q8_0_ref``/``quantize_row_q4_0_ref``), i.e. what
  ``llama-quantize --pure`` writes: no tensor is promoted to another type (llama-quantize's
  default Q4_0 mix would make ``output.weight`` Q6_K), so llama.cpp reads exactly the bytes
  per token of the format named;
* norms (Qwen3's per-head q/k norms too) and the q/k/v biases in F32, as the converter
  writes them; Qwen3's head size as ``qwen3.attention.key_length`` / ``value_length``
  (always, as the converter writes them from its ``head_dim``);
* ``q4_k_m``: the ``bf16`` file quantized by Debian's ``llama-quantize ... Q4_K_M``, as a
  user makes the file the model cards recommend: llama.cpp's own mix (Q4_K for most
  Linears, Q6_K for some, its choice of the embedding and output types). The same file
  is what ``load_gguf`` and ``export FILE.gguf`` read for our side of the comparison.

A tied embedding (``tie_word_embeddings``) is written once, as ``token_embd.weight``, which
llama.cpp then also uses as the output matrix. Llama's q/k rows are permuted as the
converter does for llama.cpp's RoPE. The vocabulary is ``tokenizer.ggml.model = "none"``
with ``<arch>.vocab_size``: llama.cpp then takes token ids in and gives ids out, which is
all the demo needs (the random-weight models have no tokenizer).
"""
from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

# Files made by llama-quantize from the bf16 one (format -> its ftype argument).
QUANTIZE_MIXES = {"q4_k_m": "Q4_K_M"}
FORMATS = ("bf16", "q8_0", "q4_0", *QUANTIZE_MIXES)
QUANTIZE_TOOL = "llama-quantize"
ENV = "RVV_LLAMA_DECODE"
_BLOCK = {"q8_0": 34, "q4_0": 18}  # bytes per block of 32 weights
_FTYPE = {"bf16": 32, "q8_0": 7, "q4_0": 2}  # llama_ftype: MOSTLY_BF16, MOSTLY_Q8_0, MOSTLY_Q4_0
_LINEAR = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}
_NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
          "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}  # (the last two: qwen3)
ARCHS = ("qwen2", "llama", "qwen3")
_ROWS_PER_CHUNK = 4096  # quantize big matrices this many rows at a time (bounded FP32 copy)


def driver() -> str | None:
    """The driver binary named by RVV_LLAMA_DECODE, or None when the variable is unset."""
    return os.environ.get(ENV) or None


def unavailable(fmt: str | None = None) -> str | None:
    """None if the driver and python3-gguf are usable (and, for a llama-quantize mix,
    llama-quantize), else why not (one sentence)."""
    if fmt in QUANTIZE_MIXES and shutil.which(QUANTIZE_TOOL) is None:
        return f"{QUANTIZE_TOOL} is not installed (llama.cpp-tools, scripts/rootfs-packages.txt)"
    exe = driver()
    if exe is None:
        return (f"{ENV} is not set (build the driver: ninja -C build/bench-rv64 llama_decode, "
                f"then {ENV}=build/bench-rv64/bench/llama_decode)")
    if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        return f"{ENV}={exe} is not an executable file"
    try:
        import gguf  # lazy: gguf (numpy), probed here; this module must import without it (host)
    except ImportError:
        return "python3-gguf is not installed (apt install python3-gguf)"
    del gguf  # only probed: write_gguf imports it
    try:
        r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{exe} does not run here: {type(e).__name__}: {e}"
    if r.returncode != 0 or "llama_decode" not in r.stdout:
        err = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"{exe} does not run here (exit {r.returncode}): {err}"
    return None


def _arch(config) -> str:
    arch = getattr(config, "model_type", None)
    if arch not in ARCHS:
        raise ValueError(f"write_gguf: model_type {arch!r} is not supported ({', '.join(ARCHS)})")
    return arch


def _permute(w, n_head: int):
    """llama.cpp's convert permute of Llama q/k rows (its RoPE pairs adjacent elements)."""
    n = w.shape[0]
    return w.reshape(n_head, 2, n // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _plan(model, fmt: str):
    """[(gguf name, torch tensor, ggml type name, permute heads or 0)] in file order."""
    cfg = model.config
    arch = _arch(cfg)
    n_head, n_kv = cfg.num_attention_heads, getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    wtype = "BF16" if fmt == "bf16" else fmt.upper()
    sd = dict(model.state_dict())
    plan = [("token_embd.weight", sd.pop("model.embed_tokens.weight"), wtype, 0)]
    for i in range(cfg.num_hidden_layers):
        pre = f"model.layers.{i}."
        for hf, g in _NORMS.items():
            if pre + hf + ".weight" in sd:  # (q/k norms: qwen3 only)
                plan.append((f"blk.{i}.{g}.weight", sd.pop(pre + hf + ".weight"), "F32", 0))
        for hf, g in _LINEAR.items():
            heads = 0
            if arch == "llama" and g == "attn_q":
                heads = n_head
            elif arch == "llama" and g == "attn_k":
                heads = n_kv
            plan.append((f"blk.{i}.{g}.weight", sd.pop(pre + hf + ".weight"), wtype, heads))
            if pre + hf + ".bias" in sd:
                plan.append((f"blk.{i}.{g}.bias", sd.pop(pre + hf + ".bias"), "F32", heads))
    plan.append(("output_norm.weight", sd.pop("model.norm.weight"), "F32", 0))
    lm = sd.pop("lm_head.weight", None)
    if not cfg.tie_word_embeddings:
        if lm is None:
            raise ValueError("write_gguf: the model has untied embeddings but no lm_head.weight")
        plan.append(("output.weight", lm, wtype, 0))
    rest = [k for k in sd if not k.endswith("rotary_emb.inv_freq")]
    if rest:
        raise ValueError(f"write_gguf: tensors with no place in a {arch} GGUF: {rest[:5]}")
    return arch, plan


def _nbytes(shape, gtype: str) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    if gtype in ("Q8_0", "Q4_0"):
        return n // 32 * _BLOCK[gtype.lower()]
    return n * (2 if gtype == "BF16" else 4)


def _encode(t, gtype: str, heads: int):
    """The tensor's bytes in gtype (numpy), quantized in row chunks."""
    # lazy: gguf, numpy, torch; this module must import without them (host)
    import gguf
    import numpy as np
    import torch

    t = t.detach()
    if gtype == "F32":
        a = t.float().numpy()
        return _permute(a, heads) if heads else a
    if gtype == "BF16":  # the model's BF16 bits as they are
        a = t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        return np.ascontiguousarray(_permute(a, heads)) if heads else a
    q = getattr(gguf.GGMLQuantizationType, gtype)
    rows, k = t.shape
    out = np.empty((rows, k // 32 * _BLOCK[gtype.lower()]), dtype=np.uint8)
    src = t
    if heads:
        src = torch.from_numpy(_permute(t.float().numpy(), heads))
    for r in range(0, rows, _ROWS_PER_CHUNK):
        out[r:r + _ROWS_PER_CHUNK] = gguf.quantize(src[r:r + _ROWS_PER_CHUNK].float().numpy(), q)
    return out


def write_gguf(model, path, fmt) -> dict:
    """Write a transformers Qwen2/Qwen3/Llama model as a GGUF file in ``fmt`` (see the module
    docstring). Returns {"path", "file_bytes", "linear_weight_bytes" (the Linear weights and
    the output matrix, which every decode token reads), "format"}."""
    # lazy: gguf, numpy; this module must import without them (host)
    import gguf
    import numpy as np

    if fmt not in FORMATS:
        raise ValueError(f"write_gguf: format {fmt!r} is not one of {FORMATS}")
    if fmt in QUANTIZE_MIXES:
        return _quantized_mix(model, os.fspath(path), fmt)
    cfg = model.config
    arch, plan = _plan(model, fmt)
    for name, t, gtype, _ in plan:
        if gtype in ("Q8_0", "Q4_0") and (t.dim() != 2 or t.shape[1] % 32):
            raise ValueError(f"write_gguf: {name} is {list(t.shape)}; {fmt} needs rows whose length is a "
                             f"multiple of 32")
    if getattr(cfg, "rope_scaling", None) and (cfg.rope_scaling or {}).get("rope_type", "default") != "default":
        raise ValueError(f"write_gguf: rope_scaling {cfg.rope_scaling} is not written (only plain RoPE)")
    path = os.fspath(path)
    n_head = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_head
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_head
    rope = getattr(cfg, "rope_theta", None)
    if rope is None:
        rope = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)

    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"rvv-inductor demo {arch}")
    w.add_file_type(_FTYPE[fmt])
    w.add_context_length(int(getattr(cfg, "max_position_embeddings", 2048)))
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    if arch == "qwen3" or head_dim != cfg.hidden_size // n_head:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    w.add_vocab_size(cfg.vocab_size)
    w.add_tokenizer_model("none")
    linear_bytes = 0
    for name, t, gtype, _ in plan:
        nb = _nbytes(t.shape, gtype)
        if gtype in ("Q8_0", "Q4_0"):
            shape, dtype = (int(t.shape[0]), nb // int(t.shape[0])), np.uint8
        else:
            shape, dtype = tuple(int(d) for d in t.shape), (np.uint16 if gtype == "BF16" else np.float32)
        w.add_tensor_info(name, shape, np.dtype(dtype), nb,
                          raw_dtype=None if gtype == "F32" else getattr(gguf.GGMLQuantizationType, gtype))
        if _read_per_token(name):
            linear_bytes += nb
    if cfg.tie_word_embeddings:  # llama.cpp reads token_embd as its output matrix
        linear_bytes += _nbytes(plan[0][1].shape, plan[0][2])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, t, gtype, heads in plan:  # one tensor in memory at a time
        w.write_tensor_data(_encode(t, gtype, heads))
    w.close()
    return {"path": path, "file_bytes": os.path.getsize(path), "linear_weight_bytes": linear_bytes, "format": fmt}


def _read_per_token(name: str) -> bool:
    """A tensor every decode token reads in full: the Linear weights and the output matrix
    (a tied model's token_embd too, which the callers add: it is not named as one)."""
    return name == "output.weight" or (name.startswith("blk.") and name.endswith(".weight")
                                       and name.split(".")[2] in _LINEAR.values())


def _quantized_mix(model, path: str, fmt: str) -> dict:
    """The model written as bf16, then ``llama-quantize bf16-file path MIX`` (the bf16
    file is removed). write_gguf's dict, with the bytes counted from the file's tensors,
    the tensor types of the Linear weights and the file's sha256 (two modes that each
    make the file can show they ran the same bytes)."""
    import gguf  # lazy: gguf (numpy); this module must import without it (host)

    exe = shutil.which(QUANTIZE_TOOL)
    if exe is None:
        raise RuntimeError(unavailable(fmt))
    src = path + ".bf16.tmp"
    try:
        write_gguf(model, src, "bf16")
        source = {"bf16_sha256": _sha256(src), "mix": QUANTIZE_MIXES[fmt], "tool": os.path.realpath(exe)}
        if not _reuse_quantized(path, source):
            if os.path.exists(path + SOURCE_SUFFIX):  # the file is about to change: it no longer vouches for it
                os.unlink(path + SOURCE_SUFFIX)
            r = subprocess.run([exe, src, path, QUANTIZE_MIXES[fmt]], capture_output=True, text=True,
                               timeout=4 * 3600)
            if r.returncode != 0:
                raise RuntimeError(f"{QUANTIZE_TOOL} {QUANTIZE_MIXES[fmt]} failed (exit {r.returncode}): "
                                   f"{r.stderr.strip()[-500:]}")
            Path(path + SOURCE_SUFFIX).write_text(json.dumps(source))
    finally:
        if os.path.exists(src):
            os.unlink(src)
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    linear = [n for n in tensors if _read_per_token(n)]
    if "output.weight" not in tensors:  # tied: llama.cpp reads token_embd as its output matrix
        linear.append("token_embd.weight")
    types = dict(collections.Counter(tensors[n].tensor_type.name for n in linear))
    return {"path": path, "file_bytes": os.path.getsize(path), "format": fmt,
            "linear_weight_bytes": sum(int(tensors[n].n_bytes) for n in linear), "linear_types": types,
            "sha256": _sha256(path)}


# Beside each llama-quantize output: what it was made from (the BF16 file's sha256, the
# mix, the tool), so another mode that makes the same file from the same bytes copies it
# instead of quantizing again (at 1.5B dimensions one Q4_K_M run is ~50 min emulated).
SOURCE_SUFFIX = ".source.json"


def _reuse_quantized(path: str, source: dict) -> bool:
    """Copy to path a file in path's directory that llama-quantize made from the same source
    (its sidecar says so and its own file is there). llama-quantize is deterministic in
    its input, mix and build, so the bytes are the ones it would write again."""
    for side in sorted(Path(path).parent.glob("*" + SOURCE_SUFFIX)):
        made = str(side)[:-len(SOURCE_SUFFIX)]
        try:
            same = json.loads(side.read_text()) == source
        except ValueError:
            continue
        if same and os.path.isfile(made):
            if os.path.abspath(made) != os.path.abspath(path):
                shutil.copyfile(made, path)
                shutil.copyfile(side, path + SOURCE_SUFFIX)
            return True
    return False


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            digest.update(chunk)
    return digest.hexdigest()


def decode_argv(gguf_path, prompt_ids: list[int], steps: int, threads: int, region: int,
                logits_path=None, *, feed: list[int] | None = None, prefill_region: int = 0) -> list[str]:
    """The driver's command line: prefill ``prompt_ids`` (in marker region
    ``prefill_region``, 0: none), then ``steps`` decode steps (greedy, or teacher-forced with
    ``feed``), each in marker region ``region`` (0: none)."""
    exe = driver()
    if exe is None:
        raise RuntimeError(unavailable())
    if not prompt_ids:
        raise ValueError("decode_argv: empty prompt")
    argv = [exe, os.fspath(gguf_path), "--prompt", ",".join(str(int(t)) for t in prompt_ids),
            "--steps", str(int(steps)), "--threads", str(int(threads)), "--region", str(int(region))]
    if prefill_region:
        argv += ["--prefill-region", str(int(prefill_region))]
    if feed is not None:
        argv += ["--feed", ",".join(str(int(t)) for t in feed)]
    if logits_path is not None:
        argv += ["--logits", os.fspath(logits_path)]
    return argv


def run(gguf_path, prompt_ids, steps, threads=1, region=0, env=None, *, feed=None, logits_path=None,
        timeout=None) -> dict:
    """Run the driver; its JSON (see bench/llama_decode.cpp) as a dict. A failing run
    raises RuntimeError with the driver's last lines of stderr."""
    argv = decode_argv(gguf_path, prompt_ids, steps, threads, region, logits_path, feed=feed)
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"llama_decode failed (exit {r.returncode}): {tail}")
    out = json.loads(lines[-1])
    out["argv"] = argv
    return out
