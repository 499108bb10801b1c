"""load_gguf on the files users have: K-quant mixes made the way a user makes them.

A small random Qwen2/Llama model is written as an F32 GGUF (test_gguf.write_gguf), then
quantized by Debian's ``llama-quantize`` to Q4_K_M / Q5_K_M / Q4_1 / IQ4_NL / IQ4_XS / Q2_K / Q3_K_M (the file then mixes
Q4_K or Q5_K with Q6_K, as llama.cpp's mixes do). The loaded model must hold every Linear
in its file's format, its weights equal to gguf's ``dequantize`` bit for bit, and give the
logits of a twin holding those dequantized weights in FP32 (4 BF16 ulps, on the FP path:
activations="bf16"); for Qwen2, also those of transformers' own GGUF loading of the same
file. With the default activations the prompt's GEMMs quantize X to int8 (quant_x8.h), as
llama.cpp does with these files: within test_int8_activations' bound of the same twin,
and farther from it than the FP path."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest
import torch

from rvv_inductor import cpu, regional

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")
gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
pytest.importorskip("transformers")

from rvv_inductor.gguf_load import load_gguf  # noqa: E402
from test_export import needs_runner  # noqa: E402
from test_gguf import (HEADS, KV, LAYERS, VOCAB, FP32Linear, gguf_dequantized, hf_to_gguf,  # noqa: E402
                       transformers_gguf_model, write_gguf)

Q = gguf.GGMLQuantizationType
ALL_F32 = {f"blk.{i}.{k}.weight": Q.F32 for i in range(LAYERS)
           for k in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")}
ALL_F32["output.weight"] = Q.F32


def quantize_file(tmp_path, arch: str, ftype: str, tied: bool = False, dims=None):
    """An F32 GGUF quantized by llama-quantize to ``ftype``, as a user would; ``tied``: no
    output.weight (token_embd is the output matrix, as in Qwen2.5-0.5B/1.5B); ``dims``:
    write_gguf's."""
    exe = shutil.which("llama-quantize")
    assert exe, "llama-quantize is missing from the root filesystem (llama.cpp-tools, scripts/rootfs-packages.txt)"
    src = write_gguf(tmp_path / f"{arch}-f32{'-tied' if tied else ''}.gguf", arch=arch, override=ALL_F32,
                     drop=("output.weight",) if tied else (), dims=dims)
    out = tmp_path / f"{arch}-{ftype}{'-tied' if tied else ''}.gguf"
    r = subprocess.run([exe, str(src), str(out), ftype], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def check_against_dequantized(model, path, tol_ulps=4):
    """Every quantized Linear equals gguf.dequantize bit for bit and is in its file's format;
    logits equal a twin holding those weights in FP32 within tol_ulps BF16 ulps."""
    from test_transformers import PROMPT, STEPS, bf16_ulp, teacher_forced_logits

    from rvv_inductor.gguf_load import _unpermute

    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}
    ref_w = gguf_dequantized(path)
    if model.config.model_type == "llama":  # llama.cpp's converter permutes q/k rows for its RoPE
        for i in range(LAYERS):
            for kind, heads in (("attn_q", HEADS), ("attn_k", KV)):
                name = f"blk.{i}.{kind}.weight"
                ref_w[name] = torch.from_numpy(np.ascontiguousarray(_unpermute(ref_w[name].numpy(), heads)))
    quant = {n: m for n, m in model.named_modules() if isinstance(m, regional.RVVQuantLinear)}
    formats = {}
    for name, layer in quant.items():
        gname = _gguf_name(name, types)
        assert layer.format.upper() == types[gname] or (layer.format, types[gname]) in (
            ("int8", "Q8_0"), ("int4", "Q4_0")), f"{name}: {layer.format} for a {types[gname]} tensor"
        assert torch.equal(layer.dequantized(), ref_w[gname]), f"{name}: differs from gguf.dequantize"
        formats[layer.format] = formats.get(layer.format, 0) + 1
    ref = dequantized_twin(path)
    torch.manual_seed(3)
    tokens = torch.randint(0, VOCAB, (1, PROMPT + STEPS))
    want = teacher_forced_logits(ref, tokens)
    got = teacher_forced_logits(model, tokens)
    tol = tol_ulps * bf16_ulp(want.abs().max().item())
    print(f"{path.name}: formats {formats}, max logit difference {(got - want).abs().max().item():.4g} (tol {tol:.4g})")
    assert (got - want).abs().max().item() <= tol
    return formats, want, got, tokens


