"""Paged attention for continuous batching on the C++ kernel: the op
``rvv_inductor::varlen_attention`` against an FP64 loop written here, its C++ CPU kernel
(csrc/torch_ops/attention_ops.cpp) against its ctypes kernel (the same bits; the ctypes
fallback itself runs in test_torch_ops.py's RVV_INDUCTOR_TORCH_OPS=0 subprocess), its
operand checks, its non-BF16 path and its call from a compiled graph; and the "paged|rvv"
attention function against transformers' own "paged|sdpa" (its block-diagonal mask from
``build_attention_mask``) on the same packed batch. The server test (test_serve.py)
checks the whole path: tokens under continuous batching equal eager generation."""
import math
import os

import pytest
import torch

from rvv_inductor import attention, ops

CPP = ops.kernels() == "c++"
needs_cpp = pytest.mark.skipif(not CPP and os.environ.get("RVV_EXPECT_TORCH_OPS") != "1",
                               reason=f"the operators run their ctypes kernels here: {ops.kernels()}")

# (nq, nk) per request: decodes with different contexts, a whole prefill, a chunked prefill.
BATCH = [(1, 40), (5, 5), (1, 1), (3, 20), (1, 33)]


def _packed(seqs, H, Hkv, D, pad_rows=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    cu_q, cu_k = [0], [0]
    for nq, nk in seqs:
        cu_q.append(cu_q[-1] + nq)
        cu_k.append(cu_k[-1] + nk)
    q = torch.randn(cu_q[-1] + pad_rows, H, D, generator=g).to(torch.bfloat16)
    k = torch.randn(cu_k[-1], Hkv, D, generator=g).to(torch.bfloat16)
    v = torch.randn(cu_k[-1], Hkv, D, generator=g).to(torch.bfloat16)
    return q, k, v, cu_q, cu_k


def _fp64(q, k, v, cu_q, cu_k, scale, window):
    out = torch.zeros(q.shape, dtype=torch.float64)
    G = q.shape[1] // k.shape[1]
    for s in range(len(cu_q) - 1):
        nq, nk = cu_q[s + 1] - cu_q[s], cu_k[s + 1] - cu_k[s]
        for j in range(nq):
            last = nk - nq + j
            first = max(0, last + 1 - window) if window else 0
            for h in range(q.shape[1]):
                qr = q[cu_q[s] + j, h].double()
                ks = k[cu_k[s] + first:cu_k[s] + last + 1, h // G].double()
                vs = v[cu_k[s] + first:cu_k[s] + last + 1, h // G].double()
                p = torch.softmax(ks @ qr * scale, dim=0)
                out[cu_q[s] + j, h] = p @ vs
    return out


@pytest.mark.parametrize("H,Hkv,D,window,pad", [(12, 2, 128, 0, 0), (4, 4, 80, 6, 3)], ids=["gqa", "mha-window-pad"])
def test_varlen_op_matches_fp64(H, Hkv, D, window, pad):
    q, k, v, cu_q, cu_k = _packed(BATCH, H, Hkv, D, pad_rows=pad)
    scale = 1 / math.sqrt(D)
    # q as transformers hands it over: a transposed view of [1, H, Tq, D], not contiguous.
    q_view = q.transpose(0, 1).contiguous().transpose(0, 1)
    out = attention.varlen_attention(q_view, k, v, torch.tensor(cu_q, dtype=torch.int32),
                                     torch.tensor(cu_k, dtype=torch.int32), scale, window)
    want = _fp64(q, k, v, cu_q, cu_k, scale, window)
    err = (out.double() - want).abs()
    assert bool((err <= want.abs() * 2.0 ** -8 + 1e-3).all()), float(err.max())
    assert bool((out[cu_q[-1]:] == 0).all())  # padding rows
    # The torch reference (used for dtypes the kernel does not take) agrees too.
    ref = attention.varlen_attention_reference(q.float(), k.float(), v.float(), torch.tensor(cu_q),
                                               torch.tensor(cu_k), scale, window)
    assert bool(((ref.double() - want).abs() <= want.abs() * 1e-5 + 1e-5).all())


def test_varlen_op_rejects_bad_batches():
    """The errors every kernel gives (the C++ kernel: RuntimeError; ctypes: ValueError)."""
    q, k, v, cu_q, cu_k = _packed([(1, 4), (2, 3)], 4, 2, 16)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    errors = (RuntimeError, ValueError)
    with pytest.raises(errors, match="fewer keys than queries"):
        attention.varlen_attention(q, k, v, i32(cu_q), i32([0, 4, 5]), 0.25, 0)
    with pytest.raises(errors, match="cu_seqlens decrease"):
        attention.varlen_attention(q, k, v, i32([0, 2, 1]), i32(cu_k), 0.25, 0)
    with pytest.raises(errors, match="run past the rows"):
        attention.varlen_attention(q[:2], k, v, i32(cu_q), i32(cu_k), 0.25, 0)
    with pytest.raises(Exception, match="kv heads"):
        attention.varlen_attention(q[:, :3], k, v, i32(cu_q), i32(cu_k), 0.25, 0)


def test_cpp_kernel_is_registered():
    if os.environ.get("RVV_EXPECT_TORCH_OPS") == "1":
        assert CPP, ops.kernels()
    # One library holds every operator's C++ kernel: varlen_attention's CPU kernel is the
    # C++ one exactly when linear_packed's is (ops.kernels() speaks for all of them).
    dump = torch._C._dispatch_dump("rvv_inductor::varlen_attention")
    cpu = [line for line in dump.splitlines() if line.startswith("CPU")]
    assert len(cpu) == 1, dump
    assert ("attention_ops.cpp" in cpu[0]) == CPP, cpu[0]


def _forms(H=8, Hkv=2, D=64, seed=7):
    """Operand forms as callers hand them over, each (q, k, v, cu_q, cu_k, window)."""
    q, k, v, cu_q, cu_k = _packed(BATCH, H, Hkv, D, pad_rows=2, seed=seed)
    i32 = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k, dtype=torch.int32)
    i64 = torch.tensor(cu_q), torch.tensor(cu_k)
    g = torch.Generator().manual_seed(seed + 1)
    # The paged cache's gather: K/V rows of a larger [Lk, 2 * Hkv, D] tensor (row stride 2 * Hkv * D).
    kv_wide = torch.randn(k.shape[0], 2 * Hkv, D, generator=g).to(torch.bfloat16)
    return {
        "contiguous": (q, k, v, *i32, 0),
        "q a transposed view": (q.transpose(0, 1).contiguous().transpose(0, 1), k, v, *i32, 0),
        "int64 offsets, window": (q, k, v, *i64, 6),
        "strided offsets": (q, k, v, torch.tensor(cu_q).repeat_interleave(2)[::2],
                            torch.tensor(cu_k, dtype=torch.int32).repeat_interleave(3)[::3], 3),
        "k/v row-strided": (q, kv_wide[:, :Hkv], kv_wide[:, Hkv:], *i32, 0),
        "D not unit-stride": (q.transpose(1, 2).contiguous().transpose(1, 2),
                              k.transpose(1, 2).contiguous().transpose(1, 2), v, *i32, 0),
        "no rows": (q[:0], k, v, torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), 0),
        "one decode": (q[:1], k[:40], v[:40], torch.tensor([0, 1]), torch.tensor([0, 40]), 0),
        # A sequence with keys but no queries first, one with neither last.
        "empty sequences": (q, torch.cat([k[:3], k]), torch.cat([v[:3], v]), torch.tensor([0, 0, *cu_q[1:], cu_q[-1]]),
                            torch.tensor([0, 3, *[c + 3 for c in cu_k[1:]], cu_k[-1] + 3]), 0),
    }


@needs_cpp
@pytest.mark.parametrize("H,Hkv,D", [(8, 2, 64), (4, 4, 80)], ids=["gqa", "mha"])
def test_cpp_and_ctypes_kernels_same_bits(H, Hkv, D):
    """The C++ kernel and the ctypes kernel (ops._varlen_attention_ctypes, what
    RVV_INDUCTOR_TORCH_OPS=0 registers) run the same core: the same bits for every form."""
    for name, (q, k, v, cu_q, cu_k, window) in _forms(H, Hkv, D).items():
        got = ops.varlen_attention(q, k, v, cu_q, cu_k, 0.125, window)
        want = ops._varlen_attention_ctypes(q, k, v, cu_q, cu_k, 0.125, window)
        assert got.shape == q.shape and got.dtype == torch.bfloat16 and got.is_contiguous(), name
        assert torch.equal(got, want), name


@needs_cpp
def test_cpp_kernel_rejects_bad_operands():
    """Every operand the core's C ABI cannot check (or would only name vaguely) is a clear
    RuntimeError from the C++ kernel, never a crash."""
    q, k, v, cu_q, cu_k = _packed([(1, 4), (2, 3)], 4, 2, 16)
    cq, ck = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k, dtype=torch.int32)
    op = ops.varlen_attention
    cases = [
        (lambda: op(q[0], k, v, cq, ck, 0.25, 0), r"q \[Tq, H, D\], k/v \[Lk, Hkv, D\] expected"),
        (lambda: op(q, k, v[:, :1], cq, ck, 0.25, 0), r"k/v \[Lk, Hkv, D\] expected"),
        (lambda: op(q, k[..., :8], v[..., :8], cq, ck, 0.25, 0), r"expected, got \[3, 4, 16\]"),
        (lambda: op(q[:, :3], k, v, cq, ck, 0.25, 0), "3 heads, 2 kv heads"),
        (lambda: op(q, k, v, cq[None], ck[None], 0.25, 0), "1-D offsets of equal length"),
        (lambda: op(q, k, v, cq, ck[:2], 0.25, 0), "1-D offsets of equal length"),
        (lambda: op(q, k, v, cq[:0], ck[:0], 0.25, 0), "1-D offsets of equal length"),
        (lambda: op(q, k, v, cq.float(), ck, 0.25, 0), "cu_q must be int32 or int64"),
        (lambda: op(q, k, v, cq, ck.to(torch.int16), 0.25, 0), "cu_k must be int32 or int64"),
        (lambda: op(q, k, v, cq, torch.tensor([0, 4, 2 ** 32]), 0.25, 0), r"cu_k\[2\] = 4294967296 is out of range"),
        (lambda: op(q, k, v, cq, torch.tensor([0, -4, 7]), 0.25, 0), r"cu_k\[1\] = -4 is out of range"),
        (lambda: op(q, k, v, cq + 1, ck, 0.25, 0), "do not start at 0"),
        (lambda: op(q, k, v, torch.tensor([0, 2, 1]), ck, 0.25, 0), "cu_seqlens decrease at sequence 1"),
        (lambda: op(q, k, v, cq, torch.tensor([0, 4, 5]), 0.25, 0), "sequence 1 has 2 queries but 1 keys"),
        (lambda: op(q[:2], k, v, cq, ck, 0.25, 0), r"run past the rows \(cu_q\[S\] = 3 of 2 query rows"),
        (lambda: op(q, k[:6], v[:6], cq, ck, 0.25, 0), "cu_k\\[S\\] = 7 of 6 key rows"),
        (lambda: op(q, k, v, cq, ck, 0.25, -1), "window -1 < 0"),
        (lambda: op(q, k, v, cq, ck, float("nan"), 0), "scale nan is not finite"),
        (lambda: op(q.to(torch.int32), k, v, cq, ck, 0.25, 0), "must be floating point"),
    ]
    for fn, match in cases:
        with pytest.raises(RuntimeError, match=match):
            fn()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_varlen_op_non_bf16_is_the_reference(dtype):
    """Operands that are not all BF16 run the definition (the C++ kernel's scalar loop, or
    the ctypes kernel's torch reference): within FP32 rounding of the FP64 loop, in q's dtype."""
    for window, pad in ((0, 0), (6, 3)):
        q, k, v, cu_q, cu_k = _packed(BATCH, 4, 2, 32, pad_rows=pad, seed=5)
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        args = (torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k), 0.2, window)
        out = attention.varlen_attention(q, k, v, *args)
        assert out.dtype == dtype and out.shape == q.shape
        ref = attention.varlen_attention_reference(q, k, v, *args)
        assert torch.allclose(out.double(), ref.double(), rtol=1e-5, atol=1e-5), float((out - ref).abs().max())
        want = _fp64(q, k, v, cu_q, cu_k, 0.2, window)
        assert torch.allclose(out.double(), want, rtol=1e-5, atol=1e-5)
        assert bool((out[cu_q[-1]:] == 0).all())
    # Mixed dtypes take the same path (the BF16 kernel needs all three in BF16).
    q, k, v, cu_q, cu_k = _packed(BATCH, 4, 2, 32, seed=6)
    args = (torch.tensor(cu_q), torch.tensor(cu_k), 0.2, 0)
    out = attention.varlen_attention(q, k.to(dtype), v, *args)
    ref = attention.varlen_attention_reference(q, k.to(dtype), v, *args)
    assert out.dtype == torch.bfloat16
    # Both round an FP32-or-better result to BF16 once: at most one BF16 step apart.
    assert bool(((out.float() - ref.float()).abs() <= ref.float().abs() * 2.0 ** -7 + 1e-6).all())


