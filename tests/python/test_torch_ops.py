"""The operators' C++ kernels (librvv_inductor_ops.so, csrc/torch_ops/linear_ops.cpp)
against their ctypes kernels (packed.linear / quantized.linear, the core's C ABI called
from Python): the same bits for every operand form, clear errors for bad ones, and the
ctypes fallback when the library is switched off (varlen_attention's too; its other
tests, attention_ops.cpp's, are in test_paged_attention.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from rvv_inductor import cpu, ops, packed, quantized
from rvv_inductor._native import RVV_DTYPE_F16, RVV_DTYPE_INT4, RVV_DTYPE_INT8

pytestmark = pytest.mark.skipif(not cpu.detect().is_riscv64, reason="needs riscv64 (emulated or native)")

N, K = 320, 256


def nb():
    return cpu.effective().block_n


@pytest.fixture(scope="module")
def weights():
    g = torch.Generator().manual_seed(11)
    w = (torch.randn(N, K, generator=g) * 0.05).to(torch.bfloat16)
    bias = torch.randn(N, generator=g).to(torch.bfloat16)
    out = {"bf16": (packed.pack(w, nb()), None)}
    for name, fmt, group in (("int8", RVV_DTYPE_INT8, 0), ("int4", RVV_DTYPE_INT4, 64)):
        lay = quantized.layout(fmt, group, RVV_DTYPE_F16, False, N, K, nb())
        out[name] = (quantized.quantize_pack(w, lay), lay)
    # Every GGUF block format of the kernel table, from synthetic file records: bytes below
    # 0x3C, so every FP16 field read from them is finite (exponent <= 14) and every packed
    # integer field varies.
    for name, info in quantized.block_formats().items():
        lay = quantized.layout(info["code"], 0, 0, False, N, K, nb())
        row_bytes = K // info["super_rows"] * info["record_bytes"]
        blocks = torch.randint(0, 0x3C, (N, row_bytes), generator=g, dtype=torch.uint8)
        out[name] = (quantized.pack_gguf_blocks(blocks, lay), lay)
    return out, bias


BLOCK_FORMATS = ["q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]


def test_block_format_list_is_the_tables():
    """BLOCK_FORMATS (the parametrization below) names every block format the library has."""
    assert sorted(quantized.block_formats()) == sorted(BLOCK_FORMATS)


def call_op(fmt, wp, lay, x, bias, options=0):
    if fmt == "bf16":
        return ops.linear_packed(x, wp, bias, N)
    return ops.linear_packed_q(x, wp, bias, N, lay.dtype, lay.group_size, lay.scale_dtype, lay.zero_points,
                               lay.nb, options)


def call_ctypes(fmt, wp, lay, x2, bias, options=0):
    if fmt == "bf16":
        return packed.linear(x2, wp, bias, N)
    return quantized.linear(x2, wp, bias, lay, options)


def test_cpp_kernels_are_the_ones_registered():
    if os.environ.get("RVV_EXPECT_TORCH_OPS") == "1":
        assert ops.kernels() == "c++", ops.kernels()
    else:
        assert ops.kernels() == "c++" or ops.kernels().startswith("ctypes (")


@pytest.mark.matrix
@pytest.mark.parametrize("fmt", ["bf16", "int8", "int4", *BLOCK_FORMATS])
def test_same_bits_as_the_ctypes_kernels(weights, fmt):
    table, bias = weights
    wp, lay = table[fmt]
    g = torch.Generator().manual_seed(5)
    base = torch.randn(2, 9, 2 * K, generator=g).to(torch.bfloat16)
    forms = {
        "one row, 3-D": base[:1, :1, :K].contiguous(),
        "rows, 2-D": base[0, :7, :K].contiguous(),
        "rows, 3-D": base[:, :5, :K].contiguous(),
        "row-strided 2-D": base[0, :6, :K],                 # rows 2K apart: read in place
        "strided 3-D": base[:, 1:4, K:],                     # not dense: copied first
        "transposed": torch.randn(K, 3, generator=g).to(torch.bfloat16).t(),  # unit stride along M: copied
        "no rows": base[0, :0, :K],
    }
    for options in ((0, 2) if fmt != "bf16" else (0,)):
        for b in (None, bias):
            for name, x in forms.items():
                got = call_op(fmt, wp, lay, x, b, options)
                want = call_ctypes(fmt, wp, lay, x.reshape(-1, K).contiguous(), b, options)
                assert got.shape == (*x.shape[:-1], N), name
                assert torch.equal(got.reshape(-1, N), want), (fmt, name, options, b is None)


def test_bad_operands_are_clear_errors(weights):
    table, bias = weights
    x = torch.randn(2, K).to(torch.bfloat16)
    wp, _ = table["bf16"]
    wq, lay = table["int4"]
    q = (lay.dtype, lay.group_size, lay.scale_dtype, lay.zero_points, lay.nb)
    cases = [
        (lambda: ops.linear_packed(x.float(), wp, None, N), "bfloat16"),
        (lambda: ops.linear_packed(x[:, :K - 2], wp, None, N), "bfloat16|does not match"),
        (lambda: ops.linear_packed(x, wp, None, 4096), "does not match"),
        (lambda: ops.linear_packed(x, wp, bias[:3], N), "bias"),
        (lambda: ops.linear_packed(x, wp, bias.float(), N), "bias"),
        (lambda: ops.linear_packed(x, wp.float(), None, N), "bfloat16"),
        (lambda: ops.linear_packed_q(x, wq[:100], None, N, *q), "bytes"),
        (lambda: ops.linear_packed_q(x, wq, None, N, 7, *q[1:]), "format|INT8|int8"),
        (lambda: ops.linear_packed_q(x, wq, None, N, *q[:4], 3), "bytes|nb"),
        (lambda: ops.linear_packed_q(x, wq, None, N, *q, 64), "option"),
        (lambda: ops.linear_packed_q(x[:, :K - 64], wq, None, N, *q), "bytes|K|k="),
    ]
    for fn, match in cases:
        with pytest.raises((RuntimeError, ValueError), match=match):
            fn()


def test_inside_a_compiled_graph(weights):
    table, bias = weights
    wq, lay = table["int8"]
    x = torch.randn(3, K).to(torch.bfloat16)

    def f(x, wq, b):
        return ops.linear_packed_q(torch.relu(x), wq, b, N, lay.dtype, lay.group_size, lay.scale_dtype,
                                   lay.zero_points, lay.nb, 0) * 2

    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True, dynamic=False)(x, wq, bias)
    want = quantized.linear(torch.relu(x), wq, bias, lay) * 2
    assert torch.equal(got, want)


def test_ctypes_fallback_when_switched_off(weights, tmp_path):
    """RVV_INDUCTOR_TORCH_OPS=0: the Python kernels are registered instead, same results,
    for INT4 and for a GGUF block format (Q4_K: the ctypes kernels once refused it inside
    the first forward), one row and a batch with INT8 activations; and for varlen_attention
    (attention_ops.cpp against ops._varlen_attention_ctypes) on a packed GQA batch."""
    table, bias = weights
    g = torch.Generator().manual_seed(3)
    cu_q, cu_k = torch.tensor([0, 1, 6, 7, 10], dtype=torch.int32), torch.tensor([0, 40, 45, 46, 66])
    qkv = tuple(torch.randn(rows, heads, 64, generator=g).to(torch.bfloat16)
                for rows, heads in ((12, 8), (66, 2), (66, 2)))  # q [Tq, H, D] (2 padding rows), k, v
    varlen = [{"args": (*qkv, cu_q, cu_k, 0.125, w), "want": ops.varlen_attention(*qkv, cu_q, cu_k, 0.125, w)}
              for w in (0, 6)]
    x1 = torch.randn(1, 1, K).to(torch.bfloat16)
    x5 = torch.randn(5, K).to(torch.bfloat16)
    cases = []
    for fmt in ("int4", "q4_k"):
        wq, lay = table[fmt]
        q = (lay.dtype, lay.group_size, lay.scale_dtype, lay.zero_points, lay.nb)
        for x, options in ((x1, 0), (x5, 2)):
            cases.append({"fmt": fmt, "x": x, "wq": wq, "q": (*q, options),
                          "want": ops.linear_packed_q(x, wq, bias, N, *q, options)})
    torch.save({"bias": bias, "cases": cases, "varlen": varlen}, tmp_path / "in.pt")
    code = (
        "import sys, torch; from rvv_inductor import ops\n"
        "d = torch.load(sys.argv[1])\n"
        "print(ops.kernels())\n"
        "for c in d['cases']:\n"
        f"    y = ops.linear_packed_q(c['x'], c['wq'], d['bias'], {N}, *c['q'])\n"
        "    print(c['fmt'], torch.equal(y, c['want']))\n"
        "for c in d['varlen']:\n"
        "    print('varlen', torch.equal(ops.varlen_attention(*c['args']), c['want']))\n"
        "print('attention_ops.cpp' in torch._C._dispatch_dump('rvv_inductor::varlen_attention'))\n")
    env = dict(os.environ, RVV_INDUCTOR_TORCH_OPS="0")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "in.pt")], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.split("\n")
    assert lines[0] == "ctypes (RVV_INDUCTOR_TORCH_OPS=0)", r.stdout
    assert lines[1:5] == ["int4 True", "int4 True", "q4_k True", "q4_k True"], r.stdout
    assert lines[5:8] == ["varlen True", "varlen True", "False"], r.stdout  # the ctypes kernel, same bits
