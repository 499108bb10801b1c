"""The demo's models: named Qwen2- and Qwen3-architecture configs with random weights (fixed
seed), or a local Hugging Face checkpoint (config.json + safetensors; never a hub download)."""
from __future__ import annotations

import json
import os
from pathlib import Path


class DemoInputError(Exception):
    """Bad user input (checkpoint, config, memory): printed as one clear message, and the
    process exits with EXIT_BAD_INPUT."""


EXIT_BAD_INPUT = 3


# Dimensions of the published Qwen2.5 configs; "tiny" and "small" keep the architecture
# and shrink it so an emulated run finishes in minutes. Every Linear of "tiny" and
# "small" except k_proj/v_proj passes the default gate (N, K >= 1024).
CONFIGS: dict[str, dict] = {
    "tiny": dict(hidden_size=1024, intermediate_size=2048, num_hidden_layers=2, num_attention_heads=8,
                 num_key_value_heads=2, vocab_size=2048, tie_word_embeddings=False),
    "small": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=2, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=8192, tie_word_embeddings=False),
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    # Qwen3: heads of 128 whatever the width (q_proj [2048, 1024], o_proj [1024, 2048]),
    # per-head q/k RMSNorm, no q/k/v bias
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       tie_word_embeddings=True),
}
_COMMON = dict(rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=32768, hidden_act="silu")

SUPPORTED_ARCHS = ("qwen2", "llama", "qwen3")
_CONVERTIBLE_DTYPES = ("bfloat16", "float16", "float32")


def param_count(cfg: dict) -> int:
    """Parameters of a Qwen2 decoder with these dimensions (q/k/v biases included), or of a
    Qwen3 one (``model_type`` "qwen3": heads of ``head_dim``, q/k norms, no biases)."""
    h, i, L, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    if cfg.get("model_type") == "qwen3":
        d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
        q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
        per_layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h + 2 * d
    else:
        kv = h // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
        per_layer = h * h + h + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
    return v * h * (1 if cfg.get("tie_word_embeddings") else 2) + L * per_layer + h


def hf_config(transformers, cfg: dict):
    """(the transformers config, the model class) of a --config dict: Qwen2 unless its
    ``model_type`` says "qwen3"."""
    cfg = dict(cfg)
    if cfg.pop("model_type", "qwen2") == "qwen3":
        return transformers.Qwen3Config(**cfg), transformers.Qwen3ForCausalLM
    return transformers.Qwen2Config(**cfg), transformers.Qwen2ForCausalLM


def config_dict(name: str, layers: int | None) -> dict:
    if name not in CONFIGS:
        raise DemoInputError(f"unknown --config {name!r}; choose one of {', '.join(CONFIGS)}")
    d = dict(_COMMON, **CONFIGS[name])
    if layers:
        d["num_hidden_layers"] = layers
    return d


def inspect_checkpoint(model_dir: str) -> dict:
    """Validate a local checkpoint before torch loads it; return its config.json."""
    p = Path(model_dir)
    if not p.is_dir():
        raise DemoInputError(f"--model {model_dir}: no such directory (a local Hugging Face checkpoint "
                             "with config.json and *.safetensors is expected; nothing is downloaded)")
    cfg_path = p / "config.json"
    if not cfg_path.is_file():
        raise DemoInputError(f"--model {model_dir}: config.json is missing")
    try:
        cfg = json.loads(cfg_path.read_text())
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as e:
        raise DemoInputError(f"--model {model_dir}: config.json is not valid JSON ({e})") from None
    arch = cfg.get("model_type")
    if arch not in SUPPORTED_ARCHS:
        raise DemoInputError(f"--model {model_dir}: model_type {arch!r} is not supported "
                             f"(supported: {', '.join(SUPPORTED_ARCHS)})")
    if cfg.get("quantization_config"):
        raise DemoInputError(f"--model {model_dir}: quantized checkpoints are not supported "
                             "(BF16, FP16 or FP32 weights are; they run as BF16)")
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    if dtype not in _CONVERTIBLE_DTYPES:
        raise DemoInputError(f"--model {model_dir}: weights of dtype {dtype!r} are not supported "
                             f"({', '.join(_CONVERTIBLE_DTYPES)} are; they run as BF16)")
    missing = [k for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                           "vocab_size") if not isinstance(cfg.get(k), int) or cfg[k] <= 0]
    if missing:
        raise DemoInputError(f"--model {model_dir}: config.json lacks valid {', '.join(missing)}")
    cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])
    shards = sorted(p.glob("*.safetensors"))
    if not shards:
        raise DemoInputError(f"--model {model_dir}: no *.safetensors weights (PyTorch .bin pickles are "
                             "not loaded: they can execute code)")
    for s in shards:
        _check_safetensors_header(s)
    return cfg


