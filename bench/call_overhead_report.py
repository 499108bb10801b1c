#!/usr/bin/env python3
"""The table of bench/call_overhead.sh: per decode call (M=1) of a packed Linear, the
instructions on the user's path, the kernel's alone and the difference, per format and
shape, with the operators' C++ kernels and with their ctypes kernels.

    bench/call_overhead_report.py OUT_DIR [--formats bf16,int8,int4] [--shapes ...]

Reads OUT_DIR/raw/{FMT}-{cpp,ctypes}.{stdout,json} (bench/call_overhead.py under the
rvvcount plugin) and OUT_DIR/raw/kernel-{FMT}-{SHAPE}.json (bench/linear_bench); writes
OUT_DIR/report.md and OUT_DIR/call_overhead.json. "Outside the kernel" is the layer call
minus the kernel alone minus the benchmark loop's own cost (the ``empty`` level): what
nn.Module.__call__, forward, the op's dispatch, argument checks and the output's
allocation add to the work. Every thread's instructions are counted.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TARGET = 100_000  # issue 28: per Linear call outside the kernel's own work


def _regions(path: Path) -> dict[int, dict]:
    return {int(k): v for k, v in json.loads(path.read_text())["regions"].items()}


def _runs(raw: Path, fmt: str, kern: str) -> tuple[list[dict], dict[int, dict]]:
    stdout = raw / f"{fmt}-{kern}.stdout"
    lines = [json.loads(s) for s in stdout.read_text().splitlines() if s.startswith("{")]
    return lines, _regions(raw / f"{fmt}-{kern}.json")


def _per_call(regions: dict[int, dict], rid: int | None, calls: int) -> float | None:
    if rid is None or rid not in regions:
        return None
    return regions[rid]["insns"] / calls


def collect(out: Path, formats: list[str], shapes: list[str]) -> list[dict]:
    raw = out / "raw"
    rows = []
    for fmt in formats:
        runs = {kern: _runs(raw, fmt, kern) for kern in ("cpp", "ctypes")}
        for si, shape in enumerate(shapes):
            kern_regions = _regions(raw / f"kernel-{fmt}-{shape}.json")
            kernel = kern_regions[1]["insns"] / kern_regions[1]["calls"]
            row = {"format": fmt, "shape": shape, "kernel": kernel,
                   "kernel_vector": kern_regions[1]["vector_insns"] / kern_regions[1]["calls"]}
            for kern, (lines, regions) in runs.items():
                line = lines[si]
                if f"{line['k']}x{line['n']}{'b' if line['bias'] else ''}" != shape:
                    sys.exit(f"call_overhead_report: {fmt}-{kern} run {si} is {line['k']}x{line['n']}, not {shape}")
                if kern == "cpp" and line["kernels"] != "c++":
                    sys.exit(f"call_overhead_report: the {fmt}-cpp run used {line['kernels']} kernels")
                calls = line["calls"]
                levels = {lv: _per_call(regions, rid, calls) for lv, rid in line["regions"].items()}
                loop = levels.get("empty") or 0.0
                row[kern] = {
                    "levels": levels,
                    "outside_module": levels["module"] - kernel - loop,
                    "outside_op": levels["op"] - kernel - loop,
                    "outside_artifact": (levels["artifact"] - kernel - loop) if levels.get("artifact") else None,
                    "rel_err": line["rel_err"],
                    "threads_active": regions[line["regions"]["module"]]["threads_active"],
                }
            rows.append(row)
    return rows


def _k(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:,.0f} k"


def markdown(rows: list[dict], meta: dict) -> str:
    out = [
        "# Per-call cost of a packed Linear on the Python path (issue 28)",
        "",
        f"Counted with the rvvcount plugin, VLEN 256, {meta['threads']} threads (OMP_WAIT_POLICY=passive), "
        f"{meta['calls']} M=1 calls per level after a warm-up; every thread's instructions. Commit "
        f"{meta.get('commit', '?')}, command `bench/call_overhead.sh`.",
        "",
        "- **layer call**: `layer(x)` after `compile_linears` (nn.Module.__call__, forward, the op, the kernel);",
        "- **kernel**: the same kernel called once from C++ by bench/linear_bench (same dispatcher, shape,",
        "  threads; no bias);",
        "- **outside**: layer call - kernel - the benchmark loop's own cost; the goal is "
        f"<= {TARGET // 1000} k.",
        "- **C++ ops** (librvv_inductor_ops.so, the default) vs **ctypes ops** (`RVV_INDUCTOR_TORCH_OPS=0`,",
        "  what runs where LibTorch's headers were missing at build time);",
        "- **BF16 artifact**: the compiled M=1 artifact a BF16 decode call went through before it",
        "  called the op directly (Dynamo's guards, AOTAutograd's and Inductor's wrappers).",
        "",
        "| format | shape KxN | kernel | layer call, C++ ops | outside, C++ ops | outside, ctypes ops "
        "| outside, BF16 artifact | goal met |",
        "|---|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        c, t = r["cpp"], r["ctypes"]
        out.append(f"| {r['format']} | {r['shape']} | {_k(r['kernel'])} | {_k(c['levels']['module'])} | "
                   f"{_k(c['outside_module'])} | {_k(t['outside_module'])} | {_k(c['outside_artifact'])} | "
                   f"{'yes' if c['outside_module'] <= TARGET else 'no'} |")
    out += ["", "Where the rest goes, by library and function: `profile-<format>.txt` (the C++-ops runs, "
            "every level and shape together).", ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--formats", default="bf16,int8,int4")
    ap.add_argument("--shapes", default="1536x1536b,1536x256b,1536x8960,8960x1536")
    ap.add_argument("--commit", default=None)
    a = ap.parse_args()
    rows = collect(a.out, a.formats.split(","), a.shapes.split(","))
    first = json.loads((a.out / "raw" / f"{a.formats.split(',')[0]}-cpp.stdout").read_text().splitlines()[0])
    meta = {"threads": first["threads"], "calls": first["calls"]}
    if a.commit is None:
        import subprocess
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        meta["commit"] = r.stdout.strip() or "?"
    else:
        meta["commit"] = a.commit
    (a.out / "call_overhead.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    md = markdown(rows, meta)
    (a.out / "report.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
