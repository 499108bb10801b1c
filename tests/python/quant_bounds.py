"""The error bound of the quantized kernels (tests/cpp/quant_test.cpp's, for BF16 output),
shared by the tests that compare a quantized Linear with the FP64 product of its
dequantized weight: regional (test_quantized.py) and whole-model (test_whole_quant.py)."""
from __future__ import annotations

import torch


def gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def kernel_bound(layer, x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per element of y: the FP32 accumulation over the terms |x|.(|q|+|z|).|s|, the
    FP16-activation loss of the Zvfh path, and the BF16 rounding of the output.
    ``layer`` is an RVVQuantLinear."""
    qt = layer.quantized_tensors()
    k = layer.in_features
    rows = k if layer.group_size == 0 else layer.group_size
    s = qt["scales"].double().abs().repeat_interleave(rows, dim=1)[:, :k]
    z = qt["zeros"].double().repeat_interleave(rows, dim=1)[:, :k]
    qz = (qt["values"].double().abs() + z) * s
    b = layer.bias.double().abs() if layer.bias is not None else 0
    abs_sum = x.double().abs() @ qz.T + b
    groups = 1 if layer.group_size == 0 else -(-k // layer.group_size)
    terms = k + 2 * groups + 2
    b32 = (gamma(terms, 2.0**-24) + gamma(terms, 2.0**-53)) * abs_sum
    # QuantF16 (Zvfh): activations scaled into FP16, values below 2^-31 max|x| may lose 2^-39 max|x|.
    amax = x.double().abs().amax(dim=1, keepdim=True)
    b32 = b32 + 2.0**-39 * amax * layer.dequantized().double().abs().sum(1)
    return b32 + 2.0**-8 * (ref.abs() + b32)
