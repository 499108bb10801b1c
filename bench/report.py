#!/usr/bin/env python3
"""Turns bench/results/raw/*.json (written by bench/run.sh) into results.csv, results.md
and instructions.png. Deterministic: the same raw files give byte-identical outputs.

Usage: bench/report.py [RESULTS_DIR]   (default: bench/results)

The cycle model and the floors are described in bench/README.md; the constants are here.
"""
import csv
import glob
import json
import os
import sys

DLEN = 128  # datapath width of the SpacemiT X60 (K1), bits
CPI_SCALAR = 1.0  # in-order; dual issue ignored (see README)
DRAM_BYTES_PER_CYCLE = 10.7e9 / 1.6e9  # K1 memory bandwidth / core clock
TARGET_GEMV_INSN_PER_W = 0.15
TARGET_GEMV_READ_RATIO = 1.05
TARGET_GEMM_INSN_PER_MAC = 0.12
TARGET_FLOOR_RATIO = 1.2

SHAPE_NAMES = {
    (1536, 2048): "q_proj+k+v 1536->2048",
    (1536, 1536): "o_proj 1536->1536",
    (1536, 17920): "gate+up 1536->17920",
    (8960, 1536): "down 8960->1536",
    (1536, 151936): "lm_head 1536->151936",
}
SHAPE_ORDER = list(SHAPE_NAMES)

COUNTERS = [
    "insns", "vector_insns", "scalar", "scalar_mem", "vsetvl", "vload", "vstore", "vfma", "vwiden", "varith",
    "vregops", "vbeats", "reads", "writes", "bytes_read", "bytes_written", "vbytes_read", "vbytes_written",
    "l1_misses", "l2_misses", "dram_read_bytes", "dram_write_bytes", "vtype_unknown", "vtype_mismatch",
]
TAGGED = ["weights", "input", "output", "scratch", "other"]

IMPL_LABEL = {
    ("rvv", "packed"): "RVV packed (widening)",
    ("rvv", "rowmajor"): "RVV row-major (widening)",
    ("rvv_zvfbf", "packed"): "RVV packed (Zvfbfwma)",
    ("rvv_zvfbf", "rowmajor"): "RVV row-major (Zvfbfwma)",
    ("scalar", "packed"): "scalar reference",
    ("aten", "rowmajor"): "ATen F.linear (torch 2.14.1)",
}


def flatten(region):
    row = {k: float(region.get(k, 0)) for k in COUNTERS}
    for t in TAGGED:
        row["read_" + t] = float(region.get("bytes_read_by_tag", {}).get(t, 0))
        row["dram_" + t] = float(region.get("dram_read_bytes_by_tag", {}).get(t, 0))
    return row


def load(raw_dir):
    """Returns {(impl, fmt, vlen, M, K, N_full): {"full"|"sample1"|"sample2": (N, counters)}}."""
    groups = {}
    for path in sorted(glob.glob(os.path.join(raw_dir, "*.json"))):
        with open(path) as f:
            d = json.load(f)
        job, plugin = d["job"], d["plugin"]
        progs = {p.get("region", 1): p for p in d["programs"]}
        for run in job["runs"]:
            reg = plugin["regions"].get(str(run["region"]))
            prog = progs.get(run["region"])
            if reg is None or prog is None:
                sys.exit(f"report.py: {path}: region {run['region']} missing (did the program fail?)")
            if prog.get("check_failures", 0):
                sys.exit(f"report.py: {path}: the program's output check failed; numbers would be meaningless")
            if reg.get("calls") != 1:
                sys.exit(f"report.py: {path}: region {run['region']} ran {reg.get('calls')} times, expected 1")
            vlen = job["vlen"]
            key = (job["impl"], job["format"], vlen, run["M"], run["K"], run["N_full"])
            row = flatten(reg)
            row["_path_used"] = prog.get("path_used", "")
            row["_buffer"] = float(prog.get("weight_buffer_bytes", 0))
            groups.setdefault(key, {})[run["role"]] = (run["N"], row)
    return groups


def combine(samples, n_full):
    """Full run, or the two-point linear extrapolation in N of every counter."""
    if "full" in samples:
        return dict(samples["full"][1]), False
    (n1, a), (n2, b) = samples["sample1"], samples["sample2"]
    out = {}
    for k, va in a.items():
        if k.startswith("_"):
            out[k] = va
            continue
        vb = b[k]
        out[k] = va + (vb - va) * (n_full - n1) / (n2 - n1)
    return out, True


