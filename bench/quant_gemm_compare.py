#!/usr/bin/env python3
"""The INT8/INT4 GEMM before and after its cache blocking, from two directories of
bench/threads.sh raw results (the same rows at two revisions):

    python3 bench/quant_gemm_compare.py BEFORE_RAW AFTER_RAW > bench/results/threads/quant-gemm-blocking.md

Per row: instructions over all threads, the busiest thread's, DRAM bytes (read + written,
all threads, the plugin's cache model) against the packed weight, and the estimated K1
time at the calibrated bandwidth (threads_report's model: max(busiest thread's cycles /
clock, DRAM bytes / bandwidth))."""
from __future__ import annotations

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import threads_report  # noqa: E402


def load(d: str) -> dict:
    rows = {}
    for f in glob.glob(os.path.join(d, "*.json")):
        r = json.load(open(f))
        p = r["program"]
        if p.get("weights") not in ("int8", "int4") or p["M"] < 2:
            continue
        rows[(r["shape"], p["weights"], p["M"], p["threads"])] = (threads_report.row_of(r), p, r["rev"])
    return rows


def main(before_dir: str, after_dir: str) -> int:
    before, after = load(before_dir), load(after_dir)
    keys = sorted(set(before) & set(after),
                  key=lambda k: (threads_report.SHAPE_ORDER.index(k[0]), k[1], k[2], k[3]))
    if not keys:
        sys.exit("no common INT8/INT4 GEMM rows")
    revs = sorted({before[k][2] for k in keys}), sorted({after[k][2] for k in keys})
    print("# INT8/INT4 GEMM: before and after its cache blocking\n")
    print(f"Before: revision {', '.join(revs[0])}; after: {', '.join(revs[1])}. One linear_bench call per row "
          "(VLEN 256, QEMU 10, rvvcount plugin, every thread counted; INT4 group 32, INT8 per channel, "
          "f16 scales). DRAM: bytes read + written by all threads in the plugin's cache model "
          "(32 KB L1 and 512 KB L2 per thread). EST.: K1 time at the calibrated bandwidth.\n")
    print("| shape | weights | M | threads | packed MB | insns before | after | DRAM MB before | after | "
          "DRAM / weight after | EST. us before | after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in keys:
        (b, _, _), (a, pa, _) = before[k], after[k]
        w = pa["packed_bytes"]
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {w / 1e6:.2f} | {b['total_insns'] / 1e6:.1f} M | "
              f"{a['total_insns'] / 1e6:.1f} M | {b['total_dram_bytes'] / 1e6:.1f} | {a['total_dram_bytes'] / 1e6:.1f} | "
              f"{a['total_dram_bytes'] / w:.2f}x | {b['est_us_achieved']:.0f} | {a['est_us_achieved']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]) if len(sys.argv) == 3 else (print(__doc__), 2)[1])
