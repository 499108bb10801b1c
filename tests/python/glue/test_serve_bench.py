"""bench/serve_bench.py's arithmetic (host python, no emulation, no timing): the K1
estimate of a counted serving window from the plugin's per-region, per-thread counters,
checked against an independent recomputation with the K1 constants written out here."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sb():
    return _load("serve_bench")


def _thread(insns, vec, vsetvl, vbeats):
    return {"insns": insns, "vector_insns": vec, "vsetvl": vsetvl, "vbeats": vbeats}


def _region(threads, dram_r, dram_w):
    tot = {k: sum(t[k] for t in threads) for k in ("insns", "vector_insns", "vsetvl", "vbeats")}
    return dict(tot, dram_read_bytes=dram_r, dram_write_bytes=dram_w, threads_active=len(threads),
                max_thread={"insns": max(t["insns"] for t in threads)},
                threads={str(i): t for i, t in enumerate(threads)})


# The K1 numbers, written out (policy.py: 1.6 GHz, 8 cores, CPI 1, 10.66 GB/s peak, the
# achieved bandwidth fitted in calibration.py).
CLOCK, CORES, PEAK, ACHIEVED = 1.6e9, 8, 10.66e9, 3.325e9


def _expected(threads, dram, tokens, bw):
    cyc = [(t["insns"] - t["vector_insns"] + t["vsetvl"]) * 1.0 + t["vbeats"] for t in threads if t["insns"]]
    compute = max(max(cyc), sum(cyc) / CORES) / CLOCK
    return tokens / max(compute, dram / bw)


def test_constants_are_the_projects(sb):
    assert (sb.policy.K1_CLOCK_HZ, sb.policy.K1_CORES, sb.policy.K1_DRAM_BYTES_PER_S) == (CLOCK, CORES, PEAK)
    assert sb.policy.K1_DRAM_ACHIEVED_BYTES_PER_S == ACHIEVED
    assert sb.policy.CPI_SCALAR == 1.0


def test_compute_bound_window_busiest_thread(sb):
    # One busy thread (scalar Python work), one light one: compute = the busy thread.
    th = [_thread(3_000_000_000, 100_000_000, 1_000_000, 250_000_000), _thread(50_000_000, 0, 0, 0)]
    reg = _region(th, 400_000_000, 10_000_000)
    e = sb.window_estimate(reg, 16)
    busy = (3_000_000_000 - 100_000_000 + 1_000_000) + 250_000_000
    assert e["max_thread_cycles"] == pytest.approx(busy)
    assert e["compute_s"] == pytest.approx(busy / CLOCK)
    assert e["bound"] == "compute"
    assert e["est_tok_s"] == pytest.approx(_expected(th, 410_000_000, 16, ACHIEVED))
    assert e["est_tok_s"] == pytest.approx(16 / (busy / CLOCK))
    assert e["insns_per_token"] == pytest.approx((3_000_000_000 + 50_000_000) / 16)
    assert e["max_thread_insns_per_token"] == pytest.approx(3_000_000_000 / 16)
    assert e["dram_bytes_per_token"] == pytest.approx(410_000_000 / 16)


def test_memory_bound_and_even_split(sb):
    # Ten equal threads: all cycles / 8 cores exceeds one thread's; DRAM dominates.
    th = [_thread(100_000_000, 0, 0, 0) for _ in range(10)]
    reg = _region(th, 6_000_000_000, 0)
    e = sb.window_estimate(reg, 128)
    assert e["compute_s"] == pytest.approx(1e9 / CORES / CLOCK)
    assert e["bound"] == "memory"
    assert e["memory_s"] == pytest.approx(6e9 / ACHIEVED)
    assert e["est_tok_s"] == pytest.approx(128 * ACHIEVED / 6e9)
    assert e["est_tok_s_peak_bw"] == pytest.approx(_expected(th, 6e9, 128, PEAK))


def test_summarize_levels_and_ratio(sb, tmp_path):
    plugin = {"regions": {}}
    levels = {}
    for c in (1, 2, 4, 8):
        th = [_thread(1_000_000_000 + 200_000_000 * c, 10_000_000 * c, 1000, 40_000_000 * c)]
        plugin["regions"][str(c)] = _region(th, 50_000_000 + 5_000_000 * c, 0)
        levels[str(c)] = {"tokens": 16 * c, "requests": c, "emulated_wall_s": 1.0}
    # Through JSON, as the report reads it.
    plugin = json.loads(json.dumps(plugin))
    s = sb.summarize(plugin, levels)
    exp = {c: _expected([plugin["regions"][str(c)]["threads"]["0"]],
                        plugin["regions"][str(c)]["dram_read_bytes"], 16 * c, ACHIEVED) for c in (1, 2, 4, 8)}
    for c in (1, 2, 4, 8):
        assert s["levels"][str(c)]["est_tok_s"] == pytest.approx(exp[c])
        assert s["levels"][str(c)]["requests"] == c
    assert s["ratio_levels"] == [1, 8]
    assert s["ratio_first_last"] == pytest.approx(exp[8] / exp[1])


def test_time_to_first_token_windows(sb):
    """Region 8 + c holds the first-token window of level c: c requests, one token each;
    its estimated time is the last request's time to first token (c tokens / est tok/s)."""
    plugin = {"regions": {}}
    levels = {}
    for c in (1, 4):
        plugin["regions"][str(c)] = _region([_thread(2e9, 1e7, 1000, 4e7)], 6e7, 0)
        # the first tokens: compute-bound at c = 1 (2e8 cycles, 1e6 DRAM bytes), DRAM-bound at c = 4
        first = [_thread(2e8 * c, 0, 0, 0)] * 2
        plugin["regions"][str(sb.TTFT_REGION_BASE + c)] = _region(first, 1e6 if c == 1 else 4e9, 0)
        levels[str(c)] = {"tokens": 16 * c, "requests": c, "emulated_wall_s": 1.0}
    s = sb.summarize(json.loads(json.dumps(plugin)), levels)
    for c in (1, 4):
        dram = 1e6 if c == 1 else 4e9
        want = max(max(2e8 * c, 2 * 2e8 * c / CORES) / CLOCK, dram / ACHIEVED)
        assert s["levels"][str(c)]["est_ttft_s"] == pytest.approx(want)
        assert s["levels"][str(c)]["est_ttft_s_peak_bw"] == pytest.approx(max(2e8 * c / CLOCK, dram / PEAK))
    assert s["levels"]["1"]["ttft_bound"] == "compute" and s["levels"]["4"]["ttft_bound"] == "memory"
    # A run without first-token windows (older results) has no TTFT, and says so in the report.
    del plugin["regions"][str(sb.TTFT_REGION_BASE + 1)]
    assert "est_ttft_s" not in sb.summarize(plugin, levels)["levels"]["1"]


