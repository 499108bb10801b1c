#!/usr/bin/env python3
"""prefill.{md,csv} from bench/prefill.sh's raw counts (DIR/raw/t<T>.json).

    python3 bench/prefill_report.py DIR

Per (shape, M, threads): the counted call through Inductor's generated code (every thread),
the busiest thread's cycles (in-order model: non-vector instructions x CPI + vector beats
at DLEN 128), all threads' modelled DRAM bytes, the weight re-read factor (DRAM bytes read
/ weight bytes: 1.0 = the weight streamed once; the activations and per-thread copies add a
little), the blocking the template chose, and the ESTIMATED K1 time max(busiest thread's
cycles / clock, DRAM bytes / bandwidth) at the peak and at the calibrated bandwidth.
Torch-free.
"""
from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from rvv_inductor import policy  # noqa: E402


def cycles(c: dict) -> float:
    return (c.get("insns", 0) - c.get("vector_insns", 0) + c.get("vsetvl", 0)) * policy.CPI_SCALAR + c.get("vbeats", 0)


def rows_of(raw: dict, warm: dict | None = None) -> list[dict]:
    """Rows of one counting run; ``warm`` is its warm pass's program output, whose routing
    log names the route when the counting pass took every graph from the cache (no
    lowering ran in it, so it logged none)."""
    prog, plugin = raw["program"], raw["plugin"]
    blocks = {(b.get("M"), b.get("N"), b.get("K")): b for b in prog.get("blocking", [])}
    routes = {(e["M"], e["N"], e["K"]): e["route"] + ("" if e["route"] == "rvv" else f" ({e['reason']})")
              for e in (prog.get("routing") or (warm or {}).get("routing") or [])}
    out = []
    for rid, meta in prog["regions"].items():
        reg = plugin["regions"].get(rid)
        if reg is None:
            continue
        ts = [t for t in (reg.get("threads") or {}).values() if t.get("insns", 0) > 0] or [reg]
        cyc = [cycles(t) for t in ts]
        # The thread that opened the region runs the Python call and the wrapper around the
        # kernel besides its share; threads without vector work are not GEMM workers (a
        # polling thread of the process, say).
        owner = (reg.get("threads") or {}).get(str(reg.get("owner_vcpu", 0)), reg)
        vb = [t.get("vbeats", 0) for t in ts]
        workers = [t for t in ts if t.get("vbeats", 0) >= 0.1 * max(vb)] if max(vb, default=0) else ts
        others = [t.get("insns", 0) for t in workers if t is not owner]
        dram_r, dram_w = reg.get("dram_read_bytes", 0), reg.get("dram_write_bytes", 0)
        w = meta["weight_bytes"]
        b = blocks.get((f"static_cast<int64_t>({meta['M']}L)", str(meta["N"]), str(meta["K"]))) or \
            blocks.get((str(meta["M"]), str(meta["N"]), str(meta["K"]))) or {}
        r = {"shape": meta["shape"], "M": meta["M"], "N": meta["N"], "K": meta["K"], "threads": raw["threads"],
             "cache_blocking": raw.get("blocking", "upstream"),
             "route": routes.get((meta["M"], meta["N"], meta["K"]), "?"), "rev": raw["rev"],
             "threads_active": len(ts), "vector_threads": len(workers), "owner_insns": owner.get("insns", 0),
             "max_other_insns": max(others, default=0), "insns": reg["insns"], "max_thread_cycles": max(cyc),
             "imbalance": max(cyc) * len(cyc) / sum(cyc) if sum(cyc) else 0.0,
             "dram_read_bytes": dram_r, "dram_write_bytes": dram_w, "weight_bytes": w,
             "x_bytes": meta["x_bytes"], "reread": dram_r / w,
             "max_thread_dram_read": max(t.get("dram_read_bytes", 0) for t in ts),
             "blocking": " ".join(f"{k}={b[k]}" for k in ("Mt_blocks", "Nt_blocks", "Kt_blocks", "Mc_blocks",
                                                          "Nc_blocks", "Kc_blocks") if k in b),
             "rel_err": meta["rel_err"]}
        r["compute_us"] = r["max_thread_cycles"] / policy.K1_CLOCK_HZ * 1e6
        for key, bw in (("peak", policy.K1_DRAM_BYTES_PER_S), ("achieved", policy.K1_DRAM_ACHIEVED_BYTES_PER_S)):
            r[f"est_us_{key}"] = max(r["compute_us"], (dram_r + dram_w) / bw * 1e6)
        out.append(r)
    return out


