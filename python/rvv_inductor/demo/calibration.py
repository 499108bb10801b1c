"""The DRAM bandwidth a K1 program actually reaches, fitted to published board numbers.

The K1's one LPDDR4X channel peaks at 10.66 GB/s (``policy.K1_DRAM_BYTES_PER_S``), but
every decode program measured on the board for these models streams its weights at
~3.3-4.4 GB/s. An estimate at the peak is a ceiling, not a prediction. This module keeps
the published numbers, fits the one free parameter of the estimate -- the achieved DRAM
bandwidth -- to one of them, and states how well that single number reproduces the
others.

The model is the decode-time part of ``demo/estimate.py`` at batch 1: a token takes at
least ``weight bytes / bandwidth``. Two fits of the one parameter are kept, each with its
residuals on every published row:

* **conservative** (the headline, ``policy.K1_DRAM_ACHIEVED_BYTES_PER_S``): fitted to one
  program, llama.cpp + IME's Qwen2.5-1.5B Q4_0 decode,
      bandwidth = weight bytes per token x published tokens/s.
  It predicts every BF16 board number ~20% too slow: IME's decode on 4 cores is not purely
  DRAM-bound (the model cannot count IME's compute), so this fit understates the channel
  and, applied to our DRAM-bound kernels, flatters them least;
* **DRAM-bound** (``policy.K1_DRAM_FIT_BYTES_PER_S``): fitted to the programs the model
  shows DRAM-bound, the BF16 decodes (``DRAM_BOUND``): kernels of our BF16 design, whose
  counted compute on 8 cores is under half their streaming time even at the 10.66 GB/s
  peak (bench/results/demo-qwen2.5-1.5b). Least squares on log(predicted / published):
  the geometric mean of their implied bandwidths.

The compute side (cycles from counted instructions) is checked separately against a
compute-bound published number, a prompt (prefill) rate: ``COMPUTE_CHECKS``.

Torch-free: the demo report, ``bench/`` and the host tests read it.
"""
from __future__ import annotations

from dataclasses import dataclass

import math

from ..policy import K1_CLOCK_HZ, K1_DRAM_ACHIEVED_BYTES_PER_S

# Largest relative error of the fitted model on the other published numbers that we still
# call a calibration (issue "benchmark truth").
TOLERANCE = 0.30


@dataclass(frozen=True)
class BoardNumber:
    key: str               # short id
    program: str
    model: str
    fmt: str
    tok_s: float           # published single-stream decode speed on a K1 board
    weight_bytes: float    # weight bytes streamed per decoded token (how: see `bytes_from`)
    bytes_from: str
    source: str


def _linear_params(hidden: int, inter: int, layers: int, heads: int, kv_heads: int, head_dim: int,
                   vocab: int) -> int:
    """Weights of every Linear a decode token reads (q, k, v, o, gate, up, down per layer,
    plus lm_head; a tied embedding is only gathered, one row per token)."""
    per_layer = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2 + 3 * hidden * inter
    return layers * per_layer + vocab * hidden


# Parameters of the Qwen2.5 models (their config.json): hidden, intermediate, layers,
# heads, KV heads, head dim, vocab.
QWEN25_1_5B = _linear_params(1536, 8960, 28, 12, 2, 128, 151936)   # 1.544e9
QWEN25_0_5B = _linear_params(896, 4864, 24, 14, 2, 64, 151936)     # 0.475e9
BF16_BYTES = 2.0
Q8_BYTES = 34 / 32      # Q8_0 block: 32 int8 + an FP16 scale
Q4_0_BYTES = 18 / 32    # Q4_0 block: 32 nibbles + an FP16 scale

