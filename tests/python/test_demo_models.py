"""The demo's model code against transformers and torch: parameter counts, checkpoint
loading, and the agreement arithmetic of the report. (Input checks and the torch-free
arithmetic: glue/test_demo_cli.py.)"""
from __future__ import annotations

import pytest
import torch

from rvv_inductor.demo import models, report


def test_param_count_matches_transformers():
    transformers = pytest.importorskip("transformers")
    cfg = models.config_dict("tiny", 1)
    m = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**cfg))
    assert models.param_count(cfg) == sum(p.numel() for p in m.parameters())


def test_qwen3_config_builds():
    """--config qwen3-0.6b (here 1 layer, a small vocabulary): a transformers Qwen3 of heads
    of 128 (q_proj [2048, 1024]), param_count equal to its parameters, built from the pool."""
    transformers = pytest.importorskip("transformers")
    cfg = dict(models.config_dict("qwen3-0.6b", 1), vocab_size=512)
    config, cls = models.hf_config(transformers, cfg)
    with torch.device("meta"):
        meta = cls(config)
    assert models.param_count(cfg) == sum(p.numel() for p in meta.parameters())
    m = models.build({"seed": 3, "config": cfg})
    assert type(m) is transformers.Qwen3ForCausalLM and m.model.layers[0].self_attn.q_proj.weight.shape == (2048, 1024)
    assert m.lm_head.weight is m.model.embed_tokens.weight
    assert torch.equal(m.model.layers[0].self_attn.q_norm.weight, torch.ones(128, dtype=torch.bfloat16))


def test_checkpoint_round_trip(tmp_path):
    """--model loads exactly the weights a checkpoint holds (saved by transformers)."""
    transformers = pytest.importorskip("transformers")
    cfg = dict(models.config_dict("tiny", 1), hidden_size=128, intermediate_size=256, vocab_size=512,
               num_attention_heads=4)
    torch.manual_seed(1)
    ref = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**cfg)).to(torch.bfloat16)
    ref.save_pretrained(tmp_path, safe_serialization=True)
    assert models.inspect_checkpoint(str(tmp_path))["hidden_size"] == 128
    got = models.build({"seed": 5, "model_dir": str(tmp_path)})
    sd = got.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(sd[k], v), k


def test_agreement_arithmetic():
    e = torch.zeros(1, 2, 4)
    e[0, 0] = torch.tensor([8.0, 1.0, 0.0, 0.0])   # decisive (margin 7)
    e[0, 1] = torch.tensor([8.0, 7.99, 0.0, 0.0])  # a near-tie: not decisive
    o = e.clone()
    o[0, 1] = torch.tensor([7.9, 8.0, 0.0, 0.0])   # flips the near-tie only
    (a,) = report.agreement({(1, 2): e.bfloat16()}, {(1, 2): o.bfloat16()})
    # BF16 spacing at 8 is 2**(3-7) = 1/16, so 4 ulps = 0.25. Below 8 the spacing is 1/32:
    # 7.99 rounds to 8.0 (a tie with 8) and 7.9 to 7.90625, so the largest difference is 0.09375.
    assert a["tolerance"] == 0.25
    assert a["max_abs_diff"] == 0.09375
    assert (a["decisive"], a["decisive_agree"], a["argmax_agree_all"]) == (1, 1, 1)




def test_linear_weight_bytes():
    """What the demo reports as weight bytes per decode step: every Linear weight as stored,
    against the format's own arithmetic (BF16: 2 bytes per weight; INT4 groups of 64 with
    FP16 scales: 1/2 byte per weight + 2 per group, up to block padding)."""
    pytest.importorskip("transformers")
    from rvv_inductor import cpu
    from rvv_inductor.demo import worker
    from rvv_inductor.regional import compile_linears

    cfg = dict(models.config_dict("tiny", 1), hidden_size=256, intermediate_size=512, vocab_size=512,
               num_attention_heads=4)
    model = models.build({"seed": 3, "config": cfg})
    mats = [(m.out_features, m.in_features) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert worker.linear_weight_bytes(model) == sum(2 * n * k for n, k in mats)
    if not cpu.effective().has_v:
        pytest.skip("no V: compile_linears takes no layer, nothing is quantized")
    compile_linears(model, weights="int4")
    want = sum(n * k // 2 + 2 * n * (k // 64) for n, k in mats)
    got = worker.linear_weight_bytes(model)
    assert want <= got <= 1.03 * want, (got, want)


def test_fill_from_pool():
    """The random weights are windows of a cyclic pool: the same values as the pool
    repeated and sliced, at every offset, for tensors shorter and longer than the pool."""
    pool = torch.arange(7, dtype=torch.float32)
    for n in (1, 5, 7, 8, 20):
        for off in range(7):
            got = torch.empty(n)
            models._fill_from_pool(got, pool, off)
            assert torch.equal(got, pool.repeat((off + n) // 7 + 1)[off:off + n]), (n, off)


@pytest.mark.parametrize("tied", [False, True])
def test_lazy_build_same_weights(tied):
    """The regional modes build on the meta device and let compile_linears(load=...) make
    each weight on demand: every tensor must equal what models.build gives eager, bit for bit."""
    pytest.importorskip("transformers")
    from rvv_inductor.regional import compile_linears

    cfg = dict(models.config_dict("tiny", 1), hidden_size=256, intermediate_size=512, vocab_size=512,
               num_attention_heads=4, tie_word_embeddings=tied)
    spec = {"seed": 7, "config": cfg}
    ref = models.build(spec).state_dict()
    model, load = models.build_lazy(spec)
    compile_linears(model, load=load)
    got = model.state_dict()
    assert set(got) == set(ref)
    for k, v in ref.items():
        assert got[k].device.type == "cpu" and torch.equal(got[k], v), k
    with pytest.raises(KeyError):
        load("no.such.weight", torch.empty(1, device="meta"))


@pytest.mark.parametrize("arch,tied", [("qwen2", True), ("qwen2", False), ("llama", False)])
def test_lazy_build_checkpoint(tmp_path, arch, tied):
    """--model with a regional mode: the model is built on the meta device from config.json
    and compile_linears reads the safetensors one tensor at a time; every tensor must equal
    what transformers saved, and the logits what transformers' own loading gives."""
    transformers = pytest.importorskip("transformers")
    from rvv_inductor.regional import compile_linears

    kw = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=512, tie_word_embeddings=tied, max_position_embeddings=64)
    cfg = transformers.Qwen2Config(**kw) if arch == "qwen2" else transformers.LlamaConfig(**kw)
    torch.manual_seed(4)
    ref = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).eval()
    ref.save_pretrained(tmp_path, safe_serialization=True)
    model, load = models.build_lazy({"seed": 0, "model_dir": str(tmp_path)})
    assert load == str(tmp_path)
    assert any(p.device.type == "meta" for p in model.parameters())
    compile_linears(model, load=load)
    got, want = model.state_dict(), ref.state_dict()
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k].device.type == "cpu" and torch.equal(got[k], v), k
    ids = torch.tensor([[3, 17, 200, 5]])
    with torch.no_grad():
        a, b = model(ids).logits.float(), ref(ids).logits.float()
    # the same BF16 weights: the RVV kernels accumulate in FP32 in another order than ATen
    tol = 4 * 2.0 ** (torch.floor(torch.log2(b.abs().max())) - 7)
    assert (a - b).abs().max() <= tol
