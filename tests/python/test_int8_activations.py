"""INT8 activations for INT8/INT4 Linear calls with M >= 2 (``activations="int8"``, and
"auto", the default, for INT4 weights; csrc/rvv_inductor/quant_x8.h): the regional layer
against an FP64 product of
activations quantized here from the definition, the switch and the decode path it leaves
alone, bad values, and a decoder's logits against the same model with dequantized weights
and BF16 activations (the distance INT8 activations add is printed and bounded)."""
from __future__ import annotations

import copy
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import rvv_inductor  # noqa: E402
from rvv_inductor import cpu, regional  # noqa: E402

from quant_bounds import kernel_bound  # noqa: E402  (tests/python is on sys.path)

pytestmark = pytest.mark.skipif(not cpu.effective().has_v, reason="needs RVV (the regional layers need V)")


def quantize_x8(x: torch.Tensor) -> torch.Tensor:
    """x [M, K] bf16 -> the values the kernel multiplies, x_q * dx, FP64: per row and block
    of 32, dx = max|x| / 127 and x_q = round-half-even(x * (127 / max|x|)) in fp32; blocks
    below 2^-96 are zero."""
    m, k = x.shape
    kp = -(-k // 32) * 32
    xf = torch.zeros(m, kp, dtype=torch.float32)
    xf[:, :k] = x.float()
    blocks = xf.view(m, kp // 32, 32)
    amax = blocks.abs().amax(-1, keepdim=True)
    tiny = amax < 2.0**-96
    # Each fp32 operation as an FP64 one rounded to fp32 (correctly rounded for / and *):
    # torch's own float32 kernels need not be (127 / amax and the product at an exact tie
    # such as -63.5 gave -63 here where the kernel's RNE gives -64).
    safe = torch.where(tiny, torch.ones_like(amax), amax).double()
    dx = torch.where(tiny, torch.zeros_like(amax), (safe / 127).float())
    inv = torch.where(tiny, torch.zeros_like(amax), (127 / safe).float())
    q = torch.round((blocks.double() * inv.double()).float())  # half to even
    assert q.abs().max() <= 127
    return (q.double() * dx.double()).view(m, kp)[:, :k]


def x8_bound(layer, xq: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """fp32 rounding of the per-block terms (and the group steps), then the BF16 output."""
    w = layer.dequantized().double()
    mag = xq.abs() @ w.abs().T + (layer.bias.double().abs() if layer.bias is not None else 0)
    terms = 2 * -(-layer.in_features // 32) + 2 * -(-layer.in_features // max(layer.group_size, 1)) + 4
    b32 = terms * 2.0**-23 * mag
    return b32 + 2.0**-8 * (ref.abs() + b32) + 1e-30


@pytest.mark.parametrize("fmt,group", [("int4", 32), ("int4", 64), ("int8", 0), ("int8", 128)])
def test_layer_matches_fp64_on_quantized_activations(fmt, group):
    torch.manual_seed(0)
    lin = torch.nn.Linear(320, 200, bias=True).to(torch.bfloat16)
    layer = regional.RVVQuantLinear.from_linear(lin, cpu.effective().block_n, fmt, group, activations="int8")
    assert layer.activations_used == "int8"
    w = layer.dequantized().double()
    with torch.no_grad():
        for m in (2, 5, 17):
            x = torch.randn(m, 320, dtype=torch.bfloat16) * 3
            x[0, 7] = 60.0  # an outlier: its block gets a coarse step
            got = layer(x).double()
            xq = quantize_x8(x)
            ref = xq @ w.T + layer.bias.double()
            err = (got - ref).abs()
            bound = x8_bound(layer, xq, ref)
            assert bool((err <= bound).all()), f"M={m}: max error {err.max().item():.3g}"
            # The FP path of the same layer: within its own (tighter-in-x) bound of the bf16
            # product, and not the same numbers (the switch takes effect).
            layer.activations = "bf16"
            fp = layer(x).double()
            layer.activations = "int8"
            ref_fp = x.double() @ w.T + layer.bias.double()
            assert bool(((fp - ref_fp).abs() <= kernel_bound(layer, x, ref_fp)).all())
            assert not torch.equal(fp, got)


def test_decode_keeps_the_fp_path():
    """M == 1 is DRAM-bound: both settings run the same GEMV, bit for bit."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(256, 192).to(torch.bfloat16)
    a = regional.RVVQuantLinear.from_linear(lin, cpu.effective().block_n, "int4", 32)
    b = regional.RVVQuantLinear.from_linear(lin, cpu.effective().block_n, "int4", 32, activations="bf16")
    x = torch.randn(1, 256, dtype=torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(a(x), b(x))
        assert not torch.equal(a(x.repeat(3, 1)), b(x.repeat(3, 1)))


def test_bad_values_are_errors():
    m = torch.nn.Sequential(torch.nn.Linear(256, 256)).to(torch.bfloat16)
    for bad in ("fp8", "INT8", None, 8):
        with pytest.raises(ValueError, match="activations"):
            rvv_inductor.compile_linears(copy.deepcopy(m), weights="int4", activations=bad)
        with pytest.raises(ValueError, match="activations"):
            rvv_inductor.enable(weights="int4", activations=bad if bad is not None else "none")
    with pytest.raises(ValueError, match="activations"):
        regional.RVVQuantLinear(256, 256, None, 64, "int4", 32, activations="int16")
    # Set on a layer: checked at once (the op's arguments are derived then), the old value kept.
    layer = regional.RVVQuantLinear(256, 256, None, 64, "int4", 32, activations="bf16")
    with pytest.raises(ValueError, match="activations"):
        layer.activations = "int16"
    assert layer.activations == "bf16" and layer.activations_used == "bf16"


def test_report_names_the_choice():
    """auto (the default) quantizes the activations of INT4 layers, not of INT8 ones."""
    m = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 128)).to(torch.bfloat16)
    report = rvv_inductor.compile_linears(copy.deepcopy(m), weights="int4")
    assert report.activations == "auto" and report.int8_activation_layers == ["0", "1"]
    assert "at M >= 2: auto: 2 layers quantize X to INT8" in str(report)
    report = rvv_inductor.compile_linears(copy.deepcopy(m), weights="int8")
    assert report.activations == "auto" and report.int8_activation_layers == []
    report = rvv_inductor.compile_linears(copy.deepcopy(m), weights="int8", activations="int8")
    assert report.int8_activation_layers == ["0", "1"]
    report = rvv_inductor.compile_linears(copy.deepcopy(m), weights="int4", activations="bf16", keep_bf16="1")
    assert report.activations == "bf16" and report.int8_activation_layers == []
    assert "at M >= 2: bf16: 0 layers quantize X to INT8" in str(report)


# The decoder's logits: teacher-forced over a 24-token prompt (one M = 24 call per layer)
# and 8 decode steps, against the same model with the dequantized weights and BF16
# activations. INT8 activations add at most sum|w| * dx / 2 per output of every Linear; the
# bound below is the measured distance with a margin (docs/kernels-and-formats.md, "INT8 activations for the prompt").
LOGIT_BOUND = 0.04  # relative to max |logit|


@pytest.mark.parametrize("arch,fmt", [("qwen2", "int4"), ("llama", "int8")])
def test_decoder_logits_with_int8_activations(arch, fmt):
    pytest.importorskip("transformers")
    from small_decoders import random_decoder
    from test_quantized import dequantized_twin

    eager = random_decoder(arch, hidden=512, heads=8, kv_heads=2, vocab=1024, max_positions=256, init_range=0.05)
    eager = eager.to(torch.bfloat16).eval()
    rvv8 = copy.deepcopy(eager)
    report = rvv_inductor.compile_linears(rvv8, weights=fmt, activations="int8")
    assert len(report.int8_activation_layers) == len(report.taken) == 2 * 7 + 1
    rvv16 = copy.deepcopy(eager)
    rvv_inductor.compile_linears(rvv16, weights=fmt, activations="bf16")
    ref = dequantized_twin(rvv8, eager)

    torch.manual_seed(2)
    tokens = torch.randint(0, 1024, (1, 32))
    with torch.no_grad():
        def logits(model):
            r = model(tokens[:, :24], use_cache=True)
            out, cache = [r.logits[0].float()], r.past_key_values
            for t in range(24, 32):
                r = model(tokens[:, t:t + 1], past_key_values=cache, use_cache=True)
                out.append(r.logits[0, -1:].float())
                cache = r.past_key_values
            return torch.cat(out)

        want, got8, got16, bf16 = logits(ref), logits(rvv8), logits(rvv16), logits(eager)
    scale = want.abs().max().item()
    dw = (want - bf16).abs().max().item() / scale  # what the weight format itself costs
    d8 = (got8 - want).abs().max().item() / scale
    d16 = (got16 - want).abs().max().item() / scale
    prompt8 = (got8[:24] - want[:24]).abs().max().item() / scale
    agree = (got8.argmax(-1) == want.argmax(-1)).float().mean().item()
    print(f"{arch} {fmt}: max |logit - dequantized BF16 model| / max|logit|: INT8 activations {d8:.4f} "
          f"(prompt rows {prompt8:.4f}), BF16 activations {d16:.4f}; top-1 agreement {agree:.2%}; "
          f"the {fmt} weights themselves (dequantized model vs the BF16 one): {dw:.4f}")
    assert d16 < d8 <= LOGIT_BOUND