PUBLISHED = (
    BoardNumber("llamacpp-q4_0-1.5b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen2.5-1.5B", "Q4_0", 3.83,
                QWEN25_1_5B * Q4_0_BYTES, "config dims, every Linear and lm_head in Q4_0",
                "SpacemiT llama.cpp IME backend (seed brief, 'Numbers to beat')"),
    BoardNumber("llamacpp-q4_0-0.5b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen2.5-0.5B", "Q4_0", 10.03,
                QWEN25_0_5B * Q4_0_BYTES, "config dims, every Linear and lm_head in Q4_0",
                "SpacemiT llama.cpp IME backend (seed brief, 'Numbers to beat')"),
    BoardNumber("seed-regional-bf16", "seed prototype, regional Linear compile", "Qwen2.5-1.5B", "BF16", 1.320,
                QWEN25_1_5B * BF16_BYTES, "config dims, BF16", "seed write-up (../shared/seed)"),
    BoardNumber("seed-whole-bf16", "seed prototype, whole-model graph", "Qwen2.5-1.5B", "BF16", 1.405,
                QWEN25_1_5B * BF16_BYTES, "config dims, BF16", "seed write-up (../shared/seed)"),
    BoardNumber("sgl-bf16", "sgl-kernel hand-written RVV (711.34 ms/token)", "Qwen2.5-1.5B", "BF16",
                1000 / 711.34, QWEN25_1_5B * BF16_BYTES, "config dims, BF16", "SGLang PR #22193"),
    BoardNumber("sgl-w8a8", "sgl-kernel hand-written RVV W8A8 (483.16 ms/token)", "Qwen2.5-1.5B", "W8A8",
                1000 / 483.16, QWEN25_1_5B * 1.0, "config dims, int8 (per-channel scales ignored)",
                "SGLang PR #22193"),
    BoardNumber("llamacpp-q4_0-qwen3-0.6b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen3-0.6B", "Q4_0", 11.73,
                0.36e9, "k1-numbers-and-peers.md table (~0.36 GB)", "SpacemiT llama.cpp IME backend"),
    BoardNumber("llamacpp-q4_1-qwen3.5-2b", "llama.cpp + SpacemiT IME, 4 threads", "Qwen3.5-2B", "Q4_1", 3.07,
                1.28e9, "k1-numbers-and-peers.md table (~1.28 GB)", "SpacemiT llama.cpp IME backend"),
)

# The reference the constant in policy.py is fitted to: the first choice, llama.cpp
# on the same model dimensions (Qwen2.5-1.5B) in the format our INT4 path competes with.
REFERENCE = "llamacpp-q4_0-1.5b"
# The published programs the model shows DRAM-bound (module docstring): the second fit.
DRAM_BOUND = ("seed-regional-bf16", "seed-whole-bf16", "sgl-bf16")


def by_key(key: str) -> BoardNumber:
    for b in PUBLISHED:
        if b.key == key:
            return b
    raise KeyError(f"no published board number {key!r}; known: {', '.join(b.key for b in PUBLISHED)}")


def fit_bandwidth(reference: str = REFERENCE) -> float:
    """Achieved DRAM bytes/s that makes the model reproduce ``reference`` exactly."""
    b = by_key(reference)
    return b.weight_bytes * b.tok_s


def fit_bandwidth_dram_bound(keys: tuple[str, ...] = DRAM_BOUND) -> float:
    """Bandwidth minimising the squared log errors over ``keys``: the geometric mean of
    their implied bandwidths."""
    if not keys:
        raise ValueError("fit_bandwidth_dram_bound: no programs to fit")
    return math.exp(sum(math.log(by_key(k).weight_bytes * by_key(k).tok_s) for k in keys) / len(keys))


def predict_tok_s(weight_bytes: float, bandwidth: float) -> float:
    return bandwidth / weight_bytes


def errors(bandwidth: float) -> list[dict]:
    """Every published number with the model's prediction at ``bandwidth`` and the relative
    error (prediction / published - 1)."""
    out = []
    for b in PUBLISHED:
        pred = predict_tok_s(b.weight_bytes, bandwidth)
        out.append({"key": b.key, "program": b.program, "model": b.model, "format": b.fmt,
                    "published_tok_s": b.tok_s, "weight_bytes": b.weight_bytes,
                    "implied_bytes_per_s": b.weight_bytes * b.tok_s,
                    "predicted_tok_s": pred, "error": pred / b.tok_s - 1})
    return out


def summary(bandwidth: float = K1_DRAM_ACHIEVED_BYTES_PER_S, reference: str | tuple[str, ...] = REFERENCE) -> dict:
    """The rows at ``bandwidth``, the worst error on the rows not fitted (``reference``:
    one key or the keys of a multi-program fit) and the RMS of the log residuals over all."""
    fitted = (reference,) if isinstance(reference, str) else tuple(reference)
    rows = errors(bandwidth)
    others = [r for r in rows if r["key"] not in fitted]
    worst = max(others, key=lambda r: abs(r["error"]))
    rms = math.sqrt(sum(math.log1p(r["error"]) ** 2 for r in rows) / len(rows))
    return {"bandwidth": bandwidth, "reference": reference if isinstance(reference, str) else ",".join(fitted),
            "rows": rows, "max_abs_error": abs(worst["error"]), "worst": worst["key"], "rms_log_error": rms,
            "within_tolerance": abs(worst["error"]) <= TOLERANCE, "tolerance": TOLERANCE}


def fits() -> dict:
    """Both bandwidth fits, each with its residuals: {"conservative": summary, "dram_bound": summary}."""
    return {"conservative": summary(fit_bandwidth(), REFERENCE),
            "dram_bound": summary(fit_bandwidth_dram_bound(), DRAM_BOUND)}