def test_missing_region_is_an_error(sb):
    with pytest.raises(ValueError, match="no region 4"):
        sb.summarize({"regions": {}}, {"4": {"tokens": 64}})


def _result(sb, fmt, servers):
    lv = {"tokens": 16, "requests": 1, "emulated_wall_s": 1.0}
    th = [_thread(100_000_000, 0, 0, 0)]
    plugin = {"regions": {"1": _region(th, 10_000_000, 0)}}
    return {"command": "bench/serve_bench.py", "source": "x", "qemu": "q", "plugin": "p", "format": fmt,
            "model_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256},
            "config_name": "tiny", "linear_bf16_bytes": 4 * 2**20,
            "gguf": {"file_bytes": 2**20, "linear_weight_bytes": 2**20 - 4096, "format": fmt},
            "prompt_tokens": 32, "new_tokens": 16, "threads": 1,
            "calibration": {"bandwidth": ACHIEVED, "peak": PEAK, "reference": "r", "clock_hz": CLOCK, "cores": CORES},
            "servers": {k: dict({"argv": ["x"], "emulated_load_s": 1, "emulated_total_s": 2, "plugin_notes": {}},
                                **extra, **sb.summarize(plugin, {"1": lv})) for k, extra in servers.items()}}


def test_report_names_the_format_and_ggml_variant(sb):
    # A quantized run: both servers load the one GGUF; the report says so, with its sizes,
    # and names the ggml CPU variant llama-server loaded.
    md = sb.markdown(_result(sb, "q4_0", {"rvv-cb": {}, "llama": {"ggml_cpu": ["libggml-cpu-riscv64_v.so"]}}))
    assert "written as a Q4_0 GGUF (1.0 MiB file" in md and "against 4.0 MiB in BF16" in md
    assert "(the Q4_0 GGUF, INT4, RVV Linear)" in md and "the same weights as Q4_0 GGUF" in md
    assert "ggml CPU variant loaded: libggml-cpu-riscv64_v.so" in md
    md = sb.markdown(_result(sb, "bf16", {"rvv-cb": {}, "llama": {"ggml_cpu": []}}))
    assert "BF16; Linear weights 4.0 MiB per decode step" in md and "(BF16, RVV Linear)" in md
    assert "ggml CPU variant loaded: none found" in md


# ----------------------------------------------------------------------------- --workload mixed
@pytest.fixture(scope="module")
def tl():
    return _load("serve_timeline")


