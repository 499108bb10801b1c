"""Quantized (INT8 / INT4) packed weights as torch tensors, through the C++ core's C ABI.

A weight W[N, K] is quantized once and packed into a flat uint8 tensor whose layout
(``_native.PackedLayout``: format, group size, scale dtype, zero points, block width) is
the C ABI's (``csrc/README.md``, "Quantized weights"). Quantizing, dequantizing and the
kernel call all go to ``csrc/``; this module moves tensor pointers across ctypes and
checks shapes, so bad input is a Python exception, never a crash.
"""
from __future__ import annotations

import ctypes
import functools

import torch

from . import _native
from . import packed as packed_mod  # linear_operands; the module name `packed` is a parameter here
from ._native import RVV_DTYPE_BF16, RVV_DTYPE_F16, RVV_DTYPE_INT4, RVV_DTYPE_INT8, PackedLayout

# The formats a BF16 weight can be quantized to (the reference quantizer). The GGUF block
# formats (q4_1, q5_0, q5_1, q4_k, q5_k, q6_k) come only from files, packed from their blocks.
FORMAT_CODES = {"int8": RVV_DTYPE_INT8, "int4": RVV_DTYPE_INT4}
FORMAT_NAMES = {v: k for k, v in FORMAT_CODES.items()}


def weight_formats() -> dict[str, dict]:
    """The library's weight formats by name (csrc/rvv_inductor/weight_formats.inl)."""
    return _native.weight_formats()


def block_formats() -> dict[str, dict]:
    """The GGUF block formats by name (fixed records: record_bytes > 0)."""
    return {k: v for k, v in weight_formats().items() if v["record_bytes"] > 0}


def format_info(fmt: str) -> dict:
    try:
        return weight_formats()[fmt]
    except KeyError:
        raise QuantError(f"unknown weight format {fmt!r}; the library has {', '.join(weight_formats())}") from None


def is_block_format(fmt: str) -> bool:
    return fmt in block_formats()
SCALE_DTYPES = {"f16": RVV_DTYPE_F16, "bf16": RVV_DTYPE_BF16}
_SCALE_TORCH = {RVV_DTYPE_F16: torch.float16, RVV_DTYPE_BF16: torch.bfloat16}


class QuantError(_native.NativeCallError):
    pass


@functools.lru_cache(maxsize=None)
def layout(fmt: int, group_size: int, scale_dtype: int, zero_points: bool, n: int, k: int, nb: int) -> PackedLayout:
    """The descriptor of W[n, k] in format code ``fmt`` (cached: callers must not modify
    it): INT8/INT4 from the other arguments, a GGUF block format from its record, which
    fixes the rest (they are then ignored). The same rule as the C++ operators'
    ``cached_layout`` (csrc/torch_ops/linear_ops.cpp), so the ctypes kernels run every
    format of the kernel table that the C++ ones run."""
    try:
        if _is_block_code(fmt):
            return _native.block_layout(fmt, n, k, nb)
        return _native.quant_layout(fmt, group_size, scale_dtype, zero_points, n, k, nb)
    except _native.NativeCallError as e:
        raise QuantError(str(e)) from None


def _is_block_code(fmt: int) -> bool:
    return any(v["code"] == fmt for v in block_formats().values())


@functools.lru_cache(maxsize=None)
def layout_for(fmt: str, group_size: int, scale_dtype: str, zero_points: bool, n: int, k: int,
               nb: int) -> PackedLayout:
    """The descriptor of W[n, k] in format ``fmt`` by name: INT8/INT4 with the given group
    size, scale dtype and zero points, or a block format, whose record fixes them (the
    other arguments are then ignored). Cached: callers must not modify it."""
    if is_block_format(fmt):
        try:
            return _native.block_layout(format_info(fmt)["code"], n, k, nb)
        except _native.NativeCallError as e:
            raise QuantError(str(e)) from None
    if fmt not in FORMAT_CODES:
        raise QuantError(f"weight format {fmt!r} is not int8, int4 or a GGUF block format")
    return layout(FORMAT_CODES[fmt], group_size, SCALE_DTYPES[scale_dtype], zero_points, n, k, nb)


