#!/usr/bin/env python3
"""Turns bench/results/raw/*.json (written by bench/run.sh) into results.csv, results.md
and instructions.png. Deterministic: the same raw files give byte-identical outputs.

Usage: bench/report.py [RESULTS_DIR]   (default: bench/results)

The cycle model and the floors are described in bench/README.md. The K1's constants
(clock, DLEN, caches, DRAM bandwidth) and the model's scalar CPI come from the project's
policy module, python/rvv_inductor/policy.py (plain Python, imported without torch); the
targets are here.

A row is one (impl, isa, format, layout, VLEN, M, K, N):
  impl    rvv | scalar | aten | llamacpp
  isa     the instruction-set variant that ran: rvv (plain V), rvv_zvfh, rvv_zvfbf,
          scalar; aten: default (torch's DEFAULT CPU capability); llamacpp: rvv or scalar
          (what QEMU offered; the ggml CPU variant that loaded is in path_used)
  format  the weight format: bf16, int8 (one scale per output channel), int8-g128,
          int4-g32/g64/g128, int4-g64-zp (zero points), the GGUF block formats q4_1, q5_0,
          q5_1, iq4_nl, iq4_xs, q2_k, q3_k, q4_k, q5_k, q6_k (at the file's bytes); llama.cpp
          q8_0, q4_0, the same block formats, f16, bf16
  layout  packed | rowmajor
  act     what the multiply-adds take X as: bf16 (the project's kernels widen it to FP32 or
          FP16 inside), int8 (quantized per call: linear_bench --x-int8; llama.cpp's Q8_0
          for its Q8_0/Q4_0/Q5_0/IQ4_NL weights, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants
          and IQ4_XS), f16 / bf16
          (llama.cpp's F16/BF16)
"""
import csv
import glob
import json
import os
import sys

# The K1's numbers and the model's CPI: the project's policy module (torch-free).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from rvv_inductor import policy as k1  # noqa: E402

DLEN = k1.K1_DLEN_BITS  # datapath width of the SpacemiT X60 (K1), bits
CPI_SCALAR = k1.CPI_SCALAR  # in-order; dual issue ignored (see README)
# The DRAM bandwidth of the cycle model, bytes/s: a parameter (RVV_BENCH_DRAM_BYTES_PER_S), by
# default the K1's LPDDR4X peak, so that cyc_est and the floors are per-kernel ceilings. The
# per-token section also gives the calibrated bandwidth programs reach on the board
# (policy.K1_DRAM_ACHIEVED_BYTES_PER_S, python/rvv_inductor/demo/calibration.py).
DRAM_BYTES_PER_S = float(os.environ.get("RVV_BENCH_DRAM_BYTES_PER_S") or k1.K1_DRAM_BYTES_PER_S)
DRAM_BYTES_PER_CYCLE = DRAM_BYTES_PER_S / k1.K1_CLOCK_HZ  # memory bandwidth / core clock