def test_step_features(tl):
    # two requests: a 4-token prefill chunk after 6 cached tokens, a decode token after 100
    f = tl.step_features([["a", 4, 6, False], ["b", 1, 100, True]])
    # attention pairs: query i of the chunk sees 6 + i keys (i = 1..4): 7+8+9+10; decode: 101
    assert f == {"one": 1.0, "tokens": 5.0, "seqs": 2.0, "attn_pairs": 34.0 + 101.0}


def _steps(coef, feats):
    return [{"features": dict(zip(("one", "tokens", "seqs", "attn_pairs"), f)),
             "y": sum(c * x for c, x in zip(coef, f))} for f in feats]


def test_fit_recovers_a_linear_cost(tl):
    feats = [(1, t, s, a) for t, s, a in [(1, 1, 50), (8, 8, 900), (300, 2, 40000), (4, 4, 4000), (512, 1, 131000),
                                           (2, 2, 700)]]
    steps = _steps((3e-3, 2e-5, 4e-4, 1e-9), feats)
    f = tl.fit(steps, "y")
    for k, want in zip(("one", "tokens", "seqs", "attn_pairs"), (3e-3, 2e-5, 4e-4, 1e-9)):
        assert f["coef"][k] == pytest.approx(want, rel=1e-6)
    assert f["residual_max"] < 1e-9
    # a feature that never varies beside another (sequences == tokens: decode only) still solves
    dec = _steps((1.0, 0.5, 0.0, 0.0), [(1, n, n, 0) for n in (1, 2, 4, 8)])
    g = tl.fit(dec, "y")
    assert tl.predict({"coef": g["coef"]}, {"one": 1, "tokens": 3, "seqs": 3, "attn_pairs": 0}) == pytest.approx(2.5)


def test_step_times_add_layers_from_the_two_fits(tl):
    # per-step compute at depth 1: 1 + 0.1 T; at depth 2: 1.5 + 0.3 T -> one layer 0.5 + 0.2 T
    # DRAM bytes: 100 + 10 T and 160 + 10 T -> one layer 60 bytes
    mk = lambda c0, ct, d0: {"compute_s": {"coef": {"one": c0, "tokens": ct, "seqs": 0, "attn_pairs": 0}},  # noqa: E731
                             "dram_bytes": {"coef": {"one": d0, "tokens": 10, "seqs": 0, "attn_pairs": 0}}}
    fits = {1: mk(1.0, 0.1, 100), 2: mk(1.5, 0.3, 160)}
    step = {"compute_s": 2.0, "dram_bytes": 150.0, "features": {"one": 1, "tokens": 5, "seqs": 1, "attn_pairs": 0}}
    # at depth 4 from a step counted at 2: compute 2 + 2 * (0.5 + 1.0) = 5; DRAM 150 + 2 * 60 = 270 B
    assert tl.step_times([step], fits, 4, 2, bandwidth=100.0) == [pytest.approx(5.0)]
    assert tl.step_times([step], fits, 4, 2, bandwidth=10.0) == [pytest.approx(27.0)]
    assert tl.step_times([step], None, 2, 2, bandwidth=100.0) == [pytest.approx(2.0)]


def test_timeline_latencies(tl):
    """Two requests at c = 2: r1 arrives first and prefills alone (step 17, 2 s), r2 arrives
    during it; step 18 (1 s) prefills r2 and decodes r1, then two decode steps (1 s each)."""
    log = [{"arrival": "r1", "level": "2"},
           {"step": 17, "level": "2", "batch": [["r1", 40, 0, True]]},
           {"arrival": "r2", "level": "2"},
           {"step": 18, "level": "2", "batch": [["r1", 1, 40, True], ["r2", 30, 0, True]]},
           {"step": 19, "level": "2", "batch": [["r1", 1, 41, True], ["r2", 1, 30, True]]},
           {"step": 20, "level": "2", "batch": [["r2", 1, 31, True]]}]
    out = tl.timeline(log, {17: 2.0, 18: 1.0, 19: 1.0, 20: 1.0})["2"]
    # r1: tokens at 2, 3, 4 (arrived at 0): TTFT 2, gaps 1, 1; r2: arrived at 2, tokens 3, 4, 5: TTFT 1
    assert out["tokens"] == 6 and out["requests"] == 2 and out["steps"] == 4
    assert out["seconds"] == pytest.approx(5.0) and out["tok_s"] == pytest.approx(6 / 5.0)
    assert out["ttft_p50"] == pytest.approx(1.0) and out["ttft_p95"] == pytest.approx(2.0)
    assert out["itl_p50"] == pytest.approx(1.0) and out["itl_p95"] == pytest.approx(1.0)