def pack_gguf_blocks(blocks: torch.Tensor, lay: PackedLayout) -> torch.Tensor:
    """A tensor stored as GGUF blocks (uint8 [N, bytes per row], the file's bytes) -> the
    packed bytes of block layout ``lay``, value for value (csrc/rvv_inductor/block_quant.h)."""
    if blocks.dtype != torch.uint8 or blocks.dim() != 2 or blocks.shape[0] != lay.n:
        raise QuantError(f"expected uint8 file blocks [{lay.n}, bytes], got {tuple(blocks.shape)} {blocks.dtype}")
    blocks = blocks.contiguous()
    out = torch.empty(lay.bytes, dtype=torch.uint8)
    _native.check(_native.lib().rvv_pack_gguf_blocks(blocks.data_ptr(), blocks.shape[1], ctypes.byref(lay),
                                                     out.data_ptr(), out.numel()), "pack GGUF blocks", QuantError)
    return out


def num_groups(lay: PackedLayout) -> int:
    return 1 if lay.group_size == 0 else -(-lay.k // lay.group_size)


def quantize_pack(weight: torch.Tensor, lay: PackedLayout) -> torch.Tensor:
    """bf16 W[N, K] -> the packed bytes (uint8 [lay.bytes]), round to nearest."""
    if weight.dtype != torch.bfloat16 or weight.dim() != 2 or tuple(weight.shape) != (lay.n, lay.k):
        raise QuantError(f"expected a [{lay.n}, {lay.k}] bfloat16 weight, got {tuple(weight.shape)} {weight.dtype}")
    weight = weight.detach().to("cpu")
    if weight.stride(1) != 1:
        weight = weight.contiguous()
    out = torch.empty(lay.bytes, dtype=torch.uint8)
    _native.check(_native.lib().rvv_quantize_pack(weight.data_ptr(), weight.stride(0), ctypes.byref(lay),
                                                  out.data_ptr(), out.numel()), "quantize", QuantError)
    return out


def pack_quantized(values: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                   lay: PackedLayout) -> torch.Tensor:
    """Already-quantized values [N, K] (int8; INT4: 0..15), scales [N, groups] (16-bit, the
    layout's scale dtype) and zero points [N, groups] (uint8, or None) -> packed bytes,
    bit for bit."""
    g = num_groups(lay)
    if values.dtype != torch.int8 or tuple(values.shape) != (lay.n, lay.k):
        raise QuantError(f"expected int8 values [{lay.n}, {lay.k}], got {tuple(values.shape)} {values.dtype}")
    if scales.element_size() != 2 or tuple(scales.shape) != (lay.n, g):
        raise QuantError(f"expected 16-bit scales [{lay.n}, {g}], got {tuple(scales.shape)} {scales.dtype}")
    if zeros is not None and (zeros.dtype != torch.uint8 or tuple(zeros.shape) != (lay.n, g)):
        raise QuantError(f"expected uint8 zero points [{lay.n}, {g}], got {tuple(zeros.shape)} {zeros.dtype}")
    values, scales = values.contiguous(), scales.contiguous()
    zeros = zeros.contiguous() if zeros is not None else None
    out = torch.empty(lay.bytes, dtype=torch.uint8)
    _native.check(_native.lib().rvv_pack_quantized(values.data_ptr(), lay.k, scales.data_ptr(),
                                                   zeros.data_ptr() if zeros is not None else None,
                                                   ctypes.byref(lay), out.data_ptr(), out.numel()),
                  "pack quantized", QuantError)
    return out


def _check_packed(packed: torch.Tensor, lay: PackedLayout) -> torch.Tensor:
    if packed.dtype != torch.uint8 or packed.dim() != 1 or packed.numel() < lay.bytes:
        raise QuantError(f"expected a uint8 buffer of {lay.bytes} bytes, got {tuple(packed.shape)} {packed.dtype}")
    return packed.contiguous()


def unpack_quantized(packed: torch.Tensor, lay: PackedLayout) -> dict[str, torch.Tensor | None]:
    """The stored values [N, K] int8, scales [N, groups] (float16 or bfloat16) and zero points
    [N, groups] uint8 (the implicit ones, 8 for symmetric INT4, 0 for INT8)."""
    packed = _check_packed(packed, lay)
    g = num_groups(lay)
    values = torch.empty(lay.n, lay.k, dtype=torch.int8)
    scales = torch.empty(lay.n, g, dtype=_SCALE_TORCH[lay.scale_dtype])
    zeros = torch.empty(lay.n, g, dtype=torch.uint8)
    _native.check(_native.lib().rvv_unpack_quantized(packed.data_ptr(), ctypes.byref(lay), values.data_ptr(),
                                                     scales.data_ptr(), zeros.data_ptr()), "unpack", QuantError)
    return {"values": values, "scales": scales, "zeros": zeros}


def dequantize(packed: torch.Tensor, lay: PackedLayout) -> torch.Tensor:
    """The weight the kernels multiply with, (q - z) * s, exactly, as FP32 [N, K]."""
    packed = _check_packed(packed, lay)
    out = torch.empty(lay.n, lay.k, dtype=torch.float32)
    _native.check(_native.lib().rvv_dequantize(packed.data_ptr(), ctypes.byref(lay), out.data_ptr(), lay.k,
                                               out.numel()), "dequantize", QuantError)
    return out


@functools.lru_cache(maxsize=None)
def _dequantize_rows_fn():
    try:
        fn = _native.lib().rvv_dequantize_rows
    except AttributeError:
        raise QuantError("the rvv_inductor_core library has no rvv_dequantize_rows: it is older than this "
                         "package; rebuild it") from None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(PackedLayout), ctypes.c_void_p, ctypes.c_int64,
                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    return fn


def dequantize_rows(packed: torch.Tensor, lay: PackedLayout, rows: torch.Tensor) -> torch.Tensor:
    """Rows ``rows`` (int64, any shape) of the dequantized weight (q - z) * s, exactly, as
    FP32 ``[*rows.shape, K]``: ``dequantize(packed, lay)[rows]`` without the whole matrix.
    A row outside [0, N) is an IndexError."""
    packed = _check_packed(packed, lay)
    idx = rows.reshape(-1).to(torch.int64).contiguous()
    out = torch.empty(idx.numel(), lay.k, dtype=torch.float32)
    if idx.numel():
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= lay.n:
            raise IndexError(f"index {lo if lo < 0 else hi} is out of range for a weight of {lay.n} rows")
        _native.check(_dequantize_rows_fn()(packed.data_ptr(), ctypes.byref(lay), idx.data_ptr(), idx.numel(),
                                            out.data_ptr(), lay.k, out.numel()), "dequantize rows", QuantError)
    return out.reshape(*rows.shape, lay.k)


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, lay: PackedLayout,
           options: int = 0) -> torch.Tensor:
    """Y[M, N] = X[M, K] . W^T (+ bias), bf16 in and out, W quantized and packed
    (``rvv_linear_packed_opts``: RVV when the CPU has V, the scalar reference otherwise).
    ``options``: its bits; ``policy.X8_GEMM_OPTION`` quantizes the activations of calls with
    M >= 2 to INT8 (csrc/rvv_inductor/quant_x8.h)."""
    n, k = lay.n, lay.k
    packed = _check_packed(packed, lay)
    x, bias, y = packed_mod.linear_operands(x, bias, n, k, QuantError)
    m = x.shape[0]
    if m == 0:
        return y
    _native.check(_native.lib().rvv_linear_packed_opts(
        x.data_ptr(), x.stride(0), m, n, k, packed.data_ptr(), ctypes.byref(lay), lay.nb,
        bias.data_ptr() if bias is not None else None, RVV_DTYPE_BF16 if bias is not None else 0,
        y.data_ptr(), n, RVV_DTYPE_BF16, 0, -1, int(options)), "linear", QuantError)
    return y
