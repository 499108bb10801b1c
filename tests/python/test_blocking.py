"""template.py's weight-once cache blocking for CppGemmTemplate with our micro-GEMMs
(the prefill GEMMs of bench/prefill.sh): the rule by hand, and a frozen Linear whose rows
upstream would split into several Mc blocks, compiled both ways, bit-identical."""
from __future__ import annotations

import pytest
import torch

import rvv_inductor
from rvv_inductor.inductor import template

L2 = 512 * 1024  # the K1's


@pytest.mark.parametrize("case,want", [
    # (Mr, Nr, Kr, Mt, Nt, upstream Mc, Nc, Kc) at the K1's L2, register blocks 6 x 64:
    ((6, 64, 1, 22, 24, 2, 1, 204), (22, 3, 204)),    # down_proj M=128, 1 thread: was 11 Mc blocks
    ((6, 64, 1, 11, 24, 2, 1, 204), (11, 2, 204)),    # down_proj M=64
    ((6, 64, 1, 22, 140, 14, 1, 204), (22, 3, 204)),  # gate_proj M=128: was 2
    ((6, 64, 1, 11, 3, 11, 1, 204), (11, 1, 204)),    # upstream already keeps the rows: unchanged
    ((6, 64, 1, 22, 2, 2, 1, 204), (22, 2, 204)),     # Nc never above the thread's Nt
])
def test_weight_once_rule(case, want):
    assert template.weight_once_blocking(*case, L2) == want


def test_rule_shrinks_when_a_and_acc_do_not_fit():
    # A 1000-row thread block: A tile + accumulator exceed half the L2, Mc falls back to
    # upstream's M_max formula (and still never below one block).
    mc, nc, kc = template.weight_once_blocking(6, 64, 1, 167, 24, 2, 1, 204, L2)
    assert 1 <= mc < 167 and kc == 204
    assert mc * 6 * (204 * 2 + nc * 64 * 4) <= L2 * template.L2_LIMIT_FACTOR * 1.2


def test_installed():
    from torch._inductor.codegen.cpp_gemm_template import CppGemmTemplate

    assert getattr(CppGemmTemplate._cache_blocking, "_rvv_inductor", False)


def test_cache_key_follows_blocking(monkeypatch):
    """A graph compiled under one blocking is not taken from the FX cache under the other."""
    from rvv_inductor import integration

    keys = {}
    for v in ("0", "1"):
        monkeypatch.setenv(template.UPSTREAM_BLOCKING_ENV, v)
        keys[v] = integration._CacheKeyPass().uuid()
    assert keys["0"] != keys["1"] and keys["0"].endswith("weight-once-1") and keys["1"].endswith("upstream")


def _compile(lin, x, cache, upstream: bool, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    monkeypatch.setenv(template.UPSTREAM_BLOCKING_ENV, "1" if upstream else "0")
    torch._dynamo.reset()
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        y = torch.compile(lin, dynamic=False)(x)
    src = "\n".join(p.read_text() for p in cache.rglob("*.cpp") if "Mc_blocks" in p.read_text())
    return y, src


def test_bit_identical_and_weight_once(tmp_path, monkeypatch):
    """K = 4096 at 1 thread: upstream keeps floor(256 KiB / (6 x 8 KiB)) = 5 row blocks
    per Mc, so M = 64 (11 blocks) is split into 3; ours keeps all 11. Same output bits."""
    # The cache-size wrapper resolves its sizes once per enable(): a module that ran before
    # this one and left rvv_inductor enabled (test_gguf in a CI shard) had resolved the
    # host's 1 MiB L2 without these variables. Start from a fresh install.
    rvv_inductor.disable()
    monkeypatch.setenv("RVV_INDUCTOR_L2_BYTES", str(L2))
    monkeypatch.setenv("RVV_INDUCTOR_L1D_BYTES", str(32 * 1024))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rvv_inductor.enable()
    try:
        torch.manual_seed(0)
        lin = torch.nn.Linear(4096, 1024, bias=False).to(torch.bfloat16).eval()
        x = torch.randn(64, 4096, dtype=torch.bfloat16)
        y_up, src_up = _compile(lin, x, tmp_path / "up", True, monkeypatch)
        y_our, src_our = _compile(lin, x, tmp_path / "ours", False, monkeypatch)
    finally:
        rvv_inductor.disable()
        torch._dynamo.reset()
        torch.set_num_threads(threads)
    # enable() on a V machine routes this frozen BF16 Linear to the template: a miss is a defect
    assert "Mc_blocks" in src_up, "the GEMM did not go to the C++ template (see the routing log)"
    assert "Mc_blocks = 5;" in src_up, src_up[:2000]
    assert "Mc_blocks = 11;" in src_our, src_our[:2000]
    assert torch.equal(y_up, y_our)
    ref = torch.nn.functional.linear(x.float(), lin.weight.float())
    assert (y_our.float() - ref).abs().max().item() <= 0.02 * ref.abs().max().item()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
