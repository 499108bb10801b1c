"""Serving at full depth from counted scheduling steps (bench/serve_bench.py --workload mixed).

Input, per decoder-layer count L (the model cut to 1 and 2 layers): the server's step log
(bench/serve_steps/sitecustomize.py: per step its plugin region and its batch, per request
its arrival) and the plugin's per-region counters. Output: per concurrency level the
aggregate output tokens/s, and per request the time to first token and the inter-token
latencies, ESTIMATED for the K1 at the target depth (28 layers for Qwen2.5-1.5B).

1. Each step's K1 time at its own depth is ``serve_bench.window_estimate`` of its region:
   compute = max(busiest thread's cycles, all threads' cycles / cores) / clock, memory =
   its DRAM bytes / bandwidth, time = max of the two.
2. Depth. A step's compute seconds and DRAM bytes are fitted, per counted depth, as linear
   in the step's features (1, query tokens T, sequences S, attention pairs A = the sum over
   its requests of query tokens x the cache length they attend to). The difference of the
   two depths' fits is one decoder layer's cost for any step; a step counted at depth L0
   becomes, at depth D, its own counters plus (D - L0) layers of that cost. The fits'
   residuals are reported: they say how well four features explain a step.
3. The timeline of a level: its steps back to back (a closed-loop client sends its next
   request when the previous one is answered, so the server does not idle within a level);
   a request arrives at the end of the step after which the server logged it. Time to first
   token = end of the first step that gave it a token - arrival; inter-token latency = the
   gaps between its later token steps.
Nothing here runs torch or the emulator: tests/python/glue/test_serve_bench.py checks it."""
from __future__ import annotations

import math

FEATURES = ("one", "tokens", "seqs", "attn_pairs")


def step_features(batch: list) -> dict:
    """``batch``: [request id, query tokens, cached tokens before the step, gave a token]."""
    T = sum(q for _, q, _, _ in batch)
    A = sum(q * (past + (q + 1) / 2) for _, q, past, _ in batch)  # causal: query i sees past + i + 1 keys
    return {"one": 1.0, "tokens": float(T), "seqs": float(len(batch)), "attn_pairs": float(A)}


def _solve(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Least squares by the normal equations (4 unknowns; Gaussian elimination with partial
    pivoting). A feature that never varies (a column dependent on others) gets 0."""
    n = len(rows[0])
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    aty = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(n)]
    scale = [math.sqrt(ata[i][i]) or 1.0 for i in range(n)]  # equilibrate: features differ by 1e6
    m = [[ata[i][j] / (scale[i] * scale[j]) for j in range(n)] + [aty[i] / scale[i]] for i in range(n)]
    x = [0.0] * n
    piv_rows = []
    for col in range(n):
        p = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[p][col]) < 1e-9:
            continue
        m[col], m[p] = m[p], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [a - f * b for a, b in zip(m[r], m[col])]
        piv_rows.append(col)
    for col in piv_rows:
        x[col] = m[col][n] / m[col][col] / scale[col]
    return x


def fit(steps: list[dict], key: str) -> dict:
    """Linear fit of ``step[key]`` on the step features; with its relative residuals."""
    rows = [[s["features"][f] for f in FEATURES] for s in steps]
    ys = [s[key] for s in steps]
    coef = _solve(rows, ys)
    pred = [sum(c * r for c, r in zip(coef, row)) for row in rows]
    rel = sorted(abs(p - y) / y for p, y in zip(pred, ys) if y > 0)
    return {"coef": dict(zip(FEATURES, coef)), "steps": len(steps),
            "residual_p50": _pct(rel, 50), "residual_max": rel[-1] if rel else 0.0}


def predict(f: dict, features: dict) -> float:
    return sum(f["coef"][k] * features[k] for k in FEATURES)


def per_layer(fits: dict, key: str, features: dict) -> float:
    """One decoder layer's ``key`` for a step with these features: the difference of the two
    counted depths' fits, divided by their layer difference; never below zero."""
    (l0, f0), (l1, f1) = sorted(fits.items())[:2]
    return max(0.0, (predict(f1[key], features) - predict(f0[key], features)) / (l1 - l0))


def _pct(sorted_vals: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted values (p in 0..100)."""
    if not sorted_vals:
        return float("nan")
    k = max(1, math.ceil(p / 100 * len(sorted_vals)))
    return sorted_vals[k - 1]


def step_times(steps: list[dict], fits: dict | None, depth: int, counted_depth: int, bandwidth: float) -> list[float]:
    """Estimated seconds of each step at ``depth`` layers (its counters at ``counted_depth``
    plus the per-layer fit for the layers in between)."""
    out = []
    for s in steps:
        compute, dram = s["compute_s"], s["dram_bytes"]
        if depth != counted_depth:
            extra = depth - counted_depth
            compute += extra * per_layer(fits, "compute_s", s["features"])
            dram += extra * per_layer(fits, "dram_bytes", s["features"])
        out.append(max(compute, dram / bandwidth))
    return out


def timeline(log: list[dict], times: dict) -> dict:
    """Per level: tokens, seconds, tok/s, TTFT and inter-token latency percentiles.
    ``log``: the step log's lines in order; ``times``: step region id -> seconds."""
    levels: dict = {}
    for line in log:
        lvl = line.get("level")
        if "step" in line:
            lv = levels.setdefault(lvl, {"t": 0.0, "arrive": {}, "tokens": {}, "steps": 0})
            lv["t"] += times[line["step"]]
            lv["steps"] += 1
            for rid, _, _, gave in line["batch"]:
                if gave:
                    lv["tokens"].setdefault(rid, []).append(lv["t"])
        elif lvl is not None:
            lv = levels.setdefault(lvl, {"t": 0.0, "arrive": {}, "tokens": {}, "steps": 0})
            lv["arrive"][line["arrival"]] = lv["t"]
    out = {}
    for name, lv in levels.items():
        ttft, itl, toks = [], [], 0
        for rid, ts in lv["tokens"].items():
            toks += len(ts)
            if rid in lv["arrive"]:
                ttft.append(ts[0] - lv["arrive"][rid])
            itl += [b - a for a, b in zip(ts, ts[1:])]
        ttft.sort()
        itl.sort()
        out[name] = {"steps": lv["steps"], "tokens": toks, "requests": len(lv["tokens"]), "seconds": lv["t"],
                     "tok_s": toks / lv["t"] if lv["t"] else 0.0,
                     "ttft_p50": _pct(ttft, 50), "ttft_p95": _pct(ttft, 95),
                     "itl_p50": _pct(itl, 50), "itl_p95": _pct(itl, 95)}
    return out
