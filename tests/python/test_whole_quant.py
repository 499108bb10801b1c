"""Whole-model torch.compile with frozen weights quantized at compile time:
``rvv_inductor.enable(weights="int8" | "int4", group_size=..., keep_bf16=...)``.

Each test compiles a small stack of BF16 Linears (freezing on, static shapes, one graph
holding every row count so there is one Dynamo/Inductor compile) with a clean
TORCHINDUCTOR_CACHE_DIR, then checks:

1. every quantized layer against the FP64 product of its dequantized weight (the weight
   ``quantized.dequantize`` reads back from the same packing), within the kernel tests'
   bound (``kernel_bound``, the bound of test_quantized.py / tests/cpp/quant_test.cpp);
2. the whole output bit for bit against ``compile_linears(weights=...)``'s
   RVVQuantLinear on the same weights (same packing, same kernels);
3. ``verify``'s JSON: the quantized kernels (format, group size, kernel name) built, with
   vector FMAs in their disassembly, and no ATen GEMM for a gated shape;
4. layers kept in BF16 (``keep_bf16``, or a group size that does not divide K) take
   today's BF16 template with a typed reason, and match eager within the BF16 tolerance;
5. bad flag values raise ValueError, and the default stays BF16.

The gate is lowered to N, K >= 128 so that the emulated compile stays small.
"""
from __future__ import annotations

import pytest
import torch

import rvv_inductor
from rvv_inductor import cpu, quantized, regional, verify
from rvv_inductor.inductor import quant_lowering
from rvv_inductor.policy import Gate
from rvv_inductor.weight_spec import KEEP_BY_TENSOR, WeightSpec

from quant_bounds import kernel_bound  # noqa: E402  (tests/python is on sys.path)

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64 or not cpu.detect().has_v,
                                reason="needs riscv64 with V (emulated or native)")

GATE = Gate(min_mnk=0, min_n=128, min_k=128)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A clean Inductor cache; rvv_inductor disabled and Dynamo reset afterwards."""
    d = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(d))
    torch._dynamo.reset()
    yield d
    rvv_inductor.disable()
    torch._dynamo.reset()


class Stack(torch.nn.Module):
    """up (bias) -> ReLU (if relu) -> down (no bias), BF16."""

    def __init__(self, k: int, hidden: int, n: int, seed: int, relu: bool = True, skip: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.skip = skip  # forward reads x[..., skip:]: a view with an offset and a row stride > K
        self.up = torch.nn.Linear(k, hidden, bias=True)
        self.down = torch.nn.Linear(hidden, n, bias=False)
        self.act = torch.nn.ReLU() if relu else torch.nn.Identity()
        self.to(torch.bfloat16).eval()

    def forward(self, x):
        """(up's output, the stack's output): the test sees both layers' results."""
        h = self.up(x[..., self.skip:] if self.skip else x)
        return h, self.down(self.act(h))


class Many(torch.nn.Module):
    def __init__(self, stack: Stack) -> None:
        super().__init__()
        self.stack = stack

    def forward(self, xs):
        return [self.stack(x) for x in xs]


def compile_and_run(stack: Stack, xs, **flags):
    rvv_inductor.enable(gate=GATE, **flags)
    with torch._inductor.config.patch(freezing=True), torch.no_grad():
        return torch.compile(Many(stack).eval(), dynamic=False)(xs)