def dequantized_twin(path):
    """load_gguf's model of ``path`` with every quantized Linear an FP32 product of its exact
    weight (what the file's blocks decode to)."""
    ref = load_gguf(path)
    for name, layer in list(ref.named_modules()):
        if isinstance(layer, regional.RVVQuantLinear):
            parent, _, child = name.rpartition(".")
            setattr(ref.get_submodule(parent) if parent else ref, child, FP32Linear(layer.dequantized(), layer.bias))
    return ref


def _gguf_name(name: str, types: dict) -> str:
    """The file's tensor of a layer: a tied file's lm_head is its token_embd."""
    g = hf_to_gguf(name)
    return "token_embd.weight" if g == "output.weight" and g not in types else g


@pytest.fixture(scope="module")
def q4_k_m(tmp_path_factory):
    """One Qwen2 Q4_K_M file for the tests of this module (llama-quantize runs once)."""
    return quantize_file(tmp_path_factory.mktemp("q4km"), "qwen2", "Q4_K_M")


@pytest.mark.parametrize("arch,ftype,expect", [
    ("qwen2", "Q4_K_M", {"q4_k", "q6_k"}),
    ("llama", "Q5_K_M", {"q5_k", "q6_k"}),
    ("qwen2", "Q4_1", {"q4_1"}),
    ("llama", "IQ4_NL", {"iq4_nl"}),
    ("qwen2", "IQ4_XS", {"iq4_xs"}),
    ("qwen2", "Q2_K", {"q2_k"}),
    ("llama", "Q3_K_M", {"q3_k"}),
])
def test_llama_quantize_mix_loads_bit_exact(tmp_path, q4_k_m, arch, ftype, expect):
    path = q4_k_m if (arch, ftype) == ("qwen2", "Q4_K_M") else quantize_file(tmp_path, arch, ftype)
    from test_int8_activations import LOGIT_BOUND
    from test_transformers import teacher_forced_logits

    model = load_gguf(path, activations="bf16")
    formats, want, got16, tokens = check_against_dequantized(model, path)
    assert expect <= set(formats), f"{ftype}: expected layers in {expect}, got {formats}"
    model8 = load_gguf(path)  # "auto": INT8 activations for every block format
    layers8 = [m for m in model8.modules() if isinstance(m, regional.RVVQuantLinear)]
    assert layers8 and all(m.activations_used == "int8" for m in layers8), {m.format: m.activations_used
                                                                           for m in layers8}
    got8 = teacher_forced_logits(model8, tokens)
    scale = want.abs().max().item()
    d8, d16 = (got8 - want).abs().max().item() / scale, (got16 - want).abs().max().item() / scale
    print(f"{ftype}: max |logit - FP32 twin| / max|logit|: INT8 activations {d8:.4f}, BF16 {d16:.4f}")
    assert d16 < d8 <= LOGIT_BOUND


