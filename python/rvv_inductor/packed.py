"""Packed BF16 weights as torch tensors, through the C++ core's C ABI.

A Linear weight W[N, K] is packed once into ``[ceil(N/nb), K, nb]`` (contiguous along N
inside a block, the last block zero-padded): the layout the kernels stream. Packing,
unpacking, the layout descriptor and the eager kernel call all go to ``csrc/`` (one
source of truth); this module only moves tensor pointers across ctypes and checks shapes,
so bad input is a Python exception, never a crash.
"""
from __future__ import annotations

import ctypes

import torch

from . import _native
from ._native import RVV_DTYPE_BF16, PackedLayout  # noqa: F401  (re-exported)


class PackingError(_native.NativeCallError):
    pass


def _layout(n: int, k: int, nb: int) -> PackedLayout:
    try:
        return _native.make_layout(n, k, nb)
    except _native.NativeCallError as e:
        raise PackingError(str(e)) from None


def pack(weight: torch.Tensor, nb: int) -> torch.Tensor:
    """W[N, K] (bf16, any row stride) -> packed [ceil(N/nb), K, nb] bf16 tensor."""
    if weight.dtype != torch.bfloat16 or weight.dim() != 2:
        raise PackingError(f"expected a 2-D bfloat16 weight, got {weight.dim()}-D {weight.dtype}")
    if weight.device.type != "cpu":
        raise PackingError(f"expected a CPU weight, got {weight.device}")
    if weight.stride(1) != 1:
        weight = weight.contiguous()
    n, k = weight.shape
    lay = _layout(n, k, nb)
    out = torch.empty(lay.num_blocks, k, nb, dtype=torch.bfloat16)
    _native.check(_native.lib().rvv_pack_bf16(weight.data_ptr(), weight.stride(0), n, k, nb, out.data_ptr(),
                                              out.numel(), None), "pack", PackingError)
    return out


def packed_bytes(n: int, k: int, nb: int) -> int:
    """Bytes of the packed buffer of a BF16 W[n, k] (the last block's padding included)."""
    return _layout(n, k, nb).bytes


def _layout_of(packed: torch.Tensor, n: int) -> PackedLayout:
    """The descriptor of ``packed`` as the packing of an N-row weight, or PackingError."""
    if packed.dtype != torch.bfloat16 or packed.dim() != 3:
        raise PackingError(f"expected a packed [blocks, K, nb] bfloat16 tensor, got {tuple(packed.shape)} {packed.dtype}")
    nblk, k, nb = packed.shape
    lay = _layout(n, k, nb) if n > 0 else None
    if lay is None or lay.num_blocks != nblk:
        raise PackingError(f"N={n} does not match a packed weight of {nblk} blocks of {nb}")
    return lay


def unpack(packed: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of pack(): a new contiguous [N, K] bf16 tensor."""
    lay = _layout_of(packed, n)
    out = torch.empty(n, lay.k, dtype=torch.bfloat16)
    _native.check(_native.lib().rvv_unpack_bf16(packed.contiguous().data_ptr(), ctypes.byref(lay), out.data_ptr(),
                                                lay.k, out.numel()), "unpack", PackingError)
    return out


def linear_operands(x: torch.Tensor, bias: torch.Tensor | None, n: int, k: int, error: type[Exception]):
    """The checks every packed-weight linear makes before calling the C++ core: x a BF16
    [M, k] matrix with unit column stride (copied otherwise), bias None or BF16 [n]. Returns
    (x, bias, y) with y the empty BF16 [M, n] output; bad operands raise ``error``."""
    if x.dtype != torch.bfloat16 or x.dim() != 2 or x.shape[1] != k:
        raise error(f"expected x of shape [M, {k}] bfloat16, got {tuple(x.shape)} {x.dtype}")
    if bias is not None and (bias.dtype != torch.bfloat16 or tuple(bias.shape) != (n,)):
        raise error(f"expected a bfloat16 bias of shape [{n}], got {tuple(bias.shape)} {bias.dtype}")
    x = x if x.stride(1) == 1 else x.contiguous()
    bias = bias.contiguous() if bias is not None else None
    return x, bias, torch.empty(x.shape[0], n, dtype=torch.bfloat16)


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, n: int) -> torch.Tensor:
    """Y[M, N] = X[M, K] . W^T (+ bias), bf16 in and out, with the C++ dispatcher (RVV when
    the CPU has V, the scalar reference otherwise)."""
    lay = _layout_of(packed, n)
    k, nb = lay.k, lay.nb
    x, bias, y = linear_operands(x, bias, n, k, PackingError)
    packed = packed.contiguous()
    m = x.shape[0]
    if m == 0:
        return y
    _native.check(_native.lib().rvv_linear_bf16_packed(
        x.data_ptr(), x.stride(0), m, n, k, packed.data_ptr(), ctypes.byref(lay), nb,
        bias.data_ptr() if bias is not None else None, RVV_DTYPE_BF16 if bias is not None else 0,
        y.data_ptr(), n, RVV_DTYPE_BF16, 0, -1), "linear", PackingError)
    return y
