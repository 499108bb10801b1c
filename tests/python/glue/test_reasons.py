"""Typed routing reasons: written with their Reason, read back by verify, which fails on
defects and never on policy; the kernel marker verify looks for is the one micro_gemm
writes."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rvv_inductor import reasons, verify
from rvv_inductor.inductor import kernel_marker
from rvv_inductor.reasons import Defect, Fallback, Kind, Policy


def test_every_reason_has_a_kind_and_a_distinct_code_and_text():
    every = list(Policy) + list(Defect)
    assert len({r.name for r in every}) == len({r.value for r in every}) == len(every)
    assert {reasons.kind_of(r) for r in Policy} == {Kind.POLICY}
    assert {reasons.kind_of(r) for r in Defect} == {Kind.DEFECT}
    assert all(reasons.reason_named(r.name) is r for r in every)


def test_fallback_text():
    assert str(Fallback(Policy.GATE, "N=256 < 1024")) == "gate: N=256 < 1024"
    assert str(Fallback(Policy.NO_V)) == "cpu: no V extension"
    assert Fallback(Defect.LOWERING_FAILED, "boom").kind is Kind.DEFECT


def test_record_and_read_back(cache):
    reasons.record_rvv("mm", 1, 2048, 1024, "torch.bfloat16", "CppMicroGemmRVVBF16Gemv")
    reasons.record_fallback("mm", 4, 256, 1024, "torch.bfloat16", "aten", Fallback(Policy.GATE, "N=256 < 1024"))
    reasons.record_fallback("linear_packed", "?", 64, "?", "torch.bfloat16", "eager", Fallback(Policy.DYNAMIC))
    entries = reasons.read_log(cache / "rvv_inductor" / reasons.LOG_NAME)
    assert [(e.route, e.code) for e in entries] == [("rvv", None), ("aten", Policy.GATE), ("eager", Policy.DYNAMIC)]
    assert entries[1].reason == "gate: N=256 < 1024" and not entries[1].is_defect
    assert entries[2].M == "?"
    assert reasons.read_log(cache / "rvv_inductor" / reasons.LOG_NAME, pid=-1) == []


def test_verify_fails_on_defects_only(cache):
    reasons.record_fallback("mm", 4, 256, 1024, "torch.bfloat16", "aten", Fallback(Policy.GATE, "N=256 < 1024"))
    reasons.record_fallback("mm", 4, 1024, 1024, "float32xfloat32", "aten", Fallback(Policy.NOT_BF16))
    report = verify.scan(cache)
    assert verify.evaluate(report, []) == []
    assert {(e["code"], e["kind"]) for e in report["routing"]} == {("GATE", "policy"), ("NOT_BF16", "policy")}
    reasons.record_fallback("mm", 2, 1024, 1024, "torch.bfloat16", "aten",
                            Fallback(Defect.NOT_FROZEN, "use freezing"))
    problems = verify.evaluate(verify.scan(cache), [])
    assert len(problems) == 1 and "weight is not a frozen constant" in problems[0]
    # A renamed label changes the text, never the verdict: verify reads the code.
    line = json.loads((cache / "rvv_inductor" / reasons.LOG_NAME).read_text().splitlines()[0])
    assert line["code"] == "GATE"


def test_unknown_reason_code_is_a_clear_error(cache, py_env):
    (cache / "rvv_inductor" / reasons.LOG_NAME).write_text(json.dumps(
        {"op": "mm", "M": 1, "N": 2, "K": 3, "dtype": "x", "route": "aten", "reason": "gate: old"}) + "\n")
    with pytest.raises(reasons.UnknownReason, match="another version"):
        verify.scan(cache)
    r = subprocess.run([sys.executable, "-m", "rvv_inductor", "verify", str(cache)], capture_output=True,
                       text=True, env=py_env)
    assert r.returncode == 1 and "another version" in r.stderr


def test_verify_finds_the_marker_micro_gemm_writes(cache):
    src = kernel_marker.line("GEMV 1xNr", "0123456789abcdef") + ': C[M,N] (+)= A[M,K] * B[K,N],\n' \
        'extern "C" void cpp_fused_mm_0(const bfloat16* in_ptr0) {}\n'
    (cache / "kernel.cpp").write_text(src)
    (cache / "pointwise.cpp").write_text('extern "C" void cpp_fused_relu_1(float* p) {}\n')
    kernels = {k["source"]: k["rvv_micro_gemm"] for k in verify.scan(cache)["kernels"]}
    assert kernels == {"kernel.cpp": "GEMV 1xNr", "pointwise.cpp": None}
    assert kernel_marker.find("// rvv_inductor something else") is None


def test_verify_cli(cache, py_env):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "rvv_inductor", "verify", *args], capture_output=True,
                              text=True, env=py_env)

    assert run(str(cache / "missing")).returncode == 2
    r = run(str(cache), "--expect-rvv", "1x1024x1024")
    assert r.returncode == 1 and "expected M=1 N=1024 K=1024" in r.stdout
    reasons.record_fallback("mm", 4, 256, 1024, "torch.bfloat16", "aten", Fallback(Policy.GATE, "N=256 < 1024"))
    r = run(str(cache), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["routing"][0]["kind"] == "policy"


def test_export_keeps_only_its_own_routing_lines():
    """The Inductor cache's routing log is shared: a package carries the lines its own
    process wrote while it compiled, not those of processes compiling at the same time
    (the demo runs modes side by side on one cache)."""
    from rvv_inductor.export import own_routing

    mine = json.dumps({"op": "mm", "M": 1, "N": 1024, "K": 1024, "route": "rvv", "pid": 41})
    other = json.dumps({"op": "linear_packed", "M": 8, "N": 1024, "K": 1024, "route": "rvv", "pid": 42})
    text = "\n".join([mine, other, "garbage", "[1, 2]", json.dumps({"op": "mm"}), mine]) + "\n"
    assert own_routing(text, 41) == mine + "\n" + mine + "\n"
    assert own_routing(text, 42) == other + "\n"
    assert own_routing("", 41) == ""
