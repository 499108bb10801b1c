"""The C++ core (librvv_inductor_core.so) through ctypes: loading it, the mirrors of its C
structs, and the policy values it defines (block width, packed layout, ``-march``).

Search order: RVV_INDUCTOR_LIB (a file path), the installed package directory, then the
repository's own build trees, so tests can run from a checkout without installing.

Every ctypes mirror is checked against ``rvv_abi_sizeof`` when the library is loaded: a
library built from other headers is a clear error, not a corrupted struct. No torch here:
tensors are ``packed.py``'s business.
"""
from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

_LIBNAME = "librvv_inductor_core.so"
# The operators' C++ kernels (csrc/torch_ops), beside the core library when built.
OPS_LIBNAME = "librvv_inductor_ops.so"
_PKG = Path(__file__).resolve().parent
_REPO = _PKG.parent.parent

# abi_types.h
RVV_DTYPE_BF16, RVV_DTYPE_F32, RVV_DTYPE_F16, RVV_DTYPE_INT8, RVV_DTYPE_INT4 = 1, 2, 3, 4, 5
RVV_PACKED_MAGIC, RVV_PACKED_VERSION = 0x4B505652, 2
RVV_ABI_PACKED_LAYOUT, RVV_ABI_CPU_FEATURES, RVV_ABI_VARLEN_ATTENTION, RVV_ABI_WEIGHT_FORMAT = 1, 2, 3, 4
RVV_WEIGHT_FORMAT_VERSION = 2
RVV_PATH_SCALAR, RVV_PATH_RVV, RVV_PATH_RVV_ZVFBF, RVV_PATH_RVV_ZVFH = 0, 1, 2, 3
RVV_CPU_FEATURES_VERSION = 2
# Weight format codes are probed from 1 to this bound (rvv_weight_format_info): the
# library's weight_formats.inl is the list, this package spells none of it.
_MAX_FORMAT_CODE = 64


class NativeLibraryError(RuntimeError):
    pass


class NativeCallError(ValueError):
    """A C ABI call returned an error status (the message is the library's)."""


class CpuFeatures(ctypes.Structure):
    """rvv_cpu_features (cpu_features.h)."""

    _fields_ = [
        ("is_riscv64", ctypes.c_int),
        ("has_v", ctypes.c_int),
        ("vlenb", ctypes.c_int),
        ("has_zvfh", ctypes.c_int),
        ("has_zvfbfmin", ctypes.c_int),
        ("has_zvfbfwma", ctypes.c_int),
        ("sources", ctypes.c_int),
        ("version", ctypes.c_int),
    ]


class PackedLayout(ctypes.Structure):
    """rvv_packed_layout (abi_types.h): a weight W[N, K] packed as [ceil(N/nb)][K][nb]."""

    _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint32), ("n", ctypes.c_int64),
                ("k", ctypes.c_int64), ("nb", ctypes.c_int64), ("num_blocks", ctypes.c_int64),
                ("elements", ctypes.c_int64), ("dtype", ctypes.c_int32), ("vlenb", ctypes.c_int32),
                ("lmul", ctypes.c_int32), ("reserved", ctypes.c_int32), ("bytes", ctypes.c_int64),
                ("group_size", ctypes.c_int32), ("scale_dtype", ctypes.c_int32),
                ("zero_points", ctypes.c_int32), ("reserved2", ctypes.c_int32)]


class VarlenAttention(ctypes.Structure):
    """rvv_varlen_attention (abi_types.h): attention over a packed variable-length batch."""

    _fields_ = [("q", ctypes.c_void_p), ("q_st", ctypes.c_int64), ("q_sh", ctypes.c_int64),
                ("k", ctypes.c_void_p), ("k_sl", ctypes.c_int64), ("k_sh", ctypes.c_int64),
                ("v", ctypes.c_void_p), ("v_sl", ctypes.c_int64), ("v_sh", ctypes.c_int64),
                ("cu_q", ctypes.c_void_p), ("cu_k", ctypes.c_void_p), ("out", ctypes.c_void_p),
                ("S", ctypes.c_int64), ("Tq", ctypes.c_int64), ("Lk", ctypes.c_int64), ("H", ctypes.c_int64),
                ("Hkv", ctypes.c_int64), ("D", ctypes.c_int64), ("window", ctypes.c_int64),
                ("scale", ctypes.c_float), ("reserved", ctypes.c_int32)]


class WeightFormat(ctypes.Structure):
    """rvv_weight_format (abi_types.h): one line of weight_formats.inl."""

    _fields_ = [("version", ctypes.c_uint32), ("code", ctypes.c_int32), ("name", ctypes.c_char * 16),
                ("gguf_type", ctypes.c_char * 16), ("bits", ctypes.c_int32), ("block_rows", ctypes.c_int32),
                ("super_rows", ctypes.c_int32), ("scales", ctypes.c_int32), ("offset", ctypes.c_int32),
                ("implicit_zero", ctypes.c_int32), ("record_bytes", ctypes.c_int32),
                ("file_block_bytes", ctypes.c_int32), ("configurable", ctypes.c_int32), ("lookup", ctypes.c_int32)]