def test_tied_q4_k_m_keeps_one_packed_vocabulary_matrix(tmp_path):
    """A tied file (no output.weight, as Qwen2.5-1.5B): llama-quantize makes token_embd
    Q6_K; lm_head holds those blocks (what llama.cpp reads for its output) and the
    embedding looks its rows up in them, so the model holds no BF16 vocabulary table; the
    weights equal gguf.dequantize and the logits the FP32 twin's."""
    path = quantize_file(tmp_path, "qwen2", "Q4_K_M", tied=True)
    emb_type = next(t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors if t.name == "token_embd.weight")
    model = load_gguf(path, activations="bf16")
    assert isinstance(model.lm_head, regional.RVVQuantLinear) and model.lm_head.format == emb_type.lower(), emb_type
    assert isinstance(model.get_input_embeddings(), regional.RVVTiedEmbedding)
    assert not [n for n, p in model.named_parameters() if p.shape[0] == VOCAB], "a BF16 vocabulary table is left"
    ids = torch.tensor([[0, 7, VOCAB - 1]])
    ref_emb = gguf_dequantized(path)["token_embd.weight"]
    assert torch.equal(model.get_input_embeddings()(ids)[0], ref_emb[ids[0]].to(torch.bfloat16))
    check_against_dequantized(model, path)
    # What `serve FILE.gguf` loads: the same layers, nothing left on ATen, the same logits.
    from test_transformers import PROMPT, STEPS, teacher_forced_logits

    from rvv_inductor import serve

    served, report = serve.load_gguf_packed(path, "bf16")
    assert served.lm_head.format == model.lm_head.format and not report.fell_back
    assert not [n for n, m in served.named_modules() if type(m) is torch.nn.Linear]
    tokens = torch.randint(0, VOCAB, (1, PROMPT + STEPS), generator=torch.Generator().manual_seed(5))
    assert torch.equal(teacher_forced_logits(served, tokens), teacher_forced_logits(model, tokens))


def test_q4_k_m_matches_transformers_gguf_loading(q4_k_m, monkeypatch):
    """The same file through transformers' own GGUF loader (it dequantizes Q4_K/Q6_K with
    gguf): the weights agree bit for bit and the logits within 4 BF16 ulps."""
    model = load_gguf(q4_k_m, activations="bf16")
    assert any(m.format == "q4_k" for m in model.modules() if isinstance(m, regional.RVVQuantLinear))
    check_against_transformers(model, q4_k_m, monkeypatch)


def check_against_transformers(model, path, monkeypatch, tol_ulps=4):
    """transformers' own GGUF loading of ``path``: every quantized Linear of ``model`` equals
    its weight bit for bit, and the logits agree within ``tol_ulps`` BF16 ulps of a twin
    holding transformers' weights (the quantized Linears in FP32). Returns the largest
    logit difference."""
    from test_transformers import PROMPT, STEPS, bf16_ulp, teacher_forced_logits

    theirs = transformers_gguf_model(monkeypatch, path)
    sd = theirs.state_dict()
    quant = {n: m for n, m in model.named_modules() if isinstance(m, regional.RVVQuantLinear)}
    for name, layer in quant.items():
        assert torch.equal(layer.dequantized(), sd[name + ".weight"]), f"{name}: differs from transformers'"
    ref = type(theirs)(theirs.config).to(torch.bfloat16).eval()
    ref.load_state_dict({k: v.to(torch.bfloat16) for k, v in sd.items()})
    for name, layer in quant.items():
        parent, _, child = name.rpartition(".")
        setattr(ref.get_submodule(parent) if parent else ref, child,
                FP32Linear(sd[name + ".weight"], sd.get(name + ".bias")))
    torch.manual_seed(4)
    tokens = torch.randint(0, VOCAB, (1, PROMPT + STEPS))
    want = teacher_forced_logits(ref, tokens)
    got = teacher_forced_logits(model, tokens)
    tol = tol_ulps * bf16_ulp(want.abs().max().item())
    diff = (got - want).abs().max().item()
    print(f"{path.name}: max logit difference to transformers' GGUF model {diff:.4g} (tol {tol:.4g})")
    assert diff <= tol
    return diff


_LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@pytest.mark.parametrize("qtype", ["Q5_0", "Q5_1"])
def test_fallback_types_load_bit_exact(tmp_path, qtype):
    """The types llama-quantize falls back to where K is not a multiple of 256 (Q4_K ->
    Q5_0, Q5_K -> Q5_1), written by gguf's own quantizer into every Linear: each loads in
    its format, equal to gguf.dequantize bit for bit, with the FP32 twin's logits; with
    INT8 activations (the default) within test_int8_activations' bound."""
    from test_int8_activations import LOGIT_BOUND
    from test_transformers import teacher_forced_logits

    types = {f"blk.{i}.{k}.weight": Q[qtype] for i in range(LAYERS) for k in _LINEARS}
    types["output.weight"] = Q[qtype]
    path = write_gguf(tmp_path / f"{qtype}.gguf", override=types)
    formats, want, got16, tokens = check_against_dequantized(load_gguf(path, activations="bf16"), path)
    assert formats == {qtype.lower(): len(types)}, formats
    model8 = load_gguf(path)
    assert all(m.activations_used == "int8" for m in model8.modules() if isinstance(m, regional.RVVQuantLinear))
    got8 = teacher_forced_logits(model8, tokens)
    assert (got8 - want).abs().max().item() / want.abs().max().item() <= LOGIT_BOUND


@pytest.mark.parametrize("ff", [1024, pytest.param(4864, marks=pytest.mark.slow)])
def test_qwen2_5_0_5b_shaped_q4_k_m_loads_its_fallback_types(tmp_path, monkeypatch, ff):
    """Qwen2.5-0.5B's shapes (hidden 896, 14 heads, 2 KV heads; one layer; intermediate
    4864, or 1024 in the bounded tier: the same types at a fifth of the cost) made Q4_K_M
    by llama-quantize, as the most downloaded file is: the Linears with K = 896 fall back to
    Q5_0 (for Q4_K) and Q8_0 (for Q6_K), ffn_down (K = ff, a multiple of 256) keeps its
    K-quant. Every tensor loads in its own format (no BF16), bit for bit gguf.dequantize,
    and the model agrees with transformers' loading of the same file."""
    path = quantize_file(tmp_path, "qwen2", "Q4_K_M", dims=dict(H=896, FF=ff, LAYERS=1, HEADS=14, KV=2))
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}
    assert types["blk.0.attn_q.weight"] == "Q5_0" and types["blk.0.ffn_down.weight"] in ("Q4_K", "Q6_K"), types
    model = load_gguf(path, activations="bf16")
    assert not [n for n, m in model.named_modules() if type(m) is torch.nn.Linear], "a Linear left in BF16"
    formats, *_ = check_against_dequantized(model, path)
    assert "q5_0" in formats and "int8" in formats, formats
    check_against_transformers(model, path, monkeypatch)


def test_block_format_layer_refuses_requantization(q4_k_m):
    """A K-quant layer holds the file's blocks: setting its weight is a clear error, and its
    state_dict weight is the dequantized one."""
    model = load_gguf(q4_k_m)
    layer = next(m for m in model.modules() if isinstance(m, regional.RVVQuantLinear) and m.format == "q4_k")
    w = layer.weight.detach().clone()
    assert torch.equal(w, layer.dequantized().to(torch.bfloat16))
    with pytest.raises(ValueError, match="quantizer"):
        layer.weight = torch.nn.Parameter(w)
    with pytest.raises(ValueError, match="dequantized"):
        layer.quantized_tensors()


