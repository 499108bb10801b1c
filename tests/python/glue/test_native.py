"""The C ABI through ctypes: every struct mirror has its C size, and the policy values
the library defines (block width, packed layout, -march) come through unchanged."""
from __future__ import annotations

import ctypes

import pytest

from rvv_inductor import _native
from rvv_inductor.cpu import CpuInfo


def test_mirrors_have_the_c_sizes(native):
    for code, mirror in _native.MIRRORS.items():
        assert native.rvv_abi_sizeof(code) == ctypes.sizeof(mirror), mirror.__name__


def test_a_wrong_mirror_is_a_clear_error(native):
    class Short(ctypes.Structure):
        _fields_ = [("magic", ctypes.c_uint32)]

    with pytest.raises(_native.NativeLibraryError, match="Short.*different versions"):
        _native.check_mirrors(native, {_native.RVV_ABI_PACKED_LAYOUT: Short})


def test_block_width_policy(native):
    assert [_native.nb_for_vlen(v) for v in (128, 256, 512, 1024, 0)] == [32, 64, 128, 256, 64]
    assert CpuInfo(True, True, 256, False, False, False, 0).block_n == 64


def test_layout(native):
    lay = _native.make_layout(65, 17, 64)
    assert (lay.magic, lay.version) == (_native.RVV_PACKED_MAGIC, _native.RVV_PACKED_VERSION)
    assert (lay.n, lay.k, lay.nb, lay.num_blocks, lay.dtype) == (65, 17, 64, 2, _native.RVV_DTYPE_BF16)
    assert lay.elements == 2 * 17 * 64 and lay.bytes == 2 * lay.elements
    with pytest.raises(_native.NativeCallError, match="layout"):
        _native.make_layout(-1, 17, 64)


@pytest.mark.parametrize("v,zvfh,bfmin,bfwma,march", [
    (False, True, True, True, "rv64gc"),
    (True, False, False, False, "rv64gcv"),
    (True, True, False, False, "rv64gcv_zvfh"),
    (True, True, True, True, "rv64gcv_zvfh_zvfbfmin_zvfbfwma"),
])
def test_march(native, v, zvfh, bfmin, bfwma, march):
    assert CpuInfo(True, v, 256 if v else 0, zvfh, bfmin, bfwma, 0).march == march


def test_gguf_types_follow_the_format_table(native):
    """The file types load_gguf accepts (gguf_checks, which reads no library) are the plain
    ones, Q8_0 and Q4_0 (repacked as INT8/INT4) and exactly the library's block formats,
    each under its GGUF name; weight_spec's hint knows the same names."""
    from rvv_inductor import gguf_checks, weight_spec

    blocks = {f["gguf_type"]: name for name, f in _native.weight_formats().items() if f["record_bytes"] > 0}
    assert {"Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"} <= set(blocks)
    assert set(gguf_checks.SUPPORTED_TYPES) == {"F32", "F16", "BF16", "Q8_0", "Q4_0"} | set(blocks)
    assert set(weight_spec.BLOCK_FORMAT_NAMES) == set(blocks.values())