def markdown(s: dict | None = None) -> str:
    s = s or summary()
    lines = [f"Achieved DRAM bandwidth fitted to `{s['reference']}`: **{s['bandwidth'] / 1e9:.2f} GB/s** "
             f"(peak 10.66 GB/s). Worst error on the other published numbers: "
             f"{s['max_abs_error']:+.0%} ({s['worst']}); "
             + ("within" if s["within_tolerance"] else "OUTSIDE") + f" the +-{s['tolerance']:.0%} the model claims.",
             "", "| program | model | format | published tok/s | weight GB/token | implied GB/s | model tok/s | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in s["rows"]:
        ref = " (reference)" if r["key"] == s["reference"] else ""
        lines.append(f"| {r['program']}{ref} | {r['model']} | {r['format']} | {r['published_tok_s']:.2f} | "
                     f"{r['weight_bytes'] / 1e9:.3f} | {r['implied_bytes_per_s'] / 1e9:.2f} | "
                     f"{r['predicted_tok_s']:.2f} | {r['error']:+.0%} |")
    return "\n".join(lines)


# --- the compute side ----------------------------------------------------------------
# A compute-bound published number (a prompt rate) beside the same workload counted here:
# Debian's llama.cpp (the code path the publication names), the rvvcount plugin at VLEN 256,
# counted at 1 and 2 decoder layers and extrapolated (bench/compute_calibration.sh,
# raw counts in bench/results/calibration/). Per thread count: the whole prompt's serial
# cycles (the opening thread beyond the median other thread), parallel cycles (the busiest
# other thread) and DRAM bytes (all threads). tests/python/glue/test_calibration.py
# recomputes these from the raw counts.
@dataclass(frozen=True)
class ComputeNumber:
    key: str
    program: str
    model: str
    fmt: str
    prompt: int
    tok_s: float
    source: str
    counted: dict          # threads -> {"serial_cycles", "parallel_cycles", "dram_bytes"} of the whole prompt


COMPUTE_PUBLISHED: tuple[ComputeNumber, ...] = (
    # llama-bench on the board; its thread count is not published (llama-bench's default is
    # the core count, 8 on the K1). Debian's build has this vec_dot path (the repack GEMM,
    # 16.01 tok/s in the same PR, needs Zvfh, which Debian's RVV variant is built without).
    ComputeNumber("llamacpp-q2_k-tinyllama-pp512", "llama.cpp RVV vec_dot (no IME, no repack)", "TinyLlama-1.1B",
                  "Q2_K", 512, 7.47, "llama.cpp PR #19121, 'Vec Dot' column",
                  {8: {"serial_cycles": -8.29059e+08, "parallel_cycles": 9.28453e+10, "dram_bytes": 1.84364e+10},
                   4: {"serial_cycles": 0.0, "parallel_cycles": 1.87472e+11, "dram_bytes": 1.75671e+10}}),
)


# Published compute-bound board numbers whose code path Debian's llama.cpp lacks, so no
# like-for-like count exists here: (program, model, format, pp, tok/s, source, why).
COMPUTE_NOT_COUNTABLE: tuple[tuple[str, str, str, int, float, str, str], ...] = (
    ("llama.cpp RVV sgemm (no IME)", "TinyLlama-1.1B", "F16", 512, 13.37, "llama.cpp PR #18199",
     "Debian's RVV variant is built without Zfh/Zvfh: no vector F16 kernel (14 instructions per weight, counted)"),
    ("llama.cpp RVV repack GEMM (no IME)", "TinyLlama-1.1B", "Q2_K", 512, 16.01, "llama.cpp PR #19121",
     "the CPU_REPACK kernels need Zvfh, which Debian's RVV variant lacks (each tensor logs it)"),
)


def compute_checks(bandwidth: float = K1_DRAM_ACHIEVED_BYTES_PER_S,
                   numbers: tuple[ComputeNumber, ...] | None = None) -> list[dict]:
    """Each compute-bound published number (``COMPUTE_PUBLISHED`` unless ``numbers``)
    against the estimate of the same workload at every counted thread count: predicted
    tok/s and the error (prediction / published - 1)."""
    out = []
    for c in COMPUTE_PUBLISHED if numbers is None else numbers:
        for threads, k in sorted(c.counted.items(), reverse=True):
            s = max(0.0, k["serial_cycles"]) / K1_CLOCK_HZ + max(k["parallel_cycles"] / K1_CLOCK_HZ,
                                                                 k["dram_bytes"] / bandwidth)
            pred = c.prompt / s
            out.append({"key": c.key, "program": c.program, "model": c.model, "format": c.fmt, "prompt": c.prompt,
                        "published_tok_s": c.tok_s, "source": c.source, "threads": threads,
                        "predicted_tok_s": pred, "error": pred / c.tok_s - 1,
                        "bound": "compute" if k["parallel_cycles"] / K1_CLOCK_HZ >= k["dram_bytes"] / bandwidth
                        else "memory"})
    return out
