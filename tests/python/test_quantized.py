"""compile_linears(weights="int8"/"int4"): quantized RVV Linear layers.

* Each quantized layer against the FP64 product of its dequantized weight, within the
  kernel tests' bound (tests/cpp/quant_test.cpp: the FP32 bound over the terms
  |x|·(|q|+|z|)·|s|, plus the FP16-activation loss of the Zvfh path and the BF16 rounding
  of the output).
* The module contract (state_dict, load_state_dict, in-place updates re-quantize, no
  recompile), the report, and bad arguments.
* Tiny transformers decoders quantized against a plain PyTorch model that multiplies with
  the same dequantized weights in FP32: teacher-forced logits within the BF16 tolerance of
  test_transformers.py, greedy tokens equal on decisive positions. The distance to the BF16
  model is printed, not asserted.
"""
from __future__ import annotations

import copy

import pytest
import torch

import rvv_inductor
from rvv_inductor import cpu, regional

from quant_bounds import kernel_bound  # noqa: E402  (tests/python is on sys.path)

pytestmark = [pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                 reason="needs riscv64 with V (emulated or native)"),
              pytest.mark.usefixtures("inductor_cache")]  # tests/python/conftest.py


def make_linear(n: int, k: int, bias: bool, seed: int = 0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(k, n, bias=bias).to(torch.bfloat16)


def fp64_reference(layer, x):
    w = layer.dequantized().double()
    return x.double() @ w.T + (layer.bias.double() if layer.bias is not None else 0)


@pytest.mark.parametrize("fmt,group", [("int8", 0), ("int8", 64), ("int4", 32), ("int4", 64), ("int4", 128)])
def test_layer_within_kernel_bound(fmt, group):
    info = cpu.effective()
    lin = make_linear(200, 256, bias=True)   # N = 200: a partial last block
    # The FP path (activations="int8", the default at M >= 2: test_int8_activations.py).
    layer = regional.RVVQuantLinear.from_linear(lin, info.block_n, fmt, group, activations="bf16")
    torch.manual_seed(1)
    for m in (1, 5):
        x = torch.randn(m, 256, dtype=torch.bfloat16) * 3
        with torch.no_grad():
            got = layer(x)
        ref = fp64_reference(layer, x)
        bound = kernel_bound(layer, x, ref)
        err = (got.double() - ref).abs()
        assert bool((err <= bound).all()), f"M={m}: max error {err.max().item()}, bound there {bound.flatten()[err.argmax()]}"
    # The dequantized weight is close to the original: round to nearest is half a step;
    # INT4 (Q4_0's d = -max/8, q - 8 in -8..7) clamps the far end of the range: one step.
    qt = layer.quantized_tensors()
    rows = 256 if group == 0 else group
    step = qt["scales"].float().abs().repeat_interleave(rows, dim=1)
    assert bool(((layer.dequantized() - lin.weight.float()).abs() <= step * (0.5 if fmt == "int8" else 1.0) * 1.001 + 1e-6).all())
    # Bytes: per padded column K values of 8 or 4 bits and one FP16 scale per group.
    cols = -(-200 // layer.nb) * layer.nb
    groups = 1 if group == 0 else 256 // group
    assert layer.packed_bytes == cols * (256 * (8 if fmt == "int8" else 4) // 8 + 2 * groups)


def test_inside_torch_compile_no_graph_break():
    """A packed layer's forward traces into the caller's compiled graph (fullgraph=True: a
    graph break would raise): the ``rvv_inductor::linear_packed_q`` / ``linear_packed`` op is
    one node of it, and the result is the eager one bit for bit. (What a per-layer or
    whole-model compile of a model after compile_linears relies on.)"""
    lin = make_linear(256, 256, bias=True)
    for layer in (regional.RVVQuantLinear.from_linear(lin, cpu.effective().block_n, "int4", 64),
                  regional.RVVLinear.from_linear(lin, cpu.effective().block_n)):
        for shape in ((2, 3, 256), (1, 1, 256)):
            x = torch.randn(*shape, dtype=torch.bfloat16)
            torch._dynamo.reset()
            with torch.no_grad():
                want = layer(x)
                got = torch.compile(lambda t: torch.relu(layer(t)), fullgraph=True)(x)
            assert torch.equal(got, torch.relu(want)), (type(layer).__name__, shape)


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(256, 384, bias=True)
        self.lm_head = torch.nn.Linear(384, 256, bias=False)
        self.small = torch.nn.Linear(64, 64, bias=False)

    def forward(self, x):
        return self.lm_head(torch.relu(self.up(x)))


def make_two(seed=0):
    torch.manual_seed(seed)
    return Two().to(torch.bfloat16).eval()


def test_report_formats_and_keep_bf16():
    m = make_two()
    report = rvv_inductor.compile_linears(m, weights="int4", keep_bf16="lm_head")
    print(report)
    assert isinstance(m.up, rvv_inductor.RVVQuantLinear) and m.up.group_size == 64   # the INT4 default
    assert type(m.lm_head) is regional.RVVLinear
    assert isinstance(m.small, torch.nn.Linear)
    fmts = {name: (f, pb, bb) for name, f, pb, bb in report.formats}
    assert fmts["lm_head"] == ("bf16", 384 * 256 * 2, 384 * 256 * 2)
    f, pb, bb = fmts["up"]
    assert (f, bb, pb) == ("int4", 384 * 256 * 2, m.up.packed_bytes)
    assert pb == 384 * 256 // 2 + 384 * (256 // 64) * 2   # nibbles + one FP16 scale per group and column
    assert "int4" in str(report) and "bf16" in str(report)
    m8 = make_two()
    rvv_inductor.compile_linears(m8, weights="int8")
    assert m8.up.group_size == 0 and m8.lm_head.format == "int8"   # per channel by default


@pytest.mark.parametrize("kwargs,match", [
    (dict(weights="int3"), "int3"),
    (dict(weights="int4", group_size=0), "INT8 only"),
    (dict(weights="int4", group_size=48), "group_size=48"),
    (dict(weights="int8", group_size=256), "does not divide K=384 of lm_head"),
    (dict(weights="bf16", group_size=64), "group_size"),
    (dict(weights="int8", keep_bf16=[3]), "keep_bf16"),
])
def test_bad_arguments_change_nothing(kwargs, match):
    m = make_two()
    with pytest.raises(ValueError, match=match):
        rvv_inductor.compile_linears(m, **kwargs)
    assert all(type(mod) is torch.nn.Linear for mod in (m.up, m.lm_head, m.small))
    # keeping the layer whose K the group does not divide makes the same call work
    if "divide" in match:
        rvv_inductor.compile_linears(m, keep_bf16="lm_head", **kwargs)
        assert m.up.format == "int8" and m.lm_head.format == "bf16"


def requantized(w_bf16: torch.Tensor, like: regional.RVVQuantLinear) -> regional.RVVQuantLinear:
    lin = torch.nn.Linear(like.in_features, like.out_features, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        lin.weight.copy_(w_bf16)
    return regional.RVVQuantLinear.from_linear(lin, like.nb, like.format, like.group_size,
                                               activations=like.activations)


def test_module_contract_reload_requantizes():
    m = make_two()
    rvv_inductor.compile_linears(m, weights="int4", group_size=32, activations="bf16")
    up = m.up
    x = torch.randn(4, 256, dtype=torch.bfloat16)
    graphs0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]

    # state_dict: the dequantized weight (bf16, [N, K]), loadable into a plain model.
    sd = m.state_dict()
    assert sd["up.weight"].dtype == torch.bfloat16 and tuple(sd["up.weight"].shape) == (384, 256)
    assert torch.equal(sd["up.weight"], up.dequantized().to(torch.bfloat16))
    plain = make_two(seed=5)
    plain.load_state_dict(sd)
    assert torch.equal(plain.up.weight, sd["up.weight"])

    # the quantized tensors when asked
    qt = up.quantized_tensors()
    assert qt["values"].dtype == torch.int8 and int(qt["values"].min()) >= 0 and int(qt["values"].max()) <= 15
    assert qt["scales"].dtype == torch.float16 and tuple(qt["scales"].shape) == (384, 256 // 32)
    assert bool((qt["zeros"] == 8).all()) and (qt["format"], qt["group_size"]) == ("int4", 32)

    # in-place update of the materialised weight: re-quantized at the next forward
    with torch.no_grad():
        w2 = up.weight.clone() * 3
        up.weight.mul_(3)
        got = up(x)
    want_layer = requantized(w2, up)
    assert torch.equal(up.dequantized(), want_layer.dequantized())
    ref = x.double() @ want_layer.dequantized().double().T + up.bias.double()
    assert bool(((got.double() - ref).abs() <= kernel_bound(up, x, ref)).all())

    # load_state_dict re-quantizes
    torch.manual_seed(7)
    w3 = torch.randn(384, 256, dtype=torch.bfloat16) * 0.05
    sd = m.state_dict()
    sd["up.weight"] = w3
    m.load_state_dict(sd)
    assert torch.equal(up.dequantized(), requantized(w3, up).dequantized())

    # assignment re-quantizes at once; a wrong shape is a clear error
    up.weight = torch.nn.Parameter(w3 * 2)
    assert torch.equal(up.dequantized(), requantized(w3 * 2, up).dequantized())
    with pytest.raises(ValueError, match="does not fit"):
        up.weight = torch.nn.Parameter(torch.zeros(10, 10, dtype=torch.bfloat16))

    with torch.no_grad():
        m(x)
    # no recompile: the quantized op runs its kernel, nothing was compiled for any update
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs0


# --- whole decoders ------------------------------------------------------------------


class DequantizedLinear(torch.nn.Module):
    """The plain PyTorch reference of a quantized layer: F.linear in FP32 with the exact
    dequantized weight, rounded to BF16 like the kernel's output."""

    def __init__(self, layer: regional.RVVQuantLinear):
        super().__init__()
        self.w = layer.dequantized()
        self.b = layer.bias.detach().float() if layer.bias is not None else None

    def forward(self, x):
        return torch.nn.functional.linear(x.float(), self.w, self.b).to(x.dtype)


def dequantized_twin(rvv: torch.nn.Module, eager: torch.nn.Module) -> torch.nn.Module:
    """A copy of the eager model whose Linear layers multiply with the rvv model's
    dequantized weights (BF16-kept layers stay plain nn.Linear)."""
    ref = copy.deepcopy(eager)
    for name, mod in rvv.named_modules():
        if isinstance(mod, regional.RVVQuantLinear):
            parent, _, child = name.rpartition(".")
            setattr(ref.get_submodule(parent) if parent else ref, child, DequantizedLinear(mod))
    return ref


@pytest.mark.parametrize("arch,fmt,keep", [("qwen2", "int8", "lm_head"), ("qwen2", "int4", ()),
                                           ("llama", "int4", ())])
def test_decoder_matches_dequantized_model(arch, fmt, keep):
    transformers = pytest.importorskip("transformers")
    from test_transformers import bf16_ulp, teacher_forced_logits

    common = dict(hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=1024, max_position_embeddings=256, tie_word_embeddings=False)
    config, cls = ((transformers.Qwen2Config(**common), transformers.Qwen2ForCausalLM) if arch == "qwen2" else
                   (transformers.LlamaConfig(**common), transformers.LlamaForCausalLM))
    torch.manual_seed(0)
    eager = cls(config).to(torch.bfloat16).eval()
    rvv = copy.deepcopy(eager)
    report = rvv_inductor.compile_linears(rvv, weights=fmt, keep_bf16=keep, activations="bf16")
    print(report)
    formats = {name.rsplit(".", 1)[-1]: f for name, f, _, _ in report.formats}
    assert formats.pop("lm_head") == ("bf16" if keep else fmt)
    assert set(formats.values()) == {fmt} and len(report.formats) == 2 * 7 + 1
    ref = dequantized_twin(rvv, eager)

    torch.manual_seed(1)
    tokens = torch.randint(0, config.vocab_size, (1, 8 + 16))
    want = teacher_forced_logits(ref, tokens)
    got = teacher_forced_logits(rvv, tokens)
    tol = 4 * bf16_ulp(want.abs().max().item())
    diff = (got - want).abs()
    top2 = want.topk(2, dim=-1).values
    decisive = (top2[..., 0] - top2[..., 1]) > tol
    bf16 = teacher_forced_logits(eager, tokens)
    print(f"{arch} {fmt}: max logit difference to the dequantized model {diff.max().item():.4g} (tol {tol:.4g}); "
          f"to the BF16 model {(got - bf16).abs().max().item():.4g} (max |logit| {bf16.abs().max().item():.3g}), "
          f"top-1 agreement with BF16 {(got.argmax(-1) == bf16.argmax(-1)).float().mean().item():.2%}")
    assert diff.max().item() <= tol, f"max logit difference {diff.max().item()} > {tol}"
    assert decisive.any(), "no decisive position: the test would be vacuous"
    assert bool((want.argmax(-1) == got.argmax(-1))[decisive].all())