# rvv_abi_sizeof code -> the mirror whose size must match.
MIRRORS = {RVV_ABI_PACKED_LAYOUT: PackedLayout, RVV_ABI_CPU_FEATURES: CpuFeatures,
           RVV_ABI_VARLEN_ATTENTION: VarlenAttention, RVV_ABI_WEIGHT_FORMAT: WeightFormat}


def _candidates() -> list[Path]:
    env = os.environ.get("RVV_INDUCTOR_LIB")
    if env:
        return [Path(env)]
    out = [_PKG / _LIBNAME]
    for build in ("build/rv64", "build/native", "build/host"):
        out.append(_REPO / build / "csrc" / _LIBNAME)
    return out


@functools.cache
def lib() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        if path.is_file():
            try:
                handle = ctypes.CDLL(str(path))
            except OSError as e:  # wrong architecture, missing dependency
                tried.append(f"{path}: {e}")
                continue
            _declare(handle, path)
            check_mirrors(handle, MIRRORS, path)
            return handle
        tried.append(f"{path}: not found")
    raise NativeLibraryError(
        "rvv_inductor's C++ core is not available. Install the package with "
        "`pip install --no-build-isolation .`, or build it with CMake and set "
        "RVV_INDUCTOR_LIB.\n  tried:\n    " + "\n    ".join(tried)
    )


def ops_library() -> tuple[Path | None, str]:
    """librvv_inductor_ops.so beside the core library and "" when it is there to load, else
    (None, why not); torch-free, so ``info`` and ``ops`` decide the same way."""
    if os.environ.get("RVV_INDUCTOR_TORCH_OPS", "1") == "0":
        return None, "RVV_INDUCTOR_TORCH_OPS=0"
    try:
        path = Path(lib()._name).with_name(OPS_LIBNAME)
    except NativeLibraryError as e:
        return None, str(e).splitlines()[0]
    if not path.is_file():
        return None, f"{path} was not built (no LibTorch headers at build time)"
    return path, ""


def operator_kernels() -> str | None:
    """Which kernels the rvv_inductor:: operators register in this environment, torch-free:
    "c++ (PATH)" (librvv_inductor_ops.so beside the core) or "ctypes (why)"; None without
    the core library. ``ops.kernels()`` says what a running process loaded."""
    try:
        lib()
    except NativeLibraryError:
        return None
    path, why = ops_library()
    return f"c++ ({path})" if path else f"ctypes ({why})"


def check_mirrors(h: ctypes.CDLL, mirrors: dict[int, type], path: Path | str = "the library") -> None:
    """Raise NativeLibraryError unless each ctypes mirror has its C struct's size."""
    for code, mirror in mirrors.items():
        size = h.rvv_abi_sizeof(code)
        if size != ctypes.sizeof(mirror):
            raise NativeLibraryError(
                f"{path}: the C struct behind {mirror.__name__} is {size} bytes, the Python mirror "
                f"{ctypes.sizeof(mirror)}: the library and this package come from different versions; "
                "rebuild the library or reinstall the package")


_P, _I64 = ctypes.c_void_p, ctypes.c_int64


def _declare(h: ctypes.CDLL, path: Path) -> None:
    """Argument and return types of every function this package calls."""
    feats, layout = ctypes.POINTER(CpuFeatures), ctypes.POINTER(PackedLayout)
    signatures = {
        "rvv_last_error": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
        "rvv_abi_sizeof": (ctypes.c_size_t, [ctypes.c_int]),
        "rvv_detect_cpu": (ctypes.c_int, [feats]),
        "rvv_resolve_cpu": (ctypes.c_int, [ctypes.c_char_p, feats, ctypes.c_char_p, ctypes.c_size_t]),
        "rvv_march_string": (ctypes.c_int, [feats, ctypes.c_char_p, ctypes.c_size_t]),
        "rvv_nb_for_vlenb": (_I64, [ctypes.c_int]),
        "rvv_make_layout": (ctypes.c_int, [_I64, _I64, _I64, layout]),
        "rvv_pack_bf16": (ctypes.c_int, [_P, _I64, _I64, _I64, _I64, _P, _I64, layout]),
        "rvv_unpack_bf16": (ctypes.c_int, [_P, layout, _P, _I64, _I64]),
        "rvv_linear_bf16_packed": (ctypes.c_int, [_P, _I64, _I64, _I64, _I64, _P, layout, _I64, _P, ctypes.c_int,
                                                  _P, _I64, ctypes.c_int, _I64, _I64]),
        "rvv_count_region": (ctypes.c_int, [ctypes.c_int, ctypes.c_int]),
        # quantized weights (capi.h)
        "rvv_quant_layout": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, _I64, _I64, _I64,
                                            layout]),
        "rvv_quantize_pack": (ctypes.c_int, [_P, _I64, layout, _P, _I64]),
        "rvv_pack_quantized": (ctypes.c_int, [_P, _I64, _P, _P, layout, _P, _I64]),
        "rvv_unpack_quantized": (ctypes.c_int, [_P, layout, _P, _P, _P]),
        "rvv_dequantize": (ctypes.c_int, [_P, layout, _P, _I64, _I64]),
        "rvv_weight_format_info": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(WeightFormat)]),
        "rvv_block_layout": (ctypes.c_int, [ctypes.c_int, _I64, _I64, _I64, layout]),
        "rvv_pack_gguf_blocks": (ctypes.c_int, [_P, _I64, layout, _P, _I64]),
        "rvv_attention_varlen_bf16": (ctypes.c_int, [ctypes.POINTER(VarlenAttention), ctypes.c_int]),
        "rvv_linear_packed_opts": (ctypes.c_int, [_P, _I64, _I64, _I64, _I64, _P, layout, _I64, _P, ctypes.c_int,
                                                  _P, _I64, ctypes.c_int, _I64, _I64, ctypes.c_int]),
        "rvv_selected_kernel": (ctypes.c_int, [_I64, layout, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                               ctypes.c_char_p, ctypes.c_size_t]),
    }
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(h, name)
        except AttributeError:
            raise NativeLibraryError(f"{path} has no {name}: it is older than this package; rebuild it") from None
        fn.restype, fn.argtypes = restype, argtypes


