"""llama.cpp (Debian's libllama, through bench/llama_decode) and load_gguf on the same GGUF
file, written from a small random transformers model by rvv_inductor.demo.llamacpp.

The driver is a riscv64 binary cross-built on the host; the test finds it through
RVV_LLAMA_DECODE (build: ``ninja -C build/bench-rv64 llama_decode``). Unset: the tests
skip, saying so. Set: every failure fails (a driver that does not run is a failure).

Reference. An FP32 copy of the model whose Linear weights (and token embedding) are
``gguf.dequantize(gguf.quantize(W))`` of the original rows, built without reading the file:
quantization is row-local and Llama's q/k permutation only moves rows, so this reference
is independent of the file layout, of write_gguf's permutation and of load_gguf's
un-permutation, which it therefore checks (through llama.cpp's RoPE and ours).

Tolerances (all at the largest reference logit |z|max, measured values printed):

* ours vs the reference: 4 BF16 ulps at |z|max, as in test_transformers/test_gguf (our
  model keeps BF16 hidden states; the reference is FP32 throughout).
* llama.cpp vs the reference: ggml's Q8_0/Q4_0 matmuls quantize each activation row to
  Q8_0 (blocks of 32, scale max|x|/127, so up to 1/254 of the block maximum per element),
  and its BF16 matmuls round activations to BF16; its KV cache is F16. The test measures
  the first effect on the reference itself: the same FP32 model with activations
  round-tripped through Q8_0 (gguf's reference quantizer) or BF16 before every Linear.
  llama.cpp's rounding decisions are not the simulated ones (its FP32 inputs differ in the
  last bits), so its error is another draw of the same noise, not the same draw: the
  bound is 2x the simulated deviation plus 4 BF16 ulps at |z|max for the F16 cache and
  the remaining FP32 order differences. (Measured at these dims, scalar ggml variant:
  llama.cpp's deviation is 1.0-1.2x the simulated one; ours is 1.8-2.2 BF16 ulps.)
* ours with INT8 activations (load_gguf's default for Q4_0; the prompt's calls, M >= 2):
  the same kind of noise as llama.cpp's, so the same bound; the distance to llama.cpp is
  printed beside the FP path's.
* Tokens: llama.cpp's argmax at each position equals our greedy token wherever the
  reference's top-2 margin exceeds the sum of both bounds (a margin smaller than that can
  flip), and llama.cpp's own free greedy run equals ours up to the first position that is
  not decisive in that sense.
"""
from __future__ import annotations

import json
import os

import pytest
import torch

from rvv_inductor import cpu

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")
gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
transformers = pytest.importorskip("transformers")

from rvv_inductor.demo import llamacpp  # noqa: E402
from rvv_inductor.gguf_load import load_gguf  # noqa: E402
from small_decoders import random_decoder  # noqa: E402  (tests/python is on sys.path)

PROMPT, STEPS, VOCAB, H, HEADS, KV = 8, 12, 512, 256, 4, 2

needs_driver = pytest.mark.skipif(
    not os.environ.get(llamacpp.ENV),
    reason=f"{llamacpp.ENV} is not set: build bench/llama_decode (ninja -C build/bench-rv64 llama_decode) "
           f"and export {llamacpp.ENV}=build/bench-rv64/bench/llama_decode")


def bf16_ulp(x: float) -> float:
    return 2.0 ** (np.floor(np.log2(x)) - 7)


QWEN3_HEAD_DIM = 128  # heads of 128 in a width of 256 (H / HEADS = 64), as Qwen3-0.6B's 16 x 128 in 1024


def head_dim(arch):
    return QWEN3_HEAD_DIM if arch == "qwen3" else H // HEADS


def make_model(arch, tie, seed=0):
    return random_decoder(arch, hidden=H, heads=HEADS, kv_heads=KV, vocab=VOCAB, max_positions=256,
                          init_range=0.05, tie=tie, seed=seed, head_dim=head_dim(arch)).to(torch.bfloat16).eval()


def roundtrip(a: np.ndarray, fmt: str) -> np.ndarray:
    """a (float32 rows) through the file format and back, with gguf's reference code."""
    if fmt == "bf16":
        return torch.from_numpy(a).to(torch.bfloat16).float().numpy()
    q = getattr(gguf.GGMLQuantizationType, fmt.upper())
    return np.asarray(gguf.dequantize(gguf.quantize(a, q), q), dtype=np.float32).reshape(a.shape)


class RefLinear(torch.nn.Module):
    """FP32 Linear; act: None (exact), "q8_0" or "bf16" (activations rounded as ggml does)."""

    def __init__(self, w, b, act):
        super().__init__()
        self.w, self.b, self.act = w, b, act

    def forward(self, x):
        x = x.float()
        if self.act:
            x = torch.from_numpy(roundtrip(np.ascontiguousarray(x.reshape(-1, x.shape[-1]).numpy()),
                                           self.act)).reshape(x.shape)
        return torch.nn.functional.linear(x, self.w, self.b)


