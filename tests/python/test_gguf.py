"""load_gguf: a small random Qwen2 GGUF written with python3-gguf, loaded with its Q8_0/Q4_0
blocks packed bit for bit (checked against gguf's own dequantize), run against a plain
PyTorch twin holding gguf's dequantized weights; bad files give GGUFError."""
from __future__ import annotations

import pytest
import torch

from rvv_inductor import cpu, regional

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")
gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
transformers = pytest.importorskip("transformers")

from rvv_inductor.gguf_load import GGUFError, load_gguf  # noqa: E402

Q = gguf.GGMLQuantizationType
H, FF, LAYERS, HEADS, KV, VOCAB = 256, 512, 2, 4, 2, 512
TYPES = {"attn_q": Q.Q8_0, "attn_k": Q.Q8_0, "attn_v": Q.Q4_0, "attn_output": Q.Q8_0,
         "ffn_gate": Q.Q4_0, "ffn_up": Q.Q4_0, "ffn_down": Q.BF16}


def write_gguf(path, arch="qwen2", override=None, seed=0):
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(256)
    w.add_embedding_length(H)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)

    def add(name, shape, qtype, scale=0.05):
        qtype = (override or {}).get(name, qtype)
        data = (rng.standard_normal(shape) * scale).astype(np.float32)
        if qtype == Q.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quantize(data, qtype), raw_dtype=qtype)

    add("token_embd.weight", (VOCAB, H), Q.F32, 1.0)
    for i in range(LAYERS):
        dims = {"attn_q": (H, H), "attn_k": (KV * H // HEADS, H), "attn_v": (KV * H // HEADS, H),
                "attn_output": (H, H), "ffn_gate": (FF, H), "ffn_up": (FF, H), "ffn_down": (H, FF)}
        for kind, shape in dims.items():
            add(f"blk.{i}.{kind}.weight", shape, TYPES[kind])
        for kind in ("attn_q", "attn_k", "attn_v"):
            add(f"blk.{i}.{kind}.bias", (dims[kind][0],), Q.F32)
        add(f"blk.{i}.attn_norm.weight", (H,), Q.F32, 0.1)
        add(f"blk.{i}.ffn_norm.weight", (H,), Q.F32, 0.1)
    add("output_norm.weight", (H,), Q.F32, 0.1)
    add("output.weight", (VOCAB, H), Q.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


class FP32Linear(torch.nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.w, self.b = w, (b.detach().float() if b is not None else None)

    def forward(self, x):
        return torch.nn.functional.linear(x.float(), self.w, self.b).to(x.dtype)


def gguf_dequantized(path):
    r = gguf.GGUFReader(str(path))
    return {t.name: torch.from_numpy(np.array(gguf.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(
        [int(d) for d in reversed(t.shape)])) for t in r.tensors}


def hf_to_gguf(name):
    from rvv_inductor.gguf_load import _LINEAR
    if name == "lm_head":
        return "output.weight"
    i, rest = name.split(".")[2], ".".join(name.split(".")[3:])
    kind = {v: k for k, v in _LINEAR.items()}[rest]
    return f"blk.{i}.{kind}.weight"


def test_load_bit_exact_and_runs(tmp_path):
    from test_transformers import bf16_ulp, teacher_forced_logits

    path = write_gguf(tmp_path / "tiny.gguf")
    model = load_gguf(path)
    ref_w = gguf_dequantized(path)
    quant = {n: m for n, m in model.named_modules() if isinstance(m, regional.RVVQuantLinear)}
    # every Q8_0/Q4_0 Linear is quantized, the BF16 ffn_down stays a plain Linear
    assert len(quant) == LAYERS * 6 + 1
    assert all(type(m.mlp.down_proj) is torch.nn.Linear for m in model.model.layers)
    assert quant["model.layers.0.self_attn.v_proj"].format == "int4"
    assert quant["model.layers.0.self_attn.q_proj"].format == "int8"
    ref = load_gguf(path)   # (RVVLinear holds a lock: no deepcopy)
    for name, layer in quant.items():
        w = ref_w[hf_to_gguf(name)]
        assert torch.equal(layer.dequantized(), w), f"{name}: dequantized weights differ from gguf's"
        parent, _, child = name.rpartition(".")
        setattr(ref.get_submodule(parent) if parent else ref, child, FP32Linear(w, layer.bias))
    torch.manual_seed(1)
    tokens = torch.randint(0, VOCAB, (1, 8 + 16))
    want = teacher_forced_logits(ref, tokens)
    got = teacher_forced_logits(model, tokens)
    tol = 4 * bf16_ulp(want.abs().max().item())
    print(f"max logit difference {(got - want).abs().max().item():.4g} (tol {tol:.4g})")
    assert (got - want).abs().max().item() <= tol
    top2 = want.topk(2, dim=-1).values
    decisive = (top2[..., 0] - top2[..., 1]) > tol
    assert decisive.any() and bool((want.argmax(-1) == got.argmax(-1))[decisive].all())


def test_q4_0_nibble_order(tmp_path):
    """Q4_0: byte j of a block holds element j (low nibble) and j + 16 (high nibble)."""
    from rvv_inductor.gguf_load import _blocks
    data = np.linspace(-1, 1, 2 * 64, dtype=np.float32).reshape(2, 64)
    raw = gguf.quantize(data, Q.Q4_0)
    t = type("T", (), {"data": raw, "tensor_type": Q.Q4_0})
    values, scales = _blocks(t, 2, 64)
    d = scales.view(np.float16).astype(np.float32).repeat(32, axis=1)
    want = gguf.dequantize(raw, Q.Q4_0).reshape(2, 64)
    assert np.array_equal((values.astype(np.float32) - 8) * d, want)


def test_bad_files(tmp_path):
    with pytest.raises(GGUFError, match="architecture 'gpt2'"):
        load_gguf(write_gguf(tmp_path / "gpt2.gguf", arch="gpt2"))
    with pytest.raises(GGUFError, match="blk.0.ffn_up.weight has type Q4_1"):
        load_gguf(write_gguf(tmp_path / "q41.gguf", override={"blk.0.ffn_up.weight": Q.Q4_1}))
    good = write_gguf(tmp_path / "good.gguf")
    raw = good.read_bytes()
    for cut in (len(raw) - 1000, len(raw) // 2, 100):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(raw[:cut])
        with pytest.raises(GGUFError, match="truncated"):
            load_gguf(bad)