def derive(key, c, sampled):
    impl, fmt, vlen, M, K, N = key
    w_elems = N * K
    wbytes = 2 * w_elems
    macs = M * N * K
    r = {
        "impl": impl, "format": fmt, "vlen": vlen, "M": M, "K": K, "N": N, "sampled": int(sampled),
        "path_used": c["_path_used"], "weight_bytes": wbytes, "macs": macs,
    }
    for k in COUNTERS:
        r[k] = c[k]
    for t in TAGGED:
        r["read_" + t] = c["read_" + t]
        r["dram_read_" + t] = c["dram_" + t]
    r["insns_per_weight"] = c["insns"] / w_elems
    r["insns_per_mac"] = c["insns"] / macs
    r["bytes_read_per_wbyte"] = c["bytes_read"] / wbytes
    r["dram_w_per_wbyte"] = c["dram_weights"] / wbytes
    r["dram_per_wbyte"] = c["dram_read_bytes"] / wbytes
    # In-order model: every non-vector-datapath instruction (scalar, scalar memory,
    # vsetvl) takes CPI_SCALAR cycles, every vector instruction its datapath beats
    # max(1, EMUL*VLEN/DLEN), without overlap; DRAM traffic overlaps compute.
    scalar_like = c["insns"] - c["vector_insns"] + c["vsetvl"]
    compute = scalar_like * CPI_SCALAR + c["vbeats"]
    mem = (c["dram_read_bytes"] + c["dram_write_bytes"]) / DRAM_BYTES_PER_CYCLE
    r["cyc_compute"] = compute
    r["cyc_memory"] = mem
    r["cyc_est"] = max(compute, mem)
    # Optimistic bound: scalar issue fully hidden behind the vector datapath (or vice versa).
    r["cyc_overlap"] = max(scalar_like * CPI_SCALAR, c["vbeats"], mem)
    f = floors(vlen if vlen else 256, M, K, N)
    r.update(f)
    r["est_over_floor"] = r["cyc_est"] / f["floor_widen_cycles"]
    r["overlap_over_floor"] = r["cyc_overlap"] / f["floor_widen_cycles"]
    return r


def floors(vlen, M, K, N):
    """Ideal numbers for the widening (software BF16) path and for Zvfbfwma.

    Widening path, per group of VLEN/4 weights (vle16 at m4, widened to e32 m8): vle16
    (4 registers) + vzext.vf2 (8) + vsll (8) + M x vfmacc (8 each): 20 + 8M register
    operations, each VLEN/DLEN datapath beats. Zvfbfwma: vle16 (4) + M x vfwmaccbf16 (8).
    Instruction lower bounds count one instruction per step and group."""
    w = N * K
    groups = w / (vlen / 4)
    beats_per_reg = vlen / DLEN
    mem = 2 * w / DRAM_BYTES_PER_CYCLE
    dp_widen = (20 + 8 * M) * groups * beats_per_reg
    dp_wma = (4 + 8 * M) * groups * beats_per_reg
    return {
        "floor_mem_cycles": mem,
        "floor_widen_datapath": dp_widen,
        "floor_widen_cycles": max(dp_widen, mem),
        "floor_wma_cycles": max(dp_wma, mem),
        "lb_vinsns_widen": (3 + M) * groups,
        "lb_vinsns_wma": (1 + M) * groups,
    }


def fmt_n(x):
    x = float(x)
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}" if x / div < 100 else f"{x / div:.0f}{suf}"
    return f"{x:.3g}" if x != int(x) else str(int(x))


