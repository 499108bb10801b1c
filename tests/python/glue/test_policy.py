"""policy.py: the gates, RVV_INDUCTOR_GATE parsing, the M buckets, the K1's numbers."""
from __future__ import annotations

import dataclasses

import pytest

from rvv_inductor import policy
from rvv_inductor.policy import Gate


def test_whole_graph_gate_defaults():
    g = Gate()
    assert g.check(1, 1024, 1024) is None
    assert g.check(128, 4096, 4096) is None
    assert g.check(129, 4096, 4096) == "M=129 > 128"
    assert g.check(1, 256, 1024) == "N=256 < 1024"
    assert g.check(1, 1024, 512) == "K=512 < 1024"
    assert Gate(min_mnk=2e6).check(1, 1024, 1024) == "M*N*K=1048576 < 2e+06"


def test_regional_gate_admits_every_qwen_projection():
    g = Gate.regional()
    for n, k in ((128, 896), (256, 1536), (896, 896), (4864, 896), (896, 4864), (151936, 1536)):
        assert g.check(1, n, k) is None, (n, k)
    assert g.check(4096, 1024, 1024) is None  # any M: the runtime chunks it
    assert g.check(1, 64, 1024) == "N=64 < 128"


def test_gate_from_env(monkeypatch):
    monkeypatch.delenv("RVV_INDUCTOR_GATE", raising=False)
    assert Gate.from_env() == Gate()
    monkeypatch.setenv("RVV_INDUCTOR_GATE", " max_m=64, min_mnk=1e5 ")
    assert Gate.from_env() == dataclasses.replace(Gate(), max_m=64, min_mnk=1e5)
    # Keys not set keep the given default's values.
    monkeypatch.setenv("RVV_INDUCTOR_REGIONAL_GATE", "min_n=256")
    g = Gate.from_env("RVV_INDUCTOR_REGIONAL_GATE", Gate.regional())
    assert g == dataclasses.replace(Gate.regional(), min_n=256)
    assert isinstance(g.min_n, int)


@pytest.mark.parametrize("raw,msg", [("min_x=1", "unknown key 'min_x'"), ("min_n=lots", "is not a number"),
                                     ("min_k=-1", "must be >= 0"), ("min_n", "is not a number")])
def test_bad_gate_is_a_clear_error(monkeypatch, raw, msg):
    monkeypatch.setenv("RVV_INDUCTOR_GATE", raw)
    with pytest.raises(ValueError, match=f"RVV_INDUCTOR_GATE.*{msg}"):
        Gate.from_env()


def test_m_buckets():
    assert [policy.m_bucket(m) for m in (0, 1, 2, 3, 5, 16, 17, 100, 128, 500)] == \
        [1, 1, 2, 4, 8, 16, 32, 128, 128, 128]
    assert list(policy.M_BUCKETS) == sorted(set(policy.M_BUCKETS))


def test_k1_numbers_hang_together():
    assert policy.K1_CORES % policy.K1_CLUSTER_CORES == 0
    assert policy.K1_VLEN_BITS % policy.K1_DLEN_BITS == 0
    assert policy.K1_L1D_BYTES < policy.K1_L2_BYTES
    for size, ways in ((policy.K1_L1D_BYTES, policy.K1_L1D_WAYS), (policy.K1_L2_BYTES, policy.K1_L2_WAYS)):
        assert size % (ways * policy.K1_CACHE_LINE_BYTES) == 0
    # One 32-bit LPDDR4X channel at 2666 MT/s.
    assert policy.K1_DRAM_BYTES_PER_S == pytest.approx(4 * 2666e6, rel=1e-3)


def test_activations_choice():
    assert policy.ACTIVATIONS == ("auto", "int8", "bf16") and policy.DEFAULT_ACTIVATIONS == "auto"
    assert policy.check_activations("bf16", "who") == "bf16"
    # auto: INT8 activations for INT4 weights, the FP path for INT8 weights (README: measured).
    assert [policy.resolve_activations(f, "auto") for f in ("int4", "int8")] == ["int8", "bf16"]
    # The GGUF block formats: INT8 activations by default, as llama.cpp runs them; BF16 weights never.
    for f in ("q4_1", "q4_k", "q5_k", "q6_k"):
        assert [policy.resolve_activations(f, a) for a in ("auto", "int8", "bf16")] == ["int8", "int8", "bf16"]
        assert policy.x8_applies(f, 256 if f != "q4_1" else 32)
    assert [policy.resolve_activations("bf16", a) for a in ("auto", "int8", "bf16")] == ["bf16"] * 3
    assert [policy.resolve_activations(f, a) for f in ("int4", "int8") for a in ("int8", "bf16")] == [
        "int8", "bf16", "int8", "bf16"]
    for bad in ("fp8", "INT8", None, 8):
        with pytest.raises(ValueError, match="who: activations="):
            policy.check_activations(bad, "who")
    # Every format compile_linears produces qualifies; groups of half a block do not.
    assert all(policy.x8_applies(f, g) for f, gs in policy.GROUP_SIZES.items() for g in gs)
    assert not policy.x8_applies("int4", 16) and not policy.x8_applies("int4", 0) and not policy.x8_applies("bf16", 0)


def test_prefill_chunk_hides_the_weights_dram_time():
    """The chunk is the smallest power of two in [16, 64] at which the prefill GEMMs at
    their datapath floor take at least as long as streaming the weights once."""
    for weights in policy.WEIGHT_FORMATS:
        for act in policy.ACTIVATIONS:
            c = policy.prefill_chunk(weights, act)
            assert c in (16, 32, 64)
            per_weight_dram = policy.PREFILL_BYTES_PER_WEIGHT[weights] / policy.K1_DRAM_ACHIEVED_BYTES_PER_S
            per_weight_compute = lambda m: m / (policy.K1_CORES * policy.prefill_floor_macs_per_cycle(weights, act)
                                                * policy.K1_CLOCK_HZ)
            assert c == 64 or per_weight_compute(c) >= per_weight_dram
            assert c == 16 or per_weight_compute(c // 2) < per_weight_dram
    # At the calibrated bandwidth BF16 weights need 32 rows, INT4 with INT8 activations too
    # (twice the datapath), INT8 16; a faster memory needs fewer.
    assert (policy.prefill_chunk("bf16"), policy.prefill_chunk("int4"), policy.prefill_chunk("int8")) == (32, 32, 16)
    assert policy.prefill_chunk("bf16", bandwidth=policy.K1_DRAM_BYTES_PER_S) == 16
