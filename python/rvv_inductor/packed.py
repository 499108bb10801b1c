"""Packed BF16 weights as torch tensors, through the C++ core's C ABI.

A Linear weight W[N, K] is packed once into ``[ceil(N/nb), K, nb]`` (contiguous along N
inside a block, the last block zero-padded): the layout the kernels stream. Packing,
unpacking and the eager kernel call all go to ``csrc/`` (one source of truth); this module
only moves tensor pointers across ctypes and checks shapes, so bad input is a Python
exception, never a crash.
"""
from __future__ import annotations

import ctypes

import torch

from . import _native


class PackedLayout(ctypes.Structure):
    _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint32), ("n", ctypes.c_int64),
                ("k", ctypes.c_int64), ("nb", ctypes.c_int64), ("num_blocks", ctypes.c_int64),
                ("elements", ctypes.c_int64), ("dtype", ctypes.c_int32), ("vlenb", ctypes.c_int32),
                ("lmul", ctypes.c_int32), ("reserved", ctypes.c_int32), ("bytes", ctypes.c_int64),
                ("group_size", ctypes.c_int32), ("scale_dtype", ctypes.c_int32),
                ("zero_points", ctypes.c_int32), ("reserved2", ctypes.c_int32)]


RVV_DTYPE_BF16, RVV_DTYPE_F32 = 1, 2
_P = ctypes.c_void_p
_I64 = ctypes.c_int64


class PackingError(ValueError):
    pass


def _lib():
    h = _native.lib()
    if not getattr(h, "_rvv_packed_declared", False):
        h.rvv_last_error.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        h.rvv_preferred_nb.restype = _I64
        h.rvv_packed_size.argtypes = [_I64, _I64, _I64, ctypes.POINTER(_I64)]
        h.rvv_pack_bf16.argtypes = [_P, _I64, _I64, _I64, _I64, _P, _I64, ctypes.POINTER(PackedLayout)]
        h.rvv_unpack_bf16.argtypes = [_P, ctypes.POINTER(PackedLayout), _P, _I64, _I64]
        h.rvv_linear_bf16_packed.argtypes = [_P, _I64, _I64, _I64, _I64, _P, ctypes.POINTER(PackedLayout),
                                             _I64, _P, ctypes.c_int, _P, _I64, ctypes.c_int, _I64, _I64]
        h._rvv_packed_declared = True
    return h


def _check(rc: int, what: str) -> None:
    if rc != 0:
        buf = ctypes.create_string_buffer(512)
        _lib().rvv_last_error(buf, len(buf))
        raise PackingError(f"{what}: {buf.value.decode() or f'status {rc}'}")


RVV_PACKED_MAGIC, RVV_PACKED_VERSION = 0x4B505652, 2  # abi_types.h


def layout_for(n: int, k: int, nb: int) -> PackedLayout:
    """The descriptor (abi_types.h) of a [N, K] bf16 weight packed with block width nb.
    The kernel validates it against the call, so a wrong one is an error, not a crash."""
    blocks = -(-n // nb)
    return PackedLayout(magic=RVV_PACKED_MAGIC, version=RVV_PACKED_VERSION, n=n, k=k, nb=nb,
                        num_blocks=blocks, elements=blocks * k * nb, dtype=RVV_DTYPE_BF16,
                        bytes=blocks * k * nb * 2)


def pack(weight: torch.Tensor, nb: int) -> torch.Tensor:
    """W[N, K] (bf16, any row stride) -> packed [ceil(N/nb), K, nb] bf16 tensor."""
    if weight.dtype != torch.bfloat16 or weight.dim() != 2:
        raise PackingError(f"expected a 2-D bfloat16 weight, got {weight.dim()}-D {weight.dtype}")
    if weight.device.type != "cpu":
        raise PackingError(f"expected a CPU weight, got {weight.device}")
    if weight.stride(1) != 1:
        weight = weight.contiguous()
    n, k = weight.shape
    out = torch.empty(-(-n // nb), k, nb, dtype=torch.bfloat16)
    _check(_lib().rvv_pack_bf16(weight.data_ptr(), weight.stride(0), n, k, nb, out.data_ptr(),
                                out.numel(), None), "pack")
    return out


def unpack(packed: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of pack(): a new contiguous [N, K] bf16 tensor."""
    _check_packed(packed, n)
    nblk, k, nb = packed.shape
    lay = layout_for(n, k, nb)
    out = torch.empty(n, k, dtype=torch.bfloat16)
    _check(_lib().rvv_unpack_bf16(packed.contiguous().data_ptr(), ctypes.byref(lay), out.data_ptr(), k,
                                  out.numel()), "unpack")
    return out


def _check_packed(packed: torch.Tensor, n: int) -> None:
    if packed.dtype != torch.bfloat16 or packed.dim() != 3:
        raise PackingError(f"expected a packed [blocks, K, nb] bfloat16 tensor, got {tuple(packed.shape)} {packed.dtype}")
    nblk, _, nb = packed.shape
    if not (0 < n <= nblk * nb and n > (nblk - 1) * nb):
        raise PackingError(f"N={n} does not match a packed weight of {nblk} blocks of {nb}")


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, n: int) -> torch.Tensor:
    """Y[M, N] = X[M, K] . W^T (+ bias), bf16 in and out, with the C++ dispatcher (RVV when
    the CPU has V, the scalar reference otherwise)."""
    _check_packed(packed, n)
    nblk, k, nb = packed.shape
    if x.dtype != torch.bfloat16 or x.dim() != 2 or x.shape[1] != k:
        raise PackingError(f"expected x of shape [M, {k}] bfloat16, got {tuple(x.shape)} {x.dtype}")
    if bias is not None and (bias.dtype != torch.bfloat16 or bias.shape != (n,)):
        raise PackingError(f"expected a bfloat16 bias of shape [{n}], got {tuple(bias.shape)} {bias.dtype}")
    x = x if x.stride(1) == 1 else x.contiguous()
    packed = packed.contiguous()
    bias = bias.contiguous() if bias is not None else None
    m = x.shape[0]
    y = torch.empty(m, n, dtype=torch.bfloat16)
    if m == 0:
        return y
    lay = layout_for(n, k, nb)
    _check(_lib().rvv_linear_bf16_packed(
        x.data_ptr(), x.stride(0), m, n, k, packed.data_ptr(), ctypes.byref(lay), nb,
        bias.data_ptr() if bias is not None else None, RVV_DTYPE_BF16 if bias is not None else 0,
        y.data_ptr(), n, RVV_DTYPE_BF16, 0, -1), "linear")
    return y