@pytest.mark.slow
@needs_runner
def test_q4_k_m_package_keeps_the_file_formats(q4_k_m, tmp_path, watchdog):
    """``export FILE.gguf`` (its default ``--weights file``): every Linear of the Q4_K_M
    file runs in its own format from the file's blocks (the GEMV), none quantized again;
    rvv-generate's logits match the model holding gguf.dequantize's weights; ``verify``
    passes. Decode only (--prefill-chunk 0), to keep CI inside its hour: the prefill
    graph's INT8-activation GEMM on the file's blocks was run with this test's checks
    (every projection at M = 4 on gemm_x8, logits within 0.002 against the tolerance
    0.0098) when it was written, and runs in the demo's package-q4_k_m mode
    (bench/results/demo-q4km); its kernel entry is tested bit for bit in
    block_quant_test (BlockQuantInductor)."""
    import collections
    import json
    import subprocess as sp
    import sys
    import zipfile

    from test_export import CACHE, NEW, PROMPT, assert_matches_reference, run

    from rvv_inductor import export, quantized

    pkg = tmp_path / "q4km.pt2"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
        torch._dynamo.reset()
        try:
            assert export.main([str(q4_k_m), "-o", str(pkg), "--max-cache-len", str(CACHE),
                                "--prefill-chunk", "0"]) == 0
        finally:
            import rvv_inductor

            rvv_inductor.disable()
            torch._dynamo.reset()
    watchdog()
    # The file's Linear weights by (N, K, our format name), from the file itself.
    by_gguf = {v["gguf_type"]: k for k, v in quantized.weight_formats().items() if v["gguf_type"]}
    linears = [t for t in gguf.GGUFReader(str(q4_k_m)).tensors
               if t.name.startswith("blk.") and not t.name.endswith(("_norm.weight", ".bias")) or t.name == "output.weight"]
    want = collections.Counter((int(t.shape[1]), int(t.shape[0]), by_gguf[t.tensor_type.name]) for t in linears)
    assert {f for _, _, f in want} >= {"q4_k", "q6_k"}, want
    meta = export.read_meta(str(pkg))
    formats = collections.Counter()
    for (_, _, f), count in want.items():
        formats[f] += count
    assert meta["weights"] == "file" and meta["file_formats"] == dict(sorted(formats.items())), meta
    assert meta["activations"] == "int8" and meta["prefill_chunk"] == 0

    v = sp.run([sys.executable, "-m", "rvv_inductor", "verify", str(pkg), "--json"], capture_output=True, text=True,
               timeout=600)
    report = json.loads(v.stdout)
    assert v.returncode == 0 and report["ok"], report["problems"]
    with zipfile.ZipFile(pkg) as z:  # every routing decision (verify's report lists each shape once)
        log = z.read(next(n for n in z.namelist() if n.endswith("extra/" + export.ROUTING_FILE))).decode()
    routed = [e for e in map(json.loads, log.splitlines()) if e["op"] in ("mm", "addmm")]
    assert routed and all(e["route"] == "rvv" for e in routed), [e for e in routed if e["route"] != "rvv"]
    assert all("file's blocks" in e["reason"] for e in routed), routed[:3]
    # decode: every Linear once, on the GEMV of its format.
    decode = collections.Counter((e["N"], e["K"], e["dtype"]) for e in routed)
    assert all(e["M"] == 1 and "/gemv_1xm8 " in e["reason"] for e in routed), routed[:3]
    assert decode == want, (decode, want)

    dump = tmp_path / "logits.bin"
    r = run(pkg, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", NEW, "--dump-logits", dump,
            "--ignore-eos")
    tokens = [int(t) for t in r.stdout.splitlines()[0].split(": ")[1].split(",")]
    got = torch.from_numpy(np.fromfile(dump, dtype="float32").reshape(NEW, -1))

    # The reference: load_gguf's model with every quantized Linear an FP32 product of its
    # exact weight. No prefill model: rvv-generate runs the prompt through the decode step
    # (M = 1, FP activations), so no activation is quantized.
    ref = load_gguf(q4_k_m, activations="bf16")
    for name, layer in list(ref.named_modules()):
        if isinstance(layer, regional.RVVQuantLinear):
            parent, _, child = name.rpartition(".")
            setattr(ref.get_submodule(parent) if parent else ref, child, FP32Linear(layer.dequantized(), layer.bias))
    assert_matches_reference(ref, tokens, got, "Q4_K_M package")


@pytest.mark.slow
def test_q4_k_m_with_compiled_layers(q4_k_m, inductor_cache):
    """load_gguf(path, compile_layers=True), what ``serve FILE.gguf`` runs by default: every
    decoder layer compiled, each Linear still in its file format (Q4_K and Q6_K layers mix
    in one model), logits as the same file's eager layers give them."""
    from test_transformers import PROMPT, STEPS, bf16_ulp, teacher_forced_logits

    from rvv_inductor import layer_regions

    torch._dynamo.reset()
    eager = load_gguf(q4_k_m)
    model = load_gguf(q4_k_m, compile_layers=True)
    assert all(layer_regions.is_compiled(layer) for layer in model.model.layers)
    formats = {m.format for m in model.modules() if isinstance(m, regional.RVVQuantLinear)}
    assert {"q4_k", "q6_k"} <= formats, formats
    with pytest.raises(ValueError, match="compile_layers"):
        load_gguf(q4_k_m, compile_layers="yes")
    torch.manual_seed(5)
    tokens = torch.randint(0, VOCAB, (1, PROMPT + STEPS))
    want, got = teacher_forced_logits(eager, tokens), teacher_forced_logits(model, tokens)
    # As test_layer_regions: fused FP32 RMSNorm/RoPE/SiLU against eager's BF16 rounding.
    tol = 8 * bf16_ulp(want.abs().max().item())
    assert (got - want).abs().max().item() <= tol


