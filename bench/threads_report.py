#!/usr/bin/env python3
"""threads.csv and threads.md from bench/threads.sh's raw per-thread counts.

    python3 bench/threads_report.py DIR      (reads DIR/raw/*.json, writes DIR/threads.*)

Per row (shape, weights, M, threads T; weights "int4x8"/"int8x8": int8 activations,
linear_bench --x-int8-gemm):
  * threads_active: threads that executed an instruction in the region (the plugin);
    working: threads whose cycles are at least 10% of the busiest one's;
  * max_insns, max_vbeats, max_dram_bytes: the busiest thread by modelled cycles;
  * imbalance: max / mean of the per-thread cycles over the threads that executed
    anything (1.0 = even);
  * total insns / DRAM bytes over all threads (the split's overhead shows as growth with T);
  * est_us_peak, est_us_achieved: estimated K1 time, max(busiest thread's cycles / clock,
    all threads' DRAM bytes / bandwidth): DRAM is shared by all cores, compute is not;
    at the peak (K1_DRAM_BYTES_PER_S) and the achieved (K1_DRAM_ACHIEVED_BYTES_PER_S)
    bandwidth of python/rvv_inductor/policy.py; speedup_*: the T = 1 time over this one.
Cycles per thread are the estimates' in-order model (demo/estimate.py, bench/report.py):
(instructions - vector instructions + vsetvl) x CPI_SCALAR + vector beats at DLEN.
"""
from __future__ import annotations

import csv
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from rvv_inductor import policy as k1  # noqa: E402

FIELDS = ["shape", "weights", "M", "K", "N", "threads", "threads_used", "threads_active", "working",
          "max_insns", "max_vbeats", "max_dram_bytes", "max_cycles", "imbalance", "total_insns",
          "total_dram_bytes", "compute_us", "dram_us_peak", "dram_us_achieved", "est_us_peak",
          "est_us_achieved", "speedup_peak", "speedup_achieved", "kernel", "rev"]
SHAPE_ORDER = ["q_proj", "k_proj", "o_proj", "up_proj", "gate_up", "down_proj", "lm_head"]


def cycles(c: dict) -> float:
    return (c["insns"] - c["vector_insns"] + c["vsetvl"]) * k1.CPI_SCALAR + c["vbeats"]


def dram(c: dict) -> int:
    return c.get("dram_read_bytes", 0) + c.get("dram_write_bytes", 0)


