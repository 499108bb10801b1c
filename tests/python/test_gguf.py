"""load_gguf: small random Qwen2 and Llama GGUF files written with python3-gguf, loaded with
their Q8_0/Q4_0 blocks packed bit for bit, run against a plain PyTorch twin holding the
reference's dequantized weights; bad files give GGUFError.

References. (1) gguf's own ``dequantize`` (test_load_bit_exact_and_runs). (2) transformers'
own GGUF loading, ``from_pretrained(dir, gguf_file=...)``, which dequantizes with gguf and
un-permutes Llama's q/k rows with its own code (test_matches_transformers_gguf_loading).
Debian's transformers 5.12 needs two shims for it, both about packaging, not numbers:
``is_gguf_available`` reads python3-gguf's version through importlib metadata, which
Debian's python3-gguf does not register under the import name, and falls back to
``gguf.__version__``, which it lacks (the test sets it from the installed dist-info); and
``from_pretrained`` refuses GGUF files unless ``accelerate`` is importable, which the root
filesystem does not install (scripts/rootfs-packages.txt) and which this CPU-only load
never calls (the test patches the check). Without these the comparison is impossible, and the test says so by
failing, not skipping.

The files carry ``tokenizer.ggml.model = "none"`` and ``<arch>.vocab_size``: the minimal
vocabulary both transformers and llama.cpp accept (token ids in, ids out)."""
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


def write_gguf(path, arch="qwen2", override=None, seed=0, bias=None, drop=(), raw=None):
    """A random GGUF in file layout (for Llama, q/k rows as llama.cpp's converter leaves
    them). override: tensor name -> type; drop: tensor names to leave out; raw: tensor name
    -> (type, uint8 byte array) written as given."""
    rng = np.random.default_rng(seed)
    bias = arch != "llama" if bias is None else bias
    w = gguf.GGUFWriter(str(path), arch)
    w.add_vocab_size(VOCAB)
    w.add_tokenizer_model("none")
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
        if name in drop:
            return
        if name in (raw or {}):
            w.add_tensor(name, raw[name][1], raw_dtype=raw[name][0])
        elif qtype == Q.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, gguf.quantize(data, qtype), raw_dtype=qtype)

    add("token_embd.weight", (VOCAB, H), Q.F32, 1.0)
    for i in range(LAYERS):
        dims = {"attn_q": (H, H), "attn_k": (KV * H // HEADS, H), "attn_v": (KV * H // HEADS, H),
                "attn_output": (H, H), "ffn_gate": (FF, H), "ffn_up": (FF, H), "ffn_down": (H, FF)}
        for kind, shape in dims.items():
            add(f"blk.{i}.{kind}.weight", shape, TYPES[kind])
        for kind in ("attn_q", "attn_k", "attn_v") if bias else ():
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
    # The FP path (the INT8-activation default is tested in test_int8_activations.py and
    # against llama.cpp in test_llamacpp.py): logits within 4 BF16 ulps.
    model = load_gguf(path, activations="bf16")
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


def transformers_gguf_model(monkeypatch, path):
    """transformers' own loading of the file (FP32, dequantized by transformers/gguf)."""
    import importlib.metadata

    import transformers.modeling_utils as mu
    monkeypatch.setattr(gguf, "__version__", importlib.metadata.version("gguf"), raising=False)
    monkeypatch.setattr(mu, "is_accelerate_available", lambda *a, **k: True)
    return transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                             dtype=torch.float32).eval()


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_matches_transformers_gguf_loading(tmp_path, monkeypatch, arch):
    """Every weight equals transformers' dequantized one: bit for bit for the Q8_0/Q4_0
    Linears and BF16 tensors, and BF16(round to nearest even) of it for the F32 tensors
    (embedding, norms, biases), which load_gguf stores in BF16; logits agree with a twin of
    transformers' model as in test_load_bit_exact_and_runs (4 BF16 ulps)."""
    from test_transformers import bf16_ulp, teacher_forced_logits

    path = write_gguf(tmp_path / f"{arch}.gguf", arch=arch)
    theirs = transformers_gguf_model(monkeypatch, path)
    assert theirs.config.model_type == arch and theirs.config.vocab_size == VOCAB
    model = load_gguf(path, activations="bf16")
    assert type(model) is type(theirs)
    ref_sd = theirs.state_dict()
    quant = {n: m for n, m in model.named_modules() if isinstance(m, regional.RVVQuantLinear)}
    assert len(quant) == LAYERS * 6 + 1
    for name, layer in quant.items():
        assert torch.equal(layer.dequantized(), ref_sd[name + ".weight"]), f"{name}: differs from transformers'"
    checked = 0
    for name, p in model.state_dict().items():
        if name in ref_sd and p.dtype == torch.bfloat16 and not name.endswith("packed_weight"):
            assert torch.equal(p, ref_sd[name].to(torch.bfloat16)), f"{name}: differs from transformers'"
            checked += 1
    assert checked >= 1 + LAYERS * 3 + 1  # embedding, ffn_down and both norms per layer, final norm

    ref = type(theirs)(theirs.config).to(torch.bfloat16).eval()
    ref.load_state_dict({k: v.to(torch.bfloat16) for k, v in ref_sd.items()})
    for name, layer in quant.items():
        parent, _, child = name.rpartition(".")
        setattr(ref.get_submodule(parent) if parent else ref, child,
                FP32Linear(ref_sd[name + ".weight"], ref_sd.get(name + ".bias")))
    torch.manual_seed(2)
    tokens = torch.randint(0, VOCAB, (1, 8 + 16))
    want = teacher_forced_logits(ref, tokens)
    got = teacher_forced_logits(model, tokens)
    tol = 4 * bf16_ulp(want.abs().max().item())
    print(f"{arch}: max logit difference to transformers' GGUF model {(got - want).abs().max().item():.4g} "
          f"(tol {tol:.4g})")
    assert (got - want).abs().max().item() <= tol
    top2 = want.topk(2, dim=-1).values
    decisive = (top2[..., 0] - top2[..., 1]) > tol
    assert decisive.any() and bool((want.argmax(-1) == got.argmax(-1))[decisive].all())


