"""The demo's report: agreement with eager, compile cost, memory, routing, counted work
per token and the ESTIMATED K1 throughput; printed, and written as report.json,
report.csv, report.txt and report.png in the output directory."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from .. import policy
from . import calibration
from . import estimate
from . import models
from .modes import (DECODE_LINEAR, DECODE_REST, DRIVER_MODES, EMPTY, LLAMACPP_MODES, LLAMACPP_REGION, MODES,
                    PACKAGE_MODES, PREFILL_LINEAR, PREFILL_REST, PROMPT_LINEAR, PROMPT_REST, region_id)

ULPS = 4  # tolerance: BF16 ulps at the largest eager logit (see tests/python/test_transformers.py)
RAW_COUNTERS = ("insns", "vector_insns", "vsetvl", "vbeats", "bytes_read", "bytes_written", "dram_read_bytes",
                "dram_write_bytes")
# Every additive counter of a region: the plugin's totals over all threads, and the busiest
# thread's in-order cycles (estimate.thread_view), which extrapolate and divide per token
# like the rest.
COUNTERS = RAW_COUNTERS + ("max_thread_cycles", "serial_cycles", "parallel_cycles")


def bf16_ulp(x: float) -> float:
    return 2.0 ** (math.floor(math.log2(x)) - 7) if x > 0 else 2.0 ** -133


def agreement(eager: dict, other: dict) -> list[dict]:
    rows = []
    for key, e in eager.items():
        if key not in other:  # llama.cpp runs the batch-1 workloads only
            continue
        e = e.float()
        o = other[key].float()
        scale = e.abs().max().item()
        tol = ULPS * bf16_ulp(scale)
        diff = (e - o).abs().max().item()
        top2 = e.topk(2, -1).values
        decisive = (top2[..., 0] - top2[..., 1]) > tol
        same = o.argmax(-1) == e.argmax(-1)
        rows.append({"batch": key[0], "prompt": key[1], "max_abs_diff": diff, "tolerance": tol,
                     "diff_ulps": diff / bf16_ulp(scale), "positions": decisive.numel(),
                     "decisive": int(decisive.sum()), "decisive_agree": int((same & decisive).sum()),
                     "argmax_agree_all": int(same.sum())})
    return rows


def derive(region: dict) -> dict:
    """One raw plugin region -> the counters the report uses: totals over all threads,
    the busiest thread's cycles and how many threads ran (``threads_active``)."""
    d = {k: region.get(k, 0) for k in RAW_COUNTERS}
    d.update(estimate.thread_view(region))
    if "calls" in region:
        d["calls"] = region["calls"]
    return d


def _per(region: dict | None, div: float) -> dict | None:
    if region is None:
        return None
    d = {k: region.get(k, 0) / div for k in COUNTERS}
    d["threads_active"] = region.get("threads_active", 1)
    return d


def extrapolate(shallow: dict, deep: dict, a: int, b: int, depth: int) -> dict:
    """Per-region counters at `depth` layers from counts at `a` < `b` layers. The decoder
    layers are identical, so every counter is fixed + layers * per_layer, exactly (up to
    Python noise): per_layer = (c_b - c_a) / (b - a). Weight traffic is linear too, since
    a layer's weights (>= 40 MB at 1.5B dimensions) are far beyond the modelled caches."""
    out = {}
    for rid in shallow:
        if rid not in deep:
            continue
        s_, d_ = shallow[rid], deep[rid]
        out[rid] = {k: s_.get(k, 0) + (depth - a) * (d_.get(k, 0) - s_.get(k, 0)) / (b - a) for k in COUNTERS}
        out[rid]["threads_active"] = max(s_.get("threads_active", 1), d_.get("threads_active", 1))
    return out


def load_regions(out: Path, mode: str, cspec: dict) -> dict | None:
    """The counted regions of `mode`, extrapolated to the model's depth when the counting
    runs used fewer layers (--count-layers)."""
    runs = cspec.get("runs") or [{"tag": "", "layers": cspec["dims"]["num_hidden_layers"]}]
    regions = [_run_regions(out, mode, r["tag"]) for r in runs]
    if any(r is None for r in regions):
        return None
    if len(runs) == 1:
        return regions[0]
    return extrapolate(regions[0], regions[1], runs[0]["layers"], runs[1]["layers"],
                       cspec["dims"]["num_hidden_layers"])


def _driver_backend(out: Path, mode: str, tag: str) -> str | None:
    """The driver's JSON line of a counting run: which ggml CPU variant the counting QEMU loaded."""
    stdout = out / f"count-{mode}{tag}.stdout"
    if stdout.is_file():
        lines = [ln for ln in stdout.read_text(errors="replace").splitlines() if ln.startswith("{")]
        if lines:
            try:
                return json.loads(lines[-1]).get("ggml_cpu_so")
            except ValueError:
                pass
    return None


def _run_regions(out: Path, mode: str, tag: str) -> dict | None:
    """The derived regions of one counting run (counts-MODE TAG.json), or None if it is missing."""
    path = out / f"counts-{mode}{tag}.json"
    if not path.is_file():
        return None
    return {rid: derive(r) for rid, r in json.loads(path.read_text()).get("regions", {}).items()}


def counted_driver(out: Path, mode: str, cspec: dict) -> list[dict] | None:
    """Per-token counters of a mode run by an external program (llama.cpp's decode driver,
    rvv-generate), one row per thread count it was counted at (modes.count_threads): its
    decode run charges every decode token to the run's region (batch 1, every thread
    counted), and, for rvv-generate, the counting prompt's prefill to prefill_region; its
    long-prompt run charges the whole long prompt to prefill_region, counted at full depth
    or, with --count-layers, at two depths and extrapolated."""
    argv = out / f"count-argv-{mode}.json"
    if not argv.is_file():
        return None
    spec_runs = json.loads(argv.read_text())
    runs = spec_runs.get("runs") or [dict(spec_runs, tag="", kind="decode", threads=1)]  # older: one 1-thread run
    rows = []
    for t in sorted({r["threads"] for r in runs}, reverse=True):
        dec_run = next((r for r in runs if r["threads"] == t and r["kind"] == "decode"), None)
        regs = _run_regions(out, mode, dec_run["tag"]) if dec_run else None
        reg = (regs or {}).get(str(dec_run.get("region", LLAMACPP_REGION))) if dec_run else None
        if not reg:
            continue
        dec = _per(reg, dec_run["steps"])
        pre = pre_est = None
        if dec_run.get("prefill_region") and (regs or {}).get(str(dec_run["prefill_region"])):
            p = dec_run["prompt"]
            pre = _per(regs[str(dec_run["prefill_region"])], p)
            pre_est = estimate.estimates(None, _scale(pre, p), p)
        row = {"batch": 1, "threads": t, "prompt": dec_run["prompt"], "decode_linear": None, "decode_rest": dec,
               "backend": _driver_backend(out, mode, dec_run["tag"]), "decode_calls": reg.get("calls"),
               "prefill_linear": None, "prefill_rest": pre,
               **_est_keys("decode", estimate.estimates(None, dec, 1)), **_est_keys("prefill", pre_est)}
        row.update(_driver_long_prompt(out, mode, cspec, [r for r in runs if r["threads"] == t and r["kind"] == "prompt"]))
        rows.append(row)
    return rows or None


