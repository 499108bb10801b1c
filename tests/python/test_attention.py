"""The decode attention op (python/rvv_inductor/attention.py): its eager kernel, its
lowering to the C++ kernel (csrc/rvv_inductor/attention.h) under torch.compile, the
fallback, and a transformers model attending through it. The reference is written here:
FP64 softmax attention with the GQA head mapping h -> h // (H / Hkv)."""
import math

import pytest
import torch

import rvv_inductor
from rvv_inductor import attention as A

pytestmark = pytest.mark.usefixtures("inductor_cache")


def reference(q, k, v, mask, scale):
    """out[b, t, h, :] in FP64; rows with nothing to attend to are zeros (the op's contract)."""
    B, H, T, D = q.shape
    G = H // k.shape[1]
    out = torch.zeros(B, T, H, D, dtype=torch.float64)
    for h in range(H):
        s = q[:, h].double() @ k[:, h // G].double().transpose(-1, -2) * scale  # [B, T, L]
        if mask is not None:
            m = mask[:, h if mask.shape[1] > 1 else 0]
            s = s.masked_fill(~m, -math.inf)
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)
        out[:, :, h] = p @ v[:, h // G].double()
    return out


def problem(B, H, Hkv, T, L, D, mask_kind, seed):
    g = torch.Generator().manual_seed(seed)
    # q as transformers passes it: a transposed view of [B, T, H, D].
    q = torch.randn(B, T, H, D, generator=g).to(torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, Hkv, L, D, generator=g).to(torch.bfloat16)
    v = torch.randn(B, Hkv, L, D, generator=g).to(torch.bfloat16)
    pos = torch.arange(T).view(T, 1) + L // 2
    if mask_kind is None:
        mask = None
    elif mask_kind == "prefix":
        mask = (torch.arange(L).view(1, L) <= pos).view(1, 1, T, L).expand(B, 1, T, L)
    else:  # "per_head": each head its own prefix length
        mask = torch.stack([(torch.arange(L).view(1, L) <= (pos + h) % L) for h in range(H)]).view(1, H, T, L)
        mask = mask.expand(B, H, T, L).contiguous()
    return q, k, v, mask, D ** -0.5


def close(out, ref):
    """BF16 output rounding (2^-9 relative) plus FP32 arithmetic: within 2^-8 |ref| + 1e-4."""
    err = (out.double() - ref).abs()
    return bool((err <= ref.abs() * 2.0 ** -8 + 1e-4).all()), float(err.max())


CASES = [
    (1, 12, 2, 1, 64, 128, "prefix"),   # Qwen2.5-1.5B decode
    (2, 4, 4, 3, 20, 32, "per_head"),   # MHA, 3 rows, a different mask per head
    (1, 14, 2, 2, 37, 80, None),        # G = 7, D = 80, no mask
]


@pytest.mark.parametrize("case", CASES)
def test_eager_op_matches_reference(case):
    q, k, v, mask, scale = problem(*case, seed=1)
    ok, err = close(A.decode_attention(q, k, v, mask, scale), reference(q, k, v, mask, scale))
    assert ok, f"max error {err}"


def test_compiled_op_runs_the_rvv_kernel_and_matches(emulated):
    """Under enable(), torch.compile lowers the op to one generated kernel calling
    attention.h (its marker in the code), equal to the reference within the bound."""
    from torch._inductor.utils import run_and_get_code

    if emulated is not None and not emulated["v"]:
        pytest.skip("the lowering needs V (no V: the eager-kernel fallback is tested below)")
    rvv_inductor.enable()
    try:
        for i, case in enumerate(CASES[:2]):
            q, k, v, mask, scale = problem(*case, seed=10 + i)
            torch._dynamo.reset()
            f = torch.compile(lambda q, k, v, m: A.decode_attention(q, k, v, m, scale), fullgraph=True)
            out, code = run_and_get_code(f, q, k, v, mask)
            assert any("rvv_inductor decode attention" in c for c in code), f"{case}: kernel not generated"
            ok, err = close(out, reference(q, k, v, mask, scale))
            assert ok, f"{case}: max error {err}"
    finally:
        rvv_inductor.disable()


def test_dynamic_shapes_run_the_rvv_kernel_and_match(emulated):
    """A compile with dynamic shapes (what a decoder layer compiled by compile_layers=True
    gets after its second prompt length) lowers to the same kernel, its sizes passed as
    arguments instead of constants; one compiled graph then serves other prompt and cache
    lengths, each equal to the reference. (Before, symbolic sizes fell back to the op's
    eager kernel: FP32 torch math on one thread.)"""
    import re
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    if emulated is not None and not emulated["v"]:
        pytest.skip("the lowering needs V (no V: the eager-kernel fallback is tested below)")
    rvv_inductor.enable()
    try:
        torch._dynamo.reset()
        scale = 128 ** -0.5
        f = torch.compile(lambda q, k, v, m: A.decode_attention(q, k, v, m, scale), dynamic=True, fullgraph=True)
        codes = []  # every graph compiled in the loop (run_and_get_code would reset Dynamo per call)
        with mock.patch.object(GraphLowering, "save_output_code", codes.append):
            for i, (T, L) in enumerate([(5, 40), (9, 64), (17, 33)]):
                q, k, v, mask, _ = problem(1, 12, 2, T, L, 128, "prefix", seed=20 + i)
                out = f(q, k, v, mask)
                ok, err = close(out, reference(q, k, v, mask, scale))
                assert ok, f"T={T} L={L}: max error {err}"
        kernels = [c for c in codes if "rvv_inductor decode attention" in c]
        assert len(kernels) == 1, f"{len(kernels)} attention kernels generated for three shapes (want one, dynamic)"
        assert re.search(r"a\.T = [A-Za-z_]", kernels[0]) and re.search(r"a\.L = [A-Za-z_]", kernels[0]), \
            "the prompt and cache lengths should be the kernel's size arguments"
    finally:
        rvv_inductor.disable()


def test_float32_falls_back_to_the_eager_kernel():
    from torch._inductor.utils import run_and_get_code

    rvv_inductor.enable()
    try:
        q, k, v, mask, scale = problem(1, 4, 2, 1, 16, 32, "prefix", seed=3)
        q, k, v = q.float(), k.float(), v.float()
        torch._dynamo.reset()
        f = torch.compile(lambda q, k, v, m: A.decode_attention(q, k, v, m, scale), fullgraph=True)
        out, code = run_and_get_code(f, q, k, v, mask)
        assert not any("rvv_inductor decode attention" in c for c in code)
        assert torch.allclose(out.double(), reference(q, k, v, mask, scale), atol=1e-5, rtol=1e-5)
    finally:
        rvv_inductor.disable()


def test_bad_operands_get_a_clear_error():
    q, k, v, mask, scale = problem(1, 4, 2, 1, 16, 32, "prefix", seed=4)
    with pytest.raises(RuntimeError, match="query heads"):
        A.decode_attention(q[:, :3], k, v, None, scale)
    with pytest.raises(RuntimeError, match="bool"):
        A.decode_attention(q, k, v, mask.float(), scale)


def test_transformers_model_attends_through_the_op():
    """A small Qwen2 model with a static cache: each decode step's logits through the op
    equal SDPA's within the BF16 tolerance, and the op is really called (counted)."""
    import transformers
    from transformers.cache_utils import StaticCache

    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                   max_position_embeddings=64)
    model = transformers.Qwen2ForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, 256, (1, 6))

    def run():
        cache = StaticCache(config=cfg, max_cache_len=16)
        logits = []
        with torch.no_grad():
            for t in range(ids.shape[1]):  # one token per step, as the package's decode step
                out = model(input_ids=ids[:, t:t + 1], past_key_values=cache, use_cache=True,
                            cache_position=torch.tensor([t]))
                logits.append(out.logits[0, -1].float())
        return torch.stack(logits)

    base = run()
    calls = {"n": 0}
    real = A.decode_attention

    def counted(*a):
        calls["n"] += 1
        return real(*a)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(A, "decode_attention", counted)
        with A.use_in(model):
            ours = run()
    assert calls["n"] == cfg.num_hidden_layers * ids.shape[1]
    assert model.config._attn_implementation != A.NAME  # restored
    tol = 4 * 2.0 ** -8 * float(base.abs().max())  # 4 BF16 ulps of the largest logit
    assert float((ours - base).abs().max()) <= tol