def reference(model, fmt, act):
    ref = type(model)(model.config).float().eval()
    ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    emb = ref.model.embed_tokens.weight
    with torch.no_grad():
        emb.copy_(torch.from_numpy(roundtrip(emb.detach().numpy(), fmt)))
    for name, mod in list(ref.named_modules()):
        if isinstance(mod, torch.nn.Linear):
            if name == "lm_head" and model.config.tie_word_embeddings:
                w = emb.detach().clone()  # llama.cpp's output matrix is token_embd, in fmt
            else:
                w = torch.from_numpy(roundtrip(mod.weight.detach().numpy(), fmt))
            b = mod.bias.detach().clone() if mod.bias is not None else None
            parent, _, child = name.rpartition(".")
            setattr(ref.get_submodule(parent) if parent else ref, child, RefLinear(w, b, act))
    return ref


def greedy(model, prompt, steps):
    """Our greedy decode: logits [steps + 1, V] (FP32) and the tokens chosen."""
    logits, tokens = [], []
    with torch.no_grad():
        r = model(prompt, use_cache=True)
        for s in range(steps + 1):
            z = r.logits[0, -1].float()
            logits.append(z)
            tokens.append(int(z.argmax()))
            if s < steps:
                r = model(torch.tensor([[tokens[-1]]]), past_key_values=r.past_key_values, use_cache=True)
    return torch.stack(logits), tokens


def stepped(model, prompt, feed):
    """Our decode fed ``feed`` (the prompt in one call, then one token per step): logits
    [len(feed) + 1, V] (FP32)."""
    logits = []
    with torch.no_grad():
        r = model(prompt, use_cache=True)
        logits.append(r.logits[0, -1].float())
        for t in feed:
            r = model(torch.tensor([[t]]), past_key_values=r.past_key_values, use_cache=True)
            logits.append(r.logits[0, -1].float())
    return torch.stack(logits)


def forced(model, seq):
    with torch.no_grad():
        return model(seq).logits[0, PROMPT - 1:].float()


def test_unavailable_says_why(monkeypatch):
    monkeypatch.delenv(llamacpp.ENV, raising=False)
    assert llamacpp.ENV in llamacpp.unavailable()
    monkeypatch.setenv(llamacpp.ENV, "/nonexistent/llama_decode")
    assert "not an executable" in llamacpp.unavailable()
    assert llamacpp.decode_argv("x.gguf", [1, 2], 3, 1, 7, "l.bin", feed=[4, 5, 6]) == [
        "/nonexistent/llama_decode", "x.gguf", "--prompt", "1,2", "--steps", "3", "--threads", "1", "--region", "7",
        "--feed", "4,5,6", "--logits", "l.bin"]
    monkeypatch.delenv(llamacpp.ENV)
    with pytest.raises(RuntimeError, match=llamacpp.ENV):
        llamacpp.decode_argv("x.gguf", [1], 1, 1, 0)


def test_write_gguf_rejects_bad_input(tmp_path):
    model = make_model("qwen2", False)
    with pytest.raises(ValueError, match="format 'q4_1'"):
        llamacpp.write_gguf(model, tmp_path / "x.gguf", "q4_1")
    model.config.model_type = "gpt2"
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        llamacpp.write_gguf(model, tmp_path / "x.gguf", "q8_0")


@needs_driver
def test_q4_k_m_file_is_quantized_once_per_source(tmp_path, monkeypatch):
    """A second llama-quantize Q4_K_M write of the same model in the same directory copies the
    first file instead of running the tool again; the bytes are what the tool makes of them in
    a directory of its own (it is deterministic: the premise of the reuse), and other weights
    are quantized again."""
    why = llamacpp.unavailable("q4_k_m")
    assert why is None, why
    runs = []
    real_run = llamacpp.subprocess.run
    monkeypatch.setattr(llamacpp.subprocess, "run", lambda argv, **kw: runs.append(argv[0]) or real_run(argv, **kw))
    model = make_model("qwen2", False)
    a = llamacpp.write_gguf(model, tmp_path / "a.gguf", "q4_k_m")
    assert len(runs) == 1 and json.loads(open(a["path"] + llamacpp.SOURCE_SUFFIX).read())["mix"] == "Q4_K_M"
    b = llamacpp.write_gguf(model, tmp_path / "b.gguf", "q4_k_m")
    assert len(runs) == 1, "the same source was quantized again"
    assert b["sha256"] == a["sha256"] and b["linear_types"] == a["linear_types"]
    (tmp_path / "fresh").mkdir()
    c = llamacpp.write_gguf(model, tmp_path / "fresh" / "c.gguf", "q4_k_m")
    assert len(runs) == 2 and c["sha256"] == a["sha256"]
    d = llamacpp.write_gguf(make_model("qwen2", False, seed=1), tmp_path / "d.gguf", "q4_k_m")
    assert len(runs) == 3 and d["sha256"] != a["sha256"]


@needs_driver
@pytest.mark.parametrize("arch,fmt,tie", [("qwen2", "q8_0", False), ("qwen2", "q4_0", False),
                                          ("qwen2", "bf16", False), ("llama", "q4_0", True),
                                          ("qwen3", "q8_0", True)])
