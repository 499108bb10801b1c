"""compile_linears on real transformers decoders (Qwen2 and Llama architectures, small
configs, random weights with a fixed seed), against the same model run eagerly.

Tolerance. RVV and ATen accumulate each Linear in FP32 in different orders and round it
to BF16, so a hidden state may differ by one BF16 ulp, which then travels through the
remaining layers. We compare logits against 4 BF16 ulps at the largest eager logit
(measured here: 1 ulp), and require greedy tokens to agree wherever eager's top-2 margin
exceeds that bound (with random weights logits are flat, and a near-tie may flip).
"""
from __future__ import annotations

import copy
import math

import pytest
import torch

from rvv_inductor import cpu, regional, runtime

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")

transformers = pytest.importorskip("transformers")

STEPS = 16
PROMPT = 8


def small_config(arch: str):
    common = dict(hidden_size=1024, intermediate_size=2048, num_hidden_layers=2, num_attention_heads=8,
                  num_key_value_heads=2, vocab_size=1024, max_position_embeddings=256,
                  tie_word_embeddings=False)
    if arch == "qwen2":
        return transformers.Qwen2Config(**common), transformers.Qwen2ForCausalLM
    return transformers.LlamaConfig(**common), transformers.LlamaForCausalLM


def bf16_ulp(x: float) -> float:
    """Spacing of BF16 numbers at magnitude x (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(x)) - 7)


def teacher_forced_logits(model, tokens):
    """Prefill PROMPT tokens, then feed the given tokens one by one (M=1 decode steps)."""
    out = []
    with torch.no_grad():
        r = model(tokens[:, :PROMPT], use_cache=True)
        out.append(r.logits[:, -1])
        cache = r.past_key_values
        for t in range(PROMPT, PROMPT + STEPS - 1):
            r = model(tokens[:, t:t + 1], past_key_values=cache, use_cache=True)
            cache = r.past_key_values
            out.append(r.logits[:, -1])
    return torch.stack(out, 1).float()


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_decoder_matches_eager(arch, inductor_cache):
    config, cls = small_config(arch)
    torch.manual_seed(0)
    eager = cls(config).to(torch.bfloat16).eval()
    rvv = copy.deepcopy(eager)
    keys0 = set(runtime.artifact_keys())
    graphs0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    report = regional.compile_linears(rvv)

    taken = {name.rsplit(".", 1)[-1] for name, _, _ in report.taken}
    # Every projection, GQA k/v (N = 2 * 128) included: the regional gate admits N, K >= 128.
    assert taken == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"}
    assert not report.fell_back, report.fell_back
    assert report.packed_overhead <= 0.01

    torch.manual_seed(1)
    tokens = torch.randint(0, config.vocab_size, (1, PROMPT + STEPS))
    want = teacher_forced_logits(eager, tokens)
    got = teacher_forced_logits(rvv, tokens)
    tol = 4 * bf16_ulp(want.abs().max().item())
    diff = (got - want).abs()
    assert diff.max().item() <= tol, f"max logit difference {diff.max().item()} > {tol}"

    top2 = want.topk(2, dim=-1).values
    decisive = (top2[..., 0] - top2[..., 1]) > tol
    margins = top2[..., 0] - top2[..., 1]
    assert decisive.any(), (f"no decisive position: the test would be vacuous (max diff {diff.max().item()}, "
                            f"tol {tol}, max |logit| {want.abs().max().item()}, margins {margins.tolist()})")
    same = want.argmax(-1) == got.argmax(-1)
    assert bool(same[decisive].all())

    # Exactly one compiled artifact per (N, K, M-bucket, bias) used (prefill M=8), shared by
    # all layers of that shape and with the other model: no recompiles. Decode (M=1) runs
    # the operator directly, recorded per shape.
    shapes = {(m.out_features, m.in_features, m.bias is not None)
              for m in rvv.modules() if isinstance(m, regional.RVVLinear)}
    expected = {(n, k, PROMPT, bias) for n, k, bias in shapes}
    assert set(runtime.artifact_keys()) - keys0 == expected - keys0
    assert {(n, k, 1, bias) for n, k, bias in shapes} <= set(runtime.direct_keys())
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs0 == len(expected - keys0)