def fmt_b(x):
    x = float(x)
    for div, suf in ((1e9, " GB"), (1e6, " MB"), (1e3, " kB")):
        if x >= div:
            return f"{x / div:.3g}{suf}" if x / div < 100 else f"{x / div:.0f}{suf}"
    return f"{x:.0f} B"


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def main():
    res = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
    groups = load(os.path.join(res, "raw"))
    if not groups:
        sys.exit(f"report.py: no raw results in {res}/raw: run bench/run.sh")
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2], SHAPE_ORDER.index((k[4], k[5])) if (k[4], k[5]) in SHAPE_ORDER else 99, k[3])):
        c, sampled = combine(groups[key], key[5])
        rows.append(derive(key, c, sampled))
    idx = {(r["impl"], r["format"], r["vlen"], r["M"], r["K"], r["N"]): r for r in rows}

    def get(impl, fmt, vlen, M, K, N):
        return idx.get((impl, fmt, 0 if impl == "scalar" else vlen, M, K, N))

    # ---------------------------------------------------------------- CSV
    fields = list(rows[0].keys())
    with open(os.path.join(res, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})

    shapes = [s for s in SHAPE_ORDER if any((r["K"], r["N"]) == s for r in rows)]
    Ms = sorted({r["M"] for r in rows})
    md = []
    md.append("# RVV BF16 Linear: instruction-count benchmark\n")
    md.append("Generated by `bench/run.sh` (raw data in `raw/`, every row in `results.csv`); method, "
              "cycle model and caveats in `bench/README.md`. All numbers are counts of executed riscv64 "
              "instructions and bytes for ONE call (after a warm-up call), single thread, from QEMU user "
              "mode with the `rvvcount` plugin; emulation wall time is not a measure of anything. "
              "Rows marked * were extrapolated linearly in N from two narrower runs.\n")
    md.append(f"Cycle estimate (in-order, K1-like): scalar instructions x CPI {CPI_SCALAR:g} + vector "
              f"datapath beats (each vector instruction max(1, EMUL x VLEN/{DLEN})), overlapped with DRAM "
              f"traffic at {DRAM_BYTES_PER_CYCLE:.2f} B/cycle (10.7 GB/s at 1.6 GHz) from the cache model "
              "(32 KiB L1D 8-way + 512 KiB L2 16-way, 64 B lines, LRU, cold at the call, no prefetch). "
              "Floor = the widening path's datapath floor: per VLEN/4 weights, vle16 m4 + vzext m8 + vsll m8 "
              "+ M x vfmacc m8 (or the weight streaming time, if larger).\n")

    # Decode table
    md.append("## Decode GEMV (M = 1), VLEN 256\n")
    hdr = ["shape", "implementation", "instructions", "vector", "instr / weight", "bytes read",
           "read / W bytes", "DRAM W / W bytes", "reg-group ops", "est. cycles", "est / floor"]
    trs = []
    impls = [("rvv", "packed"), ("rvv", "rowmajor"), ("rvv_zvfbf", "packed"), ("rvv_zvfbf", "rowmajor"),
             ("scalar", "packed"), ("aten", "rowmajor")]
    for s in shapes:
        K, N = s
        for impl, fm in impls:
            r = get(impl, fm, 256, 1, K, N)
            if not r:
                continue
            star = "*" if r["sampled"] else ""
            trs.append([SHAPE_NAMES[s], IMPL_LABEL[(impl, fm)] + star, fmt_n(r["insns"]), fmt_n(r["vector_insns"]),
                        f"{r['insns_per_weight']:.3f}", fmt_b(r["bytes_read"]), f"{r['bytes_read_per_wbyte']:.3f}",
                        f"{r['dram_w_per_wbyte']:.3f}", fmt_n(r["vregops"]), fmt_n(r["cyc_est"]),
                        f"{r['est_over_floor']:.2f}"])
        f = floors(256, 1, K, N)
        trs.append([SHAPE_NAMES[s], "ideal (widening / Zvfbfwma)",
                    f"{fmt_n(f['lb_vinsns_widen'])} / {fmt_n(f['lb_vinsns_wma'])} (vector LB)", "",
                    f"{f['lb_vinsns_widen'] / (K * N):.4f} / {f['lb_vinsns_wma'] / (K * N):.4f}",
                    fmt_b(2 * K * N), "1.000", "1.000", "", f"{fmt_n(f['floor_widen_cycles'])} / {fmt_n(f['floor_wma_cycles'])}",
                    "1.00"])
    md.append(table(hdr, trs) + "\n")

    # Prefill table
    md.append("## Prefill / batched GEMM (M > 1), VLEN 256, packed weights\n")
    md.append("Instructions per multiply-add for each implementation; the RVV widening kernel's modelled DRAM "
              "weight traffic (LLC misses falling in W) and total DRAM reads relative to the BF16 weight bytes; "
              "cycle estimate relative to the floor, also with scalar issue fully overlapped with the vector "
              "datapath (an optimistic bound); instruction ratio of ATen and the scalar reference to the RVV kernel.\n")
    hdr = ["shape", "M", "RVV instr/MAC", "Zvfbfwma instr/MAC", "scalar instr/MAC", "ATen instr/MAC",
           "RVV instructions", "DRAM W / W", "DRAM all / W", "est / floor", "(overlap) / floor", "ATen / RVV",
           "scalar / RVV"]
    trs = []
    for s in shapes:
        K, N = s
        for M in Ms:
            if M == 1:
                continue
            r = get("rvv", "packed", 256, M, K, N)
            if not r:
                continue
            z = get("rvv_zvfbf", "packed", 256, M, K, N)
            sc = get("scalar", "packed", 256, M, K, N)
            at = get("aten", "rowmajor", 256, M, K, N)

            def ipm(x):
                return (f"{x['insns_per_mac']:.4g}" + ("*" if x["sampled"] else "")) if x else "-"

            trs.append([SHAPE_NAMES[s], M, ipm(r), ipm(z), ipm(sc), ipm(at), fmt_n(r["insns"]) + ("*" if r["sampled"] else ""),
                        f"{r['dram_w_per_wbyte']:.2f}", f"{r['dram_per_wbyte']:.2f}", f"{r['est_over_floor']:.2f}",
                        f"{r['overlap_over_floor']:.2f}", f"{at['insns'] / r['insns']:.0f}x" if at else "-", f"{sc['insns'] / r['insns']:.0f}x" if sc else "-"])
    md.append(table(hdr, trs) + "\n")

    # VLEN scaling
    vlens = sorted({r["vlen"] for r in rows if r["impl"] == "rvv" and r["format"] == "packed"})
    if len(vlens) > 1:
        md.append("## VLEN scaling (RVV widening kernel, packed weights)\n")
        md.append("Instructions at each VLEN and the ratio to the next smaller VLEN (2.0 = perfect scaling); "
                  "est / floor at each VLEN (DLEN stays 128, so the datapath floor in cycles does not shrink).\n")
        hdr = ["shape", "M"] + [f"instr VLEN {v}" for v in vlens] + \
              [f"{a}->{b}" for a, b in zip(vlens, vlens[1:])] + [f"est/floor {v}" for v in vlens]
        trs = []
        for s in shapes:
            K, N = s
            for M in Ms:
                rs = [get("rvv", "packed", v, M, K, N) for v in vlens]
                if not all(rs):
                    continue
                trs.append([SHAPE_NAMES[s], M] + [fmt_n(x["insns"]) for x in rs] +
                           [f"{a['insns'] / b['insns']:.2f}" for a, b in zip(rs, rs[1:])] +
                           [f"{x['est_over_floor']:.2f}" for x in rs])
        md.append(table(hdr, trs) + "\n")

    # Instruction mix of the main kernels
    md.append("## Instruction mix, VLEN 256 (share of instructions)\n")
    hdr = ["shape", "M", "implementation", "scalar", "scalar mem", "vsetvl", "vload", "vstore", "vfma", "vwiden",
           "varith", "reg-group ops / vector instr"]
    trs = []
    for s in shapes:
        K, N = s
        for M in (1, 16):
            for impl, fm in (("rvv", "packed"), ("rvv_zvfbf", "packed")):
                r = get(impl, fm, 256, M, K, N)
                if not r:
                    continue
                nv = r["vector_insns"] - r["vsetvl"]
                trs.append([SHAPE_NAMES[s], M, IMPL_LABEL[(impl, fm)]] +
                           [f"{100 * r[k] / r['insns']:.1f}%" for k in
                            ("scalar", "scalar_mem", "vsetvl", "vload", "vstore", "vfma", "vwiden", "varith")] +
                           [f"{r['vregops'] / nv:.2f}" if nv else "-"])
    md.append(table(hdr, trs) + "\n")

    # Targets
    md.append("## Targets\n")
    trs = []

    def verdict(ok):
        return "met" if ok else "**missed**"

    for s in shapes:
        K, N = s
        r = get("rvv", "packed", 256, 1, K, N)
        if r:
            trs.append([f"GEMV {SHAPE_NAMES[s]}: instr / weight <= {TARGET_GEMV_INSN_PER_W}",
                        f"{r['insns_per_weight']:.3f}", verdict(r["insns_per_weight"] <= TARGET_GEMV_INSN_PER_W)])
            trs.append([f"GEMV {SHAPE_NAMES[s]}: bytes read <= {TARGET_GEMV_READ_RATIO} x W",
                        f"{r['bytes_read_per_wbyte']:.3f}", verdict(r["bytes_read_per_wbyte"] <= TARGET_GEMV_READ_RATIO)])
            trs.append([f"GEMV {SHAPE_NAMES[s]}: est. cycles <= {TARGET_FLOOR_RATIO} x floor",
                        f"{r['est_over_floor']:.2f}", verdict(r["est_over_floor"] <= TARGET_FLOOR_RATIO)])
    for s in shapes:
        K, N = s
        for M in (4, 8, 16):
            r = get("rvv", "packed", 256, M, K, N)
            if r:
                trs.append([f"GEMM {SHAPE_NAMES[s]} M={M}: instr / MAC <= {TARGET_GEMM_INSN_PER_MAC}",
                            f"{r['insns_per_mac']:.4f}", verdict(r["insns_per_mac"] <= TARGET_GEMM_INSN_PER_MAC)])
                trs.append([f"GEMM {SHAPE_NAMES[s]} M={M}: est. cycles <= {TARGET_FLOOR_RATIO} x floor",
                            f"{r['est_over_floor']:.2f}", verdict(r["est_over_floor"] <= TARGET_FLOOR_RATIO)])
    if len(vlens) > 1:
        for s in shapes:
            K, N = s
            rs = [get("rvv", "packed", v, 1, K, N) for v in vlens]
            if all(rs):
                ratios = [a["insns"] / b["insns"] for a, b in zip(rs, rs[1:])]
                trs.append([f"GEMV {SHAPE_NAMES[s]}: ~2x fewer instructions per VLEN doubling ({'->'.join(map(str, vlens))})",
                            ", ".join(f"{x:.2f}" for x in ratios), verdict(all(x >= 1.8 for x in ratios))])
    md.append(table(["target", "measured", "verdict"], trs) + "\n")
    md.append("A GEMV ratio >= 1.8 per VLEN doubling counts as \"~2x\".\n")

    with open(os.path.join(res, "results.md"), "w") as f:
        f.write("\n".join(md))

    plot(res, rows, get, shapes, Ms)


