#!/usr/bin/env python3
"""gemm-floor.md and gemm-floor.csv: the prefill GEMM rows of bench/threads.sh against the
K1's datapath floor, int8 activations (kX8Gemm) beside the FP32 GEMM.

    python3 bench/gemm_floor_report.py DIR   (reads DIR/raw/*.json, writes DIR/gemm-floor.*)

The rows are those `bench/threads.sh --gemm-rows` counts (GEMM_SHAPES x GEMM_MS x 1, 8
threads; int4 group 32 and int8 per channel with int8 or bf16 activations, and bf16
weights); a planned row without a raw file is listed as missing, never filled in.

Per row, all from the counted run (bench/threads_report.py's row_of) except the floor:
  * cycles of the busiest thread in the in-order model: no overlap
    (scalar-like x CPI_SCALAR + vector beats at DLEN) and overlap (max of the two; the
    largest over the threads that ran);
  * cols: the busiest share of columns under the dispatcher's split, recomputed from the
    call with the same rule as rvv_inductor::partition_columns (the raw data does not
    record which thread had which columns): whole nb-column blocks (nb from the run);
    slices of a block only for bf16 weights; never more threads than units;
  * floor: M x K x cols / rate, rate = MACs per cycle of the path's datapath at DLEN 128:
    4 for FP32 vfmacc (bf16 activations, every weight format), 8 for the int8 x int8 ->
    int16 widening vwmacc (int8 activations);
  * est K1 time: max(busiest thread's cycles / clock, all threads' DRAM bytes / bandwidth),
    at the calibrated (achieved) bandwidth of python/rvv_inductor/policy.py (the peak one
    in the CSV), as threads_report.py;
  * x8 speed-up: the FP row's (same shape, weights, M, threads) over the int8-activation
    row's, in busiest-thread cycles and in est. K1 time.
"""
from __future__ import annotations

import csv
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import threads_report as tr  # noqa: E402
from threads_report import k1  # noqa: E402

GEMM_SHAPES = {"q_proj": (1536, 1536), "k_proj": (256, 1536), "gate_up": (17920, 1536), "down_proj": (1536, 8960)}
GEMM_MS = (16, 64, 128, 512)
GEMM_THREADS = (1, 8)
# (weights as in the raw file name, activations)
PATHS = (("int4x8", "int8"), ("int4", "bf16"), ("int8x8", "int8"), ("int8", "bf16"), ("bf16", "bf16"))
RATE = {"int8": 8, "bf16": 4}  # MACs per cycle per core at DLEN 128, by activation type
SHAPE_ALIAS = {"q_proj": "q_proj (= o_proj)", "k_proj": "k_proj (= v_proj)"}
FLAG_FLOOR, FLAG_DRAM, FLAG_WREREAD, FLAG_IMB = 1.6, 2.0, 1.2, 1.10

FIELDS = ["shape", "N", "K", "weights", "activations", "kernel", "M", "threads", "threads_split", "cols",
          "max_insns", "max_cycles", "max_cycles_overlap", "floor_cycles", "est_over_floor",
          "overlap_over_floor", "macs_per_cycle", "call_macs_per_cycle", "imbalance", "working",
          "dram_bytes", "weight_bytes", "dram_over_weight", "dram_w_over_weight", "dram_x_over_x",
          "dram_weights_bytes", "dram_input_bytes", "dram_output_bytes", "dram_scratch_bytes", "dram_other_bytes",
          "dram_write_bytes", "est_us_peak", "est_us_achieved",
          "x8_speedup_cycles", "x8_speedup_achieved", "rev", "tree_diff", "flags"]


def partition_columns(N: int, nb: int, slices: bool, nthreads: int, t: int) -> tuple[int, int, int]:
    """rvv_inductor::partition_columns over [0, N): (unit, begin, end) of thread t."""
    unit = nb if nb > 0 else 1
    min_unit = min(nb, 16)
    if slices:
        while unit // 2 >= min_unit and unit % 2 == 0 and (N + unit - 1) // unit < 4 * nthreads:
            unit //= 2
    units = (N + unit - 1) // unit
    base, extra = divmod(units, nthreads)  # partition_blocks: the first `extra` threads get one more
    b = t * base + min(t, extra)
    e = b + base + (1 if t < extra else 0)
    return unit, min(b * unit, N), min(e * unit, N)


