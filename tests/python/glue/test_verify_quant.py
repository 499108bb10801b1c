"""verify and quantized kernels (enable(weights="int8"|"int4")): the marker names format,
group size and kernel; verify lists them, and a GEMM routed to a quantized kernel whose .so
was not built is a problem. Pure Python (no torch, no compiler)."""
from __future__ import annotations

import pytest

from rvv_inductor import reasons, verify
from rvv_inductor.inductor import kernel_marker
from rvv_inductor.reasons import Fallback, Policy


def test_quant_marker_round_trip():
    v = kernel_marker.quant_variant("int4", 64, "rvv_zvfh/int4/gemv_1xm8")
    assert v == "quantized int4 g64 rvv_zvfh/int4/gemv_1xm8"
    src = kernel_marker.line(v, "0123456789abcdef")
    assert kernel_marker.find(src) == v
    assert kernel_marker.parse_quant(v) == {"format": "int4", "group_size": 64, "kernel": "rvv_zvfh/int4/gemv_1xm8"}
    assert kernel_marker.parse_quant("GEMV 1xNr") is None and kernel_marker.parse_quant(None) is None
    with pytest.raises(AssertionError):
        kernel_marker.quant_variant("int3", 64, "x")


def test_verify_lists_quantized_kernels_and_fails_when_not_built(cache):
    variant = kernel_marker.quant_variant("int8", 0, "rvv/int8/gemm_4xm4")
    (cache / "k.cpp").write_text(kernel_marker.line(variant, "0123456789abcdef") + "\n"
                                 'extern "C" \nvoid kernel(const bfloat16* X, const uint8_t* W, bfloat16* Y) {}\n')
    reasons.record_rvv("mm", 4, 320, 256, "int8", "rvv/int8/gemm_4xm4 g0")
    reasons.record_fallback("mm", 4, 192, 320, "int8", "bf16", Fallback(Policy.KEPT_BF16, "_frozen_param2"))
    report = verify.scan(cache)
    [k] = report["kernels"]
    assert k["names"] == ["kernel"] and not k["built"]
    assert k["quantized"] == {"format": "int8", "group_size": 0, "kernel": "rvv/int8/gemm_4xm4"}
    kept = [e for e in report["routing"] if e["route"] == "bf16"]
    assert kept[0]["code"] == "KEPT_BF16" and kept[0]["kind"] == "policy"
    problems = verify.evaluate(report, [])
    assert any("quantized kernel rvv/int8/gemm_4xm4 (int8), but no built .so" in p for p in problems), problems
    assert "INT8 g0 rvv/int8/gemm_4xm4" in verify._table(report, problems)
    # With the .so built (here: its report entry), the quantized decision is satisfied.
    report["shared_objects"].append({"path": "k.so", "source": "k.cpp", "kernel_names": ["kernel"],
                                     "rvv_micro_gemm": variant, "quantized": k["quantized"], "vector_total": 100,
                                     "counts": {"vfmacc": 10}, "disassembler": "objdump"})
    report["disassembler"] = "objdump"
    assert verify.evaluate(report, []) == []
