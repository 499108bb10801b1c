#!/usr/bin/env python3
"""The table of bench/aoti_count.sh: per decode token of an AOTInductor package run by
rvv-generate, the instructions, and where they go (library and function, from the
plugin's profile=), for each counted package in OUT/raw/*.json. Writes OUT/report.md."""
from __future__ import annotations

import glob
import json
import os
import sys


def per_token(run: dict) -> dict:
    reg = run["plugin"]["regions"]["1"]
    calls = reg["calls"]
    prof = run["profile"]
    return {"calls": calls, "insns": reg["insns"] / calls, "vfma": reg.get("vfma", 0) / calls,
            "dram": reg.get("dram_read_bytes", 0) / calls,
            "libs": [(x["library"], x["insns"] / calls) for x in prof["libraries"]],
            "funcs": [(x["function"], x["library"], x["insns"] / calls) for x in prof["functions"]]}


def main(out: str) -> int:
    runs = []
    for p in sorted(glob.glob(os.path.join(out, "raw", "*.json"))):
        r = json.load(open(p))
        if "plugin" in r and "profile" in r:
            runs.append((os.path.basename(p)[:-5], r, per_token(r)))
    if not runs:
        print(f"aoti_report: no counted runs in {out}/raw", file=sys.stderr)
        return 1
    lines = ["# AOTInductor package, per decode token (rvv-generate, rvvcount plugin)", "",
             "Regenerate: `bench/aoti_count.sh` (options in its header); this file: `bench/aoti_report.py`.",
             "Qwen2.5-1.5B dimensions with the vocabulary cut (see each run), QEMU 10, VLEN 256,",
             "`--region 1` around each decode step; instructions per step (all threads).", "",
             "| run | rev | attention | layers | cache | weights | threads | steps | M insns / token | vector FMAs / token | DRAM read MB / token |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for name, r, t in runs:
        att = r.get("attention") or ("sdpa" if name.endswith("-sdpa") else "rvv")
        lines.append(f"| {name} | {r['rev']} | {att} | {r['layers']} | {r['cache']} | {r['weights']} | {r['threads']} | "
                     f"{t['calls']} | {t['insns'] / 1e6:.2f} | {t['vfma'] / 1e6:.3f} | {t['dram'] / 1e6:.1f} |")
    for name, r, t in runs:
        lines += ["", f"## {name}: by library (M instructions per token)", "", "| library | M insns | share |",
                  "|---|---:|---:|"]
        for lib, n in t["libs"]:
            if n >= 1000:
                lines.append(f"| {lib} | {n / 1e6:.3f} | {100 * n / t['insns']:.1f}% |")
        lines += ["", f"### {name}: top functions", "", "| function | library | M insns | share |",
                  "|---|---|---:|---:|"]
        for fn, lib, n in t["funcs"][:30]:
            fn = fn.replace("|", "\\|")
            if len(fn) > 100:
                fn = fn[:97] + "..."
            lines.append(f"| `{fn}` | {lib} | {n / 1e6:.3f} | {100 * n / t['insns']:.1f}% |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/aoti"))