def row_of(d: dict) -> dict:
    prog, reg = d["program"], d["plugin"]["regions"]["1"]
    if prog.get("check_failures", 0):
        sys.exit(f"threads_report.py: {d['shape']}: the output check failed")
    if reg["calls"] != 1:
        sys.exit(f"threads_report.py: {d['shape']}: region ran {reg['calls']} times")
    th = list(reg["threads"].values())
    busiest = max(th, key=cycles)
    active = [t for t in th if t["insns"] > 0]
    cyc = [cycles(t) for t in active]
    mx = cycles(busiest)
    compute_s = mx / k1.K1_CLOCK_HZ
    total_dram = dram(reg)
    # int8 activations (linear_bench --x-int8-gemm, kernel gemm_x8_*): their own rows, "int4x8"/"int8x8"
    weights = prog["weights"] + ("x8" if prog.get("x_int8_gemm") else "")
    return {
        "shape": d["shape"], "weights": weights, "M": prog["M"], "K": prog["K"], "N": prog["N"],
        "threads": prog["threads"], "threads_used": prog["threads_used"], "threads_active": len(active),
        "working": sum(1 for c in cyc if c >= 0.1 * mx),
        "max_insns": busiest["insns"], "max_vbeats": busiest["vbeats"], "max_dram_bytes": dram(busiest),
        "max_cycles": mx, "imbalance": mx * len(cyc) / sum(cyc) if sum(cyc) else 0.0,
        "total_insns": reg["insns"], "total_dram_bytes": total_dram,
        "compute_us": compute_s * 1e6,
        "dram_us_peak": total_dram / k1.K1_DRAM_BYTES_PER_S * 1e6,
        "dram_us_achieved": total_dram / k1.K1_DRAM_ACHIEVED_BYTES_PER_S * 1e6,
        "est_us_peak": max(compute_s * 1e6, total_dram / k1.K1_DRAM_BYTES_PER_S * 1e6),
        "est_us_achieved": max(compute_s * 1e6, total_dram / k1.K1_DRAM_ACHIEVED_BYTES_PER_S * 1e6),
        "kernel": prog["kernel"], "rev": d["rev"],
    }


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "bench/results/threads"
    rows = [row_of(json.load(open(p))) for p in sorted(glob.glob(os.path.join(out, "raw", "*.json")))]
    if not rows:
        sys.exit(f"threads_report.py: no raw results in {out}/raw")
    one = {(r["shape"], r["weights"], r["M"]): r for r in rows if r["threads"] == 1}
    for r in rows:
        base = one.get((r["shape"], r["weights"], r["M"]))
        r["speedup_peak"] = base["est_us_peak"] / r["est_us_peak"] if base else 0.0
        r["speedup_achieved"] = base["est_us_achieved"] / r["est_us_achieved"] if base else 0.0
    rows.sort(key=lambda r: (r["weights"] != "bf16", r["weights"], r["M"],
                             SHAPE_ORDER.index(r["shape"]) if r["shape"] in SHAPE_ORDER else 99, r["threads"]))
    with open(os.path.join(out, "threads.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})

    revs = sorted({r["rev"] for r in rows})
    md = ["# Per-thread counts of the library Linear kernels (Qwen2.5-1.5B shapes)", "",
          "Regenerate: `bench/threads.sh` (then this file is written by `bench/threads_report.py`). "
          f"Counted at revision(s) {', '.join(revs)}, QEMU 10, VLEN 256, plain-V kernels (int8/int4: Zvfh), "
          "`OMP_WAIT_POLICY=passive`; every thread's work is counted (rvvcount charges a region with "
          "the work of all threads while it is open).", "",
          "**ESTIMATED** K1 times, not measurements: busiest thread's cycles (in-order model: "
          f"non-vector instructions x {k1.CPI_SCALAR} + vector beats at DLEN {k1.K1_DLEN_BITS}) at "
          f"{k1.K1_CLOCK_HZ / 1e9:.1f} GHz, against all threads' modelled DRAM bytes at the shared bandwidth: "
          f"peak {k1.K1_DRAM_BYTES_PER_S / 1e9:.2f} GB/s (the ceiling) or achieved "
          f"{k1.K1_DRAM_ACHIEVED_BYTES_PER_S / 1e9:.3f} GB/s (calibrated, python/rvv_inductor/demo/calibration.py); "
          "time = max(compute, DRAM). The cache model is per thread (private L1 and L2), so data all "
          "threads read (the activations) is charged once per thread: total DRAM grows slightly with T.", "",
          "imbalance = max / mean of per-thread cycles over threads that ran (1.00 = even); "
          "working = threads with >= 10% of the busiest one's cycles.", ""]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["weights"], r["M"]), []).append(r)
    for (wt, m), rs in groups.items():
        md += [f"## {wt}, M = {m}", "",
               "| shape | N x K | T | working | max thread insns | max thread beats | max thread DRAM MB | "
               "imbalance | total DRAM MB | compute us | est us (peak BW) | speed-up | est us (achieved BW) | speed-up |",
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rs:
            md.append(f"| {r['shape']} | {r['N']}x{r['K']} | {r['threads']} | {r['working']}/{r['threads_active']} | "
                      f"{r['max_insns']:,} | {r['max_vbeats']:,} | {r['max_dram_bytes'] / 1e6:.2f} | "
                      f"{r['imbalance']:.3f} | {r['total_dram_bytes'] / 1e6:.2f} | {r['compute_us']:.0f} | "
                      f"{r['est_us_peak']:.0f} | {r['speedup_peak']:.2f} | {r['est_us_achieved']:.0f} | "
                      f"{r['speedup_achieved']:.2f} |")
        md.append("")
    # The decode step's Linear layers (28 layers of q, k, v, o, gate, up, down + lm_head),
    # M = 1, per weight format: the speed-up curve of the whole set. Each call takes
    # max(its compute, its DRAM time); compute / est = 100% means compute-bound throughout.
    per_layer = {"q_proj": 1, "k_proj": 2, "o_proj": 1, "up_proj": 2, "down_proj": 1}
    for wt in ("bf16", "int8", "int4"):
        dec = {(r["shape"], r["threads"]): r for r in rows if r["weights"] == wt and r["M"] == 1}
        if not (all((s, 1) in dec for s in per_layer) and ("lm_head", 1) in dec):
            continue
        md += [f"## Decode step, {wt} weights (28 x (q + k + v + o + gate + up + down) + lm_head, M = 1)", "",
               "| T | compute ms (busiest threads) | est ms (peak BW) | speed-up | est ms (achieved BW) | speed-up | "
               "compute / est (achieved BW) |",
               "|---:|---:|---:|---:|---:|---:|---:|"]
        base = None
        for t in (1, 2, 4, 8):
            if not all((s, t) in dec for s in list(per_layer) + ["lm_head"]):
                continue
            tot = {key: sum(28 * n * dec[(s, t)][key] for s, n in per_layer.items()) + dec[("lm_head", t)][key]
                   for key in ("est_us_peak", "est_us_achieved", "compute_us")}
            pk, ac, comp = tot["est_us_peak"], tot["est_us_achieved"], tot["compute_us"]
            if base is None:
                base = (pk, ac)
            md.append(f"| {t} | {comp / 1e3:.1f} | {pk / 1e3:.1f} | {base[0] / pk:.2f} | {ac / 1e3:.1f} | "
                      f"{base[1] / ac:.2f} | {100 * comp / ac:.0f}% |")
        md.append("")
    with open(os.path.join(out, "threads.md"), "w") as f:
        f.write("\n".join(md))
    print(f"threads_report.py: {len(rows)} rows -> {out}/threads.csv, {out}/threads.md")


if __name__ == "__main__":
    main()