def test_varlen_op_inside_a_compiled_graph():
    """In a compiled graph (as in a compiled decoder layer under continuous batching) the op
    is one extern call of its registered CPU kernel (the C++ one where ops.kernels() says
    so), not a graph break and not a lowering: the same bits as the eager call. (No
    pointwise work around it: a generated C++ kernel would cost minutes of emulated g++;
    test_serve.py runs the op inside whole compiled layers.)"""
    from torch._inductor.utils import run_and_get_code

    q, k, v, cu_q, cu_k = _packed(BATCH, 8, 2, 64, seed=9)
    cq, ck = torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k, dtype=torch.int32)

    def f(q, k, v, cq, ck):
        return attention.varlen_attention(q, k, v, cq, ck, 0.0625, 0)

    torch._dynamo.reset()
    got, codes = run_and_get_code(torch.compile(f, fullgraph=True, dynamic=False), q, k, v, cq, ck)
    assert torch.equal(got, ops.varlen_attention(q, k, v, cq, ck, 0.0625, 0))
    assert any("torch.ops.rvv_inductor.varlen_attention.default(" in c for c in codes), codes


class _Module(torch.nn.Module):
    def __init__(self, H, Hkv, sliding_window=None):
        super().__init__()
        self.num_key_value_groups = H // Hkv
        self.sliding_window = sliding_window
        self.layer_idx = 0