def split_cols(N: int, nb: int, slices: bool, nthreads: int) -> tuple[int, int]:
    """(threads that get work, largest share in columns) of the dispatcher's split (run_kernel:
    no more threads than units; each worker then splits over the threads that run)."""
    nt = nthreads
    if nt > 1:
        unit = partition_columns(N, nb, slices, nt, 0)[0]
        nt = min(nt, (N + unit - 1) // unit)
    if nt <= 1:
        return 1, N
    shares = [e - b for _, b, e in (partition_columns(N, nb, slices, nt, t) for t in range(nt))]
    return nt, max(shares)


def overlap_cycles(c: dict) -> float:
    scalar_like = (c["insns"] - c["vector_insns"] + c["vsetvl"]) * k1.CPI_SCALAR
    return max(scalar_like, c["vbeats"])


def row_of(path: str) -> dict | None:
    d = json.load(open(path))
    prog = d["program"]
    if d["shape"] not in GEMM_SHAPES or prog["M"] not in GEMM_MS or prog["threads"] not in GEMM_THREADS:
        return None
    r = tr.row_of(d)
    x8 = bool(prog.get("x_int8_gemm"))
    act = "int8" if x8 else "bf16"
    nt, cols = split_cols(prog["N"], prog["nb"], prog["weights"] == "bf16" and prog["nb"] > 1,
                          prog["threads_used"])
    floor = prog["M"] * prog["K"] * cols / RATE[act]
    th = [t for t in d["plugin"]["regions"]["1"]["threads"].values() if t["insns"] > 0]
    ov = max(overlap_cycles(t) for t in th)
    wbytes = prog["packed_bytes"]
    reg = d["plugin"]["regions"]["1"]
    tag = reg.get("dram_read_bytes_by_tag", {})
    out = {
        "shape": d["shape"], "N": prog["N"], "K": prog["K"], "weights": r["weights"], "activations": act,
        "kernel": prog["kernel"], "M": prog["M"], "threads": prog["threads"], "threads_split": nt, "cols": cols,
        "max_insns": r["max_insns"], "max_cycles": r["max_cycles"], "max_cycles_overlap": ov,
        "floor_cycles": floor, "est_over_floor": r["max_cycles"] / floor, "overlap_over_floor": ov / floor,
        "macs_per_cycle": prog["M"] * prog["K"] * cols / r["max_cycles"],
        "call_macs_per_cycle": prog["M"] * prog["K"] * prog["N"] / r["max_cycles"],
        "imbalance": r["imbalance"], "working": f"{r['working']}/{r['threads_active']}",
        "dram_bytes": r["total_dram_bytes"], "weight_bytes": wbytes, "dram_over_weight": r["total_dram_bytes"] / wbytes,
        "dram_w_over_weight": tag.get("weights", 0) / wbytes, "dram_x_over_x": tag.get("input", 0) / prog["x_bytes"],
        "dram_weights_bytes": tag.get("weights", 0), "dram_input_bytes": tag.get("input", 0),
        "dram_output_bytes": tag.get("output", 0), "dram_scratch_bytes": tag.get("scratch", 0),
        "dram_other_bytes": tag.get("other", 0), "dram_write_bytes": reg.get("dram_write_bytes", 0),
        "est_us_peak": r["est_us_peak"], "est_us_achieved": r["est_us_achieved"],
        "x8_speedup_cycles": "", "x8_speedup_achieved": "", "rev": d["rev"], "tree_diff": d.get("tree_diff", ""),
    }
    flags = []
    if out["est_over_floor"] > FLAG_FLOOR:
        flags.append(f"cyc>{FLAG_FLOOR}x floor")
    if out["dram_over_weight"] > FLAG_DRAM:
        flags.append(f"DRAM>{FLAG_DRAM:g}x W")
    if out["dram_w_over_weight"] > FLAG_WREREAD:
        flags.append("W re-read")
    if r["imbalance"] > FLAG_IMB:
        flags.append("imbalance")
    if r["working"] < nt:
        flags.append("idle threads")
    out["flags"] = "; ".join(flags)
    return out


def fmt(v):
    return f"{v:.7g}" if isinstance(v, float) else v


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "bench/results/threads"
    rows = [r for p in sorted(glob.glob(os.path.join(out, "raw", "*.json"))) if (r := row_of(p))]
    have = {(r["shape"], r["weights"], r["M"], r["threads"]): r for r in rows}
    for r in rows:
        if r["activations"] == "int8":
            fp = have.get((r["shape"], r["weights"][:-2], r["M"], r["threads"]))
            if fp:
                r["x8_speedup_cycles"] = fp["max_cycles"] / r["max_cycles"]
                r["x8_speedup_achieved"] = fp["est_us_achieved"] / r["est_us_achieved"]
    order = [p for p, _ in PATHS]
    shapes = list(GEMM_SHAPES)
    rows.sort(key=lambda r: (shapes.index(r["shape"]), r["M"], r["threads"], order.index(r["weights"])))
    missing = [f"{s}-{w}-m{m}-t{t}" for s in shapes for m in GEMM_MS for t in GEMM_THREADS for w in order
               if (s, w, m, t) not in have]

    with open(os.path.join(out, "gemm-floor.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: fmt(v) for k, v in r.items()})

    revs = sorted({(r["rev"], r["tree_diff"]) for r in rows})
    rev_txt = ", ".join(f"{rv}" + (f" + uncommitted csrc/linear_bench change {td}" if td else "") for rv, td in revs)
    dram_bpc = k1.K1_DRAM_ACHIEVED_BYTES_PER_S / k1.K1_CLOCK_HZ
    md = [
        "# Prefill GEMM against the K1 datapath floor: int8 activations vs the FP32 GEMM",
        "",
        "Regenerate: `bench/threads.sh --gemm-rows` (counts the missing rows, then `bench/threads_report.py` and "
        "`bench/gemm_floor_report.py` write this file; `bench/threads.sh --report-only` only rewrites it). "
        f"Kernels counted at revision(s) {rev_txt} (`git rev-parse --short HEAD` when the row was counted; "
        "the hash names `git diff HEAD -- csrc bench/linear_bench.cpp` at build time when the tree differed; "
        "a row's rev has a + then). "
        "One `linear_bench` call per row under QEMU 10, VLEN 256, `--path rvv`, rvvcount plugin, every thread "
        "counted, `OMP_WAIT_POLICY=passive`; int4: group 32, f16 scales (Q4_0-like); int8: per channel, f16 "
        "scales; int8 activations = `linear_bench --x-int8-gemm` (kernel `gemm_x8_*`).",
        "",
        "**Every cycle and time here is an ESTIMATE from instruction counts, not a measurement.** Model: "
        f"scalar-like instructions (scalar, scalar memory, vsetvl) {k1.CPI_SCALAR:g} cycle each, every vector "
        f"instruction max(1, EMUL x VLEN / DLEN) beats at DLEN {k1.K1_DLEN_BITS}; **no overlap** = scalar-like + "
        "beats, **overlap** (optimistic) = max(scalar-like, beats). Cycles are the busiest thread's.",
        "",
        "**Floor** = M x K x cols / rate, cols = the busiest thread's columns under the dispatcher's split "
        "(`partition_columns`: whole 64-column blocks for int4/int8; k_proj's 4 blocks go to 4 threads of 8), "
        "rate = 4 MACs/cycle for FP32 `vfmacc` (bf16 activations, any weight format), 8 MACs/cycle for "
        "int8 x int8 -> int16 `vwmacc` (int8 activations). MACs/cycle = M x K x cols / busiest cycles "
        "(per core; the floor rate is its ceiling).",
        "",
        f"**Est. K1 us** = max(busiest thread's no-overlap cycles / {k1.K1_CLOCK_HZ / 1e9:.1f} GHz, all threads' "
        f"modelled DRAM bytes / {k1.K1_DRAM_ACHIEVED_BYTES_PER_S / 1e9:.3f} GB/s) (calibrated bandwidth of "
        f"python/rvv_inductor/policy.py, {dram_bpc:.2f} B/cycle; the CSV also has the "
        f"{k1.K1_DRAM_BYTES_PER_S / 1e9:.2f} GB/s peak). DRAM MB: reads + writes of all threads in the plugin's "
        "cache model (32 KB L1 + 512 KB L2 per thread, cold at the call), so activations read by every thread "
        "count once per thread. DRAM/W = DRAM bytes over the packed weight bytes (scales included); "
        "W rd/W = DRAM reads of the weight buffer over its size (1.00: streamed once); X rd/X = DRAM reads of the "
        "bf16 activations over their size (the CSV splits the rest: output, scratch incl. quantized activations "
        "and unpacked panels, other, writes). "
        "x8 speed-up = the FP row (same shape, weights, M, threads) over the int8-activation row.",
        "",
        f"Flags: cycles > {FLAG_FLOOR}x floor (no overlap); DRAM > {FLAG_DRAM:g}x weight bytes; imbalance "
        f"(max / mean of per-thread cycles) > {FLAG_IMB:.2f}; W re-read: weight DRAM reads > {FLAG_WREREAD}x its "
        "bytes; idle threads (fewer working than the split "
        "gives work to).",
        "",
    ]
    # Summary: the estimated K1 time of each path side by side (rows that were counted).
    md += ["## Summary: est. K1 us (calibrated bandwidth) per path, and the int8-activation speed-up", "",
           "| shape | M | T | int4 fp | int4 x8 | x8 speed-up | int8 fp | int8 x8 | x8 speed-up | bf16 | "
           "int4 x8 MACs/cycle | int8 x8 MACs/cycle | bf16 MACs/cycle |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def cell(key, field="est_us_achieved", f="{:.0f}"):
        r = have.get(key)
        return f.format(r[field]) if r and r[field] != "" else "-"
    for s in shapes:
        for m in GEMM_MS:
            for t in GEMM_THREADS:
                if not any((s, w, m, t) in have for w in order):
                    continue
                md.append(f"| {s} | {m} | {t} | {cell((s, 'int4', m, t))} | {cell((s, 'int4x8', m, t))} | "
                          f"{cell((s, 'int4x8', m, t), 'x8_speedup_achieved', '{:.2f}')} | {cell((s, 'int8', m, t))} | "
                          f"{cell((s, 'int8x8', m, t))} | {cell((s, 'int8x8', m, t), 'x8_speedup_achieved', '{:.2f}')} | "
                          f"{cell((s, 'bf16', m, t))} | {cell((s, 'int4x8', m, t), 'macs_per_cycle', '{:.2f}')} | "
                          f"{cell((s, 'int8x8', m, t), 'macs_per_cycle', '{:.2f}')} | "
                          f"{cell((s, 'bf16', m, t), 'macs_per_cycle', '{:.2f}')} |")
    md.append("")
    for s in shapes:
        rs = [r for r in rows if r["shape"] == s]
        if not rs:
            continue
        n, k = GEMM_SHAPES[s]
        md += [f"## {SHAPE_ALIAS.get(s, s)}, N x K = {n} x {k}", "",
               "| M | T | weights | act | kernel | busiest insns | cycles (no overlap) | cycles (overlap) | "
               "cols | floor | no-ovl / floor | ovl / floor | MACs/cycle | imbalance | DRAM MB | DRAM/W | W rd/W | X rd/X | "
               "est. K1 us | x8 speed-up (cycles) | x8 speed-up (est. us) | flags | rev |",
               "|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        for r in rs:
            sp = (f"{r['x8_speedup_cycles']:.2f}" if r["x8_speedup_cycles"] != "" else "",
                  f"{r['x8_speedup_achieved']:.2f}" if r["x8_speedup_achieved"] != "" else "")
            md.append(
                f"| {r['M']} | {r['threads']} | {r['weights'].removesuffix('x8')} | {r['activations']} | "
                f"{r['kernel'].split('/')[-1]} | {r['max_insns'] / 1e6:.2f} M | {r['max_cycles'] / 1e6:.2f} M | "
                f"{r['max_cycles_overlap'] / 1e6:.2f} M | {r['cols']} | {r['floor_cycles'] / 1e6:.2f} M | "
                f"{r['est_over_floor']:.2f} | {r['overlap_over_floor']:.2f} | {r['macs_per_cycle']:.2f} | "
                f"{r['imbalance']:.3f} | {r['dram_bytes'] / 1e6:.1f} | {r['dram_over_weight']:.2f} | {r['dram_w_over_weight']:.2f} | {r['dram_x_over_x']:.1f} | "
                f"{r['est_us_achieved']:.0f} | {sp[0]} | {sp[1]} | {r['flags']} | "
                f"{r['rev']}{'+' if r['tree_diff'] else ''} |")
        md.append("")
    if missing:
        md += [f"Not counted ({len(missing)} planned rows without a raw file): " + ", ".join(missing), ""]
    with open(os.path.join(out, "gemm-floor.md"), "w") as f:
        f.write("\n".join(md))
    print(f"gemm_floor_report.py: {len(rows)} rows ({len(missing)} missing) -> {out}/gemm-floor.csv, {out}/gemm-floor.md")


if __name__ == "__main__":
    main()
