"""``python3 -m rvv_inductor verify CACHE_DIR``: what did Inductor really build?

For an Inductor cache directory (TORCHINDUCTOR_CACHE_DIR) it lists every generated C++
kernel, which Linear shapes went to the RVV template and which to ATen
(``extern_kernels.mm``/``addmm``), the built ``.so`` files, and the vector instructions in
each ``.so`` counted by disassembling it (a string in the source proves nothing).

Quantized kernels (``enable(weights="int8"|"int4")``) are listed with their format, group
size and kernel-table name (``quantized``), and their vector instructions are counted
like the BF16 ones; a GEMM routed to one whose ``.so`` was not built is a problem.

Exit status: 0 when no routing decision is a defect (``reasons.Kind.DEFECT``: a shape
that should have reached RVV went elsewhere) and every RVV template kernel's ``.so``
contains vector FMAs; 1 otherwise (or when ``--expect-rvv`` shapes are missing, or the
routing log was written by another version); 2 on usage errors.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import _native, reasons
from .inductor import kernel_marker

KERNEL_NAME = re.compile(r'extern "C"\s+(?:__attribute__\(\(.*?\)\)\s+)?void\s+(\w+)\s*\(')
EXTERN_CALL = re.compile(r"extern_kernels\.(mm|addmm|bmm|baddbmm)\(")
# Our operators called from generated wrappers (linear_packed_q, varlen_attention, ...):
# they run the operator kernels ``_native.operator_kernels()`` names.
OP_CALL = re.compile(r"torch\.ops\.rvv_inductor\.(\w+)\b")
# Families worth showing; "vector_total" counts every V-extension mnemonic.
FAMILIES = ("vsetvli", "vsetivli", "vle16", "vle32", "vse16", "vse32", "vzext", "vsll",
            "vfmacc", "vfwmacc", "vfwmaccbf16", "vfwcvtbf16", "vfncvtbf16", "vfredusum",
            "vfredosum", "vfmul", "vfadd", "vfmadd", "vwmul", "vwmacc")


@dataclasses.dataclass
class SoReport:
    path: str
    source: str | None
    kernel_names: list[str]
    rvv_micro_gemm: str | None
    quantized: dict | None  # {"format", "group_size", "kernel"} of a quantized kernel
    vector_total: int
    counts: dict[str, int]
    disassembler: str | None


def find_disassembler() -> list[str] | None:
    """A disassembler that understands RVV: the riscv64 host's objdump, else LLVM's."""
    if platform.machine() == "riscv64" and shutil.which("objdump"):
        return ["objdump", "-d", "--no-show-raw-insn"]
    for name in ("llvm-objdump-19", "llvm-objdump"):
        if shutil.which(name):
            return [name, "-d", "--no-show-raw-insn", "--mattr=+v,+zvfh,+zvfbfmin,+zvfbfwma"]
    return None


_INSN = re.compile(r"^\s*[0-9a-f]+:\s+([a-z][a-z0-9.]*)", re.M)


def count_vector_instructions(so: Path, dis: list[str]) -> tuple[int, dict[str, int]]:
    out = subprocess.run([*dis, str(so)], capture_output=True, text=True, check=True).stdout
    counts: collections.Counter = collections.Counter()
    total = 0
    for mnemonic in _INSN.findall(out):
        if not mnemonic.startswith("v"):
            continue
        total += 1
        base = mnemonic.split(".")[0]
        for fam in FAMILIES:
            if base == fam or (fam in ("vle16", "vle32", "vse16", "vse32") and base.startswith(fam)):
                counts[fam] += 1
    return total, dict(counts)


def _sources(cache_dir: Path, pattern: str):
    """Inductor's generated files, without its precompiled headers."""
    return [p for p in sorted(cache_dir.rglob(pattern)) if "precompiled_headers" not in p.parts]


