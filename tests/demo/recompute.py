"""The demo report's two K1 estimate columns, recomputed from the raw plugin counts without
the report's code (used by check_report.py --counted and by the glue tests).

Arithmetic written out again on purpose, from the model as documented in
python/rvv_inductor/demo/estimate.py and the K1 numbers in policy.py:
  per thread: cycles = (insns - vector_insns + vsetvl) x CPI + vbeats;
  a region counted on several threads: its busiest thread's cycles; on one thread: its
  total cycles, divided by the core count for the Linear region only;
  a region's seconds = max(cycles / clock, all threads' DRAM bytes / bandwidth);
  counts at two depths a < b extrapolate linearly to the model's depth (cycles of the
  busiest thread included, taken per run before extrapolating);
  decode: the regions hold `steps` steps of `batch` tokens; prefill: one prompt of
  `batch x prompt` tokens.
"""
from __future__ import annotations

import json
from pathlib import Path

from rvv_inductor import policy  # plain Python, no torch

# rvvcount region ids of the demo's counting runs (worker.py): kind + 4 x batch index.
DECODE_REST, DECODE_LINEAR, PREFILL_REST, PREFILL_LINEAR = 1, 2, 3, 4
LLAMACPP_REGION = 1


def _cycles(c: dict) -> float:
    return ((c.get("insns", 0) - c.get("vector_insns", 0) + c.get("vsetvl", 0)) * policy.CPI_SCALAR
            + c.get("vbeats", 0))


def _summary(region: dict) -> dict:
    ts = [t for t in (region.get("threads") or {}).values() if t.get("insns", 0) > 0]
    return {"total": _cycles(region), "busiest": max(map(_cycles, ts)) if ts else _cycles(region),
            "threads": len(ts) if ts else 1,
            "dram": region.get("dram_read_bytes", 0) + region.get("dram_write_bytes", 0)}


def _regions(d: Path, mode: str, count_spec: dict, depth: int) -> dict | None:
    runs = count_spec.get("runs") or [{"tag": "", "layers": depth}]
    files = [d / f"counts-{mode}{r['tag']}.json" for r in runs]
    if not all(f.is_file() for f in files):
        return None
    per_run = [{rid: _summary(r) for rid, r in json.loads(f.read_text())["regions"].items()} for f in files]
    if len(runs) == 1:
        return per_run[0]
    (a, ra), (b, rb) = (runs[0]["layers"], per_run[0]), (runs[1]["layers"], per_run[1])
    return {rid: {k: (max(ra[rid][k], rb[rid][k]) if k == "threads" else
                      ra[rid][k] + (depth - a) * (rb[rid][k] - ra[rid][k]) / (b - a)) for k in ra[rid]}
            for rid in ra if rid in rb}


def _seconds(r: dict | None, div: float, linear: bool, bandwidth: float) -> float:
    if r is None:
        return 0.0
    cyc = r["busiest"] if r["threads"] > 1 else r["total"] / (policy.K1_CORES if linear else 1)
    return max(cyc / div / policy.K1_CLOCK_HZ, r["dram"] / div / bandwidth)


BANDWIDTHS = {"est_decode_tok_s_ceiling": policy.K1_DRAM_BYTES_PER_S,
              "est_decode_tok_s": policy.K1_DRAM_ACHIEVED_BYTES_PER_S}


def estimates(d: Path, mode: str, count_spec: dict, depth: int) -> dict | None:
    """{batch: {"est_decode_tok_s": ..., "est_decode_tok_s_ceiling": ..., "est_prefill_tok_s": ...,
    "est_prefill_tok_s_ceiling": ...}} recomputed from DIR's raw counts; None if not counted."""
    if mode.startswith(("llama.cpp", "package")):  # a driver's decode steps: one region (and its prefill)
        argv = d / f"count-argv-{mode}.json"
        regs = _regions(d, mode, {"runs": [{"tag": "", "layers": depth}]}, depth)
        if regs is None or not argv.is_file():
            return None
        run = json.loads(argv.read_text())
        r = regs.get(str(run.get("region", LLAMACPP_REGION)))
        if r is None:
            return None
        e = {k: 1 / _seconds(r, run["steps"], False, bw) for k, bw in BANDWIDTHS.items()}
        pre = regs.get(str(run["prefill_region"])) if run.get("prefill_region") else None
        if pre is not None:  # rvv-generate's whole prefill: one prompt
            for k, bw in BANDWIDTHS.items():
                e[k.replace("decode", "prefill")] = run["prompt"] / _seconds(pre, 1, False, bw)
        return {1: e}
    regs = _regions(d, mode, count_spec, depth)
    if regs is None:
        return None
    out = {}
    steps, prompt = count_spec["steps"], count_spec["prompts"][0]
    for i, b in enumerate(count_spec["batches"]):
        g = lambda kind: regs.get(str(kind + 4 * i))  # noqa: E731
        if g(DECODE_REST) is None:
            continue
        e = {}
        for key, bw in BANDWIDTHS.items():
            dec = _seconds(g(DECODE_LINEAR), steps, True, bw) + _seconds(g(DECODE_REST), steps, False, bw)
            pre = _seconds(g(PREFILL_LINEAR), 1, True, bw) + _seconds(g(PREFILL_REST), 1, False, bw)
            e[key] = b / dec
            e[key.replace("decode", "prefill")] = b * prompt / pre if pre > 0 else None
        out[b] = e
    return out