COLS = ["shape", "M", "N", "K", "threads", "cache_blocking", "route", "threads_active", "vector_threads",
        "owner_insns", "max_other_insns", "insns", "max_thread_cycles", "imbalance",
        "dram_read_bytes", "dram_write_bytes", "weight_bytes", "x_bytes", "reread", "max_thread_dram_read",
        "compute_us", "est_us_peak", "est_us_achieved", "blocking", "rel_err", "rev"]


def main(out: str) -> int:
    raw_dir = Path(out) / "raw"
    rows = []
    for f in sorted(raw_dir.glob("t*.json")):
        warm = f.with_suffix(".warm.stdout")
        lines = [ln for ln in warm.read_text().splitlines() if ln.startswith("{")] if warm.exists() else []
        rows += rows_of(json.loads(f.read_text()), json.loads(lines[-1]) if lines else None)
    order = {s: i for i, s in enumerate(("q_proj", "k_proj", "o_proj", "gate_proj", "down_proj"))}
    rows.sort(key=lambda r: (order.get(r["shape"], 9), r["M"], r["threads"], r["cache_blocking"] != "upstream"))
    with open(Path(out) / "prefill.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLS)
        for r in rows:
            w.writerow([f"{r[c]:.4g}" if isinstance(r[c], float) else r[c] for c in COLS])
    md = ["# Prefill GEMMs of Qwen2.5-1.5B through Inductor's generated code", "",
          "Regenerate: `bench/prefill.sh` (this file: `bench/prefill_report.py`). Each row is one call of a frozen "
          "`nn.Linear` compiled with `torch.compile` after `rvv_inductor.enable()` and `freezing=True` "
          "(CppGemmTemplate + our 6xNr micro-GEMM, the path a whole-model compile takes), counted with the rvvcount "
          "plugin (QEMU 10, VLEN 256, every thread, `OMP_WAIT_POLICY=passive`), the template's cache blocking "
          "computed for the K1's caches (L1D 32 KiB, L2 512 KiB).", "",
          "**re-read** = modelled DRAM bytes read / weight bytes (1.00 = the weight streamed once; activations add "
          "M x K x 2 bytes per thread that reads them, each thread has its own modelled L1+L2). **ESTIMATED** K1 "
          "times, not measurements: max(busiest thread's cycles / 1.6 GHz, all threads' DRAM bytes / bandwidth) "
          f"at the {policy.K1_DRAM_BYTES_PER_S / 1e9:.2f} GB/s peak (ceiling) and the calibrated "
          f"{policy.K1_DRAM_ACHIEVED_BYTES_PER_S / 1e9:.2f} GB/s.", "",
          "**threads with vector work** = threads with >= 10% of the most vector beats (the GEMM's workers); "
          "**opening thread insns** = the thread that opened the region: its share plus the Python call, guards and "
          "wrapper around the kernel; **busiest worker insns** = the most of any other vector thread.", "",
          "| shape | M | N x K | T | cache blocking | route | threads active | threads with vector work | "
          "opening thread insns | busiest worker insns | insns (all) | busiest thread Mcycles | imbalance | "
          "DRAM read MB | weight MB | re-read | blocking (Mt Nt Kt / Mc Nc Kc) | est us (peak) | est us (achieved) |",
          "|---|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        md.append(f"| {r['shape']} | {r['M']} | {r['N']}x{r['K']} | {r['threads']} | {r['cache_blocking']} | {r['route']} | "
                  f"{r['threads_active']} | {r['vector_threads']} | {r['owner_insns']:,} | {r['max_other_insns']:,} | "
                  f"{r['insns']:,} | {r['max_thread_cycles'] / 1e6:.2f} | {r['imbalance']:.2f} | "
                  f"{r['dram_read_bytes'] / 1e6:.2f} | {r['weight_bytes'] / 1e6:.2f} | {r['reread']:.2f} | "
                  f"{r['blocking']} | {r['est_us_peak']:.0f} | {r['est_us_achieved']:.0f} |")
    (Path(out) / "prefill.md").write_text("\n".join(md) + "\n")
    print(f"prefill_report.py: {len(rows)} rows -> {out}/prefill.csv, {out}/prefill.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/prefill"))