def _shared_object(cache_dir: Path, so: Path, dis: list[str] | None) -> SoReport:
    cpp = so.with_suffix(".cpp")
    src = cpp.read_text(errors="replace") if cpp.is_file() else ""
    total, counts = count_vector_instructions(so, dis) if dis else (-1, {})
    variant = kernel_marker.find(src)
    return SoReport(str(so.relative_to(cache_dir)), str(cpp.relative_to(cache_dir)) if src else None,
                    KERNEL_NAME.findall(src), variant, kernel_marker.parse_quant(variant), total, counts,
                    dis[0] if dis else None)


def _routing(cache_dir: Path) -> list[dict]:
    """Each distinct decision of the routing log once, with its reason's kind."""
    out, seen = [], set()
    for e in reasons.read_log(cache_dir / "rvv_inductor" / reasons.LOG_NAME):
        row = {"op": e.op, "M": e.M, "N": e.N, "K": e.K, "dtype": e.dtype, "route": e.route, "reason": e.reason,
               "code": e.code.name if e.code else None,
               "kind": reasons.kind_of(e.code).value if e.code else None}
        key = tuple(row.values())
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def scan(cache_dir: Path) -> dict:
    """What Inductor built in ``cache_dir``: kernels, shared objects (disassembled), ATen
    extern calls in the wrappers, and the routing decisions rvv_inductor recorded."""
    dis = find_disassembler()
    sos = [_shared_object(cache_dir, so, dis) for so in _sources(cache_dir, "*.so")]
    kernels = []
    for cpp in _sources(cache_dir, "*.cpp"):
        src = cpp.read_text(errors="replace")
        names = KERNEL_NAME.findall(src)
        if names:
            variant = kernel_marker.find(src)
            kernels.append({"source": str(cpp.relative_to(cache_dir)), "names": names, "rvv_micro_gemm": variant,
                            "quantized": kernel_marker.parse_quant(variant),
                            "built": cpp.with_suffix(".so").is_file()})
    extern_calls: collections.Counter = collections.Counter()
    op_calls: collections.Counter = collections.Counter()
    for py in _sources(cache_dir, "*.py"):
        text = py.read_text(errors="replace")
        for op in EXTERN_CALL.findall(text):
            extern_calls[op] += 1
        for op in OP_CALL.findall(text):
            op_calls[op] += 1
    return {"cache_dir": str(cache_dir), "kernels": kernels, "shared_objects": [dataclasses.asdict(s) for s in sos],
            "extern_calls": dict(extern_calls), "operator_calls": dict(op_calls),
            "operator_kernels": _native.operator_kernels(),
            "routing": _routing(cache_dir), "disassembler": dis[0] if dis else None}


def evaluate(report: dict, expect: list[tuple[int, int, int]]) -> list[str]:
    """The problems in a ``scan`` report (empty when all is well): routing defects, RVV
    kernels without vector FMAs, and ``expect``ed (M, N, K) shapes that are not on RVV."""
    problems = []
    rvv_sos = [s for s in report["shared_objects"] if s["rvv_micro_gemm"]]
    for e in report["routing"]:
        if e["kind"] == reasons.Kind.DEFECT.value:
            problems.append(f"{e['op']} M={e['M']} N={e['N']} K={e['K']} should have run on RVV but went to "
                            f"{e['route']}: {e['reason']}")
    for s in rvv_sos:
        # Multiply-adds: fp32 (vfmacc, or vfmadd when the compiler reuses the other operand),
        # widening fp16/bf16, and the INT8-activation kernels' integer vwmacc.
        fma = sum(s["counts"].get(f, 0) for f in ("vfmacc", "vfmadd", "vfwmacc", "vfwmaccbf16", "vwmacc"))
        if s["vector_total"] >= 0 and fma == 0:
            problems.append(f"{s['path']}: RVV template kernel without vector FMA instructions")
    if any(e["route"] == "rvv" for e in report["routing"]) and not rvv_sos:
        problems.append("routing chose the RVV template, but no built .so contains it")
    # A GEMM routed to a quantized kernel (dtype: its weight format) needs a built .so with that
    # kernel (format and kernel name from the marker).
    built_quant = {(s["quantized"]["format"], s["quantized"]["kernel"]) for s in rvv_sos if s.get("quantized")}
    quant_formats = set(_native.weight_formats()) - {"bf16"}  # BF16 templates record "torch.bfloat16"
    for e in report["routing"]:
        if e["route"] == "rvv" and e["dtype"] in quant_formats:
            kernel = str(e["reason"]).split(" ")[0]
            if (e["dtype"], kernel) not in built_quant:
                problems.append(f"{e['op']} M={e['M']} N={e['N']} K={e['K']} was routed to the quantized kernel "
                                f"{kernel} ({e['dtype']}), but no built .so contains it")
    if report["disassembler"] is None and rvv_sos:
        problems.append("no RVV-capable disassembler (objdump on riscv64, llvm-objdump elsewhere)")
    for m, n, k in expect:
        if not any(e["route"] == "rvv" and (e["M"], e["N"], e["K"]) == (m, n, k) for e in report["routing"]):
            problems.append(f"expected M={m} N={n} K={k} on RVV, not found")
    return problems