# ---------------------------------------------------------------------------------------
# qwen3: files written by the demo's write_gguf from a random transformers Qwen3 (heads of
# 128 where hidden / heads is 64 or 160, per-head q/k RMSNorm, no biases), each written
# once per module.

QWEN3_HEAD_DIM = 128  # transformers' GGUF loading of qwen3 takes Qwen3Config's default head_dim (test_gguf)
QWEN3_SHAPES = {
    # 4 heads of 128 in a width of 256: q_proj [512, 256], o_proj [256, 512]
    "small": dict(hidden=256, heads=HEADS, kv_heads=KV),
    # hidden 640 is no multiple of 256: llama-quantize's Q4_K_M falls back to Q5_0 / Q8_0 in
    # q/k/v/gate/up and the output matrix; o_proj (K = 512) and ffn_down (K = 1280) keep K-quants
    "k640": dict(hidden=640, heads=HEADS, kv_heads=KV, intermediate=1280, layers=1),
}


@pytest.fixture(scope="module")
def qwen3_file(tmp_path_factory):
    """qwen3_file(fmt, shape="small") -> (transformers model, GGUF path): write_gguf of a
    random Qwen3 in ``fmt`` (bf16, q8_0, q4_0 or q4_k_m: bf16 then llama-quantize)."""
    from small_decoders import random_decoder

    from rvv_inductor.demo import llamacpp

    where, made = tmp_path_factory.mktemp("qwen3"), {}

    def get(fmt, shape="small"):
        if (fmt, shape) not in made:
            dims = {"layers": LAYERS, **QWEN3_SHAPES[shape]}
            model = random_decoder("qwen3", vocab=VOCAB, max_positions=256, init_range=0.05, head_dim=QWEN3_HEAD_DIM,
                                   seed=7, **dims).to(torch.bfloat16).eval()
            info = llamacpp.write_gguf(model, where / f"qwen3-{shape}-{fmt}.gguf", fmt)
            made[fmt, shape] = model, pathlib.Path(info["path"])
        return made[fmt, shape]

    return get


def _qwen3_structure(model, hidden=256):
    cfg = model.config
    assert type(model).__name__ == "Qwen3ForCausalLM" and cfg.head_dim == QWEN3_HEAD_DIM != hidden // cfg.num_attention_heads
    attn = model.model.layers[0].self_attn
    assert (attn.q_proj.out_features, attn.o_proj.in_features) == (HEADS * QWEN3_HEAD_DIM,) * 2
    assert attn.q_norm.weight.shape == attn.k_norm.weight.shape == (QWEN3_HEAD_DIM,)
    assert attn.q_proj.bias is None and not cfg.attention_bias


# The bounded tier runs Q4_0 (~10 s): BF16 compiles the regional BF16 artifacts of these
# shapes (~260 s emulated), and Q8_0 against transformers is test_gguf's qwen3 file too.
@pytest.mark.parametrize("fmt", [pytest.param("bf16", marks=pytest.mark.slow), pytest.param("q8_0", marks=pytest.mark.slow),
                                 "q4_0"])
