"""TorchInductor integration (vector ISA, micro-GEMMs, routing), checked against eager ATen
in the real torch 2.14.1.

Each test compiles with a clean TORCHINDUCTOR_CACHE_DIR and inspects what Inductor built
with the verifier (disassembly, not string matching). Tolerance: the RVV kernel and ATen
both accumulate in FP32 but in different orders, and both round the result to BF16 once,
so they may differ by one BF16 ulp of the output (2^-8 relative) plus the FP32 summation
error, bounded by K * 2^-24 * sum|x*w| (see tolerance()).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import rvv_inductor
from rvv_inductor import cpu, verify

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64, reason="needs riscv64 (emulated or native)")


def tolerance(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """Elementwise bound on |rvv - eager| for a BF16 linear."""
    x64, w64 = x.double(), w.double()
    ref = x64 @ w64.T + (b.double() if b is not None else 0)
    mag = x64.abs() @ w64.abs().T + (b.double().abs() if b is not None else 0)
    k = x.shape[-1]
    fp32_sum = 2 * k * 2.0**-24 * mag  # both sides' accumulation error
    bf16_round = 2 * 2.0**-8 * ref.abs()  # each side rounds once to BF16 (1/2 ulp = 2^-8 rel.)
    return fp32_sum + bf16_round + 1e-30


@pytest.fixture
def inductor(tmp_path, monkeypatch):
    """A clean Inductor cache, rvv_inductor enabled, freezing on; restores everything."""
    cache = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    torch._dynamo.reset()
    rvv_inductor.enable()
    with torch._inductor.config.patch(freezing=True):
        yield cache
    rvv_inductor.disable()
    torch._dynamo.reset()


def _compile_and_run(module: torch.nn.Module, *args, **kw):
    compiled = torch.compile(module, **kw)
    with torch.no_grad():
        return compiled(*args)


def _linear_module(n: int, k: int, bias: bool, seed: int = 0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    lin = torch.nn.Linear(k, n, bias=bias).to(torch.bfloat16).eval()
    return lin


# (M, bias) cases of the issue, all in one graph: one Dynamo/Inductor compile with one
# template kernel per GEMM, which keeps the emulated test time bounded.
LINEAR_CASES = [(1, False), (1, True), (2, False), (3, True), (4, False), (16, True), (128, False)]


def test_bf16_linear_goes_to_rvv_and_matches_eager(inductor):
    n, k = 1024, 1024
    plain, biased = _linear_module(n, k, False, seed=0), _linear_module(n, k, True, seed=1)

    class Many(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.plain, self.biased = plain, biased

        def forward(self, xs):
            return [self.biased(x) if b else self.plain(x) for x, (_, b) in zip(xs, LINEAR_CASES)]

    torch.manual_seed(5)
    xs = [torch.randn(m, k).to(torch.bfloat16) for m, _ in LINEAR_CASES]
    with torch.no_grad():
        wants = [biased(x) if b else plain(x) for x, (_, b) in zip(xs, LINEAR_CASES)]
    gots = _compile_and_run(Many().eval(), xs)
    for (m, b), x, got, want in zip(LINEAR_CASES, xs, gots, wants):
        lin = biased if b else plain
        assert got.dtype == torch.bfloat16 and got.shape == want.shape
        err = (got.double() - want.double()).abs()
        tol = tolerance(x, lin.weight, lin.bias)
        assert bool((err <= tol).all()), f"M={m} bias={b}: max err {err.max().item()}"

    report = verify.scan(inductor)
    assert verify.evaluate(report, [(m, n, k) for m, _ in LINEAR_CASES]) == []
    routed = {(e["op"], e["M"]) for e in report["routing"] if e["route"] == "rvv"}
    assert routed == {("addmm" if b else "mm", m) for m, b in LINEAR_CASES}
    rvv = [s for s in report["shared_objects"] if s["rvv_micro_gemm"]]
    assert rvv, "no RVV template kernel was built"
    for so in rvv:
        assert so["counts"].get("vsetvli", 0) + so["counts"].get("vsetivli", 0) > 0
        assert so["counts"].get("vfmacc", 0) + so["counts"].get("vfwmaccbf16", 0) > 0
    assert not report["extern_calls"].get("mm") and not report["extern_calls"].get("addmm")


def test_functional_linear_without_module(inductor):
    torch.manual_seed(1)
    w = torch.randn(2048, 1024).to(torch.bfloat16)
    x = torch.randn(4, 1024).to(torch.bfloat16)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", w)

        def forward(self, x):
            return F.relu(F.linear(x, self.w))

    want = torch.relu(F.linear(x, w))
    got = _compile_and_run(M().eval(), x)
    err = (got.double() - want.double()).abs()
    assert bool((err <= tolerance(x, w, None)).all())
    assert verify.evaluate(verify.scan(inductor), [(4, 2048, 1024)]) == []


def test_everything_else_keeps_aten(inductor):
    """Small, fp32, fp16 and non-contiguous GEMMs in one graph: all stay on ATen."""
    torch.manual_seed(2)
    small = torch.nn.Linear(256, 256, bias=False).to(torch.bfloat16).eval()
    f32 = torch.nn.Linear(1024, 1024, bias=False).eval()
    f16 = torch.nn.Linear(1024, 1024, bias=False).to(torch.float16).eval()
    bf = torch.nn.Linear(1024, 1024, bias=False).to(torch.bfloat16).eval()

    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.small, self.f32, self.f16, self.bf = small, f32, f16, bf

        def forward(self, a, b, c, d):
            return self.small(a), self.f32(b), self.f16(c), self.bf(d)

    a = torch.randn(4, 256).to(torch.bfloat16)
    b = torch.randn(4, 1024)
    c = torch.randn(4, 1024).to(torch.float16)
    d = torch.randn(1024, 4).to(torch.bfloat16).T  # stride (1, 4): not unit-stride along K
    with torch.no_grad():
        wants = Mixed()(a, b, c, d)
    gots = _compile_and_run(Mixed().eval(), a, b, c, d)
    for got, want in zip(gots, wants):
        # ATen computes both sides; only Inductor's layout choices may differ.
        torch.testing.assert_close(got, want, rtol=2**-7, atol=1e-3)
    report = verify.scan(inductor)
    assert not [s for s in report["shared_objects"] if s["rvv_micro_gemm"]]
    assert verify.evaluate(report, []) == [], report["routing"]
    reasons = " | ".join(e["reason"] for e in report["routing"])
    for why in ("gate: N=256", "not BF16", "layout:"):
        assert why in reasons, reasons
    assert {e["code"] for e in report["routing"]} == {"GATE", "NOT_BF16", "LAYOUT"}
    assert {e["kind"] for e in report["routing"]} == {"policy"}


def test_dynamic_shapes_keep_aten(inductor):
    lin = _linear_module(1024, 1024, False, seed=4)
    x = torch.randn(4, 1024).to(torch.bfloat16)
    with torch.no_grad():
        want = lin(x)
    got = _compile_and_run(lin, x, dynamic=True)
    torch.testing.assert_close(got, want, rtol=2**-7, atol=1e-3)
    report = verify.scan(inductor)
    assert not [s for s in report["shared_objects"] if s["rvv_micro_gemm"]]
    assert verify.evaluate(report, []) == [], report["routing"]


def test_no_freezing_falls_back_to_aten_with_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "c"))
    torch._dynamo.reset()
    rvv_inductor.enable()
    try:
        lin = _linear_module(1024, 1024, False)
        x = torch.randn(2, 1024).to(torch.bfloat16)
        with torch.no_grad():
            want = lin(x)
            got = torch.compile(lin)(x)
        torch.testing.assert_close(got, want, rtol=2**-7, atol=1e-3)
        report = verify.scan(tmp_path / "c")
        reasons = [e["reason"] for e in report["routing"]]
        assert any("frozen" in r for r in reasons), reasons
        assert {(e["code"], e["kind"]) for e in report["routing"]} == {("NOT_FROZEN", "defect")}
        # The verifier flags a gate-passing shape that did not reach RVV.
        assert verify.evaluate(report, []) != []
    finally:
        rvv_inductor.disable()
        torch._dynamo.reset()


def test_enable_is_idempotent_and_disable_restores_stock(tmp_path, monkeypatch):
    from torch._inductor import cpu_vec_isa, lowering
    from torch._inductor.codegen import cpp_micro_gemm

    stock_list = cpu_vec_isa.valid_vec_isa_list
    stock_caps = torch.cpu.get_capabilities
    stock_configs = dict(cpp_micro_gemm.micro_gemm_configs)
    stock_lowerings = dict(lowering.user_lowerings)
    rvv_inductor.enable()
    first = rvv_inductor.status()
    rvv_inductor.enable()
    assert rvv_inductor.status() == first
    if cpu.effective().has_v:
        assert str(cpu_vec_isa.pick_vec_isa()) == "rvv"
    rvv_inductor.disable()
    assert cpu_vec_isa.valid_vec_isa_list is stock_list
    assert torch.cpu.get_capabilities is stock_caps
    assert dict(cpp_micro_gemm.micro_gemm_configs) == stock_configs
    assert dict(lowering.user_lowerings) == stock_lowerings
    assert not cpu_vec_isa.pick_vec_isa()

    # Stock behaviour after disable: a gate-passing shape now compiles through ATen.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "stock"))
    torch._dynamo.reset()
    lin = _linear_module(1024, 1024, False)
    x = torch.randn(1, 1024).to(torch.bfloat16)
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        got = torch.compile(lin)(x)
        want = lin(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    report = verify.scan(tmp_path / "stock")
    assert report["routing"] == [] and not any(s["rvv_micro_gemm"] for s in report["shared_objects"])


def test_cache_sizes_are_positive_after_enable():
    rvv_inductor.enable()
    try:
        caps = torch.cpu.get_capabilities()
        assert caps["l1d_cache_size"] > 0 and caps["l2_cache_size"] > 0
    finally:
        rvv_inductor.disable()


@pytest.mark.matrix
def test_isa_flags_follow_detection():
    from torch._inductor import cpu_vec_isa

    info = cpu.effective()
    rvv_inductor.enable()
    try:
        isa = cpu_vec_isa.pick_vec_isa()
        if not info.has_v:
            assert not isa, "no V: Inductor must not pick a vector ISA"
            assert torch._inductor.config.cpp.march == "rv64gc"
            return
        assert str(isa) == "rvv"
        flags = isa.build_arch_flags()
        assert f"-march={info.march}" in flags
        assert ("zvfbfmin" in flags) == info.has_zvfbfmin
        assert ("zvfbfwma" in flags) == info.has_zvfbfwma
        assert "CPU_CAPABILITY_RVV" in isa.build_macro()
        assert isa.nelements(torch.float) * 32 == isa.bit_width()
    finally:
        rvv_inductor.disable()


@pytest.mark.matrix
def test_matrix_linear_and_pointwise(tmp_path, monkeypatch):
    """Runs at VLEN 128/256/512, with V off and with BF16 hardware (scripts/test)."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "c"))
    torch._dynamo.reset()
    rvv_inductor.enable()
    try:
        lin = _linear_module(1024, 1024, True, seed=3)
        x = torch.randn(3, 1024).to(torch.bfloat16)

        def f(x):
            return torch.sigmoid(lin(x)) * 2.0

        with torch.no_grad(), torch._inductor.config.patch(freezing=True):
            want = f(x)
            got = torch.compile(f)(x)
        torch.testing.assert_close(got.float(), want.float(), rtol=2**-6, atol=2**-6)
        report = verify.scan(tmp_path / "c")
        assert verify.evaluate(report, []) == []
        vec = sum(max(s["vector_total"], 0) for s in report["shared_objects"])
        if cpu.effective().has_v:
            assert any(s["rvv_micro_gemm"] for s in report["shared_objects"])
            assert vec > 0
        else:
            assert vec == 0, "V is off: not a single vector instruction may be generated"
    finally:
        rvv_inductor.disable()
        torch._dynamo.reset()


def test_pointwise_kernel_is_vectorised(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "pw"))
    torch._dynamo.reset()
    rvv_inductor.enable()
    try:
        x = torch.randn(4096)
        got = torch.compile(lambda t: torch.relu(t) * 3.0 + 1.0)(x)
        torch.testing.assert_close(got, torch.relu(x) * 3.0 + 1.0)
        report = verify.scan(tmp_path / "pw")
        sos = report["shared_objects"]
        assert sos and max(s["vector_total"] for s in sos) > 0, sos
    finally:
        rvv_inductor.disable()
        torch._dynamo.reset()