def _table(report: dict, problems: list[str]) -> str:
    lines = [f"Inductor cache: {report['cache_dir']}", "", "Linear routing (from rvv_inductor's log):"]
    if not report["routing"]:
        lines.append("  (no routing decisions recorded: was rvv_inductor.enable() called?)")
    for e in report["routing"]:
        lines.append(f"  {e['op']:6s} M={e['M']!s:>5} N={e['N']!s:>7} K={e['K']!s:>6} {e['dtype']:15s} "
                     f"-> {e['route'].upper():5s} ({e['reason']}){' [' + e['kind'] + ']' if e['kind'] else ''}")
    ext = ", ".join(f"{k} x{v}" for k, v in sorted(report["extern_calls"].items())) or "none"
    ops = ", ".join(f"{k} x{v}" for k, v in sorted(report.get("operator_calls", {}).items())) or "none"
    lines += ["", f"ATen extern calls in generated wrappers: {ext}",
              f"rvv_inductor operator calls in generated wrappers: {ops}",
              f"  their kernels in this environment: {report.get('operator_kernels') or 'the C++ core is not built'}",
              "", "Generated kernels:"]
    for k in report["kernels"]:
        tag = f"RVV {k['rvv_micro_gemm']}" if k["rvv_micro_gemm"] else "pointwise/other"
        if k.get("quantized"):
            q = k["quantized"]
            tag = f"RVV {q['format'].upper()} g{q['group_size']} {q['kernel']}"
        lines.append(f"  {', '.join(k['names'])[:60]:60s} {tag:22s} {'built' if k['built'] else 'not built'}  {k['source']}")
    lines += ["", f"Shared objects (disassembled with {report['disassembler']}):"]
    for s in report["shared_objects"]:
        fam = " ".join(f"{k}={v}" for k, v in sorted(s["counts"].items()))
        tag = f"RVV {s['rvv_micro_gemm']}" if s["rvv_micro_gemm"] else ""
        lines.append(f"  {s['path']}: {s['vector_total']} vector insns {tag}")
        if fam:
            lines.append(f"      {fam}")
    lines.append("")
    lines += [f"FAIL: {p}" for p in problems] or ["OK: every shape that should run on RVV runs an RVV kernel with vector FMAs"]
    return "\n".join(lines)


def _shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in re.split(r"[x,]", text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MxNxK, got {text!r}") from None
    return m, n, k


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m rvv_inductor verify", description=__doc__.split("\n\n")[0])
    ap.add_argument("cache_dir", type=Path, help="an Inductor cache directory (TORCHINDUCTOR_CACHE_DIR)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--expect-rvv", type=_shape, action="append", default=[], metavar="MxNxK",
                    help="fail unless this shape went to the RVV template (repeatable)")
    args = ap.parse_args(argv)
    if not args.cache_dir.is_dir():
        print(f"verify: {args.cache_dir} is not a directory", file=sys.stderr)
        return 2
    try:
        report = scan(args.cache_dir)
    except reasons.UnknownReason as e:
        print(f"verify: {e}", file=sys.stderr)
        return 1
    problems = evaluate(report, args.expect_rvv)
    if args.json:
        print(json.dumps({**report, "problems": problems, "ok": not problems}, indent=2))
    else:
        print(_table(report, problems))
    return 1 if problems else 0
