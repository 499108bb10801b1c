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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from rvv_inductor.demo.estimate import thread_view  # noqa: E402  (the demo's cycle model)
from rvv_inductor.policy import (K1_CLOCK_HZ, K1_DRAM_ACHIEVED_BYTES_PER_S,  # noqa: E402
                                 K1_DRAM_BYTES_PER_S)

DEPTH = 28  # Qwen2.5-1.5B's decoder layers
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
            "prof_scope": ("per decode token" if pre is None else
                           f"the whole counted run: {calls} decode steps + the {prompt}-token prefill"),
            "prof_total": total,
            "libs": [(x["library"], x["insns"] / scale) for x in prof["libraries"]],
            "funcs": [(x["function"], x["library"], x["insns"] / scale) for x in prof["functions"]]}


def step_cost(run: dict, region: str, tokens: int | None) -> tuple[float, float] | None:
    """(busiest thread's cycles, DRAM bytes read + written) per token of one region: per
    decode step (tokens None: divided by the region's calls) or per prompt token."""
    reg = run["plugin"]["regions"].get(region)
    if reg is None:
        return None
    n = tokens or reg["calls"]
    return thread_view(reg)["max_thread_cycles"] / n, (reg.get("dram_read_bytes", 0) + reg.get("dram_write_bytes", 0)) / n


def extrapolated(runs: list) -> list[str]:
    """Runs at 1 and 2 layers of one configuration, extrapolated linearly to DEPTH layers
    (the decoder only: the runs' lm_head has the cut vocabulary) and timed with the demo's
    model: compute = the busiest thread's cycles at K1_CLOCK_HZ, DRAM at both bandwidths."""
    by = {}
    for name, r, _ in runs:
        key = (r["weights"], r["threads"], r["cache"], r.get("prompt"), name.endswith("-sdpa"), r["rev"],
               name.endswith("-scalarcvt"))
        by.setdefault(key, {})[r["layers"]] = (name, r)
    out = []
    for key, d in sorted(by.items(), key=lambda kv: str(kv[0])):
        if 1 not in d or 2 not in d:
            continue
        for what, region, tokens in (("decode, per token", "1", None), ("prefill, per prompt token", PREFILL_REGION,
                                                                     d[1][1].get("prompt"))):
            a, b = step_cost(d[1][1], region, tokens), step_cost(d[2][1], region, tokens)
            if a is None or b is None:
                continue
            cyc, dram = (a[i] + (DEPTH - 1) * (b[i] - a[i]) for i in range(2))
            comp, mem, peak = cyc / K1_CLOCK_HZ, dram / K1_DRAM_ACHIEVED_BYTES_PER_S, dram / K1_DRAM_BYTES_PER_S
            out.append(f"| {d[1][0]} + {d[2][0]} | {what} | {(b[0] - a[0]) / 1e6:.2f} | {(b[1] - a[1]) / 1e6:.1f} | "
                       f"{comp * 1e3:.0f} | {dram / 1e6:.0f} | {mem * 1e3:.0f} | {peak * 1e3:.0f} |")
    if not out:
        return []
    return ["", f"## Extrapolated to {DEPTH} decoder layers (ESTIMATED K1, not measured)", "",
            "Linear in the layer count from the 1- and 2-layer runs of one configuration; the decoder only "
            "(the runs' lm_head has the cut vocabulary: add the full one's bytes and cycles from the kernel "
            "benchmark). Compute: the busiest thread's cycles by `demo/estimate.py`'s model at "
            f"{K1_CLOCK_HZ / 1e9:.1f} GHz; DRAM: bytes read + written at the calibrated "
            f"{K1_DRAM_ACHIEVED_BYTES_PER_S / 1e9:.2f} GB/s and at the {K1_DRAM_BYTES_PER_S / 1e9:.2f} GB/s peak; "
            "a step takes the larger of compute and DRAM.", "",
            "| runs | step | busiest-thread M cycles / layer | DRAM MB / layer | compute ms | DRAM MB | "
            "DRAM ms (calibrated) | DRAM ms (peak) |", "|---|---|---:|---:|---:|---:|---:|---:|"] + out


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
    lines += extrapolated(runs)
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