def plot(res, rows, get, shapes, Ms):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "rvv"  # deterministic output
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2))
    ax = axes[0]
    impls = [("rvv", "packed"), ("rvv_zvfbf", "packed"), ("rvv", "rowmajor"), ("scalar", "packed"), ("aten", "rowmajor")]
    width = 0.8 / (len(impls) + 1)
    for i, (impl, fm) in enumerate(impls):
        xs, ys = [], []
        for j, s in enumerate(shapes):
            r = get(impl, fm, 256, 1, *s)
            if r:
                xs.append(j + i * width)
                ys.append(r["insns_per_weight"])
        ax.bar(xs, ys, width, label=IMPL_LABEL[(impl, fm)])
    xs = [j + len(impls) * width for j in range(len(shapes))]
    ax.bar(xs, [floors(256, 1, *s)["lb_vinsns_widen"] / (s[0] * s[1]) for s in shapes], width,
           label="vector-instruction lower bound (widening)", color="black")
    ax.set_yscale("log")
    ax.set_xticks([j + 0.4 for j in range(len(shapes))])
    ax.set_xticklabels([SHAPE_NAMES[s].replace(" ", "\n", 1) for s in shapes], fontsize=8)
    ax.axhline(TARGET_GEMV_INSN_PER_W, color="grey", ls="--", lw=1)
    ax.text(-0.25, TARGET_GEMV_INSN_PER_W * 1.12, f"target {TARGET_GEMV_INSN_PER_W}", fontsize=8, ha="left",
            color="grey")
    ax.set_ylabel("executed instructions per weight element")
    ax.set_title("Decode (M=1), VLEN 256")
    ax.set_ylim(top=ax.get_ylim()[1] * 30)  # room for the legend above the bars
    ax.legend(fontsize=7, loc="upper left", ncol=2)

    ax = axes[1]
    styles = {("rvv", "packed"): "o-", ("rvv_zvfbf", "packed"): "s-", ("scalar", "packed"): "^--", ("aten", "rowmajor"): "v:"}
    s = (1536, 17920) if (1536, 17920) in shapes else shapes[0]
    for (impl, fm), st in styles.items():
        xs, ys = [], []
        for M in Ms:
            r = get(impl, fm, 256, M, *s)
            if r:
                xs.append(M)
                ys.append(r["insns_per_mac"])
        if xs:
            ax.plot(xs, ys, st, label=IMPL_LABEL[(impl, fm)])
    ax.set_xscale("log", base=2)
    ax.set_xticks(Ms)
    ax.set_xticklabels([str(m) for m in Ms])
    ax.set_yscale("log")
    ax.axhline(TARGET_GEMM_INSN_PER_MAC, color="grey", ls="--", lw=1)
    ax.text(Ms[-1], TARGET_GEMM_INSN_PER_MAC * 1.12, f"target {TARGET_GEMM_INSN_PER_MAC} (M=4..16)", fontsize=8,
            ha="right", color="grey")
    ax.set_xlabel("M (rows of X)")
    ax.set_ylabel("executed instructions per multiply-add")
    ax.set_title(f"{SHAPE_NAMES[s]}, VLEN 256")
    ax.legend(fontsize=7)
    fig.suptitle("BF16 Linear on RVV: executed riscv64 instructions (QEMU + rvvcount plugin; not time)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(res, "instructions.png"), dpi=110, metadata={"Software": None})
    plt.close(fig)


if __name__ == "__main__":
    main()
