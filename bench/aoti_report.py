#!/usr/bin/env python3
"""The table of bench/aoti_count.sh: per decode token of an AOTInductor package run by
rvv-generate, the instructions (all threads, and the busiest thread's), and where they go
(library and function, from the plugin's profile=, decode and prefill together), and, for
runs with a prefill region (3), the instructions per prompt token, for each counted
package in OUT/raw/*.json. Writes OUT/report.md."""
from __future__ import annotations

import glob
import json
import os
import sys


PREFILL_REGION = "3"  # aoti_count.sh: rvv-generate --prefill-region 3


def per_token(run: dict) -> dict:
    regions = run["plugin"]["regions"]
    reg = regions["1"]
    calls = reg["calls"]
    prof = run["profile"]
    pre = regions.get(PREFILL_REGION)
    prompt = run.get("prompt", 4)
    # The busiest thread: counted per thread since the plugin's API 4 (one thread: all of it).
    busiest = (reg.get("max_thread") or {}).get("insns", reg["insns"])
    # The profile sums every region: with a prefill region it is the whole run's (decode
    # steps + prefill), shown as totals and shares of that run, not per decode token.
    scale = calls if pre is None else 1
    total = reg["insns"] / scale + (pre["insns"] if pre else 0)
    return {"calls": calls, "insns": reg["insns"] / calls, "vfma": reg.get("vfma", 0) / calls,
            "dram": reg.get("dram_read_bytes", 0) / calls, "busiest": busiest / calls,
            "threads_active": reg.get("threads_active", 1), "prompt": prompt if pre else None,
            "pre_insns": pre["insns"] / prompt if pre else None,
            "pre_busiest": (pre.get("max_thread") or {}).get("insns", pre["insns"]) / prompt if pre else None,
            "pre_dram": pre.get("dram_read_bytes", 0) / prompt if pre else None,
            "prof_scope": (f"per decode token" if pre is None else
                           f"the whole counted run: {calls} decode steps + the {prompt}-token prefill"),
            "prof_total": total,
            "libs": [(x["library"], x["insns"] / scale) for x in prof["libraries"]],
            "funcs": [(x["function"], x["library"], x["insns"] / scale) for x in prof["functions"]]}


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
             "`--region 1` around each decode step: instructions per step (all threads, and the busiest",
             "thread's); `--prefill-region 3` around the prefill (runs counted since it was added):",
             "instructions per prompt token. Emulated wall times are not K1 times.", "",
             "| run | rev | attention | layers | cache | weights | threads | steps | M insns / token | busiest thread M insns / token | vector FMAs / token | DRAM read MB / token | prompt | prefill M insns / prompt token (busiest thread) | prefill DRAM read MB / prompt token |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r, t in runs:
        att = r.get("attention") or ("sdpa" if name.endswith("-sdpa") else "rvv")
        pre = (f"{t['prompt']} | {t['pre_insns'] / 1e6:.2f} ({t['pre_busiest'] / 1e6:.2f}) | {t['pre_dram'] / 1e6:.1f}"
               if t["prompt"] else "- | - | -")
        lines.append(f"| {name} | {r['rev']} | {att} | {r['layers']} | {r['cache']} | {r['weights']} | {r['threads']} | "
                     f"{t['calls']} | {t['insns'] / 1e6:.2f} | {t['busiest'] / 1e6:.2f} | {t['vfma'] / 1e6:.3f} | "
                     f"{t['dram'] / 1e6:.1f} | {pre} |")
    for name, r, t in runs:
        lines += ["", f"## {name}: by library (M instructions, {t['prof_scope']})", "",
                  "| library | M insns | share |",
                  "|---|---:|---:|"]
        for lib, n in t["libs"]:
            if n >= 1000:
                lines.append(f"| {lib} | {n / 1e6:.3f} | {100 * n / t['prof_total']:.1f}% |")
        lines += ["", f"### {name}: top functions ({t['prof_scope']})", "", "| function | library | M insns | share |",
                  "|---|---|---:|---:|"]
        for fn, lib, n in t["funcs"][:30]:
            fn = fn.replace("|", "\\|")
            if len(fn) > 100:
                fn = fn[:97] + "..."
            lines.append(f"| `{fn}` | {lib} | {n / 1e6:.3f} | {100 * n / t['prof_total']:.1f}% |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/aoti"))