def check(rc: int, what: str, error: type[NativeCallError] = NativeCallError) -> None:
    """Raise ``error`` with the library's message unless ``rc`` is RVV_OK."""
    if rc != 0:
        buf = ctypes.create_string_buffer(512)
        lib().rvv_last_error(buf, len(buf))
        raise error(f"{what}: {buf.value.decode() or f'status {rc}'}")


def nb_for_vlen(vlen_bits: int) -> int:
    """The block width nb the kernels prefer at this VLEN (0: no vector unit)."""
    return int(lib().rvv_nb_for_vlenb(vlen_bits // 8))


def make_layout(n: int, k: int, nb: int) -> PackedLayout:
    """The descriptor of a BF16 W[n, k] packed with block width nb: block count, elements
    and bytes of the packed buffer. The kernels validate it against each call."""
    lay = PackedLayout()
    check(lib().rvv_make_layout(n, k, nb, ctypes.byref(lay)), "layout")
    return lay


def quant_layout(fmt: int, group_size: int, scale_dtype: int, zero_points: bool, n: int, k: int,
                 nb: int) -> PackedLayout:
    """The descriptor of W[n, k] quantized to ``fmt`` (RVV_DTYPE_INT8/INT4) with K groups of
    ``group_size`` rows (0: one per output channel, INT8 only) and 16-bit scales of
    ``scale_dtype`` (RVV_DTYPE_F16/BF16); NativeCallError with the library's message if the
    combination is not supported."""
    lay = PackedLayout()
    check(lib().rvv_quant_layout(fmt, group_size, scale_dtype, int(zero_points), n, k, nb, ctypes.byref(lay)),
          "quant layout")
    return lay


def block_layout(fmt: int, n: int, k: int, nb: int) -> PackedLayout:
    """The descriptor of W[n, k] in a GGUF block format (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, the K-quants Q2_K to Q6_K: the
    format's super-block fixes the rest); NativeCallError when k is not whole super-blocks."""
    lay = PackedLayout()
    check(lib().rvv_block_layout(fmt, n, k, nb, ctypes.byref(lay)), "block layout")
    return lay


def selected_kernel(m: int, lay: PackedLayout, options: int, path: int, vlenb: int) -> str:
    """The kernel-table name the dispatcher picks for an ``m``-row call on ``lay`` with
    ``options`` (RVV_LINEAR_*) on a CPU of kernel path ``path`` (RVV_PATH_*) at ``vlenb``."""
    buf = ctypes.create_string_buffer(128)
    check(lib().rvv_selected_kernel(m, ctypes.byref(lay), options, path, vlenb, buf, len(buf)), "selected kernel")
    return buf.value.decode()


@functools.lru_cache(maxsize=None)
def weight_formats() -> dict[str, dict]:
    """Every weight format of the library (weight_formats.inl) by name: its code and traits
    (cached: the library's table is fixed; callers must not modify the dict)."""
    out = {}
    for code in range(1, _MAX_FORMAT_CODE):
        f = WeightFormat()
        if lib().rvv_weight_format_info(code, ctypes.byref(f)) != 0:
            continue
        if f.version != RVV_WEIGHT_FORMAT_VERSION:
            raise NativeLibraryError(f"weight format {code}: traits version {f.version}, this package reads "
                                     f"{RVV_WEIGHT_FORMAT_VERSION}; rebuild the library or reinstall the package")
        d = {name: getattr(f, name) for name, _ in WeightFormat._fields_ if name != "version"}
        d["name"], d["gguf_type"] = f.name.decode(), f.gguf_type.decode()
        out[d["name"]] = d
    return out


def march_string(features: CpuFeatures) -> str:
    """The ``-march`` value (without "-march=") for code generated for these features."""
    buf = ctypes.create_string_buffer(128)
    if lib().rvv_march_string(ctypes.byref(features), buf, len(buf)) < 0:
        raise NativeCallError("rvv_march_string: buffer too small")
    return buf.value.decode()