def test_mixed_requests_are_fixed_and_distinct(sb):
    a, b = sb.mixed_requests(2048), sb.mixed_requests(2048, levels=[8])
    assert a[8] == b[8] and 1 not in b  # a subset of levels gets the same requests
    lo, hi = sb.MIXED["prompt"]
    for c, n in sb.MIXED["requests"].items():
        assert len(a[c]) == n
        for ids, new in a[c]:
            assert lo <= len(ids) <= hi and sb.MIXED["new"][0] <= new <= sb.MIXED["new"][1]
            assert min(ids) >= 1 and max(ids) <= 2046
    prompts = [tuple(i) for c in sb.LEVELS for i, _ in a[c]] + [tuple(i) for i, _ in a["warm_up"]]
    assert len(set(prompts)) == len(prompts)


def test_mixed_report_extrapolates_our_steps_and_keeps_llama_counted(sb, tmp_path):
    """Synthetic raw results: our server's steps at depth 1 (the timeline) and 2 (the fit),
    compute exactly 1 + 0.01 T s at depth 1 and 1.5 + 0.02 T at depth 2, so one layer costs
    0.5 + 0.01 T and a step at depth 3 costs 2 + 0.03 T; DRAM far below compute."""
    raw = tmp_path / "raw"
    raw.mkdir()
    meta = {"config_name": "tiny", "format": "q4_0", "gguf": {}, "source": "x", "qemu": "q", "plugin": "p",
            "model_config": {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                             "num_key_value_heads": 2, "vocab_size": 256},
            "command": "bench/serve_bench.py --workload mixed", "emulated_load_s": 1, "emulated_total_s": 2}

    def ours(depth, role, batches, c0, ct):
        log, steps = [{"arrival": "r", "level": "1"}], []
        for i, b in enumerate(batches):
            log.append({"step": 17 + i, "level": "1", "batch": b})
            T = sum(q for _, q, _, _ in b)
            steps.append({"step": 17 + i, "level": "1", "compute_s": c0 + ct * T, "dram_bytes": 1000.0,
                          "insns": 1, "max_thread_insns": 1, "features": sb.serve_timeline.step_features(b)})
        return dict(meta, kind="rvv-cb", threads=2, layers=depth, role=role, mixed=sb.MIXED if role == "timeline" else sb.MIXED_FIT, step_log=log,
                    steps=steps)

    tl_batches = [[["r", 10, 0, True]], [["r", 1, 10, True]], [["r", 1, 11, True]]]
    fit_batches = [[["r", 20, 0, True]], [["r", 1, 20, True]], [["r", 1, 21, True]], [["r", 1, 22, True]]]
    (raw / "rvv-cb-t2-L1.json").write_text(json.dumps(ours(1, "timeline", tl_batches, 1.0, 0.01)))
    (raw / "rvv-cb-t2-L2.json").write_text(json.dumps(ours(2, "fit", fit_batches, 1.5, 0.02)))
    win = {"1": {"est_tok_s": 4.0, "tokens": 8, "est_s": 2.0}}
    (raw / "llama-t2-L1.json").write_text(json.dumps(dict(meta, kind="llama", threads=2, layers=1, role="timeline",
                                                          mixed=sb.MIXED, windows=win)))
    res = sb.mixed_summary(tmp_path, 3)
    lv = res["servers"]["rvv-cb-t2"]["levels"]["L1->3"]["1"]
    t = [2 + 0.03 * 10, 2 + 0.03, 2 + 0.03]
    assert lv["seconds"] == pytest.approx(sum(t)) and lv["tokens"] == 3
    assert lv["ttft_p50"] == pytest.approx(t[0]) and lv["itl_p50"] == pytest.approx(t[1])
    assert res["servers"]["rvv-cb-t2"]["levels"]["L1->1"]["1"]["seconds"] == pytest.approx(1.1 + 1.01 + 1.01)
    assert "L2->3" not in res["servers"]["rvv-cb-t2"]["levels"]  # the fit depth is no timeline
    # llama-server counted at one depth only: shown at that depth, never extrapolated
    assert list(res["servers"]["llama-t2"]["levels"]) == ["L1->1"]
    md = sb.mixed_markdown(res)
    assert f"| rvv-cb | 2 | 1 | 1 | 3 | **{3 / sum(t):.2f}** | {t[0]:.2f} | {t[0]:.2f} | {t[1]:.3f} |" in md
    assert "| llama-t2 | 1 | 1 | 4.00 | - | - |" in md