@pytest.mark.parametrize("window", [None, 6])
def test_paged_rvv_matches_transformers_paged_sdpa(window):
    from transformers.generation.continuous_batching.utils import build_attention_mask
    from transformers.integrations.sdpa_paged import sdpa_attention_paged_forward

    H, Hkv, D = 8, 2, 64
    q, k, v, cu_q, cu_k = _packed(BATCH, H, Hkv, D, seed=3)
    # Continuous batching's layouts: q [1, H, Tq, D], k/v [1, Hkv, Lk, D].
    query, key, value = q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0)
    module = _Module(H, Hkv, window)
    # As continuous batching resets it: all masked, then each request's block filled in.
    mask = torch.full((1, 1, q.shape[0], k.shape[0]), torch.finfo(torch.bfloat16).min, dtype=torch.bfloat16)
    build_attention_mask(mask, cu_q, cu_k, sliding_window=window or 1)
    scale = D ** -0.5
    want, _ = sdpa_attention_paged_forward(module, query, key, value, mask, scaling=scale)
    got, _ = attention.paged_attention_forward(module, query, key, value, None, scaling=scale,
                                               cu_seq_lens_q=torch.tensor(cu_q, dtype=torch.int32),
                                               cu_seq_lens_k=torch.tensor(cu_k, dtype=torch.int32))
    assert got.shape == want.shape == (1, q.shape[0], H, D)
    # Both round their output to BF16 once: within two BF16 steps of each other.
    err = (got.double() - want.double()).abs()
    assert bool((err <= want.double().abs() * 2.0 ** -7 + 2e-3).all()), float(err.max())


def test_paged_rvv_is_registered_without_a_mask():
    from transformers import AttentionInterface
    from transformers.generation.continuous_batching.utils import attn_mask_is_needed
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    attention.register()
    assert AttentionInterface._global_mapping[attention.PAGED_NAME] is attention.paged_attention_forward
    # Continuous batching builds no [tokens, keys] mask for it (nor does the model).
    cfg = type("C", (), {"_attn_implementation": attention.PAGED_NAME})()
    assert not attn_mask_is_needed(cfg)
    assert attention.PAGED_NAME not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping
    with pytest.raises(ValueError, match="cu_seq_lens"):
        attention.paged_attention_forward(_Module(4, 2), torch.zeros(1, 4, 1, 8), torch.zeros(1, 2, 1, 8),
                                          torch.zeros(1, 2, 1, 8), None)
