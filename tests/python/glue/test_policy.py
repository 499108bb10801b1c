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