def bf16_tolerance(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """test_inductor.py's bound on |rvv - eager| for a BF16 linear."""
    x64, w64 = x.double(), w.double()
    ref = x64 @ w64.T + (b.double() if b is not None else 0)
    mag = x64.abs() @ w64.abs().T + (b.double().abs() if b is not None else 0)
    return 2 * x.shape[-1] * 2.0**-24 * mag + 2 * 2.0**-8 * ref.abs() + 1e-30


def check_quantized_layer(layer: regional.RVVQuantLinear, lin: torch.nn.Linear, x: torch.Tensor, got: torch.Tensor):
    """got (the compiled graph's output of this layer) within the kernel bound of the FP64
    product of the weight dequantized from the same packing."""
    lay = layer._layout
    packed = quantized.quantize_pack(lin.weight.detach(), lay)
    assert torch.equal(packed, layer.packed_weight)  # the packing regional and whole-model share
    w = quantized.dequantize(packed, lay).double()
    ref = x.double() @ w.T + (lin.bias.double() if lin.bias is not None else 0)
    err = (got.double() - ref).abs()
    bound = kernel_bound(layer, x, ref)
    assert bool((err <= bound).all()), f"max error {err.max().item():.3g}, bound there {bound.flatten()[err.argmax()]:.3g}"


def quant_rows(report: dict) -> list[dict]:
    return [e for e in report["routing"] if e["route"] == "rvv" and e["dtype"] in ("int8", "int4")]


def fmas(so: dict) -> int:
    c = so["counts"]
    return sum(c.get(f, 0) for f in ("vfmacc", "vfmadd", "vfwmacc", "vfwmaccbf16", "vwmacc"))


def test_int4_matches_dequantized_and_regional_and_verifies(cache):
    """INT4 g64, decode (M=1) and prefill (M=3) with INT8 activations (the default for INT4): the
    prefill runs the gemm_x8 kernel, bit for bit the regional layer's, within the bound of
    the FP64 product on the quantized activations."""
    from test_int8_activations import quantize_x8, x8_bound

    stack = Stack(256, 320, 200, seed=0)  # N=200: a partial last block
    torch.manual_seed(1)
    xs = [torch.randn(m, 256, dtype=torch.bfloat16) for m in (1, 3)]
    ys = compile_and_run(stack, xs, weights="int4", group_size=64)

    info = cpu.effective()
    up = regional.RVVQuantLinear.from_linear(stack.up, info.block_n, "int4", 64)
    down = regional.RVVQuantLinear.from_linear(stack.down, info.block_n, "int4", 64)
    with torch.no_grad():
        for x, (h, y) in zip(xs, ys):
            for layer, lin, inp, out in ((up, stack.up, x, h), (down, stack.down, torch.relu(h), y)):
                if x.shape[0] == 1:
                    check_quantized_layer(layer, lin, inp, out)
                else:
                    xq = quantize_x8(inp)
                    ref = xq @ layer.dequantized().double().T + (lin.bias.double() if lin.bias is not None else 0)
                    assert bool(((out.double() - ref).abs() <= x8_bound(layer, xq, ref)).all())
                assert torch.equal(out, layer(inp)), f"M={x.shape[0]}: whole-model and regional INT4 differ"

    report = verify.scan(cache)
    problems = verify.evaluate(report, [])
    assert problems == [], problems
    rows = quant_rows(report)
    want_kernels = {f"{'rvv_zvfh' if info.has_zvfh else 'rvv'}/int4/{kind}" for kind in ("gemv_1xm8", "gemm_x8_4xm4")}
    assert {(r["M"], r["N"], r["K"]) for r in rows} == {(m, n, k) for m in (1, 3) for n, k in ((320, 256), (200, 320))}
    assert {r["reason"].split()[0] for r in rows} == want_kernels
    assert {r["M"] for r in rows if r["reason"].endswith("act=int8")} == {3}
    sos = [s for s in report["shared_objects"] if s["quantized"]]
    assert {s["quantized"]["kernel"] for s in sos} == want_kernels
    assert all(s["quantized"]["format"] == "int4" and s["quantized"]["group_size"] == 64 for s in sos)
    assert all(fmas(s) > 0 and s["vector_total"] > fmas(s) for s in sos), [s["counts"] for s in sos]
    # The INT8-activation kernel multiplies in integers: vwmacc in its .so, not in the GEMV's.
    assert all((s["counts"].get("vwmacc", 0) > 0) == ("gemm_x8" in s["quantized"]["kernel"]) for s in sos)
    assert report["extern_calls"].get("mm", 0) == 0 and report["extern_calls"].get("addmm", 0) == 0
    assert not [e for e in report["routing"] if e["route"] == "aten"]


def test_int8_per_channel_and_kept_layers(cache):
    """INT8 per channel (the default group size) with BF16 activations (the FP path at
    M >= 2) for `up`, whose input is a slice (offset 32, row stride 288); `down` kept in
    BF16 by keep_bf16: it runs today's BF16 template and matches eager within BF16
    tolerance."""
    stack = Stack(256, 320, 192, seed=2, relu=False, skip=32)
    torch.manual_seed(3)
    xs = [torch.randn(m, 32 + 256, dtype=torch.bfloat16) for m in (1, 2)]
    ys = compile_and_run(stack, xs, weights="int8", keep_bf16=[stack.down], activations="bf16")

    info = cpu.effective()
    up = regional.RVVQuantLinear.from_linear(stack.up, info.block_n, "int8", 0, activations="bf16")
    with torch.no_grad():
        for x, (h, y) in zip(xs, ys):
            x = x[:, 32:]
            check_quantized_layer(up, stack.up, x, h)
            assert torch.equal(h, up(x)), f"M={x.shape[0]}: whole-model and regional INT8 differ"
            err = (y.double() - stack.down(h).double()).abs()
            assert bool((err <= bf16_tolerance(h, stack.down.weight, None)).all())

    report = verify.scan(cache)
    assert verify.evaluate(report, []) == []
    rows = quant_rows(report)
    assert {(r["M"], r["N"], r["K"]) for r in rows} == {(1, 320, 256), (2, 320, 256)}
    assert not [r for r in rows if "act=int8" in r["reason"]]
    kept = [e for e in report["routing"] if e["route"] == "bf16"]
    assert {(e["M"], e["code"]) for e in kept} == {(1, "KEPT_BF16"), (2, "KEPT_BF16")}
    assert all(e["kind"] == "policy" for e in kept)
    bf16_rvv = [e for e in report["routing"] if e["route"] == "rvv" and e["dtype"] not in ("int8", "int4")]
    assert {(e["M"], e["N"], e["K"]) for e in bf16_rvv} == {(1, 192, 320), (2, 192, 320)}
    sos = [s for s in report["shared_objects"] if s["rvv_micro_gemm"]]
    assert {s["quantized"]["format"] for s in sos if s["quantized"]} == {"int8"}
    assert len([s for s in sos if not s["quantized"]]) == 2  # the BF16 template kernels
    assert all(fmas(s) > 0 for s in sos)


def test_flag_values(cache):
    """Bad values raise ValueError before anything is installed; the default is BF16."""
    bad = [dict(weights="int3"), dict(weights="INT4"), dict(weights=4),
           dict(weights="int4", group_size=0), dict(weights="int4", group_size=48),
           dict(weights="int8", group_size=100), dict(weights="int4", group_size=True),
           dict(weights="bf16", group_size=64), dict(weights="int4", keep_bf16="lm_head"),
           dict(weights="int4", keep_bf16=[3]), dict(group_size=64), dict(weights="int4", activations="fp8"),
           dict(weights="int4", activations=8)]
    for flags in bad:
        with pytest.raises(ValueError):
            rvv_inductor.enable(**flags)
        assert not rvv_inductor.is_enabled()
    assert rvv_inductor.enable()["weights"] == "bf16"
    assert quant_lowering.get_spec() == WeightSpec()
    assert rvv_inductor.enable(weights="int4")["weights"] == "int4"
    assert rvv_inductor.enable()["activations"] == "auto"  # the default: INT8 activations for INT4 weights
    assert quant_lowering.get_spec().x8(2) and not quant_lowering.get_spec().x8(1)
    assert quant_lowering.get_spec().group_size == 64
    assert rvv_inductor.enable()["weights"] == "int4"  # a later enable() keeps it, like gate=
    rvv_inductor.disable()
    assert rvv_inductor.enable()["weights"] == "bf16"
    lin = torch.nn.Linear(4, 4)
    assert WeightSpec.parse("int8", None, [lin], keep_by=KEEP_BY_TENSOR).keep_bf16 == (lin.weight.data_ptr(),)
    with pytest.raises(ValueError, match="GGUF block format"):
        rvv_inductor.enable(weights="q4_k")