TARGET_GEMV_INSN_PER_W = 0.15
TARGET_GEMV_READ_RATIO = 1.05
TARGET_GEMM_INSN_PER_MAC = 0.12
TARGET_FLOOR_RATIO = 1.2
# Weight-only int8/int4 (issue 12), decode at VLEN 256, one thread.
TARGET_CYC_PER_W = {"int4": 0.50, "int8": 0.60}  # estimated in-order cycles per weight
TARGET_QUANT_READ_RATIO = 1.05  # bytes read / packed weight bytes (scales included)
TARGET_VS_LLAMACPP = 4.0  # >= this many times fewer instructions per weight than llama.cpp
LLAMACPP_PEER = {"int4": "q4_0", "int8": "q8_0"}
# The GGUF block formats (stored at the file's bytes; llama.cpp's peer is the same type).
BLOCK_FORMATS = ["q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
LLAMACPP_PEER.update({f: f for f in BLOCK_FORMATS})
# The file's bytes per block of each (bytes, weights), for the tables' notes.
BLOCK_BYTES = {"q4_1": (20, 32), "q5_0": (22, 32), "q5_1": (24, 32), "iq4_nl": (18, 32), "iq4_xs": (136, 256),
               "q2_k": (84, 256), "q3_k": (110, 256), "q4_k": (144, 256), "q5_k": (176, 256), "q6_k": (210, 256)}
# Their decode targets (VLEN 256, rvv_zvfh, one thread): est. cycles / weight, instructions /
# weight, all DRAM reads / file bytes, and how many times fewer instructions than llama.cpp
# (issue 29 for Q4_K/Q6_K; issue 43 for the formats it added).
TARGET_BLOCK = {"q4_k": {"cyc": 0.60, "insn": 0.25, "dram": 1.03, "vs_llama": 3.0},
                "q6_k": {"cyc": 0.70, "vs_llama": 3.0}}
TARGET_BLOCK.update({f: {"dram": 1.03, "vs_llama": 3.0} for f in ("q5_0", "q5_1", "iq4_nl", "iq4_xs", "q2_k", "q3_k")})
TARGET_BLOCK_ISA = "rvv_zvfh"
# IQ4_NL's table lookup: its decode GEMV at most this many times Q4_0's (int4-g32, FP16
# scales: the layout a GGUF Q4_0 loads into) estimated cycles per weight (issue 43).
TARGET_IQ4NL_VS_Q4_0 = 1.3

SHAPE_NAMES = {
    (1536, 2048): "q_proj+k+v 1536->2048",
    (1536, 1536): "o_proj 1536->1536",
    (1536, 17920): "gate+up 1536->17920",
    (8960, 1536): "down 8960->1536",
    (1536, 151936): "lm_head 1536->151936",
}
SHAPE_ORDER = list(SHAPE_NAMES)
# How often each shape runs per decode token of Qwen2.5-1.5B: 28 decoder layers, one lm_head.
QWEN15_LAYERS = 28
SHAPE_PER_TOKEN = {(1536, 2048): QWEN15_LAYERS, (1536, 1536): QWEN15_LAYERS, (1536, 17920): QWEN15_LAYERS,
                   (8960, 1536): QWEN15_LAYERS, (1536, 151936): 1}
QUANT_FORMATS = ["int8", "int8-g128", "int4-g32", "int4-g64", "int4-g128", "int4-g64-zp"] + BLOCK_FORMATS
LLAMA_FORMATS = ["q8_0", "q4_0", "f16", "bf16"] + BLOCK_FORMATS
ISA_NAME = {"rvv": "V", "rvv_zvfh": "Zvfh", "rvv_zvfbf": "Zvfbfwma", "scalar": "scalar", "default": "default"}

COUNTERS = [
    "insns", "vector_insns", "scalar", "scalar_mem", "vsetvl", "vload", "vstore", "vfma", "vwiden", "varith",
    "vregops", "vbeats", "reads", "writes", "bytes_read", "bytes_written", "vbytes_read", "vbytes_written",
    "l1_misses", "l2_misses", "dram_read_bytes", "dram_write_bytes", "vtype_unknown", "vtype_mismatch",
]
TAGGED = ["weights", "input", "output", "scratch", "other"]
# Program-reported numbers that are extrapolated like counters when a row is sampled.
EXTRA_LINEAR = ["wbytes", "percall_insns"]


def family(fmt):
    """int8 / int4 / bf16 / a llama.cpp format / a GGUF block format (itself)."""
    return fmt.split("-")[0]


def is_quant(fmt):
    """The project's quantized weights: int8, int4 or a GGUF block format."""
    return family(fmt) in ("int8", "int4") or fmt in BLOCK_FORMATS


def label(impl, isa, fmt, layout, path_used="", act=None):
    if impl == "llamacpp":
        variant = path_used.replace("libggml-cpu-", "").replace(".so", "") or isa
        return f"llama.cpp {fmt.upper()} ({variant})"
    if impl == "aten":
        return "ATen F.linear (torch 2.14.1)"
    if impl == "scalar":
        return "scalar reference" + ("" if fmt == "bf16" else f" {fmt}")
    lay = "packed" if layout == "packed" else "row-major"
    if fmt == "bf16":
        return f"RVV {lay} ({'widening' if isa == 'rvv' else ISA_NAME.get(isa, isa)})"
    return f"RVV {fmt} ({ISA_NAME.get(isa, isa)}{', int8 x' if act == 'int8' else ''})"


# ---------------------------------------------------------------- loading


def flatten(region):
    row = {k: float(region.get(k, 0)) for k in COUNTERS}
    for t in TAGGED:
        row["read_" + t] = float(region.get("bytes_read_by_tag", {}).get(t, 0))
        row["dram_" + t] = float(region.get("dram_read_bytes_by_tag", {}).get(t, 0))
    return row


def default_act(impl, fmt):
    if impl == "llamacpp":
        return "int8" if fmt.startswith(("q", "iq")) else fmt
    return "bf16"


def job_key_fields(job):
    """(impl, isa, format, layout, act). Raw files of the earlier run.sh (impl rvv |
    rvv_zvfbf | scalar | aten, format = layout, BF16 only) are read too."""
    if "layout" in job:
        return (job["impl"], job["isa"], job["format"], job["layout"],
                job.get("act") or default_act(job["impl"], job["format"]))
    impl = job["impl"]
    isa = {"aten": "default"}.get(impl, impl)
    return ("rvv" if impl == "rvv_zvfbf" else impl), isa, "bf16", job["format"], "bf16"


def load(raw_dir):
    """Returns ({key: {"full"|"sample1"|"sample2": (N, counters)}}, {key: job}) with
    key = (impl, isa, format, layout, act, vlen, M, K, N_full)."""
    groups, jobs = {}, {}
    for path in sorted(glob.glob(os.path.join(raw_dir, "*.json"))):
        with open(path) as f:
            d = json.load(f)
        job, plugin = d["job"], d["plugin"]
        progs = {p.get("region", 1): p for p in d["programs"]}
        impl, isa, fmt, layout, act = job_key_fields(job)
        for run in job["runs"]:
            reg = plugin["regions"].get(str(run["region"]))
            prog = progs.get(run["region"])
            if reg is None or prog is None:
                sys.exit(f"report.py: {path}: region {run['region']} missing (did the program fail?)")
            if prog.get("check_failures", 0):
                sys.exit(f"report.py: {path}: the program's output check failed; numbers would be meaningless")
            if reg.get("calls") != 1:
                sys.exit(f"report.py: {path}: region {run['region']} ran {reg.get('calls')} times, expected 1")
            key = (impl, isa, fmt, layout, act, job["vlen"], run["M"], run["K"], run["N_full"])
            row = flatten(reg)
            row["_path_used"] = prog.get("path_used", "")
            row["_kernel"] = prog.get("kernel", "")
            N, K = run["N"], run["K"]
            row["wbytes"] = float(prog.get("packed_bytes", 0)) if fmt != "bf16" else 2.0 * N * K
            if fmt != "bf16" and not row["wbytes"]:
                sys.exit(f"report.py: {path}: a {fmt} row without packed_bytes")
            pc = prog.get("per_call_region")
            row["percall_insns"] = float(plugin["regions"].get(str(pc), {}).get("insns", 0)) if pc else 0.0
            groups.setdefault(key, {})[run["role"]] = (N, row)
            jobs[key] = dict(job, program=prog)
    return groups, jobs


def combine(samples, n_full):
    """Full run, or the two-point linear extrapolation in N of every counter."""
    if "full" in samples:
        return dict(samples["full"][1]), False
    if "sample1" not in samples or "sample2" not in samples:
        sys.exit(f"report.py: a sampled row (N = {n_full}) has only {', '.join(samples)}: an interrupted run? "
                 "finish it with bench/run.sh --resume")
    (n1, a), (n2, b) = samples["sample1"], samples["sample2"]
    out = {}
    for k, va in a.items():
        if k.startswith("_"):
            out[k] = va
            continue
        vb = b[k]
        out[k] = va + (vb - va) * (n_full - n1) / (n2 - n1)
    return out, True


# ---------------------------------------------------------------- derived metrics


def floors(vlen, M, K, N):
    """Ideal numbers for the BF16 widening (software BF16) path and for Zvfbfwma.

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
        "floor_widen_datapath": dp_widen,
        "floor_widen_cycles": max(dp_widen, mem),
        "floor_wma_cycles": max(dp_wma, mem),
        "lb_vinsns_widen": (3 + M) * groups,
        "lb_vinsns_wma": (1 + M) * groups,
    }


def derive(key, c, sampled):
    impl, isa, fmt, layout, act, vlen, M, K, N = key
    w_elems = N * K
    wbytes = c["wbytes"]
    macs = M * N * K
    r = {
        "impl": impl, "isa": isa, "format": fmt, "layout": layout, "act": act, "vlen": vlen, "M": M, "K": K, "N": N,
        "sampled": int(sampled), "path_used": c["_path_used"], "kernel": c["_kernel"], "weight_bytes": wbytes,
        "weight_bytes_per_elem": wbytes / w_elems, "macs": macs,
    }
    for k in COUNTERS:
        r[k] = c[k]
    for t in TAGGED:
        r["read_" + t] = c["read_" + t]
        r["dram_read_" + t] = c["dram_" + t]
    r["percall_insns"] = c["percall_insns"]
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
    r["cyc_per_weight"] = r["cyc_est"] / w_elems
    r["cyc_per_mac"] = r["cyc_est"] / macs
    # Optimistic bound: scalar issue fully hidden behind the vector datapath (or vice versa).
    r["cyc_overlap"] = max(scalar_like * CPI_SCALAR, c["vbeats"], mem)
    # Streaming the weight once at the modelled bandwidth: the floor of any format.
    r["floor_mem_cycles"] = wbytes / DRAM_BYTES_PER_CYCLE
    # The BF16 datapath floors apply to BF16 weights only.
    f = floors(vlen if vlen else 256, M, K, N) if fmt == "bf16" else {k: "" for k in floors(256, 1, 1, 1)}
    r.update(f)
    r["est_over_floor"] = r["cyc_est"] / f["floor_widen_cycles"] if fmt == "bf16" else ""
    r["overlap_over_floor"] = r["cyc_overlap"] / f["floor_widen_cycles"] if fmt == "bf16" else ""
    return r


class Results:
    """All rows, indexed; get() treats scalar rows (no vector unit) as VLEN-independent."""

    def __init__(self, rows, jobs):
        self.rows = rows
        self.jobs = jobs
        self.idx = {tuple(r[k] for k in ("impl", "isa", "format", "layout", "act", "vlen", "M", "K", "N")): r
                    for r in rows}
        self.shapes = [s for s in SHAPE_ORDER if any((r["K"], r["N"]) == s for r in rows)]
        self.Ms = sorted({r["M"] for r in rows})

    def get(self, impl, isa, fmt, layout, vlen, M, K, N, act=None):
        act = act or default_act(impl, fmt)
        return self.idx.get((impl, isa, fmt, layout, act, 0 if isa == "scalar" else vlen, M, K, N))

    def quant_isas(self):
        """The vector variants that have int8/int4 rows, plain V first."""
        have = {r["isa"] for r in self.rows if r["impl"] == "rvv" and is_quant(r["format"])}
        return [i for i in ("rvv", "rvv_zvfh", "rvv_zvfbf") if i in have]

    def quant_formats(self, isa="rvv", act="bf16"):
        return [f for f in QUANT_FORMATS
                if any(r["format"] == f and r["isa"] == isa and r["act"] == act for r in self.rows)]

    def quant_variants(self):
        """(isa, act) of the project's int8/int4 rows: plain V, Zvfh, then int8 activations."""
        have = {(r["isa"], r["act"]) for r in self.rows if r["impl"] == "rvv" and is_quant(r["format"])}
        order = [(i, "bf16") for i in ("rvv", "rvv_zvfh", "rvv_zvfbf")] + [(i, "int8") for i in ("rvv", "rvv_zvfh")]
        return [v for v in order if v in have]

    def llama(self, fmt, M, K, N, isa="rvv"):
        return self.get("llamacpp", isa, fmt, "rowmajor", 256, M, K, N)


# ---------------------------------------------------------------- formatting


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


def star(r):
    return "*" if r["sampled"] else ""


def verdict(ok):
    return "met" if ok else "**missed**"


# ---------------------------------------------------------------- report sections


def write_csv(res, R):
    fields = list(R.rows[0].keys())
    with open(os.path.join(res, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in R.rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def sources(R):
    """The source revisions the raw files name (run.sh records one per run)."""
    revs = {}
    for job in R.jobs.values():
        rev = job.get("source", "not recorded")
        revs[rev] = revs.get(rev, 0) + 1
    return ", ".join(f"`{r}` ({n} rows)" if len(revs) > 1 else f"`{r}`" for r, n in sorted(revs.items()))


def section_intro(R):
    clock_ghz = k1.K1_CLOCK_HZ / 1e9
    return [
        "# RVV Linear (BF16, INT8, INT4 weights): instruction-count benchmark\n",
        "Generated by `bench/run.sh` (raw data in `raw/`, every row in `results.csv`); method, "
        "cycle model and caveats in `bench/README.md`. All numbers are counts of executed riscv64 "
        "instructions and bytes for ONE call (after a warm-up call), single thread, from QEMU user "
        "mode with the `rvvcount` plugin; emulation wall time is not a measure of anything. "
        "Rows marked * were extrapolated linearly in N from two narrower runs. "
        f"Programs built from: {sources(R)}.\n",
        f"Cycle estimate (in-order, K1-like): scalar instructions x CPI {CPI_SCALAR:g} + vector "
        f"datapath beats (each vector instruction max(1, EMUL x VLEN/{DLEN})), overlapped with DRAM "
        f"traffic at {DRAM_BYTES_PER_CYCLE:.2f} B/cycle ({k1.K1_DRAM_BYTES_PER_S / 1e9:.2f} GB/s at "
        f"{clock_ghz:g} GHz) from the cache model ({k1.K1_L1D_BYTES // 1024} KiB L1D {k1.K1_L1D_WAYS}-way + "
        f"{k1.K1_L2_BYTES // 1024} KiB L2 {k1.K1_L2_WAYS}-way, {k1.K1_CACHE_LINE_BYTES} B lines, LRU, cold at "
        "the call, no prefetch). BF16 floor = the widening path's datapath floor: per VLEN/4 weights, "
        "vle16 m4 + vzext m8 + vsll m8 + M x vfmacc m8 (or the weight streaming time, if larger).\n",
    ]


def section_decode_bf16(R):
    md = ["## Decode GEMV (M = 1), BF16 weights, VLEN 256\n"]
    hdr = ["shape", "implementation", "instructions", "vector", "instr / weight", "bytes read",
           "read / W bytes", "DRAM W / W bytes", "reg-group ops", "est. cycles", "est / floor"]
    impls = [("rvv", "rvv", "packed"), ("rvv", "rvv", "rowmajor"), ("rvv", "rvv_zvfbf", "packed"),
             ("rvv", "rvv_zvfbf", "rowmajor"), ("scalar", "scalar", "packed"), ("aten", "default", "rowmajor"),
             ("llamacpp", "rvv", "rowmajor")]
    trs = []
    for s in R.shapes:
        K, N = s
        for impl, isa, lay in impls:
            r = R.get(impl, isa, "bf16", lay, 256, 1, K, N)
            if not r:
                continue
            trs.append([SHAPE_NAMES[s], label(impl, isa, "bf16", lay, r["path_used"]) + star(r), fmt_n(r["insns"]),
                        fmt_n(r["vector_insns"]), f"{r['insns_per_weight']:.3f}", fmt_b(r["bytes_read"]),
                        f"{r['bytes_read_per_wbyte']:.3f}", f"{r['dram_w_per_wbyte']:.3f}", fmt_n(r["vregops"]),
                        fmt_n(r["cyc_est"]), f"{r['est_over_floor']:.2f}"])
        f = floors(256, 1, K, N)
        trs.append([SHAPE_NAMES[s], "ideal (widening / Zvfbfwma)",
                    f"{fmt_n(f['lb_vinsns_widen'])} / {fmt_n(f['lb_vinsns_wma'])} (vector LB)", "",
                    f"{f['lb_vinsns_widen'] / (K * N):.4f} / {f['lb_vinsns_wma'] / (K * N):.4f}",
                    fmt_b(2 * K * N), "1.000", "1.000", "",
                    f"{fmt_n(f['floor_widen_cycles'])} / {fmt_n(f['floor_wma_cycles'])}", "1.00"])
    md.append(table(hdr, trs) + "\n")
    return md


def arch_summary(arch):
    """'rv64i2p1_m2p0_..._v1p0_..._zvl128b1p0' -> 'rv64imafdcv (zvl128b; no Zfh, no Zvfh)'."""
    import re

    parts = arch.split("_")
    xlen = re.match(r"rv\d+", parts[0]).group(0) if re.match(r"rv\d+", parts[0]) else ""
    parts[0] = parts[0][len(xlen):]
    base = xlen + "".join(re.sub(r"\d.*", "", p) for p in parts if len(re.sub(r"\d.*", "", p)) == 1)
    exts = [re.sub(r"\d+p\d+$", "", p) for p in parts if p.startswith("z")]
    zvl = max((e for e in exts if e.startswith("zvl")), key=lambda e: int(e[3:-1]), default="")
    missing = [e for e in ("zfh", "zvfh") if e not in exts]
    notes = ([zvl] if zvl else []) + [f"no {e.capitalize()}" for e in missing]
    return f"`{base}`" + (f" ({'; '.join(notes)})" if notes else "")


def llamacpp_note(R):
    """What ggml loaded, and what Debian's build lacks, from the llama.cpp rows' programs."""
    keys = [k for k in R.jobs if k[0] == "llamacpp"]
    if not keys:
        return []
    seen = {}
    for k in sorted(keys):
        job = R.jobs[k]
        p = job["program"]
        seen.setdefault((k[1], p.get("path_used", "?")), (p, job.get("ggml_cpu_arch", "")))
    lines = []
    for (isa, so), (p, arch) in sorted(seen.items()):
        feats = ", ".join(f"{a}={b}" for a, b in sorted(p.get("ggml_features", {}).items()))
        lines.append(f"QEMU CPU {'with V' if isa == 'rvv' else 'without V'}: ggml's registry loaded `{so}` "
                     f"(features {feats or '-'}; extra buffer types: {', '.join(p.get('ggml_extra_bufts', [])) or 'none'})"
                     + (f"; its ELF arch attribute is {arch_summary(arch)}" if arch else ""))
    block = sorted({k[2] for k in keys} & set(BLOCK_FORMATS), key=BLOCK_FORMATS.index)
    return [
        "llama.cpp is Debian forky's libggml 0.27.0: one `ggml_mul_mat` (W [N, K] in the weight format, X F32 "
        "[M, K] as in its decode) on the CPU backend with one thread, the region around `ggml_backend_graph_compute` "
        "(graph launch, conversion of X to Q8_0 / F16 / BF16 inside the MUL_MAT, the dot products). "
        + (f"Its {'/'.join(f.upper() for f in block)} weights are a random FP32 W quantized by ggml's own "
           f"quantizer (`ggml_quantize_chunk`, no importance matrix); X becomes {vec_dot_note(block)} (their "
           "vec_dot types) and the dot products are `ggml_vec_dot_*_q8_*`. " if block else "")
        + " ".join(f"{x}." for x in lines)
        + " **Debian builds the RVV variant for plain rv64gcv without Zvfh, so upstream's repacked GEMV/GEMM "
        "kernels for RVV (the CPU_REPACK buffer type, compiled only with Zvfh) are not in it**: the weights stay "
        "in the plain Q4_0/Q8_0 block layout and go through `ggml_vec_dot_q*_q8_0`; F16 and BF16 have no vector "
        "kernel there.\n"
    ]


def vec_dot_note(fmts):
    """What llama.cpp quantizes X to for these block formats: "Q8_1 for Q4_1, Q8_K for Q4_K/Q6_K"."""
    vd = {"q5_0": "Q8_0", "iq4_nl": "Q8_0", "q4_1": "Q8_1", "q5_1": "Q8_1"}
    by = {}
    for f in fmts:
        by.setdefault(vd.get(f, "Q8_K"), []).append(f.upper())
    return ", ".join(f"{t} for {'/'.join(fs)}" for t, fs in sorted(by.items()))


def block_bytes_note(R):
    """The file's bytes per block of the block formats present: "Q4_1 20 B per 32 weights, ..."."""
    fmts = [f for f in BLOCK_FORMATS if any(r["format"] == f for r in R.rows)]
    return ", ".join(f"{f.upper()} {BLOCK_BYTES[f][0]} B per {BLOCK_BYTES[f][1]} weights" for f in fmts)


def section_decode_quant(R):
    isas = R.quant_isas()
    have_llama = any(r["impl"] == "llamacpp" for r in R.rows)
    if not isas and not have_llama:
        return []
    md = ["## Decode GEMV (M = 1), INT8 / INT4 weights and llama.cpp, VLEN 256\n"]
    md.append("W bytes = the packed weight incl. scales (and zero points); for llama.cpp the ggml tensor "
              "(blocks of 32 with an FP16 scale: Q8_0 34 B, Q4_0 18 B per 32 weights). cycles / weight = the "
              "in-order estimate (DLEN 128) per weight element; DRAM floor = W bytes at the modelled bandwidth; "
              "read / W bytes = all bytes the call read (W, X, scales, stack) over W bytes, of which W = the reads "
              "that fell in the weight buffer. "
              "llama.cpp / this = llama.cpp's instructions per weight on the same family (Q4_0 for int4, "
              "Q8_0 for int8) over this row's.\n")
    if any(r["format"] in BLOCK_FORMATS for r in R.rows):
        md.append("The GGUF block formats keep the file's bytes in both implementations "
                  f"({block_bytes_note(R)}); their llama.cpp peer is the same type.\n")
    md += llamacpp_note(R)
    hdr = ["shape", "implementation", "W bytes / weight", "instructions", "instr / weight", "cycles / weight",
           "DRAM floor / weight", "read / W bytes", "of which W", "DRAM W / W bytes", "llama.cpp / this"]
    trs = []
    for s in R.shapes:
        K, N = s
        cands = []
        for isa, act in R.quant_variants():
            for fm in QUANT_FORMATS:
                cands.append(("rvv", isa, fm, act))
        for fm in QUANT_FORMATS:
            cands.append(("scalar", "scalar", fm, None))
        for fm in LLAMA_FORMATS:
            cands.append(("llamacpp", "rvv", fm, None))
        cands.append(("llamacpp", "scalar", "q4_0", None))
        for impl, isa, fm, act in cands:
            lay = "rowmajor" if impl == "llamacpp" else "packed"
            r = R.get(impl, isa, fm, lay, 256, 1, K, N, act)
            if not r:
                continue
            peer = R.llama(LLAMACPP_PEER.get(family(fm), ""), 1, K, N) if impl != "llamacpp" else None
            trs.append([SHAPE_NAMES[s], label(impl, isa, fm, lay, r["path_used"], r["act"]) + star(r),
                        f"{r['weight_bytes_per_elem']:.3f}", fmt_n(r["insns"]), f"{r['insns_per_weight']:.3f}",
                        f"{r['cyc_per_weight']:.3f}", f"{r['floor_mem_cycles'] / (K * N):.3f}",
                        f"{r['bytes_read_per_wbyte']:.3f}", f"{r['read_weights'] / r['weight_bytes']:.3f}",
                        f"{r['dram_w_per_wbyte']:.3f}",
                        f"{peer['insns_per_weight'] / r['insns_per_weight']:.1f}x" if peer else "-"])
    md.append(table(hdr, trs) + "\n")
    ll = [r for r in R.rows if r["impl"] == "llamacpp" and r["percall_insns"] and r["M"] == 1 and r["isa"] == "rvv"]
    if ll:
        lo = min(r["percall_insns"] for r in ll)
        hi = max(r["percall_insns"] for r in ll)
        md.append(f"Of llama.cpp's instructions, the per-call part (graph launch + converting X + one row, "
                  f"measured as the same graph on a 1-row view of W) is {fmt_n(lo)}-{fmt_n(hi)} per call at M = 1.\n")
    return md


def section_per_token(R):
    """Linear work of one Qwen2.5-1.5B decode token (M = 1), summed over its 28 layers and
    lm_head, per implementation and format that has all five shapes."""
    variants = [("rvv", "rvv", "bf16", "packed", None), ("rvv", "rvv_zvfbf", "bf16", "packed", None)]
    variants += [("rvv", isa, f, "packed", act) for isa, act in R.quant_variants() for f in R.quant_formats(isa, act)]
    variants += [("scalar", "scalar", "bf16", "packed", None), ("aten", "default", "bf16", "rowmajor", None)]
    variants += [("llamacpp", "rvv", f, "rowmajor", None) for f in LLAMA_FORMATS]
    variants += [("llamacpp", "scalar", "q4_0", "rowmajor", None)]
    trs = []
    for impl, isa, fm, lay, act in variants:
        rs = [(R.get(impl, isa, fm, lay, 256, 1, *s, act=act), SHAPE_PER_TOKEN[s]) for s in SHAPE_ORDER]
        if not all(r for r, _ in rs):
            continue
        tot = {k: sum(r[k] * n for r, n in rs) for k in ("insns", "cyc_est", "weight_bytes", "dram_read_bytes")}
        trs.append([label(impl, isa, fm, lay, rs[0][0]["path_used"], rs[0][0]["act"]), fmt_b(tot["weight_bytes"]),
                    fmt_n(tot["insns"]), fmt_n(tot["cyc_est"]), f"{tot['cyc_est'] / k1.K1_CLOCK_HZ * 1e3:.0f}",
                    f"{tot['dram_read_bytes'] / DRAM_BYTES_PER_S * 1e3:.0f}",
                    f"{tot['dram_read_bytes'] / k1.K1_DRAM_ACHIEVED_BYTES_PER_S * 1e3:.0f}"])
    if not trs:
        return []
    return ["## Per decode token at Qwen2.5-1.5B dimensions (M = 1, VLEN 256)\n",
            f"The Linear layers of one token: {QWEN15_LAYERS} x (q+k+v, o, gate+up, down) + lm_head, summed from "
            "the rows above (only implementations with all five shapes). Estimated cycles are the in-order "
            f"model on ONE core; ms at {k1.K1_CLOCK_HZ / 1e9:g} GHz is that estimate, not a measurement. The DRAM "
            f"columns are the modelled DRAM reads at {DRAM_BYTES_PER_S / 1e9:.2f} GB/s (the peak unless "
            "RVV_BENCH_DRAM_BYTES_PER_S says otherwise: a ceiling) and at the "
            f"{k1.K1_DRAM_ACHIEVED_BYTES_PER_S / 1e9:.2f} GB/s that programs measured on K1 boards reach "
            "(calibrated, python/rvv_inductor/demo/calibration.py): the floor however many cores share the work.\n",
            table(["implementation", "weight bytes", "instructions", "est. cycles (1 core)", "est. ms (1 core)",
                   f"DRAM-bound ms at {DRAM_BYTES_PER_S / 1e9:.2f} GB/s",
                   f"DRAM-bound ms at {k1.K1_DRAM_ACHIEVED_BYTES_PER_S / 1e9:.2f} GB/s (calibrated)"], trs) + "\n"]


def section_gemm_quant(R):
    isas = R.quant_isas()
    Ms = [m for m in R.Ms if 1 < m <= 16]
    if not Ms or not (isas or any(r["impl"] == "llamacpp" and r["M"] > 1 for r in R.rows)):
        return []
    md = ["## Batched (M = 2..16), INT8 / INT4 weights and llama.cpp, VLEN 256\n"]
    md.append("Each cell: instructions per multiply-add / estimated cycles per multiply-add (in-order, DLEN 128); "
              "the call reads W once for all M rows, so cycles per weight are M times the second number.\n")
    for isa in isas or ["rvv"]:
        fmts = R.quant_formats(isa) if isas else []
        lls = [f for f in ["q8_0", "q4_0"] + BLOCK_FORMATS if any(r["impl"] == "llamacpp" and r["format"] == f and r["M"] > 1
                                                 for r in R.rows)]
        if not fmts and not lls:
            continue
        if isas:
            md.append(f"### {ISA_NAME[isa]} path (`--path {isa}`)\n")
        hdr = ["shape", "M"] + fmts + [f"llama.cpp {f.upper()}" for f in lls]
        trs = []
        for s in R.shapes:
            K, N = s
            for M in Ms:
                cells = []
                for f in fmts:
                    r = R.get("rvv", isa, f, "packed", 256, M, K, N)
                    cells.append(f"{r['insns_per_mac']:.3f} / {r['cyc_per_mac']:.3f}{star(r)}" if r else "-")
                for f in lls:
                    r = R.llama(f, M, K, N)
                    cells.append(f"{r['insns_per_mac']:.3f} / {r['cyc_per_mac']:.3f}{star(r)}" if r else "-")
                if any(c != "-" for c in cells):
                    trs.append([SHAPE_NAMES[s], M] + cells)
        md.append(table(hdr, trs) + "\n")
    return md


def section_prefill_bf16(R):
    md = ["## Prefill / batched GEMM (M > 1), BF16 weights, VLEN 256, packed\n"]
    md.append("Instructions per multiply-add for each implementation; the RVV widening kernel's modelled DRAM "
              "weight traffic (LLC misses falling in W) and total DRAM reads relative to the BF16 weight bytes; "
              "cycle estimate relative to the floor, also with scalar issue fully overlapped with the vector "
              "datapath (an optimistic bound); instruction ratio of ATen and the scalar reference to the RVV kernel.\n")
    hdr = ["shape", "M", "RVV instr/MAC", "Zvfbfwma instr/MAC", "scalar instr/MAC", "ATen instr/MAC",
           "RVV instructions", "DRAM W / W", "DRAM all / W", "est / floor", "(overlap) / floor", "ATen / RVV",
           "scalar / RVV"]
    trs = []

    def ipm(x):
        return (f"{x['insns_per_mac']:.4g}" + star(x)) if x else "-"

    for s in R.shapes:
        K, N = s
        for M in R.Ms:
            if M == 1:
                continue
            r = R.get("rvv", "rvv", "bf16", "packed", 256, M, K, N)
            if not r:
                continue
            z = R.get("rvv", "rvv_zvfbf", "bf16", "packed", 256, M, K, N)
            sc = R.get("scalar", "scalar", "bf16", "packed", 256, M, K, N)
            at = R.get("aten", "default", "bf16", "rowmajor", 256, M, K, N)
            trs.append([SHAPE_NAMES[s], M, ipm(r), ipm(z), ipm(sc), ipm(at), fmt_n(r["insns"]) + star(r),
                        f"{r['dram_w_per_wbyte']:.2f}", f"{r['dram_per_wbyte']:.2f}", f"{r['est_over_floor']:.2f}",
                        f"{r['overlap_over_floor']:.2f}", f"{at['insns'] / r['insns']:.0f}x" if at else "-",
                        f"{sc['insns'] / r['insns']:.0f}x" if sc else "-"])
    md.append(table(hdr, trs) + "\n")
    return md


def bf16_vlens(R):
    return sorted({r["vlen"] for r in R.rows if r["impl"] == "rvv" and r["isa"] == "rvv" and r["format"] == "bf16"
                   and r["layout"] == "packed"})


def section_vlen_scaling(R):
    vlens = bf16_vlens(R)
    if len(vlens) < 2:
        return []
    md = ["## VLEN scaling (RVV widening kernel, BF16 packed weights)\n"]
    md.append("Instructions at each VLEN and the ratio to the next smaller VLEN (2.0 = perfect scaling); "
              "est / floor at each VLEN (DLEN stays 128, so the datapath floor in cycles does not shrink).\n")
    hdr = ["shape", "M"] + [f"instr VLEN {v}" for v in vlens] + \
          [f"{a}->{b}" for a, b in zip(vlens, vlens[1:])] + [f"est/floor {v}" for v in vlens]
    trs = []
    for s in R.shapes:
        K, N = s
        for M in R.Ms:
            rs = [R.get("rvv", "rvv", "bf16", "packed", v, M, K, N) for v in vlens]
            if not all(rs):
                continue
            trs.append([SHAPE_NAMES[s], M] + [fmt_n(x["insns"]) for x in rs] +
                       [f"{a['insns'] / b['insns']:.2f}" for a, b in zip(rs, rs[1:])] +
                       [f"{x['est_over_floor']:.2f}" for x in rs])
    md.append(table(hdr, trs) + "\n")
    return md


def section_mix(R):
    md = ["## Instruction mix, VLEN 256 (share of instructions)\n"]
    hdr = ["shape", "M", "implementation", "scalar", "scalar mem", "vsetvl", "vload", "vstore", "vfma", "vwiden",
           "varith", "reg-group ops / vector instr"]
    cands = [("rvv", "rvv", "bf16", None), ("rvv", "rvv_zvfbf", "bf16", None)]
    cands += [("rvv", isa, f, act) for isa, act in R.quant_variants() for f in ("int8", "int4-g64")]
    cands += [("rvv", isa, f, act) for isa, act in R.quant_variants() for f in BLOCK_FORMATS]
    cands += [("llamacpp", "rvv", f, None) for f in ["q8_0", "q4_0"] + BLOCK_FORMATS]
    trs = []
    for s in R.shapes:
        K, N = s
        for M in (1, 16):
            for impl, isa, fm, act in cands:
                lay = "rowmajor" if impl == "llamacpp" else "packed"
                r = R.get(impl, isa, fm, lay, 256, M, K, N, act)
                if not r:
                    continue
                nv = r["vector_insns"] - r["vsetvl"]
                trs.append([SHAPE_NAMES[s], M, label(impl, isa, fm, lay, r["path_used"], r["act"])] +
                           [f"{100 * r[k] / r['insns']:.1f}%" for k in
                            ("scalar", "scalar_mem", "vsetvl", "vload", "vstore", "vfma", "vwiden", "varith")] +
                           [f"{r['vregops'] / nv:.2f}" if nv else "-"])
    md.append(table(hdr, trs) + "\n")
    return md


def targets_bf16(R):
    trs = []
    for s in R.shapes:
        K, N = s
        r = R.get("rvv", "rvv", "bf16", "packed", 256, 1, K, N)
        if r:
            trs.append([f"BF16 GEMV {SHAPE_NAMES[s]}: instr / weight <= {TARGET_GEMV_INSN_PER_W}",
                        f"{r['insns_per_weight']:.3f}", verdict(r["insns_per_weight"] <= TARGET_GEMV_INSN_PER_W)])
            trs.append([f"BF16 GEMV {SHAPE_NAMES[s]}: bytes read <= {TARGET_GEMV_READ_RATIO} x W",
                        f"{r['bytes_read_per_wbyte']:.3f}", verdict(r["bytes_read_per_wbyte"] <= TARGET_GEMV_READ_RATIO)])
            trs.append([f"BF16 GEMV {SHAPE_NAMES[s]}: est. cycles <= {TARGET_FLOOR_RATIO} x floor",
                        f"{r['est_over_floor']:.2f}", verdict(r["est_over_floor"] <= TARGET_FLOOR_RATIO)])
    for s in R.shapes:
        K, N = s
        for M in (4, 8, 16):
            r = R.get("rvv", "rvv", "bf16", "packed", 256, M, K, N)
            if r:
                trs.append([f"BF16 GEMM {SHAPE_NAMES[s]} M={M}: instr / MAC <= {TARGET_GEMM_INSN_PER_MAC}",
                            f"{r['insns_per_mac']:.4f}", verdict(r["insns_per_mac"] <= TARGET_GEMM_INSN_PER_MAC)])
                trs.append([f"BF16 GEMM {SHAPE_NAMES[s]} M={M}: est. cycles <= {TARGET_FLOOR_RATIO} x floor",
                            f"{r['est_over_floor']:.2f}", verdict(r["est_over_floor"] <= TARGET_FLOOR_RATIO)])
    vlens = bf16_vlens(R)
    if len(vlens) > 1:
        for s in R.shapes:
            K, N = s
            rs = [R.get("rvv", "rvv", "bf16", "packed", v, 1, K, N) for v in vlens]
            if all(rs):
                ratios = [a["insns"] / b["insns"] for a, b in zip(rs, rs[1:])]
                trs.append([f"BF16 GEMV {SHAPE_NAMES[s]}: ~2x fewer instructions per VLEN doubling "
                            f"({'->'.join(map(str, vlens))})",
                            ", ".join(f"{x:.2f}" for x in ratios), verdict(all(x >= 1.8 for x in ratios))])
    return trs



def target_row(what, vals, ok, fmt="{:.3f}"):
    """[what, measured range over the shapes, verdict (naming the shapes that miss)]."""
    lo, hi = min(v for _, v in vals), max(v for _, v in vals)
    measured = fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"
    bad = [SHAPE_NAMES.get(s, f"{s[0]}->{s[1]}").split()[0] for s, v in vals if not ok(v)]
    return [what, measured, verdict(not bad) + (f" ({', '.join(bad)})" if bad and len(bad) < len(vals) else "")]

def targets_quant(R):
    """Per (format, isa, act): the decode targets over every shape, the missing shapes named."""
    trs = []
    for isa, act in R.quant_variants():
        for fm in R.quant_formats(isa, act):
            fam = family(fm)
            rows = [(s, R.get("rvv", isa, fm, "packed", 256, 1, *s, act=act)) for s in R.shapes]
            rows = [(s, r) for s, r in rows if r]
            if not rows:
                continue
            who = f"{fm} GEMV ({ISA_NAME[isa]}{', int8 x' if act == 'int8' else ''})"

            def one(name, vals, ok, fmt="{:.3f}"):
                trs.append(target_row(f"{who}: {name}", vals, ok, fmt))

            if fam not in TARGET_CYC_PER_W:
                continue
            lim = TARGET_CYC_PER_W[fam]
            one(f"est. cycles / weight <= {lim:.2f}", [(s, r["cyc_per_weight"]) for s, r in rows], lambda v: v <= lim)
            one(f"bytes read <= {TARGET_QUANT_READ_RATIO} x packed W", [(s, r["bytes_read_per_wbyte"]) for s, r in rows],
                lambda v: v <= TARGET_QUANT_READ_RATIO)
            peer = LLAMACPP_PEER[fam]
            ratios = [(s, R.llama(peer, 1, *s)["insns_per_weight"] / r["insns_per_weight"])
                      for s, r in rows if R.llama(peer, 1, *s)]
            if ratios:
                one(f">= {TARGET_VS_LLAMACPP:g}x fewer instructions / weight than llama.cpp {peer.upper()}",
                    ratios, lambda v: v >= TARGET_VS_LLAMACPP, "{:.1f}x")
    return trs


def targets_block(R):
    """The GGUF block formats' decode targets (TARGET_BLOCK), on the TARGET_BLOCK_ISA path."""
    trs = []
    for fm, t in TARGET_BLOCK.items():
        rows = [(s, R.get("rvv", TARGET_BLOCK_ISA, fm, "packed", 256, 1, *s)) for s in R.shapes]
        rows = [(s, r) for s, r in rows if r]
        if not rows:
            continue
        who = f"{fm.upper()} GEMV ({ISA_NAME[TARGET_BLOCK_ISA]})"

        def one(name, vals, ok, fmt="{:.3f}"):
            trs.append(target_row(f"{who}: {name}", vals, ok, fmt))

        if "cyc" in t:
            one(f"est. cycles / weight <= {t['cyc']:.2f}", [(s, r["cyc_per_weight"]) for s, r in rows],
                lambda v: v <= t["cyc"])
        if "insn" in t:
            one(f"instructions / weight <= {t['insn']:.2f}", [(s, r["insns_per_weight"]) for s, r in rows],
                lambda v: v <= t["insn"])
        if "dram" in t:
            one(f"DRAM bytes <= {t['dram']} x file bytes", [(s, r["dram_per_wbyte"]) for s, r in rows],
                lambda v: v <= t["dram"])
        if "vs_llama" in t:
            ratios = [(s, R.llama(fm, 1, *s)["insns_per_weight"] / r["insns_per_weight"])
                      for s, r in rows if R.llama(fm, 1, *s)]
            if ratios:
                one(f">= {t['vs_llama']:g}x fewer instructions / weight than llama.cpp {fm.upper()}", ratios,
                    lambda v: v >= t["vs_llama"], "{:.1f}x")
    # IQ4_NL's 16-entry table against Q4_0 (int4-g32) at the same shapes, same path.
    pairs = [(s, R.get("rvv", TARGET_BLOCK_ISA, "iq4_nl", "packed", 256, 1, *s),
              R.get("rvv", TARGET_BLOCK_ISA, "int4-g32", "packed", 256, 1, *s)) for s in R.shapes]
    vals = [(s, a["cyc_per_weight"] / b["cyc_per_weight"]) for s, a, b in pairs if a and b]
    if vals:
        trs.append(target_row(f"IQ4_NL GEMV ({ISA_NAME[TARGET_BLOCK_ISA]}): est. cycles / weight <= "
                              f"{TARGET_IQ4NL_VS_Q4_0:g}x Q4_0's (int4-g32)", vals,
                              lambda v: v <= TARGET_IQ4NL_VS_Q4_0, "{:.2f}x"))
    return trs


def section_block(R):
    """The GGUF block formats against llama.cpp on the same type, M = 1 and M > 1."""
    fmts = [f for f in BLOCK_FORMATS if any(r["format"] == f for r in R.rows)]
    if not fmts:
        return []
    md = [f"## GGUF block formats ({', '.join(f.upper() for f in fmts)}) and llama.cpp on the same type, VLEN 256\n"]
    md.append("Per weight element (N x K) of one call: instructions, estimated cycles (the in-order model "
              "above) and all modelled DRAM reads relative to the weight's bytes in the file's format (the "
              f"packed records keep them: {block_bytes_note(R)}); "
              "DRAM W = the part of it that fell in the weight buffer. llama.cpp: the same type, same shape and "
              "M (X quantized to Q8_0 / Q8_1 / Q8_K inside); llama.cpp / this = the ratio of instructions per weight.\n")
    hdr = ["shape", "M", "implementation", "instr / weight", "est. cycles / weight", "DRAM / file bytes",
           "DRAM W / file bytes", "llama.cpp instr / weight", "llama.cpp / this"]
    for fm in fmts:
        trs = []
        for s in R.shapes:
            K, N = s
            for M in R.Ms:
                ll = R.llama(fm, M, K, N)
                for isa in ("rvv_zvfh", "rvv"):
                    r = R.get("rvv", isa, fm, "packed", 256, M, K, N)
                    if not r:
                        continue
                    trs.append([SHAPE_NAMES[s], M, label("rvv", isa, fm, "packed", r["path_used"], r["act"]) + star(r),
                                f"{r['insns_per_weight']:.3f}", f"{r['cyc_per_weight']:.3f}",
                                f"{r['dram_per_wbyte']:.3f}", f"{r['dram_w_per_wbyte']:.3f}",
                                f"{ll['insns_per_weight']:.3f}{star(ll)}" if ll else "-",
                                f"{ll['insns_per_weight'] / r['insns_per_weight']:.1f}x" if ll else "-"])
                if ll:
                    trs.append([SHAPE_NAMES[s], M, label("llamacpp", "rvv", fm, "rowmajor", ll["path_used"]) + star(ll),
                                f"{ll['insns_per_weight']:.3f}", f"{ll['cyc_per_weight']:.3f}",
                                f"{ll['dram_per_wbyte']:.3f}", f"{ll['dram_w_per_wbyte']:.3f}", "", ""])
        if trs:
            md.append(f"### {fm.upper()}\n")
            md.append(table(hdr, trs) + "\n")
    return md


def section_targets(R):
    md = ["## Targets\n"]
    md.append(table(["target", "measured", "verdict"], targets_bf16(R) + targets_quant(R) + targets_block(R)) + "\n")
    md.append("A GEMV ratio >= 1.8 per VLEN doubling counts as \"~2x\". INT8/INT4 targets (issue 12) are at "
              "VLEN 256, M = 1, over the five shapes (range shown; a miss names the shapes). The llama.cpp "
              "comparison is against Debian's build, which has no Zvfh and hence no repacked kernels.\n")
    if targets_block(R):
        md.append("The GGUF block-format targets are at VLEN 256, M = 1, on the Zvfh path, against llama.cpp's "
                  "RVV dot product on the same type; DRAM = all modelled DRAM reads over the file's bytes.\n")
    return md


def plot(res, R):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "rvv"  # deterministic output
    shapes, Ms = R.shapes, R.Ms
    isas = R.quant_isas()
    have_llama = any(r["impl"] == "llamacpp" for r in R.rows)
    quant_panel = bool(isas or have_llama)
    fig, axes = plt.subplots(1, 3 if quant_panel else 2, figsize=(21 if quant_panel else 14, 5.4))
    ax = axes[0]
    impls = [("rvv", "rvv", "packed"), ("rvv", "rvv_zvfbf", "packed"), ("rvv", "rvv", "rowmajor"),
             ("scalar", "scalar", "packed"), ("aten", "default", "rowmajor")]
    width = 0.8 / (len(impls) + 1)
    for i, (impl, isa, lay) in enumerate(impls):
        xs, ys = [], []
        for j, s in enumerate(shapes):
            r = R.get(impl, isa, "bf16", lay, 256, 1, *s)
            if r:
                xs.append(j + i * width)
                ys.append(r["insns_per_weight"])
        ax.bar(xs, ys, width, label=label(impl, isa, "bf16", lay))
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
    ax.set_title("BF16 decode (M=1), VLEN 256")
    ax.set_ylim(top=ax.get_ylim()[1] * 30)  # room for the legend above the bars
    ax.legend(fontsize=7, loc="upper left", ncol=2)

    if quant_panel:
        ax = axes[1]
        isa = "rvv_zvfh" if "rvv_zvfh" in isas else (isas[0] if isas else None)
        series = [("rvv", isa, f, "bf16") for f in (R.quant_formats(isa) if isa else [])]
        series += [("rvv", "rvv", f, "int8") for f in R.quant_formats("rvv", "int8")]
        series += [("llamacpp", "rvv", f, None) for f in ("q8_0", "q4_0")]
        series += [("llamacpp", "rvv", f, None) for f in BLOCK_FORMATS
                   if any(r["impl"] == "llamacpp" and r["format"] == f for r in R.rows)]
        width = 0.8 / max(1, len(series))
        for i, (impl, si, f, act) in enumerate(series):
            lay = "rowmajor" if impl == "llamacpp" else "packed"
            xs, ys, pu = [], [], ""
            for j, s in enumerate(shapes):
                r = R.get(impl, si, f, lay, 256, 1, *s, act=act)
                if r:
                    xs.append(j + i * width)
                    ys.append(r["insns_per_weight"])
                    pu = r["path_used"]
            if xs:
                ax.bar(xs, ys, width, label=label(impl, si, f, lay, pu, act),
                       hatch="//" if impl == "llamacpp" else (".." if act == "int8" else None))
        ax.set_yscale("log")
        ax.set_xticks([j + 0.4 for j in range(len(shapes))])
        ax.set_xticklabels([SHAPE_NAMES[s].replace(" ", "\n", 1) for s in shapes], fontsize=8)
        ax.set_ylabel("executed instructions per weight element")
        ax.set_title("INT8 / INT4 decode (M=1) vs llama.cpp (Debian, no Zvfh), VLEN 256")
        ax.set_ylim(top=ax.get_ylim()[1] * 30)
        ax.legend(fontsize=7, loc="upper left", ncol=2)

    ax = axes[-1]
    styles = [(("rvv", "rvv", "bf16", "packed"), "o-"), (("rvv", "rvv_zvfbf", "bf16", "packed"), "s-"),
              (("scalar", "scalar", "bf16", "packed"), "^--"), (("aten", "default", "bf16", "rowmajor"), "v:")]
    if isas:
        qi = "rvv_zvfh" if "rvv_zvfh" in isas else isas[0]
        styles += [(("rvv", qi, "int8", "packed"), "D-"), (("rvv", qi, "int4-g64", "packed"), "P-")]
    styles += [(("llamacpp", "rvv", "q8_0", "rowmajor"), "x--"), (("llamacpp", "rvv", "q4_0", "rowmajor"), "+--")]
    s = (1536, 17920) if (1536, 17920) in shapes else shapes[0]
    for (impl, isa, fm, lay), st in styles:
        xs, ys, pu = [], [], ""
        for M in Ms:
            r = R.get(impl, isa, fm, lay, 256, M, *s)
            if r:
                xs.append(M)
                ys.append(r["insns_per_mac"])
                pu = r["path_used"]
        if xs:
            ax.plot(xs, ys, st, label=label(impl, isa, fm, lay, pu))
    ax.set_xscale("log", base=2)
    ax.set_xticks(Ms)
    ax.set_xticklabels([str(m) for m in Ms])
    ax.set_yscale("log")
    ax.axhline(TARGET_GEMM_INSN_PER_MAC, color="grey", ls="--", lw=1)
    ax.text(Ms[-1], TARGET_GEMM_INSN_PER_MAC * 1.12, f"BF16 target {TARGET_GEMM_INSN_PER_MAC} (M=4..16)", fontsize=8,
            ha="right", color="grey")
    ax.set_xlabel("M (rows of X)")
    ax.set_ylabel("executed instructions per multiply-add")
    ax.set_title(f"{SHAPE_NAMES[s]}, VLEN 256")
    ax.legend(fontsize=7)
    fig.suptitle("Linear on RVV: executed riscv64 instructions (QEMU + rvvcount plugin; not time)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(res, "instructions.png"), dpi=110, metadata={"Software": None})
    plt.close(fig)


def build(res):
    groups, jobs = load(os.path.join(res, "raw"))
    if not groups:
        sys.exit(f"report.py: no raw results in {res}/raw: run bench/run.sh")

    def order(k):
        impl, isa, fmt, layout, act, vlen, M, K, N = k
        fo = (["bf16"] + QUANT_FORMATS + LLAMA_FORMATS).index(fmt) if fmt in ["bf16"] + QUANT_FORMATS + LLAMA_FORMATS else 99
        so = SHAPE_ORDER.index((K, N)) if (K, N) in SHAPE_ORDER else 99
        return (impl, isa, fo, fmt, layout, act, vlen, so, M)

    rows = []
    for key in sorted(groups, key=order):
        c, sampled = combine(groups[key], key[8])
        rows.append(derive(key, c, sampled))
    return Results(rows, jobs)


def main():
    res = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
    R = build(res)
    write_csv(res, R)
    md = section_intro(R)
    for section in (section_decode_bf16, section_decode_quant, section_per_token, section_gemm_quant, section_block,
                    section_prefill_bf16, section_vlen_scaling, section_mix, section_targets):
        md += section(R)
    with open(os.path.join(res, "results.md"), "w") as f:
        f.write("\n".join(md))
    plot(res, R)


if __name__ == "__main__":
    main()