def test_qwen3_from_write_gguf_matches_transformers(qwen3_file, monkeypatch, fmt):
    """A random Qwen3 written by the demo's write_gguf, loaded by load_gguf on the regional
    path: Q8_0/Q4_0 Linears packed from the file's blocks, BF16 ones packed by
    compile_linears; every Linear on RVV; weights equal transformers' GGUF loading of the
    same file bit for bit, logits within 4 BF16 ulps of its model. The q/k norms are the
    source model's (random, so a swap would show)."""
    source, path = qwen3_file(fmt)
    model = load_gguf(path, activations="bf16")
    _qwen3_structure(model)
    for i, layer in enumerate(model.model.layers):
        for norm in ("q_norm", "k_norm"):
            assert torch.equal(getattr(layer.self_attn, norm).weight, getattr(source.model.layers[i].self_attn, norm)
                               .weight), f"layer {i} {norm}"
    if fmt == "bf16":
        regional.compile_linears(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear) or isinstance(m, regional.RVVLinear)]
    assert len(linears) == LAYERS * 7 + 1
    assert all(isinstance(m, regional.RVVLinear) for m in linears), [type(m).__name__ for m in linears]
    assert {m.format for m in linears} == {{"bf16": "bf16", "q8_0": "int8", "q4_0": "int4"}[fmt]}
    check_against_transformers(model, path, monkeypatch)
    if fmt == "q4_0":  # what `serve FILE.gguf` checks and loads: the same layers and logits
        from test_transformers import PROMPT, STEPS, teacher_forced_logits

        from rvv_inductor import serve

        assert serve.check_model(str(path), None) == path.resolve()
        served, report = serve.load_gguf_packed(path, "bf16")
        assert not report.fell_back and not [n for n, m in served.named_modules() if type(m) is torch.nn.Linear]
        tokens = torch.randint(0, VOCAB, (1, PROMPT + STEPS), generator=torch.Generator().manual_seed(5))
        assert torch.equal(teacher_forced_logits(served, tokens), teacher_forced_logits(model, tokens))


@pytest.mark.slow
def test_qwen3_with_compiled_layers(qwen3_file, monkeypatch, inductor_cache):
    """load_gguf(path, compile_layers=True) on a Qwen3 Q4_0 file: every decoder layer one
    compiled region (q/k norms of 128-wide heads inside it, attention on the RVV op), the
    logits within 8 BF16 ulps of transformers' GGUF model (as test_layer_regions: fused FP32
    RMSNorm/RoPE/SiLU against eager's BF16 rounding)."""
    from rvv_inductor import layer_regions

    _, path = qwen3_file("q4_0")
    torch._dynamo.reset()
    model = load_gguf(path, compile_layers=True, activations="bf16")
    _qwen3_structure(model)
    assert all(layer_regions.is_compiled(layer) for layer in model.model.layers)
    assert model.config._attn_implementation == "rvv"
    check_against_transformers(model, path, monkeypatch, tol_ulps=8)


def test_qwen3_q4_k_m_loads_its_fallback_types(qwen3_file, monkeypatch):
    """write_gguf's BF16 Qwen3 (one layer) made Q4_K_M by Debian's llama-quantize (hidden 640: K not a
    multiple of 256 in q/k/v/gate/up and the output matrix): each tensor loads in its own
    format (Q5_0, Q8_0 and K-quants mixed, no BF16 Linear), bit for bit gguf.dequantize,
    with the FP32 twin's logits, and agrees with transformers' loading of the file."""
    _, path = qwen3_file("q4_k_m", "k640")
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}
    assert types["blk.0.attn_q.weight"] == "Q5_0" and types["blk.0.attn_q_norm.weight"] == "F32", types
    assert types["blk.0.attn_output.weight"] in ("Q4_K", "Q6_K") and types["blk.0.ffn_down.weight"] in ("Q4_K", "Q6_K")
    model = load_gguf(path, activations="bf16")
    _qwen3_structure(model, hidden=640)
    assert not [n for n, m in model.named_modules() if type(m) is torch.nn.Linear], "a Linear left in BF16"
    formats, *_ = check_against_dequantized(model, path)
    assert {"q5_0", "q4_k"} <= set(formats), formats
    check_against_transformers(model, path, monkeypatch)