def _check_safetensors_header(path: Path) -> None:
    """The safetensors header is a little-endian u64 length and a JSON table whose offsets
    must lie inside the file; a truncated or overwritten file fails here, not in torch."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n <= 0 or 8 + n > size:
                raise ValueError(f"header length {n} does not fit a file of {size} bytes")
            table = json.loads(f.read(n))
        end = max((v["data_offsets"][1] for k, v in table.items() if k != "__metadata__"), default=0)
        if 8 + n + end > size:
            raise ValueError(f"tensor data ends at byte {8 + n + end}, the file has {size}")
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as e:
        raise DemoInputError(f"{path}: not a valid safetensors file ({e}); the checkpoint is "
                             "truncated or corrupt") from None


def at_depth(spec: dict, layers: int) -> dict:
    """``spec`` with ``layers`` decoder layers of the same dimensions: the shallow models
    that --count-layers counts and extrapolates from."""
    return dict(spec, config=dict(spec["config"], num_hidden_layers=layers))


def build(spec: dict):
    """The model in BF16, eval mode, no grad; deterministic for a given spec."""
    # lazy: torch, transformers; this module must import without them (the demo's driver, host tools)
    import torch
    import transformers

    torch.manual_seed(spec["seed"])
    if spec.get("model_dir"):
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(
                spec["model_dir"], dtype=torch.bfloat16, local_files_only=True)
        except Exception as e:  # transformers/safetensors raise many types for bad files
            raise DemoInputError(f"--model {spec['model_dir']}: loading failed: {type(e).__name__}: {e}") from None
    else:
        cfg, cls = hf_config(transformers, spec["config"])
        model = _random_model(cls, cfg, spec["seed"])
    model = model.to(torch.bfloat16).eval()
    model.requires_grad_(False)
    return model


_POOL = 1048573  # a prime: row i and row j of a [N, K] weight coincide only if P | (j - i) * K


def _random_model(cls, cfg, seed: int):
    """A Qwen2 (Qwen3) model with reproducible random BF16 weights, built without transformers'
    initialisation: drawing ~1.5e9 normals for the 1.5B config takes many minutes under
    emulation. Every matrix and bias is a window, at a random offset, of one prime-sized
    pool of N(0, 0.02) values (so no two rows of any weight here are equal); norm weights
    are 1, as transformers initialises them."""
    import torch  # lazy: torch; this module must import without it (the demo's driver, host tools)

    with torch.device("meta"):
        model = cls(cfg)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    if cfg.tie_word_embeddings:
        model.tie_weights()  # to_empty gives each module its own tensor
        if model.lm_head.weight is not model.model.embed_tokens.weight:
            raise RuntimeError("demo model: tie_word_embeddings did not tie lm_head to embed_tokens")
    g = torch.Generator().manual_seed(seed)
    pool = (torch.randn(_POOL, generator=g) * 0.02).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.rsplit(".", 1)[0].rsplit(".", 1)[-1]:
                p.fill_(1.0)
                continue
            off = int(torch.randint(0, _POOL, (1,), generator=g))
            _fill_from_pool(p.view(-1), pool, off)
        # Buffers (rotary inv_freq) are computed in __init__: rebuild those modules on CPU.
        for parent in list(model.modules()):
            for cname, child in list(parent.named_children()):
                if type(child).__name__.endswith("RotaryEmbedding"):
                    setattr(parent, cname, type(child)(config=cfg))
    for name, b in model.named_buffers():
        if b.device.type != "cpu" or not torch.isfinite(b).all():
            raise RuntimeError(f"demo model: buffer {name} was not initialised")
    return model


def build_lazy(spec: dict):
    """The model on the meta device, and where compile_linears(load=...) takes its weights
    from: it packs (quantizes) one Linear at a time, so the whole BF16 model never exists.
    For a checkpoint, ``load`` is its directory (compile_linears reads the safetensors one
    tensor at a time); for a --config model, a ``load(name, meta)`` callable that makes each
    weight on demand with exactly the values ``build`` gives it."""
    # lazy: torch, transformers; this module must import without them (the demo's driver, host tools)
    import torch
    import transformers

    torch.manual_seed(spec["seed"])
    if spec.get("model_dir"):
        try:
            cfg = transformers.AutoConfig.from_pretrained(spec["model_dir"], local_files_only=True)
            with torch.device("meta"):
                model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        except Exception as e:  # as in build: transformers raises many types for bad configs
            raise DemoInputError(f"--model {spec['model_dir']}: building the model failed: "
                                 f"{type(e).__name__}: {e}") from None
    else:
        cfg, cls = hf_config(transformers, spec["config"])
        with torch.device("meta"):
            model = cls(cfg)
    model = model.to(torch.bfloat16).eval()
    model.requires_grad_(False)
    if cfg.tie_word_embeddings:
        model.tie_weights()
    # Rotary inv_freq is a non-persistent buffer (no checkpoint holds it): build it on the CPU.
    for parent in list(model.modules()):
        for cname, child in list(parent.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding"):
                setattr(parent, cname, type(child)(config=cfg))
    if spec.get("model_dir"):
        return model, spec["model_dir"]
    g = torch.Generator().manual_seed(spec["seed"])
    pool = (torch.randn(_POOL, generator=g) * 0.02).to(torch.bfloat16)
    offsets: dict[str, int | None] = {}
    for name, p in model.named_parameters():  # the order, and draws, of _random_model
        offsets[name] = (None if "norm" in name.rsplit(".", 1)[0].rsplit(".", 1)[-1]
                         else int(torch.randint(0, _POOL, (1,), generator=g)))
    if cfg.tie_word_embeddings:
        offsets["lm_head.weight"] = offsets["model.embed_tokens.weight"]

    def load(name: str, meta):
        if name not in offsets:
            raise KeyError(name)
        out = torch.empty(meta.shape, dtype=torch.bfloat16)
        if offsets[name] is None:
            out.fill_(1.0)
        else:
            _fill_from_pool(out.view(-1), pool, offsets[name])
        return out

    return model, load


def _fill_from_pool(flat, pool, off: int) -> None:
    """flat[:] = the pool read cyclically from `off` (what pool.repeat(...)[off:off + n]
    gives, without building the repeated copy: under the counting plugin every copied
    element costs)."""
    n, size, pos = flat.numel(), pool.numel(), 0
    while pos < n:
        take = min(n - pos, size - off)
        flat[pos:pos + take].copy_(pool[off:off + take])
        pos, off = pos + take, 0


def mem_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (RVV_DEMO_MEMAVAILABLE overrides it, for tests)."""
    env = os.environ.get("RVV_DEMO_MEMAVAILABLE")
    if env:
        return int(env)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(n_params: int, modes=("eager", "regional", "whole")) -> int:
    """Each mode runs in its own process, one after the other. Measured peaks at 1.5B
    dimensions (bench/results/demo-qwen2.5-1.5b), in BF16 parameter bytes: eager 1.7x,
    regional 2.3x (weights, packed copies, the tied embedding, packing transients), whole
    7.3x (freezing folds and packs every weight while the originals stay), plus torch,
    Inductor and QEMU. Returns the estimate."""
    factor = 6.5 if "whole" in modes else 2.3
    need = int(factor * 2 * n_params + 1.5 * 2**30)
    have = mem_available_bytes()
    if have is not None and have < need:
        hint = " or leave out the whole-model mode (--modes eager,regional)" if "whole" in modes else ""
        raise DemoInputError(f"this model needs about {need / 2**30:.1f} GiB of memory, "
                             f"{have / 2**30:.1f} GiB is available; choose a smaller --config "
                             f"(tiny, small) or fewer --layers{hint}")
    return need
