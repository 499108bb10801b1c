"""compile_linears(compile_layers=True): the decoder layers of a transformers model run as
compiled regions around their packed Linear layers, attention through the RVV kernel;
checked against the same packed model run eagerly (teacher-forced logits, greedy tokens),
with weight updates after compiling."""
from __future__ import annotations

import copy

import pytest
import torch

from rvv_inductor import cpu, regional
from small_decoders import random_decoder
from test_transformers import PROMPT, STEPS, bf16_ulp, teacher_forced_logits

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")


def _graphs() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _mixed_workload(model, prompts, steps, seed):
    """Prompts of the given lengths, each followed by ``steps`` teacher-forced decode steps
    (transformers' DynamicCache, as ``generate`` makes it); returns the last logits of each."""
    g = torch.Generator().manual_seed(seed)
    out = []
    with torch.no_grad():
        for p in prompts:
            tokens = torch.randint(0, 512, (1, p + steps), generator=g)
            r = model(tokens[:, :p], use_cache=True)
            for t in range(p, p + steps):
                r = model(tokens[:, t:t + 1], past_key_values=r.past_key_values, use_cache=True)
            out.append(r.logits[:, -1].float())
    return out


def test_compiled_layers_match_eager_share_one_graph_and_follow_weight_updates(inductor_cache):
    torch.manual_seed(0)
    base = random_decoder("qwen2", hidden=512, heads=4, kv_heads=2, vocab=512, max_positions=128,
                          init_range=0.05).to(torch.bfloat16).eval()
    eager, compiled = copy.deepcopy(base), copy.deepcopy(base)
    regional.compile_linears(eager, weights="int4")
    report = regional.compile_linears(compiled, weights="int4", compile_layers=True)
    assert report.compiled_layers == ["model.layers.0", "model.layers.1"] and report.rvv_attention
    assert "2 layers compiled as regions" in str(report)
    with pytest.raises(ValueError, match="compile_layers"):
        regional.compile_linears(copy.deepcopy(base), compile_layers="yes")

    tokens = torch.randint(0, 512, (1, PROMPT + STEPS), generator=torch.Generator().manual_seed(1))

    def compare(what):
        want, got = teacher_forced_logits(eager, tokens), teacher_forced_logits(compiled, tokens)
        # The regions fuse RMSNorm, RoPE and SiLU*up in FP32 where eager rounds each op to
        # BF16, and attention accumulates in another order: hidden states move by a few
        # ulps. Bound: 8 BF16 ulps of the largest logit; greedy tokens agree wherever
        # eager's top-2 margin exceeds it.
        tol = 8 * bf16_ulp(want.abs().max().item())
        diff = (got - want).abs().max().item()
        assert diff <= tol, f"{what}: max logit difference {diff} > {tol}"
        top2 = want.topk(2, dim=-1).values
        decisive = (top2[..., 0] - top2[..., 1]) > tol
        assert decisive.any(), f"{what}: no decisive position, the comparison would be vacuous"
        assert bool((want.argmax(-1) == got.argmax(-1))[decisive].all()), what

    compare("as loaded")

    # One graph serves every layer: after prompts of two lengths (which make the prompt
    # graph's sizes dynamic), a model of twice the depth and the same dimensions runs a
    # mixed workload without compiling anything, and matches its eager twin. (Specialised
    # on the layer index, as before, layers 2 and 3 would have compiled graphs of their own.)
    g0 = _graphs()
    _mixed_workload(compiled, [5, 9], 2, seed=2)
    assert _graphs() > g0, "the warm-up compiled nothing: the graph count below would prove nothing"
    deep = random_decoder("qwen2", hidden=512, heads=4, kv_heads=2, vocab=512, max_positions=128,
                          init_range=0.05, layers=4, seed=3).to(torch.bfloat16).eval()
    deep_eager = copy.deepcopy(deep)
    regional.compile_linears(deep_eager, weights="int4")
    assert len(regional.compile_linears(deep, weights="int4", compile_layers=True).compiled_layers) == 4
    g1 = _graphs()
    got = _mixed_workload(deep, [7, 12, 3, 17], 3, seed=4)
    assert _graphs() == g1, f"{_graphs() - g1} graphs compiled for a deeper model after the warm-up"
    for a, b in zip(got, _mixed_workload(deep_eager, [7, 12, 3, 17], 3, seed=4)):
        tol = 8 * bf16_ulp(b.abs().max().item())
        assert (a - b).abs().max().item() <= tol
    # An in-place weight change and a new weight after the layers compiled: both seen.
    for m in (eager, compiled):
        with torch.no_grad():
            m.model.layers[0].mlp.down_proj.weight.mul_(-1)
        m.model.layers[1].self_attn.o_proj.weight = torch.nn.Parameter(
            base.model.layers[0].self_attn.o_proj.weight.detach().clone())
    compare("after weight updates")

