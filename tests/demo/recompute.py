"""The demo report's K1 estimate columns, recomputed from the raw plugin counts without the
report's code (used by check_report.py --counted and by the glue tests).

Arithmetic written out again on purpose, from the model as documented in
python/rvv_inductor/demo/estimate.py and the K1 numbers in policy.py:
  per thread: cycles = (insns - vector_insns + vsetvl) x CPI + vbeats;
  a region counted on several threads: serial = the opening thread's (owner_vcpu) cycles
  beyond the median of the other active threads' cycles, parallel = the largest other
  thread's; seconds = max(serial, 0) / clock + max(parallel / clock, all threads' DRAM
  bytes / bandwidth) (an extrapolated serial part can come out below zero); a region counted on one thread: its total cycles, divided by the core count
  for the Linear region only, and max(that / clock, DRAM / bandwidth);
  counts at two depths a < b extrapolate linearly to the model's depth (the serial and
  parallel cycles taken per run before extrapolating);
  decode: the regions hold `steps` steps of `batch` tokens; prefill: one prompt of
  `batch x prompt` tokens; the long prompt (regions 13/14, or a driver's prompt run): one
  prompt of count_prefill tokens at batch 1.
"""
from __future__ import annotations

import json
from pathlib import Path

from rvv_inductor import policy  # plain Python, no torch

# rvvcount region ids of the demo's counting runs (demo/modes.py): kind + 4 x batch index, and
# the long prompt's two.
DECODE_REST, DECODE_LINEAR, PREFILL_REST, PREFILL_LINEAR = 1, 2, 3, 4
PROMPT_REST, PROMPT_LINEAR = 13, 14
LLAMACPP_REGION = 1


def _cycles(c: dict) -> float:
    return ((c.get("insns", 0) - c.get("vector_insns", 0) + c.get("vsetvl", 0)) * policy.CPI_SCALAR
            + c.get("vbeats", 0))


def _summary(region: dict) -> dict:
    ts = {k: _cycles(t) for k, t in (region.get("threads") or {}).items() if t.get("insns", 0) > 0}
    owner = str(region.get("owner_vcpu"))
    others = sorted(c for k, c in ts.items() if k != owner)
    if len(ts) > 1 and owner in ts:
        n = len(others)
        median = others[n // 2] if n % 2 else (others[n // 2 - 1] + others[n // 2]) / 2
        serial, parallel = max(0.0, ts[owner] - median), others[-1]
    else:
        serial, parallel = 0.0, max(ts.values()) if ts else _cycles(region)
    return {"total": _cycles(region), "serial": serial, "parallel": parallel, "threads": len(ts) if ts else 1,
            "dram": region.get("dram_read_bytes", 0) + region.get("dram_write_bytes", 0)}


def _extrapolate(ra: dict, rb: dict, a: int, b: int, depth: int) -> dict:
    return {rid: {k: (max(ra[rid][k], rb[rid][k]) if k == "threads" else
                      ra[rid][k] + (depth - a) * (rb[rid][k] - ra[rid][k]) / (b - a)) for k in ra[rid]}
            for rid in ra if rid in rb}


def _regions(d: Path, mode: str, count_spec: dict, depth: int) -> dict | None:
    runs = count_spec.get("runs") or [{"tag": "", "layers": depth}]
    files = [d / f"counts-{mode}{r['tag']}.json" for r in runs]
    if not all(f.is_file() for f in files):
        return None
    per_run = [{rid: _summary(r) for rid, r in json.loads(f.read_text())["regions"].items()} for f in files]
    if len(runs) == 1:
        return per_run[0]
    return _extrapolate(per_run[0], per_run[1], runs[0]["layers"], runs[1]["layers"], depth)


def _seconds(r: dict | None, div: float, linear: bool, bandwidth: float) -> float:
    if r is None:
        return 0.0
    dram = r["dram"] / div / bandwidth
    if r["threads"] > 1:
        return max(r["serial"], 0.0) / div / policy.K1_CLOCK_HZ + max(r["parallel"] / div / policy.K1_CLOCK_HZ, dram)
    return max(r["total"] / div / policy.K1_CLOCK_HZ / (policy.K1_CORES if linear else 1), dram)


# report key suffix -> bandwidth
BANDWIDTHS = {"_ceiling": policy.K1_DRAM_BYTES_PER_S, "_dram_fit": policy.K1_DRAM_FIT_BYTES_PER_S,
              "": policy.K1_DRAM_ACHIEVED_BYTES_PER_S}


def _driver(d: Path, mode: str, count_spec: dict, depth: int) -> dict | None:
    """{threads: estimates} of a driver mode from its count-argv runs."""
    argv = d / f"count-argv-{mode}.json"
    if not argv.is_file():
        return None
    runs = json.loads(argv.read_text())["runs"]
    out = {}
    for t in {r["threads"] for r in runs}:
        dec = [r for r in runs if r["threads"] == t and r["kind"] == "decode"][0]
        regs = _regions(d, mode + dec["tag"], {}, depth)
        if regs is None or str(dec["region"]) not in regs:
            continue
        e = {}
        for key, bw in BANDWIDTHS.items():
            e["est_decode_tok_s" + key] = 1 / _seconds(regs[str(dec["region"])], dec["steps"], False, bw)
            pre = regs.get(str(dec.get("prefill_region")))
            if pre is not None:
                e["est_prefill_tok_s" + key] = dec["prompt"] / _seconds(pre, 1, False, bw)
        prompt_runs = [r for r in runs if r["threads"] == t and r["kind"] == "prompt"]
        if prompt_runs:
            region = str(prompt_runs[0]["prefill_region"])
            if len(prompt_runs) == 1:
                long_regs = _regions(d, mode + prompt_runs[0]["tag"], {}, depth)
                whole = (long_regs or {}).get(region)
            else:
                layers = {r["tag"]: r["layers"] for r in count_spec["runs"]}
                (a, fa), (b, fb) = sorted((layers[r["layers_tag"]], r["tag"]) for r in prompt_runs)
                ra, rb = _regions(d, mode + fa, {}, a), _regions(d, mode + fb, {}, b)
                whole = _extrapolate(ra, rb, a, b, depth).get(region) if ra and rb else None
            if whole is not None:
                p = prompt_runs[0]["prompt"]
                for key, bw in BANDWIDTHS.items():
                    e["est_prompt_tok_s" + key] = p / _seconds(whole, 1, False, bw)
        out[t] = e
    return out


def estimates(d: Path, mode: str, count_spec: dict, depth: int) -> dict | None:
    """{batch: {"est_decode_tok_s": ..., "est_decode_tok_s_ceiling": ..., ..._dram_fit,
    "est_prefill_tok_s...", "est_prompt_tok_s..." (batch 1, when the long prompt was
    counted)}} recomputed from DIR's raw counts; a driver mode (llama.cpp, package):
    {threads: {...}}; None if not counted."""
    if mode.startswith(("llama.cpp", "package")):
        return _driver(d, mode, count_spec, depth)
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
            e["est_decode_tok_s" + key] = b / dec
            e["est_prefill_tok_s" + key] = b * prompt / pre if pre > 0 else None
            long_p = count_spec.get("count_prefill") or 0
            if b == 1 and long_p and regs.get(str(PROMPT_REST)) is not None:
                s = (_seconds(regs.get(str(PROMPT_LINEAR)), 1, True, bw)
                     + _seconds(regs[str(PROMPT_REST)], 1, False, bw))
                e["est_prompt_tok_s" + key] = long_p / s
        out[b] = e
    return out
