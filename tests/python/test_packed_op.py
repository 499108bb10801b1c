"""Packed weights owned outside the graph: pack/unpack, the eager kernel, and the compiled
``rvv_inductor::linear_packed`` reading the packed weight as a graph input (the base of the
regional runtime), each against an FP64 reference computed from the same BF16 inputs."""
from __future__ import annotations

import pytest
import torch

import rvv_inductor
from rvv_inductor import cpu, ops, packed, verify

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64, reason="needs riscv64 (emulated or native)")


def reference(x, w, b):
    return x.double() @ w.double().T + (b.double() if b is not None else 0)


def bound(x, w, b):
    """FP32 accumulation (any order) plus one BF16 rounding of the output."""
    mag = x.double().abs() @ w.double().abs().T + (b.double().abs() if b is not None else 0)
    return x.shape[1] * 2.0**-24 * mag * 1.01 + 2.0**-8 * reference(x, w, b).abs() + 1e-30


def nb() -> int:
    return cpu.effective().block_n


@pytest.mark.matrix
@pytest.mark.parametrize("n,k", [(1, 1), (65, 17), (1536, 1024)])
def test_pack_round_trip_and_eager_linear(n, k):
    torch.manual_seed(n + k)
    w = torch.randn(n, k).to(torch.bfloat16)
    wp = packed.pack(w, nb())
    assert wp.shape == (-(-n // nb()), k, nb())
    assert torch.equal(packed.unpack(wp, n), w)
    # Padding rows of the last block are zero, so they cannot leak into any output.
    assert not wp.permute(0, 2, 1).reshape(-1, k)[n:].any()
    for m in (1, 3):
        x = torch.randn(m, k).to(torch.bfloat16)
        b = torch.randn(n).to(torch.bfloat16)
        y = packed.linear(x, wp, b, n)
        assert bool(((y.double() - reference(x, w, b)).abs() <= bound(x, w, b)).all())


def test_bad_input_is_a_clear_error():
    w = torch.randn(128, 64).to(torch.bfloat16)
    wp = packed.pack(w, nb())
    with pytest.raises(packed.PackingError, match="bfloat16"):
        packed.pack(w.float(), nb())
    with pytest.raises(packed.PackingError, match="does not match"):
        packed.linear(torch.randn(2, 64).to(torch.bfloat16), wp, None, 4096)
    with pytest.raises(packed.PackingError, match=r"\[M, 64\]"):
        packed.linear(torch.randn(2, 65).to(torch.bfloat16), wp, None, 128)
    with pytest.raises(packed.PackingError, match="bias"):
        packed.linear(torch.randn(2, 64).to(torch.bfloat16), wp, torch.zeros(3, dtype=torch.bfloat16), 128)


@pytest.mark.matrix
def test_compiled_linear_packed_reads_weight_in_place(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "c"))
    torch._dynamo.reset()
    rvv_inductor.enable()
    try:
        n, k = 1536, 1024
        torch.manual_seed(7)
        w = torch.randn(n, k).to(torch.bfloat16)
        b = torch.randn(n).to(torch.bfloat16)
        wp = packed.pack(w, nb())
        f = torch.compile(lambda x, wp, b: ops.linear_packed(x, wp, b, n), dynamic=False)
        xs = {m: torch.randn(m, k).to(torch.bfloat16) for m in (1, 3)}
        for m, x in xs.items():
            y = f(x, wp, b)
            assert bool(((y.double() - reference(x, w, b)).abs() <= bound(x, w, b)).all()), m
        frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]

        # An in-place update of the packed weight is seen by the next call, with no recompile.
        w2 = torch.randn(n, k).to(torch.bfloat16)
        wp.copy_(packed.pack(w2, nb()))
        y = f(xs[1], wp, b)
        assert bool(((y.double() - reference(xs[1], w2, b)).abs() <= bound(xs[1], w2, b)).all())
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == frames

        report = verify.scan(tmp_path / "c")
        assert verify.evaluate(report, []) == []
        routes = {(e["M"], e["route"]) for e in report["routing"] if e["op"] == "linear_packed"}
        if cpu.effective().has_v:
            assert routes == {(1, "rvv"), (3, "rvv")}
            rvv = [s for s in report["shared_objects"] if s["rvv_micro_gemm"]]
            assert len(rvv) == 2 and all(s["counts"].get("vfmacc", 0) > 0 for s in rvv)
        else:
            assert routes == {(1, "eager"), (3, "eager")}
    finally:
        rvv_inductor.disable()
        torch._dynamo.reset()