def test_qwen3_q4_k_m_against_llamacpp(qwen3_file, tmp_path):
    """llama.cpp (bench/llama_decode, Debian's libllama) on the same Qwen3 Q4_K_M file,
    teacher-forced on our greedy tokens: the logit distance of each to the FP32 twin (the
    file's exact weights) is reported; ours (FP path) within 4 BF16 ulps of it, llama.cpp's
    (Q8_K/Q8_0 activations, F16 KV cache) within test_int8_activations' bound. Needs
    RVV_LLAMA_DECODE (skipped without, as test_llamacpp.py)."""
    from test_int8_activations import LOGIT_BOUND
    from test_llamacpp import PROMPT as LPROMPT
    from test_llamacpp import STEPS as LSTEPS
    from test_llamacpp import bf16_ulp, forced, greedy

    from rvv_inductor.demo import llamacpp

    if not llamacpp.driver():
        pytest.skip(f"{llamacpp.ENV} is not set: build bench/llama_decode (ninja -C build/bench-rv64 llama_decode)")
    why = llamacpp.unavailable()
    assert why is None, why
    _, path = qwen3_file("q4_k_m", "k640")
    torch.manual_seed(6)
    prompt = torch.randint(0, VOCAB, (1, LPROMPT))
    got, tokens = greedy(load_gguf(path, activations="bf16"), prompt, LSTEPS)
    want = forced(dequantized_twin(path), torch.cat([prompt, torch.tensor([tokens[:-1]])], 1))
    logits_path = tmp_path / "logits.bin"
    out = llamacpp.run(path, prompt[0].tolist(), LSTEPS, feed=tokens[:-1], logits_path=logits_path)
    lz = torch.from_numpy(np.fromfile(logits_path, dtype=np.float32).reshape(LPROMPT + LSTEPS, VOCAB))[LPROMPT - 1:]
    scale = want.abs().max().item()
    d_ours, d_llama, d_both = ((a - b).abs().max().item() for a, b in ((got, want), (lz, want), (got, lz)))
    agree = (lz.argmax(-1) == got.argmax(-1)).float().mean().item()
    print(f"{path.name}: |z|max {scale:.3f}; max |logit - FP32 twin|: ours {d_ours:.4f}, llama.cpp {d_llama:.4f} "
          f"({d_llama / scale:.4f} of |z|max); ours - llama.cpp {d_both:.4f}; top-1 agreement {agree:.0%}; "
          f"ggml variant {os.path.basename(out['ggml_cpu_so'])}")
    assert d_ours <= 4 * bf16_ulp(scale)
    assert d_llama / scale <= LOGIT_BOUND


@pytest.mark.slow
@needs_runner
def test_qwen3_package(qwen3_file, tmp_path, watchdog):
    """``export FILE.gguf`` of write_gguf's Qwen3 Q4_0 (q/k norms, heads of 128 in a width of
    256; --weights file), decode only (--prefill-chunk 0, as the Q4_K_M package test):
    rvv-generate's tokens and logits match load_gguf's model with the file's exact weights
    in FP32 (test_export's tolerance)."""
    from test_export import CACHE, NEW, PROMPT, assert_matches_reference, run

    from rvv_inductor import export

    _, path = qwen3_file("q4_0")
    pkg = tmp_path / "qwen3.pt2"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
        torch._dynamo.reset()
        try:
            assert export.main([str(path), "-o", str(pkg), "--max-cache-len", str(CACHE), "--prefill-chunk", "0"]) == 0
        finally:
            import rvv_inductor

            rvv_inductor.disable()
            torch._dynamo.reset()
    watchdog()
    assert export.read_meta(str(pkg))["model_type"] == "qwen3"
    dump = tmp_path / "logits.bin"
    r = run(pkg, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-new-tokens", NEW, "--dump-logits", dump,
            "--ignore-eos")
    tokens = [int(t) for t in r.stdout.splitlines()[0].split(": ")[1].split(",")]
    got = torch.from_numpy(np.fromfile(dump, dtype="float32").reshape(NEW, -1))
    assert_matches_reference(dequantized_twin(path), tokens, got, "Qwen3 Q4_0 package")