def _driver_long_prompt(out: Path, mode: str, cspec: dict, runs: list[dict]) -> dict:
    """The long prompt of a driver at one thread count: counters per prompt token and its
    estimate ({} when it was not counted)."""
    if not runs:
        return {}
    region = str(runs[0]["prefill_region"])
    per_run = [(_run_regions(out, mode, r["tag"]) or {}).get(region) for r in runs]
    if not all(per_run):
        return {}
    p = runs[0]["prompt"]
    if len(runs) == 1:
        whole = per_run[0]
    else:  # --count-layers: the same two depths as the torch modes' runs
        depth = {r["tag"]: r["layers"] for r in cspec.get("runs") or []}
        (a, ra), (b, rb) = sorted(((depth[r["layers_tag"]], g) for r, g in zip(runs, per_run)), key=lambda x: x[0])
        whole = extrapolate({"x": ra}, {"x": rb}, a, b, cspec["dims"]["num_hidden_layers"])["x"]
    per = _per(whole, p)
    return {"long_prompt": p, "prompt_linear": None, "prompt_rest": per,
            **_est_keys("prompt", estimate.estimates(None, _scale(per, p), p))}


def _scale(d: dict | None, n: float) -> dict | None:
    """Per-token counters -> one step of n tokens."""
    return {k: v * n if k in COUNTERS else v for k, v in d.items()} if d else None


def _est_keys(kind: str, est: dict | None) -> dict:
    """est_<kind>_tok_s (the headline: the conservative calibrated bandwidth),
    est_<kind>_tok_s_ceiling (peak bandwidth), est_<kind>_tok_s_dram_fit (the DRAM-bound
    fit) and est_<kind> (every estimate in full)."""
    keys = {f"est_{kind}_tok_s": estimate.HEADLINE, f"est_{kind}_tok_s_ceiling": estimate.PEAK[0],
            f"est_{kind}_tok_s_dram_fit": estimate.DRAM_FIT[0]}
    out = {k: (est[b]["tok_s"] if est else None) for k, b in keys.items()}
    out[f"est_{kind}"] = est
    return out


def counted(out: Path, mode: str, cspec: dict) -> list[dict] | None:
    """Per-token counters (decode and prefill, Linear and the rest) for each batch size."""
    if mode in DRIVER_MODES:
        return counted_driver(out, mode, cspec)
    regions = load_regions(out, mode, cspec)
    if regions is None:
        return None
    rows = []
    p, steps = cspec["prompts"][0], cspec["steps"]
    for i, b in enumerate(cspec["batches"]):
        g = lambda kind: regions.get(str(region_id(kind, i)))  # noqa: E731
        if g(DECODE_REST) is None:
            continue
        dec_l, dec_r = _per(g(DECODE_LINEAR), steps * b), _per(g(DECODE_REST), steps * b)
        pre_l, pre_r = _per(g(PREFILL_LINEAR), b * p), _per(g(PREFILL_REST), b * p)
        # The estimate wants one step: a decode step of b tokens, a prefill of b*p tokens.
        dec_est = estimate.estimates(_scale(dec_l, b), _scale(dec_r, b), b)
        pre_est = estimate.estimates(_scale(pre_l, b * p), _scale(pre_r, b * p), b * p)
        row = {"batch": b, "threads": policy.K1_CORES, "prompt": p, "decode_linear": dec_l, "decode_rest": dec_r,
               "prefill_linear": pre_l, "prefill_rest": pre_r,
               **_est_keys("decode", dec_est), **_est_keys("prefill", pre_est)}
        long_p = cspec.get("count_prefill") or 0
        if b == 1 and long_p and regions.get(str(PROMPT_REST)):
            # The long prompt (worker._count_long_prompt): batch 1, its own regions.
            pl, pr = _per(regions.get(str(PROMPT_LINEAR)), long_p), _per(regions[str(PROMPT_REST)], long_p)
            row.update({"long_prompt": long_p, "prompt_linear": pl, "prompt_rest": pr,
                        **_est_keys("prompt", estimate.estimates(_scale(pl, long_p), _scale(pr, long_p), long_p))})
        rows.append(row)
    return rows


def _decode_dram_bytes(c: dict) -> float:
    """DRAM bytes (read + written) per decode token, Linear and the rest together."""
    return sum((d or {}).get(k, 0) for d in (c["decode_linear"], c["decode_rest"])
               for k in ("dram_read_bytes", "dram_write_bytes"))