def test_llama_unpermute(tmp_path):
    """Llama q/k rows: load_gguf undoes llama.cpp's converter permutation (written here
    independently: rows (head, half, i) of the HF layout are stored as (head, i, half))."""
    path = write_gguf(tmp_path / "llama.gguf", arch="llama", override={"blk.0.attn_q.weight": Q.F32,
                                                                       "blk.0.attn_k.weight": Q.BF16})
    model = load_gguf(path)
    file_w = gguf_dequantized(path)
    for kind, heads, mod in (("attn_q", HEADS, model.model.layers[0].self_attn.q_proj),
                             ("attn_k", KV, model.model.layers[0].self_attn.k_proj)):
        stored = file_w[f"blk.0.{kind}.weight"]
        n, k = stored.shape
        half = n // heads // 2
        want = torch.empty_like(stored)
        for h in range(heads):
            for part in range(2):
                for i in range(half):
                    want[h * 2 * half + part * half + i] = stored[h * 2 * half + i * 2 + part]
        assert torch.equal(mod.weight, want.to(torch.bfloat16)), kind
    # a quantized q_proj (layer 1): the same permutation of whole rows of blocks
    stored = file_w["blk.1.attn_q.weight"]
    half = H // HEADS // 2
    idx = [h * 2 * half + i * 2 + part for h in range(HEADS) for part in range(2) for i in range(half)]
    assert torch.equal(model.model.layers[1].self_attn.q_proj.dequantized(), stored[idx])


def test_more_bad_files(tmp_path):
    with pytest.raises(GGUFError, match="blk.0.ffn_up.weight has type Q6_K"):
        q6k = np.random.default_rng(0).integers(0, 256, (FF, H // 256 * 210), dtype=np.uint8)
        load_gguf(write_gguf(tmp_path / "q6k.gguf", raw={"blk.0.ffn_up.weight": (Q.Q6_K, q6k)}))
    with pytest.raises(GGUFError, match="attn_q.weight is \\[128, 256\\], the model expects \\[256, 256\\]"):
        small = gguf.quantize(np.zeros((128, H), np.float32), Q.Q8_0)
        load_gguf(write_gguf(tmp_path / "shape.gguf", raw={"blk.1.attn_q.weight": (Q.Q8_0, small)}))
    with pytest.raises(GGUFError, match="missing from the file: blk.1.ffn_norm.weight"):
        load_gguf(write_gguf(tmp_path / "drop.gguf", drop=("blk.1.ffn_norm.weight",)))
    raw = write_gguf(tmp_path / "good.gguf").read_bytes()
    for name, data in (("magic", b"XXXX" + raw[4:]), ("header", raw[:8] + b"\xff" * 64 + raw[72:]),
                       ("empty", b"")):
        bad = tmp_path / f"{name}.gguf"
        bad.write_bytes(data)
        with pytest.raises(GGUFError, match="not a readable GGUF file"):
            load_gguf(bad)


def test_serving_load_packs_the_tied_lm_head(tmp_path):
    """What `rvv_inductor serve FILE.gguf` loads (serve.load_gguf_packed): a file without
    output.weight ties lm_head to the embedding, which load_gguf leaves an nn.Linear on
    ATen; serving packs it (and ffn_down, BF16 in the file) so no projection stays on ATen
    and the vocabulary matrix is held once. Logits as load_gguf's plain model gives them."""
    from test_transformers import bf16_ulp, teacher_forced_logits

    from rvv_inductor import serve

    path = write_gguf(tmp_path / "tied.gguf", drop=("output.weight",))
    model, report = serve.load_gguf_packed(path)
    assert model.config.tie_word_embeddings
    assert not [n for n, m in model.named_modules() if type(m) is torch.nn.Linear]
    assert isinstance(model.lm_head, regional.RVVLinear) and model.lm_head.format == "bf16"
    assert report.tied and not report.fell_back
    assert len(report.taken) == LAYERS * 7 + 1 and len(report.formats) == len(report.taken)
    assert {f for _, f, _, _ in report.formats} == {"bf16", "int8", "int4"}
    plain = load_gguf(path)
    assert type(plain.lm_head) is torch.nn.Linear
    torch.manual_seed(2)
    tokens = torch.randint(0, VOCAB, (1, 8 + 16))  # test_transformers' PROMPT + STEPS
    want = teacher_forced_logits(plain, tokens)
    got = teacher_forced_logits(model, tokens)
    assert (got - want).abs().max().item() <= 4 * bf16_ulp(want.abs().max().item())