def test_llamacpp_matches_ours(tmp_path, arch, fmt, tie):
    why = llamacpp.unavailable()
    assert why is None, why  # the variable is set: the driver must work
    model = make_model(arch, tie)
    info = llamacpp.write_gguf(model, tmp_path / f"{arch}-{fmt}.gguf", fmt)
    per_row = {"q8_0": 34 / 32, "q4_0": 18 / 32, "bf16": 2.0}[fmt]
    q, kv = HEADS * head_dim(arch), KV * head_dim(arch)
    n_linear = 2 * (H * q + 2 * kv * H + q * H + 3 * H * 2 * H) + VOCAB * H
    assert info["linear_weight_bytes"] == int(n_linear * per_row)
    assert info["format"] == fmt and info["file_bytes"] == os.path.getsize(info["path"])

    torch.manual_seed(1)
    prompt = torch.randint(0, VOCAB, (1, PROMPT))
    ours_model = load_gguf(info["path"], activations="bf16")  # the FP path: 4 BF16 ulps below
    got, tokens = greedy(ours_model, prompt, STEPS)
    seq = torch.cat([prompt, torch.tensor([tokens[:-1]])], 1)
    want = forced(reference(model, fmt, None), seq)
    want_act = forced(reference(model, fmt, "bf16" if fmt == "bf16" else "q8_0"), seq)

    logits_path = tmp_path / "logits.bin"
    out = llamacpp.run(info["path"], prompt[0].tolist(), STEPS, threads=1, region=5, feed=tokens[:-1],
                       logits_path=logits_path)
    assert "libggml-cpu" in out["ggml_cpu_so"] and out["n_vocab"] == VOCAB and out["teacher_forced"]
    assert len(out["tokens"]) == STEPS + 1 and len(out["decode_step_s"]) == STEPS
    lz = torch.from_numpy(np.fromfile(logits_path, dtype=np.float32).reshape(PROMPT + STEPS, VOCAB))[PROMPT - 1:]
    assert out["tokens"] == lz.argmax(-1).tolist()  # the driver's argmax is its logits'

    zmax = want.abs().max().item()
    tol_ours = 4 * bf16_ulp(zmax)
    sim = (want_act - want).abs().max().item()
    tol_llama = 2 * sim + 4 * bf16_ulp(zmax)
    d_ours, d_llama = (got - want).abs().max().item(), (lz - want).abs().max().item()
    print(f"{arch} {fmt}: |z|max {zmax:.3f}; ours-ref {d_ours:.4f} (tol {tol_ours:.4f}); llama.cpp-ref "
          f"{d_llama:.4f} (tol {tol_llama:.4f}, simulated activation rounding {sim:.4f}); ours-llama.cpp "
          f"{(got - lz).abs().max().item():.4f}; ggml variant {os.path.basename(out['ggml_cpu_so'])}")
    assert d_ours <= tol_ours
    assert d_llama <= tol_llama
    if fmt != "bf16":
        # activations="int8" (load_gguf's default for Q4_0 files): the prompt's Linear calls
        # quantize activations to INT8 per 32 values, as ggml does with Q8_0 (our scale stays
        # FP32, ggml rounds it to F16). The same noise as llama.cpp's, on the prompt rows
        # only: the same bound.
        got8 = stepped(load_gguf(info["path"], activations="int8"), prompt, tokens[:-1])
        d8, d8_llama = (got8 - want).abs().max().item(), (got8 - lz).abs().max().item()
        print(f"{arch} {fmt} with INT8 activations: ours-ref {d8:.4f} (tol {tol_llama:.4f}); ours-llama.cpp "
              f"{d8_llama:.4f} (BF16 activations: {(got - lz).abs().max().item():.4f})")
        assert d8 <= tol_llama

    top2 = want.topk(2, dim=-1).values
    decisive = ((top2[:, 0] - top2[:, 1]) > tol_ours + tol_llama).tolist()
    assert any(decisive), "no decisive position: the test would check no token"
    for i, d in enumerate(decisive):
        if d:
            assert out["tokens"][i] == tokens[i], f"position {i}: llama.cpp {out['tokens'][i]}, ours {tokens[i]}"
    free = llamacpp.run(info["path"], prompt[0].tolist(), STEPS)
    n = decisive.index(False) if False in decisive else len(decisive)
    assert free["tokens"][:n] == tokens[:n]
    assert not free["teacher_forced"] and free["region"] == 0


@needs_driver
def test_driver_bad_input(tmp_path):
    assert llamacpp.unavailable() is None
    model = make_model("qwen2", False)
    path = llamacpp.write_gguf(model, tmp_path / "m.gguf", "q8_0")["path"]
    with pytest.raises(RuntimeError, match=">= n_vocab"):
        llamacpp.run(path, [VOCAB + 3], 1)
    with pytest.raises(RuntimeError, match="--feed has 1 ids"):
        llamacpp.run(path, [1, 2], 2, feed=[3])
    raw = open(path, "rb").read()
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(RuntimeError, match="could not load"):
        llamacpp.run(bad, [1, 2], 1)