def _fmt_n(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


def memory_goals(modes: dict) -> dict:
    """Issue 13's memory goals from the peaks over the empty worker's: regional BF16 <= eager
    + 5%, regional INT4 <= 0.4x eager (BF16). None where a mode or the baseline is missing."""
    over = {m: d.get("rss_over_empty_kib") for m, d in modes.items()}
    e = over.get("eager")
    g = {}
    if e and over.get("regional"):
        g["regional_over_eager"] = over["regional"] / e
        g["regional_ok"] = g["regional_over_eager"] <= 1.05
    if e and over.get("regional-int4"):
        g["int4_over_eager"] = over["regional-int4"] / e
        g["int4_ok"] = g["int4_over_eager"] <= 0.4
    if e and over.get("regional-int8"):
        g["int8_over_eager"] = over["regional-int8"] / e
    return g


def weight_bytes_per_token(m: dict, batch: int) -> float | None:
    """Linear weight bytes one decode token reads: a step reads each weight once for the
    whole batch."""
    return m["weight_bytes_step"] / batch if m.get("weight_bytes_step") else None


def _mode_entry(out: Path, mode: str, r: dict, eager_logits, spec: dict, cspec: dict, empty_kib: int | None) -> dict:
    """One mode's row of report.json: its worker's result, its agreement with eager's
    logits (asserted for the BF16 modes) and its counts."""
    import torch  # lazy: torch; this module must import without it (--refresh, host tools)

    m = {k: r.get(k) for k in ("compile_s", "prepare_s", "graphs", "prefill_chunk", "rss_peak_kib", "rss_model_kib",
                               "param_bytes", "packed_bytes", "routing", "workloads", "threads",
                               "weight_bytes_step", "weights", "group_size", "activations", "formats", "unavailable",
                               "backend", "format", "gguf_file_bytes", "driver_rss_peak_kib",
                               "package_file_bytes", "runner_rss_peak_kib", "max_cache_len", "compiled_layers",
                               "rvv_attention", "gguf_sha256", "linear_types", "file_formats")}
    m["compile_s"] = m["compile_s"] or 0.0
    m["packed_bytes"] = m["packed_bytes"] or 0
    m["workloads"] = m["workloads"] or []
    m["artifacts"] = len(r["artifacts"]) if "artifacts" in r else r.get("graphs")
    if m["rss_peak_kib"] and empty_kib:
        m["rss_over_empty_kib"] = m["rss_peak_kib"] - empty_kib
    m["ggml"] = r.get("ggml")
    if mode != "eager" and (out / f"logits-{mode}.pt").is_file():
        # BF16 modes must agree with eager (the package holds the same BF16 weights);
        # INT8/INT4 and llama.cpp hold others.
        asserted = MODES[mode].asserted if mode in MODES else PACKAGE_MODES.get(mode) == "bf16"
        m["agreement"] = agreement(eager_logits, torch.load(out / f"logits-{mode}.pt"))
        for a in m["agreement"]:
            a["asserted"] = asserted
            a["ok"] = not asserted or (a["decisive_agree"] == a["decisive"]
                                       and (not spec["quick"] or a["max_abs_diff"] <= a["tolerance"]))
    m["counts"] = counted(out, mode, cspec)
    return m


def write(out: Path) -> int:
    import torch  # lazy: torch; this module must import without it (--refresh, host tools)

    spec_path = out / "spec.json"
    if not spec_path.is_file():
        print(f"rvv_inductor demo: {out} has no spec.json (run the demo first)")
        return 1
    spec = json.loads(spec_path.read_text())
    cspec = json.loads((out / "spec-count.json").read_text())
    results = {m: json.loads((out / f"result-{m}.json").read_text())
               for m in spec["modes"] if (out / f"result-{m}.json").is_file()}
    if "eager" not in results:
        print(f"rvv_inductor demo: {out} has no eager result")
        return 1
    eager = torch.load(out / "logits-eager.pt")
    empty = out / f"result-{EMPTY}.json"
    rep = {"spec": spec, "count_spec": {k: cspec.get(k) for k in ("prompts", "steps", "batches", "runs",
                                                                   "count_prefill")},
           "empty_rss_peak_kib": json.loads(empty.read_text())["rss_peak_kib"] if empty.is_file() else None,
           "modes": {}, "board_numbers_tok_s": estimate.BOARD_NUMBERS,
           "k1_model": _k1_model(),
           "calibration": _calibration(),
           # which kernels the rvv_inductor:: operators ran in the modes that use them:
           # "c++" (librvv_inductor_ops.so) or "ctypes (why)"
           "operator_kernels": {m: r["operator_kernels"] for m, r in results.items() if "operator_kernels" in r}}
    ok = True
    for mode, r in results.items():
        rep["modes"][mode] = _mode_entry(out, mode, r, eager, spec, cspec, rep["empty_rss_peak_kib"])
        ok &= all(a["ok"] for a in rep["modes"][mode].get("agreement", []))
    rep["memory_goals"] = memory_goals(rep["modes"])
    _bandwidth_bounds(rep, results["eager"]["param_bytes"])
    _emit(out, rep)
    if not ok:
        print("AGREEMENT FAILED: a compiled mode disagrees with eager beyond the stated tolerance")
    return 0 if ok else 1


def refresh(out: Path) -> int:
    """Re-derive the counted work and both K1 estimates of an existing report (report.json
    and the raw counts-*.json beside it) with this code, and re-render report.txt/.csv
    (and the plot when matplotlib is there). Torch-free: the logits are not needed, the
    agreement rows already in report.json are kept as they are; except for a mode listed
    in spec.json that has a result but no row yet, which is added (with torch)."""
    rep = json.loads((out / "report.json").read_text())
    cspec = dict(rep["count_spec"], dims=rep["spec"]["dims"])
    for mode, m in rep["modes"].items():
        m["counts"] = counted(out, mode, cspec)
    # A mode run into this directory after the report (its worker by hand, then counted):
    # its row is added, with its agreement from its and eager's logits (needs torch).
    spec = json.loads((out / "spec.json").read_text()) if (out / "spec.json").is_file() else rep["spec"]
    added = [m for m in spec["modes"] if m not in rep["modes"] and (out / f"result-{m}.json").is_file()]
    if added:
        import torch  # lazy: torch; this module must import without it (--refresh, host tools)

        eager = torch.load(out / "logits-eager.pt")
        for mode in added:
            r = json.loads((out / f"result-{mode}.json").read_text())
            rep["modes"][mode] = _mode_entry(out, mode, r, eager, rep["spec"], cspec, rep.get("empty_rss_peak_kib"))
        rep["spec"]["modes"] = [m for m in spec["modes"] if m in rep["modes"]]
    rep["k1_model"] = _k1_model()
    rep["calibration"] = _calibration()
    rep["memory_goals"] = memory_goals(rep["modes"])
    rep["board_numbers_tok_s"] = estimate.BOARD_NUMBERS
    pb = (rep["modes"].get("eager") or {}).get("param_bytes")
    if pb:
        _bandwidth_bounds(rep, pb)
    _emit(out, rep)
    return 0


def _bandwidth_bounds(rep: dict, param_bytes: int) -> None:
    """tok/s if decode only streamed the weights, at the peak and at the achieved bandwidth."""
    batches = rep["spec"]["batches"]
    rep["bandwidth_bound_tok_s"] = {b: estimate.bandwidth_bound_tok_s(param_bytes, b) for b in batches}
    rep["bandwidth_bound_tok_s_achieved"] = {
        b: estimate.bandwidth_bound_tok_s(param_bytes, b, policy.K1_DRAM_ACHIEVED_BYTES_PER_S) for b in batches}


def _emit(out: Path, rep: dict) -> None:
    """report.json, .csv, .txt (also printed) and the plot when matplotlib is there."""
    (out / "report.json").write_text(json.dumps(rep, indent=1))
    _write_csv(out, rep)
    text = render(rep)
    (out / "report.txt").write_text(text)
    print(text)
    try:
        _plot(out, rep)
    except ImportError as e:
        print(f"(no plot: {e})")


def _k1_model() -> dict:
    return {"clock_hz": policy.K1_CLOCK_HZ, "dlen": policy.K1_DLEN_BITS, "cores": policy.K1_CORES,
            "dram_bytes_s": policy.K1_DRAM_BYTES_PER_S, "dram_achieved_bytes_s": policy.K1_DRAM_ACHIEVED_BYTES_PER_S,
            "dram_fit_bytes_s": policy.K1_DRAM_FIT_BYTES_PER_S,
            "cpi_scalar": policy.CPI_SCALAR, "headline": estimate.HEADLINE}


def _calibration() -> dict:
    """The calibrated bandwidth's fit and its error on the other published board numbers,
    the DRAM-bound fit with its residuals, and the compute side's check."""
    def fit(s: dict) -> dict:
        return {k: s[k] for k in ("bandwidth", "reference", "max_abs_error", "worst", "within_tolerance", "tolerance",
                                  "rms_log_error")} | {
            "rows": [{k: r[k] for k in ("key", "published_tok_s", "weight_bytes", "predicted_tok_s", "error")}
                     for r in s["rows"]]}
    out = fit(calibration.summary())
    out["dram_bound"] = fit(calibration.summary(policy.K1_DRAM_FIT_BYTES_PER_S, calibration.DRAM_BOUND))
    out["compute"] = calibration.compute_checks()
    return out


def _write_csv(out: Path, rep: dict) -> None:
    cols = ["mode", "batch", "prompt", "emulated_prefill_s", "emulated_decode_step_s", "max_abs_logit_diff",
            "diff_bf16_ulps", "decisive_positions", "decisive_agree", "top1_agree", "positions", "compile_s",
            "artifacts", "rss_peak_mib", "rss_over_empty_mib", "param_bytes", "packed_bytes",
            "weight_bytes_per_token", "decode_insns_per_token_linear", "decode_insns_per_token_rest",
            "decode_dram_bytes_per_token", "count_prompt", "count_threads", "est_k1_decode_tok_s_achieved",
            "est_k1_decode_tok_s_ceiling", "est_k1_decode_tok_s_dram_fit",
            "est_k1_prefill_tok_s_achieved", "est_k1_prefill_tok_s_ceiling", "est_k1_decode_serial_s_achieved",
            "long_prompt", "est_k1_prompt_tok_s_achieved", "est_k1_prompt_tok_s_dram_fit", "est_k1_prompt_tok_s_ceiling",
            "est_k1_ttft_s_achieved", "est_k1_ttft_s_dram_fit", "est_k1_ttft_s_ceiling",
            "est_k1_decode_tok_s_achieved_4t", "est_k1_prompt_tok_s_achieved_4t", "est_k1_ttft_s_achieved_4t",
            "backend", "unavailable"]
    with open(out / "report.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for mode, m in rep["modes"].items():
            agr = {(a["batch"], a["prompt"]): a for a in m.get("agreement") or []}
            # counted once per batch size (a driver: per thread count, the first is the K1's cores)
            cnt, four = {}, None
            for c in m["counts"] or []:
                cnt.setdefault(c["batch"], c)
                if c.get("threads") == 4 and c is not cnt[c["batch"]]:
                    four = c
            rows = m["workloads"] or [{"batch": "", "prompt": ""}]  # an unavailable mode: one row saying why
            for wl in rows:
                a = agr.get((wl["batch"], wl["prompt"]), {})
                c = cnt.get(wl["batch"])  # counted once per batch size, at the counting prompt length
                dl, dr = (c or {}).get("decode_linear"), (c or {}).get("decode_rest")
                dram = _decode_dram_bytes(c) if c else 0
                wbt = weight_bytes_per_token(m, wl["batch"]) if wl["batch"] else None
                rss = m.get("rss_peak_kib") or m.get("driver_rss_peak_kib")
                over = m.get("rss_over_empty_kib")
                w.writerow([mode, wl["batch"], wl["prompt"], _f(wl.get("prefill_s"), 3),
                            _f(wl.get("decode_step_median_s"), 3), a.get("max_abs_diff", ""),
                            _f(a.get("diff_ulps"), 2), a.get("decisive", ""), a.get("decisive_agree", ""),
                            a.get("argmax_agree_all", ""), a.get("positions", ""),
                            f"{m['compile_s']:.1f}", m["artifacts"] if m["artifacts"] is not None else "",
                            _f(rss / 1024 if rss else None, 0), _f(over / 1024 if over else None, 0),
                            m.get("param_bytes") or "", m["packed_bytes"], _f(wbt, 0),
                            _f(dl["insns"] if dl else None, 0), _f(dr["insns"] if dr else None, 0),
                            _f(dram if c else None, 0), c["prompt"] if c else "", c.get("threads", "") if c else "",
                            _f(c["est_decode_tok_s"] if c else None, 3),
                            _f(c["est_decode_tok_s_ceiling"] if c else None, 3),
                            _f(c.get("est_decode_tok_s_dram_fit") if c else None, 3),
                            _f(c["est_prefill_tok_s"] if c else None, 2),
                            _f(c["est_prefill_tok_s_ceiling"] if c else None, 2),
                            _f((c.get("est_decode") or {}).get(estimate.HEADLINE, {}).get("serial_s") if c else None, 5),
                            *_prompt_csv(c, four), m.get("backend") or "", m.get("unavailable") or ""])


def _prompt_csv(c: dict | None, four: dict | None) -> list[str]:
    """The long-prompt columns of one CSV row: prompt length, tok/s and TTFT per bandwidth,
    then the 4-thread row's decode, prompt and TTFT at the headline bandwidth."""
    def ttft(r, k):
        return _f(r["long_prompt"] / r["est_prompt_tok_s" + k], 3) if r and r.get("long_prompt") else ""

    def tok(r, k):
        return _f(r.get("est_prompt_tok_s" + k), 3) if r and r.get("long_prompt") else ""
    return [str(c["long_prompt"]) if c and c.get("long_prompt") else "", tok(c, ""), tok(c, "_dram_fit"),
            tok(c, "_ceiling"), ttft(c, ""), ttft(c, "_dram_fit"), ttft(c, "_ceiling"),
            _f(four["est_decode_tok_s"], 3) if four else "", tok(four, ""), ttft(four, "")]


def _f(x, digits: int) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def _emulated(rep: dict) -> str:
    where = "emulated under QEMU, not RISC-V speed" if rep["spec"].get("emulated") else "measured on this machine"
    jobs = rep["spec"].get("measure_jobs", 1)
    # --measure-jobs: after eager, the mode workers shared the cores; times are comparable
    # only between modes that had the same neighbours
    return where + (f"; {jobs} mode workers ran side by side after eager" if jobs > 1 else "")


def _header(rep: dict) -> list[str]:
    s = rep["spec"]
    return [f"rvv_inductor demo report -- Qwen2 architecture, {s['source']}",
            f"dims {s['dims']}",
            f"batches {s['batches']}, prompts {s['prompts']}, {s['steps']} decode steps; Inductor cache "
            f"{'warm (--keep-cache)' if s.get('warm_cache') else 'cold'}",
            _operator_kernels_line(rep)]


def _operator_kernels_line(rep: dict) -> str:
    """Which CPU kernels the rvv_inductor:: operators ran: the C++ library, or the ctypes
    fallback (a slower path, and a different one from the C++ operator path's counts)."""
    kinds = rep.get("operator_kernels")
    if not kinds:
        return "operator kernels: not recorded (a run before they were)"
    by_kind: dict[str, list[str]] = {}
    for mode, kind in kinds.items():
        by_kind.setdefault(kind, []).append(mode)
    if len(by_kind) == 1:
        kind = next(iter(by_kind))
        return f"operator kernels: {'C++ (librvv_inductor_ops.so)' if kind == 'c++' else kind}, every mode"
    return "operator kernels: " + "; ".join(f"{k}: {', '.join(sorted(ms))}" for k, ms in sorted(by_kind.items()))


def _compile_and_memory(rep: dict) -> list[str]:
    modes = rep["modes"]
    base = rep.get("empty_rss_peak_kib")
    L = [f"Compile and memory (wall times {_emulated(rep)}):",
         f"  {'mode':15} {'compile s':>10} {'artifacts':>9} {'peak RSS':>10} {'- empty':>10} {'params':>10} "
         f"{'packed':>10}"]
    for mode, m in modes.items():
        if m.get("unavailable") and not m.get("rss_peak_kib"):
            L.append(f"  {mode:15} unavailable: {m['unavailable']}")
            continue
        if mode in LLAMACPP_MODES:
            rss = m.get("driver_rss_peak_kib")
            L.append(f"  {mode:15} {'-':>10} {'-':>9} {_mib(rss):>10} {'-':>10} {'-':>10} "
                     f"{_mib((m.get('gguf_file_bytes') or 0) / 1024):>10}  (llama.cpp driver process; 'packed' = "
                     "the GGUF file)")
            continue
        packed = m.get("package_file_bytes") if mode in PACKAGE_MODES else m["packed_bytes"]
        L.append(f"  {mode:15} {m['compile_s']:10.1f} {m['artifacts'] or 0:9d} {_mib(m['rss_peak_kib']):>10} "
                 f"{_mib(m.get('rss_over_empty_kib')):>10} {_mib((m['param_bytes'] or 0) / 1024):>10} "
                 f"{_mib((packed or 0) / 1024):>10}"
                 + ("  (export + AOTInductor compile of the decode step"
                    + (f" and the {m['prefill_chunk']}-token prefill step" if m.get("prefill_chunk") else "")
                    + "; peak = that process; 'packed' = the .pt2 "
                    f"file; rvv-generate's own peak {_mib(m.get('runner_rss_peak_kib'))})" if mode in PACKAGE_MODES
                    else ""))
    if "regional" in modes and "whole" in modes and modes["whole"]["compile_s"] > 0:
        ratio = modes["regional"]["compile_s"] / modes["whole"]["compile_s"]
        L.append(f"  regional / whole-model compile time: {ratio:.2f} (goal <= 0.33)")
    g = rep.get("memory_goals") or {}
    if "regional_over_eager" in g:
        L.append(f"  regional BF16 peak - empty = {g['regional_over_eager']:.2f}x eager's (goal <= 1.05: "
                 f"{'met' if g['regional_ok'] else 'missed'})")
    if "int4_over_eager" in g:
        L.append(f"  regional INT4 peak - empty = {g['int4_over_eager']:.2f}x eager BF16's (goal <= 0.40: "
                 f"{'met' if g['int4_ok'] else 'missed'})"
                 + (f"; INT8: {g['int8_over_eager']:.2f}x" if "int8_over_eager" in g else ""))
    L.append("  compile s = Dynamo's compile timer (every compile, also recompiles during generation; else the first "
             "pass minus the same work warm); peak RSS includes the emulator's own memory when emulated; '- empty' "
             f"subtracts the peak of a worker that imports torch and transformers and builds nothing "
             f"({_mib(base)}); 'packed' = the RVVLinear/RVVQuantLinear buffers, which replace the originals.")
    return L


def _mib(kib) -> str:
    return "-" if not kib else f"{kib / 1024:.0f} MiB"


def _agreement(rep: dict) -> list[str]:
    L = [f"Agreement with eager (teacher-forced logits; tolerance {ULPS} BF16 ulps of the largest logit; "
         "greedy tokens compared where eager's top-2 margin exceeds it; the package and llama.cpp are "
         "teacher-forced through their drivers' --feed-ids / --feed). INT8/INT4 and llama.cpp (its own kernels "
         "and weight formats) hold other weights than eager's "
         "BF16: their distance is reported, not asserted (tests/python/test_quantized.py asserts regional INT8/INT4 "
         "against models holding the same dequantized weights):"]
    for mode, m in rep["modes"].items():
        for a in m.get("agreement") or []:
            verdict = ("ok" if a["ok"] else "FAIL") if a.get("asserted", True) else "(reported)"
            L.append(f"  {mode:15} batch {a['batch']} prompt {a['prompt']:4}: max |diff| {a['max_abs_diff']:.4g} "
                     f"({a['diff_ulps']:.1f} ulps), top-1 equal on {a['argmax_agree_all']}/{a['positions']} "
                     f"positions ({a['decisive_agree']}/{a['decisive']} decisive) {verdict}")
    return L


def _routing(rep: dict) -> list[str]:
    L = ["Layer routing:"]
    for mode in ("regional", "regional-int8", "regional-int4", "layers-int4", "whole", *PACKAGE_MODES):
        if mode in rep["modes"] and not rep["modes"][mode].get("unavailable"):
            r = rep["modes"][mode]["routing"]
            act = rep["modes"][mode].get("activations")
            L.append(f"  {mode}: {len(r['rvv'])} on RVV, {len(r['fallback'])} fell back"
                     + (f"; activations at M >= 2 (the prompt): {act}" if act else ""))
            if mode in ("regional-int8", "regional-int4", "layers-int4"):
                continue  # the same layers as regional's
            L += [f"    RVV   {x}" for x in r["rvv"][:12]] + (["    ..."] if len(r["rvv"]) > 12 else [])
            L += [f"    kept  {x}" for x in r["fallback"][:12]] + (["    ..."] if len(r["fallback"]) > 12 else [])
    for mode, m in rep["modes"].items():
        if mode in LLAMACPP_MODES:
            c = (m["counts"] or [{}])[0]
            L.append(f"  {mode}: " + (f"unavailable: {m['unavailable']}" if m.get("unavailable") else
                                      f"ggml CPU backend variant loaded: {m.get('backend') or 'not reported'} "
                                      f"(measured run, {'QEMU 7.2: no riscv_hwprobe' if rep['spec'].get('emulated') else 'native'})"
                                      + (f"; {c['backend']} in the counting run (QEMU 10)" if c.get("backend") else "")))
    return L


def _wall_times(rep: dict) -> list[str]:
    L = [f"Emulated wall time per workload ({_emulated(rep)}):"]
    for mode, m in rep["modes"].items():
        for wl in m["workloads"]:
            L.append(f"  {mode:15} batch {wl['batch']} prompt {wl['prompt']:4}: prefill {wl['prefill_s']:8.2f} s, "
                     f"decode step {wl['decode_step_median_s']:7.2f} s (median)")
    return L


def _threads_note(rep: dict) -> str:
    """How the counted regions were split: threads that ran, measured or assumed."""
    active = {name: max(int((c["decode_linear"] or c["decode_rest"]).get("threads_active", 1)) for c in m["counts"])
              for name, m in rep["modes"].items() if m["counts"]}
    if active and max(active.values()) > 1:
        per_mode = ", ".join(f"{name} {n}" for name, n in active.items())
        return (f"every thread counted (threads active in the decode step: {per_mode}), compute = the "
                "busiest thread's cycles")
    return (f"counted on one thread: Linear ASSUMED split evenly over {rep['k1_model']['cores']} cores "
            "(total / cores), the rest on one")


def _bw_columns(rep: dict) -> list[tuple[str, str, str]]:
    """(key suffix of the est_* fields, short label, long label) per bandwidth column, the
    headline last."""
    k = rep["k1_model"]
    fit = k.get("dram_fit_bytes_s") or policy.K1_DRAM_FIT_BYTES_PER_S
    return [("_ceiling", f"peak {k['dram_bytes_s'] / 1e9:.2f}", f"K1 ceiling ({k['dram_bytes_s'] / 1e9:.2f} GB/s peak)"),
            ("_dram_fit", f"fit {fit / 1e9:.2f}", f"K1, DRAM-bound fit ({fit / 1e9:.2f} GB/s)"),
            ("", f"cal {k['dram_achieved_bytes_s'] / 1e9:.2f}",
             f"K1 as achieved (calibrated {k['dram_achieved_bytes_s'] / 1e9:.2f} GB/s) = HEADLINE")]


def _bw_labels(rep: dict) -> tuple[str, str]:
    cols = _bw_columns(rep)
    return cols[0][2], cols[-1][2]


def _calibration_line(rep: dict) -> str:
    c = rep["calibration"]
    verdict = ("within" if c["within_tolerance"] else "OUTSIDE") + f" the +-{c['tolerance']:.0%} the model claims"
    errs = ", ".join(f"{r['key']} {r['error']:+.0%}" for r in c["rows"] if r["key"] != c["reference"])
    line = (f"  Calibration: achieved DRAM bandwidth {c['bandwidth'] / 1e9:.3f} GB/s fitted to {c['reference']} "
            f"(python/rvv_inductor/demo/calibration.py); its error on the other published board numbers: {errs}; "
            f"worst {c['max_abs_error']:.0%} ({c['worst']}), {verdict}.")
    d = c.get("dram_bound")
    if d:
        line += (f" DRAM-bound fit {d['bandwidth'] / 1e9:.3f} GB/s (to {d['reference']}): residuals "
                 + ", ".join(f"{r['key']} {r['error']:+.0%}" for r in d["rows"])
                 + f"; RMS log error {d['rms_log_error']:.2f} (conservative fit: {c['rms_log_error']:.2f}).")
    by_key: dict[str, list[dict]] = {}
    for cc in c.get("compute") or []:
        by_key.setdefault(cc["key"], []).append(cc)
    for rows in by_key.values():
        cc = rows[0]
        line += (f" Compute side: {cc['program']}, {cc['model']} {cc['format']} pp{cc['prompt']} published "
                 f"{cc['published_tok_s']:.2f} tok/s ({cc['source']}, threads not published); the model on Debian's "
                 "llama.cpp, counted: " + ", ".join(f"{r['predicted_tok_s']:.2f} at {r['threads']} threads "
                                                   f"({r['error']:+.0%})" for r in rows)
                 + " (bench/results/calibration).")
    if c.get("compute"):
        line += " Not countable here (Debian's llama.cpp lacks the code path): " + "; ".join(
            f"{prog}, {model} {fmt} pp{pp} {tok:.2f} tok/s ({src}): {why}"
            for prog, model, fmt, pp, tok, src, why in calibration.COMPUTE_NOT_COUNTABLE) + "."
    return line


def _ms(x) -> str:
    return f"{x * 1e3:.1f}" if x is not None else "-"


def _counted_work(rep: dict) -> list[str]:
    modes = rep["modes"]
    if not any(m["counts"] for m in modes.values()):
        return ["Counted work per token: not measured in this run (scripts/demo runs the counting pass under the "
                "rvvcount QEMU plugin; it is skipped with --no-count and on riscv64 hosts)."]
    runs = rep["count_spec"].get("runs") or []
    how = (f"counted at {runs[0]['layers']} and {runs[1]['layers']} layers and extrapolated linearly to "
           f"{rep['spec']['dims']['num_hidden_layers']} (every counter and the threads' cycles), "
           if len(runs) == 2 else "")
    ceil_l, ach_l = _bw_labels(rep)
    L = [f"Counted work per token ({how}rvvcount QEMU plugin, {_threads_note(rep)}; prompt "
         f"{rep['count_spec']['prompts'][0]}; Linear = the Linear modules' calls, rest = everything else "
         "in the step, Python included; whole-model, package and llama.cpp: not separable; package and llama.cpp: "
         "their C++ drivers (rvv-generate, llama.cpp's decode driver), no Python; serial = the opening thread's "
         "cycles beyond the median other thread, modelled without overlap). ESTIMATED K1 tok/s in two columns: "
         "A = " + ceil_l + ", B = " + ach_l + ":",
         f"  {'mode':15} {'thr':>3} {'batch':>5} {'dec insns Linear':>16} {'dec insns rest':>14} {'dec DRAM B':>10} "
         f"{'serial ms':>9} {'pre insns/tok':>13} | {'decode A':>9} {'decode B':>9} | {'prefill A':>9} "
         f"{'prefill B':>9}"]
    for mode, m in modes.items():
        for c in m["counts"] or []:
            dl, dr = c["decode_linear"], c["decode_rest"]
            pre = (sum((d or {}).get("insns", 0) for d in (c["prefill_linear"], c["prefill_rest"]))
                   if c["prefill_rest"] else None)
            serial = (c.get("est_decode") or {}).get(estimate.HEADLINE, {}).get("serial_s")
            L.append(f"  {mode:15} {c.get('threads', 1):3d} {c['batch']:5d} {_fmt_n(dl['insns'] if dl else None):>16} "
                     f"{_fmt_n(dr['insns']):>14} {_fmt_n(_decode_dram_bytes(c)):>10} {_ms(serial):>9} "
                     f"{_fmt_n(pre):>13} | {c['est_decode_tok_s_ceiling']:9.3f} {c['est_decode_tok_s']:9.3f} | "
                     f"{_f(c['est_prefill_tok_s_ceiling'], 2) or '-':>9} {_f(c['est_prefill_tok_s'], 2) or '-':>9}")
    k = rep["k1_model"]
    L.append(f"  ESTIMATE, not a measurement: {k['clock_hz'] / 1e9:.1f} GHz in-order, DLEN {k['dlen']}, "
             f"{k['cores']} cores; a region = its serial part (the opening thread beyond the median other thread: "
             "Python, per-call work, graph building) + max(its busiest other thread's cycles, all threads' DRAM "
             "bytes on one channel); a region counted on one thread: Linear / "
             f"{k['cores']} (assumed), the rest serial (python/rvv_inductor/demo/estimate.py).")
    L.append(_calibration_line(rep))
    return L


def _mode_rows(rep: dict):
    """(mode, m, count row at batch 1 or None) per mode and thread count: a driver counted
    at several thread counts gives a row each."""
    for mode, m in rep["modes"].items():
        rows = [c for c in m["counts"] or [] if c["batch"] == 1]
        for c in rows or [None]:
            yield mode, m, c


def _side_by_side(rep: dict) -> list[str]:
    """One table, one row per mode (and thread count) at batch 1: the RVV modes and
    llama.cpp on the same weights."""
    cols = _bw_columns(rep)
    L = ["Side by side, one decode token at batch 1 (weight bytes: the Linear weights as stored, read once per "
         "step; instructions and DRAM bytes: counted, all threads; K1 tok/s: ESTIMATED, not measured; thr = the "
         "threads counted: rows compare only at equal thread counts):",
         f"  {'mode':15} {'thr':>3} {'weights':>8} {'weight B/tok':>12} {'insns/tok':>10} {'DRAM B/tok':>10} "
         + " ".join(f"{c[1] + ' GB/s':>14}" for c in cols) + "  backend / note"]
    for mode, m, c in _mode_rows(rep):
        fmt = m.get("weights") or m.get("format") or "bf16"
        ins = sum((d or {}).get("insns", 0) for d in (c["decode_linear"], c["decode_rest"])) if c else None
        note = (f"unavailable: {m['unavailable']}" if m.get("unavailable") else
                f"ggml {_so(c.get('backend'))} counted, {_so(m.get('backend'))} measured"
                if mode in LLAMACPP_MODES and c else
                f"ggml {_so(m.get('backend'))} measured" if mode in LLAMACPP_MODES else
                "AOTInductor package, rvv-generate (C++, no Python)" if mode in PACKAGE_MODES else
                "RVV kernels, compiled decoder layers" if mode == "layers-int4" else
                "RVV kernels" if mode.startswith("regional") or mode == "whole" else "ATen")
        if m.get("gguf_sha256") and not m.get("unavailable"):  # a llama-quantize file: which one, which types
            note += (f"; llama-quantize file sha256 {m['gguf_sha256'][:12]} ("
                     + ", ".join(f"{n} {t}" for t, n in sorted(m.get("linear_types", {}).items())) + " Linears)")
        if c is None and not m.get("unavailable"):
            note += ("; not counted (counted with --full or --count-modes ...,whole)" if mode == "whole"
                     else "; not counted")
        L.append(f"  {mode:15} {c.get('threads', 1) if c else '-':>3} {fmt:>8} {_fmt_n(weight_bytes_per_token(m, 1)):>12} "
                 f"{_fmt_n(ins):>10} {_fmt_n(_decode_dram_bytes(c) if c else None):>10} "
                 + " ".join(f"{_f(c.get('est_decode_tok_s' + k) if c else None, 3) or '-':>14}" for k, _, _ in cols)
                 + f"  {note}")
    L.append(f"  HEADLINE: the last column, {cols[-1][2][:cols[-1][2].index(' = ')]} (fitted to llama.cpp + IME's "
             "decode: the fit that flatters these estimates least); the DRAM-bound fit is the bandwidth the "
             "published BF16 decodes imply; the peak column assumes the LPDDR4X peak, which no board program has been "
             "shown to reach.")
    L.append(_calibration_line(rep))
    return L


def _eager_short_prompt(rep: dict, p: int) -> str:
    """Eager's short counted prompt, the baseline users have without this project: its rate
    per prompt token and what a p-token prompt would take at that rate."""
    c = next((c for mode, _, c in _mode_rows(rep) if mode == "eager" and c and c.get("est_prefill_tok_s")), None)
    if not c:
        return ""
    col = _bw_columns(rep)[-1]
    rate = c["est_prefill_tok_s" + col[0]]
    return (f" Eager's {c['prompt']}-token prompt, counted: {rate:.2f} prompt tok/s ({col[1]} GB/s); at that rate a "
            f"{p}-token prompt would take ~{p / rate:.0f} s (an extrapolation, not a count: the short prompt computes "
            "lm_head on every token, the long one spends more on attention).")


def _prompt_table(rep: dict) -> list[str]:
    """The long prompt (time to first token), one row per mode and thread count."""
    rows = [(mode, m, c) for mode, m, c in _mode_rows(rep) if c and c.get("long_prompt")]
    p = rep["count_spec"].get("count_prefill")
    if not p:
        return []
    cols = _bw_columns(rep)
    runs = rep["count_spec"].get("runs") or []
    how = (f"counted at {runs[0]['layers']} and {runs[1]['layers']} layers and extrapolated, the drivers' too; "
           if len(runs) == 2 else "")
    L = [f"Time to first token, one {p}-token prompt at batch 1 (ESTIMATED K1, not measured; the whole prompt in one "
         f"step, lm_head for its last token only; {how}counted with the same plugin, every thread; "
         "thr = threads counted). "
         "Prompt tok/s and TTFT (s) per bandwidth column:",
         f"  {'mode':15} {'thr':>3} {'insns/tok':>10} {'DRAM B/tok':>10} "
         + " ".join(f"{c[1] + ' tok/s':>15} {'TTFT s':>7}" for c in cols)]
    for mode, m, c in rows:
        ins = sum((d or {}).get("insns", 0) for d in (c["prompt_linear"], c["prompt_rest"]))
        dram = sum((d or {}).get(k, 0) for d in (c["prompt_linear"], c["prompt_rest"])
                   for k in ("dram_read_bytes", "dram_write_bytes"))
        L.append(f"  {mode:15} {c['threads']:3d} {_fmt_n(ins):>10} {_fmt_n(dram):>10} "
                 + " ".join(f"{c['est_prompt_tok_s' + k]:15.2f} {p / c['est_prompt_tok_s' + k]:7.2f}"
                            for k, _, _ in cols))
    have = {mode for mode, _, _ in rows}
    missing = [mode if mode not in have else f"{mode} at {c['threads']} threads" for mode, m, c in _mode_rows(rep)
               if not (c and c.get("long_prompt")) and not m.get("unavailable") and mode not in ("eager", "whole")]
    if missing:
        L.append(f"  not counted: {', '.join(sorted(set(missing)))} (llama.cpp BF16: no RVV kernel in Debian's ggml, "
                 "~12 instructions per weight; or --count-prefill 0 / not in the counting pass)")
    L.append("  eager and whole-model: not counted (ATen's BF16 prompt, ~25 G instructions per token at 1.5B "
             "dimensions; the whole-model graph runs its prompt eagerly)." + _eager_short_prompt(rep, p))
    if any(mode == "layers-int4" for mode, _, _ in rows):
        L.append("  layers-int4: counted as a whole, after uncounted runs of the prompt until one compiles nothing (a "
                 "new prompt length and a new cache compile its layer regions, once each, as in a server); no "
                 "Linear/rest split.")
    return L


def _so(path: str | None) -> str:
    return path.rsplit("/", 1)[-1] if path else "-"


def _ceilings(rep: dict) -> list[str]:
    k = rep["k1_model"]
    L = []
    for key, bw in (("bandwidth_bound_tok_s", k["dram_bytes_s"]),
                    ("bandwidth_bound_tok_s_achieved", k["dram_achieved_bytes_s"])):
        if rep.get(key):
            bb = ", ".join(f"batch {b}: {v:.2f}" for b, v in rep[key].items())
            L.append(f"  Bandwidth bound (all BF16 parameters streamed once per step at {bw / 1e9:.2f} GB/s): "
                     f"{bb} tok/s")
    L.append("  Board numbers to beat (measured on the BPI-F3, Qwen2.5-1.5B): "
             + "; ".join(f"{n} {v:.2f} tok/s" for n, v in rep["board_numbers_tok_s"]))
    return L


def render(rep: dict) -> str:
    """The report as text: one block per section, separated by blank lines."""
    sections = [_header, _compile_and_memory, _agreement, _routing, _wall_times]
    lines: list[str] = []
    for section in sections:
        lines += section(rep) + [""]
    lines += _counted_work(rep) + _ceilings(rep) + [""] + _side_by_side(rep)
    prompt = _prompt_table(rep)
    if prompt:
        lines += [""] + prompt
    return "\n".join(lines) + "\n"


def _plot(out: Path, rep: dict) -> None:
    import matplotlib  # lazy: optional (no plot without it), loads numpy; this module must import without it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after use("Agg"), which must precede it

    modes = rep["modes"]
    names = list(modes)
    fig, ax = plt.subplots(2, 3, figsize=(17, 8))
    ax[0][0].bar(names, [modes[m]["compile_s"] for m in names], color="tab:orange")
    ax[0][0].set_title("compile wall time, s (emulated); above a bar: artifacts", fontsize=10)
    for i, m in enumerate(names):
        # Only modes that compiled something: a row of "0" labels at the axis would overlap.
        if modes[m]["artifacts"] or modes[m]["compile_s"]:
            ax[0][0].annotate(f"{modes[m]['artifacts'] or 0}", (i, modes[m]["compile_s"]), ha="center",
                              va="bottom", fontsize=8)
    xs0 = range(len(names))
    mem = [(modes[m].get("rss_over_empty_kib") or modes[m].get("driver_rss_peak_kib") or 0) / 1024 for m in names]
    wbt = [(weight_bytes_per_token(modes[m], 1) or 0) / 2**20 for m in names]
    ax[0][1].bar([x - 0.2 for x in xs0], mem, 0.4, color="tab:blue",
                 label="peak RSS - empty worker (llama.cpp: driver's peak)")
    ax[0][1].bar([x + 0.2 for x in xs0], wbt, 0.4, color="tab:green", label="Linear weight bytes per token")
    ax[0][1].set_xticks(list(xs0), names)
    ax[0][1].set_title("memory, MiB")
    _headroom(ax[0][1], mem + wbt)
    ax[0][1].legend(fontsize=8, loc="upper left")
    for a in ax[0][:2]:
        _slant(a)
    counted_modes = [m for m in names if modes[m]["counts"]]
    if counted_modes:
        b0 = {m: modes[m]["counts"][0] for m in counted_modes}
        lin = [(b0[m]["decode_linear"] or {}).get("insns", 0) for m in counted_modes]
        rest = [b0[m]["decode_rest"]["insns"] for m in counted_modes]
        # Side by side, not stacked: on a log axis a stacked bar hides the smaller part.
        xs = range(len(counted_modes))
        ax[1][0].bar([x - 0.2 for x in xs], [v or float("nan") for v in lin], 0.4, label="Linear", color="tab:red")
        ax[1][0].bar([x + 0.2 for x in xs], rest, 0.4, label="rest (whole-model: all)", color="tab:gray")
        ax[1][0].set_xticks(list(xs), counted_modes)
        ax[1][0].set_yscale("log")
        ax[1][0].set_title(f"executed instructions per decode token, batch {b0[counted_modes[0]]['batch']}")
        ax[1][0].legend(fontsize=8)
        _slant(ax[1][0])
        bs = sorted({c["batch"] for m in counted_modes for c in modes[m]["counts"]})
        colors = [f"C{j % 10}" for j in range(len(counted_modes))]
        if len(bs) == 1:
            # One batch: the modes on the axis, as in the other panels; the legend keeps the board lines.
            ax[1][1].bar(list(xs), [modes[m]["counts"][0]["est_decode_tok_s"] for m in counted_modes],
                         0.8, color=colors)
            ax[1][1].set_xticks(list(xs), counted_modes)
            _slant(ax[1][1])
        else:
            width = 0.8 / len(counted_modes)
            for j, m in enumerate(counted_modes):
                ax[1][1].bar([bs.index(c["batch"]) + j * width for c in modes[m]["counts"]],
                             [c["est_decode_tok_s"] for c in modes[m]["counts"]], width, color=colors[j],
                             label=f"{m} (ESTIMATE)")
            ax[1][1].set_xticks([i + 0.4 - width / 2 for i in range(len(bs))], [f"batch {b}" for b in bs])
        styles = ["--", ":", "-.", (0, (5, 1))]
        boards = rep["board_numbers_tok_s"] if _boards_model(rep) else []
        for i, (n, v) in enumerate(boards):
            ax[1][1].axhline(v, ls=styles[i % len(styles)], lw=0.9, color="black", label=f"board: {n} ({v:.2f})")
        if not boards:  # an entry without a mark, so it stacks with the modes' legend instead of covering it
            ax[1][1].plot([], [], " ", label="board numbers: Qwen2.5-1.5B only, not drawn for this model")
        # Room above the bars for the legend's rows (the modes', at several batches, and the boards').
        entries = len(ax[1][1].get_legend_handles_labels()[1])
        ncol = 2 if entries > 6 else 1
        rows = -(-entries // ncol)
        _headroom(ax[1][1], [c["est_decode_tok_s"] for m in counted_modes for c in modes[m]["counts"]]
                  + [v for _, v in boards], room=max(1.45, min(3.0, 1 / (0.95 - 0.055 * rows))))
        batch = f" (batch {bs[0]})" if len(bs) == 1 else ""
        gbs = rep["k1_model"]["dram_achieved_bytes_s"] / 1e9
        ax[1][1].set_title(f"ESTIMATED K1 decode tok/s{batch}, DRAM {gbs:.2f} GB/s (calibrated; a model)", fontsize=10)
        ax[1][1].legend(fontsize=6, loc="upper left", ncol=ncol)
    else:
        for a in ax[1][:2]:
            _empty(a, "no instruction counts in this run")
    _plot_prompt(ax[0][2], ax[1][2], rep)
    fig.suptitle(f"rvv_inductor demo: {rep['spec']['source']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "report.png", dpi=110)
    plt.close(fig)


def _plot_prompt(ax_ttft, ax_rate, rep: dict) -> None:
    """Time to first token and prompt rate of the long prompt, per mode and thread count."""
    rows = [(f"{mode} {c['threads']}t", c) for mode, _, c in _mode_rows(rep) if c and c.get("long_prompt")]
    if not rows:
        for a in (ax_ttft, ax_rate):
            _empty(a, "no long prompt counted in this run")
        return
    cols = _bw_columns(rep)
    xs = range(len(rows))
    width = 0.8 / len(cols)
    for j, (key, short, _) in enumerate(cols):
        pos = [x + (j - (len(cols) - 1) / 2) * width for x in xs]
        ax_ttft.bar(pos, [c["long_prompt"] / c["est_prompt_tok_s" + key] for _, c in rows], width,
                    label=f"DRAM {short} GB/s")
        ax_rate.bar(pos, [c["est_prompt_tok_s" + key] for _, c in rows], width, label=f"DRAM {short} GB/s")
    p = rows[0][1]["long_prompt"]
    for a, title in ((ax_ttft, f"ESTIMATED K1 time to first token, {p}-token prompt, s"),
                     (ax_rate, f"ESTIMATED K1 prompt tok/s ({p} tokens)")):
        a.set_xticks(list(xs), [n for n, _ in rows])
        _slant(a)
        a.set_title(title + " (a model)", fontsize=10)
        _headroom(a, [b.get_height() for b in a.patches])
        a.legend(fontsize=7, loc="upper left")


def _boards_model(rep: dict) -> bool:
    """The board numbers were measured on Qwen2.5-1.5B: a line of them beside another model's bars misleads."""
    cfg, ref = rep["spec"].get("config") or {}, models.CONFIGS["qwen2.5-1.5b"]
    return all(cfg.get(k) == ref[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size"))


def _empty(ax, why: str) -> None:
    """A panel without data says why, with no axes to read numbers from."""
    ax.text(0.5, 0.5, why, ha="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _slant(ax) -> None:
    """Tick labels at 30 degrees, each ending under its bar: centred ones overlap their neighbours."""
    for label in ax.get_xticklabels():
        label.set(rotation=30, ha="right", rotation_mode="anchor", fontsize=7)


def _headroom(ax, values, room: float = 1.45) -> None:
    """Raise a linear axis' top so a legend in the upper corner sits above the tallest bar."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if finite and max(finite) > 0:
        ax.set_ylim(top=max(finite) * room)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--refresh":
        sys.exit("usage: python3 -m rvv_inductor.demo.report --refresh DIR   (re-derive counts and estimates of "
                 "an existing report, torch-free)")
    sys.exit(refresh(Path(sys.argv[2])))
