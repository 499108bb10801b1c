#!/usr/bin/env python3
"""ESTIMATED K1 prompt rate of Qwen2.5-1.5B's Linear layers for a 512-token prompt, from the
counted GEMM rows of bench/results/threads (gemm-floor.csv: one linear_bench call per
shape, M and thread count, busiest thread's cycles, all threads' DRAM bytes).

    bench/prefill_estimate.py [--dir bench/results/threads] [--prompt 512] [--layers 28]

Per decoder layer the Linear calls are q/o (1536 x 1536), k/v (256 x 1536), gate_up (17920
x 1536: gate and up fused, the same multiply-adds as two 8960-row calls) and down (1536 x
8960). A call's time is the row's estimate: max(busiest thread's cycles / 1.6 GHz, all
threads' DRAM bytes / bandwidth), at the calibrated 3.325 GB/s and at the 10.66 GB/s peak.
The prompt's Linear time = layers x (2 q + 2 k + gate_up + down) at M = rows per call,
times the number of calls (prompt / rows), plus lm_head once (the last prompt token only,
the M = 1 row of threads.csv). Left out, and said so in the output: attention (at 512
tokens ~1-2 % of the multiply-adds), norms, RoPE, the embedding, Python. So these are
upper bounds on the prompt rate of a real run, for the Linear work alone.

Writes DIR/prefill-<prompt>.md and prints it.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

SHAPES = (("q_proj", 2), ("k_proj", 2), ("gate_up", 1), ("down_proj", 1))  # per layer: q+o, k+v
LAYER_MACS = 2 * 1536 * 1536 + 2 * 256 * 1536 + 17920 * 1536 + 1536 * 8960
# (label, weights column of gemm-floor.csv, activations, lm_head weights in threads.csv)
PATHS = (("INT4 g32, INT8 activations", "int4x8", "int8", "int4"),
         ("INT4 g32, BF16 activations (FP path)", "int4", "bf16", "int4"),
         ("INT8 per channel, INT8 activations", "int8x8", "int8", "int8"),
         ("INT8 per channel, BF16 activations (FP path)", "int8", "bf16", "int8"),
         ("BF16", "bf16", "bf16", "bf16"))


def load(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("bench/results/threads"))
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--threads", type=int, default=8)
    a = ap.parse_args()
    gemm = load(a.dir / "gemm-floor.csv")
    gemv = load(a.dir / "threads.csv")

    def row(shape, weights, m):
        for r in gemm:
            if r["shape"] == shape and r["weights"] == weights and int(r["M"]) == m and int(r["threads"]) == a.threads:
                return r
        return None

    def lm_head(weights):
        for r in gemv:
            if r["shape"] == "lm_head" and r["weights"] == weights and int(r["M"]) == 1 and int(r["threads"]) == a.threads:
                return r
        return None

    lines = [f"# ESTIMATED K1 prompt rate, Qwen2.5-1.5B Linear layers, {a.prompt}-token prompt, {a.threads} threads",
             "",
             f"Regenerate: `bench/prefill_estimate.py --prompt {a.prompt} --layers {a.layers}` (from `gemm-floor.csv` "
             "and `threads.csv` in this directory, which `bench/threads.sh` counts). **Every number is an estimate "
             "from instruction counts (QEMU + rvvcount, VLEN 256), not a measurement.** Each call: max(busiest "
             "thread's cycles at 1.6 GHz, all threads' DRAM bytes / bandwidth); the prompt: "
             f"{a.layers} layers x (q, k, v, o, gate_up, down) per call of M rows x {a.prompt} / M calls, plus "
             "lm_head for the last prompt token (M = 1). **Left out**: attention, norms, RoPE, the embedding and "
             "any Python; so the rate is an upper bound for a real run of the Linear work alone.",
             "",
             "| weights / activations | rows per call (M) | Linear per layer per call, ms (calibrated) | "
             "lm_head ms | prompt s (calibrated) | **prompt tok/s** (calibrated) | tok/s (peak BW) | "
             "MACs/cycle/core (busiest, q_proj) | kernel |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for label, wcol, act, lm in PATHS:
        for m in (512, 128, 64, 16):
            rows = [row(s, wcol, m) for s, _ in SHAPES]
            if any(r is None for r in rows):
                continue
            per_call = {bw: sum(float(r[f"est_us_{bw}"]) * n for r, (_, n) in zip(rows, SHAPES)) / 1e3
                        for bw in ("achieved", "peak")}
            calls = -(-a.prompt // m)
            head = lm_head(lm)
            head_ms = {bw: float(head[f"est_us_{bw}"]) / 1e3 if head else 0.0 for bw in ("achieved", "peak")}
            total = {bw: a.layers * per_call[bw] * calls + head_ms[bw] for bw in per_call}
            q = rows[0]
            lines.append(f"| {label} | {m} | {per_call['achieved']:.1f} | {head_ms['achieved']:.1f}"
                         f"{'' if head else ' (no row)'} | {total['achieved'] / 1e3:.2f} | "
                         f"**{a.prompt / (total['achieved'] / 1e3):.1f}** | {a.prompt / (total['peak'] / 1e3):.1f} | "
                         f"{float(q['macs_per_cycle']):.2f} | {q['kernel']} |")
    lines += ["", f"Multiply-adds per token per layer: {LAYER_MACS / 1e6:.1f} M; rows whose shape set is incomplete "
              "are left out. The regional runtime runs INT8/INT4 layers at the prompt's whole M (one call; the kernel "
              "blocks rows by 64 inside) and BF16 ones in buckets of up to 128 rows; the package's prefill in chunks of "
              "`policy.prefill_chunk` rows (32 for INT4 and BF16, 16 for INT8)."]
    out = a.dir / f"prefill-{a.prompt}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
