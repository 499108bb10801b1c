"""Paged attention for continuous batching on the C++ kernel: the op
``rvv_inductor::varlen_attention`` against an FP64 loop written here, and the "paged|rvv"
attention function against transformers' own "paged|sdpa" (its block-diagonal mask from
``build_attention_mask``) on the same packed batch. The server test (test_serve.py)
checks the whole path: tokens under continuous batching equal eager generation."""
import math

import pytest
import torch

from rvv_inductor import attention

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
    q, k, v, cu_q, cu_k = _packed([(1, 4), (2, 3)], 4, 2, 16)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    with pytest.raises(ValueError, match="fewer keys than queries"):
        attention.varlen_attention(q, k, v, i32(cu_q), i32([0, 4, 5]), 0.25, 0)
    with pytest.raises(ValueError, match="cu_seqlens decrease"):
        attention.varlen_attention(q, k, v, i32([0, 2, 1]), i32(cu_k), 0.25, 0)
    with pytest.raises(ValueError, match="run past the rows"):
        attention.varlen_attention(q[:2], k, v, i32(cu_q), i32(cu_k), 0.25, 0)
    with pytest.raises(Exception, match="kv heads"):
        attention.varlen_attention(q[:, :3], k, v, i32(cu_q), i32(cu_k), 0.25, 0)


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
